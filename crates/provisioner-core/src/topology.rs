//! Topology groups: topology spread and pod (anti-)affinity counted per domain.
//!
//! A group is one distinct term (kind, topology key, namespaces, selector, skew, node filter),
//! shared by every pod that carries it. It counts, per domain (a zone, a hostname, any label
//! value), the pods its selector selects; anti-affinity groups also count where their owners
//! are, for the inverse check (an existing pod's anti-affinity keeps matching pods away).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub use crate::domain_counts::{Counts, DomainIds};
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
    /// The scope, selector and filter never change once the group is made: shared, so that
    /// the first change of a group's counts in a simulation (which copies the group) does
    /// not copy their strings. That copy was a tenth of a consolidation simulation
    /// (`benches/README.md`, scale round 12).
    pub scope: Arc<NamespaceScope>,
    pub selector: Arc<LabelSelector>,
    pub max_skew: i32,
    pub min_domains: Option<i32>,
    pub filter: Arc<NodeFilter>,
    /// Selected pods per domain.
    pub counts: Counts,
    /// Owners per domain (anti-affinity only).
    pub owners: Counts,
    /// Domains a pod could land in (existing nodes and launch shapes), for spread minimums.
    /// Fixed once the group is made, so clones share it.
    pub domains: Arc<BTreeSet<String>>,
}

/// A term as a pod carries it, before it is interned as a [`Group`]. Compared and hashed
/// by value: the groups are found by it every time a pod is placed, and rendering the
/// selector and filter to strings for a sorted key was a seventh of a consolidation
/// simulation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GroupKey {
    pub kind: Kind,
    pub key: String,
    pub scope: NamespaceScope,
    pub selector: LabelSelector,
    pub max_skew: i32,
    pub min_domains: Option<i32>,
    pub filter: NodeFilter,
}

/// A pod's term: its group's key, and how it reads in a reason (rendered by `Display` only
/// when a reason is written).
#[derive(Debug, Clone)]
pub struct OwnedTerm {
    pub key: GroupKey,
    /// "topology spread", "pod affinity", "preferred pod anti-affinity", ...
    what: &'static str,
    /// A spread's `maxSkew` as written (the key holds it raised to at least 1).
    declared_skew: i32,
    /// A spread with `whenUnsatisfiable: ScheduleAnyway`.
    soft: bool,
}

impl std::fmt::Display for OwnedTerm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.key.kind {
            Kind::Spread => write!(
                f,
                "{} on {} (maxSkew {}{})",
                self.what,
                self.key.key,
                self.declared_skew,
                if self.soft { ", ScheduleAnyway" } else { "" }
            ),
            Kind::Affinity | Kind::AntiAffinity => write!(f, "{} on {}", self.what, self.key.key),
        }
    }
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

    /// [`Group::allows`] for a hostname group at the interned domain `id`, when its counts
    /// keep domains by number (the existing-node first fit reads one per node it walks past);
    /// `None` otherwise (another key, or counts numbered by another interner than `ids`). A
    /// new host can always open, so the spread minimum is 0 here, as in [`Group::global_min`].
    pub fn allows_host(&self, ids: &Arc<DomainIds>, id: u32, self_selected: bool) -> Option<bool> {
        if self.key != labels::HOSTNAME || !self.counts.uses_ids(ids) {
            return None;
        }
        let count = self.counts.get_id(id)?;
        Some(match self.kind {
            Kind::Spread => count + i32::from(self_selected) <= self.max_skew,
            Kind::Affinity => count > 0 || (self_selected && !self.any_selected()),
            Kind::AntiAffinity => count == 0,
        })
    }

    /// [`Group::inverse_allows`] at an interned hostname, as [`Group::allows_host`].
    pub fn inverse_allows_host(&self, ids: &Arc<DomainIds>, id: u32) -> Option<bool> {
        if self.key != labels::HOSTNAME || !self.owners.uses_ids(ids) {
            return None;
        }
        if self.kind != Kind::AntiAffinity {
            return Some(true);
        }
        Some(self.owners.get_id(id)? == 0)
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
                selector,
                max_skew: tsc.max_skew.max(1),
                min_domains: tsc.min_domains,
                filter,
            },
            what: "topology spread",
            declared_skew: tsc.max_skew,
            soft,
        });
    }
    let mut push_affinity =
        |kind: Kind, term: &crate::model::PodAffinityTerm, what: &'static str| {
            let selector = term
                .label_selector
                .with_match_label_keys(&term.match_label_keys, &pod.labels);
            out.push(OwnedTerm {
                key: GroupKey {
                    kind,
                    key: term.topology_key.clone(),
                    scope: NamespaceScope::of_term(term, &pod.namespace, namespaces),
                    selector,
                    max_skew: 0,
                    min_domains: None,
                    filter: NodeFilter::default(),
                },
                what,
                declared_skew: 0,
                soft: false,
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
            scope: Arc::new(term.key.scope.clone()),
            selector: Arc::new(term.key.selector.clone()),
            max_skew: term.key.max_skew,
            min_domains: term.key.min_domains,
            filter: Arc::new(term.key.filter.clone()),
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
            scope: Arc::new(NamespaceScope::All),
            selector: Arc::new(LabelSelector::from_labels([("app", "web")])),
            max_skew: skew,
            min_domains: None,
            filter: Arc::default(),
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
