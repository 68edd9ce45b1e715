//! Command lines of kube-scheduler, kube-controller-manager and kwok in the e2e environment.
//!
//! All three talk to the API server with the admin kubeconfig (a test environment: no
//! per-component identities) and serve only on 127.0.0.1. Nothing runs leader election
//! (one replica each).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, anyhow};
use testenv::versions;

use crate::pki::Pki;

/// kube-controller-manager's controllers a workload needs: Deployments and ReplicaSets make
/// pods; the garbage collector removes what an owner's deletion orphans; node-lifecycle
/// (with taint-eviction) handles nodes that stop heartbeating; disruption computes PDB
/// status (evictions during drain and consolidation depend on it); serviceaccount(-token)
/// give namespaces their default ServiceAccount and tokens; namespace deletes namespaces;
/// pod-garbage-collector removes pods of deleted nodes; daemonset, statefulset, job and
/// ttl-after-finished for workloads tests may create; root-ca-certificate-publisher gives
/// every namespace `kube-root-ca.crt`, which projected service-account volumes read. No
/// cloud, route, service-LB, CSR, IPAM or volume controllers: nothing here provides what they
/// manage.
pub const KCM_CONTROLLERS: &[&str] = &[
    "deployment-controller",
    "replicaset-controller",
    "garbage-collector-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "disruption-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "namespace-controller",
    "pod-garbage-collector-controller",
    "daemonset-controller",
    "statefulset-controller",
    "job-controller",
    "ttl-after-finished-controller",
    "root-ca-certificate-publisher-controller",
];

fn serving_args(command: &mut Command, kubeconfig: &Path, port: u16, cert_dir: &Path) {
    let k = kubeconfig.display();
    command
        .arg(format!("--kubeconfig={k}"))
        .arg(format!("--authentication-kubeconfig={k}"))
        .arg(format!("--authorization-kubeconfig={k}"))
        .arg("--leader-elect=false")
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={port}"))
        .arg(format!("--cert-dir={}", cert_dir.display()));
}

pub fn scheduler(binary: &Path, kubeconfig: &Path, port: u16, dir: &Path) -> Command {
    let mut command = Command::new(binary);
    serving_args(
        &mut command,
        kubeconfig,
        port,
        &dir.join("kube-scheduler-certs"),
    );
    command.arg("--v=1");
    command
}

pub fn controller_manager(
    binary: &Path,
    kubeconfig: &Path,
    port: u16,
    dir: &Path,
    pki: &Pki,
) -> Command {
    let mut command = Command::new(binary);
    serving_args(
        &mut command,
        kubeconfig,
        port,
        &dir.join("kube-controller-manager-certs"),
    );
    command
        .arg(format!("--controllers={}", KCM_CONTROLLERS.join(",")))
        .arg(format!(
            "--service-account-private-key-file={}",
            pki.service_account_key.display()
        ))
        .arg(format!("--root-ca-file={}", pki.ca_cert.display()))
        .arg("--use-service-account-credentials=false")
        .arg("--v=1");
    command
}

/// kwok's Stage files, read from its module at the pinned version (not copied into the repo).
pub fn kwok_stage_files() -> Result<Vec<PathBuf>> {
    let module = testenv::gomod::try_module_dir(versions::KWOK.0, versions::KWOK.1)
        .map_err(|e| anyhow!(e))?;
    versions::KWOK_STAGES
        .iter()
        .map(|p| {
            let path = module.join(p);
            path.is_file()
                .then_some(path.clone())
                .with_context(|| format!("{} has no {p}", versions::KWOK.0))
        })
        .collect()
}

/// kwok managing the nodes with the fake provider's annotation: it makes them Ready, keeps
/// their leases, and moves pods bound to them to Running (and away when deleted). Its own
/// server (logs/exec/metrics) listens on 127.0.0.1 only. Pod IPs come from a /12 so a
/// thousand-pod burst does not run out (kwok's default is a /24).
pub fn kwok(binary: &Path, kubeconfig: &Path, port: u16, stages: &[PathBuf]) -> Command {
    let mut command = Command::new(binary);
    command
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--manage-all-nodes=false")
        .arg(format!(
            "--manage-nodes-with-annotation-selector={}={}",
            kcapi_fake_infra::KWOK_ANNOTATION.0,
            kcapi_fake_infra::KWOK_ANNOTATION.1
        ))
        .arg(format!("--server-address=127.0.0.1:{port}"))
        .arg("--cidr=10.64.0.0/12")
        .arg("--node-ip=10.63.0.1");
    for stage in stages {
        command.arg(format!("--config={}", stage.display()));
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kwok_stages_exist_in_the_pinned_module() {
        let files = kwok_stage_files().expect("kwok module");
        assert_eq!(files.len(), versions::KWOK_STAGES.len());
    }
}
