//! A fake OpenShift Machine API for AWS: what the machine-api-operator's MachineSet, Machine
//! and nodelink controllers do, for `machine.openshift.io/v1beta1` MachineSets that opt in
//! with [`OPT_IN_LABEL`] (so the guides' and other tests' MachineSets in the same API server
//! are left alone). Level-triggered, listed every tick, like [`crate::provider`]:
//!
//! - MachineSet controller: Machines from `spec.template` (labels, `spec.metadata`,
//!   `spec.taints`, `providerSpec`), owned by the MachineSet, up to `spec.replicas`; above it,
//!   Machines annotated `machine.openshift.io/delete-machine` go first, then the newest.
//!   `status.replicas` / `readyReplicas` / `availableReplicas` follow.
//! - Machine controller (the AWS actuator plus the kubelet joining): after a short delay, a
//!   providerID (`aws:///<zone>/i-<hash>`), the Node with the shape of the MachineSet's
//!   `machine.openshift.io/vCPU` / `memoryMb` / `maxPods` annotations and the instance type,
//!   zone and region labels, kwok's annotation; `status.nodeRef` and phase `Running`. No
//!   taints at registration: OpenShift's kubelet has no per-MachineSet taints.
//! - nodelink: on every tick, each Machine's `spec.taints` missing on its Node are added to
//!   the Node, as the real controller does on every Node update (so a taint removed from the
//!   Node but left on the Machine comes back, which is what the controller must handle).
//! - A Machine that is gone takes its Node along (the real Machine controller drains and
//!   deletes it before removing its finalizer; here Machines have no finalizer).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tracing::{info, warn};

use crate::{Error, KWOK_ANNOTATION, Result};

/// MachineSets with this label (any value) are run by the fake Machine API.
pub const OPT_IN_LABEL: &str = "fake-infra.test.karpenter-capi.dev/openshift";
/// The label on Nodes made here: the Machine's `<namespace>.<name>`.
pub const NODE_MACHINE_LABEL: &str = "fake-infra.test.karpenter-capi.dev/openshift-machine";
const MACHINESET_LABEL: &str = "machine.openshift.io/cluster-api-machineset";
const DELETE_ANNOTATION: &str = "machine.openshift.io/delete-machine";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("machine.openshift.io", "v1beta1", kind),
        plural,
    )
}

/// Runs until the task is dropped; errors are logged and retried on the next tick.
pub async fn run(client: Client, tick: Duration, delay: Duration) {
    info!("fake OpenShift Machine API running");
    loop {
        if let Err(e) = pass(&client, delay).await {
            warn!("fake Machine API tick: {e}");
        }
        tokio::time::sleep(tick).await;
    }
}

async fn pass(client: &Client, delay: Duration) -> Result<()> {
    let sets: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("MachineSet", "machinesets"));
    let sets = match sets.list(&ListParams::default().labels(OPT_IN_LABEL)).await {
        Ok(l) => l.items,
        // No OpenShift CRDs in this API server: nothing to run.
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    let all_machines: Api<DynamicObject> =
        Api::all_with(client.clone(), &resource("Machine", "machines"));
    let machines = all_machines.list(&ListParams::default()).await?.items;
    let nodes: Api<Node> = Api::all(client.clone());
    for set in &sets {
        let ns = set.namespace().unwrap_or_default();
        let name = set.name_any();
        let mine: Vec<&DynamicObject> = machines
            .iter()
            .filter(|m| m.namespace().as_deref() == Some(ns.as_str()))
            .filter(|m| m.labels().get(MACHINESET_LABEL) == Some(&name))
            .collect();
        scale(client, set, &mine).await?;
        for m in &mine {
            if m.metadata.deletion_timestamp.is_none() {
                provision(client, set, m, delay).await?;
                nodelink(&nodes, m).await?;
            }
        }
        let running = mine
            .iter()
            .filter(|m| m.data.pointer("/status/nodeRef").is_some())
            .count();
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &resource("MachineSet", "machinesets"));
        let status = json!({"status": {
            "replicas": mine.len(), "fullyLabeledReplicas": mine.len(),
            "readyReplicas": running, "availableReplicas": running,
            "observedGeneration": set.metadata.generation,
        }});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
    }
    // Nodes whose Machine is gone.
    let made = nodes
        .list(&ListParams::default().labels(NODE_MACHINE_LABEL))
        .await?;
    for node in made.items {
        let key = node
            .labels()
            .get(NODE_MACHINE_LABEL)
            .cloned()
            .unwrap_or_default();
        let exists = machines
            .iter()
            .any(|m| format!("{}.{}", m.namespace().unwrap_or_default(), m.name_any()) == key);
        if !exists {
            info!(node = %node.name_any(), "fake Machine API: machine gone, deleting its node");
            let _ = nodes
                .delete(&node.name_any(), &DeleteParams::default())
                .await;
        }
    }
    Ok(())
}

