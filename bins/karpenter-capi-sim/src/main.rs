//! `karpenter-capi-sim`: argument parsing and wiring only; the simulator lives in the
//! `karpenter-capi-simulator` library.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use karpenter_capi_simulator::{SimError, compare, generators, report, run, scenario, sweep};

/// The core's simulations allocate many small, short-lived objects; mimalloc serves them
/// markedly faster than the system allocator (measured in docs/simulator.md).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "karpenter-capi-sim",
    version,
    about = "Simulate karpenter-capi and baselines over a workload and compare cost, utilisation and pending time."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Simulate a scenario with every strategy and print the comparison table.
    Run {
        /// Scenario file (YAML; see docs/simulator.md).
        scenario: PathBuf,
        /// Strategies to run (repeatable); default: the scenario's list, else all available.
        #[arg(long = "strategy", value_name = "NAME")]
        strategies: Vec<String>,
        /// Number of seeds (0..N), at least 1; seeds change generated workloads only.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
        seeds: u64,
        /// Write the full report (every figure and time series) as JSON.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Write an HTML report with SVG plots.
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Write the plots as separate SVG files into this directory.
        #[arg(long, value_name = "DIR")]
        svg: Option<PathBuf>,
        /// Replace the scenario's workload with an Alibaba openb pod list (CSV), e.g.
        /// ../shared/data/alibaba-openb/openb_pod_list_default.csv.
        #[arg(long, value_name = "CSV")]
        openb: Option<PathBuf>,
        /// Only the first N pods of the openb trace.
        #[arg(long, value_name = "N", requires = "openb")]
        openb_limit: Option<usize>,
        /// Use an instance catalog CSV (instance_type, vcpu, memory_mib, gpu, arch,
        /// on_demand_usd_per_hour), e.g. ../shared/data/aws-ec2-us-east-1.csv.
        #[arg(long, value_name = "CSV")]
        catalog_csv: Option<PathBuf>,
        /// Set a scenario field before running (repeatable), e.g.
        /// `--set settings.coreDisruption.payback.evictionPodHours=0.5` or
        /// `--set settings.coreDisruption.headroom=null`: a path as in error messages, a YAML
        /// value. For trying a knob on one workload without editing its file.
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Run one strategy against a baseline on many workloads and say, per workload and per
    /// family, whether it is at least --min-saving percent cheaper with no more pods disrupted
    /// and no worse p50/p95 pending time.
    Compare {
        #[command(flatten)]
        judge: Judge,
    },
    /// Run `compare` once per value of one scenario field (by default the eviction price,
    /// `settings.coreDisruption.payback.evictionPodHours`) and name the value that meets the
    /// goal on the most workloads, with the controller flag that sets it: where a cluster's
    /// own point lies, from its replayed workload.
    Sweep {
        /// The scenario field varied, a path as `--set` takes.
        #[arg(long, default_value = sweep::EVICTION_PRICE, value_name = "PATH")]
        vary: String,
        /// The values tried (YAML values, comma-separated or repeated).
        #[arg(long, value_delimiter = ',', required = true, value_name = "VALUE")]
        values: Vec<String>,
        #[command(flatten)]
        judge: Judge,
    },
    /// Write a generated scenario (YAML) to stdout or a file.
    Generate {
        /// Generator (each described in docs/simulator.md, "Generators").
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(generators::KINDS))]
        kind: String,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Number of pods (generator default if absent).
        #[arg(long)]
        pods: Option<usize>,
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Print the JSON Schema of the scenario format (or of the report with --report).
    Schema {
        #[arg(long)]
        report: bool,
    },
    /// List the strategies and which code backs each.
    Strategies,
    /// Re-run a decision the controller recorded with `--replay-dir` and say whether the
    /// core decides the same (exit 4 when it does not).
    Replay {
        /// A `provisioning-*.json` or `disruption-*.json` record.
        record: PathBuf,
        /// Print the re-run decision as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Print to stdout; a closed pipe (`| head`) is not an error worth a panic.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($arg)*);
    }};
}

macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// Exit codes: 0 ok, 1 runtime failure, 2 usage (clap), 3 bad scenario or input data.
const EXIT_BAD_INPUT: u8 = 3;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match real_main(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            let bad_input = e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<SimError>(),
                    Some(
                        SimError::Yaml { .. }
                            | SimError::Invalid { .. }
                            | SimError::Csv { .. }
                            | SimError::Quantity(_)
                            | SimError::UnknownStrategy(..)
                            | SimError::StrategyUnavailable(..)
                            | SimError::UnknownGenerator(..)
                            | SimError::Io { .. }
                    )
                )
            });
            ExitCode::from(if bad_input { EXIT_BAD_INPUT } else { 1 })
        }
    }
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// The files `compare` runs: each path given, a directory as its `*.yaml` files by name.
/// What `compare` and `sweep` share: the workloads, who is judged against whom, the goal.
#[derive(Debug, clap::Args)]
struct Judge {
    /// Scenario files, or directories whose `*.yaml` files are taken (sorted by name).
    #[arg(required = true)]
    scenarios: Vec<PathBuf>,
    /// The strategy judged.
    #[arg(long, default_value = "cost-aware", value_name = "NAME")]
    strategy: String,
    /// The strategy it is judged against.
    #[arg(long, default_value = "karpenter", value_name = "NAME")]
    baseline: String,
    /// How much cheaper (percent) the strategy must be to dominate.
    #[arg(long, default_value_t = 5.0, value_name = "PERCENT")]
    min_saving: f64,
    /// Pending percentiles this many seconds apart count as equal. The default only absorbs
    /// rounding; with `settings.readyJitterSeconds` two strategies' launches lag differently
    /// and a few seconds of p95 say nothing about either.
    #[arg(long, default_value_t = 0.5, value_name = "SECONDS")]
    pending_tolerance: f64,
    /// Set a field of every scenario before running (repeatable), as `run --set`, e.g.
    /// `--set settings.coreDisruption.payback.evictionPodHours=0.7`. Both strategies run the
    /// changed scenario; the Karpenter baseline reads none of `coreDisruption`'s rules.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    sets: Vec<String>,
    /// The openb pod list (CSV) for scenarios without a workload of their own, such as
    /// examples/openb.yaml.
    #[arg(long, value_name = "CSV")]
    openb: Option<PathBuf>,
    /// Write every workload's figures and the totals as JSON.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// No progress lines.
    #[arg(long, short)]
    quiet: bool,
}

impl Judge {
    /// The comparison plan and the scenario files.
    fn plan(&self) -> anyhow::Result<(compare::Plan, Vec<PathBuf>)> {
        let plan = compare::Plan {
            strategy: self.strategy.clone(),
            baseline: self.baseline.clone(),
            goal: compare::Goal {
                min_saving_percent: self.min_saving,
                pending_tolerance_seconds: self.pending_tolerance,
            },
            sets: self.sets.clone(),
            openb: self.openb.clone(),
        };
        Ok((plan, scenario_files(&self.scenarios)?))
    }

    /// Prints `table` and writes `json` (the report) to `--out` when given.
    fn finish(&self, table: &str, json: &str) -> anyhow::Result<()> {
        out!("{table}");
        if let Some(p) = &self.out {
            write_file(p, json)?;
            outln!("report: {}", p.display());
        }
        Ok(())
    }
}

fn scenario_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut in_dir: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("reading {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                .collect();
            in_dir.sort();
            if in_dir.is_empty() {
                anyhow::bail!("{}: no *.yaml scenario files", p.display());
            }
            files.extend(in_dir);
        } else {
            files.push(p.clone());
        }
    }
    Ok(files)
}

