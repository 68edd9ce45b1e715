//! Clients for the two clusters: the workload cluster (Nodes, Pods, NodePools, the CAS
//! Deployment in most setups) from `--kubeconfig`/`--context` or the usual inference, and the
//! management cluster (MachineDeployments, MachineSets, Machines) from
//! `--cluster-api-kubeconfig`, defaulting to the workload cluster as upstream does.

use std::path::PathBuf;

use capi_adapter::objects::capi::CapiVersion;
use karpenter_capi_controller::cloudprovider::{CloudProvider, Config};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config as KubeConfig};

use crate::Error;

/// How to reach the clusters.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub cluster_api_kubeconfig: Option<PathBuf>,
    pub namespaces: Option<Vec<String>>,
}

/// Both clients. `same` is true when the management cluster is the workload cluster.
#[derive(Clone)]
pub struct Clusters {
    pub workload: Client,
    pub management: Client,
    pub same: bool,
    pub capi_version: CapiVersion,
    /// Only these namespaces (scalable resources, CAS Deployments, MachineAutoscalers); `None`:
    /// all. For a HyperShift control-plane namespace, or a shared cluster.
    pub namespaces: Option<Vec<String>>,
}

impl std::fmt::Debug for Clusters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clusters")
            .field("same", &self.same)
            .field("capi_version", &self.capi_version)
            .field("namespaces", &self.namespaces)
            .finish_non_exhaustive()
    }
}

async fn config_from(
    path: Option<&PathBuf>,
    context: Option<&String>,
) -> Result<KubeConfig, Error> {
    let options = KubeConfigOptions {
        context: context.cloned(),
        ..KubeConfigOptions::default()
    };
    match path {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|e| Error::Kubeconfig {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
            KubeConfig::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| Error::Kubeconfig {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })
        }
        None if context.is_some() => {
            KubeConfig::from_kubeconfig(&options)
                .await
                .map_err(|e| Error::Kubeconfig {
                    path: "$KUBECONFIG".into(),
                    reason: e.to_string(),
                })
        }
        None => KubeConfig::infer().await.map_err(|e| Error::Kubeconfig {
            path: "(in-cluster or $KUBECONFIG)".into(),
            reason: e.to_string(),
        }),
    }
}

impl Clusters {
    pub async fn connect(opts: &ConnectOptions) -> Result<Clusters, Error> {
        let workload =
            Client::try_from(config_from(opts.kubeconfig.as_ref(), opts.context.as_ref()).await?)?;
        let (management, same) = match &opts.cluster_api_kubeconfig {
            Some(path) => (
                Client::try_from(config_from(Some(path), None).await?)?,
                false,
            ),
            None => (workload.clone(), true),
        };
        Ok(Clusters {
            workload,
            management,
            same,
            capi_version: CapiVersion::V1Beta2,
            namespaces: opts.namespaces.clone().filter(|n| !n.is_empty()),
        })
    }

    /// One client for both clusters (tests, and clusters where they are one).
    pub fn single(client: Client) -> Clusters {
        Clusters {
            workload: client.clone(),
            management: client,
            same: true,
            capi_version: CapiVersion::V1Beta2,
            namespaces: None,
        }
    }

    /// Limits everything to these namespaces.
    pub fn scoped(mut self, namespaces: &[&str]) -> Clusters {
        self.namespaces = Some(namespaces.iter().map(|n| n.to_string()).collect());
        self
    }

    /// Whether `namespace` is in scope.
    pub fn in_scope(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|ns| ns.iter().any(|n| n == namespace))
    }

    /// Every scalable resource in scope.
    pub async fn resources(&self) -> Result<Vec<capi_adapter::ScalableResource>, Error> {
        let mut all = self
            .provider()
            .resources(&capi_adapter::ResourceKind::ALL)
            .await?;
        all.retain(|r| self.in_scope(&r.id.namespace));
        all.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(all)
    }

    /// The controller's cloud provider, used here only to list scalable resources.
    pub fn provider(&self) -> CloudProvider {
        CloudProvider::new(
            self.management.clone(),
            self.workload.clone(),
            Config {
                capi_version: self.capi_version,
                ..Config::default()
            },
        )
    }
}
