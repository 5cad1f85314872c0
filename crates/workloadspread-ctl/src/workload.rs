//! The target workload as the controller and the webhooks read it, from the caches: its
//! UID and replicas, its Pods, a Deployment's newest version, and which WorkloadSpread
//! a Pod belongs to (climbing ReplicaSet → Deployment).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::apps_v1alpha1::WorkloadSpread;
use kruise_api::keys;
use kube::api::Api;
use kube::core::{DynamicObject, GroupVersionKind};
use kube::runtime::reflector::{ObjectRef, Store};

use crate::Context;
use crate::plan::custom;
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

/// The replicas of `object`: `targetFilter.replicasPathList` summed when set (spec
/// 1.4.3), else `default`. A path that does not read is logged and counts as `default`.
fn replicas_by_paths(ws: &WorkloadSpread, object: impl serde::Serialize, default: i32) -> i32 {
    let paths = target_paths(ws);
    if paths.is_empty() {
        return default;
    }
    let value = serde_json::to_value(object).unwrap_or_default();
    custom::sum_replicas(&value, paths).unwrap_or_else(|e| {
        tracing::warn!(ws = ?ws.metadata.name, error = %e, "replicasPathList does not read");
        default
    })
}

fn target_paths(ws: &WorkloadSpread) -> &[String] {
    ws.spec
        .target_filter
        .as_ref()
        .map_or(&[][..], |f| f.replicas_path_list.as_slice())
}

/// The built-in target of `ws` in `namespace`, from the caches; `None` when it is not
/// cached or its kind is not built in.
pub fn target(ctx: &Context, namespace: &str, ws: &WorkloadSpread) -> Option<Target> {
    let r = &ws.spec.target_ref;
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
            let replicas = replicas_by_paths(ws, &*o, o.spec.replicas.unwrap_or(1));
            target_of(kind, &o.metadata, replicas)
        }
        TargetKind::Deployment => {
            let o = ctx.deployments.store().get(key!())?;
            let replicas = o.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            target_of(kind, &o.metadata, replicas_by_paths(ws, &*o, replicas))
        }
        TargetKind::ReplicaSet => {
            let o = ctx.replicasets.store().get(key!())?;
            let replicas = o.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            target_of(kind, &o.metadata, replicas_by_paths(ws, &*o, replicas))
        }
        TargetKind::Job => {
            let o = ctx.jobs.store().get(key!())?;
            let replicas = o.spec.as_ref().and_then(|s| s.parallelism).unwrap_or(1);
            target_of(kind, &o.metadata, replicas_by_paths(ws, &*o, replicas))
        }
        TargetKind::StatefulSet => {
            let o = ctx.statefulsets.store().get(key!())?;
            let replicas = o.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            target_of(kind, &o.metadata, replicas_by_paths(ws, &*o, replicas))
        }
        TargetKind::AdvancedStatefulSet => {
            let o = ctx.advanced.store().get(key!())?;
            let replicas = replicas_by_paths(ws, &*o, o.spec.replicas());
            target_of(kind, &o.metadata, replicas)
        }
        TargetKind::Custom => None,
    }
}

/// The allowlist of custom workloads from `kruise-configuration` in the controller's
/// configuration namespace (empty when the ConfigMap or its key is absent). Read when
/// needed: only WorkloadSpreads of custom kinds ask for it.
pub async fn allowlist(ctx: &Context) -> Result<custom::Allowlist, String> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.config_namespace);
    let cm = api
        .get_opt(keys::SIDECARSET_CONFIGMAP)
        .await
        .map_err(|e| e.to_string())?;
    match cm
        .and_then(|cm| cm.data)
        .and_then(|d| d.get(keys::WS_WATCH_CUSTOM_WORKLOAD_WHITELIST).cloned())
    {
        Some(raw) => custom::Allowlist::parse(&raw)
            .map_err(|e| format!("{}: {e}", keys::WS_WATCH_CUSTOM_WORKLOAD_WHITELIST)),
        None => Ok(custom::Allowlist::default()),
    }
}

/// The kind of `ws`'s target: built in, or allow-listed (reading the allowlist only for
/// a kind that is not built in).
pub async fn target_kind(ctx: &Context, ws: &WorkloadSpread) -> Option<TargetKind> {
    let r = &ws.spec.target_ref;
    if !TargetKind::needs_allowlist(r) {
        return TargetKind::of_ref(r);
    }
    match allowlist(ctx).await {
        Ok(list) => TargetKind::resolve(r, &list),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the custom workload allowlist");
            None
        }
    }
}

/// The dynamic API of `api_version`/`kind` (discovered: a custom kind's plural and
/// whether it serves `scale`).
async fn dynamic_api(
    ctx: &Context,
    namespace: &str,
    api_version: &str,
    kind: &str,
) -> Option<(Api<DynamicObject>, bool)> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (ar, caps) = match kube::discovery::pinned_kind(&ctx.client, &gvk).await {
        Ok(found) => found,
        Err(e) => {
            tracing::debug!(%api_version, %kind, error = %e, "kind not served");
            return None;
        }
    };
    let scale = caps.subresources.iter().any(|(s, _)| s.plural == "scale");
    Some((
        Api::namespaced_with(ctx.client.clone(), namespace, &ar),
        scale,
    ))
}

