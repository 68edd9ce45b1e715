//! Cluster API (`cluster.x-k8s.io`) MachineDeployment, MachineSet and Machine: the subset of
//! fields the adapter reads, hand-written.
//!
//! One Rust type serves both API versions a cluster may use: `v1beta2` (what current CAPI
//! serves and stores) and `v1beta1` (older clusters). Where the two differ the struct has both
//! spellings as optional fields (`infrastructureRef.apiGroup` vs `.apiVersion`, the failure
//! fields under `status.deprecated.v1beta1` vs top-level), and the accessors read whichever is
//! present. The served version is the kube [`Resource`] dynamic type ([`CapiVersion`]), so
//! the controller picks it at runtime: `Api::<MachineDeployment>::namespaced_with(c, ns,
//! &CapiVersion::V1Beta2)`.
//!
//! The controller only ever writes these objects through merge patches on metadata and the
//! scale subresource, never by replacing them, so fields missing here are never lost.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use kube_core::{DynamicResourceScope, Resource, TypeMeta};
use serde::{Deserialize, Serialize};

/// Which `cluster.x-k8s.io` version to talk to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CapiVersion {
    V1Beta1,
    #[default]
    V1Beta2,
}

impl CapiVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            CapiVersion::V1Beta1 => "v1beta1",
            CapiVersion::V1Beta2 => "v1beta2",
        }
    }
}

/// A reference to a template or config: `apiGroup` in v1beta2, `apiVersion` (+ optional
/// namespace) in v1beta1.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContractReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl ContractReference {
    /// The API group, from `apiGroup` or the group part of `apiVersion`.
    pub fn group(&self) -> Option<&str> {
        if let Some(g) = self.api_group.as_deref() {
            return Some(g);
        }
        self.api_version
            .as_deref()
            .map(|av| av.rsplit_once('/').map_or("", |(g, _)| g))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_ref: Option<ContractReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
}

/// A taint CAPI puts on the Node (`propagation`: `Always` or `OnInitialization`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineTaint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    pub effect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagation: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    #[serde(default)]
    pub cluster_name: String,
    #[serde(default)]
    pub bootstrap: Bootstrap,
    #[serde(default)]
    pub infrastructure_ref: ContractReference,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<MachineTaint>,
}

/// `metadata` of a machine template: labels and annotations every Machine gets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TemplateMeta {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineTemplateSpec {
    #[serde(default)]
    pub metadata: TemplateMeta,
    #[serde(default)]
    pub spec: MachineSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentSpec {
    #[serde(default)]
    pub cluster_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default)]
    pub selector: LabelSelector,
    #[serde(default)]
    pub template: MachineTemplateSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
}

/// Replica counts as CAPI reports them; `upToDateReplicas` is v1beta2's name for v1beta1's
/// `updatedReplicas`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalableStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

impl ScalableStatus {
    /// Replicas already on the latest template, whichever version's field is set.
    pub fn up_to_date(&self) -> Option<i32> {
        self.up_to_date_replicas.or(self.updated_replicas)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineDeployment {
    #[serde(flatten, default)]
    pub types: Option<TypeMeta>,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: MachineDeploymentSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ScalableStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetSpec {
    #[serde(default)]
    pub cluster_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default)]
    pub selector: LabelSelector,
    #[serde(default)]
    pub template: MachineTemplateSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineSet {
    #[serde(flatten, default)]
    pub types: Option<TypeMeta>,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: MachineSetSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ScalableStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeReference {
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// v1beta2 keeps the v1beta1-style conditions (with `severity`) here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeprecatedStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta1: Option<FailureFields>,
}

/// A status condition as either API version writes it (v1beta1's also has `severity`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// v1beta1's preview of the v1beta2 conditions (`status.v1beta2`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConditionsOnly {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ref: Option<NodeReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// v1beta1 spelling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// v1beta1 spelling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// v1beta2 keeps the old failure fields here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<DeprecatedStatus>,
    /// Either version's own conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// v1beta1 spelling of the v1beta2 conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v1beta2: Option<ConditionsOnly>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_updated: Option<Time>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    #[serde(flatten, default)]
    pub types: Option<TypeMeta>,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: MachineSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<MachineStatus>,
}

impl Machine {
    /// CAPI's terminal failure, if any (`failureReason: message`), from either version's
    /// fields, or phase `Failed`.
    pub fn failure(&self) -> Option<String> {
        let status = self.status.as_ref()?;
        let (reason, message) = match (&status.failure_reason, &status.deprecated) {
            (Some(r), _) => (Some(r.clone()), status.failure_message.clone()),
            (None, Some(DeprecatedStatus { v1beta1: Some(f) })) => {
                (f.failure_reason.clone(), f.failure_message.clone())
            }
            _ => (None, status.failure_message.clone()),
        };
        match (reason, message) {
            (Some(r), Some(m)) => Some(format!("{r}: {m}")),
            (Some(r), None) => Some(r),
            (None, Some(m)) => Some(m),
            (None, None) if status.phase.as_deref() == Some("Failed") => {
                Some("phase Failed".to_string())
            }
            (None, None) => None,
        }
    }

    /// What the infrastructure provider last reported while failing to provision
    /// (`reason: message` of a false `InfrastructureReady` condition in any of the places the
    /// two versions keep conditions), if it wrote a message. Not a failure by itself: a
    /// provider retries, and most such messages pass; [`crate::capacity_errors`] says which
    /// mean the cloud is out of capacity.
    pub fn provisioning_error(&self) -> Option<String> {
        let status = self.status.as_ref()?;
        let deprecated = status
            .deprecated
            .as_ref()
            .and_then(|d| d.v1beta1.as_ref())
            .map(|f| f.conditions.as_slice())
            .unwrap_or_default();
        let preview = status
            .v1beta2
            .as_ref()
            .map(|c| c.conditions.as_slice())
            .unwrap_or_default();
        status
            .conditions
            .iter()
            .chain(deprecated)
            .chain(preview)
            .filter(|c| c.type_ == "InfrastructureReady" && c.status == "False")
            .find_map(|c| {
                let message = c.message.as_deref().filter(|m| !m.trim().is_empty())?;
                Some(match c.reason.as_deref().filter(|r| !r.is_empty()) {
                    Some(r) => format!("{r}: {message}"),
                    None => message.to_string(),
                })
            })
    }
}

macro_rules! capi_resource {
    ($ty:ty, $kind:literal, $plural:literal) => {
        impl Resource for $ty {
            type DynamicType = CapiVersion;
            type Scope = DynamicResourceScope;

            fn kind(_: &CapiVersion) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &CapiVersion) -> Cow<'_, str> {
                Cow::Borrowed("cluster.x-k8s.io")
            }
            fn version(v: &CapiVersion) -> Cow<'_, str> {
                Cow::Borrowed(v.as_str())
            }
            fn plural(_: &CapiVersion) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }

