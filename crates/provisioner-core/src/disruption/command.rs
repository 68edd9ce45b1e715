//! What the core decides: a disruption command and the report around it.
//!
//! A command is plain data the controller executes later (taint, launch replacements, wait
//! until they are initialized, drain and delete the candidates) after re-validating it against
//! a newer snapshot ([`super::validate()`]). It carries everything a person needs to judge it:
//! what goes, what comes, where every pod moves, the money, the disruption, the budget it uses
//! and why it beat the alternatives.

use serde::{Deserialize, Serialize};

use super::budgets::{BudgetProblem, BudgetStatus};
use super::candidates::Rejection;
use crate::model::{CapacityType, DisruptionReason, Requirement};
use crate::result::{InstanceTypeOption, Launch, PodRef};

/// Which method produced a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Method {
    Emptiness,
    Expiration,
    Drift,
    /// Underutilized consolidation: delete, or replace with cheaper nodes.
    Consolidation,
}

impl Method {
    /// The budget reason the method consumes.
    pub fn reason(self) -> DisruptionReason {
        match self {
            Method::Emptiness => DisruptionReason::Empty,
            Method::Expiration => DisruptionReason::Expired,
            Method::Drift => DisruptionReason::Drifted,
            Method::Consolidation => DisruptionReason::Underutilized,
        }
    }
}

/// A node the command disrupts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateNode {
    pub name: String,
    pub nodepool: String,
    pub instance_type: Option<String>,
    pub capacity_type: CapacityType,
    pub price: f64,
    pub disruption_cost: f64,
    pub pods: usize,
}

/// A node to launch before the candidates go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replacement {
    /// Placeholder name, unique in the command; pod moves refer to it.
    pub name: String,
    pub nodepool: String,
    pub requirements: Vec<Requirement>,
    /// What the provider may launch: only options whose every compatible offering keeps the
    /// command saving money (worst-case price below the candidates').
    pub instance_type_options: Vec<InstanceTypeOption>,
    /// The cheapest option.
    pub launch: Launch,
    /// The most the provider could pay for this node among `instance_type_options`.
    pub worst_case_price: f64,
}

/// Where a pod goes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Destination {
    /// An existing node that stays.
    Existing(String),
    /// A replacement of this command, by its placeholder name.
    Replacement(String),
}

/// One pod that moves.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PodMove {
    pub pod: PodRef,
    pub from: String,
    pub to: Destination,
}

/// Budget used by a command in one NodePool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetUse {
    pub nodepool: String,
    pub reason: DisruptionReason,
    pub nodes: u32,
    /// What the budget allowed when the command was made.
    pub allowed: u32,
}

/// Why this command was chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rationale {
    /// The score that ranked commands: saving per hour minus the disruption cost times
    /// [`super::DisruptionOptions::disruption_cost_weight`].
    pub score: f64,
    /// How many candidate sets the method evaluated (simulations).
    pub sets_evaluated: usize,
    /// How many of them yielded a valid command.
    pub valid_commands: usize,
    /// The best alternative that lost, if any: its candidates, saving and score.
    pub runner_up: Option<Alternative>,
    /// A sentence a person can read.
    pub summary: String,
}

/// A command that was considered and lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alternative {
    pub candidates: Vec<String>,
    pub replacements: usize,
    pub saving_per_hour: f64,
    pub disruption_cost: f64,
    pub score: f64,
}

/// A disruption the controller should carry out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Command {
    pub method: Method,
    pub reason: DisruptionReason,
    /// In node-name order.
    pub candidates: Vec<CandidateNode>,
    pub replacements: Vec<Replacement>,
    /// In pod order (namespace, name).
    pub moves: Vec<PodMove>,
    /// Summed price of the candidates, per hour.
    pub candidates_price: f64,
    /// Summed launch (cheapest) price of the replacements, per hour.
    pub replacements_price: f64,
    /// Summed worst-case price of the replacements, per hour.
    pub replacements_worst_case_price: f64,
    /// `candidates_price - replacements_price`. Can be negative for drift and expiration,
    /// which replace nodes whatever the price.
    pub saving_per_hour: f64,
    /// `candidates_price - replacements_worst_case_price`: what is saved whatever the provider
    /// launches among the options.
    pub worst_case_saving_per_hour: f64,
    /// Summed disruption cost of the candidates.
    pub disruption_cost: f64,
    /// A proven lower bound on the cost of any set of new nodes for the moved pods, when the
    /// optimiser planned the replacements (the gap to `replacements_price` is what could
    /// still be gained).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacements_lower_bound: Option<f64>,
    /// The launch planner that planned the replacements (`"optimiser"` when the optimiser's
    /// plan beat the heuristic's); re-validation plans with the same one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_planner: Option<String>,
    /// The premium that bounded the replacements' options when the command was decided;
    /// re-validation prices the replacements under the same bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replacement_premium: Option<f64>,
    /// The followers of a staged merge ([`super::staged`]), in node-name order: nodes the
    /// replacements were sized for that the budgets do not let go now. They are not touched
    /// by this command; each should go in a later one. Empty for a command done at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub staged: Vec<CandidateNode>,
    /// Summed price of `staged`, per hour. With followers, `saving_per_hour` and
    /// `worst_case_saving_per_hour` are what the whole merge saves once they have gone
    /// (`candidates_price + staged_price - replacements`); until then the cluster pays more.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub staged_price: f64,
    pub budget: Vec<BudgetUse>,
    pub rationale: Rationale,
}

impl Command {
    /// Names of the candidate nodes.
    pub fn candidate_names(&self) -> Vec<&str> {
        self.candidates.iter().map(|c| c.name.as_str()).collect()
    }

    /// A delete-only command launches nothing.
    pub fn is_delete(&self) -> bool {
        self.replacements.is_empty()
    }

    /// Names of the staged followers ([`Self::staged`]).
    pub fn staged_names(&self) -> Vec<&str> {
        self.staged.iter().map(|c| c.name.as_str()).collect()
    }

    /// Records the followers of a staged merge and counts their price in the savings.
    pub(crate) fn with_staged(mut self, mut staged: Vec<CandidateNode>) -> Command {
        staged.sort_by(|a, b| a.name.cmp(&b.name));
        self.staged_price = staged.iter().map(|c| c.price).sum();
        self.saving_per_hour = self.candidates_price + self.staged_price - self.replacements_price;
        self.worst_case_saving_per_hour =
            self.candidates_price + self.staged_price - self.replacements_worst_case_price;
        self.staged = staged;
        self
    }
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// What one method did in this decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodReport {
    pub method: Method,
    /// Candidates eligible for the method (before budgets).
    pub eligible: usize,
    /// Eligible candidates the budgets left.
    pub within_budget: usize,
    pub sets_evaluated: usize,
    pub produced_command: bool,
    /// Why it produced nothing, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The outcome of [`super::disrupt`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DisruptionDecision {
    /// At most one command per loop, from the first method that yields one.
    pub command: Option<Command>,
    pub methods: Vec<MethodReport>,
    /// Nodes that are not candidates, and why.
    pub rejected: Vec<Rejection>,
    pub candidates: usize,
    pub budgets: Vec<BudgetStatus>,
    /// Malformed budgets: they block their NodePool until fixed.
    pub budget_problems: Vec<BudgetProblem>,
}
