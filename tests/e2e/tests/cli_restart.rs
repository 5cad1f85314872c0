//! `kubectl kruise restart container` and `create broadcastJob` on the kwok nodes, run
//! in-process as cli.rs runs the CLI:
//!
//! - restart: the ContainerRecreateRequest it creates (name, Pod, containers, strategy,
//!   owner, and the labels crr-ctl's webhook stamps); kwok runs no node agent, so the test
//!   writes the completed status an agent would and checks the lines printed while
//!   waiting; the wait's timeout; an unknown container or Pod refused with nothing created;
//! - create broadcastJob: `--image … -- COMMAND` and `--from=advancedcronjob/…` create the
//!   job (template, owner, annotations), whose Pods the broadcastjob controller puts on the
//!   kwok nodes; `--dry-run=client` creates nothing.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::{BroadcastJob, ContainerRecreateRequest};
use kruise_api::keys;
use kruise_e2e::{RunningController, TestNamespace, kubectl_kruise, wait_for};
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;

use crate::broadcastjob::eligible_kwok_nodes;
use crate::crr::{kwok_pod, start_manager};

const MINUTE: Duration = Duration::from_secs(60);

async fn run(ns: &TestNamespace, args: &[&str]) -> String {
    kubectl_kruise(&ns.name, args)
        .await
        .unwrap_or_else(|e| panic!("kubectl kruise {}: {e}", args.join(" ")))
}

async fn refused(ns: &TestNamespace, args: &[&str]) -> String {
    match kubectl_kruise(&ns.name, args).await {
        Ok(out) => panic!(
            "kubectl kruise {} should fail, printed {out}",
            args.join(" ")
        ),
        Err(e) => e,
    }
}

async fn crrs(ns: &TestNamespace) -> Vec<ContainerRecreateRequest> {
    ns.api::<ContainerRecreateRequest>()
        .list(&ListParams::default())
        .await
        .expect("list crrs")
        .items
}

/// The name out of `containerrecreaterequest.apps.kruise.io/NAME created`.
fn created_name(line: &str) -> String {
    line.trim_end()
        .strip_prefix("containerrecreaterequest.apps.kruise.io/")
        .and_then(|l| l.strip_suffix(" created"))
        .unwrap_or_else(|| panic!("not a created line: {line:?}"))
        .to_string()
}

