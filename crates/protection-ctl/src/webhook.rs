//! The one validating webhook of deletion protection: DELETE (no subresource) of a
//! labelled Namespace, CRD, workload, Service or Ingress. The judgment is
//! [`crate::judgment`]; here the request is read and, for a `Cascading` Namespace or
//! CRD, the live dependants are counted with an API list at admission time.
//!
//! Why a list and no cache: deletes of labelled objects are rare, and a cluster-wide Pod
//! cache (or one per CRD) would cost memory all the time for an answer needed a few times
//! a day. Lists ask for metadata only (`PartialObjectMetadataList`), so no object's
//! content (a Secret's data, a CR's spec) is ever read.
//!
//! `failurePolicy: Fail`, and the route denies when it cannot decide (a list failed):
//! a protection that lets the delete through when it cannot count protects nothing. The
//! scope is narrow (an objectSelector on the label, DELETE only), so an outage blocks only
//! deletes of objects someone asked to protect.

use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhook;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kruise_api::keys;
use kruise_runtime::api_error;
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::config::{
    WEBHOOK_SCOPE_LABEL, rule, validating_configuration, validating_webhook,
};
use kruise_runtime::webhook::{
    AdmissionRequest, AdmissionResponse, HandlerError, Operation, Route, deny_forbidden, dynamic,
    json_objects,
};
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, Client};
use serde_json::Value;

use crate::error::Error;
use crate::judgment::{self, Dependants, Guarded, Protection};

/// The route every protected kind is sent to.
pub const VALIDATE_PATH: &str = "/validate-delete-protection";
/// `kruise-deletionprotection-validating`.
pub const CONFIGURATION_BASE: &str = "kruise-deletionprotection";
/// The webhook for Namespaces.
pub const NAMESPACES_WEBHOOK: &str = "vdeletionprotection-namespace.kb.io";
/// The webhook for CRDs.
pub const CRDS_WEBHOOK: &str = "vdeletionprotection-crd.kb.io";
/// The label that puts a namespace's own Namespace object in its scope (set by the
/// apiserver on every Namespace).
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// The webhook for the namespaced kinds (workloads, Service, Ingress).
pub const NAMESPACED_WEBHOOK: &str = "vdeletionprotection-namespaced.kb.io";

/// Which of the deletion protection gates are on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gates {
    /// `ResourcesDeletionProtection`: off, every delete is allowed (the configurations
    /// kustomize ships may still send some).
    pub enabled: bool,
    /// `DeletionProtectionForCRDCascadingGate`: off, a CRD labelled `Cascading` is refused
    /// without counting its custom resources, as upstream.
    pub crd_cascading: bool,
}

/// The route.
pub fn routes(client: Client, gates: Gates) -> Vec<Route> {
    vec![Route::new(
        VALIDATE_PATH,
        "validate-delete-protection",
        dynamic(move |req| {
            let client = client.clone();
            async move {
                let response = AdmissionResponse::from(&req);
                if !gates.enabled {
                    return Ok(response);
                }
                Ok(match review(&client, &req, gates.crd_cascading).await? {
                    Some(message) => {
                        tracing::info!(
                            kind = %req.kind.kind,
                            namespace = req.namespace.as_deref().unwrap_or(""),
                            name = %req.name,
                            user = req.user_info.username.as_deref().unwrap_or(""),
                            %message,
                            "delete refused"
                        );
                        deny_forbidden(response, message)
                    }
                    None => response,
                })
            }
        }),
    )]
}

