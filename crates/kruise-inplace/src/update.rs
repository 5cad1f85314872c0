//! Starting, continuing and completing an in-place update on one Pod.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kruise_api::appspub::{
    InPlaceUpdateContainerBatch, InPlaceUpdateContainerStatus, InPlaceUpdatePreCheckBeforeNext,
    InPlaceUpdateState, RuntimeContainerMetaSet,
};
use kruise_api::keys;
use kruise_api::pod::{Pod, PodView};
use kruise_ordering::predicates::{condition, has_readiness_gate};
use serde_json::{Map, Value, json};

use crate::diff::{MetadataChanges, UpdateSpec};
use crate::resources::ResourceChanges;

/// What to write to a Pod. The status patch (conditions) goes first: a Pod is marked
/// not-ready before anything about it changes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodWrites {
    /// Strategic-merge patch for `pods/status`.
    pub status_patch: Option<Value>,
    /// Strategic-merge patch for the Pod (metadata, container images), carrying the Pod's
    /// resourceVersion so a write based on a stale cache fails instead of clobbering.
    pub pod_patch: Option<Value>,
    /// Strategic-merge patch for `pods/resize` (new container cpu/memory), sent after the
    /// status patch and before the Pod patch, as upstream does.
    pub resize_patch: Option<Value>,
    /// When the caller should look at this Pod again.
    pub requeue_after: Option<Duration>,
}

impl PodWrites {
    pub fn is_empty(&self) -> bool {
        self.status_patch.is_none() && self.pod_patch.is_none() && self.resize_patch.is_none()
    }
}

/// The parsed `apps.kruise.io/inplace-update-state` annotation (or its legacy spelling).
pub fn inplace_state(pod: &Pod) -> Option<InPlaceUpdateState> {
    let annotations = pod.metadata.annotations.as_ref()?;
    let raw = annotations
        .get(keys::INPLACE_UPDATE_STATE)
        .or_else(|| annotations.get(keys::INPLACE_UPDATE_STATE_LEGACY))?;
    serde_json::from_str(raw).ok()
}

/// The update parked during a grace period, if any.
pub fn pending_grace(pod: &Pod) -> Option<UpdateSpec> {
    let annotations = pod.metadata.annotations.as_ref()?;
    let raw = annotations
        .get(keys::INPLACE_UPDATE_GRACE)
        .or_else(|| annotations.get(keys::INPLACE_UPDATE_GRACE_LEGACY))?;
    serde_json::from_str(raw).ok()
}

/// Launch priority of each container: `Ordered` gives container *i* priority −i; else the
/// container's `KRUISE_CONTAINER_PRIORITY` env (0 when missing or not an integer).
pub fn container_priorities(pod: &Pod) -> BTreeMap<String, i64> {
    let ordered = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::CONTAINER_LAUNCH_PRIORITY))
        .is_some_and(|v| v == keys::CONTAINER_LAUNCH_PRIORITY_ORDERED);
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let priority = if ordered {
                -(i as i64)
            } else {
                c.env
                    .iter()
                    .flatten()
                    .find(|e| e.name == keys::KRUISE_CONTAINER_PRIORITY)
                    .and_then(|e| e.value.as_deref())
                    .and_then(|v| v.trim().parse::<i64>().ok())
                    .unwrap_or(0)
            };
            (c.name.clone(), priority)
        })
        .collect()
}

/// One batch of an in-place update, by launch priority (upstream's order): what changes
/// now and what waits until this batch's containers run updated and ready.
#[derive(Clone, Debug, Default, PartialEq)]
struct Batch {
    /// The containers this batch updates (new image, or env reading changed metadata).
    containers: BTreeSet<String>,
    /// New images written now.
    images: BTreeMap<String, String>,
    next_images: BTreeMap<String, String>,
    /// New resources written now (`pods/resize`), and those of later batches.
    resources: ResourceChanges,
    next_resources: ResourceChanges,
    /// Metadata read by the env of containers of later batches: those labels and
    /// annotations are written only with their batch, so that the node agent does not
    /// restart those containers early.
    next_ref_metadata: BTreeMap<String, ObjectMeta>,
}

impl Batch {
    fn has_next(&self) -> bool {
        !self.next_images.is_empty()
            || !self.next_ref_metadata.is_empty()
            || !self.next_resources.is_empty()
    }

    /// Whether the batch holds back this label (`label`) or annotation key.
    fn withholds(&self, key: &str, label: bool) -> bool {
        self.next_ref_metadata.values().any(|m| {
            let keys = if label { &m.labels } else { &m.annotations };
            keys.as_ref().is_some_and(|k| k.contains_key(key))
        })
    }

