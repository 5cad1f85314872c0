//! `make bench-compare`'s floor: a client that makes exactly the API-minimum requests for
//! the CloneSet bench's outcome, at the same client limits, so a controller's time can be
//! given as a ratio to what this apiserver (and kwok, and the scheduler) allow at all.
//!
//! - `scale`: create N Pods (with a CloneSet Pod's readiness gates, `InPlaceUpdateReady`
//!   and `KruisePodReady`) and, once each is scheduled, one status patch setting both
//!   conditions True (what a CloneSet's Pod gets on its way to `Normal`); done when all N
//!   are patched and Ready.
//! - `inplace`: at most `--max-unavailable` Pods at a time, `InPlaceUpdateReady=False`,
//!   the image patched, and once the kubelet (kwok) reports the new image
//!   `InPlaceUpdateReady=True`; done when all N run the new image and are Ready.
//!
//! No controller logic, no cache beyond one watch of the Pods, no Events: 2 writes per Pod
//! scaling, 3 in place. The writes go through `kruise_runtime::client` (the controllers'
//! token bucket) with `--concurrency` in flight, the controllers' default bound. Prints
//! one JSON line: `{"phase", "pods", "seconds"}`; the requests are counted from the audit
//! log by its User-Agent, `bench-floor/<version>`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tokio::sync::{Semaphore, mpsc};

const LABEL: &str = "app=bench-floor";

#[derive(Parser)]
#[command(about = "the API-minimum client for make bench-compare")]
struct Args {
    phase: Phase,
    #[arg(long)]
    namespace: String,
    #[arg(long)]
    pods: usize,
    #[arg(long, default_value_t = 30.0)]
    qps: f64,
    #[arg(long, default_value_t = 50)]
    burst: u32,
    /// Writes in flight (the controllers' `CONCURRENT_WRITES`).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Pods in an in-place update at once (the CloneSet's maxUnavailable).
    #[arg(long, default_value_t = 200)]
    max_unavailable: usize,
    #[arg(long, default_value = "nginx:alpine")]
    image: String,
    #[arg(long, default_value = "nginx:1.27")]
    new_image: String,
    /// Give up after this many seconds (as the bench's 1800 s wait for a controller).
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
}

#[derive(Clone, Copy, ValueEnum)]
enum Phase {
    Scale,
    Inplace,
}

/// Where one Pod is; `busy` while its writes are in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Waiting,
    Patched,
    Unready,
    Readied,
    Done,
}

struct Tracked {
    step: Step,
    busy: bool,
    pod: Option<Pod>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut config = kube::Config::infer().await?;
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_str(&format!("bench-floor/{}", env!("CARGO_PKG_VERSION")))?,
    ));
    let metrics = kruise_runtime::metrics::Metrics::new();
    let client = kruise_runtime::client::build(config, args.qps, args.burst, &metrics)?;
    let api: Api<Pod> = Api::namespaced(client, &args.namespace);
    let started = Instant::now();
    tokio::time::timeout(
        std::time::Duration::from_secs(args.timeout),
        run(&args, api),
    )
    .await
    .map_err(|_| anyhow::anyhow!("not done after {} s", args.timeout))??;
    println!(
        "{}",
        json!({
            "phase": match args.phase { Phase::Scale => "scale", Phase::Inplace => "inplace" },
            "pods": args.pods,
            "seconds": (started.elapsed().as_secs_f64() * 100.0).round() / 100.0,
        })
    );
    Ok(())
}

fn name(i: usize) -> String {
    format!("floor-{i:05}")
}

fn condition(pod: &Pod, kind: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.clone())
}

fn ready(pod: &Pod) -> bool {
    condition(pod, "Ready").as_deref() == Some("True")
}

fn status_image(pod: &Pod) -> Option<&str> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()
        .map(|c| c.image.as_str())
}

/// A strategic merge patch of `pods/status` setting these conditions (merged by type).
fn condition_patch(conditions: &[(&str, &str)]) -> Patch<serde_json::Value> {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let conditions: Vec<_> = conditions
        .iter()
        .map(|(kind, status)| json!({"type": kind, "status": status, "lastTransitionTime": now}))
        .collect();
    Patch::Strategic(json!({"status": {"conditions": conditions}}))
}

