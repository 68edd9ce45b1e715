//! The seeded PRNG every generated workload draws from: `rand_xoshiro`'s [`SplitMix64`]
//! (the rust-random project's implementation of Vigna's `splitmix64.c`), pinned to an exact
//! version in Cargo.toml so a seed gives the same workload on every platform and with every
//! build: benchmark numbers and simulator reports must be reproducible from a seed.
//!
//! Why SplitMix64 and not another `rand` generator: it is the stream this crate produced
//! before it used `rand_xoshiro` (a hand-written SplitMix64), so every seed recorded in the
//! docs and benchmarks still gives the workload it gave; the golden tests below hold that.
//!
//! Why the derivations ([`Rng::f64`], [`Rng::below`], [`Rng::exp`]) are ours rather than
//! `rand`'s distributions (`random_range`, `StandardUniform`, `rand_distr::Exp`): the
//! rust-random book's reproducibility policy allows value-breaking changes to those in any
//! minor release ("Value-breaking changes are permitted in minor versions"), and their
//! algorithms differ from ours (e.g. `random_range` avoids modulo bias by rejection, so it
//! draws a varying number of words), which would change every generated scenario. A PRNG's
//! output stream itself is checked against reference vectors, so pinning the generator crate
//! is enough for it; the few lines of arithmetic below are pinned by being ours.

use rand_core::{Rng as _, SeedableRng};
use rand_xoshiro::SplitMix64;

/// The workloads' seeded generator. The state is the seed as given (`seed_from_u64` keeps the
/// little-endian bytes as the state); callers that have always mixed their seed (the
/// simulator's generators) do so before calling [`Rng::new`], so their seeds keep producing
/// the workloads they produced.
#[derive(Debug, Clone)]
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::seed_from_u64(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `[0, 1)`: the top 53 bits of one draw.
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (modulo, so slightly biased for huge `n`; exact enough for picking
    /// among a few values); 0 when `n` is 0. Always draws once, so the stream a generator sees
    /// after a call does not depend on `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// A uniformly chosen element; `None` for an empty slice.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> Option<&'a T> {
        xs.get(self.below(xs.len()))
    }

    /// Exponential with the given mean (inverse transform of one uniform draw).
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let x = Rng::new(1).f64();
        assert!((0.0..1.0).contains(&x));
        assert_eq!(Rng::new(3).below(0), 0);
        assert_eq!(Rng::new(3).pick::<u8>(&[]), None);
    }

    /// SplitMix64's reference output for seed 0 (Vigna's `splitmix64.c`): the stream is the
    /// published one, not something that merely looks random.
    #[test]
    fn splitmix64_reference() {
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    /// Golden values recorded from the hand-written SplitMix64 this crate used before
    /// `rand_xoshiro` (commit fcba7cf), for every derivation and for seeds at the edges (1,
    /// 42, all ones, and a seed mixed as the simulator's generators mix theirs): every seed
    /// recorded in the docs still gives the workload it gave. A failure here means generated
    /// scenarios and benchmark workloads changed.
    #[test]
    fn same_stream_as_before_rand_xoshiro() {
        type Gold = (u64, [u64; 3], [u64; 3], [usize; 3], [u64; 3], u8);
        let gold: [Gold; 4] = [
            (
                0x1,
                [0x910a2dec89025cc1, 0xbeeb8da1658eec67, 0xf893a2eefb32555e],
                [0x3fdc7061a43b90b2, 0x3fdc6ed53634406c, 0x3fe869a17ff202a0],
                [45, 533, 520],
                [0x4047b2ac29a7170c, 0x402f10b0572c4b6f, 0x403be5e53d8a263a],
                50,
            ),
            (
                0x2a,
                [0xbdd732262feb6e95, 0x28efe333b266f103, 0x47526757130f9f52],
                [0x3fd607387fc392b8, 0x3fa378b0b4489040, 0x3febc8863f47901b],
                [925, 908, 5],
                [0x403ce86d9e22d38f, 0x401b83c77e8eb54c, 0x4034606ea63a532e],
                40,
            ),
            (
                0xffffffffffffffff,
                [0xe4d971771b652c20, 0xe99ff867dbf682c9, 0x382ff84cb27281e9],
                [0x3fdb476cdb32ea60, 0x3fe69408e5caf00d, 0x3fea63b5b7b48717],
                [965, 516, 740],
                [0x3fd788238ccf60f4, 0x3fdbec44d467abbf, 0x4048a2ae1a77038a],
                10,
            ),
            (
                0x9e3779b97f4a7c10,
                [0x8ebb778c6d801508, 0xe1eb9bb664460c41, 0xd8ef386f27f10a03],
                [0x3fe5ec6fb76375ac, 0x3fc161ded4332f70, 0x3fa974d899687a70],
                [32, 808, 407],
                [0x400c6c10569b1292, 0x3ff13ee8be561a74, 0x40481b9464ad83d8],
                40,
            ),
        ];
        for (seed, words, floats, below, exps, pick) in gold {
            let mut r = Rng::new(seed);
            assert_eq!(words.map(|_| r.next_u64()), words, "seed {seed:#x}");
            assert_eq!(floats.map(|_| r.f64().to_bits()), floats, "seed {seed:#x}");
            assert_eq!(below.map(|_| r.below(1000)), below, "seed {seed:#x}");
            assert_eq!(exps.map(|_| r.exp(30.0).to_bits()), exps, "seed {seed:#x}");
            assert_eq!(
                r.pick(&[10u8, 20, 30, 40, 50]),
                Some(&pick),
                "seed {seed:#x}"
            );
        }
    }
}
