//! Node requirements: matching concrete labels, and the requirements algebra.
//!
//! Two views of the same wire type ([`Requirement`]):
//! - [`Requirement::matches`] evaluates a requirement against a node's concrete labels with the
//!   kube-scheduler's node-selector semantics. Existing nodes and the concrete launch shapes
//!   (NodePool x instance type x offering) of the simulation are checked this way.
//! - [`Requirements`] is Karpenter's algebra: a requirement per key as a set of allowed values
//!   (possibly a complement, possibly bounded by `Gt`/`Lt`), with intersection and a
//!   compatibility test in which a well-known label may be undefined on one side (an instance
//!   type need not name its NodePool). A new NodeClaim's requirements are built with it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::{NodeSelectorTerm, Operator, Requirement, labels};

impl Requirement {
    /// `key In [values]` (helper).
    pub fn new_in(key: &str, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator: Operator::In,
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }

    /// Any operator (helper).
    pub fn new(key: &str, operator: Operator, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator,
            values: values.iter().map(|v| v.to_string()).collect(),
            min_values: None,
        }
    }

    /// Whether a node with these labels satisfies the requirement (kube-scheduler semantics:
    /// `NotIn` and `DoesNotExist` hold when the label is absent; `Gt`/`Lt` need an integer
    /// label and an integer bound, otherwise they do not hold).
    pub fn matches(&self, node_labels: &BTreeMap<String, String>) -> bool {
        self.matches_value(node_labels.get(&self.key).map(String::as_str))
    }

    /// [`Requirement::matches`] on one label value (`None` = label absent).
    pub fn matches_value(&self, value: Option<&str>) -> bool {
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => {
                let (Some(v), Some(bound)) =
                    (value.and_then(|v| v.parse::<i64>().ok()), self.bound())
                else {
                    return false;
                };
                match self.operator {
                    Operator::Gt => v > bound,
                    Operator::Lt => v < bound,
                    Operator::Gte => v >= bound,
                    _ => v <= bound,
                }
            }
        }
    }

    fn bound(&self) -> Option<i64> {
        if self.values.len() != 1 {
            return None;
        }
        self.values.first().and_then(|v| v.parse::<i64>().ok())
    }
}

/// Whether labels satisfy every requirement of a term (ANDed).
pub fn term_matches(term: &NodeSelectorTerm, node_labels: &BTreeMap<String, String>) -> bool {
    term.iter().all(|r| r.matches(node_labels))
}

/// Whether labels satisfy any of ORed terms; no terms means no constraint.
pub fn terms_match(terms: &[NodeSelectorTerm], node_labels: &BTreeMap<String, String>) -> bool {
    terms.is_empty() || terms.iter().any(|t| term_matches(t, node_labels))
}

/// Labels that a launch may leave undefined on one side of a compatibility check: an
/// instance type does not carry its NodePool's name, a NodePool need not list zones.
pub fn is_well_known(key: &str) -> bool {
    matches!(
        key,
        labels::NODEPOOL
            | labels::CAPACITY_TYPE
            | labels::INSTANCE_TYPE
            | labels::ZONE
            | labels::REGION
            | labels::ARCH
            | labels::OS
            | labels::HOSTNAME
    )
}

/// The allowed values of one key. `complement = false`: exactly `values` (empty = the label
/// must not exist); `complement = true`: anything but `values` (empty = any value, the label
/// must exist). `gt`/`lt` bound integer values from below/above (exclusive).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ValueSet {
    pub complement: bool,
    pub values: BTreeSet<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gt: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lt: Option<i64>,
    /// Karpenter `minValues` carried by the requirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<u32>,
}

impl ValueSet {
    /// Exactly these values.
    pub fn of<I: IntoIterator<Item = S>, S: Into<String>>(values: I) -> ValueSet {
        ValueSet {
            complement: false,
            values: values.into_iter().map(Into::into).collect(),
            gt: None,
            lt: None,
            min_values: None,
        }
    }

    /// Any value (the label exists).
    pub fn any() -> ValueSet {
        ValueSet {
            complement: true,
            values: BTreeSet::new(),
            gt: None,
            lt: None,
            min_values: None,
        }
    }

