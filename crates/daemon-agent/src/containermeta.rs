//! Env from metadata (gate `InPlaceUpdateEnvFromMetadata`): the node agent's side of an
//! in-place update that changes only a label or annotation a container reads through the
//! downward API (`env[].valueFrom.fieldRef: metadata.labels['k']`). The kubelet resolves
//! such env once, when it creates the container; a new value reaches the process only if
//! the container is started again. Upstream's container-meta loop, in short:
//!
//! 1. For each Pod of this node (owned by an `apps.kruise.io` workload or injected by a
//!    SidecarSet) and each running container, the hash of the env values it was started
//!    with ([`kruise_inplace::envhash`]), read once per container ID from inside the
//!    container (`ExecSync env`: what the process really has, whatever the Pod's metadata
//!    said or says now), is recorded in the Pod annotation
//!    `apps.kruise.io/runtime-containers-meta` (`RuntimeContainerMetaSet`, upstream's field
//!    names: `name`, `containerID`, `restartCount`, `hashes.extractedEnvFromMetadataHash`).
//! 2. While the Pod is being updated in place (`InPlaceUpdateReady=False`: the workload
//!    controller set it before writing the new labels), a running container whose recorded
//!    hash differs from the hash of the Pod's current metadata is stopped through the CRI
//!    (`StopContainer` with the Pod's grace period), 3 s after the agent first sees it so
//!    (as upstream's restart queue waits: the kubelet must have the new metadata by the
//!    time it restarts the container), and then whatever became of the update (a newer
//!    revision changing only resources may complete it meanwhile), as upstream's queue
//!    does ([`queued_stops`]); the kubelet starts it again with the
//!    new values, the new container ID is read and recorded, and the workload controller,
//!    seeing the recorded hash equal the expected one, completes the update.
//!
//! Only that container restarts; the Pod keeps its UID, IP and other containers. Outside
//! an in-place update nothing is stopped (a label changed by hand does not restart
//! anything, as upstream). preStop hooks are not run before the stop (the kubelet's own
//! restarts of a stopped container do not run them either).
//!
//! Each entry also carries `hashes.plainHash`: the kubelet's hash of the container spec it
//! created the container from (its `io.kubernetes.container.hash` annotation on the
//! container, read from the CRI's `ListContainers` once per container ID). Workload
//! controllers count an in-place update done when every running container carries the
//! hash of the Pod's current spec ([`kruise_inplace::containerhash`]), which also covers an
//! image that resolves to the image ID the container already ran.
//!
//! The watch is node-scoped (field selector `spec.nodeName=<node>`) and, with
//! `KRUISE_WATCH_NAMESPACE`, namespace-scoped too (tests running side by side).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, ObjectReference, Pod};
use kruise_api::appspub::{RuntimeContainerHashes, RuntimeContainerMeta, RuntimeContainerMetaSet};
use kruise_api::keys;
use kruise_inplace::envhash;
use kruise_runtime::{Cache, Events, Runtime};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::cri::Cri;
use crate::error::Error;

/// How long `env` may take inside a container (seconds).
const EXEC_TIMEOUT_SECONDS: i64 = 3;
/// Retry after a container's env could not be read (it may be starting).
const READ_RETRY: Duration = Duration::from_secs(3);
/// How long a container whose env is stale waits before it is stopped. The kubelet must
/// have seen the Pod's new labels/annotations by then, or it restarts the container with
/// the old values (a `fieldRef` is resolved when the container is created) and a second
/// stop follows. OpenKruise's kruise-daemon waits the same 3 s: its restart queue's first
/// rate-limited delay (openkruise/kruise v1.9.0
/// pkg/daemon/containermeta/container_meta_controller.go, `NewItemExponentialFailureRateLimiter(3*time.Second, …)`).
const STOP_DELAY: Duration = Duration::from_secs(3);
/// The grace period when the Pod sets none (the Pod default).
const DEFAULT_GRACE_SECONDS: i64 = 30;

// ---------------------------------------------------------------- the pure part

