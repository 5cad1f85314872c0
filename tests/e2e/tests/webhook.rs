//! The shared webhook server (kruise-runtime) against the real apiserver: TLS with a
//! generated CA, configurations registered by server-side apply with the caBundle filled
//! in, validating denials and mutating JSON patches seen through the API, matchConditions
//! keeping calls away, CA rotation without a failed admission, and a cache still listing
//! read through to the API server.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_e2e::{TestNamespace, kube_config, kubectl, wait_for};
use kruise_runtime::webhook::{
    AdmissionRequest, AdmissionResponse, HandlerError, OnFailure, Options, Rotation, Route,
    json_patch, typed,
};
use kruise_runtime::{Runtime, Settings, WebhookServer};
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MINUTE: Duration = Duration::from_secs(60);
const DENIAL: &str = "configmaps labelled deny=true are refused";
const MUTATED: &str = "e2e.kruise.io/mutated";

/// Deletes the cluster-scoped configurations a test made, even when it fails.
struct Cleanup(Vec<(&'static str, String)>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for (kind, name) in &self.0 {
            let _ = kubectl(&["delete", kind, name, "--ignore-not-found"], None);
        }
    }
}

async fn runtime(name: &'static str) -> Runtime {
    let settings = Settings {
        admin_addr: ([127, 0, 0, 1], 0).into(),
        webhook_addr: ([127, 0, 0, 1], 0).into(),
        // Port 0: the server substitutes the port it bound.
        webhook_url: Some("https://127.0.0.1:0".into()),
        leader_elect: false,
        ..Default::default()
    };
    Runtime::new(name, settings, kube_config().await)
        .await
        .expect("runtime")
}

fn deny_route() -> Route {
    Route::new(
        "/validate-configmap",
        "deny-configmaps",
        typed(|req: AdmissionRequest<ConfigMap>| async move {
            let labels = req
                .object
                .as_ref()
                .and_then(|cm| cm.metadata.labels.clone())
                .unwrap_or_default();
            if labels.get("deny").map(String::as_str) == Some("true") {
                Ok(AdmissionResponse::from(&req).deny(DENIAL))
            } else {
                Ok(AdmissionResponse::from(&req))
            }
        }),
    )
}

fn label_route() -> Route {
    Route::new(
        "/mutate-configmap",
        "label-configmaps",
        typed(|req: AdmissionRequest<ConfigMap>| async move {
            let has_labels = req
                .object
                .as_ref()
                .is_some_and(|cm| cm.metadata.labels.is_some());
            let patch = if has_labels {
                json!([{"op": "add", "path": "/metadata/labels/e2e.kruise.io~1mutated", "value": "true"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {MUTATED: "true"}}])
            };
            let patch: json_patch::Patch =
                serde_json::from_value(patch).map_err(|e| HandlerError::Internal(e.to_string()))?;
            AdmissionResponse::from(&req)
                .with_patch(patch)
                .map_err(|e| HandlerError::Internal(e.to_string()))
        }),
    )
    .on_failure(OnFailure::Allow)
}

fn only_namespace(ns: &str) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: Some(BTreeMap::from([(
            "kubernetes.io/metadata.name".to_string(),
            ns.to_string(),
        )])),
        ..Default::default()
    })
}

fn configmap_create_rule() -> Option<Vec<RuleWithOperations>> {
    Some(vec![RuleWithOperations {
        api_groups: Some(vec!["".into()]),
        api_versions: Some(vec!["v1".into()]),
        operations: Some(vec!["CREATE".into()]),
        resources: Some(vec!["configmaps".into()]),
        scope: Some("Namespaced".into()),
    }])
}

fn validating(name: &str, ns: &str) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        webhooks: Some(vec![ValidatingWebhook {
            name: "deny.e2e.kruise.io".into(),
            // The route path; register fills in URL and caBundle.
            client_config: WebhookClientConfig {
                url: Some("/validate-configmap".into()),
                ..Default::default()
            },
            rules: configmap_create_rule(),
            failure_policy: Some("Fail".into()),
            namespace_selector: only_namespace(ns),
            // The apiserver calls only for objects that can be denied.
            match_conditions: Some(vec![MatchCondition {
                name: "labelled-deny".into(),
                expression: "has(object.metadata.labels) && 'deny' in object.metadata.labels"
                    .into(),
            }]),
            timeout_seconds: Some(5),
            ..Default::default()
        }]),
    }
}

