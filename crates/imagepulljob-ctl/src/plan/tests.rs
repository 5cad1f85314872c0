use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{
    Node, NodeCondition, NodeStatus, ObjectReference, Pod, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::*;
use kube::ResourceExt;
use proptest::prelude::*;

use super::job::{self, JobWorld, NodeState};
use super::{list, nodeimage};

const UID: &str = "job-uid";

fn now() -> Timestamp {
    "2024-01-01T01:00:00Z".parse().unwrap()
}

fn pull_job(spec: impl FnOnce(&mut ImagePullJobSpec)) -> ImagePullJob {
    let mut j = ImagePullJob {
        metadata: ObjectMeta {
            name: Some("job-with-always".into()),
            namespace: Some("default".into()),
            uid: Some(UID.into()),
            ..Default::default()
        },
        spec: ImagePullJobSpec {
            image: "nginx:1.9.1".into(),
            ..Default::default()
        },
        status: None,
    };
    spec(&mut j.spec);
    j
}

fn node_image(name: &str, labels: &[(&str, &str)]) -> NodeImage {
    NodeImage {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        spec: Default::default(),
        status: None,
    }
}

fn owner(uid: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("ImagePullJob".into()),
        name: Some("job-with-always".into()),
        namespace: Some("default".into()),
        uid: Some(uid.into()),
        ..Default::default()
    }
}

/// `ni` with tag nginx:1.9.1 owned by `owners`, at `version`, with secrets, and a
/// status of `phase` at `status_version`.
fn with_tag(
    mut ni: NodeImage,
    owners: &[&str],
    version: i64,
    secrets: &[&str],
    status: Option<(ImagePullPhase, i64)>,
) -> NodeImage {
    ni.spec.images.insert(
        "nginx".into(),
        ImageSpec {
            pull_secrets: secrets
                .iter()
                .map(|s| ReferenceObject {
                    namespace: "kruise-daemon-config".into(),
                    name: s.to_string(),
                    ..Default::default()
                })
                .collect(),
            tags: vec![ImageTagSpec {
                tag: "1.9.1".into(),
                created_at: Some(Time(now())),
                owner_references: owners.iter().map(|u| owner(u)).collect(),
                version,
                ..Default::default()
            }],
            sandbox_config: None,
        },
    );
    if let Some((phase, v)) = status {
        let st = ni.status.get_or_insert_with(Default::default);
        st.image_statuses.insert(
            "nginx".into(),
            ImageStatus {
                tags: vec![ImageTagStatus {
                    tag: "1.9.1".into(),
                    phase,
                    progress: 0,
                    start_time: None,
                    completion_time: Some(Time(now())),
                    version: v,
                    image_id: String::new(),
                    message: String::new(),
                }],
            },
        );
    }
    ni
}

fn secrets(names: &[&str]) -> Vec<ReferenceObject> {
    names
        .iter()
        .map(|s| ReferenceObject {
            namespace: "kruise-daemon-config".into(),
            name: s.to_string(),
            ..Default::default()
        })
        .collect()
}

fn world<'a>(j: &'a ImagePullJob, targets: Vec<&'a NodeImage>) -> JobWorld<'a> {
    JobWorld {
        job: j,
        targets,
        secrets: vec![],
        now: now(),
        ttl_jitter_seconds: 0,
        default_ttl_seconds: 0,
    }
}

#[test]
fn images_split_into_name_and_tag() {
    assert_eq!(
        job::split_image("nginx:1.9.1"),
        Some(("nginx".into(), "1.9.1".into()))
    );
    assert_eq!(
        job::split_image("nginx"),
        Some(("nginx".into(), "latest".into()))
    );
    assert_eq!(
        job::split_image("127.0.0.1:15000/kruise-rs/busybox:1"),
        Some(("127.0.0.1:15000/kruise-rs/busybox".into(), "1".into()))
    );
    assert_eq!(
        job::split_image("127.0.0.1:15000/kruise-rs/busybox"),
        Some(("127.0.0.1:15000/kruise-rs/busybox".into(), "latest".into()))
    );
    for bad in ["", "nginx:", "a@sha256:00", "x/:1", "a b:1"] {
        assert_eq!(job::split_image(bad), None, "{bad}");
    }
}

