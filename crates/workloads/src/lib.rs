//! Seeded workload generators shared by the criterion benchmarks (`kcapi-benches`) and the
//! simulator (`karpenter-capi-simulator`), so both measure the same shapes and a change to a
//! shape reaches both.
//!
//! Why a crate of its own:
//! - not `provisioner-core`: the core is the provisioning engine every provider and the
//!   controller link; benchmark fixtures (a fake 400-type catalog, Karpenter's test pods) are
//!   not part of provisioning and would ship in every build of it;
//! - not `kcapi-benches`: a library the simulator binary links must not depend on a bench
//!   crate (criterion, report binaries, data loaders).
//!
//! It depends on `provisioner-core` only, for the model types the benchmarks build directly.
//! Generators are pure functions of a seed ([`Rng`]): the same seed gives the same workload on
//! every platform and with every dependency version, so recorded numbers can be reproduced.

pub mod karpenter;
pub mod rng;

pub use rng::Rng;
