//! The admission webhook server every controller with admission shares.
//!
//! ```text
//! let server = WebhookServer::start(&runtime, vec![
//!     Route::new("/validate-cloneset", "validate-cloneset", webhook::typed(validate)),
//!     Route::new("/mutate-pod", "inject-sidecar", webhook::typed(inject)).on_failure(OnFailure::Allow),
//! ]).await?;
//! server.register(vec![validating_configuration()], vec![mutating_configuration()]).await?;
//! ```
//!
//! - **TLS**: axum on rustls (ring provider only) on `KRUISE_WEBHOOK_ADDR`; port 0 binds
//!   any free port ([`WebhookServer::local_addr`]).
//! - **Certificates**: a CA and a serving certificate generated with rcgen at start, or
//!   `tls.crt`/`tls.key`/`ca.crt` from `KRUISE_WEBHOOK_CERT_DIR`. Rotated without a restart
//!   (see [`Rotation`]): a new serving certificate is served from the next handshake on; a
//!   new CA is first published in every registered configuration's caBundle (next to the
//!   previous CA, so both certificates verify during the switch), and only then used.
//!   A generated CA lives in this process only, unless `KRUISE_WEBHOOK_CA_SECRET` names a
//!   Secret (in `KRUISE_NAMESPACE`) that every replica shares: the first replica writes
//!   its CA and serving certificate there, the others load them, and every rotation is
//!   written there with optimistic concurrency and picked up by the others at their next
//!   check (see `secret.rs`). Run more than one replica with that, or with the same files
//!   in `KRUISE_WEBHOOK_CERT_DIR` (cert-manager), never with a CA each: the replicas
//!   would overwrite each other's caBundle. Before a certificate of a new CA is served,
//!   the live configurations are read back to confirm they carry that CA.
//! - **Registration**: [`WebhookServer::register`] server-side applies the configurations
//!   (field manager = the controller's name), filling each webhook's clientConfig
//!   (`KRUISE_WEBHOOK_URL` + path, or the Service of `KRUISE_WEBHOOK_SERVICE` + path) and
//!   caBundle, and keeps them to re-apply after a CA rotation. `KRUISE_WEBHOOK_TIMEOUT_SECONDS`,
//!   when set, replaces the house default timeout (10 s) of every webhook; one whose code
//!   sets another timeout (the 5 s Pod webhooks) keeps it.
//! - **Scope**: every webhook's namespaceSelector excludes kube-system and the controller's
//!   own namespace (unless it already says something about `kubernetes.io/metadata.name`);
//!   objectSelector and matchConditions are the controller's to set, so the apiserver skips
//!   the call for objects that cannot match.
//! - **Handlers** never take the process down and always answer: see [`OnFailure`].
//!   Besides admission routes a server serves CRD conversions ([`Route::conversion`]) and
//!   authorization webhooks ([`Route::authorization`]: a `SubjectAccessReview` decided
//!   by a function, for an apiserver whose `--authorization-config` points here; that
//!   apiserver trusts the CA of a kubeconfig file, so serve such a route from
//!   `KRUISE_WEBHOOK_CERT_DIR` files, not a generated CA).
//! - **Metrics**: `kruise_webhook_request_duration_seconds{webhook,operation,decision}`
//!   (decision = allowed, denied, patched, error) and
//!   `kruise_webhook_errors_total{webhook,kind}` (kind = malformed, too_large, body,
//!   decode, internal, panic, timeout, deadline).
//! - **Limits**: request bodies over [`Options::body_limit`] (8 MiB) get 413; a handler
//!   over [`Options::handler_timeout`] (9 s) is answered by its [`OnFailure`]; a request
//!   not complete within [`Options::request_timeout`] (10 s, the body upload included)
//!   gets 408.
//! - **Readiness**: the check "webhook tls" is pending until the TLS listener serves.

pub mod authorization;
mod certs;
pub mod config;
pub mod conversion;
pub mod defaults;
pub mod field;
mod generated;
mod register;
mod review;
mod secret;
mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::BytesRejection;
use axum::routing::post;
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::core::DynamicObject;
pub use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use rustls::crypto::CryptoProvider;
use serde::de::DeserializeOwned;
use tokio::net::TcpListener;

pub use certs::Rotation;
pub use field::{FieldError, aggregate, deny_forbidden, deny_invalid};
/// The json-patch crate `AdmissionResponse::with_patch` takes (same version as kube's).
pub use json_patch;
pub use register::NAMESPACE_NAME_LABEL;

use crate::metrics::Metrics;
use crate::{Error, Runtime};
use certs::SwapResolver;
use generated::Generated;
use register::{Endpoint, Fill, Registered};
use secret::{KubeStore, SharedCa};

/// An admission handler: the request, decoded generically, to a response.
///
/// Build one with [`typed`] (object and oldObject decoded as `K`) or [`dynamic`]. An
/// `Err` is answered as the route's [`OnFailure`] says.
pub type Handler = Arc<
    dyn Fn(
            AdmissionRequest<DynamicObject>,
        ) -> BoxFuture<'static, Result<AdmissionResponse, HandlerError>>
        + Send
        + Sync,
>;

/// Why a handler could not decide.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    /// The object is not what the handler expects (wrong shape, missing field).
    #[error("cannot decode {0}")]
    Decode(String),
    /// Anything else: a lookup failed, an invariant broke.
    #[error("{0}")]
    Internal(String),
}

