//! LP and MIP solving through `good_lp`, with the backend chosen by cargo feature.
//!
//! The optimiser states its models in a small solver-neutral form ([`LinearProgram`]) and this
//! module hands them to whichever backends were compiled in. Keeping the models neutral lets the
//! benchmarks run the same problem through every backend, which is how the default was chosen
//! (see `benches/README.md`): the default must build on a fresh machine with no system packages,
//! so it is pure Rust.

use serde::{Deserialize, Serialize};

#[cfg(not(any(
    feature = "solver-microlp",
    feature = "solver-highs",
    feature = "solver-cbc",
    feature = "solver-clarabel"
)))]
compile_error!(
    "provisioner-core needs at least one solver feature: solver-microlp (default), solver-highs, solver-cbc or solver-clarabel"
);

/// An LP/MIP backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// microlp: pure Rust simplex with branch and bound (feature `solver-microlp`, default).
    Microlp,
    /// Clarabel: pure Rust interior point, LP only (feature `solver-clarabel`).
    Clarabel,
    /// HiGHS through the `highs` crate (feature `solver-highs`; C++ build).
    Highs,
    /// COIN-OR CBC (feature `solver-cbc`; Debian `coinor-libcbc-dev`).
    Cbc,
}

impl Backend {
    /// Every backend, compiled in or not.
    pub const ALL: [Backend; 4] = [
        Backend::Microlp,
        Backend::Clarabel,
        Backend::Highs,
        Backend::Cbc,
    ];

    /// Whether this backend was compiled in.
    pub fn is_compiled(self) -> bool {
        match self {
            Backend::Microlp => cfg!(feature = "solver-microlp"),
            Backend::Clarabel => cfg!(feature = "solver-clarabel"),
            Backend::Highs => cfg!(feature = "solver-highs"),
            Backend::Cbc => cfg!(feature = "solver-cbc"),
        }
    }

    /// Whether it solves integer programs (Clarabel does not).
    pub fn supports_mip(self) -> bool {
        !matches!(self, Backend::Clarabel)
    }

    /// The compiled-in backends, in preference order.
    pub fn compiled() -> Vec<Backend> {
        Self::preference()
            .into_iter()
            .filter(|b| b.is_compiled())
            .collect()
    }

    /// Preference when several are compiled in: HiGHS solves best, then CBC, then microlp.
    fn preference() -> [Backend; 4] {
        [
            Backend::Highs,
            Backend::Cbc,
            Backend::Microlp,
            Backend::Clarabel,
        ]
    }

    /// The backend used for the column-generation LP by default: the best compiled in.
    pub fn default_lp() -> Backend {
        Self::compiled()
            .first()
            .copied()
            .unwrap_or(Backend::Microlp)
    }

    /// The backend used for the integer pass by default: the best compiled-in MIP solver.
    /// With only Clarabel compiled in there is none, and the integer pass is skipped.
    pub fn default_mip() -> Option<Backend> {
        Self::compiled().into_iter().find(|b| b.supports_mip())
    }

    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Microlp => "microlp",
            Backend::Clarabel => "clarabel",
            Backend::Highs => "highs",
            Backend::Cbc => "cbc",
        }
    }
}

/// Why a solve produced nothing usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    #[error("backend {0} is not compiled in (enable its cargo feature)")]
    NotCompiled(&'static str),
    #[error("backend {0} cannot solve integer programs")]
    NoMip(&'static str),
    #[error("{backend}: {message}")]
    Solver {
        backend: &'static str,
        message: String,
    },
}

/// A variable of a [`LinearProgram`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Var {
    pub lo: f64,
    pub hi: f64,
    pub integer: bool,
    pub objective: f64,
}

/// `Σ coef·x (<= | >=) rhs`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub coefs: Vec<(usize, f64)>,
    pub at_least: bool,
    pub rhs: f64,
}

/// A solver-neutral LP/MIP.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct LinearProgram {
    pub maximise: bool,
    pub vars: Vec<Var>,
    pub rows: Vec<Row>,
}

/// Variable values, whether the solver proved optimality, and the work it did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LpSolution {
    pub values: Vec<f64>,
    pub proven_optimal: bool,
    /// Simplex pivots (microlp counts them; other backends: rows plus columns, an estimate).
    pub pivots: u64,
    /// Branch-and-bound nodes solved (0 for an LP; other backends: 0).
    pub nodes: u64,
}

/// What may stop a solve before it proves optimality (MIP only; the LPs here are small).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct SolveLimits {
    /// Branch-and-bound nodes: the deterministic limit (microlp; other backends ignore it).
    pub nodes: Option<u64>,
    /// Wall seconds: the safety net, and the only limit the other backends take.
    pub seconds: Option<f64>,
}

