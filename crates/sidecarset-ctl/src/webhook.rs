//! Admission served by `sidecarset-ctl` on the shared webhook server:
//!
//! - **Pod injection** (`/mutate-pod-sidecarset`, pods CREATE only): see
//!   [`crate::inject`].
//! - **SidecarSet defaulting** (`/mutate-apps-kruise-io-v1alpha1-sidecarset`): core
//!   container defaults and the two hash annotations.
//! - **SidecarSet validation** (`/validate-apps-kruise-io-v1alpha1-sidecarset`): see
//!   [`crate::validation`].
//!
//! Every webhook uses `failurePolicy: Fail`. For SidecarSets that only blocks SidecarSet
//! changes while the controller is down. For Pods it means a Pod that should get a
//! sidecar is never started without it (a log agent or a mesh proxy silently missing is
//! worse than a Pod that waits: its controller retries). What keeps that from blocking
//! unrelated Pods is scope: kube-system and the controller's own namespace are excluded,
//! only CREATE is intercepted, and a `matchConditions` expression built from the current
//! SidecarSets ([`crate::conditions`]) keeps the apiserver from calling for any Pod no
//! SidecarSet can select. With sidecarset-ctl down, only Pods that would have been
//! injected are refused.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kruise_api::apps_v1alpha1::SidecarSet;
use kruise_api::keys;
use kruise_runtime::WebhookServer;
use kruise_runtime::webhook::{
    AdmissionRequest, AdmissionResponse, HandlerError, Operation, Route, dynamic, json_patch,
};
use kube::Api;
use kube::core::DynamicObject;
use serde_json::{Value, json};

use crate::conditions;
use crate::context::{Context, RevisionStore};
use crate::defaults;
use crate::hash;
use crate::inject;
use crate::matching;
use crate::validation::{self, Whitelist};

pub const POD_PATH: &str = "/mutate-pod-sidecarset";
pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-v1alpha1-sidecarset";
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-sidecarset";
/// The CRD conversion webhook (v1alpha1 ⇄ v1beta1), registered by cluster-wide instances.
pub const CONVERT_PATH: &str = kruise_api::conversion::path::SIDECARSET;

fn internal(e: impl std::fmt::Display) -> HandlerError {
    HandlerError::Internal(e.to_string())
}

/// The routes, sharing the controller's caches.
pub fn routes(ctx: Arc<Context>) -> Vec<Route> {
    let pods = ctx.clone();
    let validate = ctx;
    vec![
        Route::new(
            POD_PATH,
            "sidecarset-inject",
            dynamic(move |req| {
                let ctx = pods.clone();
                async move {
                    await_admitted_sidecarsets(&ctx, &req).await;
                    mutate_pod(&ctx, req, jiff::Timestamp::now(), &mut || {
                        rand::random::<f64>()
                    })
                }
            }),
        ),
        Route::new(
            MUTATE_PATH,
            "mutate-sidecarset",
            dynamic(|req| async move { mutate_sidecarset(req) }),
        ),
        Route::new(
            VALIDATE_PATH,
            "validate-sidecarset",
            dynamic(move |req| {
                let ctx = validate.clone();
                async move { validate_sidecarset(&ctx, req).await }
            }),
        ),
        conversion_route(),
    ]
}

/// v1beta1 clients are served through conversion (stored and reconciled: v1alpha1).
pub fn conversion_route() -> Route {
    Route::conversion(
        CONVERT_PATH,
        "convert-sidecarset",
        "sidecarsets.apps.kruise.io",
        Arc::new(kruise_api::conversion::convert_sidecarset),
    )
}

