//! PVC resize on rolling update (gate `StatefulSetAutoResizePVCGate`,
//! `volumeClaimUpdateStrategy.type: OnPodRollingUpdate`), as upstream
//! `statefulset_resize_pvc.go` and `pkg/util/pvc`:
//!
//! - a claim is *compatible* with its template when storage class (if both name one)
//!   and access modes match and it requests at least the template's storage;
//! - it is *ready* when its `status.capacity.storage` has caught up with its request;
//! - the rolling update treats a Pod whose claims are not ready as unavailable, and a
//!   Pod whose claims are not compatible as not yet updated: it raises the claims'
//!   requests (only if nothing but the size differs and the storage class allows
//!   expansion) and waits until the resize completed (ready, or the kubelet's
//!   `FileSystemResizePending`) before it updates the Pod itself;
//! - `status.volumeClaims` counts, per template, the live Pods with compatible and
//!   compatible-and-ready claims.
//!
//! Claims that do not exist yet or are being deleted are skipped, as upstream.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kruise_api::apps_v1beta1::{VolumeClaimStatus, VolumeClaimUpdateStrategyType};
use kruise_api::pod::Pod;
use serde_json::json;

use super::{Action, World, ordinal_of, pod_name};

/// Annotation upstream puts on a claim it resized: the set's name.
pub const OWNED_BY_ASTS: &str = "apps.kruise.io/owned-by-asts";

/// Resizing is on for this set: gate and `OnPodRollingUpdate`.
pub fn enabled(world: &World) -> bool {
    world.options.auto_resize_pvc
        && world.sts.spec.volume_claim_update_strategy.type_
            == Some(VolumeClaimUpdateStrategyType::OnPodRollingUpdate)
}

/// A storage quantity in bytes (`1Gi`, `500M`, `2e9`); `None` if it does not parse.
pub fn quantity_bytes(s: &str) -> Option<f64> {
    kruise_api::quantity::parse(s).ok()
}

/// `spec.resources.requests.storage` in bytes.
pub fn requested(claim: &PersistentVolumeClaim) -> Option<f64> {
    let spec = claim.spec.as_ref()?;
    let requests = spec.resources.as_ref()?.requests.as_ref()?;
    quantity_bytes(&requests.get("storage")?.0)
}

/// `status.capacity.storage` in bytes.
pub fn capacity(claim: &PersistentVolumeClaim) -> Option<f64> {
    let capacity = claim.status.as_ref()?.capacity.as_ref()?;
    quantity_bytes(&capacity.get("storage")?.0)
}

/// Upstream `IsClaimCompatibleWithoutSize`: the storage class (when both name one) and
/// the access modes (in order) are the same.
pub fn compatible_without_size(
    claim: &PersistentVolumeClaim,
    template: &PersistentVolumeClaim,
) -> bool {
    let (c, t) = (
        claim.spec.clone().unwrap_or_default(),
        template.spec.clone().unwrap_or_default(),
    );
    if let (Some(a), Some(b)) = (&c.storage_class_name, &t.storage_class_name)
        && a != b
    {
        return false;
    }
    c.access_modes.unwrap_or_default() == t.access_modes.unwrap_or_default()
}

/// How soon a set with a resize in flight is looked at again: claims do not trigger a
/// reconcile (only the set and its Pods do), so a patched claim catching up, and the
/// `status.volumeClaims` counting it, are seen by polling.
pub const RESIZE_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// Upstream `IsPVCNeedExpand`: the claim requests less storage than the template.
pub fn needs_expand(claim: &PersistentVolumeClaim, template: &PersistentVolumeClaim) -> bool {
    matches!((requested(claim), requested(template)), (Some(c), Some(t)) if c < t)
}

/// Upstream `IsPVCCompatibleAndReady`: (requests ≥ template, capacity ≥ request).
pub fn compatible_and_ready(
    claim: &PersistentVolumeClaim,
    template: &PersistentVolumeClaim,
) -> (bool, bool) {
    if !compatible_without_size(claim, template) {
        return (false, false);
    }
    let compatible =
        matches!((requested(claim), requested(template)), (Some(c), Some(t)) if c >= t);
    let ready = matches!((capacity(claim), requested(claim)), (Some(c), Some(r)) if c >= r);
    (compatible, ready)
}

