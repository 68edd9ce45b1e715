//! The integer pass: choose whole nodes among the generated patterns, then turn the choice
//! back into a plan the shared checks accept.
//!
//! `min Σ_p price_p x_p` s.t. `Σ_p n_ip x_p >= count_i`, NodePool limits, `x_p ∈ ℕ`, over the
//! patterns that pass the planners' own constraint checks. The heuristic's nodes are patterns
//! too and its plan is handed to the solver as the starting incumbent, so the answer is never
//! worse than the heuristic (the solver starts from it; we also compare and keep the cheaper).

use std::collections::BTreeMap;

use crate::packing::{ItemId, LaunchPlan, PackingProblem, PlannedNode, limit_fits};

use super::backend::{self, Backend, LinearProgram, Row, Var};
use super::pattern::{Checker, Pattern, PatternProblem};

/// Outcome of the integer solve: how many of each column.
pub(crate) struct IntegerSolution {
    pub counts: Vec<(usize, u32)>,
    pub proven_optimal: bool,
}

/// Solves the integer restricted master over `columns`, starting from `warm` (column -> count).
pub(crate) fn solve(problem: &PackingProblem, pp: &PatternProblem, columns: &[Pattern], warm: &BTreeMap<usize, u32>, backend: Backend, time_limit: f64) -> Result<IntegerSolution, backend::BackendError> {
    let mut vars = Vec::with_capacity(columns.len());
    for p in columns {
        let price = pp.shapes.get(p.shape as usize).map_or(f64::INFINITY, |s| s.price);
        // No column is worth more copies than its most-demanded class needs.
        let hi = p
            .counts
            .iter()
            .filter_map(|(c, n)| pp.classes.get(*c as usize).map(|cl| cl.count().div_ceil((*n).max(1))))
            .max()
            .unwrap_or(0);
        vars.push(Var { lo: 0.0, hi: hi as f64, integer: true, objective: price });
    }
    let mut cover: Vec<Vec<(usize, f64)>> = vec![Vec::new(); pp.classes.len()];
    for (j, p) in columns.iter().enumerate() {
        for (c, n) in &p.counts {
            if let Some(row) = cover.get_mut(*c as usize) {
                row.push((j, *n as f64));
            }
        }
    }
    let mut rows: Vec<Row> = cover.into_iter().zip(&pp.classes).map(|(coefs, c)| Row { coefs, at_least: true, rhs: c.count() as f64 }).collect();
    // NodePool limits: capacity of launched nodes within what each pool has left.
    let mut pools: Vec<u32> = pp.shapes.iter().map(|s| s.pool).collect();
    pools.sort_unstable();
    pools.dedup();
    for pool in pools {
        let Some(rem) = problem.pools.get(pool as usize).and_then(|p| p.remaining.as_ref()) else { continue };
        let cap_of = |p: &Pattern| pp.shapes.get(p.shape as usize).and_then(|s| problem.shapes.get(s.id as usize)).map(|s| &s.capacity);
        let in_pool = |p: &Pattern| pp.shapes.get(p.shape as usize).is_some_and(|s| s.pool == pool);
        let mut limit_rows: Vec<(Box<dyn Fn(&crate::model::Resources) -> i64>, i64)> = Vec::new();
        let firsts: [(fn(&crate::model::Resources) -> i64, i64); 4] = [(|r| r.cpu_milli, rem.cpu_milli), (|r| r.memory, rem.memory), (|r| r.pods, rem.pods), (|r| r.ephemeral_storage, rem.ephemeral_storage)];
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
                limit_rows.push((Box::new(move |r: &crate::model::Resources| r.extended.get(&k).copied().unwrap_or(0)), *lim));
            }
        }
        for (f, lim) in limit_rows {
            let coefs: Vec<(usize, f64)> = columns.iter().enumerate().filter(|(_, p)| in_pool(p)).filter_map(|(j, p)| cap_of(p).map(|c| (j, f(c) as f64))).filter(|(_, v)| *v != 0.0).collect();
            if !coefs.is_empty() {
                rows.push(Row { coefs, at_least: false, rhs: lim as f64 });
            }
        }
    }
    let lp = LinearProgram { maximise: false, vars, rows };
    let warm_values: Vec<f64> = (0..columns.len()).map(|j| warm.get(&j).copied().unwrap_or(0) as f64).collect();
    let sol = backend::solve(backend, &lp, Some(&warm_values), Some(time_limit))?;
    let counts = sol.values.iter().enumerate().filter_map(|(j, v)| if *v > 0.5 { Some((j, v.round() as u32)) } else { None }).collect();
    Ok(IntegerSolution { counts, proven_optimal: sol.proven_optimal })
}

/// Turns chosen columns into planned nodes: assigns concrete items class by class, drops
/// surplus slots, and relaunches each node as the cheapest shape that still holds it (never
/// dearer than the pattern's). Fails when some item finds no slot or a node fails the shared
/// checks.
pub(crate) fn to_nodes(problem: &PackingProblem, pp: &PatternProblem, columns: &[Pattern], counts: &[(usize, u32)]) -> Result<Vec<PlannedNode>, String> {
    let checker = Checker::new(problem);
    let mut queues: Vec<std::collections::VecDeque<ItemId>> = pp.classes.iter().map(|c| c.items.iter().copied().collect()).collect();
    let mut nodes = Vec::new();
    for (j, n) in counts {
        let Some(p) = columns.get(*j) else { return Err(format!("column {j} does not exist")) };
        let Some(shape) = pp.shapes.get(p.shape as usize) else { return Err(format!("pattern shape {} does not exist", p.shape)) };
        for _ in 0..*n {
            let mut items = Vec::new();
            for (c, k) in &p.counts {
                let Some(q) = queues.get_mut(*c as usize) else { continue };
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
            let Some(mut b) = checker.builder(shape.id) else { return Err("no builder".into()) };
            for &id in &items {
                let Some(item) = problem.items.get(id as usize) else { return Err(format!("item {id} does not exist")) };
                if !checker.try_add(&mut b, id, item, shape.id) {
                    return Err(format!("item {id} fails the shared checks on a {} node", shape.id));
                }
            }
            // Relaunch as the cheapest survivor, unless the pool has limits (a cheaper shape may
            // have more capacity, which the integer solve did not account for).
            let limited = problem.pools.get(shape.pool as usize).is_some_and(|p| p.remaining.is_some());
            let launch = if limited { shape.id } else { b.cheapest(problem).unwrap_or(shape.id) };
            nodes.push(PlannedNode { shape: launch, items });
        }
    }
    if let Some((c, _)) = queues.iter().enumerate().find(|(_, q)| !q.is_empty()) {
        return Err(format!("class {c} is not fully covered"));
    }
    Ok(nodes)
}

/// Whether launching `nodes` stays within every NodePool's remaining limits.
pub(crate) fn within_pool_limits(problem: &PackingProblem, nodes: &[PlannedNode]) -> bool {
    let mut used: BTreeMap<u32, crate::model::Resources> = BTreeMap::new();
    for n in nodes {
        if let Some(s) = problem.shapes.get(n.shape as usize) {
            used.entry(s.pool).or_default().add_assign(&s.capacity.clone().with_extended("nodes", 1));
        }
    }
    used.iter().all(|(p, u)| problem.pools.get(*p as usize).and_then(|p| p.remaining.as_ref()).is_none_or(|rem| limit_fits(u, rem)))
}

/// The plan's cost.
pub(crate) fn cost(problem: &PackingProblem, nodes: &[PlannedNode]) -> f64 {
    LaunchPlan::from_nodes(problem, nodes.to_vec(), Vec::new()).cost
}
