//! Plans that survive the kube-scheduler's queue.
//!
//! A provisioning round plans which new node each pending pod goes to, but nothing tells the
//! kube-scheduler (neither Karpenter nor this project writes `status.nominatedNodeName`, and
//! Kubernetes 1.35 clears a nomination the scheduler cannot use yet). When the round's nodes
//! come up, one by one and in no fixed order, the first node that is ready takes the pods at
//! the head of the scheduler's queue (priority, then age) that fit it, planned for it or not.
//! A dense plan then leaves pods whose room others took: they wait for another round, a
//! launch and a registration later (the `karpenter-benchmark` family's p95 pending time under
//! the simulator's realistic model, docs/simulator.md round 41).
//!
//! Here the round's new nodes are brought up in the plan's order (with more orders: its
//! reverse, then pseudo-random ones, the worst counting), each taking in turn the queue's pods
//! that fit with every constraint the core knows (first fit, the core's own filter); the pods
//! left without room get nodes of their own in the same round, planned with the round's other
//! pods counted where the plan put them. Counted only where they are bound (as the
//! kube-scheduler counts), a zone spread's stranded share was spread afresh over every zone,
//! and its siblings in the zones that already had their share could not bind until the
//! stranded zone's nodes were ready (docs/simulator.md, rounds 44-46). The cost: nodes the plan did
//! not need when the order is kind, which consolidation removes like any other; what it buys
//! is the second round's wait. The worst of three orders (round 41) padded for the unkindest
//! order: over the simulator's 57 workloads the plan's order alone was 0.3 points cheaper
//! with no worse pending time once young clusters were repacked (round 58).
//!
//! Off where the scheduler follows the plan (the simulator's `planned` placement), and where a
//! round is too large for the check to be cheap ([`QueueShuffle::max_pod_nodes`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::model::{Node, Pod, Snapshot, labels};
use crate::result::{NewNodeClaim, SchedulingResult};
use crate::scheduler::{SchedulingOptions, schedule_capped, schedule_on};
use crate::state::ClusterState;

/// Knobs of the queue check ([`SchedulingOptions::queue_shuffle`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueueShuffle {
    /// Orders the new nodes are brought up in: the plan's, its reverse, then pseudo-random
    /// ones. The pods left over in the worst get nodes. One by default (module doc).
    pub orders: usize,
    /// The check is skipped when the round's pods times its new nodes exceed this: each pod is
    /// placed by a first fit over the new nodes, once per order.
    pub max_pod_nodes: u64,
}

impl Default for QueueShuffle {
    fn default() -> Self {
        QueueShuffle {
            orders: 1,
            max_pod_nodes: 2_000_000,
        }
    }
}

