use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::json;

use super::fixtures::*;
use super::*;

fn world<'a>(ss: &'a SidecarSet, hashes: &'a Hashes, pods: &'a [Pod]) -> World<'a> {
    World {
        ss,
        hashes,
        latest_revision: "test-sidecarset-rev2",
        collision_count: 0,
        pods: pods.iter().collect(),
        now: now(),
    }
}

/// `updated_ready`, `updated_not_ready`, `old_ready`, `old_not_ready` Pods against a
/// SidecarSet moved from busybox to busybox:1.35.0 with `strategy`.
fn population(strategy: Value, counts: [usize; 4]) -> (SidecarSet, Vec<Pod>) {
    let old = sidecarset("busybox", json!({}));
    let new = sidecarset("busybox:1.35.0", strategy);
    let mut pods = Vec::new();
    let mut n = 0;
    for (i, count) in counts.into_iter().enumerate() {
        for _ in 0..count {
            let from = if i < 2 { &new } else { &old };
            pods.push(pod(&format!("pod-{n:04}"), from, i % 2 == 0));
            n += 1;
        }
    }
    (new, pods)
}

fn upgraded(ss: &SidecarSet, pods: &[Pod]) -> usize {
    let h = hashes(ss);
    let p = plan(&world(ss, &h, pods));
    assert!(p.writes.iter().all(|w| w.kind == WriteKind::Upgrade));
    p.writes.len()
}

#[test]
fn spec_arithmetic_cases() {
    let (ss, pods) = population(json!({"maxUnavailable": 10}), [26, 4, 70, 0]);
    assert_eq!(
        upgraded(&ss, &pods),
        6,
        "100 pods, 30 updated / 26 ready, maxUnavailable 10"
    );
    let (ss, pods) = population(
        json!({"partition": 180, "maxUnavailable": 100}),
        [760, 40, 200, 0],
    );
    assert_eq!(
        upgraded(&ss, &pods),
        20,
        "1000 pods, 800 updated / 760 ready, partition 180"
    );
    let (ss, pods) = population(json!({"maxUnavailable": "5%"}), [0, 0, 5, 0]);
    assert_eq!(upgraded(&ss, &pods), 1, "5%% of 5 rounds up to 1");
    let (ss, pods) = population(
        json!({"partition": "99%", "maxUnavailable": 5}),
        [0, 0, 5, 0],
    );
    assert_eq!(upgraded(&ss, &pods), 1);
    let (ss, pods) = population(
        json!({"partition": "1%", "maxUnavailable": 5}),
        [0, 0, 5, 0],
    );
    assert_eq!(upgraded(&ss, &pods), 4);
}

#[test]
fn seed_s4_partition_and_max_unavailable() {
    // 100 matched, partition 50, maxUnavailable 10: ten at a time, fifty in all.
    let (ss, mut pods) = population(
        json!({"partition": 50, "maxUnavailable": 10}),
        [0, 0, 100, 0],
    );
    let h = hashes(&ss);
    let mut rounds = 0;
    loop {
        let p = plan(&world(&ss, &h, &pods));
        if p.writes.is_empty() {
            break;
        }
        assert!(p.writes.len() <= 10, "round {rounds}: {}", p.writes.len());
        let writes: Vec<(String, BTreeMap<String, String>, Value)> = p
            .writes
            .iter()
            .map(|w| {
                (
                    w.pod.metadata.name.clone().unwrap(),
                    w.images.clone(),
                    w.pod_patch.clone(),
                )
            })
            .collect();
        for (name, images, patch) in writes {
            let i = pods
                .iter()
                .position(|p| p.metadata.name.as_deref() == Some(&name))
                .unwrap();
            // The updated Pod is not ready yet: the budget is used up until it is.
            let mut next = apply_and_restart(&pods[i], &images, &patch);
            run(&mut next, false);
            pods[i] = next;
        }
        assert!(
            plan(&world(&ss, &h, &pods)).writes.is_empty(),
            "nothing while 10 are unavailable"
        );
        // One becomes ready: exactly one more may start.
        let first_unready = pods
            .iter()
            .position(|p| super::pods::is_updated(&ss, &h, p) && !super::pods::is_ready(&ss, p))
            .unwrap();
        run(&mut pods[first_unready], true);
        let next_round = plan(&world(&ss, &h, &pods)).writes.len();
        assert!(next_round <= 1, "a new Pod starts only as one finishes");
        for p in pods.iter_mut() {
            if super::pods::is_updated(&ss, &h, p) {
                run(p, true);
            }
        }
        rounds += 1;
        assert!(rounds < 20);
    }
    let updated = pods
        .iter()
        .filter(|p| super::pods::is_updated(&ss, &h, p))
        .count();
    assert_eq!(updated, 50);
    let status = status(&world(&ss, &h, &pods));
    assert_eq!(
        (status.matched_pods, status.updated_pods, status.ready_pods),
        (100, 50, 100)
    );

    // partition 80, maxUnavailable 30: twenty at once.
    let (ss, pods) = population(
        json!({"partition": 80, "maxUnavailable": 30}),
        [0, 0, 100, 0],
    );
    assert_eq!(upgraded(&ss, &pods), 20);
}

