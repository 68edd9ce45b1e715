//! Cluster state: one reflector (a watch-fed in-memory store) per kind the decisions read.
//!
//! Every decision reads from these stores, never from ad-hoc lists, so provisioning,
//! disruption and the lifecycle reconcilers see one consistent picture, and nothing is kept
//! that a restart cannot rebuild from the API. [`ClusterState::synced`] is Karpenter's
//! `Synced()`: no decision is taken until every store has listed its kind once (after a
//! watch desync the store re-lists and is unsynced until that list completes), so a NodeClaim
//! that exists but was not yet seen can never be launched for twice.

use std::borrow::Cow;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use karpenter_api::nodeclass::ClusterAPINodeClass;
use karpenter_api::{NodeClaim, NodePool};
use kcapi_snapshot::KeptPod;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Lookup, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use crate::lifetimes::{Change, PodLifetimes};
use crate::tasks::Tasks;

/// A store and whether its initial list has completed.
#[derive(Clone)]
pub struct Reflected<K: Lookup + Clone + 'static>
where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    pub store: Store<K>,
    synced: Arc<AtomicBool>,
    kind: &'static str,
}

impl<K: Lookup + Clone + 'static> Debug for Reflected<K>
where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reflected")
            .field("kind", &self.kind)
            .field("synced", &self.is_synced())
            .finish()
    }
}

impl<K: Lookup + Clone + 'static> Reflected<K>
where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    pub fn state(&self) -> Vec<Arc<K>> {
        self.store.state()
    }
}

/// A Pod as the pod store keeps it: converted once per watch event to
/// [`KeptPod`] (the core's pod and the few facts about the object that termination and events
/// read). At 150,000 pods the pod store is most of a controller's memory: 15.8 KB per
/// realistic pod as slimmed k8s-openapi objects (issue 18).
#[derive(Debug, Clone)]
pub struct StoredPod(pub KeptPod);

impl std::ops::Deref for StoredPod {
    type Target = KeptPod;
    fn deref(&self) -> &KeptPod {
        &self.0
    }
}

impl Lookup for StoredPod {
    type DynamicType = ();

    fn kind(_: &()) -> Cow<'_, str> {
        <Pod as Resource>::kind(&())
    }

    fn group(_: &()) -> Cow<'_, str> {
        <Pod as Resource>::group(&())
    }

    fn version(_: &()) -> Cow<'_, str> {
        <Pod as Resource>::version(&())
    }

    fn plural(_: &()) -> Cow<'_, str> {
        <Pod as Resource>::plural(&())
    }

    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(self.0.name()))
    }

    fn namespace(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(self.0.namespace()))
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        self.0.resource_version.as_deref().map(Cow::Borrowed)
    }

    fn uid(&self) -> Option<Cow<'_, str>> {
        self.0.uid.as_deref().map(Cow::Borrowed)
    }
}

/// What a store drops before keeping an object: for every kind the metadata nobody reads,
/// for Nodes everything no conversion or decision reads (see [`kcapi_snapshot::slim`]).
trait Slim {
    fn slim(&mut self);
}

impl Slim for Node {
    fn slim(&mut self) {
        kcapi_snapshot::slim::node(self);
    }
}

macro_rules! metadata_only {
    ($($kind:ty),*) => {$(
        impl Slim for $kind {
            fn slim(&mut self) {
                kcapi_snapshot::slim::metadata(self.meta_mut());
            }
        }
    )*};
}

metadata_only!(
    NodeClaim,
    NodePool,
    ClusterAPINodeClass,
    DaemonSet,
    PodDisruptionBudget,
    Namespace,
    PersistentVolumeClaim,
    PersistentVolume,
    StorageClass,
    CSINode
);

/// Starts a reflector for `api` that stores objects as they come, slimmed; `on_change` runs
/// for every object the watch delivers, with what happened to it.
fn reflect<K>(
    tasks: &Tasks,
    api: Api<K>,
    config: watcher::Config,
    kind: &'static str,
    on_change: impl Fn(&K, Change) + Send + 'static,
) -> Reflected<K>
where
    K: Resource + Slim + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone + Default,
{
    reflect_as(
        tasks,
        api,
        config,
        kind,
        |k: &K| {
            let mut k = k.clone();
            k.slim();
            k
        },
        on_change,
    )
}

