//! ControllerRevisions: the revision data of a Pod template, its hash and name, the
//! ControllerRevision object that stores it, and which revision a Pod is at.
//!
//! OpenKruise stores `{"spec":{"template":{…,"$patch":"replace"}}}` serialized the way
//! Go's `encoding/json` writes a `map[string]interface{}`: keys sorted, `<`, `>`, `&`
//! escaped as `\u003c` & co. The hash is 32-bit FNV-1 over those bytes followed by the
//! decimal collision count, printed in decimal and mapped through Kubernetes'
//! "safe" alphabet. Producing the same bytes as Go keeps revisions (and so Pods) written
//! by upstream OpenKruise recognised as up to date after a migration.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_ordering::predicates::revision_label;
use serde_json::{Map, Value};

pub mod gojson;
pub mod quantity;

/// Kubernetes' `rand.SafeEncodeString` alphabet: no vowels, no 0/1/3 (avoids words and
/// look-alikes in generated names).
pub const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The revision data of a Pod template: `{"spec":{"template":<template + "$patch":"replace">}}`.
///
/// `template` is the template as JSON. Go always writes a few empty structs that Rust
/// types omit (`metadata.creationTimestamp: null`, `resources: {}` of each container);
/// they are added here so the bytes, and therefore the hash, match upstream's.
pub fn revision_data(template: &Value) -> Value {
    let mut template = template.clone();
    add_go_struct_defaults(&mut template);
    if let Value::Object(map) = &mut template {
        map.insert("$patch".into(), Value::String("replace".into()));
    }
    serde_json::json!({ "spec": { "template": template } })
}

/// The revision data of a Pod template as upstream's `getPatch` writes it (openkruise/kruise
/// v1.9.0 pkg/controller/{cloneset/revision,statefulset,daemonset}): the template decoded
/// into Go's `PodTemplateSpec` and encoded again ([`gojson`]: Go's zero values and
/// omitempty, canonical quantities, fields k8s.io/api v0.32 does not have dropped), keys
/// sorted, `"$patch":"replace"`. Equal templates give equal data whether the object was
/// stored by upstream's webhook or ours, so each side finds the other's revisions.
pub fn pod_template_revision_data(template: &Value) -> Value {
    template_revision_data(template, gojson::Root::PodTemplateSpec)
}

/// The revision data of a UnitedDeployment's `spec.template` as upstream's
/// `getUnitedDeploymentPatch` writes it (openkruise/kruise v1.9.0
/// pkg/controller/uniteddeployment/revision.go): the whole UnitedDeployment encoded from
/// its v1beta1 Go type, of which only `spec.template` is kept, with
/// `"$patch":"replace"`. The template is decoded into Go's `apps/v1beta1.SubsetTemplate`
/// and encoded again ([`gojson`]): the metadata as `metav1.ObjectMeta`
/// (`creationTimestamp: null`), the subset workload spec as the v1beta1 (CloneSet,
/// Advanced StatefulSet) or `apps/v1` (StatefulSet, Deployment) Go type, with Go's zero
/// values, omitempty and canonical quantities. Pass the template as stored: fields the
/// Go types do not have are dropped, as upstream's decoding drops them.
pub fn ud_template_revision_data(template: &Value) -> Value {
    template_revision_data(template, gojson::Root::UnitedDeploymentSubsetTemplate)
}

/// The four kinds of a UnitedDeployment's `spec.template`.
const UD_TEMPLATE_KINDS: [&str; 4] = [
    "statefulSetTemplate",
    "advancedStatefulSetTemplate",
    "cloneSetTemplate",
    "deploymentTemplate",
];

/// Removes `apiVersion: v1` and `kind: PersistentVolumeClaim` from the
/// `volumeClaimTemplates` entries of a UnitedDeployment's `spec.template.<kind>`: the only
/// values they can have, which k8s-openapi's `PersistentVolumeClaim` always writes and Go
/// writes only when they were stored (`metav1.TypeMeta` is `omitempty`).
pub fn drop_claim_type_meta(template: &mut Value, kind: &str) {
    let claims = template
        .get_mut(kind)
        .and_then(|t| t.get_mut("spec"))
        .and_then(|s| s.get_mut("volumeClaimTemplates"))
        .and_then(Value::as_array_mut);
    for claim in claims
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        if claim.get("apiVersion").and_then(Value::as_str) == Some("v1") {
            claim.remove("apiVersion");
        }
        if claim.get("kind").and_then(Value::as_str) == Some("PersistentVolumeClaim") {
            claim.remove("kind");
        }
    }
}

