//! The CAPI cloud provider: applies the adapter's launch and delete plans to the API.
//!
//! # Launch
//! [`CloudProvider::launch`] records the chosen scalable resource on the NodeClaim
//! (`karpenter.cluster.x-k8s.io/scalable-resource`) *before* anything else, then joins the
//! resource's launch batch (closed after 100 ms without a new claim or 1 s after the first).
//! The batch runs under the resource's lock: read the resource (its resourceVersion), its
//! Machines and every NodeClaim; compute [`capi_adapter::plan::plan_launch`]; write replicas
//! through the scale subresource with that resourceVersion (409: re-read, recompute); label
//! Machines for claims (merge patch carrying the Machine's resourceVersion) and annotate the
//! claims (`cluster.x-k8s.io/machine`). Until CAPI has created the Machines the batch polls,
//! re-running the same plan, which is idempotent, so polling, retries, a second replica of
//! the process after a crash, or a restart at any point never raise replicas twice.
//!
//! # Delete
//! [`CloudProvider::delete_machine`] runs [`capi_adapter::plan::plan_delete`] under the lock:
//! annotate the Machine (`cluster.x-k8s.io/delete-machine` or
//! `machine.openshift.io/delete-machine`, plus our marker), lower replicas with a
//! resourceVersion precondition, and remove the annotations again if that write fails for
//! any reason but a conflict.
//!
//! Nothing here is needed after a restart except what is in the API: the locks and batches
//! are per process, the back-off cache rebuilds from failed Machines, the providerID index
//! from a watch.

mod apis;
mod backoff;
mod convert;
mod index;
mod locks;
mod status;
mod templates;

use std::collections::{BTreeMap, HashMap};

use crate::tasks::Tasks;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capi_adapter::capacity_errors::CapacityErrors;
use capi_adapter::drift::{DriftReason, Revisions};
use capi_adapter::failures::{LaunchFailure, launch_failures};
use capi_adapter::objects::capi::CapiVersion;
use capi_adapter::plan::{
    self, ClaimView, Deferred, DeleteInput, DeleteOutcome, LaunchInput, LaunchPlan, NoOffering,
};
use capi_adapter::resource::binding_label_value;
use capi_adapter::{
    Catalog, MachineApi, MachineKey, MachineView, Problem, ResourceId, ResourceKind,
    ScalableResource, SizeLimits, keys,
};
use futures::future::BoxFuture;
use karpenter_api::NodeClaim;
use karpenter_api::nodeclass::ClusterAPINodeClass;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::oneshot;
use tokio::time::Instant;

pub use backoff::BackoffCache;
pub use convert::{nodeclass_settings, requirement};
pub use index::{IndexWatches, IndexedMachine, ProviderIdIndex};
pub use locks::ResourceLocks;
pub use status::nodeclass_status;

use apis::{Apis, WriteError, is_conflict, is_not_found};

/// Errors of the cloud provider. Cloneable, because one batch answers many callers.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(Arc<kube::Error>),
    #[error("scalable resource {0} not found")]
    ResourceNotFound(ResourceId),
    #[error("NodeClaim {0} not found")]
    NodeClaimNotFound(String),
    #[error("Machine {0} not found")]
    MachineNotFound(MachineKey),
    #[error("Machine {0} belongs to no scalable resource we know")]
    MachineWithoutResource(MachineKey),
    #[error(transparent)]
    Problem(Arc<Problem>),
    #[error(transparent)]
    NoOffering(#[from] NoOffering),
    #[error("gave up on {0} after {1} conflicting writes")]
    TooManyConflicts(ResourceId, u32),
    #[error("launch batch for {0} ended without an answer")]
    BatchLost(ResourceId),
    #[error("Machine {0} does not point back at NodeClaim {1}; it is left alone")]
    MachineNotBound(MachineKey, String),
}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        Error::Kube(Arc::new(e))
    }
}

