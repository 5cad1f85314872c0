//! What every controller's reconcile loop shares, so a controller crate holds only its
//! domain logic:
//!
//! - [`Reconciler::run`]: one `tracing` span per reconcile (`kind`, `object`, a
//!   reconcile `id`; JSON logs carry them), `kruise_reconcile_total` /
//!   `kruise_reconcile_duration_seconds` by result, queue depth, and the per-object
//!   backoff reset on success;
//! - [`Reconciler::error_policy`]: transient errors requeue with per-object exponential
//!   backoff; a namespace being deleted is not retried;
//! - the periodic resync: a reconcile that returns `Action::await_change()` is requeued
//!   after the resync period anyway ([`resync_after`]), so an object whose event was
//!   missed (a watch gap the relist did not cover, a bug in a trigger) still converges;
//! - [`Reconciler::run_controller`] (or, for other triggers, [`Reconciler::controller`]
//!   and [`Reconciler::owner_of`]): the kube-runtime `Controller` over a shared
//!   [`Cache`], triggered by the primary kind and by the objects it controls
//!   (ownerReference `controller: true` of the primary's kind);
//! - [`apply_status`]: the status subresource written by server-side apply, one field
//!   manager per controller.

use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tracing::Instrument;

use crate::api_error::{is_conflict, is_not_found};
use crate::cache::{Cache, key};
use crate::instruments::{Backoff, Instruments};
use crate::metrics::Metrics;

/// The process's resync period ([`set_resync_period`]); 10 hours until set, as
/// controller-runtime's default `SyncPeriod`.
static RESYNC_PERIOD: OnceLock<Duration> = OnceLock::new();
const DEFAULT_RESYNC_PERIOD: Duration = Duration::from_secs(10 * 3600);

/// Sets the resync period of every [`Reconciler`] of the process (`Duration::ZERO`: none),
/// once, from `KRUISE_RESYNC_PERIOD_SECONDS` at start; later calls are ignored.
pub fn set_resync_period(period: Duration) {
    let _ = RESYNC_PERIOD.set(period);
}

/// When `object` is reconciled again although nothing changed: `period` plus up to a tenth
/// of it, the same for the same object (a hash of its key), so the objects a controller
/// reconciled together at start do not all come back in the same second. `None` for a
/// zero period.
pub fn resync_after(object: &str, period: Duration) -> Option<Duration> {
    if period.is_zero() {
        return None;
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    object.hash(&mut hasher);
    let spread = (hasher.finish() % 1000) as u32;
    Some(period + period / 10 * spread / 1000)
}

/// What a controller watches and reconciles: a cached, typed Kubernetes object.
pub trait Watched:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static
{
}

impl<T> Watched for T where
    T: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// What the shared loop needs to know of a controller's error type (one enum per crate).
///
/// A crate's enum names only what is its own: [`ReconcileError::label`] for its variants that
/// are not API errors. The API error underneath any variant is found through the error's
/// `source()` chain (thiserror's `#[from]` and `#[source]` fill it), and labelled alike in
/// every controller ([`kube_error_label`]).
pub trait ReconcileError: std::error::Error + Send + Sync + 'static {
    /// A short, bounded label for an error that has no API error underneath.
    fn label(&self) -> &'static str;

    /// The `result` label of `kruise_reconcile_total`: the API error's kind when there is
    /// one underneath, else [`ReconcileError::label`].
    fn metric_label(&self) -> &'static str {
        self.kube_error()
            .map_or_else(|| self.label(), kube_error_label)
    }

    /// The API error underneath, if any (to recognise a terminating namespace): the first
    /// `kube::Error` in the `source()` chain.
    fn kube_error(&self) -> Option<&kube::Error> {
        let mut cause = self.source();
        while let Some(error) = cause {
            if let Some(kube) = error.downcast_ref::<kube::Error>() {
                return Some(kube);
            }
            cause = error.source();
        }
        None
    }
}

/// Labels for the API errors every controller meets.
pub fn kube_error_label(e: &kube::Error) -> &'static str {
    if is_conflict(e) {
        "conflict"
    } else if is_not_found(e) {
        "not_found"
    } else {
        "kube"
    }
}

/// One controller's reconcile bookkeeping. Cheap to clone.
#[derive(Clone)]
pub struct Reconciler {
    kind: &'static str,
    instruments: Instruments,
    backoff: Backoff,
    ids: Arc<AtomicU64>,
}

