//! The pod watch learns how long pods ran before they ended on their own, against the real
//! API server: a deleted running pod, a deleted pending pod and a finished pod are endings;
//! a pod deleted from a node Karpenter is disrupting (a drain's eviction) is not, and neither
//! is a pod evicted through the Eviction API from a node nobody drains. Those two are recorded
//! as evictions instead (anticipation nets their replacements out); the endings are not.

mod adapter_support;
mod controller_support;

use std::time::Duration;

use controller_support::eventually;
use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_capi_controller::state::ClusterState;
use karpenter_capi_controller::tasks::Tasks;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

const T: Duration = Duration::from_secs(60);

async fn node(client: &kube::Client, name: &str, taints: serde_json::Value) {
    let n: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name},
        "spec": {"taints": taints}
    }))
    .expect("node");
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &n)
        .await
        .expect("create node");
}

/// A pod owned by a Job when `name` is "job" (lifetimes are learnt per owner kind).
async fn pod(client: &kube::Client, ns: &str, name: &str, node: Option<&str>) -> String {
    let owners = if name == "job" {
        json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "batch",
                "uid": "00000000-0000-0000-0000-000000000002", "controller": true}])
    } else {
        json!([])
    };
    let p: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "ownerReferences": owners},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}
    }))
    .expect("pod");
    let p = Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &p)
        .await
        .expect("create pod");
    p.uid().expect("uid")
}

async fn force_delete(client: &kube::Client, ns: &str, name: &str) {
    Api::<Pod>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::default().grace_period(0))
        .await
        .expect("delete pod");
}

#[tokio::test]
async fn pods_that_end_on_their_own_are_learnt_and_evictions_are_not() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "ctl-life").await;
    let tasks = Tasks::default();
    let state = ClusterState::start(&client, &tasks);
    assert!(state.wait_synced(T).await, "stores synced");

    let (ok, drained) = (format!("{ns}-ok"), format!("{ns}-drained"));
    node(&client, &ok, json!([])).await;
    node(
        &client,
        &drained,
        json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]),
    )
    .await;
    let runs = pod(&client, &ns, "runs", Some(&ok)).await;
    let evicted = pod(&client, &ns, "evicted", Some(&drained)).await;
    let job = pod(&client, &ns, "job", Some(&ok)).await;
    let pending = pod(&client, &ns, "pending", None).await;
    let via_api = pod(&client, &ns, "via-api", Some(&ok)).await;
    eventually(T, "the stores see the pods and nodes", || async {
        let pods = state.pods.state();
        let seen = |n: &str| pods.iter().any(|p| p.namespace() == ns && p.name() == n);
        let nodes = state.nodes.state();
        (["runs", "evicted", "job", "pending", "via-api"]
            .iter()
            .all(|n| seen(n))
            && nodes.iter().any(|n| n.name_any() == drained))
        .then_some(())
    })
    .await;
    assert_eq!(state.lifetimes.ended(&runs), None, "nothing ended yet");

    // The Eviction API marks the pod DisruptionTarget and, with no kubelet to finish the
    // graceful deletion, the test removes it.
    Api::<Pod>::namespaced(client.clone(), &ns)
        .evict("via-api", &kube::api::EvictParams::default())
        .await
        .expect("evict via the API");
    // The Eviction API writes the condition, then the deletion: once the store sees the
    // deletion, the watch delivered the condition.
    eventually(T, "the eviction seen", || async {
        state
            .pods
            .state()
            .iter()
            .any(|p| p.namespace() == ns && p.name() == "via-api" && p.deleting)
            .then_some(())
    })
    .await;
    force_delete(&client, &ns, "via-api").await;
    force_delete(&client, &ns, "runs").await;
    force_delete(&client, &ns, "evicted").await;
    force_delete(&client, &ns, "pending").await;
    Api::<Pod>::namespaced(client.clone(), &ns)
        .patch_status(
            "job",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
        )
        .await
        .expect("job succeeded");

    for (uid, what) in [(&runs, "runs"), (&pending, "pending"), (&job, "job")] {
        let end = eventually(T, &format!("{what}'s lifetime recorded"), || async {
            state.lifetimes.ended(uid)
        })
        .await;
        let secs = end.lifetime_seconds;
        assert!((0..=120).contains(&secs), "{what} ran {secs} s");
        let kind = (what == "job").then(|| "Job".to_string());
        assert_eq!(end.owner_kind, kind, "{what}'s owner kind");
    }
    eventually(T, "the evicted pods' deletions seen", || async {
        let gone = !state
            .pods
            .state()
            .iter()
            .any(|p| p.namespace() == ns && (p.name() == "evicted" || p.name() == "via-api"));
        gone.then_some(())
    })
    .await;
    assert_eq!(
        state.lifetimes.ended(&evicted),
        None,
        "a pod deleted from a disrupted node is an eviction, not an ending"
    );
    assert_eq!(
        state.lifetimes.ended(&via_api),
        None,
        "a pod evicted through the API is not an ending"
    );

    let now = karpenter_capi_controller::context::Context::now();
    for (uid, what) in [(&evicted, "evicted"), (&via_api, "via-api")] {
        let e = state
            .lifetimes
            .evicted(uid)
            .unwrap_or_else(|| panic!("{what}'s eviction not recorded"));
        assert!(
            now - e.at <= 120 && e.at <= now,
            "{what} evicted at {}",
            e.at
        );
        assert!(
            state.lifetimes.recent_evictions(now).contains(&e),
            "{what}'s eviction not in the snapshot's list"
        );
    }
    for (uid, what) in [(&runs, "runs"), (&pending, "pending"), (&job, "job")] {
        assert_eq!(state.lifetimes.evicted(uid), None, "{what} was not evicted");
    }

    tasks.abort_all();
    for n in [ok, drained] {
        let _ = Api::<Node>::all(client.clone())
            .delete(&n, &DeleteParams::default())
            .await;
    }
}
