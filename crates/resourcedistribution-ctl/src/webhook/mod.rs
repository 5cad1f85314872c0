//! ResourceDistribution admission (openkruise/kruise v1.9.0
//! pkg/webhook/resourcedistribution/validating/resourcedistribution_create_update_handler.go): the
//! gate, the kind of the resource and its immutable identity, namespace names, ambiguous targets,
//! the label selector, and a server dry-run create of the resource. Validation only: RD has no
//! defaults.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::keys;
use kruise_runtime::api_error::is_conflict;
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::config::{rule, validating_configuration, validating_webhook};
use kruise_runtime::webhook::field::{
    FieldError, deny_forbidden, invalid, invalid_detail, required,
};
use kruise_runtime::webhook::{
    AdmissionResponse, HandlerError, Operation, Route, deny_invalid, dynamic, json_objects,
};
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::Value;

/// Only Secrets and ConfigMaps (upstream's `validateResourceDistributionSpecResource` prints its
/// GroupKind list).
pub const UNSUPPORTED_KIND: &str =
    "unknown or unsupported resource GroupKind, only support [Secret ConfigMap]";

pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-resourcedistribution";

/// `ValidateNamespaceName`'s DNS-1123 label message.
const DNS_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const TOO_LONG: &str = "must be no more than 63 characters";

