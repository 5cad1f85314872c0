//! Advanced DaemonSet (`apps.kruise.io/v1alpha1`) on the real cluster: the
//! scenarios of docs/advanced-daemonset.md and a few subtle cases. Each test has its own namespace
//! and its own in-process controller.
//!
//! The cluster's 4 kwok nodes (`type=kwok`) are shared with every other test running in
//! parallel: they are never tainted, labelled or deleted here. A test that needs a node
//! of its own adds one ([`OwnNode`]) carrying the taint `e2e.kruise.io/owner=<ns>:NoSchedule`
//! (so no other test's Pods land on it) and the label `e2e.kruise.io/owner=<ns>`; its
//! DaemonSets tolerate that taint. Which nodes a DaemonSet should cover is computed
//! from the live node list with the controller's own eligibility rules, so nodes other
//! tests add (tainted with their own namespace) never count.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec};
use kruise_api::apps_v1alpha1::DaemonSet;
use kruise_e2e::{
    RunningController, TestNamespace, events_in, is_ready, kubectl_async, wait_events, wait_for,
};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(90);
pub(crate) const OWNER: &str = "e2e.kruise.io/owner";
const OLD_IMAGE: &str = "nginx:1.7.9";
const NEW_IMAGE: &str = "nginx:1.9.1";

async fn controller(ns: &TestNamespace) -> RunningController {
    // RUST_LOG=daemonset_ctl=debug,kruise_workload=debug shows what it decided.
    if std::env::var_os("RUST_LOG").is_some() {
        kruise_runtime::telemetry::init(kruise_runtime::settings::LogFormat::Text);
    }
    let ctl =
        RunningController::start(daemonset_ctl::IDENTITY, &ns.name, "", daemonset_ctl::run).await;
    let probe: DaemonSet = serde_json::from_value(daemonset("probe", ns, json!({}))).unwrap();
    kruise_e2e::wait_webhook_effective(&ns.api(), &probe, |d: &DaemonSet| {
        d.spec.burst_replicas.is_some()
    })
    .await;
    ctl
}

/// A DaemonSet `name` (Pods labelled `app=<name>`, one nginx container at
/// nginx:1.7.9) on the shared kwok nodes and this test's own nodes (required node
/// affinity `type In [kwok]` OR `e2e.kruise.io/owner In [<ns>]`, tolerating the
/// owner taint). `spec` is merged over the spec.
fn daemonset(name: &str, ns: &TestNamespace, spec: Value) -> Value {
    let mut ds = json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "minReadySeconds": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "type", "operator": "In", "values": ["kwok"]}]},
                            {"matchExpressions": [{"key": OWNER, "operator": "In", "values": [ns.name]}]}
                        ]
                    }}},
                    "tolerations": [{"key": OWNER, "operator": "Equal", "value": ns.name, "effect": "NoSchedule"}],
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "nginx", "image": OLD_IMAGE}]
                }
            }
        }
    });
    merge(&mut ds["spec"], spec);
    ds
}

fn merge(into: &mut Value, from: Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

async fn create(ns: &TestNamespace, ds: Value) -> DaemonSet {
    let ds: DaemonSet = serde_json::from_value(ds).unwrap();
    ns.api::<DaemonSet>()
        .create(&PostParams::default(), &ds)
        .await
        .expect("create DaemonSet")
}

async fn patch_spec(ns: &TestNamespace, name: &str, spec: Value) {
    ns.api::<DaemonSet>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec})),
        )
        .await
        .expect("patch DaemonSet");
}

fn image_patch(image: &str) -> Value {
    json!({"template": {"spec": {"containers": [{"name": "nginx", "image": image}]}}})
}

/// The nodes the DaemonSet should run on now, by the controller's own rules.
async fn eligible_nodes(ns: &TestNamespace, ds: &DaemonSet) -> BTreeSet<String> {
    let nodes: Api<Node> = Api::all(ns.client.clone());
    let template: PodSpec = ds.spec.template.spec.clone().unwrap_or_default();
    nodes
        .list(&ListParams::default())
        .await
        .expect("list nodes")
        .items
        .iter()
        .filter(|n| daemonset_ctl::plan::eligibility(&template, n).should_run)
        .map(|n| n.name_any())
        .collect()
}

