//! What the agent decides, without I/O: which tags need a pull worker (upstream's
//! `realWorkerPool.Sync`), the status it reports from the workers' states (`realPuller.GetStatus`,
//! `realWorkerPool.GetStatus`), and the attempt / backoff / deadline arithmetic of one worker
//! (`pullWorker.Run`), all in openkruise/kruise v1.9.0
//! pkg/daemon/imagepuller/imagepuller_worker.go.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use kruise_api::apps_v1alpha1::{
    ImagePullPhase, ImagePullPolicy, ImageStatus, ImageTagStatus, NodeImageSpec, NodeImageStatus,
    ReferenceObject, SandboxConfig,
};

/// Default `pullPolicy.timeoutSeconds` of a tag.
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 600;
/// Default `pullPolicy.backoffLimit` of a tag.
pub const DEFAULT_BACKOFF_LIMIT: i32 = 3;
/// First wait between two attempts; it doubles up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// One image tag of the NodeImage: `(image name, tag)`.
pub type TagKey = (String, String);

/// What a worker needs to pull one tag of one version.
#[derive(Clone, Debug, PartialEq)]
pub struct PullTask {
    pub name: String,
    pub tag: String,
    pub version: i64,
    pub image_pull_policy: ImagePullPolicy,
    /// Bound of one attempt.
    pub timeout: Duration,
    /// Attempts after the first.
    pub backoff_limit: u32,
    /// No attempt runs past this time (`createdAt + activeDeadlineSeconds`).
    pub deadline: Option<Timestamp>,
    pub pull_secrets: Vec<ReferenceObject>,
    pub sandbox_config: SandboxConfig,
    /// The owners named in the tag (events about the pull go to them too).
    pub owners: Vec<k8s_openapi::api::core::v1::ObjectReference>,
}

impl PullTask {
    /// `name:tag`, what is pulled.
    pub fn image(&self) -> String {
        format!("{}:{}", self.name, self.tag)
    }

    pub fn key(&self) -> TagKey {
        (self.name.clone(), self.tag.clone())
    }
}

/// The tag's status for `version` among `status`, if any.
pub fn tag_status<'a>(
    status: Option<&'a NodeImageStatus>,
    name: &str,
    tag: &str,
    version: i64,
) -> Option<&'a ImageTagStatus> {
    status?
        .image_statuses
        .get(name)?
        .tags
        .iter()
        .find(|t| t.tag == tag && t.version == version)
}

/// Every tag of the spec as a [`PullTask`], with secrets and sandbox of its image.
pub fn tasks(spec: &NodeImageSpec) -> Vec<PullTask> {
    spec.images
        .iter()
        .flat_map(|(name, image)| {
            image.tags.iter().map(move |t| {
                let policy = t.pull_policy.clone().unwrap_or_default();
                let deadline = policy.active_deadline_seconds.and_then(|secs| {
                    let created = t.created_at.as_ref()?.0;
                    created
                        .checked_add(jiff::SignedDuration::from_secs(secs))
                        .ok()
                });
                PullTask {
                    name: name.clone(),
                    tag: t.tag.clone(),
                    version: t.version,
                    image_pull_policy: t.image_pull_policy.unwrap_or_default(),
                    timeout: Duration::from_secs(
                        policy
                            .timeout_seconds
                            .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
                            .max(1) as u64,
                    ),
                    backoff_limit: policy.backoff_limit.unwrap_or(DEFAULT_BACKOFF_LIMIT).max(0)
                        as u32,
                    deadline,
                    pull_secrets: image.pull_secrets.clone(),
                    sandbox_config: image.sandbox_config.clone().unwrap_or_default(),
                    owners: t.owner_references.clone(),
                }
            })
        })
        .collect()
}

/// The status to report: for every tag of the spec, the live worker state of its version
/// if there is one, else what was reported before for that version; tags no longer in
/// the spec are dropped. Counters as upstream: `desired` = tags in the spec.
pub fn status(
    spec: &NodeImageSpec,
    reported: Option<&NodeImageStatus>,
    live: &BTreeMap<TagKey, ImageTagStatus>,
) -> NodeImageStatus {
    let mut out = NodeImageStatus {
        first_sync_status: reported.and_then(|s| s.first_sync_status.clone()),
        ..Default::default()
    };
    for (name, image) in &spec.images {
        let mut tags = Vec::new();
        for t in &image.tags {
            out.desired += 1;
            let state = live
                .get(&(name.clone(), t.tag.clone()))
                .filter(|s| s.version == t.version)
                .or_else(|| tag_status(reported, name, &t.tag, t.version));
            let Some(state) = state else { continue };
            match state.phase {
                ImagePullPhase::Waiting => out.waiting += 1,
                ImagePullPhase::Pulling => out.pulling += 1,
                ImagePullPhase::Succeeded => out.succeeded += 1,
                ImagePullPhase::Failed => out.failed += 1,
            }
            tags.push(state.clone());
        }
        if !tags.is_empty() {
            out.image_statuses
                .insert(name.clone(), ImageStatus { tags });
        }
    }
    out
}

