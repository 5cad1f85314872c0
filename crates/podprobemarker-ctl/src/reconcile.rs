//! The I/O around [`crate::plan`]: the marker reconcile (finalizer, status) and the node
//! sweep (NodePodProbes and Pod marks).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::apps_v1alpha1::{
    NodePodProbe, NodePodProbeSpec, POD_PROBE_MARKER_FINALIZER, PodProbeMarker,
};
use kruise_runtime::api_error::{is_already_exists, is_not_found};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action as Requeue;
use tokio::sync::Notify;

use crate::error::Result;
use crate::plan::{self, Action, World};
use crate::{CONTROLLER_NAME, Context};

fn has_finalizer(marker: &PodProbeMarker) -> bool {
    marker
        .finalizers()
        .iter()
        .any(|f| f == POD_PROBE_MARKER_FINALIZER)
}

/// The finalizers of `marker` with ours added or removed, written only if the marker is
/// still at the version read (a conflict is retried by the controller).
async fn set_finalizer(api: &Api<PodProbeMarker>, marker: &PodProbeMarker, on: bool) -> Result<()> {
    let mut finalizers: Vec<String> = marker
        .finalizers()
        .iter()
        .filter(|f| *f != POD_PROBE_MARKER_FINALIZER)
        .cloned()
        .collect();
    if on {
        finalizers.push(POD_PROBE_MARKER_FINALIZER.to_string());
    }
    let patch = serde_json::json!({
        "metadata": {
            "resourceVersion": marker.resource_version(),
            "finalizers": finalizers,
        }
    });
    match api
        .patch(
            &marker.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        Err(e) if is_not_found(&e) => Ok(()),
        other => other.map(|_| ()).map_err(Into::into),
    }
}

/// One PodProbeMarker: its finalizer while its probes are listed in NodePodProbes, its
/// status (`matchedPods`, `observedGeneration`).
pub async fn reconcile_marker(marker: Arc<PodProbeMarker>, ctx: Arc<Context>) -> Result<Requeue> {
    let api: Api<PodProbeMarker> =
        Api::namespaced(ctx.client.clone(), &marker.namespace().unwrap_or_default());
    let node_probes = ctx.node_probes.store().state();
    if marker.metadata.deletion_timestamp.is_some() {
        if !has_finalizer(&marker) {
            return Ok(Requeue::await_change());
        }
        // The node sweep drops a deleted marker's probes; the finalizer goes once the
        // cache shows every NodePodProbe without them.
        if plan::still_listed(&marker, &node_probes) {
            return Ok(Requeue::requeue(Duration::from_secs(1)));
        }
        set_finalizer(&api, &marker, false).await?;
        return Ok(Requeue::await_change());
    }
    if !has_finalizer(&marker) {
        set_finalizer(&api, &marker, true).await?;
    }
    let pods = ctx.pods.store().state();
    let nodes = ctx.nodes.store().state();
    let status = plan::marker_status(&marker, &pods, &nodes);
    if marker.status.as_ref() != Some(&status) {
        kruise_runtime::apply_status(&api, &marker, &status, CONTROLLER_NAME).await?;
    }
    Ok(Requeue::await_change())
}

/// Writes of the last pass the caches may not show yet: the resourceVersion of the
/// object each was computed from, by NodePodProbe name or Pod UID. While the cache still
/// shows that version the object is left out of the next plan's writes, so a stale cache
/// neither fails a second spec write with a conflict nor repeats a Pod patch.
#[derive(Default)]
struct Pending {
    node_probes: HashMap<String, String>,
    pods: HashMap<String, String>,
}

impl Pending {
    fn waits(&self, action: &Action, world: &World) -> bool {
        match action {
            Action::UpdateNodeProbeSpec {
                name,
                resource_version,
                ..
            } => self.node_probes.get(name) == Some(resource_version),
            Action::MarkPod(marks) => world
                .pods
                .iter()
                .find(|p| p.metadata.uid.as_deref() == Some(marks.uid.as_str()))
                .and_then(|p| p.metadata.resource_version.as_ref())
                .is_some_and(|rv| self.pods.get(&marks.uid) == Some(rv)),
            _ => false,
        }
    }
}

