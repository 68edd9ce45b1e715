//! The scenario file: what the cluster can grow (catalog, zones, NodePools), what already runs
//! (existing nodes, daemonsets) and the workload over time. Every type here derives
//! `JsonSchema`, so `docs/simulator.schema.json` is generated from the code and cannot drift.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Affinity, Taint, Toleration, TopologySpreadConstraint};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::convert::NodePoolV1;
use crate::error::{Result, SimError};
use crate::yamlpath;

/// A complete simulation input.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Short name, shown in reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Timings of the autoscaler loops and of the simulated cloud.
    #[serde(default)]
    pub settings: Settings,
    /// The instance types new nodes can be launched as.
    #[serde(default)]
    pub catalog: CatalogSpec,
    /// Zones every catalog type is offered in (unless a type lists its own).
    #[serde(default = "default_zones")]
    pub zones: Vec<String>,
    /// Capacity types offered. `spot` needs a `spotPrice` on the type or
    /// `catalog.spotPriceFactor`.
    #[serde(default = "default_capacity_types")]
    pub capacity_types: Vec<CapacityTypeName>,
    /// `karpenter.sh/v1` NodePools, as `kubectl get nodepool -o yaml` prints them (upstream's
    /// schema: `nodeClassRef` and `requirements` are required). Without any, one pool
    /// `default` with no requirements is used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "node_pools_schema")]
    pub node_pools: Vec<NodePoolV1>,
    /// DaemonSets whose pods land on every node they tolerate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub daemon_sets: Vec<DaemonSetSpec>,
    /// Nodes present at time 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub existing_nodes: Vec<ExistingNodes>,
    /// `policy/v1` PodDisruptionBudgets, pasted as they are; their status is computed as the
    /// run goes (`crate::pdb`). A pod group's own budget is shorter: `disruptionBudget`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_disruption_budgets: Vec<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
    pub workload: Workload,
    /// Strategies to compare. Empty means every available one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strategies: Vec<String>,
}

/// The schema of `nodePools`: karpenter-api's NodePool schema (the one our CRD is generated
/// from) plus `apiVersion`, `kind` and `metadata`, which kube's derive leaves out because the
/// API server checks them itself; here they are part of what a user writes.
fn node_pools_schema(generator: &mut SchemaGenerator) -> Schema {
    let mut nodepool = NodePoolV1::json_schema(generator);
    if let Some(properties) = nodepool
        .ensure_object()
        .entry("properties")
        .or_insert_with(|| serde_json::json!({}))
        .as_object_mut()
    {
        properties.insert(
            "apiVersion".into(),
            serde_json::json!({"type": "string", "description": "karpenter.sh/v1"}),
        );
        properties.insert(
            "kind".into(),
            serde_json::json!({"type": "string", "description": "NodePool"}),
        );
        properties.insert(
            "metadata".into(),
            serde_json::json!({
                "type": "object",
                "description": "Kubernetes object metadata; the simulator reads `name` and ignores the rest.",
                "properties": {"name": {"type": "string"}},
                "required": ["name"]
            }),
        );
    }
    nodepool.insert("required".into(), serde_json::json!(["metadata", "spec"]));
    json_schema!({"type": "array", "items": nodepool})
}

fn default_zones() -> Vec<String> {
    vec!["zone-a".into(), "zone-b".into(), "zone-c".into()]
}

