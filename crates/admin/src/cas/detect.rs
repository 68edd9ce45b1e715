//! Reading the autoscaling state of both clusters.

use std::collections::BTreeMap;

use capi_adapter::instance_types::SizeLimits;
use capi_adapter::{MachineApi, ResourceKind, ScalableResource, keys};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Client};
use serde::Serialize;

use super::record::{self, Stored};
use super::{CasStatus, ResourceManagement, managed_service_keys};
use crate::{Clusters, Error};

/// Which cluster an object lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ClusterSide {
    Workload,
    Management,
}

impl ClusterSide {
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterSide::Workload => "workload",
            ClusterSide::Management => "management",
        }
    }
}

/// One `--node-group-auto-discovery=clusterapi:k=v,...` flag.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AutoDiscovery {
    pub namespace: Option<String>,
    pub cluster_name: Option<String>,
    pub labels: BTreeMap<String, String>,
}

impl AutoDiscovery {
    /// Parses the value after `--node-group-auto-discovery=`; other providers' specs are
    /// `None`.
    pub fn parse(spec: &str) -> Option<AutoDiscovery> {
        let rest = spec.strip_prefix("clusterapi:")?;
        let mut d = AutoDiscovery::default();
        for kv in rest.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=')?;
            match k {
                "namespace" => d.namespace = Some(v.to_string()),
                "clusterName" => d.cluster_name = Some(v.to_string()),
                _ => {
                    d.labels.insert(k.to_string(), v.to_string());
                }
            }
        }
        Some(d)
    }

    pub fn matches(&self, r: &ScalableResource) -> bool {
        if self
            .namespace
            .as_ref()
            .is_some_and(|n| *n != r.id.namespace)
        {
            return false;
        }
        if let Some(c) = &self.cluster_name
            && r.labels.get("cluster.x-k8s.io/cluster-name") != Some(c)
        {
            return false;
        }
        self.labels.iter().all(|(k, v)| r.labels.get(k) == Some(v))
    }
}

/// A cluster-autoscaler Deployment for Cluster API.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CasDeployment {
    pub cluster: ClusterSide,
    pub namespace: String,
    pub name: String,
    pub replicas: i32,
    pub auto_discovery: Vec<AutoDiscovery>,
    /// `Kind/name` of its controlling owner, if any.
    pub owner: Option<String>,
    /// Run by OpenShift's cluster-autoscaler-operator (owned by a ClusterAutoscaler): handed
    /// over by deleting the ClusterAutoscaler, never scaled by us.
    pub openshift_operated: bool,
    pub managed_service_keys: Vec<String>,
}

impl CasDeployment {
    pub fn label(&self) -> String {
        format!(
            "cluster-autoscaler Deployment {}/{}",
            self.namespace, self.name
        )
    }

    /// Whether this CAS would manage `r` (ignoring whether it runs).
    pub fn would_manage(&self, r: &ScalableResource) -> bool {
        if r.id.kind.machine_api() == MachineApi::OpenShift && !self.openshift_operated {
            // Upstream CAS for Cluster API does not read OpenShift's Machine API.
            return false;
        }
        if self.auto_discovery.is_empty() {
            return true;
        }
        self.auto_discovery.iter().any(|d| d.matches(r))
    }
}

/// The flag values of a container (`--flag=value` or `--flag value`, also inside one shell
/// string).
fn flag_values(words: &[String], flag: &str) -> Vec<String> {
    let words: Vec<&str> = words.iter().flat_map(|w| w.split_whitespace()).collect();
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if let Some(v) = w.strip_prefix(&format!("{flag}=")) {
            out.push(v.trim_matches(['"', '\'']).to_string());
        } else if *w == flag
            && let Some(v) = words.get(i + 1)
        {
            out.push(v.trim_matches(['"', '\'']).to_string());
        }
    }
    out
}

