//! One reconcile: wait for the caches to show the last round's writes, sync the
//! template's ControllerRevision, read the subset workloads, plan, write (reserved labels
//! of Pods, then the workloads), report status, prune history. It decides nothing itself.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_api::apps_v1alpha1::UnitedDeployment;
use kruise_api::keys;
use kruise_runtime::api_error::is_not_found;
use kruise_workload::expectations::Expected;
use kruise_workload::history::{self, RevisionSource};
use kruise_workload::revision;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::events::{
    CONTROLLER_NAME, REASON_DELETE_SUBSET_FAILED, REASON_REVISION_PROVISION_FAILED,
    REASON_SPECIFY_SUBSET_REPLICAS_FAILED, REASON_UPDATE_SUBSET_FAILED,
};
use crate::plan::reserve::ReservedLabel;
use crate::plan::status::{StatusInput, compute_status};
use crate::plan::workload::owner_reference;
use crate::plan::{WorkloadKind, WorkloadRef, World, Write, kept_workloads, plan};
use crate::{Context, expectation_key, pod_expectation_key};

/// Runs inside `Reconciler::run` (span, metrics, backoff).
pub async fn reconcile(ud: Arc<UnitedDeployment>, ctx: Arc<Context>) -> Result<Action> {
    let (ud, ctx) = (ud.as_ref(), ctx.as_ref());
    let missing = || Error::MissingObjectKey(ud.name_any());
    let ns = ud.namespace().ok_or_else(missing)?;
    let uid = ud.uid().ok_or_else(missing)?;
    if ud.meta().deletion_timestamp.is_some() {
        ctx.expectations.forget(&uid);
        return Ok(Action::await_change());
    }
    let now = jiff::Timestamp::now();
    let pending = ctx
        .expectations
        .pending(&uid, now, |key| ctx.observe(&ns, key));
    if !pending.is_empty() {
        tracing::debug!(?pending, "waiting for the caches to show the last writes");
        return Ok(Action::requeue(kruise_workload::execute::EXPECTATION_POLL));
    }
    let owner = ud.object_ref(&());

    let revisions = match sync_revision(ctx, ud, &ns).await {
        Ok(r) => r,
        Err(e) => {
            ctx.events
                .warning(&owner, REASON_REVISION_PROVISION_FAILED, e.to_string());
            return Err(e.into());
        }
    };
    let revision = revisions.update.name_any();

    let observed = ctx.observed_workloads(&uid);
    let pods = ctx.pods.store().state();
    let pods: Vec<_> = pods
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
        .filter(|p| {
            let labels = p.metadata.labels.clone().unwrap_or_default();
            kruise_ordering::selector::matches(&ud.spec.selector, &labels) == Ok(true)
        })
        .collect();
    let world = World {
        ud,
        revision: &revision,
        workloads: observed.iter().collect(),
        pods: pods.clone(),
        now,
    };
    let decision = plan(&world);
    // Reservation: the Pods' reserved labels first (OpenKruise stops the round when one
    // fails); the counts below were decided from the same verdicts.
    for label in &decision.schedulability.labels {
        label_pod(ctx, &ns, &uid, label, now).await?;
    }
    if let Err(e) = &decision.allocation {
        ctx.events
            .warning(&owner, REASON_SPECIFY_SUBSET_REPLICAS_FAILED, e.to_string());
    }
    let mut failures = Vec::new();
    for write in &decision.writes {
        if let Err((reason, message)) = carry_out(ctx, &ns, &uid, write, now).await {
            ctx.events.warning(&owner, reason, message.clone());
            failures.push(message);
        }
    }

    let kept = kept_workloads(&world);
    let status = compute_status(
        &StatusInput {
            ud,
            revision: &revision,
            collision_count: revisions.collision_count,
            kept: &kept,
            pods: &pods,
            failures: &failures,
            now,
        },
        &decision,
    );
    let api: Api<UnitedDeployment> = Api::namespaced(ctx.client.clone(), &ns);
    if ud.status.as_ref() != Some(&status) {
        kruise_runtime::apply_status(&api, ud, &status, CONTROLLER_NAME).await?;
    }
    let limit = ud.spec.revision_history_limit.unwrap_or(10).max(0) as usize;
    history::truncate_history(&ctx.client, &ns, &revisions, &[], limit).await?;
    // Adaptive: look again when a pending Pod reaches the critical time or an
    // unschedulable subset recovers (no event announces either).
    let adaptive_check = decision.schedulability.next_check.map(|t| {
        let wait = t.duration_since(jiff::Timestamp::now());
        Duration::try_from(wait).unwrap_or_default() + Duration::from_millis(100)
    });
    Ok(match (failures.is_empty(), adaptive_check) {
        (false, _) => Action::requeue(Duration::from_secs(5)),
        (true, Some(wait)) => Action::requeue(wait),
        (true, None) => Action::await_change(),
    })
}

