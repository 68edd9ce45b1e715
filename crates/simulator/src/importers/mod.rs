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
    /// `None`: stays until the end. For a Job's pod (`work_seconds`), when it would leave had
    /// it started at once and never been evicted: the lower bound's view of it.
    pub leave: Option<i64>,
    /// A Job's pod: the seconds of work it does once running, done again from the start
    /// after an eviction (the Job controller creates a new pod that starts over). Its
    /// departure follows from when it runs, not from `leave`.
    pub work_seconds: Option<i64>,
    /// Bound at arrival to this existing node (snapshot imports).
    pub bound_to: Option<String>,
}