/// `$(VAR)` in a container's command and args, as the kubelet expands it: from the
/// container's `env` (a literal value, or the pod's namespace through a `fieldRef` on
/// `metadata.namespace`); `$$` is a literal `$`; a reference that cannot be resolved stays as
/// written. HyperShift runs its autoscaler with
/// `--node-group-auto-discovery=clusterapi:namespace=$(MY_NAMESPACE)`.
fn expand_env_refs(
    word: &str,
    c: &k8s_openapi::api::core::v1::Container,
    namespace: &str,
) -> String {
    let lookup = |name: &str| -> Option<String> {
        let var = c.env.iter().flatten().find(|e| e.name == name)?;
        if let Some(v) = &var.value {
            return Some(v.clone());
        }
        let field = var.value_from.as_ref()?.field_ref.as_ref()?;
        (field.field_path == "metadata.namespace").then(|| namespace.to_string())
    };
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            match lookup(&inner[..end]) {
                Some(v) => out.push_str(&v),
                None => out.push_str(&rest[i..i + 2 + end + 1]),
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn cas_of(d: &Deployment, cluster: ClusterSide) -> Option<CasDeployment> {
    let spec = d.spec.as_ref()?;
    let pod = spec.template.spec.as_ref()?;
    for c in &pod.containers {
        let namespace = d.metadata.namespace.clone().unwrap_or_default();
        let words: Vec<String> = c
            .command
            .iter()
            .flatten()
            .chain(c.args.iter().flatten())
            .map(|w| expand_env_refs(w, c, &namespace))
            .collect();
        if !flag_values(&words, "--cloud-provider")
            .iter()
            .any(|v| v == "clusterapi")
        {
            continue;
        }
        let owner = d
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| (o.kind.clone(), o.name.clone(), o.api_version.clone()));
        let openshift_operated = owner.as_ref().is_some_and(|(k, _, av)| {
            k == "ClusterAutoscaler" && av.starts_with("autoscaling.openshift.io/")
        });
        let meta = &d.metadata;
        return Some(CasDeployment {
            cluster,
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            replicas: spec.replicas.unwrap_or(1),
            auto_discovery: flag_values(&words, "--node-group-auto-discovery")
                .iter()
                .filter_map(|s| AutoDiscovery::parse(s))
                .collect(),
            owner: owner.map(|(k, n, _)| format!("{k}/{n}")),
            openshift_operated,
            managed_service_keys: managed_service_keys(
                meta.labels.iter().flatten().map(|(k, _)| k),
                meta.annotations.iter().flatten().map(|(k, _)| k),
            ),
        });
    }
    None
}

pub fn cluster_autoscaler_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("autoscaling.openshift.io", "v1", "ClusterAutoscaler"),
        "clusterautoscalers",
    )
}

pub fn machine_autoscaler_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("autoscaling.openshift.io", "v1beta1", "MachineAutoscaler"),
        "machineautoscalers",
    )
}

fn not_served(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Everything read, raw, for the hand-off to act on.
#[derive(Debug, Clone)]
pub struct Observed {
    pub resources: Vec<ScalableResource>,
    pub deployments: Vec<CasDeployment>,
    pub cluster_autoscaler: Option<DynamicObject>,
    pub machine_autoscalers: Vec<DynamicObject>,
    pub stored: Option<Stored>,
    pub namespace: String,
}

async fn cas_deployments(client: &Client, side: ClusterSide) -> Result<Vec<CasDeployment>, Error> {
    let api: Api<Deployment> = Api::all(client.clone());
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter_map(|d| cas_of(d, side))
        .collect())
}

