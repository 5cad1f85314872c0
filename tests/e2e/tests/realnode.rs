//! The real node `real-0` (tests/cluster/node.sh: a kubelet on containerd, images from a
//! local registry), where containers really run:
//!
//! - a Pod from the local registry runs: Running, an `imageID` from containerd, its logs
//!   and `kubectl exec` work;
//! - a container killed behind the kubelet's back (through containerd) is restarted by the
//!   kubelet: restartCount 1, the exit code in lastState;
//! - a CloneSet with InPlaceIfPossible: the image change is carried out by the real
//!   kubelet (same Pod UID, the container restarted with the new image ID,
//!   InPlaceUpdateReady back to True);
//! - a CloneSet with InPlaceWorkloadVerticalScaling: a cpu change is resized in place
//!   (pods/resize) and actuated by the kubelet, which reports the new cpu; no restart;
//! - after `make deploy-local` (the controllers from their images, 2 Pods each on the real
//!   node): the CloneSet controller's leader Pod is killed mid-rollout, the other replica
//!   takes the Lease and finishes, no Pod is created twice or lost. `make test` deploys
//!   the controller for it (KRUISE_E2E_DEPLOYED=1: its absence is a failure); elsewhere,
//!   without the deployment, this one says so and passes; the in-place test above then uses the deployed
//!   controller instead of one in the test process (two controllers must not share a
//!   CloneSet; for the same reason the kwok suite, `make e2e`, must not run on a cluster
//!   with deploy-local's controllers).
//!
//! The real node is opt-in (`make up-real`, `make e2e-real`): on a cluster without it these
//! tests print why and pass without checking anything, unless KRUISE_E2E_REAL_NODE=1 (set
//! by `make e2e-real`) makes its absence a failure. They run on the machine of the node
//! (the kill goes through the node's containerd socket).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ContainerStatus, Node, Pod};
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_api::keys;
use kruise_e2e::{RunningController, TestNamespace, is_ready, kubectl_async, wait_for};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, LogParams, Patch, PatchParams};
use serde_json::json;

pub(crate) const NODE: &str = "real-0";
const MINUTE: Duration = Duration::from_secs(60);

/// What node.sh publishes on the Node (annotations).
pub(crate) struct RealNode {
    /// `127.0.0.1:<port>`: the local registry the node pulls from.
    pub(crate) registry: String,
    /// `127.0.0.1:<port + 1>`: the same, behind a login (pulls with a pull secret).
    pub(crate) private_registry: String,
    /// The node's containerd socket (on this machine).
    pub(crate) containerd_socket: String,
}

impl RealNode {
    /// A test image of node.sh (busybox, FROM scratch): tag 1 or 2, different image IDs.
    pub(crate) fn busybox(&self, tag: u8) -> String {
        format!("{}/kruise-rs/busybox:{tag}", self.registry)
    }
}

/// The real node, Ready; `None` (after saying why) when the cluster has none.
pub(crate) async fn real_node() -> Option<RealNode> {
    let nodes: Api<Node> = Api::all(kruise_e2e::client().await);
    let Some(node) = nodes.get_opt(NODE).await.expect("get node") else {
        let why = format!(
            "no node {NODE} in this cluster: the real node is opt-in (`make up-real`, then \
             `make e2e-real`)"
        );
        if std::env::var("KRUISE_E2E_REAL_NODE").is_ok_and(|v| v == "1") {
            panic!("{why}");
        }
        eprintln!("skipped: {why}");
        return None;
    };
    let annotation = |key: &str| {
        node.annotations()
            .get(key)
            .cloned()
            .unwrap_or_else(|| panic!("node {NODE} lacks the annotation {key} (node.sh sets it)"))
    };
    let real = RealNode {
        registry: annotation("node.kruise.io/registry"),
        private_registry: annotation("node.kruise.io/private-registry"),
        containerd_socket: annotation("node.kruise.io/containerd-socket"),
    };
    wait_for(&format!("node {NODE} Ready"), MINUTE, || {
        let nodes = nodes.clone();
        async move {
            let node = nodes.get(NODE).await.map_err(|e| e.to_string())?;
            let ready = node
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .into_iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            if ready {
                Ok(())
            } else {
                Err("not Ready".into())
            }
        }
    })
    .await;
    Some(real)
}

