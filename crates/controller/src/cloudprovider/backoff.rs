//! The launch-failure back-off: a resource whose Machines fail, or do not get a providerID in
//! time, is unavailable for a configurable window (like Karpenter's insufficient-capacity
//! cache), so the core stops choosing it.
//!
//! Kept in memory only: after a restart the failed or stuck Machines are still in the API,
//! so the first failure check re-creates the entries; forgetting them meanwhile can cost at
//! most one more launch attempt, never a replica runaway (the launch plan counts failed
//! unbound Machines as supply).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use capi_adapter::ResourceId;
use capi_adapter::failures::LaunchFailure;
use capi_adapter::instance_types::Backoff;

/// How long after its last back-off ends a resource's failure streak is forgotten (the
/// Cluster Autoscaler's `--node-group-backoff-reset-timeout`).
pub const STREAK_RESET_SECS: i64 = 3 * 3600;

#[derive(Debug, Default)]
struct Entry {
    until: i64,
    /// Distinct failed Machines since the streak began.
    streak: u32,
    machines: BTreeSet<String>,
}

#[derive(Debug)]
pub struct BackoffCache {
    window_secs: i64,
    max_window_secs: i64,
    entries: Mutex<BTreeMap<ResourceId, Entry>>,
}

impl BackoffCache {
    /// Back-off windows start at `window_secs` and double with each further failed Machine
    /// of the same resource, up to `max_window_secs`: a zone out of capacity for hours is
    /// retried every half hour, not every five minutes, and each retry is a Machine that
    /// fails and pods that wait for it (the Cluster Autoscaler backs node groups off the
    /// same way, 5 to 30 minutes).
    pub fn new(window_secs: i64, max_window_secs: i64) -> Self {
        BackoffCache {
            window_secs,
            max_window_secs: max_window_secs.max(window_secs),
            entries: Mutex::new(BTreeMap::new()),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<ResourceId, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A failed launch (`machine`) of `resource` seen at `now`. A Machine seen before keeps
    /// the window open at its current length; a new one lengthens it.
    pub fn record(&self, resource: &ResourceId, machine: &str, now: i64) {
        let mut map = self.map();
        let e = map.entry(resource.clone()).or_default();
        if e.streak > 0 && now > e.until.saturating_add(STREAK_RESET_SECS) {
            *e = Entry::default();
        }
        if e.machines.insert(machine.to_string()) {
            e.streak = e.streak.saturating_add(1);
        }
        let doublings = e.streak.saturating_sub(1).min(20);
        let window = self
            .window_secs
            .saturating_mul(1i64 << doublings)
            .min(self.max_window_secs);
        e.until = e.until.max(now.saturating_add(window));
    }

    pub fn observe(&self, failures: &[LaunchFailure], now: i64) {
        for f in failures {
            self.record(&f.resource, &f.machine.to_string(), now);
        }
    }

    /// The entries still in force at `now`, in the adapter's form.
    pub fn snapshot(&self, now: i64) -> Backoff {
        let mut map = self.map();
        map.retain(|_, e| now <= e.until.saturating_add(STREAK_RESET_SECS));
        map.iter()
            .filter(|(_, e)| e.until > now)
            .map(|(r, e)| (r.clone(), e.until))
            .collect()
    }

    pub fn clear(&self, resource: &ResourceId) {
        self.map().remove(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capi_adapter::ResourceKind;

    #[test]
    fn entries_expire() {
        let c = BackoffCache::new(300, 1800);
        let id = ResourceId::new(ResourceKind::MachineDeployment, "ns", "md");
        c.record(&id, "m1", 1000);
        assert_eq!(c.snapshot(1100).get(&id), Some(&1300));
        assert!(c.snapshot(1300).is_empty());
    }

    #[test]
    fn each_new_failed_machine_doubles_the_window_up_to_the_most() {
        let c = BackoffCache::new(300, 1800);
        let id = ResourceId::new(ResourceKind::MachineDeployment, "ns", "md");
        c.record(&id, "m1", 0);
        assert_eq!(c.snapshot(0).get(&id), Some(&300));
        // The same Machine seen again keeps the window's length.
        c.record(&id, "m1", 100);
        assert_eq!(c.snapshot(100).get(&id), Some(&400));
        c.record(&id, "m2", 400);
        assert_eq!(c.snapshot(400).get(&id), Some(&1000));
        c.record(&id, "m3", 1000);
        assert_eq!(c.snapshot(1000).get(&id), Some(&2200));
        c.record(&id, "m4", 2200);
        assert_eq!(c.snapshot(2200).get(&id), Some(&4000));
        // Three hours without a failure after the window: the streak starts over.
        let later = 4000 + STREAK_RESET_SECS + 1;
        c.record(&id, "m5", later);
        assert_eq!(c.snapshot(later).get(&id), Some(&(later + 300)));
    }
}
