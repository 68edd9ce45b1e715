//! Method-level tests and property tests of the disruption decision.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::karpenter_baseline::karpenter_consolidation;
use super::*;
use crate::model::*;
use crate::resources::pod_requests;

pub(super) const GIB: i64 = 1 << 30;

/// Four on-demand types in two zones, spot at 30% of the price; price is 0.05/vCPU.
pub(super) fn types() -> Vec<InstanceType> {
    [
        ("small", 2),
        ("medium", 4),
        ("large", 8),
        ("xlarge", 16),
        ("xxlarge", 32),
    ]
    .iter()
    .map(|(name, cpu)| {
        let price = 0.05 * f64::from(*cpu);
        InstanceType::new(
            name,
            i64::from(*cpu) * 1000,
            i64::from(*cpu) * 2 * GIB,
            110,
            vec![
                Offering::new("zone-a", CapacityType::OnDemand, price),
                Offering::new("zone-b", CapacityType::OnDemand, price),
                Offering::new("zone-a", CapacityType::Spot, price * 0.3),
                Offering::new("zone-b", CapacityType::Spot, price * 0.3),
            ],
        )
    })
    .collect()
}

pub(super) fn node_of(
    types: &[InstanceType],
    name: &str,
    ty: &str,
    zone: &str,
    ct: CapacityType,
    pool: &str,
) -> Node {
    let it = types.iter().find(|t| t.name == ty).expect("known type");
    let price = it
        .offerings
        .iter()
        .find(|o| o.zone == zone && o.capacity_type == ct)
        .map_or(1.0, |o| o.price);
    let mut n = Node::new(name, zone, it.allocatable());
    n.labels.insert(labels::INSTANCE_TYPE.into(), ty.into());
    n.labels
        .insert(labels::CAPACITY_TYPE.into(), ct.as_label().into());
    n.labels.insert(labels::NODEPOOL.into(), pool.into());
    n.nodepool = Some(pool.into());
    n.instance_type = Some(ty.into());
    n.price = price;
    n
}

pub(super) fn pod(name: &str, cpu: i64, node: &str) -> Pod {
    let mut p = Pod::new("default", name, cpu, cpu * GIB / 1000)
        .on(node)
        .label("app", name);
    p.owner_kind = Some("ReplicaSet".into());
    p
}

pub(super) fn snapshot(nodes: Vec<Node>, pods: Vec<Pod>) -> Snapshot {
    let mut pool = NodePool::new("default", 0);
    pool.disruption.budgets = vec![Budget {
        nodes: "100%".into(),
        reasons: vec![],
        schedule: None,
        duration_secs: None,
    }];
    pool.expire_after_secs = None;
    Snapshot {
        now: 1_000_000,
        nodes,
        pods: Snapshot::shared_pods(pods),
        nodepools: vec![pool],
        instance_types: types(),
        ..Snapshot::default()
    }
}

/// Two 0.4/h nodes: `n1` with three pods (5 vCPU), `n2` with one (1.5 vCPU) that fits on `n1`.
pub(super) fn two_large_nodes() -> Snapshot {
    snapshot(
        vec![od("n1", "large"), od("n2", "large")],
        vec![
            pod("a", 2000, "n1"),
            pod("b", 2000, "n1"),
            pod("c", 1000, "n1"),
            pod("d", 1500, "n2"),
        ],
    )
}

/// Options for [`two_large_nodes`]' question (does deleting `n2` pay?): 24 hours of a pod's
/// price per eviction, where the move saves 1.6 over the 4 h cap against 1.95 (the pod is
/// priced at the average pod's share, 0.4/h x 6.5 of 8 vCPU over 4 pods = 0.08125/h); `payback`
/// sets the rest. No headroom rule.
pub(super) fn pricey_evictions(payback: payback::Payback) -> DisruptionOptions {
    DisruptionOptions {
        payback: Some(payback::Payback {
            eviction_pod_hours: 24.0,
            ..payback
        }),
        headroom: None,
        ..DisruptionOptions::default()
    }
}

/// The nodes a consolidation command takes, if the decision is one.
pub(super) fn consolidates(s: &Snapshot, opts: &DisruptionOptions) -> Option<Vec<String>> {
    disrupt(s, opts)
        .command
        .filter(|c| c.method == Method::Consolidation)
        .map(|c| c.candidate_names().into_iter().map(String::from).collect())
}

pub(super) fn od(name: &str, ty: &str) -> Node {
    node_of(
        &types(),
        name,
        ty,
        "zone-a",
        CapacityType::OnDemand,
        "default",
    )
}

pub(super) fn names(cmd: &Command) -> Vec<&str> {
    cmd.candidate_names()
}

#[test]
fn empty_nodes_go_together_within_the_budget() {
    let mut s = snapshot(
        vec![
            od("a", "small"),
            od("b", "large"),
            od("c", "medium"),
            od("d", "large"),
        ],
        vec![pod("p", 500, "d")],
    );
    s.nodepools[0].disruption.budgets = vec![Budget {
        nodes: "2".into(),
        reasons: vec![],
        schedule: None,
        duration_secs: None,
    }];
    let d = disrupt(&s, &DisruptionOptions::default());
    let cmd = d.command.expect("a command");
    assert_eq!(cmd.method, Method::Emptiness);
    assert_eq!(names(&cmd), vec!["b", "c"], "most expensive empties first");
    assert_eq!(
        cmd.budget,
        vec![BudgetUse {
            nodepool: "default".into(),
            reason: DisruptionReason::Empty,
            nodes: 2,
            allowed: 2
        }]
    );
    assert!(validate(&cmd, &s, &DisruptionOptions::default()).valid);
}

#[test]
fn underused_node_is_deleted_when_its_pods_fit_elsewhere() {
    // Either node could go (the other has room), but n2 moves fewer pods.
    let s = two_large_nodes();
    let cmd = disrupt(&s, &DisruptionOptions::default())
        .command
        .expect("a command");
    assert_eq!(cmd.method, Method::Consolidation);
    assert_eq!(names(&cmd), vec!["n2"]);
    assert!(cmd.is_delete());
    assert_eq!(cmd.moves.len(), 1);
    assert!(
        cmd.moves
            .iter()
            .all(|m| m.to == Destination::Existing("n1".into()) && m.from == "n2")
    );
    assert!((cmd.saving_per_hour - 0.40).abs() < 1e-9);
    assert!((cmd.disruption_cost - 1.0).abs() < 1e-9);
    assert!(
        cmd.rationale
            .runner_up
            .as_ref()
            .is_some_and(|r| r.candidates == vec!["n1".to_string()]),
        "{:?}",
        cmd.rationale
    );
    assert!(validate(&cmd, &s, &DisruptionOptions::default()).valid);
}

#[test]
fn pods_never_move_to_a_node_that_is_not_initialized() {
    // n1's pod would fit on n2, but n2 is still launching: Karpenter fails such a simulation
    // (the pod would wait for n2 once n1 drains), so no command may move it there.
    let mut launching = od("n2", "large");
    launching.in_flight = true;
    launching.initialized = false;
    launching.ready = false;
    let s = snapshot(
        vec![od("n1", "large"), launching],
        vec![pod("a", 7000, "n1")],
    );
    let d = disrupt(&s, &DisruptionOptions::default());
    if let Some(cmd) = &d.command {
        assert!(
            cmd.moves
                .iter()
                .all(|m| m.to != Destination::Existing("n2".into())),
            "{cmd:?}"
        );
    }
    // Once n2 is initialized the move is fine (and the cheapest: n1 simply goes).
    let mut s2 = s.clone();
    s2.nodes[1].in_flight = false;
    s2.nodes[1].initialized = true;
    s2.nodes[1].ready = true;
    let cmd = disrupt(&s2, &DisruptionOptions::default())
        .command
        .expect("a command");
    assert!(cmd.is_delete(), "{cmd:?}");
}

#[test]
fn oversized_node_is_replaced_by_a_cheaper_one() {
    let s = snapshot(vec![od("big", "xlarge")], vec![pod("a", 1500, "big")]);
    let cmd = disrupt(&s, &DisruptionOptions::default())
        .command
        .expect("a command");
    assert_eq!(cmd.replacements.len(), 1);
    let r = &cmd.replacements[0];
    assert_eq!(r.launch.instance_type, "small");
    assert!(r.worst_case_price < 0.80);
    assert!(cmd.worst_case_saving_per_hour > 0.0);
    assert_eq!(
        cmd.moves,
        vec![PodMove {
            pod: crate::result::PodRef {
                namespace: "default".into(),
                name: "a".into()
            },
            from: "big".into(),
            to: Destination::Replacement(r.name.clone())
        }]
    );
    // The optimiser re-planned the replacement and bounds its cost.
    let bound = cmd.replacements_lower_bound.expect("a lower bound");
    assert!(
        bound <= cmd.replacements_price + 1e-9,
        "{bound} > {}",
        cmd.replacements_price
    );
    // Every option keeps the command saving money whatever launches.
    assert!(
        r.instance_type_options
            .iter()
            .all(|o| o.instance_type != "xlarge" && o.instance_type != "xxlarge")
    );
    assert!(validate(&cmd, &s, &DisruptionOptions::default()).valid);
}

