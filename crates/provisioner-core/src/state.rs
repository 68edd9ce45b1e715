//! Cluster state for scheduling: per-node usage, host ports and topology counts.
//!
//! Built once from a [`Snapshot`] with [`ClusterState::new`] and cheap to clone: the snapshot
//! and the launch shapes sit behind an `Arc`, only per-node usage and the topology groups are
//! copied. Consolidation builds one state, then for each candidate set clones it, calls
//! [`ClusterState::remove_nodes`] (their pods become pending, their counts leave the topology
//! groups) and runs [`crate::schedule_on`] with those pods.

use std::collections::{BTreeMap, BTreeSet};

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::sync::Arc;

use rayon::prelude::*;

use crate::free_room::FreeRoom;
use crate::group_lookup::GroupLookup;
use crate::model::{HostPort, Node, Pod, Protocol, Resources, Snapshot, labels};
use crate::resources::pod_requests;
use crate::shapes::{Shapes, csi_resource};
use crate::topology::{Counts, DomainIds, Group, GroupKey, Kind, OwnedTerm};

/// Immutable parts shared by every clone.
#[derive(Debug)]
pub struct Base {
    /// Shared with the caller when it hands one over ([`ClusterState::from_shared`]): a copy of
    /// a 150,000-pod snapshot is hundreds of MB.
    pub snapshot: Arc<Snapshot>,
    pub shapes: Arc<Shapes>,
    /// Node indices in Karpenter's order: initialized first, then by name.
    pub node_order: Vec<usize>,
    /// Each node's position in `node_order`.
    pub order_pos: Vec<usize>,
    /// Requests of every snapshot pod (same indices as `snapshot.pods`), as
    /// [`pod_requests`] gives them (no volume attachments). Computed once: a pod's containers
    /// live on the heap, and the consolidation pass's setup walked them six times, a third of
    /// its last-level-cache misses at 5,000 nodes (callgrind, `benches/README.md`).
    pub requests: Vec<Resources>,
    /// Node indices by name, so removing candidates does not scan the cluster.
    pub by_name: HashMap<String, Vec<usize>>,
    /// The nodes' hostname domains, numbered: hostname groups count by number.
    pub hosts: Arc<DomainIds>,
    /// Each node's number in `hosts` (same indices as `snapshot.nodes`).
    pub host_of: Vec<u32>,
    /// What the scheduler derives from this cluster once for every simulation on it.
    pub(crate) memo: crate::scheduler::Memo,
}

/// One existing or in-flight node.
#[derive(Debug, Clone)]
pub struct NodeState {
    pub used: Resources,
    pub allocatable: Resources,
    pub ports: BTreeSet<(Protocol, u16, String)>,
    pub removed: bool,
    /// Indices of pods on it: snapshot pods (`Bound`) or pods placed during a run (`Extra`).
    /// Shared between states until a pod lands here: a state copies a chunk of 64 nodes to
    /// change one, and copying every node's list with it was a twentieth of a consolidation
    /// simulation (`benches/README.md`, "Scale, round 10").
    pub pods: Arc<Vec<PodSlot>>,
}

pub use crate::chunked::Chunked;

/// The nodes of a state.
pub type Nodes = Chunked<NodeState>;

/// Where a pod lives in the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodSlot {
    Bound(usize),
    Extra(usize),
}

/// A pod that [`ClusterState::evict_nodes`] made pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    /// Where the state holds it.
    pub slot: PodSlot,
    /// The index of the node it left.
    pub node: usize,
}

/// A pod in a slot, held apart from the state (the state can change meanwhile): a
/// consolidation simulation hands evicted pods to the scheduler this way, without copies.
#[derive(Debug)]
pub enum SlotPod {
    Bound(Arc<Base>, usize),
    Extra(Arc<Pod>),
}

impl std::ops::Deref for SlotPod {
    type Target = Pod;

