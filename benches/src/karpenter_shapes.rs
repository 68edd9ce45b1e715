//! Karpenter's benchmark shapes (`scheduling_benchmark_test.go` and its fake cloud provider):
//! 400 instance types where type i has i+1 vCPU, 2(i+1) GiB and 10(i+1) pods, each with five
//! offerings (spot in zones 1-2, on-demand in zones 1-3) priced like the fake provider
//! (0.1 per vCPU + 0.1 per GB); "diverse" pods in five equal groups.

use std::collections::BTreeMap;

use provisioner_core::{
    CapacityType, InstanceType, LabelSelector, Node, NodePool, Offering, Pod, PodAffinityTerm,
    Resources, Snapshot, TopologySpreadConstraint, WhenUnsatisfiable, labels,
};

const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;

/// A small deterministic generator (splitmix64), so every run sees the same workload.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> Option<&'a T> {
        xs.get(self.below(xs.len()))
    }
}

/// The fake provider's price: 0.1 per vCPU plus 0.1 per GB of memory.
pub fn fake_price(cpu_milli: i64, memory: i64) -> f64 {
    0.1 * cpu_milli as f64 / 1000.0 + 0.1 * memory as f64 / 1e9
}

/// Karpenter's catalog of `n` types (400 in the benchmark).
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

fn random_requests(rng: &mut Rng) -> (i64, i64) {
    let cpu = *rng.pick(&[100, 250, 500, 1000, 1500]).unwrap_or(&100);
    let mem = *rng.pick(&[100, 256, 512, 1024, 2048, 4096]).unwrap_or(&100) * MIB;
    (cpu, mem)
}

fn random_value(rng: &mut Rng) -> String {
    rng.pick(&["a", "b", "c", "d", "e", "f", "g"])
        .unwrap_or(&"a")
        .to_string()
}

/// A pod with Karpenter's random CPU (100m-1500m) and memory (100Mi-4Gi).
fn base_pod(rng: &mut Rng, name: String) -> Pod {
    let (cpu, mem) = random_requests(rng);
    let mut p = Pod::new("default", &name, cpu, mem);
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
            match_labels: labels,
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

/// Karpenter's "diverse" pods: five equal groups (generic, zone spread, hostname spread, zone
/// self-affinity, hostname self-anti-affinity), the remainder generic.
pub fn diverse_pods(seed: u64, count: usize) -> Vec<Pod> {
    let mut rng = Rng::new(seed);
    let n = count / 5;
    let mut pods = generic_pods(&mut rng, n, "g");
    pods.extend(spread_pods(&mut rng, n, labels::ZONE, "z"));
    pods.extend(spread_pods(&mut rng, n, labels::HOSTNAME, "h"));
    pods.extend(affinity_pods(&mut rng, n, labels::ZONE, "za"));
    pods.extend(anti_affinity_pods(&mut rng, n, labels::HOSTNAME, "ha"));
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
        pods,
        nodepools: vec![default_nodepool()],
        instance_types: instance_types(400),
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
