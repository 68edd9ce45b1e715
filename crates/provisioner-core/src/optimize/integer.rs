//! The integer pass: choose whole nodes among the generated patterns, then turn the choice
//! back into a plan the shared checks accept.
//!
//! `min Σ_p price_p x_p` s.t. `Σ_p n_ip x_p >= count_i`, NodePool limits, `x_p ∈ ℕ`, over the
//! patterns that pass the planners' own constraint checks. The heuristic's nodes are patterns
//! too and its plan is handed to the solver as the starting incumbent, so the answer is never
//! worse than the heuristic (the solver starts from it; we also compare and keep the cheaper).

use std::collections::BTreeMap;

use crate::model::Resources;
use crate::packing::{ItemId, LaunchPlan, PackingProblem, PlannedNode, limit_fits};

use super::backend::{self, Backend, LinearProgram, Row, SolveLimits, Var};
use super::clock::{self, Deadline, Until, WorkClock};
use super::pattern::{Checker, Pattern, PatternProblem};

/// How much of one limited resource a node's capacity uses.
type Amount = Box<dyn Fn(&Resources) -> i64>;
/// A first-class field of [`Resources`].
type Field = fn(&Resources) -> i64;

/// Outcome of the integer solve: how many of each column.
pub(crate) struct IntegerSolution {
    pub counts: Vec<(usize, u32)>,
    pub proven_optimal: bool,
}

/// Solves the integer restricted master over `columns`, starting from `warm` (column -> count).
pub(crate) fn solve(
    problem: &PackingProblem,
    pp: &PatternProblem,
    columns: &[Pattern],
    warm: &BTreeMap<usize, u32>,
    backend: Backend,
    clock: &WorkClock,
    deadline: Deadline,
) -> Result<IntegerSolution, backend::BackendError> {
    let mut vars = Vec::with_capacity(columns.len());
    for p in columns {
        let price = pp
            .shapes
            .get(p.shape as usize)
            .map_or(f64::INFINITY, |s| s.price);
        // No column is worth more copies than its most-demanded class needs.
        let hi = p
            .counts
            .iter()
            .filter_map(|(c, n)| {
                pp.classes
                    .get(*c as usize)
                    .map(|cl| cl.count().div_ceil((*n).max(1)))
            })
            .max()
            .unwrap_or(0);
        vars.push(Var {
            lo: 0.0,
            hi: hi as f64,
            integer: true,
            objective: price,
        });
    }
    let mut cover: Vec<Vec<(usize, f64)>> = vec![Vec::new(); pp.classes.len()];
    for (j, p) in columns.iter().enumerate() {
        for (c, n) in &p.counts {
            if let Some(row) = cover.get_mut(*c as usize) {
                row.push((j, *n as f64));
            }
        }
    }
    let mut rows: Vec<Row> = cover
        .into_iter()
        .zip(&pp.classes)
        .map(|(coefs, c)| Row {
            coefs,
            at_least: true,
            rhs: c.count() as f64,
        })
        .collect();
    // NodePool limits: capacity of launched nodes within what each pool has left.
    let mut pools: Vec<u32> = pp.shapes.iter().map(|s| s.pool).collect();
    pools.sort_unstable();
    pools.dedup();
    for pool in pools {
        let Some(rem) = problem
            .pools
            .get(pool as usize)
            .and_then(|p| p.remaining.as_ref())
        else {
            continue;
        };
        let cap_of = |p: &Pattern| {
            pp.shapes
                .get(p.shape as usize)
                .and_then(|s| problem.shapes.get(s.id as usize))
                .map(|s| &s.capacity)
        };
        let in_pool = |p: &Pattern| {
            pp.shapes
                .get(p.shape as usize)
                .is_some_and(|s| s.pool == pool)
        };
        let mut limit_rows: Vec<(Amount, i64)> = Vec::new();
        let firsts: [(Field, i64); 4] = [
            (|r| r.cpu_milli, rem.cpu_milli),
            (|r| r.memory, rem.memory),
            (|r| r.pods, rem.pods),
            (|r| r.ephemeral_storage, rem.ephemeral_storage),
        ];
        for (f, lim) in firsts {
            if lim < i64::MAX {
                limit_rows.push((Box::new(f), lim));
            }
        }
        for (k, lim) in &rem.extended {
            let k = k.clone();
            if k == "nodes" {
                limit_rows.push((Box::new(|_| 1), *lim));
            } else {
                limit_rows.push((
                    Box::new(move |r: &Resources| r.extended.get(&k).copied().unwrap_or(0)),
                    *lim,
                ));
            }
        }
        for (f, lim) in limit_rows {
            let coefs: Vec<(usize, f64)> = columns
                .iter()
                .enumerate()
                .filter(|(_, p)| in_pool(p))
                .filter_map(|(j, p)| cap_of(p).map(|c| (j, f(c) as f64)))
                .filter(|(_, v)| *v != 0.0)
                .collect();
            if !coefs.is_empty() {
                rows.push(Row {
                    coefs,
                    at_least: false,
                    rhs: lim as f64,
                });
            }
        }
    }
    let lp = LinearProgram {
        maximise: false,
        vars,
        rows,
    };
    let warm_values: Vec<f64> = (0..columns.len())
        .map(|j| warm.get(&j).copied().unwrap_or(0) as f64)
        .collect();
    // The node limit is the work budget left (deterministic); the wall clock's safety limit
    // is what a backend without one gets.
    let lines = (lp.rows.len() + lp.vars.len()).max(1) as f64;
    let per_node = lines * clock::MIP_NODE_PER_LINE as f64;
    let limits = SolveLimits {
        nodes: Some((clock.left(deadline) * clock::UNITS_PER_MS / per_node).floor() as u64),
        seconds: Some(clock.wall_left_secs()),
    };
    let sol = backend::solve(backend, &lp, Some(&warm_values), limits)?;
    clock.charge(sol.work_units(&lp));
    let counts = sol
        .values
        .iter()
        .enumerate()
        .filter_map(|(j, v)| {
            if *v > 0.5 {
                Some((j, v.round() as u32))
            } else {
                None
            }
        })
        .collect();
    Ok(IntegerSolution {
        counts,
        proven_optimal: sol.proven_optimal,
    })
}

