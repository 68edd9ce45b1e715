//! The packing interface: which new nodes to launch for the pods that need one.
//!
//! The scheduler ([`crate::scheduler`]) resolves every constraint that involves more than one
//! node before packing: requirements, taints, volume topology and daemonset overhead decide
//! which launch [`Shape`]s (NodePool x instance type x available offering) each pod may use,
//! and topology spread / pod (anti-)affinity on zone-like keys pin pods to domains, which also
//! narrows their shapes. What is left is a bin-packing problem with a few per-node side
//! constraints, the [`PackingProblem`]:
//!
//! - items (a pod, or a bundle of pods that must share a node) with requests and a set of
//!   compatible shapes;
//! - per-node group limits (hostname anti-affinity, hostname topology spread, host ports):
//!   an item belongs to groups and may cap how many members of a group share its node;
//! - NodePool limits and `minValues`, NodePool weights (a node is opened from the
//!   highest-weight pool that can hold its first item).
//!
//! A [`LaunchPlanner`] turns the problem into a [`LaunchPlan`]. The crate ships two:
//! [`crate::strategies::cost_aware::CostAwarePlanner`] (default) and
//! [`crate::strategies::karpenter::KarpenterPlanner`] (the faithful baseline). An optimiser
//! (ILP, column generation, a lower bound) implements the same trait, may take the
//! heuristic's plan as a warm start, and must pass [`verify`], which runs exactly the checks the
//! heuristics run while building nodes ([`NodeBuilder::check`]), so an optimised plan can
//! never break a constraint the heuristic honours.
//!
//! ```
//! use provisioner_core::packing::*;
//! use provisioner_core::Resources;
//!
//! // One shape: 4 vCPU / 8 GiB at $0.20/h.
//! let shape = Shape::for_test(0, Resources::with_pods(4000, 8 << 30, 110), 0.20);
//! let item = |cpu| PackItem::for_test(Resources::new(cpu, 1 << 30), &[0]);
//! let problem = PackingProblem::new(vec![shape], vec![PackPool::unlimited("default")], vec![item(3000), item(1000), item(2000)]);
//!
//! // A trivial planner: one node per item. Correct, expensive.
//! struct OnePerItem;
//! impl LaunchPlanner for OnePerItem {
//!     fn name(&self) -> &'static str { "one-per-item" }
//!     fn plan(&self, p: &PackingProblem, _warm: Option<&LaunchPlan>) -> LaunchPlan {
//!         let nodes = (0..p.items.len() as u32).map(|i| PlannedNode { shape: 0, items: vec![i] }).collect();
//!         LaunchPlan::from_nodes(p, nodes, Vec::new())
//!     }
//! }
//! let naive = OnePerItem.plan(&problem, None);
//! assert!(verify(&problem, &naive).is_ok());
//! assert_eq!(naive.nodes.len(), 3);
//!
//! // The shipped heuristic packs them onto two nodes; every plan is checked the same way.
//! let heuristic = provisioner_core::strategies::cost_aware::CostAwarePlanner::default().plan(&problem, None);
//! assert!(verify(&problem, &heuristic).is_ok());
//! assert_eq!(heuristic.nodes.len(), 2);
//! assert!(heuristic.cost < naive.cost);
//!
//! // A plan that overfills a node is rejected.
//! let bad = LaunchPlan::from_nodes(&problem, vec![PlannedNode { shape: 0, items: vec![0, 1, 2] }], Vec::new());
//! assert!(verify(&problem, &bad).is_err());
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::model::{CapacityType, Resources};

/// Index of a shape in [`PackingProblem::shapes`].
pub type ShapeId = u32;
/// Index of an item in [`PackingProblem::items`].
pub type ItemId = u32;
/// Index of a per-node group.
pub type GroupId = u32;

