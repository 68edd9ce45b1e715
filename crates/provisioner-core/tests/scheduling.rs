//! Hand-written cases per constraint kind, following the kube-scheduler's documented
//! semantics and Karpenter's provisioning behaviour.

use std::collections::BTreeMap;

use provisioner_core::*;

const GIB: i64 = 1 << 30;

fn it(name: &str, cpu: i64, mem_gib: i64, price: f64, zones: &[&str]) -> InstanceType {
    InstanceType::new(
        name,
        cpu * 1000,
        mem_gib * GIB,
        110,
        zones
            .iter()
            .map(|z| Offering::new(z, CapacityType::OnDemand, price))
            .collect(),
    )
}

fn snap(types: Vec<InstanceType>, pods: Vec<Pod>) -> Snapshot {
    Snapshot {
        pods: Snapshot::shared_pods(pods),
        nodepools: vec![NodePool::new("default", 0)],
        instance_types: types,
        ..Snapshot::default()
    }
}

fn zones3() -> Vec<InstanceType> {
    vec![
        it("small", 2, 4, 0.10, &["z1", "z2", "z3"]),
        it("large", 8, 16, 0.40, &["z1", "z2", "z3"]),
    ]
}

fn run(s: &Snapshot) -> SchedulingResult {
    schedule(s, &SchedulingOptions::default())
}

fn run_as(s: &Snapshot, strategy: Strategy) -> SchedulingResult {
    schedule(
        s,
        &SchedulingOptions {
            strategy,
            ..SchedulingOptions::default()
        },
    )
}

fn claim_of<'a>(r: &'a SchedulingResult, pod: &str) -> Option<&'a NewNodeClaim> {
    r.new_node_claims
        .iter()
        .find(|c| c.pods.iter().any(|p| p.name == pod))
}

fn term(key: &str, labels: &[(&str, &str)]) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: LabelSelector::from_labels(labels.iter().copied()),
        namespaces: vec![],
        namespace_selector: None,
        topology_key: key.into(),
        match_label_keys: vec![],
    }
}

#[test]
fn pods_fill_existing_nodes_before_new_ones() {
    let mut s = snap(
        zones3(),
        vec![
            Pod::new("ns", "a", 1000, GIB),
            Pod::new("ns", "b", 1000, GIB),
            Pod::new("ns", "c", 1000, GIB),
        ],
    );
    s.nodes.push(Node::new(
        "n1",
        "z1",
        Resources::with_pods(2000, 4 * GIB, 110),
    ));
    let r = run(&s);
    assert_eq!(r.existing_placements.len(), 2);
    assert_eq!(r.new_node_claims.len(), 1);
    assert_eq!(r.new_node_claims[0].launch.instance_type, "small");
}

#[test]
fn in_flight_nodes_take_pods() {
    let mut s = snap(zones3(), vec![Pod::new("ns", "a", 1000, GIB)]);
    let mut n = Node::new("claim-1", "z2", Resources::with_pods(2000, 4 * GIB, 110));
    n.in_flight = true;
    n.initialized = false;
    s.nodes.push(n);
    let r = run(&s);
    assert_eq!(
        r.existing_placements,
        vec![Placement {
            pod: PodRef {
                namespace: "ns".into(),
                name: "a".into()
            },
            node: "claim-1".into()
        }]
    );
}

#[test]
fn too_large_pod_gets_an_actionable_reason() {
    let r = run(&snap(zones3(), vec![Pod::new("ns", "big", 1000, 96 * GIB)]));
    assert_eq!(r.unschedulable.len(), 1);
    let reason = &r.unschedulable[0].reason;
    assert!(
        reason.contains(
            "no instance type has 96 GiB memory in NodePool default: largest allows 16 GiB"
        ),
        "{reason}"
    );
}

#[test]
fn extended_resources_need_a_type_that_has_them() {
    let mut gpu = it("gpu", 8, 32, 2.0, &["z1"]);
    gpu.capacity.extended.insert("nvidia.com/gpu".into(), 1);
    let mut pod = Pod::new("ns", "train", 1000, GIB);
    pod.containers[0]
        .extended
        .insert("nvidia.com/gpu".into(), 1);
    let r = run(&snap(vec![it("cpu", 8, 32, 0.3, &["z1"]), gpu], vec![pod]));
    assert_eq!(r.new_node_claims[0].launch.instance_type, "gpu");
}

#[test]
fn node_selector_pins_the_zone() {
    let mut p = Pod::new("ns", "a", 500, GIB);
    p.node_selector.insert(labels::ZONE.into(), "z2".into());
    let r = run(&snap(zones3(), vec![p]));
    assert_eq!(r.new_node_claims[0].launch.zone, "z2");
}

#[test]
fn required_node_affinity_or_terms_relax_in_order() {
    let mut p = Pod::new("ns", "a", 500, GIB);
    p.required_node_affinity = vec![
        vec![Requirement::new_in(labels::ZONE, &["nowhere"])],
        vec![Requirement::new_in(labels::ZONE, &["z3"])],
    ];
    let r = run(&snap(zones3(), vec![p]));
    assert_eq!(r.new_node_claims[0].launch.zone, "z3");
    assert_eq!(r.relaxations.len(), 1);
}

