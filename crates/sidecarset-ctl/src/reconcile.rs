//! One reconcile: read the world from the caches, sync revisions, plan, execute, write
//! status.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::{SidecarSet, SidecarSetStatus};
use kruise_api::keys;
use kruise_workload::Observed;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::events::CONTROLLER_NAME;
use crate::execute::{execute, pod_key};
use crate::hash;
use crate::matching;
use crate::plan::{World, plan};
use crate::revisions;

/// How soon to look again while our own Pod writes are not in the cache.
const EXPECTATION_POLL: Duration = Duration::from_secs(1);
/// How soon to look again while the webhook configuration does not cover a new spec.
const COVERAGE_POLL: Duration = Duration::from_millis(200);

pub async fn reconcile(ss: Arc<SidecarSet>, ctx: Arc<Context>) -> Result<Action> {
    ctx.reconciler
        .run(ss.as_ref(), reconcile_inner(&ss, &ctx))
        .await
}

pub fn error_policy(ss: Arc<SidecarSet>, err: &Error, ctx: Arc<Context>) -> Action {
    ctx.reconciler.error_policy(ss.as_ref(), err)
}

async fn reconcile_inner(ss: &SidecarSet, ctx: &Context) -> Result<Action> {
    if !ctx.manages(ss) {
        return Ok(Action::await_change());
    }
    let uid = ss
        .uid()
        .ok_or_else(|| Error::MissingObjectKey(ss.name_any()))?;
    if ss.meta().deletion_timestamp.is_some() {
        ctx.expectations.forget(&uid);
        return Ok(Action::await_change());
    }
    let now = jiff::Timestamp::now();
    let pending = ctx.expectations.pending(&uid, now, |key| {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        Observed::of(
            ctx.pods
                .store()
                .get(&ObjectRef::new(name).within(ns))
                .as_deref(),
        )
    });
    if !pending.is_empty() {
        tracing::debug!(sidecarset = %ss.name_any(), ?pending, "waiting for the cache");
        return Ok(Action::requeue(EXPECTATION_POLL));
    }

    let hashes = hash::hashes_of(ss);
    let mut all_pods = ctx.pods.store().state();
    // A NotUpdate SidecarSet (by default) counts the Pods whose creation woke it as they
    // were created, as upstream's immediate reconcile sees them (crate::wakes).
    let created = ctx.wakes.take_created(&ss.name_any());
    if !created.is_empty() {
        for pod in all_pods.iter_mut() {
            if let Some(then) = pod.metadata.uid.as_deref().and_then(|u| created.get(u)) {
                *pod = then.clone();
            }
        }
    }
    let matched: Vec<&Pod> = all_pods
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| matching::is_matched(ss, p, &ctx.namespaces))
        .collect();

    let name = ss.name_any();
    let existing: Vec<_> = ctx
        .revisions
        .store()
        .state()
        .into_iter()
        .filter(|r| {
            r.metadata.namespace.as_deref() == Some(ctx.revision_namespace.as_str())
                && r.labels().get(keys::SIDECARSET_NAME_LABEL) == Some(&name)
        })
        .collect();
    let existing_refs: Vec<_> = existing.iter().map(AsRef::as_ref).collect();
    let previous = ss.status.clone().unwrap_or_default();
    let collisions = previous.collision_count.unwrap_or(0);
    let revision_plan = revisions::plan_revisions(
        ss,
        &hashes,
        &ctx.revision_namespace,
        &existing_refs,
        &matched,
        collisions,
    );
    let (latest, collisions) = revisions::sync(
        &ctx.client,
        &ctx.revision_namespace,
        revision_plan,
        collisions,
    )
    .await?;

    let world = World {
        ss,
        hashes: &hashes,
        latest_revision: &latest,
        collision_count: collisions,
        pods: matched,
        now,
    };
    let plan = plan(&world);
    if let Some(note) = plan.note {
        tracing::debug!(sidecarset = %name, note, "no (further) upgrades this round");
    }
    for w in &plan.writes {
        tracing::debug!(sidecarset = %name, pod = %pod_key(w.pod), kind = ?w.kind, "planned");
    }
    let executed = execute(ctx, ss, &plan).await;

    let mut status = plan.status.clone();
    // observedGeneration promises that Pods created from now on get this spec: only
    // once the apiserver has been told to send them to the webhook.
    let covered = ctx.coverage.covers(ss);
    if !covered {
        status.observed_generation = previous.observed_generation;
    }
    if status != previous {
        write_status(ctx, ss, &status).await?;
    }
    let held = executed?;
    Ok(if held > 0 {
        // The budget comes back when pub-ctl sees an upgraded Pod available again.
        Action::requeue(kruise_workload::execute::BUDGET_POLL)
    } else if covered {
        Action::await_change()
    } else {
        Action::requeue(COVERAGE_POLL)
    })
}

async fn write_status(ctx: &Context, ss: &SidecarSet, status: &SidecarSetStatus) -> Result<()> {
    let api: Api<SidecarSet> = Api::all(ctx.client.clone());
    kruise_runtime::apply_status(&api, ss, status, CONTROLLER_NAME).await?;
    Ok(())
}
