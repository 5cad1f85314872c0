//! `kruise-helm-hook <crd>...`: exits 1 with a message naming what holds the uninstall
//! back when any object of the named CRDs exists (see the library), 0 otherwise. A CRD
//! that is not installed has no objects. `HELM_RELEASE` and `HELM_NAMESPACE` name the
//! release in the message.

use anyhow::Context as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_helm_hook::{Found, NAMED_PER_KIND, refusal, to_check};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let crds = to_check(std::env::args().skip(1));
    let client = kube::Client::try_default()
        .await
        .context("kruise-helm-hook: no Kubernetes client (in-cluster config)")?;
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut found = Vec::new();
    for name in &crds {
        let Some(crd) = crd_api
            .get_opt(name)
            .await
            .with_context(|| format!("reading CRD {name}"))?
        else {
            continue;
        };
        // The storage version is always served.
        let Some(version) = crd
            .spec
            .versions
            .iter()
            .find(|v| v.storage)
            .or_else(|| crd.spec.versions.iter().find(|v| v.served))
        else {
            continue;
        };
        let gvk = GroupVersionKind::gvk(&crd.spec.group, &version.name, &crd.spec.names.kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let list = api
            .list_metadata(&ListParams::default().limit(NAMED_PER_KIND as u32))
            .await
            .with_context(|| format!("listing {name}"))?;
        let names: Vec<String> = list
            .items
            .iter()
            .map(|o| match (&o.metadata.namespace, &o.metadata.name) {
                (Some(ns), Some(n)) => format!("{ns}/{n}"),
                (None, Some(n)) => n.clone(),
                _ => String::from("?"),
            })
            .collect();
        let remaining = list
            .metadata
            .remaining_item_count
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0);
        // A continue token without a count (the apiserver may omit it): "and more".
        let more = usize::from(
            remaining == 0
                && list
                    .metadata
                    .continue_
                    .as_deref()
                    .is_some_and(|c| !c.is_empty()),
        );
        found.push(Found {
            crd: name.clone(),
            kind: crd.spec.names.kind.clone(),
            count: names.len() + remaining + more,
            names,
        });
    }
    let release = std::env::var("HELM_RELEASE").unwrap_or_else(|_| "<release>".into());
    let namespace = std::env::var("HELM_NAMESPACE").unwrap_or_else(|_| "<namespace>".into());
    match refusal(&found, &release, &namespace) {
        Some(msg) => {
            eprintln!("{msg}");
            std::process::exit(1);
        }
        None => {
            println!(
                "kruise-rs: no custom resources of kruise-rs left ({} kinds checked); uninstalling",
                crds.len()
            );
            Ok(())
        }
    }
}
