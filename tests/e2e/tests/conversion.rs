//! CloneSet, SidecarSet, Advanced DaemonSet, ResourceDistribution, PersistentPodState,
//! WorkloadSpread, UnitedDeployment and ContainerRecreateRequest served as
//! `apps.kruise.io/v1beta1`, PodUnavailableBudget as `policy.kruise.io/v1beta1` (OpenKruise
//! 1.9's shapes), through the controllers' CRD conversion webhooks, while stored and
//! reconciled as v1alpha1. The harness serves the controllers' own conversion routes for
//! the whole test process and registers them on the CRDs, as each cluster-wide controller
//! does. One test here points the CRDs away from that webhook, which ends every watch on
//! those kinds cluster-wide, so `make test` runs these tests alone, after the others.

// Our CRDs over OpenKruise's, on copies under private groups that keep upstream's plurals
// and short names: while they exist `kubectl get cloneset` is ambiguous, so they run here,
// alone, with the conversion tests.
#[path = "upstream_crds.rs"]
mod upstream_crds;

use std::collections::BTreeMap;
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
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

const MINUTE: Duration = Duration::from_secs(60);
const CRDS: [&str; 9] = [
    "clonesets.apps.kruise.io",
    "sidecarsets.apps.kruise.io",
    "daemonsets.apps.kruise.io",
    "resourcedistributions.apps.kruise.io",
    "persistentpodstates.apps.kruise.io",
    "workloadspreads.apps.kruise.io",
    "uniteddeployments.apps.kruise.io",
    "containerrecreaterequests.apps.kruise.io",
    "podunavailablebudgets.policy.kruise.io",
];

