//! The greedy packing engine shared by the shipped planners.

use std::collections::HashMap;
use std::sync::Arc;

use crate::model::Resources;
use crate::packing::{
    ItemId, LaunchPlan, NodeBuilder, PackItem, PackingProblem, PlannedNode, Reject, ShapeId,
    ShapeSet, limit_fits,
};

use super::open_lists::OpenLists;

/// How open nodes are ordered when an item looks for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeOrder {
    /// Oldest open node first (first fit).
    Creation,
    /// Fewest pods first; among nodes with as many pods, the order Karpenter's list is left
    /// in. Karpenter keeps its in-flight NodeClaims in one list and sorts it by pod count
    /// before every pod (`sort.Slice`, an insertion sort, so stable, while the list has at
    /// most 12 entries): a node that just took a pod comes first among the nodes with its
    /// new count (they were all behind it), and a new node comes last among the one-pod
    /// nodes (it is appended). Go's sort is not stable beyond 12 entries; this keeps the
    /// stable order there too (documented in docs/simulator.md with its measured effect).
    FewestPods,
}

/// Keys for [`NodeOrder::FewestPods`] in an ordered set: the pod count in the high bits and
/// the tie order below it. A new node gets the next tie value above the base (last among
/// nodes with as many pods), a node that just took a pod the next below it (first among
/// them).
#[derive(Debug, Default)]
pub struct FewestPodsOrder {
    new: usize,
    joined: usize,
}

impl FewestPodsOrder {
    const TIE_BASE: usize = 1 << 31;

    /// The key of node `idx` now holding `pods` pods; `joined`: it just took one (else it
    /// is new).
    pub fn key(&mut self, pods: usize, idx: usize, joined: bool) -> (usize, usize) {
        let tie = if joined {
            self.joined += 1;
            Self::TIE_BASE - self.joined
        } else {
            self.new += 1;
            Self::TIE_BASE + self.new
        };
        ((pods << 32) | tie, idx)
    }
}

