//! One read of the live cluster, turned into the core's snapshot exactly as the controller
//! does it: the same objects, the controller's catalog code (`CatalogCache` over its cloud
//! provider) and the one shared conversion (`kcapi_snapshot::build`). `snapshot`, `explain`
//! and `status` (CLI and UI) all start here, so none of them can disagree with the
//! controller about what the cluster looks like.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1 as appsv1;
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::api::policy::v1 as policyv1;
use k8s_openapi::api::storage::v1 as storagev1;
use karpenter_api::{ClusterAPINodeClass, NodeClaim, NodePool};
use karpenter_capi_controller::catalogs::{CatalogCache, Catalogs};
use karpenter_capi_controller::cloudprovider::CloudProvider;
use kcapi_snapshot::{Built, Objects, VolumeIndex};
use kube::api::ListParams;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::{Clusters, Error};

/// Every object the snapshot is built from, read once.
#[derive(Debug, Clone, Default)]
pub struct Live {
    /// Seconds since the epoch at the read.
    pub now: i64,
    pub pods: Vec<corev1::Pod>,
    pub nodes: Vec<corev1::Node>,
    pub nodeclaims: Vec<NodeClaim>,
    pub nodepools: Vec<NodePool>,
    pub nodeclasses: Vec<ClusterAPINodeClass>,
    pub daemonsets: Vec<appsv1::DaemonSet>,
    pub pdbs: Vec<policyv1::PodDisruptionBudget>,
    pub namespaces: Vec<corev1::Namespace>,
    pub csinodes: Vec<storagev1::CSINode>,
    pub pvcs: Vec<corev1::PersistentVolumeClaim>,
    pub pvs: Vec<corev1::PersistentVolume>,
    pub storageclasses: Vec<storagev1::StorageClass>,
    /// The instance types per NodeClass, from the controller's catalog code.
    pub catalogs: Catalogs,
    /// What could not be read (a missing CRD, for one), said so the user knows what is
    /// absent from the answer.
    pub notes: Vec<String>,
}

/// Lists every object of a kind (namespaced or cluster-scoped); a kind the server does not
/// serve (CRD not installed) becomes an empty list and a note.
async fn list<K>(client: &Client, what: &str, notes: &mut Vec<String>) -> Result<Vec<K>, Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    match Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(l) => Ok(l.items),
        Err(e) if karpenter_capi_controller::error::is_not_found(&e) => {
            notes.push(format!("{what}: not served by this cluster (CRD missing?)"));
            Ok(Vec::new())
        }
        Err(e) => Err(e.into()),
    }
}

/// Reads the workload cluster's objects and the catalogs of every NodeClass.
pub async fn read(clusters: &Clusters) -> Result<Live, Error> {
    let c = &clusters.workload;
    let mut notes = Vec::new();
    let now = CloudProvider::now();
    let mut live = Live {
        now,
        pods: list(c, "Pods", &mut notes).await?,
        nodes: list(c, "Nodes", &mut notes).await?,
        nodeclaims: list(c, "NodeClaims", &mut notes).await?,
        nodepools: list(c, "NodePools", &mut notes).await?,
        nodeclasses: list(c, "ClusterAPINodeClasses", &mut notes).await?,
        daemonsets: list(c, "DaemonSets", &mut notes).await?,
        pdbs: list(c, "PodDisruptionBudgets", &mut notes).await?,
        namespaces: list(c, "Namespaces", &mut notes).await?,
        csinodes: list(c, "CSINodes", &mut notes).await?,
        pvcs: list(c, "PersistentVolumeClaims", &mut notes).await?,
        pvs: list(c, "PersistentVolumes", &mut notes).await?,
        storageclasses: list(c, "StorageClasses", &mut notes).await?,
        ..Live::default()
    };
    let ncs: Vec<_> = live
        .nodeclasses
        .iter()
        .cloned()
        .map(std::sync::Arc::new)
        .collect();
    live.catalogs = CatalogCache::new(Duration::ZERO)
        .get(&clusters.provider(), &ncs, now)
        .await;
    for (nc, e) in &live.catalogs.errors {
        notes.push(format!(
            "ClusterAPINodeClass {nc}: its catalog could not be read: {e}"
        ));
    }
    live.notes = notes;
    Ok(live)
}

impl Live {
    /// The core's snapshot. `all_pending`: every pending pod (explain, snapshot), not only
    /// those the kube-scheduler has declared unschedulable (what the controller acts on).
    pub fn build(&self, all_pending: bool) -> Built {
        let nodepools: Vec<std::sync::Arc<NodePool>> = self
            .nodepools
            .iter()
            .cloned()
            .map(std::sync::Arc::new)
            .collect();
        let pods: Vec<kcapi_snapshot::KeptPod> =
            self.pods.iter().map(kcapi_snapshot::KeptPod::new).collect();
        let objects = Objects {
            now: self.now,
            pods: pods.iter().collect(),
            nodes: self.nodes.iter().collect(),
            nodeclaims: self.nodeclaims.iter().collect(),
            nodepools: self.nodepools.iter().collect(),
            daemonsets: self.daemonsets.iter().collect(),
            pdbs: self.pdbs.iter().collect(),
            namespaces: self.namespaces.iter().collect(),
            csinodes: self.csinodes.iter().collect(),
            volumes: VolumeIndex::new(
                self.pvcs.iter().cloned(),
                self.pvs.iter().cloned(),
                self.storageclasses.iter().cloned(),
            ),
            instance_types: self.catalogs.instance_types(),
            nodepool_instance_types: self.catalogs.nodepool_types(&nodepools),
            all_pending,
        };
        kcapi_snapshot::build(&objects)
    }

    /// Catalog problems per NodeClass, as text.
    pub fn catalog_problems(&self) -> BTreeMap<String, Vec<String>> {
        self.catalogs
            .by_nodeclass
            .iter()
            .map(|(nc, c)| {
                (
                    nc.clone(),
                    c.problems.iter().map(ToString::to_string).collect(),
                )
            })
            .collect()
    }
}
