//! One strategy against a baseline over many workloads, by the test issue 16 sets: on each
//! workload, is the candidate at least a given percentage cheaper while disrupting no more
//! pods and keeping pods pending no longer (p50 and p95)?
//!
//! A single workload is one path through a chaotic system (a command taken or not shifts every
//! later packing; `docs/simulator.md`, round 16), so a rule is judged over many workloads and
//! by family (the generator a workload came from), not on one. This module turns the runs'
//! summaries into that verdict, and [`Plan`] loads and runs each workload for the binary's
//! `compare` command.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::engine::Summary;
use crate::error::{Result, SimError};
use crate::run::{self, RunOptions};
use crate::scenario::{self, LoadedScenario, Overrides, Workload};

/// What `compare` runs: the strategy judged, its baseline, the goal, and what changes every
/// scenario before it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub strategy: String,
    pub baseline: String,
    pub goal: Goal,
    /// `--set path=value` changes, as `run --set`.
    pub sets: Vec<String>,
    /// The openb trace for scenarios without a workload of their own (`examples/openb.yaml`).
    pub openb: Option<PathBuf>,
}

impl Plan {
    /// Loads the scenario at `path` with the plan's changes.
    pub fn load(&self, path: &Path) -> Result<LoadedScenario> {
        let mut ls = scenario::load(path)?;
        let own_workload = ls.scenario.workload != Workload::default();
        ls.apply(&Overrides {
            openb: self.openb.clone().filter(|_| !own_workload),
            sets: self.sets.clone(),
            ..Overrides::default()
        })?;
        Ok(ls)
    }

    /// Loads and runs the scenario at `path`.
    pub fn run(&self, path: &Path) -> Result<Outcome> {
        run_one(&self.load(path)?, &self.strategy, &self.baseline)
    }

    /// The report over `outcomes`, one per workload.
    pub fn report(&self, outcomes: Vec<Outcome>) -> Comparison {
        Comparison {
            families: by_family(&outcomes, &self.goal),
            strategy: self.strategy.clone(),
            baseline: self.baseline.clone(),
            goal: self.goal,
            sets: self.sets.clone(),
            workloads: outcomes,
        }
    }
}

/// `compare`'s report (its `--out` JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub strategy: String,
    pub baseline: String,
    pub goal: Goal,
    pub sets: Vec<String>,
    pub workloads: Vec<Outcome>,
    /// Per family (sorted by name), then `all`.
    pub families: Vec<FamilyTotals>,
}

/// One family's totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamilyTotals {
    pub family: String,
    pub totals: Totals,
}

/// The figures the test reads from one run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    pub cost: f64,
    pub pods_disrupted: u32,
    /// Evictions soon after the same pod's previous one ([`Summary::pods_disrupted_again_soon`]):
    /// not part of the goal, but where churn shows.
    pub pods_disrupted_again_soon: u32,
    pub pending_p50_seconds: f64,
    pub pending_p95_seconds: f64,
    /// Pods a reclaimed spot pool took away ([`Summary::pods_interrupted`]) and how long
    /// evicted or interrupted pods waited to run again (p95): not part of the goal, but
    /// where a strategy's spot choices show under interruptions.
    #[serde(default)]
    pub pods_interrupted: u32,
    #[serde(default)]
    pub evicted_wait_p95_seconds: f64,
}

impl From<&Summary> for Figures {
    fn from(s: &Summary) -> Self {
        Figures {
            cost: s.total_cost,
            pods_disrupted: s.pods_disrupted,
            pods_disrupted_again_soon: s.pods_disrupted_again_soon,
            pending_p50_seconds: s.pending_p50_seconds,
            pending_p95_seconds: s.pending_p95_seconds,
            pods_interrupted: s.pods_interrupted,
            evicted_wait_p95_seconds: s.evicted_wait_p95_seconds,
        }
    }
}

/// What "dominates" means.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Goal {
    /// The candidate must be at least this many percent cheaper.
    pub min_saving_percent: f64,
    /// Pending percentiles within this many seconds count as equal: they are medians of
    /// whole seconds, and a launch's 91 s against 90.6 s is the same wait.
    pub pending_tolerance_seconds: f64,
}

impl Default for Goal {
    /// Issue 16's test: 5% cheaper, no more pods disrupted, no worse p50/p95 pending.
    fn default() -> Self {
        Goal {
            min_saving_percent: 5.0,
            pending_tolerance_seconds: 0.5,
        }
    }
}

/// A condition of the goal a workload missed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shortfall {
    Cost,
    Evictions,
    P50,
    P95,
}

impl Shortfall {
    pub fn as_str(self) -> &'static str {
        match self {
            Shortfall::Cost => "cost",
            Shortfall::Evictions => "evictions",
            Shortfall::P50 => "p50",
            Shortfall::P95 => "p95",
        }
    }
}

