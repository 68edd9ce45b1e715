//! Errors of the reconcilers. None is fatal to the process: each is logged, counted, and the
//! object is retried with back-off.

use std::sync::Arc;

use crate::cloudprovider;

#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(Arc<kube::Error>),
    #[error("cloud provider: {0}")]
    Cloud(#[from] cloudprovider::Error),
    #[error("cluster state is not synced yet")]
    NotSynced,
    #[error("{0}")]
    Invalid(String),
}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        Error::Kube(Arc::new(e))
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// The API answered 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// The API answered 409.
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The API answered 429 (an eviction a PDB does not allow yet).
pub fn is_too_many_requests(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 429)
}
