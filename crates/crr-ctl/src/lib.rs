//! The manager side of ContainerRecreateRequest (openkruise/kruise v1.9.0
//! pkg/controller/containerrecreaterequest and pkg/webhook/containerrecreaterequest; the feature is
//! introduced in OpenKruise v0.9.0 release notes): the admission webhook that checks and stamps
//! requests, and the controller that holds the Pod NotReady while asked to, feeds the node agent
//! the Pod's container statuses, finishes requests the agent cannot (Pod gone, no answer, deadline)
//! and deletes them after their TTL. The containers are stopped by the node agent (`daemon-agent`).
//! Everything decided is in [`plan`] (pure) and [`webhook`] (pure checks, thin routes).

pub mod error;
pub mod plan;
pub mod reconcile;
pub mod sidecarterminator;
pub mod webhook;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::ContainerRecreateRequest;
use kruise_runtime::cache::prune;
use kruise_runtime::{Cache, Reconciler, Runtime};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

/// The controller's name: Lease, field manager, event reporter.
pub const CONTROLLER_NAME: &str = "containerrecreaterequest-controller";
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);
/// SidecarTerminator's name (metrics, events), a second controller of this binary.
pub const SIDECAR_TERMINATOR_NAME: &str = "sidecarterminator-controller";

/// What every reconcile shares.
pub struct Context {
    pub client: kube::Client,
    pub crrs: Cache<ContainerRecreateRequest>,
    pub pods: Cache<Pod>,
    pub reconciler: Reconciler,
    /// SidecarTerminator's reconciler and events.
    pub terminator: Reconciler,
    pub events: kruise_runtime::events::Events,
}

/// A Pod as the manager needs it: identity, readiness gates, conditions and container
/// statuses (the spec's containers go: preStop and ports are read by admission, fresh),
/// and the env vars SidecarTerminator reads.
fn prune_pod(pod: &mut Pod) {
    prune(pod);
    pod.metadata.annotations = None;
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers.iter_mut().for_each(|c| {
            c.env = c
                .env
                .take()
                .map(|env| {
                    env.into_iter()
                        .filter(|e| sidecarterminator::ENV.contains(&e.name.as_str()))
                        .collect::<Vec<_>>()
                })
                .filter(|env| !env.is_empty());
            c.lifecycle = None;
            c.ports = None;
            c.volume_mounts = None;
        });
        spec.volumes = None;
    }
}

pub fn context(runtime: &Runtime) -> Arc<Context> {
    Arc::new(Context {
        client: runtime.client.clone(),
        crrs: runtime.tolerant_cache::<ContainerRecreateRequest>(watcher::Config::default(), prune),
        pods: runtime.cache::<Pod>(watcher::Config::default(), prune_pod),
        reconciler: Reconciler::new(
            runtime.metrics.clone(),
            CONTROLLER_NAME,
            "ContainerRecreateRequest",
        ),
        terminator: Reconciler::new(runtime.metrics.clone(), SIDECAR_TERMINATOR_NAME, "Pod"),
        events: kruise_runtime::events::Events::new(
            runtime.client.clone(),
            SIDECAR_TERMINATOR_NAME,
        ),
    })
}

/// The unfinished requests for a Pod (same namespace, `spec.podName`): a change of the Pod
/// may finish them ("pod has gone") or change what the agent is told.
fn requests_of(
    crrs: &kube::runtime::reflector::Store<ContainerRecreateRequest>,
    pod: &Pod,
) -> Vec<ObjectRef<ContainerRecreateRequest>> {
    let (ns, name) = (
        pod.metadata.namespace.as_deref(),
        pod.metadata.name.as_deref(),
    );
    crrs.state()
        .into_iter()
        .filter(|c| c.metadata.namespace.as_deref() == ns)
        .filter(|c| Some(c.spec.pod_name.as_str()) == name)
        .filter(|c| {
            c.status
                .as_ref()
                .is_none_or(|s| s.completion_time.is_none())
        })
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// Runs until shutdown: every replica keeps its caches warm and serves admission; only
/// the lease holder reconciles.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    let daemon_enabled = runtime.gates.enabled(kruise_runtime::gates::KRUISE_DAEMON);
    // SidecarTerminator stops sidecars through requests the node agent carries out.
    let terminator_enabled = daemon_enabled
        && runtime
            .gates
            .enabled(kruise_runtime::gates::SIDECAR_TERMINATOR);
    let routes = webhook::routes(runtime.client.clone(), daemon_enabled);
    let controller = |workers| {
        let ctx = ctx.clone();
        async move {
            if !daemon_enabled {
                // Nothing can be admitted: no requests to manage (as OpenKruise, which
                // does not start the controller without the gate).
                std::future::pending::<()>().await;
            }
            let store = ctx.crrs.store().clone();
            let on_pod = move |pod: Arc<Pod>| requests_of(&store, &pod);
            let r = &ctx.reconciler;
            let controller = r
                .controller(&ctx.crrs, workers)
                .watches_shared_stream(ctx.pods.subscribe(), on_pod);
            let requests = r.run_with(controller, ctx.clone(), reconcile::reconcile);
            if terminator_enabled {
                let t = &ctx.terminator;
                // A request that goes away lets the next one of its Pod be made.
                let on_request = |crr: Arc<ContainerRecreateRequest>| {
                    let namespace = crr.metadata.namespace.clone().unwrap_or_default();
                    Some(ObjectRef::<Pod>::new(&crr.spec.pod_name).within(&namespace))
                };
                let pods = t
                    .controller(&ctx.pods, workers)
                    .watches_shared_stream(ctx.crrs.subscribe(), on_request);
                let terminator = t.run_with(pods, ctx.clone(), sidecarterminator::reconcile);
                tokio::join!(requests, terminator);
            } else {
                requests.await;
            }
        }
    };
    runtime
        .serve_with_webhooks(routes, webhook::configurations, controller)
        .await?;
    Ok(())
}
