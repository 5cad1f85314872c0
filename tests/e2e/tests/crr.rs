//! ContainerRecreateRequest: `crr-ctl` (admission, manager) and the node agent's request
//! loop (`daemon_agent::crr`), each run in the test process scoped to the test's namespace.
//!
//! - on the kwok nodes (no runtime): every admission rule of the spec with its message, the
//!   stamping (labels, defaults, status context), the immutability on update, the
//!   `KruiseDaemon` gate, the node agent's status writes limited to its own node's
//!   requests (own-crr-policy.yaml, with a token bound to an agent Pod), and the manager finishing a request past its deadline, one whose
//!   Pod has gone (then deleting it after its TTL) and one no agent answered for a minute;
//! - on the real node `real-0` (module `realnode`, opt-in like realnode.rs): the
//!   request of examples/containerrecreaterequest.yaml recreates one container of a two-container Pod (preStop exec ran, the Pod
//!   NotReady before the stop, the other container, the Pod's UID and IP untouched,
//!   restartCount 1, the `Killing` event, TTL deletion); orderedRecreate and failurePolicy
//!   on two containers; two requests for one Pod run one after the other.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::{ContainerRecreateRequest, ContainerRecreateRequestPhase};
use kruise_api::keys;
use kruise_e2e::{RunningController, TestNamespace, wait_for};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);

/// Starts crr-ctl for the namespace with `gates`, and waits until the apiserver calls its
/// mutating webhook (a dry-run request for a missing Pod is refused with our message; with
/// the gate off, with the gate's).
pub async fn start_manager(ns: &TestNamespace, gates: &str) -> RunningController {
    let ctl = RunningController::start(crr_ctl::IDENTITY, &ns.name, gates, crr_ctl::run).await;
    let api: Api<ContainerRecreateRequest> = ns.api();
    let probe: ContainerRecreateRequest = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ContainerRecreateRequest",
        "metadata": {"name": "probe"},
        "spec": {"podName": "no-such-pod", "containers": [{"name": "app"}]}
    }))
    .unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for("the apiserver to call the webhook", MINUTE, || async {
        match api.create(&dry_run, &probe).await {
            Err(e)
                if e.to_string().contains("no found Pod named")
                    || e.to_string().contains("is not enabled") =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    ctl
}

fn crr_yaml(name: &str, pod: &str, containers: &[&str], extra: &str) -> String {
    let containers: Vec<String> = containers
        .iter()
        .map(|c| format!("  - name: {c}"))
        .collect();
    format!(
        "apiVersion: apps.kruise.io/v1alpha1\nkind: ContainerRecreateRequest\nmetadata:\n  name: {name}\nspec:\n  podName: {pod}\n  containers:\n{}\n{extra}\n",
        containers.join("\n")
    )
}

async fn get_crr(ns: &TestNamespace, name: &str) -> ContainerRecreateRequest {
    ns.api::<ContainerRecreateRequest>()
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("get crr {name}: {e}"))
}

/// Waits until the request is Completed.
async fn wait_completed(
    ns: &TestNamespace,
    name: &str,
    timeout: Duration,
) -> ContainerRecreateRequest {
    wait_for(&format!("{name} Completed"), timeout, || async {
        let crr = get_crr(ns, name).await;
        if crr.status.as_ref().is_some_and(|s| s.is_completed()) {
            Ok(crr)
        } else {
            Err(format!("{:?}", crr.status))
        }
    })
    .await
}

async fn wait_deleted(ns: &TestNamespace, name: &str, timeout: Duration) {
    wait_for(&format!("{name} deleted"), timeout, || async {
        match ns.api::<ContainerRecreateRequest>().get_opt(name).await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|c| c.map(|c| c.status)))),
        }
    })
    .await;
}

