//! The chart against kustomize (no cluster): with default values it renders the objects of
//! kustomize/overlays/all, and with only controller X enabled those of overlays/X, Helm's
//! own labels and annotations aside. A Deployment, Role or webhook changed in kustomize and
//! not in the chart (or the other way round) fails here, naming the field.

// A test file: its helpers fail the test on a missing checkout file, as the tests do.
#![allow(clippy::expect_used)]

use std::collections::BTreeSet;
use std::fs;

use kruise_helm_tests::{
    crd_names, crds_used_by_cluster_roles, differences, helm_template, kustomize, kustomize_with,
    root,
};
use serde_json::Value;

/// Components an overlay may use, and the chart values that do the same.
const COMPONENTS: &[(&str, &str)] = &[
    (
        "../../controllers/protection/enabled",
        "featureGates=ResourcesDeletionProtection=true\\,DeletionProtectionForCRDCascadingGate=true",
    ),
    (
        "../../controllers/cloneset/predownload",
        "featureGates=PreDownloadImageForInPlaceUpdate=true",
    ),
    (
        "../../controllers/statefulset/predownload",
        "featureGates=PreDownloadImageForInPlaceUpdate=true",
    ),
    (
        "../../components/daemon-agent-cluster-reads",
        "daemon.clusterReads=true",
    ),
    (
        "../../components/servicemonitor",
        "serviceMonitor.enabled=true",
    ),
];

/// The chart's controller keys (kustomize/controllers/<key>, except the node agent).
fn controllers() -> Vec<String> {
    let mut keys: Vec<String> = fs::read_dir(root().join("kustomize/controllers"))
        .expect("kustomize/controllers")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|k| k != "daemon-agent")
        .collect();
    keys.sort();
    keys
}