    /// From a wire requirement.
    pub fn from_requirement(r: &Requirement) -> ValueSet {
        let vals = || r.values.iter().cloned().collect::<BTreeSet<_>>();
        let bound = r.bound();
        let mut set = match r.operator {
            Operator::In => ValueSet {
                complement: false,
                values: vals(),
                ..ValueSet::any()
            },
            Operator::NotIn => ValueSet {
                complement: true,
                values: vals(),
                ..ValueSet::any()
            },
            Operator::Exists => ValueSet::any(),
            Operator::DoesNotExist => ValueSet::of(Vec::<String>::new()),
            // An unparsable bound allows nothing, as in the kube-scheduler.
            Operator::Gt => bound.map_or_else(
                || ValueSet::of(Vec::<String>::new()),
                |b| ValueSet {
                    gt: Some(b),
                    ..ValueSet::any()
                },
            ),
            Operator::Gte => bound.map_or_else(
                || ValueSet::of(Vec::<String>::new()),
                |b| ValueSet {
                    gt: Some(b.saturating_sub(1)),
                    ..ValueSet::any()
                },
            ),
            Operator::Lt => bound.map_or_else(
                || ValueSet::of(Vec::<String>::new()),
                |b| ValueSet {
                    lt: Some(b),
                    ..ValueSet::any()
                },
            ),
            Operator::Lte => bound.map_or_else(
                || ValueSet::of(Vec::<String>::new()),
                |b| ValueSet {
                    lt: Some(b.saturating_add(1)),
                    ..ValueSet::any()
                },
            ),
        };
        set.min_values = r.min_values;
        set
    }

    fn within_bounds(&self, v: &str) -> bool {
        if self.gt.is_none() && self.lt.is_none() {
            return true;
        }
        let Ok(n) = v.parse::<i64>() else {
            return false;
        };
        self.gt.is_none_or(|g| n > g) && self.lt.is_none_or(|l| n < l)
    }

    /// Whether a concrete value is allowed.
    pub fn has(&self, v: &str) -> bool {
        let listed = self.values.contains(v);
        (if self.complement { !listed } else { listed }) && self.within_bounds(v)
    }

    /// Whether an absent label satisfies the set (`NotIn` / `DoesNotExist` semantics).
    pub fn allows_absent(&self) -> bool {
        if self.complement {
            !self.values.is_empty() && self.gt.is_none() && self.lt.is_none()
        } else {
            self.values.is_empty()
        }
    }

    /// Whether no value at all is allowed (`DoesNotExist`, or an empty intersection).
    pub fn is_empty(&self) -> bool {
        if self.complement {
            matches!((self.gt, self.lt), (Some(g), Some(l)) if l.saturating_sub(g) <= 1)
        } else {
            self.values.is_empty()
        }
    }

    /// The values allowed by both sets.
    pub fn intersect(&self, other: &ValueSet) -> ValueSet {
        let gt = match (self.gt, other.gt) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let lt = match (self.lt, other.lt) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let min_values = match (self.min_values, other.min_values) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let mut out = match (self.complement, other.complement) {
            (true, true) => ValueSet {
                complement: true,
                values: self.values.union(&other.values).cloned().collect(),
                gt,
                lt,
                min_values,
            },
            (true, false) => ValueSet {
                complement: false,
                values: other.values.difference(&self.values).cloned().collect(),
                gt,
                lt,
                min_values,
            },
            (false, true) => ValueSet {
                complement: false,
                values: self.values.difference(&other.values).cloned().collect(),
                gt,
                lt,
                min_values,
            },
            (false, false) => ValueSet {
                complement: false,
                values: self.values.intersection(&other.values).cloned().collect(),
                gt,
                lt,
                min_values,
            },
        };
        if !out.complement {
            let bounded = out.clone();
            out.values.retain(|v| bounded.within_bounds(v));
        }
        out
    }

    /// Back to wire requirements (one or two, for a bounded complement).
    pub fn to_requirements(&self, key: &str) -> Vec<Requirement> {
        let mk = |operator, values: Vec<String>| Requirement {
            key: key.to_string(),
            operator,
            values,
            min_values: self.min_values,
        };
        let mut out = Vec::new();
        if !self.complement {
            out.push(if self.values.is_empty() {
                mk(Operator::DoesNotExist, vec![])
            } else {
                mk(Operator::In, self.values.iter().cloned().collect())
            });
            return out;
        }
        if let Some(g) = self.gt {
            out.push(mk(Operator::Gt, vec![g.to_string()]));
        }
        if let Some(l) = self.lt {
            out.push(mk(Operator::Lt, vec![l.to_string()]));
        }
        if !self.values.is_empty() {
            out.push(mk(Operator::NotIn, self.values.iter().cloned().collect()));
        } else if out.is_empty() {
            out.push(mk(Operator::Exists, vec![]));
        }
        out
    }
}

