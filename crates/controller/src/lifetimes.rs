//! How long pods ran before they ended on their own: the payback rule learns the horizon of a
//! consolidation's saving from these (`provisioner_core::disruption::lifetime`).
//!
//! The pod watch delivers every change; a pod's lifetime is recorded once, when it ends:
//! - when it turns `Succeeded` or `Failed` (a Job's pod, a finished run), seen live;
//! - when it is deleted while running or pending, unless it was evicted: the pod carries
//!   `DisruptionTarget=True` (the Eviction API, preemption, taint or node-pressure eviction
//!   set it), or its node carries Karpenter's disrupted taint, is cordoned, is being deleted,
//!   or is gone (a drain; the node check also covers a pod deleted before that condition).
//!   An evicted pod's workload goes on elsewhere, so its eviction is not an ending.
//!
//! The same watch records evictions (a bound pod deleted as one of the above, or a pod that
//! turned terminal with `DisruptionTarget=True`), for the last [`EVICTIONS_KEPT_SECONDS`]: its
//! workload's replacement is a new pod, and provisioning's anticipation must net it out rather
//! than read it as new demand (`provisioner_core::anticipate`).
//!
//! Pods that were already terminal when the controller started are not counted (when they
//! ended is unknown). Only the most recent [`KEPT`] lifetimes are kept: a controller restart
//! forgets them, and until enough pods end again the core estimates from the window each owner
//! kind has been seen running over (its oldest pod's age), not from each pod's own age.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_api::wellknown::DISRUPTED_TAINT_KEY;
use kcapi_snapshot::node::has_taint;
use kcapi_snapshot::pod::{controller_kind, epoch_secs, is_terminal};
use provisioner_core::{EndedPod, Eviction};

/// Most recent endings kept (a UID and an owner kind each: a few hundred KB at most).
pub const KEPT: usize = 4096;

/// How long evictions are kept: twice anticipation's default window.
pub const EVICTIONS_KEPT_SECONDS: i64 = 1800;

/// What the watch said about a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Part of a (re-)list: the pod's past is unknown.
    Listed,
    /// Created or changed.
    Applied,
    /// Gone from the API.
    Deleted,
}

/// Whether the API server or a kubelet marked the pod as disrupted: evicted through the
/// Eviction API, preempted, or removed for a taint or node pressure
/// (`DisruptionTarget=True`).
fn disruption_target(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
        })
}

/// Whether a pod on `node` being deleted is a drain's eviction rather than its own end.
fn drained(node: Option<&Node>) -> bool {
    let Some(node) = node else { return true };
    node.metadata.deletion_timestamp.is_some()
        || node
            .spec
            .as_ref()
            .and_then(|s| s.unschedulable)
            .unwrap_or(false)
        || has_taint(node, DISRUPTED_TAINT_KEY)
}

/// The recent lifetimes, shared between the pod watch and the decisions.
#[derive(Debug, Clone, Default)]
pub struct PodLifetimes {
    inner: Arc<Mutex<Recorded>>,
}

#[derive(Debug, Default)]
struct Recorded {
    /// Pods (by UID) and how they ended, oldest first.
    ended: VecDeque<(String, EndedPod)>,
    /// The UIDs in `ended`, so a terminal pod's later updates and its deletion do not count
    /// it again.
    seen: HashSet<String>,
    /// Recent evictions by pod UID, oldest first (at most [`KEPT`], none older than
    /// [`EVICTIONS_KEPT_SECONDS`] when read).
    evictions: VecDeque<(String, Eviction)>,
    /// Replacements of evicted pods (by `namespace/name`), as the snapshots matched them:
    /// when the work they carry on began. Their lifetimes and their own evictions count from
    /// there, so a pod moved twice still carries its workload's age.
    continued: HashMap<String, i64>,
    /// Since when every ending is in `ended` (seconds since the epoch): the first pod event
    /// seen, moved to the end of the last ending dropped from the window.
    observed_since: Option<i64>,
}

/// The key of [`Recorded::continued`].
fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn key_of(pod: &Pod) -> String {
    key(
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default(),
    )
}