/// The CRDs point at the test process's conversion webhook (the harness registers it, as
/// each cluster-wide controller does at start); waits until the apiserver uses it.
async fn conversion_served(ns: &TestNamespace) {
    for crd in CRDS {
        let (_, url, err) = kubectl(
            &[
                "get",
                "crd",
                crd,
                "-o",
                "jsonpath={.spec.conversion.webhook.clientConfig.url}",
            ],
            None,
        );
        assert!(url.starts_with("https://127.0.0.1:"), "{crd}: {url} {err}");
    }
    wait_conversion_effective(ns).await;
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

async fn apply(ns: &TestNamespace, yaml: &str) {
    ns.apply(yaml).await.expect("kubectl apply");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_cloneset_is_stored_as_v1alpha1_and_reconciled_in_place() {
    let ns = TestNamespace::new("conv-cs").await;
    conversion_served(&ns).await;
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
    // The pre-download setting is a v1alpha1 field too (as upstream v1.9.0's
    // CloneSetUpdateStrategy): it stays a field, no annotation is made up for it.
    assert_eq!(
        strategy
            .in_place_update_strategy
            .as_ref()
            .and_then(|s| s.image_pre_download_parallelism.clone()),
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(3))
    );
    assert!(
        !alpha
            .annotations()
            .contains_key(keys::IMAGE_PREDOWNLOAD_PARALLELISM)
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
    let ns = TestNamespace::new("conv-read").await;
    conversion_served(&ns).await;

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
    let ns = TestNamespace::new("conv-ds").await;
    conversion_served(&ns).await;
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

/// Retries `kubectl apply` of a v1beta1 manifest until the apiserver serves v1beta1 for
/// its kind (it does once it has reloaded the CRD the server registered).
async fn apply_v1beta1(ns: &TestNamespace, what: &str, manifest: &str) {
    wait_for(what, MINUTE, || async {
        ns.apply(manifest).await.map_err(|e| e.to_string())
    })
    .await;
}

/// `kubectl get <resource> <name> -o jsonpath=<path>` in `ns` (empty `ns`: cluster-scoped).
fn jsonpath(resource: &str, name: &str, ns: &str, path: &str) -> String {
    let mut args = vec!["get", resource, name, "-o"];
    let path = format!("jsonpath={path}");
    args.push(&path);
    if !ns.is_empty() {
        args.extend(["-n", ns]);
    }
    let (ok, out, err) = kubectl(&args, None);
    assert!(ok, "kubectl get {resource} {name}: {err}");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_resourcedistribution_selects_by_namespace_selector_and_reports_failed_namespaces()
 {
    use kruise_api::apps_v1alpha1::ResourceDistribution;
    use kruise_api::apps_v1beta1::resourcedistribution::ResourceDistribution as BetaRd;

    let ns = TestNamespace::new("conv-rd").await;
    conversion_served(&ns).await;
    let _ctl = RunningController::start(
        resourcedistribution_ctl::IDENTITY,
        &ns.name,
        "ResourceDistributionGate=true",
        resourcedistribution_ctl::run,
    )
    .await;
    // A namespace only the v1beta1 selector picks, and a listed one that does not exist.
    let (selected, missing) = (format!("{}-sel", ns.name), format!("{}-none", ns.name));
    let label = format!("conv-rd-{}", ns.name);
    let _selected = OwnedNamespace::create(&selected, &label).await;
    let rd_name = ns.name.clone();
    let _rd = DeleteRd(rd_name.clone());
    let manifest = format!(
        "
apiVersion: apps.kruise.io/v1beta1
kind: ResourceDistribution
metadata:
  name: {rd_name}
  labels: {{{scope}: {ns}}}
spec:
  resource:
    apiVersion: v1
    kind: ConfigMap
    metadata: {{name: shared}}
    data: {{k: v}}
  targets:
    includedNamespaces:
      list: [{{name: {missing}}}]
    namespaceSelector:
      matchLabels: {{{label}: 'yes'}}
",
        scope = resourcedistribution_ctl::labels::SCOPE,
        ns = ns.name,
    );
    apply_v1beta1(
        &ns,
        "a v1beta1 ResourceDistribution to be accepted",
        &manifest,
    )
    .await;

    // Stored (and read by the controller) in the v1alpha1 spelling.
    let client = ns.client.clone();
    let alpha = Api::<ResourceDistribution>::all(client.clone())
        .get(&rd_name)
        .await
        .unwrap();
    assert_eq!(
        alpha
            .spec
            .targets
            .namespace_label_selector
            .match_labels
            .as_ref()
            .unwrap()[&label],
        "yes"
    );
    // Distributed to the namespace the selector picked ...
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), &selected);
    wait_for("the copy in the selected namespace", MINUTE, || async {
        match configmaps.get_opt("shared").await {
            Ok(Some(cm)) => Ok(cm),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // ... and the missing one reported, as `failedNamespaces` in v1beta1.
    let beta: Api<BetaRd> = Api::all(client.clone());
    let status = wait_for(
        "v1beta1 status naming the missing namespace",
        MINUTE,
        || async {
            let rd = beta.get(&rd_name).await.map_err(|e| e.to_string())?;
            let status = rd.status.clone().unwrap_or_default();
            let reported = status.conditions.iter().any(|c| {
                c.type_ == keys::RD_CONDITION_NAMESPACE_NOT_EXISTS
                    && c.status == "True"
                    && c.failed_namespaces == [missing.clone()]
            });
            if reported && status.desired == 2 && status.succeeded == 1 {
                Ok(status)
            } else {
                Err(format!("{status:?}"))
            }
        },
    )
    .await;
    assert_eq!(status.failed, 1);
    let alpha_failed = jsonpath(
        "resourcedistributions.v1alpha1.apps.kruise.io",
        &rd_name,
        "",
        "{.status.conditions[?(@.type==\"NamespaceNotExists\")].failedNamespace[0]}",
    );
    assert_eq!(alpha_failed, missing);
    let beta_selector = jsonpath(
        "resourcedistributions.v1beta1.apps.kruise.io",
        &rd_name,
        "",
        "{.spec.targets.namespaceLabelSelector}",
    );
    assert!(
        beta_selector.is_empty(),
        "v1beta1 has no namespaceLabelSelector: {beta_selector}"
    );
}

/// A namespace this test creates, deleted when dropped.
struct OwnedNamespace(String);

impl OwnedNamespace {
    async fn create(name: &str, label: &str) -> Self {
        let yaml = format!(
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels: {{{label}: 'yes'}}\n"
        );
        let (ok, _, err) = kubectl(&["apply", "-f", "-"], Some(&yaml));
        assert!(ok, "create namespace {name}: {err}");
        OwnedNamespace(name.to_string())
    }
}

impl Drop for OwnedNamespace {
    fn drop(&mut self) {
        let _ = kubectl(&["delete", "namespace", &self.0, "--wait=false"], None);
    }
}

/// A cluster-scoped ResourceDistribution, deleted when dropped.
struct DeleteRd(String);

impl Drop for DeleteRd {
    fn drop(&mut self) {
        let _ = kubectl(
            &[
                "delete",
                "resourcedistribution",
                &self.0,
                "--wait=false",
                "--ignore-not-found",
            ],
            None,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_persistentpodstate_records_the_topology_keys_it_names() {
    use kruise_api::apps_v1alpha1::PersistentPodState;
    use kruise_api::apps_v1beta1::persistentpodstate::PersistentPodState as BetaPps;
    const ZONE: &str = "topology.kubernetes.io/zone";

    let ns = TestNamespace::new("conv-pps").await;
    conversion_served(&ns).await;
    let _ctl = RunningController::start(
        persistentpodstate_ctl::IDENTITY,
        &ns.name,
        "",
        persistentpodstate_ctl::run,
    )
    .await;
    let manifest = format!(
        "
apiVersion: apps.kruise.io/v1beta1
kind: PersistentPodState
metadata: {{name: web}}
spec:
  targetRef: {{apiVersion: apps/v1, kind: StatefulSet, name: web}}
  requiredPersistentTopology:
    keys: [{ZONE}]
  preferredPersistentTopology:
  - weight: 100
    preference: {{keys: [kubernetes.io/hostname]}}
"
    );
    apply_v1beta1(
        &ns,
        "a v1beta1 PersistentPodState to be accepted",
        &manifest,
    )
    .await;
    let alpha = ns.api::<PersistentPodState>().get("web").await.unwrap();
    assert_eq!(
        alpha
            .spec
            .required_persistent_topology
            .as_ref()
            .map(|t| t.node_topology_keys.clone()),
        Some(vec![ZONE.to_string()])
    );
    assert_eq!(
        alpha.spec.preferred_persistent_topology[0]
            .preference
            .node_topology_keys,
        vec!["kubernetes.io/hostname"]
    );

    // A StatefulSet (kube-controller-manager's) with one Pod: its zone and hostname are
    // recorded, the keys the v1beta1 spec named.
    apply(
        &ns,
        "
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: c, image: 'nginx:alpine'}]
",
    )
    .await;
    let beta: Api<BetaPps> = ns.api();
    let state = wait_for("the Pod's state, read as v1beta1", MINUTE, || async {
        let pps = beta.get("web").await.map_err(|e| e.to_string())?;
        let status = pps.status.clone().unwrap_or_default();
        match status.pod_states.get("web-0") {
            Some(s) if s.node_topology_labels.contains_key(ZONE) => Ok(s.clone()),
            _ => Err(format!("{status:?}")),
        }
    })
    .await;
    let pod = ns.api::<Pod>().get("web-0").await.unwrap();
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap();
    assert_eq!(state.node_name, node);
    assert_eq!(state.node_topology_labels["kubernetes.io/hostname"], node);
    let read = beta.get("web").await.unwrap();
    assert_eq!(
        read.spec.required_persistent_topology.map(|t| t.keys),
        Some(vec![ZONE.to_string()])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_workloadspread_places_pods_by_its_renamed_node_selectors() {
    use kruise_api::apps_v1alpha1::WorkloadSpread;
    use kruise_api::apps_v1beta1::workloadspread::WorkloadSpread as BetaWs;
    const ZONE: &str = "topology.kubernetes.io/zone";

    let ns = TestNamespace::new("conv-ws").await;
    conversion_served(&ns).await;
    // zone-a takes one Pod, zone-b the rest; both named by v1beta1's requiredNodeSelector.
    let manifest = format!(
        "
apiVersion: apps.kruise.io/v1beta1
kind: WorkloadSpread
metadata: {{name: spread}}
spec:
  targetRef: {{apiVersion: apps/v1, kind: ReplicaSet, name: web}}
  subsets:
  - name: zone-a
    maxReplicas: 1
    requiredNodeSelector:
      matchExpressions: [{{key: {ZONE}, operator: In, values: [zone-a]}}]
  - name: zone-b
    requiredNodeSelector:
      matchExpressions: [{{key: {ZONE}, operator: In, values: [zone-b]}}]
"
    );
    apply_v1beta1(&ns, "a v1beta1 WorkloadSpread to be accepted", &manifest).await;
    let alpha = ns.api::<WorkloadSpread>().get("spread").await.unwrap();
    assert!(
        alpha
            .spec
            .subsets
            .iter()
            .all(|s| s.required_node_selector_term.is_some()),
        "{:?}",
        alpha.spec.subsets
    );

    let _ctl = RunningController::start(
        workloadspread_ctl::IDENTITY,
        &ns.name,
        "",
        workloadspread_ctl::run,
    )
    .await;
    let probe: Pod = serde_json::from_value(json!({
        "metadata": {"name": "probe-0", "ownerReferences": [{"apiVersion": "apps/v1",
            "kind": "ReplicaSet", "name": "web",
            "uid": "00000000-0000-0000-0000-000000000000", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "nginx:alpine"}]}
    }))
    .unwrap();
    kruise_e2e::wait_webhook_effective(&ns.api(), &probe, |p: &Pod| {
        p.annotations().contains_key(keys::WS_MATCHED)
    })
    .await;
    apply(
        &ns,
        "
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: c, image: 'nginx:alpine'}]
",
    )
    .await;

    // The Pods land where the renamed selectors say: one in zone-a, two in zone-b.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(ns.client.clone());
    let beta: Api<BetaWs> = ns.api();
    let per_subset = wait_for("v1beta1 status: zone-a 1, zone-b 2", MINUTE, || async {
        let ws = beta.get("spread").await.map_err(|e| e.to_string())?;
        let status = ws.status.clone().unwrap_or_default();
        let replicas: Vec<(String, i32)> = status
            .subset_statuses
            .iter()
            .map(|s| (s.name.clone(), s.replicas))
            .collect();
        if replicas == [("zone-a".into(), 1), ("zone-b".into(), 2)] {
            Ok(replicas)
        } else {
            Err(format!("{replicas:?}"))
        }
    })
    .await;
    assert_eq!(per_subset.len(), 2);
    let pods = wait_for("3 scheduled Pods", MINUTE, || async {
        let pods = kruise_e2e::pods_with(&ns, "app=web").await;
        let scheduled: Vec<Pod> = pods
            .into_iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .collect();
        if scheduled.len() == 3 {
            Ok(scheduled)
        } else {
            Err(format!("{} scheduled", scheduled.len()))
        }
    })
    .await;
    let mut zones = BTreeMap::new();
    for pod in &pods {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap();
        let zone = nodes.get(&node).await.unwrap().labels()[ZONE].clone();
        *zones.entry(zone).or_insert(0) += 1;
    }
    assert_eq!(
        zones,
        BTreeMap::from([("zone-a".to_string(), 1), ("zone-b".to_string(), 2)])
    );
    let read = beta.get("spread").await.unwrap();
    assert!(
        read.spec
            .subsets
            .iter()
            .all(|s| s.required_node_selector.is_some())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_uniteddeployment_reads_subset_replicas_and_revision_from_its_status() {
    use kruise_api::apps_v1alpha1::UnitedDeployment;
    use kruise_api::apps_v1beta1::uniteddeployment::UnitedDeployment as BetaUd;

    let ns = TestNamespace::new("conv-ud").await;
    conversion_served(&ns).await;
    let _ctl = RunningController::start(
        uniteddeployment_ctl::IDENTITY,
        &ns.name,
        "",
        uniteddeployment_ctl::run,
    )
    .await;
    let manifest = "
apiVersion: apps.kruise.io/v1beta1
kind: UnitedDeployment
metadata: {name: ud}
spec:
  replicas: 5
  selector: {matchLabels: {app: ud}}
  template:
    deploymentTemplate:
      metadata: {labels: {app: ud}}
      spec:
        selector: {matchLabels: {app: ud}}
        template:
          metadata: {labels: {app: ud}}
          spec:
            terminationGracePeriodSeconds: 0
            containers: [{name: c, image: 'nginx:alpine'}]
  topology:
    subsets:
    - name: zone-a
      replicas: 2
      nodeSelectorTerm:
        matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [zone-a]}]
    - name: zone-b
      nodeSelectorTerm:
        matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [zone-b]}]
";
    apply_v1beta1(&ns, "a v1beta1 UnitedDeployment to be accepted", manifest).await;

    let beta: Api<BetaUd> = ns.api();
    let status = wait_for(
        "v1beta1 status: zone-a 2, zone-b 3, an updatedRevision, 5 ready",
        MINUTE,
        || async {
            let ud = beta.get("ud").await.map_err(|e| e.to_string())?;
            let status = ud.status.clone().unwrap_or_default();
            let replicas: Vec<(String, i32)> = status
                .subset_statuses
                .iter()
                .map(|s| (s.name.clone(), s.replicas))
                .collect();
            if replicas == [("zone-a".into(), 2), ("zone-b".into(), 3)]
                && !status.updated_revision.is_empty()
                && status.ready_replicas == 5
            {
                Ok(status)
            } else {
                Err(format!("{status:?}"))
            }
        },
    )
    .await;
    // The same status as the controller wrote it (v1alpha1): the maps and updateStatus.
    let alpha = ns.api::<UnitedDeployment>().get("ud").await.unwrap();
    let alpha_status = alpha.status.unwrap();
    assert_eq!(
        alpha_status.subset_replicas,
        BTreeMap::from([("zone-a".to_string(), 2), ("zone-b".to_string(), 3)])
    );
    assert_eq!(
        alpha_status.update_status.unwrap().updated_revision,
        status.updated_revision
    );
    let raw = jsonpath(
        "uniteddeployments.v1beta1.apps.kruise.io",
        "ud",
        &ns.name,
        "{.status.subsetReplicas}{.status.updateStatus}",
    );
    assert!(raw.is_empty(), "v1beta1 has neither map: {raw}");
    // The subset Deployments exist with the split the v1beta1 status reported.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = ns.api();
    let list = deployments.list(&Default::default()).await.unwrap();
    let mut split: Vec<i32> = list
        .items
        .iter()
        .map(|d| d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0))
        .collect();
    split.sort();
    assert_eq!(split, [2, 3]);
}

/// A ContainerRecreateRequest as crr-ctl writes it (v1alpha1, its progress in two
/// annotations) reads as v1beta1 with them in its status and without the annotations, and
/// a write through v1beta1 stores them as the annotations again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1alpha1_crr_reads_as_v1beta1_with_its_annotations_as_status() {
    use kruise_api::apps_v1alpha1::ContainerRecreateRequest;
    use kruise_api::apps_v1beta1::containerrecreaterequest::ContainerRecreateRequest as BetaCrr;
    const AT: &str = "2026-11-26T08:00:00Z";

    let ns = TestNamespace::new("conv-crr").await;
    conversion_served(&ns).await;
    let snapshot =
        r#"[{"name":"app","ready":true,"restartCount":1,"containerID":"containerd://new"}]"#;
    apply(
        &ns,
        &format!(
            "
apiVersion: apps.kruise.io/v1alpha1
kind: ContainerRecreateRequest
metadata:
  name: crr
  annotations:
    {sync}: '{snapshot}'
    {unready}: '{AT}'
spec:
  podName: pod
  containers: [{{name: app}}]
",
            sync = keys::CRR_SYNC_CONTAINER_STATUSES,
            unready = keys::CRR_UNREADY_ACQUIRED,
        ),
    )
    .await;
    let beta = wait_for("the request served as v1beta1", MINUTE, || async {
        ns.api::<BetaCrr>()
            .get("crr")
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    let status = beta.status.clone().expect("a v1beta1 status");
    assert_eq!(status.container_status_snapshot.len(), 1);
    assert_eq!(
        status.container_status_snapshot[0].container_id,
        "containerd://new"
    );
    assert!(status.container_status_snapshot[0].ready);
    assert_eq!(status.conditions.len(), 1);
    let grace = &status.conditions[0];
    assert_eq!(
        (grace.type_.as_str(), grace.status.as_str()),
        ("PreRecreateGrace", "True")
    );
    assert_eq!(grace.last_transition_time.0.to_string(), AT);
    assert!(
        !beta
            .annotations()
            .contains_key(keys::CRR_SYNC_CONTAINER_STATUSES)
    );
    assert!(!beta.annotations().contains_key(keys::CRR_UNREADY_ACQUIRED));

    ns.api::<BetaCrr>()
        .patch(
            "crr",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "v1beta1"}}})),
        )
        .await
        .expect("a v1beta1 patch");
    let alpha = ns
        .api::<ContainerRecreateRequest>()
        .get("crr")
        .await
        .unwrap();
    assert_eq!(
        alpha.labels().get("touched").map(String::as_str),
        Some("v1beta1")
    );
    assert_eq!(
        alpha
            .annotations()
            .get(keys::CRR_SYNC_CONTAINER_STATUSES)
            .map(String::as_str),
        Some(snapshot)
    );
    assert_eq!(
        alpha
            .annotations()
            .get(keys::CRR_UNREADY_ACQUIRED)
            .map(String::as_str),
        Some(AT)
    );
}

