//! A live cluster switched from upstream OpenKruise v1.9.0's kruise-manager to our
//! controllers and back (`make migration-test`, tests/migration/run.sh; not part of
//! `make test`: it needs a cluster of its own with an audit log and kruise-manager).
//!
//! The script starts and stops the processes; the assertions live here, in phases it
//! runs one after the other (`MIGRATION_PHASE`), each `cargo test ... -- --ignored
//! migration::phase`:
//!
//! - `create`: every workload of [`kinds`], created under the manager running now, until
//!   each is settled; the Pods' UIDs and the ControllerRevisions recorded (snapshot.json).
//! - `check`: after a switch, the incoming manager (`MIGRATION_INCOMING`: `upstream` is
//!   kruise-manager's User-Agent `kruise-manager`, `ours` is `<binary>/<version>` of each
//!   binary of tests/cluster/controllers.txt) until every workload is settled again, then
//!   the audit log from `MIGRATION_AUDIT_FROM` (the byte offset at its start) to its end:
//!   no create/update/patch/delete of `pods` or a Pod subresource by it, no Pod UID
//!   changed, no ControllerRevision made or removed.
//! - `rollout`: a rollout of each kind driven through the incoming manager, until done; in
//!   place where the kind updates in place (the Pods' UIDs stay).
//! - `report`: every phase's results in one table and target/migration/summary.json.
//!
//! Each phase records every failure (kind, assertion, the audit entries) before it fails,
//! so one run tells all that is wrong, not the first thing.
//!
//! The client here is built from the kubeconfig alone: `kruise_e2e::client()` installs
//! deploy/crds, which is one of the things a switch has to do at its own moment.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

// --- the audit log ----------------------------------------------------------------------

/// One audit event, the fields counted (Metadata level: no bodies).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuditEvent {
    #[serde(default)]
    stage: String,
    #[serde(default)]
    verb: String,
    #[serde(default)]
    user_agent: String,
    #[serde(default)]
    object_ref: Option<ObjectRef>,
    #[serde(default)]
    response_status: Option<ResponseStatus>,
    #[serde(default)]
    request_received_timestamp: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRef {
    resource: Option<String>,
    subresource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ResponseStatus {
    #[serde(default)]
    code: u16,
}

/// Whose requests count: the manager that just took over.
#[derive(Debug, Clone)]
enum Incoming {
    /// kruise-manager sets `cfg.UserAgent = "kruise-manager"` (openkruise/kruise v1.9.0
    /// main.go).
    Upstream,
    /// Ours: `<binary>/<version>` (kruise-runtime's identity), one per binary.
    Ours(Vec<String>),
}

impl Incoming {
    fn matches(&self, user_agent: &str) -> bool {
        match self {
            Incoming::Upstream => user_agent.starts_with("kruise-manager"),
            Incoming::Ours(bins) => bins.iter().any(|b| {
                user_agent
                    .strip_prefix(b.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
            }),
        }
    }
}

const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

/// A write to a Pod (or a Pod subresource: status, eviction, ...), as the audit log has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct PodWrite {
    time: String,
    user_agent: String,
    verb: String,
    subresource: Option<String>,
    namespace: String,
    name: String,
    code: u16,
}

/// Requests of the matched user agents in a window, counted.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct AuditCounts {
    /// Every completed request of a matched user agent: `<verb> <resource>[/<subresource>]`.
    by_verb_resource: BTreeMap<String, u64>,
    /// Requests per matched user agent.
    by_user_agent: BTreeMap<String, u64>,
    /// Pod writes of the matched user agents, each.
    pod_writes: Vec<PodWrite>,
}

/// Reads the JSON-lines audit log between two byte offsets (`to` None: to its end). A
/// line the apiserver is still writing at the end is left out; a line cut at `from` (an
/// offset inside a line) too.
fn read_audit(path: &Path, from: u64, to: Option<u64>) -> std::io::Result<Vec<AuditEvent>> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let to = to.unwrap_or(len).min(len);
    if from >= to {
        return Ok(Vec::new());
    }
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::with_capacity((to - from) as usize);
    file.take(to - from).read_to_end(&mut bytes)?;
    Ok(parse_audit(&bytes))
}

fn parse_audit(bytes: &[u8]) -> Vec<AuditEvent> {
    bytes
        .lines()
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str::<AuditEvent>(&line).ok())
        // RequestReceived is omitted by the policy; ResponseStarted precedes the
        // ResponseComplete of long-running requests: one event per request.
        .filter(|e| e.stage == "ResponseComplete" || e.stage.is_empty())
        .collect()
}

fn count_audit(events: &[AuditEvent], who: &Incoming) -> AuditCounts {
    let mut counts = AuditCounts::default();
    for e in events.iter().filter(|e| who.matches(&e.user_agent)) {
        let r = e.object_ref.clone().unwrap_or_default();
        let resource = r.resource.clone().unwrap_or_else(|| "nonResource".into());
        let key = match &r.subresource {
            Some(s) => format!("{} {resource}/{s}", e.verb),
            None => format!("{} {resource}", e.verb),
        };
        *counts.by_verb_resource.entry(key).or_default() += 1;
        *counts
            .by_user_agent
            .entry(e.user_agent.clone())
            .or_default() += 1;
        if resource == "pods" && WRITE_VERBS.contains(&e.verb.as_str()) {
            counts.pod_writes.push(PodWrite {
                time: e.request_received_timestamp.clone(),
                user_agent: e.user_agent.clone(),
                verb: e.verb.clone(),
                subresource: r.subresource.clone(),
                namespace: r.namespace.clone().unwrap_or_default(),
                name: r.name.clone().unwrap_or_default(),
                code: e.response_status.as_ref().map_or(0, |s| s.code),
            });
        }
    }
    counts
}

// --- the workloads ----------------------------------------------------------------------

/// The JSON patch of the n-th rollout.
type RolloutPatch = fn(u32) -> Value;

/// A workload kind of the scenario: one object in a namespace of its own (`mig-<kind>`),
/// so a Pod or a ControllerRevision is attributed to a kind by its namespace.
struct Kind {
    name: &'static str,
    group: &'static str,
    /// The version read and patched: served by upstream's CRDs and by ours.
    version: &'static str,
    api_kind: &'static str,
    plural: &'static str,
    object: &'static str,
    /// Created under upstream, in the version a user of v1.9.0 writes.
    manifest: fn() -> Value,
    /// `Ok(())` when the status says the current generation is fully rolled out and ready.
    settled: fn(&DynamicObject) -> Result<(), String>,
    /// A JSON patch that starts a rollout, and whether that rollout keeps the Pods.
    rollout: Option<(RolloutPatch, bool)>,
    /// Other namespaces whose ControllerRevisions belong to this kind.
    revision_namespaces: &'static [&'static str],
    /// Workloads created with it in its namespace (after it: a SidecarSet or a
    /// WorkloadSpread acts at Pod creation), each settled like a CloneSet.
    companions: fn() -> Vec<Value>,
}