/// The DaemonSet's live Pods (not terminating), by node.
async fn pods_by_node(ns: &TestNamespace, name: &str) -> BTreeMap<String, Vec<Pod>> {
    let mut by_node: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
    for pod in kruise_e2e::pods_with(ns, &format!("app={name}")).await {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        by_node.entry(node).or_default().push(pod);
    }
    by_node
}

fn image_of(pod: &Pod) -> &str {
    pod.spec.as_ref().unwrap().containers[0]
        .image
        .as_deref()
        .unwrap_or_default()
}

fn status_image(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map(|c| c.image.clone())
        .unwrap_or_default()
}

/// Waits until every eligible node runs exactly one Ready Pod (and no other node runs
/// one) and the status says so; `image_on(node)` is the image each node's Pod must run.
/// Returns the Pods by node.
async fn wait_settled(
    ns: &TestNamespace,
    name: &str,
    image_on: impl Fn(&str) -> &'static str,
) -> BTreeMap<String, Pod> {
    let api: Api<DaemonSet> = ns.api();
    wait_for(&format!("DaemonSet {name} to settle"), TIMEOUT, || async {
        let ds = api.get(name).await.map_err(|e| e.to_string())?;
        let want = eligible_nodes(ns, &ds).await;
        let pods = pods_by_node(ns, name).await;
        let on: BTreeSet<String> = pods.keys().cloned().collect();
        if on != want {
            return Err(format!("Pods on {on:?}, want {want:?}"));
        }
        let mut out = BTreeMap::new();
        for (node, list) in pods {
            let [pod] = &list[..] else {
                return Err(format!("{} Pods on {node}", list.len()));
            };
            if !is_ready(pod) || status_image(pod) != image_on(&node) {
                return Err(format!(
                    "{} on {node}: ready {}, image {}",
                    pod.name_any(),
                    is_ready(pod),
                    status_image(pod)
                ));
            }
            out.insert(node, pod.clone());
        }
        let s = ds.status.clone().unwrap_or_default();
        let n = want.len() as i32;
        let counts = (
            s.desired_number_scheduled,
            s.current_number_scheduled,
            s.number_ready,
            s.number_available,
        );
        if ds.metadata.generation != Some(s.observed_generation) || counts != (n, n, n, n) {
            return Err(format!("status {s:?}, want {n} everywhere"));
        }
        Ok(out)
    })
    .await
}

/// Pod names the controller reported as created, in order.
async fn created_events(ns: &TestNamespace, name: &str) -> Vec<String> {
    events_in(ns, name)
        .await
        .into_iter()
        .filter(|e| {
            e.reason == "SuccessfulCreate" && e.reporting_controller == "daemonset-controller"
        })
        .filter_map(|e| e.note.strip_prefix("Created pod: ").map(str::to_string))
        .collect()
}

/// A kwok node of this test only: tainted `e2e.kruise.io/owner=<ns>:NoSchedule`,
/// labelled `e2e.kruise.io/owner=<ns>`. Deleted on drop.
pub(crate) struct OwnNode {
    name: String,
    api: Api<Node>,
}

impl OwnNode {
    pub(crate) async fn add(ns: &TestNamespace, suffix: &str) -> Self {
        let name = format!("{}-{suffix}", ns.name);
        let api: Api<Node> = Api::all(ns.client.clone());
        let taint = json!({"key": OWNER, "value": ns.name, "effect": "NoSchedule"});
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    OWNER: ns.name,
                },
            },
            "spec": {"taints": [taint]},
        }))
        .unwrap();
        api.create(&PostParams::default(), &node)
            .await
            .expect("create node");
        let own = OwnNode { name, api };
        // The TaintNodesByCondition admission marks a new node not-ready (NoSchedule);
        // no node lifecycle controller runs here to lift it once kwok reports Ready.
        wait_for("the node to be Ready", TIMEOUT, || async {
            let node = own.api.get(&own.name).await.map_err(|e| e.to_string())?;
            let ready = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready {
                Ok(())
            } else {
                Err("not Ready".into())
            }
        })
        .await;
        own.set_taints(vec![taint_of(&ns.name, "NoSchedule")]).await;
        own
    }

    async fn set_taints(&self, taints: Vec<Value>) {
        self.api
            .patch(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"taints": taints}})),
            )
            .await
            .expect("patch node taints");
    }
}

