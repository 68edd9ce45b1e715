//! Shared setup for the adapter tests: CAPI and OpenShift scalable resources, Machines (the
//! tests play CAPI's MachineSet controller by creating them) and NodeClaims on the real test
//! API server. Every test uses its own namespace and unique NodeClaim names.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use capi_adapter::objects::capi::{self, CapiVersion};
use capi_adapter::objects::openshift;
use capi_adapter::{MachineKey, ResourceId, ResourceKind, keys};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use karpenter_api::{
    NodeClaim, NodeClaimSpec, NodeClassReference, NodeSelectorRequirementWithMinValues, Operator,
};
use karpenter_capi_controller::cloudprovider::{CloudProvider, Config, Hooks};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

pub const V: CapiVersion = CapiVersion::V1Beta2;

/// A config for tests: upstream's batch windows, no waiting for Machines (the tests create
/// them themselves, between calls).
pub fn config() -> Config {
    Config {
        bind_wait: Duration::ZERO,
        ..Config::default()
    }
}

pub fn provider(client: &Client) -> CloudProvider {
    CloudProvider::new(client.clone(), client.clone(), config())
}

pub fn provider_with_hooks(client: &Client, hooks: Hooks) -> CloudProvider {
    CloudProvider::with_hooks(client.clone(), client.clone(), config(), hooks)
}

fn meta(name: &str, ns: &str, labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> ObjectMeta {
    let map = |kv: &[(&str, &str)]| -> Option<BTreeMap<String, String>> {
        Some(
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    };
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(ns.to_string()),
        labels: map(labels),
        annotations: map(annotations),
        ..ObjectMeta::default()
    }
}

fn capi_template(pool: &str) -> capi::MachineTemplateSpec {
    capi::MachineTemplateSpec {
        metadata: capi::TemplateMeta {
            labels: [("pool".to_string(), pool.to_string())].into(),
            annotations: BTreeMap::new(),
        },
        spec: machine_spec(),
    }
}

fn machine_spec() -> capi::MachineSpec {
    capi::MachineSpec {
        cluster_name: "test".into(),
        bootstrap: capi::Bootstrap {
            config_ref: None,
            data_secret_name: Some("bootstrap".into()),
        },
        infrastructure_ref: capi::ContractReference {
            api_group: Some("infrastructure.cluster.x-k8s.io".into()),
            kind: "DockerMachineTemplate".into(),
            name: "workers".into(),
            ..Default::default()
        },
        version: Some(testenv::versions::KUBERNETES.to_string()),
        ..Default::default()
    }
}

/// A member MachineDeployment (v1beta2) with capacity annotations plus `extra`.
pub async fn create_md(
    client: &Client,
    ns: &str,
    name: &str,
    replicas: i32,
    extra: &[(&str, &str)],
) -> ResourceId {
    let mut annotations = vec![
        (keys::cas::CPU, "2"),
        (keys::cas::MEMORY, "8Gi"),
        (keys::ours::PRICE_PER_HOUR, "0.1"),
    ];
    annotations.extend_from_slice(extra);
    let md = capi::MachineDeployment {
        types: Some(capi::MachineDeployment::type_meta(V)),
        metadata: meta(
            name,
            ns,
            &[(keys::capi::KARPENTER_MEMBER, "")],
            &annotations,
        ),
        spec: capi::MachineDeploymentSpec {
            cluster_name: "test".into(),
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some([("pool".to_string(), name.to_string())].into()),
                ..Default::default()
            },
            template: capi_template(name),
            paused: None,
        },
        status: None,
    };
    Api::<capi::MachineDeployment>::namespaced_with(client.clone(), ns, &V)
        .create(&PostParams::default(), &md)
        .await
        .expect("create MachineDeployment");
    ResourceId::new(ResourceKind::MachineDeployment, ns, name)
}

/// What CAPI's MachineSet controller would create for MachineDeployment `md`.
pub async fn create_capi_machine(
    client: &Client,
    ns: &str,
    md: &str,
    name: &str,
    set: &str,
) -> MachineKey {
    let m = capi::Machine {
        types: Some(capi::Machine::type_meta(V)),
        metadata: meta(
            name,
            ns,
            &[
                (keys::capi::DEPLOYMENT_NAME, md),
                (keys::capi::SET_NAME, set),
                ("cluster.x-k8s.io/cluster-name", "test"),
                ("pool", md),
            ],
            &[],
        ),
        spec: machine_spec(),
        status: None,
    };
    Api::<capi::Machine>::namespaced_with(client.clone(), ns, &V)
        .create(&PostParams::default(), &m)
        .await
        .expect("create Machine");
    MachineKey {
        namespace: ns.to_string(),
        name: name.to_string(),
    }
}

pub async fn capi_machine(client: &Client, key: &MachineKey) -> capi::Machine {
    Api::<capi::Machine>::namespaced_with(client.clone(), &key.namespace, &V)
        .get(&key.name)
        .await
        .expect("get Machine")
}

