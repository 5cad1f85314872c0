use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_api::keys;
use serde_json::json;

use super::*;

struct NoRevisions;
impl Revisions for NoRevisions {
    fn named(&self, _: &str) -> Option<ControllerRevision> {
        None
    }
    fn of(&self, _: &str) -> Vec<ControllerRevision> {
        Vec::new()
    }
}

fn ss(name: &str, spec: Value) -> SidecarSet {
    serde_json::from_value(
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
        "metadata": {"name": name}, "spec": spec}),
    )
    .unwrap()
}

fn base() -> Value {
    json!({
        "selector": {"matchLabels": {"app": "nginx"}},
        "containers": [{"name": "sidecar1", "image": "busybox", "volumeMounts": [{"name": "log-volume", "mountPath": "/var/log"}]}],
        "volumes": [{"name": "log-volume", "emptyDir": {}}]
    })
}

fn with(mut v: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let parent = v.pointer_mut(parent).unwrap_or_else(|| panic!("{pointer}"));
    match parent {
        Value::Array(items) => items[key.parse::<usize>().unwrap()] = value,
        Value::Object(map) => {
            map.insert(key.to_string(), value);
        }
        _ => panic!("{pointer}"),
    }
    v
}

fn set(mut v: Value, key: &str, value: Value) -> Value {
    v.as_object_mut().unwrap().insert(key.into(), value);
    v
}

fn check_with(
    s: &SidecarSet,
    old: Option<&SidecarSet>,
    others: &[Arc<SidecarSet>],
    whitelist: Result<Option<Whitelist>, String>,
) -> Vec<String> {
    check_gated(s, old, others, whitelist, false)
}

