//! A running cluster to consolidate, built from Karpenter's benchmark shapes.
//!
//! 1,000 nodes (Karpenter's fake catalog, `fake-it-i` = i+1 vCPU, 2(i+1) GiB, priced 0.1 per
//! vCPU + 0.1 per GB), 30 bound pods each with Karpenter's random requests (100m-1500m CPU,
//! 100Mi-4Gi memory) and a mix of its constraint groups that a bound cluster can satisfy:
//! generic pods, zone topology spread, zone self-affinity, hostname topology spread (each
//! value at most once per node) and hostname anti-affinity (at most one per node). Half of
//! the nodes (chosen at random) are "full": the smallest type that holds their pods with 5%
//! headroom; the other half are underused: a type about three times larger than their pods.
//! Karpenter's generator gives every pod a random `my-label` that its spread selectors also
//! use; in a *bound* cluster that makes a hostname spread of maxSkew 1 unsatisfiable (every
//! node holds several pods of each value), so here each constraint group has its own label key.
//! Nodes are spread round-robin over the three zones and were created at random times in the
//! last 30 days (expireAfter 720h), so their disruption costs differ as in a real cluster.
//!
//! Included with `#[path]` by the consolidation bench and report; the shapes themselves
//! (catalog, request sets, label values) come from `kcapi_workloads::karpenter`.

use provisioner_core::{
    Budget, CapacityType, LabelSelector, Node, NodePool, Pod, PodAffinityTerm, Resources, Snapshot,
    TopologySpreadConstraint, WhenUnsatisfiable, labels,
};

use kcapi_workloads::Rng;
use kcapi_workloads::karpenter::{
    INSTANCE_TYPES, LABEL_VALUES as VALUES, fake_price, instance_types, random_requests,
};

const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;
const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];
const DAY: i64 = 86_400;

/// Knobs of the generated cluster.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    pub nodes: usize,
    pub pods_per_node: usize,
    /// Fraction of nodes that are underused (about a third full).
    pub underused: f64,
    /// The NodePool's Underutilized budget (`"10%"` is Karpenter's default).
    pub budget: String,
    pub seed: u64,
}

impl Default for ClusterSpec {
    fn default() -> Self {
        ClusterSpec {
            nodes: 1000,
            pods_per_node: 30,
            underused: 0.5,
            budget: "10%".into(),
            seed: 42,
        }
    }
}

fn term(key: &str, label: &str, value: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: LabelSelector::from_labels([(label, value)]),
        namespaces: Vec::new(),
        namespace_selector: None,
        topology_key: key.into(),
        match_label_keys: Vec::new(),
    }
}

fn spread(key: &str, label: &str, value: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: 1,
        topology_key: key.into(),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        label_selector: LabelSelector::from_labels([(label, value)]),
        min_domains: None,
        node_affinity_policy: None,
        node_taints_policy: None,
        match_label_keys: Vec::new(),
    }
}

/// Smallest catalog index whose type holds `cpu`, `mem` and `pods`.
fn smallest_type(cpu: i64, mem: i64, pods: i64) -> i64 {
    let by_cpu = (cpu + 999) / 1000 - 1;
    let by_mem = (mem + 2 * GIB - 1) / (2 * GIB) - 1;
    let by_pods = (pods + 9) / 10 - 1;
    by_cpu
        .max(by_mem)
        .max(by_pods)
        .clamp(0, INSTANCE_TYPES as i64 - 1)
}