/// What the dive fixed: whole nodes before the deadline (`fixed`), and with the rest covered
/// greedily by existing columns (`counts`, a complete cover).
pub(crate) struct Dive {
    pub fixed: BTreeMap<usize, u32>,
    pub counts: BTreeMap<usize, u32>,
}

/// LP diving: solves the restricted master LP over `columns` for the demand not yet covered,
/// fixes the integer part of every column (or, when all are fractional below one, one copy of
/// the largest), and repeats; past `deadline` the rest is covered greedily (the column covering
/// the most dual value of the remaining demand per unit of price first). Cheap and, on
/// cutting-stock-like problems, usually within a node or two of the LP bound; the integer pass
/// starts from the better of this and the heuristic. `None` when a pool has limits (the dive
/// ignores them) or an LP fails.
pub(crate) fn dive(
    problem: &PackingProblem,
    pp: &PatternProblem,
    columns: &mut Vec<Pattern>,
    duals: &[f64],
    backend: Backend,
    until: Until<'_>,
    extend: &mut dyn FnMut(&[i64], &mut Vec<Pattern>),
) -> Option<Dive> {
    if pp.shapes.iter().any(|s| {
        problem
            .pools
            .get(s.pool as usize)
            .is_some_and(|p| p.remaining.is_some())
    }) {
        return None;
    }
    let price_of = |p: &Pattern| {
        pp.shapes
            .get(p.shape as usize)
            .map_or(f64::INFINITY, |s| s.price)
    };
    let mut counts: BTreeMap<usize, u32> = BTreeMap::new();
    let mut residual: Vec<i64> = pp.classes.iter().map(|c| c.count() as i64).collect();
    let take = |columns: &[Pattern],
                counts: &mut BTreeMap<usize, u32>,
                residual: &mut Vec<i64>,
                j: usize,
                k: u32| {
        *counts.entry(j).or_insert(0) += k;
        if let Some(p) = columns.get(j) {
            for (c, n) in &p.counts {
                if let Some(r) = residual.get_mut(*c as usize) {
                    *r -= (*n * k) as i64;
                }
            }
        }
    };
    // Bounded: every round fixes at least one node.
    let total: i64 = residual.iter().sum();
    for _ in 0..total.max(1) {
        if residual.iter().all(|r| *r <= 0) || until.past() {
            break;
        }
        // Dive and price: patterns made for the whole round over-cover a small residual; let
        // column generation find patterns for what is left before each LP.
        extend(&residual, columns);
        let vars = columns
            .iter()
            .map(|p| Var {
                lo: 0.0,
                hi: f64::INFINITY,
                integer: false,
                objective: price_of(p),
            })
            .collect();
        let mut cover: Vec<Vec<(usize, f64)>> = vec![Vec::new(); pp.classes.len()];
        for (j, p) in columns.iter().enumerate() {
            for (c, n) in &p.counts {
                if let Some(row) = cover.get_mut(*c as usize) {
                    row.push((j, *n as f64));
                }
            }
        }
        let rows = cover
            .into_iter()
            .zip(&residual)
            .filter(|(_, r)| **r > 0)
            .map(|(coefs, r)| Row {
                coefs,
                at_least: true,
                rhs: *r as f64,
            })
            .collect();
        let lp = LinearProgram {
            maximise: false,
            vars,
            rows,
        };
        let sol = backend::solve(backend, &lp, None, SolveLimits::default()).ok()?;
        until.clock.charge(sol.work_units(&lp));
        let floors: Vec<(usize, u32)> = sol
            .values
            .iter()
            .enumerate()
            .filter_map(|(j, x)| {
                let k = (x + 1e-6).floor();
                (k >= 1.0).then_some((j, k as u32))
            })
            .collect();
        if floors.is_empty() {
            let j = sol
                .values
                .iter()
                .enumerate()
                .filter(|(_, x)| **x > 1e-9)
                .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0)))
                .map(|(j, _)| j)?;
            take(columns, &mut counts, &mut residual, j, 1);
        } else {
            for (j, k) in floors {
                take(columns, &mut counts, &mut residual, j, k);
            }
        }
    }
    let fixed = counts.clone();
    // Whatever is left: greedy cover, weighted by the duals (or 1 when all are zero).
    let weight = |c: usize| duals.get(c).copied().filter(|d| *d > 0.0).unwrap_or(1e-6);
    while residual.iter().any(|r| *r > 0) {
        let mut best: Option<(f64, usize)> = None;
        for (j, p) in columns.iter().enumerate() {
            let gain: f64 = p
                .counts
                .iter()
                .map(|(c, n)| {
                    (*n as i64).min(residual.get(*c as usize).copied().unwrap_or(0).max(0)) as f64
                        * weight(*c as usize)
                })
                .sum();
            if gain <= 0.0 {
                continue;
            }
            let score = gain / price_of(p).max(1e-12);
            if best.is_none_or(|(b, _)| score > b) {
                best = Some((score, j));
            }
        }
        let (_, j) = best?;
        take(columns, &mut counts, &mut residual, j, 1);
    }
    Some(Dive { fixed, counts })
}