/// The MachineSet controller: create up to replicas, delete down to it.
async fn scale(client: &Client, set: &DynamicObject, mine: &[&DynamicObject]) -> Result<()> {
    let ns = set.namespace().unwrap_or_default();
    let name = set.name_any();
    let want = set
        .data
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let alive: Vec<&&DynamicObject> = mine
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .collect();
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &resource("Machine", "machines"));
    let have = i64::try_from(alive.len()).unwrap_or(i64::MAX);
    if have < want {
        let template = set
            .data
            .pointer("/spec/template")
            .cloned()
            .unwrap_or(Value::Null);
        for _ in have..want {
            let mut labels: BTreeMap<String, String> = template
                .pointer("/metadata/labels")
                .and_then(|l| serde_json::from_value(l.clone()).ok())
                .unwrap_or_default();
            labels.insert(MACHINESET_LABEL.into(), name.clone());
            let machine: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "machine.openshift.io/v1beta1",
                "kind": "Machine",
                "metadata": {
                    "generateName": format!("{name}-"),
                    "namespace": ns,
                    "labels": labels,
                    "ownerReferences": [{
                        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
                        "name": name, "uid": set.metadata.uid, "controller": true,
                        "blockOwnerDeletion": true
                    }]
                },
                "spec": template.get("spec").cloned().unwrap_or(json!({})),
            }))
            .map_err(|e| Error::Invalid(format!("machine: {e}")))?;
            api.create(&PostParams::default(), &machine).await?;
        }
    } else if have > want {
        let mut victims = alive.clone();
        // Annotated first, then the newest.
        victims.sort_by_key(|m| {
            (
                !m.annotations().contains_key(DELETE_ANNOTATION),
                std::cmp::Reverse(m.metadata.creation_timestamp.clone().map(|t| t.0)),
            )
        });
        let surplus = usize::try_from(have - want).unwrap_or(0);
        for m in victims.into_iter().take(surplus) {
            info!(machine = %m.name_any(), "fake MachineSet controller: deleting");
            let _ = api.delete(&m.name_any(), &DeleteParams::default()).await;
        }
    }
    Ok(())
}

