//! One reconcile: read the world from the caches (the DaemonSet, its Pods, the Nodes),
//! sync revisions, plan, hand the plan to the shared executor, write status, prune
//! history. It decides nothing itself.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use kruise_api::apps_v1alpha1::DaemonSet;
use kruise_api::pod::Pod;
use kruise_workload::history::{self, RevisionSource};
use kruise_workload::revision::pod_template_revision_data;
use kruise_workload::{Action as WorkloadAction, min_duration};
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::Context;
use crate::error::{Error, Result};
use crate::events::CONTROLLER_NAME;
use crate::plan::{Layout, World, compute_status, plan, target_node};

/// The revision data of the DaemonSet's template, byte for byte what upstream's
/// `getPatch` writes (openkruise/kruise v1.9.0 pkg/controller/daemonset/daemonset_history.go):
/// upstream matches its current revision by these bytes, so after a switch back it keeps
/// the revisions, and the Pods' `controller-revision-hash`, that we wrote.
pub fn revision_data(ds: &DaemonSet) -> serde_json::Result<serde_json::Value> {
    Ok(pod_template_revision_data(&serde_json::to_value(
        &ds.spec.template,
    )?))
}

/// Runs inside `Reconciler::run` (span, metrics, backoff).
pub async fn reconcile(ds: Arc<DaemonSet>, ctx: Arc<Context>) -> Result<Action> {
    let (ds, ctx) = (ds.as_ref(), ctx.as_ref());
    let missing = || Error::MissingObjectKey(ds.name_any());
    let ns = ds.namespace().ok_or_else(missing)?;
    let uid = ds.uid().ok_or_else(missing)?;
    // Not while it is being deleted, nor before the caches show what we did last round.
    let now = jiff::Timestamp::now();
    if let Some(later) = ctx.writer.hold_off_pods(ds, &ctx.pods, now) {
        if ds.metadata.deletion_timestamp.is_some() {
            ctx.failed_backoff.forget(&uid);
        }
        return Ok(later);
    }

    // Owned Pods that stopped matching the selector are released.
    let owner = ds.object_ref(&());
    let (matching, released): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) =
        ctx.pods.owned_by(&uid).into_iter().partition(|p| {
            kruise_ordering::selector::matches(
                &ds.spec.selector,
                p.metadata.labels.as_ref().unwrap_or(&Default::default()),
            )
            .unwrap_or(false)
        });
    if !released.is_empty() {
        let releases = released
            .iter()
            .map(|pod| WorkloadAction::Release { pod })
            .collect();
        ctx.writer.execute(&owner, &uid, releases).await?;
    }

    let status = ds.status.as_ref();
    let revisions = history::sync(
        &ctx.client,
        RevisionSource {
            owner: ds.controller_owner_ref(&()).ok_or_else(missing)?,
            namespace: &ns,
            data: revision_data(ds)?,
            labels: ds
                .spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default(),
            annotations: Default::default(),
            // A DaemonSet has one revision that matters: the current template's.
            current_revision: "",
            collision_count: status.and_then(|s| s.collision_count),
            hash_label: Some(kruise_api::keys::CONTROLLER_REVISION_HASH),
        },
        ctx.revisions.owned_by(&uid),
    )
    .await?;
    let nodes: Vec<Arc<Node>> = ctx.nodes.store().state();
    let world = World {
        ds,
        nodes: nodes.iter().map(AsRef::as_ref).collect(),
        pods: matching.iter().map(AsRef::as_ref).collect(),
        update_revision: &revisions.update,
        revisions: revisions.all.iter().collect(),
        options: ctx.options,
        now,
        failed_backoff: ctx.failed_backoff.of(&uid),
    };

    let planned = plan(&world);
    let requeue = planned.requeue_after;
    for e in &planned.errors {
        tracing::warn!(error = %e, "cannot roll out");
    }
    for action in &planned.actions {
        if let WorkloadAction::Delete { pod, .. } = action
            && kruise_ordering::predicates::phase(pod) == "Failed"
            && let Some(node) = target_node(pod)
        {
            ctx.failed_backoff.failed(&uid, node, now);
        }
    }
    let executed = ctx.writer.carry_out(&owner, &uid, planned).await;

    let previous = status.cloned().unwrap_or_default();
    let layout = Layout::of(&world);
    let next = compute_status(&world, &layout, &previous, revisions.collision_count);
    if next != previous {
        let api: Api<DaemonSet> = Api::namespaced(ctx.client.clone(), &ns);
        kruise_runtime::apply_status(&api, ds, &next, CONTROLLER_NAME).await?;
    }
    let limit = ds.spec.revision_history_limit().max(0) as usize;
    history::truncate_history(&ctx.client, &ns, &revisions, &world.pods, limit).await?;
    let held = executed?.requeue_after();
    Ok(min_duration(requeue, held).map_or_else(Action::await_change, Action::requeue))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against upstream's getPatch for the DaemonSets of tests/parity/inputs.json
    /// (`make parity-fixtures`), as its webhook stores them and as applied.
    #[test]
    fn revision_data_is_upstreams_get_patch() {
        let expected: serde_json::Value =
            serde_json::from_str(include_str!("../../../tests/parity/expected.json")).unwrap();
        let inputs: serde_json::Value =
            serde_json::from_str(include_str!("../../../tests/parity/inputs.json")).unwrap();
        let fixtures = expected["daemonSets"].as_array().unwrap();
        assert!(!fixtures.is_empty());
        for (f, input) in fixtures
            .iter()
            .zip(inputs["daemonSets"].as_array().unwrap())
        {
            for (object, go) in [(&f["stored"], &f["data"]), (input, &f["rawData"])] {
                let ds: DaemonSet = serde_json::from_value(object.clone()).unwrap();
                let data = revision_data(&ds).unwrap();
                assert_eq!(
                    String::from_utf8(kruise_workload::revision::go_json(&data)).unwrap(),
                    go.as_str().unwrap(),
                    "{}",
                    f["name"]
                );
            }
        }
    }
}
