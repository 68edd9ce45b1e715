//! Kubernetes events, published off the decision path and deduplicated.
//!
//! A provisioning round names every pod it nominated or could not schedule. Publishing those
//! inline made the next round wait for one API write per pod: with 2,000 pods no NodePool of
//! ours could take, a pod arriving next waited 9 s for its node instead of 0.3 s
//! (`tests/examples/controller_load.rs` run three times on one control plane). So events go
//! through a bounded queue to one publishing task, and an event already published for the
//! same object with the same reason and note within [`DEDUPE_WINDOW`] is not sent again, as
//! Karpenter's recorder does (a pending pod is nominated again every round). When the queue
//! is full, events are dropped and counted: events are diagnostics, decisions never wait
//! for them.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, Recorder};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How long an identical event for the same object is not repeated.
pub const DEDUPE_WINDOW: Duration = Duration::from_secs(120);

/// How many events may wait for the publishing task.
const QUEUE: usize = 2048;

/// What makes two events the same: the object, the reason and the note.
type Key = (String, String, String);

/// Events waiting to be published, with the memory of what was sent recently.
pub struct EventSink {
    tx: mpsc::Sender<(ObjectReference, Event)>,
    rx: Mutex<Option<mpsc::Receiver<(ObjectReference, Event)>>>,
    recent: Mutex<Recent>,
    recorder: Recorder,
    dropped: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink").finish_non_exhaustive()
    }
}

/// When each event key was last queued.
#[derive(Debug, Default)]
struct Recent {
    sent: HashMap<Key, Instant>,
    /// When the map was last pruned of entries past the window.
    pruned: Option<Instant>,
}

impl Recent {
    /// Whether an event with this key may go now (and if so, remembers it).
    fn admit(&mut self, key: Key, now: Instant, window: Duration) -> bool {
        if self.pruned.is_none_or(|p| now.duration_since(p) >= window) {
            self.sent.retain(|_, at| now.duration_since(*at) < window);
            self.pruned = Some(now);
        }
        match self.sent.get(&key) {
            Some(at) if now.duration_since(*at) < window => false,
            _ => {
                self.sent.insert(key, now);
                true
            }
        }
    }
}

fn key(object: &ObjectReference, event: &Event) -> Key {
    let who = match &object.uid {
        Some(uid) => uid.clone(),
        None => format!(
            "{}/{}/{}",
            object.kind.as_deref().unwrap_or_default(),
            object.namespace.as_deref().unwrap_or_default(),
            object.name.as_deref().unwrap_or_default()
        ),
    };
    (
        who,
        event.reason.clone(),
        event.note.clone().unwrap_or_default(),
    )
}

impl EventSink {
    pub fn new(recorder: Recorder) -> EventSink {
        let (tx, rx) = mpsc::channel(QUEUE);
        EventSink {
            tx,
            rx: Mutex::new(Some(rx)),
            recent: Mutex::new(Recent::default()),
            recorder,
            dropped: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Queues the event unless the same one went out within the window; never waits.
    pub fn publish(&self, object: &ObjectReference, event: Event) {
        let admitted = self.recent.lock().unwrap_or_else(|e| e.into_inner()).admit(
            key(object, &event),
            Instant::now(),
            DEDUPE_WINDOW,
        );
        if !admitted {
            return;
        }
        if self.tx.try_send((object.clone(), event)).is_err() {
            let n = self
                .dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if n.is_power_of_two() {
                tracing::warn!(
                    dropped = n + 1,
                    "event queue full; events dropped (decisions are not affected)"
                );
            }
        }
    }

    /// The publishing task (once; `None` after the first call). It ends when the sink is
    /// dropped.
    pub fn worker(&self) -> Option<impl Future<Output = ()> + Send + 'static> {
        let mut rx = self.rx.lock().unwrap_or_else(|e| e.into_inner()).take()?;
        let recorder = self.recorder.clone();
        Some(async move {
            while let Some((object, event)) = rx.recv().await {
                if let Err(e) = recorder.publish(&event, &object).await {
                    tracing::debug!(reason = %event.reason, error = %e, "could not publish event");
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(name: &str, note: &str) -> Key {
        (name.into(), "Nominated".into(), note.into())
    }

    #[test]
    fn the_same_event_is_sent_once_per_window() {
        let mut r = Recent::default();
        let t0 = Instant::now();
        let w = Duration::from_secs(120);
        assert!(r.admit(k("pod-a", "node x"), t0, w));
        assert!(!r.admit(k("pod-a", "node x"), t0 + Duration::from_secs(60), w));
        assert!(
            r.admit(k("pod-a", "node y"), t0 + Duration::from_secs(60), w),
            "another note is another event"
        );
        assert!(r.admit(k("pod-b", "node x"), t0 + Duration::from_secs(60), w));
        assert!(
            r.admit(k("pod-a", "node x"), t0 + Duration::from_secs(121), w),
            "past the window it goes again"
        );
    }

    #[test]
    fn old_entries_are_forgotten() {
        let mut r = Recent::default();
        let t0 = Instant::now();
        let w = Duration::from_secs(120);
        for i in 0..100 {
            assert!(r.admit(k(&format!("pod-{i}"), "n"), t0, w));
        }
        assert!(r.admit(k("late", "n"), t0 + Duration::from_secs(300), w));
        assert_eq!(r.sent.len(), 1, "entries past the window are pruned");
    }
}