#[test]
fn not_ready_candidates_do_not_use_the_budget() {
    let (ss, pods) = population(json!({"maxUnavailable": 1}), [0, 0, 2, 3]);
    assert_eq!(upgraded(&ss, &pods), 4, "three not ready + one ready");
}

#[test]
fn canary_selector_upgrades_only_selected_pods() {
    let (ss, mut pods) = population(
        json!({"maxUnavailable": 100, "selector": {"matchLabels": {"canary.release": "true"}}}),
        [0, 0, 1000, 0],
    );
    for p in pods.iter_mut().step_by(33).take(30) {
        p.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("canary.release".into(), "true".into());
    }
    let h = hashes(&ss);
    let plan = plan(&world(&ss, &h, &pods));
    assert_eq!(plan.writes.len(), 30);
    assert!(
        plan.writes
            .iter()
            .all(|w| matching::labels(w.pod).contains_key("canary.release"))
    );
}

#[test]
fn paused_and_not_update_change_nothing_but_status() {
    for strategy in [
        json!({"paused": true, "maxUnavailable": "20%", "partition": 10}),
        json!({"type": "NotUpdate"}),
    ] {
        let (ss, pods) = population(strategy, [1, 0, 3, 0]);
        let h = hashes(&ss);
        let p = plan(&world(&ss, &h, &pods));
        assert!(p.writes.is_empty());
        assert_eq!(
            (
                p.status.matched_pods,
                p.status.updated_pods,
                p.status.ready_pods
            ),
            (4, 1, 4)
        );
    }
}

