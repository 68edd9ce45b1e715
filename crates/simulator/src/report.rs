//! Reports: the JSON document (every figure and time series), the terminal comparison table,
//! and an HTML page with hand-built inline SVG plots (no plotting dependency, no scripts), so
//! it opens anywhere and renders the same every time.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bound::BoundSummary;
use crate::engine::{RunResult, Sample};
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
    pub commands: f64,
    pub disrupted: f64,
    pub evicted_p50: f64,
    pub evicted_p95: f64,
    pub pending_pod_hours: f64,
    pub evicted_pending_pod_hours: f64,
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
                commands: avg(&|r| r.summary.disruption_commands as f64),
                disrupted: avg(&|r| r.summary.pods_disrupted as f64),
                evicted_p50: avg(&|r| r.summary.evicted_wait_p50_seconds),
                evicted_p95: avg(&|r| r.summary.evicted_wait_p95_seconds),
                pending_pod_hours: avg(&|r| r.summary.pending_pod_hours),
                evicted_pending_pod_hours: avg(&|r| r.summary.evicted_pending_pod_hours),
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
        format!("{:.0} / {:.0}", r.launched, r.terminated),
        format!("{:.0} / {:.0}", r.commands, r.disrupted),
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
    "nodes up/down",
    "disruptions cmd/pods",
    "evicted wait p50/p95",
    "pending pod-h all/evicted",
    "decisions/s",
];

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
    let widths: Vec<usize> = (0..HEADERS.len())
        .map(|c| {
            cells
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
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

// ---------------------------------------------------------------- SVG plots

pub fn color(name: &str) -> &'static str {
    match name {
        "cost-aware" => "#1f77b4",
        "cost-aware+opt" => "#17becf",
        "karpenter" => "#d62728",
        "cas" => "#2ca02c",
        _ => "#9467bd",
    }
}

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub color: String,
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn nice_step(range: f64, ticks: f64) -> f64 {
    if range <= 0.0 {
        return 1.0;
    }
    let raw = range / ticks;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let n = if norm < 1.5 {
        1.0
    } else if norm < 3.0 {
        2.0
    } else if norm < 7.0 {
        5.0
    } else {
        10.0
    };
    n * mag
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A line chart as a standalone SVG element. `step` draws step lines (values hold until the
/// next sample), which is what sampled cluster state is.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, lines: &[Line], step: bool) -> String {
    let (w, h) = (900.0, 320.0);
    let (ml, mr, mt, mb) = (70.0, 170.0, 34.0, 44.0);
    let pw = w - ml - mr;
    let ph = h - mt - mb;
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let (xmin, xmax) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    let ymax = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let (xmin, xmax) = if xmin.is_finite() && xmax > xmin {
        (xmin, xmax)
    } else {
        (0.0, 1.0)
    };
    let ystep = nice_step(ymax.max(1e-9), 5.0);
    let ytop = ((ymax / ystep).ceil() * ystep).max(ystep);
    let sx = |x: f64| ml + (x - xmin) / (xmax - xmin) * pw;
    let sy = |y: f64| mt + ph - y / ytop * ph;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = write!(
        s,
        r#"<text x="{ml}" y="20" font-size="15" font-weight="bold">{}</text>"#,
        esc(title)
    );
    // Grid and y ticks.
    let mut y = 0.0;
    while y <= ytop + ystep * 0.01 {
        let py = sy(y);
        let _ = write!(
            s,
            r##"<line x1="{ml}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            ml + pw,
            ml - 6.0,
            py + 4.0,
            fmt_num(y)
        );
        y += ystep;
    }
    let xstep = nice_step(xmax - xmin, 8.0);
    let mut x = (xmin / xstep).ceil() * xstep;
    while x <= xmax + xstep * 0.01 {
        let px = sx(x);
        let _ = write!(
            s,
            r##"<line x1="{px:.1}" y1="{mt}" x2="{px:.1}" y2="{:.1}" stroke="#f0f0f0"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            mt + ph,
            mt + ph + 16.0,
            fmt_num(x)
        );
        x += xstep;
    }
    let _ = write!(
        s,
        r##"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="#888"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text transform="translate(16,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"##,
        ml + pw / 2.0,
        h - 8.0,
        esc(x_label),
        mt + ph / 2.0,
        esc(y_label)
    );
    for (i, l) in lines.iter().enumerate() {
        let mut d = String::new();
        let mut prev: Option<(f64, f64)> = None;
        for &(x, y) in &l.points {
            let (px, py) = (sx(x), sy(y));
            match prev {
                None => {
                    let _ = write!(d, "M{px:.1},{py:.1}");
                }
                Some((_, ppy)) if step => {
                    let _ = write!(d, "H{px:.1}");
                    if (ppy - py).abs() > 0.05 {
                        let _ = write!(d, "V{py:.1}");
                    }
                }
                Some(_) => {
                    let _ = write!(d, "L{px:.1},{py:.1}");
                }
            }
            prev = Some((px, py));
        }
        let dash = if l.dashed {
            r#" stroke-dasharray="6,4""#
        } else {
            ""
        };
        let _ = write!(
            s,
            r#"<path d="{d}" fill="none" stroke="{}" stroke-width="1.6"{dash} stroke-linejoin="round"/>"#,
            l.color
        );
        let ly = mt + 10.0 + i as f64 * 18.0;
        let lx = ml + pw + 14.0;
        let _ = write!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 22.0,
            l.color,
            lx + 28.0,
            ly + 4.0,
            esc(&l.name)
        );
    }
    s.push_str("</svg>");
    s
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
        color: color(&run.strategy).into(),
        // Dashed so it stays visible where it coincides with the plain heuristic.
        dashed: run.strategy.ends_with("+opt"),
        points: run
            .series
            .iter()
            .map(|s| (s.t as f64 / div, f(s)))
            .collect(),
    }
}