impl Reconciler {
    /// `controller` labels the metrics (`cloneset-controller`), `kind` the log spans.
    pub fn new(metrics: Metrics, controller: &str, kind: &'static str) -> Self {
        Reconciler {
            kind,
            instruments: Instruments::new(metrics, controller),
            backoff: Backoff::default(),
            ids: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn instruments(&self) -> &Instruments {
        &self.instruments
    }

    /// Runs one reconcile of `obj` inside its span, with metrics and backoff.
    pub async fn run<K, E, Fut>(&self, obj: &K, reconcile: Fut) -> Result<Action, E>
    where
        K: Resource,
        E: ReconcileError,
        Fut: Future<Output = Result<Action, E>>,
    {
        let object = key(obj);
        self.instruments.started(&object);
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let span = tracing::info_span!("reconcile", kind = self.kind, object = %object, id);
        let started = Instant::now();
        let result = reconcile.instrument(span).await;
        let label = match &result {
            Ok(_) => "ok",
            Err(e) => e.metric_label(),
        };
        self.instruments.finished(label, started.elapsed());
        if result.is_ok() {
            self.backoff.succeeded(&object);
        }
        let period = *RESYNC_PERIOD.get().unwrap_or(&DEFAULT_RESYNC_PERIOD);
        match result {
            Ok(action) if action == Action::await_change() => Ok(
                resync_after(&object, period).map_or_else(Action::await_change, Action::requeue)
            ),
            other => other,
        }
    }

    /// When to try again after `err`.
    pub fn error_policy<K: Resource, E: ReconcileError>(&self, obj: &K, err: &E) -> Action {
        let object = key(obj);
        if let Some(kube::Error::Api(s)) = err.kube_error()
            && s.code == 403
            && s.message.contains("because it is being terminated")
        {
            // Its namespace is going away and the object with it: nothing to retry.
            tracing::debug!(kind = self.kind, object = %object, "namespace terminating");
            return Action::await_change();
        }
        let wait = self.backoff.failed(&object);
        tracing::warn!(kind = self.kind, object = %object, error = %err, retry_in = ?wait, "reconcile failed");
        Action::requeue(wait)
    }

    /// A `Controller` over the shared cache of the primary kind: every change of a
    /// primary object triggers it (and counts in the queue depth). Add the owned kinds
    /// with `.watches_shared_stream(cache.subscribe(), reconciler.owner_of())`.
    pub fn controller<K>(&self, primary: &Cache<K>, workers: u16) -> Controller<K>
    where
        K: Watched,
    {
        self.controller_where(primary, workers, |_: &K| true)
    }

    /// As [`Reconciler::controller`], but a change of a primary object triggers it only
    /// when `wakes` says so (a deletion always passes: it is never reconciled). For a
    /// controller that, as upstream's predicates do, ignores some changes of its own
    /// objects (e.g. its status writes).
    pub fn controller_where<K>(
        &self,
        primary: &Cache<K>,
        workers: u16,
        wakes: impl Fn(&K) -> bool + Send + Sync + 'static,
    ) -> Controller<K>
    where
        K: Watched,
    {
        let (instruments, backoff) = (self.instruments.clone(), self.backoff.clone());
        let store = primary.store().clone();
        let filter_store = store.clone();
        let changes = primary
            .subscribe()
            .filter(move |obj| {
                let gone = filter_store
                    .get(&ObjectRef::from_obj(obj.as_ref()))
                    .is_none();
                std::future::ready(gone || wakes(obj.as_ref()))
            })
            .inspect(move |obj| {
                let object = key(obj.as_ref());
                // The cache applies an event before it fans it out: an object not in the store
                // was deleted, and the controller will not reconcile it. Counted as waiting it
                // would stay in the queue depth (and its backoff entry in memory) for good.
                if store.get(&ObjectRef::from_obj(obj.as_ref())).is_some() {
                    instruments.triggered(object);
                } else {
                    instruments.gone(&object);
                    backoff.succeeded(&object);
                }
            });
        let config = ControllerConfig::default()
            .concurrency(workers)
            .debounce(Duration::from_millis(50));
        Controller::for_shared_stream(changes, primary.store().clone()).with_config(config)
    }

    /// Runs the `Controller` of `primary` until shutdown: an object is reconciled when it
    /// or an `owned` object it controls changes, `reconcile` runs inside
    /// [`Reconciler::run`] and its errors are retried as [`Reconciler::error_policy`] says.
    pub async fn run_controller<K, C, Ctx, E, Fut>(
        &self,
        primary: &Cache<K>,
        owned: &Cache<C>,
        workers: u16,
        ctx: Arc<Ctx>,
        reconcile: fn(Arc<K>, Arc<Ctx>) -> Fut,
    ) where
        K: Watched,
        C: Watched,
        Ctx: Send + Sync + 'static,
        E: ReconcileError,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
    {
        let controller = self
            .controller(primary, workers)
            .watches_shared_stream(owned.subscribe(), self.owner_of::<K, C>());
        self.run_with(controller, ctx, reconcile).await;
    }

    /// Runs a `Controller` built with [`Reconciler::controller`] (and whatever triggers
    /// the controller adds to it) until shutdown, as [`Reconciler::run_controller`] does.
    pub async fn run_with<K, Ctx, E, Fut>(
        &self,
        controller: Controller<K>,
        ctx: Arc<Ctx>,
        reconcile: fn(Arc<K>, Arc<Ctx>) -> Fut,
    ) where
        K: Watched,
        Ctx: Send + Sync + 'static,
        E: ReconcileError,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
    {
        let (this, policy) = (self.clone(), self.clone());
        controller
            .run(
                move |obj, ctx| {
                    let this = this.clone();
                    async move { this.run(obj.as_ref(), reconcile(obj.clone(), ctx)).await }
                },
                move |obj, err, _| policy.error_policy(obj.as_ref(), err),
                ctx,
            )
            .for_each(|_| async {})
            .await;
    }

    /// Maps an owned object to its controller of kind `K` (and counts the trigger).
    pub fn owner_of<K, C>(&self) -> impl Fn(Arc<C>) -> Option<ObjectRef<K>> + Send + Sync + 'static
    where
        K: Resource<DynamicType = ()>,
        C: Resource,
    {
        let instruments = self.instruments.clone();
        move |obj: Arc<C>| {
            let owner = controller_ref::<K>(obj.meta())?;
            instruments.triggered(match &owner.namespace {
                Some(ns) => format!("{ns}/{}", owner.name),
                None => owner.name.clone(),
            });
            Some(owner)
        }
    }
}

/// The controller ownerReference of kind `K` on `meta`, as a reference to the owner
/// (in the object's namespace).
pub fn controller_ref<K: Resource<DynamicType = ()>>(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<ObjectRef<K>> {
    let kind = K::kind(&());
    let owner = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.kind == kind)?;
    let r = ObjectRef::<K>::new(&owner.name);
    Some(match &meta.namespace {
        Some(ns) => r.within(ns),
        None => r,
    })
}

/// Writes `status` of `obj` through `api` (its namespace's, or the cluster's) with
/// server-side apply as `field_manager` (forced: the status belongs to its controller).
/// Returns the object as written (its new resourceVersion is what a controller that must
/// not plan on an older copy waits for).
pub async fn apply_status<K, S>(
    api: &Api<K>,
    obj: &K,
    status: &S,
    field_manager: &str,
) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
    S: Serialize,
{
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        &obj.name_any(),
        &PatchParams::apply(field_manager).force(),
        &Patch::Apply(patch),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    #[derive(Debug, thiserror::Error)]
    enum Boom {
        #[error("boom")]
        Own,
        #[error("api: {0}")]
        Api(#[from] kube::Error),
        #[error("revision: {0}")]
        Nested(#[source] Nested),
    }

    /// An error of another crate with an API error inside (as `RevisionError::Kube`).
    #[derive(Debug, thiserror::Error)]
    #[error("nested: {0}")]
    struct Nested(#[source] kube::Error);

    impl ReconcileError for Boom {
        fn label(&self) -> &'static str {
            match self {
                Boom::Own => "boom",
                Boom::Api(_) | Boom::Nested(_) => "unreachable",
            }
        }
    }

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure("m", reason).with_code(code),
        ))
    }

    #[test]
    fn the_api_error_is_found_at_any_depth_of_the_source_chain() {
        assert!(Boom::Own.kube_error().is_none());
        assert_eq!(Boom::Own.metric_label(), "boom");
        let direct = Boom::Api(api_error(409, "Conflict"));
        assert!(matches!(direct.kube_error(), Some(kube::Error::Api(s)) if s.code == 409));
        assert_eq!(direct.metric_label(), "conflict");
        let nested = Boom::Nested(Nested(api_error(404, "NotFound")));
        assert!(matches!(nested.kube_error(), Some(kube::Error::Api(s)) if s.code == 404));
        assert_eq!(nested.metric_label(), "not_found");
        assert_eq!(
            Boom::Api(api_error(500, "InternalError")).metric_label(),
            "kube"
        );
    }

    fn pod(owners: Vec<OwnerReference>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                owner_references: Some(owners),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn owner(kind: &str, name: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            kind: kind.into(),
            name: name.into(),
            controller: Some(controller),
            ..Default::default()
        }
    }

    #[test]
    fn the_controller_owner_of_the_primary_kind_is_found() {
        let p = pod(vec![
            owner("Deployment", "d", false),
            owner("ReplicaSet", "rs", true),
        ]);
        let r = controller_ref::<ReplicaSet>(&p.metadata).expect("owner");
        assert_eq!(
            (r.name.as_str(), r.namespace.as_deref()),
            ("rs", Some("ns"))
        );
        let not_controller = pod(vec![owner("ReplicaSet", "rs", false)]);
        assert!(controller_ref::<ReplicaSet>(&not_controller.metadata).is_none());
    }

    #[tokio::test]
    async fn a_reconcile_counts_by_result_and_a_failure_backs_off() {
        let metrics = Metrics::new();
        let r = Reconciler::new(metrics.clone(), "c", "ReplicaSet");
        let p = pod(vec![]);
        let ok: Result<Action, Boom> = r.run(&p, async { Ok(Action::await_change()) }).await;
        // Nothing to wait for but a change: requeued after the resync period anyway.
        let resync = resync_after(&key(&p), DEFAULT_RESYNC_PERIOD).expect("a period");
        assert_eq!(ok.expect("ok"), Action::requeue(resync));
        // A requeue the reconcile asked for is kept.
        let soon: Result<Action, Boom> = r
            .run(&p, async { Ok(Action::requeue(Duration::from_secs(3))) })
            .await;
        assert_eq!(soon.expect("ok"), Action::requeue(Duration::from_secs(3)));
        let failed: Result<Action, Boom> = r.run(&p, async { Err(Boom::Own) }).await;
        let err = failed.expect_err("fails");
        assert_eq!(metrics.reconciles.with_label_values(&["c", "ok"]).get(), 2);
        assert_eq!(
            metrics.reconciles.with_label_values(&["c", "boom"]).get(),
            1
        );
        assert_eq!(
            r.error_policy(&p, &err),
            Action::requeue(Duration::from_millis(100))
        );
        assert_eq!(
            r.error_policy(&p, &err),
            Action::requeue(Duration::from_millis(200))
        );
    }

    #[test]
    fn the_resync_is_the_period_plus_a_stable_spread_of_at_most_a_tenth() {
        let hour = Duration::from_secs(3600);
        let names: Vec<String> = (0..200).map(|i| format!("ns/obj-{i}")).collect();
        let after: Vec<Duration> = names
            .iter()
            .map(|n| resync_after(n, 10 * hour).expect("a period"))
            .collect();
        assert!(after.iter().all(|d| *d >= 10 * hour && *d <= 11 * hour));
        // Spread, not one instant for all.
        let distinct: std::collections::BTreeSet<_> = after.iter().collect();
        assert!(distinct.len() > 150, "{}", distinct.len());
        assert_eq!(resync_after("ns/obj-7", 10 * hour), Some(after[7]));
        assert_eq!(resync_after("ns/obj-7", Duration::ZERO), None);
    }

    #[test]
    fn a_terminating_namespace_is_not_retried() {
        let r = Reconciler::new(Metrics::new(), "c", "ReplicaSet");
        let status = kube::core::Status::failure(
            "pods \"x\" is forbidden: unable to create new content in namespace ns because it is being terminated",
            "Forbidden",
        )
        .with_code(403);
        let err = Boom::Api(kube::Error::Api(Box::new(status)));
        assert_eq!(r.error_policy(&pod(vec![]), &err), Action::await_change());
    }
}
