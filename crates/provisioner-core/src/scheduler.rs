//! The scheduling simulation: pending pods onto existing and in-flight nodes, then onto new
//! NodeClaims planned by a [`LaunchPlanner`].
//!
//! Per pod, in Karpenter's order (CPU, then memory, descending): preferences are first treated
//! as requirements; the pod goes to the first existing node (initialized first, then by name)
//! where every constraint holds; otherwise its compatible launch shapes are computed and
//! zone-like topology (spread, pod affinity and anti-affinity, their inverse) pins it to a
//! domain, and it becomes a packing item; if neither works, one preference is relaxed in
//! Karpenter's order and the pod is tried again. At the end the planner packs the items into
//! new nodes, the plan is verified, and NodeClaims are assembled with their options.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::sync::Arc;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::interner::Interner;
use crate::model::{
    Node, NodeSelectorTerm, Pod, Requirement, Resources, Snapshot, TaintEffect, Toleration,
    TolerationOperator, WhenUnsatisfiable, labels,
};
use crate::packing::{
    LaunchPlan, LaunchPlanner, PackItem, PackingProblem, ShapeId, ShapeSet, verify,
};
use crate::requirements::{Requirements, ValueSet, term_matches, terms_match};
use crate::resources::{format_amount, pod_requests};
use crate::result::*;
use crate::state::{ClusterState, PodSlot, node_domain, with_volumes};
use crate::strategies::Strategy;
use crate::taints::{first_untolerated, tolerates_all};
use crate::topology::{Kind, OwnedTerm, owned_terms};

/// Instance-type options kept per NodeClaim, cheapest first (Karpenter's launch limit).
pub const MAX_INSTANCE_TYPE_OPTIONS: usize = 60;

/// How to schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SchedulingOptions {
    pub strategy: Strategy,
    /// Karpenter's last relaxation: tolerate `PreferNoSchedule` taints when nothing else works.
    pub tolerate_prefer_no_schedule: bool,
    /// Check the planner's plan with [`crate::packing::verify`] (cheap; on by default).
    pub verify_plan: bool,
    /// Grow new nodes for arrivals already flowing ([`crate::anticipate`]) in [`schedule`]
    /// (provisioning), never in consolidation's simulations; not with the Karpenter baseline
    /// planner, which models Karpenter. `None`: size nodes for their batch alone.
    pub anticipation: Option<crate::anticipate::Anticipation>,
    /// Plan provisioning rounds that launch several nodes with the optimiser
    /// ([`crate::optimize::large_rounds`]) in [`schedule`], never in consolidation's
    /// simulations; cost-aware strategy only. `None`: the heuristic alone.
    pub large_rounds: Option<crate::optimize::LargeRounds>,
    /// Give the pods the kube-scheduler's queue would leave without room, when the round's
    /// nodes come up in no fixed order, nodes of their own in the same round
    /// ([`crate::queue_shuffle`]), in [`schedule`] (provisioning) only; not with the
    /// Karpenter baseline planner. `None`: the scheduler is taken to follow the plan.
    #[serde(default)]
    pub queue_shuffle: Option<crate::queue_shuffle::QueueShuffle>,
    /// Launch each new node in the zone with the least CPU among the offerings of its instance
    /// type that its pods allow and that cost the same ([`crate::zone_balance`]), rather than
    /// the first; cost-aware strategy only (the Karpenter baseline keeps the first zone). Off
    /// by default: a trade measured in `docs/simulator.md`, round 44.
    pub balance_zones: bool,
}

impl Default for SchedulingOptions {
    fn default() -> Self {
        SchedulingOptions {
            strategy: Strategy::CostAware,
            tolerate_prefer_no_schedule: true,
            verify_plan: true,
            anticipation: Some(crate::anticipate::Anticipation::default()),
            large_rounds: Some(crate::optimize::LargeRounds::default()),
            queue_shuffle: None,
            balance_zones: false,
        }
    }
}

/// Schedules the snapshot's pending pods (unbound, not daemonset pods).
pub fn schedule(snapshot: &Snapshot, options: &SchedulingOptions) -> SchedulingResult {
    schedule_shared(&Arc::new(snapshot.clone()), options)
}

/// [`schedule`] on a shared snapshot: the state refers to it instead of holding a copy.
pub fn schedule_shared(snapshot: &Arc<Snapshot>, options: &SchedulingOptions) -> SchedulingResult {
    let mut state = ClusterState::from_shared(Arc::clone(snapshot));
    // References, not clones: a copy of every pending pod was a tenth of the peak memory.
    let pending: Vec<&Pod> = snapshot
        .pods
        .iter()
        .filter(|p| p.node_name.is_none() && !p.is_daemonset_pod())
        .map(|p| &**p)
        .collect();
    let mut result = match (&options.large_rounds, options.strategy) {
        (Some(rounds), Strategy::CostAware) => {
            let planner = crate::optimize::LargeRoundPlanner::new(rounds);
            schedule_with(&mut state, &pending, options, &planner)
        }
        _ => schedule_on(&mut state, &pending, options),
    };
    finish_provisioning(snapshot, &mut result, options);
    result
}

/// The shapes (of `n`) every one of a planned node's drafts allows: where it may launch.
fn allowed_shapes<'d>(n: usize, drafts: impl Iterator<Item = &'d Draft>) -> ShapeSet {
    let mut set = ShapeSet::from_ids(n, 0..n as u32);
    for d in drafts {
        set.intersect_with(&d.shapes);
    }
    set
}

/// What [`schedule`] does to a provisioning round after planning it: anticipation
/// ([`anticipate`]), then the scheduler-queue check ([`SchedulingOptions::queue_shuffle`]).
/// Callers of [`schedule_with`] for provisioning call it themselves.
pub fn finish_provisioning(
    snapshot: &Snapshot,
    result: &mut SchedulingResult,
    options: &SchedulingOptions,
) {
    anticipate(snapshot, result, options);
    if options.strategy != Strategy::KarpenterBaseline
        && let Some(knobs) = &options.queue_shuffle
    {
        crate::queue_shuffle::pad(snapshot, result, options, knobs);
    }
}

/// Applies [`SchedulingOptions::anticipation`] to a provisioning result (part of
/// [`finish_provisioning`]).
pub fn anticipate(snapshot: &Snapshot, result: &mut SchedulingResult, options: &SchedulingOptions) {
    if options.strategy != Strategy::KarpenterBaseline
        && let Some(knobs) = &options.anticipation
    {
        crate::anticipate::apply(snapshot, result, knobs);
    }
}

/// Schedules `pending` on a prepared state (which it updates with the placements on existing
/// nodes). Consolidation clones one [`ClusterState`], removes candidates and calls this.
/// `pending` may be owned pods or references (`&[Pod]`, `&[&Pod]`).
pub fn schedule_on<P: Borrow<Pod> + Sync>(
    state: &mut ClusterState,
    pending: &[P],
    options: &SchedulingOptions,
) -> SchedulingResult {
    schedule_with(state, pending, options, options.strategy.planner())
}

/// [`schedule_on`] with any planner (an optimiser plugs in here).
pub fn schedule_with<P: Borrow<Pod> + Sync>(
    state: &mut ClusterState,
    pending: &[P],
    options: &SchedulingOptions,
    planner: &dyn LaunchPlanner,
) -> SchedulingResult {
    schedule_capped(state, pending, options, planner, None)
}

/// [`schedule_with`] for a caller that has no use for new nodes costing `price_cap` per hour
/// or more (a consolidation command must launch replacements cheaper than the nodes it
/// removes): when even the cheapest fitting shape of every planned node adds up to the cap,
/// the NodeClaims are not built and the result says [`SchedulingResult::over_price_cap`].
/// Building them (up to 60 instance-type options and the requirements each) was most of the
/// work of a failed consolidation simulation.
pub fn schedule_capped<P: Borrow<Pod> + Sync>(
    state: &mut ClusterState,
    pending: &[P],
    options: &SchedulingOptions,
    planner: &dyn LaunchPlanner,
    price_cap: Option<f64>,
) -> SchedulingResult {
    schedule_until_plan_holds(
        state, pending, None, options, planner, price_cap, MAX_RERUNS,
    )
}

/// [`schedule_capped`] for pods the state already holds ([`ClusterState::evict_nodes`]):
/// `slots[i]` is where `pending[i]` is held, and a pod placed on an existing node keeps that
/// slot instead of being copied into the state.
pub fn schedule_evicted<P: Borrow<Pod> + Sync>(
    state: &mut ClusterState,
    pending: &[P],
    slots: &[PodSlot],
    options: &SchedulingOptions,
    planner: &dyn LaunchPlanner,
    price_cap: Option<f64>,
) -> SchedulingResult {
    schedule_until_plan_holds(
        state,
        pending,
        Some(slots),
        options,
        planner,
        price_cap,
        MAX_RERUNS,
    )
}

/// How many times a run is redone without the pods its launch plan could not place (each
/// time with fewer pods); past it the last result stands.
const MAX_RERUNS: usize = 3;

/// Topology is decided pod by pod, before the launch plan packs the new nodes; a pod the plan
/// then cannot place (a pool's `minValues` or limits) was already counted where it would have
/// gone. A pod with required pod affinity or a topology spread may have been placed
/// relative to it: next to a pod that will not run, or spread against it. So when the plan
/// leaves pods out that another pending pod's terms select, the run is redone from the state
/// as it was, without them (they stay unschedulable for the plan's reason). Found by
/// `placements_satisfy_hard_constraints`: a zone-affine pod followed a replica into a zone on
/// a node the plan then dropped, and its sibling stayed in another zone.
#[allow(clippy::too_many_arguments)]
fn schedule_until_plan_holds<P: Borrow<Pod> + Sync>(
    state: &mut ClusterState,
    pending: &[P],
    slots: Option<&[PodSlot]>,
    options: &SchedulingOptions,
    planner: &dyn LaunchPlanner,
    price_cap: Option<f64>,
    reruns_left: usize,
) -> SchedulingResult {
    let relative = |p: &Pod| !p.pod_affinity.required.is_empty() || !p.topology_spread.is_empty();
    let before = (reruns_left > 0
        && slots.is_none_or(|s| s.len() == pending.len())
        && pending.iter().any(|p| relative(p.borrow())))
    .then(|| state.clone());
    let (mut result, dropped) = schedule_once(state, pending, slots, options, planner, price_cap);
    let Some(before) = before else {
        return result;
    };
    if !dropped_pods_matter(pending, &dropped) {
        return result;
    }
    *state = before;
    let kept: Vec<usize> = (0..pending.len())
        .filter(|i| dropped.binary_search(i).is_err())
        .collect();
    let kept_pods: Vec<&Pod> = kept
        .iter()
        .filter_map(|&i| pending.get(i).map(Borrow::borrow))
        .collect();
    let kept_slots: Option<Vec<PodSlot>> =
        slots.map(|s| kept.iter().filter_map(|&i| s.get(i).copied()).collect());
    let mut again = schedule_until_plan_holds(
        state,
        &kept_pods,
        kept_slots.as_deref(),
        options,
        planner,
        price_cap,
        reruns_left - 1,
    );
    let dropped_refs: BTreeSet<PodRef> = dropped
        .iter()
        .filter_map(|&i| pending.get(i).map(|p| pod_ref(p.borrow())))
        .collect();
    again.unschedulable.extend(
        result
            .unschedulable
            .drain(..)
            .filter(|u| dropped_refs.contains(&u.pod)),
    );
    again.relaxations.extend(
        result
            .relaxations
            .drain(..)
            .filter(|r| dropped_refs.contains(&r.pod)),
    );
    again
}