    /// Adds the update's metadata `changes` that this batch writes (all but what it
    /// withholds) to `labels` and `annotations`, keeping what the caller put there.
    fn add_metadata_now(
        &self,
        changes: &MetadataChanges,
        labels: &mut BTreeMap<String, Option<String>>,
        annotations: &mut BTreeMap<String, Option<String>>,
    ) {
        for (is_label, from, to) in [
            (true, &changes.labels, labels),
            (false, &changes.annotations, annotations),
        ] {
            for (k, v) in from {
                if !self.withholds(k, is_label) {
                    to.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
        }
    }

    /// The labels (or annotations) of the containers updated now, from their ref metadata.
    fn ref_metadata_now(
        &self,
        ref_metadata: &BTreeMap<String, ObjectMeta>,
        label: bool,
    ) -> BTreeMap<String, Option<String>> {
        ref_metadata
            .iter()
            .filter(|(c, _)| self.containers.contains(*c))
            .flat_map(|(_, m)| if label { &m.labels } else { &m.annotations })
            .flatten()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect()
    }
}

/// Plans the next batch of `images` (container -> new image) and `ref_metadata`
/// (container -> the changed labels/annotations its env reads): the changed containers of
/// the highest launch priority, plus every container whose env reads a label or
/// annotation that a container of the batch changes (it would see the change anyway).
fn plan_batch(
    pod: &Pod,
    images: &BTreeMap<String, String>,
    ref_metadata: &BTreeMap<String, ObjectMeta>,
    resources: &ResourceChanges,
) -> Batch {
    let priorities = container_priorities(pod);
    let priority = |n: &String| priorities.get(n).copied().unwrap_or(0);
    let changed: BTreeSet<&String> = images
        .keys()
        .chain(ref_metadata.keys())
        .chain(resources.keys())
        .collect();
    let top = changed.iter().map(|n| priority(n)).max();
    let mut containers: BTreeSet<String> = changed
        .iter()
        .filter(|n| Some(priority(n)) == top)
        .map(|n| (*n).clone())
        .collect();
    // Containers sharing a changed key with the batch join it, until none is left.
    let keys_of = |m: &ObjectMeta| -> Vec<(bool, String)> {
        let labels = m.labels.iter().flatten().map(|(k, _)| (true, k.clone()));
        let annotations = m
            .annotations
            .iter()
            .flatten()
            .map(|(k, _)| (false, k.clone()));
        labels.chain(annotations).collect()
    };
    loop {
        let touched: BTreeSet<(bool, String)> = ref_metadata
            .iter()
            .filter(|(c, _)| containers.contains(*c))
            .flat_map(|(_, m)| keys_of(m))
            .collect();
        let joining: Vec<String> = ref_metadata
            .iter()
            .filter(|(c, m)| {
                !containers.contains(*c) && keys_of(m).iter().any(|k| touched.contains(k))
            })
            .map(|(c, _)| c.clone())
            .collect();
        if joining.is_empty() {
            break;
        }
        containers.extend(joining);
    }
    let (images, next_images) = images
        .iter()
        .map(|(n, i)| (n.clone(), i.clone()))
        .partition(|(n, _)| containers.contains(n));
    let next_ref_metadata = ref_metadata
        .iter()
        .filter(|(c, _)| !containers.contains(*c))
        .map(|(c, m)| (c.clone(), m.clone()))
        .collect();
    let (resources, next_resources) = resources
        .iter()
        .map(|(n, r)| (n.clone(), r.clone()))
        .partition(|(n, _)| containers.contains(n));
    Batch {
        containers,
        images,
        next_images,
        resources,
        next_resources,
        next_ref_metadata,
    }
}

/// Records `batch` in the update state: what waits, what must be ready first.
fn record_batch(state: &mut InPlaceUpdateState, batch: &Batch, now: Timestamp) {
    state.next_container_images = batch.next_images.clone();
    state.next_container_ref_metadata = batch.next_ref_metadata.clone();
    state.next_container_resources = batch.next_resources.clone();
    state.pre_check_before_next = batch.has_next().then(|| InPlaceUpdatePreCheckBeforeNext {
        containers_required_ready: batch.containers.iter().cloned().collect(),
    });
    if !batch.containers.is_empty() {
        state
            .container_batches_record
            .push(InPlaceUpdateContainerBatch {
                timestamp: Time(now),
                containers: batch.containers.iter().cloned().collect(),
            });
    }
}

fn rfc3339(now: Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn condition_patch(status: &str, reason: Option<&str>, now: Timestamp) -> Value {
    let mut condition = json!({
        "type": keys::INPLACE_UPDATE_READY,
        "status": status,
        "lastTransitionTime": rfc3339(now),
    });
    // A strategic merge patch merges a condition by type, field by field: without the
    // nulls a `True` would keep the `StartInPlaceUpdate` reason of the `False` before it.
    // Upstream replaces the whole condition (openkruise/kruise v1.9.0
    // pkg/util/inplaceupdate/inplace_update.go `Refresh`), and rewrites any whose reason or
    // message differs from its own, which would be a Pod write on every switch to it.
    condition["reason"] = reason.map_or(Value::Null, |r| json!(r));
    condition["message"] = Value::Null;
    json!({"status": {"conditions": [condition]}})
}

fn image_id(pod: &Pod, container: &str) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == container))
        .map(|c| c.image_id.clone())
        .unwrap_or_default()
}

/// Builds the Pod patch: metadata labels/annotations (`None` removes) and container images.
fn pod_patch(
    pod: &impl PodView,
    labels: &BTreeMap<String, Option<String>>,
    annotations: &BTreeMap<String, Option<String>>,
    images: &BTreeMap<String, String>,
) -> Value {
    let to_map = |m: &BTreeMap<String, Option<String>>| -> Map<String, Value> {
        m.iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.clone().map(Value::String).unwrap_or(Value::Null),
                )
            })
            .collect()
    };
    let mut metadata = Map::new();
    if let Some(rv) = &pod.meta().resource_version {
        metadata.insert("resourceVersion".into(), json!(rv));
    }
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(to_map(labels)));
    }
    if !annotations.is_empty() {
        metadata.insert("annotations".into(), Value::Object(to_map(annotations)));
    }
    let mut patch = json!({ "metadata": metadata });
    if !images.is_empty() {
        let containers: Vec<Value> = images
            .iter()
            .map(|(n, i)| json!({"name": n, "image": i}))
            .collect();
        patch["spec"] = json!({ "containers": containers });
    }
    patch
}

/// The Pod patch [`start_update`] writes (labels and annotations, `None` removing a key;
/// container images by name; the Pod's resourceVersion as a guard), for callers that keep
/// their own update state: SidecarSet records one state per SidecarSet in
/// `kruise.io/sidecarset-inplace-update-state` and must not touch the workload's
/// `apps.kruise.io/inplace-update-state`.
pub fn metadata_and_images_patch(
    pod: &impl PodView,
    labels: &BTreeMap<String, Option<String>>,
    annotations: &BTreeMap<String, Option<String>>,
    images: &BTreeMap<String, String>,
) -> Value {
    pod_patch(pod, labels, annotations, images)
}

