//! Admission served by `podprobemarker-ctl`: PodProbeMarker validation
//! (`/validate-apps-kruise-io-v1alpha1-podprobemarker`, CREATE/UPDATE), with the rules,
//! field paths and messages of openkruise/kruise v1.9.0
//! pkg/webhook/podprobemarker/validating/probe_create_update_handler.go, including its
//! quirks (the probe's fields are reported under `spec.probe`, the policies' under
//! `spec.markerPolicy`, the immutable selector under `selector`). Like upstream it answers
//! HTTP 400 with the aggregated field errors, and 403 when `PodProbeMarkerGate` or
//! `KruiseDaemon` is off.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{HTTPGetAction, TCPSocketAction};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    ContainerProbeSpec, PodProbeMarker, ProbeMarkerPolicy, ProbeState,
};
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::config::{rule, validating_configuration, validating_webhook};
use kruise_runtime::webhook::field::{
    FieldError, aggregate, deny_forbidden, forbidden, invalid, invalid_detail, not_supported,
    required,
};
use kruise_runtime::webhook::{
    AdmissionRequest, AdmissionResponse, HandlerError, Operation, Route, dynamic,
};
use kube::core::DynamicObject;

#[cfg(test)]
mod tests;

pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-podprobemarker";

/// Pod condition types a probe may not be named after (upstream's
/// `k8sNativePodConditions`: Kubernetes' and Kruise's own conditions).
const NATIVE_POD_CONDITIONS: [&str; 6] = [
    "PodScheduled",
    "Initialized",
    "Ready",
    "ContainersReady",
    "KruisePodReady",
    "InPlaceUpdateReady",
];

/// The routes. `enabled`: `PodProbeMarkerGate` and `KruiseDaemon` are both on.
pub fn routes(enabled: bool) -> Vec<Route> {
    vec![Route::new(
        VALIDATE_PATH,
        "validate-podprobemarker",
        dynamic(move |req| async move { review(req, enabled) }),
    )]
}

/// The review: decode, validate, answer 400 with the field errors.
pub fn review(
    req: AdmissionRequest<DynamicObject>,
    enabled: bool,
) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(&req);
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Ok(response);
    }
    let decode = |o: &DynamicObject| {
        serde_json::to_value(o).and_then(serde_json::from_value::<PodProbeMarker>)
    };
    let Some(object) = &req.object else {
        return Ok(response);
    };
    let marker = match decode(object) {
        Ok(m) => m,
        Err(e) => return Ok(deny_bad_request(response, &format!("{e}"))),
    };
    if !enabled {
        return Ok(deny_forbidden(
            response,
            "feature-gate PodProbeMarkerGate is not enabled",
        ));
    }
    let old = match (&req.operation, &req.old_object) {
        (Operation::Update, Some(o)) => Some(match decode(o) {
            Ok(m) => m,
            Err(e) => return Ok(deny_bad_request(response, &format!("{e}"))),
        }),
        _ => None,
    };
    let errors = validate(&marker, old.as_ref());
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

/// Upstream's `validatingPodProbeMarkerFn`.
pub fn validate(marker: &PodProbeMarker, old: Option<&PodProbeMarker>) -> Vec<FieldError> {
    let mut errors = spec_errors(marker);
    if let Some(old) = old
        && old.spec.selector != marker.spec.selector
    {
        errors.push(invalid_detail("selector", "selector must be immutable"));
    }
    errors
}

fn spec_errors(marker: &PodProbeMarker) -> Vec<FieldError> {
    let spec = &marker.spec;
    let mut errors = selector_errors(&spec.selector);
    if spec.probes.is_empty() {
        errors.push(invalid(
            "spec.probes",
            "null",
            "empty probes is not valid for PodProbeMarker.",
        ));
        return errors;
    }
    let mut names: HashSet<&str> = HashSet::new();
    let mut condition_types: HashSet<&str> = HashSet::new();
    for probe in &spec.probes {
        let name = probe.name.as_str();
        let early = if name.contains('#') {
            Some(invalid(
                "spec.probes",
                q(name),
                "probe name can't contains '#'.",
            ))
        } else if name.is_empty() {
            Some(invalid(
                "spec.probes",
                q(name),
                "probe name can't be empty in PodProbeMarker.",
            ))
        } else if probe.container_name.is_empty() {
            Some(invalid(
                "spec.probes",
                q(&probe.container_name),
                "probe containerName can't be empty in PodProbeMarker.",
            ))
        } else if NATIVE_POD_CONDITIONS.contains(&name) {
            Some(invalid(
                "spec.probes",
                q(name),
                format!("probe name can't be {name}"),
            ))
        } else if !names.insert(name) {
            Some(invalid(
                "spec.probes",
                q(name),
                "probe name must be unique in PodProbeMarker.",
            ))
        } else {
            None
        };
        if let Some(e) = early {
            errors.push(e);
            return errors;
        }
        errors.extend(probe_errors(&probe.probe, "spec.probe"));
        let condition_type = probe.pod_condition_type.as_str();
        if condition_type.is_empty() && probe.marker_policy.is_empty() {
            errors.push(invalid_detail(
                "spec.probes",
                "podConditionType and markerPolicy cannot be empty at the same time",
            ));
            return errors;
        }
        if !condition_type.is_empty() {
            if !condition_types.insert(condition_type) {
                errors.push(invalid(
                    "spec.probes",
                    q(condition_type),
                    format!("podConditionType {condition_type} must be unique in podProbeMarker"),
                ));
                return errors;
            }
            errors.extend(
                qualified_name_messages(condition_type)
                    .into_iter()
                    .map(|m| invalid("spec", q(condition_type), m)),
            );
        }
        let mut states: HashSet<&str> = HashSet::new();
        for policy in &probe.marker_policy {
            if !states.insert(policy.state.as_str()) {
                errors.push(invalid(
                    "spec.markerPolicy",
                    q(policy.state.as_str()),
                    "marker policy state must be unique.",
                ));
                return errors;
            }
            errors.extend(policy_errors(policy, "spec.markerPolicy"));
        }
    }
    errors
}

