//! The pure heart of karpenter-capi: scheduling simulation, packing and consolidation.
//!
//! Invariant: no IO, no async, no kube or CAPI types. Input is a plain-data [`Snapshot`]-style
//! value and output plain-data decisions, both serde-serializable, so any decision can be
//! replayed from a file.

pub mod builders;
pub mod disruption;
pub mod model;
pub mod optimize;
pub mod packing;
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

pub use model::*;
pub use result::*;
pub use strategies::Strategy;
pub use scheduler::{SchedulingOptions, schedule, schedule_on, schedule_with};
pub use state::ClusterState;