/// Tunables; [`Config::default`] has upstream's 1 s batch maximum and a shorter idle window.
#[derive(Debug, Clone)]
pub struct Config {
    /// The `cluster.x-k8s.io` version to talk to (v1beta2 on current CAPI).
    pub capi_version: CapiVersion,
    /// A launch batch closes after this long without a new claim... Each launch round
    /// plans from every claim targeting the resource as the API has them, not only from its
    /// batch, so a short window costs API reads, never a wrong count; a long one holds a lone
    /// claim's scale write back (it was 100 ms, a third of a lone pod's time to its node's
    /// scale write).
    pub batch_idle: Duration,
    /// ...or this long after its first claim.
    pub batch_max: Duration,
    /// How long a launch waits for CAPI to create Machines before answering
    /// [`Launch::Waiting`] (the caller retries; retrying is always safe).
    pub bind_wait: Duration,
    /// Pause between re-plans while waiting.
    pub poll_interval: Duration,
    /// Attempts of one read-compute-write round before giving up on conflicts.
    pub conflict_retries: u32,
    /// Back-off window after a launch failure, seconds...
    pub backoff_window_secs: i64,
    /// ...doubling with each further failed Machine of the resource, up to this.
    pub backoff_max_window_secs: i64,
    /// A Machine without providerID this long after creation counts as a failed launch.
    pub provider_id_timeout_secs: i64,
    /// Infrastructure errors that fail a launch at once, before the providerID timeout: the
    /// cloud out of capacity for the shape ([`capi_adapter::capacity_errors`]).
    pub capacity_errors: CapacityErrors,
    /// The management-cluster namespaces holding scalable resources; `None`: all of them.
    /// An identity granted Roles in some namespaces (the chart's `management.namespaces`,
    /// OpenShift's `openshift-machine-api`, HyperShift's control-plane namespace) cannot list
    /// across the cluster.
    pub namespaces: Option<Vec<String>>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            capi_version: CapiVersion::V1Beta2,
            batch_idle: Duration::from_millis(20),
            batch_max: Duration::from_secs(1),
            bind_wait: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            conflict_retries: 8,
            backoff_window_secs: 300,
            backoff_max_window_secs: 1800,
            provider_id_timeout_secs: 600,
            capacity_errors: CapacityErrors::default(),
            namespaces: None,
        }
    }
}

/// An async callback the tests put between reads and writes.
pub type Hook = Arc<dyn Fn(ResourceId, i32) -> BoxFuture<'static, ()> + Send + Sync>;

/// Test seams. `before_scale_write` runs between reading the resource and writing its
/// replicas (the conflict tests change replicas there, as another actor would);
/// `after_scale_write` runs right after a successful replica write, before any binding (the
/// restart tests stall there and drop the task to simulate a crash).
#[derive(Clone, Default)]
pub struct Hooks {
    pub before_scale_write: Option<Hook>,
    pub after_scale_write: Option<Hook>,
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks")
            .field("before_scale_write", &self.before_scale_write.is_some())
            .field("after_scale_write", &self.after_scale_write.is_some())
            .finish()
    }
}

/// What a launch achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// Bound to this Machine; `provider_id` once the Machine has one.
    Bound {
        machine: MachineKey,
        provider_id: Option<String>,
    },
    /// Replicas cover the claim but CAPI has not created its Machine yet: call again.
    Waiting,
    /// The resource is at its max size.
    AtMaxSize,
    /// Replicas are not raised now (CAPI is removing Machines); call again.
    Deferred(Deferred),
}

type Waiters = Vec<(String, oneshot::Sender<Result<Launch, Error>>)>;

#[derive(Debug)]
struct PendingBatch {
    waiters: Waiters,
    first: Instant,
    last: Instant,
}

struct Inner {
    apis: Apis,
    workload: Client,
    config: Config,
    locks: ResourceLocks,
    batches: Mutex<HashMap<ResourceId, PendingBatch>>,
    backoff: BackoffCache,
    hooks: Hooks,
    tasks: Tasks,
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CloudProvider")
            .field("apis", &self.apis)
            .field("config", &self.config)
            .field("hooks", &self.hooks)
            .finish_non_exhaustive()
    }
}