/// A way to launch one node: NodePool x instance type x one available offering.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    /// Index into [`PackingProblem::pools`].
    pub pool: u32,
    /// Index into the snapshot's instance types (for reporting).
    pub instance_type: u32,
    pub instance_type_name: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
    /// Capacity, counted against NodePool limits.
    pub capacity: Resources,
    /// What pods may use: capacity - overhead - daemonset requests on this shape.
    pub allocatable: Resources,
    /// Requests of the daemonset pods that land on this shape.
    pub daemonset_requests: Resources,
    /// Values of the keys a NodePool has `minValues` on (key -> value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub min_value_labels: BTreeMap<String, String>,
}

impl Shape {
    /// A shape for examples and tests.
    pub fn for_test(pool: u32, allocatable: Resources, price: f64) -> Shape {
        Shape {
            pool,
            instance_type: 0,
            instance_type_name: format!("type-{}", allocatable.cpu_milli),
            zone: "zone-a".into(),
            capacity_type: CapacityType::OnDemand,
            price,
            capacity: allocatable.clone(),
            allocatable,
            daemonset_requests: Resources::default(),
            min_value_labels: BTreeMap::new(),
        }
    }
}

/// A NodePool as packing sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackPool {
    pub name: String,
    /// Position in weight order: 0 is tried first.
    pub rank: u32,
    /// Capacity still allowed by `spec.limits` (after existing nodes); `None` = unlimited.
    /// The `"nodes"` extended entry counts nodes.
    pub remaining: Option<Resources>,
    /// `minValues` per key: a node must keep at least this many distinct values among the
    /// shapes that could still launch it.
    pub min_values: BTreeMap<String, u32>,
}

impl PackPool {
    /// A pool without limits (examples and tests).
    pub fn unlimited(name: &str) -> PackPool {
        PackPool {
            name: name.into(),
            rank: 0,
            remaining: None,
            min_values: BTreeMap::new(),
        }
    }
}

/// A compact set of shape ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct ShapeSet {
    words: Vec<u64>,
}

impl ShapeSet {
    pub fn with_capacity(n: usize) -> ShapeSet {
        ShapeSet {
            words: vec![0; n.div_ceil(64)],
        }
    }

    pub fn from_ids(n: usize, ids: impl IntoIterator<Item = ShapeId>) -> ShapeSet {
        let mut s = ShapeSet::with_capacity(n);
        for i in ids {
            s.insert(i);
        }
        s
    }

    pub fn insert(&mut self, id: ShapeId) {
        let w = (id / 64) as usize;
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
        }
        if let Some(word) = self.words.get_mut(w) {
            *word |= 1u64 << (id % 64);
        }
    }

    pub fn remove(&mut self, id: ShapeId) {
        if let Some(word) = self.words.get_mut((id / 64) as usize) {
            *word &= !(1u64 << (id % 64));
        }
    }

    #[inline]
    pub fn contains(&self, id: ShapeId) -> bool {
        self.words
            .get((id / 64) as usize)
            .is_some_and(|w| w & (1u64 << (id % 64)) != 0)
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn intersects(&self, other: &ShapeSet) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    /// Size of the intersection with `other`.
    pub fn intersection_len(&self, other: &ShapeSet) -> usize {
        self.words
            .iter()
            .zip(&other.words)
            .map(|(a, b)| (a & b).count_ones() as usize)
            .sum()
    }

    /// Ids in both sets, in increasing order.
    pub fn iter_intersection<'a>(
        &'a self,
        other: &'a ShapeSet,
    ) -> impl Iterator<Item = ShapeId> + 'a {
        self.words
            .iter()
            .zip(&other.words)
            .enumerate()
            .flat_map(|(wi, (a, b))| {
                let mut bits = a & b;
                std::iter::from_fn(move || {
                    if bits == 0 {
                        return None;
                    }
                    let bit = bits.trailing_zeros();
                    bits &= bits - 1;
                    Some(wi as u32 * 64 + bit)
                })
            })
    }

    /// Whether every member is also in `other`.
    pub fn is_subset(&self, other: &ShapeSet) -> bool {
        self.words
            .iter()
            .enumerate()
            .all(|(i, w)| w & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    /// Adds every member of `other`.
    pub fn union_with(&mut self, other: &ShapeSet) {
        if self.words.len() < other.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (w, o) in self.words.iter_mut().zip(&other.words) {
            *w |= o;
        }
    }

    pub fn intersect_with(&mut self, other: &ShapeSet) {
        for (i, w) in self.words.iter_mut().enumerate() {
            *w &= other.words.get(i).copied().unwrap_or(0);
        }
    }

    /// Ids in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = ShapeId> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut bits = w;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                Some(wi as u32 * 64 + b)
            })
        })
    }
}

