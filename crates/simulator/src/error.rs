//! Errors as values: every failure names the file, and where possible the line and the field,
//! so a user fixing a scenario never has to guess.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scenario (or an imported file) is not valid YAML for the schema.
    #[error("{file}:{line}:{column}: {message}")]
    Yaml {
        file: String,
        line: usize,
        column: usize,
        /// The field path (`workload.pods[2].requests`) when known.
        field: String,
        message: String,
    },
    /// A value parsed but makes no sense (negative price, unknown zone, ...).
    #[error("{file}: field `{field}`: {message}")]
    Invalid {
        file: String,
        field: String,
        message: String,
    },
    #[error("invalid quantity `{0}` (expected e.g. 500m, 2, 1.5Gi)")]
    Quantity(String),
    /// The I/O error is part of the message and deliberately not a `source`: printed as an
    /// error chain it would otherwise appear twice.
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Csv {
        path: PathBuf,
        line: u64,
        message: String,
    },
    #[error("unknown strategy `{0}` (known: {1})")]
    UnknownStrategy(String, String),
    #[error("strategy `{0}` is not available yet: {1}")]
    StrategyUnavailable(String, String),
    #[error("unknown generator `{0}` (known: {1})")]
    UnknownGenerator(String, String),
    #[error("report: {0}")]
    Report(String),
    /// A bug in the simulator, not in the input.
    /// A run option out of range (e.g. zero seeds).
    #[error("{0}")]
    Usage(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl SimError {
    pub fn invalid(file: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        SimError::Invalid {
            file: file.to_string(),
            field: field.into(),
            message: message.into(),
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        SimError::Io {
            path: path.into(),
            error: source,
        }
    }
}

pub type Result<T, E = SimError> = std::result::Result<T, E>;
