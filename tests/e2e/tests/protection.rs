//! Resource deletion protection (docs/deletion-protection.md): `protection-ctl` in
//! process, with the gate on, scoped to the test's namespace. A namespace-scoped
//! instance guards the namespaced kinds of its namespace, its own Namespace object and
//! the CRDs labelled `apps.kruise.io/webhook-scope=<namespace>` (all of them only when
//! labelled `policy.kruise.io/delete-protection`), so tests running in parallel, these
//! included, never see each other's instances.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_api::keys;
use kruise_e2e::{RunningController, TestNamespace, kubectl_async, wait_for};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde_json::json;

const GATE_ON: &str = "ResourcesDeletionProtection=true,DeletionProtectionForCRDCascadingGate=true";
const ALWAYS: &str =
    "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always";
const CASCADING: &str = "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and ";

async fn kubectl(args: &[&str]) -> (bool, String, String) {
    kubectl_async(args.iter().map(|a| a.to_string()).collect(), None).await
}

/// Starts protection-ctl scoped to `home` and waits until the apiserver calls it: a
/// dry-run delete of a Service labelled `Always` is refused.
async fn protection(home: &TestNamespace) -> RunningController {
    protection_with(home, GATE_ON).await
}

async fn protection_with(home: &TestNamespace, gates: &str) -> RunningController {
    let ctl = RunningController::start(
        protection_ctl::IDENTITY,
        &home.name,
        gates,
        protection_ctl::run,
    )
    .await;
    home.apply(&service_yaml("probe", "Always")).await.unwrap();
    let services: Api<Service> = home.api();
    let dry_run = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for(
        "the apiserver to call the protection webhook",
        Duration::from_secs(60),
        || async {
            match services.delete("probe", &dry_run).await {
                Err(kube::Error::Api(e)) if e.code == 403 => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    ctl
}

fn service_yaml(name: &str, protection: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  labels:\n    {}: {protection}\nspec:\n  ports:\n  - port: 80\n",
        keys::DELETION_PROTECTION
    )
}

/// `kubectl delete <what>` (no waiting) must be refused with `message`, and the object
/// still be there.
async fn refused(args: &[&str], message: &str) {
    let mut delete = vec!["delete"];
    delete.extend_from_slice(args);
    delete.push("--wait=false");
    let (ok, out, err) = kubectl(&delete).await;
    assert!(!ok, "kubectl {delete:?} must be refused: {out}");
    assert!(err.contains(message), "kubectl {delete:?}: {err}");
    let mut get = vec!["get"];
    get.extend_from_slice(args);
    get.extend(["-o", "jsonpath={.metadata.deletionTimestamp}"]);
    let (ok, out, err) = kubectl(&get).await;
    assert!(
        ok && out.is_empty(),
        "{get:?} still there, not terminating: {out} {err}"
    );
}

async fn deleted(args: &[&str]) {
    let mut delete = vec!["delete"];
    delete.extend_from_slice(args);
    delete.push("--wait=false");
    let (ok, _, err) = kubectl(&delete).await;
    assert!(ok, "kubectl {delete:?} must be allowed: {err}");
}

/// Sets (`Some`) or removes (`None`) the protection label of `object`.
async fn label(object: &[&str], protection: Option<&str>) {
    let value = match protection {
        Some(p) => format!("{}={p}", keys::DELETION_PROTECTION),
        None => format!("{}-", keys::DELETION_PROTECTION),
    };
    let mut args = vec!["label", "--overwrite"];
    args.extend_from_slice(object);
    args.push(&value);
    let (ok, _, err) = kubectl(&args).await;
    assert!(ok, "kubectl {args:?}: {err}");
}

fn pod_yaml(name: &str, annotations: &str, restart: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations: {{{annotations}}}\nspec:\n  restartPolicy: {restart}\n  containers:\n  - name: c\n    image: nginx:alpine\n"
    )
}

// P3: a Namespace labelled Always is refused until the label goes; one labelled
// Cascading while it holds active Pods (Succeeded ones do not count), and nothing inside
// is lost. Each namespace has its own instance: a namespace-scoped instance guards its
// own Namespace object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_always_and_cascading() {
    futures::join!(namespace_always(), namespace_cascading());
}

async fn namespace_always() {
    let ns = TestNamespace::new("prot-ns-always").await;
    let _ctl = protection(&ns).await;
    label(&["namespace", &ns.name], Some("Always")).await;
    refused(&["namespace", &ns.name], ALWAYS).await;
    label(&["namespace", &ns.name], None).await;
    // (The namespace controller deletes what is inside: the probe too.)
    label(&["service/probe", "-n", &ns.name], None).await;
    deleted(&["namespace", &ns.name]).await;
}

