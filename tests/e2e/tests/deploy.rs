//! Deploying with kustomize (kustomize/), on the local cluster:
//!
//! - every overlay renders (`kubectl kustomize`) and applies (`kubectl apply
//!   --dry-run=server -k`), and what it renders is what a production deployment needs
//!   (checked here, so CI checks it on every run);
//! - RBAC is sufficient: each controller binary, run as a process with a kubeconfig
//!   holding only a token of its ServiceAccount and the environment of its Deployment,
//!   passes one of its scenarios, webhook registration and CA Secret included;
//! - RBAC is least: a SubjectAccessReview (what `kubectl auth can-i --as` asks) for each
//!   ServiceAccount is refused what the controller does not do;
//! - Prometheus (Debian's package, installed when missing) scrapes the controllers' admin
//!   ports: `up`, and reconcile and API request counters that move when a CloneSet scales;
//! - two webhook servers sharing `KRUISE_WEBHOOK_CA_SECRET` agree on one CA, through a
//!   concurrent start and a CA rotation, and both serve admission.
//!
//! Never applied for real here: the Deployments (kwok would "run" their Pods) and the
//! webhook configurations (they would send every CloneSet to a Service with no endpoints).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::apps_v1alpha1::{CloneSet, SidecarSet};
use kruise_api::apps_v1beta1::StatefulSet;
use kruise_e2e::{
    TestNamespace, http_get, is_ready, kube_config, kubeconfig_path, kubectl, kubectl_async,
    repo_root, wait_for,
};
use kruise_runtime::webhook::{AdmissionRequest, AdmissionResponse, Options, Rotation, Route};
use kruise_runtime::{Runtime, Settings, WebhookServer};
use kube::ResourceExt;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

const MINUTE: Duration = Duration::from_secs(60);
const SYSTEM_NS: &str = "kruise-system";

// --- rendering ---

/// `kubectl kustomize kustomize/<dir>`, every document as JSON.
fn render(dir: &str) -> Vec<Value> {
    let path = repo_root().join("kustomize").join(dir);
    let (ok, out, err) = kubectl(&["kustomize", &path.display().to_string()], None);
    assert!(ok, "kubectl kustomize {dir}: {err}");
    serde_saphyr::from_multiple::<Value>(&out)
        .unwrap_or_else(|e| panic!("kustomize {dir} renders YAML that does not parse: {e}"))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn kind_of(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

fn name_of(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or_default()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| kind_of(d) == kind).collect()
}

fn one<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| kind_of(d) == kind && name_of(d) == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the rendered overlay"))
}

/// `kustomize/<overlay>` with `kustomize/<component>`, as a user's kustomization would
/// combine them (written in target/: kustomize takes relative paths only).
fn render_with(overlay: &str, component: &str) -> Vec<Value> {
    let dir = repo_root().join(format!(
        "target/e2e-kustomize-{}-{}",
        component.replace('/', "-"),
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "resources: [../../kustomize/{overlay}]\ncomponents: [../../kustomize/{component}]\n"
        ),
    )
    .unwrap();
    let (ok, out, err) = kubectl(&["kustomize", &dir.display().to_string()], None);
    std::fs::remove_dir_all(&dir).ok();
    assert!(ok, "{overlay} + {component}: {err}");
    serde_saphyr::from_multiple::<Value>(&out)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// The directories of `kustomize/<dir>/`.
fn subdirs(dir: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo_root().join("kustomize").join(dir))
        .unwrap_or_else(|e| panic!("kustomize/{dir}: {e}"))
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The controller binaries the project runs (tests/cluster/controllers.txt).
fn controller_binaries() -> Vec<String> {
    let path = repo_root().join("tests/cluster/controllers.txt");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// The overlay deploying `bin` (`cloneset-ctl` → `cloneset`).
fn overlay_of(bin: &str) -> String {
    bin.trim_end_matches("-ctl").to_string()
}

/// The controller's Deployment: the one whose image is `kruise-rs/<bin>`.
fn deployment_of<'a>(docs: &'a [Value], bin: &str) -> &'a Value {
    of_kind(docs, "Deployment")
        .into_iter()
        .find(|d| {
            d["spec"]["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .is_some_and(|i| i.starts_with(&format!("kruise-rs/{bin}:")))
        })
        .unwrap_or_else(|| panic!("no Deployment runs kruise-rs/{bin}"))
}

fn env_value<'a>(container: &'a Value, name: &str) -> Option<&'a str> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str())
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

// --- the overlays ---

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_overlay_renders_applies_and_is_production_shaped() {
    kruise_e2e::client().await;
    let overlays = subdirs("overlays");
    // The Deployments' directories (not the node agent's: a DaemonSet, deployed with
    // imagepulljob's).
    let controllers: Vec<String> = subdirs("controllers")
        .into_iter()
        .filter(|c| {
            repo_root()
                .join(format!("kustomize/controllers/{c}/deployment.yaml"))
                .exists()
        })
        .collect();
    assert!(overlays.contains(&"all".to_string()), "{overlays:?}");
    for bin in controller_binaries() {
        assert!(
            controllers.contains(&overlay_of(&bin)) && overlays.contains(&overlay_of(&bin)),
            "{bin} has kustomize/controllers/{0} and kustomize/overlays/{0}",
            overlay_of(&bin)
        );
    }

    // The CRDs of base/ are deploy/crds/ (what crdgen writes), every one listed.
    let crd_dir = repo_root().join("kustomize/base/crds");
    let mut copied: BTreeSet<String> = std::fs::read_dir(&crd_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for crd in kruise_api::all_crds() {
        let file = kruise_api::crd_file_name(&crd);
        let text = std::fs::read_to_string(crd_dir.join(&file)).unwrap_or_default();
        assert!(
            text == kruise_api::crd_yaml(&crd),
            "kustomize/base/crds/{file} differs from deploy/crds: run kustomize/sync-crds.sh"
        );
        copied.remove(&file);
    }
    assert!(
        copied.is_empty(),
        "kustomize/base/crds has CRDs of no kind: {copied:?}; run kustomize/sync-crds.sh"
    );
    let base = render("base");
    assert_eq!(
        of_kind(&base, "CustomResourceDefinition").len(),
        kruise_api::all_crds().len()
    );
    one(&base, "Namespace", SYSTEM_NS);

    // A server-side dry run creates nothing, so the namespaced objects of a first
    // install would not find their namespace: it is applied for real first.
    apply_namespace().await;
    for overlay in &overlays {
        let docs = render(&format!("overlays/{overlay}"));
        // The base: namespace and every CRD.
        one(&docs, "Namespace", SYSTEM_NS);
        assert_eq!(
            of_kind(&docs, "CustomResourceDefinition").len(),
            kruise_api::all_crds().len(),
            "{overlay}"
        );
        let deployments = of_kind(&docs, "Deployment");
        let expected = if overlay == "all" {
            controllers.len()
        } else {
            1
        };
        assert_eq!(
            deployments.len(),
            expected,
            "{overlay}: one Deployment per controller"
        );
        for deployment in deployments {
            check_deployment(overlay, &docs, deployment);
        }
        // Every image can be pointed elsewhere with `images:`.
        let kustomization = std::fs::read_to_string(
            repo_root().join(format!("kustomize/overlays/{overlay}/kustomization.yaml")),
        )
        .unwrap();
        for deployment in of_kind(&docs, "Deployment") {
            let image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap();
            let name = image.split(':').next().unwrap();
            assert!(
                kustomization.contains(&format!("- name: {name}\n")),
                "overlays/{overlay} has an images: entry for {name}"
            );
        }
        // Applies, and the server has nothing to warn about. The CRDs' conversion is left
        // out: this test process's conversion webhook is registered on them as a URL,
        // which an apply cannot merge with the Service they ship naming (an install from
        // the overlay meets its own controllers' Service there instead; the harness
        // applies the shipped stanza for real, `kruise_e2e::install_crds`).
        let items: Vec<Value> = docs
            .iter()
            .cloned()
            .map(|mut d| {
                if kind_of(&d) == "CustomResourceDefinition"
                    && let Some(spec) = d.get_mut("spec").and_then(Value::as_object_mut)
                {
                    spec.remove("conversion");
                }
                d
            })
            .collect();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
        let (ok, out, err) =
            kubectl_async(args(&["apply", "--dry-run=server", "-f", "-"]), Some(list)).await;
        assert!(ok, "apply --dry-run=server -k overlays/{overlay}: {err}");
        // (Objects installed by server-side apply, as the harness installs the CRDs, lack
        // client-side apply's annotation: kubectl's own notice, not the server's.)
        let warnings: Vec<&str> = err
            .lines()
            .filter(|l| !l.contains("missing the kubectl.kubernetes.io/last-applied-configuration"))
            .filter(|l| !l.trim().is_empty())
            .collect();
        assert!(warnings.is_empty(), "{overlay}: {warnings:?}");
        assert!(out.contains("(server dry run)"), "{out}");
    }

    // Every Pod template meets the "restricted" Pod Security Standard: dry-run it as a
    // Pod in kruise-system, which the base labels to enforce that standard (with its
    // ServiceAccount, which admission looks up).
    apply_rbac().await;
    for deployment in of_kind(&render("overlays/all"), "Deployment") {
        let template = &deployment["spec"]["template"];
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{}-psa-check", name_of(deployment)), "namespace": SYSTEM_NS,
                          "labels": template["metadata"]["labels"]},
            "spec": template["spec"],
        });
        let (ok, _, err) = kubectl_async(
            args(&["create", "--dry-run=server", "-f", "-"]),
            Some(pod.to_string()),
        )
        .await;
        assert!(ok && err.is_empty(), "{}: {err}", name_of(deployment));
    }

    // The ServiceMonitor component selects every metrics Service, on its port name.
    let docs = render_with("overlays/all", "components/servicemonitor");
    let monitors = of_kind(&docs, "ServiceMonitor");
    assert_eq!(monitors.len(), 1);
    let selector = monitors[0]["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap();
    let port = monitors[0]["spec"]["endpoints"][0]["port"]
        .as_str()
        .unwrap();
    let selected: Vec<&Value> = of_kind(&docs, "Service")
        .into_iter()
        .filter(|s| {
            selector
                .iter()
                .all(|(k, v)| s["metadata"]["labels"][k.as_str()] == *v)
        })
        .collect();
    assert_eq!(
        selected.len(),
        controllers.len(),
        "one metrics Service per controller"
    );
    for service in selected {
        assert!(
            service["spec"]["ports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == port)
        );
        assert_eq!(service["spec"]["publishNotReadyAddresses"], true);
    }

    // The agent's cluster-wide reads (for an apiserver without its authorizer) are a
    // component's: the overlay grants the agent no reads of its three kinds.
    let agent_sa = |b: &&Value| {
        b["subjects"].as_array().is_some_and(|subjects| {
            subjects
                .iter()
                .any(|s| s["name"] == "daemon-agent" && s["namespace"] == "kruise-daemon-config")
        })
    };
    let roles_of_agent = |docs: &[Value]| -> Vec<String> {
        of_kind(docs, "ClusterRoleBinding")
            .into_iter()
            .filter(agent_sa)
            .map(|b| b["roleRef"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let reads = |docs: &[Value], role: &str| -> Vec<(String, String)> {
        let mut reads: Vec<(String, String)> = Vec::new();
        for rule in one(docs, "ClusterRole", role)["rules"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                for verb in rule["verbs"].as_array().unwrap() {
                    let verb = verb.as_str().unwrap();
                    let resource = resource.as_str().unwrap();
                    if ["get", "list", "watch"].contains(&verb)
                        && ["nodeimages", "containerrecreaterequests", "pods"].contains(&resource)
                    {
                        reads.push((verb.to_string(), resource.to_string()));
                    }
                }
            }
        }
        reads.sort();
        reads
    };
    let all = render("overlays/all");
    for role in roles_of_agent(&all) {
        let granted = reads(&all, &role);
        assert!(granted.is_empty(), "ClusterRole {role} grants {granted:?}");
    }
    let with_reads = render_with("overlays/all", "components/daemon-agent-cluster-reads");
    let granted: Vec<(String, String)> = roles_of_agent(&with_reads)
        .iter()
        .flat_map(|role| reads(&with_reads, role))
        .collect();
    let expected: Vec<(String, String)> = [
        ("get", "pods"),
        ("list", "containerrecreaterequests"),
        ("list", "nodeimages"),
        ("list", "pods"),
        ("watch", "containerrecreaterequests"),
        ("watch", "nodeimages"),
        ("watch", "pods"),
    ]
    .map(|(v, r)| (v.to_string(), r.to_string()))
    .to_vec();
    assert_eq!(granted, expected);

    // The pre-download components turn the gate on and grant ImagePullJobs.
    for kind in ["cloneset", "statefulset"] {
        let docs = render_with(
            &format!("overlays/{kind}"),
            &format!("controllers/{kind}/predownload"),
        );
        let container = &deployment_of(&docs, &format!("{kind}-ctl"))["spec"]["template"]["spec"]["containers"]
            [0];
        assert_eq!(
            env_value(container, "KRUISE_FEATURE_GATES"),
            Some("PreDownloadImageForInPlaceUpdate=true")
        );
        let role = one(
            &docs,
            "ClusterRole",
            &format!("kruise-{kind}-controller-predownload"),
        );
        assert_eq!(role["rules"][0]["resources"], json!(["imagepulljobs"]));
    }

    // The webhook configurations shipped are the ones the controllers register.
    let (validating, mutating) = cloneset_ctl::webhook::configurations(None);
    let cloneset: Vec<Value> = validating
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .chain(mutating.iter().map(|c| serde_json::to_value(c).unwrap()))
        .collect();
    check_webhooks(&render("overlays/cloneset"), cloneset, "cloneset-webhook");
    // (As registered before the SidecarSets are known: no Pod is sent.)
    let (validating, mutating) = sidecarset_ctl::webhook::configurations(
        None,
        sidecarset_ctl::conditions::match_condition([]),
    );
    let sidecarset = vec![
        serde_json::to_value(validating).unwrap(),
        serde_json::to_value(mutating).unwrap(),
    ];
    check_webhooks(
        &render("overlays/sidecarset"),
        sidecarset,
        "sidecarset-webhook",
    );
    let (validating, mutating) = statefulset_ctl::webhook::configurations(None);
    let statefulset: Vec<Value> = validating
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .chain(mutating.iter().map(|c| serde_json::to_value(c).unwrap()))
        .collect();
    check_webhooks(
        &render("overlays/statefulset"),
        statefulset,
        "statefulset-webhook",
    );
    for (overlay, (validating, mutating), service) in [
        (
            "broadcastjob",
            broadcastjob_ctl::webhook::configurations(None),
            "broadcastjob-webhook",
        ),
        (
            "cronjob",
            cronjob_ctl::webhook::configurations(None),
            "advancedcronjob-webhook",
        ),
        (
            "daemonset",
            daemonset_ctl::webhook::configurations(None),
            "daemonset-webhook",
        ),
        (
            "protection",
            protection_ctl::webhook::configurations(None),
            "deletionprotection-webhook",
        ),
        (
            "persistentpodstate",
            persistentpodstate_ctl::webhook::configurations(None),
            "persistentpodstate-webhook",
        ),
        (
            "pub",
            pub_ctl::webhook::configurations(None),
            "podunavailablebudget-webhook",
        ),
        (
            "resourcedistribution",
            resourcedistribution_ctl::webhook::configurations(None),
            "resourcedistribution-webhook",
        ),
        (
            "uniteddeployment",
            uniteddeployment_ctl::webhook::configurations(None),
            "uniteddeployment-webhook",
        ),
        (
            "workloadspread",
            workloadspread_ctl::webhook::configurations(None),
            "workloadspread-webhook",
        ),
        (
            "imagepulljob",
            imagepulljob_ctl::webhook::configurations(None),
            "imagepulljob-webhook",
        ),
        (
            "crr",
            crr_ctl::webhook::configurations(None),
            "containerrecreaterequest-webhook",
        ),
        (
            "launchpriority",
            launchpriority_ctl::webhook::configurations(None),
            "container-launch-priority-webhook",
        ),
        (
            "podprobemarker",
            podprobemarker_ctl::webhook::configurations(None),
            "podprobemarker-webhook",
        ),
        (
            "ephemeraljob",
            ephemeraljob_ctl::webhook::configurations(None),
            "ephemeraljob-webhook",
        ),
    ] {
        let code: Vec<Value> = validating
            .iter()
            .map(|c| serde_json::to_value(c).unwrap())
            .chain(mutating.iter().map(|c| serde_json::to_value(c).unwrap()))
            .collect();
        check_webhooks(&render(&format!("overlays/{overlay}")), code, service);
    }
}

/// The Deployments of webhook-only binaries (no controller, so no Lease).
const WEBHOOK_ONLY: &[&str] = &["deletionprotection-controller"];

/// What the issue asks of each controller's Deployment and its companions.
fn check_deployment(overlay: &str, docs: &[Value], deployment: &Value) {
    let name = name_of(deployment);
    let what = format!("overlays/{overlay}: Deployment {name}");
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 2, "{what}");
    assert_eq!(deployment["metadata"]["namespace"], SYSTEM_NS, "{what}");
    let pod = &spec["template"]["spec"];
    let annotations = &spec["template"]["metadata"]["annotations"];
    let containers = pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1, "{what}");
    let c = &containers[0];

    // Leader election on (but for a webhook-only binary: no controller, no Lease); the
    // webhook CA shared through a Secret of the overlay.
    if !WEBHOOK_ONLY.contains(&name) {
        assert_eq!(env_value(c, "KRUISE_LEADER_ELECT"), Some("true"), "{what}");
    }
    let admin_port: u16 = env_value(c, "KRUISE_ADMIN_ADDR")
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{what}: KRUISE_ADMIN_ADDR"));
    let ca_secret = env_value(c, "KRUISE_WEBHOOK_CA_SECRET")
        .unwrap_or_else(|| panic!("{what}: KRUISE_WEBHOOK_CA_SECRET"));
    one(docs, "Secret", ca_secret);
    let webhook_service = env_value(c, "KRUISE_WEBHOOK_SERVICE").unwrap();
    let service_name = webhook_service
        .rsplit('/')
        .next()
        .unwrap()
        .split(':')
        .next()
        .unwrap();
    one(docs, "Service", service_name);

    // Probes on the admin port.
    let port_named = |n: &Value| -> u16 {
        match n {
            Value::Number(n) => n.as_u64().unwrap() as u16,
            Value::String(s) => c["ports"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == s.as_str())
                .and_then(|p| p["containerPort"].as_u64())
                .unwrap() as u16,
            _ => 0,
        }
    };
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz", "{what}");
    assert_eq!(
        port_named(&c["livenessProbe"]["httpGet"]["port"]),
        admin_port,
        "{what}"
    );
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz", "{what}");
    assert_eq!(
        port_named(&c["readinessProbe"]["httpGet"]["port"]),
        admin_port,
        "{what}"
    );

    // Sized: requests and a memory limit.
    for key in ["requests.cpu", "requests.memory", "limits.memory"] {
        let (a, b) = key.split_once('.').unwrap();
        assert!(c["resources"][a][b].is_string(), "{what}: resources.{key}");
    }

    // Hardened.
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{what}");
    assert_eq!(
        pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
        "{what}"
    );
    let sc = &c["securityContext"];
    assert_eq!(sc["allowPrivilegeEscalation"], false, "{what}");
    assert_eq!(sc["readOnlyRootFilesystem"], true, "{what}");
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]), "{what}");

    // Scraped.
    assert_eq!(annotations["prometheus.io/scrape"], "true", "{what}");
    assert_eq!(
        annotations["prometheus.io/port"],
        admin_port.to_string(),
        "{what}"
    );
    assert_eq!(annotations["prometheus.io/path"], "/metrics", "{what}");

    // Its own ServiceAccount, bound to its own roles.
    let sa = pod["serviceAccountName"].as_str().unwrap();
    one(docs, "ServiceAccount", sa);
    let bound = |kind: &str| {
        of_kind(docs, kind)
            .into_iter()
            .filter(|b| {
                b["subjects"].as_array().is_some_and(|s| {
                    s.iter()
                        .any(|s| s["kind"] == "ServiceAccount" && s["name"] == sa)
                })
            })
            .count()
    };
    assert!(
        bound("ClusterRoleBinding") >= 1 && bound("RoleBinding") >= 1,
        "{what}"
    );
    // A metrics Service selecting the Pods by the admin port.
    let labels = &spec["template"]["metadata"]["labels"];
    let selects = |s: &&Value| {
        s["spec"]["selector"]
            .as_object()
            .is_some_and(|sel| sel.iter().all(|(k, v)| labels[k.as_str()] == *v))
    };
    assert!(
        of_kind(docs, "Service")
            .into_iter()
            .filter(selects)
            .any(|s| s["spec"]["ports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| port_named(&p["targetPort"]) == admin_port)),
        "{what}: a Service for metrics"
    );
}

/// The webhook configurations kustomize ships are the ones the controller registers
/// (`code`, as its `webhook::configurations` makes them): the controller fills in
/// clientConfig, caBundle and the system-namespace exclusion only.
fn check_webhooks(docs: &[Value], code: Vec<Value>, service: &str) {
    let code: Vec<(String, Value)> = code
        .into_iter()
        .map(|c| (c["metadata"]["name"].as_str().unwrap().to_string(), c))
        .collect();
    let shipped: Vec<&Value> = of_kind(docs, "ValidatingWebhookConfiguration")
        .into_iter()
        .chain(of_kind(docs, "MutatingWebhookConfiguration"))
        .collect();
    assert_eq!(shipped.len(), code.len());
    for (name, from_code) in code {
        let yaml = shipped
            .iter()
            .find(|d| name_of(d) == name)
            .unwrap_or_else(|| panic!("kustomize ships no webhook configuration {name}"));
        let (yaml_hooks, code_hooks) = (
            yaml["webhooks"].as_array().unwrap(),
            from_code["webhooks"].as_array().unwrap(),
        );
        assert_eq!(yaml_hooks.len(), code_hooks.len(), "{name}");
        for (y, c) in yaml_hooks.iter().zip(code_hooks) {
            for field in [
                "name",
                "rules",
                "failurePolicy",
                "timeoutSeconds",
                "sideEffects",
                "admissionReviewVersions",
                "objectSelector",
                "matchConditions",
                "reinvocationPolicy",
            ] {
                assert_eq!(y.get(field), c.get(field), "{name}: {field}");
            }
            assert_eq!(
                y["clientConfig"]["service"]["path"], c["clientConfig"]["url"],
                "{name}: the route path"
            );
            assert_eq!(y["clientConfig"]["service"]["name"], service, "{name}");
            // What the runtime adds to a cluster-wide registration.
            assert_eq!(
                y["namespaceSelector"]["matchExpressions"][0],
                json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                       "values": ["kube-system", SYSTEM_NS]}),
                "{name}"
            );
        }
    }
}

