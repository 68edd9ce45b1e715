//! The plain-data model the core works on.
//!
//! These types are the contract between the core and everything around it: the CAPI adapter
//! builds [`InstanceType`]s from scalable resources, the controller builds a [`Snapshot`] from
//! its reflectors, and the simulator builds snapshots from scenario files. Nothing here knows
//! Kubernetes' wire types, so the core stays reusable by any cloud provider and every input can
//! be serialized to a file and replayed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Well-known label keys the core reasons about (Karpenter's and Kubernetes').
pub mod labels {
    pub const NODEPOOL: &str = "karpenter.sh/nodepool";
    pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
    pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
    pub const ZONE: &str = "topology.kubernetes.io/zone";
    pub const REGION: &str = "topology.kubernetes.io/region";
    pub const ARCH: &str = "kubernetes.io/arch";
    pub const OS: &str = "kubernetes.io/os";
    pub const HOSTNAME: &str = "kubernetes.io/hostname";
    /// Set by the API server on every namespace to its name.
    pub const NAMESPACE_NAME: &str = "kubernetes.io/metadata.name";
}

/// Resource names with first-class fields in [`Resources`]; anything else is extended.
pub mod resource_names {
    pub const CPU: &str = "cpu";
    pub const MEMORY: &str = "memory";
    pub const PODS: &str = "pods";
    pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
}

/// An amount of every resource a node offers or a pod requests.
///
/// CPU, memory, pods and ephemeral storage have their own fields because every fit check
/// touches them and a map lookup per check would dominate the simulation's time; extended
/// resources (`nvidia.com/gpu`, hugepages, ...) stay in a sorted map so results are
/// deterministic.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct Resources {
    /// CPU in millicores.
    pub cpu_milli: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Pod slots.
    pub pods: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// Every other resource, as an integer count in its base unit.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extended: BTreeMap<String, i64>,
}

/// Requirement operators as NodePool requirements and node affinity define them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Gt,
    Lt,
    Gte,
    Lte,
}

/// One constraint on a label key, in the wire form users write; the core's requirements
/// algebra is built from these.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Karpenter's `minValues`: the launch must keep at least this many distinct values of
    /// the key among the instance-type options, so a NodeClaim is flexible enough.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<u32>,
}

/// A node-selector term: its requirements are ANDed. A list of terms is ORed, as in
/// `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`.
pub type NodeSelectorTerm = Vec<Requirement>;

/// A preferred node-affinity term with its weight (1..100).
#[derive(Debug, Clone, PartialEq, Hash, Eq, Serialize, Deserialize)]
pub struct WeightedNodeSelectorTerm {
    pub weight: i32,
    pub term: NodeSelectorTerm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum TaintEffect {
    NoSchedule,
    PreferNoSchedule,
    NoExecute,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: TaintEffect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum TolerationOperator {
    #[default]
    Equal,
    Exists,
}

/// A pod's toleration; an empty key with `Exists` tolerates every taint, a missing effect
/// matches every effect (the kube-scheduler's rules).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Toleration {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub operator: TolerationOperator,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SelectorOperator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SelectorRequirement {
    pub key: String,
    pub operator: SelectorOperator,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// A pod's labels or a selector's `matchLabels`: key-sorted pairs in one vector. Most hold
/// one to three entries, and a `BTreeMap` allocates a leaf of eleven (about 540 bytes) for
/// any; at 100,000 pods that was 145 MB of a 207 MB snapshot (benches/README.md).
pub type Labels = litemap::LiteMap<String, String>;

/// Looking a label up, whichever map holds it: pods keep [`Labels`], nodes and namespaces a
/// `BTreeMap`, and selectors match both.
pub trait LabelMap {
    fn label(&self, key: &str) -> Option<&String>;
}

impl LabelMap for Labels {
    fn label(&self, key: &str) -> Option<&String> {
        self.get(key)
    }
}

impl LabelMap for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&String> {
        self.get(key)
    }
}

/// A metav1.LabelSelector: matchLabels and matchExpressions ANDed; an empty selector matches
/// everything.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LabelSelector {
    #[serde(skip_serializing_if = "Labels::is_empty")]
    pub match_labels: Labels,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<SelectorRequirement>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum WhenUnsatisfiable {
    #[default]
    DoNotSchedule,
    ScheduleAnyway,
}

/// Whether a topology spread counts only nodes that match the pod's node affinity / that the
/// pod tolerates (`Honor`) or all nodes (`Ignore`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InclusionPolicy {
    Honor,
    Ignore,
}

