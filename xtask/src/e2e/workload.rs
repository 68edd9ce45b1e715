//! The e2e environment's separate workload cluster: what a Cluster API user runs, with
//! MachineDeployments and Machines in the management cluster and nodes, pods and
//! Karpenter's objects in the workload cluster.
//!
//! It is a second kube-apiserver on the control plane's etcd under its own prefix
//! (`testenv::second`, same PKI, so the admin credentials are shared), with every CRD and its
//! own kube-scheduler, kube-controller-manager and kwok: without them no pod of the
//! workload cluster would be bound, owned by a ReplicaSet or run. CAPI's manager and the fake
//! infrastructure provider reach it only through a Cluster's kubeconfig Secret, as they
//! would reach a real workload cluster.

use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};

use super::build::E2eBinaries;
use super::components;
use super::procs::Procs;
use crate::{controlplane, pki};

/// The name of the second API server (its etcd prefix and directory).
const NAME: &str = "workload";

/// Where the workload cluster's admin kubeconfig is, under the environment's directory.
pub fn kubeconfig(dir: &Path) -> PathBuf {
    dir.join("control-plane")
        .join(format!("second-{NAME}"))
        .join("kubeconfig")
}

/// Starts the workload cluster beside the control plane of `mgmt_kubeconfig` and returns the
/// ports its scheduler, controller-manager and kwok will listen on (the caller waits for
/// them with the management cluster's).
pub async fn start(
    dir: &Path,
    mgmt_kubeconfig: &Path,
    binaries: &E2eBinaries,
    pki: &pki::Pki,
    procs: &mut Procs,
) -> Result<Vec<(&'static str, u16)>> {
    let second = testenv::second::SecondCluster::start_beside(mgmt_kubeconfig, NAME)
        .await
        .map_err(|e| anyhow!("workload cluster: {e}"))?;
    let kubeconfig = second.kubeconfig.clone();
    let (child, log) = second.into_process();
    procs.adopt("workload-kube-apiserver", child, log);
    let client = controlplane::client_for(&kubeconfig).await?;
    controlplane::install_crds(&client).await?;

    let own = dir.join(NAME);
    std::fs::create_dir_all(&own)?;
    let scheduler = controlplane::free_port()?;
    procs.spawn(
        "workload-kube-scheduler",
        &mut components::scheduler(&binaries.kube_scheduler, &kubeconfig, scheduler, &own),
    )?;
    let kcm = controlplane::free_port()?;
    procs.spawn(
        "workload-kube-controller-manager",
        &mut components::controller_manager(
            &binaries.kube_controller_manager,
            &kubeconfig,
            kcm,
            &own,
            pki,
        ),
    )?;
    let kwok = controlplane::free_port()?;
    procs.spawn(
        "workload-kwok",
        &mut components::kwok(
            &binaries.kwok,
            &kubeconfig,
            kwok,
            &components::kwok_stage_files()?,
        ),
    )?;
    Ok(vec![
        ("workload-kube-scheduler", scheduler),
        ("workload-kube-controller-manager", kcm),
        ("workload-kwok", kwok),
    ])
}