async fn namespace_cascading() {
    let ns = TestNamespace::new("prot-ns-casc").await;
    let _ctl = protection(&ns).await;
    // Two running Pods and one that has finished.
    for pod in [
        pod_yaml("run-0", "", "Always"),
        pod_yaml("run-1", "", "Always"),
        pod_yaml("done", "e2e.kruise.io/run-for: 1s", "Never"),
    ] {
        ns.apply(&pod).await.unwrap();
    }
    let pods: Api<Pod> = ns.api();
    wait_for(
        "2 Pods Running and 1 Succeeded",
        Duration::from_secs(60),
        || async {
            let phases: Vec<String> = pods
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .iter()
                .map(|p| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.phase.clone())
                        .unwrap_or_default()
                })
                .collect();
            let count = |phase: &str| phases.iter().filter(|p| *p == phase).count();
            if count("Running") == 2 && count("Succeeded") == 1 {
                Ok(())
            } else {
                Err(format!("{phases:?}"))
            }
        },
    )
    .await;
    label(&["namespace", &ns.name], Some("Cascading")).await;
    refused(
        &["namespace", &ns.name],
        &format!("{CASCADING}active pods 2>0"),
    )
    .await;
    // Nothing inside was lost.
    let left = pods.list(&Default::default()).await.unwrap().items;
    assert_eq!(left.len(), 3);
    assert!(left.iter().all(|p| p.metadata.deletion_timestamp.is_none()));
    // Without active Pods (the Succeeded one stays): allowed.
    for name in ["run-0", "run-1"] {
        pods.delete(name, &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }
    wait_for("the running Pods gone", Duration::from_secs(30), || async {
        let n = pods.list(&Default::default()).await.unwrap().items.len();
        if n == 1 {
            Ok(())
        } else {
            Err(format!("{n} Pods"))
        }
    })
    .await;
    // A Bound PVC blocks too, once no Pod is active (OpenKruise's check, and its e2e
    // suite's); one being deleted does not.
    ns.apply(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 1Mi\n",
    )
    .await
    .unwrap();
    let pvcs: Api<PersistentVolumeClaim> = ns.api();
    wait_for("the PVC Bound", Duration::from_secs(30), || async {
        let phase = pvcs
            .get("data")
            .await
            .map_err(|e| e.to_string())?
            .status
            .and_then(|s| s.phase);
        if phase.as_deref() == Some("Bound") {
            Ok(())
        } else {
            Err(format!("{phase:?}"))
        }
    })
    .await;
    refused(
        &["namespace", &ns.name],
        &format!("{CASCADING}\"Bound\" status pvc 1>0"),
    )
    .await;
    pvcs.delete("data", &DeleteParams::default()).await.unwrap();
    label(&["service/probe", "-n", &ns.name], None).await;
    deleted(&["namespace", &ns.name]).await;
    let namespaces: Api<Namespace> = Api::all(ns.client.clone());
    let terminating = namespaces.get(&ns.name).await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
}

// P3: a CRD labelled Cascading is refused while one of its CRs exists (in any namespace),
// allowed once there is none; labelled Always, refused without CRs too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_cascading_counts_its_custom_resources() {
    let home = TestNamespace::new("prot-crd").await;
    let _ctl = protection(&home).await;
    // Unique: the CRD is cluster-scoped.
    let group = format!("{}.e2e.kruise.io", home.name);
    let name = format!("protwidgets.{group}");
    let crds: Api<CustomResourceDefinition> = Api::all(home.client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        // The scope label: a namespace-scoped instance guards only the CRDs of its scope.
        "metadata": {"name": name, "labels": {
            keys::DELETION_PROTECTION: "Cascading",
            keys::WEBHOOK_SCOPE: home.name,
        }},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "protwidgets", "singular": "protwidget", "kind": "ProtWidget"},
            "versions": [
                {"name": "v1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                {"name": "v2", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
            ],
        },
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let resource = ApiResource {
        group: group.clone(),
        version: "v2".into(),
        api_version: format!("{group}/v2"),
        kind: "ProtWidget".into(),
        plural: "protwidgets".into(),
    };
    let widgets: Api<DynamicObject> =
        Api::namespaced_with(home.client.clone(), &home.name, &resource);
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v2"), "kind": "ProtWidget",
        "metadata": {"name": "w1"},
    }))
    .unwrap();
    wait_for("the CRD served", Duration::from_secs(30), || async {
        widgets
            .create(&PostParams::default(), &widget)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;

    match crds.delete(&name, &DeleteParams::default()).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 403, "{e:?}");
            assert!(
                e.message.contains(&format!("{CASCADING}active CRs 1>0")),
                "{e:?}"
            );
        }
        other => panic!("the delete must be refused with 403: {other:?}"),
    }
    // Nothing was lost.
    assert!(widgets.get_opt("w1").await.unwrap().is_some());
    assert!(
        crds.get(&name)
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none(),
        "the CRD is not terminating"
    );

    widgets
        .delete("w1", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the CR gone", Duration::from_secs(30), || async {
        match widgets.get_opt("w1").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // Always: refused even without CRs.
    let crd_object = format!("customresourcedefinitions.apiextensions.k8s.io/{name}");
    label(&[&crd_object], Some("Always")).await;
    refused(&[&crd_object], ALWAYS).await;
    label(&[&crd_object], Some("Cascading")).await;
    crds.delete(&name, &DeleteParams::default())
        .await
        .expect("a Cascading CRD without CRs may go");
    label(&["service/probe", "-n", &home.name], None).await;
}

