//! PodDisruptionBudgets in the simulated cluster: which pods each selects and how many of them
//! may be disrupted at an instant, as Kubernetes' disruption controller computes
//! `status.disruptionsAllowed` and the Eviction API enforces it.
//!
//! Why the simulator needs them: almost every production Deployment has one, and they shape
//! consolidation twice. A node whose pods' budgets allow nothing right now is not a
//! candidate (both Karpenter and the core read `disruptionsAllowed`), and a drain that a
//! budget holds back keeps its node, and its price, until the evicted pods run again
//! elsewhere. Without them every drain was instant and free.

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use provisioner_core as core;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A budget on one pod group (`workload.pods[].disruptionBudget`, or for every group
/// `workload.disruptionBudget`): a PDB selecting exactly that group's pods. Set one of the
/// two, as in a PDB's spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupBudget {
    /// At least this many (or this percentage, `"50%"`) of the group's pods stay healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrString>,
    /// At most this many (or this percentage, rounded up) may be unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

/// The label that ties a group's pods to the PDB made from its [`GroupBudget`]: group names
/// are unique, while a group's own labels may be shared with other groups (the benchmark's
/// `app` is its kind), and one pod under two PDBs can never be evicted.
pub const GROUP_LABEL: &str = "simulator.karpenter-capi/group";

/// A number or a percentage of the pods a budget counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    Count(i64),
    Percent(i64),
}

impl Amount {
    fn parse(v: &IntOrString) -> Result<Amount, String> {
        match v {
            IntOrString::Int(n) if *n >= 0 => Ok(Amount::Count(i64::from(*n))),
            IntOrString::Int(n) => Err(format!("{n} is negative")),
            IntOrString::String(s) => {
                let bad = || format!("`{s}` is neither a whole number nor a percentage like `25%`");
                match s.strip_suffix('%') {
                    Some(p) => p
                        .parse::<i64>()
                        .ok()
                        .filter(|p| (0..=100).contains(p))
                        .map(Amount::Percent)
                        .ok_or_else(bad),
                    None => s
                        .parse::<i64>()
                        .ok()
                        .filter(|n| *n >= 0)
                        .map(Amount::Count)
                        .ok_or_else(bad),
                }
            }
        }
    }

    /// Scaled against `expected` pods, rounded up (Kubernetes rounds both fields up).
    fn of(self, expected: i64) -> i64 {
        match self {
            Amount::Count(n) => n,
            Amount::Percent(p) => (p * expected + 99) / 100,
        }
    }
}

/// What a budget asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    MinAvailable(Amount),
    MaxUnavailable(Amount),
}

impl Rule {
    fn of(min: Option<&IntOrString>, max: Option<&IntOrString>) -> Result<Rule, String> {
        match (min, max) {
            (Some(m), None) => Ok(Rule::MinAvailable(
                Amount::parse(m).map_err(|e| format!("minAvailable: {e}"))?,
            )),
            (None, Some(m)) => Ok(Rule::MaxUnavailable(
                Amount::parse(m).map_err(|e| format!("maxUnavailable: {e}"))?,
            )),
            _ => Err("set exactly one of minAvailable and maxUnavailable".into()),
        }
    }

    /// Pods that must stay healthy when `expected` pods should be running. As the
    /// disruption controller: a count for `minAvailable` is taken as it is; a percentage, and
    /// `maxUnavailable`, are scaled against the owners' replicas (here the pods present).
    fn desired_healthy(self, expected: i64) -> i64 {
        match self {
            Rule::MinAvailable(a) => a.of(expected),
            Rule::MaxUnavailable(a) => (expected - a.of(expected)).max(0),
        }
    }
}

/// One PDB of the simulated cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct SimPdb {
    pub namespace: String,
    pub name: String,
    /// `None`: a PDB without a selector selects no pod (policy/v1).
    pub selector: Option<core::LabelSelector>,
    pub rule: Rule,
}

/// How many of a budget's pods are present and healthy at an instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Census {
    /// Pods present (pending or running): the replicas their owners want.
    pub expected: i64,
    /// Pods running for at least the readiness delay.
    pub healthy: i64,
}

impl SimPdb {
    /// From a pasted `policy/v1` PodDisruptionBudget; its status is computed, not read.
    pub fn from_k8s(pdb: &PodDisruptionBudget) -> Result<SimPdb, String> {
        let spec = pdb.spec.as_ref().ok_or("no spec")?;
        let selector = match &spec.selector {
            Some(s) => Some(selector(s)?),
            None => None,
        };
        Ok(SimPdb {
            namespace: pdb
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            name: pdb.metadata.name.clone().ok_or("no metadata.name")?,
            selector,
            rule: Rule::of(spec.min_available.as_ref(), spec.max_unavailable.as_ref())?,
        })
    }

    /// The PDB of pod group `group` in `namespace` (its pods carry [`GROUP_LABEL`]).
    pub fn for_group(group: &str, namespace: &str, b: &GroupBudget) -> Result<SimPdb, String> {
        Ok(SimPdb {
            namespace: namespace.into(),
            name: format!("{group}-pdb"),
            selector: Some(core::LabelSelector {
                match_labels: [(GROUP_LABEL.to_string(), group.to_string())]
                    .into_iter()
                    .collect(),
                match_expressions: Vec::new(),
            }),
            rule: Rule::of(b.min_available.as_ref(), b.max_unavailable.as_ref())?,
        })
    }

