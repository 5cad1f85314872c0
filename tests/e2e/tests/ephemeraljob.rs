//! EphemeralJob on the real cluster (docs/ephemeraljob.md): ephemeraljob-ctl in-process
//! per namespace, its Pods pinned to the shared kwok nodes. kwok gives ephemeral
//! containers their statuses as a kubelet would (stages pod-ephemeral-start and
//! pod-ephemeral-finish in tests/cluster/kwok-stages.yaml: `sleep N` runs N seconds and
//! exits 0).

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::{
    EPHEMERAL_CONTAINER_ENV_KEY, EPHEMERAL_JOB_FINALIZER, EphemeralJob, EphemeralJobPhase,
};
use kruise_e2e::{RunningController, TestNamespace, wait_for};
use kube::ResourceExt;
use kube::api::PostParams;
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);
const NODES: [&str; 2] = ["kwok-node-0", "kwok-node-1"];

/// ephemeraljob-ctl scoped to `ns`, its validation in effect.
async fn controller(ns: &TestNamespace) -> RunningController {
    if std::env::var_os("RUST_LOG").is_some() {
        kruise_runtime::telemetry::init(kruise_runtime::settings::LogFormat::Text);
    }
    let ctl = RunningController::start(
        ephemeraljob_ctl::IDENTITY,
        &ns.name,
        "",
        ephemeraljob_ctl::run,
    )
    .await;
    // Only the webhook refuses a container without imagePullPolicy (the CRD is schemaless).
    let mut probe = job("probe", 1, 1, &["sleep", "1"]);
    probe.spec.template.ephemeral_containers[0].image_pull_policy = None;
    let api = ns.api::<EphemeralJob>();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for("the EphemeralJob webhook to be called", MINUTE, || async {
        match api.create(&dry_run, &probe).await {
            Err(e) if e.to_string().contains("imagePullPolicy: Required value") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    ctl
}

fn pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"run": "nginx"}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "nginx", "image": "nginx:alpine"}]
        }
    }))
    .unwrap()
}

/// A job selecting `run=nginx` with one container `debugger` running `command`.
fn job(name: &str, replicas: i32, parallelism: i32, command: &[&str]) -> EphemeralJob {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "EphemeralJob",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"run": "nginx"}},
            "replicas": replicas,
            "parallelism": parallelism,
            "template": {"ephemeralContainers": [{
                "targetContainerName": "nginx",
                "name": "debugger",
                "image": "busybox:1.32",
                "command": command,
                "imagePullPolicy": "IfNotPresent",
                "terminationMessagePolicy": "File"
            }]}
        }
    }))
    .unwrap()
}

async fn running_pods(ns: &TestNamespace, names: &[&str]) {
    let pods = ns.api::<Pod>();
    for (i, name) in names.iter().enumerate() {
        pods.create(&PostParams::default(), &pod(name, NODES[i % NODES.len()]))
            .await
            .unwrap();
    }
    wait_for("the Pods to run", MINUTE, || async {
        for name in names {
            let p = pods.get(name).await.map_err(|e| e.to_string())?;
            let phase = p.status.and_then(|s| s.phase).unwrap_or_default();
            if phase != "Running" {
                return Err(format!("{name}: {phase}"));
            }
        }
        Ok(())
    })
    .await;
}

/// The Pods carrying the job's container (`KRUISE_EJOB_ID` = its uid).
async fn injected(ns: &TestNamespace, uid: &str) -> Vec<String> {
    let pods = ns.api::<Pod>().list(&Default::default()).await.unwrap();
    pods.items
        .into_iter()
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.ephemeral_containers.as_ref())
                .into_iter()
                .flatten()
                .any(|c| {
                    c.name == "debugger"
                        && c.env.iter().flatten().any(|e| {
                            e.name == EPHEMERAL_CONTAINER_ENV_KEY && e.value.as_deref() == Some(uid)
                        })
                })
        })
        .map(|p| p.name_any())
        .collect()
}

