//! The launch-failure back-off: a resource whose Machines fail, or do not get a providerID in
//! time, is unavailable for a configurable window (like Karpenter's insufficient-capacity
//! cache), so the core stops choosing it.
//!
//! Kept in memory only: after a restart the failed or stuck Machines are still in the API,
//! so the first failure check re-creates the entries; forgetting them meanwhile can cost at
//! most one more launch attempt, never a replica runaway (the launch plan counts failed
//! unbound Machines as supply).

use std::collections::BTreeMap;
use std::sync::Mutex;

use capi_adapter::ResourceId;
use capi_adapter::failures::LaunchFailure;
use capi_adapter::instance_types::Backoff;

#[derive(Debug)]
pub struct BackoffCache {
    window_secs: i64,
    until: Mutex<BTreeMap<ResourceId, i64>>,
}

impl BackoffCache {
    pub fn new(window_secs: i64) -> Self {
        BackoffCache {
            window_secs,
            until: Mutex::new(BTreeMap::new()),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, BTreeMap<ResourceId, i64>> {
        self.until.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks a resource unavailable from `now` for the window.
    pub fn record(&self, resource: &ResourceId, now: i64) {
        let until = now.saturating_add(self.window_secs);
        let mut map = self.map();
        let e = map.entry(resource.clone()).or_insert(until);
        *e = (*e).max(until);
    }

    pub fn observe(&self, failures: &[LaunchFailure], now: i64) {
        for f in failures {
            self.record(&f.resource, now);
        }
    }

    /// The entries still in force at `now`, in the adapter's form.
    pub fn snapshot(&self, now: i64) -> Backoff {
        let mut map = self.map();
        map.retain(|_, until| *until > now);
        map.clone()
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
        let c = BackoffCache::new(300);
        let id = ResourceId::new(ResourceKind::MachineDeployment, "ns", "md");
        c.record(&id, 1000);
        assert_eq!(c.snapshot(1100).get(&id), Some(&1300));
        assert!(c.snapshot(1300).is_empty());
    }
}