// --- the ServiceAccounts' RBAC, applied for real ---

static NAMESPACE: OnceCell<()> = OnceCell::const_new();
static RBAC: OnceCell<()> = OnceCell::const_new();

async fn apply_namespace() {
    NAMESPACE
        .get_or_init(|| async {
            let path = repo_root().join("kustomize/base/namespace.yaml");
            let (ok, _, err) =
                kubectl_async(args(&["apply", "-f", &path.display().to_string()]), None).await;
            assert!(ok, "{err}");
        })
        .await;
}

/// Applies every controller overlay's ServiceAccount, RBAC and CA Secret, once per test
/// process (never the Deployments or webhook configurations: see the module docs).
async fn apply_rbac() {
    apply_namespace().await;
    RBAC.get_or_init(|| async {
        let kinds = [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "Secret",
        ];
        let items: Vec<Value> = render("overlays/all")
            .into_iter()
            .filter(|d| kinds.contains(&kind_of(d)))
            .collect();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        let (ok, _, err) = kubectl_async(args(&["apply", "-f", "-"]), Some(list.to_string())).await;
        assert!(ok, "apply the overlays' RBAC: {err}");
    })
    .await;
}

/// What `kubectl auth can-i <verb> <resource> (-n <ns> | --all-namespaces) --as <sa>` asks,
/// as one SubjectAccessReview over the test's own client: the user and groups the
/// apiserver gives an impersonated ServiceAccount. `resource` is
/// `plural[.group][/name][#subresource]` (an unqualified plural resolved through
/// discovery, core first, as kubectl does); `None` asks cluster-wide. (Hundreds of
/// kubectl processes at once timed out their TLS handshakes on a busy 2-core machine.)
async fn can_i(
    client: &kube::Client,
    groups: &BTreeMap<String, String>,
    sa: &str,
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let (resource, subresource) = match resource.split_once('#') {
        Some((r, sub)) => (r, Some(sub.to_string())),
        None => (resource, None),
    };
    let (resource, name) = match resource.split_once('/') {
        Some((r, n)) => (r, Some(n.to_string())),
        None => (resource, None),
    };
    let (plural, group) = match resource.split_once('.') {
        Some((plural, group)) => (plural, group.to_string()),
        None => (
            resource,
            groups
                .get(resource)
                .unwrap_or_else(|| panic!("no served resource is called {resource}"))
                .clone(),
        ),
    };
    // `<namespace>:<name>` for a ServiceAccount outside kruise-system (the node agent's).
    let (sa_ns, sa) = sa.split_once(':').unwrap_or((SYSTEM_NS, sa));
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{sa_ns}:{sa}")),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{sa_ns}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group),
                resource: Some(plural.into()),
                subresource,
                name,
                namespace: namespace.map(String::from),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let answer = api
        .create(&PostParams::default(), &review)
        .await
        .unwrap_or_else(|e| panic!("SubjectAccessReview {verb} {resource}: {e}"));
    answer.status.is_some_and(|s| s.allowed)
}

