//! BroadcastJob on the real cluster: the scenarios of docs/broadcastjob.md (the
//! examples/broadcastjob-*.yaml jobs) and some subtle cases, on the shared kwok nodes. Pods finish as the kwok stages script them
//! (annotations `e2e.kruise.io/run-for` and `e2e.kruise.io/exit-code`, see
//! tests/cluster/kwok-stages.yaml). Other tests add nodes of their own, each tainted
//! `e2e.kruise.io/owner=<namespace>:NoSchedule`; jobs here select `type=kwok` and count
//! only the nodes they may run on.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::apps_v1alpha1::{BroadcastJob, BroadcastJobPhase, JobConditionType};
use kruise_e2e::{RunningController, TestNamespace, kubectl_async, wait_for};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};

const MINUTE: Duration = Duration::from_secs(60);

async fn controller(ns: &TestNamespace) -> RunningController {
    // RUST_LOG=broadcastjob_ctl=debug,kruise_workload=debug shows what it decided.
    if std::env::var_os("RUST_LOG").is_some() {
        kruise_runtime::telemetry::init(kruise_runtime::settings::LogFormat::Text);
    }
    let ctl = RunningController::start(
        broadcastjob_ctl::IDENTITY,
        &ns.name,
        "",
        broadcastjob_ctl::run,
    )
    .await;
    let probe: BroadcastJob =
        serde_saphyr::from_str(&bcj_yaml("probe", &Extra::default())).expect("probe BroadcastJob");
    kruise_e2e::wait_webhook_effective(&ns.api(), &probe, |j: &BroadcastJob| {
        j.spec.parallelism.is_some() && j.spec.failure_policy.type_.is_some()
    })
    .await;
    ctl
}

/// What a manifest adds to examples/broadcastjob-bcj-demo.yaml's, each at its own indentation level.
#[derive(Default)]
pub struct Extra<'a> {
    /// Under `spec:`.
    pub spec: &'a str,
    /// Under the Pod template's `metadata.annotations:` (the kwok script).
    pub script: &'a str,
    /// Under the Pod template's `spec:`.
    pub pod: &'a str,
    /// `Never` or `OnFailure`.
    pub restart: &'a str,
}

fn indent(text: &str, by: usize) -> String {
    let pad = " ".repeat(by);
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("{pad}{l}\n"))
        .collect()
}

/// `bcj-demo` of examples/broadcastjob-bcj-demo.yaml (restartPolicy Never, container `counter`), on the `type=kwok` nodes.
pub fn bcj_yaml(name: &str, extra: &Extra) -> String {
    format!(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: BroadcastJob
metadata:
  name: {name}
spec:
{spec}  template:
    metadata:
      annotations:
        e2e.kruise.io/scenario: {name}
{script}    spec:
      restartPolicy: {restart}
      nodeSelector:
        type: kwok
{pod}      containers:
      - name: counter
        image: busybox
        command: ["/bin/sh", "-c", "for i in 9 8 7 6 5 4 3 2 1; do echo $i; done"]
"#,
        spec = indent(extra.spec, 2),
        script = indent(extra.script, 8),
        pod = indent(extra.pod, 6),
        restart = if extra.restart.is_empty() {
            "Never"
        } else {
            extra.restart
        },
    )
}

