//! Image pre-pulling: `imagepulljob-ctl` (NodeImage per node, ImagePullJob,
//! ImageListPullJob) and the node agent `daemon-agent` pulling through the CRI.
//!
//! - on the real node `real-0` (opt-in like realnode.rs; skipped with a message on a
//!   cluster without it, a failure under KRUISE_E2E_REAL_NODE=1): one test, so that only
//!   one agent serves the node: a job pulls a freshly pushed tag of the local registry
//!   into containerd (listed by the runtime, its imageID in the NodeImage status, the job
//!   Succeeded and deleted after its TTL); a missing tag fails with the runtime's message
//!   and failedNodes; a Pod using the pulled image starts without a pull; the node's
//!   NodeImage, deleted, comes back; an image of the registry that wants a login fails
//!   without its pull secret and is pulled with it; a CloneSet and an Advanced
//!   StatefulSet with `PreDownloadImageForInPlaceUpdate`, their in-place update held by
//!   the partition, pre-download the new image (a job owned by the workload, the image in
//!   containerd, no Pod touched), and the update then finds it on the node;
//! - on the kwok nodes (no runtime): admission; NodeImages for the nodes, a NodeImage of
//!   no node deleted and a fake one kept; a job without an agent stays active until its
//!   deadline fails it, and its tag is pruned once the job is gone; an ImageListPullJob's
//!   children and their aggregated status (the agent's status written by the test).

use std::time::Duration;

use daemon_agent::{AgentConfig, cri::Cri};
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kruise_api::apps_v1alpha1::{
    ImageListPullJob, ImagePullJob, ImagePullPhase, ImageTagStatus, NodeImage,
};
use kruise_api::keys;
use kruise_e2e::{RunningController, TestNamespace, events_in, wait_events, wait_for};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const REAL_NODE: &str = "real-0";
/// The login of the real node's second registry (tests/cluster/node.sh: a local test
/// account, bound to 127.0.0.1).
const PRIVATE_REGISTRY_LOGIN: (&str, &str) = ("kruise-e2e", "kruise-e2e-pull");
const MINUTE: Duration = Duration::from_secs(60);

