//! Plan tests: schedules in named zones, missed ticks, concurrency, history.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    AdvancedCronJob, AdvancedCronJobSpec, BroadcastJobTemplateSpec, ConcurrencyPolicy,
    CronJobTemplate, ImageListPullJob, ImageListPullJobSpec, ImageListPullJobStatus,
    ImageListPullJobTemplateSpec, ImagePullJobTemplate, TemplateKind,
};

use super::schedule::{Schedule, go_duration};
use super::*;

pub fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

pub fn cron(schedule: &str, edit: impl FnOnce(&mut AdvancedCronJobSpec)) -> AdvancedCronJob {
    let mut spec = AdvancedCronJobSpec {
        schedule: schedule.into(),
        template: CronJobTemplate {
            broadcast_job_template: Some(BroadcastJobTemplateSpec::default()),
            ..Default::default()
        },
        ..Default::default()
    };
    edit(&mut spec);
    let mut c = AdvancedCronJob::new("acj-test", spec);
    c.metadata.namespace = Some("default".into());
    c.metadata.uid = Some("acj-uid".into());
    c.metadata.creation_timestamp = Some(Time(ts("2022-03-03T10:59:30Z")));
    c
}

pub fn child(
    name: &str,
    finished: Option<bool>,
    start: Option<&str>,
    scheduled: Option<&str>,
) -> Child {
    Child {
        reference: ObjectReference {
            api_version: Some("apps.kruise.io/v1alpha1".into()),
            kind: Some("BroadcastJob".into()),
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        finished,
        start_time: start.map(ts),
        scheduled_at: scheduled.map(ts),
    }
}

fn run(c: &AdvancedCronJob, children: Vec<Child>, now: &str) -> Outcome {
    plan(&World {
        cron: c,
        children,
        now: ts(now),
    })
}

fn next(schedule: &str, zone: Option<&str>, after: &str) -> String {
    Schedule::parse(schedule, zone)
        .unwrap()
        .next_after(ts(after))
        .unwrap()
        .to_string()
}

#[test]
fn every_minute_creates_the_child_at_the_minute() {
    let c = cron("*/1 * * * *", |_| {});
    let out = run(&c, vec![], "2022-03-03T10:59:50Z");
    assert_eq!(out.skip, Some(Skip::NotYet));
    assert_eq!(out.create, None);
    assert_eq!(out.requeue_after, Some(Duration::from_secs(10)));
    assert_eq!(out.status.type_, Some(TemplateKind::BroadcastJob));
    assert_eq!(out.status.last_schedule_time, None);

    let out = run(&c, vec![], "2022-03-03T11:00:02Z");
    let Some(NewChild::BroadcastJob(job)) = &out.create else {
        panic!("{out:?}")
    };
    assert_eq!(job.metadata.name.as_deref(), Some("acj-test-1646305200"));
    assert_eq!(
        job.metadata.annotations.as_ref().unwrap()["apps.kruise.io/scheduled-at"],
        "2022-03-03T11:00:00Z"
    );
    let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.uid.as_str(),
            owner.controller
        ),
        (
            "apps.kruise.io/v1beta1",
            "AdvancedCronJob",
            "acj-uid",
            Some(true)
        )
    );
    assert_eq!(out.requeue_after, Some(Duration::from_secs(58)));
}

#[test]
fn job_template_creates_jobs() {
    let c = cron("0 * * * *", |s| {
        s.template = CronJobTemplate {
            job_template: Some(Default::default()),
            ..Default::default()
        }
    });
    let out = run(&c, vec![], "2022-03-03T11:00:00Z");
    assert_eq!(out.status.type_, Some(TemplateKind::Job));
    assert!(
        matches!(&out.create, Some(NewChild::Job(j)) if j.metadata.name.as_deref() == Some("acj-test-1646305200"))
    );
}

