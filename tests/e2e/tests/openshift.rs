//! Scenario 8: OpenShift Machine API. A `machine.openshift.io/v1beta1` MachineSet shaped as
//! the machine-api-operator annotates one on AWS (vCPU, memoryMb) with our price, the
//! unregistered taint in its template as docs/openshift-aws.md asks, and the fake Machine API
//! of the environment (`kcapi_fake_infra::openshift`: MachineSet and Machine controllers and
//! nodelink, which copies Machine taints back onto Nodes). Pending pods -> NodeClaims ->
//! MachineSet replicas -> Machines bound to the claims -> Nodes registered, the taint gone
//! from Machine and Node and staying gone -> pods Running; then scale to zero ->
//! consolidation deletes the Machines through `machine.openshift.io/delete-machine` and
//! lowers replicas to 0.

use std::time::Duration;

use capi_adapter::keys;
use e2e_tests::{SCOPE, Scenario, wait_for};
use k8s_openapi::api::core::v1::Node;
use kcapi_fake_infra::openshift::OPT_IN_LABEL;
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("machine.openshift.io", "v1beta1", kind),
        plural,
    )
}

fn has_unregistered(taints: Option<&Vec<Value>>) -> bool {
    taints.is_some_and(|ts| {
        ts.iter()
            .any(|t| t.get("key").and_then(Value::as_str) == Some("karpenter.sh/unregistered"))
    })
}

#[tokio::test]
#[ignore = "needs the e2e environment: cargo xtask e2e"]
async fn openshift_machineset_scale_out_and_in() {
    let s = Scenario::new("e2e-ocp").await;
    let ns = s.ns.clone();
    let name = "worker-us-east-1a";
    let set: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "MachineSet",
        "metadata": {
            "name": name,
            "labels": {
                OPT_IN_LABEL: "true",
                SCOPE: ns,
                keys::capi::KARPENTER_MEMBER: "",
                "machine.openshift.io/cluster-api-cluster": "ocp-e2e",
            },
            "annotations": {
                "machine.openshift.io/vCPU": "4",
                "machine.openshift.io/memoryMb": "16384",
                "machine.openshift.io/GPU": "0",
                keys::ours::PRICE_PER_HOUR: "0.192",
                "machine.openshift.io/cluster-api-autoscaler-node-group-min-size": "0",
                "machine.openshift.io/cluster-api-autoscaler-node-group-max-size": "5",
            }
        },
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"machine.openshift.io/cluster-api-machineset": name}},
            "template": {
                "metadata": {"labels": {
                    "machine.openshift.io/cluster-api-machineset": name,
                    "machine.openshift.io/cluster-api-cluster": "ocp-e2e",
                }},
                "spec": {
                    "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}],
                    "providerSpec": {"value": {
                        "apiVersion": "machine.openshift.io/v1beta1",
                        "kind": "AWSMachineProviderConfig",
                        "instanceType": "m6i.xlarge",
                        "placement": {"availabilityZone": "us-east-1a", "region": "us-east-1"}
                    }}
                }
            }
        }
    }))
    .expect("machineset json");
    let sets: Api<DynamicObject> = Api::namespaced_with(
        s.client.clone(),
        &ns,
        &resource("MachineSet", "machinesets"),
    );
    let machines: Api<DynamicObject> =
        Api::namespaced_with(s.client.clone(), &ns, &resource("Machine", "machines"));
    sets.create(&PostParams::default(), &set)
        .await
        .expect("create machineset");
    s.nodepool(
        json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}),
    )
    .await;
    let running = s.start(s.options()).await;

    // Three pods of 1 CPU fit one 4-CPU m6i.xlarge.
    s.deployment("web", 3, "1", "1Gi").await;
    let hosts = s.wait_running("web", 3, 180).await;
    let replicas = sets
        .get(name)
        .await
        .expect("machineset")
        .data
        .pointer("/spec/replicas")
        .and_then(Value::as_i64);
    assert_eq!(
        replicas,
        Some(hosts.len() as i64),
        "one Machine per node the pods run on"
    );
    let list = machines
        .list(&ListParams::default())
        .await
        .expect("machines")
        .items;
    for m in &list {
        assert!(
            m.labels().contains_key(keys::ours::NODECLAIM_LABEL),
            "{} is bound to a claim: {:?}",
            m.name_any(),
            m.labels()
        );
        assert!(
            !has_unregistered(m.data.pointer("/spec/taints").and_then(Value::as_array)),
            "the taint left Machine {}",
            m.name_any()
        );
    }
    // nodelink runs every 250 ms: a taint left on the Machine would be back by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let nodes: Api<Node> = Api::all(s.client.clone());
    for host in &hosts {
        let node = nodes.get(host).await.expect("node");
        let taints: Vec<Value> = node
            .spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect();
        assert!(!has_unregistered(Some(&taints)), "{host}: {taints:?}");
    }
    e2e_tests::report(
        "openshift",
        &format!(
            "3 pods Running on {} m6i.xlarge node(s) after {:.1} s",
            hosts.len(),
            s.elapsed()
        ),
    );

    // Scale in: the empty node is consolidated, its Machine deleted, replicas back to 0.
    s.scale_deployment("web", 0).await;
    wait_for("MachineSet at 0 replicas and no Machines", 180, || async {
        let r = sets
            .get(name)
            .await?
            .data
            .pointer("/spec/replicas")
            .and_then(Value::as_i64);
        let left = machines.list(&ListParams::default()).await?.items.len();
        Ok(r == Some(0) && left == 0 && s.claims().await.is_empty())
    })
    .await
    .expect("scaled in");
    e2e_tests::report(
        "openshift",
        &format!("scaled in after {:.1} s", s.elapsed()),
    );
    running.stop();
}
