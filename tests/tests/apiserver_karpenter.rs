//! Our CRDs on a real kube-apiserver: objects are created, read and updated through the
//! typed API, the API server applies upstream's defaults, and it rejects what upstream's
//! CRD validation rejects.

use integration_tests::{api_error, valid_nodepool_json};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use karpenter_api::{
    ClusterAPINodeClass, ClusterAPINodeClassSpec, ClusterAPINodeClassStatus, ConsolidationPolicy,
    DriftPolicy, NodeClaim, NodeClaimSpec, NodeClassReference, NodePool, NodePoolStatus,
    NodeSelectorRequirementWithMinValues, Operator, ScalableResourceKind,
};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

fn condition(type_: &str, status: &str, reason: &str) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: String::new(),
        last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
        observed_generation: Some(1),
    }
}

#[tokio::test]
async fn our_crds_are_served() {
    let client = testenv::client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    for name in [
        "nodepools.karpenter.sh",
        "nodeclaims.karpenter.sh",
        "clusterapinodeclasses.karpenter.cluster.x-k8s.io",
    ] {
        let crd = crds
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        assert!(established, "{name} not established");
    }
}

#[tokio::test]
async fn nodepool_create_read_update() {
    let client = testenv::client().await;
    let api: Api<NodePool> = Api::all(client);
    let name = testenv::unique_name("np");
    let pool: NodePool = serde_json::from_value(valid_nodepool_json(&name)).expect("typed");
    api.create(&PostParams::default(), &pool)
        .await
        .expect("create");

    // The API server fills in upstream's defaults.
    let mut read = api.get(&name).await.expect("get");
    let disruption = read.spec.disruption.clone().expect("defaulted disruption");
    assert_eq!(disruption.consolidate_after.0, "0s");
    assert_eq!(
        disruption.consolidation_policy,
        Some(ConsolidationPolicy::WhenEmptyOrUnderutilized)
    );
    assert_eq!(disruption.budgets.expect("budgets")[0].nodes, "10%");
    assert_eq!(
        read.spec
            .template
            .spec
            .expire_after
            .as_ref()
            .map(|d| d.0.as_str()),
        Some("720h")
    );

    read.spec.weight = Some(50);
    api.replace(&name, &PostParams::default(), &read)
        .await
        .expect("update");
    assert_eq!(api.get(&name).await.expect("get").spec.weight, Some(50));

    let status = NodePoolStatus {
        nodes: Some(3),
        conditions: Some(vec![condition("Ready", "True", "Ready")]),
        resources: Some(
            [(
                "cpu".to_string(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity("12".into()),
            )]
            .into(),
        ),
        ..NodePoolStatus::default()
    };
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .expect("status");
    let read = api.get(&name).await.expect("get");
    let status = read.status.expect("status");
    assert_eq!(status.nodes, Some(3));
    assert_eq!(status.conditions.expect("conditions")[0].type_, "Ready");
}

#[tokio::test]
async fn static_nodepool_scales_through_the_scale_subresource() {
    let client = testenv::client().await;
    let api: Api<NodePool> = Api::all(client);
    let name = testenv::unique_name("static");
    let mut body = valid_nodepool_json(&name);
    body["spec"]["replicas"] = json!(2);
    body["spec"].as_object_mut().expect("spec").remove("weight");
    let pool: NodePool = serde_json::from_value(body).expect("typed");
    api.create(&PostParams::default(), &pool)
        .await
        .expect("create");
    api.patch_scale(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .expect("scale");
    assert_eq!(api.get(&name).await.expect("get").spec.replicas, Some(5));
}

#[tokio::test]
async fn invalid_nodepools_are_rejected() {
    let client = testenv::client().await;
    let api: Api<DynamicObject> = Api::all_with(client, &ApiResource::erase::<NodePool>(&()));

    // The unbroken object is accepted (so each rejection below is about its one change).
    let ok = testenv::unique_name("valid");
    let object: DynamicObject = serde_json::from_value(valid_nodepool_json(&ok)).expect("dyn");
    api.create(&PostParams::default(), &object)
        .await
        .expect("valid NodePool accepted");

    type Breaker = fn(&mut serde_json::Value);
    let cases: Vec<(&str, Breaker, &str)> = vec![
        (
            "weight 0",
            |v| v["spec"]["weight"] = json!(0),
            "spec.weight",
        ),
        (
            "weight 101",
            |v| v["spec"]["weight"] = json!(101),
            "spec.weight",
        ),
        (
            "label in the karpenter.sh domain",
            |v| v["spec"]["template"]["metadata"]["labels"] = json!({"karpenter.sh/custom": "x"}),
            "label domain \"karpenter.sh\" is restricted",
        ),
        (
            "nodepool label",
            |v| v["spec"]["template"]["metadata"]["labels"] = json!({"karpenter.sh/nodepool": "x"}),
            "label \"karpenter.sh/nodepool\" is restricted",
        ),
        (
            "hostname label",
            |v| {
                v["spec"]["template"]["metadata"]["labels"] = json!({"kubernetes.io/hostname": "x"})
            },
            "label \"kubernetes.io/hostname\" is restricted",
        ),
        (
            "requirement on karpenter.sh/nodepool",
            |v| {
                v["spec"]["template"]["spec"]["requirements"] =
                    json!([{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]}])
            },
            "label \"karpenter.sh/nodepool\" is restricted",
        ),
        (
            "unknown operator",
            |v| v["spec"]["template"]["spec"]["requirements"][0]["operator"] = json!("Like"),
            "Unsupported value",
        ),
        (
            "In without values",
            |v| {
                v["spec"]["template"]["spec"]["requirements"] =
                    json!([{"key": "a", "operator": "In"}])
            },
            "requirements with operator 'In' must have a value defined",
        ),
        (
            "Gt with a non-integer",
            |v| {
                v["spec"]["template"]["spec"]["requirements"] =
                    json!([{"key": "a", "operator": "Gt", "values": ["1", "2"]}])
            },
            "must have a single positive integer value",
        ),
        (
            "minValues above the values",
            |v| {
                v["spec"]["template"]["spec"]["requirements"] =
                    json!([{"key": "a", "operator": "In", "values": ["1"], "minValues": 2}])
            },
            "must have at least that many values",
        ),
        (
            "minValues 51",
            |v| v["spec"]["template"]["spec"]["requirements"][0]["minValues"] = json!(51),
            "minValues",
        ),
        (
            "bad expireAfter",
            |v| v["spec"]["template"]["spec"]["expireAfter"] = json!("forever"),
            "expireAfter",
        ),
        (
            "bad taint effect",
            |v| {
                v["spec"]["template"]["spec"]["taints"] =
                    json!([{"key": "a", "effect": "Sometimes"}])
            },
            "effect",
        ),
        (
            "bad consolidation policy",
            |v| {
                v["spec"]["disruption"] =
                    json!({"consolidateAfter": "1m", "consolidationPolicy": "Sometimes"})
            },
            "consolidationPolicy",
        ),
        (
            "budget schedule without duration",
            |v| v["spec"]["disruption"] = json!({"consolidateAfter": "1m", "budgets": [{"nodes": "1", "schedule": "@daily"}]}),
            "'schedule' must be set with 'duration'",
        ),
        (
            "budget of 101%",
            |v| {
                v["spec"]["disruption"] =
                    json!({"consolidateAfter": "1m", "budgets": [{"nodes": "101%"}]})
            },
            "nodes",
        ),
        (
            "empty nodeClassRef name",
            |v| v["spec"]["template"]["spec"]["nodeClassRef"]["name"] = json!(""),
            "name may not be empty",
        ),
        (
            "weight on a static NodePool",
            |v| v["spec"]["replicas"] = json!(1),
            "'weight' is not supported on static NodePools",
        ),
    ];
    for (what, breaker, expected) in cases {
        let name = testenv::unique_name("invalid");
        let mut body = valid_nodepool_json(&name);
        breaker(&mut body);
        let object: DynamicObject = serde_json::from_value(body).expect("dyn");
        let result = api.create(&PostParams::default(), &object).await;
        let (code, message) =
            api_error(&result).unwrap_or_else(|| panic!("{what}: accepted ({result:?})"));
        assert_eq!(code, 422, "{what}: {message}");
        assert!(message.contains(expected), "{what}: {message}");
    }
}

#[tokio::test]
async fn nodeclaim_spec_is_immutable_and_status_is_writable() {
    let client = testenv::client().await;
    let api: Api<NodeClaim> = Api::all(client);
    let name = testenv::unique_name("nc");
    let claim = NodeClaim::new(
        &name,
        NodeClaimSpec {
            expire_after: None,
            node_class_ref: NodeClassReference {
                group: "karpenter.cluster.x-k8s.io".into(),
                kind: "ClusterAPINodeClass".into(),
                name: "default".into(),
            },
            requirements: vec![NodeSelectorRequirementWithMinValues {
                key: "node.kubernetes.io/instance-type".into(),
                min_values: None,
                operator: Operator::In,
                values: Some(vec!["small".into()]),
            }],
            resources: None,
            startup_taints: None,
            taints: None,
            termination_grace_period: None,
        },
    );
    api.create(&PostParams::default(), &claim)
        .await
        .expect("create");
    let mut read = api.get(&name).await.expect("get");
    read.spec.requirements[0].values = Some(vec!["large".into()]);
    let result = api.replace(&name, &PostParams::default(), &read).await;
    let (code, message) = api_error(&result).expect("spec change rejected");
    assert_eq!(code, 422);
    assert!(message.contains("spec is immutable"), "{message}");

    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "providerID": "capi://test/1",
            "conditions": [condition("Launched", "True", "")],
        }})),
    )
    .await
    .expect("status");
    let status = api.get(&name).await.expect("get").status.expect("status");
    assert_eq!(status.provider_id.as_deref(), Some("capi://test/1"));
}

