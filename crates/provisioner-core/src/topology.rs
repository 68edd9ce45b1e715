//! Topology groups: topology spread and pod (anti-)affinity counted per domain.
//!
//! A group is one distinct term (kind, topology key, namespaces, selector, skew, node filter),
//! shared by every pod that carries it. It counts, per domain (a zone, a hostname, any label
//! value), the pods its selector selects; anti-affinity groups also count where their owners
//! are, for the inverse check (an existing pod's anti-affinity keeps matching pods away).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::model::{
    InclusionPolicy, LabelSelector, NodeSelectorTerm, Pod, Taint, Toleration, WhenUnsatisfiable,
    labels,
};
use crate::requirements::terms_match;
use crate::selectors::NamespaceScope;
use crate::taints::tolerates_all;

/// What a group enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Spread,
    Affinity,
    AntiAffinity,
}

/// Which nodes a spread counts (nodeAffinityPolicy / nodeTaintsPolicy `Honor`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct NodeFilter {
    /// Honor node affinity: the owner's node requirements (ORed terms, each ANDed; no
    /// terms means no constraint).
    pub requirements: Option<Vec<NodeSelectorTerm>>,
    /// Honor taints: the owner's tolerations.
    pub tolerations: Option<Vec<Toleration>>,
}

impl NodeFilter {
    /// Whether a node with these labels and taints counts.
    pub fn admits(&self, node_labels: &BTreeMap<String, String>, taints: &[Taint]) -> bool {
        self.requirements
            .as_ref()
            .is_none_or(|terms| terms_match(terms, node_labels))
            && self
                .tolerations
                .as_ref()
                .is_none_or(|tols| tolerates_all(taints, tols, false))
    }
}

/// One topology group.
#[derive(Debug, Clone)]
pub struct Group {
    /// Identity of the group across clones of a state (a clone keeps it; a group made anew
    /// gets a new one), for facts about it that a shared memo keeps.
    pub uid: u64,
    pub kind: Kind,
    pub key: String,
    pub scope: NamespaceScope,
    pub selector: LabelSelector,
    pub max_skew: i32,
    pub min_domains: Option<i32>,
    pub filter: NodeFilter,
    /// Selected pods per domain.
    pub counts: Counts,
    /// Owners per domain (anti-affinity only).
    pub owners: Counts,
    /// Domains a pod could land in (existing nodes and launch shapes), for spread minimums.
    /// Fixed once the group is made, so clones share it.
    pub domains: Arc<BTreeSet<String>>,
}

/// A count per domain that is cheap to clone: a shared base map and a small private overlay.
///
/// Consolidation clones one cluster state per simulation; a hostname-keyed group holds one
/// count per node, so copying plain maps made every simulation cost as much as the cluster is
/// large (profiles: about half of a simulation at 1,000 nodes was cloning and dropping them).
/// Here a clone copies the overlay only (the domains this state changed), and the overlay is
/// folded into a new base when it grows past a fraction of it. Reads see `base + overlay`;
/// a domain is *present* (see [`Counts::len`]) once anything was added to it, as a map entry
/// would be.
#[derive(Debug, Clone, Default)]
pub struct Counts {
    base: Arc<HashMap<String, i32>>,
    overlay: BTreeMap<String, i32>,
    /// Domains present in `base` or `overlay`.
    present: usize,
    /// Domains whose count is above zero.
    positive: usize,
}

impl Counts {
    /// The count of a domain (0 when absent).
    pub fn get(&self, domain: &str) -> i32 {
        match self.overlay.get(domain) {
            Some(c) => *c,
            None => self.base.get(domain).copied().unwrap_or(0),
        }
    }

    fn lookup(&self, domain: &str) -> Option<i32> {
        self.overlay
            .get(domain)
            .or_else(|| self.base.get(domain))
            .copied()
    }

    /// Adds `k` to a domain, making it present.
    pub fn add(&mut self, domain: &str, k: i32) {
        let old = self.lookup(domain);
        if old.is_none() {
            self.present += 1;
        }
        let old = old.unwrap_or(0);
        let new = old + k;
        if old > 0 {
            self.positive -= 1;
        }
        if new > 0 {
            self.positive += 1;
        }
        match self.overlay.get_mut(domain) {
            Some(c) => *c = new,
            None => {
                self.overlay.insert(domain.to_string(), new);
                self.compact();
            }
        }
    }

    /// Subtracts one from a domain that is present (an absent domain stays absent).
    pub fn decrement(&mut self, domain: &str) {
        if self.lookup(domain).is_some() {
            self.add(domain, -1);
        }
    }

    /// Domains present (as a map's length).
    pub fn len(&self) -> usize {
        self.present
    }