/// Builds the cluster.
pub fn cluster(spec: &ClusterSpec) -> Snapshot {
    let mut rng = Rng::new(spec.seed);
    let now = 30 * DAY;
    let types = instance_types(INSTANCE_TYPES);
    let mut nodes = Vec::with_capacity(spec.nodes);
    let mut pods = Vec::with_capacity(spec.nodes * spec.pods_per_node);
    for i in 0..spec.nodes {
        let name = format!("node-{i:05}");
        let zone_i = i % ZONES.len();
        let zone = ZONES[zone_i];
        let mut node_pods = Vec::with_capacity(spec.pods_per_node);
        let mut host_values: Vec<&str> = VALUES.to_vec();
        let mut has_anti = false;
        for j in 0..spec.pods_per_node {
            let requests = random_requests(&mut rng);
            let (cpu, mem) = (requests.cpu_milli, requests.memory_mib * MIB);
            let mut p = Pod::new("default", &format!("{name}-p{j:02}"), cpu, mem).on(&name);
            p.owner_kind = Some("ReplicaSet".into());
            p.created_at = now - DAY;
            match rng.below(20) {
                // Zone spread: 15%.
                0..=2 => {
                    let v = *rng.pick(&VALUES).unwrap_or(&"a");
                    p = p.label("zone-spread", v);
                    p.topology_spread
                        .push(spread(labels::ZONE, "zone-spread", v));
                }
                // Zone self-affinity: 10%, groups living in the node's zone.
                3 | 4 => {
                    let in_zone: Vec<&str> = VALUES
                        .iter()
                        .enumerate()
                        .filter(|(k, _)| k % ZONES.len() == zone_i)
                        .map(|(_, v)| *v)
                        .collect();
                    let v = *rng.pick(&in_zone).unwrap_or(&"a");
                    p = p.label("my-affinity", v);
                    p.pod_affinity
                        .required
                        .push(term(labels::ZONE, "my-affinity", v));
                }
                // Hostname spread: 10%, each value at most once per node.
                5 | 6 if !host_values.is_empty() => {
                    let k = rng.below(host_values.len());
                    let v = host_values.remove(k);
                    p = p.label("host-spread", v);
                    p.topology_spread
                        .push(spread(labels::HOSTNAME, "host-spread", v));
                }
                // Hostname anti-affinity: 5%, at most one per node.
                7 if !has_anti => {
                    has_anti = true;
                    p = p.label("app", "nginx");
                    p.pod_anti_affinity
                        .required
                        .push(term(labels::HOSTNAME, "app", "nginx"));
                }
                _ => {
                    p = p.label("my-label", rng.pick(&VALUES).unwrap_or(&"a"));
                }
            }
            node_pods.push(p);
        }
        let cpu: i64 = node_pods
            .iter()
            .map(|p| p.containers.iter().map(|c| c.cpu_milli).sum::<i64>())
            .sum();
        let mem: i64 = node_pods
            .iter()
            .map(|p| p.containers.iter().map(|c| c.memory).sum::<i64>())
            .sum();
        let underused = (rng.below(1000) as f64) < spec.underused * 1000.0;
        let factor = if underused { 3.0 } else { 1.05 };
        let ti = smallest_type(
            (cpu as f64 * factor) as i64,
            (mem as f64 * factor) as i64,
            spec.pods_per_node as i64 + 1,
        );
        let it = &types[ti as usize];
        let mut node = Node::new(
            &name,
            zone,
            Resources::with_pods(it.capacity.cpu_milli, it.capacity.memory, it.capacity.pods),
        );
        node.nodepool = Some("default".into());
        node.instance_type = Some(it.name.clone());
        node.labels
            .insert(labels::NODEPOOL.into(), "default".into());
        node.labels
            .insert(labels::INSTANCE_TYPE.into(), it.name.clone());
        node.labels.insert(
            labels::CAPACITY_TYPE.into(),
            CapacityType::OnDemand.as_label().into(),
        );
        for (k, v) in &it.labels {
            node.labels.insert(k.clone(), v.clone());
        }
        node.price = fake_price(it.capacity.cpu_milli, it.capacity.memory);
        node.created_at = now - (rng.below(29 * 24) as i64 + 1) * 3600;
        node.last_pod_event_at = now - DAY;
        nodes.push(node);
        pods.extend(node_pods.into_iter().map(std::sync::Arc::new));
    }
    let mut pool = NodePool::new("default", 0);
    pool.disruption.budgets = vec![Budget {
        nodes: spec.budget.clone(),
        reasons: Vec::new(),
        schedule: None,
        duration_secs: None,
    }];
    Snapshot {
        now,
        nodes,
        pods,
        nodepools: vec![pool],
        instance_types: types,
        ..Snapshot::default()
    }
}

/// Summed hourly price of the cluster's nodes.
pub fn cluster_price(s: &Snapshot) -> f64 {
    s.nodes.iter().map(|n| n.price).sum()
}
