//! The pure part of a reconcile: from one SidecarSet and its matched Pods to the status
//! and the Pod writes of this round. No client, no clock, no randomness.
//!
//! Order of a round (as `openkruise/kruise v1.9.0 pkg/controller/sidecarset/sidecarset_processor.go`
//! `UpdateSidecarSet`):
//! 1. status from the Pods;
//! 2. hot-upgrade resets of Pods whose new twin has taken over — while any Pod waits
//!    for one, nothing else happens;
//! 3. nothing more for `NotUpdate`, `paused`, or when every Pod is updated;
//! 4. candidates (not updated, canary-selected), classified: not upgradable (something
//!    other than an image changed: condition `SidecarSetUpgradable=False`), mid-upgrade
//!    (skipped), or upgradable;
//! 5. sorted (active-pod order, priority, scatter) and cut by partition and
//!    maxUnavailable; each becomes one Pod write changing images only.

pub mod pods;

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    SidecarSet, SidecarSetStatus, SidecarSetUpdateStrategyType, SidecarSetUpgradeSpec,
};
use kruise_api::appspub::{InPlaceUpdateContainerStatus, InPlaceUpdateState, UpdateScatterTerm};
use kruise_api::intstr::Rounding;
use kruise_api::keys;
use serde_json::{Value, json};

use crate::hash::Hashes;
use crate::inject::{patch_pod_metadata, version_alt_key, version_key};
use crate::matching;

/// Everything a round decides from.
pub struct World<'a> {
    pub ss: &'a SidecarSet,
    pub hashes: &'a Hashes,
    /// `status.latestRevision` to record in upgraded Pods.
    pub latest_revision: &'a str,
    pub collision_count: i32,
    /// The matched Pods (see [`crate::matching::is_matched`]).
    pub pods: Vec<&'a Pod>,
    pub now: Timestamp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// A new image on a sidecar (or the idle twin), the hash refreshed.
    Upgrade,
    /// A hot upgrade's old twin back to the empty image.
    Reset,
}

/// One Pod write: a strategic-merge patch (images, annotations; guarded by the Pod's
/// resourceVersion) and, optionally, a status patch (the upgradable condition).
#[derive(Clone, Debug, PartialEq)]
pub struct PodWrite<'a> {
    pub pod: &'a Pod,
    pub kind: WriteKind,
    /// Container name → new image.
    pub images: BTreeMap<String, String>,
    pub pod_patch: Value,
    pub status_patch: Option<Value>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan<'a> {
    pub status: SidecarSetStatus,
    pub writes: Vec<PodWrite<'a>>,
    /// Pods newly marked not upgradable: (pod, status patch).
    pub not_upgradable: Vec<(&'a Pod, Value)>,
    /// Why nothing (more) was upgraded, for the log.
    pub note: Option<&'static str>,
}

pub fn plan<'a>(w: &World<'a>) -> Plan<'a> {
    let ss = w.ss;
    let mut plan = Plan {
        status: status(w),
        ..Default::default()
    };

    // 2. Hot-upgrade resets: a round that resets does only that. A Pod whose new twin
    // is not ready (an image that does not pull) is not ready for its reset and does
    // not hold the rollout back, as upstream's (its new twin may get the next image).
    let hot = ss.spec.containers.iter().any(|c| c.is_hot_upgrade());
    if hot {
        for pod in w.pods.iter().copied() {
            if pods::is_hot_upgrading(ss, pod) && pods::is_ready_for_reset(ss, pod) {
                plan.writes.push(reset(w, pod));
            }
        }
        if !plan.writes.is_empty() {
            plan.note = Some("hot-upgrade resets");
            return plan;
        }
    }

    // 3. Nothing to roll.
    let strategy = &ss.spec.update_strategy;
    if strategy.strategy_type() == SidecarSetUpdateStrategyType::NotUpdate {
        plan.note = Some("updateStrategy.type is NotUpdate");
        return plan;
    }
    if plan.status.updated_pods >= plan.status.matched_pods {
        return plan;
    }
    if strategy.paused {
        plan.note = Some("updateStrategy.paused");
        return plan;
    }

    // 4. Candidates.
    let mut candidates: Vec<&Pod> = Vec::new();
    for pod in &w.pods {
        if pods::is_updated(ss, w.hashes, pod) {
            continue;
        }
        let selected = strategy
            .selector
            .as_ref()
            .is_none_or(|s| matching::selects(s, matching::labels(pod)));
        if !selected {
            continue;
        }
        if !pods::is_upgradable(ss, w.hashes, pod) {
            if let Some(patch) = upgradable_condition(pod, pods::name(ss), false, w.now) {
                plan.not_upgradable.push((pod, patch));
            }
            continue;
        }
        if pods::is_mid_upgrade(ss, pod) {
            continue;
        }
        candidates.push(pod);
    }

    // 5. Order and budget.
    let scatter = expand_scatter(&strategy.scatter_strategy, &w.pods);
    let order = kruise_ordering::UpdateOrderContext {
        now: w.now,
        priority: strategy.priority_strategy.as_ref(),
        scatter: &scatter,
        preparing_update_first: false,
    };
    kruise_ordering::sort_for_update_among(&mut candidates, &w.pods, &order);
    let chosen = budget(w, &candidates);
    for pod in chosen {
        plan.writes.push(upgrade(w, pod));
    }
    plan
}

