//! `cargo xtask demo`: the first thing a newcomer runs.
//!
//! It builds the controller binary, starts the end-to-end environment (`e2e-env up`: the API
//! server, kube-scheduler, kube-controller-manager, the Cluster API manager, kwok and the fake
//! infrastructure provider; built once per machine) unless one already runs, creates a sample
//! cluster (a CAPI Cluster, three MachineDeployments of different shapes with capacity and
//! price, a ClusterAPINodeClass and a NodePool), starts `karpenter-capi-controller` as a child
//! process and the admin web UI (`karpenter-capi ui`), and drives a Deployment that grows and
//! shrinks through a fixed cycle. The terminal shows, every two seconds: the phase, the nodes
//! (shape, pods), nodes launched and removed so far, cost per hour against what the core would
//! plan for the same pods from scratch and its lower bound, pending and running pods, and the
//! UI address and commands to look further. Ctrl-C (or
//! `--for <seconds>`) stops the controller and what the demo created; the environment is
//! stopped too when the demo started it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kcapi_fake_infra::fixtures::{ClusterFixture, MachineDeploymentSpec, Shape};
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

/// Label that ties the demo's NodePool, NodeClass, MachineDeployments and nodes together.
const SCOPE: &str = "karpenter-capi.demo/scope";
/// Upstream's membership label: only scalable resources carrying it take part.
const MEMBER: &str = "node.cluster.x-k8s.io/karpenter-member";
const MIN_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
const MAX_SIZE: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";
const APP: &str = "demo-app";

/// The sample shapes: name, CPU, memory, price per hour.
const SHAPES: [(&str, &str, &str, f64); 3] = [
    ("small", "2", "4Gi", 0.10),
    ("medium", "4", "8Gi", 0.17),
    ("large", "8", "16Gi", 0.36),
];

/// The workload cycle: replicas of 500m / 512Mi pods and how long each phase lasts.
const PHASES: [(i32, u64); 6] = [(10, 45), (40, 60), (20, 60), (4, 60), (28, 45), (0, 60)];

pub async fn run(duration: Option<u64>) -> Result<ExitCode> {
    let root = crate::repo_root();
    eprintln!("demo: building karpenter-capi-controller ...");
    let controller = crate::cargobin::build(
        &root,
        "karpenter-capi-controller-bin",
        "karpenter-capi-controller",
    )
    .await?;
    eprintln!("demo: building karpenter-capi (the admin CLI and web UI) ...");
    let cli = crate::cargobin::build(&root, "karpenter-capi", "karpenter-capi").await?;

    let env_dir = crate::e2e::shared_dir();
    let started_env = !crate::e2e::is_running(&env_dir);
    if started_env {
        eprintln!(
            "demo: starting the e2e environment (first run on a machine builds the Go binaries: ~40 min on 2 cores) ..."
        );
    }
    let kubeconfig = if started_env {
        crate::e2e::up(&env_dir)?
    } else {
        let info: Value =
            serde_json::from_str(&std::fs::read_to_string(env_dir.join("env.json"))?)?;
        PathBuf::from(
            info["kubeconfig"]
                .as_str()
                .context("env.json names no kubeconfig")?,
        )
    };
    let result = demo(&controller, &cli, &kubeconfig, &env_dir, duration).await;
    if started_env {
        eprintln!("demo: stopping the e2e environment ...");
        crate::e2e::down(&env_dir)?;
    } else {
        eprintln!("demo: the e2e environment was already running; left running");
    }
    result.map(|()| ExitCode::SUCCESS)
}

/// What the demo created, to remove it again.
struct Created {
    client: Client,
    ns: String,
}

async fn demo(
    controller: &Path,
    cli: &Path,
    kubeconfig: &Path,
    env_dir: &Path,
    duration: Option<u64>,
) -> Result<()> {
    let client = testenv::client_for(kubeconfig).await;
    let ns = testenv::namespace(&client, "demo").await;
    let created = Created {
        client: client.clone(),
        ns: ns.clone(),
    };
    let result = setup_and_watch(
        Binaries { controller, cli },
        kubeconfig,
        env_dir,
        &client,
        &ns,
        duration,
    )
    .await;
    eprintln!("demo: removing the demo's objects ...");
    cleanup(&created).await;
    result
}

