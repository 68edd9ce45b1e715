//! Provisioning: batch the pods the kube-scheduler gave up on, solve with the core, create
//! NodeClaims and start their launches.
//!
//! A batch opens with the first pending pod and closes after `batch_idle` without another
//! (1 s) or `batch_max` after it opened (10 s), as Karpenter batches. Pods that stay pending
//! without new events (their NodeClaim failed, a limit was raised) are retried every
//! [`RETRY`]. After creating NodeClaims the round waits until the reflector has seen them,
//! so the next round counts them in flight and never launches twice for the same pods.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use provisioner_core::{SchedulingOptions, SchedulingResult};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::nodeclaims::{self, ClaimRequest};
use crate::replay;

/// Pending pods with no new event are looked at again this often: as Karpenter's pod
/// controller requeues a provisionable pod every 10 s. The kube-scheduler binds as it
/// scores, not as a round planned, so a pod promised to a node can find it taken, and no
/// new event says so.
pub const RETRY: Duration = Duration::from_secs(10);

/// The provisioning loop; runs until the process stops.
pub async fn run(ctx: Arc<Context>) {
    loop {
        tokio::select! {
            _ = ctx.state.pending_pods.notified() => {}
            _ = tokio::time::sleep(RETRY) => {
                if !ctx.state.pods.state().iter().any(|p| p.provisionable) {
                    continue;
                }
            }
        }
        batch_window(&ctx).await;
        if !ctx.is_leader() {
            continue;
        }
        match round(&ctx).await {
            Ok(_) => {}
            Err(e) => {
                ctx.metrics
                    .reconcile_errors
                    .get_or_create(&crate::metrics::ControllerLabels {
                        controller: "provisioning".into(),
                    })
                    .inc();
                tracing::warn!(error = %e, "provisioning round failed; retrying on the next pod event");
            }
        }
    }
}

/// Waits for the batch to close: `batch_idle` without a new pending pod, or `batch_max`.
async fn batch_window(ctx: &Context) {
    let opened = tokio::time::Instant::now();
    let max = opened + ctx.options.batch_max;
    loop {
        let idle = tokio::time::Instant::now() + ctx.options.batch_idle;
        tokio::select! {
            _ = ctx.state.pending_pods.notified() => {
                if tokio::time::Instant::now() >= max { return; }
            }
            _ = tokio::time::sleep_until(idle.min(max)) => return,
        }
    }
}