/// The status counts (upstream `calculateStatus`).
pub fn status(w: &World) -> SidecarSetStatus {
    let (mut updated, mut ready, mut updated_ready) = (0, 0, 0);
    for pod in &w.pods {
        let is_updated = pods::is_updated(w.ss, w.hashes, pod);
        let is_ready = pods::is_consistent(w.ss, pod, None) && pods::is_ready(w.ss, pod);
        updated += i32::from(is_updated);
        ready += i32::from(is_ready);
        updated_ready += i32::from(is_updated && is_ready);
    }
    SidecarSetStatus {
        observed_generation: w.ss.metadata.generation.unwrap_or(0),
        matched_pods: w.pods.len() as i32,
        updated_pods: updated,
        ready_pods: ready,
        updated_ready_pods: updated_ready,
        latest_revision: w.latest_revision.to_string(),
        collision_count: Some(w.collision_count),
    }
}

/// `"*"` scatter values expand to every value present on the matched Pods.
pub fn expand_scatter(terms: &[UpdateScatterTerm], pods: &[&Pod]) -> Vec<UpdateScatterTerm> {
    let mut out: Vec<UpdateScatterTerm> = Vec::new();
    let mut push = |t: UpdateScatterTerm| {
        if !out.contains(&t) {
            out.push(t);
        }
    };
    for term in terms {
        if term.value != "*" {
            push(term.clone());
            continue;
        }
        for pod in pods {
            if let Some(v) = matching::labels(pod).get(&term.key) {
                push(UpdateScatterTerm {
                    key: term.key.clone(),
                    value: v.clone(),
                });
            }
        }
    }
    out
}

