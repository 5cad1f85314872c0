//! The SidecarSet hashes: `kruise.io/sidecarset-hash` and
//! `kruise.io/sidecarset-hash-without-image`.
//!
//! As openkruise/kruise v1.9.0 pkg/control/sidecarcontrol/hash.go: the hash covers
//! `containers`, plus every `initContainers` entry when any of them is a native sidecar
//! (`restartPolicy: Always`), written as Go's `json.Marshal` writes upstream's types
//! (struct fields in Go declaration order, Go's omitempty, quantities canonical:
//! [`kruise_workload::revision::gojson`]), hashed with SHA-256, printed in hex, and each
//! hex byte mapped onto Kubernetes' safe alphabet: 64 characters. The image-less variant
//! blanks every image first, so two specs that differ only in images share it: that is
//! how the controller tells an in-place upgradable change from one that needs new Pods.
//!
//! The bytes, and so both hashes, equal upstream's (tests/parity fixtures, asserted
//! below): a cluster can move between kruise-manager and sidecarset-ctl without its Pods
//! looking out of date.

use kruise_api::apps_v1alpha1::{SidecarContainer, SidecarSet, SidecarSetSpec};
use kruise_workload::revision::gojson::{self, Root};
use kruise_workload::revision::safe_encode;
use serde_json::Value;

/// Both hashes of a spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hashes {
    pub hash: String,
    pub without_image: String,
}

/// Computes both hashes of `spec`.
pub fn hashes(spec: &SidecarSetSpec) -> Hashes {
    Hashes {
        hash: hash_of(spec, false),
        without_image: hash_of(spec, true),
    }
}

/// The hashes a SidecarSet carries in its annotations, or, when the mutating webhook did
/// not write them (a SidecarSet created while no webhook ran), computed from its spec
/// defaulted as the webhook would have: the next UPDATE goes through the webhook, and an
/// image-only change must keep the image-less hash across that boundary.
pub fn hashes_of(ss: &SidecarSet) -> Hashes {
    let annotations = ss.metadata.annotations.as_ref();
    let get = |key: &str| {
        annotations
            .and_then(|a| a.get(key))
            .filter(|v| !v.is_empty())
            .cloned()
    };
    match (
        get(kruise_api::keys::SIDECARSET_HASH),
        get(kruise_api::keys::SIDECARSET_HASH_WITHOUT_IMAGE),
    ) {
        (Some(hash), Some(without_image)) => Hashes {
            hash,
            without_image,
        },
        _ => hashes(&crate::defaults::defaulted_spec(&ss.spec)),
    }
}

fn is_native_sidecar(c: &SidecarContainer) -> bool {
    c.container.restart_policy.as_deref() == Some("Always")
}

/// `[]SidecarContainer` as Go's `encoding/json` writes it (an empty list is `null`: the
/// nil slice Go decodes from a SidecarSet stored without the field).
fn write_containers(list: &[SidecarContainer], without_image: bool, out: &mut Vec<u8>) {
    if list.is_empty() {
        out.extend_from_slice(b"null");
        return;
    }
    out.push(b'[');
    for (i, c) in list.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            if without_image {
                m.remove("image");
            }
            upstream_names(m);
        }
        out.extend_from_slice(&gojson::marshal(&v, Root::SidecarContainer));
    }
    out.push(b']');
}

/// Our `resourcesPolicy` type writes two fields under other names than upstream's JSON
/// tags (it reads both); the hash uses upstream's, or Go would not see the fields.
fn upstream_names(container: &mut serde_json::Map<String, Value>) {
    if let Some(Value::Object(policy)) = container.get_mut("resourcesPolicy") {
        for (ours, theirs) in [
            ("targetContainerMode", "targetContainersMode"),
            ("resourceExpr", "resourcesExpr"),
        ] {
            if let Some(v) = policy.remove(ours) {
                policy.entry(theirs).or_insert(v);
            }
        }
    }
}

