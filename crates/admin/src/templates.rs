//! Infrastructure machine templates for *every* scalable resource, members or not.
//!
//! The controller's cloud provider fetches templates only for a NodeClass's members and keeps
//! that function crate-private; discovery must show non-members too, so this module looks
//! them up itself (one discovery per group/kind, one GET per reference).
//! TODO(lead): once `cloudprovider::templates::fetch` is public, call it instead.

use std::collections::{BTreeMap, BTreeSet};

use capi_adapter::{InfraRef, ScalableResource, TemplateLookup, Templates};
use kube::api::{ApiResource, DynamicObject};
use kube::{Api, Client, discovery};

fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Templates of `resources`, by reference. Errors are values (the adapter reports them).
pub async fn fetch_all(client: &Client, resources: &[ScalableResource]) -> Templates {
    let refs: BTreeSet<&InfraRef> = resources
        .iter()
        .filter_map(|r| r.template.infrastructure_ref.as_ref())
        .collect();
    let mut kinds: BTreeMap<(String, String), Result<ApiResource, String>> = BTreeMap::new();
    let mut out = Templates::new();
    for r in refs {
        let key = (r.group.clone(), r.kind.clone());
        if !kinds.contains_key(&key) {
            let found = match discovery::group(client, &r.group).await {
                Ok(g) => g
                    .recommended_kind(&r.kind)
                    .map(|(ar, _)| ar)
                    .ok_or_else(|| format!("kind {} is not served in group {}", r.kind, r.group)),
                Err(e) => Err(format!("API group {} is not served: {e}", r.group)),
            };
            kinds.insert(key.clone(), found);
        }
        let lookup = match &kinds[&key] {
            Err(e) => TemplateLookup::Error(e.clone()),
            Ok(ar) => {
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), &r.namespace, ar);
                match api.get(&r.name).await {
                    Ok(obj) => TemplateLookup::Found(Box::new(obj)),
                    Err(e) if not_found(&e) => TemplateLookup::NotFound,
                    Err(e) => TemplateLookup::Error(e.to_string()),
                }
            }
        };
        out.insert(r.clone(), lookup);
    }
    out
}
