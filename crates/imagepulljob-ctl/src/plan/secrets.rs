//! Pull secrets and their copies in the config namespace, as the caches hold them: a
//! digest of each Secret's content instead of the content, so a rotated source is seen
//! (its digest differs from its copy's) without keeping any credential in memory.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::Secret;
use kruise_api::apps_v1alpha1::{ImagePullJob, ReferenceObject};
use kube::ResourceExt;

/// Where a cached Secret keeps the digest of its content (type and data). Set by
/// [`prune_to_digest`] in memory only; never written to the API server.
pub const DATA_DIGEST: &str = "imagepulljob-ctl.internal/data-digest";

/// A digest of what a copy carries over from its source: type and data. Comparable
/// within one process (both sides are computed by it), not across versions.
pub fn digest(secret: &Secret) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    secret.type_.hash(&mut hasher);
    // A BTreeMap iterates in key order: the same content always hashes the same.
    for (key, value) in secret.data.iter().flatten() {
        key.hash(&mut hasher);
        value.0.hash(&mut hasher);
    }
    format!("{:016x}", hasher.finish())
}

/// A Secret as the caches keep it: its metadata (no annotations, no managed fields) and
/// [`DATA_DIGEST`]; the data is dropped.
pub fn prune_to_digest(secret: &mut Secret) {
    let digest = digest(secret);
    kruise_runtime::cache::prune(secret);
    secret.metadata.annotations = Some(BTreeMap::from([(DATA_DIGEST.to_string(), digest)]));
    secret.data = None;
    secret.string_data = None;
}

/// The digest a pruned Secret carries (`None`: not pruned by [`prune_to_digest`]).
pub fn cached_digest(secret: &Secret) -> Option<&str> {
    secret.annotations().get(DATA_DIGEST).map(String::as_str)
}

/// Whether a copy of one of `job`'s pull secrets must be made again: it is missing, or
/// its content is not its source's (the source was rotated). A source that does not
/// exist needs nothing (the copy is made once it appears). `source` and `copy` give the
/// digests the caches hold, `None` for a Secret they do not hold. A job in the config
/// namespace uses its Secrets where they are: nothing to copy.
pub fn copies_stale(
    job: &ImagePullJob,
    targets: &[ReferenceObject],
    source: &dyn Fn(&str, &str) -> Option<String>,
    copy: &dyn Fn(&str, &str) -> Option<String>,
) -> bool {
    let ns = job.namespace().unwrap_or_default();
    job.spec
        .template
        .pull_secrets
        .iter()
        .zip(targets)
        .any(|(name, target)| {
            if target.namespace == ns {
                return false;
            }
            match source(&ns, name) {
                None => false,
                Some(wanted) => copy(&target.namespace, &target.name).as_ref() != Some(&wanted),
            }
        })
}