/// One provisioning round. Returns the core's result (for tests and replay).
pub async fn round(ctx: &Arc<Context>) -> Result<Option<SchedulingResult>> {
    if !ctx.state.wait_synced(Duration::from_secs(30)).await {
        return Err(Error::NotSynced);
    }
    let catalogs = ctx.catalogs().await;
    let now = Context::now();
    let built = crate::snapshot::build(ctx, &catalogs, now);
    for p in &built.problems {
        tracing::debug!(problem = %p, "left out of the snapshot");
    }
    let pending = built
        .snapshot
        .pods
        .iter()
        .filter(|p| p.node_name.is_none())
        .count();
    ctx.metrics.pods_pending.set(pending as i64);
    if pending == 0 {
        return Ok(None);
    }
    let options = scheduling_options(&ctx.options);
    let snapshot = Arc::new(built.snapshot);
    let started = Instant::now();
    let (snap, opts) = (snapshot.clone(), options.clone());
    let result = tokio::task::spawn_blocking(move || provisioner_core::schedule(&snap, &opts))
        .await
        .map_err(|e| Error::Invalid(format!("scheduling task failed: {e}")))?;
    let took = started.elapsed();
    ctx.metrics.scheduling_duration.observe(took.as_secs_f64());
    if let Some(gap) = result.cost_gap_percent {
        ctx.metrics.provisioning_gap_percent.set(gap);
    }
    tracing::info!(
        pending,
        new_nodeclaims = result.new_node_claims.len(),
        on_existing = result.existing_placements.len(),
        unschedulable = result.unschedulable.len(),
        cost_per_hour = result.new_node_cost_per_hour,
        gap_percent = ?result.cost_gap_percent,
        took_ms = took.as_millis() as u64,
        "provisioning round"
    );
    for u in &result.unschedulable {
        tracing::debug!(pod = %u.pod, reason = %u.reason, "unschedulable");
    }
    for (nc, cat) in &catalogs.by_nodeclass {
        tracing::debug!(nodeclass = %nc, instance_types = ?cat.instance_types.iter().map(|t| &t.name).collect::<Vec<_>>(), problems = ?cat.problems.iter().map(ToString::to_string).collect::<Vec<_>>(), "catalog");
    }
    replay::write_provisioning(&ctx.options, &snapshot, &options, &result);

    let nodepools: BTreeMap<String, _> = ctx
        .nodepools()
        .into_iter()
        .map(|np| (np.name_any(), np))
        .collect();
    let pods: BTreeMap<(String, String), _> = ctx
        .state
        .pods
        .state()
        .into_iter()
        .map(|p| ((p.namespace().to_string(), p.name().to_string()), p))
        .collect();
    let mut created = Vec::new();
    for claim in &result.new_node_claims {
        let Some(np) = nodepools.get(&claim.nodepool) else {
            continue;
        };
        let mut requests = claim.pod_requests.clone();
        requests.add_assign(&claim.daemonset_requests);
        let req = ClaimRequest {
            nodepool: &claim.nodepool,
            requirements: &claim.requirements,
            options: &claim.instance_type_options,
            launch: &claim.launch,
            requests,
        };
        let nc = match nodeclaims::create(ctx, np, &req, &catalogs, "provisioning").await {
            Ok(nc) => nc,
            Err(e) => {
                tracing::warn!(nodepool = %claim.nodepool, error = %e, "could not create nodeclaim");
                continue;
            }
        };
        let name = nc.name_any();
        ctx.nominate(&name);
        created.push(name.clone());
        crate::lifecycle::launch_soon(ctx, nc);
        for pod in &claim.pods {
            if let Some(p) = pods.get(&(pod.namespace.clone(), pod.name.clone())) {
                ctx.event(
                    &p.object_ref(),
                    false,
                    "Nominated",
                    "Provision",
                    format!("Pod should schedule on: nodeclaim/{name}"),
                )
                .await;
            }
        }
    }
    for placement in &result.existing_placements {
        ctx.nominate(&placement.node);
        if let Some(p) = pods.get(&(placement.pod.namespace.clone(), placement.pod.name.clone())) {
            ctx.event(
                &p.object_ref(),
                false,
                "Nominated",
                "Provision",
                format!("Pod should schedule on: node/{}", placement.node),
            )
            .await;
        }
    }
    for u in &result.unschedulable {
        if let Some(p) = pods.get(&(u.pod.namespace.clone(), u.pod.name.clone())) {
            ctx.event(
                &p.object_ref(),
                true,
                "FailedScheduling",
                "Provision",
                format!("Failed to schedule pod, {}", u.reason),
            )
            .await;
        }
    }
    if !created.is_empty()
        && !nodeclaims::await_observed(ctx, &created, Duration::from_secs(10)).await
    {
        tracing::warn!(?created, "created nodeclaims not yet observed after 10 s");
    }
    Ok(Some(result))
}

/// The core's scheduling options from the controller's flags.
fn scheduling_options(opts: &crate::options::Options) -> SchedulingOptions {
    SchedulingOptions {
        strategy: opts.strategy,
        large_rounds: opts
            .optimize_large_rounds
            .then(provisioner_core::optimize::LargeRounds::default),
        anticipation: opts.anticipation.clone(),
        queue_shuffle: opts
            .plan_for_scheduler_queue
            .then(provisioner_core::queue_shuffle::QueueShuffle::default),
        balance_zones: opts.balance_zones,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;
    use provisioner_core::anticipate::Anticipation;

    #[test]
    fn anticipation_follows_the_flags() {
        let on = scheduling_options(&Options::default());
        assert_eq!(on.anticipation, Some(Anticipation::default()));
        let off = scheduling_options(&Options {
            anticipation: None,
            ..Options::default()
        });
        assert_eq!(off.anticipation, None);
        let surer = scheduling_options(&Options {
            anticipation: Some(Anticipation {
                confidence: 0.9,
                ..Anticipation::default()
            }),
            ..Options::default()
        });
        assert_eq!(surer.anticipation.map(|a| a.confidence), Some(0.9));
    }

    #[test]
    fn zone_balancing_follows_the_flag() {
        assert!(!scheduling_options(&Options::default()).balance_zones);
        let on = scheduling_options(&Options {
            balance_zones: true,
            ..Options::default()
        });
        assert!(on.balance_zones);
    }
}
