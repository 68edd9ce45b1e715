//! `snapshot`, `explain` and `status` against the real test control plane: a NodeClass that
//! selects one MachineDeployment of this test, a NodePool on it, a Node of its shape with a
//! pod bound, and pending pods that need a launch or cannot fit any shape. The snapshot is
//! then loaded and run by the simulator, as `karpenter-capi-sim run` does.

#![allow(clippy::unwrap_used)]

mod support;

use capi_adapter::keys;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_api::{ClusterAPINodeClass, NodePool};
use karpenter_capi_admin::explain::{self, Decision};
use karpenter_capi_admin::live::{self, Live};
use karpenter_capi_admin::{scenario, status};
use karpenter_capi_simulator::run::{RunOptions, run};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::*;

const ZONE: &str = "zone-live";

async fn create<K>(api: &Api<K>, v: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(v).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap()
}

fn pod(ns: &str, name: &str, cpu: &str, node: Option<&str>) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {
            "nodeName": node,
            "nodeSelector": {"karpenter.sh/nodepool": ns},
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]
        }
    })
}

/// Narrows a read to what this test created (the control plane is shared with other tests,
/// whose NodePools and pods must not change this test's answers).
fn only_ours(mut l: Live, ns: &str, node: &str) -> Live {
    l.pods
        .retain(|p| p.metadata.namespace.as_deref() == Some(ns));
    l.pdbs
        .retain(|p| p.metadata.namespace.as_deref() == Some(ns));
    l.nodes.retain(|n| n.metadata.name.as_deref() == Some(node));
    l.nodepools
        .retain(|p| p.metadata.name.as_deref() == Some(ns));
    l.nodeclasses
        .retain(|p| p.metadata.name.as_deref() == Some(ns));
    l.nodeclaims.clear();
    l.catalogs.by_nodeclass.retain(|k, _| k == ns);
    l.catalogs.errors.clear();
    l
}

