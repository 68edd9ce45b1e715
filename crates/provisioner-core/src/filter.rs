//! The kube-scheduler's filter: may this pod bind to this node now?
//!
//! One implementation of the question, shared by every caller that binds pods the way the
//! kube-scheduler does (the simulator's binding, its Cluster-Autoscaler baseline). It rests
//! on the same pieces as the core's scheduler: label and requirement matching
//! ([`crate::requirements`]), taints ([`crate::taints`]), request arithmetic
//! ([`crate::resources`]), namespace scopes ([`crate::selectors`]) and topology groups
//! ([`crate::topology`]: the term -> group mapping, counting and skew rules), so a spread,
//! an affinity or an anti-affinity means the same thing here as in provisioning.
//!
//! What differs from provisioning is only what the kube-scheduler reads: required node
//! affinity is all ORed terms (Karpenter reads the first), preferred terms and
//! `ScheduleAnyway` spreads are scores, not filters, and a hostname spread's minimum is over
//! the existing nodes unless the caller says new nodes may open ([`Context::potential`]).
//!
//! Usage: [`PodFilter::new`] once per pod and cluster state (it counts the topology groups
//! over the cluster), then [`PodFilter::allows`] per candidate node.

use std::collections::{BTreeMap, BTreeSet};

use foldhash::{HashMap, HashMapExt};

use crate::model::{
    HostPort, NodeSelectorTerm, Pod, PodAffinity, PodAffinityTerm, Requirement, Resources, Taint,
    WhenUnsatisfiable, labels,
};
use crate::requirements::terms_match;
use crate::state::ports_conflict;
use crate::taints::tolerates_all;
use crate::topology::{Group, GroupKey, Kind, owned_terms};

/// A node as the filter sees it.
#[derive(Debug, Clone, Default)]
pub struct NodeView {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    /// Requests of everything bound (daemonset pods included) plus pods nominated to it.
    pub used: Resources,
    /// The pods bound or nominated to it (for affinity, spread and host ports).
    pub pods: Vec<PodMark>,
    /// Takes new pods (ready, not cordoned, not being disrupted).
    pub schedulable: bool,
    /// Exists at all (its pods count, it is a topology domain).
    pub live: bool,
    /// How many of `pods` carry required pod anti-affinity, so that the inverse check skips
    /// nodes without any (kept by [`NodeView::add_pod`] / [`NodeView::remove_pod`]).
    pub anti_affinity_owners: u32,
}

/// A pod as seen by another pod's filter.
#[derive(Debug, Clone, Default)]
pub struct PodMark {
    /// The caller's id for the pod (for removal).
    pub id: usize,
    pub namespace: String,
    pub labels: crate::model::Labels,
    pub daemon: bool,
    /// Its required pod anti-affinity (kept away from pods it selects, and they from it).
    pub anti_affinity: Vec<PodAffinityTerm>,
    pub host_ports: Vec<HostPort>,
}

impl PodMark {
    /// The mark of a pod, with the caller's id.
    pub fn of(id: usize, pod: &Pod) -> PodMark {
        PodMark {
            id,
            namespace: pod.namespace.clone(),
            labels: pod.labels.clone(),
            daemon: pod.is_daemonset_pod(),
            anti_affinity: pod.pod_anti_affinity.required.clone(),
            host_ports: pod.host_ports.clone(),
        }
    }
}

impl NodeView {
    /// An empty, live, schedulable node.
    pub fn new(
        name: &str,
        labels: BTreeMap<String, String>,
        taints: Vec<Taint>,
        allocatable: Resources,
    ) -> NodeView {
        NodeView {
            name: name.to_string(),
            labels,
            taints,
            allocatable,
            schedulable: true,
            live: true,
            ..NodeView::default()
        }
    }

    /// Records a pod on the node.
    pub fn add_pod(&mut self, mark: PodMark, requests: &Resources) {
        self.used.add_assign(requests);
        if !mark.anti_affinity.is_empty() {
            self.anti_affinity_owners += 1;
        }
        self.pods.push(mark);
    }

    /// Removes the pod with this id (if present) and its requests.
    pub fn remove_pod(&mut self, id: usize, requests: &Resources) {
        if let Some(i) = self.pods.iter().position(|m| m.id == id) {
            let m = self.pods.swap_remove(i);
            if !m.anti_affinity.is_empty() {
                self.anti_affinity_owners = self.anti_affinity_owners.saturating_sub(1);
            }
            self.used = self.used.sub(requests);
        }
    }

