//! What a user can tune; the binary fills this from flags. Defaults are upstream Karpenter's.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use provisioner_core::Strategy;

use crate::cloudprovider;

/// Controller settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Planner for new nodes (cost-aware by default; `KarpenterBaseline` for the faithful one).
    pub strategy: Strategy,
    /// Re-plan consolidation replacements with the optimiser.
    pub optimize: bool,
    /// Plan provisioning rounds that launch several nodes with the optimiser (the core's
    /// `optimize::large_rounds`; cost-aware strategy only). Off: the heuristic alone.
    pub optimize_large_rounds: bool,
    /// Give the pods the kube-scheduler's queue would leave without room when a round's
    /// nodes come up in no fixed order nodes of their own in the same round (the core's
    /// `queue_shuffle`): the kube-scheduler does not follow the plan. Off: one plan, and the
    /// pods it loses wait for the next round.
    pub plan_for_scheduler_queue: bool,
    /// Launch each new node in the zone with the least CPU among the equally priced
    /// offerings its pods allow (the core's `zone_balance`), as the Cluster Autoscaler's
    /// `--balance-similar-node-groups` does. Off (the default): the first such zone, so where
    /// zones price alike every unpinned node lands in one.
    pub balance_zones: bool,
    /// A provisioning batch closes after this long without a new pending pod...
    pub batch_idle: Duration,
    /// ...or this long after its first.
    pub batch_max: Duration,
    /// A launched NodeClaim whose Node has not registered by then is deleted.
    pub registration_timeout: Duration,
    /// How often the disruption loop decides.
    pub disruption_interval: Duration,
    /// How long a disruption command waits before it is re-validated (Karpenter: 15 s).
    pub validation_delay: Duration,
    /// How long a command waits for its replacements to initialize before rolling back.
    pub replacement_timeout: Duration,
    /// How long a terminating NodeClaim holds the disruption loop: while one drains, nothing
    /// else is decided (one command at a time). A drain a PodDisruptionBudget holds for
    /// longer no longer stops every other decision; budgets still count its node.
    pub busy_while_terminating: Duration,
    /// How often NodeClaims whose Machine vanished are collected.
    pub gc_interval: Duration,
    /// A Node of a managed resource that still has `karpenter.sh/unregistered` this long after
    /// it joined, with no NodeClaim for it, came from CAPI itself (a rollout, a
    /// MachineHealthCheck remediation, min size): the taint is removed so it can take pods.
    pub unclaimed_node_grace: Duration,
    /// How often each NodeClaim's Machine is compared with its resource's template for drift
    /// (each check reads the claim, Machine and resource from the API; upstream: 5 min).
    pub drift_check_interval: Duration,
    /// Disruption on or off (off: provisioning and lifecycle only).
    pub disruption: bool,
    /// Consolidation takes a command only when its saving over the pods' expected remaining
    /// life pays for its evictions (the core's payback rule). Off: any saving > 0, as
    /// Karpenter (more churn).
    pub consolidation_payback: bool,
    /// Consolidation leaves room for the busiest burst of recent pod arrivals (the core's
    /// headroom rule). Off: repack as tightly as saves.
    pub consolidation_headroom: bool,
    /// Provisioning's anticipation (the core's `anticipate`): new nodes grown for the pods a
    /// stream already flowing is expected to bring. `None`: each node sized for its batch.
    pub anticipation: Option<provisioner_core::anticipate::Anticipation>,
    /// The core's `Payback::flexibility_premium`: a merge's replacement keeps options within
    /// this fraction of its cheapest and is valued at them. `None`: options up to the
    /// candidates' price (fewer merges, fewer evictions).
    pub consolidation_merge_premium: Option<f64>,
    /// The core's `Payback::underused_below`: a single node used less than this fraction in
    /// CPU and in memory is replaced like a merge. `None`: only idle accelerators are.
    pub consolidation_underused_below: Option<f64>,
    /// The core's `Payback::reshape_below`: a settled single node of the wrong shape for its
    /// pods, which fit new nodes under this fraction of its price, is replaced like a merge.
    /// `None`: off.
    pub consolidation_reshape_below: Option<f64>,
    /// The core's `Payback::eviction_pod_hours` as a duration: what one eviction costs, in
    /// time of the pod's price. `None`: the core's default (a quarter hour).
    pub consolidation_eviction_cost: Option<std::time::Duration>,
    /// The core's `Payback::wait_halving_seconds` as a duration: a NodePool's
    /// `consolidateAfter` this long halves the eviction price of its pods. `None`: the full
    /// price whatever the wait.
    pub consolidation_wait_halving: Option<std::time::Duration>,
    /// The core's `Payback::turnover_lookback_seconds` as a duration: once the controller has
    /// watched pods this long, a cluster that renews its pods slowly counts a repack's saving
    /// for as long as that (up to a week) instead of the 4 h cap. `None`: the cap as set.
    pub consolidation_turnover_lookback: Option<std::time::Duration>,
    /// The core's `Payback::shrink_lookback_seconds` as a duration: where the pods that ended
    /// over this lookback outnumber those that arrived, a repack's saving is counted towards
    /// its pods' longest remaining life instead of their median. `None` (the default): the
    /// median.
    pub consolidation_shrink_lookback: Option<std::time::Duration>,
    /// The core's `Payback::window_prior`: before enough pods have ended (a restart forgets
    /// them), estimate a pod's remaining life from how long its owner kind's pods have run
    /// (true, the default) or from its own age alone (false: Lindy, which keeps recently
    /// rolled-out pods in place until enough endings are seen).
    pub consolidation_window_prior: bool,
    /// The core's `Payback::lindy_floor_hours` as a duration: the least a pod is expected to
    /// run on where its lifetime is beyond anything this cluster has shown (older than every
    /// ended pod, or than its kind's window before enough endings). `None`: the core's
    /// default.
    pub consolidation_lindy_floor: Option<std::time::Duration>,
    /// The core's `DisruptionOptions::move_onto_empty_nodes`: let consolidation move pods
    /// onto empty nodes waiting out `consolidateAfter` to be deleted (Karpenter does). Off:
    /// those nodes go.
    pub consolidation_move_onto_empty_nodes: bool,
    /// The core's `DisruptionOptions::staged_merge_followers`: a merge the budgets forbid at
    /// once launches its replacement and drains what they allow, at most this many nodes
    /// following one loop at a time as plain deletes. 0: merges only as budgets allow at once.
    pub consolidation_staged_merge_followers: usize,
    /// The core's `DisruptionOptions::settle_seconds`: a node running a pod recreated for an
    /// eviction this recently is not a consolidation candidate. Zero: off.
    pub consolidation_settle: std::time::Duration,
    /// At most this many single-node consolidation simulations per disruption loop; the
    /// rest wait for the next loop (the core's `WorkBudget`). `None`: every candidate whose
    /// inputs changed since the last loop (unchanged ones are always reused).
    pub consolidation_max_simulations: Option<usize>,
    /// Write every provisioning round and disruption decision here as replayable JSON.
    pub replay_dir: Option<PathBuf>,
    /// How many replay records to keep (the newest).
    pub replay_keep: usize,
    /// Leader election: off runs as the only instance.
    pub leader_elect: bool,
    /// Namespace of the Lease. (Events on cluster-scoped objects, NodeClaims and Nodes, go to
    /// `default`, as client-go's recorder puts them.)
    pub leader_election_namespace: String,
    /// This instance's identity in the Lease (the pod name in a cluster).
    pub identity: String,
    /// Manage only the NodePools carrying these labels (and their NodeClaims and
    /// NodeClasses); `None` manages all. Lets two controllers split one cluster (blue/green
    /// upgrades, and the tests, which share one API server).
    pub nodepool_selector: Option<BTreeMap<String, String>>,
    /// The cloud provider's tunables.
    pub cloud: cloudprovider::Config,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            strategy: Strategy::CostAware,
            optimize: false,
            optimize_large_rounds: true,
            plan_for_scheduler_queue: true,
            balance_zones: false,
            batch_idle: Duration::from_secs(1),
            batch_max: Duration::from_secs(10),
            registration_timeout: Duration::from_secs(15 * 60),
            disruption_interval: Duration::from_secs(10),
            validation_delay: Duration::from_secs(15),
            replacement_timeout: Duration::from_secs(10 * 60),
            busy_while_terminating: Duration::from_secs(10 * 60),
            unclaimed_node_grace: Duration::from_secs(120),
            drift_check_interval: Duration::from_secs(300),
            consolidation_payback: true,
            consolidation_headroom: true,
            anticipation: Some(provisioner_core::anticipate::Anticipation::default()),
            consolidation_merge_premium: None,
            consolidation_underused_below: provisioner_core::disruption::payback::Payback::default(
            )
            .underused_below,
            consolidation_reshape_below: provisioner_core::disruption::payback::Payback::default()
                .reshape_below,
            consolidation_window_prior: true,
            consolidation_move_onto_empty_nodes: false,
            consolidation_staged_merge_followers:
                provisioner_core::disruption::DisruptionOptions::default().staged_merge_followers,
            consolidation_settle: Duration::from_secs(
                provisioner_core::disruption::DisruptionOptions::default()
                    .settle_seconds
                    .max(0)
                    .unsigned_abs(),
            ),
            consolidation_eviction_cost: None,
            consolidation_wait_halving: provisioner_core::disruption::payback::Payback::default()
                .wait_halving_seconds
                .map(Duration::from_secs_f64),
            consolidation_turnover_lookback:
                provisioner_core::disruption::payback::Payback::default()
                    .turnover_lookback_seconds
                    .and_then(|s| u64::try_from(s).ok())
                    .map(Duration::from_secs),
            consolidation_shrink_lookback: None,
            consolidation_lindy_floor: None,
            consolidation_max_simulations: None,
            gc_interval: Duration::from_secs(120),
            disruption: true,
            replay_dir: None,
            replay_keep: 500,
            leader_elect: true,
            leader_election_namespace: "karpenter".into(),
            identity: "karpenter-capi".into(),
            nodepool_selector: None,
            cloud: cloudprovider::Config::default(),
        }
    }
}
