use kruise_api::apps_v1beta1::StatefulSet;
use kruise_api::keys;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use serde_json::json;

use super::*;

fn object(spec: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
           "metadata": {"name": "web", "namespace": "default", "uid": "u"}, "spec": spec})
}

/// A valid set before defaulting.
fn base_spec() -> Value {
    json!({
        "serviceName": "nginx-headless",
        "selector": {"matchLabels": {"app": "nginx"}},
        "template": {"metadata": {"labels": {"app": "nginx"}},
                     "spec": {"containers": [{"name": "nginx", "image": "nginx:alpine"}]}}
    })
}

/// A set that may update several Pods at once: Parallel, replicas 5, maxUnavailable 3.
fn parallel_spec() -> Value {
    let mut s = base_spec();
    s["replicas"] = json!(5);
    s["podManagementPolicy"] = json!("Parallel");
    s["updateStrategy"] = json!({"rollingUpdate": {"maxUnavailable": 3}});
    s
}

fn with(mut spec: Value, pointer: &str, value: Value) -> Value {
    let mut parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    let last = parts.pop().unwrap();
    let mut cur = &mut spec;
    for p in parts {
        cur = match p.parse::<usize>() {
            Ok(i) if cur.is_array() => &mut cur[i],
            _ => {
                if cur.get(p).is_none_or(Value::is_null) {
                    cur[p] = json!({});
                }
                cur.get_mut(p).unwrap()
            }
        };
    }
    match last.parse::<usize>() {
        Ok(i) if cur.is_array() => cur[i] = value,
        _ => cur[last] = value,
    }
    spec
}

