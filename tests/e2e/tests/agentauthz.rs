//! The node agent's ServiceAccount as the apiserver sees it: a token bound to an agent Pod
//! on a kwok node names that node (userInfo.extra `authentication.kubernetes.io/node-name`),
//! and with it the agent
//!
//! - reads only its own node's NodeImage, ContainerRecreateRequests and Pods: the
//!   apiserver's authorization chain (tests/cluster/cluster.sh: Node, RBAC, then
//!   imagepulljob-ctl's authorizer for the agent's reads) allows a list or watch whose
//!   selector pins its node and a get of its node's objects, and refuses the rest
//!   (docs/imagepulljob.md "Node-scoped reads for the node agent");
//! - writes the status of its own node's NodeImage only (own-nodeimage-policy.yaml; the
//!   requests' own-crr-policy.yaml is tested in crr.rs, where crr-ctl stamps them);
//! - annotates its own node's Pods only, through `pods/status`, and never changes a Pod's
//!   status (own-pod-status-policy.yaml).
//!
//! The authorizer is the local cluster's: `make up`'s imagepulljob-ctl when it runs, else
//! imagepulljob-ctl started here on the port the apiserver calls, with the certificate
//! cluster.sh issued for it.

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Node, Pod, ServiceAccount};
use kruise_api::apps_v1alpha1::{ContainerRecreateRequest, NodeImage};
use kruise_api::keys;
use kruise_e2e::{RunningController, TestNamespace, kubectl_async, wait_for};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);
/// Where the agent's ServiceAccount lives (kustomize/base/namespace.yaml).
pub(crate) const AGENT_NS: &str = "kruise-daemon-config";
const AGENT_SA: &str = "daemon-agent";
const AGENT_USER: &str = "system:serviceaccount:kruise-daemon-config:daemon-agent";

/// Applies the namespaces of a deployment and the agent's ServiceAccount, RBAC and
/// admission policies, as kustomize ships them.
pub(crate) async fn apply_agent_identity() {
    let dir = kruise_e2e::repo_root().join("kustomize");
    for file in [
        "base/namespace.yaml",
        "controllers/daemon-agent/serviceaccount.yaml",
        "controllers/daemon-agent/rbac.yaml",
        "controllers/daemon-agent/own-nodeimage-policy.yaml",
        "controllers/daemon-agent/own-crr-policy.yaml",
        "controllers/daemon-agent/own-pod-status-policy.yaml",
    ] {
        let path = dir.join(file).display().to_string();
        // Tests applying the same objects at once: kubectl's create of an object another
        // test created between its read and its write fails AlreadyExists; once more,
        // it finds it and patches.
        let mut last = String::new();
        for _ in 0..3 {
            let (ok, _, err) =
                kubectl_async(["apply", "-f", &path].map(String::from).to_vec(), None).await;
            if ok {
                last.clear();
                break;
            }
            if !err.contains("AlreadyExists") {
                panic!("apply {file}: {err}");
            }
            last = err;
        }
        assert!(last.is_empty(), "apply {file}: {last}");
    }
}

/// A Pod of the agent's ServiceAccount on a kwok node (it runs nothing there), and tokens
/// of that ServiceAccount bound to it, as the kubelet gives the agent.
pub(crate) struct AgentPod {
    pub name: String,
    pub node: String,
    client: kube::Client,
}

impl AgentPod {
    /// On `node`, or on a shared kwok node the scheduler picks.
    pub async fn create(ns: &TestNamespace, node: Option<&str>) -> Self {
        let name = format!("{}-agent", ns.name);
        let pods: Api<Pod> = Api::namespaced(ns.client.clone(), AGENT_NS);
        // Without a node: one of the cluster's own kwok nodes, by the scheduler, which
        // keeps off the nodes other tests add for themselves (tainted
        // `e2e.kruise.io/owner`, so no blanket toleration here).
        let placement = match node {
            Some(node) => {
                json!({"nodeName": node, "tolerations": [{"operator": "Exists"}]})
            }
            None => json!({"nodeSelector": {"type": "kwok"}}),
        };
        let mut spec = json!({
            "serviceAccountName": AGENT_SA,
            "containers": [{"name": "agent", "image": "kruise-rs/daemon-agent:0.1.0"}]
        });
        spec.as_object_mut()
            .unwrap()
            .extend(placement.as_object().unwrap().clone());
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let node = wait_for("the agent Pod scheduled", MINUTE, || async {
            let p = pods.get(&name).await.map_err(|e| e.to_string())?;
            p.spec
                .and_then(|s| s.node_name)
                .ok_or_else(|| "not scheduled".to_string())
        })
        .await;
        AgentPod {
            name,
            node,
            client: ns.client.clone(),
        }
    }

