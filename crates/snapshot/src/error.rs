//! Conversion errors name the field at fault, so a user can find it in their manifest.

/// A value the core cannot represent, at `field` (a path such as `spec.taints[0].effect`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{field}`: {message}")]
pub struct ConvertError {
    pub field: String,
    pub message: String,
}

impl ConvertError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConvertError {
            field: field.into(),
            message: message.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, ConvertError>;

/// An object left out of a snapshot, and why (the snapshot is still built from the rest).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotProblem {
    /// `Kind namespace/name` or `Kind name`.
    pub object: String,
    pub message: String,
}

impl std::fmt::Display for SnapshotProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.object, self.message)
    }
}