/// Whether the agent looks after this Pod: alive, with containers that have IDs, and
/// owned by an `apps.kruise.io` workload or injected by a SidecarSet (the only Pods an
/// in-place update of metadata can happen to).
pub fn is_relevant(pod: &Pod) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let owned_by_kruise = pod.metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true) && o.api_version.split('/').next() == Some("apps.kruise.io")
    });
    let injected = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(keys::SIDECARSET_HASH));
    (owned_by_kruise || injected) && statuses(pod).iter().any(|s| s.container_id.is_some())
}

fn statuses(pod: &Pod) -> &[k8s_openapi::api::core::v1::ContainerStatus] {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default()
}

fn spec_container<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == name)
}

/// Whether the Pod is mid in-place update (`InPlaceUpdateReady=False`).
pub fn is_updating_in_place(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == keys::INPLACE_UPDATE_READY && c.status == "False")
}

/// The recorded set, if the annotation is there and parses.
pub fn recorded(pod: &Pod) -> Option<RuntimeContainerMetaSet> {
    let raw = pod
        .metadata
        .annotations
        .as_ref()?
        .get(keys::RUNTIME_CONTAINERS_META)?;
    serde_json::from_str(raw).ok()
}

fn recorded_entry<'a>(
    recorded: Option<&'a RuntimeContainerMetaSet>,
    container_id: &str,
) -> Option<&'a RuntimeContainerMeta> {
    recorded
        .into_iter()
        .flat_map(|r| r.containers.iter())
        .find(|m| m.container_id == container_id)
}

fn recorded_hash(recorded: Option<&RuntimeContainerMetaSet>, container_id: &str) -> u64 {
    recorded_entry(recorded, container_id).map_or(0, |m| m.hashes.extracted_env_from_metadata_hash)
}

/// Whether a container of the Pod (with an ID) has no `plainHash` recorded yet: the
/// runtime is asked for the kubelet's hashes only then.
pub fn needs_kubelet_hashes(pod: &Pod, recorded: Option<&RuntimeContainerMetaSet>) -> bool {
    statuses(pod).iter().any(|s| {
        s.container_id.as_deref().is_some_and(|id| {
            !id.is_empty() && recorded_entry(recorded, id).is_none_or(|m| m.hashes.plain_hash == 0)
        })
    })
}

/// Running containers (name, container ID) whose env must be read from inside them: they
/// read metadata through env and no hash is recorded for their current container ID.
pub fn to_read(pod: &Pod, recorded: Option<&RuntimeContainerMetaSet>) -> Vec<(String, String)> {
    statuses(pod)
        .iter()
        .filter(|s| s.state.as_ref().is_some_and(|st| st.running.is_some()))
        .filter_map(|s| Some((s, s.container_id.as_deref()?, spec_container(pod, &s.name)?)))
        .filter(|(_, id, c)| {
            !envhash::metadata_env(c).is_empty() && recorded_hash(recorded, id) == 0
        })
        .map(|(s, id, _)| (s.name.clone(), id.to_string()))
        .collect()
}

/// A container to stop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stop {
    pub name: String,
    /// As the kubelet reports it (`containerd://<id>`).
    pub container_id: String,
}

/// What to write for one Pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaPlan {
    /// The annotation's new value (written when it differs from the recorded one).
    pub set: RuntimeContainerMetaSet,
    pub stop: Vec<Stop>,
}