        impl $ty {
            /// The `apiVersion`/`kind` to send when creating one.
            pub fn type_meta(v: CapiVersion) -> TypeMeta {
                TypeMeta {
                    api_version: format!("cluster.x-k8s.io/{}", v.as_str()),
                    kind: $kind.to_string(),
                }
            }
        }
    };
}

capi_resource!(MachineDeployment, "MachineDeployment", "machinedeployments");
capi_resource!(MachineSet, "MachineSet", "machinesets");
capi_resource!(Machine, "Machine", "machines");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_v1beta2_and_v1beta1_shapes() {
        let v2: Machine = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "ns"},
            "spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "s"},
                     "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine", "name": "m"},
                     "providerID": "docker:////m"},
            "status": {"deprecated": {"v1beta1": {"failureReason": "CreateError", "failureMessage": "quota"}}}
        }))
        .unwrap();
        assert_eq!(
            v2.spec.infrastructure_ref.group(),
            Some("infrastructure.cluster.x-k8s.io")
        );
        assert_eq!(v2.spec.provider_id.as_deref(), Some("docker:////m"));
        assert_eq!(v2.failure().as_deref(), Some("CreateError: quota"));

        let v1: Machine = serde_json::from_value(serde_json::json!({
            "spec": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerMachine", "name": "m"}},
            "status": {"failureReason": "UpdateError"}
        }))
        .unwrap();
        assert_eq!(
            v1.spec.infrastructure_ref.group(),
            Some("infrastructure.cluster.x-k8s.io")
        );
        assert_eq!(v1.failure().as_deref(), Some("UpdateError"));
        assert_eq!(Machine::default().failure(), None);
    }

    #[test]
    fn the_infrastructure_error_is_read_from_either_versions_conditions() {
        let ice = "InsufficientInstanceCapacity: no m5.large in us-east-1a";
        // v1beta2: the Machine's own condition mirrors the infrastructure's Ready.
        let v2: Machine = serde_json::from_value(serde_json::json!({
            "status": {"conditions": [
                {"type": "BootstrapConfigReady", "status": "True", "reason": "Ready"},
                {"type": "InfrastructureReady", "status": "False",
                 "reason": "InstanceProvisionFailed", "message": ice}
            ]}
        }))
        .unwrap();
        assert_eq!(
            v2.provisioning_error().as_deref(),
            Some(format!("InstanceProvisionFailed: {ice}").as_str())
        );
        assert_eq!(v2.failure(), None, "a retried error is no terminal failure");
        // v1beta2's deprecated v1beta1 conditions, and v1beta1's v1beta2 preview.
        let deprecated: Machine = serde_json::from_value(serde_json::json!({
            "status": {"deprecated": {"v1beta1": {"conditions": [
                {"type": "InfrastructureReady", "status": "False", "severity": "Error",
                 "reason": "InstanceProvisionFailed", "message": ice}
            ]}}}
        }))
        .unwrap();
        assert!(deprecated.provisioning_error().unwrap().contains(ice));
        let preview: Machine = serde_json::from_value(serde_json::json!({
            "status": {"v1beta2": {"conditions": [
                {"type": "InfrastructureReady", "status": "False", "message": ice}
            ]}}
        }))
        .unwrap();
        assert_eq!(preview.provisioning_error().as_deref(), Some(ice));
        // Ready, or false without a message: nothing to report.
        let ready: Machine = serde_json::from_value(serde_json::json!({
            "status": {"conditions": [
                {"type": "InfrastructureReady", "status": "True", "message": ice},
                {"type": "Ready", "status": "False", "message": ice},
                {"type": "InfrastructureReady", "status": "False", "reason": "NotReady", "message": " "}
            ]}
        }))
        .unwrap();
        assert_eq!(ready.provisioning_error(), None);
        assert_eq!(Machine::default().provisioning_error(), None);
    }

    #[test]
    fn urls_follow_the_version() {
        assert_eq!(
            MachineDeployment::url_path(&CapiVersion::V1Beta2, Some("ns")),
            "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/machinedeployments"
        );
        assert_eq!(
            Machine::url_path(&CapiVersion::V1Beta1, None),
            "/apis/cluster.x-k8s.io/v1beta1/machines"
        );
    }
}
