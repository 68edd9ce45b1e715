//! The lower bound: LP relaxation of the pattern formulation, by column generation.
//!
//! Master LP: `min Σ_p price_p x_p` s.t. `Σ_p n_ip x_p >= count_i` for every class `i`,
//! `x >= 0`, over all patterns `p`. We solve its dual over the patterns generated so far
//! (`max Σ count_i π_i` s.t. `Σ_i n_ip π_i <= price_p`, `π >= 0`): a dual has one variable per
//! class and one constraint per pattern, so any LP backend works (not only those that report
//! duals), and adding a pattern is adding a cut.
//!
//! Pricing solves, per shape, the knapsack of highest dual value ([`super::knapsack`]). Patterns
//! worth more than their price join the master. The bound is Farley's: for any `π >= 0`, with
//! `ρ` the largest value/price ratio of any pattern of any shape, `π/max(1, ρ)` is dual feasible
//! for the full master, so `Σ count_i π_i / max(1, ρ)` is a lower bound on the LP optimum and on
//! every plan's cost. It is valid at every iteration (not only at convergence), and an upper
//! bound on `ρ` from an unfinished knapsack keeps it valid, so running out of time or work
//! never produces a wrong bound, only a weaker one. At convergence `ρ = 1` and the bound is the
//! LP optimum.
//!
//! What the bound relaxes (so it stays a bound): NodePool limits and `minValues`, and per-node
//! groups beyond a cap every member agrees on ([`super::pattern::GroupCap`]).

use std::collections::HashSet;
use std::time::Instant;

use super::backend::{self, Backend, LinearProgram, Row, SolveLimits, Var};
use super::clock::{Deadline, WorkClock};
use super::knapsack::{self, KItem};
use super::pattern::{Pattern, PatternProblem};

/// A pattern improves the master when its dual value exceeds its price by more than this
/// fraction; below it, the LP solver's own tolerance decides.
const RATIO_TOLERANCE: f64 = 1e-7;

/// Which class sizes the pricing uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sizes {
    /// Largest members: every pattern found fits any members (columns for the integer pass).
    Hi,
    /// Smallest members: a relaxation (certifying the bound).
    Lo,
}

/// Work limits of one column-generation run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits<'c> {
    pub max_iterations: u32,
    pub columns_per_iteration: usize,
    pub knapsack_nodes: u64,
    pub clock: &'c WorkClock,
    pub deadline: Deadline,
    /// When column generation stops without converging and time is left, tighten the bound
    /// with [`certify`] before returning. The optimiser leaves it off and certifies after its
    /// integer pass instead, with the time that pass did not need: the plan comes first.
    pub certify: bool,
}

/// The outcome of pricing one dual vector.
pub(crate) struct Priced {
    /// Patterns with value above their price (best ratio first).
    pub columns: Vec<Pattern>,
    /// A proven upper bound on the largest value/price ratio over all patterns (>= 1).
    pub rho: f64,
    /// Every shape was searched to the end (or ruled out by its relaxation): no improving
    /// pattern was missed, only ones the master already has may be among `columns`' finds.
    pub complete: bool,
}

/// The knapsack items of shape `s` under `duals`: the classes that fit it with a positive dual.
pub(super) fn shape_items(
    pp: &PatternProblem,
    duals: &[f64],
    sizes: Sizes,
    s: usize,
) -> Vec<KItem> {
    let list = match sizes {
        Sizes::Hi => pp.compat_hi.get(s),
        Sizes::Lo => pp.compat_lo.get(s),
    };
    list.into_iter()
        .flatten()
        .filter_map(|&ci| {
            let v = duals.get(ci as usize).copied().unwrap_or(0.0);
            if v <= 1e-12 {
                return None;
            }
            let c = pp.classes.get(ci as usize)?;
            let size = match sizes {
                Sizes::Hi => c.size_hi.clone(),
                Sizes::Lo => c.size_lo.clone(),
            };
            Some(KItem {
                class: ci,
                value: v,
                size,
                max: c.count(),
                groups: c.groups.clone(),
            })
        })
        .collect()
}

