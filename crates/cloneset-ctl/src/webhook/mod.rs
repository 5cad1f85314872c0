//! CloneSet admission (openkruise/kruise v1.9.0 pkg/webhook/cloneset/mutating and
//! pkg/webhook/cloneset/validating): defaulting (mutating) and validation, served by `cloneset-ctl`
//! on the shared webhook server.
//!
//! Both webhooks use `failurePolicy: Fail`: they only see CloneSet objects, so an outage
//! blocks CloneSet changes (which the controller could not act on anyway) and never Pod
//! creation; without validation a spec the controller cannot understand would slip in.
//!
//! Defaulting works on the JSON of the object, not on the typed struct, so fields our
//! types do not know survive (the Pod template is kept exactly as sent).

mod defaults;
mod validation;

use kruise_api::apps_v1alpha1::CloneSet;
use kruise_api::pod::Pod;
use kruise_runtime::Cache;
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::{
    AdmissionRequest, AdmissionResponse, Route, config, defaulting, deny_invalid, dynamic,
    json_objects,
};

pub use defaults::{defaults_patch, with_defaults, with_defaults_for};
use validation::pods_to_delete;
pub use validation::{PodLookup, validate};

pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-v1alpha1-cloneset";
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-cloneset";
/// The CRD conversion webhook (v1alpha1 ⇄ v1beta1), registered by cluster-wide instances.
pub const CONVERT_PATH: &str = kruise_api::conversion::path::CLONESET;

/// The webhook routes served by `cloneset-ctl`. Deletion protection (docs/deletion-protection.md, and
/// openkruise/kruise v1.9.0 pkg/webhook/util/deletionprotection/deletion_protection.go) is not
/// here: `protection-ctl` owns every DELETE of a protected object, CloneSets included. `client`
/// reads Pods while `pods` is still listing (`None`: the cache alone).
pub fn routes(
    pods: Cache<Pod>,
    client: Option<kube::Client>,
    template_defaults: bool,
) -> Vec<Route> {
    let mutate = Route::new(
        MUTATE_PATH,
        "mutate-cloneset",
        defaulting(move |object, old| with_defaults_for(object, old, template_defaults)),
    );
    let validate_route = Route::new(
        VALIDATE_PATH,
        "validate-cloneset",
        dynamic(move |req| {
            let (pods, client) = (pods.clone(), client.clone());
            async move {
                let (raw_new, raw_old) = json_objects(&req)?;
                let typed_req: AdmissionRequest<CloneSet> = kruise_runtime::webhook::decode(req)?;
                let response = AdmissionResponse::from(&typed_req);
                let (Some(cs), Some(raw_new)) = (&typed_req.object, &raw_new) else {
                    return Ok(response);
                };
                let pods =
                    pods_to_delete(&pods, client.as_ref(), cs, typed_req.old_object.as_ref())
                        .await?;
                let errors = validate(
                    cs,
                    typed_req.old_object.as_ref(),
                    raw_new,
                    raw_old.as_ref(),
                    &pods,
                );
                if errors.is_empty() {
                    return Ok(response);
                }
                Ok(deny_invalid(response, &errors))
            }
        }),
    );
    vec![mutate, validate_route, conversion_route()]
}

/// v1beta1 clients are served through conversion (stored and reconciled: v1alpha1).
pub fn conversion_route() -> Route {
    Route::conversion(
        CONVERT_PATH,
        "convert-cloneset",
        "clonesets.apps.kruise.io",
        std::sync::Arc::new(kruise_api::conversion::convert_cloneset),
    )
}

/// The configurations, named for the scope: cluster-wide, or (for tests and namespaced
/// installs) one namespace.
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    config::KindAdmission {
        kind: "cloneset",
        plural: "clonesets",
        versions: &["v1alpha1"],
        validate: (VALIDATE_PATH, &["CREATE", "UPDATE"]),
        mutate: (MUTATE_PATH, &["CREATE", "UPDATE"]),
    }
    .configurations(watch_namespace)
}

#[cfg(test)]
mod tests;