#[tokio::test]
async fn nodeclass_create_read_update() {
    let client = testenv::client().await;
    let api: Api<ClusterAPINodeClass> = Api::all(client);
    let name = testenv::unique_name("capinc");
    let class = ClusterAPINodeClass::new(
        &name,
        ClusterAPINodeClassSpec {
            scalable_resource_selector: LabelSelector {
                match_labels: Some(
                    [(
                        "node.cluster.x-k8s.io/karpenter-member".to_string(),
                        String::new(),
                    )]
                    .into(),
                ),
                match_expressions: None,
            },
            scalable_resource_kinds: Some(vec![ScalableResourceKind::MachineDeployment]),
            drift_policy: Some(DriftPolicy::CapiRollout),
            overhead: None,
        },
    );
    api.create(&PostParams::default(), &class)
        .await
        .expect("create");
    let mut read = api.get(&name).await.expect("get");
    assert_eq!(read.spec, class.spec);

    read.spec.scalable_resource_kinds = None;
    read.spec.drift_policy = Some(DriftPolicy::Karpenter);
    api.replace(&name, &PostParams::default(), &read)
        .await
        .expect("update");
    let read = api.get(&name).await.expect("get");
    assert_eq!(
        read.spec.kinds_or_default(),
        ScalableResourceKind::ALL.to_vec()
    );
    assert_eq!(read.spec.drift_policy, Some(DriftPolicy::Karpenter));

    let status = ClusterAPINodeClassStatus {
        conditions: Some(vec![condition("Ready", "False", "NoScalableResources")]),
        scalable_resources: Some(vec![]),
    };
    api.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .expect("status");
    let status = api.get(&name).await.expect("get").status.expect("status");
    assert_eq!(
        status.conditions.expect("conditions")[0].reason,
        "NoScalableResources"
    );

    // An unknown drift policy is refused by the schema.
    let dynamic: Api<DynamicObject> = Api::all_with(
        api.clone().into_client(),
        &ApiResource::erase::<ClusterAPINodeClass>(&()),
    );
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1",
        "kind": "ClusterAPINodeClass",
        "metadata": {"name": testenv::unique_name("bad")},
        "spec": {"scalableResourceSelector": {}, "driftPolicy": "Whenever"}
    }))
    .expect("dyn");
    let result = dynamic.create(&PostParams::default(), &bad).await;
    assert_eq!(api_error(&result).map(|(code, _)| code), Some(422));
}
