//! Disruption: every `disruption_interval` the core decides at most one command (emptiness,
//! expiration, drift, consolidation, in Karpenter's order, within NodePool budgets, PDBs and
//! `karpenter.sh/do-not-disrupt`); the command waits `validation_delay`, is re-validated on
//! a fresh snapshot, then carried out: taint the candidates `karpenter.sh/disrupted`, create
//! the replacements, wait until they are initialized, delete the candidates' NodeClaims
//! (termination drains them). A validation failure drops the command; a replacement that
//! does not initialize in time rolls it back (candidates untainted, replacements deleted).
//! One command at a time: while one is executing, or a NodeClaim is still terminating (for
//! at most `busy_while_terminating`: a drain a PodDisruptionBudget holds for good must not
//! stop every other decision), the loop decides nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;
use karpenter_api::{NodeClaim, wellknown};
use kube::{Resource, ResourceExt};
use provisioner_core::disruption::payback::Payback;
use provisioner_core::disruption::{Command, Destination, DisruptionOptions, Method};
use provisioner_core::replay::DisruptionRecord;
use provisioner_core::resources::pod_requests;
use provisioner_core::{PodRef, SchedulingOptions};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::metrics::DecisionLabels;
use crate::nodeclaims::{self, ClaimRequest, is_true};
use crate::termination::patch_taints;

/// What one loop did (tests and logs).
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    NotLeader,
    Busy(String),
    NoCommand,
    Invalidated(Vec<String>),
    RolledBack(String),
    Executed {
        method: Method,
        deleted: Vec<String>,
        replacements: Vec<String>,
    },
}

/// Runs until the process stops.
pub async fn run(ctx: Arc<Context>) {
    loop {
        tokio::time::sleep(ctx.options.disruption_interval).await;
        match tick(&ctx).await {
            Ok(Outcome::Executed {
                method,
                deleted,
                replacements,
            }) => {
                tracing::info!(
                    ?method,
                    ?deleted,
                    ?replacements,
                    "disruption command executed"
                )
            }
            Ok(Outcome::Invalidated(why)) => {
                tracing::info!(?why, "disruption command dropped at validation")
            }
            Ok(Outcome::RolledBack(why)) => tracing::warn!(why, "disruption command rolled back"),
            Ok(_) => {}
            Err(e) => {
                ctx.metrics
                    .reconcile_errors
                    .get_or_create(&crate::metrics::ControllerLabels {
                        controller: "disruption".into(),
                    })
                    .inc();
                tracing::warn!(error = %e, "disruption loop failed");
            }
        }
    }
}

/// Whether `claim` is terminating and began less than `limit` before `now` (seconds since
/// the epoch): such a drain keeps the loop from deciding anything else. Past the limit it is
/// decided around: its node is marked for deletion, so it is no candidate and counts
/// against its NodePool's budget.
fn holds_the_loop(claim: &NodeClaim, now: i64, limit: Duration) -> bool {
    claim
        .meta()
        .deletion_timestamp
        .as_ref()
        .is_some_and(|t| now - t.0.as_second() < i64::try_from(limit.as_secs()).unwrap_or(i64::MAX))
}

/// The core's options from the controller's flags.
fn disruption_options(opts: &crate::options::Options) -> DisruptionOptions {
    let defaults = DisruptionOptions::default();
    DisruptionOptions {
        optimize_replacements: opts.optimize,
        scheduling: SchedulingOptions {
            strategy: opts.strategy,
            balance_zones: opts.balance_zones,
            ..Default::default()
        },
        payback: defaults
            .payback
            .clone()
            .filter(|_| opts.consolidation_payback)
            .map(|p| Payback {
                flexibility_premium: opts.consolidation_merge_premium,
                underused_below: opts.consolidation_underused_below,
                reshape_below: opts.consolidation_reshape_below,
                window_prior: opts.consolidation_window_prior,
                lindy_floor_hours: opts
                    .consolidation_lindy_floor
                    .map_or(p.lindy_floor_hours, |d| d.as_secs_f64() / 3600.0),
                eviction_pod_hours: opts
                    .consolidation_eviction_cost
                    .map_or(p.eviction_pod_hours, |d| d.as_secs_f64() / 3600.0),
                wait_halving_seconds: opts
                    .consolidation_wait_halving
                    .map(|d| d.as_secs_f64())
                    .filter(|s| *s > 0.0),
                turnover_lookback_seconds: opts
                    .consolidation_turnover_lookback
                    .and_then(|d| i64::try_from(d.as_secs()).ok())
                    .filter(|s| *s > 0),
                shrink_lookback_seconds: opts
                    .consolidation_shrink_lookback
                    .and_then(|d| i64::try_from(d.as_secs()).ok())
                    .filter(|s| *s > 0),
                ..p
            }),
        headroom: defaults
            .headroom
            .clone()
            .filter(|_| opts.consolidation_headroom),
        move_onto_empty_nodes: opts.consolidation_move_onto_empty_nodes,
        staged_merge_followers: opts.consolidation_staged_merge_followers,
        settle_seconds: i64::try_from(opts.consolidation_settle.as_secs()).unwrap_or(i64::MAX),
        ..defaults
    }
}

