//! Cost optimisation of a round's new nodes, and a proven lower bound on their cost.
//!
//! [`Optimizer`] is a [`LaunchPlanner`]: it takes the heuristic's plan as its warm start and
//! returns a plan that is never more expensive and passes [`verify`], the same checks the
//! heuristics run while building nodes. Every result carries its cost, a lower bound on the
//! cost of any plan for the same pods, and the gap between them ([`Optimized`]).
//!
//! How (DESIGN.md section 7):
//! 1. **Pattern view** ([`pattern`]): pods become classes of interchangeable pods, launch shapes
//!    are pruned by dominance, a node is a pattern (shape + pods per class).
//! 2. **Decomposition**: classes that share no shape (different zones, NodePools, disjoint
//!    node selectors) are independent problems, solved one after the other with a share of the
//!    budget. Rounds with more distinct request vectors than `max_classes` are coarsened
//!    (requests bucketed; see [`pattern`]); if that cannot bring them under the limit the
//!    heuristic's plan is kept. The result says which happened ([`Decomposition`]).
//! 3. **Lower bound** ([`colgen`]): the LP relaxation of the pattern formulation by column
//!    generation, certified with Farley's bound at every iteration, so it is valid whenever the
//!    budget ends; the price-per-unit bound ([`bound`]) is the fallback and a floor.
//! 4. **Integer pass** ([`integer`]): first LP diving with pricing (fix the integer part of the
//!    restricted master's LP solution, generate patterns for the residual demand, repeat; when
//!    its time ends, what is left goes to the heuristic on its own), then a large-neighbourhood
//!    search over the best plan so far (the pods of its most wasteful nodes repacked by the
//!    heuristic), then an ILP over the generated patterns that pass the shared checks,
//!    warm-started from the cheapest of the dive, its heuristic-packed remainder and the
//!    heuristic's nodes, with the rest of the budget. The pricing knapsacks start from a greedy
//!    pattern ([`knapsack`]): the numbers behind each step are in `benches/README.md`.
//! 5. The chosen patterns become nodes with concrete pods; each node relaunches as the cheapest
//!    shape that still holds it; the plan is [`verify`]d and compared with the heuristic's. If
//!    verification fails (it should not) the heuristic's plan is returned and the result says so.
//!
//! Pools: an item may move to a NodePool ranked at least as high as the one the heuristic put it
//! in, never lower, so NodePool weights keep their meaning (a higher-weight pool is preferred
//! even when a lower-weight one is cheaper).
//!
//! Determinism: every loop has a work limit (column-generation iterations, columns per
//! iteration, knapsack search nodes, ILP columns), and the order of everything is fixed, so a
//! given input gives the same plan whenever the work limits end the search before the time
//! budget does. The time budget is a safety net for slow machines and huge rounds; when it is
//! what ends a phase, the plan is still valid and never worse than the heuristic, but may differ
//! between runs. The result reports whether the budget cut anything ([`Stats::budget_hit`]).

mod backend;
mod bound;
mod clock;
mod colgen;
mod integer;
mod knapsack;
pub mod large_rounds;
mod pattern;
mod standalone_bound;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

pub use backend::{Backend, BackendError};
pub use large_rounds::{LargeRoundPlanner, LargeRounds};
pub use standalone_bound::{PackingBound, packing_lower_bound};

use crate::packing::{ItemId, LaunchPlan, LaunchPlanner, PackingProblem, PlannedNode, verify};
use crate::strategies::cost_aware::CostAwarePlanner;
use clock::{Deadline, WorkClock};
use pattern::{Checker, Pattern, PatternProblem};

/// How a plan's notes say the wall clock's safety net, not the work budget, stopped the
/// optimiser ([`Stats::wall_clock_hit`]): the one case where a plan may differ between runs.
pub const WALL_CLOCK_NOTE: &str = "optimiser stopped by the wall clock";

/// Knobs of the optimiser. The defaults fit well inside the 1 s batch window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OptimizerConfig {
    /// Budget for the whole pass (bound + integer pass), in milliseconds of work on the
    /// reference machine ([`clock`]): the plan depends on the input only, and takes about
    /// this long on a machine like the reference.
    pub time_budget_ms: u64,
    /// The wall clock stops every phase after this many budgets of wall time (a much slower
    /// or busier machine than the reference); the plan may then differ between runs
    /// ([`Stats::wall_clock_hit`]).
    pub wall_clock_factor: f64,
    /// Share of a component's budget column generation may use before the integer pass.
    pub column_generation_share: f64,
    /// LP backend for column generation; `None` = the best compiled in.
    pub lp_backend: Option<Backend>,
    /// MIP backend for the integer pass; `None` = the best compiled in.
    pub mip_backend: Option<Backend>,
    pub max_iterations: u32,
    pub columns_per_iteration: usize,
    /// Branch-and-bound nodes per knapsack (pricing) solve.
    pub knapsack_nodes: u64,
    /// Above this many classes a round is coarsened.
    pub max_classes: usize,
    /// Most columns handed to the integer pass (best reduced cost first, plus the heuristic's).
    pub max_integer_columns: usize,
    /// Share of a component's budget kept back from the integer pass, when column generation
    /// stopped without converging, to tighten the bound afterwards ([`colgen::certify`]). At
    /// 0.1 the bounds of the quality inputs rose by 0.3-2.5% with the plans within their
    /// run-to-run spread (`benches/README.md`).
    pub certify_share: f64,
}

