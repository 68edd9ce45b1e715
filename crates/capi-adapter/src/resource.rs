//! One abstraction over the three kinds of scalable resource (CAPI MachineDeployment, CAPI
//! MachineSet, OpenShift MachineSet) and their Machines.
//!
//! Everything downstream (instance types, plans, drift) works on [`ScalableResource`] and
//! [`MachineView`], so a fourth kind would only need a conversion here.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::keys;
use crate::objects::{capi, openshift};

/// The kinds of scalable resource we can grow and shrink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ResourceKind {
    /// `cluster.x-k8s.io` MachineDeployment.
    MachineDeployment,
    /// `cluster.x-k8s.io` MachineSet not owned by a MachineDeployment.
    MachineSet,
    /// `machine.openshift.io` MachineSet.
    OpenShiftMachineSet,
}

/// Which Machine API a kind's Machines belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum MachineApi {
    Capi,
    OpenShift,
}

impl ResourceKind {
    pub const ALL: [ResourceKind; 3] = [
        ResourceKind::MachineDeployment,
        ResourceKind::MachineSet,
        ResourceKind::OpenShiftMachineSet,
    ];

    pub fn kind(self) -> &'static str {
        match self {
            ResourceKind::MachineDeployment => "MachineDeployment",
            ResourceKind::MachineSet | ResourceKind::OpenShiftMachineSet => "MachineSet",
        }
    }

    pub fn group(self) -> &'static str {
        match self {
            ResourceKind::MachineDeployment | ResourceKind::MachineSet => keys::capi::GROUP,
            ResourceKind::OpenShiftMachineSet => keys::openshift::GROUP,
        }
    }

    /// `Kind.group`, as kubectl spells a qualified resource kind.
    pub fn qualified(self) -> &'static str {
        match self {
            ResourceKind::MachineDeployment => "MachineDeployment.cluster.x-k8s.io",
            ResourceKind::MachineSet => "MachineSet.cluster.x-k8s.io",
            ResourceKind::OpenShiftMachineSet => "MachineSet.machine.openshift.io",
        }
    }

    pub fn machine_api(self) -> MachineApi {
        match self {
            ResourceKind::OpenShiftMachineSet => MachineApi::OpenShift,
            _ => MachineApi::Capi,
        }
    }

    /// The label on a Machine naming its owner of this kind.
    pub fn machine_owner_label(self) -> &'static str {
        match self {
            ResourceKind::MachineDeployment => keys::capi::DEPLOYMENT_NAME,
            ResourceKind::MachineSet => keys::capi::SET_NAME,
            ResourceKind::OpenShiftMachineSet => keys::openshift::MACHINESET_LABEL,
        }
    }

    pub fn min_size_key(self) -> &'static str {
        match self.machine_api() {
            MachineApi::Capi => keys::capi::MIN_SIZE,
            MachineApi::OpenShift => keys::openshift::MIN_SIZE,
        }
    }

    pub fn max_size_key(self) -> &'static str {
        match self.machine_api() {
            MachineApi::Capi => keys::capi::MAX_SIZE,
            MachineApi::OpenShift => keys::openshift::MAX_SIZE,
        }
    }

    /// Parses `MachineDeployment`, `MachineSet` (CAPI), the qualified forms, and
    /// `MachineSet.machine.openshift.io` / `OpenShiftMachineSet`, as users write them in the
    /// NodeClass.
    pub fn parse(s: &str) -> Option<ResourceKind> {
        match s {
            "MachineDeployment" | "MachineDeployment.cluster.x-k8s.io" => {
                Some(ResourceKind::MachineDeployment)
            }
            "MachineSet" | "MachineSet.cluster.x-k8s.io" => Some(ResourceKind::MachineSet),
            "OpenShiftMachineSet" | "MachineSet.machine.openshift.io" => {
                Some(ResourceKind::OpenShiftMachineSet)
            }
            _ => None,
        }
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.qualified())
    }
}

/// Names one scalable resource: `MachineDeployment.cluster.x-k8s.io/<namespace>/<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourceId {
    pub kind: ResourceKind,
    pub namespace: String,
    pub name: String,
}