impl Kind {
    fn namespace(&self) -> String {
        format!("mig-{}", self.name)
    }
    fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.into(),
            version: self.version.into(),
            api_version: format!("{}/{}", self.group, self.version),
            kind: self.api_kind.into(),
            plural: self.plural.into(),
        }
    }
    fn api(&self, client: &Client) -> Api<DynamicObject> {
        let ar = self.api_resource();
        if self.cluster_scoped() {
            Api::all_with(client.clone(), &ar)
        } else {
            Api::namespaced_with(client.clone(), &self.namespace(), &ar)
        }
    }
    fn cluster_scoped(&self) -> bool {
        self.api_kind == "SidecarSet"
    }
}

const APPS: &str = "apps.kruise.io";

/// A Pod template on the cluster's kwok nodes; `image` changes in a rollout.
fn pod_template(app: &str, image: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {
            "containers": [{"name": "main", "image": image}],
            "nodeSelector": {"type": "kwok"},
            "tolerations": [{"operator": "Exists"}]
        }
    })
}

fn image(n: u32) -> String {
    format!("nginx:1.{}", 25 + n)
}

fn image_patch(path: &'static str) -> fn(u32) -> Value {
    // One function per path: a fn pointer cannot capture.
    match path {
        "template" => {
            |n| json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image(n)}])
        }
        _ => {
            |n| json!([{"op": "replace", "path": "/spec/containers/0/image", "value": format!("busybox:1.3{n}")}])
        }
    }
}

/// Every kind of the scenario; `MIGRATION_KINDS=cloneset,statefulset,...` runs a few.
fn kinds() -> Vec<Kind> {
    let only: Option<Vec<String>> = std::env::var("MIGRATION_KINDS")
        .ok()
        .filter(|v| !v.is_empty())
        .map(|v| v.split(',').map(|k| k.trim().to_string()).collect());
    base_kinds()
        .into_iter()
        .chain(more_kinds())
        .filter(|k| only.as_ref().is_none_or(|o| o.iter().any(|n| n == k.name)))
        .collect()
}

fn base_kinds() -> Vec<Kind> {
    vec![
        Kind {
            name: "cloneset",
            group: APPS,
            version: "v1alpha1",
            api_kind: "CloneSet",
            plural: "clonesets",
            object: "cs",
            manifest: || {
                json!({
                    "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
                    "metadata": {"name": "cs"},
                    "spec": {
                        "replicas": 3, "minReadySeconds": 1,
                        "selector": {"matchLabels": {"app": "cs"}},
                        "template": pod_template("cs", &image(0)),
                        "updateStrategy": {"type": "RollingUpdate",
                            "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}}
                    }
                })
            },
            settled: replicas_settled,
            rollout: Some((image_patch("template"), true)),
            revision_namespaces: &[],
            companions: Vec::new,
        },
        Kind {
            name: "statefulset",
            group: APPS,
            version: "v1beta1",
            api_kind: "StatefulSet",
            plural: "statefulsets",
            object: "sts",
            manifest: || {
                // In place needs the readiness gate (upstream's webhook insists).
                let mut template = pod_template("sts", &image(0));
                template["spec"]["readinessGates"] =
                    json!([{"conditionType": "InPlaceUpdateReady"}]);
                json!({
                    "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
                    "metadata": {"name": "sts"},
                    "spec": {
                        "replicas": 3, "serviceName": "sts",
                        "podManagementPolicy": "Parallel",
                        "selector": {"matchLabels": {"app": "sts"}},
                        "template": template,
                        "updateStrategy": {"type": "RollingUpdate",
                            "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1,
                                "minReadySeconds": 1}}
                    }
                })
            },
            settled: replicas_settled,
            rollout: Some((image_patch("template"), true)),
            revision_namespaces: &[],
            companions: Vec::new,
        },
        Kind {
            name: "daemonset",
            group: APPS,
            version: "v1alpha1",
            api_kind: "DaemonSet",
            plural: "daemonsets",
            object: "ds",
            manifest: || {
                json!({
                    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet",
                    "metadata": {"name": "ds"},
                    "spec": {
                        "minReadySeconds": 1,
                        "selector": {"matchLabels": {"app": "ds"}},
                        "template": pod_template("ds", &image(0)),
                        "updateStrategy": {"type": "RollingUpdate",
                            "rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 1}}
                    }
                })
            },
            settled: daemonset_settled,
            rollout: Some((image_patch("template"), true)),
            revision_namespaces: &[],
            companions: Vec::new,
        },
        Kind {
            // Injects into the CloneSet of its own namespace (mig-sidecarset/sc-target).
            name: "sidecarset",
            group: APPS,
            version: "v1alpha1",
            api_kind: "SidecarSet",
            plural: "sidecarsets",
            object: "sc",
            manifest: || {
                json!({
                    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
                    "metadata": {"name": "sc"},
                    "spec": {
                        "namespace": "mig-sidecarset",
                        "selector": {"matchLabels": {"app": "sc-target"}},
                        "containers": [{"name": "sidecar", "image": "busybox:1.30",
                            "command": ["sleep", "999d"]}],
                        "updateStrategy": {"type": "RollingUpdate", "maxUnavailable": 1}
                    }
                })
            },
            settled: sidecarset_settled,
            rollout: Some((image_patch("sidecar"), true)),
            // Upstream keeps a SidecarSet's revisions in its own namespace (kruise-system).
            revision_namespaces: &["kruise-system"],
            companions: || vec![cloneset("sc-target", 2)],
        },
    ]
}

/// A CloneSet (v1beta1, as a v1.9.0 user writes it) updating in place.
fn cloneset(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas, "minReadySeconds": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": pod_template(name, &image(0)),
            "updateStrategy": {"type": "RollingUpdate",
                "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}}
        }
    })
}

