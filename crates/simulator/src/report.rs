//! Reports: the JSON document (every figure and time series), the terminal comparison table,
//! and an HTML page with inline SVG plots drawn by [`crate::plots`] (no scripts), so it opens
//! anywhere and renders the same every time.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bound::BoundSummary;
use crate::engine::{NodeUsage, RunResult, Sample};
use crate::error::Result;
use crate::plots::{self, Line, reference_style, strategy_style};
use crate::strategy::StrategyInfo;

pub const SCHEMA_VERSION: u32 = 1;

/// Which code decides for a strategy (owned copy of [`StrategyInfo`] for the report).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StrategyRow {
    pub name: String,
    pub title: String,
    pub provisioning: String,
    pub disruption: String,
}

impl From<&StrategyInfo> for StrategyRow {
    fn from(s: &StrategyInfo) -> Self {
        StrategyRow {
            name: s.name.into(),
            title: s.title.into(),
            provisioning: s.provisioning.into(),
            disruption: s.disruption.into(),
        }
    }
}

/// The whole report (`--out report.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub schema_version: u32,
    pub scenario: String,
    pub generator: String,
    /// How `lower_bound_*` figures are computed.
    pub lower_bound_kind: String,
    pub strategies: Vec<StrategyRow>,
    pub seeds: Vec<u64>,
    pub pods: u64,
    pub instance_types: u64,
    pub horizon_seconds: i64,
    /// Importer notes (objects left out and why).
    pub problems: Vec<String>,
    /// Wall time of all runs together (parallel).
    pub wall_seconds: f64,
    /// The lower bound of each seed's world (shared by its runs), with the per-resource
    /// bound alone for comparison.
    #[serde(default)]
    pub lower_bounds: Vec<BoundSummary>,
    pub runs: Vec<RunResult>,
}

/// JSON Schema of the report.
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Report)).unwrap_or(serde_json::Value::Null)
}

/// Per-strategy figures averaged over seeds (max for maxima).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    pub strategy: String,
    pub runs: usize,
    pub total_cost: f64,
    pub over_lb: f64,
    pub cpu: f64,
    pub mem: f64,
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
    pub never: f64,
    pub launched: f64,
    pub terminated: f64,
    pub terminated_young: f64,
    pub commands: f64,
    pub disrupted: f64,
    /// Evictions soon after the same pod's previous one ([`crate::engine::CHURN_WINDOW_SECONDS`]).
    pub disrupted_again: f64,
    pub evicted_p50: f64,
    pub evicted_p95: f64,
    pub pending_pod_hours: f64,
    pub evicted_pending_pod_hours: f64,
    pub job_work_lost_pod_hours: f64,
    /// PodDisruptionBudgets: evictions one held back, and node-hours spent draining.
    pub held_by_pdb: f64,
    pub draining_node_hours: f64,
    /// Capacity outages: launches that failed, and commands rolled back for it.
    pub launch_failures: f64,
    pub rolled_back: f64,
    /// Reclaimed spot pools: running nodes taken back, and the pods they ran.
    pub interrupted_nodes: f64,
    pub interrupted_pods: f64,
    pub decisions_per_s: f64,
    pub wall: f64,
}

