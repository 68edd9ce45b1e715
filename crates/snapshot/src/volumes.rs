//! Where a pod's persistent volumes may attach, from PVCs, PVs and StorageClasses, and each
//! node's CSI attach limits from its CSINode.
//!
//! A bound claim follows its PV's `nodeAffinity`; an unbound claim whose StorageClass binds
//! `WaitForFirstConsumer` follows the class's `allowedTopologies` (it will be provisioned where
//! the pod lands); an unbound `Immediate` claim is placed anywhere (its PV will pick). The CSI
//! driver is the PV's `spec.csi.driver`, or the class's provisioner before binding.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::storage::v1 as storagev1;
use provisioner_core as core;

/// PVCs (by namespace/name), PVs and StorageClasses (by name), for resolving pod volumes.
#[derive(Debug, Clone, Default)]
pub struct VolumeIndex {
    pub claims: BTreeMap<(String, String), corev1::PersistentVolumeClaim>,
    pub volumes: BTreeMap<String, corev1::PersistentVolume>,
    pub classes: BTreeMap<String, storagev1::StorageClass>,
}

impl VolumeIndex {
    pub fn new(
        claims: impl IntoIterator<Item = corev1::PersistentVolumeClaim>,
        volumes: impl IntoIterator<Item = corev1::PersistentVolume>,
        classes: impl IntoIterator<Item = storagev1::StorageClass>,
    ) -> Self {
        VolumeIndex {
            claims: claims
                .into_iter()
                .map(|c| {
                    let key = (
                        c.metadata.namespace.clone().unwrap_or_default(),
                        c.metadata.name.clone().unwrap_or_default(),
                    );
                    (key, c)
                })
                .collect(),
            volumes: volumes
                .into_iter()
                .map(|v| (v.metadata.name.clone().unwrap_or_default(), v))
                .collect(),
            classes: classes
                .into_iter()
                .map(|c| (c.metadata.name.clone().unwrap_or_default(), c))
                .collect(),
        }
    }

    /// The core volume for a pod's PVC reference; `None` when the claim is unknown (the
    /// pod then carries no volume constraint, as if the volume could go anywhere).
    pub fn resolve(&self, namespace: &str, claim: &str) -> Option<core::Volume> {
        let pvc = self
            .claims
            .get(&(namespace.to_string(), claim.to_string()))?;
        let spec = pvc.spec.as_ref()?;
        let mut out = core::Volume {
            name: format!("{namespace}/{claim}"),
            ..Default::default()
        };
        let bound = spec
            .volume_name
            .as_deref()
            .filter(|v| !v.is_empty())
            .and_then(|v| self.volumes.get(v));
        if let Some(pv) = bound {
            let pspec = pv.spec.as_ref();
            out.csi_driver = pspec.and_then(|s| s.csi.as_ref()).map(|c| c.driver.clone());
            out.node_affinity = pspec
                .and_then(|s| s.node_affinity.as_ref())
                .and_then(|a| a.required.as_ref())
                .map(|r| r.node_selector_terms.iter().map(selector_term).collect())
                .unwrap_or_default();
            return Some(out);
        }
        let class = spec
            .storage_class_name
            .as_deref()
            .and_then(|c| self.classes.get(c));
        if let Some(sc) = class {
            out.csi_driver = Some(sc.provisioner.clone()).filter(|p| !p.contains("no-provisioner"));
            if sc.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer") {
                out.node_affinity = sc
                    .allowed_topologies
                    .iter()
                    .flatten()
                    .map(|t| {
                        t.match_label_expressions
                            .iter()
                            .flatten()
                            .map(|e| core::Requirement {
                                key: e.key.clone(),
                                operator: core::Operator::In,
                                values: e.values.clone(),
                                min_values: None,
                            })
                            .collect()
                    })
                    .collect();
            }
        }
        Some(out)
    }
}

/// A PV's node selector term; unknown operators make the term match nothing, which is what
/// the API server's validation makes impossible anyway.
fn selector_term(t: &corev1::NodeSelectorTerm) -> core::NodeSelectorTerm {
    t.match_expressions
        .iter()
        .flatten()
        .map(|e| core::Requirement {
            key: e.key.clone(),
            operator: crate::constraints::operator(&e.operator).unwrap_or(core::Operator::In),
            values: e.values.clone().unwrap_or_default(),
            min_values: None,
        })
        .collect()
}

/// Per-driver attach limits a CSINode reports (drivers without a limit are left out: no
/// limit).
pub fn csi_limits(csinode: &storagev1::CSINode) -> BTreeMap<String, i64> {
    csinode
        .spec
        .drivers
        .iter()
        .filter_map(|d| {
            let count = d.allocatable.as_ref()?.count?;
            Some((d.name.clone(), i64::from(count)))
        })
        .collect()
}
