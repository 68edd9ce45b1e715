//! New nodes spread over zones that price them the same.
//!
//! Every launch shape is an (instance type, zone, capacity type) offering, and a plan launches
//! each node as its cheapest shape, price ties going to the lowest shape id: the first zone.
//! Where on-demand prices are the same in every zone, every node that nothing pins to a zone
//! then lands in that zone. Two things go wrong:
//! - a zone outage takes most of the cluster with it, which is why the Cluster Autoscaler
//!   has `--balance-similar-node-groups` and cloud node groups rebalance across zones;
//! - the pods that *are* pinned (a zone topology spread) get their zone's room from a few
//!   nodes, and the kube-scheduler, which does not follow the plan, lets the head of its
//!   queue take that room. A zone-spread pod left without room in its zone then blocks its
//!   whole spread group: the other zones are ahead of it by the skew, so none of its siblings
//!   may bind anywhere until a node launched for it is ready (`docs/simulator.md`, round 44).
//!
//! So, with [`crate::scheduler::SchedulingOptions::balance_zones`], each planned node whose
//! pods allow it moves to the offering of the same instance type and capacity type, at the
//! same price, in the zone with the least CPU so far (the cluster's live nodes plus the nodes
//! placed before it in the plan). Nothing about the plan's price changes; only which of
//! equally priced offerings it names.
//!
//! Off by default: on Karpenter's benchmark shapes, under a kube-scheduler that does not
//! follow the plan, the spread cluster waited longer and evicted more, while the
//! zone-constrained workloads gained on every axis (`docs/simulator.md`, round 44): the lock
//! above struck other workloads instead. Its cause was the queue check's re-plan of stranded
//! pods, which did not count the round's other pods (fixed in round 46); re-measured on the
//! fix, balancing still cost more and evicted more on those shapes.

use std::collections::BTreeMap;

use crate::model::Snapshot;
use crate::packing::{LaunchPlan, PackingProblem, ShapeId, ShapeSet};

/// Allocatable CPU (millicores) of the snapshot's nodes per zone: ready and launching, not
/// those on their way out.
pub fn zone_cpu(snapshot: &Snapshot) -> BTreeMap<String, i64> {
    let mut load = BTreeMap::new();
    for n in snapshot.nodes.iter().filter(|n| !n.marked_for_deletion) {
        if let Some(z) = n.labels.get(crate::model::labels::ZONE) {
            *load.entry(z.clone()).or_insert(0) += n.allocatable.cpu_milli.max(0);
        }
    }
    load
}

/// Moves each planned node to the least loaded zone among the offerings of its shape's
/// instance type, capacity type and NodePool that its pods allow (`allowed[node]`: the
/// intersection of its items' shape sets), hold its pods and cost exactly the same (ties: the
/// lower shape id). `load` starts as [`zone_cpu`] and gains each node as it is placed. Nodes
/// with fewer zones to choose from are placed first, so that the flexible ones fill in around
/// the pinned ones (a zone spread's nodes) instead of piling onto the zones those take.
pub fn balance(
    problem: &PackingProblem,
    plan: &mut LaunchPlan,
    allowed: &[ShapeSet],
    load: &mut BTreeMap<String, i64>,
) {
    let options: Vec<Vec<ShapeId>> = plan
        .nodes
        .iter()
        .zip(allowed)
        .map(|(node, set)| alternatives(problem, node.shape, &node.items, set))
        .collect();
    let mut order: Vec<usize> = (0..options.len()).collect();
    order.sort_by_key(|&i| options[i].len());
    for i in order {
        let (Some(node), Some(alts)) = (plan.nodes.get_mut(i), options.get(i)) else {
            continue;
        };
        let best = alts
            .iter()
            .filter_map(|s| Some((zone_load(load, &problem.shapes.get(*s as usize)?.zone), *s)))
            .min();
        if let Some((_, s)) = best {
            node.shape = s;
        }
        if let Some(sh) = problem.shapes.get(node.shape as usize) {
            *load.entry(sh.zone.clone()).or_insert(0) += sh.allocatable.cpu_milli.max(0);
        }
    }
}