pub fn rows(r: &Report) -> Vec<Row> {
    let mut by: BTreeMap<usize, Vec<&RunResult>> = BTreeMap::new();
    for run in &r.runs {
        let i = r
            .strategies
            .iter()
            .position(|s| s.name == run.strategy)
            .unwrap_or(usize::MAX);
        by.entry(i).or_default().push(run);
    }
    by.into_values()
        .map(|runs| {
            let n = runs.len() as f64;
            let avg = |f: &dyn Fn(&RunResult) -> f64| runs.iter().map(|r| f(r)).sum::<f64>() / n;
            Row {
                strategy: runs[0].strategy.clone(),
                runs: runs.len(),
                total_cost: avg(&|r| r.summary.total_cost),
                over_lb: avg(&|r| r.summary.cost_over_lower_bound),
                cpu: avg(&|r| r.summary.avg_cpu_utilisation),
                mem: avg(&|r| r.summary.avg_memory_utilisation),
                p50: avg(&|r| r.summary.pending_p50_seconds),
                p95: avg(&|r| r.summary.pending_p95_seconds),
                max: runs
                    .iter()
                    .map(|r| r.summary.pending_max_seconds)
                    .fold(0.0, f64::max),
                never: avg(&|r| {
                    (r.summary.pods_never_scheduled + r.summary.pods_left_pending) as f64
                }),
                launched: avg(&|r| r.summary.nodes_launched as f64),
                terminated: avg(&|r| r.summary.nodes_terminated as f64),
                terminated_young: avg(&|r| r.summary.nodes_removed_young as f64),
                commands: avg(&|r| r.summary.disruption_commands as f64),
                disrupted: avg(&|r| r.summary.pods_disrupted as f64),
                disrupted_again: avg(&|r| r.summary.pods_disrupted_again_soon as f64),
                evicted_p50: avg(&|r| r.summary.evicted_wait_p50_seconds),
                evicted_p95: avg(&|r| r.summary.evicted_wait_p95_seconds),
                pending_pod_hours: avg(&|r| r.summary.pending_pod_hours),
                launch_failures: avg(&|r| r.summary.launch_failures as f64),
                rolled_back: avg(&|r| r.summary.commands_rolled_back as f64),
                interrupted_nodes: avg(&|r| r.summary.nodes_interrupted as f64),
                interrupted_pods: avg(&|r| r.summary.pods_interrupted as f64),
                evicted_pending_pod_hours: avg(&|r| r.summary.evicted_pending_pod_hours),
                job_work_lost_pod_hours: avg(&|r| r.summary.job_work_lost_pod_hours),
                held_by_pdb: avg(&|r| r.summary.evictions_held_by_pdb as f64),
                draining_node_hours: avg(&|r| r.summary.draining_node_hours),
                decisions_per_s: avg(&|r| r.timing.decisions_per_second),
                wall: avg(&|r| r.timing.wall_seconds),
            }
        })
        .collect()
}

fn dur(s: f64) -> String {
    if s >= 3600.0 {
        format!("{:.1}h", s / 3600.0)
    } else if s >= 120.0 {
        format!("{:.0}m", s / 60.0)
    } else {
        format!("{s:.0}s")
    }
}

fn table_cells(r: &Row, lb_total: f64) -> Vec<String> {
    let _ = lb_total;
    vec![
        r.strategy.clone(),
        format!("{:.2}", r.total_cost),
        format!("{:+.1}%", ((r.over_lb - 1.0) * 1000.0).round() / 10.0 + 0.0),
        format!("{:.0}%", r.cpu * 100.0),
        format!("{:.0}%", r.mem * 100.0),
        format!("{} / {} / {}", dur(r.p50), dur(r.p95), dur(r.max)),
        format!("{:.0}", r.never),
        format!(
            "{:.0} / {:.0} ({:.0})",
            r.launched, r.terminated, r.terminated_young
        ),
        format!(
            "{:.0} / {:.0} ({:.0})",
            r.commands, r.disrupted, r.disrupted_again
        ),
        format!("{} / {}", dur(r.evicted_p50), dur(r.evicted_p95)),
        format!(
            "{:.1} / {:.1}",
            r.pending_pod_hours, r.evicted_pending_pod_hours
        ),
        format!("{:.0}", r.decisions_per_s),
    ]
}

const HEADERS: [&str; 12] = [
    "strategy",
    "total cost",
    "vs lower bound",
    "avg CPU",
    "avg mem",
    "pending p50/p95/max",
    "never ran",
    "nodes up/down (<30m)",
    "disruptions cmd/pods (again <30m)",
    "evicted wait p50/p95",
    "pending pod-h all/evicted",
    "decisions/s",
];

