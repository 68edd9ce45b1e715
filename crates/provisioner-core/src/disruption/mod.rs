//! Disruption: which nodes to remove or replace, and why (Karpenter's consolidation, drift and
//! expiration, decided here and executed later by the controller).
//!
//! [`disrupt`] takes a [`Snapshot`] and returns at most one [`Command`] per loop, from the first
//! method that yields one, in Karpenter's order:
//!
//! 1. [`emptiness`]: every empty candidate the Empty budgets allow, in one command;
//! 2. expiration, then drift ([`drift`]): candidates past `expireAfter` or marked drifted,
//!    with replacement nodes so their pods still fit;
//! 3. consolidation ([`consolidation`]): delete underused nodes or replace them with cheaper
//!    ones. Unlike Karpenter it searches candidate sets beyond prefixes of a sorted list
//!    (Karpenter #1962), evaluates every candidate (no 100-candidate cap, #2434), and accepts
//!    any number of replacements when the repacked cluster is cheaper (#1442).
//!
//! Module map: [`candidates`] (who may be disrupted, with reasons for those who may not),
//! [`protect`] (do-not-disrupt with durations, PDB matching), [`duration`] (Go durations),
//! [`budgets`] (NodePool budgets with cron windows), [`cost`] (disruption cost), [`sim`] (the
//! "remove these nodes" simulation on the shared scheduler and one base [`ClusterState`]),
//! [`replace`] (replacements and the worst-case price rule), [`merge`] (which groups of nodes
//! to simulate as "replace with one node", by estimated net value), [`command`] (the output types),
//! [`validate()`] (re-validation against a newer snapshot), and [`karpenter_baseline`] (a
//! faithful re-implementation of Karpenter's single-node and prefix multi-node search, for
//! comparison).
//!
//! The winning consolidation command's replacements are re-planned by the optimiser
//! ([`crate::optimize`]) and the command carries its lower bound on their cost.
//!
//! Everything is deterministic: the same snapshot and options give the same decision, also
//! when the search runs on many threads (results are collected and sorted by a total order).
//! The one caveat is the optimiser's wall-clock safety net: if its time budget, not its work
//! limits, ends a re-plan (huge replacement sets on a slow machine), its plan may differ
//! between runs; it is still verified and never worse than the heuristic's.
//!
//! [`ClusterState`]: crate::state::ClusterState

pub mod budgets;
pub mod candidates;
pub mod command;
pub mod consolidation;
pub mod cost;
pub mod drift;
pub mod duration;
pub mod emptiness;
pub mod headroom;
pub mod karpenter_baseline;
pub mod lifetime;
pub mod merge;
pub mod payback;
pub mod protect;
pub mod replace;
pub mod session;
pub mod sim;
pub mod staged;
pub mod turnover;
pub mod validate;

use serde::{Deserialize, Serialize};

pub use budgets::{BudgetProblem, BudgetStatus, Budgets};
pub use candidates::{Candidate, CandidateSet, Ineligible, Rejection, find_candidates};
pub use command::{
    Alternative, BudgetUse, CandidateNode, Command, Destination, DisruptionDecision, Method,
    MethodReport, PodMove, Rationale, Replacement,
};
pub use session::{ConsolidationSession, SessionReport, WorkBudget};
pub use validate::{Validation, validate, validate_with};

use crate::model::Snapshot;
use crate::optimize::OptimizerConfig;
use crate::scheduler::SchedulingOptions;

