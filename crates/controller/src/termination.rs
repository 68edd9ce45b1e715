//! Termination of a deleted NodeClaim, as upstream: taint the Node
//! `karpenter.sh/disrupted:NoSchedule`, evict its pods through the Eviction API in tiers
//! (non-critical non-daemon, non-critical daemon, critical non-daemon, critical daemon; a tier
//! starts when the one before is empty), honour PDBs (429: retry later) until the claim's
//! `terminationGracePeriod` is over (then pods are deleted), wait for volume attachments,
//! then delete the Machine through the cloud provider until it is gone, and only then drop
//! the finalizers. A Node deleted by hand (`kubectl delete node`) terminates its claim.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use karpenter_api::{NodeClaim, wellknown};
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use capi_adapter::plan::DeleteOutcome;
use kcapi_snapshot::KeptPod;
use kcapi_snapshot::pod::MIRROR_POD;

use crate::cloudprovider::Error as CloudError;
use crate::context::Context;
use crate::error::{Result, is_not_found, is_too_many_requests};
use crate::metrics::NodePoolReason;
use crate::nodeclaims::{condition, ensure_condition, patch_status, set_condition};
use crate::state::StoredPod;

const CRITICAL: [&str; 2] = ["system-cluster-critical", "system-node-critical"];

/// Finishes a deleted NodeClaim; requeues until its Machine is gone.
pub async fn finalize(claim: &NodeClaim, ctx: &Context) -> Result<Action> {
    if !claim
        .finalizers()
        .iter()
        .any(|f| f == wellknown::TERMINATION_FINALIZER)
    {
        return Ok(Action::await_change());
    }
    let name = claim.name_any();
    let node = claim
        .status
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .and_then(|n| ctx.state.node(n))
        .or_else(|| {
            claim
                .status
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .and_then(|p| ctx.state.node_by_provider_id(p))
        });
    if let Some(node) = &node {
        taint_disrupted(node, ctx).await?;
        let deadline = grace_deadline(claim);
        let past_grace = deadline.is_some_and(|d| Context::now() >= d);
        if !drain(node, ctx, past_grace).await? {
            ensure_condition(ctx, claim, "Drained", false, "Draining", "evicting pods").await?;
            return Ok(Action::requeue(Duration::from_secs(2)));
        }
        ensure_condition(ctx, claim, "Drained", true, "Drained", "").await?;
        if volumes_attached(node, ctx).await? {
            if !past_grace {
                ensure_condition(
                    ctx,
                    claim,
                    "VolumesDetached",
                    false,
                    "AwaitingVolumeDetachment",
                    "waiting for VolumeAttachments of the node to go",
                )
                .await?;
                return Ok(Action::requeue(Duration::from_secs(2)));
            }
            ensure_condition(
                ctx,
                claim,
                "VolumesDetached",
                false,
                "TerminationGracePeriodElapsed",
                "terminationGracePeriod is over; the instance goes with volumes attached",
            )
            .await?;
        } else {
            ensure_condition(ctx, claim, "VolumesDetached", true, "VolumesDetached", "").await?;
        }
    }
    let outcome = match ctx.cloud.delete_claim(&name).await {
        Ok(o) => o,
        Err(CloudError::MachineNotBound(m, _)) => {
            ctx.event(
                &claim.object_ref(&()),
                true,
                "MachineNotBound",
                "Terminate",
                format!("Machine {m} does not point back at this NodeClaim; it is left alone"),
            )
            .await;
            DeleteOutcome::Gone
        }
        Err(CloudError::NodeClaimNotFound(_)) => return Ok(Action::await_change()),
        Err(e) => return Err(e.into()),
    };
    match outcome {
        DeleteOutcome::Gone => {}
        other => {
            let conditions = claim.status.as_ref().and_then(|s| s.conditions.as_ref());
            if !crate::nodeclaims::is_true(claim, "InstanceTerminating") {
                let mut conds = conditions.cloned().unwrap_or_default();
                set_condition(
                    &mut conds,
                    condition(
                        conditions,
                        "InstanceTerminating",
                        true,
                        "InstanceTerminating",
                        &format!("{other:?}"),
                        None,
                    ),
                );
                patch_status(ctx, &name, json!({ "conditions": conds })).await?;
            }
            return Ok(Action::requeue(Duration::from_secs(2)));
        }
    }
    if let Some(node) = &node {
        release_node(node, ctx).await?;
    }
    remove_finalizer(claim, ctx).await?;
    ctx.catalogs.invalidate().await;
    ctx.metrics
        .nodeclaims_terminated
        .get_or_create(&NodePoolReason {
            nodepool: crate::lifecycle::nodepool_of(claim),
            reason: "deleted".into(),
        })
        .inc();
    tracing::info!(nodeclaim = %name, "terminated");
    Ok(Action::await_change())
}

