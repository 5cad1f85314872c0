//! CloneSet admission (openkruise/kruise v1.9.0 pkg/webhook/cloneset/mutating and
//! pkg/webhook/cloneset/validating): defaulting (mutating) and validation, served by `cloneset-ctl`
//! on the shared webhook server.
//!
//! Both webhooks use `failurePolicy: Fail`: they only see CloneSet objects, so an outage
//! blocks CloneSet changes (which the controller could not act on anyway) and never Pod
//! creation; without validation a spec the controller cannot understand would slip in.
//!
//! Defaulting works on the JSON of the object, not on the typed struct, so fields our
//! types do not know survive (the Pod template is kept exactly as sent).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{CloneSet, CloneSetUpdateStrategyType};
use kruise_api::appspub::InPlaceUpdateStrategy;
use kruise_api::intstr::{self, Rounding};
use kruise_api::pod::Pod;
use kruise_runtime::Cache;
use kruise_runtime::webhook::field::{FieldError, forbidden, invalid, not_supported, required};
use kruise_runtime::webhook::{
    AdmissionRequest, AdmissionResponse, HandlerError, Route, config, defaulting, deny_invalid,
    dynamic, json_objects, json_patch,
};
use kruise_workload::{admission, pod_defaults};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-v1alpha1-cloneset";
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-cloneset";
/// The CRD conversion webhook (v1alpha1 ⇄ v1beta1), registered by cluster-wide instances.
pub const CONVERT_PATH: &str = kruise_api::conversion::path::CLONESET;

// ---------------------------------------------------------------- defaulting

/// The CloneSet defaults (`SetDefaultsCloneSetV1beta1` in openkruise/kruise v1.9.0
/// apis/apps/defaults/v1beta1.go) and the Pod-template defaults of a CREATE. Returns the defaulted
/// object.
pub fn with_defaults(object: &Value) -> Value {
    with_defaults_for(object, None, true)
}

/// The defaults of a CREATE (`old` is None) or an UPDATE. The Pod template and the
/// claim templates get Kubernetes' core defaults (as upstream does unless the
/// `TemplateNoDefaults` gate is on, which makes `template_defaults` false), so a
/// manifest that spells out a default makes no new revision. On UPDATE only when the
/// stored templates were defaulted already: a CloneSet stored without them keeps its
/// revision (and its Pods) until the templates are defaulted on purpose.
pub fn with_defaults_for(object: &Value, old: Option<&Value>, template_defaults: bool) -> Value {
    let mut obj = spec_defaults(object);
    pod_defaults::default_workload_templates(&mut obj, old, template_defaults);
    obj
}

fn spec_defaults(object: &Value) -> Value {
    let mut obj = object.clone();
    let spec = obj
        .as_object_mut()
        .and_then(|o| o.get_mut("spec"))
        .and_then(Value::as_object_mut);
    let Some(spec) = spec else { return obj };
    spec.entry("replicas").or_insert(json!(1));
    spec.entry("revisionHistoryLimit").or_insert(json!(10));
    let strategy = spec.entry("updateStrategy").or_insert_with(|| json!({}));
    if let Some(strategy) = strategy.as_object_mut() {
        strategy.entry("type").or_insert(json!("ReCreate"));
        strategy.entry("partition").or_insert(json!(0));
        strategy.entry("maxUnavailable").or_insert(json!("20%"));
        strategy.entry("maxSurge").or_insert(json!(0));
        let in_place = matches!(
            strategy.get("type").and_then(Value::as_str),
            Some("InPlaceIfPossible" | "InPlaceOnly")
        );
        if in_place {
            strategy
                .entry("inPlaceUpdateStrategy")
                .or_insert_with(|| json!({}));
        }
    }
    obj
}

/// The JSON patch that applies [`with_defaults_for`].
pub fn defaults_patch(
    object: &Value,
    old: Option<&Value>,
    template_defaults: bool,
) -> json_patch::Patch {
    json_patch::diff(object, &with_defaults_for(object, old, template_defaults))
}

// ---------------------------------------------------------------- validation

/// What validation needs to know about existing Pods (for `podsToDelete`).
pub trait PodLookup {
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<Pod>>;
}

/// Pods by name, in the CloneSet's namespace.
impl PodLookup for BTreeMap<String, Arc<Pod>> {
    fn pod(&self, _namespace: &str, name: &str) -> Option<Arc<Pod>> {
        self.get(name).cloned()
    }
}

