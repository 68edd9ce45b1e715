//! The Cluster Autoscaler's clusterapi provider test tables (kubernetes/autoscaler
//! `cluster-autoscaler/cloudprovider/clusterapi/*_test.go`) and OpenShift's fork
//! (`cloudprovider/openshift/*_test.go`), with their inputs as written there, run through
//! [`instance_types`]: same outcome, or an intended difference named in the test and in
//! docs/annotations.md. Also the issue-14 findings (zero and empty values, bad entries,
//! running nodes, zones, hostile values) and the whole-resource property test.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::DynamicObject;
use proptest::prelude::*;
use provisioner_core::{TaintEffect, labels as wk};

use super::*;
use crate::capacity::ValueSource;
use crate::node::NodeSample;
use crate::objects::{capi, openshift};
use crate::parse::ValueError;
use crate::problem::ProblemError;

const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

fn infra() -> InfraRef {
    InfraRef {
        group: "infrastructure.cluster.x-k8s.io".into(),
        kind: "TestMachineTemplate".into(),
        namespace: "ns".into(),
        name: "tmpl".into(),
    }
}

fn templ(status: serde_json::Value) -> Templates {
    let obj = DynamicObject {
        types: None,
        metadata: ObjectMeta {
            name: Some("tmpl".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        data: serde_json::json!({ "status": status }),
    };
    [(infra(), TemplateLookup::Found(Box::new(obj)))].into()
}

fn empty_templ() -> Templates {
    templ(serde_json::json!({}))
}

/// A MachineDeployment or (standalone) MachineSet as CAS' test framework builds them: the
/// annotations given, one replica, an infrastructure reference.
fn capi_resource(
    deployment: bool,
    annotations: &[(&str, &str)],
    managed_labels: &[(&str, &str)],
    taints: &[(&str, Option<&str>, &str)],
) -> ScalableResource {
    let meta = ObjectMeta {
        name: Some("ng".into()),
        namespace: Some("ns".into()),
        labels: Some([(keys::capi::KARPENTER_MEMBER.to_string(), String::new())].into()),
        annotations: Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    };
    let mut template = capi::MachineTemplateSpec::default();
    template.spec.infrastructure_ref = capi::ContractReference {
        api_group: Some(infra().group),
        kind: infra().kind,
        name: infra().name,
        ..Default::default()
    };
    template.metadata.labels = managed_labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    template.spec.taints = taints
        .iter()
        .map(|(k, v, e)| capi::MachineTaint {
            key: k.to_string(),
            value: v.map(str::to_string),
            effect: e.to_string(),
            propagation: Some("Always".into()),
        })
        .collect();
    if deployment {
        let mut md = capi::MachineDeployment {
            metadata: meta,
            ..Default::default()
        };
        md.spec.replicas = Some(1);
        md.spec.template = template;
        ScalableResource::from(&md)
    } else {
        let mut ms = capi::MachineSet {
            metadata: meta,
            ..Default::default()
        };
        ms.spec.replicas = Some(1);
        ms.spec.template = template;
        ScalableResource::from(&ms)
    }
}

fn openshift_resource(
    annotations: &[(&str, &str)],
    node_labels: &[(&str, &str)],
) -> ScalableResource {
    let mut ms = openshift::MachineSet {
        metadata: ObjectMeta {
            name: Some("ng".into()),
            namespace: Some("openshift-machine-api".into()),
            labels: Some([(keys::capi::KARPENTER_MEMBER.to_string(), String::new())].into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    ms.spec.replicas = Some(1);
    ms.spec.template.spec.metadata.labels = node_labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ScalableResource::from(&ms)
}

fn settings() -> NodeClassSettings {
    NodeClassSettings {
        name: "default".into(),
        ..Default::default()
    }
}

fn catalog(r: ScalableResource, templates: &Templates, nodes: &NodeSamples) -> Catalog {
    instance_types(&[r], templates, nodes, &settings(), 0, &Backoff::new())
}

fn no_nodes() -> NodeSamples {
    NodeSamples::new()
}

/// The single instance type, or `None` when the resource was left out.
fn only(c: &Catalog) -> Option<&InstanceType> {
    assert!(c.instance_types.len() <= 1);
    c.instance_types.first()
}

const SCALE: [(&str, &str); 2] = [(keys::capi::MIN_SIZE, "1"), (keys::capi::MAX_SIZE, "10")];

fn with_scale<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut v = SCALE.to_vec();
    v.extend_from_slice(extra);
    v
}

/// `TestAnnotations` (clusterapi_unstructured_test.go), both kinds: every capacity key with
/// the values as the test writes them (`cpuQuantity.String()` etc.). `gpu-count` comes with
/// `dra-driver` and no `gpu-type`, so no extended resource, as CAS' `InstanceCapacity`.
#[test]
fn cas_test_annotations() {
    let ann = [
        (keys::cas::CPU, "2"),
        (keys::cas::MEMORY, "1Gi"),
        (keys::cas::EPHEMERAL_DISK, "100Gi"),
        (keys::cas::GPU_COUNT, "1"),
        (keys::cas::MAX_PODS, "42"),
        (
            keys::cas::TAINTS,
            "key1=value1:NoSchedule,key2=value2:NoExecute",
        ),
        (keys::cas::LABELS, "key3=value3,key4=value4,key5=value5"),
        (keys::cas::DRA_DRIVER, "test-driver"),
    ];
    for deployment in [false, true] {
        let c = catalog(
            capi_resource(deployment, &ann, &[], &[]),
            &empty_templ(),
            &no_nodes(),
        );
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        let it = only(&c).unwrap();
        assert_eq!(
            (
                it.capacity.cpu_milli,
                it.capacity.memory,
                it.capacity.ephemeral_storage,
                it.capacity.pods
            ),
            (2000, 1024 * MIB, 100 * GIB, 42)
        );
        assert!(it.capacity.extended.is_empty());
        let taints: Vec<(&str, Option<&str>, TaintEffect)> = it
            .taints
            .iter()
            .map(|t| (t.key.as_str(), t.value.as_deref(), t.effect))
            .collect();
        assert_eq!(
            taints,
            vec![
                ("key1", Some("value1"), TaintEffect::NoSchedule),
                ("key2", Some("value2"), TaintEffect::NoExecute)
            ]
        );
        for (k, v) in [("key3", "value3"), ("key4", "value4"), ("key5", "value5")] {
            assert_eq!(it.labels[k], v);
        }
    }
}

/// `TestCanScaleFromZero` (clusterapi_unstructured_test.go): every case, MachineSet and
/// MachineDeployment. "Can scale" here is "is offered".
#[test]
fn cas_test_can_scale_from_zero() {
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, serde_json::Value, bool);
    let cases: Vec<Case> = vec![
        (
            "can scale from zero",
            vec![(keys::cas::CPU, "1"), (keys::cas::MEMORY, "1024Mi")],
            serde_json::json!(null),
            true,
        ),
        (
            "with missing CPU info cannot scale from zero",
            vec![(keys::cas::MEMORY, "1024Mi")],
            serde_json::json!(null),
            false,
        ),
        (
            "with missing Memory info cannot scale from zero",
            vec![(keys::cas::CPU, "1")],
            serde_json::json!(null),
            false,
        ),
        (
            "with no information cannot scale from zero",
            vec![],
            serde_json::json!(null),
            false,
        ),
        (
            "with capacity in machine template can scale from zero",
            vec![],
            serde_json::json!({"cpu": "1", "memory": "4G"}),
            true,
        ),
        (
            "with missing cpu capacity in machine template cannot scale from zero",
            vec![],
            serde_json::json!({"memory": "4G"}),
            false,
        ),
        (
            "with missing memory capacity in machine template cannot scale from zero",
            vec![],
            serde_json::json!({"cpu": "1"}),
            false,
        ),
        (
            "with both annotations and capacity in machine template can scale from zero",
            vec![(keys::cas::CPU, "1"), (keys::cas::MEMORY, "1024Mi")],
            serde_json::json!({"cpu": "1", "memory": "4G"}),
            true,
        ),
        (
            "with incomplete annotations and capacity in machine template cannot scale from zero",
            vec![(keys::cas::CPU, "1")],
            serde_json::json!({"nvidia.com/gpu": "1"}),
            false,
        ),
        (
            "with complete information split across annotations and capacity in machine template can scale from zero",
            vec![(keys::cas::CPU, "1")],
            serde_json::json!({"memory": "4G"}),
            true,
        ),
    ];
    for deployment in [false, true] {
        for (name, ann, cap, can) in &cases {
            let status = if cap.is_null() {
                serde_json::json!({})
            } else {
                serde_json::json!({ "capacity": cap })
            };
            let c = catalog(
                capi_resource(deployment, ann, &[], &[]),
                &templ(status),
                &no_nodes(),
            );
            assert_eq!(only(&c).is_some(), *can, "{name}: {:?}", c.problems);
            if !can {
                assert!(
                    c.problems
                        .iter()
                        .any(|p| matches!(p.error, ProblemError::MissingCapacity { .. })
                            && !p.kept),
                    "{name}"
                );
            }
        }
    }
}

/// `TestNodeGroupTemplateNodeInfo` (clusterapi_nodegroup_test.go): every case, both kinds.
/// CAS' `kubernetes.io/hostname` is a per-node label we do not put on a shape.
#[test]
fn cas_test_node_group_template_node_info() {
    for deployment in [false, true] {
        let make = |ann: &[(&str, &str)],
                    managed: &[(&str, &str)],
                    taints: &[(&str, Option<&str>, &str)]| {
            capi_resource(deployment, &with_scale(ann), managed, taints)
        };
        // "When the NodeGroup cannot scale from zero": left out.
        let c = catalog(make(&[], &[], &[]), &empty_templ(), &no_nodes());
        assert!(only(&c).is_none());

        // "When the NodeGroup can scale from zero".
        let gpu = [
            (keys::cas::MEMORY, "2048Mi"),
            (keys::cas::CPU, "2"),
            (keys::cas::GPU_TYPE, "nvidia.com/gpu"),
            (keys::cas::GPU_COUNT, "1"),
        ];
        let c = catalog(make(&gpu, &[], &[]), &empty_templ(), &no_nodes());
        let it = only(&c).unwrap();
        assert_eq!(it.capacity.cpu_milli, 2000);
        assert_eq!(it.capacity.memory, 2048 * MIB);
        assert_eq!(it.capacity.pods, 110);
        assert_eq!(it.capacity.extended["nvidia.com/gpu"], 1);
        assert_eq!(
            it.labels,
            BTreeMap::from([
                (wk::ARCH.to_string(), "amd64".to_string()),
                (wk::OS.to_string(), "linux".to_string())
            ])
        );

        // "... the label capacity annotations merge with the pre-built node labels and take
        // precedence if the same key is defined in both".
        let mut ann = gpu.to_vec();
        ann.push((
            keys::cas::LABELS,
            "kubernetes.io/arch=arm64,my-custom-label=custom-value",
        ));
        let c = catalog(make(&ann, &[], &[]), &empty_templ(), &no_nodes());
        let it = only(&c).unwrap();
        assert_eq!(it.labels[wk::ARCH], "arm64");
        assert_eq!(it.labels[wk::OS], "linux");
        assert_eq!(it.labels["my-custom-label"], "custom-value");
        assert_eq!(it.labels.len(), 3);

        // "... and the Node still exists, it includes the known node labels".
        let r = make(
            &[(keys::cas::MEMORY, "2048Mi"), (keys::cas::CPU, "2")],
            &[],
            &[],
        );
        let node = NodeSample {
            name: "n1".into(),
            capacity: BTreeMap::new(),
            labels: [
                ("kubernetes.io/os", "windows"),
                ("kubernetes.io/arch", "arm64"),
                ("node.kubernetes.io/instance-type", "instance1"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        };
        let nodes: NodeSamples = [(r.id.clone(), node)].into();
        let c = catalog(r, &empty_templ(), &nodes);
        let it = only(&c).unwrap();
        assert_eq!(it.labels[wk::OS], "windows");
        assert_eq!(it.labels[wk::ARCH], "arm64");
        // The instance-type label names the instance type (the core puts it on nodes).
        assert_eq!(it.name, "instance1");
        assert_eq!(
            (it.capacity.cpu_milli, it.capacity.memory, it.capacity.pods),
            (2000, 2048 * MIB, 110)
        );

        // "... and DRA is enabled": gpu-count without gpu-type adds no extended resource.
        let c = catalog(
            make(
                &[
                    (keys::cas::MEMORY, "2048Mi"),
                    (keys::cas::CPU, "2"),
                    (keys::cas::DRA_DRIVER, "gpu.nvidia.com"),
                    (keys::cas::GPU_COUNT, "2"),
                ],
                &[],
                &[],
            ),
            &empty_templ(),
            &no_nodes(),
        );
        let it = only(&c).unwrap();
        assert!(it.capacity.extended.is_empty());
        assert!(c.problems.is_empty());

        // "... and the scalable resource contains managed labels". CAS' test puts them under
        // spec.template.spec.metadata.labels, a field CAPI's schema does not have (the API
        // server prunes it); CAPI propagates spec.template.metadata.labels, which we read
        // (intended difference).
        let c = catalog(
            make(&gpu, &[("node-role.kubernetes.io/test", "test")], &[]),
            &empty_templ(),
            &no_nodes(),
        );
        assert_eq!(
            only(&c).unwrap().labels["node-role.kubernetes.io/test"],
            "test"
        );

        // "... CSI driver annotations are present".
        let c = catalog(
            make(
                &[
                    (keys::cas::MEMORY, "2048Mi"),
                    (keys::cas::CPU, "2"),
                    (
                        keys::cas::CSI_DRIVER,
                        "ebs.csi.aws.com=25,efs.csi.aws.com=16",
                    ),
                ],
                &[],
                &[],
            ),
            &empty_templ(),
            &no_nodes(),
        );
        assert_eq!(
            only(&c).unwrap().csi_limits,
            BTreeMap::from([
                ("ebs.csi.aws.com".to_string(), 25),
                ("efs.csi.aws.com".to_string(), 16)
            ])
        );

        // "... spec taints are defined, they appear in the node template".
        let cpu_mem = [(keys::cas::MEMORY, "2048Mi"), (keys::cas::CPU, "2")];
        let spec_taint = [("dedicated", Some("gpu"), "NoSchedule")];
        let c = catalog(
            make(&cpu_mem, &[], &spec_taint),
            &empty_templ(),
            &no_nodes(),
        );
        let t = &only(&c).unwrap().taints;
        assert_eq!(t.len(), 1);
        assert_eq!(
            (t[0].key.as_str(), t[0].value.as_deref(), t[0].effect),
            ("dedicated", Some("gpu"), TaintEffect::NoSchedule)
        );

        // "... both spec and annotation taints are defined, annotation takes precedence".
        let mut ann = cpu_mem.to_vec();
        ann.push((keys::cas::TAINTS, "dedicated=override:NoSchedule"));
        let c = catalog(make(&ann, &[], &spec_taint), &empty_templ(), &no_nodes());
        let t = &only(&c).unwrap().taints;
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].value.as_deref(), Some("override"));
    }
}

/// `TestInstanceSystemInfo`: `status.nodeInfo` sets architecture and OS; without it CAS'
/// generic labels give amd64 / linux, as we do.
#[test]
fn cas_test_instance_system_info() {
    let cap = serde_json::json!({"cpu": "1", "memory": "4G"});
    for (info, arch, os) in [
        (serde_json::json!({}), "amd64", "linux"),
        (
            serde_json::json!({"architecture": "arm64"}),
            "arm64",
            "linux",
        ),
        (
            serde_json::json!({"operatingSystem": "linux"}),
            "amd64",
            "linux",
        ),
        (
            serde_json::json!({"architecture": "arm64", "operatingSystem": "linux"}),
            "arm64",
            "linux",
        ),
    ] {
        for deployment in [false, true] {
            let c = catalog(
                capi_resource(deployment, &[], &[], &[]),
                &templ(serde_json::json!({"capacity": cap, "nodeInfo": info})),
                &no_nodes(),
            );
            let it = only(&c).unwrap();
            assert_eq!(
                (it.labels[wk::ARCH].as_str(), it.labels[wk::OS].as_str()),
                (arch, os)
            );
        }
    }
}

/// `TestUtilParseScalingBounds`: every case. Intended difference: a missing max is
/// unlimited here (CAS: 0, and the resource is no node group).
#[test]
fn cas_test_util_parse_scaling_bounds() {
    let (min, max) = (keys::capi::MIN_SIZE, keys::capi::MAX_SIZE);
    let cases: Vec<(Vec<(&str, &str)>, Option<(i64, Option<i64>)>)> = vec![
        (vec![(max, "0")], Some((0, Some(0)))),
        (vec![(min, "0")], Some((0, None))),
        (vec![(min, "-1"), (max, "0")], None),
        (vec![(min, "not-an-int"), (max, "0")], None),
        (vec![(min, "0"), (max, "-1")], None),
        (vec![(min, "0"), (max, "not-an-int")], None),
        (vec![(min, "1"), (max, "0")], None),
        (vec![(min, "0"), (max, "0")], Some((0, Some(0)))),
        (vec![(min, "0"), (max, "1")], Some((0, Some(1)))),
    ];
    for (ann, expected) in cases {
        let r = capi_resource(true, &ann, &[], &[]);
        let got = SizeLimits::of(&r).ok().map(|l| (l.min, l.max));
        assert_eq!(got, expected, "{ann:?}");
    }
}

/// OpenShift's fork, `TestParse{CPU,Memory,GPU,MaxPods}Capacity` (openshift_utils_test.go):
/// upstream (`capacity.cluster-autoscaler...`) and downstream (`machine.openshift.io/...`)
/// keys, each on an OpenShift MachineSet.
#[test]
fn openshift_fork_parse_capacity_cases() {
    use keys::cas::{CPU, GPU_COUNT, MAX_PODS, MEMORY};
    use keys::openshift::{GPU, MAX_PODS as OS_MAX_PODS, MEMORY_MB, VCPU};
    let base = |extra: (&'static str, &'static str)| -> Vec<(&'static str, &'static str)> {
        let mut v = vec![(CPU, "1"), (MEMORY, "1Gi")];
        v.retain(|(k, _)| *k != extra.0);
        if extra.0 == VCPU {
            v.retain(|(k, _)| *k != CPU);
        }
        if extra.0 == MEMORY_MB {
            v.retain(|(k, _)| *k != MEMORY);
        }
        v.push(extra);
        v
    };
    // (annotation, value, Some(expected capacity of the resource it sets) | None = error)
    let cases: Vec<((&str, &str), &str, Option<i64>)> = vec![
        ((CPU, "not-a-quantity"), "cpu", None),
        ((CPU, "123m"), "cpu", Some(123)),
        ((CPU, "1"), "cpu", Some(1000)),
        ((CPU, "0.1"), "cpu", Some(100)),
        ((VCPU, "not-a-quantity"), "cpu", None),
        ((VCPU, "123m"), "cpu", Some(123)),
        ((VCPU, "1"), "cpu", Some(1000)),
        ((VCPU, "0.1"), "cpu", Some(100)),
        ((MEMORY, "not-a-quantity"), "memory", None),
        ((MEMORY, "1024"), "memory", Some(1024)),
        ((MEMORY, "456Mi"), "memory", Some(456 * MIB)),
        ((MEMORY, "8Gi"), "memory", Some(8 * GIB)),
        ((MEMORY_MB, "not-a-quantity"), "memory", None),
        ((MEMORY_MB, "1024"), "memory", Some(1024 * MIB)),
        ((MEMORY_MB, "456Mi"), "memory", None),
        ((MEMORY_MB, "8Gi"), "memory", None),
        ((GPU_COUNT, "not-a-quantity"), "nvidia.com/gpu", None),
        ((GPU_COUNT, "13"), "nvidia.com/gpu", Some(13)),
        ((GPU_COUNT, "13Mi"), "nvidia.com/gpu", None),
        ((GPU, "not-a-quantity"), "nvidia.com/gpu", None),
        ((GPU, "13"), "nvidia.com/gpu", Some(13)),
        ((GPU, "13Mi"), "nvidia.com/gpu", None),
        ((MAX_PODS, "not-a-quantity"), "pods", None),
        ((MAX_PODS, "13"), "pods", Some(13)),
        ((MAX_PODS, "13Mi"), "pods", None),
        ((OS_MAX_PODS, "not-a-quantity"), "pods", None),
        ((OS_MAX_PODS, "13"), "pods", Some(13)),
        ((OS_MAX_PODS, "13Mi"), "pods", None),
    ];
    for ((key, value), resource, expected) in cases {
        let c = catalog(
            openshift_resource(&base((key, value)), &[]),
            &Templates::new(),
            &no_nodes(),
        );
        let problem = c.problems.iter().find(|p| p.key == key);
        match expected {
            Some(n) => {
                assert!(problem.is_none(), "{key}={value}: {problem:?}");
                let cap = &only(&c).unwrap().capacity;
                let got = match resource {
                    "cpu" => cap.cpu_milli,
                    "memory" => cap.memory,
                    "pods" => cap.pods,
                    other => cap.extended[other],
                };
                assert_eq!(got, n, "{key}={value}");
            }
            None => assert!(problem.is_some(), "{key}={value}: {:?}", c.problems),
        }
    }
}

/// OpenShift fork `TestNodeGroupTemplateNodeInfo`: upstream and downstream annotations,
/// node labels from `spec.template.spec.metadata.labels`, annotation labels win. Intended
/// difference: pods default to OpenShift's kubelet value 250 (the fork assumes 110).
#[test]
fn openshift_fork_template_node_info() {
    let upstream = [
        (keys::cas::MEMORY, "2048"),
        (keys::cas::CPU, "2"),
        (keys::cas::GPU_TYPE, "nvidia.com/gpu"),
        (keys::cas::GPU_COUNT, "1"),
    ];
    let c = catalog(
        openshift_resource(&upstream, &[]),
        &Templates::new(),
        &no_nodes(),
    );
    let it = only(&c).unwrap();
    assert_eq!(
        (it.capacity.cpu_milli, it.capacity.memory, it.capacity.pods),
        (2000, 2048, 250)
    );
    assert_eq!(it.capacity.extended["nvidia.com/gpu"], 1);

    let downstream = [
        (keys::openshift::MEMORY_MB, "2048"),
        (keys::openshift::VCPU, "2"),
        (keys::cas::GPU_TYPE, "nvidia.com/gpu"),
        (keys::openshift::GPU, "1"),
    ];
    let c = catalog(
        openshift_resource(&downstream, &[]),
        &Templates::new(),
        &no_nodes(),
    );
    let it = only(&c).unwrap();
    assert_eq!(
        (it.capacity.cpu_milli, it.capacity.memory),
        (2000, 2048 * MIB)
    );
    assert_eq!(it.capacity.extended["nvidia.com/gpu"], 1);

    // Node labels of the MachineSet merge; the annotation wins on the same key.
    let mut ann = upstream.to_vec();
    ann.push((
        keys::cas::LABELS,
        "kubernetes.io/arch=arm64,my-custom-label=custom-value",
    ));
    let r = openshift_resource(
        &ann,
        &[
            ("nodeGroupLabel", "value"),
            ("anotherLabel", "anotherValue"),
            ("my-custom-label", "not-what-i-want"),
        ],
    );
    let c = catalog(r, &Templates::new(), &no_nodes());
    let l = &only(&c).unwrap().labels;
    assert_eq!(l[wk::ARCH], "arm64");
    assert_eq!(l["nodeGroupLabel"], "value");
    assert_eq!(l["anotherLabel"], "anotherValue");
    assert_eq!(l["my-custom-label"], "custom-value");
    // GPU without gpu-type on OpenShift: nvidia.com/gpu, as the fork.
    let c = catalog(
        openshift_resource(
            &[
                (keys::openshift::VCPU, "2"),
                (keys::openshift::MEMORY_MB, "2048"),
                (keys::openshift::GPU, "2"),
            ],
            &[],
        ),
        &Templates::new(),
        &no_nodes(),
    );
    assert_eq!(only(&c).unwrap().capacity.extended["nvidia.com/gpu"], 2);
}

/// Issue 14: `"0"` and `""` are no value, as in CAS: maxPods 0 gives the default, cpu 0
/// does not hide the template's value, an empty annotation is absent (not an error).
#[test]
fn zero_and_empty_are_absent() {
    let tmpl = templ(serde_json::json!({"capacity": {"cpu": "8", "memory": "32Gi"}}));
    let c = catalog(
        capi_resource(
            true,
            &[
                (keys::cas::MAX_PODS, "0"),
                (keys::cas::CPU, "0"),
                (keys::cas::MEMORY, ""),
            ],
            &[],
            &[],
        ),
        &tmpl,
        &no_nodes(),
    );
    assert!(c.problems.is_empty(), "{:?}", c.problems);
    let it = only(&c).unwrap();
    assert_eq!(
        (it.capacity.cpu_milli, it.capacity.memory, it.capacity.pods),
        (8000, 32 * GIB, 110)
    );
    let o = c.resources.values().next().unwrap();
    assert_eq!(o.capacity_sources["pods"], ValueSource::Default);
    assert_eq!(o.capacity_sources["cpu"], ValueSource::Template);
    // gpu-count 0 leaves no zero entry; "-0" is zero.
    let c = catalog(
        capi_resource(
            true,
            &[
                (keys::cas::CPU, "2"),
                (keys::cas::MEMORY, "-0"),
                (keys::cas::GPU_TYPE, "nvidia.com/gpu"),
                (keys::cas::GPU_COUNT, "0"),
            ],
            &[],
            &[],
        ),
        &tmpl,
        &no_nodes(),
    );
    let it = only(&c).unwrap();
    assert!(it.capacity.extended.is_empty());
    assert_eq!(it.capacity.memory, 32 * GIB);
}

/// Issue 14: integers are integers (`memoryMb: "8Gi"` is not 8 PiB, `maxPods: "13Mi"` not
/// 13.6 million pods, `"1.5"` not 2, `"1k"` not 1000).
#[test]
fn integer_keys_reject_quantities() {
    for (key, value) in [
        (keys::cas::MAX_PODS, "13Mi"),
        (keys::cas::MAX_PODS, "1.5"),
        (keys::cas::MAX_PODS, "1k"),
        (keys::cas::GPU_COUNT, "1k"),
        (keys::openshift::MEMORY_MB, "8Gi"),
        (keys::openshift::MAX_PODS, "1.5"),
        (keys::openshift::GPU, "1k"),
    ] {
        // (The CAS memory key would shadow memoryMb: the fork never reads it then.)
        let mut ann = vec![
            (keys::cas::CPU, "2"),
            (keys::cas::GPU_TYPE, "nvidia.com/gpu"),
        ];
        if key != keys::openshift::MEMORY_MB {
            ann.push((keys::cas::MEMORY, "8Gi"));
        }
        ann.push((key, value));
        let c = catalog(
            openshift_resource(&ann, &[]),
            &Templates::new(),
            &no_nodes(),
        );
        assert!(
            c.problems.iter().any(|p| p.key == key
                && matches!(p.error, ProblemError::Value(ValueError::NotAnInteger(_)))),
            "{key}={value}: {:?}",
            c.problems
        );
        match only(&c) {
            Some(it) => {
                assert!(it.capacity.pods <= 250 && it.capacity.memory == 8 * GIB);
                assert!(it.capacity.extended.is_empty());
            }
            // memoryMb was the only memory source: no memory, left out.
            None => assert_eq!(key, keys::openshift::MEMORY_MB),
        }
    }
}

/// Issue 14: one bad entry in labels, taints, CSI or an unknown template capacity key keeps
/// the resource and the good entries; the problem names object, key and entry.
#[test]
fn bad_entries_keep_the_resource() {
    let tmpl = templ(serde_json::json!({"capacity": {
        "cpu": "4", "memory": "16Gi", "example.com/widget": "lots", "Bad Key": "1", "example.com/ok": "3"
    }}));
    let c = catalog(
        capi_resource(
            true,
            &[
                (keys::cas::LABELS, "tier=gpu,oops,zone=a b"),
                (
                    keys::cas::TAINTS,
                    "gpu=true:NoSchedule,dedicated=batch:Sometimes",
                ),
                (
                    keys::cas::CSI_DRIVER,
                    "ebs.csi.aws.com=25,efs=many,disk.csi.azure.com=0",
                ),
            ],
            &[],
            &[],
        ),
        &tmpl,
        &no_nodes(),
    );
    let it = only(&c).expect("kept");
    assert_eq!(it.labels["tier"], "gpu");
    assert_eq!(it.capacity.extended["example.com/ok"], 3);
    assert_eq!(
        it.csi_limits,
        BTreeMap::from([("ebs.csi.aws.com".to_string(), 25)])
    );
    assert!(
        it.taints
            .iter()
            .any(|t| t.key == "dedicated" && t.effect == TaintEffect::NoSchedule)
    );
    assert!(c.problems.iter().all(|p| p.kept && p.resource.is_some()));
    let entries: Vec<(String, Option<String>)> = c
        .problems
        .iter()
        .map(|p| (p.key.clone(), p.entry.clone()))
        .collect();
    for (key, entry) in [
        (keys::cas::LABELS, Some("oops")),
        (keys::cas::LABELS, Some("zone=a b")),
        (keys::cas::TAINTS, Some("dedicated=batch:Sometimes")),
        (keys::cas::CSI_DRIVER, Some("efs=many")),
        ("status.capacity.example.com/widget", None),
        ("status.capacity.Bad Key", None),
    ] {
        assert!(
            entries.contains(&(key.to_string(), entry.map(str::to_string))),
            "{key} {entry:?} in {entries:?}"
        );
    }
    let msg = c
        .problems
        .iter()
        .find(|p| p.key == keys::cas::LABELS)
        .unwrap()
        .to_string();
    assert!(
        msg.contains("MachineDeployment.cluster.x-k8s.io ns/ng"),
        "{msg}"
    );
}

/// Issue 14: a group with running nodes but nothing declared takes its capacity and labels
/// from a node; only an empty group is `MissingCapacity`.
#[test]
fn running_node_fills_undeclared_capacity() {
    let r = capi_resource(true, &[], &[], &[]);
    assert!(crate::node::wants_node(&r, &empty_templ()));
    let node = NodeSample {
        name: "ng-abc".into(),
        capacity: [
            ("cpu", "8"),
            ("memory", "32Gi"),
            ("pods", "58"),
            ("ephemeral-storage", "100Gi"),
            ("nvidia.com/gpu", "1"),
            ("hugepages-1Gi", "0"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        labels: [
            ("topology.kubernetes.io/zone", "z1"),
            ("kubernetes.io/hostname", "ng-abc"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    };
    let nodes: NodeSamples = [(r.id.clone(), node)].into();
    let c = catalog(r.clone(), &empty_templ(), &nodes);
    assert!(c.problems.is_empty(), "{:?}", c.problems);
    let it = only(&c).unwrap();
    assert_eq!(
        (it.capacity.cpu_milli, it.capacity.memory, it.capacity.pods),
        (8000, 32 * GIB, 58)
    );
    assert_eq!(
        it.capacity.extended,
        BTreeMap::from([("nvidia.com/gpu".to_string(), 1)])
    );
    assert_eq!(it.offerings[0].zone, "z1");
    assert!(!it.labels.contains_key("kubernetes.io/hostname"));
    let o = c.resources.values().next().unwrap();
    assert_eq!(
        o.capacity_sources["cpu"],
        ValueSource::Node("ng-abc".into())
    );
    assert_eq!(o.node.as_deref(), Some("ng-abc"));
    // Declared values win over the node's.
    let r2 = capi_resource(true, &[(keys::cas::CPU, "2")], &[], &[]);
    let nodes: NodeSamples = [(r2.id.clone(), nodes[&r.id].clone())].into();
    let c = catalog(r2, &empty_templ(), &nodes);
    assert_eq!(only(&c).unwrap().capacity.cpu_milli, 2000);
    // An empty group (no replicas) wants no node; without one it is MissingCapacity.
    let mut empty = capi_resource(true, &[], &[], &[]);
    empty.replicas = 0;
    assert!(!crate::node::wants_node(&empty, &empty_templ()));
    let c = catalog(empty, &empty_templ(), &no_nodes());
    assert!(only(&c).is_none());
    assert!(
        c.problems
            .iter()
            .any(|p| p.reason() == "MissingCapacity" && !p.kept)
    );
}

fn capz(annotations: &[(&str, &str)]) -> ScalableResource {
    let mut md = capi::MachineDeployment::default();
    md.metadata.name = Some("capz-md".into());
    md.metadata.namespace = Some("ns".into());
    md.metadata.labels = Some([(keys::capi::KARPENTER_MEMBER.to_string(), String::new())].into());
    md.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    md.spec.replicas = Some(0);
    md.spec.template.spec.failure_domain = Some("1".into());
    md.spec.template.spec.infrastructure_ref = capi::ContractReference {
        api_group: Some("infrastructure.cluster.x-k8s.io".into()),
        kind: "AzureMachineTemplate".into(),
        name: "tmpl".into(),
        ..Default::default()
    };
    ScalableResource::from(&md)
}

fn azure_templates() -> Templates {
    let t = templ(serde_json::json!({}));
    let lookup = t.into_values().next().unwrap();
    [(
        InfraRef {
            kind: "AzureMachineTemplate".into(),
            ..infra()
        },
        lookup,
    )]
    .into()
}

/// Issue 14: CAPZ `failureDomain: "1"` is zone `<region>-1` on the nodes, not `1`.
#[test]
fn capz_zone_numbers_become_azure_zone_labels() {
    let cpu_mem = [(keys::cas::CPU, "4"), (keys::cas::MEMORY, "16Gi")];
    let c = catalog(capz(&cpu_mem), &azure_templates(), &no_nodes());
    assert_eq!(only(&c).unwrap().offerings[0].zone, "");
    let p = &c.problems[0];
    assert_eq!((p.reason(), p.kept), ("ZoneUnknown", true));
    let mut ann = cpu_mem.to_vec();
    ann.push((keys::cas::LABELS, "topology.kubernetes.io/region=eastus"));
    let c = catalog(capz(&ann), &azure_templates(), &no_nodes());
    assert!(c.problems.is_empty(), "{:?}", c.problems);
    assert_eq!(only(&c).unwrap().offerings[0].zone, "eastus-1");
    // Other providers' failure domains are zone names.
    let mut r = capz(&cpu_mem);
    r.template.infrastructure_ref = Some(infra());
    let c = catalog(r, &empty_templ(), &no_nodes());
    assert_eq!(only(&c).unwrap().offerings[0].zone, "1");
}

/// Issue 14: hostile values are bounded and validated; messages are clipped.
#[test]
fn hostile_values() {
    for (key, value) in [
        (keys::cas::CPU, "1e18"),
        (keys::cas::MEMORY, "7Ei"),
        (keys::cas::EPHEMERAL_DISK, "7Ei"),
        (keys::cas::MAX_PODS, "9223372036854775807"),
        (keys::cas::GPU_COUNT, "100000"),
    ] {
        let mut ann = vec![(keys::cas::GPU_TYPE, "nvidia.com/gpu")];
        if key != keys::cas::CPU {
            ann.push((keys::cas::CPU, "2"));
        }
        if key != keys::cas::MEMORY {
            ann.push((keys::cas::MEMORY, "8Gi"));
        }
        ann.push((key, value));
        let c = catalog(
            capi_resource(true, &ann, &[], &[]),
            &empty_templ(),
            &no_nodes(),
        );
        assert!(
            c.problems.iter().any(|p| p.key == key
                && matches!(
                    p.error,
                    ProblemError::Value(ValueError::OutOfRange { .. })
                        | ProblemError::Value(ValueError::Quantity(_))
                )),
            "{key}={value}: {:?}",
            c.problems
        );
    }
    // A 14 KB failure domain with '/' and spaces is not a zone.
    let mut r = capi_resource(
        true,
        &[(keys::cas::CPU, "2"), (keys::cas::MEMORY, "8Gi")],
        &[],
        &[],
    );
    let huge = format!("zone/{}", "a b".repeat(4700));
    r.template.failure_domain = Some(huge);
    let c = catalog(r, &empty_templ(), &no_nodes());
    assert_eq!(only(&c).unwrap().offerings[0].zone, "");
    let p = &c.problems[0];
    assert!(matches!(
        p.error,
        ProblemError::Value(ValueError::InvalidZone(_))
    ));
    assert!(p.to_string().len() < 400, "{}", p.to_string().len());
    // A 5,000-character label value, an 18 KB taint: rejected, message short.
    let long = format!("big={}", "v".repeat(5000));
    let taint = format!("k={}:NoSchedule", "t".repeat(18_000));
    let c = catalog(
        capi_resource(
            true,
            &[
                (keys::cas::CPU, "2"),
                (keys::cas::MEMORY, "8Gi"),
                (keys::cas::LABELS, &long),
                (keys::cas::TAINTS, &taint),
            ],
            &[],
            &[],
        ),
        &empty_templ(),
        &no_nodes(),
    );
    let it = only(&c).unwrap();
    assert!(!it.labels.contains_key("big"));
    assert_eq!(it.taints.len(), 1);
    assert_eq!(
        (it.taints[0].key.as_str(), it.taints[0].value.as_deref()),
        ("k", None)
    );
    for p in &c.problems {
        assert!(p.to_string().len() < 500, "{}", p.to_string().len());
    }
}

const ALL_KEYS: [&str; 19] = [
    keys::cas::CPU,
    keys::cas::MEMORY,
    keys::cas::EPHEMERAL_DISK,
    keys::cas::MAX_PODS,
    keys::cas::GPU_TYPE,
    keys::cas::GPU_COUNT,
    keys::cas::LABELS,
    keys::cas::TAINTS,
    keys::cas::CSI_DRIVER,
    keys::ours::PRICE_PER_HOUR,
    keys::ours::CAPACITY_TYPE,
    keys::capi::MIN_SIZE,
    keys::capi::MAX_SIZE,
    keys::openshift::VCPU,
    keys::openshift::MEMORY_MB,
    keys::openshift::GPU,
    keys::openshift::MAX_PODS,
    keys::openshift::MIN_SIZE,
    keys::openshift::MAX_SIZE,
];

const LIST_KEYS: [&str; 3] = [keys::cas::LABELS, keys::cas::TAINTS, keys::cas::CSI_DRIVER];

fn blank_or_zero(v: &str) -> bool {
    v.trim().is_empty() || crate::quantity::parse_units(v) == Ok(0)
}

proptest! {
    /// Any value of any key, on either Machine API: a value is used, or a problem names the
    /// object and the key (and the entry, for list keys); never a panic; the good labels,
    /// taints and CSI entries next to it are kept; messages stay short.
    #[test]
    fn any_value_is_used_or_reported(
        key in 0..ALL_KEYS.len(),
        value in prop_oneof!["\\PC{0,40}", "[-+0-9.eEkKmMgGiIx ]{0,12}", "[a-z=:,./ -]{0,30}"],
        openshift_kind in any::<bool>(),
    ) {
        let key = ALL_KEYS[key];
        let good_labels = "good-a=1,good-b=two";
        let good_taints = "good-t=x:NoSchedule";
        let good_csi = "good.csi.example.com=7";
        let mut ann: Vec<(&str, &str)> = vec![
            (keys::cas::CPU, "2"),
            (keys::cas::MEMORY, "8Gi"),
            (keys::cas::LABELS, good_labels),
            (keys::cas::TAINTS, good_taints),
            (keys::cas::CSI_DRIVER, good_csi),
        ];
        let combined;
        if LIST_KEYS.contains(&key) {
            let base = ann.iter().find(|(k, _)| *k == key).unwrap().1;
            combined = format!("{base},{value}");
            ann.retain(|(k, _)| *k != key);
            ann.push((key, &combined));
        } else {
            ann.retain(|(k, _)| *k != key);
            ann.push((key, &value));
        }
        let r = if openshift_kind {
            openshift_resource(&ann, &[])
        } else {
            capi_resource(true, &ann, &[], &[])
        };
        let c = catalog(r, &empty_templ(), &no_nodes());
        for p in &c.problems {
            prop_assert_eq!(p.object.name.as_str(), "ng");
            prop_assert!(!p.key.is_empty());
            prop_assert!(p.to_string().len() < 800);
            if LIST_KEYS.contains(&p.key.as_str()) {
                prop_assert!(p.entry.is_some(), "{p}");
            }
        }
        let reported = c.problems.iter().any(|p| p.key == key);
        match only(&c) {
            None => prop_assert!(c.problems.iter().any(|p| !p.kept)),
            Some(it) => {
                // Good entries next to any value survive (unless the value names the same
                // key, which then wins as the later entry).
                if !value.contains("good") {
                    prop_assert_eq!(it.labels.get("good-a").map(String::as_str), Some("1"));
                    prop_assert!(it.taints.iter().any(|t| t.key == "good-t"));
                    prop_assert_eq!(it.csi_limits.get("good.csi.example.com"), Some(&7));
                }
                let o = c.resources.values().next().unwrap();
                // The resource the key sets, when nothing of higher precedence shadows it
                // (the CAS cpu and memory keys are always present here).
                let target = match key {
                    k if k == keys::cas::CPU => Some("cpu"),
                    k if k == keys::cas::MEMORY => Some("memory"),
                    k if k == keys::cas::EPHEMERAL_DISK => Some("ephemeral-storage"),
                    k if k == keys::cas::MAX_PODS => Some("pods"),
                    k if k == keys::openshift::MAX_PODS && openshift_kind => Some("pods"),
                    _ => None,
                };
                if let Some(name) = target {
                    let used = o.capacity_sources.get(name)
                        == Some(&ValueSource::Annotation(key.to_string()));
                    prop_assert!(
                        used || reported || blank_or_zero(&value),
                        "{key}={value:?}: neither used nor reported"
                    );
                }
            }
        }
    }
}
