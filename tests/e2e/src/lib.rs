//! Harness for the end-to-end tests: one local cluster per run (reused when
//! `.local/kubeconfig` answers, started otherwise), a fresh namespace per test, deleted
//! when the test ends, and waits that fail with what was expected and what was seen.

// A test harness: a failed expectation is a failed test, and a panic says so best.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Config};
use tokio::sync::OnceCell;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

/// The directory holding kubectl and the other control-plane binaries.
pub fn cluster_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let out = Command::new(repo_root().join("tests/cluster/cluster.sh"))
            .arg("bin")
            .output()
            .expect("run tests/cluster/cluster.sh bin");
        assert!(
            out.status.success(),
            "cluster.sh bin failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().to_string())
    })
    .clone()
}

pub fn kubeconfig_path() -> PathBuf {
    // Tests run from the crate's directory: a relative KUBECONFIG is relative to the repo.
    std::env::var_os("KUBECONFIG")
        .map(|p| repo_root().join(p))
        .unwrap_or_else(|| repo_root().join(".local/kubeconfig"))
}

/// kubectl's discovery cache for this test process: its own, so a cache another run left
/// in `~/.kube/cache` (e.g. naming a CRD version since unserved) cannot mislead it.
pub fn kubectl_cache_dir() -> PathBuf {
    std::env::temp_dir().join(format!("kruise-e2e-kubectl-{}", std::process::id()))
}

/// Drops kubectl's discovery cache: after a test changes which versions a CRD serves.
pub fn forget_discovery() {
    let _ = std::fs::remove_dir_all(kubectl_cache_dir());
}

