//! `cargo xtask helm`: builds `helm` from its Go module (`helm.sh/helm/v4/cmd/helm` at the
//! version pinned in `testenv::versions::HELM`) with the machine's Go, once per machine, into
//! `<cache>/bin/helm`, the way the control plane's binaries are built. A stamp file
//! (`<cache>/bin/HELM_VERSION`) records what it was built from; `cargo xtask test` calls
//! [`ensure`] so the chart tests find it.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use testenv::versions;

/// Where the binary goes.
pub fn path() -> PathBuf {
    testenv::cache_dir().join("bin").join("helm")
}

/// Returns the helm binary, building it first when missing or built from another version.
pub fn ensure() -> Result<PathBuf> {
    let bin = testenv::cache_dir().join("bin");
    let target = path();
    let stamp = bin.join("HELM_VERSION");
    let (module, version) = versions::HELM;
    let wanted = format!("{module}@{version}\n");
    if target.is_file() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str())
    {
        return Ok(target);
    }
    std::fs::create_dir_all(&bin)?;
    // `go install` into a scratch GOBIN, then rename: an interrupted build never leaves a
    // binary that looks complete.
    let scratch = testenv::cache_dir().join("helmbuild");
    std::fs::create_dir_all(&scratch)?;
    eprintln!(
        "xtask: building helm {version} from {module} (once per machine; a few minutes on 2 cores)"
    );
    let started = Instant::now();
    let status = Command::new("go")
        .args([
            "install",
            "-ldflags",
            "-s -w",
            &format!("{module}/cmd/helm@{version}"),
        ])
        .current_dir(std::env::temp_dir())
        .env("GOBIN", &scratch)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-buildvcs=false")
        .status()
        .context("Go is needed to build helm; install it (see .ci/run)")?;
    if !status.success() {
        bail!("go install {module}/cmd/helm@{version} failed ({status})");
    }
    std::fs::rename(scratch.join("helm"), &target)?;
    std::fs::write(&stamp, wanted)?;
    eprintln!("xtask: built helm in {:.0?}", started.elapsed());
    Ok(target)
}
