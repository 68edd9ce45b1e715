//! A live cluster's snapshot from `kubectl get pods,nodes,nodepools,machinedeployments,pdb -A -o
//! yaml` (a `List`, or `---`-separated objects, in one or more files): its pods, nodes,
//! NodePools, MachineDeployments and PodDisruptionBudgets become the simulation's starting point. The admin CLI
//! will reuse this to answer "what would it do with my cluster now".
//!
//! Reading never fails as a whole for one bad object: problems are collected and reported,
//! the rest is used (the adapter's rule).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as corev1;
use provisioner_core as core;
use serde_json::Value;

use super::Arrival;
use crate::convert::NodePoolV1;
use crate::error::{Result, SimError};
use crate::quantity;
use crate::scenario::InstanceTypeSpec;

/// Annotation the simulator reads an hourly price from on a MachineDeployment. The CAPI
/// adapter owns the final key; this one is in our domain and documented in docs/simulator.md.
pub const PRICE_ANNOTATION: &str = "karpenter.cluster.x-k8s.io/price";
const CAS_CAPACITY: &str = "capacity.cluster-autoscaler.kubernetes.io/";

#[derive(Debug, Clone, Default)]
pub struct KubectlSnapshot {
    pub arrivals: Vec<Arrival>,
    pub nodes: Vec<core::Node>,
    pub nodepools: Vec<NodePoolV1>,
    pub daemonsets: Vec<core::DaemonSet>,
    pub instance_types: Vec<InstanceTypeSpec>,
    /// PodDisruptionBudgets (their status is recomputed as the simulation runs).
    pub pdbs: Vec<crate::pdb::SimPdb>,
    /// Objects left out, and why.
    pub problems: Vec<String>,
}

/// Parse one file's text.
pub fn parse(text: &str, file: &str, out: &mut KubectlSnapshot) -> Result<()> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text)
        .map_err(|e| crate::scenario::yaml_error(text, file, &e))?;
    let mut objects = Vec::new();
    for d in docs {
        if d.get("kind").and_then(Value::as_str) == Some("List") {
            if let Some(items) = d.get("items").and_then(Value::as_array) {
                objects.extend(items.iter().cloned());
            }
        } else if !d.is_null() {
            objects.push(d);
        }
    }
    let mut ds_seen = BTreeMap::new();
    for obj in objects {
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        let res = match kind.as_str() {
            "Pod" => pod(obj, out, &mut ds_seen),
            "Node" => node(obj, out),
            "NodePool" => serde_json::from_value::<NodePoolV1>(obj)
                .map(|np| out.nodepools.push(np))
                .map_err(|e| e.to_string()),
            "MachineDeployment" | "MachineSet" => machine_deployment(&obj, out),
            "PodDisruptionBudget" => serde_json::from_value(obj)
                .map_err(|e| e.to_string())
                .and_then(|k| crate::pdb::SimPdb::from_k8s(&k))
                .map(|b| out.pdbs.push(b)),
            _ => Err(format!("kind `{kind}` is not used by the simulator")),
        };
        if let Err(e) = res {
            out.problems.push(format!("{file}: {kind} {name}: {e}"));
        }
    }
    Ok(())
}

/// A Kubernetes pod -> core pod (the shared conversion; a static snapshot has no PVCs).
pub fn convert_pod(p: &corev1::Pod) -> std::result::Result<core::Pod, String> {
    kcapi_snapshot::pod::convert_pod(p, &kcapi_snapshot::VolumeIndex::default())
        .map_err(|e| e.to_string())
}