/// Names are unique per second: the next restart of the same Pod waits for a new one.
async fn next_second() {
    tokio::time::sleep(Duration::from_millis(1100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_kruise_restart_container_creates_a_request_and_waits_for_it() {
    let ns = TestNamespace::new("cli-restart").await;
    let _ctl = start_manager(&ns, "").await;
    let pod = kwok_pod(&ns, "web-0", &["app", "sidecar"], true, None).await;
    let uid = pod.metadata.uid.clone().unwrap();
    let node = pod.spec.as_ref().unwrap().node_name.clone().unwrap();

    // Every container, not waiting: the request as the user sees it.
    let before = jiff::Timestamp::now().as_second();
    let out = run(&ns, &["restart", "container", "web-0", "--wait=false"]).await;
    let name = created_name(&out);
    let stamp = name
        .strip_prefix("web-0-restart-")
        .map(|hex| i64::from_str_radix(hex, 16).expect("hex seconds"))
        .unwrap_or_else(|| panic!("{name}"));
    assert!(
        (before..=jiff::Timestamp::now().as_second()).contains(&stamp),
        "{name}"
    );
    let crr = ns
        .api::<ContainerRecreateRequest>()
        .get(&name)
        .await
        .unwrap();
    assert_eq!(crr.spec.pod_name, "web-0");
    let containers: Vec<&str> = crr
        .spec
        .containers
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(containers, ["app", "sidecar"]);
    let spec = serde_json::to_value(&crr.spec).unwrap();
    assert_eq!(spec["strategy"]["failurePolicy"], "Fail");
    assert!(!crr.spec.strategy_or_default().ordered_recreate);
    assert_eq!(spec["strategy"]["unreadyGracePeriodSeconds"], 3);
    // Not given: the webhook takes the Pod's.
    assert_eq!(spec["strategy"]["terminationGracePeriodSeconds"], 7);
    assert_eq!(spec["activeDeadlineSeconds"], 300);
    assert_eq!(spec["ttlSecondsAfterFinished"], 1800);
    let owner = &crr.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("Pod", "web-0", uid.as_str())
    );
    let labels = crr.labels();
    assert_eq!(labels.get(keys::CRR_POD_UID), Some(&uid));
    assert_eq!(labels.get(keys::CRR_NODE_NAME), Some(&node));
    assert_eq!(
        labels.get(keys::CRR_ACTIVE).map(String::as_str),
        Some("true")
    );

    // One container, the timing flags, -o name.
    next_second().await;
    let out = run(
        &ns,
        &[
            "restart",
            "container",
            "web-0",
            "sidecar",
            "--wait=false",
            "-u",
            "5",
            "--terminationGracePeriodSeconds=2",
            "-m",
            "1",
            "-o",
            "name",
        ],
    )
    .await;
    let name = out
        .trim_end()
        .strip_prefix("containerrecreaterequest.apps.kruise.io/")
        .unwrap_or_else(|| panic!("{out}"));
    let spec = serde_json::to_value(
        ns.api::<ContainerRecreateRequest>()
            .get(name)
            .await
            .unwrap()
            .spec,
    )
    .unwrap();
    assert_eq!(spec["containers"].as_array().unwrap().len(), 1);
    assert_eq!(spec["containers"][0]["name"], "sidecar");
    assert_eq!(spec["strategy"]["unreadyGracePeriodSeconds"], 5);
    assert_eq!(spec["strategy"]["terminationGracePeriodSeconds"], 2);
    assert_eq!(spec["strategy"]["minStartedSeconds"], 1);

    // Waiting (the default): kwok has no node agent, so the test writes what one would,
    // app recreated and sidecar not; one line for app, then the error, exit 1.
    next_second().await;
    let namespace = ns.name.clone();
    let waiting = tokio::spawn(async move {
        kubectl_kruise(
            &namespace,
            &["restart", "container", "web-0", "--timeout=1m"],
        )
        .await
    });
    let newest = wait_for("the restart's request", MINUTE, || async {
        let mut all = crrs(&ns).await;
        all.retain(|c| c.spec.containers.len() == 2);
        all.sort_by_key(|c| c.name_any());
        match all.as_slice() {
            [_, newest] => Ok(newest.name_any()),
            other => Err(format!("{} requests for both containers", other.len())),
        }
    })
    .await;
    ns.api::<ContainerRecreateRequest>()
        .patch_status(
            &newest,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Completed", "containerRecreateStates": [
                {"name": "app", "phase": "Succeeded"},
                {"name": "sidecar", "phase": "Failed", "message": "stop failed"}]}}),
            ),
        )
        .await
        .unwrap();
    let err = waiting.await.unwrap().unwrap_err();
    assert_eq!(
        err,
        format!(
            "containerrecreaterequest.apps.kruise.io/{newest} created\n\
             pod/web-0 container app recreated\n\
             error: containers not recreated: sidecar: Failed stop failed"
        )
    );

    // Both recreated: two lines, exit 0.
    next_second().await;
    let namespace = ns.name.clone();
    let waiting = tokio::spawn(async move {
        kubectl_kruise(
            &namespace,
            &["restart", "container", "web-0", "--timeout=1m"],
        )
        .await
    });
    let newest = wait_for("the second restart's request", MINUTE, || async {
        let mut all = crrs(&ns).await;
        all.retain(|c| c.spec.containers.len() == 2);
        all.sort_by_key(|c| c.name_any());
        match all.as_slice() {
            [_, _, newest] => Ok(newest.name_any()),
            other => Err(format!("{} requests for both containers", other.len())),
        }
    })
    .await;
    ns.api::<ContainerRecreateRequest>()
        .patch_status(
            &newest,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Completed", "containerRecreateStates": [
                {"name": "app", "phase": "Succeeded"}, {"name": "sidecar", "phase": "Succeeded"}]}})),
        )
        .await
        .unwrap();
    let out = waiting.await.unwrap().unwrap();
    assert_eq!(
        out,
        format!(
            "containerrecreaterequest.apps.kruise.io/{newest} created\n\
             pod/web-0 container app recreated\n\
             pod/web-0 container sidecar recreated\n"
        )
    );

    // Nobody answers: the wait gives up at --timeout and says which request.
    next_second().await;
    let err = refused(
        &ns,
        &["restart", "container", "web-0", "app", "--timeout=2s"],
    )
    .await;
    let (created, error) = err.split_once('\n').unwrap();
    let name = created_name(created);
    assert_eq!(
        error,
        format!("error: timed out waiting for containerrecreaterequest.apps.kruise.io/{name}")
    );

    // An unknown container, an unknown Pod: refused, nothing created.
    let count = crrs(&ns).await.len();
    assert_eq!(count, 5);
    next_second().await;
    let err = refused(&ns, &["restart", "container", "web-0", "app", "nope"]).await;
    assert_eq!(
        err,
        r#"error: pod "web-0" has no container "nope" (it has: app, sidecar)"#
    );
    let err = refused(&ns, &["restart", "container", "ghost"]).await;
    assert_eq!(
        err,
        r#"Error from server (NotFound): pods "ghost" not found"#
    );
    assert_eq!(crrs(&ns).await.len(), count);

    // The request goes with its Pod (the owner reference; the garbage collector).
    ns.api::<Pod>()
        .delete("web-0", &kube::api::DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    wait_for("the Pod's requests to go with it", 2 * MINUTE, || async {
        match crrs(&ns).await.len() {
            0 => Ok(()),
            n => Err(format!("{n} left")),
        }
    })
    .await;
}

