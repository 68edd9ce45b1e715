//! Instance types built from real manifests (an OpenShift MachineSet as OpenShift's docs and
//! machine-api-operator write it, the Cluster Autoscaler README's scale-from-zero
//! MachineDeployment, a CAPA quick-start MachineDeployment with the AWSMachineTemplate status
//! CAPA fills, a CAPZ MachineDeployment with one of its running Nodes), then pods scheduled
//! onto them with the core's `schedule`. Each fixture names its source in `_source`.
//!
//! Before issue 14 no pod fitted on the OpenShift MachineSet (unknown ephemeral storage
//! became capacity 0, allocatable -1 GiB) and the CAPZ group was left out
//! (`MissingCapacity`, zone `1`).

// A failed fixture read is a failed test; the path or value says which.
#![allow(clippy::unwrap_used, clippy::expect_fun_call)]

use std::collections::BTreeMap;

use capi_adapter::instance_types::Backoff;
use capi_adapter::objects::{capi, openshift};
use capi_adapter::{
    InfraRef, NodeClassSettings, NodeSample, NodeSamples, ScalableResource, TemplateLookup,
    Templates, instance_types, wants_node,
};
use k8s_openapi::api::core::v1::Node;
use kube_core::DynamicObject;
use provisioner_core::{
    NodePool, Pod, Resources, SchedulingOptions, SchedulingResult, Snapshot, schedule,
};

const GIB: i64 = 1 << 30;

fn fixture(name: &str) -> serde_json::Value {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).expect(&path)).expect(&path)
}

fn infra(kind: &str, name: &str) -> InfraRef {
    InfraRef {
        group: "infrastructure.cluster.x-k8s.io".into(),
        kind: kind.into(),
        namespace: "default".into(),
        name: name.into(),
    }
}

struct World {
    resources: Vec<ScalableResource>,
    templates: Templates,
    nodes: NodeSamples,
}

fn world() -> World {
    let os: openshift::MachineSet =
        serde_json::from_value(fixture("openshift-aws-machineset.json")).unwrap();
    let readme: capi::MachineDeployment =
        serde_json::from_value(fixture("capi-readme-machinedeployment.json")).unwrap();
    let capa: capi::MachineDeployment =
        serde_json::from_value(fixture("capa-machinedeployment.json")).unwrap();
    let capz: capi::MachineDeployment =
        serde_json::from_value(fixture("capz-machinedeployment.json")).unwrap();
    let resources = vec![
        ScalableResource::from(&os),
        ScalableResource::from(&readme),
        ScalableResource::from(&capa),
        ScalableResource::from(&capz),
    ];
    let dynamic = |v: serde_json::Value| -> TemplateLookup {
        TemplateLookup::Found(Box::new(
            serde_json::from_value::<DynamicObject>(v).unwrap(),
        ))
    };
    let templates: Templates = [
        (
            infra("DockerMachineTemplate", "gpu-workers"),
            dynamic(serde_json::json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "DockerMachineTemplate",
                "metadata": {"name": "gpu-workers", "namespace": "default"},
                "spec": {"template": {"spec": {}}}
            })),
        ),
        (
            infra("AWSMachineTemplate", "capi-quickstart-md-0"),
            dynamic(fixture("capa-awsmachinetemplate.json")),
        ),
        (
            infra("AzureMachineTemplate", "capz-md-0"),
            dynamic(serde_json::json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "AzureMachineTemplate",
                "metadata": {"name": "capz-md-0", "namespace": "default"},
                "spec": {"template": {"spec": {"vmSize": "Standard_D4s_v3", "osDisk": {"diskSizeGB": 128, "osType": "Linux"}}}}
            })),
        ),
    ]
    .into();
    // The controller fetches a node only where the declarations fall short: the CAPZ group.
    let wanted: Vec<&str> = resources
        .iter()
        .filter(|r| wants_node(r, &templates))
        .map(|r| r.id.name.as_str())
        .collect();
    assert_eq!(wanted, vec!["capz-md-0-zone1"]);
    let node: Node = serde_json::from_value(fixture("capz-node.json")).unwrap();
    let nodes: NodeSamples = [(resources[3].id.clone(), NodeSample::from_node(&node))].into();
    World {
        resources,
        templates,
        nodes,
    }
}

fn settings() -> NodeClassSettings {
    NodeClassSettings {
        name: "default".into(),
        ..Default::default()
    }
}

fn pod(name: &str, cpu: i64, mem: i64, eph: i64) -> Pod {
    let mut p = Pod::new("default", name, cpu, mem);
    p.containers[0].ephemeral_storage = eph;
    p
}

fn run(types: Vec<provisioner_core::InstanceType>, pods: Vec<Pod>) -> SchedulingResult {
    schedule(
        &Snapshot {
            pods: Snapshot::shared_pods(pods),
            nodepools: vec![NodePool::new("default", 0)],
            instance_types: types,
            ..Snapshot::default()
        },
        &SchedulingOptions::default(),
    )
}

