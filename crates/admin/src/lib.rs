//! What the admin CLI (`karpenter-capi`) and its web UI both do. The binary only parses
//! arguments and prints; the UI only renders HTML; every decision and every API call is here,
//! so the two can never disagree.
//!
//! - [`connect`]: clients for the workload and the management cluster.
//! - [`discover`]: every scalable resource in reach, with the source of each capacity value,
//!   price, limits, membership, whether the Cluster Autoscaler (CAS) manages it, problems.
//! - [`cas`]: who autoscales what today, and the reversible hand-off from CAS to us
//!   (`disable`) and back (`enable`), recorded in a ConfigMap we own.
//! - [`setup`]: fills capacity, price and membership on selected resources, creates the
//!   NodeClass and a default NodePool; a plan with a diff first, applied on request.
//! - [`install`]: renders the Helm chart (with the `helm` binary) and applies it.
//! - [`live`]: one read of the cluster -> the core's snapshot, as the controller builds it.
//! - [`scenario`]: `snapshot`, the cluster as a simulator scenario.
//! - [`explain`]: why a pod is pending and what would be launched for it.
//! - [`status`]: NodePools, NodeClaims, nodes and cost, pending pods, our last events, the gap.
//! - [`ui`]: the web UI (axum, server-rendered HTML).

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod cas;
pub mod catalog;
pub mod connect;
pub mod discover;
pub mod error;
pub mod explain;
pub mod install;
pub mod live;
pub mod output;
pub mod progress;
pub mod scenario;
pub mod selection;
pub mod setup;
pub mod sources;
pub mod status;
pub mod templates;
pub mod ui;

pub use connect::{Clusters, ConnectOptions};
pub use error::Error;

/// Parses a `--price` value with the adapter's price rules.
pub fn setup_price(s: &str) -> Result<f64, Error> {
    capi_adapter::parse::parse_price(s).map_err(|e| Error::Invalid(format!("--price {s:?}: {e}")))
}
