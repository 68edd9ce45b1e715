//! How long a running pod is expected to keep running: the payback rule's horizon, learnt from
//! the pods this cluster has seen end.
//!
//! Without observations the payback rule assumes Lindy (a pod that has run for `a` runs about
//! `a` more). That is right for heavy-tailed lifetimes and wrong for the two shapes clusters
//! are full of: memoryless ones (a pod of a minute is as likely to stay an hour as one of an
//! hour) and fixed ones (batch pods that run an hour each, where the young pod has the most
//! time left, not the least). Lindy then refuses to move young pods on memoryless workloads,
//! so nodes launched for trickling replicas stay fragmented, and happily moves batch pods
//! that are about to finish.
//!
//! Once enough pods have ended on their own, their lifetimes, with the running pods' ages as
//! lifetimes not yet over (censored), give a Kaplan-Meier estimate of the survival function
//! `S`. A pod of age `a` is then expected to run
//!
//! ```text
//! R(a) = (integral of S from a to a + cap) / S(a)
//! ```
//!
//! more, capped like the Lindy horizon. Beyond the oldest observation `E` (the longest
//! lifetime, ended or still running) the evidence says nothing, and the estimate falls back
//! to what it assumes without evidence: Lindy, a pod that reached `E` runs about `E` more.
//! So `R(a) = (integral of S from a to min(a + cap, E) + S(E) x E) / S(a)` below `E`, and `a`
//! beyond it. Taking `S` as flat past `E` gave every survivor the cap: where half the pods
//! end at one hour and the rest have run just past it, a 4 h horizon for each survivor, and
//! consolidation evicted survivors for savings that had an hour to pay (docs/simulator.md,
//! round 39).
//!
//! Before that, a pod's own age is a poor guide when the cluster is young: every pod of a
//! workload that started half an hour ago is minutes old, Lindy gives each a few minutes, and
//! the nodes launched for its trickling replicas are never worth merging, whatever the pods'
//! lives turn out to be. What the cluster has shown so far is better evidence: if the oldest
//! running pod of a kind is `W` old, pods of that kind have survived (or ended, the few that
//! did) over `[0, W]`. With `window_prior`, the estimate before enough endings is that
//! Kaplan-Meier curve up to `W` and Lindy beyond it (a survivor at `W` runs about `W` more):
//!
//! ```text
//! R(a) = (integral of S from a to W) / S(a)  +  S(W) / S(a) x W
//! ```
//!
//! which is Lindy for the oldest pod (`R(W) = W`) and more for younger ones (`2W - a` while
//! nothing ended). The risk is bounded: short-lived pods soon end and teach the full
//! estimate; long-lived ones, the case Lindy gets wrong, never would.
//!
//! Lindy beyond the evidence is held to a floor ([`RemainingLife::with_floor`], the payback
//! rule's `lindy_floor_hours`, by default its 4 h cap). Every age Lindy reads is counted from
//! when this cluster was first seen: a cluster (or a simulated run) whose pods all started ten
//! minutes ago expects each of them to stay ten minutes, so the nodes launched for a burst were
//! not worth repacking until the burst had aged, while nothing seen says the pods end. The
//! floor changes nothing where the evidence says pods end (the curve falls to zero before its
//! edge) and weighs in by the share that survived to the edge where it does not.
//!
//! Lifetimes are learnt per owner kind when a kind has enough endings of its own: a cluster
//! running Jobs next to Deployments would otherwise give a service's young pods the minutes a
//! Job's pods live.
//!
//! Pods the autoscaler evicted are not endings: their workload goes on elsewhere. Producers of
//! [`crate::model::Snapshot::ended_pods`] leave them out.

use std::collections::{BTreeMap, HashMap};

use crate::model::{Pod, Snapshot};

