//! The protection judgments (openkruise/kruise v1.9.0
//! pkg/webhook/util/deletionprotection/deletion_protection.go), pure: what a label asks for, what
//! kind of object is being deleted, how many live dependants it has → refuse (the message) or not.
//! The webhook (`webhook.rs`) only reads the request and counts.

use std::collections::BTreeMap;

use kruise_api::keys;
use serde_json::Value;

/// What `policy.kruise.io/delete-protection` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protection {
    /// Never deleted while the label is there.
    Always,
    /// Not deleted while it has live dependants.
    Cascading,
}

impl Protection {
    /// The protection an object with `labels` asks for: none without the label, with another value
    /// (any other value puts no restriction, as upstream's `default:` branch), or when the object
    /// is already being deleted (`terminating`: a second DELETE of a terminating object changes
    /// nothing, and a finalizer's owner must be able to finish).
    pub fn of(labels: &BTreeMap<String, String>, terminating: bool) -> Option<Protection> {
        if terminating {
            return None;
        }
        match labels.get(keys::DELETION_PROTECTION)?.as_str() {
            keys::DELETION_PROTECTION_ALWAYS => Some(Protection::Always),
            keys::DELETION_PROTECTION_CASCADING => Some(Protection::Cascading),
            _ => None,
        }
    }
}

/// The kinds protection covers, by what their `Cascading` judgment counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guarded {
    /// Active Pods in the namespace.
    Namespace,
    /// Custom resources of the CRD's storage version, in any namespace.
    CustomResourceDefinition,
    /// `spec.replicas` (Advanced DaemonSet: the Pods it runs).
    Workload(Workload),
    /// Service and Ingress: `Always` only, `Cascading` has no effect.
    AlwaysOnly,
}

/// The workload kinds, whose replicas are read differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Deployment, ReplicaSet, StatefulSet (apps), CloneSet, Advanced StatefulSet: the
    /// apiserver (or our defaulting webhooks) default `spec.replicas` to 1.
    DefaultsToOne,
    /// UnitedDeployment: `spec.replicas` may be left unset (nothing defaults it here);
    /// unset counts as 0, as upstream's check skips a nil replicas.
    UnitedDeployment,
    /// Advanced DaemonSet (beyond the table of OpenKruise v0.9.0 release notes, kept from
    /// daemonset-ctl's check): no replicas, so the Pods it runs, `status.currentNumberScheduled`.
    DaemonSet,
}

impl Guarded {
    /// The guarded kind of `group`/`kind` (any served version), if protection covers it.
    pub fn of(group: &str, kind: &str) -> Option<Guarded> {
        Some(match (group, kind) {
            ("", "Namespace") => Guarded::Namespace,
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                Guarded::CustomResourceDefinition
            }
            ("apps", "Deployment" | "ReplicaSet" | "StatefulSet")
            | ("apps.kruise.io", "CloneSet" | "StatefulSet") => {
                Guarded::Workload(Workload::DefaultsToOne)
            }
            ("apps.kruise.io", "UnitedDeployment") => Guarded::Workload(Workload::UnitedDeployment),
            ("apps.kruise.io", "DaemonSet") => Guarded::Workload(Workload::DaemonSet),
            ("", "Service") | ("networking.k8s.io", "Ingress") => Guarded::AlwaysOnly,
            _ => return None,
        })
    }
}

/// The live dependants a `Cascading` object was found to have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dependants {
    Replicas(i64),
    ActivePods(u64),
    /// A Namespace without active Pods: its PersistentVolumeClaims that are `Bound` and
    /// not being deleted (counted only once no Pod is active, as OpenKruise does).
    BoundPvcs(u64),
    ActiveCrs(u64),
}

impl Guarded {
    /// Whether a `Cascading` judgment of this kind needs a count (an API list for a
    /// Namespace or a CRD): never for `Always`, nor for the `Always`-only kinds.
    pub fn counts(self, protection: Protection) -> bool {
        protection == Protection::Cascading && self != Guarded::AlwaysOnly
    }
}

/// A `Cascading` CRD while the gate `DeletionProtectionForCRDCascadingGate` is off: refused
/// with this message whatever it holds, as openkruise/kruise v1.9.0
/// pkg/webhook/util/deletionprotection/deletion_protection.go `ValidateCRDDeletion` does
/// (nothing is listed then).
pub fn crd_cascading_gate_off(guarded: Guarded, protection: Protection) -> Option<String> {
    (guarded == Guarded::CustomResourceDefinition && protection == Protection::Cascading).then(
        || {
            format!(
                "feature-gate {} is not enabled",
                kruise_runtime::gates::DELETION_PROTECTION_FOR_CRD_CASCADING_GATE
            )
        },
    )
}

