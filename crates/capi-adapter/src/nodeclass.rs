//! The NodeClass settings the adapter needs, member selection and node overhead.
//!
//! The adapter takes plain settings rather than the `ClusterAPINodeClass` CRD type so it
//! stays independent of the API crate's evolution; the controller converts.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use provisioner_core::Resources;
use serde::{Deserialize, Serialize};

use crate::keys;
use crate::problem::ProblemError;
use crate::resource::{ResourceKind, ScalableResource};

/// Who replaces drifted nodes (upstream issue #61 asks to leave it to CAPI).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DriftPolicy {
    /// We report drifted Machines so Karpenter's disruption replaces them.
    #[default]
    Karpenter,
    /// CAPI's own rollouts replace Machines; we never report drift.
    CAPIRollout,
}

/// Node overhead: allocatable = capacity - kube-reserved - system-reserved - eviction.
///
/// Each part left `None` takes its default: kube-reserved from Karpenter's formula
/// ([`karpenter_kube_reserved`]), system-reserved zero, eviction threshold 100Mi of memory
/// and 10% of ephemeral storage (kubelet's hard-eviction defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overhead {
    pub kube_reserved: Option<Resources>,
    pub system_reserved: Option<Resources>,
    pub eviction_threshold: Option<Resources>,
}

const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

/// Karpenter's kube-reserved defaults: CPU 6% of the first core, 1% of the second, 0.5% of
/// the third and fourth, 0.25% of every core above four; memory 11 MiB per pod slot plus
/// 255 MiB; ephemeral storage 1 GiB.
pub fn karpenter_kube_reserved(cpu_milli: i64, max_pods: i64) -> Resources {
    let tiers: [(i64, i64, i64); 4] = [
        // (from millicores, to millicores, per-mille of that range reserved x 100)
        (0, 1000, 600),
        (1000, 2000, 100),
        (2000, 4000, 50),
        (4000, i64::MAX, 25),
    ];
    let mut reserved_x10000 = 0i128;
    for (lo, hi, pct_x100) in tiers {
        let amount = cpu_milli.clamp(lo, hi) - lo;
        reserved_x10000 += i128::from(amount) * i128::from(pct_x100);
    }
    // ceil(reserved_x10000 / 10000) millicores
    let cpu = i64::try_from((reserved_x10000 + 9999) / 10000).unwrap_or(i64::MAX);
    Resources {
        cpu_milli: cpu,
        memory: max_pods.saturating_mul(11 * MIB).saturating_add(255 * MIB),
        ephemeral_storage: GIB,
        ..Resources::default()
    }
}

impl Overhead {
    /// The total overhead for a node with this capacity.
    pub fn for_capacity(&self, capacity: &Resources) -> Resources {
        let kube = self
            .kube_reserved
            .clone()
            .unwrap_or_else(|| karpenter_kube_reserved(capacity.cpu_milli, capacity.pods));
        let system = self.system_reserved.clone().unwrap_or_default();
        let eviction = self
            .eviction_threshold
            .clone()
            .unwrap_or_else(|| Resources {
                memory: 100 * MIB,
                ephemeral_storage: capacity.ephemeral_storage / 10,
                ..Resources::default()
            });
        let mut total = Resources::default();
        for r in [&kube, &system, &eviction] {
            total.cpu_milli = total.cpu_milli.saturating_add(r.cpu_milli);
            total.memory = total.memory.saturating_add(r.memory);
            total.pods = total.pods.saturating_add(r.pods);
            total.ephemeral_storage = total.ephemeral_storage.saturating_add(r.ephemeral_storage);
            for (k, v) in &r.extended {
                let e = total.extended.entry(k.clone()).or_insert(0);
                *e = e.saturating_add(*v);
            }
        }
        total
    }
}

/// What the adapter reads from a `ClusterAPINodeClass`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeClassSettings {
    pub name: String,
    /// `spec.scalableResourceSelector`; `None` or empty matches every member.
    pub selector: Option<LabelSelector>,
    /// `spec.scalableResourceKinds`; `None` = all kinds.
    pub kinds: Option<Vec<ResourceKind>>,
    pub drift_policy: DriftPolicy,
    pub overhead: Overhead,
}