/// One shape's pricing knapsack under some duals.
struct Ranked {
    shape: usize,
    items: Vec<KItem>,
    tuned: knapsack::Tuned,
    /// The relaxation's bound on the shape's best value/price ratio (infinite for a free
    /// shape anything fits on).
    root: f64,
}

/// Every shape some class with a positive dual fits, best root ratio first: the order both
/// pricing and [`certify`] search the shapes in.
fn ranked_shapes(
    pp: &PatternProblem,
    duals: &[f64],
    sizes: Sizes,
    clock: &WorkClock,
) -> Vec<Ranked> {
    let mut ranked: Vec<Ranked> = pp
        .shapes
        .iter()
        .enumerate()
        .filter_map(|(s, sh)| {
            let items = shape_items(pp, duals, sizes, s);
            if items.is_empty() {
                return None;
            }
            let tuned = knapsack::tune(&items, &sh.cap);
            clock.charge(knapsack::tune_work(items.len(), sh.cap.len()));
            // A free shape would make the bound meaningless: its ratio is unbounded.
            let root = if sh.price <= 0.0 {
                f64::INFINITY
            } else {
                tuned.bound / sh.price
            };
            Some(Ranked {
                shape: s,
                items,
                tuned,
                root,
            })
        })
        .collect();
    ranked.sort_by(|a, b| b.root.total_cmp(&a.root).then(a.shape.cmp(&b.shape)));
    ranked
}

/// Units of the resource [`knapsack::lagrangian_bound`] keeps integral (a coarser unit past
/// this) and the multiplier search's evaluations: about a millisecond per shape.
const LAGRANGIAN_UNITS: i64 = 512;
const LAGRANGIAN_EVALS: usize = 20;

/// A tighter bound on the best value/price ratio under `duals`, for when pricing stopped
/// without finishing and its bound is the fractional relaxation's. Shapes go best root ratio
/// first; each gets its search and, if that does not finish, the Lagrangian bound, until no
/// shape left could exceed the largest ratio so far (or the deadline, when the next root
/// ratio caps the rest). Always a valid bound, at least 1.
pub(crate) fn certify(
    pp: &PatternProblem,
    duals: &[f64],
    knapsack_nodes: u64,
    clock: &WorkClock,
    deadline: Deadline,
) -> f64 {
    let group_caps: Vec<u32> = pp.groups.iter().map(|g| g.cap).collect();
    let shapes = ranked_shapes(pp, duals, Sizes::Hi, clock);
    let mut rho: f64 = 1.0;
    for Ranked {
        shape,
        items,
        tuned,
        root,
    } in &shapes
    {
        if *root <= rho {
            break;
        }
        if clock.past(deadline) || !root.is_finite() {
            return rho.max(*root);
        }
        let Some(sh) = pp.shapes.get(*shape) else {
            continue;
        };
        let r = knapsack::solve_tuned(items, &sh.cap, tuned, &group_caps, knapsack_nodes);
        clock.charge(r.work);
        let ub = if r.complete {
            r.upper_bound
        } else {
            clock.charge(knapsack::lagrangian_work(
                items.len(),
                sh.cap.len(),
                LAGRANGIAN_UNITS,
                LAGRANGIAN_EVALS,
            ));
            r.upper_bound.min(
                knapsack::lagrangian_bound(items, &sh.cap, LAGRANGIAN_UNITS, LAGRANGIAN_EVALS)
                    .max(r.value),
            )
        };
        rho = rho.max(ub / sh.price);
    }
    rho
}

/// The lower bound certified from column generation's last duals and master value: the
/// master value over the best ratio [`certify`] proves (Farley).
pub(crate) fn certified_bound(
    pp: &PatternProblem,
    duals: &[f64],
    lp_value: f64,
    knapsack_nodes: u64,
    clock: &WorkClock,
    deadline: Deadline,
) -> f64 {
    lp_value / certify(pp, duals, knapsack_nodes, clock, deadline)
}

