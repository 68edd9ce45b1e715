//! The pattern (configuration) view of a packing problem.
//!
//! Pods with the same requests and the same constraints are interchangeable, so the optimiser
//! works on **classes** (a request vector, a shape set, the same per-node groups, with a count)
//! and **shapes** (the launch shapes that matter: compatible with some class and not dominated
//! by a cheaper, at least as large shape of the same NodePool). A **pattern** is one node: a
//! shape and how many pods of each class it holds.
//!
//! Large rounds with many distinct request vectors are coarsened: requests are bucketed on a
//! grid and each bucket becomes a class with two sizes, the largest member's (used to build
//! patterns, so every pattern fits whichever members it gets) and the smallest member's (used
//! to certify the lower bound, so the bound stays a bound).

use std::collections::{BTreeMap, HashMap};

use crate::model::Resources;
use crate::packing::{GroupId, ItemId, NodeBuilder, PackItem, PackingProblem, ShapeId};

/// A resource dimension the classes request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Dim {
    Cpu,
    Memory,
    Pods,
    Ephemeral,
    Extended(String),
}

impl Dim {
    fn of(&self, r: &Resources) -> i64 {
        match self {
            Dim::Cpu => r.cpu_milli,
            Dim::Memory => r.memory,
            Dim::Pods => r.pods,
            Dim::Ephemeral => r.ephemeral_storage,
            Dim::Extended(k) => r.extended.get(k).copied().unwrap_or(0),
        }
    }
}

/// Interchangeable pods.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Class {
    /// Member items, ascending.
    pub items: Vec<ItemId>,
    /// Per dimension: the largest member's request (patterns are built with it).
    pub size_hi: Vec<i64>,
    /// Per dimension: the smallest member's request (the bound is certified with it).
    pub size_lo: Vec<i64>,
    /// Element-wise maximum of the members' requests: a synthetic member for constraint checks.
    pub req_hi: Resources,
    /// A member, for the shape set and groups (equal across members).
    pub template: ItemId,
    /// Indices into [`PatternProblem::groups`] this class counts in.
    pub groups: Vec<usize>,
}

impl Class {
    pub fn count(&self) -> u32 {
        self.items.len() as u32
    }
}

/// A launch shape kept for optimisation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PShape {
    pub id: ShapeId,
    pub pool: u32,
    pub price: f64,
    pub cap: Vec<i64>,
}

/// A relaxed per-node group cap: at most `cap` members of the group on any node. Holds for
/// every feasible node because every member carries a limit on the group no larger than it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GroupCap {
    pub group: GroupId,
    pub cap: u32,
}

/// The reduced problem.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PatternProblem {
    pub dims: Vec<Dim>,
    pub classes: Vec<Class>,
    pub shapes: Vec<PShape>,
    /// Per shape: classes whose largest member fits it and may use it (column building).
    pub compat_hi: Vec<Vec<u32>>,
    /// Per shape: classes whose smallest member fits it and may use it (bound certification;
    /// a superset of `compat_hi`).
    pub compat_lo: Vec<Vec<u32>>,
    pub groups: Vec<GroupCap>,
    /// Original shape id -> kept shape index that is at least as good for every class (itself
    /// when kept).
    pub representative: HashMap<ShapeId, u32>,
    /// Shapes on the efficient frontier (class-independent dominance) compatible with some
    /// class, before the class-aware dominance pruning.
    pub shapes_before: usize,
    /// Whether classes were coarsened (sizes differ within a class).
    pub coarsened: bool,
}

/// A pattern: one node of a shape with `counts[(class, n)]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Pattern {
    pub shape: u32,
    pub counts: Vec<(u32, u32)>,
}

