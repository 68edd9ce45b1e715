//! Property tests over random snapshots: every hard constraint holds in the final state
//! (node selectors and required node affinity, taints, requests including GPUs, other
//! extended resources and ephemeral storage, host ports, required pod affinity and
//! anti-affinity, topology spread's maxSkew with minDomains and the node policies, NodePool
//! limits and minValues), existing capacity is used before new nodes, results are
//! deterministic across thread counts, and the cost-aware strategy stays within a tolerance of
//! the Karpenter baseline. The generators mix GPU and plain types, spot and on-demand
//! offerings, several weighted NodePools with limits, taints and minValues, tolerations,
//! preferred terms (so relaxation runs) and ScheduleAnyway spreads.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proptest::strategy::Strategy;
use provisioner_core::{
    CapacityType, DaemonSet, HostPort, InclusionPolicy, InstanceType, LabelSelector, Node,
    NodePool, Offering, Operator, Pod, PodAffinityTerm, Protocol, Requirement, Resources,
    SchedulingOptions, SchedulingResult, Snapshot, Taint, TaintEffect, Toleration,
    TolerationOperator, TopologySpreadConstraint, WeightedNodeSelectorTerm,
    WeightedPodAffinityTerm, WhenUnsatisfiable, labels, resources, schedule,
};
use provisioner_core::{ClusterState, PodSlot, schedule_evicted, schedule_on};

const GIB: i64 = 1 << 30;
const ZONES: [&str; 3] = ["z1", "z2", "z3"];
const GPU: &str = "nvidia.com/gpu";
const DEDICATED: &str = "dedicated";

#[derive(Debug, Clone)]
struct Case {
    snapshot: Snapshot,
}

fn arb_type(i: usize) -> impl Strategy<Value = InstanceType> {
    (
        1i64..=32,
        1i64..=8,
        0.5f64..1.5,
        1usize..=3,
        prop::sample::select(vec![0i64, 0, 0, 1, 4]),
        any::<bool>(),
        prop::sample::select(vec![20i64, 100]),
    )
        .prop_map(
            move |(cpu, ratio, price_factor, zones, gpus, spot, disk_gib)| {
                let mem = cpu * ratio;
                let price =
                    (0.03 * cpu as f64 + 0.005 * mem as f64 + 0.5 * gpus as f64) * price_factor;
                let mut offerings: Vec<Offering> = ZONES
                    .iter()
                    .take(zones)
                    .map(|z| Offering::new(z, CapacityType::OnDemand, price))
                    .collect();
                if spot {
                    offerings.push(Offering::new(ZONES[0], CapacityType::Spot, price * 0.4));
                }
                let mut t =
                    InstanceType::new(&format!("t{i}"), cpu * 1000, mem * GIB, 110, offerings);
                t.capacity.ephemeral_storage = disk_gib * GIB;
                if gpus > 0 {
                    t.capacity.extended.insert(GPU.into(), gpus);
                }
                t
            },
        )
}

/// NodePools: `p0` always, untainted; `p1` (with a weight, maybe a CPU limit, maybe minValues on
/// instance types, maybe on-demand only); `p2` tainted `dedicated`.
fn arb_pools() -> impl Strategy<Value = Vec<NodePool>> {
    (
        1usize..=3,
        0i32..=10,
        0i32..=10,
        prop::option::of(4i64..=64),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(n, w1, w2, limit, min_values, od_only)| {
            let mut out = vec![NodePool::new("p0", 0)];
            if n >= 2 {
                let mut p = NodePool::new("p1", w1);
                p.limits = limit.map(|cpu| Resources::new(cpu * 1000, 0));
                if min_values {
                    p.requirements.push(Requirement {
                        key: labels::INSTANCE_TYPE.into(),
                        operator: Operator::Exists,
                        values: vec![],
                        min_values: Some(2),
                    });
                }
                if od_only {
                    p.requirements.push(Requirement::new_in(
                        labels::CAPACITY_TYPE,
                        &[CapacityType::OnDemand.as_label()],
                    ));
                }
                out.push(p);
            }
            if n >= 3 {
                let mut p = NodePool::new("p2", w2);
                p.taints
                    .push(Taint::new(DEDICATED, Some("x"), TaintEffect::NoSchedule));
                out.push(p);
            }
            out
        })
}

fn term(app: u8, key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: LabelSelector::from_labels([("app", format!("a{app}"))]),
        namespaces: vec![],
        namespace_selector: None,
        topology_key: key.into(),
        match_label_keys: vec![],
    }
}

