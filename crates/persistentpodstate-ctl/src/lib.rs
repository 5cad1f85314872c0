//! The PersistentPodState controller (`apps.kruise.io/v1alpha1` PersistentPodState,
//! openkruise/kruise v1.9.0 pkg/controller/persistentpodstate; introduced in OpenKruise v1.2, see
//! its release notes): records where each Pod of a StatefulSet (apps/v1 or Advanced) ran, generates
//! PPSs from StatefulSet annotations, and serves the Pod webhook that steers a re-created Pod back
//! to its node or zone. Everything it decides is in [`plan`] (pure); [`reconcile`] reads the caches
//! and writes.
//!
//! Three controllers run while this replica leads: one keyed on PPSs (status), and one
//! per StatefulSet kind (auto-generation). Both replicas keep the caches warm and serve
//! admission.

pub mod error;
pub mod events;
pub mod plan;
pub mod reconcile;
pub mod webhook;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, PodStatus};
use kruise_api::apps_v1alpha1::{PersistentPodState, PersistentPodStateStatus};
use kruise_api::apps_v1beta1::StatefulSet as AdvancedStatefulSet;
use kruise_api::keys;
use kruise_runtime::cache::prune;
use kruise_runtime::{Cache, Reconciler, Runtime};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

pub use crate::events::{CONTROLLER_NAME, IDENTITY};
use crate::plan::{APPS_GROUP, KRUISE_GROUP, STATEFULSET_KIND};

/// What every reconcile and admission shares.
pub struct Context {
    pub client: kube::Client,
    pub ppss: Cache<PersistentPodState>,
    /// apps/v1 StatefulSets, pruned to what retention and generation read.
    pub statefulsets: Cache<StatefulSet>,
    /// Advanced StatefulSets, pruned likewise.
    pub advanced: Cache<AdvancedStatefulSet>,
    /// StatefulSet Pods only (the `statefulset.kubernetes.io/pod-name` label).
    pub pods: Cache<Pod>,
    pub nodes: Cache<Node>,
    /// The PPS status controller.
    pub reconciler: Reconciler,
    /// The last status written per PPS, until the cache shows the write.
    pub status_writes: StatusWrites,
    /// Auto-generation from apps/v1 StatefulSets.
    pub generator: Reconciler,
    /// Auto-generation from Advanced StatefulSets.
    pub advanced_generator: Reconciler,
}

/// The status this controller last wrote to each PPS (by UID), with the
/// resourceVersion of the PPS it was computed from. A reconcile that runs before the
/// cache shows the write sees the old status and the same resourceVersion: the status it
/// computes is the one just written, and writing it again would be a second write for
/// one change. Once the cache moves past that version the cached status is compared as
/// usual (so a status changed by someone else is still corrected).
#[derive(Default)]
pub struct StatusWrites(Mutex<HashMap<String, (String, PersistentPodStateStatus)>>);

impl StatusWrites {
    /// `next` was written from this very version of `pps` already.
    pub fn already_written(
        &self,
        pps: &PersistentPodState,
        next: &PersistentPodStateStatus,
    ) -> bool {
        let (Some(uid), Some(rv)) = (&pps.metadata.uid, &pps.metadata.resource_version) else {
            return false;
        };
        let written = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        written
            .get(uid)
            .is_some_and(|(seen, status)| seen == rv && status == next)
    }

    /// `next` was written, computed from this version of `pps`; entries of PPSs no
    /// longer in `live` (deleted) are dropped.
    pub fn record(
        &self,
        pps: &PersistentPodState,
        next: PersistentPodStateStatus,
        live: &Store<PersistentPodState>,
    ) {
        if let (Some(uid), Some(rv)) = (&pps.metadata.uid, &pps.metadata.resource_version) {
            let live: std::collections::HashSet<String> = live
                .state()
                .iter()
                .filter_map(|p| p.metadata.uid.clone())
                .collect();
            let mut written = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            written.retain(|uid, _| live.contains(uid));
            written.insert(uid.clone(), (rv.clone(), next));
        }
    }
}

/// The PPS annotations of a StatefulSet: the only ones generation reads.
const WORKLOAD_ANNOTATIONS: [&str; 4] = [
    keys::PPS_AUTO_GENERATE,
    keys::PPS_REQUIRED_TOPOLOGY,
    keys::PPS_PREFERRED_TOPOLOGY,
    keys::PPS_PERSISTENT_POD_ANNOTATIONS,
];

