//! A quiet cluster raises the payback rule's horizon cap to its turnover
//! ([`super::payback::Payback::turnover_lookback_seconds`]).

use super::DisruptionOptions;
use super::payback::Payback;
use super::tests::{consolidates, pricey_evictions, two_large_nodes};
use crate::model::{EndedPod, Snapshot};

const DAY: i64 = 86_400;

/// `n2` (0.4/h) runs one pod that fits on `n1`: deleting `n2` saves 0.4/h, 1.6 over the 4 h
/// cap, and at 24 h per eviction of a 0.08125/h pod (the average pod's share) the move costs
/// 1.95.
/// The four pods have run since the epoch; the producer has watched since `observed_since`.
fn quiet(observed_since: Option<i64>) -> Snapshot {
    let mut s = two_large_nodes();
    s.observed_since = observed_since;
    s
}

fn options(turnover_lookback_seconds: Option<i64>) -> DisruptionOptions {
    pricey_evictions(Payback {
        turnover_lookback_seconds,
        ..Payback::default()
    })
}

#[test]
fn a_cluster_without_arrivals_counts_the_saving_past_the_cap() {
    // Four pods and no arrival in a day watched: a turnover of 96 h, so the saving counts
    // for as long as the pod is expected to stay (it has run 277 h).
    let s = quiet(Some(0));
    assert_eq!(
        consolidates(&s, &options(Some(DAY))),
        Some(vec!["n2".to_string()])
    );
    // The rule off: the 4 h cap, and the move does not pay.
    assert_eq!(consolidates(&s, &options(None)), None);
}

#[test]
fn less_than_a_day_watched_keeps_the_cap() {
    let s = quiet(Some(s_now() - 3600));
    assert_eq!(consolidates(&s, &options(Some(DAY))), None);
    assert_eq!(consolidates(&quiet(None), &options(Some(DAY))), None);
}

#[test]
fn a_busy_cluster_keeps_the_cap() {
    // A hundred pods of an hour each came and went today: the cluster renews itself within
    // the hour, and the cap stays at 4 h.
    let mut s = quiet(Some(0));
    let now = s.now;
    s.ended_pods = (0..100)
        .map(|i| EndedPod {
            lifetime_seconds: 3600,
            owner_kind: Some("ReplicaSet".into()),
            ended_at: Some(now - 600 * i),
        })
        .collect();
    assert_eq!(consolidates(&s, &options(Some(DAY))), None);
}

#[test]
fn the_raise_is_bounded() {
    let s = quiet(Some(0));
    let k = Payback {
        turnover_cap_hours: 24.0,
        ..Payback::default()
    };
    assert_eq!(k.cap_hours(&s), 24.0);
    let off = Payback {
        turnover_lookback_seconds: None,
        ..Payback::default()
    };
    assert_eq!(off.cap_hours(&s), off.horizon_cap_hours);
    // Never below the cap as set.
    let high = Payback {
        horizon_cap_hours: 200.0,
        ..Payback::default()
    };
    assert_eq!(high.cap_hours(&s), 200.0);
}

fn s_now() -> i64 {
    two_large_nodes().now
}
