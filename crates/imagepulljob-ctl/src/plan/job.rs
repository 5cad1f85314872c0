//! ImagePullJob (openkruise/kruise v1.9.0 pkg/controller/imagepulljob/imagepulljob_controller.go
//! and imagepulljob_utils.go): target nodes, per-node state, the NodeImage tag writes under the
//! parallelism limit, and the job's status, completion and TTL. Pure: the caller passes the time
//! and the random TTL jitter.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    ImagePullJob, ImagePullJobCompletionPolicyType, ImagePullJobStatus, ImageSpec,
    ImageTagPullPolicy, ImageTagSpec, NodeImage, ReferenceObject,
};
use kruise_ordering::{predicates, selector};
use kube::{Resource, ResourceExt};

/// Default `pullPolicy.timeoutSeconds`.
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 600;
/// Default `pullPolicy.backoffLimit`.
pub const DEFAULT_BACKOFF_LIMIT: i32 = 3;
/// A Never job's tags expire after about a day (then re-added with a higher version).
pub const NEVER_TTL_SECONDS: i64 = 24 * 3600;
/// A Never job's tag deadline is at least this.
pub const NEVER_MIN_DEADLINE_SECONDS: i64 = 1800;
/// Upper bound of the random part added to an Always job's tag TTL.
pub const ALWAYS_TTL_JITTER_SECONDS: i64 = 300;
/// Bound of the random part (±) of a Never job's tag TTL.
pub const NEVER_TTL_JITTER_SECONDS: i64 = 600;

pub const MESSAGE_COMPLETED: &str = "job has completed";
pub const MESSAGE_DEADLINE: &str = "job exceeds activeDeadlineSeconds";
pub const MESSAGE_NO_PROGRESS: &str = "job is running, no progress";

/// `(name, tag)` of an image reference `name[:tag]` (`latest` without a tag); `None`
/// for an empty name, an empty tag or a digest reference.
pub fn split_image(image: &str) -> Option<(String, String)> {
    let reference = kruise_api::image::ImageRef::parse(image);
    if reference.digest.is_some() {
        return None;
    }
    let (name, tag) = (reference.name, reference.tag.unwrap_or("latest"));
    let valid = |s: &str| !s.is_empty() && !s.chars().any(char::is_whitespace);
    (valid(name) && valid(tag) && !name.ends_with('/')).then(|| (name.into(), tag.into()))
}

/// The job's parallelism: an integer or an integer string ("0"), default 1.
pub fn parallelism(job: &ImagePullJob) -> i32 {
    match &job.spec.template.parallelism {
        None => 1,
        Some(IntOrString::Int(n)) => (*n).max(0),
        Some(IntOrString::String(s)) => s.trim().parse::<i32>().unwrap_or(1).max(0),
    }
}

/// The nodes (NodeImages) the job targets, in the order nodes are written (upstream's
/// `syncNodeImages`): the nodes of matching active, scheduled Pods of the job's namespace
/// (`podSelector`); else the listed names (missing ones ignored); else the label selector; else
/// all.
pub fn targets<'a>(
    job: &ImagePullJob,
    node_images: &'a [std::sync::Arc<NodeImage>],
    pods: &[std::sync::Arc<Pod>],
) -> Vec<&'a NodeImage> {
    let by_name: BTreeMap<String, &NodeImage> = node_images
        .iter()
        .map(|ni| (ni.name_any(), ni.as_ref()))
        .collect();
    let template = &job.spec.template;
    if let Some(pod_selector) = &template.pod_selector {
        let ns = job.namespace().unwrap_or_default();
        let nodes: BTreeSet<&str> = pods
            .iter()
            .filter(|p| p.namespace().as_deref() == Some(ns.as_str()))
            .filter(|p| predicates::is_active(p) && predicates::is_scheduled(p))
            .filter(|p| selector::matches(pod_selector, p.labels()).unwrap_or(false))
            .map(predicates::node_name)
            .collect();
        return nodes
            .into_iter()
            .filter_map(|n| by_name.get(n).copied())
            .collect();
    }
    match &template.selector {
        Some(s) if !s.names.is_empty() => {
            let names: BTreeSet<&String> = s.names.iter().collect();
            names
                .into_iter()
                .filter_map(|n| by_name.get(n).copied())
                .collect()
        }
        Some(s) => by_name
            .into_values()
            .filter(|ni| selector::matches(&s.label_selector, ni.labels()).unwrap_or(false))
            .collect(),
        None => by_name.into_values().collect(),
    }
}

