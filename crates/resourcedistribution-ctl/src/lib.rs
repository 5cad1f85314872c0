//! The ResourceDistribution controller (`apps.kruise.io/v1alpha1` ResourceDistribution,
//! cluster-scoped): copies one Secret or ConfigMap into the target namespaces and keeps
//! the copies in sync. `run()` builds the caches, the webhook and the controller and
//! serves until shutdown. What it decides is in [`plan`] (pure); [`reconcile`] reads the
//! caches and writes the copies and the status.
//!
//! Watches: ResourceDistributions, Namespaces (pruned to name, labels, phase), and only
//! the Secrets and ConfigMaps it manages (label `apps.kruise.io/resourcedistribution-uid`),
//! so no other Secret of the cluster is ever cached.

pub mod error;
pub mod events;
pub mod labels;
pub mod plan;
pub mod reconcile;
pub mod webhook;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kruise_api::apps_v1alpha1::ResourceDistribution;
use kruise_runtime::cache::{check_name, prune, prune_metadata};
use kruise_runtime::{Cache, Reconciler, Runtime, Tolerant, gates};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};

pub use crate::events::{CONTROLLER_NAME, IDENTITY};

/// What every reconcile shares.
pub struct Context {
    pub client: kube::Client,
    pub distributions: Cache<ResourceDistribution>,
    pub namespaces: Cache<Namespace>,
    pub secrets: Cache<Secret>,
    pub configmaps: Cache<ConfigMap>,
    pub reconciler: Reconciler,
    /// `KRUISE_WATCH_NAMESPACE` of a namespace-scoped instance (see [`manages`]).
    pub scope: Option<String>,
}

impl Context {
    pub fn manages(&self, rd: &ResourceDistribution) -> bool {
        manages(self.scope.as_deref(), rd)
    }
}

/// Whether an instance acts on `rd`. RDs are cluster-scoped: a namespace-scoped
/// instance (tests, namespaced installs) takes only the RDs labelled
/// `apps.kruise.io/resourcedistribution-scope=<its namespace>`, and a cluster-wide one
/// every other RD, so two instances never write the same copies.
pub fn manages(scope: Option<&str>, rd: &ResourceDistribution) -> bool {
    let label = rd.labels().get(crate::labels::SCOPE).map(String::as_str);
    match scope {
        Some(ns) => label == Some(ns),
        None => label.is_none(),
    }
}

/// A namespace as the plan needs it: name, labels, phase and deletion.
fn prune_namespace(ns: &mut Namespace) {
    prune_metadata(&mut ns.metadata);
    ns.metadata.annotations = None;
    ns.metadata.managed_fields = None;
    ns.metadata.owner_references = None;
    ns.metadata.finalizers = None;
    ns.spec = None;
    if let Some(status) = ns.status.as_mut() {
        status.conditions = None;
    }
}

/// The caches and the shared context. Every cache is cluster-wide, whatever the
/// instance's scope: the targets are other namespaces.
pub fn context(runtime: &Runtime) -> Arc<Context> {
    let client = runtime.client.clone();
    let distributions = Cache::spawn_tolerant(
        Api::<Tolerant<ResourceDistribution>>::all(client.clone()),
        watcher::Config::default(),
        prune,
        runtime
            .readiness
            .register(check_name::<ResourceDistribution>()),
        runtime.malformed_report(),
    );
    let namespaces =
        runtime.cluster_cache::<Namespace>(watcher::Config::default(), prune_namespace);
    // Only the copies this controller made: label-selected.
    let managed = || watcher::Config::default().labels(crate::labels::MANAGED_BY_UID);
    let secrets = Cache::spawn(
        Api::<Secret>::all(client.clone()),
        managed(),
        prune,
        runtime.readiness.register(check_name::<Secret>()),
    );
    let configmaps = Cache::spawn(
        Api::<ConfigMap>::all(client.clone()),
        managed(),
        prune,
        runtime.readiness.register(check_name::<ConfigMap>()),
    );
    Arc::new(Context {
        client,
        distributions,
        namespaces,
        secrets,
        configmaps,
        reconciler: Reconciler::new(
            runtime.metrics.clone(),
            CONTROLLER_NAME,
            "ResourceDistribution",
        ),
        scope: runtime.settings.watch_namespace.clone(),
    })
}

/// The RD that controls a copy (RDs are cluster-scoped: the reference has no namespace).
fn owner_rd<K: Resource>(copy: Arc<K>) -> Option<ObjectRef<ResourceDistribution>> {
    let kind = ResourceDistribution::kind(&());
    copy.meta()
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.kind == kind)
        .map(|o| ObjectRef::new(&o.name))
}

/// Runs until shutdown: every replica keeps its caches warm and serves admission; only the lease
/// holder reconciles. An RD is reconciled when it changes, when a copy it controls changes or goes,
/// and (every RD in scope) when a Namespace is created, relabelled or deleted (as upstream's
/// `enqueueRequestForNamespace`, openkruise/kruise v1.9.0
/// pkg/controller/resourcedistribution/resourcedistribution_namespace_event_handler.go). With the
/// gate `ResourceDistributionGate` off the webhook refuses every RD and nothing is reconciled, as
/// upstream.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let enabled = runtime.gates.enabled(gates::RESOURCE_DISTRIBUTION_GATE);
    let ctx = context(&runtime);
    let dry_run_namespace = runtime
        .settings
        .watch_namespace
        .clone()
        .unwrap_or_else(|| runtime.settings.namespace.clone());
    let routes = webhook::routes(runtime.client.clone(), enabled, dry_run_namespace);
    let shutdown = runtime.shutdown.clone();
    let controller = |workers| {
        let ctx = ctx.clone();
        let shutdown = shutdown.clone();
        async move {
            if !enabled {
                tracing::warn!("feature gate ResourceDistributionGate is off: not reconciling");
                shutdown.cancelled().await;
                return;
            }
            let r = &ctx.reconciler;
            let (store, scope) = (ctx.distributions.store().clone(), ctx.scope.clone());
            let on_namespace = move |_: Arc<Namespace>| {
                store
                    .state()
                    .into_iter()
                    .filter(|rd| manages(scope.as_deref(), rd))
                    .map(|rd| ObjectRef::from_obj(rd.as_ref()))
                    .collect::<Vec<_>>()
            };
            let c = r
                .controller(&ctx.distributions, workers)
                .watches_shared_stream(ctx.secrets.subscribe(), owner_rd::<Secret>)
                .watches_shared_stream(ctx.configmaps.subscribe(), owner_rd::<ConfigMap>)
                .watches_shared_stream(ctx.namespaces.subscribe(), on_namespace);
            r.run_with(c, ctx.clone(), reconcile::reconcile).await
        }
    };
    runtime
        .serve_with_webhooks(routes, webhook::configurations, controller)
        .await?;
    Ok(())
}
