//! The WorkloadSpread controller (`apps.kruise.io/v1alpha1` WorkloadSpread, spec
//! openkruise/kruise v1.9.0 pkg/controller/workloadspread): spreads the Pods of one existing workload (CloneSet,
//! Deployment, ReplicaSet, Job, StatefulSet of either kind, or a custom kind allow-listed
//! in `kruise-configuration`) over ordered subsets of
//! nodes without touching the workload. The Pod webhook puts each new Pod in a subset
//! (recording it in the WorkloadSpread's status, guarded by its resourceVersion, so
//! parallel creations never overfill a subset); the controller counts, expires the
//! webhook's records, keeps `pod-deletion-cost` so scale-in empties the
//! least-preferred subsets first, and (Adaptive) moves Pods that cannot be scheduled.
//! Everything decided is in [`plan`] (pure); [`reconcile`], [`webhook`] and
//! [`workload`] are the I/O around it.

pub mod error;
pub mod events;
pub mod plan;
pub mod reconcile;
pub mod wakes;
pub mod webhook;
pub mod workload;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, PodStatus};
use kruise_api::apps_v1alpha1::{CloneSet, WorkloadSpread};
use kruise_api::apps_v1beta1::StatefulSet as AdvancedStatefulSet;
use kruise_runtime::cache::prune;
use kruise_runtime::{Cache, Events, Reconciler, Runtime, gates};
use kube::runtime::watcher;

pub use crate::events::{CONTROLLER_NAME, IDENTITY};

/// The last status this process wrote for one WorkloadSpread, behind its admission lock.
pub type WsLock = Arc<tokio::sync::Mutex<Option<WorkloadSpread>>>;

/// What every reconcile and admission shares.
pub struct Context {
    pub client: kube::Client,
    pub wss: Cache<WorkloadSpread>,
    /// Pods in scope, pruned to what counting, ordering and Adaptive read.
    pub pods: Cache<Pod>,
    /// Target workloads, pruned to identity, owners, replicas.
    pub clonesets: Cache<CloneSet>,
    pub deployments: Cache<Deployment>,
    /// Also the link from a Pod to its Deployment, and a Deployment's versions.
    pub replicasets: Cache<ReplicaSet>,
    pub jobs: Cache<Job>,
    pub statefulsets: Cache<StatefulSet>,
    pub advanced: Cache<AdvancedStatefulSet>,
    /// Node labels: the subset of a Pod that was never placed by the webhook.
    pub nodes: Cache<Node>,
    pub events: Events,
    /// `kruise_pod_operations_total{controller="workloadspread-controller",operation}`:
    /// see [`webhook`] and [`reconcile`] for the operations counted.
    pub metrics: kruise_runtime::Metrics,
    pub reconciler: Reconciler,
    /// The `WorkloadSpread` gate: off, the Pod webhooks admit every Pod unchanged.
    pub enabled: bool,
    /// One admission lock per WorkloadSpread (`namespace/name`): this process records
    /// one Pod at a time per WorkloadSpread, on the newest status it knows.
    pub locks: Mutex<HashMap<String, WsLock>>,
    /// Where `kruise-configuration` (the custom workload allowlist) is read: the
    /// controller's namespace, or the watch namespace of a namespace-scoped instance.
    pub config_namespace: String,
    /// `KRUISE_WORKLOADSPREAD_EAGER_DELETION_COST`: every change of the target's Pods and
    /// of the target wakes a WorkloadSpread, not only upstream's triggers ([`wakes`]).
    pub eager_deletion_cost: bool,
}

impl Context {
    pub fn lock_for(&self, namespace: &str, name: &str) -> WsLock {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        locks
            .entry(format!("{namespace}/{name}"))
            .or_default()
            .clone()
    }
}

/// A Pod as the decisions read it: metadata, node, phase, conditions, restarts.
fn prune_pod(pod: &mut Pod) {
    prune(pod);
    let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    pod.spec = Some(PodSpec {
        node_name,
        ..Default::default()
    });
    pod.status = pod.status.take().map(|s| PodStatus {
        phase: s.phase,
        conditions: s.conditions,
        container_statuses: s.container_statuses,
        ..Default::default()
    });
}

/// A CloneSet keeps its replicas and its two revisions (what wakes a WorkloadSpread).
fn prune_cloneset(cs: &mut CloneSet) {
    prune(cs);
    cs.spec.template = Default::default();
    cs.spec.volume_claim_templates = Vec::new();
    cs.status = cs
        .status
        .take()
        .map(|s| kruise_api::apps_v1alpha1::CloneSetStatus {
            update_revision: s.update_revision,
            current_revision: s.current_revision,
            ..Default::default()
        });
}

