//! `karpenter.sh/v1` NodePool: the user's description of which nodes may be launched, how
//! long they live and how they may be disrupted. Field for field with upstream's v1 schema.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use crate::duration::NillableDuration;
use crate::requirements::{NodeClassReference, NodeSelectorRequirementWithMinValues};
use crate::schema;

/// The desired state of a NodePool. Nodes are launched from `template`; `disruption` says when
/// they may be removed; `limits` caps the total; `weight` orders NodePools.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    singular = "nodepool",
    category = "karpenter",
    status = "NodePoolStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.nodes"
    ),
    printcolumn = r#"{"name":"NodeClass","type":"string","jsonPath":".spec.template.spec.nodeClassRef.name"}"#,
    printcolumn = r#"{"name":"Nodes","type":"string","jsonPath":".status.nodes"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Weight","type":"integer","jsonPath":".spec.weight","priority":1}"#,
    printcolumn = r#"{"name":"CPU","type":"string","jsonPath":".status.resources.cpu","priority":1}"#,
    printcolumn = r#"{"name":"Memory","type":"string","jsonPath":".status.resources.memory","priority":1}"#,
    derive = "PartialEq",
    doc = "NodePool describes which nodes Karpenter may launch for pending pods and when it may remove them."
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "message": "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes",
        "rule": "has(self.replicas) == has(oldSelf.replicas)"
    },
    {
        "message": "only 'limits.nodes' is supported on static NodePools",
        "rule": "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))"
    },
    {
        "message": "'weight' is not supported on static NodePools",
        "rule": "!has(self.replicas) || !has(self.weight)"
    }
]))]
pub struct NodePoolSpec {
    /// What every NodeClaim launched from this NodePool starts from; pods narrow it further.
    pub template: NodeClaimTemplate,

    /// When and how fast nodes of this NodePool may be disrupted. The API server fills in
    /// upstream's defaults; [`NodePoolSpec::disruption_or_default`] applies them when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = {"consolidateAfter": "0s"}))]
    pub disruption: Option<Disruption>,

    /// Caps on the total resources (any resource name, including `nodes`) of this NodePool's
    /// nodes; launches that would exceed them are not made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::resource_list")]
    pub limits: Option<BTreeMap<String, Quantity>>,

    /// Static NodePools (alpha upstream): keep exactly this many nodes instead of following
    /// pod demand. Also the scale subresource's spec path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i64>,

    /// Priority among NodePools (1..=100, higher first); absent means 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i32>,
}

/// The template a NodePool launches NodeClaims from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeClaimTemplate {
    /// Labels and annotations put on the NodeClaim and its Node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<NodeClaimTemplateMetadata>,
    /// The NodeClaim spec minus resource requests (those come from the pods).
    pub spec: NodeClaimTemplateSpec,
}

/// The metadata part of a NodePool template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeClaimTemplateMetadata {
    /// Annotations for the NodeClaim and its Node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::template_annotations")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Labels for the NodeClaim and its Node; Karpenter's own label domain is off limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::template_labels")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// The NodeClaim spec a NodePool template carries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    /// How long a node may live before it is replaced ("Never" to keep it); default 720h.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "720h", "pattern" = schema::NILLABLE_DURATION_PATTERN))]
    pub expire_after: Option<NillableDuration>,

    /// The provider NodeClass that says how to launch (for us, which scalable resources).
    #[schemars(schema_with = "nodepool_node_class_ref")]
    pub node_class_ref: NodeClassReference,

    /// Constraints every node of this NodePool satisfies, layered with pod constraints.
    #[schemars(schema_with = "nodepool_requirements")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,

    /// Taints applied at startup and expected to be removed by something on the node (a
    /// DaemonSet); pods need not tolerate them to get a node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::taints")]
    pub startup_taints: Option<Vec<Taint>>,

    /// Taints every node of this NodePool carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::taints")]
    pub taints: Option<Vec<Taint>>,

    /// Hard cap on draining: after this, pods are deleted whatever PDBs or do-not-disrupt say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = schema::DURATION_PATTERN))]
    pub termination_grace_period: Option<String>,
}

fn nodepool_node_class_ref(generator: &mut SchemaGenerator) -> Schema {
    // The referenced NodeClass's group and kind decide the provider; changing them would
    // orphan every node.
    schema::with_validations::<NodeClassReference>(
        generator,
        &[
            serde_json::json!({"message": "nodeClassRef.group is immutable", "rule": "self.group == oldSelf.group"}),
            serde_json::json!({"message": "nodeClassRef.kind is immutable", "rule": "self.kind == oldSelf.kind"}),
        ],
    )
}