/// `"value"`, as Go's `%q` prints a plain string.
fn q(s: &str) -> String {
    format!("{s:?}")
}

fn selector_errors(
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
        let path = format!("spec.selector.matchExpressions[{i}]");
        let has_values = e.values.as_ref().is_some_and(|v| !v.is_empty());
        match e.operator.as_str() {
            "In" | "NotIn" if !has_values => errors.push(required(
                format!("{path}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if has_values => errors.push(forbidden(
                format!("{path}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errors.push(invalid(
                format!("{path}.operator"),
                q(other),
                "not a valid selector operator",
            )),
        }
        errors.extend(
            qualified_name_messages(&e.key)
                .into_iter()
                .map(|m| invalid(format!("{path}.key"), q(&e.key), m)),
        );
    }
    for (k, v) in selector.match_labels.iter().flatten() {
        errors.extend(
            qualified_name_messages(k)
                .into_iter()
                .map(|m| invalid("spec.selector.matchLabels", q(k), m)),
        );
        errors.extend(
            label_value_messages(v)
                .into_iter()
                .map(|m| invalid("spec.selector.matchLabels", q(v), m)),
        );
    }
    let empty = selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty);
    if empty {
        errors.push(invalid(
            "spec.selector",
            "{}",
            "empty selector is not valid for podProbeMarker.",
        ));
    }
    errors
}

/// Upstream's `validateProbe`, at `path` (`spec.probe`).
pub fn probe_errors(probe: &ContainerProbeSpec, path: &str) -> Vec<FieldError> {
    let mut errors = handler_errors(probe, path);
    for (field, value) in [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ] {
        if let Some(v) = value.filter(|v| *v < 0) {
            errors.push(invalid(
                format!("{path}.{field}"),
                v,
                "must be greater than or equal to 0",
            ));
        }
    }
    errors
}

/// Upstream's `validateHandler`: exactly one of exec, httpGet, tcpSocket (gRPC is not
/// one it knows).
fn handler_errors(handler: &ContainerProbeSpec, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut handlers = 0;
    if let Some(exec) = &handler.exec {
        handlers += 1;
        if exec.command.as_ref().is_none_or(Vec::is_empty) {
            errors.push(required(format!("{path}.exec.command"), ""));
        }
    }
    if let Some(http) = &handler.http_get {
        if handlers > 0 {
            errors.push(forbidden(
                format!("{path}.httpGet"),
                "may not specify more than 1 handler type",
            ));
        } else {
            handlers += 1;
            errors.extend(http_get_errors(http, &format!("{path}.httpGet")));
        }
    }
    if let Some(tcp) = &handler.tcp_socket {
        if handlers > 0 {
            errors.push(forbidden(
                format!("{path}.tcpSocket"),
                "may not specify more than 1 handler type",
            ));
        } else {
            handlers += 1;
            errors.extend(tcp_socket_errors(tcp, &format!("{path}.tcpSocket")));
        }
    }
    if handlers == 0 {
        errors.push(required(path, "must specify a handler type"));
    }
    errors
}

fn tcp_socket_errors(tcp: &TCPSocketAction, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(host) = tcp.host.as_deref().filter(|h| !h.is_empty()) {
        errors.push(invalid(
            format!("{path}.host"),
            q(host),
            "host field in probes is not allowed",
        ));
    }
    errors.extend(port_errors(&tcp.port, &format!("{path}.port")));
    errors
}

