//! The local cluster itself: CRDs, examples, schema validation, scheduling, the kwok
//! stages our tests rely on, and the real garbage collector.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_e2e::{TestNamespace, client, kubectl, repo_root, wait_for};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

const MINUTE: Duration = Duration::from_secs(60);

fn pod_yaml(name: &str, image: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: main
    image: {image}
  - name: side
    image: busybox:1.34
"#
    )
}

async fn running_ready(pods: &Api<Pod>, name: &str) -> Pod {
    wait_for(&format!("pod {name} Running and Ready"), MINUTE, || async {
        let pod = pods.get(name).await.map_err(|e| e.to_string())?;
        let status = pod.status.clone().unwrap_or_default();
        let ready = status
            .conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if status.phase.as_deref() == Some("Running") && ready {
            Ok(pod)
        } else {
            Err(format!("phase {:?}, ready {ready}", status.phase))
        }
    })
    .await
}

#[tokio::test]
async fn every_crd_installs_and_is_established() {
    let client = client().await;
    let api: Api<CustomResourceDefinition> = Api::all(client);
    let expected = kruise_api::all_crds();
    assert_eq!(expected.len(), 18, "one CRD per kind, as OpenKruise v1.9.0");
    for crd in expected {
        let name = crd.metadata.name.unwrap();
        let live = api
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("CRD {name} missing: {e}"));
        let conditions = live.status.and_then(|s| s.conditions).unwrap_or_default();
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True"),
            "{name} not Established: {conditions:?}"
        );
        assert!(
            !conditions
                .iter()
                .any(|c| c.type_ == "NonStructuralSchema" && c.status == "True"),
            "{name} has a non-structural schema: {conditions:?}"
        );
    }
}

#[tokio::test]
async fn short_names_work_with_kubectl() {
    let ns = TestNamespace::new("shortnames").await;
    for short in [
        "clone",
        "asts",
        "statefulsets.apps.kruise.io",
        "daemon",
        "ads",
        "bcj",
        "acj",
        "crr",
        "pub",
        "ws",
        "ud",
        "distributor",
    ] {
        let (ok, _, err) = kubectl(&["get", short, "-n", &ns.name], None);
        assert!(ok, "kubectl get {short}: {err}");
    }
}

#[tokio::test]
async fn every_example_is_accepted_by_the_apiserver() {
    let ns = TestNamespace::new("examples").await;
    let dir = repo_root().join("examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for file in files {
        let (ok, _, err) = kubectl(
            &[
                "apply",
                "--dry-run=server",
                "-n",
                &ns.name,
                "-f",
                file.to_str().unwrap(),
            ],
            None,
        );
        // A ContainerRecreateRequest is checked against its Pod by crr-ctl's admission
        // (when it runs): the example's Pod is not there, so only that refusal, which
        // comes after the schema, is accepted as well.
        let refused_for_its_pod = file.ends_with("containerrecreaterequest.yaml")
            && err.contains("no found Pod named pod-name");
        assert!(
            ok || refused_for_its_pod,
            "{} rejected by the apiserver: {err}",
            file.display()
        );
    }
}

#[tokio::test]
async fn a_bad_field_type_is_rejected_naming_the_field() {
    let ns = TestNamespace::new("badtype").await;
    let err = ns
        .apply_yaml(
            r#"
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: bad
spec:
  replicas: "abc"
  selector:
    matchLabels: {app: bad}
  template:
    metadata:
      labels: {app: bad}
    spec:
      containers:
      - name: main
        image: nginx:alpine
"#,
        )
        .expect_err("replicas: \"abc\" must be rejected");
    assert!(
        err.contains("spec.replicas"),
        "error does not name the field: {err}"
    );
}

#[tokio::test]
async fn a_plain_pod_is_scheduled_and_becomes_ready() {
    let ns = TestNamespace::new("plainpod").await;
    ns.apply_yaml(&pod_yaml("plain", "nginx:alpine")).unwrap();
    let pods: Api<Pod> = ns.api();
    let pod = running_ready(&pods, "plain").await;
    let node = pod.spec.unwrap().node_name.unwrap_or_default();
    assert!(node.starts_with("kwok-node-"), "scheduled to {node:?}");
    let statuses = pod.status.unwrap().container_statuses.unwrap();
    assert!(
        statuses
            .iter()
            .all(|s| s.ready && s.image_id.contains("@sha256:")),
        "{statuses:?}"
    );
}

#[tokio::test]
async fn patching_a_running_pods_image_updates_only_that_container_status() {
    let ns = TestNamespace::new("inplace").await;
    ns.apply_yaml(&pod_yaml("p", "nginx:alpine")).unwrap();
    let pods: Api<Pod> = ns.api();
    let before = running_ready(&pods, "p").await;
    let uid = before.metadata.uid.clone();
    let old = before.status.unwrap().container_statuses.unwrap();
    pods.patch(
        "p",
        &PatchParams::default(),
        &Patch::Strategic(
            serde_json::json!({"spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}}),
        ),
    )
    .await
    .unwrap();
    let statuses = wait_for(
        "the main container's status to show nginx:1.27",
        MINUTE,
        || async {
            let pod = pods.get("p").await.map_err(|e| e.to_string())?;
            let statuses = pod
                .status
                .and_then(|s| s.container_statuses)
                .unwrap_or_default();
            let main = statuses
                .iter()
                .find(|s| s.name == "main")
                .cloned()
                .ok_or("no main status")?;
            if main.image == "nginx:1.27" {
                Ok(statuses)
            } else {
                Err(format!("main image {}", main.image))
            }
        },
    )
    .await;
    let main = statuses.iter().find(|s| s.name == "main").unwrap();
    let old_main = old.iter().find(|s| s.name == "main").unwrap();
    assert_ne!(
        main.image_id, old_main.image_id,
        "imageID changes with the image"
    );
    assert_eq!(main.restart_count, 1);
    let side = statuses.iter().find(|s| s.name == "side").unwrap();
    assert_eq!(
        side.restart_count, 0,
        "the unchanged container is not restarted"
    );
    let after = running_ready(&pods, "p").await;
    assert_eq!(after.metadata.uid, uid, "same pod");
}

#[tokio::test]
async fn deleting_an_owner_garbage_collects_its_dependents() {
    let ns = TestNamespace::new("gc").await;
    let cms: Api<ConfigMap> = ns.api();
    let owner = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "owner"}})).unwrap(),
        )
        .await
        .unwrap();
    let dependent: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "dependent",
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                "uid": owner.metadata.uid.unwrap(), "controller": true
            }]
        }
    }))
    .unwrap();
    cms.create(&PostParams::default(), &dependent)
        .await
        .unwrap();
    cms.delete("owner", &DeleteParams::default()).await.unwrap();
    wait_for(
        "the garbage collector to delete the dependent",
        MINUTE,
        || async {
            match cms.get_opt("dependent").await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(_) => Err("dependent still exists".into()),
            }
        },
    )
    .await;
}