impl Default for OptimizerConfig {
    fn default() -> Self {
        OptimizerConfig {
            time_budget_ms: 300,
            wall_clock_factor: 4.0,
            column_generation_share: 0.5,
            lp_backend: None,
            mip_backend: None,
            max_iterations: 100,
            columns_per_iteration: 10,
            knapsack_nodes: 5_000,
            max_classes: 250,
            max_integer_columns: 150,
            certify_share: 0.1,
        }
    }
}

/// Which bound the result reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum BoundMethod {
    /// Column generation (summed over independent components), at least the simple bound.
    ColumnGeneration { converged: bool, iterations: u32 },
    /// Price per unit of resource only (column generation had no time or failed).
    PricePerUnit,
}

/// What the optimiser did with the heuristic's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Method {
    /// The integer pass found a cheaper plan; `proven_optimal` if optimal over the generated
    /// patterns in every component.
    Optimised { proven_optimal: bool },
    /// The heuristic's plan is returned, and why (nothing cheaper found, no time, failure).
    Heuristic { reason: String },
}

/// How the round was split.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decomposition {
    /// Independent components (classes sharing no launch shape) solved separately.
    pub components: usize,
    /// Distinct classes after (possible) coarsening.
    pub classes: usize,
    /// Classes before coarsening.
    pub classes_exact: usize,
    /// Requests were bucketed to bring the class count under `max_classes`.
    pub coarsened: bool,
}

/// Work done, for reports.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Stats {
    pub items: usize,
    pub shapes: usize,
    /// Shapes left after dominance pruning.
    pub shapes_kept: usize,
    pub columns: usize,
    pub integer_columns: usize,
    pub iterations: u32,
    pub bound_ms: f64,
    /// Of `bound_ms`: master LP solves and pricing.
    pub lp_ms: f64,
    pub pricing_ms: f64,
    pub integer_ms: f64,
    pub total_ms: f64,
    /// The budget ([`OptimizerConfig::time_budget_ms`], counted as work: [`clock`]), not
    /// one of the other work limits, ended some phase. The plan is the same on every run.
    pub budget_hit: bool,
    /// The wall clock's safety net (several budgets of wall time) ended some phase: the
    /// machine was much slower than the reference, and the plan may differ between runs.
    #[serde(default)]
    pub wall_clock_hit: bool,
    pub lp_backend: String,
    pub mip_backend: String,
}

/// A plan with its cost, lower bound and gap.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Optimized {
    /// The plan (its `lower_bound` is set).
    pub plan: LaunchPlan,
    /// Cost of the warm start (the heuristic's plan).
    pub heuristic_cost: f64,
    pub cost: f64,
    /// No plan placing the same pods costs less (within solver tolerance).
    pub lower_bound: f64,
    pub bound_method: BoundMethod,
    /// `(cost - bound) / bound` in percent; `None` when the bound is 0.
    pub gap_pct: Option<f64>,
    pub method: Method,
    pub decomposition: Decomposition,
    pub stats: Stats,
}

/// `(cost - bound) / bound` in percent.
pub fn gap_pct(cost: f64, bound: f64) -> Option<f64> {
    if bound > 0.0 {
        Some((cost - bound) / bound * 100.0)
    } else if cost <= 0.0 {
        Some(0.0)
    } else {
        None
    }
}

/// The optimisation pass, a [`LaunchPlanner`].
#[derive(Debug, Clone, Default)]
pub struct Optimizer {
    pub config: OptimizerConfig,
}

impl LaunchPlanner for Optimizer {
    fn name(&self) -> &'static str {
        "optimiser"
    }

    fn plan(&self, problem: &PackingProblem, warm_start: Option<&LaunchPlan>) -> LaunchPlan {
        let optimized = self.optimize(problem, warm_start);
        let mut plan = optimized.plan;
        plan.notes.push(match &optimized.method {
            Method::Optimised {
                proven_optimal: true,
            } => "optimised (proven optimal over the generated patterns)".to_string(),
            Method::Optimised { .. } => "optimised".to_string(),
            Method::Heuristic { reason } => format!("heuristic kept: {reason}"),
        });
        if optimized.stats.wall_clock_hit {
            plan.notes.push(format!(
                "{WALL_CLOCK_NOTE} after {} budgets (a machine much slower than the reference): \
                 this plan may differ between runs",
                self.config.wall_clock_factor
            ));
        }
        let d = &optimized.decomposition;
        if d.coarsened {
            plan.notes.push(format!(
                "coarsened {}→{} request classes",
                d.classes_exact, d.classes
            ));
        }
        if d.components > 1 {
            plan.notes.push(format!(
                "decomposed into {} independent parts",
                d.components
            ));
        }
        plan
    }
}