#[tokio::test]
async fn snapshot_explain_and_status_on_a_live_cluster() {
    let (client, ns, clusters) = setup("live").await;
    ensure_template_crd(&client).await;
    create_template(
        &client,
        &ns,
        "bare",
        json!({"spec": {"template": {"spec": {}}}}),
    )
    .await;
    create_md(
        &client,
        &ns,
        "small",
        &[
            (keys::capi::KARPENTER_MEMBER, ""),
            ("live-test", ns.as_str()),
        ],
        &[
            (keys::cas::CPU, "2"),
            (keys::cas::MEMORY, "8Gi"),
            (
                keys::cas::LABELS,
                &format!("topology.kubernetes.io/zone={ZONE}"),
            ),
            (keys::ours::PRICE_PER_HOUR, "0.1"),
            (keys::capi::MAX_SIZE, "5"),
        ],
        "bare",
    )
    .await;
    create::<ClusterAPINodeClass>(
        &Api::all(client.clone()),
        json!({"apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1", "kind": "ClusterAPINodeClass",
               "metadata": {"name": ns},
               "spec": {"scalableResourceSelector": {"matchLabels": {"live-test": ns}}}}),
    )
    .await;
    create::<NodePool>(
        &Api::all(client.clone()),
        json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": ns},
               "spec": {"template": {"spec": {
                   "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": ns},
                   "requirements": []}},
                 "limits": {"cpu": "100"}}}),
    )
    .await;

    // The shape's name as the controller's catalog code derives it.
    let first = live::read(&clusters).await.unwrap();
    let cat = first
        .catalogs
        .by_nodeclass
        .get(&ns)
        .expect("our NodeClass has a catalog");
    assert_eq!(cat.instance_types.len(), 1, "{:?}", cat.problems);
    let shape = cat.instance_types[0].name.clone();

    let node_name = format!("{ns}-node");
    let nodes: Api<Node> = Api::all(client.clone());
    create::<Node>(
        &nodes,
        json!({"apiVersion": "v1", "kind": "Node",
               "metadata": {"name": node_name, "labels": {
                   "node.kubernetes.io/instance-type": shape,
                   "topology.kubernetes.io/zone": ZONE,
                   "karpenter.sh/nodepool": ns,
                   "kubernetes.io/hostname": node_name}}}),
    )
    .await;
    nodes
        .patch_status(
            &node_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                "allocatable": {"cpu": "1900m", "memory": "7Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
                                "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    create::<Pod>(&pods, pod(&ns, "web", "500m", Some(&node_name))).await;
    create::<Pod>(&pods, pod(&ns, "big", "1500m", None)).await;
    create::<Pod>(&pods, pod(&ns, "huge", "64", None)).await;
    create::<PodDisruptionBudget>(
        &Api::namespaced(client.clone(), &ns),
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "web", "namespace": ns},
               "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
    )
    .await;
    create::<Event>(
        &Api::namespaced(client.clone(), &ns),
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
               "metadata": {"name": "nominated", "namespace": ns},
               "eventTime": k8s_openapi::jiff::Timestamp::now().to_string(),
               "reportingController": "karpenter-capi", "reportingInstance": "test",
               "action": "Provision", "reason": "Nominated", "type": "Normal",
               "note": "Pod should schedule on: nodeclaim/x",
               "regarding": {"kind": "Pod", "namespace": ns, "name": "big"}}),
    )
    .await;

    // explain: the bound pod's node is too full for `big`, a new node of our shape fits it.
    let e = explain::explain(&clusters, &format!("{ns}/big"))
        .await
        .unwrap();
    let on_node = e.nodes.iter().find(|n| n.node == node_name).unwrap();
    assert!(!on_node.fits);
    assert!(
        on_node
            .reasons
            .iter()
            .any(|r| r.contains("insufficient cpu")),
        "{:?}",
        on_node.reasons
    );
    let s = e.shapes.iter().find(|s| s.instance_type == shape).unwrap();
    assert!(s.fits, "{s:?}");
    match &e.decision {
        Decision::Launch {
            nodepool,
            instance_type,
            zone,
            price,
            ..
        } => {
            assert_eq!(nodepool, &ns);
            assert_eq!(instance_type, &shape);
            assert_eq!(zone, ZONE);
            assert!((price - 0.1).abs() < 1e-9);
        }
        d => panic!("expected a launch, got {d:?}"),
    }
    // ... `huge` fits nothing: too big for the shape, and the core says why.
    let e = explain::explain(&clusters, &format!("{ns}/huge"))
        .await
        .unwrap();
    let s = e.shapes.iter().find(|s| s.instance_type == shape).unwrap();
    assert!(s.reason.as_deref().unwrap().contains("too small"), "{s:?}");
    assert!(
        matches!(&e.decision, Decision::Unschedulable { reason } if reason.contains("64 vCPU")),
        "{:?}",
        e.decision
    );
    // ... the bound pod is bound; an unknown pod is bad input.
    let e = explain::explain(&clusters, &format!("{ns}/web"))
        .await
        .unwrap();
    assert_eq!(
        e.decision,
        Decision::Bound {
            node: node_name.clone()
        }
    );
    assert!(
        explain::explain(&clusters, &format!("{ns}/nope"))
            .await
            .is_err()
    );

    // status: our NodePool, the node's price, both pending pods with the core's outcome,
    // our event.
    let st = status::status(&clusters).await.unwrap();
    let np = st.nodepools.iter().find(|p| p.name == ns).unwrap();
    assert_eq!(np.limits.get("cpu").map(String::as_str), Some("100"));
    let n = st.nodes.iter().find(|n| n.name == node_name).unwrap();
    assert!((n.price_per_hour - 0.1).abs() < 1e-9, "{n:?}");
    assert_eq!(n.pods, 1);
    let big = st
        .pending
        .iter()
        .find(|p| p.pod == format!("{ns}/big"))
        .unwrap();
    assert!(big.schedulable && big.outcome.contains(&shape), "{big:?}");
    let huge = st
        .pending
        .iter()
        .find(|p| p.pod == format!("{ns}/huge"))
        .unwrap();
    assert!(!huge.schedulable, "{huge:?}");
    assert!(
        st.events
            .iter()
            .any(|e| e.reason == "Nominated" && e.object == format!("Pod {ns}/big")),
        "{:?}",
        st.events
    );
    assert!(st.gap.cost_per_hour >= 0.1 - 1e-9, "{:?}", st.gap);

    // snapshot -> files -> the simulator loads and runs them.
    let l = only_ours(live::read(&clusters).await.unwrap(), &ns, &node_name);
    let files = scenario::render(&l, "cluster.yaml").unwrap();
    assert_eq!((files.pods, files.nodes, files.instance_types), (3, 1, 1));
    let dir = std::env::temp_dir().join(format!("kcapi-snapshot-{ns}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("scenario.yaml"), &files.scenario).unwrap();
    std::fs::write(dir.join("cluster.yaml"), &files.cluster).unwrap();
    let loaded = karpenter_capi_simulator::scenario::load(&dir.join("scenario.yaml")).unwrap();
    assert_eq!(loaded.scenario.catalog.types[0].name, shape);
    assert_eq!(loaded.scenario.node_pools.len(), 1);
    // The budget comes along and selects the bound pod only.
    let world = karpenter_capi_simulator::world::compile(&loaded, 0).unwrap();
    assert_eq!(world.pdbs.len(), 1, "{}", files.cluster);
    let selected: Vec<&str> = world
        .arrivals
        .iter()
        .filter(|a| world.pdbs[0].selects(&a.pod))
        .map(|a| a.pod.name.as_str())
        .collect();
    assert_eq!(selected, vec!["web"]);
    let report = run(
        &loaded,
        &RunOptions {
            strategies: vec!["cost-aware".into()],
            seeds: 1,
        },
    )
    .unwrap();
    let summary = &report.runs[0].summary;
    assert_eq!(summary.pods_total, 3, "{:?}", report.problems);
    // web runs on the existing node, big gets a new node of our shape, huge never fits.
    assert_eq!(
        summary.pods_scheduled, 2,
        "{:?} {:?}\n{}",
        report.runs[0].unschedulable_reasons, report.problems, files.scenario
    );
    assert_eq!(summary.pods_never_scheduled, 1, "{summary:?}");
    assert!(summary.nodes_launched >= 1, "{summary:?}");
    std::fs::remove_dir_all(&dir).unwrap();

    // Cluster-scoped objects outlive the namespace: remove them for the other tests.
    let dp = kube::api::DeleteParams::default();
    nodes.delete(&node_name, &dp).await.unwrap();
    Api::<NodePool>::all(client.clone())
        .delete(&ns, &dp)
        .await
        .unwrap();
    Api::<ClusterAPINodeClass>::all(client.clone())
        .delete(&ns, &dp)
        .await
        .unwrap();
}