/// A PodUnavailableBudget written as `policy.kruise.io/v1beta1` (as OpenKruise 1.9's users
/// write it) is stored as v1alpha1 with the annotations pub-ctl reads, and reads back as
/// v1beta1 with its fields, `ignoredPodSelector` included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1beta1_pub_is_stored_with_the_annotations_pub_ctl_reads() {
    use kruise_api::conversion::podunavailablebudget::IGNORED_POD_SELECTOR_ANNOTATION;
    use kruise_api::policy_v1alpha1::{PodUnavailableBudget, PubOperation};
    use kruise_api::policy_v1beta1::PodUnavailableBudget as BetaPub;

    let ns = TestNamespace::new("conv-pub").await;
    conversion_served(&ns).await;
    apply_v1beta1(
        &ns,
        "the PUB applied as v1beta1",
        "
apiVersion: policy.kruise.io/v1beta1
kind: PodUnavailableBudget
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  maxUnavailable: 1
  protectOperations: [DELETE, EVICT]
  protectTotalReplicas: 3
  ignoredPodSelector: {matchLabels: {skip: 'yes'}}
",
    )
    .await;
    let alpha = ns.api::<PodUnavailableBudget>().get("web").await.unwrap();
    let annotation = |key: &str| alpha.annotations().get(key).cloned();
    assert_eq!(
        annotation(keys::PUB_PROTECT_OPERATIONS).as_deref(),
        Some("DELETE,EVICT")
    );
    assert_eq!(
        annotation(keys::PUB_PROTECT_TOTAL_REPLICAS).as_deref(),
        Some("3")
    );
    assert!(annotation(IGNORED_POD_SELECTOR_ANNOTATION).is_some());
    assert_eq!(
        alpha.spec.max_unavailable,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );

    let beta = ns.api::<BetaPub>().get("web").await.unwrap();
    assert_eq!(
        beta.spec.protect_operations,
        [PubOperation::Delete, PubOperation::Evict]
    );
    assert_eq!(beta.spec.protect_total_replicas, Some(3));
    let ignored = beta
        .spec
        .ignored_pod_selector
        .clone()
        .expect("ignoredPodSelector kept");
    assert_eq!(
        ignored
            .match_labels
            .unwrap()
            .get("skip")
            .map(String::as_str),
        Some("yes")
    );
    assert!(
        !beta
            .annotations()
            .contains_key(IGNORED_POD_SELECTOR_ANNOTATION)
    );
}