    /// The node's domain for a topology key (hostname falls back to the node name).
    pub fn domain(&self, key: &str) -> Option<&str> {
        match self.labels.get(key) {
            Some(v) => Some(v.as_str()),
            None if key == labels::HOSTNAME => Some(self.name.as_str()),
            None => None,
        }
    }
}

/// What the filter needs besides the nodes.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Namespace labels, for pod affinity terms' namespace selectors.
    pub namespaces: &'a BTreeMap<String, BTreeMap<String, String>>,
    /// Labels and taints of nodes that could still be created (an autoscaler's node groups).
    /// Their domains count for topology spread with zero pods, and a hostname spread's
    /// minimum is zero when any exists. Empty for the kube-scheduler binding to what exists.
    pub potential: &'a [(BTreeMap<String, String>, Vec<Taint>)],
}

/// Whether a pod has constraints that involve other pods (required affinity/anti-affinity,
/// `DoNotSchedule` spread).
pub fn has_inter_pod_constraints(pod: &Pod) -> bool {
    pod.topology_spread
        .iter()
        .any(|t| t.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
        || !pod.pod_affinity.required.is_empty()
        || !pod.pod_anti_affinity.required.is_empty()
}

/// The kube-scheduler's node affinity as ORed terms: the nodeSelector ANDed into each
/// required term (or alone when there are none).
pub fn node_affinity_terms(pod: &Pod) -> Vec<NodeSelectorTerm> {
    let selector: NodeSelectorTerm = pod
        .node_selector
        .iter()
        .map(|(k, v)| Requirement::new_in(k, &[v.as_str()]))
        .collect();
    if pod.required_node_affinity.is_empty() {
        return if selector.is_empty() {
            Vec::new()
        } else {
            vec![selector]
        };
    }
    pod.required_node_affinity
        .iter()
        .map(|t| {
            let mut t = t.clone();
            t.extend(selector.iter().cloned());
            t
        })
        .collect()
}

/// Node-local checks (NodeUnschedulable, NodeAffinity with nodeSelector, volume node
/// affinity, TaintToleration, NodeResourcesFit, NodePorts): everything that does not depend
/// on other nodes.
pub fn fits_node(pod: &Pod, requests: &Resources, node: &NodeView) -> bool {
    node.schedulable
        && node_selector_matches(pod, &node.labels)
        && terms_match(&pod.required_node_affinity, &node.labels)
        && pod
            .volumes
            .iter()
            .all(|v| terms_match(&v.node_affinity, &node.labels))
        && tolerates_all(&node.taints, &pod.tolerations, false)
        && node.used.fits_with(requests, &node.allocatable)
        && !ports_taken(pod, node)
}

/// Whether a node with `labels` carries every label of the pod's `nodeSelector`.
pub fn node_selector_matches(pod: &Pod, labels: &BTreeMap<String, String>) -> bool {
    pod.node_selector
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
}

fn ports_taken(pod: &Pod, node: &NodeView) -> bool {
    if pod.host_ports.is_empty() {
        return false;
    }
    let key = |p: &HostPort| (p.protocol, p.port, p.host_ip.clone().unwrap_or_default());
    pod.host_ports.iter().any(|a| {
        let a = key(a);
        node.pods
            .iter()
            .flat_map(|m| m.host_ports.iter())
            .any(|b| ports_conflict(&a, &key(b)))
    })
}

/// One of the pod's own terms, counted over the cluster.
#[derive(Debug, Clone)]
struct Owned {
    group: Group,
    self_selected: bool,
    eligible: BTreeSet<String>,
}

/// A pod's filter over one cluster state: its topology groups counted once.
#[derive(Debug, Clone)]
pub struct PodFilter<'p> {
    pod: &'p Pod,
    requests: &'p Resources,
    owned: Vec<Owned>,
    /// Other pods' anti-affinity groups that select this pod, with their owners counted.
    inverse: Vec<Group>,
    /// The identity of each of `inverse`, to find a group again when an owner is placed.
    inverse_keys: Vec<GroupKey>,
    /// Placed pods' anti-affinity groups that select this pod, per spec seen by
    /// [`PodFilter::note_placed`]: replicas share a spec, and working their terms out again
    /// for every placement was most of what updating a filter cost.
    placed_specs: Vec<(PodMark, Vec<(GroupKey, Group)>)>,
    new_hosts: bool,
}

fn selects_mark(g: &Group, m: &PodMark) -> bool {
    g.scope.contains(&m.namespace) && g.selector.matches(&m.labels)
}

