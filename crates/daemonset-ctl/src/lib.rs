//! The Advanced DaemonSet controller (`apps.kruise.io/v1alpha1` DaemonSet): `run()`
//! builds the caches (DaemonSets, their Pods, revisions and the Nodes), the webhook and
//! the controller, and serves until shutdown. Everything it decides is in [`plan`]
//! (pure); [`reconcile`] reads the caches and hands the plan to the shared executor
//! (`kruise_workload::Writer`).

pub mod error;
pub mod events;
pub mod plan;
pub mod reconcile;
pub mod webhook;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, NodeSpec};
use kruise_api::apps_v1alpha1::DaemonSet;
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_runtime::cache::prune;
use kruise_runtime::{Cache, Reconciler, Runtime, gates};
use kruise_workload::{PodControl, Writer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

pub use crate::events::{CONTROLLER_NAME, IDENTITY};
use crate::plan::Options;

/// What every reconcile shares: the caches, the writer, options, bookkeeping.
pub struct Context {
    pub client: kube::Client,
    pub sets: Cache<DaemonSet>,
    pub pods: Cache<Pod>,
    pub nodes: Cache<Node>,
    pub revisions: Cache<ControllerRevision>,
    pub writer: Writer,
    pub options: Options,
    pub reconciler: Reconciler,
    /// Per DaemonSet and node, the backoff of failed-Pod deletions.
    pub failed_backoff: FailedBackoff,
}

/// Failed daemon Pods are deleted at most once per backoff period per node: 1 s, then
/// doubling up to 15 min; a node whose last failure is older than twice that starts
/// over (upstream `failedPodsBackoff`).
#[derive(Default)]
pub struct FailedBackoff(Mutex<HashMap<(String, String), (std::time::Duration, jiff::Timestamp)>>);

impl FailedBackoff {
    const INITIAL: std::time::Duration = std::time::Duration::from_secs(1);
    const MAX: std::time::Duration = std::time::Duration::from_secs(15 * 60);

    /// For the plan: node → not before, for the DaemonSet `uid`.
    pub fn of(&self, uid: &str) -> std::collections::BTreeMap<String, jiff::Timestamp> {
        let map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.iter()
            .filter(|((owner, _), _)| owner == uid)
            .map(|((_, node), (_, until))| (node.clone(), *until))
            .collect()
    }

    /// A failed Pod on `node` was deleted at `now`: the next one waits longer.
    pub fn failed(&self, uid: &str, node: &str, now: jiff::Timestamp) {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (uid.to_string(), node.to_string());
        let delay = match map.get(&key) {
            Some((delay, until)) if now.duration_since(*until).unsigned_abs() < 2 * Self::MAX => {
                (*delay * 2).min(Self::MAX)
            }
            _ => Self::INITIAL,
        };
        let until = now + jiff::SignedDuration::try_from(delay).unwrap_or_default();
        map.insert(key, (delay, until));
    }

    /// The DaemonSet is gone.
    pub fn forget(&self, uid: &str) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|(owner, _), _| owner != uid);
    }
}

/// The controller's options from the feature gates.
pub fn options(runtime: &Runtime) -> Options {
    let g = &runtime.gates;
    Options {
        in_place: kruise_inplace::DiffOptions {
            env_from_metadata: g.enabled(gates::IN_PLACE_UPDATE_ENV_FROM_METADATA),
            vertical_scaling: g.enabled(gates::IN_PLACE_WORKLOAD_VERTICAL_SCALING),
        },
        prune_ineligible_nodes: g.enabled(gates::DAEMONSET_PRUNE_INELIGIBLE_NODES),
    }
}

/// What the controller reads of a Node: its name, labels and taints. Status
/// (heartbeats, images) and annotations are dropped before the Node is cached.
pub fn prune_node(node: &mut Node) {
    prune(node);
    node.metadata.annotations = None;
    node.metadata.owner_references = None;
    node.metadata.finalizers = None;
    node.status = None;
    node.spec = node.spec.take().map(|s| NodeSpec {
        taints: s.taints,
        ..Default::default()
    });
}

