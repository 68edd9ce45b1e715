//! Locating Go modules in the machine's module cache, so upstream files (CRDs) are read from
//! the pinned release instead of being copied into this repository.

use std::path::PathBuf;
use std::process::Command;

/// The directory of `module@version` in the Go module cache, downloading it if needed
/// (`go mod download -json`). Returns a readable error when Go is missing or the download
/// fails.
pub fn try_module_dir(module: &str, version: &str) -> Result<PathBuf, String> {
    let spec = format!("{module}@{version}");
    // Outside any go.mod, so the download never touches a project's module graph.
    let output = Command::new("go")
        .args(["mod", "download", "-json", &spec])
        .current_dir(std::env::temp_dir())
        .env("GOTOOLCHAIN", "local")
        .output()
        .map_err(|e| format!("cannot run `go mod download {spec}` (is Go installed?): {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    // The JSON has one "Dir" field; avoid a JSON dependency for one string.
    let dir = stdout.lines().find_map(|line| {
        let line = line.trim();
        let rest = line.strip_prefix("\"Dir\": \"")?;
        Some(rest.trim_end_matches(',').trim_end_matches('"').to_string())
    });
    match dir {
        Some(dir) if output.status.success() && PathBuf::from(&dir).is_dir() => Ok(dir.into()),
        _ => Err(format!(
            "`go mod download -json {spec}` failed: {}{}",
            stdout.trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        )),
    }
}

/// Like [`try_module_dir`] for a `(module, version)` pin.
///
/// # Panics
/// When the module cannot be downloaded (test-only helper).
pub fn module_dir((module, version): (&str, &str)) -> PathBuf {
    try_module_dir(module, version).unwrap_or_else(|e| panic!("{e}"))
}
