//! What must hold for every strategy on any generated workload, whatever it costs: no pod
//! bound where it does not fit, every pod bound within a bounded wait, every evicted pod
//! placed again, no pod left pending at the end, utilisation never above 100%.
//!
//! The generators only make pods some catalog type holds, under NodePools without limits (the
//! variants add spot, a preferred NodePool some pods may not use or that runs out of its
//! limits, the packing scheduler), so
//! a pod that waits for long or never runs is an autoscaler bug, not the workload's fault
//! (the core's property test found three such bugs at high case counts; `docs/simulator.md`,
//! round 7). CI runs a few cases; `PROPTEST_CASES=500 cargo test --release -p
//! karpenter-capi-simulator --test invariants` hunts deeper.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use karpenter_capi_simulator::convert::NodePoolV1;
use karpenter_capi_simulator::outages::CapacityOutage;
use karpenter_capi_simulator::pdb::GroupBudget;
use karpenter_capi_simulator::scenario::{
    CapacityTypeName, EvictedPodPlacement, PendingPodPlacement, SchedulerScoring,
};
use karpenter_capi_simulator::{generators, run, scenario};
use proptest::prelude::*;

/// The longest a pod may wait for its first binding or after an eviction: a batch window
/// (10 s), a launch and registration (90 s), a validation delay and a disruption period, and
/// a failed first try, with room to spare. Seen in every report: 91-102 s.
const MAX_WAIT_SECONDS: f64 = 600.0;

/// A NodePool preferred over `default` (weight 50) that only some pods can or may use, so the
/// planners must fall back to `default` for the others.
fn preferred_pool(restriction: &str) -> NodePoolV1 {
    let yaml = format!(
        "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: preferred}}
spec:
  weight: 50
  template:
    spec:
      nodeClassRef: {{group: karpenter.cluster.x-k8s.io, kind: ClusterAPINodeClass, name: default}}
{restriction}"
    );
    serde_saphyr::from_str(&yaml).expect("a valid NodePool")
}

/// What the generated scenario is run with besides its own NodePool: the variations a real
/// cluster adds and the generators do not.
#[derive(Debug, Clone, Copy)]
enum Variant {
    AsGenerated,
    /// Spot offered next to on-demand (spot at 35% of the price).
    Spot,
    /// A preferred pool tainted with a taint no generated pod tolerates.
    TaintedPreferredPool,
    /// A preferred pool in one zone only, and the kube-scheduler packing (most-allocated).
    OneZonePreferredPoolPacking,
    /// A preferred pool limited to 16 CPUs that asks for at least 3 instance types per
    /// launch: the rest overflows to `default`.
    LimitedPreferredPoolMinValues,
    /// Evicted pods placed by the kube-scheduler's scoring, not where the command planned.
    EvictedByScoring,
    /// Pending pods too go wherever the kube-scheduler's queue and scoring put them, not to
    /// the nodes they were nominated to.
    AllPlacedByScoring,
    /// Every group under a PodDisruptionBudget of `maxUnavailable: 1`, evicted pods placed by
    /// the scheduler's scoring: drains wait on the Eviction API (round 52).
    Budgets,
    /// Every launch in the first zone fails during the first [`OUTAGE_SECONDS`] (a zonal
    /// capacity outage, round 54): strategies back off and launch elsewhere; pods that need
    /// that zone wait for its end.
    ZoneOutage,
    /// Spot offered next to on-demand, and the first zone's spot pool reclaimed from
    /// [`RECLAIM_AT_SECONDS`] for [`OUTAGE_SECONDS`]: its running nodes end at once, their
    /// pods must run again elsewhere.
    SpotReclaimed,
}

/// When [`Variant::SpotReclaimed`] takes the first zone's spot nodes back.
const RECLAIM_AT_SECONDS: i64 = 1800;

/// How long [`Variant::ZoneOutage`] lasts from the run's start.
const OUTAGE_SECONDS: i64 = 1200;

/// A drain that started this long before the run's end must have finished: with one
/// unavailable pod per group allowed, it waits for each moved pod to be ready elsewhere, and
/// at worst for a pending replica of the group to get its node (the wait bound above).
const MAX_DRAIN_SECONDS: i64 = 1800;