#[test]
fn node_states_of_openkruise_cases() {
    let base = node_image("n", &[]);
    let s = secrets(&["s"]);
    // Synced and succeeded for its version.
    let ok = with_tag(
        base.clone(),
        &[UID],
        1,
        &["s"],
        Some((ImagePullPhase::Succeeded, 1)),
    );
    assert_eq!(
        job::node_state(&ok, "nginx", "1.9.1", UID, &s),
        NodeState::Succeeded
    );
    // Tag of another version: the status is an old run's.
    let other = with_tag(
        base.clone(),
        &[UID],
        2,
        &["s"],
        Some((ImagePullPhase::Succeeded, 1)),
    );
    assert_eq!(
        job::node_state(&other, "nginx", "1.9.1", UID, &s),
        NodeState::Active
    );
    // Tag just patched, no status yet.
    let fresh = with_tag(base.clone(), &[UID], 0, &["s"], None);
    assert_eq!(
        job::node_state(&fresh, "nginx", "1.9.1", UID, &s),
        NodeState::Active
    );
    // Missing owner ref, missing secret: not synced, counted nowhere.
    let foreign = with_tag(
        base.clone(),
        &["other"],
        1,
        &["s"],
        Some((ImagePullPhase::Succeeded, 1)),
    );
    assert_eq!(
        job::node_state(&foreign, "nginx", "1.9.1", UID, &s),
        NodeState::NotSynced
    );
    let no_secret = with_tag(
        base.clone(),
        &[UID],
        1,
        &[],
        Some((ImagePullPhase::Succeeded, 1)),
    );
    assert_eq!(
        job::node_state(&no_secret, "nginx", "1.9.1", UID, &s),
        NodeState::NotSynced
    );
    assert_eq!(
        job::node_state(&base, "nginx", "1.9.1", UID, &s),
        NodeState::NotSynced
    );
    let failed = with_tag(base, &[UID], 1, &["s"], Some((ImagePullPhase::Failed, 1)));
    assert_eq!(
        job::node_state(&failed, "nginx", "1.9.1", UID, &s),
        NodeState::Failed
    );
}

#[test]
fn targets_by_names_labels_pods_or_all() {
    let nis: Vec<Arc<NodeImage>> = ["node-1", "node-2", "node-3"]
        .iter()
        .enumerate()
        .map(|(i, n)| Arc::new(node_image(n, &[("zone", if i == 0 { "a" } else { "b" })])))
        .collect();
    let names = |t: Vec<&NodeImage>| {
        t.iter()
            .map(|n| n.metadata.name.clone().unwrap())
            .collect::<Vec<_>>()
    };
    let by_names = pull_job(|s| {
        s.template.selector = Some(ImagePullJobNodeSelector {
            names: vec!["node-2".into(), "missing".into(), "node-1".into()],
            ..Default::default()
        })
    });
    assert_eq!(
        names(job::targets(&by_names, &nis, &[])),
        ["node-1", "node-2"]
    );
    let by_labels = pull_job(|s| {
        s.template.selector = Some(ImagePullJobNodeSelector {
            names: vec![],
            label_selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("zone".into(), "b".into())])),
                ..Default::default()
            },
        })
    });
    assert_eq!(
        names(job::targets(&by_labels, &nis, &[])),
        ["node-2", "node-3"]
    );
    assert_eq!(names(job::targets(&pull_job(|_| {}), &nis, &[])).len(), 3);
    let pod = |name: &str, node: &str, label: &str, phase: &str| {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                labels: Some(BTreeMap::from([("pod-label".into(), label.into())])),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some(node.into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        })
    };
    let pods = vec![
        pod("a", "node-3", "xxx", "Running"),
        pod("b", "node-3", "xxx", "Pending"),
        pod("c", "node-1", "other", "Running"),
        pod("d", "node-2", "xxx", "Succeeded"),
    ];
    let by_pods = pull_job(|s| {
        s.template.pod_selector = Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("pod-label".into(), "xxx".into())])),
            ..Default::default()
        })
    });
    assert_eq!(names(job::targets(&by_pods, &nis, &pods)), ["node-3"]);
}

