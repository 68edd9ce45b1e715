//! Kubernetes / Karpenter wire objects -> the core's plain-data model.
//!
//! Scenario NodePools are read as `karpenter-api`'s `karpenter.sh/v1` NodePool, the type the
//! controller serves and our CRD is generated from, so a scenario accepts exactly what the API
//! server accepts and users paste their own NodePools (`kubectl get nodepool -o yaml`) unchanged.
//! Fields the API server defaults are left out of the core model's input and take the core's
//! defaults, which are upstream's (`expireAfter` 720h, one 10% budget, ...).
//!
//! [`nodepool`] is the karpenter-api -> core conversion the controller needs too (it already
//! converts requirements the same way in `cloudprovider::convert`); when the controller
//! converts whole NodePools, this should move to one place both use rather than be copied.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use karpenter_api as api;
use provisioner_core as core;

use crate::error::{Result, SimError};
use crate::quantity;

/// The NodePool type scenarios and kubectl snapshots are read as: `karpenter-api`'s, which is
/// upstream's `karpenter.sh/v1` schema field for field. (The name predates the move to
/// `karpenter-api` and is kept for the importers.)
pub use karpenter_api::NodePool as NodePoolV1;

/// Whole seconds of a duration, rounded to the nearest: the simulation clock ticks in seconds.
fn whole_secs(d: Duration) -> i64 {
    i64::try_from(d.as_millis().saturating_add(500) / 1000).unwrap_or(i64::MAX)
}

/// A `NillableDuration` in seconds (`None` for Never); errors name `field`.
fn nillable_secs(d: &api::NillableDuration, field: String) -> Result<Option<i64>> {
    d.parse()
        .map(|d| d.map(whole_secs))
        .map_err(|e| SimError::invalid("", field, e.to_string()))
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
    resource_list(map.iter().map(|(k, v)| (k, v.as_str())), field)
}

