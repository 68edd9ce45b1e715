//! Workload generators shared by the benchmarks and the simulator.
//!
//! Kept as a small public library so the same shapes (Karpenter's own benchmark catalog and
//! "diverse" pods) drive the criterion benches, the cost comparisons and simulator scenarios.

pub mod catalog;
pub mod karpenter_shapes;