impl HandlerError {
    /// The `kind` label of `kruise_webhook_errors_total`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            HandlerError::Decode(_) => "decode",
            HandlerError::Internal(_) => "internal",
        }
    }
}

/// What a route answers when it cannot decide: a review that does not decode, a handler
/// error, panic or timeout. Mirror the webhook's failurePolicy: `Deny` for `Fail`
/// (a validating webhook guarding an invariant), `Allow` for `Ignore` (a best-effort
/// mutation that must not block pod creation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnFailure {
    /// Deny, with a message naming the problem.
    #[default]
    Deny,
    /// Allow unchanged, with a warning to the client and a log line.
    Allow,
}

/// One webhook endpoint.
pub struct Route {
    /// The URL path, e.g. `/validate-cloneset`; webhook configurations name it.
    pub path: &'static str,
    /// The `webhook` label of the metrics.
    pub name: &'static str,
    pub handler: Handler,
    pub on_failure: OnFailure,
    /// Set for a CRD conversion route ([`Route::conversion`]): `handler` is then unused.
    pub conversion: Option<conversion::ConversionRoute>,
    /// Set for an authorization webhook route ([`Route::authorization`]): `handler` is
    /// then unused.
    pub authorization: Option<authorization::Authorizer>,
}

impl Route {
    /// A route that denies when it cannot decide.
    pub fn new(path: &'static str, name: &'static str, handler: Handler) -> Self {
        Route {
            path,
            name,
            handler,
            on_failure: OnFailure::Deny,
            conversion: None,
            authorization: None,
        }
    }

    /// A CRD conversion route for `crd` (`<plural>.<group>`): each object of a
    /// `ConversionReview` goes through `convert`. A cluster-wide instance points the CRD
    /// at it with [`WebhookServer::register_conversions`].
    pub fn conversion(
        path: &'static str,
        name: &'static str,
        crd: &'static str,
        convert: conversion::Converter,
    ) -> Self {
        let unused: Handler = Arc::new(|_| {
            async { Err(HandlerError::Internal("a conversion route".into())) }.boxed()
        });
        Route {
            path,
            name,
            handler: unused,
            on_failure: OnFailure::Deny,
            conversion: Some(conversion::ConversionRoute { crd, convert }),
            authorization: None,
        }
    }

    /// An authorization webhook route: each `SubjectAccessReview` answered by
    /// `authorize` (see [`authorization`]). The apiserver is pointed at it by its
    /// `--authorization-config`, not through the API.
    pub fn authorization(
        path: &'static str,
        name: &'static str,
        authorize: authorization::Authorizer,
    ) -> Self {
        let unused: Handler = Arc::new(|_| {
            async { Err(HandlerError::Internal("an authorization route".into())) }.boxed()
        });
        Route {
            path,
            name,
            handler: unused,
            on_failure: OnFailure::Deny,
            conversion: None,
            authorization: Some(authorize),
        }
    }

    pub fn on_failure(mut self, on_failure: OnFailure) -> Self {
        self.on_failure = on_failure;
        self
    }
}

/// A handler on the generic request (any kind; `object` as JSON).
pub fn dynamic<F, Fut>(f: F) -> Handler
where
    F: Fn(AdmissionRequest<DynamicObject>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<AdmissionResponse, HandlerError>> + Send + 'static,
{
    Arc::new(move |request| f(request).boxed())
}

/// A handler on a typed request: `object` and `oldObject` are decoded as `K` first; an
/// object that does not decode is a [`HandlerError::Decode`] naming the field and the
/// problem, answered by the route's [`OnFailure`].
pub fn typed<K, F, Fut>(f: F) -> Handler
where
    K: kube::Resource + DeserializeOwned + Send + 'static,
    F: Fn(AdmissionRequest<K>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<AdmissionResponse, HandlerError>> + Send + 'static,
{
    let f = Arc::new(f);
    Arc::new(move |request| {
        let f = f.clone();
        async move { f(decode::<K>(request)?).await }.boxed()
    })
}

/// Decodes a generic request's objects as `K`.
pub fn decode<K>(
    request: AdmissionRequest<DynamicObject>,
) -> Result<AdmissionRequest<K>, HandlerError>
where
    K: kube::Resource + DeserializeOwned,
{
    let kind = request.kind.kind.clone();
    let convert = |object: Option<DynamicObject>, field: &str| {
        object
            .map(|object| {
                serde_json::to_value(object)
                    .and_then(serde_json::from_value::<K>)
                    .map_err(|e| HandlerError::Decode(format!("{field} as {kind}: {e}")))
            })
            .transpose()
    };
    let object = convert(request.object, "object")?;
    let old_object = convert(request.old_object, "oldObject")?;
    Ok(AdmissionRequest {
        types: request.types,
        uid: request.uid,
        kind: request.kind,
        resource: request.resource,
        sub_resource: request.sub_resource,
        request_kind: request.request_kind,
        request_resource: request.request_resource,
        request_sub_resource: request.request_sub_resource,
        name: request.name,
        namespace: request.namespace,
        operation: request.operation,
        user_info: request.user_info,
        object,
        old_object,
        dry_run: request.dry_run,
        options: request.options,
    })
}

/// The object and the old object of a request as JSON, as sent: the form defaulting and
/// validation of raw fields work on (it keeps the fields our types do not model).
pub fn json_objects(
    request: &AdmissionRequest<DynamicObject>,
) -> Result<(Option<serde_json::Value>, Option<serde_json::Value>), HandlerError> {
    let json = |object: &Option<DynamicObject>| {
        object
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| HandlerError::Internal(e.to_string()))
    };
    Ok((json(&request.object)?, json(&request.old_object)?))
}

/// Answers a mutating request on the object as JSON: with the JSON patch from the object
/// to `defaulted(object, old)` (`old`: the stored object, on UPDATE only), or unchanged
/// when that changes nothing.
pub fn mutate_json(
    request: &AdmissionRequest<DynamicObject>,
    defaulted: impl FnOnce(&serde_json::Value, Option<&serde_json::Value>) -> serde_json::Value,
) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(request);
    let (Some(object), old) = json_objects(request)? else {
        return Ok(response);
    };
    let old = old.filter(|_| request.operation == Operation::Update);
    let patch = json_patch::diff(&object, &defaulted(&object, old.as_ref()));
    if patch.0.is_empty() {
        return Ok(response);
    }
    response
        .with_patch(patch)
        .map_err(|e| HandlerError::Internal(e.to_string()))
}

