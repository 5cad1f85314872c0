//! `kubectl kruise` on Kruise Rollout's `Rollout` (rollouts.kruise.io, openkruise/rollouts):
//! `rollout approve` of a Rollout paused at a step, `rollout pause|resume`, and
//! `describe rollout`. This project does not ship Kruise Rollout: the test installs a
//! stand-in CRD (v1beta1, any fields, a status subresource) when the cluster has none, and
//! plays Kruise Rollout's controller by writing the Rollout's status itself.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_e2e::{TestNamespace, kubectl_kruise, wait_for};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const MINUTE: Duration = Duration::from_secs(60);
const CRD: &str = "rollouts.rollouts.kruise.io";

/// The stand-in CRD, when this test installed it: deleted when the test ends, unless
/// Rollouts of other namespaces (another run sharing it, or a real Kruise Rollout user)
/// still exist.
struct StandInCrd {
    namespace: String,
}

impl Drop for StandInCrd {
    fn drop(&mut self) {
        let (ok, namespaces, _) = kruise_e2e::kubectl(
            &[
                "get",
                CRD,
                "-A",
                "-o",
                "jsonpath={.items[*].metadata.namespace}",
            ],
            None,
        );
        if ok && namespaces.split_whitespace().all(|ns| ns == self.namespace) {
            let _ = kruise_e2e::kubectl(&["delete", "crd", CRD, "--wait=false"], None);
        }
    }
}

/// Installs the stand-in Rollout CRD unless one exists; waits until the API serves it.
async fn rollout_crd(ns: &TestNamespace) -> Option<StandInCrd> {
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {"group": "rollouts.kruise.io", "scope": "Namespaced",
                 "names": {"plural": "rollouts", "singular": "rollout", "kind": "Rollout",
                           "listKind": "RolloutList", "shortNames": ["ro"]},
                 "versions": [{"name": "v1beta1", "served": true, "storage": true,
                   "subresources": {"status": {}},
                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    }))
    .unwrap();
    let created = match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => Some(StandInCrd {
            namespace: ns.name.clone(),
        }),
        Err(kube::Error::Api(e)) if e.code == 409 => None,
        Err(e) => panic!("create the Rollout CRD: {e}"),
    };
    wait_for("rollouts.kruise.io/v1beta1 served", MINUTE, || async {
        let groups = ns
            .client
            .list_api_groups()
            .await
            .map_err(|e| e.to_string())?;
        let served = groups.groups.iter().any(|g| {
            g.name == "rollouts.kruise.io" && g.versions.iter().any(|v| v.version == "v1beta1")
        });
        let listed = rollouts(ns)
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string());
        match (served, listed) {
            (true, Ok(_)) => Ok(()),
            (_, listed) => Err(format!("in discovery: {served}, list: {listed:?}")),
        }
    })
    .await;
    created
}

fn rollouts(ns: &TestNamespace) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: "rollouts.kruise.io".into(),
        version: "v1beta1".into(),
        api_version: "rollouts.kruise.io/v1beta1".into(),
        kind: "Rollout".into(),
        plural: "rollouts".into(),
    };
    Api::namespaced_with(ns.client.clone(), &ns.name, &ar)
}

async fn rollout_json(ns: &TestNamespace, name: &str) -> Value {
    serde_json::to_value(rollouts(ns).get(name).await.expect("get the Rollout")).unwrap()
}

async fn run(ns: &TestNamespace, args: &[&str]) -> String {
    kubectl_kruise(&ns.name, args)
        .await
        .unwrap_or_else(|e| panic!("kubectl kruise {}: {e}", args.join(" ")))
}

async fn refused(ns: &TestNamespace, args: &[&str]) -> String {
    match kubectl_kruise(&ns.name, args).await {
        Ok(out) => panic!(
            "kubectl kruise {} should fail, printed {out}",
            args.join(" ")
        ),
        Err(e) => e,
    }
}

/// Writes the status Kruise Rollout's controller would: step `step` of 3 in `state`.
async fn set_step(ns: &TestNamespace, name: &str, step: i64, state: &str) {
    let generation = rollout_json(ns, name).await["metadata"]["generation"].clone();
    rollouts(ns)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "observedGeneration": generation,
                "phase": "Progressing",
                "message": format!("Rollout is in step({step}/3)"),
                "canaryStatus": {
                    "currentStepIndex": step,
                    "currentStepState": state,
                    "stableRevision": "6bd4b7f8c9",
                    "canaryRevision": "5d9c8f7b6a",
                    "podTemplateHash": "5d9c8f7b6a",
                },
            }})),
        )
        .await
        .expect("patch the Rollout's status");
}