/// Whether a required pod affinity or topology spread of a pod that stays selects one of the
/// `dropped` pods (sorted indices into `pending`). Labels only, so it may say yes for a pod
/// in a namespace the term does not cover: that costs a needless rerun, never a wrong answer.
fn dropped_pods_matter<P: Borrow<Pod>>(pending: &[P], dropped: &[usize]) -> bool {
    if dropped.is_empty() {
        return false;
    }
    let dropped_pods: Vec<&Pod> = dropped
        .iter()
        .filter_map(|&i| pending.get(i).map(Borrow::borrow))
        .collect();
    pending.iter().enumerate().any(|(i, p)| {
        let p = p.borrow();
        dropped.binary_search(&i).is_err()
            && dropped_pods.iter().any(|d| {
                p.pod_affinity.required.iter().any(|t| {
                    t.label_selector
                        .with_match_label_keys(&t.match_label_keys, &p.labels)
                        .matches(&d.labels)
                }) || p.topology_spread.iter().any(|c| {
                    c.label_selector
                        .with_match_label_keys(&c.match_label_keys, &p.labels)
                        .matches(&d.labels)
                })
            })
    })
}

/// One run: the result and the indices (into `pending`, sorted) of the pods the launch plan
/// could not place.
fn schedule_once<P: Borrow<Pod> + Sync>(
    state: &mut ClusterState,
    pending: &[P],
    slots: Option<&[PodSlot]>,
    options: &SchedulingOptions,
    planner: &dyn LaunchPlanner,
    price_cap: Option<f64>,
) -> (SchedulingResult, Vec<usize>) {
    let mut run = Run::new(state, options);
    run.price_cap = price_cap;
    // The Karpenter baseline builds its NodeClaims pod by pod, as Karpenter does (see
    // `Claims`); with `minValues` it keeps the planner, which checks them.
    if options.strategy == Strategy::KarpenterBaseline
        && planner.name() == Strategy::KarpenterBaseline.planner().name()
        && run
            .state
            .base
            .shapes
            .pools
            .iter()
            .all(|p| p.min_values.is_empty())
    {
        run.claims = Some(Claims {
            reserved: vec![Resources::default(); run.state.base.shapes.pools.len()],
            ..Claims::default()
        });
    }
    run.prepare_groups(pending);
    // At most one draft per pod: reserved up front, so a large run neither copies its drafts
    // while growing nor keeps up to twice the room they need. (Reserving it with the first
    // draft instead saved no resident memory in consolidation and made the 100,000-pod run
    // 10% slower.)
    run.drafts.reserve_exact(pending.len());
    let order = pod_order(pending);
    let mut result = SchedulingResult {
        strategy: planner.name().to_string(),
        ..SchedulingResult::default()
    };
    for i in order {
        let Some(original) = pending.get(i).map(Borrow::borrow) else {
            continue;
        };
        // Copied only if a preference has to be relaxed (most pods never need it).
        let mut pod = std::borrow::Cow::Borrowed(original);
        let mut relaxed = Vec::new();
        loop {
            // A relaxed copy differs from the pod in its slot, so it is placed as a new pod.
            run.slot = slots
                .filter(|_| relaxed.is_empty())
                .and_then(|s| s.get(i).copied());
            match run.try_pod(&pod, i as u32) {
                Ok(Some(node)) => {
                    result.existing_placements.push(Placement {
                        pod: pod_ref(&pod),
                        node,
                    });
                    break;
                }
                Ok(None) => break,
                Err(reason) => match relax(pod.to_mut(), options.tolerate_prefer_no_schedule) {
                    Some(what) => relaxed.push(what),
                    None => {
                        result.unschedulable.push(Unschedulable {
                            pod: pod_ref(&pod),
                            reason,
                        });
                        break;
                    }
                },
            }
        }
        if !relaxed.is_empty() {
            result.relaxations.push(Relaxation {
                pod: pod_ref(original),
                relaxed,
            });
        }
    }
    let dropped = run.finish(planner, &mut result, pending);
    (result, dropped)
}

/// Karpenter's queue order: CPU, then memory, descending; then creation time, namespace, name.
pub fn pod_order<P: Borrow<Pod> + Sync>(pods: &[P]) -> Vec<usize> {
    use std::cmp::Reverse;
    // The keys side by side (not looked up through each pod per comparison), unique by the
    // index, so an unstable parallel sort gives the one order.
    let mut keys: Vec<_> = pods
        .par_iter()
        .enumerate()
        .map(|(i, p)| {
            let p = p.borrow();
            let r = pod_requests(p);
            (
                Reverse(r.cpu_milli),
                Reverse(r.memory),
                p.created_at,
                p.namespace.as_str(),
                p.name.as_str(),
                i,
            )
        })
        .collect();
    keys.par_sort_unstable();
    keys.into_iter().map(|k| k.5).collect()
}

fn pod_ref(p: &Pod) -> PodRef {
    PodRef {
        namespace: p.namespace.clone(),
        name: p.name.clone(),
    }
}

/// Everything [`owned_terms`] and [`effective_term`] read of a pod: pods equal in these own
/// equal terms.
#[derive(PartialEq, Eq, Hash)]
struct TermInputs<'p> {
    namespace: &'p str,
    labels: &'p crate::model::Labels,
    tolerations: &'p [crate::model::Toleration],
    spread: &'p [crate::model::TopologySpreadConstraint],
    affinity: &'p crate::model::PodAffinity,
    anti_affinity: &'p crate::model::PodAffinity,
    node_selector: &'p BTreeMap<String, String>,
    required: &'p [NodeSelectorTerm],
    preferred: &'p [crate::model::WeightedNodeSelectorTerm],
}

impl<'p> TermInputs<'p> {
    fn of(p: &'p Pod) -> Self {
        TermInputs {
            namespace: &p.namespace,
            labels: &p.labels,
            tolerations: &p.tolerations,
            spread: &p.topology_spread,
            affinity: &p.pod_affinity,
            anti_affinity: &p.pod_anti_affinity,
            node_selector: &p.node_selector,
            required: &p.required_node_affinity,
            preferred: &p.preferred_node_affinity,
        }
    }
}

/// The topology terms `pods` own (under their effective node requirements), each distinct
/// one once, in first-seen order: what [`ClusterState::create_groups`] makes groups of.
pub(crate) fn distinct_terms<'p>(
    pods: impl IntoIterator<Item = &'p Pod>,
    namespaces: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<crate::topology::OwnedTerm> {
    let mut seen = HashSet::new();
    let mut terms = Vec::new();
    // Replicas own the same terms: a pod whose term inputs were seen adds nothing, and
    // building its terms (selectors and filters rendered as keys, before they were compared
    // by value) was a quarter of a
    // 5,000-node consolidation pass (callgrind, `benches/README.md`).
    let mut inputs_seen: HashSet<TermInputs<'p>> = HashSet::new();
    for p in pods {
        let a = &p.pod_affinity;
        let anti = &p.pod_anti_affinity;
        if p.topology_spread.is_empty()
            && a.required.is_empty()
            && a.preferred.is_empty()
            && anti.required.is_empty()
            && anti.preferred.is_empty()
        {
            continue;
        }
        if !inputs_seen.insert(TermInputs::of(p)) {
            continue;
        }
        for t in owned_terms(p, namespaces, &[effective_term(p)]) {
            if seen.insert(t.key.clone()) {
                terms.push(t);
            }
        }
    }
    terms
}

/// The node requirements a pod is held to now: nodeSelector, its heaviest preferred
/// node-affinity term (until relaxed) and its first required term (Karpenter's reading).
pub fn effective_term(pod: &Pod) -> NodeSelectorTerm {
    let mut term: NodeSelectorTerm = pod
        .node_selector
        .iter()
        .map(|(k, v)| Requirement::new_in(k, &[v.as_str()]))
        .collect();
    if let Some(pref) = heaviest(&pod.preferred_node_affinity, |t| t.weight) {
        term.extend(pref.term.iter().cloned());
    }
    if let Some(first) = pod.required_node_affinity.first() {
        term.extend(first.iter().cloned());
    }
    term
}

fn heaviest<T>(items: &[T], weight: impl Fn(&T) -> i32) -> Option<&T> {
    let mut best: Option<&T> = None;
    for it in items {
        if best.is_none_or(|b| weight(it) > weight(b)) {
            best = Some(it);
        }
    }
    best
}

fn remove_heaviest<T>(items: &mut Vec<T>, weight: impl Fn(&T) -> i32) -> Option<T> {
    let mut best: Option<(usize, i32)> = None;
    for (i, it) in items.iter().enumerate() {
        let w = weight(it);
        if best.is_none_or(|(_, bw)| w > bw) {
            best = Some((i, w));
        }
    }
    best.map(|(i, _)| items.remove(i))
}

/// One relaxation step in Karpenter's order; `None` when nothing is left to relax.
pub fn relax(pod: &mut Pod, tolerate_prefer_no_schedule: bool) -> Option<String> {
    if pod.required_node_affinity.len() > 1 {
        pod.required_node_affinity.remove(0);
        return Some("dropped the first required node-affinity term".into());
    }
    if remove_heaviest(&mut pod.pod_affinity.preferred, |t| t.weight).is_some() {
        return Some("dropped a preferred pod-affinity term".into());
    }
    if remove_heaviest(&mut pod.pod_anti_affinity.preferred, |t| t.weight).is_some() {
        return Some("dropped a preferred pod-anti-affinity term".into());
    }
    if remove_heaviest(&mut pod.preferred_node_affinity, |t| t.weight).is_some() {
        return Some("dropped a preferred node-affinity term".into());
    }
    if let Some(i) = pod
        .topology_spread
        .iter()
        .position(|t| t.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway)
    {
        let t = pod.topology_spread.remove(i);
        return Some(format!(
            "dropped the ScheduleAnyway topology spread on {}",
            t.topology_key
        ));
    }
    let tol = Toleration {
        key: None,
        operator: TolerationOperator::Exists,
        value: None,
        effect: Some(TaintEffect::PreferNoSchedule),
    };
    if tolerate_prefer_no_schedule && !pod.tolerations.contains(&tol) {
        pod.tolerations.push(tol);
        return Some("tolerated PreferNoSchedule taints".into());
    }
    None
}

/// Static compatibility of one kind of pod (same node requirements, volumes, tolerations).
/// `nodes_ok` does not look at removal: callers check [`crate::state::NodeState::removed`].
#[derive(Debug)]
struct Class {
    /// Index in [`Memo`]'s class list (the same for every state of one cluster).
    id: usize,
    term: NodeSelectorTerm,
    nodes_ok: Vec<bool>,
    shapes: ShapeSet,
}

