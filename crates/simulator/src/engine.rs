//! The discrete-event simulation: pods arrive and leave, the provisioning batch closes, the
//! strategy decides, nodes appear after the launch and registration delays, the simulated
//! kube-scheduler binds pods, the disruption loop runs on its period with its validation
//! delay, and every change is accounted for in cost and utilisation.
//!
//! Time is integer seconds of simulated clock. Everything is ordered by (time, sequence), and
//! strategies see `provisioner_core::Snapshot`s built from this state, so a run is a pure
//! function of the world and the strategy: deterministic for a seed. Wall-clock timing is
//! measured but kept apart from the results.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use provisioner_core as core;
use provisioner_core::resources::pod_requests;
use serde::{Deserialize, Serialize};

use crate::catalog;
use crate::command_log::{CandidateRecord, CommandRecord};
use crate::error::Result;
use crate::pdb::Census;
use crate::predicates::{self, NodeView, PodFilter, PodMark};
use crate::scenario::{EvictedPodPlacement, PendingPodPlacement, SchedulerScoring};
use crate::strategy::{self, Autoscaler, Command, LaunchRequest, Provision, Trigger};
use crate::world::World;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrive(usize),
    Leave(usize),
    BatchCheck(u64),
    NodeReady(usize),
    Tick(u64),
    Scan(u64),
    Validate(usize),
    /// A command's drain tries the evictions its pods' budgets refused again.
    Drain(usize),
    /// Pods a decision placed did not bind: decide again (see [`RETRY_SECONDS`]).
    Retry,
    /// A launch an outage fails is seen failed ([`crate::outages`]).
    LaunchFailed(usize),
    /// An offering's launch-failure back-off ends: pending pods may fit it again.
    BackoffEnds,
    /// A capacity outage that reclaims running nodes begins (`capacityOutages[i]`).
    Reclaim(usize),
    /// A reclaimed node's notice is over: the cloud ends it.
    NoticeEnds(usize),
}

/// How long pods that a decision placed but that did not bind wait for the next decision.
/// The kube-scheduler binds as it scores, not as the autoscaler planned, so a pod promised
/// to a node can find it taken; no new pod event follows, so Karpenter's pod controller
/// requeues provisionable pods every 10 s and our controller retries pending pods
/// (`provisioning::RETRY`). Without this the simulator left such pods pending until
/// something else happened (an hour on `examples/karpenter-benchmark.yaml`).
pub const RETRY_SECONDS: i64 = 10;
/// How long a drain waits before trying evictions a PodDisruptionBudget refused again:
/// Karpenter's termination controller requeues refused evictions with a backoff of up to 10 s.
pub const EVICTION_RETRY_SECONDS: i64 = 5;
/// How long a drain under way keeps a strategy that waits for drains from deciding: the
/// controller's `--disruption-busy-while-terminating` default.
pub const BUSY_WHILE_DRAINING_SECONDS: i64 = 600;
/// A node removed younger than this counts in [`Summary::nodes_removed_young`]: half an hour,
/// long enough for a launch (90 s) and a few consolidation rounds, short against any
/// node's payback.
pub const YOUNG_NODE_SECONDS: i64 = 1800;
/// How long after its last back-off ends an offering's failure streak is forgotten (our
/// controller's and the Cluster Autoscaler's 3 hours).
pub const BACKOFF_STREAK_RESET_SECONDS: i64 = 3 * 3600;

/// An eviction this soon after the pod's previous one, or this soon before the pod would have
/// ended on its own, is churn the cost figure hides: the first moved a pod that a later
/// decision moves again, the second restarted a pod for a saving its own end would have
/// brought anyway.
pub const CHURN_WINDOW_SECONDS: i64 = 1800;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Launching,
    Ready,
    Draining,
    Deleted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PodPhase {
    NotYet,
    Pending,
    Bound(usize),
    Gone,
}

#[derive(Debug)]
struct PodState {
    req: core::Resources,
    phase: PodPhase,
    /// Node the last decision expects it on (in-flight or replacement).
    nominated: Option<usize>,
    arrived: i64,
    first_bound: Option<i64>,
    evictions: u32,
    /// When it was last evicted, until it is bound again.
    evicted_at: Option<i64>,
    /// When it was last evicted, kept after it is bound again.
    last_evicted_at: Option<i64>,
    /// When the work it carries on began, as a controller knows it: set when a decision's
    /// snapshot matches it to an eviction (`provisioner_core::replacements`, what the
    /// controller's `PodLifetimes::note_replacements` remembers), cleared when it is evicted
    /// in turn. The match is the controller's, by namespace, labels, requests and time, so it
    /// can be wrong where the simulator knows better; the simulator does not correct it.
    continues_since: Option<i64>,
    /// When it last started running (its current binding), what a kubelet reports as
    /// `status.startTime`.
    started_at: Option<i64>,
    /// When its pending [`Ev::Leave`] is due; an event at any other time is stale. A Job's
    /// pod has none until it runs, and loses it when evicted (its work starts over).
    leave_at: Option<i64>,
    /// A budget refused its eviction in the drain under way (counted once per drain).
    held_by_pdb: bool,
}

#[derive(Debug)]
struct NodeMeta {
    phase: Phase,
    nodepool: Option<String>,
    instance_type: String,
    /// Zone and capacity type, for the report's node-usage table.
    zone: String,
    capacity_type: String,
    price: f64,
    capacity: core::Resources,
    created_at: i64,
    last_pod_event_at: i64,
    bound: BTreeSet<usize>,
    ds: Vec<core::Pod>,
    ds_req: core::Resources,
    /// Held by a disruption command awaiting validation.
    reserved: bool,
    /// A launch the cloud refused: no instance ever ran, so it adds no node-hours or cost.
    refused: bool,
}

#[derive(Debug)]
struct PendingCommand {
    cmd: Command,
    nodes: Vec<usize>,
    pods_at_proposal: Vec<BTreeSet<usize>>,
    /// Nodes that must be ready (initialized) before the candidates drain: the command's
    /// replacements and any launching node its placements move pods to.
    waiting_on: BTreeSet<usize>,
    replacement_nodes: Vec<usize>,
    /// When it passed validation (`None` while it waits for it).
    accepted_at: Option<i64>,
    /// Its record in the command log, once its candidates began to drain.
    log_index: Option<usize>,
}

/// One sample of the time series.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sample {
    pub t: i64,
    pub cost_per_hour: f64,
    /// The world's lower bound at `t` (see `lower_bound_kind`), the same in every run of it.
    pub lower_bound_per_hour: f64,
    /// Its per-resource part alone (the bound before the LP part), for comparison.
    #[serde(default)]
    pub per_resource_bound_per_hour: f64,
    pub nodes: u32,
    pub pending_pods: u32,
    pub running_pods: u32,
    pub cpu_utilisation: f64,
    pub memory_utilisation: f64,
    /// Pods evicted by disruption so far (cumulative), for the evictions-over-time plot.
    /// Absent in reports written before it existed (read as 0).
    #[serde(default)]
    pub evicted_pods: u32,
}

/// Nodes of one (instance type, zone, capacity type) over a run: how many were launched and
/// the node-hours and cost they ran up (launch request to deletion or the run's end), so a
/// report shows which types and zones a strategy used, not only what it cost in total.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeUsage {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    /// Nodes launched during the run (a scenario's existing nodes count 0 here).
    pub nodes_launched: u32,
    pub node_hours: f64,
    pub cost: f64,
}

/// Figures of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// Total spend over the run, in price units (USD for the built-in catalogs).
    pub total_cost: f64,
    /// The lower bound integrated over time (see `lower_bound_kind`); the world's, so the
    /// same for every strategy.
    pub lower_bound_cost: f64,
    /// total_cost / lower_bound_cost.
    pub cost_over_lower_bound: f64,
    /// Requested / allocatable CPU over ready nodes, time-weighted.
    pub avg_cpu_utilisation: f64,
    pub avg_memory_utilisation: f64,
    pub pending_p50_seconds: f64,
    pub pending_p95_seconds: f64,
    pub pending_max_seconds: f64,
    pub pods_total: u32,
    pub pods_scheduled: u32,
    /// Pods never bound during the run that were still waiting at the end.
    pub pods_never_scheduled: u32,
    /// Pods that left (their deletion time came) before they were ever bound: short-lived
    /// pods that waited longer than they would have run.
    pub pods_left_pending: u32,
    pub nodes_launched: u32,
    pub nodes_terminated: u32,
    /// Nodes removed less than [`YOUNG_NODE_SECONDS`] after their launch request: what one
    /// decision launched and another tore down soon after (the churn between provisioning
    /// and consolidation that a cost figure alone hides).
    #[serde(default)]
    pub nodes_removed_young: u32,
    pub peak_nodes: u32,
    /// Disruption commands executed.
    pub disruption_commands: u32,
    /// Pods bound where their requests did not fit (only a snapshot's bound pods can be:
    /// they are placed where the snapshot says). Normally 0.
    #[serde(default)]
    pub overcommitted_bindings: u32,
    /// Pods evicted by disruption (every eviction counts, a pod moved twice twice).
    pub pods_disrupted: u32,
    /// Distinct pods evicted at least once.
    #[serde(default)]
    pub pods_disrupted_distinct: u32,
    /// Evictions less than [`CHURN_WINDOW_SECONDS`] after the same pod's previous eviction: a
    /// move that a later decision undid or repeated.
    #[serde(default)]
    pub pods_disrupted_again_soon: u32,
    /// Evictions less than [`CHURN_WINDOW_SECONDS`] before the pod would have ended on its own
    /// (the scenario knows; a controller cannot): restarts bought for little.
    #[serde(default)]
    pub pods_disrupted_near_end: u32,
    /// Longest an evicted pod waited for its new node (0 when every move found its node
    /// ready, as it should).
    #[serde(default)]
    pub evicted_wait_max_seconds: f64,
    /// Median and 95th percentile of the seconds an evicted pod waited to be bound again,
    /// over every eviction that was followed by a binding (0 without evictions). Churn that
    /// parks pods on a node still launching shows here, not in the arrival percentiles.
    #[serde(default)]
    pub evicted_wait_p50_seconds: f64,
    #[serde(default)]
    pub evicted_wait_p95_seconds: f64,
    /// Pod-hours spent pending after an eviction (until bound again, gone, or the run's end).
    #[serde(default)]
    pub evicted_pending_pod_hours: f64,
    /// Pod-hours spent pending in total: the integral of the pending-pod count over the run,
    /// first waits and waits after evictions alike, so neither can hide behind percentiles.
    #[serde(default)]
    pub pending_pod_hours: f64,
    /// Pod-hours of Job work evictions threw away: each evicted Job pod's run so far, which
    /// its replacement runs again (and the run pays for again). 0 without Jobs.
    #[serde(default)]
    pub job_work_lost_pod_hours: f64,
    /// Evictions a PodDisruptionBudget held back at least once: the drain waited for the
    /// budget's other pods to be ready again (each pod counted once per drain). 0 without
    /// budgets.
    #[serde(default)]
    pub evictions_held_by_pdb: u32,
    /// Node-hours that nodes spent draining, from the drain's first eviction to their
    /// deletion: what budgets that hold drains back cost (0 when every drain is instant).
    #[serde(default)]
    pub draining_node_hours: f64,
    /// Launches a capacity outage failed ([`crate::outages`]; 0 without outages).
    #[serde(default)]
    pub launch_failures: u32,
    /// Commands rolled back because a replacement's launch failed: the candidates stay.
    #[serde(default)]
    pub commands_rolled_back: u32,
    /// Running nodes a reclaimed spot pool took back (`capacityOutages[].reclaimRunning`):
    /// the cloud's doing, not a decision, so not in `nodes_terminated`.
    #[serde(default)]
    pub nodes_interrupted: u32,
    /// Pods those nodes ran: evicted whatever their budgets, not counted in `pods_disrupted`
    /// (which counts the autoscaler's own evictions), but their wait to run again is in the
    /// evicted pods' pending figures.
    #[serde(default)]
    pub pods_interrupted: u32,
    /// Commands dropped at validation (cluster changed meanwhile).
    pub commands_invalidated: u32,
    /// Why, as the strategy's re-validation said (digits masked), with counts.
    pub invalidation_reasons: BTreeMap<String, u32>,
    pub commands_by_reason: BTreeMap<String, u32>,
    pub provisioning_decisions: u32,
    pub disruption_evaluations: u32,
    /// Scheduling simulations the disruption evaluations ran (core strategies).
    pub disruption_simulations: u64,
    /// Summed hourly price of the nodes each provisioning round launched.
    pub round_cost: f64,
    /// Rounds whose planner proved a lower bound (the optimiser does), the summed price of
    /// those rounds' launches and the summed bounds: the per-round optimality gap.
    pub rounds_with_bound: u32,
    pub round_cost_with_bound: f64,
    pub round_lower_bound: f64,
    /// Provisioning rounds the optimiser's wall-clock safety net cut short (a machine much
    /// slower than the reference): when above zero, another run may differ.
    #[serde(default)]
    pub wall_clock_cuts: u32,
}

/// Wall-clock figures (not deterministic; kept out of [`Summary`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Timing {
    pub wall_seconds: f64,
    pub decision_seconds: f64,
    pub decisions_per_second: f64,
    /// Wall seconds computing the world's lower bound (once per world, shared by its runs).
    #[serde(default)]
    pub bound_seconds: f64,
}

/// A finished run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunResult {
    pub strategy: String,
    pub seed: u64,
    pub summary: Summary,
    pub series: Vec<Sample>,
    pub timing: Timing,
    /// First reasons pods could not be scheduled (deduplicated, at most 20).
    pub unschedulable_reasons: Vec<String>,
    /// Node usage by instance type, zone and capacity type (sorted by those). Absent in
    /// reports written before it existed.
    #[serde(default)]
    pub node_usage: Vec<NodeUsage>,
    /// The disruption commands carried out, in the order their candidates drained
    /// ([`crate::command_log`]). Absent in reports written before it existed.
    #[serde(default)]
    pub commands: Vec<CommandRecord>,
}

/// How the lower bound in reports is computed ([`crate::bound`] has the why).
pub const LOWER_BOUND_KIND: &str = "what any cluster that runs every present pod must cost: at each instant the largest of (a) the per-resource bound (max over CPU, memory and GPU of the present pods' requests x the catalog's cheapest price per allocatable unit), (b) the core's LP bound (column generation, Farley-certified) of packing the pods present during the whole surrounding interval from scratch onto every launchable shape, daemonset overhead included, and (c) the prices behind nearby LP solves charged to the pods present at the instant; existing nodes' possible savings subtracted";

