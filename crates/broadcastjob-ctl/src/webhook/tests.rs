use super::*;

fn job(spec: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "BroadcastJob",
           "metadata": {"name": "bcj-demo"}, "spec": spec})
}

fn template(restart: &str) -> Value {
    json!({"spec": {"restartPolicy": restart,
                    "containers": [{"name": "counter", "image": "busybox"}]}})
}

fn messages(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn defaults_fill_policies_and_the_template() {
    let out = with_defaults_for(&job(json!({"template": template("Never")})), None, true);
    assert_eq!(out["spec"]["completionPolicy"]["type"], "Always");
    assert_eq!(out["spec"]["failurePolicy"]["type"], "FailFast");
    assert_eq!(out["spec"]["parallelism"], 2147483647);
    assert_eq!(out["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");
    let kept = with_defaults_for(
        &job(json!({"template": template("Never"), "parallelism": "40%",
                    "completionPolicy": {"type": "Never"}})),
        None,
        false,
    );
    assert_eq!(kept["spec"]["parallelism"], "40%");
    assert_eq!(kept["spec"]["completionPolicy"]["type"], "Never");
    assert!(kept["spec"]["template"]["spec"].get("dnsPolicy").is_none());
}

#[test]
fn never_and_on_failure_jobs_are_valid() {
    assert!(validate(&job(json!({"template": template("Never")}))).is_empty());
    assert!(validate(&job(json!({"template": template("OnFailure")}))).is_empty());
}

#[test]
fn restart_policy_always_is_refused() {
    let errors = validate(&job(json!({"template": template("Always")})));
    assert_eq!(
        messages(&errors),
        [
            "spec.template.spec.restartPolicy: Invalid value: \"Always\": pod restartPolicy can only be Never or OnFailure"
        ]
    );
}

#[test]
fn never_policy_takes_no_timers() {
    let errors = validate(&job(json!({"template": template("Never"),
        "completionPolicy": {"type": "Never", "ttlSecondsAfterFinished": 30, "activeDeadlineSeconds": 10}})));
    assert_eq!(
        messages(&errors),
        [
            "spec.completionPolicy.ttlSecondsAfterFinished: Invalid value: 30: ttlSecondsAfterFinished can just work with Always CompletionPolicyType",
            "spec.completionPolicy.activeDeadlineSeconds: Invalid value: 10: activeDeadlineSeconds can just work with Always CompletionPolicyType",
        ]
    );
}

#[test]
fn names_labels_and_containers_are_checked() {
    let mut bad = job(
        json!({"template": {"metadata": {"labels": {"broadcastjob-name": "x"}},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}}}),
    );
    bad["metadata"]["name"] = json!("bad.name");
    let text = messages(&validate(&bad)).join("\n");
    assert!(
        text.contains("BroadcastJob name must consist of alphanumeric characters or '-'"),
        "{text}"
    );
    assert!(text.contains(RESERVED_LABELS_MESSAGE), "{text}");
    assert!(
        text.contains("spec.template.spec.containers[0].image: Required value"),
        "{text}"
    );
    let long = "a".repeat(64);
    assert_eq!(admission::job_name_errors(&long, "BroadcastJob").len(), 1);
    assert!(admission::job_name_errors("acj-test-1646305200", "BroadcastJob").is_empty());
}

#[test]
fn configurations_cover_broadcastjobs() {
    let (v, m) = configurations(Some("ns1"));
    assert_eq!(v.len(), 1);
    assert_eq!(m.len(), 1);
    let rules = v[0].webhooks.as_ref().unwrap()[0].rules.clone().unwrap();
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["broadcastjobs".to_string()][..])
    );
}
