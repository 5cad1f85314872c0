//! Objects an earlier release stored keep being readable: every fixture under
//! `tests/fixtures/stored/` (an object as the apiserver keeps it in etcd, one or more per
//! kind and served version; see the README there) must
//!
//! 1. decode into our Rust type for its version and encode back to the same JSON
//!    ([`typed_round_trip`]; the only normalization is [`prune`]),
//! 2. be valid for that version's `openAPIV3Schema` in `deploy/crds/` ([`check_schema`]),
//! 3. for a kind served in two versions, convert to the other version (our conversion
//!    webhook's function, or the apiserver's relabelling where the CRD's strategy is
//!    `None` or both versions share one schema), be valid and typed there too, and
//!    convert back to exactly the fixture.
//!
//! A schema, type or conversion change that breaks an object already stored fails here.
//! The fix is never to edit a fixture: old objects are what they are.

// A test: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kruise_api::apps_v1alpha1 as a;
use kruise_api::apps_v1beta1 as b;
use kruise_api::{conversion, policy_v1alpha1, policy_v1beta1};
use serde_json::{Map, Value};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture_dir() -> PathBuf {
    crate_dir().join("tests/fixtures/stored")
}

/// Every fixture: (file name, object).
fn fixtures() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(fixture_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let value: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: not JSON: {e}"));
        out.push((name, value));
    }
    out.sort_by(|x, y| x.0.cmp(&y.0));
    assert!(!out.is_empty(), "no fixture in {}", fixture_dir().display());
    out
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The committed CRDs by (group, kind).
fn crds() -> BTreeMap<(String, String), Value> {
    let dir = crate_dir().join("../../deploy/crds");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let crd = yaml(&path);
        let group = crd["spec"]["group"].as_str().unwrap().to_string();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
        out.insert((group, kind), crd);
    }
    assert!(!out.is_empty(), "no CRD in {}", dir.display());
    out
}

/// `(group, version)` of an `apiVersion`.
fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version
        .split_once('/')
        .unwrap_or_else(|| panic!("apiVersion {api_version:?} has no group"))
}

fn served_versions(crd: &Value) -> Vec<String> {
    crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["served"].as_bool() == Some(true))
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect()
}

fn schema_of<'c>(crd: &'c Value, version: &str) -> &'c Value {
    crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == version)
        .map(|v| &v["schema"]["openAPIV3Schema"])
        .unwrap_or_else(|| panic!("{} has no version {version}", crd["metadata"]["name"]))
}

// ---------------------------------------------------------------------------------------
// 1. Our Rust types