/// Marks the nodes provisioning promised pods to (by node or NodeClaim name).
fn nominated(ctx: &Context, mut built: kcapi_snapshot::Built) -> kcapi_snapshot::Built {
    for n in &mut built.snapshot.nodes {
        let claim = built.claims_by_node.get(&n.name);
        n.nominated |= ctx.is_nominated(&n.name) || claim.is_some_and(|c| ctx.is_nominated(c));
    }
    built
}

/// One disruption loop.
pub async fn tick(ctx: &Arc<Context>) -> Result<Outcome> {
    if !ctx.is_leader() {
        return Ok(Outcome::NotLeader);
    }
    if !ctx.options.disruption {
        return Ok(Outcome::NoCommand);
    }
    if !ctx.state.synced() {
        return Err(Error::NotSynced);
    }
    let now = Context::now();
    if let Some(c) = ctx
        .nodeclaims()
        .iter()
        .find(|c| holds_the_loop(c, now, ctx.options.busy_while_terminating))
    {
        return Ok(Outcome::Busy(format!(
            "nodeclaim {} is terminating",
            c.name_any()
        )));
    }
    let catalogs = ctx.catalogs().await;
    let built = nominated(ctx, crate::snapshot::build(ctx, &catalogs, Context::now()));
    let cost: f64 = built
        .snapshot
        .nodes
        .iter()
        .filter(|n| n.nodepool.is_some())
        .map(|n| n.price)
        .sum();
    ctx.metrics.managed_cost_per_hour.set(cost);
    ctx.metrics
        .pod_lifetimes_observed
        .set(built.snapshot.ended_pods.len() as i64);
    let opts = disruption_options(&ctx.options);
    if let Some(p) = &opts.payback {
        ctx.metrics
            .payback_horizon_cap_hours
            .set(p.cap_hours(&built.snapshot));
    }
    let snapshot = Arc::new(built.snapshot);
    let (s, o) = (snapshot.clone(), opts.clone());
    let session = ctx.consolidation.clone();
    let (decision, reuse) = tokio::task::spawn_blocking(move || {
        // A poisoned lock only means an earlier loop panicked mid-way: start afresh.
        let mut session = session.lock().unwrap_or_else(|p| {
            let mut g = p.into_inner();
            *g = provisioner_core::disruption::ConsolidationSession::new(g.budget);
            g
        });
        provisioner_core::disruption::disrupt_in_session(&s, &o, &mut session)
    })
    .await
    .map_err(|e| Error::Invalid(format!("disruption task failed: {e}")))?;
    tracing::debug!(
        reused = reuse.reused,
        simulated = reuse.simulated,
        deferred = reuse.deferred.len(),
        "consolidation simulations this loop"
    );
    crate::replay::write_disruption(
        &ctx.options,
        &DisruptionRecord {
            snapshot: (*snapshot).clone(),
            options: opts.clone(),
            decision: decision.clone(),
        },
    );
    let Some(command) = decision.command else {
        tracing::debug!(methods = ?decision.methods, rejected = ?decision.rejected, budgets = ?decision.budgets, "no disruption command");
        return Ok(Outcome::NoCommand);
    };
    tracing::info!(method = ?command.method, candidates = ?command.candidate_names(), staged = ?command.staged_names(), replacements = command.replacements.len(), saving = command.saving_per_hour, summary = %command.rationale.summary, "disruption command; validating after the delay");
    tokio::time::sleep(ctx.options.validation_delay).await;
    if !ctx.is_leader() {
        return Ok(Outcome::NotLeader);
    }
    let catalogs = ctx.catalogs().await;
    let fresh = nominated(ctx, crate::snapshot::build(ctx, &catalogs, Context::now()));
    let (s, o, c) = (fresh.snapshot.clone(), opts.clone(), command.clone());
    let validation = tokio::task::spawn_blocking(move || {
        provisioner_core::disruption::validate_with(&c, &s, &o, &o.scheduling)
    })
    .await
    .map_err(|e| Error::Invalid(format!("validation task failed: {e}")))?;
    if !validation.valid {
        return Ok(Outcome::Invalidated(validation.failures));
    }
    execute(ctx, &command, &fresh, &catalogs).await
}

