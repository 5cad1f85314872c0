//! Which SidecarSets a Pod falls under (`openkruise/kruise v1.9.0
//! pkg/control/sidecarcontrol/util.go` `PodMatchedSidecarSet`), and the facts about a Pod the
//! injector and the controller both read from its annotations.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::apps_v1alpha1::{
    SidecarContainer, SidecarSet, SidecarSetHashes, parse_sidecarset_hashes,
};
use kruise_api::keys;

/// Labels of namespaces by name, for `namespaceSelector` (`None`: namespace unknown).
pub trait NamespaceLabels {
    fn labels_of(&self, namespace: &str) -> Option<BTreeMap<String, String>>;
}

impl NamespaceLabels for BTreeMap<String, BTreeMap<String, String>> {
    fn labels_of(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.get(namespace).cloned()
    }
}

/// The Pod's namespace as admission sees it: an empty one is `default`.
pub fn pod_namespace(pod: &Pod) -> &str {
    match pod.metadata.namespace.as_deref() {
        None | Some("") => "default",
        Some(ns) => ns,
    }
}

/// A selector with neither labels nor expressions.
pub fn is_empty_selector(s: &LabelSelector) -> bool {
    s.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && s.match_expressions.as_ref().is_none_or(|e| e.is_empty())
}

/// Whether `selector` selects `labels`; an invalid selector selects nothing.
pub fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    kruise_ordering::selector::matches(selector, labels).unwrap_or(false)
}

/// `namespace` and `namespaceSelector` (upstream `IsSelectorNamespace`): whether Pods of `namespace` are in
/// the SidecarSet's scope. A namespaceSelector with an unknown namespace is out of scope.
pub fn in_scope(ss: &SidecarSet, namespace: &str, namespaces: &dyn NamespaceLabels) -> bool {
    if !ss.spec.namespace.is_empty() && ss.spec.namespace != namespace {
        return false;
    }
    match &ss.spec.namespace_selector {
        None => true,
        Some(sel) => namespaces
            .labels_of(namespace)
            .is_some_and(|labels| selects(sel, &labels)),
    }
}

/// The Pod's labels (empty when it has none).
pub fn labels(pod: &Pod) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    pod.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

/// `selector` is non-empty and matches the Pod's labels.
pub fn selects_pod(ss: &SidecarSet, pod: &Pod) -> bool {
    ss.spec
        .selector
        .as_ref()
        .is_some_and(|s| !is_empty_selector(s) && selects(s, labels(pod)))
}

/// Upstream `IsActivePod`: Succeeded/Failed or terminating Pods get nothing and are never upgraded.
pub fn is_active(pod: &Pod) -> bool {
    kruise_ordering::predicates::is_active(pod)
}

/// The base SidecarSet this one stands in for, when it is a canary (annotations
/// `apps.kruise.io/sidecarset-canary: "true"` and `apps.kruise.io/sidecarset-base`).
pub fn canary_base(ss: &SidecarSet) -> Option<&str> {
    let annotations = ss.metadata.annotations.as_ref()?;
    if annotations.get(keys::SIDECARSET_CANARY).map(String::as_str) != Some("true") {
        return None;
    }
    annotations
        .get(keys::SIDECARSET_BASE)
        .map(String::as_str)
        .filter(|b| !b.is_empty())
}

/// Whether a new Pod gets this SidecarSet's sidecars.
pub fn injects_into(ss: &SidecarSet, pod: &Pod, namespaces: &dyn NamespaceLabels) -> bool {
    !ss.spec.injection_strategy.paused
        && in_scope(ss, pod_namespace(pod), namespaces)
        && selects_pod(ss, pod)
}

/// The names in `kruise.io/sidecarset-injected-list`.
pub fn injected_list(pod: &Pod) -> BTreeSet<&str> {
    annotation(pod, keys::SIDECARSET_INJECTED_LIST)
        .map(|v| v.split(',').filter(|s| !s.is_empty()).collect())
        .unwrap_or_default()
}

pub fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The names a sidecar container has in a Pod: itself, or its two hot-upgrade twins.
pub fn names_in_pod(c: &SidecarContainer) -> Vec<String> {
    if c.is_hot_upgrade() {
        let (a, b) = twin_names(c.name());
        vec![a, b]
    } else {
        vec![c.name().to_string()]
    }
}

/// `<name>-1`, `<name>-2`.
pub fn twin_names(name: &str) -> (String, String) {
    (
        format!("{name}{}", keys::HOT_UPGRADE_CONTAINER_SUFFIX_1),
        format!("{name}{}", keys::HOT_UPGRADE_CONTAINER_SUFFIX_2),
    )
}

/// Every container name this SidecarSet's `containers` occupy in a Pod.
pub fn sidecar_names_in_pod(ss: &SidecarSet) -> BTreeSet<String> {
    ss.spec.containers.iter().flat_map(names_in_pod).collect()
}

