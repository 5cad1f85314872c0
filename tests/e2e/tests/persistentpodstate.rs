//! PersistentPodState on the real cluster (docs/persistentpodstate.md): the
//! controller in-process per namespace (and statefulset-ctl for Advanced StatefulSets;
//! apps/v1 StatefulSets are run by the local kube-controller-manager), on the 4 shared
//! kwok nodes (zone-a: kwok-node-0/1, zone-b: kwok-node-2/3).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::apps_v1alpha1::{PersistentPodState, PersistentPodStateStatus, PodState};
use kruise_api::keys;
use kruise_e2e::{RunningController, TestNamespace, is_ready, wait_for};
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);
const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

/// persistentpodstate-ctl scoped to `ns`, its validation (and so its registration) in
/// effect.
async fn controller(ns: &TestNamespace) -> RunningController {
    if std::env::var_os("RUST_LOG").is_some() {
        kruise_runtime::telemetry::init(kruise_runtime::settings::LogFormat::Text);
    }
    let ctl = RunningController::start(
        persistentpodstate_ctl::IDENTITY,
        &ns.name,
        "",
        persistentpodstate_ctl::run,
    )
    .await;
    // Only the webhook refuses a PPS without topology (the schema allows it).
    let probe: PersistentPodState = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "PersistentPodState",
        "metadata": {"name": "probe"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "probe"}}
    }))
    .unwrap();
    let api = ns.api::<PersistentPodState>();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for("the PPS webhook to be called", MINUTE, || async {
        match api.create(&dry_run, &probe).await {
            Err(e) if e.to_string().contains(keys::PPS_MSG_NO_TOPOLOGY) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    ctl
}

/// A StatefulSet of `kind` (`apps/v1` or `apps.kruise.io/v1beta1`) named `name`, Parallel,
/// with `annotations` under metadata.
fn sts_yaml(api_version: &str, name: &str, replicas: i32, annotations: &str) -> String {
    format!(
        r#"apiVersion: {api_version}
kind: StatefulSet
metadata:
  name: {name}
  annotations:
    e2e: "true"
{annotations}spec:
  serviceName: {name}
  replicas: {replicas}
  podManagementPolicy: Parallel
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
      - name: echoserver
        image: nginx:alpine
"#
    )
}

fn pps_yaml(name: &str, api_version: &str, target: &str, retention: &str) -> String {
    format!(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: PersistentPodState
metadata:
  name: {name}
spec:
  targetRef:
    apiVersion: {api_version}
    kind: StatefulSet
    name: {target}
  requiredPersistentTopology:
    nodeTopologyKeys:
    - {ZONE}
  preferredPersistentTopology:
  - preference:
      nodeTopologyKeys:
      - {HOST}
    weight: 100
  persistentPodStateRetentionPolicy: {retention}
"#
    )
}

/// The Ready Pods `<set>-0..replicas`, each with its node.
async fn ready_pods(ns: &TestNamespace, set: &str, replicas: usize) -> Vec<Pod> {
    wait_for(
        &format!("{replicas} Ready Pods of {set}"),
        MINUTE,
        || async {
            let pods = kruise_e2e::pods_with(ns, &format!("app={set}")).await;
            if pods.len() == replicas && pods.iter().all(is_ready) {
                Ok(pods)
            } else {
                Err(format!(
                    "{:?}",
                    pods.iter()
                        .map(|p| (p.name_any(), is_ready(p)))
                        .collect::<Vec<_>>()
                ))
            }
        },
    )
    .await
}

async fn zone_of(ns: &TestNamespace, node: &str) -> String {
    let nodes: Api<Node> = Api::all(ns.client.clone());
    nodes.get(node).await.expect("node").labels()[ZONE].clone()
}

fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

/// Waits until the PPS's status has exactly the states `check` accepts.
async fn wait_states(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    check: impl Fn(&BTreeMap<String, PodState>) -> bool,
) -> PersistentPodStateStatus {
    let api = ns.api::<PersistentPodState>();
    wait_for(what, MINUTE, || async {
        let pps = api.get(name).await.map_err(|e| e.to_string())?;
        let status = pps.status.clone().unwrap_or_default();
        if Some(status.observed_generation) == pps.metadata.generation && check(&status.pod_states)
        {
            Ok(status)
        } else {
            Err(format!("{status:?}"))
        }
    })
    .await
}

/// The state recording `pod` must have: its node, the node's zone and hostname.
async fn expected_state(ns: &TestNamespace, pod: &Pod) -> PodState {
    let node = node_of(pod);
    PodState {
        node_topology_labels: BTreeMap::from([
            (ZONE.to_string(), zone_of(ns, &node).await),
            (HOST.to_string(), node.clone()),
        ]),
        node_name: node,
        annotations: BTreeMap::new(),
    }
}

/// Deletes `name` and returns its replacement (another UID) once it is scheduled.
async fn recreate(ns: &TestNamespace, name: &str) -> Pod {
    let api = ns.api::<Pod>();
    let old = api.get(name).await.expect("pod").uid();
    api.delete(name, &DeleteParams::default())
        .await
        .expect("delete pod");
    wait_for(
        &format!("{name} re-created and scheduled"),
        MINUTE,
        || async {
            match api.get_opt(name).await.map_err(|e| e.to_string())? {
                Some(p) if p.uid() != old && !node_of(&p).is_empty() => Ok(p),
                other => Err(format!("{:?}", other.map(|p| (p.uid(), node_of(&p))))),
            }
        },
    )
    .await
}

/// The recreated Pod carries what the recorded state asks for and lands in its zone.
async fn assert_injected(ns: &TestNamespace, pod: &Pod, pps: &str, state: &PodState) {
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(
        spec.node_selector.clone().unwrap_or_default().get(ZONE),
        state.node_topology_labels.get(ZONE),
        "the zone as nodeSelector"
    );
    let preferred = serde_json::to_value(
        spec.affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.preferred_during_scheduling_ignored_during_execution
                    .clone()
            }),
    )
    .unwrap();
    assert_eq!(
        preferred,
        json!([{"weight": 100, "preference": {"matchExpressions": [
            {"key": HOST, "operator": "In", "values": [state.node_name]}]}}])
    );
    assert_eq!(
        pod.annotations()
            .get(keys::PPS_INJECTED)
            .map(String::as_str),
        Some(pps)
    );
    assert_eq!(
        zone_of(ns, &node_of(pod)).await,
        state.node_topology_labels[ZONE],
        "back in its zone"
    );
}

