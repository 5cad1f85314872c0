//! Benchmarks on the local cluster (`make bench`; ignored by `make test`).
//!
//! CloneSet: 0 → 1000 Pods Ready, then a 1000-Pod in-place image update, with
//! `cloneset-ctl` (release build, as its own process) at the default limits (30 QPS,
//! burst 50, 3 workers) and unthrottled. Advanced StatefulSet: the same with
//! `statefulset-ctl` (1000 replicas, Parallel, in place with maxUnavailable 100), at the
//! default limits. Advanced DaemonSet: `daemonset-ctl` over 1000 kwok nodes created for
//! the bench only (tainted so no other test's Pods land there), 0 → 1000 Ready, then an
//! in-place rollout with maxUnavailable 10%. Reports wall time, API requests by verb per Pod and the controller's
//! peak RSS; prints a table and writes `target/bench/<kind>.json`.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kruise_api::apps_v1alpha1::{CloneSet, DaemonSet};
use kruise_api::apps_v1beta1::StatefulSet;
use kruise_e2e::{TestNamespace, http_get, kubeconfig_path, repo_root, wait_for};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

const PODS: i32 = 1000;
/// Extra kwok nodes so 1000 Pods fit (the cluster's 4 nodes hold ~440).
const EXTRA_NODES: usize = 7;

struct Controller {
    child: Child,
    admin: u16,
}

impl Controller {
    fn start(binary: &str, namespace: &str, qps: f64, burst: u32, admin: u16) -> Self {
        let bin = repo_root().join("target/release").join(binary);
        assert!(
            bin.exists(),
            "build it first: cargo build --release -p {binary} (make bench does)"
        );
        let child = Command::new(bin)
            .env("KUBECONFIG", kubeconfig_path())
            .env("KRUISE_WATCH_NAMESPACE", namespace)
            .env("KRUISE_LEADER_ELECT", "false")
            .env("KRUISE_ADMIN_ADDR", format!("127.0.0.1:{admin}"))
            .env("KRUISE_WEBHOOK_ADDR", "127.0.0.1:0")
            .env("KRUISE_WEBHOOK_URL", "https://127.0.0.1:0")
            .env("KRUISE_KUBE_QPS", qps.to_string())
            .env("KRUISE_KUBE_BURST", burst.to_string())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the controller");
        Controller { child, admin }
    }

    async fn wait_ready(&self) {
        let addr: std::net::SocketAddr = ([127, 0, 0, 1], self.admin).into();
        wait_for("controller ready", Duration::from_secs(60), || async move {
            match http_get(addr, "/readyz").await {
                Ok((200, _)) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }

    /// `kruise_api_requests_total` summed by verb (all resources, all codes).
    async fn requests_by_verb(&self) -> BTreeMap<String, f64> {
        let addr: std::net::SocketAddr = ([127, 0, 0, 1], self.admin).into();
        let text = http_get(addr, "/metrics")
            .await
            .map(|(_, body)| body)
            .unwrap_or_default();
        let mut out = BTreeMap::new();
        for line in text
            .lines()
            .filter(|l| l.starts_with("kruise_api_requests_total{"))
        {
            let verb = line
                .split("verb=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or("?");
            let value: f64 = line
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            *out.entry(verb.to_string()).or_default() += value;
        }
        out
    }

    /// Peak resident set size in MiB (VmHWM).
    fn peak_rss_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .unwrap_or(0.0)
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn delta(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v > 0.0)
        .collect()
}

fn per_pod(requests: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    requests
        .iter()
        .map(|(k, v)| (k.clone(), (v / f64::from(PODS) * 100.0).round() / 100.0))
        .collect()
}

async fn add_nodes(client: &kube::Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 0..EXTRA_NODES {
        let node: Node = serde_json::from_value(json!({
            "metadata": {
                "name": format!("bench-node-{i}"),
                "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {"type": "kwok", "kubernetes.io/hostname": format!("bench-node-{i}"), "topology.kubernetes.io/zone": if i % 2 == 0 { "zone-a" } else { "zone-b" }}
            },
            "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "150"}, "capacity": {"cpu": "32", "memory": "256Gi", "pods": "150"}}
        }))
        .unwrap();
        let _ = nodes.create(&PostParams::default(), &node).await;
    }
    // New nodes are tainted not-ready by admission until a node controller lifts it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for i in 0..EXTRA_NODES {
        let name = format!("bench-node-{i}");
        let _ = nodes
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"taints": null}})),
            )
            .await;
    }
}

async fn remove_nodes(client: &kube::Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    for i in 0..EXTRA_NODES {
        let _ = nodes
            .delete(&format!("bench-node-{i}"), &DeleteParams::default())
            .await;
    }
}

/// What is benchmarked: a binary and the workload it runs.
struct Workload {
    binary: &'static str,
    resource: ApiResource,
    manifest: serde_json::Value,
    /// The status fields counting ready Pods and updated ready (or available) Pods.
    ready_field: &'static str,
    updated_field: &'static str,
}