/// The judgment: the 403 message to refuse the delete with, or `None` to allow it.
/// `dependants` is what [`Guarded::counts`] asked to be counted (`None` when it did
/// not ask).
pub fn denial(protection: Protection, dependants: Option<Dependants>) -> Option<String> {
    let cascading = |what: &str, n: String| {
        Some(format!(
            "{}{what} {n}>0",
            keys::DELETION_PROTECTION_MSG_CASCADING_PREFIX
        ))
    };
    match (protection, dependants) {
        (Protection::Always, _) => Some(keys::DELETION_PROTECTION_MSG_ALWAYS.to_string()),
        (Protection::Cascading, Some(Dependants::Replicas(n))) if n > 0 => {
            cascading("replicas", n.to_string())
        }
        (Protection::Cascading, Some(Dependants::ActivePods(n))) if n > 0 => {
            cascading("active pods", n.to_string())
        }
        (Protection::Cascading, Some(Dependants::BoundPvcs(n))) if n > 0 => {
            cascading("\"Bound\" status pvc", n.to_string())
        }
        (Protection::Cascading, Some(Dependants::ActiveCrs(n))) if n > 0 => {
            cascading("active CRs", n.to_string())
        }
        (Protection::Cascading, _) => None,
    }
}

/// The whole judgment of a workload (no API count needed): its labels, whether it is
/// being deleted, and its replicas.
pub fn workload_denial(
    labels: &BTreeMap<String, String>,
    terminating: bool,
    replicas: i64,
) -> Option<String> {
    let protection = Protection::of(labels, terminating)?;
    denial(protection, Some(Dependants::Replicas(replicas)))
}

/// A workload's replicas as the `Cascading` judgment counts them, from its JSON.
pub fn replicas_of(workload: Workload, object: &Value) -> i64 {
    let read = |path: &str| object.pointer(path).and_then(Value::as_i64);
    match workload {
        Workload::DefaultsToOne => read("/spec/replicas").unwrap_or(1),
        Workload::UnitedDeployment => read("/spec/replicas").unwrap_or(0),
        Workload::DaemonSet => read("/status/currentNumberScheduled").unwrap_or(0),
    }
}

/// Whether a PVC counts against deleting its `Cascading` Namespace: `Bound` and not
/// being deleted.
pub fn pvc_is_bound(pvc: &k8s_openapi::api::core::v1::PersistentVolumeClaim) -> bool {
    pvc.metadata.deletion_timestamp.is_none()
        && pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

/// The labels of an object (JSON), and whether it has a deletionTimestamp.
pub fn labels_and_terminating(object: &Value) -> (BTreeMap<String, String>, bool) {
    let labels = object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    let terminating = object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    (labels, terminating)
}

/// Which custom resources a CRD's `Cascading` judgment lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrdTarget {
    pub group: String,
    /// The storage version when it is served (the objects are the same in every version;
    /// an unserved version cannot be listed), else the first served one.
    pub version: String,
    pub kind: String,
    pub plural: String,
}

