//! `cargo xtask test`: the README's test command. Reuses a running control plane (an
//! explicit `KCAPI_KUBECONFIG`, or the shared one from `control-plane up`), otherwise starts
//! a private one, runs `cargo test --workspace` against it, and stops what it started, also
//! when tests fail or the run is interrupted.

use std::process::{ExitCode, Stdio};

use anyhow::{Context, Result};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::controlplane::{Children, Instance};

/// Totals over every `test result:` line cargo printed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Totals {
    passed: u64,
    failed: u64,
    ignored: u64,
}

impl Totals {
    fn add_line(&mut self, line: &str) {
        let Some(rest) = line.trim().strip_prefix("test result: ") else {
            return;
        };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(label), Some(count)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(count) = count.parse::<u64>() else {
                continue;
            };
            match label {
                "passed" => self.passed += count,
                "failed" => self.failed += count,
                "ignored" => self.ignored += count,
                _ => {}
            }
        }
    }
}

pub async fn run(fresh: bool, args: Vec<String>) -> Result<ExitCode> {
    let (kubeconfig, started): (std::path::PathBuf, Option<(Instance, Children)>) =
        match std::env::var_os(testenv::KUBECONFIG_ENV).filter(|v| !v.is_empty()) {
            Some(path) => (path.into(), None),
            None => {
                let shared = Instance::default_instance();
                if !fresh && shared.is_ready().await {
                    eprintln!(
                        "xtask: using the running control plane {}",
                        shared.dir.display()
                    );
                    crate::controlplane::install_crds(
                        &crate::controlplane::client_for(&shared.kubeconfig()).await?,
                    )
                    .await?;
                    (shared.kubeconfig(), None)
                } else {
                    let private = Instance::private();
                    let children = private.up().await?;
                    (private.kubeconfig(), Some((private, children)))
                }
            }
        };

    // The chart tests render with helm (built once per machine, like the control plane).
    let mut started = started;
    let result = match crate::helm::ensure() {
        Ok(helm) => run_cargo_test(&kubeconfig, &helm, &args, started.as_mut()).await,
        Err(e) => Err(e),
    };
    if let Some((instance, children)) = started {
        instance.stop(children);
        let _ = std::fs::remove_dir_all(&instance.dir);
        eprintln!("xtask: stopped the control plane it started");
    }
    let (success, totals) = result?;
    // One plain closing line, whatever order cargo ran the test binaries in.
    println!(
        "summary: {} passed, {} failed, {} skipped",
        totals.passed, totals.failed, totals.ignored
    );
    Ok(if success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn run_cargo_test(
    kubeconfig: &std::path::Path,
    helm: &std::path::Path,
    args: &[String],
    mut started: Option<&mut (Instance, Children)>,
) -> Result<(bool, Totals)> {
    let mut child = crate::cargo_command()
        // Every test binary runs even after a failure, so one run reports everything.
        .args(["test", "--workspace", "--no-fail-fast"])
        .args(args)
        .env(testenv::KUBECONFIG_ENV, kubeconfig)
        .env("KCAPI_HELM", helm)
        .stdout(Stdio::piped())
        .spawn()
        .context("starting cargo test")?;
    let stdout = child.stdout.take().context("cargo test stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut totals = Totals::default();
    let mut interrupted = false;
    // The control plane this run started, checked every few seconds: if etcd or the
    // kube-apiserver dies, say how and keep their logs now, not after the tests time out.
    let mut watch = tokio::time::interval(std::time::Duration::from_secs(2));
    let mut died = false;
    loop {
        tokio::select! {
            _ = watch.tick(), if !died && started.is_some() => {
                if let Some((instance, children)) = started.as_deref_mut()
                    && let Some(why) = children.first_exit(instance)
                {
                    died = true;
                    eprintln!("xtask: the test control plane failed: {why}");
                    match instance.keep_logs() {
                        Ok(dir) => eprintln!("xtask: its logs are kept in {}", dir.display()),
                        Err(e) => eprintln!("xtask: could not keep its logs: {e}"),
                    }
                }
            }
            line = lines.next_line() => match line? {
                Some(line) => {
                    println!("{line}");
                    totals.add_line(&line);
                }
                None => break,
            },
            _ = tokio::signal::ctrl_c(), if !interrupted => {
                // cargo got the same Ctrl-C; wait for it so cleanup runs after it.
                interrupted = true;
                eprintln!("xtask: interrupted, waiting for cargo test to stop");
            }
        }
    }
    let status = child.wait().await?;
    Ok((status.success() && !interrupted && !died, totals))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_cargo_result_lines() {
        let mut totals = Totals::default();
        totals.add_line("test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s");
        totals.add_line(
            "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out",
        );
        totals.add_line("running 3 tests");
        assert_eq!(
            totals,
            Totals {
                passed: 15,
                failed: 2,
                ignored: 1
            }
        );
    }
}
