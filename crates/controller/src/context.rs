//! What every reconciler shares: clients, cluster state, the cloud provider, metrics, the
//! event recorder, options and the leader flag.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use karpenter_api::nodeclass::ClusterAPINodeClass;
use karpenter_api::{NodeClaim, NodePool};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, ResourceExt};
use tokio::sync::watch;

use crate::catalogs::{CatalogCache, Catalogs};
use crate::cloudprovider::CloudProvider;
use crate::metrics::Metrics;
use crate::options::Options;
use crate::state::ClusterState;

/// The field manager and event reporter name.
pub const MANAGER: &str = "karpenter-capi";

/// Shared by every reconciler; cheap to clone behind an `Arc`.
pub struct Context {
    pub workload: Client,
    pub cloud: CloudProvider,
    pub state: ClusterState,
    pub metrics: Metrics,
    /// Events go out through a queue, deduplicated ([`crate::events`]).
    pub events: crate::events::EventSink,
    pub options: Options,
    pub catalogs: CatalogCache,
    /// Nodes and NodeClaims that provisioning just promised pods to, with when: disruption
    /// leaves them alone for a while (Karpenter's nomination), or it would remove a node in
    /// the seconds between its launch and the scheduler binding the pods it was made for.
    nominations: std::sync::Mutex<std::collections::HashMap<String, tokio::time::Instant>>,
    /// Consolidation's single-node simulations kept between disruption loops, so a loop
    /// re-simulates only candidates whose inputs changed (the core's `ConsolidationSession`).
    pub consolidation: Arc<std::sync::Mutex<provisioner_core::disruption::ConsolidationSession>>,
    leader: watch::Receiver<bool>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("options", &self.options)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Context {
    pub fn new(
        workload: Client,
        cloud: CloudProvider,
        state: ClusterState,
        metrics: Metrics,
        options: Options,
        leader: watch::Receiver<bool>,
    ) -> Arc<Self> {
        let recorder = Recorder::new(
            workload.clone(),
            Reporter {
                controller: MANAGER.into(),
                instance: Some(options.identity.clone()),
            },
        );
        let budget = options.consolidation_max_simulations;
        Arc::new(Context {
            workload,
            cloud,
            state,
            metrics,
            events: crate::events::EventSink::new(recorder),
            options,
            catalogs: CatalogCache::new(Duration::from_secs(5)),
            nominations: Default::default(),
            consolidation: Arc::new(std::sync::Mutex::new(
                provisioner_core::disruption::ConsolidationSession::new(
                    provisioner_core::disruption::WorkBudget {
                        max_single_simulations: budget,
                    },
                ),
            )),
            leader,
        })
    }

    /// How long a nomination protects a node: twice the longest batch window, at least 20 s.
    fn nomination_window(&self) -> Duration {
        (self.options.batch_max * 2).max(Duration::from_secs(20))
    }

    /// Records that pods were promised to this node or NodeClaim.
    pub fn nominate(&self, name: &str) {
        let mut n = self.nominations.lock().unwrap_or_else(|e| e.into_inner());
        let window = self.nomination_window();
        n.retain(|_, at| at.elapsed() < window);
        n.insert(name.to_string(), tokio::time::Instant::now());
    }

    /// Whether this node or NodeClaim was nominated within the window.
    pub fn is_nominated(&self, name: &str) -> bool {
        let n = self.nominations.lock().unwrap_or_else(|e| e.into_inner());
        n.get(name)
            .is_some_and(|at| at.elapsed() < self.nomination_window())
    }

    /// Only the leader acts; the others keep their reflectors warm to take over at once.
    pub fn is_leader(&self) -> bool {
        *self.leader.borrow()
    }

    /// The NodePools this controller manages (see [`Options::nodepool_selector`]).
    pub fn nodepools(&self) -> Vec<Arc<NodePool>> {
        let all = self.state.nodepools.state();
        match &self.options.nodepool_selector {
            None => all,
            Some(sel) => all
                .into_iter()
                .filter(|np| sel.iter().all(|(k, v)| np.labels().get(k) == Some(v)))
                .collect(),
        }
    }

    /// Whether a NodeClaim belongs to a managed NodePool.
    pub fn owns_claim(&self, claim: &NodeClaim) -> bool {
        if self.options.nodepool_selector.is_none() {
            return true;
        }
        let Some(pool) = claim.labels().get(karpenter_api::wellknown::NODEPOOL_LABEL) else {
            return false;
        };
        self.nodepools().iter().any(|np| &np.name_any() == pool)
    }

    /// The NodeClaims of managed NodePools.
    pub fn nodeclaims(&self) -> Vec<Arc<NodeClaim>> {
        self.state
            .nodeclaims
            .state()
            .into_iter()
            .filter(|c| self.owns_claim(c))
            .collect()
    }

    /// The NodeClasses managed NodePools refer to (all of them without a selector).
    pub fn nodeclasses(&self) -> Vec<Arc<ClusterAPINodeClass>> {
        let all = self.state.nodeclasses.state();
        if self.options.nodepool_selector.is_none() {
            return all;
        }
        let wanted: std::collections::BTreeSet<String> = self
            .nodepools()
            .iter()
            .filter_map(|np| Catalogs::nodeclass_of(np))
            .collect();
        all.into_iter()
            .filter(|nc| wanted.contains(&nc.name_any()))
            .collect()
    }

    /// Seconds since the epoch.
    pub fn now() -> i64 {
        CloudProvider::now()
    }

    /// The catalogs of every NodeClass in the store (cached briefly).
    pub async fn catalogs(&self) -> Catalogs {
        let nodeclasses = self.nodeclasses();
        self.catalogs
            .get(&self.cloud, &nodeclasses, Self::now())
            .await
    }

    /// Queues an event (see [`crate::events`]); never waits for the API, never fails.
    pub async fn event(
        &self,
        object: &ObjectReference,
        warning: bool,
        reason: &str,
        action: &str,
        note: impl Into<String>,
    ) {
        let mut note: String = note.into();
        if note.len() > 1000 {
            let mut cut = 997;
            while !note.is_char_boundary(cut) {
                cut -= 1;
            }
            note.truncate(cut);
            note.push_str("...");
        }
        let ev = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        self.events.publish(object, ev);
    }
}
