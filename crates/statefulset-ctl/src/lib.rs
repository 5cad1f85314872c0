//! The Advanced StatefulSet controller (`apps.kruise.io/v1beta1` StatefulSet): `run()`
//! builds the caches, the webhook and the controller, and serves until shutdown.
//! Everything it decides is in [`plan`] (pure); [`reconcile`] reads the caches and hands
//! the plan to the shared executor (`kruise_workload::Writer`).

pub mod error;
pub mod events;
pub mod plan;
pub mod reconcile;
pub mod webhook;

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kruise_api::apps_v1beta1::StatefulSet;
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
    pub sets: Cache<StatefulSet>,
    pub pods: Cache<Pod>,
    pub pvcs: Cache<PersistentVolumeClaim>,
    pub revisions: Cache<ControllerRevision>,
    pub writer: Writer,
    pub options: Options,
    pub reconciler: Reconciler,
}

/// The controller's options from the feature gates.
pub fn options(runtime: &Runtime) -> Options {
    let g = &runtime.gates;
    Options {
        in_place: kruise_inplace::DiffOptions {
            env_from_metadata: g.enabled(gates::IN_PLACE_UPDATE_ENV_FROM_METADATA),
            vertical_scaling: g.enabled(gates::IN_PLACE_WORKLOAD_VERTICAL_SCALING),
        },
        start_ordinal: g.enabled(gates::STATEFULSET_START_ORDINAL),
        auto_delete_pvc: g.enabled(gates::STATEFULSET_AUTO_DELETE_PVC),
        pod_index_label: g.enabled(gates::POD_INDEX_LABEL),
        predownload: g.enabled(gates::PRE_DOWNLOAD_IMAGE_FOR_IN_PLACE_UPDATE),
        auto_resize_pvc: g.enabled(gates::STATEFULSET_AUTO_RESIZE_PVC_GATE),
    }
}

/// The caches and the shared context.
pub fn context(runtime: &Runtime) -> Arc<Context> {
    let sets = runtime.tolerant_cache::<StatefulSet>(watcher::Config::default(), prune);
    // Every StatefulSet Pod carries its identity label; nothing else is watched.
    let pods = runtime.cache::<Pod>(
        watcher::Config::default().labels(keys::STATEFULSET_POD_NAME),
        kruise_workload::prune_pod,
    );
    // Claims are found by name (`<template>-<set>-<ordinal>`): by default they have no
    // owner and no label of ours.
    let pvcs = runtime.cache::<PersistentVolumeClaim>(watcher::Config::default(), |c| {
        prune(c);
        c.metadata.annotations = None;
    });
    let revisions = runtime.cache::<ControllerRevision>(watcher::Config::default(), prune);
    Arc::new(Context {
        client: runtime.client.clone(),
        sets,
        pods,
        pvcs,
        revisions,
        writer: Writer::new(
            PodControl::new(
                runtime.client.clone(),
                runtime.events(),
                runtime.metrics.clone(),
                CONTROLLER_NAME,
            )
            .with_messages(events::StatefulSetMessages),
        )
        .consulting_budgets(kruise_pub::Options::from_gates(&runtime.gates)),
        options: options(runtime),
        reconciler: Reconciler::new(runtime.metrics.clone(), CONTROLLER_NAME, "StatefulSet"),
    })
}

/// The StatefulSet an orphan Pod (no controller) is named for: `<set>-<ordinal>` in its
/// namespace. The set decides whether to adopt it ([`plan::ordinals::orphans_to_adopt`]).
fn set_named_by(pod: &Pod) -> Option<ObjectRef<StatefulSet>> {
    let meta = &pod.metadata;
    if meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true))
    {
        return None;
    }
    let name = meta.name.as_deref()?;
    let (set, _) = name.rsplit_once('-')?;
    // A set's name is a DNS label: it cannot be empty or end with '-'.
    if set.is_empty() || set.ends_with('-') {
        return None;
    }
    plan::ordinals::ordinal_of(set, name)?;
    Some(ObjectRef::new(set).within(meta.namespace.as_deref()?))
}

/// Runs until shutdown: every replica keeps its caches warm and serves admission; only
/// the lease holder reconciles, a StatefulSet whenever it or one of its Pods changes.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let ctx = context(&runtime);
    let routes = webhook::routes(
        !runtime.gates.enabled(gates::TEMPLATE_NO_DEFAULTS),
        ctx.options.auto_resize_pvc.then(|| runtime.client.clone()),
    );
    let (r, sets, pods) = (&ctx.reconciler, &ctx.sets, &ctx.pods);
    let controller = |workers| {
        // A Pod triggers its controller; an orphan, the set it is named for (adoption).
        let owner_of = r.owner_of::<StatefulSet, Pod>();
        let triggers = move |pod: Arc<Pod>| {
            let orphan_of = set_named_by(&pod);
            owner_of(pod).or(orphan_of)
        };
        let controller = r
            .controller(sets, workers)
            .watches_shared_stream(pods.subscribe(), triggers);
        r.run_with(controller, ctx.clone(), reconcile::reconcile)
    };
    runtime
        .serve_with_webhooks(routes, webhook::configurations, controller)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn pod(name: &str, controlled: bool) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("ns".into());
        if controlled {
            p.metadata.owner_references = Some(vec![OwnerReference {
                controller: Some(true),
                ..Default::default()
            }]);
        }
        p
    }

    #[test]
    fn an_orphan_triggers_the_set_it_is_named_for() {
        let set = |name: &str, controlled| set_named_by(&pod(name, controlled));
        assert_eq!(
            set("web-0", false),
            Some(ObjectRef::new("web").within("ns"))
        );
        assert_eq!(
            set("my-web-12", false),
            Some(ObjectRef::new("my-web").within("ns"))
        );
        // Owned Pods go to their controller; other names to nobody.
        assert_eq!(set("web-0", true), None);
        for name in ["web", "web-01", "web-x", "web--1"] {
            assert_eq!(set(name, false), None, "{name}");
        }
    }
}
