//! End-to-end scenarios live in `tests/`; see the crate description. This library holds what
//! they share: a [`Scenario`] (a namespace, a CAPI Cluster on the fake infrastructure, a
//! ClusterAPINodeClass and NodePool of its own, and our controller started in-process and
//! scoped to that NodePool with `Options::nodepool_selector`, so scenarios sharing one API
//! server never act on each other's objects), and workload helpers. Nothing here plays CAPI,
//! the scheduler or a kubelet: the environment runs the real ones.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use capi_adapter::keys;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_api::NodeClaim;
use karpenter_capi_controller::{Clients, Options, Running};
use kcapi_fake_infra::fixtures::{
    ClusterFixture, MachineDeploymentFixture, MachineDeploymentSpec, Shape, capi_resource,
};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

pub use kcapi_fake_infra::fixtures::wait_for;

/// The label that scopes a scenario's NodePool (and, through the NodePool's template, its
/// nodes; the workloads select it).
pub const SCOPE: &str = "karpenter-capi.e2e/scope";

/// One scenario's world.
#[allow(missing_debug_implementations)]
pub struct Scenario {
    /// The workload cluster: pods, nodes, NodePools, NodeClaims.
    pub client: Client,
    /// The management cluster: the Cluster, MachineDeployments, Machines. The same API server
    /// as `client` unless made by [`Scenario::new_two_clusters`].
    pub mgmt: Client,
    /// The workload cluster's admin kubeconfig (each controller start makes fresh clients
    /// from it, see [`start_controller`]).
    workload_kubeconfig: std::path::PathBuf,
    pub ns: String,
    pub cluster: ClusterFixture,
    started: Instant,
}

/// One MachineDeployment shape for [`Scenario::md`].
#[derive(Debug)]
pub struct Md<'a> {
    pub name: &'a str,
    pub cpu: &'a str,
    pub memory: &'a str,
    pub price: &'a str,
    pub max: u32,
    /// Annotations on the MachineDeployment on top of price and min/max.
    pub annotations: &'a [(&'a str, &'a str)],
    /// The fake provider's knobs, on the template.
    pub template_annotations: &'a [(&'a str, &'a str)],
}

impl<'a> Md<'a> {
    pub fn new(name: &'a str, cpu: &'a str, memory: &'a str, price: &'a str) -> Self {
        Md {
            name,
            cpu,
            memory,
            price,
            max: 20,
            annotations: &[],
            template_annotations: &[],
        }
    }
}

impl Scenario {
    /// A namespace and a Cluster whose control plane CAPI considers initialized.
    pub async fn new(prefix: &str) -> Scenario {
        init_tracing();
        let env = testenv::e2e_env();
        let client = testenv::e2e_client().await;
        let ns = testenv::namespace(&client, prefix).await;
        let cluster = ClusterFixture::create(&client, &env.kubeconfig, &ns, "c")
            .await
            .expect("cluster fixture");
        Scenario {
            mgmt: client.clone(),
            workload_kubeconfig: env.kubeconfig.clone(),
            client,
            ns,
            cluster,
            started: Instant::now(),
        }
    }

    /// As [`Scenario::new`], but as real CAPI users run it: the Cluster, its
    /// MachineDeployments and Machines in the environment's management API server, and its
    /// workload cluster (nodes, pods, Karpenter's objects) in the environment's second API
    /// server, reached by CAPI and the fake provider only through the Cluster's kubeconfig
    /// Secret. The namespace has the same name in both.
    pub async fn new_two_clusters(prefix: &str) -> Scenario {
        init_tracing();
        let env = testenv::e2e_env();
        let workload_kubeconfig = env
            .workload_kubeconfig
            .clone()
            .expect("the e2e environment names no workload_kubeconfig: restart it (`cargo xtask e2e-env down`, then `up`)");
        let mgmt = testenv::e2e_client().await;
        let client = testenv::client_for(&workload_kubeconfig).await;
        let ns = testenv::namespace(&mgmt, prefix).await;
        let namespace: k8s_openapi::api::core::v1::Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
        Api::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .expect("namespace in the workload cluster");
        let cluster = ClusterFixture::create(&mgmt, &workload_kubeconfig, &ns, "c")
            .await
            .expect("cluster fixture");
        Scenario {
            client,
            mgmt,
            workload_kubeconfig,
            ns,
            cluster,
            started: Instant::now(),
        }
    }

    /// Seconds since the scenario's cluster was ready.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// The scope of this scenario (its NodePool, NodeClass and selector value).
    pub fn scope(&self) -> &str {
        &self.ns
    }

