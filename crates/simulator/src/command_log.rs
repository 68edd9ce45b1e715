//! The disruption commands a run carried out, one record each, in the JSON report
//! (`runs[].commands`): which nodes went, with how many pods, for what saving. The totals in
//! the summary say how many pods were evicted; "which commands evicted them, and were they
//! worth it" needed a patched engine until this log (docs/simulator.md, rounds 36, 46 and 49
//! traced runs that way).

use serde::{Deserialize, Serialize};

use crate::strategy::Command;

/// One command, written when its candidates drained (a command still waiting for its
/// replacements when the run ends has no record).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommandRecord {
    /// When the command passed validation and its replacements were launched.
    pub accepted_at: i64,
    /// When its candidates began to drain (their first pods evicted).
    pub drained_at: i64,
    /// Seconds from `drained_at` until the last candidate was deleted: 0 unless a
    /// PodDisruptionBudget held evictions back; absent when the run ended mid-drain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_seconds: Option<i64>,
    /// `Empty`, `Underutilized (delete)`, ... as in the summary's `commands_by_reason`.
    pub reason: String,
    pub candidates: Vec<CandidateRecord>,
    pub replacements: Vec<ReplacementRecord>,
    /// Pods the drain evicted: what the command cost in disruption (pods that ended on
    /// their own while a budget held the drain back were not evicted).
    pub pods_evicted: u32,
    /// Hourly price the strategy expected to save.
    pub saving_per_hour: f64,
    /// The strategy's own account of its choice (the core's rationale), when it gives one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rationale: String,
}

impl CommandRecord {
    /// The record of `cmd`, accepted at `accepted_at` and drained at `drained_at` with
    /// `candidates` as they were then.
    pub fn new(
        cmd: &Command,
        accepted_at: i64,
        drained_at: i64,
        candidates: Vec<CandidateRecord>,
    ) -> CommandRecord {
        CommandRecord {
            accepted_at,
            drained_at,
            drain_seconds: None,
            reason: cmd.reason.clone(),
            pods_evicted: candidates.iter().map(|r| r.pods).sum(),
            candidates,
            replacements: cmd
                .replacements
                .iter()
                .map(|r| ReplacementRecord {
                    instance_type: r.instance_type.clone(),
                    zone: r.zone.clone(),
                    price: r.price,
                })
                .collect(),
            saving_per_hour: cmd.savings,
            rationale: cmd
                .core
                .as_ref()
                .map(|k| k.rationale.summary.clone())
                .unwrap_or_default(),
        }
    }
}

/// A node a command removed, as it was when it drained.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CandidateRecord {
    pub instance_type: String,
    pub zone: String,
    pub price: f64,
    /// Pods it ran when it drained (daemonset pods not counted).
    pub pods: u32,
    /// Seconds from its launch request (or the run's start, for a scenario's node) to the drain.
    pub age_seconds: i64,
}

/// A node a command launched in the candidates' place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ReplacementRecord {
    pub instance_type: String,
    pub zone: String,
    pub price: f64,
}
