//! Anticipation in the controller against the real API server. A pod stays pending until its
//! node is ready, so the pods of a trickle wait, pending, for NodeClaims still in flight: they
//! are the stream the next launch is sized for, not part of that launch's batch. Nothing here
//! plays CAPI, so no claim ever gets a node and every pod stays pending.

mod adapter_support;
mod controller_support;

use std::time::Duration;

use capi_adapter::{ResourceId, ResourceKind, keys};
use controller_support::*;
use kube::ResourceExt;

const T: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_trickle_waiting_for_its_nodes_grows_the_next_launch() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "ctl-antic").await;
    let scope = ns.clone();
    // The same price per vCPU: "large" costs four times "small", within the growth cap.
    for (md, cpu, memory, price) in [("small", "2", "8Gi", "0.1"), ("large", "8", "32Gi", "0.4")] {
        adapter_support::create_md(
            &client,
            &ns,
            md,
            0,
            &[
                (keys::cas::CPU, cpu),
                (keys::cas::MEMORY, memory),
                (keys::ours::PRICE_PER_HOUR, price),
                (keys::capi::MIN_SIZE, "0"),
                (keys::capi::MAX_SIZE, "20"),
            ],
        )
        .await;
        scope_md(&client, &ns, md, &scope).await;
    }
    nodeclass_and_pool(
        &client,
        &scope,
        serde_json::json!({"consolidateAfter": "Never", "consolidationPolicy": "WhenEmpty"}),
    )
    .await;
    let _running = start(&client, options(&scope)).await;

    // One pod of 1.5 vCPU every 2 s: each fills a "small" node alone, and each arrives in a
    // provisioning batch of its own (the test's batch window is 0.2-2 s).
    let large = ResourceId::new(ResourceKind::MachineDeployment, &ns, "large").to_string();
    let small = ResourceId::new(ResourceKind::MachineDeployment, &ns, "small").to_string();
    let target = |c: &karpenter_api::NodeClaim| {
        c.annotations()
            .get(keys::ours::LAUNCH_TARGET)
            .cloned()
            .unwrap_or_default()
    };
    for i in 0..8 {
        unschedulable_pod(&client, &ns, &format!("web-{i}"), &scope, "1500m").await;
        if i == 0 {
            // Nothing arrived before the first pod: its node is sized for it alone.
            let first = eventually(T, "a nodeclaim for the first pod", || async {
                claims(&client, &scope).await.into_iter().next()
            })
            .await;
            assert_eq!(target(&first), small, "the first launch is not grown");
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    // The stream is a few seconds old when the later pods arrive: room for the next ones is
    // missing on the claims in flight, so a launch grows to "large". Counting the pods
    // waiting for those claims as the batch (the oldest pending pod as its start), no launch
    // ever had arrivals before it and none grew.
    eventually(T, "a launch grown for the pods still coming", || async {
        claims(&client, &scope)
            .await
            .into_iter()
            .find(|c| target(c) == large)
    })
    .await;
    let all = claims(&client, &scope).await;
    assert!(
        all.len() < 8,
        "the grown claim's room held later pods: {} claims for 8 pods",
        all.len()
    );
}
