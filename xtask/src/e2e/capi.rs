//! Running the Cluster API core manager outside a cluster.
//!
//! CAPI always serves admission and conversion webhooks and its API objects are unusable
//! without them (defaulting fills required fields; v1beta1 <-> v1beta2 needs conversion). In a
//! cluster, cert-manager and a Service wire them up; here the recipe is:
//!
//! 1. a CA and a serving certificate for 127.0.0.1 ([`crate::pki::webhook_serving`]) in the
//!    directory passed as `--webhook-cert-dir` (`tls.crt`, `tls.key`);
//! 2. CAPI's Mutating/ValidatingWebhookConfigurations, read from the module's
//!    `config/webhook/manifests.yaml` at the pinned version, with every
//!    `clientConfig.service` replaced by `url: https://127.0.0.1:<webhook port><path>` and
//!    `caBundle` set to that CA;
//! 3. the conversion webhook on every CRD that CAPI's kustomization patches
//!    (`config/crd/patches/webhook_in_*.yaml`: `strategy: Webhook`, path `/convert`), pointed
//!    at the same URL;
//! 4. the manager with `--webhook-port`, `--webhook-cert-dir`, `--leader-elect=false`,
//!    health and diagnostics on 127.0.0.1 (diagnostics without authn: `--insecure-diagnostics`)
//!    and the feature gates we do not exercise off (MachinePool, ClusterTopology, RuntimeSDK);
//!    it is ready when its `/readyz` (which includes the webhook server) answers 200.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, anyhow};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use testenv::versions;

/// Field manager of our changes (kept apart from the CRD installer's, so re-applying CRDs
/// does not take the conversion settings away).
const MANAGER: &str = "karpenter-capi-e2e";

/// Ports of the CAPI manager.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    pub webhook: u16,
    pub health: u16,
    pub diagnostics: u16,
}

fn module_dir() -> Result<PathBuf> {
    testenv::gomod::try_module_dir(versions::CLUSTER_API.0, versions::CLUSTER_API.1)
        .map_err(|e| anyhow!(e))
}

/// Replaces every webhook's `clientConfig` in a webhook configuration document (JSON form)
/// with `url: <base><service path>` and the CA bundle. Returns the number rewritten.
pub fn rewrite_webhooks(doc: &mut Value, base_url: &str, ca_b64: &str) -> Result<usize> {
    let webhooks = doc
        .get_mut("webhooks")
        .and_then(Value::as_array_mut)
        .context("webhook configuration without webhooks")?;
    for webhook in webhooks.iter_mut() {
        let path = webhook
            .pointer("/clientConfig/service/path")
            .and_then(Value::as_str)
            .context("webhook without clientConfig.service.path")?
            .to_string();
        webhook["clientConfig"] = json!({ "url": format!("{base_url}{path}"), "caBundle": ca_b64 });
    }
    Ok(webhooks.len())
}

/// Installs CAPI's webhook configurations and CRD conversion webhooks pointing at
/// `https://127.0.0.1:<port>` (recipe steps 2 and 3).
pub async fn install_webhooks(client: &Client, port: u16, ca_pem: &str) -> Result<()> {
    let module = module_dir()?;
    let base_url = format!("https://127.0.0.1:{port}");
    let ca_b64 = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(ca_pem)
    };
    let params = PatchParams::apply(MANAGER).force();

    let manifests = module.join("config/webhook/manifests.yaml");
    let text = std::fs::read_to_string(&manifests)
        .with_context(|| format!("reading {}", manifests.display()))?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("parsing {}", manifests.display()))?;
    let mut count = 0;
    for mut doc in docs.into_iter().filter(|d| d.is_object()) {
        count += rewrite_webhooks(&mut doc, &base_url, &ca_b64)?;
        // Prefixed: the upstream names ("mutating-webhook-configuration") are generic.
        let name = format!(
            "capi-{}",
            doc.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("webhooks")
        );
        doc["metadata"] = json!({ "name": name });
        match doc.get("kind").and_then(Value::as_str) {
            Some("MutatingWebhookConfiguration") => {
                let obj: MutatingWebhookConfiguration = serde_json::from_value(doc)?;
                Api::<MutatingWebhookConfiguration>::all(client.clone())
                    .patch(&name, &params, &Patch::Apply(&obj))
                    .await
                    .with_context(|| format!("applying {name}"))?;
            }
            Some("ValidatingWebhookConfiguration") => {
                let obj: ValidatingWebhookConfiguration = serde_json::from_value(doc)?;
                Api::<ValidatingWebhookConfiguration>::all(client.clone())
                    .patch(&name, &params, &Patch::Apply(&obj))
                    .await
                    .with_context(|| format!("applying {name}"))?;
            }
            other => {
                return Err(anyhow!(
                    "unexpected kind {other:?} in {}",
                    manifests.display()
                ));
            }
        }
    }

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut converted = 0;
    for name in conversion_crds(&module.join("config/crd/patches"))? {
        let patch = json!({ "spec": { "conversion": {
            "strategy": "Webhook",
            "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": { "url": format!("{base_url}/convert"), "caBundle": ByteString(ca_pem.as_bytes().to_vec()) },
            },
        }}});
        crds.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("adding the conversion webhook to CRD {name}"))?;
        converted += 1;
    }
    eprintln!(
        "e2e: {count} CAPI webhooks and {converted} CRD conversion webhooks point at {base_url}"
    );
    Ok(())
}

