//! The pure part of the AdvancedCronJob controller (openkruise/kruise v1.9.0
//! pkg/controller/advancedcronjob/advancedcronjob_job_controller.go,
//! advancedcronjob_broadcastjob_controller.go and advancedcronjob_imagelistpulljob_controller.go:
//! `reconcileJob`, `reconcileBroadcastJob`, `reconcileImageListPullJob`, one algorithm over three
//! child kinds): from the cron job, its children and the time, the status to write, the children
//! to delete (history, the Replace policy), the child to create and when to look again. No
//! client, no clock.

pub mod schedule;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kruise_api::apps_v1alpha1::{
    AdvancedCronJob, AdvancedCronJobStatus, BroadcastJob, ConcurrencyPolicy, ImageListPullJob,
    TemplateKind,
};
use kruise_api::keys;
use kube::{Resource, ResourceExt};

use schedule::Schedule;

/// More missed ticks than this and nothing runs (upstream's guard against clock skew).
pub const MAX_MISSED: usize = 100;

/// The message logged when there are more.
pub const TOO_MANY_MISSED: &str = "too many missed start times (> 100). Set or decrease .spec.startingDeadlineSeconds or check clock skew";

/// The `apiVersion` of the children's controller reference: upstream's controller works on
/// `apps.kruise.io/v1beta1` AdvancedCronJobs (`controllerKind` in openkruise/kruise v1.9.0
/// pkg/controller/advancedcronjob/advancedcronjob_controller.go), and its field indexes of
/// BroadcastJobs and ImageListPullJobs (pkg/util/fieldindex/register.go) find only children
/// whose controller is named so; the kind is served in both versions, so either resolves.
pub const OWNER_API_VERSION: &str = "apps.kruise.io/v1beta1";

/// What the plan needs to know of one child (a Job, a BroadcastJob or an ImageListPullJob).
#[derive(Clone, Debug, PartialEq)]
pub struct Child {
    pub reference: ObjectReference,
    /// `Some(true)`: Complete; `Some(false)`: Failed; `None`: still active.
    pub finished: Option<bool>,
    pub start_time: Option<Timestamp>,
    /// The `apps.kruise.io/scheduled-at` annotation.
    pub scheduled_at: Option<Timestamp>,
}

impl Child {
    pub fn name(&self) -> &str {
        self.reference.name.as_deref().unwrap_or_default()
    }
}

/// A `batch/v1` Job as a child.
pub fn job_child(job: &Job) -> Child {
    let conditions = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let is_true = |t: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == t && c.status == "True")
    };
    let finished = if is_true("Complete") {
        Some(true)
    } else if is_true("Failed") {
        Some(false)
    } else {
        None
    };
    Child {
        reference: reference(job),
        finished,
        start_time: job
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0),
        scheduled_at: scheduled_at(job.meta()),
    }
}

/// A BroadcastJob as a child.
pub fn broadcastjob_child(job: &BroadcastJob) -> Child {
    use kruise_api::apps_v1alpha1::JobConditionType;
    let status = job.status.as_ref();
    let finished = status.and_then(|s| {
        if s.true_condition(JobConditionType::Complete).is_some() {
            Some(true)
        } else if s.true_condition(JobConditionType::Failed).is_some() {
            Some(false)
        } else {
            None
        }
    });
    Child {
        reference: reference(job),
        finished,
        start_time: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
        scheduled_at: scheduled_at(job.meta()),
    }
}

/// An ImageListPullJob as a child: finished once it has a `completionTime`, Complete when every
/// one of its ImagePullJobs succeeded (`succeeded == desired`), Failed otherwise (upstream's
/// `isImageListPullJobFinished`).
pub fn imagelistpulljob_child(job: &ImageListPullJob) -> Child {
    let status = job.status.as_ref();
    let finished = status
        .filter(|s| s.completion_time.is_some())
        .map(|s| s.succeeded == s.desired);
    Child {
        reference: reference(job),
        finished,
        start_time: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
        scheduled_at: scheduled_at(job.meta()),
    }
}

fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    let meta = obj.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..Default::default()
    }
}

fn scheduled_at(meta: &ObjectMeta) -> Option<Timestamp> {
    meta.annotations
        .as_ref()?
        .get(keys::ADVANCEDCRONJOB_SCHEDULED_AT)?
        .parse()
        .ok()
}