fn default_capacity_types() -> Vec<CapacityTypeName> {
    vec![CapacityTypeName::OnDemand]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityTypeName {
    OnDemand,
    Spot,
    Reserved,
}

impl From<CapacityTypeName> for provisioner_core::CapacityType {
    fn from(c: CapacityTypeName) -> Self {
        match c {
            CapacityTypeName::OnDemand => provisioner_core::CapacityType::OnDemand,
            CapacityTypeName::Spot => provisioner_core::CapacityType::Spot,
            CapacityTypeName::Reserved => provisioner_core::CapacityType::Reserved,
        }
    }
}

/// Timings, in seconds of simulated time. Defaults follow Karpenter and the Cluster Autoscaler.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Settings {
    /// Provisioning batch closes after this long without a new pending pod (Karpenter: 1 s).
    pub batch_idle_seconds: i64,
    /// ... or this long after it opened (Karpenter: 10 s).
    pub batch_max_seconds: i64,
    /// From the scale request until the machine is running.
    pub launch_delay_seconds: i64,
    /// From running until the node is registered, initialized and takes pods.
    pub registration_delay_seconds: i64,
    /// Each launched node is ready up to this many seconds later than the two delays above,
    /// by a fixed pseudo-random amount per node (the same for every strategy): instances of
    /// one launch come up in no fixed order. 0 (the default): every node of a round is ready
    /// at the same instant, in launch order.
    pub ready_jitter_seconds: i64,
    /// From binding until a pod is Ready (its containers started and its readiness probe
    /// passed): until then it does not count as healthy for PodDisruptionBudgets, so a drain
    /// a budget holds back waits this long per pod it moves. Only budgets read it.
    pub pod_ready_seconds: i64,
    /// Disruption (consolidation) loop period (Karpenter: 10 s).
    pub disruption_period_seconds: i64,
    /// Wait between choosing a disruption command and re-validating it (Karpenter: 15 s).
    pub validation_delay_seconds: i64,
    /// Turn consolidation off for every strategy.
    pub consolidation: bool,
    /// Time-series sampling step; default: the horizon / 1000, at least 10 s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_step_seconds: Option<i64>,
    /// When the simulation stops; default: one hour after the last workload event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_seconds: Option<i64>,
    /// How the simulated kube-scheduler scores nodes for a pod it binds itself.
    pub scheduler_scoring: SchedulerScoring,
    /// Where a disruption command's evicted pods go: to the nodes the command planned for
    /// them, or wherever the simulated kube-scheduler's scoring puts them.
    pub evicted_pod_placement: EvictedPodPlacement,
    /// Where pending pods go when a node comes up or room frees: first to the node the
    /// provisioning decision nominated them to, or wherever the simulated kube-scheduler's
    /// scoring puts them.
    pub pending_pod_placement: PendingPodPlacement,
    /// What the autoscalers see of an evicted pod: `true`, the new pod its workload creates
    /// (created at the eviction, its eviction in the snapshot's `recent_evictions`), as a
    /// controller watching a real cluster does; `false`, the pod as it was, created at its
    /// first arrival (every measurement before 2026-12-05's round 26).
    pub evicted_pods_recreated: bool,
    /// `true`: the core's strategies launch each new node in the zone with the least CPU
    /// among the equally priced offerings its pods allow (the core's `zone_balance`, the
    /// controller's `--balance-zones`); `false` (the default, as the controller's): in the
    /// first such zone. The Karpenter baseline always takes the first.
    pub balance_zones: bool,
    /// The Cluster-Autoscaler-like baseline's knobs.
    pub cas: CasSettings,
    /// Knobs of the core's own disruption decision (`cost-aware`, `cost-aware+opt`); the
    /// Karpenter baseline has none, like Karpenter.
    pub core_disruption: CoreDisruptionSettings,
    /// Windows in which launches of some offerings fail (a cloud out of capacity for a type
    /// in a zone). Empty (the default): every launch succeeds.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub capacity_outages: Vec<crate::outages::CapacityOutage>,
    /// From the launch request until a launch an outage fails is seen failed, for every
    /// strategy: its node is gone, its pods pending again, and the autoscaler backs the
    /// offering off. Absent (the default): each its own
    /// ([`crate::strategy::Autoscaler::launch_failure_seconds`]): Karpenter 1 s (EC2
    /// CreateFleet answers at once), ours 10 s (the controller reads the provider's capacity
    /// error from the Machine's `InfrastructureReady` condition while the provider retries),
    /// the Cluster Autoscaler `cas.maxNodeProvisionSeconds` (on Cluster API it learns of a
    /// Machine that never gets a providerID only then). 600: our controller's providerID
    /// timeout, for a provider whose error names no capacity code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch_failure_seconds: Option<i64>,
    /// How long every strategy skips an offering whose launch failed, each time; absent (the
    /// default): each its own (Karpenter a fixed 180 s; ours and the Cluster Autoscaler 300 s,
    /// doubled with each further failure of the offering up to 1,800 s: the controller's
    /// `--launch-failure-backoff` and `--launch-failure-backoff-max`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch_backoff_seconds: Option<i64>,
    /// Warning a node of a reclaimed spot pool (`capacityOutages[].reclaimRunning`) gets
    /// before it ends: its pods are evicted at the warning, the node (and its price) goes at
    /// its end. 0 (the default): no warning is acted on, as on a Cluster API cluster without
    /// a node termination handler, so the pods end with the node; 120 is AWS's notice
    /// drained by aws-node-termination-handler (or Karpenter's interruption queue).
    pub interruption_notice_seconds: i64,
}

/// The core's `DisruptionOptions` that users tune; defaults are the core's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CoreDisruptionSettings {
    /// A consolidation must save at least this much per hour.
    pub min_saving_per_hour: f64,
    /// ... and at least this fraction of the candidates' price (0.1 = 10%).
    pub min_saving_fraction: f64,
    /// Work bound of the multi-node search, in scheduling simulations per decision.
    pub max_simulations: usize,
    /// The payback rule (the core's `disruption::payback`); `null` turns it off (the plain
    /// `saving > 0` rule). Absent: the core's defaults.
    pub payback: Option<PaybackSettings>,
    /// The headroom rule (the core's `disruption::headroom`); `null` turns it off.
    pub headroom: Option<HeadroomSettings>,
    /// Provisioning's anticipation rule (the core's `anticipate`): new nodes grown for the
    /// arrivals already flowing; `null` turns it off. Absent: the core's defaults.
    pub anticipation: Option<AnticipationSettings>,
    /// Groups the core's merge search (`disruption::merge`) proposes per decision; 0 turns
    /// it off.
    pub merge_groups: usize,
    /// Disruption-cost weight (price per hour per evicted default pod) of the
    /// `cost-aware-weighted` ablation: the crude alternative to the payback rule.
    pub weighted_ablation_weight: f64,
    /// Let consolidation move pods onto empty nodes that are about to be deleted (in their
    /// `consolidateAfter`), as Karpenter does; off by default.
    pub move_onto_empty_nodes: bool,
    /// Most followers of a staged merge (the core's `disruption::staged`): a merge the
    /// budgets forbid at once launches its replacement and drains what they allow, the rest
    /// following one loop at a time; 0 turns staging off.
    pub staged_merge_followers: usize,
    /// Seconds after an eviction during which a node running the evicted pod's replacement
    /// is not a consolidation candidate (the core's `DisruptionOptions::settle_seconds`); 0
    /// turns it off.
    pub settle_seconds: i64,
    /// Count a command's evictions against each PodDisruptionBudget across all its nodes
    /// (the core's `DisruptionOptions::pdb_per_command`); off by default: per node, as
    /// Karpenter checks, the drain waiting on the Eviction API for the rest (round 52).
    pub pdb_per_command: bool,
}

/// The core's `anticipate::Anticipation`, as a scenario writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AnticipationSettings {
    /// How far before a batch the stream of arrivals is looked for, in seconds; the horizon
    /// reserved for is at most this long.
    pub window_seconds: i64,
    /// A grown node costs at most this many times the node its batch alone needs.
    pub max_price_factor: f64,
    /// Arrivals this many seconds apart or more belong to different streams.
    pub stream_gap_seconds: i64,
    /// The probability (Lindy's law) that the stream still flows at the end of the horizon
    /// reserved for: 0.75 reserves for a third of the stream's age, 0.5 for as long again.
    pub confidence: f64,
    /// How far before a batch each workload's own stream (a namespace and label set) is
    /// looked for, in seconds; 0 reads only the stream of all arrivals.
    pub workload_lookback_seconds: i64,
}