/// Expected remaining life of a pod by its age, from the snapshot's ended pods when there
/// are at least `min_ended`, from Lindy otherwise. Learnt per owner kind (a Job's pods and a
/// Deployment's live very differently) where a kind has `min_ended` endings of its own, from
/// all pods together otherwise. Built once per decision.
#[derive(Debug, Clone, PartialEq)]
pub struct RemainingLife {
    now: i64,
    cap_secs: f64,
    survival: Option<Survival>,
    by_kind: BTreeMap<Option<String>, Survival>,
    /// Per owner kind, before enough endings (with `window_prior`): what has been seen.
    seen: BTreeMap<Option<String>, Seen>,
    /// Replacements of evicted pods whose work goes on, by namespace and name: when that
    /// work began ([`crate::replacements`]). Their own creation says they just arrived.
    /// Keyed by namespace, then name, so a lookup borrows the pod's strings: `hours` runs for
    /// every moved pod of every command evaluated.
    continued: HashMap<String, HashMap<String, i64>>,
    /// How much of the cluster's recent departures arrivals did not make up for, 0 to 1
    /// ([`super::turnover::shrink_fraction`]): how far a command's horizon reaches from the
    /// moved pods' median remaining life towards their longest ([`horizon_hours`]).
    shrink: f64,
    /// The least a pod beyond the evidence is expected to run on ([`Self::with_floor`]).
    floor_secs: f64,
}

/// A kind's evidence before its lifetimes are learnt: its oldest running pod's age and the
/// Kaplan-Meier curve of its few endings (`None`: nothing ended, `S = 1`).
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    window: f64,
    survival: Option<Survival>,
}

impl Seen {
    /// Expected remaining seconds at `age`: the curve within the window, Lindy (at least
    /// `floor`) beyond it.
    fn remaining(&self, age: f64, floor: f64) -> f64 {
        let w = self.window;
        if age >= w {
            return age.max(floor);
        }
        let (alive, within, at_edge) = match &self.survival {
            Some(s) => (s.at(age), s.integral(w) - s.integral(age), s.at(w)),
            None => (1.0, w - age, 1.0),
        };
        if alive > 1e-12 {
            (within + at_edge * w.max(floor)) / alive
        } else {
            age.max(floor)
        }
    }
}

/// A right-continuous step function: `S(t) = level[k]` on `[time[k], time[k + 1])`, 1 before
/// `time[0]`; `area[k]` is the integral of `S` from 0 to `time[k]`.
#[derive(Debug, Clone, PartialEq)]
struct Survival {
    time: Vec<f64>,
    level: Vec<f64>,
    area: Vec<f64>,
    /// The oldest observation, ended or not: where the evidence ends.
    edge: f64,
}

impl Survival {
    /// Kaplan-Meier from `(lifetime seconds, ended)` pairs; `None` when nothing ended.
    fn estimate(mut observations: Vec<(i64, bool)>) -> Option<Survival> {
        // At equal times endings come first: a pod seen alive at `t` was at risk at `t`.
        observations.sort_unstable_by_key(|&(t, ended)| (t.max(0), !ended));
        let edge = observations.last().map_or(0.0, |o| o.0.max(0) as f64);
        let mut at_risk = observations.len() as f64;
        let (mut time, mut level, mut area) = (Vec::new(), Vec::new(), Vec::new());
        let (mut s, mut last_t, mut acc) = (1.0f64, 0.0f64, 0.0f64);
        let mut i = 0;
        while i < observations.len() {
            let t = observations[i].0.max(0);
            let (mut ended, mut seen) = (0usize, 0usize);
            while i < observations.len() && observations[i].0.max(0) == t {
                ended += usize::from(observations[i].1);
                seen += 1;
                i += 1;
            }
            if ended > 0 && at_risk > 0.0 {
                let tf = t as f64;
                acc += s * (tf - last_t);
                s *= 1.0 - ended as f64 / at_risk;
                time.push(tf);
                level.push(s);
                area.push(acc);
                last_t = tf;
            }
            at_risk -= seen as f64;
        }
        (!time.is_empty()).then_some(Survival {
            time,
            level,
            area,
            edge,
        })
    }

