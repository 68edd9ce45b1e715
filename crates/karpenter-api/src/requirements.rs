//! Node selector requirements with Karpenter's `minValues`, and the NodeClass reference:
//! the parts of the spec that NodePool templates and NodeClaims share.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::{LABEL_KEY_PATTERN, restricted_domain_rule, restricted_hostname_rule};

/// How a requirement relates a label key to its values. Karpenter adds `Gte` and `Lte` to the
/// core operators, so this cannot be the core NodeSelectorOperator string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Operator {
    /// Greater than or equal to the single integer value.
    Gte,
    /// Less than or equal to the single integer value.
    Lte,
    /// The label value is one of the values.
    In,
    /// The label value is none of the values (or the label is absent).
    NotIn,
    /// The label is present, whatever its value.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// Strictly greater than the single integer value.
    Gt,
    /// Strictly less than the single integer value.
    Lt,
}

/// A node selector requirement plus `minValues`: the flexibility (number of distinct values)
/// a launch must keep, so Karpenter cannot narrow a NodeClaim to a single instance type.
///
/// The schema carries NodeClaim's rules; NodePool adds the `karpenter.sh/nodepool` one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    /// The label key the requirement applies to.
    #[schemars(extend(
        "maxLength" = 316,
        "pattern" = LABEL_KEY_PATTERN,
        "x-kubernetes-validations" = [restricted_domain_rule(), restricted_hostname_rule()]
    ))]
    pub key: String,

    /// Minimum number of distinct values the launch must be able to choose from (alpha
    /// upstream, 1..=50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50), transform = crate::schema::no_format)]
    pub min_values: Option<i64>,

    /// How the key relates to the values.
    pub operator: Operator,

    /// One or more values for In/NotIn, exactly one integer for Gt/Lt/Gte/Lte, none for
    /// Exists/DoesNotExist. (Upstream's CRD puts maxLength and pattern on the array itself,
    /// where the API server ignores them; we mirror that for schema fidelity.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "atomic",
        "maxLength" = 63,
        "pattern" = crate::schema::LABEL_VALUE_PATTERN
    ))]
    pub values: Option<Vec<String>>,
}

impl NodeSelectorRequirementWithMinValues {
    /// The values, empty when none were given.
    pub fn values(&self) -> &[String] {
        self.values.as_deref().unwrap_or_default()
    }
}

/// The CEL rules both NodePool and NodeClaim put on their requirement lists; they catch the
/// malformed requirements that would otherwise only fail at scheduling time.
pub(crate) fn requirement_list_rules() -> serde_json::Value {
    serde_json::json!([
        {
            "message": "requirements with operator 'In' must have a value defined",
            "rule": "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"
        },
        {
            "message": "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
            "rule": "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)"
        },
        {
            "message": "requirements with 'minValues' must have at least that many values specified in the 'values' field",
            "rule": "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)"
        }
    ])
}

/// Points at the provider's NodeClass (for us a ClusterAPINodeClass). Group and kind are
/// explicit so several providers' NodeClasses could coexist in one cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub struct NodeClassReference {
    /// API group of the referent (no version).
    #[schemars(extend(
        "pattern" = "^[^/]*$",
        "x-kubernetes-validations" = [{"message": "group may not be empty", "rule": "self != ''"}]
    ))]
    pub group: String,
    /// Kind of the referent.
    #[schemars(extend(
        "x-kubernetes-validations" = [{"message": "kind may not be empty", "rule": "self != ''"}]
    ))]
    pub kind: String,
    /// Name of the referent (NodeClasses are cluster-scoped).
    #[schemars(extend(
        "x-kubernetes-validations" = [{"message": "name may not be empty", "rule": "self != ''"}]
    ))]
    pub name: String,
}
