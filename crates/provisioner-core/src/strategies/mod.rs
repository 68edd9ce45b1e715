//! Launch planners behind [`crate::packing::LaunchPlanner`].
//!
//! Both shipped planners are greedy passes over the same engine ([`greedy`]): items in some
//! order, each joins an open node or opens a new one from the highest-weight NodePool that can
//! hold it, and every node finally launches as its cheapest surviving shape. They differ in
//! the policy: item order, which open node is tried first, and how far a node may grow.

pub mod cost_aware;
pub mod greedy;
pub mod karpenter;
mod open_lists;

use serde::{Deserialize, Serialize};

/// Which planner [`crate::schedule`] uses for new nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Strategy {
    /// Price per unit of the binding resource decides how large a node grows; pods are mixed
    /// by normalised size (default).
    #[default]
    CostAware,
    /// A faithful re-implementation of Karpenter's greedy: the baseline every report compares
    /// against.
    KarpenterBaseline,
}

impl Strategy {
    /// The planner for this strategy.
    pub fn planner(self) -> &'static dyn crate::packing::LaunchPlanner {
        match self {
            Strategy::CostAware => &cost_aware::CostAwarePlanner {
                fragmentation_allowance: 0.5,
            },
            Strategy::KarpenterBaseline => &karpenter::KarpenterPlanner,
        }
    }
}
