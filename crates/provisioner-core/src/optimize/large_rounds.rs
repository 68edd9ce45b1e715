//! Provisioning's default planner for the cost-aware strategy: the heuristic, and the
//! optimiser on the rounds where it pays.
//!
//! The heuristic packs first fit, 9-21% above the lower bound on rounds of hundreds of pods
//! in a few dozen request classes (a Deployment scaled up, a batch of Jobs); the optimiser
//! brings the same rounds to within a few percent of it (`benches/README.md`, "Optimiser").
//! On a round of a few nodes there is little to repack (each node already is the cheapest
//! shape that holds its pods), and a round whose pods fall
//! into more classes than the optimiser takes exactly (random requests; the scheduling
//! benchmark's spread and affinity groups, 2,272 classes at 20,000 pods) has to be coarsened,
//! where it kept the heuristic's plan every time it was measured and only spent its budget.
//! So the optimiser runs when the heuristic's plan launches at least
//! [`LargeRounds::min_nodes`] nodes in at most [`OptimizerConfig::max_classes`] classes; it
//! starts from the heuristic's plan and never returns a dearer one.
//!
//! What a denser plan costs (`docs/simulator.md`, round 21): it leaves less room for pods the
//! kube-scheduler binds elsewhere than planned. Zone-spread pods refused by their planned node
//! while other zones' nodes are still coming up go where its scoring puts them, and on up to 2
//! of 16 simulated 300-1,000-pod ramps a few percent of the pods waited for a second launch.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::{Optimizer, OptimizerConfig};
use crate::packing::{GroupId, LaunchPlan, LaunchPlanner, PackItem, PackingProblem};
use crate::strategies::Strategy;

/// When provisioning hands a round to the optimiser
/// ([`crate::SchedulingOptions::large_rounds`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LargeRounds {
    /// The heuristic's plan must launch at least this many nodes.
    pub min_nodes: usize,
    /// The optimiser's settings. Its time budget bounds what a round may add: 1 s by default
    /// rather than the optimiser's own 300 ms, since such a round is followed by launches of a
    /// minute or two. Measured side by side (`benches/README.md`, "Optimiser"): the quality
    /// inputs' gaps to the bound go from 1.5-4.2% at 300 ms to 1.4-3.7% at 1 s, and over the
    /// simulator's 57 workloads the default from -7.1% to -8.1% against Karpenter
    /// (`docs/simulator.md`, round 21).
    pub optimizer: OptimizerConfig,
}

impl Default for LargeRounds {
    fn default() -> Self {
        LargeRounds {
            min_nodes: 5,
            optimizer: OptimizerConfig {
                time_budget_ms: 1_000,
                ..OptimizerConfig::default()
            },
        }
    }
}

/// The planner [`LargeRounds`] describes.
#[derive(Debug, Clone)]
pub struct LargeRoundPlanner {
    min_nodes: usize,
    optimizer: Optimizer,
}

impl LargeRoundPlanner {
    pub fn new(rounds: &LargeRounds) -> LargeRoundPlanner {
        LargeRoundPlanner {
            min_nodes: rounds.min_nodes.max(1),
            optimizer: Optimizer::new(rounds.optimizer.clone()),
        }
    }

    /// Whether the optimiser may improve on `plan`: enough nodes to repack, and items that
    /// fall into few enough classes for it to take them exactly (the key is the optimiser's
    /// own, [`super::pattern`], less the pool rank). A round it would have to coarsen is left
    /// to the heuristic: measured, the optimiser kept the heuristic's plan on such rounds
    /// (random requests; the scheduling benchmark, whose spread and affinity groups keep
    /// 2,272 classes apart at 20,000 pods) and spent its budget for nothing.
    fn worth_optimising(&self, problem: &PackingProblem, plan: &LaunchPlan) -> bool {
        if plan.nodes.len() < self.min_nodes {
            return false;
        }
        let limit = self.optimizer.config.max_classes;
        let mut classes = HashSet::new();
        for node in &plan.nodes {
            for &i in &node.items {
                let Some(item) = problem.items.get(i as usize) else {
                    continue;
                };
                if classes.insert(class_key(item)) && classes.len() > limit {
                    return false;
                }
            }
        }
        true
    }
}