fn taint_of(ns: &str, effect: &str) -> Value {
    json!({"key": OWNER, "value": ns, "effect": effect})
}

impl Drop for OwnNode {
    fn drop(&mut self) {
        let _ = kruise_e2e::kubectl(&["delete", "node", &self.name, "--wait=false"], None);
    }
}

/// Creating examples/advanced-daemonset-nginx.yaml: one Pod per eligible node, each created through the
/// scheduler and reported `Created pod: <name>`; `kubectl get daemon` shows upstream's
/// printer columns; a node added later gets a Pod, one that gains an untolerated NoExecute
/// taint loses it, and one that goes away takes its Pod with it.
#[tokio::test]
async fn daemonset_runs_one_pod_per_node_as_nodes_come_and_go() {
    let ns = TestNamespace::new("ds-nodes").await;
    let _ctl = controller(&ns).await;
    create(&ns, daemonset("nginx", &ns, json!({}))).await;
    let pods = wait_settled(&ns, "nginx", |_| OLD_IMAGE).await;
    assert!(pods.len() >= 4, "the 4 shared kwok nodes: {pods:?}");
    for (node, pod) in &pods {
        assert!(pod.name_any().starts_with("nginx-"));
        let unbound = Pod {
            spec: pod.spec.clone().map(|mut s| {
                s.node_name = None;
                s
            }),
            ..Default::default()
        };
        // As the controller's cache sees it.
        let unbound = kruise_api::pod::Pod::from(&unbound);
        let pinned = daemonset_ctl::plan::target_node(&unbound);
        assert_eq!(
            pinned,
            Some(node.as_str()),
            "matchFields metadata.name term"
        );
    }
    let names: BTreeSet<String> = pods.values().map(|p| p.name_any()).collect();
    wait_for("a Created event per Pod", TIMEOUT, || async {
        let created: BTreeSet<String> = created_events(&ns, "nginx").await.into_iter().collect();
        if created == names {
            Ok(())
        } else {
            Err(format!("{created:?}"))
        }
    })
    .await;
    let (ok, out, err) = kubectl_async(
        vec!["get".into(), "daemon".into(), "-n".into(), ns.name.clone()],
        None,
    )
    .await;
    assert!(ok, "{err}");
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE"
        ]
    );

    // A new node gets its Pod.
    let extra = OwnNode::add(&ns, "a").await;
    let pods = wait_settled(&ns, "nginx", |_| OLD_IMAGE).await;
    assert!(pods.contains_key(&extra.name), "{:?}", pods.keys());

    // NoSchedule only: the Pod stays. NoExecute: it goes.
    let other = json!({"key": "e2e.kruise.io/evict", "value": ns.name, "effect": "NoSchedule"});
    extra
        .set_taints(vec![taint_of(&ns.name, "NoSchedule"), other])
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(pods_by_node(&ns, "nginx").await.contains_key(&extra.name));
    let evict = json!({"key": "e2e.kruise.io/evict", "value": ns.name, "effect": "NoExecute"});
    extra
        .set_taints(vec![taint_of(&ns.name, "NoSchedule"), evict])
        .await;
    let pods = wait_settled(&ns, "nginx", |_| OLD_IMAGE).await;
    assert!(!pods.contains_key(&extra.name));
    let api: Api<DaemonSet> = ns.api();
    wait_for("no misscheduled Pod", TIMEOUT, || async {
        let s = api.get("nginx").await.unwrap().status.unwrap_or_default();
        if s.number_misscheduled == 0 {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;

    // A second node, then gone: its Pod goes with it.
    let gone = OwnNode::add(&ns, "b").await;
    let pods = wait_settled(&ns, "nginx", |_| OLD_IMAGE).await;
    assert!(pods.contains_key(&gone.name));
    drop(gone);
    let pods = wait_settled(&ns, "nginx", |_| OLD_IMAGE).await;
    assert!(
        pods.keys()
            .all(|n| !n.starts_with(&ns.name) || n == &extra.name)
    );
}

/// A nodeSelector in the template limits the nodes.
#[tokio::test]
async fn daemonset_template_node_selector_limits_the_nodes() {
    let ns = TestNamespace::new("ds-selector").await;
    let _ctl = controller(&ns).await;
    let spec =
        json!({"template": {"spec": {"nodeSelector": {"topology.kubernetes.io/zone": "zone-a"}}}});
    create(&ns, daemonset("zoned", &ns, spec)).await;
    let pods = wait_settled(&ns, "zoned", |_| OLD_IMAGE).await;
    let nodes: Api<Node> = Api::all(ns.client.clone());
    assert!(!pods.is_empty());
    for node in pods.keys() {
        let labels = nodes.get(node).await.unwrap().labels().clone();
        assert_eq!(
            labels
                .get("topology.kubernetes.io/zone")
                .map(String::as_str),
            Some("zone-a")
        );
    }
}

/// Canary by node selector: with `rollingUpdate.selector` on
/// `kubernetes.io/hostname`, only that node's Pod is replaced (Deleted, then Created).
#[tokio::test]
async fn daemonset_rolling_update_selector_updates_only_that_node() {
    let ns = TestNamespace::new("ds-canary").await;
    let _ctl = controller(&ns).await;
    create(&ns, daemonset("nginx", &ns, json!({}))).await;
    let before = wait_settled(&ns, "nginx", |_| OLD_IMAGE).await;
    let mut spec = image_patch(NEW_IMAGE);
    merge(
        &mut spec,
        json!({"updateStrategy": {"rollingUpdate": {"selector": {"matchLabels": {"kubernetes.io/hostname": "kwok-node-1"}}}}}),
    );
    patch_spec(&ns, "nginx", spec).await;
    let after = wait_settled(&ns, "nginx", |node| {
        if node == "kwok-node-1" {
            NEW_IMAGE
        } else {
            OLD_IMAGE
        }
    })
    .await;
    // Stays that way.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let again = wait_settled(&ns, "nginx", |node| {
        if node == "kwok-node-1" {
            NEW_IMAGE
        } else {
            OLD_IMAGE
        }
    })
    .await;
    for (node, pod) in &before {
        let same = after[node].uid() == pod.uid() && again[node].uid() == pod.uid();
        assert_eq!(same, node != "kwok-node-1", "{node}");
    }
    let replaced = before["kwok-node-1"].name_any();
    let created = after["kwok-node-1"].name_any();
    let (deleted, created) = (
        format!("Deleted pod: {replaced}"),
        format!("Created pod: {created}"),
    );
    wait_events(&ns, "nginx", "the Deleted and Created events", |events| {
        events.iter().any(|e| e.note == deleted) && events.iter().any(|e| e.note == created)
    })
    .await;
    let ds: DaemonSet = ns.api().get("nginx").await.unwrap();
    assert_eq!(ds.status.unwrap().updated_number_scheduled, 1);
}