/// Every served plural resource name to its API group, core resources winning a tie (as
/// kubectl resolves an unqualified name).
async fn resource_groups(client: &kube::Client) -> BTreeMap<String, String> {
    // Discovery lists each group version it was told of; one whose CRD version is being
    // changed by a test beside this one (the conversion tests serve and withdraw
    // versions) can be gone by the time it is asked: 404. Asked again, it is consistent.
    let discovery = wait_for("API discovery", Duration::from_secs(30), || async {
        kube::discovery::Discovery::new(client.clone())
            .run()
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    let mut groups = BTreeMap::new();
    for group in discovery.groups() {
        for (resource, _) in group.recommended_resources() {
            let entry = groups
                .entry(resource.plural.clone())
                .or_insert_with(|| resource.group.clone());
            if resource.group.is_empty() {
                entry.clear();
            }
        }
    }
    groups
}

/// `kubectl auth can-i` checks per controller, one a line: `yes|no verb resource
/// namespace` (`*`: cluster-wide; resource as [`can_i`] takes it). The `yes` lines are
/// what the controller uses (so the `no` lines are not vacuous).
const CLONESET_CHECKS: &str = "
    yes get    podunavailablebudgets.policy.kruise.io                  default
    yes update podunavailablebudgets.policy.kruise.io#status           default
    no  update podunavailablebudgets.policy.kruise.io                  default
    yes watch  clonesets.apps.kruise.io                                *
    yes watch  pods                                                    *
    yes watch  persistentvolumeclaims                                  *
    yes watch  controllerrevisions.apps                                *
    yes patch  clonesets.apps.kruise.io                                default
    yes patch  clonesets.apps.kruise.io#status                         default
    yes create pods                                                    default
    yes patch  pods#status                                             default
    yes create persistentvolumeclaims                                  default
    yes patch  persistentvolumeclaims                                  default
    yes delete controllerrevisions.apps                                default
    yes create events.events.k8s.io                                    default
    yes patch  leases.coordination.k8s.io/cloneset-controller          kruise-system
    yes update secrets/cloneset-webhook-ca                             kruise-system
    yes patch  validatingwebhookconfigurations/kruise-cloneset-validating *
    yes create mutatingwebhookconfigurations/kruise-cloneset-mutating  *
    yes patch  customresourcedefinitions.apiextensions.k8s.io/clonesets.apps.kruise.io *
    # Its own CRD's conversion only: no other CRD, no list, no delete.
    no  patch  customresourcedefinitions.apiextensions.k8s.io/sidecarsets.apps.kruise.io *
    no  delete customresourcedefinitions.apiextensions.k8s.io/clonesets.apps.kruise.io *
    no  list   customresourcedefinitions.apiextensions.k8s.io          *
    # Secrets: its CA Secret only; never another, never a list, a create or a delete.
    no  get    secrets                                                 default
    no  list   secrets                                                 kruise-system
    no  get    secrets/sidecarset-webhook-ca                           kruise-system
    no  create secrets                                                 kruise-system
    no  delete secrets/cloneset-webhook-ca                             kruise-system
    # Other kinds' custom resources (ImagePullJobs only with the predownload component).
    no  list   sidecarsets.apps.kruise.io                              *
    no  list   statefulsets.apps.kruise.io                             default
    no  list   daemonsets.apps.kruise.io                               default
    no  create imagepulljobs.apps.kruise.io                            default
    # CloneSets are the users': never created, replaced or deleted.
    no  create clonesets.apps.kruise.io                                default
    no  update clonesets.apps.kruise.io                                default
    no  delete clonesets.apps.kruise.io                                default
    # No nodes; no writes beyond its own kinds.
    no  get    nodes                                                   *
    no  patch  nodes                                                   *
    no  update pods                                                    default
    no  create pods#exec                                               default
    no  create pods#eviction                                           default
    no  update persistentvolumeclaims                                  default
    no  list   deployments.apps                                        default
    no  get    configmaps                                              default
    no  create serviceaccounts#token                                   kruise-system
    no  list   namespaces                                              *
    no  patch  leases.coordination.k8s.io/sidecarset-controller        kruise-system
    no  create leases.coordination.k8s.io                              default
    # Other webhook configurations; deleting or listing its own.
    no  patch  validatingwebhookconfigurations/kruise-sidecarset-validating *
    no  patch  mutatingwebhookconfigurations/some-other-webhook        *
    no  delete validatingwebhookconfigurations/kruise-cloneset-validating *
    no  list   validatingwebhookconfigurations                         *
    # Nothing to grant itself more with.
    no  create clusterroles.rbac.authorization.k8s.io                  *
    no  bind   clusterroles.rbac.authorization.k8s.io                  *
    no  impersonate serviceaccounts                                    kruise-system
";

const SIDECARSET_CHECKS: &str = "
    yes watch  sidecarsets.apps.kruise.io                              *
    yes get    sidecarsets.apps.kruise.io                              *
    yes patch  sidecarsets.apps.kruise.io#status                       *
    yes watch  pods                                                    *
    yes patch  pods                                                    default
    yes patch  pods#status                                             default
    yes watch  namespaces                                              *
    yes create events.events.k8s.io                                    default
    yes create controllerrevisions.apps                                kruise-system
    yes get    configmaps/kruise-configuration                         kruise-system
    yes patch  leases.coordination.k8s.io/sidecarset-controller        kruise-system
    yes update secrets/sidecarset-webhook-ca                           kruise-system
    yes patch  mutatingwebhookconfigurations/kruise-sidecarset-mutating *
    yes patch  customresourcedefinitions.apiextensions.k8s.io/sidecarsets.apps.kruise.io *
    no  patch  customresourcedefinitions.apiextensions.k8s.io/clonesets.apps.kruise.io *
    # Secrets: its CA Secret only.
    no  get    secrets                                                 default
    no  list   secrets                                                 kruise-system
    no  get    secrets/cloneset-webhook-ca                             kruise-system
    no  create secrets                                                 kruise-system
    # Revisions and configuration in its own namespace only, one ConfigMap.
    no  create controllerrevisions.apps                                default
    no  list   controllerrevisions.apps                                *
    no  get    configmaps                                              kruise-system
    no  get    configmaps/kruise-configuration                         default
    # Pods are the workloads': never created, deleted, replaced, evicted or exec'd into.
    no  create pods                                                    default
    no  delete pods                                                    default
    no  update pods                                                    default
    no  create pods#eviction                                           default
    no  create pods#exec                                               default
    # SidecarSets are the users': written only through their status.
    no  patch  sidecarsets.apps.kruise.io                              *
    no  delete sidecarsets.apps.kruise.io                              *
    no  list   clonesets.apps.kruise.io                                default
    no  patch  nodes                                                   *
    no  patch  namespaces                                              *
    no  patch  leases.coordination.k8s.io/cloneset-controller          kruise-system
    no  patch  validatingwebhookconfigurations/kruise-cloneset-validating *
    no  delete mutatingwebhookconfigurations/kruise-sidecarset-mutating *
    no  create clusterroles.rbac.authorization.k8s.io                  *
    no  create serviceaccounts#token                                   kruise-system
";

const STATEFULSET_CHECKS: &str = "
    yes get    podunavailablebudgets.policy.kruise.io                  default
    yes update podunavailablebudgets.policy.kruise.io#status           default
    no  update podunavailablebudgets.policy.kruise.io                  default
    yes watch  statefulsets.apps.kruise.io                             *
    yes list   statefulsets.apps.kruise.io                             default
    yes patch  statefulsets.apps.kruise.io#status                      default
    yes watch  pods                                                    *
    yes get    pods                                                    default
    yes create pods                                                    default
    yes delete pods                                                    default
    yes patch  pods                                                    default
    yes patch  pods#status                                             default
    yes watch  persistentvolumeclaims                                  *
    yes create persistentvolumeclaims                                  default
    yes patch  persistentvolumeclaims                                  default
    no  delete persistentvolumeclaims                                  default
    yes list   storageclasses.storage.k8s.io                           *
    no  patch  storageclasses.storage.k8s.io                           *
    yes watch  controllerrevisions.apps                                *
    yes create controllerrevisions.apps                                default
    yes patch  controllerrevisions.apps                                default
    yes delete controllerrevisions.apps                                default
    yes create events.events.k8s.io                                    default
    yes patch  events.events.k8s.io                                    default
    yes create leases.coordination.k8s.io                              kruise-system
    yes patch  leases.coordination.k8s.io/statefulset-controller       kruise-system
    yes get    secrets/statefulset-webhook-ca                          kruise-system
    yes update secrets/statefulset-webhook-ca                          kruise-system
    yes patch  validatingwebhookconfigurations/kruise-statefulset-validating *
    yes create mutatingwebhookconfigurations/kruise-statefulset-mutating *
    # Secrets: its CA Secret only; never another, never a list, a create or a delete.
    no  get    secrets                                                 default
    no  list   secrets                                                 kruise-system
    no  get    secrets/cloneset-webhook-ca                             kruise-system
    no  create secrets                                                 kruise-system
    no  delete secrets/statefulset-webhook-ca                          kruise-system
    # StatefulSets are the users': written only through their status, never scaled.
    no  create statefulsets.apps.kruise.io                             default
    no  update statefulsets.apps.kruise.io                             default
    no  patch  statefulsets.apps.kruise.io                             default
    no  delete statefulsets.apps.kruise.io                             default
    no  update statefulsets.apps.kruise.io#scale                       default
    no  patch  statefulsets.apps.kruise.io#scale                       default
    # Other kinds' custom resources, and the built-in apps/v1 StatefulSets.
    no  list   clonesets.apps.kruise.io                                default
    no  list   sidecarsets.apps.kruise.io                              *
    no  list   daemonsets.apps.kruise.io                               default
    no  create imagepulljobs.apps.kruise.io                            default
    no  list   statefulsets.apps                                       default
    no  patch  statefulsets.apps                                       default
    # No nodes or volumes; Pods and claims never replaced, evicted or exec'd into.
    no  get    nodes                                                   *
    no  patch  nodes                                                   *
    no  list   persistentvolumes                                       *
    no  update pods                                                    default
    no  create pods#exec                                               default
    no  create pods#eviction                                           default
    no  update persistentvolumeclaims                                  default
    no  list   deployments.apps                                        default
    no  get    configmaps                                              default
    no  list   namespaces                                              *
    no  create serviceaccounts#token                                   kruise-system
    # Other controllers' Leases; Leases outside its namespace.
    no  patch  leases.coordination.k8s.io/cloneset-controller          kruise-system
    no  patch  leases.coordination.k8s.io/sidecarset-controller        kruise-system
    no  create leases.coordination.k8s.io                              default
    # Other webhook configurations; deleting or listing its own.
    no  patch  validatingwebhookconfigurations/kruise-cloneset-validating *
    no  patch  mutatingwebhookconfigurations/kruise-sidecarset-mutating *
    no  delete validatingwebhookconfigurations/kruise-statefulset-validating *
    no  list   mutatingwebhookconfigurations                           *
    # Nothing to grant itself more with.
    no  create clusterroles.rbac.authorization.k8s.io                  *
    no  bind   clusterroles.rbac.authorization.k8s.io                  *
    no  impersonate serviceaccounts                                    kruise-system
";

const BROADCASTJOB_CHECKS: &str = "
    yes watch  broadcastjobs.apps.kruise.io                            *
    yes list   broadcastjobs.apps.kruise.io                            default
    yes delete broadcastjobs.apps.kruise.io                            default
    yes patch  broadcastjobs.apps.kruise.io#status                     default
    yes watch  pods                                                    *
    yes create pods                                                    default
    yes delete pods                                                    default
    yes watch  nodes                                                   *
    yes list   nodes                                                   *
    yes create events.events.k8s.io                                    default
    yes patch  events.events.k8s.io                                    default
    yes create leases.coordination.k8s.io                              kruise-system
    yes patch  leases.coordination.k8s.io/broadcastjob-controller      kruise-system
    yes get    secrets/broadcastjob-webhook-ca                         kruise-system
    yes update secrets/broadcastjob-webhook-ca                         kruise-system
    yes patch  validatingwebhookconfigurations/kruise-broadcastjob-validating *
    yes create mutatingwebhookconfigurations/kruise-broadcastjob-mutating *
    # Secrets: its CA Secret only.
    no  get    secrets                                                 default
    no  list   secrets                                                 kruise-system
    no  get    secrets/statefulset-webhook-ca                          kruise-system
    no  create secrets                                                 kruise-system
    # BroadcastJobs are the users' (or a cron job's): never created or changed but for
    # their status.
    no  create broadcastjobs.apps.kruise.io                            default
    no  update broadcastjobs.apps.kruise.io                            default
    no  patch  broadcastjobs.apps.kruise.io                            default
    # Pods are created and deleted, never patched, replaced, evicted or exec'd into;
    # nodes only read.
    no  patch  pods                                                    default
    no  update pods                                                    default
    no  patch  pods#status                                             default
    no  create pods#eviction                                           default
    no  create pods#exec                                               default
    no  patch  nodes                                                   *
    no  delete nodes                                                   *
    # Other kinds.
    no  list   advancedcronjobs.apps.kruise.io                         default
    no  list   jobs.batch                                              default
    no  list   clonesets.apps.kruise.io                                default
    no  list   persistentvolumeclaims                                  default
    no  list   controllerrevisions.apps                                default
    no  get    configmaps                                              default
    no  create serviceaccounts#token                                   kruise-system
    no  patch  leases.coordination.k8s.io/statefulset-controller       kruise-system
    no  create leases.coordination.k8s.io                              default
    no  patch  validatingwebhookconfigurations/kruise-statefulset-validating *
    no  delete validatingwebhookconfigurations/kruise-broadcastjob-validating *
    no  list   mutatingwebhookconfigurations                           *
    no  create clusterroles.rbac.authorization.k8s.io                  *
    no  bind   clusterroles.rbac.authorization.k8s.io                  *
    no  impersonate serviceaccounts                                    kruise-system
";

const CRONJOB_CHECKS: &str = "
    yes watch  advancedcronjobs.apps.kruise.io                         *
    yes list   advancedcronjobs.apps.kruise.io                         default
    yes patch  advancedcronjobs.apps.kruise.io#status                  default
    yes watch  jobs.batch                                              *
    yes create jobs.batch                                              default
    yes delete jobs.batch                                              default
    yes watch  broadcastjobs.apps.kruise.io                            *
    yes create broadcastjobs.apps.kruise.io                            default
    yes delete broadcastjobs.apps.kruise.io                            default
    yes watch  imagelistpulljobs.apps.kruise.io                        *
    yes create imagelistpulljobs.apps.kruise.io                        default
    yes delete imagelistpulljobs.apps.kruise.io                        default
    yes create leases.coordination.k8s.io                              kruise-system
    yes patch  leases.coordination.k8s.io/advancedcronjob-controller   kruise-system
    yes get    secrets/advancedcronjob-webhook-ca                      kruise-system
    yes update secrets/advancedcronjob-webhook-ca                      kruise-system
    yes patch  validatingwebhookconfigurations/kruise-advancedcronjob-validating *
    yes create mutatingwebhookconfigurations/kruise-advancedcronjob-mutating *
    # Secrets: its CA Secret only.
    no  get    secrets                                                 default
    no  list   secrets                                                 kruise-system
    no  create secrets                                                 kruise-system
    # Cron jobs are the users': written only through their status. Children are made
    # and removed, never changed.
    no  create advancedcronjobs.apps.kruise.io                         default
    no  patch  advancedcronjobs.apps.kruise.io                         default
    no  delete advancedcronjobs.apps.kruise.io                         default
    no  patch  jobs.batch                                              default
    no  update broadcastjobs.apps.kruise.io                            default
    no  patch  broadcastjobs.apps.kruise.io#status                     default
    no  update imagelistpulljobs.apps.kruise.io                        default
    no  patch  imagelistpulljobs.apps.kruise.io#status                 default
    # No Pods, nodes or events (it emits none).
    no  list   pods                                                    default
    no  create pods                                                    default
    no  list   nodes                                                   *
    no  create events.events.k8s.io                                    default
    no  list   cronjobs.batch                                          default
    no  create imagepulljobs.apps.kruise.io                            default
    no  create serviceaccounts#token                                   kruise-system
    no  patch  leases.coordination.k8s.io/broadcastjob-controller      kruise-system
    no  patch  validatingwebhookconfigurations/kruise-broadcastjob-validating *
    no  delete mutatingwebhookconfigurations/kruise-advancedcronjob-mutating *
    no  create clusterroles.rbac.authorization.k8s.io                  *
    no  impersonate serviceaccounts                                    kruise-system
";

const DAEMONSET_CHECKS: &str = "
    yes get    podunavailablebudgets.policy.kruise.io                  default
    yes update podunavailablebudgets.policy.kruise.io#status           default
    no  update podunavailablebudgets.policy.kruise.io                  default
    yes watch  daemonsets.apps.kruise.io                               *
    yes list   daemonsets.apps.kruise.io                               default
    yes patch  daemonsets.apps.kruise.io#status                        default
    yes watch  nodes                                                   *
    yes list   nodes                                                   *
    yes get    nodes                                                   *
    yes watch  pods                                                    *
    yes get    pods                                                    default
    yes create pods                                                    default
    yes delete pods                                                    default
    yes patch  pods                                                    default
    yes patch  pods#status                                             default
    yes watch  controllerrevisions.apps                                *
    yes create controllerrevisions.apps                                default
    yes patch  controllerrevisions.apps                                default
    yes delete controllerrevisions.apps                                default
    yes create events.events.k8s.io                                    default
    yes patch  events.events.k8s.io                                    default
    yes create leases.coordination.k8s.io                              kruise-system
    yes patch  leases.coordination.k8s.io/daemonset-controller         kruise-system
    yes get    secrets/daemonset-webhook-ca                            kruise-system
    yes update secrets/daemonset-webhook-ca                            kruise-system
    yes patch  validatingwebhookconfigurations/kruise-daemonset-validating *
    yes create mutatingwebhookconfigurations/kruise-daemonset-mutating *
    yes patch  customresourcedefinitions.apiextensions.k8s.io/daemonsets.apps.kruise.io *
    # Its own CRD's conversion only.
    no  patch  customresourcedefinitions.apiextensions.k8s.io/clonesets.apps.kruise.io *
    no  delete customresourcedefinitions.apiextensions.k8s.io/daemonsets.apps.kruise.io *
    # Nodes are only read: never labelled, tainted, cordoned or removed.
    no  patch  nodes                                                   *
    no  update nodes                                                   *
    no  delete nodes                                                   *
    no  patch  nodes#status                                            *
    # Secrets: its CA Secret only.
    no  get    secrets                                                 default
    no  list   secrets                                                 kruise-system
    no  get    secrets/statefulset-webhook-ca                          kruise-system
    no  create secrets                                                 kruise-system
    # DaemonSets are the users': written only through their status.
    no  create daemonsets.apps.kruise.io                               default
    no  update daemonsets.apps.kruise.io                               default
    no  patch  daemonsets.apps.kruise.io                               default
    no  delete daemonsets.apps.kruise.io                               default
    # Pods: scheduled by the scheduler (no binding), never replaced, evicted or exec'd.
    no  create pods#binding                                            default
    no  update pods                                                    default
    no  create pods#eviction                                           default
    no  create pods#exec                                               default
    # No claims (daemon Pods have none), other kinds, the built-in DaemonSets.
    no  list   persistentvolumeclaims                                  default
    no  list   daemonsets.apps                                         default
    no  list   clonesets.apps.kruise.io                                default
    no  list   statefulsets.apps.kruise.io                             default
    no  create imagepulljobs.apps.kruise.io                            default
    no  get    configmaps                                              default
    no  create serviceaccounts#token                                   kruise-system
    no  patch  leases.coordination.k8s.io/statefulset-controller       kruise-system
    no  create leases.coordination.k8s.io                              default
    no  patch  validatingwebhookconfigurations/kruise-statefulset-validating *
    no  delete validatingwebhookconfigurations/kruise-daemonset-validating *
    no  list   mutatingwebhookconfigurations                           *
    no  create clusterroles.rbac.authorization.k8s.io                  *
    no  bind   clusterroles.rbac.authorization.k8s.io                  *
    no  impersonate serviceaccounts                                    kruise-system
";

/// protection-ctl lists (metadata only) to count a Cascading Namespace's Pods and PVCs and
/// a CRD's custom resources: `list` on those and on OpenKruise's kinds by name, never on
/// every resource (no Secret, no ConfigMap, no other group's custom resources unless a
/// user's ClusterRole is aggregated into kruise-deletionprotection-custom-resources);
/// nothing else but its webhook configuration and CA Secret.
const PROTECTION_CHECKS: &str = "
    yes list   pods                                                    *
    yes list   persistentvolumeclaims                                  *
    yes list   clonesets.apps.kruise.io                                *
    yes list   nodeimages.apps.kruise.io                               *
    yes list   podunavailablebudgets.policy.kruise.io                  *
    yes get    secrets/deletionprotection-webhook-ca                   kruise-system
    yes update secrets/deletionprotection-webhook-ca                   kruise-system
    yes create validatingwebhookconfigurations/kruise-deletionprotection-validating *
    yes patch  validatingwebhookconfigurations/kruise-deletionprotection-validating *
    # No wildcard: no Secret or ConfigMap, no other kind, no other group's resources.
    no  list   secrets                                                 *
    no  list   secrets                                                 default
    no  list   configmaps                                              *
    no  list   serviceaccounts                                         *
    no  list   deployments.apps                                        *
    no  list   roles.rbac.authorization.k8s.io                         *
    no  list   protwidgets.any.example.com                             *
    # List only: no get, no watch (no caches), no writes of anything it judges.
    no  get    pods                                                    default
    no  watch  pods                                                    *
    no  get    secrets                                                 default
    no  watch  secrets                                                 *
    no  get    clonesets.apps.kruise.io                                default
    no  delete pods                                                    default
    no  delete namespaces                                              *
    no  delete customresourcedefinitions.apiextensions.k8s.io          *
    no  update deployments.apps                                        default
    no  patch  clonesets.apps.kruise.io                                default
    no  create events.events.k8s.io                                    default
    # No Lease (webhook-only), no other webhook configuration.
    no  create leases.coordination.k8s.io                              kruise-system
    no  update secrets/cloneset-webhook-ca                             kruise-system
    no  patch  validatingwebhookconfigurations/kruise-cloneset-validating *
    no  create mutatingwebhookconfigurations                           *
    no  create clusterroles.rbac.authorization.k8s.io                  *
    no  impersonate serviceaccounts                                    kruise-system
";

const PERSISTENTPODSTATE_CHECKS: &str = "
    yes watch  persistentpodstates.apps.kruise.io                      *
    yes list   persistentpodstates.apps.kruise.io                      default
    yes create persistentpodstates.apps.kruise.io                      default
    yes patch  persistentpodstates.apps.kruise.io                      default
    yes delete persistentpodstates.apps.kruise.io                      default
    yes patch  persistentpodstates.apps.kruise.io#status               default
    yes watch  statefulsets.apps                                       *
    yes list   statefulsets.apps                                       default
    yes watch  statefulsets.apps.kruise.io                             *
    yes list   statefulsets.apps.kruise.io                             default
    yes watch  pods                                                    *
    yes list   pods                                                    default
    yes watch  nodes                                                   *
    yes list   nodes                                                   *
    yes create leases.coordination.k8s.io                              kruise-system
    yes patch  leases.coordination.k8s.io/persistentpodstate-controller kruise-system
    yes get    secrets/persistentpodstate-webhook-ca                   kruise-system
    yes update secrets/persistentpodstate-webhook-ca                   kruise-system
    yes patch  validatingwebhookconfigurations/kruise-persistentpodstate-validating *
    yes create mutatingwebhookconfigurations/kruise-persistentpodstate-mutating *
    yes patch  customresourcedefinitions.apiextensions.k8s.io/persistentpodstates.apps.kruise.io *
    # Its own CRD's conversion only.
    no  patch  customresourcedefinitions.apiextensions.k8s.io/statefulsets.apps.kruise.io *
    no  delete customresourcedefinitions.apiextensions.k8s.io/persistentpodstates.apps.kruise.io *
    # PPSs are never replaced (the generated spec is patched); status only by apply.
    no  update persistentpodstates.apps.kruise.io                      default
    no  update persistentpodstates.apps.kruise.io#status               default
    # Workloads are only read: never scaled, annotated or removed.
    no  patch  statefulsets.apps                                       default
    no  update statefulsets.apps#scale                                 default
    no  patch  statefulsets.apps.kruise.io                             default
    no  delete statefulsets.apps.kruise.io                             default
    no  patch  statefulsets.apps.kruise.io#status                      default
    # Pods and Nodes are only read: the Pod webhook mutates a create request in flight.
    no  get    pods                                                    default
    no  create pods                                                    default
    no  patch  pods                                                    default
    no  delete pods                                                    default
    no  create pods#eviction                                           default
    no  patch  nodes                                                   *
    no  get    nodes                                                   *
    # No events, no other kinds, no other controller's Secret, Lease or webhooks.
    no  create events.events.k8s.io                                    default
    no  list   clonesets.apps.kruise.io                                default
    no  list   persistentvolumeclaims                                  default
    no  get    configmaps                                              kruise-system
    no  get    secrets                                                 default
    no  get    secrets/statefulset-webhook-ca                          kruise-system
    no  create secrets                                                 kruise-system
    no  patch  leases.coordination.k8s.io/statefulset-controller       kruise-system
    no  create leases.coordination.k8s.io                              default
    no  patch  validatingwebhookconfigurations/kruise-statefulset-validating *
    no  delete mutatingwebhookconfigurations/kruise-persistentpodstate-mutating *
    no  list   mutatingwebhookconfigurations                           *
    no  create clusterroles.rbac.authorization.k8s.io                  *
    no  impersonate serviceaccounts                                    kruise-system
";

const PODPROBEMARKER_CHECKS: &str = "
    yes watch  podprobemarkers.apps.kruise.io                          *
    yes list   podprobemarkers.apps.kruise.io                          default
    yes patch  podprobemarkers.apps.kruise.io                          default
    yes patch  podprobemarkers.apps.kruise.io#status                   default
    yes watch  nodepodprobes.apps.kruise.io                            *
    yes list   nodepodprobes.apps.kruise.io                            *
    yes create nodepodprobes.apps.kruise.io                            *
    yes patch  nodepodprobes.apps.kruise.io                            *
    yes delete nodepodprobes.apps.kruise.io                            *
    yes watch  pods                                                    *
    yes list   pods                                                    default
    yes patch  pods#status                                             default
    yes watch  nodes                                                   *
    yes list   nodes                                                   *
    yes create events.events.k8s.io                                    default
    yes create leases.coordination.k8s.io                              kruise-system
    yes patch  leases.coordination.k8s.io/podprobemarker-controller    kruise-system
    yes get    secrets/podprobemarker-webhook-ca                       kruise-system
    yes update secrets/podprobemarker-webhook-ca                       kruise-system
    yes patch  validatingwebhookconfigurations/kruise-podprobemarker-validating *
    # Markers are never created, replaced or deleted by it; their status only by apply.
    no  create podprobemarkers.apps.kruise.io                          default
    no  update podprobemarkers.apps.kruise.io                          default
    no  delete podprobemarkers.apps.kruise.io                          default
    no  update podprobemarkers.apps.kruise.io#status                   default
    # NodePodProbe status is the node agent's.
    no  patch  nodepodprobes.apps.kruise.io#status                     *
    no  update nodepodprobes.apps.kruise.io                            *
    # Pods: marks through pods/status only; never created, deleted or their spec patched.
    no  patch  pods                                                    default
    no  create pods                                                    default
    no  delete pods                                                    default
    no  patch  nodes                                                   *
    no  list   clonesets.apps.kruise.io                                default
    no  get    secrets                                                 default
    no  patch  leases.coordination.k8s.io/statefulset-controller       kruise-system
    no  create mutatingwebhookconfigurations                           *
    no  patch  customresourcedefinitions.apiextensions.k8s.io/podprobemarkers.apps.kruise.io *
    no  impersonate serviceaccounts                                    kruise-system
";

const EPHEMERALJOB_CHECKS: &str = "
    yes watch  ephemeraljobs.apps.kruise.io                            *
    yes list   ephemeraljobs.apps.kruise.io                            default
    yes patch  ephemeraljobs.apps.kruise.io                            default
    yes delete ephemeraljobs.apps.kruise.io                            default
    yes patch  ephemeraljobs.apps.kruise.io#status                     default
    yes watch  pods                                                    *
    yes list   pods                                                    default
    yes patch  pods#ephemeralcontainers                                default
    yes create events.events.k8s.io                                    default
    yes create leases.coordination.k8s.io                              kruise-system
    yes patch  leases.coordination.k8s.io/ephemeraljob-controller      kruise-system
    yes get    secrets/ephemeraljob-webhook-ca                         kruise-system
    yes update secrets/ephemeraljob-webhook-ca                         kruise-system
    yes patch  validatingwebhookconfigurations/kruise-ephemeraljob-validating *
    # Jobs are never created or replaced by it; their status only by apply.
    no  create ephemeraljobs.apps.kruise.io                            default
    no  update ephemeraljobs.apps.kruise.io                            default
    no  update ephemeraljobs.apps.kruise.io#status                     default
    # Pods: ephemeral containers only; never created, deleted or otherwise patched.
    no  patch  pods                                                    default
    no  patch  pods#status                                             default
    no  update pods#ephemeralcontainers                                default
    no  create pods                                                    default
    no  delete pods                                                    default
    no  list   nodes                                                   *
    no  get    secrets                                                 default
    no  patch  leases.coordination.k8s.io/statefulset-controller       kruise-system
    no  create mutatingwebhookconfigurations                           *
    no  patch  customresourcedefinitions.apiextensions.k8s.io/ephemeraljobs.apps.kruise.io *
    no  impersonate serviceaccounts                                    kruise-system
";

const PUB_CHECKS: &str = "
    yes watch  podunavailablebudgets.policy.kruise.io                  *
    yes list   podunavailablebudgets.policy.kruise.io                  default
    yes get    podunavailablebudgets.policy.kruise.io                  default
    yes update podunavailablebudgets.policy.kruise.io#status           default
    yes watch  pods                                                    *
    yes get    pods                                                    default
    yes patch  pods                                                    default
    yes watch  replicasets.apps                                        *
    yes get    deployments.apps                                        default
    yes get    statefulsets.apps                                       default
    yes get    clonesets.apps.kruise.io                                default
    yes get    statefulsets.apps.kruise.io                             default
    yes watch  deployments.apps                                        *
    yes watch  statefulsets.apps                                       *
    yes watch  clonesets.apps.kruise.io                                *
    yes watch  statefulsets.apps.kruise.io                             *
    # A user's workload: its scale subresource only.
    yes get    myworkloads.example.com#scale                           default
    yes create events.events.k8s.io                                    default
    yes patch  events.events.k8s.io                                    default
    yes create leases.coordination.k8s.io                              kruise-system
    yes patch  leases.coordination.k8s.io/podunavailablebudget-controller kruise-system
    yes get    secrets/podunavailablebudget-webhook-ca                 kruise-system
    yes update secrets/podunavailablebudget-webhook-ca                 kruise-system
    yes patch  validatingwebhookconfigurations/kruise-pub-validating   *
    yes create mutatingwebhookconfigurations/kruise-pub-mutating       *
    yes patch  customresourcedefinitions.apiextensions.k8s.io/podunavailablebudgets.policy.kruise.io *
    no  patch  customresourcedefinitions.apiextensions.k8s.io/clonesets.apps.kruise.io *
    # PUBs are the users': written only through their status, by update (never apply).
    no  create podunavailablebudgets.policy.kruise.io                  default
    no  update podunavailablebudgets.policy.kruise.io                  default
    no  patch  podunavailablebudgets.policy.kruise.io                  default
    no  delete podunavailablebudgets.policy.kruise.io                  default
    no  patch  podunavailablebudgets.policy.kruise.io#status           default
    # Pods are annotated, never created, deleted, evicted, replaced or resized.
    no  create pods                                                    default
    no  delete pods                                                    default
    no  update pods                                                    default
    no  create pods#eviction                                           default
    no  patch  pods#status                                             default
    no  patch  pods#resize                                             default
    # Workloads are only read, and a user's CRD only through its scale.
    no  patch  deployments.apps                                        default
    no  update deployments.apps#scale                                  default
    no  patch  clonesets.apps.kruise.io                                default
    no  get    myworkloads.example.com                                 default
    no  update myworkloads.example.com#scale                           default
    # Secrets: its CA Secret only.
    no  get    secrets                                                 default
    no  list   secrets                                                 kruise-system
    no  get    secrets/cloneset-webhook-ca                             kruise-system
    no  create secrets                                                 kruise-system
    no  get    configmaps                                              default
    no  list   nodes                                                   *
    no  create serviceaccounts#token                                   kruise-system
    no  patch  leases.coordination.k8s.io/cloneset-controller          kruise-system
    no  patch  validatingwebhookconfigurations/kruise-cloneset-validating *
    no  delete validatingwebhookconfigurations/kruise-pub-validating   *
    no  list   mutatingwebhookconfigurations                           *
    no  create clusterroles.rbac.authorization.k8s.io                  *
    no  impersonate serviceaccounts                                    kruise-system
";

const UNITEDDEPLOYMENT_CHECKS: &str = "
    yes watch  uniteddeployments.apps.kruise.io                        *
    yes list   uniteddeployments.apps.kruise.io                        default
    yes patch  uniteddeployments.apps.kruise.io#status                 default
    yes watch  deployments.apps                                        *
    yes create deployments.apps                                        default
    yes update deployments.apps                                        default
    yes patch  deployments.apps                                        default
    yes delete deployments.apps                                        default
    yes create statefulsets.apps                                       default
    yes create statefulsets.apps.kruise.io                             default
    yes create clonesets.apps.kruise.io                                default
    yes watch  controllerrevisions.apps                                *
    yes create controllerrevisions.apps                                default
    yes get    controllerrevisions.apps                                default
    yes delete controllerrevisions.apps                                default
    yes watch  pods                                                    *
    # The reserved label of Pods (reserveUnschedulablePods).
    yes patch  pods                                                    default
    yes create events.events.k8s.io                                    default
    yes create leases.coordination.k8s.io                              kruise-system
    yes patch  leases.coordination.k8s.io/uniteddeployment-controller  kruise-system
    yes get    secrets/uniteddeployment-webhook-ca                     kruise-system
    yes update secrets/uniteddeployment-webhook-ca                     kruise-system
    yes patch  validatingwebhookconfigurations/kruise-uniteddeployment-validating *
    yes create mutatingwebhookconfigurations/kruise-uniteddeployment-mutating *
    yes patch  customresourcedefinitions.apiextensions.k8s.io/uniteddeployments.apps.kruise.io *
    # Its own CRD's conversion only.
    no  patch  customresourcedefinitions.apiextensions.k8s.io/clonesets.apps.kruise.io *
    no  delete customresourcedefinitions.apiextensions.k8s.io/uniteddeployments.apps.kruise.io *
    # UDs are the users': written only through their status.
    no  create uniteddeployments.apps.kruise.io                        default
    no  patch  uniteddeployments.apps.kruise.io                        default
    no  delete uniteddeployments.apps.kruise.io                        default
    # Pods are the subset workloads' controllers': made and deleted by them.
    no  create pods                                                    default
    no  delete pods                                                    default
    no  update pods                                                    default
    no  create pods#eviction                                           default
    # Workload status belongs to the workloads' controllers.
    no  patch  deployments.apps#status                                 default
    no  patch  clonesets.apps.kruise.io#status                         default
    no  list   replicasets.apps                                        default
    no  list   daemonsets.apps.kruise.io                               default
    no  list   nodes                                                   *
    no  get    secrets                                                 default
    no  create secrets                                                 kruise-system
    no  patch  leases.coordination.k8s.io/cloneset-controller          kruise-system
    no  patch  validatingwebhookconfigurations/kruise-cloneset-validating *
    no  delete mutatingwebhookconfigurations/kruise-uniteddeployment-mutating *
    no  create clusterroles.rbac.authorization.k8s.io                  *
    no  impersonate serviceaccounts                                    kruise-system
";

const WORKLOADSPREAD_CHECKS: &str = "
    yes watch  workloadspreads.apps.kruise.io                          *
    yes list   workloadspreads.apps.kruise.io                          default
    yes get    workloadspreads.apps.kruise.io                          default
    yes update workloadspreads.apps.kruise.io#status                   default
    yes watch  pods                                                    *
    yes patch  pods                                                    default
    yes delete pods                                                    default
    yes watch  clonesets.apps.kruise.io                                *
    yes get    clonesets.apps.kruise.io                                default
    yes watch  statefulsets.apps.kruise.io                             *
    yes watch  deployments.apps                                        *
    yes watch  replicasets.apps                                        *
    yes get    replicasets.apps                                        default
    yes watch  statefulsets.apps                                       *
    yes watch  jobs.batch                                              *
    yes list   nodes                                                   *
    yes watch  nodes                                                   *
    yes create events.events.k8s.io                                    default
    yes patch  events.events.k8s.io                                    default
    yes create leases.coordination.k8s.io                              kruise-system
    yes patch  leases.coordination.k8s.io/workloadspread-controller    kruise-system
    yes get    secrets/workloadspread-webhook-ca                       kruise-system
    yes update secrets/workloadspread-webhook-ca                       kruise-system
    yes get    configmaps/kruise-configuration                         kruise-system
    yes patch  validatingwebhookconfigurations/kruise-workloadspread-validating *
    yes create mutatingwebhookconfigurations/kruise-workloadspread-mutating *
    yes patch  customresourcedefinitions.apiextensions.k8s.io/workloadspreads.apps.kruise.io *
    # Its own CRD's conversion only.
    no  patch  customresourcedefinitions.apiextensions.k8s.io/clonesets.apps.kruise.io *
    no  delete customresourcedefinitions.apiextensions.k8s.io/workloadspreads.apps.kruise.io *
    # WorkloadSpreads are the users': written only through their status, by update.
    no  create workloadspreads.apps.kruise.io                          default
    no  update workloadspreads.apps.kruise.io                          default
    no  patch  workloadspreads.apps.kruise.io                          default
    no  delete workloadspreads.apps.kruise.io                          default
    no  patch  workloadspreads.apps.kruise.io#status                   default
    # Pods are annotated and (Adaptive) deleted; never created, replaced or evicted.
    no  create pods                                                    default
    no  update pods                                                    default
    no  create pods#eviction                                           default
    no  patch  pods#status                                             default
    no  get    pods                                                    default
    # The workloads are only read: the spread never changes them.
    no  patch  clonesets.apps.kruise.io                                default
    no  update deployments.apps                                        default
    no  patch  deployments.apps#scale                                  default
    no  delete replicasets.apps                                        default
    no  patch  jobs.batch                                              default
    no  list   daemonsets.apps                                         default
    no  patch  nodes                                                   *
    no  get    secrets                                                 default
    no  create secrets                                                 kruise-system
    no  get    configmaps                                              default
    no  patch  leases.coordination.k8s.io/cloneset-controller          kruise-system
    no  patch  validatingwebhookconfigurations/kruise-cloneset-validating *
    no  delete mutatingwebhookconfigurations/kruise-workloadspread-mutating *
    no  create clusterroles.rbac.authorization.k8s.io                  *
    no  impersonate serviceaccounts                                    kruise-system
";

const RESOURCEDISTRIBUTION_CHECKS: &str = "
    yes watch  resourcedistributions.apps.kruise.io                    *
    yes list   resourcedistributions.apps.kruise.io                    *
    yes patch  resourcedistributions.apps.kruise.io#status             *
    yes watch  namespaces                                              *
    yes list   namespaces                                              *
    # The copies, in namespaces and under names the users' RDs choose (see rbac.yaml).
    yes watch  secrets                                                 *
    yes get    secrets                                                 default
    yes create secrets                                                 default
    yes update secrets                                                 default
    yes delete secrets                                                 default
    yes watch  configmaps                                              *
    yes create configmaps                                              default
    yes update configmaps                                              default
    yes delete configmaps                                              default
    yes create leases.coordination.k8s.io                              kruise-system
    yes patch  leases.coordination.k8s.io/resourcedistribution-controller kruise-system
    yes get    secrets/resourcedistribution-webhook-ca                 kruise-system
    yes update secrets/resourcedistribution-webhook-ca                 kruise-system
    yes patch  validatingwebhookconfigurations/kruise-resourcedistribution-validating *
    yes create validatingwebhookconfigurations/kruise-resourcedistribution-validating *
    yes patch  customresourcedefinitions.apiextensions.k8s.io/resourcedistributions.apps.kruise.io *
    # Its own CRD's conversion only.
    no  patch  customresourcedefinitions.apiextensions.k8s.io/clonesets.apps.kruise.io *
    no  delete customresourcedefinitions.apiextensions.k8s.io/resourcedistributions.apps.kruise.io *
    # Copies are replaced whole (optimistic PUT), never patched; collection delete never.
    no  patch  secrets                                                 default
    no  deletecollection secrets                                       default
    no  patch  configmaps                                              default
    # Namespaces are only read: never labelled, made or removed.
    no  patch  namespaces                                              *
    no  create namespaces                                              *
    no  delete namespaces                                              *
    # RDs are the users': written only through their status.
    no  create resourcedistributions.apps.kruise.io                    *
    no  update resourcedistributions.apps.kruise.io                    *
    no  patch  resourcedistributions.apps.kruise.io                    *
    no  delete resourcedistributions.apps.kruise.io                    *
    # No Pods, workloads, events or other tokens.
    no  list   pods                                                    default
    no  create events.events.k8s.io                                    default
    no  list   clonesets.apps.kruise.io                                default
    no  create serviceaccounts#token                                   kruise-system
    no  patch  leases.coordination.k8s.io/cloneset-controller          kruise-system
    no  create leases.coordination.k8s.io                              default
    no  get    mutatingwebhookconfigurations/kruise-resourcedistribution-mutating *
    no  patch  validatingwebhookconfigurations/kruise-cloneset-validating *
    no  delete validatingwebhookconfigurations/kruise-resourcedistribution-validating *
    no  create clusterroles.rbac.authorization.k8s.io                  *
    no  bind   clusterroles.rbac.authorization.k8s.io                  *
    no  impersonate serviceaccounts                                    kruise-system
";

const IMAGEPULLJOB_CHECKS: &str = "
    yes watch  imagepulljobs.apps.kruise.io                            *
    yes list   imagepulljobs.apps.kruise.io                            default
    yes create imagepulljobs.apps.kruise.io                            default
    yes patch  imagepulljobs.apps.kruise.io                            default
    yes delete imagepulljobs.apps.kruise.io                            default
    yes patch  imagepulljobs.apps.kruise.io#status                     default
    yes watch  imagelistpulljobs.apps.kruise.io                        *
    yes delete imagelistpulljobs.apps.kruise.io                        default
    yes patch  imagelistpulljobs.apps.kruise.io#status                 default
    yes watch  nodeimages.apps.kruise.io                               *
    yes create nodeimages.apps.kruise.io                               *
    yes patch  nodeimages.apps.kruise.io                               *
    yes delete nodeimages.apps.kruise.io                               *
    yes watch  nodes                                                   *
    yes watch  pods                                                    *
    # A job's pull secrets are read and watched where the job is (a rotated one is copied
    # again), copied into kruise-daemon-config.
    yes get    secrets                                                 default
    yes list   secrets                                                 default
    yes watch  secrets                                                 *
    yes create secrets                                                 kruise-daemon-config
    yes patch  secrets                                                 kruise-daemon-config
    yes delete secrets                                                 kruise-daemon-config
    yes watch  secrets                                                 kruise-daemon-config
    yes create leases.coordination.k8s.io                              kruise-system
    yes patch  leases.coordination.k8s.io/imagepulljob-controller      kruise-system
    yes get    secrets/imagepulljob-webhook-ca                         kruise-system
    yes update secrets/imagepulljob-webhook-ca                         kruise-system
    yes patch  validatingwebhookconfigurations/kruise-imagepulljob-validating *
    # Secrets are written in kruise-daemon-config only.
    no  create secrets                                                 default
    no  delete secrets                                                 default
    # The NodeImage status: zero counters at creation, tags failed on timeouts.
    yes patch  nodeimages.apps.kruise.io#status                        *
    yes create events.events.k8s.io                                    default
    yes patch  events.events.k8s.io                                    default
    # The lists' spec and the Pods are the users'.
    no  update imagelistpulljobs.apps.kruise.io                        default
    no  create imagelistpulljobs.apps.kruise.io                        default
    no  patch  pods                                                    default
    no  delete pods                                                    default
    no  patch  nodes                                                   *
    no  list   clonesets.apps.kruise.io                                default
    no  create serviceaccounts#token                                   kruise-system
    no  patch  leases.coordination.k8s.io/cloneset-controller          kruise-system
    no  create mutatingwebhookconfigurations/kruise-imagepulljob-mutating *
    no  create clusterroles.rbac.authorization.k8s.io                  *
    no  impersonate serviceaccounts                                    kruise-system
";

const CRR_CHECKS: &str = "
    yes watch  containerrecreaterequests.apps.kruise.io                *
    yes list   containerrecreaterequests.apps.kruise.io                default
    yes patch  containerrecreaterequests.apps.kruise.io                default
    yes delete containerrecreaterequests.apps.kruise.io                default
    yes patch  containerrecreaterequests.apps.kruise.io#status         default
    # The Pods: watched, read fresh by admission, only their status written (KruisePodReady).
    yes watch  pods                                                    *
    yes get    pods                                                    default
    yes patch  pods#status                                             default
    no  patch  pods                                                    default
    no  update pods                                                    default
    no  delete pods                                                    default
    no  create pods#eviction                                           default
    yes create events.events.k8s.io                                    default
    yes create leases.coordination.k8s.io                              kruise-system
    yes patch  leases.coordination.k8s.io/containerrecreaterequest-controller kruise-system
    yes get    secrets/containerrecreaterequest-webhook-ca             kruise-system
    yes update secrets/containerrecreaterequest-webhook-ca             kruise-system
    yes patch  validatingwebhookconfigurations/kruise-containerrecreaterequest-validating *
    yes patch  mutatingwebhookconfigurations/kruise-containerrecreaterequest-mutating *
    yes patch  customresourcedefinitions.apiextensions.k8s.io/containerrecreaterequests.apps.kruise.io *
    # Its own CRD's conversion only.
    no  patch  customresourcedefinitions.apiextensions.k8s.io/nodeimages.apps.kruise.io *
    no  delete customresourcedefinitions.apiextensions.k8s.io/containerrecreaterequests.apps.kruise.io *
    # Created by SidecarTerminator (sidecar-termination-<pod uid>); never rewritten.
    yes create containerrecreaterequests.apps.kruise.io                default
    no  update containerrecreaterequests.apps.kruise.io                default
    no  get    secrets                                                 default
    no  list   nodes                                                   *
    no  list   clonesets.apps.kruise.io                                default
    no  create serviceaccounts#token                                   kruise-system
    no  patch  leases.coordination.k8s.io/cloneset-controller          kruise-system
    no  patch  validatingwebhookconfigurations/kruise-cloneset-validating *
    no  create clusterroles.rbac.authorization.k8s.io                  *
    no  impersonate serviceaccounts                                    kruise-system
";

const DAEMON_AGENT_CHECKS: &str = "
    # No reads of NodeImages, requests or Pods without a node: RBAC grants none (the
    # apiserver's agent authorizer allows its own node's, for a token bound to its Pod:
    # agentauthz.rs; kustomize/components/daemon-agent-cluster-reads grants them all).
    no  watch  nodeimages.apps.kruise.io                               *
    no  list   nodeimages.apps.kruise.io                               *
    no  get    nodeimages.apps.kruise.io                               *
    # Its NodeImage's status (own-nodeimage-policy.yaml narrows it to its node).
    yes patch  nodeimages.apps.kruise.io#status                        *
    # Its NodePodProbe's status, the probe results (own-nodepodprobe-policy.yaml);
    # its spec is the controller's.
    yes patch  nodepodprobes.apps.kruise.io#status                     *
    no  patch  nodepodprobes.apps.kruise.io                            *
    no  list   nodepodprobes.apps.kruise.io                            *
    yes create events.events.k8s.io                                    default
    yes patch  events.events.k8s.io                                    default
    # The copied pull secrets, one by one.
    yes get    secrets                                                 kruise-daemon-config
    no  list   secrets                                                 kruise-daemon-config
    no  watch  secrets                                                 kruise-daemon-config
    no  get    secrets                                                 default
    no  get    secrets                                                 kruise-system
    no  create secrets                                                 kruise-daemon-config
    # The NodeImages' spec is the controller's; nothing else is written.
    no  patch  nodeimages.apps.kruise.io                               *
    no  update nodeimages.apps.kruise.io                               *
    no  create nodeimages.apps.kruise.io                               *
    no  delete nodeimages.apps.kruise.io                               *
    no  patch  imagepulljobs.apps.kruise.io                            default
    no  list   imagepulljobs.apps.kruise.io                            default
    # Its node's ContainerRecreateRequests' status only (own-crr-policy.yaml).
    no  watch  containerrecreaterequests.apps.kruise.io                *
    no  list   containerrecreaterequests.apps.kruise.io                *
    yes patch  containerrecreaterequests.apps.kruise.io#status         default
    no  patch  containerrecreaterequests.apps.kruise.io                default
    no  delete containerrecreaterequests.apps.kruise.io                default
    no  create containerrecreaterequests.apps.kruise.io                default
    # Pods: read through the authorizer only; their runtime-containers-meta annotation
    # through pods/status; never their spec.
    no  get    pods                                                    default
    no  list   pods                                                    *
    no  watch  pods                                                    *
    yes patch  pods#status                                             default
    no  patch  pods                                                    default
    no  update pods                                                    default
    no  delete pods                                                    default
    # No nodes or containers through the API (the CRI socket is local).
    no  create pods#exec                                               default
    no  patch  nodes                                                   *
    no  get    nodes#proxy                                             *
    no  create leases.coordination.k8s.io                              kruise-system
    no  create serviceaccounts#token                                   kruise-daemon-config
    no  impersonate serviceaccounts                                    kruise-system
";

const LAUNCHPRIORITY_CHECKS: &str = "
    # The Pods being launched in order (label-selected watch) and their completion patch.
    yes list   pods                                                    *
    yes watch  pods                                                    *
    yes patch  pods                                                    default
    no  update pods                                                    default
    no  delete pods                                                    default
    no  patch  pods#status                                             default
    no  create pods#eviction                                           default
    # The barrier ConfigMaps: got one by one, created, keys added; never listed or deleted.
    yes get    configmaps                                              default
    yes create configmaps                                              default
    yes patch  configmaps                                              default
    no  list   configmaps                                              default
    no  watch  configmaps                                              default
    no  delete configmaps                                              default
    no  update configmaps                                              default
    # Lease, webhook CA, its own webhook configuration.
    yes create leases.coordination.k8s.io                              kruise-system
    yes get    leases.coordination.k8s.io/container-launch-priority-controller kruise-system
    yes patch  leases.coordination.k8s.io/container-launch-priority-controller kruise-system
    no  patch  leases.coordination.k8s.io/cloneset-controller          kruise-system
    yes get    secrets/container-launch-priority-webhook-ca            kruise-system
    yes update secrets/container-launch-priority-webhook-ca            kruise-system
    no  get    secrets                                                 default
    no  list   secrets                                                 kruise-system
    yes create mutatingwebhookconfigurations/kruise-sidecarset-z-launchpriority-mutating *
    yes patch  mutatingwebhookconfigurations/kruise-sidecarset-z-launchpriority-mutating *
    no  delete mutatingwebhookconfigurations/kruise-sidecarset-z-launchpriority-mutating *
    no  patch  mutatingwebhookconfigurations/kruise-sidecarset-mutating *
    no  create validatingwebhookconfigurations                          *
    no  create events.events.k8s.io                                    default
    no  list   nodes                                                   *
    no  impersonate serviceaccounts                                    kruise-system
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_grants_each_controller_only_what_it_uses() {
    let client = kruise_e2e::client().await;
    apply_rbac().await;
    let groups = resource_groups(&client).await;
    let docs = render("overlays/all");
    // (service account, allowed, verb, resource, namespace)
    let mut checks: Vec<(String, bool, String, String, Option<String>)> = Vec::new();
    for (bin, table) in [
        ("cloneset-ctl", CLONESET_CHECKS),
        ("sidecarset-ctl", SIDECARSET_CHECKS),
        ("statefulset-ctl", STATEFULSET_CHECKS),
        ("broadcastjob-ctl", BROADCASTJOB_CHECKS),
        ("cronjob-ctl", CRONJOB_CHECKS),
        ("daemonset-ctl", DAEMONSET_CHECKS),
        ("protection-ctl", PROTECTION_CHECKS),
        ("persistentpodstate-ctl", PERSISTENTPODSTATE_CHECKS),
        ("pub-ctl", PUB_CHECKS),
        ("resourcedistribution-ctl", RESOURCEDISTRIBUTION_CHECKS),
        ("uniteddeployment-ctl", UNITEDDEPLOYMENT_CHECKS),
        ("workloadspread-ctl", WORKLOADSPREAD_CHECKS),
        ("imagepulljob-ctl", IMAGEPULLJOB_CHECKS),
        ("crr-ctl", CRR_CHECKS),
        ("launchpriority-ctl", LAUNCHPRIORITY_CHECKS),
        ("podprobemarker-ctl", PODPROBEMARKER_CHECKS),
        ("ephemeraljob-ctl", EPHEMERALJOB_CHECKS),
        // The node agent is a DaemonSet, in kruise-daemon-config.
        ("daemon-agent", DAEMON_AGENT_CHECKS),
    ] {
        let sa = if bin == "daemon-agent" {
            "kruise-daemon-config:daemon-agent"
        } else {
            deployment_of(&docs, bin)["spec"]["template"]["spec"]["serviceAccountName"]
                .as_str()
                .unwrap()
        };
        for line in table.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(f.len(), 4, "{line}");
            let namespace = (f[3] != "*").then(|| f[3].to_string());
            checks.push((
                sa.into(),
                f[0] == "yes",
                f[1].into(),
                f[2].into(),
                namespace,
            ));
        }
    }
    use futures::StreamExt;
    let answers: Vec<bool> = futures::stream::iter(checks.iter())
        .map(|(sa, _, verb, resource, ns)| {
            can_i(&client, &groups, sa, verb, resource, ns.as_deref())
        })
        .buffered(16)
        .collect()
        .await;
    let wrong: Vec<String> = checks
        .iter()
        .zip(answers)
        .filter(|((_, allowed, ..), answer)| answer != allowed)
        .map(|((sa, allowed, verb, resource, ns), _)| {
            format!(
                "{sa} {} {verb} {resource} in {}",
                if *allowed { "cannot" } else { "can" },
                ns.as_deref().unwrap_or("all namespaces")
            )
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "RBAC is not what the controllers use:\n{}",
        wrong.join("\n")
    );
}

// --- controller binaries, run as processes ---

static BUILT: OnceCell<PathBuf> = OnceCell::const_new();

/// Builds every controller binary (debug, the workspace's target dir) once per test
/// process; the directory holding them.
async fn binaries() -> PathBuf {
    BUILT
        .get_or_init(|| async {
            let bins = controller_binaries();
            tokio::task::spawn_blocking(move || {
                let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
                let mut cmd = Command::new(cargo);
                cmd.current_dir(repo_root()).args(["build", "--quiet"]);
                for b in &bins {
                    cmd.args(["--bin", b]);
                }
                let status = cmd.status().expect("run cargo build");
                assert!(status.success(), "cargo build of {bins:?} failed");
            })
            .await
            .unwrap();
            // The test binary is target/debug/deps/e2e-<hash>.
            std::env::current_exe()
                .unwrap()
                .parent()
                .and_then(Path::parent)
                .unwrap()
                .to_path_buf()
        })
        .await
        .clone()
}

/// A port free now and never handed out before in this process: the kernel may give
/// back a just-released port to the next bind, and two calls before the child binds
/// could otherwise return the same one (the admin and webhook servers then collide).
fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<BTreeSet<u16>> = std::sync::Mutex::new(BTreeSet::new());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if HANDED_OUT.lock().unwrap().insert(port) {
            return port;
        }
    }
}

