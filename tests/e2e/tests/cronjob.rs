//! AdvancedCronJob on the real cluster: examples/advancedcronjob-acj-test.yaml (a
//! BroadcastJob every minute), an ImageListPullJob every minute (OpenKruise v1.9's
//! `imageListPullJobTemplate`),
//! history limits, and the Forbid / Replace policies. The every-minute tests wait for a
//! minute boundary (≤ 75 s); the policy tests use `@every 10s` to stay short.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps_v1alpha1::{
    AdvancedCronJob, BroadcastJob, BroadcastJobPhase, BroadcastJobStatus, ImageListPullJob,
    JobCondition, JobConditionType, TemplateKind,
};
use kruise_e2e::{RunningController, TestNamespace, kubectl_async, wait_for};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};

use crate::broadcastjob::eligible_kwok_nodes;

async fn controller(ns: &TestNamespace) -> RunningController {
    if std::env::var_os("RUST_LOG").is_some() {
        kruise_runtime::telemetry::init(kruise_runtime::settings::LogFormat::Text);
    }
    let ctl = RunningController::start(cronjob_ctl::IDENTITY, &ns.name, "", cronjob_ctl::run).await;
    let probe: AdvancedCronJob =
        serde_saphyr::from_str(&acj_yaml("probe", "*/1 * * * *", "", "")).expect("probe");
    kruise_e2e::wait_webhook_effective(&ns.api(), &probe, |c: &AdvancedCronJob| {
        c.spec.concurrency_policy.is_some()
    })
    .await;
    ctl
}

/// `acj-test` of examples/advancedcronjob-acj-test.yaml: a BroadcastJob template (its Pod, on the `type=kwok` nodes);
/// `spec` goes under `spec:`, `script` under the Pod template's annotations.
fn acj_yaml(name: &str, schedule: &str, spec: &str, script: &str) -> String {
    let indent = |text: &str, by: usize| -> String {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| format!("{}{l}\n", " ".repeat(by)))
            .collect()
    };
    format!(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: AdvancedCronJob
metadata:
  name: {name}
spec:
  schedule: "{schedule}"
{spec}  template:
    broadcastJobTemplate:
      metadata:
        labels:
          team: infra
      spec:
        completionPolicy:
          type: Always
        template:
          metadata:
            annotations:
              e2e.kruise.io/scenario: {name}
{script}          spec:
            restartPolicy: Never
            nodeSelector:
              type: kwok
            containers:
            - name: counter
              image: busybox
              command: ["/bin/sh", "-c", "for i in 9 8 7 6 5 4 3 2 1; do echo $i; done"]
"#,
        spec = indent(spec, 2),
        script = indent(script, 14),
    )
}

async fn children(ns: &TestNamespace, acj: &str) -> Vec<BroadcastJob> {
    let api: Api<BroadcastJob> = ns.api();
    let mut list: Vec<BroadcastJob> = api
        .list(&ListParams::default())
        .await
        .expect("list bcj")
        .items
        .into_iter()
        .filter(|j| {
            j.owner_references()
                .iter()
                .any(|o| o.kind == "AdvancedCronJob" && o.name == acj)
                && j.metadata.deletion_timestamp.is_none()
        })
        .collect();
    list.sort_by_key(|j| j.name_any());
    list
}

