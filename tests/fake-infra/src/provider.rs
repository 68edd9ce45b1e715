//! The provider loop: the "cloud" behind the fake infrastructure kinds.
//!
//! It lists the fake objects every tick instead of watching them: a test environment holds
//! tens to a few hundred of them, a list is cheap on loopback, and a level-triggered loop has
//! no missed-event corner cases. Per object:
//!
//! - FakeInfraCluster: `status.initialization.provisioned = true` (v1beta2 contract) and
//!   `status.ready = true` (v1beta1 contract), `Ready` condition True. CAPI's ClusterCache
//!   connects to the workload cluster only once the infrastructure is provisioned.
//! - FakeInfraMachine, once its delay has passed since creation: `spec.providerID`
//!   (`fake://<namespace>/<name>`), then the Node in the workload cluster (unless told never to
//!   register), then `status.initialization.provisioned`, `status.ready`, an InternalIP address
//!   and a `Ready` condition. CAPI's Machine controller then finds the Node by providerID,
//!   sets the Machine's nodeRef and propagates labels; on scale-down CAPI drains and deletes
//!   the Node itself, then the InfraMachine (this provider adds no finalizer, so deletion is
//!   immediate).
//! - A launch told to fail ([`crate::annotations::FAIL_LAUNCH`]) gets a `Ready=False` condition
//!   with reason [`crate::CAPACITY_FAILURE_REASON`] and the v1beta1 failure fields, and never a
//!   providerID. One told to fail while retrying
//!   ([`crate::annotations::FAIL_LAUNCH_RETRYING`]) gets only the condition, with reason
//!   [`crate::RETRYING_FAILURE_REASON`], as CAPA does for `InsufficientInstanceCapacity`.
//!
//! The Node gets the template's `status.capacity` as capacity and allocatable (no overhead:
//! tests choose the numbers), `status.nodeInfo` architecture/OS, the InfraMachine's
//! `spec.nodeLabels`/`spec.nodeTaints`, Karpenter's unregistered taint, kwok's annotation (kwok
//! then makes it Ready and keeps its lease), and [`crate::NODE_CLUSTER_LABEL`].

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use crate::crd::api_resource;
use crate::workload::Clients;
use crate::{
    CAPACITY_FAILURE_REASON, CLUSTER_KIND, Error, KWOK_ANNOTATION, MACHINE_KIND,
    NODE_CLUSTER_LABEL, RETRYING_FAILURE_REASON, Result, TEMPLATE_KIND, UNREGISTERED_TAINT,
    annotations, provider_id,
};

/// CAPI puts these on an object cloned from a template.
const CLONED_FROM_NAME: &str = "cluster.x-k8s.io/cloned-from-name";
const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// Provider settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Delay from an InfraMachine's creation to its provisioning, unless annotated.
    pub default_delay: Duration,
    /// How often the loop looks at every fake object.
    pub tick: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            default_delay: Duration::from_millis(500),
            tick: Duration::from_millis(250),
        }
    }
}

/// Runs the provider until the task is dropped. Errors on one object are logged and retried
/// on the next tick; they never stop the loop.
pub async fn run(client: Client, config: Config) {
    let mut provider = Provider {
        client,
        config,
        workloads: Clients::default(),
    };
    info!("fake-infra provider running");
    loop {
        if let Err(e) = provider.tick().await {
            warn!("fake-infra tick: {e}");
        }
        tokio::time::sleep(provider.config.tick).await;
    }
}

struct Provider {
    client: Client,
    config: Config,
    workloads: Clients,
}

/// What the annotations ask of one launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Behavior {
    pub delay: Duration,
    pub fail_launch: Option<String>,
    pub fail_launch_retrying: Option<String>,
    pub never_register: bool,
}

impl Behavior {
    /// Reads the behaviour annotations: the InfraMachine's own first, then its template's.
    pub fn read(
        machine: &BTreeMap<String, String>,
        template: &BTreeMap<String, String>,
        default_delay: Duration,
    ) -> Result<Self> {
        let get = |key: &str| machine.get(key).or_else(|| template.get(key));
        let delay = match get(annotations::PROVISION_DELAY) {
            Some(text) => parse_duration(text).ok_or_else(|| {
                Error::Invalid(format!(
                    "{}: {text:?} is not a duration (500ms, 2s, or milliseconds)",
                    annotations::PROVISION_DELAY
                ))
            })?,
            None => default_delay,
        };
        Ok(Self {
            delay,
            fail_launch: get(annotations::FAIL_LAUNCH).cloned(),
            fail_launch_retrying: get(annotations::FAIL_LAUNCH_RETRYING).cloned(),
            never_register: get(annotations::NEVER_REGISTER).is_some_and(|v| v == "true"),
        })
    }
}

