//! Filling in and applying the webhook configurations a controller registers.
//!
//! The controller writes the policy (rules, selectors, matchConditions, failurePolicy)
//! and names each webhook's route path; this module writes where the apiserver calls
//! (URL or Service), the caBundle, the namespaces no webhook may block, the fields the
//! API requires but nobody should have to think about (`sideEffects: None`,
//! `admissionReviewVersions: [v1]`), and the operator's `KRUISE_WEBHOOK_TIMEOUT_SECONDS`
//! over the house default timeout ([`registered_timeout`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ServiceReference, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::config::registered_timeout;
use crate::Error;
use crate::settings::Settings;

/// The label every namespace carries with its own name (Kubernetes ≥ 1.21).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Where the apiserver reaches this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `https://host:port` (no trailing slash); the local cluster, or any out-of-cluster
    /// webhook.
    Url { base: String, host: String },
    /// An in-cluster Service.
    Service {
        namespace: String,
        name: String,
        port: i32,
    },
    /// Neither setting given: the server can serve, but cannot register.
    Unset,
}

impl Endpoint {
    /// From `KRUISE_WEBHOOK_URL` (a port of 0 means "the port we bound", for tests and
    /// the embedded cluster) or `KRUISE_WEBHOOK_SERVICE` (`namespace/name[:port]`).
    pub(crate) fn from_settings(settings: &Settings, bound: SocketAddr) -> Result<Self, Error> {
        if let Some(url) = settings.webhook_url.as_deref().filter(|u| !u.is_empty()) {
            let bad = |why: &str| {
                Error::Settings(format!(
                    "KRUISE_WEBHOOK_URL={url:?}: expected https://host:port ({why})"
                ))
            };
            let uri: http::Uri = url.parse().map_err(|e| bad(&format!("{e}")))?;
            if uri.scheme_str() != Some("https") {
                return Err(bad("the apiserver only calls webhooks over https"));
            }
            if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
                return Err(bad("give the base URL; route paths are added per webhook"));
            }
            let authority = uri.authority().ok_or_else(|| bad("no host"))?;
            let host = authority.host().to_string();
            let port = match authority.port_u16() {
                Some(0) => bound.port(),
                Some(port) => port,
                None => 443,
            };
            return Ok(Endpoint::Url {
                base: format!("https://{host}:{port}"),
                host: host.trim_start_matches('[').trim_end_matches(']').into(),
            });
        }
        if let Some(svc) = settings
            .webhook_service
            .as_deref()
            .filter(|s| !s.is_empty())
        {
            let bad = || {
                Error::Settings(format!(
                    "KRUISE_WEBHOOK_SERVICE={svc:?}: expected namespace/name or namespace/name:port"
                ))
            };
            let (namespace, rest) = svc.split_once('/').ok_or_else(bad)?;
            let (name, port) = match rest.split_once(':') {
                Some((name, port)) => (name, port.parse::<i32>().map_err(|_| bad())?),
                None => (rest, 443),
            };
            if namespace.is_empty() || name.is_empty() || !(1..=65535).contains(&port) {
                return Err(bad());
            }
            return Ok(Endpoint::Service {
                namespace: namespace.into(),
                name: name.into(),
                port,
            });
        }
        Ok(Endpoint::Unset)
    }

    /// The names the serving certificate must carry for this endpoint, beside loopback.
    pub(crate) fn sans(&self) -> Vec<String> {
        let mut sans = vec!["127.0.0.1".to_string(), "::1".into(), "localhost".into()];
        match self {
            Endpoint::Url { host, .. } => sans.push(host.clone()),
            Endpoint::Service {
                namespace, name, ..
            } => {
                sans.push(name.clone());
                sans.push(format!("{name}.{namespace}"));
                sans.push(format!("{name}.{namespace}.svc"));
                sans.push(format!("{name}.{namespace}.svc.cluster.local"));
            }
            Endpoint::Unset => {}
        }
        let mut seen = std::collections::BTreeSet::new();
        sans.retain(|s| seen.insert(s.clone()));
        sans
    }

    /// The clientConfig for the route at `path`.
    pub(crate) fn client_config(
        &self,
        path: &str,
        ca_bundle: Option<&str>,
    ) -> Result<WebhookClientConfig, Error> {
        let ca_bundle = ca_bundle.map(|pem| ByteString(pem.as_bytes().to_vec()));
        match self {
            Endpoint::Url { base, .. } => Ok(WebhookClientConfig {
                url: Some(format!("{base}{path}")),
                service: None,
                ca_bundle,
            }),
            Endpoint::Service {
                namespace,
                name,
                port,
            } => Ok(WebhookClientConfig {
                url: None,
                service: Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    path: Some(path.to_string()),
                    port: Some(*port),
                }),
                ca_bundle,
            }),
            Endpoint::Unset => Err(Error::Webhook(
                "cannot register webhooks: set KRUISE_WEBHOOK_URL (https://host:port) or \
                 KRUISE_WEBHOOK_SERVICE (namespace/name[:port])"
                    .into(),
            )),
        }
    }
}