/// `chosen` and the shapes of `set` that could replace it: the same instance type, capacity
/// type, NodePool and price, holding `items`.
fn alternatives(
    problem: &PackingProblem,
    chosen: ShapeId,
    items: &[u32],
    set: &ShapeSet,
) -> Vec<ShapeId> {
    let Some(base) = problem.shapes.get(chosen as usize) else {
        return vec![chosen];
    };
    let used = plan_used(problem, items);
    let tol = 1e-9 * base.price.abs().max(1e-12);
    let mut out = vec![chosen];
    for s in set.iter() {
        let Some(sh) = problem.shapes.get(s as usize) else {
            continue;
        };
        if s != chosen
            && sh.instance_type == base.instance_type
            && sh.capacity_type == base.capacity_type
            && sh.pool == base.pool
            && (sh.price - base.price).abs() <= tol
            && used.fits_in(&sh.allocatable)
        {
            out.push(s);
        }
    }
    out
}

fn zone_load(load: &BTreeMap<String, i64>, zone: &str) -> i64 {
    load.get(zone).copied().unwrap_or(0)
}

/// What a node's items request together.
fn plan_used(problem: &PackingProblem, items: &[u32]) -> crate::model::Resources {
    let mut used = crate::model::Resources::default();
    for i in items {
        if let Some(it) = problem.items.get(*i as usize) {
            used.add_assign(&it.requests);
        }
    }
    used
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::zone_cpu;
    use crate::model::{
        CapacityType, InstanceType, LabelSelector, Node, NodePool, Offering, Pod, Resources,
        Snapshot, TopologySpreadConstraint, WhenUnsatisfiable, labels,
    };
    use crate::scheduler::{SchedulingOptions, schedule};

    const GIB: i64 = 1 << 30;

    /// One 4-vCPU type priced `prices[i]` in zone `zone-{a,b,c}[i]`.
    fn snapshot(pods: Vec<Pod>, prices: [f64; 3], nodes: Vec<Node>) -> Snapshot {
        let offerings = ["zone-a", "zone-b", "zone-c"]
            .iter()
            .zip(prices)
            .map(|(z, p)| Offering::new(z, CapacityType::OnDemand, p))
            .collect();
        Snapshot {
            now: 1_000,
            pods: Snapshot::shared_pods(pods),
            nodes,
            nodepools: vec![NodePool::new("default", 0)],
            instance_types: vec![InstanceType::new("m4", 4000, 16 * GIB, 110, offerings)],
            ..Snapshot::default()
        }
    }

    /// Pods of 3 vCPU: one per node.
    fn pods(n: usize) -> Vec<Pod> {
        (0..n)
            .map(|i| Pod::new("default", &format!("p{i}"), 3000, GIB))
            .collect()
    }

    fn options(balance_zones: bool) -> SchedulingOptions {
        SchedulingOptions {
            balance_zones,
            anticipation: None,
            large_rounds: None,
            ..SchedulingOptions::default()
        }
    }

    /// Nodes per zone of the round's claims, and whether each claim's options name its
    /// launch zone for the launched type (anticipation grows a launch within those).
    fn zones(s: &Snapshot, balance: bool) -> BTreeMap<String, usize> {
        let r = schedule(s, &options(balance));
        let mut out = BTreeMap::new();
        for c in &r.new_node_claims {
            *out.entry(c.launch.zone.clone()).or_insert(0) += 1;
            let option = c
                .instance_type_options
                .iter()
                .find(|o| o.instance_type == c.launch.instance_type)
                .expect("the launched type is among the options");
            assert_eq!(option.cheapest.zone, c.launch.zone, "{c:?}");
        }
        out
    }

    fn counts(v: &[(&str, usize)]) -> BTreeMap<String, usize> {
        v.iter().map(|(z, n)| (z.to_string(), *n)).collect()
    }

    #[test]
    fn equally_priced_zones_share_the_new_nodes() {
        let s = snapshot(pods(6), [0.2, 0.2, 0.2], Vec::new());
        assert_eq!(
            zones(&s, true),
            counts(&[("zone-a", 2), ("zone-b", 2), ("zone-c", 2)])
        );
        // Off, every node takes the first zone.
        assert_eq!(zones(&s, false), counts(&[("zone-a", 6)]));
    }

    #[test]
    fn the_zones_with_the_least_capacity_come_first() {
        let mut a = Node::new("old-a", "zone-a", Resources::with_pods(8000, 32 * GIB, 110));
        a.instance_type = Some("m4".into());
        let mut b = Node::new("old-b", "zone-b", Resources::with_pods(4000, 16 * GIB, 110));
        b.instance_type = Some("m4".into());
        // Full: the round's pods need new nodes.
        let mut busy: Vec<Pod> = vec![
            Pod::new("default", "busy-a", 8000, GIB).on("old-a"),
            Pod::new("default", "busy-b", 4000, GIB).on("old-b"),
        ];
        busy.extend(pods(3));
        let s = snapshot(busy, [0.2, 0.2, 0.2], vec![a, b]);
        // c (0 CPU) takes two before b (4 vCPU) catches up with it; a (8 vCPU) gets none.
        assert_eq!(zones(&s, true), counts(&[("zone-b", 1), ("zone-c", 2)]));
    }

    #[test]
    fn a_cheaper_zone_is_not_given_up_for_balance() {
        let s = snapshot(pods(4), [0.2, 0.19, 0.2], Vec::new());
        assert_eq!(zones(&s, true), counts(&[("zone-b", 4)]));
    }

    #[test]
    fn pods_pinned_to_a_zone_keep_it() {
        let pinned: Vec<Pod> = pods(3)
            .into_iter()
            .map(|mut p| {
                p.node_selector
                    .insert(labels::ZONE.to_string(), "zone-c".to_string());
                p
            })
            .collect();
        let s = snapshot(pinned, [0.2, 0.2, 0.2], Vec::new());
        assert_eq!(zones(&s, true), counts(&[("zone-c", 3)]));
    }

    /// A zone spread already balances its own pods; the unpinned nodes of the round fill the
    /// zones it left emptiest.
    #[test]
    fn unpinned_nodes_fill_around_a_zone_spread() {
        let mut match_labels = crate::model::Labels::new();
        match_labels.insert("app".to_string(), "spread".to_string());
        let spread = TopologySpreadConstraint {
            max_skew: 1,
            topology_key: labels::ZONE.to_string(),
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            label_selector: LabelSelector {
                match_labels,
                match_expressions: Vec::new(),
            },
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: Vec::new(),
        };
        let mut all: Vec<Pod> = (0..4)
            .map(|i| {
                let mut p = Pod::new("default", &format!("s{i}"), 3000, GIB).label("app", "spread");
                p.topology_spread = vec![spread.clone()];
                p
            })
            .collect();
        all.extend(pods(2));
        let s = snapshot(all, [0.2, 0.2, 0.2], Vec::new());
        let z = zones(&s, true);
        assert_eq!(z.values().sum::<usize>(), 6);
        assert!(z.values().all(|n| *n == 2), "{z:?}");
    }

    #[test]
    fn nodes_on_their_way_out_do_not_count() {
        let mut a = Node::new("a", "zone-a", Resources::with_pods(4000, GIB, 110));
        a.marked_for_deletion = true;
        let b = Node::new("b", "zone-b", Resources::with_pods(2000, GIB, 110));
        let load = zone_cpu(&snapshot(Vec::new(), [0.2; 3], vec![a, b]));
        assert_eq!(load, [("zone-b".to_string(), 2000)].into());
    }
}
