//! Importers: recorded workloads and live-cluster snapshots -> simulator inputs.

pub mod kubectl;
pub mod openb;

use provisioner_core as core;

/// One pod of the workload: when it arrives, when it leaves, and where it already runs (for
/// snapshot imports).
#[derive(Debug, Clone, PartialEq)]
pub struct Arrival {
    pub pod: core::Pod,
    /// Seconds of simulated time.
    pub at: i64,
    /// `None`: stays until the end.
    pub leave: Option<i64>,
    /// Bound at arrival to this existing node (snapshot imports).
    pub bound_to: Option<String>,
}