impl ResourceId {
    pub fn new(kind: ResourceKind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ResourceId {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("not a scalable resource reference: {0:?} (expected Kind.group/namespace/name)")]
pub struct ParseResourceIdError(pub String);

impl FromStr for ResourceId {
    type Err = ParseResourceIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseResourceIdError(s.to_string());
        let mut parts = s.splitn(3, '/');
        let kind = parts.next().and_then(ResourceKind::parse).ok_or_else(err)?;
        let ns = parts.next().filter(|p| !p.is_empty()).ok_or_else(err)?;
        let name = parts
            .next()
            .filter(|p| !p.is_empty() && !p.contains('/'))
            .ok_or_else(err)?;
        Ok(ResourceId::new(kind, ns, name))
    }
}

/// Any Kubernetes object a [`crate::Problem`] can name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectRef {
    /// `Kind.group` (`MachineDeployment.cluster.x-k8s.io`, `DockerMachineTemplate.infrastructure.cluster.x-k8s.io`).
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

impl From<&ResourceId> for ObjectRef {
    fn from(id: &ResourceId) -> Self {
        ObjectRef {
            kind: id.kind.qualified().to_string(),
            namespace: Some(id.namespace.clone()),
            name: id.name.clone(),
        }
    }
}

/// An infrastructure machine template a CAPI machine template points to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InfraRef {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl InfraRef {
    pub fn object_ref(&self) -> ObjectRef {
        ObjectRef {
            kind: if self.group.is_empty() {
                self.kind.clone()
            } else {
                format!("{}.{}", self.kind, self.group)
            },
            namespace: Some(self.namespace.clone()),
            name: self.name.clone(),
        }
    }
}

/// A taint as written in a machine template (effect still a string: an unknown effect is a
/// reported problem, not a parse failure of the whole object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateTaint {
    pub key: String,
    pub value: Option<String>,
    pub effect: String,
}

/// What the adapter needs from a resource's machine template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineTemplateView {
    /// `spec.template.metadata.labels`: labels every Machine gets.
    pub machine_labels: BTreeMap<String, String>,
    /// Labels that end up on the Node: CAPI's node-propagated domains of `machine_labels`;
    /// on OpenShift `spec.template.spec.metadata.labels`.
    pub node_labels: BTreeMap<String, String>,
    pub taints: Vec<TemplateTaint>,
    pub failure_domain: Option<String>,
    pub version: Option<String>,
    pub infrastructure_ref: Option<InfraRef>,
    /// The bootstrap config template (`group/Kind/name`) or data secret (`secret/name`).
    pub bootstrap: Option<String>,
    /// OpenShift `providerSpec.value`.
    pub provider_spec: Option<serde_json::Value>,
}

/// Replica counts reported in status, used to tell whether a rollout is in progress.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceStatus {
    pub replicas: Option<i32>,
    pub up_to_date_replicas: Option<i32>,
    pub observed_generation: Option<i64>,
}

/// A MachineDeployment, CAPI MachineSet or OpenShift MachineSet, reduced to what the adapter
/// reasons about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalableResource {
    pub id: ResourceId,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// `spec.replicas` (absent = 0, as the scale subresource reports it).
    pub replicas: i32,
    pub generation: i64,
    pub deleting: bool,
    /// `spec.paused` (MachineDeployment) or the `cluster.x-k8s.io/paused` annotation.
    pub paused: bool,
    /// For a CAPI MachineSet: the MachineDeployment that owns it (it must be scaled there).
    pub owning_deployment: Option<String>,
    pub template: MachineTemplateView,
    pub status: ResourceStatus,
}

fn labels_of(meta: &ObjectMeta) -> BTreeMap<String, String> {
    meta.labels.clone().unwrap_or_default()
}

fn annotations_of(meta: &ObjectMeta) -> BTreeMap<String, String> {
    meta.annotations.clone().unwrap_or_default()
}

