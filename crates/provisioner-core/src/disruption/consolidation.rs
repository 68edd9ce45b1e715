//! Underutilized consolidation: delete nodes whose pods fit elsewhere, or replace nodes with
//! cheaper ones, searching much more of the space than Karpenter does.
//!
//! Karpenter (DESIGN.md section 8) evaluates single nodes one by one until the first valid one,
//! and multi-node sets only as prefixes of a list sorted by disruption cost (binary search over
//! the prefix length, at most 100 candidates, at most one replacement). Here:
//!
//! 1. **Every single candidate** is evaluated (in parallel, each on a clone of one base state;
//!    only the removed node's pods are rescheduled): delete, replace with any number of
//!    cheaper nodes, or nothing.
//! 2. **Greedy growth, beyond prefixes** (#1962): for several orderings (Karpenter's
//!    disruption-cost order, emptiest first, most saving per unit of disruption), a set grows
//!    one candidate at a time on an incremental state: a candidate joins when its pods (and
//!    any pods earlier steps had moved onto it) fit on the nodes that stay, and is *skipped*
//!    otherwise, so the set is any subset, not a prefix. Only candidates that can be deleted
//!    on their own are tried (removing more nodes never makes room). No 100-candidate cap
//!    (#2434); the work is bounded by [`super::DisruptionOptions::max_simulations`].
//! 3. **Repacking with replacements** (#1442): the best delete set plus groups of the
//!    emptiest nodes that cannot simply be deleted are simulated together; the scheduler may
//!    open any number of new nodes, and the command is valid when the replacements' worst-case
//!    price keeps it saving money ([`super::replace`]).
//! 4. **Merges chosen by value** ([`super::merge`]): groups of any candidates, grown from the
//!    most wasteful nodes by an estimate of the net value of replacing the whole group with
//!    one node (no simulation), the best few then simulated like phase 3. Under the payback
//!    rule a merge must save much per evicted pod, and those groups are rarely neighbours in
//!    one order.
//!
//! Every multi-node set that is kept is re-simulated from scratch (all its pods at once), so
//! the command's moves are exactly what [`super::validate()`] will re-check; a set whose fresh
//! simulation fails is trimmed from the end until it passes.
//!
//! Commands are ranked by their net value under the payback rule ([`super::payback`]: saving
//! over the expected horizon less evictions and replacement overlap; or, with the rule off,
//! `worst-case saving - disruption_cost_weight * disruption cost`), then by saving, fewer
//! replacements, fewer candidates, and candidate names: a total order, so the decision is the same
//! on any number of threads.

use std::collections::BTreeMap;

use rayon::prelude::*;

use super::DisruptionOptions;
use super::budgets::Budgets;
use super::candidates::Candidate;
use super::command::{
    Alternative, BudgetUse, Command, Destination, Method, MethodReport, PodMove, Rationale,
    Replacement,
};
use super::headroom::{Guard, Room, room_of};
use super::make_command;
use super::replace::{PriceRule, replacements};
use super::session::{Loop, Plan};
use super::sim::Sim;
use crate::model::{DisruptionReason, Node, Pod, Resources, Snapshot};
use crate::optimize::Optimizer;
use crate::packing::LaunchPlanner;
use crate::result::PodRef;

/// A candidate set that yields a valid command.
#[derive(Debug, Clone)]
pub struct Evaluated {
    /// Indices into the eligible candidates, ascending.
    pub members: Vec<usize>,
    /// `None` once it can no longer be the command ([`keep_moves_of_best`]); the winner's
    /// are simulated again if they were let go.
    pub moves: Option<Vec<PodMove>>,
    pub replacements: Vec<Replacement>,
    pub candidates_price: f64,
    pub saving: f64,
    pub worst_saving: f64,
    pub disruption: f64,
    pub score: f64,
    /// The premium that bounded the replacements' options ([`flexibility_premium`]).
    pub premium: Option<f64>,
    /// Which search phase found it.
    pub found_by: &'static str,
    /// Members the budgets do not let go now ([`super::staged`]): the replacements are sized
    /// for them too, and they follow in later commands. Empty for a command done at once.
    pub staged: Vec<usize>,
}

/// What one search knows that decides whether a set may be staged
/// ([`Search::evaluate_staged`]), by candidate.
#[derive(Debug, Default)]
struct Staging {
    /// The candidate runs a pod its workload recreated for a recent eviction: the cluster is
    /// still settling there (a drain's pods land where kube-scheduler puts them, not always
    /// where a plan had room), and a staged merge over it would plan on sand.
    settling: Vec<bool>,
    /// What the candidate saves as a command of its own (worst case; 0 when it has none).
    alone_saving: Vec<f64>,
}

impl Staging {
    fn new(snapshot: &Snapshot, cands: &[&Candidate], alone_saving: Vec<f64>) -> Staging {
        Staging {
            settling: settling(snapshot, cands, i64::MAX),
            alone_saving,
        }
    }
}

/// For each of `cands`, whether it runs a pod its workload recreated for an eviction less
/// than `seconds` ago ([`super::DisruptionOptions::settle_seconds`]); all `false` when
/// `seconds` is 0 or less.
fn settling(snapshot: &Snapshot, cands: &[&Candidate], seconds: i64) -> Vec<bool> {
    if seconds <= 0 || snapshot.recent_evictions.is_empty() {
        return vec![false; cands.len()];
    }
    let recreated = crate::replacements::recreated_within(snapshot, seconds);
    cands
        .iter()
        .map(|c| {
            c.pods
                .iter()
                .any(|&pi| recreated.get(pi).copied().unwrap_or(false))
        })
        .collect()
}

/// Why a candidate set yields no command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    /// Pods fit, but only with replacements that do not save enough.
    NotCheaper,
    /// Some pod has no place, or budgets or PDBs forbid the set.
    Infeasible,
    /// It would leave less free room than recent arrivals needed ([`super::headroom`]).
    Headroom,
}

/// What a single-candidate simulation said.
#[derive(Debug, Clone)]
enum Single {
    Valid(Evaluated),
    Miss(Miss),
}

/// What the later phases read of a candidate's own simulation, once its command (if any)
/// has moved to the found list: keeping every single-node command twice was 22 MB of a
/// 5,000-node pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Alone {
    /// Valid without replacements.
    Deletable,
    /// Valid with replacements.
    Replaced,
    Infeasible,
    /// Another miss (not cheaper, budgets, ...).
    Missed,
}

impl Alone {
    fn of(s: &Single) -> Alone {
        match s {
            Single::Valid(e) if e.replacements.is_empty() => Alone::Deletable,
            Single::Valid(_) => Alone::Replaced,
            Single::Miss(Miss::Infeasible) => Alone::Infeasible,
            Single::Miss(_) => Alone::Missed,
        }
    }
}

/// The consolidation search over one snapshot.
pub struct Search<'s, 'a> {
    pub sim: &'s Sim<'a>,
    pub cands: Vec<&'s Candidate>,
    pub budgets: &'s Budgets,
    pub options: &'s DisruptionOptions,
    /// The headroom rule's room and what each candidate takes of it (`None`: rule off).
    pub room: Option<(Guard, Vec<Room>)>,
    /// The payback rule's floor on a pod's price: the average pod's share of its node's price.
    pub pod_price_floor: f64,
    /// The payback rule's horizon: how long each pod is expected to keep running.
    pub life: super::lifetime::RemainingLife,
}

