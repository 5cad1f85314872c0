//! CloneSet on the real cluster: the scenarios of docs/cloneset.md and some subtle
//! cases.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_api::keys;
use kruise_e2e::{RunningController, TestNamespace, is_ready, kubectl, wait_for};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);

async fn controller(ns: &TestNamespace) -> RunningController {
    controller_with_gates(ns, "").await
}

async fn controller_with_gates(ns: &TestNamespace, gates: &str) -> RunningController {
    // RUST_LOG=cloneset_ctl=debug shows what the controller decided.
    if std::env::var_os("RUST_LOG").is_some() {
        kruise_runtime::telemetry::init(kruise_runtime::settings::LogFormat::Text);
    }
    let ctl =
        RunningController::start(cloneset_ctl::IDENTITY, &ns.name, gates, cloneset_ctl::run).await;
    // Tests apply CloneSets right away and expect defaults and validation.
    let probe: CloneSet =
        serde_saphyr::from_str(&cloneset_yaml("probe", 0, "")).expect("probe CloneSet");
    kruise_e2e::wait_webhook_effective(&ns.api(), &probe, |cs: &CloneSet| {
        cs.spec.revision_history_limit.is_some()
    })
    .await;
    ctl
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
    kruise_e2e::wait_observed(
        what,
        || cloneset(ns, name),
        |s| s.observed_generation,
        check,
    )
    .await
}

async fn patch_cs(ns: &TestNamespace, name: &str, patch: serde_json::Value) {
    ns.api::<CloneSet>()
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch cloneset");
}

/// Changes the first container's image only (a JSON patch: a merge patch would replace
/// the whole container list and drop fields like imagePullPolicy).
async fn set_image(ns: &TestNamespace, name: &str, image: &str) {
    let patch: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image}])).unwrap();
    ns.api::<CloneSet>()
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .expect("set image");
}