impl LpSolution {
    /// The solve's work in [`super::clock`] units, per row plus column: a MIP's by its
    /// branch-and-bound nodes (each re-solves the LP), an LP's by its pivots.
    pub(crate) fn work_units(&self, lp: &LinearProgram) -> u64 {
        let lines = (lp.rows.len() + lp.vars.len()).max(1) as u64;
        if lp.vars.iter().any(|v| v.integer) {
            (self.nodes + 1).saturating_mul(lines * super::clock::MIP_NODE_PER_LINE)
        } else {
            self.pivots
                .saturating_mul(lines * super::clock::PIVOT_PER_LINE)
        }
    }
}

/// Solves `lp` with `backend`. `warm` is a feasible assignment to start from (MIP backends that
/// take one); `limits` cap a MIP.
pub(crate) fn solve(
    backend: Backend,
    lp: &LinearProgram,
    warm: Option<&[f64]>,
    limits: SolveLimits,
) -> Result<LpSolution, BackendError> {
    if !backend.is_compiled() {
        return Err(BackendError::NotCompiled(backend.name()));
    }
    let has_integer = lp.vars.iter().any(|v| v.integer);
    if has_integer && !backend.supports_mip() {
        return Err(BackendError::NoMip(backend.name()));
    }
    match backend {
        #[cfg(feature = "solver-microlp")]
        Backend::Microlp => direct::microlp(lp, warm, limits),
        #[cfg(feature = "solver-clarabel")]
        Backend::Clarabel => imp::clarabel(lp),
        #[cfg(feature = "solver-highs")]
        Backend::Highs => imp::highs(lp, warm, limits.seconds),
        #[cfg(feature = "solver-cbc")]
        Backend::Cbc => imp::cbc(lp, warm, limits.seconds),
        #[allow(unreachable_patterns)]
        _ => {
            let _ = (warm, limits);
            Err(BackendError::NotCompiled(backend.name()))
        }
    }
}

/// microlp called directly rather than through good_lp, for what good_lp does not pass on: a
/// branch-and-bound node limit (deterministic, unlike a time limit) and the work counts.
#[cfg(feature = "solver-microlp")]
mod direct {
    use microlp::{ComparisonOp, OptimizationDirection, Problem, SolveOptions, Variable};

    use super::{BackendError, LinearProgram, LpSolution, SolveLimits};

    fn error(e: impl std::fmt::Display) -> BackendError {
        BackendError::Solver {
            backend: "microlp",
            message: e.to_string(),
        }
    }

    pub(super) fn microlp(
        lp: &LinearProgram,
        warm: Option<&[f64]>,
        limits: SolveLimits,
    ) -> Result<LpSolution, BackendError> {
        let mut problem = Problem::new(if lp.maximise {
            OptimizationDirection::Maximize
        } else {
            OptimizationDirection::Minimize
        });
        let vars: Vec<Variable> = lp
            .vars
            .iter()
            .map(|v| {
                if v.integer {
                    let bound = |x: f64| x.clamp(i32::MIN as f64, i32::MAX as f64) as i32;
                    problem.add_integer_var(v.objective, (bound(v.lo.ceil()), bound(v.hi.floor())))
                } else {
                    problem.add_var(v.objective, (v.lo, v.hi))
                }
            })
            .collect();
        for row in &lp.rows {
            let terms: Vec<(Variable, f64)> = row
                .coefs
                .iter()
                .filter_map(|(i, c)| vars.get(*i).map(|v| (*v, *c)))
                .collect();
            let op = if row.at_least {
                ComparisonOp::Ge
            } else {
                ComparisonOp::Le
            };
            problem.add_constraint(terms, op, row.rhs);
        }
        let mut options = SolveOptions::default();
        options.node_limit = limits.nodes;
        options.time_limit = limits
            .seconds
            .map(|s| std::time::Duration::from_secs_f64(s.max(0.001)));
        options.warm_start = warm.map(|w| vars.iter().copied().zip(w.iter().copied()).collect());
        let outcome = problem.solve_with(options).map_err(error)?;
        let proven_optimal = outcome.is_optimal();
        let Some(sol) = outcome.solution() else {
            return Err(error(format!(
                "stopped before any solution ({:?})",
                outcome.termination_reason()
            )));
        };
        let stats = sol.stats();
        Ok(LpSolution {
            values: vars.iter().map(|v| sol.var_value(*v)).collect(),
            proven_optimal,
            pivots: stats.lp_iterations,
            nodes: stats.nodes_solved,
        })
    }
}

mod imp {
    #![allow(dead_code)]

    use good_lp::{
        Expression, ProblemVariables, Solution, SolutionStatus, SolverModel, Variable, variable,
    };