/// A component's answer.
struct Part {
    nodes: Vec<PlannedNode>,
    bound: f64,
    converged: bool,
    iterations: u32,
    columns: usize,
    integer_columns: usize,
    optimised: bool,
    proven_optimal: bool,
    note: Option<String>,
    budget_hit: bool,
    shapes_kept: usize,
    shapes: usize,
    bound_ms: f64,
    lp_ms: f64,
    pricing_ms: f64,
    integer_ms: f64,
    /// Column generation's last duals and master value when it stopped without converging:
    /// what [`Optimizer::certify`] tightens the bound from once the integer pass is done.
    uncertified: Option<(Vec<f64>, f64)>,
}

impl Optimizer {
    pub fn new(config: OptimizerConfig) -> Optimizer {
        Optimizer { config }
    }

    /// Optimises the warm start (or the cost-aware heuristic's plan when there is none) and
    /// reports cost, bound and gap.
    pub fn optimize(&self, problem: &PackingProblem, warm_start: Option<&LaunchPlan>) -> Optimized {
        let start = Instant::now();
        let clock = WorkClock::new(self.config.time_budget_ms, self.config.wall_clock_factor);
        let deadline = Deadline(self.config.time_budget_ms as f64);
        let lp_backend = self.config.lp_backend.unwrap_or_else(Backend::default_lp);
        let mip_backend = self.config.mip_backend.or_else(Backend::default_mip);
        let mut notes = Vec::new();
        let heuristic = match warm_start {
            Some(w) if verify(problem, w).is_ok() => w.clone(),
            Some(_) => {
                notes.push(
                    "the warm start failed verification; the cost-aware plan was used instead"
                        .to_string(),
                );
                CostAwarePlanner::default().plan(problem, None)
            }
            None => CostAwarePlanner::default().plan(problem, None),
        };
        let mut stats = Stats {
            lp_backend: lp_backend.name().into(),
            mip_backend: mip_backend.map_or("none", Backend::name).into(),
            items: heuristic.nodes.iter().map(|n| n.items.len()).sum(),
            ..Stats::default()
        };

        // Items to optimise: those the heuristic placed, each with the best pool rank allowed.
        let placed: Vec<(ItemId, u32)> = heuristic
            .nodes
            .iter()
            .flat_map(|n| {
                let rank = problem
                    .shapes
                    .get(n.shape as usize)
                    .and_then(|s| problem.pools.get(s.pool as usize))
                    .map_or(0, |p| p.rank);
                n.items.iter().map(move |i| (*i, rank))
            })
            .collect();
        let exact = PatternProblem::build(problem, &placed, None, None);
        let simple = bound::price_per_unit(&exact);
        let classes_exact = exact.classes.len();
        let (pp, steps, coarsened) = if exact.classes.len() <= self.config.max_classes {
            (Some(exact), None, false)
        } else {
            match coarsen(problem, &placed, &exact, self.config.max_classes) {
                Some((pp, steps)) => (Some(pp), Some(steps), true),
                None => (None, None, false),
            }
        };
        let mut decomposition = Decomposition {
            components: 0,
            classes: classes_exact,
            classes_exact,
            coarsened,
        };
        let finish = |plan: LaunchPlan,
                      bound: f64,
                      bound_method: BoundMethod,
                      method: Method,
                      decomposition: Decomposition,
                      mut stats: Stats| {
            stats.total_ms = start.elapsed().as_secs_f64() * 1e3;
            let mut plan = plan;
            let bound = bound.max(0.0);
            plan.lower_bound = Some(bound);
            Optimized {
                heuristic_cost: heuristic.cost,
                cost: plan.cost,
                lower_bound: bound,
                bound_method,
                gap_pct: gap_pct(plan.cost, bound),
                method,
                decomposition,
                stats,
                plan,
            }
        };
        let Some(pp) = pp else {
            notes.push(format!(
                "{classes_exact} classes could not be coarsened under {}; heuristic plan kept",
                self.config.max_classes
            ));
            return finish(
                heuristic.clone(),
                simple,
                BoundMethod::PricePerUnit,
                Method::Heuristic {
                    reason: notes.join("; "),
                },
                decomposition,
                stats,
            );
        };
        decomposition.classes = pp.classes.len();

        // Independent components, each with the heuristic's nodes that hold its pods.
        let comps = components(problem, &pp);
        decomposition.components = comps.len();
        let mut class_of: BTreeMap<ItemId, usize> = BTreeMap::new();
        for (ci, c) in pp.classes.iter().enumerate() {
            for i in &c.items {
                class_of.insert(*i, ci);
            }
        }
        let mut comp_of_class = vec![0usize; pp.classes.len()];
        for (k, comp) in comps.iter().enumerate() {
            for c in comp {
                if let Some(slot) = comp_of_class.get_mut(*c) {
                    *slot = k;
                }
            }
        }
        let mut heur_nodes: Vec<Vec<PlannedNode>> = vec![Vec::new(); comps.len()];
        for n in &heuristic.nodes {
            let k = n
                .items
                .first()
                .and_then(|i| class_of.get(i))
                .and_then(|c| comp_of_class.get(*c))
                .copied()
                .unwrap_or(0);
            if let Some(v) = heur_nodes.get_mut(k) {
                v.push(n.clone());
            }
        }

        let rank_of_item: BTreeMap<ItemId, u32> = placed.iter().copied().collect();
        let total_classes: usize = comps.iter().map(Vec::len).sum::<usize>().max(1);
        let mut remaining_classes = total_classes;
        let mut parts = Vec::with_capacity(comps.len());
        for (k, comp) in comps.iter().enumerate() {
            let share = comp.len() as f64 / remaining_classes.max(1) as f64;
            remaining_classes = remaining_classes.saturating_sub(comp.len());
            let comp_deadline = clock.share_of(deadline, share);
            let items: Vec<(ItemId, u32)> = comp
                .iter()
                .filter_map(|c| pp.classes.get(*c))
                .flat_map(|c| c.items.iter().copied())
                .filter_map(|i| rank_of_item.get(&i).map(|r| (i, *r)))
                .collect();
            let sub = if comps.len() == 1 {
                pp.clone()
            } else {
                PatternProblem::build(problem, &items, steps.as_deref(), None)
            };
            let nodes = heur_nodes.get(k).cloned().unwrap_or_default();
            let until = clock::Until {
                clock: &clock,
                deadline: comp_deadline,
            };
            let mut part = self.solve_part(problem, &sub, nodes, until, lp_backend, mip_backend);
            self.certify(&sub, &mut part, &clock, comp_deadline);
            parts.push(part);
        }

        let cg_bound: f64 = parts.iter().map(|p| p.bound).sum();
        let iterations = parts.iter().map(|p| p.iterations).max().unwrap_or(0);
        let bound_method = if parts.iter().any(|p| p.iterations > 0) {
            BoundMethod::ColumnGeneration {
                converged: parts.iter().all(|p| p.converged),
                iterations,
            }
        } else {
            BoundMethod::PricePerUnit
        };
        let bound = cg_bound.max(simple);
        stats.iterations = iterations;
        stats.columns = parts.iter().map(|p| p.columns).sum();
        stats.integer_columns = parts.iter().map(|p| p.integer_columns).sum();
        stats.budget_hit = parts.iter().any(|p| p.budget_hit);
        stats.wall_clock_hit = clock.wall_hit();
        stats.shapes = parts.iter().map(|p| p.shapes).sum();
        stats.shapes_kept = parts.iter().map(|p| p.shapes_kept).sum();
        stats.bound_ms = parts.iter().map(|p| p.bound_ms).sum();
        stats.lp_ms = parts.iter().map(|p| p.lp_ms).sum();
        stats.pricing_ms = parts.iter().map(|p| p.pricing_ms).sum();
        stats.integer_ms = parts.iter().map(|p| p.integer_ms).sum();
        for p in &parts {
            if let Some(n) = &p.note {
                notes.push(n.clone());
            }
        }

        let optimised_any = parts.iter().any(|p| p.optimised);
        if !optimised_any {
            if notes.is_empty() {
                notes.push("no cheaper plan found".into());
            }
            return finish(
                heuristic.clone(),
                bound,
                bound_method,
                Method::Heuristic {
                    reason: notes.join("; "),
                },
                decomposition,
                stats,
            );
        }
        let proven_optimal = parts.iter().all(|p| p.proven_optimal);
        let nodes: Vec<PlannedNode> = parts.into_iter().flat_map(|p| p.nodes).collect();
        let plan = LaunchPlan::from_nodes(problem, nodes, heuristic.unplaced.clone());
        if plan.cost >= heuristic.cost - 1e-9 {
            notes.push("no cheaper plan found".into());
            return finish(
                heuristic.clone(),
                bound,
                bound_method,
                Method::Heuristic {
                    reason: notes.join("; "),
                },
                decomposition,
                stats,
            );
        }
        if let Err(errs) = verify(problem, &plan) {
            let first = errs.first().map(ToString::to_string).unwrap_or_default();
            notes.push(format!("the optimised plan failed verification ({} problems, first: {first}); heuristic plan kept", errs.len()));
            return finish(
                heuristic.clone(),
                bound,
                bound_method,
                Method::Heuristic {
                    reason: notes.join("; "),
                },
                decomposition,
                stats,
            );
        }
        finish(
            plan,
            bound,
            bound_method,
            Method::Optimised { proven_optimal },
            decomposition,
            stats,
        )
    }

