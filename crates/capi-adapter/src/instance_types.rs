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

use std::collections::BTreeMap;

use kube_core::DynamicObject;
use provisioner_core::{
    CapacityType, InstanceType, Offering, Resources, Taint, labels as wk, resource_names,
};
use serde::{Deserialize, Serialize};

use crate::keys;
use crate::nodeclass::NodeClassSettings;
use crate::parse::{self, ValueError};
use crate::problem::{Problem, ProblemError};
use crate::quantity;
use crate::resource::{
    InfraRef, MachineApi, ObjectRef, ResourceId, ResourceKind, ScalableResource, fnv1a64,
};

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
}

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
/// the infrastructure templates they point to; `backoff` the launch-failure back-off.
pub fn instance_types(
    resources: &[ScalableResource],
    templates: &Templates,
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
        match extract(r, templates, nodeclass, now, backoff) {
            Ok((shape, offer)) => shapes.push((shape, offer)),
            Err(problems) => catalog
                .problems
                .extend(problems.into_iter().map(|p| p.for_resource(&r.id))),
        }
    }

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

type Extracted = (Shape, ResourceOffer);

fn extract(
    r: &ScalableResource,
    templates: &Templates,
    nodeclass: &NodeClassSettings,
    now: i64,
    backoff: &Backoff,
) -> Result<Extracted, Vec<Problem>> {
    let obj = ObjectRef::from(&r.id);
    let mut problems = Vec::new();
    let ann = &r.annotations;

    if r.id.name.len() > 63 {
        problems.push(Problem::new(
            obj.clone(),
            "metadata.name",
            ProblemError::NameTooLong,
        ));
    }
    if r.id.kind == ResourceKind::MachineSet
        && let Some(md) = &r.owning_deployment
    {
        problems.push(Problem::new(
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
            problems.push(p);
            None
        }
    };

    // The infrastructure template (CAPI only).
    let mut template: Option<&DynamicObject> = None;
    let mut template_obj: Option<ObjectRef> = None;
    if r.id.kind.machine_api() == MachineApi::Capi {
        match &r.template.infrastructure_ref {
            None => problems.push(Problem::new(
                obj.clone(),
                "spec.template.spec.infrastructureRef",
                ProblemError::NoInfrastructureRef,
            )),
            Some(iref) => {
                let name = iref.object_ref().to_string();
                match templates.get(iref) {
                    Some(TemplateLookup::Found(t)) => {
                        template = Some(t);
                        template_obj = Some(iref.object_ref());
                    }
                    Some(TemplateLookup::NotFound) => problems.push(Problem::new(
                        obj.clone(),
                        "spec.template.spec.infrastructureRef",
                        ProblemError::TemplateNotFound { template: name },
                    )),
                    Some(TemplateLookup::Error(e)) => problems.push(Problem::new(
                        obj.clone(),
                        "spec.template.spec.infrastructureRef",
                        ProblemError::TemplateUnreadable {
                            template: name,
                            reason: e.clone(),
                        },
                    )),
                    None => problems.push(Problem::new(
                        obj.clone(),
                        "spec.template.spec.infrastructureRef",
                        ProblemError::TemplateUnreadable {
                            template: name,
                            reason: "not fetched".into(),
                        },
                    )),
                }
            }
        }
    }
    let template_capacity: BTreeMap<String, String> = template
        .and_then(|t| t.data.pointer("/status/capacity"))
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
        .unwrap_or_default();
    let node_info = |field: &str| -> Option<String> {
        template
            .and_then(|t| t.data.pointer(&format!("/status/nodeInfo/{field}")))
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };

    // Each capacity value: first source that has it wins; a malformed value in the winning
    // source is a problem (we do not silently fall through to a lower-precedence source).
    let mut capacity = Resources::default();
    let read_quantity =
        |sources: &[(&str, Option<&String>, Unit)], problems: &mut Vec<Problem>| -> Sourced {
            for (key, value, unit) in sources {
                if let Some(v) = value {
                    let parsed = match unit {
                        Unit::Milli => quantity::parse_milli(v).map_err(ValueError::from),
                        Unit::Units => quantity::parse_units(v).map_err(ValueError::from),
                        Unit::Mebibytes => quantity::parse_units(v)
                            .map_err(ValueError::from)
                            .and_then(|mb| {
                                mb.checked_mul(1 << 20).ok_or_else(|| {
                                    ValueError::Quantity(quantity::QuantityError::Overflow(
                                        v.to_string(),
                                    ))
                                })
                            }),
                    };
                    return match parsed {
                        Ok(n) => Sourced::Value(n),
                        Err(e) => {
                            let object = if key.starts_with("status.") {
                                template_obj.clone().unwrap_or_else(|| obj.clone())
                            } else {
                                obj.clone()
                            };
                            problems.push(Problem::new(object, *key, e));
                            Sourced::Bad
                        }
                    };
                }
            }
            Sourced::Missing
        };
    let tc = |k: &str| template_capacity.get(k);
    let cpu = read_quantity(
        &[
            (keys::cas::CPU, ann.get(keys::cas::CPU), Unit::Milli),
            (
                keys::openshift::VCPU,
                ann.get(keys::openshift::VCPU),
                Unit::Milli,
            ),
            ("status.capacity.cpu", tc("cpu"), Unit::Milli),
        ],
        &mut problems,
    );
    let memory = read_quantity(
        &[
            (keys::cas::MEMORY, ann.get(keys::cas::MEMORY), Unit::Units),
            (
                keys::openshift::MEMORY_MB,
                ann.get(keys::openshift::MEMORY_MB),
                Unit::Mebibytes,
            ),
            ("status.capacity.memory", tc("memory"), Unit::Units),
        ],
        &mut problems,
    );
    let ephemeral = read_quantity(
        &[
            (
                keys::cas::EPHEMERAL_DISK,
                ann.get(keys::cas::EPHEMERAL_DISK),
                Unit::Units,
            ),
            (
                "status.capacity.ephemeral-storage",
                tc("ephemeral-storage"),
                Unit::Units,
            ),
        ],
        &mut problems,
    );
    let pods = read_quantity(
        &[
            (
                keys::cas::MAX_PODS,
                ann.get(keys::cas::MAX_PODS),
                Unit::Units,
            ),
            (
                keys::openshift::MAX_PODS,
                ann.get(keys::openshift::MAX_PODS),
                Unit::Units,
            ),
            ("status.capacity.pods", tc("pods"), Unit::Units),
        ],
        &mut problems,
    );
    // Template problems were reported above; without a template every missing value is
    // named by the annotation that would provide it.
    let template_known = r.id.kind.machine_api() == MachineApi::OpenShift || template.is_some();
    match cpu {
        Sourced::Value(c) => capacity.cpu_milli = c,
        Sourced::Missing if template_known => problems.push(Problem::new(
            obj.clone(),
            keys::cas::CPU,
            ProblemError::MissingCapacity { resource: "cpu" },
        )),
        _ => {}
    }
    match memory {
        Sourced::Value(m) => capacity.memory = m,
        Sourced::Missing if template_known => problems.push(Problem::new(
            obj.clone(),
            keys::cas::MEMORY,
            ProblemError::MissingCapacity { resource: "memory" },
        )),
        _ => {}
    }
    let ephemeral = ephemeral.value();
    let pods = pods.value();
    capacity.ephemeral_storage = ephemeral.unwrap_or(0);
    capacity.pods = pods.unwrap_or(match r.id.kind.machine_api() {
        MachineApi::Capi => keys::cas::DEFAULT_MAX_PODS,
        MachineApi::OpenShift => keys::openshift::DEFAULT_MAX_PODS,
    });

    // Extended resources: template capacity first, then annotations override.
    for (k, v) in &template_capacity {
        if [
            resource_names::CPU,
            resource_names::MEMORY,
            resource_names::PODS,
            resource_names::EPHEMERAL_STORAGE,
        ]
        .contains(&k.as_str())
        {
            continue;
        }
        match quantity::parse_units(v) {
            Ok(n) => {
                capacity.extended.insert(k.clone(), n);
            }
            Err(e) => problems.push(Problem::new(
                template_obj.clone().unwrap_or_else(|| obj.clone()),
                format!("status.capacity.{k}"),
                e,
            )),
        }
    }
    if let Some(count) = ann.get(keys::cas::GPU_COUNT) {
        match parse::parse_count_quantity(count) {
            Ok(n) => {
                let ty = ann
                    .get(keys::cas::GPU_TYPE)
                    .map(|t| t.trim())
                    .filter(|t| !t.is_empty())
                    .unwrap_or(keys::cas::DEFAULT_GPU_RESOURCE);
                match parse::validate_key(ty) {
                    Ok(()) => {
                        capacity.extended.insert(ty.to_string(), n);
                    }
                    Err(e) => problems.push(Problem::new(obj.clone(), keys::cas::GPU_TYPE, e)),
                }
            }
            Err(e) => problems.push(Problem::new(obj.clone(), keys::cas::GPU_COUNT, e)),
        }
    } else if let Some(gpu) = ann.get(keys::openshift::GPU) {
        match parse::parse_count_quantity(gpu) {
            Ok(0) => {}
            Ok(n) => {
                capacity
                    .extended
                    .insert(keys::cas::DEFAULT_GPU_RESOURCE.to_string(), n);
            }
            Err(e) => problems.push(Problem::new(obj.clone(), keys::openshift::GPU, e)),
        }
    }

    // Labels: defaults, template (node-propagated), provider spec, then the CAS annotation.
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    labels.insert(
        wk::ARCH.into(),
        node_info("architecture").unwrap_or_else(|| "amd64".into()),
    );
    labels.insert(
        wk::OS.into(),
        node_info("operatingSystem").unwrap_or_else(|| "linux".into()),
    );
    labels.extend(r.template.node_labels.clone());
    let provider = ProviderSpecFacts::read(r.template.provider_spec.as_ref());
    if let Some(region) = &provider.region {
        labels.insert(wk::REGION.into(), region.clone());
    }
    if let Some(v) = ann.get(keys::cas::LABELS) {
        match parse::parse_labels(v) {
            Ok(l) => labels.extend(l),
            Err(e) => problems.push(Problem::new(obj.clone(), keys::cas::LABELS, e)),
        }
    }

    // Taints: the template's, then the annotation's (same key and effect: annotation wins).
    let mut taints: Vec<Taint> = Vec::new();
    for t in &r.template.taints {
        match parse::parse_taint_effect(&t.effect) {
            Some(effect) => taints.push(Taint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect,
            }),
            None => problems.push(Problem::new(
                obj.clone(),
                "spec.template.spec.taints",
                ValueError::UnknownTaintEffect {
                    taint: t.key.clone(),
                    effect: t.effect.clone(),
                },
            )),
        }
    }
    if let Some(v) = ann.get(keys::cas::TAINTS) {
        match parse::parse_taints(v) {
            Ok(extra) => {
                for t in extra {
                    taints.retain(|x| !(x.key == t.key && x.effect == t.effect));
                    taints.push(t);
                }
            }
            Err(e) => problems.push(Problem::new(obj.clone(), keys::cas::TAINTS, e)),
        }
    }
    taints.sort();

    let csi_limits = match ann.get(keys::cas::CSI_DRIVER) {
        Some(v) => match parse::parse_csi_limits(v) {
            Ok(c) => c,
            Err(e) => {
                problems.push(Problem::new(obj.clone(), keys::cas::CSI_DRIVER, e));
                BTreeMap::new()
            }
        },
        None => BTreeMap::new(),
    };

    let price = match ann.get(keys::ours::PRICE_PER_HOUR) {
        Some(v) => match parse::parse_price(v) {
            Ok(p) => Some(p),
            Err(e) => {
                problems.push(Problem::new(obj.clone(), keys::ours::PRICE_PER_HOUR, e));
                None
            }
        },
        None => None,
    };
    let capacity_type = match ann.get(keys::ours::CAPACITY_TYPE) {
        Some(v) => match parse::parse_capacity_type(v) {
            Ok(c) => c,
            Err(e) => {
                problems.push(Problem::new(obj.clone(), keys::ours::CAPACITY_TYPE, e));
                CapacityType::OnDemand
            }
        },
        None => match labels.get(wk::CAPACITY_TYPE) {
            Some(v) => match parse::parse_capacity_type(v) {
                Ok(c) => c,
                Err(e) => {
                    problems.push(Problem::new(obj.clone(), keys::cas::LABELS, e));
                    CapacityType::OnDemand
                }
            },
            None if provider.spot => CapacityType::Spot,
            None => CapacityType::OnDemand,
        },
    };

    if !problems.is_empty() {
        return Err(problems);
    }
    let limits = limits.unwrap_or(SizeLimits { min: 0, max: None });

    let name = labels
        .get(wk::INSTANCE_TYPE)
        .cloned()
        .or_else(|| provider.instance_type.clone())
        .or_else(|| r.labels.get(keys::openshift::INSTANCE_TYPE_LABEL).cloned())
        .filter(|n| parse::is_label_value(n) && !n.is_empty())
        .unwrap_or_else(|| fallback_name(&r.id));
    let zone = r
        .template
        .failure_domain
        .clone()
        .or_else(|| labels.get(wk::ZONE).cloned())
        .or_else(|| provider.zone.clone())
        .unwrap_or_default();
    for k in [wk::INSTANCE_TYPE, wk::ZONE, wk::CAPACITY_TYPE] {
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
        },
    ))
}

