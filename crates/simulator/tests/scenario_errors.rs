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
fn a_capacity_outage_of_an_unknown_type_names_its_line_and_field() {
    let text = "catalog: {builtin: ec2-sample}
settings:
  capacityOutages:
    - {capacityType: spot}
    - instanceType: m5.huge
workload:
  pods:
    - {name: w, requests: {cpu: 1}}
";
    let msg = err_of(text).to_string();
    assert!(
        msg.contains("settings.capacityOutages[1].instanceType"),
        "{msg}"
    );
    assert!(msg.contains("bad.yaml:5"), "{msg}");
    assert!(msg.contains("m5.huge"), "{msg}");
}

#[test]
fn reclaiming_running_on_demand_capacity_is_refused() {
    let text = "catalog: {builtin: ec2-sample}
settings:
  capacityOutages:
    - {zone: us-east-1a, reclaimRunning: true}
workload:
  pods:
    - {name: w, requests: {cpu: 1}}
";
    let msg = err_of(text).to_string();
    assert!(
        msg.contains("settings.capacityOutages[0].reclaimRunning"),
        "{msg}"
    );
    assert!(msg.contains("capacityType: spot"), "{msg}");
}

#[test]
fn a_negative_failure_wait_names_its_field() {
    for (setting, field) in [
        ("launchFailureSeconds: -1", "settings.launchFailureSeconds"),
        (
            "cas: {maxNodeProvisionSeconds: -5}",
            "settings.cas.maxNodeProvisionSeconds",
        ),
    ] {
        let text = format!(
            "catalog: {{builtin: ec2-sample}}
settings:
  {setting}
workload:
  pods:
    - {{name: w, requests: {{cpu: 1}}}}
"
        );
        let msg = err_of(&text).to_string();
        assert!(msg.contains(field), "{msg}");
        assert!(msg.contains("must not be negative"), "{msg}");
    }
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

/// A misspelt field inside a Kubernetes object (upstream's types ignore unknown fields) is
/// an error naming the line and the field, not a silent default.
#[test]
fn unknown_field_inside_a_kubernetes_object_is_rejected() {
    let text = "name: typo\nworkload:\n  pods:\n    - name: web\n      requests: {cpu: 500m, memory: 1Gi}\n      topologySpreadConstraints:\n        - maxSkew: 1\n          topologyKey: topology.kubernetes.io/zone\n          whenUnsatisfiabel: ScheduleAnyway\n";
    let e = scenario::parse(text, "typo.yaml").expect_err("unknown field");
    let (line, field) = line_and_field(&e);
    assert_eq!(line, 9, "{e}");
    assert_eq!(
        field, "workload.pods[0].topologySpreadConstraints[0].whenUnsatisfiabel",
        "{e}"
    );
    assert!(
        e.to_string().contains("unknown field `whenUnsatisfiabel`"),
        "{e}"
    );
}

const SMALL: &str = "name: small\ncatalog:\n  overhead: none\n  types:\n    - {name: a, vcpu: 2, memoryMib: 4096, price: 0.1}\nworkload:\n  pods:\n    - {name: web, requests: {cpu: 500m, memory: 1Gi}}\n";

fn loaded(text: &str) -> scenario::LoadedScenario {
    scenario::LoadedScenario {
        scenario: scenario::parse(text, "s.yaml").expect("parses"),
        file: "s.yaml".into(),
        base_dir: ".".into(),
        text: text.into(),
    }
}

/// `memry: 4Gi` is an extended resource nothing offers: reported as a problem, by name.
#[test]
fn a_resource_no_type_offers_is_reported() {
    let text = SMALL.replace("memory: 1Gi}", "memory: 1Gi, memry: 4Gi}");
    let w = world::compile(&loaded(&text), 0).expect("world");
    assert!(
        w.problems
            .iter()
            .any(|p| p.contains("`memry`") && p.contains("no instance type")),
        "{:?}",
        w.problems
    );
    let w = world::compile(&loaded(SMALL), 0).expect("world");
    assert!(w.problems.is_empty(), "{:?}", w.problems);
}

/// Zero seeds is refused (it used to run one); an unknown strategy in the scenario file
/// names the file, line and entry.
#[test]
fn zero_seeds_and_unknown_scenario_strategies_are_errors() {
    use karpenter_capi_simulator::run;
    let ls = loaded(SMALL);
    let e = run::run(
        &ls,
        &run::RunOptions {
            strategies: vec![],
            seeds: 0,
        },
    )
    .expect_err("zero seeds");
    assert!(e.to_string().contains("--seeds must be at least 1"), "{e}");
    let text = format!("strategies: [cost-aware, nope]\n{SMALL}");
    let e = run::run(&loaded(&text), &run::RunOptions::default()).expect_err("unknown strategy");
    let msg = e.to_string();
    assert!(msg.starts_with("s.yaml:1:"), "{msg}");
    assert!(
        msg.contains("strategies[1]") && msg.contains("`nope`"),
        "{msg}"
    );
}

/// A missing catalog CSV names the scenario and the field, and the I/O error is not also a
/// `source` (printed as a chain it appeared twice).
#[test]
fn a_missing_catalog_file_names_the_scenario_and_field() {
    let text = SMALL.replace(
        "  overhead: none\n",
        "  overhead: none\n  csv: does-not-exist.csv\n",
    );
    let e = world::compile(&loaded(&text), 0).expect_err("missing csv");
    let msg = e.to_string();
    assert!(
        msg.contains("s.yaml") && msg.contains("catalog.csv"),
        "{msg}"
    );
    assert!(msg.contains("does-not-exist.csv"), "{msg}");
    let io = SimError::io("x.csv", std::io::Error::from(std::io::ErrorKind::NotFound));
    assert!(std::error::Error::source(&io).is_none());
}
