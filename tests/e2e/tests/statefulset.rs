//! Advanced StatefulSet (`apps.kruise.io/v1beta1`) on the real cluster: the
//! scenarios of docs/advanced-statefulset.md and some subtle cases. Each test has its own
//! namespace and its own in-process controller; rollouts are recorded through a watch
//! (every state the apiserver went through, in order) so bounds like "never more than 3
//! Pods unavailable" are checked at every step, not only at polling instants.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1beta1::{
    PersistentVolumeClaimRetentionPolicyType, PodManagementPolicyType, PodUpdateStrategyType,
    StatefulSet, StatefulSetUpdateStrategyType,
};
use kruise_e2e::{RunningController, TestNamespace, is_ready, kubectl_async, wait_for};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);

async fn controller(ns: &TestNamespace) -> RunningController {
    // RUST_LOG=statefulset_ctl=debug,kruise_workload=debug shows what it decided.
    if std::env::var_os("RUST_LOG").is_some() {
        kruise_runtime::telemetry::init(kruise_runtime::settings::LogFormat::Text);
    }
    let ctl = RunningController::start(
        statefulset_ctl::IDENTITY,
        &ns.name,
        "",
        statefulset_ctl::run,
    )
    .await;
    // Tests apply sets right away and expect defaults and validation.
    let probe: StatefulSet =
        serde_saphyr::from_str(&sts_yaml("probe", 0, &Extra::default())).expect("probe");
    kruise_e2e::wait_webhook_effective(&ns.api(), &probe, |s: &StatefulSet| {
        s.spec.revision_history_limit.is_some() && s.spec.pod_management_policy.is_some()
    })
    .await;
    ctl
}

/// What a manifest adds to the basic one, each written at its own indentation level.
#[derive(Default)]
struct Extra<'a> {
    /// Under `metadata:`.
    metadata: &'a str,
    /// Under `spec:`.
    spec: &'a str,
    /// Under the Pod template's `spec:`.
    pod: &'a str,
    /// Under the container.
    container: &'a str,
}

fn indent(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("{pad}{l}\n"))
        .collect()
}

/// An Advanced StatefulSet `name` of `replicas` Pods labelled `app=<name>`, one nginx
/// container (as in examples/advanced-statefulset-*.yaml).
fn sts_yaml(name: &str, replicas: i32, extra: &Extra) -> String {
    format!(
        r#"apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata:
  name: {name}
{metadata}spec:
  serviceName: {name}-headless
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
{spec}  template:
    metadata:
      labels:
        app: {name}
    spec:
{pod}      containers:
      - name: nginx
        image: nginx:alpine
        imagePullPolicy: IfNotPresent
        ports:
        - containerPort: 80
          name: web
{container}"#,
        metadata = indent(extra.metadata, 2),
        spec = indent(extra.spec, 2),
        pod = indent(extra.pod, 6),
        container = indent(extra.container, 8),
    )
}

/// `web` of examples/advanced-statefulset-web.yaml: Parallel, rolling update with maxUnavailable 3.
const PARALLEL_MAX_UNAVAILABLE_3: &str = "
podManagementPolicy: Parallel
updateStrategy:
  type: RollingUpdate
  rollingUpdate:
    maxUnavailable: 3
";

/// `web` updated in place (examples/advanced-statefulset-web-inplace.yaml).
const PARALLEL_MAX_UNAVAILABLE_3_IN_PLACE: &str = "
podManagementPolicy: Parallel
updateStrategy:
  type: RollingUpdate
  rollingUpdate:
    maxUnavailable: 3
    podUpdatePolicy: InPlaceIfPossible
";

const IN_PLACE_READINESS_GATE: &str = "
readinessGates:
- conditionType: InPlaceUpdateReady
";

fn label(p: &Pod, key: &str) -> String {
    p.labels().get(key).cloned().unwrap_or_default()
}

fn revision(p: &Pod) -> String {
    label(p, "controller-revision-hash")
}

fn image(p: &Pod) -> String {
    p.spec.as_ref().unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default()
}

fn restart_count(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map_or(-1, |c| c.restart_count)
}

fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter().map(|p| p.name_any()).collect()
}

fn uids(pods: &[Pod]) -> BTreeMap<String, String> {
    pods.iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect()
}

fn ordinal_names(set: &str, ordinals: &[i32]) -> Vec<String> {
    let mut v: Vec<String> = ordinals.iter().map(|o| format!("{set}-{o}")).collect();
    v.sort();
    v
}

/// Live (not terminating) Pods with `app=<app>`, sorted by name.
async fn pods_of(ns: &TestNamespace, app: &str) -> Vec<Pod> {
    kruise_e2e::pods_with(ns, &format!("app={app}")).await
}

/// Waits until exactly the named Pods exist (none terminating) and all are Ready.
async fn wait_ready_pods(ns: &TestNamespace, app: &str, want: &[String]) -> Vec<Pod> {
    wait_for(&format!("ready pods {want:?}"), MINUTE, || async {
        let api: Api<Pod> = ns.api();
        let all = api
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await
            .map_err(|e| e.to_string())?
            .items;
        let terminating = all
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .count();
        let pods = pods_of(ns, app).await;
        let ready = pods.iter().filter(|p| is_ready(p)).count();
        if names(&pods) == want && ready == want.len() && terminating == 0 {
            Ok(pods)
        } else {
            Err(format!(
                "pods {:?}, {ready} ready, {terminating} terminating",
                names(&pods)
            ))
        }
    })
    .await
}

async fn sts(ns: &TestNamespace, name: &str) -> StatefulSet {
    ns.api::<StatefulSet>()
        .get(name)
        .await
        .expect("get statefulset")
}

/// Waits until the controller has observed the latest spec and `check` holds.
async fn wait_status(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    check: impl Fn(&StatefulSet) -> bool,
) -> StatefulSet {
    kruise_e2e::wait_observed(what, || sts(ns, name), |s| s.observed_generation, check).await
}

async fn patch_sts(ns: &TestNamespace, name: &str, patch: serde_json::Value) {
    ns.api::<StatefulSet>()
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .expect("patch statefulset");
}

/// Changes the container's image only (a JSON patch keeps the rest of the container).
async fn set_image(ns: &TestNamespace, name: &str, image: &str) {
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image}
    ]))
    .unwrap();
    ns.api::<StatefulSet>()
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .expect("set image");
}

/// Waits until the controller reports all `n` Pods ready and available (so its cache
/// has them healthy: a rollout then starts from a clean slate); returns the revision.
async fn settled(ns: &TestNamespace, name: &str, n: i32) -> String {
    wait_status(ns, name, &format!("{n} ready and available"), |s| {
        s.status.as_ref().is_some_and(|st| {
            st.replicas == n
                && st.ready_replicas == n
                && st.available_replicas == n
                && st.current_revision == st.update_revision
        })
    })
    .await
    .status
    .map(|s| s.update_revision)
    .unwrap_or_default()
}

/// Sets the image and waits until the controller has computed the new update revision.
async fn roll_to(ns: &TestNamespace, name: &str, image: &str, old_revision: &str) -> String {
    set_image(ns, name, image).await;
    let s = wait_status(ns, name, "a new update revision", |s| {
        s.status
            .as_ref()
            .is_some_and(|st| !st.update_revision.is_empty() && st.update_revision != old_revision)
    })
    .await;
    s.status.unwrap().update_revision
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct EventSeen {
    type_: String,
    reason: String,
    note: String,
    reporter: String,
}

/// Events about the object `name` in the namespace.
async fn events_of(ns: &TestNamespace, name: &str) -> Vec<EventSeen> {
    let events: Api<Event> = ns.api();
    events
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| EventSeen {
            type_: e.type_.unwrap_or_default(),
            reason: e.reason.unwrap_or_default(),
            note: e.note.unwrap_or_default(),
            reporter: e.reporting_controller.unwrap_or_default(),
        })
        .collect()
}

/// Waits for an event `reason` / `note` about `name` and checks its type and reporter.
async fn wait_event(ns: &TestNamespace, name: &str, type_: &str, reason: &str, note: &str) {
    let event = wait_for(&format!("event {reason} \"{note}\""), MINUTE, || async {
        let events = events_of(ns, name).await;
        events
            .iter()
            .find(|e| e.reason == reason && e.note == note)
            .cloned()
            .ok_or_else(|| format!("{events:?}"))
    })
    .await;
    assert_eq!(
        (event.type_.as_str(), event.reporter.as_str()),
        (type_, "statefulset-controller"),
        "{event:?}"
    );
}