/// Everything one reconcile decides on.
pub struct World<'a> {
    pub cron: &'a AdvancedCronJob,
    /// The children of the template's kind.
    pub children: Vec<Child>,
    pub now: Timestamp,
}

/// A child to create.
#[derive(Clone, Debug, PartialEq)]
pub enum NewChild {
    Job(Box<Job>),
    BroadcastJob(Box<BroadcastJob>),
    ImageListPullJob(Box<ImageListPullJob>),
}

impl NewChild {
    pub fn name(&self) -> String {
        match self {
            NewChild::Job(j) => j.name_any(),
            NewChild::BroadcastJob(j) => j.name_any(),
            NewChild::ImageListPullJob(j) => j.name_any(),
        }
    }
}

/// Why nothing runs this round, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
    Paused,
    NoTemplate,
    BadSchedule(String),
    TooManyMissed,
    NotYet,
    TooLate,
    Forbidden,
}

/// What one reconcile does.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub status: AdvancedCronJobStatus,
    /// Children to delete (background propagation): history beyond the limits first,
    /// then the active ones the Replace policy replaces.
    pub delete: Vec<ObjectReference>,
    pub create: Option<NewChild>,
    pub skip: Option<Skip>,
    pub requeue_after: Option<Duration>,
}

/// The status of the cron job with these children (`active`, `lastScheduleTime`, as the start of
/// upstream's `reconcileJob`).
pub fn compute_status(cron: &AdvancedCronJob, children: &[Child]) -> AdvancedCronJobStatus {
    let mut active: Vec<&Child> = children.iter().filter(|c| c.finished.is_none()).collect();
    active.sort_by(|a, b| a.name().cmp(b.name()));
    AdvancedCronJobStatus {
        type_: cron.spec.template.kind(),
        active: active.iter().map(|c| c.reference.clone()).collect(),
        last_schedule_time: children
            .iter()
            .filter_map(|c| c.scheduled_at)
            .max()
            .map(Time),
    }
}

/// The finished children beyond the history limits, oldest first (by startTime; none
/// counts oldest).
pub fn history_to_prune(cron: &AdvancedCronJob, children: &[Child]) -> Vec<ObjectReference> {
    let mut out = Vec::new();
    for (succeeded, limit) in [
        (true, cron.spec.successful_jobs_history_limit()),
        (false, cron.spec.failed_jobs_history_limit()),
    ] {
        let mut done: Vec<&Child> = children
            .iter()
            .filter(|c| c.finished == Some(succeeded))
            .collect();
        done.sort_by_key(|c| (c.start_time, c.name().to_string()));
        let keep = usize::try_from(limit.max(0)).unwrap_or(0);
        let extra = done.len().saturating_sub(keep);
        out.extend(done[..extra].iter().map(|c| c.reference.clone()));
    }
    out
}

/// More than [`MAX_MISSED`] ticks were missed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyMissed;

/// The latest missed tick (≤ now) since `earliest`, and the next one after now (upstream's
/// `getNextSchedule`).
pub fn missed_and_next(
    schedule: &Schedule,
    earliest: Timestamp,
    now: Timestamp,
) -> Result<(Option<Timestamp>, Option<Timestamp>), TooManyMissed> {
    if earliest > now {
        return Ok((None, schedule.next_after(now)));
    }
    let mut missed = None;
    let mut count = 0usize;
    let mut t = earliest;
    while let Some(next) = schedule.next_after(t) {
        if next > now {
            break;
        }
        count += 1;
        if count > MAX_MISSED {
            return Err(TooManyMissed);
        }
        missed = Some(next);
        t = next;
    }
    Ok((missed, schedule.next_after(now)))
}