impl std::fmt::Debug for Search<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Search")
            .field("candidates", &self.cands.len())
            .finish()
    }
}

/// Utilisation of a node: the larger of its CPU and memory request fractions. `requests`:
/// each snapshot pod's, by index.
fn utilisation(snapshot: &Snapshot, requests: &[Resources], c: &Candidate) -> f64 {
    node_utilisation(
        snapshot,
        c,
        c.pods
            .iter()
            .filter_map(|&pi| requests.get(pi))
            .map(|r| (r.cpu_milli, r.memory)),
    )
}

/// [`utilisation`] from the candidate's pods' (CPU, memory) requests.
fn node_utilisation(
    snapshot: &Snapshot,
    c: &Candidate,
    requests: impl Iterator<Item = (i64, i64)>,
) -> f64 {
    request_shares(snapshot, c, requests).map_or(1.0, |(cpu, mem)| cpu.max(mem))
}

/// The shares of the candidate's allocatable CPU and memory that `requests` take (1 for a
/// resource it has none of); `None` when the node is unknown.
fn request_shares(
    snapshot: &Snapshot,
    c: &Candidate,
    requests: impl Iterator<Item = (i64, i64)>,
) -> Option<(f64, f64)> {
    let node = snapshot.nodes.get(c.node)?;
    let (cpu, mem) = requests.fold((0i64, 0i64), |(c, m), (rc, rm)| (c + rc, m + rm));
    let frac = |used: i64, alloc: i64| {
        if alloc > 0 {
            used as f64 / alloc as f64
        } else {
            1.0
        }
    };
    Some((
        frac(cpu, node.allocatable.cpu_milli),
        frac(mem, node.allocatable.memory),
    ))
}

/// The premium bounding a replacement's options ([`super::payback::Payback::flexibility_premium`])
/// for a command on `chosen`: merges, a single node with accelerators its pods do not use, and
/// a single node its pods use less than [`super::payback::Payback::underused_below`] of.
///
/// A single node's replacement usually shrinks it to its pods, and in a cluster where pods
/// come and go every few minutes the room it removes is what the next arrival would have used:
/// on the openb trace, premium-priced single-node replacements doubled the deletions that
/// followed them and the evictions with them (`docs/simulator.md`, round 5). A merge removes
/// fragmentation instead. So does replacing a node whose accelerators (GPUs, ...) none of
/// its pods request: that capacity was bought for pods that have left, and valued at the
/// candidate's price its replacement saves nothing in the worst case, so a GPU node kept
/// running CPU pods for hours (round 11, `constrained` seed 31). So does replacing a node
/// mostly empty in CPU and memory alike: after a wave of batch jobs the node sized for the
/// wave kept the few pods left at ten times their price for hours (round 23). With
/// [`super::payback::Payback::reshape_below`], so does replacing a settled node (its pods'
/// median expected remaining life, `horizon_hours`, at the horizon cap) of the wrong shape
/// for its pods ([`RESHAPE_MISMATCH`]) whose pods fit new nodes at well under its price: a
/// node grown for arrivals that went elsewhere and then filled to its memory by other pods
/// kept idle CPU for twelve hours (round 33). Settled pods are what tells it from round 5's
/// churn: where pods come and go, the room a replacement removes is soon needed again.
/// There the premium applies even when none is configured, at [`SINGLE_NODE_PREMIUM`].
pub(crate) fn flexibility_premium(
    options: &DisruptionOptions,
    snapshot: &Snapshot,
    chosen: &[&Candidate],
    claims: &[crate::result::NewNodeClaim],
    horizon_hours: impl Fn(&super::payback::Payback) -> f64,
) -> Option<f64> {
    let knobs = options.payback.as_ref()?;
    if chosen.len() > 1 {
        return knobs.flexibility_premium;
    }
    let [one] = chosen else {
        return None;
    };
    let underused = || {
        knobs
            .underused_below
            .is_some_and(|below| pods_utilisation(snapshot, one) < below)
    };
    let reshaped = || {
        knobs.reshape_below.is_some_and(|below| {
            !claims.is_empty()
                && super::replace::cheapest_price(claims) < below * one.price
                && shape_mismatch(snapshot, one) >= RESHAPE_MISMATCH
                // At the cap, up to the rounding of the survival integral.
                && horizon_hours(knobs) >= knobs.horizon_cap_hours * (1.0 - 1e-9)
        })
    };
    (idle_accelerator(snapshot, one) || underused() || reshaped())
        .then(|| knobs.flexibility_premium.unwrap_or(SINGLE_NODE_PREMIUM))
}

/// [`utilisation`] from the candidate's pods' own requests.
fn pods_utilisation(snapshot: &Snapshot, c: &Candidate) -> f64 {
    node_utilisation(snapshot, c, pods_requests(snapshot, c))
}

/// The candidate's pods' own (CPU, memory) requests.
fn pods_requests<'a>(
    snapshot: &'a Snapshot,
    c: &'a Candidate,
) -> impl Iterator<Item = (i64, i64)> + 'a {
    c.pods
        .iter()
        .filter_map(|&pi| snapshot.pods.get(pi))
        .map(|p| {
            let r = crate::resources::pod_requests(p);
            (r.cpu_milli, r.memory)
        })
}

/// How far apart the shares of its CPU and of its memory the candidate's pods request are:
/// at [`RESHAPE_MISMATCH`] or more, one resource sits idle behind the other, which the
/// pods' next arrivals of the same shape cannot use either.
fn shape_mismatch(snapshot: &Snapshot, c: &Candidate) -> f64 {
    request_shares(snapshot, c, pods_requests(snapshot, c))
        .map_or(0.0, |(cpu, mem)| (cpu - mem).abs())
}

/// The least [`shape_mismatch`] at which [`super::payback::Payback::reshape_below`] applies.
/// A node shrunk by departures (both resources half used) is left alone: on the benchmark
/// family, where half the pods leave after an hour, replacing those evicted more pods than
/// Karpenter (round 33).
pub(crate) const RESHAPE_MISMATCH: f64 = 0.4;

/// Accelerators: what an instance type is priced for. Other extended resources (KubeVirt's
/// `devices.kubevirt.io/kvm`, hugepages, a FUSE device plugin) sit unused on most nodes of
/// many clusters and say nothing about the node's price.
pub(crate) fn is_accelerator(resource: &str) -> bool {
    const VENDORS: [&str; 6] = [
        "nvidia.com/",
        "amd.com/gpu",
        "gpu.intel.com/",
        "habana.ai/",
        "aws.amazon.com/neuron",
        "google.com/tpu",
    ];
    VENDORS.iter().any(|v| resource.starts_with(v))
        || resource
            .rsplit('/')
            .next()
            .is_some_and(|name| name.to_ascii_lowercase().contains("gpu"))
}

