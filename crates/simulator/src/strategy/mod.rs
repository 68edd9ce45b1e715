//! Strategies: the decision makers the engine drives. The engine owns time, the cloud and the
//! kube-scheduler; a strategy only sees core snapshots and returns launches and disruption
//! commands, which is exactly the controller's contract with the core.

pub mod cas;
pub mod cluster;
pub mod core_backed;

use provisioner_core as core;
use serde::Serialize;

use crate::error::{Result, SimError};
use crate::scenario::Settings;

/// A node to launch, with the pods the decision expects on it (nominated to it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LaunchRequest {
    pub nodepool: Option<String>,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: core::CapacityType,
    pub price: f64,
    pub pods: Vec<core::PodRef>,
    /// Where the cloud may launch it instead when this offering has no capacity: one
    /// request that names many pools, as Karpenter's EC2 CreateFleet does (every option of
    /// the NodeClaim in every zone its requirements allow, of the same capacity type),
    /// cheapest first. Empty: only this offering (a Cluster API MachineDeployment is one
    /// instance type in one zone).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fleet: Vec<core::Launch>,
}

/// The outcome of one provisioning decision.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Provision {
    /// Pending pods the decision expects on existing or in-flight nodes.
    pub placements: Vec<core::Placement>,
    pub launches: Vec<LaunchRequest>,
    pub unschedulable: Vec<core::Unschedulable>,
    /// Price of this round's new nodes and the planner's lower bound for them, when the
    /// planner proves one (the optimiser does).
    pub round_cost: f64,
    pub round_lower_bound: Option<f64>,
    /// The optimiser's wall-clock safety net, not its work budget, ended this round's plan
    /// (`optimize::WALL_CLOCK_NOTE`): the run may differ from another run of the scenario.
    pub wall_clock_cut: bool,
}

/// Remove some nodes, maybe launching replacements first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Command {
    /// `Empty`, `Underutilized`, ... (for the report).
    pub reason: String,
    pub candidates: Vec<String>,
    pub replacements: Vec<LaunchRequest>,
    /// Where the candidates' pods are expected to go (existing nodes); pods of replacement
    /// nodes are listed on the replacements.
    pub placements: Vec<core::Placement>,
    /// Hourly price saved.
    pub savings: f64,
    /// The core's own command, for re-validation.
    #[serde(skip)]
    pub core: Option<Box<core::disruption::Command>>,
}

/// When the engine asks a strategy to provision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Karpenter's batch window (idle / max from the settings).
    Batch,
    /// Every so many seconds while pods are pending (the Cluster Autoscaler's scan loop).
    Periodic(i64),
}

