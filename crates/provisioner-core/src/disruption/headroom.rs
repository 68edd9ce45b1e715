//! Headroom: consolidation leaves room for the pods that are about to arrive.
//!
//! A cluster repacked to the last millicore makes every arriving pod wait for a new node (a
//! launch and a registration, 1-2 minutes), and the node provisioning launches for it is then
//! the next consolidation candidate: churn between the two controllers. Karpenter avoids some
//! of this only by searching less. Here the room to keep is derived from what was observed:
//!
//! - **target**: the largest CPU and memory requests of pods created within any
//!   `window_seconds` (about the time a new node takes to be ready) during the last
//!   `lookback_seconds`: a burst of that size recently arrived and would have had to wait
//!   for a node without free room. Pods that have left since are not in the snapshot, so
//!   the target is an underestimate, never an overestimate.
//! - **free room**: allocatable less requests over every node not being deleted, less the
//!   requests of pending pods (they take room first).
//!
//! A consolidation command (not emptiness: an empty node is deleted as before) is allowed when
//! the room left after it is still at least the target, in CPU and in memory, or when it does
//! not reduce the room. Removing a candidate takes away its free room and puts its pods on the
//! room of the nodes that stay, except the pods that move to replacements.
//!
//! Only CPU and memory are counted: they are what pods wait for in practice, and the check is
//! a cheap sum, so it runs before any scheduling simulation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::candidates::{Candidate, is_daemon};
use crate::model::Snapshot;
use crate::resources::pod_requests;

/// Knobs of the headroom rule ([`super::DisruptionOptions::headroom`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Headroom {
    /// Width of the arrival window whose peak is kept free: about a new node's time to ready.
    pub window_seconds: i64,
    /// How far back arrivals are looked at. Ten minutes: room is kept while a stream of
    /// arrivals is still flowing, not for an hour after a one-off burst (measured in
    /// `docs/simulator.md`, round 4: an hour's peak kept the `mixed` workloads 3-11% dearer
    /// for little pending time once lifetimes were learnt).
    pub lookback_seconds: i64,
}

impl Default for Headroom {
    fn default() -> Self {
        Headroom {
            window_seconds: 120,
            lookback_seconds: 600,
        }
    }
}

/// CPU (millicores) and memory (bytes).
pub type Room = (i64, i64);

/// The free room of the nodes that stay (each node's unrequested allocatable, a full node
/// counting 0, not less) and the requests of the pending non-daemon pods: what both the
/// headroom rule and provisioning's anticipation weigh the next arrivals against.
pub fn free_and_pending(snapshot: &Snapshot) -> (Room, Room) {
    let mut free: BTreeMap<&str, Room> = BTreeMap::new();
    for n in snapshot.nodes.iter().filter(|n| !n.marked_for_deletion) {
        free.insert(
            n.name.as_str(),
            (n.allocatable.cpu_milli, n.allocatable.memory),
        );
    }
    let mut pending: Room = (0, 0);
    for p in &snapshot.pods {
        let r = pod_requests(p);
        match &p.node_name {
            Some(n) => {
                if let Some(room) = free.get_mut(n.as_str()) {
                    room.0 -= r.cpu_milli;
                    room.1 -= r.memory;
                }
            }
            None if !is_daemon(p) => {
                pending.0 += r.cpu_milli;
                pending.1 += r.memory;
            }
            None => {}
        }
    }
    let total = free
        .values()
        .fold((0i64, 0i64), |a, r| (a.0 + r.0.max(0), a.1 + r.1.max(0)));
    (total, pending)
}

/// The largest summed requests of arrivals `(time, cpu, memory)` within any `window` seconds
/// (each resource on its own). `arrivals` is sorted by time here.
pub fn peak_window(arrivals: &mut [(i64, i64, i64)], window: i64) -> Room {
    arrivals.sort_unstable();
    let (mut start, mut cpu, mut mem) = (0usize, 0i64, 0i64);
    let (mut peak_cpu, mut peak_mem) = (0i64, 0i64);
    for end in 0..arrivals.len() {
        let (t, c, m) = arrivals[end];
        cpu += c;
        mem += m;
        while let Some(&(t0, c0, m0)) = arrivals.get(start)
            && t - t0 >= window.max(1)
        {
            cpu -= c0;
            mem -= m0;
            start += 1;
        }
        peak_cpu = peak_cpu.max(cpu);
        peak_mem = peak_mem.max(mem);
    }
    (peak_cpu, peak_mem)
}