/// The Pods [`validate`] looks up: those `podsToDelete` names and `old` did not, read
/// from the cache, or from the API server while the cache is still listing (`/readyz`
/// does not wait for it: [`kruise_runtime::Readiness::only_controller_waits_for`]).
async fn pods_to_delete(
    cache: &Cache<Pod>,
    client: Option<&kube::Client>,
    cs: &CloneSet,
    old: Option<&CloneSet>,
) -> Result<BTreeMap<String, Arc<Pod>>, HandlerError> {
    let ns = cs.namespace().unwrap_or_default();
    let named_before: BTreeSet<&String> = old
        .map(|o| o.spec.scale_strategy.pods_to_delete.iter().collect())
        .unwrap_or_default();
    let mut found = BTreeMap::new();
    for name in &cs.spec.scale_strategy.pods_to_delete {
        if named_before.contains(name) || found.contains_key(name) {
            continue;
        }
        let pod = match client {
            Some(client) => cache
                .get_or_fetch(client, &ns, name)
                .await
                .map_err(|e| HandlerError::Internal(format!("get pod {ns}/{name}: {e}")))?,
            None => cache.store().get(&ObjectRef::new(name).within(&ns)),
        };
        if let Some(pod) = pod {
            found.insert(name.clone(), pod);
        }
    }
    Ok(found)
}

