use super::*;
use serde_json::json;

fn job(spec: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "ImagePullJob",
           "metadata": {"name": "job-with-always"}, "spec": spec})
}

fn messages(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The example ImagePullJob of OpenKruise's documentation (ImagePullJob user manual).
fn sample_job() -> Value {
    json!({
        "image": "nginx:1.9.1",
        "parallelism": 10,
        "selector": {"names": ["node-1", "node-2"]},
        "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 1200,
                             "ttlSecondsAfterFinished": 300},
        "pullPolicy": {"backoffLimit": 3, "timeoutSeconds": 300},
        "pullSecrets": ["secret-name1", "secret-name2"],
    })
}

#[test]
fn the_sample_job_is_valid() {
    assert_eq!(messages(&validate_job(&job(sample_job()), None)), "");
}

#[test]
fn the_sample_as_printed_is_rejected_for_names_with_labels() {
    let mut spec = sample_job();
    spec["selector"]["matchLabels"] = json!({"node-type": "xxx"});
    let m = messages(&validate_job(&job(spec), None));
    assert!(
        m.contains("spec.selector")
            && m.contains("can not set both names and labelSelector in this spec.selector"),
        "{m}"
    );
}

#[test]
fn selector_rules() {
    let mut spec = sample_job();
    spec["selector"]["names"] = json!(["a", "a"]);
    spec["podSelector"] = json!({"matchLabels": {"pod-label": "xxx"}});
    let m = messages(&validate_job(&job(spec), None));
    assert!(m.contains("duplicated name in selector names"), "{m}");
    assert!(
        m.contains("can not set both selector and podSelector"),
        "{m}"
    );
}

#[test]
fn parallelism_cases_of_the_spec() {
    for (value, ok) in [
        (json!("0"), true),
        (json!(0), true),
        (json!(3), true),
        (json!("-1"), false),
        (json!(-1), false),
        (json!("10%"), false),
    ] {
        let mut spec = sample_job();
        spec["parallelism"] = value.clone();
        let m = messages(&validate_job(&job(spec), None));
        assert_eq!(m.is_empty(), ok, "{value}: {m}");
        if value == json!("10%") {
            assert!(
                m.contains("parallelism does not support percentage value"),
                "{m}"
            );
        }
    }
}

#[test]
fn image_is_required_and_parsed() {
    let mut spec = sample_job();
    spec["image"] = json!("");
    assert!(messages(&validate_job(&job(spec.clone()), None)).contains("image can not be empty"));
    spec["image"] = json!("nginx:");
    assert!(
        messages(&validate_job(&job(spec), None)).contains("spec.image"),
        "an empty tag does not parse"
    );
}

#[test]
fn deadline_below_timeout_and_never_with_deadline() {
    let mut spec = sample_job();
    spec["completionPolicy"]["activeDeadlineSeconds"] = json!(200);
    let m = messages(&validate_job(&job(spec), None));
    assert!(
        m.contains("completionPolicy.activeDeadlineSeconds must be greater than pullPolicy.timeoutSeconds(default 600)"),
        "{m}"
    );
    let mut spec = sample_job();
    spec["completionPolicy"]["type"] = json!("Never");
    let m = messages(&validate_job(&job(spec), None));
    assert!(
        m.contains("activeDeadlineSeconds and ttlSecondsAfterFinished can only work with Always CompletionPolicyType"),
        "{m}"
    );
}

#[test]
fn pull_secrets_are_immutable() {
    let old = job(sample_job());
    let mut spec = sample_job();
    spec["pullSecrets"] = json!(["other"]);
    let m = messages(&validate_job(&job(spec), Some(&old)));
    assert!(m.contains("spec.pullSecrets is immutable"), "{m}");
    assert_eq!(messages(&validate_job(&old, Some(&old))), "");
}

#[test]
fn list_job_rules() {
    let list = |images: Value| json!({"spec": {"images": images}});
    assert_eq!(
        messages(&validate_list(&list(json!(["nginx:1", "busybox"])))),
        ""
    );
    assert!(messages(&validate_list(&list(json!([])))).contains("spec.images"));
    assert!(
        messages(&validate_list(&list(json!(["nginx:1", "nginx:1"])))).contains("duplicated image")
    );
    let many: Vec<String> = (0..256).map(|i| format!("img{i}")).collect();
    assert!(messages(&validate_list(&list(json!(many)))).contains("more than 255"));
}

#[test]
fn node_image_rules() {
    let ni = |images: Value| json!({"spec": {"images": images}});
    let good = json!({"ubuntu": {"tags": [{"tag": "latest", "createdAt": "2024-01-01T00:00:00Z",
                       "pullPolicy": {"ttlSecondsAfterFinished": 300}}]}});
    assert_eq!(messages(&validate_node_image(&ni(good))), "");
    let m = messages(&validate_node_image(&ni(json!({"ubuntu": {"tags": [
        {"tag": "a", "createdAt": "2024-01-01T00:00:00Z", "pullPolicy": {}},
        {"tag": "a", "version": -1},
    ]}}))));
    assert!(m.contains("duplicated tag a for image ubuntu"), "{m}");
    assert!(m.contains("createdAt for ubuntu/a must set"), "{m}");
    assert!(
        m.contains("pullPolicy.ttlSecondsAfterFinished for ubuntu/a must set"),
        "{m}"
    );
    assert!(m.contains("version must be non-negative"), "{m}");
    let many: serde_json::Map<String, Value> = (0..257)
        .map(|i| (format!("img{i}"), json!({"tags": []})))
        .collect();
    assert!(
        messages(&validate_node_image(&ni(Value::Object(many))))
            .contains("spec images length 257 can not be more than 256")
    );
}

#[test]
fn namespaced_configurations_leave_node_images_alone() {
    let (v, m) = configurations(Some("ns1"));
    assert!(m.is_empty());
    let names: Vec<_> = v[0]
        .webhooks
        .iter()
        .flatten()
        .map(|w| w.name.as_str())
        .collect();
    assert_eq!(names, ["vimagepulljob.kb.io", "vimagelistpulljob.kb.io"]);
    let (v, _) = configurations(None);
    assert_eq!(v[0].webhooks.as_ref().unwrap().len(), 3);
    assert_eq!(
        v[0].metadata.name.as_deref(),
        Some("kruise-imagepulljob-validating")
    );
}