#[tokio::test]
async fn cronjob_acj_test_creates_a_broadcastjob_every_minute() {
    let ns = TestNamespace::new("acj-test").await;
    let _acj = controller(&ns).await;
    let _bcj = RunningController::start(
        broadcastjob_ctl::IDENTITY,
        &ns.name,
        "",
        broadcastjob_ctl::run,
    )
    .await;
    let n = i32::try_from(eligible_kwok_nodes(&ns.client).await.len()).unwrap();
    ns.apply(&acj_yaml("acj-test", "*/1 * * * *", "", ""))
        .await
        .expect("apply acj-test");
    let api: Api<AdvancedCronJob> = ns.api();
    // The type shows before the first run.
    wait_for("status.type", Duration::from_secs(30), || async {
        let c = api.get("acj-test").await.map_err(|e| e.to_string())?;
        match c.status.as_ref().and_then(|s| s.type_) {
            Some(TemplateKind::BroadcastJob) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // Applied again unchanged: kubectl sends the Pod template without the defaults the
    // webhook added, which must not read as a change of the immutable template.
    let before = api.get("acj-test").await.unwrap();
    ns.apply(&acj_yaml("acj-test", "*/1 * * * *", "", ""))
        .await
        .expect("apply acj-test again, unchanged");
    let after = api.get("acj-test").await.unwrap();
    assert_eq!(
        serde_json::to_value(&after.spec).unwrap(),
        serde_json::to_value(&before.spec).unwrap()
    );
    let (ok, out, err) = kubectl_async(
        vec!["get".into(), "acj".into(), "-n".into(), ns.name.clone()],
        None,
    )
    .await;
    assert!(ok, "{err}");
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "SCHEDULE", "TYPE", "LASTSCHEDULETIME", "AGE"]
    );
    assert!(out.contains("*/1 * * * *   BroadcastJob"), "{out}");

    // At the next minute: `acj-test-<unix seconds of the minute>`.
    let child = wait_for(
        "the minute's BroadcastJob",
        Duration::from_secs(75),
        || async {
            children(&ns, "acj-test")
                .await
                .into_iter()
                .next()
                .ok_or_else(|| "none yet".to_string())
        },
    )
    .await;
    let name = child.name_any();
    let unix: i64 = name
        .strip_prefix("acj-test-")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("child name {name}"));
    assert_eq!(unix % 60, 0, "{name}");
    assert_eq!(
        child.labels().get("team").map(String::as_str),
        Some("infra")
    );
    let scheduled = jiff::Timestamp::from_second(unix).unwrap();
    assert_eq!(
        child.annotations()["apps.kruise.io/scheduled-at"],
        scheduled.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    );
    // It runs on every node and completes; the cron job records the schedule time.
    let bcj: Api<BroadcastJob> = ns.api();
    wait_for("the child to complete", Duration::from_secs(60), || async {
        let j = bcj.get(&name).await.map_err(|e| e.to_string())?;
        let s = j.status.clone().unwrap_or_default();
        if s.phase == Some(BroadcastJobPhase::Completed) && (s.desired, s.succeeded) == (n, n) {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
    wait_for("lastScheduleTime", Duration::from_secs(30), || async {
        let c = api.get("acj-test").await.map_err(|e| e.to_string())?;
        let s = c.status.unwrap_or_default();
        if s.last_schedule_time == Some(Time(scheduled)) && s.active.is_empty() {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
}

/// A finished child of `acj` made by hand (what an earlier tick left behind).
async fn finished_child(ns: &TestNamespace, acj: &AdvancedCronJob, name: &str, started: &str) {
    let api: Api<BroadcastJob> = ns.api();
    let mut job: BroadcastJob = serde_saphyr::from_str(&format!(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: BroadcastJob
metadata:
  name: {name}
spec:
  completionPolicy:
    type: Always
  template:
    spec:
      restartPolicy: Never
      nodeSelector:
        type: no-such-node
      containers:
      - name: counter
        image: busybox
"#
    ))
    .unwrap();
    job.metadata.owner_references = Some(vec![acj.controller_owner_ref(&()).unwrap()]);
    api.create(&PostParams::default(), &job)
        .await
        .expect("create child");
    let at: jiff::Timestamp = started.parse().unwrap();
    let status = BroadcastJobStatus {
        phase: Some(BroadcastJobPhase::Completed),
        start_time: Some(Time(at)),
        completion_time: Some(Time(at)),
        conditions: vec![JobCondition {
            type_: JobConditionType::Complete,
            status: "True".into(),
            last_probe_time: None,
            last_transition_time: None,
            reason: "Complete".into(),
            message: "Job completed, 0 pods succeeded, 0 pods failed".into(),
        }],
        ..Default::default()
    };
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": status})),
    )
    .await
    .expect("child status");
}

#[tokio::test]
async fn cronjob_history_limits_prune_the_oldest_finished_children() {
    let ns = TestNamespace::new("acj-history").await;
    let _ctl = controller(&ns).await;
    // Paused: nothing runs, yet history is pruned.
    ns.apply(&acj_yaml(
        "acj-history",
        "*/1 * * * *",
        "paused: true\nsuccessfulJobsHistoryLimit: 2",
        "",
    ))
    .await
    .expect("apply");
    let acj: AdvancedCronJob = ns.api().get("acj-history").await.unwrap();
    for (name, started) in [
        ("acj-history-1", "2022-03-03T11:00:00Z"),
        ("acj-history-2", "2022-03-03T11:01:00Z"),
        ("acj-history-3", "2022-03-03T11:02:00Z"),
    ] {
        finished_child(&ns, &acj, name, started).await;
    }
    wait_for(
        "the oldest finished child to go",
        Duration::from_secs(30),
        || async {
            let names: Vec<String> = children(&ns, "acj-history")
                .await
                .iter()
                .map(ResourceExt::name_any)
                .collect();
            if names == ["acj-history-2", "acj-history-3"] {
                Ok(())
            } else {
                Err(format!("{names:?}"))
            }
        },
    )
    .await;
}

/// Waits until the cron job has made `count` children, and returns their names.
async fn wait_children(
    ns: &TestNamespace,
    acj: &str,
    count: usize,
    within: Duration,
) -> Vec<String> {
    wait_for(&format!("{count} children of {acj}"), within, || async {
        let names: Vec<String> = children(ns, acj)
            .await
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        if names.len() >= count {
            Ok(names)
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await
}

#[tokio::test]
async fn cronjob_forbid_skips_while_a_run_is_active() {
    let ns = TestNamespace::new("acj-forbid").await;
    let _ctl = controller(&ns).await;
    // No BroadcastJob controller here: a child stays active (no Complete condition).
    ns.apply(&acj_yaml(
        "acj-forbid",
        "@every 10s",
        "concurrencyPolicy: Forbid",
        "",
    ))
    .await
    .expect("apply");
    let first = wait_children(&ns, "acj-forbid", 1, Duration::from_secs(30)).await;
    // Two more ticks pass: still the one child, and it is the active one.
    tokio::time::sleep(Duration::from_secs(22)).await;
    let names: Vec<String> = children(&ns, "acj-forbid")
        .await
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(names, first);
    let acj: AdvancedCronJob = ns.api().get("acj-forbid").await.unwrap();
    let active = acj.status.unwrap().active;
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].name.as_ref(), first.first());
}

#[tokio::test]
async fn cronjob_replace_replaces_the_active_run() {
    let ns = TestNamespace::new("acj-replace").await;
    let _ctl = controller(&ns).await;
    ns.apply(&acj_yaml(
        "acj-replace",
        "@every 10s",
        "concurrencyPolicy: Replace",
        "",
    ))
    .await
    .expect("apply");
    let first = wait_children(&ns, "acj-replace", 1, Duration::from_secs(30)).await;
    let bcj: Api<BroadcastJob> = ns.api();
    // At the next tick the active child is deleted and a newer one made.
    wait_for("the replacement", Duration::from_secs(30), || async {
        let names: Vec<String> = children(&ns, "acj-replace")
            .await
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        let gone = bcj
            .get_opt(&first[0])
            .await
            .map_err(|e| e.to_string())?
            .is_none_or(|j| j.meta().deletion_timestamp.is_some());
        if gone && names.len() == 1 && names[0] > first[0] {
            Ok(())
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await;
}

#[tokio::test]
async fn cronjob_bad_schedules_are_refused_with_the_parsers_message() {
    let ns = TestNamespace::new("acj-admission").await;
    let _ctl = controller(&ns).await;
    let refused = ns
        .apply(&acj_yaml("bad", "* * * *", "", ""))
        .await
        .expect_err("a 4-field schedule is refused");
    assert!(
        refused.contains(
            "spec.schedule: Invalid value: \"* * * *\": expected exactly 5 fields, found 4"
        ),
        "{refused}"
    );
    let refused = ns
        .apply(&acj_yaml("bad", "0 8 * * *", "timeZone: Mars/Olympus", ""))
        .await
        .expect_err("an unknown zone is refused");
    assert!(
        refused.contains("unknown time zone Mars/Olympus"),
        "{refused}"
    );
    ns.apply(&acj_yaml(
        "good",
        "0 8 * * *",
        "timeZone: Asia/Shanghai",
        "",
    ))
    .await
    .expect("a zone is fine");
    // The template is immutable.
    let changed = acj_yaml(
        "good",
        "0 8 * * *",
        "timeZone: Asia/Shanghai",
        "e2e.kruise.io/run-for: 1h",
    );
    let refused = ns
        .apply(&changed)
        .await
        .expect_err("template change refused");
    assert!(
        refused.contains("spec: Forbidden: updates to advancedcronjob spec"),
        "{refused}"
    );
}

#[tokio::test]
async fn cronjob_job_template_creates_batch_jobs() {
    use k8s_openapi::api::batch::v1::Job;
    let ns = TestNamespace::new("acj-job").await;
    let _ctl = controller(&ns).await;
    ns.apply(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: AdvancedCronJob
metadata:
  name: acj-job
spec:
  schedule: "@every 10s"
  template:
    jobTemplate:
      metadata:
        labels:
          app: acj-job
      spec:
        backoffLimit: 1
        template:
          spec:
            restartPolicy: OnFailure
            nodeSelector:
              type: kwok
            containers:
            - name: hello
              image: busybox
              command: ["sh", "-c", "date"]
"#,
    )
    .await
    .expect("apply");
    let jobs: Api<Job> = ns.api();
    let job = wait_for("a Job of the cron job", Duration::from_secs(40), || async {
        jobs.list(&ListParams::default().labels("app=acj-job"))
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .next()
            .ok_or_else(|| "none yet".to_string())
    })
    .await;
    let name = job.name_any();
    let unix: i64 = name
        .strip_prefix("acj-job-")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("Job name {name}"));
    assert!(
        job.annotations()
            .contains_key("apps.kruise.io/scheduled-at")
    );
    let owner = &job.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("AdvancedCronJob", Some(true))
    );
    let api: Api<AdvancedCronJob> = ns.api();
    wait_for(
        "status.type Job and the schedule time",
        Duration::from_secs(30),
        || async {
            let s = api
                .get("acj-job")
                .await
                .map_err(|e| e.to_string())?
                .status
                .unwrap_or_default();
            let seen = s.last_schedule_time.as_ref().map(|t| t.0.as_second());
            if s.type_ == Some(TemplateKind::Job) && seen >= Some(unix) {
                Ok(())
            } else {
                Err(format!("{s:?}"))
            }
        },
    )
    .await;
}

/// An AdvancedCronJob creating ImageListPullJobs (OpenKruise v1.9's v1beta1
/// `imageListPullJobTemplate`), sent as `v1beta1`; its images pulled on the test's own fake
/// NodeImage (no agent serves it, so the pulls stay in progress).
fn ilpj_acj_yaml(name: &str, schedule: &str, policy: &str, fake_node: &str) -> String {
    format!(
        r#"apiVersion: apps.kruise.io/v1beta1
kind: AdvancedCronJob
metadata:
  name: {name}
spec:
  schedule: "{schedule}"
  concurrencyPolicy: {policy}
  template:
    imageListPullJobTemplate:
      metadata:
        labels:
          team: infra
        annotations:
          example.com/purpose: warm-up
      spec:
        images:
        - nginx:1.25
        - busybox:1.36
        parallelism: 2
        selector:
          names:
          - {fake_node}
"#
    )
}

async fn ilpj_children(ns: &TestNamespace, acj: &str) -> Vec<ImageListPullJob> {
    let api: Api<ImageListPullJob> = ns.api();
    let mut list: Vec<ImageListPullJob> = api
        .list(&ListParams::default())
        .await
        .expect("list ImageListPullJobs")
        .items
        .into_iter()
        .filter(|j| {
            j.owner_references()
                .iter()
                .any(|o| o.kind == "AdvancedCronJob" && o.name == acj)
        })
        .collect();
    list.sort_by_key(|j| j.name_any());
    list
}

#[tokio::test]
async fn cronjob_imagelistpulljob_template_creates_an_imagelistpulljob_every_minute() {
    use kruise_api::apps_v1alpha1::ImagePullJob;
    let ns = TestNamespace::new("acj-ilpj").await;
    let _acj = controller(&ns).await;
    let _ipj = RunningController::start(
        imagepulljob_ctl::IDENTITY,
        &ns.name,
        "",
        imagepulljob_ctl::run,
    )
    .await;
    let fake = format!("{}-fake", ns.name);
    let node_images = crate::imagepull::fake_node_image(&ns, &fake).await;
    ns.apply(&ilpj_acj_yaml("acj-ilpj", "*/1 * * * *", "Forbid", &fake))
        .await
        .expect("apply acj-ilpj");
    let api: Api<AdvancedCronJob> = ns.api();
    let acj = api.get("acj-ilpj").await.unwrap();
    // Defaulted by the webhook as upstream's SetDefaultsAdvancedCronJob.
    let template = acj
        .spec
        .template
        .image_list_pull_job_template
        .clone()
        .unwrap();
    let pull = template.spec.template.pull_policy.clone().unwrap();
    assert_eq!(
        (pull.timeout_seconds, pull.backoff_limit),
        (Some(600), Some(3))
    );
    wait_for("status.type", Duration::from_secs(30), || async {
        let c = api.get("acj-ilpj").await.map_err(|e| e.to_string())?;
        match c.status.as_ref().and_then(|s| s.type_) {
            Some(TemplateKind::ImageListPullJob) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let (ok, out, err) = kubectl_async(
        vec!["get".into(), "acj".into(), "-n".into(), ns.name.clone()],
        None,
    )
    .await;
    assert!(ok, "{err}");
    assert!(out.contains("*/1 * * * *   ImageListPullJob"), "{out}");

    // At the next minute: `acj-ilpj-<unix seconds of the minute>`, owned by the cron job.
    let child = wait_for(
        "the minute's ImageListPullJob",
        Duration::from_secs(75),
        || async {
            ilpj_children(&ns, "acj-ilpj")
                .await
                .into_iter()
                .next()
                .ok_or_else(|| "none yet".to_string())
        },
    )
    .await;
    let name = child.name_any();
    let unix: i64 = name
        .strip_prefix("acj-ilpj-")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("child name {name}"));
    assert_eq!(unix % 60, 0, "{name}");
    let owner = &child.owner_references()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            Some(owner.uid.as_str()),
            owner.controller,
        ),
        (
            "apps.kruise.io/v1beta1",
            "AdvancedCronJob",
            "acj-ilpj",
            acj.metadata.uid.as_deref(),
            Some(true)
        )
    );
    assert_eq!(child.spec.images, ["nginx:1.25", "busybox:1.36"]);
    assert_eq!(child.labels()["team"], "infra");
    let scheduled = jiff::Timestamp::from_second(unix).unwrap();
    assert_eq!(child.annotations()["example.com/purpose"], "warm-up");
    assert_eq!(
        child.annotations()["apps.kruise.io/scheduled-at"],
        scheduled.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    );
    // The ImageListPullJob controller makes one ImagePullJob per image, owned by it.
    let pulls = wait_for(
        "an ImagePullJob per image",
        Duration::from_secs(60),
        || async {
            let mut images: Vec<String> = ns
                .api::<ImagePullJob>()
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .into_iter()
                .filter(|j| j.owner_references().iter().any(|o| o.name == name))
                .map(|j| j.spec.image)
                .collect();
            images.sort();
            if images.len() == 2 {
                Ok(images)
            } else {
                Err(format!("{images:?}"))
            }
        },
    )
    .await;
    assert_eq!(pulls, ["busybox:1.36", "nginx:1.25"]);
    // No agent serves the fake node: it stays active, and the cron job lists it.
    wait_for(
        "status.active and lastScheduleTime",
        Duration::from_secs(30),
        || async {
            let c = api.get("acj-ilpj").await.map_err(|e| e.to_string())?;
            let s = c.status.unwrap_or_default();
            let active: Vec<_> = s
                .active
                .iter()
                .map(|r| (r.kind.as_deref(), r.name.as_deref()))
                .collect();
            if active == [(Some("ImageListPullJob"), Some(name.as_str()))]
                && s.last_schedule_time == Some(Time(scheduled))
            {
                Ok(())
            } else {
                Err(format!("{s:?}"))
            }
        },
    )
    .await;
    node_images
        .delete(&fake, &kube::api::DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn cronjob_imagelistpulljob_forbid_makes_no_second_while_one_is_active() {
    let ns = TestNamespace::new("acj-ilpj-forbid").await;
    let _ctl = controller(&ns).await;
    // No ImageListPullJob controller here: the child never completes.
    ns.apply(&ilpj_acj_yaml(
        "acj-ilpj-forbid",
        "@every 10s",
        "Forbid",
        "no-such-node",
    ))
    .await
    .expect("apply");
    let first = wait_for("the first child", Duration::from_secs(30), || async {
        let names: Vec<String> = ilpj_children(&ns, "acj-ilpj-forbid")
            .await
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        if names.is_empty() {
            Err("none yet".to_string())
        } else {
            Ok(names)
        }
    })
    .await;
    assert_eq!(first.len(), 1);
    // Two more ticks pass: still the one child, and it is the active one.
    tokio::time::sleep(Duration::from_secs(22)).await;
    let names: Vec<String> = ilpj_children(&ns, "acj-ilpj-forbid")
        .await
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(names, first);
    let acj: AdvancedCronJob = ns.api().get("acj-ilpj-forbid").await.unwrap();
    let active = acj.status.unwrap().active;
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].name.as_ref(), first.first());
}

#[tokio::test]
async fn cronjob_imagelistpulljob_template_admission_names_the_field() {
    let ns = TestNamespace::new("acj-ilpj-admission").await;
    let _ctl = controller(&ns).await;
    // Concurrent pulls of the same images are refused: Replace or Forbid only.
    let refused = ns
        .apply(&ilpj_acj_yaml("concurrent", "0 3 * * *", "Allow", "n1"))
        .await
        .expect_err("Allow is refused");
    assert!(
        refused.contains(
            "spec.concurrencyPolicy: Invalid value: \"Allow\": concurrencyPolicy should be Replace or Forbid, but current value is: Allow"
        ),
        "{refused}"
    );
    // An image reference that does not parse.
    let bad_image = ilpj_acj_yaml("bad-image", "0 3 * * *", "Replace", "n1")
        .replace("nginx:1.25", "Nginx:1.25");
    let refused = ns.apply(&bad_image).await.expect_err("bad image refused");
    assert!(
        refused.contains(
            "spec.template.imageListPullJobTemplate.spec.images: Invalid value: [\"Nginx:1.25\",\"busybox:1.36\"]: invalid image Nginx:1.25: invalid reference format: repository name (library/Nginx) must be lowercase"
        ),
        "{refused}"
    );
    // A TTL: the cron job's history limits delete its children.
    let ttl = format!(
        "{}        completionPolicy:\n          ttlSecondsAfterFinished: 30\n",
        ilpj_acj_yaml("ttl", "0 3 * * *", "Replace", "n1")
    );
    let refused = ns.apply(&ttl).await.expect_err("a TTL is refused");
    assert!(
        refused.contains(
            "spec.template.imageListPullJobTemplate.spec.completionPolicy.ttlSecondsAfterFinished: Invalid value: 30: ttlSecondsAfterFinished is not supported in advancedCronJob"
        ),
        "{refused}"
    );
    // Two templates.
    let two = format!(
        "{}    jobTemplate:\n      spec:\n        template:\n          spec:\n            restartPolicy: Never\n            containers:\n            - name: c\n              image: busybox\n",
        ilpj_acj_yaml("two", "0 3 * * *", "Replace", "n1")
    );
    let refused = ns.apply(&two).await.expect_err("two templates refused");
    assert!(
        refused.contains(
            "spec.template: Forbidden: spec can have only one template, either JobTemplate or BroadcastJobTemplate or ImageListPullJobTemplate should be provided"
        ),
        "{refused}"
    );
    // Accepted; its images may change afterwards, its kind of template may not.
    ns.apply(&ilpj_acj_yaml("good", "0 3 * * *", "Replace", "n1"))
        .await
        .expect("a valid one");
    ns.apply(
        &ilpj_acj_yaml("good", "0 3 * * *", "Replace", "n1").replace("nginx:1.25", "nginx:1.26"),
    )
    .await
    .expect("the images may change");
    let good: AdvancedCronJob = ns.api().get("good").await.unwrap();
    let images = &good
        .spec
        .template
        .image_list_pull_job_template
        .unwrap()
        .spec
        .images;
    assert_eq!(images, &["nginx:1.26", "busybox:1.36"]);
    let refused = ns
        .apply(&acj_yaml(
            "good",
            "0 3 * * *",
            "concurrencyPolicy: Replace",
            "",
        ))
        .await
        .expect_err("switching to a BroadcastJob template is refused");
    assert!(
        refused.contains("spec: Forbidden: updates to advancedcronjob spec for fields other than 'imageListPullJobTemplate'"),
        "{refused}"
    );
}
