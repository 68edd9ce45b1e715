//! Smoke scenario: the environment works end to end without our controller. A
//! MachineDeployment at 0 replicas over the fake infrastructure is scaled by hand through the
//! scale subresource (as an autoscaler does); CAPI creates the Machines, the fake provider
//! provisions them and creates Nodes, kwok makes them Ready, kube-scheduler binds a
//! Deployment's pods to them and kwok runs them. Then one Machine is marked with
//! `cluster.x-k8s.io/delete-machine` and replicas lowered: exactly that Machine and its Node
//! go, and the pods move to the remaining node.

use std::collections::BTreeSet;
use std::time::Instant;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kcapi_fake_infra::fixtures::{
    ClusterFixture, MachineDeploymentSpec, Shape, node_ready, wait_for,
};
use kcapi_fake_infra::{Error, UNREGISTERED_TAINT};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const PODS: i32 = 4;

async fn deployment_pods(client: &Client, ns: &str) -> Result<Vec<Pod>, Error> {
    Ok(Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels("app=smoke"))
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

fn running_on(pods: &[Pod]) -> Option<BTreeSet<String>> {
    let mut nodes = BTreeSet::new();
    for pod in pods {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        match (phase, node) {
            (Some("Running"), Some(node)) => {
                nodes.insert(node);
            }
            _ => return None,
        }
    }
    Some(nodes)
}

#[tokio::test]
#[ignore = "needs the e2e environment: cargo xtask e2e"]
async fn machine_deployment_scales_through_capi_and_runs_pods() {
    let env = testenv::e2e_env();
    let client = testenv::e2e_client().await;
    let ns = testenv::namespace(&client, "e2e-smoke").await;
    let nodes: Api<Node> = Api::all(client.clone());
    let t0 = Instant::now();
    let mut lap = Instant::now();
    let mut timings = Vec::new();
    let mut mark = |what: &str| {
        timings.push(format!("{what} {:.1}s", lap.elapsed().as_secs_f64()));
        lap = Instant::now();
    };

    let cluster = ClusterFixture::create(&client, &env.kubeconfig, &ns, "smoke")
        .await
        .expect("cluster fixture");
    mark("cluster+control-plane-initialized");

    let mut spec = MachineDeploymentSpec::new("workers", Shape::new("4", "8Gi"));
    spec.price_per_hour = Some("0.20".into());
    let md = cluster.machine_deployment(&spec).await.expect("md");
    md.scale(2).await.expect("scale to 2");

    wait_for("2 Machines", 60, || async {
        Ok(md.machines().await?.len() == 2)
    })
    .await
    .expect("CAPI creates 2 Machines");
    mark("machines-created");

    wait_for("2 Machines with Ready Nodes", 120, || async {
        let with_nodes = md.machines_with_nodes().await?;
        if with_nodes.len() != 2 {
            return Ok(false);
        }
        for (_, node) in &with_nodes {
            match nodes.get_opt(node).await? {
                Some(n) if node_ready(&n) => {}
                _ => return Ok(false),
            }
        }
        Ok(true)
    })
    .await
    .expect("nodes registered and Ready");
    mark("nodes-ready");
    let machine_nodes = md.machines_with_nodes().await.expect("machines");
    for (_, node) in &machine_nodes {
        let node = nodes.get(node).await.expect("node");
        let spec = node.spec.clone().unwrap_or_default();
        assert!(
            spec.provider_id
                .as_deref()
                .is_some_and(|p| p.starts_with("fake://")),
            "{spec:?}"
        );
        assert!(
            spec.taints
                .unwrap_or_default()
                .iter()
                .any(|t| t.key == UNREGISTERED_TAINT),
            "fake nodes carry Karpenter's unregistered taint"
        );
    }

    let (key, value) = cluster.node_selector();
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "smoke" },
        "spec": {
            "replicas": PODS,
            "selector": { "matchLabels": { "app": "smoke" } },
            "template": {
                "metadata": { "labels": { "app": "smoke" } },
                "spec": {
                    "nodeSelector": { key: value },
                    // No controller registers these nodes in this scenario, so the pods
                    // tolerate the taint it would remove.
                    "tolerations": [{ "key": UNREGISTERED_TAINT, "operator": "Exists" }],
                    "containers": [{
                        "name": "app",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": { "requests": { "cpu": "500m", "memory": "256Mi" } },
                    }],
                },
            },
        },
    }))
    .expect("deployment");
    Api::<Deployment>::namespaced(client.clone(), &ns)
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create deployment");
    let node_names: BTreeSet<String> = machine_nodes.iter().map(|(_, n)| n.clone()).collect();
    wait_for(
        "pods Running on the MachineDeployment's nodes",
        120,
        || async {
            let pods = deployment_pods(&client, &ns).await?;
            Ok(pods.len() == PODS as usize
                && running_on(&pods).is_some_and(|on| on.is_subset(&node_names)))
        },
    )
    .await
    .expect("pods bound and Running");
    mark("pods-running");

    // Scale in, choosing the Machine.
    let (victim, victim_node) = machine_nodes[0].clone();
    let (keeper, keeper_node) = machine_nodes[1].clone();
    md.mark_for_deletion(&victim).await.expect("annotate");
    md.scale(1).await.expect("scale to 1");
    wait_for("the marked Machine and its Node gone", 180, || async {
        let machines: Vec<String> = md
            .machines()
            .await?
            .into_iter()
            .filter_map(|m| m.metadata.name)
            .collect();
        Ok(machines == [keeper.clone()] && nodes.get_opt(&victim_node).await?.is_none())
    })
    .await
    .expect("exactly the marked Machine is deleted, with its Node");
    mark("marked-machine-and-node-deleted");
    assert!(
        nodes.get_opt(&keeper_node).await.expect("get").is_some(),
        "the other Node stays"
    );
    wait_for("pods Running on the remaining node", 120, || async {
        let pods = deployment_pods(&client, &ns).await?;
        Ok(pods.len() == PODS as usize
            && running_on(&pods).is_some_and(|on| on == BTreeSet::from([keeper_node.clone()])))
    })
    .await
    .expect("pods rescheduled onto the remaining node");
    mark("pods-rescheduled");
    eprintln!(
        "timing: smoke total {:.1}s: {}",
        t0.elapsed().as_secs_f64(),
        timings.join(", ")
    );
}