/// Whether `name` is a DNS-1123 label (what a namespace name must be).
pub fn is_dns_label(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// The admission checks that need no API call. `old` is the stored object on UPDATE.
pub fn validate(object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(spec) = object.get("spec") else {
        errors.push(required("spec", ""));
        return errors;
    };
    errors.extend(resource_errors(
        spec.get("resource"),
        old.and_then(|o| o.pointer("/spec/resource")),
    ));
    if let Some(targets) = spec.get("targets") {
        errors.extend(target_errors(targets));
    }
    errors
}

fn resource_errors(resource: Option<&Value>, old: Option<&Value>) -> Vec<FieldError> {
    let Some(resource) = resource.filter(|r| r.is_object()) else {
        return vec![required("spec.resource", "")];
    };
    let field = |key: &str| {
        resource
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if api_version != "v1" || !matches!(kind, "Secret" | "ConfigMap") {
        return vec![invalid(
            "spec.resource",
            format!("{api_version}, Kind={kind}"),
            UNSUPPORTED_KIND,
        )];
    }
    let name = resource
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut errors = Vec::new();
    if name.is_empty() {
        errors.push(required("spec.resource.metadata.name", "name is required"));
    } else if !kruise_workload::admission::is_dns_subdomain(name) {
        errors.push(invalid(
            "spec.resource.metadata.name",
            format!("{name:?}"),
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        ));
    }
    if let Some(old) = old {
        let identity = |r: &Value| {
            (
                r.get("apiVersion").cloned(),
                r.get("kind").cloned(),
                r.pointer("/metadata/name").cloned(),
            )
        };
        if identity(resource) != identity(old) {
            errors.push(invalid_detail(
                "spec.resource",
                keys::RD_MSG_RESOURCE_IMMUTABLE,
            ));
        }
    }
    errors
}

fn target_errors(targets: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let names = |key: &str| -> Vec<String> {
        targets
            .pointer(&format!("/{key}/list"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|n| {
                n.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    let (included, excluded) = (names("includedNamespaces"), names("excludedNamespaces"));
    for (key, list) in [
        ("includedNamespaces", &included),
        ("excludedNamespaces", &excluded),
    ] {
        for (i, name) in list.iter().enumerate() {
            let path = format!("spec.targets.{key}.list[{i}].name");
            if !is_dns_label(name) {
                errors.push(invalid(&path, format!("{name:?}"), DNS_LABEL));
            }
            if name.len() > 63 {
                errors.push(invalid(&path, format!("{name:?}"), TOO_LONG));
            }
        }
    }
    let mut ambiguous: Vec<&str> = included
        .iter()
        .filter(|n| excluded.contains(n))
        .map(String::as_str)
        .collect();
    ambiguous.dedup();
    if !ambiguous.is_empty() {
        errors.push(invalid_detail(
            "spec.targets",
            format!(
                "ambiguous targets because namespace [{}] is in both IncludedNamespaces.List and ExcludedNamespaces.List",
                ambiguous.join(" ")
            ),
        ));
    }
    if let Some(selector) = targets
        .get("namespaceLabelSelector")
        .filter(|s| !s.is_null())
    {
        match serde_json::from_value::<LabelSelector>(selector.clone()) {
            Err(e) => errors.push(invalid_detail(
                "spec.targets.namespaceLabelSelector",
                format!("labelSelectorAsSelector error: {e}"),
            )),
            Ok(selector) => {
                if let Err(e) = kruise_ordering::selector::matches(&selector, &BTreeMap::new()) {
                    errors.push(invalid_detail(
                        "spec.targets.namespaceLabelSelector",
                        format!("labelSelectorAsSelector error: {e:?}"),
                    ));
                }
            }
        }
    }
    errors
}

/// What the apiserver says of creating `resource` in `namespace` (dry run), as a field
/// error. A same-named object there is no fault of the resource.
async fn dry_run_error(
    client: &kube::Client,
    namespace: &str,
    resource: &Value,
) -> Option<FieldError> {
    let kind = resource
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let api_resource = match kind {
        "Secret" => ApiResource::erase::<k8s_openapi::api::core::v1::Secret>(&()),
        _ => ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
    };
    let mut object = resource.clone();
    object["metadata"]["namespace"] = Value::String(namespace.to_string());
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in [
            "resourceVersion",
            "uid",
            "ownerReferences",
            "creationTimestamp",
        ] {
            meta.remove(key);
        }
    }
    let object: DynamicObject = match serde_json::from_value(object) {
        Ok(o) => o,
        Err(e) => {
            return Some(invalid_detail(
                "spec.resource",
                format!("resource is invalid, err: {e}"),
            ));
        }
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &api_resource);
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match api.create(&params, &object).await {
        Ok(_) => None,
        Err(e) if is_conflict(&e) => None,
        Err(e) => Some(invalid_detail(
            "spec.resource",
            format!("resource is invalid, err: {e}"),
        )),
    }
}

/// The validating route. `enabled`: gate `ResourceDistributionGate`; off, every CREATE
/// and UPDATE is refused (403). `dry_run_namespace`: where the resource is tried.
pub fn routes(client: kube::Client, enabled: bool, dry_run_namespace: String) -> Vec<Route> {
    let validate_route = Route::new(
        VALIDATE_PATH,
        "validate-resourcedistribution",
        dynamic(move |req| {
            let (client, namespace) = (client.clone(), dry_run_namespace.clone());
            async move {
                let response = AdmissionResponse::from(&req);
                if !matches!(req.operation, Operation::Create | Operation::Update) {
                    return Ok(response);
                }
                if !enabled {
                    return Ok(deny_forbidden(response, keys::RD_MSG_GATE_DISABLED));
                }
                let (raw_new, raw_old) = json_objects(&req)?;
                let Some(raw_new) = raw_new else {
                    return Err(HandlerError::Decode("no object".into()));
                };
                let old = raw_old.filter(|_| req.operation == Operation::Update);
                let mut errors = validate(&raw_new, old.as_ref());
                if errors.is_empty()
                    && let Some(resource) = raw_new.pointer("/spec/resource")
                {
                    errors.extend(dry_run_error(&client, &namespace, resource).await);
                }
                Ok(if errors.is_empty() {
                    response
                } else {
                    deny_invalid(response, &errors)
                })
            }
        }),
    );
    vec![validate_route, conversion_route()]
}

/// The CRD conversion webhook (v1alpha1 ⇄ v1beta1), registered by cluster-wide instances.
pub const CONVERT_PATH: &str = kruise_api::conversion::path::RESOURCEDISTRIBUTION;

/// v1beta1 clients are served through conversion (stored and reconciled: v1alpha1).
pub fn conversion_route() -> Route {
    Route::conversion(
        CONVERT_PATH,
        "convert-resourcedistribution",
        "resourcedistributions.apps.kruise.io",
        std::sync::Arc::new(kruise_api::conversion::convert_resourcedistribution),
    )
}

/// `kruise-resourcedistribution-validating` with `vresourcedistribution.kb.io`. RDs are
/// cluster-scoped, so a namespace-scoped instance cannot be limited by namespace: it
/// sees only the RDs labelled with its scope (objectSelector).
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    let mut webhook = validating_webhook(
        "vresourcedistribution.kb.io",
        VALIDATE_PATH,
        vec![rule(
            "apps.kruise.io",
            &["v1alpha1"],
            &["resourcedistributions"],
            &["CREATE", "UPDATE"],
            "Cluster",
        )],
    );
    webhook.object_selector = watch_namespace.map(|ns| LabelSelector {
        match_labels: Some(BTreeMap::from([(
            crate::labels::SCOPE.to_string(),
            ns.to_string(),
        )])),
        ..Default::default()
    });
    (
        vec![validating_configuration(
            "kruise-resourcedistribution",
            watch_namespace,
            vec![webhook],
        )],
        vec![],
    )
}

#[cfg(test)]
mod tests;
