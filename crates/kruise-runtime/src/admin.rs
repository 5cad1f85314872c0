//! The admin server: `/metrics`, `/healthz`, `/readyz` on `KRUISE_ADMIN_ADDR`.
//!
//! `/readyz` is green once every readiness check that gates serving (the webhook's TLS
//! listener, each cache a webhook reads) has reported ready; until then it answers 503 and
//! names what is still pending. `/readyz` says whether to send this process requests, so a
//! check only the controller waits for ([`Readiness::only_controller_waits_for`]: a cache
//! no webhook reads before it has listed) is named in its body but does not hold it back.

use std::collections::{BTreeMap, BTreeSet};
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

/// Named readiness checks. The controller starts when all of them are ready; `/readyz`
/// is green when those that gate serving are.
#[derive(Clone, Default)]
pub struct Readiness {
    checks: Arc<Mutex<Checks>>,
}

#[derive(Default)]
struct Checks {
    /// Every registered check: ready or not.
    ready: BTreeMap<String, bool>,
    /// The names `/readyz` does not wait for (registered or not).
    controller_only: BTreeSet<String>,
}

/// One readiness check, created not-ready.
#[derive(Clone)]
pub struct ReadyHandle {
    name: String,
    checks: Arc<Mutex<Checks>>,
}

impl ReadyHandle {
    pub fn set_ready(&self) {
        self.set(true);
    }

    pub fn set_not_ready(&self) {
        self.set(false);
    }

    fn set(&self, ready: bool) {
        lock(&self.checks).ready.insert(self.name.clone(), ready);
    }
}

fn lock(checks: &Mutex<Checks>) -> std::sync::MutexGuard<'_, Checks> {
    checks
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Readiness {
    /// Registers a check (not ready until [`ReadyHandle::set_ready`]).
    /// It gates `/readyz` and the controller, unless
    /// [`only_controller_waits_for`](Self::only_controller_waits_for) says otherwise.
    pub fn register(&self, name: impl Into<String>) -> ReadyHandle {
        let name = name.into();
        lock(&self.checks).ready.insert(name.clone(), false);
        ReadyHandle {
            name,
            checks: self.checks.clone(),
        }
    }

    /// Stops the check `name` (registered now or later) from holding back `/readyz`; the
    /// controller still waits for it. For a cache no webhook of the process reads, or
    /// reads through to the API server until it has listed ([`crate::Cache::get_or_fetch`]):
    /// a restarted replica with 10 000 Pods then takes webhook traffic before their list
    /// has arrived. A name never registered holds back nothing.
    pub fn only_controller_waits_for(&self, name: &str) {
        lock(&self.checks).controller_only.insert(name.to_string());
    }

    /// Checks still pending, whatever they gate; empty means the controller may start.
    pub fn pending(&self) -> Vec<String> {
        self.pending_where(false)
    }

    /// Checks still pending that hold back `/readyz`.
    pub fn pending_for_serving(&self) -> Vec<String> {
        self.pending_where(true)
    }

    fn pending_where(&self, serving_only: bool) -> Vec<String> {
        let checks = lock(&self.checks);
        checks
            .ready
            .iter()
            .filter(|(name, ready)| {
                !**ready && (!serving_only || !checks.controller_only.contains(*name))
            })
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
    let pending = state.readiness.pending_for_serving();
    if pending.is_empty() {
        let starting = state.readiness.pending();
        if starting.is_empty() {
            (StatusCode::OK, "ok".to_string())
        } else {
            (
                StatusCode::OK,
                format!("ok; the controller waits for: {}", starting.join(", ")),
            )
        }
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

    #[test]
    fn a_check_only_the_controller_waits_for_does_not_hold_back_serving() {
        let r = Readiness::default();
        let tls = r.register("webhook tls");
        let pods = r.register("cache pods");
        r.only_controller_waits_for("cache pods");
        // Declared before it is registered: still only the controller's.
        r.only_controller_waits_for("cache pvcs");
        let pvcs = r.register("cache pvcs");
        // Declared and never registered (a typo): holds back nothing.
        r.only_controller_waits_for("cache nodez");
        assert_eq!(r.pending_for_serving(), vec!["webhook tls"]);
        tls.set_ready();
        assert!(r.pending_for_serving().is_empty());
        assert_eq!(r.pending(), vec!["cache pods", "cache pvcs"]);
        assert!(!r.is_ready(), "the controller waits for every check");
        pods.set_ready();
        pvcs.set_ready();
        assert!(r.is_ready());
    }

    #[tokio::test]
    async fn serves_health_readiness_and_metrics() {
        let metrics = Metrics::new();
        metrics.reconciles.with_label_values(&["c", "ok"]).inc();
        let readiness = Readiness::default();
        let check = readiness.register("cache pods");
        let readiness_clone = readiness.clone();
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
        let nodes = readiness_clone.register("cache nodes");
        readiness_clone.only_controller_waits_for("cache nodes");
        let starting = get("/readyz").await;
        assert!(starting.starts_with("HTTP/1.1 200"), "{starting}");
        assert!(
            starting.ends_with("ok; the controller waits for: cache nodes"),
            "{starting}"
        );
        nodes.set_ready();
        assert!(get("/readyz").await.ends_with("\r\n\r\nok"));
        assert!(get("/metrics").await.contains("kruise_reconcile_total"));
        shutdown.cancel();
    }
}