/// Prices `duals`: finds improving patterns and bounds the best ratio.
pub(crate) fn price(
    pp: &PatternProblem,
    duals: &[f64],
    sizes: Sizes,
    want: usize,
    knapsack_nodes: u64,
    clock: &WorkClock,
    deadline: Deadline,
) -> Priced {
    let group_caps: Vec<u32> = pp.groups.iter().map(|g| g.cap).collect();
    let per_shape = ranked_shapes(pp, duals, sizes, clock);

    let mut columns: Vec<(f64, Pattern)> = Vec::new();
    let mut rho: f64 = 1.0;
    let mut stopped_at = per_shape.len();
    let mut complete = true;
    for (
        k,
        Ranked {
            shape,
            items,
            tuned,
            root,
        },
    ) in per_shape.iter().enumerate()
    {
        // Past `want` columns, stop: the bound from this pass is still valid (the next root
        // bound caps every shape not solved), only weaker; the final pass has no `want`.
        if *root <= 1.0 + 1e-9 {
            stopped_at = k;
            break;
        }
        if columns.len() >= want || (k > 0 && clock.past(deadline)) {
            stopped_at = k;
            complete = false;
            break;
        }
        let Some(sh) = pp.shapes.get(*shape) else {
            continue;
        };
        let r = knapsack::solve_tuned(items, &sh.cap, tuned, &group_caps, knapsack_nodes);
        clock.charge(r.work);
        complete &= r.complete;
        let price = sh.price.max(1e-12);
        let ratio = r.value / price;
        rho = rho.max(r.upper_bound / price);
        if ratio > 1.0 + RATIO_TOLERANCE && !r.counts.is_empty() {
            columns.push((
                ratio,
                Pattern {
                    shape: *shape as u32,
                    counts: r.counts,
                },
            ));
        }
    }
    if let Some(next) = per_shape.get(stopped_at) {
        rho = rho.max(next.root);
    }
    columns.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    Priced {
        columns: columns.into_iter().map(|(_, p)| p).collect(),
        rho,
        complete,
    }
}

/// Solves the dual of the restricted master over `columns`: per-class duals and the LP value.
pub(crate) fn solve_master_dual(
    pp: &PatternProblem,
    columns: &[Pattern],
    backend: Backend,
    clock: &WorkClock,
) -> Result<(Vec<f64>, f64), backend::BackendError> {
    let n = pp.classes.len();
    let vars = pp
        .classes
        .iter()
        .map(|c| Var {
            lo: 0.0,
            hi: f64::INFINITY,
            integer: false,
            objective: c.count() as f64,
        })
        .collect();
    let rows = columns
        .iter()
        .filter_map(|p| {
            let price = pp.shapes.get(p.shape as usize)?.price;
            Some(Row {
                coefs: p
                    .counts
                    .iter()
                    .map(|(c, k)| (*c as usize, *k as f64))
                    .collect(),
                at_least: false,
                rhs: price,
            })
        })
        .collect();
    let lp = LinearProgram {
        maximise: true,
        vars,
        rows,
    };
    let sol = backend::solve(backend, &lp, None, SolveLimits::default())?;
    clock.charge(sol.work_units(&lp));
    let duals: Vec<f64> = (0..n)
        .map(|i| sol.values.get(i).copied().unwrap_or(0.0).max(0.0))
        .collect();
    let value = duals
        .iter()
        .zip(&pp.classes)
        .map(|(d, c)| d * c.count() as f64)
        .sum();
    Ok((duals, value))
}

/// Column generation's result.
#[derive(Debug, Clone)]
pub(crate) struct ColGen {
    /// Every pattern generated (initial ones first), deduplicated.
    pub columns: Vec<Pattern>,
    /// The final duals.
    pub duals: Vec<f64>,
    /// The best valid lower bound seen (Farley), 0 if none.
    pub bound: f64,
    /// The restricted master's last LP value (the bound once converged).
    pub lp_value: f64,
    pub iterations: u32,
    pub converged: bool,
    /// Why it stopped early, if it did.
    pub stopped: Option<String>,
    /// Time in the master LP and in pricing, milliseconds.
    pub lp_ms: f64,
    pub pricing_ms: f64,
}

impl ColGen {
    /// Whether [`certify`] can tighten the bound: column generation stopped short after at
    /// least one iteration, on exact sizes (a coarsened problem certifies its own way).
    pub(crate) fn certifiable(&self, pp: &PatternProblem) -> bool {
        !self.converged && !pp.coarsened && self.iterations > 0
    }
}

