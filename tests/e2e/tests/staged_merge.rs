//! A staged merge under a one-node budget, with the real CAPI MachineSet controller,
//! kube-scheduler, kwok and the fake provider.
//!
//! Three 16-CPU nodes each run one 9-CPU pod: no two pods share a node of that shape. Then a
//! 32-CPU shape appears that holds all three for 1.60/h against 2.40/h. The NodePool's budget
//! allows one node at a time, so Karpenter would never make that merge. We expect it in steps:
//! the 32-CPU node is launched and one 16-CPU node drained, then the other two go one at a
//! time onto the new node's room. A watcher polls the Nodes throughout: never more than one
//! node of the NodePool is disrupted (tainted `karpenter.sh/disrupted` or deleting) at once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use e2e_tests::{Md, SCOPE, Scenario, report, wait_for};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::json;

#[tokio::test]
#[ignore = "needs the e2e environment: cargo xtask e2e"]
async fn a_merge_the_budget_forbids_at_once_goes_in_steps() {
    let s = Scenario::new("e2e-staged").await;
    let xlarge = Md::new("xlarge", "16", "32Gi", "0.80");
    s.md(&xlarge).await;
    s.nodepool(json!({
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "1"}]
    }))
    .await;
    // The plain rule (as in `scale_out_in`): the payback rule would wait for the pods,
    // seconds old here, to have run long enough for a move to pay.
    let mut options = s.options();
    options.consolidation_payback = false;
    options.consolidation_headroom = false;
    let running = s.start(options).await;

    s.deployment("big", 3, "9", "1Gi").await;
    let before = s.wait_running("big", 3, 300).await;
    assert_eq!(before.len(), 3, "one pod per 16-CPU node: {before:?}");

    let seen = Arc::new(Mutex::new(Seen::default()));
    let watcher = {
        let seen = seen.clone();
        let client = s.client.clone();
        let scope = s.scope().to_string();
        tokio::spawn(async move { watch_disruptions(client, scope, seen).await })
    };
    let t0 = Instant::now();
    s.md(&Md::new("xxlarge", "32", "64Gi", "1.60")).await;
    let prices: BTreeMap<&str, f64> = [("xlarge", 0.80), ("xxlarge", 1.60)].into();
    wait_for("merged onto one 32-CPU node", 300, || async {
        let nodes = s.nodes().await;
        let running = s
            .pods("big")
            .await
            .iter()
            .filter(|p| e2e_tests::running(p))
            .count();
        Ok(nodes.len() == 1 && running == 3 && s.replicas("xlarge").await == 0)
    })
    .await
    .expect("the staged merge completes");
    let took = t0.elapsed().as_secs_f64();
    watcher.abort();
    let w = seen.lock().expect("lock").clone();
    let nodes = s.nodes().await;
    report(
        "staged-merge",
        &format!(
            "3 x 16-CPU -> 1 x 32-CPU in {took:.1}s under a one-node budget; nodes disrupted {}, at most {} at once; cost {:.2}/h",
            w.disrupted.len(),
            w.most_at_once,
            Scenario::cost(&nodes, &prices)
        ),
    );
    assert_eq!(s.replicas("xxlarge").await, 1);
    assert!((Scenario::cost(&nodes, &prices) - 1.60).abs() < 1e-9);
    assert_eq!(
        w.disrupted, before,
        "exactly the three 16-CPU nodes were disrupted"
    );
    assert_eq!(w.most_at_once, 1, "the budget held at every poll");
    running.stop();
}

#[derive(Debug, Clone, Default)]
struct Seen {
    disrupted: BTreeSet<String>,
    most_at_once: usize,
}

/// Polls the scenario's Nodes every 100 ms: which are disrupted (tainted
/// `karpenter.sh/disrupted` or deleting), and the most at one time.
async fn watch_disruptions(client: kube::Client, scope: String, seen: Arc<Mutex<Seen>>) {
    let nodes: Api<Node> = Api::all(client);
    loop {
        if let Ok(list) = nodes.list(&ListParams::default().labels(SCOPE)).await {
            let now: Vec<String> = list
                .items
                .iter()
                .filter(|n| n.labels().get(SCOPE).is_some_and(|v| *v == scope))
                .filter(|n| {
                    n.metadata.deletion_timestamp.is_some()
                        || n.spec
                            .as_ref()
                            .and_then(|s| s.taints.as_ref())
                            .is_some_and(|t| t.iter().any(|t| t.key == "karpenter.sh/disrupted"))
                })
                .map(|n| n.name_any())
                .collect();
            let mut w = seen.lock().expect("lock");
            w.most_at_once = w.most_at_once.max(now.len());
            w.disrupted.extend(now);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
