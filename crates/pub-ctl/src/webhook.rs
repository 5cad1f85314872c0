//! Admission served by `pub-ctl`:
//!
//! - **PUB validation** (`/validate-policy-kruise-io-v1alpha1-podunavailablebudget`,
//!   CREATE/UPDATE): openkruise/kruise v1.9.0 pkg/webhook/podunavailablebudget/validating/pub_create_update_handler.go, and both PUB gates off rejects every PUB.
//! - **Pod mutation** (`/mutate-pod-pub`, pods CREATE): writes `kruise.io/related-pub`
//!   (openkruise/kruise v1.9.0 pkg/control/pubcontrol/pub_control.go). `failurePolicy: Ignore`: a Pod created while `pub-ctl` is down misses
//!   the annotation only until the controller's next reconcile patches it on.
//! - **Pod validation** (`/validate-pod-pub`, pods DELETE/UPDATE and pods/eviction
//!   CREATE): openkruise/kruise v1.9.0 pkg/control/pubcontrol/pub_control_utils.go. `failurePolicy: Fail`: a budget that silently stops counting
//!   while its controller is down would let a drain or a rollout take every Pod down at
//!   once, which is what a PUB exists to prevent. The blast radius is kept small by
//!   scope: `matchConditions` send DELETE and UPDATE only for Pods carrying
//!   `kruise.io/related-pub`, kube-system and the controller's own namespace are never
//!   sent, and namespace-scoped installs see only their namespace. Evictions (whose
//!   object is an Eviction, not the Pod) are all sent, and refused while `pub-ctl` is
//!   unreachable: a drain then waits, as it does for a PodDisruptionBudget it cannot
//!   satisfy.
//! - **CRD conversion** (`/convert-podunavailablebudget`): `policy.kruise.io/v1beta1`
//!   (OpenKruise ≥ 1.9 stores it) served from the stored v1alpha1 and back
//!   ([`kruise_api::conversion::podunavailablebudget`]); registered by cluster-wide
//!   instances.

use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::api::admissionregistration::v1::MatchCondition;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_api::policy_v1alpha1::{PodUnavailableBudget, PubOperation};
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::config::{
    mutating_configuration, mutating_webhook, rule, validating_configuration, validating_webhook,
};
use kruise_runtime::webhook::{
    AdmissionRequest, AdmissionResponse, HandlerError, OnFailure, Operation, Route, decode,
    deny_forbidden, deny_invalid, dynamic, json_patch,
};
use kube::api::Api;
use kube::core::DynamicObject;
use kube::runtime::reflector::ObjectRef;

use crate::decision::{self, Precheck};
use crate::reconcile::pod_reference;
use crate::{Context, events, matching, podstate, validation, workload};
use kruise_pub::Spent;

pub const VALIDATE_PUB_PATH: &str = "/validate-policy-kruise-io-v1alpha1-podunavailablebudget";
pub const MUTATE_POD_PATH: &str = "/mutate-pod-pub";
pub const VALIDATE_POD_PATH: &str = "/validate-pod-pub";
/// The CRD conversion webhook (v1alpha1 ⇄ v1beta1), registered by cluster-wide instances.
pub const CONVERT_PATH: &str = kruise_api::conversion::path::PODUNAVAILABLEBUDGET;

fn internal(e: impl std::fmt::Display) -> HandlerError {
    HandlerError::Internal(e.to_string())
}

pub fn routes(ctx: Arc<Context>) -> Vec<Route> {
    let (validate_pub, mutate, validate_pod) = (ctx.clone(), ctx.clone(), ctx);
    vec![
        Route::new(
            VALIDATE_PUB_PATH,
            "validate-podunavailablebudget",
            dynamic(move |req| {
                let ctx = validate_pub.clone();
                async move { validate_pub_request(&ctx, req) }
            }),
        ),
        Route::new(
            MUTATE_POD_PATH,
            "pub-related-pod",
            dynamic(move |req| {
                let ctx = mutate.clone();
                async move { mutate_pod(&ctx, req).await }
            }),
        )
        .on_failure(OnFailure::Allow),
        Route::new(
            VALIDATE_POD_PATH,
            "pub-validate-pod",
            dynamic(move |req| {
                let ctx = validate_pod.clone();
                async move { validate_pod_request(&ctx, req).await }.boxed()
            }),
        ),
        conversion_route(),
    ]
}