impl PatternProblem {
    /// Builds the classes of `items` (each with the best pool rank it may use, see
    /// [`super::allowed_rank`]) and the shapes that matter. `steps[d]` > 1 buckets dimension
    /// `d` (coarsening); `None` keeps requests exact.
    pub fn build(
        problem: &PackingProblem,
        items: &[(ItemId, u32)],
        steps: Option<&[i64]>,
        frontier: Option<&Frontier>,
    ) -> PatternProblem {
        let dims = dims_of(problem, items.iter().map(|(i, _)| *i));
        // Class key: bucketed sizes + shape set + worst allowed rank + groups.
        type Key = (Vec<i64>, u32, u32, Vec<GroupId>, Vec<(GroupId, u32)>);
        let mut by_key: BTreeMap<Key, Vec<ItemId>> = BTreeMap::new();
        for &(id, rank) in items {
            let Some(it) = problem.items.get(id as usize) else {
                continue;
            };
            let cell: Vec<i64> = dims
                .iter()
                .enumerate()
                .map(|(d, dim)| {
                    let v = dim.of(&it.requests).max(0);
                    match steps.and_then(|s| s.get(d)) {
                        Some(step) if *step > 1 => v / step,
                        _ => v,
                    }
                })
                .collect();
            let mut member = it.member_of.clone();
            member.sort_unstable();
            let mut limits = it.limits.clone();
            limits.sort_unstable();
            // Arrival limits (see `PackItem::arrival_limits`) set items apart too.
            let mut arrival = it.arrival_limits.clone();
            arrival.sort_unstable();
            limits.push((GroupId::MAX, 0));
            limits.extend(arrival);
            by_key
                .entry((cell, it.shape_set, rank, member, limits))
                .or_default()
                .push(id);
        }
        let mut classes = Vec::with_capacity(by_key.len());
        let mut class_rank = Vec::with_capacity(by_key.len());
        for ((_, _, rank, _, _), mut ids) in by_key {
            ids.sort_unstable();
            let Some(&template) = ids.first() else {
                continue;
            };
            let reqs: Vec<&Resources> = ids
                .iter()
                .filter_map(|i| problem.items.get(*i as usize))
                .map(|it| &it.requests)
                .collect();
            let size_hi: Vec<i64> = dims
                .iter()
                .map(|d| reqs.iter().map(|r| d.of(r).max(0)).max().unwrap_or(0))
                .collect();
            let size_lo: Vec<i64> = dims
                .iter()
                .map(|d| reqs.iter().map(|r| d.of(r).max(0)).min().unwrap_or(0))
                .collect();
            let req_hi = Resources::elementwise_max(reqs.iter().copied());
            classes.push(Class {
                items: ids,
                size_hi,
                size_lo,
                req_hi,
                template,
                groups: Vec::new(),
            });
            class_rank.push(rank);
        }
        let coarsened = classes.iter().any(|c| c.size_hi != c.size_lo);

        // Relaxed group caps.
        let mut caps: BTreeMap<GroupId, Option<u32>> = BTreeMap::new();
        for c in &classes {
            let Some(t) = problem.items.get(c.template as usize) else {
                continue;
            };
            for g in &t.member_of {
                let own = t
                    .limits
                    .iter()
                    .filter(|(lg, _)| lg == g)
                    .map(|(_, l)| *l)
                    .min();
                let e = caps.entry(*g).or_insert(Some(0));
                *e = match (*e, own) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
            }
        }
        let groups: Vec<GroupCap> = caps
            .iter()
            .filter_map(|(g, c)| c.map(|cap| GroupCap { group: *g, cap }))
            .collect();
        let gidx: HashMap<GroupId, usize> = groups
            .iter()
            .enumerate()
            .map(|(i, g)| (g.group, i))
            .collect();
        for c in &mut classes {
            if let Some(t) = problem.items.get(c.template as usize) {
                c.groups = t
                    .member_of
                    .iter()
                    .filter_map(|g| gidx.get(g).copied())
                    .collect();
                c.groups.sort_unstable();
                c.groups.dedup();
            }
        }

        let Frontier {
            shapes: frontier,
            dominated: pre_rep,
        } = match frontier {
            Some(f) => f.clone(),
            None => Frontier::new(problem, items),
        };

        // Shapes compatible with some class (by the smallest member), with their class lists.
        let rank_of = |pool: u32| {
            problem
                .pools
                .get(pool as usize)
                .map_or(u32::MAX, |p| p.rank)
        };
        let lo_req = |c: &Class| -> Resources {
            let mut r = c.req_hi.clone();
            for (d, dim) in dims.iter().enumerate() {
                let v = c.size_lo.get(d).copied().unwrap_or(0);
                match dim {
                    Dim::Cpu => r.cpu_milli = v,
                    Dim::Memory => r.memory = v,
                    Dim::Pods => r.pods = v,
                    Dim::Ephemeral => r.ephemeral_storage = v,
                    Dim::Extended(k) => {
                        r.extended.insert(k.clone(), v);
                    }
                }
            }
            r
        };
        let lo_reqs: Vec<Resources> = classes.iter().map(lo_req).collect();
        struct Cand {
            id: ShapeId,
            lo: Vec<u64>,
            hi: Vec<u32>,
            lo_list: Vec<u32>,
        }
        let words = classes.len().div_ceil(64);
        let mut cands: Vec<Cand> = Vec::new();
        for (sid, _) in &frontier {
            let sid = *sid;
            let Some(sh) = problem.shapes.get(sid as usize) else {
                continue;
            };
            let mut lo = vec![0u64; words];
            let mut lo_list = Vec::new();
            let mut hi = Vec::new();
            for (ci, c) in classes.iter().enumerate() {
                let Some(t) = problem.items.get(c.template as usize) else {
                    continue;
                };
                if !problem.item_shapes(t).contains(sid)
                    || rank_of(sh.pool) > class_rank.get(ci).copied().unwrap_or(0)
                {
                    continue;
                }
                if lo_reqs.get(ci).is_some_and(|r| r.fits_in(&sh.allocatable)) {
                    if let Some(w) = lo.get_mut(ci / 64) {
                        *w |= 1u64 << (ci % 64);
                    }
                    lo_list.push(ci as u32);
                    if c.req_hi.fits_in(&sh.allocatable) {
                        hi.push(ci as u32);
                    }
                }
            }
            if !lo_list.is_empty() {
                cands.push(Cand {
                    id: sid,
                    lo,
                    hi,
                    lo_list,
                });
            }
        }
        let shapes_before = cands.len();

        // Dominance: drop a shape when a kept shape of the same pool is no more expensive, at
        // least as large in every requested dimension and usable by every class it is.
        let cap_of = |sid: ShapeId| -> Vec<i64> {
            problem
                .shapes
                .get(sid as usize)
                .map(|sh| dims.iter().map(|d| d.of(&sh.allocatable)).collect())
                .unwrap_or_default()
        };
        let price_of = |sid: ShapeId| {
            problem
                .shapes
                .get(sid as usize)
                .map_or(f64::INFINITY, |s| s.price)
        };
        cands.sort_by(|a, b| {
            price_of(a.id)
                .total_cmp(&price_of(b.id))
                .then(a.id.cmp(&b.id))
        });
        let mut kept: Vec<(Cand, Vec<i64>)> = Vec::new();
        let mut representative = HashMap::new();
        for c in cands {
            let cap = cap_of(c.id);
            let Some(sh) = problem.shapes.get(c.id as usize) else {
                continue;
            };
            let limited = problem
                .pools
                .get(sh.pool as usize)
                .is_some_and(|p| p.remaining.is_some());
            let dominator = kept.iter().position(|(k, kcap)| {
                let Some(ks) = problem.shapes.get(k.id as usize) else {
                    return false;
                };
                ks.pool == sh.pool
                    && kcap.iter().zip(&cap).all(|(a, b)| a >= b)
                    && c.lo.iter().zip(&k.lo).all(|(b, a)| b & !a == 0)
                    && (!limited || ks.capacity.fits_in(&sh.capacity))
            });
            match dominator {
                Some(k) => {
                    representative.insert(c.id, k as u32);
                }
                None => {
                    representative.insert(c.id, kept.len() as u32);
                    kept.push((c, cap));
                }
            }
        }
        // Shapes pruned in the first pass stand for their dominator's representative.
        for (sid, dom) in &pre_rep {
            if let Some(r) = representative.get(dom).copied() {
                representative.insert(*sid, r);
            }
        }
        let mut shapes = Vec::with_capacity(kept.len());
        let mut compat_hi = Vec::with_capacity(kept.len());
        let mut compat_lo = Vec::with_capacity(kept.len());
        for (c, cap) in kept {
            let (pool, price) = problem
                .shapes
                .get(c.id as usize)
                .map_or((0, f64::INFINITY), |s| (s.pool, s.price));
            shapes.push(PShape {
                id: c.id,
                pool,
                price,
                cap,
            });
            compat_hi.push(c.hi);
            compat_lo.push(c.lo_list);
        }
        PatternProblem {
            dims,
            classes,
            shapes,
            compat_hi,
            compat_lo,
            groups,
            representative,
            shapes_before,
            coarsened,
        }
    }