/// Whether CAPI propagates a Machine label with this key to the Node, exactly as CAPI's
/// `GetManagedLabels` decides: the part before the first `/` (the whole key when it has no
/// `/`) is `node-role.kubernetes.io` (that domain only), or `node-restriction.kubernetes.io`
/// or `node.cluster.x-k8s.io` or a subdomain of either. Labels CAPI's
/// `--additional-sync-machine-labels` flag adds are not known to us (docs/annotations.md).
pub fn is_node_propagated(key: &str) -> bool {
    let domain = key.split('/').next().unwrap_or(key);
    domain == keys::capi::NODE_ROLE_DOMAIN
        || keys::capi::NODE_PROPAGATED_DOMAINS
            .iter()
            .any(|d| domain == *d || domain.strip_suffix(d).is_some_and(|h| h.ends_with('.')))
}

fn capi_template_view(t: &capi::MachineTemplateSpec, namespace: &str) -> MachineTemplateView {
    let spec = &t.spec;
    let infra = &spec.infrastructure_ref;
    let infrastructure_ref = (!infra.name.is_empty()).then(|| InfraRef {
        group: infra.group().unwrap_or_default().to_string(),
        kind: infra.kind.clone(),
        namespace: infra
            .namespace
            .clone()
            .unwrap_or_else(|| namespace.to_string()),
        name: infra.name.clone(),
    });
    MachineTemplateView {
        machine_labels: t.metadata.labels.clone(),
        node_labels: t
            .metadata
            .labels
            .iter()
            .filter(|(k, _)| is_node_propagated(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        taints: spec
            .taints
            .iter()
            .map(|t| TemplateTaint {
                key: t.key.clone(),
                value: t.value.clone().filter(|v| !v.is_empty()),
                effect: t.effect.clone(),
            })
            .collect(),
        failure_domain: spec.failure_domain.clone().filter(|f| !f.is_empty()),
        version: spec.version.clone(),
        infrastructure_ref,
        bootstrap: spec
            .bootstrap
            .config_ref
            .as_ref()
            .map(|r| format!("{}/{}/{}", r.group().unwrap_or_default(), r.kind, r.name))
            .or_else(|| {
                spec.bootstrap
                    .data_secret_name
                    .as_ref()
                    .map(|n| format!("secret/{n}"))
            }),
        provider_spec: None,
    }
}

fn capi_status(s: Option<&capi::ScalableStatus>) -> ResourceStatus {
    s.map(|s| ResourceStatus {
        replicas: s.replicas,
        up_to_date_replicas: s.up_to_date(),
        observed_generation: s.observed_generation,
    })
    .unwrap_or_default()
}

impl From<&capi::MachineDeployment> for ScalableResource {
    fn from(md: &capi::MachineDeployment) -> Self {
        let ns = md.metadata.namespace.clone().unwrap_or_default();
        let annotations = annotations_of(&md.metadata);
        ScalableResource {
            id: ResourceId::new(
                ResourceKind::MachineDeployment,
                ns.clone(),
                md.metadata.name.clone().unwrap_or_default(),
            ),
            labels: labels_of(&md.metadata),
            paused: md.spec.paused == Some(true) || annotations.contains_key(keys::capi::PAUSED),
            annotations,
            replicas: md.spec.replicas.unwrap_or(0),
            generation: md.metadata.generation.unwrap_or(0),
            deleting: md.metadata.deletion_timestamp.is_some(),
            owning_deployment: None,
            template: capi_template_view(&md.spec.template, &ns),
            status: capi_status(md.status.as_ref()),
        }
    }
}

impl From<&capi::MachineSet> for ScalableResource {
    fn from(ms: &capi::MachineSet) -> Self {
        let ns = ms.metadata.namespace.clone().unwrap_or_default();
        let labels = labels_of(&ms.metadata);
        let annotations = annotations_of(&ms.metadata);
        let owning_deployment = ms
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| {
                o.kind == "MachineDeployment" && o.api_version.starts_with("cluster.x-k8s.io/")
            })
            .map(|o| o.name.clone())
            .or_else(|| labels.get(keys::capi::DEPLOYMENT_NAME).cloned());
        ScalableResource {
            id: ResourceId::new(
                ResourceKind::MachineSet,
                ns.clone(),
                ms.metadata.name.clone().unwrap_or_default(),
            ),
            labels,
            paused: annotations.contains_key(keys::capi::PAUSED),
            annotations,
            replicas: ms.spec.replicas.unwrap_or(0),
            generation: ms.metadata.generation.unwrap_or(0),
            deleting: ms.metadata.deletion_timestamp.is_some(),
            owning_deployment,
            template: capi_template_view(&ms.spec.template, &ns),
            status: capi_status(ms.status.as_ref()),
        }
    }
}

impl From<&openshift::MachineSet> for ScalableResource {
    fn from(ms: &openshift::MachineSet) -> Self {
        let ns = ms.metadata.namespace.clone().unwrap_or_default();
        let annotations = annotations_of(&ms.metadata);
        let spec = &ms.spec.template.spec;
        ScalableResource {
            id: ResourceId::new(
                ResourceKind::OpenShiftMachineSet,
                ns,
                ms.metadata.name.clone().unwrap_or_default(),
            ),
            labels: labels_of(&ms.metadata),
            paused: annotations.contains_key(keys::capi::PAUSED),
            annotations,
            replicas: ms.spec.replicas.unwrap_or(0),
            generation: ms.metadata.generation.unwrap_or(0),
            deleting: ms.metadata.deletion_timestamp.is_some(),
            owning_deployment: None,
            template: MachineTemplateView {
                machine_labels: ms.spec.template.metadata.labels.clone(),
                node_labels: spec.metadata.labels.clone(),
                taints: spec
                    .taints
                    .iter()
                    .map(|t| TemplateTaint {
                        key: t.key.clone(),
                        value: t.value.clone().filter(|v| !v.is_empty()),
                        effect: t.effect.clone(),
                    })
                    .collect(),
                failure_domain: None,
                version: None,
                infrastructure_ref: None,
                bootstrap: None,
                provider_spec: spec.provider_spec.value.clone(),
            },
            status: ms
                .status
                .as_ref()
                .map(|s| ResourceStatus {
                    replicas: s.replicas,
                    up_to_date_replicas: None,
                    observed_generation: s.observed_generation,
                })
                .unwrap_or_default(),
        }
    }
}

impl ScalableResource {
    /// A digest of the parts of the machine template that make a Machine what it is (version,
    /// infrastructure and bootstrap references, failure domain; OpenShift's providerSpec).
    /// Labels and taints are left out: CAPI propagates them to existing Machines in place.
    /// Stable across restarts and Rust versions (FNV-1a over canonical JSON).
    pub fn template_hash(&self) -> String {
        let t = &self.template;
        let doc = serde_json::json!({
            "version": t.version,
            "infrastructureRef": t.infrastructure_ref,
            "failureDomain": t.failure_domain,
            "providerSpec": t.provider_spec,
            "bootstrap": t.bootstrap,
        });
        format!("{:016x}", fnv1a64(canonical_json(&doc).as_bytes()))
    }

    /// Whether a CAPI MachineDeployment is mid-rollout according to its status (machines of
    /// more than one MachineSet are checked by the delete plan). Without status (no CAPI
    /// controller has reported yet) it is not considered rolling.
    pub fn rolling_out_by_status(&self) -> bool {
        if self.id.kind != ResourceKind::MachineDeployment {
            return false;
        }
        let s = &self.status;
        if let Some(observed) = s.observed_generation
            && observed < self.generation
        {
            return true;
        }
        matches!((s.up_to_date_replicas, s.replicas), (Some(u), Some(r)) if u < r)
    }
}

/// JSON with object keys sorted, whatever map type serde_json was built with.
pub fn canonical_json(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let body: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        Value::String(k.clone()),
                        canonical_json(&map[k.as_str()])
                    )
                })
                .collect();
            format!("{{{}}}", body.join(","))
        }
        Value::Array(items) => {
            let body: Vec<String> = items.iter().map(canonical_json).collect();
            format!("[{}]", body.join(","))
        }
        other => other.to_string(),
    }
}