/// The `type=kwok` nodes a Pod without tolerations may run on (other tests' tainted
/// nodes excluded), by name.
pub async fn eligible_kwok_nodes(client: &kube::Client) -> BTreeSet<String> {
    let api: Api<Node> = Api::all(client.clone());
    api.list(&kube::api::ListParams::default().labels("type=kwok"))
        .await
        .expect("list nodes")
        .items
        .into_iter()
        .filter(|n| {
            let spec = n.spec.clone().unwrap_or_default();
            !spec.unschedulable.unwrap_or(false)
                && spec
                    .taints
                    .iter()
                    .flatten()
                    .all(|t| !matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
                && n.metadata.deletion_timestamp.is_none()
        })
        .map(|n| n.name_any())
        .collect()
}

/// Waits until the job's status satisfies `check`.
async fn wait_job(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    check: impl Fn(&BroadcastJob) -> bool,
) -> BroadcastJob {
    let api: Api<BroadcastJob> = ns.api();
    wait_for(what, MINUTE, || async {
        let job = api.get(name).await.map_err(|e| e.to_string())?;
        if check(&job) {
            Ok(job)
        } else {
            Err(format!("{:?}", job.status))
        }
    })
    .await
}

fn phase(job: &BroadcastJob) -> Option<BroadcastJobPhase> {
    job.status.as_ref().and_then(|s| s.phase)
}

fn counts(job: &BroadcastJob) -> (i32, i32, i32, i32) {
    let s = job.status.clone().unwrap_or_default();
    (s.desired, s.active, s.succeeded, s.failed)
}

/// The job's Pods (terminating ones included when `all`).
async fn job_pods(ns: &TestNamespace, name: &str, all: bool) -> Vec<Pod> {
    let api: Api<Pod> = ns.api();
    let mut pods = api
        .list(&kube::api::ListParams::default().labels(&format!("broadcastjob-name={name}")))
        .await
        .expect("list pods")
        .items;
    if !all {
        pods.retain(|p| p.metadata.deletion_timestamp.is_none());
    }
    pods
}

fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn broadcastjob_bcj_demo_runs_one_pod_per_node_and_completes() {
    let ns = TestNamespace::new("bcj-demo").await;
    let _ctl = controller(&ns).await;
    let nodes = eligible_kwok_nodes(&ns.client).await;
    let n = i32::try_from(nodes.len()).unwrap();
    assert!(n >= 1, "no eligible kwok node");
    ns.apply(&bcj_yaml("bcj-demo", &Extra::default()))
        .await
        .expect("apply bcj-demo");
    let job = wait_job(&ns, "bcj-demo", "bcj-demo to complete", |j| {
        phase(j) == Some(BroadcastJobPhase::Completed)
    })
    .await;
    assert_eq!(counts(&job), (n, 0, n, 0));
    let status = job.status.clone().unwrap();
    let complete = status.true_condition(JobConditionType::Complete).unwrap();
    assert_eq!(complete.reason, "Complete");
    assert_eq!(
        complete.message,
        format!("Job completed, {n} pods succeeded, 0 pods failed")
    );
    assert!(status.start_time.is_some() && status.completion_time.is_some());

    // One Pod per node, named from the job, bound by node affinity, Completed.
    let pods = job_pods(&ns, "bcj-demo", false).await;
    assert_eq!(pods.len(), nodes.len());
    let on: BTreeSet<String> = pods.iter().map(node_of).collect();
    assert_eq!(on, nodes);
    for p in &pods {
        assert!(p.name_any().starts_with("bcj-demo-"), "{}", p.name_any());
        assert_eq!(p.name_any().len(), "bcj-demo-".len() + 5);
        assert_eq!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded")
        );
        assert_eq!(
            p.labels().get("broadcastjob-controller-uid"),
            job.uid().as_ref()
        );
        let terms = p
            .spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|r| r.node_selector_terms.clone())
            .unwrap_or_default();
        assert_eq!(
            terms[0].match_fields.as_ref().unwrap()[0].values,
            Some(vec![node_of(p)])
        );
    }

    // `kubectl get bcj` prints upstream's printer columns.
    let (ok, out, err) = kubectl_async(
        vec![
            "get".into(),
            "bcj".into(),
            "bcj-demo".into(),
            "-n".into(),
            ns.name.clone(),
        ],
        None,
    )
    .await;
    assert!(ok, "{err}");
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "DESIRED", "ACTIVE", "SUCCEEDED", "FAILED", "AGE"]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        row[..5],
        ["bcj-demo", &n.to_string(), "0", &n.to_string(), "0"]
    );

    // Events as upstream.
    let events = kruise_e2e::events_about(&ns.client, "bcj-demo").await;
    assert!(
        events
            .iter()
            .filter(
                |e| e.reason == "SuccessfulCreate" && e.note.starts_with("Created pod: bcj-demo-")
            )
            .count()
            >= nodes.len(),
        "{events:?}"
    );
    wait_for("the JobComplete event", MINUTE, || async {
        let events = kruise_e2e::events_about(&ns.client, "bcj-demo").await;
        events
            .iter()
            .find(|e| {
                e.reason == "JobComplete"
                    && e.note
                        == format!(
                            "Job {}/bcj-demo is completed, {n} pods succeeded, 0 pods failed",
                            ns.name
                        )
                    && e.reporting_controller == "broadcastjob-controller"
            })
            .map(|_| ())
            .ok_or_else(|| format!("{events:?}"))
    })
    .await;

    // Admission: restartPolicy Always is refused.
    let refused = ns
        .apply(&bcj_yaml(
            "bad",
            &Extra {
                restart: "Always",
                ..Default::default()
            },
        ))
        .await
        .expect_err("restartPolicy Always is refused");
    assert!(
        refused.contains("pod restartPolicy can only be Never or OnFailure"),
        "{refused}"
    );
}

