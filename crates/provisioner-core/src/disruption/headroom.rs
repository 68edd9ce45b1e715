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
//! CPU, memory and every extended resource (GPUs, ...) are counted, each on its own: a GPU
//! pod waits for GPU room, and a GPU node with CPU and memory to spare elsewhere in the
//! cluster is still the only place it fits. Counting CPU and memory alone let consolidation
//! take the last free GPUs a burst of GPU pods had just needed. The check is a sum, so it runs
//! before any scheduling simulation.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::candidates::{Candidate, is_daemon};
use crate::model::{Resources, Snapshot};
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

/// Room in CPU (millicores), memory (bytes) and extended resources (by name); pod slots and
/// ephemeral storage are left at 0.
pub type Room = Resources;

/// The part of `r` the headroom rule counts.
pub fn room_of(r: &Resources) -> Room {
    Resources {
        cpu_milli: r.cpu_milli,
        memory: r.memory,
        extended: r.extended.clone(),
        ..Resources::default()
    }
}

/// Each snapshot pod's requests, by index, for callers without a simulation base to read
/// them from.
fn every_pods_requests(snapshot: &Snapshot) -> Vec<Resources> {
    snapshot.pods.iter().map(|p| pod_requests(p)).collect()
}

/// `r` with every negative amount raised to 0: a full node has no room, not less than none.
fn clamp(mut r: Room) -> Room {
    r.cpu_milli = r.cpu_milli.max(0);
    r.memory = r.memory.max(0);
    for v in r.extended.values_mut() {
        *v = (*v).max(0);
    }
    r
}

/// What the pods bound to each node request (by index into `snapshot.nodes`) and what the
/// pending non-daemon pods request. One pass over the pods with one hash lookup each: with a
/// map keyed by node name, the headroom's two walks over 150,000 pods were a sixth of a
/// 5,000-node consolidation pass (callgrind, `benches/README.md`).
struct Usage {
    used: Vec<Room>,
    pending: Room,
}

impl Usage {
    /// `requests`: each snapshot pod's, by index ([`crate::state::Base::requests`]).
    fn of(snapshot: &Snapshot, requests: &[Resources]) -> Usage {
        let index: HashMap<&str, usize> = snapshot
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let mut used = vec![Room::default(); snapshot.nodes.len()];
        let mut pending = Room::default();
        for (p, r) in snapshot.pods.iter().zip(requests) {
            match &p.node_name {
                Some(n) => {
                    if let Some(u) = index.get(n.as_str()).and_then(|&i| used.get_mut(i)) {
                        u.add_assign(&room_of(r));
                    }
                }
                None if !is_daemon(p) => pending.add_assign(&room_of(r)),
                None => {}
            }
        }
        Usage { used, pending }
    }

    /// The free room of the nodes that stay, each node's counting 0 when it is full.
    fn free(&self, snapshot: &Snapshot) -> Room {
        let mut total = Room::default();
        for (n, u) in snapshot.nodes.iter().zip(&self.used) {
            if !n.marked_for_deletion {
                total.add_assign(&clamp(room_of(&n.allocatable).sub(u)));
            }
        }
        total
    }
}

/// The largest summed requests of arrivals `(time, requests)` within any `window` seconds
/// (each resource on its own). `arrivals` is sorted by time here.
pub fn peak_window(arrivals: &mut [(i64, Room)], window: i64) -> Room {
    arrivals.sort_unstable_by_key(|a| a.0);
    let mut start = 0usize;
    let mut sum = Room::default();
    let mut peak = Room::default();
    for end in 0..arrivals.len() {
        let t = arrivals[end].0;
        sum.add_assign(&arrivals[end].1);
        while let Some((t0, r0)) = arrivals.get(start)
            && t - t0 >= window.max(1)
        {
            sum.sub_assign(r0);
            start += 1;
        }
        peak = peak.max(&sum);
    }
    peak
}

/// The room to keep and the room there is, for one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    pub target: Room,
    pub free: Room,
}

impl Guard {
    pub fn new(snapshot: &Snapshot, knobs: &Headroom) -> Guard {
        let requests = every_pods_requests(snapshot);
        Self::from_usage(snapshot, knobs, &requests, &Usage::of(snapshot, &requests))
    }

    /// The guard and the room each of `cands` takes ([`Self::taken_by`]), from one walk over
    /// the pods.
    /// `requests`: each snapshot pod's, by index ([`crate::state::Base::requests`]).
    pub fn with_taken(
        snapshot: &Snapshot,
        requests: &[Resources],
        knobs: &Headroom,
        cands: &[&Candidate],
    ) -> (Guard, Vec<Room>) {
        let usage = Usage::of(snapshot, requests);
        (
            Self::from_usage(snapshot, knobs, requests, &usage),
            Self::taken_from(snapshot, requests, cands, &usage),
        )
    }

