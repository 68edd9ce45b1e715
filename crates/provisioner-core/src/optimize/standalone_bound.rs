//! The optimiser's LP lower bound for any set of pods, packed from scratch.
//!
//! Why this exists: [`super::Optimizer::optimize`] computes the column-generation bound only
//! for the pods of one provisioning round, after a heuristic plan and before its integer pass.
//! A caller that wants to know what *any* cluster running a given set of pods must cost (the
//! simulator's lower bound over time) needs the same bound with no plan, no integer pass and
//! no pool ranks, for pod sets that never formed a round, and it runs hundreds of times per
//! simulation, so a few iterations must go far. This is that bound, from the optimiser's own
//! pieces (the pattern view, the restricted master and the pricing of [`super::colgen`]) and
//! certified the same way (Farley's bound for every priced dual vector, so its validity
//! argument is the optimiser's). The loop differs in two ways that speed it up without touching
//! validity: it starts from the best price-per-unit blend (feasible prices, see [`super::bound`])
//! and prices smoothed duals (Wentges: halfway between the master's and the best so far), which
//! damps the oscillation behind column generation's slow tail.

use super::clock::{Deadline, WorkClock};
use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::colgen::{self, Sizes};
use super::pattern::{Pattern, PatternProblem};
use super::{Backend, BoundMethod, OptimizerConfig, bound, coarsen};
use crate::packing::{ItemId, PackingProblem};

/// A lower bound on the cost of new nodes for a set of items, with per-item prices behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackingBound {
    /// No set of nodes of the problem's shapes that holds every placeable item costs less
    /// (within solver tolerance). Items that fit no shape of their set are left out.
    pub bound: f64,
    /// Per item (indexed like `problem.items`): a price such that, for any one node of any
    /// shape and any subset of the items that fits it, the prices of those items sum to at
    /// most the shape's price. Their sum is itself a lower bound (at most `bound`), and unlike
    /// `bound` it can be charged against other capacity: a node outside the shapes (an
    /// existing node) that can hold items worth `V` by these prices saves at most `V` minus
    /// its own price. Zero for items that fit no shape; all zero when column generation could
    /// not run.
    pub item_prices: Vec<f64>,
    pub method: BoundMethod,
    /// Distinct classes the items formed (after coarsening, if any).
    pub classes: usize,
    /// The time budget, not a work limit, ended column generation: the bound is still valid
    /// but may differ between runs.
    pub budget_hit: bool,
}

/// The LP relaxation bound of packing `problem.items` onto `problem.shapes` from scratch, by
/// column generation with `config`'s work limits (`max_iterations`, `columns_per_iteration`,
/// `knapsack_nodes`, `max_classes`, `lp_backend`) and `time_budget_ms` as a safety net. Pool
/// ranks, NodePool limits and `minValues` are relaxed, so the bound holds for nodes of any
/// pool in any number. Falls back to the price-per-unit bound when column generation cannot
/// run (too many classes to coarsen, a failed LP), and is never below it. Column generation
/// stops at the iteration limit or once the bound is within 0.5% of the restricted master's
/// LP value (reported as `converged`).
pub fn packing_lower_bound(problem: &PackingProblem, config: &OptimizerConfig) -> PackingBound {
    let clock = WorkClock::new(config.time_budget_ms, config.wall_clock_factor);
    let deadline = Deadline(config.time_budget_ms as f64);
    let lp_backend = config.lp_backend.unwrap_or_else(Backend::default_lp);
    let mut out = PackingBound {
        bound: 0.0,
        item_prices: vec![0.0; problem.items.len()],
        method: BoundMethod::PricePerUnit,
        classes: 0,
        budget_hit: false,
    };
    // Only items some shape of their set can hold; any pool rank is allowed (u32::MAX).
    let placeable: Vec<(ItemId, u32)> = problem
        .items
        .iter()
        .enumerate()
        .filter(|(_, it)| {
            problem.item_shapes(it).iter().any(|s| {
                problem
                    .shapes
                    .get(s as usize)
                    .is_some_and(|sh| it.requests.fits_in(&sh.allocatable))
            })
        })
        .map(|(i, _)| (i as ItemId, u32::MAX))
        .collect();
    if placeable.is_empty() {
        return out;
    }
    let exact = PatternProblem::build(problem, &placeable, None, None);
    let simple = bound::price_per_unit(&exact);
    out.bound = simple;
    out.classes = exact.classes.len();
    let pp = if exact.classes.len() <= config.max_classes {
        exact
    } else {
        match coarsen(problem, &placeable, &exact, config.max_classes) {
            Some((pp, _)) => pp,
            None => return out,
        }
    };
    out.classes = pp.classes.len();
    // Every class alone on its cheapest shape, as full as it fits: a feasible start.
    let mut initial = Vec::with_capacity(pp.classes.len());
    for (ci, c) in pp.classes.iter().enumerate() {
        let best = pp
            .compat_hi
            .iter()
            .enumerate()
            .filter(|(_, l)| l.contains(&(ci as u32)))
            .filter_map(|(s, _)| pp.shapes.get(s).map(|sh| (s, sh)))
            .min_by(|a, b| a.1.price.total_cmp(&b.1.price).then(a.0.cmp(&b.0)));
        let Some((s, sh)) = best else {
            // A class no shape holds with its largest member: the master would be unbounded.
            return out;
        };
        let fit = c
            .size_hi
            .iter()
            .zip(&sh.cap)
            .filter(|(a, _)| **a > 0)
            .map(|(a, b)| (b / a).max(0) as u32)
            .min()
            .unwrap_or(c.count());
        initial.push(Pattern {
            shape: s as u32,
            counts: vec![(ci as u32, fit.min(c.count()).max(1))],
        });
    }
    let limits = colgen::Limits {
        max_iterations: config.max_iterations,
        columns_per_iteration: config.columns_per_iteration,
        knapsack_nodes: config.knapsack_nodes,
        clock: &clock,
        deadline,
        certify: true,
    };
    let (bound, prices, converged, iterations, budget_hit) = if pp.coarsened {
        coarsened_bound(&pp, initial, lp_backend, limits)
    } else {
        smoothed_bound(&pp, initial, lp_backend, limits)
    };
    out.budget_hit = budget_hit;
    if iterations == 0 {
        return out;
    }
    let mut dual_bound = 0.0;
    for (c, p) in pp.classes.iter().zip(&prices) {
        if !p.is_finite() || *p <= 0.0 {
            continue;
        }
        for i in &c.items {
            if let Some(slot) = out.item_prices.get_mut(*i as usize) {
                *slot = *p;
                dual_bound += *p;
            }
        }
    }
    out.bound = simple.max(bound).max(dual_bound);
    out.method = BoundMethod::ColumnGeneration {
        converged,
        iterations,
    };
    out
}