impl<'p> PodFilter<'p> {
    /// Counts the pod's topology groups and the anti-affinity of pods already placed.
    pub fn new(
        pod: &'p Pod,
        requests: &'p Resources,
        nodes: &[NodeView],
        ctx: &Context<'_>,
    ) -> PodFilter<'p> {
        let mut owned = Vec::new();
        let new_hosts = !ctx.potential.is_empty();
        if has_inter_pod_constraints(pod) {
            // Only what filters: required terms and DoNotSchedule spreads.
            let reduced = Pod {
                namespace: pod.namespace.clone(),
                labels: pod.labels.clone(),
                topology_spread: pod
                    .topology_spread
                    .iter()
                    .filter(|t| t.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
                    .cloned()
                    .collect(),
                pod_affinity: PodAffinity {
                    required: pod.pod_affinity.required.clone(),
                    preferred: Vec::new(),
                },
                pod_anti_affinity: PodAffinity {
                    required: pod.pod_anti_affinity.required.clone(),
                    preferred: Vec::new(),
                },
                tolerations: pod.tolerations.clone(),
                ..Pod::default()
            };
            let affinity = node_affinity_terms(pod);
            for t in owned_terms(&reduced, ctx.namespaces, &affinity) {
                let mut g = Group::new(&t);
                let mut eligible = BTreeSet::new();
                // When new hosts may open, no hostname rule reads the eligible domains (the
                // spread minimum is then 0, affinity looks at any selected pod): skip
                // collecting one per node.
                let collect = !(new_hosts && g.key == labels::HOSTNAME);
                for n in nodes.iter().filter(|n| n.live) {
                    let Some(d) = n.domain(&g.key) else { continue };
                    let counted = g.counts_node(&n.labels, &n.taints);
                    // Look before inserting: most nodes repeat a domain already in.
                    if collect && (g.kind != Kind::Spread || counted) && !eligible.contains(d) {
                        eligible.insert(d.to_string());
                    }
                    if !counted {
                        continue;
                    }
                    let k = n.pods.iter().filter(|m| selects_mark(&g, m)).count() as i32;
                    if k > 0 {
                        g.counts.add(d, k);
                    }
                }
                if g.kind == Kind::Spread && collect {
                    for (l, taints) in ctx.potential {
                        if let Some(d) = l.get(&g.key)
                            && !eligible.contains(d)
                            && g.filter.admits(l, taints)
                        {
                            eligible.insert(d.clone());
                        }
                    }
                }
                let self_selected = g.selects(pod);
                owned.push(Owned {
                    group: g,
                    self_selected,
                    eligible,
                });
            }
        }
        let (inverse_keys, inverse) = inverse_groups(pod, nodes, ctx).into_iter().unzip();
        PodFilter {
            pod,
            requests,
            owned,
            inverse,
            inverse_keys,
            placed_specs: Vec::new(),
            new_hosts,
        }
    }

    /// Keeps the filter true after `mark` was placed on `node` (a live node the filter
    /// knows, through [`PodFilter::new`] or [`PodFilter::note_node`]), instead of counting
    /// the whole cluster again: a caller placing many pods of one spec (the
    /// Cluster-Autoscaler estimate) builds one filter and updates it, which is the same as
    /// building a new one after every placement.
    pub fn note_placed(&mut self, node: &NodeView, mark: &PodMark, ctx: &Context<'_>) {
        if !node.live {
            return;
        }
        for o in &mut self.owned {
            let g = &mut o.group;
            if !g.counts_node(&node.labels, &node.taints) || !selects_mark(g, mark) {
                continue;
            }
            if let Some(d) = node.domain(&g.key) {
                g.counts.add(d, 1);
            }
        }
        if mark.anti_affinity.is_empty() {
            return;
        }
        let same_spec = |m: &PodMark| {
            m.namespace == mark.namespace
                && m.anti_affinity == mark.anti_affinity
                && m.labels == mark.labels
        };
        let si = match self.placed_specs.iter().position(|(m, _)| same_spec(m)) {
            Some(si) => si,
            None => {
                let groups = mark_groups(self.pod, mark, ctx);
                self.placed_specs.push((mark.clone(), groups));
                self.placed_specs.len() - 1
            }
        };
        let Some((_, groups)) = self.placed_specs.get(si) else {
            return;
        };
        for (key, g) in groups {
            let Some(d) = node.domain(&key.key) else {
                continue;
            };
            let i = match self.inverse_keys.iter().position(|k| k == key) {
                Some(i) => i,
                None => {
                    self.inverse_keys.push(key.clone());
                    self.inverse.push(g.clone());
                    self.inverse.len() - 1
                }
            };
            if let Some(g) = self.inverse.get_mut(i) {
                g.owners.add(d, 1);
            }
        }
    }

