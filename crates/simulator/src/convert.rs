//! Kubernetes / Karpenter wire objects -> the core's plain-data model.
//!
//! The NodePool types here mirror `karpenter.sh/v1` field for field (same names, same
//! nesting), so users paste their own NodePools into a scenario. They stand in until the
//! `karpenter-api` crate's types land; the conversion functions take plain values so the
//! controller can reuse them unchanged once the types move.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use provisioner_core as core;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Result, SimError};
use crate::quantity;

/// `karpenter.sh/v1` NodePool (spec only; status is accepted and ignored).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolV1 {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub metadata: ObjectMeta,
    pub spec: NodePoolSpec,
}

/// The parts of `metadata` the simulator reads; anything else is ignored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolSpec {
    #[serde(default)]
    pub template: NodeClaimTemplate,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption: Option<DisruptionSpec>,
    /// Resource limits (`cpu`, `memory`, `nodes`, `nvidia.com/gpu`, ...), as quantities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, IntOrQuantity>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

/// Quantities appear in YAML as strings or bare numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum IntOrQuantity {
    Int(i64),
    Float(f64),
    Str(String),
}

impl IntOrQuantity {
    fn as_string(&self) -> String {
        match self {
            IntOrQuantity::Int(i) => i.to_string(),
            IntOrQuantity::Float(f) => f.to_string(),
            IntOrQuantity::Str(s) => s.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMeta>,
    #[serde(default)]
    pub spec: NodeClaimTemplateSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMeta {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplateSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<RequirementV1>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<corev1::Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<corev1::Taint>,
    /// Duration (`720h`) or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_ref: Option<NodeClassRef>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassRef {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequirementV1 {
    pub key: String,
    /// In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte.
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionSpec {
    /// WhenEmpty | WhenEmptyOrUnderutilized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidation_policy: Option<String>,
    /// Duration or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidate_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<Vec<BudgetV1>>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BudgetV1 {
    #[serde(default = "ten_percent")]
    pub nodes: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
}

fn ten_percent() -> String {
    "10%".into()
}

/// Parse a Go-style duration (`90s`, `10m`, `1h30m`, `720h`) into seconds; `Never` is `None`.
pub fn parse_duration(s: &str) -> Result<Option<i64>> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("never") {
        return Ok(None);
    }
    let bad = || SimError::Duration(s.to_string());
    if t.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    let mut num = String::new();
    let mut chars = t.chars().peekable();
    let mut any = false;
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
            continue;
        }
        let mut unit = c.to_string();
        if c == 'm' && chars.peek() == Some(&'s') {
            unit.push('s');
            chars.next();
        }
        let n: f64 = num.parse().map_err(|_| bad())?;
        num.clear();
        total += n * match unit.as_str() {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            _ => return Err(bad()),
        };
        any = true;
    }
    if !num.is_empty() {
        // A bare number: seconds.
        if any {
            return Err(bad());
        }
        total = num.parse().map_err(|_| bad())?;
    }
    Ok(Some(total.round() as i64))
}

fn operator(s: &str) -> Option<core::Operator> {
    Some(match s {
        "In" => core::Operator::In,
        "NotIn" => core::Operator::NotIn,
        "Exists" => core::Operator::Exists,
        "DoesNotExist" => core::Operator::DoesNotExist,
        "Gt" => core::Operator::Gt,
        "Lt" => core::Operator::Lt,
        "Gte" => core::Operator::Gte,
        "Lte" => core::Operator::Lte,
        _ => return None,
    })
}

fn taint_effect(s: &str) -> Option<core::TaintEffect> {
    Some(match s {
        "NoSchedule" => core::TaintEffect::NoSchedule,
        "PreferNoSchedule" => core::TaintEffect::PreferNoSchedule,
        "NoExecute" => core::TaintEffect::NoExecute,
        _ => return None,
    })
}

/// A Kubernetes taint; `field` names it in errors.
pub fn taint(t: &corev1::Taint, field: &str) -> Result<core::Taint> {
    Ok(core::Taint {
        key: t.key.clone(),
        value: t.value.clone().filter(|v| !v.is_empty()),
        effect: taint_effect(&t.effect).ok_or_else(|| {
            SimError::invalid(
                "",
                format!("{field}.effect"),
                format!("unknown taint effect `{}`", t.effect),
            )
        })?,
    })
}

/// Requests map (`cpu: 500m`) -> core resources.
pub fn resources(map: &BTreeMap<String, String>, field: &str) -> Result<core::Resources> {
    let mut r = core::Resources::default();
    for (k, v) in map {
        let err = |e: SimError| SimError::invalid("", format!("{field}.{k}"), e.to_string());
        match k.as_str() {
            "cpu" => r.cpu_milli = quantity::cpu_milli(v).map_err(err)?,
            "memory" => r.memory = quantity::count(v).map_err(err)?,
            "pods" => r.pods = quantity::count(v).map_err(err)?,
            "ephemeral-storage" => r.ephemeral_storage = quantity::count(v).map_err(err)?,
            other => {
                r.extended
                    .insert(other.to_string(), quantity::count(v).map_err(err)?);
            }
        }
    }
    Ok(r)
}

/// `karpenter.sh/v1` NodePool -> core NodePool. Errors name the field under `field`.
pub fn nodepool(np: &NodePoolV1, field: &str) -> Result<core::NodePool> {
    let spec = &np.spec;
    let tspec = &spec.template.spec;
    let mut out = core::NodePool {
        name: np.metadata.name.clone(),
        weight: spec.weight.unwrap_or(0),
        ..Default::default()
    };
    if out.name.is_empty() {
        return Err(SimError::invalid(
            "",
            format!("{field}.metadata.name"),
            "a NodePool needs a name",
        ));
    }
    for (i, r) in tspec.requirements.iter().enumerate() {
        let f = format!("{field}.spec.template.spec.requirements[{i}]");
        let op = operator(&r.operator).ok_or_else(|| {
            SimError::invalid(
                "",
                format!("{f}.operator"),
                format!("unknown operator `{}`", r.operator),
            )
        })?;
        out.requirements.push(core::Requirement {
            key: r.key.clone(),
            operator: op,
            values: r.values.clone(),
            min_values: r.min_values,
        });
    }
    if let Some(meta) = &spec.template.metadata {
        out.labels = meta.labels.clone();
    }
    for (i, t) in tspec.taints.iter().enumerate() {
        out.taints.push(taint(
            t,
            &format!("{field}.spec.template.spec.taints[{i}]"),
        )?);
    }
    for (i, t) in tspec.startup_taints.iter().enumerate() {
        out.startup_taints.push(taint(
            t,
            &format!("{field}.spec.template.spec.startupTaints[{i}]"),
        )?);
    }
    if let Some(e) = &tspec.expire_after {
        out.expire_after_secs = parse_duration(e).map_err(|err| {
            SimError::invalid(
                "",
                format!("{field}.spec.template.spec.expireAfter"),
                err.to_string(),
            )
        })?;
    }
    if let Some(limits) = &spec.limits {
        let mut r = core::Resources::default();
        for (k, v) in limits {
            let s = v.as_string();
            let f = format!("{field}.spec.limits.{k}");
            let err = |e: SimError| SimError::invalid("", f.clone(), e.to_string());
            match k.as_str() {
                "cpu" => r.cpu_milli = quantity::cpu_milli(&s).map_err(err)?,
                "memory" => r.memory = quantity::count(&s).map_err(err)?,
                "pods" => r.pods = quantity::count(&s).map_err(err)?,
                "ephemeral-storage" => r.ephemeral_storage = quantity::count(&s).map_err(err)?,
                other => {
                    r.extended
                        .insert(other.to_string(), quantity::count(&s).map_err(err)?);
                }
            }
        }
        out.limits = Some(r);
    }
    if let Some(d) = &spec.disruption {
        let f = format!("{field}.spec.disruption");
        if let Some(p) = &d.consolidation_policy {
            out.disruption.consolidation_policy = match p.as_str() {
                "WhenEmpty" => core::ConsolidationPolicy::WhenEmpty,
                "WhenEmptyOrUnderutilized" => core::ConsolidationPolicy::WhenEmptyOrUnderutilized,
                other => {
                    return Err(SimError::invalid(
                        "",
                        format!("{f}.consolidationPolicy"),
                        format!("unknown policy `{other}` (WhenEmpty | WhenEmptyOrUnderutilized)"),
                    ));
                }
            };
        }
        if let Some(c) = &d.consolidate_after {
            out.disruption.consolidate_after_secs = parse_duration(c).map_err(|e| {
                SimError::invalid("", format!("{f}.consolidateAfter"), e.to_string())
            })?;
        }
        if let Some(budgets) = &d.budgets {
            out.disruption.budgets.clear();
            for (i, b) in budgets.iter().enumerate() {
                let bf = format!("{f}.budgets[{i}]");
                let nodes = b.nodes.trim();
                let valid = match nodes.strip_suffix('%') {
                    Some(p) => p.parse::<u32>().is_ok_and(|p| p <= 100),
                    None => nodes.parse::<u32>().is_ok(),
                };
                if !valid {
                    return Err(SimError::invalid(
                        "",
                        format!("{bf}.nodes"),
                        format!("`{nodes}` is neither a count nor a percentage"),
                    ));
                }
                let mut reasons = Vec::new();
                for (j, r) in b.reasons.iter().flatten().enumerate() {
                    reasons.push(match r.as_str() {
                        "Empty" => core::DisruptionReason::Empty,
                        "Underutilized" => core::DisruptionReason::Underutilized,
                        "Drifted" => core::DisruptionReason::Drifted,
                        other => {
                            return Err(SimError::invalid(
                                "",
                                format!("{bf}.reasons[{j}]"),
                                format!(
                                    "unknown reason `{other}` (Empty | Underutilized | Drifted)"
                                ),
                            ));
                        }
                    });
                }
                let duration_secs = match &b.duration {
                    Some(d) => parse_duration(d).map_err(|e| {
                        SimError::invalid("", format!("{bf}.duration"), e.to_string())
                    })?,
                    None => None,
                };
                if b.schedule.is_some() != duration_secs.is_some() {
                    return Err(SimError::invalid(
                        "",
                        bf,
                        "`schedule` and `duration` must be set together",
                    ));
                }
                out.disruption.budgets.push(core::Budget {
                    nodes: nodes.to_string(),
                    reasons,
                    schedule: b.schedule.clone(),
                    duration_secs,
                });
            }
        }
    }
    Ok(out)
}

fn label_selector(s: &metav1::LabelSelector) -> core::LabelSelector {
    core::LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions: s
            .match_expressions
            .iter()
            .flatten()
            .filter_map(|e| {
                Some(core::SelectorRequirement {
                    key: e.key.clone(),
                    operator: match e.operator.as_str() {
                        "In" => core::SelectorOperator::In,
                        "NotIn" => core::SelectorOperator::NotIn,
                        "Exists" => core::SelectorOperator::Exists,
                        "DoesNotExist" => core::SelectorOperator::DoesNotExist,
                        _ => return None,
                    },
                    values: e.values.clone().unwrap_or_default(),
                })
            })
            .collect(),
    }
}

