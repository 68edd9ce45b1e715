//! The same launch and delete on an OpenShift Machine API MachineSet
//! (`machine.openshift.io/v1beta1`) against the real API server.

mod adapter_support;

use std::sync::Arc;

use adapter_support::*;
use capi_adapter::plan::{DeleteOutcome, DeleteRefusal};
use capi_adapter::{MachineApi, keys};
use karpenter_capi_controller::cloudprovider::{Hooks, Launch};
use tokio::sync::mpsc;

#[tokio::test]
async fn openshift_launch_binds_and_delete_lowers() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "os").await;
    let ms = create_os_machineset(&client, &ns, "worker-us-east-1a", 0, &[]).await;
    let cp = provider(&client);
    let mut claims = Vec::new();
    for i in 0..3 {
        claims.push(create_claim(&client, &format!("os-{i}")).await);
    }
    let handles: Vec<_> = claims
        .iter()
        .map(|c| {
            let (cp, ms, c) = (cp.clone(), ms.clone(), c.clone());
            tokio::spawn(async move { cp.launch(&c, &ms).await })
        })
        .collect();
    for h in handles {
        assert_eq!(h.await.expect("join").expect("launch"), Launch::Waiting);
    }
    assert_eq!(replicas(&client, &ms).await, 3);

    let mut machines = Vec::new();
    for i in 0..3 {
        machines.push(
            create_os_machine(
                &client,
                &ns,
                "worker-us-east-1a",
                &format!("worker-us-east-1a-{i}"),
            )
            .await,
        );
    }
    for c in &claims {
        assert!(matches!(
            cp.launch(c, &ms).await.expect("launch"),
            Launch::Bound { .. }
        ));
    }
    assert_eq!(replicas(&client, &ms).await, 3);
    for m in &machines {
        let labels = os_machine(&client, m)
            .await
            .metadata
            .labels
            .unwrap_or_default();
        assert!(labels.contains_key(keys::ours::NODECLAIM_LABEL));
    }

    // Delete the Machine of the second claim: OpenShift's annotation, replicas 3 -> 2.
    assert_eq!(
        cp.delete_claim(&claims[1]).await.expect("delete"),
        DeleteOutcome::Requested
    );
    assert_eq!(replicas(&client, &ms).await, 2);
    let deleted: Vec<bool> = {
        let mut v = Vec::new();
        for m in &machines {
            let a = os_machine(&client, m)
                .await
                .metadata
                .annotations
                .unwrap_or_default();
            assert!(!a.contains_key(keys::capi::DELETE_MACHINE));
            v.push(a.contains_key(keys::openshift::DELETE_MACHINE));
        }
        v
    };
    assert_eq!(deleted.iter().filter(|d| **d).count(), 1);
    let bound_to_second =
        claim_annotations(&client, &claims[1]).await[keys::capi::MACHINE_ANNOTATION].clone();
    let idx = machines
        .iter()
        .position(|m| m.to_string() == bound_to_second)
        .expect("bound machine");
    assert!(deleted[idx]);
}

#[tokio::test]
async fn openshift_min_size_and_restart_idempotency() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "os-min").await;
    let ms = create_os_machineset(
        &client,
        &ns,
        "worker-b",
        1,
        &[
            (keys::openshift::MIN_SIZE, "1"),
            (keys::openshift::MAX_SIZE, "3"),
        ],
    )
    .await;
    let only = create_os_machine(&client, &ns, "worker-b", "worker-b-0").await;
    let cp = provider(&client);
    assert_eq!(
        cp.delete_machine(MachineApi::OpenShift, &only)
            .await
            .expect("delete"),
        DeleteOutcome::Refused(DeleteRefusal::BelowMinSize { min: 1 })
    );
    assert_eq!(replicas(&client, &ms).await, 1);

    // A launch killed after its scale write, re-run by a fresh provider.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let doomed = provider_with_hooks(
        &client,
        Hooks {
            after_scale_write: Some(Arc::new(move |_, to| {
                let tx = tx.clone();
                Box::pin(async move {
                    let _ = tx.send(to);
                    std::future::pending::<()>().await;
                })
            })),
            ..Hooks::default()
        },
    );
    // The existing Machine is taken first.
    let first = create_claim(&client, "os-first").await;
    assert!(matches!(
        cp.launch(&first, &ms).await.expect("launch"),
        Launch::Bound { .. }
    ));
    let claim = create_claim(&client, "os-crash").await;
    let task = {
        let (doomed, claim, ms) = (doomed.clone(), claim.clone(), ms.clone());
        tokio::spawn(async move { doomed.launch(&claim, &ms).await })
    };
    assert_eq!(rx.recv().await, Some(2));
    task.abort();
    drop(doomed);
    let fresh = provider(&client);
    assert_eq!(
        fresh.launch(&claim, &ms).await.expect("launch"),
        Launch::Waiting
    );
    assert_eq!(replicas(&client, &ms).await, 2);
    create_os_machine(&client, &ns, "worker-b", "worker-b-1").await;
    assert!(matches!(
        fresh.launch(&claim, &ms).await.expect("launch"),
        Launch::Bound { .. }
    ));
    assert_eq!(replicas(&client, &ms).await, 2);
}

/// OpenShift's nodelink controller copies a Machine's `spec.taints` onto its Node on every
/// Node update: the unregistered taint must leave the Machine, or it comes back on the Node.
/// Other taints stay; a CAPI Machine has no such list and is left alone.
#[tokio::test]
async fn the_unregistered_taint_leaves_the_openshift_machine() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "os-taint").await;
    create_os_machineset(&client, &ns, "worker-a", 1, &[]).await;
    let key = create_os_machine(&client, &ns, "worker-a", "worker-a-0").await;
    let api: kube::Api<capi_adapter::objects::openshift::Machine> =
        kube::Api::namespaced(client.clone(), &ns);
    api.patch(
        &key.name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {"taints": [
            {"key": karpenter_api::wellknown::UNREGISTERED_TAINT_KEY, "effect": "NoExecute"},
            {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
        ]}})),
    )
    .await
    .expect("taint the machine");
    let cp = provider(&client);
    assert!(
        cp.release_machine_taint(MachineApi::OpenShift, &key)
            .await
            .expect("release")
    );
    let taints: Vec<String> = os_machine(&client, &key)
        .await
        .spec
        .taints
        .iter()
        .map(|t| t.key.clone())
        .collect();
    assert_eq!(taints, vec!["dedicated".to_string()]);
    // Nothing left to remove; a CAPI Machine is never touched.
    assert!(
        !cp.release_machine_taint(MachineApi::OpenShift, &key)
            .await
            .expect("release again")
    );
    assert!(
        !cp.release_machine_taint(MachineApi::Capi, &key)
            .await
            .expect("capi")
    );
}
