//! Anticipation: provisioning sizes new nodes for the arrivals that are still coming.
//!
//! Pods often arrive as a trickle (a scale-up adding replicas every few seconds, jobs
//! submitted one by one), each in its own provisioning batch. Sized for its batch alone, every
//! new node holds one or two pods: the cluster becomes many small nodes, each with a
//! daemonset's and the kubelet's overhead, that later consolidation can only merge by evicting
//! pods that just started (which the payback rule, [`crate::disruption::payback`], rightly
//! refuses). Karpenter merges them minutes later, at the price of those evictions.
//!
//! Here the arrivals already flowing estimate those still to come, the payback rule's Lindy
//! argument applied to arrivals: a stream that has flowed for a time `a` is expected to go on,
//! and the longer it has flowed, the longer it goes on. The stream is the arrivals of the last
//! `window_seconds` **before** the current batch (the pods this round launches nodes for; pods
//! still pending on a node in flight arrived before it), back to the first gap of
//! `stream_gap_seconds` without one (an earlier wave of jobs is not this stream); its age `a`
//! runs from its first arrival to the batch. Under Lindy's law a stream of age `a` still flows
//! `r` later with probability `a / (a + r)`, so the arrivals expected with `confidence` (0.75)
//! are those of the next `r = a (1 - c) / c` (`a / 3`), estimated by those of the last `r`.
//! A median (`r = a`) reserved room for a wave of jobs as long again as it had lasted, and
//! nodes were grown for pods that never came (docs/simulator.md, round 24). Each workload's
//! own stream counts too (`workload_streams`): a service adding a replica every few minutes
//! between other arrivals is hidden in the stream of all arrivals, whose every gap ends it.
//!
//! The expected arrivals are fitted, one by one (first fit, largest first), into the free room
//! each node will have after this round (ready and in-flight nodes, the new nodes' slack) that
//! they may use (its taints tolerated, their node selector matched); what fits nowhere is the
//! missing room. A sum over nodes counted fragments no pod fits (CPU left on nodes full in
//! memory), and a trickle of replicas then got a node of its own each. Each new NodeClaim is
//! grown, in order, to the one of its own instance-type options that holds the most of the
//! missing room (CPU and memory together) per unit of its extra price (of those that hold all
//! of it, the cheapest), costing at most `max_price_factor` times its price; its options are
//! narrowed to types at least that large, so whatever the provider launches has the room. The
//! pods of the batch itself never count: a one-off burst (a deployment created with all its
//! replicas) has no arrivals before it and is sized as before; only a stream that is already
//! flowing reserves room.
//!
//! Evictions are netted out: a workload replaces an evicted pod with a new pod, which would
//! otherwise count as an arrival; the pods matched to recent evictions
//! ([`crate::replacements`]) are left out of the stream.
//!
//! The cost: a node a little larger than its pods for up to a window, and a bigger node left
//! when the expected arrivals do not come (consolidation then replaces it like any other).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::disruption::candidates::is_daemon;
use crate::filter::node_selector_matches;
use crate::model::{LabelSelector, Pod, Snapshot, Taint, labels};
use crate::requirements::{Requirements, ValueSet};
use crate::resources::pod_requests;
use crate::result::SchedulingResult;
use crate::taints::tolerates_all;

/// Knobs of the anticipation rule ([`crate::SchedulingOptions::anticipation`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Anticipation {
    /// How far before the batch the stream is looked for; the horizon is at most this long.
    pub window_seconds: i64,
    /// A grown node costs at most this many times the node its batch alone needs.
    pub max_price_factor: f64,
    /// Arrivals this many seconds apart or more belong to different streams: the stream whose
    /// age counts starts after the last such gap.
    pub stream_gap_seconds: i64,
    /// The probability, under Lindy's law, that the stream still flows at the end of the
    /// horizon reserved for: 0.75 reserves for a third of its age, 0.5 for as long again.
    pub confidence: f64,
    /// How far before the batch each workload's own stream is looked for
    /// (`workload_streams`); 0 reads only the stream of all arrivals.
    pub workload_lookback_seconds: i64,
}

impl Default for Anticipation {
    fn default() -> Self {
        // Measured on the `mixed` family (docs/simulator.md): 90 s / 2x closed a tenth of
        // the gap to Karpenter, 900 s / 4x most of it; 1,800 s overshoots on some seeds.
        // Round 24: a gap of 150, 300 or 600 s and a confidence of 2/3, 3/4 or 5/6 all gave
        // -4.7% to -5.6% against Karpenter on the generated set, from -2.1% before.
        Anticipation {
            window_seconds: 900,
            max_price_factor: 4.0,
            stream_gap_seconds: 300,
            confidence: 0.75,
            // Round 31: four windows, so a service adding a replica every 5-10 minutes has
            // an age its window alone could not show.
            workload_lookback_seconds: 3600,
        }
    }
}

impl Anticipation {
    /// Seconds of arrivals before the batch that estimate those after it, for a stream that has
    /// flowed for `age_seconds`: `age (1 - c) / c`, at most the window.
    pub fn horizon_seconds(&self, age_seconds: i64) -> i64 {
        let c = self.confidence;
        if c.is_nan() || c <= 0.0 {
            return self.window_seconds.max(0);
        }
        if c >= 1.0 {
            return 0;
        }
        let r = age_seconds.max(0) as f64 * (1.0 - c) / c;
        (r as i64).clamp(0, self.window_seconds.max(0))
    }
}

/// CPU (millicores) and memory (bytes): what growing a launch adds.
pub type Room = (i64, i64);

