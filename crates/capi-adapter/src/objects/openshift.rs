//! OpenShift Machine API (`machine.openshift.io/v1beta1`) MachineSet and Machine: the subset
//! the adapter reads, hand-written from `github.com/openshift/api/machine/v1beta1`.
//!
//! `spec.template.spec.providerSpec.value` is cloud-specific (AWS `instanceType` and
//! `placement.availabilityZone`, Azure `vmSize`/`zone`, GCP `machineType`/`zone`); it stays a
//! JSON value and [`crate::resource`] reads the keys it knows.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint as CoreTaint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube_core::{NamespaceResourceScope, Resource, TypeMeta};
use serde::{Deserialize, Serialize};

pub const API_VERSION: &str = "machine.openshift.io/v1beta1";

/// OpenShift's own small ObjectMeta in machine specs: labels here go on the Node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpecMeta {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    #[serde(default)]
    pub metadata: SpecMeta,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<CoreTaint>,
    #[serde(default)]
    pub provider_spec: ProviderSpec,
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
}

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
pub struct MachineSetSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_policy: Option<String>,
    #[serde(default)]
    pub selector: LabelSelector,
    #[serde(default)]
    pub template: MachineTemplateSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
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
    pub status: Option<MachineSetStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeRef {
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ref: Option<NodeRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// The platform's own status; its `conditions` carry a failed create's error (AWS's
    /// `MachineCreation`, GCP's `MachineCreated`, reason `MachineCreationFailed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_status: Option<serde_json::Value>,
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
    /// The Machine API's terminal failure (`errorReason: errorMessage`), or phase `Failed`.
    pub fn failure(&self) -> Option<String> {
        let s = self.status.as_ref()?;
        match (&s.error_reason, &s.error_message) {
            (Some(r), Some(m)) => Some(format!("{r}: {m}")),
            (Some(r), None) => Some(r.clone()),
            (None, Some(m)) => Some(m.clone()),
            (None, None) if s.phase.as_deref() == Some("Failed") => {
                Some("phase Failed".to_string())
            }
            (None, None) => None,
        }
    }

    /// The provider's last error creating the instance (`reason: message` of a false
    /// condition in `providerStatus.conditions` whose reason says a create failed), which the
    /// Machine API retries without failing the Machine. See [`crate::capacity_errors`].
    pub fn provisioning_error(&self) -> Option<String> {
        let conditions = self
            .status
            .as_ref()?
            .provider_status
            .as_ref()?
            .get("conditions")?
            .as_array()?;
        conditions.iter().find_map(|c| {
            let text = |k: &str| c.get(k).and_then(serde_json::Value::as_str);
            let reason = text("reason").unwrap_or_default();
            if text("status") != Some("False") || !reason.contains("Fail") {
                return None;
            }
            let message = text("message").filter(|m| !m.trim().is_empty())?;
            Some(format!("{reason}: {message}"))
        })
    }
}

macro_rules! openshift_resource {
    ($ty:ty, $kind:literal, $plural:literal) => {
        impl Resource for $ty {
            type DynamicType = ();
            type Scope = NamespaceResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($kind)
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed("machine.openshift.io")
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed("v1beta1")
            }
            fn plural(_: &()) -> Cow<'_, str> {
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
            pub fn type_meta() -> TypeMeta {
                TypeMeta {
                    api_version: API_VERSION.to_string(),
                    kind: $kind.to_string(),
                }
            }
        }
    };
}

openshift_resource!(MachineSet, "MachineSet", "machinesets");
openshift_resource!(Machine, "Machine", "machines");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_create_is_read_from_the_provider_status() {
        let m: Machine = serde_json::from_value(serde_json::json!({
            "status": {"phase": "Provisioning", "providerStatus": {
                "apiVersion": "machine.openshift.io/v1beta1", "kind": "AWSMachineProviderStatus",
                "conditions": [{"type": "MachineCreation", "status": "False",
                    "reason": "MachineCreationFailed",
                    "message": "error launching instance: InsufficientInstanceCapacity: none left"}]
            }}
        }))
        .unwrap();
        assert_eq!(
            m.provisioning_error().as_deref(),
            Some(
                "MachineCreationFailed: error launching instance: InsufficientInstanceCapacity: none left"
            )
        );
        assert_eq!(
            m.failure(),
            None,
            "the Machine API retries: no terminal failure"
        );
        let created: Machine = serde_json::from_value(serde_json::json!({
            "status": {"providerStatus": {"conditions": [{"type": "MachineCreation",
                "status": "True", "reason": "MachineCreationSucceeded", "message": "ok"}]}}
        }))
        .unwrap();
        assert_eq!(created.provisioning_error(), None);
        assert_eq!(Machine::default().provisioning_error(), None);
    }
}
