//! A Pod as the controller keeps it between watch events: already converted to the core's
//! pod, plus the few facts about the Kubernetes object that provisioning, termination and
//! events read.
//!
//! A controller holds every pod of its cluster. As k8s-openapi objects, even with everything
//! the kubelet alone reads dropped ([`crate::slim`]), that was 15.8 KB per realistic pod
//! (2.4 GB at 150,000 pods: a `Pod` is 2.4 KB inline and a `Container` 2.1 KB before any
//! field is set, and every label, request and condition is its own allocation). The core's
//! pod is the part decisions read, converted once per watch event instead of once per round.
//!
//! Volumes are the exception: where a claim may attach depends on PVC, PV and StorageClass
//! objects that change on their own, so the claim names are kept and resolved when the
//! snapshot is built ([`KeptPod::to_core`]). [`crate::pod::convert_pod`] is the same two
//! steps, so a kept pod converts exactly as the object it came from.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as corev1;
use provisioner_core as core;

use crate::pod::{convert_without_volumes, identity, is_provisionable, is_terminal};
use crate::volumes::VolumeIndex;

/// What the controller keeps of a Pod.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptPod {
    /// The core pod without volumes. When the object could not be converted, only its
    /// identity (namespace, name, node, owner, labels, annotations) and [`Self::problem`].
    ///
    /// Shared with every snapshot built while the pod is unchanged (a pod without claims is
    /// the same value in both), so a round's snapshot holds no second copy of the pods.
    pub pod: Arc<core::Pod>,
    /// Why the pod could not be converted; such a pod is left out of snapshots (and reported
    /// as a problem) but still drained and counted like any other.
    pub problem: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// Names of the PersistentVolumeClaims its volumes use, in the spec's order.
    pub claims: Vec<String>,
    pub priority_class_name: Option<String>,
    /// `Succeeded` or `Failed`: it holds no resources.
    pub terminal: bool,
    /// It has a deletion timestamp.
    pub deleting: bool,
    /// The kube-scheduler gave up on it ([`is_provisionable`]).
    pub provisionable: bool,
}

impl KeptPod {
    /// Converts a Pod; never fails (a conversion error is kept in [`Self::problem`]).
    pub fn new(p: &corev1::Pod) -> Self {
        let meta = &p.metadata;
        let claims = claim_names(p);
        let (pod, problem) = match convert_without_volumes(p) {
            Ok(pod) => (pod, None),
            Err(e) => (identity(p), Some(e.to_string())),
        };
        KeptPod {
            pod: Arc::new(pod),
            problem,
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            claims,
            priority_class_name: p.spec.as_ref().and_then(|s| s.priority_class_name.clone()),
            terminal: is_terminal(p),
            deleting: meta.deletion_timestamp.is_some(),
            provisionable: is_provisionable(p),
        }
    }

    pub fn namespace(&self) -> &str {
        &self.pod.namespace
    }

    pub fn name(&self) -> &str {
        &self.pod.name
    }

    /// The node it is bound to.
    pub fn node_name(&self) -> Option<&str> {
        self.pod.node_name.as_deref()
    }

    /// Whether a DaemonSet controls it.
    pub fn is_daemon(&self) -> bool {
        self.pod.owner_kind.as_deref() == Some("DaemonSet")
    }

    /// The core pod with its claims resolved through `volumes`, or why it cannot be had.
    /// Without claims it is the kept pod itself, shared.
    pub fn to_core(&self, volumes: &VolumeIndex) -> Result<Arc<core::Pod>, String> {
        if let Some(problem) = &self.problem {
            return Err(problem.clone());
        }
        if self.claims.is_empty() {
            return Ok(Arc::clone(&self.pod));
        }
        let mut pod = core::Pod::clone(&self.pod);
        attach_volumes(&mut pod, &self.claims, volumes);
        Ok(Arc::new(pod))
    }

    /// A reference for events about this pod.
    pub fn object_ref(&self) -> corev1::ObjectReference {
        corev1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(self.pod.namespace.clone()),
            name: Some(self.pod.name.clone()),
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone(),
            field_path: None,
        }
    }
}

/// The PersistentVolumeClaims a pod's volumes use, in the spec's order.
pub(crate) fn claim_names(p: &corev1::Pod) -> Vec<String> {
    p.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone())
        .collect()
}

