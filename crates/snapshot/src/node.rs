//! A Kubernetes Node -> the core's node (without what only its NodeClaim knows; see
//! [`crate::cluster`] for the merge).

use k8s_openapi::api::core::v1 as corev1;
use karpenter_api::wellknown;
use provisioner_core as core;

use crate::constraints::taint;
use crate::error::{ConvertError, Result};
use crate::pod::epoch_secs;
use crate::resources::quantities;

/// Whether the Node's `Ready` condition is `True`.
pub fn is_ready(n: &corev1::Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether the Node carries a taint with this key (any value and effect).
pub fn has_taint(n: &corev1::Node, key: &str) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == key))
}

/// A Node as the core sees it. Unmanaged nodes count as initialized once Ready; the merge
/// with a NodeClaim overrides that with the claim's own conditions.
pub fn convert_node(n: &corev1::Node) -> Result<core::Node> {
    let labels = n.metadata.labels.clone().unwrap_or_default();
    let status = n.status.as_ref();
    let allocatable = quantities(
        status.and_then(|s| s.allocatable.as_ref()),
        "status.allocatable",
    )?;
    if allocatable.cpu_milli == 0 && allocatable.memory == 0 {
        return Err(ConvertError::new(
            "status.allocatable",
            "no allocatable cpu or memory yet (the kubelet has not reported)",
        ));
    }
    let mut taints = Vec::new();
    for (i, t) in n
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        taints.push(taint(t, &format!("spec.taints[{i}]"))?);
    }
    let ready = is_ready(n);
    let created = epoch_secs(n.metadata.creation_timestamp.as_ref());
    let disrupted = taints
        .iter()
        .any(|t| t.key == wellknown::DISRUPTED_TAINT_KEY);
    Ok(core::Node {
        name: n.metadata.name.clone().unwrap_or_default(),
        nodepool: labels.get(core::labels::NODEPOOL).cloned(),
        instance_type: labels.get(core::labels::INSTANCE_TYPE).cloned(),
        labels,
        annotations: n.metadata.annotations.clone().unwrap_or_default(),
        taints,
        capacity: quantities(status.and_then(|s| s.capacity.as_ref()), "status.capacity")?,
        allocatable,
        ready,
        initialized: ready,
        marked_for_deletion: n.metadata.deletion_timestamp.is_some() || disrupted,
        created_at: created,
        last_pod_event_at: created,
        ..Default::default()
    })
}