async fn bcj_controller(ns: &TestNamespace) -> RunningController {
    RunningController::start(
        broadcastjob_ctl::IDENTITY,
        &ns.name,
        "",
        broadcastjob_ctl::run,
    )
    .await
}

/// Waits until the job has one Pod on each of `nodes` (more nodes may come and go with
/// other tests; those that were there before and after must have one).
async fn pods_on(ns: &TestNamespace, job: &str, nodes: &BTreeSet<String>) -> BTreeSet<String> {
    wait_for(
        &format!("{job}'s Pods on the kwok nodes"),
        MINUTE,
        || async {
            let pods = ns
                .api::<Pod>()
                .list(&ListParams::default().labels(&format!("broadcastjob-name={job}")))
                .await
                .map_err(|e| e.to_string())?
                .items;
            let on: Vec<String> = pods
                .iter()
                .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
                .collect();
            let distinct: BTreeSet<String> = on.iter().cloned().collect();
            let still = eligible_kwok_nodes(&ns.client).await;
            let expected: BTreeSet<&String> = nodes.intersection(&still).collect();
            if distinct.len() == on.len() && expected.iter().all(|n| distinct.contains(*n)) {
                Ok(distinct)
            } else {
                Err(format!("on {on:?}, expected {expected:?}"))
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_kruise_create_broadcast_job_from_an_image_and_from_an_advanced_cron_job() {
    let ns = TestNamespace::new("cli-bcj").await;
    let _ctl = bcj_controller(&ns).await;
    let nodes = eligible_kwok_nodes(&ns.client).await;
    assert!(!nodes.is_empty(), "no eligible kwok node");

    // --dry-run=client: printed, not created.
    let out = run(
        &ns,
        &[
            "create",
            "broadcastJob",
            "dry",
            "--image=busybox",
            "--dry-run=client",
            "-o",
            "json",
        ],
    )
    .await;
    let printed: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(printed["kind"], "BroadcastJob");
    assert_eq!(
        printed["spec"]["template"]["spec"]["containers"][0]["image"],
        "busybox"
    );
    assert!(
        ns.api::<BroadcastJob>()
            .get_opt("dry")
            .await
            .unwrap()
            .is_none()
    );

    // --image -- COMMAND: one container named after the job, restartPolicy Never.
    let out = run(
        &ns,
        &[
            "create",
            "broadcastJob",
            "date-everywhere",
            "--image=busybox",
            "--",
            "date",
            "-u",
        ],
    )
    .await;
    assert_eq!(out, "broadcastjob.apps.kruise.io/date-everywhere created\n");
    let job: BroadcastJob = ns.api().get("date-everywhere").await.unwrap();
    let template = serde_json::to_value(&job.spec.template.spec).unwrap();
    // The API server's defaults (imagePullPolicy, …) come on top.
    let containers = template["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0]["name"], "date-everywhere");
    assert_eq!(containers[0]["image"], "busybox");
    assert_eq!(containers[0]["command"], json!(["date", "-u"]));
    assert_eq!(template["restartPolicy"], "Never");
    pods_on(&ns, "date-everywhere", &nodes).await;

    // --from: the AdvancedCronJob's BroadcastJob template, owned by it, marked manual.
    ns.apply(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: AdvancedCronJob
metadata:
  name: nightly
spec:
  schedule: "0 3 * * *"
  template:
    broadcastJobTemplate:
      metadata:
        labels: {team: cli}
        annotations: {purpose: cleanup}
      spec:
        template:
          spec:
            restartPolicy: Never
            nodeSelector: {type: kwok}
            containers:
            - name: clean
              image: busybox
              command: ["sh", "-c", "true"]
"#,
    )
    .await
    .expect("apply the AdvancedCronJob");
    let acj_uid = ns
        .api::<kruise_api::apps_v1alpha1::AdvancedCronJob>()
        .get("nightly")
        .await
        .unwrap()
        .uid()
        .unwrap();
    let out = run(
        &ns,
        &[
            "create",
            "bcj",
            "nightly-now",
            "--from=advancedcronjob/nightly",
            "-o",
            "name",
        ],
    )
    .await;
    assert_eq!(out, "broadcastjob.apps.kruise.io/nightly-now\n");
    let job: BroadcastJob = ns.api().get("nightly-now").await.unwrap();
    assert_eq!(
        job.annotations()
            .get("cronjob.kubernetes.io/instantiate")
            .map(String::as_str),
        Some("manual")
    );
    assert_eq!(
        job.annotations().get("purpose").map(String::as_str),
        Some("cleanup")
    );
    assert_eq!(job.labels().get("team").map(String::as_str), Some("cli"));
    let owner = &job.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("AdvancedCronJob", "nightly", acj_uid.as_str())
    );
    let template = serde_json::to_value(&job.spec.template.spec).unwrap();
    assert_eq!(template["containers"][0]["name"], "clean");
    assert_eq!(template["nodeSelector"], json!({"type": "kwok"}));
    pods_on(&ns, "nightly-now", &nodes).await;

    // Errors: a Job template, not an AdvancedCronJob, neither flag.
    ns.apply(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: AdvancedCronJob
metadata:
  name: jobs
spec:
  schedule: "0 3 * * *"
  template:
    jobTemplate:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: main
              image: busybox
"#,
    )
    .await
    .expect("apply the Job AdvancedCronJob");
    let err = refused(&ns, &["create", "broadcastJob", "x", "--from=acj/jobs"]).await;
    assert_eq!(
        err,
        "error: advancedcronjob \"jobs\" has a Job template, not a BroadcastJob template \
         (create job --from=advancedcronjob/jobs runs it)"
    );
    let err = refused(&ns, &["create", "broadcastJob", "x", "--from=cloneset/web"]).await;
    assert!(
        err.ends_with("--from must be an advancedcronjob, not clonesets.apps.kruise.io"),
        "{err}"
    );
    let err = refused(&ns, &["create", "broadcastJob", "x"]).await;
    assert!(
        err.starts_with("usage: ") && err.contains("--image"),
        "{err}"
    );
    assert!(
        ns.api::<BroadcastJob>()
            .get_opt("x")
            .await
            .unwrap()
            .is_none()
    );
}