/// `500ms`, `2s`, `1m` or a plain number of milliseconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (number, unit_ms) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60_000)
    } else {
        (text, 1)
    };
    let n: u64 = number.trim().parse().ok()?;
    Some(Duration::from_millis(n.checked_mul(unit_ms)?))
}

fn str_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn annotations_of(obj: &DynamicObject) -> BTreeMap<String, String> {
    obj.metadata.annotations.clone().unwrap_or_default()
}

impl Provider {
    fn api(&self, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
        let resource = api_resource(kind);
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    async fn tick(&mut self) -> Result<()> {
        for cluster in self
            .api(CLUSTER_KIND, None)
            .list(&ListParams::default())
            .await?
        {
            if let Err(e) = self.reconcile_cluster(&cluster).await {
                warn!(
                    "FakeInfraCluster {}/{}: {e}",
                    cluster.metadata.namespace.as_deref().unwrap_or(""),
                    cluster.metadata.name.as_deref().unwrap_or("")
                );
            }
        }
        for machine in self
            .api(MACHINE_KIND, None)
            .list(&ListParams::default())
            .await?
        {
            if let Err(e) = self.reconcile_machine(&machine).await {
                warn!(
                    "FakeInfraMachine {}/{}: {e}",
                    machine.metadata.namespace.as_deref().unwrap_or(""),
                    machine.metadata.name.as_deref().unwrap_or("")
                );
            }
        }
        Ok(())
    }

    async fn reconcile_cluster(&mut self, cluster: &DynamicObject) -> Result<()> {
        if cluster.metadata.deletion_timestamp.is_some() || provisioned(&cluster.data) {
            return Ok(());
        }
        let (ns, name) = ns_name(cluster)?;
        let status = json!({ "status": {
            "initialization": { "provisioned": true },
            "ready": true,
            "conditions": [ready_condition("True", "Provisioned", "")],
        }});
        self.api(CLUSTER_KIND, Some(&ns))
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        info!("FakeInfraCluster {ns}/{name} provisioned");
        Ok(())
    }

    async fn reconcile_machine(&mut self, machine: &DynamicObject) -> Result<()> {
        if machine.metadata.deletion_timestamp.is_some()
            || provisioned(&machine.data)
            || machine.data.pointer("/status/failureReason").is_some()
        {
            return Ok(());
        }
        let (ns, name) = ns_name(machine)?;
        let template = match machine
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CLONED_FROM_NAME))
        {
            Some(t) => self.api(TEMPLATE_KIND, Some(&ns)).get_opt(t).await?,
            None => None,
        };
        let behavior = Behavior::read(
            &annotations_of(machine),
            &template.as_ref().map(annotations_of).unwrap_or_default(),
            self.config.default_delay,
        )?;
        let machines = self.api(MACHINE_KIND, Some(&ns));
        if let Some(message) = behavior.fail_launch {
            let status = json!({ "status": {
                "failureReason": CAPACITY_FAILURE_REASON,
                "failureMessage": message,
                "conditions": [ready_condition("False", CAPACITY_FAILURE_REASON, &message)],
            }});
            machines
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await?;
            info!("FakeInfraMachine {ns}/{name}: launch failed ({message})");
            return Ok(());
        }
        if let Some(message) = behavior.fail_launch_retrying {
            let shown = machine
                .data
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c["type"] == "Ready" && c["reason"] == RETRYING_FAILURE_REASON)
                });
            if !shown {
                let status = json!({ "status": {
                    "conditions": [ready_condition("False", RETRYING_FAILURE_REASON, &message)],
                }});
                machines
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await?;
                info!("FakeInfraMachine {ns}/{name}: launch failing, retrying ({message})");
            }
            return Ok(());
        }
        let created = machine
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or_else(Timestamp::now, |t| t.0);
        let age = Timestamp::now().duration_since(created);
        if age.as_millis() < i128::try_from(behavior.delay.as_millis()).unwrap_or(i128::MAX) {
            return Ok(());
        }
        let cluster = machine
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(CLUSTER_NAME_LABEL))
            .ok_or_else(|| Error::Invalid(format!("no {CLUSTER_NAME_LABEL} label")))?
            .clone();
        let provider_id = provider_id(&ns, &name);
        if machine
            .data
            .pointer("/spec/providerID")
            .and_then(Value::as_str)
            != Some(provider_id.as_str())
        {
            machines
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({ "spec": { "providerID": provider_id } })),
                )
                .await?;
        }
        if behavior.never_register {
            debug!("FakeInfraMachine {ns}/{name}: never registers, no Node");
        } else {
            let node_name = node_name(&ns, &name);
            let node = node_for(machine, template.as_ref(), &ns, &node_name, &provider_id)?;
            let workload = self.workloads.get(&self.client, &ns, &cluster).await?;
            let nodes = Api::<Node>::all(workload);
            match nodes.create(&PostParams::default(), &node).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    // Ours from an earlier tick whose status write failed, or a clash.
                    let existing = nodes.get(&node_name).await?;
                    let theirs = existing.spec.and_then(|s| s.provider_id);
                    if theirs.as_deref() != Some(provider_id.as_str()) {
                        return Err(Error::Invalid(format!(
                            "Node {node_name} exists with providerID {theirs:?}, not {provider_id}"
                        )));
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        let status = json!({ "status": {
            "initialization": { "provisioned": true },
            "ready": true,
            "addresses": [{ "type": "InternalIP", "address": fake_ip(&provider_id) }],
            "conditions": [ready_condition("True", "Provisioned", "")],
        }});
        machines
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        info!(
            "FakeInfraMachine {ns}/{name} provisioned after {:.1}s ({provider_id}{})",
            age.as_secs_f64(),
            if behavior.never_register {
                ", no Node"
            } else {
                ""
            }
        );
        Ok(())
    }
}