    /// A MachineDeployment at 0 replicas on a fake template advertising the shape
    /// (`status.capacity`), with our price, CAPI's min/max annotations, upstream's
    /// membership label and the scope label the NodeClass selects.
    pub async fn md(&self, md: &Md<'_>) -> MachineDeploymentFixture {
        let mut spec = MachineDeploymentSpec::new(md.name, Shape::new(md.cpu, md.memory));
        spec.price_per_hour = Some(md.price.to_string());
        spec.annotations = md
            .annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        spec.annotations
            .insert(keys::capi::MIN_SIZE.into(), "0".into());
        spec.annotations
            .insert(keys::capi::MAX_SIZE.into(), md.max.to_string());
        spec.template_annotations = md
            .template_annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        spec.labels = BTreeMap::from([
            (keys::capi::KARPENTER_MEMBER.to_string(), String::new()),
            (SCOPE.to_string(), self.ns.clone()),
        ]);
        spec.node_labels = BTreeMap::from([(
            "node.kubernetes.io/instance-type".to_string(),
            md.name.to_string(),
        )]);
        self.cluster
            .machine_deployment(&spec)
            .await
            .expect("machine deployment")
    }

    /// The ClusterAPINodeClass selecting this scenario's MachineDeployments and a NodePool
    /// over it with the given `spec.disruption`.
    pub async fn nodepool(&self, disruption: Value) {
        let scope = self.scope();
        let nc = json!({
            "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1",
            "kind": "ClusterAPINodeClass",
            "metadata": {"name": scope},
            "spec": {"scalableResourceSelector": {"matchLabels": {SCOPE: scope}}}
        });
        let np = json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": scope, "labels": {SCOPE: scope}},
            "spec": {
                "template": {
                    "metadata": {"labels": {SCOPE: scope}},
                    "spec": {
                        "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": scope},
                        "requirements": []
                    }
                },
                "disruption": disruption
            }
        });
        Api::<karpenter_api::nodeclass::ClusterAPINodeClass>::all(self.client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(nc).expect("nodeclass"),
            )
            .await
            .expect("create nodeclass");
        Api::<karpenter_api::NodePool>::all(self.client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(np).expect("nodepool"),
            )
            .await
            .expect("create nodepool");
    }

    /// Options scoped to this scenario, with short loops (a test has minutes, not hours).
    pub fn options(&self) -> Options {
        scoped_options(&self.ns)
    }

    /// Starts our controller in-process with clients of its own (see [`start_controller`]),
    /// for this scenario's workload and management clusters.
    pub async fn start(&self, options: Options) -> Running {
        karpenter_capi_controller::start(
            Clients {
                workload: testenv::client_for(&self.workload_kubeconfig).await,
                management: testenv::e2e_client().await,
            },
            options,
            &[],
        )
        .await
        .expect("start controller")
    }

    /// A Deployment of `replicas` pause pods requesting `cpu`/`memory`, selecting this
    /// scenario's nodes. `pod` is merged into the pod template (annotations, affinity...).
    pub async fn deployment(&self, name: &str, replicas: i32, cpu: &str, memory: &str) {
        self.deployment_with(name, replicas, cpu, memory, json!({}))
            .await;
    }

    pub async fn deployment_with(
        &self,
        name: &str,
        replicas: i32,
        cpu: &str,
        memory: &str,
        pod_annotations: Value,
    ) {
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}, "annotations": pod_annotations},
                    "spec": {
                        "nodeSelector": {SCOPE: self.ns},
                        "terminationGracePeriodSeconds": 0,
                        "containers": [{
                            "name": "app",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }],
                    },
                },
            },
        }))
        .expect("deployment");
        Api::<Deployment>::namespaced(self.client.clone(), &self.ns)
            .create(&PostParams::default(), &d)
            .await
            .expect("create deployment");
    }

    pub async fn scale_deployment(&self, name: &str, replicas: i32) {
        Api::<Deployment>::namespaced(self.client.clone(), &self.ns)
            .patch_scale(
                name,
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"replicas": replicas}})),
            )
            .await
            .expect("scale deployment");
    }

    pub async fn delete_deployment(&self, name: &str) {
        Api::<Deployment>::namespaced(self.client.clone(), &self.ns)
            .delete(name, &Default::default())
            .await
            .expect("delete deployment");
    }

    /// Pods of app `app` not being deleted.
    pub async fn pods(&self, app: &str) -> Vec<Pod> {
        Api::<Pod>::namespaced(self.client.clone(), &self.ns)
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .expect("list pods")
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect()
    }

    /// Waits until `n` pods of `app` run (bound and Running); returns their nodes.
    pub async fn wait_running(&self, app: &str, n: usize, timeout_secs: u64) -> BTreeSet<String> {
        // The outer timeout also covers an API call that never returns.
        tokio::time::timeout(
            Duration::from_secs(timeout_secs + 30),
            wait_for(
                &format!("{n} pods of {app} Running"),
                timeout_secs,
                || async {
                    let pods = self.pods(app).await;
                    Ok(pods.len() == n && pods.iter().all(running))
                },
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("{n} pods of {app} Running: an API call hung"))
        .expect("pods running");
        self.pods(app).await.iter().filter_map(node_of).collect()
    }

    /// NodeClaims of this scenario's NodePool.
    pub async fn claims(&self) -> Vec<NodeClaim> {
        Api::<NodeClaim>::all(self.client.clone())
            .list(&ListParams::default().labels(&format!("karpenter.sh/nodepool={}", self.ns)))
            .await
            .expect("list nodeclaims")
            .items
    }

    /// Nodes of this scenario's Cluster (the fake provider labels them), not being deleted.
    pub async fn nodes(&self) -> Vec<Node> {
        let (k, v) = self.cluster.node_selector();
        Api::<Node>::all(self.client.clone())
            .list(&ListParams::default().labels(&format!("{k}={v},{SCOPE}")))
            .await
            .expect("list nodes")
            .items
            .into_iter()
            .filter(|n| n.metadata.deletion_timestamp.is_none())
            .collect()
    }

    /// `spec.replicas` of a MachineDeployment.
    pub async fn replicas(&self, md: &str) -> i64 {
        let obj = self
            .cluster
            .capi("MachineDeployment")
            .get(md)
            .await
            .expect("get machinedeployment");
        obj.data
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0)
    }

    /// Every worker Machine of the Cluster (not the control plane's).
    pub async fn machines(&self) -> Vec<DynamicObject> {
        Api::<DynamicObject>::namespaced_with(
            self.mgmt.clone(),
            &self.ns,
            &capi_resource("Machine"),
        )
        .list(&ListParams::default().labels(keys::capi::DEPLOYMENT_NAME))
        .await
        .expect("list machines")
        .items
    }

    /// Hourly cost of the live Nodes, from the prices of the MachineDeployments they came
    /// from: the controller labels a node with its instance type, `<namespace>.<name>` of
    /// the MachineDeployment.
    pub fn cost(nodes: &[Node], prices: &BTreeMap<&str, f64>) -> f64 {
        nodes
            .iter()
            .filter_map(|n| n.labels().get("node.kubernetes.io/instance-type"))
            .filter_map(|t| prices.get(t.rsplit('.').next().unwrap_or(t)))
            .sum()
    }
}