/// The Pods the controller counts and upgrades.
pub fn is_matched(ss: &SidecarSet, pod: &Pod, namespaces: &dyn NamespaceLabels) -> bool {
    if !is_active(pod)
        || !in_scope(ss, pod_namespace(pod), namespaces)
        || !selects_pod(ss, pod)
        || !injected_list(pod).contains(ss.metadata.name.as_deref().unwrap_or_default())
    {
        return false;
    }
    let containers: BTreeSet<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| c.name.as_str())
        .collect();
    let working = working_twins(pod);
    ss.spec.containers.iter().all(|c| {
        let present = names_in_pod(c)
            .iter()
            .all(|n| containers.contains(n.as_str()));
        present && (!c.is_hot_upgrade() || working.contains_key(c.name()))
    })
}

/// A Pod's entries of `kruise.io/sidecarset-hash` (or `-without-image`); an unreadable
/// value counts as no entries.
pub fn pod_hashes(pod: &Pod, key: &str) -> SidecarSetHashes {
    annotation(pod, key)
        .and_then(|v| parse_sidecarset_hashes(v).ok())
        .unwrap_or_default()
}

/// `kruise.io/sidecarset-working-hotupgrade-container`: sidecar name → working twin.
pub fn working_twins(pod: &Pod) -> BTreeMap<String, String> {
    annotation(pod, keys::SIDECARSET_WORKING_HOTUPGRADE_CONTAINER)
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// (working, idle) twin of a hot-upgrade sidecar: the annotation names the working one;
/// `-1` when it says nothing (upstream `GetPodHotUpgradeContainers`).
pub fn working_and_idle(pod: &Pod, sidecar: &str) -> (String, String) {
    let (one, two) = twin_names(sidecar);
    if working_twins(pod).get(sidecar) == Some(&two) {
        (two, one)
    } else {
        (one, two)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ss(spec: serde_json::Value) -> SidecarSet {
        serde_json::from_value(
            json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "s"}, "spec": spec}),
        )
        .unwrap()
    }

    fn pod(ns: &str, labels: serde_json::Value, annotations: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": ns, "labels": labels, "annotations": annotations},
            "spec": {"containers": [{"name": "sidecar1", "image": "busybox"}, {"name": "app", "image": "nginx"}]}}))
        .unwrap()
    }

    #[test]
    fn scope_and_selector() {
        let nss: BTreeMap<String, BTreeMap<String, String>> = [(
            "prod".to_string(),
            [("env".to_string(), "prod".to_string())].into(),
        )]
        .into();
        let all = ss(
            json!({"selector": {"matchLabels": {"app": "nginx"}}, "containers": [{"name": "sidecar1", "image": "busybox"}]}),
        );
        let p = pod("prod", json!({"app": "nginx"}), json!({}));
        assert!(injects_into(&all, &p, &nss));
        assert!(!injects_into(
            &all,
            &pod("prod", json!({"app": "other"}), json!({})),
            &nss
        ));
        let only_dev = ss(
            json!({"namespace": "dev", "selector": {"matchLabels": {"app": "nginx"}}, "containers": []}),
        );
        assert!(!injects_into(&only_dev, &p, &nss));
        let by_label = ss(
            json!({"namespaceSelector": {"matchLabels": {"env": "prod"}}, "selector": {"matchLabels": {"app": "nginx"}}}),
        );
        assert!(injects_into(&by_label, &p, &nss));
        assert!(!injects_into(
            &by_label,
            &pod("unknown", json!({"app": "nginx"}), json!({})),
            &nss
        ));
        let empty = ss(json!({"selector": {}}));
        assert!(
            !injects_into(&empty, &p, &nss),
            "an empty selector selects nothing"
        );
        let paused = ss(
            json!({"selector": {"matchLabels": {"app": "nginx"}}, "injectionStrategy": {"paused": true}}),
        );
        assert!(!injects_into(&paused, &p, &nss));
        let mut defaulted = p.clone();
        defaulted.metadata.namespace = None;
        assert_eq!(pod_namespace(&defaulted), "default");
    }

    #[test]
    fn matched_needs_the_injected_list_and_every_container() {
        let nss = BTreeMap::new();
        let s = ss(
            json!({"selector": {"matchLabels": {"app": "nginx"}}, "containers": [{"name": "sidecar1", "image": "busybox"}]}),
        );
        let listed = pod(
            "ns",
            json!({"app": "nginx"}),
            json!({keys::SIDECARSET_INJECTED_LIST: "other,s"}),
        );
        assert!(is_matched(&s, &listed, &nss));
        let unlisted = pod("ns", json!({"app": "nginx"}), json!({}));
        assert!(
            !is_matched(&s, &unlisted, &nss),
            "labels alone never make a match"
        );
        let other = ss(
            json!({"selector": {"matchLabels": {"app": "nginx"}}, "containers": [{"name": "gone", "image": "busybox"}]}),
        );
        let mut listed_other = listed.clone();
        listed_other.metadata.name = Some("p2".into());
        assert!(!is_matched(&other, &listed_other, &nss));
    }

    #[test]
    fn twins() {
        let p = pod(
            "ns",
            json!({}),
            json!({keys::SIDECARSET_WORKING_HOTUPGRADE_CONTAINER: r#"{"sidecar":"sidecar-2"}"#}),
        );
        assert_eq!(
            working_and_idle(&p, "sidecar"),
            ("sidecar-2".into(), "sidecar-1".into())
        );
        assert_eq!(
            working_and_idle(&p, "other"),
            ("other-1".into(), "other-2".into())
        );
    }
}