async fn start_controller(ns: &TestNamespace) -> RunningController {
    let ctl = RunningController::start(
        imagepulljob_ctl::IDENTITY,
        &ns.name,
        "",
        imagepulljob_ctl::run,
    )
    .await;
    // Validation only: wait until the apiserver calls it (a dry-run of an invalid job is
    // denied with our message).
    let api: Api<ImagePullJob> = ns.api();
    let probe: ImagePullJob = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ImagePullJob",
        "metadata": {"name": "probe"}, "spec": {"image": "nginx:1", "parallelism": "10%"}
    }))
    .unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for("the apiserver to call the webhook", MINUTE, || async {
        match api.create(&dry_run, &probe).await {
            Err(e) if e.to_string().contains("percentage") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    ctl
}

fn job_yaml(name: &str, image: &str, node: &str, extra: &str) -> String {
    format!(
        r#"
apiVersion: apps.kruise.io/v1alpha1
kind: ImagePullJob
metadata:
  name: {name}
spec:
  image: {image}
  parallelism: 10
  selector:
    names: [{node}]
{extra}
"#
    )
}

async fn job_status(
    ns: &TestNamespace,
    name: &str,
) -> kruise_api::apps_v1alpha1::ImagePullJobStatus {
    ns.api::<ImagePullJob>()
        .get(name)
        .await
        .expect("get job")
        .status
        .unwrap_or_default()
}

async fn wait_job(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    check: impl Fn(&kruise_api::apps_v1alpha1::ImagePullJobStatus) -> bool,
) -> kruise_api::apps_v1alpha1::ImagePullJobStatus {
    wait_for(&format!("{name}: {what}"), MINUTE, || async {
        let s = job_status(ns, name).await;
        if check(&s) {
            Ok(s)
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await
}

fn tag_status(ni: &NodeImage, name: &str, tag: &str) -> Option<ImageTagStatus> {
    ni.status
        .as_ref()?
        .image_statuses
        .get(name)?
        .tags
        .iter()
        .find(|t| t.tag == tag)
        .cloned()
}

/// Pushes a new image `kruise-rs/busybox:<tag>` to the local registry: busybox:1's layers
/// (same repository, so the blobs are there) with a config labelled with the tag, so its
/// image ID is new too (an in-place update to an image with the same ID is not one).
/// Through curl, like node.sh.
async fn push_tag(registry: &str, tag: &str) {
    let (registry, tag) = (registry.to_string(), tag.to_string());
    tokio::task::spawn_blocking(move || {
        let repo = format!("http://{registry}/v2/kruise-rs/busybox");
        let curl = |args: &[&str], body: Option<&[u8]>| -> Vec<u8> {
            use std::io::Write;
            let mut child = std::process::Command::new("curl")
                .args(["-sSf"])
                .args(args)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("curl");
            child
                .stdin
                .take()
                .unwrap()
                .write_all(body.unwrap_or_default())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "curl {args:?}");
            out.stdout
        };
        let accept = "Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json";
        let manifest_url = format!("{repo}/manifests/1");
        let mut manifest: serde_json::Value =
            serde_json::from_slice(&curl(&["-H", accept, &manifest_url], None)).unwrap();
        let media_type = manifest["mediaType"].as_str().unwrap().to_string();
        let config_url = format!("{repo}/blobs/{}", manifest["config"]["digest"].as_str().unwrap());
        let mut config: serde_json::Value =
            serde_json::from_slice(&curl(&["-L", &config_url], None)).unwrap();
        config["config"]["Labels"]["e2e.kruise.io/tag"] = json!(tag);
        let config = serde_json::to_vec(&config).unwrap();
        let digest = {
            let out = std::process::Command::new("sha256sum")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .and_then(|mut c| {
                    use std::io::Write;
                    c.stdin.take().unwrap().write_all(&config)?;
                    c.wait_with_output()
                })
                .expect("sha256sum");
            format!("sha256:{}", String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap())
        };
        // A monolithic upload: POST for a location, PUT the bytes with their digest.
        let headers = String::from_utf8(curl(
            &["-X", "POST", "-D", "-", "-o", "/dev/null", &format!("{repo}/blobs/uploads/")],
            None,
        ))
        .unwrap();
        let location = headers
            .lines()
            .find_map(|l| l.strip_prefix("Location: ").or_else(|| l.strip_prefix("location: ")))
            .expect("upload location")
            .trim()
            .to_string();
        let location = if location.starts_with("http") {
            location
        } else {
            format!("http://{registry}{location}")
        };
        let sep = if location.contains('?') { '&' } else { '?' };
        curl(
            &[
                "-X",
                "PUT",
                "-H",
                "Content-Type: application/octet-stream",
                "--data-binary",
                "@-",
                &format!("{location}{sep}digest={digest}"),
            ],
            Some(&config),
        );
        manifest["config"]["digest"] = json!(digest);
        manifest["config"]["size"] = json!(config.len());
        curl(
            &[
                "-X",
                "PUT",
                "-H",
                &format!("Content-Type: {media_type}"),
                "--data-binary",
                "@-",
                &format!("{repo}/manifests/{tag}"),
            ],
            Some(&serde_json::to_vec(&manifest).unwrap()),
        );
    })
    .await
    .unwrap();
}

/// The namespaces a deployment has (kustomize/base): `kruise-daemon-config` holds the
/// pull secrets' copies the agent reads.
async fn apply_base_namespaces() {
    let path = kruise_e2e::repo_root().join("kustomize/base/namespace.yaml");
    let args = ["apply", "-f", &path.display().to_string()].map(String::from);
    let (ok, _, err) = kruise_e2e::kubectl_async(args.to_vec(), None).await;
    assert!(ok, "apply kustomize/base/namespace.yaml: {err}");
}

/// The real node's registry, its registry that wants a login, and its containerd socket
/// (node.sh's annotations), or `None` after saying why.
async fn real_node() -> Option<(String, String, String)> {
    let node = crate::realnode::real_node().await?;
    Some((node.registry, node.private_registry, node.containerd_socket))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn real_node_pulls_images_for_jobs() {
    let Some((registry, private_registry, socket)) = real_node().await else {
        return;
    };
    // This test runs its own controllers (the CloneSet one with the pre-download gate):
    // after `make deploy-local` two would act on the same objects.
    let deployed: Api<Pod> = Api::namespaced(kruise_e2e::client().await, "kruise-system");
    let selector = "app.kubernetes.io/component=controller,app.kubernetes.io/name in (cloneset-controller,imagepulljob-controller)";
    let list = deployed
        .list(&kube::api::ListParams::default().labels(selector))
        .await
        .expect("list kruise-system Pods");
    if !list.items.is_empty() {
        eprintln!(
            "skipped: controllers of `make deploy-local` are deployed; this test runs its own"
        );
        return;
    }
    let ns = TestNamespace::new("imagepull-real").await;
    apply_base_namespaces().await;
    let _ctl = start_controller(&ns).await;
    let config = AgentConfig {
        node_name: REAL_NODE.into(),
        socket: socket.clone().into(),
        max_concurrent_pulls: None,
    };
    let _agent = RunningController::start(daemon_agent::IDENTITY, &ns.name, "", move |rt| {
        daemon_agent::run_agent(rt, config)
    })
    .await;
    let node_images: Api<NodeImage> = Api::all(ns.client.clone());
    wait_for("NodeImage real-0", MINUTE, || async {
        node_images
            .get_opt(REAL_NODE)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "absent".to_string())
    })
    .await;

    // A tag the runtime has never seen.
    let tag = format!("prepull-{}", ns.name.rsplit('-').next().unwrap());
    push_tag(&registry, &tag).await;
    let name = format!("{registry}/kruise-rs/busybox");
    let image = format!("{name}:{tag}");
    let cri = Cri::connect(std::path::Path::new(&socket)).unwrap();
    assert_eq!(
        cri.find_image(&image).await.unwrap(),
        None,
        "not pulled yet"
    );

    ns.apply(&job_yaml(
        "job-with-always",
        &image,
        REAL_NODE,
        "  completionPolicy:\n    type: Always\n    activeDeadlineSeconds: 120\n    ttlSecondsAfterFinished: 8\n  pullPolicy:\n    backoffLimit: 3\n    timeoutSeconds: 60",
    ))
    .await
    .unwrap();
    let status = wait_job(&ns, "job-with-always", "succeeded 1", |s| {
        s.completion_time.is_some()
    })
    .await;
    assert_eq!(
        (
            status.desired,
            status.succeeded,
            status.failed,
            status.active
        ),
        (1, 1, 0, 0),
        "{status:?}"
    );
    assert_eq!(status.message, "job has completed");
    // In containerd now, with the ID the NodeImage reports.
    let pulled = cri
        .find_image(&image)
        .await
        .unwrap()
        .expect("pulled into containerd");
    let ni = node_images.get(REAL_NODE).await.unwrap();
    let pulled_status = tag_status(&ni, &name, &tag).expect("tag status");
    assert_eq!(pulled_status.phase, ImagePullPhase::Succeeded);
    assert_eq!(pulled_status.progress, 100);
    assert_eq!(pulled_status.image_id, format!("{name}@{}", pulled.id));
    assert!(pulled_status.completion_time.is_some());
    wait_events(&ns, "job-with-always", "the pull event", |events| {
        events
            .iter()
            .any(|e| e.reason == keys::EVENT_PULL_IMAGE_SUCCEED && e.note.contains(&image))
    })
    .await;

    // A Pod with that image starts without pulling it.
    ns.apply(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: warm
spec:
  nodeSelector:
    node.kruise.io/real: "true"
  tolerations:
  - key: node.kruise.io/real
    operator: Exists
    effect: NoSchedule
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: {image}
    imagePullPolicy: IfNotPresent
"#
    ))
    .await
    .unwrap();
    wait_for("warm Running", MINUTE, || async {
        let pod = ns
            .api::<Pod>()
            .get("warm")
            .await
            .map_err(|e| e.to_string())?;
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
        if phase.as_deref() == Some("Running") {
            Ok(())
        } else {
            Err(format!("{phase:?}"))
        }
    })
    .await;
    let events = wait_events(&ns, "warm", "the kubelet's Pulled event", |events| {
        events
            .iter()
            .any(|e| e.reason == "Pulled" && e.note.contains("already present on machine"))
    })
    .await;
    assert!(!events.iter().any(|e| e.reason == "Pulling"), "{events:?}");

    // A tag the registry does not have: Failed with the runtime's message.
    let missing = format!("{name}:missing-{tag}");
    ns.apply(&job_yaml(
        "missing",
        &missing,
        REAL_NODE,
        // activeDeadlineSeconds makes the tag's TTL 120 s + 0–300 s: without it, it would be
        // timeoutSeconds × backoffLimit = 0 + 0–300 s, and the tag status read below could
        // already be pruned.
        "  completionPolicy:\n    activeDeadlineSeconds: 120\n  pullPolicy:\n    backoffLimit: 0\n    timeoutSeconds: 30",
    ))
    .await
    .unwrap();
    let status = wait_job(&ns, "missing", "failed 1", |s| s.completion_time.is_some()).await;
    assert_eq!((status.succeeded, status.failed), (0, 1), "{status:?}");
    assert_eq!(status.failed_nodes, [REAL_NODE]);
    let ni = node_images.get(REAL_NODE).await.unwrap();
    let failed = tag_status(&ni, &name, &format!("missing-{tag}")).expect("tag status");
    assert_eq!(failed.phase, ImagePullPhase::Failed);
    assert!(failed.message.contains("not found"), "{}", failed.message);

    // ttlSecondsAfterFinished: 8 deletes the first job.
    wait_for("job-with-always deleted after its TTL", MINUTE, || async {
        match ns.api::<ImagePullJob>().get_opt("job-with-always").await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|j| j.map(|j| j.status)))),
        }
    })
    .await;

    private_image_needs_its_pull_secret(&ns, &private_registry, &cri).await;
    predownload_pulls_before_the_in_place_update(
        &ns,
        &registry,
        &cri,
        PreDownloadWorkload::CloneSet,
    )
    .await;
    predownload_pulls_before_the_in_place_update(
        &ns,
        &registry,
        &cri,
        PreDownloadWorkload::AdvancedStatefulSet,
    )
    .await;

    // The node's NodeImage, deleted, comes back.
    let uid = ni.uid();
    node_images
        .delete(REAL_NODE, &DeleteParams::default())
        .await
        .unwrap();
    wait_for("NodeImage real-0 recreated", MINUTE, || async {
        match node_images.get_opt(REAL_NODE).await {
            Ok(Some(n)) if n.uid() != uid => Ok(()),
            other => Err(format!("{:?}", other.map(|n| n.map(|n| n.uid())))),
        }
    })
    .await;
}

