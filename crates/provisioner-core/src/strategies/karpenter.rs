//! A faithful re-implementation of Karpenter's provisioning greedy, the baseline.
//!
//! What it reproduces (sigs.k8s.io/karpenter `pkg/controllers/provisioning/scheduling`):
//! pods sorted by CPU then memory, descending; each pod joins the first in-flight NodeClaim that
//! can take it, trying NodeClaims with the fewest pods first; otherwise a new NodeClaim opens
//! from the highest-weight NodePool, keeping every instance type that fits; a NodeClaim keeps
//! growing while any of its types still fits (so nodes grow toward the largest type,
//! Karpenter #2457); NodePool limits are charged with the largest capacity a NodeClaim could
//! launch as; the launch is the cheapest remaining offering. Existing nodes are filled first
//! by the scheduler (first fit, initialized nodes first, then by name), as in Karpenter.

use crate::model::Resources;
use crate::packing::{ItemId, LaunchPlan, LaunchPlanner, PackItem, PackingProblem, ShapeId};

use super::greedy::{self, Demand, NodeOrder, Policy};

/// Karpenter's greedy.
#[derive(Debug, Clone, Copy, Default)]
pub struct KarpenterPlanner;

/// Karpenter's pod order: CPU descending, then memory descending, then input order.
pub fn karpenter_order(requests: &[&Resources]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..requests.len()).collect();
    idx.sort_by(|a, b| {
        let (ra, rb) = (requests.get(*a), requests.get(*b));
        match (ra, rb) {
            (Some(ra), Some(rb)) => rb
                .cpu_milli
                .cmp(&ra.cpu_milli)
                .then(rb.memory.cmp(&ra.memory))
                .then(a.cmp(b)),
            _ => a.cmp(b),
        }
    });
    idx
}

impl Policy for KarpenterPlanner {
    fn node_order(&self) -> NodeOrder {
        NodeOrder::FewestPods
    }

    fn item_order(&self, problem: &PackingProblem) -> Vec<ItemId> {
        let reqs: Vec<&Resources> = problem.items.iter().map(|i| &i.requests).collect();
        karpenter_order(&reqs)
            .into_iter()
            .map(|i| i as ItemId)
            .collect()
    }

    fn cap(
        &self,
        _problem: &PackingProblem,
        _opener: &PackItem,
        _fitting: &[ShapeId],
        _demand: &Demand,
    ) -> f64 {
        f64::INFINITY
    }
}

impl LaunchPlanner for KarpenterPlanner {
    fn name(&self) -> &'static str {
        "karpenter-baseline"
    }

    fn plan(&self, problem: &PackingProblem, _warm_start: Option<&LaunchPlan>) -> LaunchPlan {
        greedy::run(problem, self)
    }
}
