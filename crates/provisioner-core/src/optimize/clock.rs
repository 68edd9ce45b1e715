//! The optimiser's clock: the work done so far, counted in the milliseconds it takes on a
//! reference machine, so that where a budget cuts the search depends on the input alone.
//!
//! A wall-clock budget cut column generation, the dive, the repack and the MIP wherever the
//! machine happened to be when it ran out, so one round planned twice on one machine gave
//! different plans (`examples/karpenter-benchmark.yaml`: 31.0-34.6 run to run, docs/simulator.md
//! round 47), and a plan could not be replayed from its snapshot. Here every phase charges the
//! work it did (knapsack search nodes, surrogate evaluations, simplex pivots, branch-and-bound
//! nodes, heuristic repacks) at a fixed cost per unit, and the phases' shares of the budget are
//! shares of that count. The constants were set so that the count tracks wall time on the
//! 2-core reference machine (`benches/README.md`, "Determinism and the budget"); on a slower
//! machine the same plan takes longer.
//!
//! The wall clock stays as a safety net only: past
//! [`super::OptimizerConfig::wall_clock_factor`] times the budget every phase stops as before,
//! and the result says so ([`super::Stats::wall_clock_hit`]), since then the plan may again
//! differ between runs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Work units in one reference millisecond. A unit is about a nanosecond of the reference
/// machine's time; the per-operation costs below are in units.
pub(crate) const UNITS_PER_MS: f64 = 1_200_000.0;

/// One node of a pricing knapsack's branch and bound.
pub(crate) const KNAPSACK_NODE: u64 = 85;
/// One item of one evaluation of a surrogate relaxation (tuning, greedy seeds, Lagrangian
/// multipliers).
pub(crate) const RELAXATION_ITEM: u64 = 20;
/// One simplex pivot, per row plus column of the LP.
pub(crate) const PIVOT_PER_LINE: u64 = 160;
/// One branch-and-bound node of the integer pass, per row plus column (its LP re-solve).
pub(crate) const MIP_NODE_PER_LINE: u64 = 200;
/// One item of a heuristic repack, per launchable shape (the large-neighbourhood search).
pub(crate) const REPACK_ITEM_SHAPE: u64 = 10;

/// A point on the work clock: reference milliseconds since the optimiser started.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub(crate) struct Deadline(pub f64);

/// A phase's end: its deadline on the clock it runs on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Until<'c> {
    pub clock: &'c WorkClock,
    pub deadline: Deadline,
}

impl Until<'_> {
    /// Whether the phase is over ([`WorkClock::past`]).
    pub(crate) fn past(&self) -> bool {
        self.clock.past(self.deadline)
    }
}

/// Work done and the wall-clock safety net (shared by reference through one optimiser call).
#[derive(Debug)]
pub(crate) struct WorkClock {
    units: AtomicU64,
    wall_limit: Instant,
    wall_hit: AtomicBool,
}

impl WorkClock {
    /// A clock for a budget of `budget_ms` reference milliseconds, starting now, that the
    /// wall clock stops after `wall_factor` budgets.
    pub(crate) fn new(budget_ms: u64, wall_factor: f64) -> WorkClock {
        let wall = Duration::from_millis(budget_ms.max(1)).mul_f64(wall_factor.clamp(1.0, 1e6));
        WorkClock {
            units: AtomicU64::new(0),
            wall_limit: Instant::now() + wall,
            wall_hit: AtomicBool::new(false),
        }
    }

    /// Counts `units` of work done.
    pub(crate) fn charge(&self, units: u64) {
        self.units.fetch_add(units, Ordering::Relaxed);
    }

    /// The work done so far.
    pub(crate) fn now(&self) -> Deadline {
        Deadline(self.units.load(Ordering::Relaxed) as f64 / UNITS_PER_MS)
    }

    /// `ms` reference milliseconds from now.
    pub(crate) fn after(&self, ms: f64) -> Deadline {
        Deadline(self.now().0 + ms.max(0.0))
    }

    /// Reference milliseconds left until `deadline` (0 once past it).
    pub(crate) fn left(&self, deadline: Deadline) -> f64 {
        (deadline.0 - self.now().0).max(0.0)
    }

    /// `share` of what is left until `deadline`, from now.
    pub(crate) fn share_of(&self, deadline: Deadline, share: f64) -> Deadline {
        self.after(self.left(deadline) * share.clamp(0.0, 1.0))
    }

    /// Whether the work has reached `deadline`, or the wall clock its safety limit.
    pub(crate) fn past(&self, deadline: Deadline) -> bool {
        self.now() >= deadline || self.wall_out()
    }

    /// Whether the wall clock passed its safety limit (remembered for the result).
    pub(crate) fn wall_out(&self) -> bool {
        if Instant::now() >= self.wall_limit {
            self.wall_hit.store(true, Ordering::Relaxed);
            true
        } else {
            false
        }
    }

    /// Wall seconds left before the safety limit (what a solver that only knows time gets).
    pub(crate) fn wall_left_secs(&self) -> f64 {
        self.wall_limit
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
    }

    /// Whether the wall clock stopped some phase.
    pub(crate) fn wall_hit(&self) -> bool {
        self.wall_hit.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_move_with_work_not_time() {
        let clock = WorkClock::new(1_000, 4.0);
        let d = clock.after(2.0);
        assert!(!clock.past(d));
        std::thread::sleep(Duration::from_millis(5));
        assert!(
            !clock.past(d),
            "wall time alone does not reach a work deadline"
        );
        clock.charge((2.0 * UNITS_PER_MS) as u64);
        assert!(clock.past(d));
        assert_eq!(clock.left(d), 0.0);
        assert!(!clock.wall_hit());
    }

    #[test]
    fn shares_split_what_is_left() {
        let clock = WorkClock::new(1_000, 4.0);
        clock.charge((10.0 * UNITS_PER_MS) as u64);
        let end = Deadline(110.0);
        let half = clock.share_of(end, 0.5);
        assert!((half.0 - 60.0).abs() < 1e-9, "{half:?}");
    }

    #[test]
    fn the_wall_clock_is_a_safety_net() {
        let clock = WorkClock::new(1, 1.0);
        std::thread::sleep(Duration::from_millis(10));
        assert!(clock.past(Deadline(1e9)));
        assert!(clock.wall_hit());
    }
}
