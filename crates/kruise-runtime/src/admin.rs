//! The admin server: `/metrics`, `/healthz`, `/readyz` on `KRUISE_ADMIN_ADDR`.
//!
//! `/readyz` is green only once every registered readiness check (each cache's initial
//! sync, the webhook's TLS listener) has reported ready; until then it answers 503 and
//! names what is still pending.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// Named readiness checks; the process is ready when all of them are.
#[derive(Clone, Default)]
pub struct Readiness {
    checks: Arc<Mutex<BTreeMap<String, bool>>>,
}

/// One readiness check, created not-ready.
#[derive(Clone)]
pub struct ReadyHandle {
    name: String,
    checks: Arc<Mutex<BTreeMap<String, bool>>>,
}

impl ReadyHandle {
    pub fn set_ready(&self) {
        self.checks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(self.name.clone(), true);
    }

    pub fn set_not_ready(&self) {
        self.checks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(self.name.clone(), false);
    }
}

impl Readiness {
    /// Registers a check (not ready until [`ReadyHandle::set_ready`]).
    pub fn register(&self, name: impl Into<String>) -> ReadyHandle {
        let name = name.into();
        self.checks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name.clone(), false);
        ReadyHandle {
            name,
            checks: self.checks.clone(),
        }
    }

    /// Checks still pending; empty means ready.
    pub fn pending(&self) -> Vec<String> {
        self.checks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|(_, ready)| !**ready)
            .map(|(name, _)| name.clone())
            .collect()
    }

    pub fn is_ready(&self) -> bool {
        self.pending().is_empty()
    }

    /// Resolves once every registered check is ready (polled: checks flip from many
    /// tasks, and this is awaited only at start and on a regained lease).
    pub async fn wait_until_ready(&self) {
        while !self.is_ready() {
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
    }
}

#[derive(Clone)]
struct AdminState {
    metrics: Metrics,
    readiness: Readiness,
}

/// Binds the admin server and serves it until `shutdown` is cancelled. Returns the bound
/// address (useful with port 0).
pub async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz_handler))
        .with_state(AdminState { metrics, readiness });
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(err) = served {
            tracing::error!(%err, "admin server stopped");
        }
    });
    Ok(local)
}

async fn metrics_handler(State(state): State<AdminState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

async fn readyz_handler(State(state): State<AdminState>) -> impl IntoResponse {
    let pending = state.readiness.pending();
    if pending.is_empty() {
        (StatusCode::OK, "ok".to_string())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}", pending.join(", ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_check_is() {
        let r = Readiness::default();
        assert!(r.is_ready());
        let pods = r.register("cache pods");
        let sets = r.register("cache clonesets");
        assert_eq!(r.pending(), vec!["cache clonesets", "cache pods"]);
        pods.set_ready();
        assert!(!r.is_ready());
        sets.set_ready();
        assert!(r.is_ready());
        sets.set_not_ready();
        assert_eq!(r.pending(), vec!["cache clonesets"]);
    }

    #[tokio::test]
    async fn serves_health_readiness_and_metrics() {
        let metrics = Metrics::new();
        metrics.reconciles.with_label_values(&["c", "ok"]).inc();
        let readiness = Readiness::default();
        let check = readiness.register("cache pods");
        let shutdown = CancellationToken::new();
        let addr = serve(
            ([127, 0, 0, 1], 0).into(),
            metrics,
            readiness,
            shutdown.clone(),
        )
        .await
        .unwrap();

        let get = |path: &'static str| async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            stream
                .write_all(
                    format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await
                .unwrap();
            let mut out = String::new();
            stream.read_to_string(&mut out).await.unwrap();
            out
        };
        assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
        let not_ready = get("/readyz").await;
        assert!(not_ready.starts_with("HTTP/1.1 503"), "{not_ready}");
        assert!(not_ready.contains("cache pods"));
        check.set_ready();
        assert!(get("/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(get("/metrics").await.contains("kruise_reconcile_total"));
        shutdown.cancel();
    }
}