/// Whether two UnitedDeployment templates are the same once decoded as Go would, the
/// claim templates' `apiVersion`/`kind` aside ([`drop_claim_type_meta`]).
fn same_ud_template(a: &Value, b: &Value) -> bool {
    let normalized = |t: &Value| {
        let mut t = gojson::normalize(t, gojson::Root::UnitedDeploymentSubsetTemplate);
        for kind in UD_TEMPLATE_KINDS {
            drop_claim_type_meta(&mut t, kind);
        }
        t
    };
    normalized(a) == normalized(b)
}

fn template_revision_data(template: &Value, root: gojson::Root) -> Value {
    let mut template = gojson::normalize(template, root);
    if let Value::Object(map) = &mut template {
        map.insert("$patch".into(), Value::String("replace".into()));
    }
    serde_json::json!({ "spec": { "template": template } })
}

fn add_go_struct_defaults(template: &mut Value) {
    let Value::Object(t) = template else { return };
    let metadata = t
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(m) = metadata {
        m.entry("creationTimestamp").or_insert(Value::Null);
    }
    let spec = t.entry("spec").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(s) = spec {
        for list in ["containers", "initContainers"] {
            if let Some(Value::Array(containers)) = s.get_mut(list) {
                for c in containers.iter_mut() {
                    if let Value::Object(c) = c {
                        c.entry("resources")
                            .or_insert_with(|| Value::Object(Map::new()));
                    }
                }
            }
        }
    }
}

/// Serializes like Go's `json.Marshal` of a `map[string]interface{}`.
pub fn go_json(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(1024);
    write_go_json(value, &mut out);
    out
}

fn write_go_json(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => out.extend_from_slice(go_number(n).as_bytes()),
        Value::String(s) => write_go_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_go_json(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            // Go sorts map keys by their UTF-8 bytes; sort explicitly in case serde_json
            // was built with `preserve_order`.
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_go_string(k, out);
                out.push(b':');
                write_go_json(&map[k], out);
            }
            out.push(b'}');
        }
    }
}

/// Numbers decoded by Go into `interface{}` are float64; Go prints integral float64s
/// below 1e21 without exponent or fraction, exactly like an integer.
fn go_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // Go uses 'e' format with a two-digit exponent minimum.
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((mantissa, exp)) => {
                let (sign, digits) = exp
                    .strip_prefix('-')
                    .map(|d| ("-", d))
                    .unwrap_or(("+", exp));
                format!("{mantissa}e{sign}{digits:0>2}")
            }
            None => s,
        }
    } else {
        let s = f.to_string();
        s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
    }
}

fn write_go_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for ch in s.chars() {
        match ch {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.extend_from_slice(format!("\\u{:04x}", ch as u32).as_bytes());
            }
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

/// 32-bit FNV-1 (multiply, then xor), as Go's `hash/fnv.New32`.
pub fn fnv1_32(chunks: &[&[u8]]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for chunk in chunks {
        for b in *chunk {
            hash = hash.wrapping_mul(0x0100_0193);
            hash ^= u32::from(*b);
        }
    }
    hash
}

/// Kubernetes' `rand.SafeEncodeString`.
pub fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()] as char)
        .collect()
}

/// The revision hash of `data` with the owner's collision count.
pub fn hash(data: &Value, collision_count: i32) -> String {
    let bytes = go_json(data);
    let probe = collision_count.to_string();
    safe_encode(&fnv1_32(&[&bytes, probe.as_bytes()]).to_string())
}

/// `<owner>-<hash>`.
pub fn revision_name(owner: &str, hash: &str) -> String {
    format!("{owner}-{hash}")
}

/// The hash part of a revision name or `controller-revision-hash` value: the suffix after
/// the last `-`, so the full (`sample-744d4796cc`) and short (`744d4796cc`) forms compare equal.
pub fn short_hash(revision: &str) -> &str {
    revision.rsplit('-').next().unwrap_or(revision)
}

