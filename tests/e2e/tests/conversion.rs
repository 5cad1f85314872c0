//! CloneSet, SidecarSet and Advanced DaemonSet served as `apps.kruise.io/v1beta1`
//! (OpenKruise 1.9's shapes)
//! through the controllers' CRD conversion webhooks, while stored and reconciled as
//! v1alpha1. The CRDs' conversion points at a webhook server started here with the
//! controllers' own conversion routes, as a cluster-wide controller registers it; the
//! guard puts the CRDs back to `strategy: None` afterwards (other tests run namespaced
//! controllers, which never register a conversion). Changing a CRD's conversion ends every
//! watch on that kind, so `make test` runs these tests alone, after the others.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::DaemonSet;
use kruise_api::apps_v1alpha1::{CloneSet, CloneSetUpdateStrategyType, SidecarSet};
use kruise_api::apps_v1beta1::cloneset::{
    CloneSet as BetaCloneSet, CloneSetPodUpdatePolicy, CloneSetUpdateStrategyType as BetaType,
};
use kruise_api::apps_v1beta1::daemonset::DaemonSet as BetaDaemonSet;
use kruise_api::apps_v1beta1::sidecarset::SidecarSet as BetaSidecarSet;
use kruise_api::keys;
use kruise_e2e::{RunningController, TestNamespace, kubectl, wait_for};
use kruise_runtime::WebhookServer;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio::sync::Mutex;

const MINUTE: Duration = Duration::from_secs(60);
const CRDS: [&str; 3] = [
    "clonesets.apps.kruise.io",
    "sidecarsets.apps.kruise.io",
    "daemonsets.apps.kruise.io",
];

/// One test at a time owns the CRDs' conversion.
static CONVERSION: Mutex<()> = Mutex::const_new(());

/// Serves the conversion routes and registers them on the CRDs, as a cluster-wide
/// cloneset-ctl / sidecarset-ctl / daemonset-ctl does at start.
async fn conversion_server(ns: &TestNamespace) -> (RunningController, ResetConversion) {
    let ctl = RunningController::start(cloneset_ctl::IDENTITY, &ns.name, "", |rt| async move {
        let routes = vec![
            cloneset_ctl::webhook::conversion_route(),
            sidecarset_ctl::webhook::conversion_route(),
            daemonset_ctl::webhook::conversion_route(),
        ];
        let server = WebhookServer::start(&rt, routes).await?;
        anyhow::ensure!(server.register_conversions().await?, "nothing registered");
        rt.shutdown.cancelled().await;
        Ok(())
    })
    .await;
    // Registered once the CRDs name the server (the runtime reports ready before).
    wait_for(
        "the CRDs to point at the conversion webhook",
        MINUTE,
        || async {
            for crd in CRDS {
                let (_, out, err) = kubectl(
                    &[
                        "get",
                        "crd",
                        crd,
                        "-o",
                        "jsonpath={.spec.conversion.strategy}",
                    ],
                    None,
                );
                if out.trim() != "Webhook" {
                    return Err(format!("{crd}: {out} {err}"));
                }
            }
            Ok(())
        },
    )
    .await;
    let reset = ResetConversion;
    kruise_e2e::forget_discovery();
    wait_conversion_effective(ns).await;
    (ctl, reset)
}

/// The apiserver converts through the webhook only once it has reloaded the CRDs:
/// until then v1beta1 reads are v1alpha1 relabelled. Probes both kinds.
async fn wait_conversion_effective(ns: &TestNamespace) {
    let probe = format!("conv-probe-{}", ns.name);
    ns.apply(&format!(
        "
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {{name: probe}}
spec:
  replicas: 0
  selector: {{matchLabels: {{app: probe}}}}
  template:
    metadata: {{labels: {{app: probe}}}}
    spec: {{containers: [{{name: c, image: busybox}}]}}
  updateStrategy: {{type: InPlaceOnly}}
---
apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata: {{name: {probe}}}
spec:
  namespace: {ns}
  selector: {{matchLabels: {{app: nothing-here}}}}
  containers: [{{name: side, image: busybox}}]
",
        ns = ns.name
    ))
    .await
    .expect("conversion probes");
    let _cleanup = DeleteSidecarSet(probe.clone());
    wait_for(
        "the apiserver to convert through the webhook",
        MINUTE,
        || async {
            let (_, cs, _) = kubectl(
                &[
                    "get",
                    "clonesets.v1beta1.apps.kruise.io",
                    "probe",
                    "-n",
                    &ns.name,
                    "-o",
                    "jsonpath={.spec.updateStrategy.rollingUpdate.podUpdatePolicy}",
                ],
                None,
            );
            let (_, ss, _) = kubectl(
                &[
                    "get",
                    "sidecarsets.v1beta1.apps.kruise.io",
                    &probe,
                    "-o",
                    "jsonpath={.spec.namespaceSelector.matchLabels}",
                ],
                None,
            );
            if cs.trim() == "InPlaceOnly" && ss.contains(&ns.name) {
                Ok(())
            } else {
                Err(format!(
                    "CloneSet policy {cs:?}, SidecarSet selector {ss:?}"
                ))
            }
        },
    )
    .await;
}

