//! The environment's child processes: each with its own log file, its exit status recorded
//! (exit code or signal, in `<name>.exit` next to its log and in the supervisor's log) the
//! moment it ends, and a failed start reported with the status and the log's tail.
//!
//! Only the supervisor, the processes' parent, can learn how a process ended (`waitpid`);
//! that is why `e2e-env up` runs a supervisor process instead of leaving orphans behind.

use std::fs::File;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::Serialize;

/// One supervised process.
#[derive(Debug)]
pub struct Proc {
    pub name: String,
    pub pid: u32,
    pub log: PathBuf,
    child: Child,
    exit: Option<ExitStatus>,
}

/// What `env.json` records per process.
#[derive(Debug, Clone, Serialize)]
pub struct ProcInfo {
    pub pid: u32,
    pub log: PathBuf,
}

/// The supervised processes, in start order.
#[derive(Debug)]
pub struct Procs {
    dir: PathBuf,
    procs: Vec<Proc>,
}

/// "exit code 1", "killed by signal 9 (SIGKILL)".
pub fn describe(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit code {code}");
    }
    match status.signal() {
        Some(signal) => {
            let name = match signal {
                1 => " (SIGHUP)",
                2 => " (SIGINT)",
                6 => " (SIGABRT)",
                9 => " (SIGKILL: the OOM killer or someone's kill -9)",
                11 => " (SIGSEGV)",
                15 => " (SIGTERM)",
                _ => "",
            };
            format!("killed by signal {signal}{name}")
        }
        None => format!("{status}"),
    }
}

/// The last `lines` lines of a log file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    let tail = all[all.len().saturating_sub(lines)..].join("\n");
    if tail.is_empty() {
        "(log is empty)".to_string()
    } else {
        tail
    }
}

impl Procs {
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
            procs: Vec::new(),
        }
    }

    /// Starts `command` with stdout and stderr into `<dir>/<name>.log`, in its own process
    /// group (a Ctrl-C meant for a terminal never reaches it; the supervisor stops it).
    pub fn spawn(&mut self, name: &str, command: &mut Command) -> Result<u32> {
        let log = self.dir.join(format!("{name}.log"));
        let out = File::create(&log)?;
        let err = out.try_clone()?;
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {name} ({:?})", command.get_program()))?;
        let pid = child.id();
        eprintln!("e2e: started {name} (pid {pid}, log {})", log.display());
        self.procs.push(Proc {
            name: name.to_string(),
            pid,
            log,
            child,
            exit: None,
        });
        Ok(pid)
    }

    /// Takes over processes someone else started (the control plane's etcd and apiserver).
    pub fn adopt(&mut self, name: &str, child: Child, log: PathBuf) {
        self.procs.push(Proc {
            name: name.to_string(),
            pid: child.id(),
            log,
            child,
            exit: None,
        });
    }

    pub fn info(&self) -> Vec<(String, ProcInfo)> {
        self.procs
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    ProcInfo {
                        pid: p.pid,
                        log: p.log.clone(),
                    },
                )
            })
            .collect()
    }

    /// Reaps processes that ended since the last call, records and returns
    /// `(name, description)` for each.
    pub fn poll(&mut self) -> Vec<(String, String)> {
        let mut ended = Vec::new();
        for p in self.procs.iter_mut().filter(|p| p.exit.is_none()) {
            if let Ok(Some(status)) = p.child.try_wait() {
                p.exit = Some(status);
                let text = describe(status);
                let _ = std::fs::write(self.dir.join(format!("{}.exit", p.name)), &text);
                ended.push((p.name.clone(), text));
            }
        }
        ended
    }

    /// An error naming how `name` ended and its log's tail if it is no longer running.
    pub fn check_alive(&mut self, name: &str) -> Result<()> {
        self.poll();
        if let Some(p) = self.procs.iter().find(|p| p.name == name)
            && let Some(status) = p.exit
        {
            bail!(
                "{name} (pid {}) ended: {}; last lines of {}:\n{}",
                p.pid,
                describe(status),
                p.log.display(),
                tail(&p.log, 40)
            );
        }
        Ok(())
    }

    /// Any process that ended, as an error (used while waiting for readiness).
    pub fn check_all_alive(&mut self) -> Result<()> {
        let names: Vec<String> = self.procs.iter().map(|p| p.name.clone()).collect();
        for name in names {
            self.check_alive(&name)?;
        }
        Ok(())
    }

    /// Stops every process, last started first: SIGTERM, then SIGKILL after `grace`;
    /// records how each ended.
    pub fn stop_all(&mut self, grace: Duration) {
        for i in (0..self.procs.len()).rev() {
            let p = &mut self.procs[i];
            if p.exit.is_some() {
                continue;
            }
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(p.pid.to_string())
                .status();
            let deadline = Instant::now() + grace;
            let status = loop {
                match p.child.try_wait() {
                    Ok(Some(status)) => break Some(status),
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    _ => {
                        let _ = p.child.kill();
                        break p.child.wait().ok();
                    }
                }
            };
            if let Some(status) = status {
                p.exit = Some(status);
                let text = describe(status);
                let _ = std::fs::write(self.dir.join(format!("{}.exit", p.name)), &text);
                eprintln!("e2e: stopped {} ({text})", p.name);
            }
        }
    }
}

/// Resident set size of a process in MiB (from /proc), if it runs.
pub fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_exit_codes_and_signals() {
        let dir = std::env::temp_dir().join(testenv::unique_name("procs"));
        std::fs::create_dir_all(&dir).expect("dir");
        let mut procs = Procs::new(&dir);
        procs
            .spawn(
                "fails",
                Command::new("sh").args(["-c", "echo boom; exit 3"]),
            )
            .expect("spawn");
        procs
            .spawn("sleeps", Command::new("sleep").arg("30"))
            .expect("spawn");
        let deadline = Instant::now() + Duration::from_secs(10);
        while procs.check_alive("fails").is_ok() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let err = procs
            .check_alive("fails")
            .expect_err("it exited")
            .to_string();
        assert!(err.contains("exit code 3") && err.contains("boom"), "{err}");
        assert!(procs.check_alive("sleeps").is_ok());
        procs.stop_all(Duration::from_secs(5));
        let sleeps = std::fs::read_to_string(dir.join("sleeps.exit")).expect("recorded");
        assert_eq!(sleeps, "killed by signal 15 (SIGTERM)");
        assert_eq!(
            std::fs::read_to_string(dir.join("fails.exit")).expect("recorded"),
            "exit code 3"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