/// Whether a Pod's `controller-revision-hash` label points at `revision`.
pub fn same_revision(label: &str, revision: &str) -> bool {
    short_hash(label) == short_hash(revision)
}

/// A revision's name, `""` when unset.
pub fn name_of(revision: &ControllerRevision) -> &str {
    revision.metadata.name.as_deref().unwrap_or_default()
}

/// Whether the Pod's `controller-revision-hash` label points at the revision named
/// `revision`.
pub fn pod_at(pod: &Pod, revision: &str) -> bool {
    revision_label(pod).is_some_and(|label| same_revision(label, revision))
}

/// The revision among `revisions` the Pod was created from or last updated to, by its
/// `controller-revision-hash` label.
pub fn revision_of<'r>(
    revisions: &[&'r ControllerRevision],
    pod: &Pod,
) -> Option<&'r ControllerRevision> {
    let label = revision_label(pod)?;
    revisions
        .iter()
        .copied()
        .find(|r| same_revision(label, name_of(r)))
}

/// A new ControllerRevision owned by `owner` (a controller ownerReference).
pub fn new_controller_revision(
    owner: OwnerReference,
    namespace: &str,
    template_labels: &BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    data: Value,
    revision: i64,
    collision_count: i32,
) -> ControllerRevision {
    let hash = hash(&data, collision_count);
    let mut labels = template_labels.clone();
    labels.insert(
        keys::CONTROLLER_REVISION_HASH_LABEL.to_string(),
        hash.clone(),
    );
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(revision_name(&owner.name, &hash)),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision,
    }
}

/// Whether two revisions store the same template. When `b_data` is written by
/// [`pod_template_revision_data`] or [`ud_template_revision_data`], `a` matches too when
/// its template is the same once decoded as Go would decode it into the same type (a
/// revision written by upstream, or by an earlier version of ours that did not
/// normalize); for a UnitedDeployment template, also when only the claim templates'
/// `apiVersion: v1`/`kind: PersistentVolumeClaim` differ (written or not), so a revision
/// upstream or an earlier version of ours wrote with them is kept.
pub fn equal_data(a: &ControllerRevision, b_data: &Value) -> bool {
    let Some(a_data) = a.data.as_ref().map(|d| &d.0) else {
        return false;
    };
    if a_data == b_data {
        return true;
    }
    let (Some(a_template), Some(b_template)) = (template_of(a), template_of_data(b_data)) else {
        return false;
    };
    let normalized_b = pod_template_revision_data(&b_template);
    if &normalized_b == b_data {
        return pod_template_revision_data(&a_template) == normalized_b;
    }
    &ud_template_revision_data(&b_template) == b_data && same_ud_template(&a_template, &b_template)
}

/// The Pod template stored in a revision's data (without `$patch`).
pub fn template_of(revision: &ControllerRevision) -> Option<Value> {
    template_of_data(&revision.data.as_ref()?.0)
}

fn template_of_data(data: &Value) -> Option<Value> {
    let mut template = data.get("spec")?.get("template")?.clone();
    if let Value::Object(map) = &mut template {
        map.remove("$patch");
    }
    Some(template)
}