/// After `make deploy-local`: the agent runs from its image as the DaemonSet's Pod on the
/// real node (at the node's containerd socket), and imagepulljob-ctl from its image; a job
/// for a tag the node has never seen is pulled by that agent into containerd.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_node_deployed_agent_pulls_a_job() {
    let Some(node) = crate::realnode::real_node().await else {
        return;
    };
    if crate::realnode::deployed("imagepulljob-controller")
        .await
        .is_none()
    {
        return;
    }
    let agents: Api<Pod> = Api::namespaced(kruise_e2e::client().await, "kruise-daemon-config");
    let agent = wait_for("the agent's Pod Ready on real-0", 2 * MINUTE, || async {
        let list = agents
            .list(&kube::api::ListParams::default().labels("app.kubernetes.io/name=daemon-agent"))
            .await
            .map_err(|e| e.to_string())?;
        let on_node: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(REAL_NODE))
            .collect();
        match on_node.as_slice() {
            [pod] if kruise_e2e::is_ready(pod) => Ok(pod.clone()),
            other => Err(format!(
                "{} agent Pods on {REAL_NODE}, not one Ready",
                other.len()
            )),
        }
    })
    .await;
    let image = agent.spec.as_ref().unwrap().containers[0]
        .image
        .clone()
        .unwrap_or_default();
    assert!(
        image.starts_with(&format!("{}/kruise-rs/daemon-agent:", node.registry)),
        "{image}"
    );

    let ns = TestNamespace::new("imagepull-deployed").await;
    let tag = format!("deployed-{}", ns.name.rsplit('-').next().unwrap());
    push_tag(&node.registry, &tag).await;
    let name = format!("{}/kruise-rs/busybox", node.registry);
    let pulled = format!("{name}:{tag}");
    let cri = Cri::connect(std::path::Path::new(&node.containerd_socket)).unwrap();
    assert_eq!(
        cri.find_image(&pulled).await.unwrap(),
        None,
        "not pulled yet"
    );
    ns.apply(&job_yaml(
        "by-the-deployed-agent",
        &pulled,
        REAL_NODE,
        "  completionPolicy:\n    type: Always\n    activeDeadlineSeconds: 120\n  pullPolicy:\n    backoffLimit: 3\n    timeoutSeconds: 60",
    ))
    .await
    .unwrap();
    let status = wait_job(&ns, "by-the-deployed-agent", "succeeded 1", |s| {
        s.completion_time.is_some()
    })
    .await;
    assert_eq!((status.succeeded, status.failed), (1, 0), "{status:?}");
    let in_runtime = cri
        .find_image(&pulled)
        .await
        .unwrap()
        .expect("pulled into containerd");
    let ni = Api::<NodeImage>::all(ns.client.clone())
        .get(REAL_NODE)
        .await
        .unwrap();
    let tag_status = tag_status(&ni, &name, &tag).expect("tag status");
    assert_eq!(tag_status.phase, ImagePullPhase::Succeeded);
    assert_eq!(tag_status.image_id, format!("{name}@{}", in_runtime.id));
    // The same agent Pod did it: not restarted meanwhile.
    let after = agents.get(&agent.name_any()).await.unwrap();
    let restarts = after
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|c| c.first().map(|c| c.restart_count));
    assert_eq!(restarts, Some(0));
}

