//! Karpenter's scheduling-benchmark shapes (`scheduling_benchmark_test.go` and its fake cloud
//! provider): 400 instance types where type i has i+1 vCPU, 2(i+1) GiB and 10(i+1) pods, each
//! with five offerings (spot in zones 1-2, on-demand in zones 1-3) priced like the fake provider
//! (0.1 per vCPU + 0.1 per GB); "diverse" pods in five equal groups with requests drawn from
//! Karpenter's small sets.
//!
//! Two renderings of the same shapes, one per consumer:
//! - pods in the core's model ([`diverse_pods`], [`snapshot`], ...), one random draw per pod as
//!   in Karpenter's test, for the criterion benches;
//! - deployments ([`diverse_deployments`]): batches of up to ten identical replicas, which the
//!   simulator writes as scenario pod groups (Kubernetes-shaped, so they live there).

use std::collections::BTreeMap;

use provisioner_core::{
    CapacityType, InstanceType, LabelSelector, Node, NodePool, Offering, Pod, PodAffinityTerm,
    Resources, Snapshot, TopologySpreadConstraint, WhenUnsatisfiable, labels,
};

use crate::Rng;

const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;

/// Karpenter's benchmark catalog size.
pub const INSTANCE_TYPES: usize = 400;
/// The CPU requests Karpenter's benchmark pods draw from, in millicores.
pub const CPU_MILLI: [i64; 5] = [100, 250, 500, 1000, 1500];
/// The memory requests Karpenter's benchmark pods draw from, in MiB.
pub const MEMORY_MIB: [i64; 6] = [100, 256, 512, 1024, 2048, 4096];
/// The values of the random labels that spread and affinity selectors match.
pub const LABEL_VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];

/// A pod's requests as Karpenter's benchmark draws them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requests {
    pub cpu_milli: i64,
    pub memory_mib: i64,
}

/// Random requests: CPU first, then memory (the order is part of the seeded stream).
pub fn random_requests(rng: &mut Rng) -> Requests {
    let cpu_milli = *rng.pick(&CPU_MILLI).unwrap_or(&CPU_MILLI[0]);
    let memory_mib = *rng.pick(&MEMORY_MIB).unwrap_or(&MEMORY_MIB[0]);
    Requests {
        cpu_milli,
        memory_mib,
    }
}

/// One of the five "diverse" groups, in the order Karpenter's benchmark builds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiverseGroup {
    /// No constraints.
    Generic,
    /// Topology spread over zones (maxSkew 1, DoNotSchedule).
    ZoneSpread,
    /// Topology spread over hostnames (maxSkew 1, DoNotSchedule).
    HostnameSpread,
    /// Required pod affinity to its own group within a zone.
    ZoneAffinity,
    /// Required pod anti-affinity to its own group on a hostname.
    HostnameAntiAffinity,
}

impl DiverseGroup {
    /// Every group, in generation order.
    pub const ALL: [DiverseGroup; 5] = [
        DiverseGroup::Generic,
        DiverseGroup::ZoneSpread,
        DiverseGroup::HostnameSpread,
        DiverseGroup::ZoneAffinity,
        DiverseGroup::HostnameAntiAffinity,
    ];

    /// A short name (`zone-spread`), used for the simulator's pod groups and their labels.
    pub fn name(self) -> &'static str {
        match self {
            DiverseGroup::Generic => "generic",
            DiverseGroup::ZoneSpread => "zone-spread",
            DiverseGroup::HostnameSpread => "host-spread",
            DiverseGroup::ZoneAffinity => "zone-affinity",
            DiverseGroup::HostnameAntiAffinity => "host-anti-affinity",
        }
    }

    /// The topology key the group's constraint is over; `None` for generic pods.
    pub fn topology_key(self) -> Option<&'static str> {
        match self {
            DiverseGroup::Generic => None,
            DiverseGroup::ZoneSpread | DiverseGroup::ZoneAffinity => Some(labels::ZONE),
            DiverseGroup::HostnameSpread | DiverseGroup::HostnameAntiAffinity => {
                Some(labels::HOSTNAME)
            }
        }
    }
}

/// The fake provider's price: 0.1 per vCPU plus 0.1 per GB of memory.
pub fn fake_price(cpu_milli: i64, memory: i64) -> f64 {
    0.1 * cpu_milli as f64 / 1000.0 + 0.1 * memory as f64 / 1e9
}

