//! Reaching a Cluster's workload cluster the way CAPI does: through the Secret
//! `<cluster>-kubeconfig` (key `value`, label `cluster.x-k8s.io/cluster-name`).

use std::collections::HashMap;
use std::path::Path;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::{Error, Result};

/// CAPI's name for a Cluster's kubeconfig Secret.
pub fn secret_name(cluster: &str) -> String {
    format!("{cluster}-kubeconfig")
}

/// A kubeconfig with every referenced file (CA, client certificate and key) inlined as
/// `*-data`, so it works from a Secret on any machine. The e2e environment's admin
/// kubeconfig names files; CAPI and this provider read the Secret's bytes only.
pub fn inline_kubeconfig(path: &Path) -> Result<String> {
    let mut config = Kubeconfig::read_from(path)
        .map_err(|e| Error::Kubeconfig(format!("{}: {e}", path.display())))?;
    let b64 = |file: &str| -> Result<String> {
        let bytes = std::fs::read(file)
            .map_err(|e| Error::Kubeconfig(format!("reading {file} named in kubeconfig: {e}")))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    };
    for named in &mut config.clusters {
        if let Some(cluster) = named.cluster.as_mut()
            && let Some(file) = cluster.certificate_authority.take()
        {
            cluster.certificate_authority_data = Some(b64(&file)?);
        }
    }
    for named in &mut config.auth_infos {
        if let Some(auth) = named.auth_info.as_mut() {
            if let Some(file) = auth.client_certificate.take() {
                auth.client_certificate_data = Some(b64(&file)?);
            }
            if let Some(file) = auth.client_key.take() {
                auth.client_key_data = Some(b64(&file)?.into());
            }
        }
    }
    // kube's Kubeconfig serialises with serde; JSON is valid YAML for every reader.
    serde_json::to_string(&config).map_err(|e| Error::Kubeconfig(e.to_string()))
}

/// Clients for workload clusters, built from their kubeconfig Secrets and rebuilt when a
/// Secret changes.
#[derive(Default)]
pub struct Clients {
    by_cluster: HashMap<(String, String), (String, Client)>,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("clusters", &self.by_cluster.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Clients {
    /// The client for Cluster `namespace/cluster`.
    pub async fn get(&mut self, mgmt: &Client, namespace: &str, cluster: &str) -> Result<Client> {
        let secret = Api::<Secret>::namespaced(mgmt.clone(), namespace)
            .get(&secret_name(cluster))
            .await?;
        let version = secret.metadata.resource_version.clone().unwrap_or_default();
        let key = (namespace.to_string(), cluster.to_string());
        if let Some((v, client)) = self.by_cluster.get(&key)
            && *v == version
        {
            return Ok(client.clone());
        }
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get("value"))
            .map(|b| b.0.clone())
            .ok_or_else(|| {
                Error::Kubeconfig(format!(
                    "Secret {namespace}/{} has no key `value`",
                    secret_name(cluster)
                ))
            })?;
        let text = String::from_utf8(bytes)
            .map_err(|e| Error::Kubeconfig(format!("kubeconfig is not UTF-8: {e}")))?;
        let client = client_from_yaml(&text).await?;
        self.by_cluster.insert(key, (version, client.clone()));
        Ok(client)
    }
}

/// A client from kubeconfig text.
pub async fn client_from_yaml(text: &str) -> Result<Client> {
    let kubeconfig =
        Kubeconfig::from_yaml(text).map_err(|e| Error::Kubeconfig(format!("parse: {e}")))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Kubeconfig(e.to_string()))?;
    Client::try_from(config).map_err(Error::Kube)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inlines_every_file_a_kubeconfig_names() {
        let dir = std::env::temp_dir().join(testenv::unique_name("inline-kubeconfig"));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        for (name, body) in [("ca.crt", "CA"), ("a.crt", "CERT"), ("a.key", "KEY")] {
            std::fs::write(dir.join(name), body).expect("write");
        }
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n    certificate-authority: {d}/ca.crt\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\nusers:\n- name: u\n  user:\n    client-certificate: {d}/a.crt\n    client-key: {d}/a.key\n",
                d = dir.display()
            ),
        )
        .expect("write kubeconfig");
        let text = inline_kubeconfig(&path).expect("inline");
        let back = Kubeconfig::from_yaml(&text).expect("parse back");
        let cluster = back.clusters[0].cluster.as_ref().expect("cluster");
        assert!(cluster.certificate_authority.is_none());
        assert_eq!(cluster.certificate_authority_data.as_deref(), Some("Q0E="));
        let auth = back.auth_infos[0].auth_info.as_ref().expect("user");
        assert_eq!(auth.client_certificate_data.as_deref(), Some("Q0VSVA=="));
        assert!(auth.client_key.is_none() && auth.client_key_data.is_some());
        assert!(inline_kubeconfig(&dir.join("missing")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
