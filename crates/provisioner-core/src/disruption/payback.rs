//! Disruption that pays for itself: a consolidation command is worth taking only when what it
//! saves over the time the saving is expected to last exceeds what evicting its pods costs.
//!
//! "Saves more than zero per hour" (Karpenter's rule) takes a command that saves a cent an
//! hour by restarting thirty pods that will leave in ten minutes anyway. Here a command's
//! value is
//!
//! ```text
//! net = worst-case saving/h x horizon
//!       -  sum over evicted pods of pod's price/h x (eviction_pod_hours x eviction weight + hours of a Job's work lost)
//!       -  replacements' price/h x replacement_ready_seconds / 3600
//! ```
//!
//! - **horizon**: how long the saving lasts: the median over the evicted pods of their
//!   expected remaining life ([`super::lifetime`]), capped at [`Payback::horizon_cap_hours`].
//!   It is learnt from the lifetimes of pods that ended in this cluster; until enough have
//!   ended it is the Lindy estimate (a workload that has run for `a` is, as a median,
//!   expected to run about `a` more). Where the workload's pods do leave young, this is the
//!   hysteresis between provisioning and consolidation: a node of pods just placed has a
//!   short horizon and must save a lot to pay for moving them. Where they do not (memoryless
//!   or fixed lifetimes), assuming Lindy kept fragmented nodes of young pods for hours.
//! - **a pod's price**: the larger of its share of its node's price (the largest of its CPU,
//!   memory and GPU fractions of the node's allocatable, times the node's price per hour) and
//!   the average running pod's share by the same measure ([`average_pod_price`]), weighted by
//!   Karpenter's per-pod eviction cost (priority and `pod-deletion-cost`). The floor matters:
//!   a restart hurts a small pod about as much as a large one (connections drain, caches
//!   warm, work is lost), and priced by its share alone, ten small pods were cheaper to move
//!   than one large one, so the rule moved many pods for little. One eviction costs
//!   `eviction_pod_hours` of that price: the restart and warm-up. A Job's pod also costs the
//!   hours it has run ([`lost_work_hours`]): its replacement starts the work over, so an
//!   eviction near the end of a long job throws away nearly all of it.
//! - **replacement overlap**: replacements are billed from their launch while the candidates
//!   still run until the replacements are ready.
//!
//! Everything is a pure function of the snapshot, so decisions stay deterministic.

use serde::{Deserialize, Serialize};

use super::cost::eviction_cost;
use super::lifetime::RemainingLife;
use crate::model::{Node, Pod, Resources};

