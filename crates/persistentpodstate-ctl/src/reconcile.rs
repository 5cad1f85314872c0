//! The reconciles: read the caches, call the plan, write. They decide nothing.
//!
//! - [`reconcile`]: a PPS's status (one server-side apply, only when it changed).
//! - [`generate_for_statefulset`] / [`generate_for_advanced`]: the PPS a StatefulSet's
//!   annotations ask for (create, replace the spec, or delete the one it controls).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kruise_api::apps_v1alpha1::PersistentPodState;
use kruise_api::apps_v1alpha1::workloadspread::TargetReference;
use kruise_api::apps_v1beta1::StatefulSet as AdvancedStatefulSet;
use kruise_runtime::api_error::{is_conflict, is_not_found};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use crate::Context;
use crate::error::{Error, Result};
use crate::events::CONTROLLER_NAME;
use crate::plan::autogen::Existing;
use crate::plan::{self, AutogenAction, Target, TargetKind, World};

/// The target StatefulSet as the status reconcile reads it: `None` when it is missing or
/// being deleted.
fn target_of(ctx: &Context, pps: &PersistentPodState, ns: &str) -> Option<(String, Target)> {
    let r = &pps.spec.target_ref;
    match plan::target_kind(&r.api_version, &r.kind)? {
        TargetKind::Apps => {
            let sts = ctx
                .statefulsets
                .store()
                .get(&ObjectRef::new(&r.name).within(ns))?;
            if sts.metadata.deletion_timestamp.is_some() {
                return None;
            }
            let spec = sts.spec.as_ref();
            Some((
                sts.metadata.uid.clone()?,
                Target {
                    replicas: spec.and_then(|s| s.replicas).unwrap_or(1),
                    start: spec
                        .and_then(|s| s.ordinals.as_ref())
                        .and_then(|o| o.start)
                        .unwrap_or(0),
                    reserved: Vec::new(),
                },
            ))
        }
        TargetKind::Advanced => {
            let sts = ctx
                .advanced
                .store()
                .get(&ObjectRef::new(&r.name).within(ns))?;
            if sts.metadata.deletion_timestamp.is_some() {
                return None;
            }
            Some((
                sts.metadata.uid.clone()?,
                Target {
                    replicas: sts.spec.replicas(),
                    start: sts.spec.ordinals_start(),
                    reserved: sts.spec.reserved_ordinal_ranges(),
                },
            ))
        }
    }
}

/// One PPS: its status from the target's Pods and their nodes (upstream's `Reconcile` and
/// `getPodState`, openkruise/kruise v1.9.0
/// pkg/controller/persistentpodstate/persistent_pod_state_controller.go).
pub async fn reconcile(pps: Arc<PersistentPodState>, ctx: Arc<Context>) -> Result<Action> {
    let (pps, ctx) = (pps.as_ref(), ctx.as_ref());
    let ns = pps
        .namespace()
        .ok_or_else(|| Error::MissingObjectKey(pps.name_any()))?;
    if pps.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let target = target_of(ctx, pps, &ns);
    let pods = target
        .as_ref()
        .map(|(uid, _)| ctx.pods.owned_by(uid))
        .unwrap_or_default();
    let nodes: Vec<_> = pods
        .iter()
        .map(kruise_ordering::predicates::node_name)
        .filter(|n| !n.is_empty())
        .filter_map(|n| ctx.nodes.store().get(&ObjectRef::new(n)))
        .collect();
    let empty = BTreeMap::new();
    let world = World {
        spec: &pps.spec,
        generation: pps.metadata.generation.unwrap_or_default(),
        current: pps.status.as_ref(),
        target: target.map(|(_, t)| t),
        pods: pods.iter().map(AsRef::as_ref).collect(),
        node_labels: nodes
            .iter()
            .map(|n| {
                (
                    n.metadata.name.as_deref().unwrap_or_default(),
                    n.metadata.labels.as_ref().unwrap_or(&empty),
                )
            })
            .collect(),
    };
    let next = plan::next_status(&world);
    if Some(&next) != pps.status.as_ref() && !ctx.status_writes.already_written(pps, &next) {
        let api: Api<PersistentPodState> = Api::namespaced(ctx.client.clone(), &ns);
        tracing::debug!(states = next.pod_states.len(), "writing status");
        kruise_runtime::apply_status(&api, pps, &next, CONTROLLER_NAME).await?;
        ctx.status_writes.record(pps, next, ctx.ppss.store());
    }
    Ok(Action::await_change())
}

