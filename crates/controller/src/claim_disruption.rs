//! What disruption needs to know about each NodeClaim, kept on the NodeClaim as upstream
//! keeps it (so `kubectl get nodeclaims`, dashboards and the core read the same facts):
//!
//! - `status.lastPodEventTime`: when a pod was last bound to the node, or went terminal or
//!   terminating there (deduplicated to 10 s, as upstream). `consolidateAfter` counts from it;
//!   without it the core counts from the claim's creation, and a node that emptied a second
//!   ago is consolidated at once whatever `consolidateAfter` says.
//! - `Consolidatable`: True once `consolidateAfter` has passed since that event (or since
//!   initialization); absent when consolidation is off (`Never`) or the claim is not
//!   initialized.
//! - `Drifted`, with the first reason found: `NodePoolDrifted` (the NodePool's template hash
//!   differs from the one stamped on the claim at creation), `RequirementsDrifted` (a label
//!   the claim launched with no longer satisfies the NodePool's requirements), or the cloud
//!   provider's reason (the Machine was made from an older template of its resource; not
//!   under the NodeClass drift policy `CAPIRollout`). The core turns Drifted claims into
//!   drift commands within the `Drifted` budgets.
//! - `karpenter.sh/nodepool-hash` (+ `-version`) on NodePools and on claims that lack it.
//!
//! Writes carry the object's resourceVersion: a claim changed since the reflector saw it (the
//! lifecycle reconciler writes conditions too) is skipped this round, never overwritten.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use karpenter_api::nodeclass::DriftPolicy;
use karpenter_api::{NodeClaim, NodePool, wellknown};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::catalogs::Catalogs;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::nodeclaims::{condition, is_true, set_condition};
use crate::state::StoredPod;

/// Our hash's version. Not upstream's `v3`: the digest differs from upstream's hashstructure,
/// so claims stamped by upstream Karpenter are re-stamped instead of all looking drifted.
pub const HASH_VERSION: &str = "capi-v1";

/// Pod events closer together than this update `lastPodEventTime` once (upstream's dedupe).
const POD_EVENT_DEDUPE_SECS: i64 = 10;