    pub fn selects(&self, pod: &core::Pod) -> bool {
        pod.namespace == self.namespace
            && self
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(&pod.labels))
    }

    /// How many pods at least must stay healthy now.
    pub fn desired_healthy(&self, c: Census) -> i64 {
        self.rule.desired_healthy(c.expected)
    }

    /// `status.disruptionsAllowed`.
    pub fn disruptions_allowed(&self, c: Census) -> i64 {
        (c.healthy - self.desired_healthy(c)).max(0)
    }

    /// The core's view, with the status at `c`.
    pub fn to_core(&self, c: Census) -> core::PodDisruptionBudget {
        core::PodDisruptionBudget {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            // A selector that selects nothing: no label has an empty key.
            selector: self
                .selector
                .clone()
                .unwrap_or_else(|| core::LabelSelector {
                    match_labels: Default::default(),
                    match_expressions: vec![core::SelectorRequirement {
                        key: String::new(),
                        operator: core::SelectorOperator::Exists,
                        values: Vec::new(),
                    }],
                }),
            disruptions_allowed: i32::try_from(self.disruptions_allowed(c)).unwrap_or(i32::MAX),
        }
    }
}

/// A `metav1` selector, refusing operators the API server would refuse (the shared
/// conversion drops them, which would widen the selector).
fn selector(
    s: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
) -> Result<core::LabelSelector, String> {
    for e in s.match_expressions.iter().flatten() {
        if !matches!(
            e.operator.as_str(),
            "In" | "NotIn" | "Exists" | "DoesNotExist"
        ) {
            return Err(format!(
                "selector operator `{}` is not one of In, NotIn, Exists, DoesNotExist",
                e.operator
            ));
        }
    }
    Ok(kcapi_snapshot::constraints::label_selector(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn census(expected: i64, healthy: i64) -> Census {
        Census { expected, healthy }
    }

    fn rule(min: Option<IntOrString>, max: Option<IntOrString>) -> SimPdb {
        SimPdb::for_group(
            "web",
            "default",
            &GroupBudget {
                min_available: min,
                max_unavailable: max,
            },
        )
        .expect("valid")
    }

    #[test]
    fn disruptions_allowed_follow_the_disruption_controller() {
        let max1 = rule(None, Some(IntOrString::Int(1)));
        assert_eq!(max1.disruptions_allowed(census(3, 3)), 1);
        assert_eq!(
            max1.disruptions_allowed(census(3, 2)),
            0,
            "one already unavailable"
        );
        let min2 = rule(Some(IntOrString::Int(2)), None);
        assert_eq!(min2.disruptions_allowed(census(5, 5)), 3);
        assert_eq!(min2.disruptions_allowed(census(2, 2)), 0);
        // Percentages round up, so 25% of 3 replicas allows one unavailable, and a 50%
        // minimum of 3 keeps two.
        let max25 = rule(None, Some(IntOrString::String("25%".into())));
        assert_eq!(max25.disruptions_allowed(census(3, 3)), 1);
        let min50 = rule(Some(IntOrString::String("50%".into())), None);
        assert_eq!(min50.disruptions_allowed(census(3, 3)), 1);
        assert_eq!(min50.disruptions_allowed(census(4, 4)), 2);
        // A minimum as large as the group never allows anything.
        assert_eq!(
            rule(Some(IntOrString::String("100%".into())), None).disruptions_allowed(census(4, 4)),
            0
        );
    }

    #[test]
    fn bad_budgets_are_refused() {
        let b = |min: Option<IntOrString>, max: Option<IntOrString>| {
            SimPdb::for_group(
                "g",
                "default",
                &GroupBudget {
                    min_available: min,
                    max_unavailable: max,
                },
            )
        };
        assert!(b(None, None).is_err());
        assert!(b(Some(IntOrString::Int(1)), Some(IntOrString::Int(1))).is_err());
        assert!(b(None, Some(IntOrString::String("150%".into()))).is_err());
        assert!(b(None, Some(IntOrString::String("one".into()))).is_err());
        assert!(b(None, Some(IntOrString::Int(-1))).is_err());
        assert!(b(None, Some(IntOrString::String("2".into()))).is_ok());
    }

    #[test]
    fn a_pdb_selects_its_namespace_only_and_a_missing_selector_nothing() {
        let yaml = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: shop}\nspec:\n  maxUnavailable: 1\n  selector: {matchLabels: {app: web}}\n";
        let k: PodDisruptionBudget = serde_saphyr::from_str(yaml).expect("valid");
        let pdb = SimPdb::from_k8s(&k).expect("valid");
        let pod = |ns: &str, app: &str| core::Pod {
            namespace: ns.into(),
            labels: [("app".to_string(), app.to_string())].into_iter().collect(),
            ..Default::default()
        };
        assert!(pdb.selects(&pod("shop", "web")));
        assert!(!pdb.selects(&pod("default", "web")));
        assert!(!pdb.selects(&pod("shop", "db")));
        let none = SimPdb {
            selector: None,
            ..pdb.clone()
        };
        assert!(!none.selects(&pod("shop", "web")));
        // The core sees a selector that matches no pod either.
        let core_view = none.to_core(census(0, 0));
        assert!(!core_view.selector.matches(&pod("shop", "web").labels));
        let bad = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: x}\nspec:\n  maxUnavailable: 1\n  selector: {matchExpressions: [{key: app, operator: Like, values: [web]}]}\n";
        let k: PodDisruptionBudget = serde_saphyr::from_str(bad).expect("valid");
        assert!(SimPdb::from_k8s(&k).expect_err("refused").contains("Like"));
    }
}