#[test]
fn preferred_node_affinity_is_tried_first_then_dropped() {
    let mut p = Pod::new("ns", "a", 500, GIB);
    p.preferred_node_affinity = vec![WeightedNodeSelectorTerm {
        weight: 50,
        term: vec![Requirement::new_in(labels::ZONE, &["z2"])],
    }];
    let r = run(&snap(zones3(), vec![p.clone()]));
    assert_eq!(r.new_node_claims[0].launch.zone, "z2");
    assert!(r.relaxations.is_empty());
    p.preferred_node_affinity[0].term = vec![Requirement::new_in(labels::ZONE, &["nowhere"])];
    let r = run(&snap(zones3(), vec![p]));
    assert_eq!(r.new_node_claims.len(), 1);
    assert_eq!(
        r.relaxations[0].relaxed,
        vec!["dropped a preferred node-affinity term".to_string()]
    );
}

#[test]
fn taints_need_tolerations() {
    let mut s = snap(zones3(), vec![Pod::new("ns", "a", 500, GIB)]);
    s.nodepools[0].taints.push(Taint::new(
        "dedicated",
        Some("gpu"),
        TaintEffect::NoSchedule,
    ));
    let r = run(&s);
    assert!(
        r.unschedulable[0]
            .reason
            .contains("does not tolerate taint dedicated=gpu:NoSchedule"),
        "{}",
        r.unschedulable[0].reason
    );
    std::sync::Arc::make_mut(&mut s.pods[0])
        .tolerations
        .push(Toleration::equal(
            "dedicated",
            "gpu",
            Some(TaintEffect::NoSchedule),
        ));
    assert_eq!(run(&s).new_node_claims.len(), 1);
}

#[test]
fn startup_taints_need_no_toleration() {
    let mut s = snap(zones3(), vec![Pod::new("ns", "a", 500, GIB)]);
    s.nodepools[0]
        .startup_taints
        .push(Taint::new("init", None, TaintEffect::NoSchedule));
    assert_eq!(run(&s).new_node_claims.len(), 1);
}

#[test]
fn prefer_no_schedule_is_relaxed_last() {
    let mut s = snap(vec![], vec![Pod::new("ns", "a", 500, GIB)]);
    let mut n = Node::new("n1", "z1", Resources::with_pods(2000, 4 * GIB, 110));
    n.taints
        .push(Taint::new("soft", None, TaintEffect::PreferNoSchedule));
    s.nodes.push(n);
    let r = run(&s);
    assert_eq!(r.existing_placements.len(), 1);
    assert_eq!(
        r.relaxations[0].relaxed.last().map(String::as_str),
        Some("tolerated PreferNoSchedule taints")
    );
}

fn spread(key: &str, skew: i32, app: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: skew,
        topology_key: key.into(),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        label_selector: LabelSelector::from_labels([("app", app)]),
        min_domains: None,
        node_affinity_policy: None,
        node_taints_policy: None,
        match_label_keys: vec![],
    }
}

#[test]
fn zone_spread_balances_across_zones() {
    let pods: Vec<Pod> = (0..6)
        .map(|i| {
            let mut p = Pod::new("ns", &format!("p{i}"), 500, GIB).label("app", "web");
            p.topology_spread.push(spread(labels::ZONE, 1, "web"));
            p
        })
        .collect();
    let r = run(&snap(zones3(), pods));
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for c in &r.new_node_claims {
        *per_zone.entry(c.launch.zone.clone()).or_default() += c.pods.len();
    }
    assert_eq!(
        per_zone.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2],
        "{per_zone:?}"
    );
}

#[test]
fn zone_spread_counts_existing_pods() {
    // Existing: z1 has 2 matching pods; a new pod must go to an empty zone, not to z1.
    let mut s = snap(zones3(), vec![]);
    s.nodes.push(Node::new(
        "n1",
        "z1",
        Resources::with_pods(8000, 16 * GIB, 110),
    ));
    s.pods.push(
        Pod::new("ns", "old1", 100, GIB)
            .label("app", "web")
            .on("n1")
            .into(),
    );
    s.pods.push(
        Pod::new("ns", "old2", 100, GIB)
            .label("app", "web")
            .on("n1")
            .into(),
    );
    let mut p = Pod::new("ns", "new", 500, GIB).label("app", "web");
    p.topology_spread.push(spread(labels::ZONE, 1, "web"));
    s.pods.push(std::sync::Arc::new(p));
    let r = run(&s);
    assert!(r.existing_placements.is_empty());
    assert_ne!(r.new_node_claims[0].launch.zone, "z1");
}

#[test]
fn hostname_spread_limits_pods_per_node() {
    let pods: Vec<Pod> = (0..4)
        .map(|i| {
            let mut p = Pod::new("ns", &format!("p{i}"), 100, GIB / 4).label("app", "web");
            p.topology_spread.push(spread(labels::HOSTNAME, 2, "web"));
            p
        })
        .collect();
    let r = run(&snap(zones3(), pods));
    assert_eq!(r.new_node_claims.len(), 2);
    assert!(r.new_node_claims.iter().all(|c| c.pods.len() == 2));
}