/// One decision maker.
pub trait Autoscaler: Send {
    /// Provision for the pending pods of `snap`.
    fn provision(&mut self, snap: &core::Snapshot) -> Provision;
    /// At most one disruption command (the engine calls this on the disruption period; nodes
    /// already being disrupted are `marked_for_deletion` in the snapshot).
    fn disrupt(&mut self, snap: &core::Snapshot) -> Option<Command>;
    /// After a [`Autoscaler::disrupt`] that found nothing: the earliest time the strategy's
    /// own time-based state could change its answer with the cluster unchanged (the engine
    /// skips the loop until then, or until the cluster changes). `None`: only cluster changes
    /// and `consolidateAfter` gates matter.
    fn wake_at(&self) -> Option<i64> {
        None
    }
    /// Re-check a command just before executing it (Karpenter re-simulates after 15 s).
    /// `snap` shows the command's candidates as ordinary nodes.
    /// Scheduling simulations the disruption decisions ran so far (for the report).
    fn simulations(&self) -> u64 {
        0
    }
    /// `Err` carries why the command no longer holds.
    fn revalidate(&mut self, _snap: &core::Snapshot, _cmd: &Command) -> Result<(), String> {
        Ok(())
    }
    fn trigger(&self) -> Trigger {
        Trigger::Batch
    }
    /// Seconds between choosing a command and executing it (Karpenter: 15 s, CAS: 0).
    fn validation_delay(&self, settings: &Settings) -> i64 {
        settings.validation_delay_seconds
    }
    /// Period of [`Autoscaler::disrupt`].
    fn disruption_period(&self, settings: &Settings) -> i64 {
        settings.disruption_period_seconds
    }
    /// Whether no disruption is decided while a command is under way, its replacements
    /// launching or its candidates draining: our controller's tick waits for the replacements
    /// and it is "busy" while any NodeClaim terminates; Karpenter (v1.14) hands commands to an
    /// asynchronous queue and decides on, within its budgets.
    fn waits_for_commands(&self) -> bool {
        false
    }
    /// From the launch request until a launch the cloud refuses is seen failed, unless the
    /// scenario sets one for all (`settings.launchFailureSeconds`).
    fn launch_failure_seconds(&self) -> i64 {
        60
    }
    /// How long an offering whose launch failed is skipped: our controller's launch-failure
    /// back-off and the Cluster Autoscaler's initial node-group back-off are 5 minutes.
    fn launch_backoff_seconds(&self) -> i64 {
        300
    }
    /// Each further failure of the same offering doubles its back-off, up to this: our
    /// controller's `--launch-failure-backoff-max` and the Cluster Autoscaler's node-group
    /// back-off, 30 minutes. `None`: a fixed window (Karpenter's unavailable-offerings cache).
    fn launch_backoff_max_seconds(&self) -> Option<i64> {
        Some(1800)
    }
    /// While this many instance types of one zone (and capacity type) are backed off, the
    /// whole zone is; `None`: offering by offering only (Karpenter, the Cluster Autoscaler).
    fn zone_backoff_after(&self) -> Option<usize> {
        None
    }
}

/// A strategy the simulator can run, with an honest account of which code decides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StrategyInfo {
    pub name: &'static str,
    pub title: &'static str,
    /// Which code makes the provisioning decisions.
    pub provisioning: &'static str,
    /// Which code makes the disruption decisions.
    pub disruption: &'static str,
    /// Whether it can run in this build.
    pub available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable_reason: Option<&'static str>,
    /// Runs only when asked for by name (ablations of the default's rules).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub on_request: bool,
}

/// Every strategy the simulator knows, available or not.
pub fn catalog() -> Vec<StrategyInfo> {
    vec![
        StrategyInfo {
            name: "cost-aware",
            title: "ours: cost-aware heuristic",
            provisioning: core_backed::COST_AWARE,
            disruption: core_backed::OUR_DISRUPTION,
            available: true,
            unavailable_reason: None,
            on_request: false,
        },
        StrategyInfo {
            name: "cost-aware+opt",
            title: "ours: heuristic + optimiser",
            provisioning: core_backed::COST_AWARE_OPT,
            disruption: core_backed::OUR_DISRUPTION,
            available: true,
            unavailable_reason: None,
            on_request: false,
        },
        StrategyInfo {
            name: "karpenter",
            title: "Karpenter-faithful baseline",
            provisioning: core_backed::KARPENTER,
            disruption: core_backed::KARPENTER_DISRUPTION,
            available: true,
            unavailable_reason: None,
            on_request: false,
        },
        StrategyInfo {
            name: "cas",
            title: "Cluster-Autoscaler-like baseline",
            provisioning: cas::BACKING,
            disruption: cas::BACKING,
            available: true,
            unavailable_reason: None,
            on_request: false,
        },
        StrategyInfo {
            name: "cost-aware-legacy",
            title: "ablation: cost-aware without the payback rule",
            provisioning: core_backed::COST_AWARE,
            disruption: core_backed::LEGACY_DISRUPTION,
            available: true,
            unavailable_reason: None,
            on_request: true,
        },
        StrategyInfo {
            name: "cost-aware-round1",
            title: "ablation: cost-aware without anticipation and the merge search",
            provisioning: core_backed::COST_AWARE,
            disruption: core_backed::ROUND1_DISRUPTION,
            available: true,
            unavailable_reason: None,
            on_request: true,
        },
        StrategyInfo {
            name: "cost-aware-nomerge",
            title: "ablation: cost-aware without the merge search",
            provisioning: core_backed::COST_AWARE,
            disruption: core_backed::NOMERGE_DISRUPTION,
            available: true,
            unavailable_reason: None,
            on_request: true,
        },
        StrategyInfo {
            name: "cost-aware-heuristic",
            title: "ablation: cost-aware with the heuristic alone in provisioning",
            provisioning: core_backed::HEURISTIC,
            disruption: core_backed::OUR_DISRUPTION,
            available: true,
            unavailable_reason: None,
            on_request: true,
        },
        StrategyInfo {
            name: "cost-aware-weighted",
            title: "ablation: cost-aware with a high disruption-cost weight instead of payback",
            provisioning: core_backed::COST_AWARE,
            disruption: core_backed::WEIGHTED_DISRUPTION,
            available: true,
            unavailable_reason: None,
            on_request: true,
        },
    ]
}

