use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::matching::NamespaceLabels;

pub(crate) fn sidecarset(name: &str, spec: Value) -> SidecarSet {
    let mut ss: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap();
    let h = hash::hashes(&ss.spec);
    ss.metadata.annotations = Some(
        [
            (keys::SIDECARSET_HASH.to_string(), h.hash),
            (
                keys::SIDECARSET_HASH_WITHOUT_IMAGE.to_string(),
                h.without_image,
            ),
        ]
        .into(),
    );
    ss
}

fn pod(v: Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

fn now() -> Timestamp {
    "2022-03-06T09:56:15Z".parse().unwrap()
}

struct NoRevisions;
impl Revisions for NoRevisions {
    fn named(&self, _: &str) -> Option<ControllerRevision> {
        None
    }
    fn of(&self, _: &str) -> Vec<ControllerRevision> {
        Vec::new()
    }
}

struct NoNamespaces;
impl NamespaceLabels for NoNamespaces {
    fn labels_of(&self, _: &str) -> Option<BTreeMap<String, String>> {
        None
    }
}

fn run(p: &Pod, sets: &[SidecarSet]) -> Injected {
    let chosen = choose(p, sets, &NoNamespaces, &NoRevisions, &mut || 0.5);
    inject(p, &chosen, now())
}

fn names(p: &Pod) -> Vec<String> {
    p.spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| c.name.clone())
        .collect()
}

fn container<'p>(p: &'p Pod, name: &str) -> &'p Container {
    p.spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

fn env<'c>(c: &'c Container, name: &str) -> Option<&'c EnvVar> {
    c.env.iter().flatten().find(|e| e.name == name)
}

fn test_sidecarset() -> SidecarSet {
    sidecarset(
        "test-sidecarset",
        json!({
            "selector": {"matchLabels": {"app": "nginx"}},
            "updateStrategy": {"type": "RollingUpdate", "maxUnavailable": 1},
            "containers": [{"name": "sidecar1", "image": "busybox", "imagePullPolicy": "Always",
                            "command": ["sleep", "999d"],
                            "volumeMounts": [{"name": "log-volume", "mountPath": "/var/log"}]}],
            "volumes": [{"name": "log-volume", "emptyDir": {}}]
        }),
    )
}

