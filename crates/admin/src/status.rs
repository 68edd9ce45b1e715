//! `karpenter-capi status`: what the autoscaler manages now and what it last decided.
//!
//! NodePools with limits and usage, NodeClaims with phase, node, shape and price, nodes
//! with their cost per hour, pending pods with the core's reason (the same decision
//! `explain` shows, for all of them at once), the last Kubernetes events our controller
//! emitted (its decisions: Nominated, Launched, DisruptionLaunching, ...), and the gap of
//! the next provisioning decision to the core's lower bound, recomputed on the live snapshot
//! (the controller's metric holds only its own last round, and only on its pod).

use std::collections::BTreeMap;

use k8s_openapi::api::events::v1::Event;
use karpenter_capi_controller::context::MANAGER;
use kcapi_snapshot::cluster::{condition_true, offering_price};
use kube::Api;
use kube::api::ListParams;
use provisioner_core::{self as core, SchedulingOptions};
use serde::Serialize;

use crate::live::Live;
use crate::{Clusters, Error};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodePoolRow {
    pub name: String,
    pub nodeclass: String,
    pub weight: i32,
    pub nodes: i64,
    /// `resource -> limit` (spec.limits).
    pub limits: BTreeMap<String, String>,
    /// `resource -> provisioned` (status.resources).
    pub usage: BTreeMap<String, String>,
    pub ready: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeClaimRow {
    pub name: String,
    pub nodepool: String,
    /// Pending, Launched, Registered, Initialized, Ready or Deleting.
    pub phase: String,
    pub node: Option<String>,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub capacity_type: Option<String>,
    pub price_per_hour: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeRow {
    pub name: String,
    pub nodepool: Option<String>,
    pub instance_type: Option<String>,
    pub zone: Option<String>,
    pub ready: bool,
    pub pods: usize,
    /// 0 when the shape is not in any NodeClass's catalog (not ours, or unpriced).
    pub price_per_hour: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingRow {
    pub pod: String,
    /// What the core would do: `launch <type> in <pool>`, `fits on <node>`, or why not.
    pub outcome: String,
    pub schedulable: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventRow {
    /// RFC 3339.
    pub time: String,
    pub object: String,
    pub reason: String,
    pub warning: bool,
    pub note: String,
}

/// The next provisioning decision's cost and its distance to the core's lower bound.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gap {
    pub pending: usize,
    pub new_nodes: usize,
    pub cost_per_hour: f64,
    pub lower_bound_per_hour: Option<f64>,
    pub gap_percent: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Status {
    pub nodepools: Vec<NodePoolRow>,
    pub nodeclaims: Vec<NodeClaimRow>,
    pub nodes: Vec<NodeRow>,
    pub cost_per_hour: f64,
    pub pending: Vec<PendingRow>,
    pub events: Vec<EventRow>,
    pub gap: Gap,
    pub notes: Vec<String>,
}

/// How many of our latest events to show.
pub const EVENTS: usize = 20;

/// Reads the cluster and our events.
pub async fn status(clusters: &Clusters) -> Result<Status, Error> {
    let live = crate::live::read(clusters).await?;
    let events = Api::<Event>::all(clusters.workload.clone())
        .list(&ListParams::default())
        .await?
        .items;
    Ok(status_on(&live, &events))
}

fn quantities(
    m: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> BTreeMap<String, String> {
    m.into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}

fn event_time(e: &Event) -> String {
    e.event_time
        .as_ref()
        .map(|t| t.0.to_string())
        .or_else(|| {
            e.deprecated_last_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
        })
        .or_else(|| {
            e.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
        })
        .unwrap_or_default()
}

/// The status from one read (pure).
pub fn status_on(live: &Live, events: &[Event]) -> Status {
    let types = live.catalogs.instance_types();
    let built = live.build(true);
    let nodepools = live
        .nodepools
        .iter()
        .map(|np| {
            let st = np.status.as_ref();
            NodePoolRow {
                name: np.metadata.name.clone().unwrap_or_default(),
                nodeclass: np.spec.template.spec.node_class_ref.name.clone(),
                weight: np.spec.weight.unwrap_or(0),
                nodes: st.and_then(|s| s.nodes).unwrap_or(0),
                limits: quantities(np.spec.limits.as_ref()),
                usage: quantities(st.and_then(|s| s.resources.as_ref())),
                ready: condition_true(st.and_then(|s| s.conditions.as_ref()), "Ready"),
            }
        })
        .collect();
    let nodeclaims = live
        .nodeclaims
        .iter()
        .map(|c| {
            let labels = c.metadata.labels.clone().unwrap_or_default();
            let get = |k: &str| labels.get(k).cloned();
            let conds = c.status.as_ref().and_then(|s| s.conditions.as_ref());
            let phase = if c.metadata.deletion_timestamp.is_some() {
                "Deleting"
            } else {
                ["Ready", "Initialized", "Registered", "Launched"]
                    .into_iter()
                    .find(|t| condition_true(conds, t))
                    .unwrap_or("Pending")
            };
            let it = get(core::labels::INSTANCE_TYPE);
            let zone = get(core::labels::ZONE);
            let ct = get(core::labels::CAPACITY_TYPE);
            NodeClaimRow {
                name: c.metadata.name.clone().unwrap_or_default(),
                nodepool: get(core::labels::NODEPOOL).unwrap_or_default(),
                phase: phase.to_string(),
                node: c.status.as_ref().and_then(|s| s.node_name.clone()),
                price_per_hour: offering_price(
                    &types,
                    it.as_deref(),
                    zone.as_deref(),
                    ct.as_deref(),
                ),
                instance_type: it,
                zone,
                capacity_type: ct,
            }
        })
        .collect();
    let mut pods_on: BTreeMap<&str, usize> = BTreeMap::new();
    for p in &live.pods {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            *pods_on.entry(n).or_insert(0) += 1;
        }
    }
    let nodes: Vec<NodeRow> = live
        .nodes
        .iter()
        .map(|n| {
            let labels = n.metadata.labels.clone().unwrap_or_default();
            let get = |k: &str| labels.get(k).cloned();
            let name = n.metadata.name.clone().unwrap_or_default();
            let it = get(core::labels::INSTANCE_TYPE);
            let zone = get(core::labels::ZONE);
            let ready = n
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            NodeRow {
                pods: pods_on.get(name.as_str()).copied().unwrap_or(0),
                price_per_hour: offering_price(
                    &types,
                    it.as_deref(),
                    zone.as_deref(),
                    get(core::labels::CAPACITY_TYPE).as_deref(),
                ),
                name,
                nodepool: get(core::labels::NODEPOOL),
                instance_type: it,
                zone,
                ready,
            }
        })
        .collect();
    let cost_per_hour = nodes.iter().map(|n| n.price_per_hour).sum();

    let result = core::schedule(&built.snapshot, &SchedulingOptions::default());
    let mut pending = Vec::new();
    for p in built.snapshot.pods.iter().filter(|p| p.node_name.is_none()) {
        let me = core::PodRef {
            namespace: p.namespace.clone(),
            name: p.name.clone(),
        };
        let (outcome, schedulable) =
            if let Some(x) = result.existing_placements.iter().find(|x| x.pod == me) {
                (format!("fits on {}", x.node), true)
            } else if let Some(c) = result.new_node_claims.iter().find(|c| c.pods.contains(&me)) {
                (
                    format!(
                        "launch {} in {} ({}, ${:.4}/h) via NodePool {}",
                        c.launch.instance_type,
                        c.launch.zone,
                        c.launch.capacity_type.as_label(),
                        c.launch.price,
                        c.nodepool
                    ),
                    true,
                )
            } else if let Some(u) = result.unschedulable.iter().find(|u| u.pod == me) {
                (u.reason.clone(), false)
            } else {
                ("no decision".into(), false)
            };
        pending.push(PendingRow {
            pod: me.to_string(),
            outcome,
            schedulable,
        });
    }
    let gap = Gap {
        pending: pending.len(),
        new_nodes: result.new_node_claims.len(),
        cost_per_hour: result.new_node_cost_per_hour,
        lower_bound_per_hour: result.cost_lower_bound,
        gap_percent: result.cost_gap_percent,
    };

    let mut ours: Vec<&Event> = events
        .iter()
        .filter(|e| e.reporting_controller.as_deref() == Some(MANAGER))
        .collect();
    ours.sort_by_key(|e| std::cmp::Reverse(event_time(e)));
    let events = ours
        .into_iter()
        .take(EVENTS)
        .map(|e| {
            let r = e.regarding.as_ref();
            EventRow {
                time: event_time(e),
                object: r
                    .map(|r| {
                        let kind = r.kind.clone().unwrap_or_default();
                        match &r.namespace {
                            Some(ns) => {
                                format!("{kind} {ns}/{}", r.name.clone().unwrap_or_default())
                            }
                            None => format!("{kind} {}", r.name.clone().unwrap_or_default()),
                        }
                    })
                    .unwrap_or_default(),
                reason: e.reason.clone().unwrap_or_default(),
                warning: e.type_.as_deref() == Some("Warning"),
                note: e.note.clone().unwrap_or_default(),
            }
        })
        .collect();
    let mut notes = live.notes.clone();
    notes.extend(built.problems.iter().map(ToString::to_string));
    for (nc, problems) in live.catalog_problems() {
        for p in problems {
            notes.push(format!("NodeClass {nc}: {p}"));
        }
    }
    Status {
        nodepools,
        nodeclaims,
        nodes,
        cost_per_hour,
        pending,
        events,
        gap,
        notes,
    }
}