/// Classes by key, and the classes (an index is a class's [`Class::id`]).
type ClassMemo = (HashMap<String, usize>, Vec<Arc<Class>>);

/// The eligible domains of a (group, class) pair that no simulation changes.
#[derive(Debug)]
struct EligibleStatic {
    /// The group's domains and the class's shapes' values for the key.
    fixed: Arc<BTreeSet<String>>,
    /// Affinity groups: the nodes of the class (before removals) per domain.
    nodes_per_domain: Option<NodesPerDomain>,
}

/// An affinity group's domains with the class's nodes in each, numbered so that a
/// simulation subtracts its removed nodes by index. Looking up each removed node's label by
/// name was a twelfth of a simulation at 10,000 nodes, growing with the nodes removed
/// (`benches/README.md`, scale round 12).
#[derive(Debug)]
struct NodesPerDomain {
    domains: Vec<String>,
    /// Per domain number, the class's nodes in it.
    nodes: Vec<usize>,
    /// Per snapshot node, its domain number; `u32::MAX` for a node outside the class or
    /// without the key.
    domain_of: Vec<u32>,
}

/// What the scheduler works out about one cluster that no simulation on it changes: each pod
/// class's compatible nodes and shapes, and each (group, class) pair's eligible domains.
/// Shared by every clone of a [`ClusterState`] (it sits in the state's base), so the
/// consolidation's thousands of simulations compute them once instead of once each: both scan
/// the whole cluster or catalog, which made a simulation's cost grow with the cluster.
#[derive(Debug, Default)]
pub struct Memo {
    classes: std::sync::Mutex<ClassMemo>,
    eligible: std::sync::Mutex<HashMap<(u64, usize), Arc<EligibleStatic>>>,
}

/// The distinct values of a topology key over the shapes and, per value, its shapes as a set
/// and cheapest first: narrowing a pod's shapes to allowed domains and finding each
/// domain's cheapest fitting shape were a scan of every shape per pod (a tenth of a
/// 100,000-pod run).
#[derive(Debug)]
struct Domains {
    values: Vec<String>,
    /// Each shape's value id (`u32::MAX` when the shape lacks the key).
    of_shape: Vec<u32>,
    /// Per value id, its shapes.
    masks: Vec<ShapeSet>,
    /// The shapes without the key.
    none: ShapeSet,
    /// Per value id, its shapes by price, then id.
    by_price: Vec<Vec<ShapeId>>,
}

/// A score for choosing a domain: spread count, minus affinity count, price, name.
type DomainScore<'s> = (i64, i64, u64, &'s str);

/// What a new NodeClaim's requirements are assembled from: its pool, its pods' distinct terms
/// (ids in [`Run::terms`]), its instance-type options (shape ids), zones and capacity types.
type RequirementsKey = (u32, Vec<u32>, Vec<ShapeId>, Vec<String>, Vec<&'static str>);

/// A packing item being assembled.
struct Draft {
    /// Indices into the run's pending pods (their names, labels and requests are what the
    /// draft needs, and relaxation changes none of them).
    pods: Vec<u32>,
    requests: Resources,
    /// Shared with every draft of the same shapes (see [`Run::shared_set`]).
    shapes: Arc<ShapeSet>,
    limits: BTreeMap<u32, u32>,
    /// See [`PackItem::arrival_limits`].
    arrival: BTreeMap<u32, u32>,
    ports: Vec<u32>,
    /// Ids in [`Run::terms`]: the pods' effective node-selector terms (most pods of a claim
    /// share one, and 100,000 owned copies were tens of MB).
    terms: Vec<u32>,
}

impl Draft {
    /// A draft holding one pod; `limits` are its per-node limits and arrival-only limits.
    fn of_one(
        pod: u32,
        requests: Resources,
        shapes: Arc<ShapeSet>,
        (limits, arrival): (BTreeMap<u32, u32>, BTreeMap<u32, u32>),
        ports: Vec<u32>,
        term: u32,
    ) -> Self {
        Draft {
            pods: vec![pod],
            requests,
            shapes,
            limits,
            arrival,
            ports,
            terms: vec![term],
        }
    }
}

/// The Karpenter baseline's in-flight NodeClaims. Karpenter decides a pod's NodeClaim
/// while it schedules the pod (`addToInflightNode`: the first NodeClaim, fewest pods first,
/// whose requirements, topology and remaining instance types take it), so its topology
/// choices see where earlier pods went: a zone-spread pod joins any NodeClaim whose zone its
/// skew allows, narrowing an unpinned one to the least-loaded zone, and a pod that lands on
/// a NodeClaim already narrowed to one zone counts in that zone. The default planner
/// decides zones first and packs afterwards; the baseline does it Karpenter's way.
#[derive(Debug, Default)]
struct Claims {
    list: Vec<Claim>,
    /// Fewest pods first, ties as Karpenter's list leaves them.
    order: BTreeSet<(usize, usize)>,
    keys: crate::strategies::greedy::FewestPodsOrder,
    /// Per pool: the largest capacity each NodeClaim could launch as (Karpenter charges
    /// NodePool limits with it).
    reserved: Vec<Resources>,
}

#[derive(Debug)]
struct Claim {
    /// Shapes it may still launch as (they only narrow).
    set: ShapeSet,
    used: Resources,
    /// Per-dimension maximum allocatable over `set` when it opened (a quick reject).
    max_alloc: Resources,
    drafts: Vec<usize>,
    /// Its placeholder hostname, the domain hostname terms count it under.
    host: String,
    ports: Vec<u32>,
    key: (usize, usize),
}

struct Run<'a> {
    state: &'a mut ClusterState,
    classes: Vec<Arc<Class>>,
    class_index: HashMap<String, usize>,
    eligible: HashMap<(usize, usize), Arc<BTreeSet<String>>>,
    drafts: Vec<Draft>,
    /// The drafts' node-selector terms, each distinct one once.
    terms: Interner<NodeSelectorTerm>,
    /// See [`Run::shared_set`].
    shape_sets: HashMap<ShapeSet, Arc<ShapeSet>>,
    bundles: BTreeMap<usize, usize>,
    host_groups: BTreeMap<usize, u32>,
    port_groups: BTreeMap<(crate::model::Protocol, u16), u32>,
    next_pack_group: u32,
    /// Per topology key: its distinct values over the shapes and each shape's value id.
    domain_ids: HashMap<String, std::sync::Arc<Domains>>,
    options: &'a SchedulingOptions,
    /// See [`schedule_capped`].
    price_cap: Option<f64>,
    /// The Karpenter baseline's NodeClaims, built while pods are scheduled; `None`: new
    /// nodes are planned by the planner after the pass.
    claims: Option<Claims>,
    /// Where the state already holds the pod being tried, if it does ([`schedule_evicted`]).
    slot: Option<PodSlot>,
}

