//! Pod-spec constraints (tolerations, node and pod (anti-)affinity, topology spread) and
//! taints, from Kubernetes' shape to the core's.

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use provisioner_core as core;

use crate::error::{ConvertError, Result};

pub(crate) fn operator(s: &str) -> Option<core::Operator> {
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

pub fn taint_effect(s: &str) -> Option<core::TaintEffect> {
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
            ConvertError::new(
                format!("{field}.effect"),
                format!("unknown taint effect `{}`", t.effect),
            )
        })?,
    })
}

/// Requests map (`cpu: 500m`) -> core resources.
pub fn label_selector(s: &metav1::LabelSelector) -> core::LabelSelector {
    core::LabelSelector {
        match_labels: s
            .match_labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
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
                ConvertError::new(
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