/// A defaulting handler: [`mutate_json`] with `defaulted`.
pub fn defaulting<F>(defaulted: F) -> Handler
where
    F: Fn(&serde_json::Value, Option<&serde_json::Value>) -> serde_json::Value
        + Send
        + Sync
        + 'static,
{
    dynamic(move |request| std::future::ready(mutate_json(&request, &defaulted)))
}

/// A validating handler on the object as JSON. On CREATE and UPDATE it answers with
/// `validate(object, old)` (`old`: the stored object, on UPDATE only): allowed when that
/// finds nothing, else denied as Invalid (422) with every error naming its field. An `Err`
/// from `validate` is an object that does not decode ([`HandlerError::Decode`], answered by
/// the route's [`OnFailure`]). Other operations are allowed: a validating configuration
/// registers CREATE and UPDATE only (DELETE is `protection-ctl`'s).
pub fn validating<F>(validate: F) -> Handler
where
    F: Fn(&serde_json::Value, Option<&serde_json::Value>) -> Result<Vec<FieldError>, String>
        + Send
        + Sync
        + 'static,
{
    dynamic(move |request| std::future::ready(validate_json(&request, &validate)))
}

fn validate_json(
    request: &AdmissionRequest<DynamicObject>,
    validate: impl Fn(&serde_json::Value, Option<&serde_json::Value>) -> Result<Vec<FieldError>, String>,
) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(request);
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Ok(response);
    }
    let (Some(object), old) = json_objects(request)? else {
        return Err(HandlerError::Decode("no object".into()));
    };
    let old = old.filter(|_| request.operation == Operation::Update);
    let errors = validate(&object, old.as_ref()).map_err(HandlerError::Decode)?;
    Ok(if errors.is_empty() {
        response
    } else {
        deny_invalid(response, &errors)
    })
}

/// Server options beyond the settings; the defaults are for production.
#[derive(Clone, Debug)]
pub struct Options {
    pub rotation: Rotation,
    /// Larger request bodies get HTTP 413. The apiserver caps objects at ~1.5 MiB in etcd,
    /// but a review carries object and oldObject; 8 MiB leaves room without letting one
    /// request pin much memory.
    pub body_limit: usize,
    /// A handler taking longer is answered by its [`OnFailure`]: just under the
    /// apiserver's default `timeoutSeconds` (10), so our answer, not its timeout, decides.
    pub handler_timeout: Duration,
    /// The whole request, body upload included, on every route (conversions too): a
    /// client that sends its body slowly, or never finishes it, gets HTTP 408 and its
    /// connection's memory back. The apiserver gives up at `timeoutSeconds` (10) anyway.
    pub request_timeout: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rotation: Rotation::default(),
            body_limit: 8 << 20,
            handler_timeout: Duration::from_secs(9),
            request_timeout: Duration::from_secs(10),
        }
    }
}

enum Source {
    Generated(Generated),
    Files { dir: PathBuf, fingerprint: Vec<u8> },
}

struct CertState {
    source: Source,
    /// The caBundle (PEM, newest CA first); `None` when a cert dir has no `ca.crt`.
    bundle: Option<String>,
    /// When every registered configuration last got `bundle` (`None`: not yet;
    /// the epoch: nothing to wait for).
    applied_at: Option<SystemTime>,
}

struct Shared {
    field_manager: String,
    client: Client,
    endpoint: Endpoint,
    local_addr: SocketAddr,
    paths: Vec<&'static str>,
    /// (CRD, route path) of every conversion route served.
    conversions: Vec<(&'static str, &'static str)>,
    excluded_namespaces: Vec<String>,
    /// `KRUISE_WEBHOOK_TIMEOUT_SECONDS`.
    timeout_seconds: Option<i32>,
    sans: Vec<String>,
    rotation: Rotation,
    provider: Arc<CryptoProvider>,
    resolver: Arc<SwapResolver>,
    /// `KRUISE_WEBHOOK_CA_SECRET`: the certificates every replica shares.
    ca_secret: Option<SharedCa>,
    certs: Mutex<CertState>,
    registered: Mutex<Registered>,
    /// Serializes applies, so the last one to run carries the newest bundle.
    apply_lock: tokio::sync::Mutex<()>,
}

/// The running webhook server. Cheap to clone; stops with the runtime's shutdown.
#[derive(Clone)]
pub struct WebhookServer {
    shared: Arc<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // State behind these locks is replaced whole, never left half-written by a panic.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl WebhookServer {
    /// [`WebhookServer::start_with`] the default [`Options`].
    pub async fn start(runtime: &Runtime, routes: Vec<Route>) -> Result<Self, Error> {
        Self::start_with(runtime, routes, Options::default()).await
    }

