//! ImageListPullJob (openkruise/kruise v1.9.0
//! pkg/controller/imagelistpulljob/imagelistpulljob_controller.go): one owned ImagePullJob per
//! image, recreated when the template changes, and the list's status aggregated from them. Pure.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kruise_api::apps_v1alpha1::{
    FailedImageStatus, ImageListPullJob, ImageListPullJobStatus, ImagePullJob,
    ImagePullJobCompletionPolicyType, ImagePullJobSpec, ImagePullJobTemplate,
};
use kube::{Resource, ResourceExt};

/// The label carrying the hash of the template a child was made from.
pub const TEMPLATE_HASH_LABEL: &str = "controller-revision-hash";

/// A short, stable hash of the template (hex of SHA-256 of its JSON).
pub fn template_hash(template: &ImagePullJobTemplate) -> String {
    let json = serde_json::to_vec(template).unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA256, &json);
    digest.as_ref()[..5]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The message of a failed child in `failedImageStatuses`.
pub fn failed_child_message(child: &str) -> String {
    format!("Please check for details which nodes failed by 'kubectl get ImagePullJob {child}'.")
}

/// What to do for one list job.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListPlan {
    pub create: Vec<ImagePullJob>,
    /// Children (by name) to delete: template changed or image no longer listed.
    pub delete: Vec<String>,
    pub status: ImageListPullJobStatus,
    /// The TTL after completion has passed: delete the list job.
    pub delete_self: bool,
    pub requeue_after: Option<Duration>,
}

/// A new child for `image`.
pub fn child(list: &ImageListPullJob, image: &str, hash: &str) -> ImagePullJob {
    ImagePullJob {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", list.name_any())),
            namespace: list.namespace(),
            labels: Some(BTreeMap::from([(
                TEMPLATE_HASH_LABEL.to_string(),
                hash.to_string(),
            )])),
            owner_references: Some(vec![kruise_runtime::meta::controller_owner_reference(list)]),
            ..Default::default()
        },
        spec: ImagePullJobSpec {
            image: image.to_string(),
            template: list.spec.template.clone(),
        },
        status: None,
    }
}

/// The list job's plan from its children (the ImagePullJobs it owns).
pub fn plan(list: &ImageListPullJob, children: &[&ImagePullJob], now: Timestamp) -> ListPlan {
    let mut out = ListPlan::default();
    let previous = list.status.clone().unwrap_or_default();
    let completion = &list.spec.template.completion_policy;
    if let Some(done) = previous.completion_time.as_ref().map(|t| t.0) {
        out.status = previous;
        if let Some(ttl) = completion.ttl_seconds_after_finished {
            let expiry = done + SignedDuration::from_secs(ttl.max(0) as i64);
            if expiry <= now {
                out.delete_self = true;
            } else {
                out.requeue_after = Some(expiry.duration_since(now).unsigned_abs());
            }
        }
        return out;
    }
    let hash = template_hash(&list.spec.template);
    let mut current: BTreeMap<&str, &ImagePullJob> = BTreeMap::new();
    for c in children {
        let same = c.labels().get(TEMPLATE_HASH_LABEL) == Some(&hash);
        let listed = list.spec.images.contains(&c.spec.image);
        if same && listed && !current.contains_key(c.spec.image.as_str()) {
            current.insert(c.spec.image.as_str(), c);
        } else if c.meta().deletion_timestamp.is_none() {
            out.delete.push(c.name_any());
        }
    }
    let mut status = ImageListPullJobStatus {
        start_time: Some(previous.start_time.unwrap_or(Time(now))),
        desired: list.spec.images.len() as i32,
        ..Default::default()
    };
    for image in &list.spec.images {
        let Some(c) = current.get(image.as_str()) else {
            out.create.push(child(list, image, &hash));
            continue;
        };
        let s = c.status.clone().unwrap_or_default();
        if s.active > 0 {
            status.active += 1;
        }
        if s.desired == s.succeeded + s.failed && c.status.is_some() {
            status.completed += 1;
        }
        if s.desired == s.succeeded && c.status.is_some() {
            status.succeeded += 1;
        }
        if s.failed > 0 {
            status.failed_image_statuses.push(FailedImageStatus {
                image_pull_job: c.name_any(),
                name: image.clone(),
                message: failed_child_message(&c.name_any()),
            });
        }
    }
    let always = completion.policy_type() == ImagePullJobCompletionPolicyType::Always;
    if always && status.completed == status.desired {
        status.completion_time = Some(Time(now));
        out.requeue_after = completion
            .ttl_seconds_after_finished
            .map(|ttl| Duration::from_secs(ttl.max(0) as u64));
    }
    out.status = status;
    out
}