/// Knobs of the payback rule. `None` in [`super::DisruptionOptions::payback`] restores the
/// plain `saving > 0` rule ranked by `saving - disruption_cost_weight x disruption cost`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Payback {
    /// The longest a saving is counted for. A cap keeps a node whose pods have run for weeks
    /// from justifying any eviction at all in a cluster whose packing changes within hours,
    /// and bounds the regret when the estimate is wrong. A cluster that renews its pods more
    /// slowly raises it ([`Self::turnover_lookback_seconds`]).
    pub horizon_cap_hours: f64,
    /// Hours of an evicted pod's own price one eviction costs (restart, warm-up, lost work).
    /// A quarter hour by default: against Karpenter's own consolidation (which prices an
    /// eviction at nothing) it is the price where, over the simulator's 57 workloads, the
    /// cluster is both cheaper and evicts fewer pods (`docs/simulator.md`, round 57); an
    /// hour evicted 70% fewer pods for 4-5% more cost.
    pub eviction_pod_hours: f64,
    /// Seconds a replacement takes to be ready (launch plus registration): the time both the
    /// candidates and their replacements are billed.
    pub replacement_ready_seconds: i64,
    /// Ended pod lifetimes needed before the horizon is learnt from them
    /// ([`super::lifetime`]) instead of assumed (Lindy). Few endings say little about a
    /// workload; a number above any cluster's keeps the Lindy estimate.
    pub min_ended_lifetimes: usize,
    /// Before `min_ended_lifetimes` endings, estimate remaining lives from the window each
    /// owner kind has been seen over (its oldest running pod's age, survival within it, Lindy
    /// beyond) instead of each pod's own age ([`super::lifetime`]). Off, a workload that
    /// started minutes ago has only minutes-old pods, each given minutes to live.
    pub window_prior: bool,
    /// Price a replacement's flexibility against the evictions: its dearer instance-type
    /// options (kept so it can still launch when the cheapest is unavailable) are kept only
    /// while the worst case still pays for the evictions, and commands are ranked by the
    /// expected saving (the cheapest option). Off, options are kept up to the plain
    /// threshold and a replacement is valued at its worst case, which leaves a replacement
    /// almost no worst-case saving by construction.
    pub pay_for_flexibility: bool,
    /// The most a replacement's dearest kept option may cost above its cheapest, as a
    /// fraction of the cheapest (`0.25`: options up to 25% dearer). Without it, options are
    /// kept up to the candidates' price less the threshold, so a replacement is valued at
    /// almost no saving whatever it would save on the cheapest option, and the payback rule
    /// refuses nearly every replacement. A premium bounds the flexibility by what it costs
    /// relative to the replacement itself: a swap whose cheapest option saves a lot keeps a
    /// useful worst-case saving, a marginal swap still values at nearly nothing. Applies to
    /// merges (commands on two or more nodes) and to a single node whose accelerators none of
    /// its pods request (there at 0.25 when unset): see
    /// [`super::consolidation::flexibility_premium`].
    pub flexibility_premium: Option<f64>,
    /// A single node whose pods request less than this fraction of its allocatable CPU and
    /// less than this fraction of its memory is replaced with its options bounded by the
    /// premium (0.25 when none is set), as merges are: it was sized for pods that have left
    /// (a wave of jobs, a scale-down), and valued at every option below its price its
    /// replacement would save nothing in the worst case. `None`: only idle accelerators do.
    /// Above a third the node's free room is what the next arrivals use (round 5, openb).
    pub underused_below: Option<f64>,
    /// A single node of the wrong shape for its pods (the shares of its CPU and of its memory
    /// they request 0.4 or more apart), whose pods fit replacements whose cheapest options
    /// cost less than this fraction of the node's price together, and whose pods are expected
    /// to stay at least `horizon_cap_hours` (their median), is replaced with its options
    /// bounded by the premium (0.25 when none is set), as merges are. Such a node was shaped
    /// for pods that went elsewhere (a zone-spread stream's replica grown for the next one,
    /// which the spread sent to another zone) and its idle resource is of no use to the pods
    /// that settled on it; valued at every option below its price, its replacement saves
    /// nothing in the worst case, and the node ran half idle for twelve hours
    /// (`docs/simulator.md`, round 33). `None`: only underused nodes and idle accelerators
    /// are.
    pub reshape_below: Option<f64>,
    /// A NodePool's `consolidateAfter` of this many seconds halves the eviction price of its
    /// nodes' pods: `eviction_pod_hours` is scaled by `k / (k + consolidateAfter)`. The
    /// price was set where every node is a candidate at every loop (no wait), so it guards
    /// against churn as well as pricing a restart. A wait guards against the same churn:
    /// only nodes whose pods have not changed for `consolidateAfter` are candidates, so the
    /// moves the price kept out (a node about to be refilled, pods about to leave) mostly
    /// never come up. Charged in full on top of the wait, the rule refused most of what was
    /// left: over 57 generated workloads, at `consolidateAfter: 30m` the default was dearer
    /// than Karpenter on 30 of them, evicting a third of its pods (`docs/simulator.md`,
    /// round 35). `None`: the full price whatever the wait.
    pub wait_halving_seconds: Option<f64>,
    /// Raise `horizon_cap_hours` to the cluster's turnover time over this lookback (the time
    /// it takes to see as many new pods as it runs, [`super::turnover`]), up to
    /// `turnover_cap_hours`. The cap stands for how long a packing lasts; in a cluster that
    /// sees a new pod a day, a repack's saving lasts days, not hours. Counted only once the
    /// producer has watched a whole lookback: a day, so that a quiet night does not read as a
    /// quiet cluster. `None`: the cap as set.
    pub turnover_lookback_seconds: Option<i64>,
    /// The most the turnover raises the horizon cap to.
    pub turnover_cap_hours: f64,
    /// Count a command's saving towards its moved pods' longest remaining life, rather than
    /// their median, by how much the cluster shrank over this lookback: the share of its
    /// departures that arrivals did not make up for ([`super::turnover::shrink_fraction`],
    /// [`super::lifetime::horizon_hours`]). A node left alone in a workload that winds down
    /// runs until its last pod leaves; nothing arrives to use the room a repack frees.
    /// `None` (the default): the median whatever the trend. Measured over 75 simulated
    /// workloads at an hour's lookback it buys up to 0.4 points of cost with 3-16% more
    /// evictions, the eviction price's trade again (`docs/simulator.md`, round 42).
    pub shrink_lookback_seconds: Option<i64>,
    /// The least a pod beyond the evidence is expected to run on, in hours
    /// ([`super::lifetime::RemainingLife::with_floor`]): Lindy counts from when the cluster
    /// was first seen, so in a young cluster every pod was given the minutes it had run and
    /// nothing launched for a burst was worth repacking until the burst had aged. Four hours
    /// (the horizon cap): over the simulator's 57 workloads 2.7% below Karpenter's cost
    /// instead of 1.3%, for 10% more evictions, still a fifth fewer than Karpenter's
    /// (`docs/simulator.md`, round 58). 0: plain Lindy.
    pub lindy_floor_hours: f64,
}