/// A kubeconfig for the local cluster that authenticates with a fresh token of the
/// ServiceAccount, and nothing else.
async fn token_kubeconfig(sa: &str, dir: &Path) -> PathBuf {
    let (ok, token, err) = kubectl_async(
        args(&["create", "token", sa, "-n", SYSTEM_NS, "--duration=1h"]),
        None,
    )
    .await;
    assert!(ok, "kubectl create token {sa}: {err}");
    let admin = kube::config::Kubeconfig::read_from(kubeconfig_path()).unwrap();
    let cluster = admin.clusters[0].cluster.clone().unwrap();
    let mut c = json!({"server": cluster.server});
    if let Some(ca) = cluster.certificate_authority {
        c["certificate-authority"] = json!(ca);
    }
    if let Some(data) = cluster.certificate_authority_data {
        c["certificate-authority-data"] = json!(data);
    }
    let config = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "local", "cluster": c}],
        "users": [{"name": sa, "user": {"token": token.trim()}}],
        "contexts": [{"name": sa, "context": {"cluster": "local", "user": sa}}],
        "current-context": sa,
    });
    let path = dir.join(format!("{sa}.kubeconfig"));
    std::fs::write(&path, config.to_string()).unwrap();
    path
}

/// What the namespace-scoped instance a test runs does differently from the deployed,
/// cluster-wide one, granted on top of the overlay's RBAC (which is applied unchanged):
/// it names its webhook configurations `<name>-<namespace>` (the overlay's webhook
/// rules, for those names), and what the deployed controller keeps in its own namespace
/// (SidecarSet revisions, say) it keeps in the namespace it watches (the overlay's Role,
/// also there). Removed on drop.
struct ScopedGrant(String);