fn check_gated(
    s: &SidecarSet,
    old: Option<&SidecarSet>,
    others: &[Arc<SidecarSet>],
    whitelist: Result<Option<Whitelist>, String>,
    patch_metadata_defaults_allowed: bool,
) -> Vec<String> {
    let namespaces: BTreeMap<String, BTreeMap<String, String>> = [(
        "prod".to_string(),
        [("env".to_string(), "prod".to_string())].into(),
    )]
    .into();
    let ctx = Context {
        others,
        namespaces: &namespaces,
        revisions: &NoRevisions,
        whitelist,
        patch_metadata_defaults_allowed,
    };
    validate(s, old, &ctx)
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn check(spec: Value) -> Vec<String> {
    check_with(&ss("s", spec), None, &[], Ok(None))
}

fn has(errors: &[String], needle: &str) -> bool {
    errors.iter().any(|e| e.contains(needle))
}

#[test]
fn the_seed_sidecarsets_are_valid() {
    assert_eq!(check(base()), Vec::<String>::new());
    for yaml in [
        include_str!("../../../../examples/sidecarset-test-sidecarset.yaml"),
        include_str!("../../../../examples/sidecarset-test-sidecarset-canary.yaml"),
        include_str!("../../../../examples/sidecarset-sidecarset.yaml"),
        include_str!("../../../../examples/sidecarset-hotupgrade-sidecarset.yaml"),
    ] {
        let s: SidecarSet = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(check_with(&s, None, &[], Ok(None)), Vec::<String>::new());
        assert!(validate_raw(&serde_json::to_value(&s).unwrap()).is_empty());
    }
}

#[test]
fn name_selector_and_scope_rules() {
    assert!(has(
        &check_with(&ss("bad_name", base()), None, &[], Ok(None)),
        "metadata.name"
    ));
    let mut no_selector = base();
    no_selector.as_object_mut().unwrap().remove("selector");
    assert!(has(
        &check(no_selector),
        "spec.selector: Required value: no selector defined for SidecarSet"
    ));
    assert!(has(
        &check(with(base(), "/selector", json!({}))),
        "spec.selector: Invalid value: empty selector is not valid for sidecarset."
    ));
    assert!(has(
        &check(set(base(), "namespaceSelector", json!({}))),
        "spec.namespaceSelector: Invalid value: empty selector is not valid for sidecarset."
    ));
    let both = set(
        set(base(), "namespace", json!("a")),
        "namespaceSelector",
        json!({"matchLabels": {"x": "y"}}),
    );
    assert!(has(
        &check(both),
        "namespace and namespaceSelector are mutually exclusive"
    ));
    assert!(has(
        &check(with(
            base(),
            "/selector",
            json!({"matchExpressions": [{"key": "a", "operator": "Bogus"}]})
        )),
        "invalid label selector"
    ));
}

#[test]
fn container_rules() {
    assert!(has(
        &check(with(base(), "/containers", json!([]))),
        "no initContainer or container defined for SidecarSet"
    ));
    assert!(has(
        &check(with(
            base(),
            "/containers/0/volumeMounts/0/name",
            json!("nope")
        )),
        "spec.containers[0].volumeMounts[0].name: Invalid value: \"nope\": volume not found"
    ));
    let dup = with(
        base(),
        "/containers",
        json!([{"name": "a", "image": "x"}, {"name": "a", "image": "y"}]),
    );
    assert!(has(
        &check(dup),
        "spec.containers[1].name: Invalid value: \"a\": Duplicate value"
    ));
    assert!(has(
        &check(with(base(), "/containers", json!([{"name": "a"}]))),
        "spec.containers[0].image: Required value"
    ));
    let hot = with(
        base(),
        "/containers",
        json!([{"name": "a", "image": "x", "upgradeStrategy": {"upgradeType": "HotUpgrade"}}]),
    );
    assert!(has(&check(hot), "hotUpgradeEmptyImage is required"));
    let policy = |p: serde_json::Value| with(base(), "/containers/0/resourcesPolicy", p);
    assert!(
        check(policy(json!({"targetContainersMode": "sum", "targetContainersNameRegex": "^app$",
                            "resourcesExpr": {"limits": {"cpu": "max(cpu*50%, 50m)", "memory": "200Mi"}}})))
        .is_empty(),
        "a valid policy passes"
    );
    assert!(has(
        &check(policy(
            json!({"targetContainerMode": "max", "resourceExpr": {"limits": {"cpu": "cpu"}}})
        )),
        "spec.containers[0].resourcesPolicy.targetContainersNameRegex: Required value: invalid empty regex"
    ));
    assert!(has(
        &check(policy(
            json!({"targetContainerMode": "sum", "targetContainersNameRegex": "(", "resourceExpr": {"limits": {"cpu": "cpu"}}})
        )),
        "spec.containers[0].resourcesPolicy.targetContainersNameRegex: Invalid value: \"(\": invalid regex pattern"
    ));
    assert!(has(
        &check(policy(
            json!({"targetContainerMode": "sum", "targetContainersNameRegex": ".*", "resourceExpr": {"requests": {"memory": "gpu*2"}}})
        )),
        "spec.containers[0].resourcesPolicy.resourceExpr.requests.memory: Invalid value: \"gpu*2\": unknown name \"gpu\""
    ));
    let both = with(
        policy(
            json!({"targetContainerMode": "sum", "targetContainersNameRegex": ".*", "resourceExpr": {"limits": {"cpu": "cpu"}}}),
        ),
        "/containers/0/resources",
        json!({"limits": {"cpu": "1"}}),
    );
    assert!(has(
        &check(both),
        "resourcesPolicy and resources cannot be configured together"
    ));
    let plain_init = with(
        base(),
        "/initContainers",
        json!([{"name": "i", "image": "x", "resourcesPolicy": {"targetContainerMode": "max", "targetContainersNameRegex": ".*", "resourceExpr": {"limits": {"cpu": "cpu"}}}}]),
    );
    assert!(has(
        &check(plain_init),
        "spec.initContainers[0].resourcesPolicy: Forbidden: resourcesPolicy is only allowed for containers and native sidecar init containers"
    ));
    let field = with(
        base(),
        "/containers/0/transferEnv",
        json!([{"sourceContainerNameFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}, "envName": "X"}]),
    );
    assert!(has(
        &check(field),
        "sourceContainerNameFrom.fieldRef.fieldPath"
    ));
}

#[test]
fn raw_enum_spellings_name_the_field() {
    let raw = json!({"spec": {"containers": [{"name": "a", "image": "x", "podInjectPolicy": "Sideways", "shareVolumePolicy": {"type": "maybe"}}],
                              "updateStrategy": {"type": "Sometimes"}}});
    let errors: Vec<String> = validate_raw(&raw).iter().map(ToString::to_string).collect();
    assert!(
        has(
            &errors,
            "spec.containers[0].podInjectPolicy: Unsupported value: \"Sideways\": unsupported pod inject policy"
        ),
        "{errors:?}"
    );
    assert!(has(
        &errors,
        "spec.containers[0].shareVolumePolicy.type: Unsupported value: \"maybe\": unsupported share volume policy"
    ));
    assert!(has(&errors, "spec.updateStrategy.type"));
}

#[test]
fn update_strategy_rules() {
    let canary_with_partition = set(
        base(),
        "updateStrategy",
        json!({"partition": 1, "selector": {"matchLabels": {"canary": "true"}}}),
    );
    assert!(has(
        &check(canary_with_partition),
        "Partition and Selector cannot be used together"
    ));
    assert!(
        check(set(
            base(),
            "updateStrategy",
            json!({"partition": 0, "selector": {"matchLabels": {"canary": "true"}}})
        ))
        .is_empty()
    );
    assert!(has(
        &check(set(base(), "updateStrategy", json!({"partition": -1}))),
        "must be greater than or equal to 0"
    ));
    assert!(has(
        &check(set(
            base(),
            "updateStrategy",
            json!({"maxUnavailable": "x%"})
        )),
        "spec.updateStrategy.maxUnavailable"
    ));
    let both = set(
        base(),
        "updateStrategy",
        json!({"priorityStrategy": {"weightPriority": [{"weight": 101, "matchSelector": {"matchLabels": {"a": "b"}}}], "orderPriority": [{"orderedKey": "k"}]}}),
    );
    let errors = check(both);
    assert!(has(
        &errors,
        "only one of weightPriority and orderPriority can be used"
    ));
    assert!(has(
        &errors,
        "weight must be valid number in the range 1-100"
    ));
    assert!(check(set(base(), "updateStrategy", json!({"priorityStrategy": {"weightPriority": [{"weight": 0, "matchSelector": {"matchLabels": {"a": "b"}}}]}}))).is_empty(), "0 is accepted");
    let scatter = set(
        base(),
        "updateStrategy",
        json!({"scatterStrategy": [{"key": "", "value": "a"}, {"key": "z", "value": "1"}, {"key": "z", "value": "1"}]}),
    );
    let errors = check(scatter);
    assert!(has(&errors, "key can not be empty") && has(&errors, "duplicated key=value"));
    let native = set(
        base(),
        "initContainers",
        json!([{"name": "i", "image": "x", "restartPolicy": "Always"}]),
    );
    assert!(has(
        &check(native.clone()),
        "The initContainer in-place upgrade is not currently supported."
    ));
    assert!(check(set(native, "updateStrategy", json!({"type": "NotUpdate"}))).is_empty());
}

#[test]
fn updates_cannot_add_containers_or_change_upgrade_type() {
    let old = ss("s", base());
    let renamed = ss("s", with(base(), "/containers/0/name", json!("sidecar2")));
    assert!(has(
        &check_with(&renamed, Some(&old), &[], Ok(None)),
        "container sidecar2 is not found"
    ));
    let hot = ss(
        "s",
        with(
            base(),
            "/containers/0/upgradeStrategy",
            json!({"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty"}),
        ),
    );
    assert!(has(
        &check_with(&hot, Some(&old), &[], Ok(None)),
        "container sidecar1 upgradeType is immutable"
    ));
    let image = ss(
        "s",
        with(base(), "/containers/0/image", json!("busybox:1.35.0")),
    );
    assert!(check_with(&image, Some(&old), &[], Ok(None)).is_empty());
}

#[test]
fn conflicts_with_overlapping_sidecarsets() {
    let other = Arc::new(ss("other", base()));
    let mine = ss("mine", base());
    assert!(has(
        &check_with(&mine, None, std::slice::from_ref(&other), Ok(None)),
        "container sidecar1 already exist in other"
    ));
    // Same volume, same definition: fine; different definition: conflict.
    let same_volume = ss(
        "mine",
        with(base(), "/containers/0/name", json!("sidecar2")),
    );
    assert!(check_with(&same_volume, None, std::slice::from_ref(&other), Ok(None)).is_empty());
    let other_volume = ss(
        "mine",
        with(
            with(base(), "/containers/0/name", json!("sidecar2")),
            "/volumes/0",
            json!({"name": "log-volume", "hostPath": {"path": "/x"}}),
        ),
    );
    assert!(has(
        &check_with(&other_volume, None, std::slice::from_ref(&other), Ok(None)),
        "volume log-volume is in conflict with sidecarset other"
    ));
    // Disjoint selectors or namespaces never conflict.
    let disjoint = ss(
        "mine",
        with(
            base(),
            "/selector",
            json!({"matchLabels": {"app": "other"}}),
        ),
    );
    assert!(check_with(&disjoint, None, std::slice::from_ref(&other), Ok(None)).is_empty());
    let in_a = Arc::new(ss("other", set(base(), "namespace", json!("a"))));
    let in_b = ss("mine", set(base(), "namespace", json!("b")));
    assert!(check_with(&in_b, None, &[in_a], Ok(None)).is_empty());
    let by_label = Arc::new(ss(
        "other",
        set(
            base(),
            "namespaceSelector",
            json!({"matchLabels": {"env": "dev"}}),
        ),
    ));
    let in_prod = ss("mine", set(base(), "namespace", json!("prod")));
    assert!(
        check_with(&in_prod, None, &[by_label], Ok(None)).is_empty(),
        "prod's labels do not match env=dev"
    );
}

#[test]
fn injection_revision_rules() {
    let empty = set(
        base(),
        "injectionStrategy",
        json!({"revision": {"policy": "Always"}}),
    );
    assert!(has(
        &check(empty),
        "revisionName and customVersion cannot be empty simultaneously"
    ));
    let missing = set(
        base(),
        "injectionStrategy",
        json!({"revision": {"revisionName": "nope"}}),
    );
    assert!(has(
        &check(missing),
        "Cannot find specific ControllerRevision"
    ));
}

#[test]
fn patch_pod_metadata_rules() {
    let spec = set(
        base(),
        "patchPodMetadata",
        json!([{"annotations": {"oom-score": "1"}}, {"annotations": {"oom-score": "2"}}, {"annotations": {}}]),
    );
    let s = ss("s", spec);
    let errors = check_with(&s, None, &[], Ok(None));
    assert!(has(&errors, "whitelist not found"));
    assert!(has(&errors, "annotation key oom-score is duplicated"));
    assert!(has(&errors, "annotations can not be empty"));
    let allowed: Whitelist =
        serde_json::from_value(json!({"rules": [{"allowedAnnotationKeyExprs": ["^oom-.*$"]}]}))
            .unwrap();
    let ok = ss(
        "s",
        set(
            base(),
            "patchPodMetadata",
            json!([{"annotations": {"oom-score": "1"}}]),
        ),
    );
    assert!(check_with(&ok, None, &[], Ok(Some(allowed.clone()))).is_empty());
    let not_allowed = ss(
        "s",
        set(
            base(),
            "patchPodMetadata",
            json!([{"annotations": {"other": "1"}}]),
        ),
    );
    assert!(has(
        &check_with(&not_allowed, None, &[], Ok(Some(allowed))),
        "sidecarSet patch metadata annotation(other) is not allowed"
    ));
    // No rule selecting this SidecarSet: nothing is allowed, unless the gate is on.
    let other_sidecars: Whitelist = serde_json::from_value(json!({"rules": [
        {"selector": {"matchLabels": {"app": "other"}}, "allowedAnnotationKeyExprs": [".*"]}
    ]}))
    .unwrap();
    assert!(has(
        &check_with(&not_allowed, None, &[], Ok(Some(other_sidecars.clone()))),
        "sidecarSet patch metadata annotation is not allowed"
    ));
    // SidecarSetPatchPodMetadataDefaultsAllowed: no whitelist, or no rule for this
    // SidecarSet, lets any key through; a rule that selects it still binds.
    assert!(check_gated(&not_allowed, None, &[], Ok(None), true).is_empty());
    assert!(check_gated(&not_allowed, None, &[], Ok(Some(other_sidecars)), true).is_empty());
    let oom_only: Whitelist =
        serde_json::from_value(json!({"rules": [{"allowedAnnotationKeyExprs": ["^oom-.*$"]}]}))
            .unwrap();
    assert!(has(
        &check_gated(&not_allowed, None, &[], Ok(Some(oom_only)), true),
        "sidecarSet patch metadata annotation(other) is not allowed"
    ));
    // Overwrite on both sides of an overlap is a conflict.
    let other = Arc::new(ss(
        "other",
        with(
            set(
                base(),
                "patchPodMetadata",
                json!([{"annotations": {"oom-score": "2"}, "patchPolicy": "Overwrite"}]),
            ),
            "/containers/0/name",
            json!("x"),
        ),
    ));
    let errors = check_with(
        &ok,
        None,
        &[other],
        Ok(Some(
            serde_json::from_value(json!({"rules": [{"allowedAnnotationKeyExprs": [".*"]}]}))
                .unwrap(),
        )),
    );
    assert!(
        has(
            &errors,
            "annotation oom-score is in conflict with sidecarset other"
        ),
        "{errors:?}"
    );
}

fn canary_of(name: &str, base_name: &str, spec: Value) -> SidecarSet {
    let mut s = ss(name, spec);
    s.metadata.annotations = Some(
        [
            (keys::SIDECARSET_CANARY.to_string(), "true".to_string()),
            (keys::SIDECARSET_BASE.to_string(), base_name.to_string()),
        ]
        .into(),
    );
    s
}

#[test]
fn a_canary_needs_an_existing_non_canary_base_and_no_rolling_update() {
    let not_update = set(base(), "updateStrategy", json!({"type": "NotUpdate"}));
    let stable = Arc::new(ss("stable", not_update.clone()));
    // Same containers and selector as its base: no conflict, it replaces the base.
    let canary = canary_of("canary", "stable", not_update.clone());
    assert_eq!(
        check_with(&canary, None, std::slice::from_ref(&stable), Ok(None)),
        Vec::<String>::new()
    );
    // ... while an unrelated SidecarSet with the same containers conflicts.
    let other = ss("other", not_update.clone());
    assert!(has(
        &check_with(&other, None, std::slice::from_ref(&stable), Ok(None)),
        "container sidecar1 already exist in stable"
    ));
    assert!(has(
        &check_with(
            &canary_of("canary", "gone", not_update.clone()),
            None,
            &[],
            Ok(None)
        ),
        "fetch base sidecarSet[gone] failed"
    ));
    assert!(has(
        &check_with(
            &canary_of("canary", "canary", not_update.clone()),
            None,
            &[],
            Ok(None)
        ),
        "base sidecarSet cannot be itself"
    ));
    let canary_base = Arc::new(canary_of("stable", "elsewhere", not_update.clone()));
    assert!(has(
        &check_with(&canary, None, &[canary_base], Ok(None)),
        "base sidecarSet cannot be canary"
    ));
    assert!(has(
        &check_with(
            &canary_of("canary", "stable", base()),
            None,
            std::slice::from_ref(&stable),
            Ok(None)
        ),
        "RollingUpdate is not supported for canary sidecarSet"
    ));
    let moved = canary_of("canary", "stable", not_update.clone());
    let was = canary_of("canary", "earlier", not_update);
    assert!(has(
        &check_with(&moved, Some(&was), &[stable], Ok(None)),
        "annotations[apps.kruise.io/sidecarset-base] is immutable"
    ));
}