/// The AWS actuator and the kubelet: providerID, Node, nodeRef.
async fn provision(
    client: &Client,
    set: &DynamicObject,
    m: &DynamicObject,
    delay: Duration,
) -> Result<()> {
    if m.data.pointer("/status/nodeRef").is_some() {
        return Ok(());
    }
    let created = m
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(Timestamp::now(), |t| t.0);
    let age = Timestamp::now().duration_since(created);
    if age.as_millis() < i128::try_from(delay.as_millis()).unwrap_or(i128::MAX) {
        return Ok(());
    }
    let ns = m.namespace().unwrap_or_default();
    let name = m.name_any();
    let provider = m
        .data
        .pointer("/spec/providerSpec/value")
        .cloned()
        .unwrap_or(Value::Null);
    let zone = provider
        .pointer("/placement/availabilityZone")
        .and_then(Value::as_str)
        .unwrap_or("us-east-1a")
        .to_string();
    let region = provider
        .pointer("/placement/region")
        .and_then(Value::as_str)
        .unwrap_or("us-east-1")
        .to_string();
    let instance_type = provider
        .get("instanceType")
        .and_then(Value::as_str)
        .unwrap_or("m6i.large")
        .to_string();
    let hash = format!("{:016x}", fnv(&format!("{ns}/{name}")));
    let provider_id = format!("aws:///{zone}/i-{}", &hash[..12]);
    let node_name = format!("ip-{}.ec2.internal", &hash[..10]);
    let a = set.annotations();
    let cpu = a
        .get("machine.openshift.io/vCPU")
        .cloned()
        .unwrap_or_else(|| "2".into());
    let memory_mb: i64 = a
        .get("machine.openshift.io/memoryMb")
        .and_then(|v| v.parse().ok())
        .unwrap_or(8192);
    let pods = a
        .get("machine.openshift.io/maxPods")
        .cloned()
        .unwrap_or_else(|| "250".into());
    let capacity = json!({"cpu": cpu, "memory": format!("{memory_mb}Mi"), "pods": pods, "ephemeral-storage": "120Gi"});
    let mut labels: BTreeMap<String, String> = m
        .data
        .pointer("/spec/metadata/labels")
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    for (k, v) in [
        ("kubernetes.io/hostname", node_name.as_str()),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/os", "linux"),
        ("node.kubernetes.io/instance-type", instance_type.as_str()),
        ("topology.kubernetes.io/zone", zone.as_str()),
        ("topology.kubernetes.io/region", region.as_str()),
        ("node-role.kubernetes.io/worker", ""),
    ] {
        labels.insert(k.into(), v.into());
    }
    labels.insert(NODE_MACHINE_LABEL.into(), format!("{ns}.{name}"));
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": node_name, "labels": labels,
                     "annotations": {KWOK_ANNOTATION.0: KWOK_ANNOTATION.1,
                                     "machine.openshift.io/machine": format!("{ns}/{name}")}},
        "spec": {"providerID": provider_id},
        "status": {"capacity": capacity, "allocatable": capacity,
                   "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                                "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "",
                                "kubeProxyVersion": "", "kubeletVersion": "", "machineID": "",
                                "osImage": "", "systemUUID": ""}}
    }))
    .map_err(|e| Error::Invalid(format!("node: {e}")))?;
    let machines: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &resource("Machine", "machines"));
    if m.data.pointer("/spec/providerID").is_none() {
        machines
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"providerID": provider_id}})),
            )
            .await?;
    }
    let nodes: Api<Node> = Api::all(client.clone());
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => info!(machine = %name, node = %node_name, "fake Machine API: node joined"),
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    machines
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "phase": "Running",
                "providerStatus": {"instanceId": format!("i-{}", &hash[..12]), "instanceState": "running"},
                "nodeRef": {"kind": "Node", "name": node_name}
            }})),
        )
        .await?;
    Ok(())
}

/// nodelink: the Machine's taints that its Node lacks are added to the Node.
async fn nodelink(nodes: &Api<Node>, m: &DynamicObject) -> Result<()> {
    let Some(node_name) = m
        .data
        .pointer("/status/nodeRef/name")
        .and_then(Value::as_str)
    else {
        return Ok(());
    };
    let Some(taints) = m.data.pointer("/spec/taints").and_then(Value::as_array) else {
        return Ok(());
    };
    let Some(node) = nodes.get_opt(node_name).await? else {
        return Ok(());
    };
    let mut have: Vec<Value> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|t| {
            t.iter()
                .filter_map(|t| serde_json::to_value(t).ok())
                .collect()
        })
        .unwrap_or_default();
    let mut changed = false;
    for t in taints {
        let same = |h: &Value| h.get("key") == t.get("key") && h.get("effect") == t.get("effect");
        if !have.iter().any(same) {
            have.push(t.clone());
            changed = true;
        }
    }
    if changed {
        let patch = json!({
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": have},
        });
        nodes
            .patch(node_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}
