//! Nodes that joined with `karpenter.sh/unregistered` but that no NodeClaim will claim.
//!
//! On CAPI the taint comes from the bootstrap template (a KubeadmConfigTemplate's
//! `joinConfiguration`), which every Machine of the MachineDeployment uses, not only the ones
//! we asked for: a rollout, a MachineHealthCheck remediation or the resource's min size makes
//! Machines of its own. Upstream Karpenter never sees such nodes (its taint is in user data it
//! writes per launch); here they would stay tainted, and useless, forever. A Node is released
//! when it has carried the taint for [`Options::unclaimed_node_grace`] with no NodeClaim
//! naming it, and its Machine belongs to a resource one of our NodeClasses selects and is
//! bound to no claim. The grace covers our own launches, whose Machines are bound within
//! seconds of appearing, long before their Node joins.
//!
//! [`Options::unclaimed_node_grace`]: crate::options::Options::unclaimed_node_grace

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use karpenter_api::wellknown;
use kube::{Resource, ResourceExt};

use crate::context::Context;
use crate::error::Result;

/// Whether a Node still carries the unregistered taint.
fn tainted(node: &Node) -> bool {
    kcapi_snapshot::node::has_taint(node, wellknown::UNREGISTERED_TAINT_KEY)
}

/// Seconds since the Node was created (0 when unknown, so it waits).
fn age_secs(node: &Node, now: i64) -> i64 {
    node.creation_timestamp()
        .map_or(0, |t| now - t.0.as_second())
}

/// Removes the taint from every Node that qualifies; returns how many.
pub async fn release(ctx: &Context) -> Result<usize> {
    let now = Context::now();
    let grace = i64::try_from(ctx.options.unclaimed_node_grace.as_secs()).unwrap_or(i64::MAX);
    // Every claim counts here, not only our NodePools': a node another controller's claim
    // names is not ours to release.
    let claims = ctx.state.nodeclaims.state();
    let claimed_ids: BTreeSet<String> = claims
        .iter()
        .filter_map(|c| c.status.as_ref()?.provider_id.clone())
        .collect();
    let claimed_names: BTreeSet<String> = claims
        .iter()
        .filter_map(|c| c.status.as_ref()?.node_name.clone())
        .collect();
    let candidates: Vec<_> = ctx
        .state
        .nodes
        .state()
        .into_iter()
        .filter(|n| n.meta().deletion_timestamp.is_none() && tainted(n))
        .filter(|n| age_secs(n, now) >= grace && !claimed_names.contains(&n.name_any()))
        .filter_map(|n| {
            let pid = n.spec.as_ref()?.provider_id.clone()?;
            (!claimed_ids.contains(&pid)).then_some((n, pid))
        })
        .collect();
    if candidates.is_empty() {
        return Ok(0);
    }
    let catalogs = ctx.catalogs().await;
    let resources: BTreeSet<_> = catalogs
        .by_nodeclass
        .values()
        .flat_map(|c| c.resources.keys().cloned())
        .collect();
    let machines = ctx.cloud.unbound_machines(&resources).await?;
    let mut released = 0;
    for (node, pid) in candidates {
        let Some((resource, machine)) = machines.get(&pid) else {
            continue;
        };
        let taints: Vec<_> = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.key != wellknown::UNREGISTERED_TAINT_KEY)
            .collect();
        let key = capi_adapter::MachineKey {
            namespace: machine.namespace.clone(),
            name: machine.name.clone(),
        };
        ctx.cloud.release_machine_taint(machine.api, &key).await?;
        crate::termination::patch_taints(&node, taints, ctx).await?;
        released += 1;
        tracing::info!(node = %node.name_any(), machine = %machine.name, %resource, "removed the unregistered taint from a node no NodeClaim claims");
        ctx.event(
            &node.object_ref(&()),
            false,
            "UnregisteredTaintRemoved",
            "Release",
            format!(
                "no NodeClaim claimed this node within {grace} s of joining; its Machine {}/{} of {resource} was created outside the autoscaler (a rollout, a remediation or min size), so it takes pods like any node",
                machine.namespace, machine.name
            ),
        )
        .await;
    }
    Ok(released)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeSpec, Taint};

    fn node(taints: &[&str]) -> Node {
        Node {
            spec: Some(NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|k| Taint {
                            key: (*k).into(),
                            effect: "NoExecute".into(),
                            ..Taint::default()
                        })
                        .collect(),
                ),
                ..NodeSpec::default()
            }),
            ..Node::default()
        }
    }

    #[test]
    fn only_the_unregistered_taint_counts() {
        assert!(tainted(&node(&[wellknown::UNREGISTERED_TAINT_KEY, "x"])));
        assert!(!tainted(&node(&["x"])));
        assert!(!tainted(&Node::default()));
    }

    #[test]
    fn a_node_without_a_creation_time_is_young() {
        assert_eq!(age_secs(&Node::default(), 1_000), 0);
    }
}
