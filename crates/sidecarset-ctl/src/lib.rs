//! The SidecarSet controller and its admission webhooks: `run()` builds the caches,
//! serves admission (Pod injection, SidecarSet defaulting and validation), keeps the Pod
//! webhook's matchCondition in step with the SidecarSets, and reconciles while it leads.
//! Everything it decides is pure ([`inject`], [`plan`], [`validation`], [`conditions`]);
//! [`webhook`], [`reconcile`] and [`execute`] are the thin I/O around it.

pub mod conditions;
pub mod context;
pub mod defaults;
pub mod error;
pub mod events;
pub mod execute;
pub mod hash;
pub mod inject;
pub mod matching;
pub mod plan;
pub mod reconcile;
pub mod resources_policy;
pub mod revisions;
pub mod validation;
pub mod wakes;
pub mod webhook;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kruise_api::apps_v1alpha1::SidecarSet;
use kruise_api::keys;
use kruise_runtime::cache::prune_metadata;
use kruise_runtime::{Cache, Reconciler, Runtime, Tolerant, WebhookServer};
use kruise_workload::{Expectations, PodControl};
use kube::Api;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use crate::context::{Context, Coverage};
pub use crate::events::{CONTROLLER_NAME, IDENTITY};

/// Pods carry nothing we need until something was injected into them: keep only their
/// names, so watching every Pod costs little memory.
fn prune_pod(p: &mut Pod) {
    prune_metadata(&mut p.metadata);
    let injected = p
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(keys::SIDECARSET_INJECTED_LIST));
    if !injected {
        p.metadata.labels = None;
        p.metadata.annotations = None;
        p.metadata.owner_references = None;
        p.metadata.finalizers = None;
        p.spec = None;
        p.status = None;
    }
}

fn prune_revision(r: &mut ControllerRevision) {
    prune_metadata(&mut r.metadata);
}

/// The caches and the shared context, with the options of the environment
/// ([`wakes::LIVE_STATUS_ENV`]).
pub fn context(runtime: &Runtime) -> Arc<Context> {
    context_with(runtime, live_status_from_env())
}

/// `KRUISE_SIDECARSET_NOTUPDATE_LIVE_STATUS` of this process.
pub fn live_status_from_env() -> bool {
    wakes::live_status_from(std::env::var(wakes::LIVE_STATUS_ENV).ok().as_deref())
}

/// The caches and the shared context; `notupdate_live_status`: see [`wakes`].
pub fn context_with(runtime: &Runtime, notupdate_live_status: bool) -> Arc<Context> {
    let scope = runtime.settings.watch_namespace.clone();
    let revision_namespace = scope
        .clone()
        .unwrap_or_else(|| runtime.settings.namespace.clone());
    let namespaces_config = match &scope {
        Some(ns) => watcher::Config::default().fields(&format!("metadata.name={ns}")),
        None => watcher::Config::default(),
    };
    let sidecarsets = Cache::spawn_tolerant(
        Api::<Tolerant<SidecarSet>>::all(runtime.client.clone()),
        watcher::Config::default(),
        |ss: &mut SidecarSet| prune_metadata(&mut ss.metadata),
        runtime.readiness.register("cache sidecarsets"),
        runtime.malformed_report(),
    );
    let pods = runtime.cache::<Pod>(watcher::Config::default(), prune_pod);
    let namespaces = Cache::spawn(
        Api::<Namespace>::all(runtime.client.clone()),
        namespaces_config,
        |n: &mut Namespace| {
            prune_metadata(&mut n.metadata);
            n.spec = None;
            n.status = None;
        },
        runtime.readiness.register("cache namespaces"),
    );
    let revisions = Cache::spawn(
        Api::<ControllerRevision>::namespaced(runtime.client.clone(), &revision_namespace),
        watcher::Config::default().labels(keys::SIDECARSET_NAME_LABEL),
        prune_revision,
        runtime.readiness.register("cache controllerrevisions"),
    );
    // Every registered check (the caches, the webhook's TLS), latched into a flag the
    // Pod webhook reads on each request without taking the readiness lock.
    let synced = Arc::new(AtomicBool::new(false));
    {
        let (readiness, flag) = (runtime.readiness.clone(), synced.clone());
        tokio::spawn(async move {
            readiness.wait_until_ready().await;
            flag.store(true, Ordering::Release);
        });
    }
    Arc::new(Context {
        client: runtime.client.clone(),
        sidecarsets,
        pods,
        namespaces,
        revisions,
        revision_namespace,
        watch_namespace: scope,
        control: PodControl::new(
            runtime.client.clone(),
            runtime.events(),
            runtime.metrics.clone(),
            CONTROLLER_NAME,
        ),
        expectations: Expectations::new(kruise_workload::expectations::DEFAULT_TIMEOUT),
        reconciler: Reconciler::new(runtime.metrics.clone(), CONTROLLER_NAME, "SidecarSet"),
        synced,
        coverage: Coverage::default(),
        patch_metadata_defaults_allowed: runtime
            .gates
            .enabled(kruise_runtime::gates::SIDECARSET_PATCH_POD_METADATA_DEFAULTS_ALLOWED),
        conditions: Default::default(),
        notupdate_live_status,
        wakes: Arc::new(wakes::Wakes::new(notupdate_live_status)),
    })
}

