//! How long the cluster takes to renew its pods: what raises the payback rule's horizon cap in
//! a quiet cluster ([`super::payback::Payback::turnover_lookback_seconds`]).
//!
//! The cap (4 h by default) stands for how long a packing lasts: in a cluster whose pods come
//! and go by the hour, a better packing found now is soon undone by arrivals and departures,
//! and would be found again anyway. A cluster that sees a new pod a day keeps its packing, and
//! the waste in it, for as long as that. The Alibaba openb trace runs 3 to 17 pods that live
//! for weeks through its first 2,600 hours: under the 4 h cap no repack of them ever paid for
//! its evictions, and both strategies ran 25-29% above the lower bound throughout
//! (`docs/simulator.md`, round 36).
//!
//! The turnover is the time the cluster takes to see as many new pods as it runs: `present x
//! window / (arrivals + 1)` over the last `window` (the `+ 1` keeps a window with no arrival
//! from reading as an endless life, and makes a short record count for little). Arrivals are
//! the present pods that started within the window and the ended pods that did (`ended_at -
//! lifetime_seconds`). It is counted only over a full lookback the producer has watched
//! (`Snapshot::observed_since`): over less, a quiet night reads as a quiet cluster, and pods
//! that came and went before the producer started are unknown.
//!
//! A pod recreated after an eviction counts as its workload's pod (`continues_since`), not as
//! an arrival, while the producer still matches it to its eviction (the controller for 30
//! minutes); after that it counts as one. That errs towards a busier cluster, a shorter cap.
//!
//! The same counts say whether the cluster is shrinking ([`shrink_fraction`]): the share of
//! the recent departures that arrivals did not make up for, which stretches a command's
//! horizon towards its pods' longest life ([`super::lifetime::horizon_hours`]).

use crate::model::Snapshot;
use crate::replacements::continued_since;

/// The cluster's turnover time in hours over the last `lookback_secs`, or `None` when the
/// snapshot does not cover a whole lookback (`observed_since` unknown or too recent) or the
/// lookback is not positive.
pub fn turnover_hours(snapshot: &Snapshot, lookback_secs: i64) -> Option<f64> {
    let flow = flow(snapshot, snapshot.now - lookback_secs, snapshot.now)?;
    Some(flow.present as f64 * lookback_secs as f64 / 3600.0 / (flow.arrivals as f64 + 1.0))
}

/// The share of the pods that ended on their own over the last `lookback_secs` that arrivals
/// did not make up for: `max(0, departures - arrivals) / (departures + 1)`, 0 in a cluster
/// that holds its size or grows, towards 1 in one that only loses pods (the `+ 1` makes a
/// couple of endings in a quiet window count for little). Evictions are not endings and
/// their replacements are not arrivals ([`super::lifetime`], module doc above), so the
/// autoscaler's own repacks do not read as a trend. `None` as for [`turnover_hours`].
pub fn shrink_fraction(snapshot: &Snapshot, lookback_secs: i64) -> Option<f64> {
    let flow = flow(snapshot, snapshot.now - lookback_secs, snapshot.now)?;
    let lost = flow.departures.saturating_sub(flow.arrivals);
    Some(lost as f64 / (flow.departures as f64 + 1.0))
}

/// Pods that came and went over one lookback.
struct Flow {
    /// Pods running or pending now (not daemons).
    present: usize,
    /// Pods that started within the window, present or ended since.
    arrivals: usize,
    /// Pods that ended on their own within the window.
    departures: usize,
}