async fn kubectl(args: &[&str]) -> (bool, String, String) {
    kubectl_async(args.iter().map(|a| a.to_string()).collect(), None).await
}

/// `kubectl get asts <name>`: the header and the row, split on whitespace.
async fn get_asts(ns: &TestNamespace, name: &str, wide: bool) -> (Vec<String>, Vec<String>) {
    let mut args = vec!["get", "asts", name, "-n", &ns.name];
    if wide {
        args.extend(["-o", "wide"]);
    }
    let (ok, out, err) = kubectl(&args).await;
    assert!(ok, "kubectl get asts: {err}");
    let mut lines = out.lines();
    let split = |l: Option<&str>| -> Vec<String> {
        l.unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    (split(lines.next()), split(lines.next()))
}

async fn pvc(ns: &TestNamespace, name: &str) -> Option<PersistentVolumeClaim> {
    ns.api::<PersistentVolumeClaim>()
        .get_opt(name)
        .await
        .expect("get pvc")
}

fn claim_of(pod: &Pod, volume: &str) -> Option<String> {
    pod.spec
        .as_ref()?
        .volumes
        .as_ref()?
        .iter()
        .find(|v| v.name == volume)?
        .persistent_volume_claim
        .as_ref()
        .map(|c| c.claim_name.clone())
}

// ---------------------------------------------------------------------------------------
// A record of every state the Pods of a set went through.

/// What matters of one Pod at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    uid: String,
    ready: bool,
    terminating: bool,
    /// The `InPlaceUpdateReady` condition is not False (an in-place update is not under
    /// way).
    in_place_ready: bool,
    revision: String,
}

impl Seen {
    fn of(p: &Pod) -> Self {
        let condition = |t: &str| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == t))
                .map(|c| c.status.clone())
        };
        Seen {
            uid: p.uid().unwrap_or_default(),
            ready: condition("Ready").as_deref() == Some("True"),
            terminating: p.metadata.deletion_timestamp.is_some(),
            in_place_ready: condition("InPlaceUpdateReady").as_deref() != Some("False"),
            revision: revision(p),
        }
    }

    /// Serving: Ready, not terminating, not in the middle of an in-place update.
    fn available(&self) -> bool {
        self.ready && !self.terminating && self.in_place_ready
    }
}

type Snapshot = BTreeMap<String, Seen>;

