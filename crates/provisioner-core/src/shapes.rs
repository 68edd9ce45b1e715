//! Launch shapes: NodePool x instance type x available offering, with concrete labels,
//! taints and allocatable after daemonset overhead.
//!
//! Working on concrete shapes keeps every check a plain label match, which is both exact and
//! fast; the requirements algebra is used where a NodeClaim's requirements are reported.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::model::{
    DaemonSet, InstanceType, NodePool, Offering, Operator, Resources, Snapshot, Taint, labels,
};
use crate::packing::{PackPool, Shape, ShapeId, size_order, unlimited_where_zero};
use crate::requirements::{is_well_known, terms_match};
use crate::resources::pod_requests;
use crate::taints::tolerates_all;

/// Extended-resource name under which volumes of a CSI driver are counted.
pub fn csi_resource(driver: &str) -> String {
    format!("csi.attach/{driver}")
}

/// Static data about every launch shape.
#[derive(Debug, Clone, Default)]
pub struct Shapes {
    /// Shared with every packing problem built from this state (not copied per round).
    pub shapes: Arc<Vec<Shape>>,
    /// Shape ids largest first (CPU, then memory, then id): the order the greedy scans new
    /// nodes' candidate shapes in, sorted once here instead of on every packing run.
    pub by_size: Arc<Vec<ShapeId>>,
    /// Shape ids cheapest first ([`crate::packing::price_order`]): every packing run and
    /// every consolidation simulation reads it, so it is sorted once here.
    pub by_price: Arc<Vec<ShapeId>>,
    pub labels: Vec<BTreeMap<String, String>>,
    pub taints: Vec<Vec<Taint>>,
    /// NodePools in weight order (highest first, then name), as packing pools.
    pub pools: Vec<PackPool>,
    /// Index of each packing pool in `snapshot.nodepools`.
    pub pool_source: Vec<usize>,
    /// Why a NodePool has no shapes at all, for reasons.
    pub empty_pools: Vec<String>,
    /// The distinct zones of the shapes, numbered in the order shapes first name them.
    pub zones: Vec<String>,
    /// Each shape's zone as an index into `zones`. Assembling a launch's NodeClaims needs
    /// it, and working it out there by comparing names per shape was nearly a fifth of a
    /// consolidation simulation (`benches/README.md`, scale round 12).
    pub zone_of: Vec<u32>,
}

/// The order NodePools are tried in: weight descending, then name.
pub fn pool_order(pools: &[NodePool]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..pools.len()).collect();
    idx.sort_by(|a, b| {
        let (pa, pb) = (pools.get(*a), pools.get(*b));
        match (pa, pb) {
            (Some(pa), Some(pb)) => pb.weight.cmp(&pa.weight).then(pa.name.cmp(&pb.name)),
            _ => a.cmp(b),
        }
    });
    idx
}

fn shape_labels(
    pool: &NodePool,
    it: &InstanceType,
    off: &Offering,
) -> Option<BTreeMap<String, String>> {
    let mut l = it.labels.clone();
    l.insert(labels::INSTANCE_TYPE.into(), it.name.clone());
    l.insert(labels::ZONE.into(), off.zone.clone());
    l.insert(
        labels::CAPACITY_TYPE.into(),
        off.capacity_type.as_label().into(),
    );
    for (k, v) in &pool.labels {
        l.insert(k.clone(), v.clone());
    }
    l.insert(labels::NODEPOOL.into(), pool.name.clone());
    // Requirements on keys nothing defines pin the label to their (first) value, as a
    // single-valued NodeClaim requirement becomes a node label.
    for r in &pool.requirements {
        if !l.contains_key(&r.key)
            && r.operator == Operator::In
            && let Some(first) = r.values.iter().min()
        {
            l.insert(r.key.clone(), first.clone());
        }
    }
    let ok = pool.requirements.iter().all(|r| {
        if l.contains_key(&r.key) {
            r.matches(&l)
        } else {
            // Undefined on the shape: fine for NotIn/DoesNotExist, and for a well-known label.
            matches!(r.operator, Operator::NotIn | Operator::DoesNotExist)
                || is_well_known(&r.key)
                || r.operator == Operator::Exists
        }
    });
    ok.then_some(l)
}

/// Requests of the daemonset pods that would run on a node with these labels and taints.
pub fn daemonset_overhead(
    daemonsets: &[DaemonSet],
    node_labels: &BTreeMap<String, String>,
    taints: &[Taint],
) -> Resources {
    let mut total = Resources::default();
    for ds in daemonsets {
        let p = &ds.pod;
        let selected = p
            .node_selector
            .iter()
            .all(|(k, v)| node_labels.get(k) == Some(v))
            && terms_match(&p.required_node_affinity, node_labels);
        if selected && tolerates_all(taints, &p.tolerations, false) {
            total.add_assign(&pod_requests(p));
        }
    }
    total
}