/// The [`CrdTarget`] of a CRD (JSON), or what is missing from it.
pub fn crd_target(crd: &Value) -> Result<CrdTarget, &'static str> {
    let text = |path: &str| {
        crd.pointer(path)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let group = text("/spec/group").ok_or("spec.group")?;
    let plural = text("/spec/names/plural").ok_or("spec.names.plural")?;
    let kind = text("/spec/names/kind").ok_or("spec.names.kind")?;
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let flag = |v: &Value, f: &str| v.get(f).and_then(Value::as_bool).unwrap_or(false);
    let served: Vec<&Value> = versions.iter().filter(|v| flag(v, "served")).collect();
    let chosen = served
        .iter()
        .find(|v| flag(v, "storage"))
        .or(served.first())
        .ok_or("a served version in spec.versions")?;
    let version = chosen
        .get("name")
        .and_then(Value::as_str)
        .ok_or("spec.versions[].name")?
        .to_string();
    Ok(CrdTarget {
        group,
        version,
        kind,
        plural,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const ALWAYS: &str =
        "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always";
    const CASCADING: &str = "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading and ";

    fn labels(value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(keys::DELETION_PROTECTION.to_string(), value.to_string())])
    }

    #[test]
    fn the_label_values() {
        assert_eq!(
            Protection::of(&labels("Always"), false),
            Some(Protection::Always)
        );
        assert_eq!(
            Protection::of(&labels("Cascading"), false),
            Some(Protection::Cascading)
        );
        for other in ["", "always", "cascading", "Never", "true"] {
            assert_eq!(Protection::of(&labels(other), false), None, "{other:?}");
        }
        assert_eq!(Protection::of(&BTreeMap::new(), false), None);
        // Already being deleted: always allowed.
        assert_eq!(Protection::of(&labels("Always"), true), None);
    }

    #[test]
    fn the_messages_say_which_label_and_why() {
        assert_eq!(denial(Protection::Always, None).unwrap(), ALWAYS);
        assert_eq!(
            denial(Protection::Always, Some(Dependants::Replicas(0))).unwrap(),
            ALWAYS
        );
        assert_eq!(
            denial(Protection::Cascading, Some(Dependants::Replicas(3))).unwrap(),
            format!("{CASCADING}replicas 3>0")
        );
        assert_eq!(
            denial(Protection::Cascading, Some(Dependants::ActivePods(2))).unwrap(),
            format!("{CASCADING}active pods 2>0")
        );
        assert_eq!(
            denial(Protection::Cascading, Some(Dependants::ActiveCrs(1))).unwrap(),
            format!("{CASCADING}active CRs 1>0")
        );
        // OpenKruise's wording, as its e2e suite and users' scripts read it.
        assert_eq!(
            denial(Protection::Cascading, Some(Dependants::BoundPvcs(1))).unwrap(),
            format!("{CASCADING}\"Bound\" status pvc 1>0")
        );
        for none in [
            Dependants::Replicas(0),
            Dependants::ActivePods(0),
            Dependants::BoundPvcs(0),
            Dependants::ActiveCrs(0),
        ] {
            assert_eq!(denial(Protection::Cascading, Some(none)), None);
        }
        // Service and Ingress: Cascading counts nothing and blocks nothing.
        assert!(!Guarded::AlwaysOnly.counts(Protection::Cascading));
        assert_eq!(denial(Protection::Cascading, None), None);
    }

    #[test]
    fn only_a_bound_pvc_not_being_deleted_blocks_its_namespace() {
        use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimStatus};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let pvc = |phase: Option<&str>, deleting: bool| {
            let mut p = PersistentVolumeClaim {
                status: Some(PersistentVolumeClaimStatus {
                    phase: phase.map(str::to_string),
                    ..Default::default()
                }),
                ..Default::default()
            };
            if deleting {
                p.metadata.deletion_timestamp = Some(Time(Default::default()));
            }
            p
        };
        assert!(pvc_is_bound(&pvc(Some("Bound"), false)));
        assert!(!pvc_is_bound(&pvc(Some("Bound"), true)));
        assert!(!pvc_is_bound(&pvc(Some("Pending"), false)));
        assert!(!pvc_is_bound(&pvc(Some("Lost"), false)));
        assert!(!pvc_is_bound(&pvc(None, false)));
    }

    #[test]
    fn the_kinds_of_the_table() {
        use Guarded::*;
        for (group, kind, guarded) in [
            ("", "Namespace", Namespace),
            (
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                CustomResourceDefinition,
            ),
            (
                "apps",
                "Deployment",
                Workload(super::Workload::DefaultsToOne),
            ),
            (
                "apps",
                "StatefulSet",
                Workload(super::Workload::DefaultsToOne),
            ),
            (
                "apps",
                "ReplicaSet",
                Workload(super::Workload::DefaultsToOne),
            ),
            (
                "apps.kruise.io",
                "CloneSet",
                Workload(super::Workload::DefaultsToOne),
            ),
            (
                "apps.kruise.io",
                "StatefulSet",
                Workload(super::Workload::DefaultsToOne),
            ),
            (
                "apps.kruise.io",
                "UnitedDeployment",
                Workload(super::Workload::UnitedDeployment),
            ),
            (
                "apps.kruise.io",
                "DaemonSet",
                Workload(super::Workload::DaemonSet),
            ),
            ("", "Service", AlwaysOnly),
            ("networking.k8s.io", "Ingress", AlwaysOnly),
        ] {
            assert_eq!(Guarded::of(group, kind), Some(guarded), "{group}/{kind}");
        }
        for (group, kind) in [
            ("", "Pod"),
            ("", "ConfigMap"),
            ("apps", "DaemonSet"),
            ("batch", "Job"),
            ("extensions", "Ingress"),
        ] {
            assert_eq!(Guarded::of(group, kind), None, "{group}/{kind}");
        }
        assert!(Namespace.counts(Protection::Cascading));
        assert!(!Namespace.counts(Protection::Always));
    }

    #[test]
    fn replicas_as_each_kind_counts_them() {
        let with = |r: Value| json!({"spec": {"replicas": r}});
        assert_eq!(replicas_of(Workload::DefaultsToOne, &with(json!(3))), 3);
        assert_eq!(
            replicas_of(Workload::DefaultsToOne, &json!({"spec": {}})),
            1
        );
        assert_eq!(replicas_of(Workload::UnitedDeployment, &with(json!(3))), 3);
        assert_eq!(
            replicas_of(Workload::UnitedDeployment, &json!({"spec": {}})),
            0
        );
        assert_eq!(
            replicas_of(
                Workload::DaemonSet,
                &json!({"status": {"currentNumberScheduled": 4}})
            ),
            4
        );
        assert_eq!(replicas_of(Workload::DaemonSet, &json!({})), 0);
    }

    #[test]
    fn labels_and_deletion_timestamp_from_json() {
        let (l, t) = labels_and_terminating(&json!({"metadata": {
            "labels": {keys::DELETION_PROTECTION: "Always", "app": "x"},
            "deletionTimestamp": "2026-01-01T00:00:00Z"
        }}));
        assert_eq!(l[keys::DELETION_PROTECTION], "Always");
        assert!(t);
        let (l, t) = labels_and_terminating(&json!({"metadata": {"name": "x"}}));
        assert!(l.is_empty() && !t);
    }

    #[test]
    fn a_crd_is_counted_in_its_storage_version() {
        let crd = |versions: Value| {
            json!({"spec": {"group": "e2e.kruise.io", "names": {"plural": "widgets", "kind": "Widget"},
                    "versions": versions}})
        };
        let t = crd_target(&crd(json!([
            {"name": "v1", "served": true, "storage": false},
            {"name": "v2", "served": true, "storage": true},
        ])))
        .unwrap();
        assert_eq!(
            t,
            CrdTarget {
                group: "e2e.kruise.io".into(),
                version: "v2".into(),
                kind: "Widget".into(),
                plural: "widgets".into()
            }
        );
        // An unserved storage version cannot be listed: a served one holds the same objects.
        let t = crd_target(&crd(json!([
            {"name": "v1", "served": true, "storage": false},
            {"name": "v2", "served": false, "storage": true},
        ])))
        .unwrap();
        assert_eq!(t.version, "v1");
        assert_eq!(
            crd_target(&crd(
                json!([{"name": "v1", "served": false, "storage": true}])
            )),
            Err("a served version in spec.versions")
        );
        assert_eq!(crd_target(&json!({"spec": {}})), Err("spec.group"));
    }

    fn protection_value() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some("Always".to_string())),
            Just(Some("Cascading".to_string())),
            "[A-Za-z]{0,10}".prop_map(Some),
        ]
    }

    proptest! {
        /// Without one of the two values, or once terminating, nothing is ever refused.
        #[test]
        fn only_the_two_values_refuse(
            value in protection_value(),
            terminating in any::<bool>(),
            replicas in -5i64..100,
            other in proptest::collection::btree_map("[a-z./-]{1,12}", "[A-Za-z]{0,8}", 0..4),
        ) {
            let mut labels = other;
            labels.remove(keys::DELETION_PROTECTION);
            if let Some(v) = &value {
                labels.insert(keys::DELETION_PROTECTION.to_string(), v.clone());
            }
            let refused = workload_denial(&labels, terminating, replicas);
            let expected = !terminating && match value.as_deref() {
                Some("Always") => true,
                Some("Cascading") => replicas > 0,
                _ => false,
            };
            prop_assert_eq!(refused.is_some(), expected);
        }

        /// Every refusal names the label and its value, and a Cascading one the count
        /// that blocked it.
        #[test]
        fn a_refusal_says_which_label_and_why(
            cascading in any::<bool>(),
            which in 0u8..4,
            n in 0u64..10_000,
        ) {
            let protection = if cascading { Protection::Cascading } else { Protection::Always };
            let dependants = match which {
                0 => Dependants::Replicas(n as i64),
                1 => Dependants::ActivePods(n),
                2 => Dependants::BoundPvcs(n),
                _ => Dependants::ActiveCrs(n),
            };
            match denial(protection, Some(dependants)) {
                None => prop_assert!(cascading && n == 0),
                Some(message) => {
                    prop_assert!(message.starts_with(
                        "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection="
                    ));
                    if cascading {
                        prop_assert!(message.ends_with(&format!(" {n}>0")), "{}", message);
                        prop_assert!(message.contains("=Cascading and "));
                    } else {
                        prop_assert_eq!(message, ALWAYS);
                    }
                }
            }
        }
    }
}