/// Something to place: one pod, or several that must share a node (hostname self-affinity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackItem {
    /// Opaque pod indices for the caller (the scheduler uses indices into its pending list).
    pub pods: Vec<u32>,
    pub requests: Resources,
    /// Index into [`PackingProblem::shape_sets`]: the shapes this item may use.
    pub shape_set: u32,
    /// Groups this item counts in on its node.
    pub member_of: Vec<GroupId>,
    /// (group, limit): the node may hold at most `limit` members of `group`, counting this
    /// item if it is a member, for as long as this item is on it.
    pub limits: Vec<(GroupId, u32)>,
    /// (group, limit): when this item joins, the node may hold at most `limit` members of
    /// `group`, counting this item if it is a member; members that join later are not held
    /// to it. This is how the kube-scheduler (and Karpenter) read a topology spread: only the
    /// incoming pod's constraints are checked. The Karpenter baseline puts hostname spreads
    /// here; the default planner keeps them in `limits`, so its nodes satisfy every pod's
    /// spread in the final state.
    #[serde(default)]
    pub arrival_limits: Vec<(GroupId, u32)>,
}

impl PackItem {
    /// An unconstrained single-pod item (examples and tests); `shape_set` 0.
    pub fn for_test(requests: Resources, _shapes: &[ShapeId]) -> PackItem {
        PackItem {
            pods: Vec::new(),
            requests: Resources {
                pods: requests.pods.max(1),
                ..requests
            },
            shape_set: 0,
            member_of: Vec::new(),
            limits: Vec::new(),
            arrival_limits: Vec::new(),
        }
    }
}

/// The whole packing input.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PackingProblem {
    /// Shared, not copied: every round of a decision packs against the same shapes.
    pub shapes: Arc<Vec<Shape>>,
    /// Shape ids largest first ([`size_order`]), shared the same way.
    pub by_size: Arc<Vec<ShapeId>>,
    /// Shape ids cheapest first ([`price_order`]), shared the same way; empty when the
    /// builder did not sort them (the planners then sort).
    #[serde(default)]
    pub by_price: Arc<Vec<ShapeId>>,
    pub pools: Vec<PackPool>,
    /// Distinct compatible-shape sets, shared by items.
    pub shape_sets: Vec<ShapeSet>,
    pub items: Vec<PackItem>,
    /// Number of per-node groups.
    pub groups: u32,
}

/// Every shape id, cheapest first (ties: lower id): the order in which the cheapest shape
/// that qualifies is the first one found.
pub fn price_order(shapes: &[Shape]) -> Vec<ShapeId> {
    let mut ids: Vec<ShapeId> = (0..shapes.len() as ShapeId).collect();
    let price = |s: &ShapeId| shapes.get(*s as usize).map_or(f64::INFINITY, |sh| sh.price);
    ids.sort_by(|a, b| price(a).total_cmp(&price(b)).then(a.cmp(b)));
    ids
}

/// [`PackingProblem::by_price`], or the shapes sorted now when the builder left it empty.
pub fn price_order_of(problem: &PackingProblem) -> std::borrow::Cow<'_, [ShapeId]> {
    if problem.by_price.len() == problem.shapes.len() {
        std::borrow::Cow::Borrowed(problem.by_price.as_slice())
    } else {
        std::borrow::Cow::Owned(price_order(&problem.shapes))
    }
}