    /// Expected remaining seconds at `age`, counting at most `cap` seconds of the curve:
    /// Lindy (at least `floor`) at and beyond the edge of the evidence (module doc).
    fn remaining(&self, age: f64, cap: f64, floor: f64) -> f64 {
        let alive = self.at(age);
        if age >= self.edge || alive <= 1e-12 {
            return age.max(floor);
        }
        let end = (age + cap).min(self.edge);
        let within = self.integral(end) - self.integral(age);
        let beyond = if age + cap > self.edge {
            self.at(self.edge) * self.edge.max(floor)
        } else {
            0.0
        };
        (within + beyond) / alive
    }

    /// `S(t)`.
    fn at(&self, t: f64) -> f64 {
        match self.time.partition_point(|&x| x <= t) {
            0 => 1.0,
            k => self.level[k - 1],
        }
    }

    /// The integral of `S` from 0 to `t`.
    fn integral(&self, t: f64) -> f64 {
        let t = t.max(0.0);
        match self.time.partition_point(|&x| x <= t) {
            0 => t,
            k => self.area[k - 1] + self.level[k - 1] * (t - self.time[k - 1]),
        }
    }
}

impl RemainingLife {
    /// Learns from `snapshot.ended_pods` and the ages of its pods that are not daemons, when
    /// at least `min_ended` pods ended (per kind: when that kind has as many). Before that,
    /// with `window_prior`, from the window each kind has been seen over (module doc).
    pub fn from_snapshot(
        snapshot: &Snapshot,
        cap_hours: f64,
        min_ended: usize,
        window_prior: bool,
    ) -> Self {
        let cap_secs = cap_hours.max(0.0) * 3600.0;
        let ended = &snapshot.ended_pods;
        let starts = crate::replacements::continued_since(snapshot);
        let mut continued: HashMap<String, HashMap<String, i64>> = HashMap::new();
        for (p, s) in snapshot.pods.iter().zip(&starts) {
            if let Some(s) = *s {
                continued
                    .entry(p.namespace.clone())
                    .or_default()
                    .insert(p.name.clone(), s);
            }
        }
        let mut life = RemainingLife {
            now: snapshot.now,
            cap_secs,
            survival: None,
            by_kind: BTreeMap::new(),
            seen: BTreeMap::new(),
            continued,
            shrink: 0.0,
            floor_secs: 0.0,
        };
        let learn = !ended.is_empty() && ended.len() >= min_ended;
        if !learn && !window_prior {
            return life;
        }
        let running: Vec<(&Option<String>, i64)> = snapshot
            .pods
            .iter()
            .zip(&starts)
            .filter(|(p, _)| !super::candidates::is_daemon(p))
            .map(|(p, s)| (&p.owner_kind, snapshot.now - s.unwrap_or(p.created_at)))
            .collect();
        let observations = |kind: Option<&Option<String>>| -> Vec<(i64, bool)> {
            let ends = ended
                .iter()
                .filter(|e| kind.is_none_or(|k| &e.owner_kind == k))
                .map(|e| (e.lifetime_seconds, true));
            let alive = running
                .iter()
                .filter(|(k, _)| kind.is_none_or(|kind| *k == kind))
                .map(|&(_, age)| (age, false));
            ends.chain(alive).collect()
        };
        if !learn {
            let mut windows: BTreeMap<&Option<String>, i64> = BTreeMap::new();
            for &(kind, age) in &running {
                let w = windows.entry(kind).or_insert(0);
                *w = (*w).max(age);
            }
            for (kind, window) in windows {
                let survival = Survival::estimate(observations(Some(kind)));
                life.seen.insert(
                    kind.clone(),
                    Seen {
                        window: window.max(0) as f64,
                        survival,
                    },
                );
            }
            return life;
        }
        life.survival = Survival::estimate(observations(None));
        let mut counts: BTreeMap<&Option<String>, usize> = BTreeMap::new();
        for e in ended {
            *counts.entry(&e.owner_kind).or_default() += 1;
        }
        if counts.len() > 1 {
            for (kind, n) in counts {
                if n >= min_ended.max(1)
                    && let Some(s) = Survival::estimate(observations(Some(kind)))
                {
                    life.by_kind.insert(kind.clone(), s);
                }
            }
        }
        life
    }