fn pod(
    obj: Value,
    out: &mut KubectlSnapshot,
    ds_seen: &mut BTreeMap<String, ()>,
) -> std::result::Result<(), String> {
    let p: corev1::Pod = serde_json::from_value(obj).map_err(|e| e.to_string())?;
    let phase = p
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    if phase == "Succeeded" || phase == "Failed" {
        return Err(format!("phase {phase}: not running"));
    }
    let pod = convert_pod(&p)?;
    if pod.owner_kind.as_deref() == Some("DaemonSet") {
        // One DaemonSet entry per owner: its pods are per-node overhead, not workload.
        let owner = p
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| o.name.clone())
            .unwrap_or_default();
        let key = format!("{}/{owner}", pod.namespace);
        if ds_seen.insert(key, ()).is_none() {
            out.daemonsets.push(core::DaemonSet {
                namespace: pod.namespace.clone(),
                name: owner,
                pod: core::Pod {
                    node_name: None,
                    ..pod
                },
            });
        }
        return Ok(());
    }
    let bound_to = pod.node_name.clone();
    out.arrivals.push(Arrival {
        pod: core::Pod {
            node_name: None,
            ..pod
        },
        at: 0,
        leave: None,
        work_seconds: None,
        bound_to,
    });
    Ok(())
}

fn node(obj: Value, out: &mut KubectlSnapshot) -> std::result::Result<(), String> {
    let n: corev1::Node = serde_json::from_value(obj).map_err(|e| e.to_string())?;
    out.nodes
        .push(kcapi_snapshot::node::convert_node(&n).map_err(|e| e.to_string())?);
    Ok(())
}

fn machine_deployment(obj: &Value, out: &mut KubectlSnapshot) -> std::result::Result<(), String> {
    let ann = obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object);
    let get = |k: &str| ann.and_then(|a| a.get(k)).and_then(Value::as_str);
    let cpu = get(&format!("{CAS_CAPACITY}cpu"))
        .ok_or("no capacity.cluster-autoscaler.kubernetes.io/cpu annotation")?;
    let mem = get(&format!("{CAS_CAPACITY}memory"))
        .ok_or("no capacity.cluster-autoscaler.kubernetes.io/memory annotation")?;
    let vcpu =
        quantity::cpu_milli(cpu).map_err(|e| format!("{CAS_CAPACITY}cpu: {e}"))? as f64 / 1000.0;
    let memory_mib = quantity::count(mem).map_err(|e| format!("{CAS_CAPACITY}memory: {e}"))? >> 20;
    let gpu = match get(&format!("{CAS_CAPACITY}gpu-count")) {
        Some(g) => quantity::count(g).map_err(|e| format!("{CAS_CAPACITY}gpu-count: {e}"))?,
        None => 0,
    };
    let price = match get(PRICE_ANNOTATION) {
        Some(p) => p
            .parse::<f64>()
            .map_err(|_| format!("{PRICE_ANNOTATION}: `{p}` is not a number"))?,
        None => {
            return Err(format!(
                "no {PRICE_ANNOTATION} annotation: the simulator needs a price"
            ));
        }
    };
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect::<BTreeMap<_, _>>()
        })
        .unwrap_or_default();
    let md_name = format!(
        "{}/{}",
        obj.pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("default"),
        obj.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("?")
    );
    let name = labels
        .get(core::labels::INSTANCE_TYPE)
        .cloned()
        .unwrap_or(md_name);
    let zone = obj
        .pointer("/spec/template/spec/failureDomain")
        .and_then(Value::as_str)
        .or_else(|| labels.get(core::labels::ZONE).map(String::as_str))
        .map(|z| vec![z.to_string()]);
    if out.instance_types.iter().any(|t| t.name == name) {
        return Err(format!(
            "instance type `{name}` already defined by another MachineDeployment"
        ));
    }
    out.instance_types.push(InstanceTypeSpec {
        name,
        vcpu,
        memory_mib,
        gpu,
        arch: labels
            .get(core::labels::ARCH)
            .cloned()
            .unwrap_or_else(|| "amd64".into()),
        price,
        spot_price: None,
        zones: zone,
        labels: BTreeMap::new(),
    });
    Ok(())
}