fn test_pod() -> Pod {
    pod(json!({
        "metadata": {"name": "test-pod", "namespace": "default", "labels": {"app": "nginx"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.7.9"}]}
    }))
}

#[test]
fn seed_s1_test_pod_gets_sidecar1_first() {
    let out = run(&test_pod(), &[test_sidecarset()]);
    assert!(out.warnings.is_empty(), "{:?}", out.warnings);
    let p = &out.pod;
    assert_eq!(names(p), ["sidecar1", "app"]);
    let s = container(p, "sidecar1");
    assert_eq!(s.image.as_deref(), Some("busybox"));
    assert_eq!(s.image_pull_policy.as_deref(), Some("Always"));
    assert_eq!(
        env(s, "IS_INJECTED").unwrap().value.as_deref(),
        Some("true")
    );
    let mount = &s.volume_mounts.as_ref().unwrap()[0];
    assert_eq!(
        (mount.name.as_str(), mount.mount_path.as_str()),
        ("log-volume", "/var/log")
    );
    let volumes = p.spec.as_ref().unwrap().volumes.as_ref().unwrap();
    assert_eq!(volumes.len(), 1);
    assert_eq!(volumes[0].name, "log-volume");
    assert!(volumes[0].empty_dir.is_some());
    let annotations = p.metadata.annotations.as_ref().unwrap();
    assert_eq!(
        annotations[keys::SIDECARSET_INJECTED_LIST],
        "test-sidecarset"
    );
    let hashes: serde_json::Map<String, Value> =
        serde_json::from_str(&annotations[keys::SIDECARSET_HASH]).unwrap();
    let entry = &hashes["test-sidecarset"];
    assert_eq!(
        entry["hash"],
        json!(hash::hashes(&test_sidecarset().spec).hash)
    );
    assert_eq!(entry["sidecarList"], json!(["sidecar1"]));
    assert_eq!(entry["updateTimestamp"], "2022-03-06T09:56:15Z");
    assert!(annotations.contains_key(keys::SIDECARSET_HASH_WITHOUT_IMAGE));
}

#[test]
fn non_matching_pods_are_untouched() {
    let mut p = test_pod();
    p.metadata.labels = Some([("app".to_string(), "other".to_string())].into());
    let out = run(&p, &[test_sidecarset()]);
    assert_eq!(out.pod, p);
}

#[test]
fn seed_s3_share_volumes_and_transfer_env() {
    let ss = sidecarset(
        "sidecarset",
        json!({
            "selector": {"matchLabels": {"app": "sample"}},
            "containers": [{"name": "nginx", "image": "nginx:alpine",
                            "volumeMounts": [{"mountPath": "/nginx/conf", "name": "nginx-conf"}],
                            "env": [{"name": "OWN", "value": "sidecar"}],
                            "podInjectPolicy": "BeforeAppContainer",
                            "shareVolumePolicy": {"type": "enabled"},
                            "transferEnv": [{"sourceContainerName": "main", "envName": "PROXY_IP"},
                                            {"sourceContainerName": "main", "envNames": ["OWN", "MISSING"]}]}],
            "volumes": [{"name": "nginx-conf", "hostPath": {"path": "/data/nginx/conf"}}, {"name": "unused", "emptyDir": {}}]
        }),
    );
    let p = pod(json!({
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "sample"}},
        "spec": {"containers": [{"name": "main", "image": "app",
            "env": [{"name": "PROXY_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}, {"name": "OWN", "value": "main"}, {"name": "SUB", "value": "x"}],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "conf2", "mountPath": "/nginx/conf"},
                             {"name": "logs", "mountPath": "/logs", "subPathExpr": "$(SUB)/log"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "conf2", "emptyDir": {}}, {"name": "logs", "emptyDir": {}}]}
    }));
    let out = run(&p, &[ss]);
    assert_eq!(names(&out.pod), ["nginx", "main"]);
    let n = container(&out.pod, "nginx");
    let paths: Vec<&str> = n
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    assert_eq!(
        paths,
        ["/nginx/conf", "/data", "/logs"],
        "its own path is kept, not shared"
    );
    let proxy = env(n, "PROXY_IP").unwrap();
    assert_eq!(
        proxy
            .value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref()
            .unwrap()
            .field_path,
        "status.podIP",
        "the whole EnvVar, valueFrom included"
    );
    assert_eq!(
        env(n, "OWN").unwrap().value.as_deref(),
        Some("sidecar"),
        "never overwritten"
    );
    assert!(env(n, "MISSING").is_none());
    assert_eq!(
        env(n, "SUB").unwrap().value.as_deref(),
        Some("x"),
        "subPathExpr env"
    );
    let volumes: Vec<&str> = out
        .pod
        .spec
        .as_ref()
        .unwrap()
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(
        volumes,
        ["data", "conf2", "logs", "nginx-conf"],
        "unmounted volumes are not injected"
    );
}

#[test]
fn after_app_container_is_appended_and_fieldref_source() {
    let ss = sidecarset(
        "s",
        json!({
            "selector": {"matchLabels": {"app": "a"}},
            "containers": [{"name": "late", "image": "x", "podInjectPolicy": "AfterAppContainer",
                "transferEnv": [{"sourceContainerNameFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels['main']"}}, "envName": "E"}]}]
        }),
    );
    let p = pod(json!({
        "metadata": {"name": "p", "labels": {"app": "a", "main": "second"}},
        "spec": {"containers": [{"name": "first", "image": "x", "env": [{"name": "E", "value": "1"}]},
                                {"name": "second", "image": "x", "env": [{"name": "E", "value": "2"}]}]}
    }));
    let out = run(&p, &[ss]);
    assert_eq!(names(&out.pod), ["first", "second", "late"]);
    assert_eq!(
        env(container(&out.pod, "late"), "E")
            .unwrap()
            .value
            .as_deref(),
        Some("2")
    );
}

#[test]
fn existing_container_name_is_replaced_in_place() {
    let mut p = test_pod();
    p.spec.as_mut().unwrap().containers.push(Container {
        name: "sidecar1".into(),
        image: Some("old".into()),
        ..Default::default()
    });
    let out = run(&p, &[test_sidecarset()]);
    assert_eq!(names(&out.pod), ["app", "sidecar1"]);
    assert_eq!(
        container(&out.pod, "sidecar1").image.as_deref(),
        Some("busybox")
    );
}

#[test]
fn the_pods_volume_wins_a_clash() {
    let mut p = test_pod();
    p.spec.as_mut().unwrap().volumes = Some(vec![Volume {
        name: "log-volume".into(),
        host_path: Some(k8s_openapi::api::core::v1::HostPathVolumeSource {
            path: "/var/log".into(),
            type_: None,
        }),
        ..Default::default()
    }]);
    let out = run(&p, &[test_sidecarset()]);
    let volumes = out.pod.spec.as_ref().unwrap().volumes.as_ref().unwrap();
    assert_eq!(volumes.len(), 1);
    assert!(volumes[0].host_path.is_some());
    assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
}

#[test]
fn two_sidecarsets_never_duplicate_a_container() {
    let a = test_sidecarset();
    let mut b = test_sidecarset();
    b.metadata.name = Some("b-other".into());
    let out = run(&test_pod(), &[a, b]);
    assert_eq!(names(&out.pod), ["sidecar1", "app"]);
    assert_eq!(out.warnings.len(), 1);
    assert!(
        out.warnings[0].contains("SidecarSet b-other already injects it"),
        "{:?}",
        out.warnings
    );
    assert_eq!(
        out.pod.metadata.annotations.as_ref().unwrap()[keys::SIDECARSET_INJECTED_LIST],
        "b-other,test-sidecarset"
    );
}

#[test]
fn init_containers_sorted_after_the_pods_own_and_pull_secrets_deduplicated() {
    let ss = sidecarset(
        "s",
        json!({
            "selector": {"matchLabels": {"app": "nginx"}},
            "initContainers": [{"name": "z-init", "image": "x"}, {"name": "a-init", "image": "x"}],
            "imagePullSecrets": [{"name": "shared"}, {"name": "mine"}]
        }),
    );
    let mut p = test_pod();
    let spec = p.spec.as_mut().unwrap();
    spec.init_containers = Some(vec![Container {
        name: "own".into(),
        image: Some("x".into()),
        ..Default::default()
    }]);
    spec.image_pull_secrets = Some(vec![LocalObjectReference {
        name: "shared".into(),
    }]);
    let out = run(&p, &[ss]);
    let spec = out.pod.spec.as_ref().unwrap();
    let init: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(init, ["own", "a-init", "z-init"]);
    let secrets: Vec<&str> = spec
        .image_pull_secrets
        .iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(secrets, ["shared", "mine"]);
    assert!(is_injected(&spec.init_containers.as_ref().unwrap()[1]));
}

#[test]
fn seed_s7_hot_upgrade_injects_twins() {
    let ss = sidecarset(
        "hotupgrade-sidecarset",
        json!({
            "selector": {"matchLabels": {"app": "hotupgrade"}},
            "containers": [{"name": "sidecar", "image": "openkruise/hotupgrade-sample:sidecarv1", "imagePullPolicy": "Always",
                "lifecycle": {"postStart": {"exec": {"command": ["/bin/sh", "/migrate.sh"]}}},
                "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "openkruise/hotupgrade-sample:empty"}}]
        }),
    );
    let p = pod(json!({
        "metadata": {"name": "busybox-t7phd", "labels": {"app": "hotupgrade"}},
        "spec": {"containers": [{"name": "busybox", "image": "openkruise/hotupgrade-sample:busybox"}]}
    }));
    let out = run(&p, &[ss]);
    assert_eq!(names(&out.pod), ["sidecar-1", "sidecar-2", "busybox"]);
    let one = container(&out.pod, "sidecar-1");
    let two = container(&out.pod, "sidecar-2");
    assert_eq!(
        one.image.as_deref(),
        Some("openkruise/hotupgrade-sample:sidecarv1")
    );
    assert_eq!(
        two.image.as_deref(),
        Some("openkruise/hotupgrade-sample:empty")
    );
    for (c, n) in [(one, "sidecar-1"), (two, "sidecar-2")] {
        assert!(is_injected(c));
        let v = env(c, "SIDECARSET_VERSION").unwrap();
        assert_eq!(
            v.value_from
                .as_ref()
                .unwrap()
                .field_ref
                .as_ref()
                .unwrap()
                .field_path,
            format!("metadata.annotations['version.sidecarset.kruise.io/{n}']")
        );
        let alt = env(c, "SIDECARSET_VERSION_ALT").unwrap();
        assert_eq!(
            alt.value_from
                .as_ref()
                .unwrap()
                .field_ref
                .as_ref()
                .unwrap()
                .field_path,
            format!("metadata.annotations['versionalt.sidecarset.kruise.io/{n}']")
        );
        assert!(c.lifecycle.is_some(), "identical but for the image");
    }
    let a = out.pod.metadata.annotations.as_ref().unwrap();
    assert_eq!(a["version.sidecarset.kruise.io/sidecar-1"], "1");
    assert_eq!(a["versionalt.sidecarset.kruise.io/sidecar-1"], "0");
    assert_eq!(a["version.sidecarset.kruise.io/sidecar-2"], "0");
    assert_eq!(a["versionalt.sidecarset.kruise.io/sidecar-2"], "1");
    assert_eq!(
        a[keys::SIDECARSET_WORKING_HOTUPGRADE_CONTAINER],
        r#"{"sidecar":"sidecar-1"}"#
    );
}

#[test]
fn patch_pod_metadata_policies() {
    let mut a: BTreeMap<String, String> = [
        ("keep".to_string(), "old".to_string()),
        ("merge".to_string(), r#"{"a":1,"b":2}"#.to_string()),
    ]
    .into();
    let patches: Vec<SidecarSetPatchPodMetadata> = serde_json::from_value(json!([
        {"annotations": {"keep": "new", "added": "x"}},
        {"annotations": {"over": "y"}, "patchPolicy": "Overwrite"},
        {"annotations": {"merge": r#"{"b":null,"c":3}"#, "fresh": r#"{"z":1}"#}, "patchPolicy": "MergePatchJson"}
    ]))
    .unwrap();
    patch_pod_metadata(&mut a, &patches).unwrap();
    assert_eq!(a["keep"], "old");
    assert_eq!(a["added"], "x");
    assert_eq!(a["over"], "y");
    assert_eq!(a["merge"], r#"{"a":1,"c":3}"#);
    assert_eq!(a["fresh"], r#"{"z":1}"#);
    let mut broken: BTreeMap<String, String> =
        [("merge".to_string(), "not json".to_string())].into();
    assert!(patch_pod_metadata(&mut broken, &patches[2..]).is_err());
    assert_eq!(
        broken["merge"], "not json",
        "nothing of a failing entry is applied"
    );
}

#[test]
fn legacy_hash_annotations_are_rewritten_in_struct_form() {
    let mut p = test_pod();
    p.metadata.annotations = Some(
        [(
            keys::SIDECARSET_HASH.to_string(),
            r#"{"old-set":"abc"}"#.to_string(),
        )]
        .into(),
    );
    let out = run(&p, &[test_sidecarset()]);
    let raw = &out.pod.metadata.annotations.as_ref().unwrap()[keys::SIDECARSET_HASH];
    let v: Value = serde_json::from_str(raw).unwrap();
    assert_eq!(v["old-set"]["hash"], "abc");
    assert_eq!(v["old-set"]["sidecarSetName"], "old-set");
    assert!(v["test-sidecarset"].is_object());
}

struct OneRevision(ControllerRevision);
impl Revisions for OneRevision {
    fn named(&self, name: &str) -> Option<ControllerRevision> {
        (self.0.metadata.name.as_deref() == Some(name)).then(|| self.0.clone())
    }
    fn of(&self, _: &str) -> Vec<ControllerRevision> {
        vec![self.0.clone()]
    }
}

#[test]
fn injection_strategy_revision_restores_the_historic_spec() {
    let old = test_sidecarset();
    let mut ss = test_sidecarset();
    ss.spec.containers[0].container.image = Some("busybox:1.35.0".into());
    ss.spec.injection_strategy.revision =
        Some(serde_json::from_value(json!({"customVersion": "v1"})).unwrap());
    let revision: ControllerRevision = serde_json::from_value(json!({
        "metadata": {"name": "test-sidecarset-abc", "labels": {keys::SIDECARSET_NAME_LABEL: "test-sidecarset", keys::SIDECARSET_CUSTOM_VERSION: "v1"},
                     "annotations": old.metadata.annotations.clone().unwrap()},
        "data": crate::revisions::revision_data(&old.spec),
        "revision": 1
    }))
    .unwrap();
    let chosen = choose(
        &test_pod(),
        std::slice::from_ref(&ss),
        &NoNamespaces,
        &OneRevision(revision.clone()),
        &mut || 0.5,
    );
    let out = inject(&test_pod(), &chosen, now());
    assert_eq!(
        container(&out.pod, "sidecar1").image.as_deref(),
        Some("busybox")
    );
    let v: Value = serde_json::from_str(
        &out.pod.metadata.annotations.as_ref().unwrap()[keys::SIDECARSET_HASH],
    )
    .unwrap();
    assert_eq!(
        v["test-sidecarset"]["controllerRevision"],
        "test-sidecarset-abc"
    );
    assert_eq!(
        v["test-sidecarset"]["hash"],
        json!(hash::hashes(&old.spec).hash)
    );

    // Partial with a canary selector: selected Pods draw against the partition percentage.
    ss.spec.injection_strategy.revision =
        Some(serde_json::from_value(json!({"customVersion": "v1", "policy": "Partial"})).unwrap());
    ss.spec.update_strategy.partition = Some(IntOrString::String("30%".into()));
    let image = |ss: &SidecarSet, draw: f64| {
        let chosen = choose(
            &test_pod(),
            std::slice::from_ref(ss),
            &NoNamespaces,
            &OneRevision(revision.clone()),
            &mut || draw,
        );
        container(&inject(&test_pod(), &chosen, now()).pod, "sidecar1")
            .image
            .clone()
            .unwrap()
    };
    assert_eq!(image(&ss, 0.1), "busybox");
    assert_eq!(image(&ss, 0.9), "busybox:1.35.0");
    ss.spec.update_strategy.selector =
        Some(serde_json::from_value(json!({"matchLabels": {"canary": "true"}})).unwrap());
    assert_eq!(
        image(&ss, 0.9),
        "busybox",
        "outside the canary selector: always the pinned revision"
    );
    // An unknown revision falls back to the latest spec.
    ss.spec.injection_strategy.revision =
        Some(serde_json::from_value(json!({"revisionName": "nope"})).unwrap());
    assert_eq!(image(&ss, 0.1), "busybox:1.35.0");
}

#[test]
fn sub_path_vars_are_parsed() {
    assert_eq!(
        sub_path_vars("foo/$(ODD_NAME)/$(POD_NAME)"),
        ["ODD_NAME", "POD_NAME"]
    );
    assert!(sub_path_vars("$(9X) $( ) plain").is_empty());
    assert_eq!(
        parse_field_path("metadata.labels['a.b/c']"),
        Some(("metadata.labels", "a.b/c"))
    );
    assert_eq!(parse_field_path("spec.nodeName"), None);
}

// ---------------------------------------------------------------- properties

fn arb_sidecarset() -> impl Strategy<Value = SidecarSet> {
    (
        "[a-d]",
        prop::collection::vec(("[a-e]", any::<bool>(), any::<bool>(), any::<bool>()), 0..3),
        prop::collection::vec("[u-w]", 0..2),
        prop::collection::btree_set("[v-x]", 0..3),
    )
        .prop_map(|(name, containers, inits, volumes)| {
            let containers: Vec<Value> = containers
                .into_iter()
                .map(|(n, after, hot, share)| {
                    json!({"name": format!("c{n}"), "image": "img:1",
                           "podInjectPolicy": if after {"AfterAppContainer"} else {"BeforeAppContainer"},
                           "shareVolumePolicy": {"type": if share {"enabled"} else {"disabled"}},
                           "upgradeStrategy": if hot {json!({"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty"})} else {json!({})},
                           "volumeMounts": volumes.iter().map(|v| json!({"name": format!("vol-{v}"), "mountPath": format!("/s/{v}")})).collect::<Vec<_>>(),
                           "transferEnv": [{"sourceContainerName": "app0", "envName": "E"}]})
                })
                .collect();
            let inits: Vec<Value> = inits.into_iter().map(|n| json!({"name": format!("init-{n}"), "image": "i"})).collect();
            let vols: Vec<Value> = volumes.iter().map(|v| json!({"name": format!("vol-{v}"), "emptyDir": {}})).collect();
            sidecarset(
                &format!("set-{name}"),
                json!({"selector": {"matchLabels": {"app": "x"}}, "containers": containers, "initContainers": inits, "volumes": vols,
                       "imagePullSecrets": [{"name": format!("secret-{name}")}]}),
            )
        })
}

fn arb_pod() -> impl Strategy<Value = Pod> {
    (
        prop::collection::vec("[a-e]", 1..4),
        prop::collection::btree_set("[w-z]", 0..3),
    )
        .prop_map(|(apps, volumes)| {
            let mut seen = std::collections::BTreeSet::new();
            let containers: Vec<Value> = apps
                .into_iter()
                .filter(|a| seen.insert(a.clone()))
                .enumerate()
                .map(|(i, a)| {
                    json!({"name": if i == 0 { "app0".to_string() } else { format!("c{a}") }, "image": "app",
                           "env": [{"name": "E", "value": "v"}],
                           "volumeMounts": volumes.iter().map(|v| json!({"name": format!("vol-{v}"), "mountPath": format!("/p/{v}")})).collect::<Vec<_>>()})
                })
                .collect();
            let mut vseen = std::collections::BTreeSet::new();
            let vols: Vec<Value> = volumes
                .iter()
                .filter(|v| vseen.insert((*v).clone()))
                .map(|v| json!({"name": format!("vol-{v}"), "hostPath": {"path": "/h"}}))
                .collect();
            pod(json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "x"}},
                       "spec": {"containers": containers, "volumes": vols}}))
        })
}

/// SidecarSet names are unique in a cluster.
fn distinct(sets: Vec<SidecarSet>) -> Vec<SidecarSet> {
    let mut seen = std::collections::BTreeSet::new();
    sets.into_iter()
        .filter(|s| seen.insert(s.metadata.name.clone()))
        .collect()
}

fn unique<'a>(names: impl Iterator<Item = &'a str>) -> bool {
    let mut seen = std::collections::BTreeSet::new();
    names.into_iter().all(|n| seen.insert(n))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn injection_is_idempotent(p in arb_pod(), sets in prop::collection::vec(arb_sidecarset(), 0..4).prop_map(distinct)) {
        let once = run(&p, &sets).pod;
        let twice = run(&once, &sets).pod;
        prop_assert_eq!(once, twice);
    }

    #[test]
    fn injection_does_not_depend_on_input_order(p in arb_pod(), sets in prop::collection::vec(arb_sidecarset(), 0..4).prop_map(distinct)) {
        let forward = run(&p, &sets);
        let mut reversed = sets.clone();
        reversed.reverse();
        prop_assert_eq!(forward, run(&p, &reversed));
    }

    #[test]
    fn injection_never_duplicates_and_keeps_the_app(p in arb_pod(), sets in prop::collection::vec(arb_sidecarset(), 0..4).prop_map(distinct)) {
        let out = run(&p, &sets).pod;
        let spec = out.spec.as_ref().unwrap();
        prop_assert!(unique(spec.containers.iter().map(|c| c.name.as_str())));
        prop_assert!(unique(spec.init_containers.iter().flatten().map(|c| c.name.as_str())));
        prop_assert!(unique(spec.volumes.iter().flatten().map(|v| v.name.as_str())));
        prop_assert!(unique(spec.image_pull_secrets.iter().flatten().map(|s| s.name.as_str())));
        for c in &spec.containers {
            prop_assert!(unique(c.volume_mounts.iter().flatten().map(|m| m.mount_path.as_str())), "mount paths of {}", c.name);
            prop_assert!(unique(c.env.iter().flatten().map(|e| e.name.as_str())), "env of {}", c.name);
        }
        // Every mount of every container has a volume.
        let volumes: std::collections::BTreeSet<&str> = spec.volumes.iter().flatten().map(|v| v.name.as_str()).collect();
        for c in spec.containers.iter().chain(spec.init_containers.iter().flatten()) {
            for m in c.volume_mounts.iter().flatten() {
                prop_assert!(volumes.contains(m.name.as_str()), "{} mounts missing volume {}", c.name, m.name);
            }
        }
        // App containers keep their relative order (and stay themselves unless a sidecar
        // of the same name replaced them).
        let before: Vec<&str> = p.spec.as_ref().unwrap().containers.iter().map(|c| c.name.as_str()).collect();
        let after: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).filter(|n| before.contains(n)).collect();
        prop_assert_eq!(before, after);
    }
}

#[test]
fn resources_policy_sizes_the_sidecar_from_matching_app_containers() {
    let sized = sidecarset(
        "sized",
        json!({"selector": {"matchLabels": {"app": "a"}},
               "containers": [{"name": "proxy", "image": "envoy",
                               "resourcesPolicy": {"targetContainerMode": "sum", "targetContainersNameRegex": "^engine-.*$",
                                                   "resourceExpr": {"limits": {"cpu": "max(cpu*50%, 50m)", "memory": "200Mi"},
                                                                    "requests": {"cpu": "cpu*50%"}}}}]}),
    );
    let other = sidecarset(
        "other",
        json!({"selector": {"matchLabels": {"app": "a"}},
               "containers": [{"name": "engine-log", "image": "fluentd",
                               "resources": {"limits": {"cpu": "8"}}}]}),
    );
    let p = pod(
        json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a"}},
        "spec": {"containers": [
            {"name": "engine-a", "image": "x", "resources": {"limits": {"cpu": "200m", "memory": "1Gi"}, "requests": {"cpu": "100m"}}},
            {"name": "engine-b", "image": "x", "resources": {"limits": {"cpu": "400m", "memory": "1Gi"}, "requests": {"cpu": "50m"}}},
            {"name": "web", "image": "x", "resources": {"limits": {"cpu": "4"}}}]}}),
    );
    let out = run(&p, &[sized, other]);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let r = container(&out.pod, "proxy").resources.clone().unwrap();
    let q = |m: &Option<BTreeMap<String, Quantity>>, k: &str| m.as_ref().unwrap()[k].0.clone();
    assert_eq!(
        q(&r.limits, "cpu"),
        "300m",
        "(200m + 400m) * 50%: web and the other sidecar do not count"
    );
    assert_eq!(q(&r.limits, "memory"), "200Mi");
    assert_eq!(q(&r.requests, "cpu"), "75m");
    assert_eq!(
        container(&out.pod, "engine-log")
            .resources
            .as_ref()
            .unwrap()
            .limits
            .as_ref()
            .unwrap()["cpu"]
            .0,
        "8",
        "a sidecar without a policy keeps its resources"
    );
}

