use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::DynamicObject;
use proptest::prelude::*;
use provisioner_core::{CapacityType, TaintEffect, labels as wk};

use super::*;
use crate::objects::{capi, openshift};
use crate::parse::ValueError;
use crate::problem::ProblemError;

const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;

fn infra() -> InfraRef {
    InfraRef {
        group: "infrastructure.cluster.x-k8s.io".into(),
        kind: "DockerMachineTemplate".into(),
        namespace: "ns".into(),
        name: "tmpl".into(),
    }
}

fn md_obj(name: &str, annotations: &[(&str, &str)]) -> capi::MachineDeployment {
    let mut md = capi::MachineDeployment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
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
    md.spec.replicas = Some(1);
    md.spec.template.spec.infrastructure_ref = capi::ContractReference {
        api_group: Some("infrastructure.cluster.x-k8s.io".into()),
        kind: "DockerMachineTemplate".into(),
        name: "tmpl".into(),
        ..Default::default()
    };
    md
}

fn template(status: serde_json::Value) -> Templates {
    let mut obj = DynamicObject {
        types: None,
        metadata: ObjectMeta {
            name: Some("tmpl".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        data: serde_json::json!({}),
    };
    obj.data = serde_json::json!({ "status": status });
    [(infra(), TemplateLookup::Found(Box::new(obj)))].into()
}

fn no_template() -> Templates {
    [(
        infra(),
        TemplateLookup::Found(Box::new(DynamicObject {
            types: None,
            metadata: ObjectMeta::default(),
            data: serde_json::json!({}),
        })),
    )]
    .into()
}

fn nodeclass() -> NodeClassSettings {
    NodeClassSettings {
        name: "default".into(),
        ..Default::default()
    }
}

fn build(resources: &[ScalableResource], templates: &Templates) -> Catalog {
    instance_types(
        resources,
        templates,
        &NodeSamples::new(),
        &nodeclass(),
        1000,
        &Backoff::new(),
    )
}

fn one(annotations: &[(&str, &str)], templates: &Templates) -> Catalog {
    build(
        &[ScalableResource::from(&md_obj("md", annotations))],
        templates,
    )
}

const CPU_MEM: [(&str, &str); 2] = [(keys::cas::CPU, "2"), (keys::cas::MEMORY, "8Gi")];

#[test]
fn capi_from_annotations() {
    let c = one(
        &[
            (keys::cas::CPU, "4"),
            (keys::cas::MEMORY, "16Gi"),
            (keys::cas::EPHEMERAL_DISK, "100Gi"),
            (keys::cas::MAX_PODS, "58"),
            (keys::cas::GPU_TYPE, "amd.com/gpu"),
            (keys::cas::GPU_COUNT, "2"),
            (
                keys::cas::LABELS,
                "tier=gpu,node.kubernetes.io/instance-type=big",
            ),
            (keys::cas::TAINTS, "gpu=true:NoSchedule"),
            (keys::cas::CSI_DRIVER, "ebs.csi.aws.com=25"),
            (keys::ours::PRICE_PER_HOUR, "1.25"),
            (keys::ours::CAPACITY_TYPE, "spot"),
        ],
        &no_template(),
    );
    assert!(c.problems.is_empty(), "{:?}", c.problems);
    let it = &c.instance_types[0];
    assert_eq!(it.name, "big");
    assert_eq!(it.capacity.cpu_milli, 4000);
    assert_eq!(it.capacity.memory, 16 * GIB);
    assert_eq!(it.capacity.ephemeral_storage, 100 * GIB);
    assert_eq!(it.capacity.pods, 58);
    assert_eq!(it.capacity.extended["amd.com/gpu"], 2);
    assert_eq!(it.labels["tier"], "gpu");
    assert_eq!(it.labels[wk::ARCH], "amd64");
    assert!(!it.labels.contains_key(wk::INSTANCE_TYPE));
    assert_eq!(it.taints[0].effect, TaintEffect::NoSchedule);
    assert_eq!(it.csi_limits["ebs.csi.aws.com"], 25);
    let o = &it.offerings[0];
    assert_eq!(
        (o.price, o.priced, o.capacity_type),
        (1.25, true, CapacityType::Spot)
    );
    assert!(o.available);
    // Karpenter's default overhead: 4 vCPU -> 80m; 58 pods -> 11*58+255 MiB + 100Mi eviction.
    assert_eq!(it.overhead.cpu_milli, 80);
    assert_eq!(it.overhead.memory, (11 * 58 + 255 + 100) * MIB);
}

#[test]
fn capi_from_template_status_and_annotation_precedence() {
    let tmpl = template(serde_json::json!({
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "200", "nvidia.com/gpu": "1", "ephemeral-storage": "50Gi"},
        "nodeInfo": {"architecture": "arm64", "operatingSystem": "linux"}
    }));
    let c = one(&[], &tmpl);
    assert!(c.problems.is_empty(), "{:?}", c.problems);
    let it = &c.instance_types[0];
    assert_eq!(it.capacity.cpu_milli, 8000);
    assert_eq!(it.capacity.memory, 32 * GIB);
    assert_eq!(it.capacity.pods, 200);
    assert_eq!(it.capacity.extended["nvidia.com/gpu"], 1);
    assert_eq!(it.labels[wk::ARCH], "arm64");
    // Without an instance-type label the name is namespace.name.
    assert_eq!(it.name, "ns.md");
    // Unpriced: the documented fallback, flagged.
    let o = &it.offerings[0];
    assert!(!o.priced);
    assert!(
        (o.price - (8.0 * UNPRICED_PER_CPU + 32.0 * UNPRICED_PER_GIB + UNPRICED_PER_GPU)).abs()
            < 1e-9
    );
    assert_eq!(c.unpriced(), vec!["ns.md"]);

    // Annotations win over the template, value by value.
    let c = one(&[(keys::cas::CPU, "2")], &tmpl);
    let it = &c.instance_types[0];
    assert_eq!(it.capacity.cpu_milli, 2000);
    assert_eq!(it.capacity.memory, 32 * GIB);
    // A malformed annotation is a problem, and the next source is read (CAS drops every
    // scale-from-zero value of the group instead: intended difference).
    let c = one(&[(keys::cas::CPU, "two")], &tmpl);
    assert_eq!(c.instance_types[0].capacity.cpu_milli, 8000);
    assert_eq!(c.problems.len(), 1);
    assert_eq!(c.problems[0].key, keys::cas::CPU);
    assert!(c.problems[0].kept);
    assert_eq!(
        c.resources.values().next().unwrap().capacity_sources["cpu"],
        crate::capacity::ValueSource::Template
    );
}

#[test]
fn labels_taints_and_zone_from_the_template() {
    let mut md = md_obj("md", &CPU_MEM);
    md.spec.template.metadata.labels = [
        ("node-role.kubernetes.io/worker".to_string(), String::new()),
        ("node.cluster.x-k8s.io/pool".to_string(), "a".to_string()),
        ("not-propagated".to_string(), "x".to_string()),
    ]
    .into();
    md.spec.template.spec.failure_domain = Some("zone-a".into());
    md.spec.template.spec.taints = vec![capi::MachineTaint {
        key: "dedicated".into(),
        value: Some("infra".into()),
        effect: "NoSchedule".into(),
        propagation: Some("Always".into()),
    }];
    let c = build(&[ScalableResource::from(&md)], &no_template());
    assert!(c.problems.is_empty(), "{:?}", c.problems);
    let it = &c.instance_types[0];
    assert!(it.labels.contains_key("node-role.kubernetes.io/worker"));
    assert_eq!(it.labels["node.cluster.x-k8s.io/pool"], "a");
    assert!(!it.labels.contains_key("not-propagated"));
    assert_eq!(it.taints.len(), 1);
    assert_eq!(it.offerings[0].zone, "zone-a");

    // Zone from the labels annotation when no failure domain; taint annotation overrides
    // the template's taint with the same key and effect.
    md.spec.template.spec.failure_domain = None;
    md.metadata.annotations.as_mut().unwrap().extend([
        (
            keys::cas::LABELS.to_string(),
            "topology.kubernetes.io/zone=zone-b".to_string(),
        ),
        (
            keys::cas::TAINTS.to_string(),
            "dedicated=batch:NoSchedule".to_string(),
        ),
    ]);
    let c = build(&[ScalableResource::from(&md)], &no_template());
    let it = &c.instance_types[0];
    assert_eq!(it.offerings[0].zone, "zone-b");
    assert_eq!(it.taints.len(), 1);
    assert_eq!(it.taints[0].value.as_deref(), Some("batch"));
}

fn openshift_ms(annotations: &[(&str, &str)], provider: serde_json::Value) -> ScalableResource {
    let mut ms = openshift::MachineSet {
        metadata: ObjectMeta {
            name: Some("worker-a".into()),
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
    ms.spec.replicas = Some(2);
    ms.spec.template.spec.provider_spec.value = Some(provider);
    ms.spec.template.spec.metadata.labels =
        [("node-role.kubernetes.io/worker".to_string(), String::new())].into();
    ScalableResource::from(&ms)
}

#[test]
fn openshift_machineset_annotations_and_provider_spec() {
    let r = openshift_ms(
        &[
            (keys::openshift::VCPU, "4"),
            (keys::openshift::MEMORY_MB, "16384"),
            (keys::openshift::GPU, "0"),
            (keys::openshift::MAX_SIZE, "5"),
            (keys::openshift::MIN_SIZE, "1"),
        ],
        serde_json::json!({
            "instanceType": "m6i.xlarge",
            "placement": {"availabilityZone": "us-east-1a", "region": "us-east-1"},
            "spotMarketOptions": {}
        }),
    );
    let c = build(&[r], &Templates::new());
    assert!(c.problems.is_empty(), "{:?}", c.problems);
    let it = &c.instance_types[0];
    assert_eq!(it.name, "m6i.xlarge");
    assert_eq!(it.capacity.cpu_milli, 4000);
    assert_eq!(it.capacity.memory, 16 * GIB);
    assert_eq!(it.capacity.pods, 250);
    assert!(it.capacity.extended.is_empty());
    assert_eq!(it.labels[wk::REGION], "us-east-1");
    assert!(it.labels.contains_key("node-role.kubernetes.io/worker"));
    let o = &it.offerings[0];
    assert_eq!(o.zone, "us-east-1a");
    assert_eq!(o.capacity_type, CapacityType::Spot);
    let offer = c.resources.values().next().unwrap();
    assert_eq!(
        offer.limits,
        SizeLimits {
            min: 1,
            max: Some(5)
        }
    );

    // CAS annotations take precedence over machine.openshift.io ones.
    let r = openshift_ms(
        &[
            (keys::openshift::VCPU, "4"),
            (keys::cas::CPU, "3"),
            (keys::openshift::MEMORY_MB, "1024"),
        ],
        serde_json::json!({"machineType": "n2-standard-4", "zone": "europe-west1-b", "preemptible": false}),
    );
    let c = build(&[r], &Templates::new());
    let it = &c.instance_types[0];
    assert_eq!(it.capacity.cpu_milli, 3000);
    assert_eq!(it.name, "n2-standard-4");
    assert_eq!(it.offerings[0].capacity_type, CapacityType::OnDemand);
    assert_eq!(it.offerings[0].zone, "europe-west1-b");
}

#[test]
fn availability_max_paused_and_backoff() {
    let at_max = md_obj(
        "full",
        &[CPU_MEM[0], CPU_MEM[1], (keys::capi::MAX_SIZE, "1")],
    );
    let mut paused = md_obj("paused", &CPU_MEM);
    paused.spec.paused = Some(true);
    let backed = md_obj("backed", &CPU_MEM);
    let ok = md_obj("ok", &CPU_MEM);
    let resources: Vec<ScalableResource> = [&at_max, &paused, &backed, &ok]
        .into_iter()
        .map(ScalableResource::from)
        .collect();
    let backoff: Backoff = [(resources[2].id.clone(), 2000)].into();
    let c = instance_types(
        &resources,
        &no_template(),
        &NodeSamples::new(),
        &nodeclass(),
        1000,
        &backoff,
    );
    let avail: BTreeMap<&str, Option<Unavailable>> = c
        .resources
        .iter()
        .map(|(id, o)| (id.name.as_str(), o.unavailable.clone()))
        .collect();
    assert_eq!(avail["full"], Some(Unavailable::AtMaxSize { max: 1 }));
    assert_eq!(avail["paused"], Some(Unavailable::Paused));
    assert_eq!(avail["backed"], Some(Unavailable::BackOff { until: 2000 }));
    assert_eq!(avail["ok"], None);
    // After the window the back-off no longer applies.
    let c = instance_types(
        &resources,
        &no_template(),
        &NodeSamples::new(),
        &nodeclass(),
        2001,
        &backoff,
    );
    assert!(
        c.resources
            .values()
            .any(|o| o.resource.name == "backed" && o.available())
    );
}

#[test]
fn failures_of_two_types_in_a_zone_back_the_zone_off() {
    let mk = |name: &str, ty: &str, zone: &str| {
        let labels = format!("node.kubernetes.io/instance-type={ty}");
        let mut md = md_obj(
            name,
            &[CPU_MEM[0], CPU_MEM[1], (keys::cas::LABELS, labels.as_str())],
        );
        md.spec.template.spec.failure_domain = Some(zone.into());
        ScalableResource::from(&md)
    };
    let resources = [
        mk("a-small", "small", "z1"),
        mk("a-large", "large", "z1"),
        mk("a-xl", "xl", "z1"),
        mk("b-small", "small", "z2"),
    ];
    let catalog = |backoff: &Backoff, now: i64| {
        let c = instance_types(
            &resources,
            &no_template(),
            &NodeSamples::new(),
            &nodeclass(),
            now,
            backoff,
        );
        c.resources
            .iter()
            .map(|(id, o)| (id.name.clone(), o.unavailable.clone()))
            .collect::<BTreeMap<String, Option<Unavailable>>>()
    };
    // One type failing is that type's problem.
    let one: Backoff = [(resources[0].id.clone(), 2000)].into();
    let avail = catalog(&one, 1000);
    assert_eq!(avail["a-small"], Some(Unavailable::BackOff { until: 2000 }));
    assert_eq!(avail["a-xl"], None);
    // Two types failing in z1: z1's last type goes out until the later window ends; z2 stays.
    let two: Backoff = [
        (resources[0].id.clone(), 2000),
        (resources[1].id.clone(), 2100),
    ]
    .into();
    let avail = catalog(&two, 1000);
    assert_eq!(
        avail["a-xl"],
        Some(Unavailable::ZoneBackOff {
            until: 2100,
            types: 2
        })
    );
    assert_eq!(avail["b-small"], None);
    // Once one window has ended, one type is left failing: the zone is back.
    let avail = catalog(&two, 2050);
    assert_eq!(avail["a-small"], None);
    assert_eq!(avail["a-xl"], None);
    assert_eq!(avail["a-large"], Some(Unavailable::BackOff { until: 2100 }));
}

#[test]
fn same_instance_type_in_several_zones_merges() {
    let mk = |name: &str, zone: &str, price: &str| {
        let mut md = md_obj(
            name,
            &[
                CPU_MEM[0],
                CPU_MEM[1],
                (
                    keys::cas::LABELS,
                    "node.kubernetes.io/instance-type=m5.large",
                ),
                (keys::ours::PRICE_PER_HOUR, price),
            ],
        );
        md.spec.template.spec.failure_domain = Some(zone.into());
        ScalableResource::from(&md)
    };
    let c = build(
        &[
            mk("a", "z1", "0.1"),
            mk("b", "z2", "0.2"),
            mk("c", "z1", "0.09"),
        ],
        &no_template(),
    );
    assert_eq!(c.instance_types.len(), 1);
    let it = &c.instance_types[0];
    assert_eq!(it.offerings.len(), 2);
    assert_eq!(it.offerings[0].zone, "z1");
    assert_eq!(it.offerings[0].price, 0.09);
    let best = c.resolve("m5.large", "z1", CapacityType::OnDemand).unwrap();
    assert_eq!(best.resource.name, "c");
    // A different shape under the same name keeps its own name.
    let mut other = md_obj(
        "big",
        &[
            (keys::cas::CPU, "64"),
            (keys::cas::MEMORY, "8Gi"),
            (
                keys::cas::LABELS,
                "node.kubernetes.io/instance-type=m5.large",
            ),
        ],
    );
    other.spec.template.spec.failure_domain = Some("z3".into());
    let c = build(
        &[mk("a", "z1", "0.1"), ScalableResource::from(&other)],
        &no_template(),
    );
    let names: Vec<&str> = c.instance_types.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, vec!["m5.large", "ns.big"]);
}

#[test]
fn selection_uses_member_label_selector_and_kinds() {
    let mut not_member = md_obj("nm", &CPU_MEM);
    not_member.metadata.labels = None;
    let mut labelled = md_obj("gpu", &CPU_MEM);
    labelled
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("pool".into(), "gpu".into());
    let plain = md_obj("plain", &CPU_MEM);
    let resources: Vec<ScalableResource> = [&not_member, &labelled, &plain]
        .into_iter()
        .map(ScalableResource::from)
        .collect();
    let mut nc = nodeclass();
    let c = instance_types(
        &resources,
        &no_template(),
        &NodeSamples::new(),
        &nc,
        0,
        &Backoff::new(),
    );
    assert_eq!(c.resources.len(), 2);
    nc.selector = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some([("pool".to_string(), "gpu".to_string())].into()),
            ..Default::default()
        },
    );
    let c = instance_types(
        &resources,
        &no_template(),
        &NodeSamples::new(),
        &nc,
        0,
        &Backoff::new(),
    );
    assert_eq!(
        c.resources
            .keys()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>(),
        vec!["gpu"]
    );
    nc.selector = None;
    nc.kinds = Some(vec![ResourceKind::OpenShiftMachineSet]);
    let c = instance_types(
        &resources,
        &no_template(),
        &NodeSamples::new(),
        &nc,
        0,
        &Backoff::new(),
    );
    assert!(c.resources.is_empty());
}

