//! `karpenter-capi explain <namespace/name>`: why a pod is pending and what the autoscaler
//! would launch for it, from the core on a live snapshot.
//!
//! Two answers, both from the core's own pieces rather than a second implementation:
//! - per existing node, which of the kube-scheduler's checks fails, using the core's filter
//!   building blocks (requirement matching, taints, request arithmetic, topology groups) one
//!   check at a time so the answer names the check;
//! - the provisioning decision: [`provisioner_core::schedule`] on the same snapshot the
//!   controller would build (every pending pod included), and where this pod ends up: an
//!   existing or in-flight node, a new NodeClaim (with its instance-type options and price),
//!   or unschedulable with the core's per-NodePool reason; plus, per instance type, whether
//!   the pod alone fits it.

use std::collections::BTreeMap;

use provisioner_core::filter::{Context, NodeView, PodFilter, PodMark};
use provisioner_core::requirements::terms_match;
use provisioner_core::resources::{format_amount, pod_requests};
use provisioner_core::taints::first_untolerated;
use provisioner_core::{self as core, SchedulingOptions};
use serde::Serialize;

use crate::live::Live;
use crate::{Clusters, Error};

/// One existing node and whether the pod may bind to it now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeVerdict {
    pub node: String,
    pub fits: bool,
    /// Every failing check, in the kube-scheduler's order.
    pub reasons: Vec<String>,
}

/// One instance type and whether the pod alone fits a new node of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShapeVerdict {
    pub instance_type: String,
    pub fits: bool,
    pub reason: Option<String>,
    /// Cheapest available offering's price per hour.
    pub price: Option<f64>,
}

/// What the autoscaler would do for the pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Decision {
    /// Already bound.
    Bound { node: String },
    /// Placed on an existing node or an in-flight NodeClaim: no launch needed.
    Existing { node: String },
    /// A new NodeClaim.
    Launch {
        nodepool: String,
        instance_type: String,
        zone: String,
        capacity_type: String,
        price: f64,
        /// Every instance type that could hold the claim's pods, cheapest first.
        options: Vec<(String, f64)>,
        /// Other pods launched on the same claim.
        with_pods: usize,
    },
    /// Nothing the autoscaler can launch holds it.
    Unschedulable { reason: String },
    /// The core did not consider it (left out of the snapshot).
    NotConsidered { reason: String },
}

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    pub pod: String,
    pub phase: String,
    /// The kube-scheduler's own word (PodScheduled=False message), if any.
    pub scheduler_message: Option<String>,
    pub requests: BTreeMap<String, String>,
    pub nodes: Vec<NodeVerdict>,
    pub shapes: Vec<ShapeVerdict>,
    pub decision: Decision,
    /// Preferences the core had to drop for it.
    pub relaxed: Vec<String>,
    pub notes: Vec<String>,
}

/// Explains `namespace/name` on a fresh read of the cluster.
pub async fn explain(clusters: &Clusters, pod: &str) -> Result<Explanation, Error> {
    let live = crate::live::read(clusters).await?;
    explain_on(&live, pod)
}

fn resource_text(r: &core::Resources) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in [
        ("cpu", r.cpu_milli),
        ("memory", r.memory),
        ("ephemeral-storage", r.ephemeral_storage),
    ] {
        if v > 0 {
            out.insert(k.to_string(), format_amount(k, v));
        }
    }
    for (k, v) in &r.extended {
        out.insert(k.clone(), format_amount(k, *v));
    }
    out
}