/// Knobs of the disruption decision. The defaults follow Karpenter where Karpenter has a
/// behaviour, and are conservative where we go further.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DisruptionOptions {
    /// A consolidation command must save at least this much per hour (worst case, after
    /// replacements). Users ask for a threshold so tiny savings do not churn workloads
    /// (Karpenter #2883, #1686). Any command must save strictly more than zero.
    pub min_saving_per_hour: f64,
    /// ... and at least this fraction of the candidates' price (0.1 = 10%).
    pub min_saving_fraction: f64,
    /// Price per hour that one unit of Karpenter disruption cost is worth: without
    /// [`Self::payback`], commands are ranked by `saving - weight * disruption_cost`, and one
    /// whose score is not positive is not taken. The default (a tenth of a cent per evicted
    /// default pod) only breaks near-ties toward moving fewer and less important pods.
    pub disruption_cost_weight: f64,
    /// The payback rule ([`payback`]): a consolidation command is taken only when its saving
    /// over the expected horizon exceeds what its evictions and replacement overlap cost, and
    /// commands are ranked by that net value. `None`: the plain `saving > 0` rule above.
    pub payback: Option<payback::Payback>,
    /// The headroom rule ([`headroom`]): a consolidation command must leave free room for
    /// the busiest burst of arrivals recently observed. `None`: repack as tightly as saves.
    pub headroom: Option<headroom::Headroom>,
    /// Groups the merge search ([`merge`]) proposes for simulation as "replace these nodes
    /// with one": chosen by an estimate of their net value, not by position in one order.
    /// 0 turns the search off.
    pub merge_groups: usize,
    /// Most replacement nodes one consolidation command may launch (`None`: no limit).
    /// Karpenter allows one (#1442).
    pub max_replacements: Option<usize>,
    /// Allow replacing spot nodes with (cheaper) spot nodes. Karpenter keeps this behind the
    /// `SpotToSpotConsolidation` feature gate, off by default; when on, replacements of spot
    /// candidates are pinned to spot.
    pub spot_to_spot: bool,
    /// Evict pods that have no controller (they will not come back). Off: such nodes are not
    /// candidates, like the Cluster Autoscaler.
    pub evict_uncontrolled_pods: bool,
    /// Count a command's evictions against each PDB's `disruptionsAllowed` across all its
    /// candidates (on: a command never plans more evictions than PDBs allow right now).
    /// Off (the default): a candidate only needs every PDB over its pods to allow a
    /// disruption now, as Karpenter checks; the drain then waits on the Eviction API, one
    /// pod ready elsewhere at a time. On, a node running two replicas of a
    /// `maxUnavailable: 1` Deployment could never be consolidated, and that is most
    /// production clusters (docs/simulator.md, round 52).
    pub pdb_per_command: bool,
    /// Upper bound on the simulations the multi-node consolidation search runs (a
    /// deterministic work bound instead of Karpenter's wall-clock timeouts).
    pub max_simulations: usize,
    /// A greedy growth stops after this many candidates in a row failed to join: by then the
    /// remaining room is mostly used, and each further try costs a simulation.
    pub greedy_patience: usize,
    /// Run the search on the rayon pool (results are the same either way).
    pub parallel: bool,
    /// How the simulations schedule pods (planner for replacements, relaxation).
    pub scheduling: SchedulingOptions,
    /// Re-plan the chosen consolidation command's replacements with the optimiser (ILP over
    /// node patterns, warm-started from the heuristic) and keep its plan when it saves more
    /// in the worst case; the command then also carries the optimiser's lower bound. Only
    /// the winning command is re-planned, so the search stays fast.
    pub optimize_replacements: bool,
    pub optimizer: OptimizerConfig,
    /// Let consolidation move pods onto empty nodes that the emptiness method is about to
    /// delete ([`candidates::awaiting_emptiness`]), as Karpenter does. Off: those nodes are
    /// left to go, so a command cannot pass keeping one of them for a saving. (Drift and
    /// expiration may always use them: they replace nodes whatever the price.)
    pub move_onto_empty_nodes: bool,
    /// A merge the budgets forbid at once may be staged ([`staged`]): the first command
    /// launches the replacement for the whole group and drains what the budget allows; at
    /// most this many members follow, each in a later loop. 0 turns staging off.
    pub staged_merge_followers: usize,
    /// A node running a pod its workload recreated for an eviction less than this many
    /// seconds ago is not a consolidation candidate (emptiness, drift and expiry still take
    /// it). The command that evicted the pod planned where it goes; moving it again a minute
    /// later undoes that plan for a saving the plan should have found, and each such loop
    /// keeps the cluster packed tighter than arrivals can use (docs/simulator.md, round 39:
    /// a fifth of the evictions on the `constrained` workloads were of pods evicted under 30
    /// minutes before). Bounded by how long the snapshot's producer remembers evictions (30
    /// minutes in the controller and the simulator). 0 turns it off.
    pub settle_seconds: i64,
}