/// The revision of the current template (`<ud>-<hash>`), created when new.
async fn sync_revision(
    ctx: &Context,
    ud: &UnitedDeployment,
    ns: &str,
) -> Result<history::Revisions, history::RevisionError> {
    let status = ud.status.clone().unwrap_or_default();
    let owner: OwnerReference = owner_reference(ud);
    let owned = ctx.revisions.owned_by(&owner.uid);
    history::sync(
        &ctx.client,
        RevisionSource {
            owner,
            namespace: ns,
            data: revision_data(ud),
            labels: ud.spec.selector.match_labels.clone().unwrap_or_default(),
            annotations: Default::default(),
            current_revision: &status.current_revision,
            collision_count: status.collision_count,
            hash_label: None,
        },
        owned,
    )
    .await
}

/// The data of the revision of the UnitedDeployment's current template: upstream's
/// `getUnitedDeploymentPatch` bytes (openkruise/kruise v1.9.0
/// pkg/controller/uniteddeployment/revision.go), so a UnitedDeployment keeps the revision
/// name kruise-manager gave it (the subset workloads' Pods carry it in
/// `controller-revision-hash`). The template serializes as read: a v1beta1-shaped
/// `cloneSetTemplate` exactly as stored, the others through their types, whose fields
/// Go's types do not have are dropped again by the normalization.
///
/// One thing the types add: k8s-openapi writes `apiVersion: v1` and `kind:
/// PersistentVolumeClaim` on every `volumeClaimTemplates` entry, which Go writes only
/// when they were stored. They are taken out again, which is right for entries written
/// without them (as the Kubernetes StatefulSet examples are); for entries stored with
/// them the name differs from upstream's, but upstream's revision is still found and
/// kept ([`revision::equal_data`] sets them aside).
pub fn revision_data(ud: &UnitedDeployment) -> Value {
    let mut template = serde_json::to_value(&ud.spec.template).unwrap_or_default();
    revision::drop_claim_type_meta(&mut template, "statefulSetTemplate");
    revision::drop_claim_type_meta(&mut template, "advancedStatefulSetTemplate");
    // A v1beta1-shaped CloneSet template serializes as stored.
    let cloneset = ud.spec.template.clone_set_template.as_ref();
    if cloneset.is_some_and(|t| !t.is_v1beta1()) {
        revision::drop_claim_type_meta(&mut template, "cloneSetTemplate");
    }
    revision::ud_template_revision_data(&template)
}

fn api_for(ctx: &Context, ns: &str, kind: WorkloadKind) -> Api<DynamicObject> {
    let (group, version) = kind
        .api_version()
        .split_once('/')
        .unwrap_or(("", kind.api_version()));
    let resource = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: kind.api_version().into(),
        kind: kind.kind().into(),
        plural: kind.plural().into(),
    };
    Api::namespaced_with(ctx.client.clone(), ns, &resource)
}

fn kind_of(object: &Value) -> Option<WorkloadKind> {
    WorkloadKind::ALL
        .into_iter()
        .find(|k| object["apiVersion"] == k.api_version() && object["kind"] == k.kind())
}

