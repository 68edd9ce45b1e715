//! Developer tasks for karpenter-capi: `cargo xtask <command>`.
//!
//! - `control-plane up|down|env|status`: the test control plane (real etcd and
//!   kube-apiserver on loopback, built once per machine from their Go modules).
//! - `crdgen [--check]`: write (or check) `config/crd/` from the Rust API types.
//! - `helm`: build (once per machine) and print the path of the `helm` binary.
//! - `test [-- <cargo test args>]`: start the control plane if none runs, run every test in
//!   the workspace against it, stop what it started, exit non-zero on any failure.
//! - `e2e-env up|down|status`: the end-to-end environment (control plane + kube-scheduler,
//!   kube-controller-manager, Cluster API, kwok, fake infrastructure provider); see [`e2e`].
//! - `e2e [-- <test args>]`: the end-to-end scenarios (`tests/e2e`), in a private
//!   environment unless the shared one runs.
//! - `demo [--for <seconds>]`: the end-to-end environment, a sample cluster, the controller
//!   and a workload that grows and shrinks, shown live; see [`demo`].

mod cargobin;
mod controlplane;
mod crdgen;
mod demo;
mod e2e;
mod gobuild;
mod helm;
mod pki;
mod testrun;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use controlplane::Instance;

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "karpenter-capi developer tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Manage the shared test control plane.
    #[command(name = "control-plane", subcommand)]
    ControlPlane(ControlPlane),
    /// Generate the CRD YAML in config/crd/ from the Rust types.
    Crdgen {
        /// Fail if the files on disk differ from the generated ones instead of writing.
        #[arg(long)]
        check: bool,
    },
    /// Build helm from its Go module (once per machine) and print its path.
    Helm,
    /// Manage the end-to-end environment (control plane + scheduler, controller-manager,
    /// Cluster API, kwok, fake infrastructure).
    #[command(name = "e2e-env", subcommand)]
    E2eEnv(E2eEnv),
    /// Run the end-to-end scenarios (starting a private environment unless one runs).
    E2e {
        /// Arguments for the scenario test binary (after `--`), e.g. a test name filter.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Watch the autoscaler work: environment, sample cluster, controller, a workload that
    /// grows and shrinks; runs until Ctrl-C.
    Demo {
        /// Stop after this many seconds instead of waiting for Ctrl-C.
        #[arg(long = "for")]
        duration: Option<u64>,
    },
    /// Run every test in the workspace against a test control plane.
    Test {
        /// Always start a private control plane, even if the shared one is running.
        #[arg(long)]
        fresh: bool,
        /// Then run the end-to-end scenarios and the guides (`cargo xtask e2e`), even when
        /// the workspace tests failed; the exit code is a failure if either did.
        #[arg(long)]
        e2e: bool,
        /// Arguments passed to `cargo test --workspace` (after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
enum E2eEnv {
    /// Build what is missing, start everything, print the kubeconfig path.
    Up,
    /// Stop everything `up` started.
    Down,
    /// Each process with its PID and RSS, or how it ended.
    Status,
    /// Only build (or check) the e2e binaries (not kube-apiserver/etcd: `control-plane build`).
    Build,
    /// (internal) The supervisor that `up` starts in the background.
    #[command(hide = true)]
    Supervise {
        #[arg(long)]
        dir: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum ControlPlane {
    /// Build the binaries if needed, start etcd and kube-apiserver, install the CRDs and
    /// print the kubeconfig path.
    Up,
    /// Stop the processes `up` started.
    Down,
    /// Print `export KUBECONFIG=...` for a shell.
    Env,
    /// Say whether the control plane is running and ready.
    Status,
    /// Only build (or check) kube-apiserver and etcd.
    Build,
}

/// `cargo` (or `$CARGO`) in the workspace root, for a build or test xtask runs itself.
///
/// `cargo xtask` runs this binary through `cargo run`, which sets `CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_*` and the like to xtask's. Build scripts that watch them (ring's watches the
/// manifest dir and the package name and version) saw them set here and unset under a plain
/// `cargo clippy` or `cargo run -p xtask`, and a different clone path in every CI run: ring
/// and everything above it (rustls, kube, every crate of ours) rebuilt in each of CI's cargo
/// invocations. Removing them gives every invocation the environment of a plain `cargo`.
pub fn cargo_command() -> tokio::process::Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let mut command = tokio::process::Command::new(cargo);
    command.current_dir(repo_root());
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_MANIFEST_")
            || [
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
            ]
            .contains(&name.as_ref())
        {
            command.env_remove(name.as_ref());
        }
    }
    command
}

/// The workspace root (xtask lives one level below it).
pub fn repo_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::ControlPlane(ControlPlane::Up) => {
            let instance = Instance::default_instance();
            // The processes outlive this command; `down` stops them.
            let _children = instance.up().await?;
            println!("{}", instance.kubeconfig().display());
        }
        Command::ControlPlane(ControlPlane::Down) => {
            let stopped = Instance::default_instance().down_quiet();
            if stopped.is_empty() {
                eprintln!("xtask: control plane was not running");
            } else {
                eprintln!("xtask: stopped PIDs {stopped:?}");
            }
        }
        Command::ControlPlane(ControlPlane::Env) => {
            println!(
                "export KUBECONFIG={}",
                Instance::default_instance().kubeconfig().display()
            );
        }
        Command::ControlPlane(ControlPlane::Status) => {
            let instance = Instance::default_instance();
            if instance.is_ready().await {
                println!("running: {}", instance.kubeconfig().display());
            } else {
                println!("not running");
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::ControlPlane(ControlPlane::Build) => {
            let binaries = gobuild::ensure_binaries()?;
            println!(
                "{}\n{}",
                binaries.kube_apiserver.display(),
                binaries.etcd.display()
            );
        }
        Command::E2eEnv(E2eEnv::Up) => {
            println!("{}", e2e::up(&e2e::shared_dir())?.display());
        }
        Command::E2eEnv(E2eEnv::Down) => {
            if !e2e::down(&e2e::shared_dir())? {
                eprintln!("xtask: e2e environment was not running");
            }
        }
        Command::E2eEnv(E2eEnv::Status) => return e2e::status(&e2e::shared_dir()),
        Command::E2eEnv(E2eEnv::Build) => {
            let b = e2e::build::ensure_e2e_binaries()?;
            for path in [
                b.kube_scheduler,
                b.kube_controller_manager,
                b.capi_manager,
                b.kwok,
            ] {
                println!("{}", path.display());
            }
        }
        Command::E2eEnv(E2eEnv::Supervise { dir }) => return e2e::supervise(&dir).await,
        Command::E2e { args } => return e2e::run::run(args).await,
        Command::Demo { duration } => return demo::run(duration).await,
        Command::Crdgen { check } => return crdgen::run(check),
        Command::Helm => println!("{}", helm::ensure()?.display()),
        Command::Test { fresh, e2e, args } => {
            let tests = testrun::run(fresh, args).await?;
            if !e2e {
                return Ok(tests);
            }
            let scenarios = e2e::run::run(Vec::new()).await?;
            return Ok(if tests == ExitCode::SUCCESS {
                scenarios
            } else {
                tests
            });
        }
    }
    Ok(ExitCode::SUCCESS)
}
