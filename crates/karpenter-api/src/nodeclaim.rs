//! `karpenter.sh/v1` NodeClaim: one requested node, from launch to termination. Its spec is
//! immutable; its status follows the machine and the Node. Field for field with upstream.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use crate::duration::NillableDuration;
use crate::requirements::{
    NodeClassReference, NodeSelectorRequirementWithMinValues, requirement_list_rules,
};
use crate::schema;

/// The node a NodeClaim asks for. Immutable once created (the API server enforces it): a
/// different node is a different NodeClaim.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodeClaim",
    plural = "nodeclaims",
    singular = "nodeclaim",
    category = "karpenter",
    status = "NodeClaimStatus",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".metadata.labels.node\\.kubernetes\\.io/instance-type"}"#,
    printcolumn = r#"{"name":"Capacity","type":"string","jsonPath":".metadata.labels.karpenter\\.sh/capacity-type"}"#,
    printcolumn = r#"{"name":"Zone","type":"string","jsonPath":".metadata.labels.topology\\.kubernetes\\.io/zone"}"#,
    printcolumn = r#"{"name":"Node","type":"string","jsonPath":".status.nodeName"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"ImageID","type":"string","jsonPath":".status.imageID","priority":1}"#,
    printcolumn = r#"{"name":"ID","type":"string","jsonPath":".status.providerID","priority":1}"#,
    printcolumn = r#"{"name":"NodePool","type":"string","jsonPath":".metadata.labels.karpenter\\.sh/nodepool","priority":1}"#,
    printcolumn = r#"{"name":"NodeClass","type":"string","jsonPath":".spec.nodeClassRef.name","priority":1}"#,
    printcolumn = r#"{"name":"Drifted","type":"string","jsonPath":".status.conditions[?(@.type==\"Drifted\")].status","priority":1}"#,
    derive = "PartialEq",
    doc = "NodeClaim is one node Karpenter asked for, from launch to termination."
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"message": "spec is immutable", "rule": "self == oldSelf"}]))]
pub struct NodeClaimSpec {
    /// How long the node may live ("Never" to keep it); default 720h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "720h", "pattern" = schema::NILLABLE_DURATION_PATTERN))]
    pub expire_after: Option<NillableDuration>,

    /// The provider NodeClass this node is launched through.
    pub node_class_ref: NodeClassReference,

    /// Constraints the launched node must satisfy (instance types, zones, capacity types...).
    #[schemars(schema_with = "requirements_schema")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,

    /// The resources the pods that caused this claim need (a launch must fit them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Taints applied at startup and removed by something on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::taints")]
    pub startup_taints: Option<Vec<Taint>>,

    /// Taints the node carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::taints")]
    pub taints: Option<Vec<Taint>>,

    /// Hard cap on draining the node (see NodePool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = schema::DURATION_PATTERN))]
    pub termination_grace_period: Option<String>,
}

/// The requirement list schema shared by NodeClaim and NodePool (at most 100, atomic, with
/// the cross-field CEL rules).
pub(crate) fn requirements_schema(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = generator.subschema_for::<Vec<NodeSelectorRequirementWithMinValues>>();
    let object = schema.ensure_object();
    object.insert("maxItems".into(), 100.into());
    object.insert("x-kubernetes-list-type".into(), "atomic".into());
    object.insert("x-kubernetes-validations".into(), requirement_list_rules());
    schema
}

/// Resource requests of a NodeClaim.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceRequirements {
    /// The summed requests of the pods (plus daemonset overhead) the node was sized for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::resource_list")]
    pub requests: Option<BTreeMap<String, Quantity>>,
}

/// Observed state of a NodeClaim: which machine and Node it became and how far it got.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    /// What the node can schedule (capacity minus overhead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::resource_list")]
    pub allocatable: Option<BTreeMap<String, Quantity>>,

    /// The node's full capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::resource_list")]
    pub capacity: Option<BTreeMap<String, Quantity>>,

    /// Launched, Registered, Initialized, Ready, Consolidatable, Drifted, Drained,
    /// VolumesDetached, InstanceTerminating, ConsistentStateFound, DisruptionReason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::nodeclaim_conditions")]
    pub conditions: Option<Vec<Condition>>,

    /// The image the node booted from, when the provider knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "imageID")]
    pub image_id: Option<String>,

    /// Last time a pod was bound to or left the node (consolidation waits on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<Time>,

    /// The Node object's name once registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,

    /// The provider ID that links the claim, the Machine and the Node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "providerID")]
    pub provider_id: Option<String>,
}