    /// Binds `KRUISE_WEBHOOK_ADDR` with TLS, serves `routes` until the runtime shuts down,
    /// and keeps the certificates fresh. The readiness check "webhook tls" turns ready
    /// once the listener serves.
    pub async fn start_with(
        runtime: &Runtime,
        routes: Vec<Route>,
        options: Options,
    ) -> Result<Self, Error> {
        let ready = runtime.readiness.register("webhook tls");
        let settings = &runtime.settings;
        let mut paths: Vec<&'static str> = Vec::new();
        let conversions: Vec<(&'static str, &'static str)> = routes
            .iter()
            .filter_map(|r| r.conversion.as_ref().map(|c| (c.crd, r.path)))
            .collect();
        for route in &routes {
            if !route.path.starts_with('/') || paths.contains(&route.path) {
                return Err(Error::Webhook(format!(
                    "route path {:?} must start with '/' and be unique",
                    route.path
                )));
            }
            paths.push(route.path);
        }
        if !(options.rotation.rotate_at > 0.0 && options.rotation.rotate_at <= 1.0) {
            return Err(Error::Webhook(format!(
                "rotate_at {} must be in (0, 1]",
                options.rotation.rotate_at
            )));
        }

        let tcp = TcpListener::bind(settings.webhook_addr)
            .await
            .map_err(|e| Error::Webhook(format!("listen on {}: {e}", settings.webhook_addr)))?;
        let local_addr = tcp
            .local_addr()
            .map_err(|e| Error::Webhook(format!("webhook listener address: {e}")))?;
        let endpoint = Endpoint::from_settings(settings, local_addr)?;
        let sans = endpoint.sans();
        let provider = certs::provider();
        let now = SystemTime::now();
        let cert_dir = settings
            .webhook_cert_dir
            .as_deref()
            .filter(|d| !d.is_empty());
        let secret_name = settings
            .webhook_ca_secret
            .as_deref()
            .filter(|s| !s.is_empty());
        let mut ca_secret = None;
        let (state, serving) = match (cert_dir, secret_name) {
            (Some(dir), Some(name)) => {
                return Err(Error::Settings(format!(
                    "KRUISE_WEBHOOK_CERT_DIR={dir:?} and KRUISE_WEBHOOK_CA_SECRET={name:?}: \
                     expected one of them (files from elsewhere, or a CA the replicas share)"
                )));
            }
            (Some(dir), None) => {
                let dir = PathBuf::from(dir);
                let loaded = certs::load_dir(&dir, &provider, now)?;
                let state = CertState {
                    source: Source::Files {
                        dir,
                        fingerprint: loaded.fingerprint,
                    },
                    bundle: loaded.ca_pem,
                    applied_at: Some(SystemTime::UNIX_EPOCH),
                };
                (state, loaded.serving.certified)
            }
            (None, name) => {
                let fresh = || {
                    Generated::new(
                        &runtime.name,
                        &options.rotation,
                        &sans,
                        &provider,
                        SystemTime::now(),
                    )
                };
                let generated = match name {
                    Some(name) => {
                        let namespace = &settings.namespace;
                        let shared = SharedCa::new(
                            Arc::new(KubeStore::new(runtime.client.clone(), namespace, name)),
                            provider.clone(),
                            format!("Secret {namespace}/{name}"),
                        );
                        let mut loaded = shared.open(fresh).await?;
                        // A serving certificate another replica wrote may lack our names:
                        // replace it now rather than at the first check. (Not
                        // `propagated`: a CA rotation may be on its way.)
                        if let Some(next) = loaded.rotate_serving(
                            &options.rotation,
                            &sans,
                            &provider,
                            false,
                            now,
                        )? {
                            loaded = shared.publish(next).await?;
                        }
                        ca_secret = Some(shared);
                        loaded
                    }
                    None => fresh()?,
                };
                let serving = generated.serving.certified.clone();
                let state = CertState {
                    bundle: Some(generated.bundle()),
                    source: Source::Generated(generated),
                    applied_at: Some(SystemTime::UNIX_EPOCH),
                };
                (state, serving)
            }
        };
        let resolver = Arc::new(SwapResolver::new(serving));
        let client_roots = match settings
            .webhook_client_ca
            .as_deref()
            .filter(|p| !p.is_empty())
        {
            Some(path) => Some(certs::client_roots(path)?),
            None => None,
        };
        let client_auth = client_roots.is_some();
        let tls_config = certs::server_config(provider.clone(), resolver.clone(), client_roots)?;
        let listener = tls::TlsListener::new(tcp, Arc::new(tls_config), runtime.shutdown.clone())
            .map_err(|e| Error::Webhook(format!("webhook listener: {e}")))?;

        let mut excluded_namespaces = vec!["kube-system".to_string()];
        if !settings.namespace.is_empty() && settings.namespace != "kube-system" {
            excluded_namespaces.push(settings.namespace.clone());
        }
        let shared = Arc::new(Shared {
            field_manager: runtime.name.clone(),
            client: runtime.client.clone(),
            endpoint,
            local_addr,
            paths,
            conversions,
            excluded_namespaces,
            timeout_seconds: settings.webhook_timeout_seconds,
            sans,
            rotation: options.rotation.clone(),
            provider,
            resolver,
            ca_secret,
            certs: Mutex::new(state),
            registered: Mutex::new(Registered::default()),
            apply_lock: tokio::sync::Mutex::new(()),
        });

        let app = router(routes, &runtime.metrics, &options, client_auth);
        let shutdown = runtime.shutdown.clone();
        tokio::spawn(async move {
            let served = axum::serve(
                listener,
                app.into_make_service_with_connect_info::<tls::Peer>(),
            )
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
            if let Err(err) = served {
                tracing::error!(%err, "webhook server stopped");
            }
        });
        let rotating = shared.clone();
        let shutdown = runtime.shutdown.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(rotating.rotation.check_interval);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            every.tick().await; // the first tick is immediate; the certificates are new
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = every.tick() => rotating.check(SystemTime::now()).await,
                }
            }
        });
        ready.set_ready();
        tracing::info!(addr = %local_addr, url = ?shared.url(), "webhook server serving");
        Ok(WebhookServer { shared })
    }

    /// Where the server listens (the real port when `KRUISE_WEBHOOK_ADDR` had port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// The base URL the apiserver calls, when `KRUISE_WEBHOOK_URL` is set (with the bound
    /// port substituted for port 0).
    pub fn url(&self) -> Option<String> {
        self.shared.url()
    }

    /// The caBundle PEM (newest CA first), if this process knows one.
    pub fn ca_pem(&self) -> Option<String> {
        lock(&self.shared.certs).bundle.clone()
    }

    /// The DER of the serving certificate handshakes get now.
    pub fn serving_cert_der(&self) -> Vec<u8> {
        self.shared.resolver.current().cert[0].to_vec()
    }

    /// The clientConfig the apiserver needs to call `path` (with the current caBundle).
    pub fn client_config(&self, path: &str) -> Result<WebhookClientConfig, Error> {
        let bundle = self.ca_pem();
        self.shared.endpoint.client_config(path, bundle.as_deref())
    }

    /// Whether `KRUISE_WEBHOOK_URL` or `KRUISE_WEBHOOK_SERVICE` tells how the apiserver
    /// reaches this server (without either it serves, but cannot register).
    pub fn can_register(&self) -> bool {
        !matches!(self.shared.endpoint, register::Endpoint::Unset)
    }

    /// [`WebhookServer::register`] when the server can be registered; otherwise says so
    /// in the log and returns `false`.
    pub async fn register_if_configured(
        &self,
        validating: Vec<ValidatingWebhookConfiguration>,
        mutating: Vec<MutatingWebhookConfiguration>,
    ) -> Result<bool, Error> {
        if !self.can_register() {
            tracing::warn!(
                "KRUISE_WEBHOOK_URL and KRUISE_WEBHOOK_SERVICE unset: webhook configurations not registered"
            );
            return Ok(false);
        }
        self.register(validating, mutating).await?;
        Ok(true)
    }

    /// Deletes every configuration this server registered. A namespace-scoped instance
    /// (tests, namespaced installs) cleans up after itself this way; a cluster-wide one
    /// leaves its configurations for the next replica.
    pub async fn unregister(&self) {
        let registered = std::mem::take(&mut *lock(&self.shared.registered));
        let dp = kube::api::DeleteParams::default();
        let v: Api<ValidatingWebhookConfiguration> = Api::all(self.shared.client.clone());
        for name in registered.validating.keys() {
            let _ = v.delete(name, &dp).await;
        }
        let m: Api<MutatingWebhookConfiguration> = Api::all(self.shared.client.clone());
        for name in registered.mutating.keys() {
            let _ = m.delete(name, &dp).await;
        }
    }

    /// Server-side applies the configurations. Each webhook names its route path in
    /// `clientConfig.service.path` or `clientConfig.url` (e.g. `"/validate-cloneset"`);
    /// the path must be one of this server's routes. Filled in: clientConfig (URL or
    /// Service) and caBundle, the namespace exclusions, `sideEffects: None` and
    /// `admissionReviewVersions: [v1]` where unset, and `KRUISE_WEBHOOK_TIMEOUT_SECONDS`
    /// (when set) as the timeout of every webhook with none or the house default (see
    /// [`config::registered_timeout`]). The configurations are kept and
    /// re-applied after every CA rotation; if this apply fails it is also retried at
    /// every certificate check until it succeeds.
    pub async fn register(
        &self,
        validating: Vec<ValidatingWebhookConfiguration>,
        mutating: Vec<MutatingWebhookConfiguration>,
    ) -> Result<(), Error> {
        // Check every template before keeping any: a typo fails the caller at start.
        {
            let bundle = self.ca_pem();
            let fill = self.shared.fill(bundle.as_deref());
            for mut config in validating.clone() {
                fill.validating(&mut config)?;
            }
            for mut config in mutating.clone() {
                fill.mutating(&mut config)?;
            }
        }
        {
            let mut registered = lock(&self.shared.registered);
            for config in validating {
                let name = config.metadata.name.clone().unwrap_or_default();
                registered.validating.insert(name, config);
            }
            for config in mutating {
                let name = config.metadata.name.clone().unwrap_or_default();
                registered.mutating.insert(name, config);
            }
        }
        lock(&self.shared.certs).applied_at = None;
        self.shared.apply_all().await
    }

    /// Points the CRD of every conversion route at this server (`spec.conversion`:
    /// strategy Webhook, clientConfig and caBundle as for the admission webhooks),
    /// re-applied after every CA rotation like the webhook configurations. For
    /// cluster-wide instances only: a CRD has one conversion webhook for the cluster.
    /// Nothing to do (`Ok(false)`) without conversion routes or a registrable endpoint.
    pub async fn register_conversions(&self) -> Result<bool, Error> {
        if self.shared.conversions.is_empty() || !self.can_register() {
            return Ok(false);
        }
        lock(&self.shared.registered).conversions = self.shared.conversions.clone();
        lock(&self.shared.certs).applied_at = None;
        self.shared.apply_all().await?;
        Ok(true)
    }
}

