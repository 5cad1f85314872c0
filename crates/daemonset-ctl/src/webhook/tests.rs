//! Admission tests: defaulting and validation with upstream's messages.

use serde_json::{Value, json};

use super::*;

fn nginx() -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "DaemonSet",
        "metadata": {"name": "nginx", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "nginx"}},
            "template": {
                "metadata": {"labels": {"k8s-app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9"}]}
            }
        }
    })
}

fn errors_of(obj: &Value, old: Option<&Value>) -> Vec<String> {
    validate_json(&with_defaults(obj), old.map(with_defaults).as_ref())
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn with(mut obj: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let mut cur = &mut obj;
    for part in parent.split('/').skip(1) {
        cur = cur
            .as_object_mut()
            .unwrap()
            .entry(part)
            .or_insert_with(|| json!({}));
    }
    cur.as_object_mut().unwrap().insert(key.into(), value);
    obj
}

#[test]
fn native_manifest_gets_native_defaults_and_no_template_defaults() {
    let d = with_defaults(&nginx());
    assert_eq!(d["spec"]["burstReplicas"], 250);
    assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
    let s = &d["spec"]["updateStrategy"];
    assert_eq!(s["type"], "RollingUpdate");
    assert_eq!(
        s["rollingUpdate"],
        json!({"rollingUpdateType": "Standard", "maxUnavailable": 1, "maxSurge": 0})
    );
    assert!(s["rollingUpdate"].get("partition").is_none());
    assert!(
        d["spec"]["template"]["spec"]["containers"][0]
            .get("imagePullPolicy")
            .is_none()
    );
    assert!(errors_of(&nginx(), None).is_empty());
    // Idempotent.
    assert_eq!(with_defaults(&d), d);
}

#[test]
fn surging_is_defaulted_to_standard_with_surge_one() {
    let obj = with(
        nginx(),
        "/spec/updateStrategy/rollingUpdate/rollingUpdateType",
        json!("Surging"),
    );
    let d = with_defaults(&obj);
    assert_eq!(
        d["spec"]["updateStrategy"]["rollingUpdate"],
        json!({"rollingUpdateType": "Standard", "maxSurge": 1, "maxUnavailable": 0})
    );
    assert!(errors_of(&obj, None).is_empty());
    let on_delete = with(nginx(), "/spec/updateStrategy/type", json!("OnDelete"));
    assert!(
        with_defaults(&on_delete)["spec"]["updateStrategy"]
            .get("rollingUpdate")
            .is_none()
    );
}

#[test]
fn selector_rules() {
    let empty = with(nginx(), "/spec/selector", json!({}));
    assert_eq!(
        errors_of(&empty, None),
        ["spec.selector: Invalid value: {}: empty selector is invalid for daemonset"]
    );
    let other = with(
        nginx(),
        "/spec/selector/matchLabels",
        json!({"k8s-app": "x"}),
    );
    assert_eq!(
        errors_of(&other, None),
        [
            "spec.template.metadata.labels: Invalid value: {\"k8s-app\":\"nginx\"}: `selector` does not match template `labels`"
        ]
    );
}

#[test]
fn template_rules() {
    let obj = with(
        nginx(),
        "/spec/template/spec/restartPolicy",
        json!("OnFailure"),
    );
    let obj = with(obj, "/spec/template/spec/activeDeadlineSeconds", json!(5));
    let obj = with(obj, "/spec/minReadySeconds", json!(-1));
    assert_eq!(
        errors_of(&obj, None),
        [
            "spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in DaemonSet is not Supported",
            "spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0",
        ]
    );
}

#[test]
fn surge_and_unavailable_rules() {
    let ru = "/spec/updateStrategy/rollingUpdate";
    let both = with(
        with(nginx(), &format!("{ru}/maxSurge"), json!(1)),
        &format!("{ru}/maxUnavailable"),
        json!(1),
    );
    assert_eq!(
        errors_of(&both, None),
        [
            "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero"
        ]
    );
    let neither = with(
        with(nginx(), &format!("{ru}/maxSurge"), json!(0)),
        &format!("{ru}/maxUnavailable"),
        json!("0%"),
    );
    assert_eq!(
        errors_of(&neither, None),
        [
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"
        ]
    );
    let in_place = with(
        with(nginx(), &format!("{ru}/maxSurge"), json!("10%")),
        &format!("{ru}/rollingUpdateType"),
        json!("InPlaceIfPossible"),
    );
    let in_place = with(in_place, &format!("{ru}/maxUnavailable"), json!(0));
    assert_eq!(
        errors_of(&in_place, None),
        [
            "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: \"10%\": must be 0 for InPlaceIfPossible type"
        ]
    );
    let too_much = with(nginx(), &format!("{ru}/maxUnavailable"), json!("101%"));
    assert_eq!(
        errors_of(&too_much, None),
        [
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"101%\": must not be greater than 100%"
        ]
    );
    let partition = with(nginx(), &format!("{ru}/partition"), json!(-1));
    assert_eq!(
        errors_of(&partition, None),
        [
            "spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0"
        ]
    );
    let unknown = with(nginx(), &format!("{ru}/rollingUpdateType"), json!("Fast"));
    assert_eq!(
        errors_of(&unknown, None),
        [
            "spec.updateStrategy.rollingUpdate.rollingUpdateType: Unsupported value: \"Fast\": supported values: \"Standard\", \"Surging\", \"InPlaceIfPossible\""
        ]
    );
}

#[test]
fn in_place_update_hook_is_refused() {
    let obj = with(
        nginx(),
        "/spec/lifecycle",
        json!({"preDelete": {"markPodNotReady": true}, "inPlaceUpdate": {"finalizersHandler": ["x"]}}),
    );
    assert_eq!(
        errors_of(&obj, None),
        ["spec.lifecycle.inPlaceUpdate: Forbidden: inPlaceUpdate hook has not supported yet"]
    );
}

#[test]
fn update_may_change_only_some_fields() {
    let old = nginx();
    let ok = with(
        nginx(),
        "/spec/template/spec/containers",
        json!([{"name": "nginx", "image": "nginx:1.9.1"}]),
    );
    let ok = with(ok, "/spec/updateStrategy/rollingUpdate/paused", json!(true));
    assert!(errors_of(&ok, Some(&old)).is_empty());
    let selector = with(
        nginx(),
        "/spec/selector/matchLabels",
        json!({"k8s-app": "nginx", "x": "y"}),
    );
    let selector = with(
        selector,
        "/spec/template/metadata/labels",
        json!({"k8s-app": "nginx", "x": "y"}),
    );
    assert_eq!(
        errors_of(&selector, Some(&old)),
        [format!("spec: Forbidden: {FORBIDDEN_UPDATE}")]
    );
}

#[test]
fn configurations_cover_daemonsets_only() {
    let (validating, mutating) = configurations(Some("ns1"));
    let v = &validating[0];
    assert!(
        v.metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("kruise-daemonset")
    );
    let rule = &v.webhooks.as_ref().unwrap()[0].rules.as_ref().unwrap()[0];
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["daemonsets".to_string()][..])
    );
    assert_eq!(
        mutating[0].webhooks.as_ref().unwrap()[0].name,
        "mdaemonset.kb.io"
    );
}
