//! Emptiness: delete every empty candidate the budgets allow, in one command.
//!
//! An empty node (only daemonset or static pods) costs money and holds nothing, so removing it
//! needs no simulation. When the Empty budget of a pool allows fewer nodes than are empty, the
//! most expensive go first (the largest saving), then the cheapest to disrupt, then by name so
//! the choice is deterministic. Empty nodes go whatever the saving thresholds say: a price
//! of zero usually means the provider has no price source, not that the node is free, and an
//! empty node is never worth keeping.

use std::collections::BTreeMap;

use super::DisruptionOptions;
use super::budgets::Budgets;
use super::candidates::{Candidate, CandidateSet};
use super::command::{BudgetUse, Command, Method, MethodReport, Rationale};
use super::make_command;
use crate::model::DisruptionReason;

/// Runs the emptiness method.
pub fn emptiness(
    set: &CandidateSet,
    budgets: &Budgets,
    _options: &DisruptionOptions,
) -> (Option<Command>, MethodReport) {
    let mut eligible: Vec<&Candidate> = set
        .candidates
        .iter()
        .filter(|c| c.for_emptiness())
        .collect();
    let n_eligible = eligible.len();
    eligible.sort_by(|a, b| {
        b.price
            .total_cmp(&a.price)
            .then(a.disruption_cost.total_cmp(&b.disruption_cost))
            .then(a.name.cmp(&b.name))
    });
    let mut used: BTreeMap<&str, u32> = BTreeMap::new();
    let mut chosen: Vec<&Candidate> = Vec::new();
    for c in eligible {
        let u = used.entry(c.nodepool.as_str()).or_default();
        if *u < budgets.allowed(&c.nodepool, DisruptionReason::Empty) {
            *u += 1;
            chosen.push(c);
        }
    }
    let mut report = MethodReport {
        method: Method::Emptiness,
        eligible: n_eligible,
        within_budget: chosen.len(),
        sets_evaluated: usize::from(!chosen.is_empty()),
        produced_command: false,
        note: None,
    };
    let saving: f64 = chosen.iter().map(|c| c.price).sum();
    if chosen.is_empty() {
        report.note = Some(if n_eligible == 0 {
            "no empty candidates".into()
        } else {
            "budgets allow no empty node to go".into()
        });
        return (None, report);
    }
    let budget: Vec<BudgetUse> = used
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(pool, n)| BudgetUse {
            nodepool: pool.to_string(),
            reason: DisruptionReason::Empty,
            nodes: *n,
            allowed: budgets.allowed(pool, DisruptionReason::Empty),
        })
        .collect();
    let left_out = n_eligible - chosen.len();
    let summary = if left_out > 0 {
        format!(
            "{} empty node(s) deleted, saving {saving:.4}/h; {left_out} more wait for the Empty budget",
            chosen.len()
        )
    } else {
        format!(
            "{} empty node(s) deleted, saving {saving:.4}/h",
            chosen.len()
        )
    };
    let cmd = make_command(
        Method::Emptiness,
        &chosen,
        Vec::new(),
        Vec::new(),
        budget,
        Rationale {
            score: saving,
            sets_evaluated: 1,
            valid_commands: 1,
            runner_up: None,
            summary,
        },
    );
    report.produced_command = true;
    (Some(cmd), report)
}
