//! The node capacity of a scalable resource, read the way the Cluster Autoscaler (CAS)
//! clusterapi provider (and OpenShift's fork, for `machine.openshift.io` keys) reads it.
//!
//! Per value, the first source that has it wins: the CAS annotation, the OpenShift
//! annotation (OpenShift MachineSets only, as in the fork), the infrastructure template's
//! `status.capacity`, a running Node of the group. As in CAS:
//! - an absent, empty (`""`) or zero (`"0"`) value is no value: the next source is read and
//!   `maxPods` falls back to its default;
//! - `maxPods`, `gpu-count` and OpenShift's `memoryMb`, `GPU` and `maxPods` are integers
//!   (`"8Gi"`, `"1.5"`, `"1k"` are errors), the others quantities;
//! - `gpu-count` needs `gpu-type` to name the resource on Cluster API (no type: no extended
//!   resource, DRA users rely on that); OpenShift's fork uses `nvidia.com/gpu`.
//!
//! Where we differ, deliberately (docs/annotations.md lists each with its test): a bad value
//! is reported and the next source read (CAS drops every scale-from-zero value of the
//! group); values outside plausible bounds ([`Bounds`]) are bad; whitespace around a value
//! is ignored.

use std::collections::BTreeMap;

use provisioner_core::{Resources, resource_names};

use crate::keys;
use crate::node::NodeSample;
use crate::parse::{self, ValueError};
use crate::problem::{Problem, ProblemError};
use crate::quantity;
use crate::resource::{MachineApi, ObjectRef, ScalableResource};

/// Plausible upper bounds: a value above one is a typo or hostile input (`"1e18"`, `"7Ei"`),
/// reported and ignored rather than turned into a node that swallows every pod.
pub mod bounds {
    /// 10,000 cores (the largest single machines today have under 2,000 vCPUs).
    pub const CPU_MILLI: i64 = 10_000 * 1000;
    /// 256 TiB (the largest cloud machines have 32 TiB).
    pub const MEMORY: i64 = 1 << 48;
    /// 1 PiB of local disk.
    pub const EPHEMERAL_STORAGE: i64 = 1 << 50;
    /// 10,000 pods per node (the kubelet defaults to 110; OpenShift to 250).
    pub const PODS: i64 = 10_000;
    /// GPUs (or other devices) counted by `gpu-count` / `machine.openshift.io/GPU`.
    pub const GPU_COUNT: i64 = 1024;
    /// Any other extended resource (hugepages are counted in bytes, hence memory's bound).
    pub const EXTENDED: i64 = 1 << 48;
}

/// How a source writes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Syntax {
    /// A Kubernetes quantity, in thousandths (CPU millicores).
    MilliQuantity,
    /// A Kubernetes quantity, in base units.
    Quantity,
    /// A plain integer (Go `strconv.ParseInt`).
    Integer,
    /// A plain integer of MiB (OpenShift `memoryMb`).
    IntegerMiB,
}

/// Where one capacity value came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ValueSource {
    /// An annotation on the scalable resource (the key).
    Annotation(String),
    /// The infrastructure template's `status.capacity`.
    Template,
    /// A running Node of the group (its name).
    Node(String),
    /// The documented default.
    Default,
}

/// One candidate source of a value.
struct Source<'a> {
    key: String,
    object: ObjectRef,
    raw: Option<&'a str>,
    syntax: Syntax,
    origin: ValueSource,
}

/// What was read for one resource.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CapacityRead {
    pub capacity: Resources,
    /// Per resource name (`cpu`, `memory`, ...), the source used.
    pub sources: BTreeMap<String, ValueSource>,
    /// `cpu` and/or `memory` when no source had them.
    pub missing: Vec<&'static str>,
    pub problems: Vec<Problem>,
}

/// Everything capacity can come from, for one resource.
#[derive(Debug)]
pub struct Inputs<'a> {
    pub resource: &'a ScalableResource,
    /// The infrastructure template's `status.capacity`, as strings.
    pub template: &'a BTreeMap<String, String>,
    /// The template object, to name in problems about `status.capacity`.
    pub template_obj: Option<ObjectRef>,
    pub node: Option<&'a NodeSample>,
}