#[test]
fn hostname_anti_affinity_puts_each_pod_on_its_own_node() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = Pod::new("ns", &format!("p{i}"), 100, GIB / 4).label("app", "db");
            p.pod_anti_affinity
                .required
                .push(term(labels::HOSTNAME, &[("app", "db")]));
            p
        })
        .collect();
    let r = run(&snap(zones3(), pods));
    assert_eq!(r.new_node_claims.len(), 3);
}

#[test]
fn zone_self_affinity_keeps_the_group_in_one_zone() {
    let pods: Vec<Pod> = (0..5)
        .map(|i| {
            let mut p = Pod::new("ns", &format!("p{i}"), 1500, 3 * GIB).label("team", "x");
            p.pod_affinity
                .required
                .push(term(labels::ZONE, &[("team", "x")]));
            p
        })
        .collect();
    let r = run(&snap(zones3(), pods));
    let zones: std::collections::BTreeSet<_> = r
        .new_node_claims
        .iter()
        .map(|c| c.launch.zone.clone())
        .collect();
    assert_eq!(zones.len(), 1, "{zones:?}");
    assert!(r.unschedulable.is_empty());
}

#[test]
fn pod_affinity_follows_existing_pods() {
    let mut s = snap(zones3(), vec![]);
    s.nodes
        .push(Node::new("n1", "z3", Resources::with_pods(1000, GIB, 110)));
    s.pods.push(
        Pod::new("ns", "db", 900, GIB / 2)
            .label("app", "db")
            .on("n1")
            .into(),
    );
    let mut p = Pod::new("ns", "cache", 500, GIB).label("app", "cache");
    p.pod_affinity
        .required
        .push(term(labels::ZONE, &[("app", "db")]));
    s.pods.push(std::sync::Arc::new(p));
    let r = run(&s);
    assert_eq!(r.new_node_claims[0].launch.zone, "z3");
}

#[test]
fn hostname_self_affinity_co_locates() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = Pod::new("ns", &format!("p{i}"), 1000, GIB).label("app", "pair");
            p.pod_affinity
                .required
                .push(term(labels::HOSTNAME, &[("app", "pair")]));
            p
        })
        .collect();
    let r = run(&snap(zones3(), pods));
    assert_eq!(r.new_node_claims.len(), 1);
    assert_eq!(r.new_node_claims[0].pods.len(), 3);
}

#[test]
fn inverse_anti_affinity_of_existing_pods() {
    let mut s = snap(zones3(), vec![]);
    s.nodes.push(Node::new(
        "n1",
        "z1",
        Resources::with_pods(8000, 16 * GIB, 110),
    ));
    let mut guard = Pod::new("ns", "guard", 100, GIB).on("n1");
    guard
        .pod_anti_affinity
        .required
        .push(term(labels::HOSTNAME, &[("app", "web")]));
    s.pods.push(std::sync::Arc::new(guard));
    s.pods
        .push(Pod::new("ns", "web", 100, GIB).label("app", "web").into());
    s.pods
        .push(std::sync::Arc::new(Pod::new("ns", "other", 100, GIB)));
    let r = run(&s);
    assert_eq!(r.existing_placements.len(), 1);
    assert_eq!(r.existing_placements[0].pod.name, "other");
    assert!(claim_of(&r, "web").is_some());
}

#[test]
fn zone_anti_affinity_across_new_nodes() {
    let pods: Vec<Pod> = (0..4)
        .map(|i| {
            let mut p = Pod::new("ns", &format!("p{i}"), 100, GIB / 4).label("app", "one-per-zone");
            p.pod_anti_affinity
                .required
                .push(term(labels::ZONE, &[("app", "one-per-zone")]));
            p
        })
        .collect();
    let r = run(&snap(zones3(), pods));
    assert_eq!(r.new_node_claims.len(), 3);
    assert_eq!(r.unschedulable.len(), 1, "three zones hold three pods");
}

#[test]
fn host_ports_conflict() {
    let mut s = snap(zones3(), vec![]);
    s.nodes.push(Node::new(
        "n1",
        "z1",
        Resources::with_pods(8000, 16 * GIB, 110),
    ));
    let port = HostPort {
        port: 8080,
        protocol: Protocol::TCP,
        host_ip: None,
    };
    let mut old = Pod::new("ns", "old", 100, GIB).on("n1");
    old.host_ports.push(port.clone());
    s.pods.push(std::sync::Arc::new(old));
    for i in 0..2 {
        let mut p = Pod::new("ns", &format!("p{i}"), 100, GIB / 4);
        p.host_ports.push(port.clone());
        s.pods.push(std::sync::Arc::new(p));
    }
    let r = run(&s);
    assert!(r.existing_placements.is_empty());
    assert_eq!(r.new_node_claims.len(), 2);
}

#[test]
fn volume_topology_pins_the_zone() {
    let mut p = Pod::new("ns", "a", 500, GIB);
    p.volumes.push(Volume {
        name: "data".into(),
        node_affinity: vec![vec![Requirement::new_in(labels::ZONE, &["z3"])]],
        csi_driver: None,
    });
    let r = run(&snap(zones3(), vec![p]));
    assert_eq!(r.new_node_claims[0].launch.zone, "z3");
}

