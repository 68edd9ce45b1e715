//! The controller against the real API server: pending pods to a scaled MachineDeployment
//! and a NodeClaim bound to its Machine; registration and initialization when the Node
//! appears; consolidation of the node once empty, through termination, down to zero
//! replicas. The test plays CAPI, the kubelet and the scheduler (see controller_support).

mod adapter_support;
mod controller_support;

use std::time::Duration;

use capi_adapter::{ResourceId, ResourceKind, keys};
use controller_support::*;
use k8s_openapi::api::core::v1::Node;
use karpenter_api::wellknown;
use kube::{Api, ResourceExt};

const T: Duration = Duration::from_secs(60);

#[tokio::test]
async fn pending_pod_to_node_and_back_to_zero() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "ctl-life").await;
    let opts = options(&ns);
    full_cycle(&client, &client, &client, &client, &ns, opts).await;
}

/// The two-cluster setup real CAPI users run: MachineDeployments and Machines in a separate
/// management cluster (its own API server), pods, nodes and Karpenter's objects in the
/// workload cluster. Nothing CAPI-shaped exists in the workload cluster's namespace, and no
/// pod or NodeClaim in the management cluster.
#[tokio::test]
async fn the_same_cycle_with_a_separate_management_cluster() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "ctl-two").await;
    let second = testenv::second::SecondCluster::start(&ns)
        .await
        .expect("second API server");
    second.install_capi_crds().await.expect("CAPI CRDs");
    let management = second.client().await;
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(management.clone());
    nss.create(
        &Default::default(),
        &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).expect("ns"),
    )
    .await
    .expect("namespace in the management cluster");
    let opts = options(&ns);
    full_cycle(&client, &management, &client, &management, &ns, opts).await;
    let workload_mds: Api<capi_adapter::objects::capi::MachineDeployment> =
        Api::namespaced_with(client.clone(), &ns, &adapter_support::V);
    assert!(
        workload_mds
            .list(&Default::default())
            .await
            .expect("list in the workload cluster")
            .items
            .is_empty(),
        "the workload cluster has no MachineDeployment"
    );
    let mgmt_claims: Api<karpenter_api::NodeClaim> = Api::all(management.clone());
    assert!(
        mgmt_claims.list(&Default::default()).await.is_err(),
        "the management cluster does not even serve NodeClaims"
    );
}

/// The same cycle with the controller's client impersonating the ServiceAccount of the Helm
/// chart, bound to the chart's ClusterRoles and Roles: the API server's real authorizer
/// refuses whatever the chart does not grant, so a missing permission fails this test.
#[tokio::test]
async fn the_same_cycle_under_the_charts_service_account() {
    under_the_charts_service_account("ctl-rbac", false).await;
}

/// The same with `management.namespaces` set: the management identity gets Roles in those
/// namespaces only (as on OpenShift and HyperShift), and the controller lists scalable
/// resources there (`--cluster-api-namespace`), never cluster-wide.
#[tokio::test]
async fn the_same_cycle_under_namespaced_management_roles() {
    under_the_charts_service_account("ctl-nsrbac", true).await;
}