impl<'a> Run<'a> {
    fn new(state: &'a mut ClusterState, options: &'a SchedulingOptions) -> Run<'a> {
        Run {
            state,
            classes: Vec::new(),
            class_index: HashMap::new(),
            eligible: HashMap::new(),
            drafts: Vec::new(),
            terms: Interner::default(),
            shape_sets: HashMap::new(),
            bundles: BTreeMap::new(),
            host_groups: BTreeMap::new(),
            port_groups: BTreeMap::new(),
            next_pack_group: 0,
            domain_ids: HashMap::new(),
            options,
            price_cap: None,
            claims: None,
            slot: None,
        }
    }

    /// Creates the groups of every pending pod's terms up front, so that a pod processed
    /// early already sees the anti-affinity of pods processed later.
    fn prepare_groups<P: Borrow<Pod> + Sync>(&mut self, pending: &[P]) {
        let terms = distinct_terms(
            pending.iter().map(Borrow::borrow),
            &self.state.base.snapshot.namespaces,
        );
        self.state.create_groups(&terms);
    }

    fn class(&mut self, pod: &Pod) -> usize {
        let term = effective_term(pod);
        let vols: Vec<&Vec<NodeSelectorTerm>> =
            pod.volumes.iter().map(|v| &v.node_affinity).collect();
        let key = format!("{term:?}|{vols:?}|{:?}", pod.tolerations);
        if let Some(c) = self.class_index.get(&key) {
            return *c;
        }
        let base = Arc::clone(&self.state.base);
        let shared = {
            let memo = base.memo.classes.lock().unwrap_or_else(|e| e.into_inner());
            memo.0.get(&key).and_then(|id| memo.1.get(*id)).cloned()
        };
        let class = match shared {
            Some(c) => c,
            None => {
                let c = compute_class(&base, term, &vols, &pod.tolerations);
                let mut memo = base.memo.classes.lock().unwrap_or_else(|e| e.into_inner());
                // Another simulation may have added it meanwhile: keep the first.
                match memo.0.get(&key).and_then(|id| memo.1.get(*id)) {
                    Some(existing) => Arc::clone(existing),
                    None => {
                        let id = memo.1.len();
                        let c = Arc::new(Class { id, ..c });
                        memo.1.push(Arc::clone(&c));
                        memo.0.insert(key.clone(), id);
                        c
                    }
                }
            }
        };
        let i = self.classes.len();
        self.classes.push(class);
        self.class_index.insert(key, i);
        i
    }

    fn eligible(&mut self, group: usize, class: usize) -> Arc<BTreeSet<String>> {
        if let Some(e) = self.eligible.get(&(group, class)) {
            return Arc::clone(e);
        }
        let set = match (self.state.groups.get(group), self.classes.get(class)) {
            (Some(g), Some(c)) if g.key != labels::HOSTNAME => {
                let base = Arc::clone(&self.state.base);
                let memo_key = (g.uid, c.id);
                let cached = base
                    .memo
                    .eligible
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&memo_key)
                    .cloned();
                let st = match cached {
                    Some(st) => st,
                    None => {
                        let st = Arc::new(eligible_static(&base, g, c));
                        base.memo
                            .eligible
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .entry(memo_key)
                            .or_insert(st)
                            .clone()
                    }
                };
                match &st.nodes_per_domain {
                    None => Arc::clone(&st.fixed),
                    Some(per_domain) => {
                        // Existing nodes the pod may use are domains too (Karpenter's domain
                        // universe includes them): a matching pod on one rules out
                        // bootstrapping elsewhere. Removed nodes no longer count.
                        let mut left = per_domain.nodes.clone();
                        for ni in self.state.removed_nodes() {
                            if let Some(&d) = per_domain.domain_of.get(ni)
                                && let Some(k) = left.get_mut(d as usize)
                            {
                                *k = k.saturating_sub(1);
                            }
                        }
                        let mut set = (*st.fixed).clone();
                        set.extend(
                            per_domain
                                .domains
                                .iter()
                                .zip(&left)
                                .filter(|(_, k)| **k > 0)
                                .map(|(d, _)| d.clone()),
                        );
                        Arc::new(set)
                    }
                }
            }
            _ => Arc::new(BTreeSet::new()),
        };
        self.eligible.insert((group, class), Arc::clone(&set));
        set
    }

    /// `Ok(Some(node))`: placed on an existing node; `Ok(None)`: will go to a new node;
    /// `Err(reason)`: cannot be placed with its current constraints.
    fn try_pod(&mut self, pod: &Pod, index: u32) -> Result<Option<String>, String> {
        let class = self.class(pod);
        let term = self
            .classes
            .get(class)
            .map(|c| c.term.clone())
            .unwrap_or_default();
        let requests = with_volumes(pod_requests(pod), pod);
        let mut owned = Vec::new();
        for t in owned_terms(
            pod,
            &self.state.base.snapshot.namespaces,
            std::slice::from_ref(&term),
        ) {
            let g = self.state.group(&t);
            let self_sel = self.state.groups.get(g).is_some_and(|x| x.selects(pod));
            let elig = self.eligible(g, class);
            owned.push((g, self_sel, elig, t));
        }
        let inverse = self.state.inverse_groups(pod);

        // 1. Existing and in-flight nodes, first fit.
        if let Some(ni) = self.find_existing(pod, class, &requests, &owned, &inverse) {
            match self.slot.take() {
                Some(slot) => self.state.place_evicted(slot, ni, &requests),
                None => self.state.place(pod, ni, &requests),
            }
            return Ok(self.state.node(ni).map(|n| n.name.clone()));
        }

        // 2. The Karpenter baseline: an in-flight NodeClaim.
        if self.claims.is_some() && self.join_claim(pod, index, class, &requests, &owned, &inverse)
        {
            return Ok(None);
        }

        // 3. A new node: shapes, then topology pins.
        self.new_node(pod, index, class, requests, &owned, &inverse)
            .map(|_| None)
    }

    fn find_existing(
        &self,
        pod: &Pod,
        class: usize,
        requests: &Resources,
        owned: &[(usize, bool, Arc<BTreeSet<String>>, OwnedTerm)],
        inverse: &[usize],
    ) -> Option<usize> {
        let c = self.classes.get(class)?;
        let base = &self.state.base;
        let mut pos = 0;
        'nodes: while let Some(&ni) = base.node_order.get(pos) {
            // Whole blocks of nodes without the room are skipped (the first fit is the same).
            if pos % crate::free_room::BLOCK == 0 {
                let next = self.state.next_block_may_fit(pos, requests);
                if next != pos {
                    pos = next;
                    continue;
                }
            }
            pos += 1;
            if !c.nodes_ok.get(ni).copied().unwrap_or(false) {
                continue;
            }
            let Some(ns) = self.state.nodes.get(ni) else {
                continue;
            };
            if ns.removed || !ns.used.fits_with(requests, &ns.allocatable) {
                continue;
            }
            if !pod.host_ports.is_empty() && self.state.port_conflict(ni, pod) {
                continue;
            }
            let Some(node) = base.snapshot.nodes.get(ni) else {
                continue;
            };
            // Hostname groups read their count by the node's number; others by domain name.
            let host = base.host_of.get(ni).copied().unwrap_or(u32::MAX);
            for (g, self_sel, elig, _) in owned {
                let Some(grp) = self.state.groups.get(*g) else {
                    continue;
                };
                let ok = match grp.allows_host(&base.hosts, host, *self_sel) {
                    Some(ok) => ok,
                    None => grp.allows(node_domain(node, &grp.key), *self_sel, elig),
                };
                debug_assert_eq!(ok, grp.allows(node_domain(node, &grp.key), *self_sel, elig));
                if !ok {
                    continue 'nodes;
                }
            }
            for g in inverse {
                let Some(grp) = self.state.groups.get(*g) else {
                    continue;
                };
                let ok = match grp.inverse_allows_host(&base.hosts, host) {
                    Some(ok) => ok,
                    None => grp.inverse_allows(node_domain(node, &grp.key)),
                };
                debug_assert_eq!(ok, grp.inverse_allows(node_domain(node, &grp.key)));
                if !ok {
                    continue 'nodes;
                }
            }
            return Some(ni);
        }
        None
    }

    fn new_node(
        &mut self,
        pod: &Pod,
        index: u32,
        class: usize,
        requests: Resources,
        owned: &[(usize, bool, Arc<BTreeSet<String>>, OwnedTerm)],
        inverse: &[usize],
    ) -> Result<(), String> {
        let Some(c) = self.classes.get(class) else {
            return Err("internal: unknown class".into());
        };
        let term = c.term.clone();
        let mut set = c.shapes.clone();
        if set.is_empty() {
            return Err(self.static_reason(pod, &term));
        }
        let base = std::sync::Arc::clone(&self.state.base);
        let shp = &base.shapes;
        let fits = |s: ShapeId| {
            shp.shapes
                .get(s as usize)
                .is_some_and(|sh| requests.fits_in(&sh.allocatable))
        };
        if !set.iter().any(fits) {
            return Err(resource_reason(&requests, &set, shp));
        }
        self.restrict_topology(owned, inverse, &mut set, &Resources::default(), &requests)?;
        // The Karpenter baseline opens its NodeClaim from one NodePool: the first by weight
        // with a shape that holds the pod within its limits.
        let pool = if self.claims.is_some() {
            match self.claim_pool(&mut set, &requests) {
                Ok(p) => Some(p),
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        let mut pins = self.pick_pins(pod, owned, &mut set, &Resources::default(), &requests)?;
        // Hostname-level terms become per-node limits in packing; hostname affinity bundles.
        let mut limits = BTreeMap::new();
        let mut arrival = BTreeMap::new();
        // The Karpenter baseline reads a hostname spread as the kube-scheduler and Karpenter
        // do: it constrains the pod when it lands, not the pods that come after it.
        let one_way_spread = self.options.strategy == Strategy::KarpenterBaseline;
        let mut bundle_with: Option<usize> = None;
        for (g, self_sel, _, label) in owned {
            let Some(grp) = self.state.groups.get(*g) else {
                continue;
            };
            if grp.key != labels::HOSTNAME {
                continue;
            }
            let (kind, max_skew, any_selected) = (grp.kind, grp.max_skew, grp.any_selected());
            match kind {
                Kind::Spread => {
                    let pg = self.host_group(*g);
                    let to = if one_way_spread {
                        &mut arrival
                    } else {
                        &mut limits
                    };
                    to.insert(pg, max_skew.max(0) as u32);
                }
                Kind::AntiAffinity => {
                    let pg = self.host_group(*g);
                    limits.insert(pg, u32::from(*self_sel));
                }
                Kind::Affinity => {
                    if any_selected {
                        return Err(format!(
                            "{label}: the nodes running matching pods have no room for it"
                        ));
                    }
                    if !*self_sel {
                        return Err(format!(
                            "{label}: no running or pending pod it may join matches its selector"
                        ));
                    }
                    bundle_with = Some(*g);
                }
            }
        }
        let ports = self.port_ids(pod);
        for id in &ports {
            limits.insert(*id, 1);
        }
        if let Some(pool) = pool {
            // The Karpenter baseline: a new NodeClaim holding this pod.
            let di = self.open_draft(index, &requests, &set, (limits, arrival), &ports, term);
            let Some(claims) = self.claims.as_mut() else {
                return Err("internal: no NodeClaims".into());
            };
            let ci = claims.list.len();
            let host = format!("karpenter-baseline-{pool}-{ci}");
            let mut max_alloc = Resources::default();
            for s in set.iter() {
                if let Some(sh) = shp.shapes.get(s as usize) {
                    max_alloc = max_alloc.max(&sh.allocatable);
                }
            }
            let key = claims.keys.key(1, ci, false);
            claims.order.insert(key);
            let shapes_of_claim = set.clone();
            claims.list.push(Claim {
                set,
                used: requests,
                max_alloc,
                drafts: vec![di],
                host: host.clone(),
                ports,
                key,
            });
            self.settled_domains(&shapes_of_claim, &mut pins);
            pins.insert(labels::HOSTNAME.to_string(), host);
            self.state.pin(pod, pins);
            return Ok(());
        }

        if let Some(g) = bundle_with
            && self.claims.is_none()
            && let Some(&di) = self.bundles.get(&g)
            && let Some(d) = self.drafts.get_mut(di)
        {
            let mut joined = set.clone();
            joined.intersect_with(&d.shapes);
            let total = d.requests.add(&requests);
            if !joined.iter().any(|s| {
                shp.shapes
                    .get(s as usize)
                    .is_some_and(|sh| total.fits_in(&sh.allocatable))
            }) {
                return Err("pod affinity on hostname: the co-located group no longer fits the largest compatible node".into());
            }
            d.pods.push(index);
            d.requests = total;
            d.shapes = Arc::new(joined);
            for (k, v) in limits {
                let e = d.limits.entry(k).or_insert(v);
                *e = (*e).min(v);
            }
            for (k, v) in arrival {
                let e = d.arrival.entry(k).or_insert(v);
                *e = (*e).min(v);
            }
            d.ports.extend(ports);
            d.terms.push(self.terms.id(term));
            self.state.pin(pod, pins);
            return Ok(());
        }
        let di = self.drafts.len();
        let term = self.terms.id(term);
        let set = self.shared_set(&set);
        self.drafts.push(Draft::of_one(
            index,
            requests,
            set,
            (limits, arrival),
            ports,
            term,
        ));
        if let Some(g) = bundle_with {
            self.bundles.insert(g, di);
        }
        self.state.pin(pod, pins);
        Ok(())
    }

    /// A new draft holding one pod (copies of what the caller keeps using); its index.
    fn open_draft(
        &mut self,
        pod: u32,
        requests: &Resources,
        shapes: &ShapeSet,
        limits: (BTreeMap<u32, u32>, BTreeMap<u32, u32>),
        ports: &[u32],
        term: NodeSelectorTerm,
    ) -> usize {
        let term = self.terms.id(term);
        let shapes = self.shared_set(shapes);
        self.drafts.push(Draft::of_one(
            pod,
            requests.clone(),
            shapes,
            limits,
            ports.to_vec(),
            term,
        ));
        self.drafts.len() - 1
    }

    /// One shared copy per distinct shape set: most drafts of a run have one of a few sets
    /// (a class, pinned to a zone), and a copy each was a fifth of a 20,000-pod run's memory.
    fn shared_set(&mut self, set: &ShapeSet) -> Arc<ShapeSet> {
        if let Some(s) = self.shape_sets.get(set) {
            return Arc::clone(s);
        }
        let s = Arc::new(set.clone());
        self.shape_sets.insert(set.clone(), Arc::clone(&s));
        s
    }

    /// The host-port groups of a pod's ports (one per protocol and port, limit one a node).
    fn port_ids(&mut self, pod: &Pod) -> Vec<u32> {
        let mut ports = Vec::new();
        for hp in &pod.host_ports {
            let k = (hp.protocol, hp.port);
            let id = match self.port_groups.get(&k) {
                Some(id) => *id,
                None => {
                    let id = self.next_pack_group;
                    self.next_pack_group += 1;
                    self.port_groups.insert(k, id);
                    id
                }
            };
            ports.push(id);
        }
        ports
    }

    /// The NodePool a new Karpenter-baseline NodeClaim opens from: the first by weight with
    /// a shape in `set` that holds `requests` within the pool's limits. Narrows `set` to that
    /// pool's shapes within its limits and charges the limits with the largest capacity
    /// among them (Karpenter's `subtractMax`).
    fn claim_pool(&mut self, set: &mut ShapeSet, requests: &Resources) -> Result<u32, String> {
        let base = Arc::clone(&self.state.base);
        let shp = &base.shapes;
        let Some(claims) = self.claims.as_mut() else {
            return Err("internal: no NodeClaims".into());
        };
        let mut pools: Vec<u32> = (0..shp.pools.len() as u32).collect();
        pools.sort_by_key(|p| (shp.pools.get(*p as usize).map_or(u32::MAX, |x| x.rank), *p));
        let mut reasons = Vec::new();
        for pool in pools {
            let Some(pp) = shp.pools.get(pool as usize) else {
                continue;
            };
            let reserved = claims
                .reserved
                .get(pool as usize)
                .cloned()
                .unwrap_or_default();
            let within = |sh: &crate::packing::Shape| {
                pp.remaining.as_ref().is_none_or(|rem| {
                    let mut after = reserved.clone();
                    after.add_assign(&sh.capacity.clone().with_extended("nodes", 1));
                    crate::packing::limit_fits(&after, rem)
                })
            };
            let of_pool = |s: &ShapeId| {
                shp.shapes
                    .get(*s as usize)
                    .is_some_and(|sh| sh.pool == pool && within(sh))
            };
            let holds = |s: &ShapeId| {
                shp.shapes
                    .get(*s as usize)
                    .is_some_and(|sh| sh.pool == pool && requests.fits_in(&sh.allocatable))
            };
            if !set.iter().any(|s| of_pool(&s) && holds(&s)) {
                if set.iter().any(|s| holds(&s)) {
                    reasons.push(format!("NodePool {}: its limits are reached", pp.name));
                }
                continue;
            }
            *set = ShapeSet::from_ids(shp.shapes.len(), set.iter().filter(of_pool));
            let mut max = Resources::default();
            for s in set.iter().filter(holds) {
                if let Some(sh) = shp.shapes.get(s as usize) {
                    max = max.max(&sh.capacity);
                }
            }
            if pp.remaining.is_some()
                && let Some(r) = claims.reserved.get_mut(pool as usize)
            {
                r.add_assign(&max.with_extended("nodes", 1));
            }
            return Ok(pool);
        }
        if reasons.is_empty() {
            reasons.push("no compatible launch shape".into());
        }
        Err(reasons.join("; "))
    }

    /// Karpenter's `addToInflightNode` for the baseline: the first in-flight NodeClaim
    /// (fewest pods first) where the pod's hostname terms and other pods' anti-affinity
    /// allow it, its zone-like terms allow a domain the NodeClaim can still launch in, and a
    /// remaining shape has room. The pod narrows the NodeClaim to the domain it picks and
    /// counts in every domain the NodeClaim is narrowed to.
    fn join_claim(
        &mut self,
        pod: &Pod,
        index: u32,
        class: usize,
        requests: &Resources,
        owned: &[(usize, bool, Arc<BTreeSet<String>>, OwnedTerm)],
        inverse: &[usize],
    ) -> bool {
        let Some(c) = self.classes.get(class).cloned() else {
            return false;
        };
        let base = Arc::clone(&self.state.base);
        let shp = &base.shapes;
        let ports = self.port_ids(pod);
        let order: Vec<usize> = match &self.claims {
            Some(cl) => cl.order.iter().map(|k| k.1).collect(),
            None => return false,
        };
        for ci in order {
            let Some(cl) = self.claims.as_ref().and_then(|x| x.list.get(ci)) else {
                continue;
            };
            if !cl.used.fits_with(requests, &cl.max_alloc)
                || ports.iter().any(|p| cl.ports.contains(p))
            {
                continue;
            }
            let mut set = cl.set.clone();
            set.intersect_with(&c.shapes);
            let used = cl.used.clone();
            let host = cl.host.clone();
            let fits = |s: ShapeId| shp.has_room(s, &used, requests);
            if !set.iter().any(fits) {
                continue;
            }
            let groups = &self.state.groups;
            let host_ok = owned.iter().all(|(g, self_sel, elig, _)| {
                groups.get(*g).is_none_or(|grp| {
                    grp.key != labels::HOSTNAME || grp.allows(Some(&host), *self_sel, elig)
                })
            }) && inverse.iter().all(|g| {
                groups.get(*g).is_none_or(|grp| {
                    grp.key != labels::HOSTNAME || grp.inverse_allows(Some(&host))
                })
            });
            if !host_ok
                || self
                    .restrict_topology(owned, inverse, &mut set, &used, requests)
                    .is_err()
            {
                continue;
            }
            let Ok(mut pins) = self.pick_pins(pod, owned, &mut set, &used, requests) else {
                continue;
            };
            // Joined: the hostname terms' per-node limits, for the plan's verification.
            let mut limits = BTreeMap::new();
            let mut arrival = BTreeMap::new();
            for (g, self_sel, _, _) in owned {
                let Some(grp) = self.state.groups.get(*g) else {
                    continue;
                };
                if grp.key != labels::HOSTNAME {
                    continue;
                }
                match grp.kind {
                    Kind::Spread => {
                        let v = grp.max_skew.max(0) as u32;
                        arrival.insert(self.host_group(*g), v);
                    }
                    Kind::AntiAffinity => {
                        limits.insert(self.host_group(*g), u32::from(*self_sel));
                    }
                    Kind::Affinity => {}
                }
            }
            for id in &ports {
                limits.insert(*id, 1);
            }
            let term = c.term.clone();
            let di = self.open_draft(index, requests, &set, (limits, arrival), &ports, term);
            self.settled_domains(&set, &mut pins);
            pins.insert(labels::HOSTNAME.to_string(), host);
            self.state.pin(pod, pins);
            let Some(claims) = self.claims.as_mut() else {
                return true;
            };
            let Some(cl) = claims.list.get_mut(ci) else {
                return true;
            };
            cl.set = set;
            cl.used.add_assign(requests);
            cl.drafts.push(di);
            cl.ports.extend(ports);
            let old = cl.key;
            cl.key = claims.keys.key(cl.drafts.len(), ci, true);
            claims.order.remove(&old);
            claims.order.insert(cl.key);
            return true;
        }
        false
    }

    /// Adds to `pins` every zone-like topology key whose value `set` has settled (all its
    /// shapes share one): Karpenter counts a pod in a domain as soon as its NodeClaim is
    /// narrowed to it, whichever group selects the pod.
    fn settled_domains(&mut self, set: &ShapeSet, pins: &mut BTreeMap<String, String>) {
        let keys: BTreeSet<String> = self
            .state
            .groups
            .iter()
            .filter(|g| g.key != labels::HOSTNAME)
            .map(|g| g.key.clone())
            .collect();
        for key in keys {
            if pins.contains_key(&key) {
                continue;
            }
            let dom = self.domains(&key);
            let mut value: Option<u32> = None;
            let mut settled = true;
            for s in set.iter() {
                let v = dom.of_shape.get(s as usize).copied().unwrap_or(u32::MAX);
                if v == u32::MAX || value.is_some_and(|x| x != v) {
                    settled = false;
                    break;
                }
                value = Some(v);
            }
            if settled && let Some(v) = value.and_then(|v| dom.values.get(v as usize)) {
                pins.insert(key, v.clone());
            }
        }
    }

    /// Narrows `set` to the shapes whose zone-like domains the pod's own terms and other
    /// pods' anti-affinity allow; an error when none of them has room for `requests` on
    /// top of `used`.
    fn restrict_topology(
        &mut self,
        owned: &[(usize, bool, Arc<BTreeSet<String>>, OwnedTerm)],
        inverse: &[usize],
        set: &mut ShapeSet,
        used: &Resources,
        requests: &Resources,
    ) -> Result<(), String> {
        let base = std::sync::Arc::clone(&self.state.base);
        let shp = &base.shapes;
        let fits = |s: ShapeId| shp.has_room(s, used, requests);
        for (g, self_sel, elig, label) in owned {
            let Some(grp) = self.state.groups.get(*g) else {
                continue;
            };
            if grp.key == labels::HOSTNAME {
                continue;
            }
            let key = grp.key.clone();
            let dom = self.domains(&key);
            let Some(grp) = self.state.groups.get(*g) else {
                continue;
            };
            let ok: Vec<bool> = dom
                .values
                .iter()
                .map(|v| grp.allows(Some(v), *self_sel, elig))
                .collect();
            let none_ok = grp.allows(None, *self_sel, elig);
            restrict(set, &dom, &ok, none_ok);
            if !set.iter().any(fits) {
                return Err(format!(
                    "{label}: no domain is allowed that has a node shape with room (existing nodes did not fit either)"
                ));
            }
        }
        for g in inverse {
            let Some(grp) = self.state.groups.get(*g) else {
                continue;
            };
            if grp.key == labels::HOSTNAME {
                continue;
            }
            let key = grp.key.clone();
            let dom = self.domains(&key);
            let Some(grp) = self.state.groups.get(*g) else {
                continue;
            };
            let ok: Vec<bool> = dom
                .values
                .iter()
                .map(|v| grp.inverse_allows(Some(v)))
                .collect();
            restrict(set, &dom, &ok, grp.inverse_allows(None));
            if !set.iter().any(fits) {
                return Err(format!(
                    "pod anti-affinity of other pods on {}: every domain with room holds one of them",
                    grp.key
                ));
            }
        }
        Ok(())
    }

    /// Pins every zone-like key that a group involving this pod uses to one domain among
    /// `set`'s shapes with room for `requests` on top of `used` (least spread count, most
    /// affinity, cheapest, then by name), and narrows `set` to it.
    fn pick_pins(
        &mut self,
        pod: &Pod,
        owned: &[(usize, bool, Arc<BTreeSet<String>>, OwnedTerm)],
        set: &mut ShapeSet,
        used: &Resources,
        requests: &Resources,
    ) -> Result<BTreeMap<String, String>, String> {
        let base = std::sync::Arc::clone(&self.state.base);
        let shp = &base.shapes;
        let fits = |s: ShapeId| shp.has_room(s, used, requests);
        let mut keys: BTreeSet<String> = owned
            .iter()
            .filter_map(|(g, ..)| self.state.groups.get(*g))
            .filter(|g| g.key != labels::HOSTNAME)
            .map(|g| g.key.clone())
            .collect();
        for g in &self.state.groups {
            if g.key != labels::HOSTNAME && g.kind != Kind::Spread && g.selects(pod) {
                keys.insert(g.key.clone());
            }
        }
        let mut pins = BTreeMap::new();
        for key in keys {
            let dom = self.domains(&key);
            // Per domain, the price of its cheapest shape in `set` with room.
            let cheapest: Vec<f64> = dom
                .by_price
                .iter()
                .map(|l| {
                    l.iter()
                        .find(|s| set.contains(**s) && fits(**s))
                        .and_then(|s| shp.shapes.get(*s as usize))
                        .map_or(f64::INFINITY, |sh| sh.price)
                })
                .collect();
            let mut best: Option<(DomainScore<'_>, usize)> = None;
            for (vid, price) in cheapest.iter().enumerate() {
                let Some(v) = dom.values.get(vid) else {
                    continue;
                };
                if !price.is_finite() {
                    continue;
                }
                let mut spread = 0i64;
                let mut affinity = 0i64;
                for (g, ..) in owned {
                    let Some(grp) = self.state.groups.get(*g) else {
                        continue;
                    };
                    if grp.key != key {
                        continue;
                    }
                    let cnt = grp.counts.get(v) as i64;
                    match grp.kind {
                        Kind::Spread => spread += cnt,
                        Kind::Affinity => affinity -= cnt,
                        Kind::AntiAffinity => {}
                    }
                }
                let score = (spread, affinity, (price * 1e6) as u64, v.as_str());
                if best.as_ref().is_none_or(|(b, _)| score < *b) {
                    best = Some((score, vid));
                }
            }
            let Some((_, vid)) = best else {
                return Err(format!(
                    "no launch shape defines {key}, which its topology needs"
                ));
            };
            let ok: Vec<bool> = (0..dom.values.len()).map(|i| i == vid).collect();
            restrict(set, &dom, &ok, false);
            if let Some(v) = dom.values.get(vid) {
                pins.insert(key, v.clone());
            }
        }

        Ok(pins)
    }

    fn domains(&mut self, key: &str) -> std::sync::Arc<Domains> {
        if let Some(d) = self.domain_ids.get(key) {
            return std::sync::Arc::clone(d);
        }
        let shp = &self.state.base.shapes;
        let n = shp.shapes.len();
        let mut values: Vec<String> = Vec::new();
        let mut index: BTreeMap<String, u32> = BTreeMap::new();
        let of_shape: Vec<u32> = shp
            .labels
            .iter()
            .map(|l| match l.get(key) {
                Some(v) => *index.entry(v.clone()).or_insert_with(|| {
                    values.push(v.clone());
                    (values.len() - 1) as u32
                }),
                None => u32::MAX,
            })
            .collect();
        let mut masks = vec![ShapeSet::with_capacity(n); values.len()];
        let mut none = ShapeSet::with_capacity(n);
        let mut by_price: Vec<Vec<ShapeId>> = vec![Vec::new(); values.len()];
        for (sid, v) in of_shape.iter().enumerate() {
            match masks.get_mut(*v as usize) {
                Some(m) => m.insert(sid as ShapeId),
                None => none.insert(sid as ShapeId),
            }
        }
        // Visited cheapest first, so each domain's list comes out in price order.
        for &sid in shp.by_price.iter() {
            let v = of_shape.get(sid as usize).copied().unwrap_or(u32::MAX);
            if let Some(l) = by_price.get_mut(v as usize) {
                l.push(sid);
            }
        }
        let d = std::sync::Arc::new(Domains {
            values,
            of_shape,
            masks,
            none,
            by_price,
        });
        self.domain_ids
            .insert(key.to_string(), std::sync::Arc::clone(&d));
        d
    }

    fn host_group(&mut self, g: usize) -> u32 {
        if let Some(id) = self.host_groups.get(&g) {
            return *id;
        }
        let id = self.next_pack_group;
        self.next_pack_group += 1;
        self.host_groups.insert(g, id);
        id
    }

    fn static_reason(&self, pod: &Pod, term: &NodeSelectorTerm) -> String {
        let shp = &self.state.base.shapes;
        if shp.shapes.is_empty() {
            return "no NodePool has an available instance type to launch".into();
        }
        let mut reasons = Vec::new();
        for (pi, pool) in shp.pools.iter().enumerate() {
            let ids: Vec<usize> = (0..shp.shapes.len())
                .filter(|s| shp.shapes.get(*s).is_some_and(|x| x.pool == pi as u32))
                .collect();
            if ids.is_empty() {
                continue;
            }
            let all_labels = || ids.iter().filter_map(|s| shp.labels.get(*s));
            if let Some(t) = ids
                .iter()
                .filter_map(|s| shp.taints.get(*s))
                .find_map(|t| first_untolerated(t, &pod.tolerations, true))
                && ids
                    .iter()
                    .filter_map(|s| shp.taints.get(*s))
                    .all(|t| first_untolerated(t, &pod.tolerations, true).is_some())
            {
                {
                    reasons.push(format!(
                        "NodePool {}: does not tolerate taint {}{}:{:?}",
                        pool.name,
                        t.key,
                        t.value
                            .as_deref()
                            .map(|v| format!("={v}"))
                            .unwrap_or_default(),
                        t.effect
                    ));
                    continue;
                }
            }
            if let Some(r) = term.iter().find(|r| all_labels().all(|l| !r.matches(l))) {
                reasons.push(format!(
                    "NodePool {}: no instance type offers {} {:?} {:?}",
                    pool.name, r.key, r.operator, r.values
                ));
                continue;
            }
            if let Some(v) = pod
                .volumes
                .iter()
                .find(|v| all_labels().all(|l| !terms_match(&v.node_affinity, l)))
            {
                reasons.push(format!("NodePool {}: volume {} can only attach in a topology none of its instance types offers", pool.name, v.name));
                continue;
            }
            reasons.push(format!("NodePool {}: no single instance type and offering satisfies all of its node requirements together", pool.name));
        }
        reasons.join("; ")
    }

    /// Builds the launch plan and the result; returns the indices (into `pending`, sorted)
    /// of the pods the plan could not place.
    fn finish<P: Borrow<Pod> + Sync>(
        self,
        planner: &dyn LaunchPlanner,
        result: &mut SchedulingResult,
        pending: &[P],
    ) -> Vec<usize> {
        let Run {
            state,
            drafts,
            terms,
            host_groups,
            next_pack_group,
            price_cap,
            claims,
            options,
            ..
        } = self;
        let fallback = Pod::default();
        let pod_at =
            |i: &u32| -> &Pod { pending.get(*i as usize).map_or(&fallback, Borrow::borrow) };
        let shp = &state.base.shapes;
        // Membership in hostname groups is decided now, when every group exists.
        let mut interned: HashMap<ShapeSet, u32> = HashMap::new();
        let mut shape_sets = Vec::new();
        let mut items = Vec::with_capacity(drafts.len());
        for (di, d) in drafts.iter().enumerate() {
            let mut member_of: Vec<u32> = d.ports.clone();
            for (g, pg) in &host_groups {
                if let Some(grp) = state.groups.get(*g)
                    && d.pods.iter().any(|p| grp.selects(pod_at(p)))
                {
                    member_of.push(*pg);
                }
            }
            member_of.sort_unstable();
            member_of.dedup();
            let set_id = match interned.get(&*d.shapes) {
                Some(i) => *i,
                None => {
                    let i = shape_sets.len() as u32;
                    shape_sets.push((*d.shapes).clone());
                    interned.insert((*d.shapes).clone(), i);
                    i
                }
            };
            items.push(PackItem {
                pods: vec![di as u32],
                requests: d.requests.clone(),
                shape_set: set_id,
                member_of,
                limits: d.limits.iter().map(|(k, v)| (*k, *v)).collect(),
                arrival_limits: d.arrival.iter().map(|(k, v)| (*k, *v)).collect(),
            });
        }
        let mut problem = PackingProblem {
            shapes: Arc::clone(&shp.shapes),
            by_size: Arc::clone(&shp.by_size),
            by_price: Arc::clone(&shp.by_price),
            pools: shp.pools.clone(),
            shape_sets,
            items,
            groups: next_pack_group,
        };
        let plan = match &claims {
            // The Karpenter baseline's NodeClaims are the plan: each launches as the
            // cheapest shape it may still use that holds its pods (ties: lower id).
            Some(claims) => {
                let nodes = claims
                    .list
                    .iter()
                    .filter_map(|c| {
                        let shape = c
                            .set
                            .iter()
                            .filter(|s| {
                                problem
                                    .shapes
                                    .get(*s as usize)
                                    .is_some_and(|sh| c.used.fits_in(&sh.allocatable))
                            })
                            .min_by(|a, b| {
                                let price = |s: &ShapeId| {
                                    problem
                                        .shapes
                                        .get(*s as usize)
                                        .map_or(f64::INFINITY, |x| x.price)
                                };
                                price(a).total_cmp(&price(b)).then(a.cmp(b))
                            })?;
                        Some(crate::packing::PlannedNode {
                            shape,
                            items: c.drafts.iter().map(|d| *d as u32).collect(),
                        })
                    })
                    .collect();
                LaunchPlan::from_nodes(&problem, nodes, Vec::new())
            }
            None => planner.plan(&problem, None),
        };
        if let Err(v) = verify(&problem, &plan) {
            // A planner bug must not launch a broken plan: report and place nothing new. The
            // pods placed on existing nodes may have been spread against the dropped ones, so
            // they count as dropped for the rerun.
            let mut dropped = Vec::new();
            for d in &drafts {
                for p in &d.pods {
                    dropped.push(*p as usize);
                    result.unschedulable.push(Unschedulable {
                        pod: pod_ref(pod_at(p)),
                        reason: format!(
                            "launch plan rejected by verification: {}",
                            v.first().map(|e| e.to_string()).unwrap_or_default()
                        ),
                    });
                }
            }
            dropped.sort_unstable();
            dropped.dedup();
            return dropped;
        }
        let mut dropped = Vec::new();
        for (item, reason) in &plan.unplaced {
            if let Some(d) = drafts.get(*item as usize) {
                for p in &d.pods {
                    dropped.push(*p as usize);
                    result.unschedulable.push(Unschedulable {
                        pod: pod_ref(pod_at(p)),
                        reason: reason.clone(),
                    });
                }
            }
        }
        dropped.sort_unstable();
        dropped.dedup();
        if let Some(cap) = price_cap {
            let least = least_launch_cost(&problem, &plan, &drafts);
            if least >= cap {
                result.new_node_cost_per_hour = least;
                result.over_price_cap = true;
                return dropped;
            }
        }
        let balance = claims.is_none() && options.balance_zones;
        let mut plan = plan;
        if balance {
            let mut load = crate::zone_balance::zone_cpu(&state.base.snapshot);
            let allowed: Vec<ShapeSet> = plan
                .nodes
                .iter()
                .map(|node| {
                    allowed_shapes(
                        problem.shapes.len(),
                        node.items.iter().filter_map(|i| drafts.get(*i as usize)),
                    )
                })
                .collect();
            crate::zone_balance::balance(&problem, &mut plan, &allowed, &mut load);
        }
        // The plan is checked: NodeClaims are assembled from the drafts and shapes, so the
        // packing items (a sixteenth of a 100,000-pod run's peak) go first.
        problem.items = Vec::new();
        problem.shape_sets = Vec::new();
        let pool_reqs: Vec<Requirements> = shp
            .pool_source
            .iter()
            .map(|pi| {
                state
                    .base
                    .snapshot
                    .nodepools
                    .get(*pi)
                    .map(|p| Requirements::from_wire(&p.requirements))
                    .unwrap_or_default()
            })
            .collect();
        // Each shape's zone as an index into the distinct zones (worked out with the shapes).
        let zone_names = &shp.zones;
        let zone_of = &shp.zone_of;
        let option_lists: std::sync::Mutex<HashMap<Vec<ShapeId>, Arc<[InstanceTypeOption]>>> =
            std::sync::Mutex::new(HashMap::new());
        let requirement_lists: std::sync::Mutex<HashMap<RequirementsKey, Arc<[Requirement]>>> =
            std::sync::Mutex::new(HashMap::new());
        let term_table = &terms;
        let claims: Vec<NewNodeClaim> = plan
            .nodes
            .par_iter()
            .enumerate()
            .filter_map(|(ni, node)| {
                let launch = problem.shapes.get(node.shape as usize)?;
                let pool = problem.pools.get(launch.pool as usize)?;
                let ds: Vec<&Draft> = node
                    .items
                    .iter()
                    .filter_map(|i| drafts.get(*i as usize))
                    .collect();
                let set = allowed_shapes(problem.shapes.len(), ds.iter().copied());
                let mut req = Resources::default();
                for d in &ds {
                    req.add_assign(&d.requests);
                }
                // Options: every instance type of this pool that fits, with its cheapest offering.
                let mut best: Vec<Option<ShapeId>> =
                    vec![None; state.base.snapshot.instance_types.len()];
                // A handful of distinct values over thousands of shapes: small vectors,
                // sorted once below (B-tree inserts per shape were a twelfth of a large run).
                let mut zone_seen = vec![false; zone_names.len()];
                let mut ct_seen: Vec<crate::model::CapacityType> = Vec::new();
                for s in set.iter() {
                    let Some(sh) = problem.shapes.get(s as usize) else {
                        continue;
                    };
                    if sh.pool != launch.pool || !req.fits_in(&sh.allocatable) {
                        continue;
                    }
                    if let Some(seen) = zone_of
                        .get(s as usize)
                        .and_then(|z| zone_seen.get_mut(*z as usize))
                    {
                        *seen = true;
                    }
                    if !ct_seen.contains(&sh.capacity_type) {
                        ct_seen.push(sh.capacity_type);
                    }
                    if let Some(cur) = best.get_mut(sh.instance_type as usize) {
                        match cur {
                            Some(c)
                                if problem.shapes.get(*c as usize).is_some_and(|c| {
                                    sh.price > c.price
                                        || (sh.price == c.price
                                            && (!balance
                                                || sh.zone != launch.zone
                                                || c.zone == launch.zone))
                                }) => {}
                            _ => *cur = Some(s),
                        }
                    }
                }
                let mut zones: Vec<&str> = zone_names
                    .iter()
                    .zip(&zone_seen)
                    .filter(|(_, seen)| **seen)
                    .map(|(z, _)| z.as_str())
                    .collect();
                zones.sort_unstable();
                let mut cts: Vec<&'static str> = ct_seen.iter().map(|c| c.as_label()).collect();
                cts.sort_unstable();
                // Karpenter hands at most 60 instance types to the provider per launch. The
                // cheapest 60 are chosen among shape ids before any option is built: building
                // all fitting types (up to the whole catalog) and truncating left a vector
                // with room for hundreds of options behind every NodeClaim (about half the
                // peak memory of a 20,000-pod run; benches/README.md).
                let mut chosen: Vec<(ShapeId, &crate::packing::Shape)> = best
                    .iter()
                    .flatten()
                    .filter_map(|s| Some((*s, problem.shapes.get(*s as usize)?)))
                    .collect();
                chosen.sort_by(|(_, a), (_, b)| {
                    a.price
                        .total_cmp(&b.price)
                        .then(a.instance_type_name.cmp(&b.instance_type_name))
                });
                chosen.truncate(MAX_INSTANCE_TYPE_OPTIONS);
                // NodeClaims of similar pods get the same 60 options: one shared list per
                // distinct choice (at 100,000 pods, 20,000 claims held 1.2 million option
                // copies, 150 MB; benches/README.md).
                let key: Vec<ShapeId> = chosen.iter().map(|(id, _)| *id).collect();
                let build = || -> Arc<[InstanceTypeOption]> {
                    chosen
                        .iter()
                        .map(|(_, sh)| InstanceTypeOption {
                            instance_type: sh.instance_type_name.clone(),
                            cheapest: OfferingChoice {
                                zone: sh.zone.clone(),
                                capacity_type: sh.capacity_type,
                                price: sh.price,
                            },
                            allocatable_for_pods: sh.allocatable.clone(),
                        })
                        .collect()
                };
                let options: Arc<[InstanceTypeOption]> = match option_lists.lock() {
                    Ok(mut lists) => Arc::clone(lists.entry(key.clone()).or_insert_with(build)),
                    Err(_) => build(),
                };
                let mut terms: Vec<u32> = ds.iter().flat_map(|d| d.terms.iter().copied()).collect();
                terms.sort_unstable();
                terms.dedup();
                let assemble = || -> Arc<[Requirement]> {
                    let mut reqs = pool_reqs
                        .get(launch.pool as usize)
                        .cloned()
                        .unwrap_or_default();
                    for t in terms.iter().filter_map(|t| term_table.get(*t)) {
                        reqs = reqs.intersect(&Requirements::from_wire(t));
                    }
                    reqs.add(labels::NODEPOOL, ValueSet::of([pool.name.clone()]));
                    reqs.add(
                        labels::INSTANCE_TYPE,
                        ValueSet::of(options.iter().map(|o| o.instance_type.clone())),
                    );
                    reqs.add(
                        labels::ZONE,
                        ValueSet::of(zones.iter().map(|z| z.to_string())),
                    );
                    reqs.add(
                        labels::CAPACITY_TYPE,
                        ValueSet::of(cts.iter().map(|c| c.to_string())),
                    );
                    reqs.to_wire().into()
                };
                // Claims of similar pods have equal requirements: assembled once per distinct
                // input (intersecting and rendering them per claim was a sixth of a 100,000-pod
                // run) and shared.
                let req_key: RequirementsKey = (
                    launch.pool,
                    terms.clone(),
                    key,
                    zones.iter().map(|z| z.to_string()).collect(),
                    cts.clone(),
                );
                let cached = requirement_lists
                    .lock()
                    .ok()
                    .and_then(|m| m.get(&req_key).cloned());
                let requirements = match cached {
                    Some(r) => r,
                    None => {
                        let r = assemble();
                        if let Ok(mut m) = requirement_lists.lock() {
                            m.insert(req_key, Arc::clone(&r));
                        }
                        r
                    }
                };
                let mut pods_sum = Resources::default();
                for p in ds.iter().flat_map(|d| d.pods.iter()) {
                    pods_sum.add_assign(&pod_requests(pod_at(p)));
                }
                Some(NewNodeClaim {
                    name: format!("{}-new-{}", pool.name, ni),
                    nodepool: pool.name.clone(),
                    requirements,
                    pods: ds
                        .iter()
                        .flat_map(|d| d.pods.iter().map(|p| pod_ref(pod_at(p))))
                        .collect(),
                    pod_requests: pods_sum,
                    daemonset_requests: launch.daemonset_requests.clone(),
                    instance_type_options: options,
                    launch: Launch {
                        instance_type: launch.instance_type_name.clone(),
                        zone: launch.zone.clone(),
                        capacity_type: launch.capacity_type,
                        price: launch.price,
                    },
                })
            })
            .collect();
        result.new_node_cost_per_hour = claims.iter().fold(0.0, |acc, c| acc + c.launch.price);
        result.new_node_claims = claims;
        result.cost_lower_bound = plan.lower_bound;
        result.cost_gap_percent = plan
            .lower_bound
            .and_then(|bound| crate::optimize::gap_pct(result.new_node_cost_per_hour, bound));
        result.planner_notes = plan.notes.clone();
        dropped
    }
}

/// A class's compatible nodes (ignoring removal) and shapes.
fn compute_class(
    base: &crate::state::Base,
    term: NodeSelectorTerm,
    vols: &[&Vec<NodeSelectorTerm>],
    tolerations: &[Toleration],
) -> Class {
    let node_ok = |n: &Node| {
        term_matches(&term, &n.labels)
            && vols.iter().all(|v| terms_match(v, &n.labels))
            && tolerates_all(&n.taints, tolerations, true)
    };
    let nodes_ok: Vec<bool> = base.snapshot.nodes.par_iter().map(node_ok).collect();
    let shp = &base.shapes;
    let ok: Vec<bool> = (0..shp.shapes.len())
        .into_par_iter()
        .map(|s| match (shp.labels.get(s), shp.taints.get(s)) {
            (Some(l), Some(t)) => {
                term_matches(&term, l)
                    && vols.iter().all(|v| terms_match(v, l))
                    && tolerates_all(t, tolerations, true)
            }
            _ => false,
        })
        .collect();
    let shapes = ShapeSet::from_ids(
        shp.shapes.len(),
        ok.iter()
            .enumerate()
            .filter(|(_, b)| **b)
            .map(|(i, _)| i as u32),
    );
    Class {
        id: 0,
        term,
        nodes_ok,
        shapes,
    }
}

/// The part of a (group, class) pair's eligible domains that no simulation changes.
fn eligible_static(
    base: &crate::state::Base,
    g: &crate::topology::Group,
    c: &Class,
) -> EligibleStatic {
    let mut fixed: BTreeSet<String> = g.domains.iter().cloned().collect();
    let shp = &base.shapes;
    for s in c.shapes.iter() {
        if let Some(v) = shp.labels.get(s as usize).and_then(|l| l.get(&g.key)) {
            fixed.insert(v.clone());
        }
    }
    let nodes_per_domain = (g.kind == Kind::Affinity).then(|| {
        let mut number = crate::interner::Interner::default();
        let mut nodes: Vec<usize> = Vec::new();
        let mut domain_of = vec![u32::MAX; base.snapshot.nodes.len()];
        for (i, n) in base.snapshot.nodes.iter().enumerate() {
            if !c.nodes_ok.get(i).copied().unwrap_or(false) {
                continue;
            }
            let Some(d) = crate::state::node_domain(n, &g.key) else {
                continue;
            };
            let id = number.id(d);
            if nodes.len() <= id as usize {
                nodes.resize(id as usize + 1, 0);
            }
            if let Some(k) = nodes.get_mut(id as usize) {
                *k += 1;
            }
            if let Some(slot) = domain_of.get_mut(i) {
                *slot = id;
            }
        }
        NodesPerDomain {
            domains: number
                .into_values()
                .into_iter()
                .map(str::to_string)
                .collect(),
            nodes,
            domain_of,
        }
    });
    EligibleStatic {
        fixed: Arc::new(fixed),
        nodes_per_domain,
    }
}

/// The least the plan's new nodes can cost: each at the cheapest shape of its pool that is
/// compatible with all its pods and holds their requests (what its NodeClaim's cheapest
/// option would be).
fn least_launch_cost(problem: &PackingProblem, plan: &LaunchPlan, drafts: &[Draft]) -> f64 {
    let mut total = 0.0;
    for node in &plan.nodes {
        let Some(launch) = problem.shapes.get(node.shape as usize) else {
            continue;
        };
        let mut req = Resources::default();
        let mut sets: Vec<&ShapeSet> = Vec::new();
        for d in node.items.iter().filter_map(|i| drafts.get(*i as usize)) {
            req.add_assign(&d.requests);
            sets.push(&*d.shapes);
        }
        let cheapest = problem
            .shapes
            .iter()
            .enumerate()
            .filter(|(s, sh)| {
                sh.pool == launch.pool
                    && sets.iter().all(|set| set.contains(*s as u32))
                    && req.fits_in(&sh.allocatable)
            })
            .map(|(_, sh)| sh.price)
            .fold(f64::INFINITY, f64::min);
        total += cheapest.min(launch.price);
    }
    total
}

/// Keeps the shapes whose domain is allowed (`ok` per value id; `none_ok`: shapes without the
/// key), by whole words of the sets.
fn restrict(set: &mut ShapeSet, dom: &Domains, ok: &[bool], none_ok: bool) {
    let mut allowed = if none_ok {
        dom.none.clone()
    } else {
        ShapeSet::default()
    };
    for (mask, _) in dom.masks.iter().zip(ok).filter(|(_, ok)| **ok) {
        allowed.union_with(mask);
    }
    set.intersect_with(&allowed);
}

/// "no instance type has 96 GiB memory in NodePool gpu: largest allows 64 GiB".
fn resource_reason(requests: &Resources, set: &ShapeSet, shp: &crate::shapes::Shapes) -> String {
    let mut per_pool: BTreeMap<u32, Resources> = BTreeMap::new();
    for s in set.iter() {
        if let Some(sh) = shp.shapes.get(s as usize) {
            let e = per_pool.entry(sh.pool).or_default();
            *e = e.max(&sh.allocatable);
        }
    }
    let mut reasons = Vec::new();
    for (pool, max) in per_pool {
        let name = shp
            .pools
            .get(pool as usize)
            .map_or("?", |p| p.name.as_str());
        if let Some((res, want, have)) = requests.first_excess(&max) {
            reasons.push(format!("no instance type has {} in NodePool {name}: largest allows {} (after overhead and daemonsets)", format_amount(res, want), format_amount(res, have)));
        } else if let Some((res, want, have)) = requests.first_excess_extended(&max) {
            reasons.push(format!(
                "no instance type has {want} {res} in NodePool {name}: largest allows {have}"
            ));
        } else {
            reasons.push(format!(
                "NodePool {name}: no single instance type has room for all of {requests}"
            ));
        }
    }
    reasons.join("; ")
}

#[cfg(test)]
mod distinct_terms_tests {
    //! `distinct_terms` skips pods whose term inputs it has seen; these tests hold it to the
    //! plain reading (every pod's terms, deduplicated) so an input the skip forgets shows up.
    use super::*;
    use crate::model::{
        InclusionPolicy, LabelSelector, PodAffinityTerm, TopologySpreadConstraint,
        WeightedPodAffinityTerm,
    };

    /// Every pod's terms, each distinct key once in first-seen order, with no skipping.
    fn every_pods_terms(
        pods: &[Pod],
        namespaces: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> Vec<String> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for p in pods {
            for t in owned_terms(p, namespaces, &[effective_term(p)]) {
                if seen.insert(t.key.clone()) {
                    out.push(format!("{:?}", t.key));
                }
            }
        }
        out
    }

    fn rendered(terms: &[crate::topology::OwnedTerm]) -> Vec<String> {
        terms.iter().map(|t| format!("{:?}", t.key)).collect()
    }

    fn spread(match_label_keys: &[&str], honor_taints: bool) -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew: 1,
            topology_key: labels::ZONE.into(),
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            label_selector: LabelSelector::from_labels([("app", "web")]),
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: honor_taints.then_some(InclusionPolicy::Honor),
            match_label_keys: match_label_keys.iter().map(|k| k.to_string()).collect(),
        }
    }

    fn anti_affinity(match_label_keys: &[&str]) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: LabelSelector::from_labels([("app", "web")]),
            namespaces: vec![],
            namespace_selector: None,
            topology_key: labels::HOSTNAME.into(),
            match_label_keys: match_label_keys.iter().map(|k| k.to_string()).collect(),
        }
    }

    #[test]
    fn replicas_of_two_revisions_keep_a_term_each() {
        // A rollout: the same Deployment's pods at two revisions, spread per revision through
        // matchLabelKeys. The second revision differs only in a label, and must keep its term.
        let pod = |name: &str, hash: &str| {
            let mut p = Pod::new("default", name, 100, 1 << 20)
                .label("app", "web")
                .label("pod-template-hash", hash);
            p.topology_spread = vec![spread(&["pod-template-hash"], false)];
            p
        };
        let pods = [pod("a", "1"), pod("b", "1"), pod("c", "2"), pod("d", "2")];
        let terms = distinct_terms(&pods, &BTreeMap::new());
        assert_eq!(terms.len(), 2, "one spread term per revision");
        assert_ne!(terms[0].key.selector, terms[1].key.selector);
        assert_eq!(rendered(&terms), every_pods_terms(&pods, &BTreeMap::new()));
    }

    proptest::proptest! {
        /// Over pods drawn from a small pool of variations (so replicas repeat), the skipping
        /// reading gives the same terms in the same order as reading every pod.
        #[test]
        fn skipping_seen_inputs_gives_every_pods_terms(
            pods in proptest::collection::vec(
                (0u8..2, 0u8..2, 0u8..2, 0u8..4, 0u8..3, 0u8..2, 0u8..2), 0..40)
        ) {
            let namespaces: BTreeMap<String, BTreeMap<String, String>> = [
                ("a".to_string(), [("team".to_string(), "x".to_string())].into()),
                ("b".to_string(), BTreeMap::new()),
            ]
            .into();
            let pods: Vec<Pod> = pods
                .into_iter()
                .enumerate()
                .map(|(i, (ns, rev, tol, constraint, keys, zone, weight))| {
                    let ns = if ns == 0 { "a" } else { "b" };
                    let mut p = Pod::new(ns, &format!("p{i}"), 100, 1 << 20)
                        .label("app", "web")
                        .label("rev", &rev.to_string());
                    let keys: &[&str] = match keys {
                        0 => &[],
                        1 => &["rev"],
                        _ => &["app"],
                    };
                    if tol == 1 {
                        p.tolerations = vec![Toleration {
                            key: Some("dedicated".into()),
                            operator: TolerationOperator::Exists,
                            value: None,
                            effect: None,
                        }];
                    }
                    if zone == 1 {
                        p.node_selector = [(labels::ZONE.to_string(), "z1".to_string())].into();
                    }
                    match constraint {
                        0 => p.topology_spread = vec![spread(keys, weight == 1)],
                        1 => p.pod_anti_affinity.required = vec![anti_affinity(keys)],
                        2 => {
                            let mut term = anti_affinity(keys);
                            if weight == 1 {
                                term.namespace_selector =
                                    Some(LabelSelector::from_labels([("team", "x")]));
                            }
                            p.pod_affinity.preferred = vec![WeightedPodAffinityTerm {
                                weight: 10 + i32::from(weight),
                                term,
                            }];
                        }
                        _ => {}
                    }
                    p
                })
                .collect();
            proptest::prop_assert_eq!(
                rendered(&distinct_terms(&pods, &namespaces)),
                every_pods_terms(&pods, &namespaces)
            );
        }
    }
}