fn cloneset() -> Workload {
    Workload {
        binary: "cloneset-ctl",
        resource: ApiResource::erase::<CloneSet>(&()),
        manifest: json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
            "metadata": {"name": "bench"},
            "spec": {
                "replicas": PODS,
                "selector": {"matchLabels": {"app": "bench"}},
                "template": {"metadata": {"labels": {"app": "bench"}}, "spec": {"containers": [{"name": "main", "image": "nginx:alpine"}]}},
                "updateStrategy": {"type": "InPlaceIfPossible"}
            }
        }),
        ready_field: "readyReplicas",
        updated_field: "updatedReadyReplicas",
    }
}

fn advanced_statefulset() -> Workload {
    Workload {
        binary: "statefulset-ctl",
        resource: ApiResource::erase::<StatefulSet>(&()),
        manifest: json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
            "metadata": {"name": "bench"},
            "spec": {
                "replicas": PODS,
                "serviceName": "bench",
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"app": "bench"}},
                "template": {"metadata": {"labels": {"app": "bench"}}, "spec": {
                    "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                    "containers": [{"name": "main", "image": "nginx:alpine"}]}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                    "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 100}}
            }
        }),
        ready_field: "readyReplicas",
        updated_field: "updatedReadyReplicas",
    }
}

fn status_count(obj: &DynamicObject, field: &str) -> i64 {
    obj.data["status"][field].as_i64().unwrap_or(0)
}

/// One run: scale 0 → 1000, then update all 1000 in place.
async fn run(
    workload: &Workload,
    label: &str,
    qps: f64,
    burst: u32,
    admin: u16,
) -> serde_json::Value {
    let ns = TestNamespace::new(&format!("bench-{label}")).await;
    let ctl = Controller::start(workload.binary, &ns.name, qps, burst, admin);
    ctl.wait_ready().await;
    let api: Api<DynamicObject> =
        Api::namespaced_with(kruise_e2e::client().await, &ns.name, &workload.resource);
    let obj: DynamicObject = serde_json::from_value(workload.manifest.clone()).unwrap();
    let before = ctl.requests_by_verb().await;
    let started = Instant::now();
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create the workload");
    wait_for("1000 ready", Duration::from_secs(1200), || async {
        let obj = api.get("bench").await.map_err(|e| e.to_string())?;
        let ready = status_count(&obj, workload.ready_field);
        if ready == i64::from(PODS) {
            Ok(())
        } else {
            Err(format!("{ready} ready"))
        }
    })
    .await;
    let scale_secs = started.elapsed().as_secs_f64();
    let after_scale = ctl.requests_by_verb().await;

    let started = Instant::now();
    let patch: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "nginx:1.27"}])).unwrap();
    api.patch("bench", &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .expect("update image");
    wait_for(
        "1000 updated in place",
        Duration::from_secs(1800),
        || async {
            let obj = api.get("bench").await.map_err(|e| e.to_string())?;
            let observed = status_count(&obj, "observedGeneration");
            let updated_ready = status_count(&obj, workload.updated_field);
            let done = observed == obj.metadata.generation.unwrap_or_default()
                && updated_ready == i64::from(PODS)
                && status_count(&obj, workload.ready_field) == i64::from(PODS);
            if done {
                Ok(())
            } else {
                Err(format!("{updated_ready} updated ready"))
            }
        },
    )
    .await;
    let update_secs = started.elapsed().as_secs_f64();
    let after_update = ctl.requests_by_verb().await;
    let scale_requests = delta(&after_scale, &before);
    let update_requests = delta(&after_update, &after_scale);
    let result = json!({
        "run": label,
        "qps": qps,
        "burst": burst,
        "workers": 3,
        "pods": PODS,
        "scale_up_seconds": (scale_secs * 10.0).round() / 10.0,
        "inplace_update_seconds": (update_secs * 10.0).round() / 10.0,
        "scale_up_requests_per_pod": per_pod(&scale_requests),
        "inplace_update_requests_per_pod": per_pod(&update_requests),
        "peak_rss_mib": (ctl.peak_rss_mib() * 10.0).round() / 10.0,
    });
    drop(ctl);
    let _ = api.delete("bench", &DeleteParams::default()).await;
    result
}