#[test]
fn a_resources_policy_that_matches_nothing_denies_the_pod() {
    let sized = sidecarset(
        "sized",
        json!({"selector": {"matchLabels": {"app": "a"}},
               "containers": [{"name": "proxy", "image": "envoy",
                               "resourcesPolicy": {"targetContainerMode": "max", "targetContainersNameRegex": "^nothing$",
                                                   "resourceExpr": {"limits": {"cpu": "cpu"}}}}]}),
    );
    let p = pod(
        json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a"}},
        "spec": {"containers": [{"name": "web", "image": "x"}]}}),
    );
    let out = run(&p, &[sized]);
    assert_eq!(
        out.errors,
        [
            "SidecarSet sized: container proxy: resourcesPolicy: no containers match the regex pattern \"^nothing$\""
        ]
    );
}

#[test]
fn a_canary_sidecarset_replaces_its_base_in_the_pods_both_select() {
    let spec = |image: &str, app: &str| {
        json!({"selector": {"matchLabels": {"app": app}},
               "updateStrategy": {"type": "NotUpdate"},
               "containers": [{"name": "nginx-sidecar", "image": image}]})
    };
    let stable = sidecarset("stable", spec("nginx:1.20.1", "web"));
    let mut canary = sidecarset("canary", spec("nginx:1.21.1", "web"));
    canary.metadata.annotations.as_mut().unwrap().extend([
        (keys::SIDECARSET_CANARY.to_string(), "true".to_string()),
        (keys::SIDECARSET_BASE.to_string(), "stable".to_string()),
    ]);
    let web = pod(
        json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "main", "image": "busybox"}]}}),
    );
    let injected = run(&web, &[stable.clone(), canary.clone()]).pod;
    assert_eq!(
        container(&injected, "nginx-sidecar").image.as_deref(),
        Some("nginx:1.21.1")
    );
    assert_eq!(
        injected.metadata.annotations.as_ref().unwrap()[keys::SIDECARSET_INJECTED_LIST],
        "canary"
    );
    // A canary that does not select the Pod leaves the base in place.
    let mut elsewhere = canary;
    elsewhere.spec.selector =
        Some(serde_json::from_value(json!({"matchLabels": {"app": "other"}})).unwrap());
    let injected = run(&web, &[stable, elsewhere]).pod;
    assert_eq!(
        container(&injected, "nginx-sidecar").image.as_deref(),
        Some("nginx:1.20.1")
    );
}