/// Karpenter's catalog of `n` types ([`INSTANCE_TYPES`] in the benchmark).
pub fn instance_types(n: usize) -> Vec<InstanceType> {
    (0..n as i64)
        .map(|i| {
            let (cpu, mem) = ((i + 1) * 1000, (i + 1) * 2 * GIB);
            let price = fake_price(cpu, mem);
            let offerings = vec![
                Offering::new("test-zone-1", CapacityType::Spot, price),
                Offering::new("test-zone-2", CapacityType::Spot, price),
                Offering::new("test-zone-1", CapacityType::OnDemand, price),
                Offering::new("test-zone-2", CapacityType::OnDemand, price),
                Offering::new("test-zone-3", CapacityType::OnDemand, price),
            ];
            let mut it =
                InstanceType::new(&format!("fake-it-{i}"), cpu, mem, (i + 1) * 10, offerings);
            it.labels.insert(labels::ARCH.into(), "amd64".into());
            it.labels.insert(labels::OS.into(), "linux".into());
            it
        })
        .collect()
}

fn random_value(rng: &mut Rng) -> String {
    rng.pick(&LABEL_VALUES).unwrap_or(&"a").to_string()
}

/// A pod with Karpenter's random CPU (100m-1500m) and memory (100Mi-4Gi).
fn base_pod(rng: &mut Rng, name: String) -> Pod {
    let r = random_requests(rng);
    let mut p = Pod::new("default", &name, r.cpu_milli, r.memory_mib * MIB);
    p.owner_kind = Some("ReplicaSet".into());
    p
}

/// Generic pods: random labels, no constraints.
pub fn generic_pods(rng: &mut Rng, n: usize, prefix: &str) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            base_pod(rng, format!("{prefix}-generic-{i}")).label("my-label", &random_value(rng))
        })
        .collect()
}

/// Topology spread (maxSkew 1, DoNotSchedule) on `key` with a random selector.
pub fn spread_pods(rng: &mut Rng, n: usize, key: &str, prefix: &str) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p =
                base_pod(rng, format!("{prefix}-spread-{i}")).label("my-label", &random_value(rng));
            p.topology_spread.push(TopologySpreadConstraint {
                max_skew: 1,
                topology_key: key.into(),
                when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                label_selector: LabelSelector::from_labels([("my-label", random_value(rng))]),
                min_domains: None,
                node_affinity_policy: None,
                node_taints_policy: None,
                match_label_keys: Vec::new(),
            });
            p
        })
        .collect()
}

fn term(labels: BTreeMap<String, String>, key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: LabelSelector {
            match_labels: labels.into_iter().collect(),
            match_expressions: Vec::new(),
        },
        namespaces: Vec::new(),
        namespace_selector: None,
        topology_key: key.into(),
        match_label_keys: Vec::new(),
    }
}

/// Required pod affinity to itself on `key` (seven random groups).
pub fn affinity_pods(rng: &mut Rng, n: usize, key: &str, prefix: &str) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let v = random_value(rng);
            let mut p = base_pod(rng, format!("{prefix}-affinity-{i}")).label("my-affininity", &v);
            p.pod_affinity
                .required
                .push(term([("my-affininity".to_string(), v)].into(), key));
            p
        })
        .collect()
}

/// Required pod anti-affinity to itself on `key` (all share `app=nginx`).
pub fn anti_affinity_pods(rng: &mut Rng, n: usize, key: &str, prefix: &str) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p = base_pod(rng, format!("{prefix}-anti-{i}")).label("app", "nginx");
            p.pod_anti_affinity
                .required
                .push(term([("app".to_string(), "nginx".to_string())].into(), key));
            p
        })
        .collect()
}

/// `n` pods of one diverse group, named after Karpenter's test (`z-spread-3`, ...).
fn group_pods(rng: &mut Rng, group: DiverseGroup, n: usize) -> Vec<Pod> {
    let key = group.topology_key().unwrap_or_default();
    match group {
        DiverseGroup::Generic => generic_pods(rng, n, "g"),
        DiverseGroup::ZoneSpread => spread_pods(rng, n, key, "z"),
        DiverseGroup::HostnameSpread => spread_pods(rng, n, key, "h"),
        DiverseGroup::ZoneAffinity => affinity_pods(rng, n, key, "za"),
        DiverseGroup::HostnameAntiAffinity => anti_affinity_pods(rng, n, key, "ha"),
    }
}