fn report(kind: &str, binary: &str, runs: &[serde_json::Value]) {
    println!("\n{kind} benchmark: {PODS} Pods on kwok, {binary} release build, 3 workers");
    println!(
        "{:<12} {:>10} {:>12} {:>14}",
        "limits", "scale (s)", "in-place (s)", "peak RSS MiB"
    );
    for r in runs {
        println!(
            "{:<12} {:>10} {:>12} {:>14}",
            r["run"].as_str().unwrap(),
            r["scale_up_seconds"],
            r["inplace_update_seconds"],
            r["peak_rss_mib"]
        );
    }
    for r in runs {
        println!(
            "{} scale-up requests/pod: {}",
            r["run"].as_str().unwrap(),
            r["scale_up_requests_per_pod"]
        );
        println!(
            "{} in-place requests/pod: {}",
            r["run"].as_str().unwrap(),
            r["inplace_update_requests_per_pod"]
        );
    }
    let dir = repo_root().join("target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    let file = format!("{}.json", kind.to_lowercase().replace(' ', "_"));
    std::fs::write(
        dir.join(&file),
        serde_json::to_string_pretty(&json!({ kind: runs })).unwrap(),
    )
    .unwrap();
    println!("written to target/bench/{file}");
}

#[tokio::test]
#[ignore = "benchmark: make bench"]
async fn bench_cloneset_1000_pods() {
    let client = kruise_e2e::client().await;
    add_nodes(&client).await;
    let w = cloneset();
    let default = run(&w, "default", 30.0, 50, 18801).await;
    let unthrottled = run(&w, "unthrottled", 0.0, 50, 18802).await;
    remove_nodes(&client).await;
    report("CloneSet", w.binary, &[default, unthrottled]);
}

#[tokio::test]
#[ignore = "benchmark: make bench"]
async fn bench_advanced_statefulset_1000_pods() {
    let client = kruise_e2e::client().await;
    add_nodes(&client).await;
    let w = advanced_statefulset();
    let default = run(&w, "default", 30.0, 50, 18803).await;
    remove_nodes(&client).await;
    report("Advanced StatefulSet", w.binary, &[default]);
}

/// Kwok nodes of the DaemonSet bench: labelled `bench-ds=true`, tainted
/// `e2e.kruise.io/owner=bench-ds:NoSchedule` (only the bench's DaemonSet tolerates it),
/// removed on drop.
struct BenchNodes;

const DS_BENCH_OWNER: &str = "bench-ds";

impl BenchNodes {
    async fn add(client: &kube::Client, count: usize) -> Self {
        let nodes: Api<Node> = Api::all(client.clone());
        let taints = json!([{"key": "e2e.kruise.io/owner", "value": DS_BENCH_OWNER, "effect": "NoSchedule"}]);
        let guard = BenchNodes;
        for chunk in (0..count).collect::<Vec<_>>().chunks(50) {
            futures::future::join_all(chunk.iter().map(|i| {
                let nodes = nodes.clone();
                let node: Node = serde_json::from_value(json!({
                    "metadata": {
                        "name": format!("bench-ds-node-{i}"),
                        "annotations": {"kwok.x-k8s.io/node": "fake"},
                        "labels": {"bench-ds": "true", "kubernetes.io/hostname": format!("bench-ds-node-{i}")}
                    },
                    "spec": {"taints": taints},
                    "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"}, "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"}}
                }))
                .unwrap();
                async move { nodes.create(&PostParams::default(), &node).await }
            }))
            .await;
        }
        // Admission adds the not-ready taint to new nodes; no node controller lifts it.
        tokio::time::sleep(Duration::from_secs(5)).await;
        for chunk in (0..count).collect::<Vec<_>>().chunks(50) {
            futures::future::join_all(chunk.iter().map(|i| {
                let nodes = nodes.clone();
                let patch = json!({"spec": {"taints": taints}});
                async move {
                    nodes
                        .patch(
                            &format!("bench-ds-node-{i}"),
                            &PatchParams::default(),
                            &Patch::Merge(patch),
                        )
                        .await
                }
            }))
            .await;
        }
        guard
    }
}

impl Drop for BenchNodes {
    fn drop(&mut self) {
        let _ = kruise_e2e::kubectl(
            &["delete", "nodes", "-l", "bench-ds=true", "--wait=false"],
            None,
        );
    }
}

fn advanced_daemonset() -> Workload {
    Workload {
        binary: "daemonset-ctl",
        resource: ApiResource::erase::<DaemonSet>(&()),
        manifest: json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet",
            "metadata": {"name": "bench"},
            "spec": {
                "selector": {"matchLabels": {"app": "bench"}},
                "template": {"metadata": {"labels": {"app": "bench"}}, "spec": {
                    "nodeSelector": {"bench-ds": "true"},
                    "tolerations": [{"key": "e2e.kruise.io/owner", "operator": "Equal", "value": DS_BENCH_OWNER, "effect": "NoSchedule"}],
                    "containers": [{"name": "main", "image": "nginx:alpine"}]}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                    "rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": "10%"}}
            }
        }),
        ready_field: "numberReady",
        updated_field: "updatedNumberScheduled",
    }
}

#[tokio::test]
#[ignore = "benchmark: make bench"]
async fn bench_advanced_daemonset_1000_nodes() {
    let client = kruise_e2e::client().await;
    let nodes = BenchNodes::add(&client, PODS as usize).await;
    let w = advanced_daemonset();
    let default = run(&w, "default", 30.0, 50, 18804).await;
    drop(nodes);
    report("Advanced DaemonSet", w.binary, &[default]);
}