fn mutating(name: &str, ns: &str) -> MutatingWebhookConfiguration {
    MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        webhooks: Some(vec![MutatingWebhook {
            name: "label.e2e.kruise.io".into(),
            client_config: WebhookClientConfig {
                url: Some("/mutate-configmap".into()),
                ..Default::default()
            },
            rules: configmap_create_rule(),
            // Fail, so a broken call shows up here instead of as a missing label.
            failure_policy: Some("Fail".into()),
            namespace_selector: only_namespace(ns),
            timeout_seconds: Some(5),
            ..Default::default()
        }]),
    }
}

fn configmap(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: (!labels.is_empty()).then(|| {
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("k".to_string(), "v".to_string())])),
        ..Default::default()
    }
}

fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        ..Default::default()
    }
}

/// A GET on the runtime's admin server: (status code, body).
async fn admin_get(runtime: &Runtime, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(runtime.admin_addr)
        .await
        .expect("admin server");
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    let code = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, out)
}

/// Waits until the apiserver denies a `deny=true` ConfigMap with our message (the
/// configuration reaches the apiserver through a watch, a moment after the apply).
async fn wait_for_denial(cms: &Api<ConfigMap>) {
    wait_for("the validating webhook to deny", MINUTE, || async {
        match cms
            .create(&dry_run(), &configmap("probe-deny", &[("deny", "true")]))
            .await
        {
            Err(kube::Error::Api(e)) if e.message.contains(DENIAL) => Ok(()),
            Err(e) => Err(e.to_string()),
            Ok(_) => Err("admitted".into()),
        }
    })
    .await
}