/// One workload's candidate and baseline runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The scenario's file, as given.
    pub file: String,
    /// The scenario's name.
    pub workload: String,
    /// [`family`] of the name.
    pub family: String,
    pub baseline: Figures,
    pub candidate: Figures,
}

impl Outcome {
    /// The candidate's cost change against the baseline, in percent (negative: cheaper). 0
    /// when the baseline cost nothing.
    pub fn cost_change_percent(&self) -> f64 {
        if self.baseline.cost > 0.0 {
            (self.candidate.cost / self.baseline.cost - 1.0) * 100.0
        } else {
            0.0
        }
    }

    /// The goal's conditions this workload misses; empty when the candidate dominates.
    pub fn shortfalls(&self, goal: &Goal) -> Vec<Shortfall> {
        let (b, c) = (&self.baseline, &self.candidate);
        let tol = goal.pending_tolerance_seconds.max(0.0);
        let mut out = Vec::new();
        if self.cost_change_percent() > -goal.min_saving_percent {
            out.push(Shortfall::Cost);
        }
        if c.pods_disrupted > b.pods_disrupted {
            out.push(Shortfall::Evictions);
        }
        if c.pending_p50_seconds > b.pending_p50_seconds + tol {
            out.push(Shortfall::P50);
        }
        if c.pending_p95_seconds > b.pending_p95_seconds + tol {
            out.push(Shortfall::P95);
        }
        out
    }
}

/// Runs `candidate` and `baseline` on one scenario (seed 0, side by side as `run` does) and
/// returns the candidate's figures against the baseline's.
pub fn run_one(ls: &LoadedScenario, candidate: &str, baseline: &str) -> Result<Outcome> {
    if candidate == baseline {
        return Err(SimError::Usage(format!(
            "the candidate and the baseline are both `{candidate}`"
        )));
    }
    let report = run::run(
        ls,
        &RunOptions {
            strategies: vec![candidate.to_string(), baseline.to_string()],
            seeds: 1,
        },
    )?;
    let figures = |name: &str| {
        report
            .runs
            .iter()
            .find(|r| r.strategy == name)
            .map(|r| Figures::from(&r.summary))
            .ok_or_else(|| SimError::Internal(format!("no run of `{name}` in the report")))
    };
    Ok(Outcome {
        file: ls.file.clone(),
        workload: report.scenario.clone(),
        family: family(&report.scenario),
        baseline: figures(baseline)?,
        candidate: figures(candidate)?,
    })
}

/// The family a scenario belongs to: its name less the `-<pods>-seed<seed>` the generators
/// append (`mixed-300-seed2` is `mixed`, `karpenter-benchmark-500-seed1` is
/// `karpenter-benchmark`); any other name is its own family.
pub fn family(name: &str) -> String {
    let strip = || {
        let (rest, seed) = name.rsplit_once("-seed")?;
        if seed.is_empty() || !seed.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let (head, pods) = rest.rsplit_once('-')?;
        (!head.is_empty() && !pods.is_empty() && pods.bytes().all(|b| b.is_ascii_digit()))
            .then_some(head)
    };
    strip().unwrap_or(name).to_string()
}

/// Totals over a set of workloads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub workloads: usize,
    /// Mean over the workloads of the cost change, in percent.
    pub mean_cost_change_percent: f64,
    pub candidate_pods_disrupted: u64,
    pub baseline_pods_disrupted: u64,
    pub candidate_again_soon: u64,
    pub baseline_again_soon: u64,
    /// Workloads where the candidate meets the goal.
    pub dominated: usize,
    /// Workloads where the candidate costs more than the baseline.
    pub dearer: usize,
    /// How many workloads missed each condition.
    pub shortfalls: BTreeMap<String, usize>,
}

impl Totals {
    pub fn of<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>, goal: &Goal) -> Totals {
        let mut t = Totals::default();
        let mut change = 0.0;
        for o in outcomes {
            t.workloads += 1;
            change += o.cost_change_percent();
            t.candidate_pods_disrupted += u64::from(o.candidate.pods_disrupted);
            t.baseline_pods_disrupted += u64::from(o.baseline.pods_disrupted);
            t.candidate_again_soon += u64::from(o.candidate.pods_disrupted_again_soon);
            t.baseline_again_soon += u64::from(o.baseline.pods_disrupted_again_soon);
            let missed = o.shortfalls(goal);
            if missed.is_empty() {
                t.dominated += 1;
            }
            for s in missed {
                *t.shortfalls.entry(s.as_str().to_string()).or_insert(0) += 1;
            }
            if o.candidate.cost > o.baseline.cost {
                t.dearer += 1;
            }
        }
        if t.workloads > 0 {
            t.mean_cost_change_percent = change / t.workloads as f64;
        }
        t
    }
}

