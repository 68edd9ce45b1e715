//! A Cluster-Autoscaler-like baseline, written in the simulator from CAS's documented
//! behaviour (clusterapi provider, default flags):
//! - **Scale-up**, every scan: pending pods that fit no existing or upcoming node are packed
//!   first-fit-decreasing onto new nodes of each node group (one group = instance type x zone
//!   x capacity type, as one MachineDeployment would be); the **least-waste** expander picks
//!   the group leaving the least idle CPU (then memory) fraction; **one group per scan**.
//! - **Scale-down**: a node whose requested CPU and memory are both under the threshold (50%)
//!   and whose pods all fit on other nodes is unneeded; after 10 min unneeded (and 10 min
//!   after the last scale-up) it is removed: empty nodes in bulk (up to 10), others one at a
//!   time. No replacement nodes, no price awareness.
//!
//! Scheduling checks use the core's kube-scheduler filter ([`provisioner_core::filter`]), the
//! same one the engine binds with; the node groups' zones count as (empty) spread domains.

use std::collections::BTreeMap;

use provisioner_core as core;
use provisioner_core::resources::pod_requests;

use super::cluster::{shapes, views};
use super::{Autoscaler, Command, LaunchRequest, Provision, Trigger};
use crate::predicates::{self, Context, NodeView, PodFilter, PodMark};
use crate::scenario::{CasSettings, Settings};

pub const BACKING: &str = "simulator's Cluster-Autoscaler-like model (least-waste expander, one node group per scan, 50%/10 min scale-down); not core code by design";

#[derive(Debug)]
pub struct ClusterAutoscaler {
    cfg: CasSettings,
    unneeded_since: BTreeMap<String, i64>,
    last_scale_up: Option<i64>,
}

impl ClusterAutoscaler {
    pub fn new(cfg: CasSettings) -> Self {
        ClusterAutoscaler {
            cfg,
            unneeded_since: BTreeMap::new(),
            last_scale_up: None,
        }
    }
}

fn pref(p: &core::Pod) -> core::PodRef {
    core::PodRef {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
    }
}

/// The filter for `p` over `nodes`: counted only when something can involve other pods.
fn filter<'a>(
    p: &'a core::Pod,
    req: &'a core::Resources,
    nodes: &[NodeView],
    ctx: &Context<'_>,
    any_owners: bool,
) -> PodFilter<'a> {
    if any_owners || predicates::has_inter_pod_constraints(p) {
        PodFilter::new(p, req, nodes, ctx)
    } else {
        PodFilter::local(p, req)
    }
}

/// The label keys any pod in play can look at: node selectors, node affinity (its own and
/// its volumes'), and the
/// topology keys of spread and pod (anti-)affinity terms (pending pods' and, for
/// anti-affinity, the bound pods'). Labels outside these cannot change where a pod fits.
fn referenced_label_keys(
    snap: &core::Snapshot,
    pending: &[usize],
    nodes: &[NodeView],
) -> std::collections::BTreeSet<String> {
    let mut keys = std::collections::BTreeSet::new();
    for &pi in pending {
        let p = &snap.pods[pi];
        keys.extend(p.node_selector.keys().cloned());
        for term in p
            .required_node_affinity
            .iter()
            .chain(p.preferred_node_affinity.iter().map(|w| &w.term))
            .chain(p.volumes.iter().flat_map(|v| &v.node_affinity))
        {
            keys.extend(term.iter().map(|r| r.key.clone()));
        }
        keys.extend(p.topology_spread.iter().map(|t| t.topology_key.clone()));
        for a in [&p.pod_affinity, &p.pod_anti_affinity] {
            keys.extend(a.required.iter().map(|t| t.topology_key.clone()));
            keys.extend(a.preferred.iter().map(|w| w.term.topology_key.clone()));
        }
    }
    for m in nodes.iter().flat_map(|n| &n.pods) {
        keys.extend(m.anti_affinity.iter().map(|t| t.topology_key.clone()));
    }
    keys
}