/// Where a node stands for a job (upstream's `calculateStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeState {
    /// The tag does not list the job (or lacks a secret): counted nowhere.
    NotSynced,
    Active,
    Succeeded,
    Failed,
}

/// The job's state on `ni`: synced when the tag lists the job (by UID) as owner and its
/// image holds every secret reference; then the status of the same version decides.
pub fn node_state(
    ni: &NodeImage,
    name: &str,
    tag: &str,
    job_uid: &str,
    secrets: &[ReferenceObject],
) -> NodeState {
    let Some(image) = ni.spec.images.get(name) else {
        return NodeState::NotSynced;
    };
    let Some(spec) = image.tags.iter().find(|t| t.tag == tag) else {
        return NodeState::NotSynced;
    };
    let owned = spec
        .owner_references
        .iter()
        .any(|o| o.uid.as_deref() == Some(job_uid));
    let held = |s: &ReferenceObject| image.pull_secrets.iter().any(|r| r.same_object(s));
    if !owned || !secrets.iter().all(held) {
        return NodeState::NotSynced;
    }
    let status = ni
        .status
        .as_ref()
        .and_then(|s| s.image_statuses.get(name))
        .and_then(|s| {
            s.tags
                .iter()
                .find(|t| t.tag == tag && t.version == spec.version)
        });
    match status.map(|s| s.phase) {
        Some(kruise_api::apps_v1alpha1::ImagePullPhase::Succeeded) => NodeState::Succeeded,
        Some(kruise_api::apps_v1alpha1::ImagePullPhase::Failed) => NodeState::Failed,
        _ => NodeState::Active,
    }
}

/// The job as an owner entry of a NodeImage tag.
pub fn owner_reference(job: &ImagePullJob) -> ObjectReference {
    ObjectReference {
        api_version: Some(ImagePullJob::api_version(&()).into()),
        kind: Some(ImagePullJob::kind(&()).into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        ..Default::default()
    }
}

/// What the plan needs besides the job.
pub struct JobWorld<'a> {
    pub job: &'a ImagePullJob,
    pub targets: Vec<&'a NodeImage>,
    /// The secret references every tag of the job must hold (the copies).
    pub secrets: Vec<ReferenceObject>,
    pub now: Timestamp,
    /// Random part of the tag TTL (seconds): 0..=300 for Always, ±600 for Never.
    pub ttl_jitter_seconds: i64,
    /// The configurable default added to an Always tag's TTL.
    pub default_ttl_seconds: i64,
}

/// What to do for one job.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobPlan {
    /// `(node, image name, new image entry)` to write into NodeImages.
    pub writes: Vec<(String, String, ImageSpec)>,
    pub status: ImagePullJobStatus,
    /// The TTL after completion has passed: delete the job.
    pub delete: bool,
    /// The job finished: its copied secrets can be released.
    pub finished: bool,
    pub requeue_after: Option<Duration>,
}

fn seconds_until(at: Timestamp, now: Timestamp) -> Duration {
    let left = at.duration_since(now);
    if left <= SignedDuration::ZERO {
        Duration::ZERO
    } else {
        left.unsigned_abs()
    }
}