#[test]
fn seed_s2_upgrade_changes_only_the_sidecar_image_and_records_the_old_image_id() {
    let (ss, pods) = population(json!({"maxUnavailable": 1}), [0, 0, 1, 0]);
    let h = hashes(&ss);
    let p = plan(&world(&ss, &h, &pods));
    assert_eq!(p.writes.len(), 1);
    let w = &p.writes[0];
    assert_eq!(
        w.images,
        BTreeMap::from([("sidecar1".to_string(), "busybox:1.35.0".to_string())])
    );
    assert_eq!(w.pod_patch["metadata"]["resourceVersion"], "1");
    assert_eq!(
        w.pod_patch["spec"]["containers"],
        json!([{"name": "sidecar1", "image": "busybox:1.35.0"}])
    );
    let annotations = &w.pod_patch["metadata"]["annotations"];
    let state: Value = serde_json::from_str(
        annotations[keys::SIDECARSET_INPLACE_UPDATE_STATE]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(state["test-sidecarset"]["revision"], json!(h.hash));
    assert_eq!(
        state["test-sidecarset"]["lastContainerStatuses"]["sidecar1"]["imageID"],
        "busybox@sha256:busybox"
    );
    let hashes: Value =
        serde_json::from_str(annotations[keys::SIDECARSET_HASH].as_str().unwrap()).unwrap();
    assert_eq!(hashes["test-sidecarset"]["hash"], json!(h.hash));
    assert_eq!(
        hashes["test-sidecarset"]["controllerRevision"],
        "test-sidecarset-rev2"
    );
    let cond = &w.status_patch.as_ref().unwrap()["status"]["conditions"][0];
    assert_eq!(cond["type"], "SidecarSetUpgradable");
    assert_eq!(cond["status"], "True");
    assert_eq!(cond["reason"], "AllSidecarsetUpgradable");
    assert_eq!(cond["message"], r#"{"test-sidecarset":true}"#);

    // Applied but not yet restarted by the kubelet: updated, not consistent, not ready;
    // once restarted, consistent and ready.
    let applied = apply(&pods[0], &w.images, &w.pod_patch);
    let world_after = [applied.clone()];
    assert!(!super::pods::is_consistent(&ss, &applied, None));
    let s = status(&world(&ss, &h, &world_after));
    assert_eq!(
        (s.updated_pods, s.ready_pods, s.updated_ready_pods),
        (1, 0, 0)
    );
    let restarted = [apply_and_restart(&pods[0], &w.images, &w.pod_patch)];
    let s = status(&world(&ss, &h, &restarted));
    assert_eq!(
        (s.updated_pods, s.ready_pods, s.updated_ready_pods),
        (1, 1, 1)
    );
}

#[test]
fn a_non_image_change_marks_pods_not_upgradable() {
    let old = sidecarset("busybox", json!({}));
    let mut new = sidecarset("busybox", json!({}));
    new.spec.containers[0].container.env = Some(vec![k8s_openapi::api::core::v1::EnvVar {
        name: "X".into(),
        value: Some("1".into()),
        value_from: None,
    }]);
    let h = crate::hash::hashes(&new.spec);
    let pods = vec![pod("a", &old, true)];
    let p = plan(&world(&new, &h, &pods));
    assert!(p.writes.is_empty());
    assert_eq!(p.not_upgradable.len(), 1);
    let cond = &p.not_upgradable[0].1["status"]["conditions"][0];
    assert_eq!(cond["status"], "False");
    assert_eq!(cond["reason"], "UpdateImmutableField");
    assert_eq!(cond["message"], r#"{"test-sidecarset":false}"#);
    // Already marked: no second write.
    let mut marked = pods[0].clone();
    let c: k8s_openapi::api::core::v1::PodCondition = serde_json::from_value(cond.clone()).unwrap();
    marked
        .status
        .as_mut()
        .unwrap()
        .conditions
        .as_mut()
        .unwrap()
        .push(c);
    let again = [marked];
    assert!(plan(&world(&new, &h, &again)).not_upgradable.is_empty());
}

#[test]
fn mid_upgrade_pods_are_skipped() {
    let (ss, pods) = population(json!({"maxUnavailable": 5}), [0, 0, 1, 0]);
    let h = hashes(&ss);
    let w = plan(&world(&ss, &h, &pods)).writes.remove(0);
    // The write landed but the hash entry is rolled back (say, a newer SidecarSet): the
    // sidecar is ready with the old imageID while the spec names another image.
    let mut p = apply(&pods[0], &w.images, &w.pod_patch);
    let mut a = p.metadata.annotations.clone().unwrap();
    a.insert(
        keys::SIDECARSET_HASH.into(),
        pods[0].metadata.annotations.as_ref().unwrap()[keys::SIDECARSET_HASH].clone(),
    );
    p.metadata.annotations = Some(a);
    assert!(super::pods::is_mid_upgrade(&ss, &p));
    let only = [p];
    assert!(plan(&world(&ss, &h, &only)).writes.is_empty());
}

#[test]
fn hot_upgrade_alternates_twins_and_resets_the_old_one() {
    let v1 = hot_sidecarset("sidecar:v1");
    let mut p = pod("hot-pod", &v1, true);
    assert!(super::pods::is_ready(&v1, &p));
    assert_eq!(
        status(&world(&v1, &hashes(&v1), std::slice::from_ref(&p))).ready_pods,
        1
    );

    let mut working = "sidecar-1";
    for (round, version) in ["sidecar:v2", "sidecar:v3"].into_iter().enumerate() {
        let mut ss = hot_sidecarset(version);
        ss.metadata.resource_version = Some(format!("{}", 1000 + round));
        let h = hashes(&ss);
        let pods = [p.clone()];
        let plan1 = plan(&world(&ss, &h, &pods));
        assert_eq!(plan1.writes.len(), 1);
        let w = &plan1.writes[0];
        let target = if working == "sidecar-1" {
            "sidecar-2"
        } else {
            "sidecar-1"
        };
        assert_eq!(
            w.images,
            BTreeMap::from([(target.to_string(), version.to_string())])
        );
        let a = &w.pod_patch["metadata"]["annotations"];
        assert_eq!(
            a[keys::SIDECARSET_WORKING_HOTUPGRADE_CONTAINER],
            json!(format!(r#"{{"sidecar":"{target}"}}"#))
        );
        let rv = ss.metadata.resource_version.clone().unwrap();
        assert_eq!(
            a[format!("version.sidecarset.kruise.io/{target}")],
            json!(rv)
        );
        assert_eq!(
            a[format!("versionalt.sidecarset.kruise.io/{working}")],
            json!(rv)
        );
        // The new twin runs (postStart done): the old one is reset to the empty image.
        p = apply_and_restart(&p, &w.images, &w.pod_patch);
        let pods = [p.clone()];
        let s = status(&world(&ss, &h, &pods));
        assert_eq!(
            (s.updated_pods, s.ready_pods),
            (1, 0),
            "not ready while the old twin runs"
        );
        let plan2 = plan(&world(&ss, &h, &pods));
        assert_eq!(plan2.writes.len(), 1);
        let r = &plan2.writes[0];
        assert_eq!(r.kind, WriteKind::Reset);
        assert_eq!(
            r.images,
            BTreeMap::from([(working.to_string(), "empty:1".to_string())])
        );
        let a = &r.pod_patch["metadata"]["annotations"];
        assert_eq!(a[format!("version.sidecarset.kruise.io/{working}")], "0");
        assert_eq!(a[format!("versionalt.sidecarset.kruise.io/{target}")], "0");
        p = apply_and_restart(&p, &r.images, &r.pod_patch);
        let pods = [p.clone()];
        let s = status(&world(&ss, &h, &pods));
        assert_eq!(
            (s.updated_pods, s.ready_pods, s.updated_ready_pods),
            (1, 1, 1)
        );
        assert!(plan(&world(&ss, &h, &pods)).writes.is_empty());
        working = target;
    }
    assert_eq!(
        working, "sidecar-1",
        "two upgrades bring the work back to -1"
    );
}

#[test]
fn hot_upgrade_waits_for_the_new_twin() {
    let v1 = hot_sidecarset("sidecar:v1");
    let ss = hot_sidecarset("sidecar:v2");
    let h = hashes(&ss);
    let p = pod("hot-pod", &v1, true);
    let w = plan(&world(&ss, &h, std::slice::from_ref(&p)))
        .writes
        .remove(0);
    // Written, but the kubelet has not restarted the twin yet (status still shows empty).
    let pending = [apply(&p, &w.images, &w.pod_patch)];
    let plan = plan(&world(&ss, &h, &pending));
    assert!(
        plan.writes.is_empty(),
        "no reset before the new twin runs: {:?}",
        plan.writes
    );
}

#[test]
fn a_hot_upgrade_whose_new_twin_fails_does_not_hold_the_next_image() {
    // v2 never runs on the new twin (its image does not pull): no reset, and v3 goes to
    // that same twin (the old one is ready and consistent), as upstream does.
    let v1 = hot_sidecarset("sidecar:v1");
    let v2 = hot_sidecarset("sidecar:v2");
    let h2 = hashes(&v2);
    let p = pod("hot-pod", &v1, true);
    let w = plan(&world(&v2, &h2, std::slice::from_ref(&p)))
        .writes
        .remove(0);
    assert_eq!(
        w.images,
        BTreeMap::from([("sidecar-2".to_string(), "sidecar:v2".to_string())])
    );
    let mut failed = apply(&p, &w.images, &w.pod_patch);
    let status = failed.status.as_mut().unwrap();
    for c in status.container_statuses.as_mut().unwrap() {
        if c.name == "sidecar-2" {
            c.ready = false;
        }
    }
    status.conditions.as_mut().unwrap()[0].status = "False".into();
    let stuck = [failed];
    assert!(plan(&world(&v2, &h2, &stuck)).writes.is_empty());

    let v3 = hot_sidecarset("sidecar:v3");
    let h3 = hashes(&v3);
    let next = plan(&world(&v3, &h3, &stuck));
    assert_eq!(next.writes.len(), 1, "{:?}", next.note);
    assert_eq!(next.writes[0].kind, WriteKind::Upgrade);
    assert_eq!(
        next.writes[0].images,
        BTreeMap::from([("sidecar-2".to_string(), "sidecar:v3".to_string())])
    );
}

#[test]
fn scatter_star_expands_to_present_values() {
    let (_, mut pods) = population(json!({}), [0, 0, 3, 0]);
    for (p, zone) in pods.iter_mut().zip(["a", "b", "a"]) {
        p.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("zone".into(), zone.into());
    }
    let refs: Vec<&Pod> = pods.iter().collect();
    let terms = expand_scatter(
        &[UpdateScatterTerm {
            key: "zone".into(),
            value: "*".into(),
        }],
        &refs,
    );
    let values: Vec<&str> = terms.iter().map(|t| t.value.as_str()).collect();
    assert_eq!(values, ["a", "b"]);
}

#[test]
fn legacy_hash_annotations_are_rewritten_on_upgrade() {
    let (ss, mut pods) = population(json!({}), [0, 0, 1, 0]);
    let h = hashes(&ss);
    let old = crate::hash::hashes(&sidecarset("busybox", json!({})).spec);
    let a = pods[0].metadata.annotations.as_mut().unwrap();
    a.insert(
        keys::SIDECARSET_HASH.into(),
        format!(r#"{{"test-sidecarset":"{}"}}"#, old.hash),
    );
    a.insert(
        keys::SIDECARSET_HASH_WITHOUT_IMAGE.into(),
        format!(r#"{{"test-sidecarset":"{}"}}"#, old.without_image),
    );
    let w = plan(&world(&ss, &h, &pods)).writes.remove(0);
    let without: Value = serde_json::from_str(
        w.pod_patch["metadata"]["annotations"][keys::SIDECARSET_HASH_WITHOUT_IMAGE]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(without["test-sidecarset"]["hash"], json!(old.without_image));
    assert_eq!(
        without["test-sidecarset"]["sidecarSetName"],
        "test-sidecarset"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Partition and maxUnavailable bound every round.
    #[test]
    fn budget_bounds_hold(
        counts in [0usize..6, 0usize..6, 0usize..12, 0usize..6],
        partition in 0i32..12,
        max_unavailable in 0i32..6,
    ) {
        let (ss, pods) = population(json!({"partition": partition, "maxUnavailable": max_unavailable}), counts);
        let h = hashes(&ss);
        let w = world(&ss, &h, &pods);
        let p = plan(&w);
        let candidates = counts[2] + counts[3];
        let keep = (candidates as i32 - partition.min(pods.len() as i32)).max(0) as usize;
        prop_assert!(p.writes.len() <= keep);
        let unavailable_before = counts[1] as i32;
        let ready_taken = p.writes.iter().filter(|w| super::pods::is_ready(&ss, w.pod)).count() as i32;
        prop_assert!(ready_taken <= (max_unavailable - unavailable_before).max(0));
        // Every not-ready candidate inside the kept prefix is taken.
        let not_ready_taken = p.writes.len() as i32 - ready_taken;
        prop_assert!(not_ready_taken <= counts[3] as i32);
        if keep > 0 && max_unavailable > unavailable_before {
            prop_assert!(!p.writes.is_empty());
        }
    }
}