fn prune_deployment(d: &mut Deployment) {
    prune(d);
    if let Some(spec) = d.spec.as_mut() {
        spec.template = Default::default();
    }
    d.status = None;
}

/// A ReplicaSet keeps its labels (`pod-template-hash`) and the Deployment revision
/// annotation (which version is newest).
fn prune_replicaset(rs: &mut ReplicaSet) {
    prune(rs);
    if let Some(a) = rs.metadata.annotations.as_mut() {
        a.retain(|k, _| k == workload::DEPLOYMENT_REVISION);
    }
    if let Some(spec) = rs.spec.as_mut() {
        spec.template = None;
    }
    rs.status = None;
}

fn prune_job(job: &mut Job) {
    prune(job);
    if let Some(spec) = job.spec.as_mut() {
        spec.template = Default::default();
    }
    job.status = None;
}

fn prune_statefulset(sts: &mut StatefulSet) {
    prune(sts);
    if let Some(spec) = sts.spec.as_mut() {
        spec.template = Default::default();
        spec.volume_claim_templates = None;
    }
    sts.status = None;
}

fn prune_advanced(sts: &mut AdvancedStatefulSet) {
    prune(sts);
    sts.spec.template = Default::default();
    sts.spec.volume_claim_templates = Vec::new();
    sts.status = None;
}

/// A Node as matching reads it: name and labels.
fn prune_node(node: &mut Node) {
    prune(node);
    node.metadata.annotations = None;
    node.metadata.owner_references = None;
    node.spec = None;
    node.status = None;
}

/// The caches and the shared context, with the options of the environment
/// ([`wakes::EAGER_ENV`]).
pub fn context(runtime: &Runtime) -> Arc<Context> {
    context_with(runtime, eager_from_env())
}

/// `KRUISE_WORKLOADSPREAD_EAGER_DELETION_COST` of this process.
pub fn eager_from_env() -> bool {
    wakes::eager_from(std::env::var(wakes::EAGER_ENV).ok().as_deref())
}

/// The caches and the shared context; `eager_deletion_cost`: see [`wakes`].
pub fn context_with(runtime: &Runtime, eager_deletion_cost: bool) -> Arc<Context> {
    let all = watcher::Config::default;
    Arc::new(Context {
        client: runtime.client.clone(),
        wss: runtime.tolerant_cache::<WorkloadSpread>(all(), prune),
        pods: runtime.cache::<Pod>(all(), prune_pod),
        clonesets: runtime.tolerant_cache::<CloneSet>(all(), prune_cloneset),
        deployments: runtime.cache::<Deployment>(all(), prune_deployment),
        replicasets: runtime.cache::<ReplicaSet>(all(), prune_replicaset),
        jobs: runtime.cache::<Job>(all(), prune_job),
        statefulsets: runtime.cache::<StatefulSet>(all(), prune_statefulset),
        advanced: runtime.tolerant_cache::<AdvancedStatefulSet>(all(), prune_advanced),
        nodes: runtime.cluster_cache::<Node>(all(), prune_node),
        events: runtime.events(),
        metrics: runtime.metrics.clone(),
        reconciler: Reconciler::new(runtime.metrics.clone(), CONTROLLER_NAME, "WorkloadSpread"),
        enabled: runtime.gates.enabled(gates::WORKLOAD_SPREAD),
        locks: Mutex::default(),
        config_namespace: runtime
            .settings
            .watch_namespace
            .clone()
            .unwrap_or_else(|| runtime.settings.namespace.clone()),
        eager_deletion_cost,
    })
}

/// Runs until shutdown: every replica keeps its caches warm and serves admission; only
/// the lease holder reconciles.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    run_with(runtime, eager_from_env()).await
}

/// [`run`] with `KRUISE_WORKLOADSPREAD_EAGER_DELETION_COST` given ([`wakes`]).
pub async fn run_with(runtime: Runtime, eager_deletion_cost: bool) -> anyhow::Result<()> {
    let ctx = context_with(&runtime, eager_deletion_cost);
    let routes = webhook::routes(ctx.clone());
    let controller = |workers| reconcile::run(ctx.clone(), workers);
    runtime
        .serve_with_webhooks(routes, webhook::configurations, controller)
        .await?;
    Ok(())
}