fn http_get_errors(http: &HTTPGetAction, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let url_path = http.path.as_deref().unwrap_or_default();
    if url_path.is_empty() {
        errors.push(required(format!("{path}.path"), ""));
    }
    if let Some(host) = http.host.as_deref().filter(|h| !h.is_empty()) {
        errors.push(invalid(
            format!("{path}.host"),
            q(host),
            "host field in probes is not allowed",
        ));
    }
    errors.extend(port_errors(&http.port, &format!("{path}.port")));
    let scheme = http.scheme.as_deref().unwrap_or_default();
    if !matches!(scheme, "HTTP" | "HTTPS") {
        errors.push(not_supported(
            format!("{path}.scheme"),
            q(scheme),
            "supported values: \"HTTP\", \"HTTPS\"",
        ));
    }
    for header in http.http_headers.iter().flatten() {
        if !is_http_header_name(&header.name) {
            errors.push(invalid(
                format!("{path}.httpHeaders"),
                q(&header.name),
                "a valid HTTP header must consist of alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for validation is '[-A-Za-z0-9]+')",
            ));
        }
    }
    errors
}

fn is_http_header_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// Upstream's `ValidatePortNumOrName`.
pub fn port_errors(port: &IntOrString, path: &str) -> Vec<FieldError> {
    match port {
        IntOrString::Int(n) if !(1..=65535).contains(n) => {
            vec![invalid(path, n, "must be between 1 and 65535, inclusive")]
        }
        IntOrString::Int(_) => Vec::new(),
        IntOrString::String(name) => port_name_messages(name)
            .into_iter()
            .map(|m| invalid(path, q(name), m))
            .collect(),
    }
}

/// `validation.IsValidPortName`'s messages.
fn port_name_messages(name: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    if name.len() > 15 {
        out.push("must be no more than 15 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        out.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.chars().any(|c| c.is_ascii_lowercase()) {
        out.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        out.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        out.push("must not begin or end with a hyphen");
    }
    out
}

/// Upstream's `validateProbeMarkerPolicy`.
fn policy_errors(policy: &ProbeMarkerPolicy, path: &str) -> Vec<FieldError> {
    let state = policy.state.as_str();
    if state != ProbeState::SUCCEEDED && state != ProbeState::FAILED {
        return vec![required(
            format!("{path}.state"),
            "marker policy state must be 'True' or 'False'",
        )];
    }
    if policy.labels.is_empty() && policy.annotations.is_empty() {
        return vec![required(
            path,
            "marker policy annotations or labels can't be both empty",
        )];
    }
    let mut errors = Vec::new();
    for (k, v) in &policy.labels {
        errors.extend(
            qualified_name_messages(k)
                .into_iter()
                .map(|m| invalid(format!("{path}.labels"), q(k), m)),
        );
        errors.extend(
            label_value_messages(v)
                .into_iter()
                .map(|m| invalid(format!("{path}.labels"), q(v), m)),
        );
    }
    for k in policy.annotations.keys() {
        errors.extend(
            qualified_name_messages(&k.to_ascii_lowercase())
                .into_iter()
                .map(|m| invalid(format!("{path}.annotations"), q(k), m)),
        );
    }
    let size: usize = policy
        .annotations
        .iter()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    if size > 256 * 1024 {
        errors.push(invalid_detail(
            format!("{path}.annotations"),
            "must have at most 262144 bytes",
        ));
    }
    errors
}

const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, non-empty.
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// `validation.IsQualifiedName`'s messages.
pub fn qualified_name_messages(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                return vec!["prefix part must be non-empty".into()];
            }
            if !is_dns_subdomain(prefix) {
                return vec![DNS1123_SUBDOMAIN_MSG.into()];
            }
            name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_MSG}, with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )
            .replacen("name part ", "", 1)];
        }
    };
    let mut out = Vec::new();
    if name.is_empty() {
        out.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        out.push("name part must be no more than 63 characters".into());
    }
    if !name.is_empty() && !is_name_part(name) {
        out.push(QUALIFIED_NAME_MSG.into());
    }
    out
}

/// `validation.IsValidLabelValue`'s messages.
fn label_value_messages(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    if value.len() > 63 {
        out.push("must be no more than 63 characters".into());
    }
    if !value.is_empty() && !is_name_part(value) {
        out.push(LABEL_VALUE_MSG.into());
    }
    out
}

/// The configuration, named and labelled for the scope.
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    let validate = validating_webhook(
        "vpodprobemarker.kb.io",
        VALIDATE_PATH,
        vec![rule(
            "apps.kruise.io",
            &["v1alpha1"],
            &["podprobemarkers"],
            &["CREATE", "UPDATE"],
            "Namespaced",
        )],
    );
    (
        vec![validating_configuration(
            "kruise-podprobemarker",
            watch_namespace,
            vec![validate],
        )],
        Vec::new(),
    )
}