/// Reads scalable resources, CAS Deployments (both clusters), OpenShift's autoscaler
/// objects and our record in `namespace`.
pub async fn observe(clusters: &Clusters, namespace: &str) -> Result<Observed, Error> {
    let resources = clusters.resources().await?;
    let mut deployments = cas_deployments(&clusters.workload, ClusterSide::Workload).await?;
    if !clusters.same {
        deployments.extend(cas_deployments(&clusters.management, ClusterSide::Management).await?);
    }
    deployments.retain(|d| clusters.in_scope(&d.namespace));
    let ca_api: Api<DynamicObject> =
        Api::all_with(clusters.management.clone(), &cluster_autoscaler_resource());
    let cluster_autoscaler = match ca_api.get_opt("default").await {
        Ok(o) => o,
        Err(e) if not_served(&e) => None,
        Err(e) => return Err(e.into()),
    };
    let ma_api: Api<DynamicObject> =
        Api::all_with(clusters.management.clone(), &machine_autoscaler_resource());
    let mut machine_autoscalers = match ma_api.list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(e) if not_served(&e) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    machine_autoscalers
        .retain(|m| clusters.in_scope(m.metadata.namespace.as_deref().unwrap_or("")));
    machine_autoscalers.sort_by_key(|m| (m.metadata.namespace.clone(), m.metadata.name.clone()));
    // With a namespace scope, the cluster-wide ClusterAutoscaler matters only if something
    // it acts on (an OpenShift MachineSet or a MachineAutoscaler) is in scope.
    let cluster_autoscaler = cluster_autoscaler.filter(|_| {
        clusters.namespaces.is_none()
            || !machine_autoscalers.is_empty()
            || resources
                .iter()
                .any(|r| r.id.kind == ResourceKind::OpenShiftMachineSet)
    });
    let stored = record::read(&clusters.workload, namespace).await?;
    Ok(Observed {
        resources,
        deployments,
        cluster_autoscaler,
        machine_autoscalers,
        stored,
        namespace: namespace.to_string(),
    })
}

/// `scaleTargetRef` of a MachineAutoscaler: (kind, name) in its namespace.
pub fn target_of(ma: &DynamicObject) -> Option<(String, String)> {
    let t = ma.data.pointer("/spec/scaleTargetRef")?;
    Some((
        t.get("kind")?.as_str()?.to_string(),
        t.get("name")?.as_str()?.to_string(),
    ))
}

fn meta_keys(o: &DynamicObject) -> Vec<String> {
    managed_service_keys(
        o.metadata.labels.iter().flatten().map(|(k, _)| k),
        o.metadata.annotations.iter().flatten().map(|(k, _)| k),
    )
}

/// A CAS max-size annotation that CAS accepts (max > 0, valid min <= max).
pub fn cas_bounds(r: &ScalableResource) -> Option<SizeLimits> {
    let l = SizeLimits::of(r).ok()?;
    let max = l.max?;
    (max > 0 || l.min > 0).then_some(l)
}

impl Observed {
    fn record(&self) -> Option<&super::HandoffRecord> {
        self.stored.as_ref().map(|s| &s.record)
    }

    /// MachineAutoscalers targeting `r`.
    pub fn machine_autoscalers_of(&self, r: &ScalableResource) -> Vec<&DynamicObject> {
        if r.id.kind != ResourceKind::OpenShiftMachineSet {
            return Vec::new();
        }
        self.machine_autoscalers
            .iter()
            .filter(|m| m.metadata.namespace.as_deref() == Some(r.id.namespace.as_str()))
            .filter(|m| target_of(m).is_some_and(|(k, n)| k == "MachineSet" && n == r.id.name))
            .collect()
    }

