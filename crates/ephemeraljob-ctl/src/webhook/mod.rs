//! Admission served by `ephemeraljob-ctl`: EphemeralJob validation
//! (`/validate-apps-kruise-io-v1alpha1-ephemeraljob`, CREATE/UPDATE) with the rules, field
//! paths and messages of openkruise/kruise v1.9.0 pkg/webhook/ephemeraljob/validating
//! (validation.go: Kubernetes' ephemeral-container checks). Paths start at
//! `ephemeralContainers[i]`, as upstream reports them. Like upstream it answers HTTP 400
//! with the aggregated field errors.
//!
//! Checked per container: `name` (required, a DNS-1123 label, unique), `image` (required,
//! no surrounding whitespace), `terminationMessagePolicy` and `imagePullPolicy` (required:
//! no defaults are applied, the CRD is schemaless), env names, `volumeMounts[].subPath` and
//! `subPathExpr` (forbidden), and the fields an ephemeral container may not set (`ports`,
//! `resources`, `resizePolicy`, `restartPolicy`, the probes, `lifecycle`).

use k8s_openapi::api::core::v1::EphemeralContainer;
use kruise_api::apps_v1alpha1::EphemeralJob;
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::config::{rule, validating_configuration, validating_webhook};
use kruise_runtime::webhook::{
    AdmissionRequest, AdmissionResponse, HandlerError, Operation, Route, dynamic,
};
use kube::core::DynamicObject;

#[cfg(test)]
mod tests;

pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-ephemeraljob";

const DNS_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const ENV_NAME: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')";
const NOT_FOR_EPHEMERAL: &str = "cannot be set for an Ephemeral Container";

/// The routes.
pub fn routes() -> Vec<Route> {
    vec![Route::new(
        VALIDATE_PATH,
        "validate-ephemeraljob",
        dynamic(|req| async move { review(req) }),
    )]
}

/// The review: decode, validate, answer 400 with the field errors.
pub fn review(req: AdmissionRequest<DynamicObject>) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(&req);
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Ok(response);
    }
    let Some(object) = &req.object else {
        return Ok(response);
    };
    let job = match serde_json::to_value(object).and_then(serde_json::from_value::<EphemeralJob>) {
        Ok(j) => j,
        Err(e) => return Ok(deny_bad_request(response, &e.to_string())),
    };
    let errors = validate(&job);
    Ok(if errors.is_empty() {
        response
    } else {
        deny_bad_request(response, &aggregate(&errors))
    })
}

/// Upstream's `admission.Errored(http.StatusBadRequest, ..)`.
fn deny_bad_request(response: AdmissionResponse, message: &str) -> AdmissionResponse {
    let mut denied = response.deny(message);
    denied.result.code = 400;
    denied
}

/// `ToAggregate()`: one error as is, several as `[a, b]`.
pub fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

fn required(path: &str) -> String {
    format!("{path}: Required value")
}

fn forbidden(path: &str, detail: &str) -> String {
    format!("{path}: Forbidden: {detail}")
}

fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value:?}: {detail}")
}

fn not_supported(path: &str, value: &str, supported: &[&str]) -> String {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    format!(
        "{path}: Unsupported value: {value:?}: supported values: {}",
        list.join(", ")
    )
}

fn duplicate(path: &str, value: &str) -> String {
    format!("{path}: Duplicate value: {value:?}")
}

fn is_dns_label(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn is_env_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && !b[0].is_ascii_digit()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'))
}

/// Upstream's `validate`: the template's ephemeral containers.
pub fn validate(job: &EphemeralJob) -> Vec<String> {
    let mut errors = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (i, c) in job.spec.template.ephemeral_containers.iter().enumerate() {
        let path = format!("ephemeralContainers[{i}]");
        errors.extend(container_errors(c, &path));
        if names.contains(&c.name.as_str()) {
            errors.push(duplicate(&format!("{path}.name"), &c.name));
        } else {
            names.push(&c.name);
        }
        errors.extend(allow_list_errors(c, &path));
        for (j, m) in c.volume_mounts.iter().flatten().enumerate() {
            let mount = format!("{path}.volumeMounts[{j}]");
            if m.sub_path.as_deref().is_some_and(|s| !s.is_empty()) {
                errors.push(forbidden(&format!("{mount}.subPath"), NOT_FOR_EPHEMERAL));
            }
            if m.sub_path_expr.as_deref().is_some_and(|s| !s.is_empty()) {
                errors.push(forbidden(
                    &format!("{mount}.subPathExpr"),
                    NOT_FOR_EPHEMERAL,
                ));
            }
        }
    }
    errors
}

