//! The controller: the only crate that talks to an API server.
//!
//! So far it holds [`cloudprovider`], which applies the CAPI adapter's plans; the
//! reconcilers (provisioning loop, NodeClaim lifecycle, disruption) come later.

pub mod cloudprovider;
