//! The PodProbeMarker and NodePodProbe controllers (`apps.kruise.io/v1alpha1`,
//! openkruise/kruise v1.9.0 pkg/controller/podprobemarker and pkg/controller/nodepodprobe)
//! and the PodProbeMarker validating webhook (pkg/webhook/podprobemarker/validating).
//!
//! Two loops run while this replica leads:
//!
//! - the **marker controller** (one reconcile per PodProbeMarker): keeps the finalizer
//!   `kruise.io/node-pod-probe-cleanup` on a marker until no NodePodProbe lists its
//!   probes, and writes its status (`matchedPods`, `observedGeneration`);
//! - the **node sweep**: on any change of a marker, Pod, Node or NodePodProbe (debounced),
//!   plans every NodePodProbe (one per Ready node, its Pod list) and every Pod mark the
//!   NodePodProbes' statuses call for ([`plan::plan`], pure), and carries the writes out.
//!
//! The probes themselves are run by the node agent (`daemon-agent`), which writes their
//! results to its node's NodePodProbe status.

pub mod error;
pub mod events;
pub mod plan;
pub mod reconcile;
pub mod webhook;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, PodStatus};
use kruise_api::apps_v1alpha1::{NodePodProbe, PodProbeMarker};
use kruise_runtime::cache::prune;
use kruise_runtime::{Cache, Reconciler, Runtime};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

pub use crate::events::{CONTROLLER_NAME, IDENTITY};

/// What every reconcile and admission shares.
pub struct Context {
    pub client: kube::Client,
    pub markers: Cache<PodProbeMarker>,
    pub node_probes: Cache<NodePodProbe>,
    pub nodes: Cache<Node>,
    /// The Pods of the scope, pruned to what selection, ports and marks read.
    pub pods: Cache<Pod>,
    /// `KRUISE_WATCH_NAMESPACE` of this instance.
    pub scope: Option<String>,
    pub reconciler: Reconciler,
    /// `PodProbeMarkerGate` and `KruiseDaemon` are both on.
    pub enabled: bool,
}

/// A node as the NodePodProbe lifecycle needs it: name, labels, Ready condition.
fn prune_node(node: &mut Node) {
    prune(node);
    node.metadata.annotations = None;
    node.spec = None;
    if let Some(status) = node.status.as_mut() {
        let conditions = status.conditions.take();
        *status = Default::default();
        status.conditions =
            conditions.map(|c| c.into_iter().filter(|c| c.type_ == "Ready").collect());
    }
}

/// A Pod as the controllers read it: labels, annotations, node, containers' names and
/// ports, phase, IP, conditions.
fn prune_pod(pod: &mut Pod) {
    prune(pod);
    if let Some(spec) = pod.spec.take() {
        let containers = spec
            .containers
            .into_iter()
            .map(|c| k8s_openapi::api::core::v1::Container {
                name: c.name,
                ports: c.ports,
                ..Default::default()
            })
            .collect();
        pod.spec = Some(PodSpec {
            node_name: spec.node_name,
            containers,
            ..Default::default()
        });
    }
    if let Some(status) = pod.status.take() {
        pod.status = Some(PodStatus {
            phase: status.phase,
            pod_ip: status.pod_ip,
            conditions: status.conditions,
            ..Default::default()
        });
    }
}

/// The caches and the shared context.
pub fn context(runtime: &Runtime) -> Arc<Context> {
    let enabled = runtime
        .gates
        .enabled(kruise_runtime::gates::POD_PROBE_MARKER_GATE)
        && runtime.gates.enabled(kruise_runtime::gates::KRUISE_DAEMON);
    Arc::new(Context {
        client: runtime.client.clone(),
        markers: runtime.tolerant_cache::<PodProbeMarker>(watcher::Config::default(), prune),
        node_probes: runtime.cluster_cache::<NodePodProbe>(watcher::Config::default(), prune),
        nodes: runtime.cluster_cache::<Node>(watcher::Config::default(), prune_node),
        pods: runtime.cache::<Pod>(watcher::Config::default(), prune_pod),
        scope: runtime.settings.watch_namespace.clone(),
        reconciler: Reconciler::new(runtime.metrics.clone(), CONTROLLER_NAME, "PodProbeMarker"),
        enabled,
    })
}

/// The markers of `pod`'s namespace: a Pod change may change their `matchedPods`.
fn markers_of(markers: &Store<PodProbeMarker>, pod: &Pod) -> Vec<ObjectRef<PodProbeMarker>> {
    markers
        .state()
        .into_iter()
        .filter(|m| m.metadata.namespace == pod.metadata.namespace)
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect()
}

/// Runs until shutdown: every replica keeps its caches warm and serves admission; only
/// the lease holder reconciles.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    // The webhook reads no cache.
    for check in [
        kruise_runtime::cache::check_name::<PodProbeMarker>(),
        kruise_runtime::cache::check_name::<NodePodProbe>(),
        kruise_runtime::cache::check_name::<Node>(),
        kruise_runtime::cache::check_name::<Pod>(),
    ] {
        runtime.readiness.only_controller_waits_for(&check);
    }
    let routes = webhook::routes(ctx.enabled);
    let controllers = |workers| {
        let ctx = ctx.clone();
        async move {
            if !ctx.enabled {
                // As OpenKruise, which does not start either controller without both gates.
                std::future::pending::<()>().await;
            }
            let store = ctx.markers.store().clone();
            let on_pod = move |pod: Arc<Pod>| markers_of(&store, &pod);
            let r = &ctx.reconciler;
            let controller = r
                .controller(&ctx.markers, workers)
                .watches_shared_stream(ctx.pods.subscribe(), on_pod);
            let markers = r.run_with(controller, ctx.clone(), reconcile::reconcile_marker);
            let sweeper = tokio::spawn(reconcile::run_sweeps(ctx.clone()));
            markers.await;
            sweeper.abort();
        }
    };
    runtime
        .serve_with_webhooks(routes, webhook::configurations, controllers)
        .await?;
    Ok(())
}
