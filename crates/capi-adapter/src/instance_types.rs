//! Instance types from scalable resources (DESIGN.md section 4).
//!
//! One scalable resource is one node shape with one offering (its zone and capacity type).
//! Resources that carry the same instance-type name and the same shape (e.g. one
//! MachineDeployment of `m5.large` per zone) become one [`InstanceType`] with one offering
//! per zone, which is what the core needs for zone spreading; [`Catalog::resolve`] maps a
//! chosen offering back to the resource(s) behind it.
//!
//! Reading never fails as a whole: every resource that cannot be used is left out with a
//! [`Problem`] naming the object and key, and the rest come back.

use std::collections::{BTreeMap, BTreeSet};

use kube_core::DynamicObject;
use provisioner_core::{CapacityType, InstanceType, Offering, Resources, Taint, labels as wk};
use serde::{Deserialize, Serialize};

use crate::capacity::{self, ValueSource};
use crate::keys;
use crate::node::NodeSamples;
use crate::node_labels;
use crate::nodeclass::NodeClassSettings;
use crate::parse;
use crate::problem::{Problem, ProblemError};
use crate::provider_spec::ProviderSpecFacts;
use crate::resource::{
    InfraRef, MachineApi, ObjectRef, ResourceId, ResourceKind, ScalableResource, fnv1a64,
};
use crate::zone;

/// The result of fetching one infrastructure template.
#[derive(Debug, Clone, PartialEq)]
pub enum TemplateLookup {
    Found(Box<DynamicObject>),
    /// The API server answered 404: the reference is broken.
    NotFound,
    /// Any other error (RBAC, unknown kind, network): reported, resource left out.
    Error(String),
}

/// Infrastructure templates by reference; a reference missing from the map is reported as
/// unreadable ("not fetched").
pub type Templates = BTreeMap<InfraRef, TemplateLookup>;

/// Launch-failure back-off: resource -> unavailable until (seconds since the epoch).
pub type Backoff = BTreeMap<ResourceId, i64>;

/// Synthetic hourly price for an unpriced resource, per vCPU. Together with the per-GiB and
/// per-GPU terms this approximates public-cloud list prices (an `m5.large`, 2 vCPU / 8 GiB,
/// comes out at $0.12), so unpriced shapes rank by size, smaller first, and mix sensibly
/// with priced ones.
pub const UNPRICED_PER_CPU: f64 = 0.04;
/// Synthetic hourly price per GiB of memory (see [`UNPRICED_PER_CPU`]).
pub const UNPRICED_PER_GIB: f64 = 0.005;
/// Synthetic hourly price per accelerator (any extended resource named `*/gpu`).
pub const UNPRICED_PER_GPU: f64 = 1.0;

/// The documented fallback price of a shape without a price annotation.
pub fn unpriced_fallback(capacity: &Resources) -> f64 {
    let gpus: i64 = capacity
        .extended
        .iter()
        .filter(|(k, _)| k.ends_with("/gpu"))
        .map(|(_, v)| *v)
        .sum();
    capacity.cpu_milli as f64 / 1000.0 * UNPRICED_PER_CPU
        + capacity.memory as f64 / (1u64 << 30) as f64 * UNPRICED_PER_GIB
        + gpus as f64 * UNPRICED_PER_GPU
}

/// CAS min/max annotations of a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeLimits {
    pub min: i64,
    /// `None` = no max annotation: unlimited.
    pub max: Option<i64>,
}

