//! Karpenter-shaped provisioning over the core's launch planners.
//!
//! The core's `schedule(&Snapshot)` entry point had not landed when this was written; its
//! packing interface had. So this module does the scheduler's part in the simulator (place
//! pending pods on existing and in-flight nodes first fit, in Karpenter's pod order; turn the
//! rest into a [`PackingProblem`] with shapes = NodePool x instance type x offering) and lets
//! the core's [`LaunchPlanner`] (cost-aware, or the Karpenter baseline) decide the new nodes.
//! Zone-level constraints are resolved here with a simple rule (spread: least-loaded allowed
//! zone; affinity: the zone of the first match); hostname anti-affinity and spread become
//! per-node groups. When the core scheduler lands, [`KarpenterLike::provision`] calls it
//! instead and this bridge goes.

use std::collections::BTreeMap;

use provisioner_core as core;
use provisioner_core::packing::{LaunchPlanner, PackItem, PackPool, PackingProblem, Shape, ShapeSet};
use provisioner_core::requirements::terms_match;
use provisioner_core::resources::pod_requests;
use provisioner_core::taints::tolerates_all;

use super::{Autoscaler, Command, LaunchRequest, Provision};
use crate::catalog;
use crate::predicates::{self, NodeView, PodMark};

pub const COST_AWARE_BACKING: &str =
    "provisioner-core CostAwarePlanner for new nodes; placement on existing nodes and zone pinning by the simulator's bridge (core schedule() not landed yet)";
pub const KARPENTER_BACKING: &str =
    "provisioner-core KarpenterPlanner for new nodes; placement on existing nodes and zone pinning by the simulator's bridge (core schedule() not landed yet)";

/// Karpenter's loop shape (batch, then the disruption loop) with a core planner.
#[derive(Debug)]
pub struct KarpenterLike {
    pub strategy: core::Strategy,
    pub disruption: super::karpenter_disruption::Disruption,
}

impl KarpenterLike {
    pub fn new(strategy: core::Strategy) -> Self {
        KarpenterLike {
            strategy,
            disruption: super::karpenter_disruption::Disruption::default(),
        }
    }
}

impl Autoscaler for KarpenterLike {
    fn provision(&mut self, snap: &core::Snapshot) -> Provision {
        provision(snap, self.strategy.planner())
    }

    fn disrupt(&mut self, snap: &core::Snapshot) -> Option<Command> {
        let planner = self.strategy.planner();
        self.disruption.find(snap, &|s| provision(s, planner))
    }
}

/// Views of the snapshot's nodes (in-flight nodes take pods too), in snapshot order.
pub fn views(snap: &core::Snapshot) -> (Vec<NodeView>, BTreeMap<String, usize>) {
    let mut idx = BTreeMap::new();
    let mut out = Vec::with_capacity(snap.nodes.len());
    for (i, n) in snap.nodes.iter().enumerate() {
        idx.insert(n.name.clone(), i);
        out.push(NodeView {
            name: n.name.clone(),
            labels: n.labels.clone(),
            taints: n.taints.clone(),
            allocatable: n.allocatable.clone(),
            used: core::Resources::default(),
            pods: Vec::new(),
            schedulable: !n.marked_for_deletion,
            live: true,
        });
    }
    for (pi, p) in snap.pods.iter().enumerate() {
        if let Some(v) = p.node_name.as_ref().and_then(|n| idx.get(n)).and_then(|i| out.get_mut(*i)) {
            v.used.add_assign(&pod_requests(p));
            v.pods.push(PodMark {
                id: pi,
                namespace: p.namespace.clone(),
                labels: p.labels.clone(),
                daemon: p.owner_kind.as_deref() == Some("DaemonSet"),
            });
        }
    }
    (out, idx)
}

fn pref(p: &core::Pod) -> core::PodRef {
    core::PodRef {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
    }
}

/// Requests of the daemonsets that would land on a node with these labels and taints.
pub fn daemonset_requests(snap: &core::Snapshot, labels: &BTreeMap<String, String>, taints: &[core::Taint]) -> core::Resources {
    let mut r = core::Resources::default();
    for ds in &snap.daemonsets {
        let p = &ds.pod;
        let selected = p.node_selector.iter().all(|(k, v)| labels.get(k) == Some(v))
            && (p.required_node_affinity.is_empty() || terms_match(&p.required_node_affinity, labels));
        if selected && tolerates_all(taints, &p.tolerations, false) {
            r.add_assign(&pod_requests(p));
        }
    }
    r
}

