//! The target workload as the controller and the webhooks read it, from the caches: its
//! UID and replicas, its Pods, a Deployment's newest version, and which WorkloadSpread
//! a Pod belongs to (climbing ReplicaSet → Deployment).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kruise_api::apps_v1alpha1::{TargetReference, WorkloadSpread};
use kruise_api::keys;
use kube::api::Api;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{ObjectRef, Store};

use crate::Context;
use crate::plan::target::{TargetKind, group_of};

/// Annotation of a Deployment's ReplicaSets: their revision (the highest is newest).
pub const DEPLOYMENT_REVISION: &str = "deployment.kubernetes.io/revision";

/// The target as the decisions read it.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub kind: TargetKind,
    pub uid: String,
    /// Desired replicas (a Job's parallelism); 0 while it is being deleted.
    pub replicas: i32,
}

fn target_of(kind: TargetKind, meta: &ObjectMeta, replicas: i32) -> Option<Target> {
    Some(Target {
        kind,
        uid: meta.uid.clone()?,
        replicas: if meta.deletion_timestamp.is_some() {
            0
        } else {
            replicas
        },
    })
}

/// The target of `r` in `namespace`, from the caches; `None` when it (or its kind) is
/// unknown.
pub fn target(ctx: &Context, namespace: &str, r: &TargetReference) -> Option<Target> {
    let kind = TargetKind::of_ref(r)?;
    let name = r.name.as_str();
    macro_rules! key {
        () => {
            &ObjectRef::new(name).within(namespace)
        };
    }
    match kind {
        TargetKind::CloneSet => {
            let o = ctx.clonesets.store().get(key!())?;
            target_of(kind, &o.metadata, o.spec.replicas.unwrap_or(1))
        }
        TargetKind::Deployment => {
            let o = ctx.deployments.store().get(key!())?;
            let replicas = o.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            target_of(kind, &o.metadata, replicas)
        }
        TargetKind::ReplicaSet => {
            let o = ctx.replicasets.store().get(key!())?;
            let replicas = o.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            target_of(kind, &o.metadata, replicas)
        }
        TargetKind::Job => {
            let o = ctx.jobs.store().get(key!())?;
            let replicas = o.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1);
            target_of(kind, &o.metadata, replicas)
        }
        TargetKind::StatefulSet => {
            let o = ctx.statefulsets.store().get(key!())?;
            let replicas = o.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            target_of(kind, &o.metadata, replicas)
        }
        TargetKind::AdvancedStatefulSet => {
            let o = ctx.advanced.store().get(key!())?;
            target_of(kind, &o.metadata, o.spec.replicas())
        }
    }
}

/// The target's replicas for the webhook: the cache, or a GET when the cache has not
/// seen the workload yet (a workload creating its first Pods right after it was made).
pub async fn replicas(ctx: &Context, namespace: &str, r: &TargetReference) -> Option<i32> {
    if let Some(t) = target(ctx, namespace, r) {
        return Some(t.replicas);
    }
    let kind = TargetKind::of_ref(r)?;
    let version = r.api_version.split_once('/').map_or("v1", |(_, v)| v);
    let plural = match kind {
        TargetKind::CloneSet => "clonesets",
        TargetKind::Deployment => "deployments",
        TargetKind::ReplicaSet => "replicasets",
        TargetKind::Job => "jobs",
        TargetKind::StatefulSet | TargetKind::AdvancedStatefulSet => "statefulsets",
    };
    let gvk = GroupVersionKind::gvk(kind.group(), version, kind.kind());
    let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, &ar);
    let o = api.get_opt(&r.name).await.ok().flatten()?;
    let field = if kind == TargetKind::Job {
        "parallelism"
    } else {
        "replicas"
    };
    let replicas = o.data["spec"][field].as_i64().unwrap_or(1);
    Some(if o.metadata.deletion_timestamp.is_some() {
        0
    } else {
        i32::try_from(replicas).unwrap_or(i32::MAX)
    })
}

/// The Pods of the target (any phase): owned by it, or for a Deployment by its
/// ReplicaSets.
pub fn pods_of(ctx: &Context, target: &Target) -> Vec<Arc<Pod>> {
    let mut pods = ctx.pods.owned_by(&target.uid);
    if target.kind == TargetKind::Deployment {
        for rs in ctx.replicasets.owned_by(&target.uid) {
            pods.extend(
                ctx.pods
                    .owned_by(rs.metadata.uid.as_deref().unwrap_or_default()),
            );
        }
    }
    pods
}