/// When the grace period ends (seconds since the epoch), if the claim has one.
fn grace_deadline(claim: &NodeClaim) -> Option<i64> {
    let tgp = claim.spec.termination_grace_period.as_deref()?;
    let d = karpenter_api::parse_go_duration(tgp).ok()?;
    let start = claim.meta().deletion_timestamp.as_ref()?.0.as_second();
    Some(start + d.as_secs() as i64)
}

async fn taint_disrupted(node: &Node, ctx: &Context) -> Result<()> {
    if kcapi_snapshot::node::has_taint(node, wellknown::DISRUPTED_TAINT_KEY) {
        return Ok(());
    }
    let mut taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    taints.push(Taint {
        key: wellknown::DISRUPTED_TAINT_KEY.into(),
        effect: "NoSchedule".into(),
        value: None,
        time_added: None,
    });
    patch_taints(node, taints, ctx).await
}

/// A merge patch of a cluster-scoped object; an object already gone is not an error (what
/// the patch was for no longer matters).
async fn merge_patch<K>(ctx: &Context, name: &str, patch: serde_json::Value) -> Result<()>
where
    K: Resource<Scope = kube::core::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::all(ctx.workload.clone());
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Replaces a Node's taints, guarded by its resourceVersion.
pub async fn patch_taints(node: &Node, taints: Vec<Taint>, ctx: &Context) -> Result<()> {
    let patch = json!({
        "metadata": {"resourceVersion": node.resource_version()},
        "spec": {"taints": taints},
    });
    merge_patch::<Node>(ctx, &node.name_any(), patch).await
}

/// The object's finalizers without ours, as a patch guarded by its resourceVersion; `None`
/// when ours is not there.
fn without_our_finalizer<K: Resource>(obj: &K) -> Option<serde_json::Value> {
    let all = obj.finalizers();
    let rest: Vec<&String> = all
        .iter()
        .filter(|f| *f != wellknown::TERMINATION_FINALIZER)
        .collect();
    (rest.len() != all.len()).then(
        || json!({"metadata": {"resourceVersion": obj.resource_version(), "finalizers": rest}}),
    )
}

fn is_critical(p: &KeptPod) -> bool {
    p.priority_class_name
        .as_deref()
        .is_some_and(|c| CRITICAL.contains(&c))
}

/// The eviction tier of a pod (lower goes first).
pub fn tier(p: &KeptPod) -> u8 {
    (is_critical(p) as u8) * 2 + p.is_daemon() as u8
}

