//! Label selectors (metav1.LabelSelector) and the namespace scope of pod affinity terms.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{LabelMap, LabelSelector, PodAffinityTerm, SelectorOperator};

impl LabelSelector {
    /// Whether the selector selects a set of labels: matchLabels and matchExpressions ANDed;
    /// an empty selector selects everything.
    pub fn matches(&self, labels: &impl LabelMap) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.label(k) == Some(v))
            && self.match_expressions.iter().all(|e| {
                let have = labels.label(&e.key);
                match e.operator {
                    SelectorOperator::In => have.is_some_and(|v| e.values.contains(v)),
                    SelectorOperator::NotIn => have.is_none_or(|v| !e.values.contains(v)),
                    SelectorOperator::Exists => have.is_some(),
                    SelectorOperator::DoesNotExist => have.is_none(),
                }
            })
    }

    /// A selector matching exactly these labels (helper for tests and generators).
    pub fn from_labels<K: Into<String>, V: Into<String>>(
        labels: impl IntoIterator<Item = (K, V)>,
    ) -> LabelSelector {
        LabelSelector {
            match_labels: labels
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            match_expressions: Vec::new(),
        }
    }

    /// This selector with `match_label_keys` resolved against the owner pod's labels, as the
    /// kube-scheduler does for topology spread and pod affinity.
    pub fn with_match_label_keys(
        &self,
        keys: &[String],
        owner_labels: &impl LabelMap,
    ) -> LabelSelector {
        let mut out = self.clone();
        for k in keys {
            if let Some(v) = owner_labels.label(k) {
                out.match_labels.insert(k.clone(), v.clone());
            }
        }
        out
    }
}

/// The namespaces a pod affinity term applies to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NamespaceScope {
    /// Every namespace (an empty, present namespace selector).
    All,
    /// An explicit set (the term's namespaces, namespaces matched by its selector, or the
    /// owner's own namespace).
    Set(BTreeSet<String>),
}

impl NamespaceScope {
    /// Resolves a term's namespaces as the kube-scheduler does: the union of `namespaces` and
    /// the namespaces its selector matches; neither given means the owner's namespace.
    pub fn of_term(
        term: &PodAffinityTerm,
        owner_ns: &str,
        namespaces: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> NamespaceScope {
        let mut set: BTreeSet<String> = term.namespaces.iter().cloned().collect();
        match &term.namespace_selector {
            Some(sel) if sel.match_labels.is_empty() && sel.match_expressions.is_empty() => {
                return NamespaceScope::All;
            }
            Some(sel) => {
                for (ns, labels) in namespaces {
                    if sel.matches(labels) {
                        set.insert(ns.clone());
                    }
                }
            }
            None => {
                if set.is_empty() {
                    set.insert(owner_ns.to_string());
                }
            }
        }
        NamespaceScope::Set(set)
    }

    /// Whether a pod in namespace `ns` is in scope.
    pub fn contains(&self, ns: &str) -> bool {
        match self {
            NamespaceScope::All => true,
            NamespaceScope::Set(s) => s.contains(ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SelectorRequirement;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn empty_selector_selects_everything() {
        assert!(LabelSelector::default().matches(&labels(&[])));
    }

    #[test]
    fn expressions_follow_kubernetes() {
        let sel = LabelSelector {
            match_labels: crate::model::Labels::new(),
            match_expressions: vec![
                SelectorRequirement {
                    key: "app".into(),
                    operator: SelectorOperator::In,
                    values: vec!["a".into(), "b".into()],
                },
                SelectorRequirement {
                    key: "tier".into(),
                    operator: SelectorOperator::NotIn,
                    values: vec!["db".into()],
                },
                SelectorRequirement {
                    key: "gone".into(),
                    operator: SelectorOperator::DoesNotExist,
                    values: vec![],
                },
            ],
        };
        assert!(sel.matches(&labels(&[("app", "a")])));
        assert!(sel.matches(&labels(&[("app", "b"), ("tier", "web")])));
        assert!(!sel.matches(&labels(&[("app", "b"), ("tier", "db")])));
        assert!(!sel.matches(&labels(&[("app", "c")])));
        assert!(!sel.matches(&labels(&[("app", "a"), ("gone", "x")])));
    }

    #[test]
    fn namespace_scope_defaults_to_owner() {
        let term = PodAffinityTerm {
            label_selector: LabelSelector::default(),
            namespaces: vec![],
            namespace_selector: None,
            topology_key: "k".into(),
            match_label_keys: vec![],
        };
        let scope = NamespaceScope::of_term(&term, "team", &BTreeMap::new());
        assert!(scope.contains("team"));
        assert!(!scope.contains("other"));
        let all = PodAffinityTerm {
            namespace_selector: Some(LabelSelector::default()),
            ..term
        };
        assert!(NamespaceScope::of_term(&all, "team", &BTreeMap::new()).contains("other"));
    }
}
