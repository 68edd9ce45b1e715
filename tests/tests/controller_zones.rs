//! Zone balancing (`--balance-zones`) in the controller against the real API server: one
//! instance type offered by a MachineDeployment per zone at the same price. Nothing here
//! plays CAPI, so the claims stay launched and the pods pending; what is checked is where
//! each claim was launched (its scalable-resource annotation).

mod adapter_support;
mod controller_support;

use std::collections::BTreeSet;
use std::time::Duration;

use capi_adapter::{ResourceId, ResourceKind, keys};
use controller_support::*;
use kube::{Client, ResourceExt};

const T: Duration = Duration::from_secs(60);
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// Three MachineDeployments of instance type `zb-2x` (2 vCPU, $0.10/h), one per zone, and
/// three pods of 1.5 vCPU, each filling a node alone, all pending before the controller
/// starts so one provisioning round plans them together. Returns the MachineDeployments'
/// ids by zone.
async fn three_zones_three_pods(client: &Client, ns: &str, scope: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for zone in ZONES {
        let md = format!("zb-{}", zone.trim_start_matches("zone-"));
        let labels =
            format!("node.kubernetes.io/instance-type=zb-2x,topology.kubernetes.io/zone={zone}");
        adapter_support::create_md(
            client,
            ns,
            &md,
            0,
            &[
                (keys::cas::LABELS, labels.as_str()),
                (keys::capi::MIN_SIZE, "0"),
                (keys::capi::MAX_SIZE, "10"),
            ],
        )
        .await;
        scope_md(client, ns, &md, scope).await;
        ids.push(ResourceId::new(ResourceKind::MachineDeployment, ns, &md).to_string());
    }
    nodeclass_and_pool(
        client,
        scope,
        serde_json::json!({"consolidateAfter": "Never", "consolidationPolicy": "WhenEmpty"}),
    )
    .await;
    for i in 0..3 {
        unschedulable_pod(client, ns, &format!("web-{i}"), scope, "1500m").await;
    }
    ids
}

/// The MachineDeployments the scope's claims were launched on, once there are three.
async fn launch_targets(client: &Client, scope: &str) -> Vec<String> {
    let targets = eventually(T, "three launched nodeclaims", || async {
        let targets: Vec<String> = claims(client, scope)
            .await
            .iter()
            .filter_map(|c| c.annotations().get(keys::ours::LAUNCH_TARGET).cloned())
            .collect();
        (targets.len() >= 3).then_some(targets)
    })
    .await;
    // Past the first three, a fourth would be a double scale-up for the same pods.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let all = claims(client, scope).await;
    assert_eq!(all.len(), 3, "one claim per pod: {all:?}");
    targets
}

#[tokio::test]
async fn balanced_launches_spread_equal_priced_nodes_over_the_zones() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "ctl-zb-on").await;
    let ids = three_zones_three_pods(&client, &ns, &ns).await;
    let mut opts = options(&ns);
    opts.balance_zones = true;
    let _running = start(&client, opts).await;

    let targets: BTreeSet<String> = launch_targets(&client, &ns).await.into_iter().collect();
    let expected: BTreeSet<String> = ids.into_iter().collect();
    assert_eq!(targets, expected, "one node in each zone");
}

#[tokio::test]
async fn unbalanced_launches_take_the_first_zone_of_a_price_tie() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "ctl-zb-off").await;
    let ids = three_zones_three_pods(&client, &ns, &ns).await;
    let _running = start(&client, options(&ns)).await;

    let targets = launch_targets(&client, &ns).await;
    assert!(
        targets.iter().all(|t| *t == ids[0]),
        "all three in {}, the first zone: {targets:?}",
        ids[0]
    );
}
