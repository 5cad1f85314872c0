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

fn ilpj_template(spec: Value) -> Value {
    json!({"imageListPullJobTemplate": {"metadata": {"labels": {"team": "infra"}}, "spec": spec}})
}

fn ilpj_acj(policy: Option<&str>, spec: Value) -> Value {
    let mut s = json!({"schedule": "*/1 * * * *", "template": ilpj_template(spec)});
    if let Some(p) = policy {
        s["concurrencyPolicy"] = json!(p);
    }
    acj(s)
}

#[test]
fn an_imagelistpulljob_template_defaults_to_replace_and_an_always_pull() {
    let out = with_defaults_for(
        &ilpj_acj(None, json!({"images": ["nginx:1.25"]})),
        None,
        true,
    );
    assert_eq!(out["spec"]["concurrencyPolicy"], "Replace");
    assert_eq!(
        out["spec"]["template"]["imageListPullJobTemplate"]["spec"],
        json!({
            "images": ["nginx:1.25"],
            "completionPolicy": {"type": "Always"},
            "pullPolicy": {"timeoutSeconds": 600, "backoffLimit": 3},
            "imagePullPolicy": "IfNotPresent",
        })
    );
    assert!(
        validate(&out, None).is_empty(),
        "{:?}",
        validate(&out, None)
    );
    // A set completion type leaves the rest as sent (upstream defaults inside that branch);
    // an explicit policy is kept.
    let spec = json!({"images": ["nginx:1.25"], "completionPolicy": {"type": "Never"}});
    let out = with_defaults_for(&ilpj_acj(Some("Forbid"), spec.clone()), None, true);
    assert_eq!(out["spec"]["concurrencyPolicy"], "Forbid");
    assert_eq!(
        out["spec"]["template"]["imageListPullJobTemplate"]["spec"],
        spec
    );
}

