//! Helper constructors for the model: tests, generators and adapters build inputs with them.

use std::collections::BTreeMap;

use crate::model::{CapacityType, InstanceType, Node, NodePool, Offering, Pod, Resources, labels};

impl Pod {
    /// A pending pod with one container requesting `cpu_milli` and `memory` bytes.
    pub fn new(namespace: &str, name: &str, cpu_milli: i64, memory: i64) -> Pod {
        Pod {
            namespace: namespace.into(),
            name: name.into(),
            containers: vec![Resources::new(cpu_milli, memory)],
            ..Pod::default()
        }
    }

    /// Builder: add a label.
    pub fn label(mut self, k: &str, v: &str) -> Pod {
        self.labels.insert(k.into(), v.into());
        self
    }

    /// Builder: bind to a node.
    pub fn on(mut self, node: &str) -> Pod {
        self.node_name = Some(node.into());
        self
    }

    /// Whether a DaemonSet controls it (such pods are never provisioned for).
    pub fn is_daemonset_pod(&self) -> bool {
        self.owner_kind.as_deref() == Some("DaemonSet")
    }
}

impl Offering {
    /// An available, priced offering.
    pub fn new(zone: &str, capacity_type: CapacityType, price: f64) -> Offering {
        Offering {
            zone: zone.into(),
            capacity_type,
            price,
            priced: true,
            available: true,
        }
    }
}

impl InstanceType {
    /// An instance type with CPU, memory and pod capacity and the given offerings.
    pub fn new(
        name: &str,
        cpu_milli: i64,
        memory: i64,
        pods: i64,
        offerings: Vec<Offering>,
    ) -> InstanceType {
        InstanceType {
            name: name.into(),
            capacity: Resources::with_pods(cpu_milli, memory, pods),
            overhead: Resources::default(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            offerings,
            csi_limits: BTreeMap::new(),
        }
    }

    /// capacity - overhead, never below zero: an overhead larger than a capacity leaves
    /// nothing, not a debt that rejects even pods requesting none of it. An ephemeral-storage
    /// capacity of 0 means "not reported" (a scalable resource whose disk size nobody
    /// declared; no real node has none): it stays unconstrained rather than rejecting every
    /// pod once kube-reserved is subtracted.
    pub fn allocatable(&self) -> Resources {
        let mut a = self.capacity.sub(&self.overhead);
        a.cpu_milli = a.cpu_milli.max(0);
        a.memory = a.memory.max(0);
        a.pods = a.pods.max(0);
        a.ephemeral_storage = if self.capacity.ephemeral_storage == 0 {
            i64::MAX
        } else {
            a.ephemeral_storage.max(0)
        };
        for v in a.extended.values_mut() {
            *v = (*v).max(0);
        }
        a
    }
}

impl NodePool {
    /// A NodePool with defaults and this name and weight.
    pub fn new(name: &str, weight: i32) -> NodePool {
        NodePool {
            name: name.into(),
            weight,
            ..NodePool::default()
        }
    }
}

impl Node {
    /// A ready, initialized node with allocatable = capacity and the usual labels.
    pub fn new(name: &str, zone: &str, allocatable: Resources) -> Node {
        let mut l = BTreeMap::new();
        l.insert(labels::HOSTNAME.to_string(), name.to_string());
        l.insert(labels::ZONE.to_string(), zone.to_string());
        Node {
            name: name.into(),
            labels: l,
            capacity: allocatable.clone(),
            allocatable,
            ready: true,
            initialized: true,
            ..Node::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: i64 = 1 << 30;

    fn with_overhead(capacity: Resources, overhead: Resources) -> InstanceType {
        InstanceType {
            capacity,
            overhead,
            ..InstanceType::new("t", 0, 0, 0, vec![])
        }
    }

    #[test]
    fn allocatable_never_goes_negative() {
        let mut cap = Resources::with_pods(100, GIB, 10);
        cap.ephemeral_storage = 10 * GIB;
        cap.extended.insert("example.com/dev".into(), 1);
        let mut over = Resources::with_pods(500, 2 * GIB, 20);
        over.ephemeral_storage = 20 * GIB;
        over.extended.insert("example.com/dev".into(), 3);
        let a = with_overhead(cap, over).allocatable();
        assert_eq!(
            (a.cpu_milli, a.memory, a.pods, a.ephemeral_storage),
            (0, 0, 0, 0)
        );
        assert_eq!(a.extended["example.com/dev"], 0);
        // A pod asking for nothing of an exhausted resource still fits.
        assert!(Resources::default().fits_in(&a));
    }

    #[test]
    fn unreported_ephemeral_storage_is_unconstrained() {
        let mut over = Resources::with_pods(100, GIB, 0);
        over.ephemeral_storage = GIB;
        let it = with_overhead(Resources::with_pods(4000, 16 * GIB, 110), over.clone());
        let a = it.allocatable();
        assert_eq!(a.ephemeral_storage, i64::MAX);
        assert_eq!((a.cpu_milli, a.memory), (3900, 15 * GIB));
        let mut pod = Resources::with_pods(1000, GIB, 1);
        pod.ephemeral_storage = 50 * GIB;
        assert!(pod.fits_in(&a));
        // A reported capacity is honoured.
        let mut cap = Resources::with_pods(4000, 16 * GIB, 110);
        cap.ephemeral_storage = 20 * GIB;
        let a = with_overhead(cap, over).allocatable();
        assert_eq!(a.ephemeral_storage, 19 * GIB);
        assert!(!pod.fits_in(&a));
    }
}
