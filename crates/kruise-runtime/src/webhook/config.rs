//! Building webhook configurations the same way for every controller: named
//! `<base>-validating` / `<base>-mutating`, and for a namespace-scoped instance (tests,
//! namespaced installs) suffixed with the namespace, labelled
//! `apps.kruise.io/webhook-scope=<ns>` (so whoever removes the namespace can find them)
//! and limited to that namespace. Unset fields get the house defaults: `failurePolicy:
//! Fail`, `sideEffects: None`, `admissionReviewVersions: [v1]`, a 10 s timeout
//! ([`DEFAULT_TIMEOUT_SECONDS`]). The clientConfig names the route path;
//! [`WebhookServer::register`](super::WebhookServer::register) fills in the URL or Service
//! and the caBundle, and replaces the house timeout by `KRUISE_WEBHOOK_TIMEOUT_SECONDS`
//! when that is set ([`registered_timeout`]).

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::register::NAMESPACE_NAME_LABEL;

/// The house default `timeoutSeconds` of a webhook whose code sets none (OpenKruise's
/// Helm chart defaults `webhookConfiguration.timeoutSeconds` to 30; ours is shorter, so
/// a stuck webhook holds writes up for less long). The Pod webhooks that sit in every
/// matching Pod creation set 5.
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 10;

/// The `timeoutSeconds` a webhook is registered with: `configured`
/// (`KRUISE_WEBHOOK_TIMEOUT_SECONDS`, already checked to be 1..=30) replaces the house
/// default, i.e. an unset timeout or [`DEFAULT_TIMEOUT_SECONDS`]; a timeout the code set
/// to anything else (the 5 s Pod webhooks) is kept, as is everything when nothing is
/// configured. (A webhook that sets 10 explicitly cannot be told from one that got the
/// house default: it follows the setting too.)
pub fn registered_timeout(timeout: Option<i32>, configured: Option<i32>) -> Option<i32> {
    match (timeout, configured) {
        (None | Some(DEFAULT_TIMEOUT_SECONDS), Some(configured)) => Some(configured),
        (timeout, _) => timeout,
    }
}

/// Label on the configurations of a namespace-scoped instance.
pub const WEBHOOK_SCOPE_LABEL: &str = "apps.kruise.io/webhook-scope";

/// A rule on `resources` of `group` (`""` = core) in `versions`, for `operations`;
/// `scope` is `Namespaced` or `Cluster`.
pub fn rule(
    group: &str,
    versions: &[&str],
    resources: &[&str],
    operations: &[&str],
    scope: &str,
) -> RuleWithOperations {
    let strings = |xs: &[&str]| Some(xs.iter().map(|s| s.to_string()).collect());
    RuleWithOperations {
        api_groups: Some(vec![group.to_string()]),
        api_versions: strings(versions),
        resources: strings(resources),
        operations: strings(operations),
        scope: Some(scope.to_string()),
    }
}

/// The clientConfig naming a route path of this binary's webhook server.
pub fn route(path: &str) -> WebhookClientConfig {
    WebhookClientConfig {
        url: Some(path.to_string()),
        ..Default::default()
    }
}

/// A validating webhook `name` calling `path` for `rules`, with the house defaults.
pub fn validating_webhook(
    name: &str,
    path: &str,
    rules: Vec<RuleWithOperations>,
) -> ValidatingWebhook {
    ValidatingWebhook {
        name: name.to_string(),
        client_config: route(path),
        rules: Some(rules),
        ..Default::default()
    }
}

/// A mutating webhook `name` calling `path` for `rules`, with the house defaults.
pub fn mutating_webhook(name: &str, path: &str, rules: Vec<RuleWithOperations>) -> MutatingWebhook {
    MutatingWebhook {
        name: name.to_string(),
        client_config: route(path),
        rules: Some(rules),
        ..Default::default()
    }
}

/// A webhook (validating or mutating: the two types share these fields) with the house
/// defaults filled in where unset.
macro_rules! with_house_defaults {
    ($webhook:expr, $watch_namespace:expr) => {{
        let mut w = $webhook;
        Defaults::of($watch_namespace, w.rules.as_deref()).fill(
            &mut w.failure_policy,
            &mut w.side_effects,
            &mut w.admission_review_versions,
            &mut w.timeout_seconds,
            &mut w.namespace_selector,
        );
        w
    }};
}