/// Arrivals and departures within `(from, to]`, and the pods present now; `None` when
/// `(from, to]` is empty or was not watched whole.
fn flow(snapshot: &Snapshot, from: i64, to: i64) -> Option<Flow> {
    if to <= from {
        return None;
    }
    if snapshot.observed_since? > from {
        return None;
    }
    let within = |t: i64| t > from && t <= to;
    let starts = continued_since(snapshot);
    let mut flow = Flow {
        present: 0,
        arrivals: 0,
        departures: 0,
    };
    for (pod, continued) in snapshot.pods.iter().zip(&starts) {
        if super::candidates::is_daemon(pod) {
            continue;
        }
        flow.present += 1;
        if within(continued.unwrap_or(pod.created_at)) {
            flow.arrivals += 1;
        }
    }
    for ended in &snapshot.ended_pods {
        let Some(at) = ended.ended_at else { continue };
        if within(at) {
            flow.departures += 1;
        }
        if within(at - ended.lifetime_seconds) {
            flow.arrivals += 1;
        }
    }
    Some(flow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EndedPod, Pod};
    use proptest::prelude::*;

    const DAY: i64 = 86_400;

    /// `n` running pods created at `created_at`, watched since `observed_since`.
    fn cluster(now: i64, created: &[i64], observed_since: Option<i64>) -> Snapshot {
        let pods = created
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let mut p = Pod::new("default", &format!("p{i}"), 1000, 1 << 30).on("n1");
                p.created_at = c;
                p
            })
            .collect::<Vec<_>>();
        Snapshot {
            now,
            pods: Snapshot::shared_pods(pods),
            observed_since,
            ..Snapshot::default()
        }
    }

    #[test]
    fn a_cluster_without_arrivals_turns_over_in_present_times_the_window() {
        let now = 10 * DAY;
        let s = cluster(now, &[0, DAY, 2 * DAY], Some(0));
        assert_eq!(turnover_hours(&s, DAY), Some(72.0));
    }

    #[test]
    fn arrivals_that_came_and_went_count() {
        let now = 10 * DAY;
        let mut s = cluster(now, &[0; 40], Some(0));
        assert_eq!(turnover_hours(&s, DAY), Some(40.0 * 24.0));
        // 249 pods of an hour each arrived and ended within the day, one is still running.
        s.ended_pods = (0..249)
            .map(|i| EndedPod {
                lifetime_seconds: 3600,
                owner_kind: None,
                ended_at: Some(now - 300 * i),
            })
            .collect();
        let mut pods: Vec<Pod> = s.pods.iter().map(|p| (**p).clone()).collect();
        pods[0].created_at = now - 600;
        s.pods = Snapshot::shared_pods(pods);
        let hours = turnover_hours(&s, DAY).expect("a whole day watched");
        assert!((hours - 40.0 * 24.0 / 251.0).abs() < 1e-9, "{hours}");
        // An ending whose pod arrived before the window is not an arrival.
        s.ended_pods = vec![EndedPod {
            lifetime_seconds: 2 * DAY,
            owner_kind: None,
            ended_at: Some(now - 60),
        }];
        let hours = turnover_hours(&s, DAY).expect("a whole day watched");
        assert!((hours - 40.0 * 24.0 / 2.0).abs() < 1e-9, "{hours}");
    }

    /// `n` pods that ended at `now - ago` after `life` seconds each.
    fn ended(n: usize, life: i64, ago: i64, now: i64) -> Vec<EndedPod> {
        (0..n)
            .map(|_| EndedPod {
                lifetime_seconds: life,
                owner_kind: None,
                ended_at: Some(now - ago),
            })
            .collect()
    }

    #[test]
    fn a_cluster_that_loses_pods_faster_than_it_gains_them_is_shrinking() {
        let now = 10 * DAY;
        let half_hour = 1800;
        // Ten pods left in the last half hour, after a day's life; none arrived.
        let mut s = cluster(now, &[0; 20], Some(0));
        s.ended_pods = ended(10, DAY, 600, now);
        let only_lost = shrink_fraction(&s, half_hour).expect("watched");
        assert!((only_lost - 10.0 / 11.0).abs() < 1e-12, "{only_lost}");
        // Four arrived, two still running and two that came and went (departures too):
        // of twelve departures, eight not made up for.
        let mut pods: Vec<Pod> = s.pods.iter().map(|p| (**p).clone()).collect();
        pods[0].created_at = now - 60;
        pods[1].created_at = now - 60;
        s.pods = Snapshot::shared_pods(pods);
        s.ended_pods.extend(ended(2, 300, 60, now));
        let partly = shrink_fraction(&s, half_hour).expect("watched");
        assert!((partly - 8.0 / 13.0).abs() < 1e-12, "{partly}");
        // As many arrivals as departures, or more: not shrinking.
        s.ended_pods = ended(2, DAY, 600, now);
        assert_eq!(shrink_fraction(&s, half_hour), Some(0.0));
        // Endings before the window are not this lookback's trend.
        s.ended_pods = ended(10, DAY, 2 * half_hour, now);
        assert_eq!(shrink_fraction(&s, half_hour), Some(0.0));
        // Not watched for a whole lookback: nothing known.
        s.observed_since = Some(now - 60);
        assert_eq!(shrink_fraction(&s, half_hour), None);
    }

    #[test]
    fn less_than_a_whole_lookback_watched_says_nothing() {
        let now = 10 * DAY;
        assert_eq!(
            turnover_hours(&cluster(now, &[0], Some(now - 3600)), DAY),
            None
        );
        assert_eq!(turnover_hours(&cluster(now, &[0], None), DAY), None);
        assert_eq!(turnover_hours(&cluster(now, &[0], Some(0)), 0), None);
    }

    /// Pods of the given `ages`, and pods that ended `ago` seconds before `now` after `life`
    /// seconds (`(life, ago)`), watched since the epoch.
    fn watched(now: i64, ages: &[i64], lives: &[(i64, i64)]) -> Snapshot {
        let created: Vec<i64> = ages.iter().map(|a| now - a).collect();
        let mut s = cluster(now, &created, Some(0));
        s.ended_pods = lives
            .iter()
            .map(|&(life, ago)| EndedPod {
                lifetime_seconds: life,
                owner_kind: None,
                ended_at: Some(now - ago),
            })
            .collect();
        s
    }

    proptest! {
        /// An arrival within the window shortens the turnover of a cluster with pods; an
        /// ending whose pod arrived before the window changes nothing; it is never negative.
        #[test]
        fn arrivals_shorten_it_and_old_endings_do_not(
            ages in proptest::collection::vec(0i64..10 * DAY, 1..30),
            lives in proptest::collection::vec((1i64..3 * DAY, 0i64..DAY), 0..30),
            lifetime in 1i64..DAY / 2,
            old in DAY..5 * DAY,
        ) {
            let now = 20 * DAY;
            let s = watched(now, &ages, &lives);
            let before = turnover_hours(&s, DAY).expect("watched for days");
            prop_assert!(before >= 0.0);
            let mut busier = s.clone();
            busier.ended_pods.push(EndedPod {
                lifetime_seconds: lifetime,
                owner_kind: None,
                ended_at: Some(now - 60),
            });
            prop_assert!(turnover_hours(&busier, DAY).expect("watched") < before);
            let mut same = s.clone();
            same.ended_pods.push(EndedPod {
                lifetime_seconds: old + 60,
                owner_kind: None,
                ended_at: Some(now - 60),
            });
            prop_assert_eq!(turnover_hours(&same, DAY), Some(before));
        }

        /// The shrink is within [0, 1); one more departure in the window never lowers it and
        /// one more arrival never raises it.
        #[test]
        fn departures_raise_the_shrink_and_arrivals_lower_it(
            ages in proptest::collection::vec(0i64..4 * 3600, 1..30),
            lives in proptest::collection::vec((1i64..3 * DAY, 0i64..3600), 0..30),
        ) {
            let now = 20 * DAY;
            let s = watched(now, &ages, &lives);
            let before = shrink_fraction(&s, 1800).expect("watched");
            prop_assert!((0.0..1.0).contains(&before));
            let mut lost = s.clone();
            lost.ended_pods.extend(ended(1, DAY, 60, now));
            prop_assert!(shrink_fraction(&lost, 1800).expect("watched") >= before);
            let mut gained = s.clone();
            gained.ended_pods.extend(ended(1, 60, 60, now));
            let after = shrink_fraction(&gained, 1800).expect("watched");
            prop_assert!(after <= before + 1e-12, "{} > {}", after, before);
        }
    }

    #[test]
    fn daemons_are_neither_present_nor_arrivals() {
        let now = 10 * DAY;
        let mut s = cluster(now, &[0, 0], Some(0));
        let mut d = Pod::new("kube-system", "agent", 100, 1 << 27).on("n1");
        d.owner_kind = Some("DaemonSet".into());
        d.created_at = now - 60;
        let mut pods: Vec<Pod> = s.pods.iter().map(|p| (**p).clone()).collect();
        pods.push(d);
        s.pods = Snapshot::shared_pods(pods);
        assert_eq!(turnover_hours(&s, DAY), Some(48.0));
    }
}