fn ilpj_cron(edit: impl FnOnce(&mut AdvancedCronJobSpec)) -> AdvancedCronJob {
    cron("*/1 * * * *", |s| {
        s.template = CronJobTemplate {
            image_list_pull_job_template: Some(ImageListPullJobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some([("team".to_string(), "infra".to_string())].into()),
                    annotations: Some([("note".to_string(), "warm".to_string())].into()),
                    ..Default::default()
                }),
                spec: ImageListPullJobSpec {
                    images: vec!["nginx:1.25".into(), "busybox:1.36".into()],
                    template: ImagePullJobTemplate {
                        parallelism: Some(IntOrString::Int(2)),
                        ..Default::default()
                    },
                },
            }),
            ..Default::default()
        };
        s.concurrency_policy = Some(ConcurrencyPolicy::Forbid);
        edit(s);
    })
}

#[test]
fn imagelistpulljob_template_creates_an_imagelistpulljob_named_for_the_tick() {
    let c = ilpj_cron(|_| {});
    let out = run(&c, vec![], "2022-03-03T11:00:02Z");
    assert_eq!(out.status.type_, Some(TemplateKind::ImageListPullJob));
    let Some(NewChild::ImageListPullJob(job)) = &out.create else {
        panic!("{out:?}")
    };
    assert_eq!(job.metadata.name.as_deref(), Some("acj-test-1646305200"));
    assert_eq!(job.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(job.spec.images, ["nginx:1.25", "busybox:1.36"]);
    assert_eq!(job.spec.template.parallelism, Some(IntOrString::Int(2)));
    assert_eq!(job.labels()["team"], "infra");
    let annotations = job.annotations();
    assert_eq!(annotations["note"], "warm");
    assert_eq!(
        annotations["apps.kruise.io/scheduled-at"],
        "2022-03-03T11:00:00Z"
    );
    let owner = &job.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller,
            owner.block_owner_deletion,
        ),
        (
            "apps.kruise.io/v1beta1",
            "AdvancedCronJob",
            "acj-test",
            "acj-uid",
            Some(true),
            Some(true)
        )
    );
    // The ImageListPullJob a create sends carries its kind, so the apiserver routes it.
    let sent = serde_json::to_value(job.as_ref()).unwrap();
    assert_eq!(sent["kind"], "ImageListPullJob");
    assert_eq!(sent["apiVersion"], "apps.kruise.io/v1alpha1");
}

fn ilpj(name: &str, status: Option<ImageListPullJobStatus>) -> ImageListPullJob {
    let mut job = ImageListPullJob::new(name, ImageListPullJobSpec::default());
    job.metadata.namespace = Some("default".into());
    job.metadata.annotations = Some(
        [(
            "apps.kruise.io/scheduled-at".to_string(),
            "2022-03-03T11:00:00Z".to_string(),
        )]
        .into(),
    );
    job.status = status;
    job
}

#[test]
fn an_imagelistpulljob_is_finished_at_its_completion_time() {
    let done = |desired, succeeded| ImageListPullJobStatus {
        start_time: Some(Time(ts("2022-03-03T11:00:01Z"))),
        completion_time: Some(Time(ts("2022-03-03T11:00:30Z"))),
        desired,
        succeeded,
        completed: desired,
        ..Default::default()
    };
    // No status yet, or running: active.
    assert_eq!(imagelistpulljob_child(&ilpj("a", None)).finished, None);
    let running = ImageListPullJobStatus {
        start_time: Some(Time(ts("2022-03-03T11:00:01Z"))),
        desired: 2,
        active: 2,
        ..Default::default()
    };
    let child = imagelistpulljob_child(&ilpj("a", Some(running)));
    assert_eq!(child.finished, None);
    assert_eq!(child.start_time, Some(ts("2022-03-03T11:00:01Z")));
    assert_eq!(child.scheduled_at, Some(ts("2022-03-03T11:00:00Z")));
    assert_eq!(child.reference.kind.as_deref(), Some("ImageListPullJob"));
    assert_eq!(
        child.reference.api_version.as_deref(),
        Some("apps.kruise.io/v1alpha1")
    );
    // Completed: Complete when every image succeeded, Failed otherwise.
    assert_eq!(
        imagelistpulljob_child(&ilpj("a", Some(done(2, 2)))).finished,
        Some(true)
    );
    assert_eq!(
        imagelistpulljob_child(&ilpj("a", Some(done(2, 1)))).finished,
        Some(false)
    );
}

