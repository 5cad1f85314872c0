use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn cloneset(spec: Value) -> Value {
    json!({"apiVersion": V1ALPHA1, "kind": "CloneSet",
           "metadata": {"name": "cs", "namespace": "default", "uid": "u"},
           "spec": spec, "status": {"replicas": 3, "updatedReplicas": 1}})
}

#[test]
fn cloneset_in_place_strategy_becomes_a_rolling_update_policy() {
    let alpha = cloneset(json!({
        "replicas": 3,
        "scaleStrategy": {"podsToDelete": ["a"], "disablePVCReuse": true},
        "updateStrategy": {"type": "InPlaceIfPossible", "partition": "20%", "maxSurge": 1,
                           "paused": true, "inPlaceUpdateStrategy": {"gracePeriodSeconds": 5}},
    }));
    let beta = convert_cloneset(alpha.clone(), V1BETA1).unwrap();
    assert_eq!(beta["apiVersion"], V1BETA1);
    assert_eq!(
        beta["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible", "partition": "20%", "maxSurge": 1,
            "paused": true, "inPlaceUpdateStrategy": {"gracePeriodSeconds": 5}}})
    );
    assert_eq!(
        beta["spec"]["scaleStrategy"],
        json!({"podsToDelete": ["a"]})
    );
    assert_eq!(beta["status"], alpha["status"]);
    assert_eq!(beta["metadata"], alpha["metadata"]);
    assert_eq!(convert_cloneset(beta, V1ALPHA1).unwrap(), alpha);
}

#[test]
fn cloneset_pvc_reuse_is_inverted_and_absent_means_disabled_in_v1beta1() {
    let beta = json!({"apiVersion": V1BETA1, "kind": "CloneSet", "metadata": {"name": "cs"},
                      "spec": {"replicas": 1}});
    let alpha = convert_cloneset(beta, V1ALPHA1).unwrap();
    assert_eq!(alpha["spec"]["scaleStrategy"]["disablePVCReuse"], true);
    assert_eq!(alpha["spec"]["updateStrategy"]["type"], "ReCreate");
    let reuse = cloneset(json!({"replicas": 1}));
    let beta = convert_cloneset(reuse, V1BETA1).unwrap();
    assert_eq!(beta["spec"]["scaleStrategy"]["enablePVCReuse"], true);
}

/// A v1beta1 client that cleared `excludePreparingDelete` or a pre-download field keeps it
/// cleared: the label or annotation an earlier v1alpha1 write left on the object does not
/// bring it back through a v1alpha1 read.
#[test]
fn cloneset_v1beta1_fields_decide_over_leftover_labels_and_annotations() {
    let beta = json!({"apiVersion": V1BETA1, "kind": "CloneSet",
        "metadata": {"name": "cs",
            "labels": {"apps.kruise.io/cloneset-scaling-exclude-preparing-delete": "true", "app": "x"},
            "annotations": {"apps.kruise.io/image-predownload-parallelism": "5", "note": "y"}},
        "spec": {"scaleStrategy": {"excludePreparingDelete": false},
                 "updateStrategy": {"type": "RollingUpdate",
                     "rollingUpdate": {"inPlaceUpdateStrategy": {"imagePreDownloadTimeoutSeconds": 30}}}}});
    let alpha = convert_cloneset(beta, V1ALPHA1).unwrap();
    assert_eq!(alpha["metadata"]["labels"], json!({"app": "x"}));
    assert_eq!(alpha["metadata"]["annotations"], json!({"note": "y"}));
    assert_eq!(
        alpha["spec"]["updateStrategy"]["inPlaceUpdateStrategy"],
        json!({"imagePreDownloadTimeoutSeconds": 30})
    );
    let back = convert_cloneset(alpha, V1BETA1).unwrap();
    assert!(
        back["spec"]["scaleStrategy"]
            .get("excludePreparingDelete")
            .is_none()
    );
    assert!(
        back["spec"]["updateStrategy"]["rollingUpdate"]["inPlaceUpdateStrategy"]
            .get("imagePreDownloadParallelism")
            .is_none()
    );
}

#[test]
fn cloneset_on_delete_keeps_its_settings_both_ways() {
    let beta = json!({"apiVersion": V1BETA1, "kind": "CloneSet", "metadata": {"name": "cs"},
                      "spec": {"updateStrategy": {"type": "OnDelete",
                                                  "rollingUpdate": {"partition": 2}}}});
    let alpha = convert_cloneset(beta.clone(), V1ALPHA1).unwrap();
    assert_eq!(
        alpha["spec"]["updateStrategy"],
        json!({"type": "OnDelete", "partition": 2})
    );
    let back = convert_cloneset(alpha, V1BETA1).unwrap();
    assert_eq!(
        back["spec"]["updateStrategy"],
        beta["spec"]["updateStrategy"]
    );
}