/// A resource list (name -> quantity text) -> core resources; errors name `field.<name>`. One
/// reader for pod requests (plain strings) and NodePool limits (Kubernetes `Quantity`s).
fn resource_list<'a>(
    entries: impl IntoIterator<Item = (&'a String, &'a str)>,
    field: &str,
) -> Result<core::Resources> {
    let mut r = core::Resources::default();
    for (k, v) in entries {
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

/// A NodePool requirement in the core's form; `field` names it in errors.
fn requirement(
    r: &api::NodeSelectorRequirementWithMinValues,
    field: &str,
) -> Result<core::Requirement> {
    let operator = match r.operator {
        api::Operator::In => core::Operator::In,
        api::Operator::NotIn => core::Operator::NotIn,
        api::Operator::Exists => core::Operator::Exists,
        api::Operator::DoesNotExist => core::Operator::DoesNotExist,
        api::Operator::Gt => core::Operator::Gt,
        api::Operator::Lt => core::Operator::Lt,
        api::Operator::Gte => core::Operator::Gte,
        api::Operator::Lte => core::Operator::Lte,
    };
    let min_values = r
        .min_values
        .map(|m| {
            u32::try_from(m).map_err(|_| {
                SimError::invalid(
                    "",
                    format!("{field}.minValues"),
                    format!("`{m}` is not a count"),
                )
            })
        })
        .transpose()?;
    Ok(core::Requirement {
        key: r.key.clone(),
        operator,
        values: r.values().to_vec(),
        min_values,
    })
}

/// `karpenter.sh/v1` NodePool -> core NodePool. Errors name the field under `field`.
///
/// Validation that the API server does with CEL (label domains, `In` with values, ...) is not
/// repeated here: the scheduling simulation treats such requirements as upstream's scheduler
/// would. What the core cannot represent is an error rather than silently dropped.
pub fn nodepool(np: &NodePoolV1, field: &str) -> Result<core::NodePool> {
    let spec = &np.spec;
    let tspec = &spec.template.spec;
    let name = np.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(SimError::invalid(
            "",
            format!("{field}.metadata.name"),
            "a NodePool needs a name",
        ));
    }
    if spec.replicas.is_some() {
        return Err(SimError::invalid(
            "",
            format!("{field}.spec.replicas"),
            "static NodePools (`replicas`) are not simulated",
        ));
    }
    let mut out = core::NodePool {
        name,
        weight: spec.weight_or_default(),
        ..Default::default()
    };
    let tfield = format!("{field}.spec.template.spec");
    for (i, r) in tspec.requirements.iter().enumerate() {
        out.requirements
            .push(requirement(r, &format!("{tfield}.requirements[{i}]"))?);
    }
    if let Some(labels) = spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref())
    {
        out.labels = labels.clone();
    }
    for (i, t) in tspec.taints.iter().flatten().enumerate() {
        out.taints.push(taint(t, &format!("{tfield}.taints[{i}]"))?);
    }
    for (i, t) in tspec.startup_taints.iter().flatten().enumerate() {
        out.startup_taints
            .push(taint(t, &format!("{tfield}.startupTaints[{i}]"))?);
    }
    if let Some(e) = &tspec.expire_after {
        out.expire_after_secs = nillable_secs(e, format!("{tfield}.expireAfter"))?;
    }
    if let Some(limits) = &spec.limits {
        out.limits = Some(resource_list(
            limits.iter().map(|(k, v)| (k, v.0.as_str())),
            &format!("{field}.spec.limits"),
        )?);
    }
    if let Some(d) = &spec.disruption {
        let f = format!("{field}.spec.disruption");
        if let Some(p) = d.consolidation_policy {
            out.disruption.consolidation_policy = match p {
                api::ConsolidationPolicy::WhenEmpty => core::ConsolidationPolicy::WhenEmpty,
                api::ConsolidationPolicy::WhenEmptyOrUnderutilized => {
                    core::ConsolidationPolicy::WhenEmptyOrUnderutilized
                }
                api::ConsolidationPolicy::Balanced => {
                    return Err(SimError::invalid(
                        "",
                        format!("{f}.consolidationPolicy"),
                        "`Balanced` is not simulated yet (WhenEmpty | WhenEmptyOrUnderutilized)",
                    ));
                }
            };
        }
        out.disruption.consolidate_after_secs =
            nillable_secs(&d.consolidate_after, format!("{f}.consolidateAfter"))?;
        if let Some(budgets) = &d.budgets {
            out.disruption.budgets = budgets
                .iter()
                .enumerate()
                .map(|(i, b)| budget(b, &format!("{f}.budgets[{i}]")))
                .collect::<Result<_>>()?;
        }
    }
    Ok(out)
}

