//! `/metrics` (Prometheus text), `/healthz` (the process serves) and `/readyz` (every
//! reflector has synced) over plain HTTP.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use crate::context::Context;

async fn metrics(
    State(ctx): State<Arc<Context>>,
) -> (StatusCode, [(&'static str, &'static str); 1], String) {
    ctx.metrics
        .cluster_state_synced
        .set(i64::from(ctx.state.synced()));
    ctx.metrics.is_leader.set(i64::from(ctx.is_leader()));
    (
        StatusCode::OK,
        [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
        ctx.metrics.encode(),
    )
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(ctx): State<Arc<Context>>) -> (StatusCode, String) {
    let unsynced = ctx.state.unsynced();
    if unsynced.is_empty() {
        (StatusCode::OK, "ok".into())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not synced: {}", unsynced.join(", ")),
        )
    }
}

/// The router (one for both addresses; each serves every path).
pub fn router(ctx: Arc<Context>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(ctx)
}

/// Binds and serves; returns the bound address (port 0 picks a free one).
pub async fn serve(ctx: Arc<Context>, addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let tasks = ctx.cloud.tasks().clone();
    let app = router(ctx);
    tasks.spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "http server stopped");
        }
    });
    Ok(bound)
}