/// Shape ids largest first: CPU descending, then memory descending, then id.
pub fn size_order(shapes: &[Shape]) -> Vec<ShapeId> {
    let mut ids: Vec<ShapeId> = (0..shapes.len() as ShapeId).collect();
    ids.sort_by(
        |a, b| match (shapes.get(*a as usize), shapes.get(*b as usize)) {
            (Some(x), Some(y)) => y
                .allocatable
                .cpu_milli
                .cmp(&x.allocatable.cpu_milli)
                .then(y.allocatable.memory.cmp(&x.allocatable.memory))
                .then(a.cmp(b)),
            _ => a.cmp(b),
        },
    );
    ids
}

impl PackingProblem {
    /// A problem whose items all use every shape (examples and tests).
    pub fn new(shapes: Vec<Shape>, pools: Vec<PackPool>, items: Vec<PackItem>) -> PackingProblem {
        let all = ShapeSet::from_ids(shapes.len(), 0..shapes.len() as u32);
        PackingProblem {
            by_size: Arc::new(size_order(&shapes)),
            by_price: Arc::new(price_order(&shapes)),
            shapes: Arc::new(shapes),
            pools,
            shape_sets: vec![all],
            items,
            groups: 0,
        }
    }

    /// The shape set of an item (empty when the index is out of range).
    pub fn item_shapes(&self, item: &PackItem) -> &ShapeSet {
        static EMPTY: ShapeSet = ShapeSet { words: Vec::new() };
        self.shape_sets
            .get(item.shape_set as usize)
            .unwrap_or(&EMPTY)
    }
}

/// One node of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedNode {
    /// The shape to launch.
    pub shape: ShapeId,
    pub items: Vec<ItemId>,
}

/// A planner's answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LaunchPlan {
    pub nodes: Vec<PlannedNode>,
    /// Items the planner could not place, with a reason.
    pub unplaced: Vec<(ItemId, String)>,
    /// Sum of the launched shapes' prices.
    pub cost: f64,
    /// A proven lower bound on the cost of placing all placed items, if the planner has one.
    pub lower_bound: Option<f64>,
    /// What the planner did, for people reading a decision (e.g. "optimised", "heuristic
    /// kept: no cheaper plan found", "coarsened 2000→67 classes"), so a plan says which path
    /// produced it without the caller knowing the planner.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl LaunchPlan {
    /// A plan from nodes, with its cost computed.
    pub fn from_nodes(
        problem: &PackingProblem,
        nodes: Vec<PlannedNode>,
        unplaced: Vec<(ItemId, String)>,
    ) -> LaunchPlan {
        let cost = nodes
            .iter()
            .filter_map(|n| problem.shapes.get(n.shape as usize))
            .fold(0.0, |acc, s| acc + s.price);
        LaunchPlan {
            nodes,
            unplaced,
            cost,
            lower_bound: None,
            notes: Vec::new(),
        }
    }
}

/// Decides which nodes to launch. Implementations must be deterministic for a given input.
pub trait LaunchPlanner: Sync {
    /// A short name for reports.
    fn name(&self) -> &'static str;
    /// Plans launches for every item; `warm_start` is a plan another planner produced (an
    /// optimiser starts from it and must never return a worse one).
    fn plan(&self, problem: &PackingProblem, warm_start: Option<&LaunchPlan>) -> LaunchPlan;
}

/// Why an item cannot join a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reject {
    /// No candidate shape of the node is compatible with the item.
    NoCompatibleShape,
    /// Compatible shapes exist but none has room.
    NoRoom,
    /// A per-node group limit (anti-affinity, hostname spread, host port) would be broken.
    Group(GroupId),
    /// The pool's `minValues` would no longer hold.
    MinValues(String),
}

/// A node being built: the shared constraint checks of every planner and of [`verify`].
#[derive(Debug, Clone)]
pub struct NodeBuilder {
    pub pool: u32,
    /// Shapes that can still launch this node with everything on it.
    pub candidates: Vec<ShapeId>,
    pub used: Resources,
    pub items: Vec<ItemId>,
    /// Members per group on this node (dense by group id; grown on demand).
    group_counts: Vec<u32>,
    /// Smallest limit any item on the node puts on each group (`u32::MAX` = none).
    group_caps: Vec<u32>,
}