#[test]
fn imagelistpulljob_children_follow_the_policies_and_history() {
    let running = ImageListPullJobStatus {
        desired: 2,
        active: 2,
        ..Default::default()
    };
    let active = vec![imagelistpulljob_child(&ilpj(
        "acj-test-1646305200",
        Some(running),
    ))];
    // Forbid: the next tick is skipped while it is active; status lists it.
    let out = run(&ilpj_cron(|_| {}), active.clone(), "2022-03-03T11:01:01Z");
    assert_eq!(out.skip, Some(Skip::Forbidden));
    assert!(out.create.is_none());
    assert_eq!(out.status.active.len(), 1);
    assert_eq!(
        out.status.active[0].name.as_deref(),
        Some("acj-test-1646305200")
    );
    // Replace: deleted, and the tick's ImageListPullJob created.
    let replace = ilpj_cron(|s| s.concurrency_policy = Some(ConcurrencyPolicy::Replace));
    let out = run(&replace, active, "2022-03-03T11:01:01Z");
    assert_eq!(
        out.delete
            .iter()
            .map(|r| (r.kind.clone().unwrap(), r.name.clone().unwrap()))
            .collect::<Vec<_>>(),
        [(
            "ImageListPullJob".to_string(),
            "acj-test-1646305200".to_string()
        )]
    );
    assert!(matches!(&out.create, Some(NewChild::ImageListPullJob(j))
        if j.metadata.name.as_deref() == Some("acj-test-1646305260")));
    // History: one failed kept by default, the older one pruned; paused runs nothing.
    let failed = |name: &str, start: &str| {
        imagelistpulljob_child(&ilpj(
            name,
            Some(ImageListPullJobStatus {
                start_time: Some(Time(ts(start))),
                completion_time: Some(Time(ts(start))),
                desired: 1,
                ..Default::default()
            }),
        ))
    };
    let paused = ilpj_cron(|s| s.paused = Some(true));
    let out = run(
        &paused,
        vec![
            failed("old", "2022-03-03T11:00:00Z"),
            failed("new", "2022-03-03T11:01:00Z"),
        ],
        "2022-03-03T11:02:01Z",
    );
    assert_eq!(out.skip, Some(Skip::Paused));
    assert!(out.create.is_none());
    assert_eq!(
        out.delete
            .iter()
            .map(|r| r.name.clone().unwrap())
            .collect::<Vec<_>>(),
        ["old"]
    );
}

#[test]
fn status_lists_active_children_and_the_latest_schedule() {
    let c = cron("*/1 * * * *", |_| {});
    let kids = vec![
        child("acj-test-1", Some(true), None, Some("2022-03-03T11:00:00Z")),
        child("acj-test-2", None, None, Some("2022-03-03T11:01:00Z")),
    ];
    let s = compute_status(&c, &kids);
    assert_eq!(s.active.len(), 1);
    assert_eq!(s.active[0].name.as_deref(), Some("acj-test-2"));
    assert_eq!(s.last_schedule_time, Some(Time(ts("2022-03-03T11:01:00Z"))));
}