#[tokio::test]
async fn kubectl_kruise_approves_pauses_and_describes_a_kruise_rollout() {
    let ns = TestNamespace::new("cli-ro").await;
    let _crd = rollout_crd(&ns).await;

    // The workload: a CloneSet (no controller: the Rollout's page shows its spec), and
    // a Pod of the canary revision in batch 1, as Kruise Rollout labels them.
    let cloneset: CloneSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx:alpine"}]}}},
    }))
    .unwrap();
    ns.api::<CloneSet>()
        .create(&PostParams::default(), &cloneset)
        .await
        .expect("create the CloneSet");
    for (name, batch) in [("web-canary-1", "1"), ("web-canary-2", "2")] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {
                "app": "web",
                "controller-revision-hash": "web-5d9c8f7b6a",
                "pod-template-hash": "5d9c8f7b6a",
                "rollouts.kruise.io/rollout-batch-id": batch,
            }},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:alpine"}]},
        }))
        .unwrap();
        ns.api::<Pod>()
            .create(&PostParams::default(), &pod)
            .await
            .expect("create a Pod");
    }

    let rollout: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "rollouts.kruise.io/v1beta1", "kind": "Rollout",
        "metadata": {"name": "demo"},
        "spec": {
            "workloadRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web"},
            "strategy": {"canary": {"steps": [
                {"replicas": 1}, {"replicas": "50%"}, {"replicas": "100%"}
            ]}},
        },
    }))
    .unwrap();
    rollouts(&ns)
        .create(&PostParams::default(), &rollout)
        .await
        .expect("create the Rollout");
    set_step(&ns, "demo", 1, "StepPaused").await;

    // describe: the layout of kruise-tools, step 1 current and paused, batch 1's Pod.
    let page = run(&ns, &["describe", "rollout", "demo", "--no-color"]).await;
    let lines: Vec<&str> = page.lines().collect();
    for want in [
        "Name:              demo".to_string(),
        format!("Namespace:         {}", ns.name),
        "Status:            Progressing".into(),
        "Message:           Rollout is in step(1/3)".into(),
        "Strategy:          Canary".into(),
        " Step:             1/3".into(),
        "Images:            nginx:alpine".into(),
        "Current Revision:  6bd4b7f8c9".into(),
        "Update Revision:   5d9c8f7b6a".into(),
        " Desired:          2".into(),
    ] {
        assert!(lines.contains(&want.as_str()), "{want:?} in\n{page}");
    }
    assert!(
        page.contains(" Steps:\n  -  Replicas:     1\n     State:        StepPaused\n  -  Replicas:     50%\n  -  Replicas:     100%\n"),
        "{page}"
    );
    let pods: Vec<&str> = lines
        .iter()
        .skip_while(|l| !l.starts_with("NAME "))
        .copied()
        .collect();
    assert_eq!(pods.len(), 2, "the header and batch 1's Pod:\n{page}");
    // READY and STATUS depend on whether a (kwok) node runs the Pod.
    assert!(
        pods[1].starts_with("web-canary-1  ") && pods[1].contains("  1         5d9c8f7b6a  "),
        "{page}"
    );
    let all = run(
        &ns,
        &["describe", "ro", "rollout/demo", "--no-color", "--all"],
    )
    .await;
    assert_eq!(
        all.lines().filter(|l| l.starts_with("web-canary-")).count(),
        2,
        "--all: both batches\n{all}"
    );

    // approve: the paused step becomes StepReady through the status subresource.
    let out = run(&ns, &["rollout", "approve", "rollout/demo"]).await;
    assert_eq!(out, "rollout.rollouts.kruise.io/demo approved\n");
    let now = rollout_json(&ns, "demo").await;
    assert_eq!(
        now["status"]["canaryStatus"]["currentStepState"],
        "StepReady"
    );
    assert_eq!(now["status"]["canaryStatus"]["currentStepIndex"], 1);
    let again = refused(&ns, &["rollout", "approve", "rollout/demo"]).await;
    assert_eq!(
        again,
        "error: rollouts.rollouts.kruise.io \"demo\" does not allow to approve, because current canary state is not 'StepPaused'"
    );
    let err = refused(&ns, &["rollout", "approve", "cloneset/web"]).await;
    assert_eq!(
        err,
        "error: clonesets.apps.kruise.io \"web\" approving is not supported"
    );
    set_step(&ns, "demo", 2, "StepPaused").await;
    let out = run(
        &ns,
        &["rollout", "approve", "rollouts.rollouts.kruise.io", "demo"],
    )
    .await;
    assert_eq!(out, "rollout.rollouts.kruise.io/demo approved\n");
    assert_eq!(
        rollout_json(&ns, "demo").await["status"]["canaryStatus"]["currentStepState"],
        "StepReady"
    );

    // pause / resume: spec.strategy.paused.
    let out = run(&ns, &["rollout", "pause", "rollout/demo"]).await;
    assert_eq!(out, "rollout.rollouts.kruise.io/demo paused\n");
    assert_eq!(
        rollout_json(&ns, "demo").await["spec"]["strategy"]["paused"],
        true
    );
    let again = refused(&ns, &["rollout", "pause", "rollout/demo"]).await;
    assert_eq!(
        again,
        "error: rollouts.rollouts.kruise.io \"demo\" is already paused"
    );
    let out = run(&ns, &["rollout", "resume", "ro/demo"]).await;
    assert_eq!(out, "rollout.rollouts.kruise.io/demo resumed\n");
    let now = rollout_json(&ns, "demo").await;
    assert_eq!(now["spec"]["strategy"]["paused"], false);
    assert_eq!(
        now["spec"]["strategy"]["canary"]["steps"]
            .as_array()
            .map(Vec::len),
        Some(3),
        "the rest of the spec is kept"
    );

    let missing = refused(&ns, &["describe", "rollout", "nope"]).await;
    assert!(
        missing.starts_with("Error from server (NotFound): "),
        "{missing}"
    );
}