/// `controller="…"` of the status controller's reconcile metrics.
const CONTROLLER_LABEL: &str = "controller=\"persistentpodstate-controller\"";

/// The sum of the samples of `metric` (its name and `{`) whose labels contain `label`.
fn sum_metric(ctl: &RunningController, metric: &str, label: &str) -> f64 {
    ctl.metrics()
        .lines()
        .filter(|l| l.starts_with(metric) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// P4 on an Advanced StatefulSet: the states recorded exactly, and a deleted Pod comes
/// back with the zone required, the node preferred and the annotation, in its zone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_pps_steers_a_recreated_advanced_statefulset_pod() {
    let ns = TestNamespace::new("pps-p4").await;
    let _sts = RunningController::start(
        statefulset_ctl::IDENTITY,
        &ns.name,
        "",
        statefulset_ctl::run,
    )
    .await;
    let ctl = controller(&ns).await;
    ns.apply(&pps_yaml(
        "echoserver",
        "apps.kruise.io/v1beta1",
        "echoserver",
        "WhenScaled",
    ))
    .await
    .expect("create PPS");
    ns.apply(&sts_yaml("apps.kruise.io/v1beta1", "echoserver", 2, ""))
        .await
        .expect("create StatefulSet");
    let pods = ready_pods(&ns, "echoserver", 2).await;
    let mut expected = BTreeMap::new();
    for p in &pods {
        expected.insert(p.name_any(), expected_state(&ns, p).await);
    }
    wait_states(&ns, "echoserver", "both states recorded", |s| {
        *s == expected
    })
    .await;

    // A change that moves nothing (a Pod annotation no PPS records) is reconciled and
    // writes nothing: states are written once per change.
    let writes = || {
        sum_metric(
            &ctl,
            "kruise_api_requests_total{",
            "persistentpodstates/status",
        )
    };
    let reconciles = || sum_metric(&ctl, "kruise_reconcile_total{", CONTROLLER_LABEL);
    let (writes_before, reconciles_before) = (writes(), reconciles());
    assert!(writes_before >= 1.0, "the states were written");
    ns.api::<Pod>()
        .patch(
            "echoserver-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"unrelated": "x"}}})),
        )
        .await
        .unwrap();
    wait_for("a reconcile of the PPS", MINUTE, || async {
        if reconciles() > reconciles_before {
            Ok(())
        } else {
            Err("none yet".to_string())
        }
    })
    .await;
    assert_eq!(writes(), writes_before, "no status write without a change");

    let pod = recreate(&ns, "echoserver-0").await;
    assert_injected(&ns, &pod, "echoserver", &expected["echoserver-0"]).await;
    // Its sibling, never recreated, was not touched.
    let sibling = ns.api::<Pod>().get("echoserver-1").await.unwrap();
    assert!(!sibling.annotations().contains_key(keys::PPS_INJECTED));
}

/// The annotations on an Advanced StatefulSet: the generated PPS (same name,
/// controller-owned), its spec following the annotations, the injection, and its
/// deletion when auto-generation is turned off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_pps_follows_the_advanced_statefulset_annotations() {
    let ns = TestNamespace::new("pps-p5").await;
    let _sts = RunningController::start(
        statefulset_ctl::IDENTITY,
        &ns.name,
        "",
        statefulset_ctl::run,
    )
    .await;
    let _pps = controller(&ns).await;
    generated_pps_scenario(&ns, "apps.kruise.io/v1beta1").await;
}

