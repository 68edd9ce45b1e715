//! `discover` and `setup` against the real test control plane.

#![allow(clippy::unwrap_used)]

mod support;

use capi_adapter::keys;
use capi_adapter::objects::capi;
use k8s_openapi::api::core::v1::Node;
use karpenter_api::{ClusterAPINodeClass, NodePool};
use karpenter_capi_admin::catalog::PriceCatalog;
use karpenter_capi_admin::discover;
use karpenter_capi_admin::selection::Selection;
use karpenter_capi_admin::setup::{self, SetupOptions};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::*;

const MEMBER: (&str, &str) = (keys::capi::KARPENTER_MEMBER, "");

/// Real lines of the shared AWS us-east-1 catalog.
const CATALOG: &str = "instance_type,vcpu,memory_mib,gpu,arch,on_demand_usd_per_hour\n\
m6i.xlarge,4,16384,0,amd64,0.192\n\
m6g.large,2,8192,0,arm64,0.077\n";

#[tokio::test]
async fn discover_reports_sources_prices_limits_membership_cas_and_problems() {
    let (client, ns, clusters) = setup("disc").await;
    ensure_template_crd(&client).await;
    create_template(
        &client,
        &ns,
        "sized",
        json!({"spec": {"template": {"spec": {}}},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "58"}}}),
    )
    .await;
    create_template(
        &client,
        &ns,
        "bare",
        json!({"spec": {"template": {"spec": {}}}}),
    )
    .await;
    create_cas(&client, &ns, "cluster-autoscaler", 1, &[]).await;
    let annotated = create_md(
        &client,
        &ns,
        "annotated",
        &[MEMBER],
        &[
            (keys::cas::CPU, "2"),
            (keys::cas::MEMORY, "8Gi"),
            (keys::ours::PRICE_PER_HOUR, "0.096"),
            (keys::capi::MIN_SIZE, "1"),
            (keys::capi::MAX_SIZE, "5"),
        ],
        "bare",
    )
    .await;
    let templated = create_md(&client, &ns, "templated", &[], &[], "sized").await;
    let broken = create_md(
        &client,
        &ns,
        "broken",
        &[MEMBER],
        &[(keys::cas::CPU, "two"), (keys::cas::MEMORY, "8Gi")],
        "bare",
    )
    .await;
    let os = create_os_ms(
        &client,
        &ns,
        "os",
        &[MEMBER],
        &[
            (keys::openshift::VCPU, "4"),
            (keys::openshift::MEMORY_MB, "16384"),
        ],
        "m6i.xlarge",
    )
    .await;

    let d = discover::discover(&clusters, &ns).await.unwrap();
    assert_eq!(d.resources.len(), 4);
    let get = |id: &capi_adapter::ResourceId| {
        d.resources.iter().find(|r| r.id == id.to_string()).unwrap()
    };

    let a = get(&annotated);
    assert_eq!(
        a.capacity[0].source,
        format!("annotation {}", keys::cas::CPU)
    );
    assert_eq!(a.price.per_hour, Some(0.096));
    assert_eq!((a.min, a.max), (Some(1), Some(5)));
    assert!(a.member && a.cas_active && a.cas[0].contains("cluster-autoscaler"));
    assert!(a.problems.is_empty(), "{:?}", a.problems);
    assert!(
        a.cas_differences
            .iter()
            .any(|c| c.contains("does not read prices"))
    );

    let t = get(&templated);
    assert!(
        t.capacity[0].source.contains("AdminTestMachineTemplate")
            && t.capacity[0].source.ends_with("status.capacity.cpu"),
        "{:?}",
        t.capacity[0]
    );
    assert_eq!(t.capacity[3].value.as_deref(), Some("58"));
    assert_eq!(t.price_text(), "unpriced");
    assert!(t.price.fallback_per_hour.is_some());
    assert_eq!(t.max, None);
    assert_eq!(t.max_text(), "unlimited");
    assert!(!t.member);
    assert!(t.cas.is_empty(), "no max annotation: CAS ignores it");
    assert!(
        t.cas_differences
            .iter()
            .any(|c| c.contains("no max-size annotation"))
    );

    let b = get(&broken);
    assert_eq!(b.problems.len(), 1, "{:?}", b.problems);
    assert_eq!(b.problems[0].key, keys::cas::CPU);
    assert_eq!(b.problems[0].reason, "InvalidValue");

    let o = get(&os);
    assert_eq!(o.instance_type.as_deref(), Some("m6i.xlarge"));
    assert_eq!(o.zones, vec!["us-east-1a".to_string()]);
    assert_eq!(
        o.capacity[1].source,
        format!("annotation {}", keys::openshift::MEMORY_MB)
    );
    assert_eq!(o.capacity[3].source, "default (250 as OpenShift)");
    assert!(
        o.cas.is_empty(),
        "CAS for Cluster API does not read OpenShift MachineSets"
    );
}

