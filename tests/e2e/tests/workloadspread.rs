//! WorkloadSpread on the real cluster (docs/workloadspread.md; examples/workloadspread.yaml),
//! on the 4 shared kwok nodes (zone-a: kwok-node-0/1, zone-b: kwok-node-2/3):
//! workloadspread-ctl in-process per namespace, and cloneset-ctl where a CloneSet must
//! create and delete Pods.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::apps_v1alpha1::{CloneSet, InjectWorkloadSpread, WorkloadSpread};
use kruise_api::keys;
use kruise_e2e::{RunningController, TestNamespace, wait_for};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);
const ZONE: &str = "topology.kubernetes.io/zone";

/// workloadspread-ctl scoped to `ns`. Its Pod webhook is in effect once a dry-run Pod
/// controlled by `workload` (`apiVersion`, `kind`, `name`: a WorkloadSpread must target
/// it, or the Deployment owning it) comes back placed.
async fn controller(ns: &TestNamespace, workload: (&str, &str, &str)) -> RunningController {
    controller_with(ns, workload, false).await
}

/// [`controller`] with `KRUISE_WORKLOADSPREAD_EAGER_DELETION_COST` = `eager`.
async fn controller_with(
    ns: &TestNamespace,
    workload: (&str, &str, &str),
    eager: bool,
) -> RunningController {
    let ctl = start_controller_with(ns, eager).await;
    let (api_version, kind, name) = workload;
    let probe: Pod = serde_json::from_value(json!({
        "metadata": {"name": "probe-0", "ownerReferences": [{"apiVersion": api_version, "kind": kind,
            "name": name, "uid": "00000000-0000-0000-0000-000000000000", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "nginx:alpine"}]}
    }))
    .unwrap();
    kruise_e2e::wait_webhook_effective(&ns.api(), &probe, |p: &Pod| {
        p.annotations().contains_key(keys::WS_MATCHED)
    })
    .await;
    ctl
}

/// workloadspread-ctl scoped to `ns`, without waiting for its Pod webhook.
async fn start_controller(ns: &TestNamespace) -> RunningController {
    start_controller_with(ns, false).await
}

/// workloadspread-ctl scoped to `ns` with `KRUISE_WORKLOADSPREAD_EAGER_DELETION_COST` =
/// `eager`, without waiting for its Pod webhook.
async fn start_controller_with(ns: &TestNamespace, eager: bool) -> RunningController {
    if std::env::var_os("RUST_LOG").is_some() {
        kruise_runtime::telemetry::init(kruise_runtime::settings::LogFormat::Text);
    }
    RunningController::start(workloadspread_ctl::IDENTITY, &ns.name, "", move |rt| {
        workloadspread_ctl::run_with(rt, eager)
    })
    .await
}

/// A WorkloadSpread over `target` (`apiVersion`, `kind`, `name`) with `subsets` (YAML
/// list items, indented 2) and `extra` under `spec:`.
fn ws_yaml(name: &str, target: (&str, &str, &str), subsets: &str, extra: &str) -> String {
    let (api_version, kind, target) = target;
    format!(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: WorkloadSpread
metadata:
  name: {name}
spec:
  targetRef:
    apiVersion: {api_version}
    kind: {kind}
    name: {target}
  subsets:
{subsets}{extra}"#
    )
}

/// A subset requiring `zone` (empty: no requirement), with `max` (empty: no cap).
fn subset(name: &str, zone: &str, max: &str) -> String {
    let mut s = format!("  - name: {name}\n");
    if !zone.is_empty() {
        s += &format!(
            "    requiredNodeSelectorTerm:\n      matchExpressions:\n      - key: {ZONE}\n        operator: In\n        values: [{zone}]\n"
        );
    }
    if !max.is_empty() {
        s += &format!("    maxReplicas: {max}\n");
    }
    s
}

fn cloneset_yaml(name: &str, replicas: i32) -> String {
    format!(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: {name}
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
      terminationGracePeriodSeconds: 0
      containers:
      - name: nginx
        image: nginx:alpine
"#
    )
}