    /// With the time the integer pass left (at least the share kept back for it), a tighter
    /// bound for a component whose column generation stopped without converging
    /// ([`colgen::certify`]).
    fn certify(&self, pp: &PatternProblem, part: &mut Part, clock: &WorkClock, deadline: Deadline) {
        if let Some((duals, value)) = part.uncertified.take()
            && !part.proven_optimal
            && !clock.past(deadline)
        {
            let start = Instant::now();
            let certified = colgen::certified_bound(
                pp,
                &duals,
                value,
                self.config.knapsack_nodes,
                clock,
                deadline,
            );
            part.bound = part.bound.max(certified);
            part.bound_ms += start.elapsed().as_secs_f64() * 1e3;
        }
    }

    /// Bound and integer pass for one independent component.
    fn solve_part(
        &self,
        problem: &PackingProblem,
        pp: &PatternProblem,
        heur_nodes: Vec<PlannedNode>,
        until: clock::Until<'_>,
        lp_backend: Backend,
        mip_backend: Option<Backend>,
    ) -> Part {
        let clock::Until { clock, deadline } = until;
        let start = Instant::now();
        let begun = clock.now();
        let span = (deadline.0 - begun.0).max(0.0);
        let heuristic_cost = integer::cost(problem, &heur_nodes);
        let mut part = Part {
            nodes: heur_nodes.clone(),
            bound: bound::price_per_unit(pp),
            converged: false,
            iterations: 0,
            columns: 0,
            integer_columns: 0,
            optimised: false,
            proven_optimal: false,
            note: None,
            budget_hit: false,
            shapes_kept: pp.shapes.len(),
            shapes: pp.shapes_before,
            bound_ms: 0.0,
            lp_ms: 0.0,
            pricing_ms: 0.0,
            integer_ms: 0.0,
            uncertified: None,
        };
        if pp.classes.is_empty() {
            return part;
        }
        let checker = Checker::new(problem);
        let mut class_of: BTreeMap<ItemId, u32> = BTreeMap::new();
        for (ci, c) in pp.classes.iter().enumerate() {
            for i in &c.items {
                class_of.insert(*i, ci as u32);
            }
        }
        // The heuristic's nodes as patterns (on their representative shape).
        let heur_patterns: Vec<Pattern> = heur_nodes
            .iter()
            .filter_map(|n| pattern_of(pp, &class_of, n))
            .collect();
        // Every class alone on its cheapest shape, as full as it fits: the master is feasible
        // from the start even if some heuristic node maps to nothing.
        let mut initial = heur_patterns.clone();
        for (ci, c) in pp.classes.iter().enumerate() {
            let best = pp
                .compat_hi
                .iter()
                .enumerate()
                .filter(|(_, l)| l.contains(&(ci as u32)))
                .filter_map(|(s, _)| pp.shapes.get(s).map(|sh| (s, sh)))
                .min_by(|a, b| a.1.price.total_cmp(&b.1.price).then(a.0.cmp(&b.0)));
            if let Some((s, sh)) = best {
                let fit = c
                    .size_hi
                    .iter()
                    .zip(&sh.cap)
                    .filter(|(a, _)| **a > 0)
                    .map(|(a, b)| (b / a).max(0) as u32)
                    .min()
                    .unwrap_or(c.count());
                let mut n = fit.min(c.count()).max(1);
                if let Some(cap) = c
                    .groups
                    .iter()
                    .filter_map(|g| pp.groups.get(*g))
                    .map(|g| g.cap)
                    .min()
                {
                    n = n.min(cap.max(1));
                }
                initial.push(Pattern {
                    shape: s as u32,
                    counts: vec![(ci as u32, n)],
                });
            }
        }

        let cg_deadline =
            Deadline(begun.0 + span * self.config.column_generation_share.clamp(0.05, 0.95));
        let limits = colgen::Limits {
            max_iterations: self.config.max_iterations,
            columns_per_iteration: self.config.columns_per_iteration,
            knapsack_nodes: self.config.knapsack_nodes,
            clock,
            deadline: cg_deadline,
            certify: false,
        };
        let cg = colgen::run(pp, initial, lp_backend, limits);
        part.iterations = cg.iterations;
        part.converged = cg.converged;
        part.bound = part.bound.max(cg.bound);
        part.columns = cg.columns.len();
        part.lp_ms = cg.lp_ms;
        part.pricing_ms = cg.pricing_ms;
        if cg.certifiable(pp) {
            part.uncertified = Some((cg.duals.clone(), cg.lp_value));
        }
        // Time kept back from the integer pass for certifying the bound afterwards.
        let deadline = if part.uncertified.is_some() {
            Deadline(deadline.0 - span * self.config.certify_share.clamp(0.0, 0.5))
        } else {
            deadline
        };
        if cg.stopped.as_deref() == Some("time budget") {
            part.budget_hit = true;
        }
        if let Some(s) = cg
            .stopped
            .as_ref()
            .filter(|s| s.starts_with("master LP failed"))
        {
            part.note = Some(s.clone());
        }
        part.bound_ms = start.elapsed().as_secs_f64() * 1e3;

        // Already optimal: nothing to gain.
        if heuristic_cost <= part.bound * (1.0 + 1e-9) {
            return part;
        }
        let Some(mip_backend) = mip_backend else {
            part.note = Some("no MIP backend compiled in; heuristic plan kept".into());
            return part;
        };
        let int_start = Instant::now();
        // Columns that pass the shared checks (repaired when they do not), heuristic's first.
        let mut priority: Vec<u32> = (0..pp.classes.len() as u32).collect();
        priority.sort_by(|a, b| {
            let da = cg.duals.get(*a as usize).copied().unwrap_or(0.0);
            let db = cg.duals.get(*b as usize).copied().unwrap_or(0.0);
            db.total_cmp(&da).then(a.cmp(b))
        });
        let mut index: BTreeMap<Pattern, usize> = BTreeMap::new();
        let mut cols: Vec<Pattern> = Vec::new();
        let mut warm: BTreeMap<usize, u32> = BTreeMap::new();
        let mut warm_ok = true;
        for p in &heur_patterns {
            if !checker.pattern_ok(pp, p) {
                warm_ok = false;
                continue;
            }
            let j = *index.entry(p.clone()).or_insert_with(|| {
                cols.push(p.clone());
                cols.len() - 1
            });
            *warm.entry(j).or_insert(0) += 1;
        }
        let reduced_cost = |p: &Pattern| -> f64 {
            let price = pp
                .shapes
                .get(p.shape as usize)
                .map_or(f64::INFINITY, |s| s.price);
            price
                - p.counts
                    .iter()
                    .map(|(c, n)| cg.duals.get(*c as usize).copied().unwrap_or(0.0) * *n as f64)
                    .sum::<f64>()
        };
        let mut others: Vec<(f64, Pattern)> = Vec::new();
        for p in &cg.columns {
            if index.contains_key(p) {
                continue;
            }
            let ok = if checker.pattern_ok(pp, p) {
                Some(p.clone())
            } else {
                checker.repair(pp, p, &priority)
            };
            if let Some(q) = ok
                && !index.contains_key(&q)
            {
                others.push((reduced_cost(&q), q));
            }
        }
        others.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        others.dedup_by(|a, b| a.1 == b.1);
        let cap = self.config.max_integer_columns.max(heur_patterns.len());
        let mut rest = Vec::new();
        for (rc, p) in others {
            if cols.len() >= cap {
                rest.push((rc, p));
                continue;
            }
            index.insert(p.clone(), cols.len());
            cols.push(p);
        }
        // Each class needs some column: add the best left-out one covering it.
        for ci in 0..pp.classes.len() as u32 {
            if cols.iter().any(|p| p.counts.iter().any(|(c, _)| *c == ci)) {
                continue;
            }
            if let Some((_, p)) = rest
                .iter()
                .find(|(_, p)| p.counts.iter().any(|(c, _)| *c == ci))
            {
                cols.push(p.clone());
            } else {
                part.note = Some(format!(
                    "class {ci} has no checked pattern; heuristic plan kept for its component"
                ));
                return part;
            }
        }
        part.integer_columns = cols.len();
        // A partial warm start may be infeasible, which some solvers reject: only a whole one.
        if !warm_ok {
            warm.clear();
        }
        let mut best_cost = heuristic_cost;
        let consider = |part: &mut Part,
                        cols: &[Pattern],
                        counts: &[(usize, u32)],
                        proven: bool,
                        best_cost: &mut f64|
         -> bool {
            match integer::to_nodes(problem, pp, cols, counts) {
                Ok(nodes) => adopt(problem, part, nodes, proven, best_cost),
                Err(e) => {
                    part.note = Some(format!(
                        "integer solution could not be turned into nodes: {e}"
                    ));
                    false
                }
            }
        };
        // LP diving first (up to half the time left): cheap, and a better start for the
        // integer solve.
        let dive_deadline = clock.share_of(deadline, 0.5);
        let mut extend = |residual: &[i64], cols: &mut Vec<Pattern>| {
            // The residual as its own pattern problem (same classes, fewer pods each).
            let mut rpp = pp.clone();
            for (c, r) in rpp.classes.iter_mut().zip(residual) {
                c.items.truncate((*r).max(0) as usize);
            }
            let limits = colgen::Limits {
                max_iterations: 10,
                columns_per_iteration: self.config.columns_per_iteration,
                knapsack_nodes: self.config.knapsack_nodes,
                clock,
                deadline: dive_deadline,
                certify: false,
            };
            let more = colgen::run(&rpp, cols.clone(), lp_backend, limits);
            for p in more.columns.into_iter().skip(cols.len()) {
                if checker.pattern_ok(&rpp, &p) && !cols.contains(&p) {
                    cols.push(p);
                }
            }
        };
        if let Some(dive) = integer::dive(
            problem,
            pp,
            &mut cols,
            &cg.duals,
            lp_backend,
            clock::Until {
                clock,
                deadline: dive_deadline,
            },
            &mut extend,
        ) {
            let price_of = |cols: &[Pattern], counts: &BTreeMap<usize, u32>| -> f64 {
                counts
                    .iter()
                    .filter_map(|(j, n)| {
                        cols.get(*j)
                            .and_then(|p| pp.shapes.get(p.shape as usize))
                            .map(|s| s.price * *n as f64)
                    })
                    .sum()
            };
            let rounded = dive.counts;
            let counts: Vec<(usize, u32)> = rounded.iter().map(|(j, n)| (*j, *n)).collect();
            let rounded_cost = price_of(&cols, &rounded);
            let warm_cost = price_of(&cols, &warm);
            consider(&mut part, &cols, &counts, false, &mut best_cost);
            let mut best_warm = if warm.is_empty() || rounded_cost < warm_cost {
                (rounded, rounded_cost)
            } else {
                (std::mem::take(&mut warm), warm_cost)
            };
            // The dive's whole nodes with what they left packed by the heuristic.
            let fixed: Vec<(usize, u32)> = dive.fixed.iter().map(|(j, n)| (*j, *n)).collect();
            if let Ok((mut nodes, left)) = integer::to_nodes_partial(problem, pp, &cols, &fixed)
                && !left.is_empty()
                && let Some(rest) = integer::pack_rest(problem, &left, clock)
            {
                nodes.extend(rest);
                // As a warm start too, when its nodes are patterns the integer pass accepts.
                let mut as_cols: BTreeMap<usize, u32> = BTreeMap::new();
                let mut ok = true;
                for n in &nodes {
                    let Some(p) = pattern_of(pp, &class_of, n) else {
                        ok = false;
                        break;
                    };
                    if !compatible(pp, &p) || !checker.pattern_ok(pp, &p) {
                        ok = false;
                        break;
                    }
                    let j = match cols.iter().position(|q| *q == p) {
                        Some(j) => j,
                        None => {
                            cols.push(p);
                            cols.len() - 1
                        }
                    };
                    *as_cols.entry(j).or_insert(0) += 1;
                }
                let cost = price_of(&cols, &as_cols);
                if ok && cost < best_warm.1 {
                    best_warm = (as_cols, cost);
                }
                if within_ranks(pp, &class_of, &nodes) {
                    adopt(problem, &mut part, nodes, false, &mut best_cost);
                }
            }
            warm = best_warm.0;
        }
        // Repack the best plan's most wasteful nodes with the heuristic, for part of what is
        // left; the integer pass gets the rest.
        if best_cost > part.bound * (1.0 + 1e-9) {
            let until = clock.share_of(deadline, 0.3);
            let value_of = |id: ItemId| -> f64 {
                class_of
                    .get(&id)
                    .and_then(|c| cg.duals.get(*c as usize))
                    .copied()
                    .unwrap_or(0.0)
            };
            let mut nodes = part.nodes.clone();
            let allowed = |n: &[PlannedNode]| {
                integer::within_pool_limits(problem, n) && within_ranks(pp, &class_of, n)
            };
            let until = clock::Until {
                clock,
                deadline: until,
            };
            if integer::improve(problem, &mut nodes, &value_of, &allowed, until) {
                adopt(problem, &mut part, nodes, false, &mut best_cost);
            }
        }
        if best_cost <= part.bound * (1.0 + 1e-9) {
            part.proven_optimal = true;
            part.integer_ms = int_start.elapsed().as_secs_f64() * 1e3;
            return part;
        }
        if clock.left(deadline) <= 2.0 || clock.wall_out() {
            part.budget_hit = true;
            if !part.optimised {
                part.note = Some("no time left for the integer pass".into());
            }
            part.integer_ms = int_start.elapsed().as_secs_f64() * 1e3;
            return part;
        }
        let sol = integer::solve(problem, pp, &cols, &warm, mip_backend, clock, deadline);
        part.integer_ms = int_start.elapsed().as_secs_f64() * 1e3;
        match sol {
            Ok(sol) => {
                if !sol.proven_optimal {
                    part.budget_hit = true;
                }
                if !consider(
                    &mut part,
                    &cols,
                    &sol.counts,
                    sol.proven_optimal,
                    &mut best_cost,
                ) && sol.proven_optimal
                    && part.optimised
                {
                    // The rounding was already optimal over these patterns.
                    part.proven_optimal = true;
                }
            }
            Err(e) => {
                if !part.optimised {
                    part.note = Some(format!("integer pass failed: {e}"));
                }
            }
        }
        part
    }
}

