//! The whole cluster -> one [`core::Snapshot`]: the conversion the controller runs on its
//! reflectors every round, the admin CLI on a live read, and the simulator's importer on
//! `kubectl get -o yaml` output, so an offline replay sees exactly what the controller saw.
//!
//! Nodes and NodeClaims are merged: a Node backed by a NodeClaim (same providerID, or the
//! claim's `status.nodeName`) takes its NodePool, conditions and launch time from the claim; a
//! NodeClaim with no Node yet becomes an in-flight node sized from its status, its instance
//! type, or at least its requests, so pods already promised to it are not launched for twice.
//! Objects that cannot be converted are left out with a [`SnapshotProblem`]; the rest is used.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1 as appsv1;
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::policy::v1 as policyv1;
use k8s_openapi::api::storage::v1 as storagev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use karpenter_api::{NodeClaim, NodePool, wellknown};
use provisioner_core as core;

use crate::constraints::{label_selector, taint};
use crate::error::SnapshotProblem;
use crate::kept::KeptPod;
use crate::node::convert_node;
use crate::nodepool::nodepool;
use crate::pod::{convert_pod, epoch_secs};
use crate::resources::quantities;
use crate::volumes::{VolumeIndex, csi_limits};

/// Everything a snapshot is built from, borrowed from wherever the caller keeps it.
#[derive(Debug, Default)]
pub struct Objects<'a> {
    /// Seconds since the epoch (the core reads no clock).
    pub now: i64,
    /// Pods as the controller keeps them ([`KeptPod::new`] converts a Pod).
    pub pods: Vec<&'a KeptPod>,
    pub nodes: Vec<&'a corev1::Node>,
    pub nodeclaims: Vec<&'a NodeClaim>,
    pub nodepools: Vec<&'a NodePool>,
    pub daemonsets: Vec<&'a appsv1::DaemonSet>,
    pub pdbs: Vec<&'a policyv1::PodDisruptionBudget>,
    pub namespaces: Vec<&'a corev1::Namespace>,
    pub csinodes: Vec<&'a storagev1::CSINode>,
    pub volumes: VolumeIndex,
    /// The shapes the cluster can grow (from the provider's catalog).
    pub instance_types: Vec<core::InstanceType>,
    /// Per NodePool name, the instance types its NodeClass resolves to; a NodePool missing
    /// here may use every type.
    pub nodepool_instance_types: BTreeMap<String, Vec<String>>,
    /// Include pending pods the kube-scheduler has not yet declared unschedulable (the
    /// importer of a static snapshot wants every pending pod; the controller only acts for
    /// pods the scheduler gave up on).
    pub all_pending: bool,
}

/// A snapshot and what was left out of it.
#[derive(Debug, Clone, Default)]
pub struct Built {
    pub snapshot: core::Snapshot,
    pub problems: Vec<SnapshotProblem>,
    /// NodeClaims by the name of the core node that stands for them (Node name or, in
    /// flight, the claim's own name).
    pub claims_by_node: BTreeMap<String, String>,
}

fn object(kind: &str, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    match &meta.namespace {
        Some(ns) => format!("{kind} {ns}/{}", meta.name.as_deref().unwrap_or("?")),
        None => format!("{kind} {}", meta.name.as_deref().unwrap_or("?")),
    }
}