    fn deref(&self) -> &Pod {
        match self {
            SlotPod::Bound(base, i) => &base.snapshot.pods[*i],
            SlotPod::Extra(p) => p,
        }
    }
}

impl std::borrow::Borrow<Pod> for SlotPod {
    fn borrow(&self) -> &Pod {
        self
    }
}

/// Scheduling state of a cluster.
#[derive(Debug, Clone)]
pub struct ClusterState {
    pub base: Arc<Base>,
    pub nodes: Nodes,
    /// Copied on write: a simulation copies only the groups its pods change.
    pub groups: Vec<Arc<Group>>,
    /// Shared between clones until one makes a group: a simulation clones the state (twice
    /// when its pods have affinity or spread terms, see `scheduler::schedule_until_plan_holds`)
    /// and rarely adds a group; copying the keys for that second clone made the 5,000-node
    /// consolidation pass 8-20% slower (`benches/README.md`, round 7).
    group_index: Arc<HashMap<GroupKey, usize>>,
    /// The groups by the labels their selectors need, for placing and evicting pods.
    lookup: Arc<GroupLookup>,
    /// Pods placed during runs on this state (pending pods that landed on existing nodes).
    /// Shared between clones (a consolidation's incremental search clones a state that holds
    /// every pod moved so far once per step).
    pub extra_pods: Chunked<Arc<Pod>>,
    /// Pods pinned to domains on new nodes, for groups made later.
    pinned: Vec<Pinned>,
    /// Indices of the removed nodes (marked for deletion or removed as candidates), so that
    /// a simulation can correct shared per-cluster facts without scanning every node. Shared
    /// in chunks: a consolidation's greedy search clones a state that has removed up to a
    /// tenth of the cluster once per step.
    removed_nodes: Chunked<usize>,
    /// Free room per block of `node_order`, for the first-fit scan.
    free_room: FreeRoom,
}

/// A pod pinned to domains on a new node: only what group selection and ownership read (a
/// whole `Pod` per pinned pod was a tenth of a 20,000-pod run's peak memory). Replicas are
/// pinned one after another with equal labels and terms, and mostly to the same domains, so
/// both parts are shared with the previous pod's when equal (16 MB of a 100,000-pod run
/// otherwise, and copied again by every clone of the state).
#[derive(Debug, Clone)]
struct Pinned {
    who: Arc<PinnedPod>,
    /// Topology key -> domain, sorted by key.
    pins: Arc<[(String, String)]>,
}

#[derive(Debug, PartialEq)]
struct PinnedPod {
    namespace: String,
    labels: crate::model::Labels,
    /// `None` when the pod has no pod (anti-)affinity terms.
    terms: Option<Box<(crate::model::PodAffinity, crate::model::PodAffinity)>>,
}

impl Pinned {
    fn pin(&self, key: &str) -> Option<&String> {
        self.pins.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// Numbers the nodes' hostname domains.
fn number_hosts(nodes: &[Node]) -> (Arc<DomainIds>, Vec<u32>) {
    let ids = DomainIds::from_names(
        nodes
            .iter()
            .filter_map(|n| node_domain(n, labels::HOSTNAME)),
    );
    let of = nodes
        .iter()
        .map(|n| {
            node_domain(n, labels::HOSTNAME)
                .and_then(|d| ids.id(d))
                .unwrap_or(u32::MAX)
        })
        .collect();
    (Arc::new(ids), of)
}

/// The domain of a node for a topology key (hostname falls back to the node name).
pub fn node_domain<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    match node.labels.get(key) {
        Some(v) => Some(v.as_str()),
        None if key == labels::HOSTNAME => Some(node.name.as_str()),
        None => None,
    }
}

fn port_key(p: &HostPort) -> (Protocol, u16, String) {
    (p.protocol, p.port, p.host_ip.clone().unwrap_or_default())
}

/// Whether two host ports conflict (same protocol and port; a wildcard IP conflicts with all).
pub fn ports_conflict(a: &(Protocol, u16, String), b: &(Protocol, u16, String)) -> bool {
    let wild = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
    a.0 == b.0 && a.1 == b.1 && (wild(&a.2) || wild(&b.2) || a.2 == b.2)
}

impl ClusterState {
    /// Builds the state: usage of every node from its bound pods, shapes of every NodePool,
    /// and the inverse anti-affinity groups of bound pods.
    pub fn new(snapshot: &Snapshot) -> ClusterState {
        ClusterState::from_shared(Arc::new(snapshot.clone()))
    }

