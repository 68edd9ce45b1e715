//! `cas status|disable|enable` against the real test control plane: CAPI and OpenShift
//! round trips restored byte for byte, every refusal, and a kill at every step of `disable`
//! repaired by a rerun or undone by `enable`.

#![allow(clippy::unwrap_used)]

mod support;

use capi_adapter::keys;
use k8s_openapi::api::core::v1::ConfigMap;
use karpenter_capi_admin::Error;
use karpenter_capi_admin::cas::{self, DisableOptions, RECORD_NAME};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use support::*;

const MEMBER: (&str, &str) = (keys::capi::KARPENTER_MEMBER, "");

/// ClusterAutoscaler `default` is a cluster-wide singleton that every hand-off looks at: the
/// tests of this file run one at a time, and only this file creates it.
static SINGLETON: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn record_exists(client: &kube::Client, ns: &str) -> bool {
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(RECORD_NAME)
        .await
        .unwrap()
        .is_some()
}

#[tokio::test]
async fn capi_round_trip_restores_byte_for_byte() {
    let _guard = SINGLETON.lock().await;
    let (client, ns, clusters) = setup("cas-capi").await;
    create_cas(
        &client,
        &ns,
        "cluster-autoscaler",
        2,
        &[&format!(
            "--node-group-auto-discovery=clusterapi:namespace={ns}"
        )],
    )
    .await;
    let bounds = [
        (keys::capi::MIN_SIZE, "1"),
        (keys::capi::MAX_SIZE, "5"),
        (keys::cas::CPU, "2"),
    ];
    let member = create_md(&client, &ns, "member", &[MEMBER], &bounds, "t").await;
    let other = create_md(&client, &ns, "other", &[], &bounds, "t").await;
    let before_dep = deployment_essence(&client, &ns, "cluster-autoscaler").await;
    let before_member = annotations(&client, &member).await;
    let before_other = annotations(&client, &other).await;

    let s = cas::status(&clusters, &ns).await.unwrap();
    let m = s
        .resources
        .iter()
        .find(|r| r.resource == member.to_string())
        .unwrap();
    assert!(m.overlap && m.cas_active, "{m:?}");
    assert!(m.cas[0].contains("cluster-autoscaler"));
    assert!(s.ambiguities.is_empty(), "{:?}", s.ambiguities);

    let r = cas::disable(&clusters, &ns, &DisableOptions::default())
        .await
        .unwrap();
    assert!(!r.interrupted);
    assert!(r.warnings.iter().any(|w| w.contains("max size 5")), "{r:?}");
    assert_eq!(
        deployment(&client, &ns, "cluster-autoscaler")
            .await
            .spec
            .unwrap()
            .replicas,
        Some(0)
    );
    let a = annotations(&client, &member).await;
    assert!(
        !a.contains_key(keys::capi::MAX_SIZE) && !a.contains_key(keys::capi::MIN_SIZE),
        "{a:?}"
    );
    assert_eq!(
        annotations(&client, &other).await,
        before_other,
        "non-members keep their annotations"
    );
    let s = cas::status(&clusters, &ns).await.unwrap();
    assert_eq!(s.handoff_phase.as_deref(), Some("disabled"));
    assert!(s.overlaps().next().is_none());
    assert!(
        s.resources
            .iter()
            .any(|r| r.resource == member.to_string() && r.taken_from_cas)
    );

    // A second disable changes nothing and keeps the original values.
    cas::disable(&clusters, &ns, &DisableOptions::default())
        .await
        .unwrap();

    cas::enable(&clusters, &ns).await.unwrap();
    assert_eq!(
        deployment_essence(&client, &ns, "cluster-autoscaler").await,
        before_dep
    );
    assert_eq!(annotations(&client, &member).await, before_member);
    assert_eq!(annotations(&client, &other).await, before_other);
    assert!(!record_exists(&client, &ns).await);
    // Nothing left to enable.
    assert!(matches!(
        cas::enable(&clusters, &ns).await,
        Err(Error::NoRecord { .. })
    ));
}