/// The writes that start an in-place update of `pod` to `spec`.
///
/// `labels`/`annotations` are the caller's own changes that go in the same write
/// (revision labels, lifecycle state). With `spec.grace_seconds > 0` the update is parked
/// in the grace annotation and [`refresh`] applies it once the grace period is over.
#[allow(
    clippy::expect_used,
    reason = "serde_json serializes these plain structs (strings, numbers, timestamps) without fail"
)]
pub fn start_update(
    pod: &Pod,
    spec: &UpdateSpec,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
    now: Timestamp,
) -> PodWrites {
    // A resize that restarts no container keeps the Pod in service (upstream's
    // `defaultCheckPodNeedsBeUnready`).
    let takes_out_of_service = !spec.vertical_update_only()
        || crate::resources::restarts_a_container(pod, &spec.container_resources);
    // Already False for this start (a retry after a refused Pod patch): no second write.
    let already_out = condition(pod, keys::INPLACE_UPDATE_READY).is_some_and(|c| {
        c.status == "False" && c.reason.as_deref() == Some(keys::REASON_START_INPLACE_UPDATE)
    });
    let status_patch = (takes_out_of_service
        && !already_out
        && has_readiness_gate(pod, keys::INPLACE_UPDATE_READY))
    .then(|| condition_patch("False", Some(keys::REASON_START_INPLACE_UPDATE), now));

    let batch = plan_batch(
        pod,
        &spec.container_images,
        &spec.container_ref_metadata,
        &spec.container_resources,
    );
    let mut touched: BTreeSet<String> = spec.container_images.keys().cloned().collect();
    touched.extend(spec.container_ref_metadata.keys().cloned());
    let mut state = InPlaceUpdateState {
        revision: spec.revision.clone(),
        update_timestamp: Time(now),
        last_container_statuses: touched
            .iter()
            .map(|c| {
                (
                    c.clone(),
                    InPlaceUpdateContainerStatus {
                        image_id: image_id(pod, c),
                    },
                )
            })
            .collect(),
        update_env_from_metadata: spec.update_env_from_metadata,
        update_images: !spec.container_images.is_empty(),
        update_resources: !spec.container_resources.is_empty(),
        next_container_images: BTreeMap::new(),
        next_container_ref_metadata: BTreeMap::new(),
        next_container_resources: BTreeMap::new(),
        pre_check_before_next: None,
        container_batches_record: Vec::new(),
    };
    if spec.grace_seconds == 0 {
        record_batch(&mut state, &batch, now);
    }

    let mut label_changes: BTreeMap<String, Option<String>> = labels
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    let mut annotation_changes: BTreeMap<String, Option<String>> = annotations
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    annotation_changes.insert(
        keys::INPLACE_UPDATE_STATE.into(),
        Some(serde_json::to_string(&state).expect("state serializes")),
    );
    let (images, resize_patch, requeue_after) = if spec.grace_seconds > 0 {
        annotation_changes.insert(
            keys::INPLACE_UPDATE_GRACE.into(),
            Some(serde_json::to_string(spec).expect("spec serializes")),
        );
        (
            BTreeMap::new(),
            None,
            Some(Duration::from_secs(spec.grace_seconds as u64)),
        )
    } else {
        batch.add_metadata_now(&spec.metadata, &mut label_changes, &mut annotation_changes);
        let resize = crate::resources::resize_patch(pod, &batch.resources);
        (batch.images, resize, None)
    };
    PodWrites {
        status_patch,
        pod_patch: Some(pod_patch(pod, &label_changes, &annotation_changes, &images)),
        resize_patch,
        requeue_after,
    }
}

/// Whether the Pod's last in-place update is done: nothing parked, no batch waiting, and
/// every changed container reports the new image (a new imageID, or the spec's image).
pub fn is_update_completed(pod: &Pod) -> bool {
    if pending_grace(pod).is_some() {
        return false;
    }
    let Some(state) = inplace_state(pod) else {
        return true;
    };
    if !state.next_container_images.is_empty()
        || !state.next_container_ref_metadata.is_empty()
        || !state.next_container_resources.is_empty()
    {
        return false;
    }
    if state.update_env_from_metadata && !runtime_meta_reports_env(pod, None) {
        return false;
    }
    if state.update_resources && !crate::resources::resized(pod) {
        return false;
    }
    if runtime_meta_reports_spec(pod) {
        return true;
    }
    let spec_images: BTreeMap<&str, &str> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter_map(|c| Some((c.name.as_str(), c.image.as_deref()?)))
        .collect();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    state.update_images.then_some(()).is_none()
        || state.last_container_statuses.iter().all(|(name, last)| {
            let Some(status) = statuses.and_then(|cs| cs.iter().find(|c| &c.name == name)) else {
                return false;
            };
            if !last.image_id.is_empty() && status.image_id != last.image_id {
                return true;
            }
            spec_images
                .get(name.as_str())
                .is_some_and(|spec| normalize_image(spec) == normalize_image(&status.image))
        })
}

/// The node agent's runtime meta (`apps.kruise.io/runtime-containers-meta`) must show
/// every container (of `only`, when given) running with the env values the Pod's current
/// metadata gives: for each such container of the spec, an entry for the container ID
/// the kubelet reports whose hash of the env read from metadata is
/// [`crate::envhash::expected_hash`]. A hash recorded for the container from before the
/// restart, or for an older container ID, does not count.
fn runtime_meta_reports_env(pod: &Pod, only: Option<&[String]>) -> bool {
    runtime_meta_shows_every(pod, only, |c, m| {
        m.hashes.extracted_env_from_metadata_hash == crate::envhash::expected_hash(c, &pod.metadata)
    })
}

/// The node agent's runtime meta shows every container of the spec running with the
/// kubelet's hash of its current name and image
/// ([`crate::containerhash::kubelet_container_hash`]): the kubelet has started each
/// container from the spec as it is now, whatever image ID that resolved to.
fn runtime_meta_reports_spec(pod: &Pod) -> bool {
    runtime_meta_shows_every(pod, None, |c, m| {
        m.hashes.plain_hash != 0
            && c.image.as_deref().is_some_and(|image| {
                m.hashes.plain_hash == crate::containerhash::kubelet_container_hash(&c.name, image)
            })
    })
}