/// `(bound, per-class prices behind it, converged, iterations, budget hit)`.
type Outcome = (f64, Vec<f64>, bool, u32, bool);

/// Coarsened classes: the optimiser's column generation, then one certifying pricing pass
/// with the smallest members' sizes for the prices.
fn coarsened_bound(
    pp: &PatternProblem,
    initial: Vec<Pattern>,
    backend: Backend,
    limits: colgen::Limits<'_>,
) -> Outcome {
    let cg = colgen::run(pp, initial, backend, limits);
    let mut budget_hit = cg.stopped.as_deref() == Some("time budget");
    if cg.iterations == 0 {
        return (0.0, Vec::new(), false, 0, budget_hit);
    }
    let clock = limits.clock;
    let price_deadline = if clock.past(limits.deadline) {
        clock.after(1.0)
    } else {
        limits.deadline
    };
    let priced = colgen::price(
        pp,
        &cg.duals,
        Sizes::Lo,
        usize::MAX,
        limits.knapsack_nodes,
        clock,
        price_deadline,
    );
    budget_hit |= clock.past(price_deadline);
    let rho = priced.rho.max(1.0);
    let prices: Vec<f64> = cg.duals.iter().map(|d| (d / rho).max(0.0)).collect();
    (cg.bound, prices, cg.converged, cg.iterations, budget_hit)
}

/// Per-class prices of the best price-per-unit blend ([`bound`]): feasible for every
/// pattern, so a stability centre to start from.
fn blend_prices(pp: &PatternProblem) -> Vec<f64> {
    bound::best_blend(pp).1
}

/// Weight of the stability centre in the duals that are priced (Wentges smoothing).
const SMOOTHING: f64 = 0.5;

/// Stop once the bound is this close (relative) to the restricted master's LP value, which is
/// at least the LP optimum: column generation's last iterations are slow and add little.
const GAP_TOLERANCE: f64 = 0.005;

