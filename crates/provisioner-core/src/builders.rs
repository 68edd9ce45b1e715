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

    /// capacity - overhead.
    pub fn allocatable(&self) -> Resources {
        self.capacity.sub(&self.overhead)
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