/// Whether the runtime meta has, for every container of the spec (of `only`, when
/// given), an entry for the container ID the kubelet reports running it that `holds`.
fn runtime_meta_shows_every(
    pod: &Pod,
    only: Option<&[String]>,
    holds: impl Fn(&kruise_api::pod::Container, &kruise_api::appspub::RuntimeContainerMeta) -> bool,
) -> bool {
    let Some(raw) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::RUNTIME_CONTAINERS_META))
    else {
        return false;
    };
    let Ok(meta) = serde_json::from_str::<RuntimeContainerMetaSet>(raw) else {
        return false;
    };
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    let checked =
        |c: &&kruise_api::pod::Container| only.is_none_or(|names| names.contains(&c.name));
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter(checked)
        .all(|c| {
            let running_id = statuses
                .and_then(|cs| cs.iter().find(|s| s.name == c.name))
                .and_then(|s| s.container_id.as_deref());
            meta.containers.iter().any(|m| {
                m.name == c.name && running_id.is_some_and(|id| id == m.container_id) && holds(c, m)
            })
        })
}

/// `nginx` and `nginx:latest` name the same image; digests and registries are compared as written.
fn normalize_image(image: &str) -> String {
    kruise_api::image::ImageRef::parse(image).with_default_tag()
}

/// What a reconcile should do for a Pod that may be mid-update.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RefreshAction {
    pub writes: PodWrites,
    /// The update (if any) is complete: lifecycle may move on.
    pub completed: bool,
}

/// Continues an in-place update: applies a parked update once its grace period is over
/// (or drops it if the Pod moved to another revision meanwhile), starts the next container
/// batch once the previous one is ready, and sets `InPlaceUpdateReady` True when done (or
/// when the condition is missing on a Pod that has the readiness gate).
#[allow(
    clippy::expect_used,
    reason = "serde_json serializes these plain structs (strings, numbers, timestamps) without fail"
)]
pub fn refresh(pod: &Pod, revision_label: Option<&str>, now: Timestamp) -> RefreshAction {
    if let Some(parked) = pending_grace(pod) {
        let state = inplace_state(pod);
        let mut annotations = BTreeMap::from([
            (keys::INPLACE_UPDATE_GRACE.to_string(), None),
            (keys::INPLACE_UPDATE_GRACE_LEGACY.to_string(), None),
        ]);
        let moved_on = revision_label.is_some_and(|r| !crate_same_revision(r, &parked.revision));
        if moved_on {
            return RefreshAction {
                writes: PodWrites {
                    pod_patch: Some(pod_patch(
                        pod,
                        &BTreeMap::new(),
                        &annotations,
                        &BTreeMap::new(),
                    )),
                    ..Default::default()
                },
                completed: false,
            };
        }
        let started = state.as_ref().map(|s| s.update_timestamp.0).unwrap_or(now);
        // Kubernetes times carry whole seconds: the update may have started up to a second
        // after the recorded time. Never end the grace period early.
        let truncated = i64::from(started.subsec_nanosecond() == 0);
        let due =
            started + jiff::SignedDuration::from_secs(i64::from(parked.grace_seconds) + truncated);
        if now < due {
            let wait = due.duration_since(now).unsigned_abs();
            return RefreshAction {
                writes: PodWrites {
                    requeue_after: Some(wait),
                    ..Default::default()
                },
                completed: false,
            };
        }
        let batch = plan_batch(
            pod,
            &parked.container_images,
            &parked.container_ref_metadata,
            &parked.container_resources,
        );
        if let Some(mut state) = state {
            state.container_batches_record.clear();
            record_batch(&mut state, &batch, now);
            annotations.insert(
                keys::INPLACE_UPDATE_STATE.into(),
                Some(serde_json::to_string(&state).expect("state")),
            );
        }
        let mut labels = BTreeMap::new();
        batch.add_metadata_now(&parked.metadata, &mut labels, &mut annotations);
        return RefreshAction {
            writes: PodWrites {
                pod_patch: Some(pod_patch(pod, &labels, &annotations, &batch.images)),
                resize_patch: crate::resources::resize_patch(pod, &batch.resources),
                ..Default::default()
            },
            completed: false,
        };
    }

    if let Some(mut state) = inplace_state(pod)
        && (!state.next_container_images.is_empty()
            || !state.next_container_ref_metadata.is_empty()
            || !state.next_container_resources.is_empty())
    {
        let required = state
            .pre_check_before_next
            .as_ref()
            .map(|p| p.containers_required_ready.clone())
            .unwrap_or_default();
        if !containers_ready_with_spec_images(pod, &required)
            || (state.update_env_from_metadata && !runtime_meta_reports_env(pod, Some(&required)))
        {
            return RefreshAction::default();
        }
        let images = std::mem::take(&mut state.next_container_images);
        let ref_metadata = std::mem::take(&mut state.next_container_ref_metadata);
        let resources = std::mem::take(&mut state.next_container_resources);
        let batch = plan_batch(pod, &images, &ref_metadata, &resources);
        record_batch(&mut state, &batch, now);
        let labels = batch.ref_metadata_now(&ref_metadata, true);
        let mut annotations = batch.ref_metadata_now(&ref_metadata, false);
        annotations.insert(
            keys::INPLACE_UPDATE_STATE.to_string(),
            Some(serde_json::to_string(&state).expect("state")),
        );
        return RefreshAction {
            writes: PodWrites {
                pod_patch: Some(pod_patch(pod, &labels, &annotations, &batch.images)),
                resize_patch: crate::resources::resize_patch(pod, &batch.resources),
                ..Default::default()
            },
            completed: false,
        };
    }

    let completed = is_update_completed(pod);
    let mut writes = PodWrites::default();
    if has_readiness_gate(pod, keys::INPLACE_UPDATE_READY) && completed {
        // True with neither reason nor message, as upstream writes it (a True that kept the
        // reason of the update's start is rewritten once).
        let settled = condition(pod, keys::INPLACE_UPDATE_READY).is_some_and(|c| {
            c.status == "True"
                && c.reason.as_deref().unwrap_or_default().is_empty()
                && c.message.as_deref().unwrap_or_default().is_empty()
        });
        if !settled {
            writes.status_patch = Some(condition_patch("True", None, now));
        }
    }
    RefreshAction { writes, completed }
}

fn crate_same_revision(label: &str, revision: &str) -> bool {
    let short = |s: &str| s.rsplit('-').next().unwrap_or(s).to_string();
    short(label) == short(revision)
}