impl NodeBuilder {
    /// An empty node that may launch as any of `candidates` (all from `pool`).
    pub fn new(pool: u32, candidates: Vec<ShapeId>) -> NodeBuilder {
        NodeBuilder {
            pool,
            candidates,
            used: Resources::default(),
            items: Vec::new(),
            group_counts: Vec::new(),
            group_caps: Vec::new(),
        }
    }

    /// Group limits only (cheap; used before the resource scan).
    pub fn check_groups(&self, item: &PackItem) -> Result<(), Reject> {
        for g in &item.member_of {
            let count = self.group_counts.get(*g as usize).copied().unwrap_or(0);
            let cap = self
                .group_caps
                .get(*g as usize)
                .copied()
                .unwrap_or(u32::MAX);
            if count.saturating_add(1) > cap {
                return Err(Reject::Group(*g));
            }
        }
        for (g, limit) in item.limits.iter().chain(&item.arrival_limits) {
            let count = self.group_counts.get(*g as usize).copied().unwrap_or(0)
                + u32::from(item.member_of.contains(g));
            if count > *limit {
                return Err(Reject::Group(*g));
            }
        }
        Ok(())
    }

    /// Whether `item` can join: group limits, then some candidate shape compatible with the
    /// item has room for everything, then `minValues`. Returns the surviving candidates.
    pub fn check(&self, problem: &PackingProblem, item: &PackItem) -> Result<Vec<ShapeId>, Reject> {
        self.check_groups(item)?;
        let set = problem.item_shapes(item);
        let mut compatible = false;
        let mut survivors = Vec::new();
        for &s in &self.candidates {
            if !set.contains(s) {
                continue;
            }
            compatible = true;
            let Some(shape) = problem.shapes.get(s as usize) else {
                continue;
            };
            if self.used.fits_with_all(&item.requests, &shape.allocatable) {
                survivors.push(s);
            }
        }
        if survivors.is_empty() {
            return Err(if compatible {
                Reject::NoRoom
            } else {
                Reject::NoCompatibleShape
            });
        }
        self.check_min_values(problem, &survivors)?;
        Ok(survivors)
    }

    /// Whether any candidate can take `item` (first hit wins; no allocation). Skips
    /// `minValues`, which [`NodeBuilder::check`] verifies.
    pub fn quick_fits(&self, problem: &PackingProblem, item: &PackItem) -> bool {
        let set = problem.item_shapes(item);
        self.candidates.iter().any(|&s| {
            set.contains(s)
                && problem
                    .shapes
                    .get(s as usize)
                    .is_some_and(|sh| self.used.fits_with_all(&item.requests, &sh.allocatable))
        })
    }

    fn check_min_values(
        &self,
        problem: &PackingProblem,
        survivors: &[ShapeId],
    ) -> Result<(), Reject> {
        let Some(pool) = problem.pools.get(self.pool as usize) else {
            return Ok(());
        };
        for (key, min) in &pool.min_values {
            let mut distinct: Vec<&str> = survivors
                .iter()
                .filter_map(|s| problem.shapes.get(*s as usize))
                .filter_map(|sh| sh.min_value_labels.get(key).map(String::as_str))
                .collect();
            distinct.sort_unstable();
            distinct.dedup();
            if (distinct.len() as u32) < *min {
                return Err(Reject::MinValues(key.clone()));
            }
        }
        Ok(())
    }

