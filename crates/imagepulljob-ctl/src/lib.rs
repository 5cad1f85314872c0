//! The image pre-pull controllers (openkruise/kruise v1.9.0 pkg/controller/nodeimage,
//! pkg/controller/imagepulljob, pkg/controller/imagelistpulljob): NodeImage per node created,
//! relabelled, pruned and garbage-collected; ImagePullJob turned into NodeImage tag entries under
//! its parallelism, its status read back from the NodeImages' statuses; ImageListPullJob as one
//! owned ImagePullJob per image. The pulls themselves are the node agent's (`daemon-agent`).
//! Everything decided is in [`plan`] (pure).

pub mod authz;
pub mod error;
pub mod plan;
pub mod reconcile;
pub mod webhook;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kruise_api::apps_v1alpha1::{ImageListPullJob, ImagePullJob, NodeImage};
use kruise_api::keys;
use kruise_runtime::cache::prune;
use kruise_runtime::{Cache, Reconciler, Runtime};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use tokio::sync::Notify;

/// The controller's name: Lease, field manager, event reporter.
pub const CONTROLLER_NAME: &str = "imagepulljob-controller";
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);

/// What every reconcile shares.
pub struct Context {
    pub client: kube::Client,
    pub jobs: Cache<ImagePullJob>,
    pub lists: Cache<ImageListPullJob>,
    pub node_images: Cache<NodeImage>,
    pub nodes: Cache<Node>,
    pub pods: Cache<Pod>,
    /// The Secrets of the config namespace (the copies; names and digests only): pull
    /// secret references to a Secret gone are pruned from the NodeImages, and a copy
    /// whose digest is not its source's is made again.
    pub config_secrets: Cache<Secret>,
    /// The Secrets of the jobs' namespaces (names and digests only,
    /// [`plan::secrets::prune_to_digest`]): a rotated pull secret wakes the jobs that
    /// use it, and their copies follow.
    pub pull_secrets: Cache<Secret>,
    /// Where pull secrets are copied for the node agents.
    pub config_namespace: String,
    /// Seconds added to an Always tag's TTL (`KRUISE_IMAGEPULLJOB_DEFAULT_TTL_SECONDS`).
    pub default_tag_ttl_seconds: i64,
    /// `KRUISE_WATCH_NAMESPACE` of this instance.
    pub scope: Option<String>,
    /// `PullImageFailed` when the controller fails a tag (timeouts).
    pub events: kruise_runtime::Events,
    pub job_reconciler: Reconciler,
    pub list_reconciler: Reconciler,
}

/// A node as the NodeImage lifecycle needs it: name, labels, Ready condition.
fn prune_node(node: &mut Node) {
    prune(node);
    node.metadata.annotations = None;
    node.spec = None;
    if let Some(status) = node.status.as_mut() {
        let conditions = status.conditions.take();
        *status = Default::default();
        status.conditions =
            conditions.map(|c| c.into_iter().filter(|c| c.type_ == "Ready").collect());
    }
}

/// A Pod as podSelector needs it: labels, node, phase, deletion.
fn prune_pod(pod: &mut Pod) {
    prune(pod);
    pod.metadata.annotations = None;
    if let Some(spec) = pod.spec.as_mut() {
        let node = spec.node_name.take();
        *spec = Default::default();
        spec.node_name = node;
    }
    if let Some(status) = pod.status.as_mut() {
        let phase = status.phase.take();
        *status = Default::default();
        status.phase = phase;
    }
}

/// The readiness check of the cache of the config namespace's Secrets.
const CONFIG_SECRETS_CHECK: &str = "cache secrets (config namespace)";

/// The caches and the shared context.
pub fn context(runtime: &Runtime) -> Arc<Context> {
    let config_namespace = std::env::var(keys::KRUISE_DAEMON_CONFIG_NS_ENV)
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| keys::KRUISE_DAEMON_CONFIG_NAMESPACE.to_string());
    let default_tag_ttl_seconds = std::env::var("KRUISE_IMAGEPULLJOB_DEFAULT_TTL_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let config_secrets = Cache::spawn(
        kube::Api::namespaced(runtime.client.clone(), &config_namespace),
        watcher::Config::default(),
        plan::secrets::prune_to_digest,
        runtime.readiness.register(CONFIG_SECRETS_CHECK),
    );
    Arc::new(Context {
        client: runtime.client.clone(),
        config_secrets,
        pull_secrets: runtime
            .cache::<Secret>(watcher::Config::default(), plan::secrets::prune_to_digest),
        jobs: runtime.tolerant_cache::<ImagePullJob>(watcher::Config::default(), prune),
        lists: runtime.tolerant_cache::<ImageListPullJob>(watcher::Config::default(), prune),
        node_images: runtime.cluster_cache::<NodeImage>(watcher::Config::default(), prune),
        nodes: runtime.cluster_cache::<Node>(watcher::Config::default(), prune_node),
        pods: runtime.cache::<Pod>(watcher::Config::default(), prune_pod),
        config_namespace,
        default_tag_ttl_seconds,
        scope: runtime.settings.watch_namespace.clone(),
        events: runtime.events(),
        job_reconciler: Reconciler::new(runtime.metrics.clone(), CONTROLLER_NAME, "ImagePullJob"),
        list_reconciler: Reconciler::new(
            runtime.metrics.clone(),
            CONTROLLER_NAME,
            "ImageListPullJob",
        ),
    })
}

