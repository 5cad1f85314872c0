//! The chart's webhook certificate modes (no cluster): the default (each controller makes
//! and shares its own, KRUISE_WEBHOOK_CA_SECRET), `certManager.enabled` (cert-manager
//! Certificates, the Secret mounted at KRUISE_WEBHOOK_CERT_DIR, the CA injector's
//! annotation on every webhook configuration and conversion CRD) and
//! `webhookCertificate.secretName` (a Secret of the user's, caBundle from values).

// A test file: its helpers fail the test on a missing checkout file, as the tests do.
#![allow(clippy::expect_used)]

use std::collections::BTreeSet;

use kruise_helm_tests::helm_template;
use serde_json::Value;

const WEBHOOK_CONFIGS: &[&str] = &[
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
];

fn of_kind<'a>(objs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objs.iter().filter(|o| o["kind"] == kind).collect()
}

fn env<'a>(container: &'a Value, name: &str) -> Option<&'a Value> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .map(|e| &e["value"])
}

/// (Deployment name, its controller container) of every controller.
fn controllers(objs: &[Value]) -> Vec<(String, Value)> {
    of_kind(objs, "Deployment")
        .into_iter()
        .filter(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] == "controller")
        .map(|d| {
            (
                d["metadata"]["name"].as_str().expect("name").to_string(),
                d["spec"]["template"]["spec"].clone(),
            )
        })
        .collect()
}

