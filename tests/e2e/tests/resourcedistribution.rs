//! ResourceDistribution on the real cluster: examples/resourcedistribution.yaml,
//! a new labelled
//! namespace, an edited source, a conflicting Secret, admission and the gate.
//!
//! RDs are cluster-scoped, so the in-process controller cannot be limited to the test's
//! namespace: it is scoped instead to RDs labelled
//! `apps.kruise.io/resourcedistribution-scope=<test namespace>` (webhook objectSelector
//! and reconcile filter), each test's RDs are named after its namespace, and they target
//! only namespaces the test creates (`<test namespace>-1`, …) through a label key unique
//! to the test. Nothing here can touch another test's objects.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kruise_api::apps_v1alpha1::ResourceDistribution;
use kruise_api::keys;
use kruise_e2e::{RunningController, TestNamespace, wait_for};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const MINUTE: Duration = Duration::from_secs(60);

/// The namespaces a test adds beside its own, and its RDs: removed when dropped.
struct Owned {
    client: kube::Client,
    namespaces: Vec<String>,
    rds: Vec<String>,
}

impl Owned {
    fn new(client: &kube::Client) -> Self {
        Owned {
            client: client.clone(),
            namespaces: Vec::new(),
            rds: Vec::new(),
        }
    }

    async fn namespace(&mut self, name: &str, labels: &[(&str, &str)]) {
        let ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels.iter().cloned().collect::<BTreeMap<_, _>>()},
        }))
        .unwrap();
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
        self.namespaces.push(name.to_string());
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if std::env::var_os("KRUISE_E2E_KEEP").is_some() {
            return;
        }
        for rd in &self.rds {
            let _ = kruise_e2e::kubectl(
                &["delete", "resourcedistribution", rd, "--wait=false"],
                None,
            );
        }
        for ns in &self.namespaces {
            let _ = kruise_e2e::kubectl(&["delete", "namespace", ns, "--wait=false"], None);
        }
    }
}

async fn controller(ns: &TestNamespace, gates: &str) -> RunningController {
    if std::env::var_os("RUST_LOG").is_some() {
        kruise_runtime::telemetry::init(kruise_runtime::settings::LogFormat::Text);
    }
    RunningController::start(
        resourcedistribution_ctl::IDENTITY,
        &ns.name,
        gates,
        resourcedistribution_ctl::run,
    )
    .await
}

/// An RD of this test (named and scoped after its namespace).
fn rd(ns: &TestNamespace, suffix: &str, resource: Value, targets: Value) -> ResourceDistribution {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ResourceDistribution",
        "metadata": {
            "name": format!("{}{suffix}", ns.name),
            "labels": {resourcedistribution_ctl::labels::SCOPE: ns.name},
        },
        "spec": {"resource": resource, "targets": targets},
    }))
    .unwrap()
}

fn app_token(token_b64: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "app-token", "labels": {"app": "demo"}},
        "type": "Opaque",
        "data": {"token": token_b64},
    })
}