async fn under_the_charts_service_account(prefix: &str, namespaced: bool) {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, prefix).await;
    // Cluster-scoped RBAC objects are named after the release: one per run.
    let release = format!("kc{}", &ns[ns.len() - 10..]);
    let mut set = vec![format!(
        "management.infrastructureGroups={{infrastructure.cluster.x-k8s.io,{}}}",
        controller_support::TEMPLATE_GROUP
    )];
    if namespaced {
        set.push(format!("management.namespaces={{{ns}}}"));
    }
    let yaml =
        karpenter_capi_admin::install::render(&karpenter_capi_admin::install::InstallOptions {
            release: release.clone(),
            namespace: ns.clone(),
            helm: Some(testenv::cache_dir().join("bin").join("helm")),
            // The test's infrastructure templates live in their own group.
            set,
            ..Default::default()
        })
        .expect("render the chart (helm is built by cargo xtask test)");
    let objects = karpenter_capi_admin::install::documents(&yaml).expect("chart documents");
    // The Deployment passes the namespaces on to the controller.
    if namespaced {
        assert!(
            yaml.contains(&format!("--cluster-api-namespace={ns}")),
            "{yaml}"
        );
    }
    // CRDs are installed already; the Deployment would need a kubelet: the identity is what
    // is under test.
    let rbac: Vec<_> = objects
        .into_iter()
        .filter(|o| {
            let kind = o.types.as_ref().map(|t| t.kind.as_str()).unwrap_or("");
            matches!(
                kind,
                "ServiceAccount" | "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding"
            )
        })
        .collect();
    assert!(rbac.len() >= 4, "chart RBAC objects: {}", rbac.len());
    karpenter_capi_admin::install::apply(&client, &rbac, &ns, false)
        .await
        .expect("apply the chart's RBAC");
    if !namespaced {
        let role: k8s_openapi::api::rbac::v1::ClusterRole = Api::all(client.clone())
            .get(&format!("{release}-karpenter-capi-management"))
            .await
            .expect("management ClusterRole");
        assert!(
            role.rules.iter().flatten().any(|r| r
                .api_groups
                .iter()
                .flatten()
                .any(|g| g == controller_support::TEMPLATE_GROUP)),
            "{:?}",
            role.rules
        );
    }
    let sa = format!("system:serviceaccount:{ns}:{release}-karpenter-capi");
    let kubeconfig =
        kube::config::Kubeconfig::read_from(testenv::kubeconfig_path()).expect("kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    config.auth_info.impersonate = Some(sa);
    let controller = kube::Client::try_from(config).expect("impersonating client");
    let mut opts = options(&ns);
    opts.leader_elect = true;
    opts.leader_election_namespace = ns.clone();
    if namespaced {
        opts.cloud.namespaces = Some(vec![ns.clone()]);
        // Without the namespaces the same identity cannot list at all: proof that the Roles
        // are namespaced and the test would catch a cluster-wide list.
        let all: Api<capi_adapter::objects::capi::MachineDeployment> = Api::all_with(
            controller.clone(),
            &capi_adapter::objects::capi::CapiVersion::V1Beta2,
        );
        assert!(all.list(&Default::default()).await.is_err());
    }
    full_cycle(&client, &client, &controller, &controller, &ns, opts).await;
}