/// The route path a webhook template names: `service.path`, or the path of `url` (a bare
/// `/validate-x` or a full URL).
pub(crate) fn path_of(config: &WebhookClientConfig) -> Option<String> {
    if let Some(path) = config.service.as_ref().and_then(|s| s.path.clone()) {
        return Some(path);
    }
    let url = config.url.as_deref()?;
    if url.starts_with('/') {
        return Some(url.to_string());
    }
    let uri: http::Uri = url.parse().ok()?;
    Some(uri.path().to_string()).filter(|p| p.len() > 1)
}

/// Adds `kubernetes.io/metadata.name NotIn [excluded]` to a namespace selector, so a
/// webhook outage never blocks kube-system or the controller's own namespace (where the
/// controller itself must be able to start). A selector that already says something about
/// that label is the controller's explicit choice and is left alone.
pub(crate) fn scope(selector: Option<LabelSelector>, excluded: &[String]) -> Option<LabelSelector> {
    if excluded.is_empty() {
        return selector;
    }
    let mut selector = selector.unwrap_or_default();
    let mentions = selector
        .match_labels
        .as_ref()
        .is_some_and(|l| l.contains_key(NAMESPACE_NAME_LABEL))
        || selector
            .match_expressions
            .as_ref()
            .is_some_and(|e| e.iter().any(|r| r.key == NAMESPACE_NAME_LABEL));
    if !mentions {
        selector
            .match_expressions
            .get_or_insert_with(Vec::new)
            .push(LabelSelectorRequirement {
                key: NAMESPACE_NAME_LABEL.into(),
                operator: "NotIn".into(),
                values: Some(excluded.to_vec()),
            });
    }
    Some(selector)
}

/// What a webhook template needs checked and filled, for both kinds of webhook.
pub(crate) struct Fill<'a> {
    pub(crate) endpoint: &'a Endpoint,
    pub(crate) ca_bundle: Option<&'a str>,
    pub(crate) paths: &'a [&'static str],
    pub(crate) excluded_namespaces: &'a [String],
    /// `KRUISE_WEBHOOK_TIMEOUT_SECONDS`.
    pub(crate) timeout_seconds: Option<i32>,
}

macro_rules! fill_webhooks {
    ($fill:expr, $config:expr, $kind:literal) => {{
        let config_name = $config.metadata.name.clone().unwrap_or_default();
        if config_name.is_empty() {
            return Err(Error::Webhook(format!("a {} has no name", $kind)));
        }
        for webhook in $config.webhooks.iter_mut().flatten() {
            let path = path_of(&webhook.client_config).ok_or_else(|| {
                Error::Webhook(format!(
                    "{} {config_name}, webhook {}: clientConfig names no route path \
                     (set service.path or url to e.g. \"/validate-x\")",
                    $kind, webhook.name
                ))
            })?;
            if !$fill.paths.contains(&path.as_str()) {
                return Err(Error::Webhook(format!(
                    "{} {config_name}, webhook {}: no route serves {path} (routes: {})",
                    $kind,
                    webhook.name,
                    $fill.paths.join(", ")
                )));
            }
            webhook.client_config = $fill.endpoint.client_config(&path, $fill.ca_bundle)?;
            webhook.namespace_selector =
                scope(webhook.namespace_selector.take(), $fill.excluded_namespaces);
            if webhook.side_effects.is_empty() {
                webhook.side_effects = "None".into();
            }
            if webhook.admission_review_versions.is_empty() {
                webhook.admission_review_versions = vec!["v1".into()];
            }
            webhook.timeout_seconds =
                registered_timeout(webhook.timeout_seconds, $fill.timeout_seconds);
        }
        Ok(config_name)
    }};
}