/// Totals per family (sorted by name), then over every workload.
pub fn by_family(outcomes: &[Outcome], goal: &Goal) -> Vec<FamilyTotals> {
    let mut families: BTreeMap<&str, Vec<&Outcome>> = BTreeMap::new();
    for o in outcomes {
        families.entry(o.family.as_str()).or_default().push(o);
    }
    let mut rows: Vec<FamilyTotals> = families
        .into_iter()
        .map(|(f, os)| FamilyTotals {
            family: f.to_string(),
            totals: Totals::of(os, goal),
        })
        .collect();
    rows.push(FamilyTotals {
        family: "all".to_string(),
        totals: Totals::of(outcomes, goal),
    });
    rows
}

/// A `candidate / baseline` cell.
fn pair(candidate: impl std::fmt::Display, baseline: impl std::fmt::Display) -> String {
    format!("{candidate} / {baseline}")
}

/// The terminal report: one line per workload, then the totals per family.
pub fn table(c: &Comparison) -> String {
    let (goal, candidate, baseline) = (&c.goal, &c.strategy, &c.baseline);
    let mut s = String::new();
    let within = if goal.pending_tolerance_seconds > Goal::default().pending_tolerance_seconds {
        format!(" (within {} s)", goal.pending_tolerance_seconds)
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "{candidate} against {baseline}: goal {:.0}% cheaper, no more pods disrupted, p50/p95 pending no worse{within}",
        goal.min_saving_percent
    );
    let mut lines = vec![vec![
        "workload".to_string(),
        "family".to_string(),
        format!("{baseline} cost"),
        "cost change".to_string(),
        "pods disrupted".to_string(),
        "again <30m".to_string(),
        "pending p50".to_string(),
        "pending p95".to_string(),
        "missed".to_string(),
    ]];
    let seconds = |x: f64| format!("{x:.0}s");
    for o in &c.workloads {
        let (b, f) = (&o.baseline, &o.candidate);
        let missed: Vec<&str> = o.shortfalls(goal).iter().map(|m| m.as_str()).collect();
        lines.push(vec![
            o.workload.clone(),
            o.family.clone(),
            format!("{:.2}", b.cost),
            format!("{:+.2}%", o.cost_change_percent()),
            pair(f.pods_disrupted, b.pods_disrupted),
            pair(f.pods_disrupted_again_soon, b.pods_disrupted_again_soon),
            pair(
                seconds(f.pending_p50_seconds),
                seconds(b.pending_p50_seconds),
            ),
            pair(
                seconds(f.pending_p95_seconds),
                seconds(b.pending_p95_seconds),
            ),
            if missed.is_empty() {
                "none (dominates)".to_string()
            } else {
                missed.join(", ")
            },
        ]);
    }
    aligned(&mut s, &lines);
    let _ = writeln!(s);
    let mut header = vec!["family".to_string(), "workloads".to_string()];
    header.extend(TOTALS_HEADER.iter().map(|h| h.to_string()));
    let mut lines = vec![header];
    for FamilyTotals { family, totals: t } in &c.families {
        let mut line = vec![family.clone(), t.workloads.to_string()];
        line.extend(totals_cells(t, t.dominated.to_string()));
        lines.push(line);
    }
    aligned(&mut s, &lines);
    let _ = writeln!(
        s,
        "(pods disrupted, again <30m (evictions within 30 min of the same pod's previous one) and pending: {candidate} / {baseline}; \"missed\": the goal's conditions a workload does not meet)"
    );
    s
}

/// The headers of [`totals_cells`].
pub(crate) const TOTALS_HEADER: [&str; 6] = [
    "mean cost change",
    "pods disrupted",
    "again <30m",
    "dominates",
    "dearer",
    "missed (workloads)",
];

/// A totals row's cells from the mean cost change on: mean cost change, pods disrupted, again
/// <30m, `dominates` (as given), dearer, missed.
pub(crate) fn totals_cells(t: &Totals, dominates: String) -> Vec<String> {
    vec![
        format!("{:+.2}%", t.mean_cost_change_percent),
        pair(t.candidate_pods_disrupted, t.baseline_pods_disrupted),
        pair(t.candidate_again_soon, t.baseline_again_soon),
        dominates,
        t.dearer.to_string(),
        t.shortfalls
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
    ]
}