/// A Deployment's newest version: the `pod-template-hash` of its ReplicaSet with the
/// highest revision.
pub fn latest_version(ctx: &Context, deployment_uid: &str) -> Option<String> {
    ctx.replicasets
        .owned_by(deployment_uid)
        .into_iter()
        .filter_map(|rs| {
            let revision: i64 = rs
                .metadata
                .annotations
                .as_ref()?
                .get(DEPLOYMENT_REVISION)?
                .parse()
                .ok()?;
            let hash = rs
                .metadata
                .labels
                .as_ref()?
                .get(keys::POD_TEMPLATE_HASH)?
                .clone();
            Some((revision, hash))
        })
        .max()
        .map(|(_, hash)| hash)
}

pub fn controller_of(owners: Option<&[OwnerReference]>) -> Option<&OwnerReference> {
    owners?.iter().find(|o| o.controller == Some(true))
}

/// The objects a Pod belongs to, nearest first, as (apiVersion, kind, name): its
/// controller owner and, for a ReplicaSet, the ReplicaSet's controller owner (read from
/// the cache, or `fetch` when the cache has not seen the ReplicaSet).
pub fn owner_chain(
    pod: &Pod,
    replicasets: &Store<k8s_openapi::api::apps::v1::ReplicaSet>,
) -> (Vec<(String, String, String)>, Option<String>) {
    let mut chain = Vec::new();
    let Some(owner) = controller_of(pod.metadata.owner_references.as_deref()) else {
        return (chain, None);
    };
    chain.push((
        owner.api_version.clone(),
        owner.kind.clone(),
        owner.name.clone(),
    ));
    let mut unresolved = None;
    if owner.kind == "ReplicaSet" && group_of(&owner.api_version) == "apps" {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        match replicasets.get(&ObjectRef::new(&owner.name).within(ns)) {
            Some(rs) => {
                if let Some(d) = controller_of(rs.metadata.owner_references.as_deref()) {
                    chain.push((d.api_version.clone(), d.kind.clone(), d.name.clone()));
                }
            }
            None => unresolved = Some(owner.name.clone()),
        }
    }
    (chain, unresolved)
}

/// [`owner_chain`], reading a ReplicaSet the cache does not show yet from the API.
pub async fn owner_chain_fresh(ctx: &Context, pod: &Pod) -> Vec<(String, String, String)> {
    let (mut chain, unresolved) = owner_chain(pod, ctx.replicasets.store());
    if let Some(rs) = unresolved {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<k8s_openapi::api::apps::v1::ReplicaSet> =
            Api::namespaced(ctx.client.clone(), ns);
        if let Ok(Some(rs)) = api.get_opt(&rs).await
            && let Some(d) = controller_of(rs.metadata.owner_references.as_deref())
        {
            chain.push((d.api_version.clone(), d.kind.clone(), d.name.clone()));
        }
    }
    chain
}

/// The WorkloadSpread of `namespace` targeting the nearest object of `chain` whose
/// `targetFilter.selector` (if any) matches `labels`; WorkloadSpreads being deleted
/// are skipped.
pub fn ws_for_chain(
    wss: &Store<WorkloadSpread>,
    namespace: &str,
    chain: &[(String, String, String)],
    labels: &std::collections::BTreeMap<String, String>,
) -> Option<Arc<WorkloadSpread>> {
    let all = wss.state();
    for (api_version, kind, name) in chain {
        if let Some(ws) = all.iter().find(|ws| {
            ws.metadata.namespace.as_deref() == Some(namespace)
                && ws.metadata.deletion_timestamp.is_none()
                && TargetKind::refers_to(&ws.spec.target_ref, api_version, kind, name)
                && selected(ws, labels)
        }) {
            return Some(ws.clone());
        }
    }
    None
}

/// The Pod's labels pass the WorkloadSpread's `targetFilter.selector` (none: all pass).
pub fn selected(ws: &WorkloadSpread, labels: &std::collections::BTreeMap<String, String>) -> bool {
    match ws
        .spec
        .target_filter
        .as_ref()
        .and_then(|f| f.selector.as_ref())
    {
        None => true,
        Some(selector) => kruise_ordering::selector::matches(selector, labels).unwrap_or(false),
    }
}