impl Default for DisruptionOptions {
    fn default() -> Self {
        DisruptionOptions {
            min_saving_per_hour: 0.0,
            min_saving_fraction: 0.0,
            disruption_cost_weight: 0.001,
            payback: Some(payback::Payback::default()),
            headroom: Some(headroom::Headroom::default()),
            merge_groups: 8,
            max_replacements: None,
            spot_to_spot: false,
            evict_uncontrolled_pods: false,
            pdb_per_command: false,
            max_simulations: 20_000,
            greedy_patience: 32,
            parallel: true,
            scheduling: SchedulingOptions::default(),
            optimize_replacements: true,
            optimizer: OptimizerConfig::default(),
            move_onto_empty_nodes: false,
            staged_merge_followers: 4,
            settle_seconds: 300,
        }
    }
}

/// Decides this loop's disruption: at most one command, from the first method that yields one.
pub fn disrupt(snapshot: &Snapshot, options: &DisruptionOptions) -> DisruptionDecision {
    decide(snapshot, None, options, None)
}

/// [`disrupt`] on a shared snapshot: the simulations' base state refers to it instead of
/// holding a copy (a 150,000-pod snapshot is a few hundred MB).
pub fn disrupt_shared(
    snapshot: &std::sync::Arc<Snapshot>,
    options: &DisruptionOptions,
) -> DisruptionDecision {
    decide(snapshot, Some(snapshot), options, None)
}

/// [`disrupt_shared`] for a controller that keeps a [`ConsolidationSession`] between loops:
/// consolidation re-simulates only candidates whose inputs changed, at most as many as the
/// session's [`WorkBudget`] allows; the report says what was reused and what was left for
/// the next loop.
pub fn disrupt_in_session(
    snapshot: &std::sync::Arc<Snapshot>,
    options: &DisruptionOptions,
    session: &mut ConsolidationSession,
) -> (DisruptionDecision, SessionReport) {
    let mut report = SessionReport::default();
    let decision = decide(
        snapshot,
        Some(snapshot),
        options,
        Some((session, &mut report)),
    );
    (decision, report)
}

/// The nodes `method`'s simulations take out of the base state before any candidate is
/// removed: for consolidation, the empty nodes about to go. Drift and expiration replace
/// nodes whatever the price, so moving their pods onto such a node saves a launch.
pub(crate) fn kept_out<'c>(
    method: Method,
    options: &DisruptionOptions,
    candidates: &'c [Candidate],
    budgets: &Budgets,
) -> Vec<&'c str> {
    if options.move_onto_empty_nodes || method != Method::Consolidation {
        Vec::new()
    } else {
        candidates::awaiting_emptiness(candidates, budgets)
    }
}

