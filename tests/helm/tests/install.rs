//! The typed assertions of `make helm-test` (tests/helm/install.sh), one phase per test, run
//! by the script in order against the chart it installed on the real node. Ignored (and a
//! no-op without KRUISE_HELM_INSTALL=1): they need that install, and act cluster-wide.

// A test file: a failed read fails the phase, as the assertions do.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const NS: &str = "kruise-system";
const AGENT_NS: &str = "kruise-daemon-config";
const TEST_NS: &str = "helm-test";
const PART_OF: &str = "app.kubernetes.io/part-of=kruise-rs";
/// The controller the upgrade disables (and everything named after it): broadcastjob, or
/// imagepulljob in `make test`'s smaller install (install.sh, HELM_TEST_SCOPE=minimal).
fn disabled() -> String {
    std::env::var("HELM_TEST_DISABLED").unwrap_or_else(|_| "broadcastjob".into())
}

/// How many controller Deployments the install has.
fn controllers() -> usize {
    std::env::var("HELM_TEST_CONTROLLERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .expect("HELM_TEST_CONTROLLERS, set by tests/helm/install.sh")
}

/// Whether protection-ctl is installed (the upgrade's gate is then checked by its effect).
fn protection() -> bool {
    std::env::var("HELM_TEST_PROTECTION").as_deref() == Ok("1")
}

fn enabled() -> bool {
    if std::env::var("KRUISE_HELM_INSTALL").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("skipped: run by tests/helm/install.sh (make helm-test)");
    false
}

fn dir() -> PathBuf {
    std::env::var("HELM_TEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| kruise_helm_tests::root().join(".local/helm-test"))
}

async fn client() -> Client {
    Client::try_default()
        .await
        .expect("a kubeconfig (KUBECONFIG)")
}

fn clonesets(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("apps.kruise.io", "v1alpha1", "CloneSet");
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, "clonesets"),
    )
}

/// Polls `check` until it returns Some, or fails after `secs`.
async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let mut last = String::new();
    for _ in 0..secs {
        match check().await {
            Ok(v) => return v,
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("{what}: not within {secs}s: {last}");
}

fn cs_demo() -> Value {
    let text =
        std::fs::read_to_string(kruise_helm_tests::root().join("examples/cloneset-cs-demo.yaml"))
            .expect("examples/cloneset-cs-demo.yaml");
    serde_saphyr::from_str(&text).expect("the example parses")
}

#[tokio::test]
#[ignore = "make helm-test"]
async fn installed() {
    if !enabled() {
        return;
    }
    let c = client().await;
    // Every controller's Deployment: all its replicas ready and updated.
    let deployments: Api<Deployment> = Api::namespaced(c.clone(), NS);
    let list = deployments
        .list(&ListParams::default().labels(PART_OF))
        .await
        .unwrap();
    assert_eq!(
        list.items.len(),
        controllers(),
        "one Deployment per controller"
    );
    for d in &list.items {
        let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let st = d.status.clone().unwrap_or_default();
        assert_eq!(
            st.ready_replicas.unwrap_or(0),
            want,
            "{} ready",
            d.name_any()
        );
        assert_eq!(
            st.updated_replicas.unwrap_or(0),
            want,
            "{} updated",
            d.name_any()
        );
        let image = &d
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .image;
        assert!(
            image.as_deref().unwrap_or_default().contains("/kruise-rs/"),
            "{image:?}"
        );
    }
    // The node agent on the real node.
    let agent: DaemonSet = Api::namespaced(c.clone(), AGENT_NS)
        .get("daemon-agent")
        .await
        .unwrap();
    let st = agent.status.unwrap();
    assert!(
        st.number_ready >= 1 && st.number_ready == st.desired_number_scheduled,
        "{st:?}"
    );

    // A CloneSet through the chart's webhooks: refused when invalid (validating webhook),
    // defaulted (mutating webhook), then reaching its replicas (the controller).
    let namespaces: Api<Namespace> = Api::all(c.clone());
    let _ = namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": TEST_NS}})).unwrap(),
        )
        .await;
    let api = clonesets(&c, TEST_NS);
    let mut bad = cs_demo();
    bad["metadata"]["name"] = json!("cs-invalid");
    bad["spec"]["selector"]["matchLabels"]["app"] = json!("not-the-template");
    let err = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(bad).unwrap(),
        )
        .await
        .expect_err("a selector not matching the template is refused");
    assert!(
        err.to_string().contains("vcloneset.kb.io"),
        "refused by the chart's webhook: {err}"
    );
    let demo: DynamicObject = serde_json::from_value(cs_demo()).unwrap();
    let created = api
        .create(&PostParams::default(), &demo)
        .await
        .expect("cs-demo created");
    let spec = &created.data["spec"];
    assert!(
        spec["updateStrategy"]["type"].is_string(),
        "defaulted by mcloneset.kb.io: {spec}"
    );
    assert!(
        spec["revisionHistoryLimit"].is_number(),
        "defaulted: {spec}"
    );
    let want = cs_demo()["spec"]["replicas"].as_i64().unwrap();
    eventually(300, "cs-demo ready", || {
        let api = api.clone();
        async move {
            let cs = api.get("cs-demo").await.map_err(|e| e.to_string())?;
            let ready = cs.data["status"]["readyReplicas"].as_i64().unwrap_or(0);
            if ready == want {
                Ok(())
            } else {
                Err(format!("{ready} of {want} ready"))
            }
        }
    })
    .await;
}