#[tokio::test]
async fn openshift_round_trip_restores_byte_for_byte() {
    let _guard = SINGLETON.lock().await;
    let (client, ns, clusters) = setup("cas-os").await;
    let cas_objects = cluster_autoscalers(&client);
    // A leftover from an interrupted earlier run would make this test ambiguous.
    let _ = cas_objects.delete("default", &Default::default()).await;
    let bounds = [
        (keys::openshift::MIN_SIZE, "1"),
        (keys::openshift::MAX_SIZE, "4"),
    ];
    let ms = create_os_ms(&client, &ns, "workers-a", &[MEMBER], &bounds, "m6i.xlarge").await;
    let ma = create_machine_autoscaler(
        &client,
        &ns,
        "workers-a",
        "workers-a",
        json!({"team": "infra"}),
    )
    .await;
    let ca: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "autoscaling.openshift.io/v1",
        "kind": "ClusterAutoscaler",
        "metadata": {"name": "default", "labels": {"owner": "sre"}},
        "spec": {"podPriorityThreshold": -10, "resourceLimits": {"maxNodesTotal": 20},
                 "scaleDown": {"enabled": true, "delayAfterAdd": "10m", "unneededTime": "5m"}}
    }))
    .unwrap();
    let ca = serde_json::to_value(
        cas_objects
            .create(&PostParams::default(), &ca)
            .await
            .unwrap(),
    )
    .unwrap();
    let before_ms = annotations(&client, &ms).await;

    let body = {
        let (client, ns, clusters, cas_objects) = (
            client.clone(),
            ns.clone(),
            clusters.clone(),
            cas_objects.clone(),
        );
        tokio::spawn(async move {
            let s = cas::status(&clusters, &ns).await.unwrap();
            assert!(s.cluster_autoscaler);
            let m = s
                .resources
                .iter()
                .find(|r| r.resource == ms.to_string())
                .unwrap();
            assert!(m.overlap, "{m:?}");
            assert!(m.cas.iter().any(|c| c.contains("MachineAutoscaler")));

            cas::disable(&clusters, &ns, &DisableOptions::default())
                .await
                .unwrap();
            assert!(cas_objects.get_opt("default").await.unwrap().is_none());
            assert!(
                machine_autoscaler(&client, &ns, "workers-a")
                    .await
                    .is_none()
            );
            let a = annotations(&client, &ms).await;
            assert!(!a.contains_key(keys::openshift::MAX_SIZE), "{a:?}");

            cas::enable(&clusters, &ns).await.unwrap();
            let ca_after = serde_json::to_value(cas_objects.get("default").await.unwrap()).unwrap();
            assert_eq!(essence(&ca_after), essence(&ca));
            let ma_after = machine_autoscaler(&client, &ns, "workers-a").await.unwrap();
            assert_eq!(essence(&ma_after), essence(&ma));
            assert_eq!(annotations(&client, &ms).await, before_ms);
        })
    };
    let result = body.await;
    // Clean up the singleton even when an assertion failed, then report the failure.
    let _ = cas_objects.delete("default", &Default::default()).await;
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

fn refused(r: Result<cas::HandoffReport, Error>, needle: &str) {
    match r {
        Err(Error::Refused(msg)) => assert!(msg.contains(needle), "{msg}"),
        other => panic!("expected a refusal mentioning {needle:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn refuses_two_autoscalers_unless_forced() {
    let _guard = SINGLETON.lock().await;
    let (client, ns, clusters) = setup("cas-two").await;
    create_cas(&client, &ns, "ca-a", 1, &[]).await;
    create_cas(&client, &ns, "ca-b", 1, &[]).await;
    let member = create_md(
        &client,
        &ns,
        "m",
        &[MEMBER],
        &[(keys::capi::MAX_SIZE, "3")],
        "t",
    )
    .await;
    let before = annotations(&client, &member).await;
    refused(
        cas::disable(&clusters, &ns, &DisableOptions::default()).await,
        "more than one Cluster Autoscaler",
    );
    // Refusal changed nothing.
    assert_eq!(
        deployment(&client, &ns, "ca-a")
            .await
            .spec
            .unwrap()
            .replicas,
        Some(1)
    );
    assert_eq!(annotations(&client, &member).await, before);
    assert!(!record_exists(&client, &ns).await);

    let r = cas::disable(
        &clusters,
        &ns,
        &DisableOptions {
            force: true,
            stop_after: None,
            ..DisableOptions::default()
        },
    )
    .await
    .unwrap();
    assert!(r.warnings.iter().any(|w| w.starts_with("forced past")));
    for d in ["ca-a", "ca-b"] {
        assert_eq!(
            deployment(&client, &ns, d).await.spec.unwrap().replicas,
            Some(0)
        );
    }
    // A rerun needs no --force: both were accepted and recorded.
    cas::disable(&clusters, &ns, &DisableOptions::default())
        .await
        .unwrap();
    cas::enable(&clusters, &ns).await.unwrap();
    for d in ["ca-a", "ca-b"] {
        assert_eq!(
            deployment(&client, &ns, d).await.spec.unwrap().replicas,
            Some(1)
        );
    }
    assert_eq!(annotations(&client, &member).await, before);
}

#[tokio::test]
async fn refuses_an_autoscaler_with_an_unknown_owner() {
    let _guard = SINGLETON.lock().await;
    let (client, ns, clusters) = setup("cas-owner").await;
    let owner = Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "some-operator"}})).unwrap(),
        )
        .await
        .unwrap();
    create_cas(&client, &ns, "ca", 1, &[]).await;
    let patch = json!({"metadata": {"ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "some-operator",
        "uid": owner.metadata.uid.unwrap(), "controller": true}]}});
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), &ns)
        .patch("ca", &Default::default(), &kube::api::Patch::Merge(&patch))
        .await
        .unwrap();
    refused(
        cas::disable(&clusters, &ns, &DisableOptions::default()).await,
        "controlled by ConfigMap/some-operator",
    );
    assert_eq!(
        deployment(&client, &ns, "ca").await.spec.unwrap().replicas,
        Some(1)
    );
    assert!(!record_exists(&client, &ns).await);
}