/// The message to refuse the request with, or `None`.
async fn review(
    client: &Client,
    req: &AdmissionRequest<DynamicObject>,
    crd_cascading: bool,
) -> Result<Option<String>, HandlerError> {
    // Only DELETE of the object itself (the rules name no subresource; checked anyway).
    if req.operation != Operation::Delete || req.sub_resource.is_some() {
        return Ok(None);
    }
    let Some(guarded) = Guarded::of(&req.kind.group, &req.kind.kind) else {
        return Ok(None);
    };
    // No oldObject (apiservers before 1.16): nothing to judge.
    let (_, Some(old)) = json_objects(req)? else {
        return Ok(None);
    };
    let (labels, terminating) = judgment::labels_and_terminating(&old);
    let Some(protection) = Protection::of(&labels, terminating) else {
        return Ok(None);
    };
    if !crd_cascading && let Some(message) = judgment::crd_cascading_gate_off(guarded, protection) {
        return Ok(Some(message));
    }
    let dependants = if guarded.counts(protection) {
        Some(count(client, guarded, &req.name, &old).await?)
    } else {
        None
    };
    Ok(judgment::denial(protection, dependants))
}

/// The live dependants of a `Cascading` object.
async fn count(
    client: &Client,
    guarded: Guarded,
    name: &str,
    old: &Value,
) -> Result<Dependants, Error> {
    Ok(match guarded {
        Guarded::Workload(workload) => Dependants::Replicas(judgment::replicas_of(workload, old)),
        Guarded::Namespace => match active_pods(client, name).await? {
            0 => Dependants::BoundPvcs(bound_pvcs(client, name).await?),
            pods => Dependants::ActivePods(pods),
        },
        Guarded::CustomResourceDefinition => Dependants::ActiveCrs(active_crs(client, old).await?),
        // Guarded::counts never asks for these.
        Guarded::AlwaysOnly => Dependants::Replicas(0),
    })
}

/// The namespace's Pods that are neither Succeeded nor Failed nor being deleted.
async fn active_pods(client: &Client, namespace: &str) -> Result<u64, Error> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().fields("status.phase!=Succeeded,status.phase!=Failed");
    count_live(&api, lp, format!("the Pods of namespace {namespace}")).await
}

/// The namespace's PersistentVolumeClaims that are `Bound` and not being deleted. PVCs
/// have no field selector on their phase, so whole objects are listed (a PVC holds no
/// secret data) and filtered here.
async fn bound_pvcs(client: &Client, namespace: &str) -> Result<u64, Error> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let mut lp = ListParams::default().limit(500);
    let mut bound = 0;
    loop {
        let page = api.list(&lp).await.map_err(|source| Error::List {
            what: format!("the PersistentVolumeClaims of namespace {namespace}"),
            source,
        })?;
        bound += page
            .items
            .iter()
            .filter(|pvc| judgment::pvc_is_bound(pvc))
            .count() as u64;
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => lp = lp.continue_token(&token),
            _ => return Ok(bound),
        }
    }
}

/// The CRD's custom resources, in any namespace, not being deleted.
async fn active_crs(client: &Client, crd: &Value) -> Result<u64, Error> {
    let target = judgment::crd_target(crd).map_err(|what| Error::Shape {
        kind: "CustomResourceDefinition",
        what,
    })?;
    let resource = ApiResource {
        api_version: format!("{}/{}", target.group, target.version),
        group: target.group,
        version: target.version,
        kind: target.kind,
        plural: target.plural,
    };
    let what = format!("{}.{}", resource.plural, resource.group);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    count_live(&api, ListParams::default(), what).await
}

/// HTTP 403: the apiserver's RBAC refused the list.
const FORBIDDEN: u16 = 403;

/// How many objects a metadata-only list returns without a deletionTimestamp, page by
/// page (500 each).
async fn count_live<K>(api: &Api<K>, lp: ListParams, what: String) -> Result<u64, Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Debug,
{
    let mut lp = lp.limit(500);
    let mut live = 0;
    loop {
        let page = api.list_metadata(&lp).await.map_err(|source| {
            if api_error::status_code(&source) == Some(FORBIDDEN) {
                Error::NotGranted { what: what.clone() }
            } else {
                Error::List {
                    what: what.clone(),
                    source,
                }
            }
        })?;
        live += page
            .items
            .iter()
            .filter(|o| o.metadata.deletion_timestamp.is_none())
            .count() as u64;
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => lp = lp.continue_token(&token),
            _ => return Ok(live),
        }
    }
}