    use super::{BackendError, LinearProgram, LpSolution};

    /// The variables and objective of `lp` in good_lp form.
    pub(super) fn build(lp: &LinearProgram) -> (ProblemVariables, Vec<Variable>, Expression) {
        let mut pv = ProblemVariables::new();
        let vars: Vec<Variable> = lp
            .vars
            .iter()
            .map(|v| {
                let mut d = variable().min(v.lo);
                if v.hi.is_finite() {
                    d = d.max(v.hi);
                }
                if v.integer {
                    d = d.integer();
                }
                pv.add(d)
            })
            .collect();
        let mut obj = Expression::with_capacity(vars.len());
        for (v, def) in vars.iter().zip(&lp.vars) {
            if def.objective != 0.0 {
                obj.add_mul(def.objective, *v);
            }
        }
        (pv, vars, obj)
    }

    pub(super) fn add_rows<M: SolverModel>(model: &mut M, lp: &LinearProgram, vars: &[Variable]) {
        for row in &lp.rows {
            let mut e = Expression::with_capacity(row.coefs.len());
            for (i, c) in &row.coefs {
                if let Some(v) = vars.get(*i) {
                    e.add_mul(*c, *v);
                }
            }
            let c = if row.at_least {
                e.geq(row.rhs)
            } else {
                e.leq(row.rhs)
            };
            model.add_constraint(c);
        }
    }

    fn finish<S: Solution>(
        backend: &'static str,
        sol: Result<S, good_lp::ResolutionError>,
        vars: &[Variable],
    ) -> Result<LpSolution, BackendError> {
        let sol = sol.map_err(|e| BackendError::Solver {
            backend,
            message: e.to_string(),
        })?;
        let proven_optimal = matches!(sol.status(), SolutionStatus::Optimal);
        Ok(LpSolution {
            values: vars.iter().map(|v| sol.value(*v)).collect(),
            proven_optimal,
            pivots: vars.len() as u64,
            nodes: 0,
        })
    }

    fn warm_pairs(vars: &[Variable], warm: Option<&[f64]>) -> Option<Vec<(Variable, f64)>> {
        warm.map(|w| vars.iter().copied().zip(w.iter().copied()).collect())
    }

    #[cfg(feature = "solver-clarabel")]
    pub(super) fn clarabel(lp: &LinearProgram) -> Result<LpSolution, BackendError> {
        let (pv, vars, obj) = build(lp);
        let mut model = if lp.maximise {
            pv.maximise(obj)
        } else {
            pv.minimise(obj)
        }
        .using(good_lp::clarabel);
        add_rows(&mut model, lp, &vars);
        finish("clarabel", model.solve(), &vars)
    }

    #[cfg(feature = "solver-highs")]
    pub(super) fn highs(
        lp: &LinearProgram,
        warm: Option<&[f64]>,
        time_limit: Option<f64>,
    ) -> Result<LpSolution, BackendError> {
        use good_lp::WithInitialSolution;
        use good_lp::solvers::highs::HighsParallelType;
        let (pv, vars, obj) = build(lp);
        let mut model = if lp.maximise {
            pv.maximise(obj)
        } else {
            pv.minimise(obj)
        }
        .using(good_lp::highs);
        add_rows(&mut model, lp, &vars);
        // One thread: deterministic, and the machine is shared with the controller's loops.
        model = model.set_parallel(HighsParallelType::Off).set_threads(1);
        if let Some(t) = time_limit {
            model = model.set_time_limit(t.max(0.001));
        }
        if let Some(w) = warm_pairs(&vars, warm) {
            model = model.with_initial_solution(w);
        }
        finish("highs", model.solve(), &vars)
    }

    #[cfg(feature = "solver-cbc")]
    pub(super) fn cbc(
        lp: &LinearProgram,
        warm: Option<&[f64]>,
        time_limit: Option<f64>,
    ) -> Result<LpSolution, BackendError> {
        use good_lp::WithInitialSolution;
        let (pv, vars, obj) = build(lp);
        let mut model = if lp.maximise {
            pv.maximise(obj)
        } else {
            pv.minimise(obj)
        }
        .using(good_lp::coin_cbc);
        add_rows(&mut model, lp, &vars);
        model.set_parameter("threads", "1");
        if let Some(t) = time_limit {
            // good_lp's `with_time_limit` rounds up to whole seconds, far beyond our budget;
            // CBC's `seconds` parameter takes a fraction.
            model.set_parameter("seconds", &format!("{:.3}", t.max(0.001)));
        }
        if let Some(w) = warm_pairs(&vars, warm) {
            model = model.with_initial_solution(w);
        }
        finish("cbc", model.solve(), &vars)
    }
}