/// A digest of the NodePool template fields whose change makes existing nodes drift: the
/// template's labels and annotations, taints, startup taints, NodeClass reference, expireAfter
/// and terminationGracePeriod. Requirements are left out (checked against the claim's labels
/// instead, so widening a requirement drifts nothing), as are budgets and the disruption
/// block. Empty lists and maps count as absent, and taints as sets, so re-ordering or an
/// explicit `[]` in a manifest is not a change.
pub fn nodepool_hash(np: &NodePool) -> String {
    let t = &np.spec.template;
    let meta = t.metadata.as_ref();
    let taints = |ts: &Option<Vec<k8s_openapi::api::core::v1::Taint>>| {
        let mut v: Vec<String> = ts
            .iter()
            .flatten()
            .map(|t| {
                format!(
                    "{}={}:{}",
                    t.key,
                    t.value.as_deref().unwrap_or(""),
                    t.effect
                )
            })
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let map = |m: Option<&BTreeMap<String, String>>| m.filter(|m| !m.is_empty()).cloned();
    let doc = json!({
        "labels": map(meta.and_then(|m| m.labels.as_ref())),
        "annotations": map(meta.and_then(|m| m.annotations.as_ref())),
        "taints": taints(&t.spec.taints),
        "startupTaints": taints(&t.spec.startup_taints),
        "nodeClassRef": t.spec.node_class_ref,
        "expireAfter": t.spec.expire_after,
        "terminationGracePeriod": t.spec.termination_grace_period,
    });
    let text = capi_adapter::resource::canonical_json(&doc);
    format!("{}", capi_adapter::resource::fnv1a64(text.as_bytes()))
}

/// `RequirementsDrifted` when a label the claim carries violates a NodePool requirement.
/// A requirement whose key the claim has no label for is not drift: the claim may simply not
/// have been labelled with it (a key the provider never sets), and a false drift would replace
/// every node of the pool.
pub fn requirements_drifted(pool: &provisioner_core::NodePool, claim: &NodeClaim) -> bool {
    let labels = claim.labels();
    pool.requirements.iter().any(|r| {
        labels
            .get(&r.key)
            .is_some_and(|v| !r.matches_value(Some(v.as_str())))
    })
}

/// Whether the claim's stamped hash says its NodePool template changed since launch. A claim
/// without a stamp, or stamped by another hash version, is not drifted (it gets re-stamped).
pub fn nodepool_drifted(np: &NodePool, claim: &NodeClaim) -> bool {
    let a = claim.annotations();
    a.get(wellknown::NODEPOOL_HASH_VERSION_ANNOTATION)
        .map(String::as_str)
        == Some(HASH_VERSION)
        && a.get(wellknown::NODEPOOL_HASH_ANNOTATION)
            .is_some_and(|h| *h != nodepool_hash(np))
}

/// `Some(true)`: Consolidatable should be True; `Some(false)`: not yet (absent); `None`:
/// consolidation is off or the claim is not initialized (absent). `consolidate_after` as the
/// core reads it (`None` for `Never`).
pub fn consolidatable(consolidate_after: Option<i64>, claim: &NodeClaim, now: i64) -> bool {
    let Some(after) = consolidate_after else {
        return false;
    };
    let conds = claim.status.as_ref().and_then(|s| s.conditions.as_ref());
    let Some(initialized) = conds
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Initialized" && c.status == "True")
    else {
        return false;
    };
    let since = claim
        .status
        .as_ref()
        .and_then(|s| s.last_pod_event_time.as_ref())
        .map_or(initialized.last_transition_time.0.as_second(), |t| {
            t.0.as_second()
        });
    now - since >= after
}

/// What the pods on one node look like to pod events: which are there, and which are
/// terminal or terminating. A change of this between two rounds is a pod event.
fn pod_fingerprint(pods: &[&StoredPod]) -> u64 {
    let mut keys: Vec<(&str, bool, bool)> = pods
        .iter()
        .map(|p| (p.uid.as_deref().unwrap_or_default(), p.terminal, p.deleting))
        .collect();
    keys.sort();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    keys.hash(&mut h);
    h.finish()
}

/// What the loop remembers between rounds (nothing a restart needs: a missed pod event only
/// delays consolidation by the next event, and provider drift is re-checked).
#[derive(Default)]
struct Memory {
    /// Node name -> pods fingerprint seen last round.
    pods: HashMap<String, u64>,
    /// Claim name -> when the provider's drift was last asked, and its answer.
    provider: HashMap<String, (tokio::time::Instant, Option<String>)>,
}

/// Runs every `disruption_interval` (10 s by default) while leader.
pub async fn run(ctx: Arc<Context>) {
    let mut memory = Memory::default();
    loop {
        tokio::time::sleep(ctx.options.disruption_interval).await;
        if !ctx.is_leader() || !ctx.state.synced() {
            continue;
        }
        if let Err(e) = tick(&ctx, &mut memory).await {
            tracing::warn!(error = %e, "nodeclaim disruption conditions round failed");
        }
    }
}

async fn tick(ctx: &Arc<Context>, memory: &mut Memory) -> Result<()> {
    let now = Context::now();
    let pools: BTreeMap<String, Arc<NodePool>> = ctx
        .nodepools()
        .into_iter()
        .map(|np| (np.name_any(), np))
        .collect();
    for np in pools.values() {
        stamp_nodepool(ctx, np).await;
    }
    let policies: BTreeMap<String, DriftPolicy> = ctx
        .nodeclasses()
        .iter()
        .map(|nc| (nc.name_any(), nc.spec.drift_policy.unwrap_or_default()))
        .collect();

    let all_pods = ctx.state.pods.state();
    let mut by_node: HashMap<&str, Vec<&StoredPod>> = HashMap::new();
    for p in &all_pods {
        if let Some(n) = p.node_name()
            && !p.is_daemon()
        {
            by_node.entry(n).or_default().push(p);
        }
    }

    let claims = ctx.nodeclaims();
    let live: std::collections::HashSet<String> = claims.iter().map(|c| c.name_any()).collect();
    memory.provider.retain(|k, _| live.contains(k));
    let mut seen_nodes = std::collections::HashSet::new();
    for claim in &claims {
        if claim.meta().deletion_timestamp.is_some() {
            continue;
        }
        let Some(np) = claim
            .labels()
            .get(wellknown::NODEPOOL_LABEL)
            .and_then(|p| pools.get(p))
        else {
            continue;
        };
        let node = claim.status.as_ref().and_then(|s| s.node_name.clone());
        let mut fingerprint = None;
        let pod_event = match &node {
            Some(n) => {
                seen_nodes.insert(n.clone());
                let fp = pod_fingerprint(by_node.get(n.as_str()).map_or(&[][..], |v| v));
                fingerprint = Some((n.clone(), fp));
                match memory.pods.get(n) {
                    Some(before) => *before != fp,
                    // First sight (a new node, or after a restart): pods already there with no
                    // event recorded were bound while we were not looking.
                    None => {
                        by_node.contains_key(n.as_str())
                            && claim
                                .status
                                .as_ref()
                                .is_some_and(|s| s.last_pod_event_time.is_none())
                    }
                }
            }
            None => false,
        };
        let provider = provider_drift(ctx, claim, np, &policies, memory).await;
        match reconcile_claim(ctx, claim, np, pod_event, provider, now).await {
            // Remembered only once written: a refused write (a newer claim) retries the event.
            Ok(()) => {
                if let Some((n, fp)) = fingerprint {
                    memory.pods.insert(n, fp);
                }
            }
            Err(e) => {
                tracing::debug!(nodeclaim = %claim.name_any(), error = %e, "disruption conditions not updated; retried next round")
            }
        }
    }
    memory.pods.retain(|n, _| seen_nodes.contains(n));
    Ok(())
}

/// The provider's drift reason, asked at most every `drift_check_interval` per claim (each
/// ask reads the claim, its Machine and its resource from the API).
async fn provider_drift(
    ctx: &Context,
    claim: &NodeClaim,
    np: &NodePool,
    policies: &BTreeMap<String, DriftPolicy>,
    memory: &mut Memory,
) -> Option<String> {
    if !is_true(claim, "Launched") {
        return None;
    }
    let name = claim.name_any();
    if let Some((at, answer)) = memory.provider.get(&name)
        && at.elapsed() < ctx.options.drift_check_interval
    {
        return answer.clone();
    }
    let policy = match Catalogs::nodeclass_of(np).and_then(|nc| policies.get(&nc)) {
        Some(DriftPolicy::CapiRollout) => capi_adapter::DriftPolicy::CAPIRollout,
        _ => capi_adapter::DriftPolicy::Karpenter,
    };
    let answer = match ctx.cloud.drift(&name, policy).await {
        Ok(r) => r.map(|r| drift_reason_word(&r)),
        Err(e) => {
            tracing::debug!(nodeclaim = %name, error = %e, "could not ask the provider about drift");
            return memory.provider.get(&name).and_then(|(_, a)| a.clone());
        }
    };
    memory
        .provider
        .insert(name, (tokio::time::Instant::now(), answer.clone()));
    answer
}

/// The Drifted condition's reason for the provider's drift (the message says the detail).
fn drift_reason_word(r: &capi_adapter::drift::DriftReason) -> String {
    use capi_adapter::drift::DriftReason as D;
    match r {
        D::OldRevision { .. } => "MachineDeploymentRolledOut",
        D::TemplateChanged { .. } => "MachineTemplateDrifted",
        D::VersionChanged { .. } => "KubernetesVersionDrifted",
        D::FailureDomainChanged { .. } => "FailureDomainDrifted",
    }
    .to_string()
}

async fn reconcile_claim(
    ctx: &Context,
    claim: &NodeClaim,
    np: &NodePool,
    pod_event: bool,
    provider: Option<String>,
    now: i64,
) -> Result<()> {
    let name = claim.name_any();
    let status = claim.status.clone().unwrap_or_default();
    let previous = status.conditions.as_ref();
    let mut conds: Vec<Condition> = previous.cloned().unwrap_or_default();
    let mut status_patch = serde_json::Map::new();

    let mut last_pod_event = status.last_pod_event_time.clone();
    if pod_event
        && last_pod_event
            .as_ref()
            .is_none_or(|t| now - t.0.as_second() >= POD_EVENT_DEDUPE_SECS)
    {
        let t = Time(k8s_openapi::jiff::Timestamp::now());
        status_patch.insert("lastPodEventTime".into(), json!(t));
        last_pod_event = Some(t);
    }

    let pool = kcapi_snapshot::nodepool::nodepool(np, "nodepool")
        .map_err(|e| Error::Invalid(format!("NodePool {}: {e}", np.name_any())))?;
    let mut view = claim.clone();
    if let Some(s) = view.status.as_mut() {
        s.last_pod_event_time = last_pod_event;
    }
    let want_consolidatable = consolidatable(pool.disruption.consolidate_after_secs, &view, now);
    if want_consolidatable {
        set_condition(
            &mut conds,
            condition(previous, "Consolidatable", true, "Consolidatable", "", None),
        );
    } else {
        conds.retain(|c| c.type_ != "Consolidatable");
    }

    let drift = if !is_true(claim, "Launched") {
        None
    } else if nodepool_drifted(np, claim) {
        Some((
            "NodePoolDrifted".to_string(),
            "the NodePool's template changed since launch".to_string(),
        ))
    } else if requirements_drifted(&pool, claim) {
        Some((
            "RequirementsDrifted".to_string(),
            "a label of the claim no longer satisfies the NodePool's requirements".to_string(),
        ))
    } else {
        provider.map(|r| {
            (
                r,
                "the Machine was made from an older template of its resource".to_string(),
            )
        })
    };
    match &drift {
        Some((reason, message)) => set_condition(
            &mut conds,
            condition(previous, "Drifted", true, reason, message, None),
        ),
        None => conds.retain(|c| c.type_ != "Drifted"),
    }

    let changed = |a: Option<&Vec<Condition>>, b: &Vec<Condition>| {
        let key = |c: &Condition| (c.type_.clone(), c.status.clone(), c.reason.clone());
        let mut x: Vec<_> = a.into_iter().flatten().map(key).collect();
        let mut y: Vec<_> = b.iter().map(key).collect();
        x.sort();
        y.sort();
        x != y
    };
    let api: Api<NodeClaim> = Api::all(ctx.workload.clone());
    let rv = claim.resource_version();
    if changed(previous, &conds) {
        if let Some((reason, _)) = &drift
            && !previous
                .into_iter()
                .flatten()
                .any(|c| c.type_ == "Drifted" && c.status == "True")
        {
            tracing::info!(nodeclaim = %name, reason, "marking drifted");
        }
        status_patch.insert("conditions".into(), json!(conds));
    }
    if !status_patch.is_empty() {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({
                "metadata": {"resourceVersion": rv},
                "status": status_patch,
            })),
        )
        .await?;
        return Ok(());
    }
    // Stamp the hash on claims created before we stamped at creation (or by upstream).
    let a = claim.annotations();
    if a.get(wellknown::NODEPOOL_HASH_VERSION_ANNOTATION)
        .map(String::as_str)
        != Some(HASH_VERSION)
    {
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({
                "metadata": {
                    "resourceVersion": rv,
                    "annotations": {
                        wellknown::NODEPOOL_HASH_ANNOTATION: nodepool_hash(np),
                        wellknown::NODEPOOL_HASH_VERSION_ANNOTATION: HASH_VERSION,
                    }
                }
            })),
        )
        .await?;
    }
    Ok(())
}

