//! The cost-aware heuristic (default).
//!
//! Three ideas on top of the shared greedy engine:
//! - **Mixed order.** Items are sorted by their size normalised by the total demand of each
//!   resource (the dominant share), not by CPU alone, so CPU-heavy and memory-heavy pods are
//!   interleaved and first fit mixes them on the same nodes instead of keeping them apart.
//! - **Capped growth.** When a node opens, the shape that serves the remaining compatible
//!   demand at the lowest price is found: for each shape, price x the number of such nodes the
//!   demand needs, where a node's usable size is its allocatable minus an allowance for
//!   fragmentation (a fraction of the average item), and at least one node. The new node may
//!   then only grow into shapes no more expensive than that target, so it never drifts toward
//!   the largest type (Karpenter #2457) but does grow when bigger is cheaper per unit.
//! - **Cheapest launch.** Each node launches as the cheapest shape that holds its pods plus
//!   daemonset overhead (shared with the baseline).

use crate::packing::{ItemId, LaunchPlan, LaunchPlanner, PackItem, PackingProblem, ShapeId};

use super::greedy::{self, Demand, NodeOrder, Policy};

/// The cost-aware planner.
///
/// It runs two greedy passes in parallel (rayon) and keeps the cheapest plan that places the
/// most items: the capped, mixed pass described above, and Karpenter's own pass, so it is never
/// worse than the baseline on packing; the choice is deterministic (ties go to the capped
/// pass). A third pass (mixed order without the cap) was measured and dropped: it changed one
/// of 272 generated cases. [`CostAwarePlanner::plan_single_pass`] is the capped pass alone.
#[derive(Debug, Clone, Copy)]
pub struct CostAwarePlanner {
    /// Fraction of the average item assumed wasted per node when sizing (0.5 = half an item).
    pub fragmentation_allowance: f64,
}

impl CostAwarePlanner {
    /// Only the capped, mixed pass (for measurements of the heuristic alone).
    pub fn plan_single_pass(&self, problem: &PackingProblem) -> LaunchPlan {
        greedy::run(problem, self)
    }
}

impl Default for CostAwarePlanner {
    fn default() -> Self {
        CostAwarePlanner {
            fragmentation_allowance: 0.5,
        }
    }
}

impl Policy for CostAwarePlanner {
    fn node_order(&self) -> NodeOrder {
        NodeOrder::Creation
    }

    fn item_order(&self, problem: &PackingProblem) -> Vec<ItemId> {
        let mut total_cpu = 0f64;
        let mut total_mem = 0f64;
        for it in &problem.items {
            total_cpu += it.requests.cpu_milli.max(0) as f64;
            total_mem += it.requests.memory.max(0) as f64;
        }
        let (tc, tm) = (total_cpu.max(1.0), total_mem.max(1.0));
        // Split into CPU-heavy and memory-heavy items (relative to the total demand), sort
        // each by dominant share, then interleave so nodes mix the two kinds.
        let mut cpu_heavy: Vec<(f64, ItemId)> = Vec::new();
        let mut mem_heavy: Vec<(f64, ItemId)> = Vec::new();
        for (i, it) in problem.items.iter().enumerate() {
            let c = it.requests.cpu_milli.max(0) as f64 / tc;
            let m = it.requests.memory.max(0) as f64 / tm;
            // Items with extended resources or per-node limits go first: they are the hardest.
            let hard = if it.requests.extended.values().any(|v| *v > 0) || !it.limits.is_empty() {
                1.0
            } else {
                0.0
            };
            if c >= m {
                cpu_heavy.push((hard + c, i as ItemId));
            } else {
                mem_heavy.push((hard + m, i as ItemId));
            }
        }
        let by_size =
            |a: &(f64, ItemId), b: &(f64, ItemId)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        cpu_heavy.sort_by(by_size);
        mem_heavy.sort_by(by_size);
        let mut out = Vec::with_capacity(problem.items.len());
        let (mut a, mut b) = (
            cpu_heavy.into_iter().peekable(),
            mem_heavy.into_iter().peekable(),
        );
        let mut take_cpu = true;
        loop {
            // Hard items first, whichever list they are in.
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x.0 >= 1.0 || y.0 >= 1.0 => {
                    if x.0 >= y.0 {
                        a.next()
                    } else {
                        b.next()
                    }
                }
                (Some(_), Some(_)) => {
                    take_cpu = !take_cpu;
                    if take_cpu { b.next() } else { a.next() }
                }
                (Some(_), None) => a.next(),
                (None, Some(_)) => b.next(),
                (None, None) => None,
            };
            match next {
                Some((_, id)) => out.push(id),
                None => break,
            }
        }
        out
    }

    fn cap(
        &self,
        problem: &PackingProblem,
        opener: &PackItem,
        fitting: &[ShapeId],
        demand: &Demand,
    ) -> f64 {
        let (mut r, n) = demand.around(opener.shape_set);
        // The opener itself was already taken out of the demand.
        r.cpu_milli += opener.requests.cpu_milli;
        r.memory += opener.requests.memory;
        r.pods += opener.requests.pods;
        let n = (n + 1) as f64;
        let avg = [
            r.cpu_milli as f64 / n,
            r.memory as f64 / n,
            r.pods as f64 / n,
        ];
        let want = [r.cpu_milli as f64, r.memory as f64, r.pods as f64];
        let mut best: Option<(f64, f64, ShapeId)> = None;
        for &s in fitting {
            let Some(sh) = problem.shapes.get(s as usize) else {
                continue;
            };
            let alloc = [
                sh.allocatable.cpu_milli as f64,
                sh.allocatable.memory as f64,
                sh.allocatable.pods as f64,
            ];
            let mut nodes: f64 = 1.0;
            for d in 0..3 {
                let (w, a, g) = (want[d], alloc[d], avg[d]);
                if w <= 0.0 {
                    continue;
                }
                let usable = (a - self.fragmentation_allowance * g)
                    .max(a * 0.05)
                    .max(1.0);
                nodes = nodes.max(w / usable);
            }
            let cost = sh.price * nodes;
            let better = match best {
                None => true,
                Some((bc, bp, bs)) => {
                    let tol = 1e-9 * bc.abs().max(1e-12);
                    cost < bc - tol
                        || ((cost - bc).abs() <= tol
                            && (sh.price < bp || (sh.price == bp && s < bs)))
                }
            };
            if better {
                best = Some((cost, sh.price, s));
            }
        }
        let Some((_, cap_price, _)) = best else {
            return f64::INFINITY;
        };
        cap_price + 1e-9 * cap_price.abs().max(1e-12)
    }
}

impl LaunchPlanner for CostAwarePlanner {
    fn name(&self) -> &'static str {
        "cost-aware"
    }

    fn plan(&self, problem: &PackingProblem, warm_start: Option<&LaunchPlan>) -> LaunchPlan {
        let (capped, karpenter) = rayon::join(
            || greedy::run(problem, self),
            || greedy::run(problem, &super::karpenter::KarpenterPlanner),
        );
        let mut best = capped;
        for cand in [Some(karpenter), warm_start.cloned()].into_iter().flatten() {
            if (cand.unplaced.len(), cand.cost) < (best.unplaced.len(), best.cost)
                && cand.cost.is_finite()
            {
                best = cand;
            }
        }
        best
    }
}
