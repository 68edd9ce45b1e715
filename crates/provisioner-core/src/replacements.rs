//! Which pods replace pods that were just evicted, and since when their work has run.
//!
//! An evicted pod is not moved: its workload's controller creates a new pod, which the
//! autoscaler sees as young. For a ReplicaSet's or a StatefulSet's pod the work goes on, and
//! its remaining life is the evicted pod's, not a newcomer's: taken as young, every pod a
//! consolidation had moved looked about to leave in a cluster whose ended pods were short
//! jobs, and the next consolidation of its node was valued over minutes (docs/simulator.md,
//! round 26). A Job's replacement starts its work again; producers of
//! [`crate::model::Snapshot::recent_evictions`] leave `continues_since` unset for those.
//!
//! A replacement is not linked to its eviction in the API, so it is matched: a pod created
//! from a little before the eviction to [`REPLACEMENT_WITHIN_SECONDS`] after it, in the same
//! namespace with the same labels (its template's) and requests, the earliest such pod first.
//! Two evictions of identical pods may swap replacements; their starts are then swapped too,
//! which changes nothing that matters.

use std::collections::HashMap;

use crate::model::{Labels, Pod, Snapshot};
use crate::resources::pod_requests;

/// How long after an eviction its replacement may be created (a controller's resync, a
/// PodDisruptionBudget's wait).
pub const REPLACEMENT_WITHIN_SECONDS: i64 = 120;

/// How much earlier than its recorded eviction a replacement may be created: the recorded
/// time is when the deletion was seen, which can trail the request by a watch's latency.
const EARLY_SECONDS: i64 = 5;

/// For each pod of `snapshot.pods` (by index), the start of the work it continues when it
/// is the replacement of an evicted pod whose work goes on; `None` for every other pod.
pub fn continued_since(snapshot: &Snapshot) -> Vec<Option<i64>> {
    let evictions = &snapshot.recent_evictions;
    replaced(snapshot)
        .into_iter()
        .zip(snapshot.pods.iter())
        .map(|(m, p)| {
            let since = evictions.get(m?)?.continues_since?;
            Some(since.min(p.created_at))
        })
        .collect()
}

/// What a replacement shares with the pod it replaces: namespace, labels and requests.
type Workload<'a> = (&'a str, &'a Labels, i64, i64);

/// For each pod of `snapshot.pods` (by index), the eviction it replaces (an index into
/// `snapshot.recent_evictions`), if any: not new demand, whatever its workload.
pub fn replaced(snapshot: &Snapshot) -> Vec<Option<usize>> {
    let mut out = vec![None; snapshot.pods.len()];
    let mut evictions: Vec<(i64, usize)> = snapshot
        .recent_evictions
        .iter()
        .enumerate()
        .map(|(k, e)| (e.at, k))
        .collect();
    if evictions.is_empty() {
        return out;
    }
    evictions.sort_unstable();
    let earliest = evictions[0].0 - EARLY_SECONDS;
    // Pods that could be replacements, by workload, oldest first.
    let mut by_workload: HashMap<Workload, Vec<(i64, usize)>> = HashMap::new();
    for (i, p) in snapshot.pods.iter().enumerate() {
        if p.created_at < earliest || is_daemon(p) {
            continue;
        }
        let r = pod_requests(p);
        by_workload
            .entry((p.namespace.as_str(), &p.labels, r.cpu_milli, r.memory))
            .or_default()
            .push((p.created_at, i));
    }
    for pods in by_workload.values_mut() {
        pods.sort_unstable();
    }
    // Evictions in time order each take the earliest unmatched pod in their interval; all
    // intervals have the same length, so a pod created before one eviction's interval is
    // before every later one's, and one cursor per workload suffices.
    let mut cursor: HashMap<Workload, usize> = HashMap::new();
    for (at, k) in evictions {
        let e = &snapshot.recent_evictions[k];
        let w = (e.namespace.as_str(), &e.labels, e.cpu_milli, e.memory);
        let Some(pods) = by_workload.get(&w) else {
            continue;
        };
        let c = cursor.entry(w).or_insert(0);
        while pods.get(*c).is_some_and(|&(t, _)| t < at - EARLY_SECONDS) {
            *c += 1;
        }
        if let Some(&(t, i)) = pods.get(*c)
            && t <= at + REPLACEMENT_WITHIN_SECONDS
        {
            out[i] = Some(k);
            *c += 1;
        }
    }
    out
}