impl NodeClassSettings {
    /// Whether the resource takes part: it carries upstream's member label
    /// `node.cluster.x-k8s.io/karpenter-member`, its kind is allowed and the selector matches
    /// its labels. Any namespace.
    pub fn selects(&self, r: &ScalableResource) -> Result<bool, ProblemError> {
        if !r.labels.contains_key(keys::capi::KARPENTER_MEMBER) {
            return Ok(false);
        }
        if let Some(kinds) = &self.kinds
            && !kinds.contains(&r.id.kind)
        {
            return Ok(false);
        }
        match &self.selector {
            None => Ok(true),
            Some(sel) => selector_matches(sel, &r.labels),
        }
    }
}

/// metav1.LabelSelector semantics: matchLabels and matchExpressions ANDed, empty matches all.
pub fn selector_matches(
    sel: &LabelSelector,
    labels: &BTreeMap<String, String>,
) -> Result<bool, ProblemError> {
    for (k, v) in sel.match_labels.iter().flatten() {
        if labels.get(k) != Some(v) {
            return Ok(false);
        }
    }
    for expr in sel.match_expressions.iter().flatten() {
        let values = expr.values.as_deref().unwrap_or_default();
        let value = labels.get(&expr.key);
        let ok = match expr.operator.as_str() {
            "In" => {
                if values.is_empty() {
                    return Err(ProblemError::InvalidSelector(format!(
                        "{}: operator In needs values",
                        expr.key
                    )));
                }
                value.is_some_and(|v| values.contains(v))
            }
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            other => {
                return Err(ProblemError::InvalidSelector(format!(
                    "{}: unknown operator {other:?}",
                    expr.key
                )));
            }
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn kube_reserved_formula() {
        // 2 vCPU / 110 pods: 60m + 10m = 70m; 11*110+255 = 1465 MiB.
        let r = karpenter_kube_reserved(2000, 110);
        assert_eq!(r.cpu_milli, 70);
        assert_eq!(r.memory, 1465 * MIB);
        // 8 vCPU: 60 + 10 + 10 + 10 = 90m.
        assert_eq!(karpenter_kube_reserved(8000, 110).cpu_milli, 90);
        // 96 vCPU: 60 + 10 + 10 + 0.25% of 92000 = 230 -> 310m.
        assert_eq!(karpenter_kube_reserved(96_000, 110).cpu_milli, 310);
        // 500m: 6% = 30m.
        assert_eq!(karpenter_kube_reserved(500, 110).cpu_milli, 30);
    }

    #[test]
    fn overhead_defaults_and_overrides() {
        let cap = Resources {
            cpu_milli: 4000,
            memory: 16 * GIB,
            pods: 110,
            ephemeral_storage: 100 * GIB,
            ..Default::default()
        };
        let o = Overhead::default().for_capacity(&cap);
        assert_eq!(o.cpu_milli, 80);
        assert_eq!(o.memory, 1465 * MIB + 100 * MIB);
        assert_eq!(o.ephemeral_storage, GIB + 10 * GIB);
        let fixed = Overhead {
            kube_reserved: Some(Resources {
                cpu_milli: 100,
                ..Default::default()
            }),
            system_reserved: Some(Resources {
                memory: MIB,
                ..Default::default()
            }),
            eviction_threshold: Some(Resources::default()),
        };
        let o = fixed.for_capacity(&cap);
        assert_eq!((o.cpu_milli, o.memory, o.ephemeral_storage), (100, MIB, 0));
    }

    #[test]
    fn selectors() {
        let labels: BTreeMap<String, String> = [("pool".to_string(), "gpu".to_string())].into();
        let mut sel = LabelSelector {
            match_labels: Some([("pool".to_string(), "gpu".to_string())].into()),
            ..Default::default()
        };
        assert_eq!(selector_matches(&sel, &labels), Ok(true));
        sel.match_expressions = Some(vec![LabelSelectorRequirement {
            key: "tier".into(),
            operator: "DoesNotExist".into(),
            values: None,
        }]);
        assert_eq!(selector_matches(&sel, &labels), Ok(true));
        sel.match_expressions = Some(vec![LabelSelectorRequirement {
            key: "tier".into(),
            operator: "Maybe".into(),
            values: None,
        }]);
        assert!(selector_matches(&sel, &labels).is_err());
        assert_eq!(
            selector_matches(&LabelSelector::default(), &labels),
            Ok(true)
        );
    }
}