    /// The Lindy estimate only (no observations), as before lifetimes were learnt.
    pub fn lindy(now: i64, cap_hours: f64) -> Self {
        RemainingLife {
            now,
            cap_secs: cap_hours.max(0.0) * 3600.0,
            survival: None,
            by_kind: BTreeMap::new(),
            seen: BTreeMap::new(),
            continued: HashMap::new(),
            shrink: 0.0,
            floor_secs: 0.0,
        }
    }

    /// The same estimate with Lindy's extrapolation held to at least `hours` (0 or less: plain
    /// Lindy, clamped to the cap when read): a pod beyond the evidence (older than the
    /// oldest lifetime seen, or than its kind's window before enough endings) runs at least
    /// `hours` more. Lindy is measured from when the cluster was first seen: in one whose
    /// every pod started minutes ago it gives each minutes, whatever the workload is.
    pub fn with_floor(mut self, hours: f64) -> Self {
        self.floor_secs = if hours.is_finite() {
            hours.max(0.0) * 3600.0
        } else {
            0.0
        };
        self
    }

    /// The same estimate in a cluster that is shrinking by `shrink` (0 to 1, clamped): see
    /// [`horizon_hours`].
    pub fn with_shrink(mut self, shrink: f64) -> Self {
        self.shrink = if shrink.is_finite() {
            shrink.clamp(0.0, 1.0)
        } else {
            0.0
        };
        self
    }

    /// How much the cluster is shrinking, 0 to 1 ([`Self::with_shrink`]).
    pub fn shrink(&self) -> f64 {
        self.shrink
    }

    /// The decision's time, which the ages are counted to.
    pub fn now(&self) -> i64 {
        self.now
    }

    /// The longest remaining life it gives, in hours: the horizon cap it was built with.
    pub fn cap_hours(&self) -> f64 {
        self.cap_secs / 3600.0
    }

    /// Whether the estimate comes from observed lifetimes.
    pub fn learnt(&self) -> bool {
        self.survival.is_some()
    }

    /// Expected remaining hours of `pod`, at most the cap: from its owner kind's lifetimes
    /// when that kind has enough endings, else from all pods', else Lindy.
    pub fn hours(&self, pod: &Pod) -> f64 {
        let start = self
            .continued
            .get(&pod.namespace)
            .and_then(|names| names.get(&pod.name))
            .copied()
            .unwrap_or(pod.created_at);
        let age = (self.now - start).max(0) as f64;
        let survival = self.by_kind.get(&pod.owner_kind).or(self.survival.as_ref());
        let secs = match survival {
            Some(s) => s.remaining(age, self.cap_secs, self.floor_secs),
            None => match self.seen.get(&pod.owner_kind) {
                Some(seen) => seen.remaining(age, self.floor_secs),
                None => age.max(self.floor_secs),
            },
        };
        secs.clamp(0.0, self.cap_secs) / 3600.0
    }
}

/// The median of the pods' remaining hours: how long a command's saving is counted. `default`
/// when there are no pods (nothing to move, nothing to wait for).
pub fn median_hours(remaining: &mut [f64], default: f64) -> f64 {
    if remaining.is_empty() {
        return default;
    }
    remaining.sort_unstable_by(f64::total_cmp);
    let mid = remaining.len() / 2;
    if remaining.len() % 2 == 1 {
        remaining[mid]
    } else {
        (remaining[mid - 1] + remaining[mid]) / 2.0
    }
}