/// The routes; with `client_auth` (`KRUISE_WEBHOOK_CLIENT_CA` set) the admission routes
/// refuse a connection without a verified client certificate.
fn router(routes: Vec<Route>, metrics: &Metrics, options: &Options, client_auth: bool) -> Router {
    let mut app = Router::new();
    for route in routes {
        if let Some(conversion) = route.conversion {
            let ctx = Arc::new(conversion::ConversionCtx {
                name: route.name,
                convert: conversion.convert,
                metrics: metrics.clone(),
            });
            let deadline = Deadline::new(route.name, options.request_timeout, metrics);
            app = app.route(
                route.path,
                post(move |body: Result<Bytes, BytesRejection>| {
                    conversion::handle(ctx.clone(), body)
                })
                .layer(axum::middleware::from_fn_with_state(
                    deadline,
                    within_deadline,
                )),
            );
            continue;
        }
        if let Some(authorize) = route.authorization {
            let ctx = Arc::new(authorization::AuthorizationCtx {
                name: route.name,
                authorize,
                metrics: metrics.clone(),
            });
            let deadline = Deadline::new(route.name, options.request_timeout, metrics);
            app = app.route(
                route.path,
                post(move |body: Result<Bytes, BytesRejection>| {
                    authorization::handle(ctx.clone(), body)
                })
                .layer(axum::middleware::from_fn_with_state(
                    deadline,
                    within_deadline,
                )),
            );
            continue;
        }
        let deadline = Deadline::new(route.name, options.request_timeout, metrics);
        let ctx = Arc::new(review::RouteCtx {
            name: route.name,
            handler: route.handler,
            on_failure: route.on_failure,
            timeout: options.handler_timeout,
            metrics: metrics.clone(),
        });
        let mut admission =
            post(move |body: Result<Bytes, BytesRejection>| review::handle(ctx.clone(), body))
                .layer(axum::middleware::from_fn_with_state(
                    deadline,
                    within_deadline,
                ));
        if client_auth {
            let caller = Caller {
                name: route.name,
                metrics: metrics.clone(),
                body_limit: options.body_limit,
                read_timeout: options.request_timeout,
            };
            admission = admission.layer(axum::middleware::from_fn_with_state(
                caller,
                certified_caller,
            ));
        }
        app = app.route(route.path, admission);
    }
    app.layer(DefaultBodyLimit::max(options.body_limit))
}

