//! Inputs of the benchmarks that only the benchmarks use: the EC2 catalog and openb trace as
//! packing problems ([`catalog`]).
//!
//! Karpenter's benchmark shapes (catalog and "diverse" pods), which the simulator uses too,
//! live in the `kcapi-workloads` crate: a simulator must not depend on a bench crate.

pub mod catalog;
