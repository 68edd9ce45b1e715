//! Anticipation: provisioning sizes new nodes for the arrivals that are still coming.
//!
//! Pods often arrive as a trickle (a scale-up adding replicas every few seconds, jobs
//! submitted one by one), each in its own provisioning batch. Sized for its batch alone, every
//! new node holds one or two pods: the cluster becomes many small nodes, each with a
//! daemonset's and the kubelet's overhead, that later consolidation can only merge by evicting
//! pods that just started (which the payback rule, [`crate::disruption::payback`], rightly
//! refuses). Karpenter merges them minutes later, at the price of those evictions.
//!
//! Here the arrivals of the last `window_seconds` **before** the current batch estimate the
//! arrivals of the next `window_seconds` (15 minutes by default: a stream that has flowed
//! for a while is expected to flow about as long again, the payback rule's Lindy argument
//! applied to arrivals; a node's 90 s to ready was measured to be far too short). When that
//! estimate exceeds the free room the cluster will have after this round (ready and in-flight
//! nodes, the new nodes' slack), each new NodeClaim is grown, in order, to the cheapest of its
//! own instance-type options that also holds the missing room, at most `max_price_factor`
//! times its price; its options are narrowed to types at least that large, so whatever the
//! provider launches has the room. The pods of the batch itself never count: a one-off burst
//! (a deployment created with all its replicas) has no arrivals before it and is sized as
//! before; only a stream that is already flowing reserves room.
//!
//! Evictions are netted out: a workload replaces an evicted pod with a new pod, which would
//! otherwise count as an arrival ([`crate::model::Snapshot::recent_evictions`]).
//!
//! The cost: a node a little larger than its pods for up to a window, and a bigger node left
//! when the expected arrivals do not come (consolidation then replaces it like any other).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::disruption::candidates::is_daemon;
use crate::model::{LabelSelector, Pod, Snapshot, labels};
use crate::requirements::{Requirements, ValueSet};
use crate::resources::pod_requests;
use crate::result::SchedulingResult;

/// Knobs of the anticipation rule ([`crate::SchedulingOptions::anticipation`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Anticipation {
    /// The arrivals of this many seconds before the batch estimate those of as many after it.
    pub window_seconds: i64,
    /// A grown node costs at most this many times the node its batch alone needs.
    pub max_price_factor: f64,
}

impl Default for Anticipation {
    fn default() -> Self {
        // Measured on the `mixed` family (docs/simulator.md): 90 s / 2x closed a tenth of
        // the gap to Karpenter, 900 s / 4x most of it; 1,800 s overshoots on some seeds.
        Anticipation {
            window_seconds: 900,
            max_price_factor: 4.0,
        }
    }
}

/// CPU (millicores) and memory (bytes): what growing a launch adds.
pub type Room = (i64, i64);

