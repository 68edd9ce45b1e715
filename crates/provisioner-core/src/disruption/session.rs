//! Consolidation across disruption loops: a [`ConsolidationSession`] the controller keeps
//! between loops remembers each candidate's single-node simulation together with a
//! fingerprint of what that simulation depended on, re-simulates only candidates whose
//! inputs changed, and bounds the simulations per loop by a [`WorkBudget`]; the
//! [`SessionReport`] says which candidates were left for the next loop.
//!
//! Why: the single-node phase is most of a loop's work (at 5,000 nodes, 5,000 of about 6,000
//! simulations) and between two loops ten seconds apart most nodes and their pods are
//! unchanged. Karpenter bounds the same work with a timeout and a 100-candidate cap, so large
//! clusters see candidates that are never looked at; here a deferred candidate goes first in
//! the next loop.
//!
//! What a single-node simulation depends on, and so its fingerprint:
//! - the *world*: options, NodePools, instance types, daemonsets, PDBs, namespaces, the
//!   pending pods and the nodes being deleted with their pods (those pods are placed on the
//!   base state first, so they shift every other placement);
//! - the candidate node and the pods bound to it;
//! - when its pods fit: the nodes they moved to (and their pods); a node's room changes only
//!   with its own state;
//! - when a pod of the candidate has an inter-pod term over a domain wider than one node
//!   (zone spread, zone affinity): the per-domain counts of the pods that term selects;
//! - every node, when the outcome was a miss (any node gaining room may make it fit), or when
//!   any pod in the cluster has required anti-affinity over a wider domain (it may reject a
//!   moved pod wherever it sits).
//!
//! A reused outcome is scored again in every loop (disruption cost, payback and budgets read
//! the current snapshot and clock). When nothing changed the decision is the same as without
//! the session (tested). When other nodes changed, a reused outcome is still valid (its
//! destinations did not change) but a fresh simulation might have chosen other destinations;
//! the multi-node phases and the chosen command are always simulated fresh.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hash, Hasher};

use crate::model::{LabelSelector, Pod, Snapshot, labels};
use crate::selectors::NamespaceScope;

use super::DisruptionOptions;
use super::command::{Destination, PodMove};
use super::consolidation::Miss;
use crate::result::NewNodeClaim;

/// How much simulation work one loop may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WorkBudget {
    /// At most this many single-candidate simulations per loop (`None`: all that changed).
    /// Candidates over the budget are left for the next loop (oldest first) and take no part
    /// in this loop's decision. The multi-node phases stay bounded by
    /// [`DisruptionOptions::max_simulations`].
    pub max_single_simulations: Option<usize>,
}

/// What a loop reused, simulated and left for the next one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionReport {
    /// Candidates whose previous simulation was reused (inputs unchanged).
    pub reused: usize,
    /// Candidates simulated in this loop.
    pub simulated: usize,
    /// Candidates left for the next loop by the budget, by name.
    pub deferred: Vec<String>,
}

/// A single-node simulation's outcome: where the pods went and any replacements, or why not.
pub(crate) type SingleOutcome = Result<(Vec<PodMove>, Vec<NewNodeClaim>), Miss>;

#[derive(Debug, Clone)]
struct Entry {
    key: u64,
    /// Nodes (besides the candidate) the outcome depends on; `None`: all of them.
    deps: Option<Vec<String>>,
    outcome: SingleOutcome,
}

/// Single-node outcomes remembered between loops; see the module documentation.
#[derive(Debug, Clone, Default)]
pub struct ConsolidationSession {
    pub budget: WorkBudget,
    entries: HashMap<String, Entry>,
    /// Loop number in which each deferred candidate was first left out (oldest go first).
    waiting: HashMap<String, u64>,
    loops: u64,
}

impl ConsolidationSession {
    pub fn new(budget: WorkBudget) -> Self {
        ConsolidationSession {
            budget,
            ..Default::default()
        }
    }