#[test]
fn csi_attach_limits_count() {
    let mut t = it("small", 8, 16, 0.1, &["z1"]);
    t.csi_limits.insert("ebs".into(), 1);
    let pods: Vec<Pod> = (0..2)
        .map(|i| {
            let mut p = Pod::new("ns", &format!("p{i}"), 100, GIB);
            p.volumes.push(Volume {
                name: format!("v{i}"),
                node_affinity: vec![],
                csi_driver: Some("ebs".into()),
            });
            p
        })
        .collect();
    let r = run(&snap(vec![t], pods));
    assert_eq!(r.new_node_claims.len(), 2);
}

#[test]
fn daemonset_overhead_is_reserved_per_type() {
    let mut s = snap(zones3(), vec![Pod::new("ns", "a", 1500, GIB)]);
    let mut ds = Pod::new("kube-system", "agent", 1000, GIB);
    ds.owner_kind = Some("DaemonSet".into());
    s.daemonsets.push(DaemonSet {
        namespace: "kube-system".into(),
        name: "agent".into(),
        pod: ds,
    });
    let r = run(&s);
    // small has 2 vCPU: 1 for the daemonset leaves 1, too little for 1.5.
    assert_eq!(r.new_node_claims[0].launch.instance_type, "large");
    assert_eq!(r.new_node_claims[0].daemonset_requests.cpu_milli, 1000);
}

#[test]
fn daemonsets_that_do_not_tolerate_a_pool_cost_nothing_there() {
    let mut s = snap(zones3(), vec![Pod::new("ns", "a", 1500, GIB)]);
    s.nodepools[0]
        .taints
        .push(Taint::new("dedicated", None, TaintEffect::NoSchedule));
    std::sync::Arc::make_mut(&mut s.pods[0])
        .tolerations
        .push(Toleration {
            key: Some("dedicated".into()),
            operator: TolerationOperator::Exists,
            ..Default::default()
        });
    let mut ds = Pod::new("kube-system", "agent", 1000, GIB);
    ds.owner_kind = Some("DaemonSet".into());
    s.daemonsets.push(DaemonSet {
        namespace: "kube-system".into(),
        name: "agent".into(),
        pod: ds,
    });
    assert_eq!(run(&s).new_node_claims[0].launch.instance_type, "small");
}

#[test]
fn nodepool_limits_stop_launches() {
    let mut s = snap(
        vec![it("four", 4, 8, 0.2, &["z1"])],
        (0..3)
            .map(|i| Pod::new("ns", &format!("p{i}"), 3000, GIB))
            .collect(),
    );
    s.nodepools[0].limits = Some(Resources::new(8000, 0));
    let r = run(&s);
    assert_eq!(r.new_node_claims.len(), 2);
    assert_eq!(r.unschedulable.len(), 1);
    assert!(
        r.unschedulable[0].reason.contains("limits"),
        "{}",
        r.unschedulable[0].reason
    );
}

#[test]
fn heavier_nodepools_win() {
    let mut s = snap(zones3(), vec![Pod::new("ns", "a", 500, GIB)]);
    let mut expensive = NodePool::new("preferred", 50);
    expensive.instance_types = Some(vec!["large".into()]);
    s.nodepools.push(expensive);
    let r = run(&s);
    assert_eq!(r.new_node_claims[0].nodepool, "preferred");
}

#[test]
fn min_values_keep_flexibility() {
    let types: Vec<InstanceType> = (1..=6)
        .map(|i| it(&format!("t{i}"), i, 2 * i, 0.05 * i as f64, &["z1"]))
        .collect();
    let mut s = snap(
        types,
        (0..4)
            .map(|i| Pod::new("ns", &format!("p{i}"), 900, GIB))
            .collect(),
    );
    s.nodepools[0].requirements.push(Requirement {
        key: labels::INSTANCE_TYPE.into(),
        operator: Operator::Exists,
        values: vec![],
        min_values: Some(3),
    });
    let r = run(&s);
    assert!(r.unschedulable.is_empty(), "{:?}", r.unschedulable);
    for c in &r.new_node_claims {
        assert!(
            c.instance_type_options.len() >= 3,
            "{:?}",
            c.instance_type_options.len()
        );
    }
}

#[test]
fn launch_is_the_cheapest_option_and_zone() {
    let mut t = it("m", 4, 8, 0.3, &["z1", "z2"]);
    t.offerings
        .push(Offering::new("z3", CapacityType::Spot, 0.1));
    let mut unavailable = Offering::new("z2", CapacityType::Spot, 0.01);
    unavailable.available = false;
    t.offerings.push(unavailable);
    let r = run(&snap(vec![t], vec![Pod::new("ns", "a", 1000, GIB)]));
    let l = &r.new_node_claims[0].launch;
    assert_eq!(
        (l.zone.as_str(), l.capacity_type, l.price),
        ("z3", CapacityType::Spot, 0.1)
    );
}