fn keep_pps_annotations(meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
    if let Some(a) = meta.annotations.as_mut() {
        a.retain(|k, _| WORKLOAD_ANNOTATIONS.contains(&k.as_str()));
    }
    meta.labels = None;
}

/// An apps/v1 StatefulSet as the controller reads it: name, uid, deletion, the PPS
/// annotations, replicas and ordinals start. The Pod template (most of its size) goes.
fn prune_statefulset(sts: &mut StatefulSet) {
    prune(sts);
    keep_pps_annotations(&mut sts.metadata);
    if let Some(spec) = sts.spec.as_mut() {
        spec.template = Default::default();
        spec.volume_claim_templates = None;
        spec.update_strategy = None;
    }
    sts.status = None;
}

/// An Advanced StatefulSet likewise, keeping `reserveOrdinals`.
fn prune_advanced(sts: &mut AdvancedStatefulSet) {
    prune(sts);
    keep_pps_annotations(&mut sts.metadata);
    sts.spec.template = Default::default();
    sts.spec.volume_claim_templates = Vec::new();
    sts.spec.update_strategy = Default::default();
    sts.spec.lifecycle = None;
    sts.status = None;
}

/// A Pod as the decisions read it: name, owner, annotations (recorded ones are chosen per
/// PPS), deletion, node, phase and the Ready condition.
fn prune_pod(pod: &mut Pod) {
    prune(pod);
    pod.metadata.labels = None;
    let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    pod.spec = Some(PodSpec {
        node_name,
        ..Default::default()
    });
    pod.status = pod.status.take().map(|s| PodStatus {
        phase: s.phase,
        conditions: s
            .conditions
            .map(|c| c.into_iter().filter(|c| c.type_ == "Ready").collect()),
        ..Default::default()
    });
}

/// A Node as recording reads it: its name and labels.
fn prune_node(node: &mut Node) {
    prune(node);
    node.metadata.annotations = None;
    node.metadata.owner_references = None;
    node.spec = None;
    node.status = None;
}

/// The caches and the shared context.
pub fn context(runtime: &Runtime) -> Arc<Context> {
    let ppss = runtime.tolerant_cache::<PersistentPodState>(watcher::Config::default(), prune);
    let statefulsets = runtime.cache::<StatefulSet>(watcher::Config::default(), prune_statefulset);
    let advanced =
        runtime.tolerant_cache::<AdvancedStatefulSet>(watcher::Config::default(), prune_advanced);
    // Both StatefulSet controllers label their Pods with their name; nothing else is read.
    let pods = runtime.cache::<Pod>(
        watcher::Config::default().labels(keys::STATEFULSET_POD_NAME),
        prune_pod,
    );
    // Nodes are cluster-scoped: watched whatever the instance's scope.
    let nodes = runtime.cluster_cache::<Node>(watcher::Config::default(), prune_node);
    let metrics = runtime.metrics.clone();
    Arc::new(Context {
        client: runtime.client.clone(),
        ppss,
        statefulsets,
        advanced,
        pods,
        nodes,
        reconciler: Reconciler::new(metrics.clone(), CONTROLLER_NAME, "PersistentPodState"),
        status_writes: StatusWrites::default(),
        generator: Reconciler::new(
            metrics.clone(),
            "persistentpodstate-generator",
            "StatefulSet",
        ),
        advanced_generator: Reconciler::new(
            metrics,
            "persistentpodstate-advanced-generator",
            "StatefulSet.apps.kruise.io",
        ),
    })
}

/// The PPSs in `namespace` whose target is `group`/StatefulSet `name`.
fn ppss_targeting(
    ppss: &Store<PersistentPodState>,
    namespace: Option<&str>,
    group: &str,
    name: &str,
) -> Vec<ObjectRef<PersistentPodState>> {
    ppss.state()
        .into_iter()
        .filter(|p| {
            p.metadata.namespace.as_deref() == namespace
                && plan::group_of(&p.spec.target_ref.api_version) == group
                && p.spec.target_ref.kind == STATEFULSET_KIND
                && p.spec.target_ref.name == name
        })
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

/// The PPSs of a Pod's controller StatefulSet.
fn ppss_of_pod(ppss: &Store<PersistentPodState>, pod: &Pod) -> Vec<ObjectRef<PersistentPodState>> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.controller == Some(true) && o.kind == STATEFULSET_KIND)
        .flat_map(|o| {
            ppss_targeting(
                ppss,
                pod.metadata.namespace.as_deref(),
                plan::group_of(&o.api_version),
                &o.name,
            )
        })
        .collect()
}

