//! The third-party scalable resources on a real kube-apiserver, with their upstream CRDs:
//! a CAPI MachineDeployment (v1beta2) and an OpenShift Machine API MachineSet, each scaled
//! through its scale subresource — the only write the autoscaler makes to them.

use integration_tests::dynamic_api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::{DynamicObject, GroupVersionKind};
use serde_json::json;

async fn scale_and_check(api: &kube::Api<DynamicObject>, name: &str, replicas: i64) {
    let scale = api
        .patch_scale(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .expect("patch scale");
    // The Scale object omits a zero count.
    assert_eq!(
        scale.spec.and_then(|s| s.replicas).unwrap_or(0),
        replicas as i32
    );
    let object = api.get(name).await.expect("get");
    assert_eq!(object.data["spec"]["replicas"], json!(replicas));
    let scale = api.get_scale(name).await.expect("get scale");
    // The Scale object omits a zero count.
    assert_eq!(
        scale.spec.and_then(|s| s.replicas).unwrap_or(0),
        replicas as i32
    );
}

#[tokio::test]
async fn capi_machinedeployment_v1beta2_scales() {
    let client = testenv::client().await;
    let namespace = testenv::namespace(&client, "capi").await;
    let gvk = GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta2", "MachineDeployment");
    let api = dynamic_api(&client, &namespace, &gvk, "machinedeployments");
    let name = testenv::unique_name("md");
    let md: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "MachineDeployment",
        "metadata": {
            "name": name,
            "labels": {"node.cluster.x-k8s.io/karpenter-member": ""},
            "annotations": {
                "capacity.cluster-autoscaler.kubernetes.io/cpu": "4",
                "capacity.cluster-autoscaler.kubernetes.io/memory": "16Gi"
            }
        },
        "spec": {
            "clusterName": "test",
            "replicas": 1,
            "selector": {"matchLabels": {"pool": name}},
            "template": {
                "metadata": {"labels": {"pool": name}},
                "spec": {
                    "clusterName": "test",
                    "version": testenv::versions::KUBERNETES,
                    "bootstrap": {"configRef": {
                        "apiGroup": "bootstrap.cluster.x-k8s.io",
                        "kind": "KubeadmConfigTemplate",
                        "name": "workers"
                    }},
                    "infrastructureRef": {
                        "apiGroup": "infrastructure.cluster.x-k8s.io",
                        "kind": "DockerMachineTemplate",
                        "name": "workers"
                    }
                }
            }
        }
    }))
    .expect("MachineDeployment");
    api.create(&PostParams::default(), &md)
        .await
        .expect("create MachineDeployment");
    scale_and_check(&api, &name, 3).await;
    scale_and_check(&api, &name, 0).await;

    // The same object through the older served version (CAPI's conversion is a no-op
    // without its webhook, which is all we need from it here).
    let v1beta1 = dynamic_api(
        &client,
        &namespace,
        &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "MachineDeployment"),
        "machinedeployments",
    );
    assert_eq!(
        v1beta1.get(&name).await.expect("v1beta1 get").data["spec"]["replicas"],
        json!(0)
    );
}

#[tokio::test]
async fn openshift_machineset_scales() {
    let client = testenv::client().await;
    let namespace = testenv::namespace(&client, "openshift-machine-api").await;
    let gvk = GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "MachineSet");
    let api = dynamic_api(&client, &namespace, &gvk, "machinesets");
    let name = testenv::unique_name("ms");
    let ms: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "MachineSet",
        "metadata": {
            "name": name,
            "annotations": {
                "machine.openshift.io/vCPU": "4",
                "machine.openshift.io/memoryMb": "16384"
            }
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"machine.openshift.io/cluster-api-machineset": name}},
            "template": {
                "metadata": {"labels": {"machine.openshift.io/cluster-api-machineset": name}},
                "spec": {"providerSpec": {"value": {
                    "apiVersion": "machine.openshift.io/v1beta1",
                    "kind": "AWSMachineProviderConfig",
                    "instanceType": "m6i.xlarge",
                    "placement": {"availabilityZone": "us-east-1a", "region": "us-east-1"}
                }}}
            }
        }
    }))
    .expect("MachineSet");
    api.create(&PostParams::default(), &ms)
        .await
        .expect("create MachineSet");
    scale_and_check(&api, &name, 4).await;
    let object = api.get(&name).await.expect("get");
    // The providerSpec is kept verbatim (the adapter reads the instance type from it).
    assert_eq!(
        object.data["spec"]["template"]["spec"]["providerSpec"]["value"]["instanceType"],
        json!("m6i.xlarge")
    );
}

#[tokio::test]
async fn openshift_autoscaler_crds_are_served() {
    let client = testenv::client().await;
    let namespace = testenv::namespace(&client, "ma").await;
    let gvk = GroupVersionKind::gvk("autoscaling.openshift.io", "v1beta1", "MachineAutoscaler");
    let api = dynamic_api(&client, &namespace, &gvk, "machineautoscalers");
    let name = testenv::unique_name("ma");
    let ma: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "autoscaling.openshift.io/v1beta1",
        "kind": "MachineAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "minReplicas": 1,
            "maxReplicas": 5,
            "scaleTargetRef": {"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": "workers"}
        }
    }))
    .expect("MachineAutoscaler");
    api.create(&PostParams::default(), &ma)
        .await
        .expect("create MachineAutoscaler");
    assert_eq!(
        api.get(&name).await.expect("get").data["spec"]["maxReplicas"],
        json!(5)
    );
}