/// Puts the CRDs back as `deploy/crds` installs them: conversion `None`, v1beta1 unserved.
struct ResetConversion;

impl Drop for ResetConversion {
    fn drop(&mut self) {
        for crd in CRDS {
            let file = kruise_e2e::repo_root().join(format!("deploy/crds/{crd}.yaml"));
            let _ = kubectl(
                &[
                    "patch",
                    "crd",
                    crd,
                    "--type=merge",
                    "-p",
                    r#"{"spec":{"conversion":{"strategy":"None","webhook":null}}}"#,
                ],
                None,
            );
            let _ = kubectl(
                &[
                    "apply",
                    "--server-side",
                    "--force-conflicts",
                    "-f",
                    file.to_str().unwrap(),
                ],
                None,
            );
        }
        // The apiserver swaps the CRD's handler asynchronously; let watchers move off the
        // webhook before the server behind it stops. kubectl must rediscover the versions.
        std::thread::sleep(Duration::from_secs(2));
        kruise_e2e::forget_discovery();
    }
}

async fn apply(ns: &TestNamespace, yaml: &str) {
    ns.apply(yaml).await.expect("kubectl apply");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_cloneset_is_stored_as_v1alpha1_and_reconciled_in_place() {
    let _one = CONVERSION.lock().await;
    let ns = TestNamespace::new("conv-cs").await;
    let (_server, _reset) = conversion_server(&ns).await;
    let _ctl =
        RunningController::start(cloneset_ctl::IDENTITY, &ns.name, "", cloneset_ctl::run).await;

    apply(
        &ns,
        "
apiVersion: apps.kruise.io/v1beta1
kind: CloneSet
metadata: {name: beta}
spec:
  replicas: 2
  selector: {matchLabels: {app: beta}}
  template:
    metadata: {labels: {app: beta}}
    spec: {containers: [{name: web, image: 'nginx:1.24'}]}
  scaleStrategy: {enablePVCReuse: true, excludePreparingDelete: true}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      podUpdatePolicy: InPlaceIfPossible
      maxUnavailable: 1
      inPlaceUpdateStrategy: {gracePeriodSeconds: 1, imagePreDownloadParallelism: 3}
",
    )
    .await;

    // As the controller reads it: v1alpha1's strategy, the label and annotation forms.
    let alpha = ns.api::<CloneSet>().get("beta").await.unwrap();
    let strategy = &alpha.spec.update_strategy;
    assert_eq!(
        strategy.type_,
        Some(CloneSetUpdateStrategyType::InPlaceIfPossible)
    );
    assert_eq!(
        strategy
            .in_place_update_strategy
            .as_ref()
            .map(|s| s.grace_period_seconds),
        Some(1)
    );
    assert!(!alpha.spec.scale_strategy.disable_pvc_reuse);
    assert_eq!(
        alpha.labels()[keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE],
        "true"
    );
    assert_eq!(
        alpha.annotations()[keys::IMAGE_PREDOWNLOAD_PARALLELISM],
        "3"
    );

    // Reconciled: two Pods, ready.
    let pods = wait_for("2 ready Pods", MINUTE, || async {
        let pods = kruise_e2e::pods_with(&ns, "app=beta").await;
        let ready = pods.iter().filter(|p| kruise_e2e::is_ready(p)).count();
        if ready == 2 {
            Ok(pods)
        } else {
            Err(format!("{ready} ready"))
        }
    })
    .await;
    let uids: Vec<String> = pods.iter().map(|p| p.uid().unwrap()).collect();

    // A v1beta1 client changes the image: the Pods are updated in place (same UIDs),
    // and v1beta1 status reads back the rollout.
    let beta: Api<BetaCloneSet> = ns.api();
    beta.patch(
        "beta",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "nginx:1.25"}]}}}})),
    )
    .await
    .expect("patch as v1beta1");
    wait_for("both Pods on nginx:1.25 in place", 2 * MINUTE, || async {
        let pods: Vec<Pod> = kruise_e2e::pods_with(&ns, "app=beta").await;
        let updated = pods
            .iter()
            .filter(|p| {
                p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("nginx:1.25")
                    && kruise_e2e::is_ready(p)
            })
            .count();
        let mut now: Vec<String> = pods.iter().map(|p| p.uid().unwrap()).collect();
        now.sort();
        let mut before = uids.clone();
        before.sort();
        if updated == 2 && now == before {
            Ok(())
        } else {
            Err(format!(
                "{updated} updated, uids {now:?} (before {before:?})"
            ))
        }
    })
    .await;
    let read = wait_for("v1beta1 status: 2 updated", MINUTE, || async {
        let cs = beta.get("beta").await.map_err(|e| e.to_string())?;
        match &cs.status {
            Some(s) if s.updated_ready_replicas == 2 => Ok(cs),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let strategy = &read.spec.update_strategy;
    assert_eq!(strategy.type_, Some(BetaType::RollingUpdate));
    let rolling = strategy.rolling_update.as_ref().expect("rollingUpdate");
    assert_eq!(
        rolling.pod_update_policy,
        Some(CloneSetPodUpdatePolicy::InPlaceIfPossible)
    );
    assert!(read.spec.scale_strategy.enable_pvc_reuse);
    assert!(read.spec.scale_strategy.exclude_preparing_delete);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1alpha1_cloneset_reads_as_v1beta1_and_a_sidecarset_converts_both_ways() {
    let _one = CONVERSION.lock().await;
    let ns = TestNamespace::new("conv-read").await;
    let (_server, _reset) = conversion_server(&ns).await;

    ns.apply(
        "
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: alpha}
spec:
  replicas: 0
  selector: {matchLabels: {app: alpha}}
  template:
    metadata: {labels: {app: alpha}}
    spec: {containers: [{name: web, image: nginx}]}
  scaleStrategy: {disablePVCReuse: true}
  updateStrategy: {type: OnDelete, partition: 1}
",
    )
    .await
    .expect("create v1alpha1 CloneSet");
    let beta = wait_for("the CloneSet as v1beta1", MINUTE, || async {
        ns.api::<BetaCloneSet>()
            .get("alpha")
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(beta.spec.update_strategy.type_, Some(BetaType::OnDelete));
    assert_eq!(
        beta.spec
            .update_strategy
            .rolling_update
            .as_ref()
            .and_then(|r| r.partition.clone()),
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );
    assert!(!beta.spec.scale_strategy.enable_pvc_reuse);
    // kubectl, as a user would.
    let (ok, out, err) = kubectl(
        &[
            "get",
            "clonesets.v1beta1.apps.kruise.io",
            "alpha",
            "-n",
            &ns.name,
            "-o",
            "jsonpath={.spec.updateStrategy.type}",
        ],
        None,
    );
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "OnDelete");

    // SidecarSet (cluster-scoped): v1beta1's namespaceSelector on one namespace and
    // customVersion are v1alpha1's namespace and label.
    let name = format!("conv-{}", ns.name);
    let _cleanup = DeleteSidecarSet(name.clone());
    apply(
        &ns,
        &format!(
            "
apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata: {{name: {name}}}
spec:
  selector: {{matchLabels: {{app: nothing-here}}}}
  namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {ns}}}}}
  customVersion: v7
  containers: [{{name: side, image: busybox}}]
",
            ns = ns.name
        ),
    )
    .await;
    let alpha = Api::<SidecarSet>::all(ns.client.clone())
        .get(&name)
        .await
        .unwrap();
    assert_eq!(alpha.spec.namespace, ns.name);
    assert!(alpha.spec.namespace_selector.is_none());
    assert_eq!(alpha.labels()[keys::SIDECARSET_CUSTOM_VERSION], "v7");
    let beta = Api::<BetaSidecarSet>::all(ns.client.clone())
        .get(&name)
        .await
        .unwrap();
    assert_eq!(beta.spec.custom_version, "v7");
    assert!(!beta.labels().contains_key(keys::SIDECARSET_CUSTOM_VERSION));
}

