//! The Pod CREATE webhook (as upstream's `containerLaunchPriorityInitialization`, openkruise/kruise
//! v1.9.0 pkg/webhook/pod/mutating/container_launch_priority_initialization.go): gives the
//! containers of a Pod that asks for a launch order their barrier env, or refuses a Pod whose
//! `KRUISE_CONTAINER_PRIORITY` is not an integer in range.
//!
//! Scope: `failurePolicy: Fail` (a Pod that asked for an order must not start its
//! containers unordered), so the apiserver calls it only for Pods that asked, through a
//! `matchConditions` expression: more than one container and the `Ordered` annotation or
//! a `KRUISE_CONTAINER_PRIORITY` env. No other Pod creation depends on this binary.
//!
//! Order against SidecarSet injection (after it, as in upstream's
//! pkg/webhook/pod/mutating/pod_create_update_handler.go, so an injected sidecar gets its barrier
//! too): mutating configurations are called in the order of their names, and ours,
//! `kruise-sidecarset-z-launchpriority-mutating`, sorts after `kruise-sidecarset-mutating`.
//! `reinvocationPolicy: IfNeeded` covers any other webhook that adds a container after us: the
//! apiserver calls us again and the barriers are recomputed (the injection is idempotent).

use k8s_openapi::api::admissionregistration::v1::MatchCondition;
use kruise_api::keys;
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::{
    AdmissionRequest, AdmissionResponse, HandlerError, Operation, Route, deny_invalid, dynamic,
    json_objects, json_patch,
};
use kube::core::DynamicObject;
use rand::Rng;

use crate::priority::{self, Decision};

pub const POD_PATH: &str = "/mutate-pod-container-launch-priority";
/// Base of the configuration's name: sorts after `kruise-sidecarset-mutating`.
pub const CONFIGURATION_BASE: &str = "kruise-sidecarset-z-launchpriority";
pub const WEBHOOK_NAME: &str = "mcontainerlaunchpriority.kruise.io";
pub const CONDITION_NAME: &str = "asks-for-a-launch-order";

pub fn routes() -> Vec<Route> {
    vec![Route::new(
        POD_PATH,
        "container-launch-priority",
        dynamic(|req| {
            std::future::ready(mutate_pod(&req, &mut || random_suffix(&mut rand::rng())))
        }),
    )]
}

/// Five characters from the apiserver's name-generator alphabet (no vowels, no
/// look-alikes), as a name it would have generated.
fn random_suffix(rng: &mut impl Rng) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Pod CREATE: barriers, a refusal, or nothing.
pub fn mutate_pod(
    req: &AdmissionRequest<DynamicObject>,
    suffix: &mut dyn FnMut() -> String,
) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(req);
    if req.operation != Operation::Create
        || req.sub_resource.as_deref().is_some_and(|s| !s.is_empty())
    {
        return Ok(response);
    }
    let (Some(pod), _) = json_objects(req)? else {
        return Ok(response);
    };
    match priority::decide(&pod) {
        Decision::Untouched => Ok(response),
        Decision::Invalid(errors) => Ok(deny_invalid(response, &errors)),
        Decision::Barriers(priorities) => {
            let name = match priority::pod_name(&pod) {
                Some(n) => n.to_string(),
                None => priority::generated_name(&pod, &suffix()),
            };
            let patched = priority::with_barriers(&pod, &name, &priorities);
            let patch = json_patch::diff(&pod, &patched);
            if patch.0.is_empty() {
                return Ok(response);
            }
            response
                .with_patch(patch)
                .map_err(|e| HandlerError::Internal(e.to_string()))
        }
    }
}

/// The CEL condition: true for exactly the Pods [`priority::decide`] may act on.
pub fn match_condition() -> MatchCondition {
    let annotation = keys::CONTAINER_LAUNCH_PRIORITY;
    MatchCondition {
        name: CONDITION_NAME.into(),
        expression: format!(
            "size(object.spec.containers) > 1 && (\
             (has(object.metadata.annotations) && '{annotation}' in object.metadata.annotations \
             && object.metadata.annotations['{annotation}'] == '{ordered}') || \
             object.spec.containers.exists(c, has(c.env) && c.env.exists(e, e.name == '{env}')))",
            ordered = keys::CONTAINER_LAUNCH_PRIORITY_ORDERED,
            env = keys::KRUISE_CONTAINER_PRIORITY,
        ),
    }
}