/// The widest cell of each column (in characters) over `rows`.
pub(crate) fn column_widths(rows: &[Vec<String>]) -> Vec<usize> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// The terminal comparison table.
pub fn table(r: &Report) -> String {
    let rows = rows(r);
    let lb = r
        .runs
        .first()
        .map(|x| x.summary.lower_bound_cost)
        .unwrap_or(0.0);
    let mut cells: Vec<Vec<String>> = vec![HEADERS.iter().map(|s| s.to_string()).collect()];
    cells.extend(rows.iter().map(|x| table_cells(x, lb)));
    let widths = column_widths(&cells);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scenario: {} | {} pods | {} instance types | {} simulated | seeds: {}",
        r.scenario,
        r.pods,
        r.instance_types,
        dur(r.horizon_seconds as f64),
        r.seeds.len()
    );
    for (i, row) in cells.iter().enumerate() {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(c, s)| {
                if c == 0 {
                    format!("{s:<w$}", w = widths[c])
                } else {
                    format!("{s:>w$}", w = widths[c])
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("  "));
        if i == 0 {
            let _ = writeln!(
                out,
                "{}",
                widths
                    .iter()
                    .map(|w| "-".repeat(*w))
                    .collect::<Vec<_>>()
                    .join("  ")
            );
        }
    }
    let _ = writeln!(
        out,
        "lower bound (total): {lb:.2} -- {}",
        r.lower_bound_kind
    );
    for b in &r.lower_bounds {
        let secs = r
            .runs
            .iter()
            .find(|x| x.seed == b.seed)
            .map_or(0.0, |x| x.timing.bound_seconds);
        let _ = writeln!(out, "  {}", bound_note(b, r.horizon_seconds, secs));
    }
    for run in r.runs.iter().filter(|x| x.summary.rounds_with_bound > 0) {
        let s = &run.summary;
        let gap = if s.round_lower_bound > 0.0 {
            (s.round_cost_with_bound / s.round_lower_bound - 1.0) * 100.0
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "{} (seed {}): new nodes of {} provisioning rounds cost {:.2}/h in total against the core's lower bound {:.2}/h (gap {:.2}%)",
            run.strategy,
            run.seed,
            s.rounds_with_bound,
            s.round_cost_with_bound,
            s.round_lower_bound,
            gap
        );
    }
    for run in r.runs.iter().filter(|x| x.summary.wall_clock_cuts > 0) {
        let _ = writeln!(
            out,
            "{} (seed {}): the optimiser's wall-clock safety net cut {} provisioning round(s) short on this machine; another run may differ (docs/simulator.md, round 47)",
            run.strategy, run.seed, run.summary.wall_clock_cuts
        );
    }
    per_strategy_line(
        &mut out,
        &rows,
        |x| x.job_work_lost_pod_hours > 0.0,
        "Job work lost to evictions, run again (pod-hours)",
        |x| format!("{:.1}", x.job_work_lost_pod_hours),
    );
    per_strategy_line(
        &mut out,
        &rows,
        |x| x.held_by_pdb > 0.0,
        "PodDisruptionBudgets: evictions a budget held back, and node-hours spent draining",
        |x| {
            format!(
                "{:.0} held, {:.2} node-h draining",
                x.held_by_pdb, x.draining_node_hours
            )
        },
    );
    per_strategy_line(
        &mut out,
        &rows,
        |x| x.launch_failures > 0.0,
        "Capacity outages: launches that failed (counted in nodes up), and commands rolled back for it (counted in cmd)",
        |x| {
            format!(
                "{:.0} failed, {:.0} rolled back",
                x.launch_failures, x.rolled_back
            )
        },
    );
    per_strategy_line(
        &mut out,
        &rows,
        |x| x.interrupted_nodes > 0.0,
        "Spot capacity reclaimed: running nodes taken back, and their pods (not in pods disrupted; their wait is in evicted wait)",
        |x| {
            format!(
                "{:.0} nodes, {:.0} pods",
                x.interrupted_nodes, x.interrupted_pods
            )
        },
    );
    for s in &r.strategies {
        let _ = writeln!(
            out,
            "  {}: provisioning = {}; disruption = {}",
            s.name, s.provisioning, s.disruption
        );
    }
    if r.seeds.len() > 1 {
        let _ = writeln!(out, "figures are means over seeds (pending max: the max)");
    }
    out
}