/// One shape per class of shapes the estimate cannot tell apart: same NodePool (limits),
/// allocatable, taints and values of the referenced label keys. Within a class every
/// estimate, and so every waste figure, is the same, and the expander's tie-break (instance
/// type, zone, then catalog order) picks the class member with the least (type, zone),
/// first in catalog order: that member is the class's representative, so the choice is the
/// one estimating every shape would make. On catalogs of thousands of groups this skips the
/// zones and capacity types the pods do not care about. Returned in catalog order.
fn representatives(
    shapes: &[super::cluster::ShapeInfo],
    keys: &std::collections::BTreeSet<String>,
) -> Vec<usize> {
    type Class<'a> = (
        u32,
        &'a core::Resources,
        &'a [core::Taint],
        Vec<(&'a String, &'a String)>,
    );
    let mut best: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (si, s) in shapes.iter().enumerate() {
        let class: Class<'_> = (
            s.shape.pool,
            &s.shape.allocatable,
            &s.taints,
            s.labels.iter().filter(|(k, _)| keys.contains(*k)).collect(),
        );
        // Resources and taints have no Hash; their Debug text is a faithful key.
        let key = format!("{class:?}");
        let e = best.entry(key).or_insert(si);
        let cur = &shapes[*e].shape;
        if (&s.shape.instance_type_name, &s.shape.zone) < (&cur.instance_type_name, &cur.zone) {
            *e = si;
        }
    }
    let mut out: Vec<usize> = best.into_values().collect();
    out.sort_unstable();
    out
}

/// CAS's pod equivalence groups: pods of one controller with the same spec, which its
/// estimator treats together. Here: the same namespace, labels, owner kind and everything
/// that schedules (requests, selectors, affinities, tolerations, spread, ports, volumes,
/// priority). Groups come in decreasing order of their pods' CPU then memory requests (CAS's
/// `DecreasingPodOrderer`), ties by first pod; pods within a group keep their order.
fn equivalence_groups(snap: &core::Snapshot, pods: &[usize]) -> Vec<Vec<usize>> {
    use std::collections::HashMap;
    use std::hash::{Hash, Hasher};
    let mut buckets: HashMap<u64, Vec<usize>> = HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &pi in pods {
        let p = &snap.pods[pi];
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&p.namespace, &p.labels, &p.owner_kind, p.priority).hash(&mut h);
        let bucket = buckets.entry(h.finish()).or_default();
        match bucket
            .iter()
            .find(|&&g| same_spec(&snap.pods[groups[g][0]], p))
        {
            Some(&g) => groups[g].push(pi),
            None => {
                bucket.push(groups.len());
                groups.push(vec![pi]);
            }
        }
    }
    groups.sort_by(|a, b| {
        let (ra, rb) = (
            pod_requests(&snap.pods[a[0]]),
            pod_requests(&snap.pods[b[0]]),
        );
        rb.cpu_milli
            .cmp(&ra.cpu_milli)
            .then(rb.memory.cmp(&ra.memory))
            .then(a[0].cmp(&b[0]))
    });
    groups
}

/// Equal for scheduling: everything but identity (name, node, creation time, annotations).
fn same_spec(a: &core::Pod, b: &core::Pod) -> bool {
    a.namespace == b.namespace
        && a.labels == b.labels
        && a.owner_kind == b.owner_kind
        && a.priority == b.priority
        && a.containers == b.containers
        && a.init_containers == b.init_containers
        && a.overhead == b.overhead
        && a.node_selector == b.node_selector
        && a.required_node_affinity == b.required_node_affinity
        && a.preferred_node_affinity == b.preferred_node_affinity
        && a.tolerations == b.tolerations
        && a.topology_spread == b.topology_spread
        && a.pod_affinity == b.pod_affinity
        && a.pod_anti_affinity == b.pod_anti_affinity
        && a.host_ports == b.host_ports
        && a.volumes == b.volumes
}