struct DeleteSidecarSet(String);

impl Drop for DeleteSidecarSet {
    fn drop(&mut self) {
        let _ = kubectl(
            &[
                "delete",
                "sidecarset",
                &self.0,
                "--ignore-not-found",
                "--wait=false",
            ],
            None,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_daemonset_is_stored_as_v1alpha1_and_reads_its_status_back() {
    let _one = CONVERSION.lock().await;
    let ns = TestNamespace::new("conv-ds").await;
    let (_server, _reset) = conversion_server(&ns).await;
    let _ctl =
        RunningController::start(daemonset_ctl::IDENTITY, &ns.name, "", daemonset_ctl::run).await;

    let manifest = "
apiVersion: apps.kruise.io/v1beta1
kind: DaemonSet
metadata: {name: beta}
spec:
  selector: {matchLabels: {app: beta}}
  template:
    metadata: {labels: {app: beta}}
    spec:
      nodeSelector: {type: kwok}
      tolerations: [{operator: Exists}]
      containers: [{name: web, image: 'nginx:1.24'}]
  scaleStrategy: {partitionedScaling: true}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: {rollingUpdateType: InPlaceIfPossible, partition: 1}
";
    // The apiserver serves v1beta1 once it has reloaded the CRD the server registered.
    wait_for("a v1beta1 DaemonSet to be accepted", MINUTE, || async {
        ns.apply(manifest).await.map_err(|e| e.to_string())
    })
    .await;

    // As the controller reads it: the annotation form, nothing it does not know.
    let alpha = ns.api::<DaemonSet>().get("beta").await.unwrap();
    assert_eq!(
        alpha.annotations()[keys::DAEMONSET_PROGRESSIVE_CREATE_POD],
        "true"
    );
    let (ok, raw, err) = kubectl(
        &[
            "get",
            "daemonsets.v1alpha1.apps.kruise.io",
            "beta",
            "-n",
            &ns.name,
            "-o",
            "jsonpath={.spec.scaleStrategy}",
        ],
        None,
    );
    assert!(
        ok && raw.is_empty(),
        "v1alpha1 has no scaleStrategy: {raw} {err}"
    );

    // Reconciled with partitioned scaling: partition 1 keeps one kwok node without a
    // Pod; v1beta1 reads the revision hash as updateRevision.
    let beta: Api<BetaDaemonSet> = ns.api();
    let read = wait_for(
        "v1beta1 status: Pods on all kwok nodes but one, an updateRevision",
        MINUTE,
        || async {
            let ds = beta.get("beta").await.map_err(|e| e.to_string())?;
            match &ds.status {
                Some(s)
                    if !s.update_revision.is_empty()
                        && s.desired_number_scheduled >= 2
                        && s.current_number_scheduled == s.desired_number_scheduled - 1
                        && s.number_ready == s.current_number_scheduled =>
                {
                    Ok(ds)
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let alpha = ns.api::<DaemonSet>().get("beta").await.unwrap();
    assert_eq!(
        read.status.as_ref().unwrap().update_revision,
        alpha.status.as_ref().unwrap().daemon_set_hash
    );
    assert_eq!(
        read.spec
            .scale_strategy
            .as_ref()
            .map(|s| s.partitioned_scaling),
        Some(true)
    );

    // A v1beta1 client turns partitioned scaling off: the annotation goes.
    beta.patch(
        "beta",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"scaleStrategy": {"partitionedScaling": false}}})),
    )
    .await
    .expect("patch as v1beta1");
    let alpha = ns.api::<DaemonSet>().get("beta").await.unwrap();
    assert!(
        !alpha
            .annotations()
            .contains_key(keys::DAEMONSET_PROGRESSIVE_CREATE_POD),
        "{:?}",
        alpha.annotations()
    );
    // ... and the last node gets its Pod.
    wait_for("a Pod on every kwok node", MINUTE, || async {
        let ds = beta.get("beta").await.map_err(|e| e.to_string())?;
        match &ds.status {
            Some(s) if s.current_number_scheduled == s.desired_number_scheduled => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}
