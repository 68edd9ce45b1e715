//! `cas disable` and `cas enable`.
//!
//! Disable: refuse ambiguous states (unless forced); merge what is about to change into the
//! record and write it (phase `disabling`) *before* acting; then, each step idempotent:
//! scale CAS Deployments to 0, delete ClusterAutoscaler `default`, delete each
//! MachineAutoscaler, remove the CAS min/max annotations from member resources CAS manages
//! (and from MachineAutoscaler targets); finally phase `disabled`. A process killed anywhere
//! leaves a record that holds the original of everything already changed, so a rerun of
//! `disable` completes the hand-off and `enable` undoes it.
//!
//! Enable: phase `enabling`; put the annotations back with their recorded values; recreate
//! the MachineAutoscalers and the ClusterAutoscaler from the recorded objects (server-set
//! metadata and status dropped); scale the Deployments back; delete the record.
//!
//! Note: removing the max-size annotation also removes our own per-resource limit (the
//! adapter reads the same annotation); the report says so, so the user can set NodePool
//! limits instead.

use capi_adapter::{ResourceId, ResourceKind, ScalableResource};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde::Serialize;
use serde_json::json;

use super::detect::{Observed, cluster_autoscaler_resource, machine_autoscaler_resource, observe};
use super::record::{self, AnnotationRecord, DeploymentRecord, HandoffRecord};
use crate::progress::Progress;
use crate::{Clusters, Error};

/// Options of `cas disable`.
#[derive(Debug, Clone, Default)]
pub struct DisableOptions {
    pub force: bool,
    /// Test seam: stop (as if killed) after this many changes to the cluster.
    #[doc(hidden)]
    pub stop_after: Option<usize>,
    /// Where each step is reported (the CLI's progress bar).
    pub progress: Progress,
}

/// What a hand-off did, step by step.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HandoffReport {
    pub actions: Vec<String>,
    pub warnings: Vec<String>,
    /// Stopped early by the test seam.
    pub interrupted: bool,
}

/// A dynamic API for one scalable resource kind (merge patches on metadata only).
pub fn resource_api(clusters: &Clusters, id: &ResourceId) -> Api<DynamicObject> {
    let (group, version, kind, plural) = match id.kind {
        ResourceKind::MachineDeployment => (
            "cluster.x-k8s.io",
            clusters.capi_version.as_str(),
            "MachineDeployment",
            "machinedeployments",
        ),
        ResourceKind::MachineSet => (
            "cluster.x-k8s.io",
            clusters.capi_version.as_str(),
            "MachineSet",
            "machinesets",
        ),
        ResourceKind::OpenShiftMachineSet => (
            "machine.openshift.io",
            "v1beta1",
            "MachineSet",
            "machinesets",
        ),
    };
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(clusters.management.clone(), &id.namespace, &ar)
}

/// Merge-patches metadata annotations of a scalable resource (`None` removes a key).
pub async fn patch_annotations(
    clusters: &Clusters,
    id: &ResourceId,
    changes: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), Error> {
    let patch = json!({"metadata": {"annotations": changes}});
    resource_api(clusters, id)
        .patch(&id.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

fn client_of(clusters: &Clusters, side: &str) -> Client {
    if side == "management" {
        clusters.management.clone()
    } else {
        clusters.workload.clone()
    }
}

async fn scale_deployment(
    client: &Client,
    ns: &str,
    name: &str,
    replicas: i32,
) -> Result<bool, Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let patch = json!({"spec": {"replicas": replicas}});
    match api
        .patch_scale(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e.into()),
    }
}

async fn delete_dynamic(api: &Api<DynamicObject>, name: &str) -> Result<bool, Error> {
    match api.delete(name, &Default::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e.into()),
    }
}

fn removable_keys(r: &ScalableResource) -> [&'static str; 2] {
    [r.id.kind.min_size_key(), r.id.kind.max_size_key()]
}

/// What the current state adds to the record.
fn plan_record(o: &Observed) -> HandoffRecord {
    HandoffRecord {
        deployments: o
            .scalable_deployments()
            .map(|d| DeploymentRecord {
                cluster: d.cluster.as_str().to_string(),
                namespace: d.namespace.clone(),
                name: d.name.clone(),
                replicas: d.replicas,
            })
            .collect(),
        cluster_autoscaler: o
            .cluster_autoscaler
            .as_ref()
            .and_then(|c| serde_json::to_value(c).ok()),
        machine_autoscalers: o
            .machine_autoscalers
            .iter()
            .filter_map(|m| serde_json::to_value(m).ok())
            .collect(),
        annotations: o
            .to_take_from_cas()
            .into_iter()
            .filter_map(|r| {
                let removed: std::collections::BTreeMap<String, String> = removable_keys(r)
                    .iter()
                    .filter_map(|k| r.annotations.get(*k).map(|v| (k.to_string(), v.clone())))
                    .collect();
                (!removed.is_empty()).then(|| AnnotationRecord {
                    resource: r.id.to_string(),
                    removed,
                })
            })
            .collect(),
    }
}