/// What a greedy pass does differently per strategy.
pub trait Policy {
    fn node_order(&self) -> NodeOrder;
    /// The order in which items are placed (a permutation of item ids).
    fn item_order(&self, problem: &PackingProblem) -> Vec<ItemId>;
    /// The highest price of the shapes the new node may grow into, among `fitting` (shapes of
    /// one pool that fit the opening item alone); `demand` is what is not yet placed, by shape
    /// set. A price, not a list: a list per opened node was a tenth of a large pass.
    fn cap(
        &self,
        problem: &PackingProblem,
        opener: &PackItem,
        fitting: &[ShapeId],
        demand: &Demand,
    ) -> f64;
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

/// A node's initial shapes, largest first, with suffix maxima of their allocatable so a scan
/// stops once no remaining shape can hold the request. Shared by every node opened with the
/// same shapes (most nodes), so it is built and sorted once.
struct CandList {
    ids: Vec<ShapeId>,
    /// `suffix_max[i]`: per-dimension maximum (cpu, memory, pods, ephemeral) over `ids[i..]`.
    suffix_max: Vec<[i64; 4]>,
    /// The same shapes cheapest first (ties: lower id), so a node's launch shape is the first
    /// that is still compatible and holds its pods.
    by_price: Vec<ShapeId>,
}

impl CandList {
    /// `price_order`: every shape of the problem, cheapest first (ties: lower id).
    fn new(problem: &PackingProblem, ids: Vec<ShapeId>, price_order: &[ShapeId]) -> CandList {
        let alloc = |s: ShapeId| problem.shapes.get(s as usize).map(|sh| &sh.allocatable);
        // The problem's shared size order (recomputed only for a problem built without one),
        // restricted to `ids`.
        let computed;
        let order: &[ShapeId] = if problem.by_size.len() == problem.shapes.len() {
            &problem.by_size
        } else {
            computed = crate::packing::size_order(&problem.shapes);
            &computed
        };
        let mut member = vec![false; problem.shapes.len()];
        for s in &ids {
            if let Some(m) = member.get_mut(*s as usize) {
                *m = true;
            }
        }
        let ids: Vec<ShapeId> = order
            .iter()
            .copied()
            .filter(|s| member.get(*s as usize).copied().unwrap_or(false))
            .collect();
        let mut suffix_max = vec![[i64::MIN; 4]; ids.len()];
        let mut acc = [i64::MIN; 4];
        for (i, s) in ids.iter().enumerate().rev() {
            if let Some(a) = alloc(*s) {
                acc = [
                    acc[0].max(a.cpu_milli),
                    acc[1].max(a.memory),
                    acc[2].max(a.pods),
                    acc[3].max(a.ephemeral_storage),
                ];
            }
            if let Some(slot) = suffix_max.get_mut(i) {
                *slot = acc;
            }
        }
        let by_price = price_order
            .iter()
            .copied()
            .filter(|s| member.get(*s as usize).copied().unwrap_or(false))
            .collect();
        CandList {
            ids,
            suffix_max,
            by_price,
        }
    }
}

#[derive(Clone)]
struct OpenNode {
    /// Usage, items and group limits (its own candidate list is used only in exact mode).
    b: NodeBuilder,
    /// The node's initial shapes; `compat` (the intersection of the items' shape sets) says
    /// which are still compatible. Shapes that stopped fitting are not pruned: scans stop at
    /// the suffix maxima instead.
    cands: Arc<CandList>,
    /// Shared with the other nodes opened alike until an item narrows it (most never do: a
    /// copy per node was 12 MB of a 100,000-pod run).
    compat: Arc<ShapeSet>,
    /// Per-dimension maximum allocatable over the node's initial shapes (`compat` at open).
    max_alloc: [i64; 4],
    /// The pool has `minValues`: use the exact (pruning) checks of [`NodeBuilder`].
    exact: bool,
    pods: usize,
    closed: bool,
}

impl OpenNode {
    /// Opens a node over `cands` restricted to shapes priced at most `cap`.
    fn open(problem: &PackingProblem, pool: u32, cands: Arc<CandList>, cap: f64) -> OpenNode {
        let within = |s: &ShapeId| {
            problem
                .shapes
                .get(*s as usize)
                .is_some_and(|sh| sh.price <= cap)
        };
        let compat = ShapeSet::from_ids(
            problem.shapes.len(),
            cands.ids.iter().copied().filter(within),
        );
        let mut max_alloc = [i64::MIN; 4];
        for s in cands.ids.iter().filter(|s| within(s)) {
            if let Some(a) = problem.shapes.get(*s as usize).map(|sh| &sh.allocatable) {
                max_alloc = [
                    max_alloc[0].max(a.cpu_milli),
                    max_alloc[1].max(a.memory),
                    max_alloc[2].max(a.pods),
                    max_alloc[3].max(a.ephemeral_storage),
                ];
            }
        }
        let exact = problem
            .pools
            .get(pool as usize)
            .is_some_and(|p| !p.min_values.is_empty());
        let initial = if exact {
            cands.ids.iter().copied().filter(within).collect()
        } else {
            Vec::new()
        };
        OpenNode {
            b: NodeBuilder::new(pool, initial),
            cands,
            compat: Arc::new(compat),
            max_alloc,
            exact,
            pods: 0,
            closed: false,
        }
    }

    fn headroom(&self) -> Dims {
        let u = dims(&self.b.used);
        let m = self.max_alloc;
        [
            m[0].saturating_sub(u[0]),
            m[1].saturating_sub(u[1]),
            m[2].saturating_sub(u[2]),
            m[3].saturating_sub(u[3]),
        ]
    }

