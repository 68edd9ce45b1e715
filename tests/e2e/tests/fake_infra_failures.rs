//! The fake provider's failure knobs, through the real CAPI controllers: a launch that fails
//! for capacity never gets a providerID (and says why on the InfraMachine), and a node that
//! never registers gets a providerID but no Node. The controller's back-off and registration
//! timeout scenarios build on these.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kcapi_fake_infra::fixtures::{ClusterFixture, MachineDeploymentSpec, Shape, wait_for};
use kcapi_fake_infra::{CAPACITY_FAILURE_REASON, MACHINE_KIND, annotations, crd};
use kube::Api;
use kube::api::{DynamicObject, ListParams};
use serde_json::Value;

#[tokio::test]
#[ignore = "needs the e2e environment: cargo xtask e2e"]
async fn launches_fail_for_capacity_or_never_register_on_request() {
    let env = testenv::e2e_env();
    let client = testenv::e2e_client().await;
    let ns = testenv::namespace(&client, "e2e-fake-failures").await;
    let cluster = ClusterFixture::create(&client, &env.kubeconfig, &ns, "failures")
        .await
        .expect("cluster fixture");

    let message = "no 4x8 capacity in the test zone";
    let mut spec = MachineDeploymentSpec::new("no-capacity", Shape::new("4", "8Gi"));
    spec.template_annotations =
        BTreeMap::from([(annotations::FAIL_LAUNCH.to_string(), message.to_string())]);
    let failing = cluster.machine_deployment(&spec).await.expect("md");
    let mut spec = MachineDeploymentSpec::new("ghost", Shape::new("2", "4Gi"));
    spec.template_annotations =
        BTreeMap::from([(annotations::NEVER_REGISTER.to_string(), "true".to_string())]);
    let ghost = cluster.machine_deployment(&spec).await.expect("md");
    failing.scale(1).await.expect("scale");
    ghost.scale(1).await.expect("scale");

    let infra: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &crd::api_resource(MACHINE_KIND));
    let infra_of = |machine: &DynamicObject| {
        machine
            .data
            .pointer("/spec/infrastructureRef/name")
            .and_then(Value::as_str)
            .map(str::to_string)
    };

    // The capacity failure: reason and message on the InfraMachine, no providerID anywhere.
    wait_for("the failing launch reported", 90, || async {
        let Some(machine) = failing.machines().await?.into_iter().next() else {
            return Ok(false);
        };
        let Some(name) = infra_of(&machine) else {
            return Ok(false);
        };
        let Some(im) = infra.get_opt(&name).await? else {
            return Ok(false);
        };
        Ok(im
            .data
            .pointer("/status/failureReason")
            .and_then(Value::as_str)
            == Some(CAPACITY_FAILURE_REASON))
    })
    .await
    .expect("capacity failure");
    let machine = failing.machines().await.expect("list").remove(0);
    let im = infra
        .get(&infra_of(&machine).expect("ref"))
        .await
        .expect("infra machine");
    assert_eq!(
        im.data
            .pointer("/status/failureMessage")
            .and_then(Value::as_str),
        Some(message)
    );
    let ready = im
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .expect("Ready condition");
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], CAPACITY_FAILURE_REASON);
    assert!(im.data.pointer("/spec/providerID").is_none());

    // The ghost: providerID on the Machine (CAPI copies it), but no Node and no nodeRef.
    wait_for("the ghost Machine has a providerID", 90, || async {
        Ok(ghost.machines().await?.iter().any(|m| {
            m.data
                .pointer("/spec/providerID")
                .and_then(Value::as_str)
                .is_some()
        }))
    })
    .await
    .expect("providerID");
    // Give a (wrongly) created Node time to show up before asserting it never did.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let machine = ghost.machines().await.expect("list").remove(0);
    let provider_id = machine
        .data
        .pointer("/spec/providerID")
        .and_then(Value::as_str)
        .expect("providerID")
        .to_string();
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes");
    assert!(
        !nodes
            .items
            .iter()
            .any(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref())
                == Some(provider_id.as_str())),
        "no Node for {provider_id}"
    );
    assert!(machine.data.pointer("/status/nodeRef/name").is_none());
    // The failing Machine never got a providerID either, and CAPI mirrors the failure into
    // its InfrastructureReady condition (and the deprecated v1beta1 failureReason), which is
    // what the controller sees.
    wait_for("CAPI mirrors the failure onto the Machine", 60, || async {
        let machine = failing.machines().await?.remove(0);
        Ok(machine
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c["type"] == "InfrastructureReady"
                        && c["status"] == "False"
                        && c["reason"] == CAPACITY_FAILURE_REASON
                        && c["message"] == message
                })
            }))
    })
    .await
    .expect("Machine InfrastructureReady=False/InsufficientCapacity");
    let machine = failing.machines().await.expect("list").remove(0);
    assert!(machine.data.pointer("/spec/providerID").is_none());
    assert_eq!(
        machine
            .data
            .pointer("/status/deprecated/v1beta1/failureReason")
            .and_then(Value::as_str),
        Some(CAPACITY_FAILURE_REASON)
    );
}
