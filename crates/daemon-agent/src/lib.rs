//! `daemon-agent`: the node agent, kruise-daemon's counterpart (openkruise/kruise v1.9.0
//! pkg/daemon; one per node, a DaemonSet; see docs/architecture.md). It watches only its own
//! NodeImage (field selector `metadata.name=<node>`), pulls the listed image tags through the
//! node's CRI runtime ([`cri`]), and reports the pull progress in the NodeImage's status, one write
//! per change of phase. It never creates Kubernetes objects other than Events, and never creates or
//! starts containers.
//!
//! What it decides is in [`plan`] (pure); [`puller`] runs one worker per tag.
//!
//! It also serves its node's ContainerRecreateRequests (upstream's pkg/daemon/containerrecreate):
//! [`crr`] watches them and stops containers through the CRI, [`crr_plan`] decides (pure).
//! [`containermeta`]: env from metadata. It watches its node's Pods and restarts, during
//! an in-place update, exactly the containers whose env reads a label or annotation that
//! changed. [`podprobe`]: the PodProbeMarker probes of its node's NodePodProbe, their
//! results written to its status ([`podprobe_plan`] decides).

pub mod auth;
pub mod containermeta;
pub mod cri;
pub mod crr;
pub mod crr_plan;
pub mod error;
pub mod metrics;
pub mod plan;
pub mod podprobe;
pub mod podprobe_plan;
pub mod puller;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kruise_api::apps_v1alpha1::{NodeImage, NodeImageStatus};
use kruise_runtime::Runtime;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};

pub use crate::error::Error;

/// The agent's controller name (event reporter, field manager).
pub const CONTROLLER_NAME: &str = "daemon-agent";
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);

/// Where the agent runs and what it talks to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentConfig {
    /// The node this agent serves: its NodeImage has the same name.
    pub node_name: String,
    /// The CRI socket.
    pub socket: PathBuf,
    /// Cap on concurrent pulls (`None`: one per tag, no cap).
    pub max_concurrent_pulls: Option<usize>,
}

impl AgentConfig {
    /// From flags (`--node-name`, `--socket-file`, `--max-concurrent-pulls`, each `=v` or
    /// ` v`) over the environment (`KRUISE_NODE_NAME` or the Downward API's `NODE_NAME`,
    /// `KRUISE_CRI_SOCKET`, `KRUISE_MAX_CONCURRENT_PULLS`); without a socket, discovery
    /// under the host's `/var/run` mounted at `KRUISE_HOST_VAR_RUN` (`/hostvarrun`).
    pub fn from_args_and_env(
        args: impl IntoIterator<Item = String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, Error> {
        let mut flags = std::collections::BTreeMap::new();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let Some(flag) = arg.strip_prefix("--") else {
                continue;
            };
            match flag.split_once('=') {
                Some((k, v)) => flags.insert(k.to_string(), v.to_string()),
                None => flags.insert(flag.to_string(), args.next().unwrap_or_default()),
            };
        }
        let pick = |flag: &str, vars: &[&str]| {
            flags
                .get(flag)
                .cloned()
                .or_else(|| vars.iter().find_map(|v| env(v)))
                .filter(|v| !v.is_empty())
        };
        let node_name =
            pick("node-name", &["KRUISE_NODE_NAME", "NODE_NAME"]).ok_or(Error::NoNodeName)?;
        let var_run = env("KRUISE_HOST_VAR_RUN").unwrap_or_else(|| cri::HOST_VAR_RUN.into());
        let socket = cri::discover_socket(
            pick("socket-file", &["KRUISE_CRI_SOCKET"]).as_deref(),
            Path::new(&var_run),
        )?;
        let max_concurrent_pulls = pick("max-concurrent-pulls", &["KRUISE_MAX_CONCURRENT_PULLS"])
            .map(|v| {
                v.parse::<usize>().map_err(|_| {
                    Error::Setting(
                        "--max-concurrent-pulls".into(),
                        format!("{v:?}: expected a whole number (0 = no cap)"),
                    )
                })
            })
            .transpose()?
            .filter(|n| *n > 0);
        Ok(AgentConfig {
            node_name,
            socket,
            max_concurrent_pulls,
        })
    }
}