/// What the upgrade must not change, by object: resourceVersion for RBAC and Services
/// (Helm patches nothing whose manifest is unchanged), content for the webhooks (the
/// controllers re-register theirs at start), UID, labels, annotations and spec for the
/// CloneSet's Pods.
async fn state(c: &Client) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let lp = ListParams::default().labels(PART_OF);
    macro_rules! versions {
        ($t:ty, $api:expr) => {
            for o in $api.list(&lp).await.unwrap().items {
                let key = format!(
                    "{} {}/{}",
                    stringify!($t),
                    o.namespace().unwrap_or_default(),
                    o.name_any()
                );
                out.insert(key, json!(o.resource_version()));
            }
        };
    }
    versions!(ClusterRole, Api::<ClusterRole>::all(c.clone()));
    versions!(
        ClusterRoleBinding,
        Api::<ClusterRoleBinding>::all(c.clone())
    );
    versions!(Role, Api::<Role>::all(c.clone()));
    versions!(RoleBinding, Api::<RoleBinding>::all(c.clone()));
    versions!(Service, Api::<Service>::all(c.clone()));
    versions!(ServiceAccount, Api::<ServiceAccount>::all(c.clone()));
    for o in Api::<ValidatingWebhookConfiguration>::all(c.clone())
        .list(&lp)
        .await
        .unwrap()
        .items
    {
        out.insert(
            format!("ValidatingWebhookConfiguration {}", o.name_any()),
            json!(o.webhooks),
        );
    }
    for o in Api::<MutatingWebhookConfiguration>::all(c.clone())
        .list(&lp)
        .await
        .unwrap()
        .items
    {
        out.insert(
            format!("MutatingWebhookConfiguration {}", o.name_any()),
            json!(o.webhooks),
        );
    }
    for p in Api::<Pod>::namespaced(c.clone(), TEST_NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
    {
        out.insert(
            format!("Pod {TEST_NS}/{}", p.name_any()),
            json!({"uid": p.uid(), "labels": p.labels(), "annotations": p.annotations(), "spec": p.spec}),
        );
    }
    out
}

#[tokio::test]
#[ignore = "make helm-test"]
async fn snapshot() {
    if !enabled() {
        return;
    }
    let s = state(&client().await).await;
    assert!(
        s.keys().any(|k| k.starts_with("Pod ")),
        "the CloneSet's Pods"
    );
    std::fs::write(
        dir().join("before-upgrade.json"),
        serde_json::to_vec_pretty(&s).unwrap(),
    )
    .unwrap();
}

fn of_disabled(key: &str) -> bool {
    key.contains(&disabled())
}

