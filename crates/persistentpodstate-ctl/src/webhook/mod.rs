//! Admission served by `persistentpodstate-ctl`:
//!
//! - **PPS validation** (`/validate-apps-kruise-io-v1alpha1-persistentpodstate`, CREATE/UPDATE): as
//!   openkruise/kruise v1.9.0
//!   pkg/webhook/persistentpodstate/validating/persistent_create_update_handler.go.
//!   `failurePolicy: Fail`: an invalid PPS must not be stored, and with the controller down only
//!   PPS writes wait.
//! - **Pod injection** (`/mutate-pod-persistentpodstate`, pods CREATE only): as openkruise/kruise
//!   v1.9.0 pkg/webhook/pod/mutating/persistent_pod_state.go. Scoped to Pods with a controller
//!   ownerReference of kind StatefulSet (a `matchConditions` expression) in the instance's
//!   namespaces. `failurePolicy: Ignore` (and the route allows when it cannot decide): the affinity
//!   is a placement hint recorded by this controller, and a Fail policy would stop every
//!   StatefulSet Pod in the cluster from being created while the controller is unreachable,
//!   including those of StatefulSets no PPS targets. A Pod admitted during an outage is scheduled
//!   as if it were new; its state is recorded again once it runs.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MatchCondition;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::PersistentPodState;
use kruise_api::keys;
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::config::{
    mutating_configuration, mutating_webhook, rule, validating_configuration, validating_webhook,
};
use kruise_runtime::webhook::field::{FieldError, forbidden, invalid, invalid_detail};
use kruise_runtime::webhook::{
    AdmissionRequest, AdmissionResponse, HandlerError, OnFailure, Operation, Route, deny_invalid,
    dynamic,
};
use kube::core::DynamicObject;

use crate::Context;
use crate::plan::{self, affinity};

pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-persistentpodstate";
pub const POD_PATH: &str = "/mutate-pod-persistentpodstate";

/// Only Pods a StatefulSet controls reach the Pod webhook.
pub const POD_MATCH_CONDITION: &str = "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller && r.kind == 'StatefulSet')";

fn internal(e: impl std::fmt::Display) -> HandlerError {
    HandlerError::Internal(e.to_string())
}

/// The routes, sharing the controller's PPS cache.
pub fn routes(ctx: Arc<Context>) -> Vec<Route> {
    let (pods, validate) = (ctx.clone(), ctx);
    vec![
        Route::new(
            VALIDATE_PATH,
            "validate-persistentpodstate",
            dynamic(move |req| {
                let ctx = validate.clone();
                async move {
                    synced(&ctx).await?;
                    let others = ctx.ppss.store().state();
                    review_pps(req, &others)
                }
            }),
        ),
        Route::new(
            POD_PATH,
            "persistentpodstate-inject",
            dynamic(move |req| {
                let ctx = pods.clone();
                async move {
                    synced(&ctx).await?;
                    let ppss = ctx.ppss.store().state();
                    review_pod(req, &ppss)
                }
            }),
        )
        .on_failure(OnFailure::Allow),
        conversion_route(),
    ]
}

/// The CRD conversion webhook (v1alpha1 ⇄ v1beta1), registered by cluster-wide instances.
pub const CONVERT_PATH: &str = kruise_api::conversion::path::PERSISTENTPODSTATE;

/// v1beta1 clients are served through conversion (stored and reconciled: v1alpha1).
pub fn conversion_route() -> Route {
    Route::conversion(
        CONVERT_PATH,
        "convert-persistentpodstate",
        "persistentpodstates.apps.kruise.io",
        std::sync::Arc::new(kruise_api::conversion::convert_persistentpodstate),
    )
}

/// The PPS cache has listed (right after a start it may not have yet).
async fn synced(ctx: &Context) -> Result<(), HandlerError> {
    match tokio::time::timeout(Duration::from_secs(2), ctx.ppss.store().wait_until_ready()).await {
        Ok(Ok(())) => Ok(()),
        _ => Err(internal(
            "the PersistentPodState cache has not synced yet; retry",
        )),
    }
}

