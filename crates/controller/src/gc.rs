//! Garbage collection: NodeClaims whose Machine vanished while their Node is not Ready
//! (every `gc_interval`, ~2 min as upstream), Nodes deleted by hand, and unclaimed Nodes still
//! carrying the unregistered taint ([`crate::unclaimed`]; both every few seconds).

use std::sync::Arc;
use std::time::Duration;

use kube::{Resource, ResourceExt};

use crate::context::Context;
use crate::nodeclaims::is_true;

/// Runs until the process stops.
pub async fn run(ctx: Arc<Context>) {
    let mut last_machines = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(5)).await;
        if !ctx.is_leader() || !ctx.state.synced() {
            continue;
        }
        if let Err(e) = crate::termination::deleted_nodes(&ctx).await {
            tracing::warn!(error = %e, "could not handle deleted nodes");
        }
        if let Err(e) = crate::unclaimed::release(&ctx).await {
            tracing::warn!(error = %e, "could not release unclaimed nodes");
        }
        if last_machines.elapsed() >= ctx.options.gc_interval {
            last_machines = tokio::time::Instant::now();
            if let Err(e) = vanished_machines(&ctx).await {
                tracing::warn!(error = %e, "garbage collection failed");
            }
        }
    }
}

/// Deletes launched claims whose Machine is gone (or serves another claim) and whose Node
/// is missing or not Ready.
pub async fn vanished_machines(ctx: &Context) -> crate::error::Result<usize> {
    let mut n = 0;
    for claim in ctx.nodeclaims() {
        if claim.meta().deletion_timestamp.is_some() || !is_true(&claim, "Launched") {
            continue;
        }
        let Some((machine, view)) = ctx.cloud.bound_machine(&claim).await? else {
            continue;
        };
        if view.is_some() {
            continue;
        }
        let node_ready = claim
            .status
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .and_then(|n| ctx.state.node(n))
            .is_some_and(|n| kcapi_snapshot::node::is_ready(&n));
        if node_ready {
            continue;
        }
        tracing::warn!(nodeclaim = %claim.name_any(), %machine, "machine is gone; deleting the nodeclaim");
        ctx.event(
            &claim.object_ref(&()),
            true,
            "MachineGone",
            "GarbageCollect",
            format!("Machine {machine} no longer exists and the node is not Ready"),
        )
        .await;
        crate::lifecycle::delete_claim(&claim, ctx, "garbage_collected").await?;
        n += 1;
    }
    Ok(n)
}
