//! The CloneSet's ControllerRevisions (openkruise/kruise v1.9.0
//! pkg/controller/cloneset/revision/cloneset_revision.go), through the shared history of
//! `kruise-workload`; what is CloneSet's own is the `volumeClaimTemplates` hash each revision
//! carries (for `RecreatePodWhenChangeVCTInCloneSetGate`).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_workload::history::{self, RevisionSource};
use kruise_workload::revision::{self, revision_data};
use kube::{Client, ResourceExt};

pub use kruise_workload::history::Revisions;

use crate::error::{Error, Result};
use crate::plan::pods::owner_reference_of;

/// Hash of `volumeClaimTemplates` (annotation `kruise.io/cloneset-volumeclaimtemplate-hash`).
fn vct_hash(cs: &CloneSet) -> String {
    if cs.spec.volume_claim_templates.is_empty() {
        return String::new();
    }
    let data = serde_json::to_value(&cs.spec.volume_claim_templates).unwrap_or_default();
    revision::safe_encode(&revision::fnv1_32(&[&revision::go_json(&data)]).to_string())
}

/// Finds or creates the update revision; a reused older revision gets the
/// `volumeClaimTemplates` hash of now.
pub async fn sync(
    client: &Client,
    cs: &CloneSet,
    owned: Vec<Arc<ControllerRevision>>,
) -> Result<Revisions> {
    let ns = cs
        .namespace()
        .ok_or_else(|| Error::MissingObjectKey(cs.name_any()))?;
    let status = cs.status.as_ref();
    let source = RevisionSource {
        owner: owner_reference_of(cs),
        namespace: &ns,
        data: revision_data(&serde_json::to_value(&cs.spec.template)?),
        labels: crate::plan::template_labels(cs),
        annotations: {
            let mut a = cs.annotations().clone();
            a.insert(
                keys::CLONESET_VOLUME_CLAIM_TEMPLATE_HASH.into(),
                vct_hash(cs),
            );
            a
        },
        current_revision: status
            .map(|s| s.current_revision.as_str())
            .unwrap_or_default(),
        collision_count: status.and_then(|s| s.collision_count),
        hash_label: None,
    };
    Ok(history::sync(client, source, owned).await?)
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
    let ns = cs.namespace().unwrap_or_default();
    Ok(history::truncate_history(client, &ns, revisions, pods, limit).await?)
}