/// 64-bit FNV-1a: tiny, stable, good enough to detect change (not a security digest).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A Machine (CAPI or OpenShift), reduced to what plans need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineView {
    pub api: MachineApi,
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Creation time, seconds since the epoch.
    pub created_at: i64,
    pub deleting: bool,
    pub provider_id: Option<String>,
    pub node_name: Option<String>,
    /// A terminal launch failure reported by the Machine controller.
    pub failure: Option<String>,
    /// The infrastructure's last error while it retries the launch (not terminal by itself;
    /// [`crate::failures::launch_failures`] decides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_error: Option<String>,
    pub version: Option<String>,
    pub failure_domain: Option<String>,
}

/// `<namespace>/<name>` of a Machine, the value of the `cluster.x-k8s.io/machine` annotation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MachineKey {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for MachineKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl FromStr for MachineKey {
    type Err = ParseResourceIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(MachineKey {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                })
            }
            _ => Err(ParseResourceIdError(s.to_string())),
        }
    }
}

/// Who a Machine is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding<'a> {
    Unbound,
    /// Bound by us to this NodeClaim.
    Claim(&'a str),
    /// Claimed by something else (upstream's provider marks Machines with its member label);
    /// never taken over.
    Foreign,
}

fn epoch_secs(meta: &ObjectMeta) -> i64 {
    meta.creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .unwrap_or(0)
}