fn strings(errors: &[kruise_runtime::webhook::FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

/// Defaulted, then validated as a CREATE.
fn check(spec: Value) -> Vec<String> {
    let raw = with_defaults(&object(spec));
    strings(&validate_json(&raw, None).unwrap())
}

/// Both defaulted (the update with the old object), then validated as an UPDATE.
fn check_update(old: Value, new: Value) -> Option<Rejection> {
    let raw_old = with_defaults(&object(old));
    let raw_new = with_defaults_for(&object(new), Some(&raw_old), true);
    review(&raw_new, Some(&raw_old)).unwrap()
}

fn has(errors: &[String], want: &str) -> bool {
    errors.iter().any(|e| e == want)
}

// ------------------------------------------------------------------ valid sets

#[test]
fn valid_sets_pass() {
    assert_eq!(check(base_spec()), Vec::<String>::new());
    assert_eq!(check(parallel_spec()), Vec::<String>::new());
    let in_place = with(
        with(
            parallel_spec(),
            "/updateStrategy/rollingUpdate/podUpdatePolicy",
            json!("InPlaceIfPossible"),
        ),
        "/template/spec/readinessGates",
        json!([{"conditionType": "InPlaceUpdateReady"}]),
    );
    assert_eq!(check(in_place), Vec::<String>::new());
    let everything = with(
        with(
            with(parallel_spec(), "/reserveOrdinals", json!([1, "3-5"])),
            "/scaleStrategy/maxUnavailable",
            json!("10%"),
        ),
        "/updateStrategy/rollingUpdate/unorderedUpdate",
        json!({"priorityStrategy": {"weightPriority": [{"weight": 50, "matchSelector": {"matchLabels": {"a": "b"}}}]}}),
    );
    assert_eq!(check(everything), Vec::<String>::new());
}

#[test]
fn a_migrated_native_manifest_is_accepted_with_native_defaults() {
    // Migrating from apps/v1: only apiVersion changed.
    let d = with_defaults(&object(base_spec()));
    assert_eq!(d["spec"]["podManagementPolicy"], "OrderedReady");
    assert_eq!(d["spec"]["updateStrategy"]["type"], "RollingUpdate");
    assert_eq!(d["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 0);
    assert_eq!(
        d["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
        1
    );
    assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(review(&d, None).unwrap(), None);
}

#[test]
fn v1alpha1_objects_are_served_by_the_same_code() {
    let mut raw = with_defaults(&object(parallel_spec()));
    raw["apiVersion"] = json!("apps.kruise.io/v1alpha1");
    assert_eq!(review(&raw, None).unwrap(), None);
    raw["spec"]["podManagementPolicy"] = json!("OrderedReady");
    assert!(matches!(
        review(&raw, None).unwrap(),
        Some(Rejection::Invalid(_))
    ));
}

// ------------------------------------------------------------------ rule 1

#[test]
fn name_and_replicas() {
    let mut raw = with_defaults(&object(base_spec()));
    raw["metadata"]["name"] = json!("Web_1");
    let errs = strings(&validate_json(&raw, None).unwrap());
    assert_eq!(
        errs,
        [
            "metadata.name: Invalid value: \"Web_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ]
    );

    let errs = check(with(base_spec(), "/replicas", json!(-1)));
    assert_eq!(
        errs,
        ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]
    );
}

#[test]
fn pod_management_policy_must_be_one_of_two() {
    let errs = check(with(
        base_spec(),
        "/podManagementPolicy",
        json!("Sometimes"),
    ));
    assert_eq!(
        errs,
        [
            "spec.podManagementPolicy: Invalid value: \"Sometimes\": must be 'OrderedReady' or 'Parallel'"
        ]
    );
    // Without defaulting it is required.
    let raw = object(base_spec());
    let sts: StatefulSet = serde_json::from_value(raw.clone()).unwrap();
    let errs = strings(&validate(&sts, None, &raw, None));
    assert!(
        has(&errs, "spec.podManagementPolicy: Required value: "),
        "{errs:?}"
    );
    assert!(
        has(&errs, "spec.updateStrategy: Required value: "),
        "{errs:?}"
    );
}

// ------------------------------------------------------------------ rule 2

#[test]
fn selector_must_be_non_empty_valid_and_match_the_template() {
    let errs = check(with(base_spec(), "/selector", json!({})));
    assert_eq!(
        errs,
        ["spec.selector: Invalid value: {}: empty selector is invalid for statefulset"]
    );
    let errs = check(with(
        base_spec(),
        "/selector",
        json!({"matchLabels": {"app": "other"}}),
    ));
    assert_eq!(
        errs,
        [
            "spec.template.metadata.labels: Invalid value: {\"app\":\"nginx\"}: `selector` does not match template `labels`"
        ]
    );
    let errs = check(with(
        base_spec(),
        "/selector",
        json!({"matchExpressions": [{"key": "app", "operator": "Near"},
                                    {"key": "app", "operator": "In"}]}),
    ));
    assert_eq!(
        errs,
        [
            "spec.selector.matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator",
            "spec.selector.matchExpressions[1].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
        ]
    );
    let expressions =
        json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["nginx"]}]});
    assert!(check(with(base_spec(), "/selector", expressions)).is_empty());

    let mut raw = with_defaults(&object(base_spec()));
    raw["spec"].as_object_mut().unwrap().remove("selector");
    assert_eq!(
        strings(&validate_json(&raw, None).unwrap()),
        ["spec.selector: Required value: "]
    );
}

#[test]
fn restart_policy_and_active_deadline() {
    let errs = check(with(
        base_spec(),
        "/template/spec/restartPolicy",
        json!("Never"),
    ));
    assert_eq!(
        errs,
        [
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""
        ]
    );
    let errs = check(with(
        base_spec(),
        "/template/spec/activeDeadlineSeconds",
        json!(30),
    ));
    assert_eq!(
        errs,
        [
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet is not Supported"
        ]
    );
}

// ------------------------------------------------------------------ rules 3–4

#[test]
fn on_delete_takes_no_rolling_update() {
    let errs = check(with(
        base_spec(),
        "/updateStrategy",
        json!({"type": "OnDelete", "rollingUpdate": {"partition": 2}}),
    ));
    assert_eq!(
        errs,
        [
            "spec.updateStrategy.rollingUpdate: Invalid value: {\"partition\":2}: only allowed for updateStrategy 'RollingUpdate'"
        ]
    );
    assert!(
        check(with(
            base_spec(),
            "/updateStrategy",
            json!({"type": "OnDelete"})
        ))
        .is_empty()
    );
    let errs = check(with(
        base_spec(),
        "/updateStrategy",
        json!({"type": "Never"}),
    ));
    assert_eq!(
        errs,
        [
            "spec.updateStrategy: Invalid value: {\"type\":\"Never\"}: must be 'RollingUpdate' or 'OnDelete'"
        ]
    );
}

#[test]
fn partition_and_min_ready_seconds() {
    let errs = check(with(
        base_spec(),
        "/updateStrategy/rollingUpdate/partition",
        json!(-1),
    ));
    assert_eq!(
        errs,
        [
            "spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0"
        ]
    );
    let errs = check(with(
        base_spec(),
        "/updateStrategy/rollingUpdate/minReadySeconds",
        json!(301),
    ));
    assert_eq!(
        errs,
        [
            "spec.updateStrategy.rollingUpdate.minReadySeconds: Invalid value: 301: must be no more than 300 seconds"
        ]
    );
    assert!(
        check(with(
            base_spec(),
            "/updateStrategy/rollingUpdate/minReadySeconds",
            json!(300)
        ))
        .is_empty()
    );
    let errs = check(with(
        base_spec(),
        "/updateStrategy/rollingUpdate/minReadySeconds",
        json!(-1),
    ));
    assert_eq!(
        errs,
        [
            "spec.updateStrategy.rollingUpdate.minReadySeconds: Invalid value: -1: must be greater than or equal to 0"
        ]
    );
}

#[test]
fn max_unavailable_values() {
    let at = |v: Value| {
        check(with(
            parallel_spec(),
            "/updateStrategy/rollingUpdate/maxUnavailable",
            v,
        ))
    };
    const PATH: &str = "spec.updateStrategy.rollingUpdate.maxUnavailable";
    assert!(at(json!("50%")).is_empty());
    assert!(at(json!("1%")).is_empty(), "1% of 1 rounds up to 1");
    assert_eq!(
        at(json!(0)),
        [format!(
            "{PATH}: Invalid value: 0: should not be less than 1"
        )]
    );
    assert_eq!(
        at(json!("0%")),
        [format!(
            "{PATH}: Invalid value: 0: should not be less than 1"
        )]
    );
    assert_eq!(
        at(json!(-1)),
        [
            format!("{PATH}: Invalid value: -1: must be greater than or equal to 0"),
            format!("{PATH}: Invalid value: -1: should not be less than 1"),
        ]
    );
    assert_eq!(
        at(json!("abc")),
        [
            format!(
                "{PATH}: Invalid value: \"abc\": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%', or '93%', regex used for validation is '[0-9]+%')"
            ),
            format!(
                "{PATH}: Invalid value: 0: getValueFromIntOrPercent error: invalid value for IntOrString: invalid type: string is not a percentage"
            ),
        ]
    );
    let errs = at(json!("12.5%"));
    assert!(
        has(
            &errs,
            &format!(
                "{PATH}: Invalid value: 0: getValueFromIntOrPercent error: invalid value for IntOrString: invalid value \"12.5%\": strconv.Atoi: parsing \"12.5\": invalid syntax"
            )
        ),
        "{errs:?}"
    );

    // Required when a rollingUpdate has none (only without defaulting).
    let raw = with(
        with_defaults(&object(parallel_spec())),
        "/spec/updateStrategy/rollingUpdate/maxUnavailable",
        Value::Null,
    );
    assert_eq!(
        strings(&validate_json(&raw, None).unwrap()),
        [format!("{PATH}: Required value: ")]
    );
}

// ------------------------------------------------------------------ rule 5

#[test]
fn max_unavailable_needs_parallel() {
    // maxUnavailable is only allowed with podManagementPolicy Parallel.
    let spec = with(
        base_spec(),
        "/updateStrategy/rollingUpdate/maxUnavailable",
        json!(3),
    );
    assert_eq!(
        check(spec.clone()),
        [
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 3: can only work with Parallel PodManagementPolicyType"
        ]
    );
    let raw = with_defaults(&object(spec));
    let Some(Rejection::Invalid(errors)) = review(&raw, None).unwrap() else {
        panic!("must be rejected");
    };
    assert!(
        kruise_runtime::webhook::aggregate(&errors)
            .contains("can only work with Parallel PodManagementPolicyType")
    );
    // The string "100%" is not the integer 1 either.
    assert_eq!(
        check(with(
            base_spec(),
            "/updateStrategy/rollingUpdate/maxUnavailable",
            json!("100%")
        )),
        [
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"100%\": can only work with Parallel PodManagementPolicyType"
        ]
    );
    assert!(
        check(with(
            base_spec(),
            "/updateStrategy/rollingUpdate/maxUnavailable",
            json!(1)
        ))
        .is_empty()
    );
    // Scale budget (`scaleStrategy.maxUnavailable`).
    assert_eq!(
        check(with(
            base_spec(),
            "/scaleStrategy/maxUnavailable",
            json!("10%")
        )),
        [
            "spec.scaleStrategy.maxUnavailable: Invalid value: \"10%\": can only work with Parallel PodManagementPolicyType"
        ]
    );
    assert_eq!(
        check(with(
            parallel_spec(),
            "/scaleStrategy/maxUnavailable",
            json!(0)
        )),
        ["spec.scaleStrategy.maxUnavailable: Invalid value: 0: should not be less than 1"]
    );
}

// ------------------------------------------------------------------ rule 6

#[test]
fn in_place_needs_the_readiness_gate() {
    // In-place update policies need the InPlaceUpdateReady readiness gate.
    for policy in ["InPlaceIfPossible", "InPlaceOnly"] {
        let spec = with(
            parallel_spec(),
            "/updateStrategy/rollingUpdate/podUpdatePolicy",
            json!(policy),
        );
        assert_eq!(
            check(spec.clone()),
            [format!(
                "spec.template.spec.readinessGates: Invalid value: null: must contains InPlaceUpdateReady when podUpdatePolicy is {policy}"
            )]
        );
        let other_gate = with(
            spec,
            "/template/spec/readinessGates",
            json!([{"conditionType": "Other"}]),
        );
        assert_eq!(
            check(other_gate),
            [format!(
                "spec.template.spec.readinessGates: Invalid value: [{{\"conditionType\":\"Other\"}}]: must contains InPlaceUpdateReady when podUpdatePolicy is {policy}"
            )]
        );
    }
    assert_eq!(
        check(with(
            parallel_spec(),
            "/updateStrategy/rollingUpdate/podUpdatePolicy",
            json!("Sometimes")
        )),
        [
            "spec.updateStrategy.rollingUpdate.podUpdatePolicy: Invalid value: \"Sometimes\": must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'"
        ]
    );
}

// ------------------------------------------------------------------ rule 7

#[test]
fn unordered_update_needs_parallel_and_a_valid_priority() {
    let unordered = json!({"priorityStrategy": {"orderPriority": [{"orderedKey": ""}]}});
    let errs = check(with(
        base_spec(),
        "/updateStrategy/rollingUpdate/unorderedUpdate",
        unordered,
    ));
    assert_eq!(
        errs,
        [
            "spec.updateStrategy.rollingUpdate.unorderedUpdate: Required value: unorderedUpdate can only work with Parallel PodManagementPolicyType",
            "spec.updateStrategy.rollingUpdate.unorderedUpdate.priorityStrategy.orderPriority[0].orderedKey: Required value: order key can not be empty",
        ]
    );
    let errs = check(with(
        parallel_spec(),
        "/updateStrategy/rollingUpdate/unorderedUpdate",
        json!({"priorityStrategy": {"weightPriority": [{"weight": 101, "matchSelector": {}}]}}),
    ));
    assert_eq!(
        errs,
        [
            "spec.updateStrategy.rollingUpdate.unorderedUpdate.priorityStrategy.weightPriority[0].weight: Invalid value: 101: weight must be valid number in the range 1-100",
            "spec.updateStrategy.rollingUpdate.unorderedUpdate.priorityStrategy.weightPriority[0].matchSelector: Required value: selector can not be empty",
        ]
    );
    assert!(
        check(with(
            parallel_spec(),
            "/updateStrategy/rollingUpdate/unorderedUpdate",
            json!({})
        ))
        .is_empty()
    );
}

// ------------------------------------------------------------------ rules 8–9

#[test]
fn reserve_ordinals_are_non_negative_ints_or_ranges() {
    let errs = check(with(
        base_spec(),
        "/reserveOrdinals",
        json!([-1, "4-2", "1-3", "x", 2]),
    ));
    assert_eq!(
        errs,
        [
            "spec: Invalid value: [-1,\"4-2\",\"1-3\",\"x\",2]: 0 th reserve ordinal is negative: -1",
            "spec: Invalid value: [-1,\"4-2\",\"1-3\",\"x\",2]: 1 th reserve ordinal is not a valid range: 4-2",
            "spec: Invalid value: [-1,\"4-2\",\"1-3\",\"x\",2]: 3 th reserve ordinal is not a valid range: x",
        ]
    );
}

#[test]
fn retention_policy_values() {
    let errs = check(with(
        base_spec(),
        "/persistentVolumeClaimRetentionPolicy",
        json!({"whenDeleted": "Keep", "whenScaled": "Delete"}),
    ));
    assert_eq!(
        errs,
        [
            "spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: \"Keep\": supported values: \"Retain\", \"Delete\""
        ]
    );
    assert!(
        check(with(
            base_spec(),
            "/persistentVolumeClaimRetentionPolicy",
            json!({"whenDeleted": "Delete", "whenScaled": "Delete"})
        ))
        .is_empty()
    );
}

// ------------------------------------------------------------------ rule 10

#[test]
fn updates_may_change_only_the_listed_fields() {
    let old = parallel_spec();
    let mut new = with(old.clone(), "/replicas", json!(7));
    new = with(
        new,
        "/template/spec/containers/0/image",
        json!("nginx:1.25"),
    );
    new = with(new, "/updateStrategy/rollingUpdate/partition", json!(3));
    new = with(new, "/reserveOrdinals", json!([1]));
    new = with(new, "/scaleStrategy/maxUnavailable", json!(2));
    new = with(new, "/revisionHistoryLimit", json!(3));
    new = with(
        new,
        "/persistentVolumeClaimRetentionPolicy/whenScaled",
        json!("Delete"),
    );
    new = with(new, "/ordinals/start", json!(2));
    new = with(
        new,
        "/lifecycle",
        json!({"preDelete": {"finalizersHandler": ["x/y"]}}),
    );
    new = with(
        new,
        "/volumeClaimUpdateStrategy/type",
        json!("OnPodRollingUpdate"),
    );
    new = with(
        new,
        "/volumeClaimTemplates",
        json!([{"metadata": {"name": "www"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]),
    );
    assert_eq!(check_update(old.clone(), new), None);

    let forbidden = format!("spec: Forbidden: {FORBIDDEN_UPDATE}");
    for (pointer, value) in [
        ("/serviceName", json!("other")),
        ("/podManagementPolicy", json!("OrderedReady")),
    ] {
        let Some(Rejection::Invalid(errors)) =
            check_update(old.clone(), with(old.clone(), pointer, value))
        else {
            panic!("{pointer} must be rejected");
        };
        let errs = strings(&errors);
        assert!(has(&errs, &forbidden), "{pointer}: {errs:?}");
    }
    let selector = with(
        with(old.clone(), "/selector/matchLabels/tier", json!("web")),
        "/template/metadata/labels/tier",
        json!("web"),
    );
    let Some(Rejection::Invalid(errors)) = check_update(old.clone(), selector) else {
        panic!("selector change must be rejected");
    };
    assert_eq!(strings(&errors), [forbidden]);
    assert!(FORBIDDEN_UPDATE.starts_with(
        "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'reserveOrdinals'"
    ));
}

#[test]
fn in_place_only_updates_may_only_replace_images() {
    let old = with(
        with(
            parallel_spec(),
            "/updateStrategy/rollingUpdate/podUpdatePolicy",
            json!("InPlaceOnly"),
        ),
        "/template/spec/readinessGates",
        json!([{"conditionType": "InPlaceUpdateReady"}]),
    );
    // An image bump sent without a pull policy stays image-only after defaulting.
    let image = with(
        old.clone(),
        "/template/spec/containers",
        json!([{"name": "nginx", "image": "nginx"}]),
    );
    assert_eq!(check_update(old.clone(), image), None);
    let env = with(
        old.clone(),
        "/template/spec/containers/0/env",
        json!([{"name": "X", "value": "1"}]),
    );
    assert_eq!(
        check_update(old.clone(), env),
        Some(Rejection::Message(
            "invalid template modified with InPlaceOnly strategy: add /containers/0/env, currently only image update is allowed for InPlaceOnly".into()
        ))
    );
    // Metadata may change.
    let labels = with(old.clone(), "/template/metadata/labels/v", json!("2"));
    assert_eq!(check_update(old.clone(), labels), None);
    // InPlaceIfPossible has no such rule.
    let relaxed = with(
        old.clone(),
        "/updateStrategy/rollingUpdate/podUpdatePolicy",
        json!("InPlaceIfPossible"),
    );
    let env = with(
        relaxed.clone(),
        "/template/spec/containers/0/env",
        json!([{"name": "X", "value": "1"}]),
    );
    assert_eq!(check_update(relaxed, env), None);
}

// ------------------------------------------------------------------ routes

fn request(
    operation: &str,
    version: &str,
    object: Value,
    old: Value,
) -> AdmissionRequest<DynamicObject> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "u-1",
            "kind": {"group": "apps.kruise.io", "version": version, "kind": "StatefulSet"},
            "resource": {"group": "apps.kruise.io", "version": version, "resource": "statefulsets"},
            "name": "web",
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": object,
            "oldObject": old,
            "dryRun": false,
        }
    }))
    .unwrap();
    review.try_into().unwrap()
}

