//! Deleting Machines of a CAPI MachineDeployment against the real API server: exactly the
//! chosen Machine is annotated, replicas drop by one, min size and rollouts are respected,
//! and a crash between the annotation and the scale write is completed on re-run.

mod adapter_support;

use std::sync::Arc;

use adapter_support::*;
use capi_adapter::plan::{DeleteOutcome, DeleteRefusal};
use capi_adapter::{MachineApi, keys};
use karpenter_capi_controller::cloudprovider::{Hooks, Launch};
use kube::Client;
use kube::api::{Patch, PatchParams};
use serde_json::json;

fn annotations(
    m: &capi_adapter::objects::capi::Machine,
) -> std::collections::BTreeMap<String, String> {
    m.metadata.annotations.clone().unwrap_or_default()
}

async fn three_machines(
    client: &Client,
    ns: &str,
    extra: &[(&str, &str)],
) -> (capi_adapter::ResourceId, Vec<capi_adapter::MachineKey>) {
    let md = create_md(client, ns, "workers", 3, extra).await;
    let mut ms = Vec::new();
    for i in 0..3 {
        ms.push(
            create_capi_machine(
                client,
                ns,
                "workers",
                &format!("workers-a-{i}"),
                "workers-a",
            )
            .await,
        );
    }
    (md, ms)
}

#[tokio::test]
async fn delete_annotates_exactly_the_chosen_machine_and_lowers_replicas() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "delete").await;
    let (md, ms) = three_machines(&client, &ns, &[]).await;
    let cp = provider(&client);

    let outcome = cp
        .delete_machine(MachineApi::Capi, &ms[1])
        .await
        .expect("delete");
    assert_eq!(outcome, DeleteOutcome::Requested);
    assert_eq!(replicas(&client, &md).await, 2);
    for (i, m) in ms.iter().enumerate() {
        let a = annotations(&capi_machine(&client, m).await);
        assert_eq!(
            a.contains_key(keys::capi::DELETE_MACHINE),
            i == 1,
            "machine {i}"
        );
        assert_eq!(
            a.contains_key(keys::ours::DELETE_REQUESTED),
            i == 1,
            "machine {i}"
        );
    }
    // Asking again changes nothing.
    assert_eq!(
        cp.delete_machine(MachineApi::Capi, &ms[1])
            .await
            .expect("delete"),
        DeleteOutcome::Requested
    );
    assert_eq!(replicas(&client, &md).await, 2);
}

#[tokio::test]
async fn delete_never_goes_below_min_size() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "delete-min").await;
    let (md, ms) = three_machines(
        &client,
        &ns,
        &[(keys::capi::MIN_SIZE, "2"), (keys::capi::MAX_SIZE, "10")],
    )
    .await;
    let cp = provider(&client);
    assert_eq!(
        cp.delete_machine(MachineApi::Capi, &ms[0])
            .await
            .expect("delete"),
        DeleteOutcome::Requested
    );
    assert_eq!(replicas(&client, &md).await, 2);
    // CAPI deletes it... (we cannot run CAPI here, so a second delete sees 3 Machines with
    // one on its way out and replicas at the min size.)
    assert_eq!(
        cp.delete_machine(MachineApi::Capi, &ms[2])
            .await
            .expect("delete"),
        DeleteOutcome::Refused(DeleteRefusal::BelowMinSize { min: 2 })
    );
    assert_eq!(replicas(&client, &md).await, 2);
    assert!(
        !annotations(&capi_machine(&client, &ms[2]).await).contains_key(keys::capi::DELETE_MACHINE)
    );
}

