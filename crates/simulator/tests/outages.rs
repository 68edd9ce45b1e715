//! Capacity outages: launches of an offering fail for a while; every strategy must get its
//! pods running elsewhere, learn from the failure (no launch storm), use the offering again
//! once the outage is over, and roll a command back when its replacement fails. A spot pool
//! reclaimed takes its running nodes too: their pods must run again elsewhere.

use karpenter_capi_simulator::report::Report;
use karpenter_capi_simulator::{run, scenario};

fn run_all(yaml: &str, name: &str, strategies: &[&str]) -> Report {
    let sc = scenario::parse(yaml, name).expect("valid scenario");
    let ls = scenario::from_value(sc, name);
    run::run(
        &ls,
        &run::RunOptions {
            strategies: strategies.iter().map(|s| s.to_string()).collect(),
            seeds: 1,
        },
    )
    .expect("run")
}

fn scenario(settings: &str, types: &str, rest: &str) -> String {
    format!(
        r#"name: outage
settings:
  endSeconds: 3600
{settings}
catalog:
  overhead: none
  types:
{types}
zones: [zone-a, zone-b]
nodePools:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata:
      name: default
    spec:
      template:
        spec:
          nodeClassRef: {{group: karpenter.cluster.x-k8s.io, kind: ClusterAPINodeClass, name: default}}
          requirements: []
      disruption:
        consolidationPolicy: WhenEmptyOrUnderutilized
        consolidateAfter: 0s
{rest}"#
    )
}

fn usage_hours(r: &karpenter_capi_simulator::engine::RunResult, ty: &str, zone: &str) -> f64 {
    r.node_usage
        .iter()
        .filter(|u| u.instance_type == ty && u.zone == zone)
        .map(|u| u.node_hours)
        .sum()
}

#[test]
fn a_failed_offering_is_backed_off_and_the_pods_run_elsewhere() {
    // `small` cannot launch in zone-a all run long; zone-b has it at the same price.
    let yaml = scenario(
        "  capacityOutages:\n    - {instanceType: small, zone: zone-a}",
        "    - {name: small, vcpu: 4, memoryMib: 8192, price: 0.10}",
        "workload:\n  pods:\n    - {name: web, count: 3, requests: {cpu: \"1\", memory: 1Gi}}\n",
    );
    let report = run_all(&yaml, "outage.yaml", &["cost-aware", "karpenter", "cas"]);
    for r in &report.runs {
        let s = &r.summary;
        assert_eq!(s.pods_never_scheduled, 0, "{}: {s:?}", r.strategy);
        // Until a refused launch is seen: ours reads the provider's capacity error from the
        // Machine (10 s); the Cluster Autoscaler on Cluster API waits out
        // --max-node-provision-time (900 s).
        let seen = if r.strategy == "cas" { 900.0 } else { 10.0 };
        if r.strategy == "karpenter" {
            // One CreateFleet names both zones' pools: zone-b fills it, nothing fails, and
            // the pods wait for one launch only.
            assert_eq!(s.launch_failures, 0, "{}: {s:?}", r.strategy);
            assert!(s.pending_p50_seconds < 150.0, "{}: {s:?}", r.strategy);
        } else {
            // A MachineDeployment (a node group) is one pool: its launch fails, once per
            // back-off window at most (no launch storm against the outage).
            assert!(
                (1..=2).contains(&s.launch_failures),
                "{}: {s:?}",
                r.strategy
            );
            // The pods waited for the failure to be seen and a second launch (90 s).
            assert!(
                (seen + 90.0..seen + 150.0).contains(&s.pending_p50_seconds),
                "{}: {s:?}",
                r.strategy
            );
        }
        assert!(
            usage_hours(r, "small", "zone-b") > 0.95 - seen / 3600.0,
            "{}: {:?}",
            r.strategy,
            r.node_usage
        );
        // The refused launch ran no instance: no node-hours, whatever the wait.
        assert_eq!(
            usage_hours(r, "small", "zone-a"),
            0.0,
            "{}: {:?}",
            r.strategy,
            r.node_usage
        );
    }
}

#[test]
fn the_cheap_offering_is_used_again_after_the_outage() {
    // `small` (zone-a only) is out until 600 s: the pods go to `big` first; once the
    // outage and the back-off are over, consolidation replaces `big` with `small`.
    let yaml = scenario(
        "  capacityOutages:\n    - {instanceType: small, untilSeconds: 600}",
        "    - {name: small, vcpu: 4, memoryMib: 8192, price: 0.10, zones: [zone-a]}\n    - {name: big, vcpu: 16, memoryMib: 32768, price: 0.50, zones: [zone-a]}",
        "workload:\n  pods:\n    - {name: web, count: 3, requests: {cpu: \"1\", memory: 1Gi}}\n",
    );
    let report = run_all(&yaml, "outage-ends.yaml", &["cost-aware", "karpenter"]);
    for r in &report.runs {
        let s = &r.summary;
        assert_eq!(s.pods_never_scheduled, 0, "{}: {s:?}", r.strategy);
        // Ours: the first failure, then one per back-off window (5 minutes) until 600 s:
        // each retry is a replacement that fails and is rolled back. Karpenter's first
        // launch names `big` too (one CreateFleet of every option), so only its
        // replacements fail.
        let provisioning_failures = u32::from(r.strategy != "karpenter");
        assert!(
            (provisioning_failures..=4).contains(&s.launch_failures),
            "{}: {s:?}",
            r.strategy
        );
        assert_eq!(
            s.commands_rolled_back + provisioning_failures,
            s.launch_failures,
            "{}: {s:?}",
            r.strategy
        );
        assert!(
            usage_hours(r, "big", "zone-a") > 0.0,
            "{}: {:?}",
            r.strategy,
            r.node_usage
        );
        assert!(
            usage_hours(r, "small", "zone-a") > 0.5,
            "{}: {:?}",
            r.strategy,
            r.node_usage
        );
    }
}

