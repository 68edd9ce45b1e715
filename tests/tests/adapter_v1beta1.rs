//! A cluster still on `cluster.x-k8s.io/v1beta1`: the same typed objects, talked to at
//! v1beta1 (v1beta1 shapes: `infrastructureRef.apiVersion`), launch and delete work alike.

use std::collections::BTreeMap;

use capi_adapter::objects::capi::{self, CapiVersion};
use capi_adapter::plan::DeleteOutcome;
use capi_adapter::{MachineApi, MachineKey, ResourceId, ResourceKind, keys};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use karpenter_api::{
    NodeClaim, NodeClaimSpec, NodeClassReference, NodeSelectorRequirementWithMinValues, Operator,
};
use karpenter_capi_controller::cloudprovider::{CloudProvider, Config, Launch};
use kube::Api;
use kube::api::PostParams;

const V1: CapiVersion = CapiVersion::V1Beta1;

fn spec() -> capi::MachineSpec {
    capi::MachineSpec {
        cluster_name: "test".into(),
        bootstrap: capi::Bootstrap {
            config_ref: None,
            data_secret_name: Some("bootstrap".into()),
        },
        infrastructure_ref: capi::ContractReference {
            api_version: Some("infrastructure.cluster.x-k8s.io/v1beta1".into()),
            kind: "DockerMachineTemplate".into(),
            name: "workers".into(),
            ..Default::default()
        },
        version: Some(testenv::versions::KUBERNETES.to_string()),
        ..Default::default()
    }
}

#[tokio::test]
async fn v1beta1_launch_and_delete() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "v1beta1").await;
    let md = capi::MachineDeployment {
        types: Some(capi::MachineDeployment::type_meta(V1)),
        metadata: ObjectMeta {
            name: Some("workers".into()),
            namespace: Some(ns.clone()),
            labels: Some([(keys::capi::KARPENTER_MEMBER.to_string(), String::new())].into()),
            annotations: Some(
                [
                    (keys::cas::CPU.to_string(), "2".to_string()),
                    (keys::cas::MEMORY.to_string(), "8Gi".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        spec: capi::MachineDeploymentSpec {
            cluster_name: "test".into(),
            replicas: Some(0),
            selector: LabelSelector {
                match_labels: Some([("pool".to_string(), "workers".to_string())].into()),
                ..Default::default()
            },
            template: capi::MachineTemplateSpec {
                metadata: capi::TemplateMeta {
                    labels: [("pool".to_string(), "workers".to_string())].into(),
                    annotations: BTreeMap::new(),
                },
                spec: spec(),
            },
            paused: None,
        },
        status: None,
    };
    Api::<capi::MachineDeployment>::namespaced_with(client.clone(), &ns, &V1)
        .create(&PostParams::default(), &md)
        .await
        .expect("create v1beta1 MachineDeployment");
    let id = ResourceId::new(ResourceKind::MachineDeployment, ns.clone(), "workers");
    let cp = CloudProvider::new(
        client.clone(),
        client.clone(),
        Config {
            capi_version: V1,
            bind_wait: std::time::Duration::ZERO,
            ..Config::default()
        },
    );
    let claim = testenv::unique_name("v1beta1");
    Api::<NodeClaim>::all(client.clone())
        .create(
            &PostParams::default(),
            &NodeClaim::new(
                &claim,
                NodeClaimSpec {
                    expire_after: None,
                    node_class_ref: NodeClassReference {
                        group: "karpenter.cluster.x-k8s.io".into(),
                        kind: "ClusterAPINodeClass".into(),
                        name: "default".into(),
                    },
                    requirements: vec![NodeSelectorRequirementWithMinValues {
                        key: "karpenter.sh/capacity-type".into(),
                        min_values: None,
                        operator: Operator::In,
                        values: Some(vec!["on-demand".into()]),
                    }],
                    resources: None,
                    startup_taints: None,
                    taints: None,
                    termination_grace_period: None,
                },
            ),
        )
        .await
        .expect("create NodeClaim");
    assert_eq!(
        cp.launch(&claim, &id).await.expect("launch"),
        Launch::Waiting
    );
    let machines: Api<capi::Machine> = Api::namespaced_with(client.clone(), &ns, &V1);
    let got = Api::<capi::MachineDeployment>::namespaced_with(client.clone(), &ns, &V1)
        .get("workers")
        .await
        .expect("get");
    assert_eq!(got.spec.replicas, Some(1));
    // (Fields that differ between versions, like infrastructureRef.apiVersion, do not
    // survive here: the test control plane runs no CAPI conversion webhook, so objects are
    // stored as v1beta2 unconverted. The adapter's reading of both shapes is unit-tested.)
    let m = capi::Machine {
        types: Some(capi::Machine::type_meta(V1)),
        metadata: ObjectMeta {
            name: Some("workers-a-0".into()),
            namespace: Some(ns.clone()),
            labels: Some(
                [
                    (
                        keys::capi::DEPLOYMENT_NAME.to_string(),
                        "workers".to_string(),
                    ),
                    (keys::capi::SET_NAME.to_string(), "workers-a".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        spec: spec(),
        status: None,
    };
    machines
        .create(&PostParams::default(), &m)
        .await
        .expect("create v1beta1 Machine");
    let key = MachineKey {
        namespace: ns.clone(),
        name: "workers-a-0".into(),
    };
    assert_eq!(
        cp.launch(&claim, &id).await.expect("launch"),
        Launch::Bound {
            machine: key.clone(),
            provider_id: None
        }
    );
    assert_eq!(
        cp.delete_machine(MachineApi::Capi, &key)
            .await
            .expect("delete"),
        DeleteOutcome::Requested
    );
    let got = Api::<capi::MachineDeployment>::namespaced_with(client.clone(), &ns, &V1)
        .get("workers")
        .await
        .expect("get");
    assert_eq!(got.spec.replicas, Some(0));
    let annotations = machines
        .get("workers-a-0")
        .await
        .expect("get Machine")
        .metadata
        .annotations
        .unwrap_or_default();
    assert!(annotations.contains_key(keys::capi::DELETE_MACHINE));
}