#[test]
fn several_nodes_are_replaced_by_several_cheaper_ones() {
    // Three 32-vCPU nodes each hold one 10-vCPU pod that must not share a node with the
    // others; three 16-vCPU nodes hold them for half the price. Karpenter allows one
    // replacement per command, so it can only do one node at a time.
    let nodes = vec![
        od("x1", "xxlarge"),
        od("x2", "xxlarge"),
        od("x3", "xxlarge"),
    ];
    let mut pods = vec![
        pod("a", 10_000, "x1"),
        pod("b", 10_000, "x2"),
        pod("c", 10_000, "x3"),
    ];
    for p in &mut pods {
        p.labels.insert("app".into(), "apart".into());
        p.pod_anti_affinity.required.push(PodAffinityTerm {
            label_selector: LabelSelector::from_labels([("app", "apart")]),
            namespaces: vec![],
            namespace_selector: None,
            topology_key: labels::HOSTNAME.into(),
            match_label_keys: vec![],
        });
    }
    let s = snapshot(nodes, pods);
    let cmd = disrupt(&s, &DisruptionOptions::default())
        .command
        .expect("a command");
    assert!(cmd.replacements.len() >= 2, "{:#?}", cmd.rationale);
    assert_eq!(cmd.candidates.len(), 3);
    let base = karpenter_consolidation(&s, &DisruptionOptions::default());
    let base_saving = base.command.as_ref().map_or(0.0, |c| c.saving_per_hour);
    assert!(
        cmd.saving_per_hour > base_saving + 1e-9,
        "ours {} vs Karpenter {}",
        cmd.saving_per_hour,
        base_saving
    );
    assert!(validate(&cmd, &s, &DisruptionOptions::default()).valid);
}

#[test]
fn search_finds_sets_that_are_not_prefixes() {
    // `stuck` sorts first (one pod, disruption cost 1) but its pod may only run in zone-c,
    // where nothing can launch: every prefix Karpenter tries contains it and fails.
    let types = types();
    let anchor = {
        let mut n = node_of(
            &types,
            "anchor",
            "xlarge",
            "zone-a",
            CapacityType::OnDemand,
            "default",
        );
        n.annotations
            .insert(protect::DO_NOT_DISRUPT.into(), "true".into());
        n
    };
    let stuck = node_of(
        &types,
        "stuck",
        "medium",
        "zone-c",
        CapacityType::OnDemand,
        "default",
    );
    let mut stuck_pod = pod("pinned", 3000, "stuck");
    stuck_pod
        .node_selector
        .insert(labels::ZONE.into(), "zone-c".into());
    let s = snapshot(
        vec![anchor, stuck, od("c2", "large"), od("c3", "large")],
        vec![
            pod("big", 4000, "anchor"),
            stuck_pod,
            pod("a1", 1000, "c2"),
            pod("a2", 1000, "c2"),
            pod("b1", 1000, "c3"),
            pod("b2", 1000, "c3"),
        ],
    );
    let cmd = disrupt(&s, &DisruptionOptions::default())
        .command
        .expect("a command");
    assert_eq!(names(&cmd), vec!["c2", "c3"]);
    assert!(cmd.is_delete());
    let base = karpenter_consolidation(&s, &DisruptionOptions::default());
    let b = base.command.expect("Karpenter finds a single node");
    assert_eq!(base.found_by, "single-node");
    assert_eq!(b.candidates.len(), 1);
    assert!(cmd.saving_per_hour > b.saving_per_hour);
}

#[test]
fn spot_candidates_are_replaced_only_on_spot_and_only_with_the_gate() {
    let types = types();
    let n = node_of(
        &types,
        "spot",
        "xlarge",
        "zone-a",
        CapacityType::Spot,
        "default",
    );
    let s = snapshot(vec![n], vec![pod("a", 1500, "spot")]);
    let d = disrupt(&s, &DisruptionOptions::default());
    assert!(d.command.is_none(), "spot-to-spot is off by default");
    let opts = DisruptionOptions {
        spot_to_spot: true,
        ..DisruptionOptions::default()
    };
    let cmd = disrupt(&s, &opts).command.expect("a command with the gate");
    let r = &cmd.replacements[0];
    assert_eq!(r.launch.capacity_type, CapacityType::Spot);
    assert!(
        r.requirements
            .iter()
            .any(|q| q.key == labels::CAPACITY_TYPE && q.values == vec!["spot".to_string()])
    );
    assert!(r.worst_case_price < cmd.candidates_price);
}

#[test]
fn replacement_options_are_filtered_by_their_worst_case_price() {
    let mut types = types();
    // Cheap in one zone, dear in the other: Karpenter would keep it (cheapest 0.05 < 0.50).
    types.push(InstanceType::new(
        "risky",
        2000,
        4 * GIB,
        110,
        vec![
            Offering::new("zone-a", CapacityType::OnDemand, 0.05),
            Offering::new("zone-b", CapacityType::OnDemand, 0.60),
        ],
    ));
    let mut n = node_of(
        &types,
        "n",
        "medium",
        "zone-a",
        CapacityType::OnDemand,
        "default",
    );
    n.price = 0.50;
    let mut s = snapshot(vec![n], vec![pod("a", 1000, "n")]);
    s.instance_types = types;
    // The plain rule: the worst case left (0.10/h over `large`) does not pay for moving the
    // pod under the payback rule; this test is about which options stay.
    let cmd = disrupt(&s, &plain()).command.expect("a command");
    let r = &cmd.replacements[0];
    assert!(
        r.instance_type_options
            .iter()
            .all(|o| o.instance_type != "risky"),
        "{:?}",
        r.instance_type_options
    );
    assert!(r.worst_case_price < 0.50);
}

/// `pay_for_flexibility`: where the plain worst case leaves too little to pay for the
/// eviction, dearer options are dropped until it pays, and re-validation keeps the narrowed
/// options instead of rejecting the command as dearer than decided.
#[test]
fn paying_for_flexibility_narrows_options_until_the_worst_case_pays() {
    let mut n = od("n", "medium");
    n.price = 0.50;
    let s = snapshot(vec![n], vec![pod("a", 1000, "n")]);
    let default = DisruptionOptions::default();
    let knobs = default.payback.clone().expect("payback on by default");
    let paying = DisruptionOptions {
        payback: Some(payback::Payback {
            pay_for_flexibility: true,
            ..knobs
        }),
        ..default.clone()
    };
    let cmd = disrupt(&s, &paying).command.expect("a paying replacement");
    assert_eq!(cmd.replacements.len(), 1, "{cmd:?}");
    let wide = disrupt(&s, &plain())
        .command
        .expect("the plain rule's command");
    let (narrow, plain_opts) = (
        &cmd.replacements[0].instance_type_options,
        &wide.replacements[0].instance_type_options,
    );
    assert!(
        narrow.len() < plain_opts.len(),
        "{narrow:?} vs {plain_opts:?}"
    );
    assert!(cmd.replacements_worst_case_price < wide.replacements_worst_case_price);
    let v = validate(&cmd, &s, &paying);
    assert!(v.valid, "{:?}", v.failures);
}

/// `o` with the underused-node rule off, so a test sees the other pricing rules alone.
fn without_underused(o: &DisruptionOptions) -> DisruptionOptions {
    DisruptionOptions {
        payback: o.payback.clone().map(|p| payback::Payback {
            underused_below: None,
            ..p
        }),
        ..o.clone()
    }
}

/// `cmd` replaces the one node `name` by one replacement valued within the default premium
/// of a 0.10/h cheapest option, and re-validates.
fn assert_banded_replacement(cmd: &Command, s: &Snapshot, opts: &DisruptionOptions, name: &str) {
    assert_eq!(names(cmd), vec![name]);
    assert_eq!(cmd.replacements.len(), 1);
    assert!(!valued_at_worst_case(Some(cmd.clone())));
    assert!(
        cmd.replacements_worst_case_price <= 0.10 * 1.25 + 1e-9,
        "{}",
        cmd.replacements_worst_case_price
    );
    assert!(validate(cmd, s, opts).valid);
}

/// No command, or one whose replacements are valued at every option below the candidates'
/// price (no premium bound): what a node none of the single-node rules applies to gets. The
/// pods of these one-node clusters are priced at their share of the node, so whether such a
/// replacement pays depends on the numbers; how it is valued is the rules' business.
fn valued_at_worst_case(cmd: Option<Command>) -> bool {
    cmd.is_none_or(|c| c.replacement_premium.is_none())
}

