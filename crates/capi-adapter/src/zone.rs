//! The zone of a scalable resource's offering: the value its nodes' `topology.kubernetes.io/zone`
//! label will have, so zone requirements and topology spread see the same zones for new and
//! existing nodes.
//!
//! In order:
//! 1. a running Node of the group: its label is the truth (CAS takes it too);
//! 2. `topology.kubernetes.io/zone` declared in the `labels` annotation (or template labels);
//! 3. `spec.template.spec.failureDomain`, as each provider's nodes get labelled:
//!    - CAPZ (`Azure*` templates): failure domains are zone numbers `"1"`, `"2"`, `"3"`; the
//!      Azure cloud provider labels nodes `<region>-<n>` (`eastus-1`), so the region comes
//!      from a declared `topology.kubernetes.io/region` label; without one the zone is
//!      unknown (`AzureZoneNeedsRegion`, kept) until a node of the group runs;
//!    - CAPA, CAPG, CAPO: the failure domain is the zone name the cloud provider puts on the
//!      node (`us-east-1a`, `us-central1-a`, the Nova availability zone);
//!    - others (CAPV failure domains name a `VSphereFailureDomain` whose zone label depends on
//!      the CPI's tag categories; CAPD nodes carry no zone label): taken as written, which is
//!      right when the provider labels nodes with it and harmless otherwise;
//! 4. an OpenShift providerSpec (`placement.availabilityZone` on AWS, `<location>-<zone>` on
//!    Azure, `zone` on GCP);
//! 5. unknown: the empty zone.
//!
//! Every zone is validated as a label value (a 14 KB failure domain with `/` is a problem,
//! not a zone).

use std::collections::BTreeMap;

use provisioner_core::labels as wk;

use crate::instance_types::Templates;
use crate::keys;
use crate::node::NodeSample;
use crate::parse::{self, ValueError};
use crate::problem::{Problem, ProblemError};
use crate::resource::{ObjectRef, ScalableResource};

/// Whether the resource's nodes are Azure VMs made by CAPZ.
fn is_capz(r: &ScalableResource) -> bool {
    r.template.infrastructure_ref.as_ref().is_some_and(|i| {
        i.group.starts_with("infrastructure.cluster.x-k8s.io") && i.kind.starts_with("Azure")
    })
}

fn is_zone_number(s: &str) -> bool {
    !s.is_empty() && s.len() <= 2 && s.bytes().all(|b| b.is_ascii_digit())
}

/// Resolves the zone; problems (kept) go to `problems`.
pub fn resolve(
    r: &ScalableResource,
    declared: &BTreeMap<String, String>,
    node: Option<&NodeSample>,
    provider_zone: Option<&str>,
    problems: &mut Vec<Problem>,
) -> String {
    let obj = ObjectRef::from(&r.id);
    if let Some(n) = node {
        let z = n
            .labels
            .get(wk::ZONE)
            .or_else(|| n.labels.get(keys::node::ZONE_BETA))
            .filter(|z| !z.is_empty() && parse::is_label_value(z));
        if let Some(z) = z {
            return z.clone();
        }
    }
    if let Some(z) = declared.get(wk::ZONE).filter(|z| !z.is_empty()) {
        return z.clone();
    }
    if let Some(fd) = &r.template.failure_domain {
        if is_capz(r) && is_zone_number(fd) {
            let region = node
                .and_then(|n| n.labels.get(wk::REGION))
                .or_else(|| declared.get(wk::REGION))
                .filter(|g| !g.is_empty());
            match region {
                Some(g) => {
                    let z = format!("{g}-{fd}");
                    if parse::is_label_value(&z) {
                        return z;
                    }
                    problems.push(Problem::new(
                        obj,
                        "spec.template.spec.failureDomain",
                        ValueError::InvalidZone(parse::clip(&z)),
                    ));
                }
                None => problems.push(Problem::new(
                    obj,
                    "spec.template.spec.failureDomain",
                    ProblemError::AzureZoneNeedsRegion {
                        failure_domain: fd.clone(),
                    },
                )),
            }
            return String::new();
        }
        if parse::is_label_value(fd) {
            return fd.clone();
        }
        problems.push(Problem::new(
            obj,
            "spec.template.spec.failureDomain",
            ValueError::InvalidZone(parse::clip(fd)),
        ));
        return String::new();
    }
    if let Some(z) = provider_zone {
        if parse::is_label_value(z) {
            return z.to_string();
        }
        problems.push(Problem::new(
            obj,
            "spec.template.spec.providerSpec.value",
            ValueError::InvalidZone(parse::clip(z)),
        ));
    }
    String::new()
}

/// Whether only a running node can tell the zone: a CAPZ zone number without a declared
/// region or zone.
pub fn needs_node(r: &ScalableResource, _templates: &Templates) -> bool {
    let Some(fd) = &r.template.failure_domain else {
        return false;
    };
    if !(is_capz(r) && is_zone_number(fd)) {
        return false;
    }
    let mut declared = r.template.node_labels.clone();
    if let Some(v) = r.annotations.get(keys::cas::LABELS) {
        declared.extend(parse::parse_labels(v).value);
    }
    !(declared.contains_key(wk::ZONE) || declared.contains_key(wk::REGION))
}
