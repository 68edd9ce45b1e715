//! Leader election with a coordination.k8s.io Lease (kube-lease-manager): only the holder
//! acts; the others keep their reflectors warm and take over when the Lease expires.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

/// The Lease's name.
pub const LEASE: &str = "karpenter-capi-leader";

/// A receiver that is `true` while this instance leads. With election off, always `true`.
pub async fn elect(
    client: Client,
    enabled: bool,
    namespace: &str,
    identity: &str,
    lease_secs: u64,
) -> Result<watch::Receiver<bool>, kube_lease_manager::LeaseManagerError> {
    if !enabled {
        let (tx, rx) = watch::channel(true);
        // Keep the sender alive for the life of the process.
        std::mem::forget(tx);
        return Ok(rx);
    }
    let manager = LeaseManagerBuilder::new(client, LEASE)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(lease_secs)
        .with_grace(lease_secs.div_ceil(3).max(1))
        .build()
        .await?;
    let (rx, task) = manager.watch().await;
    tokio::spawn(async move {
        match task.await {
            Ok(Ok(_)) => tracing::info!("leader election stopped"),
            Ok(Err(e)) => tracing::error!(error = %e, "leader election failed"),
            Err(e) => tracing::error!(error = %e, "leader election task panicked"),
        }
    });
    let _ = Duration::from_secs(lease_secs);
    Ok(rx)
}