/// `flexibility_premium`: a merge's replacement keeps only options within the premium of its
/// cheapest, so it is valued (and launched) at a worst case near what it will cost, not at the
/// dearest type still below the candidates' price; re-validation narrows the same way. A
/// single node's replacement keeps the default pricing.
#[test]
fn a_flexibility_premium_bounds_a_merges_options() {
    // The reshape rule off: single-node replacements priced like merges are not what this
    // test looks at. Nor is replacing each node by its own cheaper one (0.4/h saved in the
    // worst case against two pods priced at their share, 0.625/h each): 1.5 h per eviction
    // keeps that from paying, as the default hour does in a cluster of more pods.
    let mut default = DisruptionOptions::default();
    if let Some(knobs) = default.payback.as_mut() {
        knobs.reshape_below = None;
        knobs.eviction_pod_hours = 1.5;
    }
    let knobs = default.payback.clone().expect("payback on by default");
    let banded = DisruptionOptions {
        payback: Some(payback::Payback {
            flexibility_premium: Some(0.25),
            ..knobs
        }),
        ..default.clone()
    };
    // Two overpriced 8-vCPU nodes whose pods fit together on one 16-vCPU node (0.80/h): the
    // merge's options would otherwise reach up to the 32-vCPU type (1.60/h, below 2.00/h).
    let (mut n1, mut n2) = (od("n1", "large"), od("n2", "large"));
    n1.price = 1.0;
    n2.price = 1.0;
    let two = snapshot(
        vec![n1, n2],
        vec![pod("a", 5000, "n1"), pod("b", 5000, "n2")],
    );
    let cmd = disrupt(&two, &banded).command.expect("the banded merge");
    assert_eq!(names(&cmd), vec!["n1", "n2"], "{cmd:?}");
    // An option's worst case is its dearest offering (on-demand here; spot is cheaper).
    let worst_of = |name: &str| {
        two.instance_types
            .iter()
            .find(|t| t.name == name)
            .map_or(f64::NAN, |t| {
                t.offerings.iter().map(|o| o.price).fold(0.0, f64::max)
            })
    };
    let mut least_sum = 0.0;
    for r in &cmd.replacements {
        let worsts: Vec<f64> = r
            .instance_type_options
            .iter()
            .map(|o| worst_of(&o.instance_type))
            .collect();
        let least = worsts.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(
            worsts.iter().all(|w| *w <= least * 1.25 + 1e-9),
            "{worsts:?}"
        );
        least_sum += least;
    }
    assert!((cmd.replacements_worst_case_price - least_sum).abs() < 1e-9);
    // Without the premium the merge keeps options up to the candidates' price, is valued at
    // them, and the payback rule finds nothing left to pay for the evictions.
    let wide = disrupt(&two, &default);
    assert!(wide.command.is_none(), "{:?}", wide.command);
    let v = validate(&cmd, &two, &banded);
    assert!(v.valid, "{:?}", v.failures);

    // One node, with the underused rule off (1 of its 16 vCPU used, it would be priced like
    // a merge: `a_node_left_mostly_empty_is_replaced_like_a_merge`): the same options as
    // without the premium.
    let one = snapshot(vec![od("n", "xlarge")], vec![pod("a", 1000, "n")]);
    let alone = disrupt(&one, &without_underused(&banded))
        .command
        .expect("a replacement");
    let plain = disrupt(&one, &without_underused(&default))
        .command
        .expect("a replacement");
    assert_eq!(alone.replacements.len(), 1);
    assert_eq!(
        alone.replacements[0].instance_type_options.len(),
        plain.replacements[0].instance_type_options.len()
    );
    assert!(alone.replacements[0].instance_type_options.len() > 1);
}

#[test]
fn thresholds_stop_small_savings() {
    let s = snapshot(
        vec![od("n1", "large"), od("n2", "small")],
        vec![pod("a", 5000, "n1"), pod("b", 500, "n2")],
    );
    assert!(disrupt(&s, &DisruptionOptions::default()).command.is_some());
    let opts = DisruptionOptions {
        min_saving_per_hour: 0.2,
        ..DisruptionOptions::default()
    };
    assert!(
        disrupt(&s, &opts).command.is_none(),
        "saving 0.10/h is below the 0.20/h threshold"
    );
    let opts = DisruptionOptions {
        min_saving_fraction: 0.5,
        ..DisruptionOptions::default()
    };
    assert!(
        disrupt(&s, &opts).command.is_some(),
        "deleting saves 100% of the candidate's price"
    );
}

#[test]
fn pdbs_are_counted_across_the_command() {
    let mut s = snapshot(
        vec![od("big", "xlarge"), od("n1", "large"), od("n2", "large")],
        vec![
            pod("anchor", 2000, "big"),
            pod("w1", 1000, "n1"),
            pod("w2", 1000, "n2"),
        ],
    );
    s.nodes[0]
        .annotations
        .insert(protect::DO_NOT_DISRUPT.into(), "true".into());
    for p in s
        .pods
        .iter_mut()
        .map(std::sync::Arc::make_mut)
        .filter(|p| p.name.starts_with('w'))
    {
        p.labels.insert("app".into(), "web".into());
    }
    s.pdbs.push(PodDisruptionBudget {
        namespace: "default".into(),
        name: "web".into(),
        selector: LabelSelector::from_labels([("app", "web")]),
        disruptions_allowed: 1,
    });
    let strict = DisruptionOptions {
        pdb_per_command: true,
        ..DisruptionOptions::default()
    };
    let cmd = disrupt(&s, &strict).command.expect("a command");
    assert_eq!(cmd.candidates.len(), 1, "the PDB allows one eviction");
    let cmd = disrupt(&s, &DisruptionOptions::default())
        .command
        .expect("a command");
    assert_eq!(
        cmd.candidates.len(),
        2,
        "by default per node only, as Karpenter does"
    );
}

#[test]
fn drifted_nodes_are_replaced_whatever_the_price() {
    let mut n = od("old", "medium");
    n.drifted = true;
    let s = snapshot(vec![n], vec![pod("a", 3500, "old")]);
    let cmd = disrupt(&s, &DisruptionOptions::default())
        .command
        .expect("a command");
    assert_eq!(cmd.method, Method::Drift);
    assert_eq!(cmd.replacements.len(), 1);
    assert_eq!(cmd.moves.len(), 1);
    assert!(validate(&cmd, &s, &DisruptionOptions::default()).valid);
}

#[test]
fn expired_nodes_go_before_drifted_ones_and_respect_budgets() {
    let mut old = od("old", "medium");
    old.created_at = 0;
    let mut drifted = od("drifted", "medium");
    drifted.created_at = 999_000;
    drifted.drifted = true;
    let mut s = snapshot(
        vec![old, drifted],
        vec![pod("a", 3500, "old"), pod("b", 3500, "drifted")],
    );
    s.nodepools[0].expire_after_secs = Some(500_000);
    let cmd = disrupt(&s, &DisruptionOptions::default())
        .command
        .expect("a command");
    assert_eq!(cmd.method, Method::Expiration);
    assert_eq!(names(&cmd), vec!["old"]);
    let mut no_expiry = Budget {
        nodes: "0".into(),
        reasons: vec![DisruptionReason::Expired],
        schedule: None,
        duration_secs: None,
    };
    s.nodepools[0].disruption.budgets.push(no_expiry.clone());
    let cmd = disrupt(&s, &DisruptionOptions::default())
        .command
        .expect("a command");
    assert_eq!(cmd.method, Method::Drift);
    no_expiry.reasons = vec![];
    s.nodepools[0].disruption.budgets.push(no_expiry);
    assert!(disrupt(&s, &DisruptionOptions::default()).command.is_none());
}

#[test]
fn malformed_budgets_block_and_are_reported() {
    let mut s = snapshot(vec![od("a", "small")], vec![]);
    s.nodepools[0].disruption.budgets.push(Budget {
        nodes: "ten".into(),
        reasons: vec![],
        schedule: None,
        duration_secs: None,
    });
    let d = disrupt(&s, &DisruptionOptions::default());
    assert!(d.command.is_none());
    assert_eq!(d.budget_problems.len(), 1);
    assert!(
        d.methods[0]
            .note
            .as_deref()
            .is_some_and(|n| n.contains("budgets"))
    );
}

#[test]
fn validation_catches_what_changed() {
    let s = snapshot(
        vec![od("n1", "large"), od("n2", "large")],
        vec![
            pod("a", 3000, "n1"),
            pod("a2", 2000, "n1"),
            pod("b", 1000, "n2"),
        ],
    );
    let opts = DisruptionOptions::default();
    let cmd = disrupt(&s, &opts).command.expect("a command");
    assert!(validate(&cmd, &s, &opts).valid);

    // A pod landed on the remaining node: the moved pod no longer fits.
    let mut newer = s.clone();
    newer
        .pods
        .push(std::sync::Arc::new(pod("late", 2500, "n1")));
    let v = validate(&cmd, &newer, &opts);
    assert!(
        !v.valid
            && v.failures
                .iter()
                .any(|f| f.contains("no longer fits") || f.contains("new node")),
        "{v:?}"
    );

    // The budget was used up meanwhile.
    let mut newer = s.clone();
    newer.nodepools[0].disruption.budgets = vec![Budget {
        nodes: "0".into(),
        reasons: vec![],
        schedule: None,
        duration_secs: None,
    }];
    let v = validate(&cmd, &newer, &opts);
    assert!(
        !v.valid && v.failures.iter().any(|f| f.contains("budget")),
        "{v:?}"
    );

    // Someone protected the node.
    let mut newer = s.clone();
    newer.nodes[1]
        .annotations
        .insert(protect::DO_NOT_DISRUPT.into(), "true".into());
    let v = validate(&cmd, &newer, &opts);
    assert!(
        !v.valid
            && v.failures
                .iter()
                .any(|f| f.contains("no longer a candidate")),
        "{v:?}"
    );

    // An emptiness command is invalid once a pod lands.
    let s = snapshot(vec![od("e", "small")], vec![]);
    let cmd = disrupt(&s, &opts).command.expect("a command");
    let mut newer = s.clone();
    newer.pods.push(std::sync::Arc::new(pod("p", 100, "e")));
    assert!(!validate(&cmd, &newer, &opts).valid);
}

#[test]
fn decisions_and_commands_survive_a_round_trip_through_json() {
    let s = snapshot(vec![od("big", "xlarge")], vec![pod("a", 1500, "big")]);
    let d = disrupt(&s, &DisruptionOptions::default());
    assert!(d.command.is_some());
    let json = serde_json::to_string(&d).expect("serializes");
    let back: DisruptionDecision = serde_json::from_str(&json).expect("deserializes");
    assert_eq!(back, d);
    // A replayed command validates the same way.
    let cmd = back.command.expect("command");
    assert!(validate(&cmd, &s, &DisruptionOptions::default()).valid);
    let opts: DisruptionOptions =
        serde_json::from_str("{\"min_saving_per_hour\": 0.5}").expect("options with defaults");
    assert_eq!(opts.min_saving_per_hour, 0.5);
    assert_eq!(
        opts.greedy_patience,
        DisruptionOptions::default().greedy_patience
    );
}