async fn run(args: &Args, api: Api<Pod>) -> anyhow::Result<()> {
    let writes = Arc::new(Semaphore::new(args.concurrency.max(1)));
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<anyhow::Result<String>>();
    let mut pods: BTreeMap<String, Tracked> = (0..args.pods)
        .map(|i| {
            let tracked = Tracked {
                step: Step::Waiting,
                busy: false,
                pod: None,
            };
            (name(i), tracked)
        })
        .collect();
    let mut events = watcher(
        api.clone(),
        watcher::Config::default().labels(LABEL).any_semantic(),
    )
    .default_backoff()
    .applied_objects()
    .boxed();

    if let Phase::Scale = args.phase {
        for name in pods.keys() {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"app": "bench-floor"}},
                "spec": {
                    "readinessGates": [
                        {"conditionType": "InPlaceUpdateReady"},
                        {"conditionType": "KruisePodReady"},
                    ],
                    "containers": [{"name": "main", "image": args.image}],
                },
            }))?;
            spawn_write(&writes, &done_tx, name.clone(), {
                let api = api.clone();
                async move {
                    api.create(&PostParams::default(), &pod).await?;
                    Ok(())
                }
            });
        }
    }

    let mut in_flight = 0usize;
    loop {
        if pods.values().all(|t| t.step == Step::Done) {
            return Ok(());
        }
        tokio::select! {
            event = events.next() => {
                let pod = event.context("the Pod watch ended")??;
                let Some(name) = pod.metadata.name.clone() else { continue };
                if let Some(t) = pods.get_mut(&name) {
                    t.pod = Some(pod);
                }
            }
            done = done_rx.recv() => {
                let name = done.context("the write channel closed")??;
                if let Some(t) = pods.get_mut(&name) {
                    t.busy = false;
                }
            }
        }
        for (name, t) in pods.iter_mut() {
            let Some(pod) = t.pod.as_ref() else { continue };
            if t.busy {
                continue;
            }
            match (args.phase, t.step) {
                (Phase::Scale, Step::Waiting)
                    if pod
                        .spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_ref())
                        .is_some() =>
                {
                    t.step = Step::Patched;
                    t.busy = true;
                    let ready = [("InPlaceUpdateReady", "True"), ("KruisePodReady", "True")];
                    set_conditions(&api, &writes, &done_tx, name, &ready);
                }
                (Phase::Scale, Step::Patched) if ready(pod) => t.step = Step::Done,
                (Phase::Inplace, Step::Waiting) if in_flight < args.max_unavailable => {
                    in_flight += 1;
                    t.step = Step::Unready;
                    t.busy = true;
                    let (api, name2, image) = (api.clone(), name.clone(), args.new_image.clone());
                    spawn_write(&writes, &done_tx, name.clone(), async move {
                        let pp = PatchParams::default();
                        api.patch_status(
                            &name2,
                            &pp,
                            &condition_patch(&[("InPlaceUpdateReady", "False")]),
                        )
                        .await?;
                        let image: json_patch::Patch = serde_json::from_value(json!([
                            {"op": "replace", "path": "/spec/containers/0/image", "value": image}
                        ]))?;
                        api.patch(&name2, &pp, &Patch::<()>::Json(image)).await?;
                        Ok(())
                    });
                }
                (Phase::Inplace, Step::Unready) if status_image(pod) == Some(&args.new_image) => {
                    t.step = Step::Readied;
                    t.busy = true;
                    set_conditions(
                        &api,
                        &writes,
                        &done_tx,
                        name,
                        &[("InPlaceUpdateReady", "True")],
                    );
                }
                (Phase::Inplace, Step::Readied)
                    if ready(pod)
                        && condition(pod, "InPlaceUpdateReady").as_deref() == Some("True") =>
                {
                    t.step = Step::Done;
                    in_flight -= 1;
                }
                _ => {}
            }
        }
    }
}

/// One status patch of the Pod's conditions, under the concurrency bound.
fn set_conditions(
    api: &Api<Pod>,
    writes: &Arc<Semaphore>,
    done: &mpsc::UnboundedSender<anyhow::Result<String>>,
    name: &str,
    conditions: &[(&str, &str)],
) {
    let (api, name2, patch) = (api.clone(), name.to_string(), condition_patch(conditions));
    spawn_write(writes, done, name.to_string(), async move {
        api.patch_status(&name2, &PatchParams::default(), &patch)
            .await?;
        Ok(())
    });
}

/// Runs one Pod's writes under the concurrency bound and reports the Pod when they end.
fn spawn_write(
    writes: &Arc<Semaphore>,
    done: &mpsc::UnboundedSender<anyhow::Result<String>>,
    name: String,
    write: impl std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
) {
    let (writes, done) = (writes.clone(), done.clone());
    tokio::spawn(async move {
        let result = match writes.acquire_owned().await {
            Ok(_permit) => write.await.map(|()| name.clone()),
            Err(e) => Err(e.into()),
        };
        let _ = done.send(result.with_context(|| format!("writing Pod {name}")));
    });
}
