//! Launching NodeClaims on a CAPI MachineDeployment against the real API server: replicas
//! rise by exactly the number of claims, bindings are made once, and a launch killed after
//! its scale write never raises replicas again when re-run (upstream issues #70, #87).
//! The tests play CAPI's MachineSet controller by creating the Machines themselves.

mod adapter_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use adapter_support::*;
use capi_adapter::keys;
use karpenter_capi_controller::cloudprovider::{Hooks, Launch};
use tokio::sync::mpsc;

#[tokio::test]
async fn launch_one_raises_replicas_by_one_and_binds() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "launch-one").await;
    let md = create_md(&client, &ns, "workers", 0, &[]).await;
    let cp = provider(&client);
    let claim = create_claim(&client, "one").await;

    assert_eq!(
        cp.launch(&claim, &md).await.expect("launch"),
        Launch::Waiting
    );
    assert_eq!(replicas(&client, &md).await, 1);
    // The target was recorded on the claim before the raise.
    assert_eq!(
        claim_annotations(&client, &claim).await[keys::ours::LAUNCH_TARGET],
        md.to_string()
    );
    // Calling again before CAPI made the Machine does not raise again.
    assert_eq!(
        cp.launch(&claim, &md).await.expect("launch"),
        Launch::Waiting
    );
    assert_eq!(replicas(&client, &md).await, 1);

    // CAPI creates the Machine; the next call binds it.
    let m = create_capi_machine(&client, &ns, "workers", "workers-abc-1", "workers-abc").await;
    let got = cp.launch(&claim, &md).await.expect("launch");
    assert_eq!(
        got,
        Launch::Bound {
            machine: m.clone(),
            provider_id: None
        }
    );
    let machine = capi_machine(&client, &m).await;
    let labels = machine.metadata.labels.unwrap_or_default();
    assert_eq!(labels[keys::ours::NODECLAIM_LABEL], claim);
    assert_eq!(
        claim_annotations(&client, &claim).await[keys::capi::MACHINE_ANNOTATION],
        m.to_string()
    );
    assert_eq!(replicas(&client, &md).await, 1);

    // The providerID is reported once the Machine has one.
    set_capi_provider_id(&client, &m, "docker:////workers-abc-1").await;
    let (mk, pid) = cp
        .provider_id(&claim)
        .await
        .expect("provider id")
        .expect("bound");
    assert_eq!(mk, m);
    assert_eq!(pid.as_deref(), Some("docker:////workers-abc-1"));
    assert_eq!(
        cp.launch(&claim, &md).await.expect("launch"),
        Launch::Bound {
            machine: m,
            provider_id: Some("docker:////workers-abc-1".into())
        }
    );
}

#[tokio::test]
async fn ten_concurrent_launches_raise_replicas_by_exactly_ten() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "launch-ten").await;
    let md = create_md(&client, &ns, "workers", 0, &[]).await;
    let cp = provider(&client);
    let mut claims = Vec::new();
    for i in 0..10 {
        claims.push(create_claim(&client, &format!("ten-{i}")).await);
    }
    let launches = claims.iter().map(|c| {
        let cp = cp.clone();
        let md = md.clone();
        let c = c.clone();
        tokio::spawn(async move { cp.launch(&c, &md).await })
    });
    for h in launches {
        assert_eq!(h.await.expect("join").expect("launch"), Launch::Waiting);
    }
    assert_eq!(replicas(&client, &md).await, 10);

    // CAPI creates ten Machines; launching again binds each claim to its own Machine.
    for i in 0..10 {
        create_capi_machine(
            &client,
            &ns,
            "workers",
            &format!("workers-x-{i}"),
            "workers-x",
        )
        .await;
    }
    let launches = claims.iter().map(|c| {
        let cp = cp.clone();
        let md = md.clone();
        let c = c.clone();
        tokio::spawn(async move { cp.launch(&c, &md).await })
    });
    let mut machines = std::collections::BTreeSet::new();
    for h in launches {
        match h.await.expect("join").expect("launch") {
            Launch::Bound { machine, .. } => assert!(machines.insert(machine), "bound twice"),
            other => panic!("not bound: {other:?}"),
        }
    }
    assert_eq!(machines.len(), 10);
    assert_eq!(replicas(&client, &md).await, 10);
}

