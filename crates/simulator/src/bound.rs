//! The lower bound over time: what any cluster that runs every present pod must cost, per
//! hour, at each instant of a run, computed once per world and shared by every strategy's
//! report (which pods are present depends on the workload only, never on the strategy).
//!
//! Every bound here is a set of **prices per pod** that no node a strategy can launch beats:
//! the pods any one node holds are together worth at most its price. Then whatever nodes run
//! the pods cost at least the pods' prices summed. At each instant the bound is the largest of:
//!
//! - **Per-resource**: a pod's CPU (memory, GPUs) times the catalog's cheapest price per
//!   allocatable vCPU (GiB, GPU), for the pods present. A node's pods request at most its
//!   allocatable, which costs at least that rate. Exact at every instant and cheap.
//! - **LP, whole interval**: the horizon is cut into at most [`MAX_INTERVALS`] intervals (a
//!   multiple of the report's sample step). The pods present during the whole of an interval
//!   (arrived at or before its start, gone at or after its end) run somewhere at every instant
//!   of it, so the cluster costs at least the core's LP bound of packing them from scratch
//!   ([`provisioner_core::optimize::packing_lower_bound`]: the pattern LP by column generation,
//!   Farley-certified, so valid whenever its work limit stops it) throughout the interval.
//! - **LP prices at the instant**: the prices behind an LP bound for a pod set `S` are feasible
//!   for every node holding a subset of `S`. At any instant the present pods include, per
//!   class, `min(count in S, count present)` pods of `S`, and those alone cost at least their
//!   prices. So the prices of the nearby intervals' solves, and of each interval's busiest
//!   instant, are charged to the pods present at every instant: this follows short-lived pods
//!   the whole-interval sets miss.
//!
//! The LP's shapes are every (NodePool x instance type x available offering) a strategy can
//! launch (the core's shapes and the Cluster-Autoscaler model's, together), with the room the
//! engine's nodes really have for pods (allocatable minus the daemonsets that land on them). A
//! pod may use a shape when the engine's kube-scheduler filter would let it onto a node of it
//! (nodeSelector, required node affinity, taints; hostname requirements dropped, since a new
//! node's name is not known in advance). Everything else is relaxed (pod affinity, spread,
//! NodePool limits and weights), which only lowers the bound.
//!
//! Existing nodes (scenario `existingNodes`, kubectl snapshots) are capacity outside the
//! catalog, possibly cheaper (a node of an unknown type is priced at 0). One can hold pods worth
//! at most `V` by a set of prices (its room filled at the best price per unit of each resource)
//! while costing its price `p`, so it lowers the cluster's cost below the prices' sum by at most
//! `V - p`; that excess, summed over the existing nodes, is subtracted from every bound. It is
//! zero for existing nodes of catalog types at catalog prices under the per-resource prices.
//!
//! The bound assumes every present pod runs: a strategy keeps a new pod pending for its batch
//! window and the node's launch (or for good, if it cannot place it), so it can pay less than
//! the bound for a while; reports show this as a ratio slightly under 1.
//!
//! Cost: the pods are grouped into classes (requests and usable shapes); pod sets with equal
//! class counts share one solve, at most [`MAX_SOLVES`] are solved (with rayon, on whatever
//! pool the caller runs in: [`crate::run::execute`] gives each job a one-thread pool, so there
//! the bound is one job next to the runs), each with small deterministic work limits
//! ([`lp_config`]) and a time budget as a safety net only, so the bound is a pure function of
//! the world.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use provisioner_core as core;
use provisioner_core::optimize::{BoundMethod, OptimizerConfig, packing_lower_bound};
use provisioner_core::packing::{
    PackItem, PackPool, PackingProblem, Shape, ShapeSet, price_order, size_order,
};
use provisioner_core::requirements::terms_match;
use provisioner_core::resources::pod_requests;
use provisioner_core::taints::tolerates_all;
use rayon::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::catalog;
use crate::engine::RunResult;
use crate::strategy::cluster;
use crate::world::World;

/// Most intervals the LP part cuts the horizon into: enough to follow the load through a
/// 150-day trace (12 h intervals), few enough that the bound stays a small fraction of a run's
/// time.
pub const MAX_INTERVALS: i64 = 300;

/// Work limits of one LP bound: small, so a whole trace costs a few seconds, and
/// deterministic (the time budget only guards against pathological inputs).
pub fn lp_config() -> OptimizerConfig {
    OptimizerConfig {
        // A safety net only: the work limits below end every solve long before it.
        time_budget_ms: 10_000,
        max_iterations: 10,
        columns_per_iteration: 10,
        knapsack_nodes: 2_000,
        max_classes: 120,
        ..OptimizerConfig::default()
    }
}

/// The bound of one world, as the report shows it (deterministic figures only).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BoundSummary {
    pub seed: u64,
    /// The bound integrated over the run: every run of this world has it as
    /// `lower_bound_cost`.
    pub cost: f64,
    /// The per-resource part alone, integrated: what reports used before the LP part (the
    /// same figure unless existing nodes are priced below the catalog).
    pub per_resource_cost: f64,
    /// Length of the LP part's intervals, seconds, and how many there are.
    pub interval_seconds: i64,
    pub intervals: u32,
    /// Distinct pod sets solved (intervals with the same pods share one solve).
    pub lp_solves: u32,
    /// Solves where column generation gave nothing and the price-per-unit bound stood in.
    pub lp_fallbacks: u32,
    /// Solves stopped by the time budget rather than a work limit (then the figures may
    /// differ between runs; normally 0).
    pub lp_budget_hits: u32,
    /// Seconds of the run in which the LP part is above the per-resource bound.
    pub lp_tighter_seconds: i64,
    /// Pods no launchable shape and no existing node can hold (too large, or their
    /// nodeSelector, node affinity or tolerations match none): no cluster runs them, so the
    /// bound leaves them out and they are counted here instead.
    #[serde(default)]
    pub unschedulable_pods: u32,
    /// Up to [`MAX_UNSCHEDULABLE_EXAMPLES`] of them, `namespace/name: why`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unschedulable_examples: Vec<String>,
}

/// How many unschedulable pods a bound summary names.
pub const MAX_UNSCHEDULABLE_EXAMPLES: usize = 10;

/// A piecewise-constant bound over `[0, end]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LowerBound {
    /// `(t, rate per hour)`: the rate from `t` until the next point (the last until `end`).
    pub points: Vec<(i64, f64)>,
    /// The per-resource part alone, the same way.
    pub per_resource_points: Vec<(i64, f64)>,
    pub end: i64,
    pub summary: BoundSummary,
    /// Wall-clock seconds the computation took (not deterministic).
    pub seconds: f64,
}

impl LowerBound {
    /// The rate at `t`, after the events at `t` (at `end`, the rate just before it).
    pub fn rate_at(&self, t: i64) -> f64 {
        value_at(&self.points, t, self.end)
    }

    /// The per-resource part at `t`.
    pub fn per_resource_at(&self, t: i64) -> f64 {
        value_at(&self.per_resource_points, t, self.end)
    }
}

fn value_at(points: &[(i64, f64)], t: i64, end: i64) -> f64 {
    let t = if t >= end { end - 1 } else { t };
    match points.partition_point(|p| p.0 <= t) {
        0 => 0.0,
        i => points.get(i - 1).map_or(0.0, |p| p.1),
    }
}