/// For each pod of `snapshot.pods` (by index), whether it replaces a pod evicted less than
/// `seconds` before `snapshot.now` ([`replaced`]).
pub fn recreated_within(snapshot: &Snapshot, seconds: i64) -> Vec<bool> {
    replaced(snapshot)
        .into_iter()
        .map(|m| {
            m.and_then(|k| snapshot.recent_evictions.get(k))
                .is_some_and(|e| snapshot.now - e.at < seconds)
        })
        .collect()
}

fn is_daemon(p: &Pod) -> bool {
    crate::disruption::candidates::is_daemon(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Eviction;

    fn pod(name: &str, cpu: i64, created_at: i64) -> Pod {
        let mut p = Pod::new("default", name, cpu, 1 << 30);
        p.created_at = created_at;
        p
    }

    fn evicted(at: i64, cpu: i64, since: Option<i64>) -> Eviction {
        Eviction::of(&pod("evicted", cpu, 0), at, since)
    }

    fn snapshot(pods: Vec<Pod>, evictions: Vec<Eviction>) -> Snapshot {
        Snapshot {
            now: 10_000,
            pods: Snapshot::shared_pods(pods),
            recent_evictions: evictions,
            ..Default::default()
        }
    }

    #[test]
    fn a_replacement_continues_its_evicted_pod() {
        let s = snapshot(
            vec![
                pod("old", 1000, 100),
                pod("arrival", 1000, 9_000),
                pod("replacement", 1000, 9_502),
                pod("other-size", 2000, 9_501),
                pod("too-late", 1000, 9_700),
            ],
            vec![evicted(9_500, 1000, Some(200))],
        );
        assert_eq!(continued_since(&s), vec![None, None, Some(200), None, None]);
    }

    #[test]
    fn each_eviction_takes_one_pod_and_jobs_take_none() {
        let s = snapshot(
            vec![
                pod("a", 1000, 9_501),
                pod("b", 1000, 9_502),
                pod("c", 1000, 9_503),
            ],
            vec![
                evicted(9_500, 1000, Some(300)),
                evicted(9_500, 1000, Some(400)),
                // A Job's pod: its replacement starts again.
                evicted(9_500, 1000, None),
            ],
        );
        assert_eq!(continued_since(&s), vec![Some(300), Some(400), None]);
        // The Job's replacement is still a replacement: not an arrival.
        assert_eq!(replaced(&s), vec![Some(0), Some(1), Some(2)]);
    }

    #[test]
    fn another_workloads_pod_of_the_same_size_is_no_replacement() {
        let web = |name: &str, t: i64| pod(name, 1000, t).label("app", "web");
        let s = snapshot(
            vec![
                pod("db-new", 1000, 9_501).label("app", "db"),
                pod("web-other-ns", 1000, 9_501).label("app", "web"),
                web("web-new", 9_502),
            ],
            vec![Eviction::of(&web("web-old", 100), 9_500, Some(100))],
        );
        let mut s = s;
        let mut other = (*s.pods[1]).clone();
        other.namespace = "staging".into();
        s.pods[1] = std::sync::Arc::new(other);
        assert_eq!(replaced(&s), vec![None, None, Some(0)]);
    }

    #[test]
    fn nothing_is_matched_without_evictions() {
        let s = snapshot(vec![pod("a", 1000, 9_501)], Vec::new());
        assert_eq!(continued_since(&s), vec![None]);
    }
}