#[tokio::test]
#[ignore = "make helm-test"]
async fn upgraded() {
    if !enabled() {
        return;
    }
    let c = client().await;
    let before: BTreeMap<String, Value> =
        serde_json::from_slice(&std::fs::read(dir().join("before-upgrade.json")).unwrap()).unwrap();
    let after = state(&c).await;
    // The disabled controller: everything of it gone, its CRD kept.
    let gone: Vec<&String> = before.keys().filter(|k| of_disabled(k)).collect();
    assert!(
        gone.len() >= 8,
        "RBAC, Services, ServiceAccount, webhooks: {gone:?}"
    );
    for k in &gone {
        assert!(!after.contains_key(*k), "{k} is still there");
    }
    let deployments: Api<Deployment> = Api::namespaced(c.clone(), NS);
    let disabled = disabled();
    assert!(
        deployments
            .get_opt(&format!("{disabled}-controller"))
            .await
            .unwrap()
            .is_none()
    );
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    assert!(
        crds.get_opt(&format!("{disabled}s.apps.kruise.io"))
            .await
            .unwrap()
            .is_some(),
        "CRD kept"
    );
    // Everything else untouched; no Pod of the CloneSet rewritten.
    for (k, v) in before.iter().filter(|(k, _)| !of_disabled(k)) {
        assert_eq!(after.get(k), Some(v), "{k} changed with the upgrade");
    }
    // The others rolled out with the gate, all Ready again.
    let list = deployments
        .list(&ListParams::default().labels(PART_OF))
        .await
        .unwrap();
    assert_eq!(list.items.len(), controllers() - 1);
    for d in &list.items {
        let container = &d
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0];
        let gates: Vec<&str> = container
            .env
            .iter()
            .flatten()
            .filter(|e| e.name == "KRUISE_FEATURE_GATES")
            .filter_map(|e| e.value.as_deref())
            .collect();
        assert_eq!(gates.len(), 1, "{}: {gates:?}", d.name_any());
        assert!(
            gates[0].ends_with("ResourcesDeletionProtection=true"),
            "{gates:?}"
        );
        let st = d.status.clone().unwrap_or_default();
        assert_eq!(
            st.ready_replicas,
            d.spec.as_ref().unwrap().replicas,
            "{}",
            d.name_any()
        );
    }
    if !protection() {
        return;
    }
    // The gate took: a namespace labelled for protection is not deleted.
    let namespaces: Api<Namespace> = Api::all(c.clone());
    let protected = "helm-test-protected";
    let _ = namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": protected,
                "labels": {"policy.kruise.io/delete-protection": "Always"}}}))
            .unwrap(),
        )
        .await;
    let err = namespaces
        .delete(protected, &DeleteParams::default())
        .await
        .expect_err("deletion protection on");
    assert!(err.to_string().contains("delete-protection"), "{err}");
    namespaces
        .patch(
            protected,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"metadata": {"labels": {"policy.kruise.io/delete-protection": null}}}),
            ),
        )
        .await
        .unwrap();
    namespaces
        .delete(protected, &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
#[ignore = "make helm-test"]
async fn guard_held() {
    if !enabled() {
        return;
    }
    let c = client().await;
    let refused = std::fs::read_to_string(dir().join("refused.txt")).unwrap();
    // Helm's error is the Job's ("job failed: BackoffLimitExceeded"); the guard's log
    // comes with it (helm.sh/hook-output-log-policy: hook-failed).
    assert!(
        refused.contains("BackoffLimitExceeded"),
        "the hook failed: {refused}"
    );
    assert!(
        refused.contains("refusing to uninstall"),
        "Helm prints the guard's log: {refused}"
    );
    assert!(
        refused.contains("CloneSet (clonesets.apps.kruise.io): helm-test/cs-demo"),
        "{refused}"
    );
    // Nothing deleted.
    let deployments: Api<Deployment> = Api::namespaced(c.clone(), NS);
    let list = deployments
        .list(&ListParams::default().labels(PART_OF))
        .await
        .unwrap();
    assert_eq!(list.items.len(), controllers() - 1);
    assert!(
        clonesets(&c, TEST_NS)
            .get_opt("cs-demo")
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
#[ignore = "make helm-test"]
async fn uninstalled() {
    if !enabled() {
        return;
    }
    let c = client().await;
    let lp = ListParams::default().labels(PART_OF);
    let deployments: Api<Deployment> = Api::namespaced(c.clone(), NS);
    assert!(deployments.list(&lp).await.unwrap().items.is_empty());
    assert!(
        Api::<ValidatingWebhookConfiguration>::all(c.clone())
            .list(&lp)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(
        Api::<MutatingWebhookConfiguration>::all(c.clone())
            .list(&lp)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    for name in [
        "clonesets.apps.kruise.io".to_string(),
        format!("{}s.apps.kruise.io", disabled()),
    ] {
        assert!(crds.get_opt(&name).await.unwrap().is_some(), "{name} kept");
    }
}