async fn zones(ns: &TestNamespace) -> BTreeMap<String, String> {
    let nodes: Api<Node> = Api::all(ns.client.clone());
    nodes
        .list(&Default::default())
        .await
        .expect("nodes")
        .items
        .into_iter()
        .filter_map(|n| Some((n.name_any(), n.labels().get(ZONE)?.clone())))
        .collect()
}

fn node_of(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

fn subset_of(pod: &Pod) -> String {
    pod.annotations()
        .get(keys::WS_MATCHED)
        .and_then(|a| serde_json::from_str::<InjectWorkloadSpread>(a).ok())
        .map(|m| m.subset)
        .unwrap_or_default()
}

fn cost_of(pod: &Pod) -> Option<&str> {
    pod.annotations()
        .get(keys::POD_DELETION_COST)
        .map(String::as_str)
}

/// Waits until the active Pods labelled `app=<app>` number `count`, are all on a node,
/// and `check` holds; returns them.
async fn settled(
    ns: &TestNamespace,
    app: &str,
    count: usize,
    check: impl Fn(&[Pod]) -> bool,
) -> Vec<Pod> {
    wait_for(
        &format!("{count} scheduled Pods of {app}"),
        TIMEOUT,
        || async {
            let pods: Vec<Pod> = kruise_e2e::pods_with(ns, &format!("app={app}"))
                .await
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            if pods.len() == count && pods.iter().all(|p| !node_of(p).is_empty()) && check(&pods) {
                Ok(pods)
            } else {
                Err(format!(
                    "{:?}",
                    pods.iter()
                        .map(|p| (
                            p.name_any(),
                            node_of(p).to_string(),
                            subset_of(p),
                            cost_of(p).map(str::to_string)
                        ))
                        .collect::<Vec<_>>()
                ))
            }
        },
    )
    .await
}

/// Pods per zone of their node.
fn per_zone(pods: &[Pod], zones: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for p in pods {
        *out.entry(zones.get(node_of(p)).cloned().unwrap_or_default())
            .or_insert(0) += 1;
    }
    out
}

/// The WorkloadSpread once `check` holds on its subset statuses (name → (replicas,
/// missingReplicas)) at the current generation.
async fn wait_status(
    ns: &TestNamespace,
    name: &str,
    check: impl Fn(&BTreeMap<String, (i32, i32)>) -> bool,
) -> WorkloadSpread {
    let api: Api<WorkloadSpread> = ns.api();
    wait_for(&format!("the status of {name}"), TIMEOUT, || async {
        let ws = api.get(name).await.map_err(|e| e.to_string())?;
        let status = ws.status.clone().unwrap_or_default();
        let counts: BTreeMap<String, (i32, i32)> = status
            .subset_statuses
            .iter()
            .map(|s| (s.name.clone(), (s.replicas, s.missing_replicas)))
            .collect();
        if Some(status.observed_generation) == ws.metadata.generation && check(&counts) {
            Ok(ws)
        } else {
            Err(format!("{status:?}"))
        }
    })
    .await
}

/// Scenario D2 with 6 replicas: 2 Pods in zone-a (the cap), 4 in zone-b, each with the
/// subset's affinity, annotation and deletion cost; scaled to 4, zone-b loses 2.
#[tokio::test]
async fn seed_spreads_a_cloneset_and_scale_in_empties_the_last_subset_first() {
    let ns = TestNamespace::new("ws-seed").await;
    let target = ("apps.kruise.io/v1alpha1", "CloneSet", "cs-demo");
    let subsets = subset("zone-a", "zone-a", "2") + &subset("zone-b", "zone-b", "");
    ns.apply(&ws_yaml("ws-demo", target, &subsets, ""))
        .await
        .expect("apply ws");
    let _ws_ctl = controller(&ns, target).await;
    let _cs_ctl =
        RunningController::start(cloneset_ctl::IDENTITY, &ns.name, "", cloneset_ctl::run).await;
    ns.apply(&cloneset_yaml("cs-demo", 6))
        .await
        .expect("apply cs");
    let zones = zones(&ns).await;

    let costs_are = |pods: &[Pod]| {
        pods.iter().all(|p| {
            cost_of(p)
                == Some(if subset_of(p) == "zone-a" {
                    "200"
                } else {
                    "100"
                })
        })
    };
    let pods = settled(&ns, "cs-demo", 6, costs_are).await;
    assert_eq!(
        per_zone(&pods, &zones),
        BTreeMap::from([("zone-a".into(), 2), ("zone-b".into(), 4)])
    );
    for p in &pods {
        let zone = &zones[node_of(p)];
        assert_eq!(
            &subset_of(p),
            zone,
            "{} placed in its node's zone",
            p.name_any()
        );
        let required = json!(
            p.spec
                .as_ref()
                .unwrap()
                .affinity
                .as_ref()
                .unwrap()
                .node_affinity
                .as_ref()
                .unwrap()
                .required_during_scheduling_ignored_during_execution
        );
        assert_eq!(
            required["nodeSelectorTerms"][0]["matchExpressions"][0]["values"],
            json!([zone])
        );
    }
    wait_status(&ns, "ws-demo", |s| {
        s.get("zone-a") == Some(&(2, 0)) && s.get("zone-b") == Some(&(4, -1))
    })
    .await;

    let cs: Api<CloneSet> = ns.api();
    cs.patch(
        "cs-demo",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .expect("scale in");
    let pods = settled(&ns, "cs-demo", 4, |_| true).await;
    assert_eq!(
        per_zone(&pods, &zones),
        BTreeMap::from([("zone-a".into(), 2), ("zone-b".into(), 2)]),
        "scale-in removed zone-b Pods only"
    );
}

/// Adaptive: a subset whose nodes do not exist gets the first Pod; once it has waited
/// rescheduleCriticalSeconds unscheduled, the subset is marked Schedulable=False and
/// the Pod deleted; its replacement lands in the next subset.
#[tokio::test]
async fn adaptive_moves_a_pod_that_cannot_be_scheduled_to_the_next_subset() {
    let ns = TestNamespace::new("ws-adaptive").await;
    let target = ("apps.kruise.io/v1alpha1", "CloneSet", "cs-adaptive");
    let subsets = subset("nowhere", "zone-none", "1") + &subset("zone-b", "zone-b", "");
    let strategy = "  scheduleStrategy:\n    type: Adaptive\n    adaptive:\n      rescheduleCriticalSeconds: 2\n";
    ns.apply(&ws_yaml("ws-adaptive", target, &subsets, strategy))
        .await
        .expect("apply ws");
    let _ws_ctl = controller(&ns, target).await;
    let _cs_ctl =
        RunningController::start(cloneset_ctl::IDENTITY, &ns.name, "", cloneset_ctl::run).await;
    ns.apply(&cloneset_yaml("cs-adaptive", 2))
        .await
        .expect("apply cs");
    let zones = zones(&ns).await;
    let started = Instant::now();
    let pods = settled(&ns, "cs-adaptive", 2, |_| true).await;
    eprintln!(
        "adaptive: both Pods scheduled after {:?}",
        started.elapsed()
    );
    assert_eq!(
        per_zone(&pods, &zones),
        BTreeMap::from([("zone-b".into(), 2)])
    );
    assert!(pods.iter().all(|p| subset_of(p) == "zone-b"));
    let ws = wait_status(&ns, "ws-adaptive", |s| s.get("zone-b") == Some(&(2, -1))).await;
    let nowhere = &ws.status.unwrap().subset_statuses[0];
    assert_eq!(
        nowhere.conditions[0].type_,
        keys::SUBSET_CONDITION_SCHEDULABLE
    );
    assert_eq!(nowhere.conditions[0].status, "False");
}

/// 20 Pods of one CloneSet created at once (no CloneSet controller runs here: the test
/// is the workload), half with only generateName: the caps hold exactly.
#[tokio::test]
async fn twenty_concurrent_creations_never_overfill_a_subset() {
    let ns = TestNamespace::new("ws-burst").await;
    let target = ("apps.kruise.io/v1alpha1", "CloneSet", "burst");
    let subsets =
        subset("a", "zone-a", "3") + &subset("b", "zone-b", "5") + &subset("rest", "", "");
    ns.apply(&ws_yaml("ws-burst", target, &subsets, ""))
        .await
        .expect("apply ws");
    let ws_ctl = controller(&ns, target).await;
    ns.apply(&cloneset_yaml("burst", 20))
        .await
        .expect("apply cs");
    let cs: CloneSet = ns.api::<CloneSet>().get("burst").await.expect("cs");
    let owner = json!([{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "burst",
        "uid": cs.uid().unwrap(), "controller": true}]);
    let pods: Api<Pod> = ns.api();
    let started = Instant::now();
    let creations = (0..20).map(|i| {
        let meta = if i % 2 == 0 {
            json!({"name": format!("burst-{i}"), "labels": {"app": "burst"}, "ownerReferences": owner})
        } else {
            json!({"generateName": "burst-", "labels": {"app": "burst"}, "ownerReferences": owner})
        };
        let pod: Pod = serde_json::from_value(json!({"metadata": meta,
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "nginx:alpine"}]}}))
        .unwrap();
        let pods = pods.clone();
        async move { pods.create(&PostParams::default(), &pod).await }
    });
    let created: Vec<Pod> = futures::future::join_all(creations)
        .await
        .into_iter()
        .map(|r| r.expect("every creation admitted"))
        .collect();
    let metric = |operation: &str| {
        let key = format!(
            "kruise_pod_operations_total{{controller=\"workloadspread-controller\",operation=\"{operation}\"}} "
        );
        ws_ctl
            .metrics()
            .lines()
            .find_map(|l| l.strip_prefix(&key)?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    eprintln!(
        "20 concurrent Pod creations took {:?}; status write conflicts: {}",
        started.elapsed(),
        metric("status_conflict")
    );
    assert_eq!(
        metric("placed"),
        20,
        "every Pod placed once (the probe was a dry run)"
    );
    assert_eq!(metric("refused_conflict"), 0);
    let mut per_subset = BTreeMap::new();
    for p in &created {
        *per_subset.entry(subset_of(p)).or_insert(0) += 1;
    }
    assert_eq!(
        per_subset,
        BTreeMap::from([("a".into(), 3), ("b".into(), 5), ("rest".into(), 12)])
    );
    let generated = created
        .iter()
        .filter(|p| {
            p.annotations()
                .get(keys::WS_MATCHED)
                .is_some_and(|a| a.contains("\"uid\""))
        })
        .count();
    assert!(
        generated > 0,
        "generateName Pods in capped subsets carry their record's id"
    );
    // The controller clears the records once it sees the Pods.
    let ws = wait_status(&ns, "ws-burst", |s| {
        s.get("a") == Some(&(3, 0))
            && s.get("b") == Some(&(5, 0))
            && s.get("rest") == Some(&(12, -1))
    })
    .await;
    assert!(
        ws.status
            .unwrap()
            .subset_statuses
            .iter()
            .all(|s| s.creating_pods.is_empty()),
        "creation records cleared"
    );
    // A deletion is recorded by the webhook, then the place is free for a new Pod.
    let in_a = created
        .iter()
        .find(|p| subset_of(p) == "a")
        .expect("a Pod in subset a");
    pods.delete(&in_a.name_any(), &Default::default())
        .await
        .expect("delete");
    assert_eq!(metric("deletion_recorded"), 1);
    wait_status(&ns, "ws-burst", |s| s.get("a") == Some(&(2, 1))).await;
}

/// A Deployment's Pods (owned by its ReplicaSet) are found by climbing to the
/// Deployment, and carry the deletion costs the ReplicaSet controller honours.
#[tokio::test]
async fn deployment_pods_are_placed_through_their_replicaset() {
    let ns = TestNamespace::new("ws-deploy").await;
    let target = ("apps/v1", "Deployment", "web");
    let subsets = subset("zone-a", "zone-a", "1") + &subset("zone-b", "zone-b", "");
    ns.apply(&ws_yaml("ws-web", target, &subsets, ""))
        .await
        .expect("apply ws");
    let deployment = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 0
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: nginx
        image: nginx:alpine
"#;
    ns.apply(deployment).await.expect("apply deployment");
    // The probe Pod is the ReplicaSet's: the webhook climbs to the Deployment.
    let rs = wait_for("the Deployment's ReplicaSet", TIMEOUT, || async {
        let list = ns
            .api::<k8s_openapi::api::apps::v1::ReplicaSet>()
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        list.items
            .first()
            .map(ResourceExt::name_any)
            .ok_or_else(|| "none yet".to_string())
    })
    .await;
    let _ws_ctl = controller(&ns, ("apps/v1", "ReplicaSet", &rs)).await;
    ns.api::<k8s_openapi::api::apps::v1::Deployment>()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("scale out");
    let zones = zones(&ns).await;
    let pods = settled(&ns, "web", 3, |pods| {
        pods.iter().all(|p| cost_of(p).is_some())
    })
    .await;
    assert_eq!(
        per_zone(&pods, &zones),
        BTreeMap::from([("zone-a".into(), 1), ("zone-b".into(), 2)])
    );
}

/// Admission: the spec's messages.
#[tokio::test]
async fn invalid_workloadspreads_are_refused_with_the_spec_messages() {
    let ns = TestNamespace::new("ws-invalid").await;
    let target = ("apps.kruise.io/v1alpha1", "CloneSet", "cs");
    ns.apply(&ws_yaml("first", target, &subset("a", "zone-a", ""), ""))
        .await
        .expect("apply ws");
    let _ctl = controller(&ns, target).await;
    let api: Api<WorkloadSpread> = ns.api();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let refused = |yaml: String| {
        let api = api.clone();
        let dry_run = dry_run.clone();
        async move {
            let ws: WorkloadSpread = serde_saphyr::from_str(&yaml).expect("yaml");
            match api.create(&dry_run, &ws).await {
                Err(kube::Error::Api(s)) => s.message,
                other => panic!("admitted: {other:?}"),
            }
        }
    };
    let daemonset = ("apps/v1", "DaemonSet", "ds");
    assert!(
        refused(ws_yaml("x", daemonset, &subset("a", "", ""), ""))
            .await
            .contains(keys::WS_MSG_KIND_NOT_PERMITTED)
    );
    let other = ("apps.kruise.io/v1alpha1", "CloneSet", "other");
    let message = refused(ws_yaml(
        "x",
        other,
        &(subset("a", "", "1") + &subset("a", "", "50%")),
        "",
    ))
    .await;
    assert!(message.contains("duplicated subset name a"), "{message}");
    assert!(
        message.contains(keys::WS_MSG_MAX_REPLICAS_MIXED),
        "{message}"
    );
    let message = refused(ws_yaml(
        "x",
        other,
        &(subset("a", "", "30%") + &subset("b", "", "30%")),
        "",
    ))
    .await;
    assert!(message.contains(keys::WS_MSG_PERCENT_NOT_100), "{message}");
    let message = refused(ws_yaml("x", target, &subset("a", "", ""), "")).await;
    assert!(
        message.contains("ws.spec.targetRef is in conflict with other WorkloadSpread first"),
        "{message}"
    );
    let message = api
        .patch(
            "first",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"targetRef": {"name": "renamed"}}})),
        )
        .await
        .expect_err("targetRef changed");
    assert!(
        message
            .to_string()
            .contains(keys::WS_MSG_TARGET_REF_IMMUTABLE),
        "{message}"
    );
}

