//! `setup`: makes the selected scalable resources ready and creates the NodeClass and a
//! default NodePool.
//!
//! [`plan`] only reads; it returns every change with its reason and a diff. [`apply`] writes
//! exactly the plan: metadata merge patches on the selected resources (labels and
//! annotations only, nothing else of the object is sent) and creates of objects that do not
//! exist yet. A resource outside the selection is never in a plan.
//!
//! Capacity is filled only where the adapter finds none (no annotation, no template
//! `status.capacity`), from, in order: the instance type in the catalog (OpenShift's
//! `providerSpec.value.instanceType`, an AWS template's `spec.template.spec.instanceType`,
//! or an instance-type label), then the capacity of a running Node of one of its Machines.

use std::collections::BTreeMap;

use capi_adapter::objects::{capi, openshift};
use capi_adapter::{MachineApi, MachineView, ScalableResource, Templates, keys, quantity};
use k8s_openapi::api::core::v1::Node;
use karpenter_api::{ClusterAPINodeClass, NodePool};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde_json::json;

use crate::cas::handoff::patch_annotations;
use crate::catalog::PriceCatalog;
use crate::selection::Selection;
use crate::sources::{self, template_capacity};
use crate::{Clusters, Error, templates};

/// What to do.
#[derive(Debug, Clone, Default)]
pub struct SetupOptions {
    pub selection: Selection,
    pub catalog: Option<PriceCatalog>,
    /// Hourly price for every selected resource without one.
    pub price: Option<f64>,
    /// The ClusterAPINodeClass to create (if missing).
    pub nodeclass: String,
    /// The NodePool to create (if missing); `None`: none.
    pub nodepool: Option<String>,
}

/// Changes to one resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ResourceChange {
    pub resource: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Why each change is made (`cpu: from catalog m5.large`).
    pub reasons: Vec<String>,
    /// YAML of the resource's labels and annotations before and after.
    pub before: String,
    pub after: String,
}

/// An object to create.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CreateObject {
    pub kind: String,
    pub name: String,
    pub object: serde_json::Value,
    /// It exists already: left unchanged.
    pub exists: bool,
}

/// The whole plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SetupPlan {
    pub changes: Vec<ResourceChange>,
    pub creates: Vec<CreateObject>,
    /// Things setup could not fix (the user must act).
    pub notes: Vec<String>,
}

fn yaml<T: Serialize>(v: &T) -> String {
    serde_saphyr::to_string(v).unwrap_or_default()
}

impl SetupPlan {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.creates.iter().all(|c| c.exists)
    }

    /// A unified diff of every change (creates are all additions).
    pub fn diff(&self) -> String {
        let mut out = String::new();
        for c in &self.changes {
            let d = similar::TextDiff::from_lines(&c.before, &c.after);
            out.push_str(
                &d.unified_diff()
                    .context_radius(2)
                    .header(
                        &format!("{} (before)", c.resource),
                        &format!("{} (after)", c.resource),
                    )
                    .to_string(),
            );
        }
        for c in self.creates.iter().filter(|c| !c.exists) {
            out.push_str(&format!("--- /dev/null\n+++ {} {} (new)\n", c.kind, c.name));
            for line in yaml(&c.object).lines() {
                out.push_str(&format!("+{line}\n"));
            }
        }
        out
    }

    /// The objects as YAML documents (`--dry-run`).
    pub fn objects_yaml(&self) -> String {
        let mut docs = Vec::new();
        for c in &self.changes {
            docs.push(yaml(&json!({
                "resource": c.resource,
                "metadata": {"labels": c.labels, "annotations": c.annotations},
            })));
        }
        for c in self.creates.iter().filter(|c| !c.exists) {
            docs.push(yaml(&c.object));
        }
        docs.join("---\n")
    }
}

/// The instance type a resource is known to run, if any.
pub(crate) fn instance_type_of(r: &ScalableResource, templates: &Templates) -> Option<String> {
    if let Some(it) = r
        .template
        .provider_spec
        .as_ref()
        .and_then(|p| p.get("instanceType"))
        .and_then(|v| v.as_str())
    {
        return Some(it.to_string());
    }
    if let Some(iref) = &r.template.infrastructure_ref
        && let Some(capi_adapter::TemplateLookup::Found(t)) = templates.get(iref)
        && let Some(it) = t
            .data
            .pointer("/spec/template/spec/instanceType")
            .and_then(|v| v.as_str())
    {
        return Some(it.to_string());
    }
    r.template
        .node_labels
        .get(provisioner_core::labels::INSTANCE_TYPE)
        .or_else(|| r.labels.get(keys::openshift::INSTANCE_TYPE_LABEL))
        .cloned()
}

