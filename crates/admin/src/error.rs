//! The admin library's errors. Each says what to do next, because the CLI prints it as is.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("cannot load kubeconfig {path}: {reason}")]
    Kubeconfig { path: String, reason: String },
    #[error(transparent)]
    Provider(#[from] karpenter_capi_controller::cloudprovider::Error),
    #[error("refusing: {0}; re-run with --force if you are sure")]
    Refused(String),
    #[error("{0}")]
    Invalid(String),
    #[error("nothing selected: name resources, or pass --selector or --all")]
    NothingSelected,
    #[error("no CAS hand-off record found in {namespace}/{name}: nothing to enable")]
    NoRecord { namespace: String, name: String },
    #[error("hand-off record {0} is unreadable: {1}")]
    BadRecord(String, String),
    #[error("price catalog {path}: {reason}")]
    Catalog { path: String, reason: String },
    #[error("helm: {0}")]
    Helm(String),
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl Error {
    /// The process exit code the CLI documents for this error (README, `--help`).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Refused(_) => 3,
            Error::Invalid(_)
            | Error::NothingSelected
            | Error::Catalog { .. }
            | Error::Kubeconfig { .. } => 2,
            Error::NoRecord { .. } | Error::BadRecord(..) => 4,
            _ => 1,
        }
    }
}
