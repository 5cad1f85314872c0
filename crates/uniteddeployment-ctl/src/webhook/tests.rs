//! Admission: upstream's messages, defaulting.

use kruise_api::apps_v1alpha1::UnitedDeployment;
use kruise_runtime::webhook::field::aggregate;
use serde_json::{Value, json};

use super::*;

fn ud(spec: Value) -> UnitedDeployment {
    let mut base = json!({
        "replicas": 6,
        "selector": {"matchLabels": {"app": "sample"}},
        "template": {"cloneSetTemplate": {"spec": {"template": {
            "metadata": {"labels": {"app": "sample"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}
        }}}},
        "topology": {"subsets": [{"name": "subset-a"}, {"name": "subset-b"}]},
    });
    for (k, v) in spec.as_object().unwrap() {
        base[k] = v.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": "sample-ud"}, "spec": base})).unwrap()
}

fn message(ud: &UnitedDeployment, old: Option<&UnitedDeployment>) -> String {
    aggregate(&validate(ud, old))
}

#[test]
fn a_valid_ud_passes() {
    assert_eq!(validate(&ud(json!({})), None), []);
}

#[test]
fn template_count() {
    let none = ud(json!({"template": {}}));
    assert!(message(&none, None).contains(keys::UD_MSG_NO_TEMPLATE));
    let mut two = ud(json!({}));
    two.spec.template.deployment_template = Some(Default::default());
    assert!(message(&two, None).contains(keys::UD_MSG_MULTIPLE_TEMPLATES));
}

#[test]
fn selector_must_match_template_labels() {
    let bad = ud(json!({"selector": {"matchLabels": {"app": "other"}}}));
    let m = message(&bad, None);
    assert!(
        m.contains("spec.template.cloneSetTemplate.spec.template.metadata.labels"),
        "{m}"
    );
    assert!(m.contains(keys::UD_MSG_SELECTOR_MISMATCH), "{m}");
}

#[test]
fn template_replicas_and_partition_are_refused() {
    let bad = ud(json!({"template": {"cloneSetTemplate": {"spec": {
        "replicas": 3, "updateStrategy": {"partition": 1},
        "template": {"metadata": {"labels": {"app": "sample"}}, "spec": {"containers": []}}}}}}));
    let m = message(&bad, None);
    assert!(m.contains(TEMPLATE_REPLICAS_UNUSED), "{m}");
    assert!(
        m.contains("spec.template.cloneSetTemplate.spec.updateStrategy.partition"),
        "{m}"
    );
}

#[test]
fn subset_names_and_partitions() {
    let dup = ud(json!({"topology": {"subsets": [{"name": "a"}, {"name": "a"}]}}));
    assert!(message(&dup, None).contains("duplicated subset name a"));
    let bad = ud(json!({"topology": {"subsets": [{"name": "Zone_A"}]}}));
    assert!(message(&bad, None).contains("spec.topology.subsets[0].name"));
    let missing = ud(json!({"updateStrategy": {"manualUpdate": {"partitions": {"subset-x": 1}}}}));
    assert!(message(&missing, None).contains("subset subset-x does not exist"));
}

#[test]
fn replicas_rules() {
    let mixed = ud(
        json!({"topology": {"subsets": [{"name": "a", "replicas": 1, "maxReplicas": 2}, {"name": "b"}]}}),
    );
    assert!(message(&mixed, None).contains(keys::UD_MSG_REPLICAS_MIN_MAX_EXCLUSIVE));
    let over = ud(json!({"topology": {"subsets": [{"name": "a", "replicas": 7}, {"name": "b"}]}}));
    assert!(
        message(&over, None).contains(
            "specified subsets' replica (7) is greater than UnitedDeployment replica (6)"
        )
    );
    let short = ud(
        json!({"topology": {"subsets": [{"name": "a", "replicas": 1}, {"name": "b", "replicas": 2}]}}),
    );
    assert!(message(&short, None).contains("is less than UnitedDeployment replica"));
    let percent =
        ud(json!({"topology": {"subsets": [{"name": "a", "replicas": "120%"}, {"name": "b"}]}}));
    assert!(message(&percent, None).contains("should be in range [0, 100]"));
    let unset = ud(
        json!({"replicas": null, "topology": {"subsets": [{"name": "a", "replicas": 1}, {"name": "b"}]}}),
    );
    assert!(message(&unset, None).contains("all subsets must be specified"));
    let all_max = ud(
        json!({"topology": {"subsets": [{"name": "a", "maxReplicas": 1}, {"name": "b", "maxReplicas": 2}]}}),
    );
    assert!(message(&all_max, None).contains(ONE_MAX_EMPTY));
    let no_total = ud(
        json!({"replicas": null, "topology": {"subsets": [{"name": "a", "maxReplicas": 1}, {"name": "b"}]}}),
    );
    assert!(message(&no_total, None).contains(MIN_MAX_NEEDS_REPLICAS));
    let adaptive = ud(
        json!({"topology": {"scheduleStrategy": {"type": "Adaptive"}, "subsets": [{"name": "a", "replicas": 1}, {"name": "b"}]}}),
    );
    assert!(message(&adaptive, None).contains(ADAPTIVE_FORBIDS_REPLICAS));
}

#[test]
fn update_rules() {
    let old = ud(
        json!({"topology": {"subsets": [{"name": "a", "nodeSelectorTerm": {"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["a"]}]}}, {"name": "b"}]}}),
    );
    let moved = ud(
        json!({"topology": {"subsets": [{"name": "a", "nodeSelectorTerm": {"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["b"]}]}}, {"name": "b"}]}}),
    );
    let m = message(&moved, Some(&old));
    assert!(
        m.contains(
            "spec.topology.subsets[0].nodeSelectorTerm: Forbidden: may not be changed in an update"
        ),
        "{m}"
    );
    let sts = |service: &str, image: &str| {
        ud(json!({"template": {"statefulSetTemplate": {"spec": {
        "serviceName": service,
        "template": {"metadata": {"labels": {"app": "sample"}}, "spec": {"containers": [{"name": "c", "image": image}]}}}}}}))
    };
    assert_eq!(validate(&sts("s", "i:2"), Some(&sts("s", "i:1"))), []);
    assert!(
        message(&sts("t", "i:1"), Some(&sts("s", "i:1"))).contains(STATEFULSET_TEMPLATE_UPDATE)
    );
}

#[test]
fn defaults() {
    let got = with_defaults(
        &json!({"spec": {"topology": {"subsets": [{"name": "a", "maxReplicas": 2}, {"name": "b"}]}}}),
    );
    assert_eq!(got["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(got["spec"]["updateStrategy"]["type"], "Manual");
    assert_eq!(got["spec"]["topology"]["scheduleStrategy"]["type"], "Fixed");
    assert_eq!(got["spec"]["topology"]["subsets"][0]["minReplicas"], 0);
    assert_eq!(got["spec"]["topology"]["subsets"][1]["minReplicas"], 0);
    let explicit = with_defaults(
        &json!({"spec": {"topology": {"subsets": [{"name": "a", "replicas": 2}, {"name": "b"}]}}}),
    );
    assert!(
        explicit["spec"]["topology"]["subsets"][1]
            .get("minReplicas")
            .is_none()
    );
}

/// The CloneSet template of an OpenKruise v1.9 manifest (a v1beta1 CloneSetSpec).
fn v1beta1_ud(strategy: Value) -> UnitedDeployment {
    ud(json!({"template": {"cloneSetTemplate": {
        "metadata": {"labels": {"app": "sample"}},
        "spec": {
            "selector": {"matchLabels": {"app": "sample"}},
            "template": {"metadata": {"labels": {"app": "sample"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
            "updateStrategy": strategy
        }
    }}}))
}

#[test]
fn a_v1beta1_clone_set_template_is_accepted() {
    let manifest = v1beta1_ud(json!({"type": "RollingUpdate", "rollingUpdate": {
        "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}}));
    assert_eq!(validate(&manifest, None), []);
    assert_eq!(validate(&manifest, Some(&ud(json!({})))), []);
    assert_eq!(validate(&ud(json!({})), Some(&manifest)), []);
    let on_delete = v1beta1_ud(json!({"type": "OnDelete"}));
    assert_eq!(validate(&on_delete, None), []);
    let reserving = json!({"scheduleStrategy": {"type": "Adaptive", "adaptive": {"reserveUnschedulablePods": true}},
        "subsets": [{"name": "subset-a"}, {"name": "subset-b"}]});
    let mut reserved = v1beta1_ud(json!({"type": "RollingUpdate"}));
    reserved.spec.topology = serde_json::from_value(reserving).unwrap();
    assert_eq!(validate(&reserved, None), []);
}

#[test]
fn a_v1beta1_clone_set_template_is_validated_at_its_fields() {
    let partition = v1beta1_ud(json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}));
    let m = message(&partition, None);
    assert!(
        m.contains("spec.template.cloneSetTemplate.spec.updateStrategy.rollingUpdate.partition: Invalid value: 1: partition in template will not be used"),
        "{m}"
    );
    let policy = v1beta1_ud(
        json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlace"}}),
    );
    assert_eq!(
        message(&policy, None),
        "spec.template.cloneSetTemplate.spec.updateStrategy.rollingUpdate.podUpdatePolicy: Unsupported value: \"InPlace\": supported values: \"InPlaceIfPossible\", \"InPlaceOnly\", \"ReCreate\""
    );
    // A v1alpha1 type beside a v1beta1 rollingUpdate.
    let mixed = v1beta1_ud(json!({"type": "InPlaceIfPossible", "rollingUpdate": {}}));
    assert_eq!(
        message(&mixed, None),
        "spec.template.cloneSetTemplate.spec.updateStrategy.type: Unsupported value: \"InPlaceIfPossible\": supported values: \"OnDelete\", \"RollingUpdate\""
    );
    let mut wrong_type = v1beta1_ud(json!({"type": "RollingUpdate"}));
    let template = wrong_type
        .spec
        .template
        .clone_set_template
        .as_mut()
        .unwrap();
    template.v1beta1.as_mut().unwrap()["spec"]["scaleStrategy"] = json!({"enablePVCReuse": "yes"});
    let m = message(&wrong_type, None);
    assert!(
        m.starts_with("spec.template.cloneSetTemplate.spec: Invalid value: not a v1beta1 CloneSetSpec: invalid type: string \"yes\", expected a boolean"),
        "{m}"
    );
    let replicas = ud(json!({"template": {"cloneSetTemplate": {"spec": {
        "replicas": 2, "updateStrategy": {"type": "RollingUpdate"},
        "template": {"metadata": {"labels": {"app": "sample"}}, "spec": {"containers": []}}}}}}));
    assert!(message(&replicas, None).contains(TEMPLATE_REPLICAS_UNUSED));
    let selector = v1beta1_ud(json!({"type": "RollingUpdate"}));
    let mut selector = selector;
    selector.spec.selector =
        serde_json::from_value(json!({"matchLabels": {"app": "other"}})).unwrap();
    let m = message(&selector, None);
    assert!(
        m.contains("spec.template.cloneSetTemplate.spec.template.metadata.labels"),
        "{m}"
    );
}

#[test]
fn defaulting_keeps_a_v1beta1_clone_set_template() {
    let raw = json!({"metadata": {"name": "sample-ud"}, "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "sample"}},
        "template": {"cloneSetTemplate": {"spec": {
            "template": {"metadata": {"labels": {"app": "sample"}}, "spec": {"containers": []}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceOnly"}}
        }}},
        "topology": {"subsets": [{"name": "a"}]}
    }});
    let defaulted = with_defaults(&raw);
    assert_eq!(defaulted["spec"]["template"], raw["spec"]["template"]);
    let typed: UnitedDeployment = serde_json::from_value(defaulted.clone()).unwrap();
    assert_eq!(
        serde_json::to_value(&typed).unwrap()["spec"]["template"],
        raw["spec"]["template"]
    );
}
