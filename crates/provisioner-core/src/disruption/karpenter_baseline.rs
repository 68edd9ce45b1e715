//! A faithful re-implementation of Karpenter's consolidation search, for comparison only.
//!
//! Karpenter (kubernetes-sigs/karpenter, `pkg/controllers/disruption`) runs, per loop:
//!
//! - **multi-node consolidation**: candidates sorted by disruption cost (ascending), filtered by
//!   the Underutilized budget (each pool's allowance taken in sorted order) and with empty
//!   nodes dropped, at most the first 100; a binary search over the prefix length (at least
//!   two nodes) keeps the longest prefix whose simulation yields a command;
//! - **single-node consolidation** if that found nothing: every candidate whose NodePool has
//!   any Underutilized allowance (the budget is not taken per candidate, so nodes beyond
//!   multi-node's prefix are tried too), in the same order interwoven across NodePools; the
//!   first one that yields a command wins.
//!
//! A simulation yields a command when every pod is placed and it needs no new node (delete) or
//! exactly one (replace) whose instance-type options, filtered to those whose cheapest
//! compatible offering is below the candidates' summed price, are not empty; when the
//! replacement could be spot or on-demand it is pinned to spot (Karpenter assumes the cheaper
//! spot launch when it filters by price); all-spot candidates need the spot-to-spot feature
//! gate. Karpenter's wall-clock timeouts (1 min multi-node, 3 min single-node) are not
//! modelled: every simulation here completes.
//!
//! We use the same scheduler and candidate filter as our own search, so any difference in the
//! result comes from the search alone.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::DisruptionOptions;
use super::budgets::Budgets;
use super::candidates::{Candidate, find_candidates};
use super::command::{BudgetUse, Command, Method, Rationale, Replacement};
use super::make_command;
use super::replace::priced_option;
use super::sim::Sim;
use crate::model::{CapacityType, DisruptionReason, InstanceType, Snapshot, labels};
use crate::requirements::{Requirements, ValueSet};
use crate::result::{InstanceTypeOption, Launch, NewNodeClaim};

/// Karpenter's multi-node batch limit.
pub const MAX_MULTI_NODE: usize = 100;

/// What the baseline decided and how much it simulated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineResult {
    pub command: Option<Command>,
    pub simulations: usize,
    /// Candidates the budgets let it consider.
    pub candidates: usize,
    /// `"multi-node"`, `"single-node"` or `"none"`.
    pub found_by: String,
}

/// The candidates single-node consolidation tries, in its order: each NodePool's candidates
/// in disruption-cost order, interwoven one per pool at a time (Karpenter's
/// `shuffleCandidates`; pools by name here where Go's map order is random), skipping pools
/// with no Underutilized allowance and empty nodes (emptiness handles those).
fn single_node_order<'a>(sorted: &[&'a Candidate], budgets: &Budgets) -> Vec<&'a Candidate> {
    let mut per_pool: BTreeMap<&str, Vec<&'a Candidate>> = BTreeMap::new();
    for c in sorted {
        if !c.empty && budgets.allowed(&c.nodepool, DisruptionReason::Underutilized) > 0 {
            per_pool.entry(c.nodepool.as_str()).or_default().push(c);
        }
    }
    let longest = per_pool.values().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| per_pool.values().filter_map(move |cs| cs.get(i).copied()))
        .collect()
}

/// Karpenter's `computeConsolidation` on one candidate set.
fn compute(
    sim: &Sim<'_>,
    set: &[&Candidate],
    options: &DisruptionOptions,
) -> Option<(Vec<Replacement>, Vec<super::command::PodMove>)> {
    let (_, out) = sim.remove(&sim.base, set, &BTreeMap::new());
    if !out.feasible() {
        return None;
    }
    match out.claims.len() {
        0 => Some((Vec::new(), out.moves)),
        1 => {
            let claim = out.claims.first()?;
            let price: f64 = set.iter().map(|c| c.price).sum();
            let all_spot = set.iter().all(|c| c.capacity_type == CapacityType::Spot);
            if all_spot && !options.spot_to_spot {
                return None;
            }
            let rep = filter_by_price(sim.snapshot, claim, price)?;
            Some((vec![rep], out.moves))
        }
        _ => None,
    }
}

/// Karpenter's `filterByPrice` plus its spot pin.
fn filter_by_price(
    snapshot: &Snapshot,
    claim: &NewNodeClaim,
    candidates_price: f64,
) -> Option<Replacement> {
    let types: BTreeMap<&str, &InstanceType> = snapshot
        .instance_types
        .iter()
        .map(|t| (t.name.as_str(), t))
        .collect();
    let mut reqs = Requirements::from_wire(claim.requirements.iter());
    let spot_ok = reqs
        .get(labels::CAPACITY_TYPE)
        .is_none_or(|c| c.has(CapacityType::Spot.as_label()));
    let priced: Vec<(InstanceTypeOption, f64)> = claim
        .instance_type_options
        .iter()
        .filter_map(|o| {
            types
                .get(o.instance_type.as_str())
                .and_then(|it| priced_option(it, o, &reqs, spot_ok))
        })
        .filter(|p| p.option.cheapest.price < candidates_price)
        .map(|p| (p.option, p.worst))
        .collect();
    let mut options: Vec<(InstanceTypeOption, f64)> = priced;
    options.sort_by(|a, b| {
        a.0.cheapest
            .price
            .total_cmp(&b.0.cheapest.price)
            .then(a.0.instance_type.cmp(&b.0.instance_type))
    });
    let (first, _) = options.first()?;
    let launch = Launch {
        instance_type: first.instance_type.clone(),
        zone: first.cheapest.zone.clone(),
        capacity_type: first.cheapest.capacity_type,
        price: first.cheapest.price,
    };
    let worst = options.iter().map(|o| o.1).fold(0.0, f64::max);
    reqs.0.insert(
        labels::INSTANCE_TYPE.to_string(),
        ValueSet::of(options.iter().map(|o| o.0.instance_type.clone())),
    );
    if spot_ok {
        reqs.add(
            labels::CAPACITY_TYPE,
            ValueSet::of([CapacityType::Spot.as_label()]),
        );
    }
    Some(Replacement {
        name: claim.name.clone(),
        nodepool: claim.nodepool.clone(),
        requirements: reqs.to_wire(),
        instance_type_options: options.into_iter().map(|o| o.0).collect(),
        launch,
        worst_case_price: worst,
    })
}