impl SizeLimits {
    /// Reads the min/max annotations (`cluster.x-k8s.io/...` or `machine.openshift.io/...`
    /// by kind); malformed or min > max is a problem.
    pub fn of(r: &ScalableResource) -> Result<SizeLimits, Problem> {
        let obj = ObjectRef::from(&r.id);
        let read = |key: &str| -> Result<Option<i64>, Problem> {
            r.annotations
                .get(key)
                .map(|v| parse::parse_count(v).map_err(|e| Problem::new(obj.clone(), key, e)))
                .transpose()
        };
        let min = read(r.id.kind.min_size_key())?.unwrap_or(0);
        let max = read(r.id.kind.max_size_key())?;
        if let Some(max) = max
            && min > max
        {
            return Err(Problem::new(
                obj,
                r.id.kind.min_size_key(),
                ProblemError::MinAboveMax { min, max },
            ));
        }
        Ok(SizeLimits { min, max })
    }
}

/// Why a resource's offering is unavailable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unavailable {
    AtMaxSize {
        max: i64,
    },
    Paused,
    /// A launch failed recently; retry after this time (seconds since the epoch).
    BackOff {
        until: i64,
    },
    /// Launches of `types` other instance types failed in this resource's zone (and capacity
    /// type) are in back-off: the zone is out of capacity, not one type, so this resource is
    /// left out too while they are ([`ZONE_BACKOFF_TYPES`]; `until` is the latest of their
    /// windows, the longest it can last).
    ZoneBackOff {
        until: i64,
        types: usize,
    },
}

/// After this many instance types of one zone (and capacity type) failed to launch within
/// their back-off windows, the zone's other resources are backed off as well. On CAPI each
/// MachineDeployment is its own launch attempt, a minute or more to fail: without this, pods
/// that may run in other zones try the failing zone's types one by one (Karpenter on AWS
/// learns every type of a request from one `CreateFleet`). In the simulator, a zone out for
/// two hours cost the `mixed` family 26 s of p95 pending time against Karpenter without it
/// and none with it (docs/simulator.md, round 54). The cost: when two types fail in a zone
/// that still has the others, pods that need that zone wait out the window.
pub const ZONE_BACKOFF_TYPES: usize = 2;

/// One usable resource as the catalog sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceOffer {
    pub resource: ResourceId,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub price: f64,
    pub priced: bool,
    pub unavailable: Option<Unavailable>,
    pub limits: SizeLimits,
    pub replicas: i32,
    /// Where each capacity value came from (`cpu` -> the annotation key, the template, a
    /// running Node, or the default), so status and `discover` can say it.
    pub capacity_sources: BTreeMap<String, ValueSource>,
    /// The running Node whose capacity or labels were read, if any.
    pub node: Option<String>,
}

impl ResourceOffer {
    pub fn available(&self) -> bool {
        self.unavailable.is_none()
    }
}

/// `(instance type, zone, capacity type)`.
pub type OfferingKey = (String, String, CapacityType);

/// Instance types for the core plus the way back from an offering to a resource.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    pub instance_types: Vec<InstanceType>,
    pub problems: Vec<Problem>,
    /// Every usable resource.
    pub resources: BTreeMap<ResourceId, ResourceOffer>,
    /// Resources behind each offering, best first (available, cheapest, most headroom, name).
    pub offerings: BTreeMap<OfferingKey, Vec<ResourceId>>,
}

impl Catalog {
    /// The resource to scale for an offering the core chose: the best available one.
    pub fn resolve(
        &self,
        instance_type: &str,
        zone: &str,
        capacity_type: CapacityType,
    ) -> Option<&ResourceOffer> {
        self.offerings
            .get(&(instance_type.to_string(), zone.to_string(), capacity_type))?
            .iter()
            .filter_map(|id| self.resources.get(id))
            .find(|o| o.available())
    }

    /// Resources without a max-size annotation: unlimited here, while CAS would not treat
    /// them as node groups at all (reported by the NodeClass status and `discover`).
    pub fn unlimited(&self) -> Vec<&ResourceId> {
        self.resources
            .values()
            .filter(|o| o.limits.max.is_none())
            .map(|o| &o.resource)
            .collect()
    }

    /// Unpriced instance types (reported so users know the ranking is a fallback).
    pub fn unpriced(&self) -> Vec<&str> {
        self.instance_types
            .iter()
            .filter(|it| it.offerings.iter().any(|o| !o.priced))
            .map(|it| it.name.as_str())
            .collect()
    }
}