/// `partition` and `paused`: nothing moves while paused; unpaused, all but
/// `partition` nodes move to the new revision, and no more.
#[tokio::test]
async fn daemonset_partition_keeps_old_pods_and_paused_stops_the_rollout() {
    let ns = TestNamespace::new("ds-partition").await;
    let _ctl = controller(&ns).await;
    create(&ns, daemonset("nginx", &ns, json!({}))).await;
    let before = wait_settled(&ns, "nginx", |_| OLD_IMAGE).await;
    let mut spec = image_patch(NEW_IMAGE);
    merge(
        &mut spec,
        json!({"updateStrategy": {"rollingUpdate": {"partition": 2, "paused": true, "maxUnavailable": 2}}}),
    );
    patch_spec(&ns, "nginx", spec).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let paused = wait_settled(&ns, "nginx", |_| OLD_IMAGE).await;
    for (node, pod) in &before {
        assert_eq!(paused[node].uid(), pod.uid(), "{node} moved while paused");
    }
    let ds: DaemonSet = ns.api().get("nginx").await.unwrap();
    let status = ds.status.unwrap();
    assert_eq!(status.updated_number_scheduled, 0);
    assert_ne!(status.daemon_set_hash, "");

    patch_spec(
        &ns,
        "nginx",
        json!({"updateStrategy": {"rollingUpdate": {"paused": false}}}),
    )
    .await;
    let count_new = |pods: &BTreeMap<String, Pod>| {
        pods.values()
            .filter(|p| status_image(p) == NEW_IMAGE)
            .count()
    };
    let desired = before.len();
    wait_for("all but 2 nodes updated", TIMEOUT, || async {
        let pods = pods_by_node(&ns, "nginx").await;
        let single: BTreeMap<String, Pod> = pods
            .into_iter()
            .filter_map(|(n, mut l)| (l.len() == 1).then(|| (n, l.remove(0))))
            .collect();
        let ready_new = single
            .values()
            .filter(|p| status_image(p) == NEW_IMAGE && is_ready(p))
            .count();
        if ready_new == desired - 2 && single.len() == desired {
            Ok(())
        } else {
            Err(format!("{ready_new} updated of {desired}"))
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pods: BTreeMap<String, Pod> = pods_by_node(&ns, "nginx")
        .await
        .into_iter()
        .map(|(n, mut l)| (n, l.remove(0)))
        .collect();
    assert_eq!(count_new(&pods), desired - 2, "partition keeps 2 old");
    // The last nodes by name are the ones updated (walked from the last).
    let updated: Vec<&String> = pods
        .iter()
        .filter(|(_, p)| status_image(p) == NEW_IMAGE)
        .map(|(n, _)| n)
        .collect();
    let names: Vec<&String> = pods.keys().collect();
    assert_eq!(updated, names[2..].to_vec());
}

/// In place (examples/advanced-daemonset-nginx-inplace.yaml): `InPlaceIfPossible` Pods carry the `InPlaceUpdateReady` gate and
/// an image change keeps their names and UIDs (restartCount 1 through the kwok stage),
/// node by node, with the events of docs/advanced-daemonset.md.
#[tokio::test]
async fn daemonset_in_place_if_possible_keeps_pod_uids() {
    let ns = TestNamespace::new("ds-inplace").await;
    let _ctl = controller(&ns).await;
    let spec =
        json!({"updateStrategy": {"rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible"}}});
    create(&ns, daemonset("nginx", &ns, spec)).await;
    let before = wait_settled(&ns, "nginx", |_| OLD_IMAGE).await;
    for pod in before.values() {
        let gates = pod
            .spec
            .as_ref()
            .unwrap()
            .readiness_gates
            .clone()
            .unwrap_or_default();
        assert!(
            gates
                .iter()
                .any(|g| g.condition_type == "InPlaceUpdateReady")
        );
    }
    patch_spec(&ns, "nginx", image_patch(NEW_IMAGE)).await;
    let after = wait_settled(&ns, "nginx", |_| NEW_IMAGE).await;
    for (node, pod) in &before {
        let now = &after[node];
        assert_eq!(
            (now.name_any(), now.uid()),
            (pod.name_any(), pod.uid()),
            "{node}"
        );
        assert_eq!(image_of(now), NEW_IMAGE);
        let restarts = now
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0]
            .restart_count;
        assert_eq!(restarts, 1, "{node}");
        // Done as OpenKruise leaves it: True, and the start's reason gone (kruise-manager
        // rewrites any other form when it takes over).
        let ready = now
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "InPlaceUpdateReady"))
            .cloned()
            .unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason, ready.message),
            ("True", None, None),
            "{node}"
        );
    }
    // Each revision carries the hash its Pods do under `controller-revision-hash`, as
    // OpenKruise's DaemonSet revisions do: one without it would get its *name* there from
    // kruise-manager, and every Pod would be recreated when it takes over.
    let revisions: Api<ControllerRevision> = ns.api();
    let labelled: BTreeSet<String> = revisions
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|r| r.labels().get("controller-revision-hash").cloned())
        .collect();
    for pod in after.values() {
        let hash = &pod.labels()["controller-revision-hash"];
        assert!(labelled.contains(hash), "{hash} not in {labelled:?}");
    }
    let notes: Vec<String> = before
        .values()
        .map(|pod| format!("successfully update pod {} in-place", pod.name_any()))
        .collect();
    let limit = format!(
        "{}/nginx number of unavailable DaemonSet pods: 1, is equal to or exceeds allowed maximum: 1",
        ns.name
    );
    let events = wait_events(&ns, "nginx", "the in-place and limit events", |events| {
        notes.iter().all(|note| {
            events
                .iter()
                .any(|e| e.reason == "SuccessfulUpdatePodInPlace" && &e.note == note)
        }) && events.iter().any(|e| {
            e.type_ == "Warning"
                && e.reason == "numUnavailable >= maxUnavailable"
                && e.note.starts_with(&limit)
        })
    })
    .await;
    assert!(
        !events.iter().any(|e| e.reason == "SuccessfulDelete"),
        "{events:?}"
    );
}

