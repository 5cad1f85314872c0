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
fn cloneset_exclude_preparing_delete_and_pre_download_move_between_spec_and_metadata() {
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
    let annotations = &alpha["metadata"]["annotations"];
    assert_eq!(annotations[keys::IMAGE_PREDOWNLOAD_PARALLELISM], "2");
    assert_eq!(annotations[keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS], "600");
    assert_eq!(
        annotations[keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS],
        "1"
    );
    assert!(alpha["spec"].get("scaleStrategy").is_none());
    assert_eq!(
        alpha["spec"]["updateStrategy"],
        json!({"type": "InPlaceOnly"})
    );
    let back = convert_cloneset(alpha, V1BETA1).unwrap();
    assert_eq!(back["spec"], beta["spec"]);
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
        proptest::option::of(intstr()),
    )
        .prop_map(
            |(ty, partition, surge, paused, disable, grace, exclude, parallelism)| {
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
                if let Some(p) = parallelism {
                    let text = match p {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    o["metadata"]["annotations"] =
                        json!({keys::IMAGE_PREDOWNLOAD_PARALLELISM: text});
                }
                o
            },
        )
}

proptest! {
    /// v1alpha1 → v1beta1 → v1alpha1 gives the object back, so a client reading and
    /// writing v1beta1 never changes what the controller sees.
    #[test]
    fn cloneset_round_trips(alpha in alpha_cloneset()) {
        let beta = convert_cloneset(alpha.clone(), V1BETA1).unwrap();
        prop_assert_eq!(&beta["metadata"]["name"], &alpha["metadata"]["name"]);
        let back = convert_cloneset(beta, V1ALPHA1).unwrap();
        prop_assert_eq!(back, alpha);
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