struct Sim<'w> {
    w: &'w World,
    now: i64,
    seq: u64,
    q: BinaryHeap<Reverse<(i64, u64, Ev)>>,
    pods: Vec<PodState>,
    pod_index: BTreeMap<(String, String), usize>,
    views: Vec<NodeView>,
    meta: Vec<NodeMeta>,
    ready: BTreeSet<usize>,
    pending: BTreeSet<usize>,
    // Batch window state.
    batch_open: Option<(i64, u64)>,
    batch_gen: u64,
    last_pending_at: i64,
    // Loops.
    tick_gen: u64,
    tick_at: Option<i64>,
    scan_gen: u64,
    scan_at: Option<i64>,
    /// When an [`Ev::Retry`] is due, if one is.
    retry_at: Option<i64>,
    version: u64,
    idle_version: Option<u64>,
    quiet_until: i64,
    /// Commands waiting out their validation delay. Karpenter waits inside the disruption
    /// reconcile (the validator sleeps, then re-checks), so no other decision is made meanwhile.
    validating: usize,
    commands: Vec<PendingCommand>,
    // Accounting.
    cost_rate: f64,
    cost: f64,
    cpu_used_int: f64,
    cpu_alloc_int: f64,
    mem_used_int: f64,
    mem_alloc_int: f64,
    ready_used: core::Resources,
    ready_alloc: core::Resources,
    summary: Summary,
    /// Pending pods that were evicted and not yet bound again (for the integral).
    evicted_pending: usize,
    /// Seconds each eviction-to-binding wait took.
    evicted_waits: Vec<i64>,
    /// Pod-seconds pending, in total and after evictions.
    pending_pod_secs: f64,
    evicted_pending_pod_secs: f64,
    series: Vec<Sample>,
    /// Node usage so far, keyed by (instance type, zone, capacity type).
    usage: BTreeMap<(String, String, String), NodeUsage>,
    step: i64,
    next_sample: i64,
    decision_secs: f64,
    reasons: BTreeSet<String>,
    node_count: u32,
    scoring: SchedulerScoring,
    trigger: Trigger,
    monotone: bool,
    /// Namespace labels of every namespace the pods use (the API server's name label).
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// Lifetimes of the most recent pods that left on their own (evictions are not endings:
    /// the pod goes on elsewhere), at most [`ENDED_LIFETIMES_KEPT`]; the snapshot's
    /// `ended_pods`.
    ended: std::collections::VecDeque<core::EndedPod>,
    /// Since when `ended` holds every ending: the start of the run, or the end of the last
    /// ending dropped from it (the snapshot's `observed_since`).
    observed_since: i64,
    /// Evictions of the last [`EVICTIONS_KEPT_SECONDS`], oldest first: the snapshot's
    /// `recent_evictions` when evicted pods are seen as recreated.
    evictions: std::collections::VecDeque<core::Eviction>,
    /// Commands whose candidates drained, for the report.
    command_log: Vec<CommandRecord>,
    /// For each pod (arrival), the budgets ([`World::pdbs`]) that select it.
    pod_pdbs: Vec<Vec<usize>>,
    /// For each budget, the pods it selects.
    pdb_members: Vec<Vec<usize>>,
    /// Commands whose drain is under way, and when each began.
    drains: BTreeMap<usize, i64>,
    /// Node-seconds spent by nodes whose drain has begun and that are not deleted yet.
    draining_node_secs: f64,
    /// Offerings this run's autoscaler saw fail, skipped until their back-off ends.
    backoff: crate::outages::Backoff,
    /// The pools of each failing launch that named many ([`LaunchRequest::fleet`]): all of
    /// them are backed off when its failure is seen.
    failed_fleets: BTreeMap<usize, Vec<core::Launch>>,
    /// The autoscaler's [`Autoscaler::zone_backoff_after`].
    zone_backoff_after: Option<usize>,
    /// The first back-off after a failed launch: the scenario's for all, or the autoscaler's
    /// [`Autoscaler::launch_backoff_seconds`].
    backoff_base: i64,
    /// The autoscaler's [`Autoscaler::launch_backoff_max_seconds`] (`None` when the scenario
    /// sets one back-off for all).
    backoff_max: Option<i64>,
    /// From a refused launch's request until it is seen failed: the scenario's for all, or
    /// the autoscaler's [`Autoscaler::launch_failure_seconds`].
    failure_seen_after: i64,
    /// Per offering: failures in a row and when its last back-off ends (the streak is
    /// forgotten [`BACKOFF_STREAK_RESET_SECONDS`] after that).
    failure_streaks: BTreeMap<(String, String, String), (u32, i64)>,
}

/// How long evictions stay in the snapshot: as long as the controller keeps them.
const EVICTIONS_KEPT_SECONDS: i64 = 1800;

/// How many ended pod lifetimes the snapshot carries, as a controller would keep: enough for
/// a survival estimate, bounded so snapshots stay small.
const ENDED_LIFETIMES_KEPT: usize = 4096;

fn pref(p: &core::Pod) -> (String, String) {
    (p.namespace.clone(), p.name.clone())
}

/// The time series' sample step: `settings.sampleStepSeconds`, else about horizon/1000
/// rounded up to a readable step. The lower bound's intervals are multiples of it.
pub fn sample_step(w: &World) -> i64 {
    let end = w.end();
    w.settings
        .sample_step_seconds
        .unwrap_or_else(|| {
            let raw = (end / 1000).max(10);
            [
                10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400,
            ]
            .into_iter()
            .find(|s| *s >= raw)
            .unwrap_or(raw)
        })
        .max(1)
}

impl<'w> Sim<'w> {
    fn new(w: &'w World) -> Self {
        let step = sample_step(w);
        let pod_pdbs: Vec<Vec<usize>> = w
            .arrivals
            .iter()
            .map(|a| {
                (0..w.pdbs.len())
                    .filter(|&k| w.pdbs[k].selects(&a.pod))
                    .collect()
            })
            .collect();
        let mut pdb_members = vec![Vec::new(); w.pdbs.len()];
        for (pi, ks) in pod_pdbs.iter().enumerate() {
            for &k in ks {
                pdb_members[k].push(pi);
            }
        }
        Sim {
            w,
            now: 0,
            seq: 0,
            q: BinaryHeap::new(),
            pods: Vec::with_capacity(w.arrivals.len()),
            pod_index: BTreeMap::new(),
            views: Vec::new(),
            meta: Vec::new(),
            ready: BTreeSet::new(),
            pending: BTreeSet::new(),
            batch_open: None,
            batch_gen: 0,
            last_pending_at: 0,
            tick_gen: 0,
            tick_at: None,
            scan_gen: 0,
            scan_at: None,
            retry_at: None,
            version: 1,
            idle_version: None,
            quiet_until: i64::MAX,
            validating: 0,
            commands: Vec::new(),
            cost_rate: 0.0,
            cost: 0.0,
            cpu_used_int: 0.0,
            cpu_alloc_int: 0.0,
            mem_used_int: 0.0,
            mem_alloc_int: 0.0,
            ready_used: core::Resources::default(),
            ready_alloc: core::Resources::default(),
            summary: Summary::default(),
            evicted_pending: 0,
            evicted_waits: Vec::new(),
            pending_pod_secs: 0.0,
            evicted_pending_pod_secs: 0.0,
            series: Vec::new(),
            usage: BTreeMap::new(),
            step,
            next_sample: 0,
            decision_secs: 0.0,
            reasons: BTreeSet::new(),
            node_count: 0,
            scoring: w.settings.scheduler_scoring,
            trigger: Trigger::Batch,
            monotone: !w.arrivals.iter().any(|a| {
                !a.pod.topology_spread.is_empty()
                    || !a.pod.pod_affinity.required.is_empty()
                    || !a.pod.pod_anti_affinity.required.is_empty()
            }),
            namespaces: provisioner_core::filter::default_namespace_labels(
                w.arrivals.iter().map(|a| a.pod.namespace.as_str()),
            ),
            ended: std::collections::VecDeque::new(),
            observed_since: 0,
            evictions: std::collections::VecDeque::new(),
            command_log: Vec::new(),
            pod_pdbs,
            pdb_members,
            drains: BTreeMap::new(),
            draining_node_secs: 0.0,
            backoff: crate::outages::Backoff::default(),
            failed_fleets: BTreeMap::new(),
            zone_backoff_after: None,
            backoff_base: 0,
            backoff_max: None,
            failure_seen_after: 0,
            failure_streaks: BTreeMap::new(),
        }
    }

    fn push(&mut self, t: i64, ev: Ev) {
        self.seq += 1;
        self.q.push(Reverse((t, self.seq, ev)));
    }

    /// Move the clock to `t`, integrating cost and utilisation and emitting samples.
    fn advance(&mut self, t: i64) {
        while self.next_sample <= t {
            let s = self.next_sample;
            self.integrate(s);
            self.record(s);
            self.next_sample += self.step;
        }
        self.integrate(t);
    }

    fn integrate(&mut self, t: i64) {
        if t <= self.now {
            return;
        }
        let dt = (t - self.now) as f64;
        self.cost += self.cost_rate * dt / 3600.0;
        self.cpu_used_int += self.ready_used.cpu_milli as f64 * dt;
        self.cpu_alloc_int += self.ready_alloc.cpu_milli as f64 * dt;
        self.mem_used_int += self.ready_used.memory as f64 * dt;
        self.mem_alloc_int += self.ready_alloc.memory as f64 * dt;
        self.pending_pod_secs += self.pending.len() as f64 * dt;
        self.evicted_pending_pod_secs += self.evicted_pending as f64 * dt;
        if !self.drains.is_empty() {
            self.draining_node_secs += self.draining_nodes() as f64 * dt;
        }
        self.now = t;
    }

    fn record(&mut self, t: i64) {
        let running = self
            .pods
            .iter()
            .filter(|p| matches!(p.phase, PodPhase::Bound(_)))
            .count() as u32;
        self.series.push(Sample {
            t,
            cost_per_hour: self.cost_rate,
            // The world's bound, filled in after the run (`bound::apply`).
            lower_bound_per_hour: 0.0,
            per_resource_bound_per_hour: 0.0,
            nodes: self.node_count,
            pending_pods: self.pending.len() as u32,
            running_pods: running,
            cpu_utilisation: ratio(
                self.ready_used.cpu_milli as f64,
                self.ready_alloc.cpu_milli as f64,
            ),
            memory_utilisation: ratio(
                self.ready_used.memory as f64,
                self.ready_alloc.memory as f64,
            ),
            evicted_pods: self.summary.pods_disrupted,
        });
    }

    /// A change that may open a disruption opportunity (capacity freed, nodes added or
    /// removed, budgets moved): the disruption loop must look again.
    fn changed(&mut self) {
        self.version += 1;
    }

    /// A change that only adds load (a pod bound, a pod pending). Adding load never makes a
    /// deletion or a cheaper replacement possible when no pod has topology spread or pod
    /// (anti-)affinity (those are not monotone), so the loop need not look again for it.
    fn loaded(&mut self) {
        if !self.monotone {
            self.version += 1;
        }
    }

    // ---- nodes ----

    fn add_node(&mut self, node: core::Node, phase: Phase) -> usize {
        let id = self.views.len();
        // Daemonset pods that land on it.
        let mut ds = Vec::new();
        let mut ds_req = core::Resources::default();
        for d in &self.w.daemonsets {
            let p = &d.pod;
            let selected = p
                .node_selector
                .iter()
                .all(|(k, v)| node.labels.get(k) == Some(v))
                && (p.required_node_affinity.is_empty()
                    || provisioner_core::requirements::terms_match(
                        &p.required_node_affinity,
                        &node.labels,
                    ));
            if selected
                && provisioner_core::taints::tolerates_all(&node.taints, &p.tolerations, false)
            {
                ds_req.add_assign(&pod_requests(p));
                let mut dp = p.clone();
                dp.name = format!("{}-{}", d.name, node.name);
                dp.node_name = Some(node.name.clone());
                ds.push(dp);
            }
        }
        let mut view = NodeView::new(
            &node.name,
            node.labels.clone(),
            node.taints.clone(),
            node.allocatable.clone(),
        );
        for p in &ds {
            let mut mark = PodMark::of(usize::MAX, p);
            mark.daemon = true;
            view.add_pod(mark, &pod_requests(p));
        }
        view.schedulable = phase == Phase::Ready;
        view.live = phase == Phase::Ready;
        self.views.push(view);
        let label = |k: &str| node.labels.get(k).cloned().unwrap_or_default();
        self.meta.push(NodeMeta {
            phase,
            nodepool: node.nodepool.clone(),
            instance_type: node.instance_type.clone().unwrap_or_default(),
            zone: label(core::labels::ZONE),
            capacity_type: label(core::labels::CAPACITY_TYPE),
            price: node.price,
            capacity: node.capacity.clone(),
            created_at: self.now,
            last_pod_event_at: self.now,
            bound: BTreeSet::new(),
            ds,
            ds_req,
            reserved: false,
            refused: false,
        });
        self.cost_rate += node.price;
        self.node_count += 1;
        self.summary.peak_nodes = self.summary.peak_nodes.max(self.node_count);
        if phase == Phase::Ready {
            self.ready.insert(id);
            self.ready_alloc.add_assign(&node.allocatable);
            let ds_req = self.meta[id].ds_req.clone();
            self.ready_used.add_assign(&ds_req);
        }
        self.changed();
        id
    }

    fn launch(&mut self, l: &LaunchRequest) -> usize {
        let filled = self.fill_from_fleet(l);
        let l = filled.as_ref().unwrap_or(l);
        let Some(it) = self
            .w
            .instance_types
            .iter()
            .find(|t| t.name == l.instance_type)
        else {
            // A strategy asked for a type we do not have: count it, launch nothing.
            self.reasons.insert(format!(
                "launch of unknown instance type {}",
                l.instance_type
            ));
            return usize::MAX;
        };
        let name = format!("node-{}", self.views.len());
        let mut labels = it.labels.clone();
        let mut taints = it.taints.clone();
        if let Some(pool) = l
            .nodepool
            .as_ref()
            .and_then(|p| self.w.nodepools.iter().find(|x| &x.name == p))
        {
            labels.extend(pool.labels.clone());
            labels.insert(core::labels::NODEPOOL.into(), pool.name.clone());
            taints.extend(pool.taints.iter().cloned());
        }
        labels.insert(core::labels::INSTANCE_TYPE.into(), it.name.clone());
        labels.insert(core::labels::ZONE.into(), l.zone.clone());
        labels.insert(
            core::labels::CAPACITY_TYPE.into(),
            l.capacity_type.as_label().into(),
        );
        labels.insert(core::labels::HOSTNAME.into(), name.clone());
        let node = core::Node {
            name,
            labels,
            taints,
            allocatable: catalog::allocatable(it),
            capacity: it.capacity.clone(),
            nodepool: l.nodepool.clone(),
            instance_type: Some(it.name.clone()),
            price: l.price,
            ..Default::default()
        };
        let id = self.add_node(node, Phase::Launching);
        self.summary.nodes_launched += 1;
        self.note_usage(id, true);
        let fails = self.out_of_capacity(&it.name, &l.zone, l.capacity_type);
        if fails {
            // The cloud refused it: no instance runs, nothing is billed, however long the
            // autoscaler takes to see it (the Cluster Autoscaler's 15 minutes on CAPI).
            self.cost_rate -= self.meta[id].price;
            self.meta[id].price = 0.0;
            self.meta[id].refused = true;
            let at = self.now + self.failure_seen_after;
            self.push(at, Ev::LaunchFailed(id));
            // A request of many pools fails only when every pool is out: each is learnt.
            if !l.fleet.is_empty() {
                self.failed_fleets.insert(id, l.fleet.clone());
            }
        } else {
            let delay =
                self.w.settings.launch_delay_seconds + self.w.settings.registration_delay_seconds;
            self.push(
                self.now + delay.max(0) + self.ready_jitter(id),
                Ev::NodeReady(id),
            );
        }
        for p in &l.pods {
            if let Some(&pi) = self.pod_index.get(&(p.namespace.clone(), p.name.clone())) {
                self.pods[pi].nominated = Some(id);
            }
        }
        id
    }

    /// Whether a launch of this offering requested now fails (a capacity outage covers it).
    fn out_of_capacity(&self, instance_type: &str, zone: &str, ct: core::CapacityType) -> bool {
        self.w
            .settings
            .capacity_outages
            .iter()
            .any(|o| o.covers(instance_type, zone, ct, self.now))
    }

    /// The pool a request naming many pools ([`LaunchRequest::fleet`]) is filled from when
    /// its chosen one is out: the cheapest that an outage does not cover now. `None`: launch
    /// as asked (it succeeds, or nothing in the request can).
    fn fill_from_fleet(&self, l: &LaunchRequest) -> Option<LaunchRequest> {
        if l.fleet.is_empty() || !self.out_of_capacity(&l.instance_type, &l.zone, l.capacity_type) {
            return None;
        }
        let pool = l
            .fleet
            .iter()
            .find(|f| !self.out_of_capacity(&f.instance_type, &f.zone, f.capacity_type))?;
        Some(LaunchRequest {
            instance_type: pool.instance_type.clone(),
            zone: pool.zone.clone(),
            capacity_type: pool.capacity_type,
            price: pool.price,
            ..l.clone()
        })
    }