    /// A token of the agent's ServiceAccount, bound to this Pod or not.
    pub async fn token(&self, bound: bool) -> String {
        let sas: Api<ServiceAccount> = Api::namespaced(self.client.clone(), AGENT_NS);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec![],
                expiration_seconds: Some(600),
                bound_object_ref: bound.then(|| BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(self.name.clone()),
                    ..Default::default()
                }),
            },
            ..Default::default()
        };
        let created: TokenRequest = sas
            .create_subresource("token", AGENT_SA, &PostParams::default(), &request)
            .await
            .expect("token request");
        created.status.expect("token").token
    }

    /// A client holding only a token of the agent's ServiceAccount.
    pub async fn client(&self, bound: bool) -> kube::Client {
        let mut config = kruise_e2e::kube_config().await;
        config.auth_info = kube::config::AuthInfo {
            token: Some(self.token(bound).await.into()),
            ..Default::default()
        };
        kube::Client::try_from(config).unwrap()
    }

    pub async fn delete(self) {
        let pods: Api<Pod> = Api::namespaced(self.client, AGENT_NS);
        let _ = pods.delete(&self.name, &DeleteParams::default()).await;
    }
}

/// A shared kwok node other than `node`.
pub(crate) async fn other_kwok_node(client: &kube::Client, node: &str) -> String {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes
        .list(&ListParams::default().labels("type=kwok"))
        .await
        .unwrap();
    list.items
        .iter()
        .map(|n| n.name_any())
        .find(|n| n != node)
        .expect("a second kwok node")
}

/// The local cluster's state directory (the kubeconfig's).
fn state_dir() -> std::path::PathBuf {
    kruise_e2e::kubeconfig_path()
        .parent()
        .expect("kubeconfig in a directory")
        .to_path_buf()
}

/// Where the apiserver calls the agent's authorizer (cluster.sh's webhook kubeconfig).
fn authorizer_addr() -> SocketAddr {
    let path = state_dir().join("authz/daemon-agent-webhook.kubeconfig");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; this cluster was started without the agent's authorizer \
             (make down, then make up)",
            path.display()
        )
    });
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://"))
        .expect("a server URL");
    let host_port = server.split('/').next().unwrap();
    host_port.parse().expect("host:port")
}

/// Serves the agent's authorizer where the apiserver calls it, unless something (`make
/// up`'s imagepulljob-ctl) already does.
async fn serve_authorizer(ns: &TestNamespace) -> Option<RunningController> {
    let addr = authorizer_addr();
    if tokio::net::TcpStream::connect(addr).await.is_ok() {
        eprintln!(
            "the agent's authorizer is served on {addr} already (make up's imagepulljob-ctl)"
        );
        return None;
    }
    let mut settings = RunningController::settings(&ns.name, "");
    settings.webhook_addr = addr;
    settings.webhook_url = Some(format!("https://{addr}"));
    settings.webhook_cert_dir = Some(
        state_dir()
            .join("pki/webhook-imagepulljob-ctl")
            .display()
            .to_string(),
    );
    Some(
        RunningController::start_with(imagepulljob_ctl::IDENTITY, settings, imagepulljob_ctl::run)
            .await,
    )
}

/// `Ok` or the HTTP code and message of the refusal.
fn outcome<T>(result: Result<T, kube::Error>) -> Result<(), (u16, String)> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) => Err((e.code, e.message)),
        Err(e) => Err((0, e.to_string())),
    }
}