    /// Who of CAS manages `r` (labels), and whether any of them runs now.
    pub fn managers(&self, r: &ScalableResource) -> (Vec<String>, bool) {
        let mut who = Vec::new();
        let mut active = false;
        if r.id.kind == ResourceKind::OpenShiftMachineSet {
            for m in self.machine_autoscalers_of(r) {
                who.push(format!(
                    "MachineAutoscaler {}/{}",
                    m.metadata.namespace.as_deref().unwrap_or(""),
                    m.metadata.name.as_deref().unwrap_or("")
                ));
            }
            let bounded = cas_bounds(r).is_some();
            if (bounded || !who.is_empty()) && self.cluster_autoscaler.is_some() {
                active = true;
                if who.is_empty() {
                    who.push("ClusterAutoscaler default (annotations)".into());
                }
            }
            return (who, active);
        }
        if cas_bounds(r).is_none() || r.owning_deployment.is_some() {
            return (who, false);
        }
        for d in &self.deployments {
            if d.would_manage(r) {
                who.push(d.label());
                active |= d.replicas > 0;
            }
        }
        (who, active)
    }

    pub fn is_member(r: &ScalableResource) -> bool {
        r.labels.contains_key(keys::capi::KARPENTER_MEMBER)
    }

    /// Deployments we would scale (not OpenShift's, which the operator runs).
    pub fn scalable_deployments(&self) -> impl Iterator<Item = &CasDeployment> {
        self.deployments.iter().filter(|d| !d.openshift_operated)
    }

    /// Resources whose CAS min/max annotations `disable` removes: members CAS manages, and
    /// every MachineAutoscaler target (deleting the MachineAutoscaler strips them anyway).
    pub fn to_take_from_cas(&self) -> Vec<&ScalableResource> {
        self.resources
            .iter()
            .filter(|r| {
                let (who, _) = self.managers(r);
                !self.machine_autoscalers_of(r).is_empty()
                    || (Self::is_member(r) && !who.is_empty())
            })
            .collect()
    }

    /// Reasons `disable` refuses without `--force`. Items already in our record were
    /// accepted by an earlier run and are not ambiguous again (so a rerun repairs without
    /// `--force`); managed-service objects always are.
    pub fn ambiguities(&self) -> Vec<String> {
        let mut out = Vec::new();
        let rec = self.record();
        let recorded_dep = |d: &CasDeployment| {
            rec.is_some_and(|r| r.has_deployment(d.cluster.as_str(), &d.namespace, &d.name))
        };
        let mut cas: Vec<String> = self
            .scalable_deployments()
            .map(CasDeployment::label)
            .collect();
        if self.cluster_autoscaler.is_some() {
            cas.push("ClusterAutoscaler default".into());
        }
        let all_recorded = self.scalable_deployments().all(recorded_dep)
            && (self.cluster_autoscaler.is_none()
                || rec.is_some_and(|r| r.cluster_autoscaler.is_some()));
        if cas.len() > 1 && !all_recorded {
            out.push(format!(
                "more than one Cluster Autoscaler: {} (which one is in charge?)",
                cas.join(", ")
            ));
        }
        for d in self.scalable_deployments() {
            if let Some(owner) = &d.owner
                && !recorded_dep(d)
            {
                out.push(format!(
                    "{} is controlled by {owner}, which would undo a scale to 0",
                    d.label()
                ));
            }
            if !d.managed_service_keys.is_empty() {
                out.push(format!(
                    "{} is managed by a managed service ({})",
                    d.label(),
                    d.managed_service_keys.join(", ")
                ));
            }
        }
        if let Some(ca) = &self.cluster_autoscaler {
            let k = meta_keys(ca);
            if !k.is_empty() {
                out.push(format!(
                    "ClusterAutoscaler default is managed by a managed service (ROSA/OSD: {}); use OCM machine pools",
                    k.join(", ")
                ));
            }
        }
        for m in &self.machine_autoscalers {
            let k = meta_keys(m);
            if !k.is_empty() {
                out.push(format!(
                    "MachineAutoscaler {}/{} is managed by a managed service ({})",
                    m.metadata.namespace.as_deref().unwrap_or(""),
                    m.metadata.name.as_deref().unwrap_or(""),
                    k.join(", ")
                ));
            }
        }
        for r in &self.resources {
            let touched = self.to_take_from_cas().iter().any(|t| t.id == r.id);
            if touched {
                let k = managed_service_keys(r.labels.keys(), r.annotations.keys());
                if !k.is_empty() {
                    out.push(format!(
                        "{} is managed by a managed service ({})",
                        r.id,
                        k.join(", ")
                    ));
                }
            }
            if r.id.kind == ResourceKind::OpenShiftMachineSet
                && (r.annotations.contains_key(keys::openshift::MIN_SIZE)
                    || r.annotations.contains_key(keys::openshift::MAX_SIZE))
                && self.machine_autoscalers_of(r).is_empty()
                && rec
                    .and_then(|x| x.annotations_of(&r.id.to_string()))
                    .is_none()
            {
                out.push(format!(
                    "{} has min/max annotations but no MachineAutoscaler targets it (unknown owner)",
                    r.id
                ));
            }
        }
        out
    }

