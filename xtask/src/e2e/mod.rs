//! The end-to-end environment: the test control plane plus everything that makes it behave
//! like a cluster managed by Cluster API.
//!
//! | process | role |
//! | --- | --- |
//! | etcd, kube-apiserver | the control plane ([`crate::controlplane`]) with every CRD |
//! | kube-scheduler | binds pods to nodes |
//! | kube-controller-manager | Deployments/ReplicaSets, GC, node lifecycle, PDBs, ... ([`components::KCM_CONTROLLERS`]) |
//! | capi-manager | Cluster API core: Cluster, MachineDeployment, MachineSet, Machine controllers and webhooks ([`capi`]) |
//! | kwok | plays the kubelet of every node the fake provider creates |
//! | fake-infra (task) | the fake infrastructure provider and a fake OpenShift Machine API (`kcapi-fake-infra`), inside the supervisor |
//! | workload-kube-apiserver, workload-kube-scheduler, workload-kube-controller-manager, workload-kwok | a second, separate workload cluster ([`workload`]) |
//!
//! Most scenarios use one API server as both the management and the workload cluster: their
//! Cluster's kubeconfig Secret points back at it (see `kcapi_fake_infra::fixtures`). What real
//! CAPI users run, a management cluster apart from the workload cluster, is the second API
//! server (on the same etcd under its own prefix, with its own scheduler, controller-manager
//! and kwok); `env.json` names its kubeconfig as `workload_kubeconfig`, and a scenario whose
//! Cluster's Secret points there has its nodes, pods and Karpenter objects in it.
//!
//! `e2e-env up` builds what is missing, then starts a supervisor (`e2e-env supervise`, this
//! same binary) in the background and waits until it reports ready. The supervisor is the
//! parent of every process, so it records how each one ended (`<name>.exit` next to
//! `<name>.log`); it writes `env.json` (kubeconfig, PIDs, logs, start timings) when all is
//! ready, and on SIGTERM (`e2e-env down`) stops everything, newest first, and removes it.
//! `cargo xtask e2e` does the same with a private directory around the scenario tests.

pub mod build;
pub mod capi;
pub mod components;
pub mod procs;
pub mod run;
pub mod workload;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::controlplane::{self, Instance};
use crate::{gobuild, pki};
use procs::{Procs, describe, rss_mib, tail};

/// The shared environment's directory (testenv's default).
pub fn shared_dir() -> PathBuf {
    testenv::cache_dir().join("e2e")
}

fn env_json(dir: &Path) -> PathBuf {
    dir.join("env.json")
}

fn supervisor_pid_path(dir: &Path) -> PathBuf {
    dir.join("supervisor.pid")
}

/// The supervisor's PID, if one runs for `dir`.
fn supervisor_pid(dir: &Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(supervisor_pid_path(dir))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let cmdline = String::from_utf8_lossy(&cmdline);
    (cmdline.contains("xtask") && cmdline.contains("supervise")).then_some(pid)
}

/// Whether the environment in `dir` is up (supervisor alive and ready).
pub fn is_running(dir: &Path) -> bool {
    supervisor_pid(dir).is_some() && env_json(dir).is_file()
}

/// Builds what is missing, starts the supervisor for `dir` and waits until it is ready.
/// Returns the kubeconfig path.
pub fn up(dir: &Path) -> Result<PathBuf> {
    // Someone else's `up` may be starting it right now: wait for that supervisor instead of
    // removing its directory from under it.
    let deadline = Instant::now() + Duration::from_secs(300);
    while supervisor_pid(dir).is_some() && !env_json(dir).is_file() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(500));
    }
    if is_running(dir) {
        eprintln!("xtask: e2e environment already running ({})", dir.display());
        return Ok(dir.join("control-plane").join("kubeconfig"));
    }
    if let Some(pid) = supervisor_pid(dir) {
        bail!(
            "an e2e supervisor (pid {pid}) for {} is still starting after 300 s",
            dir.display()
        );
    }
    let build_started = Instant::now();
    gobuild::ensure_binaries()?;
    build::ensure_e2e_binaries()?;
    let build_secs = build_started.elapsed().as_secs_f64();
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing old {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir)?;
    let log = dir.join("supervisor.log");
    let out = std::fs::File::create(&log)?;
    let started = Instant::now();
    let mut child = Command::new(std::env::current_exe()?)
        .args(["e2e-env", "supervise", "--dir"])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out))
        .process_group(0)
        .spawn()
        .context("starting the e2e supervisor")?;
    std::fs::write(supervisor_pid_path(dir), child.id().to_string())?;
    eprintln!(
        "xtask: starting the e2e environment (supervisor pid {}, log {})",
        child.id(),
        log.display()
    );
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        if env_json(dir).is_file() {
            break;
        }
        if let Some(status) = child.try_wait()? {
            bail!(
                "the e2e supervisor ended ({}) before the environment was ready; last lines of {}:\n{}",
                describe(status),
                log.display(),
                tail(&log, 60)
            );
        }
        if Instant::now() > deadline {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            bail!(
                "e2e environment not ready after 300 s; last lines of {}:\n{}",
                log.display(),
                tail(&log, 60)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "xtask: e2e environment ready in {:.1} s (builds/checks {:.1} s before)",
        started.elapsed().as_secs_f64(),
        build_secs
    );
    // The supervisor keeps running; it was started in its own process group.
    drop(child);
    Ok(dir.join("control-plane").join("kubeconfig"))
}