/// The CAPI / OpenShift cloud provider. Cheap to clone.
#[derive(Debug, Clone)]
pub struct CloudProvider {
    inner: Arc<Inner>,
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl CloudProvider {
    /// `management` holds the Machines and scalable resources, `workload` the NodeClaims
    /// (the same client when both live in one cluster).
    pub fn new(management: Client, workload: Client, config: Config) -> Self {
        Self::with_hooks(management, workload, config, Hooks::default())
    }

    #[doc(hidden)]
    pub fn with_hooks(management: Client, workload: Client, config: Config, hooks: Hooks) -> Self {
        CloudProvider {
            inner: Arc::new(Inner {
                apis: Apis {
                    client: management,
                    version: config.capi_version,
                    namespaces: config.namespaces.clone(),
                },
                workload,
                backoff: BackoffCache::new(
                    config.backoff_window_secs,
                    config.backoff_max_window_secs,
                ),
                config,
                locks: ResourceLocks::default(),
                tasks: Tasks::default(),
                batches: Mutex::new(HashMap::new()),
                hooks,
            }),
        }
    }

    /// The tasks this provider spawned (launch batches); the controller spawns its own
    /// here too, so that one `abort_all` stops everything.
    pub fn tasks(&self) -> &Tasks {
        &self.inner.tasks
    }

    pub fn backoff(&self) -> &BackoffCache {
        &self.inner.backoff
    }

    fn claims_api(&self) -> Api<NodeClaim> {
        Api::all(self.inner.workload.clone())
    }

    /// Every scalable resource of the given kinds, all namespaces.
    pub async fn resources(&self, kinds: &[ResourceKind]) -> Result<Vec<ScalableResource>, Error> {
        self.inner.apis.list_resources(kinds).await
    }

    /// Instance types for a NodeClass: its member resources, their templates, the back-off;
    /// problems (bad annotations, missing templates, bad overhead) come back in the catalog.
    pub async fn catalog(
        &self,
        nodeclass: &ClusterAPINodeClass,
        now: i64,
    ) -> Result<Catalog, Error> {
        let (settings, mut problems) = nodeclass_settings(nodeclass);
        let kinds = settings
            .kinds
            .clone()
            .unwrap_or_else(|| ResourceKind::ALL.to_vec());
        let resources = self.resources(&kinds).await?;
        let members: Vec<ScalableResource> = resources
            .into_iter()
            .filter(|r| settings.selects(r).unwrap_or(true))
            .collect();
        let templates = templates::fetch(&self.inner.apis.client, &members).await;
        let nodes =
            templates::running_nodes(&self.inner.apis, &self.inner.workload, &members, &templates)
                .await;
        let mut catalog = capi_adapter::instance_types(
            &members,
            &templates,
            &nodes,
            &settings,
            now,
            &self.inner.backoff.snapshot(now),
        );
        problems.append(&mut catalog.problems);
        catalog.problems = problems;
        Ok(catalog)
    }

    /// Launches a NodeClaim on the cheapest resource of `catalog` meeting its requirements,
    /// or on the one recorded on it before (a restart never moves a claim).
    pub async fn launch_claim(
        &self,
        claim: &NodeClaim,
        catalog: &Catalog,
    ) -> Result<Launch, Error> {
        let view = ClaimView::from_meta(&claim.metadata);
        match view.target {
            // Recorded (at creation, or by an earlier launch): it never changes, so there
            // is nothing to read or write before joining the batch.
            Some(t) => {
                let rx = self.submit(&t, &view.name);
                rx.await.unwrap_or(Err(Error::BatchLost(t)))
            }
            None => {
                let reqs: Vec<provisioner_core::Requirement> =
                    claim.spec.requirements.iter().map(requirement).collect();
                let target = plan::choose_resource(catalog, &reqs)?.resource.clone();
                self.launch(&view.name, &target).await
            }
        }
    }

    /// Launches the NodeClaim `claim` on `target`: records the target on the claim (unless
    /// one is already recorded, which then wins), then joins the resource's batch.
    pub async fn launch(&self, claim: &str, target: &ResourceId) -> Result<Launch, Error> {
        let api = self.claims_api();
        let nc = api
            .get_opt(claim)
            .await?
            .ok_or_else(|| Error::NodeClaimNotFound(claim.to_string()))?;
        let view = ClaimView::from_meta(&nc.metadata);
        let target = match &view.target {
            Some(t) => t.clone(),
            None => {
                let patch = json!({"metadata": {"annotations": {
                    keys::ours::LAUNCH_TARGET: target.to_string()
                }}});
                api.patch(claim, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                target.clone()
            }
        };
        let rx = self.submit(&target, claim);
        rx.await.unwrap_or(Err(Error::BatchLost(target)))
    }

    /// The Machine and providerID of a launched claim, from its annotation.
    pub async fn provider_id(
        &self,
        claim: &str,
    ) -> Result<Option<(MachineKey, Option<String>)>, Error> {
        let Some(nc) = self.claims_api().get_opt(claim).await? else {
            return Err(Error::NodeClaimNotFound(claim.to_string()));
        };
        let view = ClaimView::from_meta(&nc.metadata);
        let (Some(mk), Some(target)) = (view.machine, view.target) else {
            return Ok(None);
        };
        let m = self
            .inner
            .apis
            .get_machine(target.kind.machine_api(), &mk)
            .await?;
        Ok(Some((mk, m.and_then(|m| m.provider_id))))
    }

    fn submit(
        &self,
        resource: &ResourceId,
        claim: &str,
    ) -> oneshot::Receiver<Result<Launch, Error>> {
        let (tx, rx) = oneshot::channel();
        let now = Instant::now();
        let mut batches = self.inner.batches.lock().unwrap_or_else(|e| e.into_inner());
        match batches.get_mut(resource) {
            Some(b) => {
                b.waiters.push((claim.to_string(), tx));
                b.last = now;
            }
            None => {
                batches.insert(
                    resource.clone(),
                    PendingBatch {
                        waiters: vec![(claim.to_string(), tx)],
                        first: now,
                        last: now,
                    },
                );
                let me = self.clone();
                let resource = resource.clone();
                self.inner
                    .tasks
                    .spawn(async move { me.run_batch(resource).await });
            }
        }
        rx
    }

    /// Waits for the batch window to close, then executes it.
    async fn run_batch(&self, resource: ResourceId) {
        let cfg = &self.inner.config;
        let waiters = loop {
            let deadline = {
                let batches = self.inner.batches.lock().unwrap_or_else(|e| e.into_inner());
                let Some(b) = batches.get(&resource) else {
                    return;
                };
                (b.last + cfg.batch_idle).min(b.first + cfg.batch_max)
            };
            tokio::time::sleep_until(deadline).await;
            let mut batches = self.inner.batches.lock().unwrap_or_else(|e| e.into_inner());
            let Some(b) = batches.get(&resource) else {
                return;
            };
            let close = (b.last + cfg.batch_idle).min(b.first + cfg.batch_max);
            if Instant::now() >= close {
                if let Some(b) = batches.remove(&resource) {
                    break b.waiters;
                }
                return;
            }
        };
        let claims: Vec<String> = waiters.iter().map(|(c, _)| c.clone()).collect();
        let results = self.execute_launch(&resource, &claims).await;
        for (claim, tx) in waiters {
            let r = match &results {
                Ok(map) => map.get(&claim).cloned().unwrap_or(Ok(Launch::Waiting)),
                Err(e) => Err(e.clone()),
            };
            let _ = tx.send(r);
        }
    }

    /// Re-plans until every claim of the batch has an answer other than "waiting", or the
    /// bind wait is over.
    async fn execute_launch(
        &self,
        resource: &ResourceId,
        claims: &[String],
    ) -> Result<HashMap<String, Result<Launch, Error>>, Error> {
        let deadline = Instant::now() + self.inner.config.bind_wait;
        loop {
            let (plan, machines) = self.reconcile_launch(resource).await?;
            let mut out = HashMap::new();
            let mut waiting = false;
            for claim in claims {
                let answer = if let Some(mk) = plan.machine_for(claim) {
                    let pid = machines
                        .iter()
                        .find(|m| m.key() == *mk)
                        .and_then(|m| m.provider_id.clone());
                    Launch::Bound {
                        machine: mk.clone(),
                        provider_id: pid,
                    }
                } else if plan.at_max.contains(claim) {
                    Launch::AtMaxSize
                } else if let Some(d) = &plan.deferred {
                    waiting = true;
                    Launch::Deferred(d.clone())
                } else if plan.lost.contains_key(claim) {
                    // The recorded Machine is gone: garbage collection deletes the claim.
                    Launch::Bound {
                        machine: plan.lost[claim].clone(),
                        provider_id: None,
                    }
                } else {
                    waiting = true;
                    Launch::Waiting
                };
                out.insert(claim.clone(), Ok(answer));
            }
            if !waiting || Instant::now() + self.inner.config.poll_interval > deadline {
                return Ok(out);
            }
            tokio::time::sleep(self.inner.config.poll_interval).await;
        }
    }

    /// One idempotent launch round for a resource under its lock: read, plan, write. Safe to
    /// call at any time (the controller calls it after a restart for every resource with
    /// targeted claims); returns the plan and the Machines it was computed from (after its
    /// bindings).
    pub async fn reconcile_launch(
        &self,
        resource: &ResourceId,
    ) -> Result<(LaunchPlan, Vec<MachineView>), Error> {
        let _guard = self.inner.locks.lock(resource).await;
        let apis = &self.inner.apis;
        for _ in 0..self.inner.config.conflict_retries {
            let (res, rv) = apis
                .get_resource(resource)
                .await?
                .ok_or_else(|| Error::ResourceNotFound(resource.clone()))?;
            let limits = SizeLimits::of(&res).map_err(|p| Error::Problem(Arc::new(p)))?;
            let machines = apis.list_machines(resource).await?;
            let claims: Vec<ClaimView> = self
                .claims_api()
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .map(|c| ClaimView::from_meta(&c.metadata))
                .collect();
            let plan = plan::plan_launch(LaunchInput {
                resource,
                replicas: res.replicas,
                limits,
                machines: &machines,
                claims: &claims,
            });
            if let Some(to) = plan.scale_to {
                if let Some(hook) = &self.inner.hooks.before_scale_write {
                    hook(resource.clone(), to).await;
                }
                match apis.write_replicas(resource, &rv, to).await {
                    Ok(()) => {
                        tracing::info!(%resource, from = res.replicas, to, counts = ?plan.counts, "raised replicas");
                    }
                    Err(WriteError::Conflict) => continue,
                    Err(WriteError::Other(e)) => return Err(e),
                }
                if let Some(hook) = &self.inner.hooks.after_scale_write {
                    hook(resource.clone(), to).await;
                }
            }
            let template_hash = res.template_hash();
            let mut replan = false;
            for b in plan.complete.iter().chain(&plan.bind) {
                match self.bind(resource, b, &template_hash).await {
                    Ok(()) => {}
                    Err(BindError::Conflict) => replan = true,
                    Err(BindError::Other(e)) => return Err(e),
                }
            }
            if replan {
                continue;
            }
            let machines = if plan.bind.is_empty() && plan.complete.is_empty() {
                machines
            } else {
                apis.list_machines(resource).await?
            };
            return Ok((plan, machines));
        }
        Err(Error::TooManyConflicts(
            resource.clone(),
            self.inner.config.conflict_retries,
        ))
    }

    /// Label the Machine (guarded by its resourceVersion), then annotate the claim. If the
    /// claim is gone, take the label back so the Machine can serve another claim.
    async fn bind(
        &self,
        resource: &ResourceId,
        b: &plan::BindAction,
        template_hash: &str,
    ) -> Result<(), BindError> {
        let api = resource.kind.machine_api();
        let mut meta = json!({
            "labels": {keys::ours::NODECLAIM_LABEL: binding_label_value(&b.claim)},
            "annotations": {
                keys::ours::NODECLAIM_ANNOTATION: b.claim,
                keys::ours::TEMPLATE_HASH: template_hash,
            },
        });
        if let Some(rv) = &b.machine_resource_version {
            meta["resourceVersion"] = json!(rv);
        }
        match self
            .inner
            .apis
            .patch_machine(api, &b.machine, &json!({ "metadata": meta }))
            .await
        {
            Ok(()) => {}
            Err(e) if is_conflict(&e) || is_not_found(&e) => return Err(BindError::Conflict),
            Err(e) => return Err(BindError::Other(e.into())),
        }
        let patch = json!({"metadata": {"annotations": {
            keys::capi::MACHINE_ANNOTATION: b.machine.to_string()
        }}});
        match self
            .claims_api()
            .patch(&b.claim, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(claim = %b.claim, machine = %b.machine, "bound");
                Ok(())
            }
            Err(e) if is_not_found(&e) => {
                let undo = json!({"metadata": {
                    "labels": {keys::ours::NODECLAIM_LABEL: null},
                    "annotations": {keys::ours::NODECLAIM_ANNOTATION: null, keys::ours::TEMPLATE_HASH: null},
                }});
                self.inner
                    .apis
                    .patch_machine(api, &b.machine, &undo)
                    .await
                    .map_err(|e| BindError::Other(e.into()))?;
                Err(BindError::Conflict)
            }
            Err(e) => Err(BindError::Other(e.into())),
        }
    }

    /// The scalable resource a Machine belongs to, from its owner labels.
    pub async fn resource_of(
        &self,
        api: MachineApi,
        machine: &MachineKey,
    ) -> Result<(ResourceId, MachineView), Error> {
        let m = self
            .inner
            .apis
            .get_machine(api, machine)
            .await?
            .ok_or_else(|| Error::MachineNotFound(machine.clone()))?;
        let candidates: Vec<ResourceKind> = match api {
            MachineApi::Capi => vec![ResourceKind::MachineDeployment, ResourceKind::MachineSet],
            MachineApi::OpenShift => vec![ResourceKind::OpenShiftMachineSet],
        };
        for kind in candidates {
            if let Some(owner) = m.labels.get(kind.machine_owner_label()) {
                let id = ResourceId::new(kind, machine.namespace.clone(), owner.clone());
                if self.inner.apis.get_resource(&id).await?.is_some() {
                    return Ok((id, m));
                }
            }
        }
        Err(Error::MachineWithoutResource(machine.clone()))
    }

    /// The Machines of `resources` that no NodeClaim is bound to, by providerID (Machines
    /// without one yet are left out: no Node can name them).
    pub async fn unbound_machines<'a>(
        &self,
        resources: impl IntoIterator<Item = &'a ResourceId>,
    ) -> Result<BTreeMap<String, (ResourceId, MachineView)>, Error> {
        let mut out = BTreeMap::new();
        for id in resources {
            for m in self.inner.apis.list_machines(id).await? {
                let bound = m.labels.contains_key(keys::ours::NODECLAIM_LABEL)
                    || m.annotations.contains_key(keys::ours::NODECLAIM_ANNOTATION);
                if let (false, Some(pid)) = (bound, m.provider_id.clone()) {
                    out.insert(pid, (id.clone(), m));
                }
            }
        }
        Ok(out)
    }