/// The example ImagePullJob of OpenKruise's documentation (ImagePullJob user manual).
#[test]
fn sample_job_writes_both_nodes_at_once_with_its_policy() {
    let j = pull_job(|s| {
        s.template.parallelism = Some(IntOrString::Int(10));
        s.template.completion_policy = ImagePullJobCompletionPolicy {
            type_: Some(ImagePullJobCompletionPolicyType::Always),
            active_deadline_seconds: Some(1200),
            ttl_seconds_after_finished: Some(300),
        };
        s.template.pull_policy = Some(PullPolicy {
            timeout_seconds: Some(300),
            backoff_limit: Some(3),
        });
    });
    let (a, b) = (node_image("node-1", &[]), node_image("node-2", &[]));
    let mut w = world(&j, vec![&a, &b]);
    w.secrets = secrets(&["default.secret-name1"]);
    w.ttl_jitter_seconds = 17;
    let plan = job::plan(&w);
    assert_eq!(plan.writes.len(), 2);
    assert_eq!(plan.status.desired, 2);
    assert_eq!(plan.status.active, 0, "unsynced nodes count nowhere");
    assert_eq!(plan.status.message, "job is running, progress 0.0%");
    let (node, name, entry) = &plan.writes[0];
    assert_eq!((node.as_str(), name.as_str()), ("node-1", "nginx"));
    let tag = &entry.tags[0];
    assert_eq!(tag.tag, "1.9.1");
    assert_eq!(tag.version, 0);
    assert_eq!(tag.owner_references[0].uid.as_deref(), Some(UID));
    let policy = tag.pull_policy.as_ref().unwrap();
    assert_eq!(policy.ttl_seconds_after_finished, Some(317));
    assert_eq!(policy.active_deadline_seconds, Some(1200));
    assert_eq!(policy.timeout_seconds, Some(300));
    assert_eq!(entry.pull_secrets, secrets(&["default.secret-name1"]));
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(1200)));
}

#[test]
fn parallelism_limits_writes_by_active_nodes() {
    let j = pull_job(|s| s.template.parallelism = Some(IntOrString::Int(2)));
    let active = with_tag(node_image("a", &[]), &[UID], 0, &[], None);
    let others: Vec<NodeImage> = (0..4).map(|i| node_image(&format!("n{i}"), &[])).collect();
    let mut targets = vec![&active];
    targets.extend(others.iter());
    let plan = job::plan(&world(&j, targets));
    assert_eq!(plan.status.active, 1);
    assert_eq!(plan.writes.len(), 1, "2 - 1 active");
    let paused = pull_job(|s| s.template.parallelism = Some(IntOrString::String("0".into())));
    assert!(
        job::plan(&world(&paused, others.iter().collect()))
            .writes
            .is_empty()
    );
    assert_eq!(job::parallelism(&pull_job(|_| {})), 1);
}

#[test]
fn existing_tag_gets_the_owner_and_a_new_version() {
    let j = pull_job(|_| {});
    let ni = with_tag(
        node_image("a", &[]),
        &["other"],
        3,
        &[],
        Some((ImagePullPhase::Succeeded, 3)),
    );
    let entry = job::write_tag(&ni, &j, "nginx", "1.9.1", &[], now(), 300, None);
    assert_eq!(entry.tags.len(), 1);
    assert_eq!(entry.tags[0].version, 4);
    assert_eq!(entry.tags[0].owner_references.len(), 2);
    // A tag removed from spec but still in status: the new one continues its versions.
    let mut gone = ni.clone();
    gone.spec.images.clear();
    let entry = job::write_tag(&gone, &j, "nginx", "1.9.1", &[], now(), 300, None);
    assert_eq!(entry.tags[0].version, 4);
}