#[tokio::test]
async fn setup_fills_selected_resources_only_and_creates_nodeclass_and_nodepool() {
    let (client, ns, clusters) = setup("setup").await;
    ensure_template_crd(&client).await;
    create_template(
        &client,
        &ns,
        "bare",
        json!({"spec": {"template": {"spec": {}}}}),
    )
    .await;
    // OpenShift on AWS: capacity and price from the catalog by instance type.
    let os = create_os_ms(&client, &ns, "os-arm", &[], &[], "m6g.large").await;
    // CAPI: capacity from a running Node of one of its Machines; price from --price.
    let md = create_md(&client, &ns, "md", &[], &[], "bare").await;
    let node_name = testenv::unique_name("setup-node");
    let node: Node = serde_json::from_value(json!({"metadata": {"name": node_name}})).unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    nodes.create(&PostParams::default(), &node).await.unwrap();
    nodes
        .patch_status(
            &node_name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"capacity": {
            "cpu": "4", "memory": "16318976Ki", "pods": "110", "ephemeral-storage": "100Gi"}}})),
        )
        .await
        .unwrap();
    let machines: Api<capi::Machine> = Api::namespaced_with(client.clone(), &ns, &V);
    let m: capi::Machine = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": "md-1", "namespace": ns, "labels": {keys::capi::DEPLOYMENT_NAME: "md"}},
        "spec": {"clusterName": "test", "bootstrap": {"dataSecretName": "b"},
                 "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": TEMPLATE_KIND, "name": "bare"}}
    }))
    .unwrap();
    machines.create(&PostParams::default(), &m).await.unwrap();
    machines
        .patch_status(
            "md-1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"nodeRef": {"name": node_name}}})),
        )
        .await
        .unwrap();
    // Not selected: must not change.
    let untouched = create_md(&client, &ns, "untouched", &[], &[], "bare").await;
    let untouched_before = resource_json(&client, &untouched).await;

    let nodeclass = testenv::unique_name("nc");
    let nodepool = testenv::unique_name("np");
    let opts = SetupOptions {
        selection: Selection {
            names: vec![format!("{ns}/os-arm"), format!("{ns}/md")],
            selector: None,
            all: false,
        },
        catalog: Some(PriceCatalog::parse(CATALOG).unwrap()),
        price: Some(0.2),
        nodeclass: nodeclass.clone(),
        nodepool: Some(nodepool.clone()),
    };
    // --price applies to every selected unpriced resource; use the catalog price for the
    // OpenShift one by planning it separately.
    let mut os_opts = opts.clone();
    os_opts.price = None;
    os_opts.selection.names = vec![format!("{ns}/os-arm")];
    let plan = setup::plan(&clusters, &os_opts).await.unwrap();
    assert_eq!(plan.changes.len(), 1);
    let diff = plan.diff();
    assert!(
        diff.contains(&format!("+  {}: '2'", keys::openshift::VCPU))
            || diff.contains(&format!("+  {}: \"2\"", keys::openshift::VCPU)),
        "{diff}"
    );
    assert!(diff.contains("kubernetes.io/arch=arm64"), "{diff}");
    assert!(diff.contains("0.077"), "{diff}");
    assert!(
        diff.contains(&format!("+++ ClusterAPINodeClass {nodeclass} (new)")),
        "{diff}"
    );
    // Planning changed nothing.
    assert!(annotations(&client, &os).await.is_empty());
    setup::apply(&clusters, &plan).await.unwrap();

    let mut md_opts = opts.clone();
    md_opts.selection.names = vec![format!("{ns}/md")];
    let plan = setup::plan(&clusters, &md_opts).await.unwrap();
    assert_eq!(plan.changes.len(), 1, "{plan:?}");
    assert!(
        plan.changes[0]
            .reasons
            .iter()
            .any(|r| r.contains(&format!("running Node {node_name}"))),
        "{plan:?}"
    );
    assert!(
        plan.creates
            .iter()
            .find(|c| c.kind == "ClusterAPINodeClass")
            .unwrap()
            .exists
    );
    setup::apply(&clusters, &plan).await.unwrap();

    let a = annotations(&client, &md).await;
    assert_eq!(a[keys::cas::CPU], "4");
    assert_eq!(a[keys::cas::MEMORY], "16318976Ki");
    assert_eq!(a[keys::ours::PRICE_PER_HOUR], "0.2");
    let a = annotations(&client, &os).await;
    assert_eq!(a[keys::openshift::VCPU], "2");
    assert_eq!(a[keys::openshift::MEMORY_MB], "8192");
    assert_eq!(a[keys::ours::PRICE_PER_HOUR], "0.077");
    assert_eq!(
        resource_json(&client, &untouched).await,
        untouched_before,
        "an unselected resource changed"
    );

    // Both are now usable members, priced.
    let d = discover::discover(&clusters, &ns).await.unwrap();
    for id in [&os, &md] {
        let r = d.resources.iter().find(|r| r.id == id.to_string()).unwrap();
        assert!(
            r.member && r.usable() && r.price.per_hour.is_some(),
            "{r:?}"
        );
    }
    assert!(
        Api::<ClusterAPINodeClass>::all(client.clone())
            .get_opt(&nodeclass)
            .await
            .unwrap()
            .is_some()
    );
    let np = Api::<NodePool>::all(client.clone())
        .get(&nodepool)
        .await
        .unwrap();
    assert_eq!(np.spec.template.spec.node_class_ref.name, nodeclass);
    // Idempotent: a second plan has nothing to do.
    assert!(setup::plan(&clusters, &opts).await.unwrap().is_empty());
    // Nothing selected is an error, not "everything".
    let mut none = opts.clone();
    none.selection = Selection::default();
    assert!(matches!(
        setup::plan(&clusters, &none).await,
        Err(karpenter_capi_admin::Error::NothingSelected)
    ));
}
