//! `kubectl kruise migrate` and `kubectl kruise expose` against the local cluster: a
//! Deployment's Pods moved to a CloneSet one at a time while a sampler checks that they
//! stay available, and a Service for a CloneSet whose EndpointSlices list its Pods.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_e2e::{TestNamespace, is_ready, pods_with, wait_for};
use kube::api::{Api, ListParams};
use serde_json::json;

use crate::cli::{cloneset_controller, cloneset_yaml, refused, run};

const MINUTE: Duration = Duration::from_secs(60);

fn deployment_yaml(name: &str, replicas: i32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels:
    team: shop
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
      - name: nginx
        image: nginx:alpine
        ports:
        - containerPort: 80
"#
    )
}

/// (ready, all) Pods labelled `app=<app>`, terminating ones included in both.
async fn count(api: &Api<Pod>, app: &str) -> (usize, usize) {
    let pods = api
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list pods")
        .items;
    (pods.iter().filter(|p| is_ready(p)).count(), pods.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_moves_a_deployments_pods_to_a_cloneset_keeping_them_available() {
    let ns = TestNamespace::new("cli-migrate").await;
    let _ctl = cloneset_controller(&ns).await;
    ns.apply(&deployment_yaml("web", 4)).await.expect("apply");
    let pods: Api<Pod> = ns.api();
    wait_for("the Deployment's 4 Pods to be ready", MINUTE, || async {
        match count(&pods, "web").await {
            (4, 4) => Ok(()),
            seen => Err(format!("{seen:?}")),
        }
    })
    .await;

    let out = run(
        &ns,
        &[
            "migrate",
            "CloneSet",
            "--from",
            "Deployment",
            "--src-name",
            "web",
            "--create",
        ],
    )
    .await;
    assert_eq!(
        out,
        "Successfully created from Deployment/web to CloneSet/web\n"
    );
    let cs: CloneSet = ns.api().get("web").await.unwrap();
    assert_eq!(
        cs.spec.replicas,
        Some(0),
        "created without --copy: 0 replicas"
    );
    assert_eq!(
        serde_json::to_value(&cs.spec.selector).unwrap(),
        json!({"matchLabels": {"app": "web"}})
    );
    let err = refused(
        &ns,
        &[
            "migrate",
            "CloneSet",
            "--from",
            "Deployment",
            "--src-name",
            "web",
            "--create",
        ],
    )
    .await;
    assert!(
        err.ends_with("clonesets.apps.kruise.io \"web\" already exists"),
        "{err}"
    );

    // Sample the Pods every ~100 ms while the migration runs.
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn({
        let (pods, stop) = (pods.clone(), stop.clone());
        async move {
            let mut samples = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                samples.push(count(&pods, "web").await);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            samples
        }
    });
    let out = run(
        &ns,
        &[
            "migrate",
            "CloneSet",
            "--from",
            "Deployment",
            "--src-name",
            "web",
            "--dst-name",
            "web",
            "--max-surge",
            "1",
            "--timeout-seconds",
            "180",
        ],
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.await.expect("sampler");
    let mut expected = String::new();
    for step in 1..=4 {
        expected += &format!(
            "Migration progress: Deployment/web scale in {}, CloneSet/web scale out {step}\n",
            step - 1
        );
        expected += &format!(
            "Migration progress: Deployment/web scale in {step}, CloneSet/web scale out {step}\n"
        );
    }
    expected += "Successfully migrated 4 replicas from Deployment/web to CloneSet/web\n";
    assert_eq!(out, expected);
    assert!(samples.len() >= 8, "sampled {} times", samples.len());
    let fewest_ready = samples.iter().map(|s| s.0).min().unwrap();
    let most = samples.iter().map(|s| s.1).max().unwrap();
    assert!(
        fewest_ready >= 3,
        "{fewest_ready} ready Pods at one time: {samples:?}"
    );
    assert!(most <= 5, "{most} Pods at one time: {samples:?}");

    let deployment: Deployment = ns.api().get("web").await.unwrap();
    assert_eq!(deployment.spec.unwrap().replicas, Some(0), "kept, at 0");
    let cs = wait_for(
        "the CloneSet to report 4 available Pods",
        MINUTE,
        || async {
            let cs: CloneSet = ns.api().get("web").await.unwrap();
            let available = cs.status.as_ref().map(|s| s.available_replicas);
            if cs.spec.replicas == Some(4) && available == Some(4) {
                Ok(cs)
            } else {
                Err(format!("{:?} {available:?}", cs.spec.replicas))
            }
        },
    )
    .await;
    let uid = cs.metadata.uid.unwrap();
    let left = pods_with(&ns, "app=web").await;
    assert_eq!(left.len(), 4);
    assert!(
        left.iter()
            .all(|p| p.metadata.owner_references.as_ref().unwrap()[0].uid == uid),
        "every Pod is the CloneSet's"
    );

    let err = refused(
        &ns,
        &[
            "migrate",
            "StatefulSet",
            "--from",
            "Deployment",
            "--src-name",
            "web",
        ],
    )
    .await;
    assert!(
        err.ends_with("error: currently only supported CloneSet as dst type"),
        "{err}"
    );
    let help = kruise_e2e::kubectl_kruise(&ns.name, &["migrate", "--help"])
        .await
        .unwrap_err();
    assert!(help.contains("Pods are replaced, not adopted"), "{help}");
}

#[tokio::test]
async fn expose_makes_a_service_whose_endpoints_are_the_clonesets_pods() {
    let ns = TestNamespace::new("cli-expose").await;
    let _ctl = cloneset_controller(&ns).await;
    ns.apply(&cloneset_yaml("shop", 3)).await.expect("apply");
    let ips: BTreeSet<String> = wait_for("3 ready Pods with IPs", MINUTE, || async {
        let pods = pods_with(&ns, "app=shop").await;
        let ips: BTreeSet<String> = pods
            .iter()
            .filter(|p| is_ready(p))
            .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
            .collect();
        if ips.len() == 3 {
            Ok(ips)
        } else {
            Err(format!("{ips:?}"))
        }
    })
    .await;

    let out = run(
        &ns,
        &[
            "expose",
            "cloneset",
            "shop",
            "--port=80",
            "--target-port=8080",
        ],
    )
    .await;
    assert_eq!(out, "service/shop exposed\n");
    let svc: Service = ns.api().get("shop").await.unwrap();
    let spec = svc.spec.unwrap();
    assert_eq!(
        spec.selector.unwrap().into_iter().collect::<Vec<_>>(),
        [("app".to_string(), "shop".to_string())]
    );
    assert_eq!(
        serde_json::to_value(spec.ports.unwrap()).unwrap(),
        json!([{"port": 80, "protocol": "TCP", "targetPort": 8080}])
    );
    assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));

    let slices: Api<EndpointSlice> = ns.api();
    wait_for(
        "EndpointSlices listing the CloneSet's Pods",
        MINUTE,
        || async {
            let listed: BTreeSet<String> = slices
                .list(&ListParams::default().labels("kubernetes.io/service-name=shop"))
                .await
                .expect("list EndpointSlices")
                .items
                .into_iter()
                .flat_map(|s| s.endpoints)
                .flat_map(|e| e.addresses)
                .collect();
            if listed == ips {
                Ok(())
            } else {
                Err(format!("listed {listed:?}, Pods {ips:?}"))
            }
        },
    )
    .await;

    let out = run(
        &ns,
        &[
            "expose",
            "cloneset/shop",
            "--port=443",
            "--name=shop-np",
            "--type=NodePort",
            "--dry-run=client",
            "-o",
            "yaml",
        ],
    )
    .await;
    assert!(
        out.contains("name: shop-np") && out.contains("type: NodePort"),
        "{out}"
    );
    assert!(
        ns.api::<Service>()
            .get_opt("shop-np")
            .await
            .unwrap()
            .is_none(),
        "a client dry run creates nothing"
    );

    // Errors a user sees: a kind expose does not know, a Pod with no labels to select.
    let err = refused(&ns, &["expose", "configmap/settings", "--port=80"]).await;
    assert!(
        err.contains("doesn't have a resource type \"configmap\" that kubectl kruise can expose"),
        "{err}"
    );
    // The Pod is never scheduled: from Kubernetes 1.35 on (PodTopologyLabelsAdmission, on
    // by default) binding copies the Node's topology.kubernetes.io labels onto the Pod,
    // and the kwok nodes have a zone.
    ns.apply(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: lonely
spec:
  schedulerName: no-such-scheduler
  containers:
  - name: main
    image: busybox
"#,
    )
    .await
    .expect("apply the Pod");
    let err = refused(&ns, &["expose", "pod", "lonely", "--port=80"]).await;
    assert!(
        err.ends_with(
            "error: couldn't retrieve selectors via --selector flag or introspection: Pod \
             \"lonely\" has no labels, so a Service cannot select its Pods: pass --selector"
        ),
        "{err}"
    );
    let err = refused(&ns, &["expose", "cloneset/missing", "--port=80"]).await;
    assert!(
        err.ends_with(
            "Error from server (NotFound): clonesets.apps.kruise.io \"missing\" not found"
        ),
        "{err}"
    );
}