#[test]
fn completion_when_all_finished_and_ttl_deletes_later() {
    let mut j = pull_job(|s| {
        s.template.completion_policy.ttl_seconds_after_finished = Some(300);
    });
    let a = with_tag(
        node_image("a", &[]),
        &[UID],
        0,
        &[],
        Some((ImagePullPhase::Succeeded, 0)),
    );
    let b = with_tag(
        node_image("b", &[]),
        &[UID],
        0,
        &[],
        Some((ImagePullPhase::Failed, 0)),
    );
    let plan = job::plan(&world(&j, vec![&a, &b]));
    assert!(plan.finished);
    assert_eq!(plan.status.message, job::MESSAGE_COMPLETED);
    assert_eq!((plan.status.succeeded, plan.status.failed), (1, 1));
    assert_eq!(plan.status.failed_nodes, ["b"]);
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(300)));
    j.status = Some(plan.status);
    let mut later = world(&j, vec![&a, &b]);
    later.now = now() + SignedDuration::from_secs(299);
    let p = job::plan(&later);
    assert!(!p.delete && p.finished);
    later.now = now() + SignedDuration::from_secs(300);
    assert!(job::plan(&later).delete);
}

#[test]
fn deadline_fails_the_unfinished_nodes() {
    let mut j = pull_job(|s| {
        s.template.completion_policy.active_deadline_seconds = Some(60);
    });
    j.status = Some(ImagePullJobStatus {
        start_time: Some(Time(now() - SignedDuration::from_secs(61))),
        ..Default::default()
    });
    let done = with_tag(
        node_image("a", &[]),
        &[UID],
        0,
        &[],
        Some((ImagePullPhase::Succeeded, 0)),
    );
    let active = with_tag(node_image("b", &[]), &[UID], 0, &[], None);
    let unsynced = node_image("c", &[]);
    let plan = job::plan(&world(&j, vec![&done, &active, &unsynced]));
    assert!(plan.finished && plan.writes.is_empty());
    assert_eq!(plan.status.message, job::MESSAGE_DEADLINE);
    assert_eq!(
        (
            plan.status.succeeded,
            plan.status.failed,
            plan.status.active
        ),
        (1, 2, 0)
    );
    assert_eq!(plan.status.failed_nodes, ["b", "c"]);
}

#[test]
fn never_jobs_never_complete_and_rewarm_daily() {
    let j = pull_job(|s| {
        s.template.completion_policy.type_ = Some(ImagePullJobCompletionPolicyType::Never);
    });
    let a = with_tag(
        node_image("a", &[]),
        &[UID],
        0,
        &[],
        Some((ImagePullPhase::Succeeded, 0)),
    );
    let plan = job::plan(&world(&j, vec![&a]));
    assert!(!plan.finished);
    assert_eq!(plan.status.message, "job is running, progress 100.0%");
    let empty = job::plan(&world(&j, vec![]));
    assert_eq!(empty.status.message, job::MESSAGE_NO_PROGRESS);
    let mut w = world(&j, vec![]);
    w.ttl_jitter_seconds = -600;
    assert_eq!(job::tag_ttl_and_deadline(&w), (86400 - 600, Some(1800)));
}

#[test]
fn always_ttl_falls_back_to_deadline_then_timeout_times_backoff() {
    let j = pull_job(|s| {
        s.template.pull_policy = Some(PullPolicy {
            timeout_seconds: Some(100),
            backoff_limit: Some(2),
        })
    });
    assert_eq!(job::tag_ttl_and_deadline(&world(&j, vec![])), (200, None));
    let j = pull_job(|s| s.template.completion_policy.active_deadline_seconds = Some(900));
    let mut w = world(&j, vec![]);
    w.default_ttl_seconds = 10;
    w.ttl_jitter_seconds = 5;
    assert_eq!(job::tag_ttl_and_deadline(&w), (915, Some(900)));
}

fn node(name: &str, ready_since: Option<Timestamp>) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([(
                "kubernetes.io/hostname".into(),
                name.into(),
            )])),
            ..Default::default()
        },
        spec: None,
        status: Some(NodeStatus {
            conditions: Some(
                ready_since
                    .map(|t| NodeCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time(t)),
                        ..Default::default()
                    })
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        }),
    }
}