#[test]
fn cloneset_exclude_preparing_delete_moves_to_a_label_and_pre_download_stays_a_field() {
    let beta = json!({"apiVersion": V1BETA1, "kind": "CloneSet",
        "metadata": {"name": "cs", "labels": {"app": "x"}},
        "spec": {"scaleStrategy": {"enablePVCReuse": true, "excludePreparingDelete": true},
                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                     "podUpdatePolicy": "InPlaceOnly",
                     "inPlaceUpdateStrategy": {"imagePreDownloadParallelism": 2,
                                               "imagePreDownloadTimeoutSeconds": 600,
                                               "imagePreDownloadMinUpdatedReadyPods": 1}}}}});
    let alpha = convert_cloneset(beta.clone(), V1ALPHA1).unwrap();
    assert_eq!(
        alpha["metadata"]["labels"][keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE],
        "true"
    );
    assert_eq!(alpha["metadata"]["labels"]["app"], "x");
    assert!(alpha["metadata"].get("annotations").is_none());
    assert!(alpha["spec"].get("scaleStrategy").is_none());
    assert_eq!(
        alpha["spec"]["updateStrategy"],
        json!({"type": "InPlaceOnly",
               "inPlaceUpdateStrategy": {"imagePreDownloadParallelism": 2,
                                         "imagePreDownloadTimeoutSeconds": 600,
                                         "imagePreDownloadMinUpdatedReadyPods": 1}})
    );
    let back = convert_cloneset(alpha, V1BETA1).unwrap();
    assert_eq!(back["spec"], beta["spec"]);
}

/// A v1alpha1 annotation shows as its v1beta1 field (as in OpenKruise); a v1alpha1 field
/// set beside it wins, in v1beta1 as in the controller, and both come back as they were.
#[test]
fn cloneset_pre_download_fields_win_over_their_annotations() {
    let mut alpha = cloneset(json!({"updateStrategy": {"type": "InPlaceIfPossible",
        "inPlaceUpdateStrategy": {"gracePeriodSeconds": 3, "imagePreDownloadParallelism": 4}}}));
    alpha["metadata"]["annotations"] = json!({
        keys::IMAGE_PREDOWNLOAD_PARALLELISM: "1",
        keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS: "90",
        keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS: "20%",
    });
    let beta = convert_cloneset(alpha.clone(), V1BETA1).unwrap();
    assert_eq!(
        beta["spec"]["updateStrategy"]["rollingUpdate"]["inPlaceUpdateStrategy"],
        // The percent is no v1beta1 field (an integer there): it stays the annotation.
        json!({"gracePeriodSeconds": 3, "imagePreDownloadParallelism": 4,
               "imagePreDownloadTimeoutSeconds": 90})
    );
    assert_eq!(beta["metadata"], alpha["metadata"]);
    assert_eq!(convert_cloneset(beta.clone(), V1ALPHA1).unwrap(), alpha);

    // A v1beta1 client changes the timeout: stored as the field, which wins; it clears
    // parallelism: gone, the annotation that would bring a value back too.
    let mut edited = beta;
    let in_place = &mut edited["spec"]["updateStrategy"]["rollingUpdate"]["inPlaceUpdateStrategy"];
    in_place["imagePreDownloadTimeoutSeconds"] = json!(120);
    in_place
        .as_object_mut()
        .unwrap()
        .remove("imagePreDownloadParallelism");
    let stored = convert_cloneset(edited.clone(), V1ALPHA1).unwrap();
    assert_eq!(
        stored["spec"]["updateStrategy"]["inPlaceUpdateStrategy"],
        json!({"gracePeriodSeconds": 3, "imagePreDownloadTimeoutSeconds": 120})
    );
    assert_eq!(
        stored["metadata"]["annotations"],
        json!({keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS: "90",
               keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS: "20%"})
    );
    let mut read_back = convert_cloneset(stored, V1BETA1).unwrap();
    read_back["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(keys::IMAGE_PREDOWNLOAD_PARALLELISM);
    edited["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(keys::IMAGE_PREDOWNLOAD_PARALLELISM);
    assert_eq!(read_back, edited);
}

#[test]
fn sidecarset_namespace_and_custom_version_move_between_spec_and_metadata() {
    let alpha = json!({"apiVersion": V1ALPHA1, "kind": "SidecarSet",
        "metadata": {"name": "s", "labels": {keys::SIDECARSET_CUSTOM_VERSION: "v2", "team": "a"}},
        "spec": {"namespace": "prod", "selector": {"matchLabels": {"app": "x"}},
                 "containers": [{"name": "c", "image": "i"}]}});
    let beta = convert_sidecarset(alpha.clone(), V1BETA1).unwrap();
    assert_eq!(
        beta["spec"]["namespaceSelector"],
        json!({"matchLabels": {"kubernetes.io/metadata.name": "prod"}})
    );
    assert!(beta["spec"].get("namespace").is_none());
    assert_eq!(beta["spec"]["customVersion"], "v2");
    assert_eq!(beta["metadata"]["labels"], json!({"team": "a"}));
    assert_eq!(convert_sidecarset(beta, V1ALPHA1).unwrap(), alpha);
}

#[test]
fn sidecarset_selectors_wider_than_one_namespace_stay_selectors() {
    let beta = json!({"apiVersion": V1BETA1, "kind": "SidecarSet", "metadata": {"name": "s"},
        "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "a", "env": "x"}}}});
    let alpha = convert_sidecarset(beta.clone(), V1ALPHA1).unwrap();
    assert!(alpha["spec"].get("namespace").is_none());
    assert_eq!(
        alpha["spec"]["namespaceSelector"],
        beta["spec"]["namespaceSelector"]
    );
}

#[test]
fn unknown_versions_are_refused_and_same_version_is_untouched() {
    let o = json!({"apiVersion": "apps.kruise.io/v2", "kind": "CloneSet"});
    assert!(
        convert_cloneset(o, V1ALPHA1)
            .unwrap_err()
            .contains("apps.kruise.io/v2")
    );
    let same = cloneset(json!({"weird": 1}));
    assert_eq!(convert_cloneset(same.clone(), V1ALPHA1).unwrap(), same);
}

fn intstr() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0..100i64).prop_map(|n| json!(n)),
        (0..100u8).prop_map(|n| json!(format!("{n}%")))
    ]
}

/// A value of each [`PRE_DOWNLOAD`] field in `inPlaceUpdateStrategy` and of each
/// annotation, each present or not: the v1alpha1 objects the two spellings make.
fn pre_download() -> impl Strategy<Value = Vec<(Option<Value>, Option<String>)>> {
    let text = prop_oneof![
        (0..4i32).prop_map(|n| n.to_string()),
        Just("50%".to_string()),
        Just("x".to_string()),
    ];
    let field = prop_oneof![(0..4i32).prop_map(|n| json!(n)), Just(json!("2"))];
    proptest::collection::vec(
        (proptest::option::of(field), proptest::option::of(text)),
        PRE_DOWNLOAD.len(),
    )
}

fn alpha_cloneset() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            Just("ReCreate"),
            Just("InPlaceIfPossible"),
            Just("InPlaceOnly"),
            Just("OnDelete")
        ],
        proptest::option::of(intstr()),
        proptest::option::of(intstr()),
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(1..60i32),
        any::<bool>(),
        pre_download(),
    )
        .prop_map(
            |(ty, partition, surge, paused, disable, grace, exclude, pre_download)| {
                let mut update = json!({"type": ty, "paused": paused});
                if let Some(p) = partition {
                    update["partition"] = p;
                }
                if let Some(s) = surge {
                    update["maxSurge"] = s;
                }
                if let Some(g) = grace {
                    update["inPlaceUpdateStrategy"] = json!({"gracePeriodSeconds": g});
                }
                let mut scale = json!({"podsToDelete": ["p-1"]});
                if disable {
                    scale["disablePVCReuse"] = json!(true);
                }
                let mut o = cloneset(
                    json!({"replicas": 2, "updateStrategy": update, "scaleStrategy": scale}),
                );
                if exclude {
                    o["metadata"]["labels"] =
                        json!({keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE: "true"});
                }
                for ((field, key), (value, text)) in PRE_DOWNLOAD.iter().zip(pre_download) {
                    if let Some(v) = value {
                        o["spec"]["updateStrategy"]["inPlaceUpdateStrategy"][*field] = v;
                    }
                    if let Some(t) = text {
                        o["metadata"]["annotations"][*key] = json!(t);
                    }
                }
                o
            },
        )
}

