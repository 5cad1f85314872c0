//! Admission served by `workloadspread-ctl`:
//!
//! - **WorkloadSpread validation** (`/validate-apps-kruise-io-v1alpha1-workloadspread`,
//!   CREATE/UPDATE): openkruise/kruise v1.9.0 pkg/webhook/workloadspread/validating/workloadspread_validation.go ([`validation`]). `failurePolicy: Fail`: an invalid spec
//!   must not be stored; with the controller down only WorkloadSpread writes wait.
//! - **Pod placement** (`/mutate-pod-workloadspread`, pods CREATE): openkruise/kruise v1.9.0 pkg/util/workloadspread/workloadspread.go. Picks
//!   the subset, records the Pod in the WorkloadSpread's status (a PUT guarded by the
//!   resourceVersion, read again and retried on conflict, one Pod at a time per
//!   WorkloadSpread in this process), then injects the subset. Scoped by
//!   `matchConditions` to Pods with a controller owner (of any kind: custom workloads
//!   allow-listed in `kruise-configuration` are targets too). `failurePolicy: Ignore`: a Fail
//!   policy would stop every ReplicaSet, Job, CloneSet and StatefulSet Pod of the cluster
//!   from being created while `workloadspread-ctl` is unreachable, including those of
//!   workloads no WorkloadSpread targets. A Pod admitted during an outage is placed by
//!   the scheduler alone; once it runs, the controller matches it to the subset its node
//!   belongs to (while that subset has room) and its pod-deletion-cost makes it the
//!   first to go on scale-in if it landed outside every subset. When the handler itself
//!   cannot record the Pod (the status kept conflicting), it refuses the Pod instead:
//!   the workload retries the creation, and no subset is overfilled.
//! - **Pod deletion bookkeeping** (`/validate-pod-workloadspread`, pods DELETE and
//!   pods/eviction CREATE): openkruise/kruise v1.9.0 pkg/util/workloadspread/workloadspread.go, records `deletingPods` so the freed room is
//!   usable before the controller sees the Pod go. It never refuses; `failurePolicy:
//!   Ignore` (a missed record only delays the room until the controller counts again).
//!   DELETE is sent only for Pods carrying `apps.kruise.io/matched-workloadspread`.
//!
//! Both Pod webhooks declare `sideEffects: NoneOnDryRun`: they write the WorkloadSpread's
//! status, except for a dry run, which is answered (placement included) without a write.
//!
//! Counted in `kruise_pod_operations_total{controller="workloadspread-controller"}`
//! (dry runs excepted): `placed` (a subset chosen), `no_room` (created unchanged),
//! `status_conflict` (a status write that must be read again), `refused_conflict` (every
//! attempt conflicted), `deletion_recorded`.

pub mod validation;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MatchCondition;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps_v1alpha1::{InjectWorkloadSpread, WorkloadSpread, WorkloadSpreadStatus};
use kruise_api::keys;
use kruise_ordering::predicates;
use kruise_runtime::api_error::is_not_found;
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::config::{
    mutating_configuration, mutating_webhook, rule, validating_configuration, validating_webhook,
};
use kruise_runtime::webhook::field::invalid_detail;
use kruise_runtime::webhook::{
    AdmissionRequest, AdmissionResponse, HandlerError, OnFailure, Operation, Route, deny_invalid,
    dynamic,
};
use kube::api::{Api, PostParams};
use kube::core::DynamicObject;
use kube::runtime::reflector::ObjectRef;

use crate::error::is_conflict;
use crate::plan::subset::{self, NewPod};
use crate::plan::target::{TargetKind, pod_version};
use crate::plan::{inject, matched};
use crate::{Context, workload};

pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-workloadspread";
pub const MUTATE_POD_PATH: &str = "/mutate-pod-workloadspread";
pub const VALIDATE_POD_PATH: &str = "/validate-pod-workloadspread";

/// Only Pods with a controller: any kind may be an allow-listed custom workload (or one of
/// its sub-resources), and the allowlist can change at any time, so the kind is judged
/// by the handler, which answers at once in a namespace without WorkloadSpreads.
pub const POD_CREATE_CONDITION: &str = "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller)";