/// The CRD names CAPI's kustomization gives a conversion webhook (one patch file each).
fn conversion_crds(patches: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let entries =
        std::fs::read_dir(patches).with_context(|| format!("reading {}", patches.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let is_patch = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("webhook_in_") && n.ends_with(".yaml"));
        if !is_patch {
            continue;
        }
        let doc: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path)?)
            .with_context(|| format!("parsing {}", path.display()))?;
        if doc
            .pointer("/spec/conversion/strategy")
            .and_then(Value::as_str)
            == Some("Webhook")
            && let Some(name) = doc.pointer("/metadata/name").and_then(Value::as_str)
        {
            names.push(name.to_string());
        }
    }
    names.sort();
    Ok(names)
}

/// The manager's command line (recipe step 4).
pub fn command(binary: &Path, kubeconfig: &Path, cert_dir: &Path, ports: Ports) -> Command {
    let mut command = Command::new(binary);
    command
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--leader-elect=false")
        .arg(format!("--webhook-port={}", ports.webhook))
        .arg(format!("--webhook-cert-dir={}", cert_dir.display()))
        .arg(format!("--health-addr=127.0.0.1:{}", ports.health))
        .arg(format!(
            "--diagnostics-address=127.0.0.1:{}",
            ports.diagnostics
        ))
        .arg("--insecure-diagnostics=true")
        .arg("--feature-gates=MachinePool=false,ClusterTopology=false,RuntimeSDK=false")
        .arg("--v=2");
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhooks_point_at_loopback_with_the_ca() {
        let mut doc = json!({
            "kind": "MutatingWebhookConfiguration",
            "webhooks": [
                { "name": "a", "clientConfig": { "service": { "name": "webhook-service", "namespace": "system", "path": "/mutate-x" } } },
                { "name": "b", "clientConfig": { "service": { "name": "webhook-service", "namespace": "system", "path": "/validate-y" } } },
            ],
        });
        let n = rewrite_webhooks(&mut doc, "https://127.0.0.1:9443", "Q0E=").expect("rewrite");
        assert_eq!(n, 2);
        assert_eq!(
            doc["webhooks"][0]["clientConfig"]["url"],
            "https://127.0.0.1:9443/mutate-x"
        );
        assert_eq!(doc["webhooks"][1]["clientConfig"]["caBundle"], "Q0E=");
        assert!(doc["webhooks"][1]["clientConfig"].get("service").is_none());
        let mut broken = json!({ "webhooks": [{ "clientConfig": {} }] });
        assert!(rewrite_webhooks(&mut broken, "https://x", "").is_err());
    }

    #[test]
    fn pinned_capi_module_has_webhooks_and_conversion_patches() {
        let module = module_dir().expect("CAPI module");
        let names = conversion_crds(&module.join("config/crd/patches")).expect("patches");
        assert!(
            names.contains(&"machinedeployments.cluster.x-k8s.io".to_string()),
            "{names:?}"
        );
        assert!(module.join("config/webhook/manifests.yaml").is_file());
    }
}