/// Where a capacity value came from, if anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sourced {
    Value(i64),
    /// The winning source was malformed (already reported).
    Bad,
    Missing,
}

impl Sourced {
    fn value(self) -> Option<i64> {
        match self {
            Sourced::Value(v) => Some(v),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Unit {
    /// CPU quantity (or OpenShift's vCPU count) -> millicores.
    Milli,
    /// Plain quantity -> base units.
    Units,
    /// OpenShift's memoryMb (MiB) -> bytes.
    Mebibytes,
}

/// What we understand of an OpenShift `providerSpec.value` (AWS, Azure, GCP).
#[derive(Debug, Clone, Default, PartialEq)]
struct ProviderSpecFacts {
    instance_type: Option<String>,
    zone: Option<String>,
    region: Option<String>,
    spot: bool,
}

impl ProviderSpecFacts {
    fn read(v: Option<&serde_json::Value>) -> Self {
        let Some(v) = v else {
            return ProviderSpecFacts::default();
        };
        let s = |p: &str| {
            v.pointer(p)
                .and_then(|x| x.as_str())
                .filter(|x| !x.is_empty())
                .map(str::to_string)
        };
        // AWS
        if let Some(it) = s("/instanceType") {
            return ProviderSpecFacts {
                instance_type: Some(it),
                zone: s("/placement/availabilityZone"),
                region: s("/placement/region"),
                spot: v.get("spotMarketOptions").is_some_and(|x| !x.is_null()),
            };
        }
        // Azure: zones are "1", "2", "3"; the node label is "<location>-<zone>".
        if let Some(it) = s("/vmSize") {
            let location = s("/location");
            return ProviderSpecFacts {
                instance_type: Some(it),
                zone: match (&location, s("/zone")) {
                    (Some(l), Some(z)) => Some(format!("{l}-{z}")),
                    _ => None,
                },
                region: location,
                spot: v.get("spotVMOptions").is_some_and(|x| !x.is_null()),
            };
        }
        // GCP
        if let Some(it) = s("/machineType") {
            return ProviderSpecFacts {
                instance_type: Some(it),
                zone: s("/zone"),
                region: s("/region"),
                spot: v.get("preemptible").and_then(|x| x.as_bool()) == Some(true)
                    || s("/provisioningModel").as_deref() == Some("Spot"),
            };
        }
        ProviderSpecFacts::default()
    }
}

#[cfg(test)]
#[path = "instance_types_tests.rs"]
mod tests;