fn real_main(cli: Cli) -> anyhow::Result<()> {
    match cli.cmd {
        Cmd::Run {
            scenario: path,
            strategies,
            seeds,
            out,
            html,
            svg,
            openb,
            openb_limit,
            catalog_csv,
            sets,
            quiet,
        } => {
            let mut ls = scenario::load(&path)?;
            ls.apply(&scenario::Overrides {
                openb,
                openb_limit,
                catalog_csv,
                sets,
            })?;
            let opts = run::RunOptions { strategies, seeds };
            let (worlds, strats, progress) = run::prepare(&ls, &opts)?;
            let show = !quiet && std::io::stderr().is_terminal();
            let report = std::thread::scope(|scope| -> anyhow::Result<report::Report> {
                let handle = scope.spawn(|| run::execute(&ls, &worlds, &strats, &progress));
                if show {
                    // The bar polls shared counters; the simulation never waits for it.
                    let bar = indicatif::ProgressBar::new(progress.total.max(1));
                    bar.set_style(
                        indicatif::ProgressStyle::with_template(
                            "{spinner} simulating [{bar:40}] {percent}% ({elapsed})",
                        )
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                    );
                    while !handle.is_finished() {
                        bar.set_position(progress.done());
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    bar.finish_and_clear();
                }
                handle
                    .join()
                    .map_err(|_| anyhow::anyhow!("simulation thread panicked"))?
                    .map_err(Into::into)
            })?;
            out!("{}", report::table(&report));
            outln!(
                "wall time: {:.2} s for {} run(s)",
                report.wall_seconds,
                report.runs.len()
            );
            if let Some(p) = out {
                let json = serde_json::to_string_pretty(&report)?;
                write_file(&p, &json)?;
                outln!("report: {}", p.display());
            }
            if let Some(p) = html {
                write_file(&p, &report::html(&report)?)?;
                outln!("html report: {}", p.display());
            }
            if let Some(dir) = svg {
                for (name, s) in report::plots(&report)? {
                    let p = dir.join(format!("{name}.svg"));
                    write_file(&p, &s)?;
                    outln!("plot: {}", p.display());
                }
            }
            Ok(())
        }
        Cmd::Compare { judge } => {
            let (plan, files) = judge.plan()?;
            let mut outcomes = Vec::with_capacity(files.len());
            for (i, path) in files.iter().enumerate() {
                let o = plan
                    .run(path)
                    .with_context(|| format!("comparing on {}", path.display()))?;
                if !judge.quiet {
                    eprintln!(
                        "[{}/{}] {}: {:+.2}%, pods disrupted {} / {}",
                        i + 1,
                        files.len(),
                        path.display(),
                        o.cost_change_percent(),
                        o.candidate.pods_disrupted,
                        o.baseline.pods_disrupted
                    );
                }
                outcomes.push(o);
            }
            let report = plan.report(outcomes);
            judge.finish(
                &compare::table(&report),
                &serde_json::to_string_pretty(&report)?,
            )
        }
        Cmd::Sweep {
            vary,
            values,
            judge,
        } => {
            let (plan, files) = judge.plan()?;
            let report = sweep::run(&plan, &files, &vary, &values, |value, file| {
                if !judge.quiet {
                    eprintln!("[{vary}={value}] {}", file.display());
                }
            })
            .context("sweeping")?;
            judge.finish(
                &sweep::table(&report),
                &serde_json::to_string_pretty(&report)?,
            )
        }
        Cmd::Generate {
            kind,
            seed,
            pods,
            output,
        } => {
            let s = generators::generate(&kind, seed, pods)?;
            let header = format!(
                "# Generated by `karpenter-capi-sim generate {kind} --seed {seed}{}`; format: docs/simulator.md\n",
                pods.map(|p| format!(" --pods {p}")).unwrap_or_default()
            );
            let yaml = serde_saphyr::to_string(&s).context("serialising the scenario")?;
            match output {
                Some(p) => {
                    write_file(&p, &format!("{header}{yaml}"))?;
                    eprintln!("wrote {}", p.display());
                }
                None => out!("{header}{yaml}"),
            }
            Ok(())
        }
        Cmd::Schema { report: r } => {
            let v = if r {
                report::json_schema()
            } else {
                scenario::json_schema()
            };
            outln!("{}", serde_json::to_string_pretty(&v)?);
            Ok(())
        }
        Cmd::Replay { record, json } => {
            let out = karpenter_capi_simulator::replay::replay(&record)?;
            outln!(
                "{}: {}\n{}",
                out.kind,
                out.summary,
                if out.same {
                    "the core decides the same"
                } else {
                    "the core now decides differently from the recorded decision"
                }
            );
            if json {
                outln!("{}", out.rerun_json);
            }
            if !out.same {
                std::process::exit(4);
            }
            Ok(())
        }
        Cmd::Strategies => {
            for s in karpenter_capi_simulator::strategy::catalog() {
                outln!(
                    "{:<16} {}{}\n    provisioning: {}\n    disruption:   {}",
                    s.name,
                    s.title,
                    if s.available {
                        ""
                    } else {
                        " (not available yet)"
                    },
                    s.provisioning,
                    s.disruption
                );
            }
            Ok(())
        }
    }
}
