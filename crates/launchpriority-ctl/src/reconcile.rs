//! One Pod: read its barrier ConfigMap, plan, write.
//!
//! The barrier is read with a GET, not from a cache: it is read only when one of the few
//! Pods being launched in order changes (a container started or became ready), and a
//! ConfigMap watch would have to cover every ConfigMap of the cluster or rely on a label
//! users could copy. The GET is also never stale, so a key is never added twice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kruise_api::keys;
use kruise_runtime::api_error::is_conflict;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::plan::{Plan, plan};
use crate::priority::barrier_name;
use crate::{CONTROLLER_NAME, Context, Error};

/// When to look at a Pod again after releasing a level.
const RECHECK: std::time::Duration = std::time::Duration::from_secs(2);

pub async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let barriers: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &namespace);
    let barrier = barriers.get_opt(&barrier_name(&name)).await?;
    let keys: Option<BTreeSet<String>> = barrier
        .as_ref()
        .map(|cm| cm.data.iter().flatten().map(|(k, _)| k.clone()).collect());
    let plan = plan(&pod, keys.as_ref());
    if plan.is_empty() {
        return Ok(Action::await_change());
    }
    carry_out(&ctx, &pod, &barriers, plan).await
}

async fn carry_out(
    ctx: &Context,
    pod: &Pod,
    barriers: &Api<ConfigMap>,
    plan: Plan,
) -> Result<Action, Error> {
    let name = pod.name_any();
    let params = PatchParams::default();
    let released = plan.create.as_ref().is_some_and(|k| !k.is_empty()) || plan.add_key.is_some();
    if let Some(keys) = plan.create {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(barrier_name(&name)),
                // Owned by the Pod: deleted with it by the garbage collector.
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: name.clone(),
                    uid: pod.meta().uid.clone().unwrap_or_default(),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            data: Some(
                keys.iter()
                    .map(|k| (k.clone(), "true".to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        };
        match barriers.create(&PostParams::default(), &cm).await {
            Ok(_) => tracing::info!(pod = %name, ?keys, "barrier created"),
            // Created by a reconcile whose Pod event we have not seen yet: read it again.
            Err(e) if is_conflict(&e) => {
                return Ok(Action::requeue(std::time::Duration::from_millis(200)));
            }
            Err(e) => return Err(e.into()),
        }
    }
    if let Some(key) = &plan.add_key {
        barriers
            .patch(
                &barrier_name(&name),
                &params,
                &Patch::Merge(json!({"data": {key: "true"}})),
            )
            .await?;
        tracing::info!(pod = %name, key, "barrier key released");
    }
    if plan.complete {
        let pods: Api<Pod> =
            Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
        // One write: the completion (as upstream's `patchCompleted`), and the label that kept the
        // Pod in this controller's watch removed.
        pods.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {
                "annotations": {keys::CONTAINER_LAUNCH_PRIORITY_COMPLETED: "true"},
                "labels": {keys::CONTAINER_LAUNCH_BARRIER_LABEL: null},
            }})),
        )
        .await?;
        tracing::info!(pod = %name, controller = CONTROLLER_NAME, "launch order complete");
        return Ok(Action::await_change());
    }
    // The released level's containers starting will change the Pod and trigger the next
    // step; the requeue is for a node that reports no change (kwok) or an event missed.
    Ok(if released {
        Action::requeue(RECHECK)
    } else {
        Action::await_change()
    })
}