/// The StatefulSet of `group` that controls a generated PPS.
fn generator_of<K: Resource<DynamicType = ()>>(
    group: &'static str,
) -> impl Fn(Arc<PersistentPodState>) -> Option<ObjectRef<K>> + Send + Sync + 'static {
    move |pps| {
        let owner = pps
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))?;
        (owner.kind == STATEFULSET_KIND && plan::group_of(&owner.api_version) == group).then(|| {
            ObjectRef::new(&owner.name).within(pps.metadata.namespace.as_deref().unwrap_or(""))
        })
    }
}

/// Runs until shutdown: every replica keeps its caches warm and serves admission; only
/// the lease holder reconciles.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    let routes = webhook::routes(ctx.clone());
    let controller = |workers| {
        let ctx = ctx.clone();
        async move {
            let states = status_controller(&ctx, workers);
            let generated = {
                let r = &ctx.generator;
                let c = r
                    .controller(&ctx.statefulsets, workers)
                    .watches_shared_stream(
                        ctx.ppss.subscribe(),
                        generator_of::<StatefulSet>(APPS_GROUP),
                    );
                r.run_with(c, ctx.clone(), reconcile::generate_for_statefulset)
            };
            let generated_advanced = {
                let r = &ctx.advanced_generator;
                let c = r.controller(&ctx.advanced, workers).watches_shared_stream(
                    ctx.ppss.subscribe(),
                    generator_of::<AdvancedStatefulSet>(KRUISE_GROUP),
                );
                r.run_with(c, ctx.clone(), reconcile::generate_for_advanced)
            };
            tokio::join!(states, generated, generated_advanced);
        }
    };
    runtime
        .serve_with_webhooks(routes, webhook::configurations, controller)
        .await?;
    Ok(())
}

/// The PPS controller: a PPS is reconciled when it changes, when its target StatefulSet
/// (either kind) changes, when a Pod of that StatefulSet changes, and when the labels of
/// a node running such a Pod change.
async fn status_controller(ctx: &Arc<Context>, workers: u16) {
    let r = &ctx.reconciler;
    let on_statefulset = |group: &'static str| {
        let ppss = ctx.ppss.store().clone();
        move |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            ppss_targeting(
                &ppss,
                meta.namespace.as_deref(),
                group,
                meta.name.as_deref().unwrap_or_default(),
            )
        }
    };
    let apps = on_statefulset(APPS_GROUP);
    let kruise = on_statefulset(KRUISE_GROUP);
    let ppss = ctx.ppss.store().clone();
    let on_pod = move |pod: Arc<Pod>| ppss_of_pod(&ppss, &pod);
    let c = r
        .controller(&ctx.ppss, workers)
        .watches_shared_stream(ctx.statefulsets.subscribe(), move |s: Arc<StatefulSet>| {
            apps(&s.metadata)
        })
        .watches_shared_stream(
            ctx.advanced.subscribe(),
            move |s: Arc<AdvancedStatefulSet>| kruise(&s.metadata),
        )
        .watches_shared_stream(ctx.pods.subscribe(), on_pod)
        .watches_shared_stream(ctx.nodes.subscribe(), on_node_labels(ctx));
    r.run_with(c, ctx.clone(), reconcile::reconcile).await;
}