/// Carries out a validated command.
async fn execute(
    ctx: &Arc<Context>,
    command: &Command,
    built: &kcapi_snapshot::Built,
    catalogs: &crate::catalogs::Catalogs,
) -> Result<Outcome> {
    let claims: Vec<Arc<NodeClaim>> = command
        .candidates
        .iter()
        .filter_map(|c| built.claims_by_node.get(&c.name))
        .filter_map(|n| ctx.state.nodeclaim(n))
        .collect();
    if claims.len() != command.candidates.len() {
        return Ok(Outcome::Invalidated(vec![
            "a candidate has no NodeClaim any more".into(),
        ]));
    }
    for c in &command.candidates {
        set_disrupted_taint(ctx, &c.name, true).await?;
    }
    // Upstream's DisruptionReason condition: why these nodes are going, on the claims.
    for c in &claims {
        if let Err(e) = crate::nodeclaims::ensure_condition(
            ctx,
            c,
            "DisruptionReason",
            true,
            &format!("{:?}", command.reason),
            &command.rationale.summary,
        )
        .await
        {
            tracing::debug!(nodeclaim = %c.name_any(), error = %e, "could not set DisruptionReason");
        }
    }
    let mut replacements = Vec::new();
    let nodepools: BTreeMap<String, _> = ctx
        .nodepools()
        .into_iter()
        .map(|np| (np.name_any(), np))
        .collect();
    let pods: BTreeMap<PodRef, &provisioner_core::Pod> = built
        .snapshot
        .pods
        .iter()
        .map(|p| {
            (
                PodRef {
                    namespace: p.namespace.clone(),
                    name: p.name.clone(),
                },
                &**p,
            )
        })
        .collect();
    for r in &command.replacements {
        let Some(np) = nodepools.get(&r.nodepool) else {
            return rollback(
                ctx,
                command,
                &replacements,
                format!("NodePool {} is gone", r.nodepool),
            )
            .await;
        };
        let mut requests = provisioner_core::Resources::default();
        for m in &command.moves {
            if m.to == Destination::Replacement(r.name.clone())
                && let Some(p) = pods.get(&m.pod)
            {
                requests.add_assign(&pod_requests(p));
            }
        }
        let req = ClaimRequest {
            nodepool: &r.nodepool,
            requirements: &r.requirements,
            options: &r.instance_type_options,
            launch: &r.launch,
            requests,
        };
        match nodeclaims::create(ctx, np, &req, catalogs, "disruption").await {
            Ok(nc) => {
                let name = nc.name_any();
                crate::lifecycle::launch_soon(ctx, nc);
                replacements.push(name);
            }
            Err(e) => {
                return rollback(
                    ctx,
                    command,
                    &replacements,
                    format!("could not create a replacement: {e}"),
                )
                .await;
            }
        }
    }
    if !replacements.is_empty() {
        let deadline = tokio::time::Instant::now() + ctx.options.replacement_timeout;
        loop {
            let states: Vec<Option<Arc<NodeClaim>>> = replacements
                .iter()
                .map(|n| ctx.state.nodeclaim(n))
                .collect();
            if states
                .iter()
                .all(|c| c.as_ref().is_some_and(|c| is_true(c, "Initialized")))
            {
                break;
            }
            let lost = states.iter().zip(&replacements).find(|(c, _)| {
                c.as_ref()
                    .is_none_or(|c| c.meta().deletion_timestamp.is_some())
            });
            if let Some((_, name)) = lost {
                // Give the reflector a moment: a claim just created may not be seen yet.
                if nodeclaims::await_observed(
                    ctx,
                    std::slice::from_ref(name),
                    Duration::from_secs(5),
                )
                .await
                    && ctx
                        .state
                        .nodeclaim(name)
                        .is_some_and(|c| c.meta().deletion_timestamp.is_none())
                {
                    continue;
                }
                return rollback(
                    ctx,
                    command,
                    &replacements,
                    format!("replacement {name} failed to launch"),
                )
                .await;
            }
            if tokio::time::Instant::now() >= deadline {
                return rollback(
                    ctx,
                    command,
                    &replacements,
                    "replacements did not initialize in time".into(),
                )
                .await;
            }
            tokio::select! {
                _ = ctx.state.nodes_changed.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }
    let mut deleted = Vec::new();
    for c in &claims {
        crate::lifecycle::delete_claim(c, ctx, &format!("{:?}", command.reason).to_lowercase())
            .await?;
        ctx.event(
            &c.object_ref(&()),
            false,
            "DisruptionTerminating",
            "Disrupt",
            format!(
                "Disrupting NodeClaim: {} ({})",
                command.rationale.summary,
                reason_word(command)
            ),
        )
        .await;
        deleted.push(c.name_any());
    }
    ctx.metrics
        .disruption_decisions
        .get_or_create(&DecisionLabels {
            decision: if command.is_delete() {
                "delete"
            } else {
                "replace"
            }
            .into(),
            reason: reason_word(command),
            consolidation_type: consolidation_type(command),
        })
        .inc();
    Ok(Outcome::Executed {
        method: command.method,
        deleted,
        replacements,
    })
}

fn reason_word(command: &Command) -> String {
    format!("{:?}", command.reason).to_lowercase()
}

fn consolidation_type(command: &Command) -> String {
    match command.method {
        Method::Consolidation if command.candidates.len() > 1 => "multi".into(),
        Method::Consolidation => "single".into(),
        Method::Emptiness => "empty".into(),
        _ => String::new(),
    }
}

/// Undoes a command that cannot finish: candidates untainted, replacements deleted.
async fn rollback(
    ctx: &Arc<Context>,
    command: &Command,
    replacements: &[String],
    why: String,
) -> Result<Outcome> {
    for c in &command.candidates {
        if let Err(e) = set_disrupted_taint(ctx, &c.name, false).await {
            tracing::warn!(node = %c.name, error = %e, "could not remove the disrupted taint");
        }
    }
    for claim in command
        .candidates
        .iter()
        .filter_map(|c| ctx.state.node(&c.name))
        .filter_map(|n| {
            let pid = n.spec.as_ref()?.provider_id.clone()?;
            ctx.state
                .nodeclaims
                .state()
                .into_iter()
                .find(|c| c.status.as_ref().and_then(|s| s.provider_id.as_ref()) == Some(&pid))
        })
    {
        if let Err(e) = clear_condition(ctx, &claim, "DisruptionReason").await {
            tracing::debug!(nodeclaim = %claim.name_any(), error = %e, "could not clear DisruptionReason");
        }
    }
    for name in replacements {
        if let Some(c) = ctx.state.nodeclaim(name)
            && !is_true(&c, "Initialized")
            && let Err(e) = crate::lifecycle::delete_claim(&c, ctx, "rollback").await
        {
            tracing::warn!(nodeclaim = %name, error = %e, "could not delete a replacement");
        }
    }
    Ok(Outcome::RolledBack(why))
}

async fn set_disrupted_taint(ctx: &Context, node: &str, on: bool) -> Result<()> {
    let Some(n) = ctx.state.node(node) else {
        return Ok(());
    };
    let mut taints = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let has = taints
        .iter()
        .any(|t| t.key == wellknown::DISRUPTED_TAINT_KEY);
    if has == on {
        return Ok(());
    }
    if on {
        taints.push(Taint {
            key: wellknown::DISRUPTED_TAINT_KEY.into(),
            effect: "NoSchedule".into(),
            value: None,
            time_added: None,
        });
    } else {
        taints.retain(|t| t.key != wellknown::DISRUPTED_TAINT_KEY);
    }
    patch_taints(&n, taints, ctx).await
}

/// Removes a condition from a claim, if it has it.
async fn clear_condition(ctx: &Context, claim: &NodeClaim, type_: &str) -> Result<()> {
    let Some(conds) = claim.status.as_ref().and_then(|s| s.conditions.as_ref()) else {
        return Ok(());
    };
    if !conds.iter().any(|c| c.type_ == type_) {
        return Ok(());
    }
    let kept: Vec<_> = conds.iter().filter(|c| c.type_ != type_).cloned().collect();
    crate::nodeclaims::patch_status(
        ctx,
        &claim.name_any(),
        serde_json::json!({ "conditions": kept }),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::Options;

    #[test]
    fn a_terminating_claim_holds_the_loop_for_a_while_only() {
        let claim = || crate::claim_disruption::tests::claim(&[], &[]);
        let at = |secs: i64| -> NodeClaim {
            let mut c = claim();
            c.meta_mut().deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::from_second(secs).expect("a valid time"),
                ));
            c
        };
        let limit = Duration::from_secs(600);
        assert!(holds_the_loop(&at(1_000), 1_000, limit));
        assert!(holds_the_loop(&at(1_000), 1_599, limit));
        assert!(
            !holds_the_loop(&at(1_000), 1_600, limit),
            "a drain held for 10 minutes is decided around"
        );
        let live = claim();
        assert!(!holds_the_loop(&live, 1_000, limit), "not terminating");
        assert_eq!(Options::default().busy_while_terminating, limit);
    }

    #[test]
    fn the_payback_flags_reach_the_core() {
        let default = disruption_options(&Options::default());
        let payback = default.payback.expect("payback on by default");
        assert_eq!(
            payback.eviction_pod_hours,
            Payback::default().eviction_pod_hours
        );
        assert_eq!(payback.flexibility_premium, None);
        assert_eq!(payback.underused_below, Payback::default().underused_below);
        assert_eq!(payback.reshape_below, Payback::default().reshape_below);
        assert!(payback.window_prior);
        assert_eq!(payback.wait_halving_seconds, Some(300.0));
        assert_eq!(payback.turnover_lookback_seconds, Some(86_400));
        assert_eq!(payback.shrink_lookback_seconds, None);
        assert_eq!(
            payback.lindy_floor_hours,
            Payback::default().lindy_floor_hours
        );
        assert!(!default.move_onto_empty_nodes);
        assert_eq!(default.staged_merge_followers, 4);
        assert_eq!(default.settle_seconds, 300);

        let tuned = disruption_options(&Options {
            consolidation_move_onto_empty_nodes: true,
            consolidation_staged_merge_followers: 0,
            consolidation_settle: Duration::ZERO,
            consolidation_eviction_cost: Some(Duration::from_secs(5400)),
            consolidation_merge_premium: Some(0.25),
            consolidation_underused_below: None,
            consolidation_reshape_below: None,
            consolidation_window_prior: false,
            consolidation_wait_halving: None,
            consolidation_turnover_lookback: None,
            consolidation_shrink_lookback: Some(std::time::Duration::from_secs(3600)),
            consolidation_lindy_floor: Some(Duration::from_secs(1800)),
            ..Options::default()
        });
        let payback = tuned.payback.expect("payback on");
        assert!((payback.lindy_floor_hours - 0.5).abs() < 1e-12);
        assert_eq!(payback.wait_halving_seconds, None);
        assert_eq!(payback.turnover_lookback_seconds, None);
        assert_eq!(payback.shrink_lookback_seconds, Some(3600));
        assert!((payback.eviction_pod_hours - 1.5).abs() < 1e-12);
        assert_eq!(payback.flexibility_premium, Some(0.25));
        assert_eq!(payback.underused_below, None);
        assert_eq!(payback.reshape_below, None);
        assert!(!payback.window_prior);
        assert!(tuned.move_onto_empty_nodes);
        assert_eq!(tuned.staged_merge_followers, 0);
        assert_eq!(tuned.settle_seconds, 0);

        let off = disruption_options(&Options {
            consolidation_payback: false,
            consolidation_eviction_cost: Some(Duration::from_secs(5400)),
            ..Options::default()
        });
        assert!(off.payback.is_none());
    }
}