/// The explanation on one read (pure: no IO).
pub fn explain_on(live: &Live, pod_ref: &str) -> Result<Explanation, Error> {
    let (ns, name) = pod_ref.split_once('/').unwrap_or(("default", pod_ref));
    let Some(k8s_pod) = live.pods.iter().find(|p| {
        p.metadata.namespace.as_deref() == Some(ns) && p.metadata.name.as_deref() == Some(name)
    }) else {
        return Err(Error::Invalid(format!(
            "no pod {ns}/{name}: give it as namespace/name (see kubectl get pods -A)"
        )));
    };
    let status = k8s_pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.clone()).unwrap_or_default();
    let scheduler_message = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        .and_then(|c| c.message.clone());
    let built = live.build(true);
    let snap = &built.snapshot;
    let mut notes: Vec<String> = live.notes.clone();
    notes.extend(
        built
            .problems
            .iter()
            .filter(|p| !p.object.starts_with("Pod "))
            .map(ToString::to_string),
    );
    let Some(pod) = snap
        .pods
        .iter()
        .find(|p| p.namespace == ns && p.name == name)
    else {
        let why = built
            .problems
            .iter()
            .find(|p| p.object == format!("Pod {ns}/{name}"))
            .map(|p| p.message.clone())
            .unwrap_or_else(|| {
                "not a pod the autoscaler provisions for (finished, being deleted, a DaemonSet pod, or scheduled by another scheduler)".into()
            });
        return Ok(Explanation {
            pod: format!("{ns}/{name}"),
            phase,
            scheduler_message,
            requests: BTreeMap::new(),
            nodes: Vec::new(),
            shapes: Vec::new(),
            decision: match &k8s_pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                Some(n) => Decision::Bound { node: n.clone() },
                None => Decision::NotConsidered { reason: why },
            },
            relaxed: Vec::new(),
            notes,
        });
    };
    let requests = pod_requests(pod);
    let nodes = node_verdicts(snap, pod, &requests);
    let shapes = shape_verdicts(snap, pod, &requests);
    if let Some(n) = &pod.node_name {
        return Ok(Explanation {
            pod: format!("{ns}/{name}"),
            phase,
            scheduler_message,
            requests: resource_text(&requests),
            nodes,
            shapes,
            decision: Decision::Bound { node: n.clone() },
            relaxed: Vec::new(),
            notes,
        });
    }
    let result = core::schedule(snap, &SchedulingOptions::default());
    let me = core::PodRef {
        namespace: ns.to_string(),
        name: name.to_string(),
    };
    let decision = if let Some(p) = result.existing_placements.iter().find(|p| p.pod == me) {
        Decision::Existing {
            node: p.node.clone(),
        }
    } else if let Some(c) = result.new_node_claims.iter().find(|c| c.pods.contains(&me)) {
        Decision::Launch {
            nodepool: c.nodepool.clone(),
            instance_type: c.launch.instance_type.clone(),
            zone: c.launch.zone.clone(),
            capacity_type: c.launch.capacity_type.as_label().to_string(),
            price: c.launch.price,
            options: c
                .instance_type_options
                .iter()
                .map(|o| (o.instance_type.clone(), o.cheapest.price))
                .collect(),
            with_pods: c.pods.len() - 1,
        }
    } else if let Some(u) = result.unschedulable.iter().find(|u| u.pod == me) {
        Decision::Unschedulable {
            reason: u.reason.clone(),
        }
    } else {
        Decision::NotConsidered {
            reason: "the core returned no decision for it".into(),
        }
    };
    let relaxed = result
        .relaxations
        .iter()
        .filter(|r| r.pod == me)
        .flat_map(|r| r.relaxed.clone())
        .collect();
    if result.over_price_cap {
        notes.push("the launch is over the price cap".into());
    }
    Ok(Explanation {
        pod: format!("{ns}/{name}"),
        phase,
        scheduler_message,
        requests: resource_text(&requests),
        nodes,
        shapes,
        decision,
        relaxed,
        notes,
    })
}

/// Node views as the kube-scheduler sees them: what is bound counts against allocatable.
fn views(snap: &core::Snapshot) -> Vec<NodeView> {
    let mut index = BTreeMap::new();
    let mut views: Vec<NodeView> = snap
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            index.insert(n.name.as_str(), i);
            let mut v = NodeView::new(
                &n.name,
                n.labels.clone(),
                n.taints.clone(),
                n.allocatable.clone(),
            );
            v.schedulable = n.ready && !n.marked_for_deletion && !n.in_flight;
            v
        })
        .collect();
    for (id, p) in snap.pods.iter().enumerate() {
        if let Some(i) = p.node_name.as_deref().and_then(|n| index.get(n)) {
            views[*i].add_pod(PodMark::of(id, p), &pod_requests(p));
        }
    }
    views
}