struct Steps {
    done: usize,
    total: usize,
    stop_after: Option<usize>,
    progress: Progress,
}

impl Steps {
    /// Whether the next change may run (false once the test seam's budget is spent).
    fn may(&mut self, what: &str) -> bool {
        if self.stop_after.is_some_and(|n| self.done >= n) {
            return false;
        }
        self.progress.step(self.done, self.total, what);
        self.done += 1;
        true
    }
}

/// Hands autoscaling over from CAS to us (see the module docs).
pub async fn disable(
    clusters: &Clusters,
    namespace: &str,
    opts: &DisableOptions,
) -> Result<HandoffReport, Error> {
    let observed = observe(clusters, namespace).await?;
    let ambiguities = observed.ambiguities();
    let mut report = HandoffReport::default();
    if !ambiguities.is_empty() {
        if !opts.force {
            return Err(Error::Refused(ambiguities.join("; ")));
        }
        report
            .warnings
            .extend(ambiguities.iter().map(|a| format!("forced past: {a}")));
    }
    let mut rec = observed
        .stored
        .as_ref()
        .map(|s| s.record.clone())
        .unwrap_or_default();
    rec.merge_new(plan_record(&observed));
    // Record first: everything below is undoable from here on.
    record::write(&clusters.workload, namespace, "disabling", &rec).await?;
    report.actions.push(format!(
        "recorded the current state in ConfigMap {namespace}/{}",
        record::RECORD_NAME
    ));
    let mut steps = Steps {
        done: 0,
        total: rec.deployments.len()
            + usize::from(rec.cluster_autoscaler.is_some())
            + rec.machine_autoscalers.len()
            + rec.annotations.len(),
        stop_after: opts.stop_after,
        progress: opts.progress.clone(),
    };

    for d in &rec.deployments {
        if !steps.may(&format!(
            "scaling cluster-autoscaler {}/{} to 0",
            d.namespace, d.name
        )) {
            report.interrupted = true;
            return Ok(report);
        }
        if scale_deployment(&client_of(clusters, &d.cluster), &d.namespace, &d.name, 0).await? {
            report.actions.push(format!(
                "scaled cluster-autoscaler Deployment {}/{} to 0 (was {})",
                d.namespace, d.name, d.replicas
            ));
        }
    }
    if rec.cluster_autoscaler.is_some() {
        if !steps.may("deleting ClusterAutoscaler default") {
            report.interrupted = true;
            return Ok(report);
        }
        let api: Api<DynamicObject> =
            Api::all_with(clusters.management.clone(), &cluster_autoscaler_resource());
        if delete_dynamic(&api, "default").await? {
            report
                .actions
                .push("deleted ClusterAutoscaler default".into());
        }
    }
    for m in &rec.machine_autoscalers {
        if !steps.may("deleting a MachineAutoscaler") {
            report.interrupted = true;
            return Ok(report);
        }
        let ns = m
            .pointer("/metadata/namespace")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let name = m
            .pointer("/metadata/name")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let api: Api<DynamicObject> = Api::namespaced_with(
            clusters.management.clone(),
            ns,
            &machine_autoscaler_resource(),
        );
        if delete_dynamic(&api, name).await? {
            report
                .actions
                .push(format!("deleted MachineAutoscaler {ns}/{name}"));
        }
    }
    for a in &rec.annotations {
        if !steps.may(&format!("taking {} out of CAS's reach", a.resource)) {
            report.interrupted = true;
            return Ok(report);
        }
        let id: ResourceId = a
            .resource
            .parse()
            .map_err(|e| Error::BadRecord(record::RECORD_NAME.into(), format!("{e}")))?;
        let changes = a
            .removed
            .keys()
            .map(|k| (k.clone(), serde_json::Value::Null))
            .collect();
        match patch_annotations(clusters, &id, &changes).await {
            Ok(()) => {}
            Err(Error::Kube(kube::Error::Api(s))) if s.code == 404 => continue,
            Err(e) => return Err(e),
        }
        report.actions.push(format!(
            "removed {} from {id}",
            a.removed.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
        if let Some(max) = a.removed.get(id.kind.max_size_key()) {
            report.warnings.push(format!(
                "{id}: its max size {max} no longer limits launches; set NodePool limits if you need a cap"
            ));
        }
    }
    record::write(&clusters.workload, namespace, "disabled", &rec).await?;
    Ok(report)
}

/// The recorded object, ready to create again: server-set metadata and status removed.
fn recreatable(v: &serde_json::Value) -> Result<DynamicObject, Error> {
    let mut v = v.clone();
    if let Some(meta) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        for k in [
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
            "managedFields",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(k);
        }
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
    }
    Ok(serde_json::from_value(v)?)
}

async fn recreate(
    api: &Api<DynamicObject>,
    v: &serde_json::Value,
) -> Result<Option<String>, Error> {
    let obj = recreatable(v)?;
    let name = obj.metadata.name.clone().unwrap_or_default();
    if api.get_opt(&name).await?.is_some() {
        return Ok(None);
    }
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(Some(name)),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Hands autoscaling back to CAS exactly as it was (see the module docs).
pub async fn enable(clusters: &Clusters, namespace: &str) -> Result<HandoffReport, Error> {
    enable_with(clusters, namespace, &Progress::none()).await
}

/// [`enable`], reporting each step.
pub async fn enable_with(
    clusters: &Clusters,
    namespace: &str,
    progress: &Progress,
) -> Result<HandoffReport, Error> {
    let Some(stored) = record::read(&clusters.workload, namespace).await? else {
        return Err(Error::NoRecord {
            namespace: namespace.into(),
            name: record::RECORD_NAME.into(),
        });
    };
    let rec = stored.record;
    record::write(&clusters.workload, namespace, "enabling", &rec).await?;
    let mut report = HandoffReport::default();
    let total = rec.annotations.len()
        + rec.machine_autoscalers.len()
        + usize::from(rec.cluster_autoscaler.is_some())
        + rec.deployments.len();
    let mut done = 0;
    for a in &rec.annotations {
        progress.step(
            done,
            total,
            format!("restoring annotations on {}", a.resource),
        );
        done += 1;
        let id: ResourceId = a
            .resource
            .parse()
            .map_err(|e| Error::BadRecord(record::RECORD_NAME.into(), format!("{e}")))?;
        let changes = a
            .removed
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        match patch_annotations(clusters, &id, &changes).await {
            Ok(()) => report
                .actions
                .push(format!("restored min/max annotations on {id}")),
            Err(Error::Kube(kube::Error::Api(s))) if s.code == 404 => report.warnings.push(
                format!("{id} no longer exists; its annotations were not restored"),
            ),
            Err(e) => return Err(e),
        }
    }
    for m in &rec.machine_autoscalers {
        progress.step(done, total, "recreating a MachineAutoscaler");
        done += 1;
        let ns = m
            .pointer("/metadata/namespace")
            .and_then(|v| v.as_str())
            .unwrap_or("");
        let api: Api<DynamicObject> = Api::namespaced_with(
            clusters.management.clone(),
            ns,
            &machine_autoscaler_resource(),
        );
        if let Some(name) = recreate(&api, m).await? {
            report
                .actions
                .push(format!("recreated MachineAutoscaler {ns}/{name}"));
        }
    }
    if let Some(ca) = &rec.cluster_autoscaler {
        progress.step(done, total, "recreating ClusterAutoscaler default");
        done += 1;
        let api: Api<DynamicObject> =
            Api::all_with(clusters.management.clone(), &cluster_autoscaler_resource());
        if recreate(&api, ca).await?.is_some() {
            report
                .actions
                .push("recreated ClusterAutoscaler default".into());
        }
    }
    for d in &rec.deployments {
        progress.step(
            done,
            total,
            format!("scaling cluster-autoscaler {}/{} back", d.namespace, d.name),
        );
        done += 1;
        if scale_deployment(
            &client_of(clusters, &d.cluster),
            &d.namespace,
            &d.name,
            d.replicas,
        )
        .await?
        {
            report.actions.push(format!(
                "scaled cluster-autoscaler Deployment {}/{} back to {}",
                d.namespace, d.name, d.replicas
            ));
        } else {
            report.warnings.push(format!(
                "cluster-autoscaler Deployment {}/{} no longer exists",
                d.namespace, d.name
            ));
        }
    }
    progress.step(done, total, "deleting the hand-off record");
    record::delete(&clusters.workload, namespace).await?;
    report.actions.push(format!(
        "deleted the hand-off record {namespace}/{}",
        record::RECORD_NAME
    ));
    Ok(report)
}
