//! Memory of a controller at scale (issue 18): builds `nodes` Node + NodeClaim objects and
//! `nodes x pods_per_node` bound Pod objects as the controller's reflectors hold them (one
//! `Arc` per object; Nodes slimmed by `kcapi_snapshot::slim`, Pods kept as
//! `kcapi_snapshot::KeptPod`, as `crates/controller/src/state.rs` does), then runs the one
//! snapshot conversion the controller, the admin CLI and the simulator share
//! ([`kcapi_snapshot::build`]) and reports the resident set size after each step, read from
//! `/proc/self/statm`, and the heap bytes in use.
//!
//! The third argument picks how pods are stored, to compare with what the stores did before:
//! `kept` (now), `slim` (k8s-openapi Pods with `kcapi_snapshot::slim::pod`, as in round 3),
//! `metadata` (only metadata slimmed, as in round 2). The old modes convert their stores to
//! kept pods for the build, so their "snapshot" step includes that copy.
//!
//! `cargo run --release -p karpenter-capi-snapshot --example controller_memory -- [nodes] [pods-per-node] [kept|slim|metadata]`
//!
//! The objects follow what a real cluster serves: pods of deployments (owner reference,
//! `pod-template-hash`, three labels, the CNI's and a `kubectl rollout restart`'s
//! annotations, one container with image, requests and limits, the
//! default not-ready/unreachable tolerations, status with conditions, IPs and a container
//! status; a fifth spread over zones; six environment variables, liveness and readiness
//! probes, a config volume and the projected service-account token volume every pod gets),
//! nodes with the well-known labels, capacity, allocatable, conditions, addresses, node info
//! and the kubelet's list of 20 images.

use std::sync::Arc;

use k8s_openapi::api::core::v1 as corev1;
use karpenter_api::{NodeClaim, NodePool};
use serde_json::json;

/// Resident set size in MB (Linux `/proc/self/statm`; 0 elsewhere).
fn rss_mb() -> f64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<f64>().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / 1e6
}

/// Counts every allocation: RSS keeps what the allocator freed but did not return (e.g. the
/// fields slimming drops right after deserialising), the count is what the stores hold.
#[global_allocator]
static GLOBAL: &stats_alloc::StatsAlloc<std::alloc::System> = &stats_alloc::INSTRUMENTED_SYSTEM;

/// Heap bytes in use in MB.
fn heap_mb() -> f64 {
    let s = GLOBAL.stats();
    (s.bytes_allocated as f64 - s.bytes_deallocated as f64 + s.bytes_reallocated as f64) / 1e6
}

fn node_json(i: usize) -> serde_json::Value {
    let zone = format!("zone-{}", i % 3 + 1);
    let name = format!("node-{i:05}");
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name, "uid": format!("5b2c{i:08x}-0000-4000-8000-000000000000"),
            "resourceVersion": format!("{}", 100_000 + i),
            "creationTimestamp": "2026-11-01T00:00:00Z",
            "labels": {
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "m5.4xlarge",
                "topology.kubernetes.io/zone": zone, "topology.kubernetes.io/region": "us-east-1",
                "karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "on-demand",
                "karpenter.sh/initialized": "true", "karpenter.sh/registered": "true",
                "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
        },
        "spec": {"providerID": format!("capi://cluster/machine-{i:05}")},
        "status": {
            "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "15890m", "memory": "62Gi", "pods": "110", "ephemeral-storage": "95Gi"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                 "message": "kubelet has sufficient memory available",
                 "lastHeartbeatTime": "2026-12-01T00:00:00Z", "lastTransitionTime": "2026-11-01T00:00:00Z"},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure",
                 "message": "kubelet has no disk pressure",
                 "lastHeartbeatTime": "2026-12-01T00:00:00Z", "lastTransitionTime": "2026-11-01T00:00:00Z"},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID",
                 "message": "kubelet has sufficient PID available",
                 "lastHeartbeatTime": "2026-12-01T00:00:00Z", "lastTransitionTime": "2026-11-01T00:00:00Z"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "message": "kubelet is posting ready status",
                 "lastHeartbeatTime": "2026-12-01T00:00:00Z", "lastTransitionTime": "2026-11-01T00:00:00Z"}
            ],
            "addresses": [{"type": "InternalIP", "address": format!("10.{}.{}.{}", i / 65536 % 256, i / 256 % 256, i % 256)},
                          {"type": "Hostname", "address": name}],
            "images": (0..20).map(|k| json!({
                "names": [format!("registry.example.com/team/app-{k}@sha256:{:064x}", k * 7919 + i),
                          format!("registry.example.com/team/app-{k}:v1.2.3")],
                "sizeBytes": 50_000_000 + k * 1_000_000
            })).collect::<Vec<_>>(),
            "nodeInfo": {"machineID": "0", "systemUUID": "0", "bootID": "0",
                         "kernelVersion": "6.8.0", "osImage": "Ubuntu 24.04", "containerRuntimeVersion": "containerd://2.0.0",
                         "kubeletVersion": "v1.35.0", "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64"}
        }
    })
}