/// The chart values that render what overlay `name` does: its controllers enabled, the
/// others not, the node agent only when it lists it, its components as values.
fn values_of_overlay(name: &str) -> Vec<String> {
    let text = fs::read_to_string(
        root()
            .join("kustomize/overlays")
            .join(name)
            .join("kustomization.yaml"),
    )
    .expect("overlay kustomization");
    let k: Value = serde_saphyr::from_str(&text).expect("overlay kustomization parses");
    let list = |field: &str| -> Vec<String> {
        k.get(field)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let resources = list("resources");
    let mut values = Vec::new();
    for key in controllers() {
        let on = resources.contains(&format!("../../controllers/{key}"));
        values.push(format!("{key}.enabled={on}"));
    }
    let agent = resources.contains(&"../../controllers/daemon-agent".to_string());
    values.push(format!("daemon.enabled={agent}"));
    let mut gates = Vec::new();
    for component in list("components") {
        let Some((_, value)) = COMPONENTS.iter().find(|(c, _)| *c == component) else {
            panic!(
                "overlay {name} uses component {component}: add the chart values doing the same to \
                 COMPONENTS in tests/helm/tests/drift.rs (and to the chart if it has none)"
            );
        };
        match value.strip_prefix("featureGates=") {
            Some(g) => gates.push(g.to_string()),
            None => values.push(value.to_string()),
        }
    }
    if !gates.is_empty() {
        // --set treats a comma as a separator: escaped.
        values.push(format!("featureGates={}", gates.join("\\,")));
    }
    values
}

fn overlays() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(root().join("kustomize/overlays"))
        .expect("kustomize/overlays")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn report(what: &str, diffs: &[String]) -> String {
    format!(
        "{what}: {} difference(s) (change the chart, deploy/helm/kruise-rs, with kustomize):\n  {}",
        diffs.len(),
        diffs.join("\n  ")
    )
}

#[test]
fn default_values_render_overlays_all() {
    let k = kustomize("all").expect("kustomize build overlays/all");
    let c = helm_template(&[]).expect("helm template");
    assert!(k.len() > 100, "overlays/all renders {} objects", k.len());
    let diffs = differences(k, c);
    assert!(
        diffs.is_empty(),
        "{}",
        report("default values vs overlays/all", &diffs)
    );
}

#[test]
fn each_overlay_is_the_chart_with_its_controllers_enabled() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for overlay in overlays().into_iter().filter(|o| o != "all") {
        let mut values = values_of_overlay(&overlay);
        // Every overlay carries every CRD (kustomize/base); the chart only its own unless
        // asked (checked on its own below).
        values.push("crds.installAll=true".into());
        let set: Vec<&str> = values.iter().map(String::as_str).collect();
        let k = kustomize(&overlay).expect("kustomize build");
        let c = helm_template(&set).expect("helm template");
        let diffs = differences(k, c);
        if !diffs.is_empty() {
            failures.push(report(
                &format!("overlays/{overlay} vs --set {}", values.join(" --set ")),
                &diffs,
            ));
        }
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} overlays");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn crds_are_those_the_enabled_controllers_use() {
    let mut failures = Vec::new();
    for overlay in overlays() {
        let values = values_of_overlay(&overlay);
        let set: Vec<&str> = values.iter().map(String::as_str).collect();
        let k = kustomize(&overlay).expect("kustomize build");
        let c = helm_template(&set).expect("helm template");
        let used = crds_used_by_cluster_roles(&k);
        let installed = crd_names(&c);
        if used != installed {
            failures.push(format!(
                "overlays/{overlay}: its ClusterRoles use {used:?}, the chart installs {installed:?} \
                 (kruise-rs.catalog's crds in templates/_helpers.tpl)"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn crds_are_kept_on_uninstall_and_left_out_when_not_managed() {
    let c = helm_template(&["crds.installAll=true"]).expect("helm template");
    let crds: Vec<&Value> = c
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .collect();
    let files = fs::read_dir(root().join("deploy/crds"))
        .expect("deploy/crds")
        .count();
    assert_eq!(crds.len(), files, "every CRD of deploy/crds");
    for crd in crds {
        assert_eq!(
            crd.pointer("/metadata/annotations/helm.sh~1resource-policy"),
            Some(&Value::from("keep")),
            "{}",
            crd["metadata"]["name"]
        );
    }
    let none =
        helm_template(&["crds.managed=false", "crds.installAll=true"]).expect("helm template");
    assert!(crd_names(&none).is_empty());
}

fn deployments(objs: &[Value]) -> Vec<&Value> {
    objs.iter()
        .filter(|o| o["kind"] == "Deployment" || o["kind"] == "DaemonSet")
        .collect()
}

fn env<'a>(workload: &'a Value, name: &str) -> Vec<&'a str> {
    workload
        .pointer("/spec/template/spec/containers/0/env")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| e["name"] == name)
        .filter_map(|e| e["value"].as_str())
        .collect()
}

#[test]
fn feature_gates_reach_every_binary_once() {
    let c = helm_template(&["featureGates=CloneSetShortHash=true\\,PodWebhook=false"])
        .expect("helm template");
    let workloads = deployments(&c);
    assert_eq!(workloads.len(), 18, "17 controllers and the node agent");
    for w in workloads {
        let name = w["metadata"]["name"].as_str().unwrap_or_default();
        let want = if name == "resourcedistribution-controller" {
            "ResourceDistributionGate=true,CloneSetShortHash=true,PodWebhook=false"
        } else {
            "CloneSetShortHash=true,PodWebhook=false"
        };
        assert_eq!(env(w, "KRUISE_FEATURE_GATES"), vec![want], "{name}");
    }
    // OpenKruise's way to go without the node agent.
    let c = helm_template(&["featureGates=KruiseDaemon=false"]).expect("helm template");
    assert!(!c.iter().any(|o| o["kind"] == "DaemonSet"));
}

/// The behaviour options beyond upstream (docs/configuration.md) are off unless asked
/// for, and reach only their controller.
#[test]
fn behaviour_options_reach_only_their_controller() {
    const OPTIONS: [(&str, &str); 2] = [
        (
            "sidecarset-controller",
            "KRUISE_SIDECARSET_NOTUPDATE_LIVE_STATUS",
        ),
        (
            "workloadspread-controller",
            "KRUISE_WORKLOADSPREAD_EAGER_DELETION_COST",
        ),
    ];
    let off = helm_template(&[]).expect("helm template");
    let on = helm_template(&[
        "sidecarset.notUpdateLiveStatus=true",
        "workloadspread.eagerDeletionCost=true",
    ])
    .expect("helm template");
    for w in deployments(&off) {
        for (_, var) in OPTIONS {
            assert!(env(w, var).is_empty(), "{var} by default");
        }
    }
    for w in deployments(&on) {
        let name = w["metadata"]["name"].as_str().unwrap_or_default();
        for (owner, var) in OPTIONS {
            let want: &[&str] = if name == owner { &["true"] } else { &[] };
            assert_eq!(env(w, var), want, "{name}: {var}");
        }
    }
    assert!(helm_template(&["cloneset.eagerDeletionCost=true"]).is_err());
}

/// `webhookConfiguration.timeoutSeconds` is both the rendered webhooks' timeout and every
/// controller's `KRUISE_WEBHOOK_TIMEOUT_SECONDS`, so it holds when a controller
/// re-registers its webhooks at start; the Pod webhooks keep their own 5 s in both.
#[test]
fn the_webhook_timeout_reaches_every_controller_and_holds_for_all_but_the_pod_webhooks() {
    let c = helm_template(&["webhookConfiguration.timeoutSeconds=20"]).expect("helm template");
    let workloads = deployments(&c);
    assert_eq!(workloads.len(), 18, "17 controllers and the node agent");
    for w in workloads {
        let name = w["metadata"]["name"].as_str().unwrap_or_default();
        let want: &[&str] = if w["kind"] == "DaemonSet" {
            &[]
        } else {
            &["20"]
        };
        assert_eq!(env(w, "KRUISE_WEBHOOK_TIMEOUT_SECONDS"), want, "{name}");
    }
    let mut pod_webhooks = BTreeSet::new();
    for config in c.iter().filter(|o| {
        o["kind"] == "ValidatingWebhookConfiguration" || o["kind"] == "MutatingWebhookConfiguration"
    }) {
        for hook in config["webhooks"].as_array().into_iter().flatten() {
            let name = hook["name"].as_str().unwrap_or_default();
            match hook["timeoutSeconds"].as_i64() {
                Some(20) => {}
                Some(5) => {
                    let on_pods = hook["rules"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .flat_map(|r| r["resources"].as_array().into_iter().flatten())
                        .all(|r| r == "pods");
                    assert!(on_pods, "{name}: 5 s on something other than Pods");
                    pod_webhooks.insert(name.to_string());
                }
                other => panic!("{name}: timeoutSeconds {other:?}"),
            }
        }
    }
    assert_eq!(pod_webhooks.len(), 3, "{pod_webhooks:?}");
}

#[test]
fn a_disabled_controller_leaves_nothing_behind_and_touches_no_other() {
    let all = kruise_helm_tests::index(helm_template(&[]).expect("helm template"));
    let without = kruise_helm_tests::index(
        helm_template(&["cloneset.enabled=false"]).expect("helm template"),
    );
    let gone: BTreeSet<&String> = all.keys().filter(|k| !without.contains_key(*k)).collect();
    for k in &gone {
        assert!(
            k.contains("cloneset")
                || k.starts_with("apiextensions.k8s.io/v1/CustomResourceDefinition"),
            "{k} went with the CloneSet controller"
        );
    }
    // Its Deployment, ServiceAccount, Services, PDB, CA Secret, RBAC and webhooks.
    assert_eq!(gone.len(), 12, "{gone:#?}");
    for (k, v) in &without {
        assert_eq!(all.get(k), Some(v), "{k} changed");
    }
}

#[test]
fn scheduling_values_reach_the_pod_and_a_single_replica_has_no_budget() {
    let c = helm_template(&[
        "manager.nodeSelector.pool=system",
        "cloneset.nodeSelector.pool=cloneset",
        "cloneset.replicas=1",
        "cloneset.priorityClassName=system-cluster-critical",
        "manager.tolerations[0].operator=Exists",
        "imagePullSecrets[0]=regcred",
        "cloneset.extraEnv[0].name=HTTPS_PROXY",
        "cloneset.extraEnv[0].value=http://proxy:3128",
    ])
    .expect("helm template");
    let by_name = |n: &str| {
        c.iter()
            .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == n)
            .expect("deployment")
    };
    let cs = by_name("cloneset-controller");
    let spec = &cs["spec"]["template"]["spec"];
    assert_eq!(cs["spec"]["replicas"], 1);
    assert_eq!(spec["nodeSelector"]["pool"], "cloneset");
    assert_eq!(spec["priorityClassName"], "system-cluster-critical");
    assert_eq!(spec["tolerations"][0]["operator"], "Exists");
    assert_eq!(spec["imagePullSecrets"][0]["name"], "regcred");
    assert_eq!(env(cs, "HTTPS_PROXY"), vec!["http://proxy:3128"]);
    let other = by_name("sidecarset-controller");
    assert_eq!(
        other["spec"]["template"]["spec"]["nodeSelector"]["pool"],
        "system"
    );
    assert_eq!(other["spec"]["replicas"], 2);
    let pdbs: Vec<&str> = c
        .iter()
        .filter(|o| o["kind"] == "PodDisruptionBudget")
        .filter_map(|o| o["metadata"]["name"].as_str())
        .collect();
    assert!(!pdbs.contains(&"cloneset-controller"), "{pdbs:?}");
    assert_eq!(pdbs.len(), 16);
}

/// The container ports of a workload's first container.
fn container_ports(workload: &Value) -> Vec<i64> {
    workload
        .pointer("/spec/template/spec/containers/0/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| p["containerPort"].as_i64().unwrap_or_default())
        .collect()
}

#[test]
fn host_network_gives_every_controller_ports_of_its_own() {
    let c = helm_template(&["manager.hostNetwork=true"]).expect("helm template");
    let mut ports = BTreeSet::new();
    for d in c.iter().filter(|o| o["kind"] == "Deployment") {
        assert_eq!(d["spec"]["template"]["spec"]["hostNetwork"], true);
        for port in container_ports(d) {
            assert!(ports.insert(port), "port {port} twice");
        }
    }
    assert_eq!(ports.len(), 34);
}

#[test]
fn the_uninstall_guard_checks_the_crds_of_enabled_controllers_and_may_read_exactly_those() {
    let c = helm_template(&[]).expect("helm template");
    let hooks: Vec<&Value> = c.iter().filter(|o| kruise_helm_tests::is_hook(o)).collect();
    let kinds: BTreeSet<&str> = hooks.iter().filter_map(|o| o["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["ClusterRole", "ClusterRoleBinding", "Job", "ServiceAccount"])
    );
    let mut want: BTreeSet<String> = fs::read_dir(root().join("deploy/crds"))
        .expect("deploy/crds")
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_string_lossy()
                .strip_suffix(".yaml")
                .map(str::to_string)
        })
        .collect();
    want.remove("nodeimages.apps.kruise.io");
    want.remove("nodepodprobes.apps.kruise.io");
    let job = hooks.iter().find(|o| o["kind"] == "Job").expect("the Job");
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    let args: BTreeSet<String> = container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    assert_eq!(args, want, "the guard's arguments");
    assert_eq!(container["image"], "kruise-rs/kruise-helm-hook:0.1.0");
    let role = hooks
        .iter()
        .find(|o| o["kind"] == "ClusterRole")
        .expect("the ClusterRole");
    let listable = crds_used_by_cluster_roles(&[{
        let mut r = (*role).clone();
        // crds_used_by_cluster_roles leaves hooks out; this one is what is checked here.
        r["metadata"]["annotations"] = Value::Null;
        r
    }]);
    assert_eq!(listable, want, "list on exactly the checked kinds");
    let gettable: BTreeSet<String> = role["rules"][0]["resourceNames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    assert_eq!(gettable, want, "get on exactly the checked CRDs");
    // Only the kinds of the controllers the release runs: UnitedDeployments are not its to
    // guard once uniteddeployment is disabled.
    let without_ud = helm_template(&["uniteddeployment.enabled=false"]).expect("helm template");
    let job = without_ud
        .iter()
        .find(|o| kruise_helm_tests::is_hook(o) && o["kind"] == "Job")
        .expect("the Job");
    let args = job["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
    assert!(!args.contains("uniteddeployments"), "{args}");
    assert!(args.contains("clonesets.apps.kruise.io"), "{args}");
    let off = helm_template(&["uninstallGuard.enabled=false"]).expect("helm template");
    assert!(!off.iter().any(kruise_helm_tests::is_hook));
}

/// A CRD converted by webhook names the webhook Service of the controller that serves the
/// conversion, in the namespace the chart installs into: a wrong name or namespace leaves
/// every v1beta1 read failing until that controller registers itself.
#[test]
fn each_conversion_names_a_webhook_service_the_chart_renders_in_its_namespace() {
    for (namespace, set) in [
        ("kruise-system", vec!["crds.installAll=true"]),
        (
            "elsewhere",
            vec!["crds.installAll=true", "installation.namespace=elsewhere"],
        ),
    ] {
        let objs = helm_template(&set).expect("helm template");
        let services: BTreeSet<(String, String)> = objs
            .iter()
            .filter(|o| o["kind"] == "Service")
            .map(|o| {
                (
                    o["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                    o["metadata"]["name"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        let mut converted = 0;
        for crd in objs
            .iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
        {
            let Some(service) = crd.pointer("/spec/conversion/webhook/clientConfig/service") else {
                continue;
            };
            converted += 1;
            let at = (
                service["namespace"].as_str().unwrap_or("").to_string(),
                service["name"].as_str().unwrap_or("").to_string(),
            );
            assert_eq!(at.0, namespace, "{}", crd["metadata"]["name"]);
            assert!(
                services.contains(&at),
                "{}: Service {at:?} is not rendered",
                crd["metadata"]["name"]
            );
        }
        assert_eq!(converted, 9, "the nine kinds converted by webhook");
    }
    // kustomize installs into kruise-system: the same Services.
    let k = kustomize("all").expect("kustomize build");
    for crd in k.iter().filter(|o| o["kind"] == "CustomResourceDefinition") {
        if let Some(service) = crd.pointer("/spec/conversion/webhook/clientConfig/service") {
            assert!(
                k.iter().any(|o| o["kind"] == "Service"
                    && o["metadata"]["name"] == service["name"]
                    && o["metadata"]["namespace"] == service["namespace"]),
                "{}: {service}",
                crd["metadata"]["name"]
            );
        }
    }
}

/// The node agent's host access is the CRI socket's own directory, read-only (not all of
/// /var/run, whose other sockets a read-only mount would still let it connect to), and it
/// keeps off virtual-kubelet nodes as OpenKruise's kruise-daemon does; its tolerations and
/// affinity are values. Kustomize ships the
/// same (default_values_render_overlays_all).
#[test]
fn the_node_agent_mounts_only_the_cri_socket_directory_and_skips_virtual_kubelet_nodes() {
    let agent = |set: &[&str]| {
        helm_template(set)
            .expect("helm template")
            .into_iter()
            .find(|o| o["kind"] == "DaemonSet" && o["metadata"]["name"] == "daemon-agent")
            .expect("the agent's DaemonSet")
    };
    let host_paths = |ds: &Value| -> Vec<String> {
        ds.pointer("/spec/template/spec/volumes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.pointer("/hostPath/path").and_then(Value::as_str))
            .map(String::from)
            .collect()
    };
    let ds = agent(&[]);
    assert_eq!(host_paths(&ds), vec!["/run/containerd"]);
    let mounts = ds
        .pointer("/spec/template/spec/containers/0/volumeMounts")
        .and_then(Value::as_array)
        .expect("mounts");
    assert!(mounts.iter().all(|m| m["readOnly"] == true), "{mounts:?}");
    let terms = ds
        .pointer("/spec/template/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions/0")
        .expect("a required node affinity");
    assert_eq!(terms["key"], "type");
    assert_eq!(terms["operator"], "NotIn");
    assert_eq!(terms["values"][0], "virtual-kubelet");

    // Every taint tolerated by default; daemon.tolerations replaces the list, and
    // daemon.affinity the virtual-kubelet exclusion.
    assert_eq!(
        ds.pointer("/spec/template/spec/tolerations"),
        Some(&serde_json::json!([{"operator": "Exists"}]))
    );
    let tuned = agent(&[
        "daemon.tolerations[0].key=dedicated",
        "daemon.tolerations[0].operator=Equal",
        "daemon.tolerations[0].value=gpu",
        "daemon.tolerations[0].effect=NoSchedule",
        "daemon.affinity=null",
    ]);
    assert_eq!(
        tuned.pointer("/spec/template/spec/tolerations"),
        Some(
            &serde_json::json!([{"key": "dedicated", "operator": "Equal", "value": "gpu",
                                  "effect": "NoSchedule"}])
        )
    );
    assert_eq!(tuned.pointer("/spec/template/spec/affinity"), None);

    let crio = agent(&[
        "daemon.socketLocation=/var/run/crio",
        "daemon.socketFile=crio.sock",
    ]);
    assert_eq!(host_paths(&crio), vec!["/var/run/crio"]);
    assert_eq!(
        env(&crio, "KRUISE_CRI_SOCKET"),
        vec!["/hostvarrun/crio.sock"]
    );
}

/// CRI-O nodes: kustomize's component components/cri-o renders what the chart's
/// daemon.socketLocation / daemon.socketFile do (CRI-O's directory mounted, read-only,
/// KRUISE_CRI_SOCKET naming crio.sock in it), and nothing else changes.
#[test]
fn the_cri_o_component_is_the_charts_socket_values() {
    let k = kustomize_with("all", &["components/cri-o"]).expect("kustomize build");
    let c = helm_template(&[
        "daemon.socketLocation=/var/run/crio",
        "daemon.socketFile=crio.sock",
    ])
    .expect("helm template");
    let diffs = differences(k.clone(), c);
    assert!(diffs.is_empty(), "{}", report("components/cri-o", &diffs));
    let agent = k
        .iter()
        .find(|o| o["kind"] == "DaemonSet" && o["metadata"]["name"] == "daemon-agent")
        .expect("the agent");
    assert_eq!(
        agent.pointer("/spec/template/spec/volumes/0/hostPath/path"),
        Some(&Value::from("/var/run/crio"))
    );
    assert_eq!(
        env(agent, "KRUISE_CRI_SOCKET"),
        vec!["/hostvarrun/crio.sock"]
    );
}

/// networkPolicy.enabled: the webhook port admitted from webhookFrom only, metrics from
/// metricsFrom, kruise-rs Pods only (OpenKruise's, sharing the namespace during a
/// migration, untouched); refused without webhookFrom; nothing by default.
#[test]
fn network_policies_admit_the_webhook_port_from_the_apiserver_only() {
    let policies = |set: &[&str]| -> Vec<Value> {
        helm_template(set)
            .expect("helm template")
            .into_iter()
            .filter(|o| o["kind"] == "NetworkPolicy")
            .collect()
    };
    assert!(policies(&[]).is_empty());
    let err = helm_template(&["networkPolicy.enabled=true"]).expect_err("no webhookFrom");
    assert!(err.contains("networkPolicy.webhookFrom"), "{err}");
    let on = policies(&[
        "networkPolicy.enabled=true",
        "networkPolicy.webhookFrom[0].ipBlock.cidr=172.18.0.0/16",
    ]);
    assert_eq!(on.len(), 2, "{on:#?}");
    let controllers = on
        .iter()
        .find(|p| p["metadata"]["namespace"] == "kruise-system")
        .expect("the controllers' policy");
    assert_eq!(
        controllers["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/part-of"],
        "kruise-rs"
    );
    let ingress = controllers["spec"]["ingress"].as_array().expect("rules");
    let rule = |port: i64| {
        ingress
            .iter()
            .find(|r| r["ports"][0]["port"] == port)
            .unwrap_or_else(|| panic!("a rule for {port}"))
    };
    assert_eq!(rule(9443)["from"][0]["ipBlock"]["cidr"], "172.18.0.0/16");
    assert_eq!(
        rule(8080)["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "monitoring"
    );
    // Every controller's webhook and metrics ports are the ones the policy names.
    for d in helm_template(&[])
        .expect("helm template")
        .iter()
        .filter(|o| o["kind"] == "Deployment")
    {
        for port in container_ports(d) {
            assert!(
                port == 9443 || port == 8080,
                "{}: port {port}",
                d["metadata"]["name"]
            );
        }
    }
}

/// Deletion protection's RBAC (kustomize and the chart alike): `list` on Pods, PVCs and
/// every OpenKruise kind of deploy/crds by name, never a wildcard group or resource (which
/// would cover Secrets); other CRDs' custom resources only through the aggregated role,
/// which protection.customResourceRules feeds.
#[test]
fn deletion_protection_lists_named_kinds_only() {
    let grants = |objs: &[Value]| -> BTreeSet<(String, String, String)> {
        let bound: BTreeSet<&str> = objs
            .iter()
            .filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
            .filter(|b| b["subjects"][0]["name"] == "deletionprotection-controller")
            .filter_map(|b| b["roleRef"]["name"].as_str())
            .collect();
        let mut out = BTreeSet::new();
        for role in objs.iter().filter(|o| {
            (o["kind"] == "ClusterRole" || o["kind"] == "Role")
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| bound.contains(n))
        }) {
            for rule in role["rules"].as_array().into_iter().flatten() {
                let strings = |k: &str| -> Vec<String> {
                    rule[k]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                };
                for group in strings("apiGroups") {
                    for resource in strings("resources") {
                        for verb in strings("verbs") {
                            out.insert((group.clone(), resource.clone(), verb));
                        }
                    }
                }
            }
        }
        out
    };
    let kruise_kinds: BTreeSet<(String, String, String)> = fs::read_dir(root().join("deploy/crds"))
        .expect("deploy/crds")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter_map(|f| {
            let (plural, group) = f.strip_suffix(".yaml")?.split_once('.')?;
            Some((group.to_string(), plural.to_string(), "list".to_string()))
        })
        .collect();
    assert_eq!(kruise_kinds.len(), 18, "{kruise_kinds:?}");
    for (what, objs) in [
        (
            "kustomize overlays/all",
            kustomize("all").expect("kustomize build"),
        ),
        ("the chart", helm_template(&[]).expect("helm template")),
    ] {
        let granted = grants(&objs);
        assert!(!granted.is_empty(), "{what}: no grants found");
        let wildcards: Vec<_> = granted
            .iter()
            .filter(|(g, r, v)| g == "*" || r == "*" || v == "*")
            .collect();
        assert!(wildcards.is_empty(), "{what}: {wildcards:?}");
        let lists: BTreeSet<(String, String, String)> = granted
            .iter()
            .filter(|(_, _, v)| v == "list")
            .cloned()
            .collect();
        let mut expected = kruise_kinds.clone();
        for core in ["pods", "persistentvolumeclaims"] {
            expected.insert((String::new(), core.to_string(), "list".to_string()));
        }
        assert_eq!(lists, expected, "{what}");
        let aggregated = objs
            .iter()
            .find(|o| {
                o["kind"] == "ClusterRole"
                    && o["metadata"]["name"] == "kruise-deletionprotection-custom-resources"
            })
            .unwrap_or_else(|| panic!("{what}: the aggregated role"));
        assert_eq!(
            aggregated["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"]["policy.kruise.io/aggregate-to-deletion-protection"],
            "true"
        );
    }

    // protection.customResourceRules: a ClusterRole carrying the aggregation label, list
    // only; a wildcard is refused by the values schema.
    let objs = helm_template(&[
        "protection.customResourceRules[0].apiGroups[0]=example.com",
        "protection.customResourceRules[0].resources[0]=widgets",
    ])
    .expect("helm template");
    let extra = objs
        .iter()
        .find(|o| {
            o["kind"] == "ClusterRole"
                && o["metadata"]["labels"]["policy.kruise.io/aggregate-to-deletion-protection"]
                    == "true"
        })
        .expect("the values' ClusterRole");
    assert_eq!(
        extra["rules"],
        serde_json::json!([{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["list"]}])
    );
    let err = helm_template(&[
        "protection.customResourceRules[0].apiGroups[0]=*",
        "protection.customResourceRules[0].resources[0]=secrets",
    ])
    .expect_err("a wildcard group");
    assert!(err.contains("customResourceRules"), "{err}");
}