/// One launchable node shape with the labels and taints its node will have.
#[derive(Debug, Clone)]
pub struct ShapeInfo {
    pub shape: Shape,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<core::Taint>,
}

/// Every (NodePool x instance type x available offering) whose labels satisfy the pool's
/// requirements, in pool weight order. Pools are ranked by weight (desc), then name.
pub fn shapes(snap: &core::Snapshot) -> (Vec<ShapeInfo>, Vec<PackPool>) {
    let mut pools: Vec<&core::NodePool> = snap.nodepools.iter().collect();
    pools.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.name.cmp(&b.name)));
    let mut out = Vec::new();
    let mut packpools = Vec::new();
    for (rank, pool) in pools.iter().enumerate() {
        let mut remaining = None;
        if let Some(limits) = &pool.limits {
            let mut used = core::Resources::default();
            let mut count = 0;
            for n in snap.nodes.iter().filter(|n| n.nodepool.as_deref() == Some(pool.name.as_str())) {
                used.add_assign(&n.capacity);
                count += 1;
            }
            let mut rem = provisioner_core::packing::unlimited_where_zero(limits).sub(&used);
            if let Some(nodes) = limits.extended.get("nodes") {
                rem.extended.insert("nodes".into(), nodes - count);
            }
            remaining = Some(rem);
        }
        let min_values: BTreeMap<String, u32> = pool
            .requirements
            .iter()
            .filter_map(|r| r.min_values.map(|m| (r.key.clone(), m)))
            .collect();
        packpools.push(PackPool {
            name: pool.name.clone(),
            rank: rank as u32,
            remaining,
            min_values: min_values.clone(),
        });
        for (ti, it) in snap.instance_types.iter().enumerate() {
            if let Some(allowed) = &pool.instance_types {
                if !allowed.contains(&it.name) {
                    continue;
                }
            }
            let alloc = catalog::allocatable(it);
            for o in it.offerings.iter().filter(|o| o.available) {
                let mut labels = it.labels.clone();
                labels.extend(pool.labels.clone());
                labels.insert(core::labels::INSTANCE_TYPE.into(), it.name.clone());
                labels.insert(core::labels::ZONE.into(), o.zone.clone());
                labels.insert(core::labels::CAPACITY_TYPE.into(), o.capacity_type.as_label().into());
                labels.insert(core::labels::NODEPOOL.into(), pool.name.clone());
                if !pool.requirements.iter().all(|r| r.matches(&labels)) {
                    continue;
                }
                let mut taints = pool.taints.clone();
                taints.extend(it.taints.iter().cloned());
                let ds = daemonset_requests(snap, &labels, &taints);
                let Some(allocatable) = alloc.fits_in_sub(&ds) else {
                    continue;
                };
                let mvl = min_values
                    .keys()
                    .filter_map(|k| labels.get(k).map(|v| (k.clone(), v.clone())))
                    .collect();
                out.push(ShapeInfo {
                    shape: Shape {
                        pool: rank as u32,
                        instance_type: ti as u32,
                        instance_type_name: it.name.clone(),
                        zone: o.zone.clone(),
                        capacity_type: o.capacity_type,
                        price: o.price,
                        capacity: it.capacity.clone(),
                        allocatable,
                        daemonset_requests: ds,
                        min_value_labels: mvl,
                    },
                    labels,
                    taints,
                });
            }
        }
    }
    (out, packpools)
}

trait SubExt {
    fn fits_in_sub(&self, minus: &core::Resources) -> Option<core::Resources>;
}

impl SubExt for core::Resources {
    /// `self - minus` when nothing goes negative.
    fn fits_in_sub(&self, minus: &core::Resources) -> Option<core::Resources> {
        if minus.fits_in(self) {
            Some(self.sub(minus))
        } else {
            None
        }
    }
}

/// Karpenter's pod order: CPU then memory, descending (ties by name for determinism).
fn karpenter_pod_order(snap: &core::Snapshot, pending: &mut [usize]) {
    pending.sort_by(|&a, &b| {
        let (pa, pb) = (&snap.pods[a], &snap.pods[b]);
        let (ra, rb) = (pod_requests(pa), pod_requests(pb));
        rb.cpu_milli
            .cmp(&ra.cpu_milli)
            .then(rb.memory.cmp(&ra.memory))
            .then(pa.namespace.cmp(&pb.namespace))
            .then(pa.name.cmp(&pb.name))
    });
}