    /// [`ClusterState::new`] on a snapshot the caller shares instead of one it copies.
    pub fn from_shared(snapshot: Arc<Snapshot>) -> ClusterState {
        let csi_drivers: BTreeSet<String> = snapshot
            .pods
            .iter()
            .flat_map(|p| p.volumes.iter().filter_map(|v| v.csi_driver.clone()))
            .collect();
        let mut existing_capacity: BTreeMap<String, Resources> = BTreeMap::new();
        for n in &snapshot.nodes {
            if let Some(pool) = n
                .nodepool
                .clone()
                .or_else(|| n.labels.get(labels::NODEPOOL).cloned())
            {
                existing_capacity
                    .entry(pool)
                    .or_default()
                    .add_assign(&n.capacity.clone().with_extended("nodes", 1));
            }
        }
        let shapes = Shapes::build_shared(&snapshot, &existing_capacity, &csi_drivers);
        let requests: Vec<Resources> = snapshot.pods.par_iter().map(|p| pod_requests(p)).collect();
        let by_name: BTreeMap<&str, usize> = snapshot
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let mut nodes: Vec<NodeState> = snapshot
            .nodes
            .iter()
            .map(|n| {
                let mut alloc = n.allocatable.clone();
                for d in &csi_drivers {
                    alloc.extended.insert(
                        csi_resource(d),
                        n.csi_limits.get(d).copied().unwrap_or(i64::MAX / 4),
                    );
                }
                NodeState {
                    used: Resources::default(),
                    allocatable: alloc,
                    ports: BTreeSet::new(),
                    removed: n.marked_for_deletion,
                    pods: Arc::default(),
                }
            })
            .collect();
        for (pi, p) in snapshot.pods.iter().enumerate() {
            let Some(ni) = p.node_name.as_deref().and_then(|n| by_name.get(n)) else {
                continue;
            };
            if let (Some(ns), Some(r)) = (nodes.get_mut(*ni), requests.get(pi)) {
                if p.volumes.is_empty() {
                    ns.used.add_assign(r);
                } else {
                    ns.used.add_assign(&with_volumes(r.clone(), p));
                }
                ns.ports.extend(p.host_ports.iter().map(port_key));
                Arc::make_mut(&mut ns.pods).push(PodSlot::Bound(pi));
            }
        }
        let mut node_order: Vec<usize> = (0..snapshot.nodes.len()).collect();
        node_order.sort_by(|a, b| {
            let (na, nb) = (snapshot.nodes.get(*a), snapshot.nodes.get(*b));
            match (na, nb) {
                (Some(na), Some(nb)) => nb
                    .initialized
                    .cmp(&na.initialized)
                    .then(na.name.cmp(&nb.name)),
                _ => a.cmp(b),
            }
        });
        let free_room = FreeRoom::build(node_order.len(), |pos| {
            node_order.get(pos).and_then(|ni| nodes.get(*ni))
        });
        let mut order_pos = vec![0; node_order.len()];
        for (pos, ni) in node_order.iter().enumerate() {
            if let Some(slot) = order_pos.get_mut(*ni) {
                *slot = pos;
            }
        }
        let nodes = Nodes::from_vec(nodes);
        let mut index_by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, n) in snapshot.nodes.iter().enumerate() {
            index_by_name.entry(n.name.clone()).or_default().push(i);
        }
        let removed_nodes: Chunked<usize> = snapshot
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.marked_for_deletion)
            .map(|(i, _)| i)
            .collect();
        let (hosts, host_of) = number_hosts(&snapshot.nodes);
        let base = Arc::new(Base {
            memo: crate::scheduler::Memo::default(),
            by_name: index_by_name,
            hosts,
            host_of,
            snapshot,
            shapes,
            node_order,
            order_pos,
            requests,
        });
        let mut state = ClusterState {
            base,
            nodes,
            groups: Vec::new(),
            group_index: Arc::default(),
            lookup: Arc::default(),
            extra_pods: Chunked::default(),
            pinned: Vec::new(),
            removed_nodes,
            free_room,
        };
        // Inverse anti-affinity: required anti-affinity terms of bound pods.
        let snap = Arc::clone(&state.base);
        let mut terms = Vec::new();
        for p in snap
            .snapshot
            .pods
            .iter()
            .filter(|p| p.node_name.is_some() && !p.pod_anti_affinity.required.is_empty())
        {
            let reduced = Pod {
                pod_anti_affinity: crate::model::PodAffinity {
                    required: p.pod_anti_affinity.required.clone(),
                    preferred: Vec::new(),
                },
                ..Pod::default()
            };
            let mut owner = reduced;
            owner.namespace = p.namespace.clone();
            owner.labels = p.labels.clone();
            terms.extend(crate::topology::owned_terms(
                &owner,
                &snap.snapshot.namespaces,
                &[],
            ));
        }
        state.create_groups(&terms);
        state
    }

    /// A copy that shares nothing with `self`: its own snapshot copy, memo, nodes and counts.
    /// Tests run whole decisions with it to check that sharing changes no decision.
    #[cfg(test)]
    pub(crate) fn unshared(&self) -> ClusterState {
        let b = &self.base;
        let base = Arc::new(Base {
            snapshot: Arc::new((*b.snapshot).clone()),
            shapes: Arc::clone(&b.shapes),
            node_order: b.node_order.clone(),
            order_pos: b.order_pos.clone(),
            requests: b.requests.clone(),
            by_name: b.by_name.clone(),
            hosts: Arc::clone(&b.hosts),
            host_of: b.host_of.clone(),
            memo: crate::scheduler::Memo::default(),
        });
        let groups: Vec<Arc<Group>> = self.groups.iter().map(|g| Arc::new(g.unshared())).collect();
        ClusterState {
            base,
            nodes: Nodes::from_vec(self.nodes.iter().cloned().collect()),
            groups,
            group_index: self.group_index.clone(),
            lookup: self.lookup.clone(),
            extra_pods: Chunked::from_vec(
                self.extra_pods
                    .iter()
                    .map(|p| Arc::new((**p).clone()))
                    .collect(),
            ),
            pinned: self.pinned.clone(),
            removed_nodes: self.removed_nodes.clone(),
            free_room: self.free_room.clone(),
        }
    }

    /// Indices of removed nodes, in the order they were removed.
    pub fn removed_nodes(&self) -> impl Iterator<Item = usize> + '_ {
        self.removed_nodes.iter().copied()
    }

    /// Makes every topology count's private changes shared, before this state is cloned
    /// once per simulation (see [`crate::topology::Counts::fold`]).
    pub fn fold_counts(&mut self) {
        for g in &mut self.groups {
            if !g.counts.overlay_is_empty() || !g.owners.overlay_is_empty() {
                let g = Arc::make_mut(g);
                g.counts.fold();
                g.owners.fold();
            }
        }
    }

    /// The node objects.
    pub fn node(&self, i: usize) -> Option<&Node> {
        self.base.snapshot.nodes.get(i)
    }

    /// The pod in a slot (a snapshot pod or one placed during a run).
    pub fn pod_at(&self, slot: PodSlot) -> Option<&Pod> {
        match slot {
            PodSlot::Bound(i) => self.base.snapshot.pods.get(i).map(|p| &**p),
            PodSlot::Extra(i) => self.extra_pods.get(i).map(|p| &**p),
        }
    }

    /// Removes nodes (by name) as consolidation candidates: they take no pods, their pods
    /// leave the topology counts. Returns copies of their pods that would need a new home (not
    /// daemonset pods), as pending pods. [`ClusterState::evict_nodes`] returns where they are
    /// instead of copies.
    pub fn remove_nodes(&mut self, names: &[&str]) -> Vec<Pod> {
        self.evict_nodes(names)
            .into_iter()
            .filter_map(|e| self.pod_at(e.slot).cloned())
            .map(|p| Pod {
                node_name: None,
                ..p
            })
            .collect()
    }

    /// [`ClusterState::remove_nodes`] without copying the pods: each evicted pod (not a
    /// daemonset pod) by its slot, which [`ClusterState::place_evicted`] reuses. A settling
    /// consolidation step moves 15,000 pods at once, and copying each out and copying it in
    /// again was a quarter of the pass's peak memory.
    pub fn evict_nodes(&mut self, names: &[&str]) -> Vec<Evicted> {
        let mut out = Vec::new();
        let base = Arc::clone(&self.base);
        // In node order, as a scan of the cluster would visit them.
        let mut indices: Vec<usize> = names
            .iter()
            .filter_map(|n| base.by_name.get(*n))
            .flatten()
            .copied()
            .collect();
        indices.sort_unstable();
        indices.dedup();
        let mut gone: Vec<usize> = Vec::with_capacity(indices.len());
        for ni in indices {
            let Some(n) = base.snapshot.nodes.get(ni) else {
                continue;
            };
            let Some(ns) = self.nodes.get_mut(ni) else {
                continue;
            };
            if ns.removed {
                continue;
            }
            ns.removed = true;
            self.removed_nodes.push(ni);
            if let Some(&pos) = base.order_pos.get(ni) {
                gone.push(pos);
            }
            let slots = std::mem::take(&mut ns.pods);
            for &slot in slots.iter() {
                let Some(p) = self.shared_pod(slot) else {
                    continue;
                };
                self.count_pod(&p, ni, n, -1);
                if !p.is_daemonset_pod() {
                    out.push(Evicted { slot, node: ni });
                }
            }
        }
        gone.sort_unstable();
        let nodes = &self.nodes;
        let order = &base.node_order;
        self.free_room.forget(&gone, order.len(), |p| {
            order.get(p).and_then(|ni| nodes.get(*ni))
        });
        out
    }

    /// The pod in a slot, held apart from the state so the state can change meanwhile.
    pub fn shared_pod(&self, slot: PodSlot) -> Option<SlotPod> {
        match slot {
            PodSlot::Bound(i) => self
                .base
                .snapshot
                .pods
                .get(i)
                .map(|_| SlotPod::Bound(Arc::clone(&self.base), i)),
            PodSlot::Extra(i) => self.extra_pods.get(i).cloned().map(SlotPod::Extra),
        }
    }

    /// The anti-affinity groups with owners somewhere that select `pod` (their owners keep it
    /// away), in group order.
    pub fn inverse_groups(&self, pod: &Pod) -> Vec<usize> {
        let mut out = Vec::new();
        self.lookup.may_select(&pod.labels, |gi| {
            if self.groups.get(gi).is_some_and(|g| {
                g.kind == Kind::AntiAffinity && !g.owners.is_empty() && g.selects(pod)
            }) {
                out.push(gi);
            }
        });
        out.sort_unstable();
        out
    }

    /// Adds (`by` 1) or takes away (-1, an absent domain staying absent) a pod on `node`
    /// (snapshot node `ni`) in the groups that select it and the anti-affinity groups it owns.
    /// Hostname groups count by the node's number: looking up its hostname label by name for
    /// every group of every pod moved was a tenth of a consolidation simulation
    /// (`benches/README.md`, scale round 12).
    fn count_pod(&mut self, pod: &Pod, ni: usize, node: &Node, by: i32) {
        let base = Arc::clone(&self.base);
        let host = base.host_of.get(ni).copied().filter(|id| *id != u32::MAX);
        // The node's number when `c` (of a group on `key`) keeps hostnames by number, else
        // its domain by name; `None` when the node has no domain for the key.
        let at = |c: &Counts, key: &str| -> Option<Result<u32, &str>> {
            match host {
                Some(id) if key == labels::HOSTNAME && c.uses_ids(&base.hosts) => Some(Ok(id)),
                _ => node_domain(node, key).map(Err),
            }
        };
        let change = |c: &mut Counts, at: Result<u32, &str>| match at {
            Ok(id) => c.change_id(id, by),
            Err(d) if by < 0 => c.decrement(d),
            Err(d) => c.add(d, by),
        };
        let lookup = Arc::clone(&self.lookup);
        let groups = &mut self.groups;
        lookup.may_select(&pod.labels, |gi| {
            if let Some(g) = groups.get_mut(gi)
                && let Some(a) = at(&g.counts, &g.key)
                && g.selects(pod)
                && g.counts_node(&node.labels, &node.taints)
            {
                change(&mut Arc::make_mut(g).counts, a);
            }
        });
        let anti = &pod.pod_anti_affinity;
        if anti.required.is_empty() && anti.preferred.is_empty() {
            return;
        }
        for &gi in lookup.anti_affinity() {
            if let Some(g) = groups.get_mut(gi)
                && let Some(a) = at(&g.owners, &g.key)
                && owns(pod, g)
            {
                change(&mut Arc::make_mut(g).owners, a);
            }
        }
    }

    /// The group of a term, created (and counted over the current state) on first use.
    pub fn group(&mut self, term: &OwnedTerm) -> usize {
        if let Some(i) = self.group_index.get(&term.key) {
            return *i;
        }
        self.create_groups(std::slice::from_ref(term));
        self.group_index.get(&term.key).copied().unwrap_or(0)
    }

    /// Creates the groups of `terms` that do not exist yet, in their order, counting them all
    /// in one pass over the cluster. Each pod is tested only against the groups whose
    /// selector could select it (by one of its `matchLabels`, or every group without any):
    /// a consolidation pass makes every group its bound pods take part in up front, and
    /// testing every pod against every group was a sixth of a 10,000-node pass.
    pub fn create_groups(&mut self, terms: &[OwnedTerm]) {
        let mut made: Vec<Group> = Vec::new();
        let mut sources: Vec<&OwnedTerm> = Vec::new();
        let mut seen: HashSet<&GroupKey> = HashSet::new();
        for t in terms {
            if !self.group_index.contains_key(&t.key) && seen.insert(&t.key) {
                let mut g = Group::new(t);
                if g.key == labels::HOSTNAME {
                    g.counts = Counts::with_ids(Arc::clone(&self.base.hosts));
                    g.owners = Counts::with_ids(Arc::clone(&self.base.hosts));
                }
                made.push(g);
                sources.push(t);
            }
        }
        if made.is_empty() {
            return;
        }
        let mut new_groups = GroupLookup::default();
        for (gi, g) in made.iter().enumerate() {
            new_groups.add(gi, &g.selector, g.kind);
        }
        let mut domains: Vec<BTreeSet<String>> = vec![BTreeSet::new(); made.len()];
        let mut maybe: Vec<usize> = Vec::new();
        let base = Arc::clone(&self.base);
        for (ni, n) in base.snapshot.nodes.iter().enumerate() {
            let Some(ns) = self.nodes.get(ni) else {
                continue;
            };
            if ns.removed {
                continue;
            }
            for (g, set) in made.iter().zip(domains.iter_mut()) {
                if g.kind == Kind::Spread
                    && g.filter.admits(&n.labels, &n.taints)
                    && let Some(d) = node_domain(n, &g.key)
                {
                    set.insert(d.to_string());
                }
            }
            for slot in ns.pods.iter() {
                let Some(p) = self.pod_at(*slot) else {
                    continue;
                };
                maybe.clear();
                new_groups.may_select(&p.labels, |gi| maybe.push(gi));
                for &gi in &maybe {
                    if let Some(g) = made.get_mut(gi)
                        && let Some(d) = node_domain(n, &g.key)
                        && g.selects(p)
                        && g.counts_node(&n.labels, &n.taints)
                    {
                        g.counts.add(d, 1);
                    }
                }
                let anti_terms = &p.pod_anti_affinity;
                if anti_terms.required.is_empty() && anti_terms.preferred.is_empty() {
                    continue;
                }
                for &gi in new_groups.anti_affinity() {
                    if let Some(g) = made.get_mut(gi)
                        && let Some(d) = node_domain(n, &g.key)
                        && owns(p, g)
                    {
                        g.owners.add(d, 1);
                    }
                }
            }
        }
        for g in &mut made {
            for p in &self.pinned {
                if let Some(d) = p.pin(&g.key) {
                    let pod_labels = &p.who.labels;
                    if g.scope.contains(&p.who.namespace) && g.selector.matches(pod_labels) {
                        g.counts.add(d, 1);
                    }
                    if g.kind == Kind::AntiAffinity
                        && p.who
                            .terms
                            .as_deref()
                            .is_some_and(|(a, anti)| owns_terms(a, anti, pod_labels, g))
                    {
                        g.owners.add(d, 1);
                    }
                }
            }
        }
        for ((mut g, set), t) in made.into_iter().zip(domains).zip(sources) {
            g.domains = Arc::new(set);
            Arc::make_mut(&mut self.group_index).insert(t.key.clone(), self.groups.len());
            Arc::make_mut(&mut self.lookup).add(self.groups.len(), &g.selector, g.kind);
            self.groups.push(Arc::new(g));
        }
    }

    /// Records a pod placed on an existing node.
    pub fn place(&mut self, pod: &Pod, node_index: usize, requests: &Resources) {
        if self.base.snapshot.nodes.get(node_index).is_none() {
            return;
        }
        let slot = PodSlot::Extra(self.extra_pods.len());
        self.extra_pods.push(Arc::new(Pod {
            node_name: self.node(node_index).map(|n| n.name.clone()),
            ..pod.clone()
        }));
        self.record(pod, slot, node_index, requests);
    }

    /// Places an evicted pod ([`ClusterState::evict_nodes`]) on an existing node under the
    /// slot it already has, unchanged: nothing is copied. (A placed pod's `node_name` is not
    /// read; the node's slot list says where it is.)
    pub fn place_evicted(&mut self, slot: PodSlot, node_index: usize, requests: &Resources) {
        if self.base.snapshot.nodes.get(node_index).is_none() {
            return;
        }
        if let Some(p) = self.shared_pod(slot) {
            self.record(&p, slot, node_index, requests);
        }
    }

    /// Counts a placed pod in the topology groups and the node's usage.
    fn record(&mut self, pod: &Pod, slot: PodSlot, node_index: usize, requests: &Resources) {
        let base = Arc::clone(&self.base);
        let Some(node) = base.snapshot.nodes.get(node_index) else {
            return;
        };
        self.count_pod(pod, node_index, node, 1);
        if let Some(ns) = self.nodes.get_mut(node_index) {
            ns.used.add_assign(requests);
            ns.ports.extend(pod.host_ports.iter().map(port_key));
            Arc::make_mut(&mut ns.pods).push(slot);
        }
        if let Some(&pos) = base.order_pos.get(node_index) {
            let nodes = &self.nodes;
            let order = &base.node_order;
            self.free_room.refresh(pos, order.len(), requests, |p| {
                order.get(p).and_then(|ni| nodes.get(*ni))
            });
        }
    }

    /// From `pos` (the start of a block of the node order), the start of the first block
    /// whose nodes may have room for `requests` ([`FreeRoom`]); the first-fit scan skips
    /// everything before it. The order's length or more when no block may.
    pub fn next_block_may_fit(&self, pos: usize, requests: &Resources) -> usize {
        self.free_room
            .next_may_fit(pos, self.base.node_order.len(), requests)
    }

    /// Records a pod pinned to domains on a new node (hostname is not known yet).
    pub fn pin(&mut self, pod: &Pod, pins: BTreeMap<String, String>) {
        for g in &mut self.groups {
            let Some(d) = pins.get(&g.key) else { continue };
            let counted = g.selects(pod);
            let owner = g.kind == Kind::AntiAffinity && owns(pod, g);
            if !counted && !owner {
                continue;
            }
            let g = Arc::make_mut(g);
            if counted {
                g.counts.add(d, 1);
            }
            if owner {
                g.owners.add(d, 1);
            }
        }
        if pins.is_empty() {
            // No group made later can count it.
            return;
        }
        let has_terms = !pod.pod_affinity.required.is_empty()
            || !pod.pod_affinity.preferred.is_empty()
            || !pod.pod_anti_affinity.required.is_empty()
            || !pod.pod_anti_affinity.preferred.is_empty();
        let last = self.pinned.last();
        let who = match last.map(|l| &l.who) {
            Some(w)
                if w.namespace == pod.namespace
                    && w.labels == pod.labels
                    && match &w.terms {
                        Some(t) => {
                            has_terms && t.0 == pod.pod_affinity && t.1 == pod.pod_anti_affinity
                        }
                        None => !has_terms,
                    } =>
            {
                Arc::clone(w)
            }
            _ => Arc::new(PinnedPod {
                namespace: pod.namespace.clone(),
                labels: pod.labels.clone(),
                terms: has_terms
                    .then(|| Box::new((pod.pod_affinity.clone(), pod.pod_anti_affinity.clone()))),
            }),
        };
        let pins = match last.map(|l| &l.pins) {
            Some(p) if p.iter().map(|(k, v)| (k, v)).eq(pins.iter()) => Arc::clone(p),
            _ => pins.into_iter().collect(),
        };
        self.pinned.push(Pinned { who, pins });
    }

    /// Whether a pod's host ports conflict with a node's.
    pub fn port_conflict(&self, node_index: usize, pod: &Pod) -> bool {
        let Some(ns) = self.nodes.get(node_index) else {
            return true;
        };
        pod.host_ports
            .iter()
            .map(port_key)
            .any(|p| ns.ports.iter().any(|q| ports_conflict(&p, q)))
    }
}