fn claim_json(i: usize) -> serde_json::Value {
    json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": format!("default-{i:05}"),
                     "labels": {"karpenter.sh/nodepool": "default"},
                     "creationTimestamp": "2026-11-01T00:00:00Z"},
        "spec": {"nodeClassRef": {"group": "infrastructure.cluster.x-k8s.io", "kind": "MachineDeployment", "name": "md"},
                 "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.4xlarge"]}],
                 "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}},
        "status": {"providerID": format!("capi://cluster/machine-{i:05}"), "nodeName": format!("node-{i:05}"),
                   "capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                   "allocatable": {"cpu": "15890m", "memory": "62Gi", "pods": "110"},
                   "conditions": [{"type": "Initialized", "status": "True", "reason": "Initialized", "message": "",
                                   "lastTransitionTime": "2026-11-01T00:00:00Z"}]}
    })
}

fn pod_json(node: usize, j: usize, pods_per_node: usize) -> serde_json::Value {
    let k = node * pods_per_node + j;
    let app = format!("app-{}", k / 10);
    let name = format!("{app}-7d9f8c6b5-{k:06}");
    let spread = k.is_multiple_of(5);
    let mut spec = json!({
        "nodeName": format!("node-{node:05}"),
        "schedulerName": "default-scheduler", "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default", "terminationGracePeriodSeconds": 30, "priority": 0,
        "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority",
        "containers": [{"name": "main", "image": format!("registry.example.com/team/{app}:v1.2.3"),
                        "resources": {"requests": {"cpu": format!("{}m", 100 + (k % 14) * 100), "memory": format!("{}Mi", 128 + (k % 31) * 128)},
                                      "limits": {"memory": format!("{}Mi", 256 + (k % 31) * 128)}},
                        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                        "imagePullPolicy": "IfNotPresent",
                        "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "PORT", "value": "8080"},
                                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                                {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}},
                                {"name": "DB_URL", "valueFrom": {"secretKeyRef": {"name": format!("{app}-db"), "key": "url"}}},
                                {"name": "FEATURE_FLAGS", "value": "checkout-v2,search-v3"}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                                          "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 1,
                                          "successThreshold": 1, "failureThreshold": 3},
                        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"},
                                           "periodSeconds": 5, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                        "volumeMounts": [{"name": "config", "mountPath": "/etc/app", "readOnly": true},
                                         {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}]}],
        "volumes": [
            {"name": "config", "configMap": {"name": format!("{app}-config"), "defaultMode": 420}},
            {"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
            ]}}
        ],
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ]
    });
    if spread {
        spec["topologySpreadConstraints"] = json!([{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}}
        }]);
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": format!("ns-{}", k / 1000),
            "uid": format!("a1b2{k:08x}-0000-4000-8000-000000000000"),
            "resourceVersion": format!("{}", 200_000 + k), "generateName": format!("{app}-7d9f8c6b5-"),
            "creationTimestamp": "2026-11-20T00:00:00Z",
            "labels": {"app": app, "pod-template-hash": "7d9f8c6b5", "team": format!("team-{}", k % 17)},
            "annotations": {
                "cni.projectcalico.org/containerID": format!("{k:064x}"),
                "cni.projectcalico.org/podIP": format!("10.1.{}.{}/32", k / 256 % 256, k % 256),
                "cni.projectcalico.org/podIPs": format!("10.1.{}.{}/32", k / 256 % 256, k % 256),
                "kubectl.kubernetes.io/restartedAt": "2026-11-19T12:00:00Z"
            },
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-7d9f8c6b5"),
                                 "uid": "00000000-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": spec,
        "status": {
            "phase": "Running", "qosClass": "Burstable", "hostIP": "10.0.0.1", "podIP": format!("10.1.{}.{}", k / 256 % 256, k % 256),
            "startTime": "2026-11-20T00:00:01Z",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-20T00:00:01Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-20T00:00:05Z"},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-11-20T00:00:05Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-20T00:00:00Z"}
            ],
            "containerStatuses": [{"name": "main", "ready": true, "started": true, "restartCount": 0,
                                   "image": format!("registry.example.com/team/{app}:v1.2.3"),
                                   "imageID": "registry.example.com/team/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                                   "containerID": format!("containerd://{k:064x}"),
                                   "state": {"running": {"startedAt": "2026-11-20T00:00:04Z"}}}]
        }
    })
}

/// A pod as a store holds it, in the mode being measured.
enum Stored {
    Kept(Arc<kcapi_snapshot::KeptPod>),
    Object(Arc<corev1::Pod>),
}