/// The caches and the shared context.
pub fn context(runtime: &Runtime) -> Arc<Context> {
    let sets = runtime.tolerant_cache::<DaemonSet>(watcher::Config::default(), prune);
    // Every daemon Pod carries its revision hash; owners are told apart by UID.
    let pods = runtime.cache::<Pod>(
        watcher::Config::default().labels(keys::CONTROLLER_REVISION_HASH),
        kruise_workload::prune_pod,
    );
    let revisions = runtime.cache::<ControllerRevision>(watcher::Config::default(), prune);
    // Nodes: list/watch, pruned to name, labels and taints.
    let nodes = runtime.cluster_cache::<Node>(watcher::Config::default(), prune_node);
    Arc::new(Context {
        client: runtime.client.clone(),
        sets,
        pods,
        nodes,
        revisions,
        writer: Writer::new(
            PodControl::new(
                runtime.client.clone(),
                runtime.events(),
                runtime.metrics.clone(),
                CONTROLLER_NAME,
            )
            .with_messages(events::DaemonSetMessages),
        )
        .consulting_budgets(kruise_pub::Options::from_gates(&runtime.gates)),
        options: options(runtime),
        reconciler: Reconciler::new(runtime.metrics.clone(), CONTROLLER_NAME, "DaemonSet"),
        failed_backoff: FailedBackoff::default(),
    })
}

/// What of a Node decides where daemon Pods run: its labels and taints (what upstream's
/// node `Update` handler in `daemonset_event_handler.go` feeds `nodeShouldRunDaemonPod`).
fn placement_fingerprint(node: &Node) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    node.metadata.labels.hash(&mut h);
    for t in node.spec.iter().flat_map(|s| s.taints.iter().flatten()) {
        (&t.key, &t.value, &t.effect).hash(&mut h);
    }
    h.finish()
}

/// Maps a Node change to every DaemonSet, when the Node appeared, went away, or its
/// labels or taints changed (status updates and heartbeats wake nobody).
fn node_trigger(
    ctx: &Arc<Context>,
) -> impl Fn(Arc<Node>) -> Vec<ObjectRef<DaemonSet>> + Send + Sync + 'static {
    let seen: Mutex<HashMap<String, u64>> = Mutex::default();
    let (sets, nodes) = (ctx.sets.clone(), ctx.nodes.clone());
    let instruments = ctx.reconciler.instruments().clone();
    move |node: Arc<Node>| {
        let name = node.metadata.name.clone().unwrap_or_default();
        let present = nodes.store().get(&ObjectRef::new(&name)).is_some();
        let changed = {
            let mut seen = seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if present {
                seen.insert(name, placement_fingerprint(&node))
                    != Some(placement_fingerprint(&node))
            } else {
                seen.remove(&name).is_some()
            }
        };
        if !changed {
            return Vec::new();
        }
        sets.store()
            .state()
            .iter()
            .map(|ds| {
                let r = ObjectRef::from_obj(ds.as_ref());
                instruments.triggered(format!(
                    "{}/{}",
                    r.namespace.clone().unwrap_or_default(),
                    r.name
                ));
                r
            })
            .collect()
    }
}

/// Runs until shutdown: every replica keeps its caches warm and serves admission; only
/// the lease holder reconciles, a DaemonSet whenever it, one of its Pods, or a Node's
/// labels or taints change.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    let routes = webhook::routes();
    let controller = |workers| {
        let ctx = ctx.clone();
        async move {
            let r = &ctx.reconciler;
            let controller = r
                .controller(&ctx.sets, workers)
                .watches_shared_stream(ctx.pods.subscribe(), r.owner_of::<DaemonSet, Pod>())
                .watches_shared_stream(ctx.nodes.subscribe(), node_trigger(&ctx));
            r.run_with(controller, ctx.clone(), reconcile::reconcile)
                .await;
        }
    };
    runtime
        .serve_with_webhooks(routes, webhook::configurations, controller)
        .await?;
    Ok(())
}
