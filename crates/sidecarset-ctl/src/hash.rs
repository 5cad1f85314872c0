//! The SidecarSet hashes (spec 2): `kruise.io/sidecarset-hash` and
//! `kruise.io/sidecarset-hash-without-image`.
//!
//! The hash covers `containers`, plus every `initContainers` entry when any of them is a
//! native sidecar (`restartPolicy: Always`), serialized with sorted keys (so it is stable
//! across map orderings), hashed with SHA-256, printed in hex, and each hex byte mapped
//! onto Kubernetes' safe alphabet: 64 characters. The image-less variant blanks every
//! image first, so two specs that differ only in images share it: that is how the
//! controller tells an in-place upgradable change from one that needs new Pods.
//!
//! Byte-for-byte equality with upstream's hash would need Go's struct field order; we
//! use sorted keys instead (documented in the README).

use kruise_api::apps_v1alpha1::{SidecarContainer, SidecarSet, SidecarSetSpec};
use kruise_workload::revision::{go_json, safe_encode};
use serde_json::{Map, Value};

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

fn containers_json(list: &[SidecarContainer], without_image: bool) -> Value {
    Value::Array(
        list.iter()
            .map(|c| {
                let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
                if without_image && let Value::Object(m) = &mut v {
                    m.remove("image");
                }
                v
            })
            .collect(),
    )
}

fn hash_of(spec: &SidecarSetSpec, without_image: bool) -> String {
    let mut m = Map::new();
    m.insert(
        "containers".into(),
        containers_json(&spec.containers, without_image),
    );
    if spec.init_containers.iter().any(is_native_sidecar) {
        m.insert(
            "initContainers".into(),
            containers_json(&spec.init_containers, without_image),
        );
    }
    let bytes = go_json(&Value::Object(m));
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
