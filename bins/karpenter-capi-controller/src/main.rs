//! karpenter-capi-controller: flags -> [`karpenter_capi_controller::Options`] and the two
//! clients, then [`karpenter_capi_controller::start`]. No logic lives here.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use capi_adapter::capacity_errors::CapacityErrors;
use capi_adapter::objects::capi::CapiVersion;
use clap::{Parser, ValueEnum};
use karpenter_capi_controller::{Clients, Options};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum StrategyArg {
    /// Price per unit of the binding resource decides node sizes (default).
    CostAware,
    /// Karpenter's own greedy, for comparison.
    Karpenter,
}

/// How the payback rule estimates a pod's remaining life before enough pods have ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LifetimePrior {
    /// From how long the pod's owner kind has been seen running (default).
    Window,
    /// From the pod's own age alone.
    Lindy,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// A Karpenter-compatible node autoscaler for Cluster API and OpenShift Machine API.
#[derive(Debug, Parser)]
#[command(name = "karpenter-capi-controller", version)]
struct Cli {
    /// Kubeconfig of the management cluster (MachineDeployments, MachineSets, Machines);
    /// default: the workload cluster.
    #[arg(long, env = "CLUSTER_API_KUBECONFIG")]
    cluster_api_kubeconfig: Option<PathBuf>,
    /// URL of the management cluster's API server (instead of a kubeconfig).
    #[arg(long, env = "CLUSTER_API_URL")]
    cluster_api_url: Option<String>,
    /// Bearer token for --cluster-api-url.
    #[arg(long, env = "CLUSTER_API_TOKEN", hide_env_values = true)]
    cluster_api_token: Option<String>,
    /// Base64 PEM CA bundle for --cluster-api-url.
    #[arg(long, env = "CLUSTER_API_CERTIFICATE_AUTHORITY_DATA")]
    cluster_api_certificate_authority_data: Option<String>,
    /// Do not verify the management API server's certificate (tests only).
    #[arg(long, env = "CLUSTER_API_SKIP_TLS_VERIFY")]
    cluster_api_skip_tls_verify: bool,
    /// Kubeconfig of the workload cluster; default: in-cluster or $KUBECONFIG.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Cluster API version the management cluster serves.
    #[arg(long, default_value = "v1beta2", value_parser = ["v1beta2", "v1beta1"])]
    cluster_api_version: String,
    /// Where /metrics, /healthz and /readyz are served.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_bind_address: SocketAddr,
    /// Where the probes are served (the same endpoints; 0 = only the metrics address).
    #[arg(long, default_value = "0.0.0.0:8081")]
    health_probe_bind_address: SocketAddr,
    /// Elect a leader with a Lease (run two replicas for availability).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// Namespace of the leader Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "karpenter")]
    leader_election_namespace: String,
    /// This replica's identity in the Lease.
    #[arg(long, env = "POD_NAME", default_value = "karpenter-capi")]
    identity: String,
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    #[arg(long, value_enum, default_value = "cost-aware")]
    strategy: StrategyArg,
    /// Re-plan consolidation replacements with the ILP optimiser.
    #[arg(long)]
    optimize: bool,
    /// Plan provisioning rounds that launch 5 or more nodes in at most 250 request classes
    /// with the optimiser, from the heuristic's plan (about 1 s more per such round on a
    /// 2-core machine: its budget is counted in work, so a round replays to the same plan; at
    /// most 4 s wall on a slower one; never a dearer plan). false: the heuristic alone.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    optimize_large_rounds: bool,
    /// The kube-scheduler does not follow a round's plan: the first new node up takes the
    /// head of its queue. Give the pods that would find no room then (checked with the nodes
    /// up in the plan's order) nodes of their own in the same round, instead of a second round
    /// a launch later. false: one plan as if the scheduler followed it.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    plan_for_scheduler_queue: bool,
    /// Launch each new node in the zone with the least CPU among the offerings of its
    /// instance type that its pods allow and that cost the same (as the Cluster Autoscaler's
    /// --balance-similar-node-groups). false (the default): the first such zone.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    balance_zones: bool,
    /// Close a provisioning batch after this long without a new pending pod.
    #[arg(long, default_value = "1s", value_parser = duration)]
    batch_idle_duration: Duration,
    /// Close a provisioning batch this long after it opened.
    #[arg(long, default_value = "10s", value_parser = duration)]
    batch_max_duration: Duration,
    /// Delete a NodeClaim whose Node has not registered by then.
    #[arg(long, default_value = "15m", value_parser = duration)]
    registration_timeout: Duration,
    /// After a Machine of a scalable resource fails (or gets no providerID within
    /// --machine-provider-id-timeout), leave the resource out of launches for this long
    /// (Karpenter keeps an offering that ran out of capacity out for 3m, the Cluster
    /// Autoscaler a node group for 5m at first). Shorter retries a zone or type that ran out
    /// sooner; each retry is another Machine that may fail.
    #[arg(long, default_value = "5m", value_parser = duration)]
    launch_failure_backoff: Duration,
    /// Each further failed Machine of the same resource doubles its back-off, up to this (the
    /// Cluster Autoscaler's 30m): a zone out of capacity for hours is retried every half hour,
    /// not every five minutes. The streak is forgotten 3h after a back-off ends. Set it to
    /// --launch-failure-backoff for a fixed window.
    #[arg(long, default_value = "30m", value_parser = duration)]
    launch_failure_backoff_max: Duration,
    /// A Machine still without providerID this long after its creation counts as a failed
    /// launch (an infrastructure provider that retries an out-of-capacity error instead of
    /// failing the Machine shows only this way).
    #[arg(long, default_value = "10m", value_parser = duration)]
    machine_provider_id_timeout: Duration,
    /// An error code (one word, matched as a whole word) or phrase (with spaces,
    /// case-insensitive) that, written by the infrastructure provider into a Machine still
    /// waiting for its instance, means the cloud has no capacity for it: the launch fails at
    /// once and the resource is backed off, without waiting for
    /// --machine-provider-id-timeout. Repeatable, added to the built-in EC2, Azure, GCE and
    /// OpenStack codes (InsufficientInstanceCapacity, ZonalAllocationFailed,
    /// ZONE_RESOURCE_POOL_EXHAUSTED, "no valid host was found", ...).
    #[arg(long = "capacity-error-code", value_name = "CODE")]
    capacity_error_codes: Vec<String>,
    /// Remove `karpenter.sh/unregistered` from a Node of a managed resource that no NodeClaim
    /// has claimed this long after it joined (Machines CAPI made itself: rollouts,
    /// MachineHealthCheck remediation, min size).
    #[arg(long, default_value = "2m", value_parser = duration)]
    unclaimed_node_grace: Duration,
    /// How often each NodeClaim's Machine is compared with its resource's current template
    /// for drift (each check reads three objects from the management cluster).
    #[arg(long, default_value = "5m", value_parser = duration)]
    drift_check_interval: Duration,
    /// Management-cluster namespace holding scalable resources (repeatable; default: all).
    /// Needed when the management identity has Roles in some namespaces only (OpenShift's
    /// openshift-machine-api, a HyperShift control-plane namespace).
    #[arg(
        long = "cluster-api-namespace",
        env = "CLUSTER_API_NAMESPACES",
        value_delimiter = ','
    )]
    cluster_api_namespaces: Vec<String>,
    /// How often disruption decides.
    #[arg(long, default_value = "10s", value_parser = duration)]
    disruption_interval: Duration,
    /// How long a disruption command waits before re-validation.
    #[arg(long, default_value = "15s", value_parser = duration)]
    validation_delay: Duration,
    /// How long a terminating NodeClaim keeps the disruption loop from deciding anything
    /// else; a drain a PodDisruptionBudget holds longer is decided around.
    #[arg(long, default_value = "10m", value_parser = duration)]
    disruption_busy_while_terminating: Duration,
    /// Turn consolidation, drift and expiration off.
    #[arg(long)]
    disable_disruption: bool,
    /// Consolidate only when the saving over the pods' expected remaining life pays for the
    /// evictions (false: any saving, as Karpenter; more churn).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    consolidation_payback: bool,
    /// Leave room for the busiest burst of recent pod arrivals when consolidating.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    consolidation_headroom: bool,
    /// Grow new nodes for the pods a stream already flowing is expected to bring
    /// (docs/simulator.md, rounds 2 and 24). false: each node sized for its batch alone.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    anticipation: bool,
    /// How sure anticipation is that a stream still flows at the end of the time it reserves
    /// room for (Lindy's law): 0.75 reserves for the arrivals of a third of the stream's age,
    /// 0.5 for as long again; nearer 1 grows less.
    #[arg(long, value_parser = confidence, default_value_t = 0.75)]
    anticipation_confidence: f64,
    /// Value a merge's replacement at its dearest option within this fraction of its
    /// cheapest (e.g. 0.25), so merges that save a lot are taken: cheaper clusters for more
    /// evictions (docs/simulator.md, round 5). Unset: options up to the candidates' price.
    #[arg(long, value_parser = fraction)]
    consolidation_merge_premium: Option<f64>,
    /// Replace a single node like a merge (its options bounded by the premium, 0.25 when
    /// unset) when its pods request less than this fraction of its CPU and of its memory: a
    /// node sized for pods that have left (docs/simulator.md, round 23). 0 turns it off.
    #[arg(long, value_parser = fraction, default_value_t = 0.3)]
    consolidation_underused_below: f64,
    /// Replace a single node like a merge (options bounded by the premium, 0.25 when unset)
    /// when it is the wrong shape for its pods (one of CPU and memory used 0.4 more than the
    /// other), its pods are expected to stay 4 h or more, and they fit new nodes whose
    /// cheapest options cost less than this fraction of its price: a node shaped for pods that
    /// went elsewhere (docs/simulator.md, round 33). 0 turns it off.
    #[arg(long, value_parser = fraction, default_value_t = 0.6)]
    consolidation_reshape_below: f64,
    /// What evicting one pod costs in the payback rule, as this much of the pod's price
    /// (default 15m): longer keeps pods in place at a higher cost, shorter consolidates more.
    /// Workloads answer it differently (docs/simulator.md, rounds 11 and 57).
    #[arg(long, value_parser = duration)]
    consolidation_eviction_cost: Option<Duration>,
    /// The least a pod is expected to run on where its age is beyond anything the cluster has
    /// shown (older than every pod that ended, or than the oldest of its kind before enough
    /// have ended): Lindy (a pod runs about as long again as it has) counts from when the
    /// cluster was first watched, and in a young cluster gave every pod minutes, so nothing
    /// was worth repacking (docs/simulator.md, round 58). Default: the core's, 4h. 0s: plain
    /// Lindy.
    #[arg(long, value_parser = duration)]
    consolidation_lindy_floor: Option<Duration>,
    /// A NodePool's consolidateAfter this long halves the payback rule's eviction price for its
    /// nodes (scaled by this / (this + consolidateAfter)): the wait already keeps out the churn
    /// the price guards against, and charged in full on top of a 30m wait the rule was dearer
    /// than Karpenter on most workloads (docs/simulator.md, round 35). 0s: the full price.
    #[arg(long, value_parser = duration, default_value = "5m")]
    consolidation_wait_halving: Duration,
    /// Once pods have been watched this long, a cluster that takes longer than the payback
    /// rule's 4 h cap to see as many new pods as it runs counts a repack's saving for that
    /// long instead (up to a week): its packing, and the waste in it, lasts that long
    /// (docs/simulator.md, round 36). A day, so that a quiet night does not read as a quiet
    /// cluster. 0s: the 4 h cap always.
    #[arg(long, value_parser = duration, default_value = "24h")]
    consolidation_turnover_lookback: Duration,
    /// Where more pods ended on their own over this lookback than arrived (a workload winding
    /// down), count a repack's saving towards its pods' longest remaining life instead of
    /// their median: nothing arrives to use the room it frees. Off by default: over 75
    /// simulated workloads, 1h bought up to 0.4 points of cost for 3-16% more evictions
    /// (docs/simulator.md, round 42). 0s: off.
    #[arg(long, value_parser = duration, default_value = "0s")]
    consolidation_shrink_lookback: Duration,
    /// Before enough pods have ended (a restart forgets them), how a pod's remaining life is
    /// estimated: `window` from how long its owner kind's pods have run (docs/simulator.md,
    /// round 13), `lindy` from its own age alone (recently rolled-out pods stay put longer).
    #[arg(long, value_enum, default_value_t = LifetimePrior::Window)]
    consolidation_lifetime_prior: LifetimePrior,
    /// Let consolidation move pods onto an empty node that is waiting out its NodePool's
    /// `consolidateAfter` to be deleted, as Karpenter does. Off (the default), such a node is
    /// left to go: moving pods onto it keeps it in place of the nodes a command removes,
    /// a saving on paper that can be a dearer swap (docs/simulator.md, round 34).
    #[arg(long)]
    consolidation_move_onto_empty_nodes: bool,
    /// A merge the NodePool's budget forbids at once (three nodes into one under a one-node
    /// budget) may go in steps: the first launches the replacement for the whole group and
    /// drains what the budget allows, and at most this many nodes follow, one loop at a time,
    /// as plain deletes onto it. Never more disruptions at once than the budget allows
    /// (docs/simulator.md, round 37). 0: merges only as the budget allows at once.
    #[arg(long, default_value_t = 4)]
    consolidation_staged_merge_followers: usize,
    /// A node running a pod its workload recreated for an eviction this recently is not a
    /// consolidation candidate: the command that evicted the pod planned where it went, and
    /// moving it again minutes later undoes the plan (docs/simulator.md, round 39). Evictions
    /// are remembered for 30 minutes, so longer acts as 30m. 0s: off.
    #[arg(long, value_parser = duration, default_value = "5m")]
    consolidation_settle: Duration,
    /// At most this many single-node consolidation simulations per disruption loop (the rest
    /// wait for the next loop); unset: every candidate whose inputs changed.
    #[arg(long)]
    consolidation_max_simulations: Option<usize>,
    /// Manage only NodePools with these labels (`k=v,k2=v2`), e.g. to split a cluster
    /// between two controllers.
    #[arg(long, value_parser = labels)]
    nodepool_selector: Option<BTreeMap<String, String>>,
    /// Write every decision here as a replayable JSON file (`karpenter-capi-sim replay`).
    #[arg(long)]
    replay_dir: Option<PathBuf>,
    /// How many replay records to keep (the newest; each holds a whole cluster snapshot).
    /// They are served at `/replay` on the metrics address.
    #[arg(long, default_value_t = 500)]
    replay_keep: usize,
}

