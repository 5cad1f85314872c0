//! Spec 4.2: the CloneSet's ControllerRevisions — find or create the update revision,
//! pick the current one, prune history.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_api::keys;
use kruise_workload::revision::{
    self, equal_data, new_controller_revision, revision_data, same_revision,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::error::{Error, Result};
use crate::plan::{pods::owner_reference_of, revision_label};

/// The revisions a reconcile works with.
pub struct Revisions {
    pub current: ControllerRevision,
    pub update: ControllerRevision,
    pub all: Vec<ControllerRevision>,
    /// The collision count to report in status (changed if a hash collided).
    pub collision_count: Option<i32>,
}

/// Hash of `volumeClaimTemplates` (annotation `kruise.io/cloneset-volumeclaimtemplate-hash`).
fn vct_hash(cs: &CloneSet) -> String {
    if cs.spec.volume_claim_templates.is_empty() {
        return String::new();
    }
    let data = serde_json::to_value(&cs.spec.volume_claim_templates).unwrap_or_default();
    revision::safe_encode(&revision::fnv1_32(&[&revision::go_json(&data)]).to_string())
}

/// Finds the revision equal to the current template (re-numbering it if it is an older
/// one: a rollback) or creates it, bumping the collision count on a hash clash.
pub async fn sync(
    client: &Client,
    cs: &CloneSet,
    owned: Vec<Arc<ControllerRevision>>,
) -> Result<Revisions> {
    let ns = cs
        .namespace()
        .ok_or_else(|| Error::MissingObjectKey(cs.name_any()))?;
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), &ns);
    let mut all: Vec<ControllerRevision> = owned.iter().map(|r| (**r).clone()).collect();
    all.sort_by_key(|r| (r.revision, r.name_any()));
    let data = revision_data(&serde_json::to_value(&cs.spec.template)?);
    let mut collision_count = cs.status.as_ref().and_then(|s| s.collision_count);
    let latest = all.last().map(|r| r.revision).unwrap_or(0);

    let update = match all.iter().rposition(|r| equal_data(r, &data)) {
        Some(i) if all[i].revision == latest => all[i].clone(),
        Some(i) => {
            // Back to an older template: reuse its revision with the next number, and
            // the volumeClaimTemplates of now.
            let name = all[i].name_any();
            let patched = api
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({
                        "revision": latest + 1,
                        "metadata": {"annotations": {
                            keys::CLONESET_VOLUME_CLAIM_TEMPLATE_HASH: vct_hash(cs),
                        }},
                    })),
                )
                .await?;
            all[i] = patched.clone();
            patched
        }
        None => {
            let mut annotations: BTreeMap<String, String> = cs.annotations().clone();
            annotations.insert(
                keys::CLONESET_VOLUME_CLAIM_TEMPLATE_HASH.into(),
                vct_hash(cs),
            );
            let labels = crate::plan::template_labels(cs);
            loop {
                let candidate = new_controller_revision(
                    owner_reference_of(cs),
                    &ns,
                    &labels,
                    annotations.clone(),
                    data.clone(),
                    latest + 1,
                    collision_count.unwrap_or(0),
                );
                match api.create(&PostParams::default(), &candidate).await {
                    Ok(created) => {
                        all.push(created.clone());
                        break created;
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => {
                        let existing = api.get(&candidate.name_any()).await?;
                        if equal_data(&existing, &data) {
                            all.push(existing.clone());
                            break existing;
                        }
                        // A different template hashed to the same name.
                        collision_count = Some(collision_count.unwrap_or(0) + 1);
                        if collision_count > Some(100) {
                            return Err(Error::Revision(format!(
                                "too many hash collisions for {}",
                                cs.name_any()
                            )));
                        }
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
    };
    let status_current = cs
        .status
        .as_ref()
        .map(|s| s.current_revision.as_str())
        .unwrap_or_default();
    let current = all
        .iter()
        .find(|r| !status_current.is_empty() && r.name_any() == status_current)
        .cloned()
        .unwrap_or_else(|| update.clone());
    Ok(Revisions {
        current,
        update,
        all,
        collision_count,
    })
}

/// Deletes the oldest revisions beyond `revisionHistoryLimit` that are neither current,
/// update, nor used by a Pod.
pub async fn truncate_history(
    client: &Client,
    cs: &CloneSet,
    revisions: &Revisions,
    pods: &[&Pod],
) -> Result<()> {
    let limit = cs.spec.revision_history_limit.unwrap_or(10).max(0) as usize;
    if revisions.all.len() <= limit {
        return Ok(());
    }
    let mut live: BTreeSet<String> =
        [revisions.current.name_any(), revisions.update.name_any()].into();
    for pod in pods {
        if let Some(label) = revision_label(pod) {
            for r in &revisions.all {
                if same_revision(label, &r.name_any()) {
                    live.insert(r.name_any());
                }
            }
        }
    }
    let refs: Vec<&ControllerRevision> = revisions.all.iter().collect();
    let api: Api<ControllerRevision> =
        Api::namespaced(client.clone(), &cs.namespace().unwrap_or_default());
    for r in revision::history_to_prune(&refs, limit, &|name| live.contains(name)) {
        match api.delete(&r.name_any(), &DeleteParams::default()).await {
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
    }
    Ok(())
}
