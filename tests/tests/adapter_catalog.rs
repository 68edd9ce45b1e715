//! Instance types read through the controller from a real API server: capacity from an
//! infrastructure template's status and from annotations (CAPI and OpenShift), problems for
//! bad annotations and missing templates, a launch chosen from a NodeClaim's requirements,
//! the providerID index, and drift.

mod adapter_support;

use std::time::Duration;

use adapter_support::*;
use capi_adapter::objects::capi;
use capi_adapter::{DriftPolicy, ProblemError, keys};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use karpenter_api::nodeclass::{ClusterAPINodeClass, ClusterAPINodeClassSpec};
use karpenter_api::{
    NodeClaim, NodeClaimSpec, NodeClassReference, NodeSelectorRequirementWithMinValues, Operator,
};
use karpenter_capi_controller::cloudprovider::{
    CloudProvider, Config, Launch, ProviderIdIndex, nodeclass_status,
};
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Client};
use provisioner_core::CapacityType;
use serde_json::json;

const GROUP: &str = "infrastructure.adapter-test.karpenter-capi.dev";
const KIND: &str = "AdapterTestMachineTemplate";

/// A test-only infrastructure template kind (the real ones come with providers we do not
/// install); applied idempotently, shared by every run.
async fn ensure_template_crd(client: &Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("adaptertestmachinetemplates.{GROUP}")},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "plural": "adaptertestmachinetemplates", "singular": "adaptertestmachinetemplate", "listKind": "AdapterTestMachineTemplateList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1beta1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .expect("CRD");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        &format!("adaptertestmachinetemplates.{GROUP}"),
        &PatchParams::apply("adapter-tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("apply CRD");
    // Served (and discoverable) before use.
    for _ in 0..100 {
        if kube::discovery::group(client, GROUP)
            .await
            .ok()
            .and_then(|g| g.recommended_kind(KIND))
            .is_some()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{KIND} never became discoverable");
}

async fn create_template(client: &Client, ns: &str, name: &str) {
    let gvk = GroupVersionKind::gvk(GROUP, "v1beta1", KIND);
    let ar = ApiResource::from_gvk_with_plural(&gvk, "adaptertestmachinetemplates");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1beta1"),
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {"template": {"spec": {}}},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"},
            "nodeInfo": {"architecture": "arm64", "operatingSystem": "linux"}
        }
    }))
    .expect("template");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create template");
}

async fn label_and_point(
    client: &Client,
    ns: &str,
    md: &str,
    test_label: &str,
    template: &str,
    drop_capacity: bool,
) {
    let mut annotations = json!({});
    if drop_capacity {
        annotations = json!({keys::cas::CPU: null, keys::cas::MEMORY: null});
    }
    Api::<capi::MachineDeployment>::namespaced_with(client.clone(), ns, &V)
        .patch(
            md,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"labels": {"adapter-test": test_label}, "annotations": annotations},
                "spec": {"template": {"spec": {"infrastructureRef": {
                    "apiGroup": GROUP, "kind": KIND, "name": template
                }}}}
            })),
        )
        .await
        .expect("patch MachineDeployment");
}

async fn create_nodeclass(client: &Client, test_label: &str) -> ClusterAPINodeClass {
    let nc = ClusterAPINodeClass::new(
        &testenv::unique_name("capinc"),
        ClusterAPINodeClassSpec {
            scalable_resource_selector: LabelSelector {
                match_labels: Some([("adapter-test".to_string(), test_label.to_string())].into()),
                ..Default::default()
            },
            scalable_resource_kinds: None,
            drift_policy: None,
            overhead: None,
        },
    );
    Api::<ClusterAPINodeClass>::all(client.clone())
        .create(&PostParams::default(), &nc)
        .await
        .expect("create NodeClass")
}

