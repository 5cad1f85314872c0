//! Our CRDs applied over OpenKruise v1.9.0's (what a cluster switching from kruise-manager
//! to these controllers does): every version upstream has stays (the apiserver refuses a
//! CRD that drops a version in `status.storedVersions`), every object upstream stored
//! stays readable, and every CRD whose conversion upstream points at kruise-manager's
//! webhook gets a conversion of ours (a controller's webhook, or `strategy: None`
//! stated by the CRD), so no read is left at a kruise-manager that is gone.
//!
//! Upstream's CRDs are read from the Go module cache, where tests/bench/upstream pins
//! github.com/openkruise/kruise v1.9.0; the module is downloaded when absent (the Go
//! module proxy is all it needs). Without `go` the test fails: it never skips.

// A test: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

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
        "go list -m github.com/openkruise/kruise in {}: {}",
        pins.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    dir.join("config/crd/bases").is_dir().then_some(dir)
}

/// OpenKruise v1.9.0's source in the Go module cache, downloaded when absent.
fn upstream() -> PathBuf {
    let pins = repo().join("tests/bench/upstream");
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
        "go mod download github.com/openkruise/kruise failed"
    );
    go_list_upstream(&pins)
        .expect("github.com/openkruise/kruise in the module cache after go mod download")
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Upstream's CRDs by name, each with the conversion patch config/crd/kustomization.yaml
/// applies to it (the uncommented `patches/webhook_in_*.yaml`), as kruise-manager's
/// install has them.
fn upstream_crds() -> BTreeMap<String, CustomResourceDefinition> {
    let crd_dir = upstream().join("config/crd");
    let mut crds = BTreeMap::new();
    for entry in std::fs::read_dir(crd_dir.join("bases")).unwrap() {
        let path = entry.unwrap().path();
        let crd: CustomResourceDefinition = serde_json::from_value(yaml(&path))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        crds.insert(crd.metadata.name.clone().unwrap(), crd);
    }
    let kustomization = std::fs::read_to_string(crd_dir.join("kustomization.yaml")).unwrap();
    let patches: Vec<&str> = kustomization
        .lines()
        .filter_map(|l| l.strip_prefix("- patches/webhook_in_"))
        .collect();
    assert!(
        !patches.is_empty(),
        "no conversion patch in upstream's kustomization"
    );
    for patch in patches {
        let patch = yaml(&crd_dir.join(format!("patches/webhook_in_{patch}")));
        let name = patch["metadata"]["name"].as_str().unwrap();
        let crd = crds
            .get_mut(name)
            .unwrap_or_else(|| panic!("a patch for {name}, which upstream does not define"));
        crd.spec.conversion =
            Some(serde_json::from_value(patch["spec"]["conversion"].clone()).unwrap());
    }
    crds
}

fn storage(crd: &CustomResourceDefinition) -> &str {
    let stored: Vec<_> = crd.spec.versions.iter().filter(|v| v.storage).collect();
    assert_eq!(
        stored.len(),
        1,
        "{:?}: one storage version",
        crd.metadata.name
    );
    &stored[0].name
}

fn has_webhook(crd: &CustomResourceDefinition) -> bool {
    crd.spec
        .conversion
        .as_ref()
        .is_some_and(|c| c.strategy == "Webhook")
}

/// Our CRD converts through a controller's webhook: it ships `strategy: Webhook` naming
/// that controller's Service (which the controller replaces with its own endpoint).
fn converted_by_a_controller(ours: &CustomResourceDefinition) -> bool {
    ours.spec
        .conversion
        .as_ref()
        .is_some_and(|c| c.strategy == "Webhook" && c.webhook.is_some())
}

/// Every version of `crd` has the same schema, so the apiserver's `None` conversion
/// (a relabelled apiVersion) is exact between them.
fn one_schema(crd: &CustomResourceDefinition) -> bool {
    let schemas: Vec<_> = crd
        .spec
        .versions
        .iter()
        .map(|v| serde_json::to_value(&v.schema).unwrap())
        .collect();
    schemas.windows(2).all(|w| w[0] == w[1])
}

