//! `cargo xtask crdgen`: writes `config/crd/<group>_<plural>.yaml` from the Rust types (the
//! way controller-rs's crdgen does), or with `--check` fails when they are stale. The same
//! check runs as a test in `tests/`, so a type change without regenerated YAML fails CI.

use std::process::ExitCode;

use anyhow::Result;

pub fn run(check: bool) -> Result<ExitCode> {
    let dir = crate::repo_root().join("config").join("crd");
    // The Helm chart ships the same files (helm installs a chart's crds/ as they are).
    let chart = crate::repo_root().join("charts/karpenter-capi/crds");
    std::fs::create_dir_all(&dir)?;
    let mut stale = Vec::new();
    for (crd, dir) in karpenter_api::crd::crds()
        .into_iter()
        .flat_map(|c| [(c.clone(), dir.clone()), (c, chart.clone())])
    {
        let path = dir.join(karpenter_api::crd::file_name(&crd));
        let yaml = karpenter_api::crd::to_yaml(&crd)?;
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == yaml {
            continue;
        }
        if check {
            stale.push(path.display().to_string());
        } else {
            std::fs::write(&path, yaml)?;
            eprintln!("xtask: wrote {}", path.display());
        }
    }
    if stale.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "xtask: stale CRD YAML (run `cargo xtask crdgen`): {}",
            stale.join(", ")
        );
        Ok(ExitCode::FAILURE)
    }
}
