//! Importers feed the engine: the shared openb trace (when present) and a kubectl snapshot.

use std::path::{Path, PathBuf};

use karpenter_capi_simulator::{run, scenario};

/// A file of the shared data set (`shared/data`, see its README): `$KCAPI_DATA/<rel>` when
/// set, else `shared/data/<rel>` next to the project root or any directory above it (a git
/// worktree sits deeper than the main checkout). Missing data fails the test, naming where it
/// looked, unless `KCAPI_ALLOW_MISSING_DATA=1` says to skip; then the skip is printed as a
/// line starting with `SKIPPED`, for CI to report.
fn shared_data(rel: &str) -> Result<Option<PathBuf>, String> {
    let mut tried = Vec::new();
    if let Some(d) = std::env::var_os("KCAPI_DATA") {
        let p = PathBuf::from(d).join(rel);
        if p.exists() {
            return Ok(Some(p));
        }
        tried.push(p);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for dir in root.ancestors() {
        let p = dir.join("shared/data").join(rel);
        if p.exists() {
            return Ok(Some(p));
        }
        tried.push(p);
    }
    let tried: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
    if std::env::var("KCAPI_ALLOW_MISSING_DATA").is_ok_and(|v| v == "1") {
        println!("SKIPPED: {rel} not found (looked in {})", tried.join(", "));
        return Ok(None);
    }
    Err(format!(
        "{rel} not found (looked in {}); set KCAPI_DATA to the shared data directory, or KCAPI_ALLOW_MISSING_DATA=1 to skip",
        tried.join(", ")
    ))
}

#[test]
fn openb_trace_prefix_runs() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let Some(trace) = shared_data("alibaba-openb/openb_pod_list_default.csv")? else {
        return Ok(());
    };
    let mut ls = scenario::load(&root.join("examples/openb.yaml"))?;
    ls.apply(&scenario::Overrides {
        openb: Some(trace),
        openb_limit: Some(150),
        ..scenario::Overrides::default()
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