/// One pass: plan from the caches, carry the writes out. Returns whether every write
/// went through.
async fn sweep(ctx: &Context, pending: &mut Pending) -> bool {
    let markers = ctx.markers.store().state();
    let pods = ctx.pods.store().state();
    let nodes = ctx.nodes.store().state();
    let node_probes = ctx.node_probes.store().state();
    let world = World {
        markers: &markers,
        pods: &pods,
        nodes: &nodes,
        node_probes: &node_probes,
        scope: ctx.scope.as_deref(),
    };
    let actions: Vec<Action> = plan::plan(&world)
        .into_iter()
        .filter(|a| !pending.waits(a, &world))
        .collect();
    let mut ok = true;
    for action in actions {
        let pod_rv = match &action {
            Action::MarkPod(m) => pods
                .iter()
                .find(|p| p.metadata.uid.as_deref() == Some(m.uid.as_str()))
                .and_then(|p| p.metadata.resource_version.clone()),
            _ => None,
        };
        let described = describe(&action);
        match execute(ctx, &action).await {
            Ok(()) => {
                tracing::debug!(action = %described, "done");
                match &action {
                    Action::UpdateNodeProbeSpec {
                        name,
                        resource_version,
                        ..
                    } => {
                        pending
                            .node_probes
                            .insert(name.clone(), resource_version.clone());
                    }
                    Action::MarkPod(m) => {
                        if let Some(rv) = pod_rv {
                            pending.pods.insert(m.uid.clone(), rv);
                        }
                    }
                    _ => {}
                }
            }
            Err(e) => {
                ok = false;
                tracing::warn!(action = %described, error = %e, "write failed; retrying");
            }
        }
    }
    // Forget what the caches have moved past (or no longer hold).
    pending.node_probes.retain(|name, rv| {
        node_probes.iter().any(|n| {
            n.metadata.name.as_ref() == Some(name)
                && n.metadata.resource_version.as_ref() == Some(rv)
        })
    });
    pending.pods.retain(|uid, rv| {
        pods.iter().any(|p| {
            p.metadata.uid.as_ref() == Some(uid) && p.metadata.resource_version.as_ref() == Some(rv)
        })
    });
    ok
}

fn describe(action: &Action) -> String {
    match action {
        Action::CreateNodeProbe { node, .. } => format!("create NodePodProbe {node}"),
        Action::DeleteNodeProbe { name, .. } => format!("delete NodePodProbe {name}"),
        Action::UpdateNodeProbeSpec { name, .. } => format!("update NodePodProbe {name} spec"),
        Action::MarkPod(m) => format!("mark Pod {}/{}", m.namespace, m.name),
    }
}

async fn execute(ctx: &Context, action: &Action) -> Result<()> {
    let node_probes: Api<NodePodProbe> = Api::all(ctx.client.clone());
    match action {
        Action::CreateNodeProbe { node, spec } => {
            let npp = NodePodProbe {
                metadata: ObjectMeta {
                    name: Some(node.clone()),
                    ..Default::default()
                },
                spec: spec.clone(),
                status: None,
            };
            match node_probes.create(&PostParams::default(), &npp).await {
                Err(e) if is_already_exists(&e) => Ok(()),
                other => other.map(|_| ()).map_err(Into::into),
            }
        }
        Action::DeleteNodeProbe { name, uid } => {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(uid.clone()),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match node_probes.delete(name, &params).await {
                Err(e) if is_not_found(&e) => Ok(()),
                other => other.map(|_| ()).map_err(Into::into),
            }
        }
        Action::UpdateNodeProbeSpec {
            name,
            resource_version,
            spec,
        } => {
            let patch = spec_patch(resource_version, spec)?;
            match node_probes
                .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Err(e) if is_not_found(&e) => Ok(()),
                other => other.map(|_| ()).map_err(Into::into),
            }
        }
        Action::MarkPod(marks) => {
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &marks.namespace);
            // `pods/status` keeps label and annotation changes, so one write carries
            // both, as upstream's `Status().Update` does.
            match pods
                .patch_status(
                    &marks.name,
                    &PatchParams::default(),
                    &Patch::Strategic(marks.patch()),
                )
                .await
            {
                Err(e) if is_not_found(&e) => Ok(()),
                other => other.map(|_| ()).map_err(Into::into),
            }
        }
    }
}

/// The merge patch replacing a NodePodProbe's Pod list, if it is still at
/// `resource_version` (an empty list is written as `null`: removed).
pub fn spec_patch(resource_version: &str, spec: &NodePodProbeSpec) -> Result<serde_json::Value> {
    let list = if spec.pod_probes.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::to_value(&spec.pod_probes)?
    };
    Ok(serde_json::json!({
        "metadata": { "resourceVersion": resource_version },
        "spec": { "podProbes": list },
    }))
}

/// Runs the node sweep whenever a marker, Pod, Node or NodePodProbe changes (debounced),
/// and again 2 s after a pass with a failed write, until aborted.
pub async fn run_sweeps(ctx: Arc<Context>) {
    let wake = Arc::new(Notify::new());
    for stream in [
        ctx.markers.subscribe().map(|_| ()).boxed(),
        ctx.pods.subscribe().map(|_| ()).boxed(),
        ctx.nodes.subscribe().map(|_| ()).boxed(),
        ctx.node_probes.subscribe().map(|_| ()).boxed(),
    ] {
        let wake = wake.clone();
        tokio::spawn(stream.for_each(move |()| {
            wake.notify_one();
            futures::future::ready(())
        }));
    }
    let mut pending = Pending::default();
    let mut wait = Duration::ZERO;
    loop {
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
        // Debounce a burst of changes into one pass.
        tokio::time::sleep(Duration::from_millis(100)).await;
        wait = if sweep(&ctx, &mut pending).await {
            Duration::from_secs(300)
        } else {
            Duration::from_secs(2)
        };
    }
}