/// One admission route's name and metrics, for [`certified_caller`].
#[derive(Clone)]
struct Caller {
    name: &'static str,
    metrics: Metrics,
    body_limit: usize,
    read_timeout: Duration,
}

/// Lets through only requests whose connection presented a client certificate of
/// `KRUISE_WEBHOOK_CLIENT_CA`; the others get 401 before their body is read, and
/// `kruise_webhook_errors_total{kind="unauthenticated"}` counts them.
async fn certified_caller(
    axum::extract::State(caller): axum::extract::State<Caller>,
    axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<tls::Peer>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if peer.certified {
        return next.run(request).await;
    }
    caller
        .metrics
        .webhook_errors
        .with_label_values(&[caller.name, "unauthenticated"])
        .inc();
    tracing::warn!(webhook = caller.name, peer = %peer.addr, "admission request without a client certificate of KRUISE_WEBHOOK_CLIENT_CA: refused");
    // The body is read (and dropped) before the refusal: a connection closed with unread
    // data in its socket is reset by the kernel, and the client would then see a reset
    // instead of this 401. Bounded like any request: the body limit and the deadline.
    let _ = tokio::time::timeout(
        caller.read_timeout,
        axum::body::to_bytes(request.into_body(), caller.body_limit),
    )
    .await;
    (
        http::StatusCode::UNAUTHORIZED,
        "a client certificate signed by KRUISE_WEBHOOK_CLIENT_CA is required",
    )
        .into_response()
}

/// The deadline of one route's requests ([`Options::request_timeout`]).
#[derive(Clone)]
struct Deadline {
    name: &'static str,
    timeout: Duration,
    metrics: Metrics,
}

impl Deadline {
    fn new(name: &'static str, timeout: Duration, metrics: &Metrics) -> Self {
        Deadline {
            name,
            timeout,
            metrics: metrics.clone(),
        }
    }
}

/// Runs a request (reading its body included) within its route's deadline; past it the
/// client gets 408 and `kruise_webhook_errors_total{kind="deadline"}` counts it.
async fn within_deadline(
    axum::extract::State(deadline): axum::extract::State<Deadline>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    match tokio::time::timeout(deadline.timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            deadline
                .metrics
                .webhook_errors
                .with_label_values(&[deadline.name, "deadline"])
                .inc();
            tracing::warn!(webhook = deadline.name, timeout = ?deadline.timeout, "request not complete within its deadline; cut off");
            (
                http::StatusCode::REQUEST_TIMEOUT,
                format!("request not complete within {:?}", deadline.timeout),
            )
                .into_response()
        }
    }
}