/// The node's second registry wants a login: a job without a pull secret fails with the
/// registry's refusal; with the Secret a user makes (`kubectl create secret
/// docker-registry`), copied for the agent, the image is pulled.
async fn private_image_needs_its_pull_secret(ns: &TestNamespace, registry: &str, cri: &Cri) {
    let name = format!("{registry}/kruise-rs/private");
    let image = format!("{name}:1");
    // Always: the runtime may hold the image from an earlier run, and IfNotPresent would
    // then succeed without asking the registry.
    let always =
        "  imagePullPolicy: Always\n  pullPolicy:\n    backoffLimit: 0\n    timeoutSeconds: 30";
    ns.apply(&job_yaml("private-anonymous", &image, REAL_NODE, always))
        .await
        .unwrap();
    let status = wait_job(ns, "private-anonymous", "failed 1", |s| {
        s.completion_time.is_some()
    })
    .await;
    assert_eq!((status.succeeded, status.failed), (0, 1), "{status:?}");
    assert_eq!(status.failed_nodes, [REAL_NODE]);
    let node_images: Api<NodeImage> = Api::all(ns.client.clone());
    let ni = node_images.get(REAL_NODE).await.unwrap();
    let refused = tag_status(&ni, &name, "1").expect("tag status");
    assert_eq!(refused.phase, ImagePullPhase::Failed);
    assert!(
        refused.message.to_lowercase().contains("unauthorized"),
        "{}",
        refused.message
    );

    let (user, password) = PRIVATE_REGISTRY_LOGIN;
    let (ok, _, err) = kruise_e2e::kubectl(
        &[
            "-n",
            &ns.name,
            "create",
            "secret",
            "docker-registry",
            "private-login",
            &format!("--docker-server={registry}"),
            &format!("--docker-username={user}"),
            &format!("--docker-password={password}"),
        ],
        None,
    );
    assert!(ok, "{err}");
    let with_secret = format!("{always}\n  pullSecrets: [private-login]");
    ns.apply(&job_yaml("private-login", &image, REAL_NODE, &with_secret))
        .await
        .unwrap();
    let status = wait_job(ns, "private-login", "succeeded 1", |s| {
        s.completion_time.is_some()
    })
    .await;
    assert_eq!((status.succeeded, status.failed), (1, 0), "{status:?}");
    let pulled = cri
        .find_image(&image)
        .await
        .unwrap()
        .expect("pulled into containerd with the login");
    let ni = node_images.get(REAL_NODE).await.unwrap();
    let tag = tag_status(&ni, &name, "1").expect("tag status");
    assert_eq!(tag.phase, ImagePullPhase::Succeeded);
    assert_eq!(tag.image_id, format!("{name}@{}", pulled.id));
}