#[test]
fn node_images_follow_nodes() {
    let old = node("node1", Some(now() - SignedDuration::from_secs(60)));
    let young = node("node2", Some(now() - SignedDuration::from_secs(10)));
    let not_ready = node("node3", None);
    let mut relabel = node_image("master1", &[]);
    relabel.metadata.name = Some("master1".into());
    let master = node("master1", Some(now() - SignedDuration::from_secs(60)));
    let gone = node_image("gone", &[]);
    let fake = node_image("fake", &[(kruise_api::keys::FAKE_NODEIMAGE, "true")]);
    let (changes, again) = nodeimage::lifecycle(
        &[&old, &young, &not_ready, &master],
        &[&relabel, &gone, &fake],
        now(),
    );
    assert_eq!(
        changes,
        [
            nodeimage::Lifecycle::Create {
                name: "node1".into(),
                labels: BTreeMap::from([("kubernetes.io/hostname".into(), "node1".into())]),
            },
            nodeimage::Lifecycle::Relabel {
                name: "master1".into(),
                labels: BTreeMap::from([("kubernetes.io/hostname".into(), "master1".into())]),
            },
            nodeimage::Lifecycle::Delete {
                name: "gone".into()
            },
        ]
    );
    assert_eq!(
        again,
        Some(Duration::from_secs(20)),
        "node2 is Ready for 10s of 30s"
    );
}

#[test]
fn pruning_follows_owners_and_ttl() {
    let mut ni = node_image("n", &[]);
    let tag = |t: &str, owners: Vec<ObjectReference>, ttl: Option<i32>| ImageTagSpec {
        tag: t.into(),
        created_at: Some(Time(now())),
        owner_references: owners,
        pull_policy: ttl.map(|s| ImageTagPullPolicy {
            ttl_seconds_after_finished: Some(s),
            ..Default::default()
        }),
        ..Default::default()
    };
    let kept_kind = ObjectReference {
        kind: Some("CloneSet".into()),
        ..owner("x")
    };
    let other_ns = ObjectReference {
        namespace: Some("elsewhere".into()),
        ..owner("y")
    };
    ni.spec.images.insert(
        "nginx".into(),
        ImageSpec {
            tags: vec![
                tag("live", vec![owner(UID)], None),
                tag("gone-owner", vec![owner("stale-uid")], None),
                tag("no-owner", vec![], None),
                tag("other-kind", vec![kept_kind], None),
                tag("other-ns", vec![other_ns], None),
                tag("expired", vec![], Some(300)),
                tag("expiring", vec![], Some(900)),
                ImageTagSpec {
                    created_at: None,
                    ..tag("no-created-at", vec![], None)
                },
            ],
            ..Default::default()
        },
    );
    ni.spec.images.insert(
        "busybox".into(),
        ImageSpec {
            tags: vec![tag("1", vec![owner("stale-uid")], None)],
            ..Default::default()
        },
    );
    let done = |t: &str| ImageTagStatus {
        tag: t.into(),
        phase: ImagePullPhase::Succeeded,
        progress: 100,
        start_time: None,
        completion_time: Some(Time(now() - SignedDuration::from_secs(600))),
        version: 0,
        image_id: String::new(),
        message: String::new(),
    };
    ni.status = Some(NodeImageStatus {
        image_statuses: BTreeMap::from([(
            "nginx".into(),
            ImageStatus {
                tags: vec![done("expired"), done("expiring")],
            },
        )]),
        ..Default::default()
    });
    let job_uid = |ns: &str, name: &str| {
        (ns == "default" && name == "job-with-always").then(|| UID.to_string())
    };
    let in_scope = |ns: &str| ns == "default";
    let secret_exists = |_: &ReferenceObject| None;
    let w = nodeimage::PruneWorld {
        job_uid: &job_uid,
        in_scope: &in_scope,
        secret_exists: &secret_exists,
        now: now(),
    };
    let (pruned, again) = nodeimage::prune(&ni, &w);
    let pruned = pruned.expect("changed");
    let tags: Vec<&str> = pruned.images["nginx"]
        .tags
        .iter()
        .map(|t| t.tag.as_str())
        .collect();
    assert_eq!(
        tags,
        ["live", "no-owner", "other-kind", "other-ns", "expiring"]
    );
    assert!(
        !pruned.images.contains_key("busybox"),
        "an image left without tags goes"
    );
    assert_eq!(again, Some(Duration::from_secs(300)));
    let mut clean = ni.clone();
    clean.spec = pruned;
    assert_eq!(
        nodeimage::prune(&clean, &w).0,
        None,
        "pruning is idempotent"
    );

    // Pull secret references: a Secret known gone is dropped, unknown ones are kept.
    let image = clean.spec.images.get_mut("nginx").unwrap();
    image.pull_secrets = secrets(&["gone", "here"]);
    image.pull_secrets.push(ReferenceObject {
        namespace: "elsewhere".into(),
        name: "unknown".into(),
        ..Default::default()
    });
    // A `batch` reference (upstream's shared copies) stays until its image entry goes.
    image.pull_secrets.push(ReferenceObject {
        namespace: "kruise-daemon-config".into(),
        name: "gone-batch".into(),
        mode: "batch".into(),
    });
    let secret_exists =
        |r: &ReferenceObject| (r.namespace == "kruise-daemon-config").then(|| r.name == "here");
    let w = nodeimage::PruneWorld {
        secret_exists: &secret_exists,
        ..w
    };
    let kept = nodeimage::prune(&clean, &w).0.expect("a reference dropped");
    let names: Vec<&str> = kept.images["nginx"]
        .pull_secrets
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["here", "unknown", "gone-batch"]);
}