/// A line under the table, `title: <strategy> <figures>, ...`, when any row `shows` it: the
/// figures that are zero for every strategy without Jobs, budgets or outages.
fn per_strategy_line(
    out: &mut String,
    rows: &[Row],
    shows: impl Fn(&Row) -> bool,
    title: &str,
    figures: impl Fn(&Row) -> String,
) {
    if !rows.iter().any(&shows) {
        return;
    }
    let parts: Vec<String> = rows
        .iter()
        .map(|x| format!("{} {}", x.strategy, figures(x)))
        .collect();
    let _ = writeln!(out, "{title}: {}", parts.join(", "));
}

/// One line about a world's bound: how it compares with the per-resource bound alone and what
/// it took.
fn bound_note(b: &BoundSummary, horizon: i64, seconds: f64) -> String {
    let gain = if b.per_resource_cost > 0.0 {
        format!("{:+.1}%", (b.cost / b.per_resource_cost - 1.0) * 100.0)
    } else {
        "n/a".to_string()
    };
    format!(
        "seed {}: {:.2} vs {:.2} for the per-resource bound alone ({gain}); the LP part is higher {:.0}% of the time; {} intervals of {}, {} LP solves{}{}, {seconds:.2} s{}",
        b.seed,
        b.cost,
        b.per_resource_cost,
        if horizon > 0 {
            b.lp_tighter_seconds as f64 / horizon as f64 * 100.0
        } else {
            0.0
        },
        b.intervals,
        dur(b.interval_seconds as f64),
        b.lp_solves,
        if b.lp_fallbacks > 0 {
            format!(" ({} fell back to price per unit)", b.lp_fallbacks)
        } else {
            String::new()
        },
        if b.lp_budget_hits > 0 {
            format!(
                " ({} hit the time budget: may vary between runs)",
                b.lp_budget_hits
            )
        } else {
            String::new()
        },
        if b.unschedulable_pods > 0 {
            format!(
                "; {} pods no node can hold are left out of the bound (e.g. {})",
                b.unschedulable_pods,
                b.unschedulable_examples.first().map_or("", |e| e.as_str())
            )
        } else {
            String::new()
        },
    )
}

// ---------------------------------------------------------------- plots

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Time unit for the x axis: hours for long runs, minutes otherwise.
fn time_axis(horizon: i64) -> (f64, &'static str) {
    if horizon > 3 * 3600 {
        (3600.0, "time (hours)")
    } else {
        (60.0, "time (minutes)")
    }
}

fn first_seed_runs(r: &Report) -> Vec<&RunResult> {
    let seed = r.seeds.first().copied().unwrap_or(0);
    r.runs.iter().filter(|x| x.seed == seed).collect()
}

fn series_line(run: &RunResult, div: f64, f: impl Fn(&Sample) -> f64) -> Line {
    Line {
        name: run.strategy.clone(),
        style: strategy_style(&run.strategy),
        points: run
            .series
            .iter()
            .map(|s| (s.t as f64 / div, f(s)))
            .collect(),
    }
}

