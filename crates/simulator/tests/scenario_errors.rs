//! A bad scenario fails with an error that names the line and the field.

use karpenter_capi_simulator::{SimError, scenario, world};

fn err_of(text: &str) -> SimError {
    match scenario::parse(text, "bad.yaml") {
        Err(e) => e,
        Ok(s) => match world::compile(
            &scenario::LoadedScenario {
                scenario: s,
                file: "bad.yaml".into(),
                base_dir: ".".into(),
                text: text.into(),
            },
            0,
        ) {
            Err(e) => e,
            Ok(_) => panic!("scenario unexpectedly valid"),
        },
    }
}

/// The line and field of a YAML (parse) error.
fn line_and_field(e: &SimError) -> (usize, &str) {
    match e {
        SimError::Yaml { line, field, .. } => (*line, field.as_str()),
        other => panic!("expected a YAML error, got {other:?}"),
    }
}

const GOOD_HEAD: &str = "name: x
catalog:
  builtin: ec2-sample
workload:
  pods:
    - name: web
      count: 2
";

#[test]
fn wrong_type_names_line_and_field() {
    let text = format!("{GOOD_HEAD}      requests: {{cpu: 1}}\n      arriveAt: soon\n");
    let e = err_of(&text);
    let msg = e.to_string();
    assert_eq!(
        line_and_field(&e),
        (9, "workload.pods[0].arriveAt"),
        "{msg}"
    );
    assert!(msg.starts_with("bad.yaml:9:"), "{msg}");
    assert!(msg.contains("workload.pods[0].arriveAt"), "{msg}");
}

#[test]
fn unknown_field_is_named() {
    let text = format!("{GOOD_HEAD}      requests: {{cpu: 1}}\n      replicas: 3\n");
    let msg = err_of(&text).to_string();
    assert!(msg.contains("bad.yaml:9"), "{msg}");
    assert!(msg.contains("replicas"), "{msg}");
}

#[test]
fn bad_quantity_names_line_and_field() {
    let text = format!("{GOOD_HEAD}      requests:\n        cpu: lots\n");
    let e = err_of(&text);
    let msg = e.to_string();
    assert!(matches!(e, SimError::Invalid { .. }), "{msg}");
    assert!(msg.contains("bad.yaml:9"), "{msg}");
    assert!(msg.contains("workload.pods[0].requests.cpu"), "{msg}");
    assert!(msg.contains("lots"), "{msg}");
}

/// A scenario whose one NodePool's template spec is `template_spec` (lines indented by 10).
fn nodepool_scenario(template_spec: &str) -> String {
    format!(
        "catalog: {{builtin: ec2-sample}}
nodePools:
  - metadata: {{name: a}}
    spec:
      template:
        spec:
{template_spec}workload:
  pods:
    - {{name: w, requests: {{cpu: 1}}}}
"
    )
}

/// One `kubernetes.io/arch` requirement with `operator`, starting on line 7 of the scenario.
fn arch_requirement(operator: &str) -> String {
    format!(
        "          requirements:
            - key: kubernetes.io/arch
              operator: {operator}
              values: [amd64]
"
    )
}

#[test]
fn bad_nodepool_operator_names_field() {
    let msg = err_of(&nodepool_scenario(&arch_requirement("Within"))).to_string();
    assert!(
        msg.contains("nodePools[0].spec.template.spec.requirements[0].operator"),
        "{msg}"
    );
    assert!(msg.contains("bad.yaml:9"), "{msg}");
}

/// Scenario NodePools follow upstream's schema, so a missing required field is named with the
/// mapping that lacks it (not the first key of that mapping, where the reader notices).
#[test]
fn nodepool_without_node_class_ref_names_the_mapping() {
    let e = err_of(&nodepool_scenario(&arch_requirement("In")));
    let msg = e.to_string();
    assert_eq!(
        line_and_field(&e),
        (7, "nodePools[0].spec.template.spec"),
        "{msg}"
    );
    assert!(msg.contains("nodeClassRef"), "{msg}");
}

#[test]
fn unknown_instance_type_of_existing_nodes() {
    let text = "catalog: {builtin: ec2-sample}
existingNodes:
  - name: n
    instanceType: m5.huge
workload:
  pods:
    - {name: w, requests: {cpu: 1}}
";
    let msg = err_of(text).to_string();
    assert!(msg.contains("existingNodes[0].instanceType"), "{msg}");
    assert!(msg.contains("bad.yaml:4"), "{msg}");
}

#[test]
fn empty_workload_and_catalog() {
    let msg = err_of("catalog: {builtin: ec2-sample}\nworkload: {}\n").to_string();
    assert!(msg.contains("workload"), "{msg}");
    let msg = err_of("workload:\n  pods:\n    - {name: w, requests: {cpu: 1}}\n").to_string();
    assert!(msg.contains("catalog"), "{msg}");
}

/// A trace written out as a scenario, 10,000 pod groups of ~25 YAML nodes each: over
/// serde-saphyr's default 250,000-node budget (it was refused with `budget breached: Nodes
/// { nodes: 250001 }`), within the simulator's.
#[test]
fn ten_thousand_pod_groups_parse() {
    let mut text = String::from("name: big\nworkload:\n  pods:\n");
    for i in 0..10_000 {
        text += &format!(
            "    - name: g{i}\n      count: 2\n      arriveAt: {i}\n      durationSeconds: 600\n      requests: {{cpu: 250m, memory: 512Mi}}\n      labels: {{app: g{i}, tier: web}}\n      nodeSelector: {{kubernetes.io/arch: amd64}}\n"
        );
    }
    let s = scenario::parse(&text, "big.yaml").expect("10,000 groups parse");
    assert_eq!(s.workload.pods.len(), 10_000);
}
