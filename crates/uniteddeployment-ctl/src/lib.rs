//! The UnitedDeployment controller (`apps.kruise.io/v1alpha1` UnitedDeployment): one
//! workload per topology subset (StatefulSet, Advanced StatefulSet, CloneSet or
//! Deployment) from a single template, the replicas split over the subsets, rollouts held
//! back per subset by manual partitions. `run()` builds the caches, the webhook and the
//! controller, and serves until shutdown. Everything it decides is in [`plan`] (pure);
//! [`reconcile`] reads the caches and does the writes.

pub mod error;
pub mod events;
pub mod plan;
pub mod reconcile;
pub mod webhook;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ControllerRevision, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::{CloneSet, UnitedDeployment};
use kruise_api::{apps_v1beta1, keys};
use kruise_runtime::cache::prune;
use kruise_runtime::{Cache, Events, Reconciler, Runtime};
use kruise_workload::Expectations;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

pub use crate::events::{CONTROLLER_NAME, IDENTITY};
use crate::plan::{Observed, WorkloadKind};

/// What every reconcile shares: the caches, the events, bookkeeping.
pub struct Context {
    pub client: kube::Client,
    pub uds: Cache<UnitedDeployment>,
    pub statefulsets: Cache<StatefulSet>,
    pub advanced_statefulsets: Cache<apps_v1beta1::StatefulSet>,
    pub clonesets: Cache<CloneSet>,
    pub deployments: Cache<Deployment>,
    pub revisions: Cache<ControllerRevision>,
    /// Pods of every subset workload (labelled `apps.kruise.io/subset-name`), for
    /// `updatedReplicas` / `updatedReadyReplicas`, the Adaptive strategy and reservation.
    pub pods: Cache<Pod>,
    /// Workload writes the caches have not shown yet (keys `<kind>/<name>`).
    pub expectations: Expectations,
    pub events: Events,
    pub reconciler: Reconciler,
}

/// The caches keep what the plan reads of a workload: metadata, replicas, partition,
/// ready replicas; the Pod template (the bulk) goes.
fn prune_statefulset(s: &mut StatefulSet) {
    prune(s);
    if let Some(spec) = s.spec.as_mut() {
        spec.template = Default::default();
        spec.volume_claim_templates = None;
    }
}

fn prune_advanced_statefulset(s: &mut apps_v1beta1::StatefulSet) {
    prune(s);
    s.spec.template = Default::default();
    s.spec.volume_claim_templates = Vec::new();
}

fn prune_cloneset(s: &mut CloneSet) {
    prune(s);
    s.spec.template = Default::default();
    s.spec.volume_claim_templates = Vec::new();
}

fn prune_deployment(d: &mut Deployment) {
    prune(d);
    if let Some(spec) = d.spec.as_mut() {
        spec.template = Default::default();
    }
}

/// A Pod as the status and the Adaptive strategy need it: labels (the reserved label),
/// creation, node, phase and conditions.
fn prune_pod(p: &mut Pod) {
    prune(p);
    p.metadata.annotations = None;
    // The node name stays: an unscheduled Pod makes an Adaptive subset unschedulable.
    let node_name = p.spec.as_ref().and_then(|s| s.node_name.clone());
    p.spec = node_name.map(|node_name| k8s_openapi::api::core::v1::PodSpec {
        node_name: Some(node_name),
        ..Default::default()
    });
    if let Some(status) = p.status.as_mut() {
        status.container_statuses = None;
        status.init_container_statuses = None;
    }
}

/// The caches and the shared context.
pub fn context(runtime: &Runtime) -> Arc<Context> {
    // Every subset workload carries the subset-name label; nothing else is watched.
    let subsets = || watcher::Config::default().labels(keys::UD_SUBSET_NAME);
    Arc::new(Context {
        client: runtime.client.clone(),
        uds: runtime.tolerant_cache::<UnitedDeployment>(watcher::Config::default(), prune),
        statefulsets: runtime.cache::<StatefulSet>(subsets(), prune_statefulset),
        // Named apart from the apps/v1 cache: both kinds are `statefulsets`.
        advanced_statefulsets: Cache::spawn_tolerant(
            runtime.scoped_api(),
            subsets(),
            prune_advanced_statefulset,
            runtime
                .readiness
                .register("cache statefulsets.apps.kruise.io"),
            runtime.malformed_report(),
        ),
        clonesets: runtime.tolerant_cache::<CloneSet>(subsets(), prune_cloneset),
        deployments: runtime.cache::<Deployment>(subsets(), prune_deployment),
        revisions: runtime.cache::<ControllerRevision>(watcher::Config::default(), prune),
        pods: runtime.cache::<Pod>(subsets(), prune_pod),
        expectations: Expectations::new(kruise_workload::expectations::DEFAULT_TIMEOUT),
        events: runtime.events(),
        reconciler: Reconciler::new(runtime.metrics.clone(), CONTROLLER_NAME, "UnitedDeployment"),
    })
}

