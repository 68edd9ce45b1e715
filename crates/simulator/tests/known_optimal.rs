//! Scenarios with a known optimal answer: the strategies reach it and the lower bound is never
//! above it (examples/tiny-optimal.yaml, and a variant where the per-resource bound is loose).

use std::path::Path;

use karpenter_capi_simulator::{run, scenario};

fn run_core_strategies(
    ls: &scenario::LoadedScenario,
) -> karpenter_capi_simulator::Result<karpenter_capi_simulator::report::Report> {
    run::run(
        ls,
        &run::RunOptions {
            strategies: vec![
                "cost-aware".into(),
                "cost-aware+opt".into(),
                "karpenter".into(),
            ],
            seeds: 1,
        },
    )
}

#[test]
fn tiny_scenario_reaches_the_optimum() -> Result<(), Box<dyn std::error::Error>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tiny-optimal.yaml");
    let ls = scenario::load(&path)?;
    let report = run_core_strategies(&ls)?;
    // The cheapest cluster that runs the four pods all hour is one `big` node: $0.30.
    let optimum = 0.30;
    let lb = report.lower_bounds.first().ok_or("no lower bound")?;
    assert!(
        lb.cost <= optimum + 1e-9,
        "bound {} above the optimum",
        lb.cost
    );
    // Both bounds are tight here (8 vCPU at big's $0.0375/vCPU is big's price), so the LP
    // part cannot be higher than the per-resource one: equal, not strictly tighter.
    assert!((lb.per_resource_cost - optimum).abs() < 1e-6, "{lb:?}");
    assert!((lb.cost - optimum).abs() < 1e-6, "{lb:?}");
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
        // Every run carries the world's bound: $0.30/h from t = 0.
        assert!(
            (s.lower_bound_cost - 0.30).abs() < 1e-6,
            "{}: bound {}",
            r.strategy,
            s.lower_bound_cost
        );
        // The pods wait for the batch window (1 s) before a node is even asked for, and the
        // bound counts them from their arrival: the ratio is just under 1.
        assert!(s.cost_over_lower_bound <= 1.0 + 1e-9);
        assert!(s.cost_over_lower_bound > 0.999);
        // The pods wait for the batch window plus launch and registration (1 + 60 + 30 s).
        assert_eq!(s.pending_max_seconds, 91.0);
        let last = r.series.last().map(|x| x.cost_per_hour).unwrap_or_default();
        assert!((last - 0.30).abs() < 1e-9, "{}", r.strategy);
        assert!(
            r.series
                .iter()
                .all(|x| (x.lower_bound_per_hour - 0.30).abs() < 1e-9)
        );
    }
    Ok(())
}

/// The tiny scenario with 3-vCPU / 6 GiB pods: two fit a `big` node (8 vCPU), three do not,
/// and `small` (2 vCPU) holds none, so the cheapest cluster is two `big` nodes ($0.60/h). The
/// per-resource bound sees 12 vCPU at $0.0375 ($0.45/h), loose; the LP bound finds $0.60/h.
#[test]
fn lp_bound_is_tight_where_the_per_resource_bound_is_loose()
-> Result<(), Box<dyn std::error::Error>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tiny-optimal.yaml");
    let text = std::fs::read_to_string(&path)?.replace(
        "requests: {cpu: \"2\", memory: 4Gi}",
        "requests: {cpu: \"3\", memory: 6Gi}",
    );
    assert!(
        text.contains("cpu: \"3\""),
        "the example changed; update this test"
    );
    let ls = scenario::from_value(scenario::parse(&text, "tiny-loose.yaml")?, "tiny-loose");
    let report = run_core_strategies(&ls)?;
    let optimum = 0.60;
    let lb = report.lower_bounds.first().ok_or("no lower bound")?;
    assert!((lb.per_resource_cost - 0.45).abs() < 1e-6, "{lb:?}");
    assert!(
        lb.cost <= optimum + 1e-9,
        "bound {} above the optimum",
        lb.cost
    );
    assert!(lb.cost > lb.per_resource_cost + 0.1, "not tighter: {lb:?}");
    assert!((lb.cost - optimum).abs() < 1e-6, "{lb:?}");
    for r in &report.runs {
        let s = &r.summary;
        // Two `big` nodes from the batch close to the end.
        let expected = 0.60 * 3599.0 / 3600.0;
        assert!(
            (s.total_cost - expected).abs() < 1e-6,
            "{}: cost {}",
            r.strategy,
            s.total_cost
        );
        assert!((s.lower_bound_cost - lb.cost).abs() < 1e-12);
        assert!(s.cost_over_lower_bound > 0.999 && s.cost_over_lower_bound <= 1.0 + 1e-9);
        assert!(
            r.series
                .iter()
                .all(|x| (x.per_resource_bound_per_hour - 0.45).abs() < 1e-9)
        );
        assert!(
            r.series
                .iter()
                .all(|x| (x.lower_bound_per_hour - 0.60).abs() < 1e-9)
        );
    }
    Ok(())
}
