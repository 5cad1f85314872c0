//! Our CRDs applied over an OpenKruise v1.9.0 install, as a cluster switching from
//! kruise-manager to these controllers does: upstream's 15 CRDs (with the conversion
//! patches its config/crd/kustomization.yaml applies, owned by another field manager as
//! a Helm install's are) get an object stored at upstream's storage version, then the
//! CRD step of tests/cluster/controllers.sh applies ours. Every CRD must apply, keep the
//! versions upstream stored, convert without kruise-manager, and the objects stay
//! readable at every version we serve.
//!
//! The dev cluster's CRDs are shared by every test running in parallel, so this test
//! works on copies of both CRD sets under a group of its own
//! (`<group>.<random>.upstream.e2e.kruise.io`), deleted afterwards. Upstream's CRDs come
//! from the Go module cache (tests/bench/upstream pins github.com/openkruise/kruise
//! v1.9.0), downloaded when absent; without `go` the test fails rather than skips.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_e2e::{TestNamespace, kubectl, repo_root, wait_for};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

fn go_list_upstream(pins: &Path) -> Option<PathBuf> {
    let out = Command::new("go")
        .args([
            "list",
            "-m",
            "-f",
            "{{.Dir}}",
            "github.com/openkruise/kruise",
        ])
        .current_dir(pins)
        .env("GOFLAGS", "-mod=readonly")
        .env("GOSUMDB", "off")
        .output()
        .expect("`go` runs (Go is needed to read OpenKruise's CRDs)");
    assert!(
        out.status.success(),
        "go list -m github.com/openkruise/kruise: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    dir.join("config/crd/bases").is_dir().then_some(dir)
}

/// OpenKruise v1.9.0's source in the Go module cache, downloaded when absent.
fn upstream() -> PathBuf {
    let pins = repo_root().join("tests/bench/upstream");
    if let Some(dir) = go_list_upstream(&pins) {
        return dir;
    }
    let status = Command::new("go")
        .args(["mod", "download", "github.com/openkruise/kruise"])
        .current_dir(&pins)
        .env("GOFLAGS", "-mod=readonly")
        .env("GOSUMDB", "off")
        .status()
        .expect("go mod download");
    assert!(
        status.success(),
        "go mod download github.com/openkruise/kruise"
    );
    go_list_upstream(&pins).expect("github.com/openkruise/kruise downloaded")
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `crd` moved to the private group that stands for `group`.
fn renamed(mut crd: Value, suffix: &str) -> Value {
    let group = crd["spec"]["group"].as_str().unwrap().to_string();
    let private = format!(
        "{}.{suffix}.upstream.e2e.kruise.io",
        group.split('.').next().unwrap()
    );
    let plural = crd["spec"]["names"]["plural"].as_str().unwrap().to_string();
    crd["spec"]["group"] = json!(private);
    crd["metadata"] = json!({"name": format!("{plural}.{private}")});
    crd
}

/// Deletes the private CRDs (and so their objects) when the test ends.
struct PrivateCrds(Vec<String>);

impl Drop for PrivateCrds {
    fn drop(&mut self) {
        let mut args = vec!["delete", "crd", "--ignore-not-found", "--wait=false"];
        args.extend(self.0.iter().map(String::as_str));
        let _ = kubectl(&args, None);
    }
}

fn get_json(args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    let (ok, out, err) = kubectl(&all, None);
    assert!(ok, "kubectl {all:?}: {err}");
    serde_json::from_str(&out).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ours_apply_over_an_openkruise_1_9_install_and_its_objects_stay_readable() {
    let ns = TestNamespace::new("upcrd").await;
    let suffix = ns.name.rsplit('-').next().unwrap().to_string();
    let crd_dir = upstream().join("config/crd");

    // Upstream's conversion patches, by CRD name.
    let kustomization = std::fs::read_to_string(crd_dir.join("kustomization.yaml")).unwrap();
    let mut patches = BTreeMap::new();
    for patch in kustomization
        .lines()
        .filter_map(|l| l.strip_prefix("- patches/webhook_in_"))
    {
        let patch = yaml(&crd_dir.join(format!("patches/webhook_in_{patch}")));
        patches.insert(
            patch["metadata"]["name"].as_str().unwrap().to_string(),
            patch["spec"]["conversion"].clone(),
        );
    }
    assert!(patches.contains_key("statefulsets.apps.kruise.io"));

    // Both CRD sets under the private groups: upstream's to install, ours in a directory
    // for the CRD step.
    let ours_dir = tempfile_dir(&ns.name);
    let mut upstream_crds = Vec::new();
    let mut names = BTreeMap::new();
    for crd in kruise_api::all_crds() {
        let name = crd.metadata.name.clone().unwrap();
        let (group, plural) = (crd.spec.group.clone(), crd.spec.names.plural.clone());
        let mut theirs = yaml(&crd_dir.join(format!("bases/{group}_{plural}.yaml")));
        if let Some(conversion) = patches.get(&name) {
            theirs["spec"]["conversion"] = conversion.clone();
        }
        let theirs = renamed(theirs, &suffix);
        let private = theirs["metadata"]["name"].as_str().unwrap().to_string();
        let ours = renamed(serde_json::to_value(&crd).unwrap(), &suffix);
        std::fs::write(ours_dir.join(format!("{private}.yaml")), ours.to_string()).unwrap();
        names.insert(name, private);
        upstream_crds.push(theirs);
    }
    let _cleanup = PrivateCrds(names.values().cloned().collect());

    // Installed as Helm installs them: created by a field manager of its own.
    let api: Api<CustomResourceDefinition> = Api::all(ns.client.clone());
    let by_helm = PostParams {
        field_manager: Some("helm".into()),
        ..Default::default()
    };
    for crd in &upstream_crds {
        let crd: CustomResourceDefinition = serde_json::from_value(crd.clone()).unwrap();
        api.create(&by_helm, &crd)
            .await
            .expect("create upstream's CRD");
    }
    for private in names.values() {
        wait_for(
            &format!("{private} Established"),
            Duration::from_secs(60),
            || async {
                let crd = api.get(private).await.map_err(|e| e.to_string())?;
                let ok = crd
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                if ok {
                    Ok(())
                } else {
                    Err("not yet".to_string())
                }
            },
        )
        .await;
    }

    // Objects upstream stores as v1beta1 (no conversion needed to write them: the
    // apiserver stores v1beta1 as sent).
    let sts_group = names["statefulsets.apps.kruise.io"]
        .trim_start_matches("statefulsets.")
        .to_string();
    let pub_group = names["podunavailablebudgets.policy.kruise.io"]
        .trim_start_matches("podunavailablebudgets.")
        .to_string();
    let objects = format!(
        "
apiVersion: {sts_group}/v1beta1
kind: StatefulSet
metadata: {{name: web}}
spec:
  replicas: 3
  serviceName: web
  reserveOrdinals: [1]
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: web, image: nginx}}]}}
  lifecycle: {{preDelete: {{finalizersHandler: [example.com/hook]}}}}
  updateStrategy: {{type: RollingUpdate, rollingUpdate: {{podUpdatePolicy: InPlaceIfPossible, maxUnavailable: 2}}}}