/// Upstream's CloneSet validation (`ValidateCloneSetV1beta1` and `ValidateCloneSetUpdateV1beta1` in
/// openkruise/kruise v1.9.0 pkg/webhook/cloneset/validating/validation.go). `raw_old`/`raw_new` are
/// the objects as JSON (the InPlaceOnly diff needs every field of the template, including those our
/// types do not model).
pub fn validate(
    cs: &CloneSet,
    old: Option<&CloneSet>,
    raw_new: &Value,
    raw_old: Option<&Value>,
    pods: &dyn PodLookup,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = &cs.spec;
    let replicas = spec.replicas.unwrap_or(1);

    // 1. Name and replicas.
    let name = cs.name_any();
    if !admission::is_dns_subdomain(&name) {
        errors.push(invalid("metadata.name", &name, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"));
    }
    if replicas < 0 {
        errors.push(invalid(
            "spec.replicas",
            replicas,
            "must be greater than or equal to 0",
        ));
    }

    // 2. Selector.
    validate_selector(&spec.selector, spec.template.metadata.as_ref(), &mut errors);

    // 3. Template.
    validate_template(
        raw_new.pointer("/spec/template").unwrap_or(&Value::Null),
        &mut errors,
    );

    // 5–7. Strategy values.
    let strategy = &spec.update_strategy;
    let strategy_type = strategy.strategy_type();
    let parsed = |field: &str,
                  value: Option<&IntOrString>,
                  errors: &mut Vec<FieldError>|
     -> Option<IntOrString> {
        let value = value?;
        match intstr::validate(value) {
            Ok(()) => Some(value.clone()),
            Err(e) => {
                errors.push(invalid(
                    format!("spec.updateStrategy.{field}"),
                    show(value),
                    format!("failed GetScaledValueFromIntOrPercent for {field}: {e}"),
                ));
                None
            }
        }
    };
    if let Some(p) = parsed("partition", strategy.partition.as_ref(), &mut errors)
        && intstr::scaled_value(&p, replicas, Rounding::Up).unwrap_or(0) < 0
    {
        errors.push(invalid(
            "spec.updateStrategy.partition",
            show(&p),
            "must be greater than or equal to 0",
        ));
    }
    let max_unavailable = parsed(
        "maxUnavailable",
        strategy.max_unavailable.as_ref(),
        &mut errors,
    );
    let max_surge = parsed("maxSurge", strategy.max_surge.as_ref(), &mut errors);
    if let Some(v) = &spec.scale_strategy.max_unavailable
        && let Err(e) = intstr::validate(v)
    {
        errors.push(invalid(
            "spec.scaleStrategy.maxUnavailable",
            show(v),
            format!("failed GetScaledValueFromIntOrPercent for maxUnavailable: {e}"),
        ));
    }
    let surge = max_surge
        .as_ref()
        .map(|s| intstr::scaled_value(s, replicas, Rounding::Up).unwrap_or(0))
        .unwrap_or(0);
    if let Some(set) = strategy.max_surge.as_ref().filter(|_| surge > 0)
        && strategy_type == CloneSetUpdateStrategyType::InPlaceOnly
    {
        errors.push(invalid(
            "spec.updateStrategy.maxSurge",
            show(set),
            "can not use maxSurge with strategy type InPlaceOnly",
        ));
    }
    if replicas > 0 {
        let unavailable = max_unavailable
            .as_ref()
            .map(|u| intstr::scaled_value(u, replicas, Rounding::Up).unwrap_or(0))
            .unwrap_or_else(|| {
                intstr::scaled_value(&IntOrString::String("20%".into()), replicas, Rounding::Up)
                    .unwrap_or(1)
            });
        if unavailable < 1 && surge < 1 {
            errors.push(invalid(
                "spec.updateStrategy.maxUnavailable",
                max_unavailable
                    .as_ref()
                    .map(show)
                    .unwrap_or_else(|| "20%".into()),
                "maxUnavailable and maxSurge should not both be less than 1",
            ));
        }
    }

    if let Some(in_place) = &strategy.in_place_update_strategy {
        errors.extend(pre_download_errors(in_place));
    }

    // 8. Priority and scatter.
    if let Some(priority) = &strategy.priority_strategy {
        errors.extend(admission::priority_strategy_errors(
            priority,
            "spec.updateStrategy.priorityStrategy",
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, term) in strategy.scatter_strategy.iter().enumerate() {
        let path = format!("spec.updateStrategy.scatterStrategy[{i}]");
        if term.key.is_empty() {
            errors.push(required(format!("{path}.key"), "key can not be empty"));
        }
        if !seen.insert((term.key.clone(), term.value.clone())) {
            errors.push(invalid(
                &path,
                format!("{}={}", term.key, term.value),
                "duplicated key=value",
            ));
        }
    }

    // 9. podsToDelete.
    let mut names = BTreeSet::new();
    let previously: BTreeSet<&String> = old
        .map(|o| o.spec.scale_strategy.pods_to_delete.iter().collect())
        .unwrap_or_default();
    let ns = cs.namespace().unwrap_or_default();
    for (i, pod_name) in spec.scale_strategy.pods_to_delete.iter().enumerate() {
        let path = format!("spec.scaleStrategy.podsToDelete[{i}]");
        if !names.insert(pod_name) {
            errors.push(invalid(&path, pod_name, "duplicated"));
            continue;
        }
        if previously.contains(pod_name) {
            continue;
        }
        match pods.pod(&ns, pod_name) {
            None => errors.push(invalid(
                &path,
                pod_name,
                format!("find pod {pod_name} failed"),
            )),
            Some(pod) if pod.metadata.deletion_timestamp.is_some() => errors.push(invalid(
                &path,
                pod_name,
                format!("pod {pod_name} already terminating"),
            )),
            Some(pod) => {
                let owned = pod.owner_references().iter().any(|o| {
                    o.controller == Some(true) && Some(&o.uid) == cs.metadata.uid.as_ref()
                });
                if !owned {
                    errors.push(invalid(
                        &path,
                        pod_name,
                        format!("pod {pod_name} owner is not this CloneSet"),
                    ));
                }
            }
        }
    }

    // 10. progressDeadlineSeconds.
    if let Some(d) = spec.progress_deadline_seconds {
        if d < 0 {
            errors.push(invalid(
                "spec.progressDeadlineSeconds",
                d,
                "must be greater than or equal to 0",
            ));
        } else if d != i32::MAX && d <= spec.min_ready_seconds {
            errors.push(invalid(
                "spec.progressDeadlineSeconds",
                d,
                "must be greater than minReadySeconds",
            ));
        }
    }

    // 11. Updates.
    if let (Some(old), Some(raw_old)) = (old, raw_old) {
        if old.spec.selector != spec.selector {
            errors.push(forbidden(
                "spec",
                "updates to cloneset spec for fields other than 'replicas', 'template', 'lifecycle', 'scaleStrategy', 'updateStrategy', 'minReadySeconds', 'progressDeadlineSeconds', 'volumeClaimTemplates' and 'revisionHistoryLimit' are forbidden",
            ));
        }
        if strategy_type == CloneSetUpdateStrategyType::InPlaceOnly {
            let old_spec = raw_old
                .pointer("/spec/template/spec")
                .cloned()
                .unwrap_or(Value::Null);
            let new_spec = raw_new
                .pointer("/spec/template/spec")
                .cloned()
                .unwrap_or(Value::Null);
            if let Some(v) = kruise_inplace::in_place_only_violation(&old_spec, &new_spec) {
                errors.push(forbidden("spec.template.spec", v.to_string()));
            }
        }
    }
    errors
}

/// The image pre-download fields as upstream's webhook checks them (v1.9.0
/// pkg/webhook/cloneset/validating/validation.go): parallelism a whole number (no
/// percent), none of them negative.
fn pre_download_errors(in_place: &InPlaceUpdateStrategy) -> Vec<FieldError> {
    let path = |field: &str| format!("spec.updateStrategy.inPlaceUpdateStrategy.{field}");
    let mut errors = Vec::new();
    if let Some(p) = &in_place.image_pre_download_parallelism {
        let value = match p {
            IntOrString::Int(n) => Ok(i64::from(*n)),
            IntOrString::String(s) if s.ends_with('%') => {
                Err("imagePreDownloadParallelism does not support percentage value".to_string())
            }
            IntOrString::String(s) => s
                .parse::<i32>()
                .map(i64::from)
                .map_err(|e| format!("imagePreDownloadParallelism must be a valid integer: {e}")),
        };
        let problem = match value {
            Ok(n) if n < 0 => Some("imagePreDownloadParallelism must be non-negative".to_string()),
            Ok(_) => None,
            Err(e) => Some(e),
        };
        if let Some(detail) = problem {
            errors.push(invalid(
                path("imagePreDownloadParallelism"),
                show(p),
                detail,
            ));
        }
    }
    for (field, value) in [
        (
            "imagePreDownloadTimeoutSeconds",
            in_place.image_pre_download_timeout_seconds,
        ),
        (
            "imagePreDownloadMinUpdatedReadyPods",
            in_place.image_pre_download_min_updated_ready_pods,
        ),
    ] {
        if let Some(v) = value.filter(|v| *v < 0) {
            errors.push(invalid(
                path(field),
                v,
                "must be greater than or equal to 0",
            ));
        }
    }
    errors
}

fn show(v: &IntOrString) -> String {
    match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::String(s) => format!("\"{s}\""),
    }
}

fn validate_selector(
    selector: &LabelSelector,
    template: Option<&ObjectMeta>,
    errors: &mut Vec<FieldError>,
) {
    let empty = selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|m| m.is_empty());
    if empty {
        errors.push(invalid(
            "spec.selector",
            "{}",
            "empty selector is invalid for cloneset",
        ));
        return;
    }
    let labels = template.and_then(|m| m.labels.clone()).unwrap_or_default();
    match kruise_ordering::selector::matches(selector, &labels) {
        Err(e) => errors.push(invalid(
            "spec.selector",
            "",
            format!("invalid label selector: {e:?}"),
        )),
        Ok(false) => errors.push(invalid(
            "spec.template.metadata.labels",
            format!("{labels:?}"),
            "`selector` does not match template `labels`",
        )),
        Ok(true) => {}
    }
}

/// The part of Pod template validation a CloneSet adds or that would break the controller.
fn validate_template(template: &Value, errors: &mut Vec<FieldError>) {
    let containers = template
        .pointer("/spec/containers")
        .and_then(Value::as_array);
    match containers {
        None => errors.push(required(
            "spec.template.spec.containers",
            "must have at least one container",
        )),
        Some(list) if list.is_empty() => errors.push(required(
            "spec.template.spec.containers",
            "must have at least one container",
        )),
        Some(list) => {
            let mut names = BTreeSet::new();
            for (i, c) in list.iter().enumerate() {
                match c.get("name").and_then(Value::as_str) {
                    None | Some("") => errors.push(required(
                        format!("spec.template.spec.containers[{i}].name"),
                        "name is required",
                    )),
                    Some(n) if !names.insert(n.to_string()) => errors.push(invalid(
                        format!("spec.template.spec.containers[{i}].name"),
                        format!("\"{n}\""),
                        "Duplicate value",
                    )),
                    _ => {}
                }
                if c.get("image")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    errors.push(required(
                        format!("spec.template.spec.containers[{i}].image"),
                        "image is required",
                    ));
                }
            }
        }
    }
    if let Some(policy) = template
        .pointer("/spec/restartPolicy")
        .and_then(Value::as_str)
        && !policy.is_empty()
        && policy != "Always"
    {
        errors.push(not_supported(
            "spec.template.spec.restartPolicy",
            format!("\"{policy}\""),
            "supported values: \"Always\"",
        ));
    }
    if template
        .pointer("/spec/activeDeadlineSeconds")
        .is_some_and(|v| !v.is_null())
    {
        errors.push(forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in cloneset is not Supported",
        ));
    }
}