#[test]
fn cost_aware_does_not_grow_toward_the_largest_type() {
    // Karpenter #2457: the big type is dearer per vCPU, so ten 1-vCPU pods belong on small nodes.
    let types = vec![
        it("small", 2, 8, 0.10, &["z1"]),
        it("huge", 64, 256, 4.0, &["z1"]),
    ];
    let pods: Vec<Pod> = (0..10)
        .map(|i| Pod::new("ns", &format!("p{i}"), 1000, GIB))
        .collect();
    let s = snap(types, pods);
    let ours = schedule(&s, &SchedulingOptions::default());
    let base = schedule(
        &s,
        &SchedulingOptions {
            strategy: Strategy::KarpenterBaseline,
            ..Default::default()
        },
    );
    assert!(
        ours.new_node_cost_per_hour < base.new_node_cost_per_hour,
        "{} vs {}",
        ours.new_node_cost_per_hour,
        base.new_node_cost_per_hour
    );
    assert!((ours.new_node_cost_per_hour - 0.5).abs() < 1e-9);
}

#[test]
fn cost_aware_mixes_cpu_and_memory_heavy_pods() {
    // One 4 vCPU / 16 GiB type, two CPU-heavy (2 vCPU, 1 GiB) and two memory-heavy (0.25 vCPU,
    // 7 GiB) pods: the heuristic mixes them instead of keeping the kinds apart.
    let types = vec![it("m", 4, 16, 0.2, &["z1"])];
    let mut pods: Vec<Pod> = (0..2)
        .map(|i| Pod::new("ns", &format!("cpu{i}"), 2000, GIB))
        .collect();
    pods.extend((0..2).map(|i| Pod::new("ns", &format!("mem{i}"), 250, 7 * GIB)));
    let r = run(&snap(types, pods));
    assert_eq!(r.new_node_claims.len(), 2);
    assert!(
        r.new_node_claims
            .iter()
            .any(|c| c.pods.iter().any(|p| p.name.starts_with("cpu"))
                && c.pods.iter().any(|p| p.name.starts_with("mem"))),
        "CPU-heavy and memory-heavy pods share a node: {:?}",
        r.new_node_claims
            .iter()
            .map(|c| &c.pods)
            .collect::<Vec<_>>()
    );
}

#[test]
fn daemonset_and_bound_pods_are_not_provisioned_for() {
    let mut ds = Pod::new("kube-system", "agent-x", 100, GIB);
    ds.owner_kind = Some("DaemonSet".into());
    let r = run(&snap(zones3(), vec![ds]));
    assert_eq!(r.placed_pods() + r.unschedulable.len(), 0);
}

#[test]
fn result_round_trips_through_json() {
    let r = run(&snap(zones3(), vec![Pod::new("ns", "a", 500, GIB)]));
    let text = serde_json::to_string(&r).expect("serializes");
    let back: SchedulingResult = serde_json::from_str(&text).expect("parses");
    assert_eq!(back, r);
}

#[test]
fn consolidation_reuses_the_state() {
    let mut s = snap(zones3(), vec![]);
    s.nodes.push(Node::new(
        "n1",
        "z1",
        Resources::with_pods(2000, 4 * GIB, 110),
    ));
    s.nodes.push(Node::new(
        "n2",
        "z1",
        Resources::with_pods(2000, 4 * GIB, 110),
    ));
    s.pods
        .push(std::sync::Arc::new(Pod::new("ns", "a", 500, GIB).on("n1")));
    s.pods
        .push(std::sync::Arc::new(Pod::new("ns", "b", 500, GIB).on("n2")));
    let base = ClusterState::new(&s);
    let mut trial = base.clone();
    let moved = trial.remove_nodes(&["n1"]);
    assert_eq!(moved.len(), 1);
    let r = schedule_on(&mut trial, &moved, &SchedulingOptions::default());
    assert_eq!(r.existing_placements[0].node, "n2");
    assert!(r.new_node_claims.is_empty());
    // The base state is untouched.
    assert_eq!(base.nodes[1].used.cpu_milli, 500);
}

/// The optimiser behind the packing interface says in the scheduling result what it did and
/// how far from the bound the launch is.
#[test]
fn optimiser_result_carries_bound_gap_and_notes() {
    use provisioner_core::optimize::Optimizer;
    let mut snapshot = Snapshot {
        nodepools: vec![NodePool::new("default", 0)],
        instance_types: vec![
            InstanceType::new(
                "small",
                2_000,
                4 << 30,
                110,
                vec![Offering::new("z1", CapacityType::OnDemand, 0.1)],
            ),
            InstanceType::new(
                "large",
                8_000,
                16 << 30,
                110,
                vec![Offering::new("z1", CapacityType::OnDemand, 0.35)],
            ),
        ],
        ..Snapshot::default()
    };
    for i in 0..6 {
        snapshot
            .pods
            .push(Pod::new("default", &format!("p{i}"), 900, 1 << 30).into());
    }
    let mut state = ClusterState::new(&snapshot);
    let pending: Vec<Pod> = snapshot.pods.iter().map(|p| Pod::clone(p)).collect();
    let result = schedule_with(
        &mut state,
        &pending,
        &SchedulingOptions::default(),
        &Optimizer::default(),
    );
    assert_eq!(result.placed_pods(), 6);
    let bound = result
        .cost_lower_bound
        .expect("the optimiser reports a bound");
    assert!(bound <= result.new_node_cost_per_hour + 1e-9);
    let gap = result
        .cost_gap_percent
        .expect("a gap with a positive bound");
    assert!(gap >= -1e-6, "gap {gap}");
    assert!(
        result
            .planner_notes
            .iter()
            .any(|n| n.starts_with("optimised") || n.starts_with("heuristic kept")),
        "notes: {:?}",
        result.planner_notes
    );
}