/// Runs until shutdown: every replica serves admission and keeps the webhook
/// configuration current; only the lease holder reconciles.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    run_with(runtime, live_status_from_env()).await
}

/// [`run`] with `KRUISE_SIDECARSET_NOTUPDATE_LIVE_STATUS` given ([`wakes`]).
pub async fn run_with(runtime: Runtime, notupdate_live_status: bool) -> anyhow::Result<()> {
    let ctx = context_with(&runtime, notupdate_live_status);
    let server = WebhookServer::start(&runtime, webhook::routes(ctx.clone())).await?;
    let scope = runtime.settings.watch_namespace.clone();
    let registrable = server.can_register();
    if registrable {
        // Registered once the SidecarSets are listed, with the matchCondition they give:
        // registering earlier would briefly narrow the Pod webhook to nothing.
        tokio::spawn(webhook::keep_conditions(server.clone(), ctx.clone()));
        let _ = ctx.conditions.server.set(server.clone());
        if scope.is_none() {
            server.register_conversions().await?;
        }
    } else {
        ctx.coverage.set_everything();
        tracing::warn!(
            "KRUISE_WEBHOOK_URL and KRUISE_WEBHOOK_SERVICE unset: webhook configurations not registered"
        );
    }
    let workers = runtime.settings.workers;
    runtime
        .run_while_leader(|| {
            let ctx = ctx.clone();
            async move { controller(ctx, workers).await }
        })
        .await?;
    // A namespace-scoped instance (tests, namespaced installs) removes its own
    // configurations; a cluster-wide one leaves them for the next replica.
    if registrable && scope.is_some() {
        server.unregister().await;
    }
    Ok(())
}

/// One controller run over the shared caches.
pub async fn controller(ctx: Arc<Context>, workers: u16) {
    let r = &ctx.reconciler;
    let on_pod = r.instruments().clone();
    let wakes = ctx.wakes.clone();
    // A Pod wakes the SidecarSets it names in its injected list, as upstream's Pod event
    // handler does (see `wakes`).
    let (pod_wakes, pods, sidecarsets) = (
        wakes.clone(),
        ctx.pods.store().clone(),
        ctx.sidecarsets.store().clone(),
    );
    let by_pod = move |pod: Arc<Pod>| {
        let names = matching::injected_list(&pod);
        if names.is_empty() {
            return Vec::new();
        }
        let alive = pods.get(&ObjectRef::from_obj(pod.as_ref())).is_some();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let change = pod_wakes.pod(&uid, alive, pods.len(), |u| {
            pods.state()
                .iter()
                .any(|p| p.metadata.uid.as_deref() == Some(u))
        });
        let refs: Vec<ObjectRef<SidecarSet>> = names
            .into_iter()
            .filter(|name| {
                let Some(ss) = sidecarsets.get(&ObjectRef::new(name)) else {
                    return true;
                };
                if change == wakes::PodChange::Created && wakes::stale_status(&ss, pod_wakes.live) {
                    pod_wakes.keep_created(name, &uid, pod.clone());
                }
                wakes::pod_wakes(change, &ss, pod_wakes.live)
            })
            .map(|name| {
                on_pod.triggered(name.to_string());
                ObjectRef::new(name)
            })
            .collect();
        refs
    };
    // A Namespace's labels decide namespaceSelector scopes.
    let store = ctx.sidecarsets.store().clone();
    let by_namespace = move |_: Arc<Namespace>| {
        store
            .state()
            .into_iter()
            .filter(|ss| ss.spec.namespace_selector.is_some())
            .map(|ss| ObjectRef::from_obj(ss.as_ref()))
            .collect::<Vec<_>>()
    };
    let ss_wakes = wakes.clone();
    let ss_store = ctx.sidecarsets.store().clone();
    r.controller_where(&ctx.sidecarsets, workers, move |ss: &SidecarSet| {
        let alive = ss_store.get(&ObjectRef::from_obj(ss)).is_some();
        ss_wakes.sidecarset(ss, alive)
    })
    .watches_shared_stream(ctx.pods.subscribe(), by_pod)
    .watches_shared_stream(ctx.namespaces.subscribe(), by_namespace)
    .run(reconcile::reconcile, reconcile::error_policy, ctx.clone())
    .for_each(|_| async {})
    .await;
}