/// Maps a Node whose labels changed (or that is new to this mapper) to the PPSs of the
/// StatefulSet Pods on it. Nodes change often (heartbeats, conditions) while their
/// labels rarely do; only labels matter to recording.
fn on_node_labels(
    ctx: &Arc<Context>,
) -> impl Fn(Arc<Node>) -> Vec<ObjectRef<PersistentPodState>> + Send + Sync + 'static {
    let seen: Mutex<HashMap<String, BTreeMap<String, String>>> = Mutex::default();
    let (pods, ppss) = (ctx.pods.store().clone(), ctx.ppss.store().clone());
    move |node: Arc<Node>| {
        let name = node.metadata.name.clone().unwrap_or_default();
        let labels = node.metadata.labels.clone().unwrap_or_default();
        {
            let mut seen = seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if seen.get(&name) == Some(&labels) {
                return Vec::new();
            }
            seen.insert(name.clone(), labels);
        }
        let mut out: Vec<_> = pods
            .state()
            .iter()
            .filter(|p| kruise_ordering::predicates::node_name(p) == name)
            .flat_map(|p| ppss_of_pod(&ppss, p))
            .collect();
        out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Pruning keeps everything the decisions read: the same recording before and after,
    /// the workload's replicas and reserved ordinals, and a node's labels.
    #[test]
    fn pruning_keeps_what_the_decisions_read() {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-0", "namespace": "ns", "labels": {"app": "web"},
                "annotations": {"ip": "10.0.0.1", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u", "controller": true}]},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "conditions": [
                {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        let labels = BTreeMap::from([("zone".to_string(), "a".to_string())]);
        let (topology, annotations) = (["zone"].into(), ["ip"].into());
        let before = plan::pod_state(&pod, &labels, &topology, &annotations);
        prune_pod(&mut pod);
        assert!(plan::is_recordable(&pod));
        assert_eq!(
            plan::pod_state(&pod, &labels, &topology, &annotations),
            before
        );
        assert_eq!(pod.spec.as_ref().unwrap().containers.len(), 0);
        assert_eq!(
            pod.status
                .as_ref()
                .unwrap()
                .conditions
                .as_ref()
                .unwrap()
                .len(),
            1
        );
        assert!(pod.metadata.owner_references.is_some());

        let mut sts: AdvancedStatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u",
                "annotations": {(keys::PPS_AUTO_GENERATE): "true", "other": "x"}},
            "spec": {"replicas": 3, "reserveOrdinals": [1], "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}}}
        }))
        .unwrap();
        prune_advanced(&mut sts);
        assert_eq!(sts.spec.live_ordinals(), [0, 2, 3]);
        assert_eq!(
            sts.metadata.annotations.unwrap().keys().collect::<Vec<_>>(),
            [keys::PPS_AUTO_GENERATE]
        );

        let mut node: Node = serde_json::from_value(json!({
            "metadata": {"name": "node-1", "labels": {"zone": "a"}, "annotations": {"a": "b"}},
            "status": {"capacity": {"cpu": "4"}}
        }))
        .unwrap();
        prune_node(&mut node);
        assert_eq!(node.metadata.labels.unwrap(), labels);
        assert!(node.status.is_none() && node.metadata.annotations.is_none());
    }
}

#[cfg(test)]
mod status_writes_tests {
    use super::*;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

    fn pps(uid: &str, rv: &str) -> PersistentPodState {
        let mut p = PersistentPodState::new("p", Default::default());
        p.metadata.uid = Some(uid.into());
        p.metadata.resource_version = Some(rv.into());
        p
    }

    #[test]
    fn a_write_is_not_repeated_until_the_cache_shows_a_newer_version() {
        let mut writer: Writer<PersistentPodState> = Writer::default();
        writer.apply_watcher_event(&Event::Apply(pps("u", "1")));
        let store = writer.as_reader();
        let writes = StatusWrites::default();
        let next = PersistentPodStateStatus {
            observed_generation: 1,
            ..Default::default()
        };
        assert!(!writes.already_written(&pps("u", "1"), &next));
        writes.record(&pps("u", "1"), next.clone(), &store);
        assert!(writes.already_written(&pps("u", "1"), &next), "stale cache");
        let other = PersistentPodStateStatus::default();
        assert!(
            !writes.already_written(&pps("u", "1"), &other),
            "a new change"
        );
        assert!(
            !writes.already_written(&pps("u", "2"), &next),
            "the cache moved on"
        );
        // A PPS gone from the cache ("v" never was in it) is forgotten at the next write.
        writes.record(&pps("v", "7"), next.clone(), &store);
        assert!(writes.already_written(&pps("v", "7"), &next));
        writes.record(&pps("u", "1"), next.clone(), &store);
        assert!(!writes.already_written(&pps("v", "7"), &next));
        assert!(writes.already_written(&pps("u", "1"), &next));
    }
}
