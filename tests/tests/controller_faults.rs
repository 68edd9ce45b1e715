//! The controller when things go wrong: a node that never registers, a Machine the cloud has
//! no capacity for, a drain a PodDisruptionBudget blocks, the leader going away, and a
//! restart between the scale write and the binding. Real API server; the test plays CAPI, the kubelet and the scheduler.

mod adapter_support;
mod controller_support;

use std::time::Duration;

use capi_adapter::{ResourceId, ResourceKind, keys};
use controller_support::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use karpenter_api::{NodeClaim, wellknown};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

const T: Duration = Duration::from_secs(60);

async fn setup(client: &kube::Client, prefix: &str, consolidate: bool) -> (String, ResourceId) {
    let ns = testenv::namespace(client, prefix).await;
    adapter_support::create_md(client, &ns, "workers", 0, &md_annotations("2")).await;
    scope_md(client, &ns, "workers", &ns).await;
    let disruption = if consolidate {
        json!({"consolidateAfter": "0s"})
    } else {
        json!({"consolidateAfter": "Never"})
    };
    nodeclass_and_pool(client, &ns, disruption).await;
    let id = ResourceId::new(ResourceKind::MachineDeployment, &ns, "workers");
    (ns, id)
}

async fn replicas_are(client: &kube::Client, id: &ResourceId, n: i32) {
    eventually(T, &format!("replicas == {n}"), || async {
        (adapter_support::replicas(client, id).await == n).then_some(())
    })
    .await;
}

/// One pending pod: its first claim, the resource at one replica, and the Machine CAPI makes
/// for it (played once).
async fn first_launch(client: &kube::Client, ns: &str, id: &ResourceId) -> NodeClaim {
    unschedulable_pod(client, ns, "web", ns, "500m").await;
    let first = eventually(T, "first nodeclaim", || async {
        claims(client, ns).await.into_iter().next()
    })
    .await;
    replicas_are(client, id, 1).await;
    play_machineset(client, ns, "workers").await;
    first
}

#[tokio::test]
async fn a_node_that_never_registers_is_replaced() {
    let client = testenv::client().await;
    let (ns, id) = setup(&client, "ctl-regto", false).await;
    let mut o = options(&ns);
    o.registration_timeout = Duration::from_secs(4);
    let running = start(&client, o).await;
    // CAPI makes the Machine, but no node ever registers.
    let first = first_launch(&client, &ns, &id).await;
    // After the timeout the claim goes; its Machine is annotated and replicas lowered.
    replicas_are(&client, &id, 0).await;
    play_machineset(&client, &ns, "workers").await;
    // The pod is still pending: another claim is launched.
    let second = eventually(T, "a second nodeclaim", || async {
        claims(&client, &ns)
            .await
            .into_iter()
            .find(|c| c.name_any() != first.name_any())
    })
    .await;
    eventually(T, "the first claim gone", || async {
        claims(&client, &ns)
            .await
            .iter()
            .all(|c| c.name_any() != first.name_any())
            .then_some(())
    })
    .await;
    replicas_are(&client, &id, 1).await;
    assert_ne!(first.name_any(), second.name_any());
    let text = running.ctx.metrics.encode();
    assert!(
        text.contains(&format!(
            "karpenter_nodeclaims_terminated_total{{nodepool=\"{ns}\",reason=\"liveness\"}} 1"
        )),
        "{text}"
    );
    running.stop();
}

