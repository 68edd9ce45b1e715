//! The "remove these nodes: where do their pods go?" simulation, on the shared scheduler.
//!
//! One [`ClusterState`] is built per decision. Before any candidate is removed, the pods
//! that already need a home (pending pods, and pods of nodes being deleted) are scheduled onto
//! it, so a consolidation never plans to use room those pods are about to take (Karpenter
//! includes them in every simulation for the same reason; doing it once is cheaper and gives
//! the same answer for the existing nodes). Each evaluation clones that state, removes the
//! candidates and runs [`schedule_on`] with their pods: placements on the remaining nodes and
//! new NodeClaims (the replacements) come back exactly as provisioning would decide them, with
//! every constraint the scheduler checks.

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::candidates::{Candidate, is_reschedulable};
use super::command::{Destination, PodMove};
use crate::model::{Pod, Snapshot};
use crate::packing::LaunchPlanner;
use crate::result::{NewNodeClaim, PodRef, Unschedulable};
use crate::scheduler::{SchedulingOptions, distinct_terms, schedule_evicted, schedule_on};
use crate::state::{ClusterState, Evicted, PodSlot, SlotPod};

/// Where the candidates' pods went in one simulation.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// A lower bound on the replacements' cost, when the planner proves one.
    pub lower_bound: Option<f64>,
    pub moves: Vec<PodMove>,
    pub claims: Vec<NewNodeClaim>,
    pub unschedulable: Vec<Unschedulable>,
    /// The replacements would cost at least the price cap asked for; `claims` is empty.
    pub over_price_cap: bool,
}

impl Outcome {
    pub fn feasible(&self) -> bool {
        self.unschedulable.is_empty()
    }
}

/// The base state and a counter of simulations run.
#[derive(Debug)]
pub struct Sim<'a> {
    pub snapshot: &'a Snapshot,
    pub base: ClusterState,
    pub sched: SchedulingOptions,
    runs: AtomicUsize,
    /// Nodes no pod may move to (in flight or not initialized), found once, not per simulation.
    uninitialized: BTreeSet<&'a str>,
    /// Tests: every simulation starts from a copy sharing nothing (the reference path).
    #[cfg(test)]
    unshared: bool,
}

