//! PodProbeMarker on the real cluster (docs/podprobemarker.md): podprobemarker-ctl
//! in-process per namespace, its Pods pinned to the shared kwok nodes `kwok-node-0` and
//! `kwok-node-1`. No node agent runs probes on kwok nodes: the test writes NodePodProbe
//! status as the agent would, and checks what the controller marks on the Pods.
//!
//! NodePodProbes are cluster-scoped and shared (one per node): the test only reads and
//! writes the entries of its own namespace.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::{
    ContainerProbeState, NodePodProbe, POD_PROBE_MARKER_FINALIZER, PodProbeMarker, PodProbeStatus,
    ProbeState,
};
use kruise_e2e::{RunningController, TestNamespace, wait_for};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);
const NODES: [&str; 2] = ["kwok-node-0", "kwok-node-1"];
const HEALTHY: &str = "game.kruise.io/healthy";
const COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// podprobemarker-ctl scoped to `ns`, its validation in effect.
async fn controller(ns: &TestNamespace) -> RunningController {
    if std::env::var_os("RUST_LOG").is_some() {
        kruise_runtime::telemetry::init(kruise_runtime::settings::LogFormat::Text);
    }
    let ctl = RunningController::start(
        podprobemarker_ctl::IDENTITY,
        &ns.name,
        "",
        podprobemarker_ctl::run,
    )
    .await;
    // Only the webhook refuses a '#' in a probe name (the schema allows it).
    let mut probe = marker("probe");
    probe.spec.probes[0].name = "a#b".into();
    let api = ns.api::<PodProbeMarker>();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    wait_for(
        "the PodProbeMarker webhook to be called",
        MINUTE,
        || async {
            match api.create(&dry_run, &probe).await {
                Err(e) if e.to_string().contains("probe name can't contains '#'") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    ctl
}

/// A marker selecting `app=web`: an exec probe `healthy` (condition, label when
/// Succeeded, deletion cost when Failed) and a tcpSocket probe `tcp` on the named port
/// `http`.
fn marker(name: &str) -> PodProbeMarker {
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "probes": [
                {
                    "name": "healthy",
                    "containerName": "main",
                    "probe": {"exec": {"command": ["/bin/sh", "-c", "ls /"]}, "periodSeconds": 1},
                    "podConditionType": HEALTHY,
                    "markerPolicy": [
                        {"state": "Succeeded", "labels": {"nginx": "healthy"}},
                        {"state": "Failed", "annotations": {COST: "-10"}}
                    ]
                },
                {
                    "name": "tcp",
                    "containerName": "main",
                    "probe": {"tcpSocket": {"port": "http"}},
                    "podConditionType": "game.kruise.io/tcp"
                }
            ]
        }
    }))
    .unwrap()
}

fn pod(name: &str, app: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "main",
                "image": "nginx:alpine",
                "ports": [{"name": "http", "containerPort": 8080}]
            }]
        }
    }))
    .unwrap()
}

/// The entries of `ns` in `node`'s NodePodProbe: (Pod name, IP, probe names, tcp port).
async fn listed(
    ns: &TestNamespace,
    node: &str,
) -> Result<Vec<(String, String, Vec<String>)>, String> {
    let api: Api<NodePodProbe> = Api::all(ns.client.clone());
    let npp = api.get(node).await.map_err(|e| e.to_string())?;
    Ok(npp
        .spec
        .pod_probes
        .iter()
        .filter(|p| p.namespace == ns.name)
        .map(|p| {
            let probes = p
                .probes
                .iter()
                .map(|c| match &c.probe.tcp_socket {
                    Some(tcp) => format!("{}:{:?}", c.name, tcp.port),
                    None => c.name.clone(),
                })
                .collect();
            (p.name.clone(), p.ip.clone(), probes)
        })
        .collect())
}

/// Writes `state` of `<marker>#healthy` for `pod` into its node's NodePodProbe status, as
/// the node agent does (other namespaces' entries kept).
async fn report(ns: &TestNamespace, node: &str, pod: &Pod, state: &str, message: &str) {
    let api: Api<NodePodProbe> = Api::all(ns.client.clone());
    wait_for("the status write", MINUTE, || async {
        let mut npp = api.get(node).await.map_err(|e| e.to_string())?;
        let status = npp.status.get_or_insert_with(Default::default);
        status.pod_probe_statuses.retain(|s| s.namespace != ns.name);
        status.pod_probe_statuses.push(PodProbeStatus {
            name: pod.name_any(),
            namespace: ns.name.clone(),
            uid: pod.uid().unwrap_or_default(),
            probe_states: vec![ContainerProbeState {
                name: "ppm#healthy".into(),
                state: ProbeState::from(state),
                message: message.into(),
                last_probe_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    jiff::Timestamp::now(),
                )),
                last_transition_time: None,
            }],
        });
        api.replace_status(node, &PostParams::default(), &npp)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
}