/// Read every file of a snapshot.
pub fn load(paths: &[std::path::PathBuf]) -> Result<KubectlSnapshot> {
    let mut out = KubectlSnapshot::default();
    for p in paths {
        let text = std::fs::read_to_string(p).map_err(|e| SimError::io(p, e))?;
        parse(&text, &p.display().to_string(), &mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNAP: &str = r#"apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Node
    metadata:
      name: n1
      labels:
        node.kubernetes.io/instance-type: small
        topology.kubernetes.io/zone: zone-a
        karpenter.sh/nodepool: default
    status:
      allocatable: {cpu: 1900m, memory: 3Gi, pods: "110"}
      capacity: {cpu: "2", memory: 4Gi, pods: "110"}
      conditions: [{type: Ready, status: "True"}]
  - apiVersion: v1
    kind: Pod
    metadata:
      name: web-1
      namespace: shop
      labels: {app: web}
      ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-x, uid: u1, controller: true}]
    spec:
      nodeName: n1
      containers:
        - name: c
          image: x
          resources: {requests: {cpu: 500m, memory: 512Mi}}
    status: {phase: Running}
  - apiVersion: v1
    kind: Pod
    metadata:
      name: pending-1
      namespace: shop
    spec:
      containers:
        - {name: c, image: x, resources: {requests: {cpu: "1"}}}
      tolerations: [{key: dedicated, operator: Exists}]
    status: {phase: Pending}
  - apiVersion: v1
    kind: Pod
    metadata:
      name: agent-abc
      namespace: kube-system
      ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: u2, controller: true}]
    spec:
      nodeName: n1
      containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]
  - apiVersion: cluster.x-k8s.io/v1beta1
    kind: MachineDeployment
    metadata:
      name: md-small
      namespace: default
      annotations:
        capacity.cluster-autoscaler.kubernetes.io/cpu: "2"
        capacity.cluster-autoscaler.kubernetes.io/memory: 4Gi
        karpenter.cluster.x-k8s.io/price: "0.1"
    spec:
      template:
        metadata:
          labels: {node.kubernetes.io/instance-type: small}
        spec: {failureDomain: zone-a}
  - apiVersion: cluster.x-k8s.io/v1beta1
    kind: MachineDeployment
    metadata: {name: md-unpriced, namespace: default}
    spec: {}
  - apiVersion: policy/v1
    kind: PodDisruptionBudget
    metadata: {name: web, namespace: shop}
    spec: {maxUnavailable: 1, selector: {matchLabels: {app: web}}}
    status: {disruptionsAllowed: 0, currentHealthy: 0, desiredHealthy: 0, expectedPods: 0}
  - apiVersion: policy/v1
    kind: PodDisruptionBudget
    metadata: {name: both, namespace: shop}
    spec: {maxUnavailable: 1, minAvailable: 1, selector: {}}
"#;

    #[test]
    fn snapshot() -> Result<()> {
        let mut s = KubectlSnapshot::default();
        parse(SNAP, "snap.yaml", &mut s)?;
        assert_eq!(s.nodes.len(), 1);
        assert_eq!(s.nodes[0].allocatable.cpu_milli, 1900);
        assert_eq!(s.nodes[0].nodepool.as_deref(), Some("default"));
        assert_eq!(s.arrivals.len(), 2);
        assert_eq!(s.arrivals[0].bound_to.as_deref(), Some("n1"));
        assert_eq!(s.arrivals[1].pod.tolerations.len(), 1);
        assert_eq!(s.daemonsets.len(), 1);
        assert_eq!(s.instance_types.len(), 1);
        assert_eq!(s.instance_types[0].name, "small");
        assert_eq!(s.instance_types[0].zones, Some(vec!["zone-a".to_string()]));
        assert_eq!(s.problems.len(), 2, "{:?}", s.problems);
        assert!(s.problems[0].contains("md-unpriced"));
        // A budget's status is the simulation's to compute; a budget with both fields set
        // (the API server refuses it) is left out with the reason.
        assert_eq!(s.pdbs.len(), 1);
        assert_eq!(s.pdbs[0].name, "web");
        assert!(s.pdbs[0].selects(&s.arrivals[0].pod));
        assert!(!s.pdbs[0].selects(&s.arrivals[1].pod));
        assert!(
            s.problems[1].contains("PodDisruptionBudget both"),
            "{:?}",
            s.problems
        );
        Ok(())
    }
}
