//! Importers feed the engine: the shared openb trace (when present) and a kubectl snapshot.

use std::path::Path;

use karpenter_capi_simulator::{run, scenario};

#[test]
fn openb_trace_prefix_runs() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let trace = root.join("../shared/data/alibaba-openb/openb_pod_list_default.csv");
    if !trace.exists() {
        eprintln!("skipping: {} not found", trace.display());
        return Ok(());
    }
    let mut ls = scenario::load(&root.join("examples/openb.yaml"))?;
    ls.apply(&scenario::Overrides {
        openb: Some(trace),
        openb_limit: Some(150),
        catalog_csv: None,
    })?;
    let rep = run::run(
        &ls,
        &run::RunOptions {
            strategies: vec!["karpenter".into(), "cas".into()],
            seeds: 1,
        },
    )?;
    assert_eq!(rep.pods, 150);
    for r in &rep.runs {
        assert_eq!(
            r.summary.pods_never_scheduled, 0,
            "{}: {:?}",
            r.strategy, r.unschedulable_reasons
        );
        assert!(r.summary.total_cost > 0.0);
    }
    Ok(())
}

#[test]
fn kubectl_snapshot_example_runs() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ls = scenario::load(&root.join("examples/kubectl-snapshot.yaml"))?;
    let rep = run::run(&ls, &run::RunOptions::default())?;
    assert!(
        rep.problems.iter().any(|p| p.contains("md-unpriced")),
        "{:?}",
        rep.problems
    );
    for r in &rep.runs {
        assert_eq!(
            r.summary.pods_never_scheduled, 0,
            "{}: {:?}",
            r.strategy, r.unschedulable_reasons
        );
        // The snapshot's bound pods are on their nodes before its pending pods arrive (both
        // at time 0): no pending pod is scheduled into room a bound pod then overfills.
        assert_eq!(
            r.summary.overcommitted_bindings, 0,
            "{}: {:?}",
            r.strategy, r.summary
        );
    }
    Ok(())
}