    /// Adds an item that passed [`NodeBuilder::check`] with these surviving candidates.
    pub fn add(&mut self, id: ItemId, item: &PackItem, survivors: Vec<ShapeId>) {
        self.used.add_assign(&item.requests);
        self.candidates = survivors;
        self.items.push(id);
        for g in &item.member_of {
            let g = *g as usize;
            if self.group_counts.len() <= g {
                self.group_counts.resize(g + 1, 0);
            }
            if let Some(c) = self.group_counts.get_mut(g) {
                *c += 1;
            }
        }
        for (g, limit) in &item.limits {
            let g = *g as usize;
            if self.group_caps.len() <= g {
                self.group_caps.resize(g + 1, u32::MAX);
            }
            if let Some(cap) = self.group_caps.get_mut(g) {
                *cap = (*cap).min(*limit);
            }
        }
    }

    /// The cheapest candidate (ties: lower id), the shape to launch.
    pub fn cheapest(&self, problem: &PackingProblem) -> Option<ShapeId> {
        self.candidates.iter().copied().min_by(|a, b| {
            let pa = problem
                .shapes
                .get(*a as usize)
                .map_or(f64::INFINITY, |s| s.price);
            let pb = problem
                .shapes
                .get(*b as usize)
                .map_or(f64::INFINITY, |s| s.price);
            pa.total_cmp(&pb).then(a.cmp(b))
        })
    }
}

/// A constraint a plan breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanViolation {
    #[error("node {node}: shape {shape} does not exist")]
    UnknownShape { node: usize, shape: ShapeId },
    #[error("item {item} does not exist")]
    UnknownItem { item: ItemId },
    #[error("item {item} is placed more than once")]
    Duplicate { item: ItemId },
    #[error("item {item} is neither placed nor reported unplaced")]
    Missing { item: ItemId },
    #[error("node {node}: item {item} cannot join ({reason})")]
    CannotJoin {
        node: usize,
        item: ItemId,
        reason: String,
    },
    #[error("node {node}: launch shape {shape} does not fit its items")]
    LaunchDoesNotFit { node: usize, shape: ShapeId },
    #[error("NodePool {pool}: launches exceed its limits")]
    PoolLimit { pool: String },
    #[error("plan cost {claimed} differs from its nodes' prices {actual}")]
    Cost { claimed: String, actual: String },
}

/// The violations within one planned node: unknown shape or item, an item that cannot join
/// the others, a launch shape that does not hold them.
fn verify_node(problem: &PackingProblem, ni: usize, node: &PlannedNode) -> Vec<PlanViolation> {
    let mut errors = Vec::new();
    let Some(launch) = problem.shapes.get(node.shape as usize) else {
        errors.push(PlanViolation::UnknownShape {
            node: ni,
            shape: node.shape,
        });
        return errors;
    };
    // Seed the builder with the shapes that hold all of the node's items (compatible with
    // each, room for their sum): fitting the total implies fitting every prefix, so the
    // item-by-item checks below decide exactly as they would from the whole pool.
    let mut total = Resources::default();
    let mut common: Option<ShapeSet> = None;
    for &id in &node.items {
        if let Some(item) = problem.items.get(id as usize) {
            total.add_assign(&item.requests);
            let set = problem.item_shapes(item);
            match &mut common {
                Some(c) => c.intersect_with(set),
                None => common = Some(set.clone()),
            }
        }
    }
    let pool_shapes: Vec<ShapeId> = match &common {
        Some(c) => c
            .iter()
            .filter(|s| {
                problem
                    .shapes
                    .get(*s as usize)
                    .is_some_and(|sh| sh.pool == launch.pool && total.fits_in(&sh.allocatable))
            })
            .collect(),
        None => Vec::new(),
    };
    let mut b = NodeBuilder::new(launch.pool, pool_shapes);
    for &id in &node.items {
        let Some(item) = problem.items.get(id as usize) else {
            errors.push(PlanViolation::UnknownItem { item: id });
            continue;
        };
        match b.check(problem, item) {
            Ok(surv) => b.add(id, item, surv),
            Err(r) => errors.push(PlanViolation::CannotJoin {
                node: ni,
                item: id,
                reason: format!("{r:?}"),
            }),
        }
    }
    if !b.candidates.contains(&node.shape) {
        errors.push(PlanViolation::LaunchDoesNotFit {
            node: ni,
            shape: node.shape,
        });
    }
    errors
}