#[derive(Debug, Clone, PartialEq, Hash, Eq, Serialize, Deserialize)]
pub struct TopologySpreadConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    #[serde(default)]
    pub when_unsatisfiable: WhenUnsatisfiable,
    #[serde(default)]
    pub label_selector: LabelSelector,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_domains: Option<i32>,
    /// Default `Honor`, as in the kube-scheduler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity_policy: Option<InclusionPolicy>,
    /// Default `Ignore`, as in the kube-scheduler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_taints_policy: Option<InclusionPolicy>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_label_keys: Vec<String>,
}

/// A pod (anti-)affinity term. With no namespaces and no namespace selector the term applies
/// to the pod's own namespace; an empty (present) namespace selector means all namespaces.
#[derive(Debug, Clone, PartialEq, Hash, Eq, Serialize, Deserialize)]
pub struct PodAffinityTerm {
    #[serde(default)]
    pub label_selector: LabelSelector,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    pub topology_key: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_label_keys: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Hash, Eq, Serialize, Deserialize)]
pub struct WeightedPodAffinityTerm {
    pub weight: i32,
    pub term: PodAffinityTerm,
}

#[derive(Debug, Clone, PartialEq, Hash, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PodAffinity {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<PodAffinityTerm>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub preferred: Vec<WeightedPodAffinityTerm>,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub enum Protocol {
    #[default]
    TCP,
    UDP,
    SCTP,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HostPort {
    pub port: u16,
    #[serde(default)]
    pub protocol: Protocol,
    /// Empty or `0.0.0.0` conflicts with every address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_ip: Option<String>,
}

/// A volume as far as placement cares: where its PersistentVolume may attach (the PV's node
/// affinity, or the StorageClass's allowed topologies for an unbound claim) and which CSI
/// driver counts it against a node's attach limit.
#[derive(Debug, Clone, PartialEq, Hash, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Volume {
    pub name: String,
    /// ORed terms; empty means anywhere.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_affinity: Vec<NodeSelectorTerm>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csi_driver: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Hash, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct InitContainer {
    pub requests: Resources,
    /// A sidecar (`restartPolicy: Always`) keeps its requests for the pod's lifetime.
    pub restart_always: bool,
}

/// A pod, pending or bound.
#[derive(Debug, Clone, PartialEq, Hash, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    #[serde(skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Requests of the app containers, one entry per container.
    pub containers: Vec<Resources>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<InitContainer>,
    /// RuntimeClass pod overhead, added on top.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<Resources>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: ORed terms. Empty means no constraint.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub required_node_affinity: Vec<NodeSelectorTerm>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub preferred_node_affinity: Vec<WeightedNodeSelectorTerm>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub topology_spread: Vec<TopologySpreadConstraint>,
    pub pod_affinity: PodAffinity,
    pub pod_anti_affinity: PodAffinity,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub host_ports: Vec<HostPort>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// Kind of the controlling owner (`DaemonSet`, `ReplicaSet`, `Job`, ...); a pod with no
    /// controller cannot be rescheduled after eviction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner_kind: Option<String>,
    pub priority: i32,
    /// `controller.kubernetes.io/pod-deletion-cost`.
    pub deletion_cost: i32,
    /// The node it is bound to; `None` for a pending pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// When the pod was created, in seconds since the epoch (the simulation's clock).
    pub created_at: i64,
    /// When it started running on its node (`status.startTime`, set by the kubelet), in
    /// seconds since the epoch. `None` when not known; its creation then stands in. A Job's
    /// pod has worked only since then: the time it waited pending is not work an eviction
    /// throws away.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
}

/// Capacity type of an offering, as `karpenter.sh/capacity-type` spells it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityType {
    #[default]
    OnDemand,
    Spot,
    Reserved,
}

impl CapacityType {
    /// The label value Karpenter uses.
    pub fn as_label(self) -> &'static str {
        match self {
            CapacityType::OnDemand => "on-demand",
            CapacityType::Spot => "spot",
            CapacityType::Reserved => "reserved",
        }
    }
}

/// Where an instance type can be launched and at what price.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offering {
    pub zone: String,
    #[serde(default)]
    pub capacity_type: CapacityType,
    /// Hourly price. Providers without a price source fill in a documented fallback so the
    /// ranking stays deterministic, and say so through `priced`.
    pub price: f64,
    #[serde(default = "yes")]
    pub priced: bool,
    /// False at max size, when paused, or during a launch-failure back-off.
    #[serde(default = "yes")]
    pub available: bool,
}

fn yes() -> bool {
    true
}

