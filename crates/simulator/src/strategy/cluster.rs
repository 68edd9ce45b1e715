//! Cluster views and launch shapes from a core snapshot, for the Cluster-Autoscaler-like
//! baseline (the core strategies use the core scheduler's own).

use std::collections::BTreeMap;

use provisioner_core as core;
use provisioner_core::packing::{PackPool, Shape};
use provisioner_core::requirements::terms_match;
use provisioner_core::resources::pod_requests;
use provisioner_core::taints::tolerates_all;

use crate::catalog;
use crate::predicates::{NodeView, PodMark};

/// Views of the snapshot's nodes (in-flight nodes take pods too), in snapshot order.
pub fn views(snap: &core::Snapshot) -> (Vec<NodeView>, BTreeMap<String, usize>) {
    let mut idx = BTreeMap::new();
    let mut out = Vec::with_capacity(snap.nodes.len());
    for (i, n) in snap.nodes.iter().enumerate() {
        idx.insert(n.name.clone(), i);
        let mut v = NodeView::new(
            &n.name,
            n.labels.clone(),
            n.taints.clone(),
            n.allocatable.clone(),
        );
        v.schedulable = !n.marked_for_deletion;
        out.push(v);
    }
    for (pi, p) in snap.pods.iter().enumerate() {
        if let Some(v) = p
            .node_name
            .as_ref()
            .and_then(|n| idx.get(n))
            .and_then(|i| out.get_mut(*i))
        {
            v.add_pod(PodMark::of(pi, p), &pod_requests(p));
        }
    }
    (out, idx)
}

/// Requests of the daemonsets that would land on a node with these labels and taints.
pub fn daemonset_requests(
    snap: &core::Snapshot,
    labels: &BTreeMap<String, String>,
    taints: &[core::Taint],
) -> core::Resources {
    let mut r = core::Resources::default();
    for ds in &snap.daemonsets {
        let p = &ds.pod;
        let selected = p
            .node_selector
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && (p.required_node_affinity.is_empty()
                || terms_match(&p.required_node_affinity, labels));
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
            for n in snap
                .nodes
                .iter()
                .filter(|n| n.nodepool.as_deref() == Some(pool.name.as_str()))
            {
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
            if let Some(allowed) = &pool.instance_types
                && !allowed.contains(&it.name)
            {
                continue;
            }
            let alloc = catalog::allocatable(it);
            for o in it.offerings.iter().filter(|o| o.available) {
                let mut labels = it.labels.clone();
                labels.extend(pool.labels.clone());
                labels.insert(core::labels::INSTANCE_TYPE.into(), it.name.clone());
                labels.insert(core::labels::ZONE.into(), o.zone.clone());
                labels.insert(
                    core::labels::CAPACITY_TYPE.into(),
                    o.capacity_type.as_label().into(),
                );
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
