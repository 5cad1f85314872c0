//! PodUnavailableBudget on the real cluster, through the apiserver's admission chain:
//! the seeds' P1 (CloneSet) and P2 (a user's CRD read through its scale subresource), a
//! Deployment target, 50 concurrent deleters against a budget of 3, two admission paths
//! racing for the last unit, dry runs (answered, never spending), validation and the
//! gates.
//!
//! Pods whose readiness the test must hold carry the readiness gate `e2e.kruise.io/ready`
//! (the kwok stages make Ready follow it), so a replacement Pod cannot give the budget
//! back before the test has looked.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_api::keys;
use kruise_api::policy_v1alpha1::{PodUnavailableBudget, PodUnavailableBudgetStatus, PubOperation};
use kruise_e2e::{
    RunningController, TestNamespace, events_in, is_ready, kubectl, wait_events, wait_for,
};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);
const GATE: &str = "e2e.kruise.io/ready";
const EXHAUSTED: &str = "is forbidden: pub unavailable allowed is negative";

async fn pub_controller(ns: &TestNamespace, gates: &str) -> RunningController {
    // RUST_LOG=pub_ctl=debug shows what the controller and the webhook decided.
    if std::env::var_os("RUST_LOG").is_some() {
        kruise_runtime::telemetry::init(kruise_runtime::settings::LogFormat::Text);
    }
    let ctl = RunningController::start(pub_ctl::IDENTITY, &ns.name, gates, pub_ctl::run).await;
    // The validating configuration holds the PUB and the Pod webhooks: once a PUB without
    // selector is refused, the apiserver calls both.
    let probe: PodUnavailableBudget = serde_json::from_value(json!({
        "apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
        "metadata": {"name": "probe"}, "spec": {"maxUnavailable": 1}}))
    .unwrap();
    let api: Api<PodUnavailableBudget> = ns.api();
    wait_for("the apiserver to call the PUB webhook", MINUTE, || async {
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        match api.create(&dry_run, &probe).await {
            Err(e) if e.to_string().contains("no selector or targetRef") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    ctl
}

async fn cloneset_controller(ns: &TestNamespace) -> RunningController {
    RunningController::start(cloneset_ctl::IDENTITY, &ns.name, "", cloneset_ctl::run).await
}

fn pub_json(name: &str, spec: serde_json::Value, annotations: serde_json::Value) -> String {
    json!({"apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
           "metadata": {"name": name, "annotations": annotations}, "spec": spec})
    .to_string()
}

async fn status(ns: &TestNamespace, name: &str) -> PodUnavailableBudgetStatus {
    ns.api::<PodUnavailableBudget>()
        .get(name)
        .await
        .expect("get pub")
        .status
        .unwrap_or_default()
}

/// (totalReplicas, desiredAvailable, currentAvailable, unavailableAllowed)
fn counts(s: &PodUnavailableBudgetStatus) -> (i32, i32, i32, i32) {
    (
        s.total_replicas,
        s.desired_available,
        s.current_available,
        s.unavailable_allowed,
    )
}

async fn wait_status(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    check: impl Fn(&PodUnavailableBudgetStatus) -> bool,
) -> PodUnavailableBudgetStatus {
    let api: Api<PodUnavailableBudget> = ns.api();
    wait_for(what, MINUTE, || async {
        let pub_ = api.get(name).await.map_err(|e| e.to_string())?;
        let s = pub_.status.clone().unwrap_or_default();
        if s.observed_generation == pub_.metadata.generation.unwrap_or_default() && check(&s) {
            Ok(s)
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await
}

/// Active Pods labelled `app=<app>`, sorted by name.
async fn pods_of(ns: &TestNamespace, app: &str) -> Vec<Pod> {
    let mut pods: Vec<Pod> = ns
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    pods.sort_by_key(|p| p.name_any());
    pods
}

async fn set_gate(ns: &TestNamespace, pod: &str) {
    let patch = json!({"status": {"conditions": [{"type": GATE, "status": "True"}]}});
    ns.api::<Pod>()
        .patch_status(pod, &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .expect("set readiness gate");
}

/// Waits for `n` Running Pods of `app` (gated ones not Ready yet), opens the gate of
/// every one and waits until all are Ready and annotated with `related`.
async fn ready_pods(ns: &TestNamespace, app: &str, n: usize, related: &str) -> Vec<Pod> {
    wait_for(&format!("{n} running pods of {app}"), MINUTE, || async {
        let pods = pods_of(ns, app).await;
        let running = pods
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if pods.len() == n && running == n {
            Ok(())
        } else {
            Err(format!("{} pods, {running} running", pods.len()))
        }
    })
    .await;
    for p in pods_of(ns, app).await {
        if !is_ready(&p) {
            set_gate(ns, &p.name_any()).await;
        }
    }
    wait_for(
        &format!("{n} ready, protected pods of {app}"),
        MINUTE,
        || async {
            let pods = pods_of(ns, app).await;
            let good = pods
                .iter()
                .filter(|p| {
                    is_ready(p)
                        && p.annotations().get(keys::PUB_RELATED).map(String::as_str)
                            == Some(related)
                })
                .count();
            if pods.len() == n && good == n {
                Ok(pods)
            } else {
                let seen: Vec<_> = pods
                    .iter()
                    .map(|p| {
                        (
                            p.name_any(),
                            is_ready(p),
                            p.annotations().get(keys::PUB_RELATED).cloned(),
                        )
                    })
                    .collect();
                Err(format!("{good} of {n} ready and annotated: {seen:?}"))
            }
        },
    )
    .await
}

fn denial(result: Result<impl std::fmt::Debug, kube::Error>) -> String {
    match result {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403, "{s:?}");
            s.message
        }
        other => panic!("expected a 403 denial, got {other:?}"),
    }
}

fn gated_template(app: &str) -> serde_json::Value {
    json!({"metadata": {"labels": {"app": app}},
           "spec": {"readinessGates": [{"conditionType": GATE}],
                    "containers": [{"name": "main", "image": "nginx:alpine"}]}})
}

/// CloneSet `web` (its `spec` given) and PUB `web-pub` targeting it with `maxUnavailable`.
async fn cloneset_with_pub(ns: &TestNamespace, spec: serde_json::Value, max_unavailable: i32) {
    ns.apply(
        &json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
                "metadata": {"name": "web"}, "spec": spec})
        .to_string(),
    )
    .await
    .expect("cloneset");
    ns.apply(&pub_json("web-pub",
        json!({"targetRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web"},
               "maxUnavailable": max_unavailable}), json!({})))
        .await
        .expect("pub");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seed_p1_cloneset_delete_evict_update() {
    let ns = TestNamespace::new("pub-p1").await;
    let _pub_ctl = pub_controller(&ns, "").await;
    let _cs_ctl = cloneset_controller(&ns).await;
    cloneset_with_pub(
        &ns,
        json!({"replicas": 5, "selector": {"matchLabels": {"app": "web"}},
                 "template": gated_template("web")}),
        1,
    )
    .await;
    let pods = ready_pods(&ns, "web", 5, "web-pub").await;
    let s = wait_status(&ns, "web-pub", "P1 status", |s| counts(s) == (5, 4, 5, 1)).await;
    assert!(
        s.disrupted_pods.is_empty() && s.unavailable_pods.is_empty(),
        "{s:?}"
    );
    let names: Vec<String> = pods.iter().map(|p| p.name_any()).collect();
    let api: Api<Pod> = ns.api();

    // Two deletions at once: the budget of one lets exactly one through.
    let delete = DeleteParams::default();
    let (a, b) = tokio::join!(
        api.delete(&names[0], &delete),
        api.delete(&names[1], &delete)
    );
    let (deleted, refused) = match (a.is_ok(), b.is_ok()) {
        (true, false) => (&names[0], denial(b)),
        (false, true) => (&names[1], denial(a)),
        other => panic!("expected exactly one deletion admitted, got {other:?}"),
    };
    assert!(
        refused.contains(&format!(
            "podunavailablebudgets.policy.kruise.io \"web-pub\" {EXHAUSTED}"
        )),
        "{refused}"
    );
    let s = status(&ns, "web-pub").await;
    assert_eq!(s.unavailable_allowed, 0, "{s:?}");

    // Eviction, and an image change, are refused the same way; a label is not.
    let message = denial(api.evict(&names[2], &EvictParams::default()).await);
    assert!(message.contains(EXHAUSTED), "{message}");
    let image = json!({"spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}});
    let message = denial(
        api.patch(
            &names[3],
            &PatchParams::default(),
            &Patch::Strategic(&image),
        )
        .await,
    );
    assert!(message.contains(EXHAUSTED), "{message}");
    let label = json!({"metadata": {"labels": {"tier": "gold"}}});
    api.patch(&names[2], &PatchParams::default(), &Patch::Merge(&label))
        .await
        .expect("a label-only update is allowed");
    // A dry run is checked like the real thing.
    let dry_run = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    let message = denial(api.delete(&names[4], &dry_run).await);
    assert!(message.contains(EXHAUSTED), "{message}");
    wait_for(
        "PubPreventPodDeletion on the evicted Pod",
        MINUTE,
        || async {
            let events = events_in(&ns, &names[2]).await;
            events
                .iter()
                .find(|e| {
                    e.reason == "PubPreventPodDeletion"
                        && e.note == "openkruise pub prevents pod deletion"
                        && e.type_ == "Warning"
                })
                .map(|_| ())
                .ok_or(format!("{events:?}"))
        },
    )
    .await;

    // The replacement becomes Ready: the budget is back.
    let replacement = wait_for("the replacement Pod", MINUTE, || async {
        let pods = pods_of(&ns, "web").await;
        pods.iter()
            .find(|p| !names.contains(&p.name_any()))
            .map(|p| p.name_any())
            .ok_or(format!(
                "{:?}",
                pods.iter().map(|p| p.name_any()).collect::<Vec<_>>()
            ))
    })
    .await;
    assert_ne!(&replacement, deleted);
    let _ = ready_pods(&ns, "web", 5, "web-pub").await;
    let s = wait_status(&ns, "web-pub", "the budget restored", |s| {
        counts(s) == (5, 4, 5, 1) && s.disrupted_pods.is_empty()
    })
    .await;
    assert!(s.unavailable_pods.is_empty());

    // A dry run now passes and writes nothing.
    api.delete(&names[4], &dry_run)
        .await
        .expect("dry-run delete allowed");
    let s = status(&ns, "web-pub").await;
    assert_eq!(
        (s.unavailable_allowed, s.disrupted_pods.len()),
        (1, 0),
        "{s:?}"
    );
    // An in-place image change spends the unit and is recorded as unavailable.
    api.patch(
        &names[3],
        &PatchParams::default(),
        &Patch::Strategic(&image),
    )
    .await
    .expect("image change allowed with budget left");
    let s = status(&ns, "web-pub").await;
    assert!(s.unavailable_pods.contains_key(&names[3]), "{s:?}");
    assert_eq!(s.unavailable_allowed, 0, "{s:?}");
}

/// Unavailable as a PUB counts it: not Ready, or its containers not (yet) running the
/// images its spec names, or Kruise's in-place gate held.
fn unavailable(pod: &Pod) -> bool {
    !kruise_pub::podstate::is_available(pod)
}

/// The most Pods (of a label selector) unavailable at once, over every version of every
/// Pod a watch delivers: no intermediate state is missed, as sampling would.
struct MostUnavailable {
    most: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl MostUnavailable {
    fn watch(ns: &TestNamespace, selector: &str) -> Self {
        let most = Arc::new(AtomicUsize::new(0));
        let api: Api<Pod> = ns.api();
        let config = kube::runtime::watcher::Config::default().labels(selector);
        let task = tokio::spawn({
            let most = most.clone();
            async move {
                let mut down = std::collections::BTreeMap::new();
                let mut events = kube::runtime::watcher(api, config).boxed();
                while let Some(Ok(event)) = events.next().await {
                    if let kube::runtime::watcher::Event::Apply(p)
                    | kube::runtime::watcher::Event::InitApply(p) = event
                    {
                        down.insert(p.name_any(), unavailable(&p));
                        let now = down.values().filter(|d| **d).count();
                        most.fetch_max(now, Ordering::Relaxed);
                    }
                }
            }
        });
        MostUnavailable { most, task }
    }

    fn stop(self) -> usize {
        self.task.abort();
        self.most.load(Ordering::Relaxed)
    }
}

/// Waits until every one of the 3 Pods of `app` is `done` and available, then checks the
/// rollout never had more than 1 of them unavailable at once (the watch) and replaced
/// none (`uids`: in place).
async fn assert_rolled_one_at_a_time(
    ns: &TestNamespace,
    app: &str,
    watch: MostUnavailable,
    uids: &[String],
    done: impl Fn(&Pod) -> bool,
) {
    let after = wait_for(
        &format!("every Pod of {app} rolled and available"),
        2 * MINUTE,
        || async {
            let pods = pods_of(ns, app).await;
            let rolled = pods.iter().filter(|p| !unavailable(p) && done(p)).count();
            if pods.len() == 3 && rolled == 3 {
                Ok(pods)
            } else {
                Err(format!("{rolled} of {} rolled", pods.len()))
            }
        },
    )
    .await;
    let most_down = watch.stop();
    assert!(
        most_down <= 1,
        "{most_down} Pods were unavailable at once under a budget of 1"
    );
    let after_uids: Vec<_> = after.iter().map(|p| p.uid().unwrap_or_default()).collect();
    assert_eq!(after_uids, uids, "rolled in place, not recreated");
}

/// OpenKruise's controllers consult the PUB before an in-place update: with the
/// CloneSet's own maxUnavailable at 100%, a PUB of maxUnavailable 1 still lets only one
/// Pod at a time go (sampled while it rolls), every Pod is updated in place (same UIDs),
/// and the budget ends whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cloneset_in_place_rollout_under_a_pub_takes_one_pod_at_a_time() {
    let ns = TestNamespace::new("pub-rollout").await;
    let _pub_ctl = pub_controller(&ns, "").await;
    let _cs_ctl = cloneset_controller(&ns).await;
    cloneset_with_pub(
        &ns,
        json!({"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "updateStrategy": {"type": "InPlaceIfPossible", "maxUnavailable": "100%"},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "main", "image": "nginx:alpine"}]}}}),
        1,
    )
    .await;
    let before = ready_pods(&ns, "web", 3, "web-pub").await;
    wait_status(&ns, "web-pub", "budget of 1", |s| counts(s) == (3, 2, 3, 1)).await;
    let uids: Vec<_> = before.iter().map(|p| p.uid().unwrap_or_default()).collect();

    let most_down = MostUnavailable::watch(&ns, "app=web");
    let image = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:mainline"}]}}}});
    ns.api::<kruise_api::apps_v1alpha1::CloneSet>()
        .patch("web", &PatchParams::default(), &Patch::Merge(&image))
        .await
        .expect("new image");
    assert_rolled_one_at_a_time(&ns, "web", most_down, &uids, |p| {
        p.spec
            .as_ref()
            .and_then(|s| s.containers[0].image.as_deref())
            == Some("nginx:mainline")
    })
    .await;
    wait_status(&ns, "web-pub", "the budget whole again", |s| {
        counts(s) == (3, 2, 3, 1) && s.unavailable_pods.is_empty()
    })
    .await;
}

/// The same for an Advanced StatefulSet (the workload controllers share the consulting
/// writer): Parallel, in place, its own maxUnavailable 100%, a PUB of 1 over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_advanced_statefulset_in_place_rollout_under_a_pub_takes_one_pod_at_a_time() {
    let ns = TestNamespace::new("pub-asts").await;
    let _pub_ctl = pub_controller(&ns, "").await;
    let _sts_ctl = RunningController::start(
        statefulset_ctl::IDENTITY,
        &ns.name,
        "",
        statefulset_ctl::run,
    )
    .await;
    let asts = |image: &str| {
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
               "metadata": {"name": "db"},
               "spec": {"replicas": 3, "serviceName": "db", "podManagementPolicy": "Parallel",
                        "selector": {"matchLabels": {"app": "db"}},
                        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                            "maxUnavailable": "100%", "podUpdatePolicy": "InPlaceIfPossible"}},
                        "template": {"metadata": {"labels": {"app": "db"}},
                                     "spec": {"readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                                              "containers": [{"name": "main", "image": image}]}}}})
        .to_string()
    };
    ns.apply(&asts("nginx:alpine")).await.expect("asts");
    ns.apply(&pub_json("db-pub",
        json!({"targetRef": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "db"},
               "maxUnavailable": 1}), json!({})))
        .await
        .expect("pub");
    let before = ready_pods(&ns, "db", 3, "db-pub").await;
    wait_status(&ns, "db-pub", "budget of 1", |s| counts(s) == (3, 2, 3, 1)).await;
    let uids: Vec<_> = before.iter().map(|p| p.uid().unwrap_or_default()).collect();

    let most_down = MostUnavailable::watch(&ns, "app=db");
    ns.apply(&asts("nginx:mainline")).await.expect("new image");
    assert_rolled_one_at_a_time(&ns, "db", most_down, &uids, |p| {
        p.spec
            .as_ref()
            .and_then(|s| s.containers[0].image.as_deref())
            == Some("nginx:mainline")
    })
    .await;
}

/// A SidecarSet's in-place sidecar upgrade goes through the same budget: 3 bare Pods
/// (their total set by `pub.kruise.io/protect-total-replicas`), a PUB of maxUnavailable
/// 1, and a SidecarSet rolling a new sidecar image with maxUnavailable 100%: one Pod at
/// a time, every Pod upgraded in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sidecarset_upgrade_under_a_pub_takes_one_pod_at_a_time() {
    let ns = TestNamespace::new("pub-sidecar").await;
    let name = format!("pub-{}", ns.name.rsplit('-').next().unwrap_or("x"));
    let _cleanup = crate::sidecarset::SidecarSets(vec![name.clone()]);
    let _pub_ctl = pub_controller(&ns, "").await;
    let _ss_ctl =
        RunningController::start(sidecarset_ctl::IDENTITY, &ns.name, "", sidecarset_ctl::run).await;
    let sidecarset = |image: &str| {
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
               "metadata": {"name": name},
               "spec": {"namespace": ns.name, "selector": {"matchLabels": {"app": "side"}},
                        "updateStrategy": {"maxUnavailable": "100%"},
                        "containers": [{"name": "sidecar1", "image": image, "command": ["sleep", "999d"]}]}})
        .to_string()
    };
    let api: Api<kruise_api::apps_v1alpha1::SidecarSet> = Api::all(ns.client.clone());
    // Pods created from here on are injected once the controller reports the spec
    // observed (it does so only when the apiserver calls its webhook).
    ns.apply(&sidecarset("busybox")).await.expect("sidecarset");
    wait_for("the SidecarSet observed", MINUTE, || async {
        let ss = api.get(&name).await.map_err(|e| e.to_string())?;
        let observed = ss
            .status
            .as_ref()
            .map(|s| s.observed_generation)
            .unwrap_or_default();
        if Some(observed) == ss.metadata.generation {
            Ok(())
        } else {
            Err(format!("{observed}"))
        }
    })
    .await;
    ns.apply(&pub_json(
        "side-pub",
        json!({"selector": {"matchLabels": {"app": "side"}}, "maxUnavailable": 1}),
        json!({keys::PUB_PROTECT_TOTAL_REPLICAS: "3"}),
    ))
    .await
    .expect("pub");
    let pods_api: Api<Pod> = ns.api();
    for i in 0..3 {
        let pod: Pod = serde_json::from_value(
            json!({"metadata": {"name": format!("side-{i}"), "labels": {"app": "side"}},
            "spec": {"containers": [{"name": "app", "image": "nginx:alpine"}]}}),
        )
        .unwrap();
        let created = pods_api
            .create(&PostParams::default(), &pod)
            .await
            .expect("pod");
        let names: Vec<_> = created
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .map(|c| c.name.clone())
            .collect();
        assert!(
            names.contains(&"sidecar1".to_string()),
            "injected: {names:?}"
        );
    }
    let before = ready_pods(&ns, "side", 3, "side-pub").await;
    wait_status(&ns, "side-pub", "budget of 1", |s| {
        counts(s) == (3, 2, 3, 1)
    })
    .await;
    let uids: Vec<_> = before.iter().map(|p| p.uid().unwrap_or_default()).collect();

    let most_down = MostUnavailable::watch(&ns, "app=side");
    ns.apply(&sidecarset("busybox:1.36"))
        .await
        .expect("new sidecar image");
    let sidecar_image = |p: &Pod| {
        p.spec
            .iter()
            .flat_map(|s| &s.containers)
            .find(|c| c.name == "sidecar1")
            .and_then(|c| c.image.clone())
    };
    assert_rolled_one_at_a_time(&ns, "side", most_down, &uids, |p| {
        sidecar_image(p).as_deref() == Some("busybox:1.36")
    })
    .await;
}

/// Spec 1.5.6: a PUB follows its workload's replicas at once. A PUB of maxUnavailable 0
/// over a CloneSet of 4 allows nothing; scaled to 1, the new total frees 3 units and the
/// scale-in goes through, without waiting for the PUB's periodic resync (the refused
/// deletions change no Pod, so only the replica change can wake the PUB this soon).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scaling_down_under_an_exhausted_pub_follows_the_new_total() {
    let ns = TestNamespace::new("pub-scale").await;
    let _pub_ctl = pub_controller(&ns, "").await;
    let _cs_ctl = cloneset_controller(&ns).await;
    cloneset_with_pub(
        &ns,
        json!({"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                 "template": gated_template("web")}),
        0,
    )
    .await;
    ready_pods(&ns, "web", 4, "web-pub").await;
    wait_status(&ns, "web-pub", "nothing allowed", |s| {
        counts(s) == (4, 4, 4, 0)
    })
    .await;

    let started = std::time::Instant::now();
    ns.api::<kruise_api::apps_v1alpha1::CloneSet>()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scale to 1");
    wait_for("1 Pod left", Duration::from_secs(20), || async {
        let n = pods_of(&ns, "web").await.len();
        if n == 1 {
            Ok(())
        } else {
            Err(format!("{n} Pods"))
        }
    })
    .await;
    // Total 1, desired 1, the one Pod left available, nothing more allowed.
    wait_status(&ns, "web-pub", "the new total", |s| {
        counts(s) == (1, 1, 1, 0)
    })
    .await;
    eprintln!(
        "scaled 4 → 1 under a PUB of maxUnavailable 0 in {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deployment_target_counts_its_replicasets_pods() {
    let ns = TestNamespace::new("pub-deploy").await;
    let _ctl = pub_controller(&ns, "").await;
    ns.apply(&pub_json("dep-pub",
        json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "dep"}, "minAvailable": "50%"}),
        json!({})))
        .await
        .expect("pub");
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "dep"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "dep"}}, "template": gated_template("dep")}}))
    .unwrap();
    ns.api::<Deployment>()
        .create(&PostParams::default(), &deployment)
        .await
        .expect("deployment");
    let pods = ready_pods(&ns, "dep", 4, "dep-pub").await;
    // minAvailable 50% of 4 → 2 must stay, 2 may go.
    wait_status(&ns, "dep-pub", "Deployment PUB status", |s| {
        counts(s) == (4, 2, 4, 2)
    })
    .await;
    let api: Api<Pod> = ns.api();
    for p in &pods[..2] {
        api.evict(&p.name_any(), &EvictParams::default())
            .await
            .expect("eviction within budget");
    }
    let message = denial(
        api.evict(&pods[2].name_any(), &EvictParams::default())
            .await,
    );
    assert!(
        message.contains("\"dep-pub\" is forbidden: pub unavailable allowed is negative"),
        "{message}"
    );
    // Scaled to 0: nothing left to protect, everything is allowed.
    let scale = json!({"spec": {"replicas": 0}});
    ns.api::<Deployment>()
        .patch("dep", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .expect("scale");
    wait_status(&ns, "dep-pub", "desired 0 once scaled to 0", |s| {
        s.total_replicas == 0 && s.desired_available == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seed_p2_a_custom_workload_through_its_scale_subresource() {
    let ns = TestNamespace::new("pub-crd").await;
    let group = format!("{}.e2e.kruise.io", ns.name);
    let crd_name = format!("myworkloads.{group}");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": crd_name},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "myworkloads", "singular": "myworkload", "kind": "MyWorkload", "listKind": "MyWorkloadList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.labelSelector"}}}]}}))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client.clone());
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create CRD");
    struct DeleteCrd(String);
    impl Drop for DeleteCrd {
        fn drop(&mut self) {
            let _ = kubectl(&["delete", "crd", &self.0, "--wait=false"], None);
        }
    }
    let _cleanup = DeleteCrd(crd_name.clone());
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, "v1", "MyWorkload"),
        "myworkloads",
    );
    let workloads: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &ar);
    let w1: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "MyWorkload",
        "metadata": {"name": "w1"}, "spec": {"replicas": 10}}))
    .unwrap();
    let w1 = wait_for("the CRD to be served", MINUTE, || async {
        workloads
            .create(&PostParams::default(), &w1)
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    let _ctl = pub_controller(&ns, "").await;
    ns.apply(&pub_json("w1-pub",
        json!({"targetRef": {"apiVersion": format!("{group}/v1"), "kind": "MyWorkload", "name": "w1"}, "maxUnavailable": "20%"}),
        json!({})))
        .await
        .expect("pub");
    // The "workload controller": ten Pods owned by w1.
    let api: Api<Pod> = ns.api();
    for i in 0..10 {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("w1-{i}"), "labels": {"app": "w1"},
                "ownerReferences": [{"apiVersion": format!("{group}/v1"), "kind": "MyWorkload", "name": "w1",
                                     "uid": w1.metadata.uid.clone().unwrap(), "controller": true}]},
            "spec": {"containers": [{"name": "main", "image": "nginx:alpine"}]}}))
        .unwrap();
        api.create(&PostParams::default(), &pod).await.expect("pod");
    }
    let pods = ready_pods(&ns, "w1", 10, "w1-pub").await;
    wait_status(&ns, "w1-pub", "P2 status", |s| counts(s) == (10, 8, 10, 2)).await;
    // Three deletions at once: at most two get through.
    let results = futures::future::join_all(pods[..3].iter().map(|p| {
        let (api, name) = (api.clone(), p.name_any());
        async move { api.delete(&name, &DeleteParams::default()).await }
    }))
    .await;
    let admitted = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(admitted, 2, "{results:?}");
    for r in results.into_iter().filter(|r| r.is_err()) {
        assert!(denial(r).contains(EXHAUSTED));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_deleters_never_take_down_more_than_the_budget() {
    let ns = TestNamespace::new("pub-burst").await;
    let _ctl = pub_controller(&ns, "").await;
    // Bare Pods (nothing replaces them), a total of 10 set by annotation, 3 may go.
    ns.apply(&pub_json(
        "burst-pub",
        json!({"selector": {"matchLabels": {"app": "burst"}}, "maxUnavailable": 3}),
        json!({keys::PUB_PROTECT_TOTAL_REPLICAS: "10"}),
    ))
    .await
    .expect("pub");
    let api: Api<Pod> = ns.api();
    wait_for("the PUB in the webhook's cache", MINUTE, || async {
        let s = status(&ns, "burst-pub").await;
        if s.total_replicas == 10 {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
    for i in 0..10 {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("burst-{i}"), "labels": {"app": "burst"}},
            "spec": {"containers": [{"name": "main", "image": "nginx:alpine"}]}}))
        .unwrap();
        let created = api.create(&PostParams::default(), &pod).await.expect("pod");
        // The mutating webhook names the PUB at creation.
        assert_eq!(
            created
                .annotations()
                .get(keys::PUB_RELATED)
                .map(String::as_str),
            Some("burst-pub"),
            "{:?}",
            created.metadata.annotations
        );
    }
    ready_pods(&ns, "burst", 10, "burst-pub").await;
    wait_status(&ns, "burst-pub", "burst status", |s| {
        counts(s) == (10, 7, 10, 3)
    })
    .await;

    let deleters = (0..50).map(|i| {
        let api = api.clone();
        tokio::spawn(async move {
            api.delete(&format!("burst-{}", i % 10), &DeleteParams::default())
                .await
        })
    });
    let results: Vec<_> = futures::future::join_all(deleters)
        .await
        .into_iter()
        .map(|r| r.expect("task"))
        .collect();
    // A Pod admitted a moment ago may already be gone (404) for a later deleter.
    let gone = |r: &Result<_, kube::Error>| matches!(r, Err(kube::Error::Api(s)) if s.code == 404);
    let refused = results.iter().filter(|r| r.is_err() && !gone(r)).count();
    for r in results.into_iter().filter(|r| r.is_err() && !gone(r)) {
        let message = denial(r);
        assert!(
            message.contains(EXHAUSTED) || message.contains("due to conflicts"),
            "{message}"
        );
    }
    assert!(refused >= 35, "{refused} refused");
    // From the Pods themselves: exactly three are being deleted or gone, now and a
    // little later.
    for _ in 0..3 {
        let all = api
            .list(&ListParams::default().labels("app=burst"))
            .await
            .expect("list")
            .items;
        let standing = all
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .count();
        assert_eq!(
            10 - standing,
            3,
            "{:?}",
            all.iter()
                .map(|p| (p.name_any(), p.metadata.deletion_timestamp.is_some()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    wait_status(&ns, "burst-pub", "the budget spent", |s| {
        counts(s) == (10, 7, 7, 0) && s.disrupted_pods.is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_admission_paths_never_both_spend_the_last_unit() {
    let ns = TestNamespace::new("pub-race").await;
    let _ctl = pub_controller(&ns, "").await;
    ns.apply(&pub_json(
        "race-pub",
        json!({"selector": {"matchLabels": {"app": "race"}}, "maxUnavailable": 1}),
        json!({keys::PUB_PROTECT_TOTAL_REPLICAS: "4"}),
    ))
    .await
    .expect("pub");
    let api: Api<Pod> = ns.api();
    for i in 0..4 {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("race-{i}"), "labels": {"app": "race"}},
            "spec": {"containers": [{"name": "main", "image": "nginx:alpine"}]}}))
        .unwrap();
        api.create(&PostParams::default(), &pod).await.expect("pod");
    }
    let pods = ready_pods(&ns, "race", 4, "race-pub").await;
    wait_status(&ns, "race-pub", "race status", |s| {
        counts(s) == (4, 3, 4, 1)
    })
    .await;
    // Two more webhook replicas: their own processes' caches and locks, the same PUB.
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let settings = kruise_runtime::Settings {
            admin_addr: ([127, 0, 0, 1], 0).into(),
            leader_elect: false,
            watch_namespace: Some(ns.name.clone()),
            ..Default::default()
        };
        let runtime = kruise_runtime::Runtime::new(
            pub_ctl::IDENTITY,
            settings,
            kruise_e2e::kube_config().await,
        )
        .await
        .expect("runtime");
        let ctx = pub_ctl::context(&runtime);
        runtime.readiness.wait_until_ready().await;
        wait_for("the replica's PUB cache", MINUTE, || async {
            let cached = ctx.pubs.store().state().iter().any(|p| {
                p.status
                    .as_ref()
                    .is_some_and(|s| s.unavailable_allowed == 1)
            });
            if cached {
                Ok(())
            } else {
                Err("not yet".to_string())
            }
        })
        .await;
        replicas.push((runtime, ctx));
    }
    let (a, b) = (Arc::clone(&replicas[0].1), Arc::clone(&replicas[1].1));
    let (pa, pb) = (pods[0].clone(), pods[1].clone());
    let (ra, rb) = tokio::join!(
        async move { pub_ctl::webhook::admit(&a, &pa, PubOperation::Evict, false).await },
        async move { pub_ctl::webhook::admit(&b, &pb, PubOperation::Evict, false).await },
    );
    let (ra, rb) = (ra.expect("decides"), rb.expect("decides"));
    assert_eq!(
        [ra.is_none(), rb.is_none()].iter().filter(|x| **x).count(),
        1,
        "exactly one admitted: {ra:?} {rb:?}"
    );
    let s = status(&ns, "race-pub").await;
    assert_eq!(
        (s.unavailable_allowed, s.disrupted_pods.len()),
        (0, 1),
        "{s:?}"
    );
    let admitted = if ra.is_none() {
        pods[0].name_any()
    } else {
        pods[1].name_any()
    };
    assert!(s.disrupted_pods.contains_key(&admitted));
    // The admitted Pod was never deleted: after 20 s the record goes, with NotDeleted,
    // and the budget is back.
    wait_status(&ns, "race-pub", "the stale record dropped", |s| {
        s.disrupted_pods.is_empty() && s.unavailable_allowed == 1
    })
    .await;
    let note = format!(
        "Pod was expected by PUB {}/race-pub to be deleted but it wasn't",
        ns.name
    );
    wait_events(&ns, &admitted, "the NotDeleted event", |events| {
        events
            .iter()
            .any(|e| e.reason == "NotDeleted" && e.note == note)
    })
    .await;
    for (runtime, _) in replicas {
        runtime.shutdown.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn invalid_and_conflicting_pubs_are_refused_and_both_gates_off_refuses_all() {
    let ns = TestNamespace::new("pub-validate").await;
    let ctl = pub_controller(&ns, "").await;
    let cases = [
        (
            json!({"maxUnavailable": 1}),
            "no selector or targetRef defined in PodUnavailableBudget",
        ),
        (
            json!({"selector": {"matchLabels": {"a": "b"}}, "maxUnavailable": 1, "minAvailable": 1}),
            "maxUnavailable and minAvailable are mutually exclusive",
        ),
        (
            json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment"}, "maxUnavailable": 1}),
            "empty TargetReference is not valid for PodUnavailableBudget.",
        ),
        (
            json!({"selector": {"matchLabels": {"a": "b"}}, "maxUnavailable": "120%"}),
            "must not be greater than 100%",
        ),
    ];
    for (spec, needle) in cases {
        let err = ns
            .apply(&pub_json("bad", spec.clone(), json!({})))
            .await
            .expect_err("refused");
        assert!(err.contains(needle), "{spec}: {err}");
    }
    let err = ns
        .apply(&pub_json(
            "bad",
            json!({"selector": {"matchLabels": {"a": "b"}}, "maxUnavailable": 1}),
            json!({keys::PUB_PROTECT_OPERATIONS: "DELETE,REBOOT"}),
        ))
        .await
        .expect_err("refused");
    assert!(
        err.contains("annotation[kruise.io/pub-protect-operations] is invalid"),
        "{err}"
    );
    ns.apply(&pub_json(
        "one",
        json!({"selector": {"matchLabels": {"app": "x"}}, "maxUnavailable": 1}),
        json!({}),
    ))
    .await
    .expect("first PUB");
    wait_status(&ns, "one", "the PUB in the cache", |_| true).await;
    let err = ns
        .apply(&pub_json("two", json!({"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}, "maxUnavailable": 1}), json!({})))
        .await
        .expect_err("conflict");
    assert!(
        err.contains("pub.spec.selector is in conflict with other PodUnavailableBudget one"),
        "{err}"
    );
    let err = ns
        .apply(&pub_json(
            "one",
            json!({"selector": {"matchLabels": {"app": "y"}}, "maxUnavailable": 1}),
            json!({}),
        ))
        .await
        .expect_err("immutable");
    assert!(
        err.contains("selector and targetRef cannot be modified"),
        "{err}"
    );
    // Selectors on other keys do not conflict (upstream's loose overlap), though a Pod
    // could carry both labels.
    ns.apply(&pub_json(
        "tier",
        json!({"selector": {"matchLabels": {"tier": "web"}}, "maxUnavailable": 1}),
        json!({}),
    ))
    .await
    .expect("a PUB on another label key is accepted");
    ctl.stop().await;

    let _off = pub_controller_gates_off(&ns).await;
    let err = ns
        .apply(&pub_json(
            "three",
            json!({"selector": {"matchLabels": {"app": "z"}}, "maxUnavailable": 1}),
            json!({}),
        ))
        .await
        .expect_err("gates off");
    assert!(
        err.contains("feature PodUnavailableBudget is invalid"),
        "{err}"
    );
}

/// pub-ctl with both gates off: its probe is the refusal of every PUB.
async fn pub_controller_gates_off(ns: &TestNamespace) -> RunningController {
    let ctl = RunningController::start(
        pub_ctl::IDENTITY,
        &ns.name,
        "PodUnavailableBudgetDeleteGate=false,PodUnavailableBudgetUpdateGate=false",
        pub_ctl::run,
    )
    .await;
    let probe: PodUnavailableBudget = serde_json::from_value(json!({
        "apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
        "metadata": {"name": "probe"}, "spec": {"selector": {"matchLabels": {"p": "q"}}, "maxUnavailable": 1}}))
    .unwrap();
    let api: Api<PodUnavailableBudget> = ns.api();
    wait_for("the gates-off webhook", MINUTE, || async {
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        match api.create(&dry_run, &probe).await {
            Err(e)
                if e.to_string()
                    .contains("feature PodUnavailableBudget is invalid") =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    ctl
}

/// Evicts `pod` with `deleteOptions.dryRun: [All]` in the Eviction body (what
/// `kubectl drain --dry-run=server` sends; kube-rs's `EvictParams` cannot put it there).
async fn evict_dry_run(ns: &TestNamespace, pod: &str) -> (bool, String, String) {
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": pod, "namespace": ns.name},
        "deleteOptions": {"dryRun": ["All"]}});
    kruise_e2e::kubectl_async(
        vec![
            "create".into(),
            "--raw".into(),
            format!("/api/v1/namespaces/{}/pods/{pod}/eviction", ns.name),
            "-f".into(),
            "-".into(),
        ],
        Some(eviction.to_string()),
    )
    .await
}

/// Dry runs (`kubectl delete --dry-run=server`, an eviction dry run in its body or its
/// query) get the answer the real request would get and never spend the budget:
/// upstream's `PodUnavailableBudgetValidatePod` decides on a copy and skips the write.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dry_runs_are_answered_like_the_real_request_and_spend_nothing() {
    let ns = TestNamespace::new("pub-dry").await;
    let _ctl = pub_controller(&ns, "").await;
    ns.apply(&pub_json(
        "dry-pub",
        json!({"selector": {"matchLabels": {"app": "dry"}}, "maxUnavailable": 1}),
        json!({keys::PUB_PROTECT_TOTAL_REPLICAS: "2"}),
    ))
    .await
    .expect("pub");
    wait_status(&ns, "dry-pub", "the PUB counted", |s| s.total_replicas == 2).await;
    let api: Api<Pod> = ns.api();
    for i in 0..2 {
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("dry-{i}"), "labels": {"app": "dry"}},
            "spec": {"containers": [{"name": "main", "image": "nginx:alpine"}]}}))
        .unwrap();
        api.create(&PostParams::default(), &pod).await.expect("pod");
    }
    ready_pods(&ns, "dry", 2, "dry-pub").await;
    wait_status(&ns, "dry-pub", "one unit to spend", |s| {
        counts(s) == (2, 1, 2, 1)
    })
    .await;
    let unspent = |s: &PodUnavailableBudgetStatus| {
        (
            s.unavailable_allowed,
            s.disrupted_pods.len(),
            s.unavailable_pods.len(),
        )
    };
    let kubectl_delete = |pod: &str| {
        kruise_e2e::kubectl_async(
            ["delete", "pod", pod, "-n", &ns.name, "--dry-run=server"]
                .map(String::from)
                .to_vec(),
            None,
        )
    };

    // Budget left: every dry run is allowed, again and again, and the unit stays.
    for _ in 0..2 {
        let (ok, out, err) = kubectl_delete("dry-0").await;
        assert!(ok && out.contains("(server dry run)"), "{out} {err}");
        let s = status(&ns, "dry-pub").await;
        assert_eq!(unspent(&s), (1, 0, 0), "{s:?}");
    }
    let (ok, out, err) = evict_dry_run(&ns, "dry-0").await;
    assert!(ok, "{out} {err}");
    let query_dry_run = EvictParams {
        post_options: PostParams {
            dry_run: true,
            ..Default::default()
        },
        ..Default::default()
    };
    api.evict("dry-0", &query_dry_run)
        .await
        .expect("dry-run eviction allowed");
    let s = status(&ns, "dry-pub").await;
    assert_eq!(unspent(&s), (1, 0, 0), "{s:?}");
    assert_eq!(pods_of(&ns, "dry").await.len(), 2);

    // The real deletion still has its unit, once.
    api.delete("dry-0", &DeleteParams::default())
        .await
        .expect("the real deletion is allowed");
    let s = status(&ns, "dry-pub").await;
    assert_eq!(s.unavailable_allowed, 0, "{s:?}");
    assert!(s.disrupted_pods.contains_key("dry-0"), "{s:?}");

    // Nothing left: dry runs are refused as the real request is, and change nothing.
    let (ok, _, err) = kubectl_delete("dry-1").await;
    assert!(!ok && err.contains(EXHAUSTED), "{err}");
    let (ok, _, err) = evict_dry_run(&ns, "dry-1").await;
    assert!(!ok && err.contains(EXHAUSTED), "{err}");
    let message = denial(api.evict("dry-1", &query_dry_run).await);
    assert!(message.contains(EXHAUSTED), "{message}");
    // (The controller may drop dry-0's record meanwhile: it is gone.)
    let after = status(&ns, "dry-pub").await;
    assert_eq!(after.unavailable_allowed, 0, "{after:?}");
    assert!(
        !after.disrupted_pods.contains_key("dry-1") && after.unavailable_pods.is_empty(),
        "{after:?}"
    );
    let message = denial(api.delete("dry-1", &DeleteParams::default()).await);
    assert!(message.contains(EXHAUSTED), "{message}");
}

/// With `KRUISE_WEBHOOK_CLIENT_CA`, the budget-spending webhook answers the apiserver only:
/// the local apiserver presents the client certificate tests/cluster/cluster.sh issued
/// (its --admission-control-config-file) and its calls are handled, while the same
/// AdmissionReview posted straight to the port without that certificate gets 401 and is
/// never handled; with the certificate, it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_admission_reviews_are_refused_when_a_client_ca_is_set() {
    let ns = TestNamespace::new("pub-client-ca").await;
    let pki = kruise_e2e::kubeconfig_path()
        .parent()
        .expect("state dir")
        .join("pki");
    let client_ca = pki.join("webhook-client-ca.crt");
    assert!(
        client_ca.exists(),
        "{} missing: a cluster started before webhook client certificates; run `make down` and start it again",
        client_ca.display()
    );
    let mut settings = RunningController::settings(&ns.name, "");
    settings.webhook_client_ca = Some(client_ca.display().to_string());
    let _ctl = RunningController::start_with(pub_ctl::IDENTITY, settings, pub_ctl::run).await;
    // The apiserver's calls pass: a PUB without a selector is refused by the webhook's
    // own message, not by a failed call.
    let probe: PodUnavailableBudget = serde_json::from_value(json!({
        "apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
        "metadata": {"name": "probe"}, "spec": {"maxUnavailable": 1}}))
    .unwrap();
    let api: Api<PodUnavailableBudget> = ns.api();
    wait_for("the apiserver's call handled", MINUTE, || async {
        match api.create(&PostParams::default(), &probe).await {
            Err(e) if e.to_string().contains("no selector or targetRef") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // Where the apiserver calls it: the namespaced instance's configuration.
    let (ok, out, err) = kruise_e2e::kubectl_async(
        [
            "get",
            "validatingwebhookconfiguration",
            &format!("kruise-pub-validating-{}", ns.name),
            "-o",
            "jsonpath={.webhooks[*].clientConfig.url}",
        ]
        .map(String::from)
        .to_vec(),
        None,
    )
    .await;
    assert!(ok, "{err}");
    let url = out
        .split_whitespace()
        .find(|u| u.ends_with(pub_ctl::webhook::VALIDATE_PUB_PATH))
        .unwrap_or_else(|| panic!("no PUB webhook URL in {out:?}"))
        .to_string();
    let review = json!({
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "forged", "operation": "CREATE", "namespace": ns.name, "name": "probe",
            "kind": {"group": "policy.kruise.io", "version": "v1alpha1", "kind": "PodUnavailableBudget"},
            "resource": {"group": "policy.kruise.io", "version": "v1alpha1", "resource": "podunavailablebudgets"},
            "userInfo": {"username": "mallory"},
            "object": serde_json::to_value(&probe).unwrap(),
        }
    })
    .to_string();
    // curl, as anyone inside the cluster could: no trust in our CA needed (-k).
    let post = |cert: Option<(&std::path::Path, &std::path::Path)>| {
        let mut cmd = std::process::Command::new("curl");
        cmd.args([
            "-sSk",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            "-H",
            "content-type: application/json",
        ])
        .args(["--data-binary", &review, &url]);
        if let Some((crt, key)) = cert {
            cmd.arg("--cert").arg(crt).arg("--key").arg(key);
        }
        let out = cmd.output().expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        // curl's own error (a reset, a refused TLS handshake) when there was no response.
        let stderr = String::from_utf8_lossy(&out.stderr);
        (code.trim().to_string(), format!("{body}{stderr}"))
    };
    let (code, body) = post(None);
    assert_eq!(code, "401", "{body}");
    assert!(body.contains("KRUISE_WEBHOOK_CLIENT_CA"), "{body}");
    let (code, body) = post(Some((
        &pki.join("webhook-client.crt"),
        &pki.join("webhook-client.key"),
    )));
    assert_eq!(code, "200", "{body}");
    assert!(body.contains("no selector or targetRef"), "{body}");
}