/// What generation reads of a StatefulSet of either kind.
struct Workload<'a> {
    meta: &'a ObjectMeta,
    api_version: &'static str,
}

/// Auto-generation for an apps/v1 StatefulSet.
pub async fn generate_for_statefulset(sts: Arc<StatefulSet>, ctx: Arc<Context>) -> Result<Action> {
    let workload = Workload {
        meta: &sts.metadata,
        api_version: "apps/v1",
    };
    generate(workload, &ctx).await
}

/// Auto-generation for an Advanced StatefulSet.
pub async fn generate_for_advanced(
    sts: Arc<AdvancedStatefulSet>,
    ctx: Arc<Context>,
) -> Result<Action> {
    let workload = Workload {
        meta: &sts.metadata,
        api_version: "apps.kruise.io/v1beta1",
    };
    generate(workload, &ctx).await
}

/// The PPS of the StatefulSet's name, as its annotations ask (upstream's
/// `autoGeneratePersistentPodState`).
async fn generate(workload: Workload<'_>, ctx: &Context) -> Result<Action> {
    let meta = workload.meta;
    let name = meta.name.clone().unwrap_or_default();
    let missing = || Error::MissingObjectKey(format!("StatefulSet {name}"));
    let ns = meta.namespace.clone().ok_or_else(missing)?;
    let uid = meta.uid.clone().ok_or_else(missing)?;
    if meta.deletion_timestamp.is_some() {
        // The garbage collector removes the PPS it controls.
        return Ok(Action::await_change());
    }
    let target = TargetReference {
        api_version: workload.api_version.to_string(),
        kind: plan::STATEFULSET_KIND.to_string(),
        name: name.clone(),
    };
    let wanted = plan::generated_spec(&meta.annotations.clone().unwrap_or_default(), target);
    let existing = ctx.ppss.store().get(&ObjectRef::new(&name).within(&ns));
    let action = plan::autogen_action(
        wanted,
        existing.as_deref().map(|p| Existing {
            spec: &p.spec,
            owned: p
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid),
            deleting: p.metadata.deletion_timestamp.is_some(),
        }),
    );
    let api: Api<PersistentPodState> = Api::namespaced(ctx.client.clone(), &ns);
    match action {
        AutogenAction::Nothing => {}
        AutogenAction::Create(spec) => {
            let pps = PersistentPodState {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(ns.clone()),
                    owner_references: Some(vec![OwnerReference {
                        api_version: workload.api_version.to_string(),
                        kind: plan::STATEFULSET_KIND.to_string(),
                        name: name.clone(),
                        uid,
                        controller: Some(true),
                        block_owner_deletion: None,
                    }]),
                    ..Default::default()
                },
                spec,
                status: None,
            };
            match api.create(&PostParams::default(), &pps).await {
                Ok(_) => tracing::info!("generated PersistentPodState"),
                // The cache had not shown our last create yet.
                Err(e) if is_conflict(&e) => {}
                Err(kube::Error::Api(s)) if s.code == 422 => refused(&s),
                Err(e) => return Err(e.into()),
            }
        }
        AutogenAction::UpdateSpec(spec) => {
            let Some(existing) = existing else {
                return Ok(Action::await_change());
            };
            // The whole spec replaced, on the object the decision saw.
            let patch = json!([
                {"op": "test", "path": "/metadata/uid", "value": existing.uid()},
                {"op": "replace", "path": "/spec", "value": spec},
            ]);
            let patch: json_patch::Patch = serde_json::from_value(patch)?;
            match api
                .patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await
            {
                Ok(_) => tracing::info!("updated the generated PersistentPodState's spec"),
                Err(kube::Error::Api(s)) if s.code == 422 => refused(&s),
                Err(e) => return Err(e.into()),
            }
        }
        AutogenAction::Delete => {
            let Some(existing) = existing else {
                return Ok(Action::await_change());
            };
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: existing.uid(),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) => tracing::info!("deleted the generated PersistentPodState"),
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(Action::await_change())
}

/// Admission refused the generated spec (another PPS already targets the StatefulSet,
/// or the annotations name no usable key): retrying cannot help until the StatefulSet's
/// annotations or the other PPS change, and either change triggers a new round.
fn refused(status: &kube::core::Status) {
    tracing::warn!(reason = %status.message, "the generated PersistentPodState was refused");
}