fn spread(app: u8, key: &str, when: WhenUnsatisfiable) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: 1,
        topology_key: key.into(),
        when_unsatisfiable: when,
        label_selector: LabelSelector::from_labels([("app", format!("a{app}"))]),
        min_domains: None,
        node_affinity_policy: None,
        node_taints_policy: None,
        match_label_keys: vec![],
    }
}

/// A pod of app `a{app}`. Pods of one app share their kind's constraint where it involves
/// other pods (the app number decides the kind of spread or affinity), so the final-state
/// checks below know which apps they can judge.
fn arb_pod(i: usize) -> impl Strategy<Value = Pod> {
    (
        prop::sample::select(vec![100i64, 250, 500, 1000, 2000, 4000]),
        prop::sample::select(vec![128i64, 512, 1024, 4096, 8192]),
        0u8..16,
        0u8..6,
        0u8..4,
    )
        .prop_map(move |(cpu, mem_mib, kind, app, variant)| {
            let mut p = Pod::new("ns", &format!("p{i}"), cpu, mem_mib << 20)
                .label("app", &format!("a{app}"));
            p.owner_kind = Some("ReplicaSet".into());
            match kind {
                0 => {
                    p.node_selector
                        .insert(labels::ZONE.into(), ZONES[app as usize % 3].into());
                }
                1 => p.host_ports.push(HostPort {
                    port: 8000 + app as u16,
                    protocol: Protocol::TCP,
                    host_ip: None,
                }),
                2 => {
                    p.containers[0]
                        .extended
                        .insert(GPU.into(), 1 + i64::from(variant % 2));
                }
                3 => p.containers[0].ephemeral_storage = (1 + i64::from(variant) * 10) * GIB,
                4 => p.tolerations.push(Toleration {
                    key: Some(DEDICATED.into()),
                    operator: TolerationOperator::Exists,
                    value: None,
                    effect: None,
                }),
                5 => p.preferred_node_affinity.push(WeightedNodeSelectorTerm {
                    weight: 10,
                    term: vec![Requirement::new_in(
                        labels::ZONE,
                        &[ZONES[variant as usize % 3]],
                    )],
                }),
                6 => p.pod_anti_affinity.preferred.push(WeightedPodAffinityTerm {
                    weight: 50,
                    term: term(app, labels::HOSTNAME),
                }),
                7 => p.topology_spread.push(spread(
                    app,
                    labels::ZONE,
                    WhenUnsatisfiable::ScheduleAnyway,
                )),
                8 => {
                    p.node_selector.insert(
                        labels::CAPACITY_TYPE.into(),
                        [CapacityType::Spot, CapacityType::OnDemand][variant as usize % 2]
                            .as_label()
                            .into(),
                    );
                }
                // The app decides the inter-pod constraint, so all pods of an app that carry
                // one carry the same.
                9..=12 => match app {
                    0 => p
                        .pod_anti_affinity
                        .required
                        .push(term(app, labels::HOSTNAME)),
                    1 => {
                        let mut c = spread(app, labels::ZONE, WhenUnsatisfiable::DoNotSchedule);
                        c.min_domains = Some(3);
                        c.node_taints_policy = Some(InclusionPolicy::Honor);
                        p.topology_spread.push(c);
                    }
                    2 => p.pod_affinity.required.push(term(app, labels::ZONE)),
                    3 => p.topology_spread.push(spread(
                        app,
                        labels::HOSTNAME,
                        WhenUnsatisfiable::DoNotSchedule,
                    )),
                    4 => {
                        let mut c = spread(app, labels::ZONE, WhenUnsatisfiable::DoNotSchedule);
                        c.node_affinity_policy = Some(InclusionPolicy::Ignore);
                        p.topology_spread.push(c);
                    }
                    _ => p.pod_anti_affinity.required.push(term(app, labels::ZONE)),
                },
                _ => {}
            }
            p
        })
}

fn arb_case() -> impl Strategy<Value = Case> {
    let types = (1usize..=5).prop_flat_map(|n| (0..n).map(arb_type).collect::<Vec<_>>());
    let pods = (1usize..=24).prop_flat_map(|n| (0..n).map(arb_pod).collect::<Vec<_>>());
    let nodes = prop::collection::vec((1i64..=8, 0usize..3), 0..4);
    let ds = prop::option::of(prop::sample::select(vec![100i64, 500]));
    (types, arb_pools(), pods, nodes, ds).prop_map(|(types, pools, pods, nodes, ds)| {
        let mut snapshot = Snapshot {
            pods: Snapshot::shared_pods(pods),
            nodepools: pools,
            instance_types: types,
            ..Snapshot::default()
        };
        for (i, (cpu, z)) in nodes.into_iter().enumerate() {
            let mut r = Resources::with_pods(cpu * 1000, cpu * 2 * GIB, 110);
            r.ephemeral_storage = 50 * GIB;
            snapshot
                .nodes
                .push(Node::new(&format!("n{i}"), ZONES[z], r));
        }
        if let Some(cpu) = ds {
            let mut p = Pod::new("kube-system", "agent", cpu, 256 << 20);
            p.owner_kind = Some("DaemonSet".into());
            snapshot.daemonsets.push(DaemonSet {
                namespace: "kube-system".into(),
                name: "agent".into(),
                pod: p,
            });
        }
        Case { snapshot }
    })
}