// Multi-threaded: the webhook server runs in this test's runtime while the test waits on
// the apiserver (which waits on the webhook).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_validate_and_mutate_through_the_apiserver() {
    let ns = TestNamespace::new("webhook").await;
    let name = format!("e2e-webhook-{}", ns.name);
    let runtime = runtime(name.clone().leak()).await;
    let server = WebhookServer::start(&runtime, vec![deny_route(), label_route()])
        .await
        .expect("webhook server");

    // /readyz is green once TLS serves (the "webhook tls" check was registered by start).
    let (code, body) = admin_get(&runtime, "/readyz").await;
    assert_eq!(code, 200, "{body}");
    let url = server.url().expect("url from KRUISE_WEBHOOK_URL");
    assert_eq!(
        url,
        format!("https://127.0.0.1:{}", server.local_addr().port())
    );

    let _cleanup = Cleanup(vec![
        ("validatingwebhookconfiguration", name.clone()),
        ("mutatingwebhookconfiguration", name.clone()),
    ]);
    server
        .register(
            vec![validating(&name, &ns.name)],
            vec![mutating(&name, &ns.name)],
        )
        .await
        .expect("register");

    // What register applied: URL + path, the CA, required defaults, our field manager, and
    // the explicit namespace selector left as the controller wrote it.
    let vwc: Api<ValidatingWebhookConfiguration> = Api::all(ns.client.clone());
    let live = vwc.get(&name).await.expect("validating configuration");
    let hook = &live.webhooks.as_ref().unwrap()[0];
    assert_eq!(
        hook.client_config.url.as_deref(),
        Some(format!("{url}/validate-configmap").as_str())
    );
    assert_eq!(
        hook.client_config.ca_bundle.as_ref().map(|b| b.0.clone()),
        server.ca_pem().map(String::into_bytes)
    );
    assert_eq!(hook.side_effects, "None");
    assert_eq!(hook.admission_review_versions, vec!["v1"]);
    assert_eq!(hook.namespace_selector, only_namespace(&ns.name));
    let managers: Vec<_> = live
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(managers.contains(&name), "{managers:?}");

    let cms: Api<ConfigMap> = ns.api();
    wait_for_denial(&cms).await;
    wait_for("the mutating webhook to label", MINUTE, || async {
        let cm = cms
            .create(&dry_run(), &configmap("probe-label", &[]))
            .await
            .map_err(|e| e.to_string())?;
        let labels = cm.metadata.labels.unwrap_or_default();
        labels
            .get(MUTATED)
            .map(|_| ())
            .ok_or_else(|| format!("labels {labels:?}"))
    })
    .await;

    // Denied through kubectl, with the handler's message.
    // kubectl blocks its thread until the apiserver, and so our webhook, answers.
    let namespace = ns.name.clone();
    let (ok, _, stderr) = tokio::task::spawn_blocking(move || {
        kubectl(
            &["apply", "-n", &namespace, "-f", "-"],
            Some(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: refused\n  labels:\n    deny: \"true\"\ndata:\n  k: v\n",
            ),
        )
    })
    .await
    .unwrap();
    assert!(!ok, "a deny=true ConfigMap was admitted");
    assert!(
        stderr.contains("deny.e2e.kruise.io") && stderr.contains(DENIAL),
        "{stderr}"
    );
    assert!(cms.get_opt("refused").await.unwrap().is_none());

    // Admitted and labelled by the mutating webhook's JSON patch.
    let plain = cms
        .create(&PostParams::default(), &configmap("plain", &[]))
        .await
        .expect("a plain ConfigMap is admitted");
    let stored = cms.get("plain").await.unwrap();
    assert_eq!(plain.metadata.uid, stored.metadata.uid);
    assert_eq!(
        stored
            .metadata
            .labels
            .unwrap_or_default()
            .get(MUTATED)
            .map(String::as_str),
        Some("true")
    );
    cms.create(
        &PostParams::default(),
        &configmap("kept", &[("deny", "false")]),
    )
    .await
    .expect("deny=false is admitted");
    let kept = cms
        .get("kept")
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap_or_default();
    assert_eq!(kept.get("deny").map(String::as_str), Some("false"));
    assert_eq!(kept.get(MUTATED).map(String::as_str), Some("true"));

    // Metrics on the admin server. The validating webhook allowed exactly one request
    // (deny=false): matchConditions kept the unlabelled ConfigMaps from calling it.
    let (_, metrics) = admin_get(&runtime, "/metrics").await;
    let allowed = "kruise_webhook_request_duration_seconds_count{decision=\"allowed\",operation=\"CREATE\",webhook=\"deny-configmaps\"} 1";
    assert!(metrics.contains(allowed), "{metrics}");
    assert!(
        metrics.contains(
            "kruise_webhook_request_duration_seconds_count{decision=\"denied\",operation=\"CREATE\",webhook=\"deny-configmaps\"}"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "kruise_webhook_request_duration_seconds_count{decision=\"patched\",operation=\"CREATE\",webhook=\"label-configmaps\"}"
        ),
        "{metrics}"
    );
    assert!(
        !metrics.contains("kruise_webhook_errors_total{"),
        "{metrics}"
    );
    runtime.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ca_rotation_never_fails_an_admission() {
    let ns = TestNamespace::new("webhook-rotate").await;
    let name = format!("e2e-webhook-{}", ns.name);
    let runtime = runtime(name.clone().leak()).await;
    // A CA that lives 8 s and is replaced every 4 s: several rotations in one test.
    let options = Options {
        rotation: Rotation {
            ca_validity: Duration::from_secs(8),
            serving_validity: Duration::from_secs(3600),
            rotate_at: 0.5,
            check_interval: Duration::from_millis(200),
            backdate: Duration::ZERO,
            propagation: Duration::from_secs(1),
        },
        ..Options::default()
    };
    let server = WebhookServer::start_with(&runtime, vec![deny_route()], options)
        .await
        .expect("webhook server");
    let _cleanup = Cleanup(vec![("validatingwebhookconfiguration", name.clone())]);
    server
        .register(vec![validating(&name, &ns.name)], vec![])
        .await
        .expect("register");
    let cms: Api<ConfigMap> = ns.api();
    wait_for_denial(&cms).await;

    let vwc: Api<ValidatingWebhookConfiguration> = Api::all(ns.client.clone());
    let bundle_in_cluster = || async {
        let live = vwc.get(&name).await.expect("configuration");
        let hook = &live.webhooks.unwrap()[0];
        String::from_utf8(hook.client_config.ca_bundle.clone().unwrap().0).unwrap()
    };
    let mut bundles = BTreeSet::new();
    let mut served = BTreeSet::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(14);
    let mut calls = 0;
    while tokio::time::Instant::now() < until {
        // Every call is answered by our handler: no x509 error while CAs change.
        match cms
            .create(&dry_run(), &configmap("probe-deny", &[("deny", "true")]))
            .await
        {
            Err(kube::Error::Api(e)) if e.message.contains(DENIAL) => {}
            other => panic!("call {calls} during rotation: {other:?}"),
        }
        calls += 1;
        bundles.insert(bundle_in_cluster().await);
        served.insert(server.serving_cert_der());
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert!(
        bundles.len() >= 3,
        "expected the caBundle re-applied after each rotation, saw {} bundles",
        bundles.len()
    );
    assert!(
        served.len() >= 3,
        "serving certificates seen: {}",
        served.len()
    );
    // The cluster converges on the process's current bundle.
    wait_for(
        "the cluster's caBundle to match the server's",
        MINUTE,
        || async {
            let live = bundle_in_cluster().await;
            if Some(&live) == server.ca_pem().as_ref() {
                Ok(())
            } else {
                Err("differs".into())
            }
        },
    )
    .await;
    eprintln!(
        "{calls} admissions across {} CA bundles and {} serving certificates",
        bundles.len(),
        served.len()
    );
    runtime.shutdown.cancel();
}

/// A client acting as the ServiceAccount `name` of `ns`.
async fn client_as(ns: &TestNamespace, name: &str) -> kube::Client {
    let mut config = kube_config().await;
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{}:{name}", ns.name));
    kube::Client::try_from(config).expect("impersonating client")
}

/// A cache that has not listed yet answers `get_or_fetch` from the API server (so a
/// webhook may serve before it syncs, `/readyz` not waiting for it), and from its store
/// once it has listed. Its readiness check stays pending for the controller meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_still_listing_reads_through_to_the_api() {
    use kruise_runtime::{Cache, Readiness};
    let ns = TestNamespace::new("readthrough").await;
    // `reader` may get ConfigMaps and, later, list and watch them; `nobody` may do nothing.
    ns.apply(
        r#"
apiVersion: v1
kind: ServiceAccount
metadata: {name: reader}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: nobody}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: get-configmaps}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: get-configmaps}
subjects:
- {kind: ServiceAccount, name: reader}
"#,
    )
    .await
    .unwrap();
    let cms: Api<ConfigMap> = ns.api();
    cms.create(
        &PostParams::default(),
        &configmap("present", &[("kept", "yes")]),
    )
    .await
    .unwrap();
    let reader = client_as(&ns, "reader").await;
    let nobody = client_as(&ns, "nobody").await;
    let readiness = Readiness::default();
    readiness.only_controller_waits_for("cache configmaps");
    let cache: Cache<ConfigMap> = Cache::spawn(
        Api::namespaced(reader.clone(), &ns.name),
        kube::runtime::watcher::Config::default(),
        kruise_runtime::cache::prune,
        readiness.register("cache configmaps"),
    );
    // Forbidden to list, it never syncs; reads go to the API server, as `reader`.
    wait_for("the reader's Role to take effect", MINUTE, || async {
        match cache.get_or_fetch(&reader, &ns.name, "present").await {
            Ok(Some(cm)) => Ok(cm),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(!cache.is_synced());
    assert_eq!(readiness.pending(), ["cache configmaps"]);
    assert!(readiness.pending_for_serving().is_empty());
    let present = cache
        .get_or_fetch(&reader, &ns.name, "present")
        .await
        .unwrap()
        .expect("present");
    assert_eq!(
        present.labels().get("kept").map(String::as_str),
        Some("yes")
    );
    assert!(
        cache
            .get_or_fetch(&reader, &ns.name, "absent")
            .await
            .unwrap()
            .is_none()
    );
    let refused = cache.get_or_fetch(&nobody, &ns.name, "present").await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(s)) if s.code == 403),
        "{refused:?}"
    );

    // Allowed to list and watch, it syncs; then the store answers, without a request
    // (`nobody` may not get, and gets the ConfigMap).
    ns.apply(
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: get-configmaps}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
"#,
    )
    .await
    .unwrap();
    wait_for("the cache to list", MINUTE, || async {
        if cache.is_synced() {
            Ok(())
        } else {
            Err(format!("pending: {:?}", readiness.pending()))
        }
    })
    .await;
    assert!(readiness.is_ready());
    let cached = cache
        .get_or_fetch(&nobody, &ns.name, "present")
        .await
        .expect("from the store, no request")
        .expect("present");
    assert_eq!(cached.uid(), present.uid());
}