/// v1beta1 clients (and objects OpenKruise 1.9 stored as v1beta1) are served through
/// conversion; pub-ctl and the workload controllers read v1alpha1.
pub fn conversion_route() -> Route {
    Route::conversion(
        CONVERT_PATH,
        "convert-podunavailablebudget",
        "podunavailablebudgets.policy.kruise.io",
        Arc::new(kruise_api::conversion::convert_podunavailablebudget),
    )
}

/// The configurations, as `webhook::configurations(None)` registers them cluster-wide.
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    let pub_rule = rule(
        "policy.kruise.io",
        &["v1alpha1"],
        &["podunavailablebudgets"],
        &["CREATE", "UPDATE"],
        "Namespaced",
    );
    let mut pod_hook = validating_webhook(
        "vpod-pub.kb.io",
        VALIDATE_POD_PATH,
        vec![
            rule("", &["v1"], &["pods"], &["DELETE", "UPDATE"], "Namespaced"),
            rule("", &["v1"], &["pods/eviction"], &["CREATE"], "Namespaced"),
        ],
    );
    // It writes the PUB's status (the disruption it admits), never for a dry run.
    pod_hook.side_effects = "NoneOnDryRun".into();
    pod_hook.match_conditions = Some(vec![MatchCondition {
        name: "protected-pod-or-eviction".into(),
        expression: format!(
            "(has(request.subResource) && request.subResource == 'eviction') || (has(oldObject.metadata.annotations) && '{}' in oldObject.metadata.annotations)",
            keys::PUB_RELATED
        ),
    }]);
    let validating = validating_configuration(
        "kruise-pub",
        watch_namespace,
        vec![
            validating_webhook(
                "vpodunavailablebudget.kb.io",
                VALIDATE_PUB_PATH,
                vec![pub_rule],
            ),
            pod_hook,
        ],
    );
    let mut mutate = mutating_webhook(
        "mpod-pub.kb.io",
        MUTATE_POD_PATH,
        vec![rule("", &["v1"], &["pods"], &["CREATE"], "Namespaced")],
    );
    mutate.failure_policy = Some("Ignore".into());
    let mutating = mutating_configuration("kruise-pub", watch_namespace, vec![mutate]);
    (vec![validating], vec![mutating])
}

fn validate_pub_request(
    ctx: &Context,
    req: AdmissionRequest<DynamicObject>,
) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(&req);
    if !ctx.options.protect_delete && !ctx.options.protect_update {
        return Ok(deny_forbidden(response, validation::GATES_OFF_MSG));
    }
    let req = decode::<PodUnavailableBudget>(req)?;
    let Some(pub_) = &req.object else {
        return Ok(response);
    };
    let others: Vec<PodUnavailableBudget> = ctx
        .pubs
        .store()
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == req.namespace.as_deref())
        .map(|p| (*p).clone())
        .collect();
    let old = req
        .old_object
        .as_ref()
        .filter(|_| req.operation == Operation::Update);
    let errors = validation::validate(pub_, old, &others);
    Ok(if errors.is_empty() {
        response
    } else {
        deny_invalid(response, &errors)
    })
}