    /// Whether every count lives in the shared base.
    pub fn overlay_is_empty(&self) -> bool {
        self.overlay.is_empty()
    }

    /// No domain present.
    pub fn is_empty(&self) -> bool {
        self.present == 0
    }

    /// Whether some domain counts above zero.
    pub fn any_positive(&self) -> bool {
        self.positive > 0
    }

    /// Every present domain and its count, in domain order.
    pub fn to_map(&self) -> BTreeMap<String, i32> {
        let mut m: BTreeMap<String, i32> = self.base.iter().map(|(k, v)| (k.clone(), *v)).collect();
        for (k, v) in &self.overlay {
            m.insert(k.clone(), *v);
        }
        m
    }

    /// A copy that shares nothing with `self` (the straightforward reference in tests).
    #[cfg(test)]
    pub(crate) fn unshared(&self) -> Counts {
        let mut c = Counts::default();
        for (k, v) in self.to_map() {
            c.add(&k, v);
        }
        c
    }

    /// Folds a large overlay into a new base, so clones stay small.
    fn compact(&mut self) {
        if self.overlay.len() <= 32 || self.overlay.len() * 8 <= self.base.len() {
            return;
        }
        self.fold();
    }

    /// Folds the whole overlay into the base: for a state about to be cloned many times. An
    /// overlay may hold up to an eighth of the base between compactions, and copying that
    /// per clone made a consolidation simulation's cost grow with the cluster (hostname
    /// groups have a domain per node).
    pub fn fold(&mut self) {
        if self.overlay.is_empty() {
            return;
        }
        let base = Arc::make_mut(&mut self.base);
        for (k, v) in std::mem::take(&mut self.overlay) {
            base.insert(k, v);
        }
    }
}

/// A term as a pod carries it, before it is interned as a [`Group`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    pub kind: Kind,
    pub key: String,
    pub scope: NamespaceScope,
    pub selector: String,
    pub max_skew: i32,
    pub min_domains: Option<i32>,
    /// The node filter, rendered (it has no order of its own).
    pub filter: String,
}

/// A pod's term with what is needed to build its group.
#[derive(Debug, Clone)]
pub struct OwnedTerm {
    pub key: GroupKey,
    pub filter: NodeFilter,
    pub selector: LabelSelector,
    pub hard_label: String,
}

impl Group {
    /// Whether the group's selector selects `pod`.
    pub fn selects(&self, pod: &Pod) -> bool {
        self.scope.contains(&pod.namespace) && self.selector.matches(&pod.labels)
    }

    /// Whether pods on a node count for this group.
    pub fn counts_node(&self, node_labels: &BTreeMap<String, String>, taints: &[Taint]) -> bool {
        self.kind != Kind::Spread || self.filter.admits(node_labels, taints)
    }

    /// Smallest count among `eligible` domains (0 for hostname: a new node can always open;
    /// 0 when fewer than minDomains domains are eligible).
    pub fn global_min(&self, eligible: &BTreeSet<String>) -> i32 {
        self.global_min_in(eligible, true)
    }

    /// [`Group::global_min`] with the choice of whether new hosts can open: the provisioner
    /// can always add an empty hostname domain, the kube-scheduler binding to existing nodes
    /// cannot (there the hostname minimum is over the existing eligible nodes).
    pub fn global_min_in(&self, eligible: &BTreeSet<String>, new_hosts: bool) -> i32 {
        if self.key == labels::HOSTNAME && new_hosts {
            return 0;
        }
        if let Some(md) = self.min_domains
            && (eligible.len() as i32) < md
        {
            return 0;
        }
        eligible
            .iter()
            .map(|d| self.counts.get(d))
            .min()
            .unwrap_or(0)
    }

    /// Whether any domain holds a selected pod.
    pub fn any_selected(&self) -> bool {
        self.counts.any_positive()
    }

    /// Can `pod` (which owns this group) go to `domain`? `self_selected`: the group selects
    /// the pod itself. `eligible`: domains the pod could use (for the spread minimum).
    pub fn allows(
        &self,
        domain: Option<&str>,
        self_selected: bool,
        eligible: &BTreeSet<String>,
    ) -> bool {
        self.allows_in(domain, self_selected, eligible, true)
    }