/// Runs column generation from `initial` columns (they must cover every class).
pub(crate) fn run(
    pp: &PatternProblem,
    initial: Vec<Pattern>,
    backend: Backend,
    limits: Limits<'_>,
) -> ColGen {
    let mut seen: HashSet<Pattern> = HashSet::new();
    let mut columns = Vec::new();
    for p in initial {
        if seen.insert(p.clone()) {
            columns.push(p);
        }
    }
    let mut out = ColGen {
        columns: Vec::new(),
        duals: vec![0.0; pp.classes.len()],
        bound: 0.0,
        lp_value: 0.0,
        iterations: 0,
        converged: false,
        stopped: None,
        lp_ms: 0.0,
        pricing_ms: 0.0,
    };
    loop {
        if out.iterations >= limits.max_iterations {
            out.stopped = Some(format!("iteration limit {}", limits.max_iterations));
            break;
        }
        if limits.clock.past(limits.deadline) {
            out.stopped = Some("time budget".into());
            break;
        }
        out.iterations += 1;
        let t = Instant::now();
        let lp = solve_master_dual(pp, &columns, backend, limits.clock);
        out.lp_ms += t.elapsed().as_secs_f64() * 1e3;
        let (duals, value) = match lp {
            Ok(x) => x,
            Err(e) => {
                out.stopped = Some(format!("master LP failed: {e}"));
                break;
            }
        };
        out.lp_value = value;
        // Pricing with the largest sizes finds columns; with exact classes it also certifies.
        let t = Instant::now();
        // A quick pass (few columns, small searches) first; a full pass only when it finds
        // nothing, which certifies convergence (or finds what the quick pass missed).
        let quick_nodes = (limits.knapsack_nodes / 50).max(100);
        let mut priced = price(
            pp,
            &duals,
            Sizes::Hi,
            limits.columns_per_iteration,
            quick_nodes,
            limits.clock,
            limits.deadline,
        );
        if priced.columns.is_empty() {
            let quick = (priced.rho, priced.complete);
            priced = price(
                pp,
                &duals,
                Sizes::Hi,
                usize::MAX,
                limits.knapsack_nodes,
                limits.clock,
                limits.deadline,
            );
            // Both passes bound the best ratio; the tighter one stands.
            priced.rho = priced.rho.min(quick.0);
            priced.complete |= quick.1;
        }
        out.pricing_ms += t.elapsed().as_secs_f64() * 1e3;
        if !pp.coarsened {
            out.bound = out.bound.max(value / priced.rho);
        }
        out.duals = duals;
        let mut added = 0;
        for p in priced.columns {
            if seen.insert(p.clone()) {
                columns.push(p);
                added += 1;
            }
        }
        if added == 0 {
            // Converged only when pricing searched everything: a search cut short by its node
            // limit or the deadline finds nothing too, and calling that convergence reported
            // different "converged" bounds for one input. (A finished search may still return
            // columns the master has, when the LP's duals are optimal only to its tolerance.)
            if priced.complete {
                out.converged = true;
            } else {
                out.stopped = Some(format!(
                    "pricing found no new pattern within its search limits but could not rule \
                     one out (best ratio bound {:.4})",
                    priced.rho
                ));
            }
            break;
        }
    }
    if limits.certify && out.certifiable(pp) && !limits.clock.past(limits.deadline) {
        let certified = certified_bound(
            pp,
            &out.duals,
            out.lp_value,
            limits.knapsack_nodes,
            limits.clock,
            limits.deadline,
        );
        out.bound = out.bound.max(certified);
    }
    if pp.coarsened && out.iterations > 0 {
        // Certify with the smallest members: a full pricing pass of the relaxation.
        // Small searches only: an unfinished one still bounds its shape by the root relaxation.
        let cert = price(
            pp,
            &out.duals,
            Sizes::Lo,
            usize::MAX,
            (limits.knapsack_nodes / 100).max(100),
            limits.clock,
            limits.deadline,
        );
        let value: f64 = out
            .duals
            .iter()
            .zip(&pp.classes)
            .map(|(d, c)| d * c.count() as f64)
            .sum();
        out.bound = out.bound.max(value / cert.rho);
    }
    out.columns = columns;
    out
}