/// Left-aligned columns, two spaces apart.
pub(crate) fn aligned(s: &mut String, lines: &[Vec<String>]) {
    let widths = crate::report::column_widths(lines);
    for l in lines {
        let cells: Vec<String> = l
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(s, "{}", cells.join("  ").trim_end());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(cost: f64, evicted: u32, p50: f64, p95: f64) -> Figures {
        Figures {
            cost,
            pods_disrupted: evicted,
            pods_disrupted_again_soon: evicted / 10,
            pending_p50_seconds: p50,
            pending_p95_seconds: p95,
            pods_interrupted: 0,
            evicted_wait_p95_seconds: 0.0,
        }
    }

    fn outcome(name: &str, base: Figures, cand: Figures) -> Outcome {
        Outcome {
            file: format!("{name}.yaml"),
            workload: name.to_string(),
            family: family(name),
            baseline: base,
            candidate: cand,
        }
    }

    #[test]
    fn families_drop_what_the_generators_append() {
        assert_eq!(family("mixed-300-seed2"), "mixed");
        assert_eq!(
            family("karpenter-benchmark-500-seed1"),
            "karpenter-benchmark"
        );
        assert_eq!(family("constrained-1000-seed22"), "constrained");
        assert_eq!(family("openb-default"), "openb-default");
        assert_eq!(family("team-a-seed"), "team-a-seed");
        assert_eq!(family("x-10-seedy"), "x-10-seedy");
        assert_eq!(family("-10-seed1"), "-10-seed1");
    }

    #[test]
    fn a_wider_pending_tolerance_forgives_only_what_it_says() {
        let base = fig(100.0, 50, 10.0, 136.0);
        let late = outcome("w", base, fig(90.0, 50, 10.0, 142.0));
        assert_eq!(late.shortfalls(&Goal::default()), vec![Shortfall::P95]);
        let ten = Goal {
            pending_tolerance_seconds: 10.0,
            ..Goal::default()
        };
        assert!(late.shortfalls(&ten).is_empty());
        let later = outcome("w", base, fig(90.0, 50, 21.0, 147.0));
        assert_eq!(later.shortfalls(&ten), vec![Shortfall::P50, Shortfall::P95]);
    }

    #[test]
    fn each_condition_of_the_goal_is_checked() {
        let goal = Goal::default();
        let base = fig(100.0, 50, 10.0, 91.0);
        let ok = outcome("w", base, fig(94.0, 50, 10.4, 91.0));
        assert!(ok.shortfalls(&goal).is_empty());
        assert_eq!(
            outcome("w", base, fig(95.1, 50, 10.0, 91.0)).shortfalls(&goal),
            vec![Shortfall::Cost]
        );
        assert_eq!(
            outcome("w", base, fig(90.0, 51, 10.0, 91.0)).shortfalls(&goal),
            vec![Shortfall::Evictions]
        );
        assert_eq!(
            outcome("w", base, fig(90.0, 10, 11.0, 92.0)).shortfalls(&goal),
            vec![Shortfall::P50, Shortfall::P95]
        );
        assert_eq!(
            outcome("w", base, fig(101.0, 60, 0.0, 0.0)).shortfalls(&goal),
            vec![Shortfall::Cost, Shortfall::Evictions]
        );
    }

    #[test]
    fn totals_count_by_family_and_over_all() {
        let goal = Goal::default();
        let base = fig(100.0, 50, 0.0, 91.0);
        let outcomes = vec![
            outcome("mixed-300-seed1", base, fig(90.0, 40, 0.0, 91.0)),
            outcome("mixed-300-seed2", base, fig(104.0, 30, 0.0, 91.0)),
            outcome("constrained-600-seed5", base, fig(80.0, 70, 0.0, 91.0)),
        ];
        let rows = by_family(&outcomes, &goal);
        let names: Vec<&str> = rows.iter().map(|f| f.family.as_str()).collect();
        assert_eq!(names, ["constrained", "mixed", "all"]);
        let mixed = &rows[1].totals;
        assert_eq!(mixed.workloads, 2);
        assert!((mixed.mean_cost_change_percent - (-3.0)).abs() < 1e-9);
        assert_eq!(
            (
                mixed.candidate_pods_disrupted,
                mixed.baseline_pods_disrupted
            ),
            (70, 100)
        );
        assert_eq!(
            (mixed.candidate_again_soon, mixed.baseline_again_soon),
            (7, 10)
        );
        assert_eq!((mixed.dominated, mixed.dearer), (1, 1));
        assert_eq!(mixed.shortfalls.get("cost"), Some(&1));
        let all = &rows[2].totals;
        assert_eq!((all.workloads, all.dominated, all.dearer), (3, 1, 1));
        assert_eq!(all.shortfalls.get("evictions"), Some(&1));
        let plan = Plan {
            strategy: "cost-aware".into(),
            baseline: "karpenter".into(),
            goal,
            sets: Vec::new(),
            openb: None,
        };
        let text = table(&plan.report(outcomes));
        assert!(text.contains("none (dominates)"), "{text}");
        assert!(text.contains("evictions"), "{text}");
    }
}
