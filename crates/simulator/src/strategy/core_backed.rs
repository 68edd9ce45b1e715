//! Strategies whose every decision is made by `provisioner-core`: the scheduling simulation
//! (`schedule` / `schedule_with`), the optimiser (`optimize::Optimizer`, a `LaunchPlanner`),
//! disruption (`disruption::disrupt`, or Karpenter's search re-implemented in
//! `disruption::karpenter_baseline`) and command re-validation (`disruption::validate_with`).
//! This module only translates between the core's results and the engine's requests.

use provisioner_core as core;
use provisioner_core::disruption::{self, Destination, DisruptionOptions};
use provisioner_core::optimize::{Optimizer, OptimizerConfig};
use provisioner_core::{ClusterState, SchedulingOptions};

use super::{Autoscaler, Command, LaunchRequest, Provision};

pub const COST_AWARE: &str = "provisioner-core schedule() with the CostAware planner, and the optimiser on rounds of 5 or more new nodes in at most 250 request classes (optimize::large_rounds)";
pub const HEURISTIC: &str = "provisioner-core schedule() with the CostAware planner alone, on every round (ablation: cost-aware before optimize::large_rounds)";
pub const COST_AWARE_OPT: &str = "provisioner-core schedule_with() and the optimize::Optimizer planner (ILP warm-started from CostAware; lower bound by column generation)";
pub const LEGACY_DISRUPTION: &str = "as cost-aware, with the payback and headroom rules off: any worst-case saving > 0, ranked by saving - 0.001 x disruption cost (the rules before; ablation)";
pub const WEIGHTED_DISRUPTION: &str = "as cost-aware, with the payback rule replaced by saving - weightedAblationWeight x disruption cost > 0 (the crude alternative; ablation)";
pub const ROUND1_DISRUPTION: &str = "as cost-aware-nomerge, and provisioning sizes nodes for their batch alone (no anticipation): the default after issue 16's round 1 (ablation)";
pub const NOMERGE_DISRUPTION: &str = "as cost-aware, without the merge search (disruption::merge; mergeGroups 0): the search before it (ablation)";
pub const KARPENTER: &str =
    "provisioner-core schedule() with the KarpenterBaseline planner (Karpenter-faithful greedy)";
pub const OUR_DISRUPTION: &str = "provisioner-core disruption::disrupt() (emptiness, drift/expiry, consolidation search with N replacements), re-validated with disruption::validate_with()";
pub const KARPENTER_DISRUPTION: &str = "provisioner-core emptiness + disruption::karpenter_baseline (Karpenter's prefix multi-node and single-node search, at most one replacement), re-validated with disruption::validate_with()";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    CostAware,
    CostAwareOpt,
    Karpenter,
    /// `cost-aware` with the previous rule: any saving > 0, ranked with the tiny default
    /// disruption-cost weight (ablation).
    CostAwareLegacy,
    /// `cost-aware` with the crude alternative to payback: saving > 0 after a large
    /// disruption-cost weight (ablation).
    CostAwareWeighted,
    /// `cost-aware` without the merge search (ablation).
    CostAwareNoMerge,
    /// `cost-aware` without the merge search and without anticipation (ablation).
    CostAwareRound1,
    /// `cost-aware` with the heuristic alone in provisioning, also on large rounds (ablation).
    CostAwareHeuristic,
}

#[derive(Debug)]
pub struct CoreStrategy {
    kind: Kind,
    sched: SchedulingOptions,
    disruption: DisruptionOptions,
    optimizer: Option<Optimizer>,
    simulations: u64,
    /// When a loop that found nothing should run again though the cluster has not changed
    /// ([`Autoscaler::wake_at`]).
    wake: Option<i64>,
}

/// The longest the simulator lets a quiet cluster go unexamined: the controller looks every
/// 10 s; an hour keeps a quiet trace's extra loops to one an hour.
const MAX_QUIET_SECONDS: i64 = 3600;

