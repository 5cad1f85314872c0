//! Validation messages and the webhook configurations.

use kruise_api::apps_v1alpha1::WorkloadSpread;
use kruise_api::keys;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::validation::{self, validate};
use super::*;
use crate::plan::custom::Allowlist;

fn ws(spec: Value) -> WorkloadSpread {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
        "metadata": {"name": "ws", "namespace": "ns"}, "spec": spec}))
    .unwrap()
}

fn cloneset() -> Value {
    json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "cs"})
}

fn zone(name: &str, max: Value) -> Value {
    json!({"name": name, "maxReplicas": max, "requiredNodeSelectorTerm": {"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [name]}]}})
}

fn messages(
    ws: &WorkloadSpread,
    old: Option<&WorkloadSpread>,
    others: &[&WorkloadSpread],
) -> String {
    kruise_runtime::webhook::aggregate(&validate(ws, old, others, &Allowlist::default()))
}

#[test]
fn the_seed_spread_is_valid() {
    let d2 = ws(
        json!({"targetRef": cloneset(), "subsets": [zone("zone-a", json!(2)), zone("zone-b", Value::Null)]}),
    );
    assert_eq!(validate(&d2, None, &[], &Allowlist::default()), vec![]);
    let sts = ws(
        json!({"targetRef": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "web"},
        "subsets": [zone("a", json!(1)), zone("b", Value::Null)],
        "scheduleStrategy": {"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": 295}}}),
    );
    assert_eq!(validate(&sts, None, &[], &Allowlist::default()), vec![]);
}

#[test]
fn allow_listed_custom_kinds_and_the_target_filter() {
    // As OpenKruise's e2e "job-like custom workload": an Advanced DaemonSet and a TFJob.
    let allowlist = Allowlist::parse(
        r#"{"workloads": [{"Group": "apps.kruise.io", "Version": "v1alpha1", "Kind": "DaemonSet"},
            {"Group": "kubeflow.org", "Version": "v1", "Kind": "TFJob", "ReplicasPath": "spec.replicas"}]}"#,
    )
    .unwrap();
    let target = |api_version: &str, kind: &str| {
        ws(
            json!({"targetRef": {"apiVersion": api_version, "kind": kind, "name": "t"},
            "subsets": [zone("a", json!(2)), zone("b", json!(5))]}),
        )
    };
    let ads = target("apps.kruise.io/v1alpha1", "DaemonSet");
    assert_eq!(validate(&ads, None, &[], &allowlist), vec![]);
    assert_eq!(
        validate(&target("kubeflow.org/v1", "TFJob"), None, &[], &allowlist),
        vec![]
    );
    // Not listed: refused, as without any allowlist.
    let refused = validate(&ads, None, &[], &Allowlist::default());
    assert!(kruise_runtime::webhook::aggregate(&refused).contains(keys::WS_MSG_KIND_NOT_PERMITTED));
    let apps_ds = validate(&target("apps/v1", "DaemonSet"), None, &[], &allowlist);
    assert!(kruise_runtime::webhook::aggregate(&apps_ds).contains(keys::WS_MSG_KIND_NOT_PERMITTED));
    // A targetFilter selector that does not parse (In without values).
    let mut filtered = ads.clone();
    filtered.spec.target_filter = Some(
        serde_json::from_value(
            json!({"selector": {"matchExpressions": [{"key": "key", "operator": "In"}]}}),
        )
        .unwrap(),
    );
    let errors = kruise_runtime::webhook::aggregate(&validate(&filtered, None, &[], &allowlist));
    assert!(errors.starts_with("spec.targetFilter: "), "{errors}");
}

#[test]
fn target_messages() {
    let missing = ws(
        json!({"targetRef": {"apiVersion": "", "kind": "", "name": ""}, "subsets": [zone("a", Value::Null)]}),
    );
    assert!(messages(&missing, None, &[]).contains(keys::WS_MSG_NO_TARGET_REF));
    let daemonset = ws(
        json!({"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d"},
        "subsets": [zone("a", Value::Null)]}),
    );
    assert_eq!(
        messages(&daemonset, None, &[]),
        format!(
            "spec.targetRef: Invalid value: \"apps/v1/DaemonSet\": {}",
            keys::WS_MSG_KIND_NOT_PERMITTED
        )
    );
    let mine = ws(json!({"targetRef": cloneset(), "subsets": [zone("a", Value::Null)]}));
    let mut other = mine.clone();
    other.metadata.name = Some("other".into());
    // Another version of the same CloneSet is the same target.
    other.spec.target_ref.api_version = "apps.kruise.io/v1beta1".into();
    assert!(
        messages(&mine, None, &[&other])
            .contains("ws.spec.targetRef is in conflict with other WorkloadSpread other")
    );
    let mut renamed = mine.clone();
    renamed.spec.target_ref.name = "cs2".into();
    assert!(messages(&renamed, Some(&mine), &[]).contains(keys::WS_MSG_TARGET_REF_IMMUTABLE));
}