/// Whether condition `type_` is `True`.
pub fn condition_true(conditions: Option<&Vec<Condition>>, type_: &str) -> bool {
    conditions
        .into_iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// The hourly price of an instance type's offering in a zone and capacity type (the
/// cheapest matching one when the zone is unknown); 0 when the type is unknown.
pub fn offering_price(
    types: &[core::InstanceType],
    instance_type: Option<&str>,
    zone: Option<&str>,
    capacity_type: Option<&str>,
) -> f64 {
    let Some(it) = instance_type.and_then(|n| types.iter().find(|t| t.name == n)) else {
        return 0.0;
    };
    it.offerings
        .iter()
        .filter(|o| zone.is_none_or(|z| o.zone == z))
        .filter(|o| capacity_type.is_none_or(|c| o.capacity_type.as_label() == c))
        .map(|o| o.price)
        .fold(None, |best: Option<f64>, p| {
            Some(best.map_or(p, |b| b.min(p)))
        })
        .unwrap_or(0.0)
}

/// Builds the snapshot.
pub fn build(objects: &Objects<'_>) -> Built {
    let mut out = Built::default();
    let snap = &mut out.snapshot;
    snap.now = objects.now;
    snap.instance_types = objects.instance_types.clone();

    for np in &objects.nodepools {
        match nodepool(np, "nodepool") {
            Ok(mut p) => {
                if let Some(types) = objects.nodepool_instance_types.get(&p.name) {
                    p.instance_types = Some(types.clone());
                }
                snap.nodepools.push(p);
            }
            Err(e) => out.problems.push(SnapshotProblem {
                object: object("NodePool", &np.metadata),
                message: e.to_string(),
            }),
        }
    }

    let limits: BTreeMap<&str, BTreeMap<String, i64>> = objects
        .csinodes
        .iter()
        .filter_map(|c| Some((c.metadata.name.as_deref()?, csi_limits(c))))
        .collect();

    // Claims by providerID and by node name, for the merge.
    let mut by_provider: BTreeMap<&str, &NodeClaim> = BTreeMap::new();
    let mut by_node: BTreeMap<&str, &NodeClaim> = BTreeMap::new();
    for c in &objects.nodeclaims {
        if let Some(st) = &c.status {
            if let Some(p) = st.provider_id.as_deref().filter(|p| !p.is_empty()) {
                by_provider.insert(p, c);
            }
            if let Some(n) = st.node_name.as_deref().filter(|n| !n.is_empty()) {
                by_node.insert(n, c);
            }
        }
    }
    let mut claimed: std::collections::BTreeSet<String> = Default::default();
    for n in &objects.nodes {
        let mut node = match convert_node(n) {
            Ok(node) => node,
            Err(e) => {
                out.problems.push(SnapshotProblem {
                    object: object("Node", &n.metadata),
                    message: e.to_string(),
                });
                continue;
            }
        };
        if let Some(l) = limits.get(node.name.as_str()) {
            node.csi_limits = l.clone();
        }
        let provider = n.spec.as_ref().and_then(|s| s.provider_id.as_deref());
        let claim = provider
            .and_then(|p| by_provider.get(p))
            .or_else(|| by_node.get(node.name.as_str()))
            .copied();
        match claim {
            Some(c) => {
                let cname = c.metadata.name.clone().unwrap_or_default();
                claimed.insert(cname.clone());
                out.claims_by_node.insert(node.name.clone(), cname);
                merge_claim(&mut node, c);
            }
            None => {
                // A node no NodeClaim stands for is not ours to disrupt, whatever its labels.
                node.nodepool = None;
            }
        }
        node.price = offering_price(
            &objects.instance_types,
            node.instance_type.as_deref(),
            node.labels.get(core::labels::ZONE).map(String::as_str),
            node.labels
                .get(core::labels::CAPACITY_TYPE)
                .map(String::as_str),
        );
        snap.nodes.push(node);
    }
    for c in &objects.nodeclaims {
        let name = c.metadata.name.clone().unwrap_or_default();
        if claimed.contains(&name) {
            continue;
        }
        match in_flight(c, &objects.instance_types, objects.now) {
            Ok(node) => {
                out.claims_by_node.insert(node.name.clone(), name);
                snap.nodes.push(node);
            }
            Err(message) => out.problems.push(SnapshotProblem {
                object: object("NodeClaim", &c.metadata),
                message,
            }),
        }
    }

    for p in &objects.pods {
        let bound = p.node_name().is_some();
        // Bound pods use their node; pending ones count only when the kube-scheduler gave up
        // on them (or, for a static snapshot, whenever they are pending). A pending daemon
        // pod is the DaemonSet's business, not a node to launch.
        let pending_wanted =
            !p.is_daemon() && (p.provisionable || (objects.all_pending && !p.deleting));
        if p.terminal || !(bound || pending_wanted) {
            continue;
        }
        match p.to_core(&objects.volumes) {
            Ok(pod) => snap.pods.push(pod),
            Err(message) => out.problems.push(SnapshotProblem {
                object: format!("Pod {}/{}", p.namespace(), p.name()),
                message,
            }),
        }
    }

    for ds in &objects.daemonsets {
        match daemonset(ds, &objects.volumes) {
            Ok(d) => snap.daemonsets.push(d),
            Err(message) => out.problems.push(SnapshotProblem {
                object: object("DaemonSet", &ds.metadata),
                message,
            }),
        }
    }

    for pdb in &objects.pdbs {
        let spec = pdb.spec.as_ref();
        snap.pdbs.push(core::PodDisruptionBudget {
            namespace: pdb.metadata.namespace.clone().unwrap_or_default(),
            name: pdb.metadata.name.clone().unwrap_or_default(),
            selector: spec
                .and_then(|s| s.selector.as_ref())
                .map(label_selector)
                .unwrap_or_default(),
            disruptions_allowed: pdb.status.as_ref().map_or(0, |s| s.disruptions_allowed),
        });
    }

    for ns in &objects.namespaces {
        if let Some(name) = &ns.metadata.name {
            snap.namespaces
                .insert(name.clone(), ns.metadata.labels.clone().unwrap_or_default());
        }
    }
    out
}

/// Taints a node carries only while it comes up (kubelet, node lifecycle controller, cloud
/// controller, Karpenter's registration): they say nothing about where pods may go once it is
/// ready, as Karpenter's `KnownEphemeralTaints`. Matched by key and effect.
const EPHEMERAL_TAINTS: &[(&str, core::TaintEffect)] = &[
    (
        "node.kubernetes.io/not-ready",
        core::TaintEffect::NoSchedule,
    ),
    (
        "node.kubernetes.io/unreachable",
        core::TaintEffect::NoSchedule,
    ),
    (
        "node.cloudprovider.kubernetes.io/uninitialized",
        core::TaintEffect::NoSchedule,
    ),
    (
        wellknown::UNREGISTERED_TAINT_KEY,
        core::TaintEffect::NoExecute,
    ),
];

/// Whether `t` is one of the [`EPHEMERAL_TAINTS`] (a taint with an unknown effect is not).
pub fn is_ephemeral_taint(t: &corev1::Taint) -> bool {
    crate::constraints::taint_effect(&t.effect).is_some_and(|e| is_ephemeral(&t.key, e))
}

/// Whether a taint with this key and effect is one of the [`EPHEMERAL_TAINTS`].
fn is_ephemeral(key: &str, effect: core::TaintEffect) -> bool {
    EPHEMERAL_TAINTS
        .iter()
        .any(|(k, e)| key == *k && effect == *e)
}

/// A claimed node that has not finished coming up, seen as it will be once it has (as
/// Karpenter's `StateNode` does): before registration its labels and taints are the
/// claim's, which registration is about to sync; until initialization its ephemeral and
/// startup taints are ignored and resources the kubelet has not reported yet are the claim's.
/// Otherwise every provisioning round while a node registers would find its pods no room
/// there and launch a second node for them.
fn expected_when_ready(node: &mut core::Node, c: &NodeClaim, registered: bool) {
    if !registered {
        if let Some(labels) = &c.metadata.labels {
            for (k, v) in labels {
                node.labels.insert(k.clone(), v.clone());
            }
        }
        node.taints = c
            .spec
            .taints
            .iter()
            .flatten()
            .filter_map(|t| taint(t, "spec.taints").ok())
            .collect();
    }
    let startup: Vec<core::Taint> = c
        .spec
        .startup_taints
        .iter()
        .flatten()
        .filter_map(|t| taint(t, "spec.startupTaints").ok())
        .collect();
    node.taints.retain(|t| {
        !is_ephemeral(&t.key, t.effect)
            && !startup
                .iter()
                .any(|s| s.key == t.key && s.effect == t.effect)
    });
    let from_claim = c.status.as_ref().and_then(|s| s.allocatable.as_ref());
    if let Ok(claim) = quantities(from_claim, "status.allocatable") {
        fill_unreported(&mut node.allocatable, &claim);
        fill_unreported(&mut node.capacity, &claim);
    }
}

/// Resources the node reports as zero take the claim's value.
fn fill_unreported(node: &mut core::Resources, claim: &core::Resources) {
    for (mine, theirs) in [
        (&mut node.cpu_milli, claim.cpu_milli),
        (&mut node.memory, claim.memory),
        (&mut node.pods, claim.pods),
        (&mut node.ephemeral_storage, claim.ephemeral_storage),
    ] {
        if *mine == 0 {
            *mine = theirs;
        }
    }
    for (k, v) in &claim.extended {
        let mine = node.extended.entry(k.clone()).or_insert(0);
        if *mine == 0 {
            *mine = *v;
        }
    }
}

/// What only the NodeClaim knows about a registered node.
fn merge_claim(node: &mut core::Node, c: &NodeClaim) {
    let conds = c.status.as_ref().and_then(|s| s.conditions.as_ref());
    if !condition_true(conds, "Initialized") {
        expected_when_ready(node, c, condition_true(conds, "Registered"));
    }
    node.nodepool = c
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(wellknown::NODEPOOL_LABEL))
        .cloned();
    node.initialized = condition_true(conds, "Initialized");
    node.drifted = condition_true(conds, "Drifted");
    node.marked_for_deletion |= c.metadata.deletion_timestamp.is_some();
    node.created_at = epoch_secs(c.metadata.creation_timestamp.as_ref());
    node.last_pod_event_at = c
        .status
        .as_ref()
        .and_then(|s| s.last_pod_event_time.as_ref())
        .map_or(node.created_at, |t| t.0.as_second());
}