/// Runs kubectl against the test cluster; returns (success, stdout, stderr).
pub fn kubectl(args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    use std::io::Write;
    let mut cmd = Command::new(cluster_bin().join("kubectl"));
    cmd.arg("--kubeconfig")
        .arg(kubeconfig_path())
        .arg("--cache-dir")
        .arg(kubectl_cache_dir())
        .args(args);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn kubectl");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().expect("kubectl output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

static SETUP: OnceCell<()> = OnceCell::const_new();

/// A client for the local cluster; starts the cluster and installs the CRDs on first use
/// in this process. Each test gets its own client: a client lives on the runtime that
/// made it, and every `#[tokio::test]` has its own runtime.
pub async fn client() -> Client {
    SETUP
        .get_or_init(|| async {
            ensure_cluster().await.expect("local cluster");
            let client = Client::try_from(kube_config().await).expect("client");
            install_crds(&client).await.expect("install CRDs");
            serve_conversions()
                .await
                .expect("the CRD conversion webhook");
        })
        .await;
    Client::try_from(kube_config().await).expect("client")
}

/// The kube config of the local cluster.
pub async fn kube_config() -> Config {
    let kubeconfig =
        kube::config::Kubeconfig::read_from(kubeconfig_path()).expect("read kubeconfig");
    Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("kube config")
}

async fn ensure_cluster() -> anyhow::Result<()> {
    let (ok, _, _) = kubectl(&["get", "--raw=/readyz"], None);
    if ok {
        return Ok(());
    }
    let status = tokio::task::spawn_blocking(|| {
        Command::new(repo_root().join("tests/cluster/cluster.sh"))
            .arg("up")
            .status()
    })
    .await??;
    if !status.success() {
        bail!("tests/cluster/cluster.sh up failed");
    }
    Ok(())
}

/// The conversion routes of every controller that converts a kind (cloneset-ctl,
/// sidecarset-ctl, daemonset-ctl, resourcedistribution-ctl, persistentpodstate-ctl,
/// workloadspread-ctl, uniteddeployment-ctl, crr-ctl, pub-ctl).
pub fn conversion_routes() -> Vec<kruise_runtime::webhook::Route> {
    vec![
        cloneset_ctl::webhook::conversion_route(),
        sidecarset_ctl::webhook::conversion_route(),
        daemonset_ctl::webhook::conversion_route(),
        resourcedistribution_ctl::webhook::conversion_route(),
        persistentpodstate_ctl::webhook::conversion_route(),
        workloadspread_ctl::webhook::conversion_route(),
        uniteddeployment_ctl::webhook::conversion_route(),
        crr_ctl::webhook::conversion_route(),
        pub_ctl::webhook::conversion_route(),
    ]
}

type Reregister = std::sync::mpsc::Sender<anyhow::Result<()>>;

/// Asks the process's conversion server to register itself on the CRDs again.
static REREGISTER: OnceLock<tokio::sync::mpsc::UnboundedSender<Reregister>> = OnceLock::new();

/// Points the CRDs at this process's conversion webhook again, after a test pointed them
/// elsewhere (blocking: callable from a guard's `drop`). The apiserver picks the change
/// up asynchronously: v1beta1 reads may still fail for a moment.
pub fn reregister_conversions() -> anyhow::Result<()> {
    let (done, answer) = std::sync::mpsc::channel();
    REREGISTER
        .get()
        .context("the conversion server is not running")?
        .send(done)
        .context("the conversion thread ended")?;
    answer.recv().context("the conversion thread ended")?
}

/// Serves the conversion routes for as long as this test process lives, registered on
/// the CRDs as a cluster-wide controller registers them. The CRDs ship naming the
/// controllers' Services, which do not exist here (the tests run namespaced controllers,
/// which never register a conversion): without this every v1beta1 read (kubectl's
/// preferred version, the garbage collector's and the namespace controller's lists)
/// would fail. Its own thread and tokio runtime: each test's runtime ends with the test.
async fn serve_conversions() -> anyhow::Result<()> {
    let config = kube_config().await;
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<anyhow::Result<()>>();
    std::thread::Builder::new()
        .name("e2e-conversion".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("conversion runtime");
            rt.block_on(async move {
                let started = async {
                    let settings = kruise_runtime::Settings {
                        watch_namespace: None,
                        ..RunningController::settings("", "")
                    };
                    let runtime =
                        kruise_runtime::Runtime::new(cloneset_ctl::IDENTITY, settings, config)
                            .await?;
                    let server =
                        kruise_runtime::WebhookServer::start(&runtime, conversion_routes()).await?;
                    anyhow::ensure!(server.register_conversions().await?, "nothing registered");
                    Ok((runtime, server))
                }
                .await;
                match started {
                    Ok((_runtime, server)) => {
                        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Reregister>();
                        let _ = REREGISTER.set(tx);
                        let _ = ready_tx.send(Ok(()));
                        while let Some(done) = rx.recv().await {
                            let result = server.register_conversions().await;
                            let _ = done.send(result.map(|_| ()).map_err(anyhow::Error::from));
                        }
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            });
        })?;
    ready_rx.await.context("the conversion thread ended")??;
    wait_v1beta1_reads().await;
    Ok(())
}

async fn wait_v1beta1_reads() {
    // The apiserver reloads a CRD's conversion asynchronously; a v1beta1 list converts
    // every stored object, and fails while the previous process's endpoint is still used.
    wait_for(
        "v1beta1 reads through this process's conversion webhook",
        Duration::from_secs(60),
        || async {
            let (ok, _, err) = kubectl_async(
                vec![
                    "get".into(),
                    "clonesets.v1beta1.apps.kruise.io,sidecarsets.v1beta1.apps.kruise.io,\
                     daemonsets.v1beta1.apps.kruise.io,uniteddeployments.v1beta1.apps.kruise.io"
                        .into(),
                    "-A".into(),
                    "-o".into(),
                    "name".into(),
                ],
                None,
            )
            .await;
            if ok { Ok(()) } else { Err(err) }
        },
    )
    .await;
}

/// Applies every CRD file of `deploy/crds/` (what users apply) and waits until each is
/// Established. A conversion an earlier test process registered (a URL) is swapped back
/// to the shipped Service first: server-side apply would otherwise leave both set.
pub async fn install_crds(client: &Client) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let dir = repo_root().join("deploy/crds");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("read {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(&text).with_context(|| format!("parse {}", path.display()))?;
        let name = crd.metadata.name.clone().expect("crd name");
        if let (Ok(live), Some(shipped)) = (
            api.get(&name).await,
            crd.spec
                .conversion
                .as_ref()
                .and_then(|c| c.webhook.as_ref())
                .and_then(|w| w.client_config.as_ref()),
        ) {
            let shipped = serde_json::to_value(shipped)?;
            let replace =
                kruise_runtime::webhook::conversion::replace_other_endpoint_patch(&live, &shipped);
            if let Some(replace) = replace {
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&replace))
                    .await
                    .with_context(|| format!("reset the conversion of {name}"))?;
            }
        }
        api.patch(
            &name,
            &PatchParams::apply("kruise-e2e").force(),
            &Patch::Apply(&crd),
        )
        .await
        .with_context(|| format!("apply {}", path.display()))?;
        names.push(name);
    }
    for name in names {
        wait_for(
            &format!("CRD {name} Established"),
            Duration::from_secs(60),
            || {
                let api = api.clone();
                let name = name.clone();
                async move {
                    let crd = api.get(&name).await.map_err(|e| e.to_string())?;
                    let established = crd
                        .status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .iter()
                        .any(|c| c.type_ == "Established" && c.status == "True");
                    if established {
                        Ok(())
                    } else {
                        Err("not Established yet".to_string())
                    }
                }
            },
        )
        .await;
    }
    Ok(())
}