/// Everything [`Shapes::build`] reads, as owned values to compare against.
#[derive(Debug, PartialEq)]
struct ShapesInput {
    nodepools: Vec<NodePool>,
    instance_types: Vec<InstanceType>,
    daemonsets: Vec<DaemonSet>,
    /// Only for NodePools with limits: the others do not read it.
    limited_capacity: BTreeMap<String, Resources>,
    csi_drivers: BTreeSet<String>,
}

impl ShapesInput {
    fn matches(
        &self,
        snapshot: &Snapshot,
        limited: &BTreeMap<String, Resources>,
        csi: &BTreeSet<String>,
    ) -> bool {
        self.nodepools == snapshot.nodepools
            && self.instance_types == snapshot.instance_types
            && self.daemonsets == snapshot.daemonsets
            && &self.limited_capacity == limited
            && &self.csi_drivers == csi
    }
}

thread_local! {
    /// The last shapes built on this thread and what they were built from.
    static LAST_SHAPES: RefCell<Option<(ShapesInput, Arc<Shapes>)>> = const { RefCell::new(None) };
}

impl Shapes {
    /// Whether shape `s` has room for `requests` on top of `used` (false for an unknown id).
    pub fn has_room(&self, s: ShapeId, used: &Resources, requests: &Resources) -> bool {
        self.shapes
            .get(s as usize)
            .is_some_and(|sh| used.fits_with_all(requests, &sh.allocatable))
    }