fn list_job(images: &[&str]) -> ImageListPullJob {
    ImageListPullJob {
        metadata: ObjectMeta {
            name: Some("warm-up".into()),
            namespace: Some("default".into()),
            uid: Some("list-uid".into()),
            ..Default::default()
        },
        spec: ImageListPullJobSpec {
            images: images.iter().map(|s| s.to_string()).collect(),
            template: Default::default(),
        },
        status: None,
    }
}

#[test]
fn list_creates_children_and_aggregates() {
    let l = list_job(&["nginx:1", "busybox:1"]);
    let plan = list::plan(&l, &[], now());
    assert_eq!(plan.create.len(), 2);
    let child = &plan.create[0];
    assert_eq!(child.metadata.generate_name.as_deref(), Some("warm-up-"));
    assert_eq!(
        child.metadata.owner_references.as_ref().unwrap()[0].uid,
        "list-uid"
    );
    let hash = list::template_hash(&l.spec.template);
    let named = |mut j: ImagePullJob, name: &str, s: ImagePullJobStatus| {
        j.metadata.name = Some(name.into());
        j.status = Some(s);
        j
    };
    let ok = named(
        list::child(&l, "nginx:1", &hash),
        "warm-up-a",
        ImagePullJobStatus {
            desired: 2,
            succeeded: 2,
            ..Default::default()
        },
    );
    let failed = named(
        list::child(&l, "busybox:1", &hash),
        "warm-up-b",
        ImagePullJobStatus {
            desired: 2,
            succeeded: 1,
            failed: 1,
            ..Default::default()
        },
    );
    let plan = list::plan(&l, &[&ok, &failed], now());
    assert!(plan.create.is_empty() && plan.delete.is_empty());
    let s = &plan.status;
    assert_eq!(
        (s.desired, s.completed, s.succeeded, s.active),
        (2, 2, 1, 0)
    );
    assert!(s.completion_time.is_some());
    assert_eq!(
        s.failed_image_statuses[0].message,
        "Please check for details which nodes failed by 'kubectl get ImagePullJob warm-up-b'."
    );
    // A template change recreates the children.
    let mut changed = l.clone();
    changed.spec.template.parallelism = Some(IntOrString::Int(5));
    let plan = list::plan(&changed, &[&ok, &failed], now());
    assert_eq!(plan.delete, ["warm-up-a", "warm-up-b"]);
    assert_eq!(plan.create.len(), 2);
}

