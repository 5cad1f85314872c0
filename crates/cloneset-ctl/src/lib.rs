//! The CloneSet controller: `run()` builds the caches, the webhook and the controller,
//! and serves until shutdown. Everything it decides is in [`plan`] (pure); [`reconcile`]
//! and the shared `kruise_workload::Writer` are the thin I/O around it.

pub mod context;
pub mod error;
pub mod events;
pub mod plan;
pub mod reconcile;
pub mod revisions;
pub mod webhook;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_runtime::cache::{check_name, prune};
use kruise_runtime::{Reconciler, Runtime, gates};
use kruise_workload::{PodControl, Writer};
use kube::runtime::watcher;

use crate::context::Context;
pub use crate::events::{CONTROLLER_NAME, IDENTITY};
use crate::plan::Options;

/// The controller's options from the feature gates.
pub fn options(runtime: &Runtime) -> Options {
    let g = &runtime.gates;
    Options {
        partition_rollback: g.enabled(gates::CLONESET_PARTITION_ROLLBACK),
        short_hash: g.enabled(gates::CLONESET_SHORT_HASH),
        in_place: kruise_inplace::DiffOptions {
            env_from_metadata: g.enabled(gates::IN_PLACE_UPDATE_ENV_FROM_METADATA),
            vertical_scaling: g.enabled(gates::IN_PLACE_WORKLOAD_VERTICAL_SCALING),
        },
        preparing_update_as_update: g.enabled(gates::PREPARING_UPDATE_AS_UPDATE),
        exclude_preparing_delete: false,
        predownload: g.enabled(gates::PRE_DOWNLOAD_IMAGE_FOR_IN_PLACE_UPDATE),
        recreate_on_vct_change: g.enabled(gates::RECREATE_POD_WHEN_CHANGE_VCT_IN_CLONESET_GATE),
    }
}

/// The caches and the shared context.
pub fn context(runtime: &Runtime) -> Arc<Context> {
    // Every CloneSet Pod and PVC carries its instance id; nothing else is watched.
    let owned_pods = watcher::Config::default().labels(keys::CLONESET_INSTANCE_ID);
    let clonesets = runtime.tolerant_cache::<CloneSet>(watcher::Config::default(), prune);
    let pods = runtime.cache::<Pod>(owned_pods.clone(), kruise_workload::prune_pod);
    let pvcs = runtime.cache::<PersistentVolumeClaim>(owned_pods, prune);
    let revisions = runtime.cache::<ControllerRevision>(watcher::Config::default(), prune);
    Arc::new(Context {
        client: runtime.client.clone(),
        clonesets,
        pods,
        pvcs,
        revisions,
        writer: Writer::new(PodControl::new(
            runtime.client.clone(),
            runtime.events(),
            runtime.metrics.clone(),
            CONTROLLER_NAME,
        ))
        .consulting_budgets(kruise_pub::Options::from_gates(&runtime.gates)),
        options: options(runtime),
        reconciler: Reconciler::new(runtime.metrics.clone(), CONTROLLER_NAME, "CloneSet"),
    })
}

/// Runs the controller until shutdown: caches stay warm on every replica; only the lease
/// holder reconciles, a CloneSet whenever it or one of its Pods changes.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    // The webhook reads no cache but the Pods', and reads a Pod from the API server until
    // that cache has listed: webhook traffic (/readyz) waits for none of them; the
    // controller waits for all. A restarted replica with 10 000 Pods serves at once.
    for cache in [
        check_name::<CloneSet>(),
        check_name::<Pod>(),
        check_name::<PersistentVolumeClaim>(),
        check_name::<ControllerRevision>(),
    ] {
        runtime.readiness.only_controller_waits_for(&cache);
    }
    let routes = webhook::routes(
        ctx.pods.clone(),
        Some(runtime.client.clone()),
        !runtime.gates.enabled(gates::TEMPLATE_NO_DEFAULTS),
    );
    let (r, clonesets, pods) = (&ctx.reconciler, &ctx.clonesets, &ctx.pods);
    let controller =
        |workers| r.run_controller(clonesets, pods, workers, ctx.clone(), reconcile::reconcile);
    runtime
        .serve_with_webhooks(routes, webhook::configurations, controller)
        .await?;
    Ok(())
}
