//! What a scheduling simulation returns: plain, serializable decisions with reasons.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::{CapacityType, Requirement, Resources};

/// A pod by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A pending pod the simulation puts on an existing node or an in-flight NodeClaim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub pod: PodRef,
    pub node: String,
}

/// An offering of an instance type: where and at what price it would launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OfferingChoice {
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
}

/// One instance type a new NodeClaim could launch as, with its cheapest available offering
/// compatible with the NodeClaim's requirements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceTypeOption {
    pub instance_type: String,
    pub cheapest: OfferingChoice,
    /// Allocatable after the instance type's overhead and the daemonsets that land on it.
    pub allocatable_for_pods: Resources,
}

/// The launch the core recommends for a NodeClaim: the cheapest offering that fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
}

/// A node to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewNodeClaim {
    /// A placeholder hostname, unique within this result (`<nodepool>-new-<n>`).
    pub name: String,
    pub nodepool: String,
    /// The NodeClaim's requirements: the NodePool's, narrowed by the pods and the options.
    /// Shared: claims of similar pods have equal requirements (at 100,000 pods, 20,000 claims
    /// held a copy of the same 60 instance-type names each).
    pub requirements: Arc<[Requirement]>,
    pub pods: Vec<PodRef>,
    /// Sum of the pods' requests.
    pub pod_requests: Resources,
    /// Requests of the daemonset pods that will land on the launched type.
    pub daemonset_requests: Resources,
    /// Every instance type that fits the pods (cheapest first, at most 60); the provider may
    /// launch any. Shared: claims with the same choice hold one list (a 100,000-pod result
    /// has 20,000 claims but a few hundred distinct lists).
    pub instance_type_options: Arc<[InstanceTypeOption]>,
    pub launch: Launch,
}

/// A pod nothing can hold, with a reason a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unschedulable {
    pub pod: PodRef,
    pub reason: String,
}

/// A preference the simulation had to drop to place a pod (Karpenter's relaxation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relaxation {
    pub pod: PodRef,
    pub relaxed: Vec<String>,
}

/// The outcome of [`crate::schedule`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SchedulingResult {
    /// Which strategy produced it.
    pub strategy: String,
    /// Pending pods placed on existing nodes or in-flight NodeClaims.
    pub existing_placements: Vec<Placement>,
    pub new_node_claims: Vec<NewNodeClaim>,
    pub unschedulable: Vec<Unschedulable>,
    pub relaxations: Vec<Relaxation>,
    /// Sum of the launch prices of the new NodeClaims, per hour.
    pub new_node_cost_per_hour: f64,
    /// A lower bound on the new-node cost, when the planner computes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_lower_bound: Option<f64>,
    /// `(cost - bound) / bound` in percent, when a bound is known: how far from optimal this
    /// round's launch can be at worst.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_gap_percent: Option<f64>,
    /// The planner's account of what it did (see [`crate::packing::LaunchPlan::notes`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub planner_notes: Vec<String>,
    /// The new nodes cost at least the price cap the caller set ([`crate::schedule_capped`]),
    /// so their NodeClaims were not built: `new_node_claims` is empty and
    /// `new_node_cost_per_hour` is that least cost (each node at its cheapest fitting shape).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub over_price_cap: bool,
}

impl SchedulingResult {
    /// The node each pod placed on an existing or in-flight node went to, by namespace and
    /// name.
    pub fn existing_nodes_by_pod(&self) -> std::collections::HashMap<(&str, &str), &str> {
        self.existing_placements
            .iter()
            .map(|pl| {
                (
                    (pl.pod.namespace.as_str(), pl.pod.name.as_str()),
                    pl.node.as_str(),
                )
            })
            .collect()
    }

    /// Number of pods placed anywhere.
    pub fn placed_pods(&self) -> usize {
        self.existing_placements.len()
            + self
                .new_node_claims
                .iter()
                .map(|c| c.pods.len())
                .sum::<usize>()
    }
}
