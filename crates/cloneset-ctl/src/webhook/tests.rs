use super::*;
use kruise_api::keys;
use kruise_runtime::webhook::aggregate;
use kruise_runtime::webhook::field::{forbidden, invalid};
use serde_json::{Value, json};
use std::sync::Arc;

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
    let legacy = defaults::spec_defaults(&object(base_spec()));
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
        errs.iter().any(
            |e| e.starts_with("spec.template.spec.restartPolicy: Unsupported value: \"Never\"")
        ),
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
        errs.iter()
            .any(|e| e
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