/// The deprecated `Surging` type (stored as Standard with maxSurge 1): on each node the new Pod
/// comes up before the old one goes; no node is ever without a Pod.
#[tokio::test]
async fn daemonset_surging_brings_the_new_pod_up_before_deleting_the_old() {
    let ns = TestNamespace::new("ds-surge").await;
    let _ctl = controller(&ns).await;
    let spec = json!({"updateStrategy": {"rollingUpdate": {"rollingUpdateType": "Surging"}}});
    create(&ns, daemonset("nginx", &ns, spec)).await;
    let before = wait_settled(&ns, "nginx", |_| OLD_IMAGE).await;
    let ds: DaemonSet = ns.api().get("nginx").await.unwrap();
    let ru = ds.spec.update_strategy.rolling_update.clone().unwrap();
    assert_eq!(
        serde_json::to_value(&ru).unwrap(),
        json!({"rollingUpdateType": "Standard", "maxSurge": 1, "maxUnavailable": 0})
    );
    patch_spec(&ns, "nginx", image_patch(NEW_IMAGE)).await;
    let mut surged = 0;
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let pods = pods_by_node(&ns, "nginx").await;
        for node in before.keys() {
            let list = pods.get(node).map(Vec::as_slice).unwrap_or_default();
            assert!(
                list.iter().any(is_ready),
                "{node} has no Ready Pod: {:?}",
                list.iter().map(|p| p.name_any()).collect::<Vec<_>>()
            );
            if list.len() == 2 {
                surged += 1;
            }
        }
        let done = before.keys().all(|n| {
            pods.get(n).is_some_and(|l| {
                l.len() == 1 && status_image(&l[0]) == NEW_IMAGE && is_ready(&l[0])
            })
        });
        if done {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "rollout did not finish"
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert!(surged > 0, "never saw a new Pod beside an old one");
    wait_settled(&ns, "nginx", |_| NEW_IMAGE).await;
}

/// Lifecycle hooks: a preDelete hook (`markPodNotReady`) holds a Pod chosen for deletion in
/// `PreparingDelete`, NotReady, until its finalizer is removed; `inPlaceUpdate` hooks
/// are refused by admission.
#[tokio::test]
async fn daemonset_pre_delete_hook_holds_the_deletion() {
    let ns = TestNamespace::new("ds-predelete").await;
    let ctl = controller(&ns).await;
    const HOLD: &str = "e2e.kruise.io/hold";
    let refused = daemonset(
        "refused",
        &ns,
        json!({"lifecycle": {"inPlaceUpdate": {"finalizersHandler": [HOLD]}}}),
    );
    let err = ns
        .api::<DaemonSet>()
        .create(
            &PostParams::default(),
            &serde_json::from_value(refused).unwrap(),
        )
        .await
        .expect_err("inPlaceUpdate hook refused");
    assert!(
        err.to_string().contains(
            "spec.lifecycle.inPlaceUpdate: Forbidden: inPlaceUpdate hook has not supported yet"
        ),
        "{err}"
    );

    let spec = json!({
        "lifecycle": {"preDelete": {"finalizersHandler": [HOLD], "markPodNotReady": true}},
        "template": {"metadata": {"finalizers": [HOLD]}},
        "updateStrategy": {"rollingUpdate": {"selector": {"matchLabels": {"kubernetes.io/hostname": "kwok-node-2"}}}},
    });
    create(&ns, daemonset("nginx", &ns, spec)).await;
    let before = wait_settled(&ns, "nginx", |_| OLD_IMAGE).await;
    let held = before["kwok-node-2"].name_any();
    patch_spec(&ns, "nginx", image_patch(NEW_IMAGE)).await;
    let pods: Api<Pod> = ns.api();
    wait_for(
        "the Pod to be PreparingDelete and NotReady",
        TIMEOUT,
        || async {
            let pod = pods.get(&held).await.map_err(|e| e.to_string())?;
            let state = pod.labels().get("lifecycle.apps.kruise.io/state").cloned();
            if state.as_deref() == Some("PreparingDelete") && !is_ready(&pod) {
                Ok(())
            } else {
                Err(format!("state {state:?}, ready {}", is_ready(&pod)))
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pod = pods.get(&held).await.unwrap();
    assert!(
        pod.metadata.deletion_timestamp.is_none(),
        "held by the hook"
    );

    // The hook lets go: the Pod is deleted and the node gets a new one.
    pods.patch(
        &held,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    wait_settled(&ns, "nginx", |node| {
        if node == "kwok-node-2" {
            NEW_IMAGE
        } else {
            OLD_IMAGE
        }
    })
    .await;

    // Clean up: no Pod may keep the namespace alive.
    ctl.stop().await;
    let _ = ns
        .api::<DaemonSet>()
        .delete("nginx", &DeleteParams::default())
        .await;
    for pod in pods.list(&ListParams::default()).await.unwrap().items {
        let _ = pods
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"finalizers": null}})),
            )
            .await;
    }
}

