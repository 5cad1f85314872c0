//! Building a new Pod and its PVCs, and the PVC retention policy expressed
//! through ownerReferences.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod as NewPod;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, PodReadinessGate, PodTemplateSpec,
    Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kruise_api::apps_v1beta1::{PersistentVolumeClaimRetentionPolicyType, StatefulSet};
use kruise_api::appspub::LifecycleState;
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_runtime::meta;
use kruise_workload::revision;
use serde_json::{Value, json};

use super::{Action, Options, World, pod_name, pod_name_for};

/// `<claim template>-<set>-<ordinal>`.
pub fn claim_name(template: &str, set: &str, ordinal: i32) -> String {
    format!("{template}-{set}-{ordinal}")
}

/// The controller reference a Pod of the set carries.
pub fn controller_reference(sts: &StatefulSet) -> OwnerReference {
    meta::controller_owner_reference(sts)
}

/// A plain (non-controller) reference to the set, as the retention policy puts on PVCs.
fn set_reference(sts: &StatefulSet) -> OwnerReference {
    meta::owner_reference(sts)
}

fn pod_reference(pod: &Pod) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod_name(pod).to_string(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        ..Default::default()
    }
}

/// The Pod for `ordinal` at `revision` (upstream `newVersionedStatefulSetPod`,
/// `openkruise/kruise v1.9.0 pkg/controller/statefulset/stateful_set_utils.go`): the revision's template
/// (the set's own if the revision holds none), identity, claim volumes, the
/// `KruisePodReady` gate lifecycle hooks need (upstream's Pod webhook adds it to every
/// Pod of a Kruise workload), and lifecycle state `Normal`, or `PreparingNormal` while a
/// `preNormal` hook is not yet satisfied.
pub fn new_pod(
    sts: &StatefulSet,
    revision_: &ControllerRevision,
    ordinal: i32,
    options: &Options,
    now: Timestamp,
) -> NewPod {
    let set = sts.metadata.name.as_deref().unwrap_or_default();
    let name = pod_name_for(set, ordinal);
    let revision_name = revision_.metadata.name.clone().unwrap_or_default();
    let template: PodTemplateSpec = revision::template_of(revision_)
        .and_then(|t| serde_json::from_value(t).ok())
        .unwrap_or_else(|| sts.spec.template.clone());
    let template_meta = template.metadata.unwrap_or_default();

    let mut labels = template_meta.labels.unwrap_or_default();
    labels.insert(keys::STATEFULSET_POD_NAME.into(), name.clone());
    if options.pod_index_label {
        labels.insert(keys::POD_INDEX.into(), ordinal.to_string());
    }
    labels.insert(keys::CONTROLLER_REVISION_HASH.into(), revision_name);

    let mut spec = template.spec.unwrap_or_default();
    spec.hostname = Some(name.clone());
    spec.subdomain = sts.spec.service_name.clone().filter(|s| !s.is_empty());
    let gates = spec.readiness_gates.get_or_insert_with(Vec::new);
    if !gates
        .iter()
        .any(|g| g.condition_type == keys::KRUISE_POD_READY)
    {
        gates.push(PodReadinessGate {
            condition_type: keys::KRUISE_POD_READY.into(),
        });
    }
    for t in &sts.spec.volume_claim_templates {
        let template_name = t.metadata.name.clone().unwrap_or_default();
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        volumes.retain(|v| v.name != template_name);
        volumes.push(Volume {
            name: template_name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(&template_name, set, ordinal),
                read_only: None,
            }),
            ..Default::default()
        });
    }

    let mut pod = NewPod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: sts.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: template_meta.annotations,
            finalizers: template_meta.finalizers,
            owner_references: Some(vec![controller_reference(sts)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    };
    let lifecycle = sts.spec.lifecycle.as_ref();
    let state = if kruise_lifecycle::pre_normal_satisfied(&pod, lifecycle) {
        LifecycleState::Normal
    } else {
        LifecycleState::PreparingNormal
    };
    kruise_lifecycle::set_state(&mut pod, state, now);
    pod
}

/// The PVCs of the Pod at `ordinal`, one per claim template (upstream `getPersistentVolumeClaims`): labels of the
/// template plus `selector.matchLabels`, and the set as owner when
/// `whenDeleted: Delete` (so they go with the set).
pub fn claims_for(sts: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let set = sts.metadata.name.as_deref().unwrap_or_default();
    let owned_by_set = when_deleted(sts) == PersistentVolumeClaimRetentionPolicyType::Delete;
    sts.spec
        .volume_claim_templates
        .iter()
        .map(|t| {
            let template_name = t.metadata.name.as_deref().unwrap_or_default();
            let mut labels = t.metadata.labels.clone().unwrap_or_default();
            labels.extend(sts.spec.selector.match_labels.clone().unwrap_or_default());
            let mut owners = t.metadata.owner_references.clone().unwrap_or_default();
            if owned_by_set {
                owners.push(set_reference(sts));
            }
            PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(template_name, set, ordinal)),
                    namespace: sts.metadata.namespace.clone(),
                    labels: Some(labels),
                    owner_references: (!owners.is_empty()).then_some(owners),
                    ..t.metadata.clone()
                },
                spec: t.spec.clone(),
                status: None,
            }
        })
        .collect()
}