/// Points the CRDs back at the process's conversion webhook when the test ends, however.
struct ConversionBack;

impl Drop for ConversionBack {
    fn drop(&mut self) {
        if let Err(e) = kruise_e2e::reregister_conversions() {
            eprintln!("re-registering the conversion webhook: {e:#}");
        }
    }
}

/// OpenKruise 1.9 owns Pods as `apps.kruise.io/v1beta1` (CloneSet, Advanced DaemonSet,
/// UnitedDeployment). Right after our CRDs are applied over its install, before any
/// controller of ours registers its conversion webhook, v1beta1 reads must fail (and be
/// retried), never answer 404: the garbage collector takes a 404 for "the owner is gone"
/// and deletes the Pods (seen once, when our CRDs shipped v1beta1 unserved).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_owned_as_v1beta1_survive_while_no_conversion_webhook_answers() {
    let ns = TestNamespace::new("conv-gc").await;
    conversion_served(&ns).await;
    let _back = ConversionBack;
    // The CRDs as shipped: conversion at the controllers' Services, absent here.
    kruise_e2e::install_crds(&ns.client)
        .await
        .expect("apply deploy/crds");
    let (_, url, _) = kubectl(
        &[
            "get",
            "crd",
            "clonesets.apps.kruise.io",
            "-o",
            "jsonpath={.spec.conversion.webhook.clientConfig.service.name} {.spec.versions[*].served}",
        ],
        None,
    );
    assert_eq!(url.trim(), "cloneset-webhook true true");
    apply(
        &ns,
        "
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: owner}
spec:
  replicas: 0
  selector: {matchLabels: {app: owned}}
  template:
    metadata: {labels: {app: owned}}
    spec: {containers: [{name: c, image: busybox}]}