    /// [`Group::allows`] with the choice of [`Group::global_min_in`]'s `new_hosts`.
    pub fn allows_in(
        &self,
        domain: Option<&str>,
        self_selected: bool,
        eligible: &BTreeSet<String>,
        new_hosts: bool,
    ) -> bool {
        match self.kind {
            Kind::Spread => {
                let Some(d) = domain else { return false };
                let count = self.counts.get(d) + i32::from(self_selected);
                count - self.global_min_in(eligible, new_hosts) <= self.max_skew
            }
            Kind::Affinity => {
                let Some(d) = domain else { return false };
                if self.counts.get(d) > 0 {
                    return true;
                }
                // The first pod of a self-affine group may go anywhere.
                let any = if self.key == labels::HOSTNAME {
                    self.any_selected()
                } else {
                    self.any_selected_in(eligible)
                };
                self_selected && !any
            }
            Kind::AntiAffinity => domain.is_none_or(|d| self.counts.get(d) == 0),
        }
    }

    fn any_selected_in(&self, eligible: &BTreeSet<String>) -> bool {
        eligible.iter().any(|d| self.counts.get(d) > 0)
    }

    /// Inverse anti-affinity: may a pod this group selects go to `domain`?
    pub fn inverse_allows(&self, domain: Option<&str>) -> bool {
        self.kind != Kind::AntiAffinity || domain.is_none_or(|d| self.owners.get(d) == 0)
    }
}

/// The terms a pod owns, with preferences included as long as they were not relaxed.
/// `node_requirements`: the owner's node requirements as ORed terms, for spreads that honor
/// node affinity.
pub fn owned_terms(
    pod: &Pod,
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
    node_requirements: &[NodeSelectorTerm],
) -> Vec<OwnedTerm> {
    let mut out = Vec::new();
    for tsc in &pod.topology_spread {
        let selector = tsc
            .label_selector
            .with_match_label_keys(&tsc.match_label_keys, &pod.labels);
        let honor_affinity =
            tsc.node_affinity_policy.unwrap_or(InclusionPolicy::Honor) == InclusionPolicy::Honor;
        let honor_taints =
            tsc.node_taints_policy.unwrap_or(InclusionPolicy::Ignore) == InclusionPolicy::Honor;
        let filter = NodeFilter {
            requirements: honor_affinity.then(|| node_requirements.to_vec()),
            tolerations: honor_taints.then(|| pod.tolerations.clone()),
        };
        let soft = tsc.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway;
        out.push(OwnedTerm {
            key: GroupKey {
                kind: Kind::Spread,
                key: tsc.topology_key.clone(),
                scope: NamespaceScope::Set([pod.namespace.clone()].into()),
                selector: format!("{selector:?}"),
                max_skew: tsc.max_skew.max(1),
                min_domains: tsc.min_domains,
                filter: format!("{filter:?}"),
            },
            filter,
            selector,
            hard_label: format!(
                "topology spread on {} (maxSkew {}{})",
                tsc.topology_key,
                tsc.max_skew,
                if soft { ", ScheduleAnyway" } else { "" }
            ),
        });
    }
    let mut push_affinity = |kind: Kind, term: &crate::model::PodAffinityTerm, what: &str| {
        let selector = term
            .label_selector
            .with_match_label_keys(&term.match_label_keys, &pod.labels);
        out.push(OwnedTerm {
            key: GroupKey {
                kind,
                key: term.topology_key.clone(),
                scope: NamespaceScope::of_term(term, &pod.namespace, namespaces),
                selector: format!("{selector:?}"),
                max_skew: 0,
                min_domains: None,
                filter: String::new(),
            },
            filter: NodeFilter::default(),
            selector,
            hard_label: format!("{what} on {}", term.topology_key),
        });
    };
    for t in &pod.pod_affinity.required {
        push_affinity(Kind::Affinity, t, "pod affinity");
    }
    for t in &pod.pod_affinity.preferred {
        push_affinity(Kind::Affinity, &t.term, "preferred pod affinity");
    }
    for t in &pod.pod_anti_affinity.required {
        push_affinity(Kind::AntiAffinity, t, "pod anti-affinity");
    }
    for t in &pod.pod_anti_affinity.preferred {
        push_affinity(Kind::AntiAffinity, &t.term, "preferred pod anti-affinity");
    }
    out
}

