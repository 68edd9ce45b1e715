//! The controller: the only crate that talks to an API server.
//!
//! Data flows one way: **watch** ([`state`], reflectors) -> **snapshot** ([`snapshot`],
//! through the shared `karpenter-capi-snapshot` conversion) -> **core** (provisioner-core's
//! `schedule` / `disrupt`) -> **decision** -> **adapter** ([`cloudprovider`], which applies
//! capi-adapter's plans) -> **API writes**; status and events report back.
//!
//! One reconciler or loop per module, all sharing one [`context::Context`]:
//! - [`provisioning`]: batches unschedulable pods, solves, creates NodeClaims.
//! - [`lifecycle`]: NodeClaim Launched / Registered / Initialized, registration timeout.
//! - [`termination`]: drain through evictions in tiers, then delete the Machine.
//! - [`disruption`]: emptiness, drift, expiration and consolidation commands, validated
//!   and executed with rollback.
//! - [`claim_disruption`]: NodeClaim `lastPodEventTime`, Consolidatable and Drifted
//!   (NodePool hash, requirements, the provider's template drift).
//! - [`gc`]: NodeClaims whose Machine vanished; Nodes deleted by hand.
//! - [`status`]: ClusterAPINodeClass and NodePool status.
//! - [`events`]: events queued, deduplicated and published off the decision path.
//! - [`leader`], [`metrics`], [`server`], [`replay`]; [`runtime`] wires them.
//!
//! - [`lifetimes`]: how long pods ran before they ended, from the pod watch (the payback
//!   rule's horizon).
//!
//! Nothing here is needed after a restart except what is in the API: every loop rebuilds
//! from the reflectors, and launches and deletes are idempotent plans. The one thing a
//! restart loses is [`lifetimes`]' memory of ended pods; until enough pods end again the
//! core estimates lifetimes from how long the running pods of each owner kind have run.

pub mod catalogs;
pub mod claim_disruption;
pub mod cloudprovider;
pub mod context;
pub mod disruption;
pub mod error;
pub mod events;
pub mod gc;
pub mod leader;
pub mod lifecycle;
pub mod lifetimes;
pub mod metrics;
pub mod nodeclaims;
pub mod options;
pub mod provisioning;
pub mod replay;
pub mod runtime;
pub mod server;
pub mod snapshot;
pub mod state;
pub mod status;
pub mod tasks;
pub mod termination;
pub mod unclaimed;

pub use options::Options;
pub use runtime::{Clients, Running, start};
