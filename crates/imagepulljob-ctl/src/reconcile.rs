//! The I/O around the plans: read the caches, call the pure plan, write what it says.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kruise_api::apps_v1alpha1::{
    ImageListPullJob, ImagePullJob, ImagePullJobCompletionPolicyType, NodeImage, ReferenceObject,
};
use kruise_api::keys;
use kruise_runtime::api_error::{is_conflict, is_not_found};
use kruise_runtime::apply_status;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use rand::Rng;
use serde_json::json;

use crate::error::Result;
use crate::plan::{job, list, nodeimage, secrets};
use crate::{CONTROLLER_NAME, Context};

/// While a job is running, look again at least this often (NodeImage changes trigger it
/// too; this bounds a missed one).
const RUNNING_RESYNC: Duration = Duration::from_secs(30);

/// The object changed (409) or went (404) since it was read.
fn conflict_or_gone(e: &kube::Error) -> bool {
    is_not_found(e) || is_conflict(e)
}

/// `<namespace>/<name>` of a job, the form the secret references use.
fn job_key(j: &ImagePullJob) -> String {
    format!("{}/{}", j.namespace().unwrap_or_default(), j.name_any())
}

/// The secret references the job's tags hold: the job's own Secrets when it lives in the
/// config namespace, else their copies there (`<namespace>.<name>`: a namespace has no
/// dot, so copies of different sources never collide).
pub fn secret_refs(j: &ImagePullJob, config_ns: &str) -> Vec<ReferenceObject> {
    let ns = j.namespace().unwrap_or_default();
    j.spec
        .template
        .pull_secrets
        .iter()
        .map(|name| ReferenceObject {
            namespace: config_ns.to_string(),
            name: if ns == config_ns {
                name.clone()
            } else {
                format!("{ns}.{name}")
            },
            ..Default::default()
        })
        .collect()
}

fn references(secret: &Secret) -> Vec<String> {
    parse_references(
        secret
            .annotations()
            .get(keys::IMAGEPULLJOB_REFERENCES)
            .map(String::as_str)
            .unwrap_or_default(),
    )
}

/// The jobs (`<namespace>/<name>`) of a copy's references annotation: a comma-separated
/// list, as OpenKruise writes and reads it (its e2e suite splits the value on `,`). A JSON
/// list (what this controller wrote before) is read too, so older copies keep their
/// references.
pub fn parse_references(value: &str) -> Vec<String> {
    if value.trim_start().starts_with('[') {
        return serde_json::from_str(value).unwrap_or_default();
    }
    value
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_string)
        .collect()
}

/// The references annotation's value: the jobs sorted, joined by commas (upstream's form).
pub fn format_references(refs: &[String]) -> String {
    let mut refs = refs.to_vec();
    refs.sort();
    refs.dedup();
    refs.join(",")
}