/// Starts a reflector for `api` that stores `keep(object)`; `on_change` sees the object as
/// the API served it, after the store has applied the event (a loop it wakes reads the store).
fn reflect_as<K, S>(
    tasks: &Tasks,
    api: Api<K>,
    config: watcher::Config,
    kind: &'static str,
    keep: impl Fn(&K) -> S + Send + 'static,
    on_change: impl Fn(&K, Change) + Send + 'static,
) -> Reflected<S>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: std::hash::Hash + Eq + Clone + Default,
    S: Lookup + Clone + Send + Sync + 'static,
    S::DynamicType: std::hash::Hash + Eq + Clone + Default + Send + Sync,
{
    let (store, mut writer) = reflector::store::<S>();
    let synced = Arc::new(AtomicBool::new(false));
    let flag = synced.clone();
    let stream = watcher::watcher(api, config).default_backoff();
    tasks.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            let (kept, seen) = match ev {
                Ok(Event::Init) => {
                    flag.store(false, Ordering::Release);
                    (Event::Init, None)
                }
                Ok(Event::InitDone) => (Event::InitDone, None),
                Ok(Event::Apply(o)) => (Event::Apply(keep(&o)), Some((o, Change::Applied))),
                Ok(Event::Delete(o)) => (Event::Delete(keep(&o)), Some((o, Change::Deleted))),
                Ok(Event::InitApply(o)) => (Event::InitApply(keep(&o)), Some((o, Change::Listed))),
                Err(e) => {
                    tracing::warn!(kind, error = %e, "watch failed; retrying with back-off");
                    continue;
                }
            };
            writer.apply_watcher_event(&kept);
            if matches!(kept, Event::InitDone) {
                flag.store(true, Ordering::Release);
                tracing::debug!(kind, "synced");
            }
            if let Some((o, change)) = seen {
                on_change(&o, change);
            }
        }
    });
    Reflected {
        store,
        synced,
        kind,
    }
}

/// For kinds whose changes wake nothing.
fn ignore<K>(_: &K, _: Change) {}

/// Every store the controller decides from.
#[derive(Clone, Debug)]
pub struct ClusterState {
    pub pods: Reflected<StoredPod>,
    pub nodes: Reflected<Node>,
    pub nodeclaims: Reflected<NodeClaim>,
    pub nodepools: Reflected<NodePool>,
    pub nodeclasses: Reflected<ClusterAPINodeClass>,
    pub daemonsets: Reflected<DaemonSet>,
    pub pdbs: Reflected<PodDisruptionBudget>,
    pub namespaces: Reflected<Namespace>,
    pub pvcs: Reflected<PersistentVolumeClaim>,
    pub pvs: Reflected<PersistentVolume>,
    pub storageclasses: Reflected<StorageClass>,
    pub csinodes: Reflected<CSINode>,
    /// Woken when a pod the kube-scheduler gave up on appears or changes.
    pub pending_pods: Arc<Notify>,
    /// Woken when a NodeClaim or Node changes (the lifecycle and disruption wait on it).
    pub nodes_changed: Arc<Notify>,
    /// How long recent pods ran before they ended on their own.
    pub lifetimes: PodLifetimes,
}