fn nodepool_requirements(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = crate::nodeclaim::requirements_schema(generator);
    // NodePools may not pin the nodepool label: Karpenter sets it.
    if let Some(key) = schema
        .get_mut("items")
        .and_then(|items| items.get_mut("properties"))
        .and_then(|props| props.get_mut("key"))
        .and_then(|key| key.get_mut("x-kubernetes-validations"))
        .and_then(|rules| rules.as_array_mut())
    {
        key.insert(1, schema::restricted_nodepool_rule());
    }
    schema
}

/// When nodes may be disrupted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// At most this many nodes (per reason and schedule) may be disrupting at once; the most
    /// restrictive active budget wins. Default: one budget of 10%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 50),
        extend(
            "default" = [{"nodes": "10%"}],
            "x-kubernetes-list-type" = "atomic",
            "x-kubernetes-validations" = [{
                "message": "'schedule' must be set with 'duration'",
                "rule": "self.all(x, has(x.schedule) == has(x.duration))"
            }]
        )
    )]
    pub budgets: Option<Vec<Budget>>,

    /// How long a node must have been a consolidation candidate before it is consolidated
    /// ("Never" turns consolidation off).
    #[schemars(extend("pattern" = schema::NILLABLE_DURATION_PATTERN))]
    pub consolidate_after: NillableDuration,

    /// Which nodes consolidation may remove; default WhenEmptyOrUnderutilized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "WhenEmptyOrUnderutilized"))]
    pub consolidation_policy: Option<ConsolidationPolicy>,
}

/// Which nodes consolidation may act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConsolidationPolicy {
    /// Only nodes without workload pods.
    WhenEmpty,
    /// Empty nodes and nodes whose pods fit elsewhere (or on a cheaper replacement).
    WhenEmptyOrUnderutilized,
    /// Upstream's newer policy that weighs savings against disruption.
    Balanced,
}

/// A disruption budget: how many nodes may be disrupting at once, when, and for what.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// How long the budget is active after each `schedule` hit (minutes and hours only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"))]
    pub duration: Option<String>,

    /// A node count ("5") or a percentage of the NodePool's nodes ("10%", rounded up).
    #[schemars(extend("default" = "10%", "pattern" = r"^((100|[0-9]{1,2})%|[0-9]+)$"))]
    pub nodes: String,

    /// The disruption reasons the budget applies to; all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50), extend("x-kubernetes-list-type" = "set"))]
    pub reasons: Option<Vec<DisruptionReason>>,

    /// When the budget starts being active, in cron syntax (UTC); always active when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "pattern" = r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
    ))]
    pub schedule: Option<String>,
}

/// Why a node is being disrupted, as budgets name it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum DisruptionReason {
    /// Its pods fit elsewhere or on a cheaper node.
    Underutilized,
    /// It runs no workload pods.
    Empty,
    /// It no longer matches its NodePool or NodeClass.
    Drifted,
}

/// Observed state of a NodePool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// ValidationSucceeded, NodeClassReady, NodeRegistrationHealthy and Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,

    /// The NodeClass generation last checked (resets NodeRegistrationHealthy when it moves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,

    /// How many nodes belong to this NodePool (the scale subresource's status path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub nodes: Option<i64>,

    /// Resources provisioned by this NodePool, compared against `limits`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::resource_list")]
    pub resources: Option<BTreeMap<String, Quantity>>,
}

impl NodePoolSpec {
    /// The disruption settings with upstream's defaults applied to whatever was left out.
    pub fn disruption_or_default(&self) -> Disruption {
        let mut disruption = self.disruption.clone().unwrap_or_else(|| Disruption {
            budgets: None,
            consolidate_after: NillableDuration::from("0s"),
            consolidation_policy: None,
        });
        disruption
            .budgets
            .get_or_insert_with(|| vec![Budget::default_budget()]);
        disruption
            .consolidation_policy
            .get_or_insert(ConsolidationPolicy::WhenEmptyOrUnderutilized);
        disruption
    }

    /// The weight used for ordering (absent means 0, below every explicit weight).
    pub fn weight_or_default(&self) -> i32 {
        self.weight.unwrap_or(0)
    }
}

impl NodeClaimTemplateSpec {
    /// `expireAfter` with upstream's default of 720h.
    pub fn expire_after_or_default(&self) -> NillableDuration {
        self.expire_after
            .clone()
            .unwrap_or_else(|| NillableDuration::from("720h"))
    }
}

impl Budget {
    /// Upstream's default budget: 10% of the nodes, always active, every reason.
    pub fn default_budget() -> Self {
        Self {
            duration: None,
            nodes: "10%".to_string(),
            reasons: None,
            schedule: None,
        }
    }
}