    /// Keeps the filter true after an empty `node` joined the cluster it was built over.
    pub fn note_node(&mut self, node: &NodeView) {
        if !node.live {
            return;
        }
        for o in &mut self.owned {
            let g = &o.group;
            if self.new_hosts && g.key == labels::HOSTNAME {
                continue;
            }
            if g.kind == Kind::Spread && !g.counts_node(&node.labels, &node.taints) {
                continue;
            }
            if let Some(d) = node.domain(&g.key)
                && !o.eligible.contains(d)
            {
                o.eligible.insert(d.to_string());
            }
        }
    }

    /// A filter with nothing counted, for callers that know no placed pod has required
    /// anti-affinity and the pod has no inter-pod constraints: then only node-local checks
    /// apply and counting over the cluster would find nothing.
    pub fn local(pod: &'p Pod, requests: &'p Resources) -> PodFilter<'p> {
        PodFilter {
            pod,
            requests,
            owned: Vec::new(),
            inverse: Vec::new(),
            inverse_keys: Vec::new(),
            placed_specs: Vec::new(),
            new_hosts: false,
        }
    }

    /// May the pod bind to `node` (one of the nodes the filter was built over, or a node
    /// about to be created with these labels)?
    pub fn allows(&self, node: &NodeView) -> bool {
        fits_node(self.pod, self.requests, node) && self.allows_topology(node)
    }

    /// The inter-pod part of [`PodFilter::allows`] alone.
    pub fn allows_topology(&self, node: &NodeView) -> bool {
        self.owned.iter().all(|o| {
            o.group.allows_in(
                node.domain(&o.group.key),
                o.self_selected,
                &o.eligible,
                self.new_hosts,
            )
        }) && self
            .inverse
            .iter()
            .all(|g| g.inverse_allows(node.domain(&g.key)))
    }
}

/// The groups of a placed pod's required anti-affinity terms that select `pod`.
fn mark_groups(pod: &Pod, mark: &PodMark, ctx: &Context<'_>) -> Vec<(GroupKey, Group)> {
    let owner = Pod {
        namespace: mark.namespace.clone(),
        labels: mark.labels.clone(),
        pod_anti_affinity: PodAffinity {
            required: mark.anti_affinity.clone(),
            preferred: Vec::new(),
        },
        ..Pod::default()
    };
    owned_terms(&owner, ctx.namespaces, &[])
        .into_iter()
        .map(|t| (t.key.clone(), Group::new(&t)))
        .filter(|(_, g)| g.selects(pod))
        .collect()
}

/// Required anti-affinity groups of placed pods that select `pod`, with owners per domain,
/// each with its identity.
fn inverse_groups(pod: &Pod, nodes: &[NodeView], ctx: &Context<'_>) -> Vec<(GroupKey, Group)> {
    // The terms of a mark depend only on its namespace, labels and anti-affinity, and the
    // anti-affinity pods of a cluster are mostly replicas of a few specs: work out each
    // spec's groups once per call (the Cluster-Autoscaler baseline builds a filter per pod
    // per node group, and building every mark's terms anew was most of its time).
    let mut index: HashMap<GroupKey, usize> = HashMap::new();
    let mut groups: Vec<Group> = Vec::new();
    // Per spec seen: a mark of it, and its terms that select `pod` as (group, topology key).
    let mut specs: Vec<(&PodMark, Vec<(usize, String)>)> = Vec::new();
    for n in nodes
        .iter()
        .filter(|n| n.live && n.anti_affinity_owners > 0)
    {
        for m in n.pods.iter().filter(|m| !m.anti_affinity.is_empty()) {
            let same = |s: &&(&PodMark, Vec<(usize, String)>)| {
                s.0.namespace == m.namespace
                    && s.0.anti_affinity == m.anti_affinity
                    && s.0.labels == m.labels
            };
            let si = match specs.iter().position(|s| same(&s)) {
                Some(si) => si,
                None => {
                    let mut terms = Vec::new();
                    for (key, g) in mark_groups(pod, m, ctx) {
                        let topology_key = key.key.clone();
                        let gi = *index.entry(key).or_insert_with(|| {
                            groups.push(g);
                            groups.len() - 1
                        });
                        terms.push((gi, topology_key));
                    }
                    specs.push((m, terms));
                    specs.len() - 1
                }
            };
            let Some((_, terms)) = specs.get(si) else {
                continue;
            };
            for (gi, key) in terms {
                let Some(d) = n.domain(key) else {
                    continue;
                };
                if let Some(g) = groups.get_mut(*gi) {
                    g.owners.add(d, 1);
                }
            }
        }
    }
    // In the order they were first met (nodes in order, then their pods).
    let mut keys: Vec<Option<GroupKey>> = vec![None; groups.len()];
    for (key, gi) in index {
        if let Some(slot) = keys.get_mut(gi) {
            *slot = Some(key);
        }
    }
    keys.into_iter()
        .zip(groups)
        .filter_map(|(k, g)| Some((k?, g)))
        .collect()
}

