//! No double management: while another manager (OpenKruise's kruise-manager) holds its
//! Lease, our controllers do not reconcile (`KRUISE_FOREIGN_LEADER_LEASES`,
//! crates/kruise-runtime/src/leader.rs). A Lease in the test namespace stands in for
//! kruise-manager's, held and renewed every 2 s by the test as client-go would.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kruise_e2e::{RunningController, TestNamespace, wait_for};
use kruise_runtime::leader::BLOCKED_BY;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const FOREIGN: &str = "kruise-manager";
/// Short, so that "stop renewing" runs out in seconds (kruise-manager's is 15 s).
const FOREIGN_SECONDS: i32 = 4;

/// The stand-in for kruise-manager: renews the Lease every 2 s while `holder` is set.
struct ForeignManager {
    api: Api<Lease>,
    holder: Arc<Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ForeignManager {
    async fn start(ns: &TestNamespace, holder: &str) -> Self {
        let api: Api<Lease> = ns.api();
        let lease: Lease = serde_json::from_value(json!({
            "metadata": { "name": FOREIGN },
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": FOREIGN_SECONDS,
                "acquireTime": MicroTime(Timestamp::now()),
                "renewTime": MicroTime(Timestamp::now()),
            },
        }))
        .unwrap();
        api.create(&PostParams::default(), &lease).await.unwrap();
        let holder = Arc::new(Mutex::new(Some(holder.to_string())));
        let task = tokio::spawn({
            let (api, holder) = (api.clone(), holder.clone());
            async move {
                loop {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    let current = holder.lock().unwrap().clone();
                    if let Some(h) = current {
                        let _ = renew(&api, &h).await;
                    }
                }
            }
        });
        ForeignManager { api, holder, task }
    }

    /// Takes the Lease (again) as `holder` and keeps renewing it.
    async fn hold(&self, holder: &str) {
        *self.holder.lock().unwrap() = Some(holder.to_string());
        renew(&self.api, holder).await.unwrap();
    }