/// Builds the catalog from every scalable resource the NodeClass selects.
///
/// `resources` may hold any resources (non-members are skipped silently); `templates` holds
/// the infrastructure templates they point to; `nodes` a running Node of the resources
/// [`crate::node::wants_node`] names (any subset; none is fine); `backoff` the
/// launch-failure back-off.
pub fn instance_types(
    resources: &[ScalableResource],
    templates: &Templates,
    nodes: &NodeSamples,
    nodeclass: &NodeClassSettings,
    now: i64,
    backoff: &Backoff,
) -> Catalog {
    let mut catalog = Catalog::default();
    let mut shapes: Vec<(Shape, ResourceOffer)> = Vec::new();

    let mut sorted: Vec<&ScalableResource> = resources.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    for r in sorted {
        match nodeclass.selects(r) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                catalog.problems.push(Problem::new(
                    ObjectRef {
                        kind: "ClusterAPINodeClass.karpenter.cluster.x-k8s.io".into(),
                        namespace: None,
                        name: nodeclass.name.clone(),
                    },
                    "spec.scalableResourceSelector",
                    e,
                ));
                return catalog;
            }
        }
        if r.deleting {
            continue;
        }
        match extract(r, templates, nodes, nodeclass, now, backoff) {
            Ok((shape, offer, notes)) => {
                shapes.push((shape, offer));
                catalog
                    .problems
                    .extend(notes.into_iter().map(|p| p.for_resource(&r.id)));
            }
            Err(problems) => catalog
                .problems
                .extend(problems.into_iter().map(|p| p.for_resource(&r.id))),
        }
    }

    back_off_failing_zones(&mut shapes);
    // Group by name; identical shapes merge, conflicting ones get resource-specific names.
    let mut by_name: BTreeMap<String, Vec<(Shape, ResourceOffer)>> = BTreeMap::new();
    for (shape, offer) in shapes {
        by_name
            .entry(offer.instance_type.clone())
            .or_default()
            .push((shape, offer));
    }
    let mut groups: BTreeMap<String, (Shape, Vec<ResourceOffer>)> = BTreeMap::new();
    for (name, members) in by_name {
        let first_shape = members[0].0.clone();
        for (shape, mut offer) in members {
            let target = if shape == first_shape {
                name.clone()
            } else {
                fallback_name(&offer.resource)
            };
            offer.instance_type = target.clone();
            groups
                .entry(target)
                .or_insert_with(|| (shape, Vec::new()))
                .1
                .push(offer);
        }
    }

    for (name, (shape, offers)) in groups {
        let mut offerings: BTreeMap<(String, CapacityType), Offering> = BTreeMap::new();
        for o in &offers {
            let key = (o.zone.clone(), o.capacity_type);
            let candidate = Offering {
                zone: o.zone.clone(),
                capacity_type: o.capacity_type,
                price: o.price,
                priced: o.priced,
                available: o.available(),
            };
            offerings
                .entry(key)
                .and_modify(|cur| {
                    let better = (candidate.available && !cur.available)
                        || (candidate.available == cur.available && candidate.price < cur.price);
                    if better {
                        *cur = candidate.clone();
                    }
                })
                .or_insert(candidate);
            catalog
                .offerings
                .entry((name.clone(), o.zone.clone(), o.capacity_type))
                .or_default()
                .push(o.resource.clone());
        }
        catalog.instance_types.push(InstanceType {
            name: name.clone(),
            capacity: shape.capacity,
            overhead: shape.overhead,
            labels: shape.labels,
            taints: shape.taints,
            offerings: offerings.into_values().collect(),
            csi_limits: shape.csi_limits,
        });
        for o in offers {
            catalog.resources.insert(o.resource.clone(), o);
        }
    }
    let resources = &catalog.resources;
    for ids in catalog.offerings.values_mut() {
        ids.sort_by(|a, b| {
            let (oa, ob) = (&resources[a], &resources[b]);
            let headroom =
                |o: &ResourceOffer| o.limits.max.map_or(i64::MAX, |m| m - i64::from(o.replicas));
            ob.available()
                .cmp(&oa.available())
                .then(oa.price.total_cmp(&ob.price))
                .then(headroom(ob).cmp(&headroom(oa)))
                .then(a.cmp(b))
        });
    }
    catalog
}

