//! The simulated kube-scheduler's filter: can this pod run on this node now?
//!
//! The engine binds pods itself (as the kube-scheduler would) and the Cluster-Autoscaler-like
//! baseline simulates scheduling with the same filter. The filter is the core's
//! ([`provisioner_core::filter`]): one implementation of "may this pod bind to this node",
//! on the same topology groups and matching as the core's scheduler. What is here is only
//! the engine's scoring helper.

use provisioner_core as core;
pub use provisioner_core::filter::{
    Context, NodeView, PodFilter, PodMark, fits_node, has_inter_pod_constraints,
};

/// Allocation ratio of the binding resource after adding `req`, for scoring.
pub fn utilisation_after(req: &core::Resources, n: &NodeView) -> f64 {
    let cpu = (n.used.cpu_milli + req.cpu_milli) as f64 / n.allocatable.cpu_milli.max(1) as f64;
    let mem = (n.used.memory + req.memory) as f64 / n.allocatable.memory.max(1) as f64;
    (cpu + mem) / 2.0
}