proptest! {
    /// Every target is counted at most once, and a reconcile never has more nodes pulling
    /// (active + written) than the parallelism allows (unless already above it).
    #[test]
    fn parallelism_window(states in proptest::collection::vec(0u8..4, 0..12), parallelism in 0i32..6) {
        let j = pull_job(|s| s.template.parallelism = Some(IntOrString::Int(parallelism)));
        let nis: Vec<NodeImage> = states.iter().enumerate().map(|(i, s)| {
            let ni = node_image(&format!("n{i}"), &[]);
            match s {
                0 => ni,
                1 => with_tag(ni, &[UID], 0, &[], None),
                2 => with_tag(ni, &[UID], 0, &[], Some((ImagePullPhase::Succeeded, 0))),
                _ => with_tag(ni, &[UID], 0, &[], Some((ImagePullPhase::Failed, 0))),
            }
        }).collect();
        let plan = job::plan(&world(&j, nis.iter().collect()));
        let st = &plan.status;
        let unsynced = states.iter().filter(|s| **s == 0).count() as i32;
        prop_assert_eq!(st.desired as usize, states.len());
        if !plan.finished {
            prop_assert_eq!(st.active + st.succeeded + st.failed + unsynced, st.desired);
            prop_assert!(plan.writes.len() as i32 <= (parallelism - st.active).max(0));
            prop_assert!(plan.writes.len() as i32 <= unsynced);
        } else {
            prop_assert_eq!(unsynced + st.active, 0);
        }
    }
}

#[test]
fn silent_nodes_and_overdue_pulls_are_failed() {
    let created = now() - SignedDuration::from_secs(601);
    let tag = |t: &str, deadline: Option<i64>| ImageTagSpec {
        tag: t.into(),
        created_at: Some(Time(created)),
        pull_policy: Some(ImageTagPullPolicy {
            ttl_seconds_after_finished: Some(300),
            active_deadline_seconds: deadline,
            ..Default::default()
        }),
        owner_references: vec![owner(UID)],
        ..Default::default()
    };
    let mut ni = node_image("n", &[]);
    ni.spec.images.insert(
        "nginx".into(),
        ImageSpec {
            tags: vec![
                tag("silent", None),
                tag("pulling-overdue", Some(0)),
                tag("pulling-in-time", Some(60)),
                tag("done", None),
            ],
            ..Default::default()
        },
    );
    let state = |t: &str, phase| ImageTagStatus {
        tag: t.into(),
        phase,
        progress: 0,
        start_time: None,
        completion_time: None,
        version: 0,
        image_id: String::new(),
        message: String::new(),
    };
    ni.status = Some(NodeImageStatus {
        image_statuses: BTreeMap::from([(
            "nginx".into(),
            ImageStatus {
                tags: vec![
                    state("pulling-overdue", ImagePullPhase::Pulling),
                    state("pulling-in-time", ImagePullPhase::Pulling),
                    state("done", ImagePullPhase::Succeeded),
                ],
            },
        )]),
        ..Default::default()
    });
    let (out, again) = nodeimage::timeouts(&ni, now());
    let got: Vec<(&str, &str)> = out.iter().map(|t| (t.tag.as_str(), t.message)).collect();
    assert_eq!(
        got,
        [
            ("silent", nodeimage::MESSAGE_NODE_SILENT),
            ("pulling-overdue", nodeimage::MESSAGE_DEADLINE)
        ]
    );
    assert_eq!(out[0].owners[0].uid.as_deref(), Some(UID));
    assert_eq!(
        again,
        Some(Duration::from_secs(59)),
        "pulling-in-time is due then"
    );
    let status = nodeimage::with_timeouts(&ni, &out, now());
    assert_eq!(
        (
            status.desired,
            status.failed,
            status.pulling,
            status.succeeded
        ),
        (4, 2, 1, 1)
    );
    let mut after = ni.clone();
    after.status = Some(status);
    assert!(
        nodeimage::timeouts(&after, now()).0.is_empty(),
        "failed once"
    );
}