/// Pending pod -> NodeClaim -> replicas 1 -> Machine bound -> Node registered and
/// initialized -> pod runs -> pod gone -> empty node consolidated -> replicas 0 -> claim and
/// node gone; every decision recorded and replayed. `client` plays everyone else;
/// `controller` is the controller's identity.
async fn full_cycle(
    client: &kube::Client,
    mgmt: &kube::Client,
    controller: &kube::Client,
    controller_mgmt: &kube::Client,
    ns: &str,
    opts: karpenter_capi_controller::Options,
) {
    let client = client.clone();
    let mgmt = mgmt.clone();
    let ns = ns.to_string();
    let scope = ns.clone();
    let md = "workers";
    adapter_support::create_md(&mgmt, &ns, md, 0, &md_annotations("2")).await;
    scope_md(&mgmt, &ns, md, &scope).await;
    nodeclass_and_pool(
        &client,
        &scope,
        serde_json::json!({"consolidateAfter": "0s", "consolidationPolicy": "WhenEmptyOrUnderutilized"}),
    )
    .await;
    let replay_dir = std::env::temp_dir().join(format!("kcapi-replay-{scope}"));
    let mut opts = opts;
    opts.replay_dir = Some(replay_dir.clone());
    let running = start_two(controller, controller_mgmt, opts).await;
    unschedulable_pod(&client, &ns, "web-1", &scope, "500m").await;

    // One NodeClaim, and replicas raised by one.
    let claim = eventually(T, "a nodeclaim for the pending pod", || async {
        claims(&client, &scope).await.into_iter().next()
    })
    .await;
    let id = ResourceId::new(ResourceKind::MachineDeployment, &ns, md);
    eventually(T, "replicas raised to 1", || async {
        (adapter_support::replicas(&mgmt, &id).await == 1).then_some(())
    })
    .await;
    assert_eq!(
        claim
            .annotations()
            .get(keys::ours::LAUNCH_TARGET)
            .map(String::as_str),
        Some(id.to_string().as_str()),
        "the claim records the resource the core chose"
    );

    // CAPI creates the Machine; the controller binds it.
    play_machineset(&mgmt, &ns, md).await;
    let machine = eventually(T, "the machine bound to the claim", || async {
        machines(&mgmt, &ns, md)
            .await
            .into_iter()
            .find(|m| m.labels().get(keys::ours::NODECLAIM_LABEL) == Some(&claim.name_any()))
    })
    .await;
    let (node_name, pid) = provision_in(&mgmt, &client, &ns, &machine.name_any(), "2").await;

    let claim = eventually(T, "claim launched, registered and initialized", || async {
        claims(&client, &scope)
            .await
            .into_iter()
            .find(|c| condition(c, "Initialized"))
    })
    .await;
    for t in ["Launched", "Registered", "Initialized", "Ready"] {
        assert!(condition(&claim, t), "{t} is True");
    }
    let status = claim.status.clone().unwrap_or_default();
    assert_eq!(status.provider_id.as_deref(), Some(pid.as_str()));
    assert_eq!(status.node_name.as_deref(), Some(node_name.as_str()));
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get(&node_name).await.expect("node");
    let labels = labels_of(&node);
    assert_eq!(labels.get(wellknown::NODEPOOL_LABEL), Some(&scope));
    assert_eq!(
        labels.get(wellknown::REGISTERED_LABEL).map(String::as_str),
        Some("true")
    );
    assert_eq!(
        labels.get(wellknown::INITIALIZED_LABEL).map(String::as_str),
        Some("true")
    );
    assert_eq!(
        labels.get(SCOPE),
        Some(&scope),
        "template labels reach the node"
    );
    assert!(
        node.finalizers()
            .iter()
            .any(|f| f == wellknown::TERMINATION_FINALIZER),
        "termination finalizer on the node"
    );
    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    assert!(
        !taints
            .iter()
            .any(|t| t.key == wellknown::UNREGISTERED_TAINT_KEY),
        "unregistered taint removed: {taints:?}"
    );

    // The pod runs there; no second claim or replica appears while it does.
    bind(&client, &ns, "web-1", &node_name).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        claims(&client, &scope).await.len(),
        1,
        "no second nodeclaim"
    );
    assert_eq!(
        adapter_support::replicas(&mgmt, &id).await,
        1,
        "no second replica"
    );

    // The pod goes: the empty node is consolidated, replicas go to 0, CAPI removes the
    // annotated Machine, and the claim and the node are gone.
    force_delete_pod(&client, &ns, "web-1").await;
    eventually(Duration::from_secs(90), "replicas lowered to 0", || async {
        (adapter_support::replicas(&mgmt, &id).await == 0).then_some(())
    })
    .await;
    let marked = machines(&mgmt, &ns, md).await;
    assert_eq!(marked.len(), 1);
    assert!(
        marked[0]
            .annotations()
            .contains_key(keys::capi::DELETE_MACHINE),
        "the machine we chose is annotated for deletion"
    );
    play_machineset(&mgmt, &ns, md).await;
    eventually(T, "nodeclaim and node gone", || async {
        let no_claims = claims(&client, &scope).await.is_empty();
        let no_node = nodes.get_opt(&node_name).await.ok().flatten().is_none();
        (no_claims && no_node).then_some(())
    })
    .await;
    let text = running.ctx.metrics.encode();
    assert!(
        text.contains(&format!(
            "karpenter_nodeclaims_created_total{{nodepool=\"{scope}\",reason=\"provisioning\"}} 1"
        )),
        "{text}"
    );
    assert!(
        text.contains("karpenter_voluntary_disruption_decisions_total"),
        "{text}"
    );
    // The records are served on the metrics address (the image has no shell for `kubectl cp`).
    let addr = karpenter_capi_controller::server::serve(
        running.ctx.clone(),
        "127.0.0.1:0".parse().expect("addr"),
    )
    .await
    .expect("serve");
    let listing = http_get(addr, "/replay").await;
    let newest = listing.lines().next().expect("a record listed").to_string();
    assert!(newest.ends_with(".json"), "{listing}");
    let body = http_get(addr, &format!("/replay/{newest}")).await;
    assert!(
        body.trim_start().starts_with('{'),
        "a JSON record: {body:.80}"
    );
    assert!(
        http_get(addr, "/replay/..%2Fetc%2Fpasswd")
            .await
            .contains("no such replay record")
    );
    running.stop();

    // Every round was recorded and replays offline to the same decision.
    let records: Vec<_> = std::fs::read_dir(&replay_dir)
        .expect("replay dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    let provisioning = records
        .iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("provisioning-"))
        })
        .count();
    assert!(provisioning >= 1, "{records:?}");
    assert!(records.iter().any(|p| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("disruption-"))
    }));
    for r in &records {
        let out = karpenter_capi_simulator::replay::replay(r).expect("replay");
        assert!(out.same, "{}: {}", r.display(), out.summary);
    }
    let _ = std::fs::remove_dir_all(&replay_dir);
}

