//! Wiring: start the reflectors, elect a leader, and run every loop and reconciler. The
//! binary only parses flags into [`Options`] and clients, then calls [`start`].

use std::net::SocketAddr;
use std::sync::Arc;

use kube::Client;
use tokio::task::JoinHandle;

use crate::cloudprovider::CloudProvider;
use crate::context::Context;
use crate::metrics::Metrics;
use crate::options::Options;
use crate::state::ClusterState;

/// The two clusters: the workload cluster (pods, nodes, Karpenter objects) and the
/// management cluster (scalable resources and Machines); the same client when one cluster
/// is both.
#[derive(Clone)]
pub struct Clients {
    pub workload: Client,
    pub management: Client,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients").finish_non_exhaustive()
    }
}

/// A running controller.
#[derive(Debug)]
pub struct Running {
    pub ctx: Arc<Context>,
    /// Where `/metrics`, `/healthz` and `/readyz` are served, when asked.
    pub addresses: Vec<SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stops every loop (as a crash would: nothing is cleaned up in the API).
    pub fn stop(self) {
        for t in self.tasks {
            t.abort();
        }
        // Reflectors, launch batches, early launches, the HTTP server.
        self.ctx.cloud.tasks().abort_all();
    }
}

/// Starts the controller. `serve` lists the addresses for the HTTP endpoints.
pub async fn start(
    clients: Clients,
    options: Options,
    serve: &[SocketAddr],
) -> Result<Running, crate::error::Error> {
    let cloud = CloudProvider::new(
        clients.management.clone(),
        clients.workload.clone(),
        options.cloud.clone(),
    );
    let state = ClusterState::start(&clients.workload, cloud.tasks());
    let (leader, leader_task) = crate::leader::elect(
        clients.workload.clone(),
        options.leader_elect,
        &options.leader_election_namespace,
        &options.identity,
        15,
    )
    .await
    .map_err(|e| crate::error::Error::Invalid(format!("leader election: {e}")))?;
    let ctx = Context::new(
        clients.workload.clone(),
        cloud,
        state,
        Metrics::new(),
        options,
        leader,
    );
    let mut addresses = Vec::new();
    for addr in serve {
        addresses.push(
            crate::server::serve(ctx.clone(), *addr)
                .await
                .map_err(|e| {
                    crate::error::Error::Invalid(format!("cannot serve on {addr}: {e}"))
                })?,
        );
    }
    let mut tasks = vec![
        leader_task,
        tokio::spawn(crate::provisioning::run(ctx.clone())),
        tokio::spawn(crate::lifecycle::run(ctx.clone())),
        tokio::spawn(crate::disruption::run(ctx.clone())),
        tokio::spawn(crate::claim_disruption::run(ctx.clone())),
        tokio::spawn(crate::gc::run(ctx.clone())),
        tokio::spawn(crate::status::run(ctx.clone(), clients.management.clone())),
    ];
    if let Some(worker) = ctx.events.worker() {
        tasks.push(tokio::spawn(worker));
    }
    tracing::info!(identity = %ctx.options.identity, "controller started");
    Ok(Running {
        ctx,
        addresses,
        tasks,
    })
}