/// The plots (first seed): cost per hour with the lower bound, nodes, pending pods (one
/// panel per strategy) and evictions so far. Names are the `--svg` file names.
pub fn plots(r: &Report) -> Result<Vec<(&'static str, String)>> {
    let runs = first_seed_runs(r);
    let (div, xl) = time_axis(r.horizon_seconds);
    let mut cost: Vec<Line> = runs
        .iter()
        .map(|run| series_line(run, div, |s| s.cost_per_hour))
        .collect();
    if let Some(run) = runs.first() {
        let reference = |name: &str, dark: bool, f: fn(&Sample) -> f64| Line {
            name: name.into(),
            style: reference_style(dark),
            points: run
                .series
                .iter()
                .map(|s| (s.t as f64 / div, f(s)))
                .collect(),
        };
        cost.push(reference("lower bound", true, |s| s.lower_bound_per_hour));
        cost.push(reference("per-resource part", false, |s| {
            s.per_resource_bound_per_hour
        }));
    }
    let per_run = |f: fn(&Sample) -> f64| -> Vec<Line> {
        runs.iter().map(|run| series_line(run, div, f)).collect()
    };
    Ok(vec![
        (
            "cost",
            plots::line_chart("Cost per hour", xl, "$ / hour", &cost)?,
        ),
        (
            "nodes",
            plots::line_chart("Nodes", xl, "nodes", &per_run(|s| s.nodes as f64))?,
        ),
        (
            "pending",
            plots::small_multiples(
                "Pending pods (each strategy on its own scale)",
                xl,
                "pods",
                &per_run(|s| s.pending_pods as f64),
            )?,
        ),
        (
            "evictions",
            plots::line_chart(
                "Pods evicted by disruption (cumulative)",
                xl,
                "pods",
                &per_run(|s| s.evicted_pods as f64),
            )?,
        ),
    ])
}

/// Node usage of a run folded by `key` (instance type or zone): (key, nodes launched,
/// node-hours, cost), most node-hours first.
fn usage_by(run: &RunResult, key: fn(&NodeUsage) -> String) -> Vec<(String, u32, f64, f64)> {
    let mut m: BTreeMap<String, (u32, f64, f64)> = BTreeMap::new();
    for u in &run.node_usage {
        let e = m.entry(key(u)).or_default();
        e.0 += u.nodes_launched;
        e.1 += u.node_hours;
        e.2 += u.cost;
    }
    let mut v: Vec<_> = m.into_iter().map(|(k, (n, h, c))| (k, n, h, c)).collect();
    v.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
    v
}

/// Most rows of a usage table; the rest are summed into one line.
const USAGE_ROWS: usize = 12;

/// The node-usage section: per strategy (first seed), the instance types and the zones and
/// capacity types its nodes ran on.
fn usage_html(r: &Report, s: &mut String) {
    s.push_str("<h2>Instance types and zones used (first seed)</h2><p class=note>Node-hours from each launch request to deletion or the end of the run; nodes launched in brackets.</p><div class=cols>");
    for run in first_seed_runs(r) {
        let _ = write!(
            s,
            "<div><h3><span style=\"color:{}\">&#9632;</span> {}</h3>",
            strategy_style(&run.strategy).css(),
            esc(&run.strategy)
        );
        if run.node_usage.is_empty() {
            s.push_str("<p class=note>no nodes</p></div>");
            continue;
        }
        for (what, key) in [
            (
                "instance type",
                (|u: &NodeUsage| u.instance_type.clone()) as fn(&NodeUsage) -> String,
            ),
            ("zone / capacity", |u: &NodeUsage| {
                format!("{} / {}", u.zone, u.capacity_type)
            }),
        ] {
            let rows = usage_by(run, key);
            let _ = write!(
                s,
                "<table><tr><th>{what}</th><th>node-h</th><th>cost</th></tr>"
            );
            for (k, n, h, c) in rows.iter().take(USAGE_ROWS) {
                let _ = write!(
                    s,
                    "<tr><td>{} ({n})</td><td>{h:.1}</td><td>{c:.2}</td></tr>",
                    esc(k)
                );
            }
            if rows.len() > USAGE_ROWS {
                let rest = &rows[USAGE_ROWS..];
                let _ = write!(
                    s,
                    "<tr><td>{} more ({})</td><td>{:.1}</td><td>{:.2}</td></tr>",
                    rest.len(),
                    rest.iter().map(|x| x.1).sum::<u32>(),
                    rest.iter().map(|x| x.2).sum::<f64>(),
                    rest.iter().map(|x| x.3).sum::<f64>()
                );
            }
            s.push_str("</table>");
        }
        s.push_str("</div>");
    }
    s.push_str("</div>");
}