/// A node shape the cluster can grow. On CAPI this is one scalable resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceType {
    pub name: String,
    pub capacity: Resources,
    /// kube-reserved + system-reserved + eviction threshold: allocatable = capacity - overhead.
    #[serde(default)]
    pub overhead: Resources,
    /// Labels every node of this type carries (arch, os, custom labels). Instance type, zone
    /// and capacity type come from the name and the offerings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Taints every node of this type carries (e.g. from the CAS `/taints` annotation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    pub offerings: Vec<Offering>,
    /// Per-CSI-driver attach limits of this type's nodes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub csi_limits: BTreeMap<String, i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ConsolidationPolicy {
    WhenEmpty,
    #[default]
    WhenEmptyOrUnderutilized,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DisruptionReason {
    Empty,
    Underutilized,
    Drifted,
    Expired,
}

/// A NodePool disruption budget as written by the user. Parsed and validated by the core so a
/// malformed budget blocks disruption with a reported reason instead of being ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// A count (`"5"`) or a percentage of the NodePool's nodes (`"10%"`, rounded up).
    pub nodes: String,
    /// Reasons this budget limits; empty means all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<DisruptionReason>,
    /// UTC cron schedule at which the budget becomes active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// How long the budget stays active after each scheduled time, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Disruption {
    pub consolidation_policy: ConsolidationPolicy,
    /// Seconds after the last pod event before a node may be consolidated; `None` = Never.
    pub consolidate_after_secs: Option<i64>,
    pub budgets: Vec<Budget>,
}

impl Default for Disruption {
    fn default() -> Self {
        Disruption {
            consolidation_policy: ConsolidationPolicy::WhenEmptyOrUnderutilized,
            consolidate_after_secs: Some(0),
            budgets: vec![Budget {
                nodes: "10%".to_string(),
                reasons: Vec::new(),
                schedule: None,
                duration_secs: None,
            }],
        }
    }
}

/// A NodePool as the core needs it (the controller converts `karpenter.sh/v1` objects).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodePool {
    pub name: String,
    /// Higher weights are tried first (Karpenter's `spec.weight`).
    pub weight: i32,
    pub requirements: Vec<Requirement>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// Taints present at launch that go away on their own; pods need not tolerate them.
    pub startup_taints: Vec<Taint>,
    /// Upper bound on the summed capacity of this pool's nodes (`nodes` in `extended`
    /// under the key `"nodes"` counts nodes). `None` = unlimited.
    pub limits: Option<Resources>,
    /// Names of the instance types in [`Snapshot::instance_types`] this pool may launch
    /// (resolved from its NodeClass by the provider). `None` means every type.
    pub instance_types: Option<Vec<String>>,
    pub disruption: Disruption,
    /// Seconds after launch when a node expires; `None` = Never.
    pub expire_after_secs: Option<i64>,
}

impl Default for NodePool {
    fn default() -> Self {
        NodePool {
            name: String::new(),
            weight: 0,
            requirements: Vec::new(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            startup_taints: Vec::new(),
            limits: None,
            instance_types: None,
            disruption: Disruption::default(),
            expire_after_secs: Some(720 * 3600),
        }
    }
}

/// An existing node, or an in-flight NodeClaim that has no node yet (`in_flight`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Node {
    pub name: String,
    /// All labels, including zone, instance type, capacity type, nodepool and hostname.
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    pub capacity: Resources,
    /// The NodePool that owns it; `None` for nodes we do not manage.
    pub nodepool: Option<String>,
    pub instance_type: Option<String>,
    /// Hourly price of this node (from its offering); used by consolidation.
    pub price: f64,
    pub ready: bool,
    pub initialized: bool,
    pub in_flight: bool,
    pub marked_for_deletion: bool,
    pub nominated: bool,
    /// The provider reports the node's template changed since launch.
    pub drifted: bool,
    /// Launch time, seconds since the epoch.
    pub created_at: i64,
    /// Last time a pod was bound to or removed from the node, seconds since the epoch.
    pub last_pod_event_at: i64,
    pub csi_limits: BTreeMap<String, i64>,
}

/// A DaemonSet: its pod template is placed on every new node that it tolerates and whose
/// labels it selects, so new nodes must fit it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonSet {
    pub namespace: String,
    pub name: String,
    pub pod: Pod,
}

/// A PodDisruptionBudget reduced to what disruption needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodDisruptionBudget {
    pub namespace: String,
    pub name: String,
    pub selector: LabelSelector,
    /// `status.disruptionsAllowed`.
    pub disruptions_allowed: i32,
}

