//! UnitedDeployment on the real cluster: examples/uniteddeployment.yaml over zone-a/zone-b with
//! `apps/v1` Deployments (run by the local kube-controller-manager), scaling, a template
//! change rolling every subset, a removed subset's workload deleted, admission; the
//! per-subset partition holding back an update with CloneSets (cloneset-ctl in-process);
//! the Adaptive strategy, plain and with `reserveUnschedulablePods` (a subset whose nodes
//! arrive later: a kwok node of the test's own, tainted for its namespace).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::{CloneSet, UnitedDeployment};
use kruise_api::keys;
use kruise_e2e::{RunningController, TestNamespace, kubectl_async, wait_for};

use crate::daemonset::{OWNER, OwnNode};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

async fn controller(ns: &TestNamespace) -> RunningController {
    // RUST_LOG=uniteddeployment_ctl=debug shows what the controller decided.
    if std::env::var_os("RUST_LOG").is_some() {
        kruise_runtime::telemetry::init(kruise_runtime::settings::LogFormat::Text);
    }
    let ctl = RunningController::start(
        uniteddeployment_ctl::IDENTITY,
        &ns.name,
        "",
        uniteddeployment_ctl::run,
    )
    .await;
    let probe: UnitedDeployment =
        serde_saphyr::from_str(&ud_yaml("probe", 0, "deploymentTemplate", "", "")).expect("probe");
    kruise_e2e::wait_webhook_effective(&ns.api(), &probe, |ud: &UnitedDeployment| {
        ud.spec.revision_history_limit.is_some()
    })
    .await;
    ctl
}

/// The UD of examples/uniteddeployment.yaml over the two zones of the kwok nodes; `template` is the template key,
/// `workload_spec` goes under its `spec:` and `ud_spec` under the UD's `spec:`.
fn ud_yaml(
    name: &str,
    replicas: i32,
    template: &str,
    workload_spec: &str,
    ud_spec: &str,
) -> String {
    format!(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: UnitedDeployment
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    {template}:
      metadata:
        labels:
          app: {name}
      spec:
{workload_spec}        template:
          metadata:
            labels:
              app: {name}
          spec:
            containers:
            - name: nginx
              image: nginx:alpine
  topology:
    subsets:
    - name: zone-a
      nodeSelectorTerm:
        matchExpressions:
        - key: topology.kubernetes.io/zone
          operator: In
          values: [zone-a]
    - name: zone-b
      nodeSelectorTerm:
        matchExpressions:
        - key: topology.kubernetes.io/zone
          operator: In
          values: [zone-b]
{ud_spec}"#
    )
}

/// Replicas of each subset's Deployment (by the subset label), when there is exactly one.
async fn deployments_by_subset(ns: &TestNamespace) -> BTreeMap<String, Deployment> {
    let api: Api<Deployment> = ns.api();
    let mut out = BTreeMap::new();
    for d in api
        .list(&ListParams::default().labels(keys::UD_SUBSET_NAME))
        .await
        .expect("list deployments")
        .items
        .into_iter()
        .filter(|d| d.metadata.deletion_timestamp.is_none())
    {
        let subset = d.labels()[keys::UD_SUBSET_NAME].clone();
        assert!(
            out.insert(subset, d).is_none(),
            "two Deployments for one subset"
        );
    }
    out
}

fn replicas_of(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(-1)
}

fn image_of(pod: &Pod) -> &str {
    pod.spec.as_ref().unwrap().containers[0]
        .image
        .as_deref()
        .unwrap_or_default()
}

/// The Pods labelled `selector` that are not being deleted.
async fn live_pods(pods: &Api<Pod>, selector: &str) -> Result<Vec<Pod>, String> {
    let list = pods
        .list(&ListParams::default().labels(selector))
        .await
        .map_err(|e| e.to_string())?;
    Ok(list
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect())
}

async fn ud_status(
    ns: &TestNamespace,
    name: &str,
) -> kruise_api::apps_v1alpha1::UnitedDeploymentStatus {
    let api: Api<UnitedDeployment> = ns.api();
    api.get(name)
        .await
        .expect("get ud")
        .status
        .unwrap_or_default()
}