#[cfg(test)]
mod host_number_tests {
    //! The first fit reads hostname groups by node number (`ClusterState`'s `hosts`); these
    //! check that path is the one taken and that it keeps pods where the rules by name would
    //! (`find_existing` also compares both readings under debug assertions).
    use super::*;
    use crate::model::{LabelSelector, Node, PodAffinityTerm};

    const GIB: i64 = 1 << 30;

    fn away_from(app: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: LabelSelector::from_labels([("app", app)]),
            namespaces: vec![],
            namespace_selector: None,
            topology_key: labels::HOSTNAME.into(),
            match_label_keys: vec![],
        }
    }

    /// 40 nodes with room; on each but the last a pod with `app=bound` and anti-affinity to
    /// `app=<avoid>` (more than the 32 changes a group keeps apart from its shared base, so
    /// the counts are folded into the numbered array), and one pending pod labelled `pending`
    /// with anti-affinity to `app=<pending_avoids>`.
    fn cluster(avoid: &str, pending: &str, pending_avoids: &str) -> (ClusterState, Pod) {
        let mut s = Snapshot::default();
        for i in 0..40 {
            s.nodes.push(Node::new(
                &format!("n{i:02}"),
                "z1",
                Resources::with_pods(4000, 8 * GIB, 110),
            ));
        }
        let mut pods = Vec::new();
        for i in 0..39 {
            let mut p = Pod::new("ns", &format!("b{i}"), 100, GIB / 8)
                .label("app", "bound")
                .on(&format!("n{i:02}"));
            p.pod_anti_affinity.required = vec![away_from(avoid)];
            pods.push(p);
        }
        s.pods = Snapshot::shared_pods(pods);
        let mut p = Pod::new("ns", "new", 100, GIB / 8).label("app", pending);
        p.pod_anti_affinity.required = vec![away_from(pending_avoids)];
        (ClusterState::new(&s), p)
    }

    fn placed_on(state: &mut ClusterState, pod: &Pod) -> Vec<String> {
        let r = schedule_on(
            state,
            std::slice::from_ref(pod),
            &SchedulingOptions::default(),
        );
        r.existing_placements
            .iter()
            .map(|p| p.node.clone())
            .collect()
    }

    #[test]
    fn anti_affinity_by_node_number_keeps_the_pod_off_nodes_with_matches() {
        // The pending pod avoids `bound` pods: only the last node has none.
        let (mut state, pod) = cluster("nobody", "new", "bound");
        state.create_groups(&owned_terms(&pod, &BTreeMap::new(), &[]));
        let hosts = Arc::clone(&state.base.hosts);
        let group = state
            .groups
            .iter()
            .find(|g| {
                g.kind == Kind::AntiAffinity
                    && *g.selector == LabelSelector::from_labels([("app", "bound")])
            })
            .expect("the pending pod's group");
        assert!(
            group.counts.uses_ids(&hosts),
            "hostname counts are numbered"
        );
        assert_eq!(
            group.counts.len(),
            39,
            "one domain per node holding a match"
        );
        assert_eq!(placed_on(&mut state, &pod), vec!["n39".to_string()]);
    }

    #[test]
    fn inverse_anti_affinity_by_node_number_keeps_the_pod_away_from_their_owners() {
        // The bound pods avoid `web`: a `web` pod can only go to the last node.
        let (mut state, pod) = cluster("web", "web", "nobody");
        let hosts = Arc::clone(&state.base.hosts);
        assert!(
            state.groups.iter().any(|g| g.kind == Kind::AntiAffinity
                && g.owners.uses_ids(&hosts)
                && g.owners.len() == 39),
            "the owners of the bound pods' term are counted by number"
        );
        assert_eq!(placed_on(&mut state, &pod), vec!["n39".to_string()]);
        // A pod they do not avoid takes the first node in order.
        let (mut state, other) = cluster("web", "api", "nobody");
        assert_eq!(placed_on(&mut state, &other), vec!["n00".to_string()]);
    }
}