fn unfinished(job: &ImagePullJob) -> bool {
    job.status
        .as_ref()
        .is_none_or(|s| s.completion_time.is_none())
}

fn unfinished_jobs(
    jobs: &kube::runtime::reflector::Store<ImagePullJob>,
    pod_selector_only: bool,
) -> Vec<ObjectRef<ImagePullJob>> {
    jobs.state()
        .into_iter()
        .filter(|j| unfinished(j))
        .filter(|j| !pod_selector_only || j.spec.template.pod_selector.is_some())
        .map(|j| ObjectRef::from_obj(j.as_ref()))
        .collect()
}

/// The unfinished jobs of `secret`'s namespace that pull with it.
fn jobs_pulling_with(
    jobs: &kube::runtime::reflector::Store<ImagePullJob>,
    secret: &Secret,
) -> Vec<ObjectRef<ImagePullJob>> {
    let (ns, name) = (secret.namespace(), secret.name_any());
    jobs.state()
        .into_iter()
        .filter(|j| j.namespace() == ns && j.spec.template.pull_secrets.contains(&name))
        .filter(|j| unfinished(j))
        .map(|j| ObjectRef::from_obj(j.as_ref()))
        .collect()
}

/// Creates, relabels, prunes and deletes NodeImages whenever a Node, a NodeImage or a
/// job changes (and when the next tag TTL or node readiness delay is due), until
/// shutdown.
async fn run_node_images(ctx: Arc<Context>) {
    let wake = Arc::new(Notify::new());
    for stream in [
        ctx.nodes.subscribe().map(|_| ()).boxed(),
        ctx.node_images.subscribe().map(|_| ()).boxed(),
        ctx.jobs.subscribe().map(|_| ()).boxed(),
    ] {
        let wake = wake.clone();
        tokio::spawn(stream.for_each(move |()| {
            wake.notify_one();
            futures::future::ready(())
        }));
    }
    let mut wait = Duration::ZERO;
    loop {
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
        // Debounce a burst of changes into one pass.
        tokio::time::sleep(Duration::from_millis(100)).await;
        wait = match reconcile::sweep_node_images(&ctx).await {
            Ok(next) => next.map_or(Duration::from_secs(300), |n| {
                (n + Duration::from_millis(100)).min(Duration::from_secs(300))
            }),
            Err(e) => {
                tracing::warn!(error = %e, "NodeImage sweep failed; retrying");
                Duration::from_secs(2)
            }
        };
    }
}

/// Runs until shutdown: every replica keeps its caches warm and serves admission; only
/// the lease holder reconciles.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    // No webhook reads Secrets: webhook traffic need not wait for their list.
    for cache in [
        kruise_runtime::cache::check_name::<Secret>(),
        CONFIG_SECRETS_CHECK.to_string(),
    ] {
        runtime.readiness.only_controller_waits_for(&cache);
    }
    let controllers = |workers| {
        let ctx = ctx.clone();
        async move {
            let jobs_store = ctx.jobs.store().clone();
            let on_node_image = move |_: Arc<NodeImage>| unfinished_jobs(&jobs_store, false);
            let jobs_store = ctx.jobs.store().clone();
            let on_pod = move |_: Arc<Pod>| unfinished_jobs(&jobs_store, true);
            let jobs_store = ctx.jobs.store().clone();
            let on_secret = move |s: Arc<Secret>| jobs_pulling_with(&jobs_store, &s);
            let r = &ctx.job_reconciler;
            let job_controller = r
                .controller(&ctx.jobs, workers)
                .watches_shared_stream(ctx.node_images.subscribe(), on_node_image)
                .watches_shared_stream(ctx.pods.subscribe(), on_pod)
                .watches_shared_stream(ctx.pull_secrets.subscribe(), on_secret);
            let jobs = r.run_with(job_controller, ctx.clone(), reconcile::reconcile_job);
            let lists = ctx.list_reconciler.run_controller(
                &ctx.lists,
                &ctx.jobs,
                workers,
                ctx.clone(),
                reconcile::reconcile_list,
            );
            let sweeper = tokio::spawn(run_node_images(ctx.clone()));
            futures::join!(jobs, lists);
            sweeper.abort();
        }
    };
    // The node agent's reads are judged beside the admission routes: the apiserver's
    // authorization config points here (authz.rs), and the Pod cache answers Pod gets.
    let mut routes = webhook::routes();
    routes.push(authz::route(&ctx.config_namespace, ctx.pods.clone()));
    runtime
        .serve_with_webhooks(routes, webhook::configurations, controllers)
        .await?;
    Ok(())
}