/// Names of the strategies that can run.
pub fn available() -> Vec<&'static str> {
    catalog()
        .into_iter()
        .filter(|s| s.available && !s.on_request)
        .map(|s| s.name)
        .collect()
}

/// Resolve requested names (empty: all available) or fail naming the problem.
pub fn resolve(names: &[String]) -> Result<Vec<StrategyInfo>> {
    let all = catalog();
    if names.is_empty() {
        return Ok(all
            .into_iter()
            .filter(|s| s.available && !s.on_request)
            .collect());
    }
    let mut out = Vec::new();
    for n in names {
        let Some(info) = all.iter().find(|s| s.name == n) else {
            let known: Vec<_> = all.iter().map(|s| s.name).collect();
            return Err(SimError::UnknownStrategy(n.clone(), known.join(", ")));
        };
        if !info.available {
            return Err(SimError::StrategyUnavailable(
                n.clone(),
                info.unavailable_reason.unwrap_or("not built").to_string(),
            ));
        }
        if !out.iter().any(|s: &StrategyInfo| s.name == info.name) {
            out.push(info.clone());
        }
    }
    Ok(out)
}

/// Build a runnable strategy.
pub fn build(name: &str, settings: &Settings) -> Result<Box<dyn Autoscaler>> {
    Ok(match name {
        "cost-aware" => Box::new(core_backed::CoreStrategy::new(
            core_backed::Kind::CostAware,
            settings,
        )),
        "cost-aware+opt" => Box::new(core_backed::CoreStrategy::new(
            core_backed::Kind::CostAwareOpt,
            settings,
        )),
        "karpenter" => Box::new(core_backed::CoreStrategy::new(
            core_backed::Kind::Karpenter,
            settings,
        )),
        "cost-aware-legacy" => Box::new(core_backed::CoreStrategy::new(
            core_backed::Kind::CostAwareLegacy,
            settings,
        )),
        "cost-aware-round1" => Box::new(core_backed::CoreStrategy::new(
            core_backed::Kind::CostAwareRound1,
            settings,
        )),
        "cost-aware-heuristic" => Box::new(core_backed::CoreStrategy::new(
            core_backed::Kind::CostAwareHeuristic,
            settings,
        )),
        "cost-aware-nomerge" => Box::new(core_backed::CoreStrategy::new(
            core_backed::Kind::CostAwareNoMerge,
            settings,
        )),
        "cost-aware-weighted" => Box::new(core_backed::CoreStrategy::new(
            core_backed::Kind::CostAwareWeighted,
            settings,
        )),
        "cas" => Box::new(cas::ClusterAutoscaler::new(settings.cas.clone())),
        other => {
            let known = catalog()
                .iter()
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(", ");
            return Err(SimError::UnknownStrategy(other.to_string(), known));
        }
    })
}
