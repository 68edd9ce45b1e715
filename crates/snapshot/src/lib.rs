//! Kubernetes objects -> the provisioner core's [`provisioner_core::Snapshot`].
//!
//! Pure: no IO, no async. This is the one conversion that the controller (from its
//! reflectors), the admin CLI (`explain`, `snapshot`) and the simulator's kubectl importer all
//! call, so an offline replay sees exactly what the controller saw.
//!
//! - [`cluster`]: the whole cluster at once ([`build`]), merging Nodes with their NodeClaims
//!   and turning claims without a Node into in-flight nodes.
//! - [`pod`], [`node`], [`nodepool`]: one object each; errors name the field at fault.
//! - [`constraints`]: tolerations, affinity, topology spread, taints.
//! - [`volumes`]: PVC/PV/StorageClass topology and CSI attach limits.
//! - [`resources`]: resource lists both ways.
//! - [`kept`]: a Pod as the controller stores it (converted once per watch event).
//! - [`slim`]: what the controller's stores drop from Nodes and other kinds (no conversion
//!   reads it).

pub mod cluster;
pub mod constraints;
pub mod error;
pub mod kept;
pub mod node;
pub mod nodepool;
pub mod pod;
pub mod resources;
pub mod slim;
pub mod volumes;

pub use cluster::{Built, Objects, build};
pub use error::{ConvertError, SnapshotProblem};
pub use kept::KeptPod;
pub use volumes::VolumeIndex;
