//! ControllerRevisions of SidecarSets (as `openkruise/kruise v1.9.0
//! pkg/control/sidecarcontrol/history_control.go` makes them): one per distinct injectable spec, in
//! the manager namespace (the watch namespace for a namespace-scoped install), labelled
//! `kruise.io/sidecarset-name` and annotated with both hashes, owned by the SidecarSet so
//! they go with it. They let `injectionStrategy.revision` inject an older spec and give
//! `status.latestRevision`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_api::apps_v1alpha1::{SidecarSet, SidecarSetSpec};
use kruise_api::keys;
use kruise_runtime::api_error::{is_conflict, is_not_found};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::hash::Hashes;
use crate::matching;

/// The revision data: what injection needs to restore a spec, as upstream records it
/// (`{"spec": {"$patch": "replace", containers, initContainers, volumes,
/// imagePullSecrets, patchPodMetadata}}`, absent lists as null).
pub fn revision_data(spec: &SidecarSetSpec) -> Value {
    let full = serde_json::to_value(spec).unwrap_or(Value::Null);
    let mut copy = Map::new();
    copy.insert("$patch".into(), json!("replace"));
    for key in [
        "volumes",
        "containers",
        "initContainers",
        "imagePullSecrets",
        "patchPodMetadata",
    ] {
        copy.insert(key.into(), full.get(key).cloned().unwrap_or(Value::Null));
    }
    json!({ "spec": copy })
}

/// What [`plan_revisions`] decides: the revision to create or bump, and what to prune.
#[derive(Clone, Debug, PartialEq)]
pub struct RevisionPlan {
    /// The latest revision's name.
    pub latest: String,
    pub action: RevisionAction,
    /// Revisions to delete, oldest first.
    pub prune: Vec<String>,
    /// A custom version label to put on the latest revision.
    pub custom_version: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum RevisionAction {
    /// The newest revision already holds this spec.
    Keep,
    /// An older revision holds it: make it the newest.
    Bump {
        name: String,
        revision: i64,
    },
    Create(Box<ControllerRevision>),
}

/// Pure: given the SidecarSet, its existing revisions and matched Pods, what to write.
pub fn plan_revisions(
    ss: &SidecarSet,
    hashes: &Hashes,
    namespace: &str,
    existing: &[&ControllerRevision],
    pods: &[&Pod],
    collision_count: i32,
) -> RevisionPlan {
    let name = ss.name_any();
    let data = revision_data(&ss.spec);
    let mut sorted: Vec<&ControllerRevision> = existing.to_vec();
    sorted.sort_by_key(|r| (r.revision, r.metadata.name.clone()));
    let next = sorted.last().map(|r| r.revision + 1).unwrap_or(1);
    let equal: Vec<&ControllerRevision> = sorted
        .iter()
        .copied()
        .filter(|r| kruise_workload::revision::equal_data(r, &data))
        .collect();
    let (latest, action) = match (equal.last(), sorted.last()) {
        (Some(e), Some(last)) if e.metadata.name == last.metadata.name => {
            (e.name_any(), RevisionAction::Keep)
        }
        (Some(e), _) => (
            e.name_any(),
            RevisionAction::Bump {
                name: e.name_any(),
                revision: next,
            },
        ),
        (None, _) => {
            let revision = new_revision(ss, hashes, namespace, data, next, collision_count);
            (
                revision.name_any(),
                RevisionAction::Create(Box::new(revision)),
            )
        }
    };
    let custom_version = ss
        .labels()
        .get(keys::SIDECARSET_CUSTOM_VERSION)
        .filter(|v| !v.is_empty())
        .filter(|v| {
            let current = sorted
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(latest.as_str()))
                .and_then(|r| r.labels().get(keys::SIDECARSET_CUSTOM_VERSION));
            current != Some(*v)
        })
        .cloned();

