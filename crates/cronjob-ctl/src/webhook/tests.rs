use super::*;

fn acj(spec: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "AdvancedCronJob",
           "metadata": {"name": "acj-test"}, "spec": spec})
}

fn bcj_template() -> Value {
    json!({"broadcastJobTemplate": {"spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "counter", "image": "busybox"}]}}}}})
}

fn messages(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn defaults_fill_policies_and_the_pod_template() {
    let out = with_defaults_for(
        &acj(json!({"schedule": "*/1 * * * *", "template": bcj_template()})),
        None,
        true,
    );
    let spec = &out["spec"];
    assert_eq!(spec["concurrencyPolicy"], "Allow");
    assert_eq!(spec["paused"], false);
    assert_eq!(spec["successfulJobsHistoryLimit"], 3);
    assert_eq!(spec["failedJobsHistoryLimit"], 1);
    assert_eq!(
        spec["template"]["broadcastJobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"],
        "ClusterFirst"
    );
}

#[test]
fn reapplying_the_same_manifest_is_no_change_of_the_template() {
    let manifest = acj(json!({"schedule": "*/1 * * * *", "template": bcj_template()}));
    let stored = with_defaults_for(&manifest, None, true);
    // `kubectl apply` of the unchanged manifest sends the template without its defaults.
    let mut reapplied = stored.clone();
    reapplied["spec"]["template"] = bcj_template();
    reapplied["spec"]["schedule"] = json!("*/2 * * * *");
    let defaulted = with_defaults_for(&reapplied, Some(&stored), true);
    assert_eq!(defaulted["spec"]["template"], stored["spec"]["template"]);
    assert!(validate(&defaulted, Some(&stored)).is_empty());
    // A template stored without defaults (gate TemplateNoDefaults, or before a webhook)
    // is left as sent: defaulting it now would be the change.
    let bare = with_defaults_for(&manifest, None, false);
    let defaulted = with_defaults_for(&bare, Some(&bare), true);
    assert_eq!(defaulted["spec"]["template"], bcj_template());
    assert!(validate(&defaulted, Some(&bare)).is_empty());
}

#[test]
fn an_every_minute_broadcastjob_cron_is_valid() {
    let obj = acj(json!({"schedule": "*/1 * * * *", "template": bcj_template()}));
    assert!(
        validate(&obj, None).is_empty(),
        "{:?}",
        validate(&obj, None)
    );
}

#[test]
fn schedules_and_zones_are_checked_with_the_parsers_message() {
    let errs = |schedule: &str, tz: Option<&str>| {
        let mut spec = json!({"schedule": schedule, "template": bcj_template()});
        if let Some(tz) = tz {
            spec["timeZone"] = json!(tz);
        }
        messages(&validate(&acj(spec), None))
    };
    assert_eq!(
        errs("", None),
        [
            "spec.schedule: Invalid value: \"\": schedule cannot be empty, please provide valid cron schedule."
        ]
    );
    assert_eq!(
        errs("* * * *", None),
        [
            "spec.schedule: Invalid value: \"* * * *\": expected exactly 5 fields, found 4: [* * * *]"
        ]
    );
    assert_eq!(
        errs("TZ=UTC * * * * *", Some("Asia/Shanghai")),
        [format!(
            "spec.schedule: Invalid value: \"TZ=UTC * * * * *\": {TZ_IN_BOTH}"
        )]
    );
    assert_eq!(
        errs("* * * * *", Some("Mars/Olympus")),
        ["spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus"]
    );
    assert_eq!(errs("* * * * *", Some("Local")).len(), 1);
    assert!(errs("0 8 * * *", Some("Asia/Shanghai")).is_empty());
    assert!(
        errs("61 * * * *", None)[0].starts_with("spec.schedule: Invalid value: \"61 * * * *\": ")
    );
}

#[test]
fn templates_limits_and_updates_are_checked() {
    let none = messages(&validate(
        &acj(json!({"schedule": "* * * * *", "template": {}})),
        None,
    ));
    assert_eq!(none, [format!("spec.template: Forbidden: {NO_TEMPLATE}")]);
    let mut both = bcj_template();
    both["jobTemplate"] = json!({"spec": {"template": {"spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}});
    let several = messages(&validate(
        &acj(json!({"schedule": "* * * * *", "template": both})),
        None,
    ));
    assert_eq!(
        several,
        [format!("spec.template: Forbidden: {SEVERAL_TEMPLATES}")]
    );
    let negative = messages(&validate(
        &acj(
            json!({"schedule": "* * * * *", "template": bcj_template(), "failedJobsHistoryLimit": -1}),
        ),
        None,
    ));
    assert_eq!(
        negative,
        ["spec.failedJobsHistoryLimit: Invalid value: -1: must be greater than or equal to 0"]
    );
    let mut always = bcj_template();
    always["broadcastJobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
    let bad = messages(&validate(
        &acj(json!({"schedule": "* * * * *", "template": always})),
        None,
    ));
    assert_eq!(bad.len(), 1, "{bad:?}");

    let old = acj(json!({"schedule": "* * * * *", "template": bcj_template()}));
    let mut new = old.clone();
    new["spec"]["schedule"] = json!("*/5 * * * *");
    new["spec"]["paused"] = json!(true);
    assert!(validate(&new, Some(&old)).is_empty());
    new["spec"]["template"]["broadcastJobTemplate"]["spec"]["paused"] = json!(true);
    assert_eq!(
        messages(&validate(&new, Some(&old))),
        [format!("spec: Forbidden: {FORBIDDEN_UPDATE}")]
    );
    let long = "a".repeat(64);
    let mut named = old.clone();
    named["metadata"]["name"] = json!(long);
    assert_eq!(validate(&named, None).len(), 1);
}