impl Inputs<'_> {
    fn obj(&self) -> ObjectRef {
        ObjectRef::from(&self.resource.id)
    }

    fn annotation(&self, key: &'static str, syntax: Syntax) -> Source<'_> {
        Source {
            key: key.to_string(),
            object: self.obj(),
            raw: self.resource.annotations.get(key).map(String::as_str),
            syntax,
            origin: ValueSource::Annotation(key.to_string()),
        }
    }

    /// An OpenShift annotation: read on OpenShift MachineSets only (the fork's keys; the
    /// upstream clusterapi provider never reads them).
    fn openshift(&self, key: &'static str, syntax: Syntax) -> Option<Source<'_>> {
        (self.resource.id.kind.machine_api() == MachineApi::OpenShift)
            .then(|| self.annotation(key, syntax))
    }

    fn template_value(&self, name: &str, syntax: Syntax) -> Source<'_> {
        Source {
            key: format!("status.capacity.{name}"),
            object: self.template_obj.clone().unwrap_or_else(|| self.obj()),
            raw: self.template.get(name).map(String::as_str),
            syntax,
            origin: ValueSource::Template,
        }
    }

    fn node_value(&self, name: &str, syntax: Syntax) -> Option<Source<'_>> {
        self.node.map(|n| Source {
            key: format!("status.capacity.{name}"),
            object: ObjectRef {
                kind: "Node".into(),
                namespace: None,
                name: n.name.clone(),
            },
            raw: n.capacity.get(name).map(String::as_str),
            syntax,
            origin: ValueSource::Node(n.name.clone()),
        })
    }
}

/// Parses one raw value; `Ok(None)` for an absent, empty or zero value.
fn parse_value(raw: &str, syntax: Syntax, max: i64) -> Result<Option<i64>, ValueError> {
    if raw.trim().is_empty() {
        return Ok(None);
    }
    let n = match syntax {
        Syntax::MilliQuantity => quantity::parse_milli(raw)?,
        Syntax::Quantity => quantity::parse_units(raw)?,
        Syntax::Integer => parse::in_range(raw, parse::parse_int(raw)?, 0, i64::MAX)?,
        Syntax::IntegerMiB => {
            let mib = parse::in_range(raw, parse::parse_int(raw)?, 0, max >> 20)?;
            mib << 20
        }
    };
    if n == 0 {
        return Ok(None);
    }
    parse::in_range(raw, n, 0, max).map(Some)
}

/// The first source with a good value; bad values on the way are problems.
fn first(
    sources: Vec<Option<Source<'_>>>,
    max: i64,
    problems: &mut Vec<Problem>,
) -> Option<(i64, ValueSource)> {
    for s in sources.into_iter().flatten() {
        let Some(raw) = s.raw else { continue };
        match parse_value(raw, s.syntax, max) {
            Ok(Some(v)) => return Some((v, s.origin)),
            Ok(None) => {}
            Err(e) => problems.push(Problem::new(s.object, s.key, e)),
        }
    }
    None
}

/// Reads every capacity value of one resource.
pub fn read(inp: &Inputs<'_>) -> CapacityRead {
    use Syntax::*;
    let mut out = CapacityRead::default();
    let p = &mut out.problems;
    let cpu = first(
        vec![
            Some(inp.annotation(keys::cas::CPU, MilliQuantity)),
            inp.openshift(keys::openshift::VCPU, MilliQuantity),
            Some(inp.template_value(resource_names::CPU, MilliQuantity)),
            inp.node_value(resource_names::CPU, MilliQuantity),
        ],
        bounds::CPU_MILLI,
        p,
    );
    let memory = first(
        vec![
            Some(inp.annotation(keys::cas::MEMORY, Quantity)),
            inp.openshift(keys::openshift::MEMORY_MB, IntegerMiB),
            Some(inp.template_value(resource_names::MEMORY, Quantity)),
            inp.node_value(resource_names::MEMORY, Quantity),
        ],
        bounds::MEMORY,
        p,
    );
    let ephemeral = first(
        vec![
            Some(inp.annotation(keys::cas::EPHEMERAL_DISK, Quantity)),
            Some(inp.template_value(resource_names::EPHEMERAL_STORAGE, Quantity)),
            inp.node_value(resource_names::EPHEMERAL_STORAGE, Quantity),
        ],
        bounds::EPHEMERAL_STORAGE,
        p,
    );
    let pods = first(
        vec![
            Some(inp.annotation(keys::cas::MAX_PODS, Integer)),
            inp.openshift(keys::openshift::MAX_PODS, Integer),
            Some(inp.template_value(resource_names::PODS, Quantity)),
            inp.node_value(resource_names::PODS, Quantity),
        ],
        bounds::PODS,
        p,
    );

    let mut set = |name: &str, v: Option<(i64, ValueSource)>, field: &mut i64| {
        if let Some((n, src)) = v {
            *field = n;
            out.sources.insert(name.to_string(), src);
        }
    };
    set(
        resource_names::CPU,
        cpu.clone(),
        &mut out.capacity.cpu_milli,
    );
    set(
        resource_names::MEMORY,
        memory.clone(),
        &mut out.capacity.memory,
    );
    // Unknown ephemeral storage stays 0, which the core reads as "not reported": it does
    // not constrain pods (provisioner_core::InstanceType::allocatable).
    set(
        resource_names::EPHEMERAL_STORAGE,
        ephemeral,
        &mut out.capacity.ephemeral_storage,
    );
    match pods {
        Some(v) => set(resource_names::PODS, Some(v), &mut out.capacity.pods),
        None => {
            out.capacity.pods = match inp.resource.id.kind.machine_api() {
                MachineApi::Capi => keys::cas::DEFAULT_MAX_PODS,
                MachineApi::OpenShift => keys::openshift::DEFAULT_MAX_PODS,
            };
            out.sources
                .insert(resource_names::PODS.to_string(), ValueSource::Default);
        }
    }
    if cpu.is_none() {
        out.missing.push(resource_names::CPU);
    }
    if memory.is_none() {
        out.missing.push(resource_names::MEMORY);
    }
    extended(inp, &mut out);
    out
}