proptest! {
    /// v1alpha1 → v1beta1 → v1alpha1 gives the object back, so a client reading and
    /// writing v1beta1 never changes what the controller sees. One spelling changes, not
    /// the setting: a pre-download field equal to what its annotation says comes back as
    /// the annotation alone (v1beta1 shows both the same way, and an annotation alone is
    /// far the more common).
    #[test]
    fn cloneset_round_trips(alpha in alpha_cloneset()) {
        let beta = convert_cloneset(alpha.clone(), V1BETA1).unwrap();
        prop_assert_eq!(&beta["metadata"]["name"], &alpha["metadata"]["name"]);
        let back = convert_cloneset(beta, V1ALPHA1).unwrap();
        let mut expected = alpha.clone();
        for ((field, _), annotated) in PRE_DOWNLOAD.iter().zip(pre_download_annotations(&alpha)) {
            if let Some(in_place) = expected
                .pointer_mut("/spec/updateStrategy/inPlaceUpdateStrategy")
                .and_then(Value::as_object_mut)
                && annotated.is_some()
                && in_place.get(*field) == annotated.as_ref()
            {
                in_place.remove(*field);
            }
        }
        let strategy = expected["spec"]["updateStrategy"].as_object_mut().unwrap();
        if strategy.get("inPlaceUpdateStrategy").is_some_and(|s| s == &json!({})) {
            strategy.remove("inPlaceUpdateStrategy");
        }
        prop_assert_eq!(back, expected);
    }

    /// v1beta1 → v1alpha1 → v1beta1 gives back what a v1beta1 client wrote, except an
    /// annotation giving a pre-download setting whose field the client left out: that one
    /// is dropped, so a cleared field stays cleared.
    #[test]
    fn cloneset_v1beta1_pre_download_round_trips(settings in pre_download()) {
        let mut beta = json!({"apiVersion": V1BETA1, "kind": "CloneSet",
            "metadata": {"name": "cs", "annotations": {"note": "y"}},
            "spec": {"scaleStrategy": {"enablePVCReuse": true},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                         "podUpdatePolicy": "InPlaceIfPossible",
                         "inPlaceUpdateStrategy": {"gracePeriodSeconds": 1}}}}});
        for ((field, key), (value, text)) in PRE_DOWNLOAD.iter().zip(settings) {
            if let Some(v) = value {
                beta["spec"]["updateStrategy"]["rollingUpdate"]["inPlaceUpdateStrategy"][*field] = v;
            }
            if let Some(t) = text {
                beta["metadata"]["annotations"][*key] = json!(t);
            }
        }
        let back = convert_cloneset(convert_cloneset(beta.clone(), V1ALPHA1).unwrap(), V1BETA1).unwrap();
        let mut expected = beta.clone();
        let in_place = &beta["spec"]["updateStrategy"]["rollingUpdate"]["inPlaceUpdateStrategy"];
        for ((field, key), annotated) in PRE_DOWNLOAD.iter().zip(pre_download_annotations(&beta)) {
            if annotated.is_some() && in_place.get(*field).is_none() {
                expected["metadata"]["annotations"].as_object_mut().unwrap().remove(*key);
            }
        }
        prop_assert_eq!(back, expected);
    }

    #[test]
    fn sidecarset_round_trips(ns in proptest::option::of("[a-z]{1,8}"),
                              version in proptest::option::of("[a-z0-9]{1,5}")) {
        let mut alpha = json!({"apiVersion": V1ALPHA1, "kind": "SidecarSet",
            "metadata": {"name": "s", "labels": {"team": "a"}},
            "spec": {"selector": {"matchLabels": {"app": "x"}}}});
        if let Some(ns) = ns {
            alpha["spec"]["namespace"] = json!(ns);
        }
        if let Some(v) = version {
            alpha["metadata"]["labels"][keys::SIDECARSET_CUSTOM_VERSION] = json!(v);
        }
        let beta = convert_sidecarset(alpha.clone(), V1BETA1).unwrap();
        prop_assert!(beta["spec"].get("namespace").is_none());
        prop_assert_eq!(convert_sidecarset(beta, V1ALPHA1).unwrap(), alpha);
    }
}