/// The webhook Service a configuration's webhooks (or a CRD's conversion) call.
fn services_called(obj: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for w in obj["webhooks"].as_array().into_iter().flatten() {
        out.insert(
            w["clientConfig"]["service"]["name"]
                .as_str()
                .expect("service")
                .to_string(),
        );
    }
    if let Some(s) =
        obj["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["name"].as_str()
    {
        out.insert(s.to_string());
    }
    out
}

fn converted_crds(objs: &[Value]) -> Vec<&Value> {
    of_kind(objs, "CustomResourceDefinition")
        .into_iter()
        .filter(|c| c["spec"]["conversion"]["strategy"] == "Webhook")
        .collect()
}

#[test]
fn by_default_every_controller_makes_its_own() {
    let objs = helm_template(&[]).expect("helm template");
    assert!(of_kind(&objs, "Certificate").is_empty());
    assert!(of_kind(&objs, "Issuer").is_empty());
    let ctls = controllers(&objs);
    assert!(ctls.len() >= 15, "{}", ctls.len());
    for (name, spec) in &ctls {
        let c = &spec["containers"][0];
        assert!(env(c, "KRUISE_WEBHOOK_CA_SECRET").is_some(), "{name}");
        assert!(env(c, "KRUISE_WEBHOOK_CERT_DIR").is_none(), "{name}");
        assert!(spec["volumes"].is_null(), "{name}: no volume");
    }
    for kind in WEBHOOK_CONFIGS {
        for cfg in of_kind(&objs, kind) {
            assert!(cfg["metadata"]["annotations"].is_null(), "{cfg}");
            for w in cfg["webhooks"].as_array().expect("webhooks") {
                assert!(w["clientConfig"]["caBundle"].is_null(), "{w}");
            }
        }
    }
}

#[test]
fn cert_manager_issues_one_certificate_per_webhook_service() {
    let objs = helm_template(&["certManager.enabled=true"]).expect("helm template");
    let issuers = of_kind(&objs, "Issuer");
    assert_eq!(issuers.len(), 2, "self-signed root and CA issuer");
    assert!(issuers.iter().any(|i| i["spec"]["selfSigned"].is_object()));
    assert!(
        issuers
            .iter()
            .any(|i| i["spec"]["ca"]["secretName"] == "kruise-rs-webhook-ca")
    );
    let certs = of_kind(&objs, "Certificate");
    let ca: Vec<_> = certs.iter().filter(|c| c["spec"]["isCA"] == true).collect();
    assert_eq!(ca.len(), 1);
    assert_eq!(ca[0]["spec"]["issuerRef"]["name"], "kruise-rs-selfsigned");

    let services: BTreeSet<String> = of_kind(&objs, "Service")
        .into_iter()
        .filter(|s| s["metadata"]["labels"]["app.kubernetes.io/component"] == "webhook")
        .map(|s| s["metadata"]["name"].as_str().expect("name").to_string())
        .collect();
    let serving: Vec<_> = certs
        .iter()
        .filter(|c| c["spec"]["isCA"].is_null())
        .collect();
    assert_eq!(serving.len(), services.len());
    for svc in &services {
        let cert = serving
            .iter()
            .find(|c| c["metadata"]["name"] == format!("{svc}-cert"))
            .unwrap_or_else(|| panic!("no Certificate for {svc}"));
        assert_eq!(cert["metadata"]["namespace"], "kruise-system");
        assert_eq!(cert["spec"]["secretName"], format!("{svc}-cert"));
        assert_eq!(
            cert["spec"]["dnsNames"],
            serde_json::json!([
                format!("{svc}.kruise-system.svc"),
                format!("{svc}.kruise-system.svc.cluster.local")
            ])
        );
        assert_eq!(cert["spec"]["issuerRef"]["name"], "kruise-rs-webhook-ca");
        assert_eq!(cert["spec"]["issuerRef"]["kind"], "Issuer");
    }

    // Each controller mounts its Service's Secret where KRUISE_WEBHOOK_CERT_DIR points,
    // and does not also try the shared CA Secret (the runtime refuses both at once).
    for (name, spec) in controllers(&objs) {
        let c = &spec["containers"][0];
        assert!(env(c, "KRUISE_WEBHOOK_CA_SECRET").is_none(), "{name}");
        let dir = env(c, "KRUISE_WEBHOOK_CERT_DIR").expect("cert dir");
        let service = env(c, "KRUISE_WEBHOOK_SERVICE")
            .and_then(Value::as_str)
            .and_then(|s| s.rsplit('/').next())
            .expect("KRUISE_WEBHOOK_SERVICE")
            .to_string();
        assert_eq!(
            c["volumeMounts"],
            serde_json::json!([{"name": "webhook-cert", "mountPath": dir, "readOnly": true}]),
            "{name}"
        );
        assert_eq!(
            spec["volumes"],
            serde_json::json!([{"name": "webhook-cert", "secret": {"secretName": format!("{service}-cert")}}]),
            "{name}"
        );
    }

    // The CA injector fills every caBundle: webhook configurations and conversion CRDs.
    let mut annotated = 0;
    for kind in WEBHOOK_CONFIGS {
        for cfg in of_kind(&objs, kind) {
            let called = services_called(cfg);
            assert_eq!(called.len(), 1, "{cfg}");
            let svc = called.iter().next().expect("one");
            assert_eq!(
                cfg["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                format!("kruise-system/{svc}-cert"),
                "{}",
                cfg["metadata"]["name"]
            );
            annotated += 1;
        }
    }
    assert!(annotated >= 20, "{annotated}");
    let crds = converted_crds(&objs);
    assert!(!crds.is_empty());
    for crd in crds {
        let svc = services_called(crd).into_iter().next().expect("service");
        assert_eq!(
            crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            format!("kruise-system/{svc}-cert"),
            "{}",
            crd["metadata"]["name"]
        );
        assert_eq!(
            crd["metadata"]["annotations"]["helm.sh/resource-policy"],
            "keep"
        );
    }
}

#[test]
fn cert_manager_with_an_issuer_of_yours() {
    let objs = helm_template(&[
        "certManager.enabled=true",
        "certManager.issuerRef.name=corp-ca",
        "certManager.issuerRef.kind=ClusterIssuer",
    ])
    .expect("helm template");
    assert!(of_kind(&objs, "Issuer").is_empty());
    let certs = of_kind(&objs, "Certificate");
    assert!(!certs.is_empty());
    for c in certs {
        assert_eq!(c["spec"]["issuerRef"]["name"], "corp-ca");
        assert_eq!(c["spec"]["issuerRef"]["kind"], "ClusterIssuer");
    }
}

#[test]
fn a_secret_of_yours_is_mounted_and_its_ca_bundle_registered() {
    let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----";
    let ca = format!("webhookCertificate.caBundle={pem}");
    let objs =
        helm_template(&["webhookCertificate.secretName=kruise-tls", &ca]).expect("helm template");
    assert!(of_kind(&objs, "Certificate").is_empty());
    for (name, spec) in controllers(&objs) {
        let c = &spec["containers"][0];
        assert!(env(c, "KRUISE_WEBHOOK_CA_SECRET").is_none(), "{name}");
        assert!(env(c, "KRUISE_WEBHOOK_CERT_DIR").is_some(), "{name}");
        assert_eq!(
            spec["volumes"][0]["secret"]["secretName"], "kruise-tls",
            "{name}"
        );
    }
    // base64 of the PEM, in every webhook and conversion clientConfig.
    let encoded =
        "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQ==";
    for kind in WEBHOOK_CONFIGS {
        for cfg in of_kind(&objs, kind) {
            assert!(cfg["metadata"]["annotations"].is_null());
            for w in cfg["webhooks"].as_array().expect("webhooks") {
                assert_eq!(w["clientConfig"]["caBundle"], encoded, "{}", w["name"]);
            }
        }
    }
    for crd in converted_crds(&objs) {
        assert_eq!(
            crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"], encoded,
            "{}",
            crd["metadata"]["name"]
        );
        assert!(crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].is_null());
    }
    // Already base64: taken as is.
    let objs = helm_template(&[
        "webhookCertificate.secretName=kruise-tls",
        &format!("webhookCertificate.caBundle={encoded}"),
    ])
    .expect("helm template");
    let cfg = of_kind(&objs, "ValidatingWebhookConfiguration")[0];
    assert_eq!(cfg["webhooks"][0]["clientConfig"]["caBundle"], encoded);
}

#[test]
fn both_sources_at_once_are_refused() {
    let err = helm_template(&[
        "certManager.enabled=true",
        "webhookCertificate.secretName=kruise-tls",
    ])
    .expect_err("refused");
    assert!(err.contains("choose one"), "{err}");
}
