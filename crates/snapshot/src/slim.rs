//! Dropping, before an object is stored, the fields no conversion here and no decision of the
//! controller ever reads.
//!
//! A controller keeps every Pod and Node of its cluster in memory (its reflectors); at
//! 150,000 pods those stores dominate its footprint (issue 18). Most of a real pod's bytes
//! are what only the kubelet needs: environment, commands, probes, volume mounts, projected
//! token volumes, container statuses; a real node's are its image list. Scheduling reads
//! none of them. What is kept is what [`crate::pod::convert_pod`], [`crate::node`] and the
//! controller's lifecycle, termination and disruption read: metadata (minus managed fields
//! and the last-applied annotation), requests, host ports, restart policies, constraints,
//! persistent and ephemeral volume claims, the status phase, conditions and start time.
//!
//! A new reader of a dropped field must move it to the kept side here; the tests list what
//! the conversions rely on.
//!
//! The controller's pod store no longer holds k8s-openapi Pods at all but
//! [`crate::KeptPod`]s (a fifth of the bytes); [`pod`] stays as the baseline the
//! `controller_memory` example measures against, and as the statement of what a pod's
//! conversion reads.

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The annotation `kubectl apply` writes: a full copy of the object as applied.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Metadata nobody reads, for any kind: managed fields and the last-applied copy are most of
/// a small object's bytes.
pub fn metadata(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
}

/// What only the kubelet reads from a container. Kept: name, image, resources (requests are
/// scheduled), ports (host ports are), restart policy (sidecars count as running).
fn container(c: &mut Container) {
    c.args = None;
    c.command = None;
    c.env = None;
    c.env_from = None;
    c.lifecycle = None;
    c.liveness_probe = None;
    c.readiness_probe = None;
    c.startup_probe = None;
    c.security_context = None;
    c.volume_mounts = None;
    c.volume_devices = None;
    c.working_dir = None;
    c.termination_message_path = None;
    c.termination_message_policy = None;
    c.image_pull_policy = None;
    c.resize_policy = None;
}

/// A pod as the controller stored it before [`crate::KeptPod`]: the k8s-openapi object less
/// what only the kubelet reads.
pub fn pod(p: &mut Pod) {
    metadata(&mut p.metadata);
    if let Some(spec) = p.spec.as_mut() {
        spec.containers.iter_mut().for_each(container);
        spec.init_containers
            .iter_mut()
            .flatten()
            .for_each(container);
        spec.ephemeral_containers = None;
        spec.image_pull_secrets = None;
        spec.security_context = None;
        spec.dns_config = None;
        spec.host_aliases = None;
        spec.readiness_gates = None;
        // Only claims bind a pod to a node (PV topology, attach limits); configMap, secret,
        // projected token and emptyDir volumes do not.
        // `retain` keeps the vector's room, and a `Volume` is kilobytes inline (one field
        // per volume source): the dropped volumes' room is let go too.
        if let Some(volumes) = spec.volumes.as_mut() {
            volumes.retain(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some());
            volumes.shrink_to_fit();
        }
        if spec.volumes.as_ref().is_some_and(Vec::is_empty) {
            spec.volumes = None;
        }
    }
    if let Some(status) = p.status.as_mut() {
        status.container_statuses = None;
        status.init_container_statuses = None;
        status.ephemeral_container_statuses = None;
        status.pod_ips = None;
        status.host_ips = None;
        status.resource_claim_statuses = None;
    }
}

/// A node as the controller stores it. Kept: labels, taints, capacity, allocatable,
/// conditions, addresses, node info, provider ID.
pub fn node(n: &mut Node) {
    metadata(&mut n.metadata);
    if let Some(status) = n.status.as_mut() {
        // The kubelet lists every image it holds, with sizes: kilobytes per node.
        status.images = None;
        status.volumes_in_use = None;
        status.daemon_endpoints = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::VolumeIndex;
    use serde_json::json;

    fn real_pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": "web-1", "namespace": "shop",
                "labels": {"app": "web"},
                "annotations": {
                    LAST_APPLIED: "{\"big\": true}",
                    "karpenter.sh/do-not-disrupt": "true",
                },
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u", "controller": true}],
            },
            "spec": {
                "nodeSelector": {"disk": "ssd"},
                "priority": 10,
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]}},
                "initContainers": [{"name": "proxy", "image": "p", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "100m"}}, "env": [{"name": "A", "value": "1"}]}],
                "containers": [{
                    "name": "app", "image": "registry/app:1",
                    "command": ["/app"], "args": ["--serve"],
                    "env": [{"name": "LOG", "value": "debug"}],
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}},
                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 80}},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
                    {"name": "cfg", "configMap": {"name": "cfg"}},
                ],
            },
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
                "containerStatuses": [{"name": "app", "image": "i", "imageID": "", "ready": false, "restartCount": 0}],
            }
        }))
        .expect("pod")
    }

    #[test]
    fn a_slimmed_pod_converts_as_the_full_one() {
        // The stores always dropped the last-applied copy (the core keeps annotations): compare
        // with the pod as it was stored before Pods were slimmed further.
        let mut full = real_pod();
        metadata(&mut full.metadata);
        let mut slim = real_pod();
        pod(&mut slim);
        let volumes = VolumeIndex::default();
        let a = crate::pod::convert_pod(&full, &volumes).expect("full");
        let b = crate::pod::convert_pod(&slim, &volumes).expect("slim");
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        // And it is slimmer where the bytes are.
        let spec = slim.spec.as_ref().expect("spec");
        assert!(spec.containers[0].env.is_none() && spec.containers[0].liveness_probe.is_none());
        assert_eq!(spec.volumes.as_ref().map(Vec::len), Some(1));
        assert_eq!(spec.volumes.as_ref().map(Vec::capacity), Some(1));
        assert!(slim.metadata.managed_fields.is_none());
        let annotations = slim.metadata.annotations.as_ref().expect("annotations");
        assert!(!annotations.contains_key(LAST_APPLIED));
        assert!(annotations.contains_key("karpenter.sh/do-not-disrupt"));
        let status = slim.status.as_ref().expect("status");
        assert!(status.container_statuses.is_none());
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        assert!(status.conditions.is_some());
        assert!(
            serde_json::to_vec(&slim).expect("json").len()
                < serde_json::to_vec(&full).expect("json").len()
        );
    }

    /// The room of dropped volumes goes too (a `Volume` is kilobytes inline; the kept room
    /// was 40% of a realistic pod store).
    #[test]
    fn a_pod_without_claims_keeps_no_volume_room() {
        let mut p = real_pod();
        if let Some(spec) = p.spec.as_mut() {
            spec.volumes.iter_mut().flatten().for_each(|v| {
                v.persistent_volume_claim = None;
                v.config_map.get_or_insert_default();
            });
        }
        pod(&mut p);
        assert!(p.spec.as_ref().expect("spec").volumes.is_none());
    }

    #[test]
    fn a_slimmed_node_keeps_what_scheduling_reads() {
        let full: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "a"}},
            "spec": {"providerID": "capi://x", "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                "allocatable": {"cpu": "3900m", "memory": "15Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
                "images": [{"names": ["registry/app:1"], "sizeBytes": 123456}],
            }
        }))
        .expect("node");
        let mut slim = full.clone();
        node(&mut slim);
        let a = crate::node::convert_node(&full).expect("full");
        let b = crate::node::convert_node(&slim).expect("slim");
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert!(slim.status.as_ref().expect("status").images.is_none());
    }
}