#[test]
fn an_imagelistpulljob_template_is_checked_field_by_field() {
    let check =
        |policy: Option<&str>, spec: Value| messages(&validate(&ilpj_acj(policy, spec), None));
    let always = |extra: Value| {
        let mut s = json!({"images": ["nginx:1.25"], "completionPolicy": {"type": "Always"}});
        for (k, v) in extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        s
    };
    let p = "spec.template.imageListPullJobTemplate.spec";
    assert!(check(Some("Forbid"), always(json!({}))).is_empty());
    assert!(check(Some("Replace"), always(json!({}))).is_empty());
    assert_eq!(
        check(Some("Allow"), always(json!({}))),
        [
            "spec.concurrencyPolicy: Invalid value: \"Allow\": concurrencyPolicy should be Replace or Forbid, but current value is: Allow"
        ]
    );
    assert_eq!(
        check(Some("Forbid"), always(json!({"images": []}))),
        [format!(
            "{p}.images: Invalid value: []: image can not be empty"
        )]
    );
    assert_eq!(
        check(
            Some("Forbid"),
            always(json!({"images": ["nginx", "nginx"]}))
        ),
        [format!(
            "{p}.images: Invalid value: [\"nginx\",\"nginx\"]: images cannot have duplicate values"
        )]
    );
    let many: Vec<String> = (0..256).map(|i| format!("app:{i}")).collect();
    assert_eq!(
        check(Some("Forbid"), always(json!({"images": many}))),
        [format!(
            "{p}.images: Invalid value: 256 images: the maximum number of images cannot > 255"
        )]
    );
    assert_eq!(
        check(Some("Forbid"), always(json!({"images": ["Nginx:1"]}))),
        [format!(
            "{p}.images: Invalid value: [\"Nginx:1\"]: invalid image Nginx:1: invalid reference format: repository name (library/Nginx) must be lowercase"
        )]
    );
    assert_eq!(
        check(
            Some("Forbid"),
            always(json!({"selector": {"names": ["a"], "matchLabels": {"x": "y"}}}))
        ),
        [format!(
            "{p}.selector: Invalid value: {{\"matchLabels\":{{\"x\":\"y\"}},\"names\":[\"a\"]}}: can not set both names and labelSelector in this spec.selector"
        )]
    );
    assert_eq!(
        check(
            Some("Forbid"),
            always(json!({"selector": {"names": ["a", "a"]}}))
        ),
        [format!(
            "{p}.selector.names: Invalid value: [\"a\",\"a\"]: duplicated name in selector names"
        )]
    );
    assert_eq!(
        check(
            Some("Forbid"),
            always(
                json!({"selector": {"names": ["a"]}, "podSelector": {"matchLabels": {"x": "y"}}})
            )
        ),
        [format!(
            "{p}: Invalid value: can not set both selector and podSelector"
        )]
    );
    assert_eq!(
        check(
            Some("Forbid"),
            always(
                json!({"podSelector": {"matchExpressions": [{"key": "x", "operator": "Near"}]}})
            )
        ),
        [format!(
            "{p}.podSelector.matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator"
        )]
    );
    assert_eq!(
        check(
            Some("Forbid"),
            json!({"images": ["nginx"], "completionPolicy": {"type": "Never"}})
        ),
        [format!(
            "{p}.completionPolicy.type: Invalid value: \"Never\": completionPolicy should be Always, but current value is: Never"
        )]
    );
    assert_eq!(
        check(
            Some("Forbid"),
            always(json!({"completionPolicy": {"type": "Always", "activeDeadlineSeconds": 86401}}))
        ),
        [format!(
            "{p}.completionPolicy.activeDeadlineSeconds: Invalid value: 86401: activeDeadlineSeconds must be less than 86400, current value is: 86401"
        )]
    );
    assert_eq!(
        check(
            Some("Forbid"),
            always(
                json!({"completionPolicy": {"type": "Always", "activeDeadlineSeconds": 100}, "pullPolicy": {"timeoutSeconds": 600}})
            )
        ),
        [format!(
            "{p}.completionPolicy.activeDeadlineSeconds: Invalid value: 100: completionPolicy.activeDeadlineSeconds must be greater than pullPolicy.timeoutSeconds(600)"
        )]
    );
    assert_eq!(
        check(
            Some("Forbid"),
            always(json!({"completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 30}}))
        ),
        [format!(
            "{p}.completionPolicy.ttlSecondsAfterFinished: Invalid value: 30: ttlSecondsAfterFinished is not supported in advancedCronJob"
        )]
    );
    // With another template: exactly one.
    let mut two = ilpj_acj(Some("Forbid"), always(json!({})));
    two["spec"]["template"]["broadcastJobTemplate"] =
        bcj_template()["broadcastJobTemplate"].clone();
    assert_eq!(
        messages(&validate(&two, None)),
        [format!("spec.template: Forbidden: {SEVERAL_TEMPLATES}")]
    );
}

#[test]
fn an_imagelistpulljob_template_may_change_on_update() {
    let old = ilpj_acj(
        Some("Forbid"),
        json!({"images": ["nginx:1.25"], "completionPolicy": {"type": "Always"}}),
    );
    let mut new = old.clone();
    new["spec"]["template"]["imageListPullJobTemplate"]["spec"]["images"] =
        json!(["nginx:1.26", "busybox:1.36"]);
    new["spec"]["template"]["imageListPullJobTemplate"]["metadata"] =
        json!({"labels": {"team": "web"}});
    assert!(
        validate(&new, Some(&old)).is_empty(),
        "{:?}",
        validate(&new, Some(&old))
    );
    // Other template fields stay immutable.
    let bcj = acj(json!({"schedule": "* * * * *", "template": bcj_template()}));
    let mut switched = bcj.clone();
    switched["spec"]["template"] =
        ilpj_template(json!({"images": ["nginx"], "completionPolicy": {"type": "Always"}}));
    switched["spec"]["concurrencyPolicy"] = json!("Forbid");
    assert_eq!(
        messages(&validate(&switched, Some(&bcj))),
        [format!("spec: Forbidden: {FORBIDDEN_UPDATE}")]
    );
}