impl Fill<'_> {
    pub(crate) fn validating(
        &self,
        config: &mut ValidatingWebhookConfiguration,
    ) -> Result<String, Error> {
        fill_webhooks!(self, config, "ValidatingWebhookConfiguration")
    }

    pub(crate) fn mutating(
        &self,
        config: &mut MutatingWebhookConfiguration,
    ) -> Result<String, Error> {
        fill_webhooks!(self, config, "MutatingWebhookConfiguration")
    }
}

/// Registered templates, by name: a later `register` of the same name replaces it.
#[derive(Clone, Default)]
pub(crate) struct Registered {
    pub(crate) validating: BTreeMap<String, ValidatingWebhookConfiguration>,
    pub(crate) mutating: BTreeMap<String, MutatingWebhookConfiguration>,
    /// (CRD, route path) whose `spec.conversion` points here.
    pub(crate) conversions: Vec<(&'static str, &'static str)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhook;

    fn settings(url: Option<&str>, svc: Option<&str>) -> Settings {
        Settings {
            webhook_url: url.map(Into::into),
            webhook_service: svc.map(Into::into),
            ..Default::default()
        }
    }

    fn bound() -> SocketAddr {
        "127.0.0.1:40123".parse().unwrap()
    }

    #[test]
    fn url_port_zero_means_the_bound_port() {
        let e =
            Endpoint::from_settings(&settings(Some("https://127.0.0.1:0"), None), bound()).unwrap();
        let cc = e.client_config("/validate-x", Some("PEM")).unwrap();
        assert_eq!(
            cc.url.as_deref(),
            Some("https://127.0.0.1:40123/validate-x")
        );
        assert_eq!(cc.ca_bundle.unwrap().0, b"PEM");
        let e = Endpoint::from_settings(&settings(Some("https://127.0.0.1:9443/"), None), bound())
            .unwrap();
        assert_eq!(
            e.client_config("/m", None).unwrap().url.as_deref(),
            Some("https://127.0.0.1:9443/m")
        );
        assert!(e.sans().contains(&"127.0.0.1".to_string()));
    }

    #[test]
    fn bad_urls_and_services_name_the_variable() {
        for url in [
            "http://127.0.0.1:9443",
            "https://127.0.0.1:9443/x",
            "not a url",
        ] {
            let err = Endpoint::from_settings(&settings(Some(url), None), bound())
                .unwrap_err()
                .to_string();
            assert!(err.contains("KRUISE_WEBHOOK_URL"), "{err}");
        }
        for svc in ["nope", "ns/", "ns/name:http", "ns/name:0"] {
            let err = Endpoint::from_settings(&settings(None, Some(svc)), bound())
                .unwrap_err()
                .to_string();
            assert!(err.contains("KRUISE_WEBHOOK_SERVICE"), "{err}");
        }
    }

    #[test]
    fn service_endpoint_has_the_in_cluster_names() {
        let e = Endpoint::from_settings(
            &settings(None, Some("kruise-system/sidecarset-webhook")),
            bound(),
        )
        .unwrap();
        let sans = e.sans();
        for name in [
            "127.0.0.1",
            "localhost",
            "sidecarset-webhook.kruise-system.svc",
            "sidecarset-webhook.kruise-system.svc.cluster.local",
        ] {
            assert!(sans.contains(&name.to_string()), "{sans:?}");
        }
        let cc = e.client_config("/mutate-pod", None).unwrap();
        let svc = cc.service.unwrap();
        assert_eq!(
            (
                svc.namespace.as_str(),
                svc.name.as_str(),
                svc.port,
                svc.path.as_deref()
            ),
            (
                "kruise-system",
                "sidecarset-webhook",
                Some(443),
                Some("/mutate-pod")
            )
        );
        assert!(cc.url.is_none());
    }

    #[test]
    fn unset_endpoint_cannot_register() {
        let e = Endpoint::from_settings(&settings(None, None), bound()).unwrap();
        assert_eq!(e, Endpoint::Unset);
        assert!(e.client_config("/x", None).is_err());
    }

