//! The seeded PRNG (`rand_xoshiro`'s SplitMix64, pinned) lives in `kcapi-workloads`, shared
//! with the benches; this re-export keeps `karpenter_capi_simulator::rng::Rng` working. Note
//! that its `new` takes the state as given: the simulator's generators mix their seed first
//! (see `generators`).

pub use kcapi_workloads::Rng;
