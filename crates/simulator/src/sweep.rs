//! One knob over many workloads: where a cluster's own point on the cost/eviction curve lies.
//!
//! No single eviction price beats Karpenter on every kind of workload (`docs/simulator.md`,
//! rounds 16 and 18): Karpenter's implied price is zero, so which price of ours is cheaper with
//! no more evictions depends on how long the cluster's pods live and how its load moves. What
//! can be found is the price that does best on *this* cluster's workload, replayed: `sweep`
//! runs [`compare`](crate::compare) once per value of one scenario field and names the value
//! that meets issue 16's goal on the most workloads (then the cheapest on average, then the
//! fewest evictions), with the controller flag that sets it where there is one.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::compare::{Comparison, FamilyTotals, Plan, TOTALS_HEADER, aligned, totals_cells};
use crate::error::{Result, SimError};

/// The field `sweep` varies when none is given: the payback rule's eviction price.
pub const EVICTION_PRICE: &str = "settings.coreDisruption.payback.evictionPodHours";

/// One value's comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The value, as given (a YAML value).
    pub value: String,
    pub comparison: Comparison,
}

/// `sweep`'s report (its `--out` JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    /// The scenario field varied, a path as `--set` takes.
    pub path: String,
    pub points: Vec<Point>,
    /// Index into `points` of the best value ([`best`]).
    pub best: Option<usize>,
}

/// Runs `plan` on every file once per value of `path` (added to the plan's `--set`s), calling
/// `progress(value, file)` before each workload.
pub fn run(
    plan: &Plan,
    files: &[PathBuf],
    path: &str,
    values: &[String],
    mut progress: impl FnMut(&str, &Path),
) -> Result<SweepReport> {
    if values.is_empty() {
        return Err(SimError::Usage(format!("no values to try for `{path}`")));
    }
    let mut points = Vec::with_capacity(values.len());
    for value in values {
        let mut at = plan.clone();
        at.sets.push(format!("{path}={value}"));
        let mut outcomes = Vec::with_capacity(files.len());
        for file in files {
            progress(value, file);
            outcomes.push(at.run(file)?);
        }
        points.push(Point {
            value: value.clone(),
            comparison: at.report(outcomes),
        });
    }
    let best = best(&points);
    Ok(SweepReport {
        path: path.to_string(),
        points,
        best,
    })
}

/// The totals over every workload of one point.
fn all(p: &Point) -> Option<&FamilyTotals> {
    p.comparison.families.iter().find(|f| f.family == "all")
}

/// The value that meets the goal on the most workloads; among those, the lowest mean cost
/// change, then the fewest pods disrupted, then the first given.
pub fn best(points: &[Point]) -> Option<usize> {
    points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| all(p).map(|f| (i, &f.totals)))
        .min_by(|(i, a), (j, b)| {
            b.dominated
                .cmp(&a.dominated)
                .then(
                    a.mean_cost_change_percent
                        .total_cmp(&b.mean_cost_change_percent),
                )
                .then(a.candidate_pods_disrupted.cmp(&b.candidate_pods_disrupted))
                .then(i.cmp(j))
        })
        .map(|(i, _)| i)
}

/// The controller flag that sets `path` to `value`, for the fields the controller exposes.
pub fn controller_flag(path: &str, value: &str) -> Option<String> {
    match path {
        EVICTION_PRICE => {
            let hours: f64 = value.trim().parse().ok()?;
            (hours.is_finite() && hours >= 0.0)
                .then(|| format!("--consolidation-eviction-cost={}", duration(hours)))
        }
        "settings.coreDisruption.payback.flexibilityPremium" => {
            let premium: f64 = value.trim().parse().ok()?;
            (premium.is_finite() && premium >= 0.0)
                .then(|| format!("--consolidation-merge-premium={premium}"))
        }
        _ => None,
    }
}

/// Hours as a Go-style duration the controller parses (`1h30m`, `42m`, `0s`), to the second.
fn duration(hours: f64) -> String {
    let total = (hours * 3600.0).round() as u64;
    let (h, m, s) = (total / 3600, total % 3600 / 60, total % 60);
    let mut out = String::new();
    if h > 0 {
        let _ = write!(out, "{h}h");
    }
    if m > 0 {
        let _ = write!(out, "{m}m");
    }
    if s > 0 || out.is_empty() {
        let _ = write!(out, "{s}s");
    }
    out
}