/// Adds to `result` the nodes its pods need when the kube-scheduler, not the plan, places
/// them; the pods moved to the added nodes leave the claims they were planned for.
pub fn pad(
    snapshot: &Snapshot,
    result: &mut SchedulingResult,
    options: &SchedulingOptions,
    knobs: &QueueShuffle,
) {
    let k = result.new_node_claims.len();
    let by_ref: HashMap<(&str, &str), &Pod> = snapshot
        .pods
        .iter()
        .map(|p| ((p.namespace.as_str(), p.name.as_str()), &**p))
        .collect();
    let mut queue: Vec<&Pod> = result
        .new_node_claims
        .iter()
        .flat_map(|c| c.pods.iter())
        .filter_map(|r| {
            by_ref
                .get(&(r.namespace.as_str(), r.name.as_str()))
                .copied()
        })
        .collect();
    if k < 2
        || knobs.orders == 0
        || (queue.len() as u64).saturating_mul(k as u64) > knobs.max_pod_nodes
    {
        return;
    }
    // The kube-scheduler's active queue: priority, then age.
    queue.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.created_at.cmp(&b.created_at))
            .then_with(|| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)))
    });
    let placed_existing = result.existing_nodes_by_pod();
    let mut worst: Vec<&Pod> = Vec::new();
    for round in 0..knobs.orders {
        let left = left_over(
            snapshot,
            &placed_existing,
            &result.new_node_claims,
            &bring_up_order(k, round),
            &queue,
            options,
        );
        if left.len() > worst.len() {
            worst = left;
        }
    }
    if worst.is_empty() {
        return;
    }
    let extra = plan_stranded(
        snapshot,
        &placed_existing,
        &result.new_node_claims,
        &worst,
        options,
    );
    let moved: HashSet<(&str, &str)> = extra
        .existing_placements
        .iter()
        .map(|p| &p.pod)
        .chain(extra.new_node_claims.iter().flat_map(|c| c.pods.iter()))
        .map(|r| (r.namespace.as_str(), r.name.as_str()))
        .collect();
    for claim in &mut result.new_node_claims {
        let before = claim.pods.len();
        claim
            .pods
            .retain(|r| !moved.contains(&(r.namespace.as_str(), r.name.as_str())));
        if claim.pods.len() != before {
            claim.pod_requests = claim
                .pods
                .iter()
                .filter_map(|r| by_ref.get(&(r.namespace.as_str(), r.name.as_str())))
                .map(|p| crate::resources::pod_requests(p))
                .fold(crate::model::Resources::default(), |acc, r| acc.add(&r));
        }
    }
    let mut names: HashSet<String> = result
        .new_node_claims
        .iter()
        .map(|c| c.name.clone())
        .collect();
    let mut next = k;
    for mut claim in extra.new_node_claims {
        while names.contains(&format!("{}-new-{next}", claim.nodepool)) {
            next += 1;
        }
        claim.name = format!("{}-new-{next}", claim.nodepool);
        names.insert(claim.name.clone());
        result.new_node_cost_per_hour += claim.launch.price;
        result.new_node_claims.push(claim);
    }
    result.existing_placements.extend(extra.existing_placements);
    let order = match knobs.orders {
        1 => "the plan's order".to_string(),
        n => format!("the worst of {n} orders"),
    };
    result.planner_notes.push(format!(
        "{} of {} pods would find no room if the scheduler's queue met the new nodes in {order}; planned on their own",
        worst.len(),
        queue.len(),
    ));
}

/// A taint no pod is expected to tolerate, on the round's planned nodes while the stranded
/// pods are planned: their pods count (a spread's `nodeTaintsPolicy` ignores taints by
/// default) but their room is not offered, since in the order that stranded the pods others
/// took it.
const PLANNED_TAINT: &str = "karpenter-capi.internal/queue-check-planned";

/// Plans the pods the worst order stranded, with the round's other pods counted where the plan
/// put them: a zone spread's stranded share then goes to the zone that lacks it rather than
/// being spread afresh over zones that already have their share.
fn plan_stranded(
    snapshot: &Snapshot,
    placed_existing: &HashMap<(&str, &str), &str>,
    claims: &[NewNodeClaim],
    stranded: &[&Pod],
    options: &SchedulingOptions,
) -> SchedulingResult {
    let stranded_refs: HashSet<(&str, &str)> = stranded
        .iter()
        .map(|p| (p.namespace.as_str(), p.name.as_str()))
        .collect();
    let mut up = snapshot.clone();
    let mut on: HashMap<(&str, &str), String> = HashMap::new();
    for (pos, claim) in claims.iter().enumerate() {
        let Some(mut node) = node_of(snapshot, claim, pos) else {
            continue;
        };
        node.taints.push(crate::model::Taint {
            key: PLANNED_TAINT.into(),
            value: None,
            effect: crate::model::TaintEffect::NoSchedule,
        });
        for r in &claim.pods {
            let key = (r.namespace.as_str(), r.name.as_str());
            if !stranded_refs.contains(&key) {
                on.insert(key, node.name.clone());
            }
        }
        up.nodes.push(node);
    }
    bind(&mut up, |key| {
        on.get(&key)
            .cloned()
            .or_else(|| placed_existing.get(&key).map(|n| (*n).to_string()))
    });
    let mut state = ClusterState::from_shared(Arc::new(up));
    schedule_on(&mut state, stranded, options)
}

/// Binds each pod of `snapshot` that `node_for` names a node for, by (namespace, name).
fn bind(snapshot: &mut Snapshot, node_for: impl Fn((&str, &str)) -> Option<String>) {
    for p in snapshot.pods.iter_mut() {
        if let Some(n) = node_for((p.namespace.as_str(), p.name.as_str())) {
            Arc::make_mut(p).node_name = Some(n);
        }
    }
}