fn zone_subset(zone: &str) -> Value {
    json!({"name": zone, "nodeSelectorTerm": {"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}})
}

/// The kinds beyond the four workloads: each over a workload of its own namespace.
/// kruise-manager runs with `ImagePullJobGate=true`, as OpenKruise's chart sets it (the
/// gate's default, off, makes its webhook refuse an ImagePullJob).
fn more_kinds() -> Vec<Kind> {
    vec![
        Kind {
            name: "uniteddeployment",
            group: APPS,
            version: "v1alpha1",
            api_kind: "UnitedDeployment",
            plural: "uniteddeployments",
            object: "ud",
            manifest: || {
                json!({
                    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "UnitedDeployment",
                    "metadata": {"name": "ud"},
                    "spec": {
                        "replicas": 4,
                        "selector": {"matchLabels": {"app": "ud"}},
                        "template": {"cloneSetTemplate": {
                            "metadata": {"labels": {"app": "ud"}},
                            "spec": {
                                "selector": {"matchLabels": {"app": "ud"}},
                                "template": pod_template("ud", &image(0)),
                                // v1beta1's layout: the version of the CloneSets it makes.
                                "updateStrategy": {"type": "RollingUpdate",
                                    "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}}
                            }
                        }},
                        "topology": {"subsets": [zone_subset("zone-a"), zone_subset("zone-b")]}
                    }
                })
            },
            settled: ud_settled,
            rollout: Some((
                |n| {
                    json!([{"op": "replace",
                    "path": "/spec/template/cloneSetTemplate/spec/template/spec/containers/0/image",
                    "value": image(n)}])
                },
                true,
            )),
            revision_namespaces: &[],
            companions: Vec::new,
        },
        Kind {
            name: "workloadspread",
            group: APPS,
            version: "v1alpha1",
            api_kind: "WorkloadSpread",
            plural: "workloadspreads",
            object: "ws",
            manifest: || {
                json!({
                    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
                    "metadata": {"name": "ws"},
                    "spec": {
                        "targetRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "ws-target"},
                        "subsets": [
                            {"name": "zone-a", "maxReplicas": 1, "requiredNodeSelectorTerm": {"matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]}},
                            {"name": "zone-b", "requiredNodeSelectorTerm": {"matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-b"]}]}}
                        ]
                    }
                })
            },
            settled: observed_settled,
            rollout: None,
            revision_namespaces: &[],
            companions: || vec![cloneset("ws-target", 3)],
        },
        Kind {
            name: "pub",
            group: "policy.kruise.io",
            version: "v1alpha1",
            api_kind: "PodUnavailableBudget",
            plural: "podunavailablebudgets",
            object: "pub",
            manifest: || {
                json!({
                    "apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
                    "metadata": {"name": "pub"},
                    "spec": {"selector": {"matchLabels": {"app": "pub-target"}}, "maxUnavailable": 1}
                })
            },
            settled: pub_settled,
            rollout: None,
            revision_namespaces: &[],
            companions: || vec![cloneset("pub-target", 3)],
        },
        Kind {
            name: "persistentpodstate",
            group: APPS,
            version: "v1alpha1",
            api_kind: "PersistentPodState",
            plural: "persistentpodstates",
            object: "pps",
            manifest: || {
                json!({
                    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "PersistentPodState",
                    "metadata": {"name": "pps"},
                    "spec": {
                        "targetRef": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "pps-target"},
                        "requiredPersistentTopology": {"nodeTopologyKeys": ["topology.kubernetes.io/zone"]},
                        "persistentPodStateRetentionPolicy": "WhenDeleted"
                    }
                })
            },
            settled: pps_settled,
            rollout: None,
            revision_namespaces: &[],
            companions: || {
                vec![json!({
                    "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
                    "metadata": {"name": "pps-target"},
                    "spec": {
                        "replicas": 2, "serviceName": "pps-target", "podManagementPolicy": "Parallel",
                        "selector": {"matchLabels": {"app": "pps-target"}},
                        "template": pod_template("pps-target", &image(0))
                    }
                })]
            },
        },
        Kind {
            name: "broadcastjob",
            group: APPS,
            version: "v1alpha1",
            api_kind: "BroadcastJob",
            plural: "broadcastjobs",
            object: "bj",
            manifest: || {
                let mut template = pod_template("bj", "busybox:1.36");
                template["spec"]["restartPolicy"] = json!("Never");
                json!({
                    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "BroadcastJob",
                    "metadata": {"name": "bj"},
                    "spec": {"template": template, "completionPolicy": {"type": "Never"}}
                })
            },
            settled: broadcastjob_settled,
            rollout: None,
            revision_namespaces: &[],
            companions: Vec::new,
        },
        Kind {
            name: "advancedcronjob",
            group: APPS,
            version: "v1alpha1",
            api_kind: "AdvancedCronJob",
            plural: "advancedcronjobs",
            object: "acj",
            manifest: || {
                // Never due during a run: a Job made meanwhile would be a new Pod.
                let mut template = pod_template("acj", "busybox:1.36");
                template["spec"]["restartPolicy"] = json!("Never");
                json!({
                    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "AdvancedCronJob",
                    "metadata": {"name": "acj"},
                    "spec": {"schedule": "0 0 1 1 *", "template": {"broadcastJobTemplate": {
                        "spec": {"template": template}}}}
                })
            },
            settled: acj_settled,
            rollout: None,
            revision_namespaces: &[],
            companions: Vec::new,
        },
        Kind {
            // In flight: kwok has no kruise-daemon, so it stays pending (made after the
            // settle, for a Pod of its CloneSet: see `crr_manifest`).
            name: "crr",
            group: APPS,
            version: "v1alpha1",
            api_kind: "ContainerRecreateRequest",
            plural: "containerrecreaterequests",
            object: "crr",
            manifest: || Value::Null,
            settled: crr_settled,
            rollout: None,
            revision_namespaces: &[],
            companions: || vec![cloneset("crr-target", 1)],
        },
        Kind {
            // In flight: kwok has no node agent, so no node pulls; the job never completes.
            name: "imagepulljob",
            group: APPS,
            version: "v1alpha1",
            api_kind: "ImagePullJob",
            plural: "imagepulljobs",
            object: "ipj",
            manifest: || {
                json!({
                    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ImagePullJob",
                    "metadata": {"name": "ipj"},
                    "spec": {"image": "nginx:1.25", "parallelism": 1,
                             "completionPolicy": {"type": "Never"}}
                })
            },
            settled: ipj_settled,
            rollout: None,
            revision_namespaces: &[],
            companions: Vec::new,
        },
    ]
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct IpjStatus {
    completion_time: Option<String>,
    failed: i32,
}

/// In flight: `completionPolicy: Never` never completes, and no node fails it.
fn ipj_settled(obj: &DynamicObject) -> Result<(), String> {
    let s: IpjStatus = status(obj)?;
    if s.completion_time.is_none() && s.failed == 0 {
        Ok(())
    } else {
        Err(format!("finished: {s:?}"))
    }
}

async fn fake_container_ids(pods: &Api<Pod>, name: &str) -> Result<(), String> {
    let pod = pods
        .get_status(name)
        .await
        .map_err(|e| format!("get Pod {name}: {e}"))?;
    let mut statuses = pod
        .status
        .and_then(|s| s.container_statuses)
        .unwrap_or_default();
    for (i, c) in statuses.iter_mut().enumerate() {
        if c.container_id.is_none() {
            c.container_id = Some(format!("containerd://{:064x}", i + 1));
        }
    }
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"containerStatuses": statuses}})),
    )
    .await
    .map(|_| ())
    .map_err(|e| format!("patch Pod {name} status: {e}"))
}

fn crr_manifest(pod: &str) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ContainerRecreateRequest",
        "metadata": {"name": "crr"},
        "spec": {"podName": pod, "containers": [{"name": "main"}],
            "strategy": {"failurePolicy": "Fail"}}
    })
}

fn generation(obj: &DynamicObject) -> i64 {
    obj.metadata.generation.unwrap_or(0)
}

/// The status fields of CloneSet and Advanced StatefulSet that say "rolled out and ready".
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ReplicasStatus {
    observed_generation: i64,
    replicas: i64,
    ready_replicas: i64,
    available_replicas: i64,
    updated_replicas: i64,
    updated_ready_replicas: i64,
    update_revision: Option<String>,
    current_revision: Option<String>,
}

fn status<T: for<'de> Deserialize<'de> + Default>(obj: &DynamicObject) -> Result<T, String> {
    match obj.data.get("status") {
        None | Some(Value::Null) => Ok(T::default()),
        Some(s) => serde_json::from_value(s.clone()).map_err(|e| format!("status: {e}")),
    }
}

