//! `karpenter.cluster.x-k8s.io/v1alpha1` ClusterAPINodeClass: the provider NodeClass that
//! tells which CAPI / OpenShift scalable resources a NodePool may grow, and how.
//!
//! Upstream's (kubernetes-sigs/karpenter-provider-cluster-api) whole spec is
//! `scalableResourceSelector`; the other fields are ours and optional, so an upstream
//! manifest is a valid one here.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema;

/// Which scalable resources take part and how nodes built from them are treated.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ClusterAPINodeClass",
    plural = "clusterapinodeclasses",
    singular = "clusterapinodeclass",
    shortname = "capinc",
    category = "karpenter",
    status = "ClusterAPINodeClassStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    derive = "PartialEq",
    doc = "ClusterAPINodeClass selects the Cluster API or OpenShift scalable resources a NodePool may grow."
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAPINodeClassSpec {
    /// Selects the MachineDeployments / MachineSets (by their labels) that become instance
    /// types. A label selector rather than a list of names, as upstream, so new resources
    /// join by labelling them; an empty selector matches every resource, which is why the
    /// field is required rather than defaulted.
    #[schemars(schema_with = "schema::label_selector")]
    pub scalable_resource_selector: LabelSelector,

    /// Which kinds of scalable resource the selector looks at; all of them when absent. Lets
    /// a cluster that runs both CAPI and OpenShift Machine API (mid-migration) use one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub scalable_resource_kinds: Option<Vec<ScalableResourceKind>>,

    /// Who replaces nodes that no longer match their NodePool or this NodeClass: Karpenter's
    /// drift (default) or CAPI's own rollout of the MachineDeployment (upstream issue #61:
    /// clusters that already roll machines through CAPI do not want both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_policy: Option<DriftPolicy>,

    /// What the node reserves for itself, subtracted from capacity to get allocatable.
    /// Without it the simulation overpacks nodes and pods stay pending after a launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<NodeOverhead>,
}

/// A kind of scalable resource whose replicas we can change through its scale subresource.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum ScalableResourceKind {
    /// `cluster.x-k8s.io` MachineDeployment.
    MachineDeployment,
    /// `cluster.x-k8s.io` MachineSet not owned by a MachineDeployment.
    MachineSet,
    /// `machine.openshift.io/v1beta1` MachineSet (OpenShift Machine API).
    OpenShiftMachineSet,
}

impl ScalableResourceKind {
    /// Every kind, the default when `scalableResourceKinds` is absent.
    pub const ALL: [ScalableResourceKind; 3] = [
        ScalableResourceKind::MachineDeployment,
        ScalableResourceKind::MachineSet,
        ScalableResourceKind::OpenShiftMachineSet,
    ];
}

/// Who acts on drift.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum DriftPolicy {
    /// Karpenter's drift: drifted nodes are disrupted (within budgets) and replaced.
    #[default]
    Karpenter,
    /// Leave drift to CAPI: we never disrupt a node for drift; CAPI's rollout replaces it.
    #[serde(rename = "CAPIRollout")]
    CapiRollout,
}

/// Node overhead, the kubelet's reservations (same meaning as its flags).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeOverhead {
    /// Like the kubelet's `--kube-reserved`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::resource_list")]
    pub kube_reserved: Option<BTreeMap<String, Quantity>>,
    /// Like the kubelet's `--system-reserved`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::resource_list")]
    pub system_reserved: Option<BTreeMap<String, Quantity>>,
    /// Like the kubelet's hard eviction thresholds (memory.available, nodefs.available...),
    /// as absolute quantities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::resource_list")]
    pub eviction_threshold: Option<BTreeMap<String, Quantity>>,
}

/// Observed state of a ClusterAPINodeClass.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterAPINodeClassStatus {
    /// Ready (and the reasons it is not: a selector matching nothing, a resource with a bad
    /// annotation, named with object and key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,

    /// The scalable resources the selector matched, so `kubectl get -o yaml` shows what a
    /// NodePool using this class can launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub scalable_resources: Option<Vec<ScalableResourceStatus>>,
}

/// One matched scalable resource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScalableResourceStatus {
    /// Kind of the resource.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The instance type name it became, when it could be built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// Why it could not be used, when it could not (names the key at fault).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl ClusterAPINodeClassSpec {
    /// The kinds to look at, with the default (all) applied.
    pub fn kinds_or_default(&self) -> Vec<ScalableResourceKind> {
        self.scalable_resource_kinds
            .clone()
            .unwrap_or_else(|| ScalableResourceKind::ALL.to_vec())
    }
}