/// Karpenter's requirements: an allowed-value set per label key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Requirements(pub BTreeMap<String, ValueSet>);

/// Why two requirement sets cannot both hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Incompatible {
    #[error("label {key}: no value satisfies both {left} and {right}")]
    NoCommonValue {
        key: String,
        left: String,
        right: String,
    },
    #[error("label {key} is required but has no known values")]
    Undefined { key: String },
}

impl Requirements {
    /// From wire requirements (ANDed; repeated keys intersect).
    pub fn from_wire<'a>(reqs: impl IntoIterator<Item = &'a Requirement>) -> Requirements {
        let mut out = Requirements::default();
        for r in reqs {
            out.add(&r.key, ValueSet::from_requirement(r));
        }
        out
    }

    /// Every label as `key In [value]`.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Requirements {
        Requirements(
            labels
                .iter()
                .map(|(k, v)| (k.clone(), ValueSet::of([v.clone()])))
                .collect(),
        )
    }

    /// Intersects one key's set into these requirements.
    pub fn add(&mut self, key: &str, set: ValueSet) {
        match self.0.get_mut(key) {
            Some(existing) => *existing = existing.intersect(&set),
            None => {
                self.0.insert(key.to_string(), set);
            }
        }
    }

    /// The intersection of two requirement sets.
    pub fn intersect(&self, other: &Requirements) -> Requirements {
        let mut out = self.clone();
        for (k, v) in &other.0 {
            out.add(k, v.clone());
        }
        out
    }

    /// The allowed set of a key, if constrained.
    pub fn get(&self, key: &str) -> Option<&ValueSet> {
        self.0.get(key)
    }

    /// Karpenter's compatibility: every key `incoming` constrains must either be constrained
    /// here with a non-empty intersection, or be allowed to be undefined here (`NotIn` /
    /// `DoesNotExist`, or a well-known label when `allow_undefined_well_known`).
    pub fn compatible(
        &self,
        incoming: &Requirements,
        allow_undefined_well_known: bool,
    ) -> Result<(), Incompatible> {
        for (key, want) in &incoming.0 {
            match self.0.get(key) {
                Some(have) => {
                    let both_absent = have.allows_absent() && want.allows_absent();
                    if have.intersect(want).is_empty() && !both_absent {
                        return Err(Incompatible::NoCommonValue {
                            key: key.clone(),
                            left: describe(have),
                            right: describe(want),
                        });
                    }
                }
                None => {
                    if !(want.allows_absent() || (allow_undefined_well_known && is_well_known(key)))
                    {
                        return Err(Incompatible::Undefined { key: key.clone() });
                    }
                }
            }
        }
        Ok(())
    }

    /// Labels these requirements pin (keys with exactly one allowed value).
    pub fn single_values(&self) -> BTreeMap<String, String> {
        self.0
            .iter()
            .filter(|(_, s)| !s.complement && s.values.len() == 1)
            .filter_map(|(k, s)| s.values.first().map(|v| (k.clone(), v.clone())))
            .collect()
    }

    /// Back to wire requirements, sorted by key.
    pub fn to_wire(&self) -> Vec<Requirement> {
        self.0
            .iter()
            .flat_map(|(k, s)| s.to_requirements(k))
            .collect()
    }
}

fn describe(s: &ValueSet) -> String {
    s.to_requirements("")
        .iter()
        .map(|r| {
            if r.values.is_empty() {
                format!("{:?}", r.operator)
            } else {
                format!("{:?} {:?}", r.operator, r.values)
            }
        })
        .collect::<Vec<_>>()
        .join(" and ")
}

impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(k, s)| format!("{k} {}", describe(s)))
            .collect();
        write!(f, "{}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_matching_follows_node_selector_semantics() {
        let node = l(&[("zone", "a"), ("gen", "5")]);
        assert!(Requirement::new_in("zone", &["a", "b"]).matches(&node));
        assert!(!Requirement::new_in("zone", &["b"]).matches(&node));
        assert!(Requirement::new("zone", Operator::NotIn, &["b"]).matches(&node));
        assert!(Requirement::new("missing", Operator::NotIn, &["b"]).matches(&node));
        assert!(Requirement::new("missing", Operator::DoesNotExist, &[]).matches(&node));
        assert!(!Requirement::new("missing", Operator::Exists, &[]).matches(&node));
        assert!(Requirement::new("gen", Operator::Gt, &["4"]).matches(&node));
        assert!(!Requirement::new("gen", Operator::Gt, &["5"]).matches(&node));
        assert!(Requirement::new("gen", Operator::Gte, &["5"]).matches(&node));
        assert!(Requirement::new("gen", Operator::Lte, &["5"]).matches(&node));
        assert!(!Requirement::new("gen", Operator::Lt, &["5"]).matches(&node));
        assert!(
            !Requirement::new("zone", Operator::Gt, &["1"]).matches(&node),
            "non-integer label"
        );
        assert!(
            !Requirement::new("gen", Operator::Gt, &["x"]).matches(&node),
            "non-integer bound"
        );
        assert!(!Requirement::new("missing", Operator::Lt, &["9"]).matches(&node));
    }

    #[test]
    fn or_terms() {
        let node = l(&[("zone", "b")]);
        let terms = vec![
            vec![Requirement::new_in("zone", &["a"])],
            vec![Requirement::new_in("zone", &["b"])],
        ];
        assert!(terms_match(&terms, &node));
        assert!(terms_match(&[], &node));
    }

    #[test]
    fn intersection() {
        let a = ValueSet::from_requirement(&Requirement::new_in("k", &["1", "2", "3"]));
        let b = ValueSet::from_requirement(&Requirement::new("k", Operator::NotIn, &["2"]));
        let c = ValueSet::from_requirement(&Requirement::new("k", Operator::Gt, &["1"]));
        let i = a.intersect(&b).intersect(&c);
        assert_eq!(
            i.values.iter().cloned().collect::<Vec<_>>(),
            vec!["3".to_string()]
        );
        let exists = ValueSet::any();
        assert_eq!(
            exists.intersect(&b),
            ValueSet {
                complement: true,
                values: ["2".to_string()].into(),
                gt: None,
                lt: None,
                min_values: None
            }
        );
        let bounded =
            ValueSet::from_requirement(&Requirement::new("k", Operator::Gt, &["5"])).intersect(
                &ValueSet::from_requirement(&Requirement::new("k", Operator::Lt, &["6"])),
            );
        assert!(bounded.is_empty());
        let open =
            ValueSet::from_requirement(&Requirement::new("k", Operator::Gte, &["5"])).intersect(
                &ValueSet::from_requirement(&Requirement::new("k", Operator::Lte, &["5"])),
            );
        assert!(!open.is_empty());
        assert!(open.has("5"));
    }

    #[test]
    fn compatibility_allows_undefined_well_known_labels() {
        let pool = Requirements::from_wire(&[Requirement::new_in("team", &["a"])]);
        let pod = Requirements::from_wire(&[Requirement::new_in(labels::ZONE, &["z1"])]);
        assert!(pool.compatible(&pod, true).is_ok());
        assert!(pool.compatible(&pod, false).is_err());
        let custom = Requirements::from_wire(&[Requirement::new_in("gpu", &["yes"])]);
        assert_eq!(
            pool.compatible(&custom, true),
            Err(Incompatible::Undefined { key: "gpu".into() })
        );
        let not_in = Requirements::from_wire(&[Requirement::new("gpu", Operator::NotIn, &["yes"])]);
        assert!(pool.compatible(&not_in, false).is_ok());
        let other_team = Requirements::from_wire(&[Requirement::new_in("team", &["b"])]);
        assert!(matches!(
            pool.compatible(&other_team, true),
            Err(Incompatible::NoCommonValue { .. })
        ));
        let absent = Requirements::from_wire(&[Requirement::new("x", Operator::DoesNotExist, &[])]);
        assert!(absent.compatible(&absent, false).is_ok());
    }

    #[test]
    fn round_trip_to_wire() {
        let r = Requirements::from_wire(&[
            Requirement::new_in("zone", &["a"]),
            Requirement::new("gen", Operator::Gt, &["3"]),
        ]);
        let back = Requirements::from_wire(&r.to_wire());
        assert_eq!(r, back);
        assert_eq!(r.single_values().get("zone").map(String::as_str), Some("a"));
    }
}