#[tokio::test]
async fn deployment_subsets_over_two_zones_scale_roll_and_remove() {
    let ns = TestNamespace::new("ud-zones").await;
    let _ctl = controller(&ns).await;
    ns.apply(&ud_yaml("sample-ud", 4, "deploymentTemplate", "", ""))
        .await
        .expect("apply ud");

    // One Deployment per subset, 2 replicas each, named and labelled after the subset,
    // its Pods confined to the subset's zone.
    let deployments = wait_for("two subset Deployments of 2", TIMEOUT, || async {
        let d = deployments_by_subset(&ns).await;
        let replicas: Vec<i32> = d.values().map(replicas_of).collect();
        if d.len() == 2 && replicas == [2, 2] {
            Ok(d)
        } else {
            Err(format!("{replicas:?}"))
        }
    })
    .await;
    for (subset, d) in &deployments {
        assert!(
            d.name_any().starts_with(&format!("sample-ud-{subset}-")),
            "{}",
            d.name_any()
        );
        assert_eq!(d.owner_references()[0].kind, "UnitedDeployment");
        assert!(d.labels().contains_key(keys::UD_CONTROLLER_REVISION_HASH));
    }
    let pods: Api<Pod> = ns.api();
    let scheduled = |want: usize| {
        let pods = pods.clone();
        async move {
            let live = live_pods(&pods, "app=sample-ud").await?;
            let on_nodes = live
                .iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
                .count();
            if live.len() == want && on_nodes == want {
                Ok(live)
            } else {
                Err(format!("{} pods, {on_nodes} scheduled", live.len()))
            }
        }
    };
    let live = wait_for("4 Pods scheduled", TIMEOUT, || scheduled(4)).await;
    for pod in &live {
        let subset = &pod.labels()[keys::UD_SUBSET_NAME];
        let node = pod.spec.as_ref().unwrap().node_name.clone().unwrap();
        let zone = if node == "kwok-node-0" || node == "kwok-node-1" {
            "zone-a"
        } else {
            "zone-b"
        };
        assert_eq!(subset, zone, "Pod {} on {node}", pod.name_any());
    }
    wait_for(
        "status: 4 replicas, 4 ready, subsetReplicas",
        TIMEOUT,
        || async {
            let s = ud_status(&ns, "sample-ud").await;
            let want: BTreeMap<String, i32> = [("zone-a".into(), 2), ("zone-b".into(), 2)].into();
            if s.replicas == 4
                && s.ready_replicas == 4
                && s.updated_replicas == 4
                && s.subset_replicas == want
                && s.label_selector == "app=sample-ud"
            {
                Ok(())
            } else {
                Err(format!("{s:?}"))
            }
        },
    )
    .await;
    let (ok, out, err) = kubectl_async(
        ["get", "ud", "sample-ud", "-n", &ns.name]
            .map(String::from)
            .to_vec(),
        None,
    )
    .await;
    assert!(ok, "{err}");
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "DESIRED", "CURRENT", "UPDATED", "READY", "AGE"]
    );

    // Scale through the scale subresource: 6 → 3 + 3.
    let (ok, _, err) = kubectl_async(
        ["scale", "ud", "sample-ud", "--replicas=6", "-n", &ns.name]
            .map(String::from)
            .to_vec(),
        None,
    )
    .await;
    assert!(ok, "{err}");
    wait_for("3 + 3", TIMEOUT, || async {
        let r: Vec<i32> = deployments_by_subset(&ns)
            .await
            .values()
            .map(replicas_of)
            .collect();
        if r == [3, 3] {
            Ok(())
        } else {
            Err(format!("{r:?}"))
        }
    })
    .await;

    // A template change rolls every subset's Deployment to the new revision and image.
    let uds: Api<UnitedDeployment> = ns.api();
    let patch = json!({"spec": {"template": {"deploymentTemplate": {"spec": {"template": {"spec": {
        "containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}}}}});
    uds.patch("sample-ud", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch template");
    let old_revision =
        deployments[&"zone-a".to_string()].labels()[keys::UD_CONTROLLER_REVISION_HASH].clone();
    wait_for(
        "every subset Deployment at the new image",
        TIMEOUT,
        || async {
            let d = deployments_by_subset(&ns).await;
            let images: Vec<String> = d
                .values()
                .map(|d| {
                    d.spec
                        .as_ref()
                        .unwrap()
                        .template
                        .spec
                        .as_ref()
                        .unwrap()
                        .containers[0]
                        .image
                        .clone()
                        .unwrap_or_default()
                })
                .collect();
            let revisions: Vec<&String> = d
                .values()
                .map(|d| &d.labels()[keys::UD_CONTROLLER_REVISION_HASH])
                .collect();
            if images == ["nginx:1.27", "nginx:1.27"]
                && revisions.iter().all(|r| **r != old_revision)
            {
                Ok(())
            } else {
                Err(format!("{images:?} {revisions:?}"))
            }
        },
    )
    .await;
    wait_for(
        "6 updated Pods and currentRevision moved",
        TIMEOUT,
        || async {
            let s = ud_status(&ns, "sample-ud").await;
            let updated = s
                .update_status
                .as_ref()
                .map(|u| u.updated_revision.clone())
                .unwrap_or_default();
            if s.updated_ready_replicas == 6 && s.current_revision == updated {
                Ok(())
            } else {
                Err(format!("{s:?}"))
            }
        },
    )
    .await;
    // The Deployments' status can say "updated" a moment before their last old Pod is
    // gone (seen under load): wait for the Pods themselves.
    let live = wait_for("6 Pods at nginx:1.27", TIMEOUT, || async {
        let live = scheduled(6).await?;
        if live.iter().all(|p| image_of(p) == "nginx:1.27") {
            Ok(live)
        } else {
            Err(format!(
                "{:?}",
                live.iter().map(image_of).collect::<Vec<_>>()
            ))
        }
    })
    .await;
    assert!(live.iter().all(|p| image_of(p) == "nginx:1.27"));

    // Removing a subset deletes its Deployment; the other takes all the replicas.
    let patch = json!({"spec": {"topology": {"subsets": [{"name": "zone-a", "nodeSelectorTerm": {"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]}}]}}});
    uds.patch("sample-ud", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("remove zone-b");
    wait_for(
        "zone-b's Deployment deleted, zone-a at 6",
        TIMEOUT,
        || async {
            let d = deployments_by_subset(&ns).await;
            let r: Vec<(String, i32)> =
                d.iter().map(|(s, d)| (s.clone(), replicas_of(d))).collect();
            if r == [("zone-a".to_string(), 6)] {
                Ok(())
            } else {
                Err(format!("{r:?}"))
            }
        },
    )
    .await;
}

#[tokio::test]
async fn admission_rejects_an_impossible_split_and_a_foreign_selector() {
    let ns = TestNamespace::new("ud-admission").await;
    let _ctl = controller(&ns).await;
    let over = ud_yaml("over", 3, "deploymentTemplate", "", "").replace(
        "    - name: zone-b\n",
        "    - name: zone-b\n      replicas: 4\n",
    );
    let err = ns
        .apply(&over)
        .await
        .expect_err("4 of 3 replicas is refused");
    assert!(
        err.contains("specified subsets' replica (4) is greater than UnitedDeployment replica (3)"),
        "{err}"
    );
    let bad = ud_yaml("bad", 2, "deploymentTemplate", "", "").replace(
        "      app: bad\n  template:",
        "      app: other\n  template:",
    );
    let err = ns
        .apply(&bad)
        .await
        .expect_err("selector mismatch is refused");
    assert!(err.contains(keys::UD_MSG_SELECTOR_MISMATCH), "{err}");
}

#[tokio::test]
async fn cloneset_subsets_partition_holds_back_the_update() {
    partition_holds_back_the_update("ud-partition", "").await;
}

/// OpenKruise v1.9's template shape: `cloneSetTemplate.spec` is a v1beta1 CloneSetSpec
/// (`RollingUpdate` + `rollingUpdate.podUpdatePolicy`). Accepted as written, kept as
/// written, and its subset CloneSets carry the partition (written through v1beta1, read
/// here as v1alpha1) and the in-place policy.
#[tokio::test]
async fn cloneset_subsets_from_an_openkruise_1_9_template_partition_the_update() {
    partition_holds_back_the_update(
        "ud-partition-beta",
        "        updateStrategy:\n          type: RollingUpdate\n          rollingUpdate:\n            podUpdatePolicy: InPlaceIfPossible\n            maxUnavailable: 1\n",
    )
    .await;
}

/// A CloneSet UD of 4 over two zones with `zone-a: 2` held back; `workload_spec` goes
/// under the template's `spec:`.
async fn partition_holds_back_the_update(prefix: &str, workload_spec: &str) {
    let ns = TestNamespace::new(prefix).await;
    let _ctl = controller(&ns).await;
    let _cs =
        RunningController::start(cloneset_ctl::IDENTITY, &ns.name, "", cloneset_ctl::run).await;
    let probe: CloneSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "metadata": {"name": "probe"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "probe"}},
                 "template": {"metadata": {"labels": {"app": "probe"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    }))
    .expect("probe");
    kruise_e2e::wait_webhook_effective(&ns.api(), &probe, |cs: &CloneSet| {
        cs.spec.revision_history_limit.is_some()
    })
    .await;

    let partition = "  updateStrategy:\n    manualUpdate:\n      partitions:\n        zone-a: 2\n";
    ns.apply(&ud_yaml(
        "part-ud",
        4,
        "cloneSetTemplate",
        workload_spec,
        partition,
    ))
    .await
    .expect("apply ud");
    let pods: Api<Pod> = ns.api();
    let images = |want: usize| {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels("app=part-ud"))
                .await
                .map_err(|e| e.to_string())?;
            let mut by_subset: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for p in list
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
            {
                by_subset
                    .entry(p.labels()[keys::UD_SUBSET_NAME].clone())
                    .or_default()
                    .push(image_of(p).to_string());
            }
            let total: usize = by_subset.values().map(Vec::len).sum();
            if total == want {
                Ok(by_subset)
            } else {
                Err(format!("{by_subset:?}"))
            }
        }
    };
    wait_for("2 Pods per subset", TIMEOUT, || images(4)).await;
    let clonesets: Api<CloneSet> = ns.api();
    let partitions = wait_for("the CloneSets' partitions", TIMEOUT, || async {
        let list = clonesets
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let p: BTreeMap<String, String> = list
            .items
            .iter()
            .map(|c| {
                (
                    c.labels()[keys::UD_SUBSET_NAME].clone(),
                    format!("{:?}", c.spec.update_strategy.partition),
                )
            })
            .collect();
        if p.len() == 2 {
            Ok(p)
        } else {
            Err(format!("{p:?}"))
        }
    })
    .await;
    assert_eq!(partitions["zone-a"], "Some(Int(2))");
    assert_eq!(partitions["zone-b"], "Some(Int(0))");
    if !workload_spec.is_empty() {
        // Stored as written (no webhook rewrote it), and the subsets update in place.
        let (_, stored, err) = kruise_e2e::kubectl(
            &[
                "get",
                "uniteddeployments.v1alpha1.apps.kruise.io",
                "part-ud",
                "-n",
                &ns.name,
                "-o",
                "jsonpath={.spec.template.cloneSetTemplate.spec.updateStrategy.type}",
            ],
            None,
        );
        assert_eq!(stored, "RollingUpdate", "{err}");
        for cs in clonesets.list(&ListParams::default()).await.unwrap().items {
            assert_eq!(
                cs.spec.update_strategy.type_,
                Some(kruise_api::apps_v1alpha1::CloneSetUpdateStrategyType::InPlaceIfPossible),
                "{}",
                cs.name_any()
            );
        }
    }

    let uds: Api<UnitedDeployment> = ns.api();
    let patch = json!({"spec": {"template": {"cloneSetTemplate": {"spec": {"template": {"spec": {
        "containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}}}}});
    uds.patch("part-ud", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch template");
    wait_for("zone-b updated, zone-a held back", TIMEOUT, || async {
        let by_subset = images(4).await?;
        let b_done = by_subset
            .get("zone-b")
            .is_some_and(|i| i.iter().all(|i| i == "nginx:1.27"));
        if b_done {
            Ok(())
        } else {
            Err(format!("{by_subset:?}"))
        }
    })
    .await;
    // The partition holds: zone-a's Pods stay at the old image.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let by_subset = images(4).await.expect("4 Pods");
    assert_eq!(by_subset["zone-a"], ["nginx:alpine", "nginx:alpine"]);
    let s = ud_status(&ns, "part-ud").await;
    assert_eq!(s.updated_replicas, 2, "{s:?}");
    assert_eq!(
        s.subset_statuses
            .iter()
            .map(|x| x.partition)
            .collect::<Vec<_>>(),
        [2, 0]
    );
    assert_eq!(s.update_status.unwrap().current_partitions["zone-a"], 2);

    // Partition 0 releases zone-a too.
    let patch =
        json!({"spec": {"updateStrategy": {"manualUpdate": {"partitions": {"zone-a": 0}}}}});
    uds.patch("part-ud", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("release partition");
    wait_for("every Pod updated", TIMEOUT, || async {
        let by_subset = images(4).await?;
        if by_subset.values().flatten().all(|i| i == "nginx:1.27") {
            Ok(())
        } else {
            Err(format!("{by_subset:?}"))
        }
    })
    .await;
}

/// Adaptive scheduling: replicas of a subset whose Pods the scheduler cannot place move to
/// the next subset after `rescheduleCriticalSeconds`; the subset reports
/// `Schedulable=False` (reason `reschedule`) for `unschedulableDuration`, then True again
/// (reason `recover`), and a new replica tries it again.
#[tokio::test]
async fn adaptive_moves_unschedulable_replicas_and_recovers() {
    let ns = TestNamespace::new("ud-adaptive").await;
    let _ctl = controller(&ns).await;
    let yaml = r#"apiVersion: apps.kruise.io/v1alpha1
kind: UnitedDeployment
metadata:
  name: adaptive-ud
spec:
  replicas: 2
  selector:
    matchLabels:
      app: adaptive-ud
  template:
    deploymentTemplate:
      metadata:
        labels:
          app: adaptive-ud
      spec:
        template:
          metadata:
            labels:
              app: adaptive-ud
          spec:
            containers:
            - name: nginx
              image: nginx:alpine
  topology:
    scheduleStrategy:
      type: Adaptive
      adaptive:
        rescheduleCriticalSeconds: 3
        unschedulableDuration: 8
    subsets:
    - name: nowhere
      maxReplicas: 2
      nodeSelectorTerm:
        matchExpressions:
        - key: topology.kubernetes.io/zone
          operator: In
          values: [nowhere]
    - name: zone-a
      nodeSelectorTerm:
        matchExpressions:
        - key: topology.kubernetes.io/zone
          operator: In
          values: [zone-a]
"#;
    ns.apply(yaml).await.expect("apply ud");
    let schedulable = |status: &kruise_api::apps_v1alpha1::UnitedDeploymentStatus| {
        status
            .subset_statuses
            .iter()
            .find(|s| s.name == "nowhere")
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Schedulable"))
            .map(|c| (c.status.clone(), c.reason.clone()))
    };
    let replicas = |want: [i32; 2]| {
        let ns = &ns;
        async move {
            let by_subset = deployments_by_subset(ns).await;
            let got = [
                by_subset.get("nowhere").map_or(-1, replicas_of),
                by_subset.get("zone-a").map_or(-1, replicas_of),
            ];
            if got == want {
                Ok(())
            } else {
                Err(format!("replicas nowhere/zone-a {got:?}"))
            }
        }
    };
    // Twice the usual timeout: the scheduler must first mark the Pods unschedulable, then
    // rescheduleCriticalSeconds pass; under a full parallel suite on 2 cores this took over 60 s once
    // (alone: 18 s for the whole test).
    wait_for(
        "nowhere unschedulable, its replicas in zone-a",
        2 * TIMEOUT,
        || async {
            let status = ud_status(&ns, "adaptive-ud").await;
            let c = schedulable(&status);
            if c != Some(("False".into(), "reschedule".into())) {
                return Err(format!("nowhere condition {c:?}"));
            }
            replicas([0, 2]).await
        },
    )
    .await;
    let pods: Api<Pod> = ns.api();
    wait_for("both Pods running in zone-a", TIMEOUT, || async {
        let running: Vec<_> = live_pods(&pods, "app=adaptive-ud")
            .await?
            .iter()
            .map(|p| {
                (
                    p.labels()[keys::UD_SUBSET_NAME].clone(),
                    p.status.as_ref().and_then(|s| s.phase.clone()),
                )
            })
            .collect();
        if running.len() == 2
            && running
                .iter()
                .all(|(s, phase)| s == "zone-a" && phase.as_deref() == Some("Running"))
        {
            Ok(())
        } else {
            Err(format!("{running:?}"))
        }
    })
    .await;
    wait_for("nowhere schedulable again", TIMEOUT, || async {
        let c = schedulable(&ud_status(&ns, "adaptive-ud").await);
        if c == Some(("True".into(), "recover".into())) {
            Ok(())
        } else {
            Err(format!("nowhere condition {c:?}"))
        }
    })
    .await;
    // Running Pods stay where they are; a new replica tries the recovered subset first.
    replicas([0, 2]).await.expect("running Pods kept in zone-a");
    let uds: Api<UnitedDeployment> = ns.api();
    uds.patch(
        "adaptive-ud",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("scale to 3");
    wait_for("the third replica tries nowhere", TIMEOUT, || {
        replicas([1, 2])
    })
    .await;
    wait_for("and moves to zone-a", TIMEOUT, || async {
        let c = schedulable(&ud_status(&ns, "adaptive-ud").await);
        if c != Some(("False".into(), "reschedule".into())) {
            return Err(format!("nowhere condition {c:?}"));
        }
        replicas([0, 3]).await
    })
    .await;
}

/// Per subset: (phase, reserved label) of each live Pod, sorted.
async fn pods_by_subset(
    pods: &Api<Pod>,
    selector: &str,
) -> Result<BTreeMap<String, Vec<(String, String)>>, String> {
    let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for p in live_pods(pods, selector).await? {
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        let reserved = p
            .labels()
            .get(keys::UD_RESERVED_POD)
            .cloned()
            .unwrap_or_default();
        out.entry(p.labels()[keys::UD_SUBSET_NAME].clone())
            .or_default()
            .push((phase, reserved));
    }
    out.values_mut().for_each(|v| v.sort());
    Ok(out)
}

/// `reserveUnschedulablePods`: the Pods of a subset no node fits are kept and labelled
/// reserved after `rescheduleCriticalSeconds`, replacements run in the next subset, the
/// status counts them apart; once a node for them appears they run, and after
/// `unschedulableDuration` Ready they are released and the replacements scaled away.
#[tokio::test]
async fn reserved_pods_are_kept_replaced_and_handed_back() {
    let ns = TestNamespace::new("ud-reserve").await;
    let _ctl = controller(&ns).await;
    let yaml = format!(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: UnitedDeployment
metadata:
  name: reserve-ud
spec:
  replicas: 2
  selector:
    matchLabels:
      app: reserve-ud
  template:
    deploymentTemplate:
      metadata:
        labels:
          app: reserve-ud
      spec:
        template:
          metadata:
            labels:
              app: reserve-ud
          spec:
            containers:
            - name: nginx
              image: nginx:alpine
  topology:
    scheduleStrategy:
      type: Adaptive
      adaptive:
        rescheduleCriticalSeconds: 3
        unschedulableDuration: 2
        reserveUnschedulablePods: true
    subsets:
    - name: later
      nodeSelectorTerm:
        matchExpressions:
        - key: {OWNER}
          operator: In
          values: [{ns}]
      tolerations:
      - key: {OWNER}
        operator: Equal
        value: {ns}
        effect: NoSchedule
    - name: zone-a
      nodeSelectorTerm:
        matchExpressions:
        - key: topology.kubernetes.io/zone
          operator: In
          values: [zone-a]
"#,
        ns = ns.name
    );
    ns.apply(&yaml).await.expect("apply ud");
    let pods: Api<Pod> = ns.api();
    let subset_status = |status: &kruise_api::apps_v1alpha1::UnitedDeploymentStatus| {
        let later = status.subset_statuses.iter().find(|s| s.name == "later");
        let condition = later
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Schedulable"))
            .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()));
        (later.map_or(-1, |s| s.reserved_pods), condition)
    };
    let replicas = || async {
        let by_subset = deployments_by_subset(&ns).await;
        [
            by_subset.get("later").map_or(-1, replicas_of),
            by_subset.get("zone-a").map_or(-1, replicas_of),
        ]
    };
    let pending_reserved = vec![
        ("Pending".to_string(), "true".to_string()),
        ("Pending".to_string(), "true".to_string()),
    ];
    let running = |label: &str| vec![("Running".to_string(), label.to_string()); 2];
    wait_for(
        "later's Pods reserved, 2 replacements in zone-a",
        TIMEOUT,
        || async {
            let got = pods_by_subset(&pods, "app=reserve-ud").await?;
            let want = BTreeMap::from([
                ("later".to_string(), pending_reserved.clone()),
                ("zone-a".to_string(), running("false")),
            ]);
            if got != want {
                return Err(format!("pods {got:?}"));
            }
            let status = ud_status(&ns, "reserve-ud").await;
            let later = subset_status(&status);
            let want_later = (
                2,
                Some((
                    "False".to_string(),
                    "reschedule".to_string(),
                    "reserved pods found".to_string(),
                )),
            );
            if (status.reserved_pods, status.replicas, later.clone()) != (2, 2, want_later) {
                return Err(format!(
                    "reservedPods {} replicas {} later {later:?}",
                    status.reserved_pods, status.replicas
                ));
            }
            match replicas().await {
                [2, 2] => Ok(()),
                got => Err(format!("replicas later/zone-a {got:?}")),
            }
        },
    )
    .await;
    let status = ud_status(&ns, "reserve-ud").await;
    assert_eq!(
        status.label_selector,
        format!("app=reserve-ud,{}=false", keys::UD_RESERVED_POD),
        "the scale subresource counts the Pods that work"
    );
    // The subset's nodes arrive: its Pods run, are released after 2 s Ready, and the
    // replacements go.
    let _node = OwnNode::add(&ns, "node").await;
    wait_for(
        "later runs its own 2 Pods, no replacement left",
        Duration::from_secs(90),
        || async {
            let got = pods_by_subset(&pods, "app=reserve-ud").await?;
            let want = BTreeMap::from([("later".to_string(), running("false"))]);
            if got != want {
                return Err(format!("pods {got:?}"));
            }
            let status = ud_status(&ns, "reserve-ud").await;
            let (reserved, condition) = subset_status(&status);
            let schedulable = condition.as_ref().map(|c| c.0.as_str());
            if (status.reserved_pods, status.replicas, reserved, schedulable)
                != (0, 2, 0, Some("True"))
            {
                return Err(format!(
                    "reservedPods {} replicas {} later {reserved} {condition:?}",
                    status.reserved_pods, status.replicas
                ));
            }
            match replicas().await {
                [2, 0] => Ok(()),
                got => Err(format!("replicas later/zone-a {got:?}")),
            }
        },
    )
    .await;
}
