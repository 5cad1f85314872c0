//! The prober (openkruise/kruise v1.9.0 pkg/daemon/podprobe): for its node's NodePodProbe
//! (watched alone, field selector `metadata.name=<node>`), one worker per listed probe
//! runs it every `periodSeconds` once the container has run `initialDelaySeconds`: an
//! exec probe through CRI `ExecSync` in the probe's container, a tcpSocket probe by
//! connecting to the Pod IP, an httpGet probe by a GET to the Pod IP (plain HTTP; 2xx and
//! 3xx succeed), each bounded by `timeoutSeconds`. A result counts once seen
//! `successThreshold`/`failureThreshold` times in a row; a container not running is
//! Failed at once. The results go to the NodePodProbe's status (one JSON patch of the
//! whole status per change), and a Pod event `KruiseProbeSucceeded`/`KruiseProbeFailed`
//! is recorded when a probe's state changes. What it decides is in
//! [`crate::podprobe_plan`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ObjectReference, Probe};
use kruise_api::apps_v1alpha1::{
    EVENT_PROBE_FAILED, EVENT_PROBE_SUCCEEDED, NodePodProbe, NodePodProbeStatus, ProbeState,
};
use kruise_runtime::Runtime;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::cri::{ContainerRunState, Cri};
use crate::error::Error;
use crate::podprobe_plan::{self as plan, Key, Outcome, Run};

type Outcomes = Arc<Mutex<BTreeMap<Key, Outcome>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The prober alone, on the CRI at `socket`, until shutdown: for tests that share a node
/// with another agent, and for embedding. A namespace-scoped runtime
/// (`KRUISE_WATCH_NAMESPACE`) probes only that namespace's Pods and leaves the other
/// entries of the status as they are.
pub async fn run_standalone(
    runtime: Runtime,
    node_name: String,
    socket: std::path::PathBuf,
) -> anyhow::Result<()> {
    let cri = Cri::connect(&socket)?;
    let task = spawn(&runtime, cri, &node_name);
    runtime.shutdown.cancelled().await;
    task.abort();
    Ok(())
}

/// Spawns the prober for `node`; abort the handle to stop it (its workers stop with it).
pub fn spawn(runtime: &Runtime, cri: Cri, node: &str) -> JoinHandle<()> {
    let (client, events, node) = (runtime.client.clone(), runtime.events(), node.to_string());
    let scope = runtime.settings.watch_namespace.clone();
    let ready = runtime.readiness.register("watch nodepodprobe");
    tokio::spawn(async move {
        let api: Api<NodePodProbe> = Api::all(client);
        let (tx, mut rx) = tokio::sync::watch::channel::<Option<Arc<NodePodProbe>>>(None);
        let selector = format!("metadata.name={node}");
        let watch = tokio::spawn(
            watcher(api.clone(), watcher::Config::default().fields(&selector))
                .default_backoff()
                .for_each(move |event| {
                    match event {
                        Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => {
                            tx.send_replace(Some(Arc::new(n)));
                        }
                        Ok(watcher::Event::Delete(_)) => {
                            tx.send_replace(None);
                        }
                        Ok(watcher::Event::InitDone) => ready.set_ready(),
                        Ok(watcher::Event::Init) => {}
                        Err(e) => tracing::warn!(error = %e, "NodePodProbe watch"),
                    }
                    futures::future::ready(())
                }),
        );
        let mut prober = Prober {
            cri,
            outcomes: Outcomes::default(),
            changed: Arc::new(Notify::new()),
            workers: BTreeMap::new(),
        };
        let mut last_written: Option<NodePodProbeStatus> = None;
        let mut retry = false;
        loop {
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { break },
                _ = prober.changed.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(1)), if retry => {}
            }
            let current = rx.borrow_and_update().clone();
            let Some(npp) = current else {
                prober.sync(&[]);
                last_written = None;
                continue;
            };
            let mut wanted = plan::probes(&npp.spec);
            wanted.retain(|(k, _)| scope.as_ref().is_none_or(|ns| *ns == k.namespace));
            prober.sync(&wanted);
            retry = match write_status(&api, &events, &prober.outcomes, &npp, &mut last_written)
                .await
            {
                Ok(()) => false,
                Err(e) => {
                    tracing::warn!(node = %node, error = %e, "NodePodProbe status write failed; retrying");
                    true
                }
            };
        }
        prober.sync(&[]);
        watch.abort();
    })
}