impl Context {
    /// Every workload of the four kinds controlled by the UD `uid`, as the plan sees them.
    pub fn observed_workloads(&self, uid: &str) -> Vec<Observed> {
        let mut out = Vec::new();
        for s in self.statefulsets.owned_by(uid) {
            let spec = s.spec.clone().unwrap_or_default();
            out.push(Observed {
                kind: WorkloadKind::StatefulSet,
                meta: s.metadata.clone(),
                replicas: spec.replicas.unwrap_or(1),
                partition: spec
                    .update_strategy
                    .and_then(|u| u.rolling_update)
                    .and_then(|r| r.partition),
                ready_replicas: s
                    .status
                    .as_ref()
                    .and_then(|st| st.ready_replicas)
                    .unwrap_or(0),
            });
        }
        for s in self.advanced_statefulsets.owned_by(uid) {
            out.push(Observed {
                kind: WorkloadKind::AdvancedStatefulSet,
                meta: s.metadata.clone(),
                replicas: s.spec.replicas.unwrap_or(1),
                partition: s
                    .spec
                    .update_strategy
                    .rolling_update
                    .as_ref()
                    .and_then(|r| r.partition),
                ready_replicas: s.status.as_ref().map_or(0, |st| st.ready_replicas),
            });
        }
        for s in self.clonesets.owned_by(uid) {
            let replicas = s.spec.replicas.unwrap_or(1);
            out.push(Observed {
                kind: WorkloadKind::CloneSet,
                meta: s.metadata.clone(),
                replicas,
                partition: s.spec.update_strategy.partition.as_ref().map(|p| match p {
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n) => *n,
                    // The controller only writes integers; a percentage is read as
                    // different so it is written back as one.
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(_) => -1,
                }),
                ready_replicas: s.status.as_ref().map_or(0, |st| st.ready_replicas),
            });
        }
        for d in self.deployments.owned_by(uid) {
            out.push(Observed {
                kind: WorkloadKind::Deployment,
                meta: d.metadata.clone(),
                replicas: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
                partition: None,
                ready_replicas: d
                    .status
                    .as_ref()
                    .and_then(|st| st.ready_replicas)
                    .unwrap_or(0),
            });
        }
        out
    }

    /// What the cache shows of the workload `<kind>/<name>` in `ns` (for expectations).
    pub fn observe(&self, ns: &str, key: &str) -> kruise_workload::expectations::Observed {
        use kruise_workload::expectations::Observed as Seen;
        let Some((kind, name)) = key.split_once('/') else {
            return Seen::Absent {
                cache_resource_version: None,
            };
        };
        fn seen<K>(cache: &Cache<K>, ns: &str, name: &str) -> Seen
        where
            K: kube::Resource<DynamicType = ()> + Clone + Send + Sync + std::fmt::Debug + 'static,
        {
            let found = cache.store().get(&ObjectRef::<K>::new(name).within(ns));
            Seen::in_cache(found.as_deref(), cache.resource_version())
        }
        if kind == POD_KEY_KIND {
            return seen(&self.pods, ns, name);
        }
        match kind_of_key(kind) {
            Some(WorkloadKind::StatefulSet) => seen(&self.statefulsets, ns, name),
            Some(WorkloadKind::AdvancedStatefulSet) => seen(&self.advanced_statefulsets, ns, name),
            Some(WorkloadKind::CloneSet | WorkloadKind::CloneSetV1beta1) => {
                seen(&self.clonesets, ns, name)
            }
            Some(WorkloadKind::Deployment) => seen(&self.deployments, ns, name),
            None => Seen::Absent {
                cache_resource_version: None,
            },
        }
    }
}

/// The key of a workload in the expectations: `<kind>/<name>`, the kind as the caches
/// read it (one key per object, whichever version it was written at).
pub fn expectation_key(kind: WorkloadKind, name: &str) -> String {
    format!("{:?}/{name}", kind.objects())
}

/// The kind part of a Pod's key in the expectations.
const POD_KEY_KIND: &str = "Pod";

/// The key of a Pod in the expectations (its reserved label written): `Pod/<name>`.
pub fn pod_expectation_key(name: &str) -> String {
    format!("{POD_KEY_KIND}/{name}")
}

fn kind_of_key(kind: &str) -> Option<WorkloadKind> {
    WorkloadKind::ALL
        .into_iter()
        .find(|k| format!("{k:?}") == kind)
}

/// Runs until shutdown: every replica keeps its caches warm and serves admission; only
/// the lease holder reconciles, a UD whenever it, one of its workloads, or one of their
/// Pods changes.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    let routes = webhook::routes();
    let controller = |workers| {
        let r = &ctx.reconciler;
        let uds = ctx.uds.store().clone();
        // A Pod belongs to the UDs of its namespace whose selector matches its labels.
        let on_pod = move |pod: Arc<Pod>| {
            let labels = pod.metadata.labels.clone().unwrap_or_default();
            let ns = pod.metadata.namespace.clone();
            uds.state()
                .into_iter()
                .filter(|ud| ud.metadata.namespace == ns)
                .filter(|ud| {
                    kruise_ordering::selector::matches(&ud.spec.selector, &labels) == Ok(true)
                })
                .map(|ud| ObjectRef::from_obj(ud.as_ref()))
                .collect::<Vec<_>>()
        };
        let c = r
            .controller(&ctx.uds, workers)
            .watches_shared_stream(
                ctx.statefulsets.subscribe(),
                r.owner_of::<UnitedDeployment, StatefulSet>(),
            )
            .watches_shared_stream(
                ctx.advanced_statefulsets.subscribe(),
                r.owner_of::<UnitedDeployment, apps_v1beta1::StatefulSet>(),
            )
            .watches_shared_stream(
                ctx.clonesets.subscribe(),
                r.owner_of::<UnitedDeployment, CloneSet>(),
            )
            .watches_shared_stream(
                ctx.deployments.subscribe(),
                r.owner_of::<UnitedDeployment, Deployment>(),
            )
            .watches_shared_stream(ctx.pods.subscribe(), on_pod);
        r.run_with(c, ctx.clone(), reconcile::reconcile)
    };
    runtime
        .serve_with_webhooks(routes, webhook::configurations, controller)
        .await?;
    Ok(())
}