    /// Takes `karpenter.sh/unregistered` off a Machine before it is taken off the Machine's
    /// Node. OpenShift's nodelink controller copies a Machine's `spec.taints` onto its Node
    /// on every Node update, so a taint that came from the MachineSet template would come
    /// back minutes after we removed it, and evict every pod that does not tolerate it. CAPI
    /// Machines carry no such list (the taint comes from the bootstrap config, once):
    /// nothing to do. `Ok(true)` when a taint was removed.
    pub async fn release_machine_taint(
        &self,
        api: MachineApi,
        machine: &MachineKey,
    ) -> Result<bool, Error> {
        match api {
            MachineApi::Capi => Ok(false),
            MachineApi::OpenShift => Ok(self
                .inner
                .apis
                .drop_openshift_machine_taint(
                    machine,
                    karpenter_api::wellknown::UNREGISTERED_TAINT_KEY,
                )
                .await?),
        }
    }

    /// Deletes the Machine bound to a NodeClaim (see [`Self::delete_machine`]).
    ///
    /// The binding is checked in both directions first: the claim names the Machine *and*
    /// the Machine's label names the claim. A claim whose annotation points at a Machine
    /// that serves another claim (or none: edited by hand, or restored from a backup) never
    /// deletes it; it answers [`Error::MachineNotBound`] and the Machine stays.
    pub async fn delete_claim(&self, claim: &str) -> Result<DeleteOutcome, Error> {
        let Some(nc) = self.claims_api().get_opt(claim).await? else {
            return Err(Error::NodeClaimNotFound(claim.to_string()));
        };
        let view = ClaimView::from_meta(&nc.metadata);
        let api = view
            .target
            .as_ref()
            .map_or(MachineApi::Capi, |t| t.kind.machine_api());
        let Some(mk) = view.machine else {
            return Ok(DeleteOutcome::Gone);
        };
        let Some(machine) = self.inner.apis.get_machine(api, &mk).await? else {
            return Ok(DeleteOutcome::Gone);
        };
        if !points_back(&machine, claim) {
            return Err(Error::MachineNotBound(mk, claim.to_string()));
        }
        self.delete_machine(api, &mk).await
    }

