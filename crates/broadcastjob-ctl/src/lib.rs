//! The BroadcastJob controller (`apps.kruise.io/v1alpha1` BroadcastJob): one
//! run-to-completion Pod on every eligible node. `run()` builds the caches, the webhook
//! and the controller, and serves until shutdown. Everything it decides is in [`plan`]
//! (pure); [`reconcile`] reads the caches and hands the plan to the shared executor
//! (`kruise_workload::Writer`).

pub mod error;
pub mod events;
pub mod plan;
pub mod reconcile;
pub mod webhook;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kruise_api::apps_v1alpha1::BroadcastJob;
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_runtime::cache::prune;
use kruise_runtime::{Cache, Reconciler, Runtime, gates};
use kruise_workload::{PodControl, Writer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

pub use crate::events::{CONTROLLER_NAME, IDENTITY};

/// What every reconcile shares: the caches, the writer, bookkeeping.
pub struct Context {
    pub client: kube::Client,
    pub jobs: Cache<BroadcastJob>,
    pub pods: Cache<Pod>,
    pub nodes: Cache<Node>,
    pub writer: Writer,
    pub reconciler: Reconciler,
}

/// A node as the plan needs it: name, labels, taints, unschedulable.
fn prune_node(node: &mut Node) {
    prune(node);
    node.metadata.annotations = None;
    node.status = None;
}

/// The caches and the shared context.
pub fn context(runtime: &Runtime) -> Arc<Context> {
    let jobs = runtime.tolerant_cache::<BroadcastJob>(watcher::Config::default(), prune);
    // Every BroadcastJob Pod carries the controller-uid label; nothing else is watched.
    let pods = runtime.cache::<Pod>(
        watcher::Config::default().labels(keys::BROADCASTJOB_CONTROLLER_UID),
        prune,
    );
    // Nodes are cluster-scoped: watched whatever the instance's scope.
    let nodes = runtime.cluster_cache::<Node>(watcher::Config::default(), prune_node);
    Arc::new(Context {
        client: runtime.client.clone(),
        jobs,
        pods,
        nodes,
        writer: Writer::new(
            PodControl::new(
                runtime.client.clone(),
                runtime.events(),
                runtime.metrics.clone(),
                CONTROLLER_NAME,
            )
            .with_messages(events::BroadcastJobMessages),
        ),
        reconciler: Reconciler::new(runtime.metrics.clone(), CONTROLLER_NAME, "BroadcastJob"),
    })
}

/// Runs until shutdown: every replica keeps its caches warm and serves admission; only the lease
/// holder reconciles, a job whenever it or one of its Pods changes, and every unfinished job when a
/// node changes (a node added later gets a Pod, as `enqueueBroadcastJobForNode` in
/// openkruise/kruise v1.9.0 pkg/controller/broadcastjob/broadcastjob_event_handler.go).
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    let routes = webhook::routes(!runtime.gates.enabled(gates::TEMPLATE_NO_DEFAULTS));
    let controller = |workers| {
        let r = &ctx.reconciler;
        let jobs = ctx.jobs.store().clone();
        let on_node = move |_node: Arc<Node>| {
            jobs.state()
                .into_iter()
                .filter(|j| !j.status.as_ref().is_some_and(|s| s.is_finished()))
                .map(|j| ObjectRef::from_obj(j.as_ref()))
                .collect::<Vec<_>>()
        };
        let c = r
            .controller(&ctx.jobs, workers)
            .watches_shared_stream(ctx.pods.subscribe(), r.owner_of::<BroadcastJob, Pod>())
            .watches_shared_stream(ctx.nodes.subscribe(), on_node);
        r.run_with(c, ctx.clone(), reconcile::reconcile)
    };
    runtime
        .serve_with_webhooks(routes, webhook::configurations, controller)
        .await?;
    Ok(())
}