#[test]
fn drift_commands_are_invalid_once_the_node_is_no_longer_drifted() {
    let mut n = od("old", "medium");
    n.drifted = true;
    let s = snapshot(vec![n], vec![pod("a", 3500, "old")]);
    let opts = DisruptionOptions::default();
    let cmd = disrupt(&s, &opts).command.expect("a command");
    let mut newer = s.clone();
    newer.nodes[0].drifted = false;
    let v = validate(&cmd, &newer, &opts);
    assert!(!v.valid, "{v:?}");
}

#[test]
fn nodes_not_ours_are_never_touched() {
    let mut foreign = od("foreign", "xlarge");
    foreign.nodepool = None;
    foreign.labels.remove(labels::NODEPOOL);
    let s = snapshot(
        vec![foreign, od("ours", "large")],
        vec![pod("a", 1000, "ours")],
    );
    let d = disrupt(&s, &DisruptionOptions::default());
    let cmd = d.command.expect("ours can move onto the foreign node");
    assert_eq!(names(&cmd), vec!["ours"]);
    assert!(
        d.rejected
            .iter()
            .any(|r| r.node == "foreign" && r.reason == Ineligible::NotManaged)
    );
}

#[test]
fn no_hundred_candidate_cap_unlike_karpenter() {
    // 130 small nodes with one small pod each, and room for all of them on two big nodes that
    // do-not-disrupt keeps. Karpenter's multi-node search looks at 100 candidates at most
    // (its binary search tops out at a prefix of 101).
    let mut nodes = Vec::new();
    let mut pods = Vec::new();
    for i in 0..2 {
        let mut n = od(&format!("big-{i}"), "xxlarge");
        n.annotations
            .insert(protect::DO_NOT_DISRUPT.into(), "true".into());
        nodes.push(n);
    }
    for i in 0..130 {
        let name = format!("small-{i:03}");
        pods.push(pod(&format!("p{i:03}"), 400, &name));
        nodes.push(od(&name, "small"));
    }
    let s = snapshot(nodes, pods);
    let cmd = disrupt(&s, &DisruptionOptions::default())
        .command
        .expect("a command");
    assert_eq!(cmd.candidates.len(), 130, "{}", cmd.rationale.summary);
    assert!(cmd.is_delete());
    let base = karpenter_consolidation(&s, &DisruptionOptions::default());
    let b = base.command.expect("Karpenter finds the prefix");
    assert_eq!(base.found_by, "multi-node");
    assert_eq!(b.candidates.len(), 101);
    assert!(validate(&cmd, &s, &DisruptionOptions::default()).valid);
}

/// A large node consolidation may not take (do-not-disrupt): the room candidates' pods move to.
fn protected_anchor() -> Node {
    let mut anchor = od("anchor", "large");
    anchor
        .annotations
        .insert(protect::DO_NOT_DISRUPT.into(), "true".into());
    anchor
}

/// An on-demand `medium` node of `pool` in `zone`.
fn medium_in(name: &str, zone: &str, pool: &str) -> Node {
    node_of(&types(), name, "medium", zone, CapacityType::OnDemand, pool)
}

/// `p` pinned to zone-c, where the test catalog launches nothing: its node cannot go.
fn pinned_to_zone_c(mut p: Pod) -> Pod {
    p.node_selector.insert(labels::ZONE.into(), "zone-c".into());
    p
}

#[test]
fn karpenter_baseline_keeps_the_longest_valid_prefix() {
    // Sorted by disruption cost: c1 (1 pod), c2 (2 pods), c3 (3 pods). c1's and c2's pods fit
    // on the anchor; c3's are pinned to zone-c, where nothing can launch, so every prefix
    // with c3 fails and the search keeps [c1, c2].
    let anchor = protected_anchor();
    let c3 = medium_in("c3", "zone-c", "default");
    let c3_pods: Vec<Pod> = (1..=3)
        .map(|i| pinned_to_zone_c(pod(&format!("d{i}"), 300, "c3")))
        .collect();
    let mut pods = vec![
        pod("x", 3000, "anchor"),
        pod("a", 1000, "c1"),
        pod("b1", 1000, "c2"),
        pod("b2", 1000, "c2"),
    ];
    pods.extend(c3_pods);
    let s = snapshot(
        vec![anchor, od("c1", "medium"), od("c2", "medium"), c3],
        pods,
    );
    let base = karpenter_consolidation(&s, &DisruptionOptions::default());
    let b = base.command.expect("a prefix");
    assert_eq!(base.found_by, "multi-node");
    assert_eq!(b.candidate_names(), vec!["c1", "c2"]);
}

#[test]
fn karpenter_single_node_tries_candidates_beyond_the_budget_prefix() {
    // A budget of one node: multi-node's prefix is [c1] alone. c1 (one pod, the lowest
    // disruption cost) cannot go: its pod is pinned to zone-c, where nothing launches.
    // Single-node does not spend the allowance per candidate and goes on to c2, whose pods
    // fit on the anchor.
    let anchor = protected_anchor();
    let c1 = medium_in("c1", "zone-c", "default");
    let pinned = pinned_to_zone_c(pod("a", 300, "c1"));
    let pods = vec![
        pod("x", 3000, "anchor"),
        pinned,
        pod("b1", 500, "c2"),
        pod("b2", 500, "c2"),
    ];
    let mut s = snapshot(vec![anchor, c1, od("c2", "medium")], pods);
    s.nodepools[0].disruption.budgets[0].nodes = "1".into();
    let base = karpenter_consolidation(&s, &DisruptionOptions::default());
    assert_eq!(
        base.candidates, 1,
        "the budget lets multi-node consider one node"
    );
    let b = base.command.expect("single-node reaches c2");
    assert_eq!(base.found_by, "single-node");
    assert_eq!(b.candidate_names(), vec!["c2"]);
    assert!(b.is_delete());
}

#[test]
fn karpenter_single_node_interweaves_nodepools() {
    // Pool `a` holds the two cheapest candidates to disrupt: a1 cannot go (its pod is pinned
    // to zone-c, where nothing launches), so every multi-node prefix fails; a2 could go.
    // Single-node takes one candidate per pool in turn (Karpenter's shuffleCandidates), so
    // pool `b`'s b1 is tried before a2.
    let anchor = protected_anchor();
    let a1 = medium_in("a1", "zone-c", "a");
    let a2 = medium_in("a2", "zone-a", "a");
    let b1 = medium_in("b1", "zone-a", "b");
    let pinned = pinned_to_zone_c(pod("p", 300, "a1"));
    let pods = vec![
        pod("x", 2000, "anchor"),
        pinned,
        pod("q1", 300, "a2"),
        pod("q2", 300, "a2"),
        pod("r1", 300, "b1"),
        pod("r2", 300, "b1"),
        pod("r3", 300, "b1"),
    ];
    let mut s = snapshot(vec![anchor, a1, a2, b1], pods);
    let mut a = s.nodepools[0].clone();
    a.name = "a".into();
    let mut b = a.clone();
    b.name = "b".into();
    s.nodepools = vec![a, b];
    let base = karpenter_consolidation(&s, &DisruptionOptions::default());
    let cmd = base.command.expect("single-node finds a command");
    assert_eq!(base.found_by, "single-node");
    assert_eq!(cmd.candidate_names(), vec!["b1"]);
}

// ---------------------------------------------------------------------------------------
// Property tests over random clusters.

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const ANTI: &str = "anti";
const TAINT_KEY: &str = "dedicated";