/// Upstream `calculateUpgradeCount` (`pkg/controller/sidecarset/sidecarset_strategy.go`): partition keeps the last `P` candidates; a not-ready candidate is always
/// taken and costs nothing; a ready one only while fewer than maxUnavailable updated Pods
/// are unavailable, each adding one.
pub fn budget<'a>(w: &World<'a>, candidates: &[&'a Pod]) -> Vec<&'a Pod> {
    let strategy = &w.ss.spec.update_strategy;
    let matched = w.pods.len() as i32;
    let partition =
        kruise_workload::arithmetic::partition_replicas(strategy.partition.as_ref(), matched)
            .unwrap_or(0);
    let keep = candidates.len() as i32 - partition;
    if keep <= 0 {
        return Vec::new();
    }
    let max_unavailable = kruise_api::intstr::scaled_value_or(
        strategy.max_unavailable.as_ref(),
        &IntOrString::Int(1),
        matched,
        Rounding::Up,
    )
    .unwrap_or(1)
    .max(0);
    let mut unavailable = w
        .pods
        .iter()
        .filter(|p| {
            pods::is_updated(w.ss, w.hashes, p)
                && !(pods::is_consistent(w.ss, p, None) && pods::is_ready(w.ss, p))
        })
        .count() as i32;
    let mut chosen = Vec::new();
    for pod in &candidates[..keep as usize] {
        if !pods::is_ready(w.ss, pod) {
            chosen.push(*pod);
            continue;
        }
        if unavailable >= max_unavailable {
            break;
        }
        unavailable += 1;
        chosen.push(*pod);
    }
    chosen
}

fn annotations(pod: &Pod) -> BTreeMap<String, String> {
    pod.metadata.annotations.clone().unwrap_or_default()
}

/// The writes of one in-place upgrade (upstream `updatePodSidecarContainer`; for hot upgrade
/// the twin on the empty image gets the new one).
#[allow(
    clippy::expect_used,
    reason = "serde_json serializes maps with string keys without fail"
)]
fn upgrade<'a>(w: &World<'a>, pod: &'a Pod) -> PodWrite<'a> {
    let ss = w.ss;
    let name = pods::name(ss);
    let images_now = pods::spec_images(pod);
    let mut current = annotations(pod);
    let mut images = BTreeMap::new();
    for sc in &ss.spec.containers {
        let wanted = sc.container.image.clone().unwrap_or_default();
        if sc.is_hot_upgrade() {
            let (target, other) = pods::twin_to_upgrade(ss, sc, pod);
            if images_now.get(other.as_str()) == Some(&wanted.as_str()) {
                continue; // the working twin already runs it
            }
            if images_now.get(target.as_str()) != Some(&wanted.as_str()) {
                images.insert(target.clone(), wanted);
            }
            let rv = ss.metadata.resource_version.clone().unwrap_or_default();
            let mut working = matching::working_twins(pod);
            working.insert(sc.name().to_string(), target.clone());
            current.insert(
                keys::SIDECARSET_WORKING_HOTUPGRADE_CONTAINER.into(),
                serde_json::to_string(&working).expect("map serializes"),
            );
            let other_version = current
                .get(&version_key(&other))
                .cloned()
                .unwrap_or_default();
            current.insert(version_key(&target), rv.clone());
            current.insert(version_alt_key(&target), other_version);
            current.insert(version_alt_key(&other), rv);
        } else if images_now.get(sc.name()) != Some(&wanted.as_str()) {
            images.insert(sc.name().to_string(), wanted);
        }
    }
    refresh_hash(w, pod, &mut current);
    record_state(w, pod, &images, &mut current);
    if let Err(e) = patch_pod_metadata(&mut current, &ss.spec.patch_pod_metadata) {
        tracing::warn!(sidecarset = name, pod = %pods_key(pod), error = %e, "patchPodMetadata not applied");
    }
    let listed = matching::injected_list(pod);
    if !listed.contains(name) {
        let mut all: BTreeSet<&str> = listed;
        all.insert(name);
        current.insert(
            keys::SIDECARSET_INJECTED_LIST.into(),
            all.into_iter().collect::<Vec<_>>().join(","),
        );
    }
    PodWrite {
        pod,
        kind: WriteKind::Upgrade,
        pod_patch: pod_patch(pod, &current, &images),
        images,
        status_patch: upgradable_condition(pod, name, true, w.now),
    }
}

/// Hot-upgrade reset (upstream `flipPodSidecarContainerDo`): the old twin to the empty image, its versions to 0.
fn reset<'a>(w: &World<'a>, pod: &'a Pod) -> PodWrite<'a> {
    let ss = w.ss;
    let images_now = pods::spec_images(pod);
    let mut current = annotations(pod);
    let mut images = BTreeMap::new();
    for sc in ss.spec.containers.iter().filter(|c| c.is_hot_upgrade()) {
        let (working, idle) = matching::working_and_idle(pod, sc.name());
        let empty = &sc.upgrade_strategy.hot_upgrade_empty_image;
        if images_now.get(idle.as_str()) == Some(&empty.as_str()) {
            continue;
        }
        images.insert(idle.clone(), empty.clone());
        current.insert(version_key(&idle), "0".into());
        current.insert(version_alt_key(&working), "0".into());
    }
    record_state(w, pod, &images, &mut current);
    PodWrite {
        pod,
        kind: WriteKind::Reset,
        pod_patch: pod_patch(pod, &current, &images),
        images,
        status_patch: None,
    }
}

/// This SidecarSet's `kruise.io/sidecarset-hash` entry now points at the latest spec;
/// legacy string-form annotations are rewritten in the struct form.
#[allow(
    clippy::expect_used,
    reason = "serde_json serializes maps with string keys without fail"
)]
fn refresh_hash(w: &World, pod: &Pod, current: &mut BTreeMap<String, String>) {
    let name = pods::name(w.ss);
    let mut hashes = matching::pod_hashes(pod, keys::SIDECARSET_HASH);
    let sidecar_list: Vec<String> =
        w.ss.spec
            .init_containers
            .iter()
            .filter(|c| c.container.restart_policy.as_deref() == Some("Always"))
            .chain(w.ss.spec.containers.iter())
            .map(|c| c.name().to_string())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
    hashes.insert(
        name.to_string(),
        SidecarSetUpgradeSpec {
            update_timestamp: Time(w.now),
            hash: w.hashes.hash.clone(),
            sidecar_set_name: name.to_string(),
            sidecar_list,
            controller_revision: w.latest_revision.to_string(),
        },
    );
    current.insert(
        keys::SIDECARSET_HASH.into(),
        serde_json::to_string(&hashes).expect("hashes serialize"),
    );
    if let Some(raw) = matching::annotation(pod, keys::SIDECARSET_HASH_WITHOUT_IMAGE) {
        let parsed = matching::pod_hashes(pod, keys::SIDECARSET_HASH_WITHOUT_IMAGE);
        let rewritten = serde_json::to_string(&parsed).expect("hashes serialize");
        if !parsed.is_empty() && rewritten != raw {
            current.insert(keys::SIDECARSET_HASH_WITHOUT_IMAGE.into(), rewritten);
        }
    }
}

