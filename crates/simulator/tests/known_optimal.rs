//! A tiny scenario with a known optimal answer gets it (examples/tiny-optimal.yaml).

use std::path::Path;

use karpenter_capi_simulator::{run, scenario};

#[test]
fn tiny_scenario_reaches_the_optimum() -> Result<(), Box<dyn std::error::Error>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tiny-optimal.yaml");
    let ls = scenario::load(&path)?;
    let report = run::run(
        &ls,
        &run::RunOptions {
            strategies: vec![
                "cost-aware".into(),
                "cost-aware+opt".into(),
                "karpenter".into(),
            ],
            seeds: 1,
        },
    )?;
    for r in &report.runs {
        let s = &r.summary;
        assert_eq!(s.nodes_launched, 1, "{}: {s:?}", r.strategy);
        assert_eq!(s.pods_never_scheduled, 0, "{}", r.strategy);
        // One `big` node at $0.30/h from the batch close (t = 1 s) to the end (3600 s).
        let expected = 0.30 * 3599.0 / 3600.0;
        assert!(
            (s.total_cost - expected).abs() < 1e-6,
            "{}: cost {}",
            r.strategy,
            s.total_cost
        );
        // The per-resource bound is tight here: $0.30/h from t = 0.
        assert!(
            (s.lower_bound_cost - 0.30).abs() < 1e-6,
            "{}: bound {}",
            r.strategy,
            s.lower_bound_cost
        );
        assert!(s.cost_over_lower_bound <= 1.0 + 1e-9);
        // The pods wait for the batch window plus launch and registration (1 + 60 + 30 s).
        assert_eq!(s.pending_max_seconds, 91.0);
        let last = r.series.last().map(|x| x.cost_per_hour).unwrap_or_default();
        assert!((last - 0.30).abs() < 1e-9, "{}", r.strategy);
    }
    Ok(())
}
