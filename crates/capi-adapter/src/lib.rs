//! Cluster API and OpenShift Machine API objects <-> the provisioner core's model.
//!
//! This crate is pure: no IO, no async, no API client. It turns typed CAPI/OpenShift objects
//! (as the controller read them) into core inputs, and core decisions into plans the
//! controller applies:
//!
//! - [`objects`]: hand-written subsets of MachineDeployment, MachineSet and Machine
//!   (`cluster.x-k8s.io` v1beta2 and v1beta1) and OpenShift MachineSet and Machine
//!   (`machine.openshift.io/v1beta1`), with kube `Resource` impls.
//! - [`resource`]: [`ScalableResource`] and [`MachineView`], one abstraction over the three
//!   scalable kinds and their Machines.
//! - [`nodeclass`]: NodeClass settings, member selection, node overhead.
//! - [`capacity`], [`node_labels`], [`zone`], [`provider_spec`], [`node`]: what a group's
//!   nodes will look like, read as the Cluster Autoscaler reads it (docs/annotations.md).
//! - [`instance_types`]: instance types (capacity, labels, taints, zone, price, capacity type,
//!   availability) with a [`Problem`] for every resource left out.
//! - [`plan`]: launch plans (the shortfall rule and binding), delete plans, idempotent from
//!   the API objects alone.
//! - [`drift`] and [`failures`]: drifted Machines and launch failures.
//! - [`parse`] and [`quantity`]: total parsers for annotation values (fuzzed).
//! - [`keys`]: every annotation and label key we read or write (`docs/annotations.md`).

// Problems are values on a cold path; boxing them everywhere would only add noise.
#![allow(clippy::result_large_err)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::type_complexity))]

pub mod capacity;
pub mod capacity_errors;
pub mod drift;
pub mod failures;
pub mod instance_types;
pub mod keys;
pub mod node;
pub mod node_labels;
pub mod nodeclass;
pub mod objects;
pub mod parse;
pub mod plan;
pub mod problem;
pub mod provider_spec;
pub mod quantity;
pub mod resource;
pub mod zone;

pub use instance_types::{
    Catalog, ResourceOffer, SizeLimits, TemplateLookup, Templates, instance_types,
};
pub use node::{NodeSample, NodeSamples, sample_machine, wants_node};
pub use nodeclass::{DriftPolicy, NodeClassSettings, Overhead};
pub use problem::{Problem, ProblemError};
pub use resource::{
    InfraRef, MachineApi, MachineKey, MachineView, ObjectRef, ResourceId, ResourceKind,
    ScalableResource,
};
