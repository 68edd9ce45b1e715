//! Test-only access to the test control plane (a real kube-apiserver and etcd on
//! loopback) that `cargo xtask control-plane up` or `cargo xtask test` starts.
//!
//! Every test shares one control plane, so tests isolate themselves with their own
//! namespace ([`namespace`]) or unique object names ([`unique_name`]); that is what lets
//! `cargo test` run them in parallel.
//!
//! This crate panics instead of returning errors: it is only ever used from tests, where
//! a clear panic message is the most useful failure.

pub mod e2e;
pub mod gomod;
pub mod ports;
pub mod second;
pub mod versions;

pub use e2e::{E2eEnv, e2e_client, e2e_env};

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

/// Environment variable naming the kubeconfig of the test control plane; `cargo xtask test`
/// sets it, so a test run never depends on where the cache directory happens to be.
pub const KUBECONFIG_ENV: &str = "KCAPI_KUBECONFIG";

/// Label put on every namespace [`namespace`] creates, so a human (or a later cleanup
/// step) can tell test namespaces from anything else on a reused control plane.
pub const TEST_NAMESPACE_LABEL: &str = "karpenter-capi.test/ephemeral";

const NOT_RUNNING: &str =
    "test control plane not running: run `cargo xtask control-plane up` or `cargo xtask test`";

/// The cache root shared with xtask (`${KCAPI_CACHE:-$HOME/.cache/karpenter-capi}`); kept
/// outside the work tree so the one-time Go builds survive fresh clones.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KCAPI_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    PathBuf::from(home).join(".cache").join("karpenter-capi")
}

/// Where the control plane's admin kubeconfig is: `KCAPI_KUBECONFIG` if set, else the
/// default path xtask writes under the cache directory.
pub fn kubeconfig_path() -> PathBuf {
    match std::env::var_os(KUBECONFIG_ENV).filter(|p| !p.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => kubeconfig_path_default(),
    }
}

/// The kubeconfig of the shared instance that `cargo xtask control-plane up` starts.
pub fn kubeconfig_path_default() -> PathBuf {
    cache_dir().join("control-plane").join("kubeconfig")
}

/// A client for the test control plane, authenticated as cluster admin.
///
/// # Panics
/// When the control plane's kubeconfig is missing or unusable (the message says how to
/// start it).
pub async fn client() -> Client {
    client_for(&kubeconfig_path()).await
}

/// A client from the kubeconfig at `path`.
///
/// # Panics
/// When the kubeconfig is missing or unusable.
pub async fn client_for(path: &std::path::Path) -> Client {
    if !path.exists() {
        panic!("{NOT_RUNNING} (no kubeconfig at {})", path.display());
    }
    let kubeconfig = Kubeconfig::read_from(path)
        .unwrap_or_else(|e| panic!("{NOT_RUNNING} (cannot read {}: {e})", path.display()));
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{NOT_RUNNING} (bad kubeconfig {}: {e})", path.display()));
    Client::try_from(config)
        .unwrap_or_else(|e| panic!("cannot build a client from {}: {e}", path.display()))
}

/// Creates a fresh namespace named after `prefix` and returns its name.
///
/// Namespaces are not deleted afterwards: the test control plane runs no namespace
/// controller, so a deleted namespace would only hang in Terminating; `xtask` starts
/// each control plane from an empty etcd instead.
///
/// # Panics
/// When the API server refuses to create it.
pub async fn namespace(client: &Client, prefix: &str) -> String {
    let name = unique_name(prefix);
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some([(TEST_NAMESPACE_LABEL.to_string(), "true".to_string())].into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap_or_else(|e| panic!("cannot create namespace {name}: {e}"));
    name
}

/// A name that no other test (in this process or a concurrent one) uses, built from
/// `prefix`, and valid as a DNS-1123 label (lower case, at most 63 characters), so it
/// fits any object kind including namespaces.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default();
    // Mix pid, time and a process-wide counter so parallel processes never collide.
    let mixed = splitmix(nanos ^ (u64::from(std::process::id()) << 32) ^ splitmix(count));
    let suffix = format!("{:010x}", mixed & 0xff_ffff_ffff);

    let mut clean: String = prefix
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    clean.truncate(63 - suffix.len() - 1);
    let clean = clean.trim_matches('-');
    if clean.is_empty() {
        format!("t-{suffix}")
    } else {
        format!("{clean}-{suffix}")
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_are_valid_dns_labels_and_distinct() {
        let mut seen = std::collections::HashSet::new();
        for prefix in ["nodepool", "Weird_Prefix.x", "", &"a".repeat(100)] {
            for _ in 0..100 {
                let name = unique_name(prefix);
                assert!(name.len() <= 63, "{name}");
                assert!(
                    name.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                    "{name}"
                );
                assert!(!name.starts_with('-') && !name.ends_with('-'), "{name}");
                assert!(seen.insert(name.clone()), "duplicate {name}");
            }
        }
    }
}