fn node_selector_term(t: &corev1::NodeSelectorTerm, field: &str) -> Result<core::NodeSelectorTerm> {
    let mut out = Vec::new();
    for (i, e) in t.match_expressions.iter().flatten().enumerate() {
        out.push(core::Requirement {
            key: e.key.clone(),
            operator: operator(&e.operator).ok_or_else(|| {
                SimError::invalid(
                    "",
                    format!("{field}.matchExpressions[{i}].operator"),
                    format!("unknown operator `{}`", e.operator),
                )
            })?,
            values: e.values.clone().unwrap_or_default(),
            min_values: None,
        });
    }
    Ok(out)
}

fn pod_affinity_term(t: &corev1::PodAffinityTerm) -> core::PodAffinityTerm {
    core::PodAffinityTerm {
        label_selector: t
            .label_selector
            .as_ref()
            .map(label_selector)
            .unwrap_or_default(),
        namespaces: t.namespaces.clone().unwrap_or_default(),
        namespace_selector: t.namespace_selector.as_ref().map(label_selector),
        topology_key: t.topology_key.clone(),
        match_label_keys: t.match_label_keys.clone().unwrap_or_default(),
    }
}

fn pod_affinity(
    required: Option<&Vec<corev1::PodAffinityTerm>>,
    preferred: Option<&Vec<corev1::WeightedPodAffinityTerm>>,
) -> core::PodAffinity {
    core::PodAffinity {
        required: required
            .iter()
            .flat_map(|v| v.iter())
            .map(pod_affinity_term)
            .collect(),
        preferred: preferred
            .iter()
            .flat_map(|v| v.iter())
            .map(|w| core::WeightedPodAffinityTerm {
                weight: w.weight,
                term: pod_affinity_term(&w.pod_affinity_term),
            })
            .collect(),
    }
}