fn labels(s: &str) -> Result<BTreeMap<String, String>, String> {
    s.split(',')
        .filter(|kv| !kv.trim().is_empty())
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => Err(format!("`{kv}` is not key=value")),
        })
        .collect()
}

/// A non-negative finite fraction (`0.25`).
fn fraction(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 => Ok(f),
        _ => Err(format!("`{s}` is not a non-negative number such as 0.25")),
    }
}

/// A probability above 0 and below 1.
fn confidence(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(f) if f > 0.0 && f < 1.0 => Ok(f),
        _ => Err(format!(
            "`{s}` is not a number between 0 and 1 such as 0.75"
        )),
    }
}

/// A Go duration (`90s`, `1h30m`) that is not negative: `Duration` cannot hold one, and
/// converting it would panic at start-up instead of naming the flag.
fn duration(s: &str) -> Result<Duration, String> {
    let secs =
        provisioner_core::disruption::duration::parse_go_duration(s).map_err(|e| e.to_string())?;
    if secs.is_finite() && secs >= 0.0 {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(format!(
            "`{s}` is negative; give a duration such as 30s or 1h"
        ))
    }
}

/// Whole seconds of `d`, saturating (a duration flag far beyond any sensible window).
fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// The cloud provider's settings from the management-cluster flags.
fn cloud_config(cli: &Cli) -> karpenter_capi_controller::cloudprovider::Config {
    karpenter_capi_controller::cloudprovider::Config {
        namespaces: (!cli.cluster_api_namespaces.is_empty())
            .then(|| cli.cluster_api_namespaces.clone()),
        backoff_window_secs: secs(cli.launch_failure_backoff),
        backoff_max_window_secs: secs(cli.launch_failure_backoff_max),
        provider_id_timeout_secs: secs(cli.machine_provider_id_timeout),
        capacity_errors: CapacityErrors::with_extra(&cli.capacity_error_codes),
        capi_version: if cli.cluster_api_version == "v1beta1" {
            CapiVersion::V1Beta1
        } else {
            CapiVersion::V1Beta2
        },
        ..Default::default()
    }
}

