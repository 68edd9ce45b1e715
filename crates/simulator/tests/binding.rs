//! The simulated kube-scheduler binds with the core's filter: extended resources, topology
//! spread over zones without nodes yet (CAS baseline), each checked on a whole run.

use karpenter_capi_simulator::{run, scenario};

fn run_all(yaml: &str, name: &str) -> karpenter_capi_simulator::report::Report {
    let sc = scenario::parse(yaml, name).expect("valid scenario");
    let ls = scenario::from_value(sc, name);
    run::run(
        &ls,
        &run::RunOptions {
            strategies: vec!["cost-aware".into(), "karpenter".into(), "cas".into()],
            seeds: 1,
        },
    )
    .expect("run")
}

const HEADER: &str = r#"
settings:
  endSeconds: 7200
catalog:
  overhead: none
  types:
    - {name: cpu, vcpu: 4, memoryMib: 8192, price: 0.10}
    - {name: gpu, vcpu: 4, memoryMib: 16384, gpu: 1, price: 1.00}
zones: [zone-a, zone-b, zone-c]
nodePools:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata:
      name: default
    spec:
      template:
        spec:
          nodeClassRef: {group: karpenter.cluster.x-k8s.io, kind: ClusterAPINodeClass, name: default}
          requirements: []
"#;

/// A GPU pod arriving when a GPU-less node has room must not bind there: it needs a GPU
/// node, so the run costs at least that node for the pod's hour and never less than the
/// lower bound. With the swapped `fits_with` arguments the pod bound to the `cpu` node (the
/// core and CAS baseline then launched nothing for it) and the cost came out below the bound.
#[test]
fn gpu_pods_run_only_on_gpu_nodes() {
    let yaml = format!(
        "name: gpu-binding\n{HEADER}workload:\n  pods:\n    - {{name: web, count: 2, requests: {{cpu: \"1\", memory: 1Gi}}}}\n    - {{name: train, count: 1, arriveAt: 600, durationSeconds: 3600, requests: {{cpu: \"1\", memory: 1Gi, nvidia.com/gpu: \"1\"}}}}\n"
    );
    let report = run_all(&yaml, "gpu-binding.yaml");
    assert_eq!(report.runs.len(), 3);
    for r in &report.runs {
        let s = &r.summary;
        assert_eq!(s.pods_never_scheduled, 0, "{}: {s:?}", r.strategy);
        assert!(
            s.nodes_launched >= 2,
            "{}: a GPU node is needed besides the cpu node: {s:?}",
            r.strategy
        );
        // The GPU node for (about) the pod's hour alone costs $1.
        assert!(s.total_cost > 0.9, "{}: cost {}", r.strategy, s.total_cost);
        assert!(
            s.cost_over_lower_bound >= 1.0 - 1e-9,
            "{}: cost {} below the lower bound {}",
            r.strategy,
            s.total_cost,
            s.lower_bound_cost
        );
    }
}

/// Six pods spreading over three zones (maxSkew 1) with no node anywhere yet: every
/// strategy ends with two per zone, so at least three nodes (one per zone). The CAS baseline
/// used to count only zones that had nodes and put all six in one zone's node group.
#[test]
fn zone_spread_opens_empty_zones() {
    let yaml = format!(
        "name: zone-spread\n{HEADER}workload:\n  pods:\n    - name: web\n      count: 6\n      requests: {{cpu: 500m, memory: 512Mi}}\n      topologySpreadConstraints:\n        - {{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: web}}}}}}\n"
    );
    let report = run_all(&yaml, "zone-spread.yaml");
    for r in &report.runs {
        let s = &r.summary;
        assert_eq!(s.pods_never_scheduled, 0, "{}: {s:?}", r.strategy);
        assert!(
            s.peak_nodes >= 3,
            "{}: six zone-spread pods need a node in each of three zones: {s:?}",
            r.strategy
        );
    }
}