async fn call(route: &Route, req: AdmissionRequest<DynamicObject>) -> AdmissionResponse {
    (route.handler)(req).await.unwrap()
}

#[tokio::test]
async fn routes_default_and_validate() {
    let routes = routes(true, None);
    let [mutate, validate] = &routes[..] else {
        panic!("two routes");
    };
    assert_eq!(
        (mutate.path, mutate.name),
        (MUTATE_PATH, "mutate-statefulset")
    );
    assert_eq!(
        (validate.path, validate.name),
        (VALIDATE_PATH, "validate-statefulset")
    );
    assert_eq!(MUTATE_PATH, "/mutate-apps-kruise-io-v1beta1-statefulset");
    assert_eq!(
        VALIDATE_PATH,
        "/validate-apps-kruise-io-v1beta1-statefulset"
    );

    // Mutation patches a v1alpha1 object too.
    let mut alpha = object(base_spec());
    alpha["apiVersion"] = json!("apps.kruise.io/v1alpha1");
    let r = call(mutate, request("CREATE", "v1alpha1", alpha, Value::Null)).await;
    assert!(r.allowed);
    assert!(r.patch.is_some());

    // Validation: 422 with the aggregated errors.
    let bad = with_defaults(&object(with(
        base_spec(),
        "/updateStrategy/rollingUpdate/maxUnavailable",
        json!(3),
    )));
    let r = call(validate, request("CREATE", "v1beta1", bad, Value::Null)).await;
    assert!(!r.allowed);
    assert_eq!(r.result.code, 422);
    assert_eq!(
        r.result.message,
        "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 3: can only work with Parallel PodManagementPolicyType"
    );
    let good = with_defaults(&object(base_spec()));
    let r = call(
        validate,
        request("CREATE", "v1beta1", good.clone(), Value::Null),
    )
    .await;
    assert!(r.allowed);

    // A DELETE (protection-ctl's, not registered here) is not judged.
    let mut protected = good.clone();
    protected["metadata"]["labels"] = json!({keys::DELETION_PROTECTION: "Always"});
    let r = call(
        validate,
        request("DELETE", "v1beta1", Value::Null, protected),
    )
    .await;
    assert!(r.allowed);
    let (v, _) = configurations(None);
    let ops = v[0].webhooks.as_ref().unwrap()[0].rules.as_ref().unwrap()[0]
        .operations
        .clone();
    assert_eq!(ops, Some(vec!["CREATE".to_string(), "UPDATE".to_string()]));
}