/// CloneSet pre-download (gate PreDownloadImageForInPlaceUpdate) on the real node: the
/// CloneSet controller creates the ImagePullJob for its Pods' node, the agent pulls the new
/// image, and the in-place update that follows finds it present.
/// The two workloads that pre-download the images of an in-place update
/// (`PreDownloadImageForInPlaceUpdate`): both run the same scenario on the real node.
#[derive(Clone, Copy, Debug)]
enum PreDownloadWorkload {
    CloneSet,
    AdvancedStatefulSet,
}

impl PreDownloadWorkload {
    /// Its controller, in this process, with the gate on.
    async fn start(self, ns: &TestNamespace) -> RunningController {
        let gate = "PreDownloadImageForInPlaceUpdate=true";
        match self {
            Self::CloneSet => {
                RunningController::start(cloneset_ctl::IDENTITY, &ns.name, gate, cloneset_ctl::run)
                    .await
            }
            Self::AdvancedStatefulSet => {
                RunningController::start(
                    statefulset_ctl::IDENTITY,
                    &ns.name,
                    gate,
                    statefulset_ctl::run,
                )
                .await
            }
        }
    }

    /// `web` (4 Pods `app=web` on the real node, updated in place) with `image`, the
    /// update held at `partition` Pods.
    fn yaml(self, image: &str, partition: i32) -> String {
        let pod = format!(
            r#"    metadata:
      labels:
        app: web
    spec:
      nodeSelector:
        node.kruise.io/real: "true"
      tolerations:
      - key: node.kruise.io/real
        operator: Exists
        effect: NoSchedule
      terminationGracePeriodSeconds: 2
      readinessGates:
      - conditionType: InPlaceUpdateReady
      containers:
      - name: main
        image: {image}"#
        );
        match self {
            Self::CloneSet => format!(
                r#"
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: web
spec:
  replicas: 4
  selector:
    matchLabels:
      app: web
  template:
{pod}
  updateStrategy:
    type: InPlaceIfPossible
    partition: {partition}
"#
            ),
            // Parallel: the four Pods start together, as the CloneSet's do.
            Self::AdvancedStatefulSet => format!(
                r#"
apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata:
  name: web
spec:
  serviceName: web
  replicas: 4
  podManagementPolicy: Parallel
  selector:
    matchLabels:
      app: web
  template:
{pod}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      podUpdatePolicy: InPlaceIfPossible
      maxUnavailable: 1
      partition: {partition}
"#
            ),
        }
    }

    /// Waits until the workload's webhook answers (its defaults show up on a dry run).
    async fn wait_webhook(self, ns: &TestNamespace, yaml: &str) {
        match self {
            Self::CloneSet => {
                let api: Api<kruise_api::apps_v1alpha1::CloneSet> = ns.api();
                let probe = serde_saphyr::from_str(yaml).unwrap();
                kruise_e2e::wait_webhook_effective(
                    &api,
                    &probe,
                    |cs: &kruise_api::apps_v1alpha1::CloneSet| {
                        cs.spec.revision_history_limit.is_some()
                    },
                )
                .await;
            }
            Self::AdvancedStatefulSet => {
                let api: Api<kruise_api::apps_v1beta1::StatefulSet> = ns.api();
                let probe = serde_saphyr::from_str(yaml).unwrap();
                kruise_e2e::wait_webhook_effective(
                    &api,
                    &probe,
                    |sts: &kruise_api::apps_v1beta1::StatefulSet| {
                        sts.spec.revision_history_limit.is_some()
                    },
                )
                .await;
            }
        }
    }

    /// Deletes `web` (its Pods go with it, in the background).
    async fn delete(self, ns: &TestNamespace) {
        let params = DeleteParams::background();
        match self {
            Self::CloneSet => ns
                .api::<kruise_api::apps_v1alpha1::CloneSet>()
                .delete("web", &params)
                .await
                .map(|_| ()),
            Self::AdvancedStatefulSet => ns
                .api::<kruise_api::apps_v1beta1::StatefulSet>()
                .delete("web", &params)
                .await
                .map(|_| ()),
        }
        .expect("delete web");
    }

    /// The kind the pre-download jobs name as their owner.
    fn kind(self) -> &'static str {
        match self {
            Self::CloneSet => "CloneSet",
            Self::AdvancedStatefulSet => "StatefulSet",
        }
    }
}

