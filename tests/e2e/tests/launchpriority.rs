//! Container launch priority (docs/container-launch-priority.md,
//! examples/pod-launch-priority-*.yaml): `launchpriority-ctl` runs
//! in this process, scoped to the test's namespace.
//!
//! - admission (any cluster): a Pod with a `KRUISE_CONTAINER_PRIORITY` that is not an
//!   integer in range is refused naming the field; a one-container Pod is untouched; a
//!   Pod with only `generateName` is named, and its barriers name `<that name>-barrier`;
//! - the controller (kwok nodes): the barrier ConfigMap is created owned by the Pod, the
//!   keys released, the Pod annotated completed and its watch label removed;
//! - on the real node (`realnode::`, opt-in as `realnode.rs`): the kubelet really starts
//!   the later container only after the earlier one is ready, for `Ordered` (N5) and for
//!   the env priority (N6).

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kruise_api::keys;
use kruise_e2e::{RunningController, TestNamespace, wait_for};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const MINUTE: Duration = Duration::from_secs(60);

async fn start(ns: &TestNamespace) -> RunningController {
    let ctl = RunningController::start(
        launchpriority_ctl::IDENTITY,
        &ns.name,
        "",
        launchpriority_ctl::run,
    )
    .await;
    // Until the apiserver calls the webhook, a two-container Ordered Pod is admitted
    // without barriers.
    let probe = pod_json("probe", true, &[("a", None), ("b", None)], "", None);
    kruise_e2e::wait_webhook_effective(&ns.api::<Pod>(), &probe, |p: &Pod| {
        barrier_of(p, "b").is_some()
    })
    .await;
    ctl
}

/// A Pod: `ordered` sets the annotation; containers `(name, KRUISE_CONTAINER_PRIORITY)`;
/// `spec_extra`: JSON fields merged into the spec (placement); `image`: the image.
fn pod_json(
    name: &str,
    ordered: bool,
    containers: &[(&str, Option<&str>)],
    image: &str,
    spec_extra: Option<Value>,
) -> Pod {
    let image = if image.is_empty() { "busybox" } else { image };
    let containers: Vec<Value> = containers
        .iter()
        .map(|(n, p)| {
            let mut c = json!({"name": n, "image": image});
            if let Some(p) = p {
                c["env"] = json!([{"name": keys::KRUISE_CONTAINER_PRIORITY, "value": p}]);
            }
            c
        })
        .collect();
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {},
        "spec": {"containers": containers},
    });
    if name.ends_with('-') {
        pod["metadata"]["generateName"] = json!(name);
    } else {
        pod["metadata"]["name"] = json!(name);
    }
    if ordered {
        pod["metadata"]["annotations"] = json!({keys::CONTAINER_LAUNCH_PRIORITY: "Ordered"});
    }
    if let Some(Value::Object(extra)) = spec_extra {
        for (k, v) in extra {
            pod["spec"][k] = v;
        }
    }
    serde_json::from_value(pod).unwrap()
}

/// The container's barrier: (ConfigMap, key).
fn barrier_of(pod: &Pod, container: &str) -> Option<(String, String)> {
    let c = pod
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == container)?;
    let r = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == keys::KRUISE_CONTAINER_BARRIER)?
        .value_from
        .as_ref()?
        .config_map_key_ref
        .clone()?;
    Some((r.name, r.key))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_priority_admission() {
    let ns = TestNamespace::new("launch-admit").await;
    let _ctl = start(&ns).await;
    let pods: Api<Pod> = ns.api();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };

    // A bad priority: refused, naming the field and the range.
    let bad = pod_json(
        "bad",
        false,
        &[("main", Some("first")), ("side", Some("1"))],
        "",
        None,
    );
    let err = pods
        .create(&dry_run, &bad)
        .await
        .expect_err("a bad priority is refused");
    let kube::Error::Api(status) = err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains(
            "spec.containers[0].env[0].value: Invalid value: \"first\": must be an integer in [-2147483647, 2147483647]"
        ),
        "{}",
        status.message
    );
    let out_of_range = pod_json(
        "big",
        false,
        &[("main", Some("2147483648")), ("side", None)],
        "",
        None,
    );
    assert!(pods.create(&dry_run, &out_of_range).await.is_err());

    // One container (even Ordered): untouched.
    let one = pods
        .create(
            &dry_run,
            &pod_json("one", true, &[("only", Some("5"))], "", None),
        )
        .await
        .expect("a one-container Pod is admitted");
    assert!(barrier_of(&one, "only").is_none());
    assert!(
        !one.labels()
            .contains_key(keys::CONTAINER_LAUNCH_BARRIER_LABEL)
    );

    // Equal priorities: untouched.
    let equal = pods
        .create(
            &dry_run,
            &pod_json(
                "equal",
                false,
                &[("a", Some("2")), ("b", Some("2"))],
                "",
                None,
            ),
        )
        .await
        .unwrap();
    assert!(barrier_of(&equal, "a").is_none());

    // generateName only: named first, barriers follow the name (N6's priorities).
    let generated = pods
        .create(
            &dry_run,
            &pod_json(
                "gen-",
                false,
                &[("main", None), ("sidecar", Some("1"))],
                "",
                None,
            ),
        )
        .await
        .unwrap();
    let name = generated.name_any();
    assert!(
        name.starts_with("gen-") && name.len() == "gen-".len() + 5,
        "{name}"
    );
    assert_eq!(
        barrier_of(&generated, "sidecar"),
        Some((format!("{name}-barrier"), "p_1".into()))
    );
    assert_eq!(
        barrier_of(&generated, "main"),
        Some((format!("{name}-barrier"), "p_0".into()))
    );
    assert_eq!(
        generated
            .labels()
            .get(keys::CONTAINER_LAUNCH_BARRIER_LABEL)
            .map(String::as_str),
        Some("true")
    );
}