#[test]
fn forbid_skips_while_active_and_replace_replaces() {
    let active = vec![child(
        "acj-test-1646305200",
        None,
        None,
        Some("2022-03-03T11:00:00Z"),
    )];
    let forbid = cron("*/1 * * * *", |s| {
        s.concurrency_policy = Some(ConcurrencyPolicy::Forbid)
    });
    let out = run(&forbid, active.clone(), "2022-03-03T11:01:01Z");
    assert_eq!(out.skip, Some(Skip::Forbidden));
    assert!(out.create.is_none() && out.delete.is_empty());
    assert_eq!(out.requeue_after, Some(Duration::from_secs(59)));

    let replace = cron("*/1 * * * *", |s| {
        s.concurrency_policy = Some(ConcurrencyPolicy::Replace)
    });
    let out = run(&replace, active.clone(), "2022-03-03T11:01:01Z");
    assert_eq!(out.delete.len(), 1);
    assert_eq!(out.delete[0].name.as_deref(), Some("acj-test-1646305200"));
    assert_eq!(
        out.create.as_ref().map(NewChild::name).as_deref(),
        Some("acj-test-1646305260")
    );

    let allow = cron("*/1 * * * *", |_| {});
    let out = run(&allow, active, "2022-03-03T11:01:01Z");
    assert!(out.delete.is_empty());
    assert!(out.create.is_some());
}

#[test]
fn paused_prunes_history_but_runs_nothing_and_does_not_requeue() {
    let c = cron("*/1 * * * *", |s| {
        s.paused = Some(true);
        s.successful_jobs_history_limit = Some(1);
    });
    let kids = vec![
        child(
            "a",
            Some(true),
            Some("2022-03-03T11:00:00Z"),
            Some("2022-03-03T11:00:00Z"),
        ),
        child(
            "b",
            Some(true),
            Some("2022-03-03T11:01:00Z"),
            Some("2022-03-03T11:01:00Z"),
        ),
    ];
    let out = run(&c, kids, "2022-03-03T11:05:00Z");
    assert_eq!(out.skip, Some(Skip::Paused));
    assert_eq!(
        out.delete
            .iter()
            .map(|r| r.name.clone().unwrap())
            .collect::<Vec<_>>(),
        ["a"]
    );
    assert!(out.create.is_none());
    assert_eq!(out.requeue_after, None);
}

#[test]
fn history_keeps_the_newest_by_start_time_and_missing_counts_oldest() {
    let c = cron("*/1 * * * *", |s| {
        s.successful_jobs_history_limit = Some(2);
        s.failed_jobs_history_limit = Some(0);
    });
    let kids = vec![
        child("s3", Some(true), Some("2022-03-03T11:03:00Z"), None),
        child("s1", Some(true), Some("2022-03-03T11:01:00Z"), None),
        child("s-none", Some(true), None, None),
        child("s2", Some(true), Some("2022-03-03T11:02:00Z"), None),
        child("f1", Some(false), Some("2022-03-03T11:00:00Z"), None),
        child("running", None, None, None),
    ];
    let pruned: Vec<_> = history_to_prune(&c, &kids)
        .into_iter()
        .map(|r| r.name.unwrap())
        .collect();
    assert_eq!(pruned, ["s-none", "s1", "f1"]);
}

#[test]
fn after_a_long_outage_only_the_latest_tick_runs_and_only_within_the_deadline() {
    // Down from 11:00 to 11:30 with the last run at 11:00.
    let kids = vec![child(
        "acj-test-1646305200",
        Some(true),
        None,
        Some("2022-03-03T11:00:00Z"),
    )];
    let c = cron("*/1 * * * *", |_| {});
    let out = run(&c, kids.clone(), "2022-03-03T11:30:10Z");
    assert_eq!(
        out.create.as_ref().map(NewChild::name).as_deref(),
        Some("acj-test-1646307000")
    );
    // With a deadline of 5 s the 11:30 tick is 10 s late: skipped.
    let strict = cron("*/1 * * * *", |s| s.starting_deadline_seconds = Some(5));
    let out = run(&strict, kids.clone(), "2022-03-03T11:30:10Z");
    assert_eq!(out.skip, Some(Skip::NotYet));
    assert!(out.create.is_none());
    // Within 60 s it runs.
    let lenient = cron("*/1 * * * *", |s| s.starting_deadline_seconds = Some(60));
    let out = run(&lenient, kids.clone(), "2022-03-03T11:30:10Z");
    assert!(out.create.is_some());
    // More than 100 missed ticks and no deadline: nothing runs, no requeue.
    let out = run(&c, kids, "2022-03-03T14:00:10Z");
    assert_eq!(out.skip, Some(Skip::TooManyMissed));
    assert!(out.create.is_none());
    assert_eq!(out.requeue_after, None);
}