#[test]
fn a_price_cap_skips_building_claims_only_when_the_nodes_cost_at_least_that() {
    // Two 1.5-vCPU pods: one "large" (0.40/h) or two "small" (0.10/h each).
    let pods = vec![
        Pod::new("default", "a", 1500, GIB),
        Pod::new("default", "b", 1500, GIB),
    ];
    let s = snap(zones3(), pods.clone());
    let opts = SchedulingOptions::default();
    let planner = opts.strategy.planner();
    let plain = run(&s);
    assert!(!plain.over_price_cap);
    let cost = plain.new_node_cost_per_hour;
    assert!(cost > 0.0 && !plain.new_node_claims.is_empty());
    let least: f64 = plain
        .new_node_claims
        .iter()
        .map(|c| c.instance_type_options[0].cheapest.price)
        .sum();

    // A cap above what the nodes can cost: the same claims as without one.
    let mut state = state::ClusterState::new(&s);
    let above = schedule_capped(&mut state, &pods, &opts, planner, Some(least + 0.01));
    assert!(!above.over_price_cap);
    assert_eq!(above.new_node_claims, plain.new_node_claims);

    // At the least cost: no claims, and the least cost is reported.
    let mut state = state::ClusterState::new(&s);
    let at = schedule_capped(&mut state, &pods, &opts, planner, Some(least));
    assert!(at.over_price_cap);
    assert!(at.new_node_claims.is_empty());
    assert!((at.new_node_cost_per_hour - least).abs() < 1e-12);
    assert!(
        at.unschedulable.is_empty(),
        "the pods do fit: {:?}",
        at.unschedulable
    );
}

/// Nodes `n1` in z1 and `n2` in z2 (being deleted when `n2_going`), only z1 launchable;
/// `first` (app=db) runs on `n2` and `next` (app=db) has a required zone affinity to app=db.
fn zone_affinity_to_a_pod_on_n2(n2_going: bool) -> Snapshot {
    let mut s = snap(vec![it("small", 2, 4, 0.10, &["z1"])], vec![]);
    s.nodes.push(Node::new(
        "n1",
        "z1",
        Resources::with_pods(4000, 8 * GIB, 110),
    ));
    let mut n2 = Node::new("n2", "z2", Resources::with_pods(4000, 8 * GIB, 110));
    n2.marked_for_deletion = n2_going;
    s.nodes.push(n2);
    let mut first = Pod::new("default", "first", 100, GIB).label("app", "db");
    first.node_name = Some("n2".into());
    let mut next = Pod::new("default", "next", 100, GIB).label("app", "db");
    next.pod_affinity
        .required
        .push(term(labels::ZONE, &[("app", "db")]));
    s.pods = vec![first.into(), next.into()];
    s
}

/// Required zone affinity to a pod that runs on an existing node in a zone no launchable type
/// offers: the pod must join it there, not bootstrap a new domain (it used to look for
/// matching pods only in the zones of launchable shapes, found none, and went anywhere). The
/// property tests found this (a self-affine group split over two zones).
#[test]
fn affinity_sees_matching_pods_on_existing_nodes_in_any_zone() {
    let r = run(&zone_affinity_to_a_pod_on_n2(false));
    assert_eq!(r.existing_placements.len(), 1, "{r:?}");
    assert_eq!(r.existing_placements[0].node, "n2", "{r:?}");
}

/// The same, but the node that runs the matching pod is being deleted: its pods no longer
/// count, so the pod starts its group where it can run (on `n1` in z1) instead of waiting
/// for a zone whose only node is going.
#[test]
fn affinity_ignores_matching_pods_in_a_zone_whose_nodes_are_all_going() {
    let r = run(&zone_affinity_to_a_pod_on_n2(true));
    assert!(r.unschedulable.is_empty(), "{r:?}");
    assert_eq!(r.existing_placements.len(), 1, "{r:?}");
    assert_eq!(r.existing_placements[0].node, "n1", "{r:?}");
}

fn baseline(s: &Snapshot) -> SchedulingResult {
    schedule(
        s,
        &SchedulingOptions {
            strategy: Strategy::KarpenterBaseline,
            ..Default::default()
        },
    )
}

fn big3() -> Vec<InstanceType> {
    vec![it("big", 8, 32, 0.40, &["z1", "z2", "z3"])]
}

fn anti(name: &str, cpu: i64) -> Pod {
    let mut p = Pod::new("ns", name, cpu, GIB).label("app", "x");
    p.pod_anti_affinity
        .required
        .push(term(labels::HOSTNAME, &[("app", "x")]));
    p
}