/// A SidecarSet admitted a moment ago may not be in the cache yet: a Pod it selects
/// waits for it (briefly), or it would be created without the sidecar.
async fn await_admitted_sidecarsets(ctx: &Context, req: &AdmissionRequest<DynamicObject>) {
    const WAIT: Duration = Duration::from_secs(2);
    let Some(labels) = req
        .object
        .as_ref()
        .map(|o| o.metadata.labels.clone().unwrap_or_default())
    else {
        return;
    };
    let pending: Vec<_> = ctx
        .conditions
        .recently_admitted_within(WAIT)
        .into_iter()
        .filter(|ss| {
            ss.spec
                .selector
                .as_ref()
                .is_some_and(|s| matching::selects(s, &labels))
        })
        .collect();
    if pending.is_empty() {
        return;
    }
    let in_cache = |ss: &SidecarSet| {
        ctx.sidecarsets
            .store()
            .get(&kube::runtime::reflector::ObjectRef::from_obj(ss))
            .is_some_and(|c| c.metadata.generation >= ss.metadata.generation)
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    while !pending.iter().all(|ss| in_cache(ss)) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Pod CREATE: inject the chosen SidecarSets.
pub fn mutate_pod(
    ctx: &Context,
    req: AdmissionRequest<DynamicObject>,
    now: jiff::Timestamp,
    draw: &mut dyn FnMut() -> f64,
) -> Result<AdmissionResponse, HandlerError> {
    if req.operation == Operation::Create && !ctx.is_synced() {
        // Answering now would admit the Pod without its sidecars.
        return Err(internal("SidecarSet caches are not synced yet; retry"));
    }
    let sidecarsets = ctx.managed_sidecarsets();
    let revisions = RevisionStore {
        cache: &ctx.revisions,
        namespace: &ctx.revision_namespace,
    };
    review_pod(req, &sidecarsets, &ctx.namespaces, &revisions, now, draw)
}

/// The injection review on its own (no caches): decode the Pod, choose, inject, answer
/// with a JSON patch. Public for the allocation benchmark.
pub fn review_pod(
    req: AdmissionRequest<DynamicObject>,
    sidecarsets: &[Arc<SidecarSet>],
    namespaces: &dyn matching::NamespaceLabels,
    revisions: &dyn inject::Revisions,
    now: jiff::Timestamp,
    draw: &mut dyn FnMut() -> f64,
) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(&req);
    if req.operation != Operation::Create
        || req.sub_resource.as_deref().is_some_and(|s| !s.is_empty())
    {
        return Ok(response);
    }
    let Some(object) = req.object else {
        return Ok(response);
    };
    // Typed straight from the decoded review (no second round trip through JSON).
    let part = |key: &str| object.data.get(key).filter(|v| !v.is_null());
    let mut pod = Pod {
        metadata: object.metadata,
        spec: part("spec")
            .map(serde::Deserialize::deserialize)
            .transpose()
            .map_err(|e| HandlerError::Decode(format!("object.spec as PodSpec: {e}")))?,
        status: part("status")
            .map(serde::Deserialize::deserialize)
            .transpose()
            .map_err(|e| HandlerError::Decode(format!("object.status as PodStatus: {e}")))?,
    };
    if pod.metadata.namespace.as_deref().is_none_or(str::is_empty) {
        pod.metadata.namespace = req.namespace.clone();
    }
    if !matching::is_active(&pod) {
        return Ok(response);
    }
    let chosen = inject::choose(&pod, sidecarsets, namespaces, revisions, draw);
    if chosen.is_empty() {
        return Ok(response);
    }
    let injected = inject::inject(&pod, &chosen, now);
    if !injected.errors.is_empty() {
        let mut denied = response.deny(injected.errors.join("; "));
        denied.result.code = 422;
        denied.result.reason = "Invalid".into();
        return Ok(denied);
    }
    let patch = patch_between(&pod, &injected.pod).map_err(internal)?;
    let mut response = response.with_patch(patch).map_err(internal)?;
    if !injected.warnings.is_empty() {
        response.warnings = Some(injected.warnings);
    }
    Ok(response)
}

/// JSON patch from `before` to `after`, whole fields at a time: the lists injection
/// rewrites and the annotations (compared typed; only changed fields are serialized).
/// `add` replaces a member that exists.
pub fn patch_between(before: &Pod, after: &Pod) -> Result<json_patch::Patch, serde_json::Error> {
    fn op<T: serde::Serialize + PartialEq>(
        ops: &mut Vec<Value>,
        path: &str,
        old: Option<&T>,
        new: Option<&T>,
    ) -> Result<(), serde_json::Error> {
        if old != new
            && let Some(new) = new
        {
            ops.push(json!({"op": "add", "path": path, "value": serde_json::to_value(new)?}));
        }
        Ok(())
    }
    let (b, a) = (before.spec.as_ref(), after.spec.as_ref());
    let mut ops = Vec::new();
    // A Pod sent without a spec (found by fuzz/fuzz_targets/sidecarset_inject.rs): the
    // field paths below would not exist, so the spec is added whole.
    if b.is_none() && a.is_some() {
        op(&mut ops, "/spec", b, a)?;
        op(
            &mut ops,
            "/metadata/annotations",
            before.metadata.annotations.as_ref(),
            after.metadata.annotations.as_ref(),
        )?;
        return serde_json::from_value(Value::Array(ops));
    }
    op(
        &mut ops,
        "/metadata/annotations",
        before.metadata.annotations.as_ref(),
        after.metadata.annotations.as_ref(),
    )?;
    op(
        &mut ops,
        "/spec/initContainers",
        b.and_then(|s| s.init_containers.as_ref()),
        a.and_then(|s| s.init_containers.as_ref()),
    )?;
    op(
        &mut ops,
        "/spec/containers",
        b.map(|s| &s.containers),
        a.map(|s| &s.containers),
    )?;
    op(
        &mut ops,
        "/spec/volumes",
        b.and_then(|s| s.volumes.as_ref()),
        a.and_then(|s| s.volumes.as_ref()),
    )?;
    op(
        &mut ops,
        "/spec/imagePullSecrets",
        b.and_then(|s| s.image_pull_secrets.as_ref()),
        a.and_then(|s| s.image_pull_secrets.as_ref()),
    )?;
    serde_json::from_value(Value::Array(ops))
}

/// SidecarSet CREATE/UPDATE: defaults and the hash annotations.
pub fn mutate_sidecarset(
    req: AdmissionRequest<DynamicObject>,
) -> Result<AdmissionResponse, HandlerError> {
    kruise_runtime::webhook::mutate_json(&req, defaulted_with_hashes)
}

/// The object defaulted, with both hash annotations. On UPDATE (`old`: the stored
/// object), a hash whose input did not change keeps the stored value: a metadata or
/// strategy edit never moves Pods out of date, nor does an image-only edit change the
/// image-less hash, even when the stored values were written by another implementation
/// (kruise-manager, or an earlier version of ours).
pub fn defaulted_with_hashes(raw: &Value, old: Option<&Value>) -> Value {
    let mut defaulted = defaults::with_defaults_from(raw, old);
    // A spec that does not decode gets no hashes; validation then names the field.
    let Ok(ss) = serde_json::from_value::<SidecarSet>(defaulted.clone()) else {
        return defaulted;
    };
    let new = hash::hashes(&ss.spec);
    let old = old.and_then(|o| serde_json::from_value::<SidecarSet>(o.clone()).ok());
    let kept = |key: &str, computed: &str, old_computed: Option<&str>| -> String {
        let stored = old
            .as_ref()
            .and_then(|o| o.metadata.annotations.as_ref())
            .and_then(|a| a.get(key))
            .filter(|v| !v.is_empty());
        match stored {
            Some(stored) if old_computed == Some(computed) => stored.clone(),
            _ => computed.to_string(),
        }
    };
    let old_hashes = old
        .as_ref()
        .map(|o| hash::hashes(&defaults::defaulted_spec(&o.spec)));
    let hash = kept(
        keys::SIDECARSET_HASH,
        &new.hash,
        old_hashes.as_ref().map(|h| h.hash.as_str()),
    );
    let without_image = kept(
        keys::SIDECARSET_HASH_WITHOUT_IMAGE,
        &new.without_image,
        old_hashes.as_ref().map(|h| h.without_image.as_str()),
    );
    if let Some(meta) = defaulted.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(keys::SIDECARSET_HASH.into(), json!(hash));
            a.insert(
                keys::SIDECARSET_HASH_WITHOUT_IMAGE.into(),
                json!(without_image),
            );
        }
    }
    defaulted
}

