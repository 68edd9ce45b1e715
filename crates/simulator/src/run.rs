//! Runs every (strategy, seed) pair in parallel with rayon and gathers a [`Report`].

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use crate::bound::{self, LowerBound};
use crate::engine::{self, RunResult};
use crate::error::{Result, SimError};
use crate::report::{Report, StrategyRow};
use crate::scenario::LoadedScenario;
use crate::strategy;
use crate::world;

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Strategy names; empty = the scenario's list, else every available one.
    pub strategies: Vec<String>,
    /// Number of seeds (0, 1, ... n-1), at least 1; the seed only changes generated
    /// workloads.
    pub seeds: u64,
}

impl Default for RunOptions {
    /// Every strategy of the scenario, one seed.
    fn default() -> Self {
        RunOptions {
            strategies: Vec::new(),
            seeds: 1,
        }
    }
}

/// Progress shared with a UI: simulated seconds done, summed over runs, and the total.
#[derive(Debug, Default)]
pub struct Progress {
    pub per_run: Vec<AtomicU64>,
    pub total: u64,
}

impl Progress {
    pub fn done(&self) -> u64 {
        self.per_run
            .iter()
            .map(|a| a.load(std::sync::atomic::Ordering::Relaxed))
            .sum()
    }
}

/// Prepare the runs: compile one world per seed and resolve strategies, so errors surface
/// before any simulation starts and a progress bar knows the total.
pub fn prepare(
    ls: &LoadedScenario,
    opts: &RunOptions,
) -> Result<(Vec<world::World>, Vec<strategy::StrategyInfo>, Progress)> {
    let names = if opts.strategies.is_empty() {
        ls.scenario.strategies.clone()
    } else {
        opts.strategies.clone()
    };
    let strategies = match strategy::resolve(&names) {
        Ok(s) => s,
        // From the scenario file: name the file, the line and the entry.
        Err(e @ (SimError::UnknownStrategy(..) | SimError::StrategyUnavailable(..)))
            if opts.strategies.is_empty() =>
        {
            let bad = match &e {
                SimError::UnknownStrategy(n, _) | SimError::StrategyUnavailable(n, _) => n,
                _ => "",
            };
            let i = names.iter().position(|n| n == bad).unwrap_or(0);
            return Err(ls.invalid(&format!("strategies[{i}]"), e.to_string()));
        }
        Err(e) => return Err(e),
    };
    if opts.seeds == 0 {
        return Err(SimError::Usage(
            "--seeds must be at least 1 (seeds 0..N-1 are run)".into(),
        ));
    }
    let seeds = opts.seeds;
    let worlds: Vec<world::World> = (0..seeds)
        .map(|s| world::compile(ls, s))
        .collect::<Result<_>>()?;
    let mut progress = Progress::default();
    for w in &worlds {
        for _ in &strategies {
            progress.per_run.push(AtomicU64::new(0));
            progress.total += w.end().max(0) as u64;
        }
    }
    Ok((worlds, strategies, progress))
}

/// Simulate every pair; results in (strategy, seed) order whatever the thread timing.
pub fn execute(
    ls: &LoadedScenario,
    worlds: &[world::World],
    strategies: &[strategy::StrategyInfo],
    progress: &Progress,
) -> Result<Report> {
    let start = Instant::now();
    let pairs: Vec<(usize, usize)> = (0..strategies.len())
        .flat_map(|s| (0..worlds.len()).map(move |w| (s, w)))
        .collect();
    // Longest runs first, then the lower bounds (once per world); as many runner threads as
    // cores take jobs in that order. Each runner has its own one-thread rayon pool, so the
    // core's parallel sections run inline: on a shared pool a thread waiting inside one run
    // stole whole other runs and stalled its own (two runs on two cores used one core's
    // worth of CPU).
    let mut order: Vec<usize> = (0..pairs.len()).collect();
    order.sort_by_key(|&i| {
        let (s, w) = pairs[i];
        (std::cmp::Reverse(expected_effort(strategies[s].name)), w, s)
    });
    let slots: Vec<Mutex<Option<Result<RunResult>>>> =
        pairs.iter().map(|_| Mutex::new(None)).collect();
    let bounds: Vec<Mutex<Option<LowerBound>>> = worlds.iter().map(|_| Mutex::new(None)).collect();
    enum Job {
        Run(usize),
        Bound(usize),
    }
    let jobs: Vec<Job> = order
        .iter()
        .map(|&i| Job::Run(i))
        .chain((0..worlds.len()).map(Job::Bound))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let runners = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len())
        .max(1);
    let work = || {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().ok();
        loop {
            let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(job) = jobs.get(k) else { break };
            let run = || match *job {
                Job::Run(i) => {
                    let (s, w) = pairs[i];
                    let r = engine::simulate(
                        &worlds[w],
                        strategies[s].name,
                        w as u64,
                        progress.per_run.get(i),
                    );
                    if let Ok(mut g) = slots[i].lock() {
                        *g = Some(r);
                    }
                }
                Job::Bound(w) => {
                    let world = &worlds[w];
                    let lb = bound::compute(world, w as u64, engine::sample_step(world));
                    if let Ok(mut g) = bounds[w].lock() {
                        *g = Some(lb);
                    }
                }
            };
            match &pool {
                Some(p) => p.install(run),
                None => run(),
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 0..runners {
            scope.spawn(work);
        }
    });
    let bounds: Vec<LowerBound> = bounds
        .into_iter()
        .map(|m| m.into_inner().ok().flatten().unwrap_or_default())
        .collect();
    let results: Vec<Result<RunResult>> = slots
        .into_iter()
        .map(|m| {
            m.into_inner()
                .ok()
                .flatten()
                .unwrap_or_else(|| Err(SimError::Internal("a run did not finish".into())))
        })
        .collect();
    let mut runs = results.into_iter().collect::<Result<Vec<_>>>()?;
    for (run, &(_, w)) in runs.iter_mut().zip(&pairs) {
        if let Some(lb) = bounds.get(w) {
            bound::apply(run, lb);
        }
    }
    let first = worlds.first();
    Ok(Report {
        schema_version: crate::report::SCHEMA_VERSION,
        scenario: first
            .map(|w| w.name.clone())
            .unwrap_or_else(|| ls.file.clone()),
        generator: format!("karpenter-capi-sim {}", env!("CARGO_PKG_VERSION")),
        lower_bound_kind: engine::LOWER_BOUND_KIND.to_string(),
        strategies: strategies.iter().map(StrategyRow::from).collect(),
        seeds: (0..worlds.len() as u64).collect(),
        pods: first.map(|w| w.arrivals.len() as u64).unwrap_or(0),
        instance_types: first.map(|w| w.instance_types.len() as u64).unwrap_or(0),
        horizon_seconds: first.map(|w| w.end()).unwrap_or(0),
        problems: first.map(|w| w.problems.clone()).unwrap_or_default(),
        wall_seconds: start.elapsed().as_secs_f64(),
        lower_bounds: bounds.into_iter().map(|b| b.summary).collect(),
        runs,
    })
}

/// A rank of how long a strategy's run takes, for ordering: the optimiser and the full
/// consolidation search first, the simple baselines last.
fn expected_effort(strategy: &str) -> u8 {
    match strategy {
        "cost-aware+opt" => 3,
        "cost-aware" => 2,
        "karpenter" => 1,
        _ => 0,
    }
}

/// prepare + execute without progress reporting.
pub fn run(ls: &LoadedScenario, opts: &RunOptions) -> Result<Report> {
    let (worlds, strategies, progress) = prepare(ls, opts)?;
    execute(ls, &worlds, &strategies, &progress)
}