/// The set to record and the containers to stop. `read`: container ID → hash of the env
/// read from inside it (a container missing from it could not be read: its hash stays
/// unknown, 0, and it is not stopped). `kubelet_hashes`: runtime container ID (without
/// the `containerd://` scheme) → the kubelet's hash of its spec, for containers whose
/// `plainHash` is not recorded yet (missing: 0, looked up again next time).
pub fn plan(
    pod: &Pod,
    recorded: Option<&RuntimeContainerMetaSet>,
    read: &BTreeMap<String, u64>,
    kubelet_hashes: &BTreeMap<String, u64>,
) -> MetaPlan {
    let updating = is_updating_in_place(pod);
    let mut set = RuntimeContainerMetaSet::default();
    let mut stop = Vec::new();
    for status in statuses(pod) {
        let (Some(id), Some(container)) = (
            status.container_id.as_deref().filter(|id| !id.is_empty()),
            spec_container(pod, &status.name),
        ) else {
            continue;
        };
        let running = status.state.as_ref().is_some_and(|s| s.running.is_some());
        let mut hash = recorded_hash(recorded, id);
        if hash == 0 && running {
            hash = if envhash::metadata_env(container).is_empty() {
                // Nothing read from metadata: the hash of no values, known without asking.
                envhash::running_hash(container, &BTreeMap::new())
            } else {
                read.get(id).copied().unwrap_or(0)
            };
        }
        if updating
            && running
            && hash != 0
            && hash != envhash::expected_hash(container, &pod.metadata)
        {
            stop.push(Stop {
                name: status.name.clone(),
                container_id: id.to_string(),
            });
        }
        set.containers.push(RuntimeContainerMeta {
            name: status.name.clone(),
            container_id: id.to_string(),
            restart_count: status.restart_count,
            hashes: RuntimeContainerHashes {
                plain_hash: match recorded_entry(recorded, id).map(|m| m.hashes.plain_hash) {
                    Some(plain) if plain != 0 => plain,
                    _ => kubelet_hashes.get(runtime_id(id)).copied().unwrap_or(0),
                },
                extracted_env_from_metadata_hash: hash,
                ..Default::default()
            },
        });
    }
    MetaPlan { set, stop }
}

/// The Pod's running containers that `is_queued` (container IDs a stop was planned for
/// earlier) and that `planned` does not hold already. A queued stop goes ahead even when the
/// Pod has left its in-place update meanwhile (a newer revision that changes only
/// resources completes without a restart): kruise-daemon's restart queue stops a queued
/// container whatever became of the Pod, as long as it still runs (openkruise/kruise
/// v1.9.0 pkg/daemon/containermeta/container_meta_restarter.go `sync`).
pub fn queued_stops(pod: &Pod, is_queued: impl Fn(&str) -> bool, planned: &[Stop]) -> Vec<Stop> {
    statuses(pod)
        .iter()
        .filter(|s| s.state.as_ref().is_some_and(|st| st.running.is_some()))
        .filter_map(|s| {
            let id = s.container_id.as_deref()?;
            (is_queued(id) && !planned.iter().any(|p| p.container_id == id)).then(|| Stop {
                name: s.name.clone(),
                container_id: id.to_string(),
            })
        })
        .collect()
}

/// How long a stop seen first at `first_seen` still waits at `now` (`STOP_DELAY`);
/// `None`: stop now.
pub fn stop_wait(first_seen: Instant, now: Instant) -> Option<Duration> {
    let waited = now.saturating_duration_since(first_seen);
    (waited < STOP_DELAY).then(|| STOP_DELAY - waited)
}

/// `containerd://abc` → `abc` (the CRI's container ID).
pub fn runtime_id(container_id: &str) -> &str {
    container_id
        .split_once("://")
        .map_or(container_id, |(_, id)| id)
}

// ---------------------------------------------------------------- the I/O

struct Context {
    cri: Cri,
    pods: Cache<Pod>,
    client: kube::Client,
    events: Events,
    /// Containers stopped by this agent: stopped once, even while they take their grace
    /// period to exit and the Pod changes meanwhile.
    stopped: Mutex<HashSet<String>>,
    /// Containers found with a stale env, and when: stopped [`STOP_DELAY`] later.
    stale_since: Mutex<HashMap<String, Instant>>,
}

