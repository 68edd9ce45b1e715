//! Leader election with a coordination.k8s.io Lease (kube-lease-manager): only the holder
//! acts; the others keep their reflectors warm and take over when the Lease expires.

use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The Lease's name.
pub const LEASE: &str = "karpenter-capi-leader";

/// A receiver that is `true` while this instance leads (with election off, always `true`),
/// and the task that holds or waits for the Lease (abort it to step down).
pub async fn elect(
    client: Client,
    enabled: bool,
    namespace: &str,
    identity: &str,
    lease_secs: u64,
) -> Result<(watch::Receiver<bool>, JoinHandle<()>), kube_lease_manager::LeaseManagerError> {
    if !enabled {
        let (tx, rx) = watch::channel(true);
        // The sender lives as long as this task: the flag stays `true`.
        let task = tokio::spawn(async move {
            tx.closed().await;
        });
        return Ok((rx, task));
    }
    let manager = LeaseManagerBuilder::new(client, LEASE)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(lease_secs)
        .with_grace(lease_secs.div_ceil(3).max(1))
        .build()
        .await?;
    let (rx, task) = manager.watch().await;
    let mut changes = rx.clone();
    let id = identity.to_string();
    let watcher = tokio::spawn(async move {
        let abort = task.abort_handle();
        // Stepping down (this task aborted) stops the manager too.
        struct StopOnDrop(tokio::task::AbortHandle);
        impl Drop for StopOnDrop {
            fn drop(&mut self) {
                self.0.abort();
            }
        }
        let _stop = StopOnDrop(abort);
        while changes.changed().await.is_ok() {
            tracing::info!(identity = %id, leader = *changes.borrow(), "leadership changed");
        }
        match task.await {
            Ok(Ok(_)) => tracing::info!("leader election stopped"),
            Ok(Err(e)) => tracing::error!(error = %e, "leader election failed"),
            Err(e) => tracing::debug!(error = %e, "leader election task ended"),
        }
    });
    Ok((rx, watcher))
}