    /// A synthetic member of `class` for the shared constraint checks: the class's template
    /// with the largest member's requests.
    pub fn synthetic(&self, problem: &PackingProblem, class: u32) -> Option<PackItem> {
        let c = self.classes.get(class as usize)?;
        let t = problem.items.get(c.template as usize)?;
        Some(PackItem {
            pods: Vec::new(),
            requests: c.req_hi.clone(),
            shape_set: t.shape_set,
            member_of: t.member_of.clone(),
            limits: t.limits.clone(),
            arrival_limits: t.arrival_limits.clone(),
        })
    }
}

/// The shapes on the efficient frontier for a set of items, and where the others went.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Frontier {
    /// Kept shapes with their membership in the items' shape sets.
    shapes: Vec<(ShapeId, Vec<bool>)>,
    /// Dropped shape -> the kept shape that dominates it.
    dominated: HashMap<ShapeId, ShapeId>,
}

impl Frontier {
    pub fn new(problem: &PackingProblem, items: &[(ItemId, u32)]) -> Frontier {
        // First a class-independent prune: a shape is dropped when a kept shape of the same
        // pool costs no more, has at least its allocatable in every resource, belongs to every
        // shape set it belongs to and (in a pool with limits) no more capacity. This is what
        // makes a 1,000-type catalog cheap: only the efficient frontier survives.
        let mut by_price: Vec<ShapeId> = (0..problem.shapes.len() as ShapeId).collect();
        let price_of = |sid: ShapeId| {
            problem
                .shapes
                .get(sid as usize)
                .map_or(f64::INFINITY, |s| s.price)
        };
        by_price.sort_by(|a, b| price_of(*a).total_cmp(&price_of(*b)).then(a.cmp(b)));
        let used_sets: Vec<u32> = {
            let mut v: Vec<u32> = items
                .iter()
                .filter_map(|(i, _)| problem.items.get(*i as usize))
                .map(|t| t.shape_set)
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let member = |sid: ShapeId| -> Vec<bool> {
            used_sets
                .iter()
                .map(|ss| {
                    problem
                        .shape_sets
                        .get(*ss as usize)
                        .is_some_and(|set| set.contains(sid))
                })
                .collect()
        };
        let mut frontier: Vec<(ShapeId, Vec<bool>)> = Vec::new();
        let mut pre_rep: HashMap<ShapeId, ShapeId> = HashMap::new();
        for sid in by_price {
            let Some(sh) = problem.shapes.get(sid as usize) else {
                continue;
            };
            let m = member(sid);
            if !m.iter().any(|x| *x) {
                continue;
            }
            let limited = problem
                .pools
                .get(sh.pool as usize)
                .is_some_and(|p| p.remaining.is_some());
            let dom = frontier.iter().find(|(k, km)| {
                let Some(ks) = problem.shapes.get(*k as usize) else {
                    return false;
                };
                ks.pool == sh.pool
                    && sh.allocatable.fits_in(&ks.allocatable)
                    && m.iter().zip(km).all(|(b, a)| !*b || *a)
                    && (!limited || ks.capacity.fits_in(&sh.capacity))
            });
            match dom {
                Some((k, _)) => {
                    pre_rep.insert(sid, *k);
                }
                None => frontier.push((sid, m)),
            }
        }

        Frontier {
            shapes: frontier,
            dominated: pre_rep,
        }
    }
}

/// The dimensions any of `items` requests, in a fixed order.
fn dims_of(problem: &PackingProblem, items: impl Iterator<Item = ItemId>) -> Vec<Dim> {
    let mut cpu = false;
    let mut mem = false;
    let mut pods = false;
    let mut eph = false;
    let mut ext: BTreeMap<String, ()> = BTreeMap::new();
    for id in items {
        let Some(it) = problem.items.get(id as usize) else {
            continue;
        };
        let r = &it.requests;
        cpu |= r.cpu_milli > 0;
        mem |= r.memory > 0;
        pods |= r.pods > 0;
        eph |= r.ephemeral_storage > 0;
        for (k, v) in &r.extended {
            if *v > 0 {
                ext.insert(k.clone(), ());
            }
        }
    }
    let mut dims = Vec::new();
    if cpu {
        dims.push(Dim::Cpu);
    }
    if mem {
        dims.push(Dim::Memory);
    }
    if pods {
        dims.push(Dim::Pods);
    }
    if eph {
        dims.push(Dim::Ephemeral);
    }
    dims.extend(ext.into_keys().map(Dim::Extended));
    dims
}

/// Checks patterns with the planners' own [`NodeBuilder`], caching each pool's shape list.
pub(crate) struct Checker<'a> {
    problem: &'a PackingProblem,
    pool_shapes: HashMap<u32, Vec<ShapeId>>,
}