/// The `round`-th order of bringing up `k` nodes: the plan's, its reverse, then xorshift
/// permutations (fixed, so decisions stay deterministic).
fn bring_up_order(k: usize, round: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..k).collect();
    match round {
        0 => {}
        1 => order.reverse(),
        _ => {
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ ((round as u64) << 32) ^ k as u64;
            for i in (1..k).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                order.swap(i, (x % (i as u64 + 1)) as usize);
            }
        }
    }
    order
}

/// The pods of `queue` that find no room when the claims' nodes come up in `order` and each
/// takes, in queue order, the pods that fit it (first fit over the nodes up so far, existing
/// nodes included: the core's placement on existing nodes with the new ones added as
/// existing, named so that they sort in `order`).
fn left_over<'p>(
    snapshot: &Snapshot,
    placed_existing: &HashMap<(&str, &str), &str>,
    claims: &[NewNodeClaim],
    order: &[usize],
    queue: &[&'p Pod],
    options: &SchedulingOptions,
) -> Vec<&'p Pod> {
    let mut up = snapshot.clone();
    bind(&mut up, |key| {
        placed_existing.get(&key).map(|n| (*n).to_string())
    });
    for (pos, &ci) in order.iter().enumerate() {
        if let Some(node) = node_of(snapshot, &claims[ci], pos) {
            up.nodes.push(node);
        }
    }
    let mut state = ClusterState::from_shared(Arc::new(up));
    let planner = options.strategy.planner();
    // A price cap of 0: a pod that fits no node up costs no NodeClaim built for it.
    queue
        .iter()
        .copied()
        .filter(|pod| {
            schedule_capped(&mut state, &[*pod], options, planner, Some(0.0))
                .existing_placements
                .is_empty()
        })
        .collect()
}