/// How long a command's saving is counted, from the moved pods' remaining hours: their median
/// in a cluster that holds its size, reaching towards the longest as the cluster shrinks
/// (`median + shrink x (longest - median)`). A candidate left alone costs until its last pod
/// leaves, unless arrivals fill the room its departures free: where arrivals keep up, the
/// room a repack frees is soon taken by pods that would otherwise have needed it, and the
/// median is how long the saving lasts; where departures outrun arrivals (a workload winding
/// down), nothing takes that room and the node would have run until its longest-lived pod
/// ended. `default` when there are no pods.
pub fn horizon_hours(remaining: &mut [f64], default: f64, shrink: f64) -> f64 {
    let median = median_hours(remaining, default);
    let longest = remaining.iter().copied().fold(median, f64::max);
    median + shrink.clamp(0.0, 1.0) * (longest - median)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EndedPod;
    use proptest::prelude::*;

    /// A pod created at `created_at`, of no owner kind.
    fn at(created_at: i64) -> Pod {
        Pod {
            created_at,
            ..Pod::default()
        }
    }

    fn snapshot(now: i64, ended: Vec<i64>, ages: &[i64]) -> Snapshot {
        Snapshot {
            now,
            ended_pods: ended
                .into_iter()
                .map(|t| EndedPod {
                    lifetime_seconds: t,
                    owner_kind: None,
                    ended_at: None,
                })
                .collect(),
            pods: ages
                .iter()
                .enumerate()
                .map(|(i, a)| Pod {
                    name: format!("p{i}"),
                    created_at: now - a,
                    ..Pod::default()
                })
                .map(std::sync::Arc::new)
                .collect(),
            ..Snapshot::default()
        }
    }

    /// In a cluster whose ended pods were ten-minute jobs, a service's pod that a command
    /// moved a minute ago is its workload's replacement: it goes on from the evicted pod's
    /// start, not from its own, and keeps the long life of the service's other old pods.
    #[test]
    fn a_replacement_goes_on_from_its_evicted_pods_start() {
        let now = 100_000;
        // 40 jobs ended at 600 s; a service's pods have run for 5 h; one moved 60 s ago.
        let mut s = snapshot(now, vec![600; 40], &[5 * 3600, 5 * 3600, 60]);
        let moved = s.pods[2].clone();
        let life = |s: &Snapshot| RemainingLife::from_snapshot(s, 4.0, 30, true);
        let young = life(&s).hours(&moved);
        assert!(young < 0.5, "{young}");
        s.recent_evictions = vec![crate::model::Eviction::of(
            &moved,
            now - 61,
            Some(now - 5 * 3600),
        )];
        let continued = life(&s).hours(&moved);
        assert_eq!(continued, life(&s).hours(&s.pods[0]));
        assert!(continued > 3.0, "{continued}");
        // A Job's pod starts again: no start to carry on from.
        s.recent_evictions[0].continues_since = None;
        assert_eq!(life(&s).hours(&moved), young);
    }

    #[test]
    fn without_enough_endings_it_is_lindy() {
        let s = snapshot(100_000, vec![3600; 5], &[600]);
        let life = RemainingLife::from_snapshot(&s, 4.0, 30, false);
        assert!(!life.learnt());
        assert!((life.hours(&at(100_000 - 600)) - 600.0 / 3600.0).abs() < 1e-12);
        assert_eq!(life.hours(&at(0)), 4.0);
    }

    #[test]
    fn the_window_prior_gives_young_pods_of_a_young_cluster_more_than_their_age() {
        // A workload started 30 minutes ago, nothing ended yet.
        let s = snapshot(100_000, Vec::new(), &[1800, 1200, 300]);
        let life = RemainingLife::from_snapshot(&s, 4.0, 30, true);
        assert!(!life.learnt());
        // 25 more minutes inside the window, then Lindy's 30 minutes beyond it.
        let young = life.hours(&at(100_000 - 300));
        assert!(
            (young - (1500.0 + 1800.0) / 3600.0).abs() < 1e-12,
            "{young}"
        );
        // The oldest pod is where Lindy was.
        assert!((life.hours(&at(100_000 - 1800)) - 0.5).abs() < 1e-12);
        // Without the prior: Lindy, five minutes.
        let lindy = RemainingLife::from_snapshot(&s, 4.0, 30, false);
        assert!((lindy.hours(&at(100_000 - 300)) - 300.0 / 3600.0).abs() < 1e-12);
    }

    /// A cluster whose every pod started five minutes ago: Lindy gives each five minutes,
    /// the floor an hour; where the evidence says pods end (jobs of ten minutes, all ended),
    /// the floor changes nothing.
    #[test]
    fn the_floor_holds_lindy_up_beyond_the_evidence_only() {
        let now = 100_000;
        let young = snapshot(now, Vec::new(), &[300, 300]);
        let pod = at(now - 300);
        let plain = RemainingLife::from_snapshot(&young, 4.0, 30, true);
        assert!((plain.hours(&pod) - 300.0 / 3600.0).abs() < 1e-12);
        let floored = plain.clone().with_floor(1.0);
        assert!((floored.hours(&pod) - 1.0).abs() < 1e-12);
        // Younger than the window: 150 s inside it, then the floor's hour beyond.
        let younger = floored.hours(&at(now - 150));
        assert!(
            (younger - (150.0 + 3600.0) / 3600.0).abs() < 1e-12,
            "{younger}"
        );
        // Without the window prior, and past the cap.
        let lindy = RemainingLife::from_snapshot(&young, 4.0, 30, false).with_floor(1.0);
        assert!((lindy.hours(&pod) - 1.0).abs() < 1e-12);
        assert_eq!(lindy.clone().with_floor(9.0).hours(&pod), 4.0);
        // 40 jobs ended at ten minutes, none running beyond: S is 0 past 600 s.
        let jobs = snapshot(now, vec![600; 40], &[120]);
        let learnt = RemainingLife::from_snapshot(&jobs, 4.0, 30, true);
        assert!(learnt.learnt());
        let job = at(now - 120);
        assert_eq!(
            learnt.clone().with_floor(1.0).hours(&job),
            learnt.hours(&job)
        );
        // A learnt curve that has not reached zero: 40 pods ended at 600 s, 40 have run
        // 1800 s (the edge). Past the edge Lindy gives 1800 s, the floor an hour; a new pod
        // gets 1200 s within the curve plus the survivors' half of that.
        let half = snapshot(now, vec![600; 40], &[1800; 40]);
        let curve = RemainingLife::from_snapshot(&half, 4.0, 30, true);
        assert!(curve.learnt());
        assert!((curve.hours(&at(now - 1800)) - 0.5).abs() < 1e-12);
        let curve = curve.with_floor(1.0);
        assert!((curve.hours(&at(now - 1800)) - 1.0).abs() < 1e-12);
        let new = curve.hours(&at(now));
        assert!(
            (new - (1200.0 + 0.5 * 3600.0) / 3600.0).abs() < 1e-12,
            "{new}"
        );
        // A floor that is not a number is no floor.
        assert_eq!(
            plain.clone().with_floor(f64::NAN).hours(&pod),
            plain.hours(&pod)
        );
    }

    #[test]
    fn endings_inside_the_window_shorten_the_prior() {
        // Four pods, half of which ended at 10 minutes; the survivors are 30 minutes old.
        let s = snapshot(100_000, vec![600, 600], &[1800, 1800]);
        let life = RemainingLife::from_snapshot(&s, 4.0, 30, true);
        // A new pod: S = 1 to 600 s, 1/2 after. Within: 600 + 0.5 x 1200; beyond: 0.5 x 1800.
        let new = life.hours(&at(100_000));
        assert!(
            (new - (600.0 + 600.0 + 900.0) / 3600.0).abs() < 1e-12,
            "{new}"
        );
        let none_ended = snapshot(100_000, Vec::new(), &[1800, 1800]);
        let longer = RemainingLife::from_snapshot(&none_ended, 4.0, 30, true).hours(&at(100_000));
        assert!(longer > new, "{longer} vs {new}");
    }

    #[test]
    fn the_window_is_per_owner_kind() {
        // Services have run for a day; a Job's pods started five minutes ago.
        let now = 100_000;
        let of = |kind: &str, age: i64| Pod {
            owner_kind: Some(kind.into()),
            created_at: now - age,
            ..Pod::default()
        };
        let mut s = snapshot(now, Vec::new(), &[]);
        s.pods = vec![of("ReplicaSet", 86_400), of("Job", 300), of("Job", 60)]
            .into_iter()
            .map(std::sync::Arc::new)
            .collect();
        let life = RemainingLife::from_snapshot(&s, 4.0, 30, true);
        assert_eq!(life.hours(&of("ReplicaSet", 60)), 4.0);
        let job = life.hours(&of("Job", 60));
        assert!((job - (240.0 + 300.0) / 3600.0).abs() < 1e-12, "{job}");
        // A kind never seen running keeps Lindy.
        assert!((life.hours(&of("StatefulSet", 60)) - 60.0 / 3600.0).abs() < 1e-12);
    }

    #[test]
    fn fixed_lifetimes_give_young_pods_the_most_time_left() {
        // Every pod ran exactly one hour.
        let s = snapshot(100_000, vec![3600; 40], &[600, 3000]);
        let life = RemainingLife::from_snapshot(&s, 4.0, 30, false);
        assert!(life.learnt());
        let young = life.hours(&at(100_000 - 600));
        let old = life.hours(&at(100_000 - 3000));
        assert!((young - 3000.0 / 3600.0).abs() < 1e-9, "{young}");
        assert!((old - 600.0 / 3600.0).abs() < 1e-9, "{old}");
    }

    #[test]
    fn memoryless_lifetimes_give_every_age_about_the_mean() {
        // Lifetimes spread evenly over the quantiles of an exponential with a 1 h mean.
        let n = 2000;
        let ended: Vec<i64> = (0..n)
            .map(|i| (-(1.0 - (i as f64 + 0.5) / n as f64).ln() * 3600.0) as i64)
            .collect();
        let s = snapshot(1_000_000, ended, &[]);
        let life = RemainingLife::from_snapshot(&s, 4.0, 30, false);
        // Capped at 4 h, the expected remaining life is 1 - e^-4 hours at any age.
        let want = 1.0 - (-4.0f64).exp();
        for age in [60, 600, 3600] {
            let h = life.hours(&at(1_000_000 - age));
            assert!((h - want).abs() < 0.03, "age {age}: {h} vs {want}");
        }
        // Lindy would have given a minute-old pod a minute.
        assert!(life.hours(&at(1_000_000 - 60)) > 0.9);
    }

    #[test]
    fn beyond_the_evidence_a_pod_runs_about_its_age_again() {
        // 40 pods ended at 10 min; the oldest running pod is 2 h old, the edge of the evidence.
        let s = snapshot(100_000, vec![600; 40], &[7200, 3600]);
        let life = RemainingLife::from_snapshot(&s, 4.0, 30, false);
        // At the edge: Lindy, two hours more (not the 4 h cap a flat tail gave).
        assert!((life.hours(&at(100_000 - 7200)) - 2.0).abs() < 1e-9);
        // Below it: the hour to the edge, where nothing ended, then Lindy from the edge.
        assert!((life.hours(&at(100_000 - 3600)) - 3.0).abs() < 1e-9);
        // Beyond it: its own age, within the cap.
        assert!((life.hours(&at(100_000 - 5 * 3600)) - 4.0).abs() < 1e-9);
    }

    #[test]
    fn running_pods_count_as_lifetimes_not_yet_over() {
        // 40 pods ended at 10 min, ten times as many still run at 2 h. Counted as lifetimes
        // not yet over, they say most pods outlive 10 min: a young pod keeps most of the cap.
        let mut ages = vec![7200; 400];
        ages.push(1200);
        let s = snapshot(100_000, vec![600; 40], &ages);
        let life = RemainingLife::from_snapshot(&s, 4.0, 30, false);
        let young = life.hours(&at(100_000 - 60));
        // S(60 s) = 1 and S drops by 40/441 at 600 s: about 9/10 of the young pod's cap.
        assert!(young > 3.5 && young < 4.0, "{young}");
    }

    #[test]
    fn lifetimes_are_learnt_per_owner_kind() {
        // Jobs end after 5 minutes; the services' pods have run for hours and none ended.
        // Pooled, a young service pod would get a Job's minutes.
        let now = 100_000;
        let job = |t| EndedPod {
            lifetime_seconds: t,
            owner_kind: Some("Job".into()),
            ended_at: None,
        };
        let mut s = snapshot(now, Vec::new(), &[]);
        s.ended_pods = (0..100).map(|_| job(300)).collect();
        s.ended_pods.extend((0..40).map(|_| EndedPod {
            lifetime_seconds: 20_000,
            owner_kind: Some("ReplicaSet".into()),
            ended_at: None,
        }));
        let service = |age: i64| Pod {
            owner_kind: Some("ReplicaSet".into()),
            created_at: now - age,
            ..Pod::default()
        };
        s.pods = (0..200)
            .map(|_| service(30_000))
            .map(std::sync::Arc::new)
            .collect();
        let life = RemainingLife::from_snapshot(&s, 4.0, 30, false);
        let young_job = Pod {
            owner_kind: Some("Job".into()),
            created_at: now - 60,
            ..Pod::default()
        };
        assert!((life.hours(&young_job) - 240.0 / 3600.0).abs() < 1e-9);
        assert_eq!(life.hours(&service(60)), 4.0);
        // A kind with too few endings of its own falls back to all pods together.
        let other = Pod {
            owner_kind: Some("StatefulSet".into()),
            created_at: now - 60,
            ..Pod::default()
        };
        let pooled = life.hours(&other);
        assert!(pooled > life.hours(&young_job) && pooled < 4.0, "{pooled}");
    }

    #[test]
    fn median_of_remaining_hours() {
        assert_eq!(median_hours(&mut [], 4.0), 4.0);
        assert_eq!(median_hours(&mut [3.0, 1.0, 2.0], 4.0), 2.0);
        assert_eq!(median_hours(&mut [1.0, 2.0], 4.0), 1.5);
    }

    #[test]
    fn a_shrinking_cluster_counts_a_saving_towards_the_longest_life() {
        assert_eq!(horizon_hours(&mut [3.0, 1.0, 2.0], 4.0, 0.0), 2.0);
        assert_eq!(horizon_hours(&mut [3.0, 1.0, 2.0], 4.0, 1.0), 3.0);
        assert_eq!(horizon_hours(&mut [3.0, 1.0, 2.0], 4.0, 0.5), 2.5);
        assert_eq!(horizon_hours(&mut [], 4.0, 1.0), 4.0);
        // Out of range is clamped, never beyond the longest life.
        assert_eq!(horizon_hours(&mut [1.0, 5.0], 4.0, 7.0), 5.0);
    }

    proptest! {
        /// The estimate is a number of hours between 0 and the cap, whatever was observed.
        #[test]
        fn bounded(ended in proptest::collection::vec(-100i64..200_000, 0..80),
                   ages in proptest::collection::vec(-100i64..200_000, 0..40),
                   age in -100i64..300_000, cap in 0.0f64..10.0, window in any::<bool>()) {
            let s = snapshot(300_000, ended, &ages);
            let life = RemainingLife::from_snapshot(&s, cap, 1, window);
            let h = life.hours(&at(300_000 - age));
            prop_assert!(h.is_finite() && h >= 0.0 && h <= cap + 1e-12, "{h}");
        }
    }
}