/// Fills a run's lower-bound figures (per sample, the integral, the ratio) from its world's
/// bound.
pub fn apply(run: &mut RunResult, lb: &LowerBound) {
    for s in &mut run.series {
        s.lower_bound_per_hour = lb.rate_at(s.t);
        s.per_resource_bound_per_hour = lb.per_resource_at(s.t);
    }
    run.summary.lower_bound_cost = lb.summary.cost;
    run.summary.cost_over_lower_bound = if lb.summary.cost > 0.0 {
        run.summary.total_cost / lb.summary.cost
    } else {
        0.0
    };
    run.timing.bound_seconds = lb.seconds;
}

/// Cheapest price per allocatable vCPU, per GiB and per GPU over the catalog (any offering a
/// strategy could launch, daemonsets not subtracted: a lower rate, so still a bound).
pub fn unit_prices(w: &World) -> (f64, f64, f64) {
    let (mut c, mut m, mut g) = (f64::INFINITY, f64::INFINITY, f64::INFINITY);
    for it in &w.instance_types {
        let a = catalog::allocatable(it);
        for o in it.offerings.iter().filter(|o| o.available) {
            if a.cpu_milli > 0 {
                c = c.min(o.price / (a.cpu_milli as f64 / 1000.0));
            }
            if a.memory > 0 {
                m = m.min(o.price / (a.memory as f64 / GIB));
            }
            if let Some(gpus) = a.extended.get(catalog::GPU).filter(|v| **v > 0) {
                g = g.min(o.price / *gpus as f64);
            }
        }
    }
    let fin = |x: f64| if x.is_finite() { x } else { 0.0 };
    (fin(c), fin(m), fin(g))
}

const GIB: f64 = (1u64 << 30) as f64;

/// Per-resource rate for a demand (CPU milli, memory bytes, GPUs), less the existing nodes'
/// excess per resource.
fn per_resource_rate(d: (i64, i64, i64), u: (f64, f64, f64), x: (f64, f64, f64)) -> f64 {
    let cpu = d.0 as f64 / 1000.0 * u.0 - x.0;
    let mem = d.1 as f64 / GIB * u.1 - x.1;
    let gpu = d.2 as f64 * u.2 - x.2;
    cpu.max(mem).max(gpu).max(0.0)
}

/// A launchable node shape as the bound sees it.
struct BShape {
    shape: Shape,
    labels: BTreeMap<String, String>,
    taints: Vec<core::Taint>,
}

/// Pods that are interchangeable for the bound.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ClassKey {
    req: core::Resources,
    shapes: ShapeSet,
    existing: ShapeSet,
}

struct Class {
    req: core::Resources,
    /// Index into the problem's shape sets.
    set: u32,
    /// Fits some shape of its set: takes part in the LP.
    placeable: bool,
    /// Fits some shape or some existing node: some cluster runs it, so it counts in the
    /// bound. `None` when it does; otherwise why not.
    unrunnable: Option<String>,
    existing: ShapeSet,
}

/// An existing node: its room for pods and its price.
struct Existing {
    room: core::Resources,
    price: f64,
}

/// Every (pool, instance type, offering) any strategy can launch, with the engine's labels,
/// taints and room for pods. The core's shapes and the CAS model's are merged by key, so a
/// NodePool requirement one of them reads more loosely still counts.
fn launchable_shapes(w: &World) -> (Vec<BShape>, Vec<PackPool>) {
    let snap = core::Snapshot {
        instance_types: w.instance_types.clone(),
        nodepools: w.nodepools.clone(),
        daemonsets: w.daemonsets.clone(),
        ..Default::default()
    };
    let mut keys: Vec<(String, String, String, core::CapacityType, f64)> = Vec::new();
    let core_shapes =
        core::shapes::Shapes::build(&snap, &BTreeMap::new(), &std::collections::BTreeSet::new());
    for s in core_shapes.shapes.iter() {
        if let Some(p) = core_shapes.pools.get(s.pool as usize) {
            keys.push((
                p.name.clone(),
                s.instance_type_name.clone(),
                s.zone.clone(),
                s.capacity_type,
                s.price,
            ));
        }
    }
    let (cas_shapes, cas_pools) = cluster::shapes(&snap);
    for s in &cas_shapes {
        if let Some(p) = cas_pools.get(s.shape.pool as usize) {
            keys.push((
                p.name.clone(),
                s.shape.instance_type_name.clone(),
                s.shape.zone.clone(),
                s.shape.capacity_type,
                s.shape.price,
            ));
        }
    }
    keys.sort_by(|a, b| {
        (&a.0, &a.1, &a.2, a.3.as_label())
            .cmp(&(&b.0, &b.1, &b.2, b.3.as_label()))
            .then(a.4.total_cmp(&b.4))
    });
    keys.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1 && a.2 == b.2 && a.3 == b.3);
    let mut pools: Vec<PackPool> = Vec::new();
    let mut pool_index: BTreeMap<String, u32> = BTreeMap::new();
    let mut out = Vec::new();
    for (pool_name, type_name, zone, ct, price) in keys {
        let (Some(pool), Some((ti, it))) = (
            w.nodepools.iter().find(|p| p.name == pool_name),
            w.instance_types
                .iter()
                .enumerate()
                .find(|(_, t)| t.name == type_name),
        ) else {
            continue;
        };
        // The labels and taints the engine gives a node it launches (hostname aside).
        let mut labels = it.labels.clone();
        labels.extend(pool.labels.clone());
        labels.insert(core::labels::NODEPOOL.into(), pool.name.clone());
        labels.insert(core::labels::INSTANCE_TYPE.into(), it.name.clone());
        labels.insert(core::labels::ZONE.into(), zone.clone());
        labels.insert(core::labels::CAPACITY_TYPE.into(), ct.as_label().into());
        let mut taints = it.taints.clone();
        taints.extend(pool.taints.iter().cloned());
        let ds = daemonset_requests(w, &labels, &taints, true);
        let alloc = catalog::allocatable(it);
        if !ds.fits_in(&alloc) {
            continue; // the daemonsets fill it: it holds no pod
        }
        let pi = *pool_index.entry(pool.name.clone()).or_insert_with(|| {
            pools.push(PackPool::unlimited(&pool.name));
            (pools.len() - 1) as u32
        });
        out.push(BShape {
            shape: Shape {
                pool: pi,
                instance_type: ti as u32,
                instance_type_name: it.name.clone(),
                zone,
                capacity_type: ct,
                price,
                capacity: it.capacity.clone(),
                allocatable: alloc.sub(&ds),
                daemonset_requests: ds,
                min_value_labels: BTreeMap::new(),
            },
            labels,
            taints,
        });
    }
    (out, pools)
}