/// Status write attempts before refusing the Pod.
const WRITE_ATTEMPTS: usize = 5;
/// Wait between attempts (the other writer is usually the controller, done in a moment).
const RETRY_DELAY: Duration = Duration::from_millis(50);

fn count(ctx: &Context, operation: &str) {
    ctx.metrics
        .pod_operation(crate::events::CONTROLLER_NAME, operation);
}

fn internal(e: impl std::fmt::Display) -> HandlerError {
    HandlerError::Internal(e.to_string())
}

pub fn routes(ctx: Arc<Context>) -> Vec<Route> {
    let (validate, mutate, delete) = (ctx.clone(), ctx.clone(), ctx);
    vec![
        Route::new(
            VALIDATE_PATH,
            "validate-workloadspread",
            dynamic(move |req| {
                let ctx = validate.clone();
                async move { validate_ws(&ctx, req).await }
            }),
        ),
        Route::new(
            MUTATE_POD_PATH,
            "workloadspread-place-pod",
            dynamic(move |req| {
                let ctx = mutate.clone();
                async move { place_pod(&ctx, req).await }
            }),
        )
        .on_failure(OnFailure::Allow),
        Route::new(
            VALIDATE_POD_PATH,
            "workloadspread-pod-deletion",
            dynamic(move |req| {
                let ctx = delete.clone();
                async move { record_pod_deletion(&ctx, req).await }
            }),
        )
        .on_failure(OnFailure::Allow),
        conversion_route(),
    ]
}

/// The CRD conversion webhook (v1alpha1 ⇄ v1beta1), registered by cluster-wide instances.
pub const CONVERT_PATH: &str = kruise_api::conversion::path::WORKLOADSPREAD;

/// v1beta1 clients are served through conversion (stored and reconciled: v1alpha1).
pub fn conversion_route() -> Route {
    Route::conversion(
        CONVERT_PATH,
        "convert-workloadspread",
        "workloadspreads.apps.kruise.io",
        std::sync::Arc::new(kruise_api::conversion::convert_workloadspread),
    )
}

/// The configurations, named and labelled for the scope.
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    let ws = validating_webhook(
        "vworkloadspread.kb.io",
        VALIDATE_PATH,
        vec![rule(
            "apps.kruise.io",
            &["v1alpha1"],
            &["workloadspreads"],
            &["CREATE", "UPDATE"],
            "Namespaced",
        )],
    );
    let mut deletion = validating_webhook(
        "vpod-workloadspread.kb.io",
        VALIDATE_POD_PATH,
        vec![
            rule("", &["v1"], &["pods"], &["DELETE"], "Namespaced"),
            rule("", &["v1"], &["pods/eviction"], &["CREATE"], "Namespaced"),
        ],
    );
    deletion.match_conditions = Some(vec![MatchCondition {
        name: "placed-pod-or-eviction".into(),
        expression: format!(
            "(has(request.subResource) && request.subResource == 'eviction') || (has(oldObject.metadata.annotations) && '{}' in oldObject.metadata.annotations)",
            keys::WS_MATCHED
        ),
    }]);
    deletion.failure_policy = Some("Ignore".into());
    deletion.side_effects = "NoneOnDryRun".into();
    let mut place = mutating_webhook(
        "mpod-workloadspread.kb.io",
        MUTATE_POD_PATH,
        vec![rule("", &["v1"], &["pods"], &["CREATE"], "Namespaced")],
    );
    place.match_conditions = Some(vec![MatchCondition {
        name: "controlled-by-a-workload".into(),
        expression: POD_CREATE_CONDITION.into(),
    }]);
    place.failure_policy = Some("Ignore".into());
    place.side_effects = "NoneOnDryRun".into();
    place.reinvocation_policy = Some("Never".into());
    (
        vec![validating_configuration(
            "kruise-workloadspread",
            watch_namespace,
            vec![ws, deletion],
        )],
        vec![mutating_configuration(
            "kruise-workloadspread",
            watch_namespace,
            vec![place],
        )],
    )
}