impl Default for AnticipationSettings {
    fn default() -> Self {
        let d = provisioner_core::anticipate::Anticipation::default();
        AnticipationSettings {
            window_seconds: d.window_seconds,
            max_price_factor: d.max_price_factor,
            stream_gap_seconds: d.stream_gap_seconds,
            confidence: d.confidence,
            workload_lookback_seconds: d.workload_lookback_seconds,
        }
    }
}

impl AnticipationSettings {
    pub fn to_core(&self) -> provisioner_core::anticipate::Anticipation {
        provisioner_core::anticipate::Anticipation {
            window_seconds: self.window_seconds,
            max_price_factor: self.max_price_factor,
            stream_gap_seconds: self.stream_gap_seconds,
            confidence: self.confidence,
            workload_lookback_seconds: self.workload_lookback_seconds,
        }
    }
}

/// The core's `disruption::headroom::Headroom`, as a scenario writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HeadroomSettings {
    /// Width of the arrival window whose peak is kept free, in seconds.
    pub window_seconds: i64,
    /// How far back arrivals are looked at, in seconds.
    pub lookback_seconds: i64,
}

impl Default for HeadroomSettings {
    fn default() -> Self {
        let d = provisioner_core::disruption::headroom::Headroom::default();
        HeadroomSettings {
            window_seconds: d.window_seconds,
            lookback_seconds: d.lookback_seconds,
        }
    }
}

impl HeadroomSettings {
    pub fn to_core(&self) -> provisioner_core::disruption::headroom::Headroom {
        provisioner_core::disruption::headroom::Headroom {
            window_seconds: self.window_seconds,
            lookback_seconds: self.lookback_seconds,
        }
    }
}

/// The core's `disruption::payback::Payback`, as a scenario writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PaybackSettings {
    /// Longest a saving is counted for, in hours.
    pub horizon_cap_hours: f64,
    /// Hours of an evicted pod's own price one eviction costs.
    pub eviction_pod_hours: f64,
    /// Seconds both candidates and replacements are billed.
    pub replacement_ready_seconds: i64,
    /// Ended pod lifetimes needed before the horizon is learnt from them instead of assumed
    /// (Lindy); a number above the run's pod count keeps Lindy.
    pub min_ended_lifetimes: usize,
    /// Before that many endings, estimate from the window each owner kind has been seen over
    /// (its oldest running pod's age) instead of each pod's own age.
    pub window_prior: bool,
    /// Price a replacement's dearer instance-type options against the evictions.
    pub pay_for_flexibility: bool,
    /// Most a merge's replacement's dearest kept option may cost above its cheapest (a
    /// fraction); `null` keeps options up to the candidates' price less the threshold. A
    /// single node's replacement is priced as without it, unless the node is underused
    /// (`underusedBelow`) or its accelerators idle (then at this premium, 0.25 if `null`).
    pub flexibility_premium: Option<f64>,
    /// A single node whose pods request less than this fraction of its CPU and of its memory
    /// is replaced like a merge (options bounded by the premium); `null`: only nodes with idle
    /// accelerators are.
    pub underused_below: Option<f64>,
    /// A single node of the wrong shape for its pods (CPU and memory shares 0.4 or more
    /// apart), whose pods, expected to stay at least `horizonCapHours`, fit new nodes whose
    /// cheapest options cost less than this fraction of its price, is replaced like a merge;
    /// `null`: off.
    pub reshape_below: Option<f64>,
    /// A NodePool's `consolidateAfter` of this many seconds halves the eviction price of its
    /// pods (scaled by `k / (k + consolidateAfter)`): the wait already keeps out the churn the
    /// price guards against. `null`: the full price whatever the wait.
    pub wait_halving_seconds: Option<f64>,
    /// Raise `horizonCapHours` to the cluster's turnover over this lookback (present pods x
    /// window / (arrivals + 1)), up to `turnoverCapHours`, once a whole lookback has been
    /// watched: a cluster that sees few new pods keeps a repack's saving longer. `null`: the
    /// cap as set.
    pub turnover_lookback_seconds: Option<i64>,
    /// The most the turnover raises the cap to.
    pub turnover_cap_hours: f64,
    /// Count a command's saving from its pods' median remaining life towards their longest
    /// by the share of departures over this lookback that arrivals did not make up for (a
    /// workload winding down). `null`: the median whatever the trend.
    pub shrink_lookback_seconds: Option<i64>,
    /// The least hours a pod beyond the evidence (older than any lifetime seen) is expected
    /// to run on; 0: Lindy (as long as it has run).
    pub lindy_floor_hours: f64,
}

impl Default for PaybackSettings {
    fn default() -> Self {
        PaybackSettings::from(&provisioner_core::disruption::payback::Payback::default())
    }
}

impl From<&provisioner_core::disruption::payback::Payback> for PaybackSettings {
    fn from(d: &provisioner_core::disruption::payback::Payback) -> Self {
        PaybackSettings {
            horizon_cap_hours: d.horizon_cap_hours,
            eviction_pod_hours: d.eviction_pod_hours,
            replacement_ready_seconds: d.replacement_ready_seconds,
            min_ended_lifetimes: d.min_ended_lifetimes,
            window_prior: d.window_prior,
            pay_for_flexibility: d.pay_for_flexibility,
            flexibility_premium: d.flexibility_premium,
            underused_below: d.underused_below,
            reshape_below: d.reshape_below,
            wait_halving_seconds: d.wait_halving_seconds,
            turnover_lookback_seconds: d.turnover_lookback_seconds,
            turnover_cap_hours: d.turnover_cap_hours,
            shrink_lookback_seconds: d.shrink_lookback_seconds,
            lindy_floor_hours: d.lindy_floor_hours,
        }
    }
}