struct Binaries<'a> {
    controller: &'a Path,
    cli: &'a Path,
}

async fn setup_and_watch(
    bins: Binaries<'_>,
    kubeconfig: &Path,
    env_dir: &Path,
    client: &Client,
    ns: &str,
    duration: Option<u64>,
) -> Result<()> {
    eprintln!("demo: creating the sample cluster in namespace {ns} ...");
    let cluster = ClusterFixture::create(client, kubeconfig, ns, "demo")
        .await
        .map_err(|e| anyhow::anyhow!("cluster: {e}"))?;
    for (name, cpu, memory, price) in SHAPES {
        let mut spec = MachineDeploymentSpec::new(name, Shape::new(cpu, memory));
        spec.price_per_hour = Some(format!("{price}"));
        spec.annotations = BTreeMap::from([
            (MIN_SIZE.to_string(), "0".to_string()),
            (MAX_SIZE.to_string(), "10".to_string()),
        ]);
        spec.labels = BTreeMap::from([
            (MEMBER.to_string(), String::new()),
            (SCOPE.to_string(), ns.to_string()),
        ]);
        cluster
            .machine_deployment(&spec)
            .await
            .map_err(|e| anyhow::anyhow!("machine deployment {name}: {e}"))?;
    }
    create_nodepool(client, ns).await?;

    let log_path = env_dir.join(format!("{ns}-controller.log"));
    let log = std::fs::File::create(&log_path)?;
    let metrics_port = crate::controlplane::free_port()?;
    let mut child = tokio::process::Command::new(bins.controller)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--leader-elect=false",
            &format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
            "--health-probe-bind-address=127.0.0.1:0",
            &format!("--nodepool-selector={SCOPE}={ns}"),
            "--disruption-interval=5s",
            "--validation-delay=5s",
        ])
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .context("starting karpenter-capi-controller")?;
    let ui_port = crate::controlplane::free_port()?;
    let ui_log_path = env_dir.join(format!("{ns}-ui.log"));
    let ui_log = std::fs::File::create(&ui_log_path)?;
    let mut ui = tokio::process::Command::new(bins.cli)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["ui", "--listen", &format!("127.0.0.1:{ui_port}")])
        .stdout(Stdio::from(ui_log.try_clone()?))
        .stderr(Stdio::from(ui_log))
        .kill_on_drop(true)
        .spawn()
        .context("starting karpenter-capi ui")?;
    let ui_url = ui_address(&ui_log_path).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    deployments
        .create(&PostParams::default(), &workload(ns)?)
        .await?;

    let info = Info {
        kubeconfig: kubeconfig.to_path_buf(),
        ns: ns.to_string(),
        log: log_path,
        metrics_port,
        ui: ui_url.unwrap_or_else(|| {
            format!(
                "http://127.0.0.1:{ui_port}/ (login link in {})",
                ui_log_path.display()
            )
        }),
    };
    let watch = watch(client, ns, &deployments, &info, duration);
    let outcome = tokio::select! {
        r = watch => r,
        _ = tokio::signal::ctrl_c() => Ok(()),
        status = child.wait() => Err(anyhow::anyhow!(
            "the controller exited ({:?}); see {}", status.ok(), info.log.display()
        )),
    };
    let _ = child.start_kill();
    let _ = child.wait().await;
    let _ = ui.start_kill();
    let _ = ui.wait().await;
    outcome
}

/// The UI prints its address with a one-time login token; wait up to 15 s for it.
async fn ui_address(log: &Path) -> Option<String> {
    for _ in 0..75 {
        if let Ok(text) = std::fs::read_to_string(log)
            && let Some(url) = text
                .lines()
                .find_map(|l| l.strip_prefix("karpenter-capi UI: open "))
        {
            return Some(url.trim().to_string());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

struct Info {
    kubeconfig: PathBuf,
    ns: String,
    log: PathBuf,
    metrics_port: u16,
    ui: String,
}

async fn create_nodepool(client: &Client, ns: &str) -> Result<()> {
    let nodeclass: karpenter_api::nodeclass::ClusterAPINodeClass = serde_json::from_value(json!({
        "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1",
        "kind": "ClusterAPINodeClass",
        "metadata": {"name": ns},
        "spec": {"scalableResourceSelector": {"matchLabels": {SCOPE: ns}}}
    }))?;
    let nodepool: karpenter_api::NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": ns, "labels": {SCOPE: ns}},
        "spec": {
            "template": {
                "metadata": {"labels": {SCOPE: ns}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": ns},
                    "requirements": []
                }
            },
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "10s"}
        }
    }))?;
    Api::<karpenter_api::nodeclass::ClusterAPINodeClass>::all(client.clone())
        .create(&PostParams::default(), &nodeclass)
        .await?;
    Api::<karpenter_api::NodePool>::all(client.clone())
        .create(&PostParams::default(), &nodepool)
        .await?;
    Ok(())
}

