//! CloneSet on the real cluster: the seeds' scenarios and the spec's subtle cases.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_api::keys;
use kruise_e2e::{RunningController, TestNamespace, kubectl, wait_for};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);

async fn controller(ns: &TestNamespace) -> RunningController {
    controller_with_gates(ns, "").await
}

async fn controller_with_gates(ns: &TestNamespace, gates: &str) -> RunningController {
    RunningController::start(
        cloneset_ctl::CONTROLLER_NAME,
        &ns.name,
        gates,
        cloneset_ctl::run,
    )
    .await
}

fn cloneset_yaml(name: &str, replicas: i32, extra_spec: &str) -> String {
    format!(
        r#"
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
      - name: nginx
        image: nginx:alpine
        imagePullPolicy: IfNotPresent
{extra_spec}
"#
    )
}

/// Active Pods of a CloneSet (by label), sorted by name.
async fn pods_of(ns: &TestNamespace, app: &str) -> Vec<Pod> {
    let pods: Api<Pod> = ns.api();
    let mut list: Vec<Pod> = pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    list.sort_by_key(|p| p.name_any());
    list
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn image(p: &Pod) -> String {
    p.spec.as_ref().unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default()
}

fn label(p: &Pod, key: &str) -> String {
    p.labels().get(key).cloned().unwrap_or_default()
}

async fn wait_ready_pods(ns: &TestNamespace, app: &str, n: usize) -> Vec<Pod> {
    wait_for(&format!("{n} ready pods of {app}"), MINUTE, || async {
        let pods = pods_of(ns, app).await;
        let ready = pods.iter().filter(|p| is_ready(p)).count();
        if pods.len() == n && ready == n {
            Ok(pods)
        } else {
            Err(format!("{} pods, {ready} ready", pods.len()))
        }
    })
    .await
}

async fn cloneset(ns: &TestNamespace, name: &str) -> CloneSet {
    ns.api::<CloneSet>().get(name).await.expect("get cloneset")
}

/// Waits until the controller has observed the latest spec and `check` holds.
async fn wait_status(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    check: impl Fn(&CloneSet) -> bool,
) -> CloneSet {
    wait_for(what, MINUTE, || async {
        let cs = cloneset(ns, name).await;
        let observed = cs.status.as_ref().map(|s| s.observed_generation) == cs.metadata.generation;
        if observed && check(&cs) {
            Ok(cs)
        } else {
            Err(format!(
                "generation {:?}, status {:?}",
                cs.metadata.generation, cs.status
            ))
        }
    })
    .await
}

async fn patch_cs(ns: &TestNamespace, name: &str, patch: serde_json::Value) {
    ns.api::<CloneSet>()
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch cloneset");
}

/// Events about `name`, as (type, reason, note, reporting controller).
async fn events_of(ns: &TestNamespace, name: &str) -> Vec<(String, String, String, String)> {
    let events: Api<Event> = ns.api();
    events
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
                e.reporting_controller.unwrap_or_default(),
            )
        })
        .collect()
}