    /// Tries to add `item`; the same decision [`NodeBuilder::check`] makes.
    fn try_add(
        &mut self,
        problem: &PackingProblem,
        id: ItemId,
        item: &PackItem,
    ) -> Result<(), Reject> {
        self.b.check_groups(item)?;
        if self.exact {
            let surv = self.b.check(problem, item)?;
            self.b.add(id, item, surv);
        } else {
            let set = problem.item_shapes(item);
            let used = &self.b.used;
            let need = [
                used.cpu_milli.saturating_add(item.requests.cpu_milli),
                used.memory.saturating_add(item.requests.memory),
                used.pods.saturating_add(item.requests.pods),
                used.ephemeral_storage
                    .saturating_add(item.requests.ephemeral_storage),
            ];
            let common = self.compat.intersection_len(set);
            if common == 0 {
                return Err(Reject::NoCompatibleShape);
            }
            let fits = |s: ShapeId| {
                problem
                    .shapes
                    .get(s as usize)
                    .is_some_and(|sh| used.fits_with_all(&item.requests, &sh.allocatable))
            };
            let ok = if common <= 64 {
                // Few compatible shapes (a zone-pinned node or item): check just those.
                self.compat.iter_intersection(set).any(fits)
            } else {
                // Many: scan largest first and stop once nothing left is large enough.
                let mut found = false;
                for (i, &s) in self.cands.ids.iter().enumerate() {
                    if let Some(m) = self.cands.suffix_max.get(i)
                        && (m[0] < need[0] || m[1] < need[1] || m[2] < need[2] || m[3] < need[3])
                    {
                        break;
                    }
                    if self.compat.contains(s) && set.contains(s) && fits(s) {
                        found = true;
                        break;
                    }
                }
                found
            };
            if !ok {
                return Err(Reject::NoRoom);
            }
            self.b.add(id, item, Vec::new());
        }
        let set = problem.item_shapes(item);
        if !self.compat.is_subset(set) {
            Arc::make_mut(&mut self.compat).intersect_with(set);
        }
        self.pods += item.pods.len().max(1);
        Ok(())
    }