/// A custom workload (docs/workloadspread.md, "Custom workloads"): an Advanced DaemonSet is refused as a target until the
/// `kruise-configuration` ConfigMap (in the controller's namespace: here the test's, the
/// instance being namespace-scoped) allow-lists it, as OpenKruise's e2e "job-like custom
/// workload" does; then its Pods, which have no replicas to resolve, fill the integer caps
/// in order: 3 Pods over a=2, b=5 → a 2/0, b 1/4.
#[tokio::test]
async fn allow_listed_custom_workload_is_spread() {
    let ns = TestNamespace::new("ws-custom").await;
    let ctl = start_controller(&ns).await;
    let _ds =
        RunningController::start(daemonset_ctl::IDENTITY, &ns.name, "", daemonset_ctl::run).await;
    let target = ("apps.kruise.io/v1alpha1", "DaemonSet", "custom-ds");
    let subsets = subset("subset-a", "", "2") + &subset("subset-b", "", "5");
    let ws: WorkloadSpread =
        serde_saphyr::from_str(&ws_yaml("ws-custom", target, &subsets, "")).expect("ws");
    let wss: Api<WorkloadSpread> = ns.api();
    // The webhook is up once it judges WorkloadSpreads: without the allowlist it refuses.
    let refused = wait_for(
        "the WorkloadSpread webhook refuses the DaemonSet",
        TIMEOUT,
        || async {
            match wss.create(&PostParams::default(), &ws).await {
                Err(kube::Error::Api(e)) if e.message.contains(keys::WS_MSG_KIND_NOT_PERMITTED) => {
                    Ok(e.message)
                }
                Ok(_) => {
                    let _ = wss.delete("ws-custom", &Default::default()).await;
                    Err("admitted without an allowlist".to_string())
                }
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await;
    assert!(refused.contains("spec.targetRef"), "{refused}");

    let allowlist = json!({"workloads": [
        {"Group": "apps.kruise.io", "Version": "v1alpha1", "Kind": "DaemonSet"}]});
    ns.apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kruise-configuration\ndata:\n  {}: '{}'\n",
        keys::WS_WATCH_CUSTOM_WORKLOAD_WHITELIST,
        allowlist
    ))
    .await
    .expect("allowlist");
    wss.create(&PostParams::default(), &ws)
        .await
        .expect("an allow-listed kind is admitted");
    // 3 Pods: the DaemonSet on three of the shared kwok nodes.
    ns.apply(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: DaemonSet
metadata:
  name: custom-ds
spec:
  selector:
    matchLabels:
      app: custom-ds
  template:
    metadata:
      labels:
        app: custom-ds
    spec:
      terminationGracePeriodSeconds: 0
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - key: kubernetes.io/hostname
                operator: In
                values: [kwok-node-0, kwok-node-1, kwok-node-2]
      containers:
      - name: main
        image: nginx:alpine
"#,
    )
    .await
    .expect("daemonset");
    wait_status(&ns, "ws-custom", |c| {
        c.get("subset-a") == Some(&(2, 0)) && c.get("subset-b") == Some(&(1, 4))
    })
    .await;
    let pods: Api<Pod> = ns.api();
    let list = pods
        .list(&kube::api::ListParams::default().labels("app=custom-ds"))
        .await
        .expect("pods");
    let mut by_subset = BTreeMap::new();
    for p in &list.items {
        *by_subset.entry(subset_of(p)).or_insert(0) += 1;
    }
    assert_eq!(
        by_subset,
        BTreeMap::from([("subset-a".to_string(), 2), ("subset-b".to_string(), 1)])
    );
    drop(ctl);
}

/// Dry runs (`kubectl create|delete --dry-run=server`, an eviction dry run in its body)
/// leave the WorkloadSpread's status as it was: upstream's Pod webhooks return before
/// `HandlePodCreation` / `HandlePodDeletion` when `dryRun` is set. A dry-run creation
/// still comes back placed (our webhook's probe reads that); a real one is recorded.
#[tokio::test]
async fn dry_runs_leave_the_status_untouched() {
    let ns = TestNamespace::new("ws-dry").await;
    let target = ("apps.kruise.io/v1alpha1", "CloneSet", "dry");
    let subsets = subset("a", "zone-a", "1") + &subset("b", "zone-b", "");
    ns.apply(&ws_yaml("ws-dry", target, &subsets, ""))
        .await
        .expect("apply ws");
    let ws_ctl = controller(&ns, target).await;
    // No cloneset-ctl: the test creates the CloneSet's Pods itself.
    ns.apply(&cloneset_yaml("dry", 2)).await.expect("apply cs");
    let cs: CloneSet = ns.api::<CloneSet>().get("dry").await.expect("cs");
    let metric = |operation: &str| {
        let key = format!(
            "kruise_pod_operations_total{{controller=\"workloadspread-controller\",operation=\"{operation}\"}} "
        );
        ws_ctl
            .metrics()
            .lines()
            .find_map(|l| l.strip_prefix(&key)?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let subset_status = |ws: &WorkloadSpread, name: &str| {
        ws.status
            .as_ref()
            .and_then(|s| s.subset_statuses.iter().find(|s| s.name == name).cloned())
            .unwrap_or_else(|| panic!("subset {name} in {:?}", ws.status))
    };
    let ws_api: Api<WorkloadSpread> = ns.api();
    let before = wait_status(&ns, "ws-dry", |s| {
        s.get("a") == Some(&(0, 1)) && s.get("b") == Some(&(0, -1))
    })
    .await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "dry-0", "labels": {"app": "dry"}, "ownerReferences": [
            {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "dry",
             "uid": cs.uid().unwrap(), "controller": true}]},
        "spec": {"terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "nginx:alpine"}]}})
    .to_string();
    let kubectl = |args: &[&str], stdin: Option<String>| {
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.extend(["-n".to_string(), ns.name.clone()]);
        kruise_e2e::kubectl_async(args, stdin)
    };

    // Creation: placed in subset a (its one free place), twice, and nothing recorded.
    for _ in 0..2 {
        let (ok, out, err) = kubectl(
            &["create", "--dry-run=server", "-o", "json", "-f", "-"],
            Some(pod.clone()),
        )
        .await;
        assert!(ok, "{out} {err}");
        let placed: Pod = serde_json::from_str(&out).expect("pod json");
        assert_eq!(subset_of(&placed), "a", "{:?}", placed.metadata.annotations);
        let ws = ws_api.get("ws-dry").await.expect("ws");
        let a = subset_status(&ws, "a");
        assert!(a.creating_pods.is_empty(), "{a:?}");
        assert_eq!((a.replicas, a.missing_replicas), (0, 1), "{a:?}");
        assert_eq!(ws.status, before.status);
    }
    assert_eq!(metric("placed"), 0, "dry runs are not placements");

    // The real creation takes subset a's place.
    let (ok, out, err) = kubectl(&["create", "-f", "-"], Some(pod.clone())).await;
    assert!(ok, "{out} {err}");
    assert_eq!(metric("placed"), 1);
    let placed = wait_status(&ns, "ws-dry", |s| s.get("a") == Some(&(1, 0))).await;
    wait_for("the creation record cleared", TIMEOUT, || async {
        let ws = ws_api.get("ws-dry").await.map_err(|e| e.to_string())?;
        let a = subset_status(&ws, "a");
        if a.creating_pods.is_empty() && a.deleting_pods.is_empty() {
            Ok(())
        } else {
            Err(format!("{a:?}"))
        }
    })
    .await;
    let placed_a = subset_status(&placed, "a");

    // Deletion and eviction dry runs: the Pod stays, nothing is recorded.
    let (ok, out, err) = kubectl(&["delete", "pod", "dry-0", "--dry-run=server"], None).await;
    assert!(ok && out.contains("(server dry run)"), "{out} {err}");
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "dry-0", "namespace": ns.name},
        "deleteOptions": {"dryRun": ["All"]}});
    let (ok, out, err) = kubectl(
        &[
            "create",
            "--raw",
            &format!("/api/v1/namespaces/{}/pods/dry-0/eviction", ns.name),
            "-f",
            "-",
        ],
        Some(eviction.to_string()),
    )
    .await;
    assert!(ok, "{out} {err}");
    let ws = ws_api.get("ws-dry").await.expect("ws");
    let a = subset_status(&ws, "a");
    assert!(a.deleting_pods.is_empty(), "{a:?}");
    assert_eq!(
        (a.replicas, a.missing_replicas),
        (placed_a.replicas, placed_a.missing_replicas),
        "{a:?}"
    );
    assert_eq!(metric("deletion_recorded"), 0);
    ns.api::<Pod>()
        .get("dry-0")
        .await
        .expect("the Pod is still there");

    // The real deletion is recorded.
    ns.api::<Pod>()
        .delete("dry-0", &Default::default())
        .await
        .expect("delete");
    assert_eq!(metric("deletion_recorded"), 1);
}