#[test]
fn ours_apply_over_openkruise_1_9_and_keep_its_objects_readable() {
    let upstream = upstream_crds();
    let ours = kruise_api::all_crds();
    let mut problems = Vec::new();
    for crd in &ours {
        let name = crd.metadata.name.clone().unwrap();
        let Some(theirs) = upstream.get(&name) else {
            problems.push(format!("{name}: OpenKruise v1.9.0 has no such CRD"));
            continue;
        };
        let our_versions: BTreeSet<&str> =
            crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
        // Upstream may have stored any of its versions; ours must keep them all.
        for v in &theirs.spec.versions {
            if !our_versions.contains(v.name.as_str()) {
                problems.push(format!("{name}: version {} missing (upstream has it; the apiserver refuses to drop a stored version)", v.name));
            }
        }
        // Objects upstream stored at its storage version stay readable at ours.
        let (their_storage, our_storage) = (storage(theirs), storage(crd));
        if their_storage != our_storage && !converted_by_a_controller(crd) && !one_schema(crd) {
            problems.push(format!(
                "{name}: upstream stores {their_storage}, ours {our_storage}, with no conversion webhook and different schemas"
            ));
        }
        // A CRD without a webhook of ours relabels: exact only if the schemas agree.
        if !converted_by_a_controller(crd) && !one_schema(crd) {
            problems.push(format!(
                "{name}: versions with different schemas but no conversion webhook"
            ));
        }
        // Upstream's webhook (kruise-manager's Service) must not survive our apply: a
        // controller of ours registers its own, or ours states the strategy itself.
        if has_webhook(theirs) && !converted_by_a_controller(crd) && crd.spec.conversion.is_none() {
            problems.push(format!(
                "{name}: upstream converts through kruise-manager's webhook; ours has no webhook and states no conversion, so reads would stay pointed at kruise-manager"
            ));
        }
        if crd.spec.scope != theirs.spec.scope {
            problems.push(format!(
                "{name}: scope {} (upstream {})",
                crd.spec.scope, theirs.spec.scope
            ));
        }
        if crd.spec.names.short_names != theirs.spec.names.short_names {
            problems.push(format!(
                "{name}: shortNames {:?} (upstream {:?})",
                crd.spec.names.short_names, theirs.spec.names.short_names
            ));
        }
        for v in &theirs.spec.versions {
            let Some(mine) = crd.spec.versions.iter().find(|m| m.name == v.name) else {
                continue;
            };
            // kubectl get shows upstream's columns, in upstream's order (ours may add one).
            let columns = |v: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinitionVersion| {
                v.additional_printer_columns
                    .iter()
                    .flatten()
                    .map(|c| (c.name.clone(), c.json_path.clone()))
                    .collect::<Vec<_>>()
            };
            let (theirs_cols, ours_cols) = (columns(v), columns(mine));
            let mut rest = ours_cols.iter();
            if !theirs_cols.iter().all(|c| rest.any(|o| o == c)) {
                problems.push(format!(
                    "{name} {}: printer columns {ours_cols:?} (upstream {theirs_cols:?})",
                    v.name
                ));
            }
            let sub = |s: &Option<_>| serde_json::to_value(s).unwrap();
            if sub(&mine.subresources) != sub(&v.subresources) {
                problems.push(format!(
                    "{name} {}: subresources {} (upstream {})",
                    v.name,
                    sub(&mine.subresources),
                    sub(&v.subresources)
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The one CRD that needed a second version to apply over upstream at all.
#[test]
fn podunavailablebudget_keeps_the_version_upstream_stores() {
    let upstream = upstream_crds();
    let theirs = &upstream["podunavailablebudgets.policy.kruise.io"];
    assert_eq!(storage(theirs), "v1beta1");
    let ours = kruise_api::all_crds()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some("podunavailablebudgets.policy.kruise.io"))
        .unwrap();
    let versions: Vec<_> = ours
        .spec
        .versions
        .iter()
        .map(|v| (v.name.as_str(), v.served, v.storage))
        .collect();
    assert_eq!(
        versions,
        [("v1alpha1", true, true), ("v1beta1", true, false)]
    );
}