/// Pod CREATE: name the Pod's PUB in `kruise.io/related-pub`.
async fn mutate_pod(
    ctx: &Context,
    req: AdmissionRequest<DynamicObject>,
) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(&req);
    let namespace = req.namespace.clone().unwrap_or_default();
    let req = decode::<Pod>(req)?;
    let Some(mut pod) = req.object else {
        return Ok(response);
    };
    pod.metadata.namespace.get_or_insert(namespace.clone());
    let pubs: Vec<Arc<PodUnavailableBudget>> = ctx
        .pubs
        .store()
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(namespace.as_str()))
        .collect();
    if pubs.is_empty() {
        return Ok(response);
    }
    let owner = if pubs.iter().any(|p| p.spec.target_ref.is_some()) {
        workload::pod_owner(&ctx.client, &ctx.replicasets, &pod).await
    } else {
        None
    };
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let Some(chosen) = matching::pub_for_pod(pubs.iter().map(Arc::as_ref), &labels, owner.as_ref())
    else {
        return Ok(response);
    };
    let name = chosen.metadata.name.clone().unwrap_or_default();
    if decision::related_pub(&pod) == Some(name.as_str()) {
        return Ok(response);
    }
    let mut ops = Vec::new();
    if pod.metadata.annotations.is_none() {
        ops.push(serde_json::json!({"op": "add", "path": "/metadata/annotations", "value": {}}));
    }
    ops.push(serde_json::json!({
        "op": "add",
        "path": format!("/metadata/annotations/{}", keys::PUB_RELATED.replace('~', "~0").replace('/', "~1")),
        "value": name,
    }));
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::Value::Array(ops)).map_err(internal)?;
    response.with_patch(patch).map_err(internal)
}

/// What a Pod request asks, or `None` when it cannot make the Pod unavailable.
async fn classify(
    ctx: &Context,
    req: &AdmissionRequest<DynamicObject>,
) -> Result<Option<(PubOperation, Pod)>, HandlerError> {
    let as_pod = |o: &Option<DynamicObject>| -> Result<Option<Pod>, HandlerError> {
        o.as_ref()
            .map(|o| serde_json::to_value(o).and_then(serde_json::from_value::<Pod>))
            .transpose()
            .map_err(|e| HandlerError::Decode(format!("Pod: {e}")))
    };
    let sub = req.sub_resource.as_deref().unwrap_or_default();
    match (&req.operation, sub) {
        (Operation::Delete, "") => Ok(as_pod(&req.old_object)?.map(|p| (PubOperation::Delete, p))),
        (Operation::Create, "eviction") => {
            let namespace = req.namespace.as_deref().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
            let pod = api.get_opt(&req.name).await.map_err(internal)?;
            Ok(pod.map(|p| (PubOperation::Evict, p)))
        }
        (Operation::Update, "") => {
            let (Some(old), Some(new)) = (as_pod(&req.old_object)?, as_pod(&req.object)?) else {
                return Ok(None);
            };
            Ok(podstate::classify_update(&old, &new).map(|op| (op, old)))
        }
        _ => Ok(None),
    }
}

/// A dry run: the request's own flag (`?dryRun=All`), or an eviction's
/// `deleteOptions.dryRun` — `kubectl drain --dry-run=server` sets only the latter, and
/// the apiserver fills the review's `dryRun` from the query alone. Any value counts, as
/// `dryrun.IsDryRun` in openkruise/kruise v1.9.0 pkg/webhook/pod/validating/pod_unavailable_budget.go.
fn is_dry_run(req: &AdmissionRequest<DynamicObject>) -> bool {
    req.dry_run || eviction_dry_run(req.object.as_ref())
}

fn eviction_dry_run(object: Option<&DynamicObject>) -> bool {
    object
        .and_then(|o| o.data.get("deleteOptions"))
        .and_then(|d| d.get("dryRun"))
        .and_then(|d| d.as_array())
        .is_some_and(|a| !a.is_empty())
}

async fn validate_pod_request(
    ctx: &Context,
    req: AdmissionRequest<DynamicObject>,
) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(&req);
    let Some((op, pod)) = classify(ctx, &req).await? else {
        return Ok(response);
    };
    match admit(ctx, &pod, op, is_dry_run(&req)).await? {
        None => Ok(response),
        Some(denial) => Ok(deny_forbidden(response, denial.message())),
    }
}