#[test]
fn real_manifests_give_instance_types_pods_fit_on() {
    let w = world();
    let catalog = instance_types(
        &w.resources,
        &w.templates,
        &w.nodes,
        &settings(),
        0,
        &Backoff::new(),
    );
    assert!(catalog.problems.is_empty(), "{:#?}", catalog.problems);
    let by_name: BTreeMap<&str, &provisioner_core::InstanceType> = catalog
        .instance_types
        .iter()
        .map(|it| (it.name.as_str(), it))
        .collect();
    assert_eq!(
        by_name.keys().copied().collect::<Vec<_>>(),
        vec![
            "Standard_D4s_v3",
            "default.capi-quickstart-md-0",
            "default.gpu-workers",
            "m6i.xlarge"
        ]
    );

    // OpenShift: vCPU 4, memoryMb 16384 (MiB, an integer), GPU "0" = none, pods 250;
    // ephemeral storage unknown, which leaves it unconstrained (not 0).
    let os = by_name["m6i.xlarge"];
    assert_eq!(
        (os.capacity.cpu_milli, os.capacity.memory, os.capacity.pods),
        (4000, 16 * GIB, 250)
    );
    assert_eq!(os.capacity.ephemeral_storage, 0);
    assert!(os.capacity.extended.is_empty());
    assert_eq!(os.offerings[0].zone, "us-east-1a");
    let alloc = os.allocatable();
    assert!(alloc.ephemeral_storage > 0 && alloc.cpu_milli > 0);

    // The README: 128G (decimal) memory, 2 nvidia.com/gpu, 200 pods, 100Gi disk.
    let gpu = by_name["default.gpu-workers"];
    assert_eq!(gpu.capacity.memory, 128_000_000_000);
    assert_eq!(gpu.capacity.extended["nvidia.com/gpu"], 2);
    assert_eq!(
        (gpu.capacity.pods, gpu.capacity.ephemeral_storage),
        (200, 100 * GIB)
    );

    // CAPA: capacity from the template status, node-role label propagated, the unmanaged
    // `nodepool` label not (CAPI's GetManagedLabels), zone = failure domain.
    let capa = by_name["default.capi-quickstart-md-0"];
    assert_eq!(
        (capa.capacity.cpu_milli, capa.capacity.memory),
        (2000, 8 * GIB)
    );
    assert!(capa.labels.contains_key("node-role.kubernetes.io/worker"));
    assert!(!capa.labels.contains_key("nodepool"));
    assert_eq!(capa.offerings[0].zone, "us-east-1a");

    // CAPZ: no annotation, no template status: the running node gives capacity, instance
    // type and the zone as Azure labels nodes (eastus-1, not the failure domain "1").
    let capz = by_name["Standard_D4s_v3"];
    assert_eq!(capz.capacity.cpu_milli, 4000);
    assert_eq!(capz.capacity.memory, 16_393_356 * 1024);
    assert_eq!(capz.capacity.ephemeral_storage, 129_886_128 * 1024);
    assert_eq!(capz.offerings[0].zone, "eastus-1");
    assert_eq!(capz.labels["topology.kubernetes.io/region"], "eastus");
    let offer = catalog
        .resources
        .values()
        .find(|o| o.instance_type == "Standard_D4s_v3")
        .unwrap();
    assert_eq!(offer.node.as_deref(), Some("capz-md-0-zone1-8vh2x"));

    // Pods, each of which only one group can hold.
    let mut pods = Vec::new();
    // 3.5 CPU / 12 GiB with 10 GiB scratch: OpenShift (m6i.xlarge), or CAPZ by size, not
    // the 2-CPU CAPA nodes; pinned to the OpenShift zone.
    let mut p = pod("etl", 3500, 12 * GIB, 10 * GIB);
    p.node_selector
        .insert("topology.kubernetes.io/zone".into(), "us-east-1a".into());
    p.node_selector
        .insert("node-role.kubernetes.io/worker".into(), String::new());
    p.node_selector
        .insert("kubernetes.io/arch".into(), "amd64".into());
    pods.push(p);
    // A GPU pod: only the README group has nvidia.com/gpu.
    let mut p = pod("train", 8000, 64 * GIB, 0);
    p.containers[0] = Resources {
        extended: [("nvidia.com/gpu".to_string(), 2)].into(),
        ..p.containers[0].clone()
    };
    pods.push(p);
    // Pinned to Azure zone eastus-1 by the label nodes there carry.
    let mut p = pod("azure", 1000, 2 * GIB, GIB);
    p.node_selector
        .insert("topology.kubernetes.io/zone".into(), "eastus-1".into());
    pods.push(p);
    // Small web pods: they fit anywhere, so they fill the room left on the nodes above.
    for i in 0..4 {
        pods.push(pod(&format!("web-{i}"), 250, 512 << 20, 0));
    }
    let result = run(catalog.instance_types.clone(), pods);
    assert!(
        result.unschedulable.is_empty(),
        "{:#?}",
        result.unschedulable
    );
    let launched_for = |pod: &str| -> String {
        result
            .new_node_claims
            .iter()
            .find(|c| c.pods.iter().any(|p| p.name == pod))
            .map(|c| c.launch.instance_type.clone())
            .unwrap_or_default()
    };
    assert_eq!(launched_for("etl"), "m6i.xlarge");
    assert_eq!(launched_for("train"), "default.gpu-workers");
    assert_eq!(launched_for("azure"), "Standard_D4s_v3");
    assert!((0..4).all(|i| !launched_for(&format!("web-{i}")).is_empty()));
    assert_eq!(
        result.new_node_claims.len(),
        3,
        "{:#?}",
        result.new_node_claims
    );
}

/// Without the running node the CAPZ group has no capacity (left out, `MissingCapacity`)
/// and its zone is unknown: CAS would not scale it from zero either.
#[test]
fn the_capz_group_needs_its_node() {
    let w = world();
    let catalog = instance_types(
        &w.resources,
        &w.templates,
        &NodeSamples::new(),
        &settings(),
        0,
        &Backoff::new(),
    );
    assert_eq!(catalog.resources.len(), 3);
    let reasons: Vec<(&str, bool)> = catalog
        .problems
        .iter()
        .map(|p| (p.reason(), p.kept))
        .collect();
    assert!(reasons.contains(&("MissingCapacity", false)), "{reasons:?}");
    assert!(reasons.contains(&("ZoneUnknown", false)), "{reasons:?}");
}