#[tokio::test]
async fn catalog_from_templates_and_annotations_with_problems() {
    let client = testenv::client().await;
    ensure_template_crd(&client).await;
    let ns = testenv::namespace(&client, "catalog").await;
    let test_label = ns.clone();

    create_template(&client, &ns, "arm-gpu").await;
    create_md(&client, &ns, "from-template", 0, &[]).await;
    label_and_point(&client, &ns, "from-template", &test_label, "arm-gpu", true).await;
    create_md(
        &client,
        &ns,
        "bad-taints",
        0,
        &[(keys::cas::TAINTS, "gpu=true:Sometimes")],
    )
    .await;
    label_and_point(&client, &ns, "bad-taints", &test_label, "arm-gpu", false).await;
    create_md(&client, &ns, "no-template", 0, &[]).await;
    label_and_point(
        &client,
        &ns,
        "no-template",
        &test_label,
        "does-not-exist",
        false,
    )
    .await;
    let os = create_os_machineset(
        &client,
        &ns,
        "worker-a",
        0,
        &[(keys::ours::PRICE_PER_HOUR, "0.192")],
    )
    .await;
    Api::<capi_adapter::objects::openshift::MachineSet>::namespaced(client.clone(), &ns)
        .patch(
            "worker-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"adapter-test": test_label}}})),
        )
        .await
        .expect("label MachineSet");

    let nodeclass = create_nodeclass(&client, &test_label).await;
    let cp = provider(&client);
    let catalog = cp
        .catalog(&nodeclass, CloudProvider::now())
        .await
        .expect("catalog");

    let by_name = |n: &str| {
        catalog
            .instance_types
            .iter()
            .find(|i| i.name == n)
            .unwrap_or_else(|| panic!("no instance type {n}"))
    };
    // The bad taint entry does not drop the resource (CAS keeps its group too): it is kept
    // as a NoSchedule taint and reported.
    assert_eq!(catalog.instance_types.len(), 3);
    let bad_taints = by_name(&format!("{ns}.bad-taints"));
    assert_eq!(bad_taints.taints.len(), 1);
    assert_eq!(bad_taints.taints[0].key, "gpu");
    assert_eq!(
        bad_taints.taints[0].effect,
        provisioner_core::TaintEffect::NoSchedule
    );
    let from_template = by_name(&format!("{ns}.from-template"));
    assert_eq!(from_template.capacity.cpu_milli, 8000);
    assert_eq!(from_template.capacity.memory, 32 << 30);
    assert_eq!(from_template.capacity.extended["nvidia.com/gpu"], 1);
    assert_eq!(from_template.labels["kubernetes.io/arch"], "arm64");
    let os_type = by_name("m6i.xlarge");
    assert_eq!(os_type.capacity.cpu_milli, 4000);
    assert_eq!(os_type.offerings[0].zone, "us-east-1a");
    assert_eq!(os_type.offerings[0].price, 0.192);
    assert_eq!(os_type.offerings[0].capacity_type, CapacityType::OnDemand);

    let mut problems: Vec<(String, String)> = catalog
        .problems
        .iter()
        .map(|p| (p.object.name.clone(), p.key.clone()))
        .collect();
    problems.sort();
    assert_eq!(
        problems,
        vec![
            ("bad-taints".to_string(), keys::cas::TAINTS.to_string()),
            (
                "no-template".to_string(),
                "spec.template.spec.infrastructureRef".to_string()
            ),
        ]
    );
    assert!(
        catalog
            .problems
            .iter()
            .any(|p| matches!(p.error, ProblemError::TemplateNotFound { .. }))
    );

    // The NodeClass status names the objects and keys at fault; the API server accepts it.
    let status = nodeclass_status(
        &catalog,
        nodeclass.metadata.generation,
        None,
        Time(Timestamp::now()),
    );
    let ncs: Api<ClusterAPINodeClass> = Api::all(client.clone());
    let written = ncs
        .patch_status(
            nodeclass.metadata.name.as_deref().unwrap_or_default(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .expect("write status")
        .status
        .expect("status");
    let ready = &written.conditions.expect("conditions")[0];
    assert_eq!(
        (ready.type_.as_str(), ready.status.as_str()),
        ("Ready", "False")
    );
    // Only the resource left out (its template is missing) makes the NodeClass not Ready;
    // the bad taint entry of a resource that is still offered is a warning in its row.
    assert_eq!(ready.reason, "TemplateNotFound", "{}", ready.message);
    assert!(
        !ready.message.contains(keys::cas::TAINTS),
        "{}",
        ready.message
    );
    let rows = written.scalable_resources.expect("rows");
    assert_eq!(rows.len(), 4);
    let bad = rows
        .iter()
        .find(|r| r.name == "bad-taints")
        .expect("bad row");
    // Kept (with its instance type) and its bad entry reported.
    assert!(
        bad.instance_type.as_deref() == Some(format!("{ns}.bad-taints").as_str())
            && bad
                .message
                .as_deref()
                .unwrap_or_default()
                .contains("Sometimes")
    );

    // A NodeClaim asking for the OpenShift instance type launches there.
    let claim = testenv::unique_name("catalog-claim");
    let nc = NodeClaim::new(
        &claim,
        NodeClaimSpec {
            expire_after: None,
            node_class_ref: NodeClassReference {
                group: "karpenter.cluster.x-k8s.io".into(),
                kind: "ClusterAPINodeClass".into(),
                name: nodeclass.metadata.name.clone().unwrap_or_default(),
            },
            requirements: vec![NodeSelectorRequirementWithMinValues {
                key: "node.kubernetes.io/instance-type".into(),
                min_values: None,
                operator: Operator::In,
                values: Some(vec!["m6i.xlarge".into()]),
            }],
            resources: None,
            startup_taints: None,
            taints: None,
            termination_grace_period: None,
        },
    );
    let nc = Api::<NodeClaim>::all(client.clone())
        .create(&PostParams::default(), &nc)
        .await
        .expect("create NodeClaim");
    assert_eq!(
        cp.launch_claim(&nc, &catalog).await.expect("launch"),
        Launch::Waiting
    );
    assert_eq!(replicas(&client, &os).await, 1);
}

#[tokio::test]
async fn provider_id_index_follows_machines() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "index").await;
    create_md(&client, &ns, "workers", 1, &[]).await;
    let cp = provider(&client);
    let index = ProviderIdIndex::default();
    let _watches = cp.watch_provider_ids(&index, true);
    let m = create_capi_machine(&client, &ns, "workers", "workers-a-0", "workers-a").await;
    let pid = format!("test:///{ns}/workers-a-0");
    set_capi_provider_id(&client, &m, &pid).await;
    let os = create_os_machine(&client, &ns, "worker-os", "worker-os-0").await;
    let os_pid = format!("aws:///us-east-1a/i-{ns}");
    Api::<capi_adapter::objects::openshift::Machine>::namespaced(client.clone(), &ns)
        .patch(
            &os.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"providerID": os_pid}})),
        )
        .await
        .expect("set providerID");
    let mut found = (None, None);
    for _ in 0..100 {
        found = (index.get(&pid), index.get(&os_pid));
        if found.0.is_some() && found.1.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(found.0.expect("CAPI Machine indexed").key, m);
    assert_eq!(found.1.expect("OpenShift Machine indexed").key, os);
    Api::<capi::Machine>::namespaced_with(client.clone(), &ns, &V)
        .delete(&m.name, &Default::default())
        .await
        .expect("delete Machine");
    for _ in 0..100 {
        if index.get(&pid).is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("deleted Machine still indexed");
}

#[tokio::test]
async fn a_template_change_is_reported_as_drift_unless_capi_rolls_out() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "drift").await;
    let md = create_md(&client, &ns, "workers", 1, &[]).await;
    create_capi_machine(&client, &ns, "workers", "workers-a-0", "workers-a").await;
    let cp = provider(&client);
    let claim = create_claim(&client, "drift").await;
    assert!(matches!(
        cp.launch(&claim, &md).await.expect("launch"),
        Launch::Bound { .. }
    ));
    assert_eq!(
        cp.drift(&claim, DriftPolicy::Karpenter)
            .await
            .expect("drift"),
        None
    );
    Api::<capi::MachineDeployment>::namespaced_with(client.clone(), &ns, &V)
        .patch(
            "workers",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"infrastructureRef": {"name": "workers-v2"}}}}})),
        )
        .await
        .expect("change template");
    assert!(matches!(
        cp.drift(&claim, DriftPolicy::Karpenter)
            .await
            .expect("drift"),
        Some(capi_adapter::drift::DriftReason::TemplateChanged { .. })
    ));
    assert_eq!(
        cp.drift(&claim, DriftPolicy::CAPIRollout)
            .await
            .expect("drift"),
        None
    );
}