fn pod_map(s: &Snapshot) -> BTreeMap<String, &Pod> {
    s.pods.iter().map(|p| (p.name.clone(), &**p)).collect()
}

/// A node of the final state: existing, or a new NodeClaim with the labels and taints its node
/// will have.
struct FinalNode {
    name: String,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    pods: Vec<String>,
}

/// Every node of the final state and the pods on it.
fn final_nodes(s: &Snapshot, r: &SchedulingResult) -> Vec<FinalNode> {
    let mut out = Vec::new();
    let mut on_existing: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for p in &r.existing_placements {
        on_existing
            .entry(p.node.as_str())
            .or_default()
            .push(p.pod.name.clone());
    }
    for n in &s.nodes {
        out.push(FinalNode {
            name: n.name.clone(),
            labels: n.labels.clone(),
            taints: n.taints.clone(),
            pods: on_existing
                .get(n.name.as_str())
                .cloned()
                .unwrap_or_default(),
        });
    }
    for c in &r.new_node_claims {
        let pool = s.nodepools.iter().find(|p| p.name == c.nodepool);
        let it = s
            .instance_types
            .iter()
            .find(|t| t.name == c.launch.instance_type);
        let mut l = it.map(|t| t.labels.clone()).unwrap_or_default();
        if let Some(pool) = pool {
            l.extend(pool.labels.clone());
        }
        l.insert(labels::ZONE.to_string(), c.launch.zone.clone());
        l.insert(labels::HOSTNAME.to_string(), c.name.clone());
        l.insert(labels::NODEPOOL.to_string(), c.nodepool.clone());
        l.insert(
            labels::INSTANCE_TYPE.to_string(),
            c.launch.instance_type.clone(),
        );
        l.insert(
            labels::CAPACITY_TYPE.to_string(),
            c.launch.capacity_type.as_label().to_string(),
        );
        let mut taints = pool.map(|p| p.taints.clone()).unwrap_or_default();
        taints.extend(it.map(|t| t.taints.clone()).unwrap_or_default());
        out.push(FinalNode {
            name: c.name.clone(),
            labels: l,
            taints,
            pods: c.pods.iter().map(|p| p.name.clone()).collect(),
        });
    }
    out
}

fn selects(t: &PodAffinityTerm, owner: &Pod, other: &Pod) -> bool {
    other.namespace == owner.namespace && t.label_selector.matches(&other.labels)
}

/// Zones a pod with this spread may use: zones of existing nodes the spread counts, and zones
/// of the offerings of NodePools whose taints it tolerates and whose requirements allow it.
fn spread_domains(s: &Snapshot, p: &Pod, c: &TopologySpreadConstraint) -> BTreeSet<String> {
    let honor_taints = c.node_taints_policy == Some(InclusionPolicy::Honor);
    let mut d = BTreeSet::new();
    for n in &s.nodes {
        let tolerated = n
            .taints
            .iter()
            .all(|t| p.tolerations.iter().any(|tol| tol.tolerates(t)));
        if (!honor_taints || tolerated)
            && let Some(z) = n.labels.get(labels::ZONE)
        {
            d.insert(z.clone());
        }
    }
    for pool in &s.nodepools {
        let tolerated = pool
            .taints
            .iter()
            .all(|t| p.tolerations.iter().any(|tol| tol.tolerates(t)));
        if !tolerated {
            continue;
        }
        for it in &s.instance_types {
            for o in &it.offerings {
                let mut l = BTreeMap::new();
                l.insert(labels::ZONE.to_string(), o.zone.clone());
                l.insert(
                    labels::CAPACITY_TYPE.to_string(),
                    o.capacity_type.as_label().to_string(),
                );
                l.insert(labels::INSTANCE_TYPE.to_string(), it.name.clone());
                if pool.requirements.iter().all(|r| r.matches(&l)) {
                    d.insert(o.zone.clone());
                }
            }
        }
    }
    d
}

