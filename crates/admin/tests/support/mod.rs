//! Objects the admin tests create on the test control plane: CAPI MachineDeployments,
//! OpenShift MachineSets, cluster-autoscaler Deployments (objects only: nothing runs them),
//! OpenShift's ClusterAutoscaler and MachineAutoscalers, a test infrastructure template kind.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;

use capi_adapter::objects::capi::{self, CapiVersion};
use capi_adapter::objects::openshift;
use capi_adapter::{ResourceId, ResourceKind};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use karpenter_capi_admin::Clusters;
use karpenter_capi_admin::cas::detect::{cluster_autoscaler_resource, machine_autoscaler_resource};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

pub const V: CapiVersion = CapiVersion::V1Beta2;
pub const TEMPLATE_KIND: &str = "AdminTestMachineTemplate";

pub async fn setup(prefix: &str) -> (Client, String, Clusters) {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, prefix).await;
    let clusters = Clusters::single(client.clone()).scoped(&[&ns]);
    (client, ns, clusters)
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

/// A v1beta2 MachineDeployment pointing at template `template` of [`TEMPLATE_KIND`].
pub async fn create_md(
    client: &Client,
    ns: &str,
    name: &str,
    labels: &[(&str, &str)],
    annotations: &[(&str, &str)],
    template: &str,
) -> ResourceId {
    let md = capi::MachineDeployment {
        types: Some(capi::MachineDeployment::type_meta(V)),
        metadata: meta(name, ns, labels, annotations),
        spec: capi::MachineDeploymentSpec {
            cluster_name: "test".into(),
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some([("pool".to_string(), name.to_string())].into()),
                ..Default::default()
            },
            template: capi::MachineTemplateSpec {
                metadata: capi::TemplateMeta {
                    labels: [("pool".to_string(), name.to_string())].into(),
                    annotations: BTreeMap::new(),
                },
                spec: capi::MachineSpec {
                    cluster_name: "test".into(),
                    bootstrap: capi::Bootstrap {
                        config_ref: None,
                        data_secret_name: Some("bootstrap".into()),
                    },
                    infrastructure_ref: capi::ContractReference {
                        api_group: Some("infrastructure.cluster.x-k8s.io".into()),
                        kind: TEMPLATE_KIND.into(),
                        name: template.into(),
                        ..Default::default()
                    },
                    version: Some(testenv::versions::KUBERNETES.to_string()),
                    ..Default::default()
                },
            },
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

/// An OpenShift MachineSet on AWS (`instance_type` in its providerSpec).
pub async fn create_os_ms(
    client: &Client,
    ns: &str,
    name: &str,
    labels: &[(&str, &str)],
    annotations: &[(&str, &str)],
    instance_type: &str,
) -> ResourceId {
    let mut ms = openshift::MachineSet {
        types: Some(openshift::MachineSet::type_meta()),
        metadata: meta(name, ns, labels, annotations),
        ..Default::default()
    };
    let owner = capi_adapter::keys::openshift::MACHINESET_LABEL.to_string();
    ms.spec.replicas = Some(1);
    ms.spec.selector = LabelSelector {
        match_labels: Some([(owner.clone(), name.to_string())].into()),
        ..Default::default()
    };
    ms.spec.template.metadata.labels = [(owner, name.to_string())].into();
    ms.spec.template.spec.provider_spec.value = Some(json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "AWSMachineProviderConfig",
        "instanceType": instance_type,
        "placement": {"availabilityZone": "us-east-1a", "region": "us-east-1"}
    }));
    Api::<openshift::MachineSet>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &ms)
        .await
        .expect("create OpenShift MachineSet");
    ResourceId::new(ResourceKind::OpenShiftMachineSet, ns, name)
}

/// A cluster-autoscaler Deployment for Cluster API (nothing runs it).
pub async fn create_cas(client: &Client, ns: &str, name: &str, replicas: i32, extra_args: &[&str]) {
    let mut args = vec![
        "--cloud-provider=clusterapi".to_string(),
        "--v=4".to_string(),
    ];
    args.extend(extra_args.iter().map(|s| s.to_string()));
    let d: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name},
                     "annotations": {"note": "restored byte for byte"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "cluster-autoscaler",
                    "image": "registry.k8s.io/autoscaling/cluster-autoscaler:v1.35.0",
                    "command": ["/cluster-autoscaler"],
                    "args": args
                }]}
            }
        }
    }))
    .unwrap();
    Api::<Deployment>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &d)
        .await
        .expect("create CAS Deployment");
}