const VARIANTS: [Variant; 10] = [
    Variant::AsGenerated,
    Variant::Spot,
    Variant::TaintedPreferredPool,
    Variant::OneZonePreferredPoolPacking,
    Variant::LimitedPreferredPoolMinValues,
    Variant::EvictedByScoring,
    Variant::AllPlacedByScoring,
    Variant::Budgets,
    Variant::ZoneOutage,
    Variant::SpotReclaimed,
];

fn scenario_for(kind: &str, seed: u64, pods: usize, variant: Variant) -> scenario::LoadedScenario {
    let mut s = generators::generate(kind, seed, Some(pods)).expect("a known generator");
    match variant {
        Variant::AsGenerated => {}
        Variant::Spot => {
            s.capacity_types = vec![CapacityTypeName::OnDemand, CapacityTypeName::Spot];
            s.catalog.spot_price_factor = Some(0.35);
        }
        Variant::TaintedPreferredPool => s.node_pools.push(preferred_pool(
            "      requirements: []\n      taints: [{key: dedicated, value: batch, effect: NoSchedule}]\n",
        )),
        Variant::OneZonePreferredPoolPacking => {
            let zone = s.zones.first().cloned().unwrap_or_default();
            s.node_pools.push(preferred_pool(&format!(
                "      requirements: [{{key: topology.kubernetes.io/zone, operator: In, values: [{zone}]}}]\n"
            )));
            s.settings.scheduler_scoring = SchedulerScoring::MostAllocated;
        }
        Variant::LimitedPreferredPoolMinValues => {
            let mut pool = preferred_pool(
                "      requirements: [{key: node.kubernetes.io/instance-type, operator: Exists, minValues: 3}]\n",
            );
            pool.spec.limits = Some(BTreeMap::from([(
                "cpu".to_string(),
                Quantity("16".to_string()),
            )]));
            s.node_pools.push(pool);
        }
        Variant::EvictedByScoring => {
            s.settings.evicted_pod_placement = EvictedPodPlacement::Scheduler;
        }
        Variant::AllPlacedByScoring => {
            s.settings.evicted_pod_placement = EvictedPodPlacement::Scheduler;
            s.settings.pending_pod_placement = PendingPodPlacement::Scheduler;
        }
        Variant::Budgets => {
            s.settings.evicted_pod_placement = EvictedPodPlacement::Scheduler;
            s.workload.disruption_budget = Some(GroupBudget {
                min_available: None,
                max_unavailable: Some(IntOrString::Int(1)),
            });
        }
        Variant::ZoneOutage => {
            s.settings.capacity_outages = vec![CapacityOutage {
                instance_type: None,
                zone: s.zones.first().cloned(),
                capacity_type: None,
                from_seconds: 0,
                until_seconds: Some(OUTAGE_SECONDS),
                reclaim_running: false,
            }];
        }
        Variant::SpotReclaimed => {
            s.capacity_types = vec![CapacityTypeName::OnDemand, CapacityTypeName::Spot];
            s.catalog.spot_price_factor = Some(0.35);
            s.settings.capacity_outages = vec![CapacityOutage {
                instance_type: None,
                zone: s.zones.first().cloned(),
                capacity_type: Some(CapacityTypeName::Spot),
                from_seconds: RECLAIM_AT_SECONDS,
                until_seconds: Some(RECLAIM_AT_SECONDS + OUTAGE_SECONDS),
                reclaim_running: true,
            }];
        }
    }
    // Short runs: arrivals, departures and consolidation all happen within three hours, and
    // every pod has half an hour after the last arrival to be placed.
    let last_arrival = s
        .workload
        .pods
        .iter()
        .map(|g| g.arrive_at + g.arrive_every_seconds * (g.count.max(1) as i64 - 1))
        .max()
        .unwrap_or(0);
    s.settings.end_seconds = Some((last_arrival + 1800).max(3 * 3600));
    scenario::from_value(s, &format!("{kind}-{seed}-{pods}-{variant:?}"))
}