fn describe(s: &Snapshot) -> String {
    s.iter()
        .map(|(n, p)| {
            let mut flags = Vec::new();
            if !p.ready {
                flags.push("not-ready");
            }
            if p.terminating {
                flags.push("terminating");
            }
            if !p.in_place_ready {
                flags.push("in-place-updating");
            }
            let uid: String = p.uid.chars().take(8).collect();
            format!("{n}[{uid} {} {}]", p.revision, flags.join(","))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every distinct state of the Pods labelled `app=<app>`, in the order the apiserver
/// committed them (one watch).
struct Timeline {
    snapshots: Arc<Mutex<Vec<Snapshot>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Timeline {
    /// Starts watching and returns once the initial list is recorded.
    async fn start(ns: &TestNamespace, app: &str) -> Self {
        use futures::StreamExt;
        use kube::runtime::WatchStreamExt;
        use kube::runtime::watcher::{self, Event as W};
        let snapshots = Arc::new(Mutex::new(Vec::<Snapshot>::new()));
        let api: Api<Pod> = ns.api();
        let config = watcher::Config::default().labels(&format!("app={app}"));
        let (synced_tx, synced_rx) = tokio::sync::oneshot::channel();
        let record = snapshots.clone();
        let task = tokio::spawn(async move {
            let mut synced = Some(synced_tx);
            let mut live = Snapshot::new();
            let mut init = Snapshot::new();
            let mut events = std::pin::pin!(watcher::watcher(api, config).default_backoff());
            while let Some(event) = events.next().await {
                let Ok(event) = event else { continue };
                match &event {
                    W::Init => {
                        init.clear();
                        continue;
                    }
                    W::InitApply(p) => {
                        init.insert(p.name_any(), Seen::of(p));
                        continue;
                    }
                    W::InitDone => live = std::mem::take(&mut init),
                    W::Apply(p) => {
                        live.insert(p.name_any(), Seen::of(p));
                    }
                    W::Delete(p) => {
                        live.remove(&p.name_any());
                    }
                }
                {
                    let mut all = record.lock().unwrap();
                    if all.last() != Some(&live) {
                        all.push(live.clone());
                    }
                }
                if matches!(event, W::InitDone)
                    && let Some(tx) = synced.take()
                {
                    let _ = tx.send(());
                }
            }
        });
        tokio::time::timeout(MINUTE, synced_rx)
            .await
            .expect("the pod watch to list")
            .expect("the pod watch");
        Timeline { snapshots, task }
    }

    fn snapshots(&self) -> Vec<Snapshot> {
        self.snapshots.lock().unwrap().clone()
    }

    /// The most Pods short of `replicas` available at any moment, and that moment.
    fn max_unavailable(&self, replicas: usize) -> (usize, String) {
        self.snapshots()
            .iter()
            .map(|s| {
                let available = s.values().filter(|p| p.available()).count();
                (replicas.saturating_sub(available), describe(s))
            })
            .max_by_key(|(n, _)| *n)
            .unwrap_or_default()
    }

    /// The most Pods present but not available at any moment, and that moment.
    fn max_not_available(&self) -> (usize, String) {
        self.snapshots()
            .iter()
            .map(|s| (s.values().filter(|p| !p.available()).count(), describe(s)))
            .max_by_key(|(n, _)| *n)
            .unwrap_or_default()
    }

    /// When each Pod of the first snapshot that is not at `new_revision` began its
    /// update: the first snapshot where it is gone, terminating, replaced, at the new
    /// revision or in the middle of an in-place update. Sorted by that moment; Pods
    /// never touched last (index `usize::MAX`).
    fn update_starts(&self, new_revision: &str) -> Vec<(String, usize)> {
        let snapshots = self.snapshots();
        let Some(first) = snapshots.first() else {
            return Vec::new();
        };
        let mut starts: Vec<(String, usize)> = first
            .iter()
            .filter(|(_, p)| p.revision != new_revision)
            .map(|(name, before)| {
                let at = snapshots
                    .iter()
                    .position(|s| match s.get(name) {
                        None => true,
                        Some(p) => {
                            p.uid != before.uid
                                || p.terminating
                                || p.revision == new_revision
                                || !p.in_place_ready
                        }
                    })
                    .unwrap_or(usize::MAX);
                (name.clone(), at)
            })
            .collect();
        starts.sort_by_key(|(n, at)| (*at, n.clone()));
        starts
    }

    fn dump(&self) -> String {
        self.snapshots()
            .iter()
            .enumerate()
            .map(|(i, s)| format!("  {i:3}: {}", describe(s)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Timeline {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------
// Migration from apps/v1.

/// An `apps/v1` StatefulSet manifest with only `apiVersion` changed.
fn native_manifest(api_version: &str, name: &str, replicas: i32) -> String {
    format!(
        r#"apiVersion: {api_version}
kind: StatefulSet
metadata:
  name: {name}
spec:
  serviceName: {name}
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
        ports:
        - containerPort: 80
          name: web
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_from_apps_v1_keeps_defaults_and_ordered_ready_creation() {
    let ns = TestNamespace::new("asts-migrate").await;
    let _ctl = controller(&ns).await;
    let timeline = Timeline::start(&ns, "sample").await;
    ns.apply(&native_manifest("apps.kruise.io/v1beta1", "sample", 3))
        .await
        .expect("an apps/v1 manifest is a valid Advanced StatefulSet");

    // The stored defaults are apps/v1's.
    let stored = sts(&ns, "sample").await;
    let spec = &stored.spec;
    assert_eq!(
        spec.pod_management_policy,
        Some(PodManagementPolicyType::OrderedReady)
    );
    assert_eq!(
        spec.update_strategy.type_,
        Some(StatefulSetUpdateStrategyType::RollingUpdate)
    );
    let rolling = spec
        .update_strategy
        .rolling_update
        .as_ref()
        .expect("rollingUpdate defaulted");
    assert_eq!(rolling.partition, Some(0));
    assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(1)));
    assert_eq!(
        rolling.pod_update_policy,
        Some(PodUpdateStrategyType::ReCreate)
    );
    assert_eq!(spec.revision_history_limit, Some(10));
    let retention = spec
        .persistent_volume_claim_retention_policy
        .as_ref()
        .expect("retention policy defaulted");
    assert_eq!(
        (retention.when_deleted, retention.when_scaled),
        (
            Some(PersistentVolumeClaimRetentionPolicyType::Retain),
            Some(PersistentVolumeClaimRetentionPolicyType::Retain)
        )
    );

    let want = ordinal_names("sample", &[0, 1, 2]);
    let pods = wait_ready_pods(&ns, "sample", &want).await;

    // OrderedReady: a Pod is created only once every lower ordinal is Ready, so never
    // more than one Pod is not ready.
    let snapshots = timeline.snapshots();
    for (i, name) in want.iter().enumerate().skip(1) {
        let first = snapshots
            .iter()
            .find(|s| s.contains_key(name))
            .unwrap_or_else(|| panic!("{name} never seen:\n{}", timeline.dump()));
        for lower in &want[..i] {
            assert!(
                first.get(lower).is_some_and(Seen::available),
                "{name} created before {lower} was Ready: {}\n{}",
                describe(first),
                timeline.dump()
            );
        }
    }
    let (worst, at) = timeline.max_not_available();
    assert!(worst <= 1, "{worst} Pods not ready at once: {at}");

    // Status.
    let set = wait_status(&ns, "sample", "status 3/3", |s| {
        s.status.as_ref().is_some_and(|st| {
            st.ready_replicas == 3 && st.updated_replicas == 3 && st.current_replicas == 3
        })
    })
    .await;
    let status = set.status.clone().unwrap();
    assert_eq!(
        (status.replicas, status.available_replicas),
        (3, 3),
        "{status:?}"
    );
    assert!(status.update_revision.starts_with("sample-"), "{status:?}");
    assert_eq!(status.current_revision, status.update_revision);
    assert_eq!(status.label_selector, "app=sample");
    let revisions: Api<ControllerRevision> = ns.api();
    let rev = revisions
        .get(&status.update_revision)
        .await
        .expect("the update revision is a ControllerRevision");
    assert_eq!(rev.owner_references()[0].uid, set.uid().unwrap());

    // Pod identity.
    for (ordinal, pod) in pods.iter().enumerate() {
        let name = pod.name_any();
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some(name.as_str()));
        assert_eq!(spec.subdomain.as_deref(), Some("sample"));
        assert_eq!(label(pod, "statefulset.kubernetes.io/pod-name"), name);
        assert_eq!(
            label(pod, "apps.kubernetes.io/pod-index"),
            ordinal.to_string()
        );
        assert_eq!(revision(pod), status.update_revision);
        let owner = &pod.owner_references()[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.uid.as_str(),
                owner.controller
            ),
            (
                "apps.kruise.io/v1beta1",
                "StatefulSet",
                set.uid().unwrap().as_str(),
                Some(true)
            )
        );
    }

    // Events, as `kubectl describe asts sample` lists them.
    for name in &want {
        wait_event(
            &ns,
            "sample",
            "Normal",
            "SuccessfulCreate",
            &format!("create Pod {name} in StatefulSet sample successful"),
        )
        .await;
    }

    // kubectl shows the upstream columns.
    let (header, row) = get_asts(&ns, "sample", false).await;
    assert_eq!(
        header,
        ["NAME", "DESIRED", "CURRENT", "UPDATED", "READY", "AGE"]
    );
    assert_eq!(&row[..5], ["sample", "3", "3", "3", "3"], "{row:?}");
    let (header, row) = get_asts(&ns, "sample", true).await;
    assert_eq!(
        &header[5..],
        ["AGE", "CONTAINERS", "IMAGES"],
        "wide adds containers and images"
    );
    assert_eq!(&row[6..], ["nginx", "nginx:alpine"], "{row:?}");

    // Scale in like a native StatefulSet: highest ordinal first, one at a time.
    let scale_in = Timeline::start(&ns, "sample").await;
    patch_sts(&ns, "sample", json!({"spec": {"replicas": 1}})).await;
    wait_ready_pods(&ns, "sample", &ordinal_names("sample", &[0])).await;
    let gone = |name: &str| {
        scale_in
            .snapshots()
            .iter()
            .position(|s| s.get(name).is_none_or(|p| p.terminating))
            .unwrap_or(usize::MAX)
    };
    assert!(
        gone("sample-2") < gone("sample-1"),
        "sample-2 goes before sample-1:\n{}",
        scale_in.dump()
    );
    let sample_2_done = scale_in
        .snapshots()
        .iter()
        .position(|s| !s.contains_key("sample-2"))
        .unwrap();
    assert!(
        gone("sample-1") > sample_2_done,
        "sample-1 is deleted only once sample-2 is gone:\n{}",
        scale_in.dump()
    );
    wait_event(
        &ns,
        "sample",
        "Normal",
        "SuccessfulDelete",
        "delete Pod sample-2 in StatefulSet sample successful",
    )
    .await;
}

/// "Changing only `apiVersion` must give identical defaults": the stored Pod template
/// and the spec-level native defaults are what the apiserver stores for `apps/v1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migration_stores_the_same_template_defaults_as_apps_v1() {
    let ns = TestNamespace::new("asts-native").await;
    let _ctl = controller(&ns).await;
    let (ok, native, err) = kubectl_async(
        vec![
            "create".into(),
            "--dry-run=server".into(),
            "-o".into(),
            "json".into(),
            "-n".into(),
            ns.name.clone(),
            "-f".into(),
            "-".into(),
        ],
        Some(native_manifest("apps/v1", "sample", 2)),
    )
    .await;
    assert!(ok, "native dry run: {err}");
    let native: serde_json::Value = serde_json::from_str(&native).unwrap();
    ns.apply(&native_manifest("apps.kruise.io/v1beta1", "sample", 2))
        .await
        .unwrap();
    let (ok, advanced, err) =
        kubectl(&["get", "asts", "sample", "-n", &ns.name, "-o", "json"]).await;
    assert!(ok, "{err}");
    let advanced: serde_json::Value = serde_json::from_str(&advanced).unwrap();
    // The apps/v1 Go types also write empty structs (`resources: {}`,
    // `creationTimestamp: null`), which mean nothing: compare without them.
    assert_eq!(
        meaningful(&advanced["spec"]["template"]),
        meaningful(&native["spec"]["template"]),
        "the Pod template gets the same defaults"
    );
    for field in [
        "podManagementPolicy",
        "revisionHistoryLimit",
        "persistentVolumeClaimRetentionPolicy",
        "replicas",
    ] {
        assert_eq!(advanced["spec"][field], native["spec"][field], "{field}");
    }
    assert_eq!(
        advanced["spec"]["updateStrategy"]["type"],
        native["spec"]["updateStrategy"]["type"]
    );
    assert_eq!(
        advanced["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
        native["spec"]["updateStrategy"]["rollingUpdate"]["partition"]
    );
}

/// `v` without nulls and empty objects, which stand for unset fields.
fn meaningful(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), meaningful(v)))
                .filter(|(_, v)| {
                    !v.is_null() && !v.as_object().is_some_and(serde_json::Map::is_empty)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(meaningful).collect()),
        other => other.clone(),
    }
}

// ---------------------------------------------------------------------------------------
// The `web` set of examples/advanced-statefulset-web.yaml.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_parallel_recreate_update_three_at_a_time_highest_ordinal_first() {
    let ns = TestNamespace::new("asts-web").await;
    let _ctl = controller(&ns).await;
    ns.apply(&sts_yaml(
        "web",
        5,
        &Extra {
            spec: PARALLEL_MAX_UNAVAILABLE_3,
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    let want = ordinal_names("web", &[0, 1, 2, 3, 4]);
    let before = wait_ready_pods(&ns, "web", &want).await;
    let old_revision = settled(&ns, "web", 5).await;
    let (header, row) = get_asts(&ns, "web", false).await;
    assert_eq!(
        header,
        ["NAME", "DESIRED", "CURRENT", "UPDATED", "READY", "AGE"]
    );
    assert_eq!(&row[..5], ["web", "5", "5", "5", "5"], "{row:?}");

    let timeline = Timeline::start(&ns, "web").await;
    let new_revision = roll_to(&ns, "web", "nginx:mainline", &old_revision).await;
    let set = wait_status(&ns, "web", "all 5 updated", |s| {
        s.status.as_ref().is_some_and(|st| {
            st.updated_replicas == 5
                && st.ready_replicas == 5
                && st.current_revision == st.update_revision
        })
    })
    .await;
    let after = wait_ready_pods(&ns, "web", &want).await;
    assert_eq!(set.status.as_ref().unwrap().update_revision, new_revision);

    // ReCreate: same names, new Pods, all at the new revision and image.
    for (b, a) in before.iter().zip(&after) {
        assert_ne!(b.uid(), a.uid(), "{} recreated", a.name_any());
        assert_eq!(revision(a), new_revision);
        assert_eq!(image(a), "nginx:mainline");
    }
    // Never more than maxUnavailable down, and three at once at the start.
    let (worst, at) = timeline.max_unavailable(5);
    assert!(
        worst <= 3,
        "{worst} unavailable at once: {at}\n{}",
        timeline.dump()
    );
    assert_eq!(
        worst,
        3,
        "web-4, web-3, web-2 together:\n{}",
        timeline.dump()
    );
    // Highest ordinals first.
    let order = timeline.update_starts(&new_revision);
    let first: BTreeSet<&str> = order[..3].iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        first,
        BTreeSet::from(["web-2", "web-3", "web-4"]),
        "{order:?}\n{}",
        timeline.dump()
    );
    assert!(order.iter().all(|(_, at)| *at != usize::MAX), "{order:?}");
    // Every Pod's deletion and creation is reported.
    for name in &want {
        wait_event(
            &ns,
            "web",
            "Normal",
            "SuccessfulDelete",
            &format!("delete Pod {name} in StatefulSet web successful"),
        )
        .await;
    }
    let (_, row) = get_asts(&ns, "web", false).await;
    assert_eq!(&row[..5], ["web", "5", "5", "5", "5"], "{row:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_in_place_update_keeps_uids_three_at_a_time() {
    let ns = TestNamespace::new("asts-inplace").await;
    let _ctl = controller(&ns).await;
    ns.apply(&sts_yaml(
        "web",
        5,
        &Extra {
            spec: PARALLEL_MAX_UNAVAILABLE_3_IN_PLACE,
            pod: IN_PLACE_READINESS_GATE,
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    let want = ordinal_names("web", &[0, 1, 2, 3, 4]);
    let before = wait_ready_pods(&ns, "web", &want).await;
    let old_revision = settled(&ns, "web", 5).await;

    let timeline = Timeline::start(&ns, "web").await;
    let new_revision = roll_to(&ns, "web", "nginx:mainline", &old_revision).await;
    wait_status(&ns, "web", "all 5 updated in place", |s| {
        s.status.as_ref().is_some_and(|st| {
            st.updated_replicas == 5
                && st.updated_ready_replicas == 5
                && st.ready_replicas == 5
                && st.current_revision == st.update_revision
        })
    })
    .await;
    let after = wait_ready_pods(&ns, "web", &want).await;
    assert_eq!(uids(&before), uids(&after), "same Pods: updated in place");
    for pod in &after {
        assert_eq!(image(pod), "nginx:mainline");
        assert_eq!(revision(pod), new_revision);
        assert_eq!(
            restart_count(pod),
            1,
            "{}: the container restarted once",
            pod.name_any()
        );
    }
    let snapshots = timeline.snapshots();
    assert!(
        snapshots.iter().all(|s| s.len() == 5
            && s.iter()
                .all(|(n, p)| !p.terminating && uids(&before)[n] == p.uid)),
        "no Pod deleted or replaced:\n{}",
        timeline.dump()
    );
    let (worst, at) = timeline.max_unavailable(5);
    assert!(
        worst <= 3,
        "{worst} unavailable at once: {at}\n{}",
        timeline.dump()
    );
    assert_eq!(
        worst,
        3,
        "web-4, web-3, web-2 together:\n{}",
        timeline.dump()
    );
    let order = timeline.update_starts(&new_revision);
    let first: BTreeSet<&str> = order[..3].iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        first,
        BTreeSet::from(["web-2", "web-3", "web-4"]),
        "{order:?}\n{}",
        timeline.dump()
    );
    for name in &want {
        wait_event(
            &ns,
            "web",
            "Normal",
            "SuccessfulUpdatePodInPlace",
            &format!("successfully update pod {name} in-place(revision {new_revision})"),
        )
        .await;
    }
}

// Partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_partition_four_updates_only_web_4_then_zero_updates_the_rest() {
    let ns = TestNamespace::new("asts-partition").await;
    let _ctl = controller(&ns).await;
    ns.apply(&sts_yaml(
        "web",
        5,
        &Extra {
            spec: &format!("{PARALLEL_MAX_UNAVAILABLE_3}    partition: 4\n"),
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    let want = ordinal_names("web", &[0, 1, 2, 3, 4]);
    let before = wait_ready_pods(&ns, "web", &want).await;
    let old_revision = settled(&ns, "web", 5).await;
    let new_revision = roll_to(&ns, "web", "nginx:mainline", &old_revision).await;
    let set = wait_status(&ns, "web", "web-4 updated", |s| {
        s.status.as_ref().is_some_and(|st| {
            st.updated_replicas == 1 && st.updated_ready_replicas == 1 && st.ready_replicas == 5
        })
    })
    .await;
    assert_eq!(
        set.status.unwrap().current_revision,
        old_revision,
        "partition holds the current revision"
    );
    // It stays that way, although maxUnavailable would allow two more.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pods = wait_ready_pods(&ns, "web", &want).await;
    let at_new: Vec<String> = pods
        .iter()
        .filter(|p| revision(p) == new_revision)
        .map(|p| p.name_any())
        .collect();
    assert_eq!(at_new, ["web-4"]);
    for (b, a) in before.iter().zip(&pods).take(4) {
        assert_eq!(b.uid(), a.uid(), "{} untouched", a.name_any());
        assert_eq!(revision(a), old_revision);
    }

    // Release: web-3, web-2, web-1 together, web-0 after one of them is done.
    let timeline = Timeline::start(&ns, "web").await;
    patch_sts(
        &ns,
        "web",
        json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}),
    )
    .await;
    wait_status(&ns, "web", "all 5 updated", |s| {
        s.status.as_ref().is_some_and(|st| {
            st.updated_replicas == 5
                && st.ready_replicas == 5
                && st.current_revision == st.update_revision
        })
    })
    .await;
    let after = wait_ready_pods(&ns, "web", &want).await;
    assert!(after.iter().all(|p| revision(p) == new_revision));
    assert_eq!(after[4].uid(), pods[4].uid(), "web-4 was already updated");
    let (worst, at) = timeline.max_unavailable(5);
    assert!(
        worst <= 3,
        "{worst} unavailable at once: {at}\n{}",
        timeline.dump()
    );
    assert_eq!(
        worst,
        3,
        "web-3, web-2, web-1 together:\n{}",
        timeline.dump()
    );
    let order = timeline.update_starts(&new_revision);
    let names: Vec<&str> = order.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.len(), 4, "{order:?}");
    assert_eq!(
        names[..3].iter().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from(["web-1", "web-2", "web-3"]),
        "{order:?}\n{}",
        timeline.dump()
    );
    assert_eq!(names[3], "web-0");
}

// reserveOrdinals (examples/advanced-statefulset-reserve-ordinals.yaml).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserve_ordinals_skip_and_move_pods() {
    let ns = TestNamespace::new("asts-reserve").await;
    let _ctl = controller(&ns).await;
    ns.apply(&sts_yaml(
        "r",
        4,
        &Extra {
            spec: "podManagementPolicy: Parallel\nreserveOrdinals:\n- 1\n",
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    let pods = wait_ready_pods(&ns, "r", &ordinal_names("r", &[0, 2, 3, 4])).await;
    let first = uids(&pods);
    for p in &pods {
        let ordinal = p.name_any().rsplit('-').next().unwrap().to_string();
        assert_eq!(label(p, "apps.kubernetes.io/pod-index"), ordinal);
    }

    // Reserving 3 with replicas unchanged: Pod 3 goes, Pod 5 comes.
    patch_sts(&ns, "r", json!({"spec": {"reserveOrdinals": [1, 3]}})).await;
    let pods = wait_ready_pods(&ns, "r", &ordinal_names("r", &[0, 2, 4, 5])).await;
    let second = uids(&pods);
    for name in ["r-0", "r-2", "r-4"] {
        assert_eq!(first[name], second[name], "{name} untouched");
    }
    wait_event(
        &ns,
        "r",
        "Normal",
        "SuccessfulDelete",
        "delete Pod r-3 in StatefulSet r successful",
    )
    .await;
    wait_event(
        &ns,
        "r",
        "Normal",
        "SuccessfulCreate",
        "create Pod r-5 in StatefulSet r successful",
    )
    .await;

    // Reserving 4 (as a range) and lowering replicas: only Pod 4 goes.
    patch_sts(
        &ns,
        "r",
        json!({"spec": {"replicas": 3, "reserveOrdinals": [1, "3-4"]}}),
    )
    .await;
    let pods = wait_ready_pods(&ns, "r", &ordinal_names("r", &[0, 2, 5])).await;
    let third = uids(&pods);
    for name in ["r-0", "r-2", "r-5"] {
        assert_eq!(second[name], third[name], "{name} untouched");
    }
    let set = wait_status(&ns, "r", "3 replicas", |s| {
        s.status
            .as_ref()
            .is_some_and(|st| st.replicas == 3 && st.ready_replicas == 3)
    })
    .await;
    assert_eq!(set.status.unwrap().updated_replicas, 3);
}

// The scale budget of examples/advanced-statefulset-scale-budget.yaml (with 6 replicas and a
// budget of 2 instead of 100 and 10%).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_out_budget_never_more_than_max_unavailable_not_ready() {
    let ns = TestNamespace::new("asts-scalebudget").await;
    let _ctl = controller(&ns).await;
    ns.apply(&sts_yaml(
        "sb",
        0,
        &Extra {
            spec: "podManagementPolicy: Parallel\nscaleStrategy:\n  maxUnavailable: 2\n",
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    wait_status(&ns, "sb", "observed", |_| true).await;
    let timeline = Timeline::start(&ns, "sb").await;
    // Through the scale subresource, as `kubectl scale` does.
    let (ok, _, err) = kubectl(&["scale", "asts/sb", "--replicas=6", "-n", &ns.name]).await;
    assert!(ok, "kubectl scale: {err}");
    wait_ready_pods(&ns, "sb", &ordinal_names("sb", &[0, 1, 2, 3, 4, 5])).await;
    let (worst, at) = timeline.max_not_available();
    assert!(
        worst <= 2,
        "{worst} Pods not ready at once: {at}\n{}",
        timeline.dump()
    );
    wait_status(&ns, "sb", "6 ready", |s| {
        s.status
            .as_ref()
            .is_some_and(|st| st.replicas == 6 && st.ready_replicas == 6)
    })
    .await;
}

/// The scale-out budget counts Pods that are Ready but not yet available for
/// `minReadySeconds`: with 2 s and a budget of 2, the third Pod comes at
/// least 2 s after the first, the fifth at least 2 s after the third.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_out_budget_waits_for_min_ready_seconds() {
    let ns = TestNamespace::new("asts-scaleminready").await;
    let _ctl = controller(&ns).await;
    ns.apply(&sts_yaml(
        "sm",
        0,
        &Extra {
            spec: "podManagementPolicy: Parallel\nscaleStrategy:\n  maxUnavailable: 2\nupdateStrategy:\n  rollingUpdate:\n    minReadySeconds: 2\n",
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    wait_status(&ns, "sm", "observed", |_| true).await;
    patch_sts(&ns, "sm", json!({"spec": {"replicas": 6}})).await;
    let pods = wait_ready_pods(&ns, "sm", &ordinal_names("sm", &[0, 1, 2, 3, 4, 5])).await;
    let mut created: Vec<(jiff::Timestamp, String)> = pods
        .iter()
        .map(|p| (p.creation_timestamp().unwrap().0, p.name_any()))
        .collect();
    created.sort();
    for (earlier, later) in [(0, 2), (2, 4)] {
        let gap = created[later].0.duration_since(created[earlier].0);
        assert!(
            gap.as_secs() >= 2,
            "{} created {gap:?} after {}; the budget frees up only after minReadySeconds 2: {created:?}",
            created[later].1,
            created[earlier].1
        );
    }
}

// Admission rejections.
/// Applying a set `name` with `spec` is refused with every one of `expected` in the message.
async fn rejected(ns: &TestNamespace, name: &str, spec: &str, expected: &[&str]) {
    let err = ns
        .apply(&sts_yaml(
            name,
            2,
            &Extra {
                spec,
                ..Default::default()
            },
        ))
        .await
        .expect_err(name);
    assert!(expected.iter().all(|e| err.contains(e)), "{name}: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_rejects_what_needs_parallel_or_the_readiness_gate() {
    let ns = TestNamespace::new("asts-admission").await;
    let _ctl = controller(&ns).await;
    rejected(
        &ns,
        "bad-mu",
        "podManagementPolicy: OrderedReady\nupdateStrategy:\n  rollingUpdate:\n    maxUnavailable: 3\n",
        &[
            "spec.updateStrategy.rollingUpdate.maxUnavailable",
            "can only work with Parallel PodManagementPolicyType",
        ],
    )
    .await;
    rejected(
        &ns,
        "bad-scale",
        "scaleStrategy:\n  maxUnavailable: 2\n",
        &[
            "spec.scaleStrategy.maxUnavailable",
            "can only work with Parallel PodManagementPolicyType",
        ],
    )
    .await;
    rejected(
        &ns,
        "bad-gate",
        PARALLEL_MAX_UNAVAILABLE_3_IN_PLACE,
        &[
            "spec.template.spec.readinessGates",
            "must contains InPlaceUpdateReady when podUpdatePolicy is InPlaceIfPossible",
        ],
    )
    .await;
    for name in ["bad-mu", "bad-scale", "bad-gate"] {
        assert!(
            ns.api::<StatefulSet>()
                .get_opt(name)
                .await
                .unwrap()
                .is_none(),
            "{name} must not be stored"
        );
    }
    // The same with the gate is fine.
    ns.apply(&sts_yaml(
        "good-gate",
        0,
        &Extra {
            spec: PARALLEL_MAX_UNAVAILABLE_3_IN_PLACE,
            pod: IN_PLACE_READINESS_GATE,
            ..Default::default()
        },
    ))
    .await
    .expect("InPlaceIfPossible with the readiness gate");
    // Deletion protection is protection-ctl's: tests/e2e/tests/protection.rs.
}

// Claim templates and the PVC retention policy.
const DATA_CLAIM: &str = "
volumeClaimTemplates:
- metadata:
    name: data
  spec:
    accessModes: [ReadWriteOnce]
    resources:
      requests:
        storage: 1Gi
";

const DATA_MOUNT: &str = "
volumeMounts:
- name: data
  mountPath: /data
";

async fn live_pvc_uid(ns: &TestNamespace, name: &str) -> Option<String> {
    pvc(ns, name)
        .await
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .and_then(|c| c.uid())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pvc_per_ordinal_is_kept_for_a_recreated_pod_and_retained_on_scale_in() {
    let ns = TestNamespace::new("asts-pvc").await;
    let _ctl = controller(&ns).await;
    ns.apply(&sts_yaml(
        "db",
        3,
        &Extra {
            spec: &format!("podManagementPolicy: Parallel\n{DATA_CLAIM}"),
            container: DATA_MOUNT,
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    let pods = wait_ready_pods(&ns, "db", &ordinal_names("db", &[0, 1, 2])).await;
    let mut claim_uids = BTreeMap::new();
    for (i, pod) in pods.iter().enumerate() {
        let claim = format!("data-db-{i}");
        assert_eq!(claim_of(pod, "data").as_deref(), Some(claim.as_str()));
        let c = pvc(&ns, &claim).await.expect("a PVC per ordinal");
        assert_eq!(c.labels().get("app").map(String::as_str), Some("db"));
        assert!(
            c.owner_references().is_empty(),
            "Retain: {claim} belongs to nobody: {:?}",
            c.owner_references()
        );
        claim_uids.insert(claim.clone(), c.uid().unwrap());
        wait_event(
            &ns,
            "db",
            "Normal",
            "SuccessfulCreate",
            &format!("create Claim {claim} Pod db-{i} in StatefulSet db success"),
        )
        .await;
    }

    // Delete db-0 from outside: it comes back with the same claim.
    let victim = pods[0].clone();
    ns.api::<Pod>()
        .delete("db-0", &DeleteParams::default())
        .await
        .unwrap();
    let replaced = wait_for("db-0 recreated and ready", MINUTE, || async {
        let pods = pods_of(&ns, "db").await;
        match pods.iter().find(|p| p.name_any() == "db-0") {
            Some(p) if p.uid() != victim.uid() && pods.len() == 3 && pods.iter().all(is_ready) => {
                Ok(p.clone())
            }
            _ => Err(format!("{:?}", names(&pods))),
        }
    })
    .await;
    assert_eq!(claim_of(&replaced, "data").as_deref(), Some("data-db-0"));
    assert_eq!(
        live_pvc_uid(&ns, "data-db-0").await.as_ref(),
        Some(&claim_uids["data-db-0"]),
        "the same PVC, not a new one"
    );

    // Scale in: the claims of 1 and 2 stay (whenScaled: Retain by default)...
    patch_sts(&ns, "db", json!({"spec": {"replicas": 1}})).await;
    wait_ready_pods(&ns, "db", &ordinal_names("db", &[0])).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    for claim in ["data-db-1", "data-db-2"] {
        assert_eq!(
            live_pvc_uid(&ns, claim).await.as_ref(),
            Some(&claim_uids[claim]),
            "{claim} retained"
        );
    }
    // ...and are used again on scale-out.
    patch_sts(&ns, "db", json!({"spec": {"replicas": 3}})).await;
    let pods = wait_ready_pods(&ns, "db", &ordinal_names("db", &[0, 1, 2])).await;
    for (i, pod) in pods.iter().enumerate() {
        let claim = format!("data-db-{i}");
        assert_eq!(claim_of(pod, "data").as_ref(), Some(&claim));
        assert_eq!(
            live_pvc_uid(&ns, &claim).await.as_ref(),
            Some(&claim_uids[&claim]),
            "{claim} re-bound"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pvc_when_scaled_delete_removes_claims_of_scaled_in_pods() {
    let ns = TestNamespace::new("asts-pvcdel").await;
    let _ctl = controller(&ns).await;
    ns.apply(&sts_yaml(
        "db",
        3,
        &Extra {
            spec: &format!(
                "podManagementPolicy: Parallel\npersistentVolumeClaimRetentionPolicy:\n  whenScaled: Delete\n{DATA_CLAIM}"
            ),
            container: DATA_MOUNT,
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    wait_ready_pods(&ns, "db", &ordinal_names("db", &[0, 1, 2])).await;
    let mut claim_uids = BTreeMap::new();
    for i in 0..3 {
        let claim = format!("data-db-{i}");
        let uid = live_pvc_uid(&ns, &claim).await.expect("a PVC per ordinal");
        claim_uids.insert(claim, uid);
    }
    patch_sts(&ns, "db", json!({"spec": {"replicas": 1}})).await;
    wait_ready_pods(&ns, "db", &ordinal_names("db", &[0])).await;
    wait_for("the claims of db-1 and db-2 removed", MINUTE, || async {
        let mut left = Vec::new();
        for claim in ["data-db-1", "data-db-2"] {
            if let Some(uid) = live_pvc_uid(&ns, claim).await {
                let owners = pvc(&ns, claim)
                    .await
                    .map(|c| c.owner_references().to_vec())
                    .unwrap_or_default();
                left.push(format!("{claim} ({uid}) owners {owners:?}"));
            }
        }
        if left.is_empty() {
            Ok(())
        } else {
            Err(left.join("; "))
        }
    })
    .await;
    assert_eq!(
        live_pvc_uid(&ns, "data-db-0").await.as_ref(),
        Some(&claim_uids["data-db-0"]),
        "the live Pod's claim stays"
    );
}

// Controller restart in the middle of an in-place rollout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_restart_mid_in_place_rollout_finishes_without_recreating() {
    let ns = TestNamespace::new("asts-restart").await;
    let ctl = controller(&ns).await;
    ns.apply(&sts_yaml(
        "web",
        5,
        &Extra {
            spec: "podManagementPolicy: Parallel\nupdateStrategy:\n  rollingUpdate:\n    maxUnavailable: 1\n    podUpdatePolicy: InPlaceIfPossible\n    minReadySeconds: 1\n",
            pod: IN_PLACE_READINESS_GATE,
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    let want = ordinal_names("web", &[0, 1, 2, 3, 4]);
    let before = wait_ready_pods(&ns, "web", &want).await;
    // Pods not yet available for minReadySeconds count as unavailable already, and an
    // unavailable Pod may be updated at once: start from 5 available ones.
    let old_revision = settled(&ns, "web", 5).await;
    let timeline = Timeline::start(&ns, "web").await;
    let new_revision = roll_to(&ns, "web", "nginx:mainline", &old_revision).await;
    let updated = wait_for("the first Pod updated", MINUTE, || async {
        let pods = pods_of(&ns, "web").await;
        let done = pods
            .iter()
            .filter(|p| revision(p) == new_revision && is_ready(p) && restart_count(p) == 1)
            .count();
        if done >= 1 {
            Ok(done)
        } else {
            Err(format!("{done} updated"))
        }
    })
    .await;
    ctl.stop().await;
    assert!(updated < 5, "stopped mid-rollout ({updated} of 5 updated)");
    let _ctl = controller(&ns).await;
    wait_status(&ns, "web", "all 5 updated", |s| {
        s.status.as_ref().is_some_and(|st| {
            st.updated_replicas == 5
                && st.updated_ready_replicas == 5
                && st.current_revision == st.update_revision
        })
    })
    .await;
    let after = wait_ready_pods(&ns, "web", &want).await;
    assert_eq!(uids(&before), uids(&after), "every Pod kept its UID");
    for pod in &after {
        assert_eq!(revision(pod), new_revision);
        assert_eq!(
            restart_count(pod),
            1,
            "{} restarted exactly once",
            pod.name_any()
        );
    }
    let original = uids(&before);
    assert!(
        timeline.snapshots().iter().all(|s| s.len() == 5
            && s.iter()
                .all(|(n, p)| !p.terminating && original.get(n) == Some(&p.uid))),
        "exactly the 5 original Pods at every moment:\n{}",
        timeline.dump()
    );
    let (worst, at) = timeline.max_unavailable(5);
    assert!(
        worst <= 1,
        "maxUnavailable 1, saw {worst}: {at}\n{}",
        timeline.dump()
    );
}

// The client's User-Agent names the binary: the apiserver records it as field manager.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_created_by_the_statefulset_ctl_field_manager() {
    let ns = TestNamespace::new("asts-ua").await;
    let _ctl = controller(&ns).await;
    ns.apply(&sts_yaml("ua", 1, &Extra::default()))
        .await
        .unwrap();
    let pod = wait_ready_pods(&ns, "ua", &ordinal_names("ua", &[0]))
        .await
        .remove(0);
    let managers: Vec<String> = pod
        .metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        managers.iter().any(|m| m == "statefulset-ctl"),
        "managers {managers:?}"
    );
}

// Parallel without maxUnavailable updates strictly one at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_max_unavailable_updates_one_at_a_time_even_with_parallel() {
    let ns = TestNamespace::new("asts-onebyone").await;
    let _ctl = controller(&ns).await;
    ns.apply(&sts_yaml(
        "one",
        4,
        &Extra {
            spec: "podManagementPolicy: Parallel\n",
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    let want = ordinal_names("one", &[0, 1, 2, 3]);
    wait_ready_pods(&ns, "one", &want).await;
    let old_revision = settled(&ns, "one", 4).await;
    let timeline = Timeline::start(&ns, "one").await;
    let new_revision = roll_to(&ns, "one", "nginx:mainline", &old_revision).await;
    wait_status(&ns, "one", "all 4 updated", |s| {
        s.status.as_ref().is_some_and(|st| {
            st.updated_replicas == 4
                && st.ready_replicas == 4
                && st.current_revision == st.update_revision
        })
    })
    .await;
    wait_ready_pods(&ns, "one", &want).await;
    let (worst, at) = timeline.max_unavailable(4);
    assert_eq!(worst, 1, "one at a time: {at}\n{}", timeline.dump());
    let order: Vec<String> = timeline
        .update_starts(&new_revision)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        order,
        ["one-3", "one-2", "one-1", "one-0"],
        "highest ordinal first:\n{}",
        timeline.dump()
    );
}

// `paused` stops the rollout, not scaling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_rollout_updates_nothing_but_still_scales() {
    let ns = TestNamespace::new("asts-paused").await;
    let _ctl = controller(&ns).await;
    ns.apply(&sts_yaml(
        "p",
        3,
        &Extra {
            spec: "podManagementPolicy: Parallel\nupdateStrategy:\n  rollingUpdate:\n    paused: true\n",
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    let before = wait_ready_pods(&ns, "p", &ordinal_names("p", &[0, 1, 2])).await;
    let old_revision = settled(&ns, "p", 3).await;
    let new_revision = roll_to(&ns, "p", "nginx:mainline", &old_revision).await;
    patch_sts(&ns, "p", json!({"spec": {"replicas": 4}})).await;
    let pods = wait_ready_pods(&ns, "p", &ordinal_names("p", &[0, 1, 2, 3])).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pods_later = wait_ready_pods(&ns, "p", &ordinal_names("p", &[0, 1, 2, 3])).await;
    assert_eq!(uids(&pods), uids(&pods_later));
    for (b, a) in before.iter().zip(&pods_later) {
        assert_eq!(b.uid(), a.uid(), "{} untouched while paused", a.name_any());
        assert_eq!(revision(a), old_revision);
    }
    assert_eq!(
        revision(&pods_later[3]),
        new_revision,
        "the new Pod is created at the update revision"
    );
    let set = wait_status(&ns, "p", "4 ready, 1 updated", |s| {
        s.status
            .as_ref()
            .is_some_and(|st| st.ready_replicas == 4 && st.updated_replicas == 1)
    })
    .await;
    assert_eq!(set.status.unwrap().current_revision, old_revision);
    // Resuming rolls the rest.
    patch_sts(
        &ns,
        "p",
        json!({"spec": {"updateStrategy": {"rollingUpdate": {"paused": false}}}}),
    )
    .await;
    wait_status(&ns, "p", "all 4 updated", |s| {
        s.status.as_ref().is_some_and(|st| {
            st.updated_replicas == 4
                && st.ready_replicas == 4
                && st.current_revision == st.update_revision
        })
    })
    .await;
}

/// Sets a Pod condition the way a readiness-gate controller does.
async fn set_pod_condition(ns: &TestNamespace, pod: &str, type_: &str, status: &str) {
    ns.api::<Pod>()
        .patch_status(
            pod,
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"status": {"conditions": [{"type": type_, "status": status}]}}),
            ),
        )
        .await
        .expect("patch pod condition");
}

// Monotonic scale-up halts at the first unhealthy Pod and resumes when it is
// Ready; burst scaling completes with unhealthy Pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_ready_halts_at_an_unready_pod_and_parallel_does_not() {
    let ns = TestNamespace::new("asts-halt").await;
    let _ctl = controller(&ns).await;
    // Pods are Ready only once someone sets example.io/gate.
    let gate = "readinessGates:\n- conditionType: example.io/gate\n";
    ns.apply(&sts_yaml(
        "o",
        3,
        &Extra {
            pod: gate,
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    ns.apply(&sts_yaml(
        "b",
        3,
        &Extra {
            spec: "podManagementPolicy: Parallel\n",
            pod: gate,
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    // Parallel: all three, none ready.
    wait_for("3 unready pods of b", MINUTE, || async {
        let pods = pods_of(&ns, "b").await;
        let ready = pods.iter().filter(|p| is_ready(p)).count();
        if names(&pods) == ordinal_names("b", &[0, 1, 2]) && ready == 0 {
            Ok(())
        } else {
            Err(format!("{:?}, {ready} ready", names(&pods)))
        }
    })
    .await;
    // OrderedReady: o-0 only, for as long as it is not Ready.
    wait_for("o-0", MINUTE, || async {
        let pods = pods_of(&ns, "o").await;
        if names(&pods) == ["o-0"] {
            Ok(())
        } else {
            Err(format!("{:?}", names(&pods)))
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        names(&pods_of(&ns, "o").await),
        ["o-0"],
        "halted at the unready o-0"
    );
    set_pod_condition(&ns, "o-0", "example.io/gate", "True").await;
    wait_for("o-1 created", MINUTE, || async {
        let pods = pods_of(&ns, "o").await;
        if names(&pods) == ["o-0", "o-1"] {
            Ok(())
        } else {
            Err(format!("{:?}", names(&pods)))
        }
    })
    .await;
    set_pod_condition(&ns, "o-1", "example.io/gate", "True").await;
    let o2 = wait_for("o-2 created", MINUTE, || async {
        let pods = pods_of(&ns, "o").await;
        if names(&pods) == ordinal_names("o", &[0, 1, 2]) {
            Ok(pods[2].clone())
        } else {
            Err(format!("{:?}", names(&pods)))
        }
    })
    .await;
    set_pod_condition(&ns, &o2.name_any(), "example.io/gate", "True").await;
    wait_ready_pods(&ns, "o", &ordinal_names("o", &[0, 1, 2])).await;
    wait_status(&ns, "o", "3 ready", |s| {
        s.status.as_ref().is_some_and(|st| st.ready_replicas == 3)
    })
    .await;
}

/// `data` on StorageClass `class` (1Gi), resized with the Pods.
fn resizable_claim(class: &str) -> String {
    format!(
        "
podManagementPolicy: Parallel
volumeClaimUpdateStrategy:
  type: OnPodRollingUpdate
volumeClaimTemplates:
- metadata:
    name: data
  spec:
    storageClassName: {class}
    accessModes: [ReadWriteOnce]
    resources:
      requests:
        storage: 1Gi
"
    )
}

async fn set_claim_size(ns: &TestNamespace, name: &str, size: &str) -> Result<(), kube::Error> {
    let patch: json_patch::Patch = serde_json::from_value(json!([{
        "op": "replace",
        "path": "/spec/volumeClaimTemplates/0/spec/resources/requests/storage",
        "value": size,
    }]))
    .unwrap();
    ns.api::<StatefulSet>()
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map(|_| ())
}

/// (request, capacity) of each claim `data-<set>-<i>`.
async fn claim_sizes(api: &Api<PersistentVolumeClaim>, set: &str, n: i32) -> Vec<(String, String)> {
    let mut sizes = Vec::new();
    for i in 0..n {
        let c = api.get_opt(&format!("data-{set}-{i}")).await.ok().flatten();
        let request = c.as_ref().and_then(|c| {
            c.spec
                .as_ref()?
                .resources
                .as_ref()?
                .requests
                .as_ref()?
                .get("storage")
                .cloned()
        });
        let capacity = c.as_ref().and_then(|c| {
            c.status
                .as_ref()?
                .capacity
                .as_ref()?
                .get("storage")
                .cloned()
        });
        sizes.push((
            request.map(|q| q.0).unwrap_or_default(),
            capacity.map(|q| q.0).unwrap_or_default(),
        ));
    }
    sizes
}

/// Waits until every claim requests and holds `size` and the status counts all `n`
/// Pods' claims compatible and ready.
async fn wait_resized(ns: &TestNamespace, set: &str, n: i32, size: &str) {
    wait_for(
        &format!("claims of {set} at {size}"),
        2 * MINUTE,
        || async {
            let sizes = claim_sizes(&ns.api(), set, n).await;
            let want = vec![(size.to_string(), size.to_string()); n as usize];
            let s = sts(ns, set).await;
            let claims = s
                .status
                .as_ref()
                .map(|st| st.volume_claims.clone())
                .unwrap_or_default();
            let counted = claims.len() == 1
                && claims[0].volume_claim_name == "data"
                && claims[0].compatible_replicas == n
                && claims[0].compatible_ready_replicas == n;
            if sizes == want && counted {
                Ok(())
            } else {
                Err(format!("claims {sizes:?}, status {claims:?}"))
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pvc_resize_on_rolling_update_grows_claims_pod_by_pod() {
    let ns = TestNamespace::new("asts-resize").await;
    let _ctl = RunningController::start(
        statefulset_ctl::IDENTITY,
        &ns.name,
        "StatefulSetAutoResizePVCGate=true",
        statefulset_ctl::run,
    )
    .await;
    let probe: StatefulSet =
        serde_saphyr::from_str(&sts_yaml("probe", 0, &Extra::default())).expect("probe");
    kruise_e2e::wait_webhook_effective(&ns.api(), &probe, |s: &StatefulSet| {
        s.spec.revision_history_limit.is_some()
    })
    .await;
    let spec = resizable_claim("allow-volume-expansion");
    ns.apply(&sts_yaml(
        "rz",
        3,
        &Extra {
            spec: &spec,
            container: DATA_MOUNT,
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    let pods = wait_ready_pods(&ns, "rz", &ordinal_names("rz", &[0, 1, 2])).await;
    settled(&ns, "rz", 3).await;
    wait_resized(&ns, "rz", 3, "1Gi").await;
    let uids: Vec<_> = pods.iter().map(|p| p.uid()).collect();

    // Only the claim template grows: every claim is resized, highest ordinal first and
    // one at a time (maxUnavailable 1: a Pod whose claim has not caught up is
    // unavailable), and no Pod is recreated: the revision is the template's only.
    let seen = Arc::new(Mutex::new(Vec::<Vec<(String, String)>>::new()));
    let watching = {
        let (seen, api) = (seen.clone(), ns.api::<PersistentVolumeClaim>());
        tokio::spawn(async move {
            loop {
                let sizes = claim_sizes(&api, "rz", 3).await;
                seen.lock().unwrap().push(sizes);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    set_claim_size(&ns, "rz", "2Gi")
        .await
        .expect("grow on a class that allows it");
    wait_resized(&ns, "rz", 3, "2Gi").await;
    watching.abort();
    let pods = wait_ready_pods(&ns, "rz", &ordinal_names("rz", &[0, 1, 2])).await;
    assert_eq!(
        pods.iter().map(|p| p.uid()).collect::<Vec<_>>(),
        uids,
        "no Pod recreated"
    );
    for states in seen.lock().unwrap().iter() {
        let in_flight = states.iter().filter(|(req, cap)| req != cap).count();
        assert!(in_flight <= 1, "one resize at a time: {states:?}");
    }
    // The first snapshot with a grown claim has rz-2's among them (a slow poll may see
    // rz-1's grown too by then, never rz-1's alone).
    let first_resized = seen
        .lock()
        .unwrap()
        .iter()
        .find(|s| s.iter().any(|(req, _)| req == "2Gi"))
        .map(|s| s[2].0.clone());
    assert_eq!(first_resized.as_deref(), Some("2Gi"), "rz-2's claim first");
    let claim = pvc(&ns, "data-rz-0").await.unwrap();
    assert_eq!(
        claim
            .annotations()
            .get("apps.kruise.io/owned-by-asts")
            .map(String::as_str),
        Some("rz")
    );

    // Image and claims together: each Pod's claim first, then the Pod is recreated.
    let old = sts(&ns, "rz").await.status.unwrap().update_revision;
    set_claim_size(&ns, "rz", "3Gi").await.unwrap();
    let new = roll_to(&ns, "rz", "nginx:1.7.9", &old).await;
    wait_resized(&ns, "rz", 3, "3Gi").await;
    wait_status(&ns, "rz", "rolled to the new revision", |s| {
        s.status.as_ref().is_some_and(|st| {
            st.updated_replicas == 3 && st.ready_replicas == 3 && st.current_revision == new
        })
    })
    .await;
    let pods = wait_ready_pods(&ns, "rz", &ordinal_names("rz", &[0, 1, 2])).await;
    assert!(
        pods.iter().all(|p| !uids.contains(&p.uid())),
        "recreated for the image"
    );

    // Admission: a class without expansion, a new template, an access mode change.
    let deny = resizable_claim("disallow-volume-expansion");
    ns.apply(&sts_yaml(
        "fixed",
        1,
        &Extra {
            spec: &deny,
            container: DATA_MOUNT,
            ..Default::default()
        },
    ))
    .await
    .unwrap();
    let err = set_claim_size(&ns, "fixed", "2Gi")
        .await
        .expect_err("no expansion");
    assert!(
        err.to_string().contains(
            "spec.volumeClaimTemplates[data].spec.resources.requests.storage: Forbidden: storage class disallow-volume-expansion does not support volume expansion"
        ),
        "{err}"
    );
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/volumeClaimTemplates/0/spec/accessModes", "value": ["ReadWriteMany"]}
    ]))
    .unwrap();
    let err = ns
        .api::<StatefulSet>()
        .patch("rz", &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .expect_err("access modes are fixed");
    assert!(
        err.to_string()
            .contains("volumeClaimTemplate can not be modified when OnRollingUpdate"),
        "{err}"
    );
}

/// The controller reference of a Pod, by UID (`None`: an orphan).
fn controller_uid(p: &Pod) -> Option<String> {
    p.owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
}

/// Waits for Pod `name` to satisfy `ok`, returning it.
async fn wait_pod(ns: &TestNamespace, name: &str, what: &str, ok: impl Fn(&Pod) -> bool) -> Pod {
    wait_for(what, MINUTE, || async {
        let pod = ns.api::<Pod>().get(name).await.map_err(|e| e.to_string())?;
        if ok(&pod) {
            Ok(pod)
        } else {
            Err(format!(
                "labels {:?}, owners {:?}",
                pod.labels(),
                pod.owner_references()
            ))
        }
    })
    .await
}

// Adoption (upstream's "should adopt matching orphans and release non-matching pods"):
// an orphan named for a live ordinal is adopted, a Pod that stops matching is released,
// the same Pod (UID) throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_are_adopted_and_pods_that_stop_matching_are_released() {
    let ns = TestNamespace::new("asts-adopt").await;
    let _ctl = controller(&ns).await;
    ns.apply(&sts_yaml("a", 1, &Extra::default()))
        .await
        .unwrap();
    let pods = wait_ready_pods(&ns, "a", &ordinal_names("a", &[0])).await;
    let (uid, set_uid) = (pods[0].uid().unwrap(), sts(&ns, "a").await.uid().unwrap());
    assert_eq!(controller_uid(&pods[0]).as_deref(), Some(set_uid.as_str()));
    let api: Api<Pod> = ns.api();
    let merge = |patch: serde_json::Value| {
        let api = api.clone();
        async move {
            api.patch("a-0", &PatchParams::default(), &Patch::Merge(patch))
                .await
                .expect("patch a-0")
        }
    };

    merge(json!({"metadata": {"ownerReferences": null}})).await;
    let adopted = wait_pod(&ns, "a-0", "a-0 adopted", |p| {
        controller_uid(p).as_deref() == Some(set_uid.as_str())
    })
    .await;
    assert_eq!(
        adopted.uid().unwrap(),
        uid,
        "the orphan itself, not a new Pod"
    );

    // Without its labels it leaves the set (and the controller's label-selected cache).
    let labels = adopted.labels().clone();
    let nulls: serde_json::Map<String, serde_json::Value> = labels
        .keys()
        .map(|k| (k.clone(), serde_json::Value::Null))
        .collect();
    merge(json!({"metadata": {"labels": nulls}})).await;
    wait_pod(&ns, "a-0", "a-0 released", |p| controller_uid(p).is_none()).await;

    merge(json!({"metadata": {"labels": labels}})).await;
    let back = wait_pod(&ns, "a-0", "a-0 adopted again", |p| {
        controller_uid(p).as_deref() == Some(set_uid.as_str())
    })
    .await;
    assert_eq!(back.uid().unwrap(), uid);
    wait_status(&ns, "a", "1 ready replica", |s| {
        s.status
            .as_ref()
            .is_some_and(|st| st.replicas == 1 && st.ready_replicas == 1)
    })
    .await;
}