    /// Number of candidates with a remembered outcome.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Hashes a value through its `Debug` form: every model type has a derived, deterministic
/// `Debug` (maps are ordered, floats print exactly), while few derive `Hash` (prices are
/// `f64`).
struct DebugHasher(DefaultHasher);

impl std::fmt::Write for DebugHasher {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.write(s.as_bytes());
        Ok(())
    }
}

fn debug_hash<T: std::fmt::Debug + ?Sized>(v: &T) -> u64 {
    let mut h = DebugHasher(DefaultHasher::new());
    let _ = write!(h, "{v:?}");
    h.0.finish()
}

fn mix(a: u64, b: u64) -> u64 {
    let mut h = DefaultHasher::new();
    (a, b).hash(&mut h);
    h.finish()
}

/// An inter-pod term over a domain wider than one node (zone spread, zone affinity): its
/// outcome depends on how many matching pods each domain holds anywhere in the cluster.
#[derive(Debug, Hash)]
struct WideTerm {
    scope: NamespaceScope,
    selector: LabelSelector,
    key: String,
}

/// A pod's wide terms (spread and pod affinity; anti-affinity of other pods is handled by
/// falling back to every node, see [`Prints::new`]).
fn wide_terms(p: &Pod, namespaces: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<WideTerm> {
    let own = || NamespaceScope::Set([p.namespace.clone()].into_iter().collect());
    let mut out: Vec<WideTerm> = p
        .topology_spread
        .iter()
        .filter(|t| t.topology_key != labels::HOSTNAME)
        .map(|t| WideTerm {
            scope: own(),
            selector: t
                .label_selector
                .with_match_label_keys(&t.match_label_keys, &p.labels),
            key: t.topology_key.clone(),
        })
        .collect();
    let terms = p
        .pod_affinity
        .required
        .iter()
        .chain(p.pod_anti_affinity.required.iter())
        .chain(p.pod_affinity.preferred.iter().map(|w| &w.term))
        .chain(p.pod_anti_affinity.preferred.iter().map(|w| &w.term));
    for t in terms.filter(|t| t.topology_key != labels::HOSTNAME) {
        out.push(WideTerm {
            scope: NamespaceScope::of_term(t, &p.namespace, namespaces),
            selector: t
                .label_selector
                .with_match_label_keys(&t.match_label_keys, &p.labels),
            key: t.topology_key.clone(),
        });
    }
    out
}

/// Fingerprints of one snapshot.
pub(crate) struct Prints {
    world: u64,
    nodes: HashMap<String, u64>,
    all: u64,
    /// Per node, the fingerprint of the per-domain counts its pods' wide terms see.
    wide_nodes: HashMap<String, u64>,
    wide_anti: bool,
}

impl Prints {
    pub(crate) fn new(snapshot: &Snapshot, options: &DisruptionOptions) -> Prints {
        let mut world = DefaultHasher::new();
        debug_hash(options).hash(&mut world);
        debug_hash(&snapshot.nodepools).hash(&mut world);
        debug_hash(&snapshot.instance_types).hash(&mut world);
        debug_hash(&snapshot.daemonsets).hash(&mut world);
        debug_hash(&snapshot.pdbs).hash(&mut world);
        debug_hash(&snapshot.namespaces).hash(&mut world);
        let mut nodes: HashMap<String, u64> = snapshot
            .nodes
            .iter()
            .map(|n| (n.name.clone(), debug_hash(n)))
            .collect();
        let mut pending = 0u64;
        let mut wide_anti = false;
        for p in &snapshot.pods {
            // Pods on a node are combined order-independently: a reflector lists them in
            // any order. (`Hash`, not `Debug`: 150,000 pods a loop.)
            let h = {
                let mut h = DefaultHasher::new();
                p.hash(&mut h);
                h.finish()
            };
            wide_anti |= p
                .pod_anti_affinity
                .required
                .iter()
                .any(|t| t.topology_key != labels::HOSTNAME);
            match p.node_name.as_deref().and_then(|n| nodes.get_mut(n)) {
                Some(nh) => *nh = nh.wrapping_add(h.rotate_left(1)),
                None => pending = pending.wrapping_add(h),
            }
        }
        pending.hash(&mut world);
        // Pods of nodes being deleted are placed on the base state before any simulation,
        // like pending pods: they shift every other placement.
        let mut deleting: Vec<u64> = snapshot
            .nodes
            .iter()
            .filter(|n| n.marked_for_deletion)
            .filter_map(|n| nodes.get(&n.name).copied())
            .collect();
        deleting.sort_unstable();
        deleting.hash(&mut world);
        let wide_nodes = if wide_anti {
            HashMap::new()
        } else {
            wide_prints(snapshot)
        };
        let mut sorted: Vec<(&String, &u64)> = nodes.iter().collect();
        sorted.sort();
        let all = debug_hash(&sorted);
        Prints {
            world: world.finish(),
            nodes,
            all,
            wide_nodes,
            wide_anti,
        }
    }

    fn key(&self, candidate: &str, deps: Option<&[String]>) -> Option<u64> {
        let mut k = mix(self.world, *self.nodes.get(candidate)?);
        if let Some(w) = self.wide_nodes.get(candidate) {
            k = mix(k, *w);
        }
        match deps {
            None => k = mix(k, self.all),
            Some(ds) => {
                for d in ds {
                    k = mix(k, *self.nodes.get(d)?);
                }
            }
        }
        Some(k)
    }

    /// What an outcome of `candidate` depends on beyond the candidate itself.
    fn deps(&self, outcome: &SingleOutcome) -> Option<Vec<String>> {
        let moves = outcome.as_ref().ok()?;
        if self.wide_anti {
            return None;
        }
        let mut ds: Vec<String> = moves
            .0
            .iter()
            .filter_map(|m| match &m.to {
                Destination::Existing(n) => Some(n.clone()),
                Destination::Replacement(_) => None,
            })
            .collect();
        ds.sort();
        ds.dedup();
        Some(ds)
    }
}

/// Bound pods with the same namespace and labels (a deployment's replicas).
type Group<'a> = (&'a str, &'a crate::model::Labels);

/// Per node, a fingerprint of the per-domain counts of the pods that its pods' wide terms
/// select: a candidate with zone spread or zone affinity depends on those counts, not on
/// every node. Pods are grouped by namespace and labels first (a deployment's replicas share
/// them), so each distinct term is matched against the groups, not every pod.
fn wide_prints(snapshot: &Snapshot) -> HashMap<String, u64> {
    let node_labels: HashMap<&str, &BTreeMap<String, String>> = snapshot
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), &n.labels))
        .collect();
    // (namespace, labels) -> pods per node.
    let mut groups: HashMap<Group<'_>, HashMap<&str, u32>> = HashMap::new();
    for p in &snapshot.pods {
        if let Some(n) = p.node_name.as_deref() {
            *groups
                .entry((p.namespace.as_str(), &p.labels))
                .or_default()
                .entry(n)
                .or_default() += 1;
        }
    }
    // Groups by label pair, so a selector with match labels looks only at groups that
    // carry one of them (most groups carry none: scanning them all was seconds at 150,000
    // pods).
    let keys: Vec<Group<'_>> = groups.keys().copied().collect();
    let mut by_pair: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (gi, (_, labels)) in keys.iter().enumerate() {
        for (k, v) in labels.iter() {
            by_pair
                .entry((k.as_str(), v.as_str()))
                .or_default()
                .push(gi);
        }
    }
    let all_groups: Vec<usize> = (0..keys.len()).collect();
    let mut per_term: HashMap<u64, u64> = HashMap::new();
    let mut out: HashMap<String, u64> = HashMap::new();
    for p in &snapshot.pods {
        let Some(node) = p.node_name.as_deref() else {
            continue;
        };
        for t in wide_terms(p, &snapshot.namespaces) {
            let id = {
                let mut h = DefaultHasher::new();
                t.hash(&mut h);
                h.finish()
            };
            let print = *per_term.entry(id).or_insert_with(|| {
                let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
                let look = match t.selector.match_labels.iter().next() {
                    Some((k, v)) => by_pair
                        .get(&(k.as_str(), v.as_str()))
                        .map_or(&[][..], Vec::as_slice),
                    None => &all_groups[..],
                };
                for gi in look {
                    let Some(&(ns, labels)) = keys.get(*gi) else {
                        continue;
                    };
                    if !t.scope.contains(ns) || !t.selector.matches(labels) {
                        continue;
                    }
                    let Some(on) = groups.get(&(ns, labels)) else {
                        continue;
                    };
                    for (n, c) in on {
                        let domain = node_labels
                            .get(n)
                            .and_then(|l| l.get(&t.key))
                            .map_or("", String::as_str);
                        *counts.entry(domain).or_default() += c;
                    }
                }
                mix(id, debug_hash(&counts))
            });
            let e = out.entry(node.to_string()).or_insert(0);
            *e = e.wrapping_add(print);
        }
    }
    out
}

