//! `karpenter.sh/do-not-disrupt` on nodes and pods, and PodDisruptionBudgets.
//!
//! Both protections are absolute for voluntary disruption: a node that carries the annotation,
//! or runs a pod that carries it, or runs a pod whose PDB allows no disruption right now, is
//! never a candidate. The annotation is `"true"` (forever) or a Go duration (Karpenter #2874:
//! protected for that long after the pod started; for a node, after it was created).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::duration::parse_go_duration;
use crate::model::{Pod, PodDisruptionBudget};

/// The annotation key.
pub const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";

/// What a `karpenter.sh/do-not-disrupt` annotation means at a given time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Protection {
    /// No annotation, `"false"`, or a duration that has elapsed.
    None,
    /// `"true"`.
    Forever,
    /// A duration that has not elapsed yet: protected until this time (seconds since epoch).
    Until(i64),
    /// A value that is neither `"true"`/`"false"` nor a duration. We protect rather than
    /// ignore it: the user plainly meant to protect something, and disrupting a workload by
    /// mistake cannot be undone, while a blocked node is reported and easy to fix.
    Malformed(String),
}

impl Protection {
    /// Reads the annotation; `since` is when the protected object started.
    pub fn of(annotations: &BTreeMap<String, String>, since: i64, now: i64) -> Protection {
        let Some(v) = annotations.get(DO_NOT_DISRUPT) else {
            return Protection::None;
        };
        let v = v.trim();
        if v.eq_ignore_ascii_case("true") {
            return Protection::Forever;
        }
        if v.eq_ignore_ascii_case("false") || v.is_empty() {
            return Protection::None;
        }
        match parse_go_duration(v) {
            Ok(secs) if secs >= 0.0 => {
                // Round up: a sub-second remainder still protects until the next whole second.
                let until = since.saturating_add(secs.ceil() as i64);
                if now < until {
                    Protection::Until(until)
                } else {
                    Protection::None
                }
            }
            Ok(_) => Protection::Malformed(v.to_string()),
            Err(_) => Protection::Malformed(v.to_string()),
        }
    }

    /// Whether it blocks disruption now.
    pub fn blocks(&self) -> bool {
        !matches!(self, Protection::None)
    }
}

/// PDBs grouped by namespace, so matching a pod is a short scan.
#[derive(Debug, Default)]
pub struct PdbIndex<'a> {
    by_ns: BTreeMap<&'a str, Vec<(usize, &'a PodDisruptionBudget)>>,
}

impl<'a> PdbIndex<'a> {
    pub fn new(pdbs: &'a [PodDisruptionBudget]) -> PdbIndex<'a> {
        let mut by_ns: BTreeMap<&str, Vec<(usize, &PodDisruptionBudget)>> = BTreeMap::new();
        for (i, p) in pdbs.iter().enumerate() {
            by_ns.entry(p.namespace.as_str()).or_default().push((i, p));
        }
        PdbIndex { by_ns }
    }

    /// Indices of the PDBs that select the pod (same namespace, selector matches; an empty
    /// selector selects every pod of the namespace, as in policy/v1).
    pub fn matching(&self, pod: &Pod) -> Vec<usize> {
        self.by_ns
            .get(pod.namespace.as_str())
            .map(|v| {
                v.iter()
                    .filter(|(_, p)| p.selector.matches(&pod.labels))
                    .map(|(i, _)| *i)
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(v: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(DO_NOT_DISRUPT.to_string(), v.to_string())])
    }

    #[test]
    fn true_protects_forever() {
        assert_eq!(
            Protection::of(&ann("true"), 0, i64::MAX / 2),
            Protection::Forever
        );
        assert_eq!(Protection::of(&ann("True"), 0, 0), Protection::Forever);
    }

    #[test]
    fn absent_or_false_does_not_protect() {
        assert_eq!(Protection::of(&BTreeMap::new(), 0, 0), Protection::None);
        assert_eq!(Protection::of(&ann("false"), 0, 0), Protection::None);
    }

    #[test]
    fn duration_protects_until_it_elapses() {
        assert_eq!(
            Protection::of(&ann("5m"), 1000, 1000),
            Protection::Until(1300)
        );
        assert_eq!(
            Protection::of(&ann("5m"), 1000, 1299),
            Protection::Until(1300)
        );
        assert_eq!(Protection::of(&ann("5m"), 1000, 1300), Protection::None);
        assert_eq!(
            Protection::of(&ann("1h30m"), 0, 5399),
            Protection::Until(5400)
        );
        assert_eq!(Protection::of(&ann("1500ms"), 0, 1), Protection::Until(2));
    }

    #[test]
    fn malformed_values_protect_and_say_so() {
        assert_eq!(
            Protection::of(&ann("yes"), 0, 0),
            Protection::Malformed("yes".into())
        );
        assert_eq!(
            Protection::of(&ann("5d"), 0, 0),
            Protection::Malformed("5d".into())
        );
        assert_eq!(
            Protection::of(&ann("-5m"), 0, 0),
            Protection::Malformed("-5m".into())
        );
        assert!(Protection::of(&ann("yes"), 0, 0).blocks());
    }
}