fn condition<'a>(
    pod: &'a Pod,
    type_: &str,
) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

#[tokio::test]
async fn nodepodprobes_list_selected_pods_and_results_mark_them() {
    let ns = TestNamespace::new("e2e-ppm").await;
    let _ctl = controller(&ns).await;
    let pods = ns.api::<Pod>();
    let client_npps: Api<NodePodProbe> = Api::all(ns.client.clone());
    wait_for("a NodePodProbe per Ready node", MINUTE, || async {
        for node in NODES {
            client_npps
                .get(node)
                .await
                .map_err(|e| format!("{node}: {e}"))?;
        }
        Ok(())
    })
    .await;
    for (name, app, node) in [
        ("web-0", "web", NODES[0]),
        ("web-1", "web", NODES[1]),
        ("db-0", "db", NODES[0]),
    ] {
        pods.create(&PostParams::default(), &pod(name, app, node))
            .await
            .unwrap();
    }
    let markers = ns.api::<PodProbeMarker>();
    markers
        .create(&PostParams::default(), &marker("ppm"))
        .await
        .unwrap();

    // Each node lists its selected Pod, with both probes and the named port resolved.
    for (node, name) in [(NODES[0], "web-0"), (NODES[1], "web-1")] {
        let entries = wait_for(&format!("{node} to list {name}"), MINUTE, || async {
            let entries = listed(&ns, node).await?;
            match entries.as_slice() {
                [(n, ip, _)] if n == name && !ip.is_empty() => Ok(entries),
                _ => Err(format!("{entries:?}")),
            }
        })
        .await;
        let ip = pods
            .get(name)
            .await
            .unwrap()
            .status
            .unwrap()
            .pod_ip
            .unwrap();
        assert_eq!(entries[0].1, ip);
        assert_eq!(entries[0].2, ["ppm#healthy", "ppm#tcp:Int(8080)"]);
    }
    let ppm = wait_for("the marker's status", MINUTE, || async {
        let ppm = markers.get("ppm").await.map_err(|e| e.to_string())?;
        match &ppm.status {
            Some(s) if s.matched_pods == 2 && s.observed_generation == 1 => Ok(ppm),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(
        ppm.finalizers()
            .iter()
            .any(|f| f == POD_PROBE_MARKER_FINALIZER)
    );

    // A Succeeded result: the label, the condition.
    let web0 = pods.get("web-0").await.unwrap();
    report(&ns, NODES[0], &web0, "Succeeded", "ok").await;
    wait_for("web-0 marked healthy", MINUTE, || async {
        let pod = pods.get("web-0").await.map_err(|e| e.to_string())?;
        let labelled = pod.labels().get("nginx").map(String::as_str) == Some("healthy");
        let c = condition(&pod, HEALTHY);
        if labelled
            && c.is_some_and(|c| c.status == "True" && c.message.as_deref() == Some("ok"))
            && !pod.annotations().contains_key(COST)
        {
            Ok(())
        } else {
            Err(format!("{:?} {c:?}", pod.labels()))
        }
    })
    .await;

    // A Failed result: the Succeeded label goes, the Failed annotation comes.
    report(&ns, NODES[0], &web0, "Failed", "boom").await;
    wait_for("web-0 marked failed", MINUTE, || async {
        let pod = pods.get("web-0").await.map_err(|e| e.to_string())?;
        let c = condition(&pod, HEALTHY);
        if !pod.labels().contains_key("nginx")
            && pod.annotations().get(COST).map(String::as_str) == Some("-10")
            && c.is_some_and(|c| c.status == "False" && c.message.as_deref() == Some("boom"))
        {
            Ok(())
        } else {
            Err(format!("{:?} {:?} {c:?}", pod.labels(), pod.annotations()))
        }
    })
    .await;
    let db = pods.get("db-0").await.unwrap();
    assert!(condition(&db, HEALTHY).is_none(), "db-0 is not selected");

    // A Pod deleted leaves its node's list.
    pods.delete("web-1", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    wait_for("web-1 to leave the list", MINUTE, || async {
        let entries = listed(&ns, NODES[1]).await?;
        if entries.is_empty() {
            Ok(())
        } else {
            Err(format!("{entries:?}"))
        }
    })
    .await;

    // The marker deleted: its probes leave every list, then its finalizer goes.
    markers
        .delete("ppm", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the marker gone", MINUTE, || async {
        match markers.get_opt("ppm").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(m) => Err(format!("{:?}", m.finalizers())),
        }
    })
    .await;
    for node in NODES {
        assert_eq!(listed(&ns, node).await.unwrap(), vec![]);
    }
}

#[tokio::test]
async fn invalid_markers_are_refused_with_field_errors() {
    let ns = TestNamespace::new("e2e-ppm-webhook").await;
    let _ctl = controller(&ns).await;
    let markers = ns.api::<PodProbeMarker>();
    let mut bad = marker("bad");
    bad.spec.probes[1].pod_condition_type = "game.kruise.io/healthy".into();
    let err = markers
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(r#"spec.probes: Invalid value: "game.kruise.io/healthy": podConditionType game.kruise.io/healthy must be unique in podProbeMarker"#),
        "{err}"
    );
    markers
        .create(&PostParams::default(), &marker("good"))
        .await
        .unwrap();
    let err = markers
        .patch(
            "good",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"selector": {"matchLabels": {"app": "db"}}}})),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("selector: Invalid value: selector must be immutable"),
        "{err}"
    );
    // Gone before the controller stops, so its finalizer does not hold the namespace.
    markers
        .delete("good", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the marker gone", MINUTE, || async {
        match markers.get_opt("good").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(m) => Err(format!("{:?}", m.finalizers())),
        }
    })
    .await;
}