/// Decodes `doc` as `T` and encodes it again.
fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(
    doc: &Value,
) -> Result<Value, String> {
    let typed: T = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

/// Our type for `(apiVersion, kind)`, decoding and encoding `doc`. Where one Rust type
/// serves both versions (the kinds the apiserver relabels) it writes its own
/// `apiVersion` back, which the caller sets to the document's again.
fn typed(api_version: &str, kind: &str, doc: &Value) -> Result<Value, String> {
    const A: &str = "apps.kruise.io/v1alpha1";
    const B: &str = "apps.kruise.io/v1beta1";
    const PA: &str = "policy.kruise.io/v1alpha1";
    const PB: &str = "policy.kruise.io/v1beta1";
    match (api_version, kind) {
        (A | B, "AdvancedCronJob") => round_trip::<a::AdvancedCronJob>(doc),
        (A | B, "BroadcastJob") => round_trip::<a::BroadcastJob>(doc),
        (A, "CloneSet") => round_trip::<a::CloneSet>(doc),
        (B, "CloneSet") => round_trip::<b::cloneset::CloneSet>(doc),
        (A, "ContainerRecreateRequest") => round_trip::<a::ContainerRecreateRequest>(doc),
        (B, "ContainerRecreateRequest") => {
            round_trip::<b::containerrecreaterequest::ContainerRecreateRequest>(doc)
        }
        (A, "DaemonSet") => round_trip::<a::DaemonSet>(doc),
        (B, "DaemonSet") => round_trip::<b::daemonset::DaemonSet>(doc),
        (A, "EphemeralJob") => round_trip::<a::EphemeralJob>(doc),
        (A | B, "ImageListPullJob") => round_trip::<a::ImageListPullJob>(doc),
        (A | B, "ImagePullJob") => round_trip::<a::ImagePullJob>(doc),
        (A | B, "NodeImage") => round_trip::<a::NodeImage>(doc),
        (A, "NodePodProbe") => round_trip::<a::NodePodProbe>(doc),
        (A, "PersistentPodState") => round_trip::<a::PersistentPodState>(doc),
        (B, "PersistentPodState") => round_trip::<b::persistentpodstate::PersistentPodState>(doc),
        (A, "PodProbeMarker") => round_trip::<a::PodProbeMarker>(doc),
        (A, "ResourceDistribution") => round_trip::<a::ResourceDistribution>(doc),
        (B, "ResourceDistribution") => {
            round_trip::<b::resourcedistribution::ResourceDistribution>(doc)
        }
        (A, "SidecarSet") => round_trip::<a::SidecarSet>(doc),
        (B, "SidecarSet") => round_trip::<b::sidecarset::SidecarSet>(doc),
        (A | B, "StatefulSet") => round_trip::<b::StatefulSet>(doc),
        (A, "UnitedDeployment") => round_trip::<a::UnitedDeployment>(doc),
        (B, "UnitedDeployment") => round_trip::<b::uniteddeployment::UnitedDeployment>(doc),
        (A, "WorkloadSpread") => round_trip::<a::WorkloadSpread>(doc),
        (B, "WorkloadSpread") => round_trip::<b::workloadspread::WorkloadSpread>(doc),
        (PA, "PodUnavailableBudget") => round_trip::<policy_v1alpha1::PodUnavailableBudget>(doc),
        (PB, "PodUnavailableBudget") => round_trip::<policy_v1beta1::PodUnavailableBudget>(doc),
        _ => Err(format!("no Rust type for {api_version} {kind}")),
    }
    .map(|mut v| {
        v["apiVersion"] = Value::String(api_version.to_string());
        v
    })
}

/// The one normalization before comparing an object with what our type encodes: `null`
/// members, and members whose value is an empty object or list, are removed (after
/// pruning their own contents). Our types skip serializing absent options and empty
/// maps/lists, and the apiserver's pruning and `omitempty` mean neither form carries
/// information. Nothing else is normalized: a `false`, `0` or `""` the fixture holds must
/// come back, and every field must keep its name and value.
fn prune(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let v = prune(v);
                let empty = match &v {
                    Value::Null => true,
                    Value::Object(m) => m.is_empty(),
                    Value::Array(a) => a.is_empty(),
                    _ => false,
                };
                if !empty {
                    out.insert(k.clone(), v);
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(prune).collect()),
        other => other.clone(),
    }
}

/// Paths where `left` and `right` differ (for a readable failure).
fn diff(left: &Value, right: &Value, path: &str, out: &mut Vec<String>) {
    match (left, right) {
        (Value::Object(l), Value::Object(r)) => {
            for (k, lv) in l {
                let p = format!("{path}.{k}");
                match r.get(k) {
                    Some(rv) => diff(lv, rv, &p, out),
                    None => out.push(format!("{p}: {lv} is missing")),
                }
            }
            for (k, rv) in r {
                if !l.contains_key(k) {
                    out.push(format!("{path}.{k}: {rv} was added"));
                }
            }
        }
        (Value::Array(l), Value::Array(r)) if l.len() == r.len() => {
            for (i, (lv, rv)) in l.iter().zip(r).enumerate() {
                diff(lv, rv, &format!("{path}[{i}]"), out);
            }
        }
        (l, r) if l == r => {}
        (l, r) => out.push(format!("{path}: {l} became {r}")),
    }
}

/// Integer zeros an object may carry that our type leaves out when encoding: (kind, JSON
/// pointer, `*` standing for every index of a list). Reading such an object loses
/// nothing (the field's zero is its default), so a zero there may be missing after the
/// typed round trip; any other value must come back.
const TYPE_OMITS_ZERO: &[(&str, &str)] = &[
    // OpenKruise v1.9.0 writes it (apis/apps/v1alpha1/nodeimage_types.go:
    // `Waiting int32 json:"waiting"`, no omitempty); our NodeImageStatus skips a zero.
    ("NodeImage", "/status/waiting"),
    // Our UnitedDeployment conversion (JSON) writes `partition: 0` from a
    // `currentPartitions` entry of 0; both our types and OpenKruise's
    // (`Partition int32 json:"partition,omitempty"`) omit it.
    ("UnitedDeployment", "/status/subsetStatuses/*/partition"),
];