/// `main`'s entry: the configuration from the process's flags and environment.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let config =
        AgentConfig::from_args_and_env(std::env::args().skip(1), |k| std::env::var(k).ok())?;
    run_agent(runtime, config).await
}

fn node_image_ref(name: &str, uid: Option<String>) -> ObjectReference {
    ObjectReference {
        api_version: Some(NodeImage::api_version(&()).into()),
        kind: Some(NodeImage::kind(&()).into()),
        name: Some(name.to_string()),
        uid,
        ..Default::default()
    }
}

/// Runs the agent for `config.node_name` until shutdown.
pub async fn run_agent(runtime: Runtime, config: AgentConfig) -> anyhow::Result<()> {
    let cri = cri::Cri::connect(&config.socket)?;
    let cri_ready = runtime.readiness.register("cri");
    // The runtime may start after the agent: probe until it answers CRI v1.
    loop {
        match (cri.probe().await, cri.version().await) {
            (Ok(()), Ok((name, version))) => {
                tracing::info!(socket = %config.socket.display(), runtime = %name, %version, node = %config.node_name, "CRI v1 runtime found");
                cri_ready.set_ready();
                break;
            }
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(socket = %config.socket.display(), error = %e, "CRI runtime not answering; retrying");
                tokio::select! {
                    _ = runtime.shutdown.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                }
            }
        }
    }

    // ContainerRecreateRequests: a loop of its own, independent of the NodeImage puller.
    let crr_loop = tokio::spawn({
        let (runtime, cri, node) = (runtime.clone(), cri.clone(), config.node_name.clone());
        async move {
            if let Err(e) = crr::run(runtime, cri, node).await {
                tracing::error!(error = %e, "ContainerRecreateRequest loop stopped");
            }
        }
    });
    // Env from metadata: its own loop over this node's Pods (see `containermeta`).
    let container_meta = runtime
        .gates
        .enabled(kruise_runtime::gates::IN_PLACE_UPDATE_ENV_FROM_METADATA)
        .then(|| containermeta::spawn(&runtime, cri.clone(), &config.node_name));
    // PodProbeMarker probes of this node's NodePodProbe (see `podprobe`).
    let prober = runtime
        .gates
        .enabled(kruise_runtime::gates::POD_PROBE_MARKER_GATE)
        .then(|| podprobe::spawn(&runtime, cri.clone(), &config.node_name));

    let metrics = metrics::AgentMetrics::register(&runtime.metrics.registry);
    let api: Api<NodeImage> = Api::all(runtime.client.clone());
    let (tx, mut rx) = tokio::sync::watch::channel::<Option<Arc<NodeImage>>>(None);
    let watch_ready = runtime.readiness.register("watch nodeimage");
    let selector = format!("metadata.name={}", config.node_name);
    let watch = watcher(api.clone(), watcher::Config::default().fields(&selector))
        .default_backoff()
        .for_each(move |event| {
            match event {
                Ok(watcher::Event::Apply(ni) | watcher::Event::InitApply(ni)) => {
                    tx.send_replace(Some(Arc::new(ni)));
                }
                Ok(watcher::Event::Delete(_)) => {
                    tx.send_replace(None);
                }
                Ok(watcher::Event::InitDone) => watch_ready.set_ready(),
                Ok(watcher::Event::Init) => {}
                Err(e) => tracing::warn!(error = %e, "NodeImage watch"),
            }
            futures::future::ready(())
        });
    let watch = tokio::spawn(watch);

    let puller = puller::Puller::new(
        cri,
        runtime.client.clone(),
        runtime.events(),
        metrics.clone(),
        node_image_ref(&config.node_name, None),
        config.max_concurrent_pulls,
    );
    let mut last_written: Option<NodeImageStatus> = None;
    let mut retry = false;
    loop {
        tokio::select! {
            _ = runtime.shutdown.cancelled() => break,
            changed = rx.changed() => if changed.is_err() { break },
            _ = puller.changed.notified() => {}
            _ = tokio::time::sleep(Duration::from_secs(1)), if retry => {}
        }
        let current = rx.borrow_and_update().clone();
        let Some(node_image) = current else {
            puller.sync(&[], &[]);
            continue;
        };
        retry = match step(&api, &puller, &node_image, &mut last_written).await {
            Ok(()) => false,
            Err(e) => {
                tracing::warn!(node = %config.node_name, error = %e, "NodeImage status write failed; retrying");
                true
            }
        };
    }
    puller.stop();
    watch.abort();
    crr_loop.abort();
    if let Some(task) = container_meta {
        task.abort();
    }
    if let Some(task) = prober {
        task.abort();
    }
    Ok(())
}

