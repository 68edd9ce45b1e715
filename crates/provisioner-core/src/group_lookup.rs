//! Which topology groups a pod can take part in, found by its labels instead of testing
//! every group.
//!
//! Placing or evicting a pod updates the count of every group that selects it and of every
//! anti-affinity group it owns. Testing each group of the cluster for each pod (a label lookup
//! for the domain, then the selector) was a quarter of a consolidation simulation's
//! instructions at 1,000 nodes (callgrind, `benches/README.md` scale round 9), and the number
//! of groups grows with the workloads a cluster runs. A group whose selector has a
//! `matchLabels` entry can only select pods carrying that label with that value, so groups
//! are filed under their first entry; the selector itself still decides.

use foldhash::HashMap;

use crate::model::{LabelSelector, Labels};
use crate::topology::Kind;

/// Groups filed by the first `matchLabels` entry of their selector.
#[derive(Debug, Clone, Default)]
pub struct GroupLookup {
    /// Label key -> (value, group index).
    by_label: HashMap<String, Vec<(String, usize)>>,
    /// Groups whose selector has no `matchLabels` (expressions only, or empty).
    always: Vec<usize>,
    /// Anti-affinity groups (their owners are counted too).
    anti: Vec<usize>,
}

impl GroupLookup {
    /// Files group `index`.
    pub fn add(&mut self, index: usize, selector: &LabelSelector, kind: Kind) {
        match selector.match_labels.iter().next() {
            Some((k, v)) => self
                .by_label
                .entry(k.clone())
                .or_default()
                .push((v.clone(), index)),
            None => self.always.push(index),
        }
        if kind == Kind::AntiAffinity {
            self.anti.push(index);
        }
    }

    /// Calls `f` with every group whose selector may select a pod with these labels (a
    /// superset: the selector decides), each once.
    pub fn may_select(&self, labels: &Labels, mut f: impl FnMut(usize)) {
        for &gi in &self.always {
            f(gi);
        }
        for (k, v) in labels.iter() {
            if let Some(list) = self.by_label.get(k.as_str()) {
                for (gv, gi) in list {
                    if gv == v {
                        f(*gi);
                    }
                }
            }
        }
    }

    /// Anti-affinity groups, the only ones a pod can own.
    pub fn anti_affinity(&self) -> &[usize] {
        &self.anti
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_meets_the_groups_its_labels_may_select_and_those_without_match_labels() {
        let mut l = GroupLookup::default();
        l.add(
            0,
            &LabelSelector::from_labels([("app", "web")]),
            Kind::Spread,
        );
        l.add(
            1,
            &LabelSelector::from_labels([("app", "db")]),
            Kind::AntiAffinity,
        );
        l.add(2, &LabelSelector::default(), Kind::Affinity);
        l.add(
            3,
            &LabelSelector::from_labels([("tier", "front"), ("app", "web")]),
            Kind::Spread,
        );
        let labels: Labels = [
            ("app".to_string(), "web".to_string()),
            ("tier".to_string(), "front".to_string()),
        ]
        .into_iter()
        .collect();
        let mut met = Vec::new();
        l.may_select(&labels, |gi| met.push(gi));
        met.sort_unstable();
        assert_eq!(met, vec![0, 2, 3]);
        assert_eq!(l.anti_affinity(), &[1]);
    }
}
