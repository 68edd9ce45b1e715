//! Who autoscales which scalable resource today, and the hand-off from the Cluster
//! Autoscaler (CAS) to us and back.
//!
//! - Plain Cluster API: CAS is a Deployment running `cluster-autoscaler
//!   --cloud-provider=clusterapi`. It manages a MachineDeployment / MachineSet that has a max
//!   size annotation (and a valid min), and, when the Deployment has
//!   `--node-group-auto-discovery=clusterapi:...` flags, matches one of them.
//! - OpenShift: the `ClusterAutoscaler` named `default` (cluster-scoped) makes the
//!   cluster-autoscaler-operator run CAS; each `MachineAutoscaler` puts min/max annotations
//!   on its target MachineSet (and removes them when deleted).
//!
//! [`observe`] reads all of that; [`CasStatus`] summarises it; [`handoff`] disables and
//! enables with a record in a ConfigMap we own ([`record`]).

pub mod detect;
pub mod handoff;
pub mod record;

pub use detect::{AutoDiscovery, CasDeployment, ClusterSide, Observed, observe};
pub use handoff::{DisableOptions, HandoffReport, disable, enable, enable_with};
pub use record::{HandoffRecord, RECORD_NAME};

use serde::Serialize;

/// One scalable resource as far as autoscaling is concerned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceManagement {
    pub resource: String,
    pub member: bool,
    /// Who would scale it: `cas Deployment ns/name`, `MachineAutoscaler ns/name`.
    pub cas: Vec<String>,
    /// Whether that CAS runs now (replicas > 0, or ClusterAutoscaler `default` exists).
    pub cas_active: bool,
    /// Both CAS and we would act on it.
    pub overlap: bool,
    /// CAS min/max annotations removed by `cas disable` and kept in the record.
    pub taken_from_cas: bool,
}

/// The summary `cas status` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CasStatus {
    pub deployments: Vec<CasDeployment>,
    /// `ClusterAutoscaler default` exists.
    pub cluster_autoscaler: bool,
    /// `namespace/name -> target` of each MachineAutoscaler.
    pub machine_autoscalers: Vec<String>,
    pub resources: Vec<ResourceManagement>,
    /// Why `disable` would refuse without `--force`.
    pub ambiguities: Vec<String>,
    /// Phase of our hand-off record, if one exists (`disabling`, `disabled`, `enabling`).
    pub handoff_phase: Option<String>,
}

impl CasStatus {
    pub fn overlaps(&self) -> impl Iterator<Item = &ResourceManagement> {
        self.resources.iter().filter(|r| r.overlap)
    }
}

/// Label and annotation prefixes of objects that OpenShift Cluster Manager / Hive manage
/// (ROSA, OSD): we must not change those objects behind the managed service's back.
pub const MANAGED_SERVICE_PREFIXES: [&str; 2] = ["hive.openshift.io/", "api.openshift.com/"];

/// Managed-service keys among labels and annotations.
pub fn managed_service_keys<'a>(
    labels: impl IntoIterator<Item = &'a String>,
    annotations: impl IntoIterator<Item = &'a String>,
) -> Vec<String> {
    labels
        .into_iter()
        .chain(annotations)
        .filter(|k| MANAGED_SERVICE_PREFIXES.iter().any(|p| k.starts_with(p)))
        .cloned()
        .collect()
}

/// Reads everything and summarises it.
pub async fn status(
    clusters: &crate::Clusters,
    namespace: &str,
) -> Result<CasStatus, crate::Error> {
    let observed = observe(clusters, namespace).await?;
    Ok(observed.status())
}