/// Starts the loop for the Pods of `node` (its Pod cache a readiness check at once),
/// running until shutdown.
pub fn spawn(runtime: &Runtime, cri: Cri, node: &str) -> tokio::task::JoinHandle<()> {
    let fields = format!("spec.nodeName={node}");
    let pods = runtime.cache::<Pod>(
        watcher::Config::default().fields(&fields),
        kruise_runtime::cache::prune,
    );
    let ctx = Arc::new(Context {
        cri,
        client: runtime.client.clone(),
        events: runtime.events(),
        stopped: Mutex::new(HashSet::new()),
        stale_since: Mutex::new(HashMap::new()),
        pods,
    });
    let config = ControllerConfig::default()
        .concurrency(4)
        .debounce(Duration::from_millis(200));
    let shutdown = runtime.shutdown.clone();
    tokio::spawn(async move {
        let controller =
            Controller::for_shared_stream(ctx.pods.subscribe(), ctx.pods.store().clone())
                .with_config(config)
                .run(reconcile, error_policy, ctx)
                .for_each(|_| async {});
        tokio::select! {
            _ = controller => {}
            _ = shutdown.cancelled() => {}
        }
    })
}

fn error_policy(pod: Arc<Pod>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(pod = %kruise_runtime::cache::key(pod.as_ref()), %error, "container meta");
    Action::requeue(READ_RETRY)
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !is_relevant(&pod) {
        return Ok(Action::await_change());
    }
    let recorded = recorded(&pod);
    let mut read = BTreeMap::new();
    let mut unread = false;
    for (name, id) in to_read(&pod, recorded.as_ref()) {
        let Some(container) = spec_container(&pod, &name) else {
            continue;
        };
        let exec = ctx
            .cri
            .exec_sync(runtime_id(&id), vec!["env".into()], EXEC_TIMEOUT_SECONDS)
            .await
            .and_then(|r| {
                if r.exit_code == 0 {
                    Ok(r.stdout)
                } else {
                    Err(Error::Cri(format!(
                        "env exited with {}: {}",
                        r.exit_code,
                        r.stderr.trim()
                    )))
                }
            });
        match exec {
            Ok(out) => {
                read.insert(
                    id,
                    envhash::running_hash(container, &envhash::parse_env_output(&out)),
                );
            }
            Err(e) => {
                tracing::warn!(pod = %pod.name_any(), container = %name, error = %e, "cannot read the container's env; retrying");
                unread = true;
            }
        }
    }
    let kubelet_hashes = if needs_kubelet_hashes(&pod, recorded.as_ref()) {
        let uid = pod.uid().unwrap_or_default();
        match ctx.cri.kubelet_hashes(&uid).await {
            Ok(hashes) => hashes,
            Err(e) => {
                tracing::warn!(pod = %pod.name_any(), error = %e, "cannot list the Pod's containers; plainHash left unknown");
                BTreeMap::new()
            }
        }
    } else {
        BTreeMap::new()
    };
    let plan = plan(&pod, recorded.as_ref(), &read, &kubelet_hashes);
    if recorded.as_ref() != Some(&plan.set) {
        record(&ctx, &pod, &plan.set).await?;
    }
    // The map is only looked up under its lock, not copied: this runs on every Pod event.
    let queued = ctx
        .stale_since
        .lock()
        .map(|seen| queued_stops(&pod, |id| seen.contains_key(id), &plan.stop))
        .unwrap_or_default();
    let stops: Vec<Stop> = plan.stop.iter().cloned().chain(queued).collect();
    let mut wait: Option<Duration> = None;
    for stop in &stops {
        let now = Instant::now();
        let left = ctx
            .stale_since
            .lock()
            .map(|mut seen| {
                // Bounded: container IDs are never reused, old ones only take room.
                if seen.len() > 4096 {
                    seen.clear();
                }
                let first_seen = *seen.entry(stop.container_id.clone()).or_insert(now);
                stop_wait(first_seen, now)
            })
            .unwrap_or(None);
        if let Some(left) = left {
            wait = Some(wait.map_or(left, |w| w.min(left)));
            continue;
        }
        let first = ctx
            .stopped
            .lock()
            .map(|mut s| {
                // Bounded: container IDs are never reused, old ones only take room.
                if s.len() > 4096 {
                    s.clear();
                }
                s.insert(stop.container_id.clone())
            })
            .unwrap_or(true);
        if first {
            stop_container(&ctx, &pod, stop).await?;
        }
    }
    Ok(match (wait, unread) {
        (Some(w), true) => Action::requeue(w.min(READ_RETRY)),
        (Some(w), false) => Action::requeue(w),
        (None, true) => Action::requeue(READ_RETRY),
        (None, false) => Action::await_change(),
    })
}