    // History: keep at most revisionHistoryLimit (≥ 1), never the latest, one a Pod was
    // injected from, or one injectionStrategy.revision names.
    let limit = ss.spec.revision_history_limit.unwrap_or(10).max(1) as usize;
    let mut live: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| {
            matching::pod_hashes(p, keys::SIDECARSET_HASH)
                .get(&name)
                .map(|e| e.controller_revision.clone())
        })
        .filter(|r| !r.is_empty())
        .collect();
    live.insert(latest.clone());
    if let Some(wanted) = &ss.spec.injection_strategy.revision {
        if let Some(n) = &wanted.revision_name {
            live.insert(n.clone());
        }
        if let Some(v) = &wanted.custom_version
            && let Some(r) = sorted
                .iter()
                .filter(|r| r.labels().get(keys::SIDECARSET_CUSTOM_VERSION) == Some(v))
                .max_by_key(|r| r.revision)
        {
            live.insert(r.name_any());
        }
    }
    let total = sorted.len() + usize::from(matches!(action, RevisionAction::Create(_)));
    let mut excess = total.saturating_sub(limit);
    let mut prune = Vec::new();
    for r in &sorted {
        if excess == 0 {
            break;
        }
        if !live.contains(&r.name_any()) {
            prune.push(r.name_any());
            excess -= 1;
        }
    }
    RevisionPlan {
        latest,
        action,
        prune,
        custom_version,
    }
}

fn new_revision(
    ss: &SidecarSet,
    hashes: &Hashes,
    namespace: &str,
    data: Value,
    revision: i64,
    collision_count: i32,
) -> ControllerRevision {
    let owner = OwnerReference {
        controller: Some(true),
        // Nothing waits on revisions in a foreground deletion; leaving this unset spares
        // the controller the `sidecarsets/finalizers` permission that
        // OwnerReferencesPermissionEnforcement would demand.
        block_owner_deletion: None,
        ..kruise_runtime::meta::owner_reference(ss)
    };
    let mut labels: BTreeMap<String, String> = ss.labels().clone();
    labels.insert(keys::SIDECARSET_NAME_LABEL.into(), ss.name_any());
    let mut annotations: BTreeMap<String, String> = ss
        .annotations()
        .iter()
        .filter(|(k, _)| *k != "kubectl.kubernetes.io/last-applied-configuration")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    annotations.insert(keys::SIDECARSET_HASH.into(), hashes.hash.clone());
    annotations.insert(
        keys::SIDECARSET_HASH_WITHOUT_IMAGE.into(),
        hashes.without_image.clone(),
    );
    kruise_workload::revision::new_controller_revision(
        owner,
        namespace,
        &labels,
        annotations,
        data,
        revision,
        collision_count,
    )
}