fn replicas_settled(obj: &DynamicObject) -> Result<(), String> {
    let s: ReplicasStatus = status(obj)?;
    let want = obj.data["spec"]["replicas"].as_i64().unwrap_or(1);
    let ok = s.observed_generation == generation(obj)
        && s.replicas == want
        && s.ready_replicas == want
        && s.available_replicas == want
        && s.updated_replicas == want
        && s.updated_ready_replicas == want
        && (s.current_revision.is_none() || s.current_revision == s.update_revision);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "generation {} spec.replicas {want}: {s:?}",
            generation(obj)
        ))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct DaemonSetStatus {
    observed_generation: i64,
    desired_number_scheduled: i64,
    current_number_scheduled: i64,
    number_misscheduled: i64,
    number_ready: i64,
    number_available: i64,
    updated_number_scheduled: i64,
}

fn daemonset_settled(obj: &DynamicObject) -> Result<(), String> {
    let s: DaemonSetStatus = status(obj)?;
    let d = s.desired_number_scheduled;
    let ok = s.observed_generation == generation(obj)
        && d > 0
        && s.current_number_scheduled == d
        && s.number_misscheduled == 0
        && s.number_ready == d
        && s.number_available == d
        && s.updated_number_scheduled == d;
    if ok {
        Ok(())
    } else {
        Err(format!("generation {}: {s:?}", generation(obj)))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct SidecarSetStatus {
    observed_generation: i64,
    matched_pods: i64,
    updated_pods: i64,
    ready_pods: i64,
    updated_ready_pods: i64,
}

fn sidecarset_settled(obj: &DynamicObject) -> Result<(), String> {
    let s: SidecarSetStatus = status(obj)?;
    let m = s.matched_pods;
    let ok = s.observed_generation == generation(obj)
        && m > 0
        && s.updated_pods == m
        && s.ready_pods == m
        && s.updated_ready_pods == m;
    if ok {
        Ok(())
    } else {
        Err(format!("generation {}: {s:?}", generation(obj)))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct UnitedDeploymentStatus {
    observed_generation: i64,
    replicas: i64,
    ready_replicas: i64,
    updated_replicas: i64,
    updated_ready_replicas: i64,
}

fn ud_settled(obj: &DynamicObject) -> Result<(), String> {
    let s: UnitedDeploymentStatus = status(obj)?;
    let want = obj.data["spec"]["replicas"].as_i64().unwrap_or(1);
    let ok = s.observed_generation == generation(obj)
        && s.replicas == want
        && s.ready_replicas == want
        && s.updated_replicas == want
        && s.updated_ready_replicas == want;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "generation {} spec.replicas {want}: {s:?}",
            generation(obj)
        ))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ObservedStatus {
    observed_generation: i64,
}

/// Kinds whose status says little more than "seen": the current generation observed.
fn observed_settled(obj: &DynamicObject) -> Result<(), String> {
    let s: ObservedStatus = status(obj)?;
    if s.observed_generation == generation(obj) {
        Ok(())
    } else {
        Err(format!("generation {}: {s:?}", generation(obj)))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct PubStatus {
    observed_generation: i64,
    total_replicas: i64,
    desired_available: i64,
    current_available: i64,
    unavailable_allowed: i64,
}

fn pub_settled(obj: &DynamicObject) -> Result<(), String> {
    let s: PubStatus = status(obj)?;
    let ok = s.observed_generation == generation(obj)
        && s.total_replicas > 0
        && s.current_available == s.total_replicas
        && s.unavailable_allowed == s.current_available - s.desired_available;
    if ok {
        Ok(())
    } else {
        Err(format!("generation {}: {s:?}", generation(obj)))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct PpsStatus {
    observed_generation: i64,
    pod_states: BTreeMap<String, Value>,
}

fn pps_settled(obj: &DynamicObject) -> Result<(), String> {
    let s: PpsStatus = status(obj)?;
    if s.observed_generation == generation(obj) && s.pod_states.len() == 2 {
        Ok(())
    } else {
        Err(format!("generation {}: {s:?}", generation(obj)))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct BroadcastJobStatus {
    desired: i64,
    active: i64,
    succeeded: i64,
    failed: i64,
    phase: Option<String>,
}

/// Every node's Pod ran to completion (kwok's pod-complete-broadcastjob stage).
fn broadcastjob_settled(obj: &DynamicObject) -> Result<(), String> {
    let s: BroadcastJobStatus = status(obj)?;
    if s.desired > 0 && s.succeeded == s.desired && s.active == 0 && s.failed == 0 {
        Ok(())
    } else {
        Err(format!("{s:?}"))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct AcjStatus {
    #[serde(rename = "type")]
    type_: Option<String>,
    active: Vec<Value>,
}

fn acj_settled(obj: &DynamicObject) -> Result<(), String> {
    let s: AcjStatus = status(obj)?;
    if s.type_.as_deref() == Some("BroadcastJob") && s.active.is_empty() {
        Ok(())
    } else {
        Err(format!("{s:?}"))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct CrrStatus {
    phase: Option<String>,
    message: Option<String>,
}

/// In flight: no node agent answers; anything but a finished phase, except the one way
/// both managers finish such a request: a minute after its creation with no answer
/// (openkruise/kruise v1.9.0 pkg/controller/containerrecreaterequest/crr_controller.go
/// `responseTimeout`; crr-ctl the same), which the later phases are past.
fn crr_settled(obj: &DynamicObject) -> Result<(), String> {
    let s: CrrStatus = status(obj)?;
    match (s.phase.as_deref(), s.message.as_deref()) {
        (Some("Completed"), Some("daemon has not responded for a long time")) => Ok(()),
        (Some("Completed") | Some("Failed"), _) => {
            Err(format!("finished without a node agent: {s:?}"))
        }
        _ => Ok(()),
    }
}

/// The ApiResource of a manifest's apiVersion and kind (plural: the kind's, lowercased,
/// plus "s", which holds for every kind here). CloneSets are read as v1alpha1 (served by
/// both CRDs), Advanced StatefulSets as v1beta1 (stored by both).
fn resource_of(manifest: &Value) -> ApiResource {
    let api_version = manifest["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = manifest["kind"].as_str().unwrap_or_default();
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: api_version.into(),
        kind: kind.into(),
        plural: format!("{}s", kind.to_lowercase()),
    }
}

fn read_resource(manifest: &Value) -> ApiResource {
    let mut ar = resource_of(manifest);
    if ar.kind == "CloneSet" {
        ar.version = "v1alpha1".into();
        ar.api_version = format!("{}/v1alpha1", ar.group);
    }
    ar
}

// --- snapshots --------------------------------------------------------------------------

/// What a switch must leave as it is, per kind.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Snapshot {
    /// Pod name -> UID.
    pods: BTreeMap<String, BTreeMap<String, String>>,
    /// ControllerRevision `<namespace>/<name>` -> UID.
    revisions: BTreeMap<String, BTreeMap<String, String>>,
    /// The workload's metadata.generation.
    generations: BTreeMap<String, i64>,
    /// Rollouts driven so far (the next image).
    rollouts: u32,
}

async fn take_snapshot(client: &Client, kinds: &[Kind], rollouts: u32) -> Snapshot {
    let mut snap = Snapshot {
        rollouts,
        ..Default::default()
    };
    for k in kinds {
        let ns = k.namespace();
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let mut by_name = BTreeMap::new();
        match pods.list(&ListParams::default()).await {
            Ok(list) => {
                for p in list.items {
                    if p.metadata.deletion_timestamp.is_none() {
                        by_name.insert(
                            p.metadata.name.unwrap_or_default(),
                            p.metadata.uid.unwrap_or_default(),
                        );
                    }
                }
            }
            Err(e) => eprintln!("migration: listing Pods of {ns}: {e}"),
        }
        snap.pods.insert(k.name.into(), by_name);
        let mut revs = BTreeMap::new();
        for rns in std::iter::once(ns.as_str()).chain(k.revision_namespaces.iter().copied()) {
            let api: Api<ControllerRevision> = Api::namespaced(client.clone(), rns);
            match api.list(&ListParams::default()).await {
                Ok(list) => {
                    for r in list.items {
                        revs.insert(
                            format!("{rns}/{}", r.metadata.name.unwrap_or_default()),
                            r.metadata.uid.unwrap_or_default(),
                        );
                    }
                }
                Err(e) => eprintln!("migration: listing ControllerRevisions of {rns}: {e}"),
            }
        }
        snap.revisions.insert(k.name.into(), revs);
        if let Ok(obj) = k.api(client).get(k.object).await {
            snap.generations.insert(k.name.into(), generation(&obj));
        }
    }
    snap
}

/// What changed between two snapshots for one kind, each entry named.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Diff {
    uid_changed: Vec<String>,
    pods_gone: Vec<String>,
    pods_new: Vec<String>,
    revisions_new: Vec<String>,
    revisions_gone: Vec<String>,
}

fn diff(before: &Snapshot, after: &Snapshot, kind: &str) -> Diff {
    let empty = BTreeMap::new();
    let (pb, pa) = (
        before.pods.get(kind).unwrap_or(&empty),
        after.pods.get(kind).unwrap_or(&empty),
    );
    let (rb, ra) = (
        before.revisions.get(kind).unwrap_or(&empty),
        after.revisions.get(kind).unwrap_or(&empty),
    );
    let mut d = Diff::default();
    for (name, uid) in pb {
        match pa.get(name) {
            None => d.pods_gone.push(name.clone()),
            Some(u) if u != uid => d.uid_changed.push(format!("{name}: {uid} -> {u}")),
            Some(_) => {}
        }
    }
    d.pods_new = pa
        .keys()
        .filter(|n| !pb.contains_key(*n))
        .cloned()
        .collect();
    let rb_uids: BTreeSet<&String> = rb.values().collect();
    d.revisions_new = ra
        .iter()
        .filter(|(_, u)| !rb_uids.contains(u))
        .map(|(n, _)| n.clone())
        .collect();
    let ra_uids: BTreeSet<&String> = ra.values().collect();
    d.revisions_gone = rb
        .iter()
        .filter(|(_, u)| !ra_uids.contains(u))
        .map(|(n, _)| n.clone())
        .collect();
    d
}

// --- phases -----------------------------------------------------------------------------

struct Env {
    out: PathBuf,
    label: String,
    incoming: Incoming,
    audit: PathBuf,
    audit_from: u64,
    grace: Duration,
    settle_timeout: Duration,
}

fn env() -> Env {
    let root = kruise_e2e::repo_root();
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let incoming = match var("MIGRATION_INCOMING").as_deref() {
        Some("ours") => {
            let list = std::fs::read_to_string(root.join("tests/cluster/controllers.txt"))
                .expect("tests/cluster/controllers.txt");
            Incoming::Ours(
                list.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(String::from)
                    .collect(),
            )
        }
        _ => Incoming::Upstream,
    };
    let secs =
        |k: &str, d: u64| Duration::from_secs(var(k).and_then(|v| v.parse().ok()).unwrap_or(d));
    Env {
        out: var("MIGRATION_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target/migration")),
        label: var("MIGRATION_LABEL").unwrap_or_else(|| "run".into()),
        incoming,
        audit: var("MIGRATION_AUDIT")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join("target/migration/cluster/logs/audit.log")),
        audit_from: var("MIGRATION_AUDIT_FROM")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        grace: secs("MIGRATION_GRACE", 15),
        settle_timeout: secs("MIGRATION_SETTLE_TIMEOUT", 180),
    }
}

async fn client() -> Client {
    Client::try_from(kruise_e2e::kube_config().await).expect("client")
}

/// Polls every kind until each is settled or the timeout passes; per kind, `Ok(seconds)`
/// or the last thing seen.
async fn wait_settled(
    client: &Client,
    kinds: &[Kind],
    timeout: Duration,
    min_generation: &BTreeMap<String, i64>,
) -> BTreeMap<String, Result<f64, String>> {
    let start = Instant::now();
    let mut out: BTreeMap<String, Result<f64, String>> = kinds
        .iter()
        .map(|k| (k.name.to_string(), Err("not seen".to_string())))
        .collect();
    loop {
        for k in kinds {
            if out[k.name].is_ok() {
                continue;
            }
            let mut r = match k.api(client).get(k.object).await {
                Ok(obj) => {
                    let min = min_generation.get(k.name).copied().unwrap_or(0);
                    if generation(&obj) < min {
                        Err(format!("generation {} < {min}", generation(&obj)))
                    } else {
                        (k.settled)(&obj).map(|()| start.elapsed().as_secs_f64())
                    }
                }
                Err(e) => Err(format!("get {} {}: {e}", k.api_kind, k.object)),
            };
            for c in (k.companions)() {
                if r.is_err() {
                    break;
                }
                let name = c["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let ar = read_resource(&c);
                let api: Api<DynamicObject> =
                    Api::namespaced_with(client.clone(), &k.namespace(), &ar);
                if let Err(e) = match api.get(&name).await {
                    Ok(obj) => replicas_settled(&obj),
                    Err(e) => Err(e.to_string()),
                } {
                    r = Err(format!("{} {name}: {e}", ar.kind));
                }
            }
            out.insert(k.name.into(), r);
        }
        if out.values().all(Result::is_ok) || start.elapsed() >= timeout {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One kind's outcome in a phase.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct KindResult {
    kind: String,
    pass: bool,
    /// Seconds until settled (or the rollout done).
    seconds: Option<f64>,
    /// Pod writes by the incoming manager in the window, on this kind's Pods.
    pod_writes: usize,
    pod_write_entries: Vec<PodWrite>,
    diff: Diff,
    failures: Vec<String>,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct PhaseResult {
    phase: String,
    label: String,
    incoming: String,
    seconds: f64,
    kinds: Vec<KindResult>,
    /// Pod writes of the incoming manager on Pods of no kind here.
    other_pod_writes: Vec<PodWrite>,
    audit: Option<AuditCounts>,
    audit_window: Option<(u64, u64)>,
}

fn snapshot_path(env: &Env) -> PathBuf {
    env.out.join("snapshot.json")
}

fn load_snapshot(env: &Env) -> Snapshot {
    let text = std::fs::read_to_string(snapshot_path(env))
        .expect("snapshot.json: run the create phase first");
    serde_json::from_str(&text).expect("snapshot.json")
}

fn save(path: &Path, value: &impl Serialize) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, serde_json::to_string_pretty(value).expect("json")).expect("write");
}

async fn ensure_namespace(client: &Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns");
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create namespace {name}: {e}"),
    }
}

async fn create_object(client: &Client, ns: &str, manifest: &Value) -> Result<(), String> {
    let ar = resource_of(manifest);
    let kind = ar.kind.clone();
    let api: Api<DynamicObject> = if kind == "SidecarSet" {
        Api::all_with(client.clone(), &ar)
    } else {
        Api::namespaced_with(client.clone(), ns, &ar)
    };
    let obj: DynamicObject = serde_json::from_value(manifest.clone()).map_err(|e| e.to_string())?;
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(format!("create {kind}: {e}")),
    }
}

async fn phase_create(env: &Env) -> PhaseResult {
    let client = client().await;
    let kinds = kinds();
    let start = Instant::now();
    let mut result = PhaseResult {
        phase: "create".into(),
        label: env.label.clone(),
        incoming: format!("{:?}", env.incoming),
        ..Default::default()
    };
    let mut create_errors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for k in &kinds {
        let ns = k.namespace();
        ensure_namespace(&client, &ns).await;
        // A SidecarSet injects at Pod creation: it first, then what it injects into.
        let mut objects = vec![(k.manifest)()];
        objects.extend((k.companions)());
        for m in objects.into_iter().filter(|m| !m.is_null()) {
            if let Err(e) = create_object(&client, &ns, &m).await {
                create_errors.entry(k.name.into()).or_default().push(e);
            }
        }
    }
    // The ContainerRecreateRequest comes after: it names a Pod.
    let first: Vec<Kind> = self::kinds()
        .into_iter()
        .filter(|k| k.name != "crr")
        .collect();
    let settled = wait_settled(&client, &first, env.settle_timeout, &BTreeMap::new()).await;
    // The ContainerRecreateRequest, for a Pod that exists now.
    if let Some(k) = kinds.iter().find(|k| k.name == "crr") {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &k.namespace());
        let pod = pods
            .list(&ListParams::default())
            .await
            .ok()
            .and_then(|l| l.items.into_iter().find_map(|p| p.metadata.name));
        match pod {
            Some(pod) => {
                // kwok's Pods have no container IDs; upstream's CRR webhook wants the
                // container's. A made-up one, as a runtime would report it.
                if let Err(e) = fake_container_ids(&pods, &pod).await {
                    create_errors.entry(k.name.into()).or_default().push(e);
                }
                if let Err(e) = create_object(&client, &k.namespace(), &crr_manifest(&pod)).await {
                    create_errors.entry(k.name.into()).or_default().push(e);
                }
            }
            None => create_errors
                .entry(k.name.into())
                .or_default()
                .push("no Pod for the ContainerRecreateRequest".into()),
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    let settled2 = wait_settled(&client, &kinds, Duration::from_secs(30), &BTreeMap::new()).await;
    let settled: BTreeMap<String, Result<f64, String>> = settled
        .into_iter()
        .map(|(k, v)| {
            let again = settled2.get(&k).cloned().unwrap_or(Ok(0.0));
            (k, v.and_then(|s| again.map(|_| s)))
        })
        .chain(settled2.get("crr").cloned().map(|v| ("crr".to_string(), v)))
        .collect();
    let snap = take_snapshot(&client, &kinds, 0).await;
    for k in &kinds {
        let mut r = KindResult {
            kind: k.name.into(),
            ..Default::default()
        };
        r.failures
            .extend(create_errors.remove(k.name).unwrap_or_default());
        match &settled[k.name] {
            Ok(s) => r.seconds = Some(*s),
            Err(e) => r.failures.push(format!("not settled: {e}")),
        }
        // An AdvancedCronJob never due has no Pod; an ImagePullJob never has one.
        if !["advancedcronjob", "imagepulljob"].contains(&k.name)
            && snap.pods.get(k.name).is_none_or(BTreeMap::is_empty)
        {
            r.failures.push("no Pods".into());
        }
        r.pass = r.failures.is_empty();
        result.kinds.push(r);
    }
    save(&snapshot_path(env), &snap);
    result.seconds = start.elapsed().as_secs_f64();
    result
}

/// The kind a Pod in `namespace` belongs to.
fn kind_of_namespace(kinds: &[Kind], namespace: &str) -> Option<&'static str> {
    kinds
        .iter()
        .find(|k| k.namespace() == namespace)
        .map(|k| k.name)
}

async fn phase_check(env: &Env) -> PhaseResult {
    let client = client().await;
    let kinds = kinds();
    let before = load_snapshot(env);
    let start = Instant::now();
    // The status is settled already before the incoming manager acts (it is the outgoing
    // one's): settled at the start, then again after the grace period, in which the
    // incoming manager's first reconciles run; its writes meanwhile count too.
    let first = wait_settled(&client, &kinds, env.settle_timeout, &before.generations).await;
    tokio::time::sleep(env.grace).await;
    // Only those settled the first time: one that timed out keeps what it last saw.
    let settled_once: Vec<Kind> = self::kinds()
        .into_iter()
        .filter(|k| first.get(k.name).is_some_and(Result::is_ok))
        .collect();
    let again = wait_settled(
        &client,
        &settled_once,
        env.settle_timeout,
        &before.generations,
    )
    .await;
    let settled: BTreeMap<String, Result<f64, String>> = first
        .into_iter()
        .map(|(k, v)| {
            let a = again.get(&k).cloned().unwrap_or(Ok(0.0));
            let total = env.grace.as_secs_f64();
            (k, v.and_then(|s| a.map(|t| s + total + t)))
        })
        .collect();
    let after = take_snapshot(&client, &kinds, before.rollouts).await;
    let audit_to = std::fs::metadata(&env.audit).map(|m| m.len()).unwrap_or(0);
    let events = read_audit(&env.audit, env.audit_from, Some(audit_to)).unwrap_or_else(|e| {
        panic!("audit log {}: {e}", env.audit.display());
    });
    let counts = count_audit(&events, &env.incoming);
    let mut result = PhaseResult {
        phase: "check".into(),
        label: env.label.clone(),
        incoming: format!("{:?}", env.incoming),
        audit_window: Some((env.audit_from, audit_to)),
        ..Default::default()
    };
    for k in &kinds {
        let mut r = KindResult {
            kind: k.name.into(),
            ..Default::default()
        };
        match &settled[k.name] {
            Ok(s) => r.seconds = Some(*s),
            Err(e) => r.failures.push(format!("not settled: {e}")),
        }
        r.pod_write_entries = counts
            .pod_writes
            .iter()
            .filter(|w| kind_of_namespace(&kinds, &w.namespace) == Some(k.name))
            .cloned()
            .collect();
        r.pod_writes = r.pod_write_entries.len();
        if r.pod_writes > 0 {
            r.failures.push(format!(
                "{} Pod writes by the incoming manager: {}",
                r.pod_writes,
                r.pod_write_entries
                    .iter()
                    .map(|w| format!(
                        "{} {} {}{} -> {}",
                        w.user_agent,
                        w.verb,
                        w.name,
                        w.subresource
                            .as_ref()
                            .map(|s| format!("/{s}"))
                            .unwrap_or_default(),
                        w.code
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        // A manager that never started would pass every other assertion here.
        let touched = counts.by_verb_resource.keys().any(|key| {
            key.split_once(' ')
                .is_some_and(|(_, res)| res.split('/').next() == Some(k.plural))
        });
        if !touched {
            r.failures.push(format!(
                "no request of the incoming manager on {} in the window: did it run?",
                k.plural
            ));
        }
        r.diff = diff(&before, &after, k.name);
        let d = &r.diff;
        if !d.uid_changed.is_empty() {
            r.failures
                .push(format!("Pod UIDs changed: {:?}", d.uid_changed));
        }
        if !d.pods_gone.is_empty() || !d.pods_new.is_empty() {
            // Who deleted them, whoever it was (the garbage collector, say).
            let ns = k.namespace();
            let deleted_by: BTreeSet<String> = events
                .iter()
                .filter(|e| e.verb == "delete")
                .filter(|e| {
                    e.response_status.as_ref().is_some_and(|s| s.code < 300)
                        && e.object_ref.as_ref().is_some_and(|r| {
                            r.resource.as_deref() == Some("pods")
                                && r.namespace.as_deref() == Some(ns.as_str())
                                && r.name.as_ref().is_some_and(|n| d.pods_gone.contains(n))
                        })
                })
                .map(|e| e.user_agent.clone())
                .collect();
            r.failures.push(format!(
                "Pods gone {:?} (deleted by {deleted_by:?}), new {:?}",
                d.pods_gone, d.pods_new
            ));
        }
        if !d.revisions_new.is_empty() || !d.revisions_gone.is_empty() {
            r.failures.push(format!(
                "ControllerRevisions new {:?}, gone {:?}",
                d.revisions_new, d.revisions_gone
            ));
        }
        r.pass = r.failures.is_empty();
        result.kinds.push(r);
    }
    result.other_pod_writes = counts
        .pod_writes
        .iter()
        .filter(|w| kind_of_namespace(&kinds, &w.namespace).is_none())
        .cloned()
        .collect();
    result.audit = Some(counts);
    result.seconds = start.elapsed().as_secs_f64();
    // The next check compares with what this one saw.
    save(&snapshot_path(env), &after);
    result
}

async fn phase_rollout(env: &Env) -> PhaseResult {
    let client = client().await;
    let kinds = kinds();
    let before = load_snapshot(env);
    let n = before.rollouts + 1;
    let start = Instant::now();
    let mut result = PhaseResult {
        phase: "rollout".into(),
        label: env.label.clone(),
        incoming: format!("{:?}", env.incoming),
        ..Default::default()
    };
    let mut failures: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut min_gen = BTreeMap::new();
    for k in &kinds {
        let Some((patch, _)) = k.rollout else {
            continue;
        };
        let patch: json_patch::Patch = serde_json::from_value(patch(n)).expect("patch");
        match k
            .api(&client)
            .patch(k.object, &PatchParams::default(), &Patch::<()>::Json(patch))
            .await
        {
            Ok(obj) => {
                min_gen.insert(k.name.to_string(), generation(&obj));
            }
            Err(e) => failures
                .entry(k.name.into())
                .or_default()
                .push(format!("patch: {e}")),
        }
    }
    // Settled at the patched generation, and every Pod runs the new image.
    let settled = wait_settled(&client, &kinds, env.settle_timeout, &min_gen).await;
    let after = take_snapshot(&client, &kinds, n).await;
    for k in &kinds {
        let mut r = KindResult {
            kind: k.name.into(),
            ..Default::default()
        };
        r.failures
            .extend(failures.remove(k.name).unwrap_or_default());
        match &settled[k.name] {
            Ok(s) => r.seconds = Some(*s),
            Err(e) => r.failures.push(format!("rollout not done: {e}")),
        }
        r.diff = diff(&before, &after, k.name);
        let keeps_pods = k.rollout.is_none_or(|(_, in_place)| in_place);
        if keeps_pods && (!r.diff.uid_changed.is_empty() || !r.diff.pods_gone.is_empty()) {
            r.failures.push(format!(
                "{} recreated Pods: changed {:?}, gone {:?}",
                if k.rollout.is_some() {
                    "the in-place rollout"
                } else {
                    "a rollout elsewhere"
                },
                r.diff.uid_changed,
                r.diff.pods_gone
            ));
        }
        if r.failures.is_empty() && k.rollout.is_some() {
            let want = if k.name == "sidecarset" {
                format!("busybox:1.3{n}")
            } else {
                image(n)
            };
            let container = if k.name == "sidecarset" {
                "sidecar"
            } else {
                "main"
            };
            let pods: Api<Pod> = Api::namespaced(client.clone(), &k.namespace());
            let stale: Vec<String> = pods
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
                .into_iter()
                .filter(|p| {
                    let spec = p.spec.as_ref();
                    let image = spec
                        .and_then(|s| s.containers.iter().find(|c| c.name == container))
                        .and_then(|c| c.image.clone());
                    image.as_deref() != Some(want.as_str())
                })
                .filter_map(|p| p.metadata.name)
                .collect();
            if !stale.is_empty() {
                r.failures.push(format!("Pods not on {want}: {stale:?}"));
            }
        }
        r.pass = r.failures.is_empty();
        result.kinds.push(r);
    }
    save(&snapshot_path(env), &after);
    result.seconds = start.elapsed().as_secs_f64();
    result
}

fn print_phase(r: &PhaseResult) {
    println!(
        "\nmigration {} {} ({:.1} s, incoming {}):",
        r.label,
        r.phase,
        r.seconds,
        if r.incoming.starts_with("Ours") {
            "ours"
        } else {
            "kruise-manager"
        }
    );
    println!(
        "  {:<18} {:<5} {:>8} {:>10}  failures",
        "kind", "pass", "seconds", "pod writes"
    );
    for k in &r.kinds {
        println!(
            "  {:<18} {:<5} {:>8} {:>10}  {}",
            k.kind,
            if k.pass { "ok" } else { "FAIL" },
            k.seconds
                .map(|s| format!("{s:.1}"))
                .unwrap_or_else(|| "-".into()),
            k.pod_writes,
            k.failures.join(" | ")
        );
    }
    if !r.other_pod_writes.is_empty() {
        println!(
            "  Pod writes outside the workloads' namespaces: {:?}",
            r.other_pod_writes
        );
    }
    if let Some(a) = &r.audit {
        println!(
            "  requests of the incoming manager by user agent: {:?}",
            a.by_user_agent
        );
    }
}

fn phase_report(env: &Env) -> bool {
    let mut all = Vec::new();
    let Ok(dir) = std::fs::read_dir(&env.out) else {
        println!("no results under {}", env.out.display());
        return false;
    };
    let mut files: Vec<PathBuf> = dir
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("phase-") && n.ends_with(".json"))
        })
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read");
        let r: PhaseResult = serde_json::from_str(&text).expect("phase json");
        all.push(r);
    }
    println!("\nmigration summary (target/migration/summary.json):");
    println!(
        "  {:<14} {:<8} {:<18} {:<5} {:>10} {:>8}",
        "step", "phase", "kind", "pass", "pod writes", "seconds"
    );
    let mut pass = true;
    for r in &all {
        for k in &r.kinds {
            pass &= k.pass;
            println!(
                "  {:<14} {:<8} {:<18} {:<5} {:>10} {:>8}",
                r.label,
                r.phase,
                k.kind,
                if k.pass { "ok" } else { "FAIL" },
                k.pod_writes,
                k.seconds
                    .map(|s| format!("{s:.1}"))
                    .unwrap_or_else(|| "-".into())
            );
        }
    }
    let wall = std::env::var("MIGRATION_WALL_SECONDS").ok();
    save(
        &env.out.join("summary.json"),
        &json!({"pass": pass, "wall_seconds": wall.and_then(|w| w.parse::<f64>().ok()), "phases": all}),
    );
    pass
}

/// The scenario's phases; run by tests/migration/run.sh, never by `make test`.
#[tokio::test]
#[ignore = "make migration-test: a cluster of its own with kruise-manager (tests/migration/run.sh)"]
async fn phase() {
    let env = env();
    let phase =
        std::env::var("MIGRATION_PHASE").expect("MIGRATION_PHASE: create|check|rollout|report");
    let result = match phase.as_str() {
        "create" => phase_create(&env).await,
        "check" => phase_check(&env).await,
        "rollout" => phase_rollout(&env).await,
        "report" => {
            assert!(phase_report(&env), "some step failed: see the table above");
            return;
        }
        other => panic!("unknown MIGRATION_PHASE {other}"),
    };
    print_phase(&result);
    save(
        &env.out
            .join(format!("phase-{}-{}.json", env.label, result.phase)),
        &result,
    );
    let failed: Vec<&str> = result
        .kinds
        .iter()
        .filter(|k| !k.pass)
        .map(|k| k.kind.as_str())
        .collect();
    assert!(
        failed.is_empty(),
        "{} {}: failed for {failed:?}",
        env.label,
        result.phase
    );
}

// --- unit tests of the pure parts ---------------------------------------------------------

const SAMPLE: &str = r#"{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"patch","userAgent":"cloneset-ctl/0.1.0","objectRef":{"resource":"pods","namespace":"mig-cloneset","name":"cs-a","apiVersion":"v1"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-01T00:00:00Z"}
{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"update","userAgent":"cloneset-ctl/0.1.0","objectRef":{"resource":"clonesets","subresource":"status","namespace":"mig-cloneset","name":"cs"},"responseStatus":{"code":200}}
{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"create","userAgent":"pub-ctl/0.1.0","objectRef":{"resource":"pods","subresource":"eviction","namespace":"mig-pub","name":"p-0"},"responseStatus":{"code":429}}
{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"get","userAgent":"cloneset-ctl/0.1.0","objectRef":{"resource":"pods","namespace":"mig-cloneset","name":"cs-a"},"responseStatus":{"code":200}}
{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"patch","userAgent":"kruise-manager","objectRef":{"resource":"pods","subresource":"status","namespace":"mig-cloneset","name":"cs-b"},"responseStatus":{"code":200}}
{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"patch","userAgent":"kwok/v0.7.0","objectRef":{"resource":"pods","subresource":"status","namespace":"mig-cloneset","name":"cs-b"},"responseStatus":{"code":200}}
{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"get","userAgent":"clonesetX/1","nonResourceURI":"/readyz"}
{"kind":"Event","level":"Metadata","stage":"ResponseStarted","verb":"delete","userAgent":"cloneset-ctl/0.1.0","objectRef":{"resource":"pods","namespace":"mig-cloneset","name":"cs-c"}}
{"kind":"Event","level":"Metadata","stage":"Respo"#;

#[test]
fn audit_counts_by_user_agent_verb_resource() {
    let events = parse_audit(SAMPLE.as_bytes());
    // The cut last line and the ResponseStarted stage are left out.
    assert_eq!(events.len(), 7);
    let ours = Incoming::Ours(vec!["cloneset-ctl".into(), "pub-ctl".into()]);
    let c = count_audit(&events, &ours);
    assert_eq!(c.by_verb_resource["patch pods"], 1);
    assert_eq!(c.by_verb_resource["get pods"], 1);
    assert_eq!(c.by_verb_resource["update clonesets/status"], 1);
    assert_eq!(c.by_verb_resource["create pods/eviction"], 1);
    assert_eq!(c.by_user_agent["cloneset-ctl/0.1.0"], 3);
    assert_eq!(c.by_user_agent["pub-ctl/0.1.0"], 1);
    // A user agent that only starts with a binary's name is not that binary.
    assert!(!c.by_user_agent.contains_key("clonesetX/1"));
    let writes: Vec<(&str, Option<&str>, &str, u16)> = c
        .pod_writes
        .iter()
        .map(|w| {
            (
                w.verb.as_str(),
                w.subresource.as_deref(),
                w.name.as_str(),
                w.code,
            )
        })
        .collect();
    assert_eq!(
        writes,
        vec![
            ("patch", None, "cs-a", 200),
            ("create", Some("eviction"), "p-0", 429)
        ]
    );
    let up = count_audit(&events, &Incoming::Upstream);
    assert_eq!(up.pod_writes.len(), 1);
    assert_eq!(up.pod_writes[0].subresource.as_deref(), Some("status"));
}

#[test]
fn audit_window_by_byte_offsets() {
    let dir = std::env::temp_dir().join(format!("kruise-migration-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("audit.log");
    std::fs::write(&path, SAMPLE).unwrap();
    let first_line = SAMPLE.find('\n').unwrap() as u64 + 1;
    let second_end = first_line + SAMPLE[first_line as usize..].find('\n').unwrap() as u64 + 1;
    let all = read_audit(&path, 0, None).unwrap();
    assert_eq!(all.len(), 7);
    let second = read_audit(&path, first_line, Some(second_end)).unwrap();
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].verb, "update");
    assert!(
        read_audit(&path, second_end, Some(first_line))
            .unwrap()
            .is_empty()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn snapshot_diff_names_each_change() {
    let mut before = Snapshot::default();
    before.pods.insert(
        "cloneset".into(),
        [("a", "1"), ("b", "2"), ("c", "3")]
            .into_iter()
            .map(|(n, u)| (n.to_string(), u.to_string()))
            .collect(),
    );
    before.revisions.insert(
        "cloneset".into(),
        [("ns/r1".to_string(), "r1".to_string())]
            .into_iter()
            .collect(),
    );
    let mut after = before.clone();
    let pods = after.pods.get_mut("cloneset").unwrap();
    pods.insert("b".into(), "9".into());
    pods.remove("c");
    pods.insert("d".into(), "4".into());
    after
        .revisions
        .get_mut("cloneset")
        .unwrap()
        .insert("ns/r2".into(), "r2".into());
    let d = diff(&before, &after, "cloneset");
    assert_eq!(d.uid_changed, vec!["b: 2 -> 9".to_string()]);
    assert_eq!(d.pods_gone, vec!["c".to_string()]);
    assert_eq!(d.pods_new, vec!["d".to_string()]);
    assert_eq!(d.revisions_new, vec!["ns/r2".to_string()]);
    assert!(d.revisions_gone.is_empty());
    assert_eq!(diff(&before, &before, "cloneset"), Diff::default());
}
