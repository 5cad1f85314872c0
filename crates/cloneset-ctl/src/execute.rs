//! Carries out a [`Plan`]: thin I/O around the pure decisions, recording expectations so
//! the next reconcile waits for the cache to catch up.

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod};
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_api::keys;
use kruise_inplace::PodWrites;
use kruise_workload::{Expected, slow_start};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::events;
use crate::plan::{Action, Plan};

/// How many Pod writes (other than creations) run at once.
const CONCURRENT_WRITES: usize = 16;

/// Executes every action; returns the first error (after trying the rest).
pub async fn execute<'a>(ctx: &Context, cs: &CloneSet, plan: Plan<'a>) -> Result<()> {
    let owner = cs.object_ref(&());
    let uid = cs.uid().unwrap_or_default();
    for w in &plan.warnings {
        ctx.control
            .events()
            .warning(&owner, w.reason, w.message.clone());
    }

    let mut creates: Vec<(Pod, Vec<PersistentVolumeClaim>)> = Vec::new();
    let mut others: Vec<Action<'a>> = Vec::new();
    for action in plan.actions {
        tracing::debug!(
            cloneset = %cs.name_any(),
            action = action.kind(),
            pod = %action.pod_name(),
            "planned"
        );
        match action {
            Action::Create { pod, pvcs, .. } => creates.push((*pod, pvcs)),
            other => others.push(other),
        }
    }

    let mut first_error: Option<Error> = None;
    if !creates.is_empty() {
        let (_, errors) =
            slow_start(creates, |(pod, pvcs)| create(ctx, &owner, &uid, pod, pvcs)).await;
        if let Some(e) = errors.into_iter().next() {
            first_error = Some(e);
        }
    }
    // Plain loops rather than a stream of closures: rustc cannot yet prove a closure over
    // `Action<'a>` general enough for the controller's `Send` bound.
    let mut others = others.into_iter();
    loop {
        let mut batch = Vec::new();
        for action in others.by_ref().take(CONCURRENT_WRITES) {
            batch.push(run(ctx, &owner, &uid, action));
        }
        if batch.is_empty() {
            break;
        }
        for result in futures::future::join_all(batch).await {
            if let Err(e) = result {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

async fn create(
    ctx: &Context,
    owner: &ObjectReference,
    uid: &str,
    pod: Pod,
    pvcs: Vec<PersistentVolumeClaim>,
) -> Result<()> {
    let now = jiff::Timestamp::now();
    for pvc in &pvcs {
        ctx.pvc_expectations
            .expect(uid, Expected::Created(pvc.name_any()), now);
        if let Err(e) = ctx.control.create_pvc(owner, pvc).await {
            ctx.pvc_expectations
                .forget_one(uid, &Expected::Created(pvc.name_any()));
            return Err(e.into());
        }
    }
    let created = ctx.control.create_pod(owner, &pod).await?;
    // Recorded with its resourceVersion: if someone deletes the Pod before the cache
    // shows it, the cache moving past that version still releases the owner.
    ctx.pod_expectations.expect(
        uid,
        Expected::CreatedAt {
            name: pod.name_any(),
            resource_version: created.resource_version().unwrap_or_default(),
        },
        now,
    );
    Ok(())
}

async fn run(ctx: &Context, owner: &ObjectReference, uid: &str, action: Action<'_>) -> Result<()> {
    let now = jiff::Timestamp::now();
    match action {
        Action::Create { .. } => Ok(()),
        Action::Delete { pod, pvcs } => {
            ctx.pod_expectations
                .expect(uid, Expected::Deleted(pod.name_any()), now);
            if let Err(e) = ctx.control.delete_pod(owner, pod).await {
                ctx.pod_expectations
                    .forget_one(uid, &Expected::Deleted(pod.name_any()));
                return Err(e.into());
            }
            for pvc in pvcs {
                ctx.pvc_expectations
                    .expect(uid, Expected::Deleted(pvc.name_any()), now);
                ctx.control.delete_pvc(owner, pvc).await?;
            }
            Ok(())
        }
        Action::Lifecycle { pod, transition } => {
            let writes = PodWrites {
                status_patch: transition.status_patch.clone(),
                pod_patch: transition
                    .changes_metadata()
                    .then(|| transition.metadata_patch.clone()),
                requeue_after: None,
            };
            write_pod(ctx, uid, pod, &writes, PatchKind::Merge).await
        }
        Action::MarkRecreate { pod, revision } => {
            let patch = json!({"metadata": {"labels": {keys::SPECIFIED_DELETE: "true"}}});
            let writes = PodWrites {
                pod_patch: Some(patch),
                ..Default::default()
            };
            match write_pod(ctx, uid, pod, &writes, PatchKind::Merge).await {
                Ok(()) => {
                    ctx.control.events().normal(
                        owner,
                        events::SUCCESSFUL_UPDATE_POD_RECREATE,
                        format!("successfully patch pod {} specified-delete for update(revision {revision})", pod.name_any()),
                    );
                    Ok(())
                }
                Err(e) => {
                    ctx.control.events().warning(
                        owner,
                        events::FAILED_UPDATE_POD_RECREATE,
                        format!("failed to patch pod specified-delete {} for update(revision {revision}): {e}", pod.name_any()),
                    );
                    Err(e)
                }
            }
        }
        Action::UpdateInPlace {
            pod,
            writes,
            revision,
        } => match write_pod(ctx, uid, pod, &writes, PatchKind::Strategic).await {
            Ok(()) => {
                ctx.control.count("updated_in_place");
                ctx.control.events().normal(
                    owner,
                    events::EVENT_SUCCESSFUL_UPDATE_POD_IN_PLACE,
                    format!(
                        "successfully update pod {} in-place(revision {revision})",
                        pod.name_any()
                    ),
                );
                Ok(())
            }
            Err(e) => {
                ctx.control.events().warning(
                    owner,
                    events::EVENT_FAILED_UPDATE_POD_IN_PLACE,
                    format!(
                        "failed to update pod {} in-place(revision {revision}): {e}",
                        pod.name_any()
                    ),
                );
                Err(e)
            }
        },
        Action::Refresh { pod, writes } => {
            write_pod(ctx, uid, pod, &writes, PatchKind::Strategic).await
        }
    }
}

async fn send_pod_patch(
    api: &Api<Pod>,
    name: &str,
    patch: &serde_json::Value,
    kind: PatchKind,
) -> kube::Result<Pod> {
    match kind {
        PatchKind::Merge => {
            api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
                .await
        }
        PatchKind::Strategic => {
            api.patch(name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
        }
    }
}

#[derive(Clone, Copy)]
enum PatchKind {
    Merge,
    Strategic,
}

/// Status patch first (a Pod is marked not-ready before it changes), then the Pod patch;
/// the resourceVersion written is recorded so the next round waits to see it.
async fn write_pod(
    ctx: &Context,
    uid: &str,
    pod: &Pod,
    writes: &PodWrites,
    kind: PatchKind,
) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    let name = pod.name_any();
    let mut last_rv = None;
    if let Some(status) = &writes.status_patch {
        let patched = api
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(status))
            .await?;
        last_rv = patched.resource_version();
    }
    if let Some(patch) = &writes.pod_patch {
        let mut patch = patch.clone();
        // The patch is guarded by the resourceVersion we planned against; our own status
        // write just moved it, so carry the new one forward.
        if let (Some(rv), Some(meta)) = (
            &last_rv,
            patch.get_mut("metadata").and_then(|m| m.as_object_mut()),
        ) && meta.contains_key("resourceVersion")
        {
            meta.insert("resourceVersion".into(), json!(rv));
        }
        let patched = match send_pod_patch(&api, &name, &patch, kind).await {
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Someone else (the kubelet, kwok) wrote the Pod since our cache saw it.
                // If only its status moved, our decision still holds: retry once at the
                // new resourceVersion. Otherwise give up and decide again next round.
                let fresh = api.get(&name).await?;
                if fresh.spec != pod.spec
                    || fresh.metadata.labels != pod.metadata.labels
                    || fresh.metadata.annotations != pod.metadata.annotations
                {
                    return Err(kube::Error::Api(s).into());
                }
                if let Some(meta) = patch.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                    meta.insert("resourceVersion".into(), json!(fresh.resource_version()));
                }
                send_pod_patch(&api, &name, &patch, kind).await?
            }
            other => other?,
        };
        last_rv = patched.resource_version();
    }
    if let Some(rv) = last_rv {
        ctx.pod_expectations.expect(
            uid,
            Expected::Updated {
                name,
                resource_version: rv,
            },
            jiff::Timestamp::now(),
        );
    }
    Ok(())
}