fn secret(type_: &str, data: &[(&str, &str)]) -> k8s_openapi::api::core::v1::Secret {
    k8s_openapi::api::core::v1::Secret {
        metadata: ObjectMeta {
            name: Some("pull".into()),
            namespace: Some("default".into()),
            annotations: Some(BTreeMap::from([(
                "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                "{}".to_string(),
            )])),
            ..Default::default()
        },
        type_: Some(type_.into()),
        data: Some(
            data.iter()
                .map(|(k, v)| {
                    (
                        k.to_string(),
                        k8s_openapi::ByteString(v.as_bytes().to_vec()),
                    )
                })
                .collect(),
        ),
        ..Default::default()
    }
}

#[test]
fn cached_secrets_keep_a_digest_of_their_content_not_the_content() {
    use super::secrets::{cached_digest, digest, prune_to_digest};
    let config = "kubernetes.io/dockerconfigjson";
    let mut cached = secret(config, &[(".dockerconfigjson", "{\"auths\":{}}")]);
    let before = digest(&cached);
    prune_to_digest(&mut cached);
    assert_eq!(cached.data, None);
    assert_eq!(cached_digest(&cached), Some(before.as_str()));
    assert_eq!(cached.annotations().len(), 1, "{:?}", cached.annotations());
    // The same content digests the same; other data, another key or type do not.
    let same = secret(config, &[(".dockerconfigjson", "{\"auths\":{}}")]);
    assert_eq!(digest(&same), before);
    for other in [
        secret(config, &[(".dockerconfigjson", "{\"auths\":{\"r\":{}}}")]),
        secret(config, &[(".dockercfg", "{\"auths\":{}}")]),
        secret(
            "kubernetes.io/dockercfg",
            &[(".dockerconfigjson", "{\"auths\":{}}")],
        ),
    ] {
        assert_ne!(digest(&other), before, "{other:?}");
    }
}

#[test]
fn copies_are_made_again_when_missing_or_behind_their_source() {
    use super::secrets::copies_stale;
    let j = pull_job(|s| s.template.pull_secrets = vec!["a".into(), "b".into()]);
    let targets: Vec<ReferenceObject> = ["default.a", "default.b"]
        .iter()
        .map(|name| ReferenceObject {
            namespace: "kruise-daemon-config".into(),
            name: name.to_string(),
            ..Default::default()
        })
        .collect();
    let digests = |known: &'static [(&'static str, &'static str, &'static str)]| {
        move |ns: &str, name: &str| {
            known
                .iter()
                .find(|(n, m, _)| *n == ns && *m == name)
                .map(|(_, _, d)| d.to_string())
        }
    };
    let sources = digests(&[("default", "a", "1"), ("default", "b", "2")]);
    let in_sync = digests(&[
        ("kruise-daemon-config", "default.a", "1"),
        ("kruise-daemon-config", "default.b", "2"),
    ]);
    assert!(!copies_stale(&j, &targets, &sources, &in_sync));
    let rotated = digests(&[("default", "a", "1"), ("default", "b", "3")]);
    assert!(copies_stale(&j, &targets, &rotated, &in_sync));
    let one_missing = digests(&[("kruise-daemon-config", "default.a", "1")]);
    assert!(copies_stale(&j, &targets, &sources, &one_missing));
    // A source not there yet needs no copy; a job in the config namespace, none at all.
    let only_a = digests(&[("default", "a", "1")]);
    assert!(!copies_stale(&j, &targets, &only_a, &one_missing));
    let mut local = j.clone();
    local.metadata.namespace = Some("kruise-daemon-config".into());
    let own: Vec<ReferenceObject> = ["a", "b"]
        .iter()
        .map(|name| ReferenceObject {
            namespace: "kruise-daemon-config".into(),
            name: name.to_string(),
            ..Default::default()
        })
        .collect();
    let local_sources = digests(&[("kruise-daemon-config", "a", "1")]);
    assert!(!copies_stale(&local, &own, &local_sources, &digests(&[])));
}