/// A cloud provider for which every Machine without a providerID has failed, backing its
/// resource off for 600 s.
fn failing_launches(client: &Client) -> CloudProvider {
    CloudProvider::new(
        client.clone(),
        client.clone(),
        Config {
            provider_id_timeout_secs: -1,
            backoff_window_secs: 600,
            ..config()
        },
    )
}

/// Machines that get no providerID in time put their resource in back-off: its offering
/// turns unavailable in the catalog for the configured window.
#[tokio::test]
async fn launch_failures_make_a_resource_unavailable_for_a_while() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "backoff").await;
    let md = create_md(&client, &ns, "workers", 1, &[]).await;
    ensure_template_crd(&client).await;
    create_template(&client, &ns, "arm-gpu").await;
    label_and_point(&client, &ns, "workers", &ns, "arm-gpu", false).await;
    create_capi_machine(&client, &ns, "workers", "workers-a-0", "workers-a").await;
    let nodeclass = create_nodeclass(&client, &ns).await;
    let cp = failing_launches(&client);
    let now = CloudProvider::now();
    let before = cp.catalog(&nodeclass, now).await.expect("catalog");
    assert!(before.resources[&md].available(), "{:?}", before.problems);
    let failures = cp
        .check_launch_failures(std::slice::from_ref(&md), now)
        .await
        .expect("check");
    assert_eq!(failures.len(), 1);
    let after = cp.catalog(&nodeclass, now).await.expect("catalog");
    assert!(!after.resources[&md].available());
    assert!(!after.instance_types[0].offerings[0].available);
    let later = cp.catalog(&nodeclass, now + 601).await.expect("catalog");
    assert!(later.resources[&md].available());
}