impl ScopedGrant {
    async fn new(docs: &[Value], sa: &str, namespace: &str) -> Self {
        let name = format!("e2e-{sa}-{namespace}");
        let bound_to_sa = |binding_kind: &str, role: &Value| {
            of_kind(docs, binding_kind).iter().any(|b| {
                b["roleRef"]["name"] == role["metadata"]["name"] && b["subjects"][0]["name"] == sa
            })
        };
        let webhook_rules: Vec<Value> = of_kind(docs, "ClusterRole")
            .into_iter()
            .filter(|r| bound_to_sa("ClusterRoleBinding", r))
            .flat_map(|r| r["rules"].as_array().cloned().unwrap_or_default())
            .filter(|rule| rule["apiGroups"][0] == "admissionregistration.k8s.io")
            .map(|mut rule| {
                let names: Vec<Value> = rule["resourceNames"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| json!(format!("{}-{namespace}", n.as_str().unwrap())))
                    .collect();
                rule["resourceNames"] = json!(names);
                rule
            })
            .collect();
        assert!(
            !webhook_rules.is_empty(),
            "{sa} has webhook-configuration rules"
        );
        let own_namespace_rules: Vec<Value> = of_kind(docs, "Role")
            .into_iter()
            .filter(|r| bound_to_sa("RoleBinding", r))
            .flat_map(|r| r["rules"].as_array().cloned().unwrap_or_default())
            .collect();
        let rbac = "rbac.authorization.k8s.io";
        let subjects = json!([{"kind": "ServiceAccount", "name": sa, "namespace": SYSTEM_NS}]);
        let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": format!("{rbac}/v1"), "kind": "ClusterRole",
             "metadata": {"name": name}, "rules": webhook_rules},
            {"apiVersion": format!("{rbac}/v1"), "kind": "ClusterRoleBinding",
             "metadata": {"name": name},
             "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": name},
             "subjects": subjects},
            {"apiVersion": format!("{rbac}/v1"), "kind": "Role",
             "metadata": {"name": name, "namespace": namespace}, "rules": own_namespace_rules},
            {"apiVersion": format!("{rbac}/v1"), "kind": "RoleBinding",
             "metadata": {"name": name, "namespace": namespace},
             "roleRef": {"apiGroup": rbac, "kind": "Role", "name": name},
             "subjects": subjects},
        ]});
        let (ok, _, err) =
            kubectl_async(args(&["apply", "-f", "-"]), Some(objects.to_string())).await;
        assert!(ok, "{err}");
        ScopedGrant(name)
    }
}

impl Drop for ScopedGrant {
    fn drop(&mut self) {
        // (The Role and RoleBinding go with the test's namespace.)
        let _ = kubectl(
            &[
                "delete",
                "clusterrole,clusterrolebinding",
                &self.0,
                "--ignore-not-found",
                "--wait=false",
            ],
            None,
        );
    }
}

/// A controller binary running as its Deployment would, but on this machine.
struct Process {
    child: Child,
    bin: String,
    admin: SocketAddr,
    webhook_port: u16,
    log: PathBuf,
}

impl Process {
    /// Starts `bin` with the environment of its Deployment in `docs` (fieldRefs
    /// resolved, `$(VAR)` expanded), except: listening on free loopback ports, reached
    /// by URL instead of the Service, acting in `namespace` only, with `kubeconfig`,
    /// and `leader_elect` when given.
    async fn start(
        docs: &[Value],
        bin: &str,
        namespace: &str,
        kubeconfig: &Path,
        dir: &Path,
        leader_elect: Option<bool>,
    ) -> Self {
        let container = &deployment_of(docs, bin)["spec"]["template"]["spec"]["containers"][0];
        let pod_name = format!("{bin}-{namespace}");
        let mut env: Vec<(String, String)> = Vec::new();
        for e in container["env"].as_array().unwrap() {
            let name = e["name"].as_str().unwrap().to_string();
            let value = match e["value"].as_str() {
                Some(v) => v.to_string(),
                None => match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                    Some("metadata.namespace") => SYSTEM_NS.to_string(),
                    Some("metadata.name") => pod_name.clone(),
                    other => panic!("{bin}: env {name} from {other:?}"),
                },
            };
            let expanded = env
                .iter()
                .fold(value, |v, (k, val)| v.replace(&format!("$({k})"), val));
            env.push((name, expanded));
        }
        let admin_port = free_port();
        let webhook_port = free_port();
        let mut set = |k: &str, v: String| {
            env.retain(|(name, _)| name != k);
            env.push((k.to_string(), v));
        };
        set("KRUISE_ADMIN_ADDR", format!("127.0.0.1:{admin_port}"));
        set("KRUISE_WEBHOOK_ADDR", format!("127.0.0.1:{webhook_port}"));
        set(
            "KRUISE_WEBHOOK_URL",
            format!("https://127.0.0.1:{webhook_port}"),
        );
        set("KRUISE_WATCH_NAMESPACE", namespace.to_string());
        set("KUBECONFIG", kubeconfig.display().to_string());
        if let Some(on) = leader_elect {
            set("KRUISE_LEADER_ELECT", on.to_string());
        }
        env.retain(|(k, _)| k != "KRUISE_WEBHOOK_SERVICE");
        let log = dir.join(format!("{bin}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(binaries().await.join(bin))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(env)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("start {bin}: {e}"));
        let process = Process {
            child,
            bin: bin.to_string(),
            admin: ([127, 0, 0, 1], admin_port).into(),
            webhook_port,
            log,
        };
        process.wait_ready().await;
        process
    }

    async fn wait_ready(&self) {
        wait_for(&format!("{} /readyz", self.bin), MINUTE, || async {
            match http_get(self.admin, "/readyz").await {
                Ok((200, _)) => Ok(()),
                Ok((code, body)) => Err(format!("{code}: {body}")),
                Err(e) => Err(format!("{e}; log: {}", self.tail())),
            }
        })
        .await;
    }

    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    async fn metrics(&self) -> String {
        http_get(self.admin, "/metrics")
            .await
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    /// SIGTERM, as the kubelet does; the exit status.
    async fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "{} did not stop within 20s of SIGTERM; log:\n{}",
                    self.bin,
                    self.tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "--- {} log ({}):\n{}",
                self.bin,
                self.log.display(),
                self.tail()
            );
        }
    }
}

/// A scratch directory, removed on drop unless the test failed.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("kruise-deploy-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

// --- CloneSet helpers ---

fn cloneset_yaml(name: &str, replicas: i32, image: &str) -> String {
    format!(
        r#"
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: {name}
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      containers:
      - name: main
        image: {image}
  updateStrategy:
    type: InPlaceIfPossible
"#
    )
}
/// Waits for `n` ready Pods of `app`, all running `image`; (name, uid) of each.
async fn wait_pods(
    ns: &TestNamespace,
    app: &str,
    n: usize,
    image: &str,
) -> BTreeSet<(String, String)> {
    let pods: Api<Pod> = ns.api();
    wait_for(
        &format!("{n} ready pods of {app} with {image}"),
        MINUTE,
        || {
            let pods = pods.clone();
            async move {
                let list: Vec<Pod> = pods
                    .list(&ListParams::default().labels(&format!("app={app}")))
                    .await
                    .map_err(|e| e.to_string())?
                    .items
                    .into_iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .collect();
                let good = list
                    .iter()
                    .filter(|p| {
                        is_ready(p)
                            && p.spec.as_ref().unwrap().containers[0].image.as_deref()
                                == Some(image)
                    })
                    .count();
                if list.len() == n && good == n {
                    Ok(list
                        .iter()
                        .map(|p| (p.name_any(), p.uid().unwrap()))
                        .collect())
                } else {
                    Err(format!("{} pods, {good} ready with {image}", list.len()))
                }
            }
        },
    )
    .await
}

async fn wait_cloneset_status(ns: &TestNamespace, name: &str, replicas: i32) {
    let api: Api<CloneSet> = ns.api();
    wait_for(
        &format!("{name} status {replicas}/{replicas} updated and ready"),
        MINUTE,
        || {
            let api = api.clone();
            async move {
                let cs = api.get(name).await.map_err(|e| e.to_string())?;
                let s = cs.status.clone().unwrap_or_default();
                if Some(s.observed_generation) == cs.metadata.generation
                    && s.ready_replicas == replicas
                    && s.updated_ready_replicas == replicas
                    && s.replicas == replicas
                {
                    Ok(())
                } else {
                    Err(format!("{s:?}"))
                }
            }
        },
    )
    .await;
}