/// A Pod on a shared kwok node (`node`, or the scheduler's pick), Running, with
/// `containers` (kwok gives them no containerID: the test writes one into the status, as
/// a runtime would).
pub async fn kwok_pod(
    ns: &TestNamespace,
    name: &str,
    containers: &[&str],
    with_ids: bool,
    node: Option<&str>,
) -> Pod {
    let list: Vec<serde_json::Value> = containers
        .iter()
        .map(|c| {
            json!({"name": c, "image": "busybox:1",
                   "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", "echo bye"]}}}})
        })
        .collect();
    let placement = match node {
        Some(node) => json!({"nodeName": node}),
        None => json!({"nodeSelector": {"type": "kwok"}}),
    };
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"tolerations": [{"operator": "Exists"}],
                 "terminationGracePeriodSeconds": 7, "containers": list}
    });
    pod["spec"]
        .as_object_mut()
        .unwrap()
        .extend(placement.as_object().unwrap().clone());
    let pod: Pod = serde_json::from_value(pod).unwrap();
    let pods: Api<Pod> = ns.api();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let running = wait_for(&format!("{name} Running"), MINUTE, || async {
        let p = pods.get(name).await.map_err(|e| e.to_string())?;
        let statuses = p
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.clone())
            .unwrap_or_default();
        if statuses.len() == containers.len() {
            Ok(p)
        } else {
            Err(format!("{:?}", p.status))
        }
    })
    .await;
    if !with_ids {
        return running;
    }
    // The whole list (container statuses have no merge key), each with an ID.
    let mut statuses = running
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    for s in &mut statuses {
        s.container_id = Some(format!("containerd://{name}-{}", s.name));
    }
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"containerStatuses": statuses}})),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crr_admission_checks_and_stamps_requests() {
    let ns = TestNamespace::new("crr-admission").await;
    let _ctl = start_manager(&ns, "").await;

    // Rules without a Pod, each named by field with the spec's message.
    for (yaml, message) in [
        (crr_yaml("a", "\"\"", &["app"], ""), "podName can not be empty"),
        (
            "apiVersion: apps.kruise.io/v1alpha1\nkind: ContainerRecreateRequest\nmetadata:\n  name: b\nspec:\n  podName: p\n  containers: []\n".to_string(),
            "containers list can not be null",
        ),
        (
            crr_yaml("c", "p", &["app"], "  activeDeadlineSeconds: 2"),
            "spec.activeDeadlineSeconds: Invalid value: 2: activeDeadlineSeconds can not be less than 3s",
        ),
        (
            crr_yaml("d", "p", &["app"], "  strategy:\n    terminationGracePeriodSeconds: -1"),
            "terminationGracePeriodSeconds must be non-negative integer",
        ),
        (
            crr_yaml("e", "p", &["app"], "  strategy:\n    failurePolicy: Retry"),
            "spec.strategy.failurePolicy: Invalid value: unknown failurePolicy Retry",
        ),
        (
            crr_yaml("f", "p", &["app", "app"], ""),
            "can not recreate app multi times",
        ),
        (
            crr_yaml("g", "no-such-pod", &["app"], ""),
            "no found Pod named no-such-pod",
        ),
    ] {
        let err = ns.apply(&yaml).await.unwrap_err();
        assert!(err.contains(message), "{message}: {err}");
    }
    let err = ns
        .apply(
            "apiVersion: apps.kruise.io/v1alpha1\nkind: ContainerRecreateRequest\nmetadata:\n  name: h\nspec:\n  podName: p\n  containers:\n  - name: app\n    statusContext:\n      containerID: containerd://x\n",
        )
        .await
        .unwrap_err();
    assert!(
        err.contains("preStop, ports, statusContext in container are ready-only fields"),
        "{err}"
    );

    // A Pod no scheduler places: pending.
    let pending: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pending"},
        "spec": {"nodeSelector": {"e2e.kruise.io/nowhere": "true"},
                 "containers": [{"name": "app", "image": "busybox:1"}]}
    }))
    .unwrap();
    ns.api::<Pod>()
        .create(&PostParams::default(), &pending)
        .await
        .unwrap();
    let err = ns
        .apply(&crr_yaml("pending", "pending", &["app"], ""))
        .await
        .unwrap_err();
    assert!(
        err.contains("not allowed to recreate containers in a pending Pod"),
        "{err}"
    );

    // A running Pod whose containers have no ID yet, then a container it does not have.
    kwok_pod(&ns, "no-ids", &["app"], false, None).await;
    let err = ns
        .apply(&crr_yaml("no-ids", "no-ids", &["app"], ""))
        .await
        .unwrap_err();
    assert!(
        err.contains("no containerID in app containerStatus"),
        "{err}"
    );
    let err = ns
        .apply(&crr_yaml("nope", "no-ids", &["nope"], ""))
        .await
        .unwrap_err();
    assert!(
        err.contains("spec.containers[0].name") && err.contains("container nope not found in Pod"),
        "{err}"
    );

    // N2, the minimal request: stamped from its Pod.
    let pod = kwok_pod(&ns, "pod-name", &["app", "sidecar"], true, None).await;
    ns.apply(&crr_yaml("xxx", "pod-name", &["app"], ""))
        .await
        .unwrap();
    let crr = get_crr(&ns, "xxx").await;
    let labels = crr.labels();
    assert_eq!(
        labels.get(keys::CRR_NODE_NAME),
        pod.spec.as_ref().unwrap().node_name.as_ref()
    );
    assert_eq!(labels.get(keys::CRR_POD_UID), pod.metadata.uid.as_ref());
    assert_eq!(
        labels.get(keys::CRR_ACTIVE).map(String::as_str),
        Some("true")
    );
    let strategy = crr.spec.strategy_or_default();
    assert_eq!(
        strategy.failure_policy,
        Some(kruise_api::apps_v1alpha1::ContainerRecreateRequestFailurePolicy::Fail)
    );
    assert!(!strategy.ordered_recreate);
    assert_eq!(strategy.termination_grace_period_seconds, Some(7));
    let app = &crr.spec.containers[0];
    let context = app.status_context.as_ref().unwrap();
    assert_eq!(
        (context.container_id.as_str(), context.restart_count),
        ("containerd://pod-name-app", 0)
    );
    assert!(app.pre_stop.as_ref().unwrap().exec.is_some());
    // `kubectl get crr`: the printer columns.
    let (ok, out, err) = kruise_e2e::kubectl_async(
        ["get", "crr", "-n", &ns.name].map(String::from).to_vec(),
        None,
    )
    .await;
    assert!(ok, "{err}");
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "PHASE", "POD", "NODE", "AGE"]);
    assert!(out.contains("pod-name"), "{out}");

    // The spec and the Pod's labels are immutable.
    let err = ns
        .apply(&crr_yaml(
            "xxx",
            "pod-name",
            &["app"],
            "  activeDeadlineSeconds: 60",
        ))
        .await
        .unwrap_err();
    assert!(
        err.contains("spec of ContainerRecreateRequest is immutable"),
        "{err}"
    );
    let relabel = ns
        .api::<ContainerRecreateRequest>()
        .patch(
            "xxx",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {keys::CRR_POD_UID: "forged"}}})),
        )
        .await
        .unwrap_err();
    assert!(
        relabel
            .to_string()
            .contains("not allowed to update immutable label"),
        "{relabel}"
    );
}

