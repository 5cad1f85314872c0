//! Building new Pods and their PVCs, and choosing instance ids (as `createPods` and
//! `getOrGenAvailableIDs` in openkruise/kruise v1.9.0
//! pkg/controller/cloneset/sync/cloneset_scale.go).

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod as NewPod;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, PodReadinessGate, PodTemplateSpec,
    Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kruise_api::appspub::LifecycleState;
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_workload::revision;

use super::{Action, World, label};

/// The owner reference every Pod, PVC and revision of the CloneSet carries.
pub fn owner_reference(world: &World) -> OwnerReference {
    owner_reference_of(world.cs)
}

pub fn owner_reference_of(cs: &kruise_api::apps_v1alpha1::CloneSet) -> OwnerReference {
    kruise_runtime::meta::controller_owner_reference(cs)
}

/// `<pvc template>-<cloneset>-<id>`.
pub fn pvc_name(template: &str, cloneset: &str, id: &str) -> String {
    format!("{template}-{cloneset}-{id}")
}

/// Instance ids for `n` new Pods: first ids of PVCs no active Pod uses (so a Pod deleted
/// or evicted from outside gets its volume back), then fresh ones from `fresh`.
pub fn instance_ids(
    world: &World,
    n: usize,
    fresh: &mut dyn Iterator<Item = String>,
) -> Vec<String> {
    let pod_ids: BTreeSet<&str> = world
        .pods
        .iter()
        .filter_map(|p| label(p, keys::CLONESET_INSTANCE_ID))
        .collect();
    let pvc_ids: BTreeSet<&str> = world
        .pvcs
        .iter()
        .filter_map(|c| {
            c.metadata
                .labels
                .as_ref()?
                .get(keys::CLONESET_INSTANCE_ID)
                .map(String::as_str)
        })
        .collect();
    let mut ids: Vec<String> = if world.cs.spec.scale_strategy.disable_pvc_reuse {
        Vec::new()
    } else {
        pvc_ids
            .iter()
            .filter(|id| !pod_ids.contains(*id))
            .map(|s| s.to_string())
            .take(n)
            .collect()
    };
    while ids.len() < n {
        let Some(id) = fresh.next() else { break };
        if !pod_ids.contains(id.as_str()) && !pvc_ids.contains(id.as_str()) && !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// A new Pod with instance id `id` from `revision`, and the PVCs it needs that do not exist yet.
pub fn new_pod(
    world: &World,
    revision_: &ControllerRevision,
    id: &str,
) -> Result<(NewPod, Vec<PersistentVolumeClaim>), String> {
    let revision_name = revision_.metadata.name.clone().unwrap_or_default();
    let template: PodTemplateSpec = revision::template_of(revision_)
        .ok_or_else(|| format!("revision {revision_name} has no template"))
        .and_then(|t| {
            serde_json::from_value(t).map_err(|e| format!("revision {revision_name}: {e}"))
        })?;
    let cs_name = world.name();
    let namespace = world.cs.metadata.namespace.clone().unwrap_or_default();
    let hash = revision::short_hash(&revision_name).to_string();
    let template_meta = template.metadata.unwrap_or_default();

    let mut labels = template_meta.labels.unwrap_or_default();
    labels.insert(keys::CLONESET_INSTANCE_ID.into(), id.into());
    labels.insert(
        keys::CONTROLLER_REVISION_HASH.into(),
        if world.options.short_hash {
            hash.clone()
        } else {
            revision_name.clone()
        },
    );
    labels.insert(keys::POD_TEMPLATE_HASH.into(), hash);

    let mut spec = template.spec.unwrap_or_default();
    let gates = spec.readiness_gates.get_or_insert_with(Vec::new);
    for gate in [keys::INPLACE_UPDATE_READY, keys::KRUISE_POD_READY] {
        if !gates.iter().any(|g| g.condition_type == gate) {
            gates.push(PodReadinessGate {
                condition_type: gate.into(),
            });
        }
    }

    let owner = owner_reference(world);
    let existing: BTreeSet<&str> = world
        .pvcs
        .iter()
        .filter_map(|c| c.metadata.name.as_deref())
        .collect();
    let mut pvcs = Vec::new();
    for t in &world.cs.spec.volume_claim_templates {
        let template_name = t.metadata.name.clone().unwrap_or_default();
        let claim = pvc_name(&template_name, cs_name, id);
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        volumes.retain(|v| v.name != template_name);
        volumes.push(Volume {
            name: template_name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.clone(),
                read_only: None,
            }),
            ..Default::default()
        });
        if existing.contains(claim.as_str()) {
            continue;
        }
        let mut pvc_labels = world
            .cs
            .spec
            .selector
            .match_labels
            .clone()
            .unwrap_or_default();
        pvc_labels.insert(keys::CLONESET_INSTANCE_ID.into(), id.into());
        pvcs.push(PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(claim),
                namespace: Some(namespace.clone()),
                labels: Some(pvc_labels),
                annotations: t.metadata.annotations.clone(),
                owner_references: Some(vec![owner.clone()]),
                ..Default::default()
            },
            spec: t.spec.clone(),
            status: None,
        });
    }

    let mut pod = NewPod {
        metadata: ObjectMeta {
            name: Some(format!("{cs_name}-{id}")),
            namespace: Some(namespace),
            labels: Some(labels),
            annotations: template_meta.annotations,
            finalizers: template_meta.finalizers,
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    };
    kruise_lifecycle::set_state(&mut pod, LifecycleState::PreparingNormal, world.now);
    Ok((pod, pvcs))
}