async fn scale(ns: &TestNamespace, name: &str, replicas: i32) {
    ns.api::<CloneSet>()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .expect("scale");
}

// --- RBAC is sufficient ---

/// A controller binary started as deployed, on a token of its ServiceAccount only.
struct OnItsRbac {
    ctl: Process,
    bin: String,
    ns: TestNamespace,
    _grant: ScopedGrant,
    _scratch: Scratch,
}

impl OnItsRbac {
    /// Starts `bin` with leader election on, as deployed (its Lease in kruise-system on
    /// the Role's grant), and checks its webhook registered itself with the token,
    /// trusting the CA of the overlay's CA Secret.
    async fn start(bin: &str, prefix: &str) -> Self {
        let ns = TestNamespace::new(prefix).await;
        apply_rbac().await;
        let docs = render(&format!("overlays/{}", overlay_of(bin)));
        let deployment = deployment_of(&docs, bin);
        let sa = deployment["spec"]["template"]["spec"]["serviceAccountName"]
            .as_str()
            .unwrap();
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let ca_secret = env_value(container, "KRUISE_WEBHOOK_CA_SECRET").unwrap();
        let scratch = Scratch::new(&ns.name);
        let grant = ScopedGrant::new(&docs, sa, &ns.name).await;
        let kubeconfig = token_kubeconfig(sa, &scratch.0).await;
        let ctl = Process::start(&docs, bin, &ns.name, &kubeconfig, &scratch.0, None).await;
        // It reconciles once it holds the Lease (another run on this cluster may hold it
        // for a while: then this one waits its turn, as a second replica does).
        wait_for(&format!("{bin} to lead"), 3 * MINUTE, || async {
            let metrics = ctl.metrics().await;
            if metrics
                .lines()
                .any(|l| l.starts_with("kruise_leader{") && l.ends_with(" 1"))
            {
                Ok(())
            } else {
                Err(ctl.tail())
            }
        })
        .await;

        let secrets: Api<Secret> = Api::namespaced(ns.client.clone(), SYSTEM_NS);
        let stored = secrets.get(ca_secret).await.expect("CA Secret");
        let bundle = stored.data.unwrap_or_default()["ca.crt"].0.clone();
        for config in of_kind(&docs, "ValidatingWebhookConfiguration")
            .into_iter()
            .chain(of_kind(&docs, "MutatingWebhookConfiguration"))
        {
            let name = format!("{}-{}", name_of(config), ns.name);
            let kind = kind_of(config).to_lowercase();
            let live = wait_for(&format!("{kind} {name}"), MINUTE, || async {
                let (ok, out, err) =
                    kubectl_async(args(&["get", &kind, &name, "-o", "json"]), None).await;
                if ok { Ok(out) } else { Err(err) }
            })
            .await;
            let live: Value = serde_json::from_str(&live).unwrap();
            for hook in live["webhooks"].as_array().unwrap() {
                let cc = &hook["clientConfig"];
                let url = cc["url"].as_str().unwrap();
                assert!(
                    url.starts_with(&format!("https://127.0.0.1:{}/", ctl.webhook_port)),
                    "{name}: {url}"
                );
                let ca = base64_decode(cc["caBundle"].as_str().unwrap());
                assert_eq!(ca, bundle, "{name}: the caBundle is the Secret's");
            }
        }
        OnItsRbac {
            ctl,
            bin: bin.to_string(),
            ns,
            _grant: grant,
            _scratch: scratch,
        }
    }

    /// After the scenario: the Lease was held, no request was refused, and SIGTERM
    /// stops the process cleanly.
    async fn finish(self, lease: &str) {
        let (_, holder, _) = kubectl_async(
            args(&[
                "get",
                "lease",
                lease,
                "-n",
                SYSTEM_NS,
                "-o",
                "jsonpath={.spec.holderIdentity}",
            ]),
            None,
        )
        .await;
        assert!(
            holder.starts_with(&format!("{}-{}_", self.bin, self.ns.name)),
            "lease {lease} held by {holder:?}"
        );
        let metrics = self.ctl.metrics().await;
        let forbidden: Vec<&str> = metrics
            .lines()
            .filter(|l| l.starts_with("kruise_api_requests_total") && l.contains("code=\"403\""))
            .collect();
        assert!(forbidden.is_empty(), "forbidden requests: {forbidden:?}");
        assert!(
            metrics.contains("kruise_api_requests_total"),
            "the metrics were read"
        );
        // What every exporter has (docs/metrics.md): the process collector and build info.
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("process_resident_memory_bytes ")),
            "process_* metrics"
        );
        assert!(
            metrics.lines().any(|l| l.starts_with("kruise_build_info{")
                && l.contains(&format!("binary=\"{}\"", self.bin))
                && l.ends_with(" 1")),
            "kruise_build_info of {}",
            self.bin
        );
        assert!(self.ctl.stop().await.success(), "clean exit on SIGTERM");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloneset_ctl_runs_on_its_overlay_rbac_alone() {
    let run = OnItsRbac::start("cloneset-ctl", "deploy-cs").await;
    let ns = &run.ns;
    // 3 Pods, the CloneSet defaulted by the mutating webhook, all ready.
    ns.apply(&cloneset_yaml("web", 3, "nginx:alpine"))
        .await
        .expect("create CloneSet");
    let cs = ns.api::<CloneSet>().get("web").await.unwrap();
    assert_eq!(
        cs.spec.revision_history_limit,
        Some(10),
        "defaulted by the webhook"
    );
    wait_pods(ns, "web", 3, "nginx:alpine").await;
    wait_cloneset_status(ns, "web", 3).await;
    // Scale out.
    scale(ns, "web", 5).await;
    let before = wait_pods(ns, "web", 5, "nginx:alpine").await;
    wait_cloneset_status(ns, "web", 5).await;
    // In-place image update: the same Pods (names and UIDs), new image.
    ns.api::<CloneSet>()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {
                "containers": [{"name": "main", "image": "nginx:1.27-alpine"}]}}}})),
        )
        .await
        .unwrap();
    let after = wait_pods(ns, "web", 5, "nginx:1.27-alpine").await;
    assert_eq!(before, after, "updated in place: same names and UIDs");
    wait_cloneset_status(ns, "web", 5).await;
    // Validation by the token-registered webhook.
    let err = ns
        .apply(&cloneset_yaml("bad", 1, "nginx:alpine").replace(
            "type: InPlaceIfPossible",
            "type: InPlaceOnly\n    maxSurge: 1",
        ))
        .await
        .expect_err("maxSurge with InPlaceOnly is refused");
    assert!(
        err.contains("can not use maxSurge with strategy type InPlaceOnly"),
        "{err}"
    );
    // Events, written on the overlay's grant.
    let (_, events, _) = kubectl_async(
        args(&[
            "get",
            "events.events.k8s.io",
            "-n",
            &ns.name,
            "-o",
            "jsonpath={range .items[*]}{.reportingController} {.reason}{\"\\n\"}{end}",
        ]),
        None,
    )
    .await;
    assert!(
        events.contains("cloneset-controller SuccessfulCreate"),
        "{events}"
    );
    run.finish(cloneset_ctl::CONTROLLER_NAME).await;
}

fn sidecar_image(p: &Pod) -> Option<String> {
    p.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == "sidecar")
        .and_then(|c| c.image.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecarset_ctl_runs_on_its_overlay_rbac_alone() {
    let run = OnItsRbac::start("sidecarset-ctl", "deploy-ss").await;
    let ns = &run.ns;
    let name = format!("deploy-{}", ns.name.rsplit('-').next().unwrap());
    let _cleanup = crate::sidecarset::SidecarSets(vec![name.clone()]);
    let sidecarset = |image: &str| {
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
               "metadata": {"name": name},
               "spec": {"namespace": ns.name, "selector": {"matchLabels": {"app": "web"}},
                        "updateStrategy": {"type": "RollingUpdate"},
                        "containers": [{"name": "sidecar", "image": image,
                                        "command": ["sleep", "999d"]}]}})
        .to_string()
    };
    let sidecarsets: Api<SidecarSet> = Api::all(ns.client.clone());
    let wait_status = |what: &'static str, want: (i32, i32)| {
        let sidecarsets = sidecarsets.clone();
        let name = name.clone();
        async move {
            wait_for(what, MINUTE, || async {
                let ss = sidecarsets.get(&name).await.map_err(|e| e.to_string())?;
                let s = ss.status.clone().unwrap_or_default();
                if Some(s.observed_generation) == ss.metadata.generation
                    && (s.matched_pods, s.updated_pods) == want
                {
                    Ok(ss)
                } else {
                    Err(format!("{s:?}"))
                }
            })
            .await
        }
    };
    // Defaulted and hashed by the token-registered mutating webhook.
    ns.apply(&sidecarset("busybox:1.36"))
        .await
        .expect("create SidecarSet");
    let ss = wait_status("SidecarSet status 0 matched", (0, 0)).await;
    assert!(
        ss.annotations()
            .contains_key(kruise_api::keys::SIDECARSET_HASH),
        "{:?}",
        ss.annotations()
    );
    // The Pod webhook's matchCondition, re-registered with the token, now covers it...
    let config = format!("kruise-sidecarset-mutating-{}", ns.name);
    wait_for(
        "the Pod webhook to cover the SidecarSet",
        MINUTE,
        || async {
            let (ok, out, err) = kubectl_async(
                args(&[
                    "get",
                    "mutatingwebhookconfiguration",
                    &config,
                    "-o",
                    "jsonpath={.webhooks[0].matchConditions[0].expression}",
                ]),
                None,
            )
            .await;
            if ok && out.contains("'web'") {
                Ok(())
            } else {
                Err(format!("{out} {err}"))
            }
        },
    )
    .await;
    // ...so a new Pod gets the sidecar.
    let pods: Api<Pod> = ns.api();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-0", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:alpine"}]},
    }))
    .unwrap();
    let created = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect("create Pod");
    assert_eq!(sidecar_image(&created).as_deref(), Some("busybox:1.36"));
    wait_status("SidecarSet status 1 matched, 1 updated", (1, 1)).await;
    // A new sidecar image is rolled out in place: the same Pod, the new image.
    ns.apply(&sidecarset("busybox:1.37"))
        .await
        .expect("update SidecarSet");
    let upgraded = wait_for("the sidecar upgraded in place", MINUTE, || async {
        let p = pods.get("web-0").await.map_err(|e| e.to_string())?;
        if sidecar_image(&p).as_deref() == Some("busybox:1.37") {
            Ok(p)
        } else {
            Err(format!("{:?}", sidecar_image(&p)))
        }
    })
    .await;
    assert_eq!(upgraded.uid(), created.uid(), "the same Pod");
    wait_status("SidecarSet status 1 matched, 1 updated", (1, 1)).await;
    run.finish(sidecarset_ctl::CONTROLLER_NAME).await;
}

/// An Advanced StatefulSet (`apps.kruise.io/<version>`): Parallel, updated in place, one
/// claim per Pod that a scale-in deletes (`whenScaled: Delete`).
fn statefulset_yaml(version: &str, name: &str, replicas: i32, image: &str) -> String {
    format!(
        r#"
apiVersion: apps.kruise.io/{version}
kind: StatefulSet
metadata:
  name: {name}
spec:
  serviceName: {name}
  replicas: {replicas}
  podManagementPolicy: Parallel
  selector:
    matchLabels:
      app: {name}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      podUpdatePolicy: InPlaceIfPossible
      maxUnavailable: 2
  persistentVolumeClaimRetentionPolicy:
    whenScaled: Delete
  template:
    metadata:
      labels:
        app: {name}
    spec:
      readinessGates:
      - conditionType: InPlaceUpdateReady
      containers:
      - name: main
        image: {image}
        volumeMounts:
        - name: data
          mountPath: /data
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
"#
    )
}

async fn wait_statefulset_status(ns: &TestNamespace, name: &str, replicas: i32) {
    let api: Api<StatefulSet> = ns.api();
    wait_for(
        &format!("{name} status {replicas}/{replicas} updated and ready"),
        MINUTE,
        || {
            let api = api.clone();
            async move {
                let sts = api.get(name).await.map_err(|e| e.to_string())?;
                let s = sts.status.clone().unwrap_or_default();
                if Some(s.observed_generation) == sts.metadata.generation
                    && s.replicas == replicas
                    && s.ready_replicas == replicas
                    && s.updated_replicas == replicas
                {
                    Ok(())
                } else {
                    Err(format!("{s:?}"))
                }
            }
        },
    )
    .await;
}

/// The names of the live (not deleting) claims in the namespace.
async fn live_claims(ns: &TestNamespace) -> Result<BTreeSet<String>, String> {
    Ok(ns
        .api::<PersistentVolumeClaim>()
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| c.name_any())
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_ctl_runs_on_its_overlay_rbac_alone() {
    let run = OnItsRbac::start("statefulset-ctl", "deploy-sts").await;
    let ns = &run.ns;
    let names = |pods: &BTreeSet<(String, String)>| -> BTreeSet<String> {
        pods.iter().map(|(name, _)| name.clone()).collect()
    };
    let set =
        |names: &[&str]| -> BTreeSet<String> { names.iter().map(|n| n.to_string()).collect() };
    // Two Pods with their claims, the set defaulted by the mutating webhook, all ready.
    ns.apply(&statefulset_yaml("v1beta1", "web", 2, "nginx:alpine"))
        .await
        .expect("create StatefulSet");
    let sts = ns.api::<StatefulSet>().get("web").await.unwrap();
    assert_eq!(
        sts.spec.revision_history_limit,
        Some(10),
        "defaulted by the webhook"
    );
    let before = wait_pods(ns, "web", 2, "nginx:alpine").await;
    assert_eq!(names(&before), set(&["web-0", "web-1"]));
    wait_statefulset_status(ns, "web", 2).await;
    let claims = live_claims(ns).await.unwrap();
    assert_eq!(
        claims,
        set(&["data-web-0", "data-web-1"]),
        "a claim per Pod"
    );
    // In-place image update: the same Pods (names and UIDs), new image.
    ns.api::<StatefulSet>()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {
                "containers": [{"name": "main", "image": "nginx:1.27-alpine",
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}}}})),
        )
        .await
        .unwrap();
    let after = wait_pods(ns, "web", 2, "nginx:1.27-alpine").await;
    assert_eq!(before, after, "updated in place: same names and UIDs");
    wait_statefulset_status(ns, "web", 2).await;
    // Scale in: the highest ordinal goes, and with it its claim (handed to the Pod by a
    // patch of its ownerReferences, whenScaled: Delete); the other claim stays.
    ns.api::<StatefulSet>()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scale in");
    let left = wait_pods(ns, "web", 1, "nginx:1.27-alpine").await;
    assert_eq!(names(&left), set(&["web-0"]));
    wait_statefulset_status(ns, "web", 1).await;
    wait_for("the claim of web-1 deleted", MINUTE, || async {
        let claims = live_claims(ns).await?;
        if claims == set(&["data-web-0"]) {
            Ok(())
        } else {
            Err(format!("{claims:?}"))
        }
    })
    .await;
    // Validation by the token-registered webhook, for the v1alpha1 version too.
    let err = ns
        .apply(
            &statefulset_yaml("v1alpha1", "bad", 1, "nginx:alpine").replace(
                "      readinessGates:\n      - conditionType: InPlaceUpdateReady\n",
                "",
            ),
        )
        .await
        .expect_err("InPlaceIfPossible without the InPlaceUpdateReady gate is refused");
    assert!(
        err.contains("readinessGates") && err.contains("InPlaceUpdateReady"),
        "{err}"
    );
    // Events, written on the overlay's grant.
    let (_, events, _) = kubectl_async(
        args(&[
            "get",
            "events.events.k8s.io",
            "-n",
            &ns.name,
            "-o",
            "jsonpath={range .items[*]}{.reportingController} {.reason}{\"\\n\"}{end}",
        ]),
        None,
    )
    .await;
    assert!(
        events.contains("statefulset-controller SuccessfulCreate"),
        "{events}"
    );
    run.finish(statefulset_ctl::CONTROLLER_NAME).await;
}