struct Prober {
    cri: Cri,
    outcomes: Outcomes,
    changed: Arc<Notify>,
    workers: BTreeMap<Key, (Probe, JoinHandle<()>)>,
}

impl Prober {
    /// One worker per listed probe: new ones started, changed ones restarted (their
    /// result forgotten), those no longer listed stopped.
    fn sync(&mut self, wanted: &[(Key, Probe)]) {
        let keep: std::collections::HashSet<&Key> = wanted.iter().map(|(k, _)| k).collect();
        let gone: Vec<Key> = self
            .workers
            .keys()
            .filter(|k| !keep.contains(k))
            .cloned()
            .collect();
        for key in gone {
            if let Some((_, handle)) = self.workers.remove(&key) {
                handle.abort();
            }
            lock(&self.outcomes).remove(&key);
        }
        for (key, probe) in wanted {
            if let Some((running, _)) = self.workers.get(key)
                && running == probe
            {
                continue;
            }
            if let Some((_, handle)) = self.workers.remove(key) {
                handle.abort();
                lock(&self.outcomes).remove(key);
            }
            let handle = tokio::spawn(work(
                self.cri.clone(),
                key.clone(),
                probe.clone(),
                self.outcomes.clone(),
                self.changed.clone(),
            ));
            self.workers.insert(key.clone(), (probe.clone(), handle));
        }
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        for (_, handle) in self.workers.values() {
            handle.abort();
        }
    }
}

/// One probe, every `periodSeconds`, until aborted.
async fn work(cri: Cri, key: Key, probe: Probe, outcomes: Outcomes, changed: Arc<Notify>) {
    let period = Duration::from_secs(plan::period_seconds(&probe));
    let mut run = Run::default();
    let mut container_id = String::new();
    loop {
        if let Some(outcome) = probe_once(&cri, &key, &probe, &mut run, &mut container_id).await {
            let mut all = lock(&outcomes);
            let before = all.get(&key).map(|o| (o.state.clone(), o.message.clone()));
            let after = (outcome.state.clone(), outcome.message.clone());
            all.insert(key.clone(), outcome);
            drop(all);
            if before.as_ref() != Some(&after) {
                changed.notify_one();
            }
        }
        tokio::time::sleep(period).await;
    }
}

/// One run: the container looked up, the probe run, the thresholds applied.
async fn probe_once(
    cri: &Cri,
    key: &Key,
    probe: &Probe,
    run: &mut Run,
    container_id: &mut String,
) -> Option<Outcome> {
    let containers = match cri.pod_containers(&key.uid).await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(pod = %key.pod, error = %e, "listing the Pod's containers");
            return None;
        }
    };
    let container = containers
        .into_iter()
        .filter(|c| c.name == key.container)
        .max_by_key(|c| c.created_at)?;
    if *container_id != container.id {
        // A new container: earlier results were about the old one.
        *container_id = container.id.clone();
        *run = Run::default();
    }
    let now = Timestamp::now();
    if container.state != ContainerRunState::Running {
        return Some(Outcome {
            state: ProbeState::failed(),
            message: format!("Container({}) is Non-running", key.container),
            at: now,
        });
    }
    if !plan::past_initial_delay(probe, container.started_at, now) {
        return None;
    }
    let timeout = Duration::from_secs(plan::timeout_seconds(probe));
    let (success, message) = if let Some(exec) = &probe.exec {
        let command = exec.command.clone().unwrap_or_default();
        let timeout_seconds = i64::try_from(timeout.as_secs()).unwrap_or(1);
        match tokio::time::timeout(
            timeout + Duration::from_secs(1),
            cri.exec_sync(&container.id, command, timeout_seconds),
        )
        .await
        {
            Ok(Ok(r)) => (r.exit_code == 0, format!("{}{}", r.stdout, r.stderr)),
            Ok(Err(e)) => (false, e.to_string()),
            Err(_) => (
                false,
                format!("command timed out after {}s", timeout.as_secs()),
            ),
        }
    } else if let Some(tcp) = &probe.tcp_socket {
        let host = tcp
            .host
            .clone()
            .filter(|h| !h.is_empty())
            .unwrap_or(key.ip.clone());
        tcp_probe(&host, port_of(&tcp.port), timeout).await
    } else if let Some(http) = &probe.http_get {
        let host = http
            .host
            .clone()
            .filter(|h| !h.is_empty())
            .unwrap_or(key.ip.clone());
        let path = http.path.clone().unwrap_or_else(|| "/".into());
        if http
            .scheme
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("HTTPS"))
        {
            (
                false,
                "HTTPS probes are not supported by this agent".to_string(),
            )
        } else {
            let headers: Vec<(String, String)> = http
                .http_headers
                .iter()
                .flatten()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect();
            http_probe(&host, port_of(&http.port), &path, &headers, timeout).await
        }
    } else {
        return None;
    };
    let state = run.record(success, probe)?;
    Some(Outcome {
        state,
        message: plan::truncate(message.trim_end()),
        at: now,
    })
}

