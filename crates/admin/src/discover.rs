//! `discover`: every scalable resource in reach, as an admin needs to see it before and
//! after `setup`.
//!
//! Each resource is evaluated by the adapter on its own, as if it were a member (so
//! non-members show what they would become), with its template; the report adds the source
//! of each capacity value, membership, whether CAS manages it, and where CAS reads the
//! resource differently from us.

use std::collections::BTreeMap;

use capi_adapter::instance_types::{SizeLimits, Unavailable};
use capi_adapter::problem::ProblemRecord;
use capi_adapter::{MachineApi, NodeClassSettings, ScalableResource, Templates, keys};
use serde::Serialize;

use crate::cas::{self, Observed};
use crate::sources::{self, SourcedValue};
use crate::{Clusters, Error, templates};

/// Price of one node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PriceInfo {
    /// From our price annotation; `None` = unpriced.
    pub per_hour: Option<f64>,
    /// The documented fallback the adapter ranks an unpriced resource by.
    pub fallback_per_hour: Option<f64>,
    pub capacity_type: Option<String>,
}

/// One scalable resource.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ResourceReport {
    /// `Kind.group/namespace/name`.
    pub id: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub replicas: i32,
    pub instance_type: Option<String>,
    pub capacity: Vec<SourcedValue>,
    pub zones: Vec<String>,
    pub price: PriceInfo,
    pub min: Option<i64>,
    /// `None` = no max annotation: unlimited for us.
    pub max: Option<i64>,
    pub unavailable: Option<String>,
    pub member: bool,
    /// Who of CAS would scale it (empty: nobody).
    pub cas: Vec<String>,
    pub cas_active: bool,
    pub problems: Vec<ProblemRecord>,
    /// Where CAS reads this resource differently from us.
    pub cas_differences: Vec<String>,
}

impl ResourceReport {
    pub fn max_text(&self) -> String {
        match self.max {
            Some(m) => m.to_string(),
            None => "unlimited".into(),
        }
    }

    pub fn price_text(&self) -> String {
        match self.price.per_hour {
            Some(p) => format!("${p}/h"),
            None => "unpriced".into(),
        }
    }

    pub fn usable(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The whole discovery.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Discovery {
    pub resources: Vec<ResourceReport>,
}

/// `r` with the member label, so the adapter evaluates it whatever its membership.
fn as_member(r: &ScalableResource) -> ScalableResource {
    let mut r = r.clone();
    r.labels
        .entry(keys::capi::KARPENTER_MEMBER.to_string())
        .or_default();
    r
}

fn differences(r: &ScalableResource, caps: &[SourcedValue]) -> Vec<String> {
    let mut out = Vec::new();
    let limits = SizeLimits::of(r).ok();
    if r.id.kind.machine_api() == MachineApi::Capi {
        if limits.is_some_and(|l| l.max.is_none()) {
            out.push("CAS ignores it: no max-size annotation (we treat max as unlimited)".into());
        }
        for c in caps {
            if c.source.contains("machine.openshift.io/") {
                out.push(format!(
                    "CAS for Cluster API does not read {}; it needs {} to scale from zero",
                    c.source.trim_start_matches("annotation "),
                    match c.resource.as_str() {
                        "cpu" => keys::cas::CPU,
                        "memory" => keys::cas::MEMORY,
                        "pods" => keys::cas::MAX_PODS,
                        _ => keys::cas::GPU_COUNT,
                    }
                ));
            }
        }
    } else if limits.is_some_and(|l| l.max.is_none()) {
        out.push("CAS ignores it: no MachineAutoscaler / max-size annotation (we treat max as unlimited)".into());
    }
    if r.annotations.contains_key(keys::ours::PRICE_PER_HOUR) {
        out.push("CAS does not read prices (its least-waste expander ignores them)".into());
    }
    out
}

/// Builds the report from what was read (no IO).
pub fn report(observed: &Observed, templates: &Templates) -> Discovery {
    let settings = NodeClassSettings::default();
    let resources = observed
        .resources
        .iter()
        .map(|r| {
            let member_view = as_member(r);
            let catalog = capi_adapter::instance_types(
                std::slice::from_ref(&member_view),
                templates,
                &capi_adapter::NodeSamples::new(),
                &settings,
                0,
                &BTreeMap::new(),
            );
            let offer = catalog.resources.get(&r.id);
            let caps = sources::capacity_sources(r, templates);
            let (cas, cas_active) = observed.managers(r);
            let limits = SizeLimits::of(r).ok();
            let zones: Vec<String> = offer
                .map(|o| o.zone.clone())
                .filter(|z| !z.is_empty())
                .into_iter()
                .collect();
            ResourceReport {
                id: r.id.to_string(),
                kind: r.id.kind.qualified().to_string(),
                namespace: r.id.namespace.clone(),
                name: r.id.name.clone(),
                replicas: r.replicas,
                // Even a resource with problems shows the instance type it is known to run.
                instance_type: offer
                    .map(|o| o.instance_type.clone())
                    .or_else(|| crate::setup::instance_type_of(r, templates)),
                zones,
                price: PriceInfo {
                    per_hour: offer.filter(|o| o.priced).map(|o| o.price),
                    fallback_per_hour: offer.filter(|o| !o.priced).map(|o| o.price),
                    capacity_type: offer.map(|o| o.capacity_type.as_label().to_string()),
                },
                min: limits.map(|l| l.min),
                max: limits.and_then(|l| l.max),
                unavailable: offer.and_then(|o| o.unavailable.as_ref()).map(|u| match u {
                    Unavailable::AtMaxSize { max } => format!("at max size {max}"),
                    Unavailable::Paused => "paused".into(),
                    Unavailable::BackOff { until } => format!("backing off until {until}"),
                    Unavailable::ZoneBackOff { until, types } => {
                        format!("backing off until {until}: {types} other types failed in its zone")
                    }
                }),
                member: Observed::is_member(r),
                cas,
                cas_active,
                problems: catalog.problems.iter().map(ProblemRecord::from).collect(),
                cas_differences: differences(r, &caps),
                capacity: caps,
            }
        })
        .collect();
    Discovery { resources }
}

/// Reads the clusters and reports every scalable resource.
pub async fn discover(clusters: &Clusters, namespace: &str) -> Result<Discovery, Error> {
    let observed = cas::observe(clusters, namespace).await?;
    let templates = templates::fetch_all(&clusters.management, &observed.resources).await;
    Ok(report(&observed, &templates))
}