/// A disruption budget in the core's form; `field` names it in errors.
fn budget(b: &api::Budget, field: &str) -> Result<core::Budget> {
    let nodes = b.nodes.trim();
    let valid = match nodes.strip_suffix('%') {
        Some(p) => p.parse::<u32>().is_ok_and(|p| p <= 100),
        None => nodes.parse::<u32>().is_ok(),
    };
    if !valid {
        return Err(SimError::invalid(
            "",
            format!("{field}.nodes"),
            format!("`{nodes}` is neither a count nor a percentage"),
        ));
    }
    let reasons = b
        .reasons
        .iter()
        .flatten()
        .map(|r| match r {
            api::DisruptionReason::Empty => core::DisruptionReason::Empty,
            api::DisruptionReason::Underutilized => core::DisruptionReason::Underutilized,
            api::DisruptionReason::Drifted => core::DisruptionReason::Drifted,
        })
        .collect();
    let duration_secs = match &b.duration {
        Some(d) => Some(
            api::parse_go_duration(d)
                .map(whole_secs)
                .map_err(|e| SimError::invalid("", format!("{field}.duration"), e.to_string()))?,
        ),
        None => None,
    };
    if b.schedule.is_some() != duration_secs.is_some() {
        return Err(SimError::invalid(
            "",
            field,
            "`schedule` and `duration` must be set together",
        ));
    }
    Ok(core::Budget {
        nodes: nodes.to_string(),
        reasons,
        schedule: b.schedule.clone(),
        duration_secs,
    })
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

    fn parse_nodepool(y: &str) -> Result<NodePoolV1> {
        serde_saphyr::from_str(y).map_err(|e| SimError::Report(e.to_string()))
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
        let np = nodepool(&parse_nodepool(y)?, "nodePools[0]")?;
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
        assert_eq!(
            np.disruption.budgets[1].reasons,
            vec![core::DisruptionReason::Underutilized]
        );
        assert_eq!(np.disruption.budgets[1].duration_secs, Some(8 * 3600));
        assert_eq!(np.labels.get("team").map(String::as_str), Some("a"));
        Ok(())
    }

    /// What the API server would default is left to the core, whose defaults are upstream's.
    #[test]
    fn minimal_nodepool_takes_upstream_defaults() -> Result<()> {
        let y = "metadata: {name: p}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.cluster.x-k8s.io, kind: ClusterAPINodeClass, name: default}
      requirements: []
";
        let np = nodepool(&parse_nodepool(y)?, "nodePools[0]")?;
        assert_eq!(
            np,
            core::NodePool {
                name: "p".into(),
                ..Default::default()
            }
        );
        assert_eq!(np.expire_after_secs, Some(720 * 3600));
        Ok(())
    }

    /// Upstream's own example NodePools (kept as fixtures for the CRD tests) paste unchanged.
    #[test]
    fn upstream_docs_nodepools_convert() -> Result<()> {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/nodepools");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).map_err(|e| SimError::io(&dir, e))? {
            let path = entry.map_err(|e| SimError::io(&dir, e))?.path();
            let text = std::fs::read_to_string(&path).map_err(|e| SimError::io(&path, e))?;
            let np = parse_nodepool(&text)?;
            let result = nodepool(&np, "nodePools[0]");
            if np.spec.replicas.is_some() {
                assert!(
                    result.is_err(),
                    "{}: static pools are refused",
                    path.display()
                );
            } else {
                let core = result?;
                assert_eq!(Some(&core.name), np.metadata.name.as_ref());
                assert_eq!(
                    core.requirements.len(),
                    np.spec.template.spec.requirements.len()
                );
            }
            n += 1;
        }
        assert!(n >= 3, "fixtures found: {n}");
        Ok(())
    }

    fn error_of(y: &str) -> String {
        match parse_nodepool(y).and_then(|v| nodepool(&v, "nodePools[0]")) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn what_the_core_cannot_represent_names_its_field() {
        let head = "metadata: {name: p}
spec:
  template:
    spec:
      nodeClassRef: {group: g, kind: K, name: n}
      requirements: []
";
        let cases = [
            ("  replicas: 3\n", "nodePools[0].spec.replicas"),
            (
                "  disruption: {consolidateAfter: 0s, consolidationPolicy: Balanced}\n",
                "nodePools[0].spec.disruption.consolidationPolicy",
            ),
            (
                "  disruption: {consolidateAfter: soon}\n",
                "nodePools[0].spec.disruption.consolidateAfter",
            ),
            (
                "  disruption: {consolidateAfter: 0s, budgets: [{nodes: lots}]}\n",
                "nodePools[0].spec.disruption.budgets[0].nodes",
            ),
            (
                "  disruption: {consolidateAfter: 0s, budgets: [{nodes: '1', schedule: '@daily'}]}\n",
                "nodePools[0].spec.disruption.budgets[0]",
            ),
            ("  limits: {cpu: many}\n", "nodePools[0].spec.limits.cpu"),
        ];
        for (tail, field) in cases {
            let e = error_of(&format!("{head}{tail}"));
            assert!(e.contains(&format!("`{field}`")), "{tail}: {e}");
        }
        let e = error_of(&head.replace("{name: p}", "{labels: {a: b}}"));
        assert!(e.contains("nodePools[0].metadata.name"), "{e}");
    }
}
