//! One async lock per scalable resource: a replica read-modify-write and the binding that
//! follows it never interleave with another launch or delete on the same resource in this
//! process (across processes, leader election and the resourceVersion preconditions do).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use capi_adapter::ResourceId;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

#[derive(Debug, Default)]
pub struct ResourceLocks {
    locks: Mutex<HashMap<ResourceId, Arc<AsyncMutex<()>>>>,
}

impl ResourceLocks {
    pub async fn lock(&self, id: &ResourceId) -> OwnedMutexGuard<()> {
        let lock = {
            let mut map = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            map.entry(id.clone()).or_default().clone()
        };
        lock.lock_owned().await
    }
}