/// The annotation through `pods/status`, which keeps metadata changes: the agent needs
/// no right to change a Pod's spec.
async fn record(ctx: &Context, pod: &Pod, set: &RuntimeContainerMetaSet) -> Result<(), Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    let patch = json!({"metadata": {
        "uid": pod.uid(),
        "annotations": {keys::RUNTIME_CONTAINERS_META: serde_json::to_string(set)?},
    }});
    api.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Strategic(patch),
    )
    .await?;
    Ok(())
}

async fn stop_container(ctx: &Context, pod: &Pod, stop: &Stop) -> Result<(), Error> {
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_GRACE_SECONDS);
    tracing::info!(pod = %pod.name_any(), container = %stop.name, id = %stop.container_id, "env from metadata changed: stopping the container");
    let reference = ObjectReference {
        api_version: Some(Pod::api_version(&()).into()),
        kind: Some(Pod::kind(&()).into()),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        uid: pod.metadata.uid.clone(),
        field_path: Some(format!("spec.containers{{{}}}", stop.name)),
        ..Default::default()
    };
    ctx.events.normal(
        &reference,
        "Killing",
        format!(
            "Stopping container {} by container meta restarter: its env from metadata changed",
            stop.name
        ),
    );
    // Not awaited past the stop's own RPC: the runtime waits out the grace period.
    let cri = ctx.cri.clone();
    let id = runtime_id(&stop.container_id).to_string();
    if let Err(e) = cri.stop_container(&id, grace).await {
        if let Ok(mut s) = ctx.stopped.lock() {
            s.remove(&stop.container_id);
        }
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pod(version: &str, updating: bool, statuses: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": "web-0", "namespace": "ns",
                "labels": {"version": version},
                "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web", "uid": "u", "controller": true}],
            },
            "spec": {"containers": [
                {"name": "app", "env": [{"name": "V", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['version']"}}}]},
                {"name": "side"},
            ]},
            "status": {
                "conditions": [{"type": "InPlaceUpdateReady", "status": if updating { "False" } else { "True" }}],
                "containerStatuses": statuses,
            },
        }))
        .unwrap()
    }

    fn running(name: &str, id: &str, restarts: i32) -> serde_json::Value {
        json!({"name": name, "containerID": id, "restartCount": restarts, "ready": true, "image": "i", "imageID": "",
               "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}})
    }

    /// Both containers of [`pod`] running, with these container IDs.
    fn app_and_side(app: &str, side: &str) -> serde_json::Value {
        json!([running("app", app, 0), running("side", side, 0)])
    }

    fn env_hash(value: &str) -> u64 {
        let p = pod(value, false, json!([]));
        envhash::expected_hash(&p.spec.unwrap().containers[0], &p.metadata)
    }

    #[test]
    fn a_stale_container_is_stopped_three_seconds_after_it_is_seen() {
        let seen = Instant::now();
        assert_eq!(stop_wait(seen, seen), Some(Duration::from_secs(3)));
        assert_eq!(
            stop_wait(seen, seen + Duration::from_secs(1)),
            Some(Duration::from_secs(2))
        );
        assert_eq!(stop_wait(seen, seen + Duration::from_secs(3)), None);
        assert_eq!(stop_wait(seen, seen + Duration::from_secs(60)), None);
    }

    #[test]
    fn a_queued_stop_survives_the_end_of_the_update() {
        // The Pod left its in-place update (InPlaceUpdateReady True): nothing is planned,
        // but `app`, queued while the update ran, is still stopped; `side` never was.
        let p = pod(
            "v2",
            false,
            app_and_side("containerd://a1", "containerd://s1"),
        );
        let queued = HashSet::from([
            "containerd://a1".to_string(),
            "containerd://gone".to_string(),
        ]);
        assert_eq!(
            queued_stops(&p, |id| queued.contains(id), &[]),
            vec![Stop {
                name: "app".into(),
                container_id: "containerd://a1".into()
            }]
        );
        // Already planned: not twice.
        let planned = [Stop {
            name: "app".into(),
            container_id: "containerd://a1".into(),
        }];
        assert!(queued_stops(&p, |id| queued.contains(id), &planned).is_empty());
        // A container that no longer runs is left alone.
        let exited = pod(
            "v2",
            false,
            json!([{"name": "app", "containerID": "containerd://a1", "restartCount": 0,
            "ready": false, "image": "i", "imageID": "", "state": {"terminated": {"exitCode": 0}}}]),
        );
        assert!(queued_stops(&exited, |id| queued.contains(id), &[]).is_empty());
    }

    #[test]
    fn the_kubelets_hash_is_recorded_once_per_container_id() {
        let p = pod(
            "v1",
            false,
            app_and_side("containerd://a1", "containerd://s1"),
        );
        assert!(needs_kubelet_hashes(&p, None));
        // The runtime knows only `a1` yet: `side` stays 0 and is asked for again.
        let hashes = BTreeMap::from([("a1".to_string(), 0x6cf1_8e95)]);
        let first = plan(&p, None, &BTreeMap::new(), &hashes).set;
        let plain: Vec<u64> = first
            .containers
            .iter()
            .map(|m| m.hashes.plain_hash)
            .collect();
        assert_eq!(plain, vec![0x6cf1_8e95, 0]);
        assert!(needs_kubelet_hashes(&p, Some(&first)));
        let hashes = BTreeMap::from([("s1".to_string(), 7)]);
        let second = plan(&p, Some(&first), &BTreeMap::new(), &hashes).set;
        let plain: Vec<u64> = second
            .containers
            .iter()
            .map(|m| m.hashes.plain_hash)
            .collect();
        assert_eq!(plain, vec![0x6cf1_8e95, 7], "a recorded hash is kept");
        assert!(!needs_kubelet_hashes(&p, Some(&second)));
        // A restarted container (new ID) is looked up again.
        let restarted = pod(
            "v1",
            false,
            app_and_side("containerd://a2", "containerd://s1"),
        );
        assert!(needs_kubelet_hashes(&restarted, Some(&second)));
        // Upstream's field name.
        let json = serde_json::to_value(&second).unwrap();
        assert_eq!(
            json["containers"][0]["hashes"]["plainHash"],
            0x6cf1_8e95_u64
        );
    }

    #[test]
    fn a_new_container_is_read_once_and_recorded() {
        let p = pod(
            "v1",
            false,
            app_and_side("containerd://a1", "containerd://s1"),
        );
        assert!(is_relevant(&p));
        // Only the container that reads metadata needs its env read.
        assert_eq!(
            to_read(&p, None),
            vec![("app".to_string(), "containerd://a1".to_string())]
        );
        let read = BTreeMap::from([("containerd://a1".to_string(), env_hash("v1"))]);
        let plan = plan(&p, None, &read, &BTreeMap::new());
        assert!(plan.stop.is_empty());
        assert_eq!(plan.set.containers.len(), 2);
        assert_eq!(
            plan.set.containers[0]
                .hashes
                .extracted_env_from_metadata_hash,
            env_hash("v1")
        );
        assert_ne!(
            plan.set.containers[1]
                .hashes
                .extracted_env_from_metadata_hash,
            0
        );
        // Recorded: nothing more to read, the same set again.
        assert!(to_read(&p, Some(&plan.set)).is_empty());
        assert_eq!(
            super::plan(&p, Some(&plan.set), &BTreeMap::new(), &BTreeMap::new()).set,
            plan.set
        );
        // Upstream's JSON field names.
        let json = serde_json::to_value(&plan.set).unwrap();
        assert_eq!(json["containers"][0]["containerID"], "containerd://a1");
        assert_eq!(
            json["containers"][0]["hashes"]["extractedEnvFromMetadataHash"],
            env_hash("v1")
        );
    }

    #[test]
    fn only_the_container_reading_the_changed_label_is_stopped_and_only_mid_update() {
        let statuses = json!([
            running("app", "containerd://a1", 0),
            running("side", "containerd://s1", 0)
        ]);
        let before = plan(
            &pod("v1", false, statuses.clone()),
            None,
            &BTreeMap::from([("containerd://a1".to_string(), env_hash("v1"))]),
            &BTreeMap::new(),
        )
        .set;
        // The label changed by hand: nothing stops.
        assert!(
            plan(
                &pod("v2", false, statuses.clone()),
                Some(&before),
                &BTreeMap::new(),
                &BTreeMap::new()
            )
            .stop
            .is_empty()
        );
        // The label changed by an in-place update: `app` stops, `side` does not.
        let p = plan(
            &pod("v2", true, statuses),
            Some(&before),
            &BTreeMap::new(),
            &BTreeMap::new(),
        );
        assert_eq!(
            p.stop,
            vec![Stop {
                name: "app".into(),
                container_id: "containerd://a1".into()
            }]
        );
        // The kubelet started a new `app` with v2: read, recorded, nothing to stop.
        let after = pod(
            "v2",
            true,
            json!([
                running("app", "containerd://a2", 1),
                running("side", "containerd://s1", 0)
            ]),
        );
        assert_eq!(
            to_read(&after, Some(&before)),
            vec![("app".to_string(), "containerd://a2".to_string())]
        );
        let p = plan(
            &after,
            Some(&before),
            &BTreeMap::from([("containerd://a2".to_string(), env_hash("v2"))]),
            &BTreeMap::new(),
        );
        assert!(p.stop.is_empty());
        assert_eq!(p.set.containers[0].restart_count, 1);
        assert_eq!(
            p.set.containers[0].hashes.extracted_env_from_metadata_hash,
            env_hash("v2")
        );
    }

    #[test]
    fn unread_or_not_running_containers_are_never_stopped() {
        let p = pod("v2", true, json!([running("app", "containerd://a1", 0)]));
        // The env could not be read: unknown hash, no stop.
        let plan_unread = plan(&p, None, &BTreeMap::new(), &BTreeMap::new());
        assert!(plan_unread.stop.is_empty());
        assert_eq!(
            plan_unread.set.containers[0]
                .hashes
                .extracted_env_from_metadata_hash,
            0
        );
        let exited = pod(
            "v2",
            true,
            json!([{"name": "app", "containerID": "containerd://a1", "restartCount": 0, "ready": false, "image": "i", "imageID": "", "state": {"terminated": {"exitCode": 0}}}]),
        );
        let recorded = RuntimeContainerMetaSet {
            containers: vec![RuntimeContainerMeta {
                name: "app".into(),
                container_id: "containerd://a1".into(),
                restart_count: 0,
                hashes: RuntimeContainerHashes {
                    extracted_env_from_metadata_hash: env_hash("v1"),
                    ..Default::default()
                },
            }],
        };
        assert!(
            plan(&exited, Some(&recorded), &BTreeMap::new(), &BTreeMap::new())
                .stop
                .is_empty()
        );
    }

    #[test]
    fn pods_not_owned_by_kruise_are_left_alone() {
        let mut p = pod("v1", true, json!([running("app", "containerd://a1", 0)]));
        p.metadata.owner_references = None;
        assert!(!is_relevant(&p));
        p.metadata.annotations =
            Some([(keys::SIDECARSET_HASH.to_string(), "{}".to_string())].into());
        assert!(is_relevant(&p));
        assert_eq!(runtime_id("containerd://abc"), "abc");
    }

    proptest! {
        /// Whatever the recorded and current values: a container is stopped exactly when
        /// the Pod is mid-update and the value it started with is not the current one.
        #[test]
        fn stopped_exactly_when_started_with_another_value(started in "v[0-3]", now in "v[0-3]", updating: bool) {
            let statuses = json!([running("app", "containerd://a1", 0)]);
            let before = plan(&pod(&started, false, statuses.clone()), None, &BTreeMap::from([("containerd://a1".to_string(), env_hash(&started))]), &BTreeMap::new()).set;
            let p = plan(&pod(&now, updating, statuses), Some(&before), &BTreeMap::new(), &BTreeMap::new());
            prop_assert_eq!(!p.stop.is_empty(), updating && started != now);
        }
    }
}