impl Default for Payback {
    fn default() -> Self {
        Payback {
            horizon_cap_hours: 4.0,
            eviction_pod_hours: 0.25,
            replacement_ready_seconds: 90,
            min_ended_lifetimes: 30,
            window_prior: true,
            pay_for_flexibility: false,
            flexibility_premium: None,
            underused_below: Some(0.3),
            reshape_below: Some(0.6),
            wait_halving_seconds: Some(300.0),
            turnover_lookback_seconds: Some(86_400),
            turnover_cap_hours: 168.0,
            shrink_lookback_seconds: None,
            lindy_floor_hours: 4.0,
        }
    }
}

impl Payback {
    /// The horizon cap for this snapshot: `horizon_cap_hours`, raised to the cluster's
    /// turnover ([`Self::turnover_lookback_seconds`]) up to `turnover_cap_hours`.
    pub fn cap_hours(&self, snapshot: &crate::model::Snapshot) -> f64 {
        let cap = self.horizon_cap_hours.max(0.0);
        self.turnover_lookback_seconds
            .and_then(|l| super::turnover::turnover_hours(snapshot, l))
            .map_or(cap, |t| cap.max(t.min(self.turnover_cap_hours)))
    }

    /// How much the cluster shrank over [`Self::shrink_lookback_seconds`], 0 to 1 (0 when off
    /// or not watched for a whole lookback).
    pub fn shrink(&self, snapshot: &crate::model::Snapshot) -> f64 {
        self.shrink_lookback_seconds
            .and_then(|l| super::turnover::shrink_fraction(snapshot, l))
            .unwrap_or(0.0)
    }

    /// What [`Self::wait_halving_seconds`] leaves of the eviction price on a node of a NodePool
    /// with `consolidate_after_secs` (`None`: `Never`, no consolidation to price).
    pub fn wait_scale(&self, consolidate_after_secs: Option<i64>) -> f64 {
        match (self.wait_halving_seconds, consolidate_after_secs) {
            (Some(k), Some(wait)) if k > 0.0 && wait > 0 => k / (k + wait as f64),
            _ => 1.0,
        }
    }
}

/// A command's economics under the payback rule (all in price units, e.g. USD).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Value {
    /// Hours the saving is expected to last.
    pub horizon_hours: f64,
    /// Worst-case saving per hour times the horizon.
    pub saving: f64,
    /// What the evictions cost.
    pub eviction: f64,
    /// Replacements billed while the candidates still run.
    pub overlap: f64,
    /// `saving - eviction - overlap`: the command is taken only when this is positive.
    pub net: f64,
}

impl Value {
    /// The least saving per hour at which a command with these evictions and this horizon
    /// pays (`net >= 0`), the replacements costing the rest of `candidates_price`: from
    /// `s x horizon - eviction - (candidates_price - s) x ready_hours = 0`. Infinite when no
    /// saving can pay (no horizon and no overlap to trade against).
    pub fn paying_saving_per_hour(&self, candidates_price: f64, knobs: &Payback) -> f64 {
        let ready = knobs.replacement_ready_seconds.max(0) as f64 / 3600.0;
        let need = self.eviction + candidates_price.max(0.0) * ready;
        let per = self.horizon_hours + ready;
        if need <= 0.0 {
            0.0
        } else if per <= 0.0 {
            f64::INFINITY
        } else {
            need / per
        }
    }
}

