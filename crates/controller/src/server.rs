//! `/metrics` (Prometheus text), `/healthz` (the process serves), `/readyz` (every
//! reflector has synced) and, with `--replay-dir`, `/replay` (the records, newest first) and
//! `/replay/<file>` over plain HTTP.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
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

async fn replay_list(State(ctx): State<Arc<Context>>) -> (StatusCode, String) {
    match &ctx.options.replay_dir {
        None => (
            StatusCode::NOT_FOUND,
            "replay records are off (start with --replay-dir)\n".into(),
        ),
        Some(dir) => {
            let mut out = crate::replay::list(dir).join("\n");
            out.push('\n');
            (StatusCode::OK, out)
        }
    }
}

async fn replay_file(
    State(ctx): State<Arc<Context>>,
    Path(name): Path<String>,
) -> (StatusCode, [(&'static str, &'static str); 1], Vec<u8>) {
    let found = ctx
        .options
        .replay_dir
        .as_deref()
        .and_then(|dir| crate::replay::read(dir, &name));
    match found {
        Some(bytes) => (
            StatusCode::OK,
            [("content-type", "application/json")],
            bytes,
        ),
        None => (
            StatusCode::NOT_FOUND,
            [("content-type", "text/plain")],
            b"no such replay record\n".to_vec(),
        ),
    }
}

/// The router (one for both addresses; each serves every path).
pub fn router(ctx: Arc<Context>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/replay", get(replay_list))
        .route("/replay/{name}", get(replay_file))
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