pub async fn deployment(client: &Client, ns: &str, name: &str) -> Deployment {
    Api::<Deployment>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
}

/// The parts of an object a restore must give back: labels, annotations, spec (as JSON text).
pub fn essence(v: &Value) -> String {
    let m = &v["metadata"];
    serde_json::to_string(&json!({
        "labels": m.get("labels"),
        "annotations": m.get("annotations"),
        "ownerReferences": m.get("ownerReferences"),
        "spec": v.get("spec"),
    }))
    .unwrap()
}

pub async fn deployment_essence(client: &Client, ns: &str, name: &str) -> String {
    essence(&serde_json::to_value(deployment(client, ns, name).await).unwrap())
}

fn resource_ar(id: &ResourceId) -> ApiResource {
    match id.kind {
        ResourceKind::OpenShiftMachineSet => ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "MachineSet"),
            "machinesets",
        ),
        ResourceKind::MachineDeployment => ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "MachineDeployment"),
            "machinedeployments",
        ),
        ResourceKind::MachineSet => ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "MachineSet"),
            "machinesets",
        ),
    }
}

/// The resource as JSON.
pub async fn resource_json(client: &Client, id: &ResourceId) -> Value {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &id.namespace, &resource_ar(id));
    serde_json::to_value(api.get(&id.name).await.unwrap()).unwrap()
}

pub async fn annotations(client: &Client, id: &ResourceId) -> BTreeMap<String, String> {
    let v = resource_json(client, id).await;
    serde_json::from_value(v["metadata"]["annotations"].clone()).unwrap_or_default()
}

pub async fn create_machine_autoscaler(
    client: &Client,
    ns: &str,
    name: &str,
    target: &str,
    labels: Value,
) -> Value {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &machine_autoscaler_resource());
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "autoscaling.openshift.io/v1beta1",
        "kind": "MachineAutoscaler",
        "metadata": {"name": name, "namespace": ns, "labels": labels,
                     "annotations": {"created-by": "admin test"}},
        "spec": {"minReplicas": 1, "maxReplicas": 4,
                 "scaleTargetRef": {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": target}}
    }))
    .unwrap();
    serde_json::to_value(
        api.create(&PostParams::default(), &obj)
            .await
            .expect("create MachineAutoscaler"),
    )
    .unwrap()
}

pub async fn machine_autoscaler(client: &Client, ns: &str, name: &str) -> Option<Value> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &machine_autoscaler_resource());
    api.get_opt(name)
        .await
        .unwrap()
        .map(|o| serde_json::to_value(o).unwrap())
}

pub fn cluster_autoscalers(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &cluster_autoscaler_resource())
}

/// The test infrastructure template kind (a CRD in the infrastructure group, status kept).
pub async fn ensure_template_crd(client: &Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "admintestmachinetemplates.infrastructure.cluster.x-k8s.io",
                     "labels": {"cluster.x-k8s.io/v1beta2": "v1beta1"}},
        "spec": {
            "group": "infrastructure.cluster.x-k8s.io",
            "names": {"kind": TEMPLATE_KIND, "plural": "admintestmachinetemplates", "singular": "admintestmachinetemplate", "listKind": "AdminTestMachineTemplateList"},
            "scope": "Namespaced",
            "versions": [{"name": "v1beta1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        "admintestmachinetemplates.infrastructure.cluster.x-k8s.io",
        &PatchParams::apply("admin-tests").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("apply template CRD");
    // Wait until the kind is served.
    let ar = template_ar();
    for _ in 0..100 {
        let probe: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
        if probe.list(&Default::default()).await.is_ok() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("template CRD not served");
}

pub fn template_ar() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("infrastructure.cluster.x-k8s.io", "v1beta1", TEMPLATE_KIND),
        "admintestmachinetemplates",
    )
}

pub async fn create_template(client: &Client, ns: &str, name: &str, body: Value) {
    let mut v = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
        "kind": TEMPLATE_KIND,
        "metadata": {"name": name, "namespace": ns},
    });
    for (k, val) in body.as_object().unwrap() {
        v[k] = val.clone();
    }
    let obj: DynamicObject = serde_json::from_value(v).unwrap();
    Api::<DynamicObject>::namespaced_with(client.clone(), ns, &template_ar())
        .create(&PostParams::default(), &obj)
        .await
        .expect("create template");
}