/// Column generation with dual smoothing: the duals priced are a mix of the restricted
/// master's and the best ones so far (the stability centre), which keeps them from jumping
/// between extremes, the cause of column generation's slow tail. Every priced dual vector
/// gives a Farley bound; the best is kept with its prices. Exact classes only (the ratio is
/// certified with the sizes that build the columns).
fn smoothed_bound(
    pp: &PatternProblem,
    initial: Vec<Pattern>,
    backend: Backend,
    limits: colgen::Limits<'_>,
) -> Outcome {
    let value_of = |d: &[f64]| -> f64 {
        d.iter()
            .zip(&pp.classes)
            .map(|(d, c)| d * c.count() as f64)
            .sum()
    };
    let mut seen: HashSet<Pattern> = HashSet::new();
    let mut columns: Vec<Pattern> = Vec::new();
    for p in initial {
        if seen.insert(p.clone()) {
            columns.push(p);
        }
    }
    let mut centre = blend_prices(pp);
    let mut best = value_of(&centre);
    let mut best_prices = centre.clone();
    let mut iterations = 0;
    let mut converged = false;
    let mut budget_hit = false;
    let quick_nodes = (limits.knapsack_nodes / 50).max(100);
    while iterations < limits.max_iterations {
        if limits.clock.past(limits.deadline) {
            budget_hit = true;
            break;
        }
        iterations += 1;
        let Ok((duals, lp_value)) = colgen::solve_master_dual(pp, &columns, backend, limits.clock)
        else {
            break;
        };
        if best >= lp_value * (1.0 - GAP_TOLERANCE) {
            converged = true;
            break;
        }
        let mut added = 0;
        // Smoothed duals first; if they find nothing new, the master's own.
        for alpha in [SMOOTHING, 0.0] {
            let sep: Vec<f64> = duals
                .iter()
                .zip(&centre)
                .map(|(d, c)| alpha * c + (1.0 - alpha) * d)
                .collect();
            let mut priced = colgen::price(
                pp,
                &sep,
                Sizes::Hi,
                limits.columns_per_iteration,
                quick_nodes,
                limits.clock,
                limits.deadline,
            );
            if priced.columns.is_empty() {
                priced = colgen::price(
                    pp,
                    &sep,
                    Sizes::Hi,
                    usize::MAX,
                    limits.knapsack_nodes,
                    limits.clock,
                    limits.deadline,
                );
            }
            let rho = priced.rho.max(1.0);
            let farley = value_of(&sep) / rho;
            if farley > best {
                best = farley;
                best_prices = sep.iter().map(|d| (d / rho).max(0.0)).collect();
                centre = sep;
            }
            for p in priced.columns {
                if seen.insert(p.clone()) {
                    columns.push(p);
                    added += 1;
                }
            }
            if added > 0 {
                break;
            }
        }
        if added == 0 {
            converged = true;
            break;
        }
    }
    (best, best_prices, converged, iterations, budget_hit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Resources;
    use crate::packing::{PackItem, PackPool, Shape};

    fn problem(shapes: Vec<Shape>, items: Vec<Resources>) -> PackingProblem {
        PackingProblem::new(
            shapes,
            vec![PackPool::unlimited("default")],
            items
                .into_iter()
                .map(|r| PackItem::for_test(r, &[]))
                .collect(),
        )
    }

    fn shape(cpu: i64, gib: i64, price: f64) -> Shape {
        Shape::for_test(0, Resources::with_pods(cpu, gib << 30, 110), price)
    }

    #[test]
    fn pairs_that_do_not_share_a_node_cost_one_node_each() {
        // 3-vCPU pods on 8-vCPU nodes: two per node, so four pods need two nodes ($0.60),
        // while the per-unit bound only sees 12 vCPU at $0.0375 ($0.45).
        let p = problem(
            vec![shape(2000, 4, 0.10), shape(8000, 16, 0.30)],
            vec![Resources::new(3000, 6 << 30); 4],
        );
        let b = packing_lower_bound(&p, &OptimizerConfig::default());
        assert!((b.bound - 0.60).abs() < 1e-6, "{b:?}");
        let sum: f64 = b.item_prices.iter().sum();
        assert!(sum <= b.bound + 1e-9 && sum > 0.60 - 1e-6, "{b:?}");
        assert!(matches!(b.method, BoundMethod::ColumnGeneration { .. }));
    }

    #[test]
    fn one_small_pod_still_needs_a_whole_node() {
        let p = problem(
            vec![shape(8000, 16, 0.30)],
            vec![Resources::new(500, 1 << 30)],
        );
        let b = packing_lower_bound(&p, &OptimizerConfig::default());
        assert!((b.bound - 0.30).abs() < 1e-6, "{b:?}");
    }

    #[test]
    fn items_that_fit_nothing_are_left_out() {
        let p = problem(
            vec![shape(2000, 4, 0.10)],
            vec![
                Resources::new(1000, 1 << 30),
                Resources::new(64_000, 1 << 30),
            ],
        );
        let b = packing_lower_bound(&p, &OptimizerConfig::default());
        assert!((b.bound - 0.10).abs() < 1e-6, "{b:?}");
        assert_eq!(b.item_prices.get(1).copied(), Some(0.0));
        let empty = problem(vec![shape(2000, 4, 0.10)], Vec::new());
        assert_eq!(
            packing_lower_bound(&empty, &OptimizerConfig::default()).bound,
            0.0
        );
    }
}
