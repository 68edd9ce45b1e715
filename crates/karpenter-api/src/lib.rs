//! Karpenter's API as Rust types: `karpenter.sh/v1` NodePool and NodeClaim, field for field
//! with upstream's v1 schema (including the validation upstream's CRDs enforce), and our
//! provider NodeClass, `karpenter.cluster.x-k8s.io/v1alpha1` ClusterAPINodeClass.
//!
//! Users keep writing the NodePools they write for any Karpenter; the CRDs we install are
//! generated from these types ([`crd::crds`], `cargo xtask crdgen`) and compared with
//! upstream's in the compatibility tests, so the two cannot drift apart silently.
//!
//! Optional fields stay `Option` rather than taking their defaults on read, so that an object
//! read and written back is unchanged; methods such as
//! [`NodePoolSpec::disruption_or_default`] apply upstream's defaults where code needs values.

pub mod crd;
pub mod duration;
pub mod nodeclaim;
pub mod nodeclass;
pub mod nodepool;
pub mod requirements;
pub mod schema;
pub mod wellknown;

pub use duration::{DurationError, NillableDuration, parse_go_duration};
pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus, ResourceRequirements};
pub use nodeclass::{
    ClusterAPINodeClass, ClusterAPINodeClassSpec, ClusterAPINodeClassStatus, DriftPolicy,
    NodeOverhead, ScalableResourceKind, ScalableResourceStatus,
};
pub use nodepool::{
    Budget, ConsolidationPolicy, Disruption, DisruptionReason, NodeClaimTemplate,
    NodeClaimTemplateMetadata, NodeClaimTemplateSpec, NodePool, NodePoolSpec, NodePoolStatus,
};
pub use requirements::{NodeClassReference, NodeSelectorRequirementWithMinValues, Operator};
