//! Builds one of the workspace's binaries (debug profile) for a command that runs it as a
//! separate process: the demo's controller, the guides' `karpenter-capi`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// `cargo build -p <package>`, then the path of its binary `<bin>` in the target dir.
pub async fn build(root: &Path, package: &str, bin: &str) -> Result<PathBuf> {
    run_cargo_build(root, &["-p", package]).await?;
    binary_path(root, bin)
}

/// Builds the binary `<bin>` with the features `cargo test --workspace` resolves (every
/// member's dev-dependencies included), so a test run right after reuses every crate it
/// builds. `cargo build -p <package>` resolves features for that package alone: a different
/// feature set for shared dependencies, hence every crate of ours compiled a second time.
pub async fn build_like_workspace_tests(root: &Path, bin: &str) -> Result<PathBuf> {
    run_cargo_build(root, &["--workspace", "--tests", "--bin", bin]).await?;
    binary_path(root, bin)
}

async fn run_cargo_build(root: &Path, args: &[&str]) -> Result<()> {
    let status = crate::cargo_command()
        .current_dir(root)
        .arg("build")
        .args(args)
        .status()
        .await
        .with_context(|| format!("cargo build {}", args.join(" ")))?;
    if !status.success() {
        bail!("cargo build {} failed", args.join(" "));
    }
    Ok(())
}

fn binary_path(root: &Path, bin: &str) -> Result<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| if t.is_absolute() { t } else { root.join(t) })
        .unwrap_or_else(|| root.join("target"));
    let path = target.join("debug").join(bin);
    if !path.is_file() {
        bail!("no {bin} binary at {}", path.display());
    }
    Ok(path)
}
