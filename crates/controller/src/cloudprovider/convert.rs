//! `karpenter-api` types -> the adapter's plain settings and the core's requirements.

use std::collections::BTreeMap;

use capi_adapter::quantity;
use capi_adapter::{NodeClassSettings, ObjectRef, Overhead, Problem, ResourceKind};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_api::nodeclass::{ClusterAPINodeClass, DriftPolicy, ScalableResourceKind};
use karpenter_api::{NodeSelectorRequirementWithMinValues, Operator};
use provisioner_core::{Requirement, Resources};

fn kind(k: ScalableResourceKind) -> ResourceKind {
    match k {
        ScalableResourceKind::MachineDeployment => ResourceKind::MachineDeployment,
        ScalableResourceKind::MachineSet => ResourceKind::MachineSet,
        ScalableResourceKind::OpenShiftMachineSet => ResourceKind::OpenShiftMachineSet,
    }
}

/// The adapter's view of a NodeClass, plus a problem for every overhead quantity it could
/// not read (that part of the overhead then takes its default).
pub fn nodeclass_settings(nc: &ClusterAPINodeClass) -> (NodeClassSettings, Vec<Problem>) {
    let name = nc.metadata.name.clone().unwrap_or_default();
    let object = ObjectRef {
        kind: "ClusterAPINodeClass.karpenter.cluster.x-k8s.io".into(),
        namespace: None,
        name: name.clone(),
    };
    let mut problems = Vec::new();
    let mut overhead = Overhead::default();
    if let Some(o) = &nc.spec.overhead {
        let mut read = |field: &str, list: &Option<BTreeMap<String, Quantity>>| {
            list.as_ref().and_then(|l| {
                resources(l, &object, &format!("spec.overhead.{field}"), &mut problems)
            })
        };
        overhead.kube_reserved = read("kubeReserved", &o.kube_reserved);
        overhead.system_reserved = read("systemReserved", &o.system_reserved);
        overhead.eviction_threshold = read("evictionThreshold", &o.eviction_threshold);
    }
    let settings = NodeClassSettings {
        name,
        selector: Some(nc.spec.scalable_resource_selector.clone()),
        kinds: nc
            .spec
            .scalable_resource_kinds
            .as_ref()
            .map(|ks| ks.iter().copied().map(kind).collect()),
        drift_policy: match nc.spec.drift_policy.unwrap_or_default() {
            DriftPolicy::Karpenter => capi_adapter::DriftPolicy::Karpenter,
            DriftPolicy::CapiRollout => capi_adapter::DriftPolicy::CAPIRollout,
        },
        overhead,
    };
    (settings, problems)
}

/// A resource list as [`Resources`]; `None` (default applies) if any entry is malformed.
fn resources(
    list: &BTreeMap<String, Quantity>,
    object: &ObjectRef,
    path: &str,
    problems: &mut Vec<Problem>,
) -> Option<Resources> {
    let mut r = Resources::default();
    let mut ok = true;
    for (k, q) in list {
        let parsed = match k.as_str() {
            "cpu" => quantity::parse_milli(&q.0).map(|v| r.cpu_milli = v),
            "memory" | "memory.available" => quantity::parse_units(&q.0).map(|v| r.memory = v),
            "ephemeral-storage" | "nodefs.available" => {
                quantity::parse_units(&q.0).map(|v| r.ephemeral_storage = v)
            }
            "pods" => quantity::parse_units(&q.0).map(|v| r.pods = v),
            other => quantity::parse_units(&q.0).map(|v| {
                r.extended.insert(other.to_string(), v);
            }),
        };
        if let Err(e) = parsed {
            ok = false;
            problems.push(Problem::new(object.clone(), format!("{path}.{k}"), e));
        }
    }
    ok.then_some(r)
}

/// A NodeClaim requirement in the core's form.
pub fn requirement(r: &NodeSelectorRequirementWithMinValues) -> Requirement {
    use provisioner_core::Operator as O;
    Requirement {
        key: r.key.clone(),
        operator: match r.operator {
            Operator::In => O::In,
            Operator::NotIn => O::NotIn,
            Operator::Exists => O::Exists,
            Operator::DoesNotExist => O::DoesNotExist,
            Operator::Gt => O::Gt,
            Operator::Lt => O::Lt,
            Operator::Gte => O::Gte,
            Operator::Lte => O::Lte,
        },
        values: r.values().to_vec(),
        min_values: r.min_values.and_then(|v| u32::try_from(v).ok()),
    }
}