/// The WorkloadSpread cache has listed (right after a start it may not have yet).
async fn synced(ctx: &Context) -> Result<(), HandlerError> {
    match tokio::time::timeout(Duration::from_secs(2), ctx.wss.store().wait_until_ready()).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(internal(
            "the WorkloadSpread cache has not synced yet; retry",
        )),
    }
}

async fn validate_ws(
    ctx: &Context,
    req: AdmissionRequest<DynamicObject>,
) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(&req);
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Ok(response);
    }
    synced(ctx).await?;
    let decode = |o: &DynamicObject| {
        serde_json::to_value(o).and_then(serde_json::from_value::<WorkloadSpread>)
    };
    let Some(object) = &req.object else {
        return Ok(response);
    };
    let mut ws = match decode(object) {
        Ok(ws) => ws,
        Err(e) => {
            return Ok(deny_invalid(
                response,
                &[invalid_detail(
                    "spec",
                    format!("cannot decode WorkloadSpread: {e}"),
                )],
            ));
        }
    };
    if ws.metadata.namespace.as_deref().is_none_or(str::is_empty) {
        ws.metadata.namespace = req.namespace.clone();
    }
    let old = match (&req.operation, &req.old_object) {
        (Operation::Update, Some(o)) => decode(o).ok(),
        _ => None,
    };
    // A write that leaves the spec alone (status, labels, finalizers) is not re-judged.
    if old.as_ref().is_some_and(|o| o.spec == ws.spec) {
        return Ok(response);
    }
    let all = ctx.wss.store().state();
    let others: Vec<&WorkloadSpread> = all.iter().map(AsRef::as_ref).collect();
    // The allowlist is read only for a target that is not built in: it is what decides
    // whether that kind is permitted. A ConfigMap that cannot be read refuses it.
    let allowlist = if TargetKind::needs_allowlist(&ws.spec.target_ref) {
        match workload::allowlist(ctx).await {
            Ok(list) => list,
            Err(e) => return Err(internal(e)),
        }
    } else {
        Default::default()
    };
    let errors = validation::validate(&ws, old.as_ref(), &others, &allowlist);
    Ok(if errors.is_empty() {
        response
    } else {
        deny_invalid(response, &errors)
    })
}

