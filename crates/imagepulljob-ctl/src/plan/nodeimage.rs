//! NodeImage lifecycle and pruning (openkruise/kruise v1.9.0
//! pkg/controller/nodeimage/nodeimage_controller.go): one NodeImage per Ready node with the node's
//! labels, deleted with the node (unless labelled fake), and its spec pruned of tags nobody wants
//! any more. Pure.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Node;
use kruise_api::apps_v1alpha1::{
    ImagePullJob, NodeImage, NodeImageSpec, REFERENCE_OBJECT_MODE_BATCH, ReferenceObject,
};
use kruise_api::keys;
use kube::{Resource, ResourceExt};

/// A NodeImage is created this long after its Node first reports Ready.
pub const CREATE_AFTER_READY: SignedDuration = SignedDuration::from_secs(30);

/// A change to the set of NodeImages.
#[derive(Clone, Debug, PartialEq)]
pub enum Lifecycle {
    /// Create `NodeImage/<name>` with these labels and an empty spec.
    Create {
        name: String,
        labels: BTreeMap<String, String>,
    },
    /// Set the NodeImage's labels to the Node's.
    Relabel {
        name: String,
        labels: BTreeMap<String, String>,
    },
    /// The Node is gone.
    Delete { name: String },
}

/// When the node became Ready (the Ready condition's last transition), if it is Ready.
pub fn ready_since(node: &Node) -> Option<Timestamp> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map_or(Timestamp::UNIX_EPOCH, |t| t.0)
        })
}

/// The lifecycle changes, and how soon to look again for a node not Ready long enough.
pub fn lifecycle(
    nodes: &[&Node],
    node_images: &[&NodeImage],
    now: Timestamp,
) -> (Vec<Lifecycle>, Option<Duration>) {
    let existing: BTreeMap<String, &NodeImage> =
        node_images.iter().map(|ni| (ni.name_any(), *ni)).collect();
    let mut out = Vec::new();
    let mut again: Option<Duration> = None;
    for node in nodes {
        let name = node.name_any();
        let labels = node.labels().clone();
        match existing.get(&name) {
            Some(ni) => {
                if ni.labels() != &labels {
                    out.push(Lifecycle::Relabel { name, labels });
                }
            }
            None => {
                let Some(since) = ready_since(node) else {
                    continue;
                };
                let at = since + CREATE_AFTER_READY;
                if at <= now {
                    out.push(Lifecycle::Create { name, labels });
                } else {
                    let wait = at.duration_since(now).unsigned_abs();
                    again = Some(again.map_or(wait, |a| a.min(wait)));
                }
            }
        }
    }
    let node_names: std::collections::BTreeSet<String> =
        nodes.iter().map(|n| n.name_any()).collect();
    for (name, ni) in existing {
        let fake = ni.labels().contains_key(keys::FAKE_NODEIMAGE);
        if !node_names.contains(&name) && !fake && ni.meta().deletion_timestamp.is_none() {
            out.push(Lifecycle::Delete { name });
        }
    }
    (out, again)
}

/// What pruning knows about the world.
pub struct PruneWorld<'a> {
    /// The UID of job `<namespace>/<name>`, or `None` when it does not exist; only asked
    /// for namespaces in scope.
    pub job_uid: &'a dyn Fn(&str, &str) -> Option<String>,
    /// Whether this instance sees the jobs of that namespace (a namespaced instance
    /// leaves other namespaces' owners alone).
    pub in_scope: &'a dyn Fn(&str) -> bool,
    /// Whether a pull secret still exists (`None`: unknown, keep it).
    pub secret_exists: &'a dyn Fn(&ReferenceObject) -> Option<bool>,
    pub now: Timestamp,
}

/// The pruned spec (upstream's `doUpdateNodeImage`) when anything changed, and when to look again
/// (the next tag TTL expiry).
pub fn prune(ni: &NodeImage, world: &PruneWorld) -> (Option<NodeImageSpec>, Option<Duration>) {
    let job_kind = ImagePullJob::kind(&());
    let mut spec = ni.spec.clone();
    let mut again: Option<Duration> = None;
    let status = ni.status.as_ref();
    for (name, image) in spec.images.iter_mut() {
        image.tags.retain_mut(|tag| {
            if tag.created_at.is_none() {
                return false;
            }
            let had_owners = !tag.owner_references.is_empty();
            tag.owner_references.retain(|o| {
                if o.kind.as_deref() != Some(&*job_kind) {
                    return true;
                }
                let ns = o.namespace.as_deref().unwrap_or_default();
                if !(world.in_scope)(ns) {
                    return true;
                }
                let name = o.name.as_deref().unwrap_or_default();
                (world.job_uid)(ns, name).is_some_and(|uid| Some(&uid) == o.uid.as_ref())
            });
            if had_owners && tag.owner_references.is_empty() {
                return false;
            }
            let ttl = tag
                .pull_policy
                .as_ref()
                .and_then(|p| p.ttl_seconds_after_finished);
            let done = status
                .and_then(|s| s.image_statuses.get(name))
                .and_then(|s| {
                    s.tags
                        .iter()
                        .find(|t| t.tag == tag.tag && t.version == tag.version)
                })
                .and_then(|t| t.completion_time.as_ref().map(|c| c.0));
            if let (Some(ttl), Some(done)) = (ttl, done) {
                let expiry = done + SignedDuration::from_secs(ttl.max(0) as i64);
                if expiry <= world.now {
                    return false;
                }
                let wait = expiry.duration_since(world.now).unsigned_abs();
                again = Some(again.map_or(wait, |a| a.min(wait)));
            }
            true
        });
        // A `batch` reference goes with its image entry (upstream's nodeimage controller).
        image.pull_secrets.retain(|s| {
            s.mode == REFERENCE_OBJECT_MODE_BATCH || (world.secret_exists)(s) != Some(false)
        });
    }
    spec.images.retain(|_, image| !image.tags.is_empty());
    ((spec != ni.spec).then_some(spec), again)
}