fn check(kind: &str, seed: u64, pods: usize, variant: Variant) -> Result<(), TestCaseError> {
    let ls = scenario_for(kind, seed, pods, variant);
    let opts = run::RunOptions {
        strategies: vec!["cost-aware".into(), "karpenter".into(), "cas".into()],
        seeds: 1,
    };
    let report = run::run(&ls, &opts).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(report.runs.len(), 3);
    // A pod that needs the zone out waits for the outage's end, a back-off (at most 300 s)
    // and a launch.
    let max_wait = match variant {
        Variant::ZoneOutage | Variant::SpotReclaimed => {
            MAX_WAIT_SECONDS + (OUTAGE_SECONDS + 300) as f64
        }
        _ => MAX_WAIT_SECONDS,
    };
    for r in &report.runs {
        let s = &r.summary;
        let who = format!("{kind} seed {seed} pods {pods} {variant:?}, {}", r.strategy);
        prop_assert_eq!(s.overcommitted_bindings, 0, "{}: overcommitted", who);
        prop_assert_eq!(
            s.pods_never_scheduled,
            0,
            "{}: pods never ran: {:?}",
            who,
            r.unschedulable_reasons
        );
        prop_assert!(
            s.pending_max_seconds <= max_wait,
            "{}: a pod waited {} s for its first node: {:?}",
            who,
            s.pending_max_seconds,
            r.unschedulable_reasons
        );
        prop_assert!(
            s.evicted_wait_max_seconds <= max_wait,
            "{}: an evicted pod waited {} s",
            who,
            s.evicted_wait_max_seconds
        );
        prop_assert!(s.total_cost.is_finite() && s.total_cost >= 0.0, "{}", who);
        let end = ls.scenario.settings.end_seconds.unwrap_or(i64::MAX);
        for c in &r.commands {
            let finished_in_time = c.drain_seconds.is_some_and(|d| d <= MAX_DRAIN_SECONDS);
            prop_assert!(
                finished_in_time || end - c.drained_at < MAX_DRAIN_SECONDS,
                "{}: a drain begun at {} took {:?} s",
                who,
                c.drained_at,
                c.drain_seconds
            );
        }
        if !matches!(variant, Variant::Budgets) {
            prop_assert_eq!(s.evictions_held_by_pdb, 0, "{}: no budgets", who);
        }
        if !matches!(variant, Variant::ZoneOutage | Variant::SpotReclaimed) {
            prop_assert_eq!(s.launch_failures, 0, "{}: no outage", who);
        }
        if !matches!(variant, Variant::SpotReclaimed) {
            prop_assert_eq!(s.nodes_interrupted, 0, "{}: nothing reclaimed", who);
        }
        // Only a failed replacement rolls a command back.
        prop_assert!(s.commands_rolled_back <= s.launch_failures, "{}", who);
        prop_assert!(s.nodes_terminated <= s.nodes_launched, "{}", who);
        prop_assert!(s.nodes_removed_young <= s.nodes_terminated, "{}", who);
        // The variant took effect: Karpenter-shaped strategies launch the cheapest offering.
        if matches!(variant, Variant::Spot | Variant::SpotReclaimed) && r.strategy != "cas" {
            prop_assert!(
                r.node_usage.iter().any(|u| u.capacity_type == "spot"),
                "{}: spot offered at 35% of the price and never launched: {:?}",
                who,
                r.node_usage
            );
        }
        for x in &r.series {
            prop_assert!(
                x.cpu_utilisation <= 1.0 + 1e-9 && x.memory_utilisation <= 1.0 + 1e-9,
                "{}: utilisation above 100% at t={}: cpu {} memory {}",
                who,
                x.t,
                x.cpu_utilisation,
                x.memory_utilisation
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn every_strategy_places_every_generated_pod_in_time(
        kind in prop::sample::select(generators::KINDS),
        seed in 0u64..1_000_000,
        pods in 10usize..80,
        variant in prop::sample::select(&VARIANTS[..]),
    ) {
        check(kind, seed, pods, variant)?;
    }
}
