//! Admission of ContainerRecreateRequests (as openkruise/kruise v1.9.0
//! pkg/webhook/containerrecreaterequest/mutating/crr_mutating_handler.go): on CREATE the mutating
//! webhook checks the request against its Pod and stamps it (labels, defaults, the containers'
//! preStop, ports and status context); on UPDATE the validating webhook keeps the spec, the Pod's
//! labels and the unready-acquired annotation immutable. Both refuse everything while the
//! `KruiseDaemon` gate is off (HTTP 403), as OpenKruise does.
//!
//! The checks work on the object's JSON: an unknown `failurePolicy` cannot be decoded into
//! our types but must still be reported by name.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_runtime::webhook::config;
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::field::{
    FieldError, aggregate, forbidden, invalid, invalid_detail, required,
};
use kruise_runtime::webhook::{
    AdmissionResponse, HandlerError, Operation, Route, deny_forbidden, deny_invalid, dynamic,
    json_objects,
};
use serde_json::{Value, json};

#[cfg(test)]
mod tests;

pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-v1alpha1-containerrecreaterequest";
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-containerrecreaterequest";

/// The smallest `activeDeadlineSeconds` accepted.
pub const MIN_DEADLINE_SECONDS: i64 = 3;

/// The 403 answer while the gate is off.
pub fn gate_off_message() -> String {
    format!(
        "feature-gate {} is not enabled",
        kruise_runtime::gates::KRUISE_DAEMON
    )
}

fn int(v: Option<&Value>) -> Option<i64> {
    v.and_then(Value::as_i64)
}