impl PaybackSettings {
    pub fn to_core(&self) -> provisioner_core::disruption::payback::Payback {
        provisioner_core::disruption::payback::Payback {
            horizon_cap_hours: self.horizon_cap_hours,
            eviction_pod_hours: self.eviction_pod_hours,
            replacement_ready_seconds: self.replacement_ready_seconds,
            min_ended_lifetimes: self.min_ended_lifetimes,
            window_prior: self.window_prior,
            pay_for_flexibility: self.pay_for_flexibility,
            flexibility_premium: self.flexibility_premium,
            underused_below: self.underused_below,
            reshape_below: self.reshape_below,
            wait_halving_seconds: self.wait_halving_seconds,
            turnover_lookback_seconds: self.turnover_lookback_seconds,
            turnover_cap_hours: self.turnover_cap_hours,
            shrink_lookback_seconds: self.shrink_lookback_seconds,
            lindy_floor_hours: self.lindy_floor_hours,
        }
    }
}

impl Default for CoreDisruptionSettings {
    fn default() -> Self {
        let d = provisioner_core::disruption::DisruptionOptions::default();
        CoreDisruptionSettings {
            min_saving_per_hour: d.min_saving_per_hour,
            min_saving_fraction: d.min_saving_fraction,
            max_simulations: d.max_simulations,
            payback: d.payback.as_ref().map(PaybackSettings::from),
            headroom: d.headroom.map(|h| HeadroomSettings {
                window_seconds: h.window_seconds,
                lookback_seconds: h.lookback_seconds,
            }),
            anticipation: provisioner_core::SchedulingOptions::default()
                .anticipation
                .map(|a| AnticipationSettings {
                    window_seconds: a.window_seconds,
                    max_price_factor: a.max_price_factor,
                    stream_gap_seconds: a.stream_gap_seconds,
                    confidence: a.confidence,
                    workload_lookback_seconds: a.workload_lookback_seconds,
                }),
            merge_groups: d.merge_groups,
            weighted_ablation_weight: 0.05,
            move_onto_empty_nodes: d.move_onto_empty_nodes,
            staged_merge_followers: d.staged_merge_followers,
            settle_seconds: d.settle_seconds,
            pdb_per_command: d.pdb_per_command,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            batch_idle_seconds: 1,
            batch_max_seconds: 10,
            launch_delay_seconds: 60,
            registration_delay_seconds: 30,
            ready_jitter_seconds: 0,
            pod_ready_seconds: 10,
            disruption_period_seconds: 10,
            validation_delay_seconds: 15,
            consolidation: true,
            sample_step_seconds: None,
            end_seconds: None,
            scheduler_scoring: SchedulerScoring::LeastAllocated,
            evicted_pod_placement: EvictedPodPlacement::Planned,
            pending_pod_placement: PendingPodPlacement::Planned,
            evicted_pods_recreated: true,
            balance_zones: false,
            cas: CasSettings::default(),
            core_disruption: CoreDisruptionSettings::default(),
            capacity_outages: Vec::new(),
            launch_failure_seconds: None,
            launch_backoff_seconds: None,
            interruption_notice_seconds: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SchedulerScoring {
    /// The kube-scheduler's default: spread pods onto the least requested node.
    LeastAllocated,
    /// Bin-packing scoring (`MostAllocated`).
    MostAllocated,
}

/// Where evicted pods are bound.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EvictedPodPlacement {
    /// On the node the command planned for each pod (its replacement or an existing node)
    /// when it still fits there, else by the scheduler's scoring: a kube-scheduler that
    /// agrees with the autoscaler's plan. Every measurement before 2026-12-05's round 20.
    #[default]
    Planned,
    /// By the scheduler's scoring alone, as in a real cluster: the evicted pods' controllers
    /// create new pods, and the kube-scheduler places them knowing nothing of the plan
    /// (under `least-allocated`, on the emptiest nodes that fit, often the next candidates).
    Scheduler,
}

/// Where pending pods are bound when a node becomes ready or a pod leaves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PendingPodPlacement {
    /// A pod the provisioning decision nominated to a launching node waits for that node and
    /// binds there first: a kube-scheduler that follows the autoscaler's plan. Every
    /// measurement before 2026-12-05's round 22.
    #[default]
    Planned,
    /// The nominations steer only the autoscaler (a pod waiting for an in-flight node is not
    /// provisioned again); the kube-scheduler, which never sees them, takes the pending pods
    /// in its queue's order (priority, then age) and binds each to the best-scoring ready
    /// node that fits, as soon as one does. A tight plan then holds only if the nodes come up
    /// in an order that suits it: the pods the first ready node takes may be ones planned for
    /// another, and those planned for it wait for a later node or a second launch.
    Scheduler,
}

/// The Cluster Autoscaler's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CasSettings {
    /// `--scan-interval`.
    pub scan_interval_seconds: i64,
    /// `--scale-down-utilization-threshold`.
    pub scale_down_utilization_threshold: f64,
    /// `--scale-down-unneeded-time`.
    pub scale_down_unneeded_seconds: i64,
    /// `--scale-down-delay-after-add`.
    pub scale_down_delay_after_add_seconds: i64,
    /// `--max-empty-bulk-delete`.
    pub max_empty_bulk_delete: usize,
    /// `--max-nodes-per-scaleup` (CAS's default 1000): the binpacking estimator adds at most
    /// this many nodes of one group per scale-up; the rest of the pods wait for the next scan.
    pub max_nodes_per_scale_up: usize,
    /// `--max-node-provision-time` (CAS's default 15 minutes): its Cluster API provider
    /// reports a Machine without providerID as an instance still being created, so a launch
    /// the cloud refuses while the infrastructure provider retries (CAPA's
    /// `InsufficientInstanceCapacity`) is given up, and its node group backed off, only then.
    pub max_node_provision_seconds: i64,
}