/// Requests of the daemonsets the engine puts on a node with these labels and taints. With
/// `unknown_hostname`, a daemonset whose selection mentions the hostname is left out (a new
/// node's name is not known, and leaving it out can only enlarge the room).
fn daemonset_requests(
    w: &World,
    labels: &BTreeMap<String, String>,
    taints: &[core::Taint],
    unknown_hostname: bool,
) -> core::Resources {
    let mut r = core::Resources::default();
    for d in &w.daemonsets {
        let p = &d.pod;
        if unknown_hostname && mentions_hostname(p) {
            continue;
        }
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

fn mentions_hostname(p: &core::Pod) -> bool {
    p.node_selector.contains_key(core::labels::HOSTNAME)
        || p.required_node_affinity
            .iter()
            .flatten()
            .any(|r| r.key == core::labels::HOSTNAME)
}

/// The engine's kube-scheduler filter without resources: nodeSelector, required node
/// affinity, taints. With `unknown_hostname`, hostname requirements are dropped.
fn label_fit(
    p: &core::Pod,
    labels: &BTreeMap<String, String>,
    taints: &[core::Taint],
    unknown_hostname: bool,
) -> bool {
    let skip = |k: &str| unknown_hostname && k == core::labels::HOSTNAME;
    let selector_ok = p
        .node_selector
        .iter()
        .all(|(k, v)| skip(k) || labels.get(k) == Some(v));
    let affinity_ok = p.required_node_affinity.is_empty()
        || p.required_node_affinity
            .iter()
            .any(|term| term.iter().all(|r| skip(&r.key) || r.matches(labels)));
    selector_ok && affinity_ok && tolerates_all(taints, &p.tolerations, false)
}

/// Everything the bound needs about a world, built once.
struct Prepared {
    problem_shapes: Arc<Vec<Shape>>,
    by_size: Arc<Vec<core::packing::ShapeId>>,
    by_price: Arc<Vec<core::packing::ShapeId>>,
    pools: Vec<PackPool>,
    shape_sets: Vec<ShapeSet>,
    classes: Vec<Class>,
    existing: Vec<Existing>,
    /// Per arrival: (arrive, leave or i64::MAX, class), clamped at 0.
    spans: Vec<(i64, i64, u32)>,
    /// Per arrival: its requests for the per-resource demand (CPU, memory, GPUs); zero for
    /// pods nothing can run.
    demand: Vec<(i64, i64, i64)>,
    /// Arrivals nothing can run: count and the first few, `namespace/name: why`.
    unschedulable: u32,
    unschedulable_examples: Vec<String>,
}

impl Prepared {
    /// Whether the class fits some launchable shape (takes part in the LP).
    fn placeable(&self, class: u32) -> bool {
        self.classes
            .get(class as usize)
            .is_some_and(|c| c.placeable)
    }
}

fn prepare(w: &World) -> Prepared {
    let (bshapes, pools) = launchable_shapes(w);
    let n_shapes = bshapes.len();
    let existing_views: Vec<(Existing, &core::Node)> = w
        .existing_nodes
        .iter()
        .map(|n| {
            let ds = daemonset_requests(w, &n.labels, &n.taints, false);
            let mut room = n.allocatable.sub(&ds);
            clamp_non_negative(&mut room);
            (
                Existing {
                    room,
                    price: n.price,
                },
                n,
            )
        })
        .collect();
    // Shape and existing-node compatibility per distinct constraint signature.
    let mut by_signature: HashMap<String, (ShapeSet, ShapeSet)> = HashMap::new();
    let mut class_index: HashMap<ClassKey, u32> = HashMap::new();
    let mut classes: Vec<Class> = Vec::new();
    let mut shape_sets: Vec<ShapeSet> = Vec::new();
    let mut set_index: HashMap<ShapeSet, u32> = HashMap::new();
    let mut spans = Vec::with_capacity(w.arrivals.len());
    let mut demand = Vec::with_capacity(w.arrivals.len());
    let mut unschedulable = 0u32;
    let mut unschedulable_examples = Vec::new();
    for a in &w.arrivals {
        let p = &a.pod;
        let sig = format!(
            "{:?}|{:?}|{:?}|{:?}",
            p.node_selector, p.required_node_affinity, p.tolerations, a.bound_to
        );
        let (shapes, existing) = by_signature
            .entry(sig)
            .or_insert_with(|| {
                let shapes = ShapeSet::from_ids(
                    n_shapes,
                    bshapes
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| label_fit(p, &s.labels, &s.taints, true))
                        .map(|(i, _)| i as u32),
                );
                let existing = ShapeSet::from_ids(
                    existing_views.len(),
                    existing_views
                        .iter()
                        .enumerate()
                        .filter(|(_, (_, n))| {
                            a.bound_to.as_deref() == Some(n.name.as_str())
                                || label_fit(p, &n.labels, &n.taints, false)
                        })
                        .map(|(i, _)| i as u32),
                );
                (shapes, existing)
            })
            .clone();
        let req = pod_requests(p);
        let key = ClassKey {
            req: req.clone(),
            shapes: shapes.clone(),
            existing: existing.clone(),
        };
        let class = match class_index.get(&key) {
            Some(c) => *c,
            None => {
                let set = *set_index.entry(shapes.clone()).or_insert_with(|| {
                    shape_sets.push(shapes.clone());
                    (shape_sets.len() - 1) as u32
                });
                let placeable = shapes.iter().any(|s| {
                    bshapes
                        .get(s as usize)
                        .is_some_and(|b| req.fits_in(&b.shape.allocatable))
                });
                let on_existing = existing.iter().any(|e| {
                    existing_views.get(e as usize).is_some_and(|(x, n)| {
                        a.bound_to.as_deref() == Some(n.name.as_str()) || req.fits_in(&x.room)
                    })
                });
                let unrunnable = (!placeable && !on_existing).then(|| {
                    if shapes.is_empty() && existing.is_empty() {
                        "no launchable node type or existing node matches its nodeSelector, node affinity and tolerations".to_string()
                    } else {
                        format!(
                            "its requests ({}) exceed every node it may use",
                            req
                        )
                    }
                });
                classes.push(Class {
                    req: req.clone(),
                    set,
                    placeable,
                    unrunnable,
                    existing,
                });
                let c = (classes.len() - 1) as u32;
                class_index.insert(key, c);
                c
            }
        };
        match classes
            .get(class as usize)
            .and_then(|c| c.unrunnable.as_ref())
        {
            None => demand.push((
                req.cpu_milli,
                req.memory,
                req.extended.get(catalog::GPU).copied().unwrap_or(0),
            )),
            Some(why) => {
                demand.push((0, 0, 0));
                unschedulable += 1;
                if unschedulable_examples.len() < MAX_UNSCHEDULABLE_EXAMPLES {
                    unschedulable_examples.push(format!("{}/{}: {why}", p.namespace, p.name));
                }
            }
        }
        let at = a.at.max(0);
        let leave = a.leave.map_or(i64::MAX, |l| l.max(at));
        spans.push((at, leave, class));
    }
    let problem_shapes: Vec<Shape> = bshapes.into_iter().map(|b| b.shape).collect();
    Prepared {
        by_size: Arc::new(size_order(&problem_shapes)),
        by_price: Arc::new(price_order(&problem_shapes)),
        problem_shapes: Arc::new(problem_shapes),
        pools,
        shape_sets,
        classes,
        existing: existing_views.into_iter().map(|(e, _)| e).collect(),
        spans,
        demand,
        unschedulable,
        unschedulable_examples,
    }
}

fn clamp_non_negative(r: &mut core::Resources) {
    r.cpu_milli = r.cpu_milli.max(0);
    r.memory = r.memory.max(0);
    r.pods = r.pods.max(0);
    r.ephemeral_storage = r.ephemeral_storage.max(0);
    for v in r.extended.values_mut() {
        *v = (*v).max(0);
    }
}

/// The per-resource excess of the existing nodes: room x unit price - price, when positive.
fn per_resource_excess(existing: &[Existing], u: (f64, f64, f64)) -> (f64, f64, f64) {
    let mut x = (0.0, 0.0, 0.0);
    for e in existing {
        x.0 += (e.room.cpu_milli as f64 / 1000.0 * u.0 - e.price).max(0.0);
        x.1 += (e.room.memory as f64 / GIB * u.1 - e.price).max(0.0);
        let g = e.room.extended.get(catalog::GPU).copied().unwrap_or(0);
        x.2 += (g as f64 * u.2 - e.price).max(0.0);
    }
    x
}

/// Amount of one resource dimension (`None`: CPU, memory, pods, ephemeral; `Some`: extended).
fn dims_of(classes: &[(&Class, u32, f64)]) -> Vec<Option<String>> {
    let mut ext: Vec<String> = classes
        .iter()
        .flat_map(|(c, _, _)| c.req.extended.keys().cloned())
        .collect();
    ext.sort();
    ext.dedup();
    let mut d: Vec<Option<String>> = vec![None; 4];
    d.extend(ext.into_iter().map(Some));
    d
}

fn amount(r: &core::Resources, i: usize, dim: &Option<String>) -> i64 {
    match (i, dim) {
        (_, Some(k)) => r.extended.get(k).copied().unwrap_or(0),
        (0, None) => r.cpu_milli,
        (1, None) => r.memory,
        (2, None) => r.pods,
        _ => r.ephemeral_storage,
    }
}

/// Most that `e` could hold by the prices `(class, count, price)`: the fractional knapsack of
/// each resource alone (the smallest of those), and never more than all of them.
fn existing_value(e: &Existing, ei: u32, priced: &[(&Class, u32, f64)]) -> f64 {
    let usable: Vec<&(&Class, u32, f64)> = priced
        .iter()
        .filter(|(c, _, p)| *p > 0.0 && c.existing.contains(ei) && c.req.fits_in(&e.room))
        .collect();
    let total: f64 = usable.iter().map(|(_, n, p)| *n as f64 * p).sum();
    let mut best = total;
    for (i, dim) in dims_of(priced).iter().enumerate() {
        let room = amount(&e.room, i, dim) as f64;
        let mut ratio: f64 = 0.0;
        let mut unbounded = false;
        for (c, _, p) in &usable {
            let s = amount(&c.req, i, dim);
            if s <= 0 {
                unbounded = true;
                break;
            }
            ratio = ratio.max(p / s as f64);
        }
        if !unbounded {
            best = best.min(room * ratio);
        }
    }
    best
}

/// One LP solve: the bound for its pod set and the prices behind it.
#[derive(Debug, Clone, Default)]
struct Solved {
    /// The bound for the whole pod set (per hour), existing nodes' excess subtracted.
    bound: f64,
    /// `(class, count, price)`: at any instant, `Σ price x min(count, present)` less `excess`
    /// is a bound too (any node holds at most `count` of a class from this set, and the
    /// prices are feasible for every such node).
    prices: Vec<(u32, u32, f64)>,
    excess: f64,
    fallback: bool,
    budget_hit: bool,
}

impl Solved {
    /// The bound these prices give for the present pods (`counts` per class).
    fn value(&self, counts: &[i64]) -> f64 {
        let v: f64 = self
            .prices
            .iter()
            .map(|&(c, n, p)| {
                let have = counts.get(c as usize).copied().unwrap_or(0).max(0);
                p * have.min(n as i64) as f64
            })
            .sum();
        v - self.excess
    }
}

/// The core's LP bound for a pod set given as `(class, count)`.
fn solve(prep: &Prepared, key: &[(u32, u32)], config: &OptimizerConfig) -> Solved {
    let mut items = Vec::new();
    let mut first_item = Vec::with_capacity(key.len());
    for &(c, n) in key {
        let Some(class) = prep.classes.get(c as usize) else {
            continue;
        };
        first_item.push((c, class, n, items.len()));
        for _ in 0..n {
            items.push(PackItem {
                pods: Vec::new(),
                requests: class.req.clone(),
                shape_set: class.set,
                member_of: Vec::new(),
                limits: Vec::new(),
                arrival_limits: Vec::new(),
            });
        }
    }
    let problem = PackingProblem {
        shapes: Arc::clone(&prep.problem_shapes),
        by_size: Arc::clone(&prep.by_size),
        by_price: Arc::clone(&prep.by_price),
        pools: prep.pools.clone(),
        shape_sets: prep.shape_sets.clone(),
        items,
        groups: 0,
    };
    let b = packing_lower_bound(&problem, config);
    let prices: Vec<(u32, u32, f64)> = first_item
        .iter()
        .map(|(c, _, n, i)| (*c, *n, b.item_prices.get(*i).copied().unwrap_or(0.0)))
        .filter(|(_, _, p)| *p > 0.0)
        .collect();
    let mut out = Solved {
        bound: b.bound.max(0.0),
        prices,
        excess: 0.0,
        fallback: matches!(b.method, BoundMethod::PricePerUnit),
        budget_hit: b.budget_hit,
    };
    if !prep.existing.is_empty() {
        // Existing nodes: charge their possible savings against the prices.
        let priced: Vec<(&Class, u32, f64)> = first_item
            .iter()
            .map(|(_, c, n, i)| (*c, *n, b.item_prices.get(*i).copied().unwrap_or(0.0)))
            .collect();
        let sum: f64 = priced.iter().map(|(_, n, p)| *n as f64 * p).sum();
        out.excess = prep
            .existing
            .iter()
            .enumerate()
            .map(|(ei, e)| (existing_value(e, ei as u32, &priced) - e.price).max(0.0))
            .sum();
        out.bound = (sum - out.excess).max(0.0);
    }
    out
}

/// Intervals on each side whose prices are also tried at an instant: every solve's prices
/// hold everywhere, and nearby ones fit the present pods best.
const NEIGHBOURS: i64 = 2;

/// Most LP solves per world: whole-interval sets first, then busiest instants (in interval
/// order). A deterministic cap on the work for huge workloads; the rest of the bound is
/// still valid without them.
pub const MAX_SOLVES: usize = 600;

/// The bound of one world, with intervals a multiple of the sample `step`.
pub fn compute(w: &World, seed: u64, step: i64) -> LowerBound {
    compute_with(w, seed, step, MAX_INTERVALS, &lp_config())
}

/// A pod set as `(class, count)`, classes ascending.
type PodSet = Vec<(u32, u32)>;

/// Interval length (a multiple of `step`) and count, at most `max_intervals` of them.
fn intervals(end: i64, step: i64, max_intervals: i64) -> (i64, i64) {
    let step = step.max(1);
    let max_intervals = max_intervals.max(1);
    let steps = (end + step - 1) / step;
    let k = ((steps + max_intervals - 1) / max_intervals).max(1);
    let len = step.saturating_mul(k);
    (len, ((end + len - 1) / len).max(1))
}

fn pod_set(counts: impl Iterator<Item = (u32, i64)>) -> PodSet {
    counts
        .filter(|(_, n)| *n > 0)
        .map(|(c, n)| (c, n.min(u32::MAX as i64) as u32))
        .collect()
}

/// Per interval, the pods present during the whole of it (placeable classes only): pod `i`
/// counts in interval `j` when it arrived at or before `j`'s start and leaves at or after its
/// end, i.e. for `j` in `[ceil(at/len), floor(leave/len))` (up to `n` when it stays).
fn whole_interval_sets(prep: &Prepared, end: i64, len: i64, n: i64) -> Vec<PodSet> {
    let mut diffs: Vec<Vec<(u32, i64)>> = vec![Vec::new(); n as usize + 1];
    for &(at, leave, class) in &prep.spans {
        if at > end || !prep.placeable(class) {
            continue;
        }
        let lo = (at + len - 1) / len;
        let hi = if leave >= end {
            n
        } else {
            (leave / len).min(n)
        };
        if lo < hi {
            if let Some(d) = diffs.get_mut(lo as usize) {
                d.push((class, 1));
            }
            if let Some(d) = diffs.get_mut(hi as usize) {
                d.push((class, -1));
            }
        }
    }
    let mut counts: BTreeMap<u32, i64> = BTreeMap::new();
    let mut out = Vec::with_capacity(n as usize);
    for d in diffs.iter().take(n as usize) {
        for &(c, delta) in d {
            let e = counts.entry(c).or_insert(0);
            *e += delta;
            if *e == 0 {
                counts.remove(&c);
            }
        }
        out.push(pod_set(counts.iter().map(|(c, n)| (*c, *n))));
    }
    out
}

/// The pods' arrivals and departures in time order: `(t, arrival index, arrives)`,
/// departures first at equal times.
fn events_of(prep: &Prepared, end: i64) -> Vec<(i64, usize, bool)> {
    let mut events: Vec<(i64, usize, bool)> = Vec::with_capacity(prep.spans.len() * 2);
    for (i, &(at, leave, _)) in prep.spans.iter().enumerate() {
        if at > end {
            continue;
        }
        events.push((at, i, true));
        if leave <= end {
            events.push((leave, i, false));
        }
    }
    events.sort_by_key(|e| (e.0, e.2, e.1));
    events
}

/// Instants where the present pods change, plus every interval start, below `end`.
fn boundaries_of(events: &[(i64, usize, bool)], end: i64, len: i64, n: i64) -> Vec<i64> {
    let mut b: Vec<i64> = events.iter().map(|e| e.0).filter(|t| *t < end).collect();
    b.extend((0..n).map(|j| j * len));
    b.sort_unstable();
    b.dedup();
    b
}

/// Per interval, the pods present at its busiest instant (most placeable pods; the first).
fn busiest_sets(
    prep: &Prepared,
    events: &[(i64, usize, bool)],
    boundaries: &[i64],
    len: i64,
    n: i64,
) -> Vec<PodSet> {
    let mut present = vec![0i64; prep.classes.len()];
    let mut total = 0i64;
    let mut peak: Vec<(i64, PodSet)> = vec![(0, Vec::new()); n as usize];
    let mut ev = 0;
    for &t in boundaries {
        while let Some(&(et, i, arrive)) = events.get(ev) {
            if et > t {
                break;
            }
            ev += 1;
            let c = prep.spans.get(i).map_or(u32::MAX, |s| s.2);
            if prep.placeable(c)
                && let Some(slot) = present.get_mut(c as usize)
            {
                let d = if arrive { 1 } else { -1 };
                *slot += d;
                total += d;
            }
        }
        if let Some(p) = peak.get_mut((t / len) as usize)
            && total > p.0
        {
            *p = (
                total,
                pod_set(present.iter().enumerate().map(|(c, n)| (c as u32, *n))),
            );
        }
    }
    peak.into_iter().map(|(_, s)| s).collect()
}

/// [`compute`] with explicit limits (tests and measurements).
pub fn compute_with(
    w: &World,
    seed: u64,
    step: i64,
    max_intervals: i64,
    config: &OptimizerConfig,
) -> LowerBound {
    let start = Instant::now();
    let end = w.end();
    let mut out = LowerBound {
        end,
        summary: BoundSummary {
            seed,
            ..BoundSummary::default()
        },
        ..LowerBound::default()
    };
    if end <= 0 {
        out.points.push((0, 0.0));
        out.per_resource_points.push((0, 0.0));
        return out;
    }
    let prep = prepare(w);
    out.summary.unschedulable_pods = prep.unschedulable;
    out.summary.unschedulable_examples = prep.unschedulable_examples.clone();
    let u = unit_prices(w);
    let x = per_resource_excess(&prep.existing, u);
    let (len, n) = intervals(end, step, max_intervals);
    out.summary.interval_seconds = len;
    out.summary.intervals = n as u32;

    // The pod sets to solve, deduplicated and capped.
    let events = events_of(&prep, end);
    let boundaries = boundaries_of(&events, end, len, n);
    let whole = whole_interval_sets(&prep, end, len, n);
    let busiest = busiest_sets(&prep, &events, &boundaries, len, n);
    let mut sets: Vec<&PodSet> = Vec::new();
    let mut index: HashMap<&PodSet, usize> = HashMap::new();
    let mut whole_idx: Vec<Option<usize>> = Vec::with_capacity(whole.len());
    let mut busiest_idx: Vec<Option<usize>> = Vec::with_capacity(busiest.len());
    for (list, idx) in [(&whole, &mut whole_idx), (&busiest, &mut busiest_idx)] {
        for set in list {
            let i = if set.is_empty() {
                None
            } else if let Some(i) = index.get(set) {
                Some(*i)
            } else if sets.len() < MAX_SOLVES {
                sets.push(set);
                index.insert(set, sets.len() - 1);
                Some(sets.len() - 1)
            } else {
                None
            };
            idx.push(i);
        }
    }
    let solved: Vec<Solved> = sets.par_iter().map(|k| solve(&prep, k, config)).collect();
    out.summary.lp_solves = solved.len() as u32;
    out.summary.lp_fallbacks = solved.iter().filter(|s| s.fallback).count() as u32;
    out.summary.lp_budget_hits = solved.iter().filter(|s| s.budget_hit).count() as u32;
    let get = |v: &[Option<usize>], j: i64| {
        v.get(j as usize)
            .copied()
            .flatten()
            .and_then(|i| solved.get(i))
    };

    // Sweep the pods' events and the interval starts together.
    let mut demand = (0i64, 0i64, 0i64);
    let mut present = vec![0i64; prep.classes.len()];
    let mut ev = 0;
    let mut cost = 0.0;
    let mut per_resource_cost = 0.0;
    for (bi, &t) in boundaries.iter().enumerate() {
        while let Some(&(et, i, arrive)) = events.get(ev) {
            if et > t {
                break;
            }
            ev += 1;
            let d = prep.demand.get(i).copied().unwrap_or_default();
            let sign = if arrive { 1 } else { -1 };
            demand = (
                demand.0 + sign * d.0,
                demand.1 + sign * d.1,
                demand.2 + sign * d.2,
            );
            if let Some(slot) = prep
                .spans
                .get(i)
                .and_then(|s| present.get_mut(s.2 as usize))
            {
                *slot += sign;
            }
        }
        let next = boundaries.get(bi + 1).copied().unwrap_or(end).min(end);
        let dt = (next - t).max(0);
        let pr = per_resource_rate(demand, u, x);
        let j = t / len;
        // The whole-interval bound holds throughout its interval; the prices of every solve
        // nearby are tried on the pods present now.
        let mut lp_rate = get(&whole_idx, j).map_or(0.0, |s| s.bound);
        for jj in (j - NEIGHBOURS).max(0)..=(j + NEIGHBOURS).min(n - 1) {
            for s in [get(&whole_idx, jj), get(&busiest_idx, jj)]
                .into_iter()
                .flatten()
            {
                lp_rate = lp_rate.max(s.value(&present));
            }
        }
        let rate = pr.max(lp_rate).max(0.0);
        if lp_rate > pr * (1.0 + 1e-9) + 1e-12 {
            out.summary.lp_tighter_seconds += dt;
        }
        cost += rate * dt as f64 / 3600.0;
        per_resource_cost += pr * dt as f64 / 3600.0;
        if out.points.last().is_none_or(|p| p.1 != rate) {
            out.points.push((t, rate));
        }
        if out.per_resource_points.last().is_none_or(|p| p.1 != pr) {
            out.per_resource_points.push((t, pr));
        }
    }
    out.summary.cost = cost;
    out.summary.per_resource_cost = per_resource_cost;
    out.seconds = start.elapsed().as_secs_f64();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::{scenario, world};

    fn world_of(yaml: &str) -> World {
        let s = scenario::parse(yaml, "test.yaml").expect("scenario");
        world::compile(&scenario::from_value(s, "test"), 0).expect("world")
    }

    /// A scenario with these types (name, vCPU, GiB, price) and pods (cpu milli, MiB, arrive,
    /// leave), no overhead, one zone.
    fn yaml(
        types: &[(&str, i64, i64, f64)],
        pods: &[(i64, i64, i64, Option<i64>)],
        end: i64,
    ) -> String {
        let mut s = format!(
            "name: t\nsettings: {{endSeconds: {end}, sampleStepSeconds: 600}}\ncatalog:\n  overhead: none\n  types:\n"
        );
        for (n, c, g, p) in types {
            s += &format!(
                "    - {{name: {n}, vcpu: {c}, memoryMib: {}, price: {p}}}\n",
                g * 1024
            );
        }
        s += "zones: [zone-a]\nworkload:\n  pods:\n";
        for (i, (c, m, at, leave)) in pods.iter().enumerate() {
            s += &format!(
                "    - {{name: p{i}, count: 1, requests: {{cpu: {c}m, memory: {m}Mi}}, arriveAt: {at}{}}}\n",
                leave.map_or(String::new(), |l| format!(", durationSeconds: {}", l - at))
            );
        }
        s
    }

    /// The cheapest set of nodes that holds every pod, by trying every partition of the pods.
    fn brute_force(shapes: &[Shape], pods: &[core::Resources]) -> f64 {
        fn cost(shapes: &[Shape], block: &core::Resources) -> f64 {
            shapes
                .iter()
                .filter(|s| block.fits_in(&s.allocatable))
                .map(|s| s.price)
                .fold(f64::INFINITY, f64::min)
        }
        fn rec(
            shapes: &[Shape],
            pods: &[core::Resources],
            i: usize,
            blocks: &mut Vec<core::Resources>,
            best: &mut f64,
        ) {
            let so_far: f64 = blocks.iter().map(|b| cost(shapes, b)).sum();
            if so_far >= *best {
                return;
            }
            let Some(p) = pods.get(i) else {
                *best = so_far;
                return;
            };
            for b in 0..blocks.len() {
                let before = blocks[b].clone();
                blocks[b].add_assign(p);
                rec(shapes, pods, i + 1, blocks, best);
                blocks[b] = before;
            }
            blocks.push(p.clone());
            rec(shapes, pods, i + 1, blocks, best);
            blocks.pop();
        }
        let mut best = f64::INFINITY;
        rec(shapes, pods, 0, &mut Vec::new(), &mut best);
        best
    }

    #[test]
    fn never_above_the_brute_force_optimum_and_never_below_the_per_resource_bound() {
        let mut rng = Rng::new(7);
        let mut tighter = 0;
        for case in 0..30 {
            let n_types = 2 + rng.below(3);
            let names = ["a", "b", "c", "d"];
            let types: Vec<(&str, i64, i64, f64)> = (0..n_types)
                .map(|i| {
                    let vcpu = [1, 2, 4, 8][rng.below(4)];
                    let gib = vcpu * [2, 4, 8][rng.below(3)];
                    let price = (vcpu as f64 * 0.04 + gib as f64 * 0.004) * (0.8 + 0.4 * rng.f64());
                    (names[i], vcpu, gib, (price * 1e4).round() / 1e4)
                })
                .collect();
            let max_cpu = types.iter().map(|t| t.1).max().unwrap_or(1) * 1000;
            let max_mib = types.iter().map(|t| t.2).max().unwrap_or(1) * 1024;
            let pods: Vec<(i64, i64, i64, Option<i64>)> = (0..3 + rng.below(5))
                .map(|_| {
                    let c = (250 + rng.below(max_cpu as usize) as i64).min(max_cpu);
                    let m = (256 + rng.below(max_mib as usize / 2) as i64).min(max_mib);
                    (c, m, 0, None)
                })
                .collect();
            let w = world_of(&yaml(&types, &pods, 3600));
            let lb = compute(&w, 0, 600);
            let (shapes, _) = launchable_shapes(&w);
            let shapes: Vec<Shape> = shapes.into_iter().map(|b| b.shape).collect();
            let reqs: Vec<core::Resources> =
                w.arrivals.iter().map(|a| pod_requests(&a.pod)).collect();
            let opt = brute_force(&shapes, &reqs);
            let rate = lb.rate_at(0);
            assert!(
                rate <= opt + 1e-6,
                "case {case}: bound {rate} above the optimum {opt}: {types:?} {pods:?}"
            );
            for &(t, r) in &lb.points {
                assert!(r + 1e-12 >= lb.per_resource_at(t), "case {case} at {t}");
            }
            assert!(
                (lb.summary.cost - rate).abs() < 1e-9,
                "constant load for one hour"
            );
            if rate > lb.per_resource_at(0) + 1e-6 {
                tighter += 1;
            }
        }
        assert!(
            tighter >= 5,
            "the LP part should beat the per-resource bound often: {tighter} of 30"
        );
    }

    /// A node a brute force may use: its room, zone and price.
    #[derive(Debug, Clone)]
    struct BfNode {
        cpu: i64,
        mib: i64,
        zone: &'static str,
        price: f64,
    }

    /// A pod for the brute force: requests, the zone it must run in (if any), presence.
    #[derive(Debug, Clone)]
    struct BfPod {
        cpu: i64,
        mib: i64,
        zone: Option<&'static str>,
        at: i64,
        leave: Option<i64>,
    }

    /// The cheapest cluster for `pods`: every partition of them into blocks, each block on
    /// the cheapest new node of `catalog` that holds it in a zone every pod of the block
    /// accepts, or on a distinct existing node (at its price) that holds it. Written from the
    /// scenario alone, without the bound's own shapes.
    fn brute_force_with_existing(catalog: &[BfNode], existing: &[BfNode], pods: &[&BfPod]) -> f64 {
        fn fits(n: &BfNode, block: &[&BfPod]) -> bool {
            block.iter().map(|p| p.cpu).sum::<i64>() <= n.cpu
                && block.iter().map(|p| p.mib).sum::<i64>() <= n.mib
                && block.iter().all(|p| p.zone.is_none_or(|z| z == n.zone))
        }
        fn new_cost(catalog: &[BfNode], block: &[&BfPod]) -> f64 {
            catalog
                .iter()
                .filter(|n| fits(n, block))
                .map(|n| n.price)
                .fold(f64::INFINITY, f64::min)
        }
        /// Cheapest cost of the blocks with existing nodes `free` still unused.
        fn assign(
            catalog: &[BfNode],
            existing: &[BfNode],
            blocks: &[Vec<&BfPod>],
            free: &mut Vec<bool>,
        ) -> f64 {
            let Some((first, rest)) = blocks.split_first() else {
                return 0.0;
            };
            let mut best = new_cost(catalog, first) + assign(catalog, existing, rest, free);
            for e in 0..existing.len() {
                if free[e] && fits(&existing[e], first) {
                    free[e] = false;
                    best = best.min(existing[e].price + assign(catalog, existing, rest, free));
                    free[e] = true;
                }
            }
            best
        }
        fn rec<'p>(
            catalog: &[BfNode],
            existing: &[BfNode],
            pods: &[&'p BfPod],
            i: usize,
            blocks: &mut Vec<Vec<&'p BfPod>>,
            best: &mut f64,
        ) {
            let Some(p) = pods.get(i) else {
                let mut free = vec![true; existing.len()];
                *best = best.min(assign(catalog, existing, blocks, &mut free));
                return;
            };
            for b in 0..blocks.len() {
                blocks[b].push(p);
                rec(catalog, existing, pods, i + 1, blocks, best);
                blocks[b].pop();
            }
            blocks.push(vec![p]);
            rec(catalog, existing, pods, i + 1, blocks, best);
            blocks.pop();
        }
        let mut best = f64::INFINITY;
        rec(catalog, existing, pods, 0, &mut Vec::new(), &mut best);
        best
    }

    #[test]
    fn never_above_the_brute_force_optimum_over_time_zones_and_existing_nodes() {
        // Random small worlds: two zones, types offered in one or both (some with a cheaper
        // spot price), pods that arrive and leave at different times, some pinned to a zone,
        // sometimes an existing node. At every 150 s instant the bound is at most the
        // cheapest cluster that runs the pods present then.
        let mut rng = Rng::new(11);
        const ZONES: [&str; 2] = ["zone-a", "zone-b"];
        let mut checked = 0;
        for case in 0..25 {
            let n_types = 1 + rng.below(3);
            let mut catalog = Vec::new();
            let mut types_yaml = String::new();
            for i in 0..n_types {
                let vcpu = [1i64, 2, 4, 8][rng.below(4)];
                let gib = vcpu * [2i64, 4][rng.below(2)];
                let price =
                    ((vcpu as f64 * 0.04 + gib as f64 * 0.004) * (0.8 + 0.4 * rng.f64()) * 1e4)
                        .round()
                        / 1e4;
                let spot = rng.below(3) == 0;
                let spot_price = (price * 0.5 * 1e4).round() / 1e4;
                let zones: Vec<&'static str> = match rng.below(3) {
                    0 => vec![ZONES[0]],
                    1 => vec![ZONES[1]],
                    _ => ZONES.to_vec(),
                };
                types_yaml += &format!(
                    "    - {{name: t{i}, vcpu: {vcpu}, memoryMib: {}, price: {price}{}, zones: [{}]}}\n",
                    gib * 1024,
                    if spot {
                        format!(", spotPrice: {spot_price}")
                    } else {
                        String::new()
                    },
                    zones.join(", ")
                );
                for z in &zones {
                    catalog.push(BfNode {
                        cpu: vcpu * 1000,
                        mib: gib * 1024,
                        zone: z,
                        price: if spot { spot_price } else { price },
                    });
                }
            }
            // An existing node of the first type in its first zone, at its on-demand price.
            let mut existing = Vec::new();
            let mut existing_yaml = String::new();
            if rng.below(2) == 0 {
                let t = &catalog[0];
                // The catalog entry may carry the spot price; the existing node is on-demand.
                let od = types_yaml
                    .lines()
                    .next()
                    .and_then(|l| l.split("price: ").nth(1))
                    .and_then(|r| r.split([',', '}']).next())
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .unwrap_or(t.price);
                existing.push(BfNode {
                    price: od,
                    ..t.clone()
                });
                existing_yaml = format!(
                    "existingNodes:\n  - {{name: e, count: 1, instanceType: t0, zone: {}}}\n",
                    t.zone
                );
            }
            let max_cpu = catalog.iter().map(|n| n.cpu).max().unwrap_or(1000);
            let max_mib = catalog.iter().map(|n| n.mib).max().unwrap_or(1024);
            let pods: Vec<BfPod> = (0..3 + rng.below(3))
                .map(|_| {
                    let at = [0i64, 300, 900][rng.below(3)];
                    BfPod {
                        cpu: (250 + rng.below(max_cpu as usize) as i64).min(max_cpu),
                        mib: (256 + rng.below(max_mib as usize / 2) as i64).min(max_mib),
                        zone: (rng.below(4) == 0).then(|| ZONES[rng.below(2)]),
                        at,
                        leave: [None, Some(at + 600), Some(at + 1500)][rng.below(3)],
                    }
                })
                .collect();
            let mut yaml = format!(
                "name: t\nsettings: {{endSeconds: 3600, sampleStepSeconds: 300}}\ncatalog:\n  overhead: none\n  types:\n{types_yaml}zones: [{}]\ncapacityTypes: [on-demand, spot]\n{existing_yaml}workload:\n  pods:\n",
                ZONES.join(", ")
            );
            for (i, p) in pods.iter().enumerate() {
                yaml += &format!(
                    "    - {{name: p{i}, count: 1, requests: {{cpu: {}m, memory: {}Mi}}, arriveAt: {}{}{}}}\n",
                    p.cpu,
                    p.mib,
                    p.at,
                    p.leave.map_or(String::new(), |l| format!(
                        ", durationSeconds: {}",
                        l - p.at
                    )),
                    p.zone.map_or(String::new(), |z| format!(
                        ", nodeSelector: {{topology.kubernetes.io/zone: {z}}}"
                    ))
                );
            }
            let w = world_of(&yaml);
            let lb = compute(&w, 0, 300);
            for t in (0..3600).step_by(150) {
                let present: Vec<&BfPod> = pods
                    .iter()
                    .filter(|p| p.at <= t && p.leave.is_none_or(|l| l > t))
                    .collect();
                let opt = brute_force_with_existing(&catalog, &existing, &present);
                if !opt.is_finite() {
                    continue;
                }
                checked += 1;
                let rate = lb.rate_at(t);
                assert!(
                    rate <= opt + 1e-6,
                    "case {case} at {t}: bound {rate} above the optimum {opt}\n{yaml}"
                );
            }
        }
        assert!(checked > 300, "{checked} instants checked");
    }

    #[test]
    fn intervals_count_only_pods_present_throughout() {
        // Intervals of 600 s. Pod 0 arrives mid-interval (300 s) and leaves mid-interval
        // (1500 s); pod 1 arrives on a boundary (600 s) and leaves on one (1800 s); pod 2
        // stays to the end.
        let w = world_of(&yaml(
            &[("big", 8, 16, 0.30)],
            &[
                (1000, 1024, 300, Some(1500)),
                (2000, 1024, 600, Some(1800)),
                (3000, 1024, 1200, None),
            ],
            2400,
        ));
        let prep = prepare(&w);
        let (len, n) = intervals(w.end(), 600, MAX_INTERVALS);
        assert_eq!((len, n), (600, 4));
        let class = |cpu: i64| {
            prep.classes
                .iter()
                .position(|c| c.req.cpu_milli == cpu)
                .map(|c| c as u32)
                .unwrap_or(u32::MAX)
        };
        let (p0, p1, p2) = (class(1000), class(2000), class(3000));
        let mut whole = whole_interval_sets(&prep, w.end(), len, n);
        for s in &mut whole {
            s.sort_unstable();
        }
        let set = |v: &[u32]| {
            let mut s: Vec<(u32, u32)> = v.iter().map(|c| (*c, 1)).collect();
            s.sort_unstable();
            s
        };
        assert_eq!(
            whole,
            vec![set(&[]), set(&[p0, p1]), set(&[p1, p2]), set(&[p2])]
        );
        // The busiest instant of each interval: all pods present then.
        let events = events_of(&prep, w.end());
        let boundaries = boundaries_of(&events, w.end(), len, n);
        let mut busiest = busiest_sets(&prep, &events, &boundaries, len, n);
        for s in &mut busiest {
            s.sort_unstable();
        }
        // Pod 1 leaves at 1800 s, the last interval's start: gone there.
        assert_eq!(
            busiest,
            vec![set(&[p0]), set(&[p0, p1]), set(&[p0, p1, p2]), set(&[p2])]
        );
    }

    #[test]
    fn pods_nothing_can_run_are_left_out_and_counted() {
        // One ordinary pod (1 vCPU on an 8-vCPU $0.30 node), one larger than every type, one
        // whose nodeSelector no type has. Only the first counts: the bound is the ordinary
        // pod's node for the hour. (The huge pod used to add 64 vCPU at the per-resource
        // price, a bound above anything a strategy can pay.)
        let mut y = yaml(
            &[("big", 8, 16, 0.30)],
            &[(1000, 1024, 0, None), (64000, 1024, 0, None)],
            3600,
        );
        y += "    - {name: picky, count: 1, requests: {cpu: 500m, memory: 1Gi}, nodeSelector: {disk: nvme}}\n";
        let w = world_of(&y);
        let lb = compute(&w, 0, 600);
        assert_eq!(lb.summary.unschedulable_pods, 2, "{:?}", lb.summary);
        assert_eq!(lb.summary.unschedulable_examples.len(), 2);
        assert!(
            lb.summary
                .unschedulable_examples
                .iter()
                .any(|e| e.contains("exceed every node")),
            "{:?}",
            lb.summary.unschedulable_examples
        );
        assert!(
            lb.summary
                .unschedulable_examples
                .iter()
                .any(|e| e.contains("picky") && e.contains("nodeSelector")),
            "{:?}",
            lb.summary.unschedulable_examples
        );
        assert!((lb.summary.cost - 0.30).abs() < 1e-9, "{:?}", lb.summary);
        assert!((lb.summary.per_resource_cost - 0.0375).abs() < 1e-9);
    }

    #[test]
    fn a_pod_alone_costs_a_node_while_it_runs() {
        // One 1-vCPU pod, only 8-vCPU nodes: a node ($0.30/h) whenever it runs, while the
        // per-resource bound sees 1 vCPU at $0.0375. It arrives and leaves mid-interval, so
        // no interval holds it throughout; the prices of its busiest instant still charge it
        // a node whenever it is present.
        let w = world_of(&yaml(
            &[("big", 8, 16, 0.30)],
            &[(1000, 1024, 300, Some(1500))],
            2400,
        ));
        let lb = compute(&w, 0, 600);
        for (t, want) in [
            (0, 0.0),
            (299, 0.0),
            (300, 0.30),
            (1499, 0.30),
            (1500, 0.0),
            (2399, 0.0),
        ] {
            assert!(
                (lb.rate_at(t) - want).abs() < 1e-9,
                "at {t}: {} want {want}",
                lb.rate_at(t)
            );
        }
        for (t, want) in [(299, 0.0), (300, 0.0375), (1499, 0.0375), (1500, 0.0)] {
            assert!((lb.per_resource_at(t) - want).abs() < 1e-9, "at {t}");
        }
        // Exactly what any cluster that runs it pays: one node for 1200 s.
        assert!(
            (lb.summary.cost - 0.30 * 1200.0 / 3600.0).abs() < 1e-9,
            "{}",
            lb.summary.cost
        );
        assert!((lb.summary.per_resource_cost - 0.0375 * 1200.0 / 3600.0).abs() < 1e-9);
        assert_eq!(lb.summary.lp_tighter_seconds, 1200);
        // The end sample takes the last second's rate.
        assert_eq!(lb.rate_at(2400), 0.0);
    }

    #[test]
    fn at_most_max_intervals() {
        let w = world_of(&yaml(
            &[("big", 8, 16, 0.30)],
            &[(1000, 1024, 0, None)],
            36_000,
        ));
        let lb = compute_with(&w, 0, 60, 100, &lp_config());
        // 600 steps of 60 s into at most 100 intervals: 6 steps each.
        assert_eq!(lb.summary.interval_seconds, 360);
        assert_eq!(lb.summary.intervals, 100);
        assert!((lb.summary.cost - 0.30 * 10.0).abs() < 1e-9);
        // One pod set, solved once.
        assert_eq!(lb.summary.lp_solves, 1);
    }

    #[test]
    fn deterministic() {
        let types = [("s", 2, 4, 0.1), ("m", 4, 16, 0.21), ("l", 8, 32, 0.39)];
        let pods: Vec<(i64, i64, i64, Option<i64>)> = (0..40)
            .map(|i| {
                (
                    300 + 137 * (i % 11),
                    512 + 900 * (i % 7),
                    60 * (i % 13),
                    Some(3000 + 311 * i),
                )
            })
            .collect();
        let w = world_of(&yaml(&types, &pods, 20_000));
        let a = compute(&w, 0, 60);
        let b = compute(&w, 0, 60);
        assert_eq!(a.points, b.points);
        assert_eq!(a.summary, b.summary);
        assert_eq!(a.summary.lp_budget_hits, 0);
        assert!(a.summary.cost > a.summary.per_resource_cost);
    }

    #[test]
    fn free_existing_nodes_lower_the_bound() {
        // A free 4-vCPU node holds the pod: nothing needs to be paid.
        let mut w = world_of(&yaml(
            &[("big", 8, 16, 0.30)],
            &[(1000, 1024, 0, None)],
            3600,
        ));
        assert!((compute(&w, 0, 600).summary.cost - 0.30).abs() < 1e-9);
        w.existing_nodes.push(core::Node {
            name: "free".into(),
            allocatable: core::Resources::with_pods(4000, 8 << 30, 110),
            price: 0.0,
            ..Default::default()
        });
        let lb = compute(&w, 0, 600);
        assert!(lb.summary.cost.abs() < 1e-9, "{:?}", lb.summary);
        // A paid one of a catalog type changes nothing: it costs what it could save.
        w.existing_nodes[0].allocatable = core::Resources::with_pods(8000, 16 << 30, 110);
        w.existing_nodes[0].price = 0.30;
        let lb = compute(&w, 0, 600);
        assert!((lb.summary.cost - 0.30).abs() < 1e-9, "{:?}", lb.summary);
    }

    #[test]
    fn daemonsets_shrink_the_room() {
        // 4-vCPU pods on 8-vCPU nodes fit two per node, unless a daemonset takes some CPU.
        let base = yaml(
            &[("big", 8, 16, 0.30)],
            &[(4000, 1024, 0, None), (4000, 1024, 0, None)],
            3600,
        );
        let w = world_of(&base);
        assert!((compute(&w, 0, 600).summary.cost - 0.30).abs() < 1e-9);
        let with_ds = base.replace(
            "zones: [zone-a]\n",
            "zones: [zone-a]\ndaemonSets:\n  - {name: agent, requests: {cpu: 100m, memory: 64Mi}}\n",
        );
        let w = world_of(&with_ds);
        assert!((compute(&w, 0, 600).summary.cost - 0.60).abs() < 1e-6);
    }
}