/// `<base>-validating[-<ns>]` holding `webhooks`, scoped to `watch_namespace` if set.
pub fn validating_configuration(
    base: &str,
    watch_namespace: Option<&str>,
    webhooks: Vec<ValidatingWebhook>,
) -> ValidatingWebhookConfiguration {
    let webhooks = webhooks
        .into_iter()
        .map(|w| with_house_defaults!(w, watch_namespace))
        .collect();
    ValidatingWebhookConfiguration {
        metadata: metadata(base, "validating", watch_namespace),
        webhooks: Some(webhooks),
    }
}

/// `<base>-mutating[-<ns>]` holding `webhooks`, scoped to `watch_namespace` if set.
pub fn mutating_configuration(
    base: &str,
    watch_namespace: Option<&str>,
    webhooks: Vec<MutatingWebhook>,
) -> MutatingWebhookConfiguration {
    let webhooks = webhooks
        .into_iter()
        .map(|w| with_house_defaults!(w, watch_namespace))
        .collect();
    MutatingWebhookConfiguration {
        metadata: metadata(base, "mutating", watch_namespace),
        webhooks: Some(webhooks),
    }
}

/// The admission of one namespaced `apps.kruise.io` workload kind, as every workload
/// controller registers it: `kruise-<kind>-validating` with webhook `v<kind>.kb.io` and
/// `kruise-<kind>-mutating` with `m<kind>.kb.io`, each on `plural` in `versions` for its
/// operations, scoped to `watch_namespace` if set.
pub struct KindAdmission<'a> {
    /// Lower-case kind, e.g. `daemonset`.
    pub kind: &'a str,
    pub plural: &'a str,
    pub versions: &'a [&'a str],
    /// Route path and operations of the validating webhook.
    pub validate: (&'a str, &'a [&'a str]),
    /// Route path and operations of the mutating webhook.
    pub mutate: (&'a str, &'a [&'a str]),
}

/// What a controller registers: its validating and its mutating configurations.
pub type Configurations = (
    Vec<ValidatingWebhookConfiguration>,
    Vec<MutatingWebhookConfiguration>,
);

impl KindAdmission<'_> {
    pub fn configurations(&self, watch_namespace: Option<&str>) -> Configurations {
        let rules = |operations: &[&str]| {
            vec![rule(
                "apps.kruise.io",
                self.versions,
                &[self.plural],
                operations,
                "Namespaced",
            )]
        };
        let base = format!("kruise-{}", self.kind);
        let (validate_path, validate_ops) = self.validate;
        let (mutate_path, mutate_ops) = self.mutate;
        let validating = validating_configuration(
            &base,
            watch_namespace,
            vec![validating_webhook(
                &format!("v{}.kb.io", self.kind),
                validate_path,
                rules(validate_ops),
            )],
        );
        let mutating = mutating_configuration(
            &base,
            watch_namespace,
            vec![mutating_webhook(
                &format!("m{}.kb.io", self.kind),
                mutate_path,
                rules(mutate_ops),
            )],
        );
        (vec![validating], vec![mutating])
    }
}

fn metadata(base: &str, kind: &str, watch_namespace: Option<&str>) -> ObjectMeta {
    let suffix = watch_namespace
        .map(|ns| format!("-{ns}"))
        .unwrap_or_default();
    ObjectMeta {
        name: Some(format!("{base}-{kind}{suffix}")),
        labels: watch_namespace
            .map(|ns| BTreeMap::from([(WEBHOOK_SCOPE_LABEL.to_string(), ns.to_string())])),
        ..Default::default()
    }
}

struct Defaults {
    namespace_selector: Option<LabelSelector>,
}

impl Defaults {
    fn of(watch_namespace: Option<&str>, rules: Option<&[RuleWithOperations]>) -> Self {
        // A namespaceSelector only means something for namespaced resources.
        let namespaced = rules
            .into_iter()
            .flatten()
            .any(|r| r.scope.as_deref() != Some("Cluster"));
        Defaults {
            namespace_selector: watch_namespace
                .filter(|_| namespaced)
                .map(|ns| LabelSelector {
                    match_labels: Some(BTreeMap::from([(
                        NAMESPACE_NAME_LABEL.to_string(),
                        ns.to_string(),
                    )])),
                    ..Default::default()
                }),
        }
    }

    fn fill(
        self,
        failure_policy: &mut Option<String>,
        side_effects: &mut String,
        review_versions: &mut Vec<String>,
        timeout: &mut Option<i32>,
        namespace_selector: &mut Option<LabelSelector>,
    ) {
        failure_policy.get_or_insert_with(|| "Fail".into());
        if side_effects.is_empty() {
            *side_effects = "None".into();
        }
        if review_versions.is_empty() {
            review_versions.push("v1".into());
        }
        timeout.get_or_insert(DEFAULT_TIMEOUT_SECONDS);
        if namespace_selector.is_none() {
            *namespace_selector = self.namespace_selector;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scoped_configuration_is_named_labelled_and_limited_to_its_namespace() {
        let v = validating_configuration(
            "kruise-cloneset",
            Some("t1"),
            vec![validating_webhook(
                "vcloneset.kb.io",
                "/validate",
                vec![rule(
                    "apps.kruise.io",
                    &["v1alpha1"],
                    &["clonesets"],
                    &["CREATE"],
                    "Namespaced",
                )],
            )],
        );
        assert_eq!(
            v.metadata.name.as_deref(),
            Some("kruise-cloneset-validating-t1")
        );
        assert_eq!(
            v.metadata
                .labels
                .unwrap()
                .get(WEBHOOK_SCOPE_LABEL)
                .map(String::as_str),
            Some("t1")
        );
        let w = &v.webhooks.unwrap()[0];
        assert_eq!(w.failure_policy.as_deref(), Some("Fail"));
        assert_eq!(w.side_effects, "None");
        assert_eq!(w.admission_review_versions, vec!["v1".to_string()]);
        assert_eq!(w.timeout_seconds, Some(10));
        let selector = w
            .namespace_selector
            .as_ref()
            .unwrap()
            .match_labels
            .as_ref()
            .unwrap();
        assert_eq!(
            selector.get(NAMESPACE_NAME_LABEL).map(String::as_str),
            Some("t1")
        );
    }

    #[test]
    fn a_configured_timeout_replaces_only_the_house_default() {
        // Unset or the house 10 s: the configured value.
        assert_eq!(registered_timeout(None, Some(25)), Some(25));
        assert_eq!(
            registered_timeout(Some(DEFAULT_TIMEOUT_SECONDS), Some(25)),
            Some(25)
        );
        assert_eq!(
            registered_timeout(Some(DEFAULT_TIMEOUT_SECONDS), Some(3)),
            Some(3)
        );
        // The Pod webhooks' explicit 5 s stays, whatever is configured.
        assert_eq!(registered_timeout(Some(5), Some(25)), Some(5));
        assert_eq!(registered_timeout(Some(5), Some(10)), Some(5));
        // Nothing configured: the webhook as the code built it.
        assert_eq!(registered_timeout(None, None), None);
        assert_eq!(
            registered_timeout(Some(DEFAULT_TIMEOUT_SECONDS), None),
            Some(DEFAULT_TIMEOUT_SECONDS)
        );
        assert_eq!(registered_timeout(Some(5), None), Some(5));
    }

    #[test]
    fn a_cluster_wide_configuration_keeps_what_the_webhook_set() {
        let mut hook = mutating_webhook(
            "msidecarset.kruise.io",
            "/mutate",
            vec![rule(
                "apps.kruise.io",
                &["v1alpha1"],
                &["sidecarsets"],
                &["CREATE"],
                "Cluster",
            )],
        );
        hook.timeout_seconds = Some(5);
        let m = mutating_configuration("kruise-sidecarset", None, vec![hook]);
        assert_eq!(
            m.metadata.name.as_deref(),
            Some("kruise-sidecarset-mutating")
        );
        assert!(m.metadata.labels.is_none());
        let w = &m.webhooks.unwrap()[0];
        assert_eq!(w.timeout_seconds, Some(5));
        assert!(w.namespace_selector.is_none());
        // Cluster-scoped rules never get a namespaceSelector, even when scoped.
        let scoped = mutating_configuration(
            "kruise-sidecarset",
            Some("t1"),
            vec![mutating_webhook(
                "m",
                "/mutate",
                vec![rule(
                    "apps.kruise.io",
                    &["v1alpha1"],
                    &["sidecarsets"],
                    &["CREATE"],
                    "Cluster",
                )],
            )],
        );
        assert!(scoped.webhooks.unwrap()[0].namespace_selector.is_none());
    }
}