/// SidecarSet CREATE/UPDATE: [`crate::validation::validate`].
async fn validate_sidecarset(
    ctx: &Context,
    req: AdmissionRequest<DynamicObject>,
) -> Result<AdmissionResponse, HandlerError> {
    let response = AdmissionResponse::from(&req);
    let deny = |errors: &[validation::FieldError]| {
        kruise_runtime::webhook::deny_invalid(AdmissionResponse::from(&req), errors)
    };
    let Some(object) = &req.object else {
        return Ok(response);
    };
    let raw = serde_json::to_value(object).map_err(internal)?;
    let raw_errors = validation::validate_raw(&raw);
    if !raw_errors.is_empty() {
        return Ok(deny(&raw_errors));
    }
    let ss: SidecarSet = match serde_json::from_value(raw) {
        Ok(ss) => ss,
        Err(e) => {
            return Ok(deny(&[kruise_runtime::webhook::field::invalid_detail(
                "spec",
                format!("cannot decode SidecarSet: {e}"),
            )]));
        }
    };
    let old: Option<SidecarSet> = match (&req.operation, &req.old_object) {
        (Operation::Update, Some(o)) => serde_json::to_value(o)
            .and_then(serde_json::from_value)
            .ok(),
        _ => None,
    };
    let whitelist = if ss.spec.patch_pod_metadata.is_empty() {
        Ok(None)
    } else {
        whitelist(ctx).await
    };
    let mut others = ctx.sidecarsets.store().state();
    // A canary's base created a moment ago may not be in the cache yet: ask the API.
    if let Some(base) = matching::canary_base(&ss)
        && !others
            .iter()
            .any(|o| o.metadata.name.as_deref() == Some(base))
        && let Ok(Some(found)) = Api::<SidecarSet>::all(ctx.client.clone())
            .get_opt(base)
            .await
    {
        others.push(Arc::new(found));
    }
    // In a block: the validation context is not Send, the widening below awaits.
    let errors = {
        let revisions = RevisionStore {
            cache: &ctx.revisions,
            namespace: &ctx.revision_namespace,
        };
        let vctx = validation::Context {
            others: &others,
            namespaces: &ctx.namespaces,
            revisions: &revisions,
            whitelist,
            patch_metadata_defaults_allowed: ctx.patch_metadata_defaults_allowed,
        };
        validation::validate(&ss, old.as_ref(), &vctx)
    };
    if errors.is_empty() {
        if !req.dry_run {
            widen_conditions_for(ctx, &ss).await;
        }
        Ok(response)
    } else {
        Ok(deny(&errors))
    }
}