impl PodLifetimes {
    /// Records `pod`'s lifetime if this change ends it. `node` is the pod's node as the node
    /// store has it (`None` when unbound or unknown); `now` is seconds since the epoch.
    pub fn observe(&self, pod: &Pod, change: Change, node: Option<&Node>, now: i64) {
        {
            let mut r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            r.observed_since.get_or_insert(now);
        }
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        if bound
            && change != Change::Listed
            && controller_kind(&pod.metadata).as_deref() != Some("DaemonSet")
        {
            let evicted = match change {
                // A finished pod deleted from a draining node was not evicted.
                Change::Deleted => disruption_target(pod) || (!is_terminal(pod) && drained(node)),
                _ => disruption_target(pod) && is_terminal(pod),
            };
            if evicted {
                self.record_eviction(pod, now);
            }
        }
        let ends = !disruption_target(pod)
            && match change {
                Change::Listed => false,
                Change::Applied => is_terminal(pod),
                Change::Deleted => {
                    let drain = bound && drained(node);
                    !is_terminal(pod) && !drain
                }
            };
        let created = epoch_secs(pod.metadata.creation_timestamp.as_ref());
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if !ends || created <= 0 || uid.is_empty() {
            return;
        }
        let mut r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if r.seen.contains(&uid) {
            return;
        }
        let created = r.continued.remove(&key_of(pod)).unwrap_or(created);
        let ended = match change {
            Change::Deleted => pod
                .metadata
                .deletion_timestamp
                .as_ref()
                .map_or(now, |t| t.0.as_second().min(now)),
            _ => now,
        };
        if r.ended.len() == KEPT
            && let Some((old, dropped)) = r.ended.pop_front()
        {
            r.seen.remove(&old);
            let end = dropped.ended_at.unwrap_or(now);
            r.observed_since = Some(r.observed_since.map_or(end, |s| s.max(end)));
        }
        r.seen.insert(uid.clone());
        let end = EndedPod {
            lifetime_seconds: (ended - created).max(0),
            owner_kind: controller_kind(&pod.metadata),
            ended_at: Some(ended),
        };
        r.ended.push_back((uid, end));
    }