    /// [`Shapes::build`], memoised per thread on its exact inputs. Consecutive decisions of a
    /// controller or simulator see the same NodePools, catalog and daemonsets nearly every
    /// time, and building the shapes (labels, taints, daemonset overhead per offering) was a
    /// tenth of a consolidation decision. Same inputs, same shapes: the result does not
    /// depend on the cache.
    pub fn build_shared(
        snapshot: &Snapshot,
        existing_capacity: &BTreeMap<String, Resources>,
        csi_drivers: &BTreeSet<String>,
    ) -> Arc<Shapes> {
        let limited: BTreeMap<String, Resources> = existing_capacity
            .iter()
            .filter(|(pool, _)| {
                snapshot
                    .nodepools
                    .iter()
                    .any(|p| &p.name == *pool && p.limits.is_some())
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let hit = LAST_SHAPES.with(|last| {
            last.borrow()
                .as_ref()
                .filter(|(input, _)| input.matches(snapshot, &limited, csi_drivers))
                .map(|(_, shapes)| Arc::clone(shapes))
        });
        if let Some(shapes) = hit {
            return shapes;
        }
        let shapes = Arc::new(Shapes::build(snapshot, existing_capacity, csi_drivers));
        let input = ShapesInput {
            nodepools: snapshot.nodepools.clone(),
            instance_types: snapshot.instance_types.clone(),
            daemonsets: snapshot.daemonsets.clone(),
            limited_capacity: limited,
            csi_drivers: csi_drivers.clone(),
        };
        LAST_SHAPES.with(|last| *last.borrow_mut() = Some((input, Arc::clone(&shapes))));
        shapes
    }

    /// Builds every shape of the snapshot. `csi_drivers` are the drivers pending pods use:
    /// shapes get an attach allowance for each (the type's limit, or unlimited).
    pub fn build(
        snapshot: &Snapshot,
        existing_capacity: &BTreeMap<String, Resources>,
        csi_drivers: &BTreeSet<String>,
    ) -> Shapes {
        let mut out = Shapes::default();
        let mut shapes: Vec<Shape> = Vec::new();
        for (rank, pi) in pool_order(&snapshot.nodepools).into_iter().enumerate() {
            let Some(pool) = snapshot.nodepools.get(pi) else {
                continue;
            };
            let pack_pool = out.pools.len() as u32;
            let mut min_values = BTreeMap::new();
            for r in &pool.requirements {
                if let Some(m) = r.min_values {
                    min_values.insert(r.key.clone(), m);
                }
            }
            let remaining = pool.limits.as_ref().map(|lim| {
                let mut rem = unlimited_where_zero(lim);
                if let Some(used) = existing_capacity.get(&pool.name) {
                    let keep_max = |v: i64, u: i64| {
                        if v == i64::MAX {
                            v
                        } else {
                            v.saturating_sub(u)
                        }
                    };
                    rem.cpu_milli = keep_max(rem.cpu_milli, used.cpu_milli);
                    rem.memory = keep_max(rem.memory, used.memory);
                    rem.pods = keep_max(rem.pods, used.pods);
                    rem.ephemeral_storage = keep_max(rem.ephemeral_storage, used.ephemeral_storage);
                    for (k, v) in rem.extended.iter_mut() {
                        *v = v.saturating_sub(used.extended.get(k).copied().unwrap_or(0));
                    }
                }
                rem
            });
            out.pools.push(PackPool {
                name: pool.name.clone(),
                rank: rank as u32,
                remaining,
                min_values: min_values.clone(),
            });
            out.pool_source.push(pi);
            let before = shapes.len();
            for (ti, it) in snapshot.instance_types.iter().enumerate() {
                if let Some(allowed) = &pool.instance_types
                    && !allowed.contains(&it.name)
                {
                    continue;
                }
                let base_alloc = it.allocatable();
                for off in it
                    .offerings
                    .iter()
                    .filter(|o| o.available && o.price.is_finite() && o.price >= 0.0)
                {
                    let Some(l) = shape_labels(pool, it, off) else {
                        continue;
                    };
                    let mut taints = pool.taints.clone();
                    taints.extend(it.taints.iter().cloned());
                    let ds = daemonset_overhead(&snapshot.daemonsets, &l, &taints);
                    let mut alloc = base_alloc.sub(&ds);
                    for d in csi_drivers {
                        let lim = it.csi_limits.get(d).copied().unwrap_or(i64::MAX / 4);
                        alloc.extended.insert(csi_resource(d), lim);
                    }
                    let min_value_labels = min_values
                        .keys()
                        .filter_map(|k| l.get(k).map(|v| (k.clone(), v.clone())))
                        .collect();
                    shapes.push(Shape {
                        pool: pack_pool,
                        instance_type: ti as u32,
                        instance_type_name: it.name.clone(),
                        zone: off.zone.clone(),
                        capacity_type: off.capacity_type,
                        price: off.price,
                        capacity: it.capacity.clone(),
                        allocatable: alloc,
                        daemonset_requests: ds,
                        min_value_labels,
                    });
                    out.labels.push(l);
                    out.taints.push(taints);
                }
            }
            if shapes.len() == before {
                out.empty_pools.push(pool.name.clone());
            }
        }
        let mut zones = crate::interner::Interner::default();
        out.zone_of = shapes.iter().map(|sh| zones.id(sh.zone.as_str())).collect();
        out.zones = zones
            .into_values()
            .into_iter()
            .map(str::to_string)
            .collect();
        out.by_size = Arc::new(size_order(&shapes));
        out.by_price = Arc::new(crate::packing::price_order(&shapes));
        out.shapes = Arc::new(shapes);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CapacityType;

    fn snapshot() -> Snapshot {
        Snapshot {
            nodepools: vec![NodePool::new("default", 0)],
            instance_types: vec![InstanceType::new(
                "m.large",
                2000,
                8 << 30,
                110,
                vec![Offering::new("zone-a", CapacityType::OnDemand, 0.1)],
            )],
            ..Snapshot::default()
        }
    }

    #[test]
    fn shared_shapes_are_reused_only_for_the_same_inputs() {
        let none = BTreeMap::new();
        let csi = BTreeSet::new();
        let s = snapshot();
        let a = Shapes::build_shared(&s, &none, &csi);
        let b = Shapes::build_shared(&s, &none, &csi);
        assert!(Arc::ptr_eq(&a, &b), "same inputs: the shapes are reused");
        assert_eq!(*a.shapes, *Shapes::build(&s, &none, &csi).shapes);

        // Existing capacity of a pool without limits changes nothing.
        let mut used = BTreeMap::new();
        used.insert("default".to_string(), Resources::new(1000, 0));
        assert!(Arc::ptr_eq(&a, &Shapes::build_shared(&s, &used, &csi)));

        // A new price is a new catalog.
        let mut cheaper = s.clone();
        cheaper.instance_types[0].offerings[0].price = 0.05;
        let c = Shapes::build_shared(&cheaper, &none, &csi);
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(c.shapes[0].price, 0.05);

        // With limits, the capacity in use changes what is left.
        let mut limited = s.clone();
        limited.nodepools[0].limits = Some(Resources::new(64_000, 0));
        let d = Shapes::build_shared(&limited, &none, &csi);
        let e = Shapes::build_shared(&limited, &used, &csi);
        assert!(!Arc::ptr_eq(&d, &e));
    }
}