#[test]
fn subset_messages() {
    let none = ws(json!({"targetRef": cloneset(), "subsets": []}));
    assert!(messages(&none, None, &[]).contains(keys::WS_MSG_NO_SUBSETS));
    let dup = ws(
        json!({"targetRef": cloneset(), "subsets": [zone("a", json!(1)), zone("a", Value::Null)]}),
    );
    assert!(messages(&dup, None, &[]).contains("duplicated subset name a"));
    let mixed = ws(
        json!({"targetRef": cloneset(), "subsets": [zone("a", json!(1)), zone("b", json!("50%"))]}),
    );
    assert!(messages(&mixed, None, &[]).contains(keys::WS_MSG_MAX_REPLICAS_MIXED));
    let sts = ws(
        json!({"targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s"},
        "subsets": [zone("a", json!("50%")), zone("b", json!("50%"))]}),
    );
    assert!(messages(&sts, None, &[]).contains(keys::WS_MSG_MAX_REPLICAS_INT_FOR_STS));
    let over = ws(
        json!({"targetRef": cloneset(), "subsets": [zone("a", json!("60%")), zone("b", json!("50%"))]}),
    );
    assert!(messages(&over, None, &[]).contains(keys::WS_MSG_PERCENT_EXCEEDS_100));
    let under = ws(
        json!({"targetRef": cloneset(), "subsets": [zone("a", json!("30%")), zone("b", json!("30%"))]}),
    );
    assert!(messages(&under, None, &[]).contains(keys::WS_MSG_PERCENT_NOT_100));
    // Below 100% is fine when the last subset takes the rest.
    let rest = ws(
        json!({"targetRef": cloneset(), "subsets": [zone("a", json!("30%")), zone("b", Value::Null)]}),
    );
    assert_eq!(validate(&rest, None, &[], &Allowlist::default()), vec![]);
    let bad_term = ws(json!({"targetRef": cloneset(), "subsets": [{"name": "a",
        "requiredNodeSelectorTerm": {"matchExpressions": [{"key": "z", "operator": "In"}]},
        "tolerations": [{"operator": "Equal", "value": "v"}],
        "patch": {"spec": {"containers": "nope"}}}]}));
    let m = messages(&bad_term, None, &[]);
    assert!(
        m.contains(
            "spec.subsets[0].requiredNodeSelectorTerm.matchExpressions[0].values: Required value"
        ),
        "{m}"
    );
    assert!(m.contains("spec.subsets[0].tolerations[0].operator"), "{m}");
    assert!(
        m.contains("spec.subsets[0].patch: Invalid value: the patched Pod is invalid"),
        "{m}"
    );
}

#[test]
fn adaptive_messages() {
    let needs_type = ws(
        json!({"targetRef": cloneset(), "subsets": [zone("a", Value::Null)],
        "scheduleStrategy": {"adaptive": {"rescheduleCriticalSeconds": 10}}}),
    );
    assert!(messages(&needs_type, None, &[]).contains(validation::MSG_ADAPTIVE_NEEDS_TYPE));
    let capped_last = ws(
        json!({"targetRef": cloneset(), "subsets": [zone("a", json!(1)), zone("b", json!(1))],
        "scheduleStrategy": {"type": "Adaptive", "adaptive": {}}}),
    );
    assert!(messages(&capped_last, None, &[]).contains(validation::MSG_ADAPTIVE_LAST_SUBSET));
    let three = |seconds: i32| {
        ws(json!({"targetRef": cloneset(),
        "subsets": [zone("a", json!(1)), zone("b", json!(1)), zone("c", Value::Null)],
        "scheduleStrategy": {"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": seconds}}}))
    };
    assert_eq!(
        validate(&three(147), None, &[], &Allowlist::default()),
        vec![]
    );
    assert!(messages(&three(148), None, &[]).contains("must be within [0, 147]"));
    assert!(messages(&three(-1), None, &[]).contains("rescheduleCriticalSeconds"));
}