/// The room to keep and the room there is, for one snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guard {
    pub target: Room,
    pub free: Room,
}

impl Guard {
    pub fn new(snapshot: &Snapshot, knobs: &Headroom) -> Guard {
        let now = snapshot.now;
        let mut arrivals: Vec<(i64, i64, i64)> = snapshot
            .pods
            .iter()
            .filter(|p| !is_daemon(p) && now - p.created_at <= knobs.lookback_seconds.max(0))
            .map(|p| {
                let r = pod_requests(p);
                (p.created_at, r.cpu_milli, r.memory)
            })
            .collect();
        let target = peak_window(&mut arrivals, knobs.window_seconds);
        let (total, pending) = free_and_pending(snapshot);
        Guard {
            target,
            free: (total.0 - pending.0, total.1 - pending.1),
        }
    }

    /// Room each candidate's removal takes: its own free room plus the requests of its pods,
    /// which land on the nodes that stay. One pass over the pods.
    pub fn taken_by(snapshot: &Snapshot, cands: &[&Candidate]) -> Vec<Room> {
        let mut used: BTreeMap<&str, Room> = BTreeMap::new();
        for p in &snapshot.pods {
            if let Some(n) = &p.node_name {
                let r = pod_requests(p);
                let u = used.entry(n.as_str()).or_default();
                u.0 += r.cpu_milli;
                u.1 += r.memory;
            }
        }
        cands
            .iter()
            .map(|c| {
                let Some(node) = snapshot.nodes.get(c.node) else {
                    return (0, 0);
                };
                let u = used.get(node.name.as_str()).copied().unwrap_or_default();
                let moved = c
                    .pods
                    .iter()
                    .filter_map(|&pi| snapshot.pods.get(pi))
                    .map(|p| pod_requests(p))
                    .fold((0i64, 0i64), |a, r| (a.0 + r.cpu_milli, a.1 + r.memory));
                (
                    (node.allocatable.cpu_milli - u.0).max(0) + moved.0,
                    (node.allocatable.memory - u.1).max(0) + moved.1,
                )
            })
            .collect()
    }

    /// Whether a command that takes `taken` room (and gives `given` back: the requests of the
    /// pods its replacements hold) leaves at least the target, or takes nothing.
    pub fn allows(&self, taken: Room, given: Room) -> bool {
        let delta = (taken.0 - given.0, taken.1 - given.1);
        let ok = |free: i64, d: i64, target: i64| d <= 0 || free - d >= target;
        ok(self.free.0, delta.0, self.target.0) && ok(self.free.1, delta.1, self.target.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn peak_is_the_busiest_window() {
        let mut a = vec![(0, 1000, 1), (10, 1000, 1), (500, 4000, 2), (550, 500, 9)];
        assert_eq!(peak_window(&mut a, 120), (4500, 11));
        let mut one = vec![(0, 100, 100)];
        assert_eq!(peak_window(&mut one, 120), (100, 100));
        assert_eq!(peak_window(&mut [], 120), (0, 0));
    }

    #[test]
    fn allows_keeps_the_target() {
        let g = Guard {
            target: (2000, 100),
            free: (5000, 1000),
        };
        assert!(g.allows((3000, 100), (0, 0)));
        assert!(!g.allows((3001, 100), (0, 0)));
        // Pods moving to a replacement give their room back.
        assert!(g.allows((4000, 100), (1000, 0)));
        // A command that takes nothing is always allowed, even below target.
        let low = Guard {
            target: (2000, 100),
            free: (1000, 50),
        };
        assert!(low.allows((0, 0), (0, 0)));
        assert!(!low.allows((1, 0), (0, 0)));
    }

    proptest! {
        /// The peak is at least any single arrival and at most the sum of all.
        #[test]
        fn peak_bounds(xs in proptest::collection::vec((0i64..10_000, 0i64..4000, 0i64..4000), 0..40), w in 1i64..1000) {
            let mut a = xs.clone();
            let (pc, pm) = peak_window(&mut a, w);
            let max_c = xs.iter().map(|x| x.1).max().unwrap_or(0);
            let sum_c: i64 = xs.iter().map(|x| x.1).sum();
            let sum_m: i64 = xs.iter().map(|x| x.2).sum();
            prop_assert!(pc >= max_c && pc <= sum_c);
            prop_assert!(pm <= sum_m);
            // A wider window never has a smaller peak.
            let mut b = xs.clone();
            let (wc, wm) = peak_window(&mut b, w * 2);
            prop_assert!(wc >= pc && wm >= pm);
        }
    }
}