impl Group {
    /// A copy that shares nothing with `self` and has its own identity (tests).
    #[cfg(test)]
    pub(crate) fn unshared(&self) -> Group {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1 << 62);
        Group {
            uid: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            counts: self.counts.unshared(),
            owners: self.owners.unshared(),
            domains: Arc::new((*self.domains).clone()),
            ..self.clone()
        }
    }

    /// A new, empty group for a term.
    pub fn new(term: &OwnedTerm) -> Group {
        static NEXT_UID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Group {
            uid: NEXT_UID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            kind: term.key.kind,
            key: term.key.key.clone(),
            scope: term.key.scope.clone(),
            selector: term.selector.clone(),
            max_skew: term.key.max_skew,
            min_domains: term.key.min_domains,
            filter: term.filter.clone(),
            counts: Counts::default(),
            owners: Counts::default(),
            domains: Arc::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(kind: Kind, key: &str, skew: i32) -> Group {
        Group {
            uid: 0,
            kind,
            key: key.into(),
            scope: NamespaceScope::All,
            selector: LabelSelector::from_labels([("app", "web")]),
            max_skew: skew,
            min_domains: None,
            filter: NodeFilter::default(),
            counts: Counts::default(),
            owners: Counts::default(),
            domains: Arc::default(),
        }
    }

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn spread_skew_counts_the_incoming_pod() {
        // kube-scheduler docs: zones A:2 B:1 C:0, maxSkew 1 -> only C is allowed.
        let mut g = group(Kind::Spread, labels::ZONE, 1);
        g.counts.add("A", 2);
        g.counts.add("B", 1);
        let eligible = set(&["A", "B", "C"]);
        assert!(!g.allows(Some("A"), true, &eligible));
        assert!(!g.allows(Some("B"), true, &eligible));
        assert!(g.allows(Some("C"), true, &eligible));
        // A node without the topology key is not a candidate.
        assert!(!g.allows(None, true, &eligible));
    }

    #[test]
    fn min_domains_forces_a_zero_minimum() {
        // minDomains 3 with only 2 eligible domains: the global minimum is 0.
        let mut g = group(Kind::Spread, labels::ZONE, 1);
        g.min_domains = Some(3);
        g.counts.add("A", 1);
        g.counts.add("B", 1);
        let eligible = set(&["A", "B"]);
        assert!(!g.allows(Some("A"), true, &eligible));
        g.min_domains = Some(2);
        assert!(g.allows(Some("A"), true, &eligible));
    }

    #[test]
    fn hostname_spread_minimum_is_zero() {
        let mut g = group(Kind::Spread, labels::HOSTNAME, 1);
        g.counts.add("n1", 1);
        g.counts.add("n2", 1);
        assert!(!g.allows(Some("n1"), true, &set(&["n1", "n2"])));
    }

    #[test]
    fn first_pod_of_self_affine_group_goes_anywhere() {
        let mut g = group(Kind::Affinity, labels::ZONE, 0);
        let eligible = set(&["A", "B"]);
        assert!(g.allows(Some("A"), true, &eligible));
        assert!(
            !g.allows(Some("A"), false, &eligible),
            "not self-selecting: needs a match"
        );
        g.counts.add("B", 1);
        assert!(!g.allows(Some("A"), true, &eligible));
        assert!(g.allows(Some("B"), true, &eligible));
    }

    proptest::proptest! {
        /// `Counts` reads like a plain map through adds, decrements, compaction, folds and
        /// clones that go on changing independently.
        #[test]
        fn counts_behave_like_a_map(ops in proptest::collection::vec((0u8..4, 0u16..120, -2i32..4), 0..400)) {
            let mut fast = Counts::default();
            let mut model: BTreeMap<String, i32> = BTreeMap::new();
            let mut snapshots: Vec<(Counts, BTreeMap<String, i32>)> = Vec::new();
            for (op, d, k) in ops {
                let d = format!("d{d}");
                match op {
                    0 => {
                        fast.add(&d, k);
                        *model.entry(d).or_insert(0) += k;
                    }
                    1 => {
                        fast.decrement(&d);
                        if let Some(c) = model.get_mut(&d) {
                            *c -= 1;
                        }
                    }
                    2 => snapshots.push((fast.clone(), model.clone())),
                    _ => {
                        fast.fold();
                        proptest::prop_assert!(fast.overlay_is_empty());
                    }
                }
                proptest::prop_assert_eq!(fast.len(), model.len());
                proptest::prop_assert_eq!(fast.any_positive(), model.values().any(|c| *c > 0));
            }
            proptest::prop_assert_eq!(fast.to_map(), model.clone());
            for (c, m) in &snapshots {
                proptest::prop_assert_eq!(&c.to_map(), m);
                for (d, v) in m {
                    proptest::prop_assert_eq!(c.get(d), *v);
                }
            }
        }
    }

    #[test]
    fn anti_affinity_and_inverse() {
        let mut g = group(Kind::AntiAffinity, labels::HOSTNAME, 0);
        g.counts.add("n1", 1);
        g.owners.add("n2", 1);
        assert!(!g.allows(Some("n1"), true, &set(&[])));
        assert!(g.allows(Some("n2"), true, &set(&[])));
        assert!(!g.inverse_allows(Some("n2")));
        assert!(g.inverse_allows(Some("n1")));
    }
}