    /// How much later than the nominal delays node `id` is ready
    /// ([`crate::scenario::Settings::ready_jitter_seconds`]): a fixed draw per node, so every
    /// strategy's `n`-th launch lags alike and runs stay deterministic.
    fn ready_jitter(&self, id: usize) -> i64 {
        let most = self.w.settings.ready_jitter_seconds;
        if most <= 0 {
            return 0;
        }
        let mut rng = crate::rng::Rng::new((id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        rng.below(most as usize + 1) as i64
    }

    /// Node usage accounting: a launch counts the node, a deletion (or the run's end) adds
    /// the hours since its launch request, which is when it starts to cost.
    fn note_usage(&mut self, id: usize, launched: bool) {
        let m = &self.meta[id];
        let key = (
            m.instance_type.clone(),
            m.zone.clone(),
            m.capacity_type.clone(),
        );
        let hours = if m.refused {
            0.0
        } else {
            (self.now - m.created_at).max(0) as f64 / 3600.0
        };
        let price = m.price;
        let u = self.usage.entry(key).or_insert_with_key(|k| NodeUsage {
            instance_type: k.0.clone(),
            zone: k.1.clone(),
            capacity_type: k.2.clone(),
            ..NodeUsage::default()
        });
        if launched {
            u.nodes_launched += 1;
        } else {
            u.node_hours += hours;
            u.cost += hours * price;
        }
    }

    fn node_ready(&mut self, id: usize) {
        if self.meta[id].phase != Phase::Launching {
            return;
        }
        self.meta[id].phase = Phase::Ready;
        self.meta[id].last_pod_event_at = self.now;
        self.views[id].schedulable = true;
        self.views[id].live = true;
        self.ready.insert(id);
        let alloc = self.views[id].allocatable.clone();
        self.ready_alloc.add_assign(&alloc);
        let ds_req = self.meta[id].ds_req.clone();
        self.ready_used.add_assign(&ds_req);
        self.changed();
        if self.scheduler_places_pending() {
            self.schedule_queue();
        } else {
            self.bind_as_planned_on_ready(id);
        }
        if self
            .pending
            .iter()
            .any(|&p| self.pods[p].nominated == Some(id))
        {
            self.schedule_retry();
        }
        let mut ready_commands = Vec::new();
        for (ci, c) in self.commands.iter_mut().enumerate() {
            if c.waiting_on.remove(&id) && c.waiting_on.is_empty() {
                ready_commands.push(ci);
            }
        }
        for ci in ready_commands {
            self.start_drain(ci);
        }
    }

    /// Whether pending pods are placed by the scheduler's scoring alone
    /// ([`PendingPodPlacement::Scheduler`]).
    fn scheduler_places_pending(&self) -> bool {
        self.w.settings.pending_pod_placement == PendingPodPlacement::Scheduler
    }

    /// A pending pod a decision placed on ready node `ni`: bound there, or, when the
    /// scheduler does not follow plans, wherever it scores best.
    fn bind_placed(&mut self, pi: usize, ni: usize) -> bool {
        if self.scheduler_places_pending() {
            self.schedule_pod(pi)
        } else {
            self.try_bind_to(pi, ni)
        }
    }

    /// The kube-scheduler after a cluster event ([`PendingPodPlacement::Scheduler`]): every
    /// pending pod back in its queue, taken in the queue's order (`PrioritySort`: higher
    /// priority first, then the older) and bound wherever it scores best, nominations unseen.
    fn schedule_queue(&mut self) {
        let mut queue: Vec<usize> = self.pending.iter().copied().collect();
        queue.sort_by_key(|&pi| {
            let priority = self.w.arrivals[pi].pod.priority;
            (std::cmp::Reverse(priority), self.created_at(pi), pi)
        });
        for pi in queue {
            self.schedule_pod(pi);
        }
    }

    /// [`PendingPodPlacement::Planned`] on a node becoming ready: the pods nominated to it,
    /// then the pods not waiting for another launch, each on its planned node first.
    fn bind_as_planned_on_ready(&mut self, id: usize) {
        // Nominated pods first, then anything pending that fits.
        let nominated: Vec<usize> = self
            .pending
            .iter()
            .copied()
            .filter(|&p| self.pods[p].nominated == Some(id))
            .collect();
        for pi in nominated {
            self.try_bind_to(pi, id);
        }
        let rest: Vec<usize> = self.pending.iter().copied().collect();
        for pi in rest {
            if self.pods[pi]
                .nominated
                .is_none_or(|n| n == id || self.meta[n].phase != Phase::Launching)
            {
                self.try_bind_to(pi, id);
            }
        }
        // A node that becomes ready is a cluster event: the kube-scheduler moves the pods it
        // could not place back to its active queue and tries them against every node, within
        // its backoff (1 s at first), not only against the new one. A pod refused by the node
        // it was nominated to (a zone spread that counted the domains of nodes still
        // launching when it was tried) would otherwise wait for the provisioner's next retry.
        let stuck: Vec<usize> = self
            .pending
            .iter()
            .copied()
            .filter(|&p| {
                self.pods[p]
                    .nominated
                    .is_none_or(|n| self.meta[n].phase != Phase::Launching)
            })
            .collect();
        for pi in stuck {
            // The node it was planned on first, as for nominated pods above.
            let planned = self.pods[pi].nominated;
            if !planned.is_some_and(|n| self.try_bind_to(pi, n)) {
                self.schedule_pod(pi);
            }
        }
    }

    fn delete_node(&mut self, id: usize) {
        if self.meta[id].phase == Phase::Deleted {
            return;
        }
        self.summary.nodes_terminated += 1;
        if self.now - self.meta[id].created_at < YOUNG_NODE_SECONDS {
            self.summary.nodes_removed_young += 1;
        }
        self.remove_node(id);
    }

    /// Takes node `id` out of the cluster and stops its cost (a deletion, or a launch that
    /// failed: one the cloud refused costs nothing, one in flight when its spot pool was
    /// reclaimed costs from its request).
    fn remove_node(&mut self, id: usize) {
        let m = &mut self.meta[id];
        if m.phase == Phase::Deleted {
            return;
        }
        let was_ready = matches!(m.phase, Phase::Ready | Phase::Draining);
        m.phase = Phase::Deleted;
        let price = m.price;
        self.note_usage(id, false);
        self.cost_rate -= price;
        self.node_count -= 1;
        if was_ready {
            let alloc = self.views[id].allocatable.clone();
            self.ready_alloc = self.ready_alloc.sub(&alloc);
            let ds_req = self.meta[id].ds_req.clone();
            self.ready_used = self.ready_used.sub(&ds_req);
        }
        self.views[id].schedulable = false;
        self.views[id].live = false;
        self.ready.remove(&id);
        self.changed();
    }

    // ---- pods ----

    fn bind(&mut self, pi: usize, ni: usize) {
        let req = self.pods[pi].req.clone();
        if !self.views[ni]
            .used
            .fits_with(&req, &self.views[ni].allocatable)
        {
            // Only a snapshot's bound pods are bound without the filter.
            self.summary.overcommitted_bindings += 1;
        }
        let pod = &self.w.arrivals[pi].pod;
        self.views[ni].add_pod(PodMark::of(pi, pod), &req);
        self.ready_used.add_assign(&req);
        self.meta[ni].bound.insert(pi);
        self.meta[ni].last_pod_event_at = self.now;
        let p = &mut self.pods[pi];
        if let Some(at) = p.evicted_at.take() {
            let waited = (self.now - at) as f64;
            self.summary.evicted_wait_max_seconds =
                self.summary.evicted_wait_max_seconds.max(waited);
            self.evicted_waits.push(self.now - at);
            self.evicted_pending = self.evicted_pending.saturating_sub(1);
        }
        p.phase = PodPhase::Bound(ni);
        p.nominated = None;
        p.started_at = Some(self.now);
        // Once ready it may let its budget allow a disruption again: look then.
        if !self.pod_pdbs[pi].is_empty() {
            let ready = self.now + self.w.settings.pod_ready_seconds.max(0);
            self.quiet_until = self.quiet_until.min(ready);
        }
        if p.first_bound.is_none() {
            p.first_bound = Some(self.now);
        }
        // A Job's pod works from when it runs: its departure is set now, at each start.
        if let Some(work) = self.w.arrivals[pi].work_seconds
            && p.leave_at.is_none()
        {
            let at = self.now + work.max(0);
            p.leave_at = Some(at);
            self.push(at, Ev::Leave(pi));
        }
        self.pending.remove(&pi);
        self.loaded();
    }

    fn unbind(&mut self, pi: usize) {
        if let PodPhase::Bound(ni) = self.pods[pi].phase {
            let req = self.pods[pi].req.clone();
            self.views[ni].remove_pod(pi, &req);
            self.ready_used = self.ready_used.sub(&req);
            self.meta[ni].bound.remove(&pi);
            self.meta[ni].last_pod_event_at = self.now;
            self.changed();
        }
    }

    fn try_bind_to(&mut self, pi: usize, ni: usize) -> bool {
        let pod = &self.w.arrivals[pi].pod;
        if self.filter(pod, &self.pods[pi].req).allows(&self.views[ni]) {
            self.bind(pi, ni);
            true
        } else {
            false
        }
    }

    /// The kube-scheduler: bind to the best ready node that passes the filter.
    fn schedule_pod(&mut self, pi: usize) -> bool {
        let pod = &self.w.arrivals[pi].pod;
        let req = &self.pods[pi].req;
        let filter = self.filter(pod, req);
        let mut best: Option<(f64, usize)> = None;
        for &ni in &self.ready {
            if !filter.allows(&self.views[ni]) {
                continue;
            }
            let u = predicates::utilisation_after(req, &self.views[ni]);
            let score = match self.scoring {
                SchedulerScoring::LeastAllocated => -u,
                SchedulerScoring::MostAllocated => u,
            };
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, ni));
            }
        }
        match best {
            Some((_, ni)) => {
                self.bind(pi, ni);
                true
            }
            None => false,
        }
    }

    /// The kube-scheduler's filter for one pod over the current cluster. When no pod in the
    /// world has inter-pod constraints there is nothing to count, so the node-local part is
    /// all there is and the filter is built over no nodes.
    fn filter<'a>(&self, pod: &'a core::Pod, req: &'a core::Resources) -> PodFilter<'a> {
        let nodes: &[NodeView] = if self.monotone { &[] } else { &self.views };
        let ctx = predicates::Context {
            namespaces: &self.namespaces,
            potential: &[],
        };
        PodFilter::new(pod, req, nodes, &ctx)
    }

    fn make_pending(&mut self, pi: usize) {
        self.pods[pi].phase = PodPhase::Pending;
        self.pending.insert(pi);
        self.last_pending_at = self.now;
        self.loaded();
        self.kick_provisioning();
    }

    /// Whether a pending pod needs a decision: only pods waiting for an in-flight node do
    /// not.
    fn unresolved(&self) -> bool {
        self.pending.iter().any(|&p| {
            self.pods[p]
                .nominated
                .is_none_or(|n| self.meta[n].phase != Phase::Launching)
        })
    }

    fn schedule_retry(&mut self) {
        if self.retry_at.is_none() {
            let at = self.now + RETRY_SECONDS;
            self.retry_at = Some(at);
            self.push(at, Ev::Retry);
        }
    }

    fn kick_provisioning(&mut self) {
        match self.trigger {
            Trigger::Batch => {
                if self.batch_open.is_none() {
                    self.batch_gen += 1;
                    self.batch_open = Some((self.now, self.batch_gen));
                    let at = self.now + self.w.settings.batch_idle_seconds.max(0);
                    self.push(at, Ev::BatchCheck(self.batch_gen));
                }
            }
            Trigger::Periodic(every) => {
                if self.scan_at.is_none() {
                    let every = every.max(1);
                    let at = (self.now / every + 1) * every;
                    self.scan_gen += 1;
                    self.scan_at = Some(at);
                    self.push(at, Ev::Scan(self.scan_gen));
                }
            }
        }
    }

    // ---- snapshots ----

    /// The core's view of the cluster. Nodes held by a command awaiting validation show as
    /// `nominated` (not candidates again) unless `for_validation`.
    fn snapshot(&self, for_validation: bool) -> core::Snapshot {
        let mut nodes = Vec::new();
        let mut pods = Vec::new();
        for (ni, m) in self.meta.iter().enumerate() {
            if m.phase == Phase::Deleted {
                continue;
            }
            let v = &self.views[ni];
            nodes.push(core::Node {
                name: v.name.clone(),
                labels: v.labels.clone(),
                taints: v.taints.clone(),
                allocatable: v.allocatable.clone(),
                capacity: m.capacity.clone(),
                nodepool: m.nodepool.clone(),
                instance_type: Some(m.instance_type.clone()),
                price: m.price,
                ready: matches!(m.phase, Phase::Ready | Phase::Draining),
                initialized: matches!(m.phase, Phase::Ready | Phase::Draining),
                in_flight: m.phase == Phase::Launching,
                marked_for_deletion: m.phase == Phase::Draining,
                nominated: m.reserved && !for_validation,
                created_at: m.created_at,
                last_pod_event_at: m.last_pod_event_at,
                ..Default::default()
            });
            pods.extend(m.ds.iter().cloned());
        }
        for (pi, p) in self.pods.iter().enumerate() {
            let node_name = match p.phase {
                PodPhase::Bound(ni) => Some(self.views[ni].name.clone()),
                PodPhase::Pending => p
                    .nominated
                    .filter(|n| self.meta[*n].phase == Phase::Launching)
                    .map(|n| self.views[n].name.clone()),
                _ => continue,
            };
            let mut pod = self.w.arrivals[pi].pod.clone();
            pod.node_name = node_name;
            pod.created_at = self.created_at(pi);
            pod.started_at = match p.phase {
                PodPhase::Bound(_) => p.started_at,
                _ => None,
            };
            pods.push(pod);
        }
        core::Snapshot {
            now: self.now,
            nodes,
            pods: core::Snapshot::shared_pods(pods),
            daemonsets: self.w.daemonsets.clone(),
            nodepools: self.w.nodepools.clone(),
            instance_types: {
                let mut types = self.w.instance_types.clone();
                self.backoff
                    .apply(self.now, &mut types, self.zone_backoff_after);
                types
            },
            pdbs: (0..self.w.pdbs.len())
                .map(|k| self.w.pdbs[k].to_core(self.census(k)))
                .collect(),
            namespaces: self.namespaces.clone(),
            ended_pods: self.ended.iter().cloned().collect(),
            observed_since: Some(self.observed_since),
            // The replacement of an evicted pod keeps the pod's name here, but not its
            // creation time (`created_at`): what anticipation and headroom must net out.
            recent_evictions: if self.w.settings.evicted_pods_recreated {
                self.evictions
                    .iter()
                    .filter(|e| self.now - e.at <= EVICTIONS_KEPT_SECONDS)
                    .cloned()
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    /// When the pod the autoscalers see as `pi` was created: its workload's replacement's
    /// creation at its last eviction ([`crate::scenario::Settings::evicted_pods_recreated`]),
    /// else its arrival.
    fn created_at(&self, pi: usize) -> i64 {
        let first = self.w.arrivals[pi].pod.created_at;
        match self.pods[pi].last_evicted_at {
            Some(t) if self.w.settings.evicted_pods_recreated => t.max(first),
            _ => first,
        }
    }

    fn node_by_name(&self, name: &str) -> Option<usize> {
        // Node names are `node-<id>` for launched nodes; fall back to a scan for others.
        if let Some(id) = name
            .strip_prefix("node-")
            .and_then(|s| s.parse::<usize>().ok())
            && self.views.get(id).is_some_and(|v| v.name == name)
        {
            return Some(id);
        }
        self.views.iter().position(|v| v.name == name)
    }

    // ---- decisions ----

    fn apply_provision(&mut self, p: Provision) {
        self.summary.round_cost += p.round_cost;
        self.summary.wall_clock_cuts += u32::from(p.wall_clock_cut);
        if let Some(lb) = p.round_lower_bound {
            self.summary.rounds_with_bound += 1;
            self.summary.round_cost_with_bound += p.round_cost;
            self.summary.round_lower_bound += lb;
        }
        for pl in &p.placements {
            let (Some(&pi), Some(ni)) = (
                self.pod_index
                    .get(&(pl.pod.namespace.clone(), pl.pod.name.clone())),
                self.node_by_name(&pl.node),
            ) else {
                continue;
            };
            if self.pods[pi].phase != PodPhase::Pending {
                continue;
            }
            let phase = self.meta[ni].phase;
            match phase {
                Phase::Ready if !self.bind_placed(pi, ni) => {
                    self.pods[pi].nominated = None;
                    self.schedule_retry();
                }
                Phase::Launching => self.pods[pi].nominated = Some(ni),
                _ => {}
            }
        }
        for l in &p.launches {
            self.launch(l);
        }
        for u in p.unschedulable.iter().take(20) {
            if self.reasons.len() < 20 {
                self.reasons.insert(format!("{}: {}", u.pod, u.reason));
            }
        }
    }

    fn run_provisioning(&mut self, a: &mut dyn Autoscaler) {
        if self.pending.is_empty() {
            return;
        }
        if !self.unresolved() {
            return;
        }
        let snap = self.snapshot(false);
        self.note_replacements(&snap);
        let t0 = Instant::now();
        let p = a.provision(&snap);
        self.decision_secs += t0.elapsed().as_secs_f64();
        self.summary.provisioning_decisions += 1;
        self.apply_provision(p);
    }

    /// Make sure a disruption tick happens at the first period boundary after `after`.
    fn schedule_tick(&mut self, after: i64, period: i64) {
        let period = period.max(1);
        let at = (after.max(self.now) / period + 1) * period;
        if self.tick_at.is_some_and(|t| t <= at) {
            return;
        }
        self.tick_gen += 1;
        self.tick_at = Some(at);
        self.push(at, Ev::Tick(self.tick_gen));
    }

    fn run_disruption(&mut self, a: &mut dyn Autoscaler) {
        // A strategy that waits for commands (ours, as the controller does) decides nothing
        // while a command's candidates wait for their replacements (the controller's tick
        // waits for them to initialize; a node becoming ready wakes the loop), nor while a
        // drain is under way, for at most `BUSY_WHILE_DRAINING_SECONDS` (only a budget holds
        // one; the drain's end wakes the loop).
        if a.waits_for_commands() && self.awaiting_launches() {
            return;
        }
        if a.waits_for_commands() && self.busy_draining() {
            // Look again when the oldest drain stops holding the loop, if nothing else comes.
            let until = self
                .drains
                .values()
                .min()
                .map_or(i64::MAX, |t| t + BUSY_WHILE_DRAINING_SECONDS);
            self.quiet_until = self.quiet_until.min(until);
            return;
        }
        if self.validating > 0
            || (self.idle_version == Some(self.version) && self.now < self.quiet_until)
        {
            return;
        }
        let snap = self.snapshot(false);
        self.note_replacements(&snap);
        let t0 = Instant::now();
        let cmd = a.disrupt(&snap);
        self.decision_secs += t0.elapsed().as_secs_f64();
        self.summary.disruption_evaluations += 1;
        match cmd {
            None => {
                self.idle_version = Some(self.version);
                self.quiet_until = next_gate(&snap, self.w, a.wake_at().unwrap_or(i64::MAX))
                    .min(self.next_budget_ready());
            }
            Some(cmd) => {
                self.idle_version = None;
                let nodes: Vec<usize> = cmd
                    .candidates
                    .iter()
                    .filter_map(|n| self.node_by_name(n))
                    .collect();
                if nodes.len() != cmd.candidates.len()
                    || nodes
                        .iter()
                        .any(|&n| self.meta[n].phase != Phase::Ready || self.meta[n].reserved)
                {
                    return;
                }
                for &n in &nodes {
                    self.meta[n].reserved = true;
                }
                let pods_at_proposal = nodes.iter().map(|&n| self.meta[n].bound.clone()).collect();
                let ci = self.commands.len();
                self.commands.push(PendingCommand {
                    cmd,
                    nodes,
                    pods_at_proposal,
                    waiting_on: BTreeSet::new(),
                    replacement_nodes: Vec::new(),
                    accepted_at: None,
                    log_index: None,
                });
                self.changed();
                let delay = a.validation_delay(&self.w.settings);
                if delay <= 0 {
                    self.validate(ci, a);
                } else {
                    self.validating += 1;
                    self.push(self.now + delay, Ev::Validate(ci));
                }
            }
        }
    }

    fn validate(&mut self, ci: usize, a: &mut dyn Autoscaler) {
        // Strategies that re-validate by re-simulation (the core's) only need the nodes to
        // be there; for the others the candidates' pods must not have changed meanwhile.
        let ok = {
            let c = &self.commands[ci];
            let strict = c.cmd.core.is_none();
            c.nodes.iter().zip(&c.pods_at_proposal).all(|(&n, pods)| {
                self.meta[n].phase == Phase::Ready && (!strict || self.meta[n].bound == *pods)
            })
        };
        let ok = ok && {
            let snap = self.snapshot(true);
            let t0 = Instant::now();
            let valid = a.revalidate(&snap, &self.commands[ci].cmd);
            self.decision_secs += t0.elapsed().as_secs_f64();
            match valid {
                Ok(()) => true,
                Err(why) => {
                    // Node names differ from run to run of the same kind; keep the shape.
                    let key: String = why
                        .split(|c: char| c.is_ascii_digit())
                        .collect::<Vec<_>>()
                        .join("#");
                    let n = self.summary.invalidation_reasons.len();
                    if n < 20 || self.summary.invalidation_reasons.contains_key(&key) {
                        *self.summary.invalidation_reasons.entry(key).or_insert(0) += 1;
                    }
                    false
                }
            }
        };
        let nodes = self.commands[ci].nodes.clone();
        for &n in &nodes {
            self.meta[n].reserved = false;
        }
        if !ok {
            self.summary.commands_invalidated += 1;
            self.changed();
            return;
        }
        for &n in &nodes {
            self.meta[n].phase = Phase::Draining;
            self.views[n].schedulable = false;
        }
        self.changed();
        self.summary.disruption_commands += 1;
        self.commands[ci].accepted_at = Some(self.now);
        *self
            .summary
            .commands_by_reason
            .entry(self.commands[ci].cmd.reason.clone())
            .or_insert(0) += 1;
        let replacements = self.commands[ci].cmd.replacements.clone();
        let mut ids = Vec::new();
        for r in &replacements {
            let id = self.launch(&LaunchRequest {
                pods: Vec::new(),
                ..r.clone()
            });
            if id != usize::MAX {
                ids.push((id, r.pods.clone()));
            }
        }
        // Remember where the moved pods should go.
        for (id, pods) in &ids {
            for p in pods {
                if let Some(&pi) = self.pod_index.get(&(p.namespace.clone(), p.name.clone())) {
                    self.pods[pi].nominated = Some(*id);
                }
            }
        }
        // As Karpenter: the candidates drain only once every node their pods move to is
        // initialized, replacements and launching nodes the placements use alike, so no
        // evicted pod waits for a node.
        let mut waiting_on: BTreeSet<usize> = ids.iter().map(|(i, _)| *i).collect();
        let placements = self.commands[ci].cmd.placements.clone();
        for pl in &placements {
            let Some(ni) = self.node_by_name(&pl.node) else {
                continue;
            };
            if self.meta[ni].phase == Phase::Launching {
                waiting_on.insert(ni);
            }
            if let Some(&pi) = self
                .pod_index
                .get(&(pl.pod.namespace.clone(), pl.pod.name.clone()))
            {
                self.pods[pi].nominated = Some(ni);
            }
        }
        self.commands[ci].replacement_nodes = ids.iter().map(|(i, _)| *i).collect();
        let drain_now = waiting_on.is_empty();
        self.commands[ci].waiting_on = waiting_on;
        if drain_now {
            self.start_drain(ci);
        }
    }

    /// Remembers which of `snap`'s pods the replacement match says carry on an evicted pod's
    /// work, and since when, as the controller does at each snapshot: their lifetimes when
    /// they end, and their own evictions, count from there.
    fn note_replacements(&mut self, snap: &core::Snapshot) {
        if snap.recent_evictions.is_empty() {
            return;
        }
        let starts = core::replacements::continued_since(snap);
        for (p, since) in snap.pods.iter().zip(starts) {
            if let Some(since) = since
                && let Some(&pi) = self.pod_index.get(&pref(p))
            {
                self.pods[pi].continues_since = Some(since);
            }
        }
    }

    /// Counts an eviction of `pi` now in the churn figures.
    fn note_eviction(&mut self, pi: usize) {
        let now = self.now;
        // Only a Job's pod has work of its own to lose.
        let work = self.w.arrivals[pi].work_seconds;
        // A ReplicaSet's replacement carries on the evicted pod's work, from where a controller
        // knows it began (its own match, or its creation); a Job's starts over.
        let since = work.is_none().then(|| {
            self.pods[pi]
                .continues_since
                .unwrap_or_else(|| self.created_at(pi))
        });
        let leave_at = self.restart_elsewhere(pi);
        let p = &mut self.pods[pi];
        p.evictions += 1;
        let first = p.evictions == 1;
        let again = p
            .last_evicted_at
            .replace(now)
            .is_some_and(|t| now - t < CHURN_WINDOW_SECONDS);
        if first {
            self.summary.pods_disrupted_distinct += 1;
        }
        if again {
            self.summary.pods_disrupted_again_soon += 1;
        }
        if leave_at.is_some_and(|l| l >= now && l - now < CHURN_WINDOW_SECONDS) {
            self.summary.pods_disrupted_near_end += 1;
        }
        while self
            .evictions
            .front()
            .is_some_and(|e| now - e.at > EVICTIONS_KEPT_SECONDS)
        {
            self.evictions.pop_front();
        }
        let e = core::Eviction::of(&self.w.arrivals[pi].pod, now, since);
        self.evictions.push_back(e);
    }

    /// What any end of a running pod means for the pod that replaces it, an eviction or an
    /// interruption: the replacement is a new pod (matched afresh by the next decision's
    /// snapshot), and a Job's starts its work over, so what it had run is lost. Returns when
    /// the pod would have left.
    fn restart_elsewhere(&mut self, pi: usize) -> Option<i64> {
        let work = self.w.arrivals[pi].work_seconds;
        let p = &mut self.pods[pi];
        p.continues_since = None;
        let leave_at = if work.is_some() {
            p.leave_at.take()
        } else {
            p.leave_at
        };
        if let (Some(left), Some(work)) = (leave_at, work) {
            let ran = self.now - (left - work.max(0));
            self.summary.job_work_lost_pod_hours += ran.max(0) as f64 / 3600.0;
        }
        leave_at
    }

    /// Records command `ci` as its candidates begin to drain (before their pods are evicted);
    /// the drain adds its evictions to the record as they happen.
    fn log_command(&mut self, ci: usize) {
        let c = &self.commands[ci];
        let candidates: Vec<CandidateRecord> = c
            .nodes
            .iter()
            .map(|&n| {
                let m = &self.meta[n];
                CandidateRecord {
                    instance_type: m.instance_type.clone(),
                    zone: m.zone.clone(),
                    price: m.price,
                    pods: m.bound.len() as u32,
                    age_seconds: self.now - m.created_at,
                }
            })
            .collect();
        let mut record = CommandRecord::new(
            &c.cmd,
            c.accepted_at.unwrap_or(self.now),
            self.now,
            candidates,
        );
        record.pods_evicted = 0;
        self.commands[ci].log_index = Some(self.command_log.len());
        self.command_log.push(record);
    }

    /// When pod `pi`, bound now, is (or was) ready: `podReadySeconds` after it started.
    fn ready_at(&self, pi: usize) -> Option<i64> {
        match self.pods[pi].phase {
            PodPhase::Bound(_) => self.pods[pi]
                .started_at
                .map(|t| t + self.w.settings.pod_ready_seconds.max(0)),
            _ => None,
        }
    }

    /// Nodes of drains under way that are not deleted yet.
    fn draining_nodes(&self) -> usize {
        self.drains
            .keys()
            .flat_map(|&ci| &self.commands[ci].nodes)
            .filter(|&&n| self.meta[n].phase != Phase::Deleted)
            .count()
    }

    /// Pods present and healthy under budget `k` now: present = pending or bound (the
    /// replicas their owners want), healthy = bound and ready.
    fn census(&self, k: usize) -> Census {
        let mut c = Census::default();
        for &pi in &self.pdb_members[k] {
            if matches!(self.pods[pi].phase, PodPhase::Pending | PodPhase::Bound(_)) {
                c.expected += 1;
            }
            if self.ready_at(pi).is_some_and(|t| t <= self.now) {
                c.healthy += 1;
            }
        }
        c
    }

    /// Whether an accepted command's candidates still wait for the nodes their pods move to
    /// (its replacements) to initialize. A node becoming ready wakes the loop.
    fn awaiting_launches(&self) -> bool {
        self.commands
            .iter()
            .any(|c| c.accepted_at.is_some() && !c.waiting_on.is_empty())
    }

    /// Whether a drain under way began less than [`BUSY_WHILE_DRAINING_SECONDS`] ago.
    fn busy_draining(&self) -> bool {
        self.drains
            .values()
            .any(|&t| self.now - t < BUSY_WHILE_DRAINING_SECONDS)
    }

    /// When the next pod under a PodDisruptionBudget becomes ready: its budget may then allow
    /// a disruption it refused, with no other change to the cluster (a controller looks every
    /// 10 s and would see it). `i64::MAX` when none is waiting.
    fn next_budget_ready(&self) -> i64 {
        self.pdb_members
            .iter()
            .flatten()
            .filter_map(|&pi| self.ready_at(pi))
            .filter(|&t| t > self.now)
            .min()
            .unwrap_or(i64::MAX)
    }

    /// Whether the Eviction API lets `pi` go now; `allowance` holds each budget's
    /// `disruptionsAllowed` left in this pass and whether it is whole (no fewer healthy pods
    /// than it wants). A pod under two budgets never goes (the API refuses it); a pod not yet
    /// ready goes while its budget is whole, without using it (policy/v1's default
    /// `IfHealthyBudget`); a ready pod takes one from its budget's allowance.
    fn may_evict(&self, pi: usize, allowance: &mut BTreeMap<usize, (i64, bool)>) -> bool {
        let budgets = &self.pod_pdbs[pi];
        let Some(&k) = budgets.first() else {
            return true;
        };
        if budgets.len() > 1 {
            return false;
        }
        let (left, whole) = *allowance.entry(k).or_insert_with(|| {
            let c = self.census(k);
            let b = &self.w.pdbs[k];
            (b.disruptions_allowed(c), c.healthy >= b.desired_healthy(c))
        });
        if self.ready_at(pi).is_none_or(|t| t > self.now) {
            return whole;
        }
        if left <= 0 {
            return false;
        }
        allowance.insert(k, (left - 1, whole));
        true
    }

    /// Launch `id` failed: its node goes (it never ran a pod), the pods nominated to it are
    /// pending again, the autoscaler skips the offering for its back-off
    /// ([`Self::backoff_window`]), and a command
    /// waiting for it is rolled back, as the controller does: candidates kept, replacements
    /// not yet initialized deleted.
    fn launch_failed(&mut self, id: usize) {
        if self.meta[id].phase != Phase::Launching {
            return;
        }
        self.summary.launch_failures += 1;
        let until = self.now + self.backoff_window(id);
        let m = &self.meta[id];
        self.backoff
            .record(&m.instance_type, &m.zone, &m.capacity_type, until);
        for f in self.failed_fleets.remove(&id).unwrap_or_default() {
            self.backoff
                .record(&f.instance_type, &f.zone, f.capacity_type.as_label(), until);
        }
        self.push(until, Ev::BackoffEnds);
        let mut gone = vec![id];
        let waiting: Vec<usize> = (0..self.commands.len())
            .filter(|&ci| self.commands[ci].waiting_on.contains(&id))
            .collect();
        for ci in waiting {
            self.summary.commands_rolled_back += 1;
            let c = &mut self.commands[ci];
            c.waiting_on.clear();
            gone.extend(c.replacement_nodes.iter().copied());
            let nodes = c.nodes.clone();
            for n in nodes {
                if self.meta[n].phase == Phase::Draining {
                    self.meta[n].phase = Phase::Ready;
                    self.views[n].schedulable = true;
                }
            }
        }
        for n in gone {
            if self.meta[n].phase != Phase::Launching {
                continue;
            }
            for pi in 0..self.pods.len() {
                if self.pods[pi].nominated == Some(n) {
                    self.pods[pi].nominated = None;
                }
            }
            self.remove_node(n);
        }
        if self.unresolved() {
            self.kick_provisioning();
        }
    }

    /// Capacity outage `oi` takes back the running nodes it covers (a spot pool reclaimed):
    /// their pods are evicted now, whatever their budgets, and the nodes end after the
    /// notice; launches in flight there fail as any launch into the outage does. No
    /// autoscaler is told: on a Cluster API cluster a reclaimed instance is a Machine that
    /// failed and a Node that went away, so each learns from its own failed launches only.
    fn reclaim(&mut self, oi: usize) {
        let outage = &self.w.settings.capacity_outages[oi];
        let notice = self.w.settings.interruption_notice_seconds.max(0);
        let covered: Vec<usize> = (0..self.meta.len())
            .filter(|&n| {
                let m = &self.meta[n];
                m.phase != Phase::Deleted
                    && outage.matches(&m.instance_type, &m.zone, &m.capacity_type)
            })
            .collect();
        for n in covered {
            if self.meta[n].phase == Phase::Deleted {
                // A replacement a rollback above took away.
                continue;
            }
            if self.meta[n].phase == Phase::Launching {
                self.launch_failed(n);
                continue;
            }
            self.summary.nodes_interrupted += 1;
            self.views[n].schedulable = false;
            self.evict_interrupted(n);
            if notice == 0 {
                self.remove_node(n);
            } else {
                self.meta[n].phase = Phase::Draining;
                self.push(self.now + notice, Ev::NoticeEnds(n));
            }
        }
        self.changed();
    }

    /// Evicts every pod a reclaimed node `n` runs, budgets or not: the instance ends anyway.
    fn evict_interrupted(&mut self, n: usize) {
        let bound: Vec<usize> = self.meta[n].bound.iter().copied().collect();
        for &pi in &bound {
            self.unbind(pi);
            self.restart_elsewhere(pi);
            self.pods[pi].held_by_pdb = false;
            if self.pods[pi].evicted_at.replace(self.now).is_none() {
                self.evicted_pending += 1;
            }
            self.summary.pods_interrupted += 1;
        }
        self.place_evicted(bound);
    }

    /// The back-off after launch `id` failed: [`Self::backoff_base`], doubled for each failure
    /// of the same offering before it in a row, up to the autoscaler's most
    /// ([`Self::backoff_max`]).
    fn backoff_window(&mut self, id: usize) -> i64 {
        let base = self.backoff_base.max(0);
        let Some(most) = self.backoff_max else {
            return base;
        };
        let m = &self.meta[id];
        let key = (
            m.instance_type.clone(),
            m.zone.clone(),
            m.capacity_type.clone(),
        );
        let now = self.now;
        let (streak, until) = self.failure_streaks.entry(key).or_insert((0, now));
        if now > until.saturating_add(BACKOFF_STREAK_RESET_SECONDS) {
            *streak = 0;
        }
        let window = base
            .saturating_mul(1i64 << (*streak).min(20))
            .min(most.max(base));
        *streak += 1;
        *until = now + window;
        window
    }

    /// Begins the drain of command `ci`'s candidates (see [`Self::drain_step`]).
    fn start_drain(&mut self, ci: usize) {
        self.log_command(ci);
        self.drains.insert(ci, self.now);
        self.drain_step(ci);
    }

    /// Evicts what the candidates' pods' budgets allow now and deletes each candidate once it
    /// runs no pod; while pods are held back, comes back after [`EVICTION_RETRY_SECONDS`]
    /// (the node, and its price, stay until then). Without budgets a drain is one step.
    fn drain_step(&mut self, ci: usize) {
        let nodes = self.commands[ci].nodes.clone();
        let mut allowance = BTreeMap::new();
        let mut evicted = Vec::new();
        let mut held = false;
        for &n in &nodes {
            if self.meta[n].phase == Phase::Deleted {
                continue;
            }
            let bound: Vec<usize> = self.meta[n].bound.iter().copied().collect();
            for pi in bound {
                if !self.may_evict(pi, &mut allowance) {
                    held = true;
                    if !std::mem::replace(&mut self.pods[pi].held_by_pdb, true) {
                        self.summary.evictions_held_by_pdb += 1;
                    }
                    continue;
                }
                self.pods[pi].held_by_pdb = false;
                self.unbind(pi);
                self.note_eviction(pi);
                if self.pods[pi].evicted_at.replace(self.now).is_none() {
                    self.evicted_pending += 1;
                }
                self.summary.pods_disrupted += 1;
                if let Some(r) = self.commands[ci]
                    .log_index
                    .and_then(|i| self.command_log.get_mut(i))
                {
                    r.pods_evicted += 1;
                }
                evicted.push(pi);
            }
            if self.meta[n].bound.is_empty() {
                self.delete_node(n);
            }
        }
        if held {
            self.push(self.now + EVICTION_RETRY_SECONDS, Ev::Drain(ci));
            return self.place_evicted(evicted);
        }
        // Its candidates' deletion wakes a loop that waited for the drain.
        self.drains.remove(&ci);
        if let Some(r) = self.commands[ci]
            .log_index
            .and_then(|i| self.command_log.get_mut(i))
        {
            r.drain_seconds = Some(self.now - r.drained_at);
        }
        self.place_evicted(evicted);
    }

    /// Binds pods a drain evicted where the command planned them (when the model follows the
    /// plan) or where the scheduler puts them; the rest wait.
    fn place_evicted(&mut self, evicted: Vec<usize>) {
        let follow_plan = self.w.settings.evicted_pod_placement == EvictedPodPlacement::Planned;
        for pi in evicted {
            self.pods[pi].phase = PodPhase::Pending;
            self.pending.insert(pi);
            let target = self.pods[pi]
                .nominated
                .filter(|&n| follow_plan && self.meta[n].phase == Phase::Ready);
            let bound = match target {
                Some(n) => self.try_bind_to(pi, n),
                None => false,
            };
            if !bound && !self.schedule_pod(pi) {
                self.pods[pi].nominated = None;
                self.make_pending(pi);
            }
        }
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// The earliest time a consolidateAfter gate opens or a budget window opens or closes (the
/// time-based changes the version counter does not see).
fn next_gate(snap: &core::Snapshot, w: &World, cas: i64) -> i64 {
    let mut t = cas;
    for n in &snap.nodes {
        if !n.ready || n.marked_for_deletion {
            continue;
        }
        let Some(after) = n
            .nodepool
            .as_ref()
            .and_then(|p| w.nodepools.iter().find(|x| &x.name == p))
            .and_then(|p| p.disruption.consolidate_after_secs)
        else {
            continue;
        };
        let open = n.last_pod_event_at + after;
        if open > snap.now {
            t = t.min(open);
        }
    }
    // A budget window opening or closing changes what may be disrupted.
    for b in snap.nodepools.iter().flat_map(|p| &p.disruption.budgets) {
        if let Ok(parsed) = core::disruption::budgets::ParsedBudget::parse(b)
            && let Some(edge) = parsed.window.and_then(|w| w.next_edge(snap.now))
        {
            t = t.min(edge);
        }
    }
    t
}

impl Sim<'_> {
    #[allow(clippy::too_many_lines)]
    fn run(
        mut self,
        a: &mut dyn Autoscaler,
        strategy: &str,
        seed: u64,
        progress: Option<&AtomicU64>,
    ) -> RunResult {
        let start = Instant::now();
        let end = self.w.end();
        for n in &self.w.existing_nodes {
            self.add_node(n.clone(), Phase::Ready);
        }
        for (i, a) in self.w.arrivals.iter().enumerate() {
            self.pods.push(PodState {
                req: pod_requests(&a.pod),
                phase: PodPhase::NotYet,
                nominated: None,
                arrived: a.at,
                first_bound: None,
                evictions: 0,
                last_evicted_at: None,
                continues_since: None,
                evicted_at: None,
                started_at: None,
                held_by_pdb: false,
                leave_at: a
                    .leave
                    .filter(|_| a.work_seconds.is_none())
                    .map(|l| l.max(a.at)),
            });
            self.pod_index.insert(pref(&a.pod), i);
        }
        // Pods a snapshot has bound arrive first at their instant (events at one instant run
        // in push order): they are already on their nodes, so a pending pod arriving with them
        // must see the room they take, not be scheduled into it first.
        let order = (0..self.w.arrivals.len())
            .filter(|&i| self.w.arrivals[i].bound_to.is_some())
            .chain((0..self.w.arrivals.len()).filter(|&i| self.w.arrivals[i].bound_to.is_none()));
        let order: Vec<usize> = order.collect();
        for i in order {
            let at = self.w.arrivals[i].at;
            self.push(at, Ev::Arrive(i));
            if let Some(l) = self.pods[i].leave_at {
                self.push(l, Ev::Leave(i));
            }
        }
        for (i, o) in self.w.settings.capacity_outages.iter().enumerate() {
            if o.reclaim_running {
                self.push(o.from_seconds, Ev::Reclaim(i));
            }
        }
        self.summary.pods_total = self.w.arrivals.len() as u32;
        let consolidation = self.w.settings.consolidation;
        let period = a.disruption_period(&self.w.settings);
        self.zone_backoff_after = a.zone_backoff_after();
        self.backoff_base = self
            .w
            .settings
            .launch_backoff_seconds
            .unwrap_or_else(|| a.launch_backoff_seconds());
        self.backoff_max = a
            .launch_backoff_max_seconds()
            .filter(|_| self.w.settings.launch_backoff_seconds.is_none());
        self.failure_seen_after = self
            .w
            .settings
            .launch_failure_seconds
            .unwrap_or_else(|| a.launch_failure_seconds())
            .max(0);
        let mut events = 0u64;
        while let Some(Reverse((t, _, ev))) = self.q.pop() {
            if t > end {
                break;
            }
            self.advance(t);
            events += 1;
            if events.is_multiple_of(4096)
                && let Some(p) = progress
            {
                p.store(t.max(0) as u64, Ordering::Relaxed);
            }
            let before = self.version;
            match ev {
                Ev::Arrive(pi) => {
                    self.pods[pi].phase = PodPhase::Pending;
                    let bound_to = self.w.arrivals[pi].bound_to.clone();
                    let bound = match bound_to.and_then(|n| self.node_by_name(&n)) {
                        Some(ni) => {
                            self.bind(pi, ni);
                            true
                        }
                        None => self.schedule_pod(pi),
                    };
                    if !bound {
                        self.make_pending(pi);
                    }
                }
                Ev::Leave(pi) => {
                    if self.pods[pi].leave_at == Some(t)
                        && self.pods[pi].phase != PodPhase::NotYet
                        && self.pods[pi].phase != PodPhase::Gone
                    {
                        if self.pods[pi].phase == PodPhase::Pending
                            && self.pods[pi].first_bound.is_none()
                        {
                            self.summary.pods_left_pending += 1;
                        }
                        let freed = match self.pods[pi].phase {
                            PodPhase::Bound(ni) => Some(ni),
                            _ => None,
                        };
                        self.unbind(pi);
                        self.pending.remove(&pi);
                        if self.ended.len() == ENDED_LIFETIMES_KEPT
                            && let Some(dropped) = self.ended.pop_front()
                        {
                            self.observed_since = self
                                .observed_since
                                .max(dropped.ended_at.unwrap_or(self.now));
                        }
                        let start = self.pods[pi]
                            .continues_since
                            .unwrap_or_else(|| self.created_at(pi));
                        let lifetime_seconds = self.now - start;
                        self.ended.push_back(core::EndedPod {
                            lifetime_seconds,
                            owner_kind: self.w.arrivals[pi].pod.owner_kind.clone(),
                            ended_at: Some(self.now),
                        });
                        if self.pods[pi].evicted_at.take().is_some() {
                            self.evicted_pending = self.evicted_pending.saturating_sub(1);
                        }
                        self.pods[pi].phase = PodPhase::Gone;
                        self.pods[pi].nominated = None;
                        self.changed();
                        if freed.is_some() && self.scheduler_places_pending() {
                            self.schedule_queue();
                        } else if let Some(ni) = freed {
                            let waiting: Vec<usize> = self.pending.iter().copied().collect();
                            for q in waiting {
                                if self.pods[q]
                                    .nominated
                                    .is_none_or(|n| self.meta[n].phase != Phase::Launching)
                                {
                                    self.try_bind_to(q, ni);
                                }
                            }
                        }
                    }
                }
                Ev::BatchCheck(generation) => {
                    if let Some((opened, g)) = self.batch_open
                        && g == generation
                    {
                        let idle = self.last_pending_at + self.w.settings.batch_idle_seconds;
                        let max = opened + self.w.settings.batch_max_seconds;
                        if t >= idle || t >= max {
                            self.batch_open = None;
                            self.run_provisioning(a);
                        } else {
                            self.push(idle.min(max), Ev::BatchCheck(generation));
                        }
                    }
                }
                Ev::Scan(generation) => {
                    if generation == self.scan_gen {
                        self.scan_at = None;
                        self.run_provisioning(a);
                        if self.unresolved() {
                            self.kick_provisioning();
                        }
                    }
                }
                Ev::NodeReady(ni) => self.node_ready(ni),
                Ev::Retry => {
                    self.retry_at = None;
                    if self.unresolved() {
                        self.kick_provisioning();
                    }
                }
                Ev::Tick(generation) => {
                    if generation == self.tick_gen {
                        self.tick_at = None;
                        if consolidation {
                            self.run_disruption(a);
                        }
                    }
                }
                Ev::Validate(ci) => {
                    self.validating = self.validating.saturating_sub(1);
                    self.validate(ci, a);
                }
                Ev::Drain(ci) => self.drain_step(ci),
                Ev::LaunchFailed(id) => self.launch_failed(id),
                Ev::BackoffEnds => {
                    self.changed();
                    if self.unresolved() {
                        self.kick_provisioning();
                    }
                }
                Ev::Reclaim(oi) => self.reclaim(oi),
                Ev::NoticeEnds(id) => {
                    // A rollback may have opened it again meanwhile; what it runs ends with it.
                    self.evict_interrupted(id);
                    self.remove_node(id);
                }
            }
            // Keep the disruption loop alive while anything may change.
            if consolidation && (self.version != before || self.tick_at.is_none()) {
                let quiet = self.idle_version == Some(self.version);
                if !quiet {
                    self.schedule_tick(self.now, period);
                } else if self.quiet_until < i64::MAX {
                    self.schedule_tick(self.quiet_until - 1, period);
                }
            }
        }
        self.advance(end);
        self.record(end);
        for id in 0..self.meta.len() {
            if self.meta[id].phase != Phase::Deleted {
                self.note_usage(id, false);
            }
        }
        if let Some(p) = progress {
            p.store(end.max(0) as u64, Ordering::Relaxed);
        }
        // Pending-time percentiles over pods that were scheduled.
        let mut waits: Vec<i64> = self
            .pods
            .iter()
            .filter_map(|p| p.first_bound.map(|b| b - p.arrived))
            .collect();
        waits.sort_unstable();
        let pct = |q: f64| -> f64 {
            if waits.is_empty() {
                return 0.0;
            }
            let idx = ((waits.len() as f64 - 1.0) * q).round() as usize;
            waits[idx.min(waits.len() - 1)] as f64
        };
        // A few pods that never ran, with what they were waiting for, for the report.
        for (pi, p) in self.pods.iter().enumerate() {
            if p.first_bound.is_some() || self.reasons.len() >= 40 {
                continue;
            }
            let a = &self.w.arrivals[pi];
            let waiting = match p.nominated {
                Some(n) => format!(
                    "nominated to {} ({:?})",
                    self.views[n].name, self.meta[n].phase
                ),
                None => "no node".to_string(),
            };
            self.reasons.insert(format!(
                "never ran: {}/{} (arrived {}s, leaves {:?}, requests {} CPU {} memory; {waiting})",
                a.pod.namespace,
                a.pod.name,
                a.at,
                a.leave,
                crate::quantity::fmt_cpu(p.req.cpu_milli),
                crate::quantity::fmt_bytes(p.req.memory)
            ));
        }
        let mut s = self.summary.clone();
        s.disruption_simulations = a.simulations();
        s.total_cost = self.cost;
        // `lower_bound_cost` and `cost_over_lower_bound` come from the world's bound
        // (`bound::apply`), computed once for all strategies.
        s.avg_cpu_utilisation = ratio(self.cpu_used_int, self.cpu_alloc_int);
        s.avg_memory_utilisation = ratio(self.mem_used_int, self.mem_alloc_int);
        s.pending_p50_seconds = pct(0.5);
        s.pending_p95_seconds = pct(0.95);
        s.pending_max_seconds = waits.last().copied().unwrap_or(0) as f64;
        self.evicted_waits.sort_unstable();
        s.evicted_wait_p50_seconds = percentile(&self.evicted_waits, 0.5);
        s.evicted_wait_p95_seconds = percentile(&self.evicted_waits, 0.95);
        s.pending_pod_hours = self.pending_pod_secs / 3600.0;
        s.evicted_pending_pod_hours = self.evicted_pending_pod_secs / 3600.0;
        s.draining_node_hours = self.draining_node_secs / 3600.0;
        s.pods_scheduled = waits.len() as u32;
        s.pods_never_scheduled = s.pods_total - s.pods_scheduled - s.pods_left_pending;
        let wall = start.elapsed().as_secs_f64();
        let decisions = (s.provisioning_decisions + s.disruption_evaluations) as f64;
        RunResult {
            strategy: strategy.to_string(),
            seed,
            summary: s,
            series: self.series,
            timing: Timing {
                wall_seconds: wall,
                decision_seconds: self.decision_secs,
                decisions_per_second: ratio(decisions, self.decision_secs),
                bound_seconds: 0.0,
            },
            unschedulable_reasons: self.reasons.into_iter().collect(),
            node_usage: self.usage.into_values().collect(),
            commands: self.command_log,
        }
    }
}

/// The `q` quantile of sorted values (nearest rank; 0 when empty).
fn percentile(sorted: &[i64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[idx.min(sorted.len() - 1)] as f64
}

/// Run one strategy over one compiled world. The lower-bound figures are left at zero: the
/// bound is the world's, computed once for all strategies ([`crate::bound::compute`]) and
/// filled in with [`crate::bound::apply`] (as [`crate::run::execute`] does).
pub fn simulate(
    w: &World,
    strategy_name: &str,
    seed: u64,
    progress: Option<&AtomicU64>,
) -> Result<RunResult> {
    let mut a = strategy::build(strategy_name, &w.settings)?;
    let mut sim = Sim::new(w);
    sim.trigger = a.trigger();
    Ok(sim.run(a.as_mut(), strategy_name, seed, progress))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{generators, scenario};

    /// A real strategy that records when the engine asked it to disrupt and to re-validate.
    /// With `crowd`, its first decision keeps only its first launch and nominates every pod
    /// of that decision to it: most of them cannot bind there when it is ready.
    struct Recording {
        inner: Box<dyn Autoscaler>,
        disrupt_at: Vec<(i64, bool)>,
        revalidate_at: Vec<i64>,
        crowd: bool,
        decisions: u32,
    }

    impl Recording {
        fn new(inner: Box<dyn Autoscaler>) -> Recording {
            Recording {
                inner,
                disrupt_at: Vec::new(),
                revalidate_at: Vec::new(),
                crowd: false,
                decisions: 0,
            }
        }
    }

    impl Autoscaler for Recording {
        fn provision(&mut self, snap: &core::Snapshot) -> Provision {
            let mut p = self.inner.provision(snap);
            self.decisions += 1;
            if self.crowd && self.decisions == 1 && p.launches.len() > 1 {
                let rest: Vec<core::PodRef> = p.launches.drain(1..).flat_map(|l| l.pods).collect();
                if let Some(first) = p.launches.first_mut() {
                    first.pods.extend(rest);
                }
            }
            p
        }
        fn disrupt(&mut self, snap: &core::Snapshot) -> Option<Command> {
            let cmd = self.inner.disrupt(snap);
            self.disrupt_at.push((snap.now, cmd.is_some()));
            cmd
        }
        fn wake_at(&self) -> Option<i64> {
            self.inner.wake_at()
        }
        fn revalidate(&mut self, snap: &core::Snapshot, cmd: &Command) -> Result<(), String> {
            self.revalidate_at.push(snap.now);
            self.inner.revalidate(snap, cmd)
        }
        fn trigger(&self) -> Trigger {
            self.inner.trigger()
        }
        fn validation_delay(&self, settings: &crate::scenario::Settings) -> i64 {
            self.inner.validation_delay(settings)
        }
        fn disruption_period(&self, settings: &crate::scenario::Settings) -> i64 {
            self.inner.disruption_period(settings)
        }
    }

    fn benchmark_world(pods: usize) -> World {
        let mut s = generators::generate("karpenter-benchmark", 1, Some(pods)).expect("generator");
        s.settings.end_seconds = Some(2 * 3600);
        let ls = scenario::from_value(s, "kb-retry");
        crate::world::compile(&ls, 0).expect("world")
    }

    /// Pods a decision placed that the kube-scheduler then could not bind anywhere are
    /// decided again: on Karpenter's benchmark pods some waited an hour, until half the pods
    /// left, for a second provisioning decision that nothing triggered.
    #[test]
    fn pods_that_did_not_bind_where_placed_are_decided_again() {
        let w = benchmark_world(200);
        for name in ["cost-aware", "karpenter"] {
            let inner = strategy::build(name, &w.settings).expect("strategy");
            let mut a = Recording {
                crowd: true,
                ..Recording::new(inner)
            };
            let mut sim = Sim::new(&w);
            sim.trigger = a.trigger();
            let r = sim.run(&mut a, name, 0, None);
            assert_eq!(r.summary.pods_scheduled, r.summary.pods_total, "{name}");
            assert!(
                r.summary.pending_max_seconds <= 300.0,
                "{name}: a pod waited {} s",
                r.summary.pending_max_seconds
            );
            assert!(
                r.summary.provisioning_decisions > 1,
                "{name}: the retry made a second decision"
            );
        }
    }

    /// When the nodes of one decision become ready one after another, a zone-spread pod
    /// refused by its node (the zones of nodes still launching counted, with none of its
    /// pods) binds as soon as the others are ready, as the kube-scheduler requeues it on the
    /// node event, not at the provisioner's next retry: no pod of Karpenter's benchmark waits
    /// longer than its first nodes take.
    #[test]
    fn refused_pods_are_tried_again_when_a_node_becomes_ready() {
        let w = benchmark_world(300);
        let first_nodes = w.settings.batch_idle_seconds
            + w.settings.launch_delay_seconds
            + w.settings.registration_delay_seconds;
        for name in ["cost-aware", "karpenter"] {
            let mut a = strategy::build(name, &w.settings).expect("strategy");
            let mut sim = Sim::new(&w);
            sim.trigger = a.trigger();
            let r = sim.run(a.as_mut(), name, 0, None);
            assert_eq!(r.summary.pods_scheduled, r.summary.pods_total, "{name}");
            assert!(
                r.summary.pending_max_seconds <= first_nodes as f64,
                "{name}: a pod waited {} s, its first nodes took {first_nodes} s",
                r.summary.pending_max_seconds
            );
        }
    }

    /// The report's node-usage table and evictions series account for the whole run: usage
    /// costs add up to the run's total cost, launches to the nodes launched, and the
    /// evictions series ends at the pods disrupted.
    #[test]
    fn node_usage_and_evictions_add_up() {
        let mut s = generators::generate("mixed", 3, Some(60)).expect("generator");
        s.settings.end_seconds = Some(4 * 3600);
        let ls = scenario::from_value(s, "mixed-usage");
        let w = crate::world::compile(&ls, 0).expect("world");
        let mut a = strategy::build("cost-aware", &w.settings).expect("strategy");
        let mut sim = Sim::new(&w);
        sim.trigger = a.trigger();
        let r = sim.run(a.as_mut(), "cost-aware", 0, None);
        assert!(
            r.summary.pods_disrupted > 0,
            "the workload should consolidate"
        );
        let cost: f64 = r.node_usage.iter().map(|u| u.cost).sum();
        assert!(
            (cost - r.summary.total_cost).abs() < 1e-6 * r.summary.total_cost.max(1.0),
            "usage {cost} vs total {}",
            r.summary.total_cost
        );
        let launched: u32 = r.node_usage.iter().map(|u| u.nodes_launched).sum();
        assert_eq!(launched, r.summary.nodes_launched);
        assert!(
            r.node_usage
                .iter()
                .all(|u| !u.zone.is_empty() && !u.instance_type.is_empty())
        );
        let last = r.series.last().map(|x| x.evicted_pods);
        assert_eq!(last, Some(r.summary.pods_disrupted));
        // The command log accounts for every eviction and no more commands than were run.
        let logged: u32 = r.commands.iter().map(|c| c.pods_evicted).sum();
        assert_eq!(logged, r.summary.pods_disrupted);
        assert!(r.commands.len() as u32 <= r.summary.disruption_commands);
        assert!(r.commands.iter().any(|c| c.pods_evicted > 0));
        assert!(r.commands.iter().all(|c| {
            !c.candidates.is_empty()
                && c.accepted_at <= c.drained_at
                && c.pods_evicted == c.candidates.iter().map(|n| n.pods).sum::<u32>()
                && c.candidates
                    .iter()
                    .all(|n| n.age_seconds >= 0 && n.price > 0.0)
        }));
        assert!(
            r.commands
                .windows(2)
                .all(|p| p[0].drained_at <= p[1].drained_at)
        );
        assert!(
            r.series
                .windows(2)
                .all(|p| p[0].evicted_pods <= p[1].evicted_pods)
        );
    }

    #[test]
    fn no_disruption_decision_while_a_command_waits_for_validation() {
        let mut s = generators::generate("mixed", 3, Some(60)).expect("generator");
        s.settings.end_seconds = Some(4 * 3600);
        let ls = scenario::from_value(s, "mixed-validation");
        let w = crate::world::compile(&ls, 0).expect("world");
        let mut rec = Recording::new(strategy::build("cost-aware", &w.settings).expect("strategy"));
        let mut sim = Sim::new(&w);
        sim.trigger = rec.trigger();
        let _ = sim.run(&mut rec, "cost-aware", 0, None);
        let delay = w.settings.validation_delay_seconds;
        assert!(delay > 0);
        let end = w.end();
        // A command proposed in the run's last `delay` seconds is never validated.
        let proposals: Vec<i64> = rec
            .disrupt_at
            .iter()
            .filter(|(t, cmd)| *cmd && t + delay <= end)
            .map(|(t, _)| *t)
            .collect();
        assert!(
            proposals.len() >= 2,
            "the workload should give several commands, got {}",
            proposals.len()
        );
        assert_eq!(rec.revalidate_at.len(), proposals.len());
        for (&proposed, &validated) in proposals.iter().zip(&rec.revalidate_at) {
            assert_eq!(validated, proposed + delay);
            let meanwhile: Vec<i64> = rec
                .disrupt_at
                .iter()
                .map(|(t, _)| *t)
                .filter(|t| *t > proposed && *t < validated)
                .collect();
            assert!(
                meanwhile.is_empty(),
                "decisions at {meanwhile:?} while the command of {proposed} waited until {validated}"
            );
        }
    }

    #[test]
    fn a_budget_window_closing_wakes_the_disruption_loop() {
        // Two nodes; one empties at 10 min, but a budget allows no disruption from 00:00 for
        // 3 h (simulated time 0 is 1970-01-01 00:00 UTC). Nothing else happens afterwards, so
        // only the window closing can bring the empty node's removal.
        let yaml = r#"
name: budget-window
settings:
  endSeconds: 14400
catalog:
  overhead: none
  types:
    - {name: small, vcpu: 2, memoryMib: 4096, price: 0.10}
zones: [zone-a]
nodePools:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata:
      name: default
    spec:
      template:
        spec:
          nodeClassRef: {group: karpenter.cluster.x-k8s.io, kind: ClusterAPINodeClass, name: default}
          requirements: []
      disruption:
        consolidationPolicy: WhenEmptyOrUnderutilized
        consolidateAfter: 0s
        budgets:
          - {nodes: "0", schedule: "0 0 * * *", duration: 3h}
workload:
  pods:
    - {name: short, count: 1, requests: {cpu: "2", memory: 1Gi}, durationSeconds: 600}
    - {name: long, count: 1, requests: {cpu: "2", memory: 1Gi}}
"#;
        let sc = scenario::parse(yaml, "budget-window.yaml").expect("valid scenario");
        let ls = scenario::from_value(sc, "budget-window");
        let w = crate::world::compile(&ls, 0).expect("world");
        let mut rec = Recording::new(strategy::build("cost-aware", &w.settings).expect("strategy"));
        let mut sim = Sim::new(&w);
        sim.trigger = rec.trigger();
        let out = sim.run(&mut rec, "cost-aware", 0, None);
        let first = rec.disrupt_at.iter().find(|(_, cmd)| *cmd).map(|(t, _)| *t);
        assert!(
            first.is_some_and(|t| (3 * 3600..3 * 3600 + 60).contains(&t)),
            "the empty node should go right after the window closes at 10800 s: commands at {:?}",
            rec.disrupt_at
        );
        assert_eq!(out.summary.nodes_terminated, 1);
        assert_eq!(
            out.summary.nodes_removed_young, 0,
            "removed three hours after its launch"
        );

        // Without the budget the node goes once its pod leaves at 10 min: a young removal.
        let open = yaml.replace(
            "        budgets:\n          - {nodes: \"0\", schedule: \"0 0 * * *\", duration: 3h}\n",
            "",
        );
        assert_ne!(open, yaml);
        let sc = scenario::parse(&open, "no-budget.yaml").expect("valid scenario");
        let w = crate::world::compile(&scenario::from_value(sc, "no-budget"), 0).expect("world");
        let mut strategy = strategy::build("cost-aware", &w.settings).expect("strategy");
        let out = Sim::new(&w).run(strategy.as_mut(), "cost-aware", 0, None);
        assert_eq!(out.summary.nodes_terminated, 1);
        assert_eq!(out.summary.nodes_removed_young, 1);
    }

    /// The snapshot's pods not bound to a node, as references.
    fn pending_refs(snap: &core::Snapshot) -> Vec<core::PodRef> {
        snap.pods
            .iter()
            .filter(|p| p.node_name.is_none())
            .map(|p| core::PodRef {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
            })
            .collect()
    }

    /// Launches a node for the pending pods each round (`small` first, `big` once a node
    /// exists) and proposes one command: delete the ready node, moving its pods onto a node
    /// that is still launching.
    struct OntoLaunching {
        proposed: bool,
    }

    impl Autoscaler for OntoLaunching {
        fn provision(&mut self, snap: &core::Snapshot) -> Provision {
            let pending = pending_refs(snap);
            if pending.is_empty() {
                return Provision::default();
            }
            let (ty, price) = if snap.nodes.is_empty() {
                ("small", 0.1)
            } else {
                ("big", 0.4)
            };
            Provision {
                launches: vec![LaunchRequest {
                    nodepool: Some("default".into()),
                    instance_type: ty.into(),
                    zone: "zone-a".into(),
                    capacity_type: core::CapacityType::OnDemand,
                    price,
                    pods: pending,
                    fleet: Vec::new(),
                }],
                ..Provision::default()
            }
        }

        fn disrupt(&mut self, snap: &core::Snapshot) -> Option<Command> {
            if self.proposed {
                return None;
            }
            let launching = snap.nodes.iter().find(|n| n.in_flight)?;
            let ready = snap.nodes.iter().find(|n| n.ready && !n.in_flight)?;
            let placements: Vec<core::Placement> = snap
                .pods
                .iter()
                .filter(|p| p.node_name.as_deref() == Some(ready.name.as_str()))
                .filter(|p| !p.is_daemonset_pod())
                .map(|p| core::Placement {
                    pod: core::PodRef {
                        namespace: p.namespace.clone(),
                        name: p.name.clone(),
                    },
                    node: launching.name.clone(),
                })
                .collect();
            if placements.is_empty() {
                return None;
            }
            self.proposed = true;
            Some(Command {
                reason: "test".into(),
                candidates: vec![ready.name.clone()],
                replacements: Vec::new(),
                placements,
                savings: 0.0,
                core: None,
            })
        }

        fn validation_delay(&self, _settings: &crate::scenario::Settings) -> i64 {
            0
        }
    }

    /// A one-hour world in one zone: the catalog `types` and the workload `pods` (YAML list
    /// items, indented for their place) under one NodePool that consolidates at once.
    fn one_zone_world(name: &str, types: &str, pods: &str) -> World {
        let yaml = format!(
            r#"
name: {name}
settings:
  endSeconds: 3600
catalog:
  overhead: none
  types:
{types}
zones: [zone-a]
nodePools:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata:
      name: default
    spec:
      template:
        spec:
          nodeClassRef: {{group: karpenter.cluster.x-k8s.io, kind: ClusterAPINodeClass, name: default}}
          requirements: []
      disruption:
        consolidationPolicy: WhenEmptyOrUnderutilized
        consolidateAfter: 0s
workload:
  pods:
{pods}
"#
        );
        let sc = scenario::parse(&yaml, &format!("{name}.yaml")).expect("valid scenario");
        let ls = scenario::from_value(sc, name);
        crate::world::compile(&ls, 0).expect("world")
    }

    /// Moves the node holding pod `a` to a fresh node once the clock passes each of `at`.
    struct Shuttle {
        at: Vec<i64>,
        done: usize,
    }

    impl Autoscaler for Shuttle {
        fn provision(&mut self, snap: &core::Snapshot) -> Provision {
            one_small_node_for_the_pending(snap)
        }

        fn disrupt(&mut self, snap: &core::Snapshot) -> Option<Command> {
            if self.at.get(self.done).is_none_or(|&t| snap.now < t) {
                return None;
            }
            let pod = snap.pods.iter().find(|p| p.name == "a-0")?;
            let node = snap
                .nodes
                .iter()
                .find(|n| Some(n.name.as_str()) == pod.node_name.as_deref())?;
            if node.in_flight || !node.ready {
                return None;
            }
            self.done += 1;
            let moved = core::PodRef {
                namespace: pod.namespace.clone(),
                name: pod.name.clone(),
            };
            Some(Command {
                reason: "test".into(),
                candidates: vec![node.name.clone()],
                replacements: vec![small_launch(vec![moved])],
                placements: Vec::new(),
                savings: 0.0,
                core: None,
            })
        }

        fn validation_delay(&self, _settings: &crate::scenario::Settings) -> i64 {
            0
        }
    }

    /// One `small` node for every pending pod, or nothing when none is pending.
    fn one_small_node_for_the_pending(snap: &core::Snapshot) -> Provision {
        let pods = pending_refs(snap);
        if pods.is_empty() {
            return Provision::default();
        }
        Provision {
            launches: vec![small_launch(pods)],
            ..Provision::default()
        }
    }

    /// A launch of one `small` node (the one-zone test worlds' type) for `pods`.
    fn small_launch(pods: Vec<core::PodRef>) -> LaunchRequest {
        LaunchRequest {
            nodepool: Some("default".into()),
            instance_type: "small".into(),
            zone: "zone-a".into(),
            capacity_type: core::CapacityType::OnDemand,
            price: 0.1,
            pods,
            fleet: Vec::new(),
        }
    }

    /// The node pod `name` (namespace `default`) is bound or nominated to.
    fn node_of(snap: &core::Snapshot, name: &str) -> Option<String> {
        snap.pods
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.node_name.clone())
    }

    /// A `small` node launched for each of `pods`, in order.
    fn a_small_node_each(pods: Vec<core::PodRef>) -> Provision {
        Provision {
            launches: pods.into_iter().map(|p| small_launch(vec![p])).collect(),
            ..Provision::default()
        }
    }

    /// A node per pod; once all run, moves `a` onto `x`'s node (the fuller one) and then
    /// records where `a` and the others are.
    #[derive(Default)]
    struct MoveOnto {
        proposed: bool,
        /// (a's node, x's node, y's node) at the last look after the move.
        seen: Option<(String, String, String)>,
        /// a's creation and the recent evictions at the last look after the move.
        a_seen: Option<(i64, Vec<core::Eviction>)>,
        /// When a's snapshot says it started running: at the move, then at the last look.
        a_started: Vec<Option<i64>>,
        /// At each look after the move: when, and whether `a` still ran.
        a_running: Vec<(i64, bool)>,
        /// The ended pods at the last look.
        ended: Vec<core::EndedPod>,
        /// The snapshot's `observed_since` and `now` at the last look.
        observed: Option<(Option<i64>, i64)>,
    }

    impl Autoscaler for MoveOnto {
        fn provision(&mut self, snap: &core::Snapshot) -> Provision {
            a_small_node_each(pending_refs(snap))
        }

        fn disrupt(&mut self, snap: &core::Snapshot) -> Option<Command> {
            let node_of = |name: &str| node_of(snap, name);
            if self.proposed {
                let running = snap.pods.iter().any(|p| p.name == "a-0");
                self.a_running.push((snap.now, running));
                self.ended = snap.ended_pods.clone();
                self.observed = Some((snap.observed_since, snap.now));
            }
            let (a, x, y) = (node_of("a-0")?, node_of("x-0")?, node_of("y-0")?);
            // Nominated pods show on nodes still launching; move only once all are up.
            if snap.nodes.iter().any(|n| n.in_flight || !n.ready) {
                return None;
            }
            let a_pod = snap.pods.iter().find(|p| p.name == "a-0")?;
            if self.proposed {
                self.seen = Some((a, x, y));
                self.a_seen = Some((a_pod.created_at, snap.recent_evictions.clone()));
                self.a_started.truncate(1);
                self.a_started.push(a_pod.started_at);
                return None;
            }
            self.a_started.push(a_pod.started_at);
            self.proposed = true;
            Some(Command {
                reason: "test".into(),
                candidates: vec![a],
                replacements: Vec::new(),
                placements: vec![core::Placement {
                    pod: core::PodRef {
                        namespace: "default".into(),
                        name: "a-0".into(),
                    },
                    node: x,
                }],
                savings: 0.0,
                core: None,
            })
        }

        fn validation_delay(&self, _settings: &crate::scenario::Settings) -> i64 {
            0
        }
    }

    /// A node per pending pod, each round's plan flagged as cut by the optimiser's wall clock
    /// when `cut`.
    struct WallClockCut {
        cut: bool,
    }

    impl Autoscaler for WallClockCut {
        fn provision(&mut self, snap: &core::Snapshot) -> Provision {
            let p = a_small_node_each(pending_refs(snap));
            Provision {
                wall_clock_cut: self.cut && !p.launches.is_empty(),
                ..p
            }
        }

        fn disrupt(&mut self, _snap: &core::Snapshot) -> Option<Command> {
            None
        }
    }

    #[test]
    fn rounds_cut_by_the_optimisers_wall_clock_are_counted() {
        // The one way a run can differ from another: the summary says how often it happened.
        let w = move_world("wall-clock");
        for cut in [false, true] {
            let out = Sim::new(&w).run(&mut WallClockCut { cut }, "cut", 0, None);
            assert!(out.summary.nodes_launched >= 3, "{:?}", out.summary);
            if cut {
                assert!(out.summary.wall_clock_cuts >= 1, "{:?}", out.summary);
            } else {
                assert_eq!(out.summary.wall_clock_cuts, 0);
            }
        }
    }

    /// `x` fills 3 of its node's 4 vCPUs, `y` 1 of its node's; [`MoveOnto`] moves `a`
    /// (1 vCPU, arrived at 0) onto `x`'s node once every node is up.
    fn move_world(name: &str) -> World {
        one_zone_world(
            name,
            "    - {name: small, vcpu: 4, memoryMib: 8192, price: 0.10}",
            r#"    - {name: x, count: 1, requests: {cpu: "3", memory: 1Gi}}
    - {name: y, count: 1, requests: {cpu: "1", memory: 1Gi}}
    - {name: a, count: 1, requests: {cpu: "1", memory: 1Gi}}
    # Wakes the disruption loop after the move.
    - {name: tick, count: 1, arriveAt: 1200, durationSeconds: 30, requests: {cpu: 10m}}"#,
        )
    }

    /// Runs [`MoveOnto`] on `w`, checks it evicted `a` alone, and returns what it saw.
    fn run_move(w: &World, what: &str) -> MoveOnto {
        run_move_summary(w, what).0
    }

    /// [`run_move`] and the run's summary.
    fn run_move_summary(w: &World, what: &str) -> (MoveOnto, Summary) {
        let mut a = MoveOnto::default();
        let mut sim = Sim::new(w);
        sim.trigger = a.trigger();
        let out = sim.run(&mut a, "move", 0, None);
        assert_eq!(out.summary.pods_disrupted, 1, "{what}: {:?}", out.summary);
        (a, out.summary)
    }

    #[test]
    fn an_evicted_pod_is_seen_as_its_replacement() {
        // A controller sees the new pod `a`'s ReplicaSet created at the eviction, and the
        // eviction, carrying on from 0.
        let mut w = move_world("recreated");
        for recreated in [true, false] {
            w.settings.evicted_pods_recreated = recreated;
            let a = run_move(&w, &format!("recreated {recreated}"));
            let (created, evictions) = a.a_seen.clone().expect("a look after the move");
            if recreated {
                let [e] = evictions.as_slice() else {
                    panic!("evictions: {evictions:?}");
                };
                assert!(e.at > 0);
                assert_eq!(created, e.at);
                assert_eq!(e.continues_since, Some(0));
                assert_eq!((e.cpu_milli, e.memory), (1000, 1 << 30));
            } else {
                assert_eq!(created, 0);
                assert!(evictions.is_empty(), "{evictions:?}");
            }
        }
    }

    #[test]
    fn a_jobs_evicted_pod_starts_its_work_over() {
        // `a` does 600 s of work. A ReplicaSet's `a` leaves at 600 whatever happened to it;
        // a Job's replacement, created at the eviction, does its 600 s again from where it
        // runs, and its eviction carries no earlier start. Ticks wake the loop at 650 and 1200.
        for job in [false, true] {
            let kind = if job { "Job" } else { "ReplicaSet" };
            let w = one_zone_world(
                "job",
                "    - {name: small, vcpu: 4, memoryMib: 8192, price: 0.10}",
                &format!(
                    r#"    - {{name: x, count: 1, requests: {{cpu: "3", memory: 1Gi}}}}
    - {{name: y, count: 1, requests: {{cpu: "1", memory: 1Gi}}}}
    - {{name: a, count: 1, durationSeconds: 600, ownerKind: {kind}, requests: {{cpu: "1", memory: 1Gi}}}}
    - {{name: tick, count: 1, arriveAt: 650, durationSeconds: 30, requests: {{cpu: 10m}}}}
    - {{name: tock, count: 1, arriveAt: 1200, durationSeconds: 30, requests: {{cpu: 10m}}}}"#
                ),
            );
            let (a, summary) = run_move_summary(&w, kind);
            let (created, evictions) = a.a_seen.clone().expect("a look after the move");
            let [e] = evictions.as_slice() else {
                panic!("{kind}: evictions {evictions:?}");
            };
            assert_eq!(created, e.at, "{kind}");
            assert_eq!(e.continues_since, (!job).then_some(0), "{kind}");
            // `a` arrived at 0 and started once its node was ready; the replacement started
            // at the eviction, the instant it was bound where the move planned it.
            let [Some(first), Some(again)] = a.a_started[..] else {
                panic!("{kind}: started {:?}", a.a_started);
            };
            assert!(first > 0 && first < e.at, "{kind}: {first}");
            assert_eq!(again, e.at, "{kind}");
            // The Job's `a` had run from its node's readiness to the eviction, and runs it
            // again; nothing is lost for the ReplicaSet's.
            let lost = summary.job_work_lost_pod_hours * 3600.0;
            if job {
                assert!(lost > 0.0 && lost < e.at as f64, "{kind}: {lost} s lost");
            } else {
                assert_eq!(lost, 0.0, "{kind}");
            }
            let at = |t: i64| {
                a.a_running
                    .iter()
                    .rev()
                    .find(|(now, _)| *now <= t)
                    .map(|(_, running)| *running)
            };
            assert_eq!(at(700), Some(job), "{kind}: {:?}", a.a_running);
            assert_eq!(at(1300), Some(false), "{kind}: {:?}", a.a_running);
            // The ticks (30 s, a ReplicaSet's) left too.
            let ended: Vec<i64> = a
                .ended
                .iter()
                .filter(|p| p.owner_kind.as_deref() == Some(kind) && p.lifetime_seconds != 30)
                .map(|p| p.lifetime_seconds)
                .collect();
            // From the work's start to its end: 600 for the ReplicaSet's (0 to 600, once a
            // decision's snapshot has matched the replacement to the eviction); the Job's
            // replacement from its creation at the eviction, at least its 600 s.
            if job {
                let [l] = ended.as_slice() else {
                    panic!("{kind}: ended {ended:?}");
                };
                assert!(*l >= 600, "{kind}: {l}");
            } else {
                assert_eq!(ended, vec![600], "{kind}");
            }
            // Every ending is dated, and all are known from the start of the run: what the
            // turnover counts arrivals from.
            let (observed_since, now) = a.observed.expect("looked after the move");
            assert_eq!(observed_since, Some(0), "{kind}");
            assert!(!a.ended.is_empty(), "{kind}");
            for e in &a.ended {
                let at = e.ended_at.expect("dated");
                assert!(at - e.lifetime_seconds >= 0 && at <= now, "{kind}: {e:?}");
            }
        }
    }

    #[test]
    fn evicted_pods_go_where_planned_or_where_the_scheduler_scores() {
        // `a`, planned onto `x`'s node, lands there when the scheduler follows the plan, and
        // on `y`'s (the least allocated) when it places evicted pods by its own scoring.
        let mut w = move_world("placement");
        for (placement, lands_with) in [
            (EvictedPodPlacement::Planned, "x"),
            (EvictedPodPlacement::Scheduler, "y"),
        ] {
            w.settings.evicted_pod_placement = placement;
            let a = run_move(&w, &format!("{placement:?}"));
            let (on, x, y) = a.seen.clone().expect("a look after the move");
            let want = if lands_with == "x" { x } else { y };
            assert_eq!(on, want, "{placement:?}: a on {on}");
        }
    }

    /// One decision: a node per pending pod, nominating them in reverse order (the last
    /// pending pod to the first node launched); then records where `x` and `y` run.
    #[derive(Default)]
    struct Reversed {
        seen: Option<(String, String)>,
    }

    impl Autoscaler for Reversed {
        fn provision(&mut self, snap: &core::Snapshot) -> Provision {
            let mut pending = pending_refs(snap);
            pending.reverse();
            a_small_node_each(pending)
        }

        fn disrupt(&mut self, snap: &core::Snapshot) -> Option<Command> {
            let node_of = |name: &str| node_of(snap, name);
            if snap.nodes.iter().all(|n| n.ready && !n.in_flight) {
                self.seen = Some((node_of("x-0")?, node_of("y-0")?));
            }
            None
        }
    }

    #[test]
    fn pending_pods_go_where_nominated_or_where_the_scheduler_queue_puts_them() {
        // `x` and `y` each fill a node; `x` is first in the queue. The decision nominates
        // `y` to the first node launched and `x` to the second. Both come up together, the
        // first one first: following the plan, `y` takes it; by the queue, `x` does.
        let mut w = one_zone_world(
            "pending-placement",
            "    - {name: small, vcpu: 4, memoryMib: 8192, price: 0.10}",
            r#"    - {name: x, count: 1, requests: {cpu: "3", memory: 1Gi}}
    - {name: y, count: 1, requests: {cpu: "3", memory: 1Gi}}
    # Wakes the disruption loop once both nodes are up.
    - {name: tick, count: 1, arriveAt: 600, durationSeconds: 30, requests: {cpu: 10m}}"#,
        );
        for (placement, x_on_first) in [
            (PendingPodPlacement::Planned, false),
            (PendingPodPlacement::Scheduler, true),
        ] {
            w.settings.pending_pod_placement = placement;
            let mut a = Reversed::default();
            let mut sim = Sim::new(&w);
            sim.trigger = a.trigger();
            let out = sim.run(&mut a, "pending-placement", 0, None);
            assert_eq!(out.summary.pods_never_scheduled, 0, "{placement:?}");
            assert_eq!(
                out.summary.nodes_launched, 2,
                "{placement:?}: {:?}",
                out.summary
            );
            let (x, y) = a.seen.clone().expect("a look once both nodes are up");
            assert_ne!(x, y, "{placement:?}");
            let first = "node-0";
            assert_eq!(x == first, x_on_first, "{placement:?}: x on {x}, y on {y}");
        }
    }

    #[test]
    fn the_scheduler_queue_takes_higher_priority_pods_first() {
        // `x` comes before `y` in arrival order (same time, name first), but `y` has the
        // higher priority: by the queue, `y` takes the first node to come up; by arrival
        // order alone, `x` would.
        let mut w = one_zone_world(
            "queue-priority",
            "    - {name: small, vcpu: 4, memoryMib: 8192, price: 0.10}",
            r#"    - {name: x, count: 1, requests: {cpu: "3", memory: 1Gi}}
    - {name: y, count: 1, priority: 10, requests: {cpu: "3", memory: 1Gi}}
    # Wakes the disruption loop once both nodes are up.
    - {name: tick, count: 1, arriveAt: 600, durationSeconds: 30, requests: {cpu: 10m}}"#,
        );
        w.settings.pending_pod_placement = PendingPodPlacement::Scheduler;
        let mut a = Reversed::default();
        let mut sim = Sim::new(&w);
        sim.trigger = a.trigger();
        let out = sim.run(&mut a, "queue-priority", 0, None);
        assert_eq!(out.summary.nodes_launched, 2, "{:?}", out.summary);
        let (x, y) = a.seen.clone().expect("a look once both nodes are up");
        assert_eq!(y, "node-0", "x on {x}, y on {y}");
    }

    #[test]
    fn ready_jitter_delays_each_node_by_its_own_fixed_amount() {
        // Ten pods, a node each: without jitter all wait the nominal 90 s; with up to 60 s
        // of jitter they wait 90-150 s, not all alike, and the same in a second run.
        let mut w = one_zone_world(
            "jitter",
            "    - {name: small, vcpu: 4, memoryMib: 8192, price: 0.10}",
            r#"    - {name: x, count: 10, requests: {cpu: "3", memory: 1Gi}}"#,
        );
        let waits = |w: &World| {
            let mut a = Reversed::default();
            let mut sim = Sim::new(w);
            sim.trigger = a.trigger();
            let s = sim.run(&mut a, "jitter", 0, None).summary;
            assert_eq!(s.nodes_launched, 10, "{s:?}");
            (s.pending_p50_seconds, s.pending_max_seconds)
        };
        let nominal =
            (w.settings.launch_delay_seconds + w.settings.registration_delay_seconds) as f64;
        let (p50, max) = waits(&w);
        assert!(max - p50 < 2.0 && max < nominal + 2.0, "{p50} {max}");
        w.settings.ready_jitter_seconds = 60;
        let (p50, max) = waits(&w);
        assert!(max > p50 + 1.0, "waits alike: {p50} {max}");
        assert!(max <= nominal + 60.0 + 2.0, "{max}");
        assert_eq!(waits(&w), (p50, max), "not deterministic");
    }

    #[test]
    fn churn_figures_count_repeated_and_late_evictions() {
        // `a` runs from 0 to 3000 s and is moved three times: at about 190 s (its first
        // move, long before its end), about 2100 s (1,900 s after the first: not soon again,
        // but 900 s before its end) and about 2300 s (200 s after the second, 700 s before
        // its end).
        let w = one_zone_world(
            "shuttle",
            "    - {name: small, vcpu: 4, memoryMib: 8192, price: 0.10}",
            r#"    - {name: a, count: 1, durationSeconds: 3000, requests: {cpu: "1", memory: 1Gi}}
    # Arrivals that wake the disruption loop (it sleeps while nothing changes).
    - {name: tick-1, count: 1, arriveAt: 2000, durationSeconds: 30, requests: {cpu: 100m}}
    - {name: tick-2, count: 1, arriveAt: 2200, durationSeconds: 30, requests: {cpu: 100m}}"#,
        );
        let mut a = Shuttle {
            at: vec![100, 2000, 2200],
            done: 0,
        };
        let mut sim = Sim::new(&w);
        sim.trigger = a.trigger();
        let out = sim.run(&mut a, "shuttle", 0, None);
        let s = &out.summary;
        assert_eq!(a.done, 3, "{s:?}");
        assert_eq!(s.pods_disrupted, 3, "{s:?}");
        assert_eq!(s.pods_disrupted_distinct, 1, "{s:?}");
        assert_eq!(s.pods_disrupted_again_soon, 1, "{s:?}");
        assert_eq!(s.pods_disrupted_near_end, 2, "{s:?}");
    }

    #[test]
    fn candidates_drain_only_once_the_nodes_their_pods_move_to_are_ready() {
        // `a` runs on a small node; `b` does not fit there and gets a big node. While the big
        // node launches, the command moves `a` onto it: the small node must keep `a` until
        // the big node is ready, so `a` never waits (it used to wait out the launch).
        let w = one_zone_world(
            "onto-launching",
            "    - {name: small, vcpu: 4, memoryMib: 8192, price: 0.10}
    - {name: big, vcpu: 16, memoryMib: 32768, price: 0.40}",
            r#"    - {name: a, count: 1, requests: {cpu: "3", memory: 1Gi}}
    - {name: b, count: 1, arriveAt: 300, requests: {cpu: "3", memory: 1Gi}}"#,
        );
        let mut a = OntoLaunching { proposed: false };
        let mut sim = Sim::new(&w);
        sim.trigger = a.trigger();
        let out = sim.run(&mut a, "onto-launching", 0, None);
        assert!(
            a.proposed,
            "the command was never proposed: {:?}",
            out.summary
        );
        assert_eq!(out.summary.disruption_commands, 1, "{:?}", out.summary);
        assert_eq!(out.summary.pods_disrupted, 1);
        assert_eq!(
            out.summary.evicted_wait_max_seconds, 0.0,
            "{:?}",
            out.summary
        );
        assert_eq!(out.summary.pods_never_scheduled, 0);
    }

    /// Puts every pending pod on one `small` node; once, at 600 s or later, moves the node
    /// holding `web-0` (all its pods) onto a fresh `small` node.
    #[derive(Default)]
    struct Evacuate {
        done: bool,
        /// Propose only while every budget allows a disruption (as a candidate check does).
        wait_for_budgets: bool,
        /// Decide nothing while a command launches or drains (as our controller).
        waits: bool,
        /// When the loop asked.
        calls: Vec<i64>,
    }

    impl Autoscaler for Evacuate {
        fn provision(&mut self, snap: &core::Snapshot) -> Provision {
            one_small_node_for_the_pending(snap)
        }

        fn disrupt(&mut self, snap: &core::Snapshot) -> Option<Command> {
            self.calls.push(snap.now);
            if self.done
                || snap.now < 600
                || (self.wait_for_budgets && snap.pdbs.iter().any(|b| b.disruptions_allowed < 1))
            {
                return None;
            }
            let node = node_of(snap, "web-0")?;
            let moved: Vec<core::PodRef> = snap
                .pods
                .iter()
                .filter(|p| p.node_name.as_deref() == Some(node.as_str()))
                .filter(|p| !p.is_daemonset_pod())
                .map(|p| core::PodRef {
                    namespace: p.namespace.clone(),
                    name: p.name.clone(),
                })
                .collect();
            self.done = true;
            Some(Command {
                reason: "test".into(),
                candidates: vec![node],
                replacements: vec![small_launch(moved)],
                placements: Vec::new(),
                savings: 0.0,
                core: None,
            })
        }

        fn validation_delay(&self, _settings: &crate::scenario::Settings) -> i64 {
            0
        }

        fn waits_for_commands(&self) -> bool {
            self.waits
        }
    }

    /// Three `web` pods on one node, under `budget` (none: no PDB), evacuated at 600 s.
    fn run_evacuation(budget: &str) -> RunResult {
        run_evacuation_with(budget, Evacuate::default()).0
    }

    /// [`run_evacuation`] with `a`, which is returned as the run left it.
    fn run_evacuation_with(budget: &str, mut a: Evacuate) -> (RunResult, Evacuate) {
        let w = one_zone_world(
            "evacuate",
            "    - {name: small, vcpu: 8, memoryMib: 16384, price: 0.10}",
            &format!(
                r#"    - {{name: web, count: 3, requests: {{cpu: "1", memory: 1Gi}}{budget}}}
    # Wakes the disruption loop at 600 s.
    - {{name: tick, count: 1, arriveAt: 600, durationSeconds: 30, requests: {{cpu: 10m}}}}"#
            ),
        );
        let mut sim = Sim::new(&w);
        sim.trigger = a.trigger();
        let out = sim.run(&mut a, "evacuate", 0, None);
        assert!(a.done, "the command was never proposed: {:?}", out.summary);
        (out, a)
    }

    #[test]
    fn a_strategy_that_waits_decides_nothing_while_a_command_launches_or_drains() {
        let budget = ", disruptionBudget: {maxUnavailable: 1}";
        for waits in [false, true] {
            let (out, a) = run_evacuation_with(
                budget,
                Evacuate {
                    waits,
                    ..Evacuate::default()
                },
            );
            let c = &out.commands[0];
            let end = c.drained_at + c.drain_seconds.expect("the drain finished");
            // The replacement launches from acceptance until the drain begins.
            assert!(c.drained_at - c.accepted_at >= 30, "{c:?}");
            let launching = a
                .calls
                .iter()
                .filter(|&&t| t > c.accepted_at && t < c.drained_at)
                .count();
            let during = a
                .calls
                .iter()
                .filter(|&&t| t > c.drained_at && t < end)
                .count();
            if waits {
                assert_eq!(launching, 0, "asked while it launched: {:?}", a.calls);
                assert_eq!(during, 0, "asked during the drain: {:?}", a.calls);
                assert!(
                    a.calls.iter().any(|&t| t >= end),
                    "never asked again after the drain: {:?}",
                    a.calls
                );
            } else {
                assert!(
                    launching > 0,
                    "{:?} ({}..{})",
                    a.calls,
                    c.accepted_at,
                    c.drained_at
                );
                assert!(during > 0, "{:?} ({}..{end})", a.calls, c.drained_at);
            }
        }
    }

    #[test]
    fn a_budget_that_allows_again_wakes_the_disruption_loop() {
        // web-1 arrives at 600 and runs at once beside web-0; until it has been ready for 10 s
        // its budget allows nothing, and nothing else happens afterwards. The loop must look
        // again once the budget allows (a controller looks every 10 s).
        let w = one_zone_world(
            "budget-wakes",
            "    - {name: small, vcpu: 8, memoryMib: 16384, price: 0.10}",
            r#"    - {name: web, count: 2, arriveEverySeconds: 600, requests: {cpu: "1", memory: 1Gi}, disruptionBudget: {maxUnavailable: 1}}"#,
        );
        let mut a = Evacuate {
            wait_for_budgets: true,
            ..Evacuate::default()
        };
        let mut sim = Sim::new(&w);
        sim.trigger = a.trigger();
        let out = sim.run(&mut a, "budget-wakes", 0, None);
        assert!(a.done, "never proposed: {:?}", out.summary);
        let accepted = out.commands[0].accepted_at;
        assert!(
            (610..=620).contains(&accepted),
            "accepted at {accepted}: {:?}",
            out.summary
        );
    }

    #[test]
    fn a_pdb_holds_a_drain_back_one_ready_pod_at_a_time() {
        let free = run_evacuation("");
        assert_eq!(free.summary.pods_disrupted, 3, "{:?}", free.summary);
        assert_eq!(free.summary.evictions_held_by_pdb, 0);
        assert_eq!(free.commands[0].drain_seconds, Some(0));
        assert_eq!(free.summary.draining_node_hours, 0.0);

        // maxUnavailable 1: the second pod goes once the first runs again and has been ready
        // for `podReadySeconds` (10 s), the third after the second; the retries come every 5 s.
        let held = run_evacuation(", disruptionBudget: {maxUnavailable: 1}");
        let s = &held.summary;
        assert_eq!(s.pods_disrupted, 3, "{s:?}");
        assert_eq!(s.evictions_held_by_pdb, 2, "{s:?}");
        let c = &held.commands[0];
        assert_eq!(c.pods_evicted, 3);
        let drain = c.drain_seconds.expect("the drain finished");
        assert!((20..=30).contains(&drain), "drain took {drain} s");
        assert!(
            (s.draining_node_hours * 3600.0 - drain as f64).abs() < 1e-6,
            "the node drained for {drain} s: {s:?}"
        );
        assert_eq!(s.pods_never_scheduled, 0);
        assert!(
            held.summary.total_cost > free.summary.total_cost,
            "the draining node costs"
        );

        // A minimum of every pod: the Eviction API never lets one go, so the node stays.
        let stuck = run_evacuation(", disruptionBudget: {minAvailable: 3}");
        let s = &stuck.summary;
        assert_eq!(s.pods_disrupted, 0, "{s:?}");
        assert_eq!(s.evictions_held_by_pdb, 3, "{s:?}");
        assert_eq!(stuck.commands[0].drain_seconds, None);
        assert_eq!(stuck.commands[0].pods_evicted, 0);
    }
}