// Without DeletionProtectionForCRDCascadingGate (its default) a CRD labelled Cascading is
// refused whatever it holds, as OpenKruise v1.9.0 does; unlabelled it goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crd_cascading_without_its_gate_is_refused() {
    let home = TestNamespace::new("prot-crdgate").await;
    let _ctl = protection_with(&home, "ResourcesDeletionProtection=true").await;
    let group = format!("{}.e2e.kruise.io", home.name);
    let name = format!("gatewidgets.{group}");
    let crds: Api<CustomResourceDefinition> = Api::all(home.client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name, "labels": {
            keys::DELETION_PROTECTION: "Cascading",
            keys::WEBHOOK_SCOPE: home.name,
        }},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "gatewidgets", "singular": "gatewidget", "kind": "GateWidget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let crd_object = format!("customresourcedefinitions.apiextensions.k8s.io/{name}");
    // No custom resource exists, and it is refused all the same.
    refused(
        &[&crd_object],
        "feature-gate DeletionProtectionForCRDCascadingGate is not enabled",
    )
    .await;
    label(&[&crd_object], None).await;
    crds.delete(&name, &DeleteParams::default())
        .await
        .expect("an unlabelled CRD may go");
    label(&["service/probe", "-n", &home.name], None).await;
}

/// A workload kind as the tests create and address it.
struct Kind {
    /// What `kubectl` calls it, with its version where it matters.
    resource: &'static str,
    /// The object's YAML with `{name}`, `{labels}` and `{replicas}` to fill in.
    yaml: &'static str,
}

const POD_TEMPLATE: &str = "  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      containers:\n      - name: c\n        image: nginx:alpine\n";

const KINDS: &[Kind] = &[
    Kind {
        resource: "deployments.apps",
        yaml: "apiVersion: apps/v1\nkind: Deployment\n",
    },
    Kind {
        resource: "statefulsets.apps",
        yaml: "apiVersion: apps/v1\nkind: StatefulSet\n",
    },
    Kind {
        resource: "replicasets.apps",
        yaml: "apiVersion: apps/v1\nkind: ReplicaSet\n",
    },
    Kind {
        resource: "clonesets.apps.kruise.io",
        yaml: "apiVersion: apps.kruise.io/v1alpha1\nkind: CloneSet\n",
    },
    Kind {
        resource: "statefulsets.v1alpha1.apps.kruise.io",
        yaml: "apiVersion: apps.kruise.io/v1alpha1\nkind: StatefulSet\n",
    },
    Kind {
        resource: "statefulsets.v1beta1.apps.kruise.io",
        yaml: "apiVersion: apps.kruise.io/v1beta1\nkind: StatefulSet\n",
    },
    Kind {
        resource: "uniteddeployments.apps.kruise.io",
        yaml: "apiVersion: apps.kruise.io/v1alpha1\nkind: UnitedDeployment\n",
    },
];

fn workload_yaml(kind: &Kind, name: &str, protection: &str, replicas: i32) -> String {
    let template = if kind.resource.starts_with("uniteddeployments") {
        // A UnitedDeployment needs only its selector here (no controller runs it).
        "  selector:\n    matchLabels:\n      app: {name}\n".to_string()
    } else {
        POD_TEMPLATE.to_string()
    };
    format!(
        "{}metadata:\n  name: {name}\n  labels:\n    {}: {protection}\nspec:\n  replicas: {replicas}\n{}",
        kind.yaml,
        keys::DELETION_PROTECTION,
        template.replace("{name}", name),
    )
}

/// Cascading with 3 replicas: refused ("replicas 3>0"); scaled to 0: allowed.
async fn cascading_workload(ns: &TestNamespace, kind: &Kind, name: &str) {
    ns.apply(&workload_yaml(kind, name, "Cascading", 3))
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", kind.resource));
    let object = format!("{}/{name}", kind.resource);
    refused(
        &[&object, "-n", &ns.name],
        &format!("{CASCADING}replicas 3>0"),
    )
    .await;
    let (ok, _, err) = kubectl(&[
        "patch",
        &object,
        "-n",
        &ns.name,
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":0}}"#,
    ])
    .await;
    assert!(ok, "{object}: {err}");
    deleted(&[&object, "-n", &ns.name]).await;
}