// ---------------------------------------------------------------- routes

/// The webhook routes served by `cloneset-ctl`. Deletion protection (docs/deletion-protection.md, and
/// openkruise/kruise v1.9.0 pkg/webhook/util/deletionprotection/deletion_protection.go) is not
/// here: `protection-ctl` owns every DELETE of a protected object, CloneSets included. `client`
/// reads Pods while `pods` is still listing (`None`: the cache alone).
pub fn routes(
    pods: Cache<Pod>,
    client: Option<kube::Client>,
    template_defaults: bool,
) -> Vec<Route> {
    let mutate = Route::new(
        MUTATE_PATH,
        "mutate-cloneset",
        defaulting(move |object, old| with_defaults_for(object, old, template_defaults)),
    );
    let validate_route = Route::new(
        VALIDATE_PATH,
        "validate-cloneset",
        dynamic(move |req| {
            let (pods, client) = (pods.clone(), client.clone());
            async move {
                let (raw_new, raw_old) = json_objects(&req)?;
                let typed_req: AdmissionRequest<CloneSet> = kruise_runtime::webhook::decode(req)?;
                let response = AdmissionResponse::from(&typed_req);
                let (Some(cs), Some(raw_new)) = (&typed_req.object, &raw_new) else {
                    return Ok(response);
                };
                let pods =
                    pods_to_delete(&pods, client.as_ref(), cs, typed_req.old_object.as_ref())
                        .await?;
                let errors = validate(
                    cs,
                    typed_req.old_object.as_ref(),
                    raw_new,
                    raw_old.as_ref(),
                    &pods,
                );
                if errors.is_empty() {
                    return Ok(response);
                }
                Ok(deny_invalid(response, &errors))
            }
        }),
    );
    vec![mutate, validate_route, conversion_route()]
}