/// Pod-spec constraints in Kubernetes' shape, applied to a core pod.
pub fn apply_constraints(
    pod: &mut core::Pod,
    tolerations: &[corev1::Toleration],
    affinity: Option<&corev1::Affinity>,
    spread: &[corev1::TopologySpreadConstraint],
    field: &str,
) -> Result<()> {
    for t in tolerations {
        pod.tolerations.push(core::Toleration {
            key: t.key.clone().filter(|k| !k.is_empty()),
            operator: match t.operator.as_deref() {
                Some("Exists") => core::TolerationOperator::Exists,
                _ => core::TolerationOperator::Equal,
            },
            value: t.value.clone(),
            effect: t.effect.as_deref().and_then(taint_effect),
        });
    }
    if let Some(a) = affinity {
        if let Some(na) = &a.node_affinity {
            if let Some(req) = &na.required_during_scheduling_ignored_during_execution {
                for (i, term) in req.node_selector_terms.iter().enumerate() {
                    pod.required_node_affinity.push(node_selector_term(
                        term,
                        &format!("{field}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"),
                    )?);
                }
            }
            for (i, p) in na
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .enumerate()
            {
                pod.preferred_node_affinity.push(core::WeightedNodeSelectorTerm {
                    weight: p.weight,
                    term: node_selector_term(
                        &p.preference,
                        &format!("{field}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference"),
                    )?,
                });
            }
        }
        if let Some(pa) = &a.pod_affinity {
            pod.pod_affinity = pod_affinity(
                pa.required_during_scheduling_ignored_during_execution
                    .as_ref(),
                pa.preferred_during_scheduling_ignored_during_execution
                    .as_ref(),
            );
        }
        if let Some(pa) = &a.pod_anti_affinity {
            pod.pod_anti_affinity = pod_affinity(
                pa.required_during_scheduling_ignored_during_execution
                    .as_ref(),
                pa.preferred_during_scheduling_ignored_during_execution
                    .as_ref(),
            );
        }
    }
    for s in spread {
        pod.topology_spread.push(core::TopologySpreadConstraint {
            max_skew: s.max_skew,
            topology_key: s.topology_key.clone(),
            when_unsatisfiable: if s.when_unsatisfiable == "ScheduleAnyway" {
                core::WhenUnsatisfiable::ScheduleAnyway
            } else {
                core::WhenUnsatisfiable::DoNotSchedule
            },
            label_selector: s
                .label_selector
                .as_ref()
                .map(label_selector)
                .unwrap_or_default(),
            min_domains: s.min_domains,
            node_affinity_policy: s.node_affinity_policy.as_deref().map(policy),
            node_taints_policy: s.node_taints_policy.as_deref().map(policy),
            match_label_keys: s.match_label_keys.clone().unwrap_or_default(),
        });
    }
    Ok(())
}