/// Whether `pod` may bind to `nodes[index]`: [`PodFilter::new`] + [`PodFilter::allows`] for
/// a single question (callers checking many nodes keep the filter).
pub fn may_bind(
    pod: &Pod,
    requests: &Resources,
    index: usize,
    nodes: &[NodeView],
    ctx: &Context<'_>,
) -> bool {
    nodes
        .get(index)
        .is_some_and(|n| PodFilter::new(pod, requests, nodes, ctx).allows(n))
}

/// Namespace labels the API server sets on every namespace (`kubernetes.io/metadata.name`),
/// for callers that know namespaces only by the pods in them.
pub fn default_namespace_labels<'a>(
    namespaces: impl IntoIterator<Item = &'a str>,
) -> BTreeMap<String, BTreeMap<String, String>> {
    namespaces
        .into_iter()
        .map(|ns| {
            (
                ns.to_string(),
                BTreeMap::from([(labels::NAMESPACE_NAME.to_string(), ns.to_string())]),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        InclusionPolicy, LabelSelector, TaintEffect, Toleration, TopologySpreadConstraint,
    };

    const GPU: &str = "nvidia.com/gpu";

    fn node(name: &str, zone: &str, cpu: i64) -> NodeView {
        NodeView::new(
            name,
            BTreeMap::from([
                (labels::ZONE.to_string(), zone.to_string()),
                (labels::HOSTNAME.to_string(), name.to_string()),
            ]),
            vec![],
            Resources::with_pods(cpu, 8 << 30, 110),
        )
    }

    fn pod(cpu: i64, app: &str) -> Pod {
        Pod::new("default", "p", cpu, 1 << 30).label("app", app)
    }

    fn place(n: &mut NodeView, id: usize, p: &Pod) {
        n.add_pod(PodMark::of(id, p), &crate::resources::pod_requests(p));
    }

    fn spread(key: &str, app: &str) -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew: 1,
            topology_key: key.into(),
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            label_selector: LabelSelector::from_labels([("app", app)]),
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: vec![],
        }
    }

    fn term(app: &str, key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: LabelSelector::from_labels([("app", app)]),
            namespaces: vec![],
            namespace_selector: None,
            topology_key: key.into(),
            match_label_keys: vec![],
        }
    }

    fn none() -> BTreeMap<String, BTreeMap<String, String>> {
        BTreeMap::new()
    }

    /// The pod may bind to `nodes[i]` in a binding-only context (no potential nodes).
    fn ok(p: &Pod, nodes: &[NodeView], i: usize) -> bool {
        let ns = none();
        let ctx = Context {
            namespaces: &ns,
            potential: &[],
        };
        may_bind(p, &crate::resources::pod_requests(p), i, nodes, &ctx)
    }

    /// Specs with every kind of counted term: zone spread and hostname anti-affinity of their
    /// own (web), zone anti-affinity that selects web (db), zone affinity to db (cache), and
    /// a web pod that owns nothing but counts in web's groups.
    fn specs() -> Vec<Pod> {
        let mut web = pod(100, "web");
        web.topology_spread = vec![spread(labels::ZONE, "web")];
        web.pod_anti_affinity.required = vec![term("web", labels::HOSTNAME)];
        let mut db = pod(100, "db");
        db.pod_anti_affinity.required = vec![term("web", labels::ZONE)];
        let mut cache = pod(100, "cache");
        cache.pod_affinity.required = vec![term("db", labels::ZONE)];
        vec![web, db, cache, pod(100, "web")]
    }

    proptest::proptest! {
        /// A filter updated after each placement and node addition answers as one built anew
        /// over the changed cluster, on every node and on nodes about to be created.
        #[test]
        fn an_updated_filter_answers_as_a_new_one(
            steps in proptest::collection::vec((0usize..5, 0usize..4, 0usize..16), 1..40),
            potential_nodes in proptest::bool::ANY,
        ) {
            let ns = none();
            let zones = ["a", "b", "c"];
            let potential: Vec<(BTreeMap<String, String>, Vec<Taint>)> = if potential_nodes {
                zones
                    .iter()
                    .map(|z| (BTreeMap::from([(labels::ZONE.to_string(), z.to_string())]), vec![]))
                    .collect()
            } else {
                vec![]
            };
            let ctx = Context { namespaces: &ns, potential: &potential };
            let specs = specs();
            let mut nodes = vec![node("n0", "a", 64_000), node("n1", "b", 64_000)];
            place(&mut nodes[1], 0, &specs[1]);
            let reqs: Vec<Resources> = specs.iter().map(crate::resources::pod_requests).collect();
            let mut filters: Vec<PodFilter<'_>> = specs
                .iter()
                .zip(&reqs)
                .map(|(p, r)| PodFilter::new(p, r, &nodes, &ctx))
                .collect();
            for (id, (action, spec, target)) in steps.into_iter().enumerate() {
                if action == 0 {
                    let name = format!("n{}", nodes.len());
                    let n = node(&name, zones[target % 3], 64_000);
                    for f in &mut filters {
                        f.note_node(&n);
                    }
                    nodes.push(n);
                } else {
                    let ni = target % nodes.len();
                    let mark = PodMark::of(id + 1, &specs[spec]);
                    for f in &mut filters {
                        f.note_placed(&nodes[ni], &mark, &ctx);
                    }
                    nodes[ni].add_pod(mark, &reqs[spec]);
                }
                let fresh_nodes: Vec<NodeView> =
                    zones.iter().map(|z| node(&format!("new-{z}"), z, 64_000)).collect();
                for (si, f) in filters.iter().enumerate() {
                    let built = PodFilter::new(&specs[si], &reqs[si], &nodes, &ctx);
                    for n in nodes.iter().chain(&fresh_nodes) {
                        proptest::prop_assert_eq!(
                            f.allows(n),
                            built.allows(n),
                            "spec {} on {}", si, n.name
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn resources_and_taints() {
        let mut n = node("n1", "a", 2000);
        let p = pod(1500, "a");
        let req = crate::resources::pod_requests(&p);
        assert!(fits_node(&p, &req, &n));
        n.used.cpu_milli = 1000;
        assert!(!fits_node(&p, &req, &n));
        n.used.cpu_milli = 0;
        n.taints
            .push(Taint::new("x", None, TaintEffect::NoSchedule));
        assert!(!fits_node(&p, &req, &n));
        n.taints = vec![Taint::new("x", None, TaintEffect::PreferNoSchedule)];
        assert!(fits_node(&p, &req, &n), "PreferNoSchedule is a score");
    }

    #[test]
    fn extended_resources_need_a_node_that_has_them() {
        // The simulator used to check `req.fits_with(used, alloc)`: a GPU request passed on a
        // node without GPUs whenever the node used none.
        let mut p = pod(100, "gpu");
        p.containers[0].extended.insert(GPU.into(), 1);
        let req = crate::resources::pod_requests(&p);
        let plain = node("n1", "a", 4000);
        assert!(!fits_node(&p, &req, &plain));
        let mut gpu = node("n2", "a", 4000);
        gpu.allocatable.extended.insert(GPU.into(), 1);
        assert!(fits_node(&p, &req, &gpu));
        gpu.used.extended.insert(GPU.into(), 1);
        assert!(!fits_node(&p, &req, &gpu), "the one GPU is in use");
        // Any other extended resource the same way.
        let mut q = pod(100, "x");
        q.containers[0]
            .extended
            .insert("example.com/fpga".into(), 2);
        let rq = crate::resources::pod_requests(&q);
        let mut f = node("n3", "a", 4000);
        f.allocatable.extended.insert("example.com/fpga".into(), 3);
        f.used.extended.insert("example.com/fpga".into(), 1);
        assert!(fits_node(&q, &rq, &f));
        f.used.extended.insert("example.com/fpga".into(), 2);
        assert!(!fits_node(&q, &rq, &f));
    }

    #[test]
    fn volume_node_affinity_and_required_terms_are_ored() {
        let mut p = pod(100, "a");
        p.required_node_affinity = vec![
            vec![Requirement::new_in(labels::ZONE, &["b"])],
            vec![Requirement::new_in(labels::ZONE, &["c"])],
        ];
        let req = crate::resources::pod_requests(&p);
        assert!(!fits_node(&p, &req, &node("n1", "a", 4000)));
        assert!(
            fits_node(&p, &req, &node("n2", "c", 4000)),
            "the second term"
        );
        p.volumes.push(crate::model::Volume {
            name: "v".into(),
            node_affinity: vec![vec![Requirement::new_in(labels::ZONE, &["b"])]],
            csi_driver: None,
        });
        assert!(!fits_node(&p, &req, &node("n2", "c", 4000)));
        assert!(fits_node(&p, &req, &node("n3", "b", 4000)));
    }

    #[test]
    fn host_ports_conflict() {
        let mut a = node("n1", "a", 4000);
        let mut p = pod(100, "a");
        p.host_ports.push(HostPort {
            port: 8080,
            protocol: Default::default(),
            host_ip: None,
        });
        place(&mut a, 0, &p);
        assert!(!ok(&p, &[a.clone()], 0));
        a.remove_pod(0, &crate::resources::pod_requests(&p));
        assert!(ok(&p, &[a], 0));
    }

    #[test]
    fn hostname_anti_affinity_and_zone_spread() {
        let mut a = node("n1", "a", 4000);
        let b = node("n2", "b", 4000);
        place(&mut a, 0, &pod(100, "a"));
        let mut p = pod(100, "a");
        p.pod_anti_affinity
            .required
            .push(term("a", labels::HOSTNAME));
        let all = vec![a, b];
        assert!(!ok(&p, &all, 0));
        assert!(ok(&p, &all, 1));

        let mut s = pod(100, "a");
        s.topology_spread.push(spread(labels::ZONE, "a"));
        // Zone a has one, zone b none: another in a would make skew 2.
        assert!(!ok(&s, &all, 0));
        assert!(ok(&s, &all, 1));
    }

    #[test]
    fn existing_pods_anti_affinity_keeps_the_incoming_pod_away() {
        // The simulator never checked this: a pod with no constraints of its own landed next
        // to a pod whose required anti-affinity selects it.
        let mut a = node("n1", "a", 4000);
        let b = node("n2", "a", 4000);
        let mut owner = pod(100, "db");
        owner
            .pod_anti_affinity
            .required
            .push(term("web", labels::HOSTNAME));
        place(&mut a, 0, &owner);
        let all = vec![a, b];
        let web = pod(100, "web");
        assert!(!ok(&web, &all, 0));
        assert!(ok(&web, &all, 1));
        assert!(ok(&pod(100, "other"), &all, 0), "not selected");
        // Zone-wide anti-affinity: every node of the zone.
        let mut zonal = owner.clone();
        zonal.pod_anti_affinity.required = vec![term("web", labels::ZONE)];
        let mut a = node("n1", "a", 4000);
        place(&mut a, 0, &zonal);
        let all = vec![a, node("n2", "a", 4000), node("n3", "b", 4000)];
        assert!(!ok(&web, &all, 1));
        assert!(ok(&web, &all, 2));
    }

    #[test]
    fn the_incoming_pod_counts_toward_its_spread_only_when_selected() {
        // Zone a holds one `b` pod, zone b none. A pod labelled `a` spreading `b` pods adds
        // nothing to the count: zone a stays at skew 1, allowed. (It used to count itself.)
        let mut a = node("n1", "a", 4000);
        place(&mut a, 0, &pod(100, "b"));
        let all = vec![a, node("n2", "b", 4000)];
        let mut p = pod(100, "a");
        p.topology_spread.push(spread(labels::ZONE, "b"));
        assert!(ok(&p, &all, 0));
        let mut q = pod(100, "b");
        q.topology_spread.push(spread(labels::ZONE, "b"));
        assert!(!ok(&q, &all, 0), "a selected pod counts itself");
    }

    #[test]
    fn node_taints_policy_honor_leaves_untolerated_nodes_out() {
        // Zone a: one pod; zone b: a node with a taint the pod does not tolerate (a
        // PreferNoSchedule taint, so the node itself is not filtered out by taints).
        let mut a = node("n1", "a", 4000);
        place(&mut a, 0, &pod(100, "a"));
        let mut b = node("n2", "b", 4000);
        b.taints
            .push(Taint::new("dedicated", None, TaintEffect::NoSchedule));
        let all = vec![a, b];
        let mut p = pod(100, "a");
        p.topology_spread.push(spread(labels::ZONE, "a"));
        // Ignore (default): zone b counts with 0, so zone a (1 + 1 - 0) is over the skew.
        assert!(!ok(&p, &all, 0));
        p.topology_spread[0].node_taints_policy = Some(InclusionPolicy::Honor);
        // Honor: zone b is not a domain; zone a is the minimum itself.
        assert!(ok(&p, &all, 0));
        // Tolerating the taint brings zone b back.
        p.tolerations.push(Toleration::equal("dedicated", "", None));
        p.tolerations[0].operator = crate::model::TolerationOperator::Exists;
        assert!(!ok(&p, &all, 0));
    }

    #[test]
    fn node_affinity_policy_ignore_counts_every_node() {
        let mut a = node("n1", "a", 4000);
        a.labels.insert("tier".into(), "x".into());
        place(&mut a, 0, &pod(100, "a"));
        let all = vec![a, node("n2", "b", 4000)];
        let mut p = pod(100, "a");
        p.node_selector.insert("tier".into(), "x".into());
        p.topology_spread.push(spread(labels::ZONE, "a"));
        // Honor (default): zone b's node does not match the selector and is no domain.
        assert!(ok(&p, &all, 0));
        p.topology_spread[0].node_affinity_policy = Some(InclusionPolicy::Ignore);
        assert!(!ok(&p, &all, 0));
    }

    #[test]
    fn min_domains_and_hostname_minimum() {
        // Hostname spread over existing nodes: n1 and n2 hold one each; a third on n1 gives
        // 2 - 1 = 1, allowed when binding (no node can open), refused when nodes can open.
        let mut a = node("n1", "a", 4000);
        let mut b = node("n2", "a", 4000);
        place(&mut a, 0, &pod(100, "a"));
        place(&mut b, 1, &pod(100, "a"));
        let all = vec![a, b];
        let mut p = pod(100, "a");
        p.topology_spread.push(spread(labels::HOSTNAME, "a"));
        assert!(ok(&p, &all, 0));
        let ns = none();
        let potential = vec![(all[0].labels.clone(), vec![])];
        let ctx = Context {
            namespaces: &ns,
            potential: &potential,
        };
        let req = crate::resources::pod_requests(&p);
        assert!(!may_bind(&p, &req, 0, &all, &ctx));
        // minDomains 3 with two zones' worth of hosts: the minimum is 0.
        p.topology_spread[0].min_domains = Some(3);
        assert!(!ok(&p, &all, 0));
    }

    #[test]
    fn namespace_selector_selects_by_namespace_labels() {
        // An anti-affinity term with a namespace selector selects pods in the namespaces whose
        // labels match, not every namespace (the simulator used to read any selector as all).
        let namespaces = BTreeMap::from([
            (
                "prod".to_string(),
                BTreeMap::from([("env".to_string(), "prod".to_string())]),
            ),
            ("dev".to_string(), BTreeMap::new()),
        ]);
        let ctx = Context {
            namespaces: &namespaces,
            potential: &[],
        };
        let mut a = node("n1", "a", 4000);
        let mut dev = pod(100, "web");
        dev.namespace = "dev".into();
        place(&mut a, 0, &dev);
        let all = vec![a];
        let mut p = pod(100, "api");
        let mut t = term("web", labels::HOSTNAME);
        t.namespace_selector = Some(LabelSelector::from_labels([("env", "prod")]));
        p.pod_anti_affinity.required.push(t.clone());
        let req = crate::resources::pod_requests(&p);
        assert!(may_bind(&p, &req, 0, &all, &ctx), "dev is not selected");
        // An empty selector is every namespace.
        t.namespace_selector = Some(LabelSelector::default());
        p.pod_anti_affinity.required = vec![t];
        assert!(!may_bind(&p, &req, 0, &all, &ctx));
    }

    #[test]
    fn required_affinity_first_pod_and_followers() {
        let a = node("n1", "a", 4000);
        let b = node("n2", "b", 4000);
        let mut p = pod(100, "a");
        p.pod_affinity.required.push(term("a", labels::ZONE));
        let mut all = vec![a, b];
        assert!(ok(&p, &all, 0), "first pod of a self-affine group");
        place(&mut all[1], 0, &pod(100, "a"));
        assert!(!ok(&p, &all, 0));
        assert!(ok(&p, &all, 1));
        let mut q = pod(100, "other");
        q.pod_affinity.required.push(term("z", labels::ZONE));
        assert!(!ok(&q, &all, 0), "no match anywhere and not self-selecting");
    }

    #[test]
    fn potential_nodes_are_spread_domains() {
        // Zone a has a node with one pod; zones b and c have none yet but could (a node group
        // in each). With them counted, zone a is over the skew (the CAS baseline used to put
        // six zone-spread pods into one zone).
        let mut a = node("n1", "a", 4000);
        place(&mut a, 0, &pod(100, "a"));
        let all = vec![a];
        let mut p = pod(100, "a");
        p.topology_spread.push(spread(labels::ZONE, "a"));
        assert!(ok(&p, &all, 0));
        let ns = none();
        let zone = |z: &str| {
            (
                BTreeMap::from([(labels::ZONE.to_string(), z.to_string())]),
                vec![],
            )
        };
        let potential = vec![zone("b"), zone("c")];
        let ctx = Context {
            namespaces: &ns,
            potential: &potential,
        };
        let req = crate::resources::pod_requests(&p);
        let f = PodFilter::new(&p, &req, &all, &ctx);
        assert!(!f.allows(&all[0]));
        assert!(f.allows(&node("new", "b", 4000)));
    }
}
