//! Container launch priority (docs/container-launch-priority.md; openkruise/kruise v1.9.0
//! pkg/controller/containerlaunchpriority and
//! pkg/webhook/pod/mutating/container_launch_priority_initialization.go): a Pod whose containers
//! must start in an order (annotation `apps.kruise.io/container-launch-priority: Ordered`, or a
//! `KRUISE_CONTAINER_PRIORITY` env per container) gets, at creation, an env
//! `KRUISE_CONTAINER_BARRIER` in every container reading the key `p_<priority>` of the ConfigMap
//! `<pod>-barrier` ([`webhook`], pure part [`priority`]). The kubelet cannot start a container
//! whose key is missing and retries; the barrier controller ([`reconcile`], pure part [`plan`])
//! creates the ConfigMap, owned by the Pod, and adds the keys highest priority first as the
//! containers of each level become ready.
//!
//! The controller watches only Pods labelled `apps.kruise.io/container-launch-barrier`
//! (set by the webhook, removed at completion): the cache holds the Pods being launched
//! in order right now, not every Pod of the cluster.

pub mod error;
pub mod plan;
pub mod priority;
pub mod reconcile;
pub mod webhook;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_runtime::{Cache, Reconciler, Runtime};
use kube::runtime::watcher;

pub use crate::error::Error;

/// The controller's name (Lease, field manager, metrics label, Kubernetes objects).
pub const CONTROLLER_NAME: &str = "container-launch-priority-controller";
/// Who this binary is (its client's User-Agent is `launchpriority-ctl/<version>`).
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);

pub struct Context {
    pub client: kube::Client,
    /// Pods being launched in order (label-selected, see the crate docs).
    pub pods: Cache<Pod>,
    pub reconciler: Reconciler,
}

pub fn context(runtime: &Runtime) -> Arc<Context> {
    let selector = format!("{}=true", keys::CONTAINER_LAUNCH_BARRIER_LABEL);
    Arc::new(Context {
        client: runtime.client.clone(),
        pods: runtime.cache(
            watcher::Config::default().labels(&selector),
            kruise_runtime::cache::prune,
        ),
        reconciler: Reconciler::new(runtime.metrics.clone(), CONTROLLER_NAME, "Pod"),
    })
}

/// Serves the webhook on every replica and runs the barrier controller while leading.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    let (r, pods) = (&ctx.reconciler, &ctx.pods);
    let controller = |workers| {
        r.run_with(
            r.controller(pods, workers),
            ctx.clone(),
            reconcile::reconcile,
        )
    };
    runtime
        .serve_with_webhooks(webhook::routes(), webhook::configurations, controller)
        .await?;
    Ok(())
}