fn daemonset(annotations: Value, rolling: Value) -> Value {
    json!({"apiVersion": V1ALPHA1, "kind": "DaemonSet",
           "metadata": {"name": "ds", "namespace": "default", "annotations": annotations},
           "spec": {"selector": {"matchLabels": {"app": "d"}},
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling}},
           "status": {"desiredNumberScheduled": 4, "daemonSetHash": "ds-7d9f"}})
}

#[test]
fn daemonset_partitioned_scaling_and_update_revision_move_between_versions() {
    let progressive = json!({keys::DAEMONSET_PROGRESSIVE_CREATE_POD: "true"});
    let alpha = daemonset(progressive, json!({"partition": 2}));
    let beta = convert_daemonset(alpha.clone(), V1BETA1).unwrap();
    assert_eq!(beta["apiVersion"], V1BETA1);
    assert_eq!(
        beta["spec"]["scaleStrategy"],
        json!({"partitionedScaling": true})
    );
    assert_eq!(beta["status"]["updateRevision"], "ds-7d9f");
    assert!(beta["status"].get("daemonSetHash").is_none());
    assert_eq!(convert_daemonset(beta.clone(), V1ALPHA1).unwrap(), alpha);
    // A v1beta1 client turning it off is heard.
    let mut off = beta;
    off["spec"]["scaleStrategy"]["partitionedScaling"] = json!(false);
    let alpha = convert_daemonset(off, V1ALPHA1).unwrap();
    assert_eq!(alpha["metadata"]["annotations"], json!({}));
    assert!(alpha["spec"].get("scaleStrategy").is_none());
}

#[test]
fn daemonset_surging_reads_as_what_it_means_in_v1beta1() {
    let alpha = daemonset(json!({}), json!({"rollingUpdateType": "Surging"}));
    let beta = convert_daemonset(alpha, V1BETA1).unwrap();
    assert_eq!(
        beta["spec"]["updateStrategy"]["rollingUpdate"],
        json!({"rollingUpdateType": "Standard", "maxSurge": 1, "maxUnavailable": 0})
    );
    // Settings of its own are kept.
    let alpha = daemonset(
        json!({}),
        json!({"rollingUpdateType": "Surging", "maxSurge": "50%"}),
    );
    let beta = convert_daemonset(alpha, V1BETA1).unwrap();
    assert_eq!(
        beta["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"],
        "50%"
    );
}

proptest! {
    #[test]
    fn daemonset_round_trips(progressive in any::<bool>(),
                             rolling_type in prop_oneof![Just("Standard"), Just("InPlaceIfPossible")],
                             partition in proptest::option::of(intstr()),
                             surge in proptest::option::of(intstr())) {
        let annotations = if progressive {
            json!({keys::DAEMONSET_PROGRESSIVE_CREATE_POD: "true", "other": "x"})
        } else {
            json!({"other": "x"})
        };
        let mut rolling = json!({"rollingUpdateType": rolling_type});
        if let Some(p) = partition {
            rolling["partition"] = p;
        }
        if let Some(s) = surge {
            rolling["maxSurge"] = s;
        }
        let alpha = daemonset(annotations, rolling);
        let beta = convert_daemonset(alpha.clone(), V1BETA1).unwrap();
        prop_assert_eq!(beta["spec"].get("scaleStrategy").is_some(), progressive);
        prop_assert_eq!(convert_daemonset(beta, V1ALPHA1).unwrap(), alpha);
    }
}

// --- ResourceDistribution, PersistentPodState, WorkloadSpread, UnitedDeployment ---

use crate::apps_v1alpha1 as alpha;
use crate::apps_v1beta1 as beta;

fn object(version: &str, kind: &str, spec: Value, status: Value) -> Value {
    json!({"apiVersion": version, "kind": kind,
           "metadata": {"name": "x", "namespace": "default", "labels": {"a": "b"}},
           "spec": spec, "status": status})
}

