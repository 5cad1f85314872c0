//! The hash of the env values a container reads from its Pod's labels and annotations
//! (`valueFrom.fieldRef.fieldPath: metadata.labels['k']` / `metadata.annotations['k']`),
//! shared by the two sides of an in-place update of such metadata
//! (`InPlaceUpdateEnvFromMetadata`):
//!
//! - the node agent hashes the values a running container was started with (read from
//!   the container) and records the hash per container ID in the Pod annotation
//!   `apps.kruise.io/runtime-containers-meta`; when the Pod's metadata now gives another
//!   hash, it stops that container so the kubelet starts it with the new values;
//! - the workload controllers' completion check ([`crate::is_update_completed`]) compares
//!   the recorded hash with [`expected_hash`] of the Pod's current metadata.
//!
//! The two must agree bit for bit, hence one function here. FNV-1a (64 bit) over
//! `name=value` lines in env order: stable across processes and versions (unlike std's
//! hasher), and never 0, which the annotation uses for "not known".

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::pod::ContainerView;

/// Env names never counted (SidecarSet's own version env, as upstream).
const EXCLUDED: &[&str] = &["SIDECARSET_VERSION", "SIDECARSET_VERSION_ALT"];

/// Where an env value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetadataField {
    Label(String),
    Annotation(String),
}

/// The env vars of `container` whose value is a Pod label or annotation, in env order.
pub fn metadata_env(container: &impl ContainerView) -> Vec<(String, MetadataField)> {
    container
        .env()
        .iter()
        .filter(|e| e.value.as_deref().unwrap_or_default().is_empty())
        .filter(|e| !EXCLUDED.contains(&e.name.as_str()))
        .filter_map(|e| {
            let path = &e.value_from.as_ref()?.field_ref.as_ref()?.field_path;
            let subscript = |prefix: &str| {
                path.strip_prefix(prefix)
                    .and_then(|rest| rest.strip_suffix("']"))
                    .map(str::to_string)
            };
            let field = subscript("metadata.labels['")
                .map(MetadataField::Label)
                .or_else(|| subscript("metadata.annotations['").map(MetadataField::Annotation))?;
            Some((e.name.clone(), field))
        })
        .collect()
}

fn fnv1a<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    for (name, value) in pairs {
        for b in name
            .bytes()
            .chain(std::iter::once(b'='))
            .chain(value.bytes())
            .chain(std::iter::once(b'\n'))
        {
            h ^= u64::from(b);
            h = h.wrapping_mul(PRIME);
        }
    }
    h.max(1)
}

/// The hash the container's env would have if started now from `meta` (a missing label
/// or annotation reads as the empty string, as the kubelet sets it).
pub fn expected_hash(container: &impl ContainerView, meta: &ObjectMeta) -> u64 {
    let env = metadata_env(container);
    let values: Vec<(&str, &str)> = env
        .iter()
        .map(|(name, field)| {
            let value = match field {
                MetadataField::Label(k) => meta.labels.as_ref().and_then(|m| m.get(k)),
                MetadataField::Annotation(k) => meta.annotations.as_ref().and_then(|m| m.get(k)),
            };
            (name.as_str(), value.map(String::as_str).unwrap_or_default())
        })
        .collect();
    fnv1a(values.into_iter())
}

/// The hash of the values the running container has (`env`: its environment, as read
/// from inside it).
pub fn running_hash(container: &impl ContainerView, env: &BTreeMap<String, String>) -> u64 {
    let names = metadata_env(container);
    fnv1a(names.iter().map(|(name, _)| {
        (
            name.as_str(),
            env.get(name).map(String::as_str).unwrap_or_default(),
        )
    }))
}

/// `KEY=value` lines (the output of `env`) as a map; lines without `=` are skipped (a
/// value with a newline continues on a line of its own and is cut there, as upstream).
pub fn parse_env_output(output: &str) -> BTreeMap<String, String> {
    output
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Container;
    use proptest::prelude::*;
    use serde_json::json;

    fn container() -> Container {
        serde_json::from_value(json!({
            "name": "app",
            "env": [
                {"name": "PLAIN", "value": "x"},
                {"name": "VERSION", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['version']"}}},
                {"name": "OWNER", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['owner']"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "SIDECARSET_VERSION", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['v']"}}},
            ],
        }))
        .unwrap()
    }

    fn meta(version: &str, owner: &str) -> ObjectMeta {
        serde_json::from_value(json!({
            "labels": {"version": version, "unrelated": "1"},
            "annotations": {"owner": owner},
        }))
        .unwrap()
    }

    #[test]
    fn only_metadata_fieldrefs_count() {
        let names: Vec<String> = metadata_env(&container())
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["VERSION", "OWNER"]);
    }

    #[test]
    fn the_running_env_and_the_metadata_that_produced_it_agree() {
        let c = container();
        let env = parse_env_output("PATH=/bin\nVERSION=v1\nOWNER=a=b\nPLAIN=x\nNODE=n\n");
        assert_eq!(env["OWNER"], "a=b");
        assert_eq!(
            running_hash(&c, &env),
            expected_hash(&c, &meta("v1", "a=b"))
        );
        assert_ne!(
            running_hash(&c, &env),
            expected_hash(&c, &meta("v2", "a=b"))
        );
        // Another unrelated label changes nothing.
        let mut m = meta("v1", "a=b");
        m.labels
            .as_mut()
            .unwrap()
            .insert("unrelated".into(), "2".into());
        assert_eq!(running_hash(&c, &env), expected_hash(&c, &m));
    }

    #[test]
    fn a_known_value_stays_the_same() {
        // Pinned: the agent and the controllers of another version must agree.
        assert_eq!(fnv1a(std::iter::empty()), 0xcbf2_9ce4_8422_2325);
        assert_eq!(
            fnv1a([("VERSION", "v1")].into_iter()),
            0x6c4a_d79d_2c9e_1733
        );
    }

    proptest! {
        #[test]
        fn hashes_are_never_zero_and_tell_values_apart(a in "[a-z0-9]{0,8}", b in "[a-z0-9]{0,8}") {
            let c = container();
            let ha = expected_hash(&c, &meta(&a, "o"));
            let hb = expected_hash(&c, &meta(&b, "o"));
            prop_assert!(ha != 0 && hb != 0);
            prop_assert_eq!(a == b, ha == hb);
        }
    }
}
