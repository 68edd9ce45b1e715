//! The NodeClass status a catalog implies: the Ready condition (False, naming every object
//! and key at fault, when resources were left out or nothing matched) and the list of
//! matched resources with the instance type each became or why it could not be used.

use std::collections::BTreeMap;

use capi_adapter::{Catalog, ResourceId};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use karpenter_api::nodeclass::{ClusterAPINodeClassStatus, ScalableResourceStatus};

/// The API server's limit on a condition message.
const MAX_MESSAGE: usize = 32 * 1024;

/// Builds the status; `previous` keeps the Ready condition's transition time when its status
/// does not change.
pub fn nodeclass_status(
    catalog: &Catalog,
    generation: Option<i64>,
    previous: Option<&ClusterAPINodeClassStatus>,
    now: Time,
) -> ClusterAPINodeClassStatus {
    let mut rows: BTreeMap<ResourceId, ScalableResourceStatus> = BTreeMap::new();
    for (id, offer) in &catalog.resources {
        rows.insert(
            id.clone(),
            ScalableResourceStatus {
                kind: id.kind.qualified().to_string(),
                namespace: id.namespace.clone(),
                name: id.name.clone(),
                instance_type: Some(offer.instance_type.clone()),
                message: offer
                    .unavailable
                    .as_ref()
                    .map(|u| format!("unavailable: {u:?}")),
            },
        );
    }
    for p in &catalog.problems {
        let Some(id) = &p.resource else { continue };
        let row = rows
            .entry(id.clone())
            .or_insert_with(|| ScalableResourceStatus {
                kind: id.kind.qualified().to_string(),
                namespace: id.namespace.clone(),
                name: id.name.clone(),
                instance_type: None,
                message: None,
            });
        let text = format!("{}: {}", p.key, p.error);
        row.message = Some(match row.message.take() {
            Some(m) => format!("{m}; {text}"),
            None => text,
        });
    }

    // Problems whose resource is still offered (one bad value or entry ignored) are warnings:
    // they show in the resource rows and in the Ready message, but only resources left out
    // make the NodeClass not Ready.
    let dropped: Vec<&capi_adapter::Problem> =
        catalog.problems.iter().filter(|p| !p.kept).collect();
    let warnings = catalog.problems.len() - dropped.len();
    let (status, reason, message) = if !dropped.is_empty() {
        let mut msg = dropped
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        if msg.len() > MAX_MESSAGE {
            let mut cut = MAX_MESSAGE - 3;
            while !msg.is_char_boundary(cut) {
                cut -= 1;
            }
            msg.truncate(cut);
            msg.push_str("...");
        }
        let reason = if dropped.len() == 1 {
            dropped[0].reason()
        } else {
            "InvalidScalableResources"
        };
        ("False", reason, msg)
    } else if catalog.resources.is_empty() {
        (
            "False",
            "NoScalableResources",
            "the selector matches no scalable resource labelled node.cluster.x-k8s.io/karpenter-member".to_string(),
        )
    } else {
        let unpriced = catalog.unpriced();
        let mut msg = if unpriced.is_empty() {
            format!("{} instance types", catalog.instance_types.len())
        } else {
            format!(
                "{} instance types; unpriced (ranked by the size-based fallback): {}",
                catalog.instance_types.len(),
                unpriced.join(", ")
            )
        };
        let unlimited = catalog.unlimited();
        if !unlimited.is_empty() {
            msg.push_str(&format!(
                "; no max-size annotation (unlimited): {}",
                unlimited
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if warnings > 0 {
            msg.push_str(&format!(
                "; {warnings} annotation value(s) ignored, see scalableResources"
            ));
        }
        ("True", "Ready", msg)
    };
    let last_transition_time = previous
        .and_then(|p| p.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(now);
    ClusterAPINodeClassStatus {
        conditions: Some(vec![Condition {
            type_: "Ready".into(),
            status: status.into(),
            reason: reason.into(),
            message,
            observed_generation: generation,
            last_transition_time,
        }]),
        scalable_resources: Some(rows.into_values().collect()),
    }
}
