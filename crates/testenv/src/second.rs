//! A second, separate cluster for tests of the two-cluster setup real CAPI users run (a
//! management cluster holding MachineDeployments and Machines, a workload cluster holding
//! pods, nodes and Karpenter's objects).
//!
//! It is one more kube-apiserver on the test control plane's etcd under its own
//! `--etcd-prefix`: a cluster that shares nothing visible with the first one (its own
//! namespaces, CRDs, RBAC), started in a second instead of the ~10 s of a new etcd, and
//! reusing the control plane's PKI so the same admin credentials work. It is stopped (and
//! its log kept next to the control plane's on failure) when the value is dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kube::Client;

/// A running second API server.
pub struct SecondCluster {
    /// `None` once handed over with [`SecondCluster::into_process`].
    child: Option<Child>,
    pub kubeconfig: PathBuf,
    pub log: PathBuf,
}

impl std::fmt::Debug for SecondCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecondCluster")
            .field("kubeconfig", &self.kubeconfig)
            .finish_non_exhaustive()
    }
}

fn field<'a>(state: &'a serde_json::Value, key: &str) -> Result<&'a serde_json::Value, String> {
    state
        .get(key)
        .ok_or_else(|| format!("control plane state.json has no {key}"))
}

fn free_port() -> Result<u16, String> {
    crate::ports::free_port().map_err(|e| format!("no free port: {e}"))
}

impl SecondCluster {
    /// Starts it (named `name`, which makes its etcd prefix and directory) and waits until
    /// it answers `/readyz`, at most 60 s.
    pub async fn start(name: &str) -> Result<Self, String> {
        Self::start_beside(&crate::kubeconfig_path(), name).await
    }