/// When the core's answer on an unchanged cluster may have changed: under the payback rule
/// pods' expected remaining lives grow with their age (Lindy) and the turnover cap with the
/// time since the last arrival, and the headroom rule forgets arrivals older than its
/// lookback, so a command refused now can be taken later with nothing else happening (the
/// controller, looking every 10 s, takes it). Looked at again after a quarter of the youngest
/// pod's age (a 25% older horizon), at least a minute and at most [`MAX_QUIET_SECONDS`] later.
/// Karpenter's rules do not read the clock (`karpenter` on openb moves by 0.98 of 30,238 with
/// the same wakes), so its loops still wait for a change.
fn next_look(snap: &core::Snapshot) -> i64 {
    let youngest = snap
        .pods
        .iter()
        .filter(|p| p.node_name.is_some() && !p.is_daemonset_pod())
        .map(|p| (snap.now - p.created_at).max(0))
        .min()
        .unwrap_or(MAX_QUIET_SECONDS);
    snap.now + (youngest / 4).clamp(60, MAX_QUIET_SECONDS)
}

impl CoreStrategy {
    pub fn new(kind: Kind, settings: &crate::scenario::Settings) -> Self {
        let strategy = match kind {
            Kind::Karpenter => core::Strategy::KarpenterBaseline,
            _ => core::Strategy::CostAware,
        };
        let sched = SchedulingOptions {
            strategy,
            large_rounds: match kind {
                Kind::CostAwareRound1 | Kind::CostAwareHeuristic => None,
                _ => SchedulingOptions::default().large_rounds,
            },
            anticipation: match kind {
                Kind::CostAwareRound1 => None,
                _ => settings
                    .core_disruption
                    .anticipation
                    .as_ref()
                    .map(|a| a.to_core()),
            },
            // Where the simulated kube-scheduler does not follow the plan, plan for its queue
            // as the controller does on a real cluster.
            queue_shuffle: (settings.pending_pod_placement
                == crate::scenario::PendingPodPlacement::Scheduler)
                .then(core::queue_shuffle::QueueShuffle::default),
            balance_zones: settings.balance_zones,
            ..SchedulingOptions::default()
        };
        let disruption = DisruptionOptions {
            scheduling: sched.clone(),
            // Parallelism comes from running strategies and seeds side by side.
            parallel: false,
            ..DisruptionOptions::default()
        };
        let cd = &settings.core_disruption;
        let disruption = match kind {
            // Karpenter has no payback rule; re-validation reads it (`validate_with`).
            Kind::Karpenter => DisruptionOptions {
                payback: None,
                move_onto_empty_nodes: true,
                // Karpenter counts a merge against the budget whole.
                staged_merge_followers: 0,
                // Karpenter re-plans freshly moved pods like any others.
                settle_seconds: 0,
                ..disruption
            },
            _ => DisruptionOptions {
                min_saving_per_hour: cd.min_saving_per_hour,
                min_saving_fraction: cd.min_saving_fraction,
                max_simulations: cd.max_simulations,
                merge_groups: match kind {
                    Kind::CostAwareNoMerge | Kind::CostAwareRound1 => 0,
                    _ => cd.merge_groups,
                },
                payback: match kind {
                    Kind::CostAwareLegacy | Kind::CostAwareWeighted => None,
                    _ => cd.payback.as_ref().map(|p| p.to_core()),
                },
                headroom: match kind {
                    Kind::CostAwareLegacy => None,
                    _ => cd.headroom.as_ref().map(|h| h.to_core()),
                },
                disruption_cost_weight: match kind {
                    Kind::CostAwareWeighted => cd.weighted_ablation_weight,
                    _ => disruption.disruption_cost_weight,
                },
                move_onto_empty_nodes: cd.move_onto_empty_nodes,
                staged_merge_followers: match kind {
                    Kind::CostAwareNoMerge | Kind::CostAwareRound1 => 0,
                    _ => cd.staged_merge_followers,
                },
                settle_seconds: cd.settle_seconds,
                pdb_per_command: cd.pdb_per_command,
                ..disruption
            },
        };
        CoreStrategy {
            kind,
            sched,
            disruption,
            simulations: 0,
            wake: None,
            optimizer: (kind == Kind::CostAwareOpt)
                .then(|| Optimizer::new(OptimizerConfig::default())),
        }
    }
}