/// CAS's binpacking estimator for one node group (`BinpackingNodeEstimator.Estimate`): per
/// equivalence group, pods go to any node added so far until one does not fit; the rest of
/// the group then only tries the last node added, else a new node; a pod that does not fit
/// an empty new node ends its group, and no more than `max_nodes` nodes are added. The
/// shortcut is CAS's own, and what keeps the estimate linear in pods rather than pods x
/// nodes. `sim` holds the nodes inter-pod constraints see; new nodes are appended to it.
/// Returns the pods of each new node.
///
/// `base[g]` is group `g`'s filter counted over the cluster as it is before any estimate
/// (the same for every node group, so counted once per scan, not once per node group and
/// pod): a group starts from a copy and is told what this estimate has added so far, then
/// what it adds itself (`PodFilter::note_node` / `note_placed`), which answers as a filter
/// built anew over `sim` would.
fn estimate(
    snap: &core::Snapshot,
    groups: &[Vec<usize>],
    base: &[PodFilter<'_>],
    template: &NodeView,
    sim: &mut Vec<NodeView>,
    ctx: &Context<'_>,
    max_nodes: usize,
) -> Vec<Vec<usize>> {
    /// What this estimate changed, in order.
    enum Change {
        Node(usize),
        Pod(usize, usize),
    }
    let first_new = sim.len();
    let mut log: Vec<Change> = Vec::new();
    let mut bins: Vec<Vec<usize>> = Vec::new();
    for (group, base) in groups.iter().zip(base) {
        let p0 = &snap.pods[group[0]];
        let req = pod_requests(p0);
        if !predicates::fits_node(p0, &req, template) {
            continue;
        }
        let mut f = base.clone();
        for c in &log {
            match *c {
                Change::Node(ni) => f.note_node(&sim[ni]),
                Change::Pod(ni, pi) => {
                    f.note_placed(&sim[ni], &PodMark::of(pi, &snap.pods[pi]), ctx)
                }
            }
        }
        let place = |sim: &mut Vec<NodeView>,
                     f: &mut PodFilter<'_>,
                     bins: &mut Vec<Vec<usize>>,
                     log: &mut Vec<Change>,
                     ni: usize,
                     pi: usize| {
            let mark = PodMark::of(pi, &snap.pods[pi]);
            f.note_placed(&sim[ni], &mark, ctx);
            sim[ni].add_pod(mark, &req);
            bins[ni - first_new].push(pi);
            log.push(Change::Pod(ni, pi));
        };
        let mut k = 0;
        // Any node added so far, until the first pod that fits none.
        while k < group.len() {
            let Some(ni) = (first_new..sim.len()).find(|&ni| f.allows(&sim[ni])) else {
                break;
            };
            place(sim, &mut f, &mut bins, &mut log, ni, group[k]);
            k += 1;
        }
        // The rest: the last node added, else a new one.
        for &pi in &group[k..] {
            let last = (sim.len() > first_new).then(|| sim.len() - 1);
            let ni = match last {
                Some(l) if f.allows(&sim[l]) => l,
                _ => {
                    if bins.len() >= max_nodes {
                        break;
                    }
                    let mut v = template.clone();
                    v.name = format!("cas-sim-{}", bins.len());
                    v.labels
                        .insert(core::labels::HOSTNAME.into(), v.name.clone());
                    // A pod that does not fit an empty new node will not fit the next one
                    // either: CAS stops the group there.
                    if !f.allows(&v) {
                        break;
                    }
                    f.note_node(&v);
                    sim.push(v);
                    bins.push(Vec::new());
                    let ni = sim.len() - 1;
                    log.push(Change::Node(ni));
                    ni
                }
            };
            place(sim, &mut f, &mut bins, &mut log, ni, pi);
        }
    }
    bins
}

impl Autoscaler for ClusterAutoscaler {
    fn trigger(&self) -> Trigger {
        Trigger::Periodic(self.cfg.scan_interval_seconds)
    }

    fn launch_failure_seconds(&self) -> i64 {
        self.cfg.max_node_provision_seconds
    }

    fn validation_delay(&self, _settings: &Settings) -> i64 {
        0
    }

    fn disruption_period(&self, _settings: &Settings) -> i64 {
        self.cfg.scan_interval_seconds
    }

    fn wake_at(&self) -> Option<i64> {
        // The earliest unneeded node to ripen; the scale-up delay only postpones that.
        let ripe = self
            .unneeded_since
            .values()
            .map(|s| s + self.cfg.scale_down_unneeded_seconds)
            .min()?;
        let after_add = self.last_scale_up.map_or(i64::MIN, |t| {
            t + self.cfg.scale_down_delay_after_add_seconds
        });
        Some(ripe.max(after_add))
    }

    fn provision(&mut self, snap: &core::Snapshot) -> Provision {
        let (mut nodes, _) = views(snap);
        let mut pending: Vec<usize> = (0..snap.pods.len())
            .filter(|&i| snap.pods[i].node_name.is_none())
            .collect();
        pending.sort_by(|&a, &b| {
            let (ra, rb) = (pod_requests(&snap.pods[a]), pod_requests(&snap.pods[b]));
            rb.cpu_milli
                .cmp(&ra.cpu_milli)
                .then(rb.memory.cmp(&ra.memory))
                .then(a.cmp(&b))
        });
        let mut out = Provision::default();
        // Node groups: every shape (pool x type x offering). Their zones count as topology
        // domains with no pods yet, so zone spread opens nodes in empty zones.
        let (shape_infos, pools) = shapes(snap);
        let potential: Vec<(BTreeMap<String, String>, Vec<core::Taint>)> = shape_infos
            .iter()
            .map(|s| (s.labels.clone(), s.taints.clone()))
            .collect();
        let ctx = Context {
            namespaces: &snap.namespaces,
            potential: &potential,
        };
        let mut any_owners = nodes.iter().any(|n| n.anti_affinity_owners > 0);
        // Pods that fit existing or upcoming nodes wait for them (CAS counts upcoming nodes).
        let mut rest = Vec::new();
        for &pi in &pending {
            let p = &snap.pods[pi];
            let req = pod_requests(p);
            let f = filter(p, &req, &nodes, &ctx, any_owners);
            match (0..nodes.len()).find(|&ni| f.allows(&nodes[ni])) {
                Some(ni) => {
                    any_owners |= !p.pod_anti_affinity.required.is_empty();
                    nodes[ni].add_pod(PodMark::of(pi, p), &req);
                    out.placements.push(core::Placement {
                        pod: pref(p),
                        node: nodes[ni].name.clone(),
                    });
                }
                None => rest.push(pi),
            }
        }
        if rest.is_empty() {
            return out;
        }
        // CAS's estimator works on pod equivalence groups (same controller and spec), in
        // decreasing order of requests; see `estimate`.
        let groups = equivalence_groups(snap, &rest);
        // Each group's filter over the cluster as it stands, shared by every node group's
        // estimate (see `estimate`).
        let group_requests: Vec<core::Resources> = groups
            .iter()
            .map(|g| pod_requests(&snap.pods[g[0]]))
            .collect();
        let inter_pod = any_owners
            || rest
                .iter()
                .any(|&pi| predicates::has_inter_pod_constraints(&snap.pods[pi]));
        let group_filters: Vec<PodFilter<'_>> = groups
            .iter()
            .zip(&group_requests)
            .map(|(g, req)| {
                let p = &snap.pods[g[0]];
                if inter_pod {
                    PodFilter::new(p, req, &nodes, &ctx)
                } else {
                    // Nothing to count: no pod in play has inter-pod constraints, and
                    // none of these can add any.
                    PodFilter::local(p, req)
                }
            })
            .collect();
        let mut best: Option<(f64, f64, usize, Vec<Vec<usize>>)> = None;
        let keys = referenced_label_keys(snap, &rest, &nodes);
        // Shapes the pods cannot tell apart estimate alike: one stands for each class (see
        // `representatives`).
        for si in representatives(&shape_infos, &keys) {
            let s = &shape_infos[si];
            // Pool node limits (CAS's max size) and CAS's `--max-nodes-per-scaleup`.
            let max_nodes = pools
                .get(s.shape.pool as usize)
                .and_then(|p| p.remaining.as_ref())
                .and_then(|r| r.extended.get("nodes").copied())
                .unwrap_or(i64::MAX)
                .max(0) as usize;
            let max_nodes = max_nodes.min(self.cfg.max_nodes_per_scale_up);
            let template = NodeView::new(
                "",
                s.labels.clone(),
                s.taints.clone(),
                s.shape.allocatable.clone(),
            );
            // The existing nodes matter only to inter-pod constraints (spread counts,
            // affinity); without any, the estimate needs the new nodes alone.
            let mut sim = if inter_pod { nodes.clone() } else { Vec::new() };
            let base = sim.len();
            let bins = estimate(
                snap,
                &groups,
                &group_filters,
                &template,
                &mut sim,
                &ctx,
                max_nodes,
            );
            if bins.is_empty() {
                continue;
            }
            // Least waste: idle CPU fraction, ties by idle memory fraction (then name).
            let total_cpu = (s.shape.allocatable.cpu_milli * bins.len() as i64) as f64;
            let total_mem = (s.shape.allocatable.memory * bins.len() as i64) as f64;
            let used_cpu: f64 = sim[base..].iter().map(|n| n.used.cpu_milli as f64).sum();
            let used_mem: f64 = sim[base..].iter().map(|n| n.used.memory as f64).sum();
            let waste_cpu = (total_cpu - used_cpu) / total_cpu.max(1.0);
            let waste_mem = (total_mem - used_mem) / total_mem.max(1.0);
            let better = match &best {
                None => true,
                Some((bc, bm, bsi, _)) => {
                    (
                        waste_cpu,
                        waste_mem,
                        &s.shape.instance_type_name,
                        &s.shape.zone,
                    )
                        .partial_cmp(&(
                            *bc,
                            *bm,
                            &shape_infos[*bsi].shape.instance_type_name,
                            &shape_infos[*bsi].shape.zone,
                        ))
                        == Some(std::cmp::Ordering::Less)
                }
            };
            if better {
                best = Some((waste_cpu, waste_mem, si, bins));
            }
        }
        let Some((_, _, si, bins)) = best else {
            for pi in rest {
                out.unschedulable.push(core::Unschedulable {
                    pod: pref(&snap.pods[pi]),
                    reason: "no node group can hold this pod".into(),
                });
            }
            return out;
        };
        let s = &shape_infos[si].shape;
        for bin in bins {
            out.launches.push(LaunchRequest {
                nodepool: pools.get(s.pool as usize).map(|p| p.name.clone()),
                instance_type: s.instance_type_name.clone(),
                zone: s.zone.clone(),
                capacity_type: s.capacity_type,
                price: s.price,
                pods: bin.iter().map(|&pi| pref(&snap.pods[pi])).collect(),
                fleet: Vec::new(),
            });
        }
        self.last_scale_up = Some(snap.now);
        out
    }

    fn disrupt(&mut self, snap: &core::Snapshot) -> Option<Command> {
        let (mut nodes, idx) = views(snap);
        let now = snap.now;
        let mut unneeded_now = BTreeMap::new();
        // One pass over the pods: each node's movable pods and its daemonset requests.
        let mut pods_on: Vec<Vec<usize>> = vec![Vec::new(); snap.nodes.len()];
        let mut ds_on: Vec<core::Resources> = vec![core::Resources::default(); snap.nodes.len()];
        for (i, p) in snap.pods.iter().enumerate() {
            let Some(ni) = p.node_name.as_ref().and_then(|n| idx.get(n)).copied() else {
                continue;
            };
            if p.is_daemonset_pod() {
                ds_on[ni].add_assign(&pod_requests(p));
            } else {
                pods_on[ni].push(i);
            }
        }
        let draining = snap.nodes.iter().any(|n| n.marked_for_deletion);
        let pdbs = core::disruption::protect::PdbIndex::new(&snap.pdbs);
        let ctx = Context {
            namespaces: &snap.namespaces,
            potential: &[],
        };
        let mut owners_total: u32 = nodes.iter().map(|n| n.anti_affinity_owners).sum();
        for (ni, n) in snap.nodes.iter().enumerate() {
            if n.in_flight || !n.ready || n.marked_for_deletion || n.nodepool.is_none() {
                continue;
            }
            let v = &nodes[ni];
            // CAS counts daemonset pods out of utilisation by default.
            let cpu = (v.used.cpu_milli - ds_on[ni].cpu_milli) as f64
                / v.allocatable.cpu_milli.max(1) as f64;
            let mem =
                (v.used.memory - ds_on[ni].memory) as f64 / v.allocatable.memory.max(1) as f64;
            if cpu.max(mem) >= self.cfg.scale_down_utilization_threshold {
                continue;
            }
            let pods = &pods_on[ni];
            if pods.iter().any(|&pi| snap.pods[pi].owner_kind.is_none()) {
                continue;
            }
            // CAS's drainability rule: a pod whose PDB allows no disruption now blocks the
            // node's removal ("not enough pod disruption budget").
            if pods.iter().any(|&pi| {
                pdbs.matching(&snap.pods[pi])
                    .into_iter()
                    .any(|k| snap.pdbs[k].disruptions_allowed < 1)
            }) {
                continue;
            }
            // Can every pod move to another ready node? Simulated in place on `nodes` and
            // undone afterwards (CAS forks its snapshot the same way), rather than on a copy
            // of the whole cluster per candidate.
            let was_schedulable = nodes[ni].schedulable;
            nodes[ni].schedulable = false;
            for &pi in pods {
                let req = pod_requests(&snap.pods[pi]);
                owners_total = owners_total.saturating_sub(u32::from(
                    !snap.pods[pi].pod_anti_affinity.required.is_empty(),
                ));
                nodes[ni].remove_pod(pi, &req);
            }
            let mut moved: Vec<(usize, usize)> = Vec::new();
            let mut ok = true;
            for &pi in pods {
                let p = &snap.pods[pi];
                let req = pod_requests(p);
                let f = filter(p, &req, &nodes, &ctx, owners_total > 0);
                let hit = (0..nodes.len())
                    .find(|&j| j != ni && !snap.nodes[j].in_flight && f.allows(&nodes[j]));
                match hit {
                    Some(j) => {
                        owners_total += u32::from(!p.pod_anti_affinity.required.is_empty());
                        nodes[j].add_pod(PodMark::of(pi, p), &req);
                        moved.push((j, pi));
                    }
                    None => {
                        ok = false;
                        break;
                    }
                }
            }
            for (j, pi) in moved {
                let p = &snap.pods[pi];
                owners_total = owners_total
                    .saturating_sub(u32::from(!p.pod_anti_affinity.required.is_empty()));
                nodes[j].remove_pod(pi, &pod_requests(p));
            }
            for &pi in pods {
                let p = &snap.pods[pi];
                owners_total += u32::from(!p.pod_anti_affinity.required.is_empty());
                nodes[ni].add_pod(PodMark::of(pi, p), &pod_requests(p));
            }
            nodes[ni].schedulable = was_schedulable;
            if ok {
                let since = self.unneeded_since.get(&n.name).copied().unwrap_or(now);
                unneeded_now.insert(n.name.clone(), (since, pods.is_empty(), n.price));
            }
        }
        self.unneeded_since = unneeded_now.iter().map(|(k, v)| (k.clone(), v.0)).collect();
        if self
            .last_scale_up
            .is_some_and(|t| now < t + self.cfg.scale_down_delay_after_add_seconds)
        {
            return None;
        }
        let ripe: Vec<(&String, &(i64, bool, f64))> = unneeded_now
            .iter()
            .filter(|(_, (since, _, _))| now - since >= self.cfg.scale_down_unneeded_seconds)
            .collect();
        let empty: Vec<&String> = ripe
            .iter()
            .filter(|(_, (_, e, _))| *e)
            .map(|(n, _)| *n)
            .take(self.cfg.max_empty_bulk_delete)
            .collect();
        if !empty.is_empty() {
            let savings = ripe
                .iter()
                .filter(|(n, _)| empty.contains(n))
                .map(|(_, (_, _, p))| p)
                .sum();
            for n in &empty {
                self.unneeded_since.remove(*n);
            }
            return Some(Command {
                reason: "Empty".into(),
                candidates: empty.into_iter().cloned().collect(),
                replacements: Vec::new(),
                placements: Vec::new(),
                savings,
                core: None,
            });
        }
        if draining {
            return None;
        }
        let (name, (_, _, price)) = ripe.first()?;
        self.unneeded_since.remove(*name);
        Some(Command {
            reason: "Underutilized (delete)".into(),
            candidates: vec![(*name).clone()],
            replacements: Vec::new(),
            placements: Vec::new(),
            savings: *price,
            core: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> core::Snapshot {
        let it = |name: &str, cpu: i64, mem_gi: i64, price: f64| {
            core::InstanceType::new(
                name,
                cpu,
                mem_gi << 30,
                110,
                vec![core::Offering::new(
                    "zone-a",
                    core::CapacityType::OnDemand,
                    price,
                )],
            )
        };
        core::Snapshot {
            instance_types: vec![it("a-small", 4000, 8, 0.20), it("b-big", 8000, 16, 0.30)],
            nodepools: vec![core::NodePool::new("default", 0)],
            pods: (0..3)
                .map(|i| {
                    let mut p = core::Pod::new("default", &format!("p{i}"), 1000, 1 << 30);
                    p.owner_kind = Some("ReplicaSet".into());
                    p
                })
                .map(std::sync::Arc::new)
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn least_waste_picks_one_group() {
        let mut cas = ClusterAutoscaler::new(CasSettings::default());
        let p = cas.provision(&snapshot());
        // 3 x 1 CPU: a-small leaves 1/4 idle, b-big 5/8; least waste is a-small, whatever
        // the price.
        assert_eq!(p.launches.len(), 1);
        assert_eq!(p.launches[0].instance_type, "a-small");
        assert_eq!(p.launches[0].pods.len(), 3);
    }

    /// CAS's `--max-nodes-per-scaleup`: one scan adds at most that many nodes; the rest of
    /// the pods wait for the next scan.
    #[test]
    fn one_scale_up_adds_at_most_max_nodes() {
        let mut cas = ClusterAutoscaler::new(CasSettings {
            max_nodes_per_scale_up: 2,
            ..CasSettings::default()
        });
        let mut s = snapshot();
        // 12 pods of 3 CPU: one per node of either type.
        s.pods = (0..12)
            .map(|i| {
                let mut p = core::Pod::new("default", &format!("p{i}"), 3000, 1 << 30);
                p.owner_kind = Some("ReplicaSet".into());
                p
            })
            .map(std::sync::Arc::new)
            .collect();
        let p = cas.provision(&s);
        assert_eq!(p.launches.len(), 2);
        assert!(p.launches.iter().all(|l| l.pods.len() == 1));
    }

    /// Pods that differ only in name form one equivalence group; other requests or labels
    /// another. Groups come largest first.
    #[test]
    fn equivalence_groups_by_spec() {
        let pod = |name: &str, cpu: i64, app: &str| {
            let mut p = core::Pod::new("default", name, cpu, 1 << 30).label("app", app);
            p.owner_kind = Some("ReplicaSet".into());
            p
        };
        let snap = core::Snapshot {
            pods: vec![
                pod("a1", 500, "a"),
                pod("b1", 2000, "b"),
                pod("a2", 500, "a"),
                pod("c1", 500, "c"),
                pod("b2", 2000, "b"),
            ]
            .into_iter()
            .map(std::sync::Arc::new)
            .collect(),
            ..Default::default()
        };
        let g = equivalence_groups(&snap, &[0, 1, 2, 3, 4]);
        assert_eq!(g, vec![vec![1, 4], vec![0, 2], vec![3]]);
    }

    /// The estimator packs identical pods exactly as first-fit would (a pod of a group that
    /// fits no node so far fits none later, since nodes only fill), in far fewer checks.
    #[test]
    fn estimate_matches_first_fit_for_identical_pods() {
        let mut s = snapshot();
        s.pods = (0..10)
            .map(|i| {
                let mut p = core::Pod::new("default", &format!("p{i}"), 1500, 1 << 30);
                p.owner_kind = Some("ReplicaSet".into());
                p
            })
            .map(std::sync::Arc::new)
            .collect();
        let mut cas = ClusterAutoscaler::new(CasSettings::default());
        let p = cas.provision(&s);
        // a-small (4 CPU) holds 2 pods: 5 nodes, idle 1/4; b-big (8 CPU) holds 5: 2 nodes,
        // idle 1/16. Least waste picks b-big.
        assert_eq!(p.launches.len(), 2);
        assert_eq!(p.launches[0].instance_type, "b-big");
        assert_eq!(
            p.launches.iter().map(|l| l.pods.len()).collect::<Vec<_>>(),
            vec![5, 5]
        );
    }

    /// Zones and capacity types no pod looks at collapse to one shape per type; a zone
    /// spread brings the zones back. The representative is the expander's tie-break winner.
    #[test]
    fn shapes_collapse_only_over_labels_no_pod_reads() {
        let mut s = snapshot();
        for it in &mut s.instance_types {
            let price = it.offerings[0].price;
            it.offerings = vec![
                core::Offering::new("zone-b", core::CapacityType::Spot, price),
                core::Offering::new("zone-a", core::CapacityType::OnDemand, price),
                core::Offering::new("zone-a", core::CapacityType::Spot, price),
            ];
        }
        let (shapes, _) = super::super::cluster::shapes(&s);
        assert_eq!(shapes.len(), 6);
        let (nodes, _) = views(&s);
        let keys = referenced_label_keys(&s, &[0, 1, 2], &nodes);
        let reps = representatives(&shapes, &keys);
        let names: Vec<(&str, &str, core::CapacityType)> = reps
            .iter()
            .map(|&i| {
                let x = &shapes[i].shape;
                (
                    x.instance_type_name.as_str(),
                    x.zone.as_str(),
                    x.capacity_type,
                )
            })
            .collect();
        // zone-a first by name; on-demand first in catalog order.
        assert_eq!(
            names,
            vec![
                ("a-small", "zone-a", core::CapacityType::OnDemand),
                ("b-big", "zone-a", core::CapacityType::OnDemand)
            ]
        );
        std::sync::Arc::make_mut(&mut s.pods[0])
            .topology_spread
            .push(core::TopologySpreadConstraint {
                max_skew: 1,
                topology_key: core::labels::ZONE.into(),
                when_unsatisfiable: core::WhenUnsatisfiable::DoNotSchedule,
                label_selector: core::LabelSelector::default(),
                min_domains: None,
                node_affinity_policy: None,
                node_taints_policy: None,
                match_label_keys: Vec::new(),
            });
        let keys = referenced_label_keys(&s, &[0, 1, 2], &nodes);
        assert_eq!(representatives(&shapes, &keys).len(), 4);
    }

    #[test]
    fn scale_down_waits_for_unneeded_time() {
        let mut cas = ClusterAutoscaler::new(CasSettings::default());
        let mut s = snapshot();
        let node = |name: &str| {
            let mut n = core::Node::new(
                name,
                "zone-a",
                core::Resources::with_pods(4000, 8 << 30, 110),
            );
            n.nodepool = Some("default".into());
            n.ready = true;
            n.initialized = true;
            n.price = 0.2;
            n
        };
        s.nodes = vec![node("n1"), node("n2")];
        // One small pod on n1: n1 is under 50% and its pod fits on n2.
        s.pods.truncate(1);
        std::sync::Arc::make_mut(&mut s.pods[0]).node_name = Some("n1".into());
        s.now = 1000;
        assert!(cas.disrupt(&s).is_none(), "not unneeded long enough yet");
        s.now = 1000 + 600;
        let cmd = cas.disrupt(&s);
        let names: Vec<String> = cmd.map(|c| c.candidates).unwrap_or_default();
        // n2 is empty: removed first, in bulk.
        assert_eq!(names, vec!["n2".to_string()]);
    }
}
