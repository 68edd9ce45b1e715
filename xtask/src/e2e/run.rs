//! `cargo xtask e2e`: the end-to-end scenarios. Uses the shared environment if one runs
//! (`e2e-env up`), otherwise starts a private one (`<cache>/e2e-test-<pid>`) and stops it
//! afterwards; runs the `e2e-tests` crate's scenarios (they are `#[ignore]`d so a plain
//! `cargo test` skips them) and prints the RSS of every process before stopping.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};

const PRIVATE_PREFIX: &str = "e2e-test-";

pub async fn run(args: Vec<String>) -> Result<ExitCode> {
    cleanup_orphans();
    let shared = super::shared_dir();
    let (dir, private): (PathBuf, bool) = if super::is_running(&shared) {
        eprintln!(
            "xtask: using the running e2e environment {}",
            shared.display()
        );
        (shared, false)
    } else {
        let dir = testenv::cache_dir().join(format!("{PRIVATE_PREFIX}{}", std::process::id()));
        let started = Instant::now();
        super::up(&dir)?;
        eprintln!(
            "xtask: e2e environment up in {:.1} s (including any build)",
            started.elapsed().as_secs_f64()
        );
        (dir, true)
    };
    let started = Instant::now();
    let result = cargo_test(&dir, &args).await;
    eprintln!(
        "xtask: e2e scenarios took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let _ = super::status(&dir);
    if private {
        super::down(&dir)?;
        if matches!(result, Ok(true)) {
            let _ = std::fs::remove_dir_all(&dir);
        } else {
            eprintln!("xtask: logs kept in {}", dir.display());
        }
    }
    Ok(if result? {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The environment variable naming the admin CLI binary for the guides' commands
/// (`tests/e2e/tests/guides.rs`).
const CLI_ENV: &str = "KCAPI_CLI";

async fn cargo_test(dir: &Path, args: &[String]) -> Result<bool> {
    let root = crate::repo_root();
    // The guides run `karpenter-capi` and `helm` as a user would; build both first (a test
    // cannot run cargo while `cargo test` holds the target dir).
    let cli = crate::cargobin::build_like_workspace_tests(&root, "karpenter-capi").await?;
    crate::helm::ensure()?;
    // The scenarios are the workspace's only `#[ignore]`d tests. `--workspace --tests`, not
    // `-p e2e-tests` or `--test <scenario>`: cargo resolves dev-dependency features only for
    // the packages whose tests it builds, so either of those compiled every crate of ours a
    // second time (about 3 minutes of CI); this is the feature set `cargo xtask test` built.
    // `--tests` leaves out doctests, whose `ignore` blocks `--ignored` would run.
    let mut command = crate::cargo_command();
    command.args(["test", "--workspace", "--tests", "--no-fail-fast"]);
    let status = command
        .args(["--", "--ignored", "--nocapture"])
        .args(args)
        .env(testenv::e2e::E2E_DIR_ENV, dir)
        .env(CLI_ENV, &cli)
        .status()
        .await
        .context("running the e2e-tests scenarios")?;
    Ok(status.success())
}

/// Stops private environments whose `cargo xtask e2e` was killed.
fn cleanup_orphans() {
    let Ok(entries) = std::fs::read_dir(testenv::cache_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(owner) = name
            .strip_prefix(PRIVATE_PREFIX)
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let owner_alive = std::fs::read(format!("/proc/{owner}/cmdline"))
            .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("xtask"));
        if !owner_alive {
            if let Ok(true) = super::down(&entry.path()) {
                eprintln!("xtask: stopped orphaned e2e environment {name}");
            }
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// `.rs` files under `dir` with a line that starts with `needle` (comments aside),
    /// skipping `target` directories.
    fn files_containing(dir: &Path, needle: &str, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    files_containing(&path, needle, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && std::fs::read_to_string(&path)
                    .is_ok_and(|s| s.lines().any(|l| l.trim_start().starts_with(needle)))
            {
                out.push(path.display().to_string());
            }
        }
    }

    /// The e2e step runs every ignored test of the workspace (`cargo_test`); an ignored test
    /// anywhere else would run there, against the e2e environment, by surprise.
    #[test]
    fn only_the_e2e_scenarios_are_ignored_tests() {
        let root = crate::repo_root();
        let needle = "#[ignore";
        let mut found = Vec::new();
        for dir in ["crates", "bins", "benches", "xtask", "tests"] {
            files_containing(&root.join(dir), needle, &mut found);
        }
        let e2e = root.join("tests/e2e").display().to_string();
        let elsewhere: Vec<&String> = found.iter().filter(|f| !f.starts_with(&e2e)).collect();
        assert!(
            elsewhere.is_empty(),
            "ignored tests outside tests/e2e would run in the e2e step: {elsewhere:?}"
        );
        assert!(
            found.iter().any(|f| f.starts_with(&e2e)),
            "no ignored e2e scenario found under {e2e}"
        );
    }
}