/// Backs off the still available resources of every zone (and capacity type) where at least
/// [`ZONE_BACKOFF_TYPES`] instance types are in launch-failure back-off. Resources without a
/// zone are left alone: an unknown zone says nothing about another's.
fn back_off_failing_zones(shapes: &mut [(Shape, ResourceOffer)]) {
    let mut failing: BTreeMap<(&str, CapacityType), (BTreeSet<&str>, i64)> = BTreeMap::new();
    for (_, o) in shapes.iter() {
        if let Some(Unavailable::BackOff { until }) = o.unavailable
            && !o.zone.is_empty()
        {
            let e = failing
                .entry((o.zone.as_str(), o.capacity_type))
                .or_insert_with(|| (BTreeSet::new(), until));
            e.0.insert(o.instance_type.as_str());
            e.1 = e.1.max(until);
        }
    }
    let out: BTreeMap<(String, CapacityType), (usize, i64)> = failing
        .into_iter()
        .filter(|(_, (types, _))| types.len() >= ZONE_BACKOFF_TYPES)
        .map(|((zone, ct), (types, until))| ((zone.to_string(), ct), (types.len(), until)))
        .collect();
    if out.is_empty() {
        return;
    }
    for (_, o) in shapes.iter_mut() {
        if o.unavailable.is_none()
            && let Some(&(types, until)) = out.get(&(o.zone.clone(), o.capacity_type))
        {
            o.unavailable = Some(Unavailable::ZoneBackOff { until, types });
        }
    }
}

/// Everything that must be equal for two resources to be one instance type.
#[derive(Debug, Clone, PartialEq)]
struct Shape {
    capacity: Resources,
    overhead: Resources,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    csi_limits: BTreeMap<String, i64>,
}

/// A label-value-safe name for a resource without an instance-type label:
/// `<namespace>.<name>` (a `/` is not allowed in the `node.kubernetes.io/instance-type`
/// label the name ends up in), shortened with a digest when longer than 63 characters.
pub fn fallback_name(id: &ResourceId) -> String {
    let full = format!("{}.{}", id.namespace, id.name);
    let kind_tag = match id.kind {
        ResourceKind::MachineDeployment => "",
        ResourceKind::MachineSet => "ms.",
        ResourceKind::OpenShiftMachineSet => "",
    };
    let full = format!("{kind_tag}{full}");
    if full.len() <= 63 {
        return full;
    }
    let digest = format!("{:016x}", fnv1a64(full.as_bytes()));
    let mut head: String = full.chars().take(63 - 17).collect();
    while head.ends_with(['.', '-', '_']) {
        head.pop();
    }
    format!("{head}-{digest}")
}

type Extracted = (Shape, ResourceOffer, Vec<Problem>);

