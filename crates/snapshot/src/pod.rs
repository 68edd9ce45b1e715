//! A Kubernetes Pod -> the core's pod, and which pods the autoscaler must act for.

use k8s_openapi::api::core::v1 as corev1;
use provisioner_core as core;

use crate::constraints::apply_constraints;
use crate::error::Result;
use crate::resources::quantities;
use crate::volumes::VolumeIndex;

/// `controller.kubernetes.io/pod-deletion-cost`.
const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// A static pod's mirror: the kubelet owns it, so a drain leaves it alone.
pub const MIRROR_POD: &str = "kubernetes.io/config.mirror";

/// The pod annotations a decision reads; a converted pod keeps only these. A real pod carries
/// several others (CNI addresses, sidecar status, scrape settings, `kubectl` restarts), each
/// its own allocations and, in a `BTreeMap`, a 540-byte leaf, in every pod the controller
/// holds. The pod-deletion cost is read into its own field. A new reader of a pod annotation
/// adds its key here.
pub const READ_POD_ANNOTATIONS: [&str; 2] = [core::disruption::protect::DO_NOT_DISRUPT, MIRROR_POD];

/// Seconds since the epoch of a Kubernetes timestamp.
pub fn epoch_secs(t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>) -> i64 {
    t.map(|t| t.0.as_second()).unwrap_or(0)
}

/// Whether a pod has finished and holds no resources.
pub fn is_terminal(p: &corev1::Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded") | Some("Failed")
    )
}

/// Whether the kube-scheduler gave up on this pod: unbound, `PodScheduled=False` with reason
/// `Unschedulable`, not being deleted, not waiting for a preemption it nominated. These are
/// the pods a provisioning round acts for (Karpenter's `IsProvisionable`).
pub fn is_provisionable(p: &corev1::Pod) -> bool {
    let spec_bound = p
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if spec_bound || p.metadata.deletion_timestamp.is_some() || is_terminal(p) {
        return false;
    }
    let status = p.status.as_ref();
    if status
        .and_then(|s| s.nominated_node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
    {
        return false;
    }
    status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "PodScheduled"
                    && c.status == "False"
                    && c.reason.as_deref() == Some("Unschedulable")
            })
        })
}

/// The kind of the pod's controlling owner.
pub fn controller_kind(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<String> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.kind.clone())
}

/// A Kubernetes pod -> core pod; persistent volume claims resolve through `volumes`.
pub fn convert_pod(p: &corev1::Pod, volumes: &VolumeIndex) -> Result<core::Pod> {
    let mut pod = convert_without_volumes(p)?;
    crate::kept::attach_volumes(&mut pod, &crate::kept::claim_names(p), volumes);
    Ok(pod)
}

/// Everything of the core pod but its volumes, which depend on other objects (see
/// [`crate::kept`]).
pub(crate) fn convert_without_volumes(p: &corev1::Pod) -> Result<core::Pod> {
    let meta = &p.metadata;
    let default_spec = corev1::PodSpec::default();
    let spec = p.spec.as_ref().unwrap_or(&default_spec);
    let mut containers = Vec::with_capacity(spec.containers.len());
    for (i, c) in spec.containers.iter().enumerate() {
        containers.push(quantities(
            c.resources.as_ref().and_then(|r| r.requests.as_ref()),
            &format!("spec.containers[{i}].resources.requests"),
        )?);
    }
    let mut init_containers = Vec::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        init_containers.push(core::InitContainer {
            requests: quantities(
                c.resources.as_ref().and_then(|r| r.requests.as_ref()),
                &format!("spec.initContainers[{i}].resources.requests"),
            )?,
            restart_always: c.restart_policy.as_deref() == Some("Always"),
        });
    }
    let base = identity(p);
    let mut pod = core::Pod {
        deletion_cost: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(DELETION_COST))
            .and_then(|c| c.parse().ok())
            .unwrap_or(0),
        containers,
        init_containers,
        overhead: match &spec.overhead {
            Some(o) => Some(quantities(Some(o), "spec.overhead")?),
            None => None,
        },
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        priority: spec.priority.unwrap_or(0),
        created_at: epoch_secs(meta.creation_timestamp.as_ref()),
        started_at: p
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.as_second()),
        ..base
    };
    for c in &spec.containers {
        for port in c.ports.iter().flatten() {
            let Some(host_port) = port.host_port.filter(|p| *p > 0) else {
                continue;
            };
            pod.host_ports.push(core::HostPort {
                port: u16::try_from(host_port).unwrap_or(0),
                protocol: match port.protocol.as_deref() {
                    Some("UDP") => core::Protocol::UDP,
                    Some("SCTP") => core::Protocol::SCTP,
                    _ => core::Protocol::TCP,
                },
                host_ip: port.host_ip.clone().filter(|ip| !ip.is_empty()),
            });
        }
    }
    apply_constraints(
        &mut pod,
        spec.tolerations.as_deref().unwrap_or(&[]),
        spec.affinity.as_ref(),
        spec.topology_spread_constraints.as_deref().unwrap_or(&[]),
        "spec",
    )?;
    Ok(pod)
}