/// A namespace for one test, deleted (without waiting) when dropped.
pub struct TestNamespace {
    pub name: String,
    pub client: Client,
}

impl TestNamespace {
    /// Creates `e2e-<prefix>-<random>` and waits for its default ServiceAccount.
    pub async fn new(prefix: &str) -> Self {
        let client = client().await;
        let suffix: String = {
            use rand::Rng;
            let mut rng = rand::rng();
            (0..5)
                .map(|_| (b'a' + rng.random_range(0..26)) as char)
                .collect()
        };
        let name = format!("e2e-{prefix}-{suffix}");
        let api: Api<Namespace> = Api::all(client.clone());
        let ns = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        api.create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
        let sa: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
        wait_for(
            "the namespace's default ServiceAccount",
            Duration::from_secs(60),
            || {
                let sa = sa.clone();
                async move {
                    sa.get("default")
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                }
            },
        )
        .await;
        TestNamespace { name, client }
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// `kubectl apply -n <ns> -f -` with the given YAML.
    pub fn apply_yaml(&self, yaml: &str) -> Result<String, String> {
        let (ok, out, err) = kubectl(&["apply", "-n", &self.name, "-f", "-"], Some(yaml));
        if ok { Ok(out) } else { Err(err) }
    }

    /// [`TestNamespace::apply_yaml`] off the async threads: a webhook served by this test
    /// process must be able to answer while kubectl waits.
    pub async fn apply(&self, yaml: &str) -> Result<String, String> {
        let (ns, yaml) = (self.name.clone(), yaml.to_string());
        tokio::task::spawn_blocking(move || {
            let (ok, out, err) = kubectl(&["apply", "-n", &ns, "-f", "-"], Some(&yaml));
            if ok { Ok(out) } else { Err(err) }
        })
        .await
        .expect("kubectl task")
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if std::env::var_os("KRUISE_E2E_KEEP").is_some() {
            eprintln!("keeping namespace {}", self.name);
            return;
        }
        let _ = kubectl(&["delete", "namespace", &self.name, "--wait=false"], None);
        // Webhook configurations of controllers scoped to this namespace.
        let selector = format!("{}={}", kruise_api::keys::WEBHOOK_SCOPE, self.name);
        let _ = kubectl(
            &[
                "delete",
                "validatingwebhookconfigurations,mutatingwebhookconfigurations",
                "-l",
                &selector,
                "--wait=false",
            ],
            None,
        );
    }
}

/// Polls `check` until it returns `Ok`, or panics after `timeout` with the description
/// and the last thing `check` reported.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last = match check().await {
            Ok(v) => return v,
            Err(seen) => seen,
        };
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}; last seen: {last}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Deletes an object and ignores "not found".
pub async fn delete_ignore_missing<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let _ = api.delete(name, &DeleteParams::default()).await;
}