/// With the gate on, an in-place rollout held by its partition pre-downloads the new
/// image onto the nodes of the workload's Pods (an ImagePullJob owned by the workload,
/// pulled into containerd by the agent); the update then finds it on the node ("already
/// present on machine").
async fn predownload_pulls_before_the_in_place_update(
    ns: &TestNamespace,
    registry: &str,
    cri: &Cri,
    workload: PreDownloadWorkload,
) {
    let _controller = workload.start(ns).await;
    let tag = format!(
        "pre-{}-{}",
        workload.kind().to_lowercase(),
        ns.name.rsplit('-').next().unwrap()
    );
    push_tag(registry, &tag).await;
    let old = format!("{registry}/kruise-rs/busybox:1");
    let new = format!("{registry}/kruise-rs/busybox:{tag}");
    workload.wait_webhook(ns, &workload.yaml(&old, 4)).await;
    ns.apply(&workload.yaml(&old, 4)).await.unwrap();
    let pods = || async {
        kruise_e2e::pods_with(ns, "app=web")
            .await
            .into_iter()
            .filter(kruise_e2e::is_ready)
            .count()
    };
    wait_for(
        "4 Pods of web Ready on the real node",
        2 * MINUTE,
        || async {
            match pods().await {
                4 => Ok(()),
                n => Err(format!("{n} ready")),
            }
        },
    )
    .await;
    assert_eq!(cri.find_image(&new).await.unwrap(), None, "not pulled yet");
    // The new image with partition 4: no Pod is updated, the image is pre-downloaded.
    ns.apply(&workload.yaml(&new, 4)).await.unwrap();
    let job = wait_for(
        "the pre-download ImagePullJob succeeded",
        2 * MINUTE,
        || async {
            let jobs = ns
                .api::<ImagePullJob>()
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            let job = jobs
                .items
                .into_iter()
                .find(|j| j.spec.image == new)
                .ok_or("no job for the new image")?;
            match &job.status {
                Some(s) if s.succeeded == 1 => Ok(job),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert_eq!(job.owner_references()[0].kind, workload.kind());
    assert_eq!(job.owner_references()[0].name, "web");
    assert!(job.spec.template.pod_selector.is_some());
    assert!(
        cri.find_image(&new).await.unwrap().is_some(),
        "pre-downloaded into containerd"
    );
    // No Pod was touched by the pre-download.
    for pod in kruise_e2e::pods_with(ns, "app=web").await {
        let status = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref());
        let main = status.and_then(|c| c.first()).expect("a container status");
        assert_eq!((main.image.as_str(), main.restart_count), (old.as_str(), 0));
    }
    // The in-place update then finds the image on the node.
    ns.apply(&workload.yaml(&new, 0)).await.unwrap();
    wait_for("web's Pods updated in place", 2 * MINUTE, || async {
        let pods = kruise_e2e::pods_with(ns, "app=web").await;
        let updated = pods
            .iter()
            .filter(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .and_then(|c| c.first())
                    .is_some_and(|c| c.image == new && c.restart_count == 1 && c.ready)
            })
            .count();
        if updated == 4 {
            Ok(())
        } else {
            Err(format!("{updated} of {} updated", pods.len()))
        }
    })
    .await;
    for pod in kruise_e2e::pods_with(ns, "app=web").await {
        let events = events_in(ns, &pod.name_any()).await;
        assert!(
            events.iter().any(|e| e.reason == "Pulled"
                && e.note.contains(&new)
                && e.note.contains("already present on machine")),
            "{}: {events:?}",
            pod.name_any()
        );
    }
    // Gone before the next workload named web.
    workload.delete(ns).await;
    wait_for("web's Pods gone", 2 * MINUTE, || async {
        match kruise_e2e::pods_with(ns, "app=web").await.len() {
            0 => Ok(()),
            n => Err(format!("{n} Pods left")),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_rejects_bad_jobs_naming_the_field() {
    let ns = TestNamespace::new("imagepull-admission").await;
    let _ctl = start_controller(&ns).await;
    let err = ns
        .apply(&job_yaml(
            "both",
            "nginx:1.9.1",
            "node-1",
            "    matchLabels:\n      node-type: xxx",
        ))
        .await
        .unwrap_err();
    assert!(
        err.contains("spec.selector") && err.contains("can not set both names and labelSelector"),
        "{err}"
    );
    let err = ns
        .apply(&job_yaml(
            "deadline",
            "nginx:1.9.1",
            "node-1",
            "  completionPolicy:\n    activeDeadlineSeconds: 200\n  pullPolicy:\n    timeoutSeconds: 300",
        ))
        .await
        .unwrap_err();
    assert!(
        err.contains(
            "completionPolicy.activeDeadlineSeconds must be greater than pullPolicy.timeoutSeconds"
        ),
        "{err}"
    );
    ns.apply(&job_yaml(
        "ok",
        "nginx:1.9.1",
        "node-1",
        "  pullSecrets: [a]",
    ))
    .await
    .unwrap();
    let err = ns
        .apply(&job_yaml(
            "ok",
            "nginx:1.9.1",
            "node-1",
            "  pullSecrets: [b]",
        ))
        .await
        .unwrap_err();
    assert!(err.contains("spec.pullSecrets is immutable"), "{err}");
}

/// A NodeImage of no node, labelled fake so the controller keeps it: the test's own
/// "node" for jobs that must not touch the shared kwok nodes' NodeImages.
pub(crate) async fn fake_node_image(ns: &TestNamespace, name: &str) -> Api<NodeImage> {
    let api: Api<NodeImage> = Api::all(ns.client.clone());
    let ni: NodeImage = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "NodeImage",
        "metadata": {"name": name, "labels": {keys::FAKE_NODEIMAGE: "true", "e2e.kruise.io/owner": ns.name}},
        "spec": {}
    }))
    .unwrap();
    api.create(&PostParams::default(), &ni).await.unwrap();
    api
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_images_follow_nodes_and_jobs_without_agent_time_out() {
    let ns = TestNamespace::new("imagepull-kwok").await;
    let _ctl = start_controller(&ns).await;
    let all: Api<NodeImage> = Api::all(ns.client.clone());
    // Every shared kwok node has its NodeImage, labelled like the node.
    wait_for("NodeImages of the kwok nodes", MINUTE, || async {
        let nodes: Api<Node> = Api::all(ns.client.clone());
        let kwok = nodes
            .list(&kube::api::ListParams::default().labels("type=kwok"))
            .await
            .map_err(|e| e.to_string())?;
        for node in kwok {
            let ni = all
                .get_opt(&node.name_any())
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("no NodeImage {}", node.name_any()))?;
            if ni.labels() != node.labels() {
                return Err(format!("labels of {}: {:?}", node.name_any(), ni.labels()));
            }
        }
        Ok(())
    })
    .await;
    // A NodeImage of no node goes; a fake one stays.
    let fake = format!("{}-fake", ns.name);
    fake_node_image(&ns, &fake).await;
    let ghost = format!("{}-ghost", ns.name);
    let ni: NodeImage = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "NodeImage",
        "metadata": {"name": ghost}, "spec": {}
    }))
    .unwrap();
    all.create(&PostParams::default(), &ni).await.unwrap();
    wait_for("the NodeImage of no node deleted", MINUTE, || async {
        match all.get_opt(&ghost).await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|n| n.is_some()))),
        }
    })
    .await;

    // No agent serves the fake node: the job stays active until its deadline.
    ns.apply(&job_yaml(
        "no-agent",
        "nginx:1.9.1",
        &fake,
        "  completionPolicy:\n    activeDeadlineSeconds: 4\n  pullPolicy:\n    timeoutSeconds: 2",
    ))
    .await
    .unwrap();
    let active = wait_job(&ns, "no-agent", "active 1", |s| s.active == 1).await;
    assert_eq!(active.desired, 1);
    assert_eq!(active.message, "job is running, progress 0.0%");
    let ni = all.get(&fake).await.unwrap();
    let tag = &ni.spec.images["nginx"].tags[0];
    assert_eq!(tag.tag, "1.9.1");
    assert_eq!(tag.owner_references[0].name.as_deref(), Some("no-agent"));
    assert_eq!(
        tag.pull_policy.as_ref().unwrap().active_deadline_seconds,
        Some(4)
    );
    let failed = wait_job(&ns, "no-agent", "failed by its deadline", |s| {
        s.completion_time.is_some()
    })
    .await;
    assert_eq!((failed.failed, failed.active), (1, 0));
    assert_eq!(failed.message, "job exceeds activeDeadlineSeconds");
    assert_eq!(failed.failed_nodes, std::slice::from_ref(&fake));
    // Gone with its job, the tag is pruned from the NodeImage (the fake one is kept).
    ns.api::<ImagePullJob>()
        .delete("no-agent", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the job's tag pruned", MINUTE, || async {
        let ni = all.get(&fake).await.map_err(|e| e.to_string())?;
        if ni.spec.images.is_empty() {
            Ok(())
        } else {
            Err(format!("{:?}", ni.spec))
        }
    })
    .await;
    all.delete(&fake, &DeleteParams::default()).await.unwrap();
}