fn check_hard_constraints(s: &Snapshot, r: &SchedulingResult) -> Result<(), TestCaseError> {
    let pods = pod_map(s);
    let nodes = final_nodes(s, r);
    // Every pending pod is accounted for exactly once.
    let mut seen = BTreeSet::new();
    for n in &nodes {
        for p in &n.pods {
            prop_assert!(seen.insert(p.clone()), "pod {p} placed twice");
        }
    }
    for u in &r.unschedulable {
        prop_assert!(
            seen.insert(u.pod.name.clone()),
            "pod {} placed and unschedulable",
            u.pod.name
        );
        prop_assert!(!u.reason.is_empty());
    }
    prop_assert_eq!(seen.len(), s.pods.len());
    // Where each placed pod is.
    let mut at: BTreeMap<&str, &FinalNode> = BTreeMap::new();
    for n in &nodes {
        for pn in &n.pods {
            at.insert(pn.as_str(), n);
        }
    }
    let placed: Vec<(&Pod, &FinalNode)> = s
        .pods
        .iter()
        .filter_map(|p| at.get(p.name.as_str()).map(|n| (&**p, *n)))
        .collect();
    let domain = |n: &FinalNode, key: &str| n.labels.get(key).cloned();
    for n in &nodes {
        let mut ports = BTreeSet::new();
        for pn in &n.pods {
            let Some(p) = pods.get(pn) else { continue };
            for (k, v) in &p.node_selector {
                prop_assert_eq!(
                    n.labels.get(k),
                    Some(v),
                    "nodeSelector of {} on {}",
                    pn,
                    n.name
                );
            }
            prop_assert!(
                provisioner_core::requirements::terms_match(&p.required_node_affinity, &n.labels),
                "required node affinity of {} on {}",
                pn,
                n.name
            );
            for t in &n.taints {
                if t.effect == TaintEffect::PreferNoSchedule {
                    continue;
                }
                prop_assert!(
                    p.tolerations.iter().any(|tol| tol.tolerates(t)),
                    "{} on {} does not tolerate {:?}",
                    pn,
                    n.name,
                    t
                );
            }
            for hp in &p.host_ports {
                prop_assert!(
                    ports.insert(hp.port),
                    "host port {} twice on {}",
                    hp.port,
                    n.name
                );
            }
        }
    }
    // Required pod anti-affinity (which also covers the inverse direction: every pod's terms
    // are checked against every other pod).
    for (p, n) in &placed {
        for t in &p.pod_anti_affinity.required {
            let Some(d) = domain(n, &t.topology_key) else {
                continue;
            };
            for (q, m) in &placed {
                if q.name != p.name
                    && domain(m, &t.topology_key).as_deref() == Some(d.as_str())
                    && selects(t, p, q)
                {
                    prop_assert!(
                        false,
                        "anti-affinity of {} ({} {}) broken by {}",
                        p.name,
                        t.topology_key,
                        d,
                        q.name
                    );
                }
            }
        }
    }
    // Required pod affinity, for apps whose every pod carries the same terms: each pod shares
    // its domain with another selected pod, unless it is the only one placed.
    for (p, n) in &placed {
        for t in &p.pod_affinity.required {
            let same_terms = placed
                .iter()
                .filter(|(q, _)| selects(t, p, q))
                .all(|(q, _)| q.pod_affinity.required == p.pod_affinity.required);
            if !same_terms {
                continue;
            }
            let d = domain(n, &t.topology_key);
            prop_assert!(
                d.is_some(),
                "{} on a node without {}",
                p.name,
                t.topology_key
            );
            let others: Vec<Option<String>> = placed
                .iter()
                .filter(|(q, _)| q.name != p.name && selects(t, p, q))
                .map(|(_, m)| domain(m, &t.topology_key))
                .collect();
            prop_assert!(
                others.is_empty() || others.contains(&d),
                "affinity of {} in {:?}: the others are in {:?}",
                p.name,
                d,
                others
            );
        }
    }
    // Topology spread (DoNotSchedule), for apps whose every pod carries the same constraint:
    // max - min over the eligible domains within maxSkew (min 0 below minDomains domains); on
    // hostname, where a new node can always open, at most maxSkew per node.
    for p in &s.pods {
        for c in p
            .topology_spread
            .iter()
            .filter(|c| c.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule)
        {
            let group: Vec<&Pod> = s
                .pods
                .iter()
                .filter(|q| q.namespace == p.namespace && c.label_selector.matches(&q.labels))
                .map(|q| &**q)
                .collect();
            if !group.iter().all(|q| q.topology_spread == p.topology_spread) {
                continue;
            }
            let mut counts: BTreeMap<String, i64> = BTreeMap::new();
            for q in &group {
                if let Some(d) = at
                    .get(q.name.as_str())
                    .and_then(|m| domain(m, &c.topology_key))
                {
                    *counts.entry(d).or_insert(0) += 1;
                }
            }
            if c.topology_key == labels::HOSTNAME {
                for (d, k) in &counts {
                    prop_assert!(
                        *k <= i64::from(c.max_skew),
                        "hostname spread of {}: {k} on {d}",
                        p.name
                    );
                }
                continue;
            }
            let domains = spread_domains(s, p, c);
            for d in counts.keys() {
                prop_assert!(
                    domains.contains(d),
                    "{} spread into {d}, not a domain",
                    p.name
                );
            }
            let min = if (domains.len() as i32) < c.min_domains.unwrap_or(1) {
                0
            } else {
                domains
                    .iter()
                    .map(|d| counts.get(d).copied().unwrap_or(0))
                    .min()
                    .unwrap_or(0)
            };
            let max = counts.values().copied().max().unwrap_or(0);
            prop_assert!(
                max - min <= i64::from(c.max_skew),
                "zone spread of {} ({:?}): counts {:?} over {:?}",
                p.name,
                c,
                counts,
                domains
            );
        }
    }
    // Relaxation only drops what a pod preferred.
    for rel in &r.relaxations {
        let Some(p) = pods.get(&rel.pod.name) else {
            prop_assert!(false, "relaxation of an unknown pod {}", rel.pod.name);
            continue;
        };
        let had_preferences = !p.preferred_node_affinity.is_empty()
            || !p.pod_affinity.preferred.is_empty()
            || !p.pod_anti_affinity.preferred.is_empty()
            || p.required_node_affinity.len() > 1
            || p.topology_spread
                .iter()
                .any(|c| c.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway);
        // Tolerating PreferNoSchedule taints is the last step for any pod.
        let dropped = rel
            .relaxed
            .iter()
            .any(|x| x != "tolerated PreferNoSchedule taints");
        prop_assert!(
            had_preferences || !dropped,
            "{} relaxed {:?} with no preference",
            p.name,
            rel.relaxed
        );
    }
    // NodePool limits and minValues.
    for pool in &s.nodepools {
        if let Some(limit) = pool.limits.as_ref().filter(|l| l.cpu_milli > 0) {
            let used: i64 = r
                .new_node_claims
                .iter()
                .filter(|c| c.nodepool == pool.name)
                .filter_map(|c| {
                    s.instance_types
                        .iter()
                        .find(|t| t.name == c.launch.instance_type)
                })
                .map(|t| t.capacity.cpu_milli)
                .sum();
            prop_assert!(
                used <= limit.cpu_milli,
                "pool {} over its CPU limit: {used}",
                pool.name
            );
        }
        for req in pool
            .requirements
            .iter()
            .filter(|r| r.key == labels::INSTANCE_TYPE)
        {
            let Some(mv) = req.min_values else { continue };
            for c in r.new_node_claims.iter().filter(|c| c.nodepool == pool.name) {
                let distinct: BTreeSet<&String> = c
                    .instance_type_options
                    .iter()
                    .map(|o| &o.instance_type)
                    .collect();
                prop_assert!(
                    distinct.len() >= mv as usize,
                    "claim {} keeps {} instance types, minValues {mv}",
                    c.name,
                    distinct.len()
                );
            }
        }
    }
    Ok(())
}