/// Validation of `pps` (`old` on UPDATE) against the other PPSs of the cache (as
/// `validatingPersistentPodStateFn` in openkruise/kruise v1.9.0
/// pkg/webhook/persistentpodstate/validating/persistent_create_update_handler.go).
pub fn validate(
    pps: &PersistentPodState,
    old: Option<&PersistentPodState>,
    others: &[Arc<PersistentPodState>],
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = &pps.spec;
    let r = &spec.target_ref;
    let shown = format!(
        "{{apiVersion: {:?}, kind: {:?}, name: {:?}}}",
        r.api_version, r.kind, r.name
    );
    if r.api_version.is_empty() || r.kind.is_empty() || r.name.is_empty() {
        errors.push(invalid(
            "spec.targetRef",
            &shown,
            keys::PPS_MSG_EMPTY_TARGET_REF,
        ));
    }
    if plan::target_kind(&r.api_version, &r.kind).is_none() {
        errors.push(invalid(
            "spec.targetRef",
            &shown,
            keys::PPS_MSG_KIND_NOT_ALLOWED,
        ));
    }
    if spec.required_persistent_topology.is_none() && spec.preferred_persistent_topology.is_empty()
    {
        errors.push(invalid_detail("spec", keys::PPS_MSG_NO_TOPOLOGY));
    }
    for (i, term) in spec.preferred_persistent_topology.iter().enumerate() {
        if !(1..=100).contains(&term.weight) {
            errors.push(invalid(
                format!("spec.preferredPersistentTopology[{i}].weight"),
                term.weight,
                "must be in the range 1-100",
            ));
        }
    }
    if let Some(old) = old
        && old.spec.target_ref != *r
    {
        errors.push(forbidden("spec.targetRef", keys::PPS_MSG_IMMUTABLE));
    }
    let namespace = pps.metadata.namespace.as_deref();
    if let Some(other) = others.iter().find(|o| {
        o.metadata.namespace.as_deref() == namespace
            && o.metadata.name != pps.metadata.name
            && plan::same_target(&o.spec.target_ref, r)
    }) {
        errors.push(invalid(
            "spec.targetRef",
            &shown,
            format!(
                "{}{}",
                keys::PPS_MSG_TARGET_REF_CONFLICT,
                other.metadata.name.as_deref().unwrap_or_default()
            ),
        ));
    }
    errors
}

/// The PPS review: decode, validate, answer 422 with the field errors.
pub fn review_pps(
    req: AdmissionRequest<DynamicObject>,
    others: &[Arc<PersistentPodState>],
) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(&req);
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Ok(response);
    }
    let decode = |o: &DynamicObject| {
        serde_json::to_value(o).and_then(serde_json::from_value::<PersistentPodState>)
    };
    let Some(object) = &req.object else {
        return Ok(response);
    };
    let mut pps = match decode(object) {
        Ok(pps) => pps,
        Err(e) => {
            return Ok(deny_invalid(
                response,
                &[invalid_detail(
                    "spec",
                    format!("cannot decode PersistentPodState: {e}"),
                )],
            ));
        }
    };
    if pps.metadata.namespace.as_deref().is_none_or(str::is_empty) {
        pps.metadata.namespace = req.namespace.clone();
    }
    let old = match (&req.operation, &req.old_object) {
        (Operation::Update, Some(o)) => decode(o).ok(),
        _ => None,
    };
    // A write that leaves the spec alone (labels, finalizers, the garbage collector's
    // ownerReference changes) is not re-judged: the spec was admitted already.
    if old.as_ref().is_some_and(|o| o.spec == pps.spec) {
        return Ok(response);
    }
    let errors = validate(&pps, old.as_ref(), others);
    Ok(if errors.is_empty() {
        response
    } else {
        deny_invalid(response, &errors)
    })
}

