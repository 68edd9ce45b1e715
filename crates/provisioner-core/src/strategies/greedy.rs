//! The greedy packing engine shared by the shipped planners.

use std::collections::BTreeSet;

use crate::model::Resources;
use crate::packing::{
    ItemId, LaunchPlan, NodeBuilder, PackItem, PackingProblem, PlannedNode, Reject, ShapeId,
    limit_fits,
};

/// How open nodes are ordered when an item looks for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeOrder {
    /// Oldest open node first (first fit).
    Creation,
    /// Fewest pods first, then oldest (Karpenter sorts its in-flight NodeClaims this way before
    /// every pod).
    FewestPods,
}

/// What a greedy pass does differently per strategy.
pub trait Policy {
    fn node_order(&self) -> NodeOrder;
    /// The order in which items are placed (a permutation of item ids).
    fn item_order(&self, problem: &PackingProblem) -> Vec<ItemId>;
    /// Which of `fitting` (shapes of one pool that fit the opening item alone) the new node
    /// may grow into. `remaining` is the demand not yet placed, by shape set.
    fn cap(
        &self,
        problem: &PackingProblem,
        opener: &PackItem,
        fitting: Vec<ShapeId>,
        demand: &Demand,
    ) -> Vec<ShapeId>;
}

/// Remaining demand per shape set, kept up to date as items are placed.
#[derive(Debug, Clone)]
pub struct Demand {
    pub per_set: Vec<Resources>,
    pub items_per_set: Vec<u64>,
    /// For each shape set, the sets whose shapes intersect it.
    pub related: Vec<Vec<u32>>,
}

impl Demand {
    fn new(problem: &PackingProblem) -> Demand {
        let n = problem.shape_sets.len();
        let mut per_set = vec![Resources::default(); n];
        let mut items_per_set = vec![0u64; n];
        for it in &problem.items {
            if let Some(d) = per_set.get_mut(it.shape_set as usize) {
                d.cpu_milli += it.requests.cpu_milli;
                d.memory += it.requests.memory;
                d.pods += it.requests.pods;
            }
            if let Some(c) = items_per_set.get_mut(it.shape_set as usize) {
                *c += 1;
            }
        }
        let related = (0..n)
            .map(|a| {
                (0..n as u32)
                    .filter(|b| {
                        match (
                            problem.shape_sets.get(a),
                            problem.shape_sets.get(*b as usize),
                        ) {
                            (Some(x), Some(y)) => x.intersects(y),
                            _ => false,
                        }
                    })
                    .collect()
            })
            .collect();
        Demand {
            per_set,
            items_per_set,
            related,
        }
    }

    fn take(&mut self, item: &PackItem) {
        if let Some(d) = self.per_set.get_mut(item.shape_set as usize) {
            d.cpu_milli -= item.requests.cpu_milli;
            d.memory -= item.requests.memory;
            d.pods -= item.requests.pods;
        }
        if let Some(c) = self.items_per_set.get_mut(item.shape_set as usize) {
            *c = c.saturating_sub(1);
        }
    }

    /// Demand (cpu, memory, pods) and item count of everything that could share a node with
    /// an item of `set`.
    pub fn around(&self, set: u32) -> (Resources, u64) {
        let mut r = Resources::default();
        let mut n = 0;
        if let Some(rel) = self.related.get(set as usize) {
            for s in rel {
                if let Some(d) = self.per_set.get(*s as usize) {
                    r.cpu_milli += d.cpu_milli;
                    r.memory += d.memory;
                    r.pods += d.pods;
                }
                n += self.items_per_set.get(*s as usize).copied().unwrap_or(0);
            }
        }
        (r, n)
    }
}

struct OpenNode {
    b: NodeBuilder,
    /// Per-dimension maximum of (allocatable - used) over candidates: a fast reject.
    headroom: Resources,
    pods: usize,
    closed: bool,
}