fn port_of(port: &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString) -> u16 {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    match port {
        IntOrString::Int(n) => u16::try_from(*n).unwrap_or(0),
        IntOrString::String(s) => s.parse().unwrap_or(0),
    }
}

async fn tcp_probe(host: &str, port: u16, timeout: Duration) -> (bool, String) {
    match tokio::time::timeout(timeout, TcpStream::connect((host, port))).await {
        Ok(Ok(_)) => (true, String::new()),
        Ok(Err(e)) => (false, format!("dial tcp {host}:{port}: {e}")),
        Err(_) => (false, format!("dial tcp {host}:{port}: i/o timeout")),
    }
}

/// A GET over plain HTTP/1.1; 2xx and 3xx succeed (redirects are not followed), as the
/// kubelet's HTTP prober answers.
async fn http_probe(
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
    timeout: Duration,
) -> (bool, String) {
    let request = async {
        let mut stream = TcpStream::connect((host, port)).await?;
        let mut text = format!(
            "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kruise-probe/1.0\r\nAccept: */*\r\nConnection: close\r\n"
        );
        for (k, v) in headers {
            text.push_str(&format!("{k}: {v}\r\n"));
        }
        text.push_str("\r\n");
        stream.write_all(text.as_bytes()).await?;
        let mut body = Vec::new();
        stream.take(64 * 1024).read_to_end(&mut body).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&body).into_owned())
    };
    match tokio::time::timeout(timeout, request).await {
        Ok(Ok(response)) => {
            let code: u16 = response
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let body = response
                .split_once("\r\n\r\n")
                .map(|(_, b)| b)
                .unwrap_or_default();
            if (200..400).contains(&code) {
                (true, body.to_string())
            } else {
                (false, format!("HTTP probe failed with statuscode: {code}"))
            }
        }
        Ok(Err(e)) => (false, format!("Get \"http://{host}:{port}{path}\": {e}")),
        Err(_) => (
            false,
            format!("Get \"http://{host}:{port}{path}\": context deadline exceeded"),
        ),
    }
}

/// The status from the workers' results, written when it changed; an event on each Pod
/// whose probe changed state.
async fn write_status(
    api: &Api<NodePodProbe>,
    events: &kruise_runtime::Events,
    outcomes: &Outcomes,
    npp: &NodePodProbe,
    last_written: &mut Option<NodePodProbeStatus>,
) -> Result<(), Error> {
    let snapshot = lock(outcomes).clone();
    let (status, changed) =
        plan::status(&npp.spec, npp.status.as_ref(), &snapshot, Timestamp::now());
    let reported = npp.status.clone().unwrap_or_default();
    if reported == status || last_written.as_ref() == Some(&status) {
        return Ok(());
    }
    let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "add", "path": "/status", "value": status}
    ]))?;
    api.patch_status(
        &npp.name_any(),
        &PatchParams::default(),
        &Patch::Json::<()>(patch),
    )
    .await?;
    for key in changed {
        let Some(outcome) = snapshot.get(&key) else {
            continue;
        };
        let pod = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(key.namespace.clone()),
            name: Some(key.pod.clone()),
            uid: Some(key.uid.clone()),
            ..Default::default()
        };
        let reason = if outcome.state.as_str() == ProbeState::SUCCEEDED {
            EVENT_PROBE_SUCCEEDED
        } else {
            EVENT_PROBE_FAILED
        };
        events.normal(&pod, reason, outcome.message.clone());
    }
    *last_written = Some(status);
    Ok(())
}