impl From<&capi::Machine> for MachineView {
    fn from(m: &capi::Machine) -> Self {
        MachineView {
            api: MachineApi::Capi,
            namespace: m.metadata.namespace.clone().unwrap_or_default(),
            name: m.metadata.name.clone().unwrap_or_default(),
            uid: m.metadata.uid.clone(),
            resource_version: m.metadata.resource_version.clone(),
            labels: labels_of(&m.metadata),
            annotations: annotations_of(&m.metadata),
            created_at: epoch_secs(&m.metadata),
            deleting: m.metadata.deletion_timestamp.is_some(),
            provider_id: m.spec.provider_id.clone().filter(|p| !p.is_empty()),
            node_name: m
                .status
                .as_ref()
                .and_then(|s| s.node_ref.as_ref())
                .map(|n| n.name.clone()),
            failure: m.failure(),
            provisioning_error: m.provisioning_error(),
            version: m.spec.version.clone(),
            failure_domain: m.spec.failure_domain.clone(),
        }
    }
}

impl From<&openshift::Machine> for MachineView {
    fn from(m: &openshift::Machine) -> Self {
        MachineView {
            api: MachineApi::OpenShift,
            namespace: m.metadata.namespace.clone().unwrap_or_default(),
            name: m.metadata.name.clone().unwrap_or_default(),
            uid: m.metadata.uid.clone(),
            resource_version: m.metadata.resource_version.clone(),
            labels: labels_of(&m.metadata),
            annotations: annotations_of(&m.metadata),
            created_at: epoch_secs(&m.metadata),
            deleting: m.metadata.deletion_timestamp.is_some(),
            provider_id: m.spec.provider_id.clone().filter(|p| !p.is_empty()),
            node_name: m
                .status
                .as_ref()
                .and_then(|s| s.node_ref.as_ref())
                .map(|n| n.name.clone()),
            failure: m.failure(),
            provisioning_error: m.provisioning_error(),
            version: None,
            failure_domain: None,
        }
    }
}