/// The room the next arrivals need beyond what the cluster has after `result`: the stream's
/// arrivals of the horizon before the batch (the oldest pod placed on a new NodeClaim) that
/// fit in no node's free room; none when the round launches nothing.
pub fn missing_room(snapshot: &Snapshot, result: &SchedulingResult, knobs: &Anticipation) -> Room {
    // The batch is the pods this round launches for. Pods still pending on nodes in flight
    // (a node takes a minute or two to be ready) are earlier arrivals of the stream: taking
    // the oldest pending pod as the batch's start, a wave arriving every few seconds was its
    // own batch for as long as its first node launched, and none of its launches grew.
    let launched_for: HashSet<(&str, &str)> = result
        .new_node_claims
        .iter()
        .flat_map(|c| c.pods.iter())
        .map(|r| (r.namespace.as_str(), r.name.as_str()))
        .collect();
    let Some(batch_start) = snapshot
        .pods
        .iter()
        .filter(|p| {
            p.node_name.is_none() && launched_for.contains(&(p.namespace.as_str(), p.name.as_str()))
        })
        .map(|p| p.created_at)
        .min()
    else {
        return (0, 0);
    };
    // A replacement for an evicted pod is a new pod created at the eviction, not new demand
    // and not part of a stream: without this, each consolidation's moved pods grew the next
    // launches for 15 minutes, and made a stream that had paused look as old as the cluster.
    let replaced = crate::replacements::replaced(snapshot);
    // New demand: every pod but the replacements.
    let own: Vec<&Pod> = snapshot
        .pods
        .iter()
        .zip(&replaced)
        .filter(|(_, m)| m.is_none())
        .map(|(p, _)| &**p)
        .collect();
    // The window's arrivals: the stream's age and (within the horizon, never longer than the
    // window) the expected pods come from them.
    let window_start = batch_start - knobs.window_seconds.max(0);
    let window: Vec<&Pod> = own
        .iter()
        .copied()
        .filter(|p| !is_daemon(p) && p.created_at >= window_start && p.created_at < batch_start)
        .collect();
    let age = batch_start - stream_start(&window, batch_start, knobs.stream_gap_seconds);
    let from = batch_start - knobs.horizon_seconds(age);
    let mut arrivals: Vec<(&Pod, Room)> = Vec::new();
    // Pods that repel their own kind per node take one node each: the next of them cannot use
    // room grown on this round's nodes beyond one pod (a rolling update of such a deployment
    // grew a 4-vCPU pod's node to 32 vCPU that its successors could never share). Each such
    // group counts once, as its largest member.
    let mut one_per_node: HashMap<(&str, &LabelSelector), (&Pod, Room)> = HashMap::new();
    for &p in window.iter().filter(|p| p.created_at >= from) {
        let r = pod_requests(p);
        match own_hostname_anti_affinity(p) {
            Some(sel) => {
                let e = one_per_node
                    .entry((p.namespace.as_str(), sel))
                    .or_insert((p, (0, 0)));
                e.1.0 = e.1.0.max(r.cpu_milli);
                e.1.1 = e.1.1.max(r.memory);
            }
            None => arrivals.push((p, (r.cpu_milli, r.memory))),
        }
    }
    arrivals.extend(one_per_node.into_values());
    let counted: HashSet<(&str, &str)> = arrivals
        .iter()
        .map(|(p, _)| (p.namespace.as_str(), p.name.as_str()))
        .collect();
    for p in workload_streams(&own, batch_start, knobs) {
        if !counted.contains(&(p.namespace.as_str(), p.name.as_str())) {
            let r = pod_requests(p);
            arrivals.push((p, (r.cpu_milli, r.memory)));
        }
    }
    if arrivals.is_empty() {
        // A one-off burst (the 20,000-pod benchmark is one): no walk over the cluster's room.
        return (0, 0);
    }
    unfitted(arrivals, free_places(snapshot, result))
}

/// The arrivals expected from each workload's own stream: pods of one namespace and label set
/// (a Deployment's replicas), created in the `workload_lookback_seconds` before the batch,
/// none with a hostname anti-affinity to their own kind (the stream of all arrivals counts
/// those once). The stream of all arrivals misses a service that adds a replica every few
/// minutes while other services' replicas arrive in between: any gap of `stream_gap_seconds`
/// between two arrivals ends it, so it always looks young and its horizon holds nothing
/// (docs/simulator.md, round 31: a 4-vCPU replica every 460 s got a node of its own each).
/// Each workload here is its own stream, ended only by a gap of twice its typical (median)
/// gap, and at least `stream_gap_seconds`; a workload with fewer than three arrivals has no
/// rate to read. Its expected arrivals are its own of the horizon its age gives.
fn workload_streams<'a>(pods: &[&'a Pod], batch_start: i64, knobs: &Anticipation) -> Vec<&'a Pod> {
    let lookback_start = batch_start - knobs.workload_lookback_seconds.max(0);
    let mut workloads: BTreeMap<(&str, &crate::model::Labels), Vec<&Pod>> = BTreeMap::new();
    for &p in pods.iter().filter(|p| {
        !is_daemon(p)
            && p.created_at >= lookback_start
            && p.created_at < batch_start
            && own_hostname_anti_affinity(p).is_none()
    }) {
        workloads
            .entry((p.namespace.as_str(), &p.labels))
            .or_default()
            .push(p);
    }
    let mut expected = Vec::new();
    for mut stream in workloads.into_values().filter(|w| w.len() >= 3) {
        stream.sort_by_key(|p| p.created_at);
        let mut gaps: Vec<i64> = stream
            .windows(2)
            .map(|w| w[1].created_at - w[0].created_at)
            .collect();
        gaps.sort_unstable();
        let typical = gaps.get(gaps.len() / 2).copied().unwrap_or(0);
        let gap = knobs
            .stream_gap_seconds
            .max(1)
            .max(typical.saturating_mul(2));
        let start = stream_start(&stream, batch_start, gap);
        let from = batch_start - knobs.horizon_seconds(batch_start - start);
        expected.extend(stream.into_iter().filter(|p| p.created_at >= from));
    }
    expected
}