#[tokio::test]
async fn the_in_place_only_rule_answers_422_with_upstreams_message() {
    let routes = routes(true, None);
    let old_spec = with(
        with(
            parallel_spec(),
            "/updateStrategy/rollingUpdate/podUpdatePolicy",
            json!("InPlaceOnly"),
        ),
        "/template/spec/readinessGates",
        json!([{"conditionType": "InPlaceUpdateReady"}]),
    );
    let old = with_defaults(&object(old_spec.clone()));
    let new = with_defaults_for(
        &object(with(old_spec, "/template/spec/hostname", json!("h"))),
        Some(&old),
        true,
    );
    let r = call(&routes[1], request("UPDATE", "v1beta1", new, old)).await;
    assert!(!r.allowed);
    assert_eq!(r.result.code, 422);
    assert_eq!(
        r.result.message,
        "invalid template modified with InPlaceOnly strategy: add /hostname, currently only image update is allowed for InPlaceOnly"
    );
}

#[test]
fn configurations_cover_both_versions() {
    let (v, m) = configurations(None);
    assert_eq!(
        v[0].metadata.name.as_deref(),
        Some("kruise-statefulset-validating")
    );
    assert_eq!(
        m[0].metadata.name.as_deref(),
        Some("kruise-statefulset-mutating")
    );
    let vw = &v[0].webhooks.as_ref().unwrap()[0];
    assert_eq!(vw.name, "vstatefulset.kb.io");
    assert_eq!(vw.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(vw.client_config.url.as_deref(), Some(VALIDATE_PATH));
    let rule = &vw.rules.as_ref().unwrap()[0];
    assert_eq!(
        rule.api_versions.as_deref(),
        Some(&["v1alpha1".to_string(), "v1beta1".to_string()][..])
    );
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["statefulsets".to_string()][..])
    );
    assert_eq!(
        rule.operations.as_deref(),
        Some(&["CREATE".to_string(), "UPDATE".to_string(),][..])
    );
    let mw = &m[0].webhooks.as_ref().unwrap()[0];
    assert_eq!(mw.name, "mstatefulset.kb.io");
    assert_eq!(mw.client_config.url.as_deref(), Some(MUTATE_PATH));

    let (v, m) = configurations(Some("e2e-x"));
    assert_eq!(
        v[0].metadata.name.as_deref(),
        Some("kruise-statefulset-validating-e2e-x")
    );
    assert_eq!(
        m[0].metadata.name.as_deref(),
        Some("kruise-statefulset-mutating-e2e-x")
    );
    assert_eq!(
        v[0].metadata.labels.as_ref().unwrap()[keys::WEBHOOK_SCOPE],
        "e2e-x"
    );
    assert!(
        v[0].webhooks.as_ref().unwrap()[0]
            .namespace_selector
            .is_some()
    );
}

