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
//! Pods that were already terminal when the controller started are not counted (when they
//! ended is unknown). Only the most recent [`KEPT`] lifetimes are kept: a controller restart
//! forgets them, and until enough pods end again the core estimates from the window each owner
//! kind has been seen running over (its oldest pod's age), not from each pod's own age.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_api::wellknown::DISRUPTED_TAINT_KEY;
use kcapi_snapshot::node::has_taint;
use kcapi_snapshot::pod::{controller_kind, epoch_secs, is_terminal};
use provisioner_core::EndedPod;

/// Most recent endings kept (a UID and an owner kind each: a few hundred KB at most).
pub const KEPT: usize = 4096;

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
}

impl PodLifetimes {
    /// Records `pod`'s lifetime if this change ends it. `node` is the pod's node as the node
    /// store has it (`None` when unbound or unknown); `now` is seconds since the epoch.
    pub fn observe(&self, pod: &Pod, change: Change, node: Option<&Node>, now: i64) {
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
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
        let ended = match change {
            Change::Deleted => pod
                .metadata
                .deletion_timestamp
                .as_ref()
                .map_or(now, |t| t.0.as_second().min(now)),
            _ => now,
        };
        if r.ended.len() == KEPT
            && let Some((old, _)) = r.ended.pop_front()
        {
            r.seen.remove(&old);
        }
        r.seen.insert(uid.clone());
        let end = EndedPod {
            lifetime_seconds: (ended - created).max(0),
            owner_kind: controller_kind(&pod.metadata),
        };
        r.ended.push_back((uid, end));
    }

    /// The kept endings, oldest first: the snapshot's `ended_pods`.
    pub fn recent(&self) -> Vec<EndedPod> {
        let r = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        r.ended.iter().map(|(_, e)| e.clone()).collect()
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
            let mut e = pod("e", T0, Some("n"), phase);
            if let Some(st) = e.status.as_mut() {
                st.conditions = Some(vec![k8s_openapi::api::core::v1::PodCondition {
                    type_: "DisruptionTarget".into(),
                    status: "True".into(),
                    ..Default::default()
                }]);
            }
            l.observe(&e, Change::Applied, Some(&ok), T0 + 600);
            l.observe(&e, Change::Deleted, Some(&ok), T0 + 600);
        }
        assert!(l.recent().is_empty());
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