/// What sets an item's class apart: its requests, shapes and groups.
type ClassKey = (
    [i64; 4],
    Vec<(String, i64)>,
    u32,
    Vec<GroupId>,
    Vec<(GroupId, u32)>,
    Vec<(GroupId, u32)>,
);

fn class_key(item: &PackItem) -> ClassKey {
    let r = &item.requests;
    let sorted = |v: &[(GroupId, u32)]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v
    };
    let mut member = item.member_of.clone();
    member.sort_unstable();
    (
        [r.cpu_milli, r.memory, r.pods, r.ephemeral_storage],
        r.extended.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        item.shape_set,
        member,
        sorted(&item.limits),
        sorted(&item.arrival_limits),
    )
}

impl LaunchPlanner for LargeRoundPlanner {
    fn name(&self) -> &'static str {
        "cost-aware+optimiser"
    }

    fn plan(&self, problem: &PackingProblem, warm_start: Option<&LaunchPlan>) -> LaunchPlan {
        let heuristic = match warm_start {
            Some(w) => w.clone(),
            None => Strategy::CostAware.planner().plan(problem, None),
        };
        if !self.worth_optimising(problem, &heuristic) {
            return heuristic;
        }
        self.optimizer.plan(problem, Some(&heuristic))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Resources;
    use crate::packing::{PackPool, Shape, ShapeSet};
    use std::sync::Arc;

    /// Two shapes, the large one 10% cheaper per vCPU, and `n` pods of `cpu` millicores
    /// each (`distinct`: each pod a millicore more than the last).
    fn problem(n: usize, cpu: i64, distinct: bool) -> PackingProblem {
        let gib = 1i64 << 30;
        let shapes = vec![
            Shape::for_test(0, Resources::with_pods(4000, 16 * gib, 110), 0.4),
            Shape::for_test(0, Resources::with_pods(16000, 64 * gib, 110), 1.44),
        ];
        let items = (0..n)
            .map(|i| PackItem {
                pods: vec![i as u32],
                requests: Resources::with_pods(cpu + if distinct { i as i64 } else { 0 }, gib, 1),
                shape_set: 0,
                member_of: Vec::new(),
                limits: Vec::new(),
                arrival_limits: Vec::new(),
            })
            .collect();
        PackingProblem {
            by_size: Arc::new(crate::packing::size_order(&shapes)),
            by_price: Arc::new(crate::packing::price_order(&shapes)),
            shape_sets: vec![ShapeSet::from_ids(shapes.len(), 0..shapes.len() as u32)],
            shapes: Arc::new(shapes),
            pools: vec![PackPool::unlimited("default")],
            items,
            groups: 0,
        }
    }

    #[test]
    fn small_rounds_are_the_heuristics_plan() {
        let p = problem(3, 1000, false);
        let planner = LargeRoundPlanner::new(&LargeRounds::default());
        let heuristic = Strategy::CostAware.planner().plan(&p, None);
        assert!(heuristic.nodes.len() < 5, "{heuristic:?}");
        assert_eq!(planner.plan(&p, None), heuristic);
    }

    #[test]
    fn rounds_beyond_the_class_limit_are_the_heuristics_plan() {
        let p = problem(60, 1500, true);
        let rounds = LargeRounds {
            min_nodes: 1,
            optimizer: OptimizerConfig {
                max_classes: 10,
                ..OptimizerConfig::default()
            },
        };
        let planner = LargeRoundPlanner::new(&rounds);
        let heuristic = Strategy::CostAware.planner().plan(&p, None);
        assert_eq!(planner.plan(&p, None), heuristic);
    }

    #[test]
    fn large_rounds_are_optimised_and_never_dearer() {
        let p = problem(60, 1500, false);
        let planner = LargeRoundPlanner::new(&LargeRounds {
            min_nodes: 1,
            ..LargeRounds::default()
        });
        let heuristic = Strategy::CostAware.planner().plan(&p, None);
        let plan = planner.plan(&p, None);
        crate::packing::verify(&p, &plan).expect("a valid plan");
        assert!(
            plan.cost <= heuristic.cost + 1e-9,
            "{} > {}",
            plan.cost,
            heuristic.cost
        );
        assert!(
            plan.notes
                .iter()
                .any(|n| n.contains("optimised") || n.contains("heuristic kept")),
            "the optimiser ran: {:?}",
            plan.notes
        );
    }
}