/// Always, whatever the replicas (0 here): refused until the label goes.
async fn always_workload(ns: &TestNamespace, kind: &Kind, name: &str) {
    ns.apply(&workload_yaml(kind, name, "Always", 0))
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", kind.resource));
    let object = format!("{}/{name}", kind.resource);
    refused(&[&object, "-n", &ns.name], ALWAYS).await;
    label(&[&object, "-n", &ns.name], None).await;
    deleted(&[&object, "-n", &ns.name]).await;
}

// P3: Deployment, StatefulSet, ReplicaSet, CloneSet, Advanced StatefulSet (v1alpha1 and
// v1beta1) and UnitedDeployment, Cascading and Always, all at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_cascading_on_replicas_and_always() {
    let ns = TestNamespace::new("prot-wl").await;
    let _ctl = protection(&ns).await;
    let cases = KINDS.iter().enumerate().flat_map(|(i, kind)| {
        let ns = &ns;
        [
            futures::future::Either::Left(async move {
                cascading_workload(ns, kind, &format!("casc-{i}")).await
            }),
            futures::future::Either::Right(async move {
                always_workload(ns, kind, &format!("always-{i}")).await
            }),
        ]
    });
    futures::future::join_all(cases).await;

    // The refusal is a 403, also through the API (not only kubectl's wording).
    ns.apply(&workload_yaml(&KINDS[0], "api", "Always", 1))
        .await
        .unwrap();
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = ns.api();
    match deployments.delete("api", &DeleteParams::default()).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 403, "{e:?}");
            assert!(e.message.contains(ALWAYS), "{e:?}");
        }
        other => panic!("the delete must be refused with 403: {other:?}"),
    }
    for object in ["deployments.apps/api", "service/probe"] {
        label(&[object, "-n", &ns.name], None).await;
    }
}

// Service and Ingress: Always only. Advanced DaemonSet: Always. An object already being
// deleted is always allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_ingresses_and_terminating_objects() {
    let ns = TestNamespace::new("prot-svc").await;
    let _ctl = protection(&ns).await;

    ns.apply(&service_yaml("svc-always", "Always"))
        .await
        .unwrap();
    refused(&["service/svc-always", "-n", &ns.name], ALWAYS).await;
    ns.apply(&service_yaml("svc-casc", "Cascading"))
        .await
        .unwrap();
    deleted(&["service/svc-casc", "-n", &ns.name]).await;

    let ingress = |name: &str, protection: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  labels:\n    {}: {protection}\nspec:\n  defaultBackend:\n    service:\n      name: svc-always\n      port:\n        number: 80\n",
            keys::DELETION_PROTECTION
        )
    };
    ns.apply(&ingress("ing-always", "Always")).await.unwrap();
    refused(
        &["ingresses.networking.k8s.io/ing-always", "-n", &ns.name],
        ALWAYS,
    )
    .await;
    ns.apply(&ingress("ing-casc", "Cascading")).await.unwrap();
    deleted(&["ingresses.networking.k8s.io/ing-casc", "-n", &ns.name]).await;

    ns.apply(&format!(
        "apiVersion: apps.kruise.io/v1alpha1\nkind: DaemonSet\nmetadata:\n  name: ds\n  labels:\n    {}: Always\nspec:\n{}",
        keys::DELETION_PROTECTION,
        POD_TEMPLATE.replace("{name}", "ds")
    ))
    .await
    .unwrap();
    refused(&["daemonsets.apps.kruise.io/ds", "-n", &ns.name], ALWAYS).await;

    // Terminating: a Deployment held by a finalizer, deleted, then labelled Always: a
    // second delete is still allowed (nothing more to protect), and it goes once the
    // finalizer does.
    ns.apply(&format!(
        "{}metadata:\n  name: held\n  finalizers: [e2e.kruise.io/hold]\n  labels:\n    {}: Cascading\nspec:\n  replicas: 0\n{}",
        KINDS[0].yaml,
        keys::DELETION_PROTECTION,
        POD_TEMPLATE.replace("{name}", "held")
    ))
    .await
    .unwrap();
    deleted(&["deployments.apps/held", "-n", &ns.name]).await;
    label(&["deployments.apps/held", "-n", &ns.name], Some("Always")).await;
    deleted(&["deployments.apps/held", "-n", &ns.name]).await;
    let (ok, _, err) = kubectl(&[
        "patch",
        "deployments.apps/held",
        "-n",
        &ns.name,
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ])
    .await;
    assert!(ok, "{err}");

    // Clean up what stays protected, so the namespace goes with the test.
    for object in [
        "service/svc-always",
        "service/probe",
        "ingresses.networking.k8s.io/ing-always",
        "daemonsets.apps.kruise.io/ds",
    ] {
        label(&[object, "-n", &ns.name], None).await;
    }
}
