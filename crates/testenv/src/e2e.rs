//! Test-only access to the end-to-end environment that `cargo xtask e2e-env up` (or
//! `cargo xtask e2e`) starts: the test control plane plus kube-scheduler,
//! kube-controller-manager, the Cluster API core manager (with its webhooks), kwok and the
//! fake infrastructure provider (`kcapi-fake-infra`).
//!
//! The environment's supervisor writes `env.json` into its directory once everything is
//! ready and removes it when it stops, so a test finds a running environment by reading it.

use std::path::PathBuf;

use kube::Client;

/// Environment variable naming the e2e environment's directory; `cargo xtask e2e` sets it.
pub const E2E_DIR_ENV: &str = "KCAPI_E2E_DIR";

const NOT_RUNNING: &str =
    "e2e environment not running: run `cargo xtask e2e-env up` or `cargo xtask e2e`";

/// The e2e environment's directory: `KCAPI_E2E_DIR`, else `<cache>/e2e` (the shared one).
pub fn dir() -> PathBuf {
    match std::env::var_os(E2E_DIR_ENV).filter(|p| !p.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => crate::cache_dir().join("e2e"),
    }
}

/// What a test needs to know about the running environment.
#[derive(Debug, Clone)]
pub struct E2eEnv {
    /// Admin kubeconfig of the API server (management and workload cluster at once).
    pub kubeconfig: PathBuf,
    /// Admin kubeconfig of the separate workload cluster (a second API server with its own
    /// scheduler, controller-manager and kwok), for scenarios of the two-cluster setup.
    pub workload_kubeconfig: Option<PathBuf>,
    /// The environment's directory (process logs are there).
    pub dir: PathBuf,
    /// The whole `env.json` (process IDs, ports, log files, start timings).
    pub info: serde_json::Value,
}

/// The running e2e environment.
///
/// # Panics
/// When it is not running (the message says how to start it).
pub fn e2e_env() -> E2eEnv {
    let dir = dir();
    let path = dir.join("env.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{NOT_RUNNING} (no {}: {e})", path.display()));
    let info: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{NOT_RUNNING} (bad {}: {e})", path.display()));
    let kubeconfig = info
        .get("kubeconfig")
        .and_then(|k| k.as_str())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{NOT_RUNNING} ({} names no kubeconfig)", path.display()));
    let workload_kubeconfig = info
        .get("workload_kubeconfig")
        .and_then(|k| k.as_str())
        .map(PathBuf::from);
    E2eEnv {
        kubeconfig,
        workload_kubeconfig,
        dir,
        info,
    }
}

/// An admin client for the e2e environment's API server.
///
/// # Panics
/// When the environment is not running.
pub async fn e2e_client() -> Client {
    crate::client_for(&e2e_env().kubeconfig).await
}
