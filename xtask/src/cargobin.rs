//! Builds one of the workspace's binaries (debug profile) for a command that runs it as a
//! separate process: the demo's controller, the guides' `karpenter-capi`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// `cargo build -p <package>`, then the path of its binary `<bin>` in the target dir.
pub async fn build(root: &Path, package: &str, bin: &str) -> Result<PathBuf> {
    let status = crate::cargo_command()
        .current_dir(root)
        .args(["build", "-p", package])
        .status()
        .await
        .with_context(|| format!("cargo build -p {package}"))?;
    if !status.success() {
        bail!("building {package} failed");
    }
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