    /// The Machine a NodeClaim is bound to and, when it still exists and points back at the
    /// claim, its view (`None` inside: the Machine is gone or serves another claim).
    /// `Ok(None)`: the claim is not bound (yet).
    pub async fn bound_machine(
        &self,
        claim: &NodeClaim,
    ) -> Result<Option<(MachineKey, Option<MachineView>)>, Error> {
        let view = ClaimView::from_meta(&claim.metadata);
        let (Some(mk), Some(target)) = (view.machine, view.target) else {
            return Ok(None);
        };
        let m = self
            .inner
            .apis
            .get_machine(target.kind.machine_api(), &mk)
            .await?
            .filter(|m| points_back(m, &view.name));
        Ok(Some((mk, m)))
    }

    /// Asks CAPI to delete one Machine: annotate it, lower replicas (never below min size,
    /// never mid-rollout). Idempotent: call again until it answers `Deleting` or `Gone`.
    pub async fn delete_machine(
        &self,
        api: MachineApi,
        machine: &MachineKey,
    ) -> Result<DeleteOutcome, Error> {
        let (resource, _) = match self.resource_of(api, machine).await {
            Ok(found) => found,
            Err(Error::MachineNotFound(_)) => return Ok(DeleteOutcome::Gone),
            Err(e) => return Err(e),
        };
        let (_, outcome) = self
            .reconcile_delete(&resource, std::slice::from_ref(machine))
            .await?;
        Ok(outcome.get(machine).cloned().unwrap_or(DeleteOutcome::Gone))
    }