/// The patchPodMetadata whitelist from `kruise-configuration` (read when needed:
/// SidecarSet writes are rare).
async fn whitelist(ctx: &Context) -> Result<Option<Whitelist>, String> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.revision_namespace);
    let cm = match api.get_opt(keys::SIDECARSET_CONFIGMAP).await {
        Ok(cm) => cm,
        Err(e) => return Err(e.to_string()),
    };
    let Some(raw) = cm.and_then(|cm| cm.data).and_then(|d| {
        d.get(keys::SIDECARSET_PATCH_POD_METADATA_WHITELIST)
            .cloned()
    }) else {
        return Ok(None);
    };
    serde_json::from_str(&raw)
        .map(Some)
        .map_err(|e| format!("{}: {e}", keys::SIDECARSET_PATCH_POD_METADATA_WHITELIST))
}

/// The configurations, named and labelled for the scope. `pod_condition` narrows the
/// Pod webhook (see [`crate::conditions`]); `None` sends every Pod in scope.
pub fn configurations(
    watch_namespace: Option<&str>,
    pod_condition: Option<MatchCondition>,
) -> (ValidatingWebhookConfiguration, MutatingWebhookConfiguration) {
    use kruise_runtime::webhook::config::{
        mutating_configuration, mutating_webhook, rule, validating_configuration,
        validating_webhook,
    };
    // SidecarSets are cluster-scoped (namespaceSelector does not apply): a scoped
    // instance only sees the ones confined to its namespace.
    let sidecarset_conditions = watch_namespace.map(|ns| {
        vec![MatchCondition {
            name: "in-scope".into(),
            expression: format!(
                "has(object.spec) && has(object.spec.namespace) && object.spec.namespace == '{}'",
                ns.replace('\\', "\\\\").replace('\'', "\\'")
            ),
        }]
    });
    let sidecarsets = || {
        vec![rule(
            "apps.kruise.io",
            &["v1alpha1"],
            &["sidecarsets"],
            &["CREATE", "UPDATE"],
            "Cluster",
        )]
    };
    let mut validate = validating_webhook("vsidecarset.kruise.io", VALIDATE_PATH, sidecarsets());
    // Admitting a SidecarSet may widen the Pod webhook's conditions; a dry run does not.
    validate.side_effects = "NoneOnDryRun".into();
    validate.match_conditions = sidecarset_conditions.clone();
    let mut inject = mutating_webhook(
        "msidecarset-pod.kruise.io",
        POD_PATH,
        vec![rule("", &["v1"], &["pods"], &["CREATE"], "Namespaced")],
    );
    inject.match_conditions = pod_condition.map(|c| vec![c]);
    inject.reinvocation_policy = Some("Never".into());
    // Short: the handler answers in well under a millisecond; a stuck call should fail
    // the create quickly rather than hold a workload controller.
    inject.timeout_seconds = Some(5);
    let mut mutate = mutating_webhook("msidecarset.kruise.io", MUTATE_PATH, sidecarsets());
    mutate.match_conditions = sidecarset_conditions;
    (
        validating_configuration("kruise-sidecarset", watch_namespace, vec![validate]),
        mutating_configuration("kruise-sidecarset", watch_namespace, vec![inject, mutate]),
    )
}