fn base64_decode(s: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|c| *c != b'=' && !c.is_ascii_whitespace()) {
        let v = ALPHABET.iter().position(|a| *a == c).expect("base64") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

// --- Prometheus ---

/// Debian's prometheus, installed when missing (also by tests/deps.sh).
/// Prometheus 3 with kubernetes_sd (tests/cluster/build-prometheus.sh builds it once,
/// cached; `make test` builds it beside the control plane). Debian's 2.42 lacks
/// kubernetes_sd_configs.
fn prometheus_binary() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cluster/build-prometheus.sh");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    assert!(out.status.success(), "{} failed", script.display());
    let path = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(path.lines().last().expect("the binary's path").trim())
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub(crate) struct Prometheus {
    child: Child,
    addr: SocketAddr,
}

impl Prometheus {
    /// Scrapes `targets` (binary → admin address) every second; each target's series carry
    /// a `binary` label.
    async fn start(dir: &Path, targets: &[(String, SocketAddr)]) -> Self {
        let statics: Vec<Value> = targets
            .iter()
            .map(|(name, addr)| json!({"targets": [addr.to_string()], "labels": {"binary": name}}))
            .collect();
        Self::start_with(
            dir,
            json!([{"job_name": "kruise", "metrics_path": "/metrics", "static_configs": statics}]),
        )
        .await
    }

    /// Runs with these `scrape_configs`, scraping and evaluating every second.
    pub(crate) async fn start_with(dir: &Path, scrape_configs: Value) -> Self {
        let bin = tokio::task::spawn_blocking(prometheus_binary)
            .await
            .unwrap();
        let config = json!({
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "scrape_configs": scrape_configs,
        });
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config.to_string()).unwrap();
        let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let prometheus = Prometheus { child, addr };
        wait_for("prometheus ready", MINUTE, || async {
            match http_get(addr, "/-/ready").await {
                Ok((200, _)) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        prometheus
    }

    /// An instant query: (labels, value) per series.
    pub(crate) async fn query(
        &self,
        promql: &str,
    ) -> Result<Vec<(BTreeMap<String, String>, f64)>, String> {
        let (code, body) = http_get(
            self.addr,
            &format!("/api/v1/query?query={}", url_encode(promql)),
        )
        .await?;
        let json: Value =
            serde_json::from_str(&body).map_err(|e| format!("{code}: {e}: {body}"))?;
        if json["status"] != "success" {
            return Err(body);
        }
        Ok(json["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|r| {
                let labels = r["metric"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect();
                (
                    labels,
                    r["value"][1]
                        .as_str()
                        .unwrap_or("NaN")
                        .parse()
                        .unwrap_or(f64::NAN),
                )
            })
            .collect())
    }

    /// The value of the series of `binary` in a query's result.
    async fn value(&self, promql: &str, binary: &str) -> Result<f64, String> {
        let result = self.query(promql).await?;
        result
            .iter()
            .find(|(l, _)| l.get("binary").map(String::as_str) == Some(binary))
            .map(|(_, v)| *v)
            .ok_or_else(|| format!("no {promql} for {binary}: {result:?}"))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_every_controller() {
    let ns = TestNamespace::new("deploy-prom").await;
    apply_rbac().await;
    let docs = render("overlays/all");
    let scratch = Scratch::new(&ns.name);
    let mut processes = Vec::new();
    let mut grants = Vec::new();
    for bin in controller_binaries() {
        let sa = deployment_of(&docs, &bin)["spec"]["template"]["spec"]["serviceAccountName"]
            .as_str()
            .unwrap()
            .to_string();
        grants.push(ScopedGrant::new(&docs, &sa, &ns.name).await);
        let kubeconfig = token_kubeconfig(&sa, &scratch.0).await;
        // Leader election off: another test may hold the deployed Lease.
        processes.push(
            Process::start(&docs, &bin, &ns.name, &kubeconfig, &scratch.0, Some(false)).await,
        );
    }
    let targets: Vec<(String, SocketAddr)> =
        processes.iter().map(|p| (p.bin.clone(), p.admin)).collect();
    let prometheus = Prometheus::start(&scratch.0, &targets).await;

    // Every controller is up, and exports API request counts.
    for (bin, _) in &targets {
        wait_for(&format!("up == 1 for {bin}"), MINUTE, || async {
            match prometheus.value("up{job=\"kruise\"}", bin).await {
                Ok(1.0) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        wait_for(
            &format!("kruise_api_requests_total of {bin}"),
            MINUTE,
            || async {
                prometheus
                    .value("sum by (binary) (kruise_api_requests_total)", bin)
                    .await
                    .map(|_| ())
            },
        )
        .await;
    }

    // A CloneSet scales: cloneset-ctl's reconcile and API request counts move.
    ns.apply(&cloneset_yaml("scraped", 1, "nginx:alpine"))
        .await
        .unwrap();
    wait_pods(&ns, "scraped", 1, "nginx:alpine").await;
    let reconciles = "sum by (binary) (kruise_reconcile_total{binary=\"cloneset-ctl\"})";
    let requests = "sum by (binary) (kruise_api_requests_total{binary=\"cloneset-ctl\",verb=\"create\",resource=\"pods\"})";
    let read = |q: &'static str| {
        let prometheus = &prometheus;
        async move { prometheus.value(q, "cloneset-ctl").await }
    };
    let (r0, c0) = wait_for(
        "reconcile and pod-create counts of the first Pod",
        MINUTE,
        || async {
            let (r, c) = (read(reconciles).await?, read(requests).await?);
            if c >= 1.0 {
                Ok((r, c))
            } else {
                Err(format!("{c} pod creates"))
            }
        },
    )
    .await;
    scale(&ns, "scraped", 4).await;
    wait_pods(&ns, "scraped", 4, "nginx:alpine").await;
    wait_for(
        "the counters to move with the scale-out",
        MINUTE,
        || async {
            let (r, c) = (read(reconciles).await?, read(requests).await?);
            if r > r0 && c >= c0 + 3.0 {
                Ok(())
            } else {
                Err(format!("reconciles {r0} → {r}, pod creates {c0} → {c}"))
            }
        },
    )
    .await;
    drop(prometheus);
    for p in processes {
        assert!(p.stop().await.success());
    }
    drop(grants);
}

// --- a webhook CA shared by two replicas ---

const DENIAL: &str = "e2e: configmaps labelled deny=true are refused";

fn deny_route(seen: std::sync::Arc<std::sync::atomic::AtomicUsize>) -> Route {
    Route::new(
        "/validate",
        "deny",
        kruise_runtime::webhook::typed(move |req: AdmissionRequest<ConfigMap>| {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move {
                let deny = req
                    .object
                    .as_ref()
                    .and_then(|c| c.metadata.labels.as_ref())
                    .is_some_and(|l| l.get("deny").map(String::as_str) == Some("true"));
                Ok(if deny {
                    AdmissionResponse::from(&req).deny(DENIAL)
                } else {
                    AdmissionResponse::from(&req)
                })
            }
        }),
    )
}

fn deny_configuration(name: &str, ns: &str) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        webhooks: Some(vec![ValidatingWebhook {
            name: "deny.e2e.kruise.io".into(),
            client_config: WebhookClientConfig {
                url: Some("/validate".into()),
                ..Default::default()
            },
            rules: Some(vec![
                k8s_openapi::api::admissionregistration::v1::RuleWithOperations {
                    api_groups: Some(vec!["".into()]),
                    api_versions: Some(vec!["v1".into()]),
                    operations: Some(vec!["CREATE".into()]),
                    resources: Some(vec!["configmaps".into()]),
                    scope: Some("Namespaced".into()),
                },
            ]),
            failure_policy: Some("Fail".into()),
            namespace_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    "kubernetes.io/metadata.name".to_string(),
                    ns.to_string(),
                )])),
                ..Default::default()
            }),
            timeout_seconds: Some(5),
            ..Default::default()
        }]),
    }
}

/// One replica: the Secret in the test's namespace, rotations every ~10s.
async fn replica(name: &'static str, ns: &str, secret: &str) -> Runtime {
    let settings = Settings {
        admin_addr: ([127, 0, 0, 1], 0).into(),
        webhook_addr: ([127, 0, 0, 1], 0).into(),
        webhook_url: Some("https://127.0.0.1:0".into()),
        webhook_ca_secret: Some(secret.into()),
        namespace: ns.into(),
        leader_elect: false,
        ..Default::default()
    };
    Runtime::new(name, settings, kube_config().await)
        .await
        .expect("runtime")
}

/// Creating a `deny=true` ConfigMap is refused with our message, through whichever
/// replica the configuration points at.
async fn denied(cms: &Api<ConfigMap>) -> Result<(), String> {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("probe".into()),
            labels: Some(BTreeMap::from([("deny".to_string(), "true".to_string())])),
            ..Default::default()
        },
        ..Default::default()
    };
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match cms.create(&dry_run, &cm).await {
        Err(kube::Error::Api(e)) if e.message.contains(DENIAL) => Ok(()),
        Err(e) => Err(e.to_string()),
        Ok(_) => Err("admitted".into()),
    }
}