/// When the stream of arrivals the batch belongs to began: the first of `arrivals` after which
/// no two are `gap` seconds apart or more (nor the last of them and the batch); `batch_start`
/// when nothing arrived in the gap before it.
fn stream_start(arrivals: &[&Pod], batch_start: i64, gap: i64) -> i64 {
    let mut times: Vec<i64> = arrivals.iter().map(|p| p.created_at).collect();
    times.sort_unstable();
    let mut start = batch_start;
    for &t in times.iter().rev() {
        if start - t >= gap.max(1) {
            break;
        }
        start = t;
    }
    start
}

/// Free room a pod may use: a node's or a new NodeClaim's, with what keeps pods off it.
struct Place<'a> {
    room: Room,
    taints: &'a [Taint],
    /// The node's labels; `None` for a new NodeClaim (its labels are not known yet).
    labels: Option<&'a BTreeMap<String, String>>,
}

impl Place<'_> {
    /// Whether `pod` could use this room: it fits, the pod tolerates the taints, and its node
    /// selector matches. Room on a tainted node (GPUs, dedicated pools) is no room for the
    /// pods that do not tolerate it.
    fn takes(&self, pod: &Pod, r: Room) -> bool {
        self.room.0 >= r.0
            && self.room.1 >= r.1
            && tolerates_all(self.taints, &pod.tolerations, false)
            && self.labels.is_none_or(|l| node_selector_matches(pod, l))
    }
}

/// The free room of each place a pod could go after `result`: every node not being deleted
/// (its allocatable less its bound pods and the pending pods `result` puts there) and every
/// new NodeClaim (its launch's allocatable for pods less its pods, its NodePool's taints).
fn free_places<'a>(snapshot: &'a Snapshot, result: &SchedulingResult) -> Vec<Place<'a>> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut places: Vec<Place<'a>> = Vec::new();
    for n in snapshot.nodes.iter().filter(|n| !n.marked_for_deletion) {
        index.insert(n.name.as_str(), places.len());
        places.push(Place {
            room: (n.allocatable.cpu_milli, n.allocatable.memory),
            taints: &n.taints,
            labels: Some(&n.labels),
        });
    }
    let placed = result.existing_nodes_by_pod();
    for p in snapshot.pods.iter() {
        let node = match &p.node_name {
            Some(n) => Some(n.as_str()),
            None => placed
                .get(&(p.namespace.as_str(), p.name.as_str()))
                .copied(),
        };
        if let Some(&i) = node.and_then(|n| index.get(n)) {
            let r = pod_requests(p);
            places[i].room.0 -= r.cpu_milli;
            places[i].room.1 -= r.memory;
        }
    }
    for c in &result.new_node_claims {
        if let Some(o) = c
            .instance_type_options
            .iter()
            .find(|o| o.instance_type == c.launch.instance_type)
        {
            let taints = snapshot
                .nodepools
                .iter()
                .find(|np| np.name == c.nodepool)
                .map_or(&[][..], |np| np.taints.as_slice());
            places.push(Place {
                room: (
                    o.allocatable_for_pods.cpu_milli - c.pod_requests.cpu_milli,
                    o.allocatable_for_pods.memory - c.pod_requests.memory,
                ),
                taints,
                labels: None,
            });
        }
    }
    places.retain(|p| p.room.0 > 0 && p.room.1 > 0);
    places
}

/// The summed requests of the `arrivals` that no place takes (first fit, largest first: a
/// vCPU weighed as 4 GiB).
fn unfitted(mut arrivals: Vec<(&Pod, Room)>, mut places: Vec<Place<'_>>) -> Room {
    let weight = |r: &Room| r.0 as f64 / 1000.0 + r.1 as f64 / (4u64 << 30) as f64;
    arrivals.sort_by(|a, b| weight(&b.1).total_cmp(&weight(&a.1)));
    let mut missing: Room = (0, 0);
    for (pod, r) in arrivals {
        match places.iter_mut().find(|f| f.takes(pod, r)) {
            Some(f) => {
                f.room.0 -= r.0;
                f.room.1 -= r.1;
            }
            None => {
                missing.0 += r.0;
                missing.1 += r.1;
            }
        }
    }
    missing
}

/// The selector of a required hostname anti-affinity term that matches the pod itself (in its
/// own namespace): such pods go one per node.
fn own_hostname_anti_affinity(p: &Pod) -> Option<&LabelSelector> {
    p.pod_anti_affinity
        .required
        .iter()
        .find(|t| {
            t.topology_key == labels::HOSTNAME
                && (t.namespaces.is_empty() || t.namespaces.contains(&p.namespace))
                && t.namespace_selector.is_none()
                && t.label_selector.matches(&p.labels)
        })
        .map(|t| &t.label_selector)
}

/// Whether `o` has more of some accelerator (GPUs, ...) than `current`: growth is for the CPU
/// and memory arrivals are expected to need, and extra accelerators bought with it are priced
/// for pods that are not coming. A one-GPU launch grown to a four-GPU node for the CPU pods of
/// a stream kept three GPUs idle for hours (`docs/simulator.md`, round 35).
fn adds_accelerators(
    o: &crate::result::InstanceTypeOption,
    current: &crate::result::InstanceTypeOption,
) -> bool {
    o.allocatable_for_pods
        .extended
        .iter()
        .filter(|(k, _)| crate::disruption::consolidation::is_accelerator(k))
        .any(|(k, n)| {
            *n > current
                .allocatable_for_pods
                .extended
                .get(k)
                .copied()
                .unwrap_or(0)
        })
}