/// Carries out a [`RevisionPlan`]; returns the latest revision's name and the collision
/// count (raised when a different revision already has the name we would use).
pub async fn sync(
    client: &Client,
    namespace: &str,
    plan: RevisionPlan,
    collision_count: i32,
) -> Result<(String, i32)> {
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), namespace);
    let mut latest = plan.latest.clone();
    let mut collisions = collision_count;
    match plan.action {
        RevisionAction::Keep => {}
        RevisionAction::Bump { name, revision } => {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"revision": revision})),
            )
            .await?;
        }
        RevisionAction::Create(revision) => {
            let mut revision = *revision;
            loop {
                match api.create(&PostParams::default(), &revision).await {
                    Ok(_) => break,
                    Err(e) if is_conflict(&e) => {
                        let existing = api.get(&revision.name_any()).await?;
                        if existing.data == revision.data {
                            break;
                        }
                        // Same name, other data: a hash collision. Rename and retry.
                        collisions += 1;
                        if collisions > collision_count + 5 {
                            return Err(Error::Revision(format!(
                                "too many revision name collisions for {}",
                                revision.name_any()
                            )));
                        }
                        let data = revision
                            .data
                            .as_ref()
                            .map(|d| d.0.clone())
                            .unwrap_or_default();
                        let hash = kruise_workload::revision::hash(&data, collisions);
                        let owner = revision
                            .metadata
                            .owner_references
                            .as_ref()
                            .and_then(|o| o.first())
                            .map(|o| o.name.clone())
                            .unwrap_or_default();
                        revision.metadata.name =
                            Some(kruise_workload::revision::revision_name(&owner, &hash));
                        if let Some(l) = revision.metadata.labels.as_mut() {
                            l.insert(keys::CONTROLLER_REVISION_HASH_LABEL.into(), hash);
                        }
                        latest = revision.name_any();
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    if let Some(version) = &plan.custom_version {
        api.patch(
            &latest,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {keys::SIDECARSET_CUSTOM_VERSION: version}}}),
            ),
        )
        .await?;
    }
    for name in &plan.prune {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok((latest, collisions))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::hashes;

    fn ss(image: &str) -> SidecarSet {
        let mut ss: SidecarSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
            "metadata": {"name": "s", "uid": "u1"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "containers": [{"name": "c", "image": image}], "revisionHistoryLimit": 2}
        }))
        .unwrap();
        ss.metadata.labels = None;
        ss
    }

    fn stored(plan: &RevisionPlan) -> ControllerRevision {
        match &plan.action {
            RevisionAction::Create(r) => (**r).clone(),
            other => panic!("expected a creation, got {other:?}"),
        }
    }

    #[test]
    fn data_matches_upstreams_shape() {
        let d = revision_data(&ss("busybox").spec);
        assert_eq!(d["spec"]["$patch"], "replace");
        assert_eq!(d["spec"]["containers"][0]["image"], "busybox");
        assert_eq!(d["spec"]["volumes"], Value::Null);
        assert!(d["spec"].get("selector").is_none());
    }

    #[test]
    fn create_keep_bump_and_prune() {
        let a = ss("a");
        let p1 = plan_revisions(&a, &hashes(&a.spec), "kruise-system", &[], &[], 0);
        let r1 = stored(&p1);
        assert_eq!(r1.revision, 1);
        assert_eq!(r1.metadata.namespace.as_deref(), Some("kruise-system"));
        assert_eq!(r1.labels()[keys::SIDECARSET_NAME_LABEL], "s");
        assert_eq!(
            r1.annotations()[keys::SIDECARSET_HASH],
            hashes(&a.spec).hash
        );
        assert_eq!(r1.metadata.owner_references.as_ref().unwrap()[0].uid, "u1");
        assert_eq!(p1.latest, r1.name_any());

        let again = plan_revisions(&a, &hashes(&a.spec), "kruise-system", &[&r1], &[], 0);
        assert_eq!(again.action, RevisionAction::Keep);
        assert_eq!(again.latest, r1.name_any());

        let b = ss("b");
        let r2 = stored(&plan_revisions(&b, &hashes(&b.spec), "ns", &[&r1], &[], 0));
        assert_eq!(r2.revision, 2);
        // Back to a: r1 is bumped past r2, nothing new is created.
        let back = plan_revisions(&a, &hashes(&a.spec), "ns", &[&r1, &r2], &[], 0);
        assert_eq!(
            back.action,
            RevisionAction::Bump {
                name: r1.name_any(),
                revision: 3
            }
        );

        // A third spec with limit 2 prunes the oldest unused revision.
        let c = ss("c");
        let p3 = plan_revisions(&c, &hashes(&c.spec), "ns", &[&r1, &r2], &[], 0);
        assert_eq!(p3.prune, vec![r1.name_any()]);
        // ... unless a Pod still records it.
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "annotations": {
            keys::SIDECARSET_HASH: format!(r#"{{"s":{{"updateTimestamp":"2022-03-06T09:56:15Z","hash":"x","sidecarSetName":"s","sidecarList":["c"],"controllerRevision":"{}"}}}}"#, r1.name_any())
        }}})).unwrap();
        let p4 = plan_revisions(&c, &hashes(&c.spec), "ns", &[&r1, &r2], &[&pod], 0);
        assert_eq!(p4.prune, vec![r2.name_any()]);
    }
}
