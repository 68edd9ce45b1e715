//! Problems: why a scalable resource was left out, as values.
//!
//! Reading scalable resources never fails as a whole: one bad MachineDeployment must not hide
//! the good ones, and the user needs to be told exactly what to fix. Every problem names the
//! object, the key (annotation or field path) and why; the controller turns them into
//! NodeClass conditions and events on the object.

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

/// One object left out (or one NodeClass setting ignored), and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub struct Problem {
    /// The object at fault (the resource, or the template it points to).
    pub object: ObjectRef,
    /// The annotation key or field path at fault.
    pub key: String,
    pub error: ProblemError,
    /// The scalable resource left out because of it (the same as `object` unless the fault
    /// is in its infrastructure template); `None` for NodeClass-level problems.
    pub resource: Option<ResourceId>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.object, self.key, self.error)
    }
}

impl Problem {
    pub fn new(object: ObjectRef, key: impl Into<String>, error: impl Into<ProblemError>) -> Self {
        Problem {
            object,
            key: key.into(),
            error: error.into(),
            resource: None,
        }
    }

    /// Names the scalable resource this problem leaves out.
    pub fn for_resource(mut self, id: &ResourceId) -> Self {
        self.resource = Some(id.clone());
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
    pub reason: &'static str,
    pub message: String,
}

impl From<&Problem> for ProblemRecord {
    fn from(p: &Problem) -> Self {
        ProblemRecord {
            object: p.object.to_string(),
            key: p.key.clone(),
            reason: p.reason(),
            message: p.error.to_string(),
        }
    }
}
