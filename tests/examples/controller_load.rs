//! Measures the controller on the test control plane: 1,000 pending pods and 100 existing
//! (full) nodes. Reports the provisioning round's CPU time (the core on its blocking
//! thread), the time from a pending pod that needs a new node (hostname anti-affinity to every
//! other pod, created once the 1,000 are planned) to the scale write for it, and the process
//! RSS.
//!
//! `cargo xtask control-plane up`, then
//! `cargo run --release -p integration-tests --example controller_load [-- PODS NODES]`.
//! The process also holds the client that created the objects; its RSS is an upper bound
//! on the controller's.

#[path = "../tests/adapter_support/mod.rs"]
mod adapter_support;
#[path = "../tests/controller_support/mod.rs"]
mod controller_support;

use std::time::{Duration, Instant};

use capi_adapter::{ResourceId, ResourceKind};
use controller_support::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let pods: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let nodes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "ctl-load").await;
    adapter_support::create_md(
        &client,
        &ns,
        "workers",
        0,
        &[
            (capi_adapter::keys::cas::CPU, "16"),
            (capi_adapter::keys::cas::MEMORY, "64Gi"),
            (capi_adapter::keys::cas::EPHEMERAL_DISK, "100Gi"),
            (capi_adapter::keys::capi::MAX_SIZE, "1000"),
        ],
    )
    .await;
    scope_md(&client, &ns, "workers", &ns).await;
    nodeclass_and_pool(&client, &ns, json!({"consolidateAfter": "Never"})).await;
    // Existing nodes that are full (a pod each using all of it) count in every snapshot.
    let node_api: Api<Node> = Api::all(client.clone());
    for i in 0..nodes {
        let name = format!("{ns}-full-{i}");
        let node: Node =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {SCOPE: ns}}}))
                .expect("node");
        node_api
            .create(&PostParams::default(), &node)
            .await
            .expect("node");
        node_api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": {
                "allocatable": {"cpu": "100m", "memory": "128Mi", "pods": "110"},
                "capacity": {"cpu": "100m", "memory": "128Mi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "r", "message": "m"}]
            }})))
            .await
            .expect("node status");
    }
    let rss_before = rss_mib();
    let running = start(&client, options(&ns)).await;
    assert!(running.ctx.state.wait_synced(Duration::from_secs(60)).await);
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let created = Instant::now();
    for i in 0..pods {
        let name = format!("p-{i}");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "load"}},
            "spec": {"nodeSelector": {SCOPE: ns}, "containers": [{"name": "c", "image": "x",
                "resources": {"requests": {"cpu": if i % 2 == 0 { "250m" } else { "1" }, "memory": if i % 3 == 0 { "2Gi" } else { "512Mi" }}}}]}
        }))
        .expect("pod");
        pod_api
            .create(&PostParams::default(), &pod)
            .await
            .expect("pod");
        pod_api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}]}})))
            .await
            .expect("pod status");
    }
    let last_pending = Instant::now();
    let id = ResourceId::new(ResourceKind::MachineDeployment, &ns, "workers");
    // Let the batches of the 1,000 settle, then time one batch alone: a pod no in-flight
    // claim can take (hostname anti-affinity to every other pod) from the moment it is
    // pending to the replica raised for it. Earlier batches closed while the 1,000 were still
    // being created, so timing the 1,000's first scale write would measure nothing.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = adapter_support::replicas(&client, &id).await;
    let lone: Pod = serde_json::from_value(json!({
        "metadata": {"name": "lone"},
        "spec": {"nodeSelector": {SCOPE: ns},
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "load"}}}]}},
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}]}
    }))
    .expect("pod");
    // From its creation: the controller takes an unbound pod as pending as soon as it sees
    // it, before the status below (what the kube-scheduler would write) arrives.
    let pending_at = Instant::now();
    pod_api
        .create(&PostParams::default(), &lone)
        .await
        .expect("pod");
    pod_api
        .patch_status("lone", &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}]}})))
        .await
        .expect("pod status");
    // Now the pod is pending as the controller counts it (`is_provisionable`).
    let unschedulable_at = Instant::now();
    let deadline = pending_at + Duration::from_secs(30);
    while adapter_support::replicas(&client, &id).await <= before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let to_scale = pending_at.elapsed();
    let from_unschedulable = unschedulable_at.elapsed();
    let raised = adapter_support::replicas(&client, &id).await > before;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let text = running.ctx.metrics.encode();
    let hist_sum = text
        .lines()
        .find(|l| l.starts_with("karpenter_scheduler_scheduling_duration_seconds_sum"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("?")
        .to_string();
    let hist_count = text
        .lines()
        .find(|l| l.starts_with("karpenter_scheduler_scheduling_duration_seconds_count"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("?")
        .to_string();
    println!(
        "pods={pods} nodes={nodes} create_pods={:.1}s lone_pod_to_scale_write={:.3}s (from_unschedulable_status={:.3}s) raised={raised} (batch idle {:?}, max {:?}) scheduling_rounds={hist_count} scheduling_seconds_total={hist_sum} replicas={} rss_before_controller={rss_before:.0}MiB rss_after={:.0}MiB",
        (last_pending - created).as_secs_f64(),
        to_scale.as_secs_f64(),
        from_unschedulable.as_secs_f64(),
        running.ctx.options.batch_idle,
        running.ctx.options.batch_max,
        adapter_support::replicas(&client, &id).await,
        rss_mib(),
    );
    running.stop();
}