#[test]
fn resourcedistribution_selector_and_failed_namespaces_are_renamed() {
    let alpha_rd = object(
        V1ALPHA1,
        "ResourceDistribution",
        json!({"resource": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
               "targets": {"allNamespaces": true,
                           "excludedNamespaces": {"list": [{"name": "kube-system"}]},
                           "namespaceLabelSelector": {"matchLabels": {"group": "test"}}}}),
        json!({"desired": 3, "succeeded": 2, "failed": 1,
               "conditions": [{"type": "ConflictOccurred", "status": "True",
                               "failedNamespace": ["ns-3"]}]}),
    );
    let beta_rd = convert_resourcedistribution(alpha_rd.clone(), V1BETA1).unwrap();
    assert_eq!(beta_rd["apiVersion"], V1BETA1);
    assert_eq!(
        beta_rd["spec"]["targets"]["namespaceSelector"],
        json!({"matchLabels": {"group": "test"}})
    );
    assert!(beta_rd["spec"]["targets"]["namespaceLabelSelector"].is_null());
    assert_eq!(
        beta_rd["status"]["conditions"][0]["failedNamespaces"],
        json!(["ns-3"])
    );
    assert_eq!(beta_rd["metadata"], alpha_rd["metadata"]);
    // Every field decodes into the v1beta1 type (nothing left in the v1alpha1 spelling).
    let typed: beta::resourcedistribution::ResourceDistribution =
        serde_json::from_value(beta_rd.clone()).unwrap();
    assert_eq!(
        typed.status.unwrap().conditions[0].failed_namespaces,
        vec!["ns-3"]
    );
    assert_eq!(
        convert_resourcedistribution(beta_rd, V1ALPHA1).unwrap(),
        alpha_rd
    );
}

#[test]
fn persistentpodstate_topology_keys_are_renamed_in_both_terms() {
    let beta_pps = object(
        V1BETA1,
        "PersistentPodState",
        json!({"targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web"},
               "requiredPersistentTopology": {"keys": ["topology.kubernetes.io/zone"]},
               "preferredPersistentTopology": [{"weight": 100,
                   "preference": {"keys": ["kubernetes.io/hostname"]}}]}),
        json!({"observedGeneration": 1, "podStates": {"web-0": {"nodeName": "n1"}}}),
    );
    let alpha_pps = convert_persistentpodstate(beta_pps.clone(), V1ALPHA1).unwrap();
    let typed: alpha::PersistentPodState = serde_json::from_value(alpha_pps.clone()).unwrap();
    assert_eq!(
        typed
            .spec
            .required_persistent_topology
            .unwrap()
            .node_topology_keys,
        vec!["topology.kubernetes.io/zone"]
    );
    assert_eq!(
        typed.spec.preferred_persistent_topology[0]
            .preference
            .node_topology_keys,
        vec!["kubernetes.io/hostname"]
    );
    assert_eq!(alpha_pps["status"], beta_pps["status"]);
    assert_eq!(
        convert_persistentpodstate(alpha_pps, V1BETA1).unwrap(),
        beta_pps
    );
}

#[test]
fn workloadspread_subset_node_selectors_are_renamed() {
    let alpha_ws = object(
        V1ALPHA1,
        "WorkloadSpread",
        json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
               "subsets": [
                 {"name": "a", "maxReplicas": 2,
                  "requiredNodeSelectorTerm": {"matchExpressions": [
                      {"key": "zone", "operator": "In", "values": ["a"]}]},
                  "preferredNodeSelectorTerms": [{"weight": 1, "preference": {}}]},
                 {"name": "b"}]}),
        json!({"subsetStatuses": [{"name": "a", "replicas": 2, "missingReplicas": 0}]}),
    );
    let beta_ws = convert_workloadspread(alpha_ws.clone(), V1BETA1).unwrap();
    let typed: beta::workloadspread::WorkloadSpread =
        serde_json::from_value(beta_ws.clone()).unwrap();
    let subset = &typed.spec.subsets[0];
    assert_eq!(
        subset
            .required_node_selector
            .as_ref()
            .unwrap()
            .match_expressions
            .as_ref()
            .unwrap()[0]
            .key,
        "zone"
    );
    assert_eq!(subset.preferred_node_selector.len(), 1);
    assert!(beta_ws["spec"]["subsets"][0]["requiredNodeSelectorTerm"].is_null());
    assert_eq!(beta_ws["spec"]["subsets"][1], json!({"name": "b"}));
    assert_eq!(convert_workloadspread(beta_ws, V1ALPHA1).unwrap(), alpha_ws);
}