    /// As [`SecondCluster::start`], beside the control plane whose admin kubeconfig is
    /// `first` (its directory holds `state.json` and `pki/`): the e2e environment's own
    /// control plane is not the shared test one.
    pub async fn start_beside(first: &Path, name: &str) -> Result<Self, String> {
        let dir = first
            .parent()
            .ok_or("the control plane kubeconfig has no directory")?
            .to_path_buf();
        let state: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("state.json"))
                .map_err(|e| format!("{}: {e}", dir.join("state.json").display()))?,
        )
        .map_err(|e| format!("state.json: {e}"))?;
        let etcd_port = field(&state, "etcd_port")?
            .as_u64()
            .ok_or("etcd_port is not a number")?;
        let binary = PathBuf::from(
            field(&state, "apiserver_binary")?
                .as_str()
                .ok_or("apiserver_binary is not a path")?,
        );
        let pki = dir.join("pki");
        let port = free_port()?;
        let own = dir.join(format!("second-{name}"));
        std::fs::create_dir_all(&own).map_err(|e| format!("{}: {e}", own.display()))?;
        let log = own.join("kube-apiserver.log");
        let out = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let p = |f: &str| pki.join(f).display().to_string();
        let child = Command::new(&binary)
            .arg(format!("--etcd-servers=http://127.0.0.1:{etcd_port}"))
            .arg(format!("--etcd-prefix=/second-{name}"))
            .arg("--bind-address=127.0.0.1")
            .arg("--advertise-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg(format!("--cert-dir={}", own.display()))
            .arg(format!("--tls-cert-file={}", p("apiserver.crt")))
            .arg(format!("--tls-private-key-file={}", p("apiserver.key")))
            .arg(format!("--client-ca-file={}", p("ca.crt")))
            .arg(format!("--service-account-key-file={}", p("sa.pub")))
            .arg(format!(
                "--service-account-signing-key-file={}",
                p("sa.key")
            ))
            .arg("--service-account-issuer=https://kubernetes.default.svc")
            .arg("--authorization-mode=RBAC")
            .arg("--service-cluster-ip-range=10.0.1.0/24")
            .arg("--disable-admission-plugins=ServiceAccount")
            .arg("--v=1")
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("starting {}: {e}", binary.display()))?;
        let kubeconfig = own.join("kubeconfig");
        let text = std::fs::read_to_string(first).map_err(|e| e.to_string())?;
        let rewritten = rewrite_server(&text, port)?;
        std::fs::write(&kubeconfig, rewritten).map_err(|e| e.to_string())?;
        let mut me = SecondCluster {
            child: Some(child),
            kubeconfig,
            log,
        };
        me.wait_ready(Duration::from_secs(60)).await?;
        Ok(me)
    }

    async fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                return Err(format!(
                    "second kube-apiserver exited ({status}); log {}:\n{}",
                    self.log.display(),
                    tail(&self.log, 30)
                ));
            }
            // Ready enough for a test: authenticated as admin and the system namespaces made
            // (RBAC bootstrap and the namespace post-start hook have run).
            let client = crate::client_for(&self.kubeconfig).await;
            let nss: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
            if let Ok(Some(_)) = nss.get_opt("kube-system").await {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "second kube-apiserver not ready after {timeout:?}; log {}:\n{}",
                    self.log.display(),
                    tail(&self.log, 30)
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Installs Cluster API's CRDs (from the Go module cache, at the pinned version) and waits
    /// until they are served.
    pub async fn install_capi_crds(&self) -> Result<(), String> {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        use kube::api::{Patch, PatchParams};
        let (pin, paths) = crate::versions::THIRD_PARTY_CRDS
            .iter()
            .find(|(pin, _)| *pin == crate::versions::CLUSTER_API)
            .ok_or("no Cluster API CRDs pinned")?;
        let module = crate::gomod::try_module_dir(pin.0, pin.1)?;
        let dir = module.join(paths[0]);
        let api: kube::Api<CustomResourceDefinition> = kube::Api::all(self.client().await);
        let mut names = Vec::new();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
            let mut crd: CustomResourceDefinition =
                serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            crd.status = None;
            let name = crd.metadata.name.clone().unwrap_or_default();
            api.patch(
                &name,
                &PatchParams::apply("karpenter-capi-tests").force(),
                &Patch::Apply(&crd),
            )
            .await
            .map_err(|e| format!("applying {name}: {e}"))?;
            names.push(name);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        for name in names {
            loop {
                let established = api.get(&name).await.ok().is_some_and(|c| {
                    c.status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
                if established {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(format!("CRD {name} not established in 30 s"));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Ok(())
    }

    /// A client for it, authenticated as cluster admin.
    pub async fn client(&self) -> Client {
        crate::client_for(&self.kubeconfig).await
    }
}

impl SecondCluster {
    /// Hands the process over to a supervisor that outlives this value (the e2e
    /// environment keeps its workload cluster up for every scenario and records how it ends).
    pub fn into_process(mut self) -> (Child, PathBuf) {
        let child = self
            .child
            .take()
            .expect("a SecondCluster owns its process until handed over");
        (child, self.log.clone())
    }
}

impl Drop for SecondCluster {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The kubeconfig with its `server:` pointing at `port` on localhost.
fn rewrite_server(text: &str, port: u16) -> Result<String, String> {
    let mut found = false;
    let out: Vec<String> = text
        .lines()
        .map(|l| {
            if let Some(indent) = l.find("server: https://127.0.0.1:") {
                found = true;
                format!("{}server: https://127.0.0.1:{port}", &l[..indent])
            } else {
                l.to_string()
            }
        })
        .collect();
    if !found {
        return Err("the control plane kubeconfig has no localhost server line".into());
    }
    Ok(out.join("\n") + "\n")
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::rewrite_server;

    #[test]
    fn rewrites_only_the_server_line() {
        let k = "clusters:\n- cluster:\n    server: https://127.0.0.1:1234\n    certificate-authority: /x/ca.crt\n";
        let r = rewrite_server(k, 999).expect("rewritten");
        assert!(r.contains("    server: https://127.0.0.1:999\n"), "{r}");
        assert!(r.contains("certificate-authority: /x/ca.crt"));
        assert!(rewrite_server("server: https://example.com", 1).is_err());
    }
}