    /// One idempotent delete round for a resource under its lock. With no targets it only
    /// completes or rolls back earlier requests (after a restart).
    pub async fn reconcile_delete(
        &self,
        resource: &ResourceId,
        targets: &[MachineKey],
    ) -> Result<
        (
            plan::DeletePlan,
            std::collections::BTreeMap<MachineKey, DeleteOutcome>,
        ),
        Error,
    > {
        let _guard = self.inner.locks.lock(resource).await;
        let apis = &self.inner.apis;
        for _ in 0..self.inner.config.conflict_retries {
            let (res, rv) = apis
                .get_resource(resource)
                .await?
                .ok_or_else(|| Error::ResourceNotFound(resource.clone()))?;
            let limits = SizeLimits::of(&res).map_err(|p| Error::Problem(Arc::new(p)))?;
            let machines = apis.list_machines(resource).await?;
            let p = plan::plan_delete(DeleteInput {
                resource,
                replicas: res.replicas,
                limits,
                rolling_out: res.rolling_out_by_status(),
                machines: &machines,
                targets,
            });
            let api = resource.kind.machine_api();
            let delete_key = match api {
                MachineApi::Capi => keys::capi::DELETE_MACHINE,
                MachineApi::OpenShift => keys::openshift::DELETE_MACHINE,
            };
            let mut annotated = Vec::new();
            for mk in &p.annotate {
                let patch = json!({"metadata": {"annotations": {
                    delete_key: "true",
                    keys::ours::DELETE_REQUESTED: "true",
                }}});
                match apis.patch_machine(api, mk, &patch).await {
                    Ok(()) => annotated.push(mk.clone()),
                    Err(e) => {
                        self.remove_delete_annotations(api, delete_key, &annotated)
                            .await;
                        if is_not_found(&e) {
                            break;
                        }
                        return Err(e.into());
                    }
                }
            }
            if annotated.len() != p.annotate.len() {
                continue;
            }
            self.remove_delete_annotations(api, delete_key, &p.rollback)
                .await;
            if let Some(to) = p.scale_to {
                if let Some(hook) = &self.inner.hooks.before_scale_write {
                    hook(resource.clone(), to).await;
                }
                match apis.write_replicas(resource, &rv, to).await {
                    Ok(()) => {
                        tracing::info!(%resource, from = res.replicas, to, machines = ?p.annotate, "lowered replicas");
                    }
                    // Our annotations stay: the re-read sees them as our earlier requests.
                    Err(WriteError::Conflict) => continue,
                    Err(WriteError::Other(e)) => {
                        self.remove_delete_annotations(api, delete_key, &annotated)
                            .await;
                        return Err(e);
                    }
                }
            }
            let outcomes = p.outcomes.clone();
            return Ok((p, outcomes));
        }
        Err(Error::TooManyConflicts(
            resource.clone(),
            self.inner.config.conflict_retries,
        ))
    }