fn check_allocatable(s: &Snapshot, r: &SchedulingResult) -> Result<(), TestCaseError> {
    let pods = pod_map(s);
    for n in &s.nodes {
        let used = resources::sum(
            r.existing_placements
                .iter()
                .filter(|p| p.node == n.name)
                .filter_map(|p| pods.get(&p.pod.name))
                .map(|p| resources::pod_requests(p))
                .collect::<Vec<_>>()
                .iter(),
        );
        prop_assert!(
            used.fits_in(&n.allocatable),
            "node {} overfilled: {} > {}",
            n.name,
            used,
            n.allocatable
        );
    }
    for c in &r.new_node_claims {
        let it = s
            .instance_types
            .iter()
            .find(|t| t.name == c.launch.instance_type);
        prop_assert!(it.is_some());
        let Some(it) = it else { continue };
        let need = c.pod_requests.add(&c.daemonset_requests);
        prop_assert!(
            need.fits_in(&it.allocatable()),
            "claim {} overfilled: {} > {}",
            c.name,
            need,
            it.allocatable()
        );
        // Under a NodePool limit the planner may launch a smaller, dearer option so that
        // the pool's other claims still fit; without one, the launch is the cheapest option.
        let limited = s
            .nodepools
            .iter()
            .any(|p| p.name == c.nodepool && p.limits.is_some());
        prop_assert!(
            limited
                || c.instance_type_options
                    .iter()
                    .all(|o| o.cheapest.price >= c.launch.price - 1e-12),
            "launch {:?} is not the cheapest option: {:?} (requirements {:?})",
            c.launch,
            c.instance_type_options
                .iter()
                .map(|o| (&o.instance_type, &o.cheapest))
                .collect::<Vec<_>>(),
            c.requirements
        );
    }
    Ok(())
}