fn containers(object: &Value) -> Vec<Value> {
    object
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The checks that need no Pod, every failing one reported.
pub fn spec_errors(object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = object.get("spec").cloned().unwrap_or_default();
    if spec
        .get("podName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        errors.push(required("spec.podName", "podName can not be empty"));
    }
    let list = containers(object);
    if list.is_empty() {
        errors.push(required(
            "spec.containers",
            "containers list can not be null",
        ));
    }
    if let Some(d) = int(spec.get("activeDeadlineSeconds"))
        && d < MIN_DEADLINE_SECONDS
    {
        errors.push(invalid(
            "spec.activeDeadlineSeconds",
            d,
            format!("activeDeadlineSeconds can not be less than {MIN_DEADLINE_SECONDS}s"),
        ));
    }
    let strategy = spec.get("strategy");
    for field in [
        "terminationGracePeriodSeconds",
        "unreadyGracePeriodSeconds",
        "minStartedSeconds",
    ] {
        if let Some(v) = int(strategy.and_then(|s| s.get(field)))
            && v < 0
        {
            errors.push(invalid(
                format!("spec.strategy.{field}"),
                v,
                format!("{field} must be non-negative integer"),
            ));
        }
    }
    match strategy.and_then(|s| s.get("failurePolicy")) {
        None | Some(Value::Null) => {}
        Some(Value::String(p)) if p.is_empty() || p == "Fail" || p == "Ignore" => {}
        Some(other) => {
            let shown = other
                .as_str()
                .map_or_else(|| other.to_string(), str::to_string);
            errors.push(invalid_detail(
                "spec.strategy.failurePolicy",
                format!("unknown failurePolicy {shown}"),
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for (i, c) in list.iter().enumerate() {
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        if name.is_empty() {
            errors.push(required(
                format!("spec.containers[{i}].name"),
                "container name can not be empty",
            ));
        } else if !seen.insert(name) {
            errors.push(invalid_detail(
                format!("spec.containers[{i}].name"),
                format!("can not recreate {name} multi times"),
            ));
        }
        if ["preStop", "ports", "statusContext"]
            .iter()
            .any(|f| c.get(*f).is_some_and(|v| !v.is_null()))
        {
            errors.push(forbidden(
                format!("spec.containers[{i}]"),
                "preStop, ports, statusContext in container are ready-only fields",
            ));
        }
    }
    errors
}

/// The checks against the Pod (`None`: there is none of that name).
pub fn pod_errors(object: &Value, pod: Option<&Pod>) -> Vec<FieldError> {
    let pod_name = object
        .pointer("/spec/podName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let Some(pod) = pod else {
        return vec![invalid_detail(
            "spec.podName",
            format!("no found Pod named {pod_name}"),
        )];
    };
    if !kruise_ordering::predicates::is_active(pod) {
        return vec![invalid_detail(
            "spec.podName",
            "not allowed to recreate containers in an inactive Pod",
        )];
    }
    if !kruise_ordering::predicates::is_scheduled(pod) {
        return vec![invalid_detail(
            "spec.podName",
            "not allowed to recreate containers in a pending Pod",
        )];
    }
    let spec_containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    let mut errors = Vec::new();
    for (i, c) in containers(object).iter().enumerate() {
        let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
        let path = format!("spec.containers[{i}].name");
        if !spec_containers.iter().any(|pc| pc.name == name) {
            errors.push(invalid_detail(
                path,
                format!("container {name} not found in Pod"),
            ));
            continue;
        }
        let has_id = statuses
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.container_id.as_deref())
            .is_some_and(|id| !id.is_empty());
        if !has_id {
            errors.push(invalid_detail(
                path,
                format!(
                    "no containerID in {name} containerStatus, maybe the container has not been initialized"
                ),
            ));
        }
    }
    errors
}

/// The request stamped from its Pod (which passed [`pod_errors`]): the labels, the
/// defaults, and per container the preStop (and ports for httpGet) and status context.
pub fn stamped(object: &Value, pod: &Pod) -> Value {
    let mut out = object.clone();
    let node = kruise_ordering::predicates::node_name(pod).to_string();
    let uid = kruise_ordering::predicates::uid(pod).to_string();
    if !out["metadata"]["labels"].is_object() {
        out["metadata"]["labels"] = json!({});
    }
    let labels = &mut out["metadata"]["labels"];
    labels[keys::CRR_NODE_NAME] = json!(node);
    labels[keys::CRR_POD_UID] = json!(uid);
    labels[keys::CRR_ACTIVE] = json!("true");

    if !out["spec"]["strategy"].is_object() {
        out["spec"]["strategy"] = json!({});
    }
    let strategy = &mut out["spec"]["strategy"];
    if strategy
        .get("failurePolicy")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        strategy["failurePolicy"] = json!("Fail");
    }
    if strategy
        .get("terminationGracePeriodSeconds")
        .is_none_or(Value::is_null)
        && let Some(grace) = pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
    {
        strategy["terminationGracePeriodSeconds"] = json!(grace);
    }

    let spec_containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    if let Some(list) = out["spec"]["containers"].as_array_mut() {
        for c in list.iter_mut() {
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            let Some(pc) = spec_containers.iter().find(|pc| pc.name == name) else {
                continue;
            };
            if let Some(pre_stop) = pc.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()) {
                // Only the handlers the agent can run (a `sleep` action is the kubelet's).
                let mut handler = serde_json::Map::new();
                if let Some(exec) = &pre_stop.exec {
                    handler.insert("exec".into(), json!(exec));
                }
                if let Some(http) = &pre_stop.http_get {
                    handler.insert("httpGet".into(), json!(http));
                    if let Some(ports) = pc.ports.as_ref().filter(|p| !p.is_empty()) {
                        c["ports"] = json!(ports);
                    }
                }
                if let Some(tcp) = &pre_stop.tcp_socket {
                    handler.insert("tcpSocket".into(), json!(tcp));
                }
                if !handler.is_empty() {
                    c["preStop"] = Value::Object(handler);
                }
            }
            if let Some(status) = statuses.iter().find(|s| s.name == name) {
                c["statusContext"] = json!({
                    "containerID": status.container_id.clone().unwrap_or_default(),
                    "restartCount": status.restart_count,
                });
            }
        }
    }
    out
}

/// CREATE: the stamped request, or every reason it is refused.
pub fn admit_create(object: &Value, pod: Option<&Pod>) -> Result<Value, Vec<FieldError>> {
    let errors = spec_errors(object);
    if !errors.is_empty() {
        return Err(errors);
    }
    let errors = pod_errors(object, pod);
    match pod {
        Some(pod) if errors.is_empty() => Ok(stamped(object, pod)),
        _ => Err(errors),
    }
}

/// UPDATE: what changed that may not.
pub fn update_errors(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = |o: &Value| o.get("spec").cloned().unwrap_or(Value::Null);
    if spec(new) != spec(old) {
        errors.push(forbidden(
            "spec",
            "spec of ContainerRecreateRequest is immutable",
        ));
    }
    let meta = |o: &Value, kind: &str, key: &str| {
        o.pointer(&format!("/metadata/{kind}"))
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    for key in [keys::CRR_POD_UID, keys::CRR_NODE_NAME] {
        if meta(new, "labels", key) != meta(old, "labels", key) {
            errors.push(forbidden(
                format!("metadata.labels[{key}]"),
                format!("not allowed to update immutable label {key}"),
            ));
        }
    }
    let acquired = keys::CRR_UNREADY_ACQUIRED;
    let was = meta(old, "annotations", acquired);
    if !was.is_empty() && meta(new, "annotations", acquired) != was {
        errors.push(forbidden(
            format!("metadata.annotations[{acquired}]"),
            format!("not allowed to update immutable annotation {acquired}"),
        ));
    }
    errors
}

fn patched(
    response: AdmissionResponse,
    from: &Value,
    to: &Value,
) -> Result<AdmissionResponse, HandlerError> {
    let patch = json_patch::diff(from, to);
    if patch.0.is_empty() {
        return Ok(response);
    }
    response
        .with_patch(patch)
        .map_err(|e| HandlerError::Internal(e.to_string()))
}

/// The mutating (CREATE) and validating (UPDATE) routes. `daemon_enabled` is the
/// `KruiseDaemon` gate; Pods are read through `client` (a fresh read: the status context
/// must be the container running now).
pub fn routes(client: kube::Client, daemon_enabled: bool) -> Vec<Route> {
    let mutate = Route::new(
        MUTATE_PATH,
        "mutate-containerrecreaterequest",
        dynamic(move |req| {
            let client = client.clone();
            async move {
                let response = AdmissionResponse::from(&req);
                if !daemon_enabled {
                    return Ok(deny_forbidden(response, gate_off_message()));
                }
                if req.operation != Operation::Create {
                    return Ok(response);
                }
                let (Some(object), _) = json_objects(&req)? else {
                    return Err(HandlerError::Decode("no object".into()));
                };
                let errors = spec_errors(&object);
                if !errors.is_empty() {
                    return Ok(deny_invalid(response, &errors));
                }
                let namespace = req.namespace.clone().unwrap_or_default();
                let pod_name = object
                    .pointer("/spec/podName")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let pods: kube::Api<Pod> = kube::Api::namespaced(client, &namespace);
                let pod = pods.get_opt(pod_name).await.map_err(|e| {
                    HandlerError::Internal(format!("failed to find Pod {pod_name}: {e}"))
                })?;
                match admit_create(&object, pod.as_ref()) {
                    Ok(stamped) => patched(response, &object, &stamped),
                    Err(errors) => Ok(deny_invalid(response, &errors)),
                }
            }
        }),
    );
    let validate = Route::new(
        VALIDATE_PATH,
        "validate-containerrecreaterequest",
        dynamic(move |req| async move {
            let response = AdmissionResponse::from(&req);
            if !daemon_enabled {
                return Ok(deny_forbidden(response, gate_off_message()));
            }
            if req.operation != Operation::Update {
                return Ok(response);
            }
            let (Some(new), Some(old)) = json_objects(&req)? else {
                return Err(HandlerError::Decode("no object or oldObject".into()));
            };
            let errors = update_errors(&new, &old);
            Ok(if errors.is_empty() {
                response
            } else {
                deny_forbidden(response, aggregate(&errors))
            })
        }),
    );
    vec![mutate, validate, conversion_route()]
}

/// The CRD conversion webhook (v1alpha1 ⇄ v1beta1), registered by cluster-wide instances.
pub const CONVERT_PATH: &str = kruise_api::conversion::path::CONTAINERRECREATEREQUEST;

/// v1beta1 clients are served through conversion (stored and reconciled: v1alpha1).
pub fn conversion_route() -> Route {
    Route::conversion(
        CONVERT_PATH,
        "convert-containerrecreaterequest",
        "containerrecreaterequests.apps.kruise.io",
        std::sync::Arc::new(kruise_api::conversion::convert_containerrecreaterequest),
    )
}

/// `kruise-containerrecreaterequest-validating` / `-mutating`, for the instance's scope.
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    config::KindAdmission {
        kind: "containerrecreaterequest",
        plural: "containerrecreaterequests",
        versions: &["v1alpha1"],
        validate: (VALIDATE_PATH, &["UPDATE"]),
        mutate: (MUTATE_PATH, &["CREATE"]),
    }
    .configurations(watch_namespace)
}
