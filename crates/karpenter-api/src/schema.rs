//! Hand-written schema fragments for the fields whose upstream validation the derive cannot
//! express (Kubernetes types from k8s-openapi carry no enums or patterns, and a few rules
//! differ between NodePool and NodeClaim although the Rust type is shared).
//!
//! Every fragment here mirrors the corresponding part of upstream's generated CRD; the
//! compatibility test in `tests/` compares them field by field.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Value, json};

/// A Kubernetes resource.Quantity, as controller-gen writes it.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// A qualified label key (optional DNS prefix, then a name).
pub const LABEL_KEY_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";

/// A label value (may be empty).
pub const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";

/// Durations that may also say "Never" (`expireAfter`, `consolidateAfter`).
pub const NILLABLE_DURATION_PATTERN: &str = r"^(([0-9]+(s|m|h))+|Never)$";

/// Durations without "Never" (`terminationGracePeriod`).
pub const DURATION_PATTERN: &str = r"^([0-9]+(s|m|h))+$";

/// CEL rules that keep users out of Karpenter's own label domain; shared by NodePool labels
/// and requirement keys.
pub(crate) fn restricted_domain_rule() -> Value {
    json!({
        "message": "label domain \"karpenter.sh\" is restricted",
        "rule": "self in [\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"] || !self.find(\"^([^/]+)\").endsWith(\"karpenter.sh\")"
    })
}

pub(crate) fn restricted_nodepool_rule() -> Value {
    json!({
        "message": "label \"karpenter.sh/nodepool\" is restricted",
        "rule": "self != \"karpenter.sh/nodepool\""
    })
}

pub(crate) fn restricted_hostname_rule() -> Value {
    json!({
        "message": "label \"kubernetes.io/hostname\" is restricted",
        "rule": "self != \"kubernetes.io/hostname\""
    })
}

/// `map[string]resource.Quantity` (a ResourceList).
pub fn resource_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true,
        },
    })
}

/// `[]corev1.Taint` with the validation Karpenter adds (effect enum, key and value patterns).
pub fn taints(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "x-kubernetes-list-type": "atomic",
        "items": {
            "type": "object",
            "required": ["effect", "key"],
            "properties": {
                "effect": {
                    "type": "string",
                    "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"],
                },
                "key": {
                    "type": "string",
                    "minLength": 1,
                    "pattern": LABEL_KEY_PATTERN,
                },
                "timeAdded": {"type": "string", "format": "date-time"},
                // Upstream validates taint values with the label *key* pattern; mirrored.
                "value": {"type": "string", "pattern": LABEL_KEY_PATTERN},
            },
        },
    })
}

fn conditions_with(reason: Value, required: &[&str]) -> Schema {
    json_schema!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": required,
            "properties": {
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "message": {"type": "string", "maxLength": 32768},
                "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
                "reason": reason,
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "type": {
                    "type": "string",
                    "maxLength": 316,
                    "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
                },
            },
        },
    })
}

/// metav1.Condition list as upstream's NodePool (and the standard metav1 type) validates it:
/// reason and message are required, reason is non-empty.
pub fn conditions(_: &mut SchemaGenerator) -> Schema {
    conditions_with(
        json!({
            "type": "string",
            "maxLength": 1024,
            "minLength": 1,
            "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        }),
        &["lastTransitionTime", "message", "reason", "status", "type"],
    )
}

/// Condition list as upstream's NodeClaim validates it: reason may be empty and only type,
/// status and lastTransitionTime are required.
pub fn nodeclaim_conditions(_: &mut SchemaGenerator) -> Schema {
    conditions_with(
        json!({
            "type": "string",
            "maxLength": 1024,
            "pattern": "^([A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?|)$",
        }),
        &["lastTransitionTime", "status", "type"],
    )
}

/// NodePool template labels: label-shaped values, at most 100, and none in the restricted
/// domains (the nodes would carry labels that Karpenter itself owns).
pub fn template_labels(_: &mut SchemaGenerator) -> Schema {
    let rules = json!([
        {
            "message": "label domain \"karpenter.sh\" is restricted",
            "rule": "self.all(x, x in [\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"] || !x.find(\"^([^/]+)\").endsWith(\"karpenter.sh\"))"
        },
        {
            "message": "label \"karpenter.sh/nodepool\" is restricted",
            "rule": "self.all(x, x != \"karpenter.sh/nodepool\")"
        },
        {
            "message": "label \"kubernetes.io/hostname\" is restricted",
            "rule": "self.all(x, x != \"kubernetes.io/hostname\")"
        }
    ]);
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "type": "string",
            "maxLength": 63,
            "pattern": LABEL_VALUE_PATTERN,
        },
        "maxProperties": 100,
        "x-kubernetes-map-type": "atomic",
        "x-kubernetes-validations": rules,
    })
}

/// Template annotations: free-form strings, merged key by key.
pub fn template_annotations(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {"type": "string"},
        "x-kubernetes-map-type": "granular",
    })
}

/// A metav1.LabelSelector, as controller-gen writes it (k8s-openapi's own schema carries no
/// list types).
pub fn label_selector(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "properties": {
            "matchExpressions": {
                "type": "array",
                "x-kubernetes-list-type": "atomic",
                "items": {
                    "type": "object",
                    "required": ["key", "operator"],
                    "properties": {
                        "key": {"type": "string"},
                        "operator": {"type": "string"},
                        "values": {
                            "type": "array",
                            "items": {"type": "string"},
                            "x-kubernetes-list-type": "atomic",
                        },
                    },
                },
            },
            "matchLabels": {
                "type": "object",
                "additionalProperties": {"type": "string"},
            },
        },
    })
}

/// The schema `T` derives, with `extra` rules appended to its `x-kubernetes-validations`.
/// Used where NodePool adds rules to a type it shares with NodeClaim.
pub(crate) fn with_validations<T: JsonSchema>(
    generator: &mut SchemaGenerator,
    extra: &[Value],
) -> Schema {
    let mut schema = generator.subschema_for::<T>();
    add_validations(&mut schema, extra);
    schema
}

pub(crate) fn add_validations(schema: &mut Schema, extra: &[Value]) {
    if extra.is_empty() {
        return;
    }
    let object = schema.ensure_object();
    let rules = object
        .entry("x-kubernetes-validations")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(rules) = rules {
        rules.extend(extra.iter().cloned());
    }
}

/// Drops `format`: upstream's Go `int` fields carry none, and the derive adds int64.
pub(crate) fn no_format(schema: &mut Schema) {
    schema.remove("format");
}