fn check_existing_first(s: &Snapshot, r: &SchedulingResult) -> Result<(), TestCaseError> {
    let pods = pod_map(s);
    let mut free: BTreeMap<&str, Resources> = s
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.allocatable.clone()))
        .collect();
    for p in &r.existing_placements {
        if let (Some(f), Some(pod)) = (free.get_mut(p.node.as_str()), pods.get(&p.pod.name)) {
            f.sub_assign(&resources::pod_requests(pod));
        }
    }
    // Apps whose pods another pod's anti-affinity may keep away from a node.
    let guarded: BTreeSet<&String> = s
        .pods
        .iter()
        .filter(|p| {
            !p.pod_anti_affinity.required.is_empty() || !p.pod_anti_affinity.preferred.is_empty()
        })
        .filter_map(|p| p.labels.get("app"))
        .collect();
    for c in &r.new_node_claims {
        for pr in &c.pods {
            let Some(p) = pods.get(&pr.name) else {
                continue;
            };
            // Only unconstrained pods: a constrained one may be kept off a node on purpose.
            let constrained = !p.node_selector.is_empty()
                || !p.pod_anti_affinity.required.is_empty()
                || !p.pod_anti_affinity.preferred.is_empty()
                || !p.pod_affinity.required.is_empty()
                || !p.preferred_node_affinity.is_empty()
                || !p.topology_spread.is_empty()
                || !p.host_ports.is_empty()
                || p.labels.get("app").is_some_and(|a| guarded.contains(a));
            if constrained {
                continue;
            }
            let req = resources::pod_requests(p);
            for (n, f) in &free {
                prop_assert!(
                    !req.fits_in(f),
                    "pod {} got a new node but fits on {}",
                    pr.name,
                    n
                );
            }
        }
    }
    Ok(())
}