impl MachineView {
    pub fn key(&self) -> MachineKey {
        MachineKey {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    /// Whether the Machine belongs to the resource (same namespace, owner label names it).
    pub fn belongs_to(&self, id: &ResourceId) -> bool {
        id.kind.machine_api() == self.api
            && self.namespace == id.namespace
            && self.labels.get(id.kind.machine_owner_label()) == Some(&id.name)
    }

    pub fn binding(&self) -> Binding<'_> {
        if let Some(claim) = self
            .annotations
            .get(keys::ours::NODECLAIM_ANNOTATION)
            .filter(|c| !c.is_empty())
        {
            return Binding::Claim(claim);
        }
        if let Some(claim) = self
            .labels
            .get(keys::ours::NODECLAIM_LABEL)
            .filter(|c| !c.is_empty())
        {
            return Binding::Claim(claim);
        }
        if self.labels.contains_key(keys::capi::KARPENTER_MEMBER) {
            return Binding::Foreign;
        }
        Binding::Unbound
    }

    /// Marked for deletion with CAPI's or OpenShift's delete-machine annotation (by us or
    /// anyone else).
    pub fn delete_annotated(&self) -> bool {
        self.annotations.contains_key(keys::capi::DELETE_MACHINE)
            || self
                .annotations
                .contains_key(keys::openshift::DELETE_MACHINE)
    }

    /// We annotated it for deletion (so completing or rolling back that request is ours).
    pub fn delete_requested_by_us(&self) -> bool {
        self.delete_annotated() && self.annotations.contains_key(keys::ours::DELETE_REQUESTED)
    }

    /// The delete-machine annotation key for this Machine's API.
    pub fn delete_annotation_key(&self) -> &'static str {
        match self.api {
            MachineApi::Capi => keys::capi::DELETE_MACHINE,
            MachineApi::OpenShift => keys::openshift::DELETE_MACHINE,
        }
    }
}

/// The label value that marks a Machine as bound to `claim`: the name itself when it is a
/// valid label value (the common case: Karpenter names claims `<nodepool>-<suffix>`), else a
/// stable digest (the full name is always in the annotation).
pub fn binding_label_value(claim: &str) -> String {
    if crate::parse::is_label_value(claim) && !claim.is_empty() {
        claim.to_string()
    } else {
        format!("h-{:016x}", fnv1a64(claim.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_ids_round_trip() {
        for kind in ResourceKind::ALL {
            let id = ResourceId::new(kind, "ns", "md-0");
            assert_eq!(id.to_string().parse::<ResourceId>().unwrap(), id);
        }
        assert!("MachineDeployment/ns".parse::<ResourceId>().is_err());
        assert!("Pod/ns/x".parse::<ResourceId>().is_err());
        assert!(
            "MachineSet.cluster.x-k8s.io/ns/a/b"
                .parse::<ResourceId>()
                .is_err()
        );
    }

    /// CAS `TestGetManagedNodeLabelsFromLabels` (clusterapi_utils_test.go), whose cases
    /// follow CAPI's `GetManagedLabels`, plus edge cases of the same rule.
    #[test]
    fn propagated_domains() {
        for k in [
            "node-restriction.kubernetes.io/some-thing",
            "prefixed.node-restriction.kubernetes.io/some-other-thing",
            "node.cluster.x-k8s.io/another-thing",
            "prefixed.node.cluster.x-k8s.io/another-thing",
            "node-role.kubernetes.io/worker",
            "node-role.kubernetes.io/test",
        ] {
            assert!(is_node_propagated(k), "{k}");
        }
        for k in [
            "my.special.label/should-not-propagate",
            "prefixed.node-role.kubernetes.io/no-propagate",
            "cluster.x-k8s.io/deployment-name",
            "tier",
            "evilnode-role.kubernetes.io/x",
            "xnode.cluster.x-k8s.io/x",
        ] {
            assert!(!is_node_propagated(k), "{k}");
        }
    }

    #[test]
    fn binding_label_values_are_valid() {
        assert_eq!(binding_label_value("default-abcde"), "default-abcde");
        let long = "a".repeat(80);
        let v = binding_label_value(&long);
        assert!(crate::parse::is_label_value(&v));
        assert_eq!(v, binding_label_value(&long));
    }

    #[test]
    fn canonical_json_sorts_keys() {
        let a = serde_json::json!({"b": 1, "a": {"d": [1, {"z": 1, "y": 2}], "c": null}});
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":null,"d":[1,{"y":2,"z":1}]},"b":1}"#
        );
    }
}