/// Every malformed value is a problem naming object and key; a good resource next to it
/// still comes back, and the bad one too unless the value was indispensable (CPU, memory
/// with no other source) or CAS would not make it a node group (min/max).
#[test]
fn malformed_values_are_problems_naming_object_and_key() {
    let cases: Vec<(Vec<(&str, &str)>, &str, fn(&ProblemError) -> bool)> = vec![
        (vec![(keys::cas::CPU, "lots")], keys::cas::CPU, |e| {
            matches!(e, ProblemError::Value(ValueError::Quantity(_)))
        }),
        (vec![(keys::cas::MEMORY, "-8Gi")], keys::cas::MEMORY, |e| {
            matches!(
                e,
                ProblemError::Value(ValueError::Quantity(
                    crate::quantity::QuantityError::Negative(_)
                ))
            )
        }),
        (
            vec![(keys::cas::EPHEMERAL_DISK, "1TB")],
            keys::cas::EPHEMERAL_DISK,
            |e| matches!(e, ProblemError::Value(_)),
        ),
        (
            vec![(keys::cas::MAX_PODS, "-1")],
            keys::cas::MAX_PODS,
            |e| matches!(e, ProblemError::Value(_)),
        ),
        (
            vec![(keys::cas::GPU_COUNT, "x")],
            keys::cas::GPU_COUNT,
            |e| matches!(e, ProblemError::Value(_)),
        ),
        (
            vec![
                (keys::cas::GPU_COUNT, "1"),
                (keys::cas::GPU_TYPE, "bad key/x/y"),
            ],
            keys::cas::GPU_TYPE,
            |e| matches!(e, ProblemError::Value(ValueError::InvalidKey(_))),
        ),
        (
            vec![(keys::cas::TAINTS, "a=b:Sometimes")],
            keys::cas::TAINTS,
            |e| {
                matches!(
                    e,
                    ProblemError::Value(ValueError::UnknownTaintEffect { .. })
                )
            },
        ),
        (
            vec![(keys::cas::TAINTS, "novalue")],
            keys::cas::TAINTS,
            |e| matches!(e, ProblemError::Value(ValueError::MissingTaintEffect(_))),
        ),
        (vec![(keys::cas::LABELS, "a")], keys::cas::LABELS, |e| {
            matches!(e, ProblemError::Value(ValueError::MalformedPair(_)))
        }),
        (
            vec![(keys::cas::CSI_DRIVER, "ebs=-3")],
            keys::cas::CSI_DRIVER,
            |e| matches!(e, ProblemError::Value(ValueError::Negative(_))),
        ),
        (
            vec![(keys::ours::PRICE_PER_HOUR, "-0.5")],
            keys::ours::PRICE_PER_HOUR,
            |e| matches!(e, ProblemError::Value(ValueError::Negative(_))),
        ),
        (
            vec![(keys::ours::PRICE_PER_HOUR, "cheap")],
            keys::ours::PRICE_PER_HOUR,
            |e| matches!(e, ProblemError::Value(ValueError::NotADecimal(_))),
        ),
        (
            vec![(keys::ours::CAPACITY_TYPE, "preemptible")],
            keys::ours::CAPACITY_TYPE,
            |e| matches!(e, ProblemError::Value(ValueError::UnknownCapacityType(_))),
        ),
        (
            vec![(keys::capi::MIN_SIZE, "3"), (keys::capi::MAX_SIZE, "2")],
            keys::capi::MIN_SIZE,
            |e| matches!(e, ProblemError::MinAboveMax { min: 3, max: 2 }),
        ),
        (
            vec![(keys::capi::MAX_SIZE, "-2")],
            keys::capi::MAX_SIZE,
            |e| matches!(e, ProblemError::Value(ValueError::Negative(_))),
        ),
        (
            vec![(keys::capi::MIN_SIZE, "one")],
            keys::capi::MIN_SIZE,
            |e| matches!(e, ProblemError::Value(ValueError::NotAnInteger(_))),
        ),
    ];
    for (extra, key, check) in cases {
        let mut ann: Vec<(&str, &str)> = CPU_MEM.to_vec();
        ann.retain(|(k, _)| !extra.iter().any(|(e, _)| e == k));
        ann.extend(extra.iter().copied());
        let bad = ScalableResource::from(&md_obj("bad", &ann));
        let good = ScalableResource::from(&md_obj("good", &CPU_MEM));
        let c = build(&[bad, good], &no_template());
        let left_out = [
            keys::cas::CPU,
            keys::cas::MEMORY,
            keys::capi::MIN_SIZE,
            keys::capi::MAX_SIZE,
        ]
        .contains(&key);
        assert!(
            c.resources.keys().any(|id| id.name == "good"),
            "{key}: good resource must survive"
        );
        assert_eq!(
            c.resources.len(),
            if left_out { 1 } else { 2 },
            "{key}: {:?}",
            c.problems
        );
        let p = c
            .problems
            .iter()
            .find(|p| p.key == key && check(&p.error))
            .expect(key);
        assert_eq!(p.kept, !left_out, "{key}");
        assert_eq!(p.key, key);
        assert_eq!(p.object.name, "bad");
        assert_eq!(p.object.kind, "MachineDeployment.cluster.x-k8s.io");
        assert!(check(&p.error), "{key}: {:?}", p.error);
        // The message names both.
        let msg = p.to_string();
        assert!(msg.contains("ns/bad") && msg.contains(key), "{msg}");
    }
}