fn policy(s: &str) -> core::InclusionPolicy {
    if s == "Ignore" {
        core::InclusionPolicy::Ignore
    } else {
        core::InclusionPolicy::Honor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() -> Result<()> {
        assert_eq!(parse_duration("30s")?, Some(30));
        assert_eq!(parse_duration("10m")?, Some(600));
        assert_eq!(parse_duration("1h30m")?, Some(5400));
        assert_eq!(parse_duration("720h")?, Some(2_592_000));
        assert_eq!(parse_duration("Never")?, None);
        assert_eq!(parse_duration("15")?, Some(15));
        assert!(parse_duration("3 days").is_err());
        assert!(parse_duration("").is_err());
        Ok(())
    }

    #[test]
    fn nodepool_from_yaml() -> Result<()> {
        let y = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  weight: 10
  template:
    metadata:
      labels: {team: a}
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
        - key: node.kubernetes.io/instance-type
          operator: Exists
          minValues: 3
      taints:
        - key: dedicated
          value: a
          effect: NoSchedule
      expireAfter: Never
      nodeClassRef: {group: karpenter.cluster.x-k8s.io, kind: ClusterAPINodeClass, name: default}
  limits:
    cpu: 1000
    memory: 1000Gi
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 5m
    budgets:
      - nodes: "20%"
      - nodes: "0"
        reasons: [Underutilized]
        schedule: "0 9 * * mon-fri"
        duration: 8h
status:
  nodes: 3
"#;
        let v: NodePoolV1 =
            serde_saphyr::from_str(y).map_err(|e| SimError::Report(e.to_string()))?;
        let np = nodepool(&v, "nodePools[0]")?;
        assert_eq!(np.name, "general");
        assert_eq!(np.weight, 10);
        assert_eq!(np.requirements.len(), 2);
        assert_eq!(np.requirements[1].min_values, Some(3));
        assert_eq!(np.taints[0].effect, core::TaintEffect::NoSchedule);
        assert_eq!(np.expire_after_secs, None);
        let limits = np.limits.clone().unwrap_or_default();
        assert_eq!(limits.cpu_milli, 1_000_000);
        assert_eq!(limits.memory, 1000 << 30);
        assert_eq!(
            np.disruption.consolidation_policy,
            core::ConsolidationPolicy::WhenEmpty
        );
        assert_eq!(np.disruption.consolidate_after_secs, Some(300));
        assert_eq!(np.disruption.budgets.len(), 2);
        assert_eq!(np.disruption.budgets[1].duration_secs, Some(8 * 3600));
        assert_eq!(np.labels.get("team").map(String::as_str), Some("a"));
        Ok(())
    }

    #[test]
    fn bad_operator_names_field() {
        let v = NodePoolV1 {
            metadata: ObjectMeta {
                name: "x".into(),
                ..Default::default()
            },
            spec: NodePoolSpec {
                template: NodeClaimTemplate {
                    metadata: None,
                    spec: NodeClaimTemplateSpec {
                        requirements: vec![RequirementV1 {
                            key: "k".into(),
                            operator: "Within".into(),
                            values: vec![],
                            min_values: None,
                        }],
                        ..Default::default()
                    },
                },
                ..Default::default()
            },
            ..Default::default()
        };
        let e = nodepool(&v, "nodePools[0]")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            e.contains("nodePools[0].spec.template.spec.requirements[0].operator"),
            "{e}"
        );
    }
}