    /// The cheapest shape that launches this node with everything on it.
    fn launch(&self, problem: &PackingProblem) -> Option<ShapeId> {
        let used = &self.b.used;
        if !self.exact {
            return self.cands.by_price.iter().copied().find(|s| {
                self.compat.contains(*s)
                    && problem
                        .shapes
                        .get(*s as usize)
                        .is_some_and(|sh| used.fits_in(&sh.allocatable))
            });
        }
        self.b
            .candidates
            .iter()
            .copied()
            .filter(|s| {
                self.compat.contains(*s)
                    && problem
                        .shapes
                        .get(*s as usize)
                        .is_some_and(|sh| used.fits_in(&sh.allocatable))
            })
            .min_by(|a, b| {
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

/// CPU, memory, pods and ephemeral storage: what the quick room checks compare.
type Dims = [i64; 4];

#[inline]
fn dims(r: &Resources) -> Dims {
    [r.cpu_milli, r.memory, r.pods, r.ephemeral_storage]
}

#[inline]
fn may_fit(need: Dims, room: Dims) -> bool {
    need.iter().zip(room.iter()).all(|(n, r)| n <= r)
}

/// Per group of items, the per-dimension minimum of the requests of the group's items at a
/// position in the placement order or later, asked for at increasing positions. Kept as the
/// few positions where it changes (it only grows along the order): an array per position
/// was 6 MB a pass at 100,000 pods.
struct SuffixMin {
    /// (position, minimum over the group's items at this position or later), ascending.
    points: Vec<(usize, Dims)>,
    cursor: usize,
}

impl SuffixMin {
    /// The minimum over the group's items at `pos` or later (`i64::MAX` when none is left).
    /// `pos` must not decrease between calls.
    fn at(&mut self, pos: usize) -> Dims {
        while self.points.get(self.cursor).is_some_and(|(p, _)| *p < pos) {
            self.cursor += 1;
        }
        self.points
            .get(self.cursor)
            .map_or([i64::MAX; 4], |(_, d)| *d)
    }
}

/// [`SuffixMin`] of every group (`group_of`) over `order`.
fn suffix_minima(
    problem: &PackingProblem,
    order: &[ItemId],
    group_of: impl Fn(ItemId) -> u32,
) -> HashMap<u32, SuffixMin> {
    let mut out: HashMap<u32, SuffixMin> = HashMap::new();
    for (pos, id) in order.iter().enumerate().rev() {
        let Some(r) = problem.items.get(*id as usize).map(|i| dims(&i.requests)) else {
            continue;
        };
        let s = out.entry(group_of(*id)).or_insert(SuffixMin {
            points: Vec::new(),
            cursor: 0,
        });
        let mut m = s.points.last().map_or([i64::MAX; 4], |(_, d)| *d);
        for (m, r) in m.iter_mut().zip(r) {
            *m = (*m).min(r);
        }
        // A run of equal minima keeps its last position: a query at or before it finds it.
        if s.points.last().is_none_or(|(_, d)| *d != m) {
            s.points.push((pos, m));
        }
    }
    for s in out.values_mut() {
        s.points.reverse();
    }
    out
}

/// Runs a greedy pass with `policy`.
pub fn run(problem: &PackingProblem, policy: &dyn Policy) -> LaunchPlan {
    let order = policy.item_order(problem);
    let mut demand = Demand::new(problem);
    // Suffix minimum of item sizes in placement order: a node whose room is below it in any
    // dimension can take no remaining item and is closed (this never changes a decision).
    let mut suffix_min = suffix_minima(problem, &order, |_| 0);
    let mut nodes: Vec<OpenNode> = Vec::new();
    let node_order = policy.node_order();
    let mut fewest = FewestPodsOrder::default();
    let mut key = |pods: usize, idx: usize, joined: bool| match node_order {
        NodeOrder::Creation => (0, idx),
        NodeOrder::FewestPods => fewest.key(pods, idx, joined),
    };
    let mut reserved: Vec<Resources> = vec![Resources::default(); problem.pools.len()];
    let mut unplaced: Vec<(ItemId, String)> = Vec::new();
    // Candidate lists are shared between nodes: for a pool without limits, a node's list is
    // every shape of the pool in the opener's shape set, and its cap is applied through the
    // node's compatibility set. Shapes that do not fit the opener alone never fit the node
    // later, so including them changes no decision.
    let mut lists: HashMap<(u32, u32), Arc<CandList>> = HashMap::new();
    let price_order = crate::packing::price_order_of(problem);
    // A node's shapes: with NodePool limits, exactly the fitting ones within the cap (the
    // reservation below counts the largest); without, the pool's shapes for the item's set,
    // shared, with the cap applied through the node's compatible set (shapes above it that
    // fit the opener are left out; those that do not fit it never fit the node).
    let mut list_for =
        |pool: u32, item: &PackItem, fitting: &[ShapeId], cap: f64| -> (Arc<CandList>, f64) {
            let limited = problem
                .pools
                .get(pool as usize)
                .is_some_and(|p| p.remaining.is_some());
            if limited {
                let ids = fitting
                    .iter()
                    .copied()
                    .filter(|s| {
                        problem
                            .shapes
                            .get(*s as usize)
                            .is_some_and(|sh| sh.price <= cap)
                    })
                    .collect();
                return (
                    Arc::new(CandList::new(problem, ids, &price_order)),
                    f64::INFINITY,
                );
            }
            let key = (pool, item.shape_set);
            if let Some(l) = lists.get(&key) {
                return (Arc::clone(l), cap);
            }
            let all: Vec<ShapeId> = problem
                .item_shapes(item)
                .iter()
                .filter(|s| {
                    problem
                        .shapes
                        .get(*s as usize)
                        .is_some_and(|sh| sh.pool == pool)
                })
                .collect();
            let l = Arc::new(CandList::new(problem, all, &price_order));
            lists.insert(key, Arc::clone(&l));
            (l, cap)
        };

    let any_limits = problem.pools.iter().any(|p| p.remaining.is_some());
    let mut launchables: LaunchableCache = HashMap::new();
    // An empty node per (pool, shape set, price cap) without NodePool limits, copied for each
    // node opened alike: building its compatible set and bounds from the shapes each time was
    // a twentieth of a 100,000-pod run.
    let mut empty_nodes: HashMap<(u32, u32, u64), OpenNode> = HashMap::new();
    let mut open_empty = |pool: u32, item: &PackItem, cands: Arc<CandList>, cap: f64| {
        let limited = problem
            .pools
            .get(pool as usize)
            .is_some_and(|p| p.remaining.is_some());
        if limited {
            return OpenNode::open(problem, pool, cands, cap);
        }
        empty_nodes
            .entry((pool, item.shape_set, cap.to_bits()))
            .or_insert_with(|| OpenNode::open(problem, pool, cands, cap))
            .clone()
    };

    // Open nodes in order and, per item profile (shape set, groups, limits), without the
    // nodes that rejected it for good (see `open_lists`).
    let profiles = Profiles::new(problem);
    let mut open = OpenLists::new(node_order);
    // The same minimum per profile, from the item being placed on: a node too small for it
    // will be too small for every item of the profile still to come (its room only shrinks,
    // the minimum only grows), so it rejects the profile for good. Old nodes in creation
    // order are mostly full; without this every item walked past all of them.
    let mut profile_min = suffix_minima(problem, &order, |id| profiles.of(id));

    for (pos, &id) in order.iter().enumerate() {
        let Some(item) = problem.items.get(id as usize) else {
            continue;
        };
        demand.take(item);
        let min_next = suffix_min
            .get_mut(&0)
            .map_or([i64::MAX; 4], |s| s.at(pos + 1));
        let min_here = profile_min
            .get_mut(&profiles.of(id))
            .map_or([i64::MAX; 4], |s| s.at(pos));
        let profile = profiles.of(id);
        open.ensure(profile);
        let mut joined: Option<(usize, usize)> = None;
        let mut dead: Vec<(usize, usize)> = Vec::new();
        for (k0, idx) in open.scan(profile) {
            let Some(n) = nodes.get_mut(idx) else {
                continue;
            };
            let room = n.headroom();
            if !may_fit(dims(&item.requests), room) {
                if !may_fit(min_here, room) {
                    dead.push((k0, idx));
                }
                continue;
            }
            match n.try_add(problem, id, item) {
                Ok(()) => {
                    joined = Some((k0, idx));
                    break;
                }
                Err(Reject::NoCompatibleShape | Reject::Group(_)) => dead.push((k0, idx)),
                Err(_) => {}
            }
        }
        for entry in dead {
            open.reject(profile, entry);
        }
        if let Some(entry) = joined {
            let idx = entry.1;
            if let Some(n) = nodes.get_mut(idx) {
                if may_fit(min_next, n.headroom()) {
                    open.moved(entry, key(n.pods, idx, true));
                } else {
                    n.closed = true;
                    open.close(entry);
                }
            }
            continue;
        }
        // Without NodePool limits, which pool and shapes can launch an item depends only on
        // its shapes and requests; replicas share both, so it is worked out once for them.
        let pick = if any_limits {
            launchable(problem, item, &reserved, 0)
        } else {
            launchables
                .entry((item.shape_set, item.requests.clone()))
                .or_insert_with(|| launchable(problem, item, &reserved, 0))
                .clone()
        };
        match pick {
            Ok((mut pool, mut fitting)) => {
                // A pool whose node cannot take the item (its minValues would break) gives way
                // to the next pool that can launch it, as Karpenter moves on to the next
                // NodePool when a NodeClaim for one fails.
                let mut first_reject = None;
                let mut opened = None;
                for skip in 1..=problem.pools.len() {
                    let cap = policy.cap(problem, item, &fitting, &demand);
                    // The capped set may be too narrow (minValues); fall back to every fitting
                    // shape.
                    let mut n = {
                        let (l, cap) = list_for(pool, item, &fitting, cap);
                        open_empty(pool, item, l, cap)
                    };
                    match n.try_add(problem, id, item) {
                        Ok(()) => {
                            opened = Some(n);
                            break;
                        }
                        Err(first) => {
                            n = {
                                let (l, cap) = list_for(pool, item, &fitting, f64::INFINITY);
                                open_empty(pool, item, l, cap)
                            };
                            if n.try_add(problem, id, item).is_ok() {
                                opened = Some(n);
                                break;
                            }
                            first_reject.get_or_insert(first);
                        }
                    }
                    match launchable(problem, item, &reserved, skip) {
                        Ok((p, f)) => (pool, fitting) = (p, f),
                        Err(_) => break,
                    }
                }
                let Some(mut n) = opened else {
                    let why = first_reject.map_or_else(|| "no room".to_string(), |r| describe(&r));
                    unplaced.push((id, format!("no launch shape can hold it ({why})")));
                    continue;
                };
                // Reserve the largest capacity the node could launch as (Karpenter's rule).
                let limited = problem
                    .pools
                    .get(pool as usize)
                    .is_some_and(|p| p.remaining.is_some());
                if limited && let Some(r) = reserved.get_mut(pool as usize) {
                    let mut max = Resources::default();
                    for s in n.cands.ids.iter().filter(|s| n.compat.contains(**s)) {
                        if let Some(sh) = problem.shapes.get(*s as usize) {
                            max = max.max(&sh.capacity);
                        }
                    }
                    r.add_assign(&max.with_extended("nodes", 1));
                }
                let idx = nodes.len();
                if may_fit(min_next, n.headroom()) {
                    open.add(key(n.pods, idx, false));
                } else {
                    n.closed = true;
                }
                nodes.push(n);
            }
            Err(reason) => unplaced.push((id, reason)),
        }
    }

    let planned: Vec<PlannedNode> = nodes
        .into_iter()
        .filter_map(|n| {
            n.launch(problem).map(|s| PlannedNode {
                shape: s,
                items: n.b.items,
            })
        })
        .collect();
    LaunchPlan::from_nodes(problem, planned, unplaced)
}

/// [`launchable`]'s answers by (shape set, requests), for problems without NodePool limits.
type LaunchableCache = HashMap<(u32, Resources), Result<(u32, Vec<ShapeId>), String>>;

/// What makes two items the same profile: shape set, group memberships, group limits
/// (kept and arrival).
type ProfileKey<'a> = (u32, &'a [u32], &'a [(u32, u32)], &'a [(u32, u32)]);

/// Items with the same shape set, group memberships and limits share a profile: a node that
/// rejects one of them for lack of a compatible shape or for a group limit rejects them all,
/// for good.
struct Profiles {
    of_item: Vec<u32>,
}

impl Profiles {
    fn new(problem: &PackingProblem) -> Profiles {
        let mut ids: HashMap<ProfileKey<'_>, u32> = HashMap::new();
        let of_item = problem
            .items
            .iter()
            .map(|it| {
                let n = ids.len() as u32;
                *ids.entry((
                    it.shape_set,
                    it.member_of.as_slice(),
                    it.limits.as_slice(),
                    it.arrival_limits.as_slice(),
                ))
                .or_insert(n)
            })
            .collect();
        Profiles { of_item }
    }

    fn of(&self, item: ItemId) -> u32 {
        self.of_item.get(item as usize).copied().unwrap_or(u32::MAX)
    }
}

/// Picks the highest-ranked pool with a shape that holds `item` alone within the pool's
/// remaining limits, and those shapes; `skip` passes over that many such pools first (the
/// next choice when a node of the first cannot take the item).
fn launchable(
    problem: &PackingProblem,
    item: &PackItem,
    reserved: &[Resources],
    mut skip: usize,
) -> Result<(u32, Vec<ShapeId>), String> {
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
            if skip == 0 {
                return Ok((pool, fitting));
            }
            skip -= 1;
            continue;
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The compressed suffix minima answer, at every position in order, what a scan of
        /// the group's remaining items gives.
        #[test]
        fn suffix_minima_are_the_minima_of_what_is_left(
            items in prop::collection::vec((0u32..3, 1i64..50, 1i64..50), 0..60),
        ) {
            let problem = PackingProblem::new(
                Vec::new(),
                Vec::new(),
                items
                    .iter()
                    .map(|(_, c, m)| {
                        PackItem::for_test(Resources::with_pods(*c, *m, 1), &[])
                    })
                    .collect(),
            );
            let order: Vec<ItemId> = (0..items.len() as ItemId).rev().collect();
            let group = |id: ItemId| items.get(id as usize).map_or(0, |(g, _, _)| *g);
            let mut minima = suffix_minima(&problem, &order, group);
            for pos in 0..=order.len() {
                for g in 0..3u32 {
                    let mut want = [i64::MAX; 4];
                    for id in order.iter().skip(pos).filter(|id| group(**id) == g) {
                        let d = dims(&problem.items[*id as usize].requests);
                        for (w, v) in want.iter_mut().zip(d) {
                            *w = (*w).min(v);
                        }
                    }
                    let got = minima.get_mut(&g).map_or([i64::MAX; 4], |s| s.at(pos));
                    prop_assert_eq!(got, want, "group {} at {}", g, pos);
                }
            }
        }
    }
}