/// A controller running in this test process, scoped to one namespace; stopped on drop.
pub struct RunningController {
    pub runtime: kruise_runtime::Runtime,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl RunningController {
    /// Starts `run` with a [`kruise_runtime::Runtime`] watching only `namespace`, leader
    /// election off, the admin server on an ephemeral port, and waits until it is ready.
    pub async fn start<F, Fut>(
        identity: impl Into<kruise_runtime::Identity>,
        namespace: &str,
        gates: &str,
        run: F,
    ) -> Self
    where
        F: FnOnce(kruise_runtime::Runtime) -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        Self::start_with(identity, Self::settings(namespace, gates), run).await
    }

    /// The settings [`RunningController::start`] runs with: `namespace` only, leader
    /// election off, admin and webhook servers on ephemeral ports.
    pub fn settings(namespace: &str, gates: &str) -> kruise_runtime::Settings {
        kruise_runtime::Settings {
            admin_addr: ([127, 0, 0, 1], 0).into(),
            webhook_addr: ([127, 0, 0, 1], 0).into(),
            // Port 0 in the URL: the webhook server substitutes the port it bound.
            webhook_url: Some("https://127.0.0.1:0".into()),
            leader_elect: false,
            watch_namespace: Some(namespace.to_string()),
            feature_gates: gates.to_string(),
            ..Default::default()
        }
    }

    /// [`RunningController::start`] with other settings (a fixed webhook port, a
    /// certificate directory).
    pub async fn start_with<F, Fut>(
        identity: impl Into<kruise_runtime::Identity>,
        settings: kruise_runtime::Settings,
        run: F,
    ) -> Self
    where
        F: FnOnce(kruise_runtime::Runtime) -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let runtime = kruise_runtime::Runtime::new(identity, settings, kube_config().await)
            .await
            .expect("runtime");
        let fut = run(runtime.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = fut.await {
                eprintln!("controller stopped with an error: {e:#}");
            }
        });
        let readiness = runtime.readiness.clone();
        wait_for(
            "the controller to report ready",
            Duration::from_secs(60),
            || {
                let readiness = readiness.clone();
                async move {
                    if readiness.is_ready() {
                        Ok(())
                    } else {
                        Err(format!("pending: {:?}", readiness.pending()))
                    }
                }
            },
        )
        .await;
        RunningController {
            runtime,
            task: Some(task),
        }
    }

    /// Stops the controller and waits for it to end.
    pub async fn stop(mut self) {
        self.runtime.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
    }

    /// The controller's `/metrics` text.
    pub fn metrics(&self) -> String {
        self.runtime.metrics.render()
    }
}

impl Drop for RunningController {
    fn drop(&mut self) {
        self.runtime.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Waits until the object `get` returns has had its latest generation observed by its
/// controller (`observed_generation` reads it from the status) and `check` holds.
pub async fn wait_observed<K, Fut>(
    what: &str,
    get: impl Fn() -> Fut,
    observed_generation: impl Fn(&K::Status) -> i64,
    check: impl Fn(&K) -> bool,
) -> K
where
    K: kube::Resource + kube::core::object::HasStatus,
    K::Status: std::fmt::Debug,
    Fut: std::future::Future<Output = K>,
{
    wait_for(what, Duration::from_secs(60), || async {
        let obj = get().await;
        let observed = obj.status().map(&observed_generation) == obj.meta().generation;
        if observed && check(&obj) {
            Ok(obj)
        } else {
            Err(format!(
                "generation {:?}, status {:?}",
                obj.meta().generation,
                obj.status()
            ))
        }
    })
    .await
}

/// A controller reports ready once its webhook configurations are registered; the
/// apiserver starts calling them a moment later. Waits until a dry-run create of `probe`
/// comes back the way only the webhook makes it (`check`).
pub async fn wait_webhook_effective<K>(api: &Api<K>, probe: &K, check: impl Fn(&K) -> bool)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    let dry_run = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for(
        "the apiserver to call the webhook",
        Duration::from_secs(60),
        || async {
            let created = api
                .create(&dry_run, probe)
                .await
                .map_err(|e| e.to_string())?;
            if check(&created) {
                Ok(())
            } else {
                Err("admitted without the webhook's changes".to_string())
            }
        },
    )
    .await
}

/// kubectl off the async threads: a webhook served by this test process must be able to
/// answer while kubectl waits.
pub async fn kubectl_async(args: Vec<String>, stdin: Option<String>) -> (bool, String, String) {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kubectl(&args, stdin.as_deref())
    })
    .await
    .expect("kubectl task")
}