",
    )
    .await;
    let cs: CloneSet = ns.api().get("owner").await.expect("the CloneSet");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "owned", "labels": {"app": "owned"},
            "ownerReferences": [{"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
                "name": "owner", "uid": cs.uid().unwrap(),
                "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap();
    let pods: Api<Pod> = ns.api();
    let uid = pods
        .create(&Default::default(), &pod)
        .await
        .expect("create the Pod")
        .uid();
    // The garbage collector looks at a new dependent within a second or two; give it ten.
    let (ok, _, err) = kubectl(
        &[
            "get",
            "clonesets.v1beta1.apps.kruise.io",
            "owner",
            "-n",
            &ns.name,
        ],
        None,
    );
    assert!(!ok, "a v1beta1 read fails while nothing converts");
    assert!(!err.contains("NotFound"), "and is no 404: {err}");
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let live = pods.get_opt("owned").await.expect("read the Pod");
        assert_eq!(live.map(|p| p.uid()), Some(uid.clone()), "the Pod is kept");
    }
    // Our controller registers its webhook: the owner reads as v1beta1 and the Pod stays.
    kruise_e2e::reregister_conversions().expect("register the conversion webhook");
    wait_for("the owner read as v1beta1", MINUTE, || async {
        let (ok, out, err) = kubectl(
            &[
                "get",
                "clonesets.v1beta1.apps.kruise.io",
                "owner",
                "-n",
                &ns.name,
                "-o",
                "jsonpath={.metadata.uid}",
            ],
            None,
        );
        if ok && out == cs.uid().unwrap() {
            Ok(())
        } else {
            Err(err)
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let live = pods.get_opt("owned").await.expect("read the Pod");
    assert_eq!(live.map(|p| p.uid()), Some(uid), "the Pod is kept");
}