/// Place pending pods on existing/in-flight nodes, then plan new nodes with `planner`.
pub fn provision(snap: &core::Snapshot, planner: &dyn LaunchPlanner) -> Provision {
    let (mut nodes, _) = views(snap);
    let mut pending: Vec<usize> = snap
        .pods
        .iter()
        .enumerate()
        .filter(|(_, p)| p.node_name.is_none())
        .map(|(i, _)| i)
        .collect();
    karpenter_pod_order(snap, &mut pending);
    let mut out = Provision::default();
    let mut rest = Vec::new();
    for &pi in &pending {
        let p = &snap.pods[pi];
        let req = pod_requests(p);
        let hit = (0..nodes.len()).find(|&ni| predicates::fits(p, &req, &nodes[ni], &nodes));
        match hit {
            Some(ni) => {
                let n = &mut nodes[ni];
                n.used.add_assign(&req);
                n.pods.push(PodMark {
                    id: pi,
                    namespace: p.namespace.clone(),
                    labels: p.labels.clone(),
                    daemon: false,
                });
                out.placements.push(core::Placement {
                    pod: pref(p),
                    node: n.name.clone(),
                });
            }
            None => rest.push(pi),
        }
    }
    if rest.is_empty() {
        return out;
    }
    let (shape_infos, pools) = shapes(snap);
    let nshapes = shape_infos.len();
    // Zone pinning for zone-level spread and affinity, counting existing pods.
    let zones: Vec<String> = {
        let mut z: Vec<String> = shape_infos.iter().map(|s| s.shape.zone.clone()).collect();
        z.sort();
        z.dedup();
        z
    };
    let mut zone_counts: BTreeMap<(usize, String), i64> = BTreeMap::new();
    let mut affinity_zone: BTreeMap<usize, String> = BTreeMap::new();
    let mut shape_sets: Vec<ShapeSet> = Vec::new();
    let mut set_index: BTreeMap<Vec<u32>, u32> = BTreeMap::new();
    let mut items = Vec::new();
    let mut groups: BTreeMap<String, u32> = BTreeMap::new();
    let mut unplaced_reason: Vec<(usize, String)> = Vec::new();
    for &pi in &rest {
        let p = &snap.pods[pi];
        let req = pod_requests(p);
        let mut ok: Vec<u32> = shape_infos
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                p.node_selector.iter().all(|(k, v)| s.labels.get(k) == Some(v))
                    && (p.required_node_affinity.is_empty() || terms_match(&p.required_node_affinity, &s.labels))
                    && tolerates_all(&s.taints, &p.tolerations, false)
                    && req.fits_in(&s.shape.allocatable)
            })
            .map(|(i, _)| i as u32)
            .collect();
        // Zone topology spread: the least-loaded zone among those the pod can use.
        for (ci, c) in p.topology_spread.iter().enumerate() {
            if c.topology_key != core::labels::ZONE || c.when_unsatisfiable != core::WhenUnsatisfiable::DoNotSchedule {
                continue;
            }
            let sel = c.label_selector.with_match_label_keys(&c.match_label_keys, &p.labels);
            let allowed: Vec<&String> = zones
                .iter()
                .filter(|z| ok.iter().any(|&s| shape_infos[s as usize].shape.zone == **z))
                .collect();
            let count_of = |z: &str, zc: &BTreeMap<(usize, String), i64>| -> i64 {
                let existing: i64 = nodes
                    .iter()
                    .filter(|n| n.labels.get(core::labels::ZONE).map(String::as_str) == Some(z))
                    .map(|n| n.pods.iter().filter(|m| !m.daemon && m.namespace == p.namespace && sel.matches(&m.labels)).count() as i64)
                    .sum();
                existing + zc.get(&(ci, format!("{sel:?}|{z}"))).copied().unwrap_or(0)
            };
            if let Some(best) = allowed.iter().min_by_key(|z| (count_of(z, &zone_counts), z.to_string())) {
                let best = (*best).clone();
                *zone_counts.entry((ci, format!("{sel:?}|{best}"))).or_insert(0) += 1;
                ok.retain(|&s| shape_infos[s as usize].shape.zone == best);
            }
        }
        // Zone pod affinity: the zone of an existing match, else the first this group picks.
        for term in &p.pod_affinity.required {
            if term.topology_key != core::labels::ZONE {
                continue;
            }
            let sel = term.label_selector.with_match_label_keys(&term.match_label_keys, &p.labels);
            let existing = nodes
                .iter()
                .find(|n| n.pods.iter().any(|m| !m.daemon && sel.matches(&m.labels)))
                .and_then(|n| n.labels.get(core::labels::ZONE).cloned());
            let zone = existing.or_else(|| {
                let k = affinity_zone.keys().copied().find(|k| {
                    snap.pods.get(*k).is_some_and(|q| sel.matches(&q.labels))
                });
                k.and_then(|k| affinity_zone.get(&k).cloned())
            });
            let zone = zone.or_else(|| {
                // The zone with the cheapest compatible shape.
                ok.iter()
                    .min_by(|a, b| shape_infos[**a as usize].shape.price.total_cmp(&shape_infos[**b as usize].shape.price))
                    .map(|s| shape_infos[*s as usize].shape.zone.clone())
            });
            if let Some(z) = zone {
                affinity_zone.insert(pi, z.clone());
                ok.retain(|&s| shape_infos[s as usize].shape.zone == z);
            }
        }
        if ok.is_empty() {
            unplaced_reason.push((pi, "no NodePool and instance type can hold this pod".into()));
            continue;
        }
        // Per-node groups: hostname anti-affinity (limit 1 member per node) and hostname
        // spread (limit maxSkew members per new node).
        let mut member_of = Vec::new();
        let mut limits = Vec::new();
        for term in &p.pod_anti_affinity.required {
            if term.topology_key != core::labels::HOSTNAME {
                continue;
            }
            let sel = term.label_selector.with_match_label_keys(&term.match_label_keys, &p.labels);
            let name = format!("anti|{}|{sel:?}", p.namespace);
            let n = groups.len() as u32;
            let g = *groups.entry(name).or_insert(n);
            if sel.matches(&p.labels) {
                member_of.push(g);
                limits.push((g, 1));
            } else {
                limits.push((g, 0));
            }
        }
        for c in &p.topology_spread {
            if c.topology_key != core::labels::HOSTNAME || c.when_unsatisfiable != core::WhenUnsatisfiable::DoNotSchedule {
                continue;
            }
            let sel = c.label_selector.with_match_label_keys(&c.match_label_keys, &p.labels);
            let name = format!("spread|{}|{sel:?}", p.namespace);
            let n = groups.len() as u32;
            let g = *groups.entry(name).or_insert(n);
            if sel.matches(&p.labels) {
                member_of.push(g);
            }
            limits.push((g, c.max_skew.max(1) as u32));
        }
        let set = match set_index.get(&ok) {
            Some(s) => *s,
            None => {
                let id = shape_sets.len() as u32;
                shape_sets.push(ShapeSet::from_ids(nshapes, ok.iter().copied()));
                set_index.insert(ok.clone(), id);
                id
            }
        };
        items.push(PackItem {
            pods: vec![pi as u32],
            requests: req,
            shape_set: set,
            member_of,
            limits,
        });
    }
    let problem = PackingProblem {
        shapes: shape_infos.iter().map(|s| s.shape.clone()).collect(),
        pools,
        shape_sets,
        items,
        groups: groups.len() as u32,
    };
    let plan = planner.plan(&problem, None);
    for node in &plan.nodes {
        let Some(shape) = problem.shapes.get(node.shape as usize) else {
            continue;
        };
        let pods = node
            .items
            .iter()
            .filter_map(|i| problem.items.get(*i as usize))
            .flat_map(|it| it.pods.iter())
            .filter_map(|pi| snap.pods.get(*pi as usize))
            .map(pref)
            .collect();
        out.launches.push(LaunchRequest {
            nodepool: problem.pools.get(shape.pool as usize).map(|p| p.name.clone()),
            instance_type: shape.instance_type_name.clone(),
            zone: shape.zone.clone(),
            capacity_type: shape.capacity_type,
            price: shape.price,
            pods,
        });
    }
    for (item, reason) in &plan.unplaced {
        if let Some(it) = problem.items.get(*item as usize) {
            for pi in &it.pods {
                if let Some(p) = snap.pods.get(*pi as usize) {
                    out.unschedulable.push(core::Unschedulable {
                        pod: pref(p),
                        reason: reason.clone(),
                    });
                }
            }
        }
    }
    for (pi, reason) in unplaced_reason {
        if let Some(p) = snap.pods.get(pi) {
            out.unschedulable.push(core::Unschedulable { pod: pref(p), reason });
        }
    }
    out
}
