//! Expiration and drift: nodes past `expireAfter`, or whose template the provider reports
//! changed, are replaced whatever the price, so their pods keep a home.
//!
//! As Karpenter does for drift: empty nodes of the method go together in one command (within
//! the budget); otherwise candidates are tried one at a time in disruption-cost order and the
//! first whose pods fit on the remaining nodes plus any number of new nodes wins. Expiration
//! runs first (a node past its lifetime is the more urgent), then drift.
//!
//! Unlike Karpenter v1, where expiration is forceful (it ignores budgets and do-not-disrupt and
//! relies on `terminationGracePeriod`), expiration here is a graceful disruption that honours
//! budgets (reason `Expired`; budgets without reasons apply), PDBs and do-not-disrupt; the
//! forceful path belongs to the controller's termination grace period.

use std::collections::BTreeMap;

use super::DisruptionOptions;
use super::budgets::Budgets;
use super::candidates::Candidate;
use super::command::{BudgetUse, Command, Method, MethodReport, Rationale};
use super::make_command;
use super::replace::{PriceRule, replacements};
use super::sim::Sim;

/// Runs expiration (`Method::Expiration`) or drift (`Method::Drift`).
pub fn replace_method(
    method: Method,
    sim: &Sim<'_>,
    all: &[Candidate],
    budgets: &Budgets,
    options: &DisruptionOptions,
) -> (Option<Command>, MethodReport) {
    let reason = method.reason();
    let pick = |c: &&Candidate| match method {
        Method::Expiration => c.expired,
        Method::Drift => c.drifted && !c.expired,
        _ => false,
    };
    let mut eligible: Vec<&Candidate> = all.iter().filter(pick).collect();
    let n_eligible = eligible.len();
    eligible.sort_by(|a, b| {
        a.disruption_cost
            .total_cmp(&b.disruption_cost)
            .then(a.name.cmp(&b.name))
    });
    let within: Vec<&Candidate> = eligible
        .iter()
        .copied()
        .filter(|c| budgets.allowed(&c.nodepool, reason) > 0)
        .collect();
    let mut report = MethodReport {
        method,
        eligible: n_eligible,
        within_budget: within.len(),
        sets_evaluated: 0,
        produced_command: false,
        note: None,
    };
    let use_of = |chosen: &[&Candidate]| -> Vec<BudgetUse> {
        let mut per_pool: BTreeMap<&str, u32> = BTreeMap::new();
        for c in chosen {
            *per_pool.entry(c.nodepool.as_str()).or_default() += 1;
        }
        per_pool
            .iter()
            .map(|(p, n)| BudgetUse {
                nodepool: p.to_string(),
                reason,
                nodes: *n,
                allowed: budgets.allowed(p, reason),
            })
            .collect()
    };
    if within.is_empty() {
        report.note = Some(if n_eligible == 0 {
            format!("no {reason:?} candidates")
        } else {
            format!("budgets allow no {reason:?} disruption")
        });
        return (None, report);
    }

    // Empty ones together, within each pool's budget.
    let mut used: BTreeMap<&str, u32> = BTreeMap::new();
    let mut empties: Vec<&Candidate> = Vec::new();
    for c in within.iter().filter(|c| c.empty) {
        let u = used.entry(c.nodepool.as_str()).or_default();
        if *u < budgets.allowed(&c.nodepool, reason) {
            *u += 1;
            empties.push(c);
        }
    }
    if !empties.is_empty() {
        let summary = format!(
            "{} empty {reason:?} node(s) deleted, no replacement needed",
            empties.len()
        );
        let cmd = make_command(
            method,
            &empties,
            Vec::new(),
            Vec::new(),
            use_of(&empties),
            Rationale {
                score: 0.0,
                sets_evaluated: 0,
                valid_commands: 1,
                runner_up: None,
                summary,
            },
        );
        report.produced_command = true;
        return (Some(cmd), report);
    }

    let mut tried = 0usize;
    let mut last_problem = String::new();
    for c in &within {
        tried += 1;
        let (_, out) = sim.remove(&sim.base, &[c], &BTreeMap::new());
        if !out.feasible() {
            last_problem = out
                .unschedulable
                .first()
                .map(|u| format!("{}: {}", u.pod, u.reason))
                .unwrap_or_default();
            continue;
        }
        let reps = match replacements(
            sim.snapshot,
            &out.claims,
            &[c],
            PriceRule::Any,
            options.spot_to_spot,
        ) {
            Ok(r) => r,
            Err(e) => {
                last_problem = e;
                continue;
            }
        };
        let summary = format!(
            "{reason:?} node {} replaced by {} new node(s); the first of {} {reason:?} candidate(s) in disruption-cost order whose pods all fit",
            c.name,
            reps.len(),
            within.len()
        );
        let chosen = [*c];
        let mut cmd = make_command(
            method,
            &chosen,
            reps,
            out.moves,
            use_of(&chosen),
            Rationale {
                score: 0.0,
                sets_evaluated: tried,
                valid_commands: 1,
                runner_up: None,
                summary,
            },
        );
        cmd.rationale.score = cmd.saving_per_hour;
        report.sets_evaluated = tried;
        report.produced_command = true;
        return (Some(cmd), report);
    }
    report.sets_evaluated = tried;
    report.note = Some(format!(
        "no {reason:?} candidate's pods fit anywhere: {last_problem}"
    ));
    (None, report)
}