fn workload(ns: &str) -> Result<Deployment> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": APP},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": APP}},
            "template": {
                "metadata": {"labels": {"app": APP}},
                "spec": {
                    "nodeSelector": {SCOPE: ns},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{
                        "name": "app",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                    }],
                },
            },
        },
    }))?)
}

/// Drives the phases and redraws the terminal until the duration (if any) ends.
async fn watch(
    client: &Client,
    ns: &str,
    deployments: &Api<Deployment>,
    info: &Info,
    duration: Option<u64>,
) -> Result<()> {
    let start = Instant::now();
    let prices: BTreeMap<&str, f64> = SHAPES.iter().map(|(n, _, _, p)| (*n, *p)).collect();
    let mut known: BTreeSet<String> = BTreeSet::new();
    let (mut launched, mut removed) = (0usize, 0usize);
    let mut events: VecDeque<String> = VecDeque::new();
    let mut phase = usize::MAX;
    let mut phase_started = Instant::now();
    let cycle: u64 = PHASES.iter().map(|(_, s)| s).sum();
    let mut ideal: Option<(usize, Ideal)> = None;
    loop {
        let elapsed = start.elapsed().as_secs();
        if duration.is_some_and(|d| elapsed >= d) {
            return Ok(());
        }
        // Which phase of the cycle we are in.
        let mut t = elapsed % cycle;
        let mut now_phase = 0;
        for (i, (_, secs)) in PHASES.iter().enumerate() {
            if t < *secs {
                now_phase = i;
                break;
            }
            t -= secs;
        }
        if now_phase != phase {
            phase = now_phase;
            phase_started = Instant::now();
            let replicas = PHASES[phase].0;
            deployments
                .patch_scale(
                    APP,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"spec": {"replicas": replicas}})),
                )
                .await?;
            push(
                &mut events,
                start,
                format!("workload scaled to {replicas} pods"),
            );
        }

        let nodes: Vec<Node> = Api::<Node>::all(client.clone())
            .list(
                &ListParams::default()
                    .labels(&format!("{}={ns}", kcapi_fake_infra::NODE_CLUSTER_LABEL)),
            )
            .await?
            .items
            .into_iter()
            .filter(|n| {
                !n.labels()
                    .contains_key("node-role.kubernetes.io/control-plane")
            })
            .collect();
        let pods: Vec<Pod> = Api::<Pod>::namespaced(client.clone(), ns)
            .list(&ListParams::default().labels(&format!("app={APP}")))
            .await?
            .items;
        let names: BTreeSet<String> = nodes.iter().map(|n| n.name_any()).collect();
        for n in names.difference(&known) {
            launched += 1;
            push(&mut events, start, format!("node launched: {n}"));
        }
        for n in known.difference(&names) {
            removed += 1;
            push(&mut events, start, format!("node removed:  {n}"));
        }
        known = names;
        let replicas = machine_deployment_replicas(client, ns).await;
        // The optimiser takes up to its budget (300 ms): plan again only when the count moves.
        if ideal.as_ref().is_none_or(|(n, _)| *n != pods.len()) {
            ideal = Some((pods.len(), from_scratch(pods.len())));
        }
        draw(&Frame {
            info,
            elapsed,
            phase,
            phase_left: PHASES[phase]
                .1
                .saturating_sub(phase_started.elapsed().as_secs()),
            nodes: &nodes,
            pods: &pods,
            prices: &prices,
            launched,
            removed,
            replicas: &replicas,
            events: &events,
            ideal: ideal.as_ref().map(|(_, i)| i).expect("set above"),
        });
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