fn node_verdicts(
    snap: &core::Snapshot,
    pod: &core::Pod,
    requests: &core::Resources,
) -> Vec<NodeVerdict> {
    let mut views = views(snap);
    // The pod itself must not count against the node it is bound to.
    if let Some(n) = &pod.node_name
        && let Some(v) = views.iter_mut().find(|v| &v.name == n)
        && let Some(id) = snap.pods.iter().position(|p| std::ptr::eq(&**p, pod))
    {
        v.remove_pod(id, requests);
    }
    let ctx = Context {
        namespaces: &snap.namespaces,
        potential: &[],
    };
    let filter = PodFilter::new(pod, requests, &views, &ctx);
    views
        .iter()
        .map(|v| {
            let mut reasons = Vec::new();
            let node = snap.nodes.iter().find(|n| n.name == v.name);
            if !v.schedulable {
                reasons.push(match node {
                    Some(n) if n.in_flight => {
                        "still launching (an in-flight NodeClaim)".to_string()
                    }
                    Some(n) if n.marked_for_deletion => "being deleted or disrupted".to_string(),
                    _ => "not Ready".to_string(),
                });
            }
            let wrong: Vec<String> = pod
                .node_selector
                .iter()
                .filter(|(k, val)| v.labels.get(*k) != Some(*val))
                .map(|(k, val)| {
                    format!(
                        "{k}={val} (node has {})",
                        v.labels.get(k).map_or("none", String::as_str)
                    )
                })
                .collect();
            if !wrong.is_empty() {
                reasons.push(format!("nodeSelector does not match: {}", wrong.join(", ")));
            }
            if !terms_match(&pod.required_node_affinity, &v.labels) {
                reasons.push("required node affinity does not match its labels".into());
            }
            if let Some(vol) = pod
                .volumes
                .iter()
                .find(|vol| !terms_match(&vol.node_affinity, &v.labels))
            {
                reasons.push(format!("volume {} cannot attach in its topology", vol.name));
            }
            if let Some(t) = first_untolerated(&v.taints, &pod.tolerations, false) {
                reasons.push(format!(
                    "taint {}{}:{:?} not tolerated",
                    t.key,
                    t.value
                        .as_deref()
                        .map(|x| format!("={x}"))
                        .unwrap_or_default(),
                    t.effect
                ));
            }
            if !v.used.fits_with(requests, &v.allocatable) {
                let want = v.used.add(requests);
                let excess = want
                    .first_excess(&v.allocatable)
                    .map(|(r, w, h)| (r.to_string(), w, h))
                    .or_else(|| want.first_excess_extended(&v.allocatable));
                if let Some((r, w, h)) = excess {
                    reasons.push(format!(
                        "insufficient {r}: needs {} with what runs there, allocatable {}",
                        format_amount(&r, w),
                        format_amount(&r, h)
                    ));
                }
            }
            if reasons.is_empty() && !filter.allows(v) {
                reasons.push(if filter.allows_topology(v) {
                    "a host port is taken".into()
                } else {
                    "pod (anti-)affinity or topology spread forbids it".into()
                });
            }
            NodeVerdict {
                node: v.name.clone(),
                fits: reasons.is_empty(),
                reasons,
            }
        })
        .collect()
}

fn shape_verdicts(
    snap: &core::Snapshot,
    pod: &core::Pod,
    requests: &core::Resources,
) -> Vec<ShapeVerdict> {
    snap.instance_types
        .iter()
        .map(|it| {
            let allocatable = it.allocatable();
            let mut labels = it.labels.clone();
            labels.insert(core::labels::INSTANCE_TYPE.into(), it.name.clone());
            let price = it
                .offerings
                .iter()
                .filter(|o| o.available)
                .map(|o| o.price)
                .fold(None, |b: Option<f64>, p| Some(b.map_or(p, |b| b.min(p))));
            let reason = if price.is_none() {
                Some("no available offering (at max size, paused or backing off)".to_string())
            } else if let Some((r, w, h)) = requests
                .first_excess(&allocatable)
                .map(|(r, w, h)| (r.to_string(), w, h))
                .or_else(|| requests.first_excess_extended(&allocatable))
            {
                Some(format!(
                    "too small: {r} {} requested, {} allocatable after overhead",
                    format_amount(&r, w),
                    format_amount(&r, h)
                ))
            } else if let Some((k, val)) = pod
                .node_selector
                .iter()
                .find(|(k, val)| labels.get(*k).is_some_and(|have| have != *val))
            {
                Some(format!(
                    "nodeSelector {k}={val}: its nodes have {}",
                    labels[k]
                ))
            } else {
                first_untolerated(&it.taints, &pod.tolerations, false)
                    .map(|t| format!("its nodes carry taint {} the pod does not tolerate", t.key))
            };
            ShapeVerdict {
                instance_type: it.name.clone(),
                fits: reason.is_none(),
                reason,
                price,
            }
        })
        .collect()
}
