//! A shrinking cluster counts a saving towards the moved pods' longest remaining life
//! ([`super::payback::Payback::shrink_lookback_seconds`]).

use super::DisruptionOptions;
use super::payback::Payback;
use super::tests::{consolidates, od, pod, snapshot};
use crate::model::{EndedPod, Snapshot};

const HOUR: i64 = 3600;

/// Two 0.4/h nodes; `n2` runs a pod of 10 minutes and one of days, both fitting on `n1`.
/// Lindy remaining lives (no learnt lifetimes, no window prior, no floor, no turnover raise): 1/6 h
/// and the 4 h cap, so the saving of deleting `n2` counts for about 2.1 h at the median and
/// 4 h at the longest; each eviction costs 9 h of the average pod's share.
fn winding_down(departures: usize, passing: usize) -> Snapshot {
    let mut young = pod("d", 500, "n2");
    let mut s = snapshot(
        vec![od("n1", "large"), od("n2", "large")],
        vec![
            pod("a", 2000, "n1"),
            pod("b", 2000, "n1"),
            pod("c", 1000, "n1"),
            pod("e", 1000, "n2"),
        ],
    );
    young.created_at = s.now - 600;
    let mut pods: Vec<_> = s.pods.iter().map(|p| (**p).clone()).collect();
    pods.push(young);
    s.pods = Snapshot::shared_pods(pods);
    s.observed_since = Some(0);
    let now = s.now;
    // Pods of two hours that ended within the last hour (arrived before it) ...
    s.ended_pods = (0..departures)
        .map(|i| EndedPod {
            lifetime_seconds: 2 * HOUR,
            owner_kind: Some("ReplicaSet".into()),
            ended_at: Some(now - 60 * (i as i64 + 1)),
        })
        .collect();
    // ... and pods of a minute that arrived and ended within it (each an arrival and a
    // departure).
    s.ended_pods.extend((0..passing).map(|_| EndedPod {
        lifetime_seconds: 60,
        owner_kind: Some("ReplicaSet".into()),
        ended_at: Some(now - 120),
    }));
    s
}

fn options(shrink_lookback_seconds: Option<i64>) -> DisruptionOptions {
    DisruptionOptions {
        payback: Some(Payback {
            eviction_pod_hours: 9.0,
            window_prior: false,
            turnover_lookback_seconds: None,
            shrink_lookback_seconds,
            lindy_floor_hours: 0.0,
            ..Payback::default()
        }),
        headroom: None,
        ..DisruptionOptions::default()
    }
}

#[test]
fn a_cluster_winding_down_counts_the_saving_until_the_last_pod_would_leave() {
    let shrinking = winding_down(10, 0);
    assert_eq!(
        consolidates(&shrinking, &options(Some(HOUR))),
        Some(vec!["n2".to_string()])
    );
    // The rule off: the median life, and the two evictions do not pay.
    assert_eq!(consolidates(&shrinking, &options(None)), None);
}

#[test]
fn a_cluster_whose_arrivals_make_up_for_its_departures_keeps_the_median() {
    // Ten pods came and went within the hour, and the young pod on `n2` arrived: no fewer
    // arrivals than departures.
    let steady = winding_down(0, 10);
    assert_eq!(consolidates(&steady, &options(Some(HOUR))), None);
    // Departures before the lookback are not this hour's trend.
    let mut earlier = winding_down(10, 0);
    let now = earlier.now;
    for e in &mut earlier.ended_pods {
        e.ended_at = Some(now - 2 * HOUR);
    }
    assert_eq!(consolidates(&earlier, &options(Some(HOUR))), None);
}