/// What puts a Pod on the real node: its label and its taint.
pub(crate) const ON_REAL_NODE: &str = r#"      nodeSelector:
        node.kruise.io/real: "true"
      tolerations:
      - key: node.kruise.io/real
        operator: Exists
        effect: NoSchedule
      terminationGracePeriodSeconds: 5"#;

fn pod_yaml(name: &str, image: &str, script: &str) -> String {
    // The Pod's spec indented as a template's, shifted back by 4.
    let placement = ON_REAL_NODE
        .lines()
        .map(|l| &l[4..])
        .collect::<Vec<_>>()
        .join("\n");
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
{placement}
  containers:
  - name: main
    image: {image}
    command: ["sh", "-c", {script:?}]
"#
    )
}

async fn pod(ns: &TestNamespace, name: &str) -> Pod {
    ns.api::<Pod>().get(name).await.expect("get pod")
}

/// The first container's status, if the kubelet has reported one yet.
fn first_container_status(pod: &Pod) -> Option<ContainerStatus> {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .cloned()
}

fn container_status(pod: &Pod) -> ContainerStatus {
    first_container_status(pod)
        .unwrap_or_else(|| panic!("{} has no container status", pod.name_any()))
}

fn running(status: &ContainerStatus) -> bool {
    status.state.as_ref().is_some_and(|s| s.running.is_some())
}

/// Waits until the Pod is Running and Ready with `restarts` restarts.
async fn wait_running(ns: &TestNamespace, name: &str, restarts: i32) -> Pod {
    wait_for(
        &format!("{name} Running and Ready on {NODE} after {restarts} restarts"),
        MINUTE,
        || async {
            let pod = pod(ns, name).await;
            let status = pod
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first());
            match status {
                Some(s) if running(s) && s.restart_count == restarts && is_ready(&pod) => Ok(pod),
                _ => Err(format!("{:?}", pod.status)),
            }
        },
    )
    .await
}