#[cfg(test)]
thread_local! {
    /// Tests: Sims built on this thread run the unshared reference path.
    pub(crate) static UNSHARED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl<'a> Sim<'a> {
    /// Builds the base state and reserves room for pods that already need a home.
    pub fn new(snapshot: &'a Snapshot, sched: SchedulingOptions) -> Sim<'a> {
        Sim::build(snapshot, ClusterState::new(snapshot), sched)
    }

    /// [`Sim::new`] on a shared snapshot: the base state refers to it instead of copying it.
    pub fn shared(snapshot: &'a Arc<Snapshot>, sched: SchedulingOptions) -> Sim<'a> {
        Sim::build(
            snapshot,
            ClusterState::from_shared(Arc::clone(snapshot)),
            sched,
        )
    }

    fn build(snapshot: &'a Snapshot, mut base: ClusterState, sched: SchedulingOptions) -> Sim<'a> {
        let deleting: Vec<&str> = snapshot
            .nodes
            .iter()
            .filter(|n| n.marked_for_deletion)
            .map(|n| n.name.as_str())
            .collect();
        let mut homeless: Vec<Pod> = snapshot
            .pods
            .iter()
            .filter(|p| is_reschedulable(p))
            .filter(|p| match p.node_name.as_deref() {
                None => true,
                Some(n) => deleting.contains(&n),
            })
            .map(|p| Pod {
                node_name: None,
                ..Pod::clone(p)
            })
            .collect();
        homeless.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        if !homeless.is_empty() {
            // Their new nodes are the provisioner's business; only their placements on
            // existing nodes matter here.
            let _ = schedule_on(&mut base, &homeless, &sched);
        }
        // Create every topology group the bound pods take part in once, here: the scheduler
        // creates a group on first use by counting over the whole cluster, and on a clone
        // that work would be redone by every simulation.
        let terms = distinct_terms(
            snapshot
                .pods
                .iter()
                .filter(|p| p.node_name.is_some() && is_reschedulable(p))
                .map(|p| &**p),
            &snapshot.namespaces,
        );
        base.create_groups(&terms);
        // Every simulation clones this state.
        base.fold_counts();
        let uninitialized = snapshot
            .nodes
            .iter()
            .filter(|n| n.in_flight || !n.initialized)
            .map(|n| n.name.as_str())
            .collect();
        Sim {
            snapshot,
            base,
            sched,
            runs: AtomicUsize::new(0),
            uninitialized,
            #[cfg(test)]
            unshared: UNSHARED.with(std::cell::Cell::get),
        }
    }

    /// Takes `names` out of the base state so no simulation moves a pod onto them (nodes
    /// about to go: [`super::candidates::awaiting_emptiness`]). Their pods, if any, are not
    /// placed anywhere: only nodes without reschedulable pods belong here.
    pub fn without_nodes(mut self, names: &[&str]) -> Self {
        if !names.is_empty() {
            let _ = self.base.evict_nodes(names);
            self.base.fold_counts();
        }
        self
    }

    /// Simulations run so far.
    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::Relaxed)
    }

    /// Removes `candidates` from a copy of `from` and schedules their pods (and any pods an
    /// earlier step had put on them). `origin` maps pods to the candidate they started on, for
    /// pods moved before (incremental search); others start where the snapshot has them.
    pub fn remove(
        &self,
        from: &ClusterState,
        candidates: &[&Candidate],
        origin: &BTreeMap<PodRef, String>,
    ) -> (ClusterState, Outcome) {
        self.remove_with(from, candidates, origin, None, None)
    }

    /// [`Sim::remove`] with another launch planner for the replacements (the optimiser), and
    /// optionally a price the replacements must stay under ([`crate::schedule_capped`]).
    pub fn remove_with(
        &self,
        from: &ClusterState,
        candidates: &[&Candidate],
        origin: &BTreeMap<PodRef, String>,
        planner: Option<&dyn LaunchPlanner>,
        price_cap: Option<f64>,
    ) -> (ClusterState, Outcome) {
        self.runs.fetch_add(1, Ordering::Relaxed);
        #[cfg(test)]
        let mut state = if self.unshared {
            from.unshared()
        } else {
            from.clone()
        };
        #[cfg(not(test))]
        let mut state = from.clone();
        let names: Vec<&str> = candidates.iter().map(|c| c.name.as_str()).collect();
        // The evicted pods stay where the state holds them (not copied out and in again).
        let base = Arc::clone(&state.base);
        let mut evicted: Vec<(SlotPod, Evicted)> = state
            .evict_nodes(&names)
            .into_iter()
            .filter_map(|e| Some((state.shared_pod(e.slot)?, e)))
            .filter(|(p, _)| is_reschedulable(p.borrow()))
            .collect();
        evicted.sort_by(|(a, _), (b, _)| {
            let (a, b): (&Pod, &Pod) = (a.borrow(), b.borrow());
            (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name))
        });
        let slots: Vec<PodSlot> = evicted.iter().map(|(_, e)| e.slot).collect();
        let left_nodes: Vec<usize> = evicted.iter().map(|(_, e)| e.node).collect();
        let pods: Vec<SlotPod> = evicted.into_iter().map(|(p, _)| p).collect();
        let planner = planner.unwrap_or_else(|| self.sched.strategy.planner());
        let result = schedule_evicted(&mut state, &pods, &slots, &self.sched, planner, price_cap);
        let left = |r: &PodRef| {
            let i = pods
                .binary_search_by(|p| {
                    let p: &Pod = p.borrow();
                    (p.namespace.as_str(), p.name.as_str())
                        .cmp(&(r.namespace.as_str(), r.name.as_str()))
                })
                .ok()?;
            let n = base.snapshot.nodes.get(*left_nodes.get(i)?)?;
            Some(n.name.clone())
        };
        let origin_of = |r: &PodRef| {
            origin
                .get(r)
                .cloned()
                .or_else(|| left(r))
                .unwrap_or_default()
        };
        // As Karpenter: a pod may only move to a node that is initialized, since the
        // candidates drain as soon as the replacements are; one placed on an in-flight or
        // uninitialized node would wait for it, so the simulation fails for that pod.
        let mut unschedulable = result.unschedulable;
        let uninitialized = &self.uninitialized;
        let (existing, waiting): (Vec<_>, Vec<_>) = result
            .existing_placements
            .into_iter()
            .partition(|p| !uninitialized.contains(p.node.as_str()));
        for p in waiting {
            unschedulable.push(Unschedulable {
                reason: format!("would schedule against uninitialized node {}", p.node),
                pod: p.pod,
            });
        }
        // Moved out of the result, not copied: three strings per pod were a tenth of the
        // allocations of a simulation.
        let mut moves: Vec<PodMove> = existing
            .into_iter()
            .map(|p| PodMove {
                from: origin_of(&p.pod),
                pod: p.pod,
                to: Destination::Existing(p.node),
            })
            .collect();
        for c in &result.new_node_claims {
            for p in &c.pods {
                moves.push(PodMove {
                    from: origin_of(p),
                    pod: p.clone(),
                    to: Destination::Replacement(c.name.clone()),
                });
            }
        }
        moves.sort();
        let lower_bound = result.cost_lower_bound;
        (
            state,
            Outcome {
                lower_bound,
                moves,
                claims: result.new_node_claims,
                unschedulable,
                over_price_cap: result.over_price_cap,
            },
        )
    }
}
