//! Validation against upstream's messages (pkg/webhook/ephemeraljob/validating).

use super::*;
use kruise_api::apps_v1alpha1::{EphemeralContainerTemplateSpec, EphemeralJobSpec};

fn job_with(containers: serde_json::Value) -> EphemeralJob {
    let spec: EphemeralJobSpec = serde_json::from_value(serde_json::json!({
        "selector": {"matchLabels": {"run": "nginx"}},
        "template": {"ephemeralContainers": containers},
    }))
    .unwrap();
    EphemeralJob::new("ejob", spec)
}

fn ok_container() -> serde_json::Value {
    serde_json::json!({
        "name": "debugger", "image": "busybox:1.32", "command": ["sleep", "3"],
        "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File",
        "targetContainerName": "nginx",
    })
}

#[test]
fn a_valid_job_passes() {
    assert!(validate(&job_with(serde_json::json!([ok_container()]))).is_empty());
    // An empty template is not refused (upstream reports it in status: phase Error).
    let empty = EphemeralJob::new(
        "e",
        EphemeralJobSpec {
            template: EphemeralContainerTemplateSpec::default(),
            ..Default::default()
        },
    );
    assert!(validate(&empty).is_empty());
}

#[test]
fn policies_are_required_as_no_defaults_apply() {
    let mut c = ok_container();
    c.as_object_mut().unwrap().remove("imagePullPolicy");
    c.as_object_mut()
        .unwrap()
        .remove("terminationMessagePolicy");
    assert_eq!(
        validate(&job_with(serde_json::json!([c]))),
        vec![
            "ephemeralContainers[0].terminationMessagePolicy: Required value",
            "ephemeralContainers[0].imagePullPolicy: Required value",
        ]
    );
}

#[test]
fn names_images_and_unsupported_values() {
    let mut a = ok_container();
    a["name"] = "Bad_Name".into();
    a["image"] = " busybox".into();
    a["imagePullPolicy"] = "Sometimes".into();
    let mut b = ok_container();
    b["name"] = "".into();
    b["image"] = "".into();
    b["terminationMessagePolicy"] = "Log".into();
    let errors = validate(&job_with(serde_json::json!([a, b])));
    assert_eq!(
        errors,
        vec![
            format!("ephemeralContainers[0].name: Invalid value: \"Bad_Name\": {DNS_LABEL}"),
            "ephemeralContainers[0].imagePullPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"IfNotPresent\", \"Never\"".to_string(),
            "ephemeralContainers[0].image: Invalid value: \" busybox\": must not have leading or trailing whitespace".to_string(),
            "ephemeralContainers[1].name: Required value".to_string(),
            "ephemeralContainers[1].image: Required value".to_string(),
            "ephemeralContainers[1].terminationMessagePolicy: Unsupported value: \"Log\": supported values: \"File\", \"FallbackToLogsOnError\"".to_string(),
        ]
    );
}

#[test]
fn duplicates_forbidden_fields_and_subpaths() {
    let mut b = ok_container();
    b["ports"] = serde_json::json!([{"containerPort": 80}]);
    b["readinessProbe"] = serde_json::json!({"tcpSocket": {"port": 80}});
    b["volumeMounts"] = serde_json::json!([{"name": "v", "mountPath": "/v", "subPath": "x"}]);
    b["env"] = serde_json::json!([{"name": "1BAD", "value": "x"}]);
    let errors = validate(&job_with(serde_json::json!([ok_container(), b])));
    assert_eq!(
        errors,
        vec![
            format!("ephemeralContainers[1].env[0].name: Invalid value: \"1BAD\": {ENV_NAME}"),
            "ephemeralContainers[1].name: Duplicate value: \"debugger\"".to_string(),
            "ephemeralContainers[1].ports: Forbidden: cannot be set for an Ephemeral Container".to_string(),
            "ephemeralContainers[1].readinessProbe: Forbidden: cannot be set for an Ephemeral Container".to_string(),
            "ephemeralContainers[1].volumeMounts[0].subPath: Forbidden: cannot be set for an Ephemeral Container".to_string(),
        ]
    );
    assert!(aggregate(&errors).starts_with("[ephemeralContainers[1].env[0].name"));
}

/// Go clients (OpenKruise's e2e suite among them) send the zero `resources: {}` with every
/// ephemeral container: not a set field. A non-empty one is.
#[test]
fn empty_resources_are_unset_as_go_zero_values_are() {
    let mut a = ok_container();
    a["resources"] = serde_json::json!({});
    assert_eq!(
        validate(&job_with(serde_json::json!([a]))),
        Vec::<String>::new()
    );
    let mut b = ok_container();
    b["resources"] = serde_json::json!({"limits": {}});
    assert_eq!(
        validate(&job_with(serde_json::json!([b]))),
        vec![
            "ephemeralContainers[0].resources: Forbidden: cannot be set for an Ephemeral Container"
                .to_string()
        ]
    );
}

#[test]
fn configuration_names_upstream_webhook() {
    let (validating, mutating) = configurations(None);
    assert!(mutating.is_empty());
    let hooks = validating[0].webhooks.as_ref().unwrap();
    assert_eq!(hooks[0].name, "vephemeraljobs.kb.io");
    let rules = hooks[0].rules.as_ref().unwrap();
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["ephemeraljobs".to_string()][..])
    );
}
