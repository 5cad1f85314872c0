//! Env from metadata (`InPlaceUpdateEnvFromMetadata`, CloneSet in-place update): on the
//! real node, with `cloneset-ctl` and `daemon-agent` (its container-meta loop) in this
//! process, scoped to the test's namespace. Opt-in as `realnode.rs` (`realnode::`).

mod realnode {
    use std::time::Duration;

    use daemon_agent::AgentConfig;
    use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
    use kruise_api::apps_v1alpha1::CloneSet;
    use kruise_api::appspub::RuntimeContainerMetaSet;
    use kruise_api::keys;
    use kruise_e2e::{RunningController, TestNamespace, events_in, is_ready, wait_for};
    use kube::ResourceExt;
    use kube::api::{ListParams, LogParams, Patch, PatchParams};
    use serde_json::json;

    use crate::realnode::{NODE, ON_REAL_NODE, condition, deployed_controller_pods, real_node};

    const MINUTE: Duration = Duration::from_secs(60);

    fn status<'a>(pod: &'a Pod, name: &str) -> &'a ContainerStatus {
        pod.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.name == name))
            .unwrap_or_else(|| panic!("{} has no status of {name}", pod.name_any()))
    }

    fn running(s: &ContainerStatus) -> bool {
        s.state.as_ref().is_some_and(|st| st.running.is_some())
    }

    async fn the_pod(ns: &TestNamespace) -> Option<Pod> {
        ns.api::<Pod>()
            .list(&ListParams::default().labels("app=envmeta"))
            .await
            .expect("list pods")
            .items
            .into_iter()
            .find(|p| p.metadata.deletion_timestamp.is_none())
    }

    async fn logs(ns: &TestNamespace, pod: &str, container: &str) -> String {
        let params = LogParams {
            container: Some(container.into()),
            ..Default::default()
        };
        ns.api::<Pod>().logs(pod, &params).await.unwrap_or_default()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_label_read_by_env_restarts_exactly_that_container_in_place() {
        let Some(node) = real_node().await else {
            return;
        };
        let ns = TestNamespace::new("envmeta").await;
        let _cloneset = if deployed_controller_pods("cloneset-controller")
            .await
            .is_empty()
        {
            Some(
                RunningController::start(cloneset_ctl::IDENTITY, &ns.name, "", cloneset_ctl::run)
                    .await,
            )
        } else {
            eprintln!("using the deployed cloneset-controller (make deploy-local)");
            None
        };
        let config = AgentConfig {
            node_name: NODE.into(),
            socket: node.containerd_socket.clone().into(),
            max_concurrent_pulls: None,
        };
        let _agent = RunningController::start(daemon_agent::IDENTITY, &ns.name, "", move |rt| {
            daemon_agent::run_agent(rt, config)
        })
        .await;

        // `app` prints the label `version` it reads through the downward API; `side`
        // reads nothing from metadata.
        let image = node.busybox(1);
        let cloneset = |version: &str| {
            format!(
                r#"
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: envmeta
spec:
  replicas: 1
  selector:
    matchLabels:
      app: envmeta
  template:
    metadata:
      labels:
        app: envmeta
        version: {version}
    spec:
{ON_REAL_NODE}
      containers:
      - name: app
        image: {image}
        env:
        - name: VERSION
          valueFrom:
            fieldRef:
              fieldPath: metadata.labels['version']
        command: ["sh", "-c", "echo version=$VERSION; trap 'exit 0' TERM; while true; do sleep 1; done"]
      - name: side
        image: {image}
  updateStrategy:
    type: InPlaceIfPossible
"#
            )
        };
        let probe: CloneSet = serde_saphyr::from_str(&cloneset("v0")).unwrap();
        kruise_e2e::wait_webhook_effective(&ns.api(), &probe, |cs: &CloneSet| {
            cs.spec.revision_history_limit.is_some()
        })
        .await;
        ns.apply(&cloneset("v1")).await.unwrap();

        // Running, and the agent has recorded what `app` was started with.
        let before = wait_for(
            "the Pod running with v1, its meta recorded",
            2 * MINUTE,
            || async {
                let pod = the_pod(&ns).await.ok_or("no Pod yet")?;
                let meta = pod
                    .annotations()
                    .get(keys::RUNTIME_CONTAINERS_META)
                    .and_then(|m| serde_json::from_str::<RuntimeContainerMetaSet>(m).ok());
                let recorded = meta.as_ref().is_some_and(|m| {
                    m.containers.iter().any(|c| {
                        c.name == "app"
                            && Some(&c.container_id) == status(&pod, "app").container_id.as_ref()
                            && c.hashes.extracted_env_from_metadata_hash != 0
                    })
                });
                let printed = logs(&ns, &pod.name_any(), "app").await;
                if is_ready(&pod) && recorded && printed.contains("version=v1") {
                    Ok(pod)
                } else {
                    Err(format!(
                        "ready {}, recorded {recorded}, logs {printed:?}, meta {meta:?}",
                        is_ready(&pod)
                    ))
                }
            },
        )
        .await;
        assert_eq!(
            before.spec.as_ref().unwrap().node_name.as_deref(),
            Some(NODE)
        );

        // Only the label changes.
        ns.api::<CloneSet>()
            .patch(
                "envmeta",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"template": {"metadata": {"labels": {"version": "v2"}}}}}),
                ),
            )
            .await
            .unwrap();

        let after = wait_for(
            "app restarted with v2, the update complete",
            2 * MINUTE,
            || async {
                let pod = the_pod(&ns).await.ok_or("no Pod")?;
                let app = status(&pod, "app");
                let printed = logs(&ns, &pod.name_any(), "app").await;
                // Once, or twice when the kubelet restarted it from a view of the Pod that
                // still had v1 (seen under load): the agent then reads v1 inside it and
                // stops it again, and the kubelet's next start has v2.
                let done = running(app)
                    && (1..=2).contains(&app.restart_count)
                    && printed.contains("version=v2")
                    && is_ready(&pod)
                    && condition(&pod, keys::INPLACE_UPDATE_READY).as_deref() == Some("True");
                if done {
                    Ok(pod)
                } else {
                    Err(format!(
                        "app {:?}, logs {printed:?}, InPlaceUpdateReady {:?}, meta {:?}",
                        app.state,
                        condition(&pod, keys::INPLACE_UPDATE_READY),
                        pod.annotations().get(keys::RUNTIME_CONTAINERS_META)
                    ))
                }
            },
        )
        .await;
        assert_eq!(after.uid(), before.uid(), "the same Pod, updated in place");
        assert_eq!(
            after.labels().get("version").map(String::as_str),
            Some("v2")
        );
        assert_ne!(
            status(&after, "app").container_id,
            status(&before, "app").container_id
        );
        assert_eq!(
            status(&after, "side").restart_count,
            0,
            "only the container reading the label restarted"
        );
        assert_eq!(
            status(&after, "side").container_id,
            status(&before, "side").container_id
        );
        assert_eq!(
            after.status.as_ref().unwrap().pod_ip,
            before.status.as_ref().unwrap().pod_ip,
            "the sandbox (and its IP) stayed"
        );
        wait_for("the agent's Killing event", MINUTE, || async {
            let events = events_in(&ns, &after.name_any()).await;
            if events.iter().any(|e| {
                e.reason == "Killing"
                    && e.note.contains("container app ")
                    && e.reporting_controller == daemon_agent::CONTROLLER_NAME
            }) {
                Ok(())
            } else {
                Err(format!("{events:?}"))
            }
        })
        .await;
        // The status follows the Pod's readiness through the controller's cache: awaited,
        // not read once (it lagged the event by a moment in one run).
        wait_for(
            "the CloneSet status: 1 updated, 1 updated ready",
            MINUTE,
            || async {
                let cs: CloneSet = ns.api().get("envmeta").await.map_err(|e| e.to_string())?;
                let st = cs.status.unwrap_or_default();
                if (st.updated_replicas, st.updated_ready_replicas) == (1, 1) {
                    Ok(())
                } else {
                    Err(format!("{st:?}"))
                }
            },
        )
        .await;
    }
}
