//! The AdvancedCronJob controller (`apps.kruise.io/v1alpha1` AdvancedCronJob): a
//! `batch/v1` Job, a BroadcastJob or an ImageListPullJob on a cron schedule, with a bounded
//! history.
//! `run()` builds the caches, the webhook and the controller, and serves until
//! shutdown. Everything it decides is in [`plan`] (pure); [`reconcile`] reads the caches
//! and does the few writes (create a child, delete old ones, status).

pub mod error;
pub mod events;
pub mod plan;
pub mod reconcile;
pub mod webhook;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::Job;
use kruise_api::apps_v1alpha1::{AdvancedCronJob, BroadcastJob, ImageListPullJob};
use kruise_runtime::cache::prune;
use kruise_runtime::{Cache, Reconciler, Runtime, gates};
use kube::runtime::watcher;

pub use crate::events::{CONTROLLER_NAME, IDENTITY};

/// What every reconcile shares: the caches and bookkeeping.
pub struct Context {
    pub client: kube::Client,
    pub crons: Cache<AdvancedCronJob>,
    pub jobs: Cache<Job>,
    pub broadcastjobs: Cache<BroadcastJob>,
    pub imagelistpulljobs: Cache<ImageListPullJob>,
    pub reconciler: Reconciler,
}

/// A child as the plan needs it: metadata, conditions and start time.
fn prune_job(job: &mut Job) {
    prune(job);
    job.spec = None;
}

fn prune_broadcastjob(job: &mut BroadcastJob) {
    prune(job);
    job.spec.template = Default::default();
}

/// An ImageListPullJob child: metadata and status (its spec is never read).
fn prune_imagelistpulljob(job: &mut ImageListPullJob) {
    prune(job);
    job.spec = Default::default();
}

/// The caches and the shared context.
pub fn context(runtime: &Runtime) -> Arc<Context> {
    Arc::new(Context {
        client: runtime.client.clone(),
        crons: runtime.tolerant_cache::<AdvancedCronJob>(watcher::Config::default(), prune),
        jobs: runtime.cache::<Job>(watcher::Config::default(), prune_job),
        broadcastjobs: runtime
            .tolerant_cache::<BroadcastJob>(watcher::Config::default(), prune_broadcastjob),
        imagelistpulljobs: runtime
            .tolerant_cache::<ImageListPullJob>(watcher::Config::default(), prune_imagelistpulljob),
        reconciler: Reconciler::new(runtime.metrics.clone(), CONTROLLER_NAME, "AdvancedCronJob"),
    })
}

/// Runs until shutdown: every replica keeps its caches warm and serves admission; only the lease
/// holder reconciles, a cron job whenever it or one of its children changes (Jobs, BroadcastJobs and
/// ImageListPullJobs alike, as upstream's `watchJob` / `watchBroadcastJob` /
/// `watchImageListPullJob`) and at its next schedule time.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    let routes = webhook::routes(!runtime.gates.enabled(gates::TEMPLATE_NO_DEFAULTS));
    let controller = |workers| {
        let r = &ctx.reconciler;
        let c = r
            .controller(&ctx.crons, workers)
            .watches_shared_stream(ctx.jobs.subscribe(), r.owner_of::<AdvancedCronJob, Job>())
            .watches_shared_stream(
                ctx.broadcastjobs.subscribe(),
                r.owner_of::<AdvancedCronJob, BroadcastJob>(),
            )
            .watches_shared_stream(
                ctx.imagelistpulljobs.subscribe(),
                r.owner_of::<AdvancedCronJob, ImageListPullJob>(),
            );
        r.run_with(c, ctx.clone(), reconcile::reconcile)
    };
    runtime
        .serve_with_webhooks(routes, webhook::configurations, controller)
        .await?;
    Ok(())
}