/// Options managing only the NodePools labelled [`SCOPE`]`=scope`, with short loops (a test
/// has minutes, not hours).
pub fn scoped_options(scope: &str) -> Options {
    let mut o = Options {
        batch_idle: Duration::from_millis(500),
        batch_max: Duration::from_secs(3),
        disruption_interval: Duration::from_secs(2),
        validation_delay: Duration::from_secs(2),
        leader_elect: false,
        identity: format!("e2e-{scope}"),
        nodepool_selector: Some([(SCOPE.to_string(), scope.to_string())].into()),
        ..Options::default()
    };
    o.cloud.poll_interval = Duration::from_millis(300);
    // A failing scenario is explained by the core's inputs: `KCAPI_E2E_REPLAY_DIR` keeps
    // every round's replay record, one folder per scenario.
    if let Some(dir) = std::env::var_os("KCAPI_E2E_REPLAY_DIR") {
        o.replay_dir = Some(std::path::PathBuf::from(dir).join(scope));
    }
    o
}

/// Starts our controller in-process (one API server is management and workload cluster),
/// with a client of its own as a separate process would have: a controller stopped
/// mid-request (scenario 4) must not leave the test's client or its successor's in a state a
/// real restart would not share.
pub async fn start_controller(options: Options) -> Running {
    let client = testenv::e2e_client().await;
    karpenter_capi_controller::start(
        Clients {
            workload: client.clone(),
            management: client,
        },
        options,
        &[],
    )
    .await
    .expect("start controller")
}

pub fn running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") && node_of(p).is_some()
}

pub fn node_of(p: &Pod) -> Option<String> {
    p.spec.as_ref().and_then(|s| s.node_name.clone())
}

pub fn condition(c: &NodeClaim, t: &str) -> bool {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|x| x.type_ == t && x.status == "True"))
}

/// The controller's logs go to the test output (`RUST_LOG` overrides).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("karpenter_capi_controller=info")
            }),
        )
        .with_test_writer()
        .try_init();
}

/// Prints one line the CI log and the docs quote: `timing: <scenario> <what>`.
pub fn report(scenario: &str, what: &str) {
    eprintln!("timing: {scenario}: {what}");
}