/// A Pod no subset takes (zone-a, the only subset, is full; the Pod goes to zone-b) gets the "fake subset"
/// deletion cost −200 when the WorkloadSpread is next reconciled. By default that is on
/// upstream's triggers only: its creation (not annotated) wakes nothing, the CloneSet's
/// replicas change does. With `KRUISE_WORKLOADSPREAD_EAGER_DELETION_COST` it gets it as
/// soon as it exists. No cloneset-ctl: the test creates the CloneSet's Pods itself.
async fn pod_in_no_subset(eager: bool) {
    let ns = TestNamespace::new(if eager { "ws-eager" } else { "ws-lazy" }).await;
    let target = ("apps.kruise.io/v1alpha1", "CloneSet", "cs-nosub");
    ns.apply(&ws_yaml(
        "ws-nosub",
        target,
        &subset("zone-a", "zone-a", "1"),
        "",
    ))
    .await
    .expect("apply ws");
    let _ws_ctl = controller_with(&ns, target, eager).await;
    ns.apply(&cloneset_yaml("cs-nosub", 2))
        .await
        .expect("apply cs");
    let uid = ns
        .api::<CloneSet>()
        .get("cs-nosub")
        .await
        .expect("cs")
        .uid()
        .expect("uid");
    // `zone`: a nodeSelector of the Pod's own (a Pod on a zone-a node would be counted in
    // zone-a by its node, as upstream's matchesSubset does).
    let pod = |name: &str, zone: Option<&str>| -> Pod {
        let mut p = json!({
            "metadata": {"name": name, "labels": {"app": "cs-nosub"},
                "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
                    "name": "cs-nosub", "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"terminationGracePeriodSeconds": 0,
                "containers": [{"name": "nginx", "image": "nginx:alpine"}]}
        });
        if let Some(zone) = zone {
            p["spec"]["nodeSelector"] = json!({ZONE: zone});
        }
        serde_json::from_value(p).unwrap()
    };
    let pods: Api<Pod> = ns.api();
    let placed = pods
        .create(&PostParams::default(), &pod("in-zone-a", None))
        .await
        .expect("create");
    assert_eq!(subset_of(&placed), "zone-a");
    settled(&ns, "cs-nosub", 1, |p| cost_of(&p[0]) == Some("100")).await;
    wait_status(&ns, "ws-nosub", |s| s.get("zone-a") == Some(&(1, 0))).await;

    let outside = pods
        .create(&PostParams::default(), &pod("outside", Some("zone-b")))
        .await
        .expect("create");
    assert_eq!(subset_of(&outside), "", "zone-a is full");
    let cost = || async {
        let p = pods.get("outside").await.expect("get");
        cost_of(&p).map(str::to_string)
    };
    if !eager {
        // Nothing upstream watches changed: no reconcile, no cost yet.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(cost().await, None, "cost before the next reconcile");
        ns.api::<CloneSet>()
            .patch(
                "cs-nosub",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": 3}})),
            )
            .await
            .expect("scale");
    }
    wait_for(
        "the fake subset's cost on the Pod outside",
        TIMEOUT,
        || async {
            match cost().await {
                Some(c) if c == "-200" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}

#[tokio::test]
async fn a_pod_in_no_subset_gets_its_cost_at_the_next_reconcile() {
    pod_in_no_subset(false).await;
}

#[tokio::test]
async fn with_eager_deletion_cost_a_pod_in_no_subset_gets_its_cost_at_once() {
    pod_in_no_subset(true).await;
}