/// A daemon Pod that fails is deleted (Warning FailedDaemonPod) and
/// replaced, with a per-node exponential backoff (1 s, 2 s, 4 s, …), not in a hot loop.
/// The kwok stage `pod-finish-scripted` fails a Pod annotated
/// `e2e.kruise.io/exit-code` after a second.
#[tokio::test]
async fn daemonset_failed_pods_are_replaced_with_backoff() {
    let ns = TestNamespace::new("ds-failed").await;
    let _ctl = controller(&ns).await;
    let spec = json!({"template": {
        "metadata": {"annotations": {"e2e.kruise.io/exit-code": "1"}},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "kwok-node-0"}}
    }});
    create(&ns, daemonset("crashy", &ns, spec)).await;
    let failed = || async {
        events_in(&ns, "crashy")
            .await
            .into_iter()
            .filter(|e| {
                e.type_ == "Warning"
                    && e.reason == "FailedDaemonPod"
                    && e.note
                        .starts_with(&format!("Found failed daemon pod {}/crashy-", ns.name))
                    && e.note
                        .ends_with(" on node kwok-node-0, will try to kill it")
            })
            .count()
    };
    wait_for("a failed Pod to be reported", TIMEOUT, || async {
        if failed().await >= 1 {
            Ok(())
        } else {
            Err("none yet".to_string())
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    // Without backoff a Pod failing a second after it starts is killed about every 1.5 s
    // (8 or more in 12 s); with it, after 1 + 2 + 4 s waits at most 5.
    let n = failed().await;
    assert!((2..=5).contains(&n), "{n} FailedDaemonPod events in ~13 s");
    let created = created_events(&ns, "crashy").await.len();
    assert!(
        created >= n,
        "each failed Pod was replaced: {created} created"
    );
}