/// The cron job's plan for this round (upstream's `reconcileJob` / `reconcileBroadcastJob` /
/// `reconcileImageListPullJob`).
pub fn plan(world: &World) -> Outcome {
    let cron = world.cron;
    let now = world.now;
    let status = compute_status(cron, &world.children);
    let mut out = Outcome {
        delete: history_to_prune(cron, &world.children),
        status,
        create: None,
        skip: None,
        requeue_after: None,
    };
    if cron.spec.paused() {
        out.skip = Some(Skip::Paused);
        return out;
    }
    let Some(kind) = cron.spec.template.kind() else {
        out.skip = Some(Skip::NoTemplate);
        return out;
    };
    let schedule = match Schedule::parse(&cron.spec.schedule, cron.spec.time_zone.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            out.skip = Some(Skip::BadSchedule(e));
            return out;
        }
    };
    let created = cron
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let mut earliest = out
        .status
        .last_schedule_time
        .as_ref()
        .map_or(created, |t| t.0);
    let deadline = cron
        .spec
        .starting_deadline_seconds
        .map(SignedDuration::from_secs);
    if let Some(d) = deadline {
        earliest = earliest.max(now - d);
    }
    let Ok((missed, next)) = missed_and_next(&schedule, earliest, now) else {
        out.skip = Some(Skip::TooManyMissed);
        return out;
    };
    out.requeue_after = next.map(|n| Duration::try_from(n.duration_since(now)).unwrap_or_default());
    let Some(missed) = missed else {
        out.skip = Some(Skip::NotYet);
        return out;
    };
    if deadline.is_some_and(|d| missed + d < now) {
        out.skip = Some(Skip::TooLate);
        return out;
    }
    let active = out.status.active.clone();
    match cron.spec.concurrency_policy() {
        ConcurrencyPolicy::Forbid if !active.is_empty() => {
            out.skip = Some(Skip::Forbidden);
            return out;
        }
        ConcurrencyPolicy::Replace => out.delete.extend(active),
        _ => {}
    }
    out.create = Some(new_child(cron, kind, missed));
    out
}

/// The child of the tick `scheduled`: `<cron>-<unix seconds>`, the template's labels and
/// annotations plus `apps.kruise.io/scheduled-at`, its spec, controlled by the cron job.
pub fn new_child(cron: &AdvancedCronJob, kind: TemplateKind, scheduled: Timestamp) -> NewChild {
    let template_meta = match kind {
        TemplateKind::Job => cron
            .spec
            .template
            .job_template
            .as_ref()
            .and_then(|t| t.metadata.clone()),
        TemplateKind::BroadcastJob => cron
            .spec
            .template
            .broadcast_job_template
            .as_ref()
            .and_then(|t| t.metadata.clone()),
        TemplateKind::ImageListPullJob => cron
            .spec
            .template
            .image_list_pull_job_template
            .as_ref()
            .and_then(|t| t.metadata.clone()),
    }
    .unwrap_or_default();
    let mut annotations: BTreeMap<String, String> = template_meta.annotations.unwrap_or_default();
    annotations.insert(
        keys::ADVANCEDCRONJOB_SCHEDULED_AT.into(),
        scheduled.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    );
    let meta = ObjectMeta {
        name: Some(child_name(&cron.name_any(), scheduled)),
        namespace: cron.namespace(),
        labels: template_meta.labels,
        annotations: Some(annotations),
        owner_references: Some(vec![OwnerReference {
            api_version: OWNER_API_VERSION.into(),
            ..kruise_runtime::meta::controller_owner_reference(cron)
        }]),
        ..Default::default()
    };
    match kind {
        TemplateKind::Job => NewChild::Job(Box::new(Job {
            metadata: meta,
            spec: cron
                .spec
                .template
                .job_template
                .as_ref()
                .and_then(|t| t.spec.clone()),
            status: None,
        })),
        TemplateKind::BroadcastJob => {
            let spec = cron
                .spec
                .template
                .broadcast_job_template
                .as_ref()
                .map(|t| t.spec.clone())
                .unwrap_or_default();
            let mut job = BroadcastJob::new(&cron.name_any(), spec);
            job.metadata = meta;
            NewChild::BroadcastJob(Box::new(job))
        }
        TemplateKind::ImageListPullJob => {
            let spec = cron
                .spec
                .template
                .image_list_pull_job_template
                .as_ref()
                .map(|t| t.spec.clone())
                .unwrap_or_default();
            let mut job = ImageListPullJob::new(&cron.name_any(), spec);
            job.metadata = meta;
            NewChild::ImageListPullJob(Box::new(job))
        }
    }
}

/// `<cron>-<scheduled time in Unix seconds>`, as upstream names its children (e.g.
/// `acj-test-1646305200`).
pub fn child_name(cron: &str, scheduled: Timestamp) -> String {
    format!("{cron}-{}", scheduled.as_second())
}