/// The premium for a single node with idle accelerators or under `underused_below` when none
/// is configured: the value round 5 measured for merges.
pub(crate) const SINGLE_NODE_PREMIUM: f64 = 0.25;

/// Whether the candidate's node has an accelerator that none of its pods requests.
fn idle_accelerator(snapshot: &Snapshot, c: &Candidate) -> bool {
    let Some(node) = snapshot.nodes.get(c.node) else {
        return false;
    };
    node.allocatable
        .extended
        .iter()
        .filter(|(k, n)| **n > 0 && is_accelerator(k))
        .any(|(k, _)| {
            c.pods.iter().all(|&pi| {
                snapshot.pods.get(pi).is_none_or(|p| {
                    crate::resources::pod_requests(p)
                        .extended
                        .get(k)
                        .is_none_or(|n| *n <= 0)
                })
            })
        })
}

/// Drops every command that a command on a strict subset of its candidates saves at least as
/// much as (worst case, to 1e-9): it evicts more pods for nothing. The payback rule alone can prefer
/// such a superset, because the median age of the moved pods (its horizon) rises when an old
/// pod joins; found when the merge search proposed "delete `a`" plus a busy old neighbour.
fn undominated(found: Vec<Evaluated>) -> Vec<Evaluated> {
    let subset = |small: &[usize], big: &[usize]| {
        small.len() < big.len() && small.iter().all(|m| big.binary_search(m).is_ok())
    };
    let keep: Vec<bool> = found
        .iter()
        .map(|e| {
            !found
                .iter()
                .any(|f| f.worst_saving >= e.worst_saving - 1e-9 && subset(&f.members, &e.members))
        })
        .collect();
    found
        .into_iter()
        .zip(keep)
        .filter_map(|(e, k)| k.then_some(e))
        .collect()
}

/// What budgets, PDBs and the headroom rule read of a candidate set: nodes per NodePool,
/// evictions per PDB, room the set's pods take.
#[derive(Debug, Clone, Default)]
struct Tally<'c> {
    per_pool: BTreeMap<&'c str, u32>,
    per_pdb: BTreeMap<usize, u32>,
    taken: Room,
}

impl<'c> Tally<'c> {
    /// Adds candidate `m`; `false` if there is no such candidate.
    fn add(&mut self, search: &Search<'c, '_>, m: usize) -> bool {
        let Some(c) = search.cands.get(m) else {
            return false;
        };
        *self.per_pool.entry(c.nodepool.as_str()).or_default() += 1;
        for (pdb, n) in &c.pdb_evictions {
            *self.per_pdb.entry(*pdb).or_default() += n;
        }
        if let Some((_, taken)) = &search.room
            && let Some(r) = taken.get(m)
        {
            self.taken.add_assign(r);
        }
        true
    }
}

/// Lets go of the pod moves of every command but the best so far: only the winner's moves
/// make the command, and a 5,000-node pass finds about 5,000 valid ones (150,000 moves, 40 MB
/// held through the later phases). A winner whose moves were let go (the best so far can
/// still be dominated by a later subset, see [`undominated`]) is simulated again.
fn keep_moves_of_best(found: &mut [Evaluated], names: &dyn Fn(&Evaluated) -> Vec<String>) {
    let best = found
        .iter()
        .enumerate()
        .min_by(|(_, a), (_, b)| better(a, b, names))
        .map(|(i, _)| i);
    for (i, e) in found.iter_mut().enumerate() {
        if Some(i) != best {
            e.moves = None;
        }
    }
}

/// Makes sure the first command of `found` (best first) carries its pod moves: a winner
/// whose moves were let go ([`keep_moves_of_best`]) is simulated again with `evaluate`. A
/// reused single-node result (a session) may no longer hold; it is dropped and the next
/// best is tried.
fn winner_with_moves(
    found: &mut Vec<Evaluated>,
    evaluate: &dyn Fn(&Evaluated) -> Result<Evaluated, Miss>,
) {
    while let Some(first) = found.first()
        && first.moves.is_none()
    {
        match evaluate(first) {
            Ok(e) => found[0] = e,
            Err(_) => {
                found.remove(0);
            }
        }
    }
}

/// Total order on evaluated commands: best first.
fn better(
    a: &Evaluated,
    b: &Evaluated,
    names: &dyn Fn(&Evaluated) -> Vec<String>,
) -> std::cmp::Ordering {
    b.score
        .total_cmp(&a.score)
        .then(b.worst_saving.total_cmp(&a.worst_saving))
        // A delete launches nothing that can fail to come up; and after a staged merge's
        // first step, deleting a follower ties with replacing the half-filled replacement.
        .then(a.replacements.len().cmp(&b.replacements.len()))
        .then(a.members.len().cmp(&b.members.len()))
        .then_with(|| names(a).cmp(&names(b)))
}

impl<'s, 'a> Search<'s, 'a> {
    fn reason(&self) -> DisruptionReason {
        DisruptionReason::Underutilized
    }

    /// [`super::payback::Payback::wait_scale`] for the candidate's NodePool.
    fn wait_scale(&self, c: &Candidate) -> f64 {
        let Some(knobs) = &self.options.payback else {
            return 1.0;
        };
        let wait = self
            .sim
            .snapshot
            .nodepools
            .iter()
            .find(|p| p.name == c.nodepool)
            .and_then(|p| p.disruption.consolidate_after_secs);
        knobs.wait_scale(wait)
    }

    fn min_saving(&self, price: f64) -> f64 {
        self.options
            .min_saving_per_hour
            .max(self.options.min_saving_fraction * price)
            .max(0.0)
    }

    /// Whether budgets (and, with `pdb_per_command`, PDBs) allow disrupting all `members`.
    pub fn allowed(&self, members: &[usize]) -> bool {
        let mut tally = Tally::default();
        members.iter().all(|&m| tally.add(self, m)) && self.tally_allowed(&tally)
    }

    /// Whether budgets and PDBs allow a set with this tally.
    fn tally_allowed(&self, tally: &Tally) -> bool {
        tally
            .per_pool
            .iter()
            .all(|(p, n)| *n <= self.budgets.allowed(p, self.reason()))
            && (!self.options.pdb_per_command
                || tally.per_pdb.iter().all(|(i, n)| {
                    self.sim
                        .snapshot
                        .pdbs
                        .get(*i)
                        .is_some_and(|p| i64::from(*n) <= i64::from(p.disruptions_allowed))
                }))
    }

    /// Whether the headroom rule lets `members` go, their pods on replacements giving `given`
    /// room back.
    fn room_allows(&self, members: &[usize], given: &Room) -> bool {
        let mut tally = Tally::default();
        for &m in members {
            tally.add(self, m);
        }
        self.room_allows_tally(&tally, given)
    }

    fn room_allows_tally(&self, tally: &Tally, given: &Room) -> bool {
        match &self.room {
            Some((guard, _)) => guard.allows(&tally.taken, given),
            None => true,
        }
    }

    fn names(&self, members: &[usize]) -> Vec<String> {
        let mut v: Vec<String> = members
            .iter()
            .filter_map(|m| self.cands.get(*m))
            .map(|c| c.name.clone())
            .collect();
        v.sort();
        v
    }