/// A never-completing job keeps its pull secret's copy in the config namespace; when the
/// user rotates the source Secret, the copy follows (the node agent pulls with the new
/// login), and it goes with the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_pull_secret_reaches_its_copy() {
    let ns = TestNamespace::new("imagepull-rotate").await;
    apply_base_namespaces().await;
    let _ctl = start_controller(&ns).await;
    let fake = format!("{}-fake", ns.name);
    let node_images = fake_node_image(&ns, &fake).await;
    let login = |password: &str| {
        let config = format!(
            r#"{{"auths":{{"registry.example":{{"username":"u","password":"{password}"}}}}}}"#
        );
        std::collections::BTreeMap::from([(
            ".dockerconfigjson".to_string(),
            k8s_openapi::ByteString(config.into_bytes()),
        )])
    };
    let sources: Api<Secret> = ns.api();
    let source = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("login".into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(login("first")),
        ..Default::default()
    };
    sources
        .create(&PostParams::default(), &source)
        .await
        .unwrap();
    ns.apply(&job_yaml(
        "keep-warm",
        "nginx:1.9.1",
        &fake,
        "  completionPolicy:\n    type: Never\n  pullSecrets: [login]",
    ))
    .await
    .unwrap();
    let copies: Api<Secret> =
        Api::namespaced(ns.client.clone(), keys::KRUISE_DAEMON_CONFIG_NAMESPACE);
    let copy_name = format!("{}.login", ns.name);
    let reference = format!("{}/keep-warm", ns.name);
    let (first, second) = (login("first"), login("second"));
    wait_for("the copy of the first login", MINUTE, || {
        copy_holds(&copies, &copy_name, &first, &reference)
    })
    .await;
    let active = job_status(&ns, "keep-warm").await;
    assert_eq!(
        (active.active, active.completion_time.is_none()),
        (1, true),
        "{active:?}"
    );

    sources
        .patch(
            "login",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": second})),
        )
        .await
        .unwrap();
    // Nothing else changes for the job: only the Secret's change can bring it here.
    wait_for(
        "the copy of the rotated login",
        Duration::from_secs(15),
        || copy_holds(&copies, &copy_name, &second, &reference),
    )
    .await;

    ns.api::<ImagePullJob>()
        .delete("keep-warm", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the copy released with its job", MINUTE, || async {
        match copies.get_opt(&copy_name).await {
            Ok(None) => Ok(()),
            other => Err(format!(
                "{:?}",
                other.map(|c| c.map(|c| c.annotations().clone()))
            )),
        }
    })
    .await;
    node_images
        .delete(&fake, &DeleteParams::default())
        .await
        .unwrap();
}

