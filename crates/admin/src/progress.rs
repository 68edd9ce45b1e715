//! Progress of long operations (setup apply, CAS disable/enable, install apply), reported
//! step by step to whoever shows it: the CLI draws an indicatif bar on a terminal, the UI
//! and tests pass [`Progress::none`]. The library never draws anything itself.

use std::sync::Arc;

/// One step: `done` of `total` finished, now doing `message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub done: usize,
    pub total: usize,
    pub message: String,
}

type Callback = Arc<dyn Fn(&Step) + Send + Sync>;

/// A cheap handle the operations report to.
#[derive(Clone, Default)]
pub struct Progress {
    callback: Option<Callback>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("reporting", &self.callback.is_some())
            .finish()
    }
}

impl Progress {
    /// Reports nowhere.
    pub fn none() -> Progress {
        Progress::default()
    }

    /// Reports to `f`.
    pub fn new(f: impl Fn(&Step) + Send + Sync + 'static) -> Progress {
        Progress {
            callback: Some(Arc::new(f)),
        }
    }

    /// Says that `done` of `total` steps are finished and what comes next.
    pub fn step(&self, done: usize, total: usize, message: impl Into<String>) {
        if let Some(f) = &self.callback {
            f(&Step {
                done,
                total,
                message: message.into(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn reports_each_step_in_order_and_none_reports_nothing() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let p = Progress::new(move |st| {
            s.lock()
                .unwrap()
                .push((st.done, st.total, st.message.clone()))
        });
        p.step(0, 2, "a");
        p.step(1, 2, "b");
        Progress::none().step(0, 1, "ignored");
        assert_eq!(
            *seen.lock().unwrap(),
            vec![(0, 2, "a".to_string()), (1, 2, "b".to_string())]
        );
    }
}