/// The job's plan (upstream's `Reconcile`, `syncNodeImages` and `calculateStatus`).
pub fn plan(world: &JobWorld) -> JobPlan {
    let job = world.job;
    let template = &job.spec.template;
    let always =
        template.completion_policy.policy_type() == ImagePullJobCompletionPolicyType::Always;
    let previous = job.status.clone().unwrap_or_default();
    let now = world.now;
    if let Some(done) = previous.completion_time.as_ref().map(|t| t.0) {
        let mut out = JobPlan {
            status: previous,
            finished: true,
            ..Default::default()
        };
        if let Some(ttl) = template.completion_policy.ttl_seconds_after_finished {
            let expiry = done + SignedDuration::from_secs(ttl.max(0) as i64);
            if expiry <= now {
                out.delete = true;
            } else {
                out.requeue_after = Some(seconds_until(expiry, now));
            }
        }
        return out;
    }
    let Some((name, tag)) = split_image(&job.spec.image) else {
        // Admission rejects it; never write NodeImages for an image we cannot parse.
        let mut status = previous;
        status.message = format!("image {:?} can not be parsed", job.spec.image);
        return JobPlan {
            status,
            ..Default::default()
        };
    };
    let uid = job.uid().unwrap_or_default();
    let start = previous.start_time.as_ref().map_or(now, |t| t.0);
    let states: Vec<(&NodeImage, NodeState)> = world
        .targets
        .iter()
        .map(|ni| (*ni, node_state(ni, &name, &tag, &uid, &world.secrets)))
        .collect();
    let count = |s: NodeState| states.iter().filter(|(_, st)| *st == s).count() as i32;
    let (active, succeeded, failed) = (
        count(NodeState::Active),
        count(NodeState::Succeeded),
        count(NodeState::Failed),
    );
    let names_in = |want: &[NodeState]| -> Vec<String> {
        let mut v: Vec<String> = states
            .iter()
            .filter(|(_, s)| want.contains(s))
            .map(|(ni, _)| ni.name_any())
            .collect();
        v.sort();
        v
    };
    let mut status = ImagePullJobStatus {
        start_time: Some(Time(start)),
        completion_time: None,
        desired: states.len() as i32,
        active,
        succeeded,
        failed,
        message: String::new(),
        failed_nodes: names_in(&[NodeState::Failed]),
    };
    let mut out = JobPlan::default();
    let deadline = template
        .completion_policy
        .active_deadline_seconds
        .filter(|_| always)
        .map(|secs| start + SignedDuration::from_secs(secs));
    if let Some(deadline) = deadline
        && deadline <= now
        && succeeded + failed < status.desired
    {
        status.completion_time = Some(Time(now));
        status.failed = status.desired - succeeded;
        status.active = 0;
        status.failed_nodes =
            names_in(&[NodeState::Failed, NodeState::Active, NodeState::NotSynced]);
        status.message = MESSAGE_DEADLINE.into();
        out.finished = true;
        out.status = status;
        out.requeue_after = template
            .completion_policy
            .ttl_seconds_after_finished
            .map(|ttl| Duration::from_secs(ttl.max(0) as u64));
        return out;
    }
    if always && succeeded + failed == status.desired {
        status.completion_time = Some(Time(now));
        status.message = MESSAGE_COMPLETED.into();
        out.finished = true;
        out.requeue_after = template
            .completion_policy
            .ttl_seconds_after_finished
            .map(|ttl| Duration::from_secs(ttl.max(0) as u64));
        out.status = status;
        return out;
    }
    status.message = if status.desired == 0 {
        MESSAGE_NO_PROGRESS.into()
    } else {
        format!(
            "job is running, progress {:.1}%",
            f64::from(succeeded + failed) * 100.0 / f64::from(status.desired)
        )
    };
    let room = (parallelism(job) - active).max(0) as usize;
    let (ttl, tag_deadline) = tag_ttl_and_deadline(world);
    out.writes = states
        .iter()
        .filter(|(_, s)| *s == NodeState::NotSynced)
        .take(room)
        .map(|(ni, _)| {
            let entry = write_tag(ni, job, &name, &tag, &world.secrets, now, ttl, tag_deadline);
            (ni.name_any(), name.clone(), entry)
        })
        .collect();
    out.requeue_after = deadline.map(|d| seconds_until(d, now));
    out.status = status;
    out
}