/// The newer of two copies by resourceVersion (etcd revisions compared as numbers).
fn newer(a: Option<WorkloadSpread>, b: Option<WorkloadSpread>) -> Option<WorkloadSpread> {
    let rv = |w: &WorkloadSpread| {
        w.metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    match (a, b) {
        (Some(a), Some(b)) => Some(if rv(&b) > rv(&a) { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// A random id for a Pod created with only `generateName` (UUID v4 form).
fn generated_uid() -> String {
    let b: [u8; 16] = rand::random();
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// The status a decision writes: none for a dry run, whose answer (and Pod patch) is the
/// real request's but which leaves the WorkloadSpread as it was.
fn to_write(status: Option<WorkloadSpreadStatus>, dry_run: bool) -> Option<WorkloadSpreadStatus> {
    status.filter(|_| !dry_run)
}

/// Writes the status `decide` computes from the newest WorkloadSpread, retrying on
/// conflict. `decide` returns `(outcome, status to write)`; `Ok(outcome)` once written
/// (or nothing to write), `Err(())` when every attempt conflicted.
async fn with_status_write<T>(
    ctx: &Context,
    namespace: &str,
    name: &str,
    dry_run: bool,
    mut decide: impl FnMut(&WorkloadSpread) -> Option<(T, Option<WorkloadSpreadStatus>)>,
) -> Result<Result<Option<T>, ()>, HandlerError> {
    let api: Api<WorkloadSpread> = Api::namespaced(ctx.client.clone(), namespace);
    let lock = ctx.lock_for(namespace, name);
    let mut last_written = lock.lock().await;
    let mut fresh: Option<WorkloadSpread> = None;
    for attempt in 0..WRITE_ATTEMPTS {
        let newest = match fresh.take() {
            Some(ws) => ws,
            None => {
                let cached = ctx
                    .wss
                    .store()
                    .get(&ObjectRef::<WorkloadSpread>::new(name).within(namespace))
                    .map(|w| (*w).clone());
                match newer(cached, last_written.clone()) {
                    Some(ws) => ws,
                    None => return Ok(Ok(None)),
                }
            }
        };
        let Some((outcome, status)) = decide(&newest) else {
            return Ok(Ok(None));
        };
        let Some(status) = to_write(status, dry_run) else {
            return Ok(Ok(Some(outcome)));
        };
        let mut next = newest;
        next.status = Some(status);
        match api
            .replace_status(name, &PostParams::default(), &next)
            .await
        {
            Ok(written) => {
                *last_written = Some(written);
                return Ok(Ok(Some(outcome)));
            }
            Err(e) if is_conflict(&e) => {
                count(ctx, "status_conflict");
                tracing::debug!(attempt, ws = %name, "workloadspread status conflict; reading again");
                tokio::time::sleep(RETRY_DELAY * (attempt as u32 + 1)).await;
                fresh = Some(api.get(name).await.map_err(internal)?);
            }
            Err(e) if is_not_found(&e) => return Ok(Ok(None)),
            Err(e) => return Err(internal(e)),
        }
    }
    Ok(Err(()))
}

/// Pod CREATE (openkruise/kruise v1.9.0 pkg/util/workloadspread/workloadspread.go).
async fn place_pod(
    ctx: &Context,
    req: AdmissionRequest<DynamicObject>,
) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(&req);
    if !ctx.enabled
        || req.operation != Operation::Create
        || req.sub_resource.as_deref().is_some_and(|s| !s.is_empty())
    {
        return Ok(response);
    }
    let Some(object) = &req.object else {
        return Ok(response);
    };
    let mut raw = serde_json::to_value(object).map_err(internal)?;
    let mut pod: Pod = serde_json::from_value(raw.clone())
        .map_err(|e| HandlerError::Decode(format!("object as Pod: {e}")))?;
    let namespace = req.namespace.clone().unwrap_or_default();
    pod.metadata.namespace = Some(namespace.clone());
    if !predicates::is_active(&pod) || matched(&pod).is_some() {
        return Ok(response);
    }
    synced(ctx).await?;
    // Most Pods live where no WorkloadSpread is: answer those without reading anything.
    let ns = Some(namespace.as_str());
    if !ctx
        .wss
        .store()
        .state()
        .iter()
        .any(|w| w.metadata.namespace.as_deref() == ns)
    {
        return Ok(response);
    }
    let chain = workload::owner_chain_fresh(ctx, &pod).await;
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let Some(ws) = workload::ws_for_chain(ctx.wss.store(), &namespace, &chain, &labels) else {
        return Ok(response);
    };
    let Some(kind) = workload::target_kind(ctx, &ws).await else {
        return Ok(response);
    };
    let replicas = workload::replicas(ctx, &namespace, &ws, kind)
        .await
        .unwrap_or(0);
    let ws_name = ws.metadata.name.clone().unwrap_or_default();
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let version = pod_version(&pod, kind);
    let uid = generated_uid();
    let now = Time(jiff::Timestamp::now());
    let new_pod = NewPod {
        name: &pod_name,
        version: &version,
        generated_uid: &uid,
    };
    let placed = with_status_write(ctx, &namespace, &ws_name, req.dry_run, |ws| {
        subset::place(ws, kind, replicas, &new_pod, now.clone()).map(|p| {
            let status = p.status.clone();
            ((p, ws.spec.subsets.clone()), status)
        })
    })
    .await?;
    let (placement, subsets) = match placed {
        Ok(Some(p)) => p,
        Ok(None) => {
            if !req.dry_run {
                count(ctx, "no_room");
            }
            tracing::debug!(pod = %pod_name, ws = %ws_name, "no subset has room; Pod unchanged");
            return Ok(response);
        }
        Err(()) => {
            count(ctx, "refused_conflict");
            // 409, as for any write that lost a race: the workload controller retries.
            let mut denied = response.deny(format!(
                "WorkloadSpread {ws_name}: the subset could not be recorded (the status kept changing); retry"
            ));
            denied.result.code = 409;
            denied.result.reason = "Conflict".into();
            return Ok(denied);
        }
    };
    let subset = &subsets[placement.subset];
    let annotation = InjectWorkloadSpread {
        name: ws_name.clone(),
        subset: subset.name.clone(),
        uid: placement.generated_uid.clone().unwrap_or_default(),
    };
    if !req.dry_run {
        count(ctx, "placed");
    }
    let before = raw.clone();
    inject::inject(&mut raw, subset, &annotation);
    tracing::debug!(pod = %pod_name, ws = %ws_name, subset = %subset.name, "placed Pod");
    response
        .with_patch(json_patch::diff(&before, &raw))
        .map_err(internal)
}

/// An eviction's `deleteOptions.dryRun` (what `kubectl drain --dry-run=server` sets; the
/// review's own `dryRun` follows only the `?dryRun` query).
fn eviction_dry_run(object: Option<&DynamicObject>) -> bool {
    object
        .and_then(|o| o.data.get("deleteOptions"))
        .and_then(|d| d.get("dryRun"))
        .and_then(|d| d.as_array())
        .is_some_and(|a| !a.is_empty())
}

/// Pod DELETE or eviction (openkruise/kruise v1.9.0 pkg/util/workloadspread/workloadspread.go): records `deletingPods`; always allows.
async fn record_pod_deletion(
    ctx: &Context,
    req: AdmissionRequest<DynamicObject>,
) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(&req);
    let namespace = req.namespace.clone().unwrap_or_default();
    let sub = req.sub_resource.as_deref().unwrap_or_default();
    // A dry run is allowed without recording anything, as upstream's Pod validating
    // webhook does (openkruise/kruise v1.9.0 pkg/webhook/pod/validating/workloadspread.go).
    if !ctx.enabled || req.dry_run || eviction_dry_run(req.object.as_ref()) {
        return Ok(response);
    }
    let pod: Option<Pod> = match (&req.operation, sub) {
        (Operation::Delete, "") => req
            .old_object
            .as_ref()
            .map(|o| serde_json::to_value(o).and_then(serde_json::from_value))
            .transpose()
            .map_err(|e| HandlerError::Decode(format!("oldObject as Pod: {e}")))?,
        (Operation::Create, "eviction") => ctx
            .pods
            .store()
            .get(&ObjectRef::<Pod>::new(&req.name).within(&namespace))
            .map(|p| (*p).clone()),
        _ => None,
    };
    let Some(pod) = pod else {
        return Ok(response);
    };
    let Some(m) = matched(&pod) else {
        return Ok(response);
    };
    if !predicates::is_active(&pod)
        || workload::controller_of(pod.metadata.owner_references.as_deref()).is_none()
    {
        return Ok(response);
    }
    let Some(ws) = ctx
        .wss
        .store()
        .get(&ObjectRef::<WorkloadSpread>::new(&m.name).within(&namespace))
    else {
        return Ok(response);
    };
    let Some(kind) = workload::target_kind(ctx, &ws).await else {
        return Ok(response);
    };
    let replicas = workload::replicas(ctx, &namespace, &ws, kind)
        .await
        .unwrap_or(0);
    let version = pod_version(&pod, kind);
    let pod_name = predicates::name(&pod).to_string();
    let now = Time(jiff::Timestamp::now());
    let written = with_status_write(ctx, &namespace, &m.name, false, |ws| {
        subset::record_deletion(
            ws,
            kind,
            replicas,
            &m.subset,
            &pod_name,
            &version,
            now.clone(),
        )
        .map(|status| ((), Some(status)))
    })
    .await;
    match written {
        Ok(Ok(Some(()))) => count(ctx, "deletion_recorded"),
        Ok(Ok(None)) => {}
        _ => tracing::warn!(pod = %pod_name, ws = %m.name, "could not record the Pod's deletion"),
    }
    Ok(response)
}

#[cfg(test)]
mod tests;