/// Random cluster: two NodePools (one tainted), nodes of random types, zones and capacity
/// types, partly filled with pods that carry node selectors, hostname anti-affinity,
/// tolerations, PDBs and do-not-disrupt annotations, and random budgets.
pub(super) fn random_cluster(seed: u64) -> Snapshot {
    let mut r = Rng(seed);
    let types = types();
    let now = 1_000_000;
    let budget_values = ["10%", "50%", "100%", "1", "2", "0", "34%"];
    let mut pools = Vec::new();
    for (name, tainted) in [("default", false), ("tainted", true)] {
        let mut p = NodePool::new(name, if tainted { 0 } else { 10 });
        p.expire_after_secs = None;
        p.disruption.budgets = vec![Budget {
            nodes: budget_values[r.below(budget_values.len() as u64) as usize].into(),
            reasons: vec![],
            schedule: None,
            duration_secs: None,
        }];
        if r.chance(30) {
            p.disruption.budgets.push(Budget {
                nodes: budget_values[r.below(budget_values.len() as u64) as usize].into(),
                reasons: vec![DisruptionReason::Underutilized],
                schedule: None,
                duration_secs: None,
            });
        }
        if tainted {
            p.taints = vec![Taint {
                key: TAINT_KEY.into(),
                value: Some("x".into()),
                effect: TaintEffect::NoSchedule,
            }];
            p.labels.insert(TAINT_KEY.into(), "x".into());
        }
        pools.push(p);
    }
    let n_nodes = 3 + r.below(8) as usize;
    let mut nodes = Vec::new();
    let mut pods = Vec::new();
    let mut pdb_apps = BTreeSet::new();
    for i in 0..n_nodes {
        let ty = ["small", "medium", "large", "xlarge"][r.below(4) as usize];
        let zone = if r.chance(50) { "zone-a" } else { "zone-b" };
        let ct = if r.chance(20) {
            CapacityType::Spot
        } else {
            CapacityType::OnDemand
        };
        let pool = if r.chance(25) { "tainted" } else { "default" };
        let name = format!("node-{i:02}");
        let mut n = node_of(&types, &name, ty, zone, ct, pool);
        if pool == "tainted" {
            n.taints = pools[1].taints.clone();
            n.labels.insert(TAINT_KEY.into(), "x".into());
        }
        n.created_at = now - 100_000;
        n.last_pod_event_at = now - 50_000;
        if r.chance(5) {
            n.annotations
                .insert(protect::DO_NOT_DISRUPT.into(), "true".into());
        }
        if r.chance(5) {
            n.nominated = true;
        }
        if r.chance(5) {
            n.ready = false;
        }
        let fill = r.below(95) as i64;
        let budget_cpu = n.allocatable.cpu_milli * fill / 100;
        let mut used = 0;
        let mut has_anti = false;
        for j in 0.. {
            let cpu = 250 * (1 + r.below(6) as i64);
            if used + cpu > budget_cpu || j > 12 {
                break;
            }
            used += cpu;
            let app = ["a", "b", "c", "d"][r.below(4) as usize];
            let mut p = Pod::new(
                "default",
                &format!("{name}-p{j}"),
                cpu,
                cpu * GIB / 1000 * (1 + r.below(2) as i64),
            )
            .on(&name)
            .label("app", app);
            p.owner_kind = Some("ReplicaSet".into());
            p.created_at = now - 10_000;
            if pool == "tainted" {
                p.tolerations.push(Toleration {
                    key: Some(TAINT_KEY.into()),
                    operator: TolerationOperator::Exists,
                    value: None,
                    effect: None,
                });
            }
            if r.chance(20) {
                p.node_selector.insert(labels::ZONE.into(), zone.into());
            }
            if !has_anti && r.chance(15) {
                has_anti = true;
                p.labels.insert("app".into(), ANTI.into());
                p.pod_anti_affinity.required.push(PodAffinityTerm {
                    label_selector: LabelSelector::from_labels([("app", ANTI)]),
                    namespaces: vec![],
                    namespace_selector: None,
                    topology_key: labels::HOSTNAME.into(),
                    match_label_keys: vec![],
                });
            }
            if r.chance(4) {
                p.annotations
                    .insert(protect::DO_NOT_DISRUPT.into(), "true".into());
            } else if r.chance(4) {
                // Half of these have elapsed (5m after a pod 10000 s old), half not (1h... 10h).
                let v = if r.chance(50) { "5m" } else { "10h" };
                p.annotations
                    .insert(protect::DO_NOT_DISRUPT.into(), v.into());
            }
            if r.chance(30) {
                pdb_apps.insert(app.to_string());
            }
            pods.push(p);
        }
        nodes.push(n);
    }
    let pdbs = pdb_apps
        .iter()
        .map(|app| PodDisruptionBudget {
            namespace: "default".into(),
            name: format!("pdb-{app}"),
            selector: LabelSelector::from_labels([("app", app.as_str())]),
            disruptions_allowed: r.below(3) as i32,
        })
        .collect();
    Snapshot {
        now,
        nodes,
        pods: Snapshot::shared_pods(pods),
        nodepools: pools,
        instance_types: types,
        pdbs,
        ..Snapshot::default()
    }
}

/// The budget a NodePool allows for a reason, computed here from first principles (the random
/// budgets are counts or percentages without schedules).
fn independent_allowed(s: &Snapshot, pool: &NodePool, reason: DisruptionReason) -> i64 {
    let members: Vec<&Node> = s
        .nodes
        .iter()
        .filter(|n| {
            n.nodepool.as_deref() == Some(pool.name.as_str()) && n.initialized && !n.in_flight
        })
        .collect();
    let total = members.len() as i64;
    let disrupting = members
        .iter()
        .filter(|n| !n.ready || n.marked_for_deletion)
        .count() as i64;
    let mut limit = i64::MAX;
    for b in &pool.disruption.budgets {
        if !b.reasons.is_empty() && !b.reasons.contains(&reason) {
            continue;
        }
        let l = match b.nodes.strip_suffix('%') {
            Some(p) => (total * p.parse::<i64>().expect("percent") + 99) / 100,
            None => b.nodes.parse::<i64>().expect("count"),
        };
        limit = limit.min(l);
    }
    if limit == i64::MAX {
        i64::MAX
    } else {
        (limit - disrupting).max(0)
    }
}

/// Whether a pod's do-not-disrupt is active (the generator's values only).
fn protected(p: &BTreeMap<String, String>, since: i64, now: i64) -> bool {
    match p.get(protect::DO_NOT_DISRUPT).map(String::as_str) {
        Some("true") => true,
        Some("5m") => now < since + 300,
        Some("10h") => now < since + 36_000,
        _ => false,
    }
}