fn headroom(problem: &PackingProblem, b: &NodeBuilder) -> Resources {
    let mut h = Resources {
        cpu_milli: i64::MIN,
        memory: i64::MIN,
        pods: i64::MIN,
        ephemeral_storage: i64::MIN,
        extended: Default::default(),
    };
    for s in &b.candidates {
        if let Some(sh) = problem.shapes.get(*s as usize) {
            h.cpu_milli = h.cpu_milli.max(sh.allocatable.cpu_milli - b.used.cpu_milli);
            h.memory = h.memory.max(sh.allocatable.memory - b.used.memory);
            h.pods = h.pods.max(sh.allocatable.pods - b.used.pods);
            h.ephemeral_storage = h
                .ephemeral_storage
                .max(sh.allocatable.ephemeral_storage - b.used.ephemeral_storage);
        }
    }
    h
}

#[inline]
fn may_fit(req: &Resources, h: &Resources) -> bool {
    req.cpu_milli <= h.cpu_milli
        && req.memory <= h.memory
        && req.pods <= h.pods
        && req.ephemeral_storage <= h.ephemeral_storage
}

/// Runs a greedy pass with `policy`.
pub fn run(problem: &PackingProblem, policy: &dyn Policy) -> LaunchPlan {
    let order = policy.item_order(problem);
    let mut demand = Demand::new(problem);
    // Suffix minimum of item sizes in placement order: a node whose headroom is below it in any
    // dimension can take no remaining item and is closed (this never changes a decision).
    let mut suffix_min = vec![
        Resources {
            cpu_milli: i64::MAX,
            memory: i64::MAX,
            pods: i64::MAX,
            ephemeral_storage: i64::MAX,
            extended: Default::default()
        };
        order.len() + 1
    ];
    for (pos, id) in order.iter().enumerate().rev() {
        let next = suffix_min.get(pos + 1).cloned().unwrap_or_default();
        let r = problem.items.get(*id as usize).map(|i| &i.requests);
        let cur = match r {
            Some(r) => Resources {
                cpu_milli: next.cpu_milli.min(r.cpu_milli),
                memory: next.memory.min(r.memory),
                pods: next.pods.min(r.pods),
                ephemeral_storage: next.ephemeral_storage.min(r.ephemeral_storage),
                extended: Default::default(),
            },
            None => next,
        };
        if let Some(slot) = suffix_min.get_mut(pos) {
            *slot = cur;
        }
    }

    let mut nodes: Vec<OpenNode> = Vec::new();
    // Open (not closed) nodes keyed for iteration order.
    let mut open: BTreeSet<(usize, usize)> = BTreeSet::new();
    let key = |order: NodeOrder, pods: usize, idx: usize| match order {
        NodeOrder::Creation => (0, idx),
        NodeOrder::FewestPods => (pods, idx),
    };
    let node_order = policy.node_order();
    let mut reserved: Vec<Resources> = vec![Resources::default(); problem.pools.len()];
    let mut unplaced: Vec<(ItemId, String)> = Vec::new();

    for (pos, &id) in order.iter().enumerate() {
        let Some(item) = problem.items.get(id as usize) else {
            continue;
        };
        demand.take(item);
        let mut placed = false;
        let mut to_close = Vec::new();
        let min_next = suffix_min.get(pos + 1).cloned().unwrap_or_default();
        for &(k0, idx) in open.iter() {
            let Some(n) = nodes.get(idx) else { continue };
            if !may_fit(&item.requests, &n.headroom)
                || n.b.check_groups(item).is_err()
                || !n.b.quick_fits(problem, item)
            {
                continue;
            }
            if let Ok(surv) = n.b.check(problem, item) {
                let n = match nodes.get_mut(idx) {
                    Some(n) => n,
                    None => continue,
                };
                n.b.add(id, item, surv);
                n.pods += item.pods.len().max(1);
                n.headroom = headroom(problem, &n.b);
                if !may_fit(&min_next, &n.headroom) {
                    n.closed = true;
                }
                to_close.push((k0, idx));
                placed = true;
                break;
            }
        }
        for (k0, idx) in to_close {
            open.remove(&(k0, idx));
            if let Some(n) = nodes.get(idx)
                && !n.closed
            {
                open.insert(key(node_order, n.pods, idx));
            }
        }
        if placed {
            continue;
        }
        match open_node(problem, policy, item, &demand, &reserved) {
            Ok((pool, capped, fitting)) => {
                // The capped set may be too narrow for minValues; fall back to every fitting shape.
                let mut b = NodeBuilder::new(pool, capped);
                let surv = match b.check(problem, item) {
                    Ok(s) => s,
                    Err(_) => {
                        b = NodeBuilder::new(pool, fitting);
                        match b.check(problem, item) {
                            Ok(s) => s,
                            Err(r) => {
                                unplaced.push((
                                    id,
                                    format!("no launch shape can hold it ({})", describe(&r)),
                                ));
                                continue;
                            }
                        }
                    }
                };
                b.add(id, item, surv);
                // Reserve the largest capacity the node could launch as (Karpenter's rule).
                let limited = problem
                    .pools
                    .get(pool as usize)
                    .is_some_and(|p| p.remaining.is_some());
                if limited && let Some(r) = reserved.get_mut(pool as usize) {
                    let mut max = Resources::default();
                    for s in &b.candidates {
                        if let Some(sh) = problem.shapes.get(*s as usize) {
                            max = max.max(&sh.capacity);
                        }
                    }
                    r.add_assign(&max.with_extended("nodes", 1));
                }
                let h = headroom(problem, &b);
                let idx = nodes.len();
                let pods = item.pods.len().max(1);
                let closed = !may_fit(&min_next, &h);
                nodes.push(OpenNode {
                    b,
                    headroom: h,
                    pods,
                    closed,
                });
                if !closed {
                    open.insert(key(node_order, pods, idx));
                }
            }
            Err(reason) => unplaced.push((id, reason)),
        }
    }

    let planned: Vec<PlannedNode> = nodes
        .into_iter()
        .filter_map(|n| {
            n.b.cheapest(problem).map(|s| PlannedNode {
                shape: s,
                items: n.b.items,
            })
        })
        .collect();
    LaunchPlan::from_nodes(problem, planned, unplaced)
}