/// Plays an infrastructure provider that retries a failed instance create (CAPA's AWSMachine
/// `InstanceReady=False/InstanceProvisionFailed`, which CAPI mirrors into the Machine's
/// `InfrastructureReady`): a condition with the error, no failureReason, no providerID.
async fn infrastructure_retries(client: &kube::Client, ns: &str, machine: &str, error: &str) {
    use kube::api::{Patch, PatchParams};
    let api = Api::<capi_adapter::objects::capi::Machine>::namespaced_with(
        client.clone(),
        ns,
        &adapter_support::V,
    );
    let status = json!({"status": {"conditions": [{
        "type": "InfrastructureReady", "status": "False",
        "reason": "InstanceProvisionFailed", "message": error,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    api.patch_status(machine, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch machine status");
}

/// A Machine whose provider keeps retrying an out-of-capacity error is given up as soon as
/// the error shows, not after the providerID or registration timeout (here an hour each);
/// an error that is not about capacity (throttling) is left to the provider's retries.
#[tokio::test]
async fn a_machine_the_cloud_has_no_capacity_for_is_given_up_at_once() {
    let client = testenv::client().await;
    let (ns, id) = setup(&client, "ctl-ice", false).await;
    let mut o = options(&ns);
    o.registration_timeout = Duration::from_secs(3600);
    o.cloud.provider_id_timeout_secs = 3600;
    let running = start(&client, o).await;
    let first = first_launch(&client, &ns, &id).await;
    let machine = eventually(T, "bound machine", || async {
        machines(&client, &ns, "workers")
            .await
            .into_iter()
            .find(|m| m.labels().get(keys::ours::NODECLAIM_LABEL) == Some(&first.name_any()))
    })
    .await;

    infrastructure_retries(
        &client,
        &ns,
        &machine.name_any(),
        "failed to create AWSMachine instance: RequestLimitExceeded: Request limit exceeded.",
    )
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let now: Vec<String> = claims(&client, &ns)
        .await
        .iter()
        .map(|c| c.name_any())
        .collect();
    assert_eq!(
        now,
        vec![first.name_any()],
        "throttling is not a failed launch"
    );
    assert_eq!(adapter_support::replicas(&client, &id).await, 1);

    infrastructure_retries(
        &client,
        &ns,
        &machine.name_any(),
        "failed to create AWSMachine instance: InsufficientInstanceCapacity: We currently do \
         not have sufficient m5.large capacity in the Availability Zone you requested \
         (us-east-1a).",
    )
    .await;
    replicas_are(&client, &id, 0).await;
    // CAPI deletes the Machine annotated for deletion; then the claim's finalizer lets go.
    eventually(T, "the claim gone", || async {
        play_machineset(&client, &ns, "workers").await;
        claims(&client, &ns)
            .await
            .iter()
            .all(|c| c.name_any() != first.name_any())
            .then_some(())
    })
    .await;
    // The only resource is backed off: the pod waits rather than relaunching the same shape.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        claims(&client, &ns).await.is_empty(),
        "no relaunch into a backed-off resource"
    );
    assert_eq!(adapter_support::replicas(&client, &id).await, 0);
    let text = running.ctx.metrics.encode();
    assert!(
        text.contains(&format!(
            "karpenter_nodeclaims_terminated_total{{nodepool=\"{ns}\",reason=\"launch_failed\"}} 1"
        )),
        "{text}"
    );
    running.stop();
}

/// Launch, register and initialize one node for a pod; returns (claim, node).
async fn one_running_node(client: &kube::Client, ns: &str, pod: &str) -> (NodeClaim, String) {
    unschedulable_pod(client, ns, pod, ns, "500m").await;
    let claim = eventually(T, "nodeclaim", || async {
        claims(client, ns).await.into_iter().next()
    })
    .await;
    let machine = eventually(T, "bound machine", || async {
        play_machineset(client, ns, "workers").await;
        machines(client, ns, "workers")
            .await
            .into_iter()
            .find(|m| m.labels().get(keys::ours::NODECLAIM_LABEL) == Some(&claim.name_any()))
    })
    .await;
    let (node, _) = provision(client, ns, &machine.name_any(), "2").await;
    let claim = eventually(T, "initialized", || async {
        claims(client, ns)
            .await
            .into_iter()
            .find(|c| condition(c, "Initialized"))
    })
    .await;
    bind(client, ns, pod, &node).await;
    (claim, node)
}

#[tokio::test]
async fn termination_waits_for_a_pdb_then_removes_the_machine() {
    let client = testenv::client().await;
    let (ns, id) = setup(&client, "ctl-pdb", false).await;
    let running = start(&client, options(&ns)).await;
    let (claim, node) = one_running_node(&client, &ns, "db").await;
    // No disruption controller runs here, so the PDB's status is never observed and the
    // Eviction API refuses (429) every eviction it covers, as a PDB at its limit does.
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}}
    }))
    .expect("pdb");
    pdbs.create(&PostParams::default(), &pdb)
        .await
        .expect("create pdb");
    let nc_api: Api<NodeClaim> = Api::all(client.clone());
    nc_api
        .delete(&claim.name_any(), &DeleteParams::default())
        .await
        .expect("delete nodeclaim");
    let nodes: Api<Node> = Api::all(client.clone());
    eventually(T, "node tainted disrupted", || async {
        let n = nodes.get(&node).await.ok()?;
        n.spec?
            .taints?
            .iter()
            .any(|t| t.key == wellknown::DISRUPTED_TAINT_KEY)
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let p = pods.get("db").await.expect("pod still there");
    assert!(
        p.meta().deletion_timestamp.is_none(),
        "the PDB held the eviction"
    );
    assert!(
        nc_api
            .get_opt(&claim.name_any())
            .await
            .expect("get")
            .is_some()
    );
    assert_eq!(
        adapter_support::replicas(&client, &id).await,
        1,
        "machine kept while draining"
    );
    // The PDB goes: the pod is evicted; the kubelet (us) finishes it; the Machine goes.
    pdbs.delete("db", &DeleteParams::default())
        .await
        .expect("delete pdb");
    eventually(T, "pod evicted", || async {
        pods.get_opt("db")
            .await
            .ok()?
            .is_none_or(|p| p.meta().deletion_timestamp.is_some())
            .then_some(())
    })
    .await;
    force_delete_pod(&client, &ns, "db").await;
    replicas_are(&client, &id, 0).await;
    play_machineset(&client, &ns, "workers").await;
    eventually(T, "claim and node gone", || async {
        let c = nc_api.get_opt(&claim.name_any()).await.ok()?;
        let n = nodes.get_opt(&node).await.ok()?;
        (c.is_none() && n.is_none()).then_some(())
    })
    .await;
    running.stop();
}

#[tokio::test]
async fn only_the_leader_acts_and_the_other_takes_over() {
    let client = testenv::client().await;
    let (ns, _id) = setup(&client, "ctl-lead", false).await;
    let opts = |who: &str| {
        let mut o = options(&ns);
        o.leader_elect = true;
        o.leader_election_namespace = ns.clone();
        o.identity = format!("{who}-{ns}");
        o
    };
    let a = start(&client, opts("a")).await;
    let b = start(&client, opts("b")).await;
    let (leader, standby) = eventually(T, "a leader", || async {
        match (a.ctx.is_leader(), b.ctx.is_leader()) {
            (true, false) => Some(("a", "b")),
            (false, true) => Some(("b", "a")),
            _ => None,
        }
    })
    .await;
    unschedulable_pod(&client, &ns, "web", &ns, "500m").await;
    eventually(T, "a nodeclaim", || async {
        claims(&client, &ns).await.into_iter().next()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        claims(&client, &ns).await.len(),
        1,
        "one claim, not one per replica"
    );
    let (gone, stays) = if leader == "a" { (a, b) } else { (b, a) };
    assert!(!stays.ctx.is_leader(), "{standby} waits");
    gone.stop();
    eventually(
        Duration::from_secs(60),
        "the standby takes over",
        || async { stays.ctx.is_leader().then_some(()) },
    )
    .await;
    // The new leader acts: a second pod that needs a node of its own gets a claim.
    unschedulable_pod(&client, &ns, "big", &ns, "1800m").await;
    eventually(T, "a claim from the new leader", || async {
        (claims(&client, &ns).await.len() == 2).then_some(())
    })
    .await;
    stays.stop();
}

#[tokio::test]
async fn a_restart_after_the_scale_write_adds_no_replica() {
    let client = testenv::client().await;
    let (ns, id) = setup(&client, "ctl-restart", false).await;
    let first = start(&client, options(&ns)).await;
    unschedulable_pod(&client, &ns, "web", &ns, "500m").await;
    replicas_are(&client, &id, 1).await;
    // Killed after the scale write, before CAPI made the Machine (so before any binding).
    first.stop();
    let second = start(&client, options(&ns)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        adapter_support::replicas(&client, &id).await,
        1,
        "no second replica"
    );
    play_machineset(&client, &ns, "workers").await;
    let claim = eventually(T, "the restarted controller binds the machine", || async {
        claims(&client, &ns)
            .await
            .into_iter()
            .find(|c| condition(c, "Launched"))
    })
    .await;
    assert_eq!(claims(&client, &ns).await.len(), 1);
    assert_eq!(machines(&client, &ns, "workers").await.len(), 1);
    assert_eq!(adapter_support::replicas(&client, &id).await, 1);
    assert!(
        claim
            .annotations()
            .contains_key(keys::capi::MACHINE_ANNOTATION)
    );
    second.stop();
}