    fn record_eviction(&self, pod: &Pod, now: i64) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if uid.is_empty() {
            return;
        }
        let mut r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        // A kubelet's eviction is seen as it turns terminal and again when deleted.
        if r.evictions.iter().any(|(u, _)| *u == uid) {
            return;
        }
        while r
            .evictions
            .front()
            .is_some_and(|(_, e)| now - e.at > EVICTIONS_KEPT_SECONDS)
            || r.evictions.len() >= KEPT
        {
            r.evictions.pop_front();
        }
        // The replacement is created when the deletion is requested, a grace period before
        // the pod is gone.
        let requested = pod
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(|t| t.0.as_second() - pod.metadata.deletion_grace_period_seconds.unwrap_or(0));
        // A Job's replacement starts its work again, and a pod nothing owns is not replaced;
        // any other workload's replacement carries on the evicted pod's life.
        let created = epoch_secs(pod.metadata.creation_timestamp.as_ref());
        let created = r.continued.remove(&key_of(pod)).unwrap_or(created);
        let continues_since = match controller_kind(&pod.metadata).as_deref() {
            None | Some("Job") => None,
            Some(_) => (created > 0).then_some(created),
        };
        let at = requested.map_or(now, |t| t.min(now));
        // As the snapshot will see it: namespace, labels and requests are what its
        // replacement is matched by.
        let eviction = match kcapi_snapshot::pod::convert_pod(pod, &Default::default()) {
            Ok(p) => Eviction::of(&p, at, continues_since),
            Err(_) => Eviction {
                at,
                continues_since,
                ..Eviction::default()
            },
        };
        r.evictions.push_back((uid, eviction));
    }

    /// Remembers which of `snapshot`'s pods replace evicted ones and since when their work
    /// runs ([`provisioner_core::replacements`]), for when they end or are evicted in turn.
    pub fn note_replacements(&self, snapshot: &provisioner_core::Snapshot) {
        let starts = provisioner_core::replacements::continued_since(snapshot);
        if starts.iter().all(Option::is_none) {
            return;
        }
        let mut r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        // Entries leave as their pods end or are evicted; a bound keeps pods deleted while
        // the watch was down from piling up.
        if r.continued.len() >= 4 * KEPT {
            r.continued.clear();
        }
        for (p, since) in snapshot.pods.iter().zip(starts) {
            if let Some(since) = since {
                r.continued.insert(key(&p.namespace, &p.name), since);
            }
        }
    }

    /// The evictions of the last [`EVICTIONS_KEPT_SECONDS`] before `now`, oldest first: the
    /// snapshot's `recent_evictions`.
    pub fn recent_evictions(&self, now: i64) -> Vec<Eviction> {
        let r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        r.evictions
            .iter()
            .filter(|(_, e)| now - e.at <= EVICTIONS_KEPT_SECONDS)
            .map(|(_, e)| e.clone())
            .collect()
    }

    /// The eviction of the pod with this UID, if recorded and still kept (for diagnosis).
    pub fn evicted(&self, uid: &str) -> Option<Eviction> {
        let r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        r.evictions
            .iter()
            .find(|(u, _)| u == uid)
            .map(|(_, e)| e.clone())
    }

    /// The kept endings, oldest first: the snapshot's `ended_pods`.
    pub fn recent(&self) -> Vec<EndedPod> {
        let r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        r.ended.iter().map(|(_, e)| e.clone()).collect()
    }

    /// Since when every pod ending is kept (the snapshot's `observed_since`): the first pod
    /// event this recorder saw, or the end of the last ending it dropped. `None` before any.
    pub fn observed_since(&self) -> Option<i64> {
        let r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        r.observed_since
    }

    /// How the pod with this UID ended, if its ending was counted and is still kept: which
    /// pods the estimate learnt from, for diagnosis.
    pub fn ended(&self, uid: &str) -> Option<EndedPod> {
        let r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        r.ended
            .iter()
            .find(|(u, _)| u == uid)
            .map(|(_, e)| e.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, PodSpec, PodStatus, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn time(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("a valid time"))
    }

    fn pod(uid: &str, created: i64, node: Option<&str>, phase: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        p.metadata.creation_timestamp = Some(time(created));
        p.spec = Some(PodSpec {
            node_name: node.map(str::to_string),
            ..PodSpec::default()
        });
        p.status = Some(PodStatus {
            phase: Some(phase.into()),
            ..PodStatus::default()
        });
        p
    }

    fn node(taint: Option<&str>, cordoned: bool) -> Node {
        Node {
            spec: Some(NodeSpec {
                unschedulable: Some(cordoned),
                taints: taint.map(|k| {
                    vec![Taint {
                        key: k.into(),
                        effect: "NoSchedule".into(),
                        ..Taint::default()
                    }]
                }),
                ..NodeSpec::default()
            }),
            ..Node::default()
        }
    }

    const T0: i64 = 1_800_000_000;

    #[test]
    fn a_deleted_running_pod_ended_after_its_lifetime() {
        let l = PodLifetimes::default();
        let n = node(None, false);
        l.observe(
            &pod("a", T0, Some("n"), "Running"),
            Change::Deleted,
            Some(&n),
            T0 + 600,
        );
        // Pending pods end too (a scale-down before they ran).
        l.observe(
            &pod("b", T0, None, "Pending"),
            Change::Deleted,
            None,
            T0 + 60,
        );
        let secs: Vec<i64> = l.recent().iter().map(|e| e.lifetime_seconds).collect();
        assert_eq!(secs, vec![600, 60]);
    }

    #[test]
    fn endings_are_known_from_the_first_pod_event_and_carry_their_time() {
        let l = PodLifetimes::default();
        assert_eq!(l.observed_since(), None);
        let n = node(None, false);
        l.observe(
            &pod("a", T0, Some("n"), "Running"),
            Change::Listed,
            Some(&n),
            T0 + 100,
        );
        assert_eq!(l.observed_since(), Some(T0 + 100));
        l.observe(
            &pod("a", T0, Some("n"), "Running"),
            Change::Deleted,
            Some(&n),
            T0 + 600,
        );
        assert_eq!(l.observed_since(), Some(T0 + 100));
        assert_eq!(l.recent()[0].ended_at, Some(T0 + 600));
        // Once the window is full, the endings it drops are no longer known.
        for i in 0..KEPT as i64 {
            let uid = format!("p{i}");
            l.observe(
                &pod(&uid, T0, Some("n"), "Running"),
                Change::Deleted,
                Some(&n),
                T0 + 700 + i,
            );
        }
        assert_eq!(l.recent().len(), KEPT);
        assert_eq!(l.observed_since(), Some(T0 + 600));
    }

    #[test]
    fn drained_pods_are_not_endings() {
        let l = PodLifetimes::default();
        let p = pod("a", T0, Some("n"), "Running");
        for n in [
            Some(node(Some(DISRUPTED_TAINT_KEY), false)),
            Some(node(None, true)),
            None,
        ] {
            l.observe(&p, Change::Deleted, n.as_ref(), T0 + 600);
        }
        let mut gone = node(None, false);
        gone.metadata.deletion_timestamp = Some(time(T0));
        l.observe(&p, Change::Deleted, Some(&gone), T0 + 600);
        // Evicted through the API from a node nobody drains, or by a kubelet (Failed).
        let ok = node(None, false);
        for phase in ["Running", "Failed"] {
            let e = marked_disrupted(pod("e", T0, Some("n"), phase));
            l.observe(&e, Change::Applied, Some(&ok), T0 + 600);
            l.observe(&e, Change::Deleted, Some(&ok), T0 + 600);
        }
        assert!(l.recent().is_empty());
    }

    /// `p` with `DisruptionTarget=True`, as the Eviction API or a kubelet's eviction sets it.
    fn marked_disrupted(mut p: Pod) -> Pod {
        if let Some(st) = p.status.as_mut() {
            st.conditions = Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                ..Default::default()
            }]);
        }
        p
    }

    /// `p` controlled by an owner of `kind`.
    fn owned_by(kind: &str, mut p: Pod) -> Pod {
        p.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                kind: kind.into(),
                name: "owner".into(),
                controller: Some(true),
                ..Default::default()
            },
        ]);
        p
    }

    /// A pod requesting `cpu` and `memory` in one container.
    fn with_requests(mut p: Pod, cpu: &str, memory: &str) -> Pod {
        use k8s_openapi::api::core::v1::{Container, ResourceRequirements};
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        if let Some(spec) = p.spec.as_mut() {
            spec.containers = vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(
                        [
                            ("cpu".to_string(), Quantity(cpu.into())),
                            ("memory".to_string(), Quantity(memory.into())),
                        ]
                        .into_iter()
                        .collect(),
                    ),
                    ..ResourceRequirements::default()
                }),
                ..Container::default()
            }];
        }
        p
    }

    #[test]
    fn a_replacement_counts_from_the_work_it_carries_on() {
        let l = PodLifetimes::default();
        let ok = node(None, false);
        // The snapshot saw `r` (created at T0 + 600) replace a pod of the same requests
        // evicted at T0 + 590, whose work began at T0.
        let mut core = provisioner_core::Pod::new("default", "r", 1000, 1 << 30);
        core.created_at = T0 + 600;
        let snapshot = provisioner_core::Snapshot {
            now: T0 + 700,
            pods: provisioner_core::Snapshot::shared_pods(vec![core]),
            recent_evictions: vec![Eviction::of(
                &provisioner_core::Pod::new("default", "r-old", 1000, 1 << 30),
                T0 + 590,
                Some(T0),
            )],
            ..Default::default()
        };
        l.note_replacements(&snapshot);
        let named = |mut p: Pod, name: &str| {
            p.metadata.namespace = Some("default".into());
            p.metadata.name = Some(name.into());
            owned_by("ReplicaSet", with_requests(p, "1", "1Gi"))
        };
        // Evicted in turn, it hands that start on to its own replacement.
        let mut drained = named(pod("r-uid", T0 + 600, Some("n"), "Running"), "r");
        drained.metadata.deletion_timestamp = Some(time(T0 + 2000));
        let draining = node(Some(DISRUPTED_TAINT_KEY), false);
        l.observe(&drained, Change::Deleted, Some(&draining), T0 + 2000);
        assert_eq!(l.evicted("r-uid").and_then(|e| e.continues_since), Some(T0));
        // What its replacement will be matched by: its namespace, labels and requests.
        let e = l.evicted("r-uid").expect("recorded");
        assert_eq!((e.namespace.as_str(), e.cpu_milli), ("default", 1000));
        // Noted again and ending on its own, it lived from T0.
        l.note_replacements(&snapshot);
        let own = named(pod("r-uid-2", T0 + 600, Some("n"), "Running"), "r");
        l.observe(&own, Change::Deleted, Some(&ok), T0 + 4000);
        assert_eq!(l.ended("r-uid-2").map(|e| e.lifetime_seconds), Some(4000));
        // A pod no snapshot matched lives from its creation.
        let plain = named(pod("p-uid", T0 + 600, Some("n"), "Running"), "p");
        l.observe(&plain, Change::Deleted, Some(&ok), T0 + 4000);
        assert_eq!(l.ended("p-uid").map(|e| e.lifetime_seconds), Some(3400));
    }

    #[test]
    fn evictions_are_kept_with_their_requests_for_half_an_hour() {
        let l = PodLifetimes::default();
        let ok = node(None, false);
        let draining = node(Some(DISRUPTED_TAINT_KEY), false);
        // Drained: deletion requested at T0 + 570 with a 30 s grace period, gone at T0 + 600.
        // A ReplicaSet's pod: its replacement carries on from `T0`.
        let mut drained = owned_by(
            "ReplicaSet",
            with_requests(pod("a", T0, Some("n"), "Running"), "1500m", "2Gi"),
        );
        drained.metadata.deletion_timestamp = Some(time(T0 + 600));
        drained.metadata.deletion_grace_period_seconds = Some(30);
        l.observe(&drained, Change::Deleted, Some(&draining), T0 + 601);
        // Evicted by a kubelet: seen as it fails and again when deleted, counted once.
        // A Job's pod: its replacement starts again.
        let kubelet = owned_by(
            "Job",
            marked_disrupted(with_requests(
                pod("b", T0, Some("n"), "Failed"),
                "250m",
                "512Mi",
            )),
        );
        l.observe(&kubelet, Change::Applied, Some(&ok), T0 + 700);
        l.observe(&kubelet, Change::Deleted, Some(&ok), T0 + 710);
        // Not evictions: a pod that ended on its own, a pending pod deleted, a daemon pod
        // drained, a pod listed at start, a finished pod deleted from a draining node.
        l.observe(
            &with_requests(pod("c", T0, Some("n"), "Running"), "1", "1Gi"),
            Change::Deleted,
            Some(&ok),
            T0 + 720,
        );
        l.observe(
            &with_requests(pod("d", T0, None, "Pending"), "1", "1Gi"),
            Change::Deleted,
            None,
            T0 + 720,
        );
        let daemon = owned_by(
            "DaemonSet",
            with_requests(pod("e", T0, Some("n"), "Running"), "1", "1Gi"),
        );
        l.observe(&daemon, Change::Deleted, Some(&draining), T0 + 720);
        l.observe(&drained, Change::Listed, Some(&draining), T0 + 720);
        l.observe(
            &with_requests(pod("f", T0, Some("n"), "Succeeded"), "1", "1Gi"),
            Change::Deleted,
            Some(&draining),
            T0 + 720,
        );
        let mib = 1 << 20;
        let seen: Vec<_> = l
            .recent_evictions(T0 + 800)
            .into_iter()
            .map(|e| (e.at, e.cpu_milli, e.memory, e.continues_since))
            .collect();
        assert_eq!(
            seen,
            vec![
                (T0 + 570, 1500, 2048 * mib, Some(T0)),
                (T0 + 700, 250, 512 * mib, None),
            ]
        );
        // Half an hour on, only the later one is left.
        assert_eq!(
            l.recent_evictions(T0 + 570 + EVICTIONS_KEPT_SECONDS + 1)
                .len(),
            1
        );
        // The drained pod's eviction is not an ending (as before).
        assert_eq!(l.ended("a"), None);
    }

    #[test]
    fn a_finished_pod_counts_once_and_listed_ones_never() {
        let l = PodLifetimes::default();
        let n = node(None, false);
        let done = pod("a", T0, Some("n"), "Succeeded");
        l.observe(&done, Change::Applied, Some(&n), T0 + 300);
        l.observe(&done, Change::Applied, Some(&n), T0 + 400);
        l.observe(&done, Change::Deleted, Some(&n), T0 + 900);
        assert_eq!(l.ended("a").map(|e| e.lifetime_seconds), Some(300));
        // Already finished when listed: when it ended is unknown.
        let old = pod("b", T0, Some("n"), "Failed");
        l.observe(&old, Change::Listed, Some(&n), T0 + 300);
        l.observe(&old, Change::Deleted, Some(&n), T0 + 900);
        // Running pods that change do not end.
        l.observe(
            &pod("c", T0, Some("n"), "Running"),
            Change::Applied,
            Some(&n),
            T0 + 5,
        );
        let secs: Vec<i64> = l.recent().iter().map(|e| e.lifetime_seconds).collect();
        assert_eq!(secs, vec![300]);
    }

    #[test]
    fn only_the_most_recent_are_kept() {
        let l = PodLifetimes::default();
        for i in 0..(KEPT as i64 + 10) {
            l.observe(
                &pod(&format!("p{i}"), T0, None, "Pending"),
                Change::Deleted,
                None,
                T0 + i,
            );
        }
        let r = l.recent();
        assert_eq!(r.len(), KEPT);
        assert_eq!(r.first().map(|e| e.lifetime_seconds), Some(10));
    }
}