/// The node a claim launches as, ready, named to sort at position `pos`.
fn node_of(snapshot: &Snapshot, claim: &NewNodeClaim, pos: usize) -> Option<Node> {
    let option = claim
        .instance_type_options
        .iter()
        .find(|o| o.instance_type == claim.launch.instance_type)?;
    let name = format!("~queue-check-{pos:06}");
    let mut node_labels = BTreeMap::new();
    let mut taints = Vec::new();
    if let Some(it) = snapshot
        .instance_types
        .iter()
        .find(|t| t.name == claim.launch.instance_type)
    {
        node_labels.extend(it.labels.clone());
        taints.extend(it.taints.iter().cloned());
    }
    if let Some(pool) = snapshot.nodepools.iter().find(|p| p.name == claim.nodepool) {
        node_labels.extend(pool.labels.clone());
        taints.extend(pool.taints.iter().cloned());
    }
    node_labels.insert(labels::NODEPOOL.into(), claim.nodepool.clone());
    node_labels.insert(
        labels::INSTANCE_TYPE.into(),
        claim.launch.instance_type.clone(),
    );
    node_labels.insert(labels::ZONE.into(), claim.launch.zone.clone());
    node_labels.insert(
        labels::CAPACITY_TYPE.into(),
        claim.launch.capacity_type.as_label().into(),
    );
    node_labels.insert(labels::HOSTNAME.into(), name.clone());
    Some(Node {
        name,
        labels: node_labels,
        taints,
        // Net of the daemonsets that will land on it, which the check does not place.
        allocatable: option.allocatable_for_pods.clone(),
        capacity: option.allocatable_for_pods.clone(),
        nodepool: Some(claim.nodepool.clone()),
        instance_type: Some(claim.launch.instance_type.clone()),
        price: claim.launch.price,
        ready: true,
        initialized: true,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CapacityType, InstanceType, NodePool, Offering};
    use crate::scheduler::schedule;
    use proptest::prelude::*;

    const GIB: i64 = 1 << 30;

    /// 2-, 4- and 8-vCPU types at 0.1, 0.2 and 0.5/h, 2 GiB per vCPU, one zone.
    fn snapshot(pods: Vec<Pod>) -> Snapshot {
        Snapshot {
            now: 1_000,
            pods: Snapshot::shared_pods(pods),
            nodepools: vec![NodePool::new("default", 0)],
            instance_types: [("small", 2, 0.1), ("medium", 4, 0.2), ("large", 8, 0.5)]
                .iter()
                .map(|(name, cpu, price)| {
                    InstanceType::new(
                        name,
                        cpu * 1000,
                        cpu * 2 * GIB,
                        110,
                        vec![Offering::new("zone-a", CapacityType::OnDemand, *price)],
                    )
                })
                .collect(),
            ..Snapshot::default()
        }
    }

    fn pod(name: &str, cpu: i64, created_at: i64) -> Pod {
        let mut p = Pod::new("default", name, cpu, cpu * GIB / 1000);
        p.created_at = created_at;
        p
    }

    fn options(queue_shuffle: Option<QueueShuffle>) -> SchedulingOptions {
        SchedulingOptions {
            queue_shuffle,
            anticipation: None,
            large_rounds: None,
            ..SchedulingOptions::default()
        }
    }

    /// Where each pod is listed: `(pod, claim or node)`, sorted.
    fn listed(r: &SchedulingResult) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = r
            .new_node_claims
            .iter()
            .flat_map(|c| c.pods.iter().map(|p| (p.name.clone(), c.name.clone())))
            .chain(
                r.existing_placements
                    .iter()
                    .map(|p| (p.pod.name.clone(), p.node.clone())),
            )
            .collect();
        out.sort();
        out
    }

    /// The plan is two 4-vCPU nodes, each for a 3-vCPU and a 1-vCPU pod. The 1-vCPU pods are
    /// first in the scheduler's queue (oldest): the first node up takes both, the second one
    /// 3-vCPU pod, and the other fits nowhere. So it gets a node of its own.
    #[test]
    fn a_pod_whose_room_the_queue_takes_gets_a_node_of_its_own() {
        let s = snapshot(vec![
            pod("one-a", 1000, 0),
            pod("one-b", 1000, 1),
            pod("three-a", 3000, 2),
            pod("three-b", 3000, 3),
        ]);
        let plain = schedule(&s, &options(None));
        assert_eq!(plain.new_node_claims.len(), 2, "{:?}", listed(&plain));
        assert!((plain.new_node_cost_per_hour - 0.4).abs() < 1e-9);

        let padded = schedule(&s, &options(Some(QueueShuffle::default())));
        assert_eq!(padded.new_node_claims.len(), 3, "{:?}", listed(&padded));
        let own = padded
            .new_node_claims
            .iter()
            .find(|c| c.pods.len() == 1 && c.pods[0].name.starts_with("three"))
            .expect("a 3-vCPU pod on a node of its own");
        assert_eq!(own.pod_requests.cpu_milli, 3000);
        // Every pod listed once; the claim `b` left no longer counts it.
        let names: Vec<String> = listed(&padded).into_iter().map(|(p, _)| p).collect();
        assert_eq!(names, vec!["one-a", "one-b", "three-a", "three-b"]);
        let mut claim_names: Vec<&str> = padded
            .new_node_claims
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        claim_names.sort_unstable();
        claim_names.dedup();
        assert_eq!(claim_names.len(), 3);
        assert!((padded.new_node_cost_per_hour - 0.6).abs() < 1e-9);
        assert!(
            padded
                .planner_notes
                .iter()
                .any(|n| n.contains("1 of 4 pods"))
        );

        // The 3-vCPU pods first in the queue: each node up takes one of them and a 1-vCPU
        // pod, and nothing is added. A round too large for the check is left as planned.
        let kind = snapshot(vec![
            pod("three-a", 3000, 0),
            pod("three-b", 3000, 1),
            pod("one-a", 1000, 2),
            pod("one-b", 1000, 3),
        ]);
        assert_eq!(
            schedule(&kind, &options(Some(QueueShuffle::default())))
                .new_node_claims
                .len(),
            2
        );
        let capped = QueueShuffle {
            max_pod_nodes: 5,
            ..QueueShuffle::default()
        };
        assert_eq!(
            schedule(&s, &options(Some(capped))).new_node_claims.len(),
            2
        );
    }

    /// Six 3-vCPU pods of a zone spread (`maxSkew 1`) over three equally priced zones: the
    /// plan is two 4-vCPU nodes per zone. When the queue strands the two planned in `zone-c`,
    /// their new nodes go to `zone-c`, the zone the spread lacks once the round's other pods
    /// count. Counted only where pods are bound, as before, the two were spread afresh and
    /// went to `zone-a` and `zone-b`, where the kube-scheduler refuses them until `zone-c`
    /// catches up.
    #[test]
    fn a_zone_spreads_stranded_share_goes_back_to_its_zone() {
        use crate::model::{LabelSelector, TopologySpreadConstraint, WhenUnsatisfiable};
        let spread = TopologySpreadConstraint {
            max_skew: 1,
            topology_key: labels::ZONE.to_string(),
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            label_selector: LabelSelector {
                match_labels: {
                    let mut m = crate::model::Labels::new();
                    m.insert("app".to_string(), "web".to_string());
                    m
                },
                match_expressions: Vec::new(),
            },
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: Vec::new(),
        };
        let mut pods: Vec<Pod> = (0..6)
            .map(|i| {
                let mut p = pod(&format!("web-{i}"), 3000, i).label("app", "web");
                p.topology_spread = vec![spread.clone()];
                p
            })
            .collect();
        // Unconstrained and small enough for the 1 vCPU a planned node has left: stranded
        // too, it shows whether the planned nodes' room is offered.
        pods.push(pod("tiny", 500, 10));
        let mut s = snapshot(pods);
        s.instance_types = vec![InstanceType::new(
            "medium",
            4000,
            8 * GIB,
            110,
            ["zone-a", "zone-b", "zone-c"]
                .iter()
                .map(|z| Offering::new(z, CapacityType::OnDemand, 0.2))
                .collect(),
        )];
        let opts = options(None);
        let plan = schedule(&s, &opts);
        let zones = |claims: &[NewNodeClaim]| {
            let mut z: Vec<String> = claims.iter().map(|c| c.launch.zone.clone()).collect();
            z.sort();
            z
        };
        assert_eq!(
            zones(&plan.new_node_claims),
            ["zone-a", "zone-a", "zone-b", "zone-b", "zone-c", "zone-c"]
        );
        let stranded_names: HashSet<&str> = plan
            .new_node_claims
            .iter()
            .filter(|c| c.launch.zone == "zone-c")
            .flat_map(|c| c.pods.iter().map(|r| r.name.as_str()))
            .filter(|n| n.starts_with("web"))
            .chain(["tiny"])
            .collect();
        let stranded: Vec<&Pod> = s
            .pods
            .iter()
            .map(|p| &**p)
            .filter(|p| stranded_names.contains(p.name.as_str()))
            .collect();
        assert_eq!(stranded.len(), 3);

        let extra = plan_stranded(&s, &HashMap::new(), &plan.new_node_claims, &stranded, &opts);
        assert!(
            extra.existing_placements.is_empty(),
            "the planned nodes' room is not offered"
        );
        let web = |claims: &[NewNodeClaim]| {
            let with_web: Vec<NewNodeClaim> = claims
                .iter()
                .filter(|c| c.pods.iter().any(|r| r.name.starts_with("web")))
                .cloned()
                .collect();
            zones(&with_web)
        };
        assert_eq!(web(&extra.new_node_claims), ["zone-c", "zone-c"]);

        let fresh = schedule_on(&mut ClusterState::new(&s), &stranded, &opts);
        assert_ne!(web(&fresh.new_node_claims), ["zone-c", "zone-c"]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Whatever the round, the check only adds: the same pods are placed, each listed
        /// once, every claim's requests are its pods', and the round costs no less.
        #[test]
        fn the_check_places_the_same_pods_once_each(
            cpus in proptest::collection::vec(100i64..7_900, 1..40),
            orders in 0usize..5,
        ) {
            let pods = cpus
                .iter()
                .enumerate()
                .map(|(i, c)| pod(&format!("p{i:02}"), *c, (i as i64 * 7919) % 97))
                .collect();
            let s = snapshot(pods);
            let plain = schedule(&s, &options(None));
            let padded = schedule(&s, &options(Some(QueueShuffle { orders, ..QueueShuffle::default() })));
            let names = |r: &SchedulingResult| {
                let mut v: Vec<String> = listed(r).into_iter().map(|(p, _)| p).collect();
                v.dedup();
                v
            };
            prop_assert_eq!(listed(&padded).len(), names(&padded).len());
            prop_assert_eq!(names(&plain), names(&padded));
            prop_assert!(padded.new_node_cost_per_hour >= plain.new_node_cost_per_hour - 1e-9);
            for c in &padded.new_node_claims {
                let cpu: i64 = c
                    .pods
                    .iter()
                    .map(|p| s.pods.iter().find(|q| q.name == p.name).map_or(0, |q| q.containers[0].cpu_milli))
                    .sum();
                prop_assert_eq!(c.pod_requests.cpu_milli, cpu);
            }
        }
    }
}