/// Evicts the lowest non-empty tier; `true` once no pod is left. Past the grace period
/// pods are deleted instead of evicted (PDBs no longer hold them).
async fn drain(node: &Node, ctx: &Context, past_grace: bool) -> Result<bool> {
    let pods: Vec<Arc<StoredPod>> = ctx
        .state
        .pods_on(&node.name_any())
        .into_iter()
        .filter(|p| !p.terminal)
        .filter(|p| !p.pod.annotations.contains_key(MIRROR_POD))
        .collect();
    let Some(lowest) = pods.iter().map(|p| tier(p)).min() else {
        return Ok(true);
    };
    for p in pods.iter().filter(|p| tier(p) == lowest) {
        if p.deleting {
            continue;
        }
        let api: Api<Pod> = Api::namespaced(ctx.workload.clone(), p.namespace());
        let res = if past_grace {
            api.delete(p.name(), &DeleteParams::default())
                .await
                .map(|_| ())
        } else {
            api.evict(p.name(), &EvictParams::default())
                .await
                .map(|_| ())
        };
        match res {
            Ok(()) => tracing::debug!(pod = %p.name(), node = %node.name_any(), "evicted"),
            Err(e) if is_not_found(&e) => {}
            Err(e) if is_too_many_requests(&e) => {
                tracing::debug!(pod = %p.name(), "eviction refused by a PodDisruptionBudget; retrying");
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(false)
}

async fn volumes_attached(node: &Node, ctx: &Context) -> Result<bool> {
    let api: Api<VolumeAttachment> = Api::all(ctx.workload.clone());
    let list = api.list(&ListParams::default()).await?;
    let name = node.name_any();
    Ok(list.items.iter().any(|v| v.spec.node_name == name))
}

/// Drops our finalizer from the Node and deletes it (its Machine is gone).
async fn release_node(node: &Node, ctx: &Context) -> Result<()> {
    if let Some(patch) = without_our_finalizer(node) {
        merge_patch::<Node>(ctx, &node.name_any(), patch).await?;
    }
    let api: Api<Node> = Api::all(ctx.workload.clone());
    match api.delete(&node.name_any(), &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn remove_finalizer(claim: &NodeClaim, ctx: &Context) -> Result<()> {
    match without_our_finalizer(claim) {
        Some(patch) => merge_patch::<NodeClaim>(ctx, &claim.name_any(), patch).await,
        None => Ok(()),
    }
}

/// Nodes deleted by someone else: delete their NodeClaim (which drains and removes the
/// Machine), or, with no claim left, let the Node go.
pub async fn deleted_nodes(ctx: &Context) -> Result<()> {
    for node in ctx.state.nodes.state() {
        if node.meta().deletion_timestamp.is_none()
            || !node
                .finalizers()
                .iter()
                .any(|f| f == wellknown::TERMINATION_FINALIZER)
        {
            continue;
        }
        let pid = node.spec.as_ref().and_then(|s| s.provider_id.clone());
        let claim = ctx.state.nodeclaims.state().into_iter().find(|c| {
            let st = c.status.as_ref();
            st.and_then(|s| s.node_name.as_deref()) == Some(node.name_any().as_str())
                || (pid.is_some() && st.and_then(|s| s.provider_id.clone()) == pid)
        });
        let ours = match &claim {
            Some(c) => ctx.owns_claim(c),
            None => {
                ctx.options.nodepool_selector.is_none()
                    || node
                        .labels()
                        .get(wellknown::NODEPOOL_LABEL)
                        .is_some_and(|p| ctx.nodepools().iter().any(|np| &np.name_any() == p))
            }
        };
        if !ours {
            continue;
        }
        match claim {
            Some(c) if c.meta().deletion_timestamp.is_none() => {
                crate::lifecycle::delete_claim(&c, ctx, "node_deleted").await?;
            }
            Some(_) => {}
            None => release_node(&node, ctx).await?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(daemon: bool, class: Option<&str>) -> KeptPod {
        let mut v = json!({"metadata": {"name": "p"}, "spec": {"containers": []}});
        if daemon {
            v["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u", "controller": true}]);
        }
        if let Some(c) = class {
            v["spec"]["priorityClassName"] = json!(c);
        }
        KeptPod::new(&serde_json::from_value(v).unwrap_or_default())
    }

    #[test]
    fn eviction_tiers_follow_karpenter() {
        assert_eq!(tier(&pod(false, None)), 0);
        assert_eq!(tier(&pod(true, None)), 1);
        assert_eq!(tier(&pod(false, Some("system-cluster-critical"))), 2);
        assert_eq!(tier(&pod(true, Some("system-node-critical"))), 3);
        assert_eq!(tier(&pod(false, Some("high"))), 0);
    }
}