/// Resolves a pod's claims (unknown ones place no constraint, see [`VolumeIndex::resolve`]).
pub(crate) fn attach_volumes(pod: &mut core::Pod, claims: &[String], volumes: &VolumeIndex) {
    for claim in claims {
        if let Some(vol) = volumes.resolve(&pod.namespace, claim) {
            pod.volumes.push(vol);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> corev1::Pod {
        match serde_json::from_value(v) {
            Ok(p) => p,
            Err(e) => panic!("fixture: {e}"),
        }
    }

    fn with_claim() -> corev1::Pod {
        pod(json!({
            "metadata": {"name": "db-0", "namespace": "n", "uid": "u-1", "resourceVersion": "7",
                "labels": {"app": "db"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "s", "controller": true}]},
            "spec": {
                "priorityClassName": "system-node-critical",
                "nodeName": "node-1",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                "volumes": [
                    {"name": "cfg", "configMap": {"name": "cfg"}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}},
                ],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "db"}}}]}}
            },
            "status": {"phase": "Running"}
        }))
    }

    fn volumes() -> VolumeIndex {
        let pv: corev1::PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": "pv-1"},
            "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "v"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}]}]}}}
        }))
        .unwrap_or_default();
        let pvc: corev1::PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data-db-0", "namespace": "n"},
            "spec": {"volumeName": "pv-1"}
        }))
        .unwrap_or_default();
        VolumeIndex::new([pvc], [pv], [])
    }

    #[test]
    fn a_kept_pod_converts_as_the_object_it_came_from() {
        let p = with_claim();
        let index = volumes();
        let kept = KeptPod::new(&p);
        let direct = crate::pod::convert_pod(&p, &index).expect("convert");
        assert_eq!(kept.to_core(&index), Ok(Arc::new(direct.clone())));
        assert_eq!(direct.volumes.len(), 1, "the claim resolved");
        // Volumes resolve when the snapshot is built: a PV bound after the pod was stored
        // still counts.
        let unresolved = KeptPod::new(&p).to_core(&VolumeIndex::default());
        assert_eq!(unresolved.map(|p| p.volumes.len()), Ok(0));
        assert_eq!(kept.claims, vec!["data-db-0".to_string()]);
        assert_eq!(kept.node_name(), Some("node-1"));
        assert_eq!(
            kept.priority_class_name.as_deref(),
            Some("system-node-critical")
        );
        assert!(!kept.terminal && !kept.deleting && !kept.provisionable && !kept.is_daemon());
        let r = kept.object_ref();
        assert_eq!(
            (
                r.kind.as_deref(),
                r.uid.as_deref(),
                r.resource_version.as_deref()
            ),
            (Some("Pod"), Some("u-1"), Some("7"))
        );
    }

    #[test]
    fn a_pod_that_cannot_be_converted_keeps_its_identity_and_the_reason() {
        let mut p = with_claim();
        if let Some(spec) = p.spec.as_mut() {
            spec.containers[0].resources =
                serde_json::from_value(json!({"requests": {"cpu": "lots"}})).ok();
        }
        let kept = KeptPod::new(&p);
        let problem = kept.problem.clone().expect("a problem");
        assert!(
            problem.contains("spec.containers[0].resources.requests"),
            "{problem}"
        );
        assert_eq!(kept.to_core(&volumes()), Err(problem));
        assert_eq!(
            (kept.namespace(), kept.name(), kept.node_name()),
            ("n", "db-0", Some("node-1"))
        );
        assert_eq!(kept.pod.owner_kind.as_deref(), Some("StatefulSet"));
    }

    #[test]
    fn the_flags_follow_the_status() {
        let mut p = with_claim();
        p.status = Some(corev1::PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        assert!(KeptPod::new(&p).terminal);
        let pending = pod(json!({
            "metadata": {"name": "a", "namespace": "n", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": []},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        }));
        let kept = KeptPod::new(&pending);
        assert!(
            kept.deleting && !kept.provisionable,
            "a deleted pod is not provisioned for"
        );
        let mut alive = pending.clone();
        alive.metadata.deletion_timestamp = None;
        assert!(KeptPod::new(&alive).provisionable);
    }

    #[test]
    fn a_pod_without_claims_is_shared_with_the_snapshot_and_one_with_claims_is_not() {
        let index = volumes();
        let plain = KeptPod::new(&pod(json!({
            "metadata": {"name": "plain", "namespace": "n"},
            "spec": {"containers": [{"name": "c"}]}
        })));
        let shared = plain.to_core(&index).expect("converts");
        assert!(
            Arc::ptr_eq(&shared, &plain.pod),
            "no second copy of a claim-less pod"
        );
        let claimed = KeptPod::new(&with_claim());
        let own = claimed.to_core(&index).expect("converts");
        assert!(
            !Arc::ptr_eq(&own, &claimed.pod),
            "claims resolved on a copy"
        );
        assert!(
            claimed.pod.volumes.is_empty(),
            "the kept pod stays without volumes"
        );
    }
}