/// Karpenter decides a zone-spread pod's zone on the in-flight NodeClaim it tries: any zone
/// whose skew allows the pod will do (`nextDomainTopologySpread` over the NodeClaim's
/// zones), not only the least-loaded one. Here `s1` pins the only NodeClaim to z1 (counts
/// z1=1); `t` selects the same pods but is not one of them, so z1 has skew 1 - 0 <= 1 and
/// `t` joins the NodeClaim in z1. Deciding zones first would send `t` to an empty zone, on
/// a second node.
#[test]
fn karpenter_baseline_spread_pod_joins_an_in_flight_claim_its_skew_allows() {
    let mut s1 = Pod::new("ns", "s1", 1000, GIB).label("app", "s");
    s1.topology_spread.push(spread(labels::ZONE, 1, "s"));
    let mut t = Pod::new("ns", "t", 500, GIB).label("app", "t");
    t.topology_spread.push(spread(labels::ZONE, 1, "s"));
    let r = baseline(&snap(big3(), vec![anti("a", 2000), s1, t]));
    assert_eq!(r.new_node_claims.len(), 1, "{:?}", r.new_node_claims);
    let c = &r.new_node_claims[0];
    assert_eq!(c.launch.zone, "z1");
    let names: Vec<&str> = c.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["a", "s1", "t"]);
}

/// Karpenter sorts its in-flight NodeClaims by pod count before every pod with Go's
/// `sort.Slice`, stable on short lists: the NodeClaim that just took a pod comes first
/// among those with as many pods, a new one last. a1 and a2 open A and B; c joins A (both
/// have one pod, A is older); d joins B (one pod); now both have two and B took the last
/// pod, so e joins B. Oldest-first would put e on A.
#[test]
fn karpenter_baseline_tries_in_flight_claims_in_karpenters_order() {
    let pods = vec![
        anti("a1", 3000),
        anti("a2", 2900),
        Pod::new("ns", "c", 2000, GIB),
        Pod::new("ns", "d", 1900, GIB),
        Pod::new("ns", "e", 1000, GIB),
    ];
    let r = baseline(&snap(big3(), pods));
    let names = |p: &str| -> Vec<String> {
        claim_of(&r, p)
            .map(|c| c.pods.iter().map(|x| x.name.clone()).collect())
            .unwrap_or_default()
    };
    assert_eq!(names("a1"), vec!["a1", "c"]);
    assert_eq!(names("a2"), vec!["a2", "d", "e"]);
}

/// A hostname spread constrains the pod that carries it when it lands (the kube-scheduler
/// and Karpenter check only the incoming pod's spreads): `p0`, with no constraint of its
/// own, may join `p1`'s node although `p1`'s spread then counts two. The baseline does what
/// Karpenter does (one node); the default planner keeps every pod's spread true in the
/// final state (two nodes).
#[test]
fn karpenter_baseline_hostname_spread_binds_only_the_arriving_pod() {
    let mut p1 = Pod::new("ns", "p1", 1000, GIB).label("app", "a");
    p1.topology_spread.push(spread(labels::HOSTNAME, 1, "a"));
    let p0 = Pod::new("ns", "p0", 500, GIB).label("app", "a");
    let s = snap(big3(), vec![p1, p0]);
    assert_eq!(baseline(&s).new_node_claims.len(), 1);
    assert_eq!(run(&s).new_node_claims.len(), 2);
}

#[test]
fn pod_affinity_never_follows_a_pod_the_launch_plan_drops() {
    // `p` (zone-affine to app=a) fills the only existing node, in z2. New nodes come only
    // in z1, and the pool's limit holds one of them: `w` and `x` each need one, so the plan
    // drops `x` (app=a). `y` (zone-affine to app=a, no room in z2) would otherwise follow
    // `x` into z1 and launch on w's node in a zone where no app=a pod runs, away from `p`.
    let affine = |name: &str, cpu: i64| {
        let mut pod = Pod::new("ns", name, cpu, GIB / 4).label("app", "a");
        pod.pod_affinity.required = vec![term(labels::ZONE, &[("app", "a")])];
        pod
    };
    let mut w = Pod::new("ns", "w", 1800, GIB / 4).label("app", "w");
    w.node_selector.insert(labels::ZONE.into(), "z1".into());
    let mut x = Pod::new("ns", "x", 1500, GIB / 4).label("app", "a");
    x.node_selector.insert(labels::ZONE.into(), "z1".into());
    let mut s = snap(
        vec![it("c2", 2, 4, 0.10, &["z1"])],
        vec![affine("p", 2000), w, x, affine("y", 100)],
    );
    s.nodepools[0].limits = Some(Resources::new(2000, 0));
    s.nodes.push(Node::new(
        "old",
        "z2",
        Resources::with_pods(2000, 4 * GIB, 110),
    ));
    let r = run(&s);
    let placed_on = |pod: &str| {
        r.existing_placements
            .iter()
            .find(|p| p.pod.name == pod)
            .map(|p| p.node.clone())
    };
    assert_eq!(placed_on("p").as_deref(), Some("old"));
    assert!(claim_of(&r, "w").is_some(), "{r:?}");
    let pending: Vec<&str> = r
        .unschedulable
        .iter()
        .map(|u| u.pod.name.as_str())
        .collect();
    assert!(
        pending.contains(&"x"),
        "the limit leaves x out: {pending:?}"
    );
    assert!(
        claim_of(&r, "y").is_none() && pending.contains(&"y"),
        "y must wait for room next to p, not launch in z1: {r:?}"
    );
    assert_eq!(r.unschedulable.len(), 2, "{pending:?}");
}