/// Capacity of a running Node backing one of the resource's Machines.
async fn node_capacity(
    clusters: &Clusters,
    r: &ScalableResource,
) -> Result<Option<(String, BTreeMap<String, String>)>, Error> {
    let lp = ListParams::default().labels(&format!(
        "{}={}",
        r.id.kind.machine_owner_label(),
        r.id.name
    ));
    let machines: Vec<MachineView> = match r.id.kind.machine_api() {
        MachineApi::Capi => Api::<capi::Machine>::namespaced_with(
            clusters.management.clone(),
            &r.id.namespace,
            &clusters.capi_version,
        )
        .list(&lp)
        .await?
        .items
        .iter()
        .map(MachineView::from)
        .collect(),
        MachineApi::OpenShift => {
            Api::<openshift::Machine>::namespaced(clusters.management.clone(), &r.id.namespace)
                .list(&lp)
                .await?
                .items
                .iter()
                .map(MachineView::from)
                .collect()
        }
    };
    let nodes: Api<Node> = Api::all(clusters.workload.clone());
    for m in machines
        .iter()
        .filter(|m| m.belongs_to(&r.id) && !m.deleting)
    {
        let Some(node) = &m.node_name else { continue };
        if let Some(n) = nodes.get_opt(node).await?
            && let Some(cap) = n.status.and_then(|s| s.capacity)
        {
            return Ok(Some((
                node.clone(),
                cap.into_iter().map(|(k, v)| (k, v.0)).collect(),
            )));
        }
    }
    Ok(None)
}

fn set_arch(
    r: &ScalableResource,
    arch: &str,
    ann: &mut BTreeMap<String, String>,
    reasons: &mut Vec<String>,
    src: &str,
) {
    if arch.is_empty() || arch == "amd64" {
        return;
    }
    let current = r
        .annotations
        .get(keys::cas::LABELS)
        .cloned()
        .unwrap_or_default();
    if current.contains(provisioner_core::labels::ARCH) {
        return;
    }
    let entry = format!("{}={arch}", provisioner_core::labels::ARCH);
    let v = if current.trim().is_empty() {
        entry
    } else {
        format!("{current},{entry}")
    };
    ann.insert(keys::cas::LABELS.into(), v);
    reasons.push(format!("architecture {arch}: from {src}"));
}