/// Waits until a denial is served by the replica counting in `seen` (the apiserver sees
/// a re-registered URL through a watch, a moment after the apply).
async fn served_by(seen: &std::sync::atomic::AtomicUsize, cms: &Api<ConfigMap>) {
    let before = seen.load(std::sync::atomic::Ordering::SeqCst);
    wait_for(
        "a denial served by the registered replica",
        MINUTE,
        || async {
            denied(cms).await?;
            if seen.load(std::sync::atomic::Ordering::SeqCst) > before {
                Ok(())
            } else {
                Err("denied by the other replica".to_string())
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_replicas_share_one_ca_through_the_secret() {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    let ns = TestNamespace::new("deploy-ca").await;
    let name = format!("e2e-ca-{}", ns.name);
    let secret_name = "webhook-ca";
    let options = || Options {
        rotation: Rotation {
            ca_validity: Duration::from_secs(40),
            serving_validity: Duration::from_secs(3600),
            rotate_at: 0.5,
            check_interval: Duration::from_millis(250),
            backdate: Duration::ZERO,
            propagation: Duration::from_secs(1),
        },
        ..Options::default()
    };
    let (seen_a, seen_b) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (a, b) = tokio::join!(
        replica(name.clone().leak(), &ns.name, secret_name),
        replica(name.clone().leak(), &ns.name, secret_name)
    );
    // Both start at once: both find no Secret, one creates it, the other loads it.
    let (server_a, server_b) = tokio::join!(
        WebhookServer::start_with(&a, vec![deny_route(seen_a.clone())], options()),
        WebhookServer::start_with(&b, vec![deny_route(seen_b.clone())], options()),
    );
    let (server_a, server_b) = (server_a.expect("replica a"), server_b.expect("replica b"));
    let ca = server_a.ca_pem().unwrap();
    assert_eq!(server_b.ca_pem().unwrap(), ca, "one CA");
    let secrets: Api<Secret> = ns.api();
    let stored = secrets
        .get(secret_name)
        .await
        .expect("the Secret was created");
    assert_eq!(stored.data.unwrap()["ca.crt"].0, ca.as_bytes());

    struct Cleanup(String);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = kubectl(
                &[
                    "delete",
                    "validatingwebhookconfiguration",
                    &self.0,
                    "--ignore-not-found",
                ],
                None,
            );
        }
    }
    let _cleanup = Cleanup(name.clone());
    let configuration = deny_configuration(&name, &ns.name);
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(ns.client.clone());
    let live_bundle = || async {
        let live = validating.get(&name).await.map_err(|e| e.to_string())?;
        let cc = live.webhooks.unwrap()[0].client_config.clone();
        Ok::<_, String>((
            String::from_utf8(cc.ca_bundle.unwrap().0).unwrap(),
            cc.url.unwrap_or_default(),
        ))
    };
    let cms: Api<ConfigMap> = ns.api();
    // Each replica registers the configuration (as every replica of a Deployment does),
    // and the apiserver calls the one registered last: both serve, under one caBundle.
    for (server, seen) in [
        (&server_a, &seen_a),
        (&server_b, &seen_b),
        (&server_a, &seen_a),
    ] {
        server
            .register(vec![configuration.clone()], vec![])
            .await
            .expect("register");
        let (bundle, url) = live_bundle().await.unwrap();
        assert_eq!(bundle, ca, "the caBundle stays the one CA");
        assert!(url.starts_with(&server.url().unwrap()), "{url}");
        served_by(seen, &cms).await;
    }

    // A CA rotation (due 20s after the start): one replica writes it, the other loads
    // it, and they end serving one bundle of both CAs, applied, with admission working.
    let rotated = wait_for("both replicas on the rotated CA", MINUTE, || async {
        let (pa, pb) = (server_a.ca_pem().unwrap(), server_b.ca_pem().unwrap());
        if pa != ca && pa == pb && pa.ends_with(&ca) && pa.matches("BEGIN CERTIFICATE").count() == 2
        {
            Ok(pa)
        } else {
            Err(format!(
                "a: {} CAs, b: {} CAs",
                pa.matches("BEGIN").count(),
                pb.matches("BEGIN").count()
            ))
        }
    })
    .await;
    wait_for(
        "the rotated bundle applied, and both serving the new CA's certificate",
        MINUTE,
        || async {
            let (bundle, _) = live_bundle().await?;
            if bundle != rotated {
                return Err("live caBundle not yet the rotated one".into());
            }
            if server_a.serving_cert_der() != server_b.serving_cert_der() {
                return Err("replicas serve different certificates".into());
            }
            let stored = secrets.get(secret_name).await.map_err(|e| e.to_string())?;
            let state: Value =
                serde_json::from_slice(&stored.data.unwrap()["state.json"].0).unwrap();
            if state["serving"]["caGeneration"] != 2 {
                return Err(format!(
                    "serving certificate of CA generation {}",
                    state["serving"]["caGeneration"]
                ));
            }
            Ok(())
        },
    )
    .await;
    wait_for("denial after the rotation", MINUTE, || denied(&cms)).await;
    server_b
        .register(vec![configuration.clone()], vec![])
        .await
        .expect("register b");
    assert_eq!(live_bundle().await.unwrap().0, server_b.ca_pem().unwrap());
    served_by(&seen_b, &cms).await;
    a.shutdown.cancel();
    b.shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_ctl_runs_on_its_overlay_rbac_alone() {
    use kruise_api::apps_v1alpha1::DaemonSet;
    let run = OnItsRbac::start("daemonset-ctl", "deploy-ds").await;
    let ns = &run.ns;
    // A Pod per kwok node (the Nodes read on its ClusterRole), the DaemonSet defaulted
    // by the mutating webhook, then an in-place image update.
    let manifest = |image: &str| {
        format!(
            r#"apiVersion: apps.kruise.io/v1alpha1
kind: DaemonSet
metadata:
  name: ds
spec:
  selector:
    matchLabels: {{app: ds}}
  updateStrategy:
    rollingUpdate:
      rollingUpdateType: InPlaceIfPossible
      maxUnavailable: 4
  template:
    metadata:
      labels: {{app: ds}}
    spec:
      nodeSelector:
        type: kwok
      containers:
      - name: nginx
        image: {image}
"#
        )
    };
    ns.apply(&manifest("nginx:1.7.9"))
        .await
        .expect("create DaemonSet");
    let api = ns.api::<DaemonSet>();
    assert!(
        api.get("ds").await.unwrap().spec.burst_replicas.is_some(),
        "defaulted by the webhook"
    );
    let settled = |image: &'static str| {
        let api = api.clone();
        async move {
            wait_for("the DaemonSet to settle", MINUTE, || async {
                let ds = api.get("ds").await.map_err(|e| e.to_string())?;
                let s = ds.status.unwrap_or_default();
                let pods = kruise_e2e::pods_with(ns, "app=ds").await;
                let at_image = pods
                    .iter()
                    .filter(|p| {
                        p.status
                            .as_ref()
                            .and_then(|s| s.container_statuses.as_ref())
                            .is_some_and(|c| c[0].image == image)
                    })
                    .count() as i32;
                if s.desired_number_scheduled >= 4
                    && s.number_ready == s.desired_number_scheduled
                    && s.updated_number_scheduled == s.desired_number_scheduled
                    && at_image == s.desired_number_scheduled
                {
                    Ok(pods.iter().map(|p| p.uid()).collect::<BTreeSet<_>>())
                } else {
                    Err(format!("{s:?}, {at_image} Pods at {image}"))
                }
            })
            .await
        }
    };
    let before = settled("nginx:1.7.9").await;
    ns.apply(&manifest("nginx:1.9.1")).await.expect("update");
    let after = settled("nginx:1.9.1").await;
    assert_eq!(before, after, "updated in place");
    let err = ns
        .apply(&manifest("nginx:1.9.1").replace(
            "spec:\n  selector",
            "spec:\n  minReadySeconds: -1\n  selector",
        ))
        .await
        .expect_err("a negative minReadySeconds is refused");
    assert!(
        err.contains("spec.minReadySeconds: Invalid value: -1"),
        "{err}"
    );
    let (_, events, _) = kubectl_async(
        args(&[
            "get",
            "events.events.k8s.io",
            "-n",
            &ns.name,
            "-o",
            "jsonpath={range .items[*]}{.reportingController} {.reason}{\"\\n\"}{end}",
        ]),
        None,
    )
    .await;
    assert!(
        events.contains("daemonset-controller SuccessfulCreate")
            && events.contains("daemonset-controller SuccessfulUpdatePodInPlace"),
        "{events}"
    );
    run.finish(daemonset_ctl::CONTROLLER_NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcastjob_ctl_runs_on_its_overlay_rbac_alone() {
    use kruise_api::apps_v1alpha1::{BroadcastJob, BroadcastJobPhase};
    let run = OnItsRbac::start("broadcastjob-ctl", "deploy-bcj").await;
    let ns = &run.ns;
    // A Pod per kwok node, the job defaulted by the mutating webhook, completed and then
    // deleted by its TTL.
    ns.apply(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: BroadcastJob
metadata:
  name: bcj
spec:
  completionPolicy:
    type: Always
    ttlSecondsAfterFinished: 2
  template:
    spec:
      restartPolicy: Never
      nodeSelector:
        type: kwok
      containers:
      - name: counter
        image: busybox
"#,
    )
    .await
    .expect("create BroadcastJob");
    let api = ns.api::<BroadcastJob>();
    let job = api.get("bcj").await.unwrap();
    assert!(job.spec.parallelism.is_some(), "defaulted by the webhook");
    wait_for("the job to complete", MINUTE, || async {
        let j = api.get("bcj").await.map_err(|e| e.to_string())?;
        let s = j.status.unwrap_or_default();
        if s.phase == Some(BroadcastJobPhase::Completed)
            && s.desired > 0
            && s.succeeded == s.desired
        {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
    wait_for("the TTL to delete it", MINUTE, || async {
        match api.get_opt("bcj").await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".to_string()),
        }
    })
    .await;
    let err = ns
        .apply(
            r#"apiVersion: apps.kruise.io/v1alpha1
kind: BroadcastJob
metadata:
  name: bad
spec:
  template:
    spec:
      restartPolicy: Always
      containers:
      - name: counter
        image: busybox
"#,
        )
        .await
        .expect_err("restartPolicy Always is refused");
    assert!(
        err.contains("pod restartPolicy can only be Never or OnFailure"),
        "{err}"
    );
    let (_, events, _) = kubectl_async(
        args(&[
            "get",
            "events.events.k8s.io",
            "-n",
            &ns.name,
            "-o",
            "jsonpath={range .items[*]}{.reportingController} {.reason}{\"\\n\"}{end}",
        ]),
        None,
    )
    .await;
    assert!(
        events.contains("broadcastjob-controller SuccessfulCreate")
            && events.contains("broadcastjob-controller JobComplete"),
        "{events}"
    );
    run.finish(broadcastjob_ctl::CONTROLLER_NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjob_ctl_runs_on_its_overlay_rbac_alone() {
    use kruise_api::apps_v1alpha1::{AdvancedCronJob, BroadcastJob};
    let run = OnItsRbac::start("cronjob-ctl", "deploy-acj").await;
    let ns = &run.ns;
    // Replace: each tick deletes the active child and creates the next.
    ns.apply(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: AdvancedCronJob
metadata:
  name: acj
spec:
  schedule: "@every 5s"
  concurrencyPolicy: Replace
  template:
    broadcastJobTemplate:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: counter
              image: busybox
"#,
    )
    .await
    .expect("create AdvancedCronJob");
    let acj = ns.api::<AdvancedCronJob>().get("acj").await.unwrap();
    assert_eq!(
        acj.spec.successful_jobs_history_limit,
        Some(3),
        "defaulted by the webhook"
    );
    let bcj = ns.api::<BroadcastJob>();
    let first = wait_for("a first child", MINUTE, || async {
        let list = bcj
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        list.items
            .first()
            .map(|j| j.name_any())
            .ok_or_else(|| "none".to_string())
    })
    .await;
    wait_for("the first child replaced", MINUTE, || async {
        let list = bcj
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let names: Vec<String> = list
            .items
            .iter()
            .filter(|j| j.metadata.deletion_timestamp.is_none())
            .map(|j| j.name_any())
            .collect();
        if !names.is_empty() && !names.contains(&first) {
            Ok(())
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await;
    let err = ns
        .apply(
            r#"apiVersion: apps.kruise.io/v1alpha1
kind: AdvancedCronJob
metadata:
  name: bad
spec:
  schedule: "* * * *"
  template:
    broadcastJobTemplate:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: counter
              image: busybox
"#,
        )
        .await
        .expect_err("a 4-field schedule is refused");
    assert!(err.contains("expected exactly 5 fields"), "{err}");
    run.finish(cronjob_ctl::CONTROLLER_NAME).await;
}

/// protection-ctl on its overlay's RBAC alone (gate on, as overlays/protection ships it),
/// scoped to a namespace: it registers its webhook with the token, and its counts (the
/// namespace's Pods, a CRD's custom resources) work with only `list`; a CRD outside
/// OpenKruise's groups only once a ClusterRole aggregated into its custom-resources role
/// grants it (before, its delete is refused, naming the missing grant).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protection_ctl_runs_on_its_overlay_rbac_alone() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DeleteParams, DynamicObject};
    let bin = "protection-ctl";
    let ns = TestNamespace::new("deploy-prot").await;
    apply_rbac().await;
    let docs = render("overlays/protection");
    let deployment = deployment_of(&docs, bin);
    let sa = deployment["spec"]["template"]["spec"]["serviceAccountName"]
        .as_str()
        .unwrap();
    assert_eq!(
        env_value(
            &deployment["spec"]["template"]["spec"]["containers"][0],
            "KRUISE_FEATURE_GATES"
        ),
        Some("ResourcesDeletionProtection=true,DeletionProtectionForCRDCascadingGate=true")
    );
    let scratch = Scratch::new(&ns.name);
    let grant = ScopedGrant::new(&docs, sa, &ns.name).await;
    let kubeconfig = token_kubeconfig(sa, &scratch.0).await;
    let ctl = Process::start(&docs, bin, &ns.name, &kubeconfig, &scratch.0, None).await;

    // A running Pod; the namespace labelled Cascading: `kubectl delete ns` is refused
    // (once the apiserver calls the webhook).
    ns.apply(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: nginx:alpine\n",
    )
    .await
    .unwrap();
    wait_for("the Pod running", MINUTE, || async {
        let pod = ns.api::<Pod>().get("p").await.map_err(|e| e.to_string())?;
        match pod.status.and_then(|s| s.phase).as_deref() {
            Some("Running") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let label = |object: Vec<String>, value: &str| {
        let mut a = vec!["label".to_string(), "--overwrite".to_string()];
        a.extend(object);
        a.push(format!("policy.kruise.io/delete-protection{value}"));
        async move {
            let (ok, _, err) = kubectl_async(a, None).await;
            assert!(ok, "{err}");
        }
    };
    label(args(&["namespace", &ns.name]), "=Cascading").await;
    let refused = "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and active pods 1>0";
    wait_for("the namespace delete refused", MINUTE, || async {
        let (ok, _, err) = kubectl_async(
            args(&["delete", "namespace", &ns.name, "--dry-run=server"]),
            None,
        )
        .await;
        if !ok && err.contains(refused) {
            Ok(())
        } else {
            Err(format!("{ok} {err}"))
        }
    })
    .await;

    // A CRD of the instance's scope, labelled Cascading, with one CR.
    let group = format!("{}.e2e.kruise.io", ns.name);
    let name = format!("protwidgets.{group}");
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": name, "labels": {
            "policy.kruise.io/delete-protection": "Cascading",
            kruise_api::keys::WEBHOOK_SCOPE: ns.name,
        }},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "protwidgets", "kind": "ProtWidget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    }))
    .unwrap();
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let resource = ApiResource {
        group: group.clone(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "ProtWidget".into(),
        plural: "protwidgets".into(),
    };
    let widgets: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let widget: DynamicObject = serde_json::from_value(
        json!({"apiVersion": format!("{group}/v1"), "kind": "ProtWidget", "metadata": {"name": "w"}}),
    )
    .unwrap();
    wait_for("the CRD served", MINUTE, || async {
        widgets
            .create(&PostParams::default(), &widget)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    // Its ClusterRole lists OpenKruise's kinds only: the CRs of this group cannot be
    // counted, so the delete is refused (fail closed), naming the grant that is missing.
    let dry_run = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    match crds.delete(&name, &dry_run).await {
        Err(kube::Error::Api(e)) => {
            assert!(
                e.message.contains("protection-ctl may not list them")
                    && e.message
                        .contains("policy.kruise.io/aggregate-to-deletion-protection=true"),
                "{e:?}"
            );
        }
        other => panic!("the CRD delete must be refused: {other:?}"),
    }
    // The user grants it, in a ClusterRole aggregated into the shipped one: the count
    // works (once the controller-manager has aggregated it).
    let crs_grant = AggregatedGrant::new(&name, &group, "protwidgets").await;
    wait_for("the CRs counted", MINUTE, || async {
        match crds.delete(&name, &DeleteParams::default()).await {
            Err(kube::Error::Api(e)) if e.code == 403 && e.message.contains("active CRs 1>0") => {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    widgets.delete("w", &DeleteParams::default()).await.unwrap();
    wait_for("the CR gone", MINUTE, || async {
        match widgets.get_opt("w").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    crds.delete(&name, &DeleteParams::default())
        .await
        .expect("without CRs the CRD may go");
    label(args(&["namespace", &ns.name]), "-").await;
    drop(crs_grant);

    // Nothing it asked for was refused; SIGTERM stops it cleanly.
    let metrics = ctl.metrics().await;
    // (but the custom resources before they were granted).
    let forbidden: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("kruise_api_requests_total") && l.contains("code=\"403\""))
        .filter(|l| !l.contains("resource=\"protwidgets\""))
        .collect();
    assert!(forbidden.is_empty(), "forbidden requests: {forbidden:?}");
    assert!(ctl.stop().await.success(), "clean exit on SIGTERM");
    drop(grant);
}

/// A ClusterRole labelled policy.kruise.io/aggregate-to-deletion-protection=true granting
/// `list` on one kind of custom resources: what a user adds to protect a CRD of their own
/// (docs/deletion-protection.md). Deleted on drop.
struct AggregatedGrant(String);

impl AggregatedGrant {
    async fn new(name: &str, group: &str, plural: &str) -> Self {
        let name = format!("e2e-protect-{name}");
        let role = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": {protection_ctl::AGGREGATE_LABEL: "true"}},
            "rules": [{"apiGroups": [group], "resources": [plural], "verbs": ["list"]}],
        });
        let (ok, _, err) = kubectl_async(args(&["apply", "-f", "-"]), Some(role.to_string())).await;
        assert!(ok, "{err}");
        AggregatedGrant(name)
    }
}

impl Drop for AggregatedGrant {
    fn drop(&mut self) {
        let _ = kubectl(
            &[
                "delete",
                "clusterrole",
                &self.0,
                "--ignore-not-found",
                "--wait=false",
            ],
            None,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistentpodstate_ctl_runs_on_its_overlay_rbac_alone() {
    use k8s_openapi::api::core::v1::Pod;
    use kruise_api::apps_v1alpha1::PersistentPodState;
    let run = OnItsRbac::start("persistentpodstate-ctl", "deploy-pps").await;
    let ns = &run.ns;
    // An apps/v1 StatefulSet (run by the kube-controller-manager) asking for a PPS: it is
    // generated, records web-0, and a re-created web-0 gets the recorded zone.
    ns.apply(
        r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
  annotations:
    kruise.io/auto-generate-persistent-pod-state: "true"
    kruise.io/required-persistent-topology: topology.kubernetes.io/zone
spec:
  serviceName: web
  replicas: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - name: web
        image: nginx:alpine
"#,
    )
    .await
    .expect("create StatefulSet");
    let api = ns.api::<PersistentPodState>();
    let zone = wait_for("web-0 recorded in the generated PPS", MINUTE, || async {
        let pps = api
            .get_opt("web")
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no PPS yet")?;
        pps.status
            .and_then(|s| s.pod_states.get("web-0").cloned())
            .and_then(|s| {
                s.node_topology_labels
                    .get("topology.kubernetes.io/zone")
                    .cloned()
            })
            .ok_or_else(|| "no state yet".to_string())
    })
    .await;
    // The injection webhook reads the PPS from the controller's cache, which shows the
    // state the controller just wrote a moment after the API does (as upstream's informer
    // does): a Pod created within that moment is admitted without it (failurePolicy
    // Ignore). Seen once on a machine at load 12; a user deletes a Pod later than that.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pods = ns.api::<Pod>();
    let old = pods.get("web-0").await.unwrap().metadata.uid;
    pods.delete("web-0", &Default::default()).await.unwrap();
    let pod = wait_for("web-0 re-created", MINUTE, || async {
        match pods.get_opt("web-0").await.map_err(|e| e.to_string())? {
            Some(p) if p.metadata.uid != old => Ok(p),
            _ => Err("not yet".to_string()),
        }
    })
    .await;
    assert_eq!(
        pod.spec.unwrap().node_selector.unwrap_or_default()["topology.kubernetes.io/zone"],
        zone
    );
    assert_eq!(
        pod.metadata.annotations.unwrap_or_default()["kruise.io/injected-persistent-pod-state"],
        "web"
    );
    // Validation is served with the token's grants too.
    let err = ns
        .apply(
            r#"apiVersion: apps.kruise.io/v1alpha1
kind: PersistentPodState
metadata:
  name: other
spec:
  targetRef:
    apiVersion: apps/v1
    kind: StatefulSet
    name: web
  requiredPersistentTopology:
    nodeTopologyKeys: [kubernetes.io/hostname]
"#,
        )
        .await
        .expect_err("a second PPS on web is refused");
    assert!(
        err.contains("targetReference is in conflict with other PersistentPodState web"),
        "{err}"
    );
    run.finish(persistentpodstate_ctl::CONTROLLER_NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launchpriority_ctl_runs_on_its_overlay_rbac_alone() {
    let run = OnItsRbac::start("launchpriority-ctl", "deploy-launch").await;
    let ns = &run.ns;
    // An Ordered Pod on the kwok nodes: barriers injected by the webhook, the ConfigMap
    // created and every key released by the controller, the Pod completed, all on the
    // token's grants.
    ns.apply(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: ordered
  annotations:
    apps.kruise.io/container-launch-priority: Ordered
spec:
  containers:
  - name: sidecar
    image: busybox
  - name: main
    image: busybox
"#,
    )
    .await
    .expect("create Pod");
    let pods = ns.api::<Pod>();
    let pod = wait_for("ordered launch completed", MINUTE, || async {
        let p = pods.get("ordered").await.map_err(|e| e.to_string())?;
        let done = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("apps.kruise.io/container-launch-priority-completed"))
            .is_some_and(|v| v == "true");
        if done {
            Ok(p)
        } else {
            Err(format!("{:?}", p.metadata.annotations))
        }
    })
    .await;
    assert!(
        serde_json::to_string(&pod.spec)
            .unwrap()
            .contains("ordered-barrier"),
        "barrier env injected"
    );
    let cm = ns.api::<ConfigMap>().get("ordered-barrier").await.unwrap();
    let keys: Vec<String> = cm.data.unwrap_or_default().into_keys().collect();
    assert_eq!(keys, ["p_-1", "p_0"]);
    run.finish(launchpriority_ctl::CONTROLLER_NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pub_ctl_runs_on_its_overlay_rbac_alone() {
    use k8s_openapi::api::apps::v1::Deployment;
    use kruise_api::policy_v1alpha1::PodUnavailableBudget;
    let run = OnItsRbac::start("pub-ctl", "deploy-pub").await;
    let ns = &run.ns;
    ns.apply(
        r#"apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata:
  name: web-pub
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  maxUnavailable: 0
"#,
    )
    .await
    .expect("create PUB");
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "main", "image": "nginx:alpine"}]}}}}))
    .unwrap();
    ns.api::<Deployment>()
        .create(&PostParams::default(), &deployment)
        .await
        .expect("deployment");
    let pubs = ns.api::<PodUnavailableBudget>();
    wait_for("the PUB's status", MINUTE, || async {
        let s = pubs
            .get("web-pub")
            .await
            .map_err(|e| e.to_string())?
            .status
            .unwrap_or_default();
        if (s.total_replicas, s.desired_available, s.current_available) == (2, 2, 2) {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await;
    let pods: Api<Pod> = ns.api();
    let listed = pods.list(&ListParams::default()).await.unwrap().items;
    assert!(listed.iter().all(|p| {
        p.annotations()
            .get(kruise_api::keys::PUB_RELATED)
            .is_some_and(|v| v == "web-pub")
    }));
    let err = pods
        .evict(&listed[0].name_any(), &Default::default())
        .await
        .expect_err("no budget");
    assert!(
        err.to_string()
            .contains("\"web-pub\" is forbidden: pub unavailable allowed is negative"),
        "{err}"
    );
    run.finish(pub_ctl::CONTROLLER_NAME).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uniteddeployment_ctl_runs_on_its_overlay_rbac_alone() {
    use k8s_openapi::api::apps::v1::Deployment;
    use kruise_api::apps_v1alpha1::UnitedDeployment;
    let run = OnItsRbac::start("uniteddeployment-ctl", "deploy-ud").await;
    let ns = &run.ns;
    ns.apply(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: UnitedDeployment
metadata:
  name: ud
spec:
  replicas: 3
  selector:
    matchLabels:
      app: ud
  template:
    deploymentTemplate:
      metadata:
        labels:
          app: ud
      spec:
        template:
          metadata:
            labels:
              app: ud
          spec:
            containers:
            - name: main
              image: busybox
  topology:
    subsets:
    - name: zone-a
    - name: zone-b
"#,
    )
    .await
    .expect("create UnitedDeployment");
    let ud = ns.api::<UnitedDeployment>().get("ud").await.unwrap();
    assert_eq!(
        ud.spec.revision_history_limit,
        Some(10),
        "defaulted by the webhook"
    );
    let deployments = ns.api::<Deployment>();
    wait_for("a Deployment per subset (1 + 2)", MINUTE, || async {
        let list = deployments
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let mut replicas: Vec<i32> = list
            .items
            .iter()
            .map(|d| d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(-1))
            .collect();
        replicas.sort();
        if replicas == [1, 2] {
            Ok(())
        } else {
            Err(format!("{replicas:?}"))
        }
    })
    .await;
    run.finish(uniteddeployment_ctl::CONTROLLER_NAME).await;
}

/// crr-ctl on nothing but its ServiceAccount's token: it stamps a request from its Pod
/// (reading the Pod), holds a gated Pod NotReady (finalizer, `pods/status`, annotation)
/// once the request is Recreating, releases it when the request completes, drops the
/// active label and deletes the request after its TTL. The test plays the node agent
/// (status writes), as the kwok node has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crr_ctl_runs_on_its_overlay_rbac_alone() {
    use kruise_api::apps_v1alpha1::ContainerRecreateRequest;
    use kruise_api::keys;
    let run = OnItsRbac::start("crr-ctl", "deploy-crr").await;
    let ns = &run.ns;
    ns.apply(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: pod-name
spec:
  nodeSelector:
    type: kwok
  tolerations:
  - operator: Exists
  readinessGates:
  - conditionType: KruisePodReady
  containers:
  - name: app
    image: busybox
"#,
    )
    .await
    .expect("create Pod");
    let pods = ns.api::<Pod>();
    let pod = wait_for("the Pod running", MINUTE, || async {
        let p = pods.get("pod-name").await.map_err(|e| e.to_string())?;
        match p.status.as_ref().and_then(|s| s.container_statuses.clone()) {
            Some(c) if !c.is_empty() => Ok(p),
            _ => Err(format!("{:?}", p.status)),
        }
    })
    .await;
    // A container ID, as a runtime reports it (kwok reports none).
    let mut statuses = pod.status.unwrap().container_statuses.unwrap();
    statuses[0].container_id = Some("containerd://deploy-crr".into());
    pods.patch_status(
        "pod-name",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"containerStatuses": statuses}})),
    )
    .await
    .unwrap();
    ns.apply(
        r#"apiVersion: apps.kruise.io/v1alpha1
kind: ContainerRecreateRequest
metadata:
  name: xxx
spec:
  podName: pod-name
  containers:
  - name: app
  strategy:
    unreadyGracePeriodSeconds: 3
  ttlSecondsAfterFinished: 2
"#,
    )
    .await
    .expect("create ContainerRecreateRequest");
    let crrs = ns.api::<ContainerRecreateRequest>();
    let crr = crrs.get("xxx").await.unwrap();
    assert_eq!(
        crr.spec.containers[0]
            .status_context
            .as_ref()
            .unwrap()
            .container_id,
        "containerd://deploy-crr"
    );
    // As the agent: Recreating.
    crrs.patch_status(
        "xxx",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Recreating"}})),
    )
    .await
    .unwrap();
    wait_for("the Pod held NotReady", MINUTE, || async {
        let c = crrs.get("xxx").await.map_err(|e| e.to_string())?;
        let p = pods.get("pod-name").await.map_err(|e| e.to_string())?;
        let held = p
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == keys::KRUISE_POD_READY && c.status == "False");
        let acquired = c.annotations().contains_key(keys::CRR_UNREADY_ACQUIRED)
            && c.finalizers()
                .contains(&keys::CRR_UNREADY_ACQUIRED.to_string());
        if held && acquired {
            Ok(())
        } else {
            Err(format!("{:?}", c.metadata))
        }
    })
    .await;
    // As the agent: Completed.
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    crrs.patch_status(
        "xxx",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Completed", "completionTime": now}})),
    )
    .await
    .unwrap();
    wait_for("released and deleted after its TTL", MINUTE, || async {
        let p = pods.get("pod-name").await.map_err(|e| e.to_string())?;
        let released = p
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == keys::KRUISE_POD_READY && c.status == "True");
        match crrs.get_opt("xxx").await.map_err(|e| e.to_string())? {
            None if released => Ok(()),
            other => Err(format!(
                "released {released}: {:?}",
                other.map(|c| c.metadata)
            )),
        }
    })
    .await;
    run.finish(crr_ctl::CONTROLLER_NAME).await;
}