/// P5 on an apps/v1 StatefulSet (run by the kube-controller-manager).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_pps_follows_the_statefulset_annotations() {
    let ns = TestNamespace::new("pps-p5-apps").await;
    let _pps = controller(&ns).await;
    generated_pps_scenario(&ns, "apps/v1").await;
}

async fn generated_pps_scenario(ns: &TestNamespace, api_version: &str) {
    let (group, version) = api_version.split_once('/').unwrap();
    let sts_api: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, "StatefulSet")),
    );
    let annotations = format!(
        "    {}: \"true\"\n    {}: {HOST}\n    {}: {ZONE}\n",
        keys::PPS_AUTO_GENERATE,
        keys::PPS_PREFERRED_TOPOLOGY,
        keys::PPS_REQUIRED_TOPOLOGY
    );
    ns.apply(&sts_yaml(api_version, "web", 1, &annotations))
        .await
        .expect("create StatefulSet");
    let sts = sts_api.get("web").await.unwrap();
    let api = ns.api::<PersistentPodState>();
    let pps = wait_for("the generated PPS", MINUTE, || async {
        api.get_opt("web")
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "not yet".to_string())
    })
    .await;
    let owner = &pps.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("StatefulSet", sts.uid().unwrap().as_str(), Some(true))
    );
    assert_eq!(
        serde_json::to_value(&pps.spec).unwrap(),
        json!({
            "targetRef": {"apiVersion": api_version, "kind": "StatefulSet", "name": "web"},
            "requiredPersistentTopology": {"nodeTopologyKeys": [ZONE]},
            "preferredPersistentTopology": [{"weight": 100, "preference": {"nodeTopologyKeys": [HOST]}}]
        })
    );

    // It then behaves as in P4.
    let pods = ready_pods(ns, "web", 1).await;
    let state = expected_state(ns, &pods[0]).await;
    let want = BTreeMap::from([("web-0".to_string(), state.clone())]);
    wait_states(ns, "web", "web-0 recorded", |s| *s == want).await;
    let pod = recreate(ns, "web-0").await;
    assert_injected(ns, &pod, "web", &state).await;

    // A changed annotation updates the spec.
    let merge = |a: serde_json::Value| Patch::Merge(json!({"metadata": {"annotations": a}}));
    sts_api
        .patch(
            "web",
            &PatchParams::default(),
            &merge(json!({(keys::PPS_PREFERRED_TOPOLOGY): null})),
        )
        .await
        .unwrap();
    wait_for("the spec without the preference", MINUTE, || async {
        let p = api.get("web").await.map_err(|e| e.to_string())?;
        if p.spec.preferred_persistent_topology.is_empty()
            && p.spec.required_persistent_topology.is_some()
        {
            Ok(())
        } else {
            Err(format!("{:?}", p.spec))
        }
    })
    .await;

    // Turning auto-generation off deletes it.
    sts_api
        .patch(
            "web",
            &PatchParams::default(),
            &merge(json!({(keys::PPS_AUTO_GENERATE): null})),
        )
        .await
        .unwrap();
    wait_for("the generated PPS deleted", MINUTE, || async {
        match api.get_opt("web").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(p) => Err(format!("still there: {:?}", p.metadata.deletion_timestamp)),
        }
    })
    .await;
}