/// What `scaleStrategy.disablePVCReuse` does with a PVC of the CloneSet (as `cleanupPVCs` in
/// openkruise/kruise v1.9.0 pkg/controller/cloneset/cloneset_controller.go).
#[derive(Clone, Debug, PartialEq)]
pub enum PvcCleanup<'a> {
    /// Its Pod is terminating or terminated: the Pod becomes its owner, so the garbage
    /// collector removes it with the Pod (and no new Pod can pick it up).
    HandToPod {
        pvc: &'a PersistentVolumeClaim,
        pod: &'a Pod,
    },
    /// No Pod has its instance id any more.
    Delete { pvc: &'a PersistentVolumeClaim },
}

impl<'a> PvcCleanup<'a> {
    pub fn pvc(&self) -> &'a PersistentVolumeClaim {
        match self {
            PvcCleanup::HandToPod { pvc, .. } | PvcCleanup::Delete { pvc } => pvc,
        }
    }

    /// The write that does it, for the CloneSet with UID `owner_uid`.
    pub fn action(self, owner_uid: &str) -> Action<'a> {
        match self {
            PvcCleanup::HandToPod { pvc, pod } => Action::PatchPvc {
                pvc,
                patch: hand_to_pod_patch(pvc, owner_uid, pod),
            },
            PvcCleanup::Delete { pvc } => Action::DeletePvc { pvc },
        }
    }
}

fn instance_id_of(meta: &ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()?
        .get(keys::CLONESET_INSTANCE_ID)
        .map(String::as_str)
}

/// Under `disablePVCReuse`, the PVCs no active Pod uses: those of an inactive Pod (being
/// deleted, or Succeeded/Failed) go to that Pod, the rest are deleted. `owned_pods` are
/// all Pods the CloneSet owns, active or not; `pvcs` the PVCs it owns. A PVC without an
/// instance id is not one the CloneSet made for a Pod and is left alone.
pub fn pvc_cleanup<'a>(
    cs: &kruise_api::apps_v1alpha1::CloneSet,
    owned_pods: &[&'a Pod],
    pvcs: &[&'a PersistentVolumeClaim],
) -> Vec<PvcCleanup<'a>> {
    if !cs.spec.scale_strategy.disable_pvc_reuse {
        return Vec::new();
    }
    let mut active: BTreeSet<&str> = BTreeSet::new();
    let mut inactive: std::collections::BTreeMap<&str, &'a Pod> = Default::default();
    for pod in owned_pods {
        let Some(id) = instance_id_of(&pod.metadata) else {
            continue;
        };
        if kruise_ordering::predicates::is_active(pod) {
            active.insert(id);
        } else {
            inactive.insert(id, pod);
        }
    }
    pvcs.iter()
        .filter_map(|pvc| {
            let id = instance_id_of(&pvc.metadata)?;
            if active.contains(id) {
                return None;
            }
            Some(match inactive.get(id) {
                Some(pod) => PvcCleanup::HandToPod { pvc, pod },
                None => PvcCleanup::Delete { pvc },
            })
        })
        .collect()
}