/// Whether `task` still needs pulling: no finished status for its version.
pub fn needs_pull(task: &PullTask, current: &NodeImageStatus) -> bool {
    !tag_status(Some(current), &task.name, &task.tag, task.version)
        .is_some_and(|s| s.phase.is_finished())
}

/// Wait after failed attempt `attempt` (0-based): 1 s, doubling, at most 30 s.
pub fn backoff(attempt: u32) -> Duration {
    FIRST_BACKOFF
        .checked_mul(1u32.checked_shl(attempt.min(16)).unwrap_or(u32::MAX))
        .unwrap_or(MAX_BACKOFF)
        .min(MAX_BACKOFF)
}

/// How long the next attempt may take at `now`: `timeout` cut to what is left before the
/// deadline; `None` once the deadline has passed.
pub fn attempt_budget(
    timeout: Duration,
    deadline: Option<Timestamp>,
    now: Timestamp,
) -> Option<Duration> {
    let Some(deadline) = deadline else {
        return Some(timeout);
    };
    let left = deadline.duration_since(now);
    if left <= jiff::SignedDuration::ZERO {
        return None;
    }
    Some(timeout.min(left.unsigned_abs()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kruise_api::apps_v1alpha1::{ImageSpec, ImageTagPullPolicy, ImageTagSpec};
    use proptest::prelude::*;

    fn spec(tags: &[(&str, &str, i64)]) -> NodeImageSpec {
        let mut spec = NodeImageSpec::default();
        for (name, tag, version) in tags {
            spec.images
                .entry(name.to_string())
                .or_insert_with(ImageSpec::default)
                .tags
                .push(ImageTagSpec {
                    tag: tag.to_string(),
                    version: *version,
                    ..Default::default()
                });
        }
        spec
    }

    fn state(tag: &str, phase: ImagePullPhase, version: i64) -> ImageTagStatus {
        ImageTagStatus {
            tag: tag.into(),
            phase,
            progress: 0,
            start_time: None,
            completion_time: None,
            version,
            image_id: String::new(),
            message: String::new(),
        }
    }

    #[test]
    fn tasks_carry_policy_and_deadline_from_created_at() {
        let mut s = spec(&[("nginx", "1", 2)]);
        let image = s.images.get_mut("nginx").unwrap();
        image.pull_secrets = vec![ReferenceObject {
            namespace: "kruise-daemon-config".into(),
            name: "s".into(),
            ..Default::default()
        }];
        let tag = &mut image.tags[0];
        tag.created_at = Some(Time("2024-01-01T00:00:00Z".parse().unwrap()));
        tag.pull_policy = Some(ImageTagPullPolicy {
            timeout_seconds: Some(300),
            backoff_limit: Some(1),
            ttl_seconds_after_finished: Some(300),
            active_deadline_seconds: Some(1200),
        });
        tag.image_pull_policy = Some(ImagePullPolicy::Always);
        let task = &tasks(&s)[0];
        assert_eq!(task.image(), "nginx:1");
        assert_eq!(task.version, 2);
        assert_eq!(task.timeout, Duration::from_secs(300));
        assert_eq!(task.backoff_limit, 1);
        assert_eq!(task.deadline, Some("2024-01-01T00:20:00Z".parse().unwrap()));
        assert_eq!(task.image_pull_policy, ImagePullPolicy::Always);
        assert_eq!(task.pull_secrets[0].name, "s");
    }

    #[test]
    fn defaults_without_pull_policy() {
        let task = &tasks(&spec(&[("nginx", "1", 0)]))[0];
        assert_eq!(task.timeout, Duration::from_secs(600));
        assert_eq!(task.backoff_limit, 3);
        assert_eq!(task.deadline, None);
        assert_eq!(task.image_pull_policy, ImagePullPolicy::IfNotPresent);
    }

    #[test]
    fn status_prefers_live_state_of_the_same_version() {
        let s = spec(&[("nginx", "1", 1), ("nginx", "2", 0), ("busybox", "x", 0)]);
        let reported = status(
            &spec(&[("nginx", "1", 0), ("nginx", "2", 0), ("gone", "1", 0)]),
            None,
            &BTreeMap::from([
                (
                    ("nginx".into(), "1".into()),
                    state("1", ImagePullPhase::Succeeded, 0),
                ),
                (
                    ("nginx".into(), "2".into()),
                    state("2", ImagePullPhase::Failed, 0),
                ),
                (
                    ("gone".into(), "1".into()),
                    state("1", ImagePullPhase::Succeeded, 0),
                ),
            ]),
        );
        assert_eq!(reported.succeeded, 2);
        let live = BTreeMap::from([(
            ("nginx".into(), "1".into()),
            state("1", ImagePullPhase::Pulling, 1),
        )]);
        let out = status(&s, Some(&reported), &live);
        // nginx:1 version 1 is pulling (the old version's success no longer counts),
        // nginx:2 keeps its reported failure, busybox:x has no state yet, gone is dropped.
        assert_eq!(
            (out.desired, out.pulling, out.failed, out.succeeded),
            (3, 1, 1, 0)
        );
        assert!(!out.image_statuses.contains_key("gone"));
        assert!(!out.image_statuses.contains_key("busybox"));
        assert_eq!(out.image_statuses["nginx"].tags.len(), 2);
        assert!(
            !needs_pull(&tasks(&s)[2], &out),
            "nginx:2 failed for its version"
        );
        assert!(needs_pull(&tasks(&s)[1], &out), "nginx:1 is still pulling");
        assert!(needs_pull(&tasks(&s)[0], &out), "busybox:x never started");
    }

    #[test]
    fn version_bump_needs_a_new_pull() {
        let done = status(
            &spec(&[("nginx", "1", 0)]),
            None,
            &BTreeMap::from([(
                ("nginx".into(), "1".into()),
                state("1", ImagePullPhase::Succeeded, 0),
            )]),
        );
        assert!(!needs_pull(&tasks(&spec(&[("nginx", "1", 0)]))[0], &done));
        assert!(needs_pull(&tasks(&spec(&[("nginx", "1", 1)]))[0], &done));
    }

    #[test]
    fn backoff_doubles_to_the_cap() {
        let waits: Vec<u64> = (0..8).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }

    #[test]
    fn budget_is_cut_by_the_deadline() {
        let now: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
        let t = Duration::from_secs(300);
        assert_eq!(attempt_budget(t, None, now), Some(t));
        let soon = now + jiff::SignedDuration::from_secs(10);
        assert_eq!(
            attempt_budget(t, Some(soon), now),
            Some(Duration::from_secs(10))
        );
        assert_eq!(attempt_budget(t, Some(now), now), None);
    }

    proptest! {
        /// Counters add up: every tag with a state is counted once, by its phase.
        #[test]
        fn counters_add_up(phases in proptest::collection::vec(0usize..5, 0..12)) {
            let all = [ImagePullPhase::Waiting, ImagePullPhase::Pulling,
                       ImagePullPhase::Succeeded, ImagePullPhase::Failed];
            let tags: Vec<(String, String, i64)> = phases.iter().enumerate()
                .map(|(i, _)| (format!("img{}", i % 3), format!("t{i}"), 0)).collect();
            let refs: Vec<(&str, &str, i64)> =
                tags.iter().map(|(a, b, v)| (a.as_str(), b.as_str(), *v)).collect();
            let s = spec(&refs);
            let live: BTreeMap<TagKey, ImageTagStatus> = tags.iter().zip(&phases)
                .filter(|(_, p)| **p < 4)
                .map(|((n, t, _), p)| ((n.clone(), t.clone()), state(t, all[*p], 0)))
                .collect();
            let out = status(&s, None, &live);
            prop_assert_eq!(out.desired as usize, phases.len());
            prop_assert_eq!((out.waiting + out.pulling + out.succeeded + out.failed) as usize,
                            live.len());
        }

        /// An attempt never runs past the deadline nor longer than the timeout.
        #[test]
        fn budget_bounds(timeout in 1u64..1000, left in -100i64..2000) {
            let now: Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
            let deadline = now + jiff::SignedDuration::from_secs(left);
            match attempt_budget(Duration::from_secs(timeout), Some(deadline), now) {
                None => prop_assert!(left <= 0),
                Some(b) => {
                    prop_assert!(b <= Duration::from_secs(timeout));
                    prop_assert!(b.as_secs() as i64 <= left);
                }
            }
        }
    }
}