async fn workload_client(cli: &Cli) -> Result<Client> {
    let config = match &cli.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?
        }
        None => Config::infer()
            .await
            .context("no workload cluster config")?,
    };
    Ok(Client::try_from(config)?)
}

async fn management_client(cli: &Cli, workload: &Client) -> Result<Client> {
    if let Some(path) = &cli.cluster_api_kubeconfig {
        let kc = Kubeconfig::read_from(path)
            .with_context(|| format!("reading --cluster-api-kubeconfig {}", path.display()))?;
        let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
        return Ok(Client::try_from(config)?);
    }
    if let Some(url) = &cli.cluster_api_url {
        // An in-memory kubeconfig, so kube parses the CA and token as it does from a file.
        let kc = Kubeconfig {
            clusters: vec![kube::config::NamedCluster {
                name: "management".into(),
                cluster: Some(kube::config::Cluster {
                    server: Some(url.clone()),
                    certificate_authority_data: cli.cluster_api_certificate_authority_data.clone(),
                    insecure_skip_tls_verify: Some(cli.cluster_api_skip_tls_verify),
                    ..Default::default()
                }),
                other: Default::default(),
            }],
            auth_infos: vec![kube::config::NamedAuthInfo {
                name: "management".into(),
                auth_info: Some(kube::config::AuthInfo {
                    token: cli.cluster_api_token.clone().map(Into::into),
                    ..Default::default()
                }),
                other: Default::default(),
            }],
            contexts: vec![kube::config::NamedContext {
                name: "management".into(),
                context: Some(kube::config::Context {
                    cluster: "management".into(),
                    user: Some("management".into()),
                    ..Default::default()
                }),
                other: Default::default(),
            }],
            current_context: Some("management".into()),
            ..Default::default()
        };
        let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .context("--cluster-api-url and its token/CA flags")?;
        return Ok(Client::try_from(config)?);
    }
    if cli.cluster_api_token.is_some() || cli.cluster_api_certificate_authority_data.is_some() {
        bail!(
            "--cluster-api-token and --cluster-api-certificate-authority-data need --cluster-api-url"
        );
    }
    Ok(workload.clone())
}

