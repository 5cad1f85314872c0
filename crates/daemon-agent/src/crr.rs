//! The agent's ContainerRecreateRequest loop (openkruise/kruise v1.9.0
//! pkg/daemon/containerrecreate/crr_daemon_controller.go): watches only the active requests of its
//! node (label selector `crr.apps.kruise.io/node-name=<node>, crr.apps.kruise.io/active=true`, in
//! the instance's namespace when scoped), works on one request per Pod at a time, and for each
//! container runs the preStop hook, stops it through the CRI and lets the kubelet start it again.
//! What it decides is in [`crate::crr_plan`]; this module reads the runtime and writes the
//! request's status.
//!
//! Writes: the request's status (merge patches), and the `Killing` event on the Pod.
//! Reads: the Pod (its IP, for an httpGet/tcpSocket preStop) and the CRI.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ContainerPort, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    ContainerRecreateRequest, ContainerRecreateRequestPhase as Phase, ProbeHandler,
};
use kruise_api::keys;
use kruise_runtime::cache::prune;
use kruise_runtime::{Cache, Runtime, Tolerant};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use crate::cri::Cri;
use crate::crr_plan::{self, Step, Unready};
use crate::error::Error;

/// Wait before retrying a Pod whose pass failed.
const RETRY_AFTER: Duration = Duration::from_secs(2);
/// A pass ends after this many writes (each moves the request forward); the next trigger
/// or requeue goes on.
const MAX_STEPS_PER_PASS: usize = 16;

/// The label selector of the requests this agent serves.
pub fn selector(node_name: &str) -> String {
    format!(
        "{}={node_name},{}=true",
        keys::CRR_NODE_NAME,
        keys::CRR_ACTIVE
    )
}

/// `kruise_agent_container_recreates_total{result}`: containers stopped for requests.
fn recreates_metric(registry: &prometheus::Registry) -> Option<prometheus::IntCounterVec> {
    let counter = prometheus::IntCounterVec::new(
        prometheus::Opts::new(
            "kruise_agent_container_recreates_total",
            "Containers stopped for ContainerRecreateRequests, by result.",
        ),
        &["result"],
    )
    .ok()?;
    // A second agent in the same process (tests) counts in the first one's series.
    let _ = registry.register(Box::new(counter.clone()));
    Some(counter)
}

struct Worker {
    cri: Cri,
    client: kube::Client,
    events: kruise_runtime::Events,
    store: kube::runtime::reflector::Store<ContainerRecreateRequest>,
    /// The CRI runtime's name (`containerd`): the prefix of the containers' IDs.
    runtime_name: String,
    /// The resourceVersion of our last write per request UID: a pass on an older copy
    /// from the cache would redo what that write recorded (a second stop).
    written: Mutex<HashMap<String, u64>>,
    recreates: Option<prometheus::IntCounterVec>,
}

fn key_of(crr: &ContainerRecreateRequest) -> String {
    format!(
        "{}/{}",
        crr.namespace().unwrap_or_default(),
        crr.spec.pod_name
    )
}

fn finished(crr: &ContainerRecreateRequest) -> bool {
    crr.metadata.deletion_timestamp.is_some()
        || crr
            .status
            .as_ref()
            .is_some_and(|s| s.completion_time.is_some())
}