    #[test]
    fn path_comes_from_service_or_url() {
        let by_service = WebhookClientConfig {
            service: Some(ServiceReference {
                path: Some("/a".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(path_of(&by_service).as_deref(), Some("/a"));
        let bare = WebhookClientConfig {
            url: Some("/b".into()),
            ..Default::default()
        };
        assert_eq!(path_of(&bare).as_deref(), Some("/b"));
        let full = WebhookClientConfig {
            url: Some("https://127.0.0.1:1/c".into()),
            ..Default::default()
        };
        assert_eq!(path_of(&full).as_deref(), Some("/c"));
        assert_eq!(path_of(&WebhookClientConfig::default()), None);
    }

    #[test]
    fn scope_excludes_system_namespaces_unless_the_selector_decides() {
        let excluded = vec!["kube-system".to_string(), "kruise-system".to_string()];
        let scoped = scope(None, &excluded).unwrap();
        let expr = &scoped.match_expressions.unwrap()[0];
        assert_eq!(expr.key, NAMESPACE_NAME_LABEL);
        assert_eq!(expr.operator, "NotIn");
        assert_eq!(expr.values.as_ref().unwrap(), &excluded);

        let explicit = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: NAMESPACE_NAME_LABEL.into(),
                operator: "In".into(),
                values: Some(vec!["kube-system".into()]),
            }]),
            ..Default::default()
        };
        assert_eq!(scope(Some(explicit.clone()), &excluded), Some(explicit));
    }

    #[test]
    fn fill_checks_paths_and_sets_required_fields() {
        let endpoint =
            Endpoint::from_settings(&settings(Some("https://127.0.0.1:0"), None), bound()).unwrap();
        let fill = Fill {
            endpoint: &endpoint,
            ca_bundle: Some("CA"),
            paths: &["/validate-x"],
            excluded_namespaces: &["kube-system".to_string()],
            timeout_seconds: Some(20),
        };
        let template = |path: &str| ValidatingWebhookConfiguration {
            metadata: kube::api::ObjectMeta {
                name: Some("cfg".into()),
                ..Default::default()
            },
            webhooks: Some(vec![ValidatingWebhook {
                name: "x.kruise.io".into(),
                client_config: WebhookClientConfig {
                    url: Some(path.into()),
                    ..Default::default()
                },
                ..Default::default()
            }]),
        };
        let mut good = template("/validate-x");
        assert_eq!(fill.validating(&mut good).unwrap(), "cfg");
        let hook = &good.webhooks.unwrap()[0];
        assert_eq!(hook.side_effects, "None");
        assert_eq!(hook.admission_review_versions, vec!["v1"]);
        assert_eq!(
            hook.client_config.url.as_deref(),
            Some("https://127.0.0.1:40123/validate-x")
        );
        assert!(hook.namespace_selector.is_some());
        // No timeout in the template: the configured one.
        assert_eq!(hook.timeout_seconds, Some(20));
        let err = fill
            .validating(&mut template("/validate-typo"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/validate-typo") && err.contains("/validate-x"),
            "{err}"
        );
    }

    #[test]
    fn fill_gives_the_configured_timeout_to_house_default_webhooks_only() {
        use super::super::config::{mutating_configuration, mutating_webhook, rule};
        let endpoint =
            Endpoint::from_settings(&settings(None, Some("kruise-system/x-webhook")), bound())
                .unwrap();
        // As sidecarset-ctl builds its configuration: a Pod webhook at an explicit 5 s
        // next to one with the house default.
        let rules = || vec![rule("", &["v1"], &["pods"], &["CREATE"], "Namespaced")];
        let mut pod = mutating_webhook("mpod.kb.io", "/mutate-pod", rules());
        pod.timeout_seconds = Some(5);
        let other = mutating_webhook("mother.kb.io", "/mutate-other", rules());
        let built = mutating_configuration("kruise-x", None, vec![pod, other]);
        let timeouts = |configured: Option<i32>| {
            let fill = Fill {
                endpoint: &endpoint,
                ca_bundle: None,
                paths: &["/mutate-pod", "/mutate-other"],
                excluded_namespaces: &[],
                timeout_seconds: configured,
            };
            let mut config = built.clone();
            fill.mutating(&mut config).unwrap();
            config
                .webhooks
                .unwrap()
                .iter()
                .map(|w| w.timeout_seconds)
                .collect::<Vec<_>>()
        };
        assert_eq!(timeouts(None), [Some(5), Some(10)]);
        assert_eq!(timeouts(Some(25)), [Some(5), Some(25)]);
        assert_eq!(timeouts(Some(3)), [Some(5), Some(3)]);
    }
}