impl Default for CasSettings {
    fn default() -> Self {
        CasSettings {
            scan_interval_seconds: 10,
            scale_down_utilization_threshold: 0.5,
            scale_down_unneeded_seconds: 600,
            scale_down_delay_after_add_seconds: 600,
            max_empty_bulk_delete: 10,
            max_nodes_per_scale_up: 1000,
            max_node_provision_seconds: 900,
        }
    }
}

/// Where instance types come from; the sources add up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CatalogSpec {
    /// A catalog built into the simulator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub builtin: Option<BuiltinCatalog>,
    /// A CSV file `instance_type, vcpu, memory_mib, gpu, arch, on_demand_usd_per_hour`,
    /// relative to the scenario file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csv: Option<String>,
    /// Only keep types whose name starts with one of these (e.g. `["m5.", "c5.", "r5."]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub name_prefixes: Vec<String>,
    /// Inline types.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<InstanceTypeSpec>,
    /// kube-reserved + system-reserved + eviction threshold per node.
    pub overhead: OverheadSpec,
    /// Pod slots per node (default 110).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<i64>,
    /// Spot price = on-demand price x this, for types without `spotPrice`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spot_price_factor: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum BuiltinCatalog {
    /// 42 EC2-like general, compute and memory types written for this project (prices are
    /// illustrative, in the range of public on-demand list prices).
    Ec2Sample,
    /// Karpenter's scheduling benchmark: 400 types, type i has i+1 vCPU and 2(i+1) GiB.
    KarpenterBenchmark,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstanceTypeSpec {
    pub name: String,
    pub vcpu: f64,
    pub memory_mib: i64,
    #[serde(default)]
    pub gpu: i64,
    #[serde(default = "default_arch")]
    pub arch: String,
    /// On-demand price per hour.
    pub price: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spot_price: Option<f64>,
    /// Zones this type is offered in; default: every scenario zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

fn default_arch() -> String {
    "amd64".into()
}

/// Node overhead: what the kubelet and system keep for themselves.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OverheadSpec {
    /// Karpenter's EKS-like defaults: kube-reserved CPU on a sliding scale (6% of the first
    /// core, 1% of the next, 0.5% of the next two, 0.25% above), memory 11 MiB x maxPods +
    /// 255 MiB, eviction threshold 100 MiB.
    #[default]
    Karpenter,
    /// Allocatable = capacity (useful for textbook examples).
    None,
    /// The same overhead on every node.
    Fixed { cpu: String, memory: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DaemonSetSpec {
    pub name: String,
    #[serde(default = "default_kube_system")]
    pub namespace: String,
    /// Requests per pod, as quantities (`cpu: 100m`, `memory: 128Mi`).
    pub requests: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

fn default_kube_system() -> String {
    "kube-system".into()
}

/// `count` nodes of one type that exist at time 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExistingNodes {
    /// Name prefix; nodes are `<name>-<i>`.
    pub name: String,
    #[serde(default = "one")]
    pub count: u32,
    /// A catalog type name.
    pub instance_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<CapacityTypeName>,
    /// The NodePool that owns them; none = unmanaged (never consolidated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_pool: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}

fn one() -> u32 {
    1
}

/// The pods over time; the sources add up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Workload {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<PodGroup>,
    /// An Alibaba openb trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub openb: Option<OpenbSpec>,
    /// A built-in generator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generate: Option<GenerateSpec>,
    /// A live-cluster snapshot (`kubectl get pods,nodes,nodepools,machinedeployments,pdb -A
    /// -o yaml`): its pods arrive at time 0, its nodes exist, its NodePools,
    /// MachineDeployments and PodDisruptionBudgets add to the scenario's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubectl: Option<KubectlSpec>,
    /// A PodDisruptionBudget for every pod group (`pods` and `generate`) that has none of
    /// its own, e.g. `{maxUnavailable: 1}`: what most production Deployments carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption_budget: Option<crate::pdb::GroupBudget>,
}

/// `count` identical pods.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodGroup {
    /// Name prefix; pods are `<name>-<i>`; also the `app` label unless labels say otherwise.
    pub name: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    #[serde(default = "one")]
    pub count: u32,
    /// Requests per pod, as quantities (`cpu: 500m`, `memory: 1Gi`, `nvidia.com/gpu: 1`).
    pub requests: BTreeMap<String, String>,
    /// Arrival of the first pod, seconds.
    #[serde(default)]
    pub arrive_at: i64,
    /// Seconds between consecutive pods' arrivals (0: all at once).
    #[serde(default)]
    pub arrive_every_seconds: i64,
    /// Lifetime of each pod; none = until the end. For a `Job`'s pods, the work each does
    /// once running, counted from when it starts and again from the start after an eviction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<i64>,
    /// What owns the pods, which decides what an eviction costs them: a `ReplicaSet`'s
    /// replacement carries on the evicted pod's work and leaves when the workload would have;
    /// a `Job`'s starts its work over. None: a `ReplicaSet`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_kind: Option<OwnerKind>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// A pod spec `affinity` (node affinity, pod affinity and anti-affinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    #[serde(default)]
    pub priority: i32,
    /// A PodDisruptionBudget selecting exactly this group's pods, e.g. `{maxUnavailable: 1}`
    /// or `{minAvailable: "50%"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption_budget: Option<crate::pdb::GroupBudget>,
}

/// The controller that owns a pod group's pods ([`PodGroup::owner_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OwnerKind {
    /// A Deployment's pods: an evicted pod is replaced and the work goes on.
    ReplicaSet,
    /// A batch Job's pods: an evicted pod's work is lost and done again.
    Job,
}

impl OwnerKind {
    /// The owner reference kind a controller reads from the pod.
    pub fn as_str(self) -> &'static str {
        match self {
            OwnerKind::ReplicaSet => "ReplicaSet",
            OwnerKind::Job => "Job",
        }
    }
}

fn default_namespace() -> String {
    "default".into()
}