/// Karpenter's "diverse" pods: five equal groups (generic, zone spread, hostname spread, zone
/// self-affinity, hostname self-anti-affinity), the remainder generic.
pub fn diverse_pods(seed: u64, count: usize) -> Vec<Pod> {
    let mut rng = Rng::new(seed);
    let n = count / DiverseGroup::ALL.len();
    let mut pods = Vec::with_capacity(count);
    for group in DiverseGroup::ALL {
        pods.extend(group_pods(&mut rng, group, n));
    }
    let rest = count - pods.len();
    pods.extend(generic_pods(&mut rng, rest, "r"));
    pods
}

/// One default NodePool that may use every type.
pub fn default_nodepool() -> NodePool {
    NodePool::new("default", 0)
}

/// A snapshot with Karpenter's 400 types, one NodePool and the given pending pods.
pub fn snapshot(pods: Vec<Pod>) -> Snapshot {
    Snapshot {
        now: 0,
        pods: Snapshot::shared_pods(pods),
        nodepools: vec![default_nodepool()],
        instance_types: instance_types(INSTANCE_TYPES),
        ..Snapshot::default()
    }
}

/// `n` existing nodes of type `fake-it-{type_index}` spread over the three zones, empty.
pub fn existing_nodes(n: usize, type_index: i64) -> Vec<Node> {
    (0..n)
        .map(|i| {
            let zone = format!("test-zone-{}", i % 3 + 1);
            let cpu = (type_index + 1) * 1000;
            let mut node = Node::new(
                &format!("node-{i:05}"),
                &zone,
                Resources::with_pods(cpu, (type_index + 1) * 2 * GIB, (type_index + 1) * 10),
            );
            node.nodepool = Some("default".into());
            node.labels
                .insert(labels::NODEPOOL.into(), "default".into());
            node.labels.insert(
                labels::INSTANCE_TYPE.into(),
                format!("fake-it-{type_index}"),
            );
            node.price = fake_price(cpu, (type_index + 1) * 2 * GIB);
            node
        })
        .collect()
}

/// A deployment of the diverse workload: `replicas` identical pods of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployment {
    pub group: DiverseGroup,
    /// Its index within the group (0, 1, ...).
    pub index: usize,
    pub replicas: usize,
    pub requests: Requests,
}

/// Most replicas in one deployment of [`diverse_deployments`].
pub const MAX_REPLICAS: usize = 10;

/// Karpenter's diverse pods as deployments: `pods` split into the five groups (equal shares,
/// the last group takes the remainder), each group into deployments of up to
/// [`MAX_REPLICAS`] identical pods with random requests, as a cluster runs them. Where
/// [`diverse_pods`] draws per pod, this draws per deployment, so a scenario stays short.
pub fn diverse_deployments(rng: &mut Rng, pods: usize) -> Vec<Deployment> {
    let groups = DiverseGroup::ALL.len();
    let per = pods / groups;
    let mut out = Vec::new();
    for (gi, group) in DiverseGroup::ALL.into_iter().enumerate() {
        let mut left = if gi + 1 == groups {
            pods - (groups - 1) * per
        } else {
            per
        };
        let mut index = 0;
        while left > 0 {
            let replicas = left.min(MAX_REPLICAS);
            left -= replicas;
            out.push(Deployment {
                group,
                index,
                replicas,
                requests: random_requests(rng),
            });
            index += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diverse_pods_are_five_equal_groups_and_the_rest() {
        let pods = diverse_pods(42, 1003);
        assert_eq!(pods.len(), 1003);
        let count = |prefix: &str| pods.iter().filter(|p| p.name.starts_with(prefix)).count();
        assert_eq!(count("g-"), 200);
        assert_eq!(count("z-"), 200);
        assert_eq!(count("ha-"), 200);
        assert_eq!(count("r-"), 3);
        assert_eq!(diverse_pods(42, 1003), pods);
    }

    #[test]
    fn deployments_cover_every_pod() {
        let d = diverse_deployments(&mut Rng::new(1), 1003);
        assert_eq!(d.iter().map(|d| d.replicas).sum::<usize>(), 1003);
        assert!(d.iter().all(|d| (1..=MAX_REPLICAS).contains(&d.replicas)));
        let last: usize = d
            .iter()
            .filter(|d| d.group == DiverseGroup::HostnameAntiAffinity)
            .map(|d| d.replicas)
            .sum();
        assert_eq!(last, 203);
        assert!(diverse_deployments(&mut Rng::new(1), 0).is_empty());
    }

    #[test]
    fn catalog_shape() {
        let types = instance_types(INSTANCE_TYPES);
        assert_eq!(types.len(), 400);
        assert_eq!(types[399].capacity.cpu_milli, 400_000);
        assert_eq!(types[0].offerings.len(), 5);
    }
}
