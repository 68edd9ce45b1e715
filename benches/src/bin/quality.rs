//! The optimiser's quality report: for each input, the cost of Karpenter's greedy (baseline),
//! the cost-aware heuristic and the optimiser, the lower bound, the gaps and the solve times,
//! printed as a markdown table (the one in `benches/README.md`).
//!
//! `cargo run --release -p kcapi-benches --bin quality [-- --budget-ms N] [--backend NAME]... [--only TEXT]`
//! Build with `--features solver-highs` / `solver-cbc` / `solver-clarabel` to compare backends;
//! every compiled-in backend gets its own table unless `--backend` picks some.

use std::process::ExitCode;
use std::time::Instant;

use kcapi_benches::catalog;
use provisioner_core::optimize::{Backend, Method, Optimizer, OptimizerConfig, gap_pct};
use provisioner_core::packing::{LaunchPlanner, PackingProblem, verify};
use provisioner_core::strategies::{cost_aware::CostAwarePlanner, karpenter::KarpenterPlanner};

struct Input {
    name: String,
    problem: PackingProblem,
}

fn inputs() -> Result<Vec<Input>, catalog::CatalogError> {
    let dir = catalog::data_dir();
    let types = catalog::load_ec2(&dir.join("aws-ec2-us-east-1.csv"))?;
    let pods = catalog::load_openb(&dir.join("alibaba-openb/openb_pod_list_default.csv"))?;
    let shapes = catalog::shapes(&types);
    let first: Vec<_> = pods.iter().take(1000).copied().collect();
    let cpu_only: Vec<_> = pods.iter().filter(|p| p.num_gpu == 0).copied().collect();
    let mk = |name: &str, reqs: Vec<provisioner_core::Resources>| Input {
        name: name.to_string(),
        problem: catalog::problem(shapes.clone(), &reqs),
    };
    Ok(vec![
        mk("openb first 1000", catalog::trace_requests(&first)),
        mk(
            &format!("openb CPU-only ({})", cpu_only.len()),
            catalog::trace_requests(&cpu_only),
        ),
        mk("mix 200 cpu + 200 mem", catalog::synthetic_mix(200, 200, 1)),
        mk("mix 400 cpu + 100 mem", catalog::synthetic_mix(400, 100, 2)),
        mk("mix 100 cpu + 400 mem", catalog::synthetic_mix(100, 400, 3)),
        mk(
            "mix 2000 cpu + 2000 mem",
            catalog::synthetic_mix(2000, 2000, 4),
        ),
        mk(
            "random 2000 (all distinct)",
            catalog::synthetic_random(2000, 5),
        ),
    ])
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn pct(x: Option<f64>) -> String {
    x.map_or("-".into(), |g| format!("{g:+.2}%"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut budget_ms = OptimizerConfig::default().time_budget_ms;
    let mut backends: Vec<Backend> = Vec::new();
    let mut only: Option<String> = None;
    let mut base = OptimizerConfig::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--budget-ms" => match it.next().and_then(|v| v.parse().ok()) {
                Some(v) => budget_ms = v,
                None => {
                    eprintln!("--budget-ms needs a number");
                    return ExitCode::FAILURE;
                }
            },
            "--backend" => match it
                .next()
                .and_then(|v| Backend::ALL.into_iter().find(|b| b.name() == v))
            {
                Some(b) => backends.push(b),
                None => {
                    eprintln!("--backend needs one of microlp, clarabel, highs, cbc");
                    return ExitCode::FAILURE;
                }
            },
            "--only" => only = it.next().cloned(),
            "--knapsack-nodes" => match it.next().and_then(|v| v.parse().ok()) {
                Some(v) => base.knapsack_nodes = v,
                None => {
                    eprintln!("--knapsack-nodes needs a number");
                    return ExitCode::FAILURE;
                }
            },
            "--integer-columns" => match it.next().and_then(|v| v.parse().ok()) {
                Some(v) => base.max_integer_columns = v,
                None => {
                    eprintln!("--integer-columns needs a number");
                    return ExitCode::FAILURE;
                }
            },
            other => {
                eprintln!("unknown argument {other}");
                return ExitCode::FAILURE;
            }
        }
    }
    if backends.is_empty() {
        backends = Backend::compiled();
    }
    let inputs = match inputs() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let mut failed = false;
    for backend in backends {
        if !backend.is_compiled() {
            eprintln!("backend {} is not compiled in", backend.name());
            failed = true;
            continue;
        }
        // Clarabel is LP only: it does the bound, the integer pass uses the best MIP backend.
        let mip = if backend.supports_mip() {
            Some(backend)
        } else {
            Backend::default_mip()
        };
        println!(
            "\n### LP backend `{}`, MIP backend `{}`, budget {budget_ms} ms\n",
            backend.name(),
            mip.map_or("none", Backend::name)
        );
        println!(
            "| input | pods | classes | baseline | heuristic | optimiser | bound | baseline gap | heuristic gap | optimiser gap | heuristic ms | optimiser ms | bound | result |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|");
        for input in inputs
            .iter()
            .filter(|i| only.as_ref().is_none_or(|o| i.name.contains(o.as_str())))
        {
            let p = &input.problem;
            let baseline = KarpenterPlanner.plan(p, None);
            let t = Instant::now();
            let heuristic = CostAwarePlanner::default().plan(p, None);
            let heuristic_ms = ms(t);
            let opt = Optimizer::new(OptimizerConfig {
                time_budget_ms: budget_ms,
                lp_backend: Some(backend),
                mip_backend: mip,
                ..base.clone()
            });
            let t = Instant::now();
            let out = opt.optimize(p, Some(&heuristic));
            let opt_ms = ms(t);
            for (name, plan) in [
                ("baseline", &baseline),
                ("heuristic", &heuristic),
                ("optimiser", &out.plan),
            ] {
                if let Err(e) = verify(p, plan) {
                    eprintln!(
                        "{}: {name} plan fails verification: {:?}",
                        input.name,
                        e.first()
                    );
                    failed = true;
                }
            }
            if out.cost > heuristic.cost + 1e-9 || out.lower_bound > out.cost + 1e-6 {
                eprintln!(
                    "{}: optimiser {:.4} heuristic {:.4} bound {:.4}",
                    input.name, out.cost, heuristic.cost, out.lower_bound
                );
                failed = true;
            }
            if std::env::var_os("KCAPI_QUALITY_DEBUG").is_some() {
                eprintln!("{}: {:?} {:?}", input.name, out.stats, out.decomposition);
            }
            let b = out.lower_bound;
            let bound_kind = match &out.bound_method {
                provisioner_core::optimize::BoundMethod::ColumnGeneration {
                    converged: true,
                    iterations,
                } => format!("CG, converged, {iterations} it"),
                provisioner_core::optimize::BoundMethod::ColumnGeneration {
                    converged: false,
                    iterations,
                } => format!("CG, {iterations} it"),
                provisioner_core::optimize::BoundMethod::PricePerUnit => "price/unit".into(),
            };
            let result = match &out.method {
                Method::Optimised {
                    proven_optimal: true,
                } => "optimised (optimal over patterns)".to_string(),
                Method::Optimised {
                    proven_optimal: false,
                } => "optimised".to_string(),
                Method::Heuristic { reason } => format!("heuristic kept: {reason}"),
            };
            let decomp = if out.decomposition.coarsened {
                format!(
                    "; coarsened {}→{} classes",
                    out.decomposition.classes_exact, out.decomposition.classes
                )
            } else {
                String::new()
            };
            // The budget is counted in work (the same plan on every run); the wall clock's
            // safety net is what makes a plan vary.
            let budget = match (out.stats.budget_hit, out.stats.wall_clock_hit) {
                (_, true) => "; wall clock hit (may vary between runs)",
                (true, false) => "; budget hit",
                (false, false) => "",
            };
            println!(
                "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} | {} | {:.1} | {:.1} | {} | {}{}{} |",
                input.name,
                p.items.len(),
                out.decomposition.classes_exact,
                baseline.cost,
                heuristic.cost,
                out.cost,
                b,
                pct(gap_pct(baseline.cost, b)),
                pct(gap_pct(heuristic.cost, b)),
                pct(gap_pct(out.cost, b)),
                heuristic_ms,
                opt_ms,
                bound_kind,
                result,
                decomp,
                budget
            );
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