#[tokio::test]
async fn existing_unbound_machines_are_used_before_raising() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "launch-reuse").await;
    let md = create_md(&client, &ns, "workers", 2, &[]).await;
    create_capi_machine(&client, &ns, "workers", "workers-a-1", "workers-a").await;
    create_capi_machine(&client, &ns, "workers", "workers-a-2", "workers-a").await;
    let cp = provider(&client);
    let mut claims = Vec::new();
    for i in 0..3 {
        claims.push(create_claim(&client, &format!("reuse-{i}")).await);
    }
    let handles: Vec<_> = claims
        .iter()
        .map(|c| {
            let (cp, md, c) = (cp.clone(), md.clone(), c.clone());
            tokio::spawn(async move { cp.launch(&c, &md).await })
        })
        .collect();
    let mut bound = 0;
    for h in handles {
        if let Launch::Bound { .. } = h.await.expect("join").expect("launch") {
            bound += 1;
        }
    }
    assert_eq!(bound, 2);
    assert_eq!(replicas(&client, &md).await, 3);
}

/// The launch task dies right after its scale write, before binding. A fresh provider
/// (a restarted controller, with no memory) re-runs the launch: no second raise, and the
/// claim binds once CAPI creates the Machine.
#[tokio::test]
async fn a_launch_killed_after_the_scale_write_does_not_raise_again() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "launch-crash").await;
    let md = create_md(&client, &ns, "workers", 1, &[]).await;
    create_capi_machine(&client, &ns, "workers", "workers-a-0", "workers-a").await;
    // That Machine serves someone else already.
    let other = create_claim(&client, "crash-other").await;
    assert!(matches!(
        provider(&client).launch(&other, &md).await.expect("launch"),
        Launch::Bound { .. }
    ));

    let (tx, mut rx) = mpsc::unbounded_channel();
    let hooks = Hooks {
        after_scale_write: Some(Arc::new(move |_, to| {
            let tx = tx.clone();
            Box::pin(async move {
                let _ = tx.send(to);
                // The process dies here: nothing after the write ever runs.
                std::future::pending::<()>().await;
            })
        })),
        ..Hooks::default()
    };
    let doomed = provider_with_hooks(&client, hooks);
    let claim = create_claim(&client, "crash").await;
    let task = {
        let (doomed, claim, md) = (doomed.clone(), claim.clone(), md.clone());
        tokio::spawn(async move { doomed.launch(&claim, &md).await })
    };
    let written = rx.recv().await.expect("scale write happened");
    assert_eq!(written, 2);
    task.abort();
    drop(doomed);
    assert_eq!(replicas(&client, &md).await, 2);

    // Restart: a new provider, nothing in memory.
    let cp = provider(&client);
    assert_eq!(
        cp.launch(&claim, &md).await.expect("launch"),
        Launch::Waiting
    );
    assert_eq!(replicas(&client, &md).await, 2);
    // Also the restart-recovery round on its own raises nothing.
    let (plan, _) = cp.reconcile_launch(&md).await.expect("reconcile");
    assert_eq!(plan.scale_to, None);
    assert_eq!(replicas(&client, &md).await, 2);

    // CAPI creates the Machine; the re-run binds it, still without raising.
    let m = create_capi_machine(&client, &ns, "workers", "workers-a-1", "workers-a").await;
    assert_eq!(
        cp.launch(&claim, &md).await.expect("launch"),
        Launch::Bound {
            machine: m,
            provider_id: None
        }
    );
    assert_eq!(replicas(&client, &md).await, 2);
}

