//! Runs are a pure function of scenario and seed: same seed, same results (timing aside);
//! another seed, another generated workload.

use karpenter_capi_simulator::{generators, run, scenario};

fn small() -> scenario::LoadedScenario {
    let mut s = generators::generate("mixed", 0, Some(40)).expect("generator");
    s.settings.end_seconds = Some(3 * 3600);
    // Generate the workload per seed instead of inline.
    let pods = std::mem::take(&mut s.workload.pods);
    assert!(!pods.is_empty());
    s.workload.generate = Some(scenario::GenerateSpec {
        kind: "mixed".into(),
        seed: 0,
        pods: Some(40),
    });
    scenario::from_value(s, "mixed-small")
}

fn strip(
    mut r: karpenter_capi_simulator::report::Report,
) -> karpenter_capi_simulator::report::Report {
    r.wall_seconds = 0.0;
    for run in &mut r.runs {
        run.timing = Default::default();
    }
    r
}

#[test]
fn same_seed_same_result() -> Result<(), Box<dyn std::error::Error>> {
    let ls = small();
    let opts = run::RunOptions {
        strategies: vec!["cost-aware".into(), "karpenter".into(), "cas".into()],
        seeds: 2,
    };
    let a = strip(run::run(&ls, &opts)?);
    let b = strip(run::run(&ls, &opts)?);
    assert_eq!(a, b);
    assert_eq!(a.runs.len(), 6);
    // Seeds 0 and 1 generate different workloads.
    let s0 = &a.runs[0];
    let s1 = &a.runs[1];
    assert_eq!(
        (s0.strategy.as_str(), s0.seed, s1.seed),
        ("cost-aware", 0, 1)
    );
    assert_ne!(s0.series, s1.series);
    Ok(())
}