/// Turns chosen columns into planned nodes: assigns concrete items class by class, drops
/// surplus slots, and relaunches each node as the cheapest shape that still holds it (never
/// dearer than the pattern's). Fails when some item finds no slot or a node fails the shared
/// checks.
pub(crate) fn to_nodes(
    problem: &PackingProblem,
    pp: &PatternProblem,
    columns: &[Pattern],
    counts: &[(usize, u32)],
) -> Result<Vec<PlannedNode>, String> {
    let (nodes, left) = to_nodes_partial(problem, pp, columns, counts)?;
    match left.first() {
        Some(id) => Err(format!("item {id} is not covered")),
        None => Ok(nodes),
    }
}

/// [`to_nodes`] for columns that may not cover every pod: also returns the pods left over.
pub(crate) fn to_nodes_partial(
    problem: &PackingProblem,
    pp: &PatternProblem,
    columns: &[Pattern],
    counts: &[(usize, u32)],
) -> Result<(Vec<PlannedNode>, Vec<ItemId>), String> {
    let checker = Checker::new(problem);
    let mut queues: Vec<std::collections::VecDeque<ItemId>> = pp
        .classes
        .iter()
        .map(|c| c.items.iter().copied().collect())
        .collect();
    let mut nodes = Vec::new();
    for (j, n) in counts {
        let Some(p) = columns.get(*j) else {
            return Err(format!("column {j} does not exist"));
        };
        let Some(shape) = pp.shapes.get(p.shape as usize) else {
            return Err(format!("pattern shape {} does not exist", p.shape));
        };
        for _ in 0..*n {
            let mut items = Vec::new();
            for (c, k) in &p.counts {
                let Some(q) = queues.get_mut(*c as usize) else {
                    continue;
                };
                for _ in 0..*k {
                    match q.pop_front() {
                        Some(id) => items.push(id),
                        None => break,
                    }
                }
            }
            if items.is_empty() {
                continue;
            }
            items.sort_unstable();
            let Some(mut b) = checker.builder(shape.id) else {
                return Err("no builder".into());
            };
            for &id in &items {
                let Some(item) = problem.items.get(id as usize) else {
                    return Err(format!("item {id} does not exist"));
                };
                if !checker.try_add(&mut b, id, item, shape.id) {
                    return Err(format!(
                        "item {id} fails the shared checks on a {} node",
                        shape.id
                    ));
                }
            }
            // Relaunch as the cheapest survivor, unless the pool has limits (a cheaper shape may
            // have more capacity, which the integer solve did not account for).
            let limited = problem
                .pools
                .get(shape.pool as usize)
                .is_some_and(|p| p.remaining.is_some());
            let launch = if limited {
                shape.id
            } else {
                b.cheapest(problem).unwrap_or(shape.id)
            };
            nodes.push(PlannedNode {
                shape: launch,
                items,
            });
        }
    }
    let left = queues.into_iter().flatten().collect();
    Ok((nodes, left))
}