impl Shared {
    fn url(&self) -> Option<String> {
        match &self.endpoint {
            Endpoint::Url { base, .. } => Some(base.clone()),
            _ => None,
        }
    }

    fn fill<'a>(&'a self, bundle: Option<&'a str>) -> Fill<'a> {
        Fill {
            endpoint: &self.endpoint,
            ca_bundle: bundle,
            paths: &self.paths,
            excluded_namespaces: &self.excluded_namespaces,
            timeout_seconds: self.timeout_seconds,
        }
    }

    /// Applies every registered configuration with the current bundle; marks the bundle
    /// applied if no rotation happened meanwhile.
    async fn apply_all(&self) -> Result<(), Error> {
        let _one_at_a_time = self.apply_lock.lock().await;
        let bundle = lock(&self.certs).bundle.clone();
        let registered = lock(&self.registered).clone();
        let nothing_registered = registered.validating.is_empty()
            && registered.mutating.is_empty()
            && registered.conversions.is_empty();
        let fill = self.fill(bundle.as_deref());
        let params = PatchParams::apply(&self.field_manager).force();
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        for mut config in registered.validating.into_values() {
            let name = fill.validating(&mut config)?;
            validating
                .patch(&name, &params, &Patch::Apply(&config))
                .await?;
        }
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        for mut config in registered.mutating.into_values() {
            let name = fill.mutating(&mut config)?;
            mutating
                .patch(&name, &params, &Patch::Apply(&config))
                .await?;
        }
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for (crd, path) in registered.conversions {
            let client_config = self.endpoint.client_config(path, bundle.as_deref())?;
            let client_config = serde_json::to_value(client_config)
                .map_err(|e| Error::Webhook(format!("clientConfig of {crd}: {e}")))?;
            // Server-side apply merges `clientConfig` field by field: over the Service the
            // CRD ships with (owned by whoever applied it) our URL would leave both set,
            // which the apiserver refuses. The other form is dropped first.
            let live = crds.get(crd).await?;
            if let Some(replace) = conversion::replace_other_endpoint_patch(&live, &client_config) {
                crds.patch(crd, &PatchParams::default(), &Patch::Merge(&replace))
                    .await?;
            }
            let patch = conversion::crd_conversion_patch(crd, client_config);
            let applied = crds.patch(crd, &params, &Patch::Apply(&patch)).await?;
            // Older installs shipped the converted versions unserved: with the conversion
            // in place every version can be served.
            if let Some(serve) = conversion::serve_all_versions_patch(&applied) {
                crds.patch(crd, &PatchParams::default(), &Patch::Json::<()>(serve))
                    .await?;
            }
        }
        let mut certs = lock(&self.certs);
        if certs.bundle == bundle {
            certs.applied_at = Some(if nothing_registered {
                SystemTime::UNIX_EPOCH
            } else {
                SystemTime::now()
            });
        }
        Ok(())
    }

    /// One certificate check: load what other replicas wrote to the CA Secret, rotate
    /// the CA (or reload the cert dir), publish the bundle, then rotate the serving
    /// certificate.
    async fn check(&self, now: SystemTime) {
        if let Err(err) = self.sync_secret().await {
            tracing::warn!(%err, "cannot read the webhook CA Secret; serving the current certificates");
        }
        if let Err(err) = self.rotate_source(now).await {
            tracing::error!(%err, "webhook certificate check failed; serving the current one");
        }
        if lock(&self.certs).applied_at.is_none() {
            match self.apply_all().await {
                Ok(()) => tracing::info!("webhook configurations carry the current caBundle"),
                Err(err) => tracing::warn!(%err, "cannot apply webhook configurations; will retry"),
            }
        }
        if let Err(err) = self.rotate_serving(now).await {
            tracing::error!(%err, "webhook serving certificate rotation failed; serving the current one");
        }
    }

    /// The generated certificates served now (`None` with a cert dir).
    fn generated(&self) -> Option<Generated> {
        match &lock(&self.certs).source {
            Source::Generated(g) => Some(g.clone()),
            Source::Files { .. } => None,
        }
    }

    /// Serves `next` from the next handshake on; a changed bundle is applied at the next
    /// opportunity.
    fn adopt(&self, next: Generated) {
        let mut state = lock(&self.certs);
        let serving_changed = match &state.source {
            Source::Generated(current) => current.serving.der() != next.serving.der(),
            Source::Files { .. } => true,
        };
        if serving_changed {
            self.resolver.swap(next.serving.certified.clone());
        }
        let bundle = next.bundle();
        if state.bundle.as_deref() != Some(bundle.as_str()) {
            state.bundle = Some(bundle);
            state.applied_at = None;
        }
        state.source = Source::Generated(next);
    }

    /// Adopts a rotation: at once, or once written to the CA Secret, where another
    /// replica's rotation may win instead.
    async fn commit(&self, next: Generated) -> Result<Generated, Error> {
        let next = match &self.ca_secret {
            Some(shared) => shared.publish(next).await?,
            None => next,
        };
        self.adopt(next.clone());
        Ok(next)
    }

    /// Loads what another replica wrote to the CA Secret since this one last looked.
    async fn sync_secret(&self) -> Result<(), Error> {
        let (Some(shared), Some(current)) = (&self.ca_secret, self.generated()) else {
            return Ok(());
        };
        if let Some(next) = shared.refresh(&current).await? {
            if next.bundle() != current.bundle() || next.serving.der() != current.serving.der() {
                tracing::info!(
                    ca_generation = next.ca.generation,
                    serving_ca_generation = next.serving.ca_generation,
                    "loaded webhook certificates another replica wrote"
                );
            }
            self.adopt(next);
        }
        Ok(())
    }