/// A NodeClaim with no Node yet, as an in-flight node.
fn in_flight(c: &NodeClaim, types: &[core::InstanceType], now: i64) -> Result<core::Node, String> {
    let name = c.metadata.name.clone().unwrap_or_default();
    let mut labels = c.metadata.labels.clone().unwrap_or_default();
    for r in &c.spec.requirements {
        if r.operator == karpenter_api::Operator::In && r.values().len() == 1 {
            labels
                .entry(r.key.clone())
                .or_insert_with(|| r.values()[0].clone());
        }
    }
    labels.insert(core::labels::HOSTNAME.to_string(), name.clone());
    let instance_type = labels.get(core::labels::INSTANCE_TYPE).cloned();
    let status = c.status.as_ref();
    let from_status = quantities(
        status.and_then(|s| s.allocatable.as_ref()),
        "status.allocatable",
    )
    .map_err(|e| e.to_string())?;
    let allocatable = if from_status != core::Resources::default() {
        from_status
    } else if let Some(it) = instance_type
        .as_deref()
        .and_then(|n| types.iter().find(|t| t.name == n))
    {
        allocatable_of(it)
    } else {
        quantities(
            c.spec.resources.as_ref().and_then(|r| r.requests.as_ref()),
            "spec.resources.requests",
        )
        .map_err(|e| e.to_string())?
    };
    let mut taints = Vec::new();
    for (i, t) in c.spec.taints.iter().flatten().enumerate() {
        taints.push(taint(t, &format!("spec.taints[{i}]")).map_err(|e| e.to_string())?);
    }
    let created = epoch_secs(c.metadata.creation_timestamp.as_ref()).max(0);
    let price = offering_price(
        types,
        instance_type.as_deref(),
        labels.get(core::labels::ZONE).map(String::as_str),
        labels.get(core::labels::CAPACITY_TYPE).map(String::as_str),
    );
    Ok(core::Node {
        nodepool: labels.get(core::labels::NODEPOOL).cloned(),
        instance_type,
        name,
        labels,
        annotations: c.metadata.annotations.clone().unwrap_or_default(),
        taints,
        capacity: allocatable.clone(),
        allocatable,
        price,
        in_flight: true,
        marked_for_deletion: c.metadata.deletion_timestamp.is_some(),
        created_at: if created == 0 { now } else { created },
        last_pod_event_at: if created == 0 { now } else { created },
        ..Default::default()
    })
}

