//! NodePool manifests as users write them (from upstream's documentation and upstream's own
//! test manifest) read into our types and written back without loss.

use std::path::Path;

use karpenter_api::{NodeClaim, NodePool};
use serde_json::Value;

/// Quantities may be written as YAML numbers (`cpu: 10000`); the API (and Go) treats them as
/// the same quantity as the string, which is how we write them back.
fn normalize_quantities(value: &mut Value, in_quantity_map: bool) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                let quantity_map = matches!(
                    key.as_str(),
                    "limits" | "resources" | "requests" | "capacity" | "allocatable"
                );
                if in_quantity_map && child.is_number() {
                    *child = Value::String(child.to_string());
                } else {
                    normalize_quantities(child, quantity_map);
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| normalize_quantities(v, false)),
        _ => {}
    }
}

fn round_trip(path: &Path) {
    let text = std::fs::read_to_string(path).expect("read manifest");
    let mut original: Value = serde_saphyr::from_str(&text).expect("parse YAML");
    // Straight from YAML into the type, as a user's file would be read.
    let typed: NodePool =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut written = serde_json::to_value(&typed).expect("serialize");
    normalize_quantities(&mut original, false);
    normalize_quantities(&mut written, false);
    assert_eq!(
        written,
        original,
        "{} changed in a round trip",
        path.display()
    );
    // And through our YAML writer and back.
    let yaml = serde_saphyr::to_string(&typed).expect("to YAML");
    let again: NodePool = serde_saphyr::from_str(&yaml).expect("re-read YAML");
    assert_eq!(again, typed, "{} changed through YAML", path.display());
}

#[test]
fn documented_nodepools_round_trip() {
    let dir = integration_tests::repo_root().join("tests/fixtures/nodepools");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).expect("fixtures") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "yaml") {
            round_trip(&path);
            count += 1;
        }
    }
    assert!(
        count >= 4,
        "expected the documented manifests in {}",
        dir.display()
    );
}

#[test]
fn upstream_test_nodepool_round_trips() {
    let dir = testenv::gomod::module_dir(testenv::versions::KARPENTER);
    round_trip(&dir.join("test/pkg/environment/common/default_nodepool.yaml"));
}

#[test]
fn defaults_follow_upstream() {
    let text = std::fs::read_to_string(
        integration_tests::repo_root().join("tests/fixtures/nodepools/docs-static-capacity.yaml"),
    )
    .expect("read");
    let pool: NodePool = serde_saphyr::from_str(&text).expect("parse");
    let disruption = pool.spec.disruption_or_default();
    assert_eq!(disruption.consolidate_after.0, "0s");
    assert_eq!(
        disruption.consolidation_policy,
        Some(karpenter_api::ConsolidationPolicy::WhenEmptyOrUnderutilized)
    );
    assert_eq!(
        disruption.budgets.as_deref(),
        Some(&[karpenter_api::Budget::default_budget()][..])
    );
    assert_eq!(pool.spec.template.spec.expire_after_or_default().0, "720h");
    assert_eq!(pool.spec.weight_or_default(), 0);
}

#[test]
fn nodeclaim_with_status_round_trips() {
    let text = r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-x7k2p
  labels:
    karpenter.sh/nodepool: default
spec:
  nodeClassRef:
    group: karpenter.cluster.x-k8s.io
    kind: ClusterAPINodeClass
    name: default
  requirements:
    - key: node.kubernetes.io/instance-type
      operator: In
      values: ["m5.large", "m5.xlarge"]
      minValues: 1
  resources:
    requests:
      cpu: 1500m
      pods: "3"
  expireAfter: 720h
status:
  providerID: aws:///us-west-2a/i-0123456789abcdef0
  nodeName: ip-10-0-0-1.ec2.internal
  imageID: ami-0123
  capacity:
    cpu: "2"
    memory: 8Gi
  allocatable:
    cpu: 1930m
    memory: 7Gi
  lastPodEventTime: "2024-02-02T19:54:34Z"
  conditions:
    - type: Launched
      status: "True"
      lastTransitionTime: "2024-02-02T19:54:34Z"
      reason: Launched
      message: ""
"#;
    let mut original: Value = serde_saphyr::from_str(text).expect("parse");
    let claim: NodeClaim = serde_saphyr::from_str(text).expect("typed");
    let mut written = serde_json::to_value(&claim).expect("serialize");
    normalize_quantities(&mut original, false);
    normalize_quantities(&mut written, false);
    assert_eq!(written, original);
}