/// Why pods could not be scheduled, per run (the JSON's `unschedulable_reasons`).
fn reasons_html(r: &Report, s: &mut String) {
    let with: Vec<&RunResult> = r
        .runs
        .iter()
        .filter(|x| !x.unschedulable_reasons.is_empty())
        .collect();
    if with.is_empty() {
        s.push_str("<h2>Unschedulable pods</h2><p class=note>Every run scheduled every pod it was asked to.</p>");
        return;
    }
    s.push_str("<h2>Unschedulable pods</h2><p class=note>The first distinct reasons each run reported (at most 20 kept per run; digits as reported).</p>");
    for run in with {
        let _ = write!(
            s,
            "<details><summary><span style=\"color:{}\">&#9632;</span> {} (seed {}): {} reason(s), {} pod(s) never ran</summary><ul>",
            strategy_style(&run.strategy).css(),
            esc(&run.strategy),
            run.seed,
            run.unschedulable_reasons.len(),
            run.summary.pods_never_scheduled + run.summary.pods_left_pending
        );
        for reason in &run.unschedulable_reasons {
            let _ = write!(s, "<li>{}</li>", esc(reason));
        }
        s.push_str("</ul></details>");
    }
}

/// A self-contained HTML page: the table, the plots, and which code decides.
pub fn html(r: &Report) -> Result<String> {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>karpenter-capi-sim: {}</title><style>body{{font-family:sans-serif;margin:24px;color:#222}}table{{border-collapse:collapse;margin:8px 0 20px}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}td:first-child,th:first-child{{text-align:left}}.note{{color:#555;font-size:13px}}svg{{display:block;margin:8px 0}}.cols{{display:flex;flex-wrap:wrap;gap:24px}}.cols table{{margin:4px 0 12px}}details{{margin:4px 0}}li{{font-size:13px}}</style></head><body>",
        esc(&r.scenario)
    );
    let _ = write!(
        s,
        "<h1>karpenter-capi-sim: {}</h1><p class=note>{} pods, {} instance types, {} simulated seconds, seeds {:?}; all runs took {:.1} s of wall time.</p>",
        esc(&r.scenario),
        r.pods,
        r.instance_types,
        r.horizon_seconds,
        r.seeds,
        r.wall_seconds
    );
    s.push_str("<table><tr>");
    for h in HEADERS {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr>");
    let lb = r
        .runs
        .first()
        .map(|x| x.summary.lower_bound_cost)
        .unwrap_or(0.0);
    for row in rows(r) {
        s.push_str("<tr>");
        for (i, c) in table_cells(&row, lb).into_iter().enumerate() {
            if i == 0 {
                let _ = write!(
                    s,
                    "<td><span style=\"color:{}\">&#9632;</span> {}</td>",
                    strategy_style(&row.strategy).css(),
                    esc(&c)
                );
            } else {
                let _ = write!(s, "<td>{}</td>", esc(&c));
            }
        }
        s.push_str("</tr>");
    }
    let _ = write!(
        s,
        "</table><p class=note>Lower bound over the run: {lb:.2}. {}</p>",
        esc(&r.lower_bound_kind)
    );
    for b in &r.lower_bounds {
        let secs = r
            .runs
            .iter()
            .find(|x| x.seed == b.seed)
            .map_or(0.0, |x| x.timing.bound_seconds);
        let _ = write!(
            s,
            "<p class=note>Lower bound, {}</p>",
            esc(&bound_note(b, r.horizon_seconds, secs))
        );
    }
    for (_, svg) in plots(r)? {
        s.push_str(&svg);
    }
    usage_html(r, &mut s);
    reasons_html(r, &mut s);
    s.push_str("<h2>Which code decides</h2><table><tr><th>strategy</th><th>provisioning</th><th>disruption</th></tr>");
    for st in &r.strategies {
        let _ = write!(
            s,
            "<tr><td>{}</td><td style=\"text-align:left\">{}</td><td style=\"text-align:left\">{}</td></tr>",
            esc(&st.name),
            esc(&st.provisioning),
            esc(&st.disruption)
        );
    }
    s.push_str("</table>");
    if !r.problems.is_empty() {
        s.push_str("<h2>Import notes</h2><ul>");
        for p in &r.problems {
            let _ = write!(s, "<li>{}</li>", esc(p));
        }
        s.push_str("</ul>");
    }
    s.push_str("</body></html>\n");
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Summary;

    fn run(strategy: &str, reasons: Vec<String>) -> RunResult {
        RunResult {
            strategy: strategy.into(),
            seed: 0,
            summary: Summary::default(),
            series: (0..5)
                .map(|i| Sample {
                    t: i * 60,
                    evicted_pods: i as u32,
                    pending_pods: 2000 * (i % 2) as u32,
                    ..Sample::default()
                })
                .collect(),
            timing: Default::default(),
            unschedulable_reasons: reasons,
            node_usage: vec![
                NodeUsage {
                    instance_type: "m5.large".into(),
                    zone: "zone-a".into(),
                    capacity_type: "spot".into(),
                    nodes_launched: 2,
                    node_hours: 3.0,
                    cost: 0.3,
                },
                NodeUsage {
                    instance_type: "m5.large".into(),
                    zone: "zone-b".into(),
                    capacity_type: "on-demand".into(),
                    nodes_launched: 1,
                    node_hours: 1.0,
                    cost: 0.2,
                },
            ],
            commands: Vec::new(),
        }
    }

    /// A one-seed report of `runs` on a 240 s scenario.
    fn report_of(runs: Vec<RunResult>) -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            scenario: "s".into(),
            generator: String::new(),
            lower_bound_kind: String::new(),
            strategies: Vec::new(),
            seeds: vec![0],
            pods: 1,
            instance_types: 1,
            horizon_seconds: 240,
            problems: Vec::new(),
            wall_seconds: 0.0,
            lower_bounds: Vec::new(),
            runs,
        }
    }

    /// The HTML shows what was only in the JSON before: instance types and zones used,
    /// evictions over time, unschedulable reasons; and a plot per figure.
    #[test]
    fn html_shows_usage_evictions_and_reasons() -> Result<()> {
        let r = report_of(vec![
            run("cost-aware", Vec::new()),
            run("cas", vec!["pod default/big: no node group <fits>".into()]),
        ]);
        let h = html(&r)?;
        // Folded by type: both zones' nodes under one row; and one row per zone.
        assert!(
            h.contains("<td>m5.large (3)</td><td>4.0</td><td>0.50</td>"),
            "{h}"
        );
        assert!(h.contains("zone-b / on-demand (1)"));
        assert!(h.contains("no node group &lt;fits&gt;"));
        assert!(h.contains("Pods evicted by disruption"));
        assert_eq!(plots(&r)?.len(), 4);
        Ok(())
    }

    /// The table says what budgets held back, only when they held something.
    #[test]
    fn the_table_reports_drains_budgets_held_back() {
        let mut held = run("cost-aware", Vec::new());
        held.summary.evictions_held_by_pdb = 3;
        held.summary.draining_node_hours = 0.25;
        let mut r = report_of(vec![run("karpenter", Vec::new())]);
        assert!(!table(&r).contains("PodDisruptionBudgets"));
        r.runs = vec![held];
        let t = table(&r);
        assert!(t.contains("cost-aware 3 held, 0.25 node-h draining"), "{t}");
    }

    #[test]
    fn the_table_reports_failed_launches() {
        let mut failed = run("cost-aware", Vec::new());
        failed.summary.launch_failures = 4;
        failed.summary.commands_rolled_back = 1;
        let mut r = report_of(vec![run("karpenter", Vec::new())]);
        assert!(!table(&r).contains("Capacity outages"));
        r.runs = vec![failed];
        let t = table(&r);
        assert!(t.contains("cost-aware 4 failed, 1 rolled back"), "{t}");
    }
}
