//! Problems: why a scalable resource was left out, or which of its values or list entries
//! was ignored, as values.
//!
//! Reading scalable resources never fails as a whole: one bad MachineDeployment must not hide
//! the good ones, one bad entry must not hide a good MachineDeployment, and the user needs to
//! be told exactly what to fix. Every problem names the object, the key (annotation or field
//! path), the entry of a list annotation when that is what is wrong, and why; `kept` says
//! whether the resource is still offered. The controller turns them into NodeClass
//! conditions and events on the object.

use std::fmt;

use serde::Serialize;
use thiserror::Error;

use crate::parse::ValueError;
use crate::resource::{ObjectRef, ResourceId};

/// What is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProblemError {
    #[error(transparent)]
    Value(#[from] ValueError),
    #[error(
        "no {resource} capacity: set the annotation or fill the infrastructure template's status.capacity"
    )]
    MissingCapacity { resource: &'static str },
    #[error("min size {min} is above max size {max}")]
    MinAboveMax { min: i64, max: i64 },
    #[error("infrastructure template {template} does not exist")]
    TemplateNotFound { template: String },
    #[error("infrastructure template {template} could not be read: {reason}")]
    TemplateUnreadable { template: String, reason: String },
    #[error("machine template has no infrastructureRef")]
    NoInfrastructureRef,
    #[error("name longer than 63 characters cannot be matched by CAPI's owner label")]
    NameTooLong,
    #[error(
        "MachineSet is owned by MachineDeployment {deployment}: select the MachineDeployment instead"
    )]
    OwnedByDeployment { deployment: String },
    #[error(
        "failure domain {failure_domain:?} is an Azure zone number; Azure labels nodes <region>-{failure_domain}: set topology.kubernetes.io/region (or the zone) in the labels annotation; zone left unknown until a node of the group runs"
    )]
    AzureZoneNeedsRegion { failure_domain: String },
    #[error("invalid scalableResourceSelector: {0}")]
    InvalidSelector(String),
    #[error(
        "unknown scalable resource kind {0:?} (expected MachineDeployment, MachineSet or MachineSet.machine.openshift.io)"
    )]
    UnknownKind(String),
}

impl From<crate::quantity::QuantityError> for ProblemError {
    fn from(e: crate::quantity::QuantityError) -> Self {
        ProblemError::Value(ValueError::Quantity(e))
    }
}

impl ProblemError {
    /// A CamelCase reason for conditions and events.
    pub fn reason(&self) -> &'static str {
        match self {
            ProblemError::Value(_) => "InvalidValue",
            ProblemError::MissingCapacity { .. } => "MissingCapacity",
            ProblemError::AzureZoneNeedsRegion { .. } => "ZoneUnknown",
            ProblemError::MinAboveMax { .. } => "MinAboveMax",
            ProblemError::TemplateNotFound { .. } => "TemplateNotFound",
            ProblemError::TemplateUnreadable { .. } => "TemplateUnreadable",
            ProblemError::NoInfrastructureRef => "NoInfrastructureRef",
            ProblemError::NameTooLong => "NameTooLong",
            ProblemError::OwnedByDeployment { .. } => "OwnedByDeployment",
            ProblemError::InvalidSelector(_) => "InvalidSelector",
            ProblemError::UnknownKind(_) => "UnknownKind",
        }
    }
}

/// One object left out, one value or entry of it ignored, or one NodeClass setting
/// ignored, and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct Problem {
    /// The object at fault (the resource, or the template it points to).
    pub object: ObjectRef,
    /// The annotation key or field path at fault (clipped).
    pub key: String,
    /// The entry of a list annotation at fault (`labels`, `taints`, `csi-driver`), clipped.
    pub entry: Option<String>,
    pub error: ProblemError,
    /// The scalable resource concerned (the same as `object` unless the fault is in its
    /// infrastructure template); `None` for NodeClass-level problems.
    pub resource: Option<ResourceId>,
    /// The resource is still offered: only this value or entry was ignored (or, for a taint,
    /// kept conservatively). `false`: the resource is left out.
    pub kept: bool,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: ", self.object, self.key)?;
        if let Some(e) = &self.entry {
            write!(f, "entry {e:?}: ")?;
        }
        write!(f, "{}", self.error)
    }
}

impl Problem {
    pub fn new(object: ObjectRef, key: impl Into<String>, error: impl Into<ProblemError>) -> Self {
        Problem {
            object,
            key: crate::parse::clip(&key.into()),
            entry: None,
            error: error.into(),
            resource: None,
            kept: false,
        }
    }

    /// A bad entry of a list annotation: skipped (or kept conservatively), the rest used.
    pub fn entry(object: ObjectRef, key: &str, bad: crate::parse::BadEntry) -> Self {
        Problem {
            entry: Some(bad.entry),
            kept: true,
            ..Problem::new(object, key, bad.error)
        }
    }

    /// Names the scalable resource this problem concerns.
    pub fn for_resource(mut self, id: &ResourceId) -> Self {
        self.resource = Some(id.clone());
        self
    }

    /// Marks the problem as not leaving the resource out.
    pub fn kept(mut self) -> Self {
        self.kept = true;
        self
    }

    pub fn reason(&self) -> &'static str {
        self.error.reason()
    }
}

/// Serializable form, for status and logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProblemRecord {
    pub object: String,
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    pub kept: bool,
    pub reason: &'static str,
    pub message: String,
}

impl From<&Problem> for ProblemRecord {
    fn from(p: &Problem) -> Self {
        ProblemRecord {
            object: p.object.to_string(),
            key: p.key.clone(),
            entry: p.entry.clone(),
            kept: p.kept,
            reason: p.reason(),
            message: p.error.to_string(),
        }
    }
}