/// The three plots: cost per hour (with the lower bound), nodes, pending pods.
pub fn plots(r: &Report) -> Vec<(&'static str, String)> {
    let runs = first_seed_runs(r);
    let (div, xl) = time_axis(r.horizon_seconds);
    let mut cost: Vec<Line> = runs
        .iter()
        .map(|run| series_line(run, div, |s| s.cost_per_hour))
        .collect();
    if let Some(run) = runs.first() {
        cost.push(Line {
            name: "lower bound".into(),
            color: "#222".into(),
            dashed: true,
            points: run
                .series
                .iter()
                .map(|s| (s.t as f64 / div, s.lower_bound_per_hour))
                .collect(),
        });
        cost.push(Line {
            name: "per-resource part".into(),
            color: "#aaa".into(),
            dashed: true,
            points: run
                .series
                .iter()
                .map(|s| (s.t as f64 / div, s.per_resource_bound_per_hour))
                .collect(),
        });
    }
    let nodes: Vec<Line> = runs
        .iter()
        .map(|run| series_line(run, div, |s| s.nodes as f64))
        .collect();
    let pending: Vec<Line> = runs
        .iter()
        .map(|run| series_line(run, div, |s| s.pending_pods as f64))
        .collect();
    vec![
        (
            "cost",
            line_chart("Cost per hour", xl, "$ / hour", &cost, true),
        ),
        ("nodes", line_chart("Nodes", xl, "nodes", &nodes, true)),
        (
            "pending",
            line_chart("Pending pods", xl, "pods", &pending, true),
        ),
    ]
}

/// A self-contained HTML page: the table, the plots, and which code decides.
pub fn html(r: &Report) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>karpenter-capi-sim: {}</title><style>body{{font-family:sans-serif;margin:24px;color:#222}}table{{border-collapse:collapse;margin:8px 0 20px}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}td:first-child,th:first-child{{text-align:left}}.note{{color:#555;font-size:13px}}svg{{display:block;margin:8px 0}}</style></head><body>",
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
                    color(&row.strategy),
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
    for (_, svg) in plots(r) {
        s.push_str(&svg);
    }
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
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_is_svg() {
        let l = Line {
            name: "a<b".into(),
            color: "#000".into(),
            dashed: true,
            points: vec![(0.0, 1.0), (1.0, 2.0), (2.0, 0.5)],
        };
        let svg = line_chart("t", "x", "y", &[l], true);
        assert!(svg.starts_with("<svg"));
        assert!(svg.ends_with("</svg>"));
        assert!(svg.contains("a&lt;b"));
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(10.0, 5.0), 2.0);
        assert_eq!(nice_step(100.0, 5.0), 20.0);
        assert_eq!(nice_step(0.7, 5.0), 0.1);
    }
}
