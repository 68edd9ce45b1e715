//! The two-cluster setup real Cluster API users run: the Cluster, MachineDeployments and
//! Machines in the management cluster, the nodes, pods, NodePool and NodeClaims in a
//! separate workload cluster (the e2e environment's second API server, with its own
//! kube-scheduler, kube-controller-manager and kwok). CAPI's manager and the fake provider
//! reach the workload cluster only through the Cluster's kubeconfig Secret; our controller
//! gets one client per cluster, as `--cluster-api-kubeconfig` gives it.
//!
//! Scale from zero, then scale to zero: every object lands in the cluster it belongs to,
//! CAPI links each Machine to its Node across the two (`status.nodeRef`), and deleting the
//! workload removes the nodes from the workload cluster and the Machines from the
//! management cluster, with no replica left.

use std::collections::BTreeSet;
use std::time::Instant;

use e2e_tests::{Md, Scenario, node_of, report, wait_for};
use k8s_openapi::api::core::v1::Node;
use karpenter_api::NodeClaim;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const PODS: i32 = 6;

#[tokio::test]
#[ignore = "needs the e2e environment: cargo xtask e2e"]
async fn scale_up_and_down_with_a_separate_workload_cluster() {
    let s = Scenario::new_two_clusters("e2e-two").await;
    let shapes = [
        Md::new("small", "2", "4Gi", "0.10"),
        Md::new("medium", "4", "8Gi", "0.17"),
    ];
    for md in &shapes {
        s.md(md).await;
    }
    s.nodepool(json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}))
        .await;
    let running = s.start(s.options()).await;

    // Scale from zero.
    let t0 = Instant::now();
    s.deployment("web", PODS, "500m", "512Mi").await;
    let on = s.wait_running("web", PODS as usize, 300).await;
    let up = t0.elapsed().as_secs_f64();
    let nodes = s.nodes().await;
    let names: BTreeSet<String> = nodes.iter().map(|n| n.name_any()).collect();
    assert!(!names.is_empty());
    assert!(
        on.is_subset(&names),
        "pods run on the workload cluster's new nodes: {on:?} in {names:?}"
    );
    for pod in s.pods("web").await {
        assert!(node_of(&pod).is_some_and(|n| names.contains(&n)));
    }
    // The nodes exist only in the workload cluster.
    let mgmt_nodes: Api<Node> = Api::all(s.mgmt.clone());
    for name in &names {
        assert!(
            mgmt_nodes.get_opt(name).await.expect("get node").is_none(),
            "node {name} is in the management cluster too"
        );
    }
    // Every worker Machine (management cluster) points at one of those nodes, set by CAPI
    // through the kubeconfig Secret, and the replicas are exactly the nodes.
    wait_for("every Machine has a nodeRef", 60, || async {
        let machines = s.machines().await;
        Ok(machines.len() == names.len()
            && machines.iter().all(|m| {
                m.data
                    .pointer("/status/nodeRef/name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| names.contains(n))
            }))
    })
    .await
    .unwrap_or_else(|e| panic!("Machines linked to the workload's nodes {names:?}: {e}"));
    let mut total = 0;
    for md in &shapes {
        total += s.replicas(md.name).await;
    }
    assert_eq!(total as usize, names.len(), "replicas = nodes {names:?}");
    // NodeClaims live in the workload cluster only (the management cluster serves the
    // CRD, as a management cluster that also runs Karpenter would).
    let claims = s.claims().await;
    assert_eq!(claims.len(), names.len(), "one NodeClaim per node");
    let selector = format!("karpenter.sh/nodepool={}", s.ns);
    let mgmt_claims = Api::<NodeClaim>::all(s.mgmt.clone())
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("list claims in the management cluster");
    assert!(
        mgmt_claims.items.is_empty(),
        "NodeClaims in the management cluster: {:?}",
        mgmt_claims
            .items
            .iter()
            .map(|c| c.name_any())
            .collect::<Vec<_>>()
    );
    report(
        "two-clusters",
        &format!(
            "{PODS} pods Running {up:.1}s after the Deployment was created, on {} nodes of the workload cluster",
            names.len()
        ),
    );

    // Scale to zero: nodes, Machines, claims and replicas all go.
    let t1 = Instant::now();
    s.delete_deployment("web").await;
    wait_for("everything removed", 300, || async {
        let mut replicas = 0;
        for md in &shapes {
            replicas += s.replicas(md.name).await;
        }
        Ok(s.nodes().await.is_empty()
            && s.machines().await.is_empty()
            && s.claims().await.is_empty()
            && replicas == 0)
    })
    .await
    .expect("scale to zero across the two clusters");
    report(
        "two-clusters",
        &format!(
            "deleted the workload: nodes, Machines and NodeClaims gone in {:.1}s",
            t1.elapsed().as_secs_f64()
        ),
    );
    running.stop();
}