/// The tag's `ttlSecondsAfterFinished` and `activeDeadlineSeconds` (upstream's
/// `getTTLSecondsForAlways`, `getTTLSecondsForNever` and `getActiveDeadlineSecondsForNever`).
pub fn tag_ttl_and_deadline(world: &JobWorld) -> (i32, Option<i64>) {
    let template = &world.job.spec.template;
    let pull = template.pull_policy.clone().unwrap_or_default();
    let timeout = pull.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS) as i64;
    let backoff = pull.backoff_limit.unwrap_or(DEFAULT_BACKOFF_LIMIT) as i64;
    let completion = &template.completion_policy;
    match completion.policy_type() {
        ImagePullJobCompletionPolicyType::Always => {
            let base = completion
                .ttl_seconds_after_finished
                .map(i64::from)
                .or(completion.active_deadline_seconds)
                .unwrap_or(timeout * backoff);
            let ttl = base + world.default_ttl_seconds + world.ttl_jitter_seconds;
            (
                ttl.clamp(0, i32::MAX as i64) as i32,
                completion.active_deadline_seconds,
            )
        }
        ImagePullJobCompletionPolicyType::Never => (
            (NEVER_TTL_SECONDS + world.ttl_jitter_seconds) as i32,
            Some(timeout.max(NEVER_MIN_DEADLINE_SECONDS)),
        ),
    }
}

/// The NodeImage's entry for `name` once the job is written into it (upstream's `syncNodeImages`):
/// the job added as owner of the tag and its version bumped, or a new tag with version = the last
/// reported version + 1; the secret references and sandbox config merged in.
#[allow(clippy::too_many_arguments)]
pub fn write_tag(
    ni: &NodeImage,
    job: &ImagePullJob,
    name: &str,
    tag: &str,
    secrets: &[ReferenceObject],
    now: Timestamp,
    ttl: i32,
    deadline: Option<i64>,
) -> ImageSpec {
    let template = &job.spec.template;
    let mut image = ni.spec.images.get(name).cloned().unwrap_or_default();
    let owner = owner_reference(job);
    if let Some(existing) = image.tags.iter_mut().find(|t| t.tag == tag) {
        if !existing.owner_references.iter().any(|o| o.uid == owner.uid) {
            existing.owner_references.push(owner);
        }
        existing.version += 1;
    } else {
        let reported = ni
            .status
            .as_ref()
            .and_then(|s| s.image_statuses.get(name))
            .and_then(|s| {
                s.tags
                    .iter()
                    .filter(|t| t.tag == tag)
                    .map(|t| t.version)
                    .max()
            });
        let pull = template.pull_policy.clone().unwrap_or_default();
        image.tags.push(ImageTagSpec {
            tag: tag.to_string(),
            created_at: Some(Time(now)),
            pull_policy: Some(ImageTagPullPolicy {
                timeout_seconds: Some(pull.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS)),
                backoff_limit: Some(pull.backoff_limit.unwrap_or(DEFAULT_BACKOFF_LIMIT)),
                ttl_seconds_after_finished: Some(ttl),
                active_deadline_seconds: deadline,
            }),
            owner_references: vec![owner],
            version: reported.map_or(0, |v| v + 1),
            image_pull_policy: Some(template.effective_image_pull_policy()),
        });
    }
    for s in secrets {
        // Held already, whatever its mode: a second reference would name the same Secret.
        if !image.pull_secrets.iter().any(|r| r.same_object(s)) {
            image.pull_secrets.push(s.clone());
        }
    }
    if let Some(sandbox) = &template.sandbox_config {
        let merged = image.sandbox_config.get_or_insert_with(Default::default);
        merged.labels.extend(sandbox.labels.clone());
        merged.annotations.extend(sandbox.annotations.clone());
    }
    image
}