    /// Scores a simulated set; `Err` says why it is no command.
    fn score(
        &self,
        members: &[usize],
        moves: Vec<PodMove>,
        claims: &[crate::result::NewNodeClaim],
        found_by: &'static str,
    ) -> Result<Evaluated, Miss> {
        let chosen: Vec<&Candidate> = members
            .iter()
            .filter_map(|m| self.cands.get(*m).copied())
            .collect();
        let price: f64 = chosen.iter().map(|c| c.price).sum();
        let scales: Vec<f64> = chosen.iter().map(|c| self.wait_scale(c)).collect();
        let evicted = || {
            chosen
                .iter()
                .zip(&scales)
                .flat_map(|(c, &scale)| self.evicted_from(c, scale))
        };
        // With `pay_for_flexibility`, the replacements' options are priced against the saving
        // the evictions need, not against any saving above the threshold.
        let paying = self
            .options
            .payback
            .as_ref()
            .filter(|k| k.pay_for_flexibility)
            .map(|k| {
                super::payback::value_waited(
                    0.0,
                    0.0,
                    evicted(),
                    &self.life,
                    self.pod_price_floor,
                    k,
                )
                .paying_saving_per_hour(price, k)
            });
        let min_saving = match paying {
            Some(need) => self.min_saving(price).max(need),
            None => self.min_saving(price),
        };
        if !min_saving.is_finite() {
            return Err(Miss::NotCheaper);
        }
        if self
            .options
            .max_replacements
            .is_some_and(|m| claims.len() > m)
        {
            return Err(Miss::NotCheaper);
        }
        let mut given = Room::default();
        for c in claims {
            given.add_assign(&room_of(&c.pod_requests));
        }
        if !self.room_allows(members, &given) {
            return Err(Miss::Headroom);
        }
        let premium = flexibility_premium(self.options, self.sim.snapshot, &chosen, claims, |_| {
            super::payback::horizon_hours(evicted().map(|(p, ..)| p), &self.life)
        });
        let reps = replacements(
            self.sim.snapshot,
            claims,
            &chosen,
            PriceRule::Cheaper {
                candidates_price: price,
                min_saving,
                max_premium: premium,
            },
            self.options.spot_to_spot,
        )
        .map_err(|_| Miss::NotCheaper)?;
        let launch: f64 = reps.iter().map(|r| r.launch.price).sum();
        let worst: f64 = reps.iter().map(|r| r.worst_case_price).sum();
        let worst_saving = price - worst;
        if worst_saving <= 0.0 || worst_saving < min_saving {
            return Err(Miss::NotCheaper);
        }
        let disruption: f64 = chosen.iter().map(|c| c.disruption_cost).sum();
        let score = match &self.options.payback {
            // The worst case already pays (above); ranked by what is expected to launch, so
            // a replacement ranks by what it saves, not by how much flexibility it kept.
            Some(knobs) if knobs.pay_for_flexibility => {
                super::payback::value_waited(
                    price - launch,
                    launch,
                    evicted(),
                    &self.life,
                    self.pod_price_floor,
                    knobs,
                )
                .net
            }
            Some(knobs) => {
                super::payback::value_waited(
                    worst_saving,
                    worst,
                    evicted(),
                    &self.life,
                    self.pod_price_floor,
                    knobs,
                )
                .net
            }
            None => worst_saving - self.options.disruption_cost_weight * disruption,
        };
        if score <= 0.0 {
            return Err(Miss::NotCheaper);
        }
        let mut members = members.to_vec();
        members.sort_unstable();
        Ok(Evaluated {
            members,
            moves: Some(moves),
            replacements: reps,
            candidates_price: price,
            saving: price - launch,
            worst_saving,
            disruption,
            score,
            premium,
            found_by,
            staged: Vec::new(),
        })
    }

    /// Simulates removing `members` all at once from the base state.
    pub fn evaluate(&self, members: &[usize], found_by: &'static str) -> Result<Evaluated, Miss> {
        if members.is_empty() || !self.allowed(members) {
            return Err(Miss::Infeasible);
        }
        let (moves, claims) = self.simulate(members)?;
        self.score(members, moves, &claims, found_by)
    }

    /// [`Self::evaluate`], except that a set the budgets forbid at once may still be a staged
    /// merge ([`super::staged`]): the part they allow goes now, onto the replacement sized for
    /// the whole set. Only the sets with replacements (phases 3 and 4) may be staged.
    ///
    /// A staged merge is a merge onto one new node, of settled nodes, whose followers each pay
    /// back alone, and that saves more than its members could each on their own. Otherwise its
    /// first step can be a like-for-like swap of the dearest member (often the replacement an
    /// earlier step launched) while the follower that carries the saving never goes: found
    /// under the realistic model, a 32-vCPU node replaced by another every few minutes for
    /// weeks (77,000 evictions). The cheap checks run before the simulation.
    fn evaluate_staged(
        &self,
        members: &[usize],
        found_by: &'static str,
        staging: &Staging,
    ) -> Result<Evaluated, Miss> {
        if members.is_empty() || self.allowed(members) {
            return self.evaluate(members, found_by);
        }
        let staged = self.staged_part(members).ok_or(Miss::Infeasible)?;
        if members
            .iter()
            .any(|&i| staging.settling.get(i).copied().unwrap_or(true))
        {
            return Err(Miss::Infeasible);
        }
        if !staged.iter().all(|&f| self.pays_alone(f)) {
            return Err(Miss::NotCheaper);
        }
        let (moves, claims) = self.simulate(members)?;
        if claims.len() != 1 {
            return Err(Miss::Infeasible);
        }
        let mut e = self.score(members, moves, &claims, found_by)?;
        let alone: f64 = members
            .iter()
            .filter_map(|&i| staging.alone_saving.get(i))
            .sum();
        if e.worst_saving <= alone + 1e-9 {
            return Err(Miss::NotCheaper);
        }
        e.staged = staged;
        Ok(e)
    }

    /// Whether deleting candidate `m` on its own pays back under the payback rule (always
    /// without it). A staged merge's follower goes later as a plain delete, judged alone: a
    /// follower whose young pods only the rest of the merge paid for would stay where it is,
    /// and the cluster would keep the larger replacement for fewer pods.
    fn pays_alone(&self, m: usize) -> bool {
        let (Some(knobs), Some(c)) = (&self.options.payback, self.cands.get(m)) else {
            return true;
        };
        let pods = self.evicted_from(c, self.wait_scale(c));
        super::payback::value_waited(c.price, 0.0, pods, &self.life, self.pod_price_floor, knobs)
            .net
            > 0.0
    }

