//! Shared setup for the controller tests: a controller instance scoped to one test's
//! NodePool (`Options::nodepool_selector`, so tests sharing the API server never act on each
//! other's objects), a NodeClass and NodePool selecting the test's MachineDeployment, and
//! the parts of a cluster this environment lacks, played by the test: CAPI's MachineSet
//! controller (Machines for replicas), the kubelet (a Ready Node), the kube-scheduler
//! (PodScheduled=False, bindings).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use capi_adapter::keys;
use capi_adapter::objects::capi;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_api::NodeClaim;
use karpenter_capi_controller::{Clients, Options, Running};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::adapter_support::V;

/// The label that scopes everything of one test.
pub const SCOPE: &str = "karpenter-capi.test/scope";

/// Polls `f` every 100 ms until it returns `Some`, or panics after `timeout` with `what`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Fast options for tests, scoped to `scope`.
pub fn options(scope: &str) -> Options {
    let mut o = Options {
        batch_idle: Duration::from_millis(200),
        batch_max: Duration::from_secs(2),
        disruption_interval: Duration::from_secs(1),
        validation_delay: Duration::from_secs(1),
        leader_elect: false,
        identity: format!("test-{scope}"),
        nodepool_selector: Some([(SCOPE.to_string(), scope.to_string())].into()),
        ..Options::default()
    };
    o.cloud.bind_wait = Duration::from_secs(2);
    o.cloud.poll_interval = Duration::from_millis(200);
    o
}

pub async fn start(client: &Client, options: Options) -> Running {
    start_two(client, client, options).await
}

/// The controller with a separate management cluster (MachineDeployments, Machines).
pub async fn start_two(client: &Client, management: &Client, options: Options) -> Running {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("karpenter_capi_controller=info")
            }),
        )
        .with_test_writer()
        .try_init();
    karpenter_capi_controller::start(
        Clients {
            workload: client.clone(),
            management: management.clone(),
        },
        options,
        &[],
    )
    .await
    .expect("start controller")
}

/// A NodeClass selecting resources labelled with the scope, and a NodePool using it.
pub async fn nodeclass_and_pool(client: &Client, scope: &str, disruption: serde_json::Value) {
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
    let ncs: Api<karpenter_api::nodeclass::ClusterAPINodeClass> = Api::all(client.clone());
    ncs.create(
        &PostParams::default(),
        &serde_json::from_value(nc).expect("nodeclass json"),
    )
    .await
    .expect("create nodeclass");
    let nps: Api<karpenter_api::NodePool> = Api::all(client.clone());
    nps.create(
        &PostParams::default(),
        &serde_json::from_value(np).expect("nodepool json"),
    )
    .await
    .expect("create nodepool");
}

pub const TEMPLATE_GROUP: &str = "infrastructure.controller-test.karpenter-capi.dev";
const GROUP: &str = TEMPLATE_GROUP;
const KIND: &str = "ControllerTestMachineTemplate";
const PLURAL: &str = "controllertestmachinetemplates";

/// A test-only infrastructure template kind (CAPI requires every MachineDeployment to name
/// one; the real kinds come with providers we do not install). Applied idempotently.
async fn ensure_template_crd(client: &Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{PLURAL}.{GROUP}"), "labels": {"cluster.x-k8s.io/v1beta2": "v1beta1"}},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "plural": PLURAL, "singular": "controllertestmachinetemplate", "listKind": format!("{KIND}List")},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1beta1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .expect("CRD");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        &format!("{PLURAL}.{GROUP}"),
        &PatchParams::apply("controller-tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("apply CRD");
    eventually(
        Duration::from_secs(10),
        "template kind discoverable",
        || async {
            kube::discovery::group(client, GROUP)
                .await
                .ok()
                .and_then(|g| g.recommended_kind(KIND))
                .map(|_| ())
        },
    )
    .await;
}

/// Labels a MachineDeployment with the scope so the test's NodeClass selects it, and points
/// it at an (empty) infrastructure template: its capacity comes from the annotations.
pub async fn scope_md(client: &Client, ns: &str, md: &str, scope: &str) {
    ensure_template_crd(client).await;
    let gvk = GroupVersionKind::gvk(GROUP, "v1beta1", KIND);
    let ar = ApiResource::from_gvk_with_plural(&gvk, PLURAL);
    let templates: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1beta1"), "kind": KIND,
        "metadata": {"name": md},
        "spec": {"template": {"spec": {}}}
    }))
    .expect("template");
    templates
        .create(&PostParams::default(), &obj)
        .await
        .expect("create template");
    Api::<capi::MachineDeployment>::namespaced_with(client.clone(), ns, &V)
        .patch(
            md,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"labels": {SCOPE: scope}},
                "spec": {"template": {"spec": {"infrastructureRef": {"apiGroup": GROUP, "kind": KIND, "name": md}}}}
            })),
        )
        .await
        .expect("label MachineDeployment");
}

/// A pod the kube-scheduler gave up on, selecting the scope's nodes.
pub async fn unschedulable_pod(client: &Client, ns: &str, name: &str, scope: &str, cpu: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeSelector": {SCOPE: scope},
            "containers": [{"name": "c", "image": "registry.invalid/pause", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]
        }
    }))
    .expect("pod json");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/0 nodes are available"}
        ]}})),
    )
    .await
    .expect("mark pod unschedulable");
}