/// Scaling 3 → 1 drops the states of ordinals 1 and 2 once their Pods are gone under
/// WhenScaled, and keeps them under WhenDeleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_in_drops_states_when_scaled_and_keeps_them_when_deleted() {
    let ns = TestNamespace::new("pps-scale").await;
    let _pps = controller(&ns).await;
    for (set, retention) in [("scaled", "WhenScaled"), ("kept", "WhenDeleted")] {
        ns.apply(&pps_yaml(set, "apps/v1", set, retention))
            .await
            .expect("create PPS");
        ns.apply(&sts_yaml("apps/v1", set, 3, ""))
            .await
            .expect("create StatefulSet");
    }
    for set in ["scaled", "kept"] {
        ready_pods(&ns, set, 3).await;
        wait_states(&ns, set, "3 states", |s| s.len() == 3).await;
    }
    let sts_api = ns.api::<StatefulSet>();
    for set in ["kept", "scaled"] {
        sts_api
            .patch(
                set,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": 1}})),
            )
            .await
            .unwrap();
    }
    for set in ["kept", "scaled"] {
        let pods = ns.api::<Pod>();
        wait_for(&format!("{set}-1 and -2 gone"), MINUTE, || async {
            let left = pods
                .list(&kube::api::ListParams::default().labels(&format!("app={set}")))
                .await
                .map_err(|e| e.to_string())?
                .items
                .len();
            if left == 1 {
                Ok(())
            } else {
                Err(format!("{left} Pods"))
            }
        })
        .await;
    }
    wait_states(&ns, "scaled", "only scaled-0 left", |s| {
        s.keys().eq(["scaled-0"].iter())
    })
    .await;
    // "kept" was reconciled after its Pods went too (it was scaled first): its states stay.
    let kept = ns.api::<PersistentPodState>().get("kept").await.unwrap();
    let names: Vec<String> = kept.status.unwrap().pod_states.into_keys().collect();
    assert_eq!(names, ["kept-0", "kept-1", "kept-2"]);
}

/// Admission: each rejection with its message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_rejects_invalid_persistentpodstates() {
    let ns = TestNamespace::new("pps-admission").await;
    let _pps = controller(&ns).await;
    let refused = |yaml: String| {
        let ns = &ns;
        async move { ns.apply(&yaml).await.expect_err("refused") }
    };
    let base = pps_yaml("a", "apps/v1", "web", "WhenScaled");
    let err = refused(base.replace("apiVersion: apps/v1", "apiVersion: \"\"")).await;
    assert!(err.contains(keys::PPS_MSG_EMPTY_TARGET_REF), "{err}");
    let err = refused(base.replace("kind: StatefulSet", "kind: Deployment")).await;
    assert!(err.contains(keys::PPS_MSG_KIND_NOT_ALLOWED), "{err}");
    let err = refused(base.replace("weight: 100", "weight: 101")).await;
    assert!(
        err.contains("spec.preferredPersistentTopology[0].weight: Invalid value: 101"),
        "{err}"
    );
    let no_topology: String = base
        .split("  requiredPersistentTopology")
        .next()
        .unwrap()
        .to_string();
    let err = refused(no_topology).await;
    assert!(err.contains(keys::PPS_MSG_NO_TOPOLOGY), "{err}");

    ns.apply(&base).await.expect("a valid PPS");
    let err = refused(pps_yaml("b", "apps/v1", "web", "WhenDeleted")).await;
    assert!(
        err.contains(&format!("{}a", keys::PPS_MSG_TARGET_REF_CONFLICT)),
        "{err}"
    );
    let err = refused(base.replace("name: web", "name: other")).await;
    assert!(err.contains(keys::PPS_MSG_IMMUTABLE), "{err}");
}