async fn plan_resource(
    clusters: &Clusters,
    r: &ScalableResource,
    templates: &Templates,
    opts: &SetupOptions,
    notes: &mut Vec<String>,
) -> Result<Option<ResourceChange>, Error> {
    let mut ann = BTreeMap::new();
    let mut labels = BTreeMap::new();
    let mut reasons = Vec::new();
    let openshift = r.id.kind.machine_api() == MachineApi::OpenShift;
    let caps = sources::capacity_sources(r, templates);
    let missing = |name: &str| caps.iter().any(|c| c.resource == name && c.value.is_none());
    let it = instance_type_of(r, templates);
    let entry = it
        .as_ref()
        .and_then(|i| opts.catalog.as_ref().and_then(|c| c.get(i)));

    if missing("cpu") || missing("memory") {
        if let Some(e) = entry {
            let src = format!("catalog {}", e.instance_type);
            if missing("cpu") {
                let (k, v) = if openshift {
                    (keys::openshift::VCPU, e.vcpu.to_string())
                } else {
                    (keys::cas::CPU, e.vcpu.to_string())
                };
                ann.insert(k.to_string(), v);
                reasons.push(format!("cpu: from {src}"));
            }
            if missing("memory") {
                let (k, v) = if openshift {
                    (keys::openshift::MEMORY_MB, e.memory_mib.to_string())
                } else {
                    (keys::cas::MEMORY, format!("{}Mi", e.memory_mib))
                };
                ann.insert(k.to_string(), v);
                reasons.push(format!("memory: from {src}"));
            }
            if e.gpu > 0 && missing("gpu") {
                let k = if openshift {
                    keys::openshift::GPU
                } else {
                    keys::cas::GPU_COUNT
                };
                ann.insert(k.to_string(), e.gpu.to_string());
                reasons.push(format!("gpu: from {src}"));
            }
            set_arch(r, &e.arch, &mut ann, &mut reasons, &src);
        } else if let Some((node, cap)) = node_capacity(clusters, r).await? {
            let src = format!("running Node {node}");
            if missing("cpu")
                && let Some(cpu) = cap.get("cpu")
            {
                match (openshift, quantity::parse_milli(cpu)) {
                    (true, Ok(m)) if m % 1000 == 0 => {
                        ann.insert(keys::openshift::VCPU.into(), (m / 1000).to_string());
                    }
                    _ => {
                        ann.insert(keys::cas::CPU.into(), cpu.clone());
                    }
                }
                reasons.push(format!("cpu: from {src}"));
            }
            if missing("memory")
                && let Some(mem) = cap.get("memory")
            {
                match (openshift, quantity::parse_units(mem)) {
                    (true, Ok(b)) => {
                        ann.insert(keys::openshift::MEMORY_MB.into(), (b >> 20).to_string());
                    }
                    _ => {
                        ann.insert(keys::cas::MEMORY.into(), mem.clone());
                    }
                }
                reasons.push(format!("memory: from {src}"));
            }
            if missing("ephemeral-storage")
                && let Some(v) = cap.get("ephemeral-storage")
            {
                ann.insert(keys::cas::EPHEMERAL_DISK.into(), v.clone());
                reasons.push(format!("ephemeral-storage: from {src}"));
            }
            if caps
                .iter()
                .any(|c| c.resource == "pods" && c.value.is_none())
                && let Some(v) = cap.get("pods")
            {
                let k = if openshift {
                    keys::openshift::MAX_PODS
                } else {
                    keys::cas::MAX_PODS
                };
                ann.insert(k.into(), v.clone());
                reasons.push(format!("pods: from {src}"));
            }
        } else {
            notes.push(format!(
                "{}: capacity unknown (no template status.capacity, {}, no running Node): set {} and {}",
                r.id,
                match &it {
                    Some(i) => format!("instance type {i} not in the catalog"),
                    None => "no instance type".into(),
                },
                if openshift { keys::openshift::VCPU } else { keys::cas::CPU },
                if openshift { keys::openshift::MEMORY_MB } else { keys::cas::MEMORY },
            ));
        }
    } else if let Some(e) = entry {
        // Capacity known; still fill the architecture from the catalog.
        if !r.annotations.contains_key(keys::cas::LABELS)
            && template_capacity(r, templates, "cpu").is_none()
        {
            set_arch(
                r,
                &e.arch,
                &mut ann,
                &mut reasons,
                &format!("catalog {}", e.instance_type),
            );
        }
    }

    if !r.annotations.contains_key(keys::ours::PRICE_PER_HOUR) {
        if let Some(p) = opts.price {
            ann.insert(keys::ours::PRICE_PER_HOUR.into(), p.to_string());
            reasons.push("price: from --price".into());
        } else if let Some(e) = entry {
            ann.insert(
                keys::ours::PRICE_PER_HOUR.into(),
                e.price_per_hour.to_string(),
            );
            reasons.push(format!("price: from catalog {}", e.instance_type));
        } else {
            notes.push(format!("{}: no price (pass --price or a --catalog with its instance type); it stays unpriced", r.id));
        }
    }
    if !r.labels.contains_key(keys::capi::KARPENTER_MEMBER) {
        labels.insert(keys::capi::KARPENTER_MEMBER.to_string(), String::new());
        reasons.push("member label: takes part in NodePools".into());
    }
    if ann.is_empty() && labels.is_empty() {
        return Ok(None);
    }
    let before = json!({"labels": r.labels, "annotations": r.annotations});
    let mut after_labels = r.labels.clone();
    after_labels.extend(labels.clone());
    let mut after_ann = r.annotations.clone();
    after_ann.extend(ann.clone());
    let after = json!({"labels": after_labels, "annotations": after_ann});
    Ok(Some(ResourceChange {
        resource: r.id.to_string(),
        labels,
        annotations: ann,
        reasons,
        before: yaml(&before),
        after: yaml(&after),
    }))
}

/// The default NodeClass: every member resource (empty selector).
pub fn default_nodeclass(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "karpenter.cluster.x-k8s.io/v1alpha1",
        "kind": "ClusterAPINodeClass",
        "metadata": {"name": name},
        "spec": {"scalableResourceSelector": {}}
    })
}