/// Waits until a dry-run create of `probe` is refused with `message`: the apiserver now
/// calls this test's webhook (which only validates, so nothing else shows it).
async fn wait_refused(
    api: &Api<ResourceDistribution>,
    probe: &ResourceDistribution,
    message: &str,
) {
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for("the apiserver to call the webhook", MINUTE, || async {
        match api.create(&dry_run, probe).await {
            Err(kube::Error::Api(s)) if s.message.contains(message) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

async fn refusal(api: &Api<ResourceDistribution>, rd: &ResourceDistribution) -> String {
    match api.create(&PostParams::default(), rd).await {
        Err(kube::Error::Api(s)) => s.message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The copy in `namespace`, if any, as (data token, controller uid, annotations).
async fn copy(client: &kube::Client, namespace: &str) -> Option<Secret> {
    Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt("app-token")
        .await
        .expect("get secret")
}

fn token(secret: &Secret) -> Vec<u8> {
    secret.data.as_ref().unwrap()["token"].0.clone()
}

async fn wait_status(
    api: &Api<ResourceDistribution>,
    name: &str,
    what: &str,
    check: impl Fn(&kruise_api::apps_v1alpha1::ResourceDistributionStatus) -> bool,
) -> ResourceDistribution {
    wait_for(what, MINUTE, || async {
        let rd = api.get(name).await.map_err(|e| e.to_string())?;
        let observed = rd.status.as_ref().map(|s| s.observed_generation) == rd.metadata.generation;
        match &rd.status {
            Some(s) if observed && check(s) => Ok(rd),
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

fn failed_in(
    status: &kruise_api::apps_v1alpha1::ResourceDistributionStatus,
    condition: &str,
) -> Vec<String> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == condition)
        .map(|c| c.failed_namespaces.clone())
        .unwrap_or_default()
}

/// D5: the copies land in the listed and the labelled namespace, owned and annotated; a
/// new labelled namespace gets one; editing the source updates every copy; a namespace
/// losing its label loses its copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_example_follows_namespaces_and_edits() {
    let ns = TestNamespace::new("rd").await;
    let _ctl = controller(&ns, "ResourceDistributionGate=true").await;
    let client = ns.client.clone();
    let api: Api<ResourceDistribution> = Api::all(client.clone());
    wait_refused(
        &api,
        &rd(
            &ns,
            "-probe",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}),
            json!({}),
        ),
        resourcedistribution_ctl::webhook::UNSUPPORTED_KIND,
    )
    .await;

    let group = ns.name.clone();
    let (ns1, ns2, ns3, ns4) = (
        format!("{}-1", ns.name),
        format!("{}-2", ns.name),
        format!("{}-3", ns.name),
        format!("{}-4", ns.name),
    );
    let mut owned = Owned::new(&client);
    owned.namespace(&ns1, &[]).await;
    owned.namespace(&ns2, &[("group", &group)]).await;
    owned.namespace(&ns3, &[]).await;

    let distribution = rd(
        &ns,
        "",
        app_token("ZGVtby10b2tlbg=="),
        json!({"includedNamespaces": {"list": [{"name": ns1}]},
               "namespaceLabelSelector": {"matchLabels": {"group": group}}}),
    );
    let name = distribution.name_any();
    api.create(&PostParams::default(), &distribution)
        .await
        .expect("create RD");
    owned.rds.push(name.clone());

    let created = wait_status(&api, &name, "TOTAL 2, SUCCEED 2, FAILED 0", |s| {
        (s.desired, s.succeeded, s.failed) == (2, 2, 0)
    })
    .await;
    let status = created.status.unwrap();
    assert_eq!(status.conditions.len(), 6);
    assert!(
        status
            .conditions
            .iter()
            .all(|c| c.status == "False" && c.reason == "Succeeded")
    );
    let uid = created.metadata.uid.unwrap();
    for target in [&ns1, &ns2] {
        let secret = copy(&client, target)
            .await
            .unwrap_or_else(|| panic!("no copy in {target}"));
        assert_eq!(token(&secret), b"demo-token");
        let owner = &secret.owner_references()[0];
        assert_eq!(
            (owner.uid.as_str(), owner.controller),
            (uid.as_str(), Some(true))
        );
        assert_eq!(secret.annotations()[keys::RD_RESOURCE_FROM], name);
        assert_eq!(secret.annotations()[keys::RD_RESOURCE_HASHCODE].len(), 64);
        assert_eq!(secret.labels()["app"], "demo");
    }
    assert!(copy(&client, &ns3).await.is_none(), "ns-3 is no target");
    let ns1_version = copy(&client, &ns1).await.unwrap().resource_version();

    // A new labelled namespace gets its copy.
    owned.namespace(&ns4, &[("group", &group)]).await;
    wait_for("a copy in the new labelled namespace", MINUTE, || async {
        copy(&client, &ns4)
            .await
            .map(|_| ())
            .ok_or("no copy yet".to_string())
    })
    .await;
    wait_status(&api, &name, "TOTAL 3", |s| {
        (s.desired, s.succeeded) == (3, 3)
    })
    .await;
    // The reconciles the new namespace caused left the in-sync copy alone.
    assert_eq!(
        copy(&client, &ns1).await.unwrap().resource_version(),
        ns1_version
    );

    // Editing the source updates every copy.
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"resource": {"data": {"token": "bmV3LXRva2Vu"}}}})),
    )
    .await
    .expect("edit the source");
    for target in [&ns1, &ns2, &ns4] {
        wait_for(&format!("the copy in {target} updated"), MINUTE, || async {
            let secret = copy(&client, target).await.ok_or("gone")?;
            (token(&secret) == b"new-token")
                .then_some(())
                .ok_or(format!("{:?}", String::from_utf8_lossy(&token(&secret))))
        })
        .await;
    }

    // ns-2 loses its label: its copy goes.
    Api::<Namespace>::all(client.clone())
        .patch(
            &ns2,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"group": null}}})),
        )
        .await
        .expect("unlabel ns-2");
    wait_for("the copy in ns-2 deleted", MINUTE, || async {
        match copy(&client, &ns2).await {
            None => Ok(()),
            Some(_) => Err("still there".to_string()),
        }
    })
    .await;
    wait_status(&api, &name, "TOTAL 2 after the unlabel", |s| {
        (s.desired, s.succeeded, s.failed) == (2, 2, 0)
    })
    .await;
}