/// A Machine the MachineDeployment made on its own (a rollout, a remediation, min size) joins
/// with the bootstrap template's unregistered taint and no NodeClaim: after the grace the
/// controller removes the taint (with an event), so the node takes pods. A tainted node whose
/// Machine belongs to no resource of ours keeps its taint.
#[tokio::test]
async fn a_node_capi_made_on_its_own_is_released_from_the_unregistered_taint() {
    let client = testenv::client().await;
    let ns = testenv::namespace(&client, "ctl-unclaimed").await;
    let scope = ns.clone();
    adapter_support::create_md(&client, &ns, "workers", 1, &md_annotations("2")).await;
    scope_md(&client, &ns, "workers", &scope).await;
    adapter_support::create_md(&client, &ns, "foreign", 1, &md_annotations("2")).await;
    nodeclass_and_pool(
        &client,
        &scope,
        serde_json::json!({"consolidateAfter": "Never"}),
    )
    .await;
    adapter_support::create_capi_machine(&client, &ns, "workers", "workers-own", "workers-set")
        .await;
    adapter_support::create_capi_machine(&client, &ns, "foreign", "foreign-own", "foreign-set")
        .await;
    let (ours, _) = provision(&client, &ns, "workers-own", "2").await;
    let (foreign, _) = provision(&client, &ns, "foreign-own", "2").await;
    let mut opts = options(&ns);
    opts.unclaimed_node_grace = Duration::from_secs(1);
    let running = start(&client, opts).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let unregistered = |n: &Node| {
        n.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|ts| {
                ts.iter()
                    .any(|t| t.key == wellknown::UNREGISTERED_TAINT_KEY)
            })
    };
    eventually(T, "the taint removed from the member's node", || async {
        let n = nodes.get(&ours).await.ok()?;
        (!unregistered(&n)).then_some(())
    })
    .await;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::all(client.clone());
    eventually(
        T,
        "an UnregisteredTaintRemoved event on the node",
        || async {
            let list = events
                .list(&kube::api::ListParams::default().fields(&format!(
                    "involvedObject.name={ours},reason=UnregisteredTaintRemoved"
                )))
                .await
                .ok()?;
            (!list.items.is_empty()).then_some(())
        },
    )
    .await;
    // The controller has had many passes; the node of the unselected resource is untouched.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(unregistered(
        &nodes.get(&foreign).await.expect("foreign node")
    ));
    // No NodeClaim was made for either: the nodes are not the autoscaler's.
    assert!(claims(&client, &scope).await.is_empty());
    running.stop();
}

/// The body of a plain HTTP/1.0 GET.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    conn.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .expect("request");
    let mut out = String::new();
    conn.read_to_string(&mut out).await.expect("response");
    out.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or(out)
}