/// As in openkruise/kruise v1.9.0 pkg/control/pubcontrol/pub_control_utils.go for one Pod: `None` to allow (the Pod recorded in the PUB's status first when
/// it spends budget), `Some(denial)` to refuse. Dry runs decide but never write.
pub async fn admit(
    ctx: &Context,
    pod: &Pod,
    op: PubOperation,
    dry_run: bool,
) -> Result<Option<decision::Denial>, HandlerError> {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let cached = decision::related_pub(pod).and_then(|name| {
        ctx.pubs
            .store()
            .get(&ObjectRef::<PodUnavailableBudget>::new(name).within(&namespace))
    });
    let pub_name = match decision::precheck(pod, op, cached.as_deref(), ctx.options) {
        Precheck::Allow(pass) => {
            tracing::debug!(pod = ?pod.metadata.name, ?pass, "pub: allowed without spending");
            return Ok(None);
        }
        Precheck::Spend(name) => name.to_string(),
    };
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let api: Api<PodUnavailableBudget> = Api::namespaced(ctx.client.clone(), &namespace);
    let lock = ctx.lock_for(&namespace, &pub_name);
    let mut last_written = lock.lock().await;
    let cached = ctx
        .pubs
        .store()
        .get(&ObjectRef::<PodUnavailableBudget>::new(&pub_name).within(&namespace))
        .map(|p| (*p).clone());
    let Some(newest) = newer(cached, last_written.clone()) else {
        return Ok(None); // the PUB is gone
    };
    match kruise_pub::spend(&api, newest, &pod_name, op, dry_run)
        .await
        .map_err(internal)?
    {
        Spent::Allowed { written } => {
            if let Some(written) = written {
                *last_written = Some(*written);
            }
            Ok(None)
        }
        Spent::Denied(denial) => {
            if denial.warns_pod() && !dry_run {
                ctx.events.warning(
                    &pod_reference(pod),
                    events::EVENT_PUB_PREVENT_POD_DELETION,
                    events::EVENT_PUB_PREVENT_POD_DELETION_MSG,
                );
            }
            Ok(Some(denial))
        }
    }
}

/// The newer of two copies of a PUB by resourceVersion (etcd revisions, compared as
/// numbers; a copy that does not parse loses).
fn newer(
    a: Option<PodUnavailableBudget>,
    b: Option<PodUnavailableBudget>,
) -> Option<PodUnavailableBudget> {
    let rv = |p: &PodUnavailableBudget| {
        p.metadata
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_validation_is_scoped_to_protected_pods_and_evictions() {
        let (validating, mutating) = configurations(None);
        let hooks = validating[0].webhooks.as_ref().unwrap();
        let pod = hooks.iter().find(|w| w.name == "vpod-pub.kb.io").unwrap();
        assert_eq!(pod.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(pod.side_effects, "NoneOnDryRun");
        let condition = &pod.match_conditions.as_ref().unwrap()[0].expression;
        assert!(condition.contains("'kruise.io/related-pub' in oldObject.metadata.annotations"));
        let resources: Vec<_> = pod
            .rules
            .iter()
            .flatten()
            .flat_map(|r| r.resources.clone().unwrap_or_default())
            .collect();
        assert_eq!(resources, ["pods", "pods/eviction"]);
        let m = &mutating[0].webhooks.as_ref().unwrap()[0];
        assert_eq!(m.failure_policy.as_deref(), Some("Ignore"));
    }

    #[test]
    fn an_eviction_is_a_dry_run_when_its_delete_options_say_so() {
        let eviction = |options: serde_json::Value| -> DynamicObject {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "web-0"}, "deleteOptions": options}))
            .unwrap()
        };
        assert!(eviction_dry_run(Some(&eviction(
            serde_json::json!({"dryRun": ["All"]})
        ))));
        assert!(!eviction_dry_run(Some(&eviction(
            serde_json::json!({"dryRun": []})
        ))));
        assert!(!eviction_dry_run(Some(&eviction(
            serde_json::json!({"gracePeriodSeconds": 0})
        ))));
        assert!(!eviction_dry_run(None));
    }

    #[test]
    fn the_newer_copy_wins() {
        let at = |rv: &str| {
            let mut p = PodUnavailableBudget::new("p", Default::default());
            p.metadata.resource_version = Some(rv.into());
            p
        };
        let pick = newer(Some(at("100")), Some(at("99"))).unwrap();
        assert_eq!(pick.metadata.resource_version.as_deref(), Some("100"));
        let pick = newer(Some(at("5")), Some(at("12"))).unwrap();
        assert_eq!(pick.metadata.resource_version.as_deref(), Some("12"));
        assert!(newer(None, None).is_none());
    }
}