pub async fn set_capi_provider_id(client: &Client, key: &MachineKey, pid: &str) {
    Api::<capi::Machine>::namespaced_with(client.clone(), &key.namespace, &V)
        .patch(
            &key.name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"providerID": pid}})),
        )
        .await
        .expect("set providerID");
}

/// A member OpenShift Machine API MachineSet (AWS providerSpec) with `extra` annotations.
pub async fn create_os_machineset(
    client: &Client,
    ns: &str,
    name: &str,
    replicas: i32,
    extra: &[(&str, &str)],
) -> ResourceId {
    let mut annotations = vec![
        (keys::openshift::VCPU, "4"),
        (keys::openshift::MEMORY_MB, "16384"),
    ];
    annotations.extend_from_slice(extra);
    let mut ms = openshift::MachineSet {
        types: Some(openshift::MachineSet::type_meta()),
        metadata: meta(
            name,
            ns,
            &[(keys::capi::KARPENTER_MEMBER, "")],
            &annotations,
        ),
        ..Default::default()
    };
    ms.spec.replicas = Some(replicas);
    ms.spec.selector = LabelSelector {
        match_labels: Some(
            [(
                keys::openshift::MACHINESET_LABEL.to_string(),
                name.to_string(),
            )]
            .into(),
        ),
        ..Default::default()
    };
    ms.spec.template.metadata.labels = [(
        keys::openshift::MACHINESET_LABEL.to_string(),
        name.to_string(),
    )]
    .into();
    ms.spec.template.spec.provider_spec.value = Some(json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "AWSMachineProviderConfig",
        "instanceType": "m6i.xlarge",
        "placement": {"availabilityZone": "us-east-1a", "region": "us-east-1"}
    }));
    Api::<openshift::MachineSet>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &ms)
        .await
        .expect("create OpenShift MachineSet");
    ResourceId::new(ResourceKind::OpenShiftMachineSet, ns, name)
}

pub async fn create_os_machine(client: &Client, ns: &str, set: &str, name: &str) -> MachineKey {
    let mut m = openshift::Machine {
        types: Some(openshift::Machine::type_meta()),
        metadata: meta(name, ns, &[(keys::openshift::MACHINESET_LABEL, set)], &[]),
        ..Default::default()
    };
    m.spec.provider_spec.value = Some(json!({"instanceType": "m6i.xlarge"}));
    Api::<openshift::Machine>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &m)
        .await
        .expect("create OpenShift Machine");
    MachineKey {
        namespace: ns.to_string(),
        name: name.to_string(),
    }
}

pub async fn os_machine(client: &Client, key: &MachineKey) -> openshift::Machine {
    Api::<openshift::Machine>::namespaced(client.clone(), &key.namespace)
        .get(&key.name)
        .await
        .expect("get OpenShift Machine")
}

/// A NodeClaim with a unique name.
pub async fn create_claim(client: &Client, prefix: &str) -> String {
    let name = testenv::unique_name(prefix);
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
    );
    Api::<NodeClaim>::all(client.clone())
        .create(&PostParams::default(), &claim)
        .await
        .expect("create NodeClaim");
    name
}

pub async fn claim_annotations(client: &Client, name: &str) -> BTreeMap<String, String> {
    Api::<NodeClaim>::all(client.clone())
        .get(name)
        .await
        .expect("get NodeClaim")
        .metadata
        .annotations
        .unwrap_or_default()
}

/// `spec.replicas` through the scale subresource (absent = 0).
pub async fn replicas(client: &Client, id: &ResourceId) -> i32 {
    let scale = match id.kind {
        ResourceKind::MachineDeployment => {
            Api::<capi::MachineDeployment>::namespaced_with(client.clone(), &id.namespace, &V)
                .get_scale(&id.name)
                .await
        }
        ResourceKind::MachineSet => {
            Api::<capi::MachineSet>::namespaced_with(client.clone(), &id.namespace, &V)
                .get_scale(&id.name)
                .await
        }
        ResourceKind::OpenShiftMachineSet => {
            Api::<openshift::MachineSet>::namespaced(client.clone(), &id.namespace)
                .get_scale(&id.name)
                .await
        }
    }
    .expect("get scale");
    scale.spec.and_then(|s| s.replicas).unwrap_or(0)
}

/// Sets replicas as another actor would (a human, CAS).
pub async fn set_replicas(client: &Client, id: &ResourceId, n: i32) {
    let patch = Patch::Merge(json!({"spec": {"replicas": n}}));
    let pp = PatchParams::default();
    match id.kind {
        ResourceKind::MachineDeployment => {
            Api::<capi::MachineDeployment>::namespaced_with(client.clone(), &id.namespace, &V)
                .patch_scale(&id.name, &pp, &patch)
                .await
        }
        ResourceKind::MachineSet => {
            Api::<capi::MachineSet>::namespaced_with(client.clone(), &id.namespace, &V)
                .patch_scale(&id.name, &pp, &patch)
                .await
        }
        ResourceKind::OpenShiftMachineSet => {
            Api::<openshift::MachineSet>::namespaced(client.clone(), &id.namespace)
                .patch_scale(&id.name, &pp, &patch)
                .await
        }
    }
    .expect("patch scale");
}