/// Picks the highest-ranked pool with a shape that holds `item` alone within the pool's
/// remaining limits, and the policy's cap of those shapes.
fn open_node(
    problem: &PackingProblem,
    policy: &dyn Policy,
    item: &PackItem,
    demand: &Demand,
    reserved: &[Resources],
) -> Result<(u32, Vec<ShapeId>, Vec<ShapeId>), String> {
    let set = problem.item_shapes(item);
    let mut pools: Vec<u32> = (0..problem.pools.len() as u32).collect();
    pools.sort_by_key(|p| {
        (
            problem.pools.get(*p as usize).map_or(u32::MAX, |x| x.rank),
            *p,
        )
    });
    let mut reasons = Vec::new();
    for pool in pools {
        let mut any_compatible = false;
        let mut any_room = false;
        let mut fitting = Vec::new();
        for s in set.iter() {
            let Some(sh) = problem.shapes.get(s as usize) else {
                continue;
            };
            if sh.pool != pool {
                continue;
            }
            any_compatible = true;
            if !item.requests.fits_in(&sh.allocatable) {
                continue;
            }
            any_room = true;
            let within = problem
                .pools
                .get(pool as usize)
                .and_then(|p| p.remaining.as_ref())
                .is_none_or(|rem| {
                    let mut after = reserved.get(pool as usize).cloned().unwrap_or_default();
                    after.add_assign(&sh.capacity.clone().with_extended("nodes", 1));
                    limit_fits(&after, rem)
                });
            if within {
                fitting.push(s);
            }
        }
        let name = problem
            .pools
            .get(pool as usize)
            .map_or("?", |p| p.name.as_str());
        if !fitting.is_empty() {
            let capped = policy.cap(problem, item, fitting.clone(), demand);
            return Ok((pool, capped, fitting));
        }
        if any_room {
            reasons.push(format!("NodePool {name}: its limits are reached"));
        } else if any_compatible {
            reasons.push(format!(
                "NodePool {name}: no compatible instance type has room"
            ));
        }
    }
    if reasons.is_empty() {
        reasons.push("no compatible launch shape".into());
    }
    Err(reasons.join("; "))
}

/// Why an item cannot join a builder, in words.
pub fn describe(r: &Reject) -> String {
    match r {
        Reject::NoCompatibleShape => "no compatible shape".into(),
        Reject::NoRoom => "no room".into(),
        Reject::Group(g) => format!("per-node group {g} is full"),
        Reject::MinValues(k) => format!("minValues on {k} would break"),
    }
}