/// Groups classes that can share a launch shape (directly or through others); classes of a
/// NodePool with limits always share a group, since the limits couple their nodes.
fn components(problem: &PackingProblem, pp: &PatternProblem) -> Vec<Vec<usize>> {
    let n = pp.classes.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let union = |parent: &mut Vec<usize>, a: usize, b: usize| {
        let (ra, rb) = (find(parent, a), find(parent, b));
        if ra != rb {
            let (lo, hi) = if ra < rb { (ra, rb) } else { (rb, ra) };
            parent[hi] = lo;
        }
    };
    let mut limited_first: BTreeMap<u32, usize> = BTreeMap::new();
    for (s, list) in pp.compat_lo.iter().enumerate() {
        let Some(first) = list.first() else { continue };
        for c in list.iter().skip(1) {
            union(&mut parent, *first as usize, *c as usize);
        }
        if let Some(sh) = pp.shapes.get(s)
            && problem
                .pools
                .get(sh.pool as usize)
                .is_some_and(|p| p.remaining.is_some())
        {
            let anchor = *limited_first.entry(sh.pool).or_insert(*first as usize);
            union(&mut parent, anchor, *first as usize);
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for c in 0..n {
        let r = find(&mut parent, c);
        groups.entry(r).or_default().push(c);
    }
    groups.into_values().collect()
}

/// Buckets requests on ever coarser grids until the class count fits; every class must still
/// fit some shape with its largest member. Returns the problem and the grid steps.
fn coarsen(
    problem: &PackingProblem,
    placed: &[(ItemId, u32)],
    exact: &PatternProblem,
    max_classes: usize,
) -> Option<(PatternProblem, Vec<i64>)> {
    let max_size: Vec<i64> = (0..exact.dims.len())
        .map(|d| {
            exact
                .classes
                .iter()
                .map(|c| c.size_hi.get(d).copied().unwrap_or(0))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let frontier = pattern::Frontier::new(problem, placed);
    let mut q: i64 = 64;
    while q >= 2 {
        let steps: Vec<i64> = max_size.iter().map(|m| (m / q).max(1)).collect();
        let pp = PatternProblem::build(problem, placed, Some(&steps), Some(&frontier));
        let mut covered = vec![false; pp.classes.len()];
        for list in &pp.compat_hi {
            for c in list {
                if let Some(x) = covered.get_mut(*c as usize) {
                    *x = true;
                }
            }
        }
        if pp.classes.len() <= max_classes && covered.iter().all(|x| *x) {
            return Some((pp, steps));
        }
        q /= 2;
    }
    None
}

/// Makes `nodes` the component's plan when they are cheaper than `best_cost` and within the
/// NodePools' limits; `proven`: the integer pass proved them optimal over its columns.
fn adopt(
    problem: &PackingProblem,
    part: &mut Part,
    nodes: Vec<PlannedNode>,
    proven: bool,
    best_cost: &mut f64,
) -> bool {
    let c = integer::cost(problem, &nodes);
    if c < *best_cost - 1e-9 && integer::within_pool_limits(problem, &nodes) {
        *best_cost = c;
        part.nodes = nodes;
        part.optimised = true;
        part.proven_optimal = proven;
        return true;
    }
    false
}

/// Whether every class of `p` may use its shape: the NodePool rank rule (a pod moves only to
/// a pool ranked at least as high as the heuristic's), which the bound assumes. The
/// heuristic packing a few pods on their own may pick a lower-ranked pool; such a plan could
/// undercut the bound (a property test found one: 0.563 against a bound of 0.584).
fn compatible(pp: &PatternProblem, p: &Pattern) -> bool {
    pp.compat_hi
        .get(p.shape as usize)
        .is_some_and(|list| p.counts.iter().all(|(c, _)| list.contains(c)))
}

/// [`compatible`] for every node of a plan (each as its pattern).
fn within_ranks(
    pp: &PatternProblem,
    class_of: &BTreeMap<ItemId, u32>,
    nodes: &[PlannedNode],
) -> bool {
    nodes
        .iter()
        .all(|n| pattern_of(pp, class_of, n).is_some_and(|p| compatible(pp, &p)))
}

/// A planned node as a pattern on its shape's representative: how many pods of each class.
fn pattern_of(
    pp: &PatternProblem,
    class_of: &BTreeMap<ItemId, u32>,
    node: &PlannedNode,
) -> Option<Pattern> {
    let &shape = pp.representative.get(&node.shape)?;
    let mut counts: BTreeMap<u32, u32> = BTreeMap::new();
    for i in &node.items {
        if let Some(c) = class_of.get(i) {
            *counts.entry(*c).or_insert(0) += 1;
        }
    }
    Some(Pattern {
        shape,
        counts: counts.into_iter().collect(),
    })
}
