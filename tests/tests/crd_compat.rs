//! Our NodePool and NodeClaim CRDs against upstream Karpenter's, field by field
//! (descriptions aside), at the release pinned in `testenv::versions::KARPENTER`.
//!
//! Every difference we allow on purpose is listed with its reason; the test fails on any
//! other difference and on any listed difference that no longer exists.

use integration_tests::{schema_differences, schema_of, upstream_karpenter_crd};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use karpenter_api::crd::crds;

fn ours(name: &str) -> CustomResourceDefinition {
    crds()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("we generate no CRD {name}"))
}

/// (difference, why it is allowed)
const NODEPOOL_ALLOWED: &[(&str, &str)] = &[];
const NODECLAIM_ALLOWED: &[(&str, &str)] = &[];

fn check(name: &str, upstream_file: &str, allowed: &[(&str, &str)]) {
    let ours = ours(name);
    let upstream = upstream_karpenter_crd(upstream_file);
    let found = schema_differences(&schema_of(&ours), &schema_of(&upstream));
    let allowed: std::collections::BTreeSet<String> =
        allowed.iter().map(|(d, _)| (*d).to_string()).collect();
    let unexpected: Vec<&String> = found.difference(&allowed).collect();
    let stale: Vec<&String> = allowed.difference(&found).collect();
    assert!(
        unexpected.is_empty() && stale.is_empty(),
        "{name}: schema differs from upstream {}.\nunexpected differences:\n  {}\nallowed but no longer found:\n  {}",
        testenv::versions::KARPENTER.1,
        unexpected
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  "),
        stale
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  "),
    );
}

fn check_metadata(name: &str, upstream_file: &str) {
    let ours = ours(name);
    let upstream = upstream_karpenter_crd(upstream_file);
    assert_eq!(ours.spec.group, upstream.spec.group);
    assert_eq!(ours.spec.scope, upstream.spec.scope);
    assert_eq!(ours.spec.names.kind, upstream.spec.names.kind);
    assert_eq!(ours.spec.names.plural, upstream.spec.names.plural);
    assert_eq!(ours.spec.names.singular, upstream.spec.names.singular);
    assert_eq!(ours.spec.names.categories, upstream.spec.names.categories);
    assert_eq!(ours.spec.names.short_names, upstream.spec.names.short_names);
    let (a, b) = (&ours.spec.versions[0], &upstream.spec.versions[0]);
    assert_eq!(a.name, b.name);
    assert_eq!(a.served, b.served);
    assert_eq!(a.storage, b.storage);
    let columns = |v: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion| {
        serde_json::to_value(&v.additional_printer_columns).expect("serialize")
    };
    assert_eq!(columns(a), columns(b), "{name}: printer columns");
    assert_eq!(
        serde_json::to_value(&a.subresources).expect("serialize"),
        serde_json::to_value(&b.subresources).expect("serialize"),
        "{name}: subresources"
    );
}

#[test]
fn nodepool_schema_matches_upstream() {
    check(
        "nodepools.karpenter.sh",
        "karpenter.sh_nodepools.yaml",
        NODEPOOL_ALLOWED,
    );
}

#[test]
fn nodeclaim_schema_matches_upstream() {
    check(
        "nodeclaims.karpenter.sh",
        "karpenter.sh_nodeclaims.yaml",
        NODECLAIM_ALLOWED,
    );
}

#[test]
fn nodepool_names_columns_and_subresources_match_upstream() {
    check_metadata("nodepools.karpenter.sh", "karpenter.sh_nodepools.yaml");
}

#[test]
fn nodeclaim_names_columns_and_subresources_match_upstream() {
    check_metadata("nodeclaims.karpenter.sh", "karpenter.sh_nodeclaims.yaml");
}

/// The committed YAML in config/crd/ is what the types generate (run `cargo xtask crdgen`
/// after changing a type).
#[test]
fn committed_crd_yaml_is_up_to_date() {
    let dir = integration_tests::repo_root().join("config").join("crd");
    for crd in crds() {
        let file = karpenter_api::crd::file_name(&crd);
        let expected = karpenter_api::crd::to_yaml(&crd).expect("render");
        let actual = std::fs::read_to_string(dir.join(&file)).unwrap_or_default();
        assert!(
            actual == expected,
            "config/crd/{file} is stale: run `cargo xtask crdgen`"
        );
    }
}

/// The committed YAML parses back to the same CRD (the YAML writer loses nothing).
#[test]
fn committed_crd_yaml_parses_back() {
    let dir = integration_tests::repo_root().join("config").join("crd");
    for crd in crds() {
        let read = integration_tests::read_crd(&dir.join(karpenter_api::crd::file_name(&crd)));
        assert_eq!(
            serde_json::to_value(&read).expect("json"),
            serde_json::to_value(&crd).expect("json")
        );
    }
}

/// Every Cargo.toml that picks a k8s-openapi version feature picks the one pinned next to
/// the Kubernetes version, and the pins agree with each other.
#[test]
fn kubernetes_version_is_pinned_in_one_place() {
    use testenv::versions::{K8S_OPENAPI_FEATURE, KUBERNETES, KUBERNETES_STAGING};
    let minor = KUBERNETES
        .trim_start_matches('v')
        .split('.')
        .nth(1)
        .expect("minor");
    assert_eq!(K8S_OPENAPI_FEATURE, format!("v1_{minor}"));
    assert_eq!(
        KUBERNETES_STAGING.trim_start_matches("v0."),
        KUBERNETES.trim_start_matches("v1.")
    );
    let root = integration_tests::repo_root();
    let mut manifests = vec![root.join("Cargo.toml")];
    for top in ["crates", "bins", "benches", "tests", "xtask"] {
        let dir = root.join(top);
        if dir.join("Cargo.toml").is_file() {
            manifests.push(dir.join("Cargo.toml"));
        }
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let manifest = entry.path().join("Cargo.toml");
                if manifest.is_file() {
                    manifests.push(manifest);
                }
            }
        }
    }
    for manifest in manifests {
        let text = std::fs::read_to_string(&manifest).expect("read manifest");
        for line in text
            .lines()
            .filter(|l| l.contains("k8s-openapi") && !l.trim_start().starts_with('#'))
        {
            for word in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("v1_") {
                    assert_eq!(
                        word,
                        K8S_OPENAPI_FEATURE,
                        "{} enables {word}; the pinned feature is {K8S_OPENAPI_FEATURE}",
                        manifest.display()
                    );
                }
            }
        }
    }
}
