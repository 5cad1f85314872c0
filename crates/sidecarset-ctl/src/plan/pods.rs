//! What the controller reads off one Pod about one SidecarSet (upstream:
//! `openkruise/kruise v1.9.0 pkg/control/sidecarcontrol/sidecarset_control.go`): updated, upgradable, consistent, ready.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::{SidecarContainer, SidecarSet, SidecarSetInPlaceUpdateState};
use kruise_api::keys;

use crate::hash::Hashes;
use crate::matching;

pub fn name(ss: &SidecarSet) -> &str {
    ss.metadata.name.as_deref().unwrap_or_default()
}

/// The Pod's recorded hash for this SidecarSet equals the SidecarSet's.
pub fn is_updated(ss: &SidecarSet, hashes: &Hashes, pod: &Pod) -> bool {
    matching::pod_hashes(pod, keys::SIDECARSET_HASH)
        .get(name(ss))
        .is_some_and(|e| e.hash == hashes.hash)
}

/// Only images changed since the Pod was injected (or last upgraded): the image-less
/// hashes agree.
pub fn is_upgradable(ss: &SidecarSet, hashes: &Hashes, pod: &Pod) -> bool {
    matching::pod_hashes(pod, keys::SIDECARSET_HASH_WITHOUT_IMAGE)
        .get(name(ss))
        .is_some_and(|e| e.hash == hashes.without_image)
}

/// Spec image of each container.
pub fn spec_images(pod: &Pod) -> BTreeMap<&str, &str> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| (c.name.as_str(), c.image.as_deref().unwrap_or_default()))
        .collect()
}

/// `kruise.io/sidecarset-inplace-update-state`.
pub fn inplace_states(pod: &Pod) -> Option<Result<SidecarSetInPlaceUpdateState, ()>> {
    matching::annotation(pod, keys::SIDECARSET_INPLACE_UPDATE_STATE)
        .map(|v| serde_json::from_str(v).map_err(|_| ()))
}

fn is_digest(image: &str) -> bool {
    kruise_api::image::ImageRef::parse(image).digest.is_some()
}

fn digest_of(s: &str) -> &str {
    s.rsplit_once('@').map(|(_, d)| d).unwrap_or(s)
}

/// Upstream `IsPodStateConsistent`: the kubelet runs what the spec says for `containers` (default: every
/// container this SidecarSet has in the Pod).
pub fn is_consistent(ss: &SidecarSet, pod: &Pod, containers: Option<&BTreeSet<String>>) -> bool {
    let spec_count = pod.spec.as_ref().map(|s| s.containers.len()).unwrap_or(0);
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    if spec_count != statuses.len() {
        return false;
    }
    let all;
    let containers = match containers {
        Some(c) => c,
        None => {
            all = matching::sidecar_names_in_pod(ss);
            &all
        }
    };
    let images = spec_images(pod);
    let sidecar_images: Vec<(&str, &str)> = images
        .iter()
        .filter(|(n, _)| containers.contains(**n))
        .map(|(n, i)| (*n, *i))
        .collect();
    if !sidecar_images.is_empty() && sidecar_images.iter().all(|(_, i)| is_digest(i)) {
        return sidecar_images.iter().all(|(n, image)| {
            statuses
                .iter()
                .find(|s| s.name == *n)
                .is_some_and(|s| digest_of(&s.image_id) == digest_of(image))
        });
    }
    let Some(states) = inplace_states(pod) else {
        return true; // never upgraded in place: the injected containers are what runs
    };
    let Ok(states) = states else { return false };
    let Some(state) = states.get(name(ss)) else {
        return true;
    };
    statuses
        .iter()
        .filter(|s| containers.contains(&s.name))
        .all(|s| match state.last_container_statuses.get(&s.name) {
            // The imageID has not moved while the spec asks for another image: the
            // kubelet has not restarted the container yet.
            Some(last) => {
                !(last.image_id == s.image_id
                    && images.get(s.name.as_str()) != Some(&s.image.as_str()))
            }
            None => true,
        })
}

/// Pod phase Running with condition Ready=True.
pub fn is_running_and_ready(pod: &Pod) -> bool {
    kruise_ordering::predicates::is_running_and_ready(pod)
}