---
apiVersion: {pub_group}/v1beta1
kind: PodUnavailableBudget
metadata: {{name: web}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  maxUnavailable: 1
  protectOperations: [DELETE, EVICT]
"
    );
    let (ok, _, err) = kubectl(&["apply", "-n", &ns.name, "-f", "-"], Some(&objects));
    assert!(ok, "create upstream objects: {err}");

    // Applied alone, our Advanced StatefulSet CRD is refused next to upstream's webhook
    // (stated `strategy: None`, where a silent apply would leave reads at kruise-manager) ...
    let sts_file = ours_dir.join(format!("{}.yaml", names["statefulsets.apps.kruise.io"]));
    let (ok, _, err) = kubectl(
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            sts_file.to_str().unwrap(),
        ],
        None,
    );
    assert!(
        !ok && err.contains("should not be set when strategy is not set to Webhook"),
        "plain apply over upstream's webhook: ok={ok} {err}"
    );

    // ... and the CRD step resets what points at kruise-manager, then applies every CRD.
    let script = repo_root().join("tests/cluster/controllers.sh");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(script)
            .args(["crds", ours_dir.to_str().unwrap()])
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(
        out.status.success(),
        "controllers.sh crds: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    kruise_e2e::forget_discovery();

    for crd in kruise_api::all_crds() {
        let name = crd.metadata.name.clone().unwrap();
        let live = get_json(&["crd", &names[&name]]);
        let upstream_crd_versions = upstream_crds
            .iter()
            .find(|c| c["metadata"]["name"] == names[&name].as_str())
            .unwrap()["spec"]["versions"]
            .as_array()
            .unwrap();
        let upstream_versions: Vec<&str> = upstream_crd_versions
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        let live_versions: Vec<(&str, bool, bool)> = live["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["name"].as_str().unwrap(),
                    v["served"].as_bool().unwrap(),
                    v["storage"].as_bool().unwrap(),
                )
            })
            .collect();
        let ours: Vec<(&str, bool, bool)> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage))
            .collect();
        assert_eq!(live_versions, ours, "{name}: versions as ours");
        for v in &upstream_versions {
            assert!(
                live_versions.iter().any(|(n, ..)| n == v),
                "{name}: {v} kept"
            );
        }
        // Upstream's storage version stays recorded (v1beta1 for the kinds that have it; the
        // v1alpha1-only kinds of 1.9, EphemeralJob and the probe kinds, store v1alpha1).
        let upstream_storage = upstream_crd_versions
            .iter()
            .find(|v| v["storage"] == json!(true))
            .map(|v| v["name"].clone())
            .unwrap();
        assert!(
            live["status"]["storedVersions"]
                .as_array()
                .unwrap()
                .contains(&upstream_storage),
            "{name}: {} (upstream stores {upstream_storage})",
            live["status"]["storedVersions"]
        );
        // Ours, not kruise-manager's: `None` or our controller's webhook Service.
        assert_eq!(
            live["spec"]["conversion"],
            crd.spec
                .conversion
                .as_ref()
                .map_or(json!({"strategy": "None"}), |c| serde_json::to_value(c)
                    .unwrap()),
            "{name}: no kruise-manager webhook left"
        );
    }

    // Our CRD owns Advanced StatefulSet's conversion now.
    let managed = get_json(&[
        "crd",
        &names["statefulsets.apps.kruise.io"],
        "--show-managed-fields",
    ]);
    let owner = managed["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| !m["fieldsV1"]["f:spec"]["f:conversion"]["f:strategy"].is_null())
        .map(|m| {
            (
                m["manager"].as_str().unwrap().to_string(),
                m["operation"].as_str().unwrap().to_string(),
            )
        });
    assert_eq!(owner, Some(("kubectl".to_string(), "Apply".to_string())));

    // Upstream's objects, stored as v1beta1, read at every version we serve.
    for version in ["v1alpha1", "v1beta1"] {
        let sts = get_json(&[
            "-n",
            &ns.name,
            &format!("statefulsets.{version}.{sts_group}"),
            "web",
        ]);
        assert_eq!(
            sts["spec"]["lifecycle"]["preDelete"]["finalizersHandler"],
            json!(["example.com/hook"]),
            "{version}"
        );
        assert_eq!(sts["spec"]["reserveOrdinals"], json!([1]), "{version}");
    }
    // The PUB converts through pub-ctl's webhook, which runs nowhere for this private
    // group: reading upstream's v1beta1 object at v1alpha1 fails, and is no 404 (which a
    // garbage collector would take for a deleted owner).
    let (ok, _, err) = kubectl(
        &[
            "get",
            "-n",
            &ns.name,
            &format!("podunavailablebudgets.v1alpha1.{pub_group}"),
            "web",
        ],
        None,
    );
    assert!(!ok && !err.contains("NotFound"), "ok={ok} {err}");
    let (ok, _, err) = kubectl(
        &[
            "get",
            "-n",
            &ns.name,
            &format!("podunavailablebudgets.v1beta1.{pub_group}"),
            "web",
        ],
        None,
    );
    assert!(ok, "read at the version it is stored in: {err}");
}

/// A directory of its own for this test's CRD files.
fn tempfile_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kruise-e2e-{name}-crds"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