#[test]
fn uniteddeployment_status_maps_fold_into_subset_statuses() {
    let alpha_ud = object(
        V1ALPHA1,
        "UnitedDeployment",
        json!({"replicas": 5, "selector": {"matchLabels": {"app": "x"}}}),
        json!({"replicas": 5, "currentRevision": "r1",
               "subsetReplicas": {"a": 3, "b": 2},
               "subsetStatuses": [{"name": "a", "replicas": 3, "readyReplicas": 3}],
               "updateStatus": {"updatedRevision": "r2", "currentPartitions": {"a": 1, "b": 0}}}),
    );
    let beta_ud = convert_uniteddeployment(alpha_ud.clone(), V1BETA1).unwrap();
    let typed: beta::uniteddeployment::UnitedDeployment =
        serde_json::from_value(beta_ud.clone()).unwrap();
    let status = typed.status.unwrap();
    assert_eq!(status.updated_revision, "r2");
    assert_eq!(status.current_revision, "r1");
    let by_name: Vec<(&str, i32, i32, i32)> = status
        .subset_statuses
        .iter()
        .map(|s| (s.name.as_str(), s.replicas, s.ready_replicas, s.partition))
        .collect();
    assert_eq!(by_name, vec![("a", 3, 3, 1), ("b", 2, 0, 0)]);
    assert!(beta_ud["status"]["subsetReplicas"].is_null());
    assert!(beta_ud["status"]["updateStatus"].is_null());
    assert_eq!(beta_ud["spec"], alpha_ud["spec"]);

    let back: alpha::UnitedDeployment =
        serde_json::from_value(convert_uniteddeployment(beta_ud, V1ALPHA1).unwrap()).unwrap();
    let status = back.status.unwrap();
    assert_eq!(
        status.subset_replicas,
        [("a".into(), 3), ("b".into(), 2)].into()
    );
    let update = status.update_status.unwrap();
    assert_eq!(update.updated_revision, "r2");
    assert_eq!(
        update.current_partitions,
        [("a".into(), 1), ("b".into(), 0)].into()
    );
}

#[test]
fn uniteddeployment_without_status_converts_its_version_only() {
    let beta_ud = json!({"apiVersion": V1BETA1, "kind": "UnitedDeployment",
                         "metadata": {"name": "x"},
                         "spec": {"selector": {"matchLabels": {"app": "x"}}}});
    let alpha_ud = convert_uniteddeployment(beta_ud.clone(), V1ALPHA1).unwrap();
    assert_eq!(alpha_ud["apiVersion"], V1ALPHA1);
    assert_eq!(alpha_ud["spec"], beta_ud["spec"]);
    assert!(alpha_ud.get("status").is_none());
    assert_eq!(
        convert_uniteddeployment(alpha_ud, V1BETA1).unwrap(),
        beta_ud
    );
}

fn names() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::btree_set("[a-z]{1,6}", 0..4).prop_map(|s| s.into_iter().collect())
}

/// A UnitedDeployment status as our controller writes it (v1alpha1): every subset in
/// `subsetStatuses`, its replicas and partition also in the two maps.
fn alpha_ud_status() -> impl Strategy<Value = alpha::UnitedDeploymentStatus> {
    (names(), "[a-z0-9]{0,5}", any::<bool>()).prop_flat_map(|(names, revision, rolling)| {
        let n = names.len();
        (
            proptest::collection::vec((0..10i32, 0..10i32, 0..10i32), n),
            Just(names),
            Just(revision),
            Just(rolling),
        )
            .prop_map(|(numbers, names, revision, rolling)| {
                let mut status = alpha::UnitedDeploymentStatus {
                    current_revision: "c".into(),
                    ..Default::default()
                };
                for (name, (replicas, ready, partition)) in names.iter().zip(numbers) {
                    status.subset_replicas.insert(name.clone(), replicas);
                    status
                        .subset_statuses
                        .push(alpha::UnitedDeploymentSubsetStatus {
                            name: name.clone(),
                            replicas,
                            ready_replicas: ready,
                            partition,
                            ..Default::default()
                        });
                }
                if rolling {
                    status.update_status = Some(alpha::UpdateStatus {
                        updated_revision: revision,
                        current_partitions: status
                            .subset_statuses
                            .iter()
                            .map(|s| (s.name.clone(), s.partition))
                            .collect(),
                    });
                }
                status
            })
    })
}

fn beta_ud_status() -> impl Strategy<Value = beta::uniteddeployment::UnitedDeploymentStatus> {
    (
        names(),
        "[a-z0-9]{0,5}",
        proptest::collection::vec((0..10i32, 0..10i32, 0..10i32), 4),
    )
        .prop_map(|(names, revision, numbers)| {
            beta::uniteddeployment::UnitedDeploymentStatus {
                updated_revision: revision,
                subset_statuses: names
                    .into_iter()
                    .zip(numbers)
                    .map(|(name, (replicas, ready, partition))| {
                        alpha::UnitedDeploymentSubsetStatus {
                            name,
                            replicas,
                            ready_replicas: ready,
                            partition,
                            ..Default::default()
                        }
                    })
                    .collect(),
                ..Default::default()
            }
        })
}

