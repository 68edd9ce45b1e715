//! Re-validation of a command against a newer snapshot.
//!
//! Karpenter waits 15 s after deciding, then checks that the command still holds before it
//! taints anything: pods may have landed on the candidates, a PDB may have tightened, another
//! command may have used the budget, capacity may have gone. We answer the same three
//! questions on the newer snapshot: are the candidates still candidates for this method, do
//! the budgets (and PDBs) still allow the command, and does a fresh simulation still place
//! every pod, with no more replacements and no higher worst-case price than decided? A staged
//! merge ([`super::staged`]) is checked whole: its followers must still be candidates, and the
//! simulation removes them too, though only what goes now uses the budget.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::DisruptionOptions;
use super::budgets::Budgets;
use super::candidates::{Candidate, find_candidates};
use super::command::{Command, Method};
use super::replace::{PriceRule, replacements};
use super::sim::Sim;
use crate::model::Snapshot;
use crate::optimize::Optimizer;
use crate::packing::LaunchPlanner;
use crate::scheduler::SchedulingOptions;

/// The answer: valid, or every reason it is not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validation {
    pub valid: bool,
    pub failures: Vec<String>,
}

/// Re-validates `command` against `snapshot` (newer than the one it was decided on).
pub fn validate(command: &Command, snapshot: &Snapshot, options: &DisruptionOptions) -> Validation {
    validate_with(command, snapshot, options, &SchedulingOptions::default())
}

/// [`validate`] with explicit scheduling options (the ones the decision used).
pub fn validate_with(
    command: &Command,
    snapshot: &Snapshot,
    options: &DisruptionOptions,
    sched: &SchedulingOptions,
) -> Validation {
    let mut failures = Vec::new();
    let set = find_candidates(snapshot, options);
    let mut chosen: Vec<&Candidate> = Vec::new();
    for cn in &command.candidates {
        let Some(c) = set.by_name(&cn.name) else {
            let why = set
                .rejected
                .iter()
                .find(|r| r.node == cn.name)
                .map_or_else(|| "node is gone".to_string(), |r| r.reason.to_string());
            failures.push(format!("{} is no longer a candidate: {why}", cn.name));
            continue;
        };
        let eligible = match command.method {
            Method::Emptiness => c.for_emptiness(),
            Method::Consolidation => c.for_consolidation(),
            Method::Drift => c.drifted,
            Method::Expiration => c.expired,
        };
        if !eligible {
            let why = c.not_consolidatable.as_ref().map_or_else(
                || format!("no longer eligible for {:?}", command.method),
                |r| r.to_string(),
            );
            failures.push(format!("{}: {why}", cn.name));
            continue;
        }
        chosen.push(c);
    }
    // A staged merge's followers are not disrupted now, but the replacements were sized for
    // their pods too: they must still be there, and still consolidation candidates.
    let mut followers: Vec<&Candidate> = Vec::new();
    for cn in &command.staged {
        match set.by_name(&cn.name) {
            Some(c) if c.for_consolidation() => followers.push(c),
            Some(c) => failures.push(format!(
                "{} (a staged follower): {}",
                cn.name,
                c.not_consolidatable.as_ref().map_or_else(
                    || "no longer eligible for consolidation".to_string(),
                    |r| r.to_string()
                )
            )),
            None => failures.push(format!(
                "{} (a staged follower) is no longer a candidate",
                cn.name
            )),
        }
    }

    let budgets = Budgets::compute(snapshot);
    let mut per_pool: BTreeMap<&str, u32> = BTreeMap::new();
    let mut per_pdb: BTreeMap<usize, u32> = BTreeMap::new();
    for c in &chosen {
        *per_pool.entry(c.nodepool.as_str()).or_default() += 1;
        for (pdb, n) in &c.pdb_evictions {
            *per_pdb.entry(*pdb).or_default() += n;
        }
    }
    for (pool, n) in &per_pool {
        let allowed = budgets.allowed(pool, command.reason);
        if *n > allowed {
            failures.push(format!("NodePool {pool}: the {:?} budget now allows {allowed} node(s), the command needs {n}", command.reason));
        }
    }
    if options.pdb_per_command {
        for (i, n) in &per_pdb {
            if let Some(p) = snapshot.pdbs.get(*i)
                && i64::from(*n) > i64::from(p.disruptions_allowed)
            {
                failures.push(format!(
                    "PDB {}/{} now allows {} disruption(s), the command evicts {n}",
                    p.namespace, p.name, p.disruptions_allowed
                ));
            }
        }
    }
    if !failures.is_empty() {
        return Validation {
            valid: false,
            failures,
        };
    }

    if command.method != Method::Emptiness {
        let sim = Sim::new(snapshot, sched.clone()).without_nodes(&super::kept_out(
            command.method,
            options,
            &set.candidates,
            &budgets,
        ));
        // Plan with the planner that made the command, so an optimised plan is not judged
        // against the heuristic's.
        let opt = Optimizer::new(options.optimizer.clone());
        let planner: Option<&dyn LaunchPlanner> =
            if command.replacement_planner.as_deref() == Some(opt.name()) {
                Some(&opt)
            } else {
                None
            };
        let merged: Vec<&Candidate> = chosen.iter().chain(&followers).copied().collect();
        let (_, out) = sim.remove_with(&sim.base, &merged, &BTreeMap::new(), planner, None);
        if !out.feasible() {
            for u in out.unschedulable.iter().take(5) {
                failures.push(format!("pod {} no longer fits: {}", u.pod, u.reason));
            }
        } else if command.method == Method::Consolidation {
            let price: f64 = merged.iter().map(|c| c.price).sum();
            let min_saving = options
                .min_saving_per_hour
                .max(options.min_saving_fraction * price)
                .max(0.0);
            if out.claims.len() > command.replacements.len() {
                failures.push(format!(
                    "the pods now need {} new node(s), the command planned {}",
                    out.claims.len(),
                    command.replacements.len()
                ));
            } else {
                // Options priced against the evictions (`pay_for_flexibility`) were narrowed
                // to the worst case decided; re-widened to the plain threshold here, every
                // such command would be rejected as dearer than decided.
                let decided = if options
                    .payback
                    .as_ref()
                    .is_some_and(|k| k.pay_for_flexibility)
                {
                    price - command.replacements_worst_case_price - 1e-9
                } else {
                    min_saving
                };
                match replacements(
                    snapshot,
                    &out.claims,
                    &merged,
                    PriceRule::Cheaper {
                        candidates_price: price,
                        min_saving: min_saving.max(decided),
                        max_premium: command.replacement_premium,
                    },
                    options.spot_to_spot,
                ) {
                    Err(e) => failures.push(e),
                    Ok(reps) => {
                        let worst: f64 = reps.iter().map(|r| r.worst_case_price).sum();
                        if worst > command.replacements_worst_case_price + 1e-9 {
                            failures.push(format!(
                                "replacements now cost up to {worst:.4}/h, more than the {:.4}/h decided",
                                command.replacements_worst_case_price
                            ));
                        }
                        if price - worst <= 0.0 || price - worst < min_saving {
                            failures.push(format!(
                                "the command no longer saves enough: {:.4}/h",
                                price - worst
                            ));
                        }
                    }
                }
            }
        }
    }
    Validation {
        valid: failures.is_empty(),
        failures,
    }
}