/// How the openb trace's GPU columns become requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum GpuMode {
    /// Drop GPU requests: a CPU/memory question on the trace's shape.
    #[default]
    Ignore,
    /// `num_gpu` whole `nvidia.com/gpu` per pod (no sharing, as plain Kubernetes does).
    Whole,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OpenbSpec {
    /// Path to `openb_pod_list_*.csv`, relative to the scenario file.
    pub path: String,
    #[serde(default)]
    pub gpu: GpuMode,
    /// Only the first N pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Start the clock at the first arrival instead of the trace's zero.
    #[serde(default = "yes")]
    pub shift_to_first_arrival: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GenerateSpec {
    /// `karpenter-benchmark` or `mixed`.
    pub kind: String,
    #[serde(default)]
    pub seed: u64,
    /// Number of pods (generator default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubectlSpec {
    /// One or more `kubectl get ... -o yaml` outputs (a `List`, or `---`-separated objects),
    /// relative to the scenario file.
    pub paths: Vec<String>,
}

/// A scenario together with where it came from, so relative paths and error messages work.
#[derive(Debug, Clone)]
pub struct LoadedScenario {
    pub scenario: Scenario,
    /// The file name used in messages.
    pub file: String,
    /// Directory relative paths resolve against.
    pub base_dir: PathBuf,
    /// The raw text, to map field paths back to lines.
    pub text: String,
}

impl LoadedScenario {
    /// Resolve a path written in the scenario.
    pub fn resolve(&self, p: &str) -> PathBuf {
        let path = Path::new(p);
        if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.base_dir.join(path)
        }
    }

    /// A validation error that names the line of `field` when it can be found.
    pub fn invalid(&self, field: &str, message: impl Into<String>) -> SimError {
        match yamlpath::line_of_path(&self.text, field) {
            Some(line) => SimError::invalid(&format!("{}:{line}", self.file), field, message),
            None => SimError::invalid(&self.file, field, message),
        }
    }
}

/// Pods a scenario file may describe one group each (real traces written out as scenarios):
/// the YAML reader's limits are set from it.
pub const MAX_SCENARIO_POD_GROUPS: usize = 100_000;

/// YAML nodes (mappings, sequences, scalars) one pod group may take, generously: a group with
/// requests, labels, affinity and spread is a few dozen.
const NODES_PER_POD_GROUP: usize = 200;

/// The YAML reader's limits: serde-saphyr's defaults guard against hostile input (250,000
/// nodes, a few thousand pod groups), too little for a trace written out as a scenario; these
/// hold [`MAX_SCENARIO_POD_GROUPS`] groups and still stop runaway input.
pub fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = MAX_SCENARIO_POD_GROUPS * NODES_PER_POD_GROUP;
    budget.max_events = budget.max_nodes * 3;
    budget.max_total_scalar_bytes = 1 << 30;
    budget.max_reader_input_bytes = Some(1 << 30);
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// Parse scenario text. `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Scenario> {
    let scenario = serde_saphyr::from_str_with_options::<Scenario>(text, yaml_options())
        .map_err(|e| yaml_error(text, file, &e))?;
    reject_unknown_fields(text, file, &scenario)?;
    Ok(scenario)
}

/// Fields the typed parse dropped. Our own types deny unknown fields, but the Kubernetes
/// objects inside a scenario (NodePools, tolerations, affinity, topology spread) are
/// upstream's types, which ignore them: a misspelt `whenUnsatisfiabel` would silently mean
/// the default. So the scenario is read once more as plain YAML and every key with a value
/// that the parsed scenario does not serialize back is an error, with its line.
fn reject_unknown_fields(text: &str, file: &str, scenario: &Scenario) -> Result<()> {
    let Ok(original) =
        serde_saphyr::from_str_with_options::<serde_json::Value>(text, yaml_options())
    else {
        return Ok(());
    };
    let Ok(parsed) = serde_json::to_value(scenario) else {
        return Ok(());
    };
    let mut unknown = Vec::new();
    dropped_keys(&original, &parsed, String::new(), &mut unknown);
    let Some(field) = unknown.first() else {
        return Ok(());
    };
    let line = yamlpath::line_of_path(text, field).unwrap_or(0);
    let (parent, key) = field.rsplit_once('.').unwrap_or(("", field.as_str()));
    Err(SimError::Yaml {
        file: file.to_string(),
        line,
        column: 0,
        field: field.clone(),
        message: format!(
            "field `{field}`: unknown field `{key}`{}{}",
            if parent.is_empty() {
                String::new()
            } else {
                format!(" in `{parent}`")
            },
            if unknown.len() > 1 {
                format!(" (and {} more)", unknown.len() - 1)
            } else {
                String::new()
            }
        ),
    })
}

/// Whether a YAML value says nothing (a field left empty is dropped on serialization too).
fn is_empty_value(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => true,
        serde_json::Value::Object(m) => m.is_empty(),
        serde_json::Value::Array(a) => a.is_empty(),
        serde_json::Value::String(s) => s.is_empty(),
        serde_json::Value::Bool(b) => !b,
        _ => false,
    }
}

