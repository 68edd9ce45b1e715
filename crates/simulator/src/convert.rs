//! Kubernetes / Karpenter wire objects -> the core's plain-data model, for scenario files.
//!
//! The conversion itself lives in `karpenter-capi-snapshot` (the one the controller and the
//! admin CLI use too); this module only maps its errors to the simulator's, and keeps the
//! reader for scenario request maps (plain strings).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as corev1;
use kcapi_snapshot::ConvertError;
use provisioner_core as core;

use crate::error::{Result, SimError};
use crate::quantity;

/// The NodePool type scenarios and kubectl snapshots are read as: `karpenter-api`'s, which is
/// upstream's `karpenter.sh/v1` schema field for field.
pub use karpenter_api::NodePool as NodePoolV1;

fn sim_error(e: ConvertError) -> SimError {
    SimError::invalid("", e.field, e.message)
}

/// A Kubernetes taint; `field` names it in errors.
pub fn taint(t: &corev1::Taint, field: &str) -> Result<core::Taint> {
    kcapi_snapshot::constraints::taint(t, field).map_err(sim_error)
}

/// `karpenter.sh/v1` NodePool -> core NodePool. Errors name the field under `field`.
pub fn nodepool(np: &NodePoolV1, field: &str) -> Result<core::NodePool> {
    kcapi_snapshot::nodepool::nodepool(np, field).map_err(sim_error)
}

/// Pod-spec constraints in Kubernetes' shape, applied to a core pod.
pub fn apply_constraints(
    pod: &mut core::Pod,
    tolerations: &[corev1::Toleration],
    affinity: Option<&corev1::Affinity>,
    spread: &[corev1::TopologySpreadConstraint],
    field: &str,
) -> Result<()> {
    kcapi_snapshot::constraints::apply_constraints(pod, tolerations, affinity, spread, field)
        .map_err(sim_error)
}

/// Requests map (`cpu: 500m`) -> core resources; errors name `field.<name>`.
pub fn resources(map: &BTreeMap<String, String>, field: &str) -> Result<core::Resources> {
    let mut r = core::Resources::default();
    for (k, v) in map {
        let err = |e: SimError| SimError::invalid("", format!("{field}.{k}"), e.to_string());
        match k.as_str() {
            "cpu" => r.cpu_milli = quantity::cpu_milli(v).map_err(err)?,
            "memory" => r.memory = quantity::count(v).map_err(err)?,
            "pods" => r.pods = quantity::count(v).map_err(err)?,
            "ephemeral-storage" => r.ephemeral_storage = quantity::count(v).map_err(err)?,
            other => {
                r.extended
                    .insert(other.to_string(), quantity::count(v).map_err(err)?);
            }
        }
    }
    Ok(r)
}
