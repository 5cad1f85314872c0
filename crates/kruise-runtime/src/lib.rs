//! Process plumbing every kruise-rs binary shares.
//!
//! A controller's `main` is three lines: [`Runtime::from_env`], then its own `run()`.
//! The [`Runtime`] carries the settings, the rate-limited client, the metrics registry,
//! the readiness checks behind `/readyz`, the feature gates and the shutdown signal.

pub mod admin;
pub mod api_error;
pub mod cache;
pub mod client;
pub mod events;
pub mod gates;
pub mod instruments;
pub mod leader;
pub mod list_watch;
pub mod meta;
pub mod metrics;
pub mod reconciler;
pub mod selector;
pub mod settings;
pub mod telemetry;
pub mod webhook;

use std::net::SocketAddr;
use std::time::Duration;

use kube::Client;
use tokio_util::sync::CancellationToken;

pub use admin::{Readiness, ReadyHandle};
pub use cache::{Cache, MalformedReport, Tolerant};
pub use events::Events;
pub use gates::FeatureGates;
pub use instruments::{Backoff, Instruments};
pub use leader::{Election, LeaseRef};
pub use metrics::Metrics;
pub use reconciler::{ReconcileError, Reconciler, apply_status};
pub use settings::Settings;
pub use webhook::WebhookServer;

/// Errors of the shared runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Settings(String),
    #[error("kubernetes client: {0}")]
    Client(#[from] kube::Error),
    #[error("admin server on {addr}: {source}")]
    Admin {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("leader election: {0}")]
    Leader(String),
    #[error("webhook: {0}")]
    Webhook(String),
    /// A cache's list failed; it is retried after a backoff (`list_watch`).
    #[error("list failed: {0}")]
    List(#[source] kube::Error),
    #[error("list body did not decode: {0}")]
    ListDecode(String),
    /// A cache's watch failed; it is resumed after a backoff (`list_watch`).
    #[error("watch failed: {0}")]
    Watch(#[source] kube::Error),
    #[error("watch error event: {0}")]
    WatchEvent(String),
}

impl Error {
    /// A short, bounded label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Settings(_) => "settings",
            Error::Client(_) => "client",
            Error::Admin { .. } => "admin",
            Error::Leader(_) => "leader",
            Error::Webhook(_) => "webhook",
            Error::List(_) | Error::ListDecode(_) => "list",
            Error::Watch(_) | Error::WatchEvent(_) => "watch",
        }
    }
}

/// Who a binary is: its controller name (event reporter, Lease, field manager) and the
/// `User-Agent` its client sends (`<binary>/<version>`, so the apiserver's audit log
/// and API Priority and Fairness can tell the controllers apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    pub controller: &'static str,
    pub binary: &'static str,
    pub version: &'static str,
}

impl Identity {
    pub fn user_agent(&self) -> String {
        format!("{}/{}", self.binary, self.version)
    }
}

/// A bare controller name (tests, tools): the binary is named after it.
impl From<&'static str> for Identity {
    fn from(controller: &'static str) -> Self {
        Identity {
            controller,
            binary: controller,
            version: env!("CARGO_PKG_VERSION"),
        }
    }
}

/// The [`Identity`] of the crate it is written in: `kruise_runtime::identity!("cloneset-controller")`.
#[macro_export]
macro_rules! identity {
    ($controller:expr) => {
        $crate::Identity {
            controller: $controller,
            binary: env!("CARGO_PKG_NAME"),
            version: env!("CARGO_PKG_VERSION"),
        }
    };
}

/// Everything a controller needs from its process.
#[derive(Clone)]
pub struct Runtime {
    /// The controller's name: event reporter, lease name, field manager.
    pub name: String,
    pub identity: Identity,
    pub settings: Settings,
    pub gates: FeatureGates,
    pub client: Client,
    /// The client of leader election: the same identity, without the client-side rate
    /// limit. Lease renewals queued behind a rate-limited burst of Pod writes arrived
    /// after the lease had expired, and two replicas led at once (found by `make chaos`).
    pub lease_client: Client,
    pub metrics: Metrics,
    pub readiness: Readiness,
    pub shutdown: CancellationToken,
    /// Where the admin server actually listens.
    pub admin_addr: SocketAddr,
}