/// The pointers `pattern` names in `doc` (`*`: each index of the list there).
fn expand(doc: &Value, pattern: &str) -> Vec<String> {
    let mut found = vec![(String::new(), doc)];
    for segment in pattern.split('/').skip(1) {
        let mut next = Vec::new();
        for (at, node) in found {
            match (segment, node) {
                ("*", Value::Array(items)) => {
                    for (i, item) in items.iter().enumerate() {
                        next.push((format!("{at}/{i}"), item));
                    }
                }
                (key, node) => {
                    if let Some(child) = node.get(key) {
                        next.push((format!("{at}/{key}"), child));
                    }
                }
            }
        }
        found = next;
    }
    found.into_iter().map(|(at, _)| at).collect()
}

/// Decodes `doc` into our type for its version; the differences between `doc` and what
/// the type encodes (both [`prune`]d). Besides [`prune`] and [`TYPE_OMITS_ZERO`], one
/// addition is accepted: the `apiVersion: v1` / `kind: PersistentVolumeClaim` that
/// k8s-openapi's `PersistentVolumeClaim` writes into each `spec.volumeClaimTemplates[]`
/// item where the stored item has none (the schema keeps unknown fields there, and both
/// are what the item is).
fn typed_round_trip(doc: &Value) -> Result<Vec<String>, String> {
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    let kind = doc["kind"].as_str().unwrap_or_default();
    let mut encoded = typed(api_version, kind, doc)?;
    let mut doc = doc.clone();
    let stored_templates = doc["spec"]["volumeClaimTemplates"].as_array().cloned();
    if let (Some(stored), Some(templates)) = (
        stored_templates,
        encoded["spec"]["volumeClaimTemplates"].as_array_mut(),
    ) {
        for (item, stored) in templates.iter_mut().zip(stored) {
            for (field, value) in [("apiVersion", "v1"), ("kind", "PersistentVolumeClaim")] {
                if stored.get(field).is_none()
                    && item.get(field).and_then(Value::as_str) == Some(value)
                    && let Some(map) = item.as_object_mut()
                {
                    map.remove(field);
                }
            }
        }
    }
    for (k, pattern) in TYPE_OMITS_ZERO {
        if *k != kind {
            continue;
        }
        for pointer in expand(&doc.clone(), pattern) {
            if encoded.pointer(&pointer).is_none()
                && doc.pointer(&pointer).and_then(Value::as_i64) == Some(0)
            {
                remove_pointer(&mut doc, &pointer);
            }
        }
    }
    let mut out = Vec::new();
    diff(&prune(&doc), &prune(&encoded), "", &mut out);
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// 2. The CRD schema

/// Structural validation of `value` against an `openAPIV3Schema` node, as the apiserver
/// checks a stored object (k8s.io/apiextensions-apiserver/pkg/apiserver/schema): types
/// and int32/int64 ranges, `nullable`, `enum`, `required`, `minimum`, date-time strings,
/// `x-kubernetes-int-or-string`, and no field the schema does not declare unless the node
/// has `x-kubernetes-preserve-unknown-fields` (where the apiserver would prune it, so a
/// stored object cannot have it). At the root, and in an
/// `x-kubernetes-embedded-resource`, `apiVersion`, `kind` and `metadata` are always
/// allowed (the apiserver validates metadata itself).
fn check_schema(schema: &Value, value: &Value, path: &str, root: bool, errors: &mut Vec<String>) {
    let at = if path.is_empty() { "<root>" } else { path };
    if value.is_null() {
        if schema["nullable"].as_bool() != Some(true) {
            errors.push(format!("{at}: null where the schema is not nullable"));
        }
        return;
    }
    if schema["x-kubernetes-int-or-string"].as_bool() == Some(true) {
        if !(value.is_i64() || value.is_u64() || value.is_string()) {
            errors.push(format!("{at}: {value} is neither an integer nor a string"));
        }
        return;
    }
    if let Some(allowed) = schema["enum"].as_array()
        && !allowed.contains(value)
    {
        errors.push(format!("{at}: {value} is not one of {allowed:?}"));
    }
    let preserve = schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true);
    match schema["type"].as_str() {
        Some("object") => {
            let Some(map) = value.as_object() else {
                errors.push(format!("{at}: {value} is not an object"));
                return;
            };
            check_object(schema, map, path, root, preserve, errors);
        }
        Some("array") => {
            let Some(items) = value.as_array() else {
                errors.push(format!("{at}: {value} is not a list"));
                return;
            };
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check_schema(item_schema, item, &format!("{path}[{i}]"), false, errors);
                }
            }
        }
        Some("string") => {
            let Some(s) = value.as_str() else {
                errors.push(format!("{at}: {value} is not a string"));
                return;
            };
            if schema["format"] == "date-time" && !is_rfc3339(s) {
                errors.push(format!("{at}: {s:?} is not an RFC 3339 date-time"));
            }
        }
        Some("integer") => {
            let Some(n) = value.as_i64() else {
                errors.push(format!("{at}: {value} is not an integer"));
                return;
            };
            if schema["format"] == "int32" && i32::try_from(n).is_err() {
                errors.push(format!("{at}: {n} does not fit int32"));
            }
            if let Some(min) = schema["minimum"].as_f64()
                && (n as f64) < min
            {
                errors.push(format!("{at}: {n} is below the minimum {min}"));
            }
        }
        Some("number") => {
            if !value.is_number() {
                errors.push(format!("{at}: {value} is not a number"));
            }
        }
        Some("boolean") => {
            if !value.is_boolean() {
                errors.push(format!("{at}: {value} is not a boolean"));
            }
        }
        Some(other) => errors.push(format!("{at}: schema type {other:?} not understood")),
        // No type: only a preserve-unknown-fields node may leave it out.
        None if preserve => {}
        None => errors.push(format!("{at}: schema without a type")),
    }
}