/// Keeps the registered Pod webhook's matchCondition in step with the SidecarSets, on
/// every replica (each serves admission). Runs until the cache's change stream ends.
pub async fn keep_conditions(server: WebhookServer, ctx: Arc<Context>) {
    while !ctx.is_synced() {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut changes = Box::pin(ctx.sidecarsets.subscribe());
    loop {
        if let Err(err) = sync_conditions(&server, &ctx).await {
            tracing::warn!(%err, "cannot update the pod webhook configuration; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        // Wait for a change, then let a burst of changes settle.
        if changes.next().await.is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        while let Some(Some(_)) = changes.next().now_or_never() {}
    }
}

/// Registers the configurations with the matchCondition of the managed SidecarSets
/// (plus those just admitted), when it differs from what this replica registered last.
async fn sync_conditions(
    server: &WebhookServer,
    ctx: &Context,
) -> Result<(), kruise_runtime::Error> {
    let mut applied = ctx.conditions.applied.lock().await;
    let mut sidecarsets = ctx.managed_sidecarsets();
    sidecarsets.extend(ctx.conditions.recently_admitted());
    let condition = conditions::match_condition(sidecarsets.iter().map(AsRef::as_ref));
    let expression = condition.as_ref().map(|c| c.expression.clone());
    if applied.as_ref() == Some(&expression) {
        return Ok(());
    }
    let parts: BTreeSet<String> = sidecarsets
        .iter()
        .filter_map(|s| conditions::sidecarset_expression(s))
        .collect();
    let (validating, mutating) = configurations(ctx.watch_namespace.as_deref(), condition);
    server.register(vec![validating], vec![mutating]).await?;
    match &expression {
        Some(_) => ctx.coverage.set_parts(parts),
        None => ctx.coverage.set_everything(),
    }
    tracing::info!(
        sidecarsets = sidecarsets.len(),
        condition_bytes = expression.as_ref().map_or(0, String::len),
        "pod webhook matchCondition updated"
    );
    *applied = Some(expression);
    Ok(())
}

/// Before a SidecarSet is admitted, widens the Pod webhook's condition to the Pods it
/// selects (see [`crate::context::PodConditions`]). Best effort: on failure the
/// background loop catches up once the cache shows the SidecarSet.
async fn widen_conditions_for(ctx: &Context, ss: &SidecarSet) {
    let Some(server) = ctx.conditions.server.get() else {
        return;
    };
    if !ctx.manages(ss) || ctx.coverage.covers(ss) {
        return;
    }
    ctx.conditions.admit(Arc::new(ss.clone()));
    match tokio::time::timeout(Duration::from_secs(5), sync_conditions(server, ctx)).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => tracing::warn!(%err, "cannot widen the pod webhook condition at admission"),
        Err(_) => tracing::warn!("widening the pod webhook condition at admission timed out"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_configurations_are_labelled_and_narrowed() {
        let (v, m) = configurations(Some("e2e-x"), conditions::match_condition([]));
        assert_eq!(
            v.metadata.name.as_deref(),
            Some("kruise-sidecarset-validating-e2e-x")
        );
        assert_eq!(
            m.metadata.labels.as_ref().unwrap()[keys::WEBHOOK_SCOPE],
            "e2e-x"
        );
        let pod_hook = &m.webhooks.as_ref().unwrap()[0];
        assert_eq!(pod_hook.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(v.webhooks.as_ref().unwrap()[0].side_effects, "NoneOnDryRun");
        assert_eq!(
            pod_hook.rules.as_ref().unwrap()[0]
                .operations
                .as_ref()
                .unwrap(),
            &["CREATE"]
        );
        assert_eq!(
            pod_hook.match_conditions.as_ref().unwrap()[0].expression,
            "false"
        );
        assert_eq!(
            pod_hook
                .namespace_selector
                .as_ref()
                .unwrap()
                .match_labels
                .as_ref()
                .unwrap()[kruise_runtime::webhook::NAMESPACE_NAME_LABEL],
            "e2e-x"
        );
        let ss_hook = &v.webhooks.as_ref().unwrap()[0];
        assert!(
            ss_hook.match_conditions.as_ref().unwrap()[0]
                .expression
                .contains("object.spec.namespace == 'e2e-x'")
        );
        let (v, m) = configurations(None, None);
        assert_eq!(
            v.metadata.name.as_deref(),
            Some("kruise-sidecarset-validating")
        );
        assert!(m.webhooks.as_ref().unwrap()[0].match_conditions.is_none());
        assert!(
            m.webhooks.as_ref().unwrap()[0].namespace_selector.is_none(),
            "the server adds the system exclusions"
        );
    }

    /// Found by fuzzing (sidecarset_inject): a Pod without a spec got `add
    /// /spec/containers`, which does not apply to it.
    #[test]
    fn patch_of_a_pod_without_spec_adds_the_spec_whole() {
        let before = Pod::default();
        let after = Pod {
            spec: Some(Default::default()),
            ..Default::default()
        };
        let patch = patch_between(&before, &after).unwrap();
        let mut doc = serde_json::to_value(&before).unwrap();
        json_patch::patch(&mut doc, &patch).unwrap();
        assert_eq!(doc, serde_json::to_value(&after).unwrap());
    }

    #[test]
    fn patch_rewrites_whole_fields_only() {
        let before: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "app", "image": "x"}]}})).unwrap();
        let mut after = before.clone();
        after.spec.as_mut().unwrap().containers.insert(
            0,
            k8s_openapi::api::core::v1::Container {
                name: "s".into(),
                ..Default::default()
            },
        );
        after.metadata.annotations = Some([("a".to_string(), "b".to_string())].into());
        let patch = serde_json::to_value(patch_between(&before, &after).unwrap()).unwrap();
        assert_eq!(
            patch,
            json!([
                {"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}},
                {"op": "add", "path": "/spec/containers", "value": [{"name": "s"}, {"name": "app", "image": "x"}]}
            ])
        );
        let mut doc = serde_json::to_value(&before).unwrap();
        let patch: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(&mut doc, &patch).unwrap();
        assert_eq!(doc, serde_json::to_value(&after).unwrap());
    }

    fn annotations(obj: &Value) -> (String, String) {
        let a = &obj["metadata"]["annotations"];
        (
            a[keys::SIDECARSET_HASH].as_str().unwrap().to_string(),
            a[keys::SIDECARSET_HASH_WITHOUT_IMAGE]
                .as_str()
                .unwrap()
                .to_string(),
        )
    }

    fn sidecarset(image: &str, stored: Option<(&str, &str)>) -> Value {
        let mut obj = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
            "metadata": {"name": "s", "labels": {"l": "1"}},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "containers": [{"name": "c", "image": image}]}});
        if let Some((h, w)) = stored {
            obj["metadata"]["annotations"] =
                json!({keys::SIDECARSET_HASH: h, keys::SIDECARSET_HASH_WITHOUT_IMAGE: w});
        }
        obj
    }

    #[test]
    fn an_update_keeps_the_stored_hashes_of_unchanged_containers() {
        // Stored by another implementation: values we would not compute.
        let old =
            defaults::with_defaults(&sidecarset("busybox:1.36", Some(("theirs", "theirs-w"))));
        let mut edited = old.clone();
        edited["metadata"]["labels"]["l"] = json!("2");
        edited["spec"]["updateStrategy"]["partition"] = json!(3);
        assert_eq!(
            annotations(&defaulted_with_hashes(&edited, Some(&old))),
            ("theirs".into(), "theirs-w".into())
        );
        // An image-only edit: the hash is new, the image-less one is kept.
        let mut bumped = old.clone();
        bumped["spec"]["containers"][0]["image"] = json!("busybox:1.37");
        let (hash, without_image) = annotations(&defaulted_with_hashes(&bumped, Some(&old)));
        assert_eq!(without_image, "theirs-w");
        assert_eq!(
            hash,
            hash::hashes(
                &serde_json::from_value::<SidecarSet>(defaults::with_defaults(&bumped))
                    .unwrap()
                    .spec
            )
            .hash
        );
        // Any other container change: both new.
        let mut changed = old.clone();
        changed["spec"]["containers"][0]["command"] = json!(["sleep", "1"]);
        let (hash, without_image) = annotations(&defaulted_with_hashes(&changed, Some(&old)));
        assert_ne!(hash, "theirs");
        assert_ne!(without_image, "theirs-w");
        // CREATE: computed.
        let created = defaulted_with_hashes(&sidecarset("busybox:1.36", Some(("x", "y"))), None);
        assert_eq!(annotations(&created).0.len(), 64);
    }

    #[test]
    fn sidecarset_defaulting_adds_hashes() {
        let obj = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "s"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "containers": [{"name": "c", "image": "busybox"}]}});
        let defaulted = defaults::with_defaults(&obj);
        let ss: SidecarSet = serde_json::from_value(defaulted).unwrap();
        assert_eq!(
            ss.spec.containers[0].container.image_pull_policy.as_deref(),
            Some("Always")
        );
        assert_eq!(hash::hashes(&ss.spec).hash.len(), 64);
    }
}