/// Two instance types of one zone failing take the zone out: the third resource there turns
/// unavailable with them (`ZoneBackOff`), the same type in another zone stays available.
#[tokio::test]
async fn failures_of_two_types_in_a_zone_back_off_the_zone() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "zone-backoff").await;
    let mut ids = Vec::new();
    for (name, ty, zone) in [
        ("small-a", "small", "z1"),
        ("large-a", "large", "z1"),
        ("xl-a", "xl", "z1"),
        ("small-b", "small", "z2"),
    ] {
        let labels =
            format!("node.kubernetes.io/instance-type={ty},topology.kubernetes.io/zone={zone}");
        let id = create_md(
            &client,
            &ns,
            name,
            1,
            &[(keys::cas::LABELS, labels.as_str())],
        )
        .await;
        Api::<capi::MachineDeployment>::namespaced_with(client.clone(), &ns, &V)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"adapter-test": ns}}})),
            )
            .await
            .expect("label MachineDeployment");
        ids.push(id);
    }
    // Machines of the first two that never get a providerID.
    create_capi_machine(&client, &ns, "small-a", "small-a-0", "small-a-s").await;
    create_capi_machine(&client, &ns, "large-a", "large-a-0", "large-a-s").await;
    let nodeclass = create_nodeclass(&client, &ns).await;
    let cp = failing_launches(&client);
    let now = CloudProvider::now();
    let before = cp.catalog(&nodeclass, now).await.expect("catalog");
    assert!(
        ids.iter().all(|id| before.resources[id].available()),
        "{:?}",
        before.problems
    );
    let failures = cp.check_launch_failures(&ids, now).await.expect("check");
    assert_eq!(failures.len(), 2, "{failures:?}");
    let after = cp.catalog(&nodeclass, now).await.expect("catalog");
    let status = |i: usize| after.resources[&ids[i]].unavailable.clone();
    assert!(matches!(
        status(0),
        Some(capi_adapter::instance_types::Unavailable::BackOff { .. })
    ));
    assert!(matches!(
        status(2),
        Some(capi_adapter::instance_types::Unavailable::ZoneBackOff { types: 2, .. })
    ));
    assert_eq!(status(3), None, "the other zone is not affected");
    let later = cp.catalog(&nodeclass, now + 601).await.expect("catalog");
    assert!(ids.iter().all(|id| later.resources[id].available()));
}