/// The room the next arrivals need beyond what the cluster has after `result`: arrivals in the
/// window before the oldest pending pod, less free room (negative parts are 0).
pub fn missing_room(snapshot: &Snapshot, result: &SchedulingResult, knobs: &Anticipation) -> Room {
    let pending = |p: &crate::model::Pod| p.node_name.is_none() && !is_daemon(p);
    let Some(batch_start) = snapshot
        .pods
        .iter()
        .filter(|p| pending(p))
        .map(|p| p.created_at)
        .min()
    else {
        return (0, 0);
    };
    let from = batch_start - knobs.window_seconds.max(0);
    let mut expected: Room = (0, 0);
    // Pods that repel their own kind per node take one node each: the next of them cannot use
    // room grown on this round's nodes beyond one pod (a rolling update of such a deployment
    // grew a 4-vCPU pod's node to 32 vCPU that its successors could never share). Each such
    // group counts once, as its largest member.
    let mut one_per_node: HashMap<(&str, &LabelSelector), Room> = HashMap::new();
    for p in snapshot.pods.iter().filter(|p| !is_daemon(p)) {
        if p.created_at >= from && p.created_at < batch_start {
            let r = pod_requests(p);
            match own_hostname_anti_affinity(p) {
                Some(sel) => {
                    let e = one_per_node
                        .entry((p.namespace.as_str(), sel))
                        .or_insert((0, 0));
                    e.0 = e.0.max(r.cpu_milli);
                    e.1 = e.1.max(r.memory);
                }
                None => {
                    expected.0 += r.cpu_milli;
                    expected.1 += r.memory;
                }
            }
        }
    }
    for (cpu, mem) in one_per_node.into_values() {
        expected.0 += cpu;
        expected.1 += mem;
    }
    // A replacement for an evicted pod is a new pod created at the eviction, not new demand:
    // without this, each consolidation's moved pods grew the next launches for 15 minutes.
    for e in snapshot
        .recent_evictions
        .iter()
        .filter(|e| e.at >= from && e.at < batch_start)
    {
        expected.0 -= e.cpu_milli;
        expected.1 -= e.memory;
    }
    // Nominated pods count as pending, so the in-flight nodes' room is counted once.
    let (free, pending) = crate::disruption::headroom::free_and_pending(snapshot);
    let mut have: Room = (free.cpu_milli, free.memory);
    let pending_req: Room = (pending.cpu_milli, pending.memory);
    for c in &result.new_node_claims {
        if let Some(o) = c
            .instance_type_options
            .iter()
            .find(|o| o.instance_type == c.launch.instance_type)
        {
            have.0 += o.allocatable_for_pods.cpu_milli;
            have.1 += o.allocatable_for_pods.memory;
        }
    }
    // Pending pods nothing can hold make this negative; no arrivals must mean no growth.
    have.0 = (have.0 - pending_req.0).max(0);
    have.1 = (have.1 - pending_req.1).max(0);
    ((expected.0 - have.0).max(0), (expected.1 - have.1).max(0))
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
        // pods' constraints (spread, zonal affinity), which growth must not undo.
        let mut larger: Vec<&crate::result::InstanceTypeOption> = c
            .instance_type_options
            .iter()
            .filter(|o| {
                o.cheapest.price <= cap
                    && o.cheapest.zone == c.launch.zone
                    && o.cheapest.capacity_type == c.launch.capacity_type
                    && o.allocatable_for_pods.cpu_milli >= base.cpu_milli
                    && o.allocatable_for_pods.memory >= base.memory
            })
            .collect();
        larger.sort_by(|a, b| {
            a.cheapest
                .price
                .total_cmp(&b.cheapest.price)
                .then(a.instance_type.cmp(&b.instance_type))
        });
        // The cheapest that covers the missing room; else the one covering the largest part
        // of it, cheapest first on ties. The arrivals need CPU and memory together, so the
        // part covered is the smaller of the two fractions: counting their sum, a 4x memory-
        // heavy type (a fifth of the CPU missing, most of the memory) beat a balanced one
        // (two fifths of each), and the CPU-bound arrivals left its memory idle
        // (docs/simulator.md, round 24).
        let covers = |o: &&crate::result::InstanceTypeOption| {
            let (x, y) = extra(o);
            x >= cpu && y >= mem
        };
        let score = |o: &crate::result::InstanceTypeOption| {
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
        let pick = larger.iter().copied().find(|o| covers(o)).or_else(|| {
            larger.iter().copied().filter(|o| score(o) > 0.0).fold(
                None,
                |best: Option<&crate::result::InstanceTypeOption>, o| match best {
                    Some(b) if score(b) >= score(o) => Some(b),
                    _ => Some(o),
                },
            )
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

    /// A replica trickle: `earlier` pods of 1 vCPU / 4 GiB created in the last minute, each
    /// bound to its own full node, and one pending pod created now.
    fn trickle(earlier: usize) -> Snapshot {
        let mut nodes = Vec::new();
        let mut pods = Vec::new();
        for i in 0..earlier {
            let name = format!("n{i}");
            nodes.push(Node::new(
                &name,
                "zone-a",
                crate::model::Resources::with_pods(1000, 4 * GIB, 110),
            ));
            let mut p = Pod::new("default", &format!("web-{i}"), 1000, 4 * GIB).on(&name);
            p.created_at = NOW - 60 + i as i64;
            pods.push(p);
        }
        let mut p = Pod::new("default", "web-new", 1000, 4 * GIB);
        p.created_at = NOW;
        pods.push(p);
        Snapshot {
            now: NOW,
            nodes,
            pods: Snapshot::shared_pods(pods),
            nodepools: vec![NodePool::new("default", 0)],
            instance_types: types(),
            ..Snapshot::default()
        }
    }

    fn off() -> SchedulingOptions {
        SchedulingOptions {
            anticipation: None,
            ..SchedulingOptions::default()
        }
    }

    #[test]
    fn a_flowing_trickle_gets_a_node_with_room_for_what_follows() {
        let s = trickle(3);
        let before = schedule(&s, &off());
        assert_eq!(before.new_node_claims.len(), 1);
        assert_eq!(before.new_node_claims[0].launch.instance_type, "s");
        let after = schedule(&s, &SchedulingOptions::default());
        let claim = &after.new_node_claims[0];
        // Three pods (3 vCPU, 12 GiB) arrived in the window before; the new pod's "s" node
        // leaves 1 vCPU free, 2 short: grown to "m" (0.2/h, within four times 0.1/h), the
        // cheapest option that covers them.
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
        let mut s = trickle(3);
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
        let plain = schedule(&trickle(3), &SchedulingOptions::default());
        assert_eq!(plain.new_node_claims[0].launch.instance_type, "m");
    }

    /// Pods that replaced evicted ones are moves, not arrivals: a consolidation that moved
    /// three pods a minute ago does not grow the next launch.
    #[test]
    fn replacements_of_evicted_pods_are_not_a_stream() {
        let mut s = trickle(3);
        s.recent_evictions = (0..3)
            .map(|i| crate::model::Eviction {
                at: NOW - 61 + i,
                cpu_milli: 1000,
                memory: 4 * GIB,
            })
            .collect();
        let after = schedule(&s, &SchedulingOptions::default());
        assert_eq!(after.new_node_claims[0].launch.instance_type, "s");
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (0, 0)
        );
        // Evictions older than the window, or after the batch began (their replacements are
        // in the batch itself), do not cancel the trickle.
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
        for e in &mut s.recent_evictions {
            e.at = NOW - 30;
        }
        assert_eq!(
            missing_room(&s, &schedule(&s, &off()), &Anticipation::default()),
            (0, 0)
        );
    }

    /// When no option within the price cap holds all the expected arrivals, the one holding
    /// the largest part of them in both CPU and memory is taken, not one with plenty of the
    /// cheaper resource alone.
    #[test]
    fn growth_short_of_the_missing_room_keeps_its_shape() {
        let mut s = trickle(20);
        // 2 GiB per vCPU arrivals: 20 earlier pods of 1 vCPU / 2 GiB, and the new one.
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
        let offer = |price: f64| vec![Offering::new("zone-a", CapacityType::OnDemand, price)];
        s.instance_types = vec![
            // What the new pod alone needs.
            InstanceType::new("c-s", 2000, 4 * GIB, 110, offer(0.1)),
            // Within four times that: a balanced 8 vCPU / 16 GiB and a memory-heavy 4 vCPU /
            // 64 GiB. Neither holds the 20 pods expected.
            InstanceType::new("c-l", 8000, 16 * GIB, 110, offer(0.4)),
            InstanceType::new("m-l", 4000, 64 * GIB, 110, offer(0.38)),
        ];
        let after = schedule(&s, &SchedulingOptions::default());
        let claim = &after.new_node_claims[0];
        // c-l holds 6 more such pods; m-l holds 2 (its CPU), though it covers all the memory.
        assert_eq!(claim.launch.instance_type, "c-l");
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
        let s = trickle(3);
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
            let knobs = Anticipation { window_seconds: 90, max_price_factor: factor };
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