/// The Pod's Ready condition is True.
pub fn is_ready(pod: &k8s_openapi::api::core::v1::Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Pods of the namespace matching a label selector, not being deleted, sorted by name.
pub async fn pods_with(ns: &TestNamespace, selector: &str) -> Vec<k8s_openapi::api::core::v1::Pod> {
    let api: Api<k8s_openapi::api::core::v1::Pod> = ns.api();
    let mut list = api
        .list(&kube::api::ListParams::default().labels(selector))
        .await
        .expect("list pods")
        .items;
    list.retain(|p| p.metadata.deletion_timestamp.is_none());
    list.sort_by_key(|p| p.metadata.name.clone());
    list
}

/// One Event, as `kubectl describe` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventLine {
    pub type_: String,
    pub reason: String,
    pub note: String,
    pub reporting_controller: String,
}

/// Events about the object named `name`, in every namespace (Events about cluster-scoped
/// objects live in `default`).
pub async fn events_about(client: &Client, name: &str) -> Vec<EventLine> {
    events_listed(Api::all(client.clone()), name).await
}

/// Events about the object named `name` in the test's namespace only (other tests may
/// have objects of the same name).
pub async fn events_in(ns: &TestNamespace, name: &str) -> Vec<EventLine> {
    events_listed(ns.api(), name).await
}

/// The events about `name` in the namespace, once `seen` holds for them. Controllers
/// publish events off their reconcile path, so an event can land after the state it
/// describes: a test reads them through this, never once.
pub async fn wait_events(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    seen: impl Fn(&[EventLine]) -> bool,
) -> Vec<EventLine> {
    wait_for(what, Duration::from_secs(60), || async {
        let events = events_in(ns, name).await;
        if seen(&events) {
            Ok(events)
        } else {
            Err(format!("{events:?}"))
        }
    })
    .await
}

async fn events_listed(
    api: Api<k8s_openapi::api::events::v1::Event>,
    name: &str,
) -> Vec<EventLine> {
    api.list(&kube::api::ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| EventLine {
            type_: e.type_.unwrap_or_default(),
            reason: e.reason.unwrap_or_default(),
            note: e.note.unwrap_or_default(),
            reporting_controller: e.reporting_controller.unwrap_or_default(),
        })
        .collect()
}

/// A GET over HTTP/1.0 (no chunked encoding to undo): (status, body).
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> Result<(u16, String), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect {addr}: {e}"))?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .await
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status line: {head}"))?;
    Ok((code, body.to_string()))
}

/// Runs `kubectl kruise <args>` (the kubectl-kruise crate's entry point, in this process)
/// against the local cluster in `namespace`: what it printed, or its error as the binary
/// prints it (`error: …` or `Error from server (…): …`, exit 1).
pub async fn kubectl_kruise(namespace: &str, args: &[&str]) -> Result<String, String> {
    use clap::Parser;
    let kubeconfig = kubeconfig_path();
    let mut argv = vec![
        "kubectl-kruise".to_string(),
        "--kubeconfig".to_string(),
        kubeconfig.display().to_string(),
        "-n".to_string(),
        namespace.to_string(),
    ];
    argv.extend(args.iter().map(|a| a.to_string()));
    let cli = kubectl_kruise::Cli::try_parse_from(&argv).map_err(|e| format!("usage: {e}"))?;
    let mut out = Vec::new();
    let result = kubectl_kruise::run(cli, &mut out).await;
    let printed = String::from_utf8_lossy(&out).into_owned();
    match result {
        Ok(()) => Ok(printed),
        Err(e) => Err(format!("{printed}{}", e.kubectl_line())),
    }
}