/// Tracks, through a watch, the most Pods of an app alive at once.
struct PeakPods {
    peak: std::sync::Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl PeakPods {
    fn start(ns: &TestNamespace, app: &str) -> Self {
        use futures::StreamExt;
        let peak = std::sync::Arc::new(AtomicUsize::new(0));
        let api: Api<Pod> = ns.api();
        let config = kube::runtime::watcher::Config::default().labels(&format!("app={app}"));
        let counter = peak.clone();
        let task = tokio::spawn(async move {
            let mut live = BTreeSet::new();
            let mut events = std::pin::pin!(kube::runtime::watcher(api, config));
            while let Some(Ok(event)) = events.next().await {
                match event {
                    kube::runtime::watcher::Event::Apply(p)
                    | kube::runtime::watcher::Event::InitApply(p) => {
                        if p.metadata.deletion_timestamp.is_none() {
                            live.insert(p.name_any());
                        } else {
                            live.remove(&p.name_any());
                        }
                    }
                    kube::runtime::watcher::Event::Delete(p) => {
                        live.remove(&p.name_any());
                    }
                    _ => {}
                }
                counter.fetch_max(live.len(), Ordering::SeqCst);
            }
        });
        PeakPods { peak, task }
    }

    fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

impl Drop for PeakPods {
    fn drop(&mut self) {
        self.task.abort();
    }
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
    wait_ready_pods(&ns, "cs-demo", 3).await;
    // Scheduled Pods move from PreparingNormal to Normal (no preNormal hook).
    let pods = wait_for("3 Normal pods", MINUTE, || async {
        let pods = pods_of(&ns, "cs-demo").await;
        let normal = pods
            .iter()
            .filter(|p| label(p, keys::LIFECYCLE_STATE) == "Normal")
            .count();
        if normal == 3 {
            Ok(pods)
        } else {
            Err(format!("{normal} Normal"))
        }
    })
    .await;
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
            "UPDATED_AVAILABLE",
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
    // The scale subresource: `kubectl scale` works like on a Deployment.
    let scale_ns = ns.name.clone();
    let (ok, _, err) = tokio::task::spawn_blocking(move || {
        kubectl(
            &["scale", "cloneset/cs-demo", "--replicas=4", "-n", &scale_ns],
            None,
        )
    })
    .await
    .unwrap();
    assert!(ok, "kubectl scale: {err}");
    wait_ready_pods(&ns, "cs-demo", 4).await;
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
    patch_cs(
        &ns,
        "sample",
        json!({"spec": {"updateStrategy": {"partition": 3}}}),
    )
    .await;
    set_image(&ns, "sample", "nginx:mainline").await;
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
    patch_cs(
        &ns,
        "sample",
        json!({"spec": {"updateStrategy": {"partition": "90%"}}}),
    )
    .await;
    set_image(&ns, "sample", "nginx:mainline").await;
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
    set_image(&ns, "cs-demo", "nginx:1.7.9").await;
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
    // Ready, not just created: kwok confirms the victim's deletion by name, and a
    // replacement of the same name created in that instant can be deleted with it (a
    // kubelet deletes by UID). Once it runs, it is safe.
    let replaced = wait_for("a replacement reusing the instance id", MINUTE, || async {
        let pods = pods_of(&ns, "sample-data").await;
        match pods
            .iter()
            .find(|p| label(p, keys::CLONESET_INSTANCE_ID) == id && p.uid() != victim.uid())
        {
            Some(p) if pods.len() == 2 && pods.iter().all(is_ready) => Ok(p.clone()),
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

/// `scaleStrategy.disablePVCReuse`: a Pod deleted from outside takes its PVC with it and
/// the replacement gets a new instance id and a fresh PVC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenario_disable_pvc_reuse_drops_the_volume_of_a_deleted_pod() {
    let ns = TestNamespace::new("cs-pvc-noreuse").await;
    let _ctl = controller(&ns).await;
    ns.apply_yaml(&cloneset_yaml(
        "no-reuse",
        2,
        "        volumeMounts:\n        - name: data-vol\n          mountPath: /data\n  scaleStrategy:\n    disablePVCReuse: true\n  volumeClaimTemplates:\n  - metadata:\n      name: data-vol\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources:\n        requests:\n          storage: 1Gi",
    ))
    .unwrap();
    let pods = wait_ready_pods(&ns, "no-reuse", 2).await;
    let victim = &pods[0];
    let victim_id = label(victim, keys::CLONESET_INSTANCE_ID).to_string();
    let survivor_id = label(&pods[1], keys::CLONESET_INSTANCE_ID).to_string();
    ns.api::<Pod>()
        .delete(&victim.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    let pvcs: Api<PersistentVolumeClaim> = ns.api();
    let ids = wait_for(
        "a replacement with a new id, and only live Pods' PVCs left",
        MINUTE,
        || async {
            let pods = pods_of(&ns, "no-reuse").await;
            let pod_ids: BTreeSet<String> = pods
                .iter()
                .map(|p| label(p, keys::CLONESET_INSTANCE_ID).to_string())
                .collect();
            let live: BTreeSet<String> = pvcs
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .iter()
                .filter(|c| c.metadata.deletion_timestamp.is_none())
                .map(|c| c.labels()[keys::CLONESET_INSTANCE_ID].clone())
                .collect();
            if pods.len() == 2 && !pod_ids.contains(&victim_id) && live == pod_ids {
                Ok(pod_ids)
            } else {
                Err(format!("pods {pod_ids:?}, live PVCs {live:?}"))
            }
        },
    )
    .await;
    assert!(ids.contains(&survivor_id), "the other Pod is untouched");
    // The victim's PVC went with its Pod: handed to it (and collected) or deleted. Either
    // way it may linger, terminating, until the `kubernetes.io/pvc-protection` finalizer
    // sees no Pod using it; still owned by the CloneSet if it was deleted directly.
    if let Some(old) = pvcs
        .get_opt(&format!("data-vol-no-reuse-{victim_id}"))
        .await
        .unwrap()
    {
        assert!(
            old.metadata.deletion_timestamp.is_some(),
            "the deleted Pod's claim is not reused: {:?}",
            old.metadata
        );
    }
    let survivor = pvcs
        .get(&format!("data-vol-no-reuse-{survivor_id}"))
        .await
        .unwrap();
    assert_eq!(survivor.owner_references()[0].kind, "CloneSet");
}

/// `RecreatePodWhenChangeVCTInCloneSetGate`: an image change that comes with new
/// `volumeClaimTemplates` recreates the Pods, which get PVCs of the new size, even under
/// InPlaceIfPossible.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_recreate_pod_when_volume_claim_templates_change() {
    let ns = TestNamespace::new("cs-vct").await;
    let _ctl = controller_with_gates(&ns, "RecreatePodWhenChangeVCTInCloneSetGate=true").await;
    let vct = |size: &str| {
        format!(
            "        volumeMounts:\n        - name: data-vol\n          mountPath: /data\n  updateStrategy:\n    type: InPlaceIfPossible\n    maxUnavailable: 2\n  volumeClaimTemplates:\n  - metadata:\n      name: data-vol\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources:\n        requests:\n          storage: {size}"
        )
    };
    ns.apply_yaml(&cloneset_yaml("vct", 2, &vct("1Gi")))
        .unwrap();
    let before = wait_ready_pods(&ns, "vct", 2).await;
    let yaml = cloneset_yaml("vct", 2, &vct("2Gi")).replace("nginx:alpine", "nginx:1.7.9");
    assert!(yaml.contains("nginx:1.7.9"), "the template changes too");
    ns.apply_yaml(&yaml).unwrap();
    let pvcs: Api<PersistentVolumeClaim> = ns.api();
    let after = wait_for("2 recreated Pods with 2Gi PVCs", MINUTE, || async {
        let pods = pods_of(&ns, "vct").await;
        let recreated = pods
            .iter()
            .filter(|p| is_ready(p) && image(p) == "nginx:1.7.9")
            .filter(|p| before.iter().all(|b| b.uid() != p.uid()))
            .count();
        let mut sizes = Vec::new();
        for p in &pods {
            let id = label(p, keys::CLONESET_INSTANCE_ID);
            let size = pvcs
                .get_opt(&format!("data-vol-vct-{id}"))
                .await
                .map_err(|e| e.to_string())?
                .and_then(|c| c.spec?.resources?.requests?.get("storage").cloned())
                .map(|q| q.0)
                .unwrap_or_default();
            sizes.push(size);
        }
        if pods.len() == 2 && recreated == 2 && sizes.iter().all(|s| s == "2Gi") {
            Ok(pods)
        } else {
            Err(format!("{recreated} recreated, PVC sizes {sizes:?}"))
        }
    })
    .await;
    for p in &after {
        assert!(
            !p.annotations().contains_key(keys::INPLACE_UPDATE_STATE),
            "{} was created, not updated in place",
            p.name_any()
        );
    }
}

/// The Pod template is stored with Kubernetes' defaults, so re-applying the manifest with
/// a default spelled out is the same revision: no Pod is touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spelling_out_template_defaults_makes_no_new_revision() {
    let ns = TestNamespace::new("cs-tmpl-defaults").await;
    let _ctl = controller(&ns).await;
    ns.apply_yaml(&cloneset_yaml("defaults", 2, "")).unwrap();
    let pods = wait_ready_pods(&ns, "defaults", 2).await;
    let cs = cloneset(&ns, "defaults").await;
    let spec = cs.spec.template.spec.as_ref().unwrap();
    assert_eq!(spec.dns_policy.as_deref(), Some("ClusterFirst"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(
        spec.containers[0].termination_message_policy.as_deref(),
        Some("File")
    );
    let revision_of = |cs: &CloneSet| {
        cs.status
            .as_ref()
            .map(|s| s.update_revision.clone())
            .unwrap_or_default()
    };
    let revision = revision_of(
        &wait_status(&ns, "defaults", "a revision", |cs| {
            !revision_of(cs).is_empty()
        })
        .await,
    );
    let explicit = cloneset_yaml(
        "defaults",
        2,
        "        terminationMessagePolicy: File\n      dnsPolicy: ClusterFirst\n      restartPolicy: Always",
    );
    ns.apply_yaml(&explicit).unwrap();
    let observed = wait_status(&ns, "defaults", "observed", |_| true).await;
    assert_eq!(
        observed.spec.template, cs.spec.template,
        "one stored template"
    );
    assert_eq!(revision_of(&observed), revision, "same revision");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = pods_of(&ns, "defaults").await;
    let uids = |p: &[Pod]| p.iter().map(|p| p.uid()).collect::<Vec<_>>();
    assert_eq!(uids(&after), uids(&pods), "no Pod replaced");
    assert!(
        after
            .iter()
            .all(|p| label(p, keys::CONTROLLER_REVISION_HASH) == revision)
    );
}

/// Lifecycle/in-place timestamps of each Pod's last update, oldest first.
async fn update_order(ns: &TestNamespace, app: &str) -> Vec<String> {
    let mut pods: Vec<(String, String)> = pods_of(ns, app)
        .await
        .iter()
        .filter_map(|p| {
            let state = p.annotations().get(keys::INPLACE_UPDATE_STATE)?;
            let ts = serde_json::from_str::<serde_json::Value>(state).ok()?["updateTimestamp"]
                .as_str()?
                .to_string();
            Some((ts, p.name_any()))
        })
        .collect();
    pods.sort();
    pods.into_iter().map(|(_, n)| n).collect()
}

async fn label_pod(ns: &TestNamespace, pod: &str, key: &str, value: &str) {
    ns.api::<Pod>()
        .patch(
            pod,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
        )
        .await
        .expect("label pod");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_rejects_invalid_clonesets_naming_the_field() {
    let ns = TestNamespace::new("cs-admission").await;
    let _ctl = controller(&ns).await;
    // Defaults are written by the mutating webhook.
    ns.apply(&cloneset_yaml(
        "cs-demo",
        1,
        "  updateStrategy:\n    type: InPlaceOnly",
    ))
    .await
    .unwrap();
    let cs = cloneset(&ns, "cs-demo").await;
    let s = &cs.spec.update_strategy;
    assert_eq!(
        s.max_unavailable,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("20%".into()))
    );
    assert_eq!(s.in_place_update_strategy, Some(Default::default()));
    assert_eq!(cs.spec.revision_history_limit, Some(10));

    // InPlaceOnly: only images may change.
    let err = ns
        .apply(&cloneset_yaml("cs-demo", 1, "        env:\n        - name: X\n          value: \"1\"\n  updateStrategy:\n    type: InPlaceOnly"))
        .await
        .expect_err("env change under InPlaceOnly");
    assert!(err.contains("spec.template.spec: Forbidden: only allowed to update images in spec for InPlaceOnly, but found add /containers/0/env"), "{err}");
    // maxSurge with InPlaceOnly.
    let err = ns
        .apply(&cloneset_yaml(
            "cs-surge",
            1,
            "  updateStrategy:\n    type: InPlaceOnly\n    maxSurge: 1",
        ))
        .await
        .expect_err("maxSurge with InPlaceOnly");
    assert!(err.contains("spec.updateStrategy.maxSurge: Invalid value: 1: can not use maxSurge with strategy type InPlaceOnly"), "{err}");
    // A selector that does not match the template.
    let bad_selector = cloneset_yaml("cs-sel", 1, "").replace(
        "    matchLabels:\n      app: cs-sel",
        "    matchLabels:\n      app: other",
    );
    let err = ns
        .apply(&bad_selector)
        .await
        .expect_err("selector mismatch");
    assert!(
        err.contains("`selector` does not match template `labels`"),
        "{err}"
    );
    // A malformed partition.
    let err = ns
        .apply(&cloneset_yaml(
            "cs-part",
            1,
            "  updateStrategy:\n    partition: abc",
        ))
        .await
        .expect_err("bad partition");
    assert!(
        err.contains("spec.updateStrategy.partition") && err.contains("not a percentage"),
        "{err}"
    );
    // Negative replicas.
    let err = ns
        .apply(&cloneset_yaml("cs-neg", -1, ""))
        .await
        .expect_err("negative replicas");
    assert!(err.contains("spec.replicas"), "{err}");
    // Nothing invalid was stored.
    for name in ["cs-surge", "cs-sel", "cs-part", "cs-neg"] {
        assert!(
            ns.api::<CloneSet>().get_opt(name).await.unwrap().is_none(),
            "{name} must not exist"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_surge_creates_extra_pods_before_deleting_old_ones() {
    let ns = TestNamespace::new("cs-surge").await;
    let _ctl = controller(&ns).await;
    ns.apply(&cloneset_yaml(
        "cs-demo",
        3,
        "  updateStrategy:\n    maxSurge: 2\n    maxUnavailable: 0",
    ))
    .await
    .unwrap();
    let pods = wait_ready_pods(&ns, "cs-demo", 3).await;
    let old_revision = label(&pods[0], keys::CONTROLLER_REVISION_HASH);
    let tracker = PeakPods::start(&ns, "cs-demo");
    set_image(&ns, "cs-demo", "nginx:1.7.9").await;
    let peak = AtomicUsize::new(0);
    let min_ready = AtomicUsize::new(usize::MAX);
    wait_for("all 3 recreated at the new revision", MINUTE, || {
        let ns = &ns;
        let old_revision = old_revision.clone();
        let (peak, min_ready) = (&peak, &min_ready);
        async move {
            let pods = pods_of(ns, "cs-demo").await;
            peak.fetch_max(pods.len(), Ordering::SeqCst);
            min_ready.fetch_min(
                pods.iter().filter(|p| is_ready(p)).count(),
                Ordering::SeqCst,
            );
            let done = pods.len() == 3
                && pods.iter().all(|p| {
                    is_ready(p) && label(p, keys::CONTROLLER_REVISION_HASH) != old_revision
                });
            if done {
                Ok(())
            } else {
                Err(format!("{} pods", pods.len()))
            }
        }
    })
    .await;
    let (peak, min_ready) = (
        tracker.peak().max(peak.into_inner()),
        min_ready.into_inner(),
    );
    assert_eq!(peak, 5, "replicas + maxSurge Pods at the peak");
    assert!(
        min_ready >= 3,
        "maxUnavailable 0: never fewer than 3 ready (saw {min_ready})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weight_priority_updates_foo_before_bar_before_others() {
    let ns = TestNamespace::new("cs-priority").await;
    let _ctl = controller(&ns).await;
    let strategy = "  minReadySeconds: 1\n  updateStrategy:\n    type: InPlaceIfPossible\n    maxUnavailable: 1\n    priorityStrategy:\n      weightPriority:\n      - weight: 50\n        matchSelector:\n          matchLabels:\n            test-key: foo\n      - weight: 30\n        matchSelector:\n          matchLabels:\n            test-key: bar";
    ns.apply(&cloneset_yaml("cs-demo", 3, strategy))
        .await
        .unwrap();
    let pods = wait_ready_pods(&ns, "cs-demo", 3).await;
    let (bar, foo, other) = (pods[0].name_any(), pods[1].name_any(), pods[2].name_any());
    label_pod(&ns, &bar, "test-key", "bar").await;
    label_pod(&ns, &foo, "test-key", "foo").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    set_image(&ns, "cs-demo", "nginx:1.7.9").await;
    wait_status(&ns, "cs-demo", "all updated", |cs| {
        cs.status
            .as_ref()
            .is_some_and(|s| s.updated_ready_replicas == 3)
    })
    .await;
    assert_eq!(update_order(&ns, "cs-demo").await, [foo, bar, other]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scatter_spreads_matching_pods_through_the_update() {
    // 6 Pods, 2 labelled foo=bar: scatter puts one first and the other last. With
    // partition 1 and room to update 5 at once, the one Pod left behind is the last in
    // the order, so it must be the second foo=bar Pod.
    let ns = TestNamespace::new("cs-scatter").await;
    let _ctl = controller(&ns).await;
    let strategy = "  updateStrategy:\n    type: InPlaceIfPossible\n    maxUnavailable: 5\n    partition: 1\n    scatterStrategy:\n    - key: foo\n      value: bar";
    ns.apply(&cloneset_yaml("cs-demo", 6, strategy))
        .await
        .unwrap();
    let pods = wait_ready_pods(&ns, "cs-demo", 6).await;
    // Label the two Pods that the default order would otherwise update first.
    let marked: BTreeSet<String> = pods.iter().take(2).map(|p| p.name_any()).collect();
    for name in &marked {
        label_pod(&ns, name, "foo", "bar").await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    set_image(&ns, "cs-demo", "nginx:1.7.9").await;
    wait_status(&ns, "cs-demo", "5 updated", |cs| {
        cs.status
            .as_ref()
            .is_some_and(|s| s.updated_ready_replicas == 5)
    })
    .await;
    let left: Vec<String> = pods_of(&ns, "cs-demo")
        .await
        .iter()
        .filter(|p| image(p) == "nginx:alpine")
        .map(|p| p.name_any())
        .collect();
    assert_eq!(left.len(), 1);
    assert!(
        marked.contains(&left[0]),
        "the Pod kept for last ({}) is a foo=bar Pod {marked:?}",
        left[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_delete_hook_holds_the_pod_until_its_finalizer_is_removed() {
    let ns = TestNamespace::new("cs-predelete").await;
    let _ctl = controller(&ns).await;
    let yaml = cloneset_yaml("cs-demo", 2, "  lifecycle:\n    preDelete:\n      finalizersHandler:\n      - example.io/unready-blocker")
        .replace("      labels:\n        app: cs-demo\n", "      labels:\n        app: cs-demo\n      finalizers:\n      - example.io/unready-blocker\n");
    ns.apply(&yaml).await.unwrap();
    let pods = wait_ready_pods(&ns, "cs-demo", 2).await;
    patch_cs(&ns, "cs-demo", json!({"spec": {"replicas": 1}})).await;
    let held = wait_for("one pod PreparingDelete", MINUTE, || async {
        let pods = pods_of(&ns, "cs-demo").await;
        pods.iter()
            .find(|p| label(p, keys::LIFECYCLE_STATE) == "PreparingDelete")
            .map(|p| p.name_any())
            .ok_or_else(|| {
                format!(
                    "{:?}",
                    pods.iter()
                        .map(|p| label(p, keys::LIFECYCLE_STATE))
                        .collect::<Vec<_>>()
                )
            })
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        pods_of(&ns, "cs-demo")
            .await
            .iter()
            .any(|p| p.name_any() == held),
        "held by the hook"
    );
    // The user lets go: the Pod is deleted.
    ns.api::<Pod>()
        .patch(
            &held,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    wait_for("the held pod gone", MINUTE, || async {
        let names: Vec<String> = pods_of(&ns, "cs-demo")
            .await
            .iter()
            .map(|p| p.name_any())
            .collect();
        if !names.contains(&held) && names.len() == 1 {
            Ok(())
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await;
    // Clean up the other Pod's finalizer so the namespace can go.
    for p in pods.iter().filter(|p| p.name_any() != held) {
        let _ = ns
            .api::<Pod>()
            .patch(
                &p.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_place_update_hook_walks_the_lifecycle_states() {
    let ns = TestNamespace::new("cs-inplacehook").await;
    let _ctl = controller(&ns).await;
    let yaml = cloneset_yaml("cs-demo", 1, "  updateStrategy:\n    type: InPlaceIfPossible\n  lifecycle:\n    inPlaceUpdate:\n      finalizersHandler:\n      - example.io/unready-blocker")
        .replace("      labels:\n        app: cs-demo\n", "      labels:\n        app: cs-demo\n      finalizers:\n      - example.io/unready-blocker\n");
    ns.apply(&yaml).await.unwrap();
    let pod = wait_ready_pods(&ns, "cs-demo", 1).await.remove(0);
    let name = pod.name_any();
    set_image(&ns, "cs-demo", "nginx:1.7.9").await;
    let state = |want: &'static str| {
        let ns = &ns;
        let name = name.clone();
        async move {
            wait_for(&format!("state {want}"), MINUTE, || async {
                let p = ns
                    .api::<Pod>()
                    .get(&name)
                    .await
                    .map_err(|e| e.to_string())?;
                let s = label(&p, keys::LIFECYCLE_STATE);
                if s == want { Ok(p) } else { Err(s) }
            })
            .await
        }
    };
    let p = state("PreparingUpdate").await;
    assert_eq!(
        image(&p),
        "nginx:alpine",
        "not updated while the hook holds it"
    );
    // Remove the finalizer: the update proceeds, then waits in Updated.
    ns.api::<Pod>()
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    let p = state("Updated").await;
    assert_eq!(image(&p), "nginx:1.7.9");
    assert_eq!(p.uid(), pod.uid(), "in place");
    // Re-adding the finalizer returns the Pod to Normal.
    ns.api::<Pod>()
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.io/unready-blocker"]}})),
        )
        .await
        .unwrap();
    state("Normal").await;
    let _ = ns
        .api::<Pod>()
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lower_deletion_cost_is_scaled_in_first() {
    let ns = TestNamespace::new("cs-cost").await;
    let _ctl = controller(&ns).await;
    ns.apply(&cloneset_yaml("cs-demo", 3, "")).await.unwrap();
    let pods = wait_ready_pods(&ns, "cs-demo", 3).await;
    for (pod, cost) in pods.iter().zip(["10", "-5", "3"]) {
        ns.api::<Pod>()
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"annotations": {keys::POD_DELETION_COST: cost}}}),
                ),
            )
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    patch_cs(&ns, "cs-demo", json!({"spec": {"replicas": 2}})).await;
    let cheapest = pods[1].name_any();
    wait_for("the cheapest pod deleted", MINUTE, || async {
        let names: Vec<String> = pods_of(&ns, "cs-demo")
            .await
            .iter()
            .map(|p| p.name_any())
            .collect();
        if names.len() == 2 && !names.contains(&cheapest) {
            Ok(())
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_in_place_update_waits_before_changing_the_image() {
    let ns = TestNamespace::new("cs-grace").await;
    let _ctl = controller(&ns).await;
    ns.apply(&cloneset_yaml("cs-demo", 1, "  updateStrategy:\n    type: InPlaceIfPossible\n    inPlaceUpdateStrategy:\n      gracePeriodSeconds: 3")).await.unwrap();
    let pod = wait_ready_pods(&ns, "cs-demo", 1).await.remove(0);
    set_image(&ns, "cs-demo", "nginx:1.7.9").await;
    let during = wait_for("the pod marked not ready first", MINUTE, || async {
        let p = ns
            .api::<Pod>()
            .get(&pod.name_any())
            .await
            .map_err(|e| e.to_string())?;
        if !is_ready(&p) {
            Ok(p)
        } else {
            Err("still ready".into())
        }
    })
    .await;
    assert_eq!(
        image(&during),
        "nginx:alpine",
        "image unchanged when it goes not-ready"
    );
    let after = wait_for("the image changed and running", MINUTE, || async {
        let p = ns
            .api::<Pod>()
            .get(&pod.name_any())
            .await
            .map_err(|e| e.to_string())?;
        let status = p
            .status
            .clone()
            .unwrap_or_default()
            .container_statuses
            .unwrap_or_default();
        if image(&p) == "nginx:1.7.9" && status.first().is_some_and(|c| c.image == "nginx:1.7.9") {
            Ok(p)
        } else {
            Err("old image".into())
        }
    })
    .await;
    // Server-side times, immune to how fast this test polls: when the Pod went not-ready
    // (InPlaceUpdateReady=False, whole seconds, so never late) and when the kubelet (kwok)
    // started the new container.
    let not_ready_at = after
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == keys::INPLACE_UPDATE_READY))
        .and_then(|c| c.last_transition_time.clone());
    let started_at = after
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .state
        .as_ref()
        .and_then(|s| s.running.as_ref())
        .and_then(|r| r.started_at.clone());
    // InPlaceUpdateReady is True again by now; its transition time is when it flipped back,
    // so compare with the in-place state's start instead.
    let state: serde_json::Value =
        serde_json::from_str(&after.annotations()[keys::INPLACE_UPDATE_STATE]).unwrap();
    let updated_at: jiff::Timestamp = state["updateTimestamp"].as_str().unwrap().parse().unwrap();
    let started_at = started_at.expect("running container").0;
    let waited = started_at.duration_since(updated_at);
    assert!(
        waited.as_secs_f64() >= 3.0,
        "container restarted {waited:?} after the update began; grace is 3s (not-ready at {not_ready_at:?})"
    );
    wait_ready_pods(&ns, "cs-demo", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_restart_mid_rollout_creates_no_extra_pod_and_loses_none() {
    let ns = TestNamespace::new("cs-restart").await;
    let ctl = controller(&ns).await;
    ns.apply(&cloneset_yaml(
        "cs-demo",
        6,
        "  minReadySeconds: 1\n  updateStrategy:\n    maxUnavailable: 1",
    ))
    .await
    .unwrap();
    let pods = wait_ready_pods(&ns, "cs-demo", 6).await;
    let old_revision = label(&pods[0], keys::CONTROLLER_REVISION_HASH);
    set_image(&ns, "cs-demo", "nginx:1.7.9").await;
    let tracker = PeakPods::start(&ns, "cs-demo");
    // Let the rollout get going, then replace the controller.
    wait_status(&ns, "cs-demo", "the rollout started", |cs| {
        cs.status.as_ref().is_some_and(|s| s.updated_replicas >= 1)
    })
    .await;
    ctl.stop().await;
    let _ctl = controller(&ns).await;
    let peak = AtomicUsize::new(0);
    wait_for("all 6 updated", Duration::from_secs(90), || {
        let (ns, old_revision, peak) = (&ns, old_revision.clone(), &peak);
        async move {
            let pods = pods_of(ns, "cs-demo").await;
            peak.fetch_max(pods.len(), Ordering::SeqCst);
            let done = pods.len() == 6
                && pods.iter().all(|p| {
                    is_ready(p) && label(p, keys::CONTROLLER_REVISION_HASH) != old_revision
                });
            if done {
                Ok(())
            } else {
                Err(format!("{} pods", pods.len()))
            }
        }
    })
    .await;
    let peak = tracker.peak().max(peak.into_inner());
    assert!(
        peak <= 6,
        "never more than replicas Pods without surge (saw {peak})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn predownload_gate_creates_an_image_pull_job() {
    let ns = TestNamespace::new("cs-predownload").await;
    let _ctl = controller_with_gates(&ns, "PreDownloadImageForInPlaceUpdate=true").await;
    let yaml = cloneset_yaml("cs-demo", 4, "  updateStrategy:\n    type: InPlaceIfPossible\n    partition: 2")
        .replace("  name: cs-demo\n", "  name: cs-demo\n  annotations:\n    apps.kruise.io/image-predownload-parallelism: \"5\"\n");
    ns.apply(&yaml).await.unwrap();
    wait_ready_pods(&ns, "cs-demo", 4).await;
    set_image(&ns, "cs-demo", "nginx:1.7.9").await;
    let cs = wait_status(&ns, "cs-demo", "the new revision", |cs| {
        cs.status.as_ref().is_some_and(|s| s.updated_replicas == 2)
    })
    .await;
    let revision = cs.status.unwrap().update_revision;
    let jobs: Api<kruise_api::apps_v1alpha1::ImagePullJob> = ns.api();
    let job = wait_for("the ImagePullJob", MINUTE, || async {
        jobs.get_opt(&format!("{revision}-nginx"))
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "no job yet".to_string())
    })
    .await;
    assert_eq!(job.spec.image, "nginx:1.7.9");
    assert_eq!(
        job.spec.template.parallelism,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(5))
    );
    assert_eq!(job.owner_references()[0].name, "cs-demo");
    wait_event(
        &ns,
        "cs-demo",
        "CreatedImagePullJob",
        &format!("created ImagePullJob {revision}-nginx for image: nginx:1.7.9"),
    )
    .await;
}

/// The `inPlaceUpdateStrategy.imagePreDownload*` fields win over the annotations of the
/// same settings: the annotations alone would wait for 4 updated ready Pods (never, with
/// partition 2) and pull 5 at a time for 100 s; the fields start at once, 2 at a time, 60 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn predownload_fields_win_over_the_annotations() {
    let ns = TestNamespace::new("cs-predownload-fields").await;
    let _ctl = controller_with_gates(&ns, "PreDownloadImageForInPlaceUpdate=true").await;
    let strategy = "  updateStrategy:\n    type: InPlaceIfPossible\n    partition: 2\n    \
        inPlaceUpdateStrategy:\n      imagePreDownloadParallelism: 2\n      \
        imagePreDownloadTimeoutSeconds: 60\n      imagePreDownloadMinUpdatedReadyPods: 0";
    let annotations = "  annotations:\n    apps.kruise.io/image-predownload-parallelism: \"5\"\n    \
        apps.kruise.io/image-predownload-timeout-seconds: \"100\"\n    \
        apps.kruise.io/image-predownload-min-updated-ready-pods: \"4\"\n";
    let yaml = cloneset_yaml("cs-demo", 4, strategy).replace(
        "  name: cs-demo\n",
        &format!("  name: cs-demo\n{annotations}"),
    );
    ns.apply(&yaml).await.unwrap();
    // Stored, not pruned.
    let in_place = cloneset(&ns, "cs-demo")
        .await
        .spec
        .update_strategy
        .in_place_update_strategy
        .unwrap();
    assert_eq!(
        (
            in_place.image_pre_download_parallelism,
            in_place.image_pre_download_timeout_seconds,
            in_place.image_pre_download_min_updated_ready_pods
        ),
        (
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(2)),
            Some(60),
            Some(0)
        )
    );
    wait_ready_pods(&ns, "cs-demo", 4).await;
    set_image(&ns, "cs-demo", "nginx:1.7.9").await;
    let cs = wait_status(&ns, "cs-demo", "the new revision", |cs| {
        cs.status
            .as_ref()
            .is_some_and(|s| s.update_revision != s.current_revision)
    })
    .await;
    let revision = cs.status.unwrap().update_revision;
    let jobs: Api<kruise_api::apps_v1alpha1::ImagePullJob> = ns.api();
    let job = wait_for("the ImagePullJob", MINUTE, || async {
        jobs.get_opt(&format!("{revision}-nginx"))
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "no job yet".to_string())
    })
    .await;
    assert_eq!(job.spec.image, "nginx:1.7.9");
    assert_eq!(
        job.spec.template.parallelism,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(2))
    );
    assert_eq!(
        job.spec
            .template
            .pull_policy
            .and_then(|p| p.timeout_seconds),
        Some(60)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_hash_gate_labels_pods_with_the_hash_only() {
    let ns = TestNamespace::new("cs-shorthash").await;
    let _ctl = controller_with_gates(&ns, "CloneSetShortHash=true").await;
    ns.apply(&cloneset_yaml("cs-demo", 2, "")).await.unwrap();
    let pods = wait_ready_pods(&ns, "cs-demo", 2).await;
    let revision = cloneset(&ns, "cs-demo")
        .await
        .status
        .unwrap()
        .update_revision;
    for p in &pods {
        assert_eq!(
            format!("cs-demo-{}", label(p, keys::CONTROLLER_REVISION_HASH)),
            revision
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_rollback_gate_moves_pods_back_when_partition_rises() {
    let ns = TestNamespace::new("cs-rollback").await;
    let _ctl = controller_with_gates(&ns, "CloneSetPartitionRollback=true").await;
    ns.apply(&cloneset_yaml(
        "cs-demo",
        5,
        "  updateStrategy:\n    type: InPlaceIfPossible\n    maxUnavailable: 5",
    ))
    .await
    .unwrap();
    wait_ready_pods(&ns, "cs-demo", 5).await;
    patch_cs(
        &ns,
        "cs-demo",
        json!({"spec": {"updateStrategy": {"partition": 2}}}),
    )
    .await;
    set_image(&ns, "cs-demo", "nginx:1.7.9").await;
    wait_status(&ns, "cs-demo", "3 updated", |cs| {
        cs.status
            .as_ref()
            .is_some_and(|s| s.updated_ready_replicas == 3)
    })
    .await;
    patch_cs(
        &ns,
        "cs-demo",
        json!({"spec": {"updateStrategy": {"partition": 4}}}),
    )
    .await;
    wait_status(&ns, "cs-demo", "rolled back to 1 updated", |cs| {
        cs.status
            .as_ref()
            .is_some_and(|s| s.updated_replicas == 1 && s.ready_replicas == 5)
    })
    .await;
    let pods = pods_of(&ns, "cs-demo").await;
    assert_eq!(
        pods.iter().filter(|p| image(p) == "nginx:alpine").count(),
        4,
        "rolled back in place"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mark_pod_not_ready_holds_readiness_while_the_hook_holds_the_pod() {
    let ns = TestNamespace::new("cs-marknotready").await;
    let _ctl = controller(&ns).await;
    let yaml = cloneset_yaml(
        "cs-demo",
        1,
        "  updateStrategy:\n    type: InPlaceIfPossible\n  lifecycle:\n    inPlaceUpdate:\n      markPodNotReady: true\n      finalizersHandler:\n      - example.io/unready-blocker",
    )
    .replace("      labels:\n        app: cs-demo\n", "      labels:\n        app: cs-demo\n      finalizers:\n      - example.io/unready-blocker\n");
    ns.apply(&yaml).await.unwrap();
    let pod = wait_ready_pods(&ns, "cs-demo", 1).await.remove(0);
    let name = pod.name_any();
    set_image(&ns, "cs-demo", "nginx:1.7.9").await;
    let held = wait_for("PreparingUpdate and not ready", MINUTE, || async {
        let p = ns
            .api::<Pod>()
            .get(&name)
            .await
            .map_err(|e| e.to_string())?;
        let state = label(&p, keys::LIFECYCLE_STATE);
        if state == "PreparingUpdate" && !is_ready(&p) {
            Ok(p)
        } else {
            Err(format!("{state}, ready {}", is_ready(&p)))
        }
    })
    .await;
    let condition = held
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == keys::KRUISE_POD_READY)
        .unwrap();
    assert_eq!(condition.status, "False");
    assert!(
        condition
            .message
            .unwrap_or_default()
            .contains("preUpdateHook")
    );
    // Let go: the update completes and readiness comes back.
    ns.api::<Pod>()
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    wait_for("updated and ready again", MINUTE, || async {
        let p = ns
            .api::<Pod>()
            .get(&name)
            .await
            .map_err(|e| e.to_string())?;
        if image(&p) == "nginx:1.7.9" && is_ready(&p) {
            Ok(())
        } else {
            Err(format!("{} ready {}", image(&p), is_ready(&p)))
        }
    })
    .await;
}

/// A CloneSet whose one container asks for cpu and memory (Burstable), in-place updates.
fn resized_cloneset_yaml(name: &str, resize_policy: &str) -> String {
    cloneset_yaml(
        name,
        2,
        &format!(
            r#"        resources:
          requests: {{cpu: 100m, memory: 64Mi}}
          limits: {{cpu: 200m, memory: 128Mi}}
{resize_policy}  updateStrategy:
    type: InPlaceIfPossible"#
        ),
    )
}

/// Replaces the first container's cpu request and limit (a JSON patch, as `kubectl patch
/// --type json` would).
async fn set_cpu(ns: &TestNamespace, name: &str, request: &str, limit: &str) {
    let path = "/spec/template/spec/containers/0/resources";
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": format!("{path}/requests/cpu"), "value": request},
        {"op": "replace", "path": format!("{path}/limits/cpu"), "value": limit},
    ]))
    .unwrap();
    ns.api::<CloneSet>()
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .expect("set cpu");
}

fn uids(pods: &[Pod]) -> BTreeSet<(String, String)> {
    pods.iter()
        .map(|p| (p.name_any(), p.uid().unwrap()))
        .collect()
}

/// The first container's (spec, status) cpu request.
fn cpu_requests(p: &Pod) -> (String, String) {
    let spec = p.spec.as_ref().unwrap().containers[0]
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("cpu"))
        .map(|q| q.0.clone())
        .unwrap_or_default();
    let status = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs[0].resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("cpu"))
        .map(|q| q.0.clone())
        .unwrap_or_default();
    (spec, status)
}

/// `InPlaceWorkloadVerticalScaling`: a template change of only cpu requests and limits
/// resizes the Pods in place through `pods/resize` (same names and UIDs, no restart, the
/// kubelet — kwok's pod-resize stage — reporting the new resources), and the rollout
/// completes when they are reported; a change of the Pod's QoS class still recreates.
/// On an apiserver without `pods/resize` (Kubernetes 1.32 without its alpha
/// InPlacePodVerticalScaling gate; 1.33 and later always serve it) the controller turns the
/// gate off at start, and the change recreates the Pods as without the gate
/// (docs/in-place-vertical-scaling.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vertical_scaling_gate_resizes_pods_in_place() {
    let ns = TestNamespace::new("cs-vpa").await;
    let client = kruise_e2e::client().await;
    let version = client.apiserver_version().await.unwrap();
    let minor: u32 = version.minor.trim_end_matches('+').parse().unwrap();
    let resize_served = client
        .list_core_api_resources("v1")
        .await
        .unwrap()
        .resources
        .iter()
        .any(|r| r.name == "pods/resize");
    assert!(
        resize_served || (version.major == "1" && minor < 33),
        "Kubernetes {}.{} serves pods/resize",
        version.major,
        version.minor
    );
    let _ctl = controller_with_gates(&ns, "InPlaceWorkloadVerticalScaling=true").await;
    ns.apply_yaml(&resized_cloneset_yaml("vpa", "")).unwrap();
    let before = wait_ready_pods(&ns, "vpa", 2).await;
    let old_revision = label(&before[0], keys::CONTROLLER_REVISION_HASH);
    if !resize_served {
        set_cpu(&ns, "vpa", "150m", "300m").await;
        let recreated = wait_for(
            "both Pods recreated (no pods/resize)",
            2 * MINUTE,
            || async {
                let pods = pods_of(&ns, "vpa").await;
                let fresh = pods
                    .iter()
                    .filter(|p| {
                        is_ready(p) && !uids(&before).contains(&(p.name_any(), p.uid().unwrap()))
                    })
                    .count();
                if pods.len() == 2 && fresh == 2 {
                    Ok(pods)
                } else {
                    Err(format!("{} pods, {fresh} new and ready", pods.len()))
                }
            },
        )
        .await;
        for pod in &recreated {
            assert_eq!(cpu_requests(pod).0, "150m", "{}", pod.name_any());
            assert_ne!(label(pod, keys::CONTROLLER_REVISION_HASH), old_revision);
        }
        return;
    }

    set_cpu(&ns, "vpa", "150m", "300m").await;
    wait_status(&ns, "vpa", "both resized and ready", |cs| {
        cs.status.as_ref().is_some_and(|s| {
            s.update_revision != old_revision
                && s.updated_ready_replicas == 2
                && s.current_revision == s.update_revision
        })
    })
    .await;
    let after = pods_of(&ns, "vpa").await;
    assert_eq!(uids(&before), uids(&after), "resized in place: same Pods");
    for pod in &after {
        assert_eq!(
            cpu_requests(pod),
            ("150m".to_string(), "150m".to_string()),
            "{}: spec and status carry the new request",
            pod.name_any()
        );
        let status = &pod
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0];
        assert_eq!(status.restart_count, 0, "a resize restarts no container");
        let state: serde_json::Value = serde_json::from_str(
            pod.annotations()
                .get(keys::INPLACE_UPDATE_STATE)
                .expect("in-place update state"),
        )
        .unwrap();
        assert_eq!(state["updateResources"], true, "{state}");
        assert!(state.get("updateImages").is_none(), "{state}");
        assert!(is_ready(pod));
    }

    // Requests = limits for cpu and memory: Guaranteed, a QoS change the kubelet cannot
    // resize into. The Pods are recreated.
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/resources",
         "value": {"requests": {"cpu": "300m", "memory": "128Mi"}, "limits": {"cpu": "300m", "memory": "128Mi"}}},
    ]))
    .unwrap();
    ns.api::<CloneSet>()
        .patch("vpa", &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .unwrap();
    let recreated = wait_for("both Pods recreated as Guaranteed", 2 * MINUTE, || async {
        let pods = pods_of(&ns, "vpa").await;
        let fresh = pods
            .iter()
            .filter(|p| is_ready(p) && !uids(&after).contains(&(p.name_any(), p.uid().unwrap())))
            .count();
        if pods.len() == 2 && fresh == 2 {
            Ok(pods)
        } else {
            Err(format!("{} pods, {fresh} new and ready", pods.len()))
        }
    })
    .await;
    assert_eq!(cpu_requests(&recreated[0]).0, "300m");
}

/// Without the gate, a resource change is a new Pod as before (upstream's default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_vertical_scaling_a_resource_change_recreates_pods() {
    let ns = TestNamespace::new("cs-novpa").await;
    let _ctl = controller(&ns).await;
    ns.apply_yaml(&resized_cloneset_yaml("novpa", "")).unwrap();
    let before = wait_ready_pods(&ns, "novpa", 2).await;
    set_cpu(&ns, "novpa", "150m", "300m").await;
    wait_for("both Pods recreated", 2 * MINUTE, || async {
        let pods = pods_of(&ns, "novpa").await;
        let fresh = pods
            .iter()
            .filter(|p| is_ready(p) && !uids(&before).contains(&(p.name_any(), p.uid().unwrap())))
            .count();
        if pods.len() == 2 && fresh == 2 {
            Ok(())
        } else {
            Err(format!("{} pods, {fresh} new and ready", pods.len()))
        }
    })
    .await;
}