async fn logs(ns: &TestNamespace, name: &str, previous: bool) -> String {
    let params = LogParams {
        previous,
        ..Default::default()
    };
    ns.api::<Pod>()
        .logs(name, &params)
        .await
        .unwrap_or_else(|e| panic!("logs of {name} (previous: {previous}): {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_node_runs_a_pod_from_the_local_registry() {
    let Some(node) = real_node().await else {
        return;
    };
    let ns = TestNamespace::new("real-pod").await;
    let image = node.busybox(1);
    ns.apply(&pod_yaml(
        "hello",
        &image,
        "echo hello from $(hostname); trap 'exit 0' TERM; while true; do sleep 1; done",
    ))
    .await
    .unwrap();
    let pod = wait_running(&ns, "hello", 0).await;
    assert_eq!(pod.spec.as_ref().unwrap().node_name.as_deref(), Some(NODE));
    let status = container_status(&pod);
    assert_eq!(status.image, image);
    // The image ID is the digest containerd resolved in the registry.
    assert!(
        status
            .image_id
            .starts_with(&format!("{}/kruise-rs/busybox@sha256:", node.registry)),
        "imageID from containerd: {}",
        status.image_id
    );
    assert!(
        status
            .container_id
            .as_deref()
            .is_some_and(|id| id.starts_with("containerd://")),
        "{:?}",
        status.container_id
    );
    // A Pod IP on the node's bridge (not the node's own address: not hostNetwork).
    let pod_status = pod.status.as_ref().unwrap();
    assert!(pod_status.pod_ip.is_some() && pod_status.pod_ip != pod_status.host_ip);

    // Logs and exec go through the apiserver to the kubelet.
    let out = wait_for("the container's log", MINUTE, || async {
        let out = logs(&ns, "hello", false).await;
        if out.contains("hello from hello") {
            Ok(out)
        } else {
            Err(out)
        }
    })
    .await;
    assert_eq!(out.trim(), "hello from hello");
    let (ok, out, err) = kubectl_async(
        [
            "exec",
            "-n",
            &ns.name,
            "hello",
            "--",
            "sh",
            "-c",
            "echo $((6 * 7)) $(id -u)",
        ]
        .map(String::from)
        .to_vec(),
        None,
    )
    .await;
    assert!(ok, "kubectl exec: {err}");
    assert_eq!(out.trim(), "42 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_node_restarts_a_killed_container() {
    let Some(node) = real_node().await else {
        return;
    };
    let ns = TestNamespace::new("real-restart").await;
    ns.apply(&pod_yaml(
        "victim",
        &node.busybox(1),
        "echo run; trap 'exit 0' TERM; while true; do sleep 1; done",
    ))
    .await
    .unwrap();
    let pod = wait_running(&ns, "victim", 0).await;
    let before = container_status(&pod);
    let id = before
        .container_id
        .as_deref()
        .and_then(|id| id.strip_prefix("containerd://"))
        .expect("a containerd container ID")
        .to_string();

    // Killed behind the kubelet's back, through the node's containerd (the CRI's
    // runtime): the kubelet notices and starts the container again.
    let socket = node.containerd_socket.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("ctr")
            .args([
                "--address",
                &socket,
                "-n",
                "k8s.io",
                "tasks",
                "kill",
                "-s",
                "SIGKILL",
                &id,
            ])
            .output()
    })
    .await
    .unwrap()
    .expect("run ctr (Debian's containerd package)");
    assert!(
        out.status.success(),
        "ctr tasks kill: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let pod = wait_running(&ns, "victim", 1).await;
    let after = container_status(&pod);
    assert_ne!(after.container_id, before.container_id, "a new container");
    assert_eq!(after.image_id, before.image_id);
    let terminated = after
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("lastState.terminated");
    assert_eq!(
        terminated.exit_code, 137,
        "killed by SIGKILL: {terminated:?}"
    );
    assert_eq!(
        terminated.container_id, before.container_id,
        "lastState is the killed container"
    );
    // Both runs logged; the kubelet keeps the previous one.
    assert_eq!(logs(&ns, "victim", true).await.trim(), "run");
    assert_eq!(logs(&ns, "victim", false).await.trim(), "run");
}

fn cloneset_yaml(name: &str, replicas: i32, image: &str) -> String {
    format!(
        r#"
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
{ON_REAL_NODE}
      containers:
      - name: main
        image: {image}
  updateStrategy:
    type: InPlaceIfPossible
"#
    )
}

pub(crate) fn condition(pod: &Pod, type_: &str) -> Option<String> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == type_))
        .map(|c| c.status.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_node_cloneset_in_place_update_is_carried_out_by_the_kubelet() {
    let Some(node) = real_node().await else {
        return;
    };
    let ns = TestNamespace::new("real-cs").await;
    // The controller deployed by `make deploy-local` (from its image, on this node) when
    // there is one: two controllers must not share a CloneSet. Else one in this process.
    let _ctl = if deployed_controller_pods("cloneset-controller")
        .await
        .is_empty()
    {
        Some(
            RunningController::start(cloneset_ctl::IDENTITY, &ns.name, "", cloneset_ctl::run).await,
        )
    } else {
        eprintln!("using the deployed cloneset-controller (make deploy-local)");
        None
    };
    let probe: CloneSet =
        serde_saphyr::from_str(&cloneset_yaml("probe", 0, "x")).expect("probe CloneSet");
    kruise_e2e::wait_webhook_effective(&ns.api(), &probe, |cs: &CloneSet| {
        cs.spec.revision_history_limit.is_some()
    })
    .await;

    ns.apply(&cloneset_yaml("web", 2, &node.busybox(1)))
        .await
        .unwrap();
    let pods = |ns: &TestNamespace| {
        let api = ns.api::<Pod>();
        async move {
            api.list(&ListParams::default().labels("app=web"))
                .await
                .expect("list pods")
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .map(|p| (p.name_any(), p))
                .collect::<BTreeMap<_, _>>()
        }
    };
    let before = wait_for(
        "2 Pods of web Running and Ready on the real node",
        MINUTE,
        || async {
            let pods = pods(&ns).await;
            let ready = pods
                .values()
                .filter(|p| is_ready(p) && running(&container_status(p)))
                .count();
            if pods.len() == 2 && ready == 2 {
                Ok(pods)
            } else {
                Err(format!("{} Pods, {ready} ready", pods.len()))
            }
        },
    )
    .await;
    for pod in before.values() {
        assert_eq!(pod.spec.as_ref().unwrap().node_name.as_deref(), Some(NODE));
        assert_eq!(
            condition(pod, keys::INPLACE_UPDATE_READY).as_deref(),
            Some("True")
        );
    }

    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": node.busybox(2)}
    ]))
    .unwrap();
    ns.api::<CloneSet>()
        .patch("web", &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .expect("set image");

    // The kubelet pulls busybox:2, restarts only that container, reports the new image ID;
    // the controller sees it and sets InPlaceUpdateReady back to True.
    let after = wait_for(
        "both Pods updated in place by the kubelet",
        2 * MINUTE,
        || async {
            let pods = pods(&ns).await;
            let done = pods
                .values()
                .filter(|p| {
                    let s = container_status(p);
                    s.image == node.busybox(2)
                        && running(&s)
                        && s.restart_count == 1
                        && is_ready(p)
                        && condition(p, keys::INPLACE_UPDATE_READY).as_deref() == Some("True")
                })
                .count();
            if pods.len() == 2 && done == 2 {
                Ok(pods)
            } else {
                Err(format!(
                    "{:?}",
                    pods.values()
                        .map(|p| (
                            p.name_any(),
                            container_status(p),
                            condition(p, keys::INPLACE_UPDATE_READY)
                        ))
                        .collect::<Vec<_>>()
                ))
            }
        },
    )
    .await;
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "same Pods"
    );
    for (name, pod) in &after {
        let old = &before[name];
        assert_eq!(pod.uid(), old.uid(), "{name}: same UID, updated in place");
        let (old_status, new_status) = (container_status(old), container_status(pod));
        assert_ne!(
            new_status.image_id, old_status.image_id,
            "{name}: a new image ID"
        );
        assert!(
            new_status
                .image_id
                .starts_with(&format!("{}/kruise-rs/busybox@sha256:", node.registry)),
            "{}",
            new_status.image_id
        );
        assert_ne!(new_status.container_id, old_status.container_id);
        assert_eq!(
            pod.status.as_ref().unwrap().pod_ip,
            old.status.as_ref().unwrap().pod_ip,
            "{name}: the sandbox (and its IP) stayed"
        );
    }
    let cs: CloneSet = ns.api().get("web").await.unwrap();
    let status = cs.status.unwrap();
    assert_eq!(status.updated_replicas, 2, "{status:?}");
}