#[test]
fn pod_webhooks_are_scoped_and_best_effort() {
    let (validating, mutating) = configurations(None);
    assert_eq!(
        validating[0].metadata.name.as_deref(),
        Some("kruise-workloadspread-validating")
    );
    let hooks = validating[0].webhooks.as_ref().unwrap();
    let ws_hook = hooks
        .iter()
        .find(|w| w.name == "vworkloadspread.kb.io")
        .unwrap();
    assert_eq!(ws_hook.failure_policy.as_deref(), Some("Fail"));
    let deletion = hooks
        .iter()
        .find(|w| w.name == "vpod-workloadspread.kb.io")
        .unwrap();
    assert_eq!(deletion.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(deletion.side_effects, "NoneOnDryRun");
    assert!(
        deletion.match_conditions.as_ref().unwrap()[0]
            .expression
            .contains(keys::WS_MATCHED)
    );
    let place = &mutating[0].webhooks.as_ref().unwrap()[0];
    assert_eq!(place.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(place.side_effects, "NoneOnDryRun");
    assert_eq!(
        place.match_conditions.as_ref().unwrap()[0].expression,
        POD_CREATE_CONDITION
    );
    let ops: Vec<_> = place
        .rules
        .iter()
        .flatten()
        .flat_map(|r| r.operations.clone().unwrap_or_default())
        .collect();
    assert_eq!(ops, ["CREATE"]);
}

#[test]
fn generated_ids_look_like_uuids() {
    let id = generated_uid();
    assert_eq!(id.len(), 36);
    assert_eq!(id.matches('-').count(), 4);
    assert_ne!(id, generated_uid());
}

proptest! {
    /// Integer caps: any non-negative ones are valid for every supported kind; a
    /// negative one names its field.
    #[test]
    fn integer_caps(caps in proptest::collection::vec(-3i32..10, 1..5)) {
        let subsets: Vec<Value> = caps.iter().enumerate().map(|(i, c)| zone(&format!("s{i}"), json!(c))).collect();
        let w = ws(json!({"targetRef": cloneset(), "subsets": subsets}));
        let errors = validate(&w, None, &[], &Allowlist::default());
        let negative: Vec<usize> = caps.iter().enumerate().filter(|(_, c)| **c < 0).map(|(i, _)| i).collect();
        prop_assert_eq!(errors.len(), negative.len());
        for i in negative {
            let path = format!("spec.subsets[{i}].maxReplicas");
            prop_assert!(errors.iter().any(|e| e.to_string().starts_with(&path)));
        }
    }

    /// Percent caps: accepted exactly when they sum to 100%, or to at most 100% with an
    /// unlimited last subset.
    #[test]
    fn percent_caps(percents in proptest::collection::vec(0u32..=100, 1..4), open_last in any::<bool>()) {
        let mut subsets: Vec<Value> = percents.iter().enumerate().map(|(i, p)| zone(&format!("s{i}"), json!(format!("{p}%")))).collect();
        if open_last {
            subsets.push(zone("rest", Value::Null));
        }
        let w = ws(json!({"targetRef": cloneset(), "subsets": subsets}));
        let sum: u32 = percents.iter().sum();
        let valid = if open_last { sum <= 100 } else { sum == 100 };
        prop_assert_eq!(validate(&w, None, &[], &Allowlist::default()).is_empty(), valid);
    }
}

#[test]
fn a_dry_run_writes_no_status() {
    let status = WorkloadSpreadStatus::default();
    assert!(to_write(Some(status.clone()), true).is_none());
    assert_eq!(to_write(Some(status.clone()), false), Some(status));
    assert!(to_write(None, false).is_none());
}

#[test]
fn an_eviction_is_a_dry_run_when_its_delete_options_say_so() {
    let eviction = |options: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": "web-0"}, "deleteOptions": options}))
        .unwrap()
    };
    assert!(eviction_dry_run(Some(&eviction(
        json!({"dryRun": ["All"]})
    ))));
    assert!(!eviction_dry_run(Some(&eviction(json!({"dryRun": []})))));
    assert!(!eviction_dry_run(Some(&eviction(json!({})))));
    assert!(!eviction_dry_run(None));
}