/// `readyPods` (upstream `IsPodReady`): running and ready, and every hot-upgrade sidecar's idle twin
/// runs exactly the empty image.
pub fn is_ready(ss: &SidecarSet, pod: &Pod) -> bool {
    let images = spec_images(pod);
    let idle_ok = ss
        .spec
        .containers
        .iter()
        .filter(|c| c.is_hot_upgrade())
        .all(|c| {
            let (_, idle) = matching::working_and_idle(pod, c.name());
            images.get(idle.as_str()) == Some(&c.upgrade_strategy.hot_upgrade_empty_image.as_str())
        });
    idle_ok && is_running_and_ready(pod)
}

fn container_ready(pod: &Pod, name: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == name))
        .is_some_and(|c| c.ready)
}

/// Upstream `IsSidecarSetUpgradable`: a sidecar that is ready but not consistent is mid-upgrade: leave the Pod
/// alone this round.
pub fn is_mid_upgrade(ss: &SidecarSet, pod: &Pod) -> bool {
    matching::sidecar_names_in_pod(ss).into_iter().any(|n| {
        container_ready(pod, &n) && !is_consistent(ss, pod, Some(&BTreeSet::from([n.clone()])))
    })
}

/// Hot upgrade (upstream `findContainerToHotUpgrade`, `pkg/control/sidecarcontrol/util_hotupgrade.go`): which twin gets the new image. The one on the empty image;
/// if neither, the not-ready one; if both are ready, the one not working. Returns
/// (to upgrade, the other).
pub fn twin_to_upgrade(ss: &SidecarSet, sc: &SidecarContainer, pod: &Pod) -> (String, String) {
    let (one, two) = matching::twin_names(sc.name());
    let images = spec_images(pod);
    let empty = sc.upgrade_strategy.hot_upgrade_empty_image.as_str();
    if images.get(one.as_str()) == Some(&empty) {
        return (one, two);
    }
    if images.get(two.as_str()) == Some(&empty) {
        return (two, one);
    }
    let ready = |n: &str| {
        container_ready(pod, n) && is_consistent(ss, pod, Some(&BTreeSet::from([n.to_string()])))
    };
    match (ready(&one), ready(&two)) {
        (true, false) => (two, one),
        (false, true) => (one, two),
        _ => {
            let (working, idle) = matching::working_and_idle(pod, sc.name());
            (idle, working)
        }
    }
}

/// Some hot-upgrade sidecar's idle twin is not on the empty image: the Pod waits for the
/// reset that ends its hot upgrade.
pub fn is_hot_upgrading(ss: &SidecarSet, pod: &Pod) -> bool {
    let images = spec_images(pod);
    ss.spec
        .containers
        .iter()
        .filter(|c| c.is_hot_upgrade())
        .any(|c| {
            let (_, idle) = matching::working_and_idle(pod, c.name());
            images.get(idle.as_str()) != Some(&c.upgrade_strategy.hot_upgrade_empty_image.as_str())
        })
}

/// The idle twins of the hot-upgrade sidecars.
pub fn idle_twins(ss: &SidecarSet, pod: &Pod) -> BTreeSet<String> {
    ss.spec
        .containers
        .iter()
        .filter(|c| c.is_hot_upgrade())
        .map(|c| matching::working_and_idle(pod, c.name()).1)
        .collect()
}

/// Hot-upgrade reset condition (upstream `isHotUpgradingReady`,
/// `pkg/controller/sidecarset/sidecarset_hotupgrade.go`): the new twins run what the spec says and every non-idle
/// container is ready (or the whole Pod is Running and Ready). The postStart migration
/// hook holds the new twin not-started until it finishes, so this is "migration done".
pub fn is_ready_for_reset(ss: &SidecarSet, pod: &Pod) -> bool {
    let idle = idle_twins(ss, pod);
    let others: BTreeSet<String> = matching::sidecar_names_in_pod(ss)
        .into_iter()
        .filter(|n| !idle.contains(n))
        .collect();
    if !is_consistent(ss, pod, Some(&others)) {
        return false;
    }
    if is_running_and_ready(pod) {
        return true;
    }
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .filter(|c| !idle.contains(&c.name))
                .all(|c| c.ready)
        })
}
