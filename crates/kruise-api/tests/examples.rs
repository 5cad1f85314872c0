//! Every manifest in `examples/` decodes into our types and encodes back without losing
//! a field, and the committed CRDs in `deploy/crds/` equal what the types generate.

// A test: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use kruise_api::apps_v1alpha1 as a;
use kruise_api::{apps_v1beta1, policy_v1alpha1};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Decodes `doc` as `T` and encodes it again.
fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(
    doc: &Value,
) -> Result<Value, String> {
    let typed: T = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

/// Paths present in `original` whose value is missing or different in `encoded`.
/// Empty objects/lists and nulls in the original carry no information and are skipped;
/// fields our types add (defaults, `apiVersion`/`kind` of embedded PVCs) are allowed.
fn lost(original: &Value, encoded: &Value, path: &str, out: &mut Vec<String>) {
    match (original, encoded) {
        (Value::Object(o), Value::Object(e)) => {
            for (k, v) in o {
                let p = format!("{path}.{k}");
                match e.get(k) {
                    Some(ev) => lost(v, ev, &p, out),
                    None if is_empty(v) => {}
                    None => out.push(format!("{p} (dropped: {v})")),
                }
            }
        }
        (Value::Array(o), Value::Array(e)) if o.len() == e.len() => {
            for (i, (ov, ev)) in o.iter().zip(e).enumerate() {
                lost(ov, ev, &format!("{path}[{i}]"), out);
            }
        }
        (o, e) if o == e => {}
        (Value::Number(o), Value::Number(e)) if o.as_f64() == e.as_f64() => {}
        (o, e) => out.push(format!("{path} ({o} became {e})")),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Bool(false) => true,
        _ => false,
    }
}

fn decode(doc: &Value) -> Option<Result<Value, String>> {
    let api_version = doc.get("apiVersion")?.as_str()?;
    let kind = doc.get("kind")?.as_str()?;
    Some(match (api_version, kind) {
        ("apps.kruise.io/v1alpha1", "CloneSet") => round_trip::<a::CloneSet>(doc),
        ("apps.kruise.io/v1alpha1", "DaemonSet") => round_trip::<a::DaemonSet>(doc),
        ("apps.kruise.io/v1alpha1", "BroadcastJob") => round_trip::<a::BroadcastJob>(doc),
        ("apps.kruise.io/v1alpha1", "AdvancedCronJob") => round_trip::<a::AdvancedCronJob>(doc),
        ("apps.kruise.io/v1alpha1", "SidecarSet") => round_trip::<a::SidecarSet>(doc),
        ("apps.kruise.io/v1alpha1", "ContainerRecreateRequest") => {
            round_trip::<a::ContainerRecreateRequest>(doc)
        }
        ("apps.kruise.io/v1alpha1", "ImagePullJob") => round_trip::<a::ImagePullJob>(doc),
        ("apps.kruise.io/v1alpha1", "ImageListPullJob") => round_trip::<a::ImageListPullJob>(doc),
        ("apps.kruise.io/v1alpha1", "NodeImage") => round_trip::<a::NodeImage>(doc),
        ("apps.kruise.io/v1alpha1", "PersistentPodState") => {
            round_trip::<a::PersistentPodState>(doc)
        }
        ("apps.kruise.io/v1alpha1", "WorkloadSpread") => round_trip::<a::WorkloadSpread>(doc),
        ("apps.kruise.io/v1alpha1", "UnitedDeployment") => round_trip::<a::UnitedDeployment>(doc),
        ("apps.kruise.io/v1alpha1", "ResourceDistribution") => {
            round_trip::<a::ResourceDistribution>(doc)
        }
        ("apps.kruise.io/v1beta1" | "apps.kruise.io/v1alpha1", "StatefulSet") => {
            round_trip::<apps_v1beta1::StatefulSet>(doc)
        }
        ("policy.kruise.io/v1alpha1", "PodUnavailableBudget") => {
            round_trip::<policy_v1alpha1::PodUnavailableBudget>(doc)
        }
        _ => return None,
    })
}

#[test]
fn every_example_round_trips_without_losing_a_field() {
    let dir = repo().join("examples");
    let mut checked = Vec::new();
    let mut failures = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{} is not valid YAML: {e}", file.display()));
        for doc in docs.iter().filter(|d| !d.is_null()) {
            let name = format!(
                "{} {}",
                file.file_name().unwrap().to_string_lossy(),
                doc["kind"]
            );
            match decode(doc) {
                None => continue,
                Some(Err(e)) => failures.push(format!("{name}: does not decode: {e}")),
                Some(Ok(encoded)) => {
                    let mut out = Vec::new();
                    lost(doc, &encoded, "", &mut out);
                    if !out.is_empty() {
                        failures.push(format!("{name}: {}", out.join("; ")));
                    }
                    checked.push(name);
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "examples that lose fields:\n{}",
        failures.join("\n")
    );
    for kind in [
        "CloneSet",
        "StatefulSet",
        "DaemonSet",
        "BroadcastJob",
        "AdvancedCronJob",
        "SidecarSet",
        "ContainerRecreateRequest",
        "ImagePullJob",
        "PersistentPodState",
    ] {
        assert!(
            checked.iter().any(|c| c.contains(kind)),
            "no example of {kind}; checked {checked:?}"
        );
    }
}

#[test]
fn committed_crds_equal_the_types() {
    let dir = repo().join("deploy/crds");
    let crds = kruise_api::all_crds();
    for crd in &crds {
        let file = dir.join(kruise_api::crd_file_name(crd));
        let committed = std::fs::read_to_string(&file)
            .unwrap_or_else(|_| panic!("{} missing: run `make crds`", file.display()));
        assert_eq!(
            committed,
            kruise_api::crd_yaml(crd),
            "{} is out of date: run `make crds` and commit",
            file.display()
        );
    }
    let files = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "yaml")
        })
        .count();
    assert_eq!(
        files,
        crds.len(),
        "deploy/crds has files of kinds that no longer exist: run `make crds`"
    );
}