#[test]
fn karpenters_replacement_is_one_fleet_over_its_pools() {
    // One pod on an existing `big` node; `small` is out in zone-a all run, `small-b` is
    // offered in zone-b for a little more. Karpenter's replacement NodeClaim names both pools
    // (one CreateFleet): the cloud fills it from zone-b and the command succeeds at once
    // (afterwards Karpenter keeps trying to move to the cheaper `small` every 3 minutes,
    // each attempt refused). Ours launches one MachineDeployment (zone-a's, the cheapest),
    // which fails and is rolled back; zone-b's is used after the back-off.
    let yaml = scenario(
        "  capacityOutages:\n    - {instanceType: small, zone: zone-a}",
        "    - {name: small, vcpu: 4, memoryMib: 8192, price: 0.10, zones: [zone-a]}\n    - {name: small-b, vcpu: 4, memoryMib: 8192, price: 0.12, zones: [zone-b]}\n    - {name: big, vcpu: 16, memoryMib: 32768, price: 0.50, zones: [zone-a]}",
        "existingNodes:\n  - {name: old, instanceType: big, zone: zone-a, nodePool: default, count: 1}\nworkload:\n  pods:\n    - {name: web, count: 1, requests: {cpu: \"1\", memory: 1Gi}}\n",
    );
    let report = run_all(&yaml, "outage-fleet.yaml", &["cost-aware", "karpenter"]);
    for r in &report.runs {
        let s = &r.summary;
        assert_eq!(s.pods_never_scheduled, 0, "{}: {s:?}", r.strategy);
        assert_eq!(
            s.nodes_terminated, 1,
            "{}: the big node goes: {s:?}",
            r.strategy
        );
        let big = usage_hours(r, "big", "zone-a");
        if r.strategy == "karpenter" {
            // Replaced by its first command, filled from zone-b: 115 s of `big`. Launched
            // into zone-a's pool alone, that replacement is refused and the next command
            // comes 20 s later (135 s).
            assert!(big < 125.0 / 3600.0, "{}: {:?}", r.strategy, r.node_usage);
        } else {
            // One refused MachineDeployment and its back-off first.
            assert!(big > 0.1, "{}: {:?}", r.strategy, r.node_usage);
            assert!(s.commands_rolled_back >= 1, "{}: {s:?}", r.strategy);
        }
        assert!(
            usage_hours(r, "small-b", "zone-b") > 0.5,
            "{}: {:?}",
            r.strategy,
            r.node_usage
        );
    }
}

#[test]
fn a_command_whose_replacement_fails_is_rolled_back() {
    // One pod on an existing `big` node: consolidation would replace it with `small`, whose
    // launches always fail. The candidate must stay, its pod never evicted.
    let yaml = scenario(
        "  capacityOutages:\n    - {instanceType: small}",
        "    - {name: small, vcpu: 4, memoryMib: 8192, price: 0.10, zones: [zone-a]}\n    - {name: big, vcpu: 16, memoryMib: 32768, price: 0.50, zones: [zone-a]}",
        "existingNodes:\n  - {name: old, instanceType: big, zone: zone-a, nodePool: default, count: 1}\nworkload:\n  pods:\n    - {name: web, count: 1, requests: {cpu: \"1\", memory: 1Gi}}\n",
    );
    let report = run_all(&yaml, "outage-rollback.yaml", &["cost-aware", "karpenter"]);
    for r in &report.runs {
        let s = &r.summary;
        assert_eq!(s.pods_never_scheduled, 0, "{}: {s:?}", r.strategy);
        assert!(s.commands_rolled_back >= 1, "{}: {s:?}", r.strategy);
        assert_eq!(
            s.commands_rolled_back, s.launch_failures,
            "{}: {s:?}",
            r.strategy
        );
        assert_eq!(s.pods_disrupted, 0, "{}: {s:?}", r.strategy);
        assert_eq!(s.nodes_terminated, 0, "{}: {s:?}", r.strategy);
        // Tried again only after each back-off (3 or 5 minutes), not every loop.
        assert!(s.launch_failures <= 20, "{}: {s:?}", r.strategy);
    }
}