mod claim_templates {
    //! Claim template changes under `OnPodRollingUpdate`.

    use k8s_openapi::api::storage::v1::StorageClass;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kruise_api::apps_v1beta1::StatefulSet;
    use serde_json::{Value, json};

    use super::super::vct::{errors, needs_check};

    fn class(name: &str, expand: Option<bool>, default: bool) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: default.then(|| {
                    [(
                        "storageclass.kubernetes.io/is-default-class".to_string(),
                        "true".to_string(),
                    )]
                    .into()
                }),
                ..Default::default()
            },
            provisioner: "kwok.x-k8s.io/volume".into(),
            allow_volume_expansion: expand,
            ..Default::default()
        }
    }

    fn classes() -> Vec<StorageClass> {
        vec![
            class("allow", Some(true), false),
            class("deny", Some(false), false),
            class("kwok-volume", Some(false), true),
        ]
    }

    fn template(name: &str, class: Option<&str>, size: &str) -> Value {
        let mut t = json!({
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
        });
        if let Some(c) = class {
            t["spec"]["storageClassName"] = json!(c);
        }
        t
    }

    fn set(strategy: Option<&str>, templates: Vec<Value>) -> StatefulSet {
        let mut v = json!({
            "apiVersion": "apps.kruise.io/v1beta1",
            "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "selector": {"matchLabels": {"app": "nginx"}},
                "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
                "volumeClaimTemplates": templates,
            },
        });
        if let Some(s) = strategy {
            v["spec"]["volumeClaimUpdateStrategy"] = json!({"type": s});
        }
        serde_json::from_value(v).unwrap()
    }

    fn check(old: Vec<Value>, new: Vec<Value>) -> Vec<String> {
        let (old, new) = (
            set(Some("OnPodRollingUpdate"), old),
            set(Some("OnPodRollingUpdate"), new),
        );
        errors(&new, &old, &classes())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn growing_a_template_needs_a_class_that_allows_expansion() {
        assert!(
            check(
                vec![template("data", Some("allow"), "1Gi")],
                vec![template("data", Some("allow"), "2Gi")]
            )
            .is_empty()
        );
        assert_eq!(
            check(
                vec![template("data", Some("deny"), "1Gi")],
                vec![template("data", Some("deny"), "2Gi")]
            ),
            [
                "spec.volumeClaimTemplates[data].spec.resources.requests.storage: Forbidden: storage class deny does not support volume expansion"
            ]
        );
        // No class named: the default one (kwok-volume, no expansion) decides.
        assert_eq!(
            check(
                vec![template("data", None, "1Gi")],
                vec![template("data", None, "2Gi")]
            ),
            [
                "spec.volumeClaimTemplates[data].spec.resources.requests.storage: Forbidden: storage class kwok-volume does not support volume expansion"
            ]
        );
        assert_eq!(
            check(
                vec![template("data", Some("gone"), "1Gi")],
                vec![template("data", Some("gone"), "2Gi")]
            ),
            [
                "spec.volumeClaimTemplates[data].spec.storageClassName: Invalid value: \"gone\": can not get sc"
            ]
        );
        // Equal quantities written differently are no resize.
        assert!(
            check(
                vec![template("data", Some("deny"), "1Gi")],
                vec![template("data", Some("deny"), "1024Mi")]
            )
            .is_empty()
        );
    }

    #[test]
    fn templates_may_not_be_added_renamed_or_changed_beyond_size() {
        let added = check(
            vec![template("a", Some("allow"), "1Gi")],
            vec![
                template("a", Some("allow"), "1Gi"),
                template("b", Some("allow"), "1Gi"),
            ],
        );
        assert_eq!(added.len(), 1);
        assert!(
            added[0]
                .ends_with("volumeClaimTemplate can not be added or deleted when OnRollingUpdate")
        );
        assert_eq!(
            check(
                vec![template("a", Some("allow"), "1Gi")],
                vec![template("b", Some("allow"), "1Gi")]
            ),
            [
                "spec.volumeClaimTemplates[b].name: Forbidden: volumeClaimTemplate name can not be modified"
            ]
        );
        let changed = check(
            vec![template("a", Some("allow"), "1Gi")],
            vec![template("a", Some("deny"), "2Gi")],
        );
        assert_eq!(changed.len(), 1);
        assert!(changed[0].starts_with("spec.volumeClaimTemplates[a]: Invalid value:"));
        assert!(
            changed[0].ends_with("volumeClaimTemplate can not be modified when OnRollingUpdate")
        );
    }

    #[test]
    fn the_gate_defaults_the_strategy_to_on_delete() {
        let d = super::super::defaults::with_resize_default(json!({"spec": {}}));
        assert_eq!(
            d["spec"]["volumeClaimUpdateStrategy"],
            json!({"type": "OnDelete"})
        );
        let kept = json!({"spec": {"volumeClaimUpdateStrategy": {"type": "OnPodRollingUpdate"}}});
        assert_eq!(
            super::super::defaults::with_resize_default(kept.clone()),
            kept
        );
    }

    #[test]
    fn on_delete_or_unchanged_templates_are_not_checked() {
        let (old, new) = (
            set(None, vec![template("data", Some("deny"), "1Gi")]),
            set(None, vec![template("data", Some("deny"), "2Gi")]),
        );
        assert!(!needs_check(&new, &old));
        assert!(errors(&new, &old, &classes()).is_empty());
        let same = set(
            Some("OnPodRollingUpdate"),
            vec![template("data", Some("deny"), "1Gi")],
        );
        assert!(!needs_check(&same, &same));
    }
}
