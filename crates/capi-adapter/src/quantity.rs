//! Kubernetes resource quantities: the workspace's one exact parser lives in
//! `kcapi-quantity`; re-exported here for this crate's callers.

pub use kcapi_quantity::{QuantityError, parse_milli, parse_units};