/// A same-named Secret someone else made is left alone and reported (ConflictOccurred,
/// FAILED 1); admission refuses what the spec lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_secret_is_left_alone_and_reported() {
    let ns = TestNamespace::new("rdc").await;
    let _ctl = controller(&ns, "ResourceDistributionGate=true").await;
    let client = ns.client.clone();
    let api: Api<ResourceDistribution> = Api::all(client.clone());
    wait_refused(
        &api,
        &rd(
            &ns,
            "-probe",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}),
            json!({}),
        ),
        resourcedistribution_ctl::webhook::UNSUPPORTED_KIND,
    )
    .await;

    // Admission.
    let ambiguous = rd(
        &ns,
        "-bad",
        app_token("ZGVtby10b2tlbg=="),
        json!({"includedNamespaces": {"list": [{"name": "a"}]},
               "excludedNamespaces": {"list": [{"name": "a"}]}}),
    );
    assert!(
        refusal(&api, &ambiguous).await.contains(
            "ambiguous targets because namespace [a] is in both IncludedNamespaces.List and ExcludedNamespaces.List"
        )
    );
    let bad_data = rd(
        &ns,
        "-bad",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "not base64!"}}),
        json!({}),
    );
    assert!(
        refusal(&api, &bad_data)
            .await
            .contains("spec.resource: Invalid value: resource is invalid")
    );

    let (ns1, ns3) = (format!("{}-1", ns.name), format!("{}-3", ns.name));
    let mut owned = Owned::new(&client);
    owned.namespace(&ns1, &[]).await;
    owned.namespace(&ns3, &[]).await;
    let foreign: Secret = serde_json::from_value(json!({
        "metadata": {"name": "app-token", "labels": {"owner": "someone-else"}},
        "stringData": {"token": "theirs"},
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), &ns3)
        .create(&PostParams::default(), &foreign)
        .await
        .expect("create the foreign Secret");

    let distribution = rd(
        &ns,
        "",
        app_token("ZGVtby10b2tlbg=="),
        json!({"includedNamespaces": {"list": [{"name": ns1}]}}),
    );
    let name = distribution.name_any();
    api.create(&PostParams::default(), &distribution)
        .await
        .expect("create RD");
    owned.rds.push(name.clone());
    wait_status(&api, &name, "SUCCEED 1", |s| {
        (s.desired, s.succeeded) == (1, 1)
    })
    .await;

    // The name of the resource cannot change.
    let renamed = api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resource": {"metadata": {"name": "other"}}}})),
        )
        .await;
    match renamed {
        Err(kube::Error::Api(s)) => assert!(
            s.message.contains(keys::RD_MSG_RESOURCE_IMMUTABLE),
            "{}",
            s.message
        ),
        other => panic!("rename admitted: {other:?}"),
    }

    // ns-3 joins the targets: conflict, reported, the foreign Secret untouched.
    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"targets": {"includedNamespaces": {"list": [{"name": ns1}, {"name": ns3}]}}}})),
    )
    .await
    .expect("add ns-3");
    let rd = wait_status(&api, &name, "FAILED 1 with ConflictOccurred", |s| {
        (s.desired, s.succeeded, s.failed) == (2, 1, 1)
            && failed_in(s, keys::RD_CONDITION_CONFLICT_OCCURRED) == [ns3.clone()]
    })
    .await;
    let conflict = rd
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == keys::RD_CONDITION_CONFLICT_OCCURRED)
        .unwrap();
    assert_eq!(conflict.status, "True");
    let theirs = copy(&client, &ns3).await.expect("the foreign Secret");
    assert_eq!(token(&theirs), b"theirs");
    assert!(theirs.owner_references().is_empty());
    assert!(!theirs.annotations().contains_key(keys::RD_RESOURCE_FROM));

    // The RD goes: the garbage collector takes our copy, never theirs.
    api.delete(&name, &DeleteParams::default())
        .await
        .expect("delete RD");
    wait_for("our copy collected with the RD", MINUTE, || async {
        match copy(&client, &ns1).await {
            None => Ok(()),
            Some(_) => Err("still there".to_string()),
        }
    })
    .await;
    assert_eq!(
        token(&copy(&client, &ns3).await.expect("theirs stays")),
        b"theirs"
    );
}

/// With ResourceDistributionGate off (upstream's default) every RD is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_off_refuses_every_rd() {
    let ns = TestNamespace::new("rdg").await;
    let _ctl = controller(&ns, "").await;
    let api: Api<ResourceDistribution> = Api::all(ns.client.clone());
    let probe = rd(&ns, "", app_token("ZGVtby10b2tlbg=="), json!({}));
    wait_refused(&api, &probe, keys::RD_MSG_GATE_DISABLED).await;
    match api
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &probe,
        )
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403),
        other => panic!("admitted: {other:?}"),
    }
}