/// Packs `items` with the cost-aware heuristic on their own, against the same shapes and
/// pools: what the dive leaves when its time runs out. The heuristic is close on a small
/// remainder and, unlike a cover by the round's columns (made for the whole round), sizes its
/// nodes to what is left. `None` when it cannot place them all. Charges `clock` its work.
pub(crate) fn pack_rest(
    problem: &PackingProblem,
    items: &[ItemId],
    clock: &WorkClock,
) -> Option<Vec<PlannedNode>> {
    clock.charge(repack_work(problem, items.len()));
    // Field by field: `..problem.clone()` would copy the round's every item only to drop them,
    // which was a third of a call in the large-neighbourhood search's windows of a few pods.
    let sub = PackingProblem {
        items: items
            .iter()
            .map(|i| problem.items.get(*i as usize).cloned())
            .collect::<Option<Vec<_>>>()?,
        shapes: problem.shapes.clone(),
        by_size: problem.by_size.clone(),
        by_price: problem.by_price.clone(),
        pools: problem.pools.clone(),
        shape_sets: problem.shape_sets.clone(),
        groups: problem.groups,
    };
    let plan = crate::Strategy::CostAware.planner().plan(&sub, None);
    if !plan.unplaced.is_empty() {
        return None;
    }
    plan.nodes
        .into_iter()
        .map(|n| {
            Some(PlannedNode {
                shape: n.shape,
                items: n
                    .items
                    .iter()
                    .map(|i| items.get(*i as usize).copied())
                    .collect::<Option<Vec<_>>>()?,
            })
        })
        .collect()
}