/// The gates with those the API server cannot carry out turned off, each with a warning
/// that says why and what to do. `InPlaceWorkloadVerticalScaling` resizes Pods through the
/// `pods/resize` subresource, served from Kubernetes 1.33 (1.32 serves it only with the
/// apiserver's alpha `InPlacePodVerticalScaling` feature gate): without it a resize would
/// fail on every Pod, so a resource change recreates the Pod as with the gate off.
/// When discovery cannot be read the gates stay as configured.
async fn gates_the_server_supports(mut gates: FeatureGates, client: &Client) -> FeatureGates {
    if !gates.enabled(gates::IN_PLACE_WORKLOAD_VERTICAL_SCALING) {
        return gates;
    }
    match client.list_core_api_resources("v1").await {
        Ok(list) if !serves_pod_resize(&list) => {
            tracing::warn!(
                gate = gates::IN_PLACE_WORKLOAD_VERTICAL_SCALING,
                "feature gate turned off: this API server does not serve the pods/resize \
                 subresource (Kubernetes 1.33 or later serves it; 1.32 only with the \
                 apiserver's --feature-gates=InPlacePodVerticalScaling=true), so resource \
                 changes recreate Pods (docs/install.md, Supported Kubernetes versions)"
            );
            gates.set(gates::IN_PLACE_WORKLOAD_VERTICAL_SCALING, false);
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(
            gate = gates::IN_PLACE_WORKLOAD_VERTICAL_SCALING,
            error = %e,
            "could not read the core API's resources to check for pods/resize; keeping the gate on"
        ),
    }
    gates
}

/// Whether a core `v1` resource list has the `pods/resize` subresource.
fn serves_pod_resize(
    list: &k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList,
) -> bool {
    list.resources.iter().any(|r| r.name == "pods/resize")
}

impl Runtime {
    /// For `main`: settings from `KRUISE_*`, logging, a client from `KUBECONFIG` or the
    /// in-cluster config, the admin server, and SIGTERM/SIGINT handling.
    pub async fn from_env(identity: impl Into<Identity>) -> Result<Self, Error> {
        let identity = identity.into();
        let settings = Settings::from_env()?;
        telemetry::init(settings.log_format);
        reconciler::set_resync_period(Duration::from_secs(settings.resync_period_seconds));
        let config = kube::Config::infer()
            .await
            .map_err(|e| Error::Client(kube::Error::InferConfig(e)))?;
        let runtime = Self::new(identity, settings, config).await?;
        let shutdown = runtime.shutdown.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("signal received; shutting down");
            shutdown.cancel();
        });
        tracing::info!(controller = identity.controller, user_agent = %identity.user_agent(), admin = %runtime.admin_addr, "started");
        Ok(runtime)
    }

    /// For tests and embedding: explicit settings and client config.
    pub async fn new(
        identity: impl Into<Identity>,
        settings: Settings,
        mut config: kube::Config,
    ) -> Result<Self, Error> {
        let identity = identity.into();
        let user_agent = http::HeaderValue::from_str(&identity.user_agent())
            .map_err(|e| Error::Settings(format!("user agent {:?}: {e}", identity.user_agent())))?;
        config
            .headers
            .retain(|(name, _)| name != http::header::USER_AGENT);
        config.headers.push((http::header::USER_AGENT, user_agent));
        let metrics = Metrics::for_binary(identity.binary, identity.version);
        let lease_client = client::build(config.clone(), 0.0, 0, &metrics)?;
        let client = client::build(config, settings.kube_qps, settings.kube_burst, &metrics)?;
        let readiness = Readiness::default();
        let shutdown = CancellationToken::new();
        let admin_addr = admin::serve(
            settings.admin_addr,
            metrics.clone(),
            readiness.clone(),
            shutdown.clone(),
        )
        .await
        .map_err(|source| Error::Admin {
            addr: settings.admin_addr,
            source,
        })?;
        let gates = gates_the_server_supports(settings.gates(), &client).await;
        Ok(Runtime {
            name: identity.controller.to_string(),
            identity,
            gates,
            settings,
            client,
            lease_client,
            metrics,
            readiness,
            shutdown,
            admin_addr,
        })
    }

    /// The lease settings for this controller.
    pub fn election(&self) -> Election {
        Election {
            client: self.lease_client.clone(),
            lease_name: self.name.clone(),
            namespace: self.settings.namespace.clone(),
            enabled: self.settings.leader_elect,
            duration_seconds: self.settings.lease_duration_seconds,
            foreign_leases: self.settings.foreign_leader_leases(),
        }
    }

    /// The API of a namespaced kind in this instance's scope: `KRUISE_WATCH_NAMESPACE`,
    /// or every namespace.
    pub fn scoped_api<K>(&self) -> kube::Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        match &self.settings.watch_namespace {
            Some(ns) => kube::Api::namespaced(self.client.clone(), ns),
            None => kube::Api::all(self.client.clone()),
        }
    }

    /// A cache of a namespaced kind in this instance's scope ([`Runtime::scoped_api`]):
    /// watched with `config`, each object pruned with `prune` ([`cache::prune`], or more)
    /// before it is stored, its first full list a readiness check `cache <plural>`.
    pub fn cache<K>(&self, config: kube::runtime::watcher::Config, prune: fn(&mut K)) -> Cache<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + Sync
            + 'static,
    {
        let ready = self.readiness.register(cache::check_name::<K>());
        Cache::spawn(self.scoped_api(), config, prune, ready)
    }

    /// [`Runtime::cache`] for a custom resource: an object that does not decode is
    /// logged and left out ([`Tolerant`]).
    pub fn tolerant_cache<K>(
        &self,
        config: kube::runtime::watcher::Config,
        prune: fn(&mut K),
    ) -> Cache<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + Sync
            + 'static,
    {
        let ready = self.readiness.register(cache::check_name::<K>());
        Cache::spawn_tolerant(
            self.scoped_api::<Tolerant<K>>(),
            config,
            prune,
            ready,
            self.malformed_report(),
        )
    }

    /// How a tolerant cache of this process reports an object that does not decode: a
    /// Warning event as this controller and `kruise_malformed_objects_total`.
    pub fn malformed_report(&self) -> MalformedReport {
        MalformedReport::new(self.events(), self.metrics.clone())
    }

    /// A cache of a cluster-scoped kind (Nodes): every object, whatever the instance's
    /// scope, pruned with `prune` before it is stored, its first full list a readiness
    /// check `cache <plural>`.
    pub fn cluster_cache<K>(
        &self,
        config: kube::runtime::watcher::Config,
        prune: fn(&mut K),
    ) -> Cache<K>
    where
        K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + Sync
            + 'static,
    {
        let ready = self.readiness.register(cache::check_name::<K>());
        Cache::spawn(kube::Api::all(self.client.clone()), config, prune, ready)
    }

    /// An event publisher reporting as this controller.
    pub fn events(&self) -> Events {
        Events::new(self.client.clone(), &self.name)
    }

    /// The common `run()` of a controller with admission: serves `routes` on every
    /// replica, registers `configurations(scope)` for this instance's scope
    /// (`KRUISE_WATCH_NAMESPACE`; when an endpoint is configured) and, when cluster-wide,
    /// the CRD conversion of every conversion route among `routes`, runs
    /// `controller(workers)` while this replica leads until shutdown, and then, for a
    /// namespace-scoped instance, removes the configurations again.
    pub async fn serve_with_webhooks<F, Fut>(
        &self,
        routes: Vec<webhook::Route>,
        configurations: impl FnOnce(
            Option<&str>,
        ) -> (
            Vec<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>,
            Vec<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>,
        ),
        mut controller: F,
    ) -> Result<(), Error>
    where
        F: FnMut(u16) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let server = WebhookServer::start(self, routes).await?;
        let scope = self.settings.watch_namespace.as_deref();
        let (validating, mutating) = configurations(scope);
        let registered = server.register_if_configured(validating, mutating).await?;
        if scope.is_none() {
            server.register_conversions().await?;
        }
        let workers = self.settings.workers;
        self.run_while_leader(|| controller(workers)).await?;
        if registered && scope.is_some() {
            server.unregister().await;
        }
        Ok(())
    }

    /// `run()` of a webhook-only binary (no controller, so no Lease: every replica
    /// answers alike): serves `routes`, registers `configurations(scope)` as
    /// [`Runtime::serve_with_webhooks`] does, waits for shutdown and then, for a
    /// namespace-scoped instance, removes the configurations again.
    pub async fn serve_webhooks(
        &self,
        routes: Vec<webhook::Route>,
        configurations: impl FnOnce(
            Option<&str>,
        ) -> (
            Vec<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>,
            Vec<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>,
        ),
    ) -> Result<(), Error> {
        let server = WebhookServer::start(self, routes).await?;
        let scope = self.settings.watch_namespace.as_deref();
        let (validating, mutating) = configurations(scope);
        let registered = server.register_if_configured(validating, mutating).await?;
        if scope.is_none() {
            server.register_conversions().await?;
        }
        self.shutdown.cancelled().await;
        if registered && scope.is_some() {
            server.unregister().await;
        }
        Ok(())
    }

    /// Runs `controller()` while this replica leads, until shutdown.
    pub async fn run_while_leader<F, Fut>(&self, controller: F) -> Result<(), Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        leader::run_while_leader(
            self.election(),
            &self.metrics,
            self.shutdown.clone(),
            self.readiness.clone(),
            controller,
        )
        .await
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::serves_pod_resize;

    fn core_resources(
        names: &[&str],
    ) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList {
        serde_json::from_value(serde_json::json!({
            "groupVersion": "v1",
            "resources": names.iter().map(|n| serde_json::json!({
                "name": n, "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"],
            })).collect::<Vec<_>>(),
        }))
        .unwrap()
    }

    #[test]
    fn pod_resize_is_served_when_discovery_lists_it() {
        // Kubernetes 1.33+ (and 1.32 with InPlacePodVerticalScaling on the apiserver).
        assert!(serves_pod_resize(&core_resources(&[
            "pods",
            "pods/status",
            "pods/resize"
        ])));
        // 1.32 by default: pods and its other subresources, no resize.
        assert!(!serves_pod_resize(&core_resources(&[
            "pods",
            "pods/status",
            "pods/ephemeralcontainers"
        ])));
        assert!(!serves_pod_resize(&core_resources(&[])));
    }
}