/// Paths (`a.b[0].c`) of keys in `original` with a value that `parsed` lacks.
fn dropped_keys(
    original: &serde_json::Value,
    parsed: &serde_json::Value,
    path: String,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    match (original, parsed) {
        (Value::Object(o), Value::Object(p)) => {
            for (k, v) in o {
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match p.get(k) {
                    Some(pv) => dropped_keys(v, pv, sub, out),
                    None if !is_empty_value(v) => out.push(sub),
                    None => {}
                }
            }
        }
        (Value::Array(o), Value::Array(p)) => {
            for (i, (v, pv)) in o.iter().zip(p).enumerate() {
                dropped_keys(v, pv, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// A reader limit in plain words, for [`yaml_error`].
fn budget_words(breach: &serde_saphyr::budget::BudgetBreach) -> String {
    format!(
        "the file is larger than the simulator reads ({breach:?}): the reader accepts about {MAX_SCENARIO_POD_GROUPS} pod groups (YAML nodes, events, 1 GiB of text are limited so a runaway file cannot exhaust memory); split the workload, use `count` for identical pods, or load a trace with `workload.openb`"
    )
}

/// Turn a serde-saphyr error into one that names the line, column and field path.
pub fn yaml_error(text: &str, file: &str, e: &serde_saphyr::Error) -> SimError {
    let (line, column) = e
        .location()
        .map(|l| (l.line() as usize, l.column() as usize))
        .unwrap_or((0, 0));
    if let serde_saphyr::Error::Budget { breach, .. } = e.without_snippet() {
        return SimError::Yaml {
            file: file.to_string(),
            line,
            column,
            field: String::new(),
            message: budget_words(breach),
        };
    }
    let raw = e.without_snippet().to_string();
    let field = if line == 0 {
        String::new()
    } else if raw.starts_with("missing field") {
        // Reported at the first key of the mapping that lacks the field: name that mapping.
        yamlpath::mapping_at(text, line, column)
    } else {
        yamlpath::path_at_line(text, line)
    };
    // The message may repeat the position; keep the first line only.
    let first = raw.lines().next().unwrap_or_default().to_string();
    let message = if field.is_empty() {
        first
    } else {
        format!("field `{field}`: {first}")
    };
    SimError::Yaml {
        file: file.to_string(),
        line,
        column,
        field,
        message,
    }
}

/// Read and parse a scenario file.
pub fn load(path: &Path) -> Result<LoadedScenario> {
    let text = std::fs::read_to_string(path).map_err(|e| SimError::io(path, e))?;
    let file = path.display().to_string();
    let scenario = parse(&text, &file)?;
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok(LoadedScenario {
        scenario,
        file,
        base_dir,
        text,
    })
}

/// Wrap an in-memory scenario (generated, or built by a test).
pub fn from_value(scenario: Scenario, name: &str) -> LoadedScenario {
    let text = serde_saphyr::to_string(&scenario).unwrap_or_default();
    LoadedScenario {
        scenario,
        file: name.to_string(),
        base_dir: PathBuf::from("."),
        text,
    }
}

/// Command-line overrides applied to a loaded scenario (paths are used as given, relative
/// to the working directory).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Replace the workload with this openb trace.
    pub openb: Option<PathBuf>,
    pub openb_limit: Option<usize>,
    /// Use this CSV catalog instead of the scenario's catalog sources (keeps the overhead and
    /// `namePrefixes`).
    pub catalog_csv: Option<PathBuf>,
    /// `path=value` settings (`--set`), applied in order after the rest: `path` is a field
    /// path as in error messages (`settings.coreDisruption.payback.evictionPodHours`), `value`
    /// is YAML (`0.7`, `null`, `[a, b]`). For sweeping a knob over one workload without
    /// editing its file.
    pub sets: Vec<String>,
}

/// One key of a field path: `name`, or `name[index]` for a list item.
fn segment(key: &str) -> std::result::Result<(&str, Option<usize>), String> {
    let (name, index) = match key.split_once('[') {
        Some((n, rest)) => {
            let idx = rest
                .strip_suffix(']')
                .and_then(|x| x.parse::<usize>().ok())
                .ok_or_else(|| format!("`{key}` is not `name[index]`"))?;
            (n, Some(idx))
        }
        None => (key, None),
    };
    if name.is_empty() {
        return Err("an empty key".into());
    }
    Ok((name, index))
}

/// Sets `path` (dot-separated [`segment`]s) in `doc` to `value`, creating mappings that are
/// missing or null on the way.
fn set_path(
    doc: &mut serde_json::Value,
    path: &str,
    value: serde_json::Value,
) -> std::result::Result<(), String> {
    let mut at = doc;
    for key in path.split('.') {
        let (name, index) = segment(key)?;
        if at.is_null() {
            *at = serde_json::Value::Object(serde_json::Map::new());
        }
        let serde_json::Value::Object(map) = at else {
            return Err(format!("the parent of `{name}` is not a mapping"));
        };
        let slot = map
            .entry(name.to_string())
            .or_insert(serde_json::Value::Null);
        at = match index {
            Some(idx) => {
                let serde_json::Value::Array(list) = slot else {
                    return Err(format!("`{name}` is not a list"));
                };
                let len = list.len();
                list.get_mut(idx)
                    .ok_or_else(|| format!("`{name}` has {len} items, no [{idx}]"))?
            }
            None => slot,
        };
    }
    *at = value;
    Ok(())
}

/// The value at `path` (as [`set_path`] reads it), if there is one.
fn get_path<'a>(doc: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    let mut at = doc;
    for key in path.split('.') {
        let (name, index) = segment(key).ok()?;
        at = at.get(name)?;
        if let Some(idx) = index {
            at = at.get(idx)?;
        }
    }
    Some(at)
}

/// Whether `found` holds what was `asked` for: numbers as numbers (`1` is `1.0`), every key
/// asked for in a mapping (defaults may fill the others), null as null or absent.
fn kept(asked: &serde_json::Value, found: Option<&serde_json::Value>) -> bool {
    use serde_json::Value;
    match (asked, found) {
        (Value::Null, None | Some(Value::Null)) => true,
        (Value::Number(a), Some(Value::Number(b))) => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(1.0),
            _ => a == b,
        },
        (Value::Object(a), Some(Value::Object(b))) => a.iter().all(|(k, v)| kept(v, b.get(k))),
        (Value::Array(a), Some(Value::Array(b))) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| kept(x, Some(y)))
        }
        (a, Some(b)) => a == b,
        (_, None) => false,
    }
}