fn node_selector_term() -> impl Strategy<Value = Value> {
    ("[a-z]{1,5}", proptest::collection::vec("[a-z]{1,3}", 0..3)).prop_map(|(key, values)| {
        json!({"matchExpressions": [{"key": key, "operator": "In", "values": values}]})
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A status our controller wrote reads as v1beta1 and comes back unchanged.
    #[test]
    fn uniteddeployment_alpha_status_round_trips(status in alpha_ud_status()) {
        let ud = alpha::UnitedDeployment {
            metadata: kube::api::ObjectMeta { name: Some("x".into()), ..Default::default() },
            spec: Default::default(),
            status: Some(status),
        };
        let mut json = serde_json::to_value(&ud).unwrap();
        json["apiVersion"] = json!(V1ALPHA1);
        let beta_json = convert_uniteddeployment(json, V1BETA1).unwrap();
        let typed: beta::uniteddeployment::UnitedDeployment =
            serde_json::from_value(beta_json.clone()).unwrap();
        let alpha_status = ud.status.as_ref().unwrap();
        let beta_status = typed.status.unwrap();
        prop_assert_eq!(&beta_status.subset_statuses, &alpha_status.subset_statuses);
        prop_assert_eq!(
            beta_status.updated_revision,
            alpha_status.update_status.as_ref().map(|u| u.updated_revision.clone()).unwrap_or_default()
        );
        let back: alpha::UnitedDeployment =
            serde_json::from_value(convert_uniteddeployment(beta_json, V1ALPHA1).unwrap()).unwrap();
        // v1alpha1's updateStatus is what v1beta1 had: present once there are subsets
        // or a revision.
        let mut expected = ud.clone();
        let s = expected.status.as_mut().unwrap();
        if s.update_status.is_none() && !s.subset_statuses.is_empty() {
            s.update_status = Some(alpha::UpdateStatus {
                updated_revision: String::new(),
                current_partitions: s.subset_statuses.iter().map(|x| (x.name.clone(), x.partition)).collect(),
            });
        }
        if s.update_status.as_ref().is_some_and(|u| u.updated_revision.is_empty()) && s.subset_statuses.is_empty() {
            s.update_status = None;
        }
        prop_assert_eq!(back, expected);
    }

    /// Any v1beta1 status (subsets named uniquely) survives v1alpha1 storage.
    #[test]
    fn uniteddeployment_beta_status_round_trips(status in beta_ud_status()) {
        let ud = beta::uniteddeployment::UnitedDeployment {
            metadata: kube::api::ObjectMeta { name: Some("x".into()), ..Default::default() },
            spec: Default::default(),
            status: Some(status),
        };
        let mut json = serde_json::to_value(&ud).unwrap();
        json["apiVersion"] = json!(V1BETA1);
        let stored = convert_uniteddeployment(json, V1ALPHA1).unwrap();
        let _: alpha::UnitedDeployment = serde_json::from_value(stored.clone()).unwrap();
        let back: beta::uniteddeployment::UnitedDeployment =
            serde_json::from_value(convert_uniteddeployment(stored, V1BETA1).unwrap()).unwrap();
        prop_assert_eq!(back, ud);
    }

    /// The renamed kinds: v1alpha1 → v1beta1 → v1alpha1 is the identity, and nothing in
    /// the v1alpha1 spelling is left in v1beta1.
    #[test]
    fn renamed_kinds_round_trip(
        selector in proptest::option::of(proptest::collection::btree_map("[a-z]{1,4}", "[a-z]{1,4}", 0..3)),
        failed in proptest::collection::vec(proptest::collection::vec("[a-z]{1,5}", 0..3), 0..3),
        required in proptest::option::of(proptest::collection::vec("[a-z./]{1,10}", 0..3)),
        preferred in proptest::collection::vec(proptest::collection::vec("[a-z./]{1,10}", 0..3), 0..3),
        subsets in proptest::collection::vec(
            (proptest::option::of(node_selector_term()), proptest::option::of(node_selector_term())), 0..4),
    ) {
        let mut targets = json!({"allNamespaces": true});
        if let Some(labels) = selector {
            targets["namespaceLabelSelector"] = json!({"matchLabels": labels});
        }
        let conditions: Vec<Value> = failed.iter().map(|ns| {
            let mut c = json!({"type": "ConflictOccurred", "status": "True"});
            if !ns.is_empty() { c["failedNamespace"] = json!(ns); }
            c
        }).collect();
        let rd = object(V1ALPHA1, "ResourceDistribution",
            json!({"resource": {"kind": "ConfigMap"}, "targets": targets}),
            json!({"conditions": conditions}));

        let mut pps_spec = json!({"targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s"}});
        if let Some(keys) = required { pps_spec["requiredPersistentTopology"] = json!({"nodeTopologyKeys": keys}); }
        pps_spec["preferredPersistentTopology"] = json!(preferred.iter().map(|k|
            json!({"weight": 1, "preference": {"nodeTopologyKeys": k}})).collect::<Vec<_>>());
        let pps = object(V1ALPHA1, "PersistentPodState", pps_spec, json!({}));

        let ws_subsets: Vec<Value> = subsets.iter().enumerate().map(|(i, (req, pref))| {
            let mut s = json!({"name": format!("s{i}")});
            if let Some(r) = req { s["requiredNodeSelectorTerm"] = r.clone(); }
            if let Some(p) = pref { s["preferredNodeSelectorTerms"] = json!([{"weight": 1, "preference": p}]); }
            s
        }).collect();
        let ws = object(V1ALPHA1, "WorkloadSpread",
            json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, "subsets": ws_subsets}),
            json!({}));

        for (object, convert, old_names) in [
            (rd, convert_resourcedistribution as fn(Value, &str) -> Result<Value, String>,
             ["namespaceLabelSelector", "failedNamespace"]),
            (pps, convert_persistentpodstate, ["nodeTopologyKeys", "nodeTopologyKeys"]),
            (ws, convert_workloadspread, ["requiredNodeSelectorTerm", "preferredNodeSelectorTerms"]),
        ] {
            let beta_json = convert(object.clone(), V1BETA1).unwrap();
            let text = beta_json.to_string();
            for old in old_names {
                prop_assert!(!text.contains(&format!("\"{old}\"")), "{} in {}", old, text);
            }
            prop_assert_eq!(convert(beta_json, V1ALPHA1).unwrap(), object);
        }
    }
}