/// The claims a Pod at `ordinal` needs that do not exist yet, ready to create. Without
/// gate `StatefulSetAutoDeletePVC` the retention policy puts no owner on them.
pub fn missing_claims(world: &World, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let set_uid = world.sts.metadata.uid.as_deref().unwrap_or_default();
    claims_for(world.sts, ordinal)
        .into_iter()
        .filter(|c| {
            world
                .claim(c.metadata.name.as_deref().unwrap_or_default())
                .is_none()
        })
        .map(|mut c| {
            if !world.options.auto_delete_pvc
                && let Some(owners) = c.metadata.owner_references.as_mut()
            {
                owners.retain(|o| o.uid != set_uid);
                if owners.is_empty() {
                    c.metadata.owner_references = None;
                }
            }
            c
        })
        .collect()
}

/// A claim the Pod at `ordinal` cannot use yet (upstream `PodClaimIsStale`): it is being
/// deleted, or a Pod owns it (handed over by `whenScaled: Delete` to a Pod of that
/// ordinal that is gone or going). Creating the Pod now would bind it to a volume about
/// to disappear; the next round looks again.
pub fn has_stale_claim(world: &World, ordinal: i32) -> bool {
    let set = world.name();
    world.sts.spec.volume_claim_templates.iter().any(|t| {
        let name = claim_name(t.metadata.name.as_deref().unwrap_or_default(), set, ordinal);
        world.claim(&name).is_some_and(|c| {
            c.metadata.deletion_timestamp.is_some()
                || c.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.kind == "Pod" && o.api_version == "v1")
        })
    })
}

fn when_deleted(sts: &StatefulSet) -> PersistentVolumeClaimRetentionPolicyType {
    sts.spec
        .persistent_volume_claim_retention_policy
        .as_ref()
        .and_then(|p| p.when_deleted)
        .unwrap_or_default()
}

fn when_scaled(sts: &StatefulSet) -> PersistentVolumeClaimRetentionPolicyType {
    sts.spec
        .persistent_volume_claim_retention_policy
        .as_ref()
        .and_then(|p| p.when_scaled)
        .unwrap_or_default()
}

/// The ownerReferences the retention policy wants on `claim` of `pod` (upstream
/// `updateClaimOwnerRefForSetAndPod`), or `None` when it already has them. Owners other
/// than the set and this Pod are kept.
///
/// | whenScaled | whenDeleted | live Pod's claim | condemned Pod's claim |
/// |---|---|---|---|
/// | Retain | Retain | neither | neither |
/// | Retain | Delete | set | set |
/// | Delete | Retain | neither | Pod |
/// | Delete | Delete | set | Pod |
pub fn retention_owners(
    sts: &StatefulSet,
    claim: &PersistentVolumeClaim,
    pod: &Pod,
    condemned: bool,
) -> Option<Vec<OwnerReference>> {
    use PersistentVolumeClaimRetentionPolicyType::Delete;
    let scaled_delete = when_scaled(sts) == Delete;
    let want_pod = scaled_delete && condemned;
    let want_set = when_deleted(sts) == Delete && !want_pod;

    let set_ref = set_reference(sts);
    let pod_ref = pod_reference(pod);
    let mut owners = claim.metadata.owner_references.clone().unwrap_or_default();
    let before = owners.clone();
    for (wanted, reference) in [(want_set, set_ref), (want_pod, pod_ref)] {
        let present = owners.iter().any(|o| o.uid == reference.uid);
        if wanted && !present {
            owners.push(reference);
        } else if !wanted && present {
            owners.retain(|o| o.uid != reference.uid);
        }
    }
    (owners != before).then_some(owners)
}

/// PatchPvc actions that bring the claims of `pod` (at `ordinal`) in line with the
/// retention policy; none without gate `StatefulSetAutoDeletePVC`.
pub fn retention_patches<'a>(
    world: &World<'a>,
    pod: &Pod,
    ordinal: i32,
    condemned: bool,
) -> Vec<Action<'a>> {
    if !world.options.auto_delete_pvc {
        return Vec::new();
    }
    live_claims(world, ordinal)
        .into_iter()
        .filter_map(|(_, claim)| {
            let owners = retention_owners(world.sts, claim, pod, condemned)?;
            Some(Action::PatchPvc {
                pvc: claim,
                patch: owners_patch(claim, &owners),
            })
        })
        .collect()
}