/// One write, recorded in the expectations; on failure the event reason and message.
async fn carry_out(
    ctx: &Context,
    ns: &str,
    uid: &str,
    write: &Write,
    now: jiff::Timestamp,
) -> Result<(), (&'static str, String)> {
    let expect = |kind: WorkloadKind, what: fn(String, String) -> Expected, obj: &DynamicObject| {
        let name = obj.name_any();
        let rv = obj.resource_version().unwrap_or_default();
        ctx.expectations
            .expect(uid, what(expectation_key(kind, &name), rv), now);
    };
    match write {
        Write::Create { subset, object } => {
            let kind = kind_of(object).ok_or_else(|| {
                (
                    REASON_UPDATE_SUBSET_FAILED,
                    "the planned workload names no known kind".to_string(),
                )
            })?;
            let obj: DynamicObject = serde_json::from_value(object.clone())
                .map_err(|e| (REASON_UPDATE_SUBSET_FAILED, e.to_string()))?;
            let created = api_for(ctx, ns, kind)
                .create(&PostParams::default(), &obj)
                .await
                .map_err(|e| {
                    (
                        REASON_UPDATE_SUBSET_FAILED,
                        format!("failed to create subset {subset}: {e}"),
                    )
                })?;
            expect(
                kind,
                |name, resource_version| Expected::CreatedAt {
                    name,
                    resource_version,
                },
                &created,
            );
            tracing::info!(subset, workload = %created.name_any(), "created subset workload");
        }
        Write::Replace {
            subset,
            workload,
            object,
        } => {
            let obj: DynamicObject = serde_json::from_value(object.clone())
                .map_err(|e| (REASON_UPDATE_SUBSET_FAILED, e.to_string()))?;
            let replaced = api_for(ctx, ns, workload.kind)
                .replace(&workload.name, &PostParams::default(), &obj)
                .await
                .map_err(|e| failed_update(subset, workload, e))?;
            expect(
                workload.kind,
                |name, resource_version| Expected::Updated {
                    name,
                    resource_version,
                },
                &replaced,
            );
            tracing::info!(subset, workload = %workload.name, "updated subset workload to the new revision");
        }
        Write::Scale {
            subset,
            workload,
            patch,
        } => {
            let patched = api_for(ctx, ns, workload.kind)
                .patch(
                    &workload.name,
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
                .map_err(|e| failed_update(subset, workload, e))?;
            expect(
                workload.kind,
                |name, resource_version| Expected::Updated {
                    name,
                    resource_version,
                },
                &patched,
            );
            tracing::info!(subset, workload = %workload.name, %patch, "scaled subset workload");
        }
        Write::Delete { workload, reason } => {
            let params = DeleteParams::background();
            match api_for(ctx, ns, workload.kind)
                .delete(&workload.name, &params)
                .await
            {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => {
                    return Err((
                        REASON_DELETE_SUBSET_FAILED,
                        format!("failed to delete {}: {e}", workload.name),
                    ));
                }
            }
            ctx.expectations.expect(
                uid,
                Expected::Deleted(expectation_key(workload.kind, &workload.name)),
                now,
            );
            tracing::info!(workload = %workload.name, ?reason, "deleted subset workload");
        }
    }
    Ok(())
}

/// Writes a Pod's `apps.kruise.io/united-deployment-reserved-pod` label (a merge patch
/// of that label alone), recorded in the expectations; a Pod already gone is skipped.
async fn label_pod(
    ctx: &Context,
    ns: &str,
    uid: &str,
    label: &ReservedLabel,
    now: jiff::Timestamp,
) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let patch = json!({"metadata": {"labels": {(keys::UD_RESERVED_POD): label.value()}}});
    match api
        .patch(&label.pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(pod) => {
            ctx.expectations.expect(
                uid,
                Expected::Updated {
                    name: pod_expectation_key(&label.pod),
                    resource_version: pod.resource_version().unwrap_or_default(),
                },
                now,
            );
            tracing::info!(pod = %label.pod, reserved = label.reserved, "labelled pod");
            Ok(())
        }
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn failed_update(subset: &str, workload: &WorkloadRef, e: kube::Error) -> (&'static str, String) {
    (
        REASON_UPDATE_SUBSET_FAILED,
        format!("failed to update subset {subset} ({}): {e}", workload.name),
    )
}

/// Revision names of the UnitedDeployments in tests/parity/inputs.json against what
/// OpenKruise v1.9.0's own functions compute (tests/parity, `make parity-fixtures`:
/// uniteddeployment/revision.go getUnitedDeploymentPatch and history.NewControllerRevision),
/// for the object as upstream stored it (read through our conversion to v1alpha1, as this
/// controller reads it) and as applied. Equal names: a switch between kruise-manager and
/// this controller creates no revision and writes no subset Pod.
#[cfg(test)]
mod parity {
    use super::*;
    use k8s_openapi::api::apps::v1::ControllerRevision;
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
    use kruise_workload::revision::{equal_data, go_json, hash, revision_name};

    fn read(object: &Value) -> UnitedDeployment {
        let v1alpha1 = kruise_api::conversion::convert_uniteddeployment(
            object.clone(),
            "apps.kruise.io/v1alpha1",
        )
        .unwrap();
        serde_json::from_value(v1alpha1).unwrap()
    }

    #[test]
    fn revision_names_equal_upstreams() {
        let expected: Value =
            serde_json::from_str(include_str!("../../../tests/parity/expected.json")).unwrap();
        let inputs: Value =
            serde_json::from_str(include_str!("../../../tests/parity/inputs.json")).unwrap();
        let fixtures = expected["unitedDeployments"].as_array().unwrap();
        let inputs = inputs["unitedDeployments"].as_array().unwrap();
        assert_eq!(fixtures.len(), inputs.len());
        assert!(fixtures.len() >= 3);
        for (f, input) in fixtures.iter().zip(inputs) {
            let name = f["name"].as_str().unwrap();
            let cc = f["collisionCount"].as_i64().unwrap_or(0) as i32;
            for (object, want_data, want_name) in [
                (&f["stored"], &f["data"], &f["revision"]),
                (input, &f["rawData"], &f["rawRevision"]),
            ] {
                let ud = read(object);
                let data = revision_data(&ud);
                assert_eq!(
                    revision_name(name, &hash(&data, cc)),
                    want_name.as_str().unwrap(),
                    "{name}"
                );
                assert_eq!(
                    String::from_utf8(go_json(&data)).unwrap(),
                    want_data.as_str().unwrap(),
                    "{name}"
                );
                // The revision an earlier version of this controller made of the same
                // template (its data not normalized) is kept: upgrading rolls no Pod.
                let template = serde_json::to_value(&ud.spec.template).unwrap();
                let before = ControllerRevision {
                    data: Some(RawExtension(revision::revision_data(&template))),
                    ..Default::default()
                };
                assert!(equal_data(&before, &data), "{name}: earlier revision");
            }
        }
    }
}