fn hash_of(spec: &SidecarSetSpec, without_image: bool) -> String {
    // upstream's map[string]interface{}: keys sorted, "containers" < "initContainers".
    let mut bytes = b"{\"containers\":".to_vec();
    write_containers(&spec.containers, without_image, &mut bytes);
    if spec.init_containers.iter().any(is_native_sidecar) {
        bytes.extend_from_slice(b",\"initContainers\":");
        write_containers(&spec.init_containers, without_image, &mut bytes);
    }
    bytes.push(b'}');
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    safe_encode(&hex)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: Value) -> SidecarSetSpec {
        serde_json::from_value(json).unwrap()
    }

    fn fixtures() -> Vec<Value> {
        let expected: Value =
            serde_json::from_str(include_str!("../../../tests/parity/expected.json")).unwrap();
        expected["sidecarSets"].as_array().unwrap().clone()
    }

    fn inputs() -> Vec<Value> {
        let inputs: Value =
            serde_json::from_str(include_str!("../../../tests/parity/inputs.json")).unwrap();
        inputs["sidecarSets"].as_array().unwrap().clone()
    }

    /// Upstream's hashes of the objects in tests/parity/inputs.json, computed by its own
    /// functions (tests/parity, `make parity-fixtures`): of the object as applied, of the
    /// object its webhook stores, and through our webhook's defaulting.
    #[test]
    fn hashes_equal_upstreams() {
        let fixtures = fixtures();
        let inputs = inputs();
        assert_eq!(fixtures.len(), inputs.len());
        for (f, input) in fixtures.iter().zip(&inputs) {
            let name = f["name"].as_str().unwrap();
            let applied: SidecarSet = serde_json::from_value(input.clone()).unwrap();
            assert_eq!(
                hashes(&applied.spec),
                Hashes {
                    hash: f["rawHash"].as_str().unwrap().into(),
                    without_image: f["rawHashWithoutImage"].as_str().unwrap().into(),
                },
                "{name}: as applied"
            );
            let want = Hashes {
                hash: f["hash"].as_str().unwrap().into(),
                without_image: f["hashWithoutImage"].as_str().unwrap().into(),
            };
            let stored: SidecarSet = serde_json::from_value(f["stored"].clone()).unwrap();
            let mut bare = stored.clone();
            bare.metadata.annotations = None;
            assert_eq!(hashes(&bare.spec), want, "{name}: as upstream stores it");
            assert_eq!(hashes_of(&stored), want, "{name}: annotations");
            let ours = crate::webhook::defaulted_with_hashes(input, None);
            let ours: SidecarSet = serde_json::from_value(ours).unwrap();
            assert_eq!(hashes_of(&ours), want, "{name}: our webhook");
            assert_eq!(
                hashes_of(&bare),
                want,
                "{name}: computed when not annotated"
            );
        }
    }

    #[test]
    fn hash_is_64_safe_characters() {
        let h = hashes(&spec(
            serde_json::json!({"containers": [{"name": "a", "image": "busybox"}]}),
        ));
        assert_eq!(h.hash.len(), 64);
        assert!(
            h.hash
                .bytes()
                .all(|b| kruise_workload::revision::SAFE_ALPHABET.contains(&b))
        );
        assert_ne!(h.hash, h.without_image);
    }

    #[test]
    fn only_an_image_change_keeps_the_imageless_hash() {
        let a = hashes(&spec(
            serde_json::json!({"containers": [{"name": "a", "image": "busybox"}]}),
        ));
        let b = hashes(&spec(
            serde_json::json!({"containers": [{"name": "a", "image": "busybox:1.35.0"}]}),
        ));
        let c = hashes(&spec(
            serde_json::json!({"containers": [{"name": "a", "image": "busybox", "env": [{"name": "X", "value": "1"}]}]}),
        ));
        assert_ne!(a.hash, b.hash);
        assert_eq!(a.without_image, b.without_image);
        assert_ne!(a.without_image, c.without_image);
    }

    #[test]
    fn field_order_and_unset_pointers_do_not_change_the_hash() {
        let a = hashes(&spec(
            serde_json::json!({"containers": [{"name": "a", "image": "x", "command": ["sleep"]}]}),
        ));
        let b = hashes(&spec(
            serde_json::json!({"containers": [{"command": ["sleep"], "image": "x", "name": "a"}]}),
        ));
        assert_eq!(a, b);
        // shareVolumeDevicePolicy unset vs. absent: both omitted from the JSON.
        let c = hashes(&spec(
            serde_json::json!({"containers": [{"name": "a", "image": "x", "command": ["sleep"], "shareVolumeDevicePolicy": null}]}),
        ));
        assert_eq!(a, c);
    }

    #[test]
    fn init_containers_count_only_with_a_native_sidecar() {
        let base = serde_json::json!({"containers": [{"name": "a", "image": "x"}]});
        let plain_init = serde_json::json!({"containers": [{"name": "a", "image": "x"}], "initContainers": [{"name": "i", "image": "y"}]});
        let native_init = serde_json::json!({"containers": [{"name": "a", "image": "x"}], "initContainers": [{"name": "i", "image": "y", "restartPolicy": "Always"}]});
        assert_eq!(hashes(&spec(base.clone())), hashes(&spec(plain_init)));
        assert_ne!(hashes(&spec(base)), hashes(&spec(native_init)));
    }

    #[test]
    fn annotations_win_over_computation() {
        let mut ss = SidecarSet::new(
            "s",
            spec(serde_json::json!({"containers": [{"name": "a", "image": "x"}]})),
        );
        let computed = hashes_of(&ss);
        assert_eq!(computed, hashes(&crate::defaults::defaulted_spec(&ss.spec)));
        ss.metadata.annotations = Some(
            [
                (kruise_api::keys::SIDECARSET_HASH.to_string(), "h".into()),
                (
                    kruise_api::keys::SIDECARSET_HASH_WITHOUT_IMAGE.to_string(),
                    "w".into(),
                ),
            ]
            .into(),
        );
        assert_eq!(
            hashes_of(&ss),
            Hashes {
                hash: "h".into(),
                without_image: "w".into()
            }
        );
    }
}