/// The merge patch that hands a PVC from the CloneSet (`owner_uid`) to `pod`, guarded by
/// the PVC's resourceVersion so a concurrent change of its owners is not overwritten.
pub fn hand_to_pod_patch(
    pvc: &PersistentVolumeClaim,
    owner_uid: &str,
    pod: &Pod,
) -> serde_json::Value {
    let mut owners: Vec<OwnerReference> = pvc
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.uid != owner_uid)
        .cloned()
        .collect();
    let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
    if !owners.iter().any(|o| o.uid == pod_uid) {
        owners.push(OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod_uid,
            controller: Some(true),
            block_owner_deletion: None,
        });
    }
    serde_json::json!({"metadata": {
        "resourceVersion": pvc.metadata.resource_version,
        "ownerReferences": owners,
    }})
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;

    #[test]
    fn new_pods_carry_ids_revision_labels_gates_and_owner() {
        let f = Fixture::new(1);
        let world = f.world();
        let (pod, pvcs) = new_pod(&world, world.update_revision, "abcde").unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("cs-abcde"));
        let labels = pod.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[keys::CLONESET_INSTANCE_ID], "abcde");
        assert_eq!(labels[keys::CONTROLLER_REVISION_HASH], "cs-new");
        assert_eq!(labels[keys::POD_TEMPLATE_HASH], "new");
        assert_eq!(labels[keys::LIFECYCLE_STATE], "PreparingNormal");
        assert_eq!(labels["app"], "cs");
        assert!(
            pod.metadata
                .annotations
                .as_ref()
                .unwrap()
                .contains_key(keys::LIFECYCLE_TIMESTAMP)
        );
        let gates: Vec<_> = pod
            .spec
            .as_ref()
            .unwrap()
            .readiness_gates
            .iter()
            .flatten()
            .map(|g| g.condition_type.as_str())
            .collect();
        assert_eq!(gates, [keys::INPLACE_UPDATE_READY, keys::KRUISE_POD_READY]);
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("CloneSet", Some(true))
        );
        assert_eq!(
            pod.spec.unwrap().containers[0].image.as_deref(),
            Some("nginx:1.7.9")
        );
        assert!(pvcs.is_empty());
    }

    #[test]
    fn short_hash_gate_writes_only_the_hash() {
        let mut f = Fixture::new(1);
        f.options.short_hash = true;
        let world = f.world();
        let (pod, _) = new_pod(&world, world.current_revision, "x").unwrap();
        assert_eq!(
            pod.metadata.labels.unwrap()[keys::CONTROLLER_REVISION_HASH],
            "old"
        );
    }

    fn with_pvc_template(f: &mut Fixture) {
        f.cs.spec.volume_claim_templates = vec![PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data-vol".into()),
                ..Default::default()
            },
            ..Default::default()
        }];
    }

    #[test]
    fn pvc_templates_give_each_pod_its_claim() {
        let mut f = Fixture::new(1);
        with_pvc_template(&mut f);
        let world = f.world();
        let (pod, pvcs) = new_pod(&world, world.update_revision, "abcde").unwrap();
        assert_eq!(pvcs.len(), 1);
        assert_eq!(pvcs[0].metadata.name.as_deref(), Some("data-vol-cs-abcde"));
        assert_eq!(
            pvcs[0].metadata.labels.as_ref().unwrap()[keys::CLONESET_INSTANCE_ID],
            "abcde"
        );
        let volume = &pod.spec.unwrap().volumes.unwrap()[0];
        assert_eq!(
            volume.persistent_volume_claim.as_ref().unwrap().claim_name,
            "data-vol-cs-abcde"
        );
    }

    #[test]
    fn ids_of_orphaned_pvcs_are_reused_first() {
        let mut f = Fixture::new(3);
        with_pvc_template(&mut f);
        f.add_pods(1, Rev::Update, Ready::Yes);
        let used = f.pods[0].metadata.labels.as_ref().unwrap()[keys::CLONESET_INSTANCE_ID].clone();
        for id in [used.as_str(), "orphan"] {
            f.pvcs.push(PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(pvc_name("data-vol", "cs", id)),
                    labels: Some([(keys::CLONESET_INSTANCE_ID.to_string(), id.to_string())].into()),
                    ..Default::default()
                },
                ..Default::default()
            });
        }
        let world = f.world();
        let got = instance_ids(&world, 2, &mut ids());
        assert_eq!(got, ["orphan", "new00"]);
        let (_, pvcs) = new_pod(&world, world.update_revision, "orphan").unwrap();
        assert!(pvcs.is_empty(), "the orphaned PVC is reused, not recreated");
        f.cs.spec.scale_strategy.disable_pvc_reuse = true;
        assert_eq!(instance_ids(&f.world(), 1, &mut ids()), ["new00"]);
    }

    fn with_id(mut pod: Pod, id: &str, uid: &str) -> Pod {
        pod.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(keys::CLONESET_INSTANCE_ID.into(), id.into());
        pod.metadata.name = Some(format!("cs-{id}"));
        pod.metadata.uid = Some(uid.into());
        pod
    }

    fn claim(id: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(format!("data-cs-{}", id.unwrap_or("none"))),
                labels: id
                    .map(|id| [(keys::CLONESET_INSTANCE_ID.to_string(), id.to_string())].into()),
                resource_version: Some("7".into()),
                owner_references: Some(vec![owner_ref()]),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn disable_pvc_reuse_hands_over_or_deletes_what_no_active_pod_uses() {
        let mut f = Fixture::new(1);
        let running = with_id(f.pod(Rev::Update, Ready::Yes), "run", "u1");
        let mut deleting = with_id(f.pod(Rev::Update, Ready::Yes), "del", "u2");
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(f.now));
        let mut failed = with_id(f.pod(Rev::Update, Ready::Yes), "bad", "u3");
        failed.status.get_or_insert_with(Default::default).phase = Some("Failed".into());
        let pods = [&running, &deleting, &failed];
        let claims = [
            claim(Some("run")),
            claim(Some("del")),
            claim(Some("bad")),
            claim(Some("gone")),
            claim(None),
        ];
        let refs: Vec<&PersistentVolumeClaim> = claims.iter().collect();

        assert!(
            pvc_cleanup(&f.cs, &pods, &refs).is_empty(),
            "off by default: PVCs are kept for reuse"
        );
        f.cs.spec.scale_strategy.disable_pvc_reuse = true;
        let got = pvc_cleanup(&f.cs, &pods, &refs);
        assert_eq!(
            got,
            vec![
                PvcCleanup::HandToPod {
                    pvc: &claims[1],
                    pod: &deleting
                },
                PvcCleanup::HandToPod {
                    pvc: &claims[2],
                    pod: &failed
                },
                PvcCleanup::Delete { pvc: &claims[3] },
            ]
        );
    }

    #[test]
    fn hand_over_replaces_the_cloneset_with_the_pod_and_keeps_other_owners() {
        let mut f = Fixture::new(1);
        let pod = with_id(f.pod(Rev::Update, Ready::Yes), "del", "pod-uid");
        let mut pvc = claim(Some("del"));
        pvc.metadata
            .owner_references
            .as_mut()
            .unwrap()
            .push(OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "keep".into(),
                uid: "cm-uid".into(),
                ..Default::default()
            });
        let patch = hand_to_pod_patch(&pvc, "cs-uid", &pod);
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        let owners = patch["metadata"]["ownerReferences"].as_array().unwrap();
        let uids: Vec<&str> = owners.iter().map(|o| o["uid"].as_str().unwrap()).collect();
        assert_eq!(uids, ["cm-uid", "pod-uid"]);
        assert_eq!(owners[1]["kind"], "Pod");
        assert_eq!(owners[1]["name"], "cs-del");
        assert_eq!(owners[1]["controller"], true);
    }
}