/// The node agent's prober on the real node `real-0` (opt-in, docs/local-cluster.md "The
/// real node"): the controller and the agent's prober, both scoped to the test's
/// namespace, run an exec probe in a busybox container through containerd.
mod realnode {
    use super::*;

    const NODE: &str = "real-0";

    fn real_pod(image: &str) -> Pod {
        serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probed", "labels": {"app": "web"}},
            "spec": {
                "nodeSelector": {"node.kruise.io/real": "true"},
                "tolerations": [{"key": "node.kruise.io/real", "operator": "Exists", "effect": "NoSchedule"}],
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "main",
                    "image": image,
                    "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"],
                    "ports": [{"name": "http", "containerPort": 8080}]
                }]
            }
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn the_agent_runs_exec_probes_and_the_pod_is_marked() {
        let Some(node) = crate::realnode::real_node().await else {
            return;
        };
        let ns = TestNamespace::new("e2e-ppm-real").await;
        let _ctl = controller(&ns).await;
        let socket = std::path::PathBuf::from(node.containerd_socket.clone());
        let _agent = RunningController::start(daemon_agent::IDENTITY, &ns.name, "", move |rt| {
            daemon_agent::podprobe::run_standalone(rt, NODE.into(), socket)
        })
        .await;
        let pods = ns.api::<Pod>();
        let image = format!("{}/kruise-rs/busybox:1", node.registry);
        pods.create(&PostParams::default(), &real_pod(&image))
            .await
            .unwrap();
        let mut ppm = marker("ppm");
        // Only the exec probe: it prints "data" and succeeds.
        ppm.spec.probes.truncate(1);
        ppm.spec.probes[0].probe.exec = Some(k8s_openapi::api::core::v1::ExecAction {
            command: Some(vec!["sh".into(), "-c".into(), "echo data".into()]),
        });
        let markers = ns.api::<PodProbeMarker>();
        markers.create(&PostParams::default(), &ppm).await.unwrap();
        wait_for(
            "the probe to succeed and mark the Pod",
            2 * MINUTE,
            || async {
                let pod = pods.get("probed").await.map_err(|e| e.to_string())?;
                let c = condition(&pod, HEALTHY);
                if pod.labels().get("nginx").map(String::as_str) == Some("healthy")
                    && c.is_some_and(|c| c.status == "True" && c.message.as_deref() == Some("data"))
                {
                    Ok(())
                } else {
                    Err(format!("{:?} {c:?}", pod.labels()))
                }
            },
        )
        .await;
        wait_for("the KruiseProbeSucceeded event", MINUTE, || async {
            let events = kruise_e2e::events_in(&ns, "probed").await;
            if events.iter().any(|e| e.reason == "KruiseProbeSucceeded") {
                Ok(())
            } else {
                Err(format!("{events:?}"))
            }
        })
        .await;
        // The command now fails: the label goes, the cost annotation comes.
        let mut ppm = markers.get("ppm").await.unwrap();
        ppm.spec.probes[0].probe.exec = Some(k8s_openapi::api::core::v1::ExecAction {
            command: Some(vec!["sh".into(), "-c".into(), "exit 1".into()]),
        });
        markers
            .replace("ppm", &PostParams::default(), &ppm)
            .await
            .unwrap();
        wait_for("the probe to fail and mark the Pod", 2 * MINUTE, || async {
            let pod = pods.get("probed").await.map_err(|e| e.to_string())?;
            let c = condition(&pod, HEALTHY);
            if !pod.labels().contains_key("nginx")
                && pod.annotations().get(COST).map(String::as_str) == Some("-10")
                && c.is_some_and(|c| c.status == "False")
            {
                Ok(())
            } else {
                Err(format!("{:?} {c:?}", pod.labels()))
            }
        })
        .await;
        markers
            .delete("ppm", &DeleteParams::default())
            .await
            .unwrap();
        wait_for("the marker gone", MINUTE, || async {
            match markers.get_opt("ppm").await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(m) => Err(format!("{:?}", m.finalizers())),
            }
        })
        .await;
    }
}