fn command(
    set: &[&Candidate],
    reps: Vec<Replacement>,
    moves: Vec<super::command::PodMove>,
    budgets: &Budgets,
    summary: String,
    sims: usize,
) -> Command {
    let mut per_pool: BTreeMap<&str, u32> = BTreeMap::new();
    for c in set {
        *per_pool.entry(c.nodepool.as_str()).or_default() += 1;
    }
    let budget = per_pool
        .iter()
        .map(|(p, n)| BudgetUse {
            nodepool: p.to_string(),
            reason: DisruptionReason::Underutilized,
            nodes: *n,
            allowed: budgets.allowed(p, DisruptionReason::Underutilized),
        })
        .collect();
    let mut cmd = make_command(
        Method::Consolidation,
        set,
        reps,
        moves,
        budget,
        Rationale {
            score: 0.0,
            sets_evaluated: sims,
            valid_commands: 1,
            runner_up: None,
            summary,
        },
    );
    cmd.rationale.score = cmd.saving_per_hour;
    cmd
}

/// Runs Karpenter's multi-node then single-node consolidation on a snapshot.
pub fn karpenter_consolidation(snapshot: &Snapshot, options: &DisruptionOptions) -> BaselineResult {
    let set = find_candidates(snapshot, options);
    let budgets = Budgets::compute(snapshot);
    let sim = Sim::new(snapshot, options.scheduling.clone());
    karpenter_consolidation_on(&sim, &set.candidates, &budgets, options)
}

/// [`karpenter_consolidation`] on prepared inputs (the benchmark shares them with ours).
pub fn karpenter_consolidation_on(
    sim: &Sim<'_>,
    all: &[Candidate],
    budgets: &Budgets,
    options: &DisruptionOptions,
) -> BaselineResult {
    let start = sim.runs();
    let mut sorted: Vec<&Candidate> = all.iter().filter(|c| c.for_consolidation()).collect();
    sorted.sort_by(|a, b| {
        a.disruption_cost
            .total_cmp(&b.disruption_cost)
            .then(a.name.cmp(&b.name))
    });
    let mut remaining: BTreeMap<&str, u32> = BTreeMap::new();
    let mut disruptable: Vec<&Candidate> = Vec::new();
    for c in &sorted {
        let left = remaining
            .entry(c.nodepool.as_str())
            .or_insert_with(|| budgets.allowed(&c.nodepool, DisruptionReason::Underutilized));
        if *left == 0 || c.empty {
            continue;
        }
        disruptable.push(c);
        *left -= 1;
    }
    let considered = disruptable.len();

    // Multi-node: binary search over prefixes of at most 100.
    let max_parallel = disruptable.len().min(MAX_MULTI_NODE);
    if disruptable.len() >= 2 {
        let mut lo = 1usize;
        let mut hi = if disruptable.len() <= max_parallel {
            disruptable.len() - 1
        } else {
            max_parallel
        };
        let mut last: Option<(usize, Vec<Replacement>, Vec<super::command::PodMove>)> = None;
        while lo <= hi {
            let mid = (lo + hi) / 2;
            let Some(prefix) = disruptable.get(..=mid) else {
                break;
            };
            match compute(sim, prefix, options) {
                Some((reps, moves)) => {
                    last = Some((mid, reps, moves));
                    lo = mid + 1;
                }
                None => {
                    if mid == 0 {
                        break;
                    }
                    hi = mid - 1;
                }
            }
        }
        if let Some((mid, reps, moves)) = last
            && let Some(prefix) = disruptable.get(..=mid)
        {
            let sims = sim.runs() - start;
            let summary = format!(
                "Karpenter multi-node: longest valid prefix of {} candidate(s) sorted by disruption cost",
                prefix.len()
            );
            return BaselineResult {
                command: Some(command(prefix, reps, moves, budgets, summary, sims)),
                simulations: sims,
                candidates: considered,
                found_by: "multi-node".into(),
            };
        }
    }
    // Single-node: first valid in order, over every candidate whose pool has any allowance
    // left (Karpenter builds a fresh budget mapping per method and single-node does not
    // decrement it), not only the prefix multi-node kept.
    for c in single_node_order(&sorted, budgets) {
        if let Some((reps, moves)) = compute(sim, &[c], options) {
            let sims = sim.runs() - start;
            let summary = format!(
                "Karpenter single-node: first valid candidate in disruption-cost order ({})",
                c.name
            );
            return BaselineResult {
                command: Some(command(&[c], reps, moves, budgets, summary, sims)),
                simulations: sims,
                candidates: considered,
                found_by: "single-node".into(),
            };
        }
    }
    BaselineResult {
        command: None,
        simulations: sim.runs() - start,
        candidates: considered,
        found_by: "none".into(),
    }
}