fn launches_from(
    result: &core::SchedulingResult,
    snap: &core::Snapshot,
    fleet: bool,
) -> Vec<LaunchRequest> {
    result
        .new_node_claims
        .iter()
        .map(|c| LaunchRequest {
            nodepool: Some(c.nodepool.clone()),
            instance_type: c.launch.instance_type.clone(),
            zone: c.launch.zone.clone(),
            capacity_type: c.launch.capacity_type,
            price: c.launch.price,
            pods: c.pods.clone(),
            fleet: if fleet {
                fleet_of(snap, &c.requirements, &c.instance_type_options, &c.launch)
            } else {
                Vec::new()
            },
        })
        .collect()
}

/// The pools one EC2 CreateFleet request of Karpenter's names for a NodeClaim (a new one, or a
/// consolidation replacement): each instance-type option in each available offering of the
/// launch's capacity type, in a zone the claim's requirements allow; cheapest first. The
/// cloud fills the request from any of them.
fn fleet_of(
    snap: &core::Snapshot,
    requirements: &[core::Requirement],
    options: &[core::InstanceTypeOption],
    launch: &core::Launch,
) -> Vec<core::Launch> {
    let reqs = core::requirements::Requirements::from_wire(requirements.iter());
    let zones = reqs.get(core::labels::ZONE);
    let mut out: Vec<core::Launch> = options
        .iter()
        .filter_map(|o| {
            snap.instance_types
                .iter()
                .find(|t| t.name == o.instance_type)
        })
        .flat_map(|t| {
            t.offerings
                .iter()
                .filter(|o| {
                    o.available
                        && o.capacity_type == launch.capacity_type
                        && zones.is_none_or(|z| z.has(&o.zone))
                })
                .map(|o| core::Launch {
                    instance_type: t.name.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type,
                    price: o.price,
                })
        })
        .collect();
    out.sort_by(|a, b| {
        a.price
            .total_cmp(&b.price)
            .then_with(|| a.instance_type.cmp(&b.instance_type))
            .then_with(|| a.zone.cmp(&b.zone))
    });
    out
}

/// The engine's command for the core's; `fleet`: each replacement is one CreateFleet over its
/// options (Karpenter), not one pool (a MachineDeployment).
fn translate(cmd: disruption::Command, snap: &core::Snapshot, fleet: bool) -> Command {
    let mut replacements: Vec<LaunchRequest> = cmd
        .replacements
        .iter()
        .map(|r| LaunchRequest {
            nodepool: Some(r.nodepool.clone()),
            instance_type: r.launch.instance_type.clone(),
            zone: r.launch.zone.clone(),
            capacity_type: r.launch.capacity_type,
            price: r.launch.price,
            pods: Vec::new(),
            fleet: if fleet {
                fleet_of(snap, &r.requirements, &r.instance_type_options, &r.launch)
            } else {
                Vec::new()
            },
        })
        .collect();
    let mut placements = Vec::new();
    for m in &cmd.moves {
        match &m.to {
            Destination::Existing(node) => placements.push(core::Placement {
                pod: m.pod.clone(),
                node: node.clone(),
            }),
            Destination::Replacement(name) => {
                if let Some(i) = cmd.replacements.iter().position(|r| &r.name == name) {
                    replacements[i].pods.push(m.pod.clone());
                }
            }
        }
    }
    let reason = match (cmd.method, cmd.replacements.is_empty()) {
        (disruption::Method::Emptiness, _) => "Empty".to_string(),
        (disruption::Method::Consolidation, true) => "Underutilized (delete)".to_string(),
        (disruption::Method::Consolidation, false) => "Underutilized (replace)".to_string(),
        (m, _) => format!("{m:?}"),
    };
    Command {
        reason,
        candidates: cmd.candidates.iter().map(|c| c.name.clone()).collect(),
        replacements,
        placements,
        savings: cmd.saving_per_hour,
        core: Some(Box::new(cmd)),
    }
}