/// The node agent's ServiceAccount writes the status of its own node's requests only: its
/// token, bound to its Pod, names the node, and own-crr-policy.yaml (shipped with the
/// DaemonSet) compares it with the node label crr-ctl stamped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crr_agent_writes_only_its_own_nodes_requests() {
    use crate::agentauthz::{AgentPod, apply_agent_identity, other_kwok_node};
    let ns = TestNamespace::new("crr-agent-writes").await;
    apply_agent_identity().await;
    let _ctl = start_manager(&ns, "").await;
    let agent = AgentPod::create(&ns, None).await;
    let other = other_kwok_node(&ns.client, &agent.node).await;
    for (name, node) in [("mine", &agent.node), ("theirs", &other)] {
        kwok_pod(&ns, name, &["app"], true, Some(node.as_str())).await;
        ns.apply(&crr_yaml(name, name, &["app"], "")).await.unwrap();
        let crr = get_crr(&ns, name).await;
        assert_eq!(crr.labels().get(keys::CRR_NODE_NAME), Some(node));
    }
    let write = |client: kube::Client, name: &'static str| {
        let ns = ns.name.clone();
        async move {
            Api::<ContainerRecreateRequest>::namespaced(client, &ns)
                .patch_status(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"message": "written by the agent"}})),
                )
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    };
    let denial = "may only write the status of its own node's ContainerRecreateRequests";
    let bound = agent.client(true).await;
    // The policy takes a moment to be loaded by the apiserver.
    wait_for("the other node's request denied", MINUTE, || async {
        match write(bound.clone(), "theirs").await {
            Err(e) if e.contains(denial) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    write(bound, "mine").await.expect("its own node's request");
    let unbound = agent.client(false).await;
    let err = write(unbound, "mine").await.unwrap_err();
    assert!(err.contains(denial), "{err}");
    agent.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crr_manager_completes_on_deadline_and_pod_gone_then_deletes_after_ttl() {
    let ns = TestNamespace::new("crr-gone").await;
    let _ctl = start_manager(&ns, "").await;
    kwok_pod(&ns, "pod-name", &["app"], true, None).await;
    ns.apply(&crr_yaml(
        "gone",
        "pod-name",
        &["app"],
        "  activeDeadlineSeconds: 300\n  ttlSecondsAfterFinished: 3",
    ))
    .await
    .unwrap();
    // No agent serves the kwok node: the request waits, unanswered.
    let crr = get_crr(&ns, "gone").await;
    assert_eq!(crr.status.and_then(|s| s.phase), None);
    // Another one past its activeDeadlineSeconds: completed; its container states stay
    // what the agent wrote (none here), as OpenKruise's manager leaves them.
    ns.apply(&crr_yaml(
        "deadline",
        "pod-name",
        &["app"],
        "  activeDeadlineSeconds: 3",
    ))
    .await
    .unwrap();
    let expired = wait_completed(&ns, "deadline", MINUTE).await;
    let status = expired.status.unwrap();
    assert_eq!(
        status.message,
        "recreating has exceeded the activeDeadlineSeconds"
    );
    assert!(
        status.container_recreate_states.is_empty(),
        "{:?}",
        status.container_recreate_states
    );
    ns.api::<Pod>()
        .delete(
            "pod-name",
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let done = wait_completed(&ns, "gone", MINUTE).await;
    let status = done.status.unwrap();
    assert_eq!(status.message, "pod has gone");
    assert!(status.completion_time.is_some());
    // The agents stop watching it: the active label is dropped.
    wait_for("the active label dropped", MINUTE, || async {
        let c = get_crr(&ns, "gone").await;
        if c.labels().contains_key(keys::CRR_ACTIVE) {
            Err(format!("{:?}", c.labels()))
        } else {
            Ok(())
        }
    })
    .await;
    // ttlSecondsAfterFinished: 3 (a requeue at the deadline).
    wait_deleted(&ns, "gone", Duration::from_secs(30)).await;
}

/// No agent answers (a kwok node): a minute after creation the manager gives up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crr_unanswered_for_a_minute_is_completed() {
    let ns = TestNamespace::new("crr-silent").await;
    let _ctl = start_manager(&ns, "").await;
    kwok_pod(&ns, "pod-name", &["app"], true, None).await;
    let created = std::time::Instant::now();
    ns.apply(&crr_yaml("silent", "pod-name", &["app"], ""))
        .await
        .unwrap();
    let done = wait_completed(&ns, "silent", 2 * MINUTE).await;
    let took = created.elapsed();
    assert!(
        took >= Duration::from_secs(59),
        "completed after {took:?}, before the minute"
    );
    let status = done.status.unwrap();
    assert_eq!(status.message, "daemon has not responded for a long time");
    assert_eq!(status.phase, Some(ContainerRecreateRequestPhase::Completed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crr_refused_while_the_kruise_daemon_gate_is_off() {
    let ns = TestNamespace::new("crr-gate").await;
    let _ctl = start_manager(&ns, "KruiseDaemon=false").await;
    let err = ns
        .apply(&crr_yaml("xxx", "pod-name", &["app"], ""))
        .await
        .unwrap_err();
    assert!(
        err.contains("feature-gate KruiseDaemon is not enabled"),
        "{err}"
    );
    let api: Api<ContainerRecreateRequest> = ns.api();
    let crr: ContainerRecreateRequest =
        serde_saphyr::from_str(&crr_yaml("xxx", "pod-name", &["app"], "")).unwrap();
    match api.create(&PostParams::default(), &crr).await {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 403, "{e:?}"),
        other => panic!("{other:?}"),
    }
}

/// On the real node. Module path `crr::realnode::…`: run by `make test`'s `realnode::`
/// filter.
mod realnode {
    use super::*;
    use kruise_e2e::{is_ready, kubectl_async, wait_events};

    const NODE: &str = "real-0";

    /// The node's registry and containerd socket, or `None` (after saying why).
    async fn real_node() -> Option<(String, String)> {
        let node = crate::realnode::real_node().await?;
        Some((node.registry, node.containerd_socket))
    }

    /// The manager and an agent for real-0, both scoped to the test's namespace: they act
    /// on no other test's requests (another agent of real-0 may run beside them).
    async fn start(ns: &TestNamespace, socket: &str) -> (RunningController, RunningController) {
        let manager = start_manager(ns, "").await;
        let socket = std::path::PathBuf::from(socket);
        let agent = RunningController::start(daemon_agent::IDENTITY, &ns.name, "", move |rt| {
            daemon_agent::crr::run_standalone(rt, NODE.into(), socket)
        })
        .await;
        (manager, agent)
    }

    /// Two containers sharing a volume; each one's preStop appends a line to
    /// `/shared/prestop` (the test reads it through `kubectl exec`). `sh` as PID 1 with a
    /// TERM trap, so a stop ends it at once.
    fn pod_yaml(name: &str, image: &str, gated: bool) -> String {
        let container = |c: &str| {
            format!(
                r#"  - name: {c}
    image: {image}
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    lifecycle:
      preStop:
        exec:
          command: ["sh", "-c", "echo prestop {c} >> /shared/prestop"]
    volumeMounts:
    - name: shared
      mountPath: /shared"#
            )
        };
        let gates = if gated {
            "  readinessGates:\n  - conditionType: KruisePodReady\n"
        } else {
            ""
        };
        format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  nodeSelector:
    node.kruise.io/real: "true"
  tolerations:
  - key: node.kruise.io/real
    operator: Exists
    effect: NoSchedule
  terminationGracePeriodSeconds: 5
{gates}  volumes:
  - name: shared
    emptyDir: {{}}
  containers:
{}
{}
"#,
            container("app"),
            container("sidecar")
        )
    }

    async fn pod(ns: &TestNamespace, name: &str) -> Pod {
        ns.api::<Pod>().get(name).await.expect("get pod")
    }

    fn status_of(pod: &Pod, container: &str) -> k8s_openapi::api::core::v1::ContainerStatus {
        pod.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.iter().find(|c| c.name == container))
            .cloned()
            .unwrap_or_else(|| panic!("no status of {container}"))
    }

    fn condition(pod: &Pod, type_: &str) -> Option<String> {
        pod.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == type_))
            .map(|c| c.status.clone())
    }

    /// Creates the Pod and waits until both containers run; a gated Pod gets its
    /// `KruisePodReady` condition True (as a Kruise workload controller would) and then
    /// is Ready.
    async fn running_pod(ns: &TestNamespace, name: &str, image: &str, gated: bool) -> Pod {
        ns.apply(&pod_yaml(name, image, gated)).await.unwrap();
        wait_for(
            &format!("{name}'s containers ready"),
            2 * MINUTE,
            || async {
                let p = pod(ns, name).await;
                if condition(&p, "ContainersReady").as_deref() == Some("True") {
                    Ok(())
                } else {
                    Err(format!("{:?}", p.status))
                }
            },
        )
        .await;
        if gated {
            ns.api::<Pod>()
                .patch_status(
                    name,
                    &PatchParams::default(),
                    &Patch::Strategic(json!({"status": {"conditions": [
                        {"type": keys::KRUISE_POD_READY, "status": "True", "message": "[]"},
                        {"type": "Ready", "status": "True"}
                    ]}})),
                )
                .await
                .unwrap();
        }
        wait_for(&format!("{name} Ready"), MINUTE, || async {
            let p = pod(ns, name).await;
            if is_ready(&p) {
                Ok(p)
            } else {
                Err(format!("{:?}", p.status))
            }
        })
        .await
    }

    async fn exec_cat(ns: &TestNamespace, pod: &str, container: &str, path: &str) -> String {
        let (ok, out, err) = kubectl_async(
            [
                "exec", "-n", &ns.name, pod, "-c", container, "--", "cat", path,
            ]
            .map(String::from)
            .to_vec(),
            None,
        )
        .await;
        assert!(ok, "kubectl exec: {err}");
        out
    }

    /// `kubectl kruise create crr --wait`: the request is created with kruise-tools'
    /// defaults and the command returns once the container is running again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 3)]
    async fn real_node_kubectl_kruise_create_crr_waits_for_the_recreation() {
        let Some((registry, socket)) = real_node().await else {
            return;
        };
        let ns = TestNamespace::new("crr-cli").await;
        let (_manager, _agent) = start(&ns, &socket).await;
        let image = format!("{registry}/kruise-rs/busybox:1");
        let before = running_pod(&ns, "cli-pod", &image, false).await;
        let out = kruise_e2e::kubectl_kruise(
            &ns.name,
            &[
                "create",
                "crr",
                "again",
                "--pod=cli-pod",
                "--containers=app",
                "-u",
                "0",
                "--wait",
                "--timeout=2m",
            ],
        )
        .await
        .unwrap();
        assert_eq!(
            out,
            "containerrecreaterequest.apps.kruise.io/again created\ncontainerrecreaterequest.apps.kruise.io/again completed: recreated app\n"
        );
        let after = pod(&ns, "cli-pod").await;
        assert_eq!(after.metadata.uid, before.metadata.uid);
        assert_eq!(status_of(&after, "app").restart_count, 1);
        assert_eq!(status_of(&after, "sidecar").restart_count, 0);
        let crr = get_crr(&ns, "again").await;
        assert_eq!(crr.spec.ttl_seconds_after_finished, Some(1800));
        assert_eq!(crr.spec.active_deadline_seconds, Some(300));
        let err = kruise_e2e::kubectl_kruise(
            &ns.name,
            &[
                "create",
                "crr",
                "typo",
                "--pod=cli-pod",
                "--containers=nope",
            ],
        )
        .await
        .unwrap_err();
        assert!(
            err.ends_with("pod \"cli-pod\" has no container \"nope\" (it has: app, sidecar)"),
            "{err}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 3)]
    async fn real_node_crr_recreates_one_container_in_place() {
        let Some((registry, socket)) = real_node().await else {
            return;
        };
        let ns = TestNamespace::new("crr-real").await;
        let (_manager, _agent) = start(&ns, &socket).await;
        let image = format!("{registry}/kruise-rs/busybox:1");
        let before = running_pod(&ns, "pod-name", &image, true).await;
        let (uid, ip) = (
            before.metadata.uid.clone().unwrap(),
            before.status.as_ref().unwrap().pod_ip.clone().unwrap(),
        );
        let (app, sidecar) = (status_of(&before, "app"), status_of(&before, "sidecar"));

        // A container the Pod does not have is refused.
        let err = ns
            .apply(&crr_yaml("typo", "pod-name", &["nope"], ""))
            .await
            .unwrap_err();
        assert!(err.contains("container nope not found in Pod"), "{err}");

        let started = std::time::Instant::now();
        ns.apply(&crr_yaml(
            "xxx",
            "pod-name",
            &["app"],
            "  strategy:\n    unreadyGracePeriodSeconds: 5\n    minStartedSeconds: 1\n  activeDeadlineSeconds: 120\n  ttlSecondsAfterFinished: 5",
        ))
        .await
        .unwrap();
        let crr = get_crr(&ns, "xxx").await;
        assert_eq!(
            crr.labels().get(keys::CRR_NODE_NAME).map(String::as_str),
            Some(NODE)
        );
        assert_eq!(crr.labels().get(keys::CRR_POD_UID), Some(&uid));
        let spec_app = &crr.spec.containers[0];
        assert_eq!(
            spec_app.status_context.as_ref().unwrap().container_id,
            app.container_id.clone().unwrap()
        );
        assert!(spec_app.pre_stop.as_ref().unwrap().exec.is_some());

        // unreadyGracePeriodSeconds: the Pod goes NotReady while the old container still runs.
        // Ready=False alone is not enough: the kubelet may briefly write Ready=False from a
        // stale view of the Pod right after the test marked it Ready; the CRR's mark is the
        // readiness gate going False.
        let held = wait_for("the Pod NotReady before the stop", MINUTE, || async {
            let p = pod(&ns, "pod-name").await;
            let still_old = status_of(&p, "app").container_id == app.container_id;
            let gate_false = condition(&p, keys::KRUISE_POD_READY).as_deref() == Some("False");
            if !is_ready(&p) && gate_false && still_old {
                Ok(p)
            } else if !still_old {
                panic!(
                    "app was stopped before the Pod was NotReady: {:?}",
                    p.status
                )
            } else {
                Err(format!("{:?}", p.status))
            }
        })
        .await;
        assert_eq!(
            condition(&held, keys::KRUISE_POD_READY).as_deref(),
            Some("False")
        );
        let acquired = get_crr(&ns, "xxx").await;
        assert!(
            acquired
                .annotations()
                .contains_key(keys::CRR_UNREADY_ACQUIRED)
        );
        assert!(
            acquired
                .finalizers()
                .contains(&keys::CRR_UNREADY_ACQUIRED.to_string())
        );

        let done = wait_completed(&ns, "xxx", 2 * MINUTE).await;
        let took = started.elapsed();
        eprintln!("crr xxx: created → Completed in {took:?}");
        let status = done.status.unwrap();
        assert_eq!(status.message, "");
        assert!(status.completion_time.is_some());
        assert_eq!(status.container_recreate_states.len(), 1);
        let state = &status.container_recreate_states[0];
        assert_eq!(
            (state.name.as_str(), state.phase, state.is_killed),
            ("app", ContainerRecreateRequestPhase::Succeeded, true)
        );

        // The Pod: same UID and IP; app recreated once, sidecar untouched; Ready again.
        let after = wait_for("the Pod Ready again", MINUTE, || async {
            let p = pod(&ns, "pod-name").await;
            if is_ready(&p) {
                Ok(p)
            } else {
                Err(format!("{:?}", p.status))
            }
        })
        .await;
        assert_eq!(after.metadata.uid.as_ref(), Some(&uid));
        assert_eq!(after.status.as_ref().unwrap().pod_ip.as_ref(), Some(&ip));
        let (app2, sidecar2) = (status_of(&after, "app"), status_of(&after, "sidecar"));
        assert_eq!(app2.restart_count, 1);
        assert_ne!(app2.container_id, app.container_id);
        assert_eq!(sidecar2.restart_count, 0);
        assert_eq!(sidecar2.container_id, sidecar.container_id);
        assert_eq!(
            condition(&after, keys::KRUISE_POD_READY).as_deref(),
            Some("True")
        );
        // The preStop hook ran in the old container (its line is in the shared volume).
        let written = exec_cat(&ns, "pod-name", "sidecar", "/shared/prestop").await;
        assert_eq!(written.trim(), "prestop app");
        wait_events(&ns, "pod-name", "the Killing event", |events| {
            events.iter().any(|e| {
                e.reason == "Killing"
                    && e.note == "Stopping container app by ContainerRecreateRequest xxx"
            })
        })
        .await;
        // Released, no longer watched, deleted 5s after completion.
        wait_for("finalizer and active label removed", MINUTE, || async {
            match ns.api::<ContainerRecreateRequest>().get_opt("xxx").await {
                Ok(Some(c))
                    if c.finalizers().is_empty() && !c.labels().contains_key(keys::CRR_ACTIVE) =>
                {
                    Ok(())
                }
                Ok(None) => Ok(()),
                other => Err(format!("{:?}", other.map(|c| c.map(|c| c.metadata)))),
            }
        })
        .await;
        wait_deleted(&ns, "xxx", MINUTE).await;
    }

    /// A request the manager completes on its activeDeadlineSeconds while the agent is
    /// still running `app`'s preStop hook (8s): the agent stops `app` afterwards and
    /// records it (`Recreating`, killed; `sidecar` never reached, `Pending`), as
    /// OpenKruise's "recreates containers with preStopHook" expects, but the request stays
    /// Completed: the agent's write after the hook must not move it back to Recreating.
    #[tokio::test(flavor = "multi_thread", worker_threads = 3)]
    async fn real_node_crr_completed_during_pre_stop_stays_completed() {
        let Some((registry, socket)) = real_node().await else {
            return;
        };
        let ns = TestNamespace::new("crr-real-deadline").await;
        let (_manager, _agent) = start(&ns, &socket).await;
        let image = format!("{registry}/kruise-rs/busybox:1");
        let container = |name: &str, pre_stop: &str| {
            format!(
                r#"  - name: {name}
    image: {image}
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]{pre_stop}"#
            )
        };
        ns.apply(&format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: slow-stop
spec:
  nodeSelector:
    node.kruise.io/real: "true"
  tolerations:
  - key: node.kruise.io/real
    operator: Exists
    effect: NoSchedule
  containers:
{}
{}
"#,
            container(
                "app",
                "\n    lifecycle:\n      preStop:\n        exec:\n          command: [\"sleep\", \"8\"]"
            ),
            container("sidecar", "")
        ))
        .await
        .unwrap();
        let before = wait_for("slow-stop Ready", 2 * MINUTE, || async {
            let p = pod(&ns, "slow-stop").await;
            if is_ready(&p) {
                Ok(p)
            } else {
                Err(format!("{:?}", p.status))
            }
        })
        .await;
        let app = status_of(&before, "app");
        ns.apply(&crr_yaml(
            "deadline",
            "slow-stop",
            &["app", "sidecar"],
            "  activeDeadlineSeconds: 3",
        ))
        .await
        .unwrap();
        wait_completed(&ns, "deadline", Duration::from_secs(30)).await;
        // From completion until a while after app's stop: never anything but Completed.
        let mut restarted_at = None;
        let deadline = std::time::Instant::now() + 2 * MINUTE;
        loop {
            let crr = get_crr(&ns, "deadline").await;
            let status = crr.status.clone().unwrap_or_default();
            assert!(
                status.is_completed(),
                "the completed request went back to {:?}: {status:?}",
                status.phase
            );
            let p = pod(&ns, "slow-stop").await;
            if restarted_at.is_none() && status_of(&p, "app").container_id != app.container_id {
                restarted_at = Some(std::time::Instant::now());
            }
            if restarted_at.is_some_and(|t| t.elapsed() > Duration::from_secs(5)) {
                let states: Vec<_> = status
                    .container_recreate_states
                    .iter()
                    .map(|s| (s.name.as_str(), s.phase, s.is_killed))
                    .collect();
                assert_eq!(
                    states,
                    [
                        ("app", ContainerRecreateRequestPhase::Recreating, true),
                        ("sidecar", ContainerRecreateRequestPhase::Pending, false)
                    ]
                );
                assert_eq!(status_of(&p, "sidecar").restart_count, 0);
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "app was not recreated: {:?}",
                p.status
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// orderedRecreate: `sidecar` is stopped only once `app`'s new container has run
    /// `minStartedSeconds`; a second request for the same Pod stays Pending until the
    /// first completes, then runs, and its forceRecreate stops the sidecar again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 3)]
    async fn real_node_crr_ordered_recreate_and_one_request_per_pod_at_a_time() {
        let Some((registry, socket)) = real_node().await else {
            return;
        };
        let ns = TestNamespace::new("crr-real-ordered").await;
        let (_manager, _agent) = start(&ns, &socket).await;
        let image = format!("{registry}/kruise-rs/busybox:1");
        let before = running_pod(&ns, "two", &image, false).await;
        ns.apply(&crr_yaml(
            "first",
            "two",
            &["app", "sidecar"],
            "  strategy:\n    orderedRecreate: true\n    minStartedSeconds: 3\n  activeDeadlineSeconds: 120",
        ))
        .await
        .unwrap();
        // forceRecreate: by the time it runs, the first has restarted the sidecar already
        // (a higher restartCount than its status context), which alone would count as done.
        ns.apply(&crr_yaml(
            "second",
            "two",
            &["sidecar"],
            "  strategy:\n    forceRecreate: true\n  activeDeadlineSeconds: 120",
        ))
        .await
        .unwrap();
        // Until the first completes, the second is Pending (never Recreating).
        let saw_pending = std::sync::atomic::AtomicBool::new(false);
        let first = wait_for(
            "first Completed, second waiting meanwhile",
            2 * MINUTE,
            || {
                let (saw, ns) = (&saw_pending, &ns);
                async move {
                    let second = get_crr(ns, "second").await;
                    let first = get_crr(ns, "first").await;
                    let phase = second.status.as_ref().and_then(|s| s.phase);
                    let first_done = first.status.as_ref().is_some_and(|s| s.is_completed());
                    if !first_done {
                        assert_ne!(
                            phase,
                            Some(ContainerRecreateRequestPhase::Recreating),
                            "second ran before first completed"
                        );
                        if phase == Some(ContainerRecreateRequestPhase::Pending) {
                            saw.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                        return Err(format!("{:?}", first.status));
                    }
                    Ok(first)
                }
            },
        )
        .await;
        assert!(
            saw_pending.load(std::sync::atomic::Ordering::Relaxed),
            "second was seen Pending while first ran"
        );
        let states: Vec<_> = first
            .status
            .unwrap()
            .container_recreate_states
            .iter()
            .map(|s| (s.name.clone(), s.phase))
            .collect();
        assert_eq!(
            states,
            [
                ("app".to_string(), ContainerRecreateRequestPhase::Succeeded),
                (
                    "sidecar".to_string(),
                    ContainerRecreateRequestPhase::Succeeded
                )
            ]
        );
        let mid = pod(&ns, "two").await;
        let started = |c: &str| {
            status_of(&mid, c)
                .state
                .and_then(|s| s.running)
                .and_then(|r| r.started_at)
                .map(|t| t.0)
                .unwrap()
        };
        // The sidecar was stopped only after app's new container had run 3s
        // (timestamps in whole seconds).
        let gap = started("app").duration_until(started("sidecar"));
        assert!(
            gap >= jiff::SignedDuration::from_secs(2),
            "sidecar restarted {gap:?} after app"
        );
        let second = wait_completed(&ns, "second", 2 * MINUTE).await;
        assert_eq!(
            second.status.unwrap().container_recreate_states[0].phase,
            ContainerRecreateRequestPhase::Succeeded
        );
        let after = pod(&ns, "two").await;
        assert_eq!(after.metadata.uid, before.metadata.uid);
        assert_eq!(status_of(&after, "app").restart_count, 1);
        assert_eq!(status_of(&after, "sidecar").restart_count, 2);
        // Each preStop ran once per stop, in order.
        let written = exec_cat(&ns, "two", "app", "/shared/prestop").await;
        assert_eq!(
            written.lines().collect::<Vec<_>>(),
            ["prestop app", "prestop sidecar", "prestop sidecar"]
        );
    }

    /// SidecarTerminator (gate SidecarTerminator): a Job-like Pod (restartPolicy Never)
    /// whose main container exits while its sidecar (KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT)
    /// would run forever: the manager asks for the sidecar's stop with the request
    /// `sidecar-termination-<uid>`, the agent stops it, the kubelet does not restart it,
    /// and the Pod completes (Succeeded, as its main container exited 0).
    #[tokio::test(flavor = "multi_thread", worker_threads = 3)]
    async fn real_node_sidecar_terminator_lets_a_job_pod_complete() {
        let Some((registry, socket)) = real_node().await else {
            return;
        };
        let ns = TestNamespace::new("crr-sidecar-term").await;
        let manager = start_manager(&ns, "SidecarTerminator=true").await;
        let socket_path = std::path::PathBuf::from(socket);
        let _agent = RunningController::start(daemon_agent::IDENTITY, &ns.name, "", move |rt| {
            daemon_agent::crr::run_standalone(rt, NODE.into(), socket_path)
        })
        .await;
        let image = format!("{registry}/kruise-rs/busybox:1");
        ns.apply(&format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: job-pod
spec:
  restartPolicy: Never
  nodeSelector:
    node.kruise.io/real: "true"
  tolerations:
  - key: node.kruise.io/real
    operator: Exists
    effect: NoSchedule
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: {image}
    command: ["sh", "-c", "sleep 3; exit 0"]
  - name: sidecar
    image: {image}
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    env:
    - name: KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT
      value: "true"
"#
        ))
        .await
        .unwrap();
        let done = wait_for("the Job Pod to complete", 2 * MINUTE, || async {
            let p = pod(&ns, "job-pod").await;
            match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
                Some("Succeeded") => Ok(p),
                other => Err(format!("phase {other:?}: {:?}", p.status)),
            }
        })
        .await;
        let sidecar = status_of(&done, "sidecar");
        let terminated = sidecar
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .expect("the sidecar terminated");
        assert_eq!(
            sidecar.restart_count, 0,
            "not restarted (restartPolicy Never)"
        );
        assert_eq!(terminated.exit_code, 0, "stopped by TERM: {terminated:?}");
        let uid = done.metadata.uid.clone().unwrap();
        let crr: ContainerRecreateRequest = ns
            .api()
            .get(&format!("sidecar-termination-{uid}"))
            .await
            .expect("the request SidecarTerminator made");
        assert_eq!(crr.spec.containers.len(), 1);
        assert_eq!(crr.spec.containers[0].name, "sidecar");
        let owner = &crr.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Pod", uid.as_str())
        );
        wait_events(&ns, "job-pod", "the SidecarTerminator event", |events| {
            events.iter().any(|e| {
                e.reason == "SidecarTerminator"
                    && e.note
                        .contains("trying to terminate sidecar [sidecar] using crr")
            })
        })
        .await;
        drop(manager);
    }
}