#[tokio::test]
async fn a_crash_between_annotation_and_scale_write_is_completed_on_rerun() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "delete-crash").await;
    let (md, ms) = three_machines(&client, &ns, &[]).await;
    // What a crashed delete leaves behind: our annotations, replicas untouched.
    kube::Api::<capi_adapter::objects::capi::Machine>::namespaced_with(client.clone(), &ns, &V)
        .patch(
            &ms[0].name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                keys::capi::DELETE_MACHINE: "true",
                keys::ours::DELETE_REQUESTED: "true"
            }}})),
        )
        .await
        .expect("annotate");
    let cp = provider(&client);
    let (plan, _) = cp.reconcile_delete(&md, &[]).await.expect("reconcile");
    assert_eq!(plan.scale_to, Some(2));
    assert_eq!(replicas(&client, &md).await, 2);
    // And once more: nothing left to do.
    let (plan, _) = cp.reconcile_delete(&md, &[]).await.expect("reconcile");
    assert_eq!(plan.scale_to, None);
    assert_eq!(replicas(&client, &md).await, 2);
    // Meanwhile launches use the two live Machines but never the one on its way out, and
    // wait for CAPI to remove it rather than cancel that by raising replicas.
    for i in 0..2 {
        let claim = create_claim(&client, &format!("after-delete-{i}")).await;
        let Launch::Bound { machine, .. } = cp.launch(&claim, &md).await.expect("launch") else {
            panic!("not bound");
        };
        assert_ne!(machine, ms[0]);
    }
    let claim = create_claim(&client, "after-delete-2").await;
    assert!(matches!(
        cp.launch(&claim, &md).await.expect("launch"),
        Launch::Deferred(_)
    ));
    assert_eq!(replicas(&client, &md).await, 2);
}

#[tokio::test]
async fn delete_skips_resources_mid_rollout() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "delete-rollout").await;
    let md = create_md(&client, &ns, "workers", 2, &[]).await;
    let old = create_capi_machine(&client, &ns, "workers", "workers-old-0", "workers-old").await;
    create_capi_machine(&client, &ns, "workers", "workers-new-0", "workers-new").await;
    let cp = provider(&client);
    assert_eq!(
        cp.delete_machine(MachineApi::Capi, &old)
            .await
            .expect("delete"),
        DeleteOutcome::Refused(DeleteRefusal::MidRollout)
    );
    assert_eq!(replicas(&client, &md).await, 2);
    assert!(
        !annotations(&capi_machine(&client, &old).await).contains_key(keys::capi::DELETE_MACHINE)
    );
}

#[tokio::test]
async fn delete_claim_deletes_its_bound_machine() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "delete-claim").await;
    let md = create_md(&client, &ns, "workers", 2, &[]).await;
    let a = create_capi_machine(&client, &ns, "workers", "workers-a-0", "workers-a").await;
    let b = create_capi_machine(&client, &ns, "workers", "workers-a-1", "workers-a").await;
    let cp = provider(&client);
    let claim = create_claim(&client, "to-delete").await;
    let Launch::Bound { machine, .. } = cp.launch(&claim, &md).await.expect("launch") else {
        panic!("not bound");
    };
    assert_eq!(
        cp.delete_claim(&claim).await.expect("delete"),
        DeleteOutcome::Requested
    );
    assert_eq!(replicas(&client, &md).await, 1);
    for m in [&a, &b] {
        let annotated =
            annotations(&capi_machine(&client, m).await).contains_key(keys::capi::DELETE_MACHINE);
        assert_eq!(annotated, *m == machine);
    }
    // A Machine that is gone is reported as such.
    assert_eq!(
        cp.delete_machine(
            MachineApi::Capi,
            &capi_adapter::MachineKey {
                namespace: ns.clone(),
                name: "nope".into()
            }
        )
        .await
        .expect("delete"),
        DeleteOutcome::Gone
    );
}

/// The scale write fails (here: the MachineDeployment vanished under us): the delete
/// annotations come off again, so CAPI never removes the Machine on some later scale-down.
#[tokio::test]
async fn a_failed_scale_write_removes_the_annotations() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "delete-fail").await;
    let (_md, ms) = three_machines(&client, &ns, &[]).await;
    let hooks = {
        let (client, ns) = (client.clone(), ns.clone());
        Hooks {
            before_scale_write: Some(Arc::new(move |_, _| {
                let (client, ns) = (client.clone(), ns.clone());
                Box::pin(async move {
                    kube::Api::<capi_adapter::objects::capi::MachineDeployment>::namespaced_with(
                        client, &ns, &V,
                    )
                    .delete("workers", &Default::default())
                    .await
                    .expect("delete MachineDeployment");
                })
            })),
            ..Hooks::default()
        }
    };
    let cp = provider_with_hooks(&client, hooks);
    assert!(cp.delete_machine(MachineApi::Capi, &ms[0]).await.is_err());
    let a = annotations(&capi_machine(&client, &ms[0]).await);
    assert!(!a.contains_key(keys::capi::DELETE_MACHINE));
    assert!(!a.contains_key(keys::ours::DELETE_REQUESTED));
}