    /// Releases the Lease as client-go does on a clean stop: an empty holderIdentity.
    async fn release(&self) {
        *self.holder.lock().unwrap() = None;
        let patch = json!({ "spec": { "holderIdentity": "" } });
        self.api
            .patch(FOREIGN, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
    }

    /// Stops renewing: a killed manager; the Lease runs out by itself.
    fn vanish(&self) {
        *self.holder.lock().unwrap() = None;
    }
}

impl Drop for ForeignManager {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn renew(api: &Api<Lease>, holder: &str) -> Result<Lease, kube::Error> {
    let patch = json!({ "spec": {
        "holderIdentity": holder,
        "leaseDurationSeconds": FOREIGN_SECONDS,
        "renewTime": MicroTime(Timestamp::now()),
    } });
    api.patch(FOREIGN, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

fn cloneset_yaml(replicas: i32) -> String {
    format!(
        r#"
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: guarded
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: guarded
  template:
    metadata:
      labels:
        app: guarded
    spec:
      containers:
      - name: nginx
        image: nginx:alpine
        imagePullPolicy: IfNotPresent
"#
    )
}

async fn pod_count(ns: &TestNamespace) -> usize {
    let pods: Api<Pod> = ns.api();
    pods.list(&ListParams::default().labels("app=guarded"))
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count()
}

/// Our own Lease's `kruise.io/blocked-by`, if any.
async fn blocked_by(ns: &TestNamespace) -> Option<String> {
    let leases: Api<Lease> = ns.api();
    leases
        .get_opt(cloneset_ctl::CONTROLLER_NAME)
        .await
        .unwrap()
        .and_then(|l| l.metadata.annotations)
        .and_then(|a| a.get(BLOCKED_BY).cloned())
}

/// Waits until the controller's metrics and own Lease say a foreign manager blocks it,
/// naming `holder`, and it does not lead.
async fn wait_blocked(ns: &TestNamespace, ctl: &RunningController, holder: &str) {
    let gauge = format!(
        "kruise_foreign_leader_active{{lease=\"{}/{FOREIGN}\"}} 1",
        ns.name
    );
    let leading = format!(
        "kruise_leader{{controller=\"{}\"}} 1",
        cloneset_ctl::CONTROLLER_NAME
    );
    wait_for(
        "the controller to report the foreign leader",
        Duration::from_secs(20),
        || {
            let (gauge, leading) = (gauge.clone(), leading.clone());
            async move {
                let metrics = ctl.metrics();
                let note = blocked_by(ns).await;
                let named = note.as_deref().is_some_and(|n| {
                    n.contains(&format!("{}/{FOREIGN}", ns.name)) && n.contains(holder)
                });
                if metrics.contains(&gauge) && !metrics.contains(&leading) && named {
                    Ok(())
                } else {
                    Err(format!(
                        "blocked-by {note:?}; metrics: {}",
                        relevant(&metrics)
                    ))
                }
            }
        },
    )
    .await;
}

fn relevant(metrics: &str) -> String {
    metrics
        .lines()
        .filter(|l| l.starts_with("kruise_foreign_leader_active") || l.starts_with("kruise_leader"))
        .collect::<Vec<_>>()
        .join("; ")
}

async fn wait_pods(ns: &TestNamespace, want: usize, timeout: Duration) {
    wait_for(&format!("{want} Pods"), timeout, || async move {
        match pod_count(ns).await {
            n if n == want => Ok(()),
            n => Err(format!("{n} Pods")),
        }
    })
    .await;
}

/// Nothing is reconciled for a few seconds: no Pod count change.
async fn assert_idle(ns: &TestNamespace, pods: usize) {
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            pod_count(ns).await,
            pods,
            "reconciled while another manager leads"
        );
    }
}

#[tokio::test]
async fn a_held_kruise_manager_lease_keeps_the_controller_idle_until_released_or_expired() {
    let ns = TestNamespace::new("foreign").await;
    let foreign = ForeignManager::start(&ns, "kruise-manager-test_1").await;
    // Leader election on, our Lease in the test namespace, 5 s lease (checks every second).
    let settings = kruise_runtime::Settings {
        leader_elect: true,
        namespace: ns.name.clone(),
        lease_duration_seconds: 5,
        foreign_leader_leases: format!("{}/{FOREIGN}", ns.name),
        ..RunningController::settings(&ns.name, "")
    };
    let ctl =
        RunningController::start_with(cloneset_ctl::IDENTITY, settings, cloneset_ctl::run).await;

    // Held: the controller does not start, and says why.
    wait_blocked(&ns, &ctl, "kruise-manager-test_1").await;
    ns.apply(&cloneset_yaml(2)).await.unwrap();
    assert_idle(&ns, 0).await;

    // Released (a clean stop of kruise-manager): ours takes over.
    foreign.release().await;
    wait_pods(&ns, 2, Duration::from_secs(30)).await;
    wait_for(
        "blocked-by removed by the leader",
        Duration::from_secs(10),
        || async {
            match blocked_by(&ns).await {
                None => Ok(()),
                Some(n) => Err(n),
            }
        },
    )
    .await;
    assert!(
        ctl.metrics().contains(&format!(
            "kruise_foreign_leader_active{{lease=\"{}/{FOREIGN}\"}} 0",
            ns.name
        )),
        "{}",
        relevant(&ctl.metrics())
    );

    // Held again while we lead: ours stops and releases its Lease.
    foreign.hold("kruise-manager-test_2").await;
    wait_blocked(&ns, &ctl, "kruise-manager-test_2").await;
    let leases: Api<Lease> = ns.api();
    let ours = leases.get(cloneset_ctl::CONTROLLER_NAME).await.unwrap();
    let holder = ours
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert!(holder.is_empty(), "our Lease still held by {holder}");
    ns.apply(&cloneset_yaml(3)).await.unwrap();
    assert_idle(&ns, 2).await;

    // Not renewed any more (a killed kruise-manager): it runs out after its duration
    // (plus the clock skew allowance), and ours takes over.
    foreign.vanish();
    wait_pods(&ns, 3, Duration::from_secs(30)).await;
    ctl.stop().await;
}