    async fn rotate_source(&self, now: SystemTime) -> Result<(), Error> {
        if let Some(current) = self.generated() {
            if let Some(next) = current.rotate_ca(&self.field_manager, &self.rotation, now)? {
                let adopted = self.commit(next).await?;
                tracing::info!(
                    generation = adopted.ca.generation,
                    trusted = adopted.previous.len() + 1,
                    "webhook CA rotated"
                );
            }
            return Ok(());
        }
        let mut guard = lock(&self.certs);
        let state = &mut *guard;
        if let Source::Files { dir, fingerprint } = &mut state.source {
            let parts = certs::read_dir_bytes(dir)?;
            if certs::fingerprint(&parts) == *fingerprint {
                return Ok(());
            }
            let loaded = certs::load_dir(dir, &self.provider, now)?;
            *fingerprint = loaded.fingerprint;
            self.resolver.swap(loaded.serving.certified.clone());
            if state.bundle != loaded.ca_pem {
                state.bundle = loaded.ca_pem;
                state.applied_at = None;
            }
            tracing::info!(dir = %dir.display(), "webhook certificates reloaded");
        }
        Ok(())
    }

    async fn rotate_serving(&self, now: SystemTime) -> Result<(), Error> {
        let Some(current) = self.generated() else {
            return Ok(());
        };
        // Apiservers learn a new caBundle through a watch, a moment after our apply: a
        // certificate from the new CA is served only once that moment has passed, and
        // once the live configurations are seen to trust it (a replica that had not yet
        // seen the new CA may have applied the old bundle meanwhile).
        let applied_at = lock(&self.certs).applied_at;
        let mut propagated = applied_at.is_some_and(|at| now >= at + self.rotation.propagation);
        if propagated && current.serving.ca_generation != current.ca.generation {
            propagated = self.bundle_is_live(&current.ca.pem).await;
            if !propagated {
                tracing::warn!("a webhook configuration lacks the current CA; applying it again");
                lock(&self.certs).applied_at = None;
            }
        }
        if let Some(next) =
            current.rotate_serving(&self.rotation, &self.sans, &self.provider, propagated, now)?
        {
            let adopted = self.commit(next).await?;
            tracing::info!(
                ca_generation = adopted.serving.ca_generation,
                "webhook serving certificate rotated"
            );
        }
        Ok(())
    }

    /// True when every registered configuration's every webhook trusts `ca_pem`.
    async fn bundle_is_live(&self, ca_pem: &str) -> bool {
        match self.live_client_configs().await {
            Ok(configs) => configs.iter().all(|c| {
                c.ca_bundle
                    .as_ref()
                    .is_some_and(|b| String::from_utf8_lossy(&b.0).contains(ca_pem))
            }),
            Err(err) => {
                tracing::warn!(%err, "cannot read the webhook configurations back");
                false
            }
        }
    }

    /// The clientConfig of every webhook of every registered configuration, as live.
    async fn live_client_configs(&self) -> Result<Vec<WebhookClientConfig>, kube::Error> {
        let registered = lock(&self.registered).clone();
        let mut configs = Vec::new();
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        for name in registered.validating.keys() {
            let live = validating.get(name).await?;
            configs.extend(live.webhooks.into_iter().flatten().map(|w| w.client_config));
        }
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        for name in registered.mutating.keys() {
            let live = mutating.get(name).await?;
            configs.extend(live.webhooks.into_iter().flatten().map(|w| w.client_config));
        }
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for (crd, _) in &registered.conversions {
            let live = crds.get(crd).await?;
            let ca_bundle = live
                .spec
                .conversion
                .and_then(|c| c.webhook)
                .and_then(|w| w.client_config)
                .and_then(|c| c.ca_bundle);
            configs.push(WebhookClientConfig {
                ca_bundle,
                service: None,
                url: None,
            });
        }
        Ok(configs)
    }
}

/// The JSON body of a review the apiserver posted to a conversion or authorization
/// webhook (`what` names the review's kind): on failure the answer, with the decision its
/// metrics record — 413 `too_large` for a body over the limit (as for admission reviews),
/// else 400 `decode`. A non-200 answer is a webhook error to the apiserver: its
/// failurePolicy decides.
pub(crate) fn review_json(
    body: Result<Bytes, BytesRejection>,
    what: &str,
) -> Result<serde_json::Value, Box<(axum::response::Response, &'static str)>> {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    let body = match body {
        Ok(body) => body,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let message = format!("cannot read the body: {}", e.body_text());
            return Err(Box::new((
                (e.status(), message).into_response(),
                "too_large",
            )));
        }
        Err(e) => return Err(Box::new(bad_review(format!("cannot read the body: {e}")))),
    };
    serde_json::from_slice(&body).map_err(|e| Box::new(bad_review(format!("not a {what}: {e}"))))
}

/// A 400 answer to a review that cannot be understood, with its metric decision `decode`.
pub(crate) fn bad_review(message: String) -> (axum::response::Response, &'static str) {
    use axum::response::IntoResponse;
    (
        (axum::http::StatusCode::BAD_REQUEST, message).into_response(),
        "decode",
    )
}

#[cfg(test)]
mod tests;
