use serde_json::json;

use super::*;

fn rd(resource: Value, targets: Value) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ResourceDistribution",
        "metadata": {"name": "rd"},
        "spec": {"resource": resource, "targets": targets},
    })
}

fn secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": {"k": "dg=="}})
}

fn messages(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn an_rd_of_a_secret_to_listed_and_selected_namespaces_is_valid() {
    let obj = rd(
        secret("app-token"),
        json!({"includedNamespaces": {"list": [{"name": "ns-1"}]},
               "namespaceLabelSelector": {"matchLabels": {"group": "test"}}}),
    );
    assert!(validate(&obj, None).is_empty());
}

#[test]
fn only_secrets_and_configmaps() {
    let obj = rd(
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}),
        json!({}),
    );
    let m = messages(&validate(&obj, None));
    assert_eq!(m.len(), 1);
    assert!(m[0].starts_with("spec.resource: Invalid value"), "{m:?}");
    assert!(m[0].ends_with(UNSUPPORTED_KIND), "{m:?}");
    let cm = rd(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
        json!({}),
    );
    assert!(validate(&cm, None).is_empty());
}

#[test]
fn the_resource_needs_a_name() {
    let obj = rd(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {}}),
        json!({}),
    );
    assert_eq!(
        messages(&validate(&obj, None)),
        ["spec.resource.metadata.name: Required value: name is required"]
    );
}

#[test]
fn kind_and_name_are_immutable() {
    let old = rd(secret("a"), json!({}));
    let renamed = rd(secret("b"), json!({}));
    assert_eq!(
        messages(&validate(&renamed, Some(&old))),
        ["spec.resource: Invalid value: resource apiVersion, kind, and name are immutable"]
    );
    let mut edited = secret("a");
    edited["data"]["k"] = json!("bmV3");
    assert!(validate(&rd(edited, json!({})), Some(&old)).is_empty());
}

#[test]
fn namespace_names_must_be_dns_labels() {
    let obj = rd(
        secret("a"),
        json!({"includedNamespaces": {"list": [{"name": "Bad_NS"}]},
               "excludedNamespaces": {"list": [{"name": "ok"}]}}),
    );
    let m = messages(&validate(&obj, None));
    assert_eq!(m.len(), 1);
    assert!(
        m[0].starts_with("spec.targets.includedNamespaces.list[0].name: Invalid value: \"Bad_NS\": a lowercase RFC 1123 label"),
        "{m:?}"
    );
}

#[test]
fn a_namespace_both_included_and_excluded_is_ambiguous() {
    let obj = rd(
        secret("a"),
        json!({"includedNamespaces": {"list": [{"name": "x"}, {"name": "y"}]},
               "excludedNamespaces": {"list": [{"name": "x"}]}}),
    );
    assert_eq!(
        messages(&validate(&obj, None)),
        [
            "spec.targets: Invalid value: ambiguous targets because namespace [x] is in both IncludedNamespaces.List and ExcludedNamespaces.List"
        ]
    );
}

#[test]
fn the_selector_must_parse() {
    let obj = rd(
        secret("a"),
        json!({"namespaceLabelSelector": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}),
    );
    let m = messages(&validate(&obj, None));
    assert_eq!(m.len(), 1);
    assert!(
        m[0].starts_with(
            "spec.targets.namespaceLabelSelector: Invalid value: labelSelectorAsSelector error"
        ),
        "{m:?}"
    );
}

#[test]
fn a_scoped_instance_sees_only_its_labelled_rds() {
    let (validating, mutating) = configurations(Some("t1"));
    assert!(mutating.is_empty());
    let w = &validating[0].webhooks.as_ref().unwrap()[0];
    assert_eq!(w.name, "vresourcedistribution.kb.io");
    assert!(w.namespace_selector.is_none());
    let selector = w
        .object_selector
        .as_ref()
        .unwrap()
        .match_labels
        .as_ref()
        .unwrap();
    assert_eq!(selector[crate::labels::SCOPE], "t1");
    let (cluster, _) = configurations(None);
    let w = &cluster[0].webhooks.as_ref().unwrap()[0];
    assert!(w.object_selector.is_none());
    assert_eq!(
        cluster[0].metadata.name.as_deref(),
        Some("kruise-resourcedistribution-validating")
    );
}