/// The default NodePool: Linux nodes from `nodeclass`, upstream's disruption defaults.
pub fn default_nodepool(name: &str, nodeclass: &str) -> serde_json::Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {
                "nodeClassRef": {
                    "group": "karpenter.cluster.x-k8s.io",
                    "kind": "ClusterAPINodeClass",
                    "name": nodeclass
                },
                "requirements": [
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
                ]
            }},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s"}
        }
    })
}

/// Reads and plans; changes nothing.
pub async fn plan(clusters: &Clusters, opts: &SetupOptions) -> Result<SetupPlan, Error> {
    let resources = clusters
        .provider()
        .resources(&capi_adapter::ResourceKind::ALL)
        .await?;
    let selected = opts.selection.apply(&resources)?;
    let owned: Vec<ScalableResource> = selected.iter().map(|r| (*r).clone()).collect();
    let templates = templates::fetch_all(&clusters.management, &owned).await;
    let mut out = SetupPlan::default();
    for r in &owned {
        if let Some(md) = &r.owning_deployment {
            out.notes.push(format!(
                "{}: owned by MachineDeployment {md}; set up the MachineDeployment instead",
                r.id
            ));
            continue;
        }
        if let Some(c) = plan_resource(clusters, r, &templates, opts, &mut out.notes).await? {
            out.changes.push(c);
        }
    }
    let nodeclasses: Api<ClusterAPINodeClass> = Api::all(clusters.workload.clone());
    out.creates.push(CreateObject {
        kind: "ClusterAPINodeClass".into(),
        name: opts.nodeclass.clone(),
        object: default_nodeclass(&opts.nodeclass),
        exists: nodeclasses.get_opt(&opts.nodeclass).await?.is_some(),
    });
    if let Some(np) = &opts.nodepool {
        let nodepools: Api<NodePool> = Api::all(clusters.workload.clone());
        out.creates.push(CreateObject {
            kind: "NodePool".into(),
            name: np.clone(),
            object: default_nodepool(np, &opts.nodeclass),
            exists: nodepools.get_opt(np).await?.is_some(),
        });
    }
    Ok(out)
}

/// Applies a plan; returns what was done.
pub async fn apply(clusters: &Clusters, plan: &SetupPlan) -> Result<Vec<String>, Error> {
    apply_with(clusters, plan, &crate::progress::Progress::none()).await
}

/// [`apply`], reporting each step.
pub async fn apply_with(
    clusters: &Clusters,
    plan: &SetupPlan,
    progress: &crate::progress::Progress,
) -> Result<Vec<String>, Error> {
    let mut done = Vec::new();
    let total = plan.changes.len() + plan.creates.iter().filter(|c| !c.exists).count();
    for c in &plan.changes {
        progress.step(done.len(), total, format!("updating {}", c.resource));
        let id: capi_adapter::ResourceId = c
            .resource
            .parse()
            .map_err(|e| Error::Invalid(format!("{e}")))?;
        if !c.labels.is_empty() {
            let patch = json!({"metadata": {"labels": c.labels}});
            crate::cas::handoff::resource_api(clusters, &id)
                .patch(&id.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        let changes = c
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        patch_annotations(clusters, &id, &changes).await?;
        done.push(format!("updated {id}: {}", c.reasons.join("; ")));
    }
    for c in plan.creates.iter().filter(|c| !c.exists) {
        progress.step(done.len(), total, format!("creating {} {}", c.kind, c.name));
        let created = match c.kind.as_str() {
            "ClusterAPINodeClass" => {
                let obj: ClusterAPINodeClass = serde_json::from_value(c.object.clone())?;
                Api::<ClusterAPINodeClass>::all(clusters.workload.clone())
                    .create(&PostParams::default(), &obj)
                    .await
                    .map(|_| ())
            }
            _ => {
                let obj: NodePool = serde_json::from_value(c.object.clone())?;
                Api::<NodePool>::all(clusters.workload.clone())
                    .create(&PostParams::default(), &obj)
                    .await
                    .map(|_| ())
            }
        };
        match created {
            Ok(()) => done.push(format!("created {} {}", c.kind, c.name)),
            Err(kube::Error::Api(s)) if s.is_already_exists() => {
                done.push(format!("{} {} exists; left unchanged", c.kind, c.name))
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(done)
}