#[tokio::test]
async fn ephemeral_containers_run_on_matched_pods_then_the_job_succeeds_and_expires() {
    let ns = TestNamespace::new("e2e-ejob").await;
    let _ctl = controller(&ns).await;
    running_pods(&ns, &["web-0", "web-1", "web-2"]).await;
    // A Pod the selector does not match is left alone.
    let mut other = pod("db-0", NODES[0]);
    other.metadata.labels = Some([("run".to_string(), "db".to_string())].into());
    ns.api::<Pod>()
        .create(&PostParams::default(), &other)
        .await
        .unwrap();

    let api = ns.api::<EphemeralJob>();
    let mut j = job("ejob", 2, 1, &["sleep", "2"]);
    j.spec.ttl_seconds_after_finished = Some(5);
    let created = api.create(&PostParams::default(), &j).await.unwrap();
    let uid = created.uid().unwrap();

    // The finalizer, then the two oldest Pods one at a time (parallelism 1).
    let done = wait_for("the job to succeed", 2 * MINUTE, || async {
        let job = api.get("ejob").await.map_err(|e| e.to_string())?;
        let s = job.status.clone().unwrap_or_default();
        if s.running > 1 {
            return Ok(Err(format!("parallelism 1 exceeded: {s:?}")));
        }
        if s.phase == Some(EphemeralJobPhase::Succeeded) {
            Ok(Ok(job))
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await
    .unwrap();
    let s = done.status.clone().unwrap();
    assert_eq!(
        (s.matches, s.succeeded, s.failed, s.running, s.waiting),
        (2, 2, 0, 0, 0)
    );
    assert!(s.completion_time.is_some() && s.start_time.is_some());
    assert!(
        s.conditions
            .iter()
            .any(|c| c.type_ == "JobSucceeded" && c.status == "True"),
        "{:?}",
        s.conditions
    );
    assert!(
        done.finalizers()
            .iter()
            .any(|f| f == EPHEMERAL_JOB_FINALIZER)
    );
    let mut with = injected(&ns, &uid).await;
    with.sort();
    assert_eq!(with, ["web-0", "web-1"]);
    // The Pods' own containers were not touched; the ephemeral ones exited 0.
    let p = ns.api::<Pod>().get("web-0").await.unwrap();
    let st = p.status.unwrap();
    let eph = st.ephemeral_container_statuses.unwrap();
    assert_eq!(eph[0].name, "debugger");
    assert_eq!(
        eph[0]
            .state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        0
    );

    // ttlSecondsAfterFinished 5: the job goes (its finalizer removed by the controller).
    wait_for("the job to be deleted after its TTL", MINUTE, || async {
        match api.get_opt("ejob").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(j) => Err(format!("still there: {:?}", j.status)),
        }
    })
    .await;
}

#[tokio::test]
async fn a_second_job_with_the_same_container_name_matches_nothing() {
    let ns = TestNamespace::new("e2e-ejob-dup").await;
    let _ctl = controller(&ns).await;
    running_pods(&ns, &["web-0"]).await;
    let api = ns.api::<EphemeralJob>();
    api.create(
        &PostParams::default(),
        &job("first", 1, 1, &["sleep", "3000"]),
    )
    .await
    .unwrap();
    wait_for("the first job to run", MINUTE, || async {
        let s = api.get("first").await.map_err(|e| e.to_string())?.status;
        match &s {
            Some(s) if s.running == 1 && s.phase == Some(EphemeralJobPhase::Running) => Ok(()),
            _ => Err(format!("{s:?}")),
        }
    })
    .await;
    api.create(
        &PostParams::default(),
        &job("second", 1, 1, &["sleep", "3000"]),
    )
    .await
    .unwrap();
    let s = wait_for("the second job to match nothing", MINUTE, || async {
        let s = api.get("second").await.map_err(|e| e.to_string())?.status;
        match s {
            Some(s) if s.phase == Some(EphemeralJobPhase::Waiting) => Ok(s),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!(s.matches, 0);
    assert!(s.conditions.iter().any(|c| c.type_ == "MatchedEmpty"));
    delete_jobs(&ns).await;
}

/// Deletes the namespace's jobs while the controller runs, which removes their finalizer
/// (else the namespace would stay Terminating once the test's controller is gone).
async fn delete_jobs(ns: &TestNamespace) {
    let api = ns.api::<EphemeralJob>();
    api.delete_collection(&Default::default(), &Default::default())
        .await
        .unwrap();
    wait_for("the jobs to be deleted", MINUTE, || async {
        let left = api
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        if left.items.is_empty() {
            Ok(())
        } else {
            Err(format!("{} left", left.items.len()))
        }
    })
    .await;
}

#[tokio::test]
async fn invalid_ephemeral_containers_are_refused_naming_the_field() {
    let ns = TestNamespace::new("e2e-ejob-invalid").await;
    let _ctl = controller(&ns).await;
    let api = ns.api::<EphemeralJob>();
    let mut bad = job("bad", 1, 1, &["sleep", "1"]);
    let c = &mut bad.spec.template.ephemeral_containers[0];
    c.termination_message_policy = None;
    c.ports = Some(vec![k8s_openapi::api::core::v1::ContainerPort {
        container_port: 80,
        ..Default::default()
    }]);
    let err = api
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("refused");
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 400, "{status:?}");
    assert!(
        status.message.contains(
            "ephemeralContainers[0].terminationMessagePolicy: Required value, \
             ephemeralContainers[0].ports: Forbidden: cannot be set for an Ephemeral Container"
        ),
        "{}",
        status.message
    );
    assert!(api.get_opt("bad").await.unwrap().is_none());
}