/// `small` in zone-a, spot at 35% of on-demand; three pods; spot in zone-a reclaimed from
/// 1,200 s to 2,400 s, with `notice` seconds of warning.
fn reclaimed_spot(notice: i64) -> String {
    scenario(
        &format!(
            "  interruptionNoticeSeconds: {notice}\n  capacityOutages:\n    - {{capacityType: spot, zone: zone-a, fromSeconds: 1200, untilSeconds: 2400, reclaimRunning: true}}"
        ),
        "    - {name: small, vcpu: 4, memoryMib: 8192, price: 0.10, spotPrice: 0.035, zones: [zone-a]}",
        "capacityTypes: [on-demand, spot]\nworkload:\n  pods:\n    - {name: web, count: 3, requests: {cpu: \"1\", memory: 1Gi}}\n",
    )
}

fn spot_hours(r: &karpenter_capi_simulator::engine::RunResult) -> f64 {
    r.node_usage
        .iter()
        .filter(|u| u.capacity_type == "spot")
        .map(|u| u.node_hours)
        .sum()
}

#[test]
fn pods_of_a_reclaimed_spot_pool_run_again_on_demand() {
    let report = run_all(
        &reclaimed_spot(0),
        "reclaim.yaml",
        &["cost-aware", "karpenter"],
    );
    for r in &report.runs {
        let s = &r.summary;
        assert_eq!(
            s.pods_never_scheduled + s.pods_left_pending,
            0,
            "{}: {s:?}",
            r.strategy
        );
        // The three pods ran on spot (the cheapest) until the pool was taken back.
        assert!(s.nodes_interrupted >= 1, "{}: {s:?}", r.strategy);
        assert_eq!(s.pods_interrupted, 3, "{}: {s:?}", r.strategy);
        // Not the autoscaler's evictions, and not its node deletions.
        assert!(
            s.nodes_terminated < s.nodes_launched,
            "{}: {s:?}",
            r.strategy
        );
        // Spot first (cheapest), which the outage fails, then on-demand: the pods waited
        // for the failure and a launch.
        assert!(s.launch_failures >= 1, "{}: {s:?}", r.strategy);
        assert!(s.evicted_wait_max_seconds >= 60.0, "{}: {s:?}", r.strategy);
        assert!(
            r.node_usage
                .iter()
                .any(|u| u.capacity_type == "on-demand" && u.node_hours > 0.1),
            "{}: {:?}",
            r.strategy,
            r.node_usage
        );
    }
}

#[test]
fn a_reclaimed_node_costs_until_its_notice_ends() {
    let at_once = run_all(&reclaimed_spot(0), "reclaim.yaml", &["karpenter"]);
    let warned = run_all(&reclaimed_spot(120), "reclaim-notice.yaml", &["karpenter"]);
    let (a, w) = (&at_once.runs[0], &warned.runs[0]);
    // Something was interrupted, or the billing comparison below holds trivially.
    assert!(a.summary.nodes_interrupted >= 1, "{:?}", a.summary);
    assert_eq!(a.summary.nodes_interrupted, w.summary.nodes_interrupted);
    // Each interrupted node is billed 120 s more; the pods left it at the warning either way.
    let extra = w.summary.nodes_interrupted as f64 * 120.0 / 3600.0;
    assert!(
        (spot_hours(w) - spot_hours(a) - extra).abs() < 1e-6,
        "{} vs {} (+{extra})",
        spot_hours(w),
        spot_hours(a)
    );
    assert_eq!(a.summary.pods_interrupted, w.summary.pods_interrupted);
}

#[test]
fn an_offering_that_keeps_failing_is_tried_less_and_less_often() {
    // As `a_command_whose_replacement_fails_is_rolled_back`, over two hours: each failure of
    // `small` doubles our back-off (5, 10, 20, then 30 minutes), where one fixed window for
    // every strategy (`launchBackoffSeconds`) retries it every five minutes.
    let yaml = |settings: &str| {
        scenario(
            &format!("  capacityOutages:\n    - {{instanceType: small}}\n{settings}"),
            "    - {name: small, vcpu: 4, memoryMib: 8192, price: 0.10, zones: [zone-a]}\n    - {name: big, vcpu: 16, memoryMib: 32768, price: 0.50, zones: [zone-a]}",
            "existingNodes:\n  - {name: old, instanceType: big, zone: zone-a, nodePool: default, count: 1}\nworkload:\n  pods:\n    - {name: web, count: 1, requests: {cpu: \"1\", memory: 1Gi}}\n",
        )
        .replace("endSeconds: 3600", "endSeconds: 7200")
    };
    let growing = run_all(&yaml(""), "outage-growing.yaml", &["cost-aware"]);
    let fixed = run_all(
        &yaml("  launchBackoffSeconds: 300"),
        "outage-fixed.yaml",
        &["cost-aware"],
    );
    let (g, f) = (&growing.runs[0].summary, &fixed.runs[0].summary);
    assert!((4..=7).contains(&g.launch_failures), "{g:?}");
    assert!(f.launch_failures >= 12, "{f:?}");
    assert_eq!(g.pods_disrupted + f.pods_disrupted, 0);
}