/// The existing, not terminating claims of the Pod at `ordinal`, with their templates,
/// in template order.
pub fn live_claims<'a>(
    world: &World<'a>,
    ordinal: i32,
) -> Vec<(&'a PersistentVolumeClaim, &'a PersistentVolumeClaim)> {
    let set = world.name();
    world
        .sts
        .spec
        .volume_claim_templates
        .iter()
        .filter_map(|t| {
            let name = claim_name(t.metadata.name.as_deref().unwrap_or_default(), set, ordinal);
            let claim = world.claim(&name)?;
            claim
                .metadata
                .deletion_timestamp
                .is_none()
                .then_some((t, claim))
        })
        .collect()
}

/// A merge patch replacing the claim's ownerReferences, guarded by its resourceVersion
/// (a merge patch replaces the whole list, so a concurrent change must not be lost).
fn owners_patch(claim: &PersistentVolumeClaim, owners: &[OwnerReference]) -> Value {
    json!({"metadata": {
        "resourceVersion": claim.metadata.resource_version,
        "ownerReferences": owners,
    }})
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use kruise_api::apps_v1beta1::StatefulSetPersistentVolumeClaimRetentionPolicy;
    use kruise_api::appspub::{Lifecycle, LifecycleHook};

    #[test]
    fn new_pods_carry_identity_revision_owner_and_state() {
        let f = Fixture::new(3);
        let options = Options {
            pod_index_label: true,
            ..Default::default()
        };
        let pod = new_pod(&f.sts, &f.update, 2, &options, f.now);
        assert_eq!(pod.metadata.name.as_deref(), Some("web-2"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[keys::STATEFULSET_POD_NAME], "web-2");
        assert_eq!(labels[keys::POD_INDEX], "2");
        assert_eq!(labels[keys::CONTROLLER_REVISION_HASH], "web-new");
        assert_eq!(labels[keys::LIFECYCLE_STATE], "Normal");
        assert_eq!(labels["app"], "nginx");
        assert!(
            pod.metadata
                .annotations
                .as_ref()
                .unwrap()
                .contains_key(keys::LIFECYCLE_TIMESTAMP)
        );
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            (
                "apps.kruise.io/v1beta1",
                "StatefulSet",
                "web",
                "web-uid",
                Some(true),
                Some(true)
            )
        );
        let spec = pod.spec.unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("web-2"));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx-headless"));
        assert_eq!(spec.containers[0].image.as_deref(), Some("nginx:1.7.9"));
        let gates: Vec<_> = spec
            .readiness_gates
            .iter()
            .flatten()
            .map(|g| g.condition_type.as_str())
            .collect();
        assert_eq!(gates, [keys::INPLACE_UPDATE_READY, keys::KRUISE_POD_READY]);

        // The template comes from the revision, not the set.
        let old = new_pod(&f.sts, &f.current, 0, &Options::default(), f.now);
        assert_eq!(
            old.spec.unwrap().containers[0].image.as_deref(),
            Some("nginx:alpine")
        );
        assert_eq!(
            old.metadata.labels.as_ref().unwrap()[keys::CONTROLLER_REVISION_HASH],
            "web-old"
        );
        assert!(
            !old.metadata.labels.unwrap().contains_key(keys::POD_INDEX),
            "PodIndexLabel off"
        );
    }

    #[test]
    fn pre_normal_hook_creates_pods_preparing_normal_unless_all_hooked() {
        let mut f = Fixture::new(1);
        f.sts.spec.lifecycle = Some(Lifecycle {
            pre_normal: Some(LifecycleHook {
                labels_handler: [("gate".to_string(), "on".to_string())].into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        let state = |f: &Fixture| {
            new_pod(&f.sts, &f.update, 0, &Options::default(), f.now)
                .metadata
                .labels
                .unwrap()[keys::LIFECYCLE_STATE]
                .clone()
        };
        assert_eq!(state(&f), "PreparingNormal");
        // The template carries the hook's label: all hooked from the start.
        f.sts
            .spec
            .template
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert("gate".into(), "on".into());
        let mut t = template("nginx:1.7.9");
        t.metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert("gate".into(), "on".into());
        f.update = controller_revision_of("new", t, 2);
        assert_eq!(state(&f), "Normal");
    }

    #[test]
    fn claim_templates_become_volumes_and_claims() {
        let mut f = Fixture::new(1);
        with_claim_template(&mut f, "www");
        // A template volume of the same name is replaced.
        f.update = {
            let mut t = template("nginx:1.7.9");
            t.spec.as_mut().unwrap().volumes = Some(vec![Volume {
                name: "www".into(),
                ..Default::default()
            }]);
            controller_revision_of("new", t, 2)
        };
        let pod = new_pod(&f.sts, &f.update, 1, &Options::default(), f.now);
        let volumes = pod.spec.unwrap().volumes.unwrap();
        assert_eq!(volumes.len(), 1);
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "www-web-1"
        );

        let claims = claims_for(&f.sts, 1);
        assert_eq!(claims.len(), 1);
        let c = &claims[0];
        assert_eq!(c.metadata.name.as_deref(), Some("www-web-1"));
        assert_eq!(c.metadata.namespace.as_deref(), Some("default"));
        let labels = c.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["app"], "nginx", "selector labels merged");
        assert_eq!(labels["tier"], "db", "template labels kept");
        assert!(c.metadata.owner_references.is_none(), "Retain by default");
        assert!(c.spec.is_some());
    }

    fn retention(f: &mut Fixture, when_deleted: &str, when_scaled: &str) {
        let p = |v: &str| {
            Some(if v == "Delete" {
                PersistentVolumeClaimRetentionPolicyType::Delete
            } else {
                PersistentVolumeClaimRetentionPolicyType::Retain
            })
        };
        f.sts.spec.persistent_volume_claim_retention_policy =
            Some(StatefulSetPersistentVolumeClaimRetentionPolicy {
                when_deleted: p(when_deleted),
                when_scaled: p(when_scaled),
            });
    }

    #[test]
    fn when_deleted_delete_makes_the_set_own_new_claims_under_the_gate() {
        let mut f = Fixture::new(1);
        with_claim_template(&mut f, "www");
        retention(&mut f, "Delete", "Retain");
        let owners = claims_for(&f.sts, 0)[0]
            .metadata
            .owner_references
            .clone()
            .unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(
            (owners[0].kind.as_str(), owners[0].uid.as_str()),
            ("StatefulSet", "web-uid")
        );
        assert_eq!(owners[0].controller, None);

        f.options.auto_delete_pvc = true;
        assert!(
            missing_claims(&f.world(), 0)[0]
                .metadata
                .owner_references
                .is_some()
        );
        f.options.auto_delete_pvc = false;
        assert!(
            missing_claims(&f.world(), 0)[0]
                .metadata
                .owner_references
                .is_none()
        );
    }

    #[test]
    fn retention_owners_follow_the_policy_table() {
        let mut f = Fixture::new(1);
        with_claim_template(&mut f, "www");
        f.add_pods(&[0], Rev::Update, Ready::Yes);
        let pod = f.pods[0].clone();
        let claim = claims_for(&f.sts, 0).remove(0);
        let uids = |o: Option<Vec<OwnerReference>>| {
            o.map(|v| v.into_iter().map(|o| o.uid).collect::<Vec<_>>())
        };
        let pod_uid = pod.metadata.uid.clone().unwrap();

        retention(&mut f, "Retain", "Retain");
        assert_eq!(uids(retention_owners(&f.sts, &claim, &pod, true)), None);
        retention(&mut f, "Delete", "Retain");
        assert_eq!(
            uids(retention_owners(&f.sts, &claim, &pod, true)),
            Some(vec!["web-uid".to_string()])
        );
        retention(&mut f, "Retain", "Delete");
        assert_eq!(uids(retention_owners(&f.sts, &claim, &pod, false)), None);
        assert_eq!(
            uids(retention_owners(&f.sts, &claim, &pod, true)),
            Some(vec![pod_uid.clone()])
        );
        retention(&mut f, "Delete", "Delete");
        assert_eq!(
            uids(retention_owners(&f.sts, &claim, &pod, false)),
            Some(vec!["web-uid".to_string()])
        );
        // A claim owned by the set whose Pod is condemned goes to the Pod instead.
        let mut owned = claim.clone();
        owned.metadata.owner_references = Some(vec![set_reference(&f.sts)]);
        assert_eq!(
            uids(retention_owners(&f.sts, &owned, &pod, true)),
            Some(vec![pod_uid])
        );
        // Back to Retain: the set lets go.
        retention(&mut f, "Retain", "Retain");
        assert_eq!(
            uids(retention_owners(&f.sts, &owned, &pod, false)),
            Some(vec![])
        );
    }

    #[test]
    fn claims_owned_by_a_pod_or_being_deleted_are_stale() {
        let mut f = Fixture::new(1);
        with_claim_template(&mut f, "www");
        f.pvcs.push(claims_for(&f.sts, 0).remove(0));
        assert!(!has_stale_claim(&f.world(), 0));
        f.pvcs[0].metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: "web-0".into(),
            uid: "old-uid".into(),
            ..Default::default()
        }]);
        assert!(has_stale_claim(&f.world(), 0));
        f.pvcs[0].metadata.owner_references = None;
        f.pvcs[0].metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(f.now));
        assert!(has_stale_claim(&f.world(), 0));
        assert!(!has_stale_claim(&f.world(), 1), "no claim yet");
    }
}