fn resource_version(crr: &ContainerRecreateRequest) -> u64 {
    crr.resource_version()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The request loop alone (no NodeImage puller), on the CRI at `socket`: for tests that
/// share a node with another agent's puller, and for embedding.
pub async fn run_standalone(
    runtime: Runtime,
    node_name: String,
    socket: std::path::PathBuf,
) -> anyhow::Result<()> {
    let cri = Cri::connect(&socket)?;
    run(runtime, cri, node_name).await?;
    Ok(())
}

/// Runs the request loop for `node_name` until shutdown (the instance's namespace only
/// when `KRUISE_WATCH_NAMESPACE` scopes it).
pub async fn run(runtime: Runtime, cri: Cri, node_name: String) -> Result<(), Error> {
    let (runtime_name, _) = cri.version().await?;
    let api: Api<Tolerant<ContainerRecreateRequest>> = match &runtime.settings.watch_namespace {
        Some(ns) => Api::namespaced(runtime.client.clone(), ns),
        None => Api::all(runtime.client.clone()),
    };
    let cache = Cache::spawn_tolerant(
        api,
        watcher::Config::default().labels(&selector(&node_name)),
        prune,
        runtime
            .readiness
            .register("cache containerrecreaterequests"),
        runtime.malformed_report(),
    );
    let worker = Arc::new(Worker {
        cri,
        client: runtime.client.clone(),
        events: runtime.events(),
        store: cache.store().clone(),
        runtime_name,
        written: Mutex::default(),
        recreates: recreates_metric(&runtime.metrics.registry),
    });
    let mut changes = Box::pin(cache.subscribe());
    let (done_tx, mut done_rx) =
        tokio::sync::mpsc::unbounded_channel::<(String, Option<Duration>)>();
    // Per Pod (`<ns>/<pod>`): when it is due, whether a pass runs, whether it changed
    // meanwhile. One pass per Pod at a time: one request per Pod at a time.
    let mut due: BTreeMap<String, Instant> = BTreeMap::new();
    let mut running: HashSet<String> = HashSet::new();
    let mut dirty: HashSet<String> = HashSet::new();
    loop {
        let next = due.values().min().copied();
        tokio::select! {
            _ = runtime.shutdown.cancelled() => break,
            changed = changes.next() => {
                let Some(crr) = changed else { break };
                if !finished(&crr) {
                    due.insert(key_of(&crr), Instant::now());
                }
            }
            Some((key, requeue)) = done_rx.recv() => {
                running.remove(&key);
                if dirty.remove(&key) {
                    due.insert(key, Instant::now());
                } else if let Some(after) = requeue {
                    let at = Instant::now() + after;
                    let entry = due.entry(key).or_insert(at);
                    *entry = (*entry).min(at);
                }
            }
            _ = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {}
        }
        let now = Instant::now();
        let ready: Vec<String> = due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in ready {
            due.remove(&key);
            if !running.insert(key.clone()) {
                dirty.insert(key);
                continue;
            }
            let (worker, done) = (worker.clone(), done_tx.clone());
            tokio::spawn(async move {
                let requeue = match worker.sync(&key).await {
                    Ok(requeue) => requeue,
                    Err(e) => {
                        tracing::warn!(pod = %key, error = %e, "ContainerRecreateRequest pass failed; retrying");
                        Some(RETRY_AFTER)
                    }
                };
                let _ = done.send((key, requeue));
            });
        }
    }
    Ok(())
}

impl Worker {
    /// Whether the cache still shows `crr` from before our last write to it. Once it has
    /// caught up the entry is dropped (the map holds only writes not yet seen).
    fn is_stale(&self, crr: &ContainerRecreateRequest) -> bool {
        let mut written = self
            .written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(uid) = crr.uid() else {
            return false;
        };
        match written.get(&uid) {
            Some(&w) if resource_version(crr) < w => true,
            Some(_) => {
                written.remove(&uid);
                false
            }
            None => false,
        }
    }

    /// One pass over a Pod's requests.
    async fn sync(&self, key: &str) -> Result<Option<Duration>, Error> {
        let Some((namespace, pod_name)) = key.split_once('/') else {
            return Ok(None);
        };
        let requests: Vec<Arc<ContainerRecreateRequest>> = self
            .store
            .state()
            .into_iter()
            .filter(|c| c.namespace().as_deref() == Some(namespace) && c.spec.pod_name == pod_name)
            .collect();
        if requests.iter().any(|c| self.is_stale(c)) {
            // The cache has not caught up with our last write; its event will trigger us.
            return Ok(Some(Duration::from_secs(1)));
        }
        let refs: Vec<&ContainerRecreateRequest> = requests.iter().map(|c| c.as_ref()).collect();
        let pick = crr_plan::pick(&refs);
        for i in pick.set_pending {
            self.patch_status(refs[i], json!({"phase": Phase::Pending}))
                .await?;
        }
        let Some(i) = pick.picked else {
            return Ok(None);
        };
        self.work(refs[i].clone()).await
    }

    async fn patch_status(
        &self,
        crr: &ContainerRecreateRequest,
        status: serde_json::Value,
    ) -> Result<ContainerRecreateRequest, Error> {
        let api: Api<ContainerRecreateRequest> =
            Api::namespaced(self.client.clone(), &crr.namespace().unwrap_or_default());
        let patched = api
            .patch_status(
                &crr.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;
        if let Some(uid) = patched.uid() {
            self.written
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(uid, resource_version(&patched));
        }
        Ok(patched)
    }

    async fn complete(&self, crr: &ContainerRecreateRequest, message: &str) -> Result<(), Error> {
        let now = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        self.patch_status(
            crr,
            json!({"phase": Phase::Completed, "completionTime": now, "message": message}),
        )
        .await?;
        tracing::info!(crr = %crr.name_any(), %message, "ContainerRecreateRequest completed");
        Ok(())
    }

    /// Moves the picked request forward until it has to wait.
    async fn work(&self, mut crr: ContainerRecreateRequest) -> Result<Option<Duration>, Error> {
        for _ in 0..MAX_STEPS_PER_PASS {
            // Completed meanwhile (the manager's activeDeadlineSeconds, while a preStop
            // hook ran): a write of ours returned it so. Its phase is final; moving it
            // back to Recreating would reopen a request the manager has closed.
            if finished(&crr) {
                return Ok(None);
            }
            let now = jiff::Timestamp::now();
            if crr.status.as_ref().and_then(|s| s.phase) != Some(Phase::Recreating) {
                crr = self
                    .patch_status(&crr, json!({"phase": Phase::Recreating}))
                    .await?;
                continue;
            }
            match crr_plan::unready(&crr, now) {
                Unready::Go => {}
                // The manager's annotation is a change of the request: it triggers us.
                Unready::AwaitAcquired => return Ok(None),
                Unready::Wait(left) => return Ok(Some(left)),
                Unready::Invalid(message) => {
                    self.complete(&crr, &message).await?;
                    return Ok(None);
                }
            }
            if let Some(message) = crr_plan::runtime_mismatch(&crr, &self.runtime_name) {
                self.complete(&crr, &message).await?;
                return Ok(None);
            }
            let pod_uid = crr
                .labels()
                .get(keys::CRR_POD_UID)
                .cloned()
                .unwrap_or_default();
            let observed = crr_plan::newest_per_name(
                self.cri.pod_containers(&pod_uid).await?,
                &self.runtime_name,
            );
            let current = crr
                .status
                .as_ref()
                .map(|s| s.container_recreate_states.clone())
                .unwrap_or_default();
            let mut states = crr_plan::container_states(&crr, &observed, now);
            if states != current {
                crr = self
                    .patch_status(&crr, json!({"containerRecreateStates": states}))
                    .await?;
                continue;
            }
            match crr_plan::walk(&crr, &mut states, &observed) {
                Step::Complete => {
                    if states != current {
                        crr = self
                            .patch_status(&crr, json!({"containerRecreateStates": states}))
                            .await?;
                    }
                    self.complete(&crr, "").await?;
                    return Ok(None);
                }
                Step::Kill(i) => {
                    let name = states[i].name.clone();
                    let result = match observed.get(&name) {
                        Some(o) => self.kill(&crr, &name, &o.runtime_id).await,
                        None => Err("not found container on Node".to_string()),
                    };
                    let outcome = if result.is_ok() {
                        "succeeded"
                    } else {
                        "failed"
                    };
                    if let Some(m) = &self.recreates {
                        m.with_label_values(&[outcome]).inc();
                    }
                    let state = &mut states[i];
                    match result {
                        Ok(()) => {
                            state.phase = Phase::Recreating;
                            state.is_killed = true;
                            state.message.clear();
                        }
                        Err(e) => {
                            tracing::warn!(crr = %crr.name_any(), container = %name, error = %e, "stopping the container failed");
                            state.phase = Phase::Failed;
                            state.message = format!("kill container error: {e}");
                        }
                    }
                    crr = self
                        .patch_status(&crr, json!({"containerRecreateStates": states}))
                        .await?;
                }
                Step::Wait(requeue) => {
                    if states != current {
                        self.patch_status(&crr, json!({"containerRecreateStates": states}))
                            .await?;
                    }
                    return Ok(requeue);
                }
            }
        }
        Ok(Some(Duration::ZERO))
    }

    fn pod_ref(crr: &ContainerRecreateRequest) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(crr.spec.pod_name.clone()),
            namespace: crr.namespace(),
            uid: crr.labels().get(keys::CRR_POD_UID).cloned(),
            ..Default::default()
        }
    }

    /// preStop (bounded by the grace period), `StopContainer` with what is left of it (at least
    /// 2s), and the `Killing` event on the Pod: `KillContainer` of openkruise/kruise v1.9.0
    /// pkg/daemon/kuberuntime/kuberuntime_container.go.
    async fn kill(
        &self,
        crr: &ContainerRecreateRequest,
        name: &str,
        runtime_id: &str,
    ) -> Result<(), String> {
        let grace = crr_plan::grace_seconds(crr);
        let started = Instant::now();
        let container = crr.spec.containers.iter().find(|c| c.name == name);
        if let Some(hook) = container.and_then(|c| c.pre_stop.as_ref()) {
            let ports = container.map(|c| c.ports.as_slice()).unwrap_or_default();
            let bound = Duration::from_secs(grace.max(1).unsigned_abs());
            let ran =
                tokio::time::timeout(bound, self.pre_stop(crr, hook, ports, runtime_id, grace))
                    .await
                    .unwrap_or_else(|_| Err(format!("timed out after {grace}s")));
            if let Err(e) = ran {
                // As the kubelet: a failed hook is reported, the container stopped anyway.
                tracing::warn!(crr = %crr.name_any(), container = %name, error = %e, "preStop hook failed");
                self.events.warning(
                    &Self::pod_ref(crr),
                    "FailedPreStopHook",
                    format!("PreStopHook failed for container {name}: {e}"),
                );
            }
        }
        let timeout = crr_plan::stop_timeout_seconds(grace, started.elapsed());
        self.cri
            .stop_container(runtime_id, timeout)
            .await
            .map_err(|e| e.to_string())?;
        self.events.normal(
            &Self::pod_ref(crr),
            keys::EVENT_CRR_KILLING,
            crr_plan::killing_message(name, &crr.name_any()),
        );
        tracing::info!(crr = %crr.name_any(), container = %name, grace_seconds = timeout, "container stopped");
        Ok(())
    }

    async fn pre_stop(
        &self,
        crr: &ContainerRecreateRequest,
        hook: &ProbeHandler,
        ports: &[ContainerPort],
        runtime_id: &str,
        grace: i64,
    ) -> Result<(), String> {
        if let Some(exec) = &hook.exec {
            let cmd = exec.command.clone().unwrap_or_default();
            let out = self
                .cri
                .exec_sync(runtime_id, cmd, grace)
                .await
                .map_err(|e| e.to_string())?;
            if out.exit_code != 0 {
                return Err(format!(
                    "command exited with {}: {}",
                    out.exit_code,
                    out.stderr.trim()
                ));
            }
            return Ok(());
        }
        let resolve = |port: &IntOrString| -> Result<u16, String> {
            match port {
                IntOrString::Int(p) => u16::try_from(*p).map_err(|_| format!("invalid port {p}")),
                IntOrString::String(named) => ports
                    .iter()
                    .find(|p| p.name.as_deref() == Some(named.as_str()))
                    .and_then(|p| u16::try_from(p.container_port).ok())
                    .ok_or_else(|| format!("no port named {named}")),
            }
        };
        if let Some(http) = &hook.http_get {
            if http
                .scheme
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("https"))
            {
                return Err("httpGet with scheme HTTPS is not supported by the agent".into());
            }
            let host = match http.host.clone().filter(|h| !h.is_empty()) {
                Some(h) => h,
                None => self.pod_ip(crr).await?,
            };
            let port = resolve(&http.port)?;
            let path = http.path.clone().unwrap_or_else(|| "/".into());
            return http_get(&host, port, &path).await;
        }
        if let Some(tcp) = &hook.tcp_socket {
            let host = match tcp.host.clone().filter(|h| !h.is_empty()) {
                Some(h) => h,
                None => self.pod_ip(crr).await?,
            };
            let port = resolve(&tcp.port)?;
            tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    async fn pod_ip(&self, crr: &ContainerRecreateRequest) -> Result<String, String> {
        let pods: Api<Pod> =
            Api::namespaced(self.client.clone(), &crr.namespace().unwrap_or_default());
        let pod = pods
            .get(&crr.spec.pod_name)
            .await
            .map_err(|e| format!("get Pod: {e}"))?;
        if pod.meta().uid.as_deref() != crr.labels().get(keys::CRR_POD_UID).map(String::as_str) {
            return Err("the Pod was replaced".into());
        }
        pod.status
            .and_then(|s| s.pod_ip)
            .filter(|ip| !ip.is_empty())
            .ok_or_else(|| "the Pod has no IP".to_string())
    }
}

/// A plain HTTP/1.0 GET (the kubelet's preStop httpGet): any 2xx/3xx is success.
async fn http_get(host: &str, port: u16, path: &str) -> Result<(), String> {
    let mut stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("connect {host}:{port}: {e}"))?;
    let path = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    };
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nUser-Agent: kruise-daemon-agent\r\n\r\n").as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut head = [0u8; 64];
    let n = stream.read(&mut head).await.map_err(|e| e.to_string())?;
    let line = String::from_utf8_lossy(&head[..n]);
    let code: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no HTTP status line: {line:?}"))?;
    if (200..400).contains(&code) {
        Ok(())
    } else {
        Err(format!("HTTP {code}"))
    }
}
