//! Advanced DaemonSet admission (`openkruise/kruise v1.9.0 pkg/webhook/daemonset`): defaulting (mutating) and validation, served
//! on the shared webhook server. Deletion protection is `protection-ctl`'s: it owns
//! every DELETE of a protected object.
//!
//! Both webhooks use `failurePolicy: Fail`: they only see DaemonSet objects
//! (`apps.kruise.io`), so an outage blocks DaemonSet changes (which the controller could
//! not act on anyway) and never Pod creation.

mod defaults;
mod validation;

use kruise_runtime::webhook::config;
use kruise_runtime::webhook::config::Configurations;
use kruise_runtime::webhook::validating;
use kruise_runtime::webhook::{Route, defaulting};

pub use defaults::with_defaults;
pub use validation::{FORBIDDEN_UPDATE, validate, validate_json};

pub const MUTATE_PATH: &str = "/mutate-apps-kruise-io-v1alpha1-daemonset";
pub const VALIDATE_PATH: &str = "/validate-apps-kruise-io-v1alpha1-daemonset";
/// The CRD conversion webhook (v1alpha1 ⇄ v1beta1), registered by cluster-wide instances.
pub const CONVERT_PATH: &str = kruise_api::conversion::path::DAEMONSET;

/// The webhook routes: defaulting, validation and v1beta1 conversion.
pub fn routes() -> Vec<Route> {
    let mutate = Route::new(
        MUTATE_PATH,
        "mutate-daemonset",
        defaulting(|object, _old| with_defaults(object)),
    );
    let validate_route = Route::new(
        VALIDATE_PATH,
        "validate-daemonset",
        validating(validate_json),
    );
    vec![mutate, validate_route, conversion_route()]
}

/// v1beta1 clients are served through conversion (stored and reconciled: v1alpha1).
pub fn conversion_route() -> Route {
    Route::conversion(
        CONVERT_PATH,
        "convert-daemonset",
        "daemonsets.apps.kruise.io",
        std::sync::Arc::new(kruise_api::conversion::convert_daemonset),
    )
}

/// The configurations, named for the scope: cluster-wide, or (for tests and namespaced
/// installs) one namespace.
pub fn configurations(watch_namespace: Option<&str>) -> Configurations {
    config::KindAdmission {
        kind: "daemonset",
        plural: "daemonsets",
        versions: &["v1alpha1"],
        validate: (VALIDATE_PATH, &["CREATE", "UPDATE"]),
        mutate: (MUTATE_PATH, &["CREATE", "UPDATE"]),
    }
    .configurations(watch_namespace)
}

#[cfg(test)]
mod tests;