fn opts(strategy: provisioner_core::Strategy) -> SchedulingOptions {
    SchedulingOptions {
        strategy,
        ..SchedulingOptions::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn placements_satisfy_hard_constraints(case in arb_case()) {
        for strategy in [provisioner_core::Strategy::CostAware, provisioner_core::Strategy::KarpenterBaseline] {
            let r = schedule(&case.snapshot, &opts(strategy));
            check_hard_constraints(&case.snapshot, &r)?;
            check_allocatable(&case.snapshot, &r)?;
            check_existing_first(&case.snapshot, &r)?;
        }
    }

    /// Evicted pods placed again under their own slots (no copies, as consolidation's
    /// simulations do) leave the same state as copies placed as new pods: the same result,
    /// the same usage per node, and the same answer for pods scheduled afterwards (which reads
    /// every topology count).
    #[test]
    fn evicted_pods_placed_in_their_slots_match_copies(case in arb_case(), drop_first in any::<bool>()) {
        let opts = SchedulingOptions::default();
        // Room on existing nodes in every zone, so evicted pods land on existing nodes.
        let mut snapshot = case.snapshot.clone();
        for (i, z) in ZONES.iter().enumerate() {
            let mut r = Resources::with_pods(16_000, 64 * GIB, 110);
            r.ephemeral_storage = 200 * GIB;
            r.extended.insert(GPU.into(), 4);
            snapshot.nodes.push(Node::new(&format!("big{i}"), z, r));
        }
        let case = Case { snapshot };
        let mut base = ClusterState::new(&case.snapshot);
        let _ = schedule_on(&mut base, &case.snapshot.pods, &opts);
        let names: Vec<&str> = case.snapshot.nodes.iter().map(|n| n.name.as_str())
            .filter(|n| drop_first || *n != "n0").take(2).collect();
        let mut copied = base.clone();
        let moved = copied.remove_nodes(&names);
        let a = schedule_on(&mut copied, &moved, &opts);
        let mut kept = base.clone();
        let evicted = kept.evict_nodes(&names);
        let pods: Vec<Pod> = evicted.iter().filter_map(|e| kept.pod_at(e.slot).cloned()).collect();
        let slots: Vec<PodSlot> = evicted.iter().map(|e| e.slot).collect();
        prop_assert_eq!(pods.len(), moved.len());
        let planner = opts.strategy.planner();
        let b = schedule_evicted(&mut kept, &pods, &slots, &opts, planner, None);
        prop_assert_eq!(serde_json::to_string(&a).ok(), serde_json::to_string(&b).ok());
        for i in 0..case.snapshot.nodes.len() {
            prop_assert_eq!(&copied.nodes[i].used, &kept.nodes[i].used);
            prop_assert_eq!(copied.nodes[i].pods.len(), kept.nodes[i].pods.len());
        }
        let probe: Vec<Pod> = case.snapshot.pods.iter().map(|p| Pod { name: format!("again-{}", p.name), ..Pod::clone(p) }).collect();
        let a2 = schedule_on(&mut copied, &probe, &opts);
        let b2 = schedule_on(&mut kept, &probe, &opts);
        prop_assert_eq!(serde_json::to_string(&a2).ok(), serde_json::to_string(&b2).ok());
    }

    /// Pods land on the first node in Karpenter's order with room, also when whole blocks of
    /// full nodes are skipped (`free_room`): checked against a plain first-fit scan over
    /// clusters of several blocks, with the room spread at random.
    #[test]
    fn first_fit_skips_no_node_with_room(
        free in prop::collection::vec(prop::sample::select(vec![0i64, 0, 0, 0, 100, 300, 700, 1500]), 130..260),
        pods in prop::collection::vec(prop::sample::select(vec![50i64, 100, 250, 500, 1000, 2000]), 1..60),
    ) {
        let mut snapshot = Snapshot::default();
        for (i, f) in free.iter().enumerate() {
            let name = format!("n{i:03}");
            snapshot.nodes.push(Node::new(&name, ZONES[i % 3], Resources::with_pods(2000, 64 * GIB, 110)));
            if *f < 2000 {
                let mut p = Pod::new("ns", &format!("bound{i}"), 2000 - f, GIB).on(&name);
                p.owner_kind = Some("ReplicaSet".into());
                snapshot.pods.push(std::sync::Arc::new(p));
            }
        }
        let pending: Vec<Pod> = pods.iter().enumerate()
            .map(|(i, cpu)| Pod::new("ns", &format!("p{i:02}"), *cpu, GIB))
            .collect();
        let mut state = ClusterState::new(&snapshot);
        let r = schedule_on(&mut state, &pending, &SchedulingOptions::default());
        // The plain scan, in the scheduler's pod order (CPU, then memory, descending; name).
        let mut room: Vec<i64> = free.clone();
        let mut order: Vec<&Pod> = pending.iter().collect();
        order.sort_by(|a, b| b.containers[0].cpu_milli.cmp(&a.containers[0].cpu_milli).then(a.name.cmp(&b.name)));
        let mut want: BTreeMap<String, String> = BTreeMap::new();
        for p in order {
            let cpu = p.containers[0].cpu_milli;
            if let Some(i) = room.iter().position(|f| *f >= cpu) {
                room[i] -= cpu;
                want.insert(p.name.clone(), format!("n{i:03}"));
            }
        }
        let got: BTreeMap<String, String> = r.existing_placements.iter()
            .map(|pl| (pl.pod.name.clone(), pl.node.clone()))
            .collect();
        prop_assert_eq!(got, want);
    }

    /// Topology groups made in one pass over the cluster (each pod tested only against the
    /// groups its labels could select) count exactly what testing every pod against every
    /// group counts, for groups made before pods were placed and after.
    #[test]
    fn groups_count_every_selected_pod(case in arb_case()) {
        use provisioner_core::state::{node_domain, owns};
        let mut snapshot = case.snapshot.clone();
        for (i, z) in ZONES.iter().enumerate() {
            snapshot.nodes.push(Node::new(&format!("big{i}"), z, Resources::with_pods(16_000, 64 * GIB, 110)));
        }
        // Existing nodes only: pods pinned to new nodes' domains are counted too, and this
        // reference cannot see them.
        snapshot.instance_types.clear();
        let opts = SchedulingOptions::default();
        let mut state = ClusterState::new(&snapshot);
        let _ = schedule_on(&mut state, &snapshot.pods, &opts);
        // Groups made after the placements: the same terms under new keys.
        let mut later = Vec::new();
        for p in &snapshot.pods {
            for mut t in provisioner_core::topology::owned_terms(p, &snapshot.namespaces, &[provisioner_core::scheduler::effective_term(p)]) {
                t.key.max_skew += 7;
                later.push(t);
            }
        }
        state.create_groups(&later);
        for g in &state.groups {
            let mut counts: BTreeMap<String, i32> = BTreeMap::new();
            let mut owners: BTreeMap<String, i32> = BTreeMap::new();
            for (ni, n) in snapshot.nodes.iter().enumerate() {
                let ns = &state.nodes[ni];
                let Some(d) = node_domain(n, &g.key) else { continue };
                if ns.removed { continue; }
                for slot in ns.pods.iter() {
                    let Some(p) = state.pod_at(*slot) else { continue };
                    if g.selects(p) && g.counts_node(&n.labels, &n.taints) {
                        *counts.entry(d.to_string()).or_default() += 1;
                    }
                    if owns(p, g) {
                        *owners.entry(d.to_string()).or_default() += 1;
                    }
                }
            }
            counts.retain(|_, v| *v != 0);
            owners.retain(|_, v| *v != 0);
            let mut got = g.counts.to_map();
            got.retain(|_, v| *v != 0);
            let mut got_owners = g.owners.to_map();
            got_owners.retain(|_, v| *v != 0);
            prop_assert_eq!(got, counts);
            if g.kind == provisioner_core::topology::Kind::AntiAffinity {
                prop_assert_eq!(got_owners, owners);
            }
        }
    }

    /// The heuristic's plan does not depend on the thread count. Large rounds are left out:
    /// the optimiser they go to is deterministic only when its work limits end it before its
    /// wall-clock budget (`optimize`'s own tests), which a loaded or debug build does not
    /// promise.
    #[test]
    fn deterministic_across_thread_counts(case in arb_case()) {
        let heuristic = SchedulingOptions { large_rounds: None, ..SchedulingOptions::default() };
        let run = |threads: usize| -> String {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
            pool.install(|| serde_json::to_string(&schedule(&case.snapshot, &heuristic)).unwrap_or_default())
        };
        let one = run(1);
        prop_assert_eq!(&one, &run(2));
        prop_assert_eq!(&one, &run(1));
    }
}

/// Cost tolerance: the cost-aware strategy's new-node cost over the baseline's, on the
/// generated cases where both place the same pods. Prints the distribution.
///
/// The baseline plans as Karpenter does (issue 13): a zone-spread pod joins any in-flight
/// NodeClaim whose zone its skew allows, and a hostname spread binds only the pod that
/// carries it. On some generated cases that is cheaper than anything the default planner
/// may do: it decides zones before packing and keeps every pod's spread true in the final
/// state (measured: of the 239 comparable cases, 15 dearer, 13 of them by over 10%, the
/// worst 2x: a hostname spread that Karpenter lets a later pod break). So the bound is on
/// how often, not how much: in nine cases of ten the default planner is at least as cheap,
/// and at most one in ten is over 10% dearer.
#[test]
fn cost_aware_within_tolerance_of_baseline() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    const TOLERANCE: f64 = 1.10;
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7u8; 32]),
    );
    let mut ratios = Vec::new();
    for _ in 0..300 {
        let Ok(tree) = arb_case().new_tree(&mut runner) else {
            continue;
        };
        let case = tree.current();
        // The planners' packing is compared: anticipation deliberately spends more in a
        // round for the arrivals it expects next (tested in `anticipate`).
        let ours = schedule(
            &case.snapshot,
            &SchedulingOptions {
                anticipation: None,
                ..opts(provisioner_core::Strategy::CostAware)
            },
        );
        let base = schedule(
            &case.snapshot,
            &opts(provisioner_core::Strategy::KarpenterBaseline),
        );
        if ours.placed_pods() != base.placed_pods() || base.new_node_cost_per_hour <= 0.0 {
            continue;
        }
        ratios.push(ours.new_node_cost_per_hour / base.new_node_cost_per_hour);
    }
    ratios.sort_by(f64::total_cmp);
    let q = |f: f64| {
        ratios
            .get(((ratios.len() as f64 - 1.0) * f).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    let cheaper = ratios.iter().filter(|r| **r < 1.0 - 1e-9).count();
    let worse = ratios.iter().filter(|r| **r > 1.0 + 1e-9).count();
    println!(
        "cost-aware / baseline over {} cases: min {:.3} p10 {:.3} median {:.3} p90 {:.3} max {:.3}; cheaper {cheaper}, equal {}, dearer {worse}",
        ratios.len(),
        q(0.0),
        q(0.1),
        q(0.5),
        q(0.9),
        q(1.0),
        ratios.len() - cheaper - worse
    );
    let over = ratios.iter().filter(|r| **r > TOLERANCE).count();
    println!("over {TOLERANCE}: {over}");
    assert!(!ratios.is_empty());
    assert!(q(0.9) <= 1.0 + 1e-9, "p90 ratio {} above 1", q(0.9));
    assert!(
        over * 10 <= ratios.len(),
        "{over} of {} cases more than {TOLERANCE}x the baseline",
        ratios.len()
    );
}