/// Which revisions to delete so at most `limit` remain, oldest first, never deleting one
/// that is `live` (current, update, or used by a Pod).
pub fn history_to_prune<'a>(
    revisions: &'a [&'a ControllerRevision],
    limit: usize,
    live: &dyn Fn(&str) -> bool,
) -> Vec<&'a ControllerRevision> {
    let mut candidates: Vec<&ControllerRevision> = revisions
        .iter()
        .copied()
        .filter(|r| !live(r.metadata.name.as_deref().unwrap_or_default()))
        .collect();
    let excess = revisions.len().saturating_sub(limit);
    candidates.sort_by_key(|r| (r.revision, r.metadata.name.clone()));
    candidates.truncate(excess);
    candidates
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn fnv1_matches_go_reference_vectors() {
        // hash/fnv New32 test vectors from the Go standard library.
        assert_eq!(fnv1_32(&[b""]), 0x811c9dc5);
        assert_eq!(fnv1_32(&[b"a"]), 0x050c5d7e);
        assert_eq!(fnv1_32(&[b"ab"]), 0x70772d38);
        assert_eq!(fnv1_32(&[b"abc"]), 0x439c2f4b);
        assert_eq!(fnv1_32(&[b"a", b"bc"]), fnv1_32(&[b"abc"]));
    }

    #[test]
    fn safe_encode_uses_the_kubernetes_alphabet() {
        // '0' is byte 48, 48 % 27 = 21 -> '4'; '9' = 57 % 27 = 3 -> 'f'.
        assert_eq!(safe_encode("0"), "4");
        assert_eq!(safe_encode("9"), "f");
        assert_eq!(safe_encode("1234567890"), "56789bcdf4");
        assert!(
            safe_encode("4294967295")
                .chars()
                .all(|c| "bcdf456789".contains(c))
        );
    }

    #[test]
    fn go_json_sorts_keys_and_escapes_like_go() {
        let v =
            json!({"b": 1, "a": {"z": [true, null], "y": "<a&b>"}, "c": "tab\tquote\"\u{2028}"});
        assert_eq!(
            String::from_utf8(go_json(&v)).unwrap(),
            r#"{"a":{"y":"\u003ca\u0026b\u003e","z":[true,null]},"b":1,"c":"tab\tquote\"\u2028"}"#
        );
        assert_eq!(
            go_number(&serde_json::Number::from_f64(0.5).unwrap()),
            "0.5"
        );
        assert_eq!(
            go_number(&serde_json::Number::from_f64(1e21).unwrap()),
            "1e+21"
        );
    }

    #[test]
    fn revision_data_wraps_the_template_with_patch_replace_and_go_defaults() {
        let template = json!({"metadata": {"labels": {"app": "cs"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx:alpine"}]}});
        let data = revision_data(&template);
        assert_eq!(
            String::from_utf8(go_json(&data)).unwrap(),
            r#"{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null,"labels":{"app":"cs"}},"spec":{"containers":[{"image":"nginx:alpine","name":"nginx","resources":{}}]}}}}"#
        );
    }

    #[test]
    fn hash_depends_on_data_and_collision_count() {
        let a = revision_data(&json!({"spec": {"containers": [{"name": "c", "image": "a"}]}}));
        let b = revision_data(&json!({"spec": {"containers": [{"name": "c", "image": "b"}]}}));
        assert_ne!(hash(&a, 0), hash(&b, 0));
        assert_ne!(hash(&a, 0), hash(&a, 1));
        assert_eq!(hash(&a, 0), hash(&a.clone(), 0));
    }

    #[test]
    fn short_and_full_hash_forms_compare_equal() {
        assert!(same_revision("sample-744d4796cc", "744d4796cc"));
        assert!(same_revision("744d4796cc", "sample-744d4796cc"));
        assert!(!same_revision("sample-744d4796cc", "sample-d4d4fb5bd"));
        assert_eq!(short_hash("my-long-name-56dfb978d4"), "56dfb978d4");
    }

    fn rev(name: &str, n: i64) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            revision: n,
            ..Default::default()
        }
    }

    #[test]
    fn history_prunes_oldest_non_live_revisions() {
        let revs = [
            rev("r1", 1),
            rev("r2", 2),
            rev("r3", 3),
            rev("r4", 4),
            rev("r5", 5),
        ];
        let refs: Vec<&ControllerRevision> = revs.iter().collect();
        let live = |n: &str| n == "r1" || n == "r5";
        let pruned: Vec<_> = history_to_prune(&refs, 2, &live)
            .iter()
            .map(|r| r.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(pruned, ["r2", "r3", "r4"]);
        let pruned = history_to_prune(&refs, 4, &live);
        assert_eq!(pruned.len(), 1);
        assert_eq!(pruned[0].metadata.name.as_deref(), Some("r2"));
        assert!(history_to_prune(&refs, 10, &live).is_empty());
    }

    proptest! {
        #[test]
        fn hashes_use_only_the_safe_alphabet(image in "[a-z0-9:./-]{1,40}", collisions in 0i32..5) {
            let h = hash(&revision_data(&json!({"spec": {"containers": [{"name": "c", "image": image}]}})), collisions);
            prop_assert!(!h.is_empty() && h.len() <= 10);
            prop_assert!(h.bytes().all(|b| SAFE_ALPHABET.contains(&b)));
        }

        #[test]
        fn go_json_is_valid_json_with_the_same_value(s in "\\PC{0,30}") {
            let v = json!({"k": s, "n": [1, 2.5, -3]});
            let parsed: Value = serde_json::from_slice(&go_json(&v)).unwrap();
            prop_assert_eq!(parsed, v);
        }
    }
}

/// Revisions of the workloads in tests/parity/inputs.json against what upstream v1.9.0's
/// own functions compute (tests/parity, `make parity-fixtures`). Each object is decoded
/// into the type its controller reads (CloneSet v1alpha1, Advanced StatefulSet v1beta1,
/// Advanced DaemonSet v1alpha1) and its template serialized back, as the controllers do.
#[cfg(test)]
mod parity {
    use super::*;

    fn fixtures(kind: &str) -> Vec<Value> {
        let expected: Value =
            serde_json::from_str(include_str!("../../../tests/parity/expected.json")).unwrap();
        expected[kind].as_array().unwrap().clone()
    }

    fn template(kind: &str, object: &Value) -> Value {
        let template = match kind {
            "cloneSets" => serde_json::to_value(
                serde_json::from_value::<kruise_api::apps_v1alpha1::CloneSet>(object.clone())
                    .unwrap()
                    .spec
                    .template,
            ),
            "statefulSets" => serde_json::to_value(
                serde_json::from_value::<kruise_api::apps_v1beta1::StatefulSet>(object.clone())
                    .unwrap()
                    .spec
                    .template,
            ),
            _ => serde_json::to_value(
                serde_json::from_value::<kruise_api::apps_v1alpha1::DaemonSet>(object.clone())
                    .unwrap()
                    .spec
                    .template,
            ),
        };
        template.unwrap()
    }

    fn inputs(kind: &str) -> Vec<Value> {
        let inputs: Value =
            serde_json::from_str(include_str!("../../../tests/parity/inputs.json")).unwrap();
        inputs[kind].as_array().unwrap().clone()
    }

    /// The bytes we send as the revision's `data`: serde_json of the value (keys sorted
    /// as Go sorts a map's). Go also escapes `<`, `>` and `&`; ours does not, so those
    /// compare after unescaping: a reader over JSON gets them escaped by the apiserver,
    /// one over protobuf gets our bytes (a known difference for templates with those).
    fn sent(data: &Value) -> String {
        serde_json::to_string(data).unwrap()
    }

    fn go_unescaped(go: &str) -> String {
        go.replace("\\u003c", "<")
            .replace("\\u003e", ">")
            .replace("\\u0026", "&")
    }

    #[test]
    fn pod_template_revisions_equal_upstreams() {
        for kind in ["cloneSets", "statefulSets", "daemonSets"] {
            let fixtures = fixtures(kind);
            let inputs = inputs(kind);
            assert_eq!(fixtures.len(), inputs.len(), "{kind}");
            for (f, input) in fixtures.iter().zip(&inputs) {
                let name = f["name"].as_str().unwrap();
                let cc = f["collisionCount"].as_i64().unwrap_or(0) as i32;
                for (object, want_data, want_name) in [
                    (&f["stored"], &f["data"], &f["revision"]),
                    (input, &f["rawData"], &f["rawRevision"]),
                ] {
                    let data = pod_template_revision_data(&template(kind, object));
                    let go = want_data.as_str().unwrap();
                    assert_eq!(
                        String::from_utf8(go_json(&data)).unwrap(),
                        go,
                        "{kind} {name}"
                    );
                    assert_eq!(sent(&data), go_unescaped(go), "{kind} {name}: sent");
                    let ours = revision_name(name, &hash(&data, cc));
                    if kind != "daemonSets" {
                        assert_eq!(&ours, want_name.as_str().unwrap(), "{kind} {name}");
                    }
                    // Each side finds the other's revision by its data.
                    let theirs = ControllerRevision {
                        data: Some(RawExtension(serde_json::from_str(go).unwrap())),
                        ..Default::default()
                    };
                    assert!(
                        equal_data(&theirs, &data),
                        "{kind} {name}: upstream's revision"
                    );
                }
                // Objects stored by upstream's webhook are already what Go writes: the
                // older, unnormalized data of ours agrees on them.
                let stored = template(kind, &f["stored"]);
                assert_eq!(
                    revision_data(&stored),
                    pod_template_revision_data(&stored),
                    "{kind} {name}"
                );
            }
        }
    }

    /// UnitedDeployment revisions (uniteddeployment/revision.go getUnitedDeploymentPatch)
    /// of the template as JSON, for the object upstream stored (v1beta1) and the one
    /// applied (v1alpha1). uniteddeployment-ctl tests the template as its type gives it.
    #[test]
    fn united_deployment_revisions_equal_upstreams() {
        let fixtures = fixtures("unitedDeployments");
        let inputs = inputs("unitedDeployments");
        assert_eq!(fixtures.len(), inputs.len());
        for (f, input) in fixtures.iter().zip(&inputs) {
            let name = f["name"].as_str().unwrap();
            let cc = f["collisionCount"].as_i64().unwrap_or(0) as i32;
            for (object, want_data, want_name) in [
                (&f["stored"], &f["data"], &f["revision"]),
                (input, &f["rawData"], &f["rawRevision"]),
            ] {
                let template = &object["spec"]["template"];
                let data = ud_template_revision_data(template);
                let go = want_data.as_str().unwrap();
                assert_eq!(String::from_utf8(go_json(&data)).unwrap(), go, "{name}");
                assert_eq!(sent(&data), go_unescaped(go), "{name}: sent");
                assert_eq!(
                    revision_name(name, &hash(&data, cc)),
                    want_name.as_str().unwrap(),
                    "{name}"
                );
                let theirs = ControllerRevision {
                    data: Some(RawExtension(serde_json::from_str(go).unwrap())),
                    ..Default::default()
                };
                assert!(equal_data(&theirs, &data), "{name}: upstream's revision");
                // A revision an earlier version of ours wrote for the same template
                // (revision_data of the typed template, not normalized, claim templates
                // with apiVersion and kind) is found too: upgrading ours keeps it.
                let mut typed = template.clone();
                for kind in UD_TEMPLATE_KINDS {
                    let claims = typed
                        .pointer_mut(&format!("/{kind}/spec/volumeClaimTemplates"))
                        .and_then(Value::as_array_mut);
                    for claim in claims.into_iter().flatten() {
                        claim["apiVersion"] = "v1".into();
                        claim["kind"] = "PersistentVolumeClaim".into();
                    }
                }
                let ours_before = ControllerRevision {
                    data: Some(RawExtension(revision_data(&typed))),
                    ..Default::default()
                };
                assert!(
                    equal_data(&ours_before, &data),
                    "{name}: our earlier revision"
                );
                // Upstream's revision of the template with them equals ours without.
                let theirs_typed = ControllerRevision {
                    data: Some(RawExtension(ud_template_revision_data(&typed))),
                    ..Default::default()
                };
                let mut untyped = typed.clone();
                for kind in UD_TEMPLATE_KINDS {
                    drop_claim_type_meta(&mut untyped, kind);
                }
                assert!(
                    equal_data(&theirs_typed, &ud_template_revision_data(&untyped)),
                    "{name}: claim templates' apiVersion and kind"
                );
            }
        }
        // A different template is not equal.
        let other = serde_json::json!({"deploymentTemplate": {"spec": {"template": {
            "spec": {"containers": [{"name": "c", "image": "other"}]}}}}});
        let theirs = ControllerRevision {
            data: Some(RawExtension(
                serde_json::from_str(fixtures[0]["data"].as_str().unwrap()).unwrap(),
            )),
            ..Default::default()
        };
        assert!(!equal_data(&theirs, &ud_template_revision_data(&other)));
    }

    /// A revision written by an earlier version of ours (not normalized: `0.25` for
    /// `250m`) still matches the same template, so upgrading ours rolls no Pod.
    #[test]
    fn an_unnormalized_revision_of_the_same_template_matches() {
        let template = serde_json::json!({"metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "0.25"}}, "ports": []}]}});
        let old = ControllerRevision {
            data: Some(RawExtension(revision_data(&template))),
            ..Default::default()
        };
        let new = pod_template_revision_data(&template);
        assert_ne!(old.data.as_ref().unwrap().0, new);
        assert!(equal_data(&old, &new));
        let mut other = template.clone();
        other["spec"]["containers"][0]["image"] = serde_json::json!("j");
        assert!(!equal_data(&old, &pod_template_revision_data(&other)));
    }
}