/// The barrier ConfigMap's keys.
async fn barrier_keys(ns: &TestNamespace, pod: &str) -> Option<Vec<String>> {
    let cm = ns
        .api::<ConfigMap>()
        .get_opt(&format!("{pod}-barrier"))
        .await
        .unwrap()?;
    Some(cm.data.unwrap_or_default().into_keys().collect())
}

/// Waits until the Pod is annotated completed, and checks what the controller left.
async fn wait_completed(ns: &TestNamespace, name: &str, keys_expected: &[&str]) -> Pod {
    let pod = wait_for(&format!("{name} launch completed"), 2 * MINUTE, || async {
        let pod = ns.api::<Pod>().get(name).await.map_err(|e| e.to_string())?;
        let done = pod
            .annotations()
            .get(keys::CONTAINER_LAUNCH_PRIORITY_COMPLETED)
            .is_some_and(|v| v == "true");
        if done {
            Ok(pod)
        } else {
            Err(format!(
                "barrier keys {:?}, statuses {:?}",
                barrier_keys(ns, name).await,
                pod.status
                    .as_ref()
                    .and_then(|s| s.container_statuses.clone())
            ))
        }
    })
    .await;
    let mut expected: Vec<String> = keys_expected.iter().map(|k| k.to_string()).collect();
    expected.sort();
    assert_eq!(barrier_keys(ns, name).await, Some(expected));
    let cm = ns
        .api::<ConfigMap>()
        .get(&format!("{name}-barrier"))
        .await
        .unwrap();
    let owner = &cm.owner_references()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Pod", name));
    assert_eq!(
        Some(&owner.uid),
        pod.metadata.uid.as_ref(),
        "owned by this Pod"
    );
    assert!(
        !pod.labels()
            .contains_key(keys::CONTAINER_LAUNCH_BARRIER_LABEL),
        "the watch label is removed at completion"
    );
    pod
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_priority_barrier_released_on_kwok() {
    let ns = TestNamespace::new("launch-kwok").await;
    let _ctl = start(&ns).await;
    // kwok makes every container ready at once (it ignores the barrier): the controller
    // still creates the barrier, releases the next level and completes.
    let pod = pod_json(
        "three",
        false,
        &[("a", Some("2")), ("b", Some("1")), ("c", None)],
        "",
        None,
    );
    ns.api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    wait_completed(&ns, "three", &["p_2", "p_1", "p_0"]).await;
}

/// On the real node: the kubelet holds the later containers back.
mod realnode {
    use super::*;
    use crate::realnode::{NODE, real_node};
    use k8s_openapi::api::core::v1::ContainerStatus;

    /// Placement on real-0 (its label and taint), a short grace period.
    fn on_real_node() -> Value {
        json!({
            "nodeSelector": {"node.kruise.io/real": "true"},
            "tolerations": [{"key": "node.kruise.io/real", "operator": "Exists", "effect": "NoSchedule"}],
            "terminationGracePeriodSeconds": 5,
        })
    }

    /// How long the earlier container takes to become ready after it starts.
    const READY_AFTER: i64 = 4;

    /// `slow` becomes ready READY_AFTER seconds after it starts (a readiness probe on a
    /// file it writes then; the image, FROM scratch, has no /tmp); every container runs
    /// until TERM.
    fn with_commands(mut pod: Pod, slow: &str) -> Pod {
        for c in &mut pod.spec.as_mut().unwrap().containers {
            let wait = if c.name == slow {
                format!("sleep {READY_AFTER}; mkdir -p /tmp; touch /tmp/ready; ")
            } else {
                "mkdir -p /tmp; touch /tmp/ready; ".into()
            };
            c.command = Some(vec![
                "sh".into(),
                "-c".into(),
                format!("{wait}trap 'exit 0' TERM; while true; do sleep 1; done"),
            ]);
            c.readiness_probe = Some(
                serde_json::from_value(json!({
                    "exec": {"command": ["test", "-f", "/tmp/ready"]},
                    "periodSeconds": 1,
                }))
                .unwrap(),
            );
        }
        pod
    }

    fn status<'a>(pod: &'a Pod, name: &str) -> &'a ContainerStatus {
        pod.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.name == name))
            .unwrap_or_else(|| panic!("no status of {name}"))
    }

    fn started_at(pod: &Pod, name: &str) -> i64 {
        status(pod, name)
            .state
            .as_ref()
            .and_then(|s| s.running.as_ref())
            .and_then(|r| r.started_at.as_ref())
            .unwrap_or_else(|| panic!("{name} not running"))
            .0
            .as_second()
    }

    /// Creates the Pod, waits until every container is running and ready, and checks that
    /// `later` started at least READY_AFTER seconds after `earlier` (which was not ready
    /// before then: without the barrier both start within the same second).
    async fn starts_in_order(ns: &TestNamespace, pod: Pod, earlier: &str, later: &str) -> Pod {
        let name = pod.name_any();
        ns.api::<Pod>()
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
        let pod = wait_for(&format!("{name} Running and Ready"), 2 * MINUTE, || async {
            let pod = ns
                .api::<Pod>()
                .get(&name)
                .await
                .map_err(|e| e.to_string())?;
            if kruise_e2e::is_ready(&pod) {
                Ok(pod)
            } else {
                Err(format!("{:?}", pod.status))
            }
        })
        .await;
        assert_eq!(pod.spec.as_ref().unwrap().node_name.as_deref(), Some(NODE));
        let (e, l) = (started_at(&pod, earlier), started_at(&pod, later));
        eprintln!(
            "{name}: {earlier} started at {e}, {later} at {l} (+{}s)",
            l - e
        );
        assert!(
            l - e >= READY_AFTER,
            "{later} started {}s after {earlier}, which became ready only {READY_AFTER}s after it started",
            l - e
        );
        for c in [earlier, later] {
            assert_eq!(status(&pod, c).restart_count, 0, "{c} started once");
        }
        pod
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ordered_pod_starts_its_containers_in_order() {
        let Some(node) = real_node().await else {
            return;
        };
        let ns = TestNamespace::new("launch-ordered").await;
        let _ctl = start(&ns).await;
        // N5: [sidecar, main], Ordered.
        let pod = with_commands(
            pod_json(
                "ordered",
                true,
                &[("sidecar", None), ("main", None)],
                &node.busybox(1),
                Some(on_real_node()),
            ),
            "sidecar",
        );
        let pod = starts_in_order(&ns, pod, "sidecar", "main").await;
        assert_eq!(
            barrier_of(&pod, "sidecar"),
            Some(("ordered-barrier".into(), "p_0".into()))
        );
        assert_eq!(
            barrier_of(&pod, "main"),
            Some(("ordered-barrier".into(), "p_-1".into()))
        );
        wait_completed(&ns, "ordered", &["p_0", "p_-1"]).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn env_priority_pod_starts_the_higher_priority_first() {
        let Some(node) = real_node().await else {
            return;
        };
        let ns = TestNamespace::new("launch-env").await;
        let _ctl = start(&ns).await;
        // N6: [main (no env), sidecar (KRUISE_CONTAINER_PRIORITY=1)].
        let pod = with_commands(
            pod_json(
                "by-env",
                false,
                &[("main", None), ("sidecar", Some("1"))],
                &node.busybox(1),
                Some(on_real_node()),
            ),
            "sidecar",
        );
        let pod = starts_in_order(&ns, pod, "sidecar", "main").await;
        assert_eq!(barrier_of(&pod, "sidecar").unwrap().1, "p_1");
        assert_eq!(barrier_of(&pod, "main").unwrap().1, "p_0");
        wait_completed(&ns, "by-env", &["p_1", "p_0"]).await;
    }
}
