//! The pure heart of karpenter-capi: scheduling simulation, packing and consolidation.
//!
//! Invariant: no IO, no async, no kube or CAPI types. Input is a plain-data [`Snapshot`]-style
//! value and output plain-data decisions, both serde-serializable, so any decision can be
//! replayed from a file. Deterministic: the same input gives the same output whatever the
//! rayon thread count, with one exception: the optimiser (large provisioning rounds, see
//! [`optimize::large_rounds`], and consolidation's re-plan of a command's replacements) has a
//! wall-clock budget, and when that budget rather than its work limits ends it, its plan may
//! differ between runs (still valid, never dearer than the heuristic's).
//!
//! # Scheduling
//! - [`schedule`]`(&Snapshot, &SchedulingOptions) -> SchedulingResult`: the one entry point
//!   for provisioning. Pending pods go to existing and in-flight nodes first, then to new
//!   NodeClaims planned by the [`Strategy`] (cost-aware by default, or the Karpenter baseline).
//! - [`ClusterState`] + [`schedule_on`]: the same simulation on a prepared, cheaply cloneable
//!   state, for callers that simulate many times (consolidation: clone, `remove_nodes`,
//!   `schedule_on` with the evicted pods).
//! - [`schedule_with`]: the same with any [`packing::LaunchPlanner`] (an optimiser).
//!
//! Binding: [`filter`] is the kube-scheduler's "may this pod bind to this node", built on
//! the same groups and matching, for callers that bind pods (the simulator).
//!
//! Modules: [`resources`] (arithmetic, pod requests), [`requirements`] (label matching and the
//! requirements algebra), [`taints`], [`selectors`], [`topology`] (spread and pod
//! (anti-)affinity groups), [`shapes`] (NodePool x instance type x offering, daemonset
//! overhead), [`state`], [`scheduler`], [`packing`] (the planner interface and its
//! verification), [`strategies`] (the shipped planners), [`result`].

pub mod anticipate;
pub mod builders;
mod chunked;
pub mod disruption;
mod domain_counts;
pub mod filter;
mod free_room;
mod group_lookup;
mod interner;
pub mod model;
pub mod optimize;
pub mod packing;
pub mod queue_shuffle;
pub mod replacements;
pub mod replay;
pub mod requirements;
pub mod resources;
pub mod result;
pub mod scheduler;
pub mod selectors;
pub mod shapes;
pub mod state;
pub mod strategies;
pub mod taints;
pub mod topology;
pub mod zone_balance;

pub use model::*;
pub use result::*;
pub use scheduler::{
    SchedulingOptions, schedule, schedule_capped, schedule_evicted, schedule_on, schedule_shared,
    schedule_with,
};
pub use state::{ClusterState, Evicted, PodSlot};
pub use strategies::Strategy;
