//! Workloads read generically (openkruise/kruise v1.9.0 pkg/control/pubcontrol/pub_control.go; openkruise/kruise v1.9.0 pkg/controller/podunavailablebudget/podunavailablebudget_controller.go): any kind, by discovery; the kinds we know
//! (Deployment, StatefulSet, ReplicaSet, CloneSet, Advanced StatefulSet) by a GET (their
//! `spec.replicas`, and whether they are being deleted), any other only through its `scale`
//! subresource (replicas and selector).

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kruise_runtime::Cache;
use kube::Client;
use kube::api::Api;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};

use crate::error::{Result, is_not_found};
use crate::matching::{WorkloadRef, group_of};

/// Kinds whose `spec.replicas` is the scale subresource's (read directly, one call less).
const KNOWN: &[(&str, &str)] = &[
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "ReplicaSet"),
    ("apps.kruise.io", "CloneSet"),
    ("apps.kruise.io", "StatefulSet"),
];

/// What the controller needs from a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub uid: String,
    /// Expected replicas; 0 while the workload is being deleted.
    pub replicas: i32,
    /// The scale subresource's `status.selector` (unknown kinds only).
    pub scale_selector: Option<String>,
    pub is_deployment: bool,
}

/// Discovery results, kept for the process: a kind's plural does not change.
#[derive(Default)]
pub struct Resolver {
    resources: Mutex<HashMap<(String, String), ApiResource>>,
}

impl Resolver {
    async fn resource(
        &self,
        client: &Client,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<ApiResource>> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(ar) = self
            .resources
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned())
        {
            return Ok(Some(ar));
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        match kube::discovery::pinned_kind(client, &gvk).await {
            Ok((ar, _)) => {
                if let Ok(mut m) = self.resources.lock() {
                    m.insert(key, ar.clone());
                }
                Ok(Some(ar))
            }
            // An unknown group, version or kind: no such workload.
            Err(kube::Error::Discovery(_)) => Ok(None),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The workload `api_version`/`kind`/`name` in `namespace`; `None` when it (or its
    /// kind) does not exist.
    pub async fn get(
        &self,
        client: &Client,
        namespace: &str,
        api_version: &str,
        kind: &str,
        name: &str,
    ) -> Result<Option<Workload>> {
        let Some(ar) = self.resource(client, api_version, kind).await? else {
            return Ok(None);
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
        let group = group_of(api_version).unwrap_or_default();
        if KNOWN.contains(&(group, kind)) {
            let Some(obj) = api.get_opt(name).await? else {
                return Ok(None);
            };
            let replicas = obj.data["spec"]["replicas"].as_i64().unwrap_or(1);
            let deleting = obj.metadata.deletion_timestamp.is_some();
            return Ok(Some(Workload {
                uid: obj.metadata.uid.unwrap_or_default(),
                replicas: if deleting {
                    0
                } else {
                    i32::try_from(replicas).unwrap_or(i32::MAX)
                },
                scale_selector: None,
                is_deployment: group == "apps" && kind == "Deployment",
            }));
        }
        // Any other kind only through its scale subresource (its metadata carries the
        // object's UID): all the controller reads, and all its RBAC allows
        // (`get` on `*/scale`), so a PUB cannot be used to read other objects.
        let scale = match api.get_scale(name).await {
            Ok(scale) => scale,
            Err(e) if is_not_found(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        Ok(Some(Workload {
            uid: scale.metadata.uid.unwrap_or_default(),
            replicas: scale.spec.and_then(|s| s.replicas).unwrap_or(0),
            scale_selector: scale
                .status
                .and_then(|s| s.selector)
                .filter(|s| !s.is_empty()),
            is_deployment: false,
        }))
    }
}

/// The controller owner of a Pod as a workload, a ReplicaSet resolved to its Deployment
/// (from the cache; the API when the cache has not seen the ReplicaSet yet).
pub async fn pod_owner(
    client: &Client,
    replicasets: &Cache<ReplicaSet>,
    pod: &Pod,
) -> Option<WorkloadRef> {
    let owner = controller_of(pod.metadata.owner_references.as_deref())?;
    if owner.kind == "ReplicaSet" && group_of(&owner.api_version) == Some("apps") {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let cached = replicasets
            .store()
            .get(&kube::runtime::reflector::ObjectRef::new(&owner.name).within(namespace));
        let rs_owner = match cached {
            Some(rs) => controller_of(rs.metadata.owner_references.as_deref()).cloned(),
            None => Api::<ReplicaSet>::namespaced(client.clone(), namespace)
                .get_opt(&owner.name)
                .await
                .ok()
                .flatten()
                .and_then(|rs| controller_of(rs.metadata.owner_references.as_deref()).cloned()),
        };
        if let Some(d) = rs_owner.filter(|o| o.kind == "Deployment") {
            return WorkloadRef::new(&d.api_version, &d.kind, &d.name);
        }
    }
    WorkloadRef::new(&owner.api_version, &owner.kind, &owner.name)
}

pub use kruise_runtime::meta::controller_of;