/// Merges the imageIDs the changed containers run now into this SidecarSet's entry of
/// `kruise.io/sidecarset-inplace-update-state`: when the imageID moves, the kubelet has
/// restarted them.
#[allow(
    clippy::expect_used,
    reason = "serde_json serializes maps with string keys without fail"
)]
fn record_state(
    w: &World,
    pod: &Pod,
    images: &BTreeMap<String, String>,
    current: &mut BTreeMap<String, String>,
) {
    if images.is_empty() {
        return;
    }
    let name = pods::name(w.ss);
    let mut states = match pods::inplace_states(pod) {
        Some(Ok(s)) => s,
        _ => Default::default(),
    };
    let image_ids: BTreeMap<&str, &str> = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.image_id.as_str()))
        .collect();
    let entry = states
        .entry(name.to_string())
        .or_insert_with(|| InPlaceUpdateState {
            revision: w.hashes.hash.clone(),
            update_timestamp: Time(w.now),
            last_container_statuses: BTreeMap::new(),
            update_env_from_metadata: false,
            update_images: false,
            update_resources: false,
            next_container_images: BTreeMap::new(),
            next_container_ref_metadata: BTreeMap::new(),
            next_container_resources: BTreeMap::new(),
            pre_check_before_next: None,
            container_batches_record: Vec::new(),
        });
    for container in images.keys() {
        entry.last_container_statuses.insert(
            container.clone(),
            InPlaceUpdateContainerStatus {
                image_id: image_ids
                    .get(container.as_str())
                    .copied()
                    .unwrap_or_default()
                    .into(),
            },
        );
    }
    current.insert(
        keys::SIDECARSET_INPLACE_UPDATE_STATE.into(),
        serde_json::to_string(&states).expect("state serializes"),
    );
}

/// Only what differs from the Pod: changed annotations and images, with the Pod's
/// resourceVersion so a write planned on a stale Pod fails instead of clobbering.
fn pod_patch(
    pod: &Pod,
    wanted: &BTreeMap<String, String>,
    images: &BTreeMap<String, String>,
) -> Value {
    let before = annotations(pod);
    let changed: BTreeMap<String, Option<String>> = wanted
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(v))
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    kruise_inplace::metadata_and_images_patch(pod, &BTreeMap::new(), &changed, images)
}

/// The `SidecarSetUpgradable` condition with this SidecarSet's verdict merged into its
/// message (a JSON map name → bool); `None` when the Pod already says so.
#[allow(
    clippy::expect_used,
    reason = "serde_json serializes maps with string keys without fail"
)]
pub fn upgradable_condition(
    pod: &Pod,
    sidecarset: &str,
    upgradable: bool,
    now: Timestamp,
) -> Option<Value> {
    let existing = kruise_ordering::predicates::condition(pod, keys::SIDECARSET_UPGRADABLE);
    let mut verdicts: BTreeMap<String, bool> = existing
        .and_then(|c| c.message.as_deref())
        .and_then(|m| serde_json::from_str(m).ok())
        .unwrap_or_default();
    verdicts.insert(sidecarset.to_string(), upgradable);
    let all = verdicts.values().all(|v| *v);
    let (status, reason) = if all {
        ("True", keys::REASON_ALL_SIDECARSET_UPGRADABLE)
    } else {
        ("False", keys::REASON_UPDATE_IMMUTABLE_FIELD)
    };
    let message = serde_json::to_string(&verdicts).expect("map serializes");
    if let Some(c) = existing
        && c.status == status
        && c.reason.as_deref() == Some(reason)
        && c.message.as_deref() == Some(message.as_str())
    {
        return None;
    }
    let transition = match existing {
        Some(c) if c.status == status => {
            c.last_transition_time.as_ref().map(|t| t.0).unwrap_or(now)
        }
        _ => now,
    };
    Some(json!({"status": {"conditions": [{
        "type": keys::SIDECARSET_UPGRADABLE,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    }]}}))
}

fn pods_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;