#[test]
fn time_zones_and_daylight_saving() {
    // 08:00 in Shanghai is 00:00 UTC.
    assert_eq!(
        next("0 8 * * *", Some("Asia/Shanghai"), "2022-03-03T01:00:00Z"),
        "2022-03-04T00:00:00Z"
    );
    assert_eq!(
        next("TZ=Asia/Shanghai 0 8 * * *", None, "2022-03-03T01:00:00Z"),
        "2022-03-04T00:00:00Z"
    );
    // New York springs forward on 2025-03-09: 02:30 does not exist that day, the job
    // runs at the first minute after the gap, 03:00 EDT (07:00 UTC).
    assert_eq!(
        next(
            "30 2 * * *",
            Some("America/New_York"),
            "2025-03-08T12:00:00Z"
        ),
        "2025-03-09T07:00:00Z"
    );
    // The day after it is back at 02:30 EDT (06:30 UTC).
    assert_eq!(
        next(
            "30 2 * * *",
            Some("America/New_York"),
            "2025-03-09T12:00:00Z"
        ),
        "2025-03-10T06:30:00Z"
    );
    // Falling back on 2025-11-02: 01:30 happens twice, the job runs once (EDT, 05:30 UTC)
    // and next on the 3rd at 01:30 EST (06:30 UTC).
    assert_eq!(
        next(
            "30 1 * * *",
            Some("America/New_York"),
            "2025-11-02T00:00:00Z"
        ),
        "2025-11-02T05:30:00Z"
    );
    assert_eq!(
        next(
            "30 1 * * *",
            Some("America/New_York"),
            "2025-11-02T05:30:00Z"
        ),
        "2025-11-03T06:30:00Z"
    );
    // Hourly ticks stay an hour apart in UTC across the change.
    assert_eq!(
        next(
            "0 * * * *",
            Some("America/New_York"),
            "2025-11-02T05:00:00Z"
        ),
        "2025-11-02T06:00:00Z"
    );
}

#[test]
fn schedules_parse_like_parse_standard() {
    for ok in [
        "*/1 * * * *",
        "0 0 * * SUN",
        "@hourly",
        "@daily",
        "@midnight",
        "@every 1m30s",
        "5 4 1 1-6 *",
    ] {
        assert!(Schedule::parse(ok, None).is_ok(), "{ok}");
    }
    assert_eq!(
        Schedule::parse("* * * *", None).unwrap_err(),
        "expected exactly 5 fields, found 4: [* * * *]"
    );
    assert!(Schedule::parse("0 0 * * * *", None).is_err());
    assert!(Schedule::parse("61 * * * *", None).is_err());
    assert!(Schedule::parse("* * * * *", Some("Mars/Olympus")).is_err());
    assert_eq!(
        next("@every 90s", None, "2022-03-03T11:00:00Z"),
        "2022-03-03T11:01:30Z"
    );
    assert_eq!(go_duration("1h30m"), Some(Duration::from_secs(5400)));
    assert_eq!(go_duration("1x"), None);
}

#[test]
fn the_deadline_bounds_catch_up_from_creation() {
    let c = cron("0 * * * *", |s| s.starting_deadline_seconds = Some(120));
    // Created 10:59:30, first tick 11:00; looked at first at 11:01:00.
    let out = run(&c, vec![], "2022-03-03T11:01:00Z");
    assert!(out.create.is_some());
    let out = run(&c, vec![], "2022-03-03T11:03:00Z");
    assert!(out.create.is_none());
    assert_eq!(out.requeue_after, Some(Duration::from_secs(57 * 60)));
}