impl ClusterState {
    /// Starts every reflector on the workload cluster.
    pub fn start(client: &Client, tasks: &Tasks) -> Self {
        let tasks = tasks.clone();
        let pending_pods = Arc::new(Notify::new());
        let nodes_changed = Arc::new(Notify::new());
        let cfg = watcher::Config::default;
        let nc = nodes_changed.clone();
        let nodes = reflect(
            &tasks,
            Api::<Node>::all(client.clone()),
            cfg(),
            "Node",
            move |_, _| nc.notify_waiters(),
        );
        let pp = pending_pods.clone();
        let lifetimes = PodLifetimes::default();
        let (ended, node_store) = (lifetimes.clone(), nodes.store.clone());
        let pods = reflect_as(
            &tasks,
            Api::<Pod>::all(client.clone()),
            cfg(),
            "Pod",
            |p: &Pod| StoredPod(KeptPod::new(p)),
            move |p: &Pod, change| {
                if change != Change::Deleted && kcapi_snapshot::pod::is_provisionable(p) {
                    pp.notify_one();
                }
                let node = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .filter(|n| !n.is_empty())
                    .and_then(|n| node_store.get(&reflector::ObjectRef::new(n)));
                ended.observe(p, change, node.as_deref(), crate::context::Context::now());
            },
        );
        let nc = nodes_changed.clone();
        let nodeclaims = reflect(
            &tasks,
            Api::<NodeClaim>::all(client.clone()),
            cfg(),
            "NodeClaim",
            move |_, _| nc.notify_waiters(),
        );
        ClusterState {
            pods,
            nodes,
            nodeclaims,
            nodepools: reflect(&tasks, Api::all(client.clone()), cfg(), "NodePool", ignore),
            nodeclasses: reflect(
                &tasks,
                Api::all(client.clone()),
                cfg(),
                "ClusterAPINodeClass",
                ignore,
            ),
            daemonsets: reflect(&tasks, Api::all(client.clone()), cfg(), "DaemonSet", ignore),
            pdbs: reflect(
                &tasks,
                Api::all(client.clone()),
                cfg(),
                "PodDisruptionBudget",
                ignore,
            ),
            namespaces: reflect(&tasks, Api::all(client.clone()), cfg(), "Namespace", ignore),
            pvcs: reflect(
                &tasks,
                Api::all(client.clone()),
                cfg(),
                "PersistentVolumeClaim",
                ignore,
            ),
            pvs: reflect(
                &tasks,
                Api::all(client.clone()),
                cfg(),
                "PersistentVolume",
                ignore,
            ),
            storageclasses: reflect(
                &tasks,
                Api::all(client.clone()),
                cfg(),
                "StorageClass",
                ignore,
            ),
            csinodes: reflect(&tasks, Api::all(client.clone()), cfg(), "CSINode", ignore),
            pending_pods,
            nodes_changed,
            lifetimes,
        }
    }

    /// Kinds whose initial list has not completed.
    pub fn unsynced(&self) -> Vec<&'static str> {
        let all = [
            (self.pods.kind, self.pods.is_synced()),
            (self.nodes.kind, self.nodes.is_synced()),
            (self.nodeclaims.kind, self.nodeclaims.is_synced()),
            (self.nodepools.kind, self.nodepools.is_synced()),
            (self.nodeclasses.kind, self.nodeclasses.is_synced()),
            (self.daemonsets.kind, self.daemonsets.is_synced()),
            (self.pdbs.kind, self.pdbs.is_synced()),
            (self.namespaces.kind, self.namespaces.is_synced()),
            (self.pvcs.kind, self.pvcs.is_synced()),
            (self.pvs.kind, self.pvs.is_synced()),
            (self.storageclasses.kind, self.storageclasses.is_synced()),
            (self.csinodes.kind, self.csinodes.is_synced()),
        ];
        all.iter().filter(|(_, s)| !s).map(|(k, _)| *k).collect()
    }

    /// Karpenter's `Synced()`: every store has listed its kind.
    pub fn synced(&self) -> bool {
        self.unsynced().is_empty()
    }

    /// Waits until synced, checking every 100 ms, at most `timeout`.
    pub async fn wait_synced(&self, timeout: std::time::Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while !self.synced() {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        true
    }

    /// The NodeClaim by name, from the store.
    pub fn nodeclaim(&self, name: &str) -> Option<Arc<NodeClaim>> {
        self.nodeclaims
            .state()
            .into_iter()
            .find(|c| c.name_any() == name)
    }

    /// The Node with this providerID.
    pub fn node_by_provider_id(&self, provider_id: &str) -> Option<Arc<Node>> {
        self.nodes
            .state()
            .into_iter()
            .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id))
    }

    /// The Node by name.
    pub fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes
            .state()
            .into_iter()
            .find(|n| n.name_any() == name)
    }

    /// Pods bound to a node.
    pub fn pods_on(&self, node: &str) -> Vec<Arc<StoredPod>> {
        self.pods
            .store
            .state_filter(|p| p.node_name() == Some(node))
    }
}