/// Upstream's `validateContainerCommon` and `validateContainerOnlyForPod`.
fn container_errors(c: &EphemeralContainer, path: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let name = format!("{path}.name");
    if c.name.is_empty() {
        errors.push(required(&name));
    } else {
        if c.name.len() > 63 {
            errors.push(invalid(
                &name,
                &c.name,
                "must be no more than 63 characters",
            ));
        }
        if !is_dns_label(&c.name) {
            errors.push(invalid(&name, &c.name, DNS_LABEL));
        }
    }
    let image = c.image.as_deref().unwrap_or_default();
    if image.is_empty() {
        errors.push(required(&format!("{path}.image")));
    }
    match c.termination_message_policy.as_deref().unwrap_or_default() {
        "File" | "FallbackToLogsOnError" => {}
        "" => errors.push(required(&format!("{path}.terminationMessagePolicy"))),
        other => errors.push(not_supported(
            &format!("{path}.terminationMessagePolicy"),
            other,
            &["File", "FallbackToLogsOnError"],
        )),
    }
    for (i, env) in c.env.iter().flatten().enumerate() {
        let env_path = format!("{path}.env[{i}].name");
        if env.name.is_empty() {
            errors.push(required(&env_path));
        } else if !is_env_name(&env.name) {
            errors.push(invalid(&env_path, &env.name, ENV_NAME));
        }
    }
    match c.image_pull_policy.as_deref().unwrap_or_default() {
        "Always" | "IfNotPresent" | "Never" => {}
        "" => errors.push(required(&format!("{path}.imagePullPolicy"))),
        other => errors.push(not_supported(
            &format!("{path}.imagePullPolicy"),
            other,
            &["Always", "IfNotPresent", "Never"],
        )),
    }
    if image.len() != image.trim().len() {
        errors.push(invalid(
            &format!("{path}.image"),
            image,
            "must not have leading or trailing whitespace",
        ));
    }
    errors
}

/// Upstream's `validateFieldAllowList` over `EphemeralContainerCommon`: the fields an
/// ephemeral container may not set, in the struct's order. A field counts as set when it
/// is not Go's zero value (`reflect.Value.IsZero`): `resources` is a struct there, not a
/// pointer, so the `resources: {}` every Go client sends (client-go serializes the empty
/// struct) is unset, while `resources: {limits: {}}` (a non-nil empty map) is set.
fn allow_list_errors(c: &EphemeralContainer, path: &str) -> Vec<String> {
    let resources_set = c
        .resources
        .as_ref()
        .is_some_and(|r| r.limits.is_some() || r.requests.is_some() || r.claims.is_some());
    let set = [
        ("ports", c.ports.is_some()),
        ("resources", resources_set),
        ("resizePolicy", c.resize_policy.is_some()),
        ("restartPolicy", c.restart_policy.is_some()),
        ("livenessProbe", c.liveness_probe.is_some()),
        ("readinessProbe", c.readiness_probe.is_some()),
        ("startupProbe", c.startup_probe.is_some()),
        ("lifecycle", c.lifecycle.is_some()),
    ];
    set.into_iter()
        .filter(|(_, on)| *on)
        .map(|(field, _)| forbidden(&format!("{path}.{field}"), NOT_FOR_EPHEMERAL))
        .collect()
}

/// The configuration `ephemeraljob-ctl` registers: `kruise-ephemeraljob-validating`,
/// webhook `vephemeraljobs.kb.io` (upstream's name).
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    let validate = validating_webhook(
        "vephemeraljobs.kb.io",
        VALIDATE_PATH,
        vec![rule(
            "apps.kruise.io",
            &["v1alpha1"],
            &["ephemeraljobs"],
            &["CREATE", "UPDATE"],
            "Namespaced",
        )],
    );
    (
        vec![validating_configuration(
            "kruise-ephemeraljob",
            watch_namespace,
            vec![validate],
        )],
        Vec::new(),
    )
}