/// Whether launching `nodes` stays within every NodePool's remaining limits.
pub(crate) fn within_pool_limits(problem: &PackingProblem, nodes: &[PlannedNode]) -> bool {
    let mut used: BTreeMap<u32, Resources> = BTreeMap::new();
    for n in nodes {
        if let Some(s) = problem.shapes.get(n.shape as usize) {
            used.entry(s.pool)
                .or_default()
                .add_assign(&s.capacity.clone().with_extended("nodes", 1));
        }
    }
    used.iter().all(|(p, u)| {
        problem
            .pools
            .get(*p as usize)
            .and_then(|p| p.remaining.as_ref())
            .is_none_or(|rem| limit_fits(u, rem))
    })
}

/// The plan's cost.
pub(crate) fn cost(problem: &PackingProblem, nodes: &[PlannedNode]) -> f64 {
    LaunchPlan::from_nodes(problem, nodes.to_vec(), Vec::new()).cost
}

/// Large-neighbourhood search over a plan: frees the pods of a few of its most wasteful nodes
/// (price least covered by the LP's duals of the pods they hold) and repacks them with the
/// heuristic ([`pack_rest`]), keeping a repack that is cheaper, until a full scan finds none
/// or `deadline` passes. The MIP sees only the round's columns; this sees any node the
/// heuristic can build for a handful of pods. A move is kept only when the whole plan passes
/// `allowed` (the caller's rules: NodePool limits, the pools each pod may move to). Returns
/// whether the plan improved.
pub(crate) fn improve(
    problem: &PackingProblem,
    nodes: &mut Vec<PlannedNode>,
    value_of: &dyn Fn(ItemId) -> f64,
    allowed: &dyn Fn(&[PlannedNode]) -> bool,
    until: Until<'_>,
) -> bool {
    let price = |n: &PlannedNode| {
        problem
            .shapes
            .get(n.shape as usize)
            .map_or(f64::INFINITY, |s| s.price)
    };
    let mut improved = false;
    loop {
        // Most wasteful first: the share of its price its pods' duals do not cover.
        let mut ranked: Vec<(f64, usize)> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let covered: f64 = n.items.iter().map(|id| value_of(*id)).sum();
                (1.0 - covered / price(n).max(1e-12), i)
            })
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut found = false;
        'scan: for k in 2..=IMPROVE_MAX_FREED {
            for start in 0..ranked.len().min(IMPROVE_STARTS) {
                if until.past() {
                    return improved;
                }
                let Some(window) = ranked.get(start..start + k) else {
                    break;
                };
                let picked: Vec<usize> = window.iter().map(|(_, i)| *i).collect();
                let freed: Vec<ItemId> = picked
                    .iter()
                    .filter_map(|i| nodes.get(*i))
                    .flat_map(|n| n.items.iter().copied())
                    .collect();
                let before: f64 = picked.iter().filter_map(|i| nodes.get(*i)).map(price).sum();
                let Some(repacked) = pack_rest(problem, &freed, until.clock) else {
                    continue;
                };
                let after: f64 = repacked.iter().map(price).sum();
                if after < before - 1e-9 {
                    let mut next: Vec<PlannedNode> = nodes
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| !picked.contains(i))
                        .map(|(_, n)| n.clone())
                        .collect();
                    next.extend(repacked);
                    if allowed(&next) {
                        *nodes = next;
                        improved = true;
                        found = true;
                        break 'scan;
                    }
                }
            }
        }
        if !found {
            return improved;
        }
    }
}

/// The work of one [`pack_rest`] of `items` pods in [`super::clock`] units: the heuristic
/// tries each pod on the launchable shapes.
fn repack_work(problem: &PackingProblem, items: usize) -> u64 {
    (items as u64 * problem.shapes.len().max(1) as u64).saturating_mul(clock::REPACK_ITEM_SHAPE)
}

/// Nodes one large-neighbourhood move frees at most, and how far down the waste ranking its
/// windows start.
const IMPROVE_MAX_FREED: usize = 4;
const IMPROVE_STARTS: usize = 8;