/// `policy.kruise.io/delete-protection In [Always, Cascading]`: the apiserver sends
/// nothing else (for a DELETE it matches the stored object's labels).
pub fn object_selector() -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: keys::DELETION_PROTECTION.to_string(),
            operator: "In".to_string(),
            values: Some(vec![
                keys::DELETION_PROTECTION_ALWAYS.to_string(),
                keys::DELETION_PROTECTION_CASCADING.to_string(),
            ]),
        }]),
        ..Default::default()
    }
}

/// The configuration, named for the scope: cluster-wide, or (for tests and namespaced
/// installs) one namespace. Three webhooks on the one route, each with the objectSelector
/// on the label, DELETE only, no subresources:
/// - Namespaces; a namespace-scoped instance guards only its own Namespace (a
///   namespaceSelector on a Namespace matches that Namespace's own labels);
/// - CRDs in `v1` (`v1beta1` is no longer served since Kubernetes 1.22); a CRD has no
///   namespace, so a namespace-scoped instance guards only the CRDs also labelled
///   `apps.kruise.io/webhook-scope=<its namespace>`. Without these two limits every test
///   instance would judge every labelled Namespace and CRD of the cluster, and one that
///   has stopped (its configuration not yet removed) would fail their deletes;
/// - the namespaced kinds, limited to the instance's namespace: CloneSet and Advanced
///   DaemonSet in their stored `v1alpha1` (`matchPolicy: Equivalent` converts a `v1beta1`
///   request first), Advanced StatefulSet in both versions (same shape, no conversion).
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    let delete = &["DELETE"][..];
    let selected = |webhook: ValidatingWebhook| ValidatingWebhook {
        object_selector: Some(object_selector()),
        ..webhook
    };
    let namespaces = ValidatingWebhook {
        namespace_selector: watch_namespace.map(|ns| LabelSelector {
            match_labels: Some(BTreeMap::from([(
                NAMESPACE_NAME_LABEL.to_string(),
                ns.to_string(),
            )])),
            ..Default::default()
        }),
        ..selected(validating_webhook(
            NAMESPACES_WEBHOOK,
            VALIDATE_PATH,
            vec![rule("", &["v1"], &["namespaces"], delete, "Cluster")],
        ))
    };
    let mut crds = selected(validating_webhook(
        CRDS_WEBHOOK,
        VALIDATE_PATH,
        vec![rule(
            "apiextensions.k8s.io",
            &["v1"],
            &["customresourcedefinitions"],
            delete,
            "Cluster",
        )],
    ));
    if let (Some(ns), Some(selector)) = (watch_namespace, crds.object_selector.as_mut()) {
        selector.match_labels = Some(BTreeMap::from([(
            WEBHOOK_SCOPE_LABEL.to_string(),
            ns.to_string(),
        )]));
    }
    let namespaced = selected(validating_webhook(
        NAMESPACED_WEBHOOK,
        VALIDATE_PATH,
        vec![
            rule(
                "apps",
                &["v1"],
                &["deployments", "replicasets", "statefulsets"],
                delete,
                "Namespaced",
            ),
            rule(
                "apps.kruise.io",
                &["v1alpha1"],
                &["clonesets", "uniteddeployments", "daemonsets"],
                delete,
                "Namespaced",
            ),
            rule(
                "apps.kruise.io",
                &["v1alpha1", "v1beta1"],
                &["statefulsets"],
                delete,
                "Namespaced",
            ),
            rule("", &["v1"], &["services"], delete, "Namespaced"),
            rule(
                "networking.k8s.io",
                &["v1"],
                &["ingresses"],
                delete,
                "Namespaced",
            ),
        ],
    ));
    (
        vec![validating_configuration(
            CONFIGURATION_BASE,
            watch_namespace,
            vec![namespaces, crds, namespaced],
        )],
        Vec::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::admission::AdmissionReview;
    use serde_json::json;

    fn request(
        operation: &str,
        group: &str,
        kind: &str,
        sub: Option<&str>,
        old: Value,
    ) -> AdmissionRequest<DynamicObject> {
        let review: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
            "kind": "AdmissionReview",
            "apiVersion": "admission.k8s.io/v1",
            "request": {
                "uid": "u-1",
                "kind": {"group": group, "version": "v1", "kind": kind},
                "resource": {"group": group, "version": "v1", "resource": "x"},
                "subResource": sub,
                "name": "web",
                "namespace": "default",
                "operation": operation,
                "userInfo": {"username": "alice"},
                "object": null,
                "oldObject": old,
                "dryRun": false,
            }
        }))
        .unwrap();
        review.try_into().unwrap()
    }

    fn object(label: &str, replicas: i64) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default",
                         "labels": {keys::DELETION_PROTECTION: label}},
            "spec": {"replicas": replicas},
        })
    }

    /// A client that is never called: the workload and Always cases count nothing.
    fn offline_client() -> Client {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Client::try_from(config).unwrap()
    }

    async fn call(enabled: bool, req: AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        let gates = Gates {
            enabled,
            crd_cascading: true,
        };
        call_with(gates, req).await
    }

    async fn call_with(gates: Gates, req: AdmissionRequest<DynamicObject>) -> AdmissionResponse {
        let routes = routes(offline_client(), gates);
        (routes[0].handler)(req).await.unwrap()
    }

    #[tokio::test]
    async fn a_protected_delete_is_refused_with_403() {
        let r = call(
            true,
            request("DELETE", "apps", "Deployment", None, object("Cascading", 3)),
        )
        .await;
        assert!(!r.allowed);
        assert_eq!(r.result.code, 403);
        assert_eq!(
            r.result.message,
            "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and replicas 3>0"
        );
        let r = call(
            true,
            request("DELETE", "", "Service", None, object("Always", 0)),
        )
        .await;
        assert!(!r.allowed);
        assert_eq!(r.result.code, 403);
        // Always on a Namespace needs no count.
        let r = call(
            true,
            request("DELETE", "", "Namespace", None, object("Always", 0)),
        )
        .await;
        assert!(!r.allowed);
    }

    #[tokio::test]
    async fn everything_else_is_allowed() {
        for (enabled, req) in [
            // Gate off.
            (
                false,
                request("DELETE", "apps", "Deployment", None, object("Always", 3)),
            ),
            // Scaled to 0.
            (
                true,
                request("DELETE", "apps", "Deployment", None, object("Cascading", 0)),
            ),
            // Service: Cascading has no effect.
            (
                true,
                request("DELETE", "", "Service", None, object("Cascading", 3)),
            ),
            // A subresource.
            (
                true,
                request(
                    "DELETE",
                    "apps",
                    "Deployment",
                    Some("status"),
                    object("Always", 3),
                ),
            ),
            // A kind protection does not cover.
            (
                true,
                request("DELETE", "", "ConfigMap", None, object("Always", 3)),
            ),
            // No oldObject.
            (
                true,
                request("DELETE", "apps", "Deployment", None, Value::Null),
            ),
            // Not a DELETE.
            (
                true,
                request("UPDATE", "apps", "Deployment", None, object("Always", 3)),
            ),
        ] {
            let r = call(enabled, req).await;
            assert!(r.allowed, "{:?}", r.result);
        }
        // Already being deleted.
        let mut terminating = object("Always", 3);
        terminating["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let r = call(
            true,
            request("DELETE", "apps", "Deployment", None, terminating),
        )
        .await;
        assert!(r.allowed);
    }

    #[tokio::test]
    async fn a_count_that_fails_refuses() {
        // The offline client cannot list the namespace's Pods: fail closed.
        let gates = Gates {
            enabled: true,
            crd_cascading: true,
        };
        let r = routes(offline_client(), gates);
        let err = (r[0].handler)(request(
            "DELETE",
            "",
            "Namespace",
            None,
            object("Cascading", 0),
        ))
        .await
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("counting the Pods of namespace web"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_cascading_crd_needs_its_gate() {
        let crd = |label: &str| {
            request(
                "DELETE",
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                None,
                object(label, 0),
            )
        };
        let gate_off = Gates {
            enabled: true,
            crd_cascading: false,
        };
        // Refused without a list (the offline client would fail one), as upstream.
        let r = call_with(gate_off, crd("Cascading")).await;
        assert!(!r.allowed);
        assert_eq!(
            r.result.message,
            "feature-gate DeletionProtectionForCRDCascadingGate is not enabled"
        );
        // Always is judged as ever; other kinds' Cascading does not need the gate.
        let r = call_with(gate_off, crd("Always")).await;
        assert_eq!(r.result.message, keys::DELETION_PROTECTION_MSG_ALWAYS);
        let r = call_with(
            gate_off,
            request("DELETE", "apps", "Deployment", None, object("Cascading", 0)),
        )
        .await;
        assert!(r.allowed);
        // With the gate on, the CRD's custom resources are counted (and the offline
        // client's list fails: fail closed, another message).
        let on = Gates {
            enabled: true,
            crd_cascading: true,
        };
        let r = routes(offline_client(), on);
        let err = (r[0].handler)(crd("Cascading")).await.unwrap_err();
        assert!(!err.to_string().contains("feature-gate"), "{err}");
    }

    #[test]
    fn the_configuration_is_narrow() {
        let (v, m) = configurations(Some("e2e-x"));
        assert!(m.is_empty());
        assert_eq!(
            v[0].metadata.name.as_deref(),
            Some("kruise-deletionprotection-validating-e2e-x")
        );
        let hooks = v[0].webhooks.as_ref().unwrap();
        assert_eq!(hooks.len(), 3);
        for hook in hooks {
            let selector = hook.object_selector.as_ref().unwrap();
            assert_eq!(
                selector.match_expressions,
                object_selector().match_expressions
            );
            for rule in hook.rules.as_ref().unwrap() {
                assert_eq!(rule.operations, Some(vec!["DELETE".to_string()]));
                assert!(
                    rule.resources
                        .as_ref()
                        .unwrap()
                        .iter()
                        .all(|r| !r.contains('/'))
                );
            }
        }
        // A scoped instance guards its own Namespace, the CRDs labelled with its scope,
        // and the namespaced kinds of its namespace: nothing of other tests.
        let own = |k: &str, v: &str| Some(BTreeMap::from([(k.to_string(), v.to_string())]));
        assert_eq!(hooks[0].name, NAMESPACES_WEBHOOK);
        assert_eq!(
            hooks[0].namespace_selector.as_ref().unwrap().match_labels,
            own(NAMESPACE_NAME_LABEL, "e2e-x")
        );
        assert_eq!(hooks[1].name, CRDS_WEBHOOK);
        assert_eq!(
            hooks[1].object_selector.as_ref().unwrap().match_labels,
            own(WEBHOOK_SCOPE_LABEL, "e2e-x")
        );
        assert_eq!(hooks[2].name, NAMESPACED_WEBHOOK);
        assert!(hooks[2].namespace_selector.is_some());
        // Cluster-wide: every labelled Namespace and CRD.
        let (v, _) = configurations(None);
        let hooks = v[0].webhooks.as_ref().unwrap();
        assert_eq!(hooks[0].namespace_selector, None);
        assert_eq!(hooks[1].object_selector, Some(object_selector()));
        assert_eq!(hooks[2].failure_policy.as_deref(), Some("Fail"));
    }
}