#[tokio::test]
async fn broadcastjob_active_deadline_fails_and_deletes_running_pods() {
    let ns = TestNamespace::new("bcj-deadline").await;
    let _ctl = controller(&ns).await;
    let n = i32::try_from(eligible_kwok_nodes(&ns.client).await.len()).unwrap();
    // Long enough for every Pod to be seen Running first on a loaded machine.
    let extra = Extra {
        spec: "completionPolicy:\n  type: Always\n  activeDeadlineSeconds: 15",
        script: "e2e.kruise.io/run-for: 1h",
        ..Default::default()
    };
    ns.apply(&bcj_yaml("bcj-deadline", &extra))
        .await
        .expect("apply");
    wait_job(&ns, "bcj-deadline", "all Pods running", |j| {
        counts(j).1 == n && phase(j) == Some(BroadcastJobPhase::Running)
    })
    .await;
    let job = wait_job(&ns, "bcj-deadline", "the deadline to fail the job", |j| {
        phase(j) == Some(BroadcastJobPhase::Failed)
    })
    .await;
    assert_eq!(counts(&job), (n, 0, 0, n));
    let failed = job
        .status
        .as_ref()
        .and_then(|s| s.true_condition(JobConditionType::Failed))
        .cloned()
        .unwrap();
    assert_eq!(failed.reason, "Failed");
    assert_eq!(
        failed.message,
        format!(
            "Job {}/bcj-deadline was active longer than specified deadline",
            ns.name
        )
    );
    // The running Pods were deleted.
    wait_for("the running Pods to go", MINUTE, || async {
        let left = job_pods(&ns, "bcj-deadline", true).await;
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("{} left", left.len()))
        }
    })
    .await;
    let events = kruise_e2e::events_about(&ns.client, "bcj-deadline").await;
    assert!(
        events.iter().any(|e| e.type_ == "Warning"
            && e.reason == "DeadlineExceeded"
            && e.note
                .ends_with(&format!(": 0 pods succeeded, {n} pods failed"))),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.reason == "SuccessfulDelete"
                && e.note.starts_with("Delete pod: bcj-deadline-")),
        "{events:?}"
    );
}

#[tokio::test]
async fn broadcastjob_ttl_deletes_the_finished_job() {
    let ns = TestNamespace::new("bcj-ttl").await;
    let _ctl = controller(&ns).await;
    let extra = Extra {
        spec: "completionPolicy:\n  type: Always\n  ttlSecondsAfterFinished: 3",
        ..Default::default()
    };
    ns.apply(&bcj_yaml("bcj-ttl", &extra)).await.expect("apply");
    let job = wait_job(&ns, "bcj-ttl", "the job to complete", |j| {
        phase(j) == Some(BroadcastJobPhase::Completed)
    })
    .await;
    let completed = job.status.unwrap().completion_time.unwrap().0;
    let api: Api<BroadcastJob> = ns.api();
    wait_for("the TTL to delete the job", MINUTE, || async {
        match api.get_opt("bcj-ttl").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(j) if j.metadata.deletion_timestamp.is_some() => Ok(()),
            Some(_) => Err("still there".to_string()),
        }
    })
    .await;
    let gone = jiff::Timestamp::now();
    assert!(
        gone.duration_since(completed) >= jiff::SignedDuration::from_secs(3),
        "deleted {gone} before completion {completed} + 3 s"
    );
}

/// A kwok node of this test only: labelled `type=kwok`, tainted for this namespace.
/// Deleted when the returned guard drops, however the test ends.
async fn add_own_node(ns: &TestNamespace, name: &str) -> OwnNode {
    let api: Api<Node> = Api::all(ns.client.clone());
    let node: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
        },
        "spec": {"taints": [{"key": "e2e.kruise.io/owner", "value": ns.name, "effect": "NoSchedule"}]},
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        },
    }))
    .expect("node");
    api.create(&PostParams::default(), &node)
        .await
        .expect("create node");
    // The TaintNodesByCondition admission plugin marks a new node not-ready; the node
    // lifecycle controller that would lift it is off here (as cluster.sh does for the
    // shared nodes): keep only this test's taint.
    let taints = node.spec.and_then(|s| s.taints);
    api.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"spec": {"taints": taints}})),
    )
    .await
    .expect("lift the not-ready taint");
    OwnNode(name.to_string())
}

/// A node [`add_own_node`] made.
struct OwnNode(String);

impl Drop for OwnNode {
    fn drop(&mut self) {
        let _ = kruise_e2e::kubectl(&["delete", "node", &self.0, "--wait=false"], None);
    }
}