    async fn remove_delete_annotations(
        &self,
        api: MachineApi,
        delete_key: &str,
        machines: &[MachineKey],
    ) {
        for mk in machines {
            let patch = json!({"metadata": {"annotations": {
                delete_key: null,
                keys::ours::DELETE_REQUESTED: null,
            }}});
            if let Err(e) = self.inner.apis.patch_machine(api, mk, &patch).await
                && !is_not_found(&e)
            {
                tracing::warn!(machine = %mk, error = %e, "could not remove delete annotations");
            }
        }
    }

    /// Failed or stuck Machines of these resources; each puts its resource in back-off.
    pub async fn check_launch_failures(
        &self,
        resources: &[ResourceId],
        now: i64,
    ) -> Result<Vec<LaunchFailure>, Error> {
        let mut all = Vec::new();
        for r in resources {
            let machines = self.inner.apis.list_machines(r).await?;
            all.extend(launch_failures(
                std::slice::from_ref(r),
                &machines,
                now,
                self.inner.config.provider_id_timeout_secs,
                &self.inner.config.capacity_errors,
            ));
        }
        self.inner.backoff.observe(&all, now);
        Ok(all)
    }

    /// Whether the Machine bound to a NodeClaim has drifted from its resource's template
    /// (`None` when not bound, or under the `CAPIRollout` drift policy).
    pub async fn drift(
        &self,
        claim: &str,
        policy: capi_adapter::DriftPolicy,
    ) -> Result<Option<DriftReason>, Error> {
        let Some(nc) = self.claims_api().get_opt(claim).await? else {
            return Err(Error::NodeClaimNotFound(claim.to_string()));
        };
        let view = ClaimView::from_meta(&nc.metadata);
        let (Some(mk), Some(target)) = (view.machine, view.target) else {
            return Ok(None);
        };
        let apis = &self.inner.apis;
        let Some(machine) = apis.get_machine(target.kind.machine_api(), &mk).await? else {
            return Ok(None);
        };
        let Some((resource, _)) = apis.get_resource(&target).await? else {
            return Ok(None);
        };
        let revisions = if target.kind == ResourceKind::MachineDeployment {
            let sets = apis.machinesets_of(&target.namespace, &target.name).await?;
            Some(Revisions::of(&target.name, &target.namespace, &sets))
        } else {
            None
        };
        Ok(capi_adapter::drift::drift(
            &machine,
            &resource,
            policy,
            revisions.as_ref(),
        ))
    }

    /// Starts the providerID index watches on the management cluster.
    pub fn watch_provider_ids(&self, index: &ProviderIdIndex, openshift: bool) -> IndexWatches {
        index.watch(
            self.inner.apis.client.clone(),
            self.inner.config.capi_version,
            openshift,
        )
    }

    /// Seconds since the epoch, the clock the catalog and failure checks use.
    pub fn now() -> i64 {
        now_secs()
    }
}

/// Whether a Machine's binding label or annotation names this claim.
fn points_back(m: &MachineView, claim: &str) -> bool {
    m.labels
        .get(keys::ours::NODECLAIM_LABEL)
        .map(String::as_str)
        == Some(binding_label_value(claim).as_str())
        || m.annotations
            .get(keys::ours::NODECLAIM_ANNOTATION)
            .map(String::as_str)
            == Some(claim)
}

enum BindError {
    /// The Machine changed or vanished, or the claim vanished: re-plan.
    Conflict,
    Other(Error),
}