impl Autoscaler for CoreStrategy {
    fn provision(&mut self, snap: &core::Snapshot) -> Provision {
        let result = match &self.optimizer {
            Some(opt) => {
                let mut state = ClusterState::new(snap);
                let pending: Vec<core::Pod> = snap
                    .pods
                    .iter()
                    .filter(|p| p.node_name.is_none() && !p.is_daemonset_pod())
                    .map(|p| core::Pod::clone(p))
                    .collect();
                let mut r = core::schedule_with(&mut state, &pending, &self.sched, opt);
                core::scheduler::finish_provisioning(snap, &mut r, &self.sched);
                r
            }
            None => core::schedule(snap, &self.sched),
        };
        Provision {
            placements: result.existing_placements.clone(),
            launches: launches_from(&result, snap, self.kind == Kind::Karpenter),
            unschedulable: result.unschedulable.clone(),
            round_cost: result.new_node_cost_per_hour,
            round_lower_bound: result.cost_lower_bound,
            wall_clock_cut: result
                .planner_notes
                .iter()
                .any(|n| n.starts_with(core::optimize::WALL_CLOCK_NOTE)),
        }
    }

    fn disrupt(&mut self, snap: &core::Snapshot) -> Option<Command> {
        let cmd = match self.kind {
            Kind::Karpenter => {
                let set = disruption::find_candidates(snap, &self.disruption);
                let budgets = disruption::Budgets::compute(snap);
                let (empty, _) = disruption::emptiness::emptiness(&set, &budgets, &self.disruption);
                match empty {
                    Some(c) => Some(c),
                    None => {
                        let r = disruption::karpenter_baseline::karpenter_consolidation(
                            snap,
                            &self.disruption,
                        );
                        self.simulations += r.simulations as u64;
                        r.command
                    }
                }
            }
            Kind::CostAware
            | Kind::CostAwareOpt
            | Kind::CostAwareLegacy
            | Kind::CostAwareWeighted
            | Kind::CostAwareNoMerge
            | Kind::CostAwareRound1
            | Kind::CostAwareHeuristic => {
                let d = disruption::disrupt(snap, &self.disruption);
                self.simulations += d
                    .methods
                    .iter()
                    .map(|m| m.sets_evaluated as u64)
                    .sum::<u64>();
                let timed = self.disruption.payback.is_some() || self.disruption.headroom.is_some();
                self.wake = (d.command.is_none() && timed).then(|| next_look(snap));
                d.command
            }
        };
        let fleet = self.kind == Kind::Karpenter;
        cmd.map(|c| translate(c, snap, fleet))
    }

    fn simulations(&self) -> u64 {
        self.simulations
    }

    fn wake_at(&self) -> Option<i64> {
        self.wake
    }

    /// Our controller's disruption loop waits for a command's replacements and is busy while
    /// a NodeClaim terminates; Karpenter's is not.
    fn waits_for_commands(&self) -> bool {
        self.kind != Kind::Karpenter
    }

    /// Karpenter learns from CreateFleet's answer (a second); our controller from the
    /// Machine's `InfrastructureReady` condition once the infrastructure provider's first
    /// attempt failed (bootstrap data, the cloud call, CAPI's mirror, the controller's 2 s
    /// poll: seconds; `capi_adapter::capacity_errors`).
    fn launch_failure_seconds(&self) -> i64 {
        if self.kind == Kind::Karpenter { 1 } else { 10 }
    }

    /// Karpenter's unavailable-offerings cache keeps an offering whose launch failed for
    /// 3 minutes; our controller backs off for 5.
    fn launch_backoff_seconds(&self) -> i64 {
        if self.kind == Kind::Karpenter {
            180
        } else {
            300
        }
    }

    /// Our controller's adapter backs a zone off once two instance types failed there
    /// (`capi_adapter::instance_types::ZONE_BACKOFF_TYPES`); Karpenter backs off offering by
    /// offering.
    fn launch_backoff_max_seconds(&self) -> Option<i64> {
        (self.kind != Kind::Karpenter).then_some(1800)
    }

    fn zone_backoff_after(&self) -> Option<usize> {
        (self.kind != Kind::Karpenter).then_some(2)
    }

    fn revalidate(&mut self, snap: &core::Snapshot, cmd: &Command) -> Result<(), String> {
        match &cmd.core {
            Some(c) => {
                let v = disruption::validate_with(c, snap, &self.disruption, &self.sched);
                if v.valid {
                    Ok(())
                } else {
                    Err(v.failures.join("; "))
                }
            }
            None => Ok(()),
        }
    }
}