#[test]
fn template_problems() {
    // Template missing.
    let not_found: Templates = [(infra(), TemplateLookup::NotFound)].into();
    let c = one(&CPU_MEM, &not_found);
    assert!(matches!(
        c.problems[0].error,
        ProblemError::TemplateNotFound { .. }
    ));
    assert_eq!(c.problems[0].key, "spec.template.spec.infrastructureRef");
    // Not fetched / unreadable.
    let c = one(&CPU_MEM, &Templates::new());
    assert!(matches!(
        c.problems[0].error,
        ProblemError::TemplateUnreadable { .. }
    ));
    // Malformed capacity in the template: the problem names the template object.
    let c = one(
        &[],
        &template(serde_json::json!({"capacity": {"cpu": "4 cores", "memory": "1Gi"}})),
    );
    assert!(c.resources.is_empty());
    let p = c
        .problems
        .iter()
        .find(|p| p.key == "status.capacity.cpu")
        .unwrap();
    assert_eq!(
        p.object.kind,
        "DockerMachineTemplate.infrastructure.cluster.x-k8s.io"
    );
    assert!(
        c.problems
            .iter()
            .any(|p| matches!(p.error, ProblemError::MissingCapacity { resource: "cpu" }))
    );
    // No capacity anywhere.
    let c = one(&[], &no_template());
    assert!(
        c.problems
            .iter()
            .any(|p| matches!(p.error, ProblemError::MissingCapacity { resource: "cpu" }))
    );
    // Unknown taint effect in the template.
    let mut md = md_obj("md", &CPU_MEM);
    md.spec.template.spec.taints = vec![capi::MachineTaint {
        key: "k".into(),
        value: None,
        effect: "Evict".into(),
        propagation: None,
    }];
    let c = build(&[ScalableResource::from(&md)], &no_template());
    assert_eq!(c.problems[0].key, "spec.template.spec.taints");
    // A MachineSet owned by a MachineDeployment.
    let mut ms = capi::MachineSet::default();
    ms.metadata.name = Some("ms".into());
    ms.metadata.namespace = Some("ns".into());
    ms.metadata.labels = Some(
        [
            (keys::capi::KARPENTER_MEMBER.to_string(), String::new()),
            (keys::capi::DEPLOYMENT_NAME.to_string(), "md".to_string()),
        ]
        .into(),
    );
    ms.metadata.annotations = Some(
        CPU_MEM
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    ms.spec.template.spec.infrastructure_ref.name = "tmpl".into();
    ms.spec.template.spec.infrastructure_ref.api_group =
        Some("infrastructure.cluster.x-k8s.io".into());
    ms.spec.template.spec.infrastructure_ref.kind = "DockerMachineTemplate".into();
    let c = build(&[ScalableResource::from(&ms)], &no_template());
    assert!(matches!(
        c.problems[0].error,
        ProblemError::OwnedByDeployment { .. }
    ));
}

proptest! {
    /// Whatever the annotation values, extraction returns (never panics) and every resource
    /// is either in the catalog or named by a problem.
    #[test]
    fn extraction_is_total(values in proptest::collection::vec("\\PC{0,24}", 14)) {
        let keys_list = [
            keys::cas::CPU, keys::cas::MEMORY, keys::cas::EPHEMERAL_DISK, keys::cas::MAX_PODS,
            keys::cas::GPU_TYPE, keys::cas::GPU_COUNT, keys::cas::LABELS, keys::cas::TAINTS,
            keys::cas::CSI_DRIVER, keys::ours::PRICE_PER_HOUR, keys::ours::CAPACITY_TYPE,
            keys::capi::MIN_SIZE, keys::capi::MAX_SIZE, keys::openshift::MEMORY_MB,
        ];
        let ann: Vec<(&str, &str)> = keys_list.iter().copied().zip(values.iter().map(String::as_str)).collect();
        let c = one(&ann, &no_template());
        prop_assert!(c.resources.len() == 1 || c.problems.iter().any(|p| !p.kept));
        prop_assert!(c.resources.len() == 1 || c.instance_types.is_empty());
        let r = openshift_ms(&ann, serde_json::json!({"instanceType": values[0]}));
        let c = build(&[r], &Templates::new());
        prop_assert!(c.resources.len() == 1 || c.problems.iter().any(|p| !p.kept));
        for it in &c.instance_types {
            prop_assert!(parse::is_label_value(&it.name));
        }
    }
}

/// The registration taint the guides put in a template (OpenShift's `spec.template.spec.taints`)
/// is removed at registration: it is not a taint of the shape, pods need not tolerate it.
#[test]
fn the_registration_taint_is_not_a_taint_of_the_shape() {
    let mut md = md_obj("md", &CPU_MEM);
    md.spec.template.spec.taints = vec![
        capi::MachineTaint {
            key: "karpenter.sh/unregistered".into(),
            value: None,
            effect: "NoExecute".into(),
            propagation: Some("Always".into()),
        },
        capi::MachineTaint {
            key: "dedicated".into(),
            value: Some("infra".into()),
            effect: "NoSchedule".into(),
            propagation: Some("Always".into()),
        },
    ];
    md.metadata.annotations.as_mut().unwrap().insert(
        keys::cas::TAINTS.to_string(),
        "karpenter.sh/unregistered=:NoExecute".to_string(),
    );
    let c = build(&[ScalableResource::from(&md)], &no_template());
    let keys: Vec<&str> = c.instance_types[0]
        .taints
        .iter()
        .map(|t| t.key.as_str())
        .collect();
    assert_eq!(keys, vec!["dedicated"]);
}