fn forbidden(what: &str, result: Result<(), (u16, String)>) -> String {
    match result {
        Err((403, message)) => message,
        other => panic!("{what}: expected 403, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_reads_only_its_own_nodes_objects() {
    let ns = TestNamespace::new("agent-reads").await;
    apply_agent_identity().await;
    let _authorizer = serve_authorizer(&ns).await;
    // Without a node (a token not bound to a Pod, or `--as` the ServiceAccount), RBAC
    // grants no reads and the authorizer refuses: `kubectl auth can-i` says no, and why.
    let can_i = || async {
        let args = [
            "auth",
            "can-i",
            "list",
            "nodeimages.apps.kruise.io",
            "--as",
            AGENT_USER,
        ];
        let (_, out, err) = kubectl_async(args.map(String::from).to_vec(), None).await;
        (out.trim().to_string(), err)
    };
    if can_i().await.0.starts_with("yes") {
        eprintln!(
            "skipped: RBAC grants the agent cluster-wide reads here \
             (kustomize/components/daemon-agent-cluster-reads applied, e.g. by make deploy-local)"
        );
        return;
    }
    // (The apiserver may take a moment to reach a webhook just started.)
    wait_for(
        "kubectl auth can-i: no, from the authorizer",
        MINUTE,
        || async {
            match can_i().await {
                (out, _) if out.starts_with("no") && out.contains("bound to its Pod") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let agent = AgentPod::create(&ns, None).await;
    let node = agent.node.clone();
    let other = other_kwok_node(&ns.client, &node).await;
    let client = agent.client(true).await;

    // Pods of the test on the agent's node and on another (bound directly: kwok runs them).
    let pods: Api<Pod> = ns.api();
    for (name, on) in [("on-mine", &node), ("on-other", &other)] {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": on, "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "c", "image": "busybox:1"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }

    let node_images: Api<NodeImage> = Api::all(client.clone());
    let by_name = |n: &str| ListParams::default().fields(&format!("metadata.name={n}"));
    // Allowed: the authorizer answers (it may take the apiserver a moment to reach it).
    wait_for("its own NodeImage listed", MINUTE, || async {
        outcome(node_images.list(&by_name(&node)).await).map_err(|e| format!("{e:?}"))
    })
    .await;
    let message = forbidden(
        "all NodeImages",
        outcome(node_images.list(&ListParams::default()).await),
    );
    assert!(
        message.contains(&format!("the node agent of {node} may list only")),
        "{message}"
    );
    forbidden(
        "another node's NodeImage",
        outcome(node_images.list(&by_name(&other)).await),
    );
    outcome(node_images.get_opt(&node).await).expect("get its own NodeImage");
    forbidden(
        "get another node's NodeImage",
        outcome(node_images.get_opt(&other).await),
    );

    // Requests: by the node label, in the test's namespace and cluster-wide.
    let label = |n: &str| {
        ListParams::default().labels(&format!(
            "{}={n},{}=true",
            keys::CRR_NODE_NAME,
            keys::CRR_ACTIVE
        ))
    };
    for requests in [
        Api::<ContainerRecreateRequest>::all(client.clone()),
        Api::<ContainerRecreateRequest>::namespaced(client.clone(), &ns.name),
    ] {
        outcome(requests.list(&label(&node)).await).expect("its node's requests");
        forbidden(
            "every request",
            outcome(requests.list(&ListParams::default()).await),
        );
        forbidden(
            "another node's requests",
            outcome(requests.list(&label(&other)).await),
        );
    }

    // Pods: its node's by field selector; one by one only those on its node.
    let all_pods: Api<Pod> = Api::all(client.clone());
    let on = |n: &str| ListParams::default().fields(&format!("spec.nodeName={n}"));
    let mine = all_pods.list(&on(&node)).await.expect("its node's Pods");
    assert!(
        mine.items.iter().any(|p| p.name_any() == "on-mine"),
        "{:?}",
        mine.items.iter().map(|p| p.name_any()).collect::<Vec<_>>()
    );
    forbidden(
        "every Pod",
        outcome(all_pods.list(&ListParams::default()).await),
    );
    forbidden(
        "another node's Pods",
        outcome(all_pods.list(&on(&other)).await),
    );
    let agent_pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    // The authorizer looks the Pod up in imagepulljob-ctl's cache: allowed once it is there.
    wait_for("get of a Pod on its node", MINUTE, || async {
        outcome(agent_pods.get("on-mine").await).map_err(|e| format!("{e:?}"))
    })
    .await;
    forbidden(
        "get of a Pod on another node",
        outcome(agent_pods.get("on-other").await),
    );

    // The same token, unbound: no node, no reads.
    let unbound = agent.client(false).await;
    let message = forbidden(
        "unbound token",
        outcome(Api::<NodeImage>::all(unbound).list(&by_name(&node)).await),
    );
    assert!(message.contains("bound to its Pod"), "{message}");
    agent.delete().await;
}

/// The agent's ServiceAccount may write the status of its own node's NodeImage only: its
/// Pod-bound token names the node, and the ValidatingAdmissionPolicy shipped with the
/// DaemonSet denies the others (RBAC alone cannot).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_writes_only_its_own_node_image() {
    let ns = TestNamespace::new("agent-writes-ni").await;
    apply_agent_identity().await;
    // NodeImages of the kwok nodes, made by imagepulljob-ctl.
    let _ctl = RunningController::start(
        imagepulljob_ctl::IDENTITY,
        &ns.name,
        "",
        imagepulljob_ctl::run,
    )
    .await;
    let agent = AgentPod::create(&ns, None).await;
    let node = agent.node.clone();
    let all: Api<NodeImage> = Api::all(ns.client.clone());
    let other = wait_for("NodeImages of two kwok nodes", MINUTE, || async {
        let list = all
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let names: Vec<String> = list.items.iter().map(|n| n.name_any()).collect();
        if !names.contains(&node) {
            return Err(format!("no NodeImage {node}: {names:?}"));
        }
        names
            .into_iter()
            .find(|n| n != &node && n.starts_with("kwok-node-"))
            .ok_or_else(|| "no other kwok NodeImage".to_string())
    })
    .await;
    let write = |client: kube::Client, name: String| async move {
        Api::<NodeImage>::all(client)
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"desired": 0}})),
            )
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let bound = agent.client(true).await;
    // The policy takes a moment to be loaded by the apiserver.
    wait_for("the other node's NodeImage denied", MINUTE, || async {
        match write(bound.clone(), other.clone()).await {
            Err(e) if e.contains("may only write the status of its own node") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    write(bound, node.clone()).await.expect("its own NodeImage");
    let unbound = agent.client(false).await;
    let err = write(unbound, node).await.unwrap_err();
    assert!(
        err.contains("may only write the status of its own node"),
        "{err}"
    );
    agent.delete().await;
}

/// The agent's one Pod write (the runtime-containers-meta annotation through `pods/status`,
/// granted cluster-wide by RBAC) is admitted for its own node's Pods only, and never as a
/// change of the Pod's status: own-pod-status-policy.yaml, read from the Pod-bound token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_annotates_only_its_own_nodes_pods_and_never_their_status() {
    let ns = TestNamespace::new("agent-writes-pod").await;
    apply_agent_identity().await;
    let agent = AgentPod::create(&ns, None).await;
    let other_node = other_kwok_node(&ns.client, &agent.node).await;
    let pods: Api<Pod> = Api::namespaced(ns.client.clone(), &ns.name);
    for (name, node) in [
        ("mine", agent.node.as_str()),
        ("theirs", other_node.as_str()),
    ] {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "app", "image": "nginx:alpine"}]}
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let annotate = |client: kube::Client, pod: &'static str, value: &'static str| {
        let ns = ns.name.clone();
        async move {
            Api::<Pod>::namespaced(client, &ns)
                .patch_status(
                    pod,
                    &PatchParams::default(),
                    &Patch::Strategic(json!({"metadata": {"annotations": {
                        keys::RUNTIME_CONTAINERS_META: value}}})),
                )
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
    };
    let bound = agent.client(true).await;
    // The policy takes a moment to be loaded by the apiserver.
    wait_for("another node's Pod denied", MINUTE, || async {
        match annotate(bound.clone(), "theirs", "{}").await {
            Err(e) if e.contains("may only write the Pods of its own node") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    annotate(bound.clone(), "mine", r#"{"containers":[]}"#)
        .await
        .expect("its own node's Pod");
    let mine = pods.get("mine").await.unwrap();
    assert_eq!(
        mine.annotations()
            .get(keys::RUNTIME_CONTAINERS_META)
            .map(String::as_str),
        Some(r#"{"containers":[]}"#)
    );
    // A status change rides on the same subresource: refused even on its own node.
    let err = Api::<Pod>::namespaced(bound.clone(), &ns.name)
        .patch_status(
            "mine",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [
                {"type": "Ready", "status": "True"}]}})),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("may not change a Pod's status"), "{err}");
    // Without the Pod binding the token names no node.
    let unbound = agent.client(false).await;
    let err = annotate(unbound, "mine", "{}").await.unwrap_err();
    assert!(
        err.contains("may only write the Pods of its own node"),
        "{err}"
    );
    agent.delete().await;
}