    fn from_usage(
        snapshot: &Snapshot,
        knobs: &Headroom,
        requests: &[Resources],
        usage: &Usage,
    ) -> Guard {
        let now = snapshot.now;
        // A pod its workload created for one that was evicted is not demand: the eviction
        // freed what it requests (GPUs included), and the command placed it. Counted, every
        // command's moved pods were a burst that blocked consolidation for the next
        // `lookback_seconds`.
        let replaced = crate::replacements::replaced(snapshot);
        let mut arrivals: Vec<(i64, Room)> = snapshot
            .pods
            .iter()
            .zip(requests)
            .zip(&replaced)
            .filter(|((p, _), m)| {
                !is_daemon(p) && m.is_none() && now - p.created_at <= knobs.lookback_seconds.max(0)
            })
            .map(|((p, r), _)| (p.created_at, room_of(r)))
            .collect();
        let target = peak_window(&mut arrivals, knobs.window_seconds);
        Guard {
            target,
            free: usage.free(snapshot).sub(&usage.pending),
        }
    }

    /// Room each candidate's removal takes: its own free room plus the requests of its pods,
    /// which land on the nodes that stay.
    pub fn taken_by(snapshot: &Snapshot, cands: &[&Candidate]) -> Vec<Room> {
        let requests = every_pods_requests(snapshot);
        Self::taken_from(snapshot, &requests, cands, &Usage::of(snapshot, &requests))
    }

    fn taken_from(
        snapshot: &Snapshot,
        requests: &[Resources],
        cands: &[&Candidate],
        usage: &Usage,
    ) -> Vec<Room> {
        cands
            .iter()
            .map(|c| {
                let (Some(node), Some(used)) = (snapshot.nodes.get(c.node), usage.used.get(c.node))
                else {
                    return Room::default();
                };
                let mut taken = clamp(room_of(&node.allocatable).sub(used));
                for r in c.pods.iter().filter_map(|&pi| requests.get(pi)) {
                    taken.add_assign(&room_of(r));
                }
                taken
            })
            .collect()
    }

    /// Whether a command that takes `taken` room (and gives `given` back: the requests of the
    /// pods its replacements hold) leaves at least the target, or takes nothing, in every
    /// resource.
    pub fn allows(&self, taken: &Room, given: &Room) -> bool {
        let ok = |free: i64, d: i64, target: i64| d <= 0 || free - d >= target;
        let ext = |r: &Room, k: &str| r.extended.get(k).copied().unwrap_or(0);
        ok(
            self.free.cpu_milli,
            taken.cpu_milli - given.cpu_milli,
            self.target.cpu_milli,
        ) && ok(
            self.free.memory,
            taken.memory - given.memory,
            self.target.memory,
        ) && taken.extended.keys().all(|k| {
            ok(
                ext(&self.free, k),
                ext(taken, k) - ext(given, k),
                ext(&self.target, k),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn peak_is_the_busiest_window() {
        let r = Resources::new;
        let mut a = vec![
            (0, r(1000, 1)),
            (10, r(1000, 1)),
            (500, r(4000, 2)),
            (550, r(500, 9)),
        ];
        assert_eq!(peak_window(&mut a, 120), r(4500, 11));
        let mut one = vec![(0, r(100, 100))];
        assert_eq!(peak_window(&mut one, 120), r(100, 100));
        assert_eq!(peak_window(&mut [], 120), Room::default());
    }

    #[test]
    fn allows_keeps_the_target() {
        let r = Resources::new;
        let none = Room::default();
        let g = Guard {
            target: r(2000, 100),
            free: r(5000, 1000),
        };
        assert!(g.allows(&r(3000, 100), &none));
        assert!(!g.allows(&r(3001, 100), &none));
        // Pods moving to a replacement give their room back.
        assert!(g.allows(&r(4000, 100), &r(1000, 0)));
        // A command that takes nothing is always allowed, even below target.
        let low = Guard {
            target: r(2000, 100),
            free: r(1000, 50),
        };
        assert!(low.allows(&none, &none));
        assert!(!low.allows(&r(1, 0), &none));
    }

    proptest! {
        /// The peak is at least any single arrival and at most the sum of all.
        #[test]
        fn peak_bounds(xs in proptest::collection::vec((0i64..10_000, 0i64..4000, 0i64..4000, 0i64..3), 0..40), w in 1i64..1000) {
            let arrivals = || -> Vec<(i64, Room)> {
                xs.iter()
                    .map(|&(t, c, m, g)| (t, Resources::new(c, m).with_extended("nvidia.com/gpu", g)))
                    .collect()
            };
            let p = peak_window(&mut arrivals(), w);
            let max_c = xs.iter().map(|x| x.1).max().unwrap_or(0);
            let max_g = xs.iter().map(|x| x.3).max().unwrap_or(0);
            let sum_c: i64 = xs.iter().map(|x| x.1).sum();
            let sum_m: i64 = xs.iter().map(|x| x.2).sum();
            let sum_g: i64 = xs.iter().map(|x| x.3).sum();
            let gpu = |r: &Room| r.get("nvidia.com/gpu");
            prop_assert!(p.cpu_milli >= max_c && p.cpu_milli <= sum_c);
            prop_assert!(p.memory <= sum_m);
            prop_assert!(gpu(&p) >= max_g && gpu(&p) <= sum_g);
            // A wider window never has a smaller peak.
            let wide = peak_window(&mut arrivals(), w * 2);
            prop_assert!(wide.cpu_milli >= p.cpu_milli && wide.memory >= p.memory && gpu(&wide) >= gpu(&p));
        }
    }
}
