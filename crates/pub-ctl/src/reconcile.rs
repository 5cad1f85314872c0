//! One reconcile of a PUB: find its Pods and expected total, compute the status
//! ([`crate::plan`]), annotate Pods, raise events, write the status with optimistic
//! concurrency (so a record the webhook added meanwhile is never lost: a conflict means
//! "read again").

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kruise_api::keys;
use kruise_api::policy_v1alpha1::PodUnavailableBudget;
use kruise_ordering::predicates;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use crate::Context;
use crate::error::{Error, Result, is_conflict, is_not_found};
use crate::events;
use crate::matching::{self, WorkloadRef};
use crate::plan::{self, World};
use crate::workload::{self, controller_of};

/// Looked at again at least this often: a workload's replicas can change before any of
/// its Pods do.
const RESYNC: Duration = Duration::from_secs(30);
/// After a status write conflict: the cache will have the newer PUB in a moment.
const AFTER_CONFLICT: Duration = Duration::from_millis(200);

/// The controller over the shared caches: a Pod wakes every PUB of its namespace, and
/// so does a change to a workload's replicas ([`crate::triggers`]).
pub async fn run(
    ctx: Arc<Context>,
    workers: u16,
    replica_changes: impl futures::Stream<Item = ObjectRef<PodUnavailableBudget>> + Send + 'static,
) {
    let store = ctx.pubs.store().clone();
    let by_pod = move |pod: Arc<Pod>| {
        let namespace = pod.metadata.namespace.clone();
        store
            .state()
            .into_iter()
            .filter(|p| p.metadata.namespace == namespace)
            .map(|p| ObjectRef::from_obj(p.as_ref()))
            .collect::<Vec<_>>()
    };
    let r = &ctx.reconciler;
    let controller = r
        .controller(&ctx.pubs, workers)
        .watches_shared_stream(ctx.pods.subscribe(), by_pod)
        .reconcile_on(replica_changes);
    r.run_with(controller, ctx.clone(), reconcile).await;
}

pub async fn reconcile(pub_: Arc<PodUnavailableBudget>, ctx: Arc<Context>) -> Result<Action> {
    if pub_.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = pub_.namespace().unwrap_or_default();
    let (pods, expected) = protected_pods(&pub_, &ctx, &namespace).await?;
    let outcome = plan::plan(&World {
        pub_: &pub_,
        pods: pods.iter().map(Arc::as_ref).collect(),
        expected,
        now: jiff::Timestamp::now(),
    });
    let name = pub_.name_any();
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    for pod in &outcome.to_annotate {
        let patch = serde_json::json!({"metadata": {"annotations": {keys::PUB_RELATED: name}}});
        match pods_api
            .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    for pod in &outcome.not_deleted {
        if let Some(p) = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(pod))
        {
            ctx.events.warning(
                &pod_reference(p),
                events::EVENT_PUB_NOT_DELETED,
                events::not_deleted(&namespace, &name),
            );
        }
    }
    if outcome.no_pods {
        ctx.events.normal(
            &pub_.object_ref(&()),
            events::EVENT_PUB_NO_PODS,
            events::NO_PODS_MSG,
        );
    }
    if pub_.status.as_ref() != Some(&outcome.status) {
        let mut next = (*pub_).clone();
        next.status = Some(outcome.status);
        let api: Api<PodUnavailableBudget> = Api::namespaced(ctx.client.clone(), &namespace);
        match api
            .replace_status(&name, &PostParams::default(), &next)
            .await
        {
            Ok(_) => {}
            Err(e) if is_conflict(&e) => return Ok(Action::requeue(AFTER_CONFLICT)),
            Err(e) if is_not_found(&e) => return Ok(Action::await_change()),
            Err(e) => return Err(Error::Kube(e)),
        }
    }
    Ok(Action::requeue(
        outcome.requeue_after.map_or(RESYNC, |d| d.min(RESYNC)),
    ))
}

pub fn pod_reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        uid: pod.metadata.uid.clone(),
        ..Default::default()
    }
}

/// As in openkruise/kruise v1.9.0 pkg/controller/podunavailablebudget/podunavailablebudget_controller.go: the active Pods the PUB protects and the expected total.
async fn protected_pods(
    pub_: &PodUnavailableBudget,
    ctx: &Context,
    namespace: &str,
) -> Result<(Vec<Arc<Pod>>, i32)> {
    if let Some(target) = &pub_.spec.target_ref {
        let Some(w) = ctx
            .resolver
            .get(
                &ctx.client,
                namespace,
                &target.api_version,
                &target.kind,
                &target.name,
            )
            .await?
        else {
            return Ok((Vec::new(), 0));
        };
        let mut pods = ctx.pods.owned_by(&w.uid);
        if w.is_deployment {
            for rs in ctx.replicasets.owned_by(&w.uid) {
                pods.extend(
                    ctx.pods
                        .owned_by(rs.metadata.uid.as_deref().unwrap_or_default()),
                );
            }
        }
        pods.retain(predicates::is_active);
        if pods.is_empty()
            && let Some(selector) = &w.scale_selector
        {
            // A custom workload whose Pods are not owned by it directly.
            let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
            pods = api
                .list(&ListParams::default().labels(selector))
                .await?
                .items
                .into_iter()
                .filter(predicates::is_active)
                .map(Arc::new)
                .collect();
        }
        return Ok((pods, w.replicas));
    }
    let Some(selector) = pub_
        .spec
        .selector
        .as_ref()
        .filter(|s| !matching::is_empty_selector(s))
    else {
        return Ok((Vec::new(), 0));
    };
    let pods: Vec<Arc<Pod>> = ctx
        .pods
        .store()
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(namespace) && predicates::is_active(p))
        .filter(|p| {
            let labels = p.metadata.labels.clone().unwrap_or_default();
            kruise_ordering::selector::matches(selector, &labels).unwrap_or(false)
        })
        .collect();
    // Expected: the replicas of the distinct controller owners (a ReplicaSet counted as
    // its Deployment), owners being deleted ignored.
    let mut owners = BTreeSet::new();
    for pod in &pods {
        if let Some(owner) = workload::pod_owner(&ctx.client, &ctx.replicasets, pod).await {
            let api_version = if owner.kind == "Deployment" && owner.group == "apps" {
                "apps/v1".to_string()
            } else {
                controller_of(pod.metadata.owner_references.as_deref())
                    .map(|o| o.api_version.clone())
                    .unwrap_or_default()
            };
            owners.insert((api_version, owner));
        }
    }
    let mut expected = 0;
    for (api_version, WorkloadRef { kind, name, .. }) in owners {
        if let Some(w) = ctx
            .resolver
            .get(&ctx.client, namespace, &api_version, &kind, &name)
            .await?
        {
            expected += w.replicas;
        }
    }
    Ok((pods, expected))
}