#[tokio::test]
async fn refuses_openshift_annotations_without_a_machine_autoscaler() {
    let _guard = SINGLETON.lock().await;
    let (client, ns, clusters) = setup("cas-orphan").await;
    let ms = create_os_ms(
        &client,
        &ns,
        "w",
        &[MEMBER],
        &[(keys::openshift::MAX_SIZE, "4")],
        "m6i.xlarge",
    )
    .await;
    refused(
        cas::disable(&clusters, &ns, &DisableOptions::default()).await,
        "unknown owner",
    );
    assert!(
        annotations(&client, &ms)
            .await
            .contains_key(keys::openshift::MAX_SIZE)
    );
}

#[tokio::test]
async fn refuses_managed_service_objects() {
    let _guard = SINGLETON.lock().await;
    let (client, ns, clusters) = setup("cas-rosa").await;
    create_os_ms(
        &client,
        &ns,
        "w",
        &[MEMBER, ("hive.openshift.io/machine-pool", "workers")],
        &[(keys::openshift::MAX_SIZE, "4")],
        "m6i.xlarge",
    )
    .await;
    create_machine_autoscaler(
        &client,
        &ns,
        "w",
        "w",
        json!({"api.openshift.com/managed": "true"}),
    )
    .await;
    refused(
        cas::disable(&clusters, &ns, &DisableOptions::default()).await,
        "managed service",
    );
    assert!(machine_autoscaler(&client, &ns, "w").await.is_some());
    assert!(!record_exists(&client, &ns).await);
}

/// The objects of the kill test: a CAS Deployment, a CAPI member it manages, an OpenShift
/// member with a MachineAutoscaler: 4 changes in all.
async fn kill_fixture(
    prefix: &str,
) -> (
    kube::Client,
    String,
    karpenter_capi_admin::Clusters,
    Vec<String>,
) {
    let (client, ns, clusters) = setup(prefix).await;
    create_cas(&client, &ns, "ca", 3, &[]).await;
    let md = create_md(
        &client,
        &ns,
        "md",
        &[MEMBER],
        &[(keys::capi::MIN_SIZE, "0"), (keys::capi::MAX_SIZE, "7")],
        "t",
    )
    .await;
    let ms = create_os_ms(
        &client,
        &ns,
        "ms",
        &[MEMBER],
        &[
            (keys::openshift::MIN_SIZE, "1"),
            (keys::openshift::MAX_SIZE, "4"),
        ],
        "m6i.xlarge",
    )
    .await;
    let ma = create_machine_autoscaler(&client, &ns, "ms", "ms", json!({})).await;
    let snapshot = vec![
        deployment_essence(&client, &ns, "ca").await,
        serde_json::to_string(&annotations(&client, &md).await).unwrap(),
        serde_json::to_string(&annotations(&client, &ms).await).unwrap(),
        essence(&ma),
    ];
    (client, ns, clusters, snapshot)
}

async fn snapshot(client: &kube::Client, ns: &str) -> Vec<String> {
    use capi_adapter::{ResourceId, ResourceKind};
    vec![
        deployment_essence(client, ns, "ca").await,
        serde_json::to_string(
            &annotations(
                client,
                &ResourceId::new(ResourceKind::MachineDeployment, ns, "md"),
            )
            .await,
        )
        .unwrap(),
        serde_json::to_string(
            &annotations(
                client,
                &ResourceId::new(ResourceKind::OpenShiftMachineSet, ns, "ms"),
            )
            .await,
        )
        .unwrap(),
        machine_autoscaler(client, ns, "ms")
            .await
            .map(|v| essence(&v))
            .unwrap_or_default(),
    ]
}

#[tokio::test]
async fn a_kill_at_any_step_of_disable_is_repaired_by_rerun_or_enable() {
    let _guard = SINGLETON.lock().await;
    for stop in 0..4 {
        let (client, ns, clusters, original) = kill_fixture("cas-kill").await;
        let r = cas::disable(
            &clusters,
            &ns,
            &DisableOptions {
                force: false,
                stop_after: Some(stop),
                ..DisableOptions::default()
            },
        )
        .await
        .unwrap();
        assert!(r.interrupted, "stop {stop}");
        assert_eq!(
            cas::status(&clusters, &ns)
                .await
                .unwrap()
                .handoff_phase
                .as_deref(),
            Some("disabling")
        );
        if stop % 2 == 0 {
            // Rerun: completes the hand-off without --force, then enable restores all.
            let r = cas::disable(&clusters, &ns, &DisableOptions::default())
                .await
                .unwrap();
            assert!(!r.interrupted);
            let s = cas::status(&clusters, &ns).await.unwrap();
            assert_eq!(s.handoff_phase.as_deref(), Some("disabled"), "stop {stop}");
            assert!(s.overlaps().next().is_none(), "stop {stop}: {s:?}");
            assert_eq!(
                deployment(&client, &ns, "ca").await.spec.unwrap().replicas,
                Some(0)
            );
            assert!(machine_autoscaler(&client, &ns, "ms").await.is_none());
        }
        cas::enable(&clusters, &ns).await.unwrap();
        assert_eq!(snapshot(&client, &ns).await, original, "stop {stop}");
        assert!(!record_exists(&client, &ns).await);
    }
}