/// One loop's use of a session: which candidates to reuse, simulate or defer.
pub(crate) struct Loop<'s> {
    session: &'s mut ConsolidationSession,
    prints: Prints,
    pub(crate) report: SessionReport,
}

/// What to do with one candidate in this loop.
pub(crate) enum Plan {
    Reuse(SingleOutcome),
    Simulate,
    Defer,
}

impl<'s> Loop<'s> {
    pub(crate) fn new(
        session: &'s mut ConsolidationSession,
        snapshot: &Snapshot,
        options: &DisruptionOptions,
    ) -> Loop<'s> {
        session.loops += 1;
        Loop {
            session,
            prints: Prints::new(snapshot, options),
            report: SessionReport::default(),
        }
    }

    /// Plans the candidates (by name, in the search's order): unchanged ones are reused,
    /// changed ones simulated up to the budget, longest-waiting first.
    pub(crate) fn plan(&mut self, names: &[&str]) -> Vec<Plan> {
        let mut plans: Vec<Plan> = names
            .iter()
            .map(|n| {
                let fresh = self.session.entries.get(*n).and_then(|e| {
                    (self.prints.key(n, e.deps.as_deref()) == Some(e.key)).then_some(e)
                });
                match fresh {
                    Some(e) => Plan::Reuse(e.outcome.clone()),
                    None => Plan::Simulate,
                }
            })
            .collect();
        let mut stale: Vec<usize> = (0..names.len())
            .filter(|i| matches!(plans.get(*i), Some(Plan::Simulate)))
            .collect();
        let loops = self.session.loops;
        let since = |i: usize| {
            names
                .get(i)
                .and_then(|n| self.session.waiting.get(*n).copied())
                .unwrap_or(loops)
        };
        stale.sort_by_key(|&i| (since(i), i));
        let allowed = self
            .session
            .budget
            .max_single_simulations
            .unwrap_or(usize::MAX);
        for (k, &i) in stale.iter().enumerate() {
            let Some(name) = names.get(i) else { continue };
            if k < allowed {
                self.session.waiting.remove(*name);
            } else {
                if let Some(p) = plans.get_mut(i) {
                    *p = Plan::Defer;
                }
                self.session
                    .waiting
                    .entry(name.to_string())
                    .or_insert(loops);
                self.report.deferred.push(name.to_string());
            }
        }
        self.report.reused = plans.iter().filter(|p| matches!(p, Plan::Reuse(_))).count();
        self.report.simulated = stale.len().min(allowed);
        self.report.deferred.sort();
        plans
    }

    /// Remembers a fresh outcome.
    pub(crate) fn record(&mut self, candidate: &str, outcome: SingleOutcome) {
        let deps = self.prints.deps(&outcome);
        if let Some(key) = self.prints.key(candidate, deps.as_deref()) {
            self.session
                .entries
                .insert(candidate.to_string(), Entry { key, deps, outcome });
        }
    }

    /// Forgets candidates that are gone; returns the report.
    pub(crate) fn finish(self, present: &[&str]) -> SessionReport {
        let keep: std::collections::HashSet<&str> = present.iter().copied().collect();
        self.session
            .entries
            .retain(|k, _| keep.contains(k.as_str()));
        self.session
            .waiting
            .retain(|k, _| keep.contains(k.as_str()));
        self.report
    }
}