/// Checks a plan with the heuristics' own checks: each node is rebuilt item by item through
/// [`NodeBuilder::check`] (starting from the shapes of the launch's pool), the launch shape
/// must survive, every item is placed once or reported unplaced, pool limits hold.
pub fn verify(problem: &PackingProblem, plan: &LaunchPlan) -> Result<(), Vec<PlanViolation>> {
    // Each node is checked on its own (in parallel: a 100,000-pod plan has 20,000 nodes and
    // this was a tenth of the run); what spans nodes (each item once, pool limits) after.
    let per_node: Vec<Vec<PlanViolation>> = plan
        .nodes
        .par_iter()
        .enumerate()
        .map(|(ni, node)| verify_node(problem, ni, node))
        .collect();
    let mut errors: Vec<PlanViolation> = per_node.into_iter().flatten().collect();
    let mut seen = vec![false; problem.items.len()];
    let mut pool_used: BTreeMap<u32, Resources> = BTreeMap::new();
    for node in &plan.nodes {
        for &id in &node.items {
            match seen.get_mut(id as usize) {
                Some(s) if *s => errors.push(PlanViolation::Duplicate { item: id }),
                Some(s) => *s = true,
                None => {}
            }
        }
        if let Some(launch) = problem.shapes.get(node.shape as usize) {
            let used = pool_used.entry(launch.pool).or_default();
            used.add_assign(&launch.capacity);
            *used.extended.entry("nodes".to_string()).or_insert(0) += 1;
        }
    }
    for (id, _) in &plan.unplaced {
        match seen.get_mut(*id as usize) {
            Some(s) if *s => errors.push(PlanViolation::Duplicate { item: *id }),
            Some(s) => *s = true,
            None => errors.push(PlanViolation::UnknownItem { item: *id }),
        }
    }
    for (i, s) in seen.iter().enumerate() {
        if !s {
            errors.push(PlanViolation::Missing { item: i as u32 });
        }
    }
    for (pool, used) in &pool_used {
        if let Some(p) = problem.pools.get(*pool as usize)
            && let Some(rem) = &p.remaining
            && !limit_fits(used, rem)
        {
            errors.push(PlanViolation::PoolLimit {
                pool: p.name.clone(),
            });
        }
    }
    let actual: f64 = plan
        .nodes
        .iter()
        .filter_map(|n| problem.shapes.get(n.shape as usize))
        .fold(0.0, |acc, s| acc + s.price);
    if (actual - plan.cost).abs() > 1e-6 * actual.abs().max(1.0) {
        errors.push(PlanViolation::Cost {
            claimed: format!("{:.6}", plan.cost),
            actual: format!("{actual:.6}"),
        });
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Whether `used` stays within a remaining NodePool allowance. First-class fields are always
/// compared (unlimited ones are `i64::MAX`, see [`unlimited_where_zero`]); extended entries
/// count only when the allowance names them.
pub fn limit_fits(used: &Resources, remaining: &Resources) -> bool {
    used.cpu_milli <= remaining.cpu_milli
        && used.memory <= remaining.memory
        && used.pods <= remaining.pods
        && used.ephemeral_storage <= remaining.ephemeral_storage
        && remaining
            .extended
            .iter()
            .all(|(k, lim)| used.extended.get(k).copied().unwrap_or(0) <= *lim)
}

/// A NodePool's `limits` as an allowance: first-class fields the user left at zero are not
/// limited (a limit lists only what it names) and become `i64::MAX`.
pub fn unlimited_where_zero(limits: &Resources) -> Resources {
    let open = |v: i64| if v == 0 { i64::MAX } else { v };
    Resources {
        cpu_milli: open(limits.cpu_milli),
        memory: open(limits.memory),
        pods: open(limits.pods),
        ephemeral_storage: open(limits.ephemeral_storage),
        extended: limits.extended.clone(),
    }
}
