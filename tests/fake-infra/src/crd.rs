//! The fake kinds' CustomResourceDefinitions.
//!
//! The schemas keep `spec` and `status` open (`x-kubernetes-preserve-unknown-fields`): CAPI
//! reads infrastructure objects as unstructured data through its contract paths
//! (`spec.providerID`, `status.initialization.provisioned`, `status.capacity`, ...), and tests
//! put whatever shape they need into the fake. The status subresource is on, as the contract
//! expects (CAPI and this provider write status separately from spec).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Api, Client};
use serde_json::json;

use crate::{CLUSTER_KIND, CONTRACT_LABEL, GROUP, MACHINE_KIND, Result, TEMPLATE_KIND, VERSION};

/// `(kind, plural)` of each fake kind.
pub const KINDS: [(&str, &str); 3] = [
    (CLUSTER_KIND, "fakeinfraclusters"),
    (MACHINE_KIND, "fakeinframachines"),
    (TEMPLATE_KIND, "fakeinframachinetemplates"),
];

/// The dynamic-API description of one fake kind.
pub fn api_resource(kind: &str) -> ApiResource {
    let plural = KINDS.iter().find(|(k, _)| *k == kind).map_or_else(
        || format!("{}s", kind.to_lowercase()),
        |(_, p)| (*p).to_string(),
    );
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, kind), &plural)
}

/// The three CRDs.
pub fn crds() -> Vec<CustomResourceDefinition> {
    KINDS
        .iter()
        .map(|(kind, plural)| {
            let value = json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {
                    "name": format!("{plural}.{GROUP}"),
                    "labels": { CONTRACT_LABEL.0: CONTRACT_LABEL.1 },
                },
                "spec": {
                    "group": GROUP,
                    "scope": "Namespaced",
                    "names": {
                        "kind": kind,
                        "listKind": format!("{kind}List"),
                        "plural": plural,
                        "singular": kind.to_lowercase(),
                        "categories": ["cluster-api"],
                    },
                    "versions": [{
                        "name": VERSION,
                        "served": true,
                        "storage": true,
                        "subresources": { "status": {} },
                        "schema": { "openAPIV3Schema": {
                            "type": "object",
                            "description": "TEST-ONLY fake infrastructure object of karpenter-capi's end-to-end tests.",
                            "properties": {
                                "apiVersion": { "type": "string" },
                                "kind": { "type": "string" },
                                "metadata": { "type": "object" },
                                "spec": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                                "status": { "type": "object", "x-kubernetes-preserve-unknown-fields": true },
                            },
                        }},
                    }],
                },
            });
            serde_json::from_value(value).unwrap_or_else(|e| {
                // The JSON above is a constant; a failure here is a bug in this file.
                unreachable!("fake-infra CRD literal does not parse: {e}")
            })
        })
        .collect()
}

/// Applies the CRDs (server-side apply, so re-running is harmless) and waits until they are
/// served.
pub async fn install(client: &Client) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("kcapi-fake-infra").force();
    for crd in crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(&crd)).await?;
    }
    for crd in crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crate::fixtures::wait_for(&format!("CRD {name} established"), 60, || async {
            let crd = api.get(&name).await?;
            Ok(crd.status.and_then(|s| s.conditions).is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            }))
        })
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crds_carry_the_contract_label_and_a_status_subresource() {
        let crds = crds();
        assert_eq!(crds.len(), 3);
        for crd in &crds {
            let labels = crd.metadata.labels.clone().unwrap_or_default();
            assert_eq!(
                labels.get(CONTRACT_LABEL.0).map(String::as_str),
                Some(VERSION)
            );
            let version = &crd.spec.versions[0];
            assert!(
                version
                    .subresources
                    .as_ref()
                    .is_some_and(|s| s.status.is_some())
            );
            assert!(crd.metadata.name.as_deref().unwrap_or("").ends_with(GROUP));
        }
        assert_eq!(api_resource(MACHINE_KIND).plural, "fakeinframachines");
    }
}