#[tokio::main]
async fn main() -> Result<()> {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    match cli.log_format {
        LogFormat::Text => tracing_subscriber::fmt().with_env_filter(filter).init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init(),
    }
    let workload = workload_client(&cli).await?;
    let management = management_client(&cli, &workload).await?;
    let options = Options {
        cloud: cloud_config(&cli),
        strategy: match cli.strategy {
            StrategyArg::CostAware => provisioner_core::Strategy::CostAware,
            StrategyArg::Karpenter => provisioner_core::Strategy::KarpenterBaseline,
        },
        optimize: cli.optimize,
        optimize_large_rounds: cli.optimize_large_rounds,
        plan_for_scheduler_queue: cli.plan_for_scheduler_queue,
        balance_zones: cli.balance_zones,
        batch_idle: cli.batch_idle_duration,
        batch_max: cli.batch_max_duration,
        registration_timeout: cli.registration_timeout,
        unclaimed_node_grace: cli.unclaimed_node_grace,
        drift_check_interval: cli.drift_check_interval,
        disruption_interval: cli.disruption_interval,
        validation_delay: cli.validation_delay,
        busy_while_terminating: cli.disruption_busy_while_terminating,
        disruption: !cli.disable_disruption,
        consolidation_payback: cli.consolidation_payback,
        consolidation_headroom: cli.consolidation_headroom,
        anticipation: cli
            .anticipation
            .then(|| provisioner_core::anticipate::Anticipation {
                confidence: cli.anticipation_confidence,
                ..Default::default()
            }),
        consolidation_merge_premium: cli.consolidation_merge_premium,
        consolidation_underused_below: Some(cli.consolidation_underused_below).filter(|f| *f > 0.0),
        consolidation_reshape_below: Some(cli.consolidation_reshape_below).filter(|f| *f > 0.0),
        consolidation_eviction_cost: cli.consolidation_eviction_cost,
        consolidation_lindy_floor: cli.consolidation_lindy_floor,
        consolidation_wait_halving: Some(cli.consolidation_wait_halving).filter(|d| !d.is_zero()),
        consolidation_turnover_lookback: Some(cli.consolidation_turnover_lookback)
            .filter(|d| !d.is_zero()),
        consolidation_shrink_lookback: Some(cli.consolidation_shrink_lookback)
            .filter(|d| !d.is_zero()),
        consolidation_window_prior: cli.consolidation_lifetime_prior == LifetimePrior::Window,
        consolidation_move_onto_empty_nodes: cli.consolidation_move_onto_empty_nodes,
        consolidation_staged_merge_followers: cli.consolidation_staged_merge_followers,
        consolidation_settle: cli.consolidation_settle,
        consolidation_max_simulations: cli.consolidation_max_simulations,
        replay_dir: cli.replay_dir.clone(),
        replay_keep: cli.replay_keep,
        leader_elect: cli.leader_elect,
        leader_election_namespace: cli.leader_election_namespace.clone(),
        identity: cli.identity.clone(),
        nodepool_selector: cli.nodepool_selector.clone(),
        ..Options::default()
    };
    let mut addresses = vec![cli.metrics_bind_address];
    if cli.health_probe_bind_address.port() != 0
        && cli.health_probe_bind_address != cli.metrics_bind_address
    {
        addresses.push(cli.health_probe_bind_address);
    }
    let running = karpenter_capi_controller::start(
        Clients {
            workload,
            management,
        },
        options,
        &addresses,
    )
    .await
    .context("starting the controller")?;
    tracing::info!(addresses = ?running.addresses, "serving metrics and probes");
    tokio::signal::ctrl_c().await?;
    tracing::info!("stopping");
    running.stop();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line: the binary's name, then `flags`.
    fn argv<'a>(flags: &[&'a str]) -> Vec<&'a str> {
        let mut v = vec!["karpenter-capi-controller"];
        v.extend_from_slice(flags);
        v
    }

    /// `flags` parsed, which must succeed.
    fn parse(flags: &[&str]) -> Cli {
        Cli::try_parse_from(argv(flags)).expect("parses")
    }

    #[test]
    fn a_fraction_is_a_non_negative_finite_number() {
        assert_eq!(fraction("0.25"), Ok(0.25));
        assert_eq!(fraction(" 0 "), Ok(0.0));
        for bad in ["-0.1", "NaN", "inf", "a quarter", ""] {
            assert!(fraction(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_negative_duration_is_an_error_not_a_panic() {
        assert_eq!(duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        let err = duration("-1s").expect_err("negative");
        assert!(err.contains("negative"), "{err}");
        assert!(Cli::try_parse_from(argv(&["--batch-idle-duration", "-1s"])).is_err());
    }

    #[test]
    fn the_launch_failure_flags_reach_the_cloud_provider() {
        let c = cloud_config(&parse(&[]));
        assert_eq!(
            (
                c.backoff_window_secs,
                c.backoff_max_window_secs,
                c.provider_id_timeout_secs
            ),
            (300, 1800, 600)
        );
        assert_eq!(c.namespaces, None);
        let c = cloud_config(&parse(&[
            "--launch-failure-backoff",
            "3m",
            "--launch-failure-backoff-max",
            "1h",
            "--machine-provider-id-timeout",
            "20m",
            "--cluster-api-namespace",
            "a,b",
        ]));
        assert_eq!(
            (
                c.backoff_window_secs,
                c.backoff_max_window_secs,
                c.provider_id_timeout_secs
            ),
            (180, 3600, 1200)
        );
        assert_eq!(c.namespaces, Some(vec!["a".to_string(), "b".to_string()]));
        assert!(Cli::try_parse_from(argv(&["--launch-failure-backoff", "-1m"])).is_err());
        assert_eq!(c.capacity_errors, CapacityErrors::default());
        let c = cloud_config(&parse(&[
            "--capacity-error-code",
            "StockoutInZone",
            "--capacity-error-code",
            "out of hosts",
        ]));
        assert_eq!(
            c.capacity_errors.find("quota: StockoutInZone"),
            Some("StockoutInZone")
        );
        assert_eq!(
            c.capacity_errors.find("Out of hosts in rack"),
            Some("out of hosts")
        );
        assert_eq!(
            c.capacity_errors.find("InsufficientInstanceCapacity"),
            Some("InsufficientInstanceCapacity")
        );
    }

    #[test]
    fn the_lindy_floor_flag_parses_as_a_duration() {
        assert_eq!(parse(&[]).consolidation_lindy_floor, None);
        let cli = parse(&["--consolidation-lindy-floor", "0s"]);
        assert_eq!(cli.consolidation_lindy_floor, Some(Duration::ZERO));
        let cli = parse(&["--consolidation-lindy-floor", "2h"]);
        assert_eq!(
            cli.consolidation_lindy_floor,
            Some(Duration::from_secs(7200))
        );
    }

    #[test]
    fn the_eviction_cost_flag_parses_as_a_duration() {
        let cli = parse(&["--consolidation-eviction-cost", "1h30m"]);
        assert_eq!(
            cli.consolidation_eviction_cost,
            Some(Duration::from_secs(5400))
        );
        let cli = parse(&[]);
        assert_eq!(cli.consolidation_eviction_cost, None);
        assert!(
            Cli::try_parse_from(argv(&["--consolidation-eviction-cost", "two hours"])).is_err()
        );
    }

    #[test]
    fn the_lifetime_prior_flag_parses() {
        let cli = parse(&[]);
        assert_eq!(cli.consolidation_lifetime_prior, LifetimePrior::Window);
        let cli = parse(&["--consolidation-lifetime-prior", "lindy"]);
        assert_eq!(cli.consolidation_lifetime_prior, LifetimePrior::Lindy);
        assert!(Cli::try_parse_from(argv(&["--consolidation-lifetime-prior", "pareto"])).is_err());
    }

    #[test]
    fn the_anticipation_flags_parse() {
        let cli = parse(&[]);
        assert!(cli.anticipation);
        assert_eq!(cli.anticipation_confidence, 0.75);
        let cli = parse(&["--anticipation=false", "--anticipation-confidence", "0.9"]);
        assert!(!cli.anticipation);
        assert_eq!(cli.anticipation_confidence, 0.9);
        for bad in ["0", "1", "1.5", "-0.2", "much"] {
            assert!(
                Cli::try_parse_from(argv(&["--anticipation-confidence", bad])).is_err(),
                "{bad} accepted"
            );
        }
    }

    #[test]
    fn the_merge_premium_flag_reaches_the_options() {
        let cli = parse(&["--consolidation-merge-premium", "0.25"]);
        assert_eq!(cli.consolidation_merge_premium, Some(0.25));
        let cli = parse(&[]);
        assert_eq!(cli.consolidation_merge_premium, None);
        assert_eq!(cli.consolidation_underused_below, 0.3);
        let cli = parse(&["--consolidation-underused-below", "0"]);
        assert_eq!(cli.consolidation_underused_below, 0.0);
        assert_eq!(cli.consolidation_reshape_below, 0.6);
        let cli = parse(&["--consolidation-reshape-below", "0"]);
        assert_eq!(cli.consolidation_reshape_below, 0.0);
        assert!(!cli.consolidation_move_onto_empty_nodes);
        let cli = parse(&["--consolidation-move-onto-empty-nodes"]);
        assert!(cli.consolidation_move_onto_empty_nodes);
        let cli = parse(&[]);
        assert_eq!(cli.consolidation_wait_halving, Duration::from_secs(300));
        let cli = parse(&["--consolidation-wait-halving", "0s"]);
        assert_eq!(cli.consolidation_wait_halving, Duration::ZERO);
        let cli = parse(&[]);
        assert_eq!(
            cli.consolidation_turnover_lookback,
            Duration::from_secs(86_400)
        );
        let cli = parse(&["--consolidation-turnover-lookback", "0s"]);
        assert_eq!(cli.consolidation_turnover_lookback, Duration::ZERO);
        assert_eq!(parse(&[]).consolidation_shrink_lookback, Duration::ZERO);
        let cli = parse(&["--consolidation-shrink-lookback", "1h"]);
        assert_eq!(cli.consolidation_shrink_lookback, Duration::from_secs(3600));
        assert_eq!(parse(&[]).consolidation_staged_merge_followers, 4);
        assert_eq!(parse(&[]).consolidation_settle, Duration::from_secs(300));
        let cli = parse(&["--consolidation-settle", "0s"]);
        assert_eq!(cli.consolidation_settle, Duration::ZERO);
        let cli = parse(&["--consolidation-staged-merge-followers", "0"]);
        assert_eq!(cli.consolidation_staged_merge_followers, 0);
        assert!(
            Cli::try_parse_from(argv(&["--consolidation-staged-merge-followers", "-1"])).is_err()
        );
        assert!(Cli::try_parse_from(argv(&["--consolidation-merge-premium", "-1"])).is_err());
    }
}