fn crr(annotations: Value, status: Value) -> Value {
    json!({"apiVersion": V1ALPHA1, "kind": "ContainerRecreateRequest",
           "metadata": {"name": "crr", "namespace": "default", "annotations": annotations,
                        "labels": {"crr.apps.kruise.io/node-name": "real-0"}},
           "spec": {"podName": "pod", "containers": [{"name": "app"}, {"name": "sidecar"}],
                    "strategy": {"failurePolicy": "Fail", "unreadyGracePeriodSeconds": 1}},
           "status": status})
}

#[test]
fn crr_annotations_become_v1beta1_status_and_come_back() {
    let snapshot = r#"[{"name":"app","ready":true,"restartCount":1,"containerID":"containerd://new"},{"name":"sidecar","ready":false,"restartCount":0}]"#;
    let alpha = crr(
        json!({keys::CRR_SYNC_CONTAINER_STATUSES: snapshot,
               keys::CRR_UNREADY_ACQUIRED: "2026-11-26T08:00:00Z",
               "other": "kept"}),
        json!({"phase": "Completed", "completionTime": "2026-11-26T08:00:09Z",
               "containerRecreateStates": [{"name": "app", "phase": "Succeeded", "isKilled": true}]}),
    );
    let beta = convert_containerrecreaterequest(alpha.clone(), V1BETA1).unwrap();
    assert_eq!(beta["apiVersion"], V1BETA1);
    // OpenKruise's e2e suite: the legacy annotations are absent on v1beta1 objects.
    assert_eq!(beta["metadata"]["annotations"], json!({"other": "kept"}));
    assert_eq!(
        beta["status"]["containerStatusSnapshot"],
        json!([{"name": "app", "ready": true, "restartCount": 1, "containerID": "containerd://new"},
               {"name": "sidecar", "ready": false, "restartCount": 0}])
    );
    let conditions = beta["status"]["conditions"].as_array().unwrap();
    assert_eq!(conditions.len(), 1);
    assert_eq!(conditions[0]["type"], "PreRecreateGrace");
    assert_eq!(conditions[0]["status"], "True");
    assert_eq!(conditions[0]["lastTransitionTime"], "2026-11-26T08:00:00Z");
    assert_eq!(beta["spec"], alpha["spec"]);
    assert_eq!(beta["status"]["phase"], "Completed");
    // It parses as the v1beta1 type.
    let typed: beta::containerrecreaterequest::ContainerRecreateRequest =
        serde_json::from_value(beta.clone()).unwrap();
    assert_eq!(typed.status.unwrap().container_status_snapshot.len(), 2);
    assert_eq!(
        convert_containerrecreaterequest(beta, V1ALPHA1).unwrap(),
        alpha
    );
}

#[test]
fn crr_without_annotations_converts_its_version_only() {
    let mut alpha = crr(json!({}), json!({"phase": "Pending"}));
    alpha["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    let beta = convert_containerrecreaterequest(alpha.clone(), V1BETA1).unwrap();
    let mut relabelled = alpha.clone();
    relabelled["apiVersion"] = json!(V1BETA1);
    assert_eq!(beta, relabelled);
    assert_eq!(
        convert_containerrecreaterequest(beta, V1ALPHA1).unwrap(),
        alpha
    );
}

#[test]
fn crr_annotations_that_do_not_parse_stay_annotations() {
    let alpha = crr(
        json!({keys::CRR_SYNC_CONTAINER_STATUSES: "not json",
               keys::CRR_UNREADY_ACQUIRED: "yesterday"}),
        json!({}),
    );
    let beta = convert_containerrecreaterequest(alpha.clone(), V1BETA1).unwrap();
    assert_eq!(
        beta["metadata"]["annotations"],
        alpha["metadata"]["annotations"]
    );
    assert_eq!(beta["status"], json!({}));
    assert_eq!(
        convert_containerrecreaterequest(beta, V1ALPHA1).unwrap(),
        alpha
    );
}

#[test]
fn crr_v1beta1_status_written_by_a_client_is_stored_as_the_annotations() {
    let beta = json!({"apiVersion": V1BETA1, "kind": "ContainerRecreateRequest",
        "metadata": {"name": "crr"},
        "spec": {"podName": "pod", "containers": [{"name": "app"}]},
        "status": {"phase": "Recreating",
                   "containerStatusSnapshot": [{"name": "app", "ready": false, "restartCount": 2}],
                   "conditions": [{"type": "PreRecreateGrace", "status": "True",
                                   "lastTransitionTime": "2026-11-26T08:00:00Z",
                                   "reason": "PreRecreateGrace", "message": "m"},
                                  {"type": "Other", "status": "False",
                                   "lastTransitionTime": "2026-11-26T08:00:00Z",
                                   "reason": "R", "message": "m"}]}});
    let alpha = convert_containerrecreaterequest(beta, V1ALPHA1).unwrap();
    assert_eq!(
        alpha["metadata"]["annotations"],
        json!({keys::CRR_SYNC_CONTAINER_STATUSES: r#"[{"name":"app","ready":false,"restartCount":2}]"#,
               keys::CRR_UNREADY_ACQUIRED: "2026-11-26T08:00:00Z"})
    );
    assert!(alpha["status"].get("containerStatusSnapshot").is_none());
    assert_eq!(alpha["status"]["conditions"].as_array().unwrap().len(), 1);
}