/// The largest of a pod's CPU, memory and extended-resource (GPU, ...) fractions of
/// `allocatable` (0 for a resource the node has none of; at most 1).
pub fn request_fraction(req: &Resources, allocatable: &Resources) -> f64 {
    let frac = |used: i64, alloc: i64| {
        if alloc > 0 {
            (used.max(0) as f64 / alloc as f64).min(1.0)
        } else {
            0.0
        }
    };
    let extended = req
        .extended
        .iter()
        .map(|(k, v)| frac(*v, allocatable.extended.get(k).copied().unwrap_or(0)))
        .fold(0.0, f64::max);
    frac(req.cpu_milli, allocatable.cpu_milli)
        .max(frac(req.memory, allocatable.memory))
        .max(extended)
}

/// What evicting `pod` (requesting `requests`) from `node` (priced `node_price` per hour) at
/// `now` costs, its price per hour being at least `floor` (the average pod's share,
/// [`average_pod_price`]): `eviction_pod_hours` of that price, weighted by its eviction cost, and for a Job's
/// pod the hours it has run as well ([`lost_work_hours`]).
///
/// `wait_scale` ([`Payback::wait_scale`]) scales the restart's price, not a Job's lost work:
/// a wait does not make a rerun shorter.
#[allow(clippy::too_many_arguments)]
pub fn pod_eviction_value(
    pod: &Pod,
    requests: &Resources,
    node: &Node,
    node_price: f64,
    floor: f64,
    knobs: &Payback,
    now: i64,
    wait_scale: f64,
) -> f64 {
    let share = node_price.max(0.0) * request_fraction(requests, &node.allocatable);
    let price = share.max(floor.max(0.0));
    price * (knobs.eviction_pod_hours.max(0.0) * wait_scale.max(0.0) * eviction_cost(pod).max(0.0))
        + price * lost_work_hours(pod, now)
}

/// Hours of work an eviction throws away: a Job's pod starts over in the pod the Job
/// controller creates for it, so everything it has run is paid for again (a ReplicaSet's
/// replacement carries on serving; its restart is what `eviction_pod_hours` prices). Counted
/// from when this attempt started running (its creation when that is not known). Not
/// weighted by the eviction cost:
/// priority and `pod-deletion-cost` say how much a user minds a disruption, not how much
/// compute a rerun takes.
pub fn lost_work_hours(pod: &Pod, now: i64) -> f64 {
    if pod.owner_kind.as_deref() == Some("Job") {
        (now - pod.started_at.unwrap_or(pod.created_at)).max(0) as f64 / 3600.0
    } else {
        0.0
    }
}

/// The floor on a pod's price: the mean over the running pods that could be moved (daemonset
/// and static pods excluded) of their share of their node's price, the measure
/// [`pod_eviction_value`] prices a pod by. 0 without such pods. `requests` are the snapshot
/// pods' requests, same indices.
///
/// The cluster's price divided by its pods was the floor before: it charges each pod for the
/// idle capacity and counts the pods of complementary packings (a CPU-heavy and a
/// memory-heavy pod filling one node) as half a node each, so the floor an average pod got
/// was unlike what that pod was priced at itself. Measured over the simulator's workloads
/// (`docs/simulator.md`, round 40).
pub fn average_pod_price(snapshot: &crate::model::Snapshot, requests: &[Resources]) -> f64 {
    let nodes: std::collections::HashMap<&str, &Node> = snapshot
        .nodes
        .iter()
        .filter(|n| !n.in_flight)
        .map(|n| (n.name.as_str(), n))
        .collect();
    let (mut sum, mut pods) = (0.0, 0usize);
    for (pod, req) in snapshot.pods.iter().zip(requests) {
        if !super::candidates::is_reschedulable(pod) {
            continue;
        }
        let Some(node) = pod.node_name.as_deref().and_then(|n| nodes.get(n)) else {
            continue;
        };
        sum += node.price.max(0.0) * request_fraction(req, &node.allocatable);
        pods += 1;
    }
    if pods == 0 { 0.0 } else { sum / pods as f64 }
}

/// How long a command's saving is counted: the moved pods' expected remaining hours, their
/// median reaching towards the longest as the cluster shrinks ([`lifetime::horizon_hours`]);
/// the cap when no pod moves.
///
/// [`lifetime::horizon_hours`]: super::lifetime::horizon_hours
pub fn horizon_hours<'a>(pods: impl IntoIterator<Item = &'a Pod>, life: &RemainingLife) -> f64 {
    let mut remaining: Vec<f64> = pods.into_iter().map(|p| life.hours(p)).collect();
    super::lifetime::horizon_hours(&mut remaining, life.cap_hours(), life.shrink())
}

