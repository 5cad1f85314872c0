//! The EphemeralJob controller (`apps.kruise.io/v1alpha1`, openkruise/kruise v1.9.0
//! pkg/controller/ephemeraljob) and its validating webhook
//! (pkg/webhook/ephemeraljob/validating).
//!
//! An EphemeralJob adds its ephemeral containers to the running Pods its selector matches,
//! through the `pods/ephemeralcontainers` subresource, and reports how they ran. Everything
//! it decides is in [`plan`] (pure); [`reconcile`] reads the caches, writes the Pods, the
//! status and the finalizer, and deletes a job whose TTL has passed.

pub mod error;
pub mod events;
pub mod plan;
pub mod reconcile;
pub mod webhook;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, EnvVar, EphemeralContainer, Pod, PodSpec, PodStatus};
use kruise_api::apps_v1alpha1::EphemeralJob;
use kruise_runtime::cache::prune;
use kruise_runtime::{Cache, Events, Reconciler, Runtime};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

pub use crate::events::{CONTROLLER_NAME, IDENTITY};

/// What every reconcile shares.
pub struct Context {
    pub client: kube::Client,
    pub jobs: Cache<EphemeralJob>,
    /// The Pods of the scope, pruned to what the plan reads.
    pub pods: Cache<Pod>,
    pub events: Events,
    pub reconciler: Reconciler,
}

/// A Pod as the plan reads it: labels, phase, its ephemeral containers' names and env
/// (who added them) and their statuses. Regular containers are dropped.
fn prune_pod(pod: &mut Pod) {
    prune(pod);
    pod.metadata.annotations = None;
    if let Some(spec) = pod.spec.take() {
        let ephemeral = spec.ephemeral_containers.map(|list| {
            list.into_iter()
                .map(|c| EphemeralContainer {
                    name: c.name,
                    env: c.env.map(|env| {
                        env.into_iter()
                            .filter(|e| e.value_from.is_none())
                            .map(|e| EnvVar {
                                name: e.name,
                                value: e.value,
                                value_from: None,
                            })
                            .collect()
                    }),
                    ..Default::default()
                })
                .collect()
        });
        pod.spec = Some(PodSpec {
            containers: Vec::<Container>::new(),
            ephemeral_containers: ephemeral,
            ..Default::default()
        });
    }
    if let Some(status) = pod.status.take() {
        pod.status = Some(PodStatus {
            phase: status.phase,
            ephemeral_container_statuses: status.ephemeral_container_statuses,
            ..Default::default()
        });
    }
}

/// The caches and the shared context.
pub fn context(runtime: &Runtime) -> Arc<Context> {
    Arc::new(Context {
        client: runtime.client.clone(),
        jobs: runtime.tolerant_cache::<EphemeralJob>(watcher::Config::default(), prune),
        pods: runtime.cache::<Pod>(watcher::Config::default(), prune_pod),
        events: runtime.events(),
        reconciler: Reconciler::new(runtime.metrics.clone(), CONTROLLER_NAME, "EphemeralJob"),
    })
}

/// The jobs of `pod`'s namespace whose selector matches it (upstream's `podHandler`).
fn jobs_of(jobs: &Store<EphemeralJob>, pod: &Pod) -> Vec<ObjectRef<EphemeralJob>> {
    let empty = Default::default();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    jobs.state()
        .into_iter()
        .filter(|j| j.metadata.namespace == pod.metadata.namespace)
        .filter(|j| kruise_ordering::selector::matches(&j.spec.selector, labels).unwrap_or(false))
        .map(|j| ObjectRef::from_obj(j.as_ref()))
        .collect()
}

/// Runs until shutdown: every replica keeps its caches warm and serves admission; only
/// the lease holder reconciles, a job whenever it or a Pod it selects changes.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    // The webhook reads no cache.
    for check in [
        kruise_runtime::cache::check_name::<EphemeralJob>(),
        kruise_runtime::cache::check_name::<Pod>(),
    ] {
        runtime.readiness.only_controller_waits_for(&check);
    }
    let controller = |workers| {
        let r = &ctx.reconciler;
        let store = ctx.jobs.store().clone();
        let on_pod = move |pod: Arc<Pod>| jobs_of(&store, &pod);
        let c = r
            .controller(&ctx.jobs, workers)
            .watches_shared_stream(ctx.pods.subscribe(), on_pod);
        r.run_with(c, ctx.clone(), reconcile::reconcile)
    };
    runtime
        .serve_with_webhooks(webhook::routes(), webhook::configurations, controller)
        .await?;
    Ok(())
}