/// What pods can use on a node of this type: the core's rule (capacity minus overhead, never
/// negative; unreported ephemeral storage unconstrained).
pub fn allocatable_of(it: &core::InstanceType) -> core::Resources {
    it.allocatable()
}

/// A DaemonSet's pod template as the pod it places on every node it selects.
fn daemonset(ds: &appsv1::DaemonSet, volumes: &VolumeIndex) -> Result<core::DaemonSet, String> {
    let namespace = ds.metadata.namespace.clone().unwrap_or_default();
    let name = ds.metadata.name.clone().unwrap_or_default();
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let pod = corev1::Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            namespace: Some(namespace.clone()),
            name: Some(format!("{name}-template")),
            labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
            annotations: template
                .metadata
                .as_ref()
                .and_then(|m| m.annotations.clone()),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    };
    let mut p = convert_pod(&pod, volumes).map_err(|e| e.to_string())?;
    p.owner_kind = Some("DaemonSet".into());
    Ok(core::DaemonSet {
        namespace,
        name,
        pod: p,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        match serde_json::from_value(v) {
            Ok(t) => t,
            Err(e) => panic!("fixture: {e}"),
        }
    }

    fn small_type() -> core::InstanceType {
        core::InstanceType {
            name: "small".into(),
            capacity: core::Resources {
                cpu_milli: 2000,
                memory: 4 << 30,
                pods: 110,
                ..Default::default()
            },
            overhead: core::Resources {
                cpu_milli: 100,
                ..Default::default()
            },
            labels: Default::default(),
            taints: vec![],
            offerings: vec![core::Offering {
                zone: "a".into(),
                capacity_type: core::CapacityType::OnDemand,
                price: 0.25,
                priced: true,
                available: true,
            }],
            csi_limits: Default::default(),
        }
    }

    #[test]
    fn merges_nodes_with_claims_and_keeps_claims_in_flight() {
        let registered: NodeClaim = from(json!({
            "metadata": {"name": "pool-a", "labels": {"karpenter.sh/nodepool": "pool"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeClassRef": {"group": "g", "kind": "ClusterAPINodeClass", "name": "n"}, "requirements": []},
            "status": {"providerID": "test://a", "conditions": [
                {"type": "Initialized", "status": "True", "reason": "r", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }));
        let flying: NodeClaim = from(json!({
            "metadata": {"name": "pool-b", "labels": {"karpenter.sh/nodepool": "pool"}},
            "spec": {"nodeClassRef": {"group": "g", "kind": "ClusterAPINodeClass", "name": "n"}, "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["small"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}
        }));
        let node: corev1::Node = from(json!({
            "metadata": {"name": "node-a", "labels": {"node.kubernetes.io/instance-type": "small", "topology.kubernetes.io/zone": "a", "karpenter.sh/nodepool": "pool"}},
            "spec": {"providerID": "test://a"},
            "status": {"allocatable": {"cpu": "1900m", "memory": "4Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}
        }));
        let stranger: corev1::Node = from(json!({
            "metadata": {"name": "other", "labels": {"karpenter.sh/nodepool": "pool"}},
            "spec": {"providerID": "test://other"},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}
        }));
        let pending: corev1::Pod = from(json!({
            "metadata": {"name": "p", "namespace": "n"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        }));
        let not_yet: corev1::Pod = from(json!({
            "metadata": {"name": "q", "namespace": "n"},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Pending"}
        }));
        let daemon_pending: corev1::Pod = from(json!({
            "metadata": {"name": "d", "namespace": "n", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": true}]},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        }));
        let kept: Vec<KeptPod> = [&pending, &not_yet, &daemon_pending]
            .into_iter()
            .map(KeptPod::new)
            .collect();
        let objects = Objects {
            now: 1_800_000_000,
            pods: kept.iter().collect(),
            nodes: vec![&node, &stranger],
            nodeclaims: vec![&registered, &flying],
            instance_types: vec![small_type()],
            ..Default::default()
        };
        let built = build(&objects);
        assert!(built.problems.is_empty(), "{:?}", built.problems);
        let snap = &built.snapshot;
        assert_eq!(snap.nodes.len(), 3);
        let a = &snap.nodes[0];
        assert_eq!(a.name, "node-a");
        assert_eq!(a.nodepool.as_deref(), Some("pool"));
        assert!(a.initialized && !a.in_flight);
        assert_eq!(a.price, 0.25);
        assert_eq!(
            built.claims_by_node.get("node-a").map(String::as_str),
            Some("pool-a")
        );
        assert_eq!(
            snap.nodes[1].nodepool, None,
            "a node without a claim is not ours"
        );
        let b = &snap.nodes[2];
        assert!(b.in_flight);
        assert_eq!(b.name, "pool-b");
        assert_eq!(
            b.allocatable.cpu_milli, 1900,
            "sized from its instance type, overhead off"
        );
        assert_eq!(
            b.labels.get(core::labels::ZONE).map(String::as_str),
            Some("a")
        );
        assert_eq!(b.price, 0.25);
        assert_eq!(b.created_at, 1_800_000_000, "no creation time yet: now");
        let names: Vec<&str> = snap.pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            vec!["p"],
            "only pods the scheduler gave up on, never daemon pods"
        );
    }

    fn coming_up(conditions: serde_json::Value) -> NodeClaim {
        from(json!({
            "metadata": {"name": "pool-c", "labels": {"karpenter.sh/nodepool": "pool", "team": "web"}},
            "spec": {"nodeClassRef": {"group": "g", "kind": "ClusterAPINodeClass", "name": "n"}, "requirements": [],
                     "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
                     "startupTaints": [{"key": "cni-not-ready", "effect": "NoSchedule"}]},
            "status": {"providerID": "test://c", "conditions": conditions,
                       "allocatable": {"cpu": "1900m", "memory": "4Gi", "pods": "110", "example.com/gpu": "1"}}
        }))
    }

    fn kubelet_node(taints: serde_json::Value) -> corev1::Node {
        from(json!({
            "metadata": {"name": "node-c", "labels": {"kubernetes.io/hostname": "node-c"}},
            "spec": {"providerID": "test://c", "taints": taints},
            "status": {"allocatable": {"cpu": "1900m", "memory": "4Gi", "pods": "110"}}
        }))
    }

    fn cond(type_: &str) -> serde_json::Value {
        json!({"type": type_, "status": "True", "reason": "r", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"})
    }

    #[test]
    fn a_node_still_registering_is_seen_as_its_claim_promises() {
        let claim = coming_up(json!([cond("Launched")]));
        let node = kubelet_node(json!([
            {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
            {"key": "cni-not-ready", "effect": "NoSchedule"}
        ]));
        let pod: corev1::Pod = from(json!({
            "metadata": {"name": "p", "namespace": "n"},
            "spec": {"nodeSelector": {"team": "web"},
                     "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}],
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "example.com/gpu": "1"}}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        }));
        let kept = KeptPod::new(&pod);
        let objects = Objects {
            now: 1_800_000_000,
            pods: vec![&kept],
            nodes: vec![&node],
            nodeclaims: vec![&claim],
            ..Default::default()
        };
        let built = build(&objects);
        assert!(built.problems.is_empty(), "{:?}", built.problems);
        let n = &built.snapshot.nodes[0];
        assert!(!n.in_flight && !n.initialized);
        assert_eq!(
            n.taints,
            vec![core::Taint {
                key: "dedicated".into(),
                value: Some("web".into()),
                effect: core::TaintEffect::NoSchedule
            }],
            "the claim's taints, not the kubelet's while it registers"
        );
        assert_eq!(n.labels.get("team").map(String::as_str), Some("web"));
        assert_eq!(n.allocatable.extended.get("example.com/gpu"), Some(&1));
        // The pending pod goes to the node coming up, not to a second node.
        let result = core::schedule(&built.snapshot, &core::SchedulingOptions::default());
        assert_eq!(result.existing_placements.len(), 1, "{result:?}");
        assert_eq!(result.existing_placements[0].node, "node-c");
        assert!(result.new_node_claims.is_empty() && result.unschedulable.is_empty());
    }

    #[test]
    fn a_registered_node_keeps_its_own_taints_but_not_the_passing_ones() {
        let claim = coming_up(json!([cond("Launched"), cond("Registered")]));
        let node = kubelet_node(json!([
            {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
            {"key": "cni-not-ready", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
            {"key": "dedicated", "value": "web", "effect": "NoSchedule"}
        ]));
        let objects = Objects {
            nodes: vec![&node],
            nodeclaims: vec![&claim],
            ..Default::default()
        };
        let n = &build(&objects).snapshot.nodes[0];
        let keys: Vec<(&str, core::TaintEffect)> = n
            .taints
            .iter()
            .map(|t| (t.key.as_str(), t.effect))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("node.kubernetes.io/not-ready", core::TaintEffect::NoExecute),
                ("dedicated", core::TaintEffect::NoSchedule)
            ],
            "only the ephemeral NoSchedule and the startup taint go"
        );
        assert_eq!(
            n.labels.get("team"),
            None,
            "registered: the node's own labels"
        );

        // Initialized: the node is what it says.
        let ready = coming_up(json!([
            cond("Launched"),
            cond("Registered"),
            cond("Initialized")
        ]));
        let objects = Objects {
            nodes: vec![&node],
            nodeclaims: vec![&ready],
            ..Default::default()
        };
        assert_eq!(build(&objects).snapshot.nodes[0].taints.len(), 4);
    }

    #[test]
    fn bad_objects_are_reported_and_the_rest_is_used() {
        let no_status: corev1::Node = from(json!({"metadata": {"name": "booting"}}));
        let bad_pool: NodePool = from(json!({
            "metadata": {"name": "bad"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}, "requirements": []}},
                     "limits": {"cpu": "lots"}}
        }));
        let good_pool: NodePool = from(json!({
            "metadata": {"name": "good"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}, "requirements": []}}}
        }));
        let objects = Objects {
            nodes: vec![&no_status],
            nodepools: vec![&bad_pool, &good_pool],
            nodepool_instance_types: [("good".to_string(), vec!["small".to_string()])].into(),
            ..Default::default()
        };
        let built = build(&objects);
        assert_eq!(built.snapshot.nodepools.len(), 1);
        assert_eq!(
            built.snapshot.nodepools[0].instance_types,
            Some(vec!["small".to_string()])
        );
        let text: Vec<String> = built.problems.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 2, "{text:?}");
        assert!(
            text.iter()
                .any(|t| t.contains("NodePool bad") && t.contains("limits.cpu")),
            "{text:?}"
        );
        assert!(text.iter().any(|t| t.contains("Node booting")), "{text:?}");
    }
}
