//! What disruption reads from a NodeClaim, written by the controller against the real API
//! server: the NodePool hash stamps, `lastPodEventTime` on a pod binding, `Consolidatable`
//! after `consolidateAfter`, `Drifted` from the provider (the MachineDeployment's template
//! changed) and from the NodePool (its template changed), and then a drift command within
//! the budget (replacement launched, `DisruptionReason` on the claim). The test plays CAPI,
//! the kubelet and the scheduler (see controller_support).

mod adapter_support;
mod controller_support;

use std::time::Duration;

use capi_adapter::objects::capi;
use controller_support::*;
use k8s_openapi::api::core::v1::Node;
use karpenter_api::{NodeClaim, NodePool, wellknown};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

const T: Duration = Duration::from_secs(60);

fn cond<'a>(
    c: &'a NodeClaim,
    t: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    c.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|x| x.type_ == t))
}

async fn claim_named(client: &kube::Client, name: &str) -> NodeClaim {
    Api::<NodeClaim>::all(client.clone())
        .get(name)
        .await
        .expect("get claim")
}

async fn patch_pool(client: &kube::Client, name: &str, patch: serde_json::Value) {
    Api::<NodePool>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch nodepool");
}

#[tokio::test]
async fn pod_events_consolidatable_and_drift_are_kept_on_the_claim() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "ctl-cond").await;
    let scope = ns.clone();
    let md = "workers";
    adapter_support::create_md(&client, &ns, md, 0, &md_annotations("2")).await;
    scope_md(&client, &ns, md, &scope).await;
    // No disruption at first (budget 0), so the conditions can be watched one by one.
    nodeclass_and_pool(
        &client,
        &scope,
        json!({"consolidateAfter": "1h", "consolidationPolicy": "WhenEmptyOrUnderutilized",
               "budgets": [{"nodes": "0"}]}),
    )
    .await;
    let mut opts = options(&scope);
    opts.drift_check_interval = Duration::from_secs(1);
    let running = start(&client, opts).await;

    unschedulable_pod(&client, &ns, "web-1", &scope, "500m").await;
    let claim = eventually(T, "a nodeclaim", || async {
        claims(&client, &scope).await.into_iter().next()
    })
    .await;
    let name = claim.name_any();
    let pool_hash = eventually(T, "the nodepool stamped with its hash", || async {
        let np = Api::<NodePool>::all(client.clone())
            .get(&scope)
            .await
            .ok()?;
        np.annotations()
            .get(wellknown::NODEPOOL_HASH_ANNOTATION)
            .cloned()
    })
    .await;
    assert_eq!(
        claim.annotations().get(wellknown::NODEPOOL_HASH_ANNOTATION),
        Some(&pool_hash),
        "the claim records the template it was made from"
    );

    let id = capi_adapter::ResourceId::new(capi_adapter::ResourceKind::MachineDeployment, &ns, md);
    eventually(T, "replicas raised to 1", || async {
        (adapter_support::replicas(&client, &id).await == 1).then_some(())
    })
    .await;
    play_machineset(&client, &ns, md).await;
    let machine = eventually(T, "the machine bound to the claim", || async {
        machines(&client, &ns, md)
            .await
            .into_iter()
            .find(|m| m.labels().get(capi_adapter::keys::ours::NODECLAIM_LABEL) == Some(&name))
    })
    .await;
    let (node_name, _) = provision(&client, &ns, &machine.name_any(), "2").await;
    let initialized = eventually(T, "claim initialized", || async {
        let c = claim_named(&client, &name).await;
        condition(&c, "Initialized").then_some(c)
    })
    .await;
    assert!(
        initialized
            .status
            .as_ref()
            .and_then(|s| s.last_pod_event_time.as_ref())
            .is_none(),
        "no pod event yet"
    );

    // A pod with a controller: a node running an ownerless pod is never disrupted, and the
    // drift command at the end needs a node that can be.
    Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), &ns)
        .patch(
            "web-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                "uid": "00000000-0000-0000-0000-000000000001", "controller": true
            }]}})),
        )
        .await
        .expect("own the pod");
    let before_bind = k8s_openapi::jiff::Timestamp::now().as_second();
    bind(&client, &ns, "web-1", &node_name).await;
    let bound = eventually(T, "lastPodEventTime after the binding", || async {
        let c = claim_named(&client, &name).await;
        let t = c
            .status
            .as_ref()?
            .last_pod_event_time
            .as_ref()?
            .0
            .as_second();
        (t >= before_bind - 1).then_some(c)
    })
    .await;
    assert!(
        cond(&bound, "Consolidatable").is_none(),
        "consolidateAfter 1h has not passed: {:?}",
        cond(&bound, "Consolidatable")
    );

    patch_pool(
        &client,
        &scope,
        json!({"spec": {"disruption": {"consolidateAfter": "2s"}}}),
    )
    .await;
    eventually(T, "Consolidatable once consolidateAfter passed", || async {
        let c = claim_named(&client, &name).await;
        cond(&c, "Consolidatable")
            .is_some_and(|x| x.status == "True")
            .then_some(())
    })
    .await;

    // The MachineDeployment's template changes (a new Kubernetes version): the provider
    // reports the Machine as made from an older template.
    let mds: Api<capi::MachineDeployment> =
        Api::namespaced_with(client.clone(), &ns, &adapter_support::V);
    let version = |v: &str| json!({"spec": {"template": {"spec": {"version": v}}}});
    mds.patch(
        md,
        &PatchParams::default(),
        &Patch::Merge(&version("v9.99.0")),
    )
    .await
    .expect("patch md version");
    let drifted = eventually(T, "Drifted from the provider", || async {
        let c = claim_named(&client, &name).await;
        cond(&c, "Drifted")
            .filter(|x| x.status == "True")
            .map(|x| x.reason.clone())
    })
    .await;
    assert!(
        drifted != "NodePoolDrifted" && drifted != "RequirementsDrifted",
        "a provider reason: {drifted}"
    );
    mds.patch(
        md,
        &PatchParams::default(),
        &Patch::Merge(&version(testenv::versions::KUBERNETES)),
    )
    .await
    .expect("restore md version");
    eventually(T, "Drifted cleared when the template is back", || async {
        let c = claim_named(&client, &name).await;
        cond(&c, "Drifted").is_none().then_some(())
    })
    .await;

    // The NodePool's template changes: NodePoolDrifted.
    patch_pool(
        &client,
        &scope,
        json!({"spec": {"template": {"metadata": {"labels": {"tier": "gold"}}}}}),
    )
    .await;
    eventually(T, "NodePoolDrifted", || async {
        let c = claim_named(&client, &name).await;
        cond(&c, "Drifted")
            .is_some_and(|x| x.status == "True" && x.reason == "NodePoolDrifted")
            .then_some(())
    })
    .await;
    assert_eq!(
        claims(&client, &scope).await.len(),
        1,
        "budget 0: no command"
    );

    // The budget opens: a drift command replaces the node.
    patch_pool(
        &client,
        &scope,
        json!({"spec": {"disruption": {"budgets": [{"nodes": "1"}]}}}),
    )
    .await;
    eventually(T, "a replacement claim for the drifted node", || async {
        (claims(&client, &scope).await.len() == 2).then_some(())
    })
    .await;
    let disrupting = claim_named(&client, &name).await;
    let reason = cond(&disrupting, "DisruptionReason").expect("DisruptionReason set");
    assert_eq!(reason.reason, "Drifted");
    let node = Api::<Node>::all(client.clone())
        .get(&node_name)
        .await
        .expect("node");
    assert!(
        node.spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == wellknown::DISRUPTED_TAINT_KEY),
        "the drifted node is tainted while its replacement launches"
    );
    running.stop();
}