/// Binds a pod as the kube-scheduler would, and marks it Running as a kubelet would.
pub async fn bind(client: &Client, ns: &str, pod: &str, node: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let body = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": pod},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}
    });
    pods.create_subresource::<_, serde_json::Value>("binding", pod, &PostParams::default(), &body)
        .await
        .expect("bind pod");
    pods.patch_status(
        pod,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}})),
    )
    .await
    .expect("pod running");
}

pub async fn force_delete_pod(client: &Client, ns: &str, pod: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let _ = pods
        .delete(pod, &DeleteParams::default().grace_period(0))
        .await;
}

/// Machines of a MachineDeployment.
pub async fn machines(client: &Client, ns: &str, md: &str) -> Vec<capi::Machine> {
    Api::<capi::Machine>::namespaced_with(client.clone(), ns, &V)
        .list(&ListParams::default().labels(&format!("{}={md}", keys::capi::DEPLOYMENT_NAME)))
        .await
        .expect("list machines")
        .items
}

/// Plays CAPI's MachineSet controller once: creates Machines up to replicas, and deletes the
/// ones annotated for deletion when replicas are below the count.
pub async fn play_machineset(client: &Client, ns: &str, md: &str) {
    let id = capi_adapter::ResourceId::new(capi_adapter::ResourceKind::MachineDeployment, ns, md);
    let want = crate::adapter_support::replicas(client, &id).await;
    let ms = machines(client, ns, md).await;
    let live: Vec<_> = ms
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .collect();
    let api = Api::<capi::Machine>::namespaced_with(client.clone(), ns, &V);
    if (live.len() as i32) < want {
        for i in live.len() as i32..want {
            let name = format!("{md}-m{}-{}", i, testenv::unique_name("x"));
            crate::adapter_support::create_capi_machine(
                client,
                ns,
                md,
                &name,
                &format!("{md}-set"),
            )
            .await;
        }
    } else if (live.len() as i32) > want {
        let mut victims: Vec<_> = live
            .iter()
            .filter(|m| m.annotations().contains_key(keys::capi::DELETE_MACHINE))
            .collect();
        victims.truncate(live.len() - want as usize);
        for m in victims {
            let _ = api.delete(&m.name_any(), &DeleteParams::default()).await;
        }
    }
}

/// Plays the infrastructure provider and kubelet: gives a Machine a providerID and creates
/// its Ready Node (with the unregistered taint new nodes must carry).
pub async fn provision(client: &Client, ns: &str, machine: &str, cpu: &str) -> (String, String) {
    provision_in(client, client, ns, machine, cpu).await
}

/// [`provision`] with the Machine in `management` and the Node in `client`'s cluster.
pub async fn provision_in(
    management: &Client,
    client: &Client,
    ns: &str,
    machine: &str,
    cpu: &str,
) -> (String, String) {
    let pid = format!("test://{ns}/{machine}");
    crate::adapter_support::set_capi_provider_id(
        management,
        &capi_adapter::MachineKey {
            namespace: ns.into(),
            name: machine.into(),
        },
        &pid,
    )
    .await;
    let node_name = testenv::unique_name("node");
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": node_name, "labels": {"kubernetes.io/hostname": node_name}},
        "spec": {"providerID": pid, "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]}
    }))
    .expect("node json");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .expect("create node");
    nodes
        .patch_status(
            &node_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"},
                "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test"}]
            }})),
        )
        .await
        .expect("node status");
    clear_not_ready_taint(&nodes, &node_name).await;
    (node_name, pid)
}

/// Plays the node lifecycle controller these tests do not run: the apiserver's
/// TaintNodesByCondition admission puts `node.kubernetes.io/not-ready` on every new Node and
/// only the controller manager takes it off once the node is Ready. Read-modify-write with the
/// resourceVersion, because the autoscaler may be taking the unregistered taint off meanwhile.
pub async fn clear_not_ready_taint(nodes: &Api<Node>, name: &str) {
    for _ in 0..50 {
        let mut node = nodes.get(name).await.expect("get node");
        let spec = node.spec.get_or_insert_with(Default::default);
        let before = spec.taints.as_ref().map_or(0, Vec::len);
        if let Some(taints) = spec.taints.as_mut() {
            taints.retain(|t| t.key != "node.kubernetes.io/not-ready");
        }
        if spec.taints.as_ref().map_or(0, Vec::len) == before {
            return;
        }
        match nodes.replace(name, &PostParams::default(), &node).await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => panic!("remove not-ready from {name}: {e}"),
        }
    }
    panic!("remove not-ready from {name}: conflicts kept coming");
}

/// NodeClaims of the scope's NodePool.
pub async fn claims(client: &Client, scope: &str) -> Vec<NodeClaim> {
    Api::<NodeClaim>::all(client.clone())
        .list(&ListParams::default().labels(&format!("karpenter.sh/nodepool={scope}")))
        .await
        .expect("list nodeclaims")
        .items
}

pub fn condition(c: &NodeClaim, t: &str) -> bool {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|x| x.type_ == t && x.status == "True"))
}

pub fn md_annotations(cpu: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        (keys::cas::CPU, cpu),
        (keys::cas::EPHEMERAL_DISK, "100Gi"),
        (keys::capi::MIN_SIZE, "0"),
        (keys::capi::MAX_SIZE, "5"),
    ]
}

pub fn labels_of(n: &Node) -> BTreeMap<String, String> {
    n.labels().clone()
}