/// Upstream `IsPatchPVCCompleted`: compatible and ready, or compatible and waiting for
/// the kubelet (`FileSystemResizePending`).
pub fn patch_completed(claim: &PersistentVolumeClaim, template: &PersistentVolumeClaim) -> bool {
    match compatible_and_ready(claim, template) {
        (true, true) => true,
        (true, false) => claim
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "FileSystemResizePending" && c.status == "True")
            }),
        _ => false,
    }
}

/// The Pod's existing, not terminating claims with their templates, in template order.
pub fn claims_of<'a>(
    world: &World<'a>,
    pod: &Pod,
) -> Vec<(&'a PersistentVolumeClaim, &'a PersistentVolumeClaim)> {
    match ordinal_of(world.name(), pod_name(pod)) {
        Some(ordinal) => super::pods::live_claims(world, ordinal),
        None => Vec::new(),
    }
}

/// Upstream `IsOwnedPVCsReady`: every claim's capacity has caught up with its request.
pub fn claims_ready(world: &World, pod: &Pod) -> bool {
    claims_of(world, pod)
        .into_iter()
        .all(|(t, c)| compatible_and_ready(c, t).1)
}

/// Upstream `IsClaimsCompatible`: no claim differs from its template (other than by
/// requesting more).
pub fn claims_compatible(world: &World, pod: &Pod) -> bool {
    claims_of(world, pod)
        .into_iter()
        .all(|(t, c)| compatible_without_size(c, t) && !needs_expand(c, t))
}

/// Upstream `IsOwnedPVCsCompleted`.
pub fn claims_completed(world: &World, pod: &Pod) -> bool {
    claims_of(world, pod)
        .into_iter()
        .all(|(t, c)| patch_completed(c, t))
}

/// Upstream `TryPatchPVC`: raise the request of each claim smaller than its template
/// (annotating it `apps.kruise.io/owned-by-asts`), in template order. Stops at the
/// first claim that cannot be resized: one that differs in more than its size (it
/// waits for the claim to be deleted), or whose storage class does not allow volume
/// expansion (or is unknown). The actions before the error are still returned.
pub fn resize_claims<'a>(world: &World<'a>, pod: &Pod) -> (Vec<Action<'a>>, Option<String>) {
    let mut actions = Vec::new();
    for (template, claim) in claims_of(world, pod) {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        if !compatible_without_size(claim, template) {
            return (
                actions,
                Some(format!(
                    "can not patch pvc {name}: contains diff other than spec resource, wait pvc to be deleted"
                )),
            );
        }
        if !needs_expand(claim, template) {
            continue;
        }
        let class = claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_deref());
        if let Some(class) = class {
            match world.allows_expansion(class) {
                None => {
                    return (
                        actions,
                        Some(format!(
                            "could not get sc {class} for {} when checking PVC spec",
                            pod_name(pod)
                        )),
                    );
                }
                Some(false) => {
                    return (
                        actions,
                        Some(format!(
                            "storage class {class} for {} does not support volume expansion",
                            pod_name(pod)
                        )),
                    );
                }
                Some(true) => {}
            }
        }
        let resources = template.spec.as_ref().and_then(|s| s.resources.clone());
        actions.push(Action::PatchPvc {
            pvc: claim,
            patch: json!({
                "metadata": {
                    "resourceVersion": claim.metadata.resource_version,
                    "annotations": {OWNED_BY_ASTS: world.name()},
                },
                "spec": {"resources": resources},
            }),
        });
    }
    (actions, None)
}

/// `status.volumeClaims` (upstream `updatePVCStatus`): per template, the Pods (live
/// ones) whose claim is compatible, and compatible and ready. Empty without templates.
pub fn volume_claims_status<'a>(
    world: &World<'a>,
    pods: impl IntoIterator<Item = &'a Pod>,
) -> Vec<VolumeClaimStatus> {
    let templates = &world.sts.spec.volume_claim_templates;
    let mut status: Vec<VolumeClaimStatus> = templates
        .iter()
        .map(|t| VolumeClaimStatus {
            volume_claim_name: t.metadata.name.clone().unwrap_or_default(),
            ..Default::default()
        })
        .collect();
    for pod in pods {
        for (template, claim) in claims_of(world, pod) {
            let (compatible, ready) = compatible_and_ready(claim, template);
            let Some(entry) = status
                .iter_mut()
                .find(|s| Some(&s.volume_claim_name) == template.metadata.name.as_ref())
            else {
                continue;
            };
            if compatible {
                entry.compatible_replicas += 1;
                entry.compatible_ready_replicas += i32::from(ready);
            }
        }
    }
    status
}