fn decide(
    snapshot: &Snapshot,
    shared: Option<&std::sync::Arc<Snapshot>>,
    options: &DisruptionOptions,
    session: Option<(&mut ConsolidationSession, &mut SessionReport)>,
) -> DisruptionDecision {
    let budgets = Budgets::compute(snapshot);
    let set = find_candidates(snapshot, options);
    let mut decision = DisruptionDecision {
        command: None,
        methods: Vec::new(),
        rejected: set.rejected.clone(),
        candidates: set.candidates.len(),
        budgets: budgets.statuses.clone(),
        budget_problems: budgets.problems.clone(),
    };
    let (cmd, report) = emptiness::emptiness(&set, &budgets, options);
    decision.methods.push(report);
    if cmd.is_some() {
        decision.command = cmd;
        return decision;
    }
    // The simulation base is built only when a method needs it.
    let wanted = |c: &Candidate| c.expired || c.drifted || (c.for_consolidation() && !c.empty);
    if !set.candidates.iter().any(wanted) {
        for method in [Method::Expiration, Method::Drift, Method::Consolidation] {
            decision.methods.push(MethodReport {
                method,
                eligible: 0,
                within_budget: 0,
                sets_evaluated: 0,
                produced_command: false,
                note: Some("no candidates for this method".into()),
            });
        }
        return decision;
    }
    let sim = match shared {
        Some(s) => sim::Sim::shared(s, options.scheduling.clone()),
        None => sim::Sim::new(snapshot, options.scheduling.clone()),
    };
    for method in [Method::Expiration, Method::Drift] {
        let (cmd, report) = drift::replace_method(method, &sim, &set.candidates, &budgets, options);
        decision.methods.push(report);
        if cmd.is_some() {
            decision.command = cmd;
            return decision;
        }
    }
    let sim = sim.without_nodes(&kept_out(
        Method::Consolidation,
        options,
        &set.candidates,
        &budgets,
    ));
    let (cmd, report) = match session {
        None => consolidation::consolidation(&sim, &set.candidates, &budgets, options),
        Some((session, out)) => {
            let mut lp = session::Loop::new(session, snapshot, options);
            let r = consolidation::consolidation_in(
                &sim,
                &set.candidates,
                &budgets,
                options,
                Some(&mut lp),
            );
            let names: Vec<&str> = set.candidates.iter().map(|c| c.name.as_str()).collect();
            *out = lp.finish(&names);
            r
        }
    };
    decision.methods.push(report);
    decision.command = cmd;
    decision
}

/// Builds a command from chosen candidates and the simulation's outcome.
/// A [`CandidateNode`] for the command's report.
pub(crate) fn candidate_node(c: &Candidate) -> CandidateNode {
    CandidateNode {
        name: c.name.clone(),
        nodepool: c.nodepool.clone(),
        instance_type: c.instance_type.clone(),
        capacity_type: c.capacity_type,
        price: c.price,
        disruption_cost: c.disruption_cost,
        pods: c.pods.len(),
    }
}

pub(crate) fn make_command(
    method: Method,
    chosen: &[&Candidate],
    replacements: Vec<Replacement>,
    mut moves: Vec<PodMove>,
    budget: Vec<BudgetUse>,
    rationale: Rationale,
) -> Command {
    let mut candidates: Vec<CandidateNode> = chosen.iter().map(|c| candidate_node(c)).collect();
    candidates.sort_by(|a, b| a.name.cmp(&b.name));
    moves.sort();
    let candidates_price: f64 = candidates.iter().map(|c| c.price).sum();
    let replacements_price: f64 = replacements.iter().map(|r| r.launch.price).sum();
    let replacements_worst_case_price: f64 = replacements.iter().map(|r| r.worst_case_price).sum();
    let disruption_cost: f64 = candidates.iter().map(|c| c.disruption_cost).sum();
    Command {
        method,
        reason: method.reason(),
        candidates,
        replacements,
        moves,
        candidates_price,
        replacements_price,
        replacements_worst_case_price,
        saving_per_hour: candidates_price - replacements_price,
        worst_case_saving_per_hour: candidates_price - replacements_worst_case_price,
        disruption_cost,
        replacements_lower_bound: None,
        replacement_planner: None,
        replacement_premium: None,
        staged: Vec::new(),
        staged_price: 0.0,
        budget,
        rationale,
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_empty_destinations;
#[cfg(test)]
mod tests_session;
#[cfg(test)]
mod tests_sharing;
#[cfg(test)]
mod tests_shrink;
#[cfg(test)]
mod tests_staged;
#[cfg(test)]
mod tests_turnover;
#[cfg(test)]
mod tests_wait_discount;
