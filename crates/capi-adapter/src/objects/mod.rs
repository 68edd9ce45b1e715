//! Typed Cluster API and OpenShift Machine API objects (hand-written subsets).
//!
//! The published Rust crates with CAPI types are built on older kube versions and do not
//! compile with kube 5, and kopium output would drag in hundreds of fields we never read; the
//! subset here is what the adapter needs, with kube-core [`kube_core::Resource`] impls so
//! the controller can use them with `kube::Api`. Infrastructure machine templates
//! (`DockerMachineTemplate`, `AWSMachineTemplate`, ...) differ per provider and are read as
//! [`kube_core::DynamicObject`] for `status.capacity` and `status.nodeInfo`.

pub mod capi;
pub mod openshift;
