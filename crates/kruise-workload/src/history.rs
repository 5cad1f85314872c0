//! A workload's ControllerRevisions through the API: find or create the revision of
//! the current template (reusing an equal older one: a rollback), pick the current
//! revision, and prune history beyond `revisionHistoryLimit`. The pure parts (hashing,
//! naming, what to prune) are in [`crate::revision`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_runtime::api_error::{is_conflict, is_not_found};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::revision::{self, equal_data, new_controller_revision, same_revision, short_hash};

#[derive(Debug, thiserror::Error)]
pub enum RevisionError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("too many hash collisions for {0}")]
    TooManyCollisions(String),
}

/// What a workload's revisions are made of.
pub struct RevisionSource<'a> {
    /// The workload as the revisions' controller owner.
    pub owner: OwnerReference,
    pub namespace: &'a str,
    /// The revision data of the current spec (`revision::revision_data`).
    pub data: Value,
    /// The template's labels (copied to new revisions).
    pub labels: BTreeMap<String, String>,
    /// Annotations of a new revision; when an older revision is reused, they are
    /// written on it again (they describe the spec of now).
    pub annotations: BTreeMap<String, String>,
    /// `status.currentRevision` (empty: none yet).
    pub current_revision: &'a str,
    /// `status.collisionCount`.
    pub collision_count: Option<i32>,
    /// Also label every revision with its hash under this key (Advanced DaemonSet:
    /// `controller-revision-hash`, the label its Pods carry), as the DaemonSet `snapshot`
    /// of Kubernetes and OpenKruise does; a revision found without it gets it. OpenKruise
    /// v1.9.0 labels one it finds without it with the revision's *name*
    /// (pkg/controller/daemonset/daemonset_history.go `constructHistory`), which no Pod
    /// carries: taking over from us, it would recreate every Pod.
    pub hash_label: Option<&'static str>,
}

/// The revisions a reconcile works with.
pub struct Revisions {
    pub current: ControllerRevision,
    pub update: ControllerRevision,
    /// Every revision, oldest first.
    pub all: Vec<ControllerRevision>,
    /// The collision count to report in status (changed if a hash collided).
    pub collision_count: Option<i32>,
}

/// Finds the revision equal to the current spec (re-numbering it if it is an older one)
/// or creates it, bumping the collision count on a hash clash.
pub async fn sync(
    client: &Client,
    source: RevisionSource<'_>,
    owned: Vec<Arc<ControllerRevision>>,
) -> Result<Revisions, RevisionError> {
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), source.namespace);
    let mut all: Vec<ControllerRevision> = owned.iter().map(|r| (**r).clone()).collect();
    all.sort_by_key(|r| (r.revision, r.name_any()));
    if let Some(key) = source.hash_label {
        for revision in all.iter_mut().filter(|r| !r.labels().contains_key(key)) {
            let name = revision.name_any();
            let patch = json!({"metadata": {"labels": {key: short_hash(&name)}}});
            *revision = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
    }
    let data = &source.data;
    let mut collision_count = source.collision_count;
    let latest = all.last().map(|r| r.revision).unwrap_or(0);

    let update = match all.iter().rposition(|r| equal_data(r, data)) {
        Some(i) if all[i].revision == latest => all[i].clone(),
        Some(i) => {
            // Back to an older template: reuse its revision with the next number.
            let mut patch = json!({"revision": latest + 1});
            if !source.annotations.is_empty() {
                patch["metadata"] = json!({"annotations": source.annotations});
            }
            let patched = api
                .patch(
                    &all[i].name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await?;
            all[i] = patched.clone();
            patched
        }
        None => loop {
            let candidate = new_controller_revision(
                source.owner.clone(),
                source.namespace,
                &source.labels,
                source.annotations.clone(),
                data.clone(),
                latest + 1,
                collision_count.unwrap_or(0),
            );
            let mut candidate = candidate;
            if let Some(key) = source.hash_label {
                let hash = short_hash(&candidate.name_any()).to_string();
                candidate.labels_mut().insert(key.to_string(), hash);
            }
            match api.create(&PostParams::default(), &candidate).await {
                Ok(created) => {
                    all.push(created.clone());
                    break created;
                }
                Err(e) if is_conflict(&e) => {
                    let existing = api.get(&candidate.name_any()).await?;
                    if equal_data(&existing, data) {
                        all.push(existing.clone());
                        break existing;
                    }
                    // A different template hashed to the same name.
                    collision_count = Some(collision_count.unwrap_or(0) + 1);
                    if collision_count > Some(100) {
                        return Err(RevisionError::TooManyCollisions(source.owner.name));
                    }
                }
                Err(e) => return Err(e.into()),
            }
        },
    };
    let current = all
        .iter()
        .find(|r| !source.current_revision.is_empty() && r.name_any() == source.current_revision)
        .cloned()
        .unwrap_or_else(|| update.clone());
    Ok(Revisions {
        current,
        update,
        all,
        collision_count,
    })
}

/// Deletes the oldest revisions beyond `limit` that are neither current, update, nor
/// used by one of `pods` (by their `controller-revision-hash` label).
pub async fn truncate_history(
    client: &Client,
    namespace: &str,
    revisions: &Revisions,
    pods: &[&Pod],
    limit: usize,
) -> Result<(), kube::Error> {
    if revisions.all.len() <= limit {
        return Ok(());
    }
    let mut live: BTreeSet<String> =
        [revisions.current.name_any(), revisions.update.name_any()].into();
    for pod in pods {
        let Some(label) = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(keys::CONTROLLER_REVISION_HASH))
        else {
            continue;
        };
        for r in &revisions.all {
            if same_revision(label, &r.name_any()) {
                live.insert(r.name_any());
            }
        }
    }
    let refs: Vec<&ControllerRevision> = revisions.all.iter().collect();
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), namespace);
    for r in revision::history_to_prune(&refs, limit, &|name| live.contains(name)) {
        match api.delete(&r.name_any(), &DeleteParams::default()).await {
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e),
            Ok(_) => {}
        }
    }
    Ok(())
}