/// Whether the copy `name` holds `data` and lists `reference` among its jobs.
async fn copy_holds(
    copies: &Api<Secret>,
    name: &str,
    data: &std::collections::BTreeMap<String, k8s_openapi::ByteString>,
    reference: &str,
) -> Result<(), String> {
    let copy = copies
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no copy")?;
    let references = copy
        .annotations()
        .get(keys::IMAGEPULLJOB_REFERENCES)
        .cloned()
        .unwrap_or_default();
    if copy.data.as_ref() == Some(data) && references.split(',').any(|r| r == reference) {
        Ok(())
    } else {
        Err(format!("{:?} {references}", copy.data))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_list_pull_job_aggregates_its_children() {
    let ns = TestNamespace::new("imagepull-list").await;
    let _ctl = start_controller(&ns).await;
    let fake = format!("{}-fake", ns.name);
    let node_images = fake_node_image(&ns, &fake).await;
    ns.apply(&format!(
        r#"
apiVersion: apps.kruise.io/v1alpha1
kind: ImageListPullJob
metadata:
  name: warm-up
spec:
  images: [nginx:1.9.1, busybox:1.36]
  parallelism: 2
  selector:
    names: [{fake}]
  completionPolicy:
    type: Always
"#
    ))
    .await
    .unwrap();
    let children = wait_for("two child ImagePullJobs", MINUTE, || async {
        let list = ns
            .api::<ImagePullJob>()
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        if list.items.len() == 2 {
            Ok(list.items)
        } else {
            Err(format!("{}", list.items.len()))
        }
    })
    .await;
    for child in &children {
        assert!(child.name_any().starts_with("warm-up-"));
        assert_eq!(child.owner_references()[0].name, "warm-up");
    }
    // Both tags written into the node; the test answers as the agent would: nginx
    // Succeeded, busybox Failed.
    let ni = wait_for("both tags on the NodeImage", MINUTE, || async {
        let ni = node_images.get(&fake).await.map_err(|e| e.to_string())?;
        if ni.spec.images.len() == 2 {
            Ok(ni)
        } else {
            Err(format!("{:?}", ni.spec))
        }
    })
    .await;
    let mut status =
        json!({"desired": 2, "succeeded": 1, "failed": 1, "pulling": 0, "imageStatuses": {}});
    for (name, image) in &ni.spec.images {
        let tag = &image.tags[0];
        let phase = if name == "nginx" {
            "Succeeded"
        } else {
            "Failed"
        };
        status["imageStatuses"][name] = json!({"tags": [{
            "tag": tag.tag, "phase": phase, "version": tag.version,
            // Now: a completion in the past beyond the tag's TTL gets the tag pruned.
            "completionTime": jiff::Timestamp::now().to_string(),
        }]});
    }
    node_images
        .patch_status(
            &fake,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .unwrap();
    let lists: Api<ImageListPullJob> = ns.api();
    let done = wait_for("warm-up completed", MINUTE, || async {
        let l = lists.get("warm-up").await.map_err(|e| e.to_string())?;
        match l.status {
            Some(s) if s.completion_time.is_some() => Ok(s),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert_eq!((done.desired, done.completed, done.succeeded), (2, 2, 1));
    assert_eq!(done.failed_image_statuses.len(), 1);
    assert_eq!(done.failed_image_statuses[0].name, "busybox:1.36");
    assert!(
        done.failed_image_statuses[0]
            .message
            .starts_with("Please check for details")
    );
    node_images
        .delete(&fake, &DeleteParams::default())
        .await
        .unwrap();
}