async fn wait_event(ns: &TestNamespace, name: &str, reason: &str, note: &str) {
    wait_for(&format!("event {reason} \"{note}\""), MINUTE, || async {
        let events = events_of(ns, name).await;
        if events.iter().any(|(_, r, n, _)| r == reason && n == note) {
            Ok(())
        } else {
            Err(format!("{events:?}"))
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_create_three_pods_directly() {
    let ns = TestNamespace::new("cs-create").await;
    let _ctl = controller(&ns).await;
    ns.apply(&cloneset_yaml("cs-demo", 3, "")).await.unwrap();
    let pods = wait_ready_pods(&ns, "cs-demo", 3).await;
    let cs = cloneset(&ns, "cs-demo").await;
    for pod in &pods {
        let name = pod.name_any();
        let id = label(pod, keys::CLONESET_INSTANCE_ID);
        assert_eq!(
            name,
            format!("cs-demo-{id}"),
            "named <cloneset>-<instance-id>"
        );
        assert_eq!(id.len(), 5);
        let owner = &pod.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("CloneSet", cs.uid().unwrap().as_str(), Some(true))
        );
        assert!(label(pod, keys::CONTROLLER_REVISION_HASH).starts_with("cs-demo-"));
        assert_eq!(label(pod, keys::LIFECYCLE_STATE), "Normal");
    }
    let cs = wait_status(&ns, "cs-demo", "status 3/3", |cs| {
        cs.status
            .as_ref()
            .is_some_and(|s| s.ready_replicas == 3 && s.updated_ready_replicas == 3)
    })
    .await;
    let s = cs.status.unwrap();
    assert_eq!(
        (s.replicas, s.updated_replicas, s.available_replicas),
        (3, 3, 3)
    );
    assert_eq!(s.label_selector, "app=cs-demo");
    assert_eq!(s.current_revision, s.update_revision);
    for pod in &pods {
        wait_event(
            &ns,
            "cs-demo",
            "SuccessfulCreate",
            &format!("succeed to create pod {}", pod.name_any()),
        )
        .await;
    }
    let events = events_of(&ns, "cs-demo").await;
    assert!(
        events.iter().all(|e| e.3 == "cloneset-controller"),
        "{events:?}"
    );
    // kubectl shows the upstream columns.
    let (ok, out, err) = kubectl(&["get", "cloneset", "cs-demo", "-n", &ns.name], None);
    assert!(ok, "{err}");
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "DESIRED",
            "UPDATED",
            "UPDATED_READY",
            "READY",
            "TOTAL",
            "AGE"
        ]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..6], ["cs-demo", "3", "3", "3", "3", "3"]);
    // No ReplicaSet: the Pods are the CloneSet's own.
    let (_, rs, _) = kubectl(&["get", "replicasets", "-n", &ns.name, "-o", "name"], None);
    assert!(rs.trim().is_empty(), "{rs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_rate_limited_scale_out() {
    let ns = TestNamespace::new("cs-ratelimit").await;
    let _ctl = controller(&ns).await;
    ns.apply(&cloneset_yaml("cs-demo", 3, "")).await.unwrap();
    let before: BTreeSet<String> = wait_ready_pods(&ns, "cs-demo", 3)
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    patch_cs(&ns, "cs-demo", json!({"spec": {"replicas": 5, "minReadySeconds": 4, "scaleStrategy": {"maxUnavailable": 1}}})).await;
    wait_event(
        &ns,
        "cs-demo",
        "ScaleUpLimited",
        "scaleUp is limited because of scaleStrategy.maxUnavailable, limit: 1",
    )
    .await;
    // One Pod first...
    let first = wait_for("the first new pod", MINUTE, || async {
        let pods = pods_of(&ns, "cs-demo").await;
        if pods.len() == 4 {
            Ok(pods)
        } else {
            Err(format!("{} pods", pods.len()))
        }
    })
    .await;
    let first_new = first
        .iter()
        .find(|p| !before.contains(&p.name_any()))
        .unwrap()
        .clone();
    wait_event(
        &ns,
        "cs-demo",
        "ScaleUpLimited",
        "scaleUp is limited because of scaleStrategy.maxUnavailable, limit: 0",
    )
    .await;
    // ...then the second, only after the first has been ready for minReadySeconds.
    let all = wait_ready_pods(&ns, "cs-demo", 5).await;
    let second_new = all
        .iter()
        .find(|p| !before.contains(&p.name_any()) && p.name_any() != first_new.name_any())
        .unwrap();
    let gap = second_new
        .creation_timestamp()
        .unwrap()
        .0
        .duration_since(first_new.creation_timestamp().unwrap().0);
    assert!(
        gap.as_secs() >= 4,
        "second pod created {gap:?} after the first; minReadySeconds is 4"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_pods_to_delete_with_scale_in_and_alone() {
    let ns = TestNamespace::new("cs-podstodelete").await;
    let _ctl = controller(&ns).await;
    ns.apply(&cloneset_yaml("cs-demo", 5, "")).await.unwrap();
    let pods = wait_ready_pods(&ns, "cs-demo", 5).await;
    let victim = pods[2].name_any();
    patch_cs(
        &ns,
        "cs-demo",
        json!({"spec": {"replicas": 4, "scaleStrategy": {"podsToDelete": [victim]}}}),
    )
    .await;
    let left = wait_for("exactly the named pod deleted", MINUTE, || async {
        let names: BTreeSet<String> = pods_of(&ns, "cs-demo")
            .await
            .iter()
            .map(|p| p.name_any())
            .collect();
        if names.len() == 4 && !names.contains(&victim) {
            Ok(names)
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await;
    let expected: BTreeSet<String> = pods
        .iter()
        .map(|p| p.name_any())
        .filter(|n| *n != victim)
        .collect();
    assert_eq!(left, expected, "the other four stay");
    wait_event(
        &ns,
        "cs-demo",
        "SuccessfulDelete",
        &format!("succeed to delete pod {victim}"),
    )
    .await;
    wait_status(&ns, "cs-demo", "podsToDelete pruned", |cs| {
        cs.spec.scale_strategy.pods_to_delete.is_empty()
    })
    .await;

    // The label alone: delete and replace.
    let target = pods_of(&ns, "cs-demo").await[0].name_any();
    ns.api::<Pod>()
        .patch(
            &target,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {keys::SPECIFIED_DELETE: "true"}}})),
        )
        .await
        .unwrap();
    wait_for("the labelled pod replaced", MINUTE, || async {
        let pods = pods_of(&ns, "cs-demo").await;
        let names: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
        let ready = pods.iter().filter(|p| is_ready(p)).count();
        if !names.contains(&target) && pods.len() == 4 && ready == 4 {
            Ok(())
        } else {
            Err(format!("{names:?}, {ready} ready"))
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_in_place_update_keeps_names_and_uids() {
    let ns = TestNamespace::new("cs-inplace").await;
    let _ctl = controller(&ns).await;
    ns.apply_yaml(&cloneset_yaml(
        "cs-demo",
        4,
        "  updateStrategy:\n    type: InPlaceIfPossible",
    ))
    .unwrap();
    let before = wait_ready_pods(&ns, "cs-demo", 4).await;
    let old_revision = label(&before[0], keys::CONTROLLER_REVISION_HASH);
    patch_cs(&ns, "cs-demo", json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9", "imagePullPolicy": "IfNotPresent"}]}}}})).await;
    let cs = wait_status(&ns, "cs-demo", "all 4 updated and ready", |cs| {
        cs.status.as_ref().is_some_and(|s| {
            s.update_revision != old_revision
                && s.updated_ready_replicas == 4
                && s.ready_replicas == 4
                && s.current_revision == s.update_revision
        })
    })
    .await;
    let after = pods_of(&ns, "cs-demo").await;
    let uids = |pods: &[Pod]| -> BTreeSet<(String, String)> {
        pods.iter()
            .map(|p| (p.name_any(), p.uid().unwrap()))
            .collect()
    };
    assert_eq!(
        uids(&before),
        uids(&after),
        "same names and UIDs: updated in place"
    );
    let revision = cs.status.unwrap().update_revision;
    for pod in &after {
        assert_eq!(image(pod), "nginx:1.7.9");
        let cs_status = &pod
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0];
        assert_eq!(
            cs_status.restart_count, 1,
            "the container was restarted once"
        );
        assert_eq!(label(pod, keys::CONTROLLER_REVISION_HASH), revision);
        wait_event(
            &ns,
            "cs-demo",
            "SuccessfulUpdatePodInPlace",
            &format!(
                "successfully update pod {} in-place(revision {revision})",
                pod.name_any()
            ),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_env_change_recreates_pods() {
    let ns = TestNamespace::new("cs-recreate").await;
    let _ctl = controller(&ns).await;
    ns.apply_yaml(&cloneset_yaml(
        "cs-demo",
        2,
        "  updateStrategy:\n    type: InPlaceIfPossible",
    ))
    .unwrap();
    let pods = wait_ready_pods(&ns, "cs-demo", 2).await;
    let before: BTreeSet<String> = pods.iter().map(|p| p.name_any()).collect();
    let old_revision = label(&pods[0], keys::CONTROLLER_REVISION_HASH);
    patch_cs(&ns, "cs-demo", json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:alpine", "env": [{"name": "X", "value": "1"}]}]}}}})).await;
    wait_status(&ns, "cs-demo", "all recreated at the new revision", |cs| {
        cs.status.as_ref().is_some_and(|s| {
            s.update_revision != old_revision && s.updated_ready_replicas == 2 && s.replicas == 2
        })
    })
    .await;
    let after: BTreeSet<String> = pods_of(&ns, "cs-demo")
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert!(
        before.is_disjoint(&after),
        "new names: {before:?} -> {after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_partition_numeric() {
    let ns = TestNamespace::new("cs-partition").await;
    let _ctl = controller(&ns).await;
    ns.apply_yaml(&cloneset_yaml(
        "sample",
        5,
        "  updateStrategy:\n    type: InPlaceIfPossible\n    maxUnavailable: 2",
    ))
    .unwrap();
    wait_ready_pods(&ns, "sample", 5).await;
    let old_revision = cloneset(&ns, "sample")
        .await
        .status
        .unwrap()
        .update_revision;
    patch_cs(&ns, "sample", json!({"spec": {"updateStrategy": {"partition": 3}, "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:mainline"}]}}}})).await;
    let cs = wait_status(&ns, "sample", "2 updated", |cs| {
        cs.status.as_ref().is_some_and(|s| {
            s.updated_replicas == 2 && s.updated_ready_replicas == 2 && s.ready_replicas == 5
        })
    })
    .await;
    let new_revision = cs.status.as_ref().unwrap().update_revision.clone();
    assert_ne!(new_revision, old_revision);
    assert_eq!(
        cs.status.unwrap().current_revision,
        old_revision,
        "partition holds the current revision"
    );
    // It stays that way.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pods = pods_of(&ns, "sample").await;
    let count = |rev: &str| {
        pods.iter()
            .filter(|p| label(p, keys::CONTROLLER_REVISION_HASH) == rev)
            .count()
    };
    assert_eq!((count(&old_revision), count(&new_revision)), (3, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_partition_ninety_percent_of_eight_updates_one() {
    let ns = TestNamespace::new("cs-partition-pct").await;
    let _ctl = controller(&ns).await;
    ns.apply_yaml(&cloneset_yaml(
        "sample",
        8,
        "  updateStrategy:\n    type: InPlaceIfPossible",
    ))
    .unwrap();
    wait_ready_pods(&ns, "sample", 8).await;
    patch_cs(&ns, "sample", json!({"spec": {"updateStrategy": {"partition": "90%"}, "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:mainline"}]}}}})).await;
    wait_status(&ns, "sample", "90% of 8 -> 1 updated", |cs| {
        cs.status.as_ref().is_some_and(|s| {
            s.expected_updated_replicas == 1
                && s.updated_replicas == 1
                && s.updated_ready_replicas == 1
        })
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let s = cloneset(&ns, "sample").await.status.unwrap();
    assert_eq!((s.updated_replicas, s.replicas), (1, 8), "stays at one");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_paused_keeps_replicas_but_updates_nothing() {
    let ns = TestNamespace::new("cs-paused").await;
    let _ctl = controller(&ns).await;
    ns.apply_yaml(&cloneset_yaml(
        "cs-demo",
        3,
        "  updateStrategy:\n    paused: true",
    ))
    .unwrap();
    wait_ready_pods(&ns, "cs-demo", 3).await;
    patch_cs(&ns, "cs-demo", json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9"}]}}}})).await;
    // Scaling still works while paused, and new Pods use the update revision.
    patch_cs(&ns, "cs-demo", json!({"spec": {"replicas": 5}})).await;
    let pods = wait_ready_pods(&ns, "cs-demo", 5).await;
    let new_images = pods.iter().filter(|p| image(p) == "nginx:1.7.9").count();
    assert_eq!(
        new_images, 2,
        "only the two new Pods are at the new revision"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pods = pods_of(&ns, "cs-demo").await;
    assert_eq!(
        pods.iter().filter(|p| image(p) == "nginx:alpine").count(),
        3,
        "paused: no update"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_pvc_per_pod_is_reused_after_external_delete() {
    let ns = TestNamespace::new("cs-pvc").await;
    let _ctl = controller(&ns).await;
    ns.apply_yaml(&cloneset_yaml(
        "sample-data",
        2,
        "        volumeMounts:\n        - name: data-vol\n          mountPath: /data\n  volumeClaimTemplates:\n  - metadata:\n      name: data-vol\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources:\n        requests:\n          storage: 20Gi",
    ))
    .unwrap();
    let pods = wait_ready_pods(&ns, "sample-data", 2).await;
    let pvcs: Api<PersistentVolumeClaim> = ns.api();
    for pod in &pods {
        let id = label(pod, keys::CLONESET_INSTANCE_ID);
        let pvc = pvcs
            .get(&format!("data-vol-sample-data-{id}"))
            .await
            .expect("pvc per pod");
        assert_eq!(pvc.labels()[keys::CLONESET_INSTANCE_ID], id);
        assert_eq!(pvc.owner_references()[0].kind, "CloneSet");
    }
    // Delete a Pod from outside: its PVC survives and the replacement reuses the id.
    let victim = &pods[0];
    let id = label(victim, keys::CLONESET_INSTANCE_ID);
    ns.api::<Pod>()
        .delete(&victim.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    let replaced = wait_for("a replacement reusing the instance id", MINUTE, || async {
        let pods = pods_of(&ns, "sample-data").await;
        match pods
            .iter()
            .find(|p| label(p, keys::CLONESET_INSTANCE_ID) == id && p.uid() != victim.uid())
        {
            Some(p) if pods.len() == 2 => Ok(p.clone()),
            _ => Err(format!(
                "{:?}",
                pods.iter().map(|p| p.name_any()).collect::<Vec<_>>()
            )),
        }
    })
    .await;
    assert_eq!(replaced.name_any(), victim.name_any(), "same name, new Pod");
    // Scale in deletes Pod and PVC together.
    patch_cs(&ns, "sample-data", json!({"spec": {"replicas": 1}})).await;
    wait_for("one pvc left", MINUTE, || async {
        let list = pvcs
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let live = list
            .items
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .count();
        if live == 1 {
            Ok(())
        } else {
            Err(format!("{live} pvcs"))
        }
    })
    .await;
}