fn containers_ready_with_spec_images(pod: &Pod, names: &[String]) -> bool {
    let spec = pod.spec.as_ref();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    names.iter().all(|name| {
        let want = spec
            .and_then(|s| s.containers.iter().find(|c| &c.name == name))
            .and_then(|c| c.image.as_deref());
        statuses
            .and_then(|cs| cs.iter().find(|c| &c.name == name))
            .is_some_and(|c| {
                c.ready && want.is_some_and(|w| normalize_image(w) == normalize_image(&c.image))
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodReadinessGate};
    use kruise_api::pod::{Container, PodSpec};
    use kruise_api::pod::{ContainerStatus, PodStatus};

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    fn statuses_mut(p: &mut Pod) -> &mut Vec<ContainerStatus> {
        p.status
            .as_mut()
            .unwrap()
            .container_statuses
            .as_mut()
            .unwrap()
    }

    fn pod(images: &[(&str, &str)]) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("p".into());
        p.metadata.resource_version = Some("42".into());
        p.spec = Some(PodSpec {
            containers: images
                .iter()
                .map(|(n, i)| Container {
                    name: n.to_string(),
                    image: Some(i.to_string()),
                    ..Default::default()
                })
                .collect(),
            readiness_gates: Some(vec![PodReadinessGate {
                condition_type: keys::INPLACE_UPDATE_READY.into(),
            }]),
            ..Default::default()
        });
        p.status = Some(PodStatus {
            container_statuses: Some(
                images
                    .iter()
                    .map(|(n, i)| ContainerStatus {
                        name: n.to_string(),
                        image: i.to_string(),
                        image_id: format!("{i}@sha256:1"),
                        ready: true,
                        ..Default::default()
                    })
                    .collect(),
            ),
            conditions: Some(vec![PodCondition {
                type_: keys::INPLACE_UPDATE_READY.into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        p
    }

    /// Applies a pod patch roughly as the apiserver's strategic merge would (test helper).
    fn apply(pod: &mut Pod, writes: &PodWrites) {
        if let Some(patch) = &writes.pod_patch {
            let meta = &mut pod.metadata;
            for (field, target) in [
                ("labels", &mut meta.labels),
                ("annotations", &mut meta.annotations),
            ] {
                if let Some(m) = patch["metadata"][field].as_object() {
                    let t = target.get_or_insert_with(Default::default);
                    for (k, v) in m {
                        match v.as_str() {
                            Some(s) => {
                                t.insert(k.clone(), s.into());
                            }
                            None => {
                                t.remove(k);
                            }
                        }
                    }
                }
            }
            if let Some(cs) = patch["spec"]["containers"].as_array() {
                for c in cs {
                    let name = c["name"].as_str().unwrap();
                    let spec = pod.spec.as_mut().unwrap();
                    spec.containers
                        .iter_mut()
                        .find(|x| x.name == name)
                        .unwrap()
                        .image = c["image"].as_str().map(Into::into);
                }
            }
        }
    }

    /// What the kubelet does: status follows spec images with new imageIDs.
    fn kubelet(pod: &mut Pod) {
        let spec: Vec<(String, String)> = pod
            .spec
            .as_ref()
            .unwrap()
            .containers
            .iter()
            .map(|c| (c.name.clone(), c.image.clone().unwrap()))
            .collect();
        for cs in pod
            .status
            .as_mut()
            .unwrap()
            .container_statuses
            .as_mut()
            .unwrap()
        {
            let image = &spec.iter().find(|(n, _)| *n == cs.name).unwrap().1;
            if &cs.image != image {
                cs.image = image.clone();
                cs.image_id = format!("{image}@sha256:2");
                cs.restart_count += 1;
            }
        }
    }

    fn spec(images: &[(&str, &str)], grace: i32) -> UpdateSpec {
        UpdateSpec {
            revision: "cs-new".into(),
            container_images: images
                .iter()
                .map(|(n, i)| (n.to_string(), i.to_string()))
                .collect(),
            grace_seconds: grace,
            ..Default::default()
        }
    }

    #[test]
    fn metadata_and_images_patch_touches_only_what_it_is_given() {
        let p = pod(&[("app", "nginx:1"), ("sidecar", "busybox")]);
        let annotations = BTreeMap::from([
            ("a".to_string(), Some("1".to_string())),
            ("gone".to_string(), None),
        ]);
        let images = BTreeMap::from([("sidecar".to_string(), "busybox:1.35.0".to_string())]);
        let patch = metadata_and_images_patch(&p, &BTreeMap::new(), &annotations, &images);
        assert_eq!(
            patch,
            json!({
                "metadata": {"resourceVersion": "42", "annotations": {"a": "1", "gone": null}},
                "spec": {"containers": [{"name": "sidecar", "image": "busybox:1.35.0"}]}
            })
        );
    }

    #[test]
    fn plain_update_is_three_writes() {
        let mut p = pod(&[("nginx", "nginx:alpine")]);
        let labels = BTreeMap::from([(
            keys::CONTROLLER_REVISION_HASH.to_string(),
            "cs-new".to_string(),
        )]);
        let w = start_update(
            &p,
            &spec(&[("nginx", "nginx:1.7.9")], 0),
            &labels,
            &BTreeMap::new(),
            t(0),
        );
        assert_eq!(
            w.status_patch.as_ref().unwrap()["status"]["conditions"][0]["status"],
            "False"
        );
        assert_eq!(
            w.status_patch.as_ref().unwrap()["status"]["conditions"][0]["reason"],
            "StartInPlaceUpdate"
        );
        let patch = w.pod_patch.clone().unwrap();
        assert_eq!(patch["metadata"]["resourceVersion"], "42");
        assert_eq!(patch["spec"]["containers"][0]["image"], "nginx:1.7.9");
        let state: InPlaceUpdateState = serde_json::from_str(
            patch["metadata"]["annotations"][keys::INPLACE_UPDATE_STATE]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            state.last_container_statuses["nginx"].image_id,
            "nginx:alpine@sha256:1"
        );
        apply(&mut p, &w);
        p.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "False".into();
        // Not done until the kubelet reports the new container.
        let r = refresh(&p, Some("cs-new"), t(1));
        assert!(!r.completed);
        assert!(r.writes.is_empty());
        kubelet(&mut p);
        let r = refresh(&p, Some("cs-new"), t(2));
        assert!(r.completed);
        let condition = &r.writes.status_patch.unwrap()["status"]["conditions"][0];
        assert_eq!(condition["status"], "True");
        // The start's reason is removed (the patch merges by type), as upstream leaves it.
        assert_eq!(condition["reason"], Value::Null);
        assert!(condition.as_object().unwrap().contains_key("reason"));
        assert!(condition.as_object().unwrap().contains_key("message"));
        assert!(r.writes.pod_patch.is_none());
    }

    /// A start retried after its Pod patch was refused does not write the condition again.
    #[test]
    fn a_retried_start_does_not_rewrite_the_false_condition() {
        let mut p = pod(&[("nginx", "nginx:alpine")]);
        let spec = spec(&[("nginx", "nginx:1.7.9")], 0);
        let w = start_update(&p, &spec, &BTreeMap::new(), &BTreeMap::new(), t(0));
        assert!(w.status_patch.is_some());
        let c = &mut p.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
        c.status = "False".into();
        c.reason = Some(keys::REASON_START_INPLACE_UPDATE.into());
        let w = start_update(&p, &spec, &BTreeMap::new(), &BTreeMap::new(), t(1));
        assert!(w.status_patch.is_none());
        assert!(w.pod_patch.is_some(), "the Pod patch is tried again");
    }

    /// A True that kept the start's reason (written before the fix) is rewritten once;
    /// a True without reason or message is left alone.
    #[test]
    fn a_true_condition_with_a_leftover_reason_is_rewritten_once() {
        let mut p = pod(&[("nginx", "nginx:alpine")]);
        let r = refresh(&p, None, t(1));
        assert!(r.completed);
        assert!(r.writes.is_empty(), "{:?}", r.writes.status_patch);
        p.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].reason =
            Some(keys::REASON_START_INPLACE_UPDATE.into());
        let r = refresh(&p, None, t(2));
        let condition = &r.writes.status_patch.unwrap()["status"]["conditions"][0];
        assert_eq!(condition["status"], "True");
        assert_eq!(condition["reason"], Value::Null);
    }

    #[test]
    fn grace_period_parks_the_update_then_applies_it() {
        let mut p = pod(&[("nginx", "nginx:alpine")]);
        let w = start_update(
            &p,
            &spec(&[("nginx", "nginx:1.7.9")], 10),
            &BTreeMap::new(),
            &BTreeMap::new(),
            t(0),
        );
        assert!(
            w.pod_patch.as_ref().unwrap().get("spec").is_none(),
            "images untouched during grace"
        );
        assert_eq!(w.requeue_after, Some(Duration::from_secs(10)));
        apply(&mut p, &w);
        assert!(pending_grace(&p).is_some());
        assert!(!is_update_completed(&p));
        let r = refresh(&p, Some("cs-new"), t(4));
        assert_eq!(
            r.writes.requeue_after,
            Some(Duration::from_secs(7)),
            "whole-second times: one second of margin"
        );
        assert!(r.writes.pod_patch.is_none());
        assert!(
            refresh(&p, Some("cs-new"), t(10))
                .writes
                .pod_patch
                .is_none(),
            "not early"
        );
        let r = refresh(&p, Some("cs-new"), t(11));
        let patch = r.writes.pod_patch.clone().unwrap();
        assert_eq!(patch["spec"]["containers"][0]["image"], "nginx:1.7.9");
        assert!(patch["metadata"]["annotations"][keys::INPLACE_UPDATE_GRACE].is_null());
        apply(&mut p, &r.writes);
        assert!(pending_grace(&p).is_none());
        kubelet(&mut p);
        assert!(is_update_completed(&p));
    }

    #[test]
    fn a_parked_update_is_dropped_when_the_pod_moved_to_another_revision() {
        let mut p = pod(&[("nginx", "nginx:alpine")]);
        let w = start_update(
            &p,
            &spec(&[("nginx", "nginx:1.7.9")], 10),
            &BTreeMap::new(),
            &BTreeMap::new(),
            t(0),
        );
        apply(&mut p, &w);
        let r = refresh(&p, Some("cs-other"), t(20));
        let patch = r.writes.pod_patch.unwrap();
        assert!(patch.get("spec").is_none());
        assert!(patch["metadata"]["annotations"][keys::INPLACE_UPDATE_GRACE].is_null());
    }

    #[test]
    fn launch_priority_updates_higher_priority_containers_first() {
        let mut p = pod(&[("sidecar", "s:1"), ("main", "m:1")]);
        p.metadata.annotations = Some(BTreeMap::from([(
            keys::CONTAINER_LAUNCH_PRIORITY.into(),
            "Ordered".into(),
        )]));
        let w = start_update(
            &p,
            &spec(&[("sidecar", "s:2"), ("main", "m:2")], 0),
            &BTreeMap::new(),
            &BTreeMap::new(),
            t(0),
        );
        let cs = w.pod_patch.as_ref().unwrap()["spec"]["containers"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(cs.len(), 1);
        assert_eq!(cs[0]["name"], "sidecar");
        apply(&mut p, &w);
        assert!(!is_update_completed(&p));
        // Sidecar not yet running the new image: main waits.
        assert!(refresh(&p, None, t(1)).writes.pod_patch.is_none());
        kubelet(&mut p);
        let r = refresh(&p, None, t(2));
        assert_eq!(
            r.writes.pod_patch.as_ref().unwrap()["spec"]["containers"][0]["name"],
            "main"
        );
        apply(&mut p, &r.writes);
        kubelet(&mut p);
        assert!(is_update_completed(&p));
    }

    #[test]
    fn same_image_id_completes_when_status_image_matches_spec() {
        let mut p = pod(&[("c", "repo/app")]);
        let w = start_update(
            &p,
            &spec(&[("c", "repo/app:v2")], 0),
            &BTreeMap::new(),
            &BTreeMap::new(),
            t(0),
        );
        apply(&mut p, &w);
        let cs = &mut statuses_mut(&mut p)[0];
        cs.image = "repo/app:v2".into(); // same imageID as before
        assert!(is_update_completed(&p));
        assert_eq!(normalize_image("nginx"), "nginx:latest");
        assert_eq!(
            normalize_image("localhost:5000/nginx"),
            "localhost:5000/nginx:latest"
        );
        assert_eq!(normalize_image("nginx@sha256:x"), "nginx@sha256:x");
    }

    #[test]
    fn missing_condition_on_a_gated_pod_is_added_true() {
        let mut p = pod(&[("c", "a")]);
        p.status.as_mut().unwrap().conditions = None;
        let r = refresh(&p, None, t(0));
        assert!(r.completed);
        assert_eq!(
            r.writes.status_patch.unwrap()["status"]["conditions"][0]["status"],
            "True"
        );
    }

    #[test]
    fn env_from_metadata_completes_only_when_the_running_container_has_the_new_hash() {
        use kruise_api::appspub::{RuntimeContainerHashes, RuntimeContainerMeta};
        let mut p = pod(&[("app", "busybox:1")]);
        p.spec.as_mut().unwrap().containers[0].env = Some(
            serde_json::from_value(json!([{"name": "V", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['version']"}}}]))
                .unwrap(),
        );
        statuses_mut(&mut p)[0].container_id = Some("containerd://new".into());
        let state: InPlaceUpdateState = serde_json::from_value(json!({
            "revision": "r2", "updateTimestamp": "2023-11-14T22:13:20Z",
            "lastContainerStatuses": {"app": {"imageID": ""}},
            "updateEnvFromMetadata": true,
        }))
        .unwrap();
        let set_meta = |p: &mut Pod, id: &str, version: &str| {
            let mut m = p.metadata.clone();
            m.labels = Some([("version".to_string(), version.to_string())].into());
            let hash = crate::envhash::expected_hash(&p.spec.as_ref().unwrap().containers[0], &m);
            let meta = RuntimeContainerMetaSet {
                containers: vec![RuntimeContainerMeta {
                    name: "app".into(),
                    container_id: id.into(),
                    restart_count: 0,
                    hashes: RuntimeContainerHashes {
                        extracted_env_from_metadata_hash: hash,
                        ..Default::default()
                    },
                }],
            };
            p.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(
                    keys::RUNTIME_CONTAINERS_META.into(),
                    serde_json::to_string(&meta).unwrap(),
                );
        };
        p.metadata.labels = Some([("version".to_string(), "v2".to_string())].into());
        p.metadata.annotations = Some(
            [(
                keys::INPLACE_UPDATE_STATE.to_string(),
                serde_json::to_string(&state).unwrap(),
            )]
            .into(),
        );
        // No runtime meta yet.
        assert!(!is_update_completed(&p));
        // The agent recorded the old container (old hash): not done.
        set_meta(&mut p, "containerd://new", "v1");
        assert!(!is_update_completed(&p));
        // The new hash, but for a container the kubelet no longer runs: not done.
        set_meta(&mut p, "containerd://old", "v2");
        assert!(!is_update_completed(&p));
        // The running container started with the new value: done.
        set_meta(&mut p, "containerd://new", "v2");
        assert!(is_update_completed(&p));
    }

    #[test]
    fn an_image_that_resolves_to_the_same_image_id_completes_by_the_kubelets_hash() {
        use kruise_api::appspub::{RuntimeContainerHashes, RuntimeContainerMeta};
        // Updated from `app:v1` to `app:v2`, a tag of the same image: the kubelet reports
        // the first tag it knows and the same imageID, so images cannot tell.
        let mut p = pod(&[("app", "app:v2")]);
        let status = &mut statuses_mut(&mut p)[0];
        status.image = "app:v1".into();
        status.image_id = "app@sha256:1".into();
        status.container_id = Some("containerd://new".into());
        let state: InPlaceUpdateState = serde_json::from_value(json!({
            "revision": "r2", "updateTimestamp": "2023-11-14T22:13:20Z",
            "lastContainerStatuses": {"app": {"imageID": "app@sha256:1"}},
            "updateImages": true,
        }))
        .unwrap();
        let with_meta = |id: &str, image: &str| {
            let mut p = p.clone();
            let meta = RuntimeContainerMetaSet {
                containers: vec![RuntimeContainerMeta {
                    name: "app".into(),
                    container_id: id.into(),
                    restart_count: 1,
                    hashes: RuntimeContainerHashes {
                        plain_hash: crate::containerhash::kubelet_container_hash("app", image),
                        ..Default::default()
                    },
                }],
            };
            p.metadata.annotations = Some(
                [
                    (
                        keys::INPLACE_UPDATE_STATE.to_string(),
                        serde_json::to_string(&state).unwrap(),
                    ),
                    (
                        keys::RUNTIME_CONTAINERS_META.to_string(),
                        serde_json::to_string(&meta).unwrap(),
                    ),
                ]
                .into(),
            );
            p
        };
        // The agent still shows the old container: not done.
        assert!(!is_update_completed(&with_meta(
            "containerd://new",
            "app:v1"
        )));
        // The new spec's hash, but for a container the kubelet no longer runs: not done.
        assert!(!is_update_completed(&with_meta(
            "containerd://old",
            "app:v2"
        )));
        // The running container was created from the new spec: done.
        assert!(is_update_completed(&with_meta(
            "containerd://new",
            "app:v2"
        )));
    }

    /// A Pod of two containers by launch priority, `first` above `second`: `env_reader`'s
    /// env reads the annotation `config`; the update changes `config` and the other's image.
    fn pod_with_priorities(first: &str, second: &str, env_reader: &str) -> Pod {
        let mut p = pod(&[("nginx", "nginx:1"), ("redis", "redis:1")]);
        for c in &mut p.spec.as_mut().unwrap().containers {
            let priority = if c.name == first { "10" } else { "0" };
            let mut env = vec![json!({"name": keys::KRUISE_CONTAINER_PRIORITY, "value": priority})];
            if c.name == env_reader {
                env.push(json!({"name": "CONFIG", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['config']"}}}));
            }
            c.env = Some(serde_json::from_value(json!(env)).unwrap());
        }
        assert_ne!(first, second);
        p.metadata.annotations = Some([("config".to_string(), "foo".to_string())].into());
        p
    }

    fn env_and_image_spec(env_reader: &str, image_of: &str) -> UpdateSpec {
        let mut s = spec(&[(image_of, &format!("{image_of}:2"))], 0);
        s.metadata
            .annotations
            .insert("config".into(), Some("bar".into()));
        s.container_ref_metadata.insert(
            env_reader.into(),
            ObjectMeta {
                annotations: Some([("config".to_string(), "bar".to_string())].into()),
                ..Default::default()
            },
        );
        s.update_env_from_metadata = true;
        s
    }

    /// Starts [`env_and_image_spec`]'s update on `p` at t(0), nothing else written.
    fn start_env_and_image_update(p: &Pod, env_reader: &str, image_of: &str) -> PodWrites {
        let spec = env_and_image_spec(env_reader, image_of);
        start_update(p, &spec, &BTreeMap::new(), &BTreeMap::new(), t(0))
    }

    /// What the node agent records once it has restarted every container for the Pod's
    /// current metadata: each running container with its expected env hash.
    fn agent_restarts_for_env(p: &mut Pod, restarted: &str) {
        use kruise_api::appspub::{RuntimeContainerHashes, RuntimeContainerMeta};
        let spec = p.spec.clone().unwrap();
        let statuses = p
            .status
            .as_mut()
            .unwrap()
            .container_statuses
            .as_mut()
            .unwrap();
        for cs in statuses.iter_mut() {
            if cs.name == restarted {
                cs.restart_count += 1;
            }
            cs.container_id = Some(format!("containerd://{}-{}", cs.name, cs.restart_count));
        }
        let containers = spec
            .containers
            .iter()
            .map(|c| RuntimeContainerMeta {
                name: c.name.clone(),
                container_id: statuses
                    .iter()
                    .find(|s| s.name == c.name)
                    .unwrap()
                    .container_id
                    .clone()
                    .unwrap(),
                restart_count: 0,
                hashes: RuntimeContainerHashes {
                    extracted_env_from_metadata_hash: crate::envhash::expected_hash(c, &p.metadata),
                    ..Default::default()
                },
            })
            .collect();
        let meta = serde_json::to_string(&RuntimeContainerMetaSet { containers }).unwrap();
        p.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(keys::RUNTIME_CONTAINERS_META.into(), meta);
    }

    fn batches(p: &Pod) -> Vec<Vec<String>> {
        inplace_state(p)
            .unwrap()
            .container_batches_record
            .into_iter()
            .map(|b| b.containers)
            .collect()
    }

    #[test]
    fn a_container_restarted_for_its_env_goes_first_when_it_has_the_higher_priority() {
        // Upstream's "in-place update two container image and env from metadata with
        // priorities": redis (priority 10) reads `config`; nginx's image changes.
        let mut p = pod_with_priorities("redis", "nginx", "redis");
        let w = start_env_and_image_update(&p, "redis", "nginx");
        let patch = w.pod_patch.clone().unwrap();
        assert_eq!(patch["metadata"]["annotations"]["config"], "bar");
        assert!(
            patch.get("spec").is_none(),
            "nginx's image waits for redis: {patch}"
        );
        apply(&mut p, &w);
        assert_eq!(batches(&p), [["redis"]]);
        assert_eq!(
            inplace_state(&p).unwrap().next_container_images,
            BTreeMap::from([("nginx".to_string(), "nginx:2".to_string())])
        );
        // redis not restarted yet (no runtime meta for the new value): nginx waits.
        assert!(refresh(&p, None, t(1)).writes.pod_patch.is_none());
        agent_restarts_for_env(&mut p, "redis");
        let r = refresh(&p, None, t(12));
        assert_eq!(
            r.writes.pod_patch.as_ref().unwrap()["spec"]["containers"][0]["name"],
            "nginx"
        );
        apply(&mut p, &r.writes);
        assert_eq!(batches(&p), [["redis"], ["nginx"]]);
        assert!(!is_update_completed(&p));
        kubelet(&mut p);
        agent_restarts_for_env(&mut p, "");
        assert!(is_update_completed(&p));
    }

    #[test]
    fn the_metadata_a_later_batch_reads_is_written_with_that_batch() {
        // nginx (priority 10) gets a new image; redis, below it, reads `config`: the new
        // `config` would have the agent restart redis at once, so it waits for nginx.
        let mut p = pod_with_priorities("nginx", "redis", "redis");
        let w = start_env_and_image_update(&p, "redis", "nginx");
        let patch = w.pod_patch.clone().unwrap();
        assert_eq!(patch["spec"]["containers"][0]["name"], "nginx");
        assert!(
            patch["metadata"]["annotations"].get("config").is_none(),
            "{patch}"
        );
        apply(&mut p, &w);
        assert_eq!(batches(&p), [["nginx"]]);
        assert!(!is_update_completed(&p));
        assert!(refresh(&p, None, t(1)).writes.pod_patch.is_none());
        kubelet(&mut p);
        agent_restarts_for_env(&mut p, "");
        let r = refresh(&p, None, t(2));
        let patch = r.writes.pod_patch.clone().unwrap();
        assert_eq!(patch["metadata"]["annotations"]["config"], "bar");
        assert!(patch.get("spec").is_none());
        apply(&mut p, &r.writes);
        assert_eq!(batches(&p), [["nginx"], ["redis"]]);
        assert!(
            !is_update_completed(&p),
            "redis still runs with the old value"
        );
        agent_restarts_for_env(&mut p, "redis");
        assert!(is_update_completed(&p));
    }

    #[test]
    fn containers_reading_a_changed_key_join_the_batch_that_changes_it() {
        let mut p = pod_with_priorities("nginx", "redis", "redis");
        // nginx reads `config` too: both restart in the first batch.
        let c = &mut p.spec.as_mut().unwrap().containers[0];
        c.env.as_mut().unwrap().push(serde_json::from_value(json!({"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['config']"}}})).unwrap());
        let mut s = env_and_image_spec("redis", "nginx");
        s.container_ref_metadata
            .insert("nginx".into(), s.container_ref_metadata["redis"].clone());
        let batch = plan_batch(
            &p,
            &s.container_images,
            &s.container_ref_metadata,
            &s.container_resources,
        );
        assert_eq!(
            batch.containers,
            BTreeSet::from(["nginx".to_string(), "redis".to_string()])
        );
        assert!(!batch.has_next());
    }
}