/// The command's value: `worst_saving_per_hour` over the horizon, less evictions and overlap.
/// `pods` are the evicted pods with their requests, their node and its price.
pub fn value<'a>(
    worst_saving_per_hour: f64,
    replacements_price_per_hour: f64,
    pods: impl IntoIterator<Item = (&'a Pod, &'a Resources, &'a Node, f64)>,
    life: &RemainingLife,
    floor: f64,
    knobs: &Payback,
) -> Value {
    value_waited(
        worst_saving_per_hour,
        replacements_price_per_hour,
        pods.into_iter()
            .map(|(p, r, n, price)| (p, r, n, price, 1.0)),
        life,
        floor,
        knobs,
    )
}

/// [`value`] with each pod's [`Payback::wait_scale`] last in its tuple.
pub fn value_waited<'a>(
    worst_saving_per_hour: f64,
    replacements_price_per_hour: f64,
    pods: impl IntoIterator<Item = (&'a Pod, &'a Resources, &'a Node, f64, f64)>,
    life: &RemainingLife,
    floor: f64,
    knobs: &Payback,
) -> Value {
    let mut moved = Vec::new();
    let mut eviction = 0.0;
    for (pod, requests, node, price, wait_scale) in pods {
        moved.push(pod);
        eviction += pod_eviction_value(
            pod,
            requests,
            node,
            price,
            floor,
            knobs,
            life.now(),
            wait_scale,
        );
    }
    let horizon = horizon_hours(moved, life);
    let saving = worst_saving_per_hour * horizon;
    let overlap = replacements_price_per_hour.max(0.0)
        * knobs.replacement_ready_seconds.max(0) as f64
        / 3600.0;
    Value {
        horizon_hours: horizon,
        saving,
        eviction,
        overlap,
        net: saving - eviction - overlap,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::pod_requests;
    use proptest::prelude::*;

    /// Lindy remaining lives at `now`, with the default 4 h cap.
    fn lindy(now: i64) -> RemainingLife {
        RemainingLife::lindy(now, 4.0)
    }

    fn node(cpu: i64, mem: i64) -> Node {
        Node {
            allocatable: Resources {
                cpu_milli: cpu,
                memory: mem,
                ..Resources::default()
            },
            ..Node::default()
        }
    }

    fn pod(cpu: i64, mem: i64, created_at: i64) -> Pod {
        Pod {
            containers: vec![Resources {
                cpu_milli: cpu,
                memory: mem,
                ..Resources::default()
            }],
            created_at,
            ..Pod::default()
        }
    }

    #[test]
    fn a_jobs_pod_costs_the_work_it_would_run_again() {
        let n = node(4000, 16 << 30);
        let knobs = priced_an_hour();
        let now = 10 * 3600;
        // Half the node's CPU on a 1/h node: 0.5/h. Two hours old.
        let eviction = |kind: &str, priority: i32| {
            let p = Pod {
                owner_kind: Some(kind.into()),
                priority,
                ..pod(2000, 1 << 30, now - 2 * 3600)
            };
            value(
                0.0,
                0.0,
                [(&p, &pod_requests(&p), &n, 1.0)],
                &lindy(now),
                0.0,
                &knobs,
            )
            .eviction
        };
        // The restart alone: 0.5/h x 1 h.
        assert!((eviction("ReplicaSet", 0) - 0.5).abs() < 1e-12);
        // The restart and the two hours it has run: 0.5/h x (1 h + 2 h).
        assert!((eviction("Job", 0) - 1.5).abs() < 1e-12);
        // Priority weighs the disruption, not the compute a rerun takes.
        let weighted = eviction("ReplicaSet", PRIORITY_DOUBLES) - 0.5;
        assert!(weighted > 0.1, "{weighted}");
        assert!((eviction("Job", PRIORITY_DOUBLES) - 1.5 - weighted).abs() < 1e-12);
        let not_started = Pod {
            owner_kind: Some("Job".into()),
            ..pod(1, 1, now + 60)
        };
        assert_eq!(lost_work_hours(&not_started, now), 0.0);
        // Created two hours ago but running for only the last half hour: the wait pending
        // is not work a rerun repeats.
        let waited = Pod {
            owner_kind: Some("Job".into()),
            started_at: Some(now - 1800),
            ..pod(1, 1, now - 2 * 3600)
        };
        assert!((lost_work_hours(&waited, now) - 0.5).abs() < 1e-12);
    }

    /// The rule with an eviction priced at an hour of the pod's price, the unit these tests'
    /// arithmetic is written in (the default is a quarter hour).
    fn priced_an_hour() -> Payback {
        Payback {
            eviction_pod_hours: 1.0,
            ..Payback::default()
        }
    }

    /// A priority that doubles a pod's eviction cost (Karpenter's scale).
    const PRIORITY_DOUBLES: i32 = 33_554_432;

    #[test]
    fn young_pods_do_not_pay_for_a_small_saving() {
        let n = node(4000, 16 << 30);
        let knobs = priced_an_hour();
        // Half the node's CPU, 1/h node: evicting costs 0.5 x 1 h = 0.5.
        let p = pod(2000, 1 << 30, 1000 - 600);
        let young = value(
            0.2,
            0.0,
            [(&p, &pod_requests(&p), &n, 1.0)],
            &lindy(1000),
            0.0,
            &knobs,
        );
        assert!((young.horizon_hours - 600.0 / 3600.0).abs() < 1e-12);
        assert!((young.eviction - 0.5).abs() < 1e-12);
        assert!(young.net < 0.0);
        // The same pod after three hours: 0.2/h x 3 h = 0.6 > 0.5.
        let old = pod(2000, 1 << 30, 1000 - 3 * 3600);
        let v = value(
            0.2,
            0.0,
            [(&old, &pod_requests(&old), &n, 1.0)],
            &lindy(1000),
            0.0,
            &knobs,
        );
        assert!((v.net - 0.1).abs() < 1e-9, "{v:?}");
    }

    #[test]
    fn lindy_horizon_is_the_capped_median_age() {
        let n = node(4000, 16 << 30);
        let knobs = Payback::default();
        let at = |ages: &[i64]| {
            let pods: Vec<Pod> = ages
                .iter()
                .map(|a| pod(100, 1 << 20, 100_000 - a))
                .collect();
            let requests: Vec<Resources> = pods.iter().map(pod_requests).collect();
            let life = RemainingLife::lindy(100_000, knobs.horizon_cap_hours);
            value(
                0.0,
                0.0,
                pods.iter().zip(&requests).map(|(p, r)| (p, r, &n, 1.0)),
                &life,
                0.0,
                &knobs,
            )
            .horizon_hours
        };
        assert_eq!(at(&[]), 4.0);
        assert_eq!(at(&[100 * 3600]), 4.0);
        assert_eq!(at(&[3600, 7200, 0]), 1.0);
        assert_eq!(at(&[3600, 7200]), 1.5);
        // A clock behind a pod's creation is not a negative horizon.
        assert_eq!(at(&[-50]), 0.0);
    }

    /// The floor is the average pod's share of its node, the measure each pod is priced by:
    /// an idle node and the complementary packing of a CPU-heavy and a memory-heavy pod do
    /// not move it the way the cluster's price per pod did (2.0/h over 2 pods, 1.0/h).
    #[test]
    fn the_floor_is_the_average_pods_share() {
        let mut full = node(4000, 16 << 30);
        full.name = "full".into();
        full.price = 1.0;
        let mut idle = node(4000, 16 << 30);
        idle.name = "idle".into();
        idle.price = 1.0;
        let on_full = |cpu: i64, mem: i64| Pod {
            node_name: Some("full".into()),
            ..pod(cpu, mem, 0)
        };
        // 75% of the CPU and 10% of the memory; 10% of the CPU and 75% of the memory.
        let cpu_heavy = on_full(3000, (16 << 30) / 10);
        let mem_heavy = on_full(400, (16 << 30) * 3 / 4);
        let mut unbound = pod(4000, 1 << 30, 0);
        unbound.node_name = None;
        let snapshot = crate::model::Snapshot {
            nodes: vec![full, idle],
            pods: crate::model::Snapshot::shared_pods(vec![cpu_heavy, mem_heavy, unbound]),
            ..crate::model::Snapshot::default()
        };
        let requests: Vec<Resources> = snapshot.pods.iter().map(|p| pod_requests(p)).collect();
        assert!((average_pod_price(&snapshot, &requests) - 0.75).abs() < 1e-12);
        // Nothing running: no floor.
        let empty = crate::model::Snapshot {
            pods: Vec::new(),
            ..snapshot.clone()
        };
        assert_eq!(average_pod_price(&empty, &[]), 0.0);
    }

    #[test]
    fn small_pods_cost_at_least_the_average_pod() {
        let n = node(4000, 16 << 30);
        let knobs = priced_an_hour();
        let tiny = pod(10, 1 << 20, 0);
        // Share alone: 1.0/h x 10m/4000m = 0.0025.
        let v = value(
            0.0,
            0.0,
            [(&tiny, &pod_requests(&tiny), &n, 1.0)],
            &lindy(3600),
            0.0,
            &knobs,
        );
        assert!((v.eviction - 0.0025).abs() < 1e-12);
        let v = value(
            0.0,
            0.0,
            [(&tiny, &pod_requests(&tiny), &n, 1.0)],
            &lindy(3600),
            0.1,
            &knobs,
        );
        assert!((v.eviction - 0.1).abs() < 1e-12);
    }

    #[test]
    fn the_paying_saving_makes_net_zero() {
        let n = node(4000, 16 << 30);
        let knobs = priced_an_hour();
        // Half the node's CPU on a 1/h node, an hour old: eviction 0.5, horizon 1 h.
        let p = pod(2000, 1 << 20, 10_000 - 3600);
        let life = RemainingLife::lindy(10_000, knobs.horizon_cap_hours);
        let base = value(
            0.0,
            0.0,
            [(&p, &pod_requests(&p), &n, 1.0)],
            &life,
            0.0,
            &knobs,
        );
        let need = base.paying_saving_per_hour(1.0, &knobs);
        // need x 1 h = 0.5 + (1 - need) x 90 s.
        assert!((need - 0.525 / 1.025).abs() < 1e-12, "{need}");
        let at = value(
            need,
            1.0 - need,
            [(&p, &pod_requests(&p), &n, 1.0)],
            &life,
            0.0,
            &knobs,
        );
        assert!(at.net.abs() < 1e-12, "{at:?}");
        // Nothing to evict, no overlap: any saving pays; no horizon to earn it in: none does.
        let free = value(0.0, 0.0, std::iter::empty(), &life, 0.0, &knobs);
        assert_eq!(free.paying_saving_per_hour(0.0, &knobs), 0.0);
        let young = pod(2000, 1 << 20, 10_000);
        let none = value(
            0.0,
            0.0,
            [(&young, &pod_requests(&young), &n, 1.0)],
            &life,
            0.0,
            &knobs,
        );
        let no_ready = Payback {
            replacement_ready_seconds: 0,
            ..knobs.clone()
        };
        assert!(none.paying_saving_per_hour(1.0, &no_ready).is_infinite());
    }

    #[test]
    fn replacements_overlap_is_charged() {
        let knobs = Payback::default();
        let v = value(1.0, 2.0, std::iter::empty(), &lindy(0), 0.0, &knobs);
        assert!((v.overlap - 2.0 * 90.0 / 3600.0).abs() < 1e-12);
        assert!((v.net - (4.0 - v.overlap)).abs() < 1e-12);
    }

    proptest! {
        /// More saving never makes a command worse; more evicted pods never make it better.
        #[test]
        fn monotone(saving in 0.0f64..10.0, extra in 0.0f64..5.0, cpu in 1i64..4000, age in 0i64..100_000) {
            let n = node(4000, 16 << 30);
            let knobs = Payback::default();
            let p = pod(cpu, 1 << 20, 200_000 - age);
            let q = pod(cpu, 1 << 20, 200_000 - age);
            let one = value(saving, 0.0, [(&p, &pod_requests(&p), &n, 1.0)], &lindy(200_000), 0.0, &knobs);
            let more = value(saving + extra, 0.0, [(&p, &pod_requests(&p), &n, 1.0)], &lindy(200_000), 0.0, &knobs);
            let two = value(saving, 0.0, [(&p, &pod_requests(&p), &n, 1.0), (&q, &pod_requests(&q), &n, 1.0)], &lindy(200_000), 0.0, &knobs);
            prop_assert!(more.net >= one.net - 1e-12);
            prop_assert!(two.net <= one.net + 1e-12);
            prop_assert!(one.horizon_hours >= 0.0 && one.horizon_hours <= knobs.horizon_cap_hours);
        }
    }
}