impl<'a> Checker<'a> {
    pub fn new(problem: &'a PackingProblem) -> Checker<'a> {
        let mut pool_shapes: HashMap<u32, Vec<ShapeId>> = HashMap::new();
        for (i, s) in problem.shapes.iter().enumerate() {
            pool_shapes.entry(s.pool).or_default().push(i as ShapeId);
        }
        Checker {
            problem,
            pool_shapes,
        }
    }

    /// A fresh node of `shape`'s pool, as [`crate::packing::verify`] starts one.
    pub fn builder(&self, shape: ShapeId) -> Option<NodeBuilder> {
        let pool = self.problem.shapes.get(shape as usize)?.pool;
        Some(NodeBuilder::new(
            pool,
            self.pool_shapes.get(&pool).cloned().unwrap_or_default(),
        ))
    }

    /// A node for pass/fail checks of `shape`: without `minValues` on the pool only the launch
    /// shape matters (the other candidates change no check's outcome), which keeps checking
    /// hundreds of patterns against a 1,000-type catalog cheap.
    fn check_builder(&self, shape: ShapeId) -> Option<NodeBuilder> {
        let pool = self.problem.shapes.get(shape as usize)?.pool;
        if self
            .problem
            .pools
            .get(pool as usize)
            .is_some_and(|p| p.min_values.is_empty())
        {
            return Some(NodeBuilder::new(pool, vec![shape]));
        }
        self.builder(shape)
    }

    /// Adds `item` to `b` if every shared check passes and `shape` can still launch the node.
    pub fn try_add(
        &self,
        b: &mut NodeBuilder,
        id: ItemId,
        item: &PackItem,
        shape: ShapeId,
    ) -> bool {
        match b.check(self.problem, item) {
            Ok(surv) if surv.contains(&shape) => {
                b.add(id, item, surv);
                true
            }
            _ => false,
        }
    }

    /// Whether the pattern passes the shared checks with the classes' largest members.
    pub fn pattern_ok(&self, pp: &PatternProblem, p: &Pattern) -> bool {
        let Some(shape) = pp.shapes.get(p.shape as usize) else {
            return false;
        };
        let Some(mut b) = self.check_builder(shape.id) else {
            return false;
        };
        for &(class, n) in &p.counts {
            let Some(item) = pp.synthetic(self.problem, class) else {
                return false;
            };
            for _ in 0..n {
                if !self.try_add(&mut b, 0, &item, shape.id) {
                    return false;
                }
            }
        }
        true
    }

    /// The largest part of `p` (classes in the given priority order) that passes the checks.
    pub fn repair(&self, pp: &PatternProblem, p: &Pattern, priority: &[u32]) -> Option<Pattern> {
        let shape = pp.shapes.get(p.shape as usize)?;
        let mut b = self.check_builder(shape.id)?;
        let want: BTreeMap<u32, u32> = p.counts.iter().copied().collect();
        let mut got: BTreeMap<u32, u32> = BTreeMap::new();
        for class in priority {
            let Some(&n) = want.get(class) else { continue };
            let Some(item) = pp.synthetic(self.problem, *class) else {
                continue;
            };
            for _ in 0..n {
                if !self.try_add(&mut b, 0, &item, shape.id) {
                    break;
                }
                *got.entry(*class).or_insert(0) += 1;
            }
        }
        if got.is_empty() {
            return None;
        }
        Some(Pattern {
            shape: p.shape,
            counts: got.into_iter().collect(),
        })
    }
}