/// `status.capacity` of an infrastructure template, as strings (numbers, which some
/// providers write, as their JSON text).
pub(crate) fn status_capacity(t: &DynamicObject) -> BTreeMap<String, String> {
    t.data
        .pointer("/status/capacity")
        .and_then(|c| c.as_object())
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let s = match v {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), s)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Reads one resource. `Ok`: its shape and offer, with the problems that did not leave it
/// out (bad entries and values, each ignored); `Err`: every problem, the resource left out.
fn extract(
    r: &ScalableResource,
    templates: &Templates,
    nodes: &NodeSamples,
    nodeclass: &NodeClassSettings,
    now: i64,
    backoff: &Backoff,
) -> Result<Extracted, Vec<Problem>> {
    let obj = ObjectRef::from(&r.id);
    // `fatal` leave the resource out; `notes` only drop (or conservatively keep) a value.
    let mut fatal = Vec::new();
    let mut notes = Vec::new();
    let ann = &r.annotations;

    if r.id.name.len() > 63 {
        fatal.push(Problem::new(
            obj.clone(),
            "metadata.name",
            ProblemError::NameTooLong,
        ));
    }
    if r.id.kind == ResourceKind::MachineSet
        && let Some(md) = &r.owning_deployment
    {
        fatal.push(Problem::new(
            obj.clone(),
            "metadata.ownerReferences",
            ProblemError::OwnedByDeployment {
                deployment: md.clone(),
            },
        ));
    }
    let limits = match SizeLimits::of(r) {
        Ok(l) => Some(l),
        Err(p) => {
            fatal.push(p);
            None
        }
    };

    // The infrastructure template (CAPI only). Missing: CAPI cannot create Machines, so the
    // resource is left out. Unreadable (RBAC, kind not served): as CAS, the annotations may
    // still describe the nodes; left out only if they do not.
    let mut template: Option<&DynamicObject> = None;
    let mut template_obj: Option<ObjectRef> = None;
    let mut template_unreadable: Option<Problem> = None;
    if r.id.kind.machine_api() == MachineApi::Capi {
        let key = "spec.template.spec.infrastructureRef";
        match &r.template.infrastructure_ref {
            None => fatal.push(Problem::new(
                obj.clone(),
                key,
                ProblemError::NoInfrastructureRef,
            )),
            Some(iref) => {
                let name = iref.object_ref().to_string();
                match templates.get(iref) {
                    Some(TemplateLookup::Found(t)) => {
                        template = Some(t);
                        template_obj = Some(iref.object_ref());
                    }
                    Some(TemplateLookup::NotFound) => fatal.push(Problem::new(
                        obj.clone(),
                        key,
                        ProblemError::TemplateNotFound { template: name },
                    )),
                    Some(TemplateLookup::Error(e)) => {
                        template_unreadable = Some(Problem::new(
                            obj.clone(),
                            key,
                            ProblemError::TemplateUnreadable {
                                template: name,
                                reason: crate::parse::clip(e),
                            },
                        ))
                    }
                    None => {
                        template_unreadable = Some(Problem::new(
                            obj.clone(),
                            key,
                            ProblemError::TemplateUnreadable {
                                template: name,
                                reason: "not fetched".into(),
                            },
                        ))
                    }
                }
            }
        }
    }
    let template_capacity = template.map(status_capacity).unwrap_or_default();
    let node_info = |field: &str| -> Option<String> {
        template
            .and_then(|t| t.data.pointer(&format!("/status/nodeInfo/{field}")))
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty() && crate::parse::is_label_value(s))
            .map(str::to_string)
    };
    let node = nodes.get(&r.id);

    let read = capacity::read(&capacity::Inputs {
        resource: r,
        template: &template_capacity,
        template_obj: template_obj.clone(),
        node,
    });
    notes.extend(read.problems);
    if !read.missing.is_empty() {
        match template_unreadable.take() {
            Some(p) => fatal.push(p),
            // A missing template was reported above; otherwise name the annotations.
            None if template.is_some() || r.id.kind.machine_api() == MachineApi::OpenShift => {
                fatal.extend(capacity::missing_problems(r, &read.missing))
            }
            None => {}
        }
    }
    notes.extend(template_unreadable);
    let capacity = read.capacity;

    let provider = ProviderSpecFacts::read(r.template.provider_spec.as_ref());
    let mut labels =
        node_labels::declared_labels(r, node_info, provider.region.as_deref(), &mut notes);
    let zone = zone::resolve(r, &labels, node, provider.zone.as_deref(), &mut notes);
    node_labels::apply_node(&mut labels, node);
    let taints = node_labels::taints(r, &mut notes);

    let csi_limits: BTreeMap<String, i64> = match ann.get(keys::cas::CSI_DRIVER) {
        Some(v) => {
            let parsed = crate::parse::parse_csi_limits(v);
            notes.extend(
                parsed
                    .bad
                    .into_iter()
                    .map(|b| Problem::entry(obj.clone(), keys::cas::CSI_DRIVER, b)),
            );
            // `driver=0`: installed without a limit; the core reads an absent driver so.
            parsed
                .value
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k, v)))
                .collect()
        }
        None => BTreeMap::new(),
    };

    let price = match ann.get(keys::ours::PRICE_PER_HOUR) {
        Some(v) => match crate::parse::parse_price(v) {
            Ok(p) => Some(p),
            Err(e) => {
                notes.push(Problem::new(obj.clone(), keys::ours::PRICE_PER_HOUR, e));
                None
            }
        },
        None => None,
    };
    let capacity_type = match ann.get(keys::ours::CAPACITY_TYPE) {
        Some(v) => match crate::parse::parse_capacity_type(v) {
            Ok(c) => c,
            Err(e) => {
                notes.push(Problem::new(obj.clone(), keys::ours::CAPACITY_TYPE, e));
                CapacityType::OnDemand
            }
        },
        None => match labels.get(wk::CAPACITY_TYPE) {
            Some(v) => match crate::parse::parse_capacity_type(v) {
                Ok(c) => c,
                Err(e) => {
                    notes.push(Problem::new(obj.clone(), keys::cas::LABELS, e));
                    CapacityType::OnDemand
                }
            },
            None if provider.spot => CapacityType::Spot,
            None => CapacityType::OnDemand,
        },
    };

    if !fatal.is_empty() {
        // Causes (a bad value) before their consequence (no value: MissingCapacity).
        notes.extend(fatal);
        for p in &mut notes {
            p.kept = false;
        }
        return Err(notes);
    }
    for p in &mut notes {
        p.kept = true;
    }
    let limits = limits.unwrap_or(SizeLimits { min: 0, max: None });

    let name = labels
        .get(wk::INSTANCE_TYPE)
        .cloned()
        .or_else(|| provider.instance_type.clone())
        .or_else(|| r.labels.get(keys::openshift::INSTANCE_TYPE_LABEL).cloned())
        .filter(|n| crate::parse::is_label_value(n) && !n.is_empty())
        .unwrap_or_else(|| fallback_name(&r.id));
    // Per-offering values are not part of the shape.
    for k in [
        wk::INSTANCE_TYPE,
        wk::ZONE,
        keys::node::ZONE_BETA,
        wk::CAPACITY_TYPE,
    ] {
        labels.remove(k);
    }

    let unavailable = if r.paused {
        Some(Unavailable::Paused)
    } else if let Some(until) = backoff.get(&r.id).filter(|u| **u > now) {
        Some(Unavailable::BackOff { until: *until })
    } else {
        limits
            .max
            .filter(|m| i64::from(r.replicas) >= *m)
            .map(|max| Unavailable::AtMaxSize { max })
    };
    let overhead = nodeclass.overhead.for_capacity(&capacity);
    let (price, priced) = match price {
        Some(p) => (p, true),
        None => (unpriced_fallback(&capacity), false),
    };
    Ok((
        Shape {
            capacity,
            overhead,
            labels,
            taints,
            csi_limits,
        },
        ResourceOffer {
            resource: r.id.clone(),
            instance_type: name,
            zone,
            capacity_type,
            price,
            priced,
            unavailable,
            limits,
            replicas: r.replicas,
            capacity_sources: read.sources,
            node: node.map(|n| n.name.clone()),
        },
        notes,
    ))
}

#[cfg(test)]
#[path = "instance_types_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "cas_cases_tests.rs"]
mod cas_cases;