fn push(events: &mut VecDeque<String>, start: Instant, e: String) {
    events.push_back(format!("[{:>4}s] {e}", start.elapsed().as_secs()));
    while events.len() > 8 {
        events.pop_front();
    }
}

async fn machine_deployment_replicas(client: &Client, ns: &str) -> BTreeMap<String, i64> {
    let ar = kube::api::ApiResource::from_gvk(&GroupVersionKind::gvk(
        "cluster.x-k8s.io",
        kcapi_fake_infra::fixtures::CAPI_VERSION,
        "MachineDeployment",
    ));
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .map(|md| {
                    let r = md
                        .data
                        .pointer("/spec/replicas")
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                    (md.name_any(), r)
                })
                .collect()
        })
        .unwrap_or_default()
}

struct Frame<'a> {
    info: &'a Info,
    elapsed: u64,
    phase: usize,
    phase_left: u64,
    nodes: &'a [Node],
    pods: &'a [Pod],
    prices: &'a BTreeMap<&'a str, f64>,
    launched: usize,
    removed: usize,
    replicas: &'a BTreeMap<String, i64>,
    events: &'a VecDeque<String>,
    ideal: &'a Ideal,
}

/// The node's shape: the controller labels registered nodes with the instance type
/// `<namespace>.<MachineDeployment>`; before that, the provider's label is the name.
fn shape_of(n: &Node) -> String {
    n.labels()
        .get("node.kubernetes.io/instance-type")
        .map(|t| t.rsplit('.').next().unwrap_or(t).to_string())
        .unwrap_or_else(|| "?".into())
}

fn draw(f: &Frame<'_>) {
    let running = f
        .pods
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .count();
    let pending = f
        .pods
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending"))
        .count();
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for p in f.pods {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone()) {
            *per_node.entry(n).or_default() += 1;
        }
    }
    let cost: f64 = f
        .nodes
        .iter()
        .filter_map(|n| f.prices.get(shape_of(n).as_str()))
        .sum();
    let ideal = f.ideal;
    let mut out = String::new();
    out.push_str("\x1b[2J\x1b[H");
    out.push_str(&format!(
        "karpenter-capi demo  ({}s)   phase {}/{}: workload {} pods (500m CPU, 512Mi each), next change in {}s\n\n",
        f.elapsed,
        f.phase + 1,
        PHASES.len(),
        PHASES[f.phase].0,
        f.phase_left
    ));
    out.push_str(&format!(
        "pods: {running} running, {pending} pending      nodes: {} now, {} launched, {} removed\n",
        f.nodes.len(),
        f.launched,
        f.removed
    ));
    out.push_str(&format!(
        "cost: {} now;  the core's plan for these {} pods from scratch {}, lower bound {}\n",
        per_hour(cost),
        f.pods.len(),
        per_hour(ideal.plan),
        ideal.bound.map_or("unknown".to_string(), per_hour),
    ));
    out.push_str("MachineDeployments (replicas @ price/h): ");
    for (name, _, _, price) in SHAPES {
        out.push_str(&format!(
            "{name} {} @ {price:.2}   ",
            f.replicas.get(name).copied().unwrap_or(0)
        ));
    }
    out.push_str("\n\nNODE                                               SHAPE    PODS  READY\n");
    for n in f.nodes {
        let ready = n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let name = n.name_any();
        out.push_str(&format!(
            "{:<50} {:<8} {:>4}  {}\n",
            name,
            shape_of(n),
            per_node.get(&name).copied().unwrap_or(0),
            if ready { "yes" } else { "no" }
        ));
    }
    out.push_str("\nrecent:\n");
    for e in f.events {
        out.push_str(&format!("  {e}\n"));
    }
    out.push_str(&format!(
        "\nweb UI: {}\nlook further (another terminal):\n  export KUBECONFIG={}\n  kubectl get nodepools,nodeclaims,nodes\n  kubectl -n {ns} get machinedeployments,machines,pods -o wide\n  kubectl get clusterapinodeclass {ns} -o yaml\n  curl -s 127.0.0.1:{}/metrics | grep karpenter_\n  controller log: {}\nCtrl-C stops the controller and removes what the demo created.\n",
        f.info.ui,
        f.info.kubeconfig.display(),
        f.info.metrics_port,
        f.info.log.display(),
        ns = f.info.ns,
    ));
    print!("{out}");
}