    /// What the payback rule reads of the pods evicted from `c`: each pod, its requests, its
    /// node, the node's price and the wait scale of its NodePool.
    fn evicted_from<'x>(
        &'x self,
        c: &'x Candidate,
        scale: f64,
    ) -> impl Iterator<Item = (&'x Pod, &'x Resources, &'x Node, f64, f64)> + 'x {
        let snap = self.sim.snapshot;
        let requests = &self.sim.base.base.requests;
        let node = snap.nodes.get(c.node);
        c.pods.iter().filter_map(move |&pi| {
            Some((
                &**snap.pods.get(pi)?,
                requests.get(pi)?,
                node?,
                c.price,
                scale,
            ))
        })
    }

    /// The members of a set the budgets forbid at once that wait for a later step, when the
    /// rest may go now ([`super::staged::split`]); `None` when staging is off or nothing may go.
    fn staged_part(&self, members: &[usize]) -> Option<Vec<usize>> {
        let price = |m: usize| self.cands.get(m).map_or(0.0, |c| c.price);
        let name = |m: usize| self.cands.get(m).map_or("", |c| c.name.as_str());
        super::staged::split(
            members,
            self.options.staged_merge_followers,
            &price,
            &name,
            &|now: &[usize]| self.allowed(now),
        )
    }

    /// The simulation part of [`Self::evaluate`] (no budget check, no scoring): what a
    /// [`super::session::ConsolidationSession`] remembers between loops.
    fn simulate(&self, members: &[usize]) -> super::session::SingleOutcome {
        let chosen: Vec<&Candidate> = members
            .iter()
            .filter_map(|m| self.cands.get(*m).copied())
            .collect();
        // Replacements costing the candidates' price less the threshold are rejected anyway.
        let price: f64 = chosen.iter().map(|c| c.price).sum();
        let cap = price - self.min_saving(price);
        let (_, out) =
            self.sim
                .remove_with(&self.sim.base, &chosen, &BTreeMap::new(), None, Some(cap));
        if !out.feasible() {
            return Err(Miss::Infeasible);
        }
        if out.over_price_cap {
            return Err(Miss::NotCheaper);
        }
        Ok((out.moves, out.claims))
    }

    fn singles(&self, session: Option<&mut Loop<'_>>) -> Vec<Single> {
        let Some(session) = session else {
            let eval = |i: usize| match self.evaluate(&[i], "single node") {
                Ok(e) => Single::Valid(e),
                Err(m) => Single::Miss(m),
            };
            return if self.options.parallel {
                (0..self.cands.len()).into_par_iter().map(eval).collect()
            } else {
                (0..self.cands.len()).map(eval).collect()
            };
        };
        // Across loops: reuse unchanged candidates' simulations, simulate the changed ones
        // up to the budget, leave the rest for the next loop (as misses in this one).
        // Candidates the budgets forbid on their own are not planned (nor simulated).
        let names: Vec<&str> = self.cands.iter().map(|c| c.name.as_str()).collect();
        let allowed: Vec<usize> = (0..names.len()).filter(|&i| self.allowed(&[i])).collect();
        let planned: Vec<&str> = allowed
            .iter()
            .filter_map(|&i| names.get(i).copied())
            .collect();
        let mut plans: Vec<Plan> = (0..names.len()).map(|_| Plan::Defer).collect();
        for (i, p) in allowed.iter().zip(session.plan(&planned)) {
            if let Some(slot) = plans.get_mut(*i) {
                *slot = p;
            }
        }
        let run = |(i, p): (usize, &Plan)| -> Option<super::session::SingleOutcome> {
            match p {
                Plan::Simulate => Some(self.simulate(&[i])),
                _ => None,
            }
        };
        let fresh: Vec<Option<super::session::SingleOutcome>> = if self.options.parallel {
            plans.par_iter().enumerate().map(run).collect()
        } else {
            plans.iter().enumerate().map(run).collect()
        };
        let mut out = Vec::with_capacity(plans.len());
        for (i, (plan, fresh)) in plans.into_iter().zip(fresh).enumerate() {
            let outcome = match (plan, fresh) {
                (_, Some(o)) => {
                    if let Some(n) = names.get(i) {
                        session.record(n, o.clone());
                    }
                    o
                }
                (Plan::Reuse(o), None) => o,
                _ => Err(Miss::Infeasible),
            };
            let single = if self.allowed(&[i]) {
                outcome.and_then(|(moves, claims)| self.score(&[i], moves, &claims, "single node"))
            } else {
                Err(Miss::Infeasible)
            };
            out.push(match single {
                Ok(e) => Single::Valid(e),
                Err(m) => Single::Miss(m),
            });
        }
        out
    }

    /// Grows a delete-only set along `order`, skipping candidates that do not fit.
    fn greedy(&self, order: &[usize], max_sims: usize) -> Vec<usize> {
        let mut state = self.sim.base.clone();
        let mut members: Vec<usize> = Vec::new();
        // What budgets, PDBs and the headroom rule read of `members`, kept as it grows (a
        // recount per step made the growth quadratic in the set's size).
        let mut tally = Tally::default();
        let mut origin: BTreeMap<PodRef, String> = BTreeMap::new();
        let mut sims = 0usize;
        let mut misses = 0usize;
        for &i in order {
            if sims >= max_sims || misses >= self.options.greedy_patience {
                break;
            }
            let mut trial_tally = tally.clone();
            if !trial_tally.add(self, i)
                || !self.tally_allowed(&trial_tally)
                || !self.room_allows_tally(&trial_tally, &Room::default())
            {
                continue;
            }
            let Some(c) = self.cands.get(i) else { continue };
            sims += 1;
            let (trial, out) = self.sim.remove(&state, &[c], &origin);
            if out.feasible() && out.claims.is_empty() {
                misses = 0;
                tally = trial_tally;
                state = trial;
                // The next step clones this state: keep its topology overlays empty.
                state.fold_counts();
                members.push(i);
                for m in out.moves {
                    origin.entry(m.pod).or_insert(m.from);
                }
            } else {
                misses += 1;
            }
        }
        members
    }

    /// A fresh simulation of a grown set; trims it from the end until one passes.
    fn settle(
        &self,
        mut members: Vec<usize>,
        found_by: &'static str,
        tries: usize,
    ) -> Option<Evaluated> {
        for _ in 0..tries {
            if members.len() < 2 {
                return None;
            }
            if let Ok(e) = self.evaluate(&members, found_by) {
                return Some(e);
            }
            // Drop the last quarter (at least one): a fresh, all-at-once packing may differ
            // from the incremental one near the end of the set.
            let keep = members.len() - (members.len() / 4).max(1);
            members.truncate(keep);
        }
        None
    }

    /// The merge search's groups ([`super::merge::groups`]) over the candidates whose pods
    /// can be placed at all.
    /// `stage`: groups the budgets allow only as a staged merge count too.
    fn merge_groups(&self, singles: &[Alone], stage: bool) -> Vec<(Vec<usize>, f64)> {
        use super::merge::{Knobs, Member, Shape, Valuation, groups, sort_shapes};
        if self.options.merge_groups == 0 {
            return Vec::new();
        }
        let snap = self.sim.snapshot;
        let pool: Vec<usize> = singles
            .iter()
            .enumerate()
            .filter(|(_, s)| **s != Alone::Infeasible)
            .map(|(i, _)| i)
            .collect();
        if pool.len() < 2 {
            return Vec::new();
        }
        let requests = &self.sim.base.base.requests;
        // Daemonset pods a new node carries: the largest set on any candidate. The base state
        // lists each node's pods, daemons included (a candidate's own list leaves them out).
        let daemons: Vec<Resources> = self
            .cands
            .iter()
            .map(|c| {
                let mut d = Resources::default();
                let on_node = self.sim.base.nodes.get(c.node).map(|n| n.pods.as_slice());
                for slot in on_node.unwrap_or_default() {
                    if let crate::state::PodSlot::Bound(pi) = *slot
                        && snap
                            .pods
                            .get(pi)
                            .is_some_and(|p| super::candidates::is_daemon(p))
                        && let Some(r) = requests.get(pi)
                    {
                        d.add_assign(r);
                    }
                }
                d
            })
            .collect();
        let daemon_overhead = crate::model::Resources::elementwise_max(daemons.iter());
        let members: Vec<Member> = pool
            .iter()
            .filter_map(|&i| {
                let c = self.cands.get(i)?;
                let node = snap.nodes.get(c.node)?;
                let scale = self.wait_scale(c);
                let mut m = Member {
                    price: c.price,
                    disruption_cost: c.disruption_cost,
                    ..Member::default()
                };
                for (p, r) in c
                    .pods
                    .iter()
                    .filter_map(|&pi| Some((snap.pods.get(pi)?, requests.get(pi)?)))
                {
                    m.need.add_assign(r);
                    m.remaining.push(self.life.hours(p));
                    if let Some(k) = &self.options.payback {
                        m.eviction += super::payback::pod_eviction_value(
                            p,
                            r,
                            node,
                            c.price,
                            self.pod_price_floor,
                            k,
                            self.life.now(),
                            scale,
                        );
                    }
                }
                Some(m)
            })
            .collect();
        if members.len() != pool.len() {
            return Vec::new();
        }
        let mut shapes: Vec<Shape> = snap
            .instance_types
            .iter()
            .filter_map(|t| {
                let worst = t
                    .offerings
                    .iter()
                    .filter(|o| o.available)
                    .map(|o| o.price)
                    .fold(None, |w: Option<f64>, p| Some(w.map_or(p, |w| w.max(p))))?;
                Some(Shape {
                    allocatable: t.capacity.sub(&t.overhead),
                    price: worst,
                })
            })
            .collect();
        sort_shapes(&mut shapes);
        let knobs = Knobs {
            daemon_overhead,
            valuation: match &self.options.payback {
                Some(p) => Valuation::Payback {
                    horizon_cap_hours: self.life.cap_hours(),
                    replacement_ready_seconds: p.replacement_ready_seconds,
                    shrink: self.life.shrink(),
                },
                None => Valuation::Weighted {
                    weight: self.options.disruption_cost_weight,
                },
            },
            pool: 64,
            seeds: 16,
            max_group: 16,
        };
        let allowed = |g: &[usize]| {
            let ms: Vec<usize> = g.iter().filter_map(|&i| pool.get(i).copied()).collect();
            let mut given = Room::default();
            for m in g.iter().filter_map(|&i| members.get(i)) {
                given.add_assign(&room_of(&m.need));
            }
            (self.allowed(&ms) || (stage && self.staged_part(&ms).is_some()))
                && self.room_allows(&ms, &given)
        };
        groups(
            &members,
            &shapes,
            &knobs,
            self.options.merge_groups,
            &allowed,
        )
        .into_iter()
        .map(|(g, v)| {
            let mut ms: Vec<usize> = g.iter().filter_map(|&i| pool.get(i).copied()).collect();
            ms.sort_unstable();
            (ms, v)
        })
        .collect()
    }

    /// Runs every phase; returns all valid commands (best first) and the number of sets
    /// evaluated.
    pub fn run(&self) -> (Vec<Evaluated>, usize) {
        self.run_in(None)
    }

    /// [`Self::run`], reusing a session's single-node simulations
    /// ([`super::session`]).
    pub(crate) fn run_in(&self, session: Option<&mut Loop<'_>>) -> (Vec<Evaluated>, usize) {
        let start_runs = self.sim.runs();
        let snapshot = self.sim.snapshot;
        // Reused single-node simulations count as evaluated sets, so a loop that reuses
        // reports the same as one that simulated them again.
        let mut session = session;
        let singles = self.singles(session.as_deref_mut());
        let reused = session.map_or(0, |s| s.report.reused);
        let alone: Vec<Alone> = singles.iter().map(Alone::of).collect();
        let mut found: Vec<Evaluated> = singles
            .into_iter()
            .filter_map(|s| match s {
                Single::Valid(e) => Some(e),
                Single::Miss(_) => None,
            })
            .collect();
        let singles = alone;
        // What each candidate saves as a command of its own (worst case; 0 when it has none).
        let mut alone_saving = vec![0.0f64; self.cands.len()];
        for e in &found {
            if let [m] = e.members[..]
                && let Some(s) = alone_saving.get_mut(m)
            {
                *s = e.worst_saving.max(0.0);
            }
        }
        keep_moves_of_best(&mut found, &|e| self.names(&e.members));

        // Phase 2: greedy growth over delete-only candidates, several orderings.
        let deletable: Vec<usize> = singles
            .iter()
            .enumerate()
            .filter(|(_, s)| **s == Alone::Deletable)
            .map(|(i, _)| i)
            .collect();
        let util: Vec<f64> = self
            .cands
            .iter()
            .map(|c| utilisation(snapshot, &self.sim.base.base.requests, c))
            .collect();
        let name = |i: usize| self.cands.get(i).map_or("", |c| c.name.as_str());
        let cost = |i: usize| self.cands.get(i).map_or(0.0, |c| c.disruption_cost);
        let price = |i: usize| self.cands.get(i).map_or(0.0, |c| c.price);
        let u = |i: usize| util.get(i).copied().unwrap_or(1.0);
        // Two orderings: most saving per unit of disruption first (what the score rewards),
        // and emptiest first (what packs best). Karpenter's disruption-cost order was a third
        // one; on the benchmark cluster it did not win and cost a third of the search time.
        let mut orders: Vec<(&'static str, Vec<usize>)> = Vec::new();
        let mut by_ratio = deletable.clone();
        let ratio = |i: usize| price(i) / (cost(i).max(0.0) + 1.0);
        by_ratio.sort_by(|&a, &b| ratio(b).total_cmp(&ratio(a)).then(name(a).cmp(name(b))));
        orders.push(("greedy, saving per disruption", by_ratio));
        let mut by_util = deletable.clone();
        by_util.sort_by(|&a, &b| u(a).total_cmp(&u(b)).then(name(a).cmp(name(b))));
        orders.push(("greedy, emptiest first", by_util));
        let share = (self
            .options
            .max_simulations
            .saturating_sub(self.cands.len())
            / (orders.len() + 1))
            .max(1);
        let grow =
            |(label, order): &(&'static str, Vec<usize>)| (self.greedy(order, share), *label);
        let grown: Vec<(Vec<usize>, &'static str)> = if self.options.parallel {
            orders.par_iter().map(grow).collect()
        } else {
            orders.iter().map(grow).collect()
        };
        let mut seen: Vec<Vec<usize>> = Vec::new();
        let settled: Vec<Option<Evaluated>> = {
            let mut uniq = Vec::new();
            for (mut m, label) in grown {
                m.sort_unstable();
                if !seen.contains(&m) {
                    seen.push(m.clone());
                    uniq.push((m, label));
                }
            }
            let settle = |(m, label): &(Vec<usize>, &'static str)| self.settle(m.clone(), label, 6);
            if self.options.parallel {
                uniq.par_iter().map(settle).collect()
            } else {
                uniq.iter().map(settle).collect()
            }
        };
        let best_delete: Vec<usize> = settled
            .iter()
            .flatten()
            .min_by(|a, b| better(a, b, &|e| self.names(&e.members)))
            .map(|e| e.members.clone())
            .unwrap_or_default();
        found.extend(settled.into_iter().flatten());
        keep_moves_of_best(&mut found, &|e| self.names(&e.members));

        // Phase 3: repack with replacements: the emptiest nodes that cannot simply go, in
        // growing groups, alone and on top of the best delete set.
        let mut repack: Vec<usize> = singles
            .iter()
            .enumerate()
            .filter(|(i, s)| !deletable.contains(i) && **s != Alone::Infeasible)
            .map(|(i, _)| i)
            .collect();
        repack.sort_by(|&a, &b| u(a).total_cmp(&u(b)).then(name(a).cmp(name(b))));
        let mut sizes = Vec::new();
        let mut k = 2usize;
        while k <= repack.len() {
            sizes.push(k);
            k = if k < 4 { k + 1 } else { k * 2 };
        }
        if repack.len() >= 2 && sizes.last() != Some(&repack.len()) {
            sizes.push(repack.len());
        }
        let mut sets: Vec<(Vec<usize>, &'static str)> = Vec::new();
        for &k in &sizes {
            let Some(group) = repack.get(..k) else {
                continue;
            };
            sets.push((group.to_vec(), "repack emptiest with replacements"));
            if !best_delete.is_empty() {
                let mut s = best_delete.clone();
                s.extend_from_slice(group);
                sets.push((s, "best delete set + repack with replacements"));
            }
        }
        // Phase 4: merges chosen by their estimated net value (saving per evicted pod), not
        // by position in one order ([`super::merge`]).
        // Staging ([`super::staged`]) is a last resort: while some node can simply go, the
        // next loops take the deletes first. Otherwise a merge's first step would pull back in
        // the replacement an earlier step launched (the dearest node, so the first to go)
        // instead of letting the followers go onto it.
        let stage = deletable.is_empty() && self.options.staged_merge_followers > 0;
        let staging = if stage {
            Staging::new(snapshot, &self.cands, alone_saving)
        } else {
            Staging::default()
        };
        for (m, _) in self.merge_groups(&singles, stage) {
            if !sets.iter().any(|(s, _)| *s == m) {
                sets.push((m, "merge onto one node, best estimated net value"));
            }
        }
        let budget_left = self
            .options
            .max_simulations
            .saturating_sub(self.sim.runs() - start_runs);
        sets.truncate(budget_left);
        let eval = |(m, label): &(Vec<usize>, &'static str)| {
            if stage {
                self.evaluate_staged(m, label, &staging).ok()
            } else {
                self.evaluate(m, label).ok()
            }
        };
        let repacked: Vec<Option<Evaluated>> = if self.options.parallel {
            sets.par_iter().map(eval).collect()
        } else {
            sets.iter().map(eval).collect()
        };
        found.extend(repacked.into_iter().flatten());

        found.sort_by(|a, b| better(a, b, &|e| self.names(&e.members)));
        found.dedup_by(|a, b| a.members == b.members);
        let mut found = undominated(found);
        keep_moves_of_best(&mut found, &|e| self.names(&e.members));
        winner_with_moves(&mut found, &|e| {
            if e.staged.is_empty() {
                self.evaluate(&e.members, e.found_by)
            } else {
                self.evaluate_staged(&e.members, e.found_by, &staging)
            }
        });
        (found, self.sim.runs() - start_runs + reused)
    }
}

/// Runs consolidation on the eligible candidates.
pub fn consolidation(
    sim: &Sim<'_>,
    all: &[Candidate],
    budgets: &Budgets,
    options: &DisruptionOptions,
) -> (Option<Command>, MethodReport) {
    consolidation_in(sim, all, budgets, options, None)
}

/// [`consolidation`] within a loop of a [`super::session::ConsolidationSession`].
pub(crate) fn consolidation_in(
    sim: &Sim<'_>,
    all: &[Candidate],
    budgets: &Budgets,
    options: &DisruptionOptions,
    session: Option<&mut Loop<'_>>,
) -> (Option<Command>, MethodReport) {
    let eligible: Vec<&Candidate> = all
        .iter()
        .filter(|c| c.for_consolidation() && !c.empty)
        .collect();
    let n_eligible = eligible.len();
    let settling = settling(sim.snapshot, &eligible, options.settle_seconds);
    let n_settling = settling.iter().filter(|s| **s).count();
    let cands: Vec<&Candidate> = eligible
        .into_iter()
        .zip(settling)
        .filter(|(c, settling)| {
            !settling && budgets.allowed(&c.nodepool, DisruptionReason::Underutilized) > 0
        })
        .map(|(c, _)| c)
        .collect();
    let mut report = MethodReport {
        method: Method::Consolidation,
        eligible: n_eligible,
        within_budget: cands.len(),
        sets_evaluated: 0,
        produced_command: false,
        note: None,
    };
    if cands.is_empty() {
        report.note = Some(if n_eligible == 0 {
            "no underutilized candidates".into()
        } else if n_settling == n_eligible {
            format!(
                "every candidate runs a pod recreated for an eviction less than {} s ago",
                options.settle_seconds
            )
        } else {
            "budgets allow no Underutilized disruption".into()
        });
        return (None, report);
    }
    let room = options
        .headroom
        .as_ref()
        .map(|h| Guard::with_taken(sim.snapshot, &sim.base.base.requests, h, &cands));
    let search = Search {
        sim,
        cands,
        budgets,
        options,
        room,
        pod_price_floor: if options.payback.is_some() {
            super::payback::average_pod_price(sim.snapshot, &sim.base.base.requests)
        } else {
            0.0
        },
        life: remaining_life(sim.snapshot, options),
    };
    let (mut found, sets) = search.run_in(session);
    report.sets_evaluated = sets;
    let Some(first) = found.first_mut() else {
        report.note = Some("no candidate set saves money with every pod placed".into());
        return (None, report);
    };
    // The moves move to the command; the rest of the entry is small.
    let moves = first.moves.take();
    let mut best = Evaluated {
        moves,
        ..first.clone()
    };
    let mut planner: Option<String> = None;
    let mut lower_bound: Option<f64> = None;
    let mut optimised = String::new();
    if options.optimize_replacements && !best.replacements.is_empty() {
        let opt = Optimizer::new(options.optimizer.clone());
        let chosen: Vec<&Candidate> = best
            .members
            .iter()
            .filter_map(|m| search.cands.get(*m).copied())
            .collect();
        let (_, out) = sim.remove_with(&sim.base, &chosen, &BTreeMap::new(), Some(&opt), None);
        lower_bound = out.lower_bound;
        if out.feasible()
            && let Ok(e) = search.score(&best.members, out.moves, &out.claims, best.found_by)
            && e.worst_saving > best.worst_saving + 1e-9
        {
            let mut e = e;
            e.staged = best.staged.clone();
            optimised = format!(
                "; the optimiser re-planned the replacements: {:.4}/h -> {:.4}/h worst case",
                best.candidates_price - best.worst_saving,
                e.candidates_price - e.worst_saving
            );
            best = e;
            planner = Some(opt.name().to_string());
        }
    }
    let mut moves = best.moves.take().unwrap_or_default();
    let best = &best;
    let runner_up = found.get(1).map(|e| Alternative {
        candidates: search.names(&e.members),
        replacements: e.replacements.len(),
        saving_per_hour: e.saving,
        disruption_cost: e.disruption,
        score: e.score,
    });
    // A staged merge drains only what goes now; its followers' pods stay where they are.
    let chosen: Vec<&Candidate> = best
        .members
        .iter()
        .filter(|m| !best.staged.contains(m))
        .filter_map(|m| search.cands.get(*m).copied())
        .collect();
    let followers: Vec<&Candidate> = best
        .staged
        .iter()
        .filter_map(|m| search.cands.get(*m).copied())
        .collect();
    if !followers.is_empty() {
        moves.retain(|m| chosen.iter().any(|c| c.name == m.from));
    }
    let mut per_pool: BTreeMap<&str, u32> = BTreeMap::new();
    for c in &chosen {
        *per_pool.entry(c.nodepool.as_str()).or_default() += 1;
    }
    let budget = per_pool
        .iter()
        .map(|(p, n)| BudgetUse {
            nodepool: p.to_string(),
            reason: DisruptionReason::Underutilized,
            nodes: *n,
            allowed: budgets.allowed(p, DisruptionReason::Underutilized),
        })
        .collect();
    let what = if best.replacements.is_empty() {
        format!("delete {} node(s)", chosen.len())
    } else {
        format!(
            "replace {} node(s) with {}",
            chosen.len(),
            best.replacements.len()
        )
    } + &if followers.is_empty() {
        String::new()
    } else {
        let mut names: Vec<&str> = followers.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        format!(
            ", the first step of a merge of {} node(s) the budgets allow only in steps ({} follow: {})",
            chosen.len() + followers.len(),
            followers.len(),
            names.join(", ")
        )
    };
    let vs = match &runner_up {
        Some(r) => format!(
            "; runner-up {} node(s) saving {:.4}/h (score {:.4})",
            r.candidates.len(),
            r.saving_per_hour,
            r.score
        ),
        None => String::new(),
    };
    let summary = format!(
        "{what}: saves {:.4}/h ({:.4}/h worst case) for disruption cost {:.2}; best of {} valid command(s) among {sets} simulated set(s), found by {}{vs}",
        best.saving,
        best.worst_saving,
        best.disruption,
        found.len(),
        best.found_by
    ) + &optimised;
    let cmd = make_command(
        Method::Consolidation,
        &chosen,
        best.replacements.clone(),
        moves,
        budget,
        Rationale {
            score: best.score,
            sets_evaluated: sets,
            valid_commands: found.len(),
            runner_up,
            summary,
        },
    );
    let mut cmd = if followers.is_empty() {
        cmd
    } else {
        cmd.with_staged(followers.iter().map(|c| super::candidate_node(c)).collect())
    };
    cmd.replacements_lower_bound = lower_bound;
    cmd.replacement_planner = planner;
    cmd.replacement_premium = best.premium;
    debug_assert!(cmd.moves.iter().all(|m| !matches!(&m.to, Destination::Existing(n) if cmd.candidates.iter().any(|c| &c.name == n))));
    report.produced_command = true;
    (Some(cmd), report)
}

/// The payback rule's remaining-life estimate for this snapshot (Lindy with the rule off: it
/// is then never read).
pub(super) fn remaining_life(
    snapshot: &Snapshot,
    options: &DisruptionOptions,
) -> super::lifetime::RemainingLife {
    match &options.payback {
        Some(k) => super::lifetime::RemainingLife::from_snapshot(
            snapshot,
            k.cap_hours(snapshot),
            k.min_ended_lifetimes,
            k.window_prior,
        )
        .with_shrink(k.shrink(snapshot))
        .with_floor(k.lindy_floor_hours),
        None => super::lifetime::RemainingLife::lindy(snapshot.now, 0.0),
    }
}

#[cfg(test)]
mod keep_moves_tests {
    use super::*;
    use crate::result::PodRef;

    fn found(members: Vec<usize>, score: f64) -> Evaluated {
        let pod = PodRef {
            namespace: "ns".into(),
            name: format!("p{}", members.first().copied().unwrap_or(0)),
        };
        Evaluated {
            members,
            moves: Some(vec![PodMove {
                from: "n".into(),
                pod,
                to: Destination::Existing("m".into()),
            }]),
            replacements: Vec::new(),
            candidates_price: 1.0,
            saving: score,
            worst_saving: score,
            disruption: 0.0,
            score,
            premium: None,
            found_by: "test",
            staged: Vec::new(),
        }
    }

    #[test]
    fn only_the_best_keeps_its_moves() {
        let mut all = vec![
            found(vec![0], 1.0),
            found(vec![1], 3.0),
            found(vec![2], 2.0),
        ];
        keep_moves_of_best(&mut all, &|e| {
            e.members.iter().map(|m| m.to_string()).collect()
        });
        let kept: Vec<bool> = all.iter().map(|e| e.moves.is_some()).collect();
        assert_eq!(kept, vec![false, true, false]);
    }

    /// The best-so-far can be dropped as dominated after the others let their moves go; the
    /// new winner is then simulated again, and one that no longer holds gives way.
    #[test]
    fn a_winner_without_moves_is_simulated_again() {
        let mut all = vec![
            found(vec![3], 3.0),
            found(vec![1], 2.0),
            found(vec![2], 1.0),
        ];
        for e in &mut all {
            e.moves = None;
        }
        let calls = std::cell::RefCell::new(Vec::new());
        winner_with_moves(&mut all, &|e| {
            calls.borrow_mut().push(e.members.clone());
            if e.members == vec![3] {
                // It no longer holds (a reused result in a session).
                Err(Miss::Infeasible)
            } else {
                Ok(Evaluated {
                    moves: Some(Vec::new()),
                    ..e.clone()
                })
            }
        });
        assert_eq!(calls.into_inner(), vec![vec![3], vec![1]]);
        let members: Vec<Vec<usize>> = all.iter().map(|e| e.members.clone()).collect();
        assert_eq!(members, vec![vec![1], vec![2]]);
        assert!(all[0].moves.is_some());
        assert!(all[1].moves.is_none());
        // A winner that kept its moves is not simulated again.
        winner_with_moves(&mut all, &|_| panic!("simulated again"));
    }
}