/// v1beta1 clients are served through conversion (stored and reconciled: v1alpha1).
pub fn conversion_route() -> Route {
    Route::conversion(
        CONVERT_PATH,
        "convert-cloneset",
        "clonesets.apps.kruise.io",
        std::sync::Arc::new(kruise_api::conversion::convert_cloneset),
    )
}

/// The configurations, named for the scope: cluster-wide, or (for tests and namespaced
/// installs) one namespace.
pub fn configurations(
    watch_namespace: Option<&str>,
) -> (
    Vec<ValidatingWebhookConfiguration>,
    Vec<MutatingWebhookConfiguration>,
) {
    config::KindAdmission {
        kind: "cloneset",
        plural: "clonesets",
        versions: &["v1alpha1"],
        validate: (VALIDATE_PATH, &["CREATE", "UPDATE"]),
        mutate: (MUTATE_PATH, &["CREATE", "UPDATE"]),
    }
    .configurations(watch_namespace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::keys;
    use kruise_runtime::webhook::aggregate;

    struct NoPods;
    impl PodLookup for NoPods {
        fn pod(&self, _: &str, _: &str) -> Option<Arc<Pod>> {
            None
        }
    }

    fn object(spec: Value) -> Value {
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "metadata": {"name": "cs", "namespace": "ns", "uid": "u"}, "spec": spec})
    }

    fn base_spec() -> Value {
        json!({
            "selector": {"matchLabels": {"app": "cs"}},
            "template": {"metadata": {"labels": {"app": "cs"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx:alpine"}]}}
        })
    }

    fn check(spec: Value) -> Vec<String> {
        let raw = with_defaults(&object(spec));
        let cs: CloneSet = serde_json::from_value(raw.clone()).unwrap();
        validate(&cs, None, &raw, None, &NoPods)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn check_update(old: Value, new: Value) -> Vec<String> {
        let (raw_old, raw_new) = (with_defaults(&object(old)), with_defaults(&object(new)));
        let old: CloneSet = serde_json::from_value(raw_old.clone()).unwrap();
        let new: CloneSet = serde_json::from_value(raw_new.clone()).unwrap();
        validate(&new, Some(&old), &raw_new, Some(&raw_old), &NoPods)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn with(mut spec: Value, pointer: &str, value: Value) -> Value {
        let mut parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
        let last = parts.pop().unwrap();
        let mut cur = &mut spec;
        for p in parts {
            cur = cur
                .as_object_mut()
                .unwrap()
                .entry(p)
                .or_insert_with(|| json!({}));
        }
        cur.as_object_mut().unwrap().insert(last.into(), value);
        spec
    }

    #[test]
    fn defaults_are_upstreams() {
        let d = with_defaults(&object(base_spec()));
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(
            d["spec"]["updateStrategy"],
            json!({"type": "ReCreate", "partition": 0, "maxUnavailable": "20%", "maxSurge": 0})
        );
        let d = with_defaults(&object(with(
            base_spec(),
            "/updateStrategy/type",
            json!("InPlaceIfPossible"),
        )));
        assert_eq!(
            d["spec"]["updateStrategy"]["inPlaceUpdateStrategy"],
            json!({})
        );
        // Idempotent: a defaulted object needs no patch.
        assert!(defaults_patch(&d, None, true).0.is_empty());
        // Unknown template fields survive defaulting.
        let odd = with(base_spec(), "/template/spec/futureField", json!({"x": 1}));
        assert_eq!(
            with_defaults(&object(odd))["spec"]["template"]["spec"]["futureField"]["x"],
            1
        );
    }

    #[test]
    fn templates_get_core_defaults_on_create_and_on_defaulted_updates() {
        let created = with_defaults(&object(base_spec()));
        let c = &created["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(
            created["spec"]["template"]["spec"]["dnsPolicy"],
            "ClusterFirst"
        );

        // Spelling out a default is the same template: no new revision.
        let explicit = with(
            base_spec(),
            "/template/spec/containers",
            json!([{"name": "nginx", "image": "nginx:alpine", "terminationMessagePolicy": "File"}]),
        );
        let updated = with_defaults_for(&object(explicit.clone()), Some(&created), true);
        assert_eq!(updated["spec"]["template"], created["spec"]["template"]);

        // A CloneSet stored without template defaults keeps its template as it is.
        let legacy = spec_defaults(&object(base_spec()));
        let bumped = with(
            base_spec(),
            "/template/spec/containers",
            json!([{"name": "nginx", "image": "nginx:1.7.9"}]),
        );
        let kept = with_defaults_for(&object(bumped.clone()), Some(&legacy), true);
        assert_eq!(
            kept["spec"]["template"]["spec"]["containers"][0],
            json!({"name": "nginx", "image": "nginx:1.7.9"})
        );

        // TemplateNoDefaults.
        let raw = with_defaults_for(&object(base_spec()), None, false);
        assert_eq!(
            raw["spec"]["template"]["spec"]["containers"][0],
            json!({"name": "nginx", "image": "nginx:alpine"})
        );
        assert_eq!(raw["spec"]["replicas"], 1, "spec defaults still apply");
    }

    #[test]
    fn an_image_bump_keeps_the_stored_pull_policy() {
        let old = with_defaults(&object(base_spec()));
        let latest = with(
            base_spec(),
            "/template/spec/containers",
            json!([{"name": "nginx", "image": "nginx"}]),
        );
        let d = with_defaults_for(&object(latest), Some(&old), true);
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent",
            "kept, not re-derived as Always"
        );
    }

    #[test]
    fn in_place_only_image_bump_stays_valid_with_template_defaults() {
        let old = with(base_spec(), "/updateStrategy/type", json!("InPlaceOnly"));
        let raw_old = with_defaults(&object(old.clone()));
        let new = with(
            old,
            "/template/spec/containers",
            json!([{"name": "nginx", "image": "nginx:1.7.9"}]),
        );
        let raw_new = with_defaults_for(&object(new), Some(&raw_old), true);
        let (o, n): (CloneSet, CloneSet) = (
            serde_json::from_value(raw_old.clone()).unwrap(),
            serde_json::from_value(raw_new.clone()).unwrap(),
        );
        assert!(validate(&n, Some(&o), &raw_new, Some(&raw_old), &NoPods).is_empty());
    }

    #[test]
    fn a_valid_cloneset_passes() {
        assert!(check(base_spec()).is_empty(), "{:?}", check(base_spec()));
    }

    #[test]
    fn selector_must_match_template_labels() {
        let errs = check(with(
            base_spec(),
            "/selector",
            json!({"matchLabels": {"app": "other"}}),
        ));
        assert!(
            errs.iter().any(
                |e| e.starts_with("spec.template.metadata.labels: Invalid value")
                    && e.contains("`selector` does not match template `labels`")
            ),
            "{errs:?}"
        );
        let errs = check(with(base_spec(), "/selector", json!({})));
        assert!(
            errs.iter()
                .any(|e| e.contains("empty selector is invalid for cloneset")),
            "{errs:?}"
        );
    }

    #[test]
    fn negative_replicas_and_bad_strategy_values_are_rejected() {
        let errs = check(with(base_spec(), "/replicas", json!(-1)));
        assert_eq!(
            errs,
            ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]
        );
        let errs = check(with(
            base_spec(),
            "/updateStrategy",
            json!({"partition": "abc"}),
        ));
        assert!(errs.iter().any(|e| e == "spec.updateStrategy.partition: Invalid value: \"abc\": failed GetScaledValueFromIntOrPercent for partition: invalid type: string is not a percentage"), "{errs:?}");
        let errs = check(with(
            base_spec(),
            "/updateStrategy",
            json!({"maxSurge": "x%"}),
        ));
        assert!(
            errs.iter()
                .any(|e| e.starts_with("spec.updateStrategy.maxSurge: Invalid value")),
            "{errs:?}"
        );
        let errs = check(with(
            base_spec(),
            "/updateStrategy",
            json!({"partition": -2}),
        ));
        assert!(
            errs.iter()
                .any(|e| e.contains("spec.updateStrategy.partition")
                    && e.contains("greater than or equal to 0")),
            "{errs:?}"
        );
    }

    #[test]
    fn pre_download_fields_are_whole_non_negative_numbers() {
        let in_place = |v: Value| {
            check(with(
                base_spec(),
                "/updateStrategy",
                json!({"type": "InPlaceIfPossible", "inPlaceUpdateStrategy": v}),
            ))
        };
        let path = "spec.updateStrategy.inPlaceUpdateStrategy";
        assert_eq!(
            in_place(json!({"imagePreDownloadParallelism": "50%"})),
            [format!(
                "{path}.imagePreDownloadParallelism: Invalid value: \"50%\": imagePreDownloadParallelism does not support percentage value"
            )]
        );
        assert_eq!(
            in_place(json!({"imagePreDownloadParallelism": -1,
                            "imagePreDownloadTimeoutSeconds": -5,
                            "imagePreDownloadMinUpdatedReadyPods": -2})),
            [
                format!(
                    "{path}.imagePreDownloadParallelism: Invalid value: -1: imagePreDownloadParallelism must be non-negative"
                ),
                format!(
                    "{path}.imagePreDownloadTimeoutSeconds: Invalid value: -5: must be greater than or equal to 0"
                ),
                format!(
                    "{path}.imagePreDownloadMinUpdatedReadyPods: Invalid value: -2: must be greater than or equal to 0"
                ),
            ]
        );
        let errs = in_place(json!({"imagePreDownloadParallelism": "many"}));
        assert!(
            errs[0].contains("imagePreDownloadParallelism must be a valid integer"),
            "{errs:?}"
        );
        assert!(
            in_place(json!({"imagePreDownloadParallelism": "3",
                            "imagePreDownloadTimeoutSeconds": 0,
                            "imagePreDownloadMinUpdatedReadyPods": 0}))
            .is_empty()
        );
    }

    #[test]
    fn max_surge_is_not_for_in_place_only() {
        let errs = check(with(
            base_spec(),
            "/updateStrategy",
            json!({"type": "InPlaceOnly", "maxSurge": 1}),
        ));
        assert!(errs.iter().any(|e| e == "spec.updateStrategy.maxSurge: Invalid value: 1: can not use maxSurge with strategy type InPlaceOnly"), "{errs:?}");
    }

    #[test]
    fn unavailable_and_surge_cannot_both_be_zero() {
        let errs = check(with(
            base_spec(),
            "/updateStrategy",
            json!({"maxUnavailable": 0, "maxSurge": 0}),
        ));
        assert!(
            errs.iter()
                .any(|e| e.contains("maxUnavailable and maxSurge should not both be less than 1")),
            "{errs:?}"
        );
        assert!(
            check(with(
                base_spec(),
                "/updateStrategy",
                json!({"maxUnavailable": 0, "maxSurge": 1})
            ))
            .is_empty()
        );
    }

    #[test]
    fn template_rules() {
        let errs = check(with(
            base_spec(),
            "/template/spec/restartPolicy",
            json!("Never"),
        ));
        assert!(
            errs.iter()
                .any(|e| e
                    .starts_with("spec.template.spec.restartPolicy: Unsupported value: \"Never\"")),
            "{errs:?}"
        );
        let errs = check(with(
            base_spec(),
            "/template/spec/activeDeadlineSeconds",
            json!(5),
        ));
        assert!(errs.iter().any(|e| e == "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in cloneset is not Supported"));
    }

    #[test]
    fn priority_and_scatter_rules() {
        let errs = check(with(
            base_spec(),
            "/updateStrategy/priorityStrategy",
            json!({"weightPriority": [{"weight": 101, "matchSelector": {"matchLabels": {"a": "b"}}}]}),
        ));
        assert!(
            errs.iter()
                .any(|e| e.contains("weight must be valid number in the range 1-100")),
            "{errs:?}"
        );
        let errs = check(with(
            base_spec(),
            "/updateStrategy/priorityStrategy",
            json!({"weightPriority": [{"weight": 1, "matchSelector": {}}], "orderPriority": [{"orderedKey": ""}]}),
        ));
        assert!(
            errs.iter()
                .any(|e| e.contains("only one of weightPriority and orderPriority")),
            "{errs:?}"
        );
        assert!(
            errs.iter().any(|e| e.contains("selector can not be empty")),
            "{errs:?}"
        );
        let errs = check(with(
            base_spec(),
            "/updateStrategy/scatterStrategy",
            json!([{"key": "a", "value": "b"}, {"key": "a", "value": "b"}]),
        ));
        assert!(errs.iter().any(|e| e.contains("duplicated")), "{errs:?}");
    }

    #[test]
    fn in_place_only_updates_may_only_change_images() {
        let old = with(base_spec(), "/updateStrategy/type", json!("InPlaceOnly"));
        let new_image = with(
            old.clone(),
            "/template/spec/containers",
            json!([{"name": "nginx", "image": "nginx:1.7.9"}]),
        );
        assert!(check_update(old.clone(), new_image).is_empty());
        let new_env = with(
            old.clone(),
            "/template/spec/containers",
            json!([{"name": "nginx", "image": "nginx:alpine", "env": [{"name": "X", "value": "1"}]}]),
        );
        let errs = check_update(old.clone(), new_env);
        assert_eq!(
            errs,
            [
                "spec.template.spec: Forbidden: only allowed to update images in spec for InPlaceOnly, but found add /containers/0/env"
            ]
        );
        let new_labels = with(
            with(
                old.clone(),
                "/template/metadata/labels",
                json!({"app": "cs", "v": "2"}),
            ),
            "/selector",
            json!({"matchLabels": {"app": "cs"}}),
        );
        assert!(
            check_update(old, new_labels).is_empty(),
            "metadata may change"
        );
    }

    #[test]
    fn selector_is_immutable() {
        let new = with(
            with(
                base_spec(),
                "/selector",
                json!({"matchLabels": {"app": "cs", "x": "y"}}),
            ),
            "/template/metadata/labels",
            json!({"app": "cs", "x": "y"}),
        );
        let errs = check_update(base_spec(), new);
        assert!(
            errs.iter().any(|e| e
                .starts_with("spec: Forbidden: updates to cloneset spec for fields other than")),
            "{errs:?}"
        );
    }

    #[test]
    fn pods_to_delete_must_name_owned_pods() {
        let errs = check(with(
            base_spec(),
            "/scaleStrategy/podsToDelete",
            json!(["cs-abcde", "cs-abcde"]),
        ));
        assert!(
            errs.iter().any(|e| e.contains("find pod cs-abcde failed")),
            "{errs:?}"
        );
        assert!(errs.iter().any(|e| e.contains("duplicated")), "{errs:?}");
    }

    #[test]
    fn scoped_configurations_name_and_label_their_namespace() {
        let (v, m) = configurations(Some("e2e-x"));
        assert_eq!(
            v[0].metadata.name.as_deref(),
            Some("kruise-cloneset-validating-e2e-x")
        );
        assert_eq!(
            v[0].metadata.labels.as_ref().unwrap()[keys::WEBHOOK_SCOPE],
            "e2e-x"
        );
        assert_eq!(
            m[0].metadata.labels.as_ref().unwrap()[keys::WEBHOOK_SCOPE],
            "e2e-x"
        );
        let selector = v[0].webhooks.as_ref().unwrap()[0]
            .namespace_selector
            .clone()
            .unwrap();
        assert_eq!(
            selector.match_labels.unwrap()["kubernetes.io/metadata.name"],
            "e2e-x"
        );
        let (v, _) = configurations(None);
        assert_eq!(
            v[0].metadata.name.as_deref(),
            Some("kruise-cloneset-validating")
        );
        assert!(v[0].metadata.labels.is_none());
    }

    #[test]
    fn aggregate_formats_like_the_apiserver() {
        let a = invalid("spec.a", 1, "x");
        let b = forbidden("spec.b", "y");
        assert_eq!(
            aggregate(std::slice::from_ref(&a)),
            "spec.a: Invalid value: 1: x"
        );
        assert_eq!(
            aggregate(&[a, b]),
            "[spec.a: Invalid value: 1: x, spec.b: Forbidden: y]"
        );
    }
}