/// The PPS of a Pod: the one in its namespace targeting its controller StatefulSet
/// (group, kind and name), not being deleted.
pub fn pps_of<'a>(
    pod: &Pod,
    ppss: &'a [Arc<PersistentPodState>],
) -> Option<&'a PersistentPodState> {
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))?;
    plan::target_kind(&owner.api_version, &owner.kind)?;
    let namespace = pod.metadata.namespace.as_deref();
    ppss.iter().map(AsRef::as_ref).find(|p| {
        p.metadata.namespace.as_deref() == namespace
            && p.metadata.deletion_timestamp.is_none()
            && plan::group_of(&p.spec.target_ref.api_version) == plan::group_of(&owner.api_version)
            && p.spec.target_ref.kind == owner.kind
            && p.spec.target_ref.name == owner.name
    })
}

/// Pod CREATE: the recorded state of a Pod of this name, as node affinity (upstream's
/// `persistentPodStateMutatingPod` and `createNodeAffinity`).
pub fn review_pod(
    req: AdmissionRequest<DynamicObject>,
    ppss: &[Arc<PersistentPodState>],
) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(&req);
    if req.operation != Operation::Create
        || req.sub_resource.as_deref().is_some_and(|s| !s.is_empty())
    {
        return Ok(response);
    }
    let Some(object) = &req.object else {
        return Ok(response);
    };
    let raw = serde_json::to_value(object).map_err(internal)?;
    let mut pod: Pod = serde_json::from_value(raw)
        .map_err(|e| HandlerError::Decode(format!("object as Pod: {e}")))?;
    if pod.metadata.namespace.as_deref().is_none_or(str::is_empty) {
        pod.metadata.namespace = req.namespace.clone();
    }
    let Some(name) = pod.metadata.name.clone().filter(|n| !n.is_empty()) else {
        return Ok(response);
    };
    let Some(pps) = pps_of(&pod, ppss) else {
        return Ok(response);
    };
    let Some(injection) = pps
        .status
        .as_ref()
        .and_then(|s| s.pod_states.get(&name))
        .and_then(|state| affinity::injection(&pps.spec, state))
    else {
        return Ok(response);
    };
    let before = serde_json::to_value(&pod).map_err(internal)?;
    affinity::apply(
        &mut pod,
        pps.metadata.name.as_deref().unwrap_or_default(),
        &injection,
    );
    let after = serde_json::to_value(&pod).map_err(internal)?;
    tracing::debug!(pod = %name, pps = ?pps.metadata.name, "injecting persistent node affinity");
    response
        .with_patch(json_patch::diff(&before, &after))
        .map_err(internal)
}

/// The configurations, named and labelled for the scope.
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    let validate = validating_webhook(
        "vpersistentpodstate.kb.io",
        VALIDATE_PATH,
        vec![rule(
            "apps.kruise.io",
            &["v1alpha1"],
            &["persistentpodstates"],
            &["CREATE", "UPDATE"],
            "Namespaced",
        )],
    );
    let mut inject = mutating_webhook(
        "mpersistentpodstate-pod.kruise.io",
        POD_PATH,
        vec![rule("", &["v1"], &["pods"], &["CREATE"], "Namespaced")],
    );
    inject.match_conditions = Some(vec![MatchCondition {
        name: "controlled-by-statefulset".into(),
        expression: POD_MATCH_CONDITION.into(),
    }]);
    inject.failure_policy = Some("Ignore".into());
    inject.reinvocation_policy = Some("Never".into());
    // The handler reads a cache: a stuck call should give up quickly (Ignore admits).
    inject.timeout_seconds = Some(5);
    (
        vec![validating_configuration(
            "kruise-persistentpodstate",
            watch_namespace,
            vec![validate],
        )],
        vec![mutating_configuration(
            "kruise-persistentpodstate",
            watch_namespace,
            vec![inject],
        )],
    )
}

#[cfg(test)]
mod tests;
