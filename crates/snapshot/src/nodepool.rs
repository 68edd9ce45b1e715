//! `karpenter.sh/v1` NodePool -> the core's NodePool.
//!
//! Fields the API server defaults may be absent (a scenario or `kubectl get -o yaml` of an
//! object never stored); they take the core's defaults, which are upstream's (`expireAfter`
//! 720h, one 10% budget, ...). What the core cannot represent is an error naming its field,
//! never silently dropped.

use std::time::Duration;

use karpenter_api as api;
use provisioner_core as core;

use crate::constraints::taint;
use crate::error::{ConvertError, Result};
use crate::resources::resource_list;

/// Whole seconds of a duration, rounded to the nearest: the simulation clock ticks in seconds.
pub fn whole_secs(d: Duration) -> i64 {
    i64::try_from(d.as_millis().saturating_add(500) / 1000).unwrap_or(i64::MAX)
}

/// A `NillableDuration` in seconds (`None` for Never); errors name `field`.
pub fn nillable_secs(d: &api::NillableDuration, field: String) -> Result<Option<i64>> {
    d.parse()
        .map(|d| d.map(whole_secs))
        .map_err(|e| ConvertError::new(field, e.to_string()))
}

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
                ConvertError::new(
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
pub fn nodepool(np: &api::NodePool, field: &str) -> Result<core::NodePool> {
    let spec = &np.spec;
    let tspec = &spec.template.spec;
    let name = np.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(ConvertError::new(
            format!("{field}.metadata.name"),
            "a NodePool needs a name",
        ));
    }
    if spec.replicas.is_some() {
        return Err(ConvertError::new(
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
                    return Err(ConvertError::new(
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
        return Err(ConvertError::new(
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
                .map_err(|e| ConvertError::new(format!("{field}.duration"), e.to_string()))?,
        ),
        None => None,
    };
    if b.schedule.is_some() != duration_secs.is_some() {
        return Err(ConvertError::new(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_nodepool(y: &str) -> Result<api::NodePool> {
        serde_saphyr::from_str(y).map_err(|e| ConvertError::new("yaml", e.to_string()))
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
        for entry in std::fs::read_dir(&dir)
            .map_err(|e| ConvertError::new(dir.display().to_string(), e.to_string()))?
        {
            let path = entry
                .map_err(|e| ConvertError::new(dir.display().to_string(), e.to_string()))?
                .path();
            let text = std::fs::read_to_string(&path)
                .map_err(|e| ConvertError::new(path.display().to_string(), e.to_string()))?;
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