/// The target of `ws` read from the API: a built-in one the cache has not seen yet (a
/// workload creating its first Pods right after it was made), or a custom one, whose
/// replicas come from `targetFilter.replicasPathList`, else the allowlist's
/// `ReplicasPath`, else its scale subresource, else 0 (a DaemonSet-like workload: only
/// integer caps mean anything then).
pub async fn target_fresh(
    ctx: &Context,
    namespace: &str,
    ws: &WorkloadSpread,
    kind: TargetKind,
) -> Option<Target> {
    if let Some(t) = target(ctx, namespace, ws) {
        return Some(t);
    }
    let r = &ws.spec.target_ref;
    let (api, scale) = dynamic_api(ctx, namespace, &r.api_version, &r.kind).await?;
    let o = api.get_opt(&r.name).await.ok().flatten()?;
    let object = serde_json::to_value(&o).unwrap_or_default();
    let read = |path: &str| {
        custom::replicas_at(&object, path)
            .ok()
            .flatten()
            .and_then(|n| i32::try_from(n).ok())
    };
    let replicas = match kind {
        TargetKind::Custom => {
            let paths = target_paths(ws);
            if !paths.is_empty() {
                replicas_by_paths(ws, &object, 0)
            } else if let Some(path) = allowlist(ctx).await.ok().and_then(|l| {
                l.workload(&r.api_version, &r.kind)
                    .and_then(|w| w.replicas_path.clone())
            }) {
                read(&path).unwrap_or(0)
            } else if scale {
                match api.get_scale(&r.name).await {
                    Ok(s) => s.spec.and_then(|s| s.replicas).unwrap_or(0),
                    Err(_) => 0,
                }
            } else {
                0
            }
        }
        TargetKind::Job => replicas_by_paths(ws, &object, read("spec.parallelism").unwrap_or(1)),
        _ => replicas_by_paths(ws, &object, read("spec.replicas").unwrap_or(1)),
    };
    target_of(kind, &o.metadata, replicas)
}

/// The target's replicas for the webhook.
pub async fn replicas(
    ctx: &Context,
    namespace: &str,
    ws: &WorkloadSpread,
    kind: TargetKind,
) -> Option<i32> {
    target_fresh(ctx, namespace, ws, kind)
        .await
        .map(|t| t.replicas)
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

/// The Pods of a custom workload's sub-resources (kinds the allowlist names between the
/// workload and its Pods) whose controller is the workload `uid`.
pub async fn sub_resource_pods(
    ctx: &Context,
    namespace: &str,
    ws: &WorkloadSpread,
    uid: &str,
) -> Vec<Arc<Pod>> {
    let r = &ws.spec.target_ref;
    let Ok(list) = allowlist(ctx).await else {
        return Vec::new();
    };
    let Some(workload) = list.workload(&r.api_version, &r.kind) else {
        return Vec::new();
    };
    let mut pods = Vec::new();
    for sub in &workload.sub_resources {
        let api_version = if sub.group.is_empty() {
            sub.version.clone()
        } else {
            format!("{}/{}", sub.group, sub.version)
        };
        let Some((api, _)) = dynamic_api(ctx, namespace, &api_version, &sub.kind).await else {
            continue;
        };
        let Ok(objects) = api.list(&Default::default()).await else {
            continue;
        };
        for o in objects.items {
            let owned = controller_of(o.metadata.owner_references.as_deref())
                .is_some_and(|owner| owner.uid == uid);
            if owned && let Some(sub_uid) = o.metadata.uid.as_deref() {
                pods.extend(ctx.pods.owned_by(sub_uid));
            }
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

pub use kruise_runtime::meta::controller_of;

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
    climb_sub_resources(ctx, pod, &mut chain).await;
    chain
}

/// A Pod owned by a sub-resource of an allow-listed custom workload (a kind the workload
/// creates, which creates the Pods) belongs to that object's controller too: read it
/// and add its owner to `chain`. Only looked at when a WorkloadSpread of the namespace
/// targets a custom kind, so other Pods cost no read.
async fn climb_sub_resources(ctx: &Context, pod: &Pod, chain: &mut Vec<(String, String, String)>) {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let custom_targets = ctx.wss.store().state().iter().any(|ws| {
        ws.metadata.namespace.as_deref() == Some(ns)
            && TargetKind::needs_allowlist(&ws.spec.target_ref)
    });
    let Some((api_version, kind, name)) = chain.last().cloned() else {
        return;
    };
    if !custom_targets || TargetKind::of(&api_version, &kind).is_some() {
        return;
    }
    let Ok(list) = allowlist(ctx).await else {
        return;
    };
    if !list.is_sub_resource(&api_version, &kind) {
        return;
    }
    let Some((api, _)) = dynamic_api(ctx, ns, &api_version, &kind).await else {
        return;
    };
    if let Ok(Some(o)) = api.get_opt(&name).await
        && let Some(owner) = controller_of(o.metadata.owner_references.as_deref())
    {
        chain.push((
            owner.api_version.clone(),
            owner.kind.clone(),
            owner.name.clone(),
        ));
    }
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