fn main() -> Result<(), serde_json::Error> {
    let args: Vec<String> = std::env::args().collect();
    let nodes: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5_000);
    let per_node: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(30);
    let mode = args.get(3).map_or("kept", String::as_str);
    let metadata_only = mode == "metadata";
    let keep_pod = |mut p: corev1::Pod| match mode {
        "metadata" => {
            kcapi_snapshot::slim::metadata(&mut p.metadata);
            Stored::Object(Arc::new(p))
        }
        "slim" => {
            kcapi_snapshot::slim::pod(&mut p);
            Stored::Object(Arc::new(p))
        }
        _ => Stored::Kept(Arc::new(kcapi_snapshot::KeptPod::new(&p))),
    };
    let slim_node = |mut n: corev1::Node| {
        if metadata_only {
            kcapi_snapshot::slim::metadata(&mut n.metadata);
        } else {
            kcapi_snapshot::slim::node(&mut n);
        }
        Arc::new(n)
    };
    println!("pods stored as: {mode}");
    let r0 = rss_mb();
    let h0 = heap_mb();
    // Inline sizes: most of a k8s-openapi object is `Option` fields that are `None` but
    // still take their room.
    println!(
        "size_of: Pod {} (PodSpec {}, Container {}, PodStatus {}, ContainerStatus {}), Node {}, core Pod {}, KeptPod {}",
        std::mem::size_of::<corev1::Pod>(),
        std::mem::size_of::<corev1::PodSpec>(),
        std::mem::size_of::<corev1::Container>(),
        std::mem::size_of::<corev1::PodStatus>(),
        std::mem::size_of::<corev1::ContainerStatus>(),
        std::mem::size_of::<corev1::Node>(),
        std::mem::size_of::<provisioner_core::Pod>(),
        std::mem::size_of::<kcapi_snapshot::KeptPod>(),
    );

    let t = std::time::Instant::now();
    let node_objs: Vec<Arc<corev1::Node>> = (0..nodes)
        .map(|i| serde_json::from_value(node_json(i)).map(slim_node))
        .collect::<Result<_, _>>()?;
    let claim_objs: Vec<Arc<NodeClaim>> = (0..nodes)
        .map(|i| serde_json::from_value(claim_json(i)).map(Arc::new))
        .collect::<Result<_, _>>()?;
    let pool: NodePool = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
        "spec": {"template": {"spec": {"nodeClassRef": {"group": "infrastructure.cluster.x-k8s.io",
                 "kind": "MachineDeployment", "name": "md"}, "requirements": []}}}
    }))?;
    let r_nodes = rss_mb();
    let pod_objs: Vec<Stored> = (0..nodes)
        .flat_map(|n| (0..per_node).map(move |j| (n, j)))
        .map(|(n, j)| serde_json::from_value(pod_json(n, j, per_node)).map(keep_pod))
        .collect::<Result<_, _>>()?;
    let r_pods = rss_mb();
    let h_pods = heap_mb();
    let gen_secs = t.elapsed().as_secs_f64();

    let t = std::time::Instant::now();
    let kept: Vec<Arc<kcapi_snapshot::KeptPod>> = pod_objs
        .iter()
        .map(|p| match p {
            Stored::Kept(k) => k.clone(),
            Stored::Object(o) => Arc::new(kcapi_snapshot::KeptPod::new(o)),
        })
        .collect();
    let objects = kcapi_snapshot::Objects {
        now: 1_796_000_000,
        pods: kept.iter().map(AsRef::as_ref).collect(),
        nodes: node_objs.iter().map(AsRef::as_ref).collect(),
        nodeclaims: claim_objs.iter().map(AsRef::as_ref).collect(),
        nodepools: vec![&pool],
        ..Default::default()
    };
    let built = kcapi_snapshot::build(&objects);
    let build_secs = t.elapsed().as_secs_f64();
    drop(objects);
    drop(kept);
    let r_snap = rss_mb();
    let h_snap = heap_mb();
    println!(
        "nodes={nodes} pods={} snapshot: nodes={} pods={} problems={} build={build_secs:.2}s (objects generated in {gen_secs:.1}s)",
        pod_objs.len(),
        built.snapshot.nodes.len(),
        built.snapshot.pods.len(),
        built.problems.len(),
    );
    println!(
        "rss MB: start {r0:.0}, +nodes&claims {:.0}, +pods {:.0} (reflector objects total {:.0}; {:.2} KB/pod), +snapshot {:.0} ({:.2} KB/pod), total {r_snap:.0}",
        r_nodes - r0,
        r_pods - r_nodes,
        r_pods - r0,
        (r_pods - r_nodes) * 1e3 / pod_objs.len().max(1) as f64,
        r_snap - r_pods,
        (r_snap - r_pods) * 1e3 / pod_objs.len().max(1) as f64,
    );
    println!(
        "heap in use MB: reflector objects {:.0} ({:.2} KB/pod), +snapshot {:.0}, total {:.0}",
        h_pods - h0,
        (h_pods - h0) * 1e3 / pod_objs.len().max(1) as f64,
        h_snap - h_pods,
        h_snap - h0,
    );
    Ok(())
}