/// Checks a command against the rules, independently of the code that made it.
pub(super) fn check_command(
    s: &Snapshot,
    cmd: &Command,
    opts: &DisruptionOptions,
) -> Result<(), String> {
    let cand: BTreeSet<&str> = cmd.candidates.iter().map(|c| c.name.as_str()).collect();
    let node = |name: &str| s.nodes.iter().find(|n| n.name == name);
    // Protections and budgets.
    let mut per_pool: BTreeMap<&str, i64> = BTreeMap::new();
    for c in &cmd.candidates {
        let n = node(&c.name).ok_or("unknown candidate")?;
        if n.nominated || n.marked_for_deletion || !n.initialized {
            return Err(format!("{} is not disruptable", n.name));
        }
        if protected(&n.annotations, n.created_at, s.now) {
            return Err(format!("{} has do-not-disrupt", n.name));
        }
        for p in s
            .pods
            .iter()
            .filter(|p| p.node_name.as_deref() == Some(n.name.as_str()))
        {
            if protected(&p.annotations, p.created_at, s.now) {
                return Err(format!("pod {} on {} has do-not-disrupt", p.name, n.name));
            }
        }
        *per_pool
            .entry(n.nodepool.as_deref().ok_or("unmanaged")?)
            .or_default() += 1;
    }
    for (pool, count) in &per_pool {
        let p = s
            .nodepools
            .iter()
            .find(|x| x.name == *pool)
            .ok_or("unknown pool")?;
        let allowed = independent_allowed(s, p, cmd.reason);
        if *count > allowed {
            return Err(format!(
                "{count} nodes of {pool} exceed the {:?} budget {allowed}",
                cmd.reason
            ));
        }
    }
    for pdb in &s.pdbs {
        let evicted = s
            .pods
            .iter()
            .filter(|p| {
                p.node_name.as_deref().is_some_and(|n| cand.contains(n))
                    && p.namespace == pdb.namespace
                    && pdb.selector.matches(&p.labels)
            })
            .count() as i64;
        let limit = if opts.pdb_per_command {
            i64::from(pdb.disruptions_allowed)
        } else {
            i64::MAX
        };
        if evicted > 0 && (pdb.disruptions_allowed <= 0 || evicted > limit) {
            return Err(format!(
                "PDB {} allows {}, command evicts {evicted}",
                pdb.name, pdb.disruptions_allowed
            ));
        }
    }
    // A staged merge's followers: disjoint from the candidates, real nodes, never drained now
    // (their pods are not moved by this command: the move count below covers it).
    for f in &cmd.staged {
        if cand.contains(f.name.as_str()) || node(&f.name).is_none() {
            return Err(format!(
                "staged follower {} is a candidate or unknown",
                f.name
            ));
        }
    }
    if !cmd.staged.is_empty() && (cmd.method != Method::Consolidation || cmd.is_delete()) {
        return Err("only a consolidation with replacements is staged".into());
    }
    // Money.
    if cmd.method == Method::Consolidation
        && !(cmd.saving_per_hour > 0.0 && cmd.worst_case_saving_per_hour > 0.0)
    {
        return Err(format!(
            "consolidation saves {} (worst case {})",
            cmd.saving_per_hour, cmd.worst_case_saving_per_hour
        ));
    }
    // Every pod of every candidate has exactly one new place.
    let moving: Vec<&Pod> = s
        .pods
        .iter()
        .filter(|p| {
            p.node_name.as_deref().is_some_and(|n| cand.contains(n)) && !p.is_daemonset_pod()
        })
        .map(|p| &**p)
        .collect();
    let mut dest: BTreeMap<(String, String), &Destination> = BTreeMap::new();
    for m in &cmd.moves {
        if dest
            .insert((m.pod.namespace.clone(), m.pod.name.clone()), &m.to)
            .is_some()
        {
            return Err(format!("pod {} moves twice", m.pod));
        }
    }
    if dest.len() != moving.len() {
        return Err(format!(
            "{} pods move, {} pods are on the candidates",
            dest.len(),
            moving.len()
        ));
    }
    // The post-command cluster: remaining nodes with their pods plus moved pods, replacements.
    struct Host {
        labels: BTreeMap<String, String>,
        taints: Vec<Taint>,
        alloc: Resources,
        pods: Vec<Pod>,
    }
    let mut hosts: BTreeMap<String, Host> = BTreeMap::new();
    for n in s
        .nodes
        .iter()
        .filter(|n| !cand.contains(n.name.as_str()) && !n.marked_for_deletion)
    {
        let pods = s
            .pods
            .iter()
            .filter(|p| p.node_name.as_deref() == Some(n.name.as_str()))
            .map(|p| Pod::clone(p))
            .collect();
        hosts.insert(
            n.name.clone(),
            Host {
                labels: n.labels.clone(),
                taints: n.taints.clone(),
                alloc: n.allocatable.clone(),
                pods,
            },
        );
    }
    for r in &cmd.replacements {
        let it = s
            .instance_types
            .iter()
            .find(|t| t.name == r.launch.instance_type)
            .ok_or("unknown launch type")?;
        let pool = s
            .nodepools
            .iter()
            .find(|p| p.name == r.nodepool)
            .ok_or("unknown replacement pool")?;
        let mut l = pool.labels.clone();
        l.insert(labels::ZONE.into(), r.launch.zone.clone());
        l.insert(labels::INSTANCE_TYPE.into(), it.name.clone());
        l.insert(
            labels::CAPACITY_TYPE.into(),
            r.launch.capacity_type.as_label().into(),
        );
        l.insert(labels::NODEPOOL.into(), pool.name.clone());
        l.insert(labels::HOSTNAME.into(), r.name.clone());
        if !it.offerings.iter().any(|o| {
            o.available && o.zone == r.launch.zone && o.capacity_type == r.launch.capacity_type
        }) {
            return Err(format!(
                "replacement {} launches an offering that does not exist",
                r.name
            ));
        }
        if hosts
            .insert(
                r.name.clone(),
                Host {
                    labels: l,
                    taints: pool.taints.clone(),
                    alloc: it.allocatable(),
                    pods: vec![],
                },
            )
            .is_some()
        {
            return Err(format!("replacement name {} clashes", r.name));
        }
        // The spot rule.
        if cmd
            .candidates
            .iter()
            .all(|c| c.capacity_type == CapacityType::Spot)
            && r.launch.capacity_type != CapacityType::Spot
        {
            return Err("spot candidates replaced by a non-spot node".into());
        }
    }
    for p in moving {
        let to = dest
            .get(&(p.namespace.clone(), p.name.clone()))
            .ok_or(format!("pod {} has no place", p.name))?;
        let name = match to {
            Destination::Existing(n) | Destination::Replacement(n) => n,
        };
        let h = hosts.get_mut(name).ok_or(format!(
            "pod {} goes to {name}, which is not in the post-command cluster",
            p.name
        ))?;
        h.pods.push(Pod {
            node_name: Some(name.clone()),
            ..p.clone()
        });
    }
    for (name, h) in &hosts {
        let mut used = Resources::default();
        let mut anti = 0;
        for p in &h.pods {
            used.add_assign(&pod_requests(p));
            if !p.is_daemonset_pod() {
                if !p
                    .node_selector
                    .iter()
                    .all(|(k, v)| h.labels.get(k) == Some(v))
                {
                    return Err(format!(
                        "pod {} on {name}: node selector not satisfied",
                        p.name
                    ));
                }
                if !crate::taints::tolerates_all(&h.taints, &p.tolerations, false) {
                    return Err(format!("pod {} on {name}: taint not tolerated", p.name));
                }
            }
            if p.labels.get("app").map(String::as_str) == Some(ANTI) {
                anti += 1;
            }
        }
        if !used.fits_in(&h.alloc) {
            return Err(format!("{name} is overcommitted: {used:?} > {:?}", h.alloc));
        }
        if anti > 1 {
            return Err(format!(
                "{name} holds {anti} pods with hostname anti-affinity"
            ));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn commands_respect_every_rule(seed in any::<u64>()) {
        let s = random_cluster(seed);
        for opts in [DisruptionOptions::default(), DisruptionOptions { spot_to_spot: true, pdb_per_command: true, ..DisruptionOptions::default() }] {
            let d = disrupt(&s, &opts);
            if let Some(cmd) = &d.command {
                if let Err(e) = check_command(&s, cmd, &opts) {
                    prop_assert!(false, "seed {seed}: {e}\n{cmd:#?}");
                }
                let v = validate(cmd, &s, &opts);
                prop_assert!(v.valid, "seed {seed}: the command does not re-validate on its own snapshot: {:?}", v.failures);
            }
        }
    }

    #[test]
    fn commands_are_deterministic(seed in any::<u64>()) {
        let s = random_cluster(seed);
        let par = disrupt(&s, &DisruptionOptions::default());
        let seq = disrupt(&s, &DisruptionOptions { parallel: false, ..DisruptionOptions::default() });
        let again = disrupt(&s, &DisruptionOptions::default());
        prop_assert_eq!(&par, &again);
        prop_assert_eq!(&par.command, &seq.command);
    }

    #[test]
    fn baseline_commands_respect_the_rules_too(seed in any::<u64>()) {
        let s = random_cluster(seed);
        let opts = DisruptionOptions::default();
        let b = karpenter_consolidation(&s, &opts);
        if let Some(cmd) = &b.command {
            // Karpenter's price filter uses the cheapest offering, so only the expected saving
            // is guaranteed; the placement rules hold all the same.
            prop_assert!(cmd.saving_per_hour > 0.0);
            let relaxed = Command { worst_case_saving_per_hour: cmd.saving_per_hour, ..cmd.clone() };
            if let Err(e) = check_command(&s, &relaxed, &opts) {
                prop_assert!(false, "seed {seed}: {e}");
            }
        }
    }
}

/// Options with the payback and headroom rules off: the plain `saving > 0` rule.
pub(super) fn plain() -> DisruptionOptions {
    DisruptionOptions {
        payback: None,
        headroom: None,
        ..DisruptionOptions::default()
    }
}

/// The default options with each pod's own age as its expected remaining life (Lindy), as
/// before the window prior and the floor.
pub(super) fn lindy() -> DisruptionOptions {
    let d = no_floor();
    DisruptionOptions {
        payback: d.payback.clone().map(|p| payback::Payback {
            window_prior: false,
            ..p
        }),
        ..d
    }
}

/// The default options with Lindy unfloored beyond the evidence: a young cluster's pods are
/// expected to run only about as long as the cluster has.
pub(super) fn no_floor() -> DisruptionOptions {
    let d = DisruptionOptions::default();
    DisruptionOptions {
        payback: d.payback.clone().map(|p| payback::Payback {
            lindy_floor_hours: 0.0,
            ..p
        }),
        ..d
    }
}

#[test]
fn young_pods_are_not_moved_for_a_saving_that_does_not_pay_back() {
    // Deleting `a` saves its whole price (0.2/h) by moving one 1-vCPU pod onto `b`; `b`'s
    // 6-vCPU pod fits nowhere else.
    let build = |age: i64| {
        let mut young = pod("young", 1000, "a");
        young.created_at = 1_000_000 - age;
        snapshot(
            vec![od("a", "medium"), od("b", "large")],
            vec![young, pod("old", 6000, "b")],
        )
    };
    // A minute old: 0.2/h over a one-minute horizon is less than the pod's share of its
    // node's price (a quarter of 0.2/h) for the default hour of eviction cost.
    let fresh = build(60);
    assert!(disrupt(&fresh, &lindy()).command.is_none());
    // The plain rule takes it.
    let cmd = disrupt(&fresh, &plain())
        .command
        .expect("plain rule deletes a");
    assert_eq!(names(&cmd), vec!["a"]);
    // The same pod after two hours pays back: the default rule takes the same command.
    let settled = build(2 * 3600);
    let cmd = disrupt(&settled, &lindy()).command.expect("pays back");
    assert_eq!(names(&cmd), vec!["a"], "{:#?}", cmd.rationale);
    assert!(cmd.rationale.score > 0.0);
}

/// Deleting `a` moves its one-minute-old pod onto `b`, whose 6-vCPU pod has run `other_age`
/// seconds and fits nowhere else.
fn young_next_to(other_age: i64) -> Snapshot {
    let mut young = pod("young", 1000, "a");
    young.created_at = 1_000_000 - 60;
    let mut other = pod("other", 6000, "b");
    other.created_at = 1_000_000 - other_age;
    snapshot(
        vec![od("a", "medium"), od("b", "large")],
        vec![young, other],
    )
}

#[test]
fn the_window_prior_moves_a_young_pod_only_where_pods_have_lived_long() {
    // As above: deleting `a` moves its one-minute-old pod onto `b`. Next to a pod that has
    // run for two hours, with nothing ended, the young pod is expected to run hours too;
    // next to one of two minutes (a workload just started), only minutes.
    let build = young_next_to;
    let settled = build(2 * 3600);
    let cmd = disrupt(&settled, &no_floor())
        .command
        .expect("a long-lived cluster's young pod pays back");
    assert_eq!(names(&cmd), vec!["a"], "{:#?}", cmd.rationale);
    assert!(disrupt(&settled, &lindy()).command.is_none());
    assert!(disrupt(&build(120), &no_floor()).command.is_none());
}

#[test]
fn the_floor_moves_a_young_clusters_pod_where_nothing_says_it_ends() {
    // A young cluster as in the test above, every pod minutes old and none ended: unfloored,
    // each is expected to run minutes; the default floor (the cap) expects hours, and the
    // same deletion pays back.
    let build = young_next_to;
    // Both arrived within the headroom rule's lookback; that rule is not what is tested here.
    let roomless = |o: DisruptionOptions| DisruptionOptions {
        headroom: None,
        ..o
    };
    assert!(
        disrupt(&build(120), &roomless(no_floor()))
            .command
            .is_none()
    );
    let cmd = disrupt(&build(120), &roomless(DisruptionOptions::default()))
        .command
        .expect("a floored young pod pays back");
    assert_eq!(names(&cmd), vec!["a"], "{:#?}", cmd.rationale);
    // Where 30 pods ended after 90 s and none has run longer, the evidence says it ends too.
    let mut ended = build(60);
    ended.ended_pods = (0..30)
        .map(|_| crate::model::EndedPod {
            lifetime_seconds: 90,
            owner_kind: None,
            ended_at: Some(1_000_000 - 10),
        })
        .collect();
    assert!(
        disrupt(&ended, &roomless(DisruptionOptions::default()))
            .command
            .is_none()
    );
}

#[test]
fn merges_are_found_beyond_the_emptiest_nodes() {
    // x1..x3: 16-vCPU nodes each running one old 9-vCPU pod (56% used): no two fit one node
    // cheaper than both, all three fit one 32-vCPU node (1.6/h against 2.4/h). e1, e2: the
    // emptiest nodes (8 vCPU, 10% used), each with eight pods a minute old: every group that
    // includes them has a one-minute horizon and does not pay back. Before the merge search,
    // the repack phase only tried groups starting with the emptiest nodes, so no command.
    let mut pods = Vec::new();
    for x in ["x1", "x2", "x3"] {
        pods.push(pod(&format!("big-{x}"), 9000, x));
    }
    for e in ["e1", "e2"] {
        for i in 0..8 {
            let mut p = pod(&format!("young-{e}-{i}"), 100, e);
            p.created_at = 1_000_000 - 60;
            pods.push(p);
        }
    }
    let s = snapshot(
        vec![
            od("e1", "large"),
            od("e2", "large"),
            od("x1", "xlarge"),
            od("x2", "xlarge"),
            od("x3", "xlarge"),
        ],
        pods,
    );
    let off = DisruptionOptions {
        merge_groups: 0,
        ..lindy()
    };
    assert!(disrupt(&s, &off).command.is_none());
    let cmd = disrupt(&s, &lindy())
        .command
        .expect("the merge search finds x1..x3");
    assert_eq!(names(&cmd), vec!["x1", "x2", "x3"]);
    assert_eq!(cmd.replacements.len(), 1);
    assert!((cmd.worst_case_saving_per_hour - 0.8).abs() < 1e-9);
    assert!(
        cmd.rationale.summary.contains("merge"),
        "{}",
        cmd.rationale.summary
    );
}

/// Old pods on `a` (1 vCPU) and `b` (5 vCPU); three 2-vCPU pods created 30 s ago on `c`
/// (`s.pods[2..5]`).
fn burst_world() -> Snapshot {
    let mut pods = vec![pod("old-a", 1000, "a"), pod("old-b", 5000, "b")];
    for i in 0..3 {
        let mut p = pod(&format!("burst-{i}"), 2000, "c");
        p.created_at = 1_000_000 - 30;
        pods.push(p);
    }
    snapshot(
        vec![od("a", "large"), od("b", "large"), od("c", "large")],
        pods,
    )
}

#[test]
fn consolidation_keeps_room_for_a_recent_burst() {
    // The three pods on `c` are a burst.
    let s = burst_world();
    let guard = headroom::Guard::new(&s, &headroom::Headroom::default());
    assert_eq!(guard.target.cpu_milli, 6000);
    assert_eq!(guard.free.cpu_milli, 7000 + 3000 + 2000);
    // Deleting `a` or `b` would leave 4 vCPU free, less than the burst's 6.
    let d = disrupt(&s, &DisruptionOptions::default());
    assert!(d.command.is_none(), "{:?}", d.command.map(|c| c.rationale));
    let without = DisruptionOptions {
        headroom: None,
        ..DisruptionOptions::default()
    };
    assert!(disrupt(&s, &without).command.is_some());
}

#[test]
fn replacements_of_evicted_pods_are_no_burst() {
    // The same three 2-vCPU pods 30 s old on `c`, but two are the new pods their workloads
    // created for pods a command evicted 31 s ago: only the third is an arrival.
    let mut s = burst_world();
    let evicted = |i: usize, at| crate::model::Eviction::of(&s.pods[2 + i], at, None);
    s.recent_evictions = vec![evicted(0, 1_000_000 - 31), evicted(1, 1_000_000 - 31)];
    let guard = headroom::Guard::new(&s, &headroom::Headroom::default());
    assert_eq!(guard.target.cpu_milli, 2000);
    // Deleting `a` leaves 4 vCPU free, enough for the one arrival.
    assert!(disrupt(&s, &DisruptionOptions::default()).command.is_some());
    // Evictions long before the pods were created replace none of them.
    s.recent_evictions = vec![evicted(0, 1_000_000 - 700), evicted(1, 1_000_000 - 700)];
    let guard = headroom::Guard::new(&s, &headroom::Headroom::default());
    assert_eq!(guard.target.cpu_milli, 6000);
}

#[test]
fn consolidation_keeps_gpu_room_for_a_recent_gpu_burst() {
    // Two 4-GPU nodes: `g1` holds one old CPU-only pod, `g2` a burst of three one-GPU pods
    // that arrived 30 s ago. `g2` has CPU and memory to spare for `g1`'s pod, and `c` is full,
    // so a sum of CPU and memory alone would let `g1` go; its four free GPUs are the room the
    // burst needs.
    const GPU: &str = "nvidia.com/gpu";
    let gpu_node = |name: &str| {
        let mut n = od(name, "large");
        n.allocatable.extended.insert(GPU.into(), 4);
        n
    };
    let mut pods = vec![pod("old", 1000, "g1"), pod("full", 7500, "c")];
    for i in 0..3 {
        let mut p = pod(&format!("burst-{i}"), 500, "g2");
        p.created_at = 1_000_000 - 30;
        p.containers[0].extended.insert(GPU.into(), 1);
        pods.push(p);
    }
    let s = snapshot(vec![gpu_node("g1"), gpu_node("g2"), od("c", "large")], pods);
    let guard = headroom::Guard::new(&s, &headroom::Headroom::default());
    assert_eq!(guard.target.get(GPU), 3);
    assert_eq!(guard.free.get(GPU), 4 + 1);
    let d = disrupt(&s, &DisruptionOptions::default());
    assert!(
        d.command.as_ref().is_none_or(|c| !names(c).contains(&"g1")),
        "{:?}",
        d.command.map(|c| c.rationale)
    );
    // Without the rule, `g1` is the cheapest thing to let go.
    let without = DisruptionOptions {
        headroom: None,
        ..DisruptionOptions::default()
    };
    let cmd = disrupt(&s, &without)
        .command
        .expect("a command without headroom");
    assert!(names(&cmd).contains(&"g1"), "{:?}", cmd.rationale);
}

#[test]
fn a_gpu_node_left_with_cpu_pods_is_replaced() {
    // One 8-vCPU node with a GPU (1.70/h, just above the 32-vCPU type) running one old CPU
    // pod. Valued at every option below its price, a replacement saves 0.10/h in the worst
    // case; the GPU no pod uses makes the premium apply, so the replacement keeps only
    // options close to the cheapest and is valued at them.
    // Two cheaper types with the same resource: a pod that uses it can only move there, and
    // only the premium (options near the cheapest, 0.30/h) would make that move pay.
    let resource_node = |resource: &str| {
        let mut types = types();
        for (name, cpu, price) in [("gpu8", 8, 1.7), ("gpu2", 2, 0.3), ("gpu6", 6, 1.6)] {
            let mut t = InstanceType::new(
                name,
                cpu * 1000,
                cpu * 2 * GIB,
                110,
                vec![Offering::new("zone-a", CapacityType::OnDemand, price)],
            );
            t.capacity.extended.insert(resource.into(), 1);
            types.push(t);
        }
        let mut s = snapshot(
            vec![node_of(
                &types,
                "g",
                "gpu8",
                "zone-a",
                CapacityType::OnDemand,
                "default",
            )],
            vec![pod("a", 1000, "g")],
        );
        s.instance_types = types;
        s
    };
    // The accelerator rule alone: the node is also under `underused_below`, which would
    // price its replacement the same way whatever its extended resources.
    let opts = without_underused(&DisruptionOptions::default());
    let gpu = resource_node("nvidia.com/gpu");
    let cmd = disrupt(&gpu, &opts)
        .command
        .expect("the idle GPU node is replaced");
    assert_banded_replacement(&cmd, &gpu, &opts, "g");

    // An extended resource that is not an accelerator does not count.
    let kvm = resource_node("devices.kubevirt.io/kvm");
    assert!(valued_at_worst_case(disrupt(&kvm, &opts).command));

    // Nor does a GPU the pod uses: its move to `gpu2` is valued at `gpu6`, and does not pay.
    let mut used = resource_node("nvidia.com/gpu");
    std::sync::Arc::make_mut(&mut used.pods[0]).containers[0]
        .extended
        .insert("nvidia.com/gpu".into(), 1);
    assert!(valued_at_worst_case(disrupt(&used, &opts).command));
}

/// Adds an "odd" on-demand type of `vcpus` (2 GiB each) at `price` in zone-a, just below a
/// candidate's price, so a single node's replacement keeps it as its dearest option; returns
/// the candidate "big" of type `ty`.
fn with_odd_type(types: &mut Vec<InstanceType>, vcpus: i64, price: f64, ty: &str) -> Node {
    types.push(InstanceType::new(
        "odd",
        vcpus * 1000,
        vcpus * 2 * GIB,
        110,
        vec![Offering::new("zone-a", CapacityType::OnDemand, price)],
    ));
    node_of(
        types,
        "big",
        ty,
        "zone-a",
        CapacityType::OnDemand,
        "default",
    )
}

#[test]
fn a_settled_node_of_the_wrong_shape_is_replaced_like_a_merge() {
    // A 16-vCPU, 32-GiB node (0.80/h) holding six pods of 0.5 vCPU and 4 GiB: 75% of its
    // memory and 19% of its CPU. They fit a 4-vCPU, 32-GiB type (0.30/h), but a 15-vCPU type
    // at 0.78/h is an option of any replacement, so valued at every option below the
    // candidate's price a replacement saves 0.02/h in the worst case, which pays for no
    // eviction. On-demand only, so the replacement is another shape, not spot.
    let cluster = |age: i64, cpu: i64, mem: i64| {
        let mut types = types();
        for t in &mut types {
            t.offerings
                .retain(|o| o.capacity_type == CapacityType::OnDemand);
        }
        types.push(InstanceType::new(
            "mem",
            4000,
            32 * GIB,
            110,
            vec![Offering::new("zone-a", CapacityType::OnDemand, 0.30)],
        ));
        let node = with_odd_type(&mut types, 15, 0.78, "xlarge");
        let mut s = snapshot(vec![node], Vec::new());
        let pods: Vec<Pod> = (0..6)
            .map(|i| {
                let name = format!("p{i}");
                let mut p = Pod::new("default", &name, cpu, mem)
                    .on("big")
                    .label("app", &name);
                p.owner_kind = Some("ReplicaSet".into());
                p.created_at = s.now - age;
                p
            })
            .collect();
        s.pods = Snapshot::shared_pods(pods);
        s.instance_types = types;
        s
    };
    let opts = DisruptionOptions::default();
    let reshaping = |below: Option<f64>| DisruptionOptions {
        payback: Some(payback::Payback {
            reshape_below: below,
            ..opts.payback.clone().expect("payback on by default")
        }),
        ..opts.clone()
    };
    let settled = cluster(10 * 3600, 500, 4 * GIB);
    assert!(disrupt(&settled, &reshaping(None)).command.is_none());

    // The pods are expected to stay past the horizon cap, the node is the wrong shape for
    // them, and they fit a node at under 0.6 of its price: the options are bounded by the
    // premium, as a merge's.
    let cmd = disrupt(&settled, &opts)
        .command
        .expect("the settled node of the wrong shape is replaced");
    assert_eq!(names(&cmd), vec!["big"]);
    assert_eq!(cmd.replacements.len(), 1);
    assert!(
        cmd.replacements_worst_case_price <= 0.30 * 1.25 + 1e-9,
        "{}",
        cmd.replacements_worst_case_price
    );
    assert_eq!(
        cmd.replacement_premium,
        Some(consolidation::SINGLE_NODE_PREMIUM)
    );
    // Re-validation prices the replacement under the premium the command was decided with.
    assert!(validate(&cmd, &settled, &opts).valid);

    // 0.30/h is not under a third of its price.
    assert!(disrupt(&settled, &reshaping(Some(0.33))).command.is_none());

    // Unfloored, pods that have run 3 h are expected (Lindy) to run 3 h more, short of the
    // 4 h cap: the premium-bounded worst case would pay (0.43/h x 3 h against about 0.61), but
    // the node is not settled, so it is valued as before. The default floor (the cap) expects
    // them to stay, as nothing in this cluster ever ended.
    let young = cluster(3 * 3600, 500, 4 * GIB);
    assert!(disrupt(&young, &no_floor()).command.is_none());
    assert!(disrupt(&young, &opts).command.is_some());

    // Six pods of 1 vCPU and 2 GiB use 37.5% of its CPU and of its memory alike and also fit
    // new nodes at 0.30/h, but the node is too large, not the wrong shape (a node that
    // departures left half empty): valued as before.
    assert!(valued_at_worst_case(
        disrupt(&cluster(10 * 3600, 1000, 2 * GIB), &opts).command
    ));
}

#[test]
fn a_node_left_mostly_empty_is_replaced_like_a_merge() {
    // A 32-vCPU node (1.60/h) sized for pods that have left. A 31-vCPU type at 1.55/h is an
    // option of any replacement, so valued at every option below the candidate's price a
    // replacement saves 0.05/h in the worst case. Under the
    // `underused_below` share of its CPU and memory, the options are bounded by the premium
    // (near the cheapest), as for a merge.
    let cluster = |pods: usize| {
        let mut types = types();
        let node = with_odd_type(&mut types, 31, 1.55, "xxlarge");
        let pods = (0..pods)
            .map(|i| pod(&format!("p{i}"), 1000, "big"))
            .collect();
        let mut s = snapshot(vec![node], pods);
        s.instance_types = types;
        s
    };
    let opts = DisruptionOptions::default();
    let one = cluster(1);
    let cmd = disrupt(&one, &opts)
        .command
        .expect("the mostly empty node is replaced");
    assert_banded_replacement(&cmd, &one, &opts, "big");

    // Without the rule, valued at the worst case (the 31-vCPU option).
    assert!(valued_at_worst_case(
        disrupt(&one, &without_underused(&opts)).command
    ));

    // Ten pods use 31% of its CPU: above the threshold, valued as before.
    assert!(valued_at_worst_case(disrupt(&cluster(10), &opts).command));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Every consolidation command the default rules take pays for itself (recomputed here
    /// from the command and the snapshot) and leaves the headroom the recent arrivals ask for.
    #[test]
    fn default_consolidation_pays_back_and_keeps_room(seed in any::<u64>(), young in 0i64..20_000) {
        let mut s = random_cluster(seed);
        // Half the pods arrived `young` seconds ago, so horizons and the headroom target vary.
        let now = s.now;
        for p in s.pods.iter_mut().map(std::sync::Arc::make_mut).step_by(2) {
            p.created_at = now - young;
        }
        let opts = DisruptionOptions::default();
        let Some(cmd) = disrupt(&s, &opts).command.filter(|c| c.method == Method::Consolidation) else {
            return Ok(());
        };
        let set = find_candidates(&s, &opts);
        let chosen: Vec<&Candidate> = cmd
            .candidates
            .iter()
            .filter_map(|c| set.by_name(&c.name))
            .collect();
        prop_assert_eq!(chosen.len(), cmd.candidates.len());
        let knobs = opts.payback.clone().unwrap_or_default();
        let snap = &s;
        let requests: Vec<Resources> = s.pods.iter().map(|p| pod_requests(p)).collect();
        let requests = &requests;
        let pods = chosen.iter().flat_map(|c| {
            let node = &snap.nodes[c.node];
            c.pods
                .iter()
                .map(move |&pi| (&*snap.pods[pi], &requests[pi], node, c.price))
        });
        let v = payback::value(
            cmd.worst_case_saving_per_hour,
            cmd.replacements_worst_case_price,
            pods,
            &super::consolidation::remaining_life(&s, &opts),
            payback::average_pod_price(&s, &s.pods.iter().map(|p| pod_requests(p)).collect::<Vec<_>>()),
            &knobs,
        );
        prop_assert!(v.net > 0.0, "seed {seed}: {v:?}");
        let guard = headroom::Guard::new(&s, &opts.headroom.clone().unwrap_or_default());
        let mut taken = headroom::Room::default();
        for r in headroom::Guard::taken_by(&s, &chosen) {
            taken.add_assign(&r);
        }
        let mut given = headroom::Room::default();
        for m in &cmd.moves {
            if matches!(m.to, Destination::Replacement(_))
                && let Some(p) = s.pods.iter().find(|p| p.namespace == m.pod.namespace && p.name == m.pod.name)
            {
                given.add_assign(&headroom::room_of(&pod_requests(p)));
            }
        }
        prop_assert!(guard.allows(&taken, &given), "seed {seed}: {guard:?} taken {taken:?} given {given:?}");
    }
}

#[test]
fn a_node_still_settling_after_an_eviction_is_not_consolidated() {
    // `d` on `n2` is its workload's new pod for one evicted `ago` seconds before now (its work
    // goes on since the epoch, so it is not young to the payback rule).
    let settling = |ago: i64| {
        let mut s = two_large_nodes();
        let i = s.pods.iter().position(|p| p.name == "d").expect("d");
        let mut d = (*s.pods[i]).clone();
        d.created_at = s.now - ago + 1;
        s.recent_evictions = vec![Eviction::of(&d, s.now - ago, Some(0))];
        s.pods[i] = std::sync::Arc::new(d);
        s
    };
    let off = DisruptionOptions {
        settle_seconds: 0,
        ..lindy()
    };
    assert_eq!(
        consolidates(&settling(60), &off),
        Some(vec!["n2".to_string()])
    );
    let on = lindy();
    assert_eq!(on.settle_seconds, 300);
    let d = disrupt(&settling(60), &on);
    assert!(
        d.command
            .as_ref()
            .is_none_or(|c| !c.candidate_names().contains(&"n2")),
        "{:?}",
        d.command.map(|c| c.rationale.summary)
    );
    // Settled: the same node goes.
    assert_eq!(
        consolidates(&settling(301), &on),
        Some(vec!["n2".to_string()])
    );
    // When every candidate is settling, the decision says so.
    let mut all = two_large_nodes();
    let now = all.now;
    all.recent_evictions = all
        .pods
        .iter()
        .map(|p| Eviction::of(p, now - 60, Some(0)))
        .collect();
    all.pods = Snapshot::shared_pods(all.pods.iter().map(|p| {
        let mut p = (**p).clone();
        p.created_at = now - 59;
        p
    }));
    let d = disrupt(&all, &on);
    assert!(d.command.is_none());
    let note = d
        .methods
        .iter()
        .find(|m| m.method == Method::Consolidation)
        .and_then(|m| m.note.clone())
        .unwrap_or_default();
    assert!(note.contains("recreated for an eviction"), "{note}");
}