/// Everything the core needs for one decision: a point-in-time view of the cluster.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Snapshot {
    /// Current time in seconds since the epoch; the core reads no clock.
    pub now: i64,
    pub nodes: Vec<Node>,
    /// Pending pods (`node_name == None`) and bound pods.
    pub pods: Vec<std::sync::Arc<Pod>>,
    pub daemonsets: Vec<DaemonSet>,
    pub nodepools: Vec<NodePool>,
    pub instance_types: Vec<InstanceType>,
    pub pdbs: Vec<PodDisruptionBudget>,
    /// Namespace labels, for namespace selectors in pod affinity terms.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// Recent pods that ended on their own, not by an eviction: the payback rule learns how
    /// long pods run from them ([`crate::disruption::lifetime`]). Producers keep a bounded
    /// recent window.
    pub ended_pods: Vec<EndedPod>,
    /// Since when `ended_pods` holds every pod that ended (seconds since the epoch): when the
    /// producer began watching, or the end of the last ending it dropped from its bounded
    /// window. Pods that arrived and ended before then are unknown, so the cluster's turnover
    /// is counted only over a window that starts after it. `None`: unknown, not counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_since: Option<i64>,
    /// Recent evictions of bound pods (drains, preemption, the Eviction API). A workload
    /// replaces an evicted pod with a new pod, created at the eviction: anticipation
    /// ([`crate::anticipate`]) nets those replacements out so that a consolidation's moved pods
    /// do not read as a stream of new demand. Producers whose evicted pods keep their identity
    /// and creation time (the simulator) leave it empty.
    pub recent_evictions: Vec<Eviction>,
}

impl Snapshot {
    /// Snapshot pods from owned ones. Not `pods.into_iter().map(Arc::new).collect()` alone:
    /// that collects in place and keeps the whole `Vec<Pod>` buffer (536 bytes a pod, 54 MB
    /// at 100,000 pods) behind the 8-byte pointers.
    pub fn shared_pods(pods: impl IntoIterator<Item = Pod>) -> Vec<std::sync::Arc<Pod>> {
        let mut shared: Vec<_> = pods.into_iter().map(std::sync::Arc::new).collect();
        shared.shrink_to_fit();
        shared
    }
}

/// A pod that ended on its own: how long it ran and what kind of workload it belonged to
/// (Jobs and services live very differently, so lifetimes are learnt per kind).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct EndedPod {
    /// Seconds from creation to the end.
    pub lifetime_seconds: i64,
    /// The kind of its controlling owner (`ReplicaSet`, `Job`, ...), as [`Pod::owner_kind`].
    pub owner_kind: Option<String>,
    /// When it ended, in seconds since the epoch: with `lifetime_seconds`, when it arrived,
    /// which the cluster's turnover counts ([`crate::disruption::turnover::turnover_hours`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<i64>,
}

/// An evicted pod: when, what it requested, and what its replacement will look like.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Eviction {
    /// Seconds since the epoch.
    pub at: i64,
    /// Requested millicores.
    pub cpu_milli: i64,
    /// Requested bytes of memory.
    pub memory: i64,
    /// The evicted pod's namespace and labels: its workload's replacement has the same (a
    /// template's labels, a StatefulSet's ordinal, a Job's index), another workload's new pod
    /// of the same size usually does not.
    pub namespace: String,
    #[serde(skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
    /// When the evicted pod was created, if its workload's replacement carries on its work
    /// (a ReplicaSet's or StatefulSet's pod; not a Job's, which starts again): the start of
    /// the replacement's life for the lifetime estimate ([`crate::replacements`]).
    pub continues_since: Option<i64>,
}

impl Eviction {
    /// `pod`'s eviction at `at`; `continues_since` as the field says.
    pub fn of(pod: &Pod, at: i64, continues_since: Option<i64>) -> Eviction {
        let r = crate::resources::pod_requests(pod);
        Eviction {
            at,
            cpu_milli: r.cpu_milli,
            memory: r.memory,
            namespace: pod.namespace.clone(),
            labels: pod.labels.clone(),
            continues_since,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_pods_keep_no_room_for_the_owned_pods() {
        let pods: Vec<Pod> = (0..1000)
            .map(|i| Pod::new("ns", &format!("p{i}"), 100, 1 << 20))
            .collect();
        let shared = Snapshot::shared_pods(pods);
        assert_eq!(shared.len(), 1000);
        // Collected in place, the vector would keep the Pods' buffer: room for about
        // size_of::<Pod>() / 8 times as many pointers.
        assert!(
            shared.capacity() < 2 * shared.len(),
            "capacity {}",
            shared.capacity()
        );
        assert_eq!(shared[999].name, "p999");
    }
}