/// What the core would launch for `pods` workload pods on an empty cluster of the demo's
/// shapes, and its lower bound: the yardstick for the cost the controller reaches by launching
/// and consolidating as the workload changes (kwok nodes reserve nothing, as here).
struct Ideal {
    plan: f64,
    bound: Option<f64>,
}

fn from_scratch(pods: usize) -> Ideal {
    use provisioner_core as core;
    const GI: i64 = 1 << 30;
    let types = SHAPES
        .iter()
        .map(|(name, cpu, memory, price)| {
            let cpu: i64 = cpu.parse().unwrap_or(0);
            let mem: i64 = memory.trim_end_matches("Gi").parse().unwrap_or(0);
            core::InstanceType::new(
                name,
                cpu * 1000,
                mem * GI,
                110,
                vec![core::Offering::new(
                    "demo",
                    core::CapacityType::OnDemand,
                    *price,
                )],
            )
        })
        .collect();
    let snapshot = core::Snapshot {
        pods: (0..pods)
            .map(|i| core::Pod::new("demo", &format!("p{i}"), 500, 512 << 20))
            .map(std::sync::Arc::new)
            .collect(),
        nodepools: vec![core::NodePool::new("demo", 0)],
        instance_types: types,
        ..Default::default()
    };
    // The optimiser plans here: it is what computes the bound (column generation).
    let optimizer = core::optimize::Optimizer::new(core::optimize::OptimizerConfig::default());
    let mut state = core::ClusterState::new(&snapshot);
    let r = core::schedule_with(
        &mut state,
        &snapshot.pods,
        &core::SchedulingOptions::default(),
        &optimizer,
    );
    Ideal {
        plan: r.new_node_cost_per_hour + 0.0,
        bound: r.cost_lower_bound,
    }
}

/// Deletes the NodePool, NodeClass and namespace (CAPI deletes the Machines and their
/// Nodes with the Cluster); Nodes left behind are deleted too.
async fn cleanup(c: &Created) {
    let dp = DeleteParams::default();
    let _ = Api::<Deployment>::namespaced(c.client.clone(), &c.ns)
        .delete(APP, &dp)
        .await;
    let _ = Api::<karpenter_api::NodePool>::all(c.client.clone())
        .delete(&c.ns, &dp)
        .await;
    let _ = Api::<karpenter_api::nodeclass::ClusterAPINodeClass>::all(c.client.clone())
        .delete(&c.ns, &dp)
        .await;
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(c.client.clone())
        .delete(&c.ns, &dp)
        .await;
    let nodes = Api::<Node>::all(c.client.clone());
    if let Ok(list) = nodes
        .list(&ListParams::default().labels(&format!(
            "{}={}",
            kcapi_fake_infra::NODE_CLUSTER_LABEL,
            c.ns
        )))
        .await
    {
        for n in list.items {
            // Our termination finalizer would wait for a controller that is gone.
            let _ = nodes
                .patch(
                    &n.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
                )
                .await;
            let _ = nodes.delete(&n.name_any(), &dp).await;
        }
    }
}

/// `x` per hour with two decimals. An empty sum of `f64` is `-0.0`, which printed as
/// "-0.00/h" before the first node.
fn per_hour(x: f64) -> String {
    format!("{:.2}/h", x + 0.0)
}

#[cfg(test)]
mod tests {
    use super::{from_scratch, per_hour};

    #[test]
    fn an_empty_total_prints_as_zero() {
        let empty: f64 = std::iter::empty::<f64>().sum();
        assert_eq!(per_hour(empty), "0.00/h");
        assert_eq!(per_hour(0.276), "0.28/h");
    }

    #[test]
    fn the_yardstick_is_a_plan_above_its_bound() {
        let none = from_scratch(0);
        assert_eq!(none.plan, 0.0);
        let ten = from_scratch(10);
        assert!(ten.plan > 0.0, "ten pods need a node");
        let bound = ten.bound.expect("a bound for launchable pods");
        assert!(
            bound > 0.0 && bound <= ten.plan + 1e-9,
            "{bound} vs {}",
            ten.plan
        );
        // 5 CPU of pods: at least the cheapest price per CPU (0.0425/h on `medium`) times 5.
        assert!(bound >= 5.0 * 0.0425 - 1e-9, "{bound}");
    }
}