impl LoadedScenario {
    pub fn apply(&mut self, o: &Overrides) -> Result<()> {
        let abs = |p: &Path| -> Result<String> {
            let p = if p.is_absolute() {
                p.to_path_buf()
            } else {
                std::env::current_dir()
                    .map_err(|e| SimError::io(".", e))?
                    .join(p)
            };
            Ok(p.display().to_string())
        };
        if let Some(p) = &o.openb {
            self.scenario.workload = Workload {
                openb: Some(OpenbSpec {
                    path: abs(p)?,
                    gpu: GpuMode::default(),
                    limit: o.openb_limit,
                    shift_to_first_arrival: true,
                }),
                ..Workload::default()
            };
        }
        if let Some(p) = &o.catalog_csv {
            self.scenario.catalog.builtin = None;
            self.scenario.catalog.types.clear();
            self.scenario.catalog.csv = Some(abs(p)?);
        }
        for set in &o.sets {
            self.set(set)?;
        }
        Ok(())
    }

    /// One `--set path=value`: through the scenario's JSON form, so the typed parse checks
    /// the result and a path the scenario does not have is an error, not a silent no-op.
    fn set(&mut self, set: &str) -> Result<()> {
        let invalid = |field: &str, message: String| SimError::Invalid {
            file: format!("--set {set}"),
            field: field.to_string(),
            message,
        };
        let Some((path, text)) = set.split_once('=') else {
            return Err(invalid(set, "expected `path=value`".into()));
        };
        let path = path.trim();
        let value: serde_json::Value = serde_saphyr::from_str_with_options(text, yaml_options())
            .map_err(|e| invalid(path, format!("value `{text}` is not YAML: {e}")))?;
        let mut doc = serde_json::to_value(&self.scenario)
            .map_err(|e| SimError::Internal(format!("scenario to JSON: {e}")))?;
        set_path(&mut doc, path, value.clone()).map_err(|m| invalid(path, m))?;
        let scenario: Scenario =
            serde_json::from_value(doc).map_err(|e| invalid(path, e.to_string()))?;
        // Fields of upstream's Kubernetes types ignore unknown keys: check the value stuck.
        let back = serde_json::to_value(&scenario)
            .map_err(|e| SimError::Internal(format!("scenario to JSON: {e}")))?;
        if !kept(&value, get_path(&back, path)) {
            return Err(invalid(
                path,
                "the scenario has no such field (or does not keep this value there)".into(),
            ));
        }
        self.scenario = scenario;
        Ok(())
    }
}

/// The JSON Schema of the scenario format.
pub fn json_schema() -> serde_json::Value {
    let schema = schemars::schema_for!(Scenario);
    serde_json::to_value(&schema).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mixed() -> LoadedScenario {
        let s = crate::generators::generate("mixed", 1, Some(20)).expect("generator");
        from_value(s, "mixed")
    }

    fn with(sets: &[&str]) -> Result<LoadedScenario> {
        let mut ls = mixed();
        ls.apply(&Overrides {
            sets: sets.iter().map(|s| s.to_string()).collect(),
            ..Overrides::default()
        })?;
        Ok(ls)
    }

    /// `--set` reaches the typed scenario: a number (an integer into a float field too), a
    /// null that turns a rule off, a mapping filled with its defaults, a list item.
    #[test]
    fn set_overrides_fields_by_path() {
        let ls = with(&[
            "settings.coreDisruption.payback.evictionPodHours=1",
            "settings.coreDisruption.headroom=null",
            "settings.coreDisruption.anticipation={windowSeconds: 300}",
            "settings.batchMaxSeconds=20",
            "nodePools[0].spec.weight=7",
        ])
        .expect("valid sets");
        let d = serde_json::to_value(&ls.scenario).expect("json");
        assert_eq!(
            get_path(&d, "settings.coreDisruption.payback.evictionPodHours")
                .and_then(serde_json::Value::as_f64),
            Some(1.0)
        );
        assert!(kept(
            &serde_json::Value::Null,
            get_path(&d, "settings.coreDisruption.headroom")
        ));
        assert_eq!(
            get_path(&d, "settings.coreDisruption.anticipation.windowSeconds")
                .and_then(serde_json::Value::as_i64),
            Some(300)
        );
        assert_eq!(
            get_path(&d, "settings.batchMaxSeconds").and_then(serde_json::Value::as_i64),
            Some(20)
        );
        assert_eq!(
            get_path(&d, "nodePools[0].spec.weight").and_then(serde_json::Value::as_i64),
            Some(7)
        );
    }

    /// A misspelt path, a value of the wrong type, a missing list item or no `=` is an
    /// error naming the path, never a silent no-op.
    #[test]
    fn set_rejects_what_the_scenario_does_not_have() {
        for (set, needle) in [
            (
                "settings.coreDisruption.payback.evictionPodHour=1",
                "evictionPodHour",
            ),
            ("nodePools[0].spec.wieght=7", "wieght"),
            ("settings.batchMaxSeconds=soon", "batchMaxSeconds"),
            ("nodePools[9].spec.weight=1", "no [9]"),
            ("settings.batchMaxSeconds", "path=value"),
        ] {
            let err = with(&[set]).map(|_| ()).expect_err(set).to_string();
            assert!(err.contains(needle), "{set}: {err}");
        }
    }

    #[test]
    fn a_reader_limit_is_said_in_plain_words() {
        let mut options = yaml_options();
        if let Some(b) = options.budget.as_mut() {
            b.max_nodes = 10;
        }
        let text = "name: x\nworkload:\n  pods:\n    - {name: a, requests: {cpu: 1, memory: 1Gi}}\n    - {name: b, requests: {cpu: 1, memory: 1Gi}}\n";
        let e = serde_saphyr::from_str_with_options::<Scenario>(text, options)
            .map(|_| ())
            .expect_err("over the tiny budget");
        let msg = yaml_error(text, "x.yaml", &e).to_string();
        assert!(msg.contains("larger than the simulator reads"), "{msg}");
        assert!(msg.contains("100000 pod groups"), "{msg}");
    }
}