/// Grows `result`'s new NodeClaims for the missing room ([`missing_room`]); returns the room
/// added (CPU, memory).
pub fn apply(snapshot: &Snapshot, result: &mut SchedulingResult, knobs: &Anticipation) -> Room {
    let (mut cpu, mut mem) = missing_room(snapshot, result, knobs);
    let mut added: Room = (0, 0);
    for c in &mut result.new_node_claims {
        if cpu <= 0 && mem <= 0 {
            break;
        }
        let Some(current) = c
            .instance_type_options
            .iter()
            .find(|o| o.instance_type == c.launch.instance_type)
            .cloned()
        else {
            continue;
        };
        let base = &current.allocatable_for_pods;
        let cap = c.launch.price * knobs.max_price_factor.max(1.0);
        let extra = |o: &crate::result::InstanceTypeOption| {
            (
                (o.allocatable_for_pods.cpu_milli - base.cpu_milli).max(0),
                (o.allocatable_for_pods.memory - base.memory).max(0),
            )
        };
        // Options at least as large as the current launch in CPU and memory, within the cap,
        // launched in the same zone and capacity type: the scheduler chose the zone for the
        // pods' constraints (spread, zonal affinity), which growth must not undo. None with
        // more accelerators than the launch ([`adds_accelerators`]).
        let mut larger: Vec<&crate::result::InstanceTypeOption> = c
            .instance_type_options
            .iter()
            .filter(|o| {
                o.cheapest.price <= cap
                    && o.cheapest.zone == c.launch.zone
                    && o.cheapest.capacity_type == c.launch.capacity_type
                    && o.allocatable_for_pods.cpu_milli >= base.cpu_milli
                    && o.allocatable_for_pods.memory >= base.memory
                    && !adds_accelerators(o, &current)
            })
            .collect();
        larger.sort_by(|a, b| {
            a.cheapest
                .price
                .total_cmp(&b.cheapest.price)
                .then(a.instance_type.cmp(&b.instance_type))
        });
        // The option holding the most of the missing room per unit of its extra price, the larger
        // part on exact ties; among options that hold all of it, that is the cheapest. (Calling
        // ratios within 2% ties, so that the larger size of a family priced about linearly wins,
        // measured a wash: docs/simulator.md, round 25.) The arrivals need CPU and memory together,
        // so the part held is the smaller of the two fractions: counting their sum, a
        // 4x memory-heavy type (a fifth of the CPU missing, most of the memory) beat a balanced one
        // (two fifths of each). Taking the largest part whatever it cost grew launches to the
        // largest type under the cap, of whichever family that was: compute nodes for arrivals at
        // 3 GiB per vCPU, whose memory filled with a quarter of the CPU idle, where a
        // general-purpose node half the price held nearly as many. And the cheapest option holding
        // all of it, taken first, bought the last of the room at the price of a family that fits it
        // badly, where part of it in the right family, the rest left to the next launch, cost less
        // (docs/simulator.md, round 25).
        let part = |o: &crate::result::InstanceTypeOption| {
            let (x, y) = extra(o);
            let f = |got: i64, want: i64| {
                if want > 0 {
                    (got.min(want) as f64) / want as f64
                } else {
                    1.0
                }
            };
            f(x, cpu).min(f(y, mem))
        };
        let per_price = |o: &crate::result::InstanceTypeOption| {
            let extra_price = o.cheapest.price - c.launch.price;
            if extra_price > 0.0 {
                part(o) / extra_price
            } else {
                f64::INFINITY
            }
        };
        // The first (cheapest) of the best: `min_by` keeps the first of equals.
        let pick = larger
            .iter()
            .copied()
            .filter(|o| part(o) > 0.0)
            .min_by(|a, b| {
                per_price(b)
                    .total_cmp(&per_price(a))
                    .then(part(b).total_cmp(&part(a)))
            });
        let Some(pick) = pick.cloned() else { continue };
        if pick.instance_type == current.instance_type {
            continue;
        }
        let (x, y) = extra(&pick);
        if x == 0 && y == 0 {
            continue;
        }
        cpu -= x;
        mem -= y;
        added.0 += x;
        added.1 += y;
        c.instance_type_options = c
            .instance_type_options
            .iter()
            .filter(|o| {
                o.allocatable_for_pods.cpu_milli >= pick.allocatable_for_pods.cpu_milli
                    && o.allocatable_for_pods.memory >= pick.allocatable_for_pods.memory
            })
            .cloned()
            .collect();
        let mut reqs = Requirements::from_wire(c.requirements.iter());
        reqs.0.insert(
            labels::INSTANCE_TYPE.to_string(),
            ValueSet::of(
                c.instance_type_options
                    .iter()
                    .map(|o| o.instance_type.clone()),
            ),
        );
        c.requirements = reqs.to_wire().into();
        c.launch.instance_type = pick.instance_type.clone();
        c.launch.zone = pick.cheapest.zone.clone();
        c.launch.capacity_type = pick.cheapest.capacity_type;
        c.launch.price = pick.cheapest.price;
    }
    if added != (0, 0) {
        result.new_node_cost_per_hour = result
            .new_node_claims
            .iter()
            .fold(0.0, |acc, c| acc + c.launch.price);
        result.cost_gap_percent = result
            .cost_lower_bound
            .and_then(|b| crate::optimize::gap_pct(result.new_node_cost_per_hour, b));
        result.planner_notes.push(format!(
            "anticipation: new nodes grown by {} mCPU and {} MiB for arrivals expected within {} s",
            added.0,
            added.1 >> 20,
            knobs.window_seconds
        ));
    }
    added
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::model::{CapacityType, InstanceType, Node, NodePool, Offering, Pod};
    use crate::scheduler::{SchedulingOptions, schedule};
    use crate::strategies::Strategy;

    const GIB: i64 = 1 << 30;
    const NOW: i64 = 10_000;

    /// 2, 4, 8, 16 vCPU at 0.05/h per vCPU, 4 GiB per vCPU.
    fn types() -> Vec<InstanceType> {
        [("s", 2), ("m", 4), ("l", 8), ("xl", 16)]
            .iter()
            .map(|&(n, c)| {
                InstanceType::new(
                    n,
                    c * 1000,
                    c * 4 * GIB,
                    110,
                    vec![Offering::new(
                        "zone-a",
                        CapacityType::OnDemand,
                        0.05 * c as f64,
                    )],
                )
            })
            .collect()
    }

    /// A replica trickle: `earlier` pods of 1 vCPU / 4 GiB created one a minute up to a minute
    /// ago, each bound to its own full node, and one pending pod created now.
    fn trickle(earlier: usize) -> Snapshot {
        let times: Vec<i64> = (0..earlier as i64)
            .map(|i| NOW - 60 * (earlier as i64 - i))
            .collect();
        arrived_at(&times)
    }

    /// Pods of 1 vCPU / 4 GiB created at `times`, each bound to its own full node, and one
    /// pending pod created now.
    fn arrived_at(times: &[i64]) -> Snapshot {
        let mut nodes = Vec::new();
        let mut pods = Vec::new();
        for (i, &t) in times.iter().enumerate() {
            let name = format!("n{i}");
            nodes.push(Node::new(
                &name,
                "zone-a",
                crate::model::Resources::with_pods(1000, 4 * GIB, 110),
            ));
            let mut p = Pod::new("default", &format!("web-{i}"), 1000, 4 * GIB).on(&name);
            p.created_at = t;
            pods.push(p);
        }
        let mut p = Pod::new("default", "web-new", 1000, 4 * GIB);
        p.created_at = NOW;
        pods.push(p);
        world(nodes, pods)
    }

    /// `nodes` and `pods` at [`NOW`], with one NodePool and [`types`].
    fn world(nodes: Vec<Node>, pods: Vec<Pod>) -> Snapshot {
        Snapshot {
            now: NOW,
            nodes,
            pods: Snapshot::shared_pods(pods),
            nodepools: vec![NodePool::new("default", 0)],
            instance_types: types(),
            ..Snapshot::default()
        }
    }

    /// A type with one on-demand offering in zone-a.
    fn priced(name: &str, cpu_milli: i64, memory: i64, price: f64) -> InstanceType {
        InstanceType::new(
            name,
            cpu_milli,
            memory,
            110,
            vec![Offering::new("zone-a", CapacityType::OnDemand, price)],
        )
    }

    /// [`arrived_at`] for `n` pods one every 10 s up to the batch.
    fn every_10s(n: i64) -> Snapshot {
        arrived_at(&(0..n).map(|i| NOW - 10 * (n - i)).collect::<Vec<_>>())
    }

    fn off() -> SchedulingOptions {
        SchedulingOptions {
            anticipation: None,
            ..SchedulingOptions::default()
        }
    }

    #[test]
    fn a_flowing_trickle_gets_a_node_with_room_for_what_follows() {
        let s = trickle(9);
        let before = schedule(&s, &off());
        assert_eq!(before.new_node_claims.len(), 1);
        assert_eq!(before.new_node_claims[0].launch.instance_type, "s");
        let after = schedule(&s, &SchedulingOptions::default());
        let claim = &after.new_node_claims[0];
        // Nine pods arrived one a minute: a stream of age 9 minutes, whose last 3 minutes (3
        // pods, 3 vCPU, 12 GiB) estimate what follows. The new pod's "s" node leaves 1 vCPU
        // free, 2 short: grown to "m" (0.2/h, within four times 0.1/h), the cheapest option
        // that covers them.
        assert_eq!(claim.launch.instance_type, "m");
        assert!((after.new_node_cost_per_hour - 0.2).abs() < 1e-9);
        assert!(
            claim
                .instance_type_options
                .iter()
                .all(|o| o.instance_type != "s")
        );
        assert!(
            after
                .planner_notes
                .iter()
                .any(|n| n.starts_with("anticipation"))
        );
        // The pods still fit what launches.
        let o = claim
            .instance_type_options
            .iter()
            .find(|o| o.instance_type == claim.launch.instance_type)
            .expect("launch among options");
        assert!(claim.pod_requests.fits_in(&o.allocatable_for_pods));
    }

    /// Replicas that repel each other per node cannot share grown room: a trickle of them
    /// counts as one more pod, not as the whole trickle.
    #[test]
    fn a_trickle_of_pods_that_repel_each_other_counts_once() {
        fn repel(p: &mut Pod) {
            p.labels.insert("app".into(), "db".into());
            p.pod_anti_affinity
                .required
                .push(crate::model::PodAffinityTerm {
                    label_selector: LabelSelector {
                        match_labels: [("app".to_string(), "db".to_string())]
                            .into_iter()
                            .collect(),
                        ..LabelSelector::default()
                    },
                    namespaces: Vec::new(),
                    namespace_selector: None,
                    topology_key: labels::HOSTNAME.into(),
                    match_label_keys: Vec::new(),
                });
        }
        let mut s = trickle(9);
        let pods: Vec<Pod> = s
            .pods
            .iter()
            .map(|p| {
                let mut p = (**p).clone();
                repel(&mut p);
                p
            })
            .collect();
        s.pods = Snapshot::shared_pods(pods);
        let after = schedule(&s, &SchedulingOptions::default());
        let claim = &after.new_node_claims[0];
        // One earlier pod (1 vCPU, 4 GiB) is expected, not three, and the new pod's "s" node
        // (2 vCPU, 8 GiB) has its room left.
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (0, 0),
            "three replicas that repel each other counted as more than one"
        );
        assert_eq!(claim.launch.instance_type, "s");
        // Without the anti-affinity the same trickle grows the node (the test above).
        let plain = schedule(&trickle(9), &SchedulingOptions::default());
        assert_eq!(plain.new_node_claims[0].launch.instance_type, "m");
    }

    /// Pods that replaced evicted ones are moves, not arrivals: a consolidation that moved
    /// three pods a minute ago does not grow the next launch.
    #[test]
    fn replacements_of_evicted_pods_are_not_a_stream() {
        let mut s = trickle(9);
        // The last three of the trickle (created 180, 120 and 60 s ago) replaced evicted pods.
        let evicted = crate::model::Eviction::of(&s.pods[0], 0, None);
        s.recent_evictions = (1..=3)
            .map(|i| crate::model::Eviction {
                at: NOW - 60 * i,
                ..evicted.clone()
            })
            .collect();
        let after = schedule(&s, &SchedulingOptions::default());
        assert_eq!(after.new_node_claims[0].launch.instance_type, "s");
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (0, 0)
        );
        // Evictions long before the trickle's pods, or at the batch (their replacement is the
        // batch itself), do not cancel the trickle.
        for at in [NOW - 901, NOW] {
            for e in &mut s.recent_evictions {
                e.at = at;
            }
            let grown = schedule(&s, &SchedulingOptions::default());
            assert_eq!(
                grown.new_node_claims[0].launch.instance_type, "m",
                "evictions at {at}"
            );
        }
        // Two of three evictions leave one pod's worth of arrivals, which the new pod's "s"
        // node's free vCPU holds: no growth either.
        s.recent_evictions.truncate(2);
        for (i, e) in s.recent_evictions.iter_mut().enumerate() {
            e.at = NOW - 60 * (i as i64 + 1);
        }
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (0, 0)
        );
    }

    /// When no option within the price cap holds all the expected arrivals, the part an option
    /// holds counts CPU and memory together, not plenty of the cheaper resource alone.
    #[test]
    fn growth_short_of_the_missing_room_keeps_its_shape() {
        // 2 GiB per vCPU arrivals, one every 10 s for 10 minutes: its last 200 s (20 pods of
        // 1 vCPU / 2 GiB) are expected.
        let mut s = every_10s(60);
        let pods: Vec<Pod> = s
            .pods
            .iter()
            .map(|p| {
                let mut q = Pod::new(&p.namespace, &p.name, 1000, 2 * GIB);
                q.created_at = p.created_at;
                q.node_name = p.node_name.clone();
                q
            })
            .collect();
        s.pods = Snapshot::shared_pods(pods);
        for n in &mut s.nodes {
            n.allocatable.memory = 2 * GIB;
        }
        s.instance_types = vec![
            // What the new pod alone needs.
            priced("c-s", 2000, 4 * GIB, 0.1),
            // Within four times that: a balanced 8 vCPU / 16 GiB and a memory-heavy 4 vCPU /
            // 64 GiB. Neither holds the 20 pods expected.
            priced("c-l", 8000, 16 * GIB, 0.4),
            priced("m-l", 4000, 64 * GIB, 0.38),
        ];
        let after = schedule(&s, &SchedulingOptions::default());
        let claim = &after.new_node_claims[0];
        // c-l holds 6 more such pods; m-l holds 2 (its CPU), though it covers all the memory.
        assert_eq!(claim.launch.instance_type, "c-l");
    }

    /// Short of the missing room, growth buys the most of it per unit of price, not the
    /// largest part the cap allows.
    #[test]
    fn growth_short_of_the_missing_room_buys_it_where_it_is_cheapest() {
        // 4 GiB per vCPU arrivals, one every 10 s for 10 minutes: 20 pods of 1 vCPU / 4 GiB
        // expected.
        let mut s = every_10s(60);
        s.instance_types = vec![
            // What the new pod alone needs.
            priced("g-s", 1000, 4 * GIB, 0.1),
            // Within four times that: a general-purpose 2 vCPU / 8 GiB, one more pod for
            // 0.1/h, and a compute 8 vCPU / 12 GiB, two more (its memory) for 0.3/h.
            priced("g-m", 2000, 8 * GIB, 0.2),
            priced("c-l", 8000, 12 * GIB, 0.4),
        ];
        let after = schedule(&s, &SchedulingOptions::default());
        let claim = &after.new_node_claims[0];
        assert_eq!(claim.launch.instance_type, "g-m");
    }

    /// Holding all of the missing room is no reason to pay more per unit for it: part of it in
    /// a type that fits the arrivals, the rest left to the next launch, costs less.
    #[test]
    fn growth_buys_part_of_the_room_cheaply_rather_than_all_of_it_dearly() {
        // One pod of 1 vCPU / 4 GiB every 10 s for a minute: the last 20 s (two pods) are
        // expected, and the new pod fills "g-s" alone.
        let mut s = every_10s(6);
        s.instance_types = vec![
            priced("g-s", 1000, 4 * GIB, 0.1),
            // One more pod for 0.1/h, or both for 0.3/h with 5 vCPU idle.
            priced("g-m", 2000, 8 * GIB, 0.2),
            priced("c-l", 8000, 12 * GIB, 0.4),
        ];
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (2000, 8 * GIB)
        );
        let after = schedule(&s, &SchedulingOptions::default());
        assert_eq!(after.new_node_claims[0].launch.instance_type, "g-m");
    }

    /// A launch for a GPU pod is grown for the CPU pods of the stream within its own GPU
    /// count: a larger GPU type holds the room too, but its extra GPUs are priced for pods that
    /// are not coming.
    #[test]
    fn growth_buys_no_accelerators() {
        const GPU: &str = "nvidia.com/gpu";
        let mut s = every_10s(60);
        let mut pods: Vec<Pod> = s.pods.iter().map(|p| (**p).clone()).collect();
        if let Some(c) = pods.last_mut().and_then(|p| p.containers.first_mut()) {
            c.extended.insert(GPU.into(), 1);
        }
        s.pods = Snapshot::shared_pods(pods);
        let gpus = |name: &str, n: i64, cpu: i64, price: f64| {
            let mut t = priced(name, cpu * 1000, cpu * 4 * GIB, price);
            t.capacity.extended.insert(GPU.into(), n);
            t
        };
        s.instance_types = vec![
            gpus("gpu-1", 1, 4, 0.75),
            // Within four times gpu-1's price, and room for the stream's CPU pods; for the
            // GPU pod alone it buys three idle GPUs.
            gpus("gpu-4", 4, 32, 2.9),
            // Room for the same pods at a CPU node's price: no GPU, so not an option here.
            priced("cpu-8", 8000, 32 * GIB, 0.4),
        ];
        assert!(missing_room(&s, &schedule(&s, &off()), &Anticipation::default()).0 > 0);
        let after = schedule(&s, &SchedulingOptions::default());
        let claim = &after.new_node_claims[0];
        assert_eq!(claim.launch.instance_type, "gpu-1", "{claim:?}");
    }

    /// Pods still pending on a node in flight arrived before this round's batch: they are the
    /// stream, not the batch.
    #[test]
    fn pods_waiting_for_a_node_in_flight_are_the_stream() {
        // A wave of one pod every 10 s began 90 s ago; its nine pods so far wait, pending, for
        // a node still launching that has room for them alone. The new pod needs a node.
        let mut s = trickle(0);
        let mut flight = Node::new(
            "flight",
            "zone-a",
            crate::model::Resources::with_pods(9000, 36 * GIB, 110),
        );
        flight.ready = false;
        flight.initialized = false;
        flight.in_flight = true;
        s.nodes.push(flight);
        let mut pods: Vec<Pod> = s.pods.iter().map(|p| (**p).clone()).collect();
        for i in 0..9 {
            let mut p = Pod::new("default", &format!("wave-{i}"), 1000, 4 * GIB);
            p.created_at = NOW - 90 + 10 * i;
            pods.push(p);
        }
        s.pods = Snapshot::shared_pods(pods);
        let after = schedule(&s, &SchedulingOptions::default());
        assert_eq!(after.new_node_claims.len(), 1);
        // The stream is 90 s old: the last 30 s (three pods) are expected, one fits beside the
        // new pod on "s", two are missing: "m".
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (2000, 8 * GIB)
        );
        assert_eq!(after.new_node_claims[0].launch.instance_type, "m");
    }

    /// A wave that stopped minutes before the batch is not a stream flowing into it; a stream
    /// reserves for a part of its age that grows with it.
    #[test]
    fn an_earlier_wave_is_not_the_stream() {
        // Ten pods within a second, ten minutes ago: the gap since then ends that stream.
        let wave: Vec<i64> = (0..10).map(|_| NOW - 600).collect();
        let s = arrived_at(&wave);
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (0, 0)
        );
        assert_eq!(
            schedule(&s, &SchedulingOptions::default()).new_node_claims,
            schedule(&s, &off()).new_node_claims
        );
        // Behind the gap, the old wave does not age a young stream: three pods in the last
        // minute are a stream of age 60 s, whose last 20 s (one pod) the new pod's "s" node
        // holds. Aged from the wave (850 s) all three would be expected, two of them missing.
        let mut times: Vec<i64> = (0..10).map(|_| NOW - 850).collect();
        times.extend([NOW - 60, NOW - 40, NOW - 20]);
        let s = arrived_at(&times);
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (0, 0)
        );
        // The same ten spread one a minute up to the batch: a 10-minute stream whose last
        // 200 s (three pods) are expected; the new pod's "s" node holds one.
        let s = trickle(10);
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (2000, 8 * GIB)
        );
        let k = Anticipation::default();
        assert_eq!(k.horizon_seconds(900), 300);
        assert_eq!(k.horizon_seconds(0), 0);
        let median = Anticipation {
            confidence: 0.5,
            ..Anticipation::default()
        };
        assert_eq!(median.horizon_seconds(600), 600);
        assert_eq!(median.horizon_seconds(5000), 900, "at most the window");
        let never = Anticipation {
            confidence: 1.0,
            ..Anticipation::default()
        };
        assert_eq!(never.horizon_seconds(900), 0);
    }

    /// A service of 2-vCPU, 8-GiB replicas that added one every 700 s for the last 3,500 s,
    /// each on a full node of its own, and its next replica pending now; with `others`, a
    /// 1-vCPU pod of another workload (a label set each) 350 s after each replica.
    fn slow_service(others: bool) -> Snapshot {
        let app = |p: &mut Pod, name: &str| {
            p.labels = [("app".to_string(), name.to_string())]
                .into_iter()
                .collect();
        };
        let mut nodes = Vec::new();
        let mut pods = Vec::new();
        let mut bound = |name: String, cpu: i64, created_at: i64, label: &str| {
            nodes.push(Node::new(
                &name,
                "zone-a",
                crate::model::Resources::with_pods(cpu, cpu * 4 * GIB / 1000, 110),
            ));
            let mut p = Pod::new("default", &name, cpu, cpu * 4 * GIB / 1000).on(&name);
            p.created_at = created_at;
            app(&mut p, label);
            pods.push(p);
        };
        for k in (1..=5).rev() {
            let t = NOW - 700 * k;
            bound(format!("slow-{k}"), 2000, t, "slow");
            if others {
                bound(format!("other-{k}"), 1000, t + 350, &format!("other-{k}"));
            }
        }
        let mut p = Pod::new("default", "slow-new", 2000, 8 * GIB);
        p.created_at = NOW;
        app(&mut p, "slow");
        pods.push(p);
        world(nodes, pods)
    }

    #[test]
    fn a_slow_service_is_a_stream_of_its_own() {
        let all_only = Anticipation {
            workload_lookback_seconds: 0,
            ..Anticipation::default()
        };
        for others in [false, true] {
            let s = slow_service(others);
            let base = schedule(&s, &off());
            assert_eq!(base.new_node_claims.len(), 1);
            assert_eq!(base.new_node_claims[0].launch.instance_type, "s");
            // Every gap between two arrivals is 350 s or more: the stream of all arrivals
            // ends at the first and holds nothing.
            assert_eq!(
                missing_room(&s, &base, &all_only),
                (0, 0),
                "others {others}"
            );
            // The service's own stream: gaps of 700 s, ended only by one of 1,400 s, so
            // 3,500 s old; its last 900 s (the horizon, at most the window) held one replica,
            // which the new replica's full "s" node cannot.
            assert_eq!(
                missing_room(&s, &base, &Anticipation::default()),
                (2000, 8 * GIB),
                "others {others}"
            );
            let grown = schedule(&s, &SchedulingOptions::default());
            assert_eq!(grown.new_node_claims[0].launch.instance_type, "m");
        }
        // Two earlier replicas are no rate to read.
        let mut s = slow_service(true);
        let keep: Vec<Pod> = s
            .pods
            .iter()
            .filter(|p| p.created_at >= NOW - 1400)
            .map(|p| (**p).clone())
            .collect();
        s.pods = Snapshot::shared_pods(keep);
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (0, 0)
        );
    }

    /// Free room the arrivals cannot use (a tainted node they do not tolerate, a node their
    /// selector does not match) does not hold them.
    #[test]
    fn room_the_arrivals_cannot_use_is_no_room() {
        let grown = |s: &Snapshot| {
            schedule(s, &SchedulingOptions::default()).new_node_claims[0]
                .launch
                .instance_type
                .clone()
        };
        let idle = |taints: Vec<crate::model::Taint>, label: (&str, &str)| {
            let mut n = Node::new(
                "idle",
                "zone-a",
                crate::model::Resources::with_pods(16_000, 64 * GIB, 110),
            );
            n.taints = taints;
            n.labels.insert(label.0.into(), label.1.into());
            n
        };
        let taint = crate::model::Taint {
            key: "dedicated".into(),
            value: Some("gpu".into()),
            effect: crate::model::TaintEffect::NoSchedule,
        };
        // An idle node open to all holds the new pod and the three expected ones.
        let mut s = trickle(9);
        s.nodes.push(idle(Vec::new(), ("pool", "web")));
        assert!(
            schedule(&s, &SchedulingOptions::default())
                .new_node_claims
                .is_empty()
        );
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (0, 0)
        );
        // Tainted, it does not: grown as without it ("m", the flowing trickle above).
        let mut s = trickle(9);
        s.nodes.push(idle(vec![taint.clone()], ("pool", "web")));
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (2000, 8 * GIB)
        );
        assert_eq!(grown(&s), "m");
        // Arrivals that tolerate the taint use it.
        let tolerate = |s: &mut Snapshot| {
            let pods: Vec<Pod> = s
                .pods
                .iter()
                .map(|p| {
                    let mut p = (**p).clone();
                    p.tolerations.push(crate::model::Toleration {
                        key: Some("dedicated".into()),
                        operator: crate::model::TolerationOperator::Exists,
                        value: None,
                        effect: None,
                    });
                    p
                })
                .collect();
            s.pods = Snapshot::shared_pods(pods);
        };
        tolerate(&mut s);
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (0, 0)
        );
        // Arrivals selecting another pool's nodes do not: grown as without it (the NodePool's
        // new nodes carry `pool: web`).
        let mut s = trickle(9);
        s.nodes.push(idle(Vec::new(), ("pool", "batch")));
        s.nodepools[0].labels.insert("pool".into(), "web".into());
        let pods: Vec<Pod> = s
            .pods
            .iter()
            .map(|p| {
                let mut p = (**p).clone();
                p.node_selector.insert("pool".into(), "web".into());
                p
            })
            .collect();
        s.pods = Snapshot::shared_pods(pods);
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (2000, 8 * GIB)
        );
        assert_eq!(grown(&s), "m");
    }

    #[test]
    fn a_one_off_burst_is_sized_for_itself() {
        // Nothing arrived before the batch: no growth, whatever its size.
        let mut s = trickle(0);
        for i in 0..5 {
            let mut p = Pod::new("default", &format!("burst-{i}"), 1000, 4 * GIB);
            p.created_at = NOW;
            s.pods.push(std::sync::Arc::new(p));
        }
        let before = schedule(&s, &off());
        let after = schedule(&s, &SchedulingOptions::default());
        assert_eq!(before.new_node_claims, after.new_node_claims);
    }

    #[test]
    fn the_karpenter_baseline_never_anticipates() {
        let s = trickle(9);
        let k = SchedulingOptions {
            strategy: Strategy::KarpenterBaseline,
            ..SchedulingOptions::default()
        };
        let k_off = SchedulingOptions {
            anticipation: None,
            ..k.clone()
        };
        assert_eq!(
            schedule(&s, &k).new_node_claims,
            schedule(&s, &k_off).new_node_claims
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Growth only ever adds room, stays within the price factor, keeps the launch among
        /// the options and the pods on it, and never changes where pods go.
        #[test]
        fn growth_is_bounded_and_keeps_every_pod(
            earlier in 0usize..8,
            batch in proptest::collection::vec((250i64..4000, 1i64..12), 1..5),
            factor in 1.0f64..4.0,
        ) {
            let mut s = trickle(earlier);
            for (i, (cpu, mem)) in batch.iter().enumerate() {
                let mut p = Pod::new("default", &format!("b-{i}"), *cpu, mem * GIB / 2);
                p.created_at = NOW;
                s.pods.push(std::sync::Arc::new(p));
            }
            let knobs = Anticipation { window_seconds: 90, max_price_factor: factor, ..Anticipation::default() };
            let before = schedule(&s, &off());
            let after = schedule(&s, &SchedulingOptions { anticipation: Some(knobs), ..SchedulingOptions::default() });
            prop_assert_eq!(before.new_node_claims.len(), after.new_node_claims.len());
            prop_assert_eq!(&before.existing_placements, &after.existing_placements);
            for (b, a) in before.new_node_claims.iter().zip(&after.new_node_claims) {
                prop_assert_eq!(&b.pods, &a.pods);
                prop_assert!(a.launch.price <= b.launch.price * factor + 1e-9);
                prop_assert!(a.launch.price >= b.launch.price - 1e-9);
                let Some(o) = a.instance_type_options.iter().find(|o| o.instance_type == a.launch.instance_type) else {
                    return Err(TestCaseError::fail("launch not among the options"));
                };
                prop_assert!(a.pod_requests.fits_in(&o.allocatable_for_pods));
                prop_assert!(a.instance_type_options.iter().all(|x| x.allocatable_for_pods.cpu_milli >= o.allocatable_for_pods.cpu_milli));
            }
            if earlier == 0 {
                prop_assert_eq!(&before.new_node_claims, &after.new_node_claims);
            }
        }
    }
}
