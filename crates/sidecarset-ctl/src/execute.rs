//! Carries out a [`Plan`]: Pod patches guarded by resourceVersion, condition patches,
//! events, and the expectations that make the next round wait for the cache.

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kruise_api::apps_v1alpha1::SidecarSet;
use kruise_workload::{Expected, PatchKind, Written};
use kube::{Resource, ResourceExt};
use serde_json::Value;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::events;
use crate::plan::{Plan, PodWrite, WriteKind};

/// The expectation key of a Pod: SidecarSets span namespaces.
pub fn pod_key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

/// Executes every write; returns the first error (after trying the rest), or how many Pods
/// a PodUnavailableBudget held back (`pub-ctl`'s webhook refused their sidecar change).
pub async fn execute(ctx: &Context, ss: &SidecarSet, plan: &Plan<'_>) -> Result<usize> {
    let owner = ss.object_ref(&());
    let uid = ss.uid().unwrap_or_default();
    let mut first_error = None;

    let mut marked = 0;
    for (pod, patch) in &plan.not_upgradable {
        match status_patch(ctx, pod, patch).await {
            Ok(rv) => {
                marked += 1;
                expect(ctx, &uid, pod, rv);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if marked > 0 {
        ctx.control.events().normal(
            &owner,
            events::EVENT_NOT_UPGRADABLE_PODS,
            format!("SidecarSet in-place update detected {marked} not upgradable pod(s) in this round, will skip them."),
        );
    }

    let (held, error) = kruise_workload::bounded(&plan.writes, |w| async {
        match write(ctx, &owner, &uid, w).await {
            Ok(()) => Ok(Written::Done),
            Err(Error::Kube(e)) if kruise_pub::is_refusal(&e) => Ok(Written::HeldByBudget),
            Err(e) => Err(e),
        }
    })
    .await;
    first_error.or(error).map_or(Ok(held), Err)
}

fn expect(ctx: &Context, uid: &str, pod: &Pod, resource_version: Option<String>) {
    if let Some(rv) = resource_version {
        ctx.expectations.expect(
            uid,
            Expected::Updated {
                name: pod_key(pod),
                resource_version: rv,
            },
            jiff::Timestamp::now(),
        );
    }
}

async fn write(ctx: &Context, owner: &ObjectReference, uid: &str, w: &PodWrite<'_>) -> Result<()> {
    let pod_ref = w.pod.object_ref(&());
    let result = async {
        let mut rv = pod_patch(ctx, w.pod, &w.pod_patch).await?;
        if let Some(status) = &w.status_patch {
            rv = status_patch(ctx, w.pod, status).await?.or(rv);
        }
        Ok::<_, crate::error::Error>(rv)
    }
    .await;
    match (&result, w.kind) {
        (Ok(rv), kind) => {
            expect(ctx, uid, w.pod, rv.clone());
            if !w.images.is_empty() {
                ctx.control.count("updated_in_place");
            }
            if kind == WriteKind::Reset {
                ctx.control.events().normal(
                    &pod_ref,
                    events::EVENT_RESET_CONTAINER_SUCCEED,
                    "reset sidecar container image empty successfully",
                );
            }
            tracing::info!(pod = %pod_key(w.pod), kind = ?w.kind, images = ?w.images, "pod sidecars written");
        }
        (Err(e), WriteKind::Reset) => ctx.control.events().warning(
            &pod_ref,
            events::EVENT_RESET_CONTAINER_FAILED,
            format!("reset sidecar container image empty failed: {e}"),
        ),
        (Err(Error::Kube(e)), WriteKind::Upgrade) if kruise_pub::is_refusal(e) => {
            tracing::info!(pod = %pod_key(w.pod), "sidecar upgrade held by a PodUnavailableBudget: {e}");
        }
        (Err(e), WriteKind::Upgrade) => ctx.control.events().warning(
            owner,
            events::FAILED_UPDATE_POD_SIDECAR,
            format!("failed to update sidecars of pod {}: {e}", pod_key(w.pod)),
        ),
    }
    result.map(|_| ())
}

async fn status_patch(ctx: &Context, pod: &Pod, patch: &Value) -> Result<Option<String>> {
    Ok(ctx.control.patch_pod_status(pod, patch).await?)
}

/// The strategic-merge Pod patch, guarded by the resourceVersion the plan saw (a
/// conflict caused only by the kubelet's status writes is retried by the control, which
/// compares Pods as the workload caches see them).
async fn pod_patch(ctx: &Context, pod: &Pod, patch: &Value) -> Result<Option<String>> {
    let view = kruise_api::pod::Pod::from(pod);
    Ok(ctx
        .control
        .patch_pod(&view, patch, PatchKind::Strategic)
        .await?)
}
