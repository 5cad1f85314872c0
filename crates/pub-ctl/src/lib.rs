//! The PodUnavailableBudget controller and its admission webhooks (spec
//! openkruise/kruise v1.9.0 pkg/controller/podunavailablebudget): the controller keeps each PUB's status (how many Pods are
//! available, how many more may go); the Pod webhook spends that budget on each
//! deletion, eviction and in-place update, recording the Pod in the PUB's status before
//! it answers. Everything it decides is pure ([`budget`], [`podstate`], [`decision`],
//! [`matching`], [`validation`], [`plan`]); [`reconcile`], [`webhook`] and [`workload`]
//! are the I/O around it.

pub mod budget;
pub mod error;
pub mod events;
pub mod matching;
pub mod plan;
pub mod reconcile;
pub mod triggers;
pub mod validation;
pub mod webhook;
pub mod workload;

pub use kruise_pub::{decision, podstate};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::policy_v1alpha1::PodUnavailableBudget;
use kruise_runtime::cache::{prune, prune_metadata};
use kruise_runtime::{Cache, Events, Reconciler, Runtime};
use kube::Client;
use kube::runtime::watcher;

pub use crate::events::{CONTROLLER_NAME, IDENTITY};

/// The last status this process wrote for one PUB, behind the PUB's admission lock.
pub type PubLock = Arc<tokio::sync::Mutex<Option<PodUnavailableBudget>>>;

pub struct Context {
    pub client: Client,
    pub pubs: Cache<PodUnavailableBudget>,
    pub pods: Cache<Pod>,
    /// Metadata only: which Deployment a ReplicaSet belongs to.
    pub replicasets: Cache<ReplicaSet>,
    pub events: Events,
    pub reconciler: Reconciler,
    pub options: decision::Options,
    pub resolver: workload::Resolver,
    /// One admission lock per PUB (`namespace/name`): this process spends a budget one
    /// request at a time, on the newest status it knows.
    pub locks: Mutex<HashMap<String, PubLock>>,
}

impl Context {
    pub fn lock_for(&self, namespace: &str, name: &str) -> PubLock {
        let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
        locks
            .entry(format!("{namespace}/{name}"))
            .or_default()
            .clone()
    }
}

/// The decision's switches from the feature gates.
pub fn options(runtime: &Runtime) -> decision::Options {
    decision::Options::from_gates(&runtime.gates)
}

fn prune_replicaset(rs: &mut ReplicaSet) {
    prune_metadata(&mut rs.metadata);
    rs.spec = None;
    rs.status = None;
}

/// The caches and the shared context.
pub fn context(runtime: &Runtime) -> Arc<Context> {
    Arc::new(Context {
        client: runtime.client.clone(),
        pubs: runtime.tolerant_cache::<PodUnavailableBudget>(watcher::Config::default(), prune),
        pods: runtime.cache::<Pod>(
            watcher::Config::default(),
            kruise_runtime::cache::prune::<Pod>,
        ),
        replicasets: runtime.cache::<ReplicaSet>(watcher::Config::default(), prune_replicaset),
        events: runtime.events(),
        reconciler: Reconciler::new(
            runtime.metrics.clone(),
            CONTROLLER_NAME,
            "PodUnavailableBudget",
        ),
        options: options(runtime),
        resolver: workload::Resolver::default(),
        locks: Mutex::default(),
    })
}

/// Runs until shutdown: every replica serves admission; only the lease holder
/// reconciles, a PUB whenever it or a Pod of its namespace changes.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    let routes = webhook::routes(ctx.clone());
    let scope = triggers::Scope::of(&runtime);
    let controller = |workers| {
        let replica_changes = triggers::replica_changes(&scope, ctx.pubs.store().clone());
        reconcile::run(ctx.clone(), workers, replica_changes)
    };
    runtime
        .serve_with_webhooks(routes, webhook::configurations, controller)
        .await?;
    Ok(())
}