/// The one mutating configuration, named and scoped for the instance.
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    use kruise_runtime::webhook::config::{mutating_configuration, mutating_webhook, rule};
    let mut hook = mutating_webhook(
        WEBHOOK_NAME,
        POD_PATH,
        vec![rule("", &["v1"], &["pods"], &["CREATE"], "Namespaced")],
    );
    hook.match_conditions = Some(vec![match_condition()]);
    hook.reinvocation_policy = Some("IfNeeded".into());
    // The handler is pure and answers in microseconds: a stuck call should fail the
    // create quickly rather than hold a workload controller.
    hook.timeout_seconds = Some(5);
    (
        Vec::new(),
        vec![mutating_configuration(
            CONFIGURATION_BASE,
            watch_namespace,
            vec![hook],
        )],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn review(pod: Value) -> AdmissionRequest<DynamicObject> {
        let review: kube::core::admission::AdmissionReview<DynamicObject> =
            serde_json::from_value(json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {
                    "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "operation": "CREATE", "namespace": "ns", "name": "",
                    "userInfo": {}, "object": pod,
                }
            }))
            .unwrap();
        review.try_into().unwrap()
    }

    fn apply(pod: &Value, response: &AdmissionResponse) -> Value {
        let patch: json_patch::Patch =
            serde_json::from_slice(response.patch.as_ref().expect("a patch")).unwrap();
        let mut out = pod.clone();
        json_patch::patch(&mut out, &patch).unwrap();
        out
    }

    #[test]
    fn a_generate_name_pod_gets_a_name_and_matching_barriers() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "web-", "annotations": {"apps.kruise.io/container-launch-priority": "Ordered"}},
            "spec": {"containers": [{"name": "sidecar", "image": "i"}, {"name": "main", "image": "i"}]},
        });
        let response = mutate_pod(&review(pod.clone()), &mut || "abcde".into()).unwrap();
        assert!(response.allowed);
        let out = apply(&pod, &response);
        assert_eq!(out["metadata"]["name"], "web-abcde");
        assert_eq!(
            out["spec"]["containers"][1]["env"][0]["valueFrom"]["configMapKeyRef"],
            json!({"name": "web-abcde-barrier", "key": "p_-1"})
        );
    }

    #[test]
    fn a_bad_priority_is_refused_naming_the_field() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [
                {"name": "a", "image": "i", "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": "first"}]},
                {"name": "b", "image": "i"},
            ]},
        });
        let response = mutate_pod(&review(pod), &mut || unreachable!()).unwrap();
        assert!(!response.allowed);
        assert_eq!(response.result.code, 422);
        assert!(
            response
                .result
                .message
                .contains("spec.containers[0].env[0].value: Invalid value: \"first\""),
            "{}",
            response.result.message
        );
    }

    #[test]
    fn untouched_pods_get_no_patch() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a", "image": "i"}, {"name": "b", "image": "i"}]},
        });
        let response = mutate_pod(&review(pod), &mut || unreachable!()).unwrap();
        assert!(response.allowed && response.patch.is_none());
    }

    #[test]
    fn the_configuration_sorts_after_sidecarset_injection() {
        let (_, mutating) = configurations(Some("t1"));
        let name = mutating[0].metadata.name.clone().unwrap();
        assert_eq!(name, "kruise-sidecarset-z-launchpriority-mutating-t1");
        assert!(name.as_str() > "kruise-sidecarset-mutating-t1");
        let hook = &mutating[0].webhooks.as_ref().unwrap()[0];
        assert_eq!(hook.reinvocation_policy.as_deref(), Some("IfNeeded"));
        assert_eq!(
            hook.match_conditions.as_ref().unwrap()[0].name,
            CONDITION_NAME
        );
    }

    #[test]
    fn suffixes_use_the_generator_alphabet() {
        let mut rng = rand::rng();
        let s = random_suffix(&mut rng);
        assert_eq!(s.len(), 5);
        assert!(s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }
}