/// Puts the current template hash on the NodePool, as upstream's hash controller does (what
/// the claims' stamps are compared with, visible to users).
async fn stamp_nodepool(ctx: &Context, np: &NodePool) {
    let hash = nodepool_hash(np);
    let a = np.annotations();
    if a.get(wellknown::NODEPOOL_HASH_ANNOTATION) == Some(&hash)
        && a.get(wellknown::NODEPOOL_HASH_VERSION_ANNOTATION)
            .map(String::as_str)
            == Some(HASH_VERSION)
    {
        return;
    }
    let api: Api<NodePool> = Api::all(ctx.workload.clone());
    if let Err(e) = api
        .patch(
            &np.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"annotations": {
                wellknown::NODEPOOL_HASH_ANNOTATION: hash,
                wellknown::NODEPOOL_HASH_VERSION_ANNOTATION: HASH_VERSION,
            }}})),
        )
        .await
    {
        tracing::debug!(nodepool = %np.name_any(), error = %e, "could not stamp the nodepool hash");
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Taint;
    use karpenter_api::NodeClaimStatus;

    fn base() -> NodePool {
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"template": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "default"},
                    "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
                    "taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "value": "x", "effect": "NoExecute"}],
                }
            }}
        }))
        .expect("nodepool")
    }

    #[test]
    fn hash_ignores_requirements_order_and_empty_lists_but_not_labels_or_taints() {
        let base = base();
        let h = nodepool_hash(&base);

        let mut widened = base.clone();
        widened.spec.template.spec.requirements[0]
            .values
            .as_mut()
            .expect("set above")
            .push("spot".into());
        assert_eq!(nodepool_hash(&widened), h, "requirements are not hashed");

        let mut reordered = base.clone();
        reordered
            .spec
            .template
            .spec
            .taints
            .as_mut()
            .expect("set above")
            .reverse();
        reordered.spec.template.spec.startup_taints = Some(vec![]);
        assert_eq!(
            nodepool_hash(&reordered),
            h,
            "taints are a set; [] is absent"
        );

        let mut relabelled = base.clone();
        relabelled
            .spec
            .template
            .metadata
            .as_mut()
            .expect("set above")
            .labels
            .as_mut()
            .expect("set above")
            .insert("team".into(), "b".into());
        assert_ne!(nodepool_hash(&relabelled), h);

        let mut tainted = base.clone();
        tainted
            .spec
            .template
            .spec
            .taints
            .as_mut()
            .expect("set above")
            .push(Taint {
                key: "c".into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            });
        assert_ne!(nodepool_hash(&tainted), h);

        let mut budgets = base.clone();
        budgets.spec.disruption =
            Some(serde_json::from_value(json!({"consolidateAfter": "1h"})).expect("disruption"));
        assert_eq!(
            nodepool_hash(&budgets),
            h,
            "the disruption block is not hashed"
        );
    }

    /// A NodeClaim `c` with these labels and annotations (other modules' tests use it too).
    pub(crate) fn claim(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> NodeClaim {
        let mut c: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "c"},
            "spec": {
                "nodeClassRef": {"group": "karpenter.cluster.x-k8s.io", "kind": "ClusterAPINodeClass", "name": "default"},
                "requirements": [],
            }
        }))
        .expect("claim");
        c.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        c.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        c
    }

    #[test]
    fn nodepool_drift_needs_our_stamp_and_a_different_hash() {
        let np = base();
        let h = nodepool_hash(&np);
        let same = claim(
            &[],
            &[
                (wellknown::NODEPOOL_HASH_ANNOTATION, &h),
                (wellknown::NODEPOOL_HASH_VERSION_ANNOTATION, HASH_VERSION),
            ],
        );
        assert!(!nodepool_drifted(&np, &same));
        let old = claim(
            &[],
            &[
                (wellknown::NODEPOOL_HASH_ANNOTATION, "123"),
                (wellknown::NODEPOOL_HASH_VERSION_ANNOTATION, HASH_VERSION),
            ],
        );
        assert!(nodepool_drifted(&np, &old));
        let upstream = claim(
            &[],
            &[
                (wellknown::NODEPOOL_HASH_ANNOTATION, "123"),
                (wellknown::NODEPOOL_HASH_VERSION_ANNOTATION, "v3"),
            ],
        );
        assert!(!nodepool_drifted(&np, &upstream), "re-stamped, not drifted");
        assert!(!nodepool_drifted(&np, &claim(&[], &[])));
    }

    #[test]
    fn requirements_drift_only_on_a_violating_label() {
        let np = base();
        let core = kcapi_snapshot::nodepool::nodepool(&np, "np").expect("convert");
        let ok = claim(&[(wellknown::CAPACITY_TYPE_LABEL, "on-demand")], &[]);
        assert!(!requirements_drifted(&core, &ok));
        let spot = claim(&[(wellknown::CAPACITY_TYPE_LABEL, "spot")], &[]);
        assert!(requirements_drifted(&core, &spot));
        assert!(
            !requirements_drifted(&core, &claim(&[], &[])),
            "an absent label is not drift"
        );
    }

    fn initialized_at(mut c: NodeClaim, at: i64, last_pod_event: Option<i64>) -> NodeClaim {
        let t = |s: i64| Time(k8s_openapi::jiff::Timestamp::from_second(s).expect("time"));
        c.status = Some(NodeClaimStatus {
            conditions: Some(vec![Condition {
                type_: "Initialized".into(),
                status: "True".into(),
                reason: "Initialized".into(),
                message: String::new(),
                observed_generation: None,
                last_transition_time: t(at),
            }]),
            last_pod_event_time: last_pod_event.map(t),
            ..Default::default()
        });
        c
    }

    #[test]
    fn consolidatable_counts_from_the_last_pod_event_else_initialization() {
        let base = claim(&[], &[]);
        assert!(!consolidatable(Some(0), &base, 1_000), "not initialized");
        let c = initialized_at(base.clone(), 1_000, None);
        assert!(!consolidatable(None, &c, 10_000), "Never");
        assert!(!consolidatable(Some(300), &c, 1_299));
        assert!(consolidatable(Some(300), &c, 1_300));
        let c = initialized_at(base, 1_000, Some(5_000));
        assert!(
            !consolidatable(Some(300), &c, 5_299),
            "a recent pod event resets it"
        );
        assert!(consolidatable(Some(300), &c, 5_300));
    }

    #[test]
    fn fingerprint_sees_binding_termination_and_deletion_only() {
        use k8s_openapi::api::core::v1::Pod;
        let pod = |uid: &str| {
            let mut p = Pod::default();
            p.metadata.uid = Some(uid.into());
            p
        };
        let kept = |p: &Pod| StoredPod(kcapi_snapshot::KeptPod::new(p));
        let (a, b) = (kept(&pod("a")), kept(&pod("b")));
        let b_pod = pod("b");
        let base = pod_fingerprint(&[&a, &b]);
        assert_eq!(base, pod_fingerprint(&[&b, &a]), "order does not matter");
        assert_ne!(base, pod_fingerprint(&[&a]));
        let mut done = b_pod.clone();
        done.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        assert_ne!(base, pod_fingerprint(&[&a, &kept(&done)]));
        let mut going = b_pod.clone();
        going.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        assert_ne!(base, pod_fingerprint(&[&a, &kept(&going)]));
        let mut relabelled = b_pod;
        relabelled.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
        assert_eq!(base, pod_fingerprint(&[&a, &kept(&relabelled)]));
    }
}
