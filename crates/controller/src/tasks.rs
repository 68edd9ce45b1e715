//! Every task the controller spawns, so that stopping it leaves nothing acting. A process
//! that exits takes its tasks along; an in-process stop (the tests stop a controller and
//! start another, as a crash and a restart would) must too, or a stray launch or watch of
//! the old instance acts next to the new one.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::task::AbortHandle;

/// A registry of spawned tasks. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct Tasks(Arc<Mutex<Vec<AbortHandle>>>);

impl Tasks {
    /// Spawns `fut` and remembers it; finished tasks are forgotten on the way.
    pub fn spawn<F>(&self, fut: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let handle = tokio::spawn(fut).abort_handle();
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|h| !h.is_finished());
        all.push(handle);
    }

    /// Aborts every task spawned so far.
    pub fn abort_all(&self) {
        let all = std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()));
        for h in all {
            h.abort();
        }
    }

    /// How many tasks may still run.
    pub fn live(&self) -> usize {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|h| !h.is_finished());
        all.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn abort_all_stops_what_was_spawned_and_finished_tasks_are_forgotten() {
        let tasks = Tasks::default();
        tasks.spawn(async {});
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tasks.spawn(async move {
            std::future::pending::<()>().await;
            drop(tx);
        });
        tokio::task::yield_now().await;
        assert_eq!(tasks.live(), 1);
        tasks.abort_all();
        // The pending task was aborted: its sender is dropped.
        assert!(rx.await.is_err());
        assert_eq!(tasks.live(), 0);
    }
}
