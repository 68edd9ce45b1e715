//! Helpers shared by the integration tests: reading upstream's CRDs from the Go module
//! cache, comparing schemas, and working with third-party objects (CAPI, OpenShift) through
//! kube's dynamic API.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use serde_json::Value;

/// The workspace root.
pub fn repo_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(Path::to_path_buf).unwrap_or(manifest)
}

/// Reads one CRD from a YAML file (the first CustomResourceDefinition document).
///
/// # Panics
/// When the file is missing or holds no CRD.
pub fn read_crd(path: &Path) -> CustomResourceDefinition {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()));
    let doc = docs
        .into_iter()
        .find(|d| d.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition"))
        .unwrap_or_else(|| panic!("no CRD in {}", path.display()));
    serde_json::from_value(doc).unwrap_or_else(|e| panic!("bad CRD in {}: {e}", path.display()))
}

/// Upstream Karpenter's CRD file (e.g. `karpenter.sh_nodepools.yaml`) at the pinned release.
pub fn upstream_karpenter_crd(file: &str) -> CustomResourceDefinition {
    let dir = testenv::gomod::module_dir(testenv::versions::KARPENTER);
    read_crd(&dir.join("pkg/apis/crds").join(file))
}

/// The openAPIV3Schema of the single version of a CRD, as JSON.
pub fn schema_of(crd: &CustomResourceDefinition) -> Value {
    let schema = crd
        .spec
        .versions
        .first()
        .and_then(|v| v.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("CRD has a schema");
    serde_json::to_value(schema).expect("schema serializes")
}

/// Every difference between two schemas, descriptions aside, as readable lines
/// `<json path>: <what differs>`, sorted.
pub fn schema_differences(ours: &Value, upstream: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    diff(ours, upstream, "", &mut out);
    out
}

fn diff(ours: &Value, upstream: &Value, path: &str, out: &mut BTreeSet<String>) {
    match (ours, upstream) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                if key == "description" {
                    continue;
                }
                let sub = format!("{path}/{key}");
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => diff(x, y, &sub, out),
                    (Some(x), None) => {
                        out.insert(format!("{sub}: only ours ({})", short(x)));
                    }
                    (None, Some(y)) => {
                        out.insert(format!("{sub}: only upstream ({})", short(y)));
                    }
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(x, y, &format!("{path}[{i}]"), out);
            }
        }
        _ => {
            if strip_descriptions(ours) != strip_descriptions(upstream) {
                out.insert(format!(
                    "{path}: ours {} upstream {}",
                    short(ours),
                    short(upstream)
                ));
            }
        }
    }
}

fn strip_descriptions(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "description")
                .map(|(k, v)| (k.clone(), strip_descriptions(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_descriptions).collect()),
        other => other.clone(),
    }
}

fn short(value: &Value) -> String {
    let text = strip_descriptions(value).to_string();
    if text.len() > 120 {
        format!("{}...", &text[..117])
    } else {
        text
    }
}

/// A dynamic API for a third-party kind (CAPI, OpenShift) in a namespace.
pub fn dynamic_api(
    client: &Client,
    namespace: &str,
    gvk: &GroupVersionKind,
    plural: &str,
) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(gvk, plural);
    Api::namespaced_with(client.clone(), namespace, &resource)
}

/// The API server's refusal of an object, if that is what `result` is: (HTTP code, message).
pub fn api_error<T: std::fmt::Debug>(result: &Result<T, kube::Error>) -> Option<(u16, String)> {
    match result {
        Err(kube::Error::Api(status)) => Some((status.code, status.message.clone())),
        _ => None,
    }
}

/// A NodePool JSON body that the API server accepts, for tests that break one field of it.
pub fn valid_nodepool_json(name: &str) -> Value {
    serde_json::json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {
                    "nodeClassRef": {
                        "group": "karpenter.cluster.x-k8s.io",
                        "kind": "ClusterAPINodeClass",
                        "name": "default"
                    },
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                    ]
                }
            },
            "weight": 10
        }
    })
}