/// A tag the node never answered for: no status of its version this long after createdAt.
pub const NODE_SILENT_AFTER: SignedDuration = SignedDuration::from_secs(600);
/// Grace after a tag's `activeDeadlineSeconds` before the controller fails it.
pub const DEADLINE_GRACE: SignedDuration = SignedDuration::from_secs(600);
pub const MESSAGE_NODE_SILENT: &str = "node has not responded for a long time";
pub const MESSAGE_DEADLINE: &str = "pulling exceeds the activeDeadlineSeconds";

/// A tag the controller marks Failed (upstream's `updateNodeImageStatus`).
#[derive(Clone, Debug, PartialEq)]
pub struct TimedOut {
    pub image: String,
    pub tag: String,
    pub version: i64,
    pub message: &'static str,
    pub owners: Vec<k8s_openapi::api::core::v1::ObjectReference>,
}

/// The tags whose node is silent 10 min after `createdAt`, or still unfinished 10 min
/// after their `activeDeadlineSeconds`; and when the next one would be due.
pub fn timeouts(ni: &NodeImage, now: Timestamp) -> (Vec<TimedOut>, Option<Duration>) {
    let mut out = Vec::new();
    let mut again: Option<Duration> = None;
    let mut due = |at: Timestamp| -> bool {
        if at <= now {
            return true;
        }
        let wait = at.duration_since(now).unsigned_abs();
        again = Some(again.map_or(wait, |a: Duration| a.min(wait)));
        false
    };
    for (name, image) in &ni.spec.images {
        for tag in &image.tags {
            let Some(created) = tag.created_at.as_ref().map(|t| t.0) else {
                continue;
            };
            let status = ni
                .status
                .as_ref()
                .and_then(|s| s.image_statuses.get(name))
                .and_then(|s| {
                    s.tags
                        .iter()
                        .find(|t| t.tag == tag.tag && t.version == tag.version)
                });
            let message = match status {
                Some(s) if s.phase.is_finished() => continue,
                None if due(created + NODE_SILENT_AFTER) => MESSAGE_NODE_SILENT,
                _ => {
                    let deadline = tag
                        .pull_policy
                        .as_ref()
                        .and_then(|p| p.active_deadline_seconds);
                    match deadline {
                        Some(secs)
                            if due(created + SignedDuration::from_secs(secs) + DEADLINE_GRACE) =>
                        {
                            MESSAGE_DEADLINE
                        }
                        _ => continue,
                    }
                }
            };
            out.push(TimedOut {
                image: name.clone(),
                tag: tag.tag.clone(),
                version: tag.version,
                message,
                owners: tag.owner_references.clone(),
            });
        }
    }
    (out, again)
}

/// `status` with the timed-out tags Failed (completed now) and the counters recounted
/// over the spec's tags.
pub fn with_timeouts(
    ni: &NodeImage,
    timed_out: &[TimedOut],
    now: Timestamp,
) -> kruise_api::apps_v1alpha1::NodeImageStatus {
    use kruise_api::apps_v1alpha1::{ImagePullPhase, ImageTagStatus};
    let mut status = ni.status.clone().unwrap_or_default();
    for t in timed_out {
        let tags = &mut status
            .image_statuses
            .entry(t.image.clone())
            .or_default()
            .tags;
        tags.retain(|s| s.tag != t.tag);
        tags.push(ImageTagStatus {
            tag: t.tag.clone(),
            phase: ImagePullPhase::Failed,
            progress: 0,
            start_time: None,
            completion_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now)),
            version: t.version,
            image_id: String::new(),
            message: t.message.to_string(),
        });
    }
    let (mut desired, mut waiting, mut pulling, mut succeeded, mut failed) = (0, 0, 0, 0, 0);
    for (name, image) in &ni.spec.images {
        for tag in &image.tags {
            desired += 1;
            let phase = status
                .image_statuses
                .get(name)
                .and_then(|s| {
                    s.tags
                        .iter()
                        .find(|t| t.tag == tag.tag && t.version == tag.version)
                })
                .map(|s| s.phase);
            match phase {
                Some(ImagePullPhase::Waiting) => waiting += 1,
                Some(ImagePullPhase::Pulling) => pulling += 1,
                Some(ImagePullPhase::Succeeded) => succeeded += 1,
                Some(ImagePullPhase::Failed) => failed += 1,
                None => {}
            }
        }
    }
    status.desired = desired;
    status.waiting = waiting;
    status.pulling = pulling;
    status.succeeded = succeeded;
    status.failed = failed;
    status
}