const BASIC: [&str; 4] = [
    resource_names::CPU,
    resource_names::MEMORY,
    resource_names::PODS,
    resource_names::EPHEMERAL_STORAGE,
];

/// Extended resources: the Node's (lowest), the template's, then the GPU annotations.
fn extended(inp: &Inputs<'_>, out: &mut CapacityRead) {
    let add = |out: &mut CapacityRead,
               name: &str,
               raw: &str,
               object: ObjectRef,
               key: String,
               origin: ValueSource| {
        if let Err(e) = parse::validate_key(name) {
            out.problems.push(Problem::new(object, key, e));
            return;
        }
        match parse_value(raw, Syntax::Quantity, bounds::EXTENDED) {
            Ok(Some(n)) => {
                out.capacity.extended.insert(name.to_string(), n);
                out.sources.insert(name.to_string(), origin);
            }
            Ok(None) => {
                out.capacity.extended.remove(name);
            }
            Err(e) => out.problems.push(Problem::new(object, key, e)),
        }
    };
    if let Some(n) = inp.node {
        for (k, v) in n
            .capacity
            .iter()
            .filter(|(k, _)| !BASIC.contains(&k.as_str()))
        {
            let obj = ObjectRef {
                kind: "Node".into(),
                namespace: None,
                name: n.name.clone(),
            };
            add(
                out,
                k,
                v,
                obj,
                format!("status.capacity.{k}"),
                ValueSource::Node(n.name.clone()),
            );
        }
    }
    for (k, v) in inp
        .template
        .iter()
        .filter(|(k, _)| !BASIC.contains(&k.as_str()))
    {
        let obj = inp.template_obj.clone().unwrap_or_else(|| inp.obj());
        add(
            out,
            k,
            v,
            obj,
            format!("status.capacity.{k}"),
            ValueSource::Template,
        );
    }
    gpus(inp, out);
}

/// `gpu-count` (+ `gpu-type`), or OpenShift's `machine.openshift.io/GPU`.
fn gpus(inp: &Inputs<'_>, out: &mut CapacityRead) {
    let openshift = inp.resource.id.kind.machine_api() == MachineApi::OpenShift;
    let count = first(
        vec![
            Some(inp.annotation(keys::cas::GPU_COUNT, Syntax::Integer)),
            inp.openshift(keys::openshift::GPU, Syntax::Integer),
        ],
        bounds::GPU_COUNT,
        &mut out.problems,
    );
    let Some((count, origin)) = count else { return };
    let ty = inp
        .resource
        .annotations
        .get(keys::cas::GPU_TYPE)
        .map(|t| t.trim())
        .filter(|t| !t.is_empty());
    let ty = match (ty, openshift) {
        (Some(t), _) => t,
        (None, true) => keys::openshift::GPU_RESOURCE,
        // CAS: no type, no extended resource (the devices may come from a DRA driver).
        (None, false) => return,
    };
    match parse::validate_key(ty) {
        Ok(()) => {
            out.capacity.extended.insert(ty.to_string(), count);
            out.sources.insert(ty.to_string(), origin);
        }
        Err(e) => out
            .problems
            .push(Problem::new(inp.obj(), keys::cas::GPU_TYPE, e)),
    }
}

/// The `MissingCapacity` problems for values no source had.
pub fn missing_problems(r: &ScalableResource, missing: &[&'static str]) -> Vec<Problem> {
    missing
        .iter()
        .map(|m| {
            let key = if *m == resource_names::CPU {
                keys::cas::CPU
            } else {
                keys::cas::MEMORY
            };
            Problem::new(
                ObjectRef::from(&r.id),
                key,
                ProblemError::MissingCapacity { resource: m },
            )
        })
        .collect()
}