/// Copies the job's pull secrets into the config namespace (upstream's `syncJobPullSecrets` and
/// `claimImagePullJobSecrets`), the job added to each copy's references. A missing source is
/// skipped (its tag then lacks the reference and the node stays unsynced until it appears).
async fn copy_secrets(ctx: &Context, j: &ImagePullJob) -> Result<()> {
    let ns = j.namespace().unwrap_or_default();
    if ns == ctx.config_namespace {
        return Ok(());
    }
    let sources: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let copies: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.config_namespace);
    let me = job_key(j);
    for (name, target) in j
        .spec
        .template
        .pull_secrets
        .iter()
        .zip(secret_refs(j, &ctx.config_namespace))
    {
        let Some(source) = sources.get_opt(name).await? else {
            tracing::warn!(job = %me, secret = %name, "pull secret not found");
            continue;
        };
        let existing = copies.get_opt(&target.name).await?;
        let mut refs = existing.as_ref().map(references).unwrap_or_default();
        if !refs.contains(&me) {
            refs.push(me.clone());
            refs.sort();
        }
        let body = json!({
            "metadata": {
                "name": target.name,
                "namespace": ctx.config_namespace,
                "annotations": {
                    keys::IMAGEPULLJOB_SOURCE_KEY: format!("{ns}/{name}"),
                    keys::IMAGEPULLJOB_REFERENCES: format_references(&refs),
                },
                "resourceVersion": existing.as_ref().and_then(|e| e.resource_version()),
            },
            "type": source.type_,
            "data": source.data,
        });
        if existing.is_some() {
            let unchanged = existing
                .as_ref()
                .is_some_and(|e| e.data == source.data && references(e) == refs);
            if !unchanged {
                copies
                    .patch(&target.name, &PatchParams::default(), &Patch::Merge(&body))
                    .await?;
            }
        } else {
            let secret: Secret = serde_json::from_value(body)?;
            // A copy made meanwhile (409) is the next round's to update. A 404 means the
            // config namespace is missing: an error, retried, never skipped, or the
            // node would pull without the credentials and fail "unauthorized".
            match copies.create(&PostParams::default(), &secret).await {
                Ok(_) => {}
                Err(e) if is_conflict(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

/// Whether a copy of the job's pull secrets is missing or behind its source, by the
/// digests the caches hold (no request).
fn copies_stale(ctx: &Context, j: &ImagePullJob, targets: &[ReferenceObject]) -> bool {
    let digest_in = |cache: &kruise_runtime::Cache<Secret>, ns: &str, name: &str| {
        cache
            .store()
            .get(&kube::runtime::reflector::ObjectRef::new(name).within(ns))
            .and_then(|s| secrets::cached_digest(&s).map(str::to_string))
    };
    secrets::copies_stale(
        j,
        targets,
        &|ns, name| digest_in(&ctx.pull_secrets, ns, name),
        &|ns, name| digest_in(&ctx.config_secrets, ns, name),
    )
}

/// Drops the job from its copies' references; a copy nobody references is deleted.
async fn release_secrets(ctx: &Context, j: &ImagePullJob) -> Result<()> {
    if j.namespace().as_deref() == Some(ctx.config_namespace.as_str()) {
        return Ok(());
    }
    let copies: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.config_namespace);
    let me = job_key(j);
    for target in secret_refs(j, &ctx.config_namespace) {
        let Some(copy) = copies.get_opt(&target.name).await? else {
            continue;
        };
        let mut refs = references(&copy);
        if !refs.contains(&me) {
            continue;
        }
        refs.retain(|r| r != &me);
        let result = if refs.is_empty() {
            copies
                .delete(&target.name, &DeleteParams::default())
                .await
                .map(|_| ())
        } else {
            let body = json!({"metadata": {
                "resourceVersion": copy.resource_version(),
                "annotations": {keys::IMAGEPULLJOB_REFERENCES: format_references(&refs)},
            }});
            copies
                .patch(&target.name, &PatchParams::default(), &Patch::Merge(&body))
                .await
                .map(|_| ())
        };
        match result {
            Ok(()) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

async fn set_finalizer(api: &Api<ImagePullJob>, j: &ImagePullJob, on: bool) -> Result<()> {
    let mut finalizers = j.finalizers().to_vec();
    let has = finalizers
        .iter()
        .any(|f| f == keys::IMAGEPULLJOB_PROTECTION_FINALIZER);
    if has == on {
        return Ok(());
    }
    if on {
        finalizers.push(keys::IMAGEPULLJOB_PROTECTION_FINALIZER.to_string());
    } else {
        finalizers.retain(|f| f != keys::IMAGEPULLJOB_PROTECTION_FINALIZER);
    }
    let body =
        json!({"metadata": {"resourceVersion": j.resource_version(), "finalizers": finalizers}});
    match api
        .patch(&j.name_any(), &PatchParams::default(), &Patch::Merge(&body))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// One ImagePullJob.
pub async fn reconcile_job(j: Arc<ImagePullJob>, ctx: Arc<Context>) -> Result<Action> {
    let api: Api<ImagePullJob> =
        Api::namespaced(ctx.client.clone(), &j.namespace().unwrap_or_default());
    if j.meta().deletion_timestamp.is_some() {
        release_secrets(&ctx, &j).await?;
        set_finalizer(&api, &j, false).await?;
        return Ok(Action::await_change());
    }
    let finished = j
        .status
        .as_ref()
        .is_some_and(|s| s.completion_time.is_some());
    if !finished {
        set_finalizer(&api, &j, true).await?;
    }
    let node_images = ctx.node_images.store().state();
    let pods = if j.spec.template.pod_selector.is_some() {
        ctx.pods.store().state()
    } else {
        Vec::new()
    };
    let always =
        j.spec.template.completion_policy.policy_type() == ImagePullJobCompletionPolicyType::Always;
    let jitter = {
        let mut rng = rand::rng();
        if always {
            rng.random_range(0..=job::ALWAYS_TTL_JITTER_SECONDS)
        } else {
            rng.random_range(-job::NEVER_TTL_JITTER_SECONDS..=job::NEVER_TTL_JITTER_SECONDS)
        }
    };
    let world = job::JobWorld {
        job: &j,
        targets: job::targets(&j, &node_images, &pods),
        secrets: secret_refs(&j, &ctx.config_namespace),
        now: Timestamp::now(),
        ttl_jitter_seconds: jitter,
        default_ttl_seconds: ctx.default_tag_ttl_seconds,
    };
    let plan = job::plan(&world);
    if !plan.writes.is_empty() || (!finished && copies_stale(&ctx, &j, &world.secrets)) {
        copy_secrets(&ctx, &j).await?;
    }
    let nodes: Api<NodeImage> = Api::all(ctx.client.clone());
    for (node, name, entry) in &plan.writes {
        let Some(ni) = node_images.iter().find(|n| &n.name_any() == node) else {
            continue;
        };
        // The resourceVersion makes it a compare-and-swap: two jobs writing one image
        // of one node never lose each other's owner entries.
        let body = json!({
            "metadata": {"resourceVersion": ni.resource_version()},
            "spec": {"images": {name: entry}},
        });
        match nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => {}
            // Changed meanwhile: the next round (triggered by that change) redoes it.
            Err(e) if conflict_or_gone(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if j.status.as_ref() != Some(&plan.status) {
        apply_status(&api, &j, &plan.status, CONTROLLER_NAME).await?;
    }
    if plan.finished {
        release_secrets(&ctx, &j).await?;
        set_finalizer(&api, &j, false).await?;
    }
    if plan.delete {
        match api.delete(&j.name_any(), &DeleteParams::background()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
        return Ok(Action::await_change());
    }
    let requeue = match (plan.requeue_after, plan.finished) {
        (Some(d), true) => Some(d + Duration::from_millis(100)),
        (None, true) => None,
        (d, false) => Some(d.map_or(RUNNING_RESYNC, |d| {
            (d + Duration::from_millis(100)).min(RUNNING_RESYNC)
        })),
    };
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

/// One ImageListPullJob.
pub async fn reconcile_list(l: Arc<ImageListPullJob>, ctx: Arc<Context>) -> Result<Action> {
    if l.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = l.namespace().unwrap_or_default();
    let jobs: Api<ImagePullJob> = Api::namespaced(ctx.client.clone(), &ns);
    let api: Api<ImageListPullJob> = Api::namespaced(ctx.client.clone(), &ns);
    let children = ctx.jobs.owned_by(&l.uid().unwrap_or_default());
    let refs: Vec<&ImagePullJob> = children.iter().map(|c| c.as_ref()).collect();
    let plan = list::plan(&l, &refs, Timestamp::now());
    if plan.delete_self {
        match api.delete(&l.name_any(), &DeleteParams::background()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
        return Ok(Action::await_change());
    }
    for name in &plan.delete {
        match jobs.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    for child in &plan.create {
        jobs.create(&PostParams::default(), child).await?;
    }
    if l.status.as_ref() != Some(&plan.status) {
        apply_status(&api, &l, &plan.status, CONTROLLER_NAME).await?;
    }
    Ok(plan.requeue_after.map_or_else(Action::await_change, |d| {
        Action::requeue(d + Duration::from_millis(100))
    }))
}

/// One pass over every Node and NodeImage: create, relabel and delete NodeImages, and
/// prune their specs. Returns when to look again at the latest.
pub async fn sweep_node_images(ctx: &Context) -> Result<Option<Duration>> {
    let now = Timestamp::now();
    let nodes = ctx.nodes.store().state();
    let node_images = ctx.node_images.store().state();
    let (changes, mut again) = nodeimage::lifecycle(
        &nodes.iter().map(|n| n.as_ref()).collect::<Vec<_>>(),
        &node_images.iter().map(|n| n.as_ref()).collect::<Vec<_>>(),
        now,
    );
    let api: Api<NodeImage> = Api::all(ctx.client.clone());
    for change in changes {
        let result = match &change {
            nodeimage::Lifecycle::Create { name, labels } => {
                let ni = NodeImage {
                    metadata: kube::api::ObjectMeta {
                        name: Some(name.clone()),
                        labels: Some(labels.clone()),
                        ..Default::default()
                    },
                    spec: Default::default(),
                    status: None,
                };
                // With its counters at 0 (as `kubectl get nodeimage` shows a fresh one under
                // OpenKruise), until the node's agent writes its own.
                match api.create(&PostParams::default(), &ni).await {
                    Ok(_) => write_status(&api, name, &Default::default()).await,
                    Err(e) => Err(e),
                }
            }
            nodeimage::Lifecycle::Relabel { name, labels } => {
                // Labels the Node dropped are removed (null), the others set.
                let current = node_images
                    .iter()
                    .find(|n| &n.name_any() == name)
                    .map(|n| n.labels().clone())
                    .unwrap_or_default();
                let mut patch: BTreeMap<String, Option<String>> =
                    current.keys().map(|k| (k.clone(), None)).collect();
                patch.extend(labels.iter().map(|(k, v)| (k.clone(), Some(v.clone()))));
                api.patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": patch}})),
                )
                .await
                .map(|_| ())
            }
            nodeimage::Lifecycle::Delete { name } => api
                .delete(name, &DeleteParams::background())
                .await
                .map(|_| ()),
        };
        match result {
            Ok(()) => tracing::info!(?change, "NodeImage lifecycle"),
            Err(e) if conflict_or_gone(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    // Decided before any write (the lookups borrow the caches, and are not Send).
    let decisions: Vec<_> = {
        let jobs = ctx.jobs.store();
        let job_uid = |ns: &str, name: &str| {
            jobs.get(&kube::runtime::reflector::ObjectRef::new(name).within(ns))
                .and_then(|j| j.uid())
        };
        let in_scope = |ns: &str| ctx.scope.as_deref().is_none_or(|s| s == ns);
        let secrets = ctx.config_secrets.store();
        // Known only for the config namespace (the copies); elsewhere: keep.
        let secret_exists = |r: &ReferenceObject| {
            (r.namespace == ctx.config_namespace).then(|| {
                secrets
                    .get(&kube::runtime::reflector::ObjectRef::new(&r.name).within(&r.namespace))
                    .is_some()
            })
        };
        let world = nodeimage::PruneWorld {
            job_uid: &job_uid,
            in_scope: &in_scope,
            secret_exists: &secret_exists,
            now,
        };
        node_images
            .iter()
            .map(|ni| (ni.clone(), nodeimage::prune(ni, &world)))
            .collect()
    };
    for ni in &node_images {
        let (timed_out, wait) = nodeimage::timeouts(ni, now);
        if let Some(w) = wait {
            again = Some(again.map_or(w, |a| a.min(w)));
        }
        if timed_out.is_empty() {
            continue;
        }
        let status = nodeimage::with_timeouts(ni, &timed_out, now);
        match write_status(&api, &ni.name_any(), &status).await {
            Ok(()) => {}
            Err(e) if conflict_or_gone(&e) => continue,
            Err(e) => return Err(e.into()),
        }
        let node_image_ref = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(NodeImage::api_version(&()).into()),
            kind: Some(NodeImage::kind(&()).into()),
            name: ni.metadata.name.clone(),
            uid: ni.metadata.uid.clone(),
            ..Default::default()
        };
        for t in &timed_out {
            let note = format!(
                "Image {}:{} failed to pull on node {}: {}",
                t.image,
                t.tag,
                ni.name_any(),
                t.message
            );
            for target in std::iter::once(&node_image_ref).chain(&t.owners) {
                ctx.events
                    .warning(target, keys::EVENT_PULL_IMAGE_FAILED, note.clone());
            }
        }
    }
    for (ni, (pruned, wait)) in decisions {
        if let Some(w) = wait {
            again = Some(again.map_or(w, |a| a.min(w)));
        }
        let Some(spec) = pruned else { continue };
        let body = json!({
            "metadata": {"resourceVersion": ni.resource_version()},
            "spec": spec,
        });
        // A merge patch cannot drop map keys it does not name: images left out are set
        // to null explicitly.
        let mut body = body;
        for name in ni.spec.images.keys() {
            if !spec.images.contains_key(name) {
                body["spec"]["images"][name] = serde_json::Value::Null;
            }
        }
        match api
            .patch(
                &ni.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&body),
            )
            .await
        {
            Ok(_) => tracing::info!(node = %ni.name_any(), "NodeImage pruned"),
            Err(e) if conflict_or_gone(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(again)
}

/// Replaces a NodeImage's whole status (a JSON patch `add /status`: tags that left the
/// status leave it, as the agent writes it).
async fn write_status(
    api: &Api<NodeImage>,
    name: &str,
    status: &kruise_api::apps_v1alpha1::NodeImageStatus,
) -> Result<(), kube::Error> {
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "add", "path": "/status", "value": status}
    ]))
    .map_err(kube::Error::SerdeError)?;
    api.patch_status(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_a_comma_separated_list_as_upstream_writes_them() {
        assert_eq!(
            format_references(&["ns-b/job".into(), "ns-a/job".into(), "ns-a/job".into()]),
            "ns-a/job,ns-b/job"
        );
        // OpenKruise's e2e suite: strings.Split(value, ",") then SplitMetaNamespaceKey.
        assert_eq!(
            parse_references("ns-a/job,ns-b/job"),
            ["ns-a/job", "ns-b/job"]
        );
        assert_eq!(parse_references("ns-a/job"), ["ns-a/job"]);
        assert!(parse_references("").is_empty());
    }

    #[test]
    fn references_written_as_json_before_are_still_read() {
        assert_eq!(
            parse_references(r#"["ns-a/job","ns-b/job"]"#),
            ["ns-a/job", "ns-b/job"]
        );
    }
}