/// The Node's name: `<namespace>-<InfraMachine name>`. Tests share one workload API server
/// and reuse Cluster and MachineDeployment names in their own namespaces, so the InfraMachine
/// name alone would clash (a Node is cluster-scoped).
pub fn node_name(namespace: &str, name: &str) -> String {
    format!("{namespace}-{name}")
}

/// A label value (at most 63 characters, alphanumeric at both ends) for the hostname label.
fn hostname_label(node_name: &str) -> String {
    let mut value: String = node_name.chars().take(63).collect();
    while value.ends_with(|c: char| !c.is_ascii_alphanumeric()) {
        value.pop();
    }
    value
}

fn provisioned(data: &Value) -> bool {
    data.pointer("/status/initialization/provisioned")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn ns_name(obj: &DynamicObject) -> Result<(String, String)> {
    match (&obj.metadata.namespace, &obj.metadata.name) {
        (Some(ns), Some(name)) => Ok((ns.clone(), name.clone())),
        _ => Err(Error::Invalid("object without namespace or name".into())),
    }
}

fn ready_condition(status: &str, reason: &str, message: &str) -> Value {
    json!({
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": Timestamp::now().to_string(),
    })
}

/// A stable made-up 10.x address per machine (only for `status.addresses`).
fn fake_ip(provider_id: &str) -> String {
    let h = provider_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!(
        "10.{}.{}.{}",
        (h >> 16) & 0xff,
        (h >> 8) & 0xff,
        (h & 0xfe) + 1
    )
}

/// The Node `name` for a provisioned InfraMachine. Shape: the template's `status` (the
/// scale-from-zero contract fields), else the InfraMachine's `spec.capacity`/`spec.nodeInfo`
/// (used by fixtures that create an InfraMachine without a template).
pub fn node_for(
    machine: &DynamicObject,
    template: Option<&DynamicObject>,
    namespace: &str,
    name: &str,
    provider_id: &str,
) -> Result<Node> {
    let from_template = |path: &str| template.and_then(|t| t.data.pointer(path)).cloned();
    let capacity = from_template("/status/capacity")
        .or_else(|| machine.data.pointer("/spec/capacity").cloned())
        .filter(|c| c.as_object().is_some_and(|m| !m.is_empty()))
        .ok_or_else(|| {
            Error::Invalid(
                "no capacity: neither the template's status.capacity nor spec.capacity".into(),
            )
        })?;
    let node_info = from_template("/status/nodeInfo")
        .or_else(|| machine.data.pointer("/spec/nodeInfo").cloned())
        .unwrap_or(Value::Null);
    let arch = node_info
        .get("architecture")
        .and_then(Value::as_str)
        .unwrap_or("amd64");
    let os = node_info
        .get("operatingSystem")
        .and_then(Value::as_str)
        .unwrap_or("linux");

    let mut labels = str_map(machine.data.pointer("/spec/nodeLabels"));
    labels.insert("kubernetes.io/hostname".into(), hostname_label(name));
    labels.insert("kubernetes.io/arch".into(), arch.to_string());
    labels.insert("kubernetes.io/os".into(), os.to_string());
    labels.insert(NODE_CLUSTER_LABEL.into(), namespace.to_string());

    let mut taints = vec![json!({ "key": UNREGISTERED_TAINT, "effect": "NoExecute" })];
    if let Some(extra) = machine
        .data
        .pointer("/spec/nodeTaints")
        .and_then(Value::as_array)
    {
        taints.extend(extra.iter().cloned());
    }

    let node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": { KWOK_ANNOTATION.0: KWOK_ANNOTATION.1 },
        },
        "spec": { "providerID": provider_id, "taints": taints },
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "nodeInfo": {
                "architecture": arch,
                "operatingSystem": os,
                "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "",
                "kubeProxyVersion": "", "kubeletVersion": "", "machineID": "", "osImage": "",
                "systemUUID": "",
            },
        },
    });
    serde_json::from_value(node).map_err(|e| Error::Invalid(format!("node: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(value: Value) -> DynamicObject {
        serde_json::from_value(value).expect("object")
    }

    #[test]
    fn durations_parse_and_reject_garbage() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Some(Duration::from_secs(60)));
        assert_eq!(parse_duration("250"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("-1s"), None);
    }

    #[test]
    fn machine_annotations_win_over_the_template() {
        let machine: BTreeMap<String, String> =
            [(annotations::PROVISION_DELAY.to_string(), "3s".to_string())].into();
        let template: BTreeMap<String, String> = [
            (annotations::PROVISION_DELAY.to_string(), "9s".to_string()),
            (annotations::NEVER_REGISTER.to_string(), "true".to_string()),
        ]
        .into();
        let b = Behavior::read(&machine, &template, Duration::ZERO).expect("valid");
        assert_eq!(b.delay, Duration::from_secs(3));
        assert!(b.never_register);
        assert_eq!(b.fail_launch, None);
        assert_eq!(b.fail_launch_retrying, None);
        let retrying: BTreeMap<String, String> = [(
            annotations::FAIL_LAUNCH_RETRYING.to_string(),
            "InsufficientInstanceCapacity".to_string(),
        )]
        .into();
        let b = Behavior::read(&BTreeMap::new(), &retrying, Duration::ZERO).expect("valid");
        assert_eq!(
            b.fail_launch_retrying.as_deref(),
            Some("InsufficientInstanceCapacity")
        );
        let bad: BTreeMap<String, String> =
            [(annotations::PROVISION_DELAY.to_string(), "x".to_string())].into();
        assert!(Behavior::read(&bad, &BTreeMap::new(), Duration::ZERO).is_err());
    }

    #[test]
    fn node_takes_the_template_shape_labels_and_taints() {
        let machine = obj(json!({
            "apiVersion": "infrastructure.test.karpenter-capi.dev/v1alpha1",
            "kind": "FakeInfraMachine",
            "metadata": { "name": "m1", "namespace": "ns" },
            "spec": {
                "nodeLabels": { "node.kubernetes.io/instance-type": "big" },
                "nodeTaints": [{ "key": "dedicated", "value": "x", "effect": "NoSchedule" }],
            },
        }));
        let template = obj(json!({
            "apiVersion": "infrastructure.test.karpenter-capi.dev/v1alpha1",
            "kind": "FakeInfraMachineTemplate",
            "metadata": { "name": "t", "namespace": "ns" },
            "status": {
                "capacity": { "cpu": "4", "memory": "8Gi", "pods": "110" },
                "nodeInfo": { "architecture": "arm64", "operatingSystem": "linux" },
            },
        }));
        let node = node_for(&machine, Some(&template), "ns", "m1", "fake://ns/m1").expect("node");
        let labels = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels["kubernetes.io/arch"], "arm64");
        assert_eq!(labels["node.kubernetes.io/instance-type"], "big");
        assert_eq!(labels[NODE_CLUSTER_LABEL], "ns");
        let spec = node.spec.clone().unwrap_or_default();
        assert_eq!(spec.provider_id.as_deref(), Some("fake://ns/m1"));
        let taints = spec.taints.unwrap_or_default();
        assert_eq!(taints[0].key, UNREGISTERED_TAINT);
        assert_eq!(taints[0].effect, "NoExecute");
        assert_eq!(taints[1].key, "dedicated");
        let status = node.status.unwrap_or_default();
        assert_eq!(status.capacity.unwrap_or_default()["cpu"].0, "4");
        assert_eq!(
            node.metadata.annotations.unwrap_or_default()[KWOK_ANNOTATION.0],
            KWOK_ANNOTATION.1
        );
        assert_eq!(node_name("ns", "m1"), "ns-m1");
        let long = node_name(&"n".repeat(40), &format!("{}-x", "m".repeat(22)));
        assert_eq!(hostname_label(&long).len(), 63);
        assert!(hostname_label(&long).ends_with('m'));
        // Without any capacity the launch is refused, not guessed.
        assert!(node_for(&machine, None, "ns", "m1", "fake://ns/m1").is_err());
    }
}