#[test]
fn a_gpu_node_never_narrows_to_a_type_without_gpus() {
    // `web` may only run on `cpu` nodes. Joining the GPU pod's node would leave that node
    // no type with both a GPU and room; the plan lost such nodes, and verification then
    // rejected the whole plan, so nothing new launched.
    let mut gpu = it("gpu", 8, 32, 2.0, &["z1"]);
    gpu.capacity.extended.insert("nvidia.com/gpu".into(), 1);
    let types = vec![gpu, it("cpu", 8, 32, 0.2, &["z1"])];
    let mut train = Pod::new("ns", "train", 1000, GIB);
    train.containers[0]
        .extended
        .insert("nvidia.com/gpu".into(), 1);
    let mut web = Pod::new("ns", "web", 500, GIB);
    web.node_selector
        .insert(labels::INSTANCE_TYPE.into(), "cpu".into());
    for strategy in [Strategy::CostAware, Strategy::KarpenterBaseline] {
        let s = snap(types.clone(), vec![train.clone(), web.clone()]);
        let r = run_as(&s, strategy);
        assert!(
            r.unschedulable.is_empty(),
            "{strategy:?}: {:?}",
            r.unschedulable
        );
        let launched = |pod: &str| claim_of(&r, pod).map(|c| c.launch.instance_type.clone());
        assert_eq!(launched("train").as_deref(), Some("gpu"), "{strategy:?}");
        assert_eq!(launched("web").as_deref(), Some("cpu"), "{strategy:?}");
    }
}

#[test]
fn a_nodepool_whose_min_values_a_pod_breaks_gives_way_to_the_next() {
    // `flex` (heavier) wants two instance types on every NodeClaim; `pinned` allows one, so
    // Karpenter moves on to the next NodePool instead of leaving the pod pending.
    let types = vec![it("a", 2, 4, 0.1, &["z1"]), it("b", 4, 8, 0.2, &["z1"])];
    let mut pinned = Pod::new("ns", "pinned", 500, GIB);
    pinned
        .node_selector
        .insert(labels::INSTANCE_TYPE.into(), "a".into());
    let free = Pod::new("ns", "free", 500, GIB);
    let mut s = snap(types, vec![pinned, free]);
    let mut flex = NodePool::new("flex", 10);
    flex.requirements.push(Requirement {
        key: labels::INSTANCE_TYPE.into(),
        operator: Operator::Exists,
        values: vec![],
        min_values: Some(2),
    });
    s.nodepools.push(flex);
    for strategy in [Strategy::CostAware, Strategy::KarpenterBaseline] {
        let r = run_as(&s, strategy);
        assert!(
            r.unschedulable.is_empty(),
            "{strategy:?}: {:?}",
            r.unschedulable
        );
        let pool = |pod: &str| claim_of(&r, pod).map(|c| c.nodepool.clone());
        assert_eq!(pool("pinned").as_deref(), Some("default"), "{strategy:?}");
        assert_eq!(pool("free").as_deref(), Some("flex"), "{strategy:?}");
    }
}

/// A round of many pods in few request classes (two Deployments scaled up) goes to the
/// optimiser, from the heuristic's plan: never dearer, with a proven bound; without
/// `large_rounds` it is the heuristic's plan.
#[test]
fn large_rounds_are_planned_by_the_optimiser() {
    let types = vec![
        it("c", 8, 16, 0.34, &["z1"]),
        it("m", 8, 32, 0.38, &["z1"]),
        it("r", 8, 64, 0.50, &["z1"]),
        it("c4", 32, 64, 1.36, &["z1"]),
        it("r4", 32, 256, 2.00, &["z1"]),
    ];
    let mut pods = Vec::new();
    for i in 0..60 {
        pods.push(Pod::new("ns", &format!("cpu-{i}"), 3000, 2 * GIB));
        pods.push(Pod::new("ns", &format!("mem-{i}"), 500, 12 * GIB));
    }
    let s = snap(types, pods);
    let optimised = run(&s);
    let heuristic = schedule(
        &s,
        &SchedulingOptions {
            large_rounds: None,
            ..SchedulingOptions::default()
        },
    );
    assert_eq!(heuristic.strategy, "cost-aware");
    assert_eq!(optimised.strategy, "cost-aware+optimiser");
    for r in [&optimised, &heuristic] {
        assert!(r.unschedulable.is_empty(), "{:?}", r.unschedulable);
        assert_eq!(r.placed_pods(), 120);
    }
    assert!(
        optimised.new_node_cost_per_hour <= heuristic.new_node_cost_per_hour + 1e-9,
        "{} > {}",
        optimised.new_node_cost_per_hour,
        heuristic.new_node_cost_per_hour
    );
    let bound = optimised.cost_lower_bound.expect("the optimiser's bound");
    assert!(bound <= optimised.new_node_cost_per_hour + 1e-9);
    // The Karpenter baseline never goes to the optimiser.
    assert_eq!(
        run_as(&s, Strategy::KarpenterBaseline).strategy,
        Strategy::KarpenterBaseline.planner().name()
    );
}