/// Someone else changes replicas between our read and our write: the write fails with a
/// conflict, we re-read and recompute instead of overwriting their value.
#[tokio::test]
async fn a_concurrent_replica_change_is_never_overwritten() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "launch-conflict").await;
    let md = create_md(&client, &ns, "workers", 0, &[]).await;
    let fired = Arc::new(AtomicBool::new(false));
    let hooks = {
        let (client, md, fired) = (client.clone(), md.clone(), fired.clone());
        Hooks {
            before_scale_write: Some(Arc::new(move |_, _| {
                let (client, md, fired) = (client.clone(), md.clone(), fired.clone());
                Box::pin(async move {
                    if !fired.swap(true, Ordering::SeqCst) {
                        // A human scales to 5 while our write is in flight.
                        set_replicas(&client, &md, 5).await;
                    }
                })
            })),
            ..Hooks::default()
        }
    };
    let cp = provider_with_hooks(&client, hooks);
    let claim = create_claim(&client, "conflict").await;
    assert_eq!(
        cp.launch(&claim, &md).await.expect("launch"),
        Launch::Waiting
    );
    assert!(fired.load(Ordering::SeqCst));
    // Their 5 stands; our claim is covered by the 5 Machines to come, so nothing is added.
    assert_eq!(replicas(&client, &md).await, 5);
}

#[tokio::test]
async fn max_size_caps_launches() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "launch-max").await;
    let md = create_md(
        &client,
        &ns,
        "workers",
        0,
        &[(keys::capi::MAX_SIZE, "1"), (keys::capi::MIN_SIZE, "0")],
    )
    .await;
    let cp = provider(&client);
    let a = create_claim(&client, "max-a").await;
    let b = create_claim(&client, "max-b").await;
    let (ra, rb) = tokio::join!(cp.launch(&a, &md), cp.launch(&b, &md));
    let first = [ra.expect("launch a"), rb.expect("launch b")];
    // When the two launches fall into one batch, one is told it is over the max at once. On
    // a loaded machine they can land in two batches, and the first may plan before the
    // other claim's target is recorded: both are then told to wait, and the next launch
    // round (the lifecycle retries) tells the newer one. Either way, never above the max.
    assert!(
        first
            .iter()
            .all(|l| matches!(l, Launch::Waiting | Launch::AtMaxSize))
            && first.iter().filter(|l| **l == Launch::AtMaxSize).count() <= 1,
        "{first:?}"
    );
    assert_eq!(replicas(&client, &md).await, 1);
    let (ra, rb) = tokio::join!(cp.launch(&a, &md), cp.launch(&b, &md));
    let mut answers = vec![ra.expect("launch a again"), rb.expect("launch b again")];
    answers.sort_by_key(|l| format!("{l:?}"));
    assert_eq!(answers, vec![Launch::AtMaxSize, Launch::Waiting]);
    assert_eq!(replicas(&client, &md).await, 1);
}

/// A crash between labelling the Machine and annotating the claim: the re-run completes the
/// binding with the same Machine instead of taking another one or raising replicas.
#[tokio::test]
async fn a_crash_mid_binding_is_completed_with_the_same_machine() {
    use capi_adapter::objects::capi;
    use kube::api::{Patch, PatchParams};

    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "launch-midbind").await;
    let md = create_md(&client, &ns, "workers", 2, &[]).await;
    create_capi_machine(&client, &ns, "workers", "workers-a-0", "workers-a").await;
    let second = create_capi_machine(&client, &ns, "workers", "workers-a-1", "workers-a").await;
    let claim = create_claim(&client, "midbind").await;
    // What the crashed process left: the target on the claim, the label on the (second)
    // Machine, no annotation on the claim.
    kube::Api::<karpenter_api::NodeClaim>::all(client.clone())
        .patch(
            &claim,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"annotations": {
                keys::ours::LAUNCH_TARGET: md.to_string()
            }}})),
        )
        .await
        .expect("annotate claim");
    kube::Api::<capi::Machine>::namespaced_with(client.clone(), &ns, &V)
        .patch(
            &second.name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {
                "labels": {keys::ours::NODECLAIM_LABEL: claim},
                "annotations": {keys::ours::NODECLAIM_ANNOTATION: claim}
            }})),
        )
        .await
        .expect("label machine");
    let cp = provider(&client);
    assert_eq!(
        cp.launch(&claim, &md).await.expect("launch"),
        Launch::Bound {
            machine: second.clone(),
            provider_id: None
        }
    );
    assert_eq!(
        claim_annotations(&client, &claim).await[keys::capi::MACHINE_ANNOTATION],
        second.to_string()
    );
    assert_eq!(replicas(&client, &md).await, 2);
}