/// The terminal report: per value, the totals per family and over all; then the best value.
pub fn table(r: &SweepReport) -> String {
    let mut s = String::new();
    let Some(first) = r.points.first() else {
        return s;
    };
    let c = &first.comparison;
    let _ = writeln!(
        s,
        "{} against {} over {} workload(s), varying {}: goal {:.0}% cheaper, no more pods disrupted, p50/p95 pending no worse",
        c.strategy,
        c.baseline,
        c.workloads.len(),
        r.path,
        c.goal.min_saving_percent
    );
    let mut header = vec!["value".to_string(), "family".to_string()];
    header.extend(TOTALS_HEADER.iter().map(|h| h.to_string()));
    let mut lines = vec![header];
    let families = c.families.len();
    for p in &r.points {
        for FamilyTotals { family, totals: t } in &p.comparison.families {
            // With one family, its row and `all` say the same.
            if families == 2 && family != "all" {
                continue;
            }
            let mut line = vec![p.value.clone(), family.clone()];
            line.extend(totals_cells(
                t,
                format!("{} of {}", t.dominated, t.workloads),
            ));
            lines.push(line);
        }
    }
    aligned(&mut s, &lines);
    let best = r.best.and_then(|i| r.points.get(i));
    let best_totals = best.and_then(all).map(|f| &f.totals);
    if let (Some(p), Some(t)) = (best, best_totals.filter(|t| t.dominated == 0)) {
        let _ = writeln!(
            s,
            "no value meets the goal on any of the {} workloads; the cheapest on average: {}={} ({:+.2}%)",
            t.workloads, r.path, p.value, t.mean_cost_change_percent
        );
    } else if let Some(p) = best {
        let t = best_totals;
        let _ = write!(
            s,
            "best: {}={} (goal met on {} of {} workloads, mean cost change {:+.2}%)",
            r.path,
            p.value,
            t.map_or(0, |t| t.dominated),
            t.map_or(0, |t| t.workloads),
            t.map_or(0.0, |t| t.mean_cost_change_percent)
        );
        match controller_flag(&r.path, &p.value) {
            Some(flag) => {
                let _ = writeln!(s, "; on the controller: {flag}");
            }
            None => {
                let _ = writeln!(s);
            }
        }
    }
    let _ = writeln!(
        s,
        "(pods disrupted and again <30m: {} / {}; one run per workload and value; runs repeat exactly, but a small change moves single workloads either way, so a lead of a workload or two is within that)",
        c.strategy, c.baseline
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{Figures, Goal, Outcome};

    fn outcome(name: &str, cost: f64, evicted: u32) -> Outcome {
        let fig = |cost: f64, evicted: u32| Figures {
            cost,
            pods_disrupted: evicted,
            pods_disrupted_again_soon: 0,
            pending_p50_seconds: 0.0,
            pending_p95_seconds: 90.0,
            pods_interrupted: 0,
            evicted_wait_p95_seconds: 0.0,
        };
        Outcome {
            file: format!("{name}.yaml"),
            workload: format!("{name}-300-seed1"),
            family: name.to_string(),
            baseline: fig(100.0, 50),
            candidate: fig(cost, evicted),
        }
    }

    fn plan() -> Plan {
        Plan {
            strategy: "cost-aware".into(),
            baseline: "karpenter".into(),
            goal: Goal::default(),
            sets: Vec::new(),
            openb: None,
        }
    }

    /// The table of a sweep of the eviction price over `points`.
    fn swept(points: Vec<Point>) -> String {
        table(&SweepReport {
            path: EVICTION_PRICE.into(),
            best: best(&points),
            points,
        })
    }

    fn point(value: &str, outcomes: Vec<Outcome>) -> Point {
        Point {
            value: value.into(),
            comparison: plan().report(outcomes),
        }
    }

    #[test]
    fn the_best_value_meets_the_goal_most_often_then_costs_least() {
        let points = vec![
            // Cheapest, but evicts more than the baseline on both: the goal on none.
            point("0.25", vec![outcome("a", 80.0, 60), outcome("b", 80.0, 70)]),
            // The goal on one.
            point("1", vec![outcome("a", 90.0, 40), outcome("b", 99.0, 30)]),
            // The goal on one too, and cheaper on average: the best.
            point("0.5", vec![outcome("a", 85.0, 45), outcome("b", 97.0, 40)]),
        ];
        assert_eq!(best(&points), Some(2));
        assert_eq!(best(&[]), None);
        let t = swept(points);
        assert!(
            t.contains(&format!(
                "best: {EVICTION_PRICE}=0.5 (goal met on 1 of 2 workloads, mean cost change -9.00%); on the controller: --consolidation-eviction-cost=30m"
            )),
            "{t}"
        );
        // Two families: each value has a row per family and one for all.
        assert_eq!(
            t.lines().filter(|l| l.starts_with("0.25 ")).count(),
            3,
            "{t}"
        );
    }

    #[test]
    fn a_sweep_where_no_value_meets_the_goal_says_so() {
        let points = vec![
            point("0.5", vec![outcome("a", 99.0, 40)]),
            point("1", vec![outcome("a", 98.0, 30)]),
        ];
        let t = swept(points);
        assert!(
            t.contains(&format!(
                "no value meets the goal on any of the 1 workloads; the cheapest on average: {EVICTION_PRICE}=1 (-2.00%)"
            )),
            "{t}"
        );
        assert!(!t.contains("on the controller"), "{t}");
    }

    #[test]
    fn controller_flags_for_the_knobs_it_has() {
        assert_eq!(
            controller_flag(EVICTION_PRICE, "1.5").as_deref(),
            Some("--consolidation-eviction-cost=1h30m")
        );
        assert_eq!(
            controller_flag(EVICTION_PRICE, "0").as_deref(),
            Some("--consolidation-eviction-cost=0s")
        );
        assert_eq!(
            controller_flag(EVICTION_PRICE, "0.7").as_deref(),
            Some("--consolidation-eviction-cost=42m")
        );
        // What the controller's parser reads back.
        let back = |flag: String| {
            let v = flag
                .split_once('=')
                .map(|(_, v)| v.to_string())
                .unwrap_or_default();
            provisioner_core::disruption::duration::parse_go_duration(&v).expect("a Go duration")
        };
        for hours in [0.7, 1.5, 2.0, 0.01] {
            let flag = controller_flag(EVICTION_PRICE, &hours.to_string()).expect("a flag");
            assert!((back(flag) - hours * 3600.0).abs() < 1.0, "{hours}");
        }
        assert_eq!(controller_flag(EVICTION_PRICE, "-1"), None);
        assert_eq!(controller_flag(EVICTION_PRICE, "null"), None);
        assert_eq!(
            controller_flag("settings.coreDisruption.payback.flexibilityPremium", "0.25")
                .as_deref(),
            Some("--consolidation-merge-premium=0.25")
        );
        assert_eq!(controller_flag("settings.readyJitterSeconds", "60"), None);
    }

    /// Each value reaches the scenarios: on the known-optimal example (one `big` node at
    /// 0.30/h for its four pods), half the simulated time costs half as much.
    #[test]
    fn each_value_is_set_on_every_run() {
        let example =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tiny-optimal.yaml");
        let plan = plan();
        let values = vec!["1800".to_string(), "3600".to_string()];
        let mut seen = Vec::new();
        let r = run(&plan, &[example], "settings.endSeconds", &values, |v, _| {
            seen.push(v.to_string())
        })
        .expect("the sweep runs");
        assert_eq!(seen, values);
        let cost = |i: usize| r.points[i].comparison.workloads[0].candidate.cost;
        assert!(
            (cost(1) - 2.0 * cost(0)).abs() < 0.005,
            "{} {}",
            cost(0),
            cost(1)
        );
        assert!((cost(1) - 0.30).abs() < 0.01, "{}", cost(1));
        // Same workload, both values equal to Karpenter's: the first is kept.
        assert_eq!(r.best, Some(0));
    }

    #[test]
    fn no_values_is_an_error() {
        let plan = plan();
        let err = run(&plan, &[], EVICTION_PRICE, &[], |_, _| {}).expect_err("no values");
        assert!(err.to_string().contains("no values"), "{err}");
    }
}