/// Whether `pod` carries the (anti-)affinity term of `group` (required or preferred).
pub fn owns(pod: &Pod, group: &Group) -> bool {
    owns_terms(
        &pod.pod_affinity,
        &pod.pod_anti_affinity,
        &pod.labels,
        group,
    )
}

/// [`owns`] on the parts of a pod it reads.
fn owns_terms(
    affinity: &crate::model::PodAffinity,
    anti_affinity: &crate::model::PodAffinity,
    pod_labels: &impl crate::model::LabelMap,
    group: &Group,
) -> bool {
    let terms = match group.kind {
        Kind::AntiAffinity => anti_affinity,
        Kind::Affinity => affinity,
        Kind::Spread => return false,
    };
    terms
        .required
        .iter()
        .chain(terms.preferred.iter().map(|w| &w.term))
        .any(|t| {
            t.topology_key == group.key
                && t.label_selector
                    .with_match_label_keys(&t.match_label_keys, pod_labels)
                    == *group.selector
        })
}

/// Adds per-driver volume counts to a pod's requests.
pub fn with_volumes(mut r: Resources, pod: &Pod) -> Resources {
    for v in &pod.volumes {
        if let Some(d) = &v.csi_driver {
            *r.extended.entry(csi_resource(d)).or_insert(0) += 1;
        }
    }
    r
}