const SYSTEM_NS: &str = "kruise-system";

/// The Pods of a controller Deployment of kruise-system (deploy-local's), not being deleted.
pub(crate) async fn deployed_controller_pods(deployment: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(kruise_e2e::client().await, SYSTEM_NS);
    let selector =
        format!("app.kubernetes.io/name={deployment},app.kubernetes.io/component=controller");
    match pods.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The Pods of a deploy-local Deployment, or `None` after saying why when it is not
/// deployed; a failure instead under KRUISE_E2E_DEPLOYED=1 (`make test` sets it after
/// deploying the controller from its image).
pub(crate) async fn deployed(deployment: &str) -> Option<Vec<Pod>> {
    let pods = deployed_controller_pods(deployment).await;
    if pods.is_empty() {
        let why = format!(
            "no {deployment} deployed in {SYSTEM_NS} (make deploy-local deploys the \
             controllers from their images onto {NODE})"
        );
        if std::env::var("KRUISE_E2E_DEPLOYED").is_ok_and(|v| v == "1") {
            panic!("{why}");
        }
        eprintln!("skipped: {why}");
        return None;
    }
    Some(pods)
}

/// The Lease whose holder is one of `pods` (holder identity `<pod>_<pid>`): (lease, holder Pod).
async fn held_lease(pods: &[String]) -> Result<(String, String), String> {
    let leases: Api<Lease> = Api::namespaced(kruise_e2e::client().await, SYSTEM_NS);
    let list = leases
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    for lease in list.items {
        let holder = lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.clone())
            .unwrap_or_default();
        if let Some(pod) = pods.iter().find(|p| holder.starts_with(&format!("{p}_"))) {
            return Ok((lease.name_any(), pod.clone()));
        }
    }
    Err(format!("no Lease held by one of {pods:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployed_cloneset_controller_finishes_a_rollout_after_its_leader_is_killed() {
    let Some(node) = real_node().await else {
        return;
    };
    if deployed("cloneset-controller").await.is_none() {
        return;
    }
    // Both replicas Ready on the real node, from the local registry's image.
    let replicas = wait_for("2 Ready cloneset-controller Pods", 2 * MINUTE, || async {
        let pods = deployed_controller_pods("cloneset-controller").await;
        let ready = pods.iter().filter(|p| is_ready(p)).count();
        if pods.len() == 2 && ready == 2 {
            Ok(pods)
        } else {
            Err(format!("{} Pods, {ready} Ready", pods.len()))
        }
    })
    .await;
    for pod in &replicas {
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some(NODE), "{}", pod.name_any());
        let image = spec.containers[0].image.clone().unwrap_or_default();
        assert!(
            image.starts_with(&format!("{}/kruise-rs/cloneset-ctl:", node.registry)),
            "{image}"
        );
    }
    let names: Vec<String> = replicas.iter().map(|p| p.name_any()).collect();
    let (lease, leader) =
        wait_for("the Lease held by a replica", MINUTE, || held_lease(&names)).await;

    // A rollout on the kwok nodes: 8 Pods recreated one at a time.
    let ns = TestNamespace::new("real-leader").await;
    let yaml = |image: &str| {
        format!(
            r#"
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: web
spec:
  replicas: 8
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: main
        image: {image}
  updateStrategy:
    type: ReCreate
    maxUnavailable: 1
"#
        )
    };
    let pods_api: Api<Pod> = ns.api();
    let active = || async {
        pods_api
            .list(&ListParams::default().labels("app=web"))
            .await
            .expect("list pods")
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect::<Vec<_>>()
    };
    ns.apply(&yaml("nginx:alpine")).await.unwrap();
    wait_for("8 Ready Pods", 2 * MINUTE, || async {
        let pods = active().await;
        let ready = pods.iter().filter(|p| is_ready(p)).count();
        if ready == 8 {
            Ok(())
        } else {
            Err(format!("{} Pods, {ready} Ready", pods.len()))
        }
    })
    .await;
    let seen: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(active().await.iter().map(|p| p.name_any()).collect());
    assert_eq!(seen.lock().unwrap().len(), 8);

    ns.apply(&yaml("nginx:1.7.9")).await.unwrap();
    // Killed: no grace, the process gets SIGKILL and releases nothing.
    let system_pods: Api<Pod> = Api::namespaced(kruise_e2e::client().await, SYSTEM_NS);
    system_pods
        .delete(
            &leader,
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await
        .expect("kill the leader Pod");
    let survivor = names.iter().find(|n| **n != leader).unwrap().clone();
    // The kill landed mid-rollout.
    let updated_at_kill = active()
        .await
        .iter()
        .filter(|p| p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("nginx:1.7.9"))
        .count();
    assert!(updated_at_kill < 8, "the rollout was over before the kill");

    let most_active = std::sync::atomic::AtomicUsize::new(0);
    let cs_api: Api<CloneSet> = ns.api();
    wait_for(
        "the rollout to finish under the new leader",
        3 * MINUTE,
        || async {
            let pods = active().await;
            most_active.fetch_max(pods.len(), std::sync::atomic::Ordering::Relaxed);
            seen.lock()
                .unwrap()
                .extend(pods.iter().map(|p| p.name_any()));
            let cs = cs_api.get("web").await.map_err(|e| e.to_string())?;
            let done = cs.status.as_ref().is_some_and(|s| {
                s.observed_generation == cs.metadata.generation.unwrap_or_default()
                    && s.updated_ready_replicas == 8
                    && s.replicas == 8
            });
            let updated = pods
                .iter()
                .filter(|p| {
                    p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("nginx:1.7.9")
                })
                .count();
            if done && pods.len() == 8 && updated == 8 {
                Ok(())
            } else {
                Err(format!(
                    "{} active Pods, {updated} updated, status {:?}",
                    pods.len(),
                    cs.status
                ))
            }
        },
    )
    .await;
    // The Lease moved to another replica: the survivor, or the Pod the Deployment started
    // in place of the killed one (whichever asked first once the Lease expired).
    let now: Vec<String> = deployed_controller_pods("cloneset-controller")
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    let (new_lease, holder) = held_lease(&now)
        .await
        .expect("a live replica holds the Lease");
    assert_eq!(new_lease, lease);
    assert_ne!(holder, leader, "the killed leader cannot hold it");
    eprintln!("Lease {lease}: {leader} killed, now held by {holder} (survivor: {survivor})");
    // ReCreate without surge: never more than 8 Pods at once; 8 old + 8 new, no more.
    let most_active = most_active.into_inner();
    assert!(most_active <= 8, "{most_active} Pods at once");
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 16, "Pods seen: {seen:?}");

    // Prometheus finds the replicas by their annotations (kubernetes_sd, role pod: the
    // scrape config docs/kustomize.md gives) and scrapes them on their Pod IPs:
    // both up, and the new leader's Pod creations of the rollout counted.
    let scratch = crate::deploy::Scratch::new(&ns.name);
    let prometheus = crate::deploy::Prometheus::start_with(
        &scratch.0,
        kubernetes_sd_scrape_config(&kruise_e2e::kubeconfig_path()),
    )
    .await;
    for pod in &now {
        wait_for(&format!("{pod} scraped: up == 1"), MINUTE, || async {
            let up = prometheus
                .query(&format!("up{{job=\"kruise-pods\",pod=\"{pod}\"}}"))
                .await?;
            match up.as_slice() {
                [(_, v)] if *v == 1.0 => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }
    wait_for("the new leader's Pod creations scraped", MINUTE, || async {
        let created = prometheus
            .query(&format!(
                "sum(kruise_api_requests_total{{job=\"kruise-pods\",pod=\"{holder}\",verb=\"create\",resource=\"pods\"}})"
            ))
            .await?;
        match created.as_slice() {
            [(_, v)] if *v >= 1.0 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// Prometheus's Pod discovery through the apiserver (`kubeconfig`), keeping the Pods of
/// kruise-system annotated `prometheus.io/scrape: "true"`, scraped on their Pod IP at the
/// annotated port and path, with a `pod` label.
fn kubernetes_sd_scrape_config(kubeconfig: &std::path::Path) -> serde_json::Value {
    json!([{
        "job_name": "kruise-pods",
        "kubernetes_sd_configs": [{
            "role": "pod",
            "kubeconfig_file": kubeconfig.display().to_string(),
            "namespaces": {"names": [SYSTEM_NS]},
        }],
        "relabel_configs": [
            {"source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"],
             "action": "keep", "regex": "true"},
            {"source_labels": ["__meta_kubernetes_pod_ip",
                               "__meta_kubernetes_pod_annotation_prometheus_io_port"],
             "regex": "(.+);(.+)", "target_label": "__address__", "replacement": "$1:$2"},
            {"source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_path"],
             "regex": "(.+)", "target_label": "__metrics_path__"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        ],
    }])
}

/// `InPlaceWorkloadVerticalScaling` on the real node: a cpu-only template change is
/// resized in place through `pods/resize` and actuated by the real kubelet (the container's
/// cgroup), which reports the new cpu in `status.containerStatuses[].resources`; same Pod
/// UID, the container not restarted (cpu's default resize policy is NotRequired).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_node_cloneset_resize_is_actuated_by_the_kubelet() {
    let Some(node) = real_node().await else {
        return;
    };
    let ns = TestNamespace::new("real-vpa").await;
    // Always a controller of this test (with the gate): deploy-local's runs without it and
    // is started only after these tests (tests/test.sh).
    let _ctl = RunningController::start(
        cloneset_ctl::IDENTITY,
        &ns.name,
        "InPlaceWorkloadVerticalScaling=true",
        cloneset_ctl::run,
    )
    .await;
    let probe: CloneSet =
        serde_saphyr::from_str(&cloneset_yaml("probe", 0, "x")).expect("probe CloneSet");
    kruise_e2e::wait_webhook_effective(&ns.api(), &probe, |cs: &CloneSet| {
        cs.spec.revision_history_limit.is_some()
    })
    .await;
    let yaml = cloneset_yaml("vpa", 1, &node.busybox(1)).replace(
        &format!("        image: {}\n", node.busybox(1)),
        &format!(
            "        image: {}\n        resources:\n          requests: {{cpu: 50m, memory: 32Mi}}\n          limits: {{cpu: 100m, memory: 64Mi}}\n",
            node.busybox(1)
        ),
    );
    ns.apply(&yaml).await.unwrap();
    let the_pod = || async {
        ns.api::<Pod>()
            .list(&ListParams::default().labels("app=vpa"))
            .await
            .expect("list pods")
            .items
            .into_iter()
            .find(|p| p.metadata.deletion_timestamp.is_none())
    };
    let actual_cpu = |p: &Pod| {
        first_container_status(p)?
            .resources
            .and_then(|r| r.requests)
            .and_then(|r| r.get("cpu").map(|q| q.0.clone()))
    };
    let before = wait_for("the Pod Running and Ready on real-0", MINUTE, || async {
        match the_pod().await {
            Some(p) if is_ready(&p) && first_container_status(&p).is_some_and(|s| running(&s)) => {
                Ok(p)
            }
            other => Err(format!("{:?}", other.map(|p| first_container_status(&p)))),
        }
    })
    .await;
    assert_eq!(
        actual_cpu(&before).as_deref(),
        Some("50m"),
        "the kubelet reports resources"
    );

    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/resources/requests/cpu", "value": "75m"},
        {"op": "replace", "path": "/spec/template/spec/containers/0/resources/limits/cpu", "value": "150m"},
    ]))
    .unwrap();
    ns.api::<CloneSet>()
        .patch("vpa", &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .expect("set cpu");
    let after = wait_for("the kubelet reports the new cpu", 2 * MINUTE, || async {
        match the_pod().await {
            Some(p) if actual_cpu(&p).as_deref() == Some("75m") && is_ready(&p) => Ok(p),
            other => Err(format!(
                "{:?}",
                other.map(|p| (
                    first_container_status(&p),
                    p.status.and_then(|s| s.conditions)
                ))
            )),
        }
    })
    .await;
    assert_eq!(after.uid(), before.uid(), "resized in place: same Pod");
    let status = container_status(&after);
    assert_eq!(status.restart_count, 0, "cpu resizes without a restart");
    assert_eq!(status.container_id, container_status(&before).container_id);
    wait_for("the CloneSet counts the Pod updated", MINUTE, || async {
        let cs: CloneSet = ns.api().get("vpa").await.unwrap();
        let s = cs.status.unwrap_or_default();
        if s.updated_ready_replicas == 1 && s.current_revision == s.update_revision {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
}