    pub fn status(&self) -> CasStatus {
        let rec = self.record();
        let resources = self
            .resources
            .iter()
            .map(|r| {
                let (cas, cas_active) = self.managers(r);
                let member = Self::is_member(r);
                ResourceManagement {
                    resource: r.id.to_string(),
                    member,
                    overlap: member && cas_active,
                    cas,
                    cas_active,
                    taken_from_cas: rec
                        .and_then(|x| x.annotations_of(&r.id.to_string()))
                        .is_some(),
                }
            })
            .collect();
        CasStatus {
            deployments: self.deployments.clone(),
            cluster_autoscaler: self.cluster_autoscaler.is_some(),
            machine_autoscalers: self
                .machine_autoscalers
                .iter()
                .map(|m| {
                    let t = target_of(m)
                        .map(|(k, n)| format!("{k}/{n}"))
                        .unwrap_or_default();
                    format!(
                        "{}/{} -> {t}",
                        m.metadata.namespace.as_deref().unwrap_or(""),
                        m.metadata.name.as_deref().unwrap_or("")
                    )
                })
                .collect(),
            resources,
            ambiguities: self.ambiguities(),
            handoff_phase: self.stored.as_ref().map(|s| s.phase.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_references_in_flags_expand_as_the_kubelet_does() {
        let c: k8s_openapi::api::core::v1::Container = serde_json::from_value(serde_json::json!({
            "name": "autoscaler",
            "env": [
                {"name": "MY_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "POOL", "value": "blue"},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
            ]
        }))
        .unwrap();
        assert_eq!(
            expand_env_refs(
                "--node-group-auto-discovery=clusterapi:namespace=$(MY_NAMESPACE)",
                &c,
                "clusters-a"
            ),
            "--node-group-auto-discovery=clusterapi:namespace=clusters-a"
        );
        assert_eq!(
            expand_env_refs("p=$(POOL),n=$(NODE),u=$(UNSET)", &c, "x"),
            "p=blue,n=$(NODE),u=$(UNSET)"
        );
        assert_eq!(expand_env_refs("$$(POOL) $ $(", &c, "x"), "$(POOL) $ $(");
    }

    #[test]
    fn flags_in_all_spellings() {
        let words: Vec<String> = [
            "/cluster-autoscaler",
            "--cloud-provider",
            "clusterapi",
            "--node-group-auto-discovery=clusterapi:namespace=a,clusterName=c,pool=x",
            "--v=4 --node-group-auto-discovery clusterapi:namespace=b",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(flag_values(&words, "--cloud-provider"), vec!["clusterapi"]);
        let specs = flag_values(&words, "--node-group-auto-discovery");
        assert_eq!(specs.len(), 2);
        let d = AutoDiscovery::parse(&specs[0]).unwrap();
        assert_eq!(d.namespace.as_deref(), Some("a"));
        assert_eq!(d.cluster_name.as_deref(), Some("c"));
        assert_eq!(d.labels["pool"], "x");
        assert!(AutoDiscovery::parse("aws:tag=x").is_none());
    }
}