#[tokio::test]
async fn broadcastjob_never_keeps_running_and_a_new_node_gets_a_pod() {
    let ns = TestNamespace::new("bcj-never").await;
    let _ctl = controller(&ns).await;
    let nodes = eligible_kwok_nodes(&ns.client).await;
    let n = i32::try_from(nodes.len()).unwrap();
    let toleration = format!(
        "tolerations:\n- key: e2e.kruise.io/owner\n  operator: Equal\n  value: {}\n  effect: NoSchedule",
        ns.name
    );
    let extra = Extra {
        spec: "completionPolicy:\n  type: Never",
        pod: &toleration,
        ..Default::default()
    };
    ns.apply(&bcj_yaml("bcj-never", &extra))
        .await
        .expect("apply");
    wait_job(&ns, "bcj-never", "every Pod to succeed", |j| {
        counts(j) == (n, 0, n, 0)
    })
    .await;
    // All Pods finished, yet it keeps running.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let job: BroadcastJob = ns.api().get("bcj-never").await.unwrap();
    assert_eq!(phase(&job), Some(BroadcastJobPhase::Running));
    assert!(job.status.unwrap().conditions.is_empty());

    // A node added later (this test's own, tolerated) gets a Pod.
    let name = format!("{}-node", ns.name);
    let _own = add_own_node(&ns, &name).await;
    let job = wait_job(&ns, "bcj-never", "the new node's Pod to succeed", |j| {
        counts(j) == (n + 1, 0, n + 1, 0)
    })
    .await;
    assert_eq!(phase(&job), Some(BroadcastJobPhase::Running));
    let pods = job_pods(&ns, "bcj-never", false).await;
    assert!(pods.iter().any(|p| node_of(p) == name), "no Pod on {name}");
}

#[tokio::test]
async fn broadcastjob_fail_fast_stops_at_the_first_failure() {
    let ns = TestNamespace::new("bcj-failfast").await;
    let _ctl = controller(&ns).await;
    let n = i32::try_from(eligible_kwok_nodes(&ns.client).await.len()).unwrap();
    // One Pod at a time, each failing: the first failure fails the job.
    let extra = Extra {
        spec: "parallelism: 1",
        script: "e2e.kruise.io/run-for: 1s\ne2e.kruise.io/exit-code: \"3\"",
        ..Default::default()
    };
    ns.apply(&bcj_yaml("bcj-failfast", &extra))
        .await
        .expect("apply");
    let job = wait_job(
        &ns,
        "bcj-failfast",
        "the first failure to fail the job",
        |j| phase(j) == Some(BroadcastJobPhase::Failed),
    )
    .await;
    assert_eq!(counts(&job), (n, 0, 0, 1));
    let cond = job
        .status
        .as_ref()
        .and_then(|s| s.true_condition(JobConditionType::Failed))
        .cloned()
        .unwrap();
    assert_eq!(
        cond.message,
        "failure policy is FailurePolicyTypeFailFast and failed pod is found"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        job_pods(&ns, "bcj-failfast", true).await.len(),
        1,
        "no Pod after the failure"
    );
    let events = kruise_e2e::events_about(&ns.client, "bcj-failfast").await;
    assert!(
        events
            .iter()
            .any(|e| e.type_ == "Warning" && e.reason == "failed pod is found"),
        "{events:?}"
    );
}

#[tokio::test]
async fn broadcastjob_restart_limit_counts_crash_looping_pods_as_failed() {
    let ns = TestNamespace::new("bcj-restart").await;
    let _ctl = controller(&ns).await;
    let n = i32::try_from(eligible_kwok_nodes(&ns.client).await.len()).unwrap();
    // Containers exit 1 every second and restart (OnFailure); past 2 restarts the Pod
    // counts as failed although it is Running. Continue: the job still completes.
    let extra = Extra {
        spec: "failurePolicy:\n  type: Continue\n  restartLimit: 2",
        script: "e2e.kruise.io/run-for: 1s\ne2e.kruise.io/exit-code: \"1\"",
        restart: "OnFailure",
        ..Default::default()
    };
    ns.apply(&bcj_yaml("bcj-restart", &extra))
        .await
        .expect("apply");
    let job = wait_job(
        &ns,
        "bcj-restart",
        "the crash-looping Pods to count as failed",
        |j| phase(j) == Some(BroadcastJobPhase::Completed),
    )
    .await;
    assert_eq!(counts(&job), (n, 0, 0, n));
    let pods = job_pods(&ns, "bcj-restart", false).await;
    assert!(
        pods.iter()
            .all(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
    );
    // Stop the crash loops with the namespace's Pods.
    let _ = Api::<Pod>::namespaced(ns.client.clone(), &ns.name)
        .delete_collection(&DeleteParams::default(), &Default::default())
        .await;
}