/// What is known of a pod that could not be converted: enough to drain and report it.
pub(crate) fn identity(p: &corev1::Pod) -> core::Pod {
    let meta = &p.metadata;
    core::Pod {
        namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
        name: meta.name.clone().unwrap_or_default(),
        labels: meta
            .labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        annotations: meta
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| READ_POD_ANNOTATIONS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        owner_kind: controller_kind(meta),
        node_name: p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> corev1::Pod {
        serde_json::from_value(json).unwrap_or_default()
    }

    #[test]
    fn provisionable_only_when_the_scheduler_gave_up() {
        let unschedulable = serde_json::json!({
            "metadata": {"name": "a", "namespace": "n"},
            "spec": {"containers": []},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        });
        assert!(is_provisionable(&pod(unschedulable.clone())));
        let mut nominated = unschedulable.clone();
        nominated["status"]["nominatedNodeName"] = "node-1".into();
        assert!(!is_provisionable(&pod(nominated)));
        let mut fresh = unschedulable.clone();
        fresh["status"]["conditions"] = serde_json::json!([]);
        assert!(!is_provisionable(&pod(fresh)));
        let mut bound = unschedulable;
        bound["spec"]["nodeName"] = "node-1".into();
        assert!(!is_provisionable(&pod(bound)));
    }

    #[test]
    fn keeps_only_the_annotations_decisions_read() -> Result<()> {
        let p = pod(serde_json::json!({
            "metadata": {"name": "a", "namespace": "n", "annotations": {
                "karpenter.sh/do-not-disrupt": "true",
                "kubernetes.io/config.mirror": "abc",
                DELETION_COST: "-5",
                "cni.projectcalico.org/podIP": "10.1.2.3/32",
                "sidecar.istio.io/status": "{\"containers\":[\"istio-proxy\"]}"
            }},
            "spec": {"containers": [{"name": "c"}]}
        }));
        let c = convert_pod(&p, &VolumeIndex::default())?;
        let keys: Vec<&str> = c.annotations.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["karpenter.sh/do-not-disrupt", "kubernetes.io/config.mirror"]
        );
        assert_eq!(c.deletion_cost, -5, "read before the annotation is dropped");
        // The decisions that read them still see them.
        assert_eq!(
            core::disruption::protect::Protection::of(&c.annotations, 0, 0),
            core::disruption::protect::Protection::Forever
        );
        Ok(())
    }

    #[test]
    fn converts_requests_ports_and_volumes() -> Result<()> {
        let p = pod(serde_json::json!({
            "metadata": {"name": "a", "namespace": "n",
                "annotations": {DELETION_COST: "7"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u", "controller": true}]},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "1Gi", "nvidia.com/gpu": "1"}},
                                 "ports": [{"containerPort": 80, "hostPort": 8080}]}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
            }
        }));
        let pv: corev1::PersistentVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv-1"},
            "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "v"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]}}}
        })).unwrap_or_default();
        let pvc: corev1::PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "data", "namespace": "n"},
            "spec": {"volumeName": "pv-1"}
        }))
        .unwrap_or_default();
        let index = VolumeIndex::new([pvc], [pv], []);
        let c = convert_pod(&p, &index)?;
        assert_eq!(c.containers[0].cpu_milli, 250);
        assert_eq!(c.containers[0].extended.get("nvidia.com/gpu"), Some(&1));
        assert_eq!(c.deletion_cost, 7);
        assert_eq!(c.owner_kind.as_deref(), Some("ReplicaSet"));
        assert_eq!(c.host_ports[0].port, 8080);
        assert_eq!(c.volumes.len(), 1);
        assert_eq!(c.volumes[0].csi_driver.as_deref(), Some("ebs.csi.aws.com"));
        assert_eq!(
            c.volumes[0].node_affinity[0][0].values,
            vec!["a".to_string()]
        );
        Ok(())
    }

    #[test]
    fn a_running_pod_keeps_when_it_started() -> Result<()> {
        let mut json = serde_json::json!({
            "metadata": {"name": "a", "namespace": "n",
                "creationTimestamp": "2026-11-20T00:00:00Z",
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": true}]},
            "spec": {"containers": [{"name": "c"}], "nodeName": "node-1"},
            "status": {"phase": "Running", "startTime": "2026-11-20T00:10:00Z"}
        });
        let c = convert_pod(&pod(json.clone()), &VolumeIndex::default())?;
        assert_eq!(c.owner_kind.as_deref(), Some("Job"));
        assert_eq!(c.started_at, Some(c.created_at + 600));
        // Not started yet: unknown, and the lost-work price falls back to its creation.
        json["status"] = serde_json::json!({"phase": "Pending"});
        let c = convert_pod(&pod(json), &VolumeIndex::default())?;
        assert_eq!(c.started_at, None);
        Ok(())
    }
}