fn check_object(
    schema: &Value,
    map: &Map<String, Value>,
    path: &str,
    root: bool,
    preserve: bool,
    errors: &mut Vec<String>,
) {
    let at = if path.is_empty() { "<root>" } else { path };
    let embedded = schema["x-kubernetes-embedded-resource"].as_bool() == Some(true);
    for required in schema["required"].as_array().into_iter().flatten() {
        let required = required.as_str().unwrap();
        if !map.contains_key(required) {
            errors.push(format!("{at}: required field {required:?} missing"));
        }
    }
    let properties = schema["properties"].as_object();
    let additional = schema.get("additionalProperties");
    for (key, child) in map {
        let child_path = format!("{path}.{key}");
        if let Some(child_schema) = properties.and_then(|p| p.get(key)) {
            check_schema(child_schema, child, &child_path, false, errors);
        } else if (root || embedded) && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            if key == "metadata" && !child.is_object() {
                errors.push(format!("{child_path}: not an object"));
            } else if key != "metadata" && !child.is_string() {
                errors.push(format!("{child_path}: not a string"));
            }
        } else if let Some(additional) = additional.filter(|a| a.is_object()) {
            check_schema(additional, child, &child_path, false, errors);
        } else if preserve || additional.and_then(Value::as_bool) == Some(true) {
        } else {
            errors.push(format!(
                "{child_path}: field not in the schema (the apiserver prunes it)"
            ));
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if b.len() < 20
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
        || b[10] != b'T'
        || !digits(11..13)
        || b[13] != b':'
        || !digits(14..16)
        || b[16] != b':'
        || !digits(17..19)
    {
        return false;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    rest == "Z"
        || (rest.len() == 6
            && matches!(rest.as_bytes()[0], b'+' | b'-')
            && rest.as_bytes()[3] == b':')
}

/// `doc` against the schema of its own (or `version`'s) version of its CRD.
fn schema_errors(crds: &BTreeMap<(String, String), Value>, doc: &Value) -> Vec<String> {
    let (group, version) = split_api_version(doc["apiVersion"].as_str().unwrap());
    let kind = doc["kind"].as_str().unwrap();
    let Some(crd) = crds.get(&(group.to_string(), kind.to_string())) else {
        return vec![format!("no CRD for {group} {kind}")];
    };
    let mut errors = Vec::new();
    check_schema(schema_of(crd, version), doc, "", true, &mut errors);
    errors
}

// ---------------------------------------------------------------------------------------
// 3. Conversion

/// How the other version of a kind is reached: our webhook's function, or the apiserver's
/// relabelling (strategy `None`, or a `Webhook`-less CRD whose versions share a schema).
fn convert(crd: &Value, doc: Value, desired: &str) -> Result<Value, String> {
    let kind = doc["kind"].as_str().unwrap_or_default().to_string();
    let strategy = crd["spec"]["conversion"]["strategy"]
        .as_str()
        .unwrap_or("None");
    if strategy == "None" {
        let mut doc = doc;
        doc["apiVersion"] = Value::String(desired.to_string());
        return Ok(doc);
    }
    let f: fn(Value, &str) -> Result<Value, String> = match kind.as_str() {
        "CloneSet" => conversion::convert_cloneset,
        "SidecarSet" => conversion::convert_sidecarset,
        "DaemonSet" => conversion::convert_daemonset,
        "ContainerRecreateRequest" => conversion::convert_containerrecreaterequest,
        "PersistentPodState" => conversion::convert_persistentpodstate,
        "ResourceDistribution" => conversion::convert_resourcedistribution,
        "UnitedDeployment" => conversion::convert_uniteddeployment,
        "WorkloadSpread" => conversion::convert_workloadspread,
        "PodUnavailableBudget" => conversion::convert_podunavailablebudget,
        other => {
            return Err(format!(
                "{other}: a Webhook conversion but no function here"
            ));
        }
    };
    f(doc, desired)
}

/// Round trips that do not come back identical, for a reason recorded here: (fixture
/// file, JSON pointer, why). Each entry takes exactly that member out of both sides of
/// that fixture's round-trip comparison, and [`every_known_round_trip_gap_is_still_a_gap`]
/// fails once the gap closes (so the entry leaves with the fix). Everything else in the
/// fixture must still come back unchanged.
const KNOWN_ROUND_TRIP_GAPS: &[(&str, &str, &str)] = &[
    // CloneSet v1beta1 → v1alpha1 writes `excludePreparingDelete` as the label v1alpha1
    // reads, and v1alpha1 → v1beta1 sets the field from it and leaves it on the object, as
    // OpenKruise's conversion does (v1.9.0 apis/apps/v1alpha1/cloneset_conversion.go): a
    // v1beta1 object read back carries it too. Nothing is lost, and the field decides
    // (v1beta1 → v1alpha1 removes the label when the field is false or absent), so a
    // cleared field does not come back (src/conversion/tests.rs).
    (
        "cloneset.v1beta1.json",
        "/metadata/labels/apps.kruise.io~1cloneset-scaling-exclude-preparing-delete",
        "v1beta1 scaleStrategy.excludePreparingDelete comes back also as the v1alpha1 label",
    ),
    // Advanced DaemonSet v1beta1 `scaleStrategy.partitionedScaling: true` is stored as the
    // `progressive-create-pod` annotation, which v1alpha1 → v1beta1 keeps (as OpenKruise's
    // conversion does; an explicit `false` removes it, an absent scaleStrategy does not).
    (
        "daemonset.v1beta1.json",
        "/metadata/annotations/daemonset.kruise.io~1progressive-create-pod",
        "v1beta1 scaleStrategy.partitionedScaling comes back also as the v1alpha1 annotation",
    ),
    // UnitedDeployment: `status.subsetStatuses[].partition` is a view of v1alpha1's
    // `status.updateStatus.currentPartitions`; a subset whose partition is 0 (left out,
    // as `omitempty` and our types write it) comes back with an explicit `partition: 0`
    // (src/conversion/renamed.rs). The same value: nothing is lost.
    (
        "uniteddeployment.v1alpha1.json",
        "/status/subsetStatuses/0/partition",
        "a partition of 0 comes back written out",
    ),
    (
        "uniteddeployment.v1alpha1.json",
        "/status/subsetStatuses/2/partition",
        "a partition of 0 comes back written out",
    ),
    (
        "uniteddeployment.v1beta1.json",
        "/status/subsetStatuses/0/partition",
        "a partition of 0 comes back written out",
    ),
];

/// Removes the member at `pointer` (RFC 6901); whether there was one.
fn remove_pointer(value: &mut Value, pointer: &str) -> bool {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return false;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    value
        .pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .is_some_and(|m| m.remove(&last).is_some())
}

/// `doc` converted to the other served version of its kind and back.
fn there_and_back(crds: &BTreeMap<(String, String), Value>, doc: &Value) -> Option<(Value, Value)> {
    let api_version = doc["apiVersion"].as_str().unwrap();
    let (group, version) = split_api_version(api_version);
    let crd = &crds[&(group.to_string(), doc["kind"].as_str().unwrap().to_string())];
    let other = served_versions(crd).into_iter().find(|v| v != version)?;
    let there = convert(crd, doc.clone(), &format!("{group}/{other}")).unwrap();
    let back = convert(crd, there.clone(), api_version).unwrap();
    Some((there, back))
}

// ---------------------------------------------------------------------------------------
// The tests

#[test]
fn every_fixture_decodes_into_our_type_without_losing_a_field() {
    let mut failures = Vec::new();
    for (name, doc) in fixtures() {
        match typed_round_trip(&doc) {
            Ok(d) if d.is_empty() => {}
            Ok(d) => failures.push(format!("{name}:\n  {}", d.join("\n  "))),
            Err(e) => failures.push(format!("{name}: does not decode: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_fixture_is_valid_for_its_version_s_crd_schema() {
    let crds = crds();
    let mut failures = Vec::new();
    for (name, doc) in fixtures() {
        let errors = schema_errors(&crds, &doc);
        if !errors.is_empty() {
            failures.push(format!("{name}:\n  {}", errors.join("\n  ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_fixture_converts_to_the_other_version_and_back_unchanged() {
    let crds = crds();
    let mut failures = Vec::new();
    let mut gaps_seen = BTreeSet::new();
    let mut converted = 0;
    for (name, doc) in fixtures() {
        let api_version = doc["apiVersion"].as_str().unwrap().to_string();
        let (group, version) = split_api_version(&api_version);
        let kind = doc["kind"].as_str().unwrap();
        let crd = &crds[&(group.to_string(), kind.to_string())];
        for other in served_versions(crd) {
            if other == version {
                continue;
            }
            converted += 1;
            let desired = format!("{group}/{other}");
            let there = match convert(crd, doc.clone(), &desired) {
                Ok(v) => v,
                Err(e) => {
                    failures.push(format!("{name} → {other}: {e}"));
                    continue;
                }
            };
            if there["apiVersion"] != desired.as_str() {
                failures.push(format!(
                    "{name} → {other}: apiVersion {}",
                    there["apiVersion"]
                ));
            }
            for e in schema_errors(&crds, &there) {
                failures.push(format!("{name} → {other}: schema: {e}"));
            }
            match typed_round_trip(&there) {
                Ok(d) => {
                    for e in d {
                        failures.push(format!("{name} → {other}: type: {e}"));
                    }
                }
                Err(e) => failures.push(format!("{name} → {other}: does not decode: {e}")),
            }
            let mut back = match convert(crd, there, &api_version) {
                Ok(v) => v,
                Err(e) => {
                    failures.push(format!("{name} → {other} → {version}: {e}"));
                    continue;
                }
            };
            let mut original = doc.clone();
            for (file, pointer, _why) in KNOWN_ROUND_TRIP_GAPS {
                if *file == name {
                    remove_pointer(&mut original, pointer);
                    remove_pointer(&mut back, pointer);
                    gaps_seen.insert((*file, *pointer));
                }
            }
            let mut d = Vec::new();
            diff(&original, &back, "", &mut d);
            for e in d {
                failures.push(format!("{name} → {other} → {version}: {e}"));
            }
        }
    }
    assert!(converted > 0);
    for (file, path, why) in KNOWN_ROUND_TRIP_GAPS {
        assert!(
            gaps_seen.contains(&(*file, *path)),
            "known gap {file} {path} ({why}) names no fixture"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The known gaps are real: the member each names differs between the fixture and its
/// round trip. A gap that closed must leave the list.
#[test]
fn every_known_round_trip_gap_is_still_a_gap() {
    let crds = crds();
    let fixtures: BTreeMap<String, Value> = fixtures().into_iter().collect();
    for (file, pointer, why) in KNOWN_ROUND_TRIP_GAPS {
        let doc = &fixtures[*file];
        let (_, back) = there_and_back(&crds, doc).unwrap();
        assert_ne!(
            doc.pointer(pointer),
            back.pointer(pointer),
            "{file}: the known gap at {pointer} ({why}) is gone: remove it from the list"
        );
    }
}

#[test]
fn every_served_kind_and_version_has_a_fixture() {
    let have: BTreeSet<(String, String)> = fixtures()
        .into_iter()
        .map(|(_, doc)| {
            (
                doc["apiVersion"].as_str().unwrap().to_string(),
                doc["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut missing = Vec::new();
    let mut wanted = 0;
    for ((group, kind), crd) in crds() {
        for version in served_versions(&crd) {
            wanted += 1;
            let api_version = format!("{group}/{version}");
            if !have.contains(&(api_version.clone(), kind.clone())) {
                missing.push(format!("{api_version} {kind}"));
            }
        }
    }
    assert!(wanted >= 18, "only {wanted} served versions in deploy/crds");
    assert!(
        missing.is_empty(),
        "no stored-object fixture for: {} (add one under tests/fixtures/stored/, see its README)",
        missing.join(", ")
    );
}

/// The checker itself: it refuses what the apiserver would (so a passing fixture means
/// something).
#[test]
fn the_schema_checker_refuses_invalid_objects() {
    let schema = serde_json::json!({
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "count": {"type": "integer", "format": "int32", "nullable": true},
                    "mode": {"type": "string", "enum": ["A", "B"]},
                    "at": {"type": "string", "format": "date-time"},
                    "size": {"x-kubernetes-int-or-string": true},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "list": {"type": "array", "items": {"type": "boolean"}}
                }
            }
        }
    });
    let errors = |doc: Value| {
        let mut e = Vec::new();
        check_schema(&schema, &doc, "", true, &mut e);
        e
    };
    let valid = serde_json::json!({
        "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "x"},
        "spec": {"name": "n", "count": null, "mode": "A", "at": "2024-05-01T10:00:00Z",
                 "size": "50%", "labels": {"a": "b"}, "free": {"any": [1]}, "list": [true]}
    });
    assert_eq!(errors(valid), Vec::<String>::new());
    for (doc, expected) in [
        (serde_json::json!({}), "<root>: required field \"spec\""),
        (
            serde_json::json!({"spec": {}}),
            ".spec: required field \"name\"",
        ),
        (
            serde_json::json!({"spec": {"name": 1}}),
            ".spec.name: 1 is not a string",
        ),
        (
            serde_json::json!({"spec": {"name": "n", "count": 4294967296_i64}}),
            "does not fit int32",
        ),
        (
            serde_json::json!({"spec": {"name": "n", "mode": "C"}}),
            "is not one of",
        ),
        (
            serde_json::json!({"spec": {"name": "n", "at": "yesterday"}}),
            "RFC 3339",
        ),
        (
            serde_json::json!({"spec": {"name": "n", "size": true}}),
            "neither an integer",
        ),
        (
            serde_json::json!({"spec": {"name": "n", "labels": {"a": 1}}}),
            ".spec.labels.a",
        ),
        (
            serde_json::json!({"spec": {"name": "n", "list": [1]}}),
            ".spec.list[0]",
        ),
        (
            serde_json::json!({"spec": {"name": "n", "extra": 1}}),
            ".spec.extra: field not in",
        ),
        (
            serde_json::json!({"spec": {"name": "n"}, "extra": 1}),
            ".extra: field not in",
        ),
    ] {
        let e = errors(doc.clone());
        assert!(
            e.iter().any(|e| e.contains(expected)),
            "{doc}: expected an error containing {expected:?}, got {e:?}"
        );
    }
}

/// The comparison is strict: a renamed or dropped field, or a changed value, is a
/// difference; only nulls and empty objects/lists are pruned.
#[test]
fn the_typed_comparison_notices_a_renamed_field() {
    let doc = serde_json::json!({"a": {"b": 1, "c": [], "d": null, "e": false}});
    let mut d = Vec::new();
    diff(
        &prune(&doc),
        &prune(&serde_json::json!({"a": {"b": 1, "e": false}})),
        "",
        &mut d,
    );
    assert!(d.is_empty(), "{d:?}");
    diff(
        &prune(&doc),
        &prune(&serde_json::json!({"a": {"B": 1, "e": false}})),
        "",
        &mut d,
    );
    assert_eq!(d, vec![".a.b: 1 is missing", ".a.B: 1 was added"]);
    let mut d = Vec::new();
    diff(
        &prune(&doc),
        &prune(&serde_json::json!({"a": {"b": 1}})),
        "",
        &mut d,
    );
    assert_eq!(d, vec![".a.e: false is missing"]);
}