/// Stops the supervisor of `dir` (which stops everything it started). Returns whether one ran.
pub fn down(dir: &Path) -> Result<bool> {
    let Some(pid) = supervisor_pid(dir) else {
        return Ok(false);
    };
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
    let deadline = Instant::now() + Duration::from_secs(90);
    while supervisor_pid(dir).is_some() {
        if Instant::now() > deadline {
            bail!("e2e supervisor {pid} did not stop in 90 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::fs::remove_file(supervisor_pid_path(dir));
    Ok(true)
}

/// Prints each process with its PID and RSS, or how it ended.
pub fn status(dir: &Path) -> Result<ExitCode> {
    let Ok(text) = std::fs::read_to_string(env_json(dir)) else {
        println!("not running ({})", dir.display());
        return Ok(ExitCode::FAILURE);
    };
    let env: serde_json::Value = serde_json::from_str(&text)?;
    let running = supervisor_pid(dir).is_some();
    println!(
        "{}: {}",
        if running {
            "running"
        } else {
            "supervisor gone"
        },
        env["kubeconfig"].as_str().unwrap_or("")
    );
    if let Some(processes) = env["processes"].as_object() {
        for (name, p) in processes {
            let pid = p["pid"].as_u64().unwrap_or(0) as u32;
            let state = match rss_mib(pid) {
                Some(rss) => format!("RSS {rss:.0} MiB"),
                None => std::fs::read_to_string(dir.join(format!("{name}.exit")))
                    .map(|e| format!("ended: {e}"))
                    .unwrap_or_else(|_| "not running".into()),
            };
            println!("  {name:<24} pid {pid:<8} {state}");
        }
    }
    if let Some(supervisor) = supervisor_pid(dir).and_then(rss_mib) {
        println!(
            "  {:<24} RSS {supervisor:.0} MiB (includes fake-infra)",
            "supervisor"
        );
    }
    Ok(if running {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Blocks until `port` on 127.0.0.1 accepts connections, a process ends, or the timeout.
async fn wait_port(procs: &mut Procs, name: &str, port: u16, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        procs.check_alive(name)?;
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{name} not listening on 127.0.0.1:{port} after {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Plain-HTTP GET on 127.0.0.1 (the CAPI manager's health endpoint); returns the status line.
fn http_get(port: u16, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response.lines().next().unwrap_or_default().to_string())
}

/// The supervisor: starts everything, records timings, waits for SIGTERM/SIGINT while
/// reaping processes, then stops everything.
pub async fn supervise(dir: &Path) -> Result<ExitCode> {
    use tokio::signal::unix::{SignalKind, signal};
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env() // kube's client logs every failed /readyz poll while the apiserver starts.
                .unwrap_or_else(|_| "info,kube_client::client::builder=off".into()),
        )
        .with_ansi(false)
        .try_init();
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut procs = Procs::new(dir);
    let result = tokio::select! {
        r = start(dir, &mut procs) => r,
        _ = terminate.recv() => Err(anyhow::anyhow!("stopped (SIGTERM) while starting")),
        _ = interrupt.recv() => Err(anyhow::anyhow!("stopped (SIGINT) while starting")),
    };
    let (provider, timings) = match result {
        Ok(started) => started,
        Err(e) => {
            eprintln!("e2e: start failed: {e:#}");
            procs.stop_all(Duration::from_secs(10));
            let _ = std::fs::remove_dir_all(dir.join("control-plane").join("etcd-data"));
            return Ok(ExitCode::FAILURE);
        }
    };
    let env = json!({
        "kubeconfig": dir.join("control-plane").join("kubeconfig"),
        "workload_kubeconfig": workload::kubeconfig(dir),
        "dir": dir,
        "supervisor_pid": std::process::id(),
        "processes": procs
            .info()
            .into_iter()
            .map(|(name, info)| (name, json!({ "pid": info.pid, "log": info.log })))
            .collect::<serde_json::Map<_, _>>(),
        "start_seconds": timings,
    });
    std::fs::write(env_json(dir), serde_json::to_string_pretty(&env)?)?;
    eprintln!(
        "e2e: ready: {}",
        serde_json::to_string(&env["start_seconds"])?
    );
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {
                for (name, how) in procs.poll() {
                    eprintln!("e2e: {name} ENDED: {how}; the environment is degraded (see {name}.log)");
                }
            }
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
        }
    }
    eprintln!("e2e: stopping");
    let _ = std::fs::remove_file(env_json(dir));
    provider.abort();
    procs.stop_all(Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(dir.join("control-plane").join("etcd-data"));
    Ok(ExitCode::SUCCESS)
}

/// Starts every component in dependency order; returns the provider task and the seconds
/// each step took.
async fn start(
    dir: &Path,
    procs: &mut Procs,
) -> Result<(tokio::task::JoinHandle<()>, serde_json::Value)> {
    let t0 = Instant::now();
    let mut timings = serde_json::Map::new();
    let mut mark = |name: &str, since: &mut Instant| {
        timings.insert(
            name.into(),
            json!((since.elapsed().as_secs_f64() * 10.0).round() / 10.0),
        );
        *since = Instant::now();
    };
    let mut step = Instant::now();
    let binaries = build::ensure_e2e_binaries()?;

    // 1. etcd + kube-apiserver with every CRD.
    let instance = Instance {
        dir: dir.join("control-plane"),
    };
    let children = instance.up().await?;
    for (name, child, log) in children.into_named(&instance) {
        procs.adopt(name, child, log);
    }
    let kubeconfig = instance.kubeconfig();
    let pki = pki::Pki::at(&instance.dir.join("pki"));
    let client = controlplane::client_for(&kubeconfig).await?;
    mark("control_plane", &mut step);
    let workload_ports = workload::start(dir, &kubeconfig, &binaries, &pki, procs).await?;
    mark("workload_cluster", &mut step);

    // 2. CAPI: webhook certificates and configurations, then the manager.
    let cert_dir = dir.join("capi-webhook-certs");
    let ca = pki::webhook_serving(&cert_dir)?;
    let ports = capi::Ports {
        webhook: controlplane::free_port()?,
        health: controlplane::free_port()?,
        diagnostics: controlplane::free_port()?,
    };
    capi::install_webhooks(&client, ports.webhook, &ca).await?;
    procs.spawn(
        "capi-manager",
        &mut capi::command(&binaries.capi_manager, &kubeconfig, &cert_dir, ports),
    )?;

    // 3. Scheduler, controller-manager, kwok (in parallel with CAPI's start).
    let scheduler_port = controlplane::free_port()?;
    procs.spawn(
        "kube-scheduler",
        &mut components::scheduler(&binaries.kube_scheduler, &kubeconfig, scheduler_port, dir),
    )?;
    let kcm_port = controlplane::free_port()?;
    procs.spawn(
        "kube-controller-manager",
        &mut components::controller_manager(
            &binaries.kube_controller_manager,
            &kubeconfig,
            kcm_port,
            dir,
            &pki,
        ),
    )?;
    let kwok_port = controlplane::free_port()?;
    procs.spawn(
        "kwok",
        &mut components::kwok(
            &binaries.kwok,
            &kubeconfig,
            kwok_port,
            &components::kwok_stage_files()?,
        ),
    )?;

    // 4. The fake infrastructure provider, in this process.
    kcapi_fake_infra::crd::install(&client).await?;
    // With it, a fake OpenShift Machine API for the MachineSets that opt in (scenario 8).
    let provider = {
        let client = client.clone();
        tokio::spawn(async move {
            tokio::join!(
                kcapi_fake_infra::provider::run(
                    client.clone(),
                    kcapi_fake_infra::provider::Config::default(),
                ),
                kcapi_fake_infra::openshift::run(
                    client,
                    Duration::from_millis(250),
                    Duration::from_millis(500),
                ),
            );
        })
    };

    // Readiness: CAPI's /readyz (webhook server up), the others listening.
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        procs.check_all_alive()?;
        if http_get(ports.health, "/readyz").is_ok_and(|l| l.contains(" 200")) {
            break;
        }
        if Instant::now() > deadline {
            bail!(
                "capi-manager not ready after 180 s; last lines of its log:\n{}",
                tail(&dir.join("capi-manager.log"), 40)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The probe answered, but was it the manager? A process that took its health port
    // answers too (kwok's server once did, while the manager had exited at once with
    // "address already in use"): the manager must still be running.
    procs.check_alive("capi-manager")?;
    mark("capi_ready", &mut step);
    let listen = Duration::from_secs(120);
    wait_port(procs, "kube-scheduler", scheduler_port, listen).await?;
    wait_port(procs, "kube-controller-manager", kcm_port, listen).await?;
    wait_port(procs, "kwok", kwok_port, listen).await?;
    for (name, port) in workload_ports {
        wait_port(procs, name, port, listen).await?;
    }
    mark("others_listening", &mut step);
    timings.insert(
        "total".into(),
        json!((t0.elapsed().as_secs_f64() * 10.0).round() / 10.0),
    );
    Ok((provider, serde_json::Value::Object(timings)))
}