/// One pass: workers to match the spec, then the status if it changed.
async fn step(
    api: &Api<NodeImage>,
    puller: &Arc<puller::Puller>,
    node_image: &NodeImage,
    last_written: &mut Option<NodeImageStatus>,
) -> Result<(), Error> {
    let all = plan::tasks(&node_image.spec);
    let reported = node_image.status.as_ref();
    let merged = {
        let live = puller
            .states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        plan::status(&node_image.spec, reported, &live)
    };
    let wanted: Vec<_> = all
        .iter()
        .filter(|t| plan::needs_pull(t, &merged))
        .cloned()
        .collect();
    puller.sync(&all, &wanted);
    let status = {
        let live = puller
            .states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        plan::status(&node_image.spec, reported, &live)
    };
    if reported == Some(&status) || last_written.as_ref() == Some(&status) {
        return Ok(());
    }
    // The whole status is replaced: tags that left the spec leave the status too.
    let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
        {"op": "add", "path": "/status", "value": status}
    ]))?;
    api.patch_status(
        &node_image.name_any(),
        &PatchParams::default(),
        &Patch::Json::<()>(patch),
    )
    .await?;
    puller.metrics.status_writes.inc();
    *last_written = Some(status);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn flags_override_env() {
        let c = AgentConfig::from_args_and_env(
            ["--node-name=real-0", "--socket-file", "/run/c.sock"].map(String::from),
            env(&[("NODE_NAME", "other"), ("KRUISE_CRI_SOCKET", "/x")]),
        )
        .unwrap();
        assert_eq!(c.node_name, "real-0");
        assert_eq!(c.socket, PathBuf::from("/run/c.sock"));
        assert_eq!(c.max_concurrent_pulls, None);
        let c = AgentConfig::from_args_and_env(
            Vec::<String>::new(),
            env(&[
                ("NODE_NAME", "n1"),
                ("KRUISE_CRI_SOCKET", "unix:///x.sock"),
                ("KRUISE_MAX_CONCURRENT_PULLS", "2"),
            ]),
        )
        .unwrap();
        assert_eq!(
            (c.node_name.as_str(), c.socket.to_str()),
            ("n1", Some("/x.sock"))
        );
        assert_eq!(c.max_concurrent_pulls, Some(2));
    }

    #[test]
    fn missing_node_or_socket_or_bad_number_is_an_error() {
        let none = AgentConfig::from_args_and_env(Vec::<String>::new(), env(&[]));
        assert!(matches!(none, Err(Error::NoNodeName)));
        let no_socket = AgentConfig::from_args_and_env(
            Vec::<String>::new(),
            env(&[("NODE_NAME", "n"), ("KRUISE_HOST_VAR_RUN", "/nonexistent")]),
        );
        assert!(matches!(no_socket, Err(Error::NoSocket(_))));
        let bad = AgentConfig::from_args_and_env(
            ["--max-concurrent-pulls=lots"].map(String::from),
            env(&[("NODE_NAME", "n"), ("KRUISE_CRI_SOCKET", "/x")]),
        );
        assert!(matches!(bad, Err(Error::Setting(..))));
    }
}
