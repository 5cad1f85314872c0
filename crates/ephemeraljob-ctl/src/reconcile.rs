//! One reconcile: the finalizer, the plan over the cached Pods, the `pods/ephemeralcontainers`
//! writes, the status, the TTL deletion. It decides nothing itself.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::{EPHEMERAL_JOB_FINALIZER, EphemeralJob};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::Context;
use crate::error::{Error, Result};
use crate::events::CONTROLLER_NAME;
use crate::plan::{self, AddContainers, World};

fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The job's finalizers with ours added or removed, written only if the job is still at
/// the version read (a conflict is retried by the controller).
async fn set_finalizer(api: &Api<EphemeralJob>, job: &EphemeralJob, on: bool) -> Result<()> {
    let mut finalizers: Vec<String> = job
        .finalizers()
        .iter()
        .filter(|f| *f != EPHEMERAL_JOB_FINALIZER)
        .cloned()
        .collect();
    if on {
        finalizers.push(EPHEMERAL_JOB_FINALIZER.to_string());
    }
    let patch = serde_json::json!({
        "metadata": { "resourceVersion": job.resource_version(), "finalizers": finalizers }
    });
    match api
        .patch(
            &job.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        Err(e) if code(&e) == Some(404) => Ok(()),
        other => other.map(|_| ()).map_err(Into::into),
    }
}

/// The strategic merge patch of `pods/ephemeralcontainers` appending the containers (the
/// list merges by name), refused with a 409 if the Pod is no longer at the version the
/// plan saw, so a stale cache never adds them twice.
pub fn add_patch(add: &AddContainers) -> serde_json::Value {
    serde_json::json!({
        "metadata": { "resourceVersion": add.resource_version },
        "spec": { "ephemeralContainers": add.containers },
    })
}

/// Runs inside `Reconciler::run` (span, metrics, backoff).
pub async fn reconcile(job: Arc<EphemeralJob>, ctx: Arc<Context>) -> Result<Action> {
    let job = job.as_ref();
    let ns = job
        .namespace()
        .ok_or_else(|| Error::MissingObjectKey(job.name_any()))?;
    let api: Api<EphemeralJob> = Api::namespaced(ctx.client.clone(), &ns);
    let has_finalizer = job
        .finalizers()
        .iter()
        .any(|f| f == EPHEMERAL_JOB_FINALIZER);
    if job.metadata.deletion_timestamp.is_some() {
        // Kubernetes does not remove ephemeral containers; upstream's cleanup does
        // nothing either before the finalizer goes.
        if has_finalizer {
            set_finalizer(&api, job, false).await?;
        }
        return Ok(Action::await_change());
    }
    if !has_finalizer {
        set_finalizer(&api, job, true).await?;
    }
    let pods = ctx.pods.store().state();
    let world = World {
        job,
        pods: pods.iter().map(AsRef::as_ref).collect(),
        now: jiff::Timestamp::now(),
    };
    let outcome = plan::plan(&world);
    if outcome.delete_job {
        tracing::info!("ttlSecondsAfterFinished passed: deleting the job");
        match api
            .delete(&job.name_any(), &DeleteParams::background())
            .await
        {
            Err(e) if code(&e) != Some(404) => return Err(e.into()),
            _ => return Ok(Action::await_change()),
        }
    }
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let mut retry = None;
    for add in &outcome.add {
        tracing::info!(pod = %add.pod, "adding ephemeral containers");
        let result = pods_api
            .patch_subresource(
                "ephemeralcontainers",
                &add.pod,
                &PatchParams::default(),
                &Patch::Strategic(add_patch(add)),
            )
            .await;
        match result {
            Ok(_) => {}
            // The Pod moved on (or went) since the cache showed it: plan again.
            Err(e) if matches!(code(&e), Some(404 | 409)) => {
                retry = Some(Duration::from_millis(500));
            }
            Err(e) => {
                let message = plan::create_failed_message(&ns, &add.pod, &e.to_string());
                ctx.events
                    .warning(&job.object_ref(&()), plan::REASON_CREATE_FAILED, message);
                return Err(e.into());
            }
        }
    }
    if let Some(status) = &outcome.status {
        kruise_runtime::apply_status(&api, job, status, CONTROLLER_NAME).await?;
    }
    let next = match (outcome.requeue_after, retry) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Ok(next.map_or_else(Action::await_change, Action::requeue))
}
