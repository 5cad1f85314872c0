//! Defaulting (`openkruise/kruise v1.9.0 apis/apps/defaults/v1beta1.go`): the `apps/v1` StatefulSet defaults plus the Advanced ones, on the
//! JSON of the object so fields our types do not know survive. The same code serves
//! `v1alpha1` and `v1beta1` objects (the shapes are identical).

use kruise_runtime::webhook::defaults::{default_enum, default_value, object_entry};
use kruise_runtime::webhook::json_patch;
use kruise_workload::pod_defaults;
use serde_json::{Value, json};

/// The defaults of a CREATE (with template defaults). Returns the defaulted object.
pub fn with_defaults(object: &Value) -> Value {
    with_defaults_for(object, None, true)
}

/// The defaults of a CREATE (`old` is None) or an UPDATE. The Pod template and the claim
/// templates get Kubernetes' core defaults unless `template_defaults` is false (gate
/// `TemplateNoDefaults`); on UPDATE only when the stored templates were defaulted
/// already, keeping the stored `imagePullPolicy` of a container whose image changed
/// (as CloneSet does: [`pod_defaults::default_workload_templates`]).
pub fn with_defaults_for(object: &Value, old: Option<&Value>, template_defaults: bool) -> Value {
    let mut obj = spec_defaults(object);
    pod_defaults::default_workload_templates(&mut obj, old, template_defaults);
    obj
}

/// Under gate `StatefulSetAutoResizePVCGate`, upstream also defaults
/// `volumeClaimUpdateStrategy.type` to `OnDelete`.
pub fn with_resize_default(mut obj: Value) -> Value {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        let strategy = spec
            .entry("volumeClaimUpdateStrategy")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(strategy) = strategy.as_object_mut() {
            let empty = strategy
                .get("type")
                .is_none_or(|t| t.is_null() || t.as_str() == Some(""));
            if empty {
                strategy.insert("type".into(), Value::String("OnDelete".into()));
            }
        }
    }
    obj
}

/// The JSON patch that applies [`with_defaults_for`].
pub fn defaults_patch(
    object: &Value,
    old: Option<&Value>,
    template_defaults: bool,
) -> json_patch::Patch {
    json_patch::diff(object, &with_defaults_for(object, old, template_defaults))
}

/// The spec defaults alone (upstream `SetDefaultsStatefulSet` without the templates):
/// `podManagementPolicy: OrderedReady`, `updateStrategy.type: RollingUpdate` with a
/// `rollingUpdate` of `partition: 0`, `maxUnavailable: 1`, `podUpdatePolicy: ReCreate`,
/// `minReadySeconds: 0`; both retention policies `Retain`; `replicas: 1`,
/// `revisionHistoryLimit: 10`. A field that is null (or an empty string, for the enum
/// fields) counts as unset, as it does for the Go types.
pub fn spec_defaults(object: &Value) -> Value {
    let mut obj = object.clone();
    let spec = obj
        .as_object_mut()
        .and_then(|o| o.get_mut("spec"))
        .and_then(Value::as_object_mut);
    let Some(spec) = spec else { return obj };

    default_enum(spec, "podManagementPolicy", "OrderedReady");
    if let Some(strategy) = object_entry(spec, "updateStrategy") {
        default_enum(strategy, "type", "RollingUpdate");
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(rolling) = object_entry(strategy, "rollingUpdate")
        {
            default_value(rolling, "partition", json!(0));
            default_value(rolling, "maxUnavailable", json!(1));
            default_enum(rolling, "podUpdatePolicy", "ReCreate");
            default_value(rolling, "minReadySeconds", json!(0));
        }
    }
    if let Some(retention) = object_entry(spec, "persistentVolumeClaimRetentionPolicy") {
        default_enum(retention, "whenDeleted", "Retain");
        default_enum(retention, "whenScaled", "Retain");
    }
    default_value(spec, "replicas", json!(1));
    default_value(spec, "revisionHistoryLimit", json!(10));
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::apps_v1beta1::{
        PodManagementPolicyType, PodUpdateStrategyType, StatefulSet, StatefulSetUpdateStrategyType,
    };

    /// An `apps/v1` manifest with only `apiVersion` changed (a migration from apps/v1).
    fn migrated() -> Value {
        json!({
            "apiVersion": "apps.kruise.io/v1beta1",
            "kind": "StatefulSet",
            "metadata": {"name": "sample", "namespace": "default"},
            "spec": {
                "serviceName": "sample",
                "selector": {"matchLabels": {"app": "sample"}},
                "template": {
                    "metadata": {"labels": {"app": "sample"}},
                    "spec": {"containers": [{"name": "main", "image": "nginx:alpine"}]}
                }
            }
        })
    }

    #[test]
    fn a_migrated_native_manifest_gets_the_native_defaults() {
        let d = with_defaults(&migrated());
        let spec = &d["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(spec["podManagementPolicy"], "OrderedReady");
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {
                "partition": 0, "maxUnavailable": 1, "podUpdatePolicy": "ReCreate",
                "minReadySeconds": 0}})
        );
        assert_eq!(
            spec["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        let sts: StatefulSet = serde_json::from_value(d.clone()).unwrap();
        assert_eq!(
            sts.spec.pod_management_policy,
            Some(PodManagementPolicyType::OrderedReady)
        );
        assert_eq!(
            sts.spec.update_strategy.type_,
            Some(StatefulSetUpdateStrategyType::RollingUpdate)
        );
        assert_eq!(
            sts.spec.update_strategy.pod_update_policy(),
            PodUpdateStrategyType::ReCreate
        );
        // Idempotent: a defaulted object needs no patch.
        assert!(defaults_patch(&d, None, true).0.is_empty());
        assert!(defaults_patch(&d, Some(&d), true).0.is_empty());
    }

    #[test]
    fn set_values_are_kept_and_on_delete_gets_no_rolling_update() {
        let mut m = migrated();
        m["spec"]["replicas"] = json!(0);
        m["spec"]["podManagementPolicy"] = json!("Parallel");
        m["spec"]["revisionHistoryLimit"] = json!(3);
        m["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
        m["spec"]["persistentVolumeClaimRetentionPolicy"] = json!({"whenScaled": "Delete"});
        let d = with_defaults(&m);
        assert_eq!(d["spec"]["replicas"], 0);
        assert_eq!(d["spec"]["podManagementPolicy"], "Parallel");
        assert_eq!(d["spec"]["revisionHistoryLimit"], 3);
        assert_eq!(d["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
        assert_eq!(
            d["spec"]["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Delete"})
        );

        // A partial rollingUpdate is completed; what is set stays.
        m["spec"]["updateStrategy"] = json!({"rollingUpdate": {"maxUnavailable": "50%", "podUpdatePolicy": "InPlaceIfPossible"}});
        let d = with_defaults(&m);
        assert_eq!(
            d["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {
                "partition": 0, "maxUnavailable": "50%", "podUpdatePolicy": "InPlaceIfPossible",
                "minReadySeconds": 0}})
        );
    }

    #[test]
    fn null_and_empty_enum_values_count_as_unset() {
        let mut m = migrated();
        m["spec"]["podManagementPolicy"] = json!("");
        m["spec"]["replicas"] = Value::Null;
        m["spec"]["updateStrategy"] = json!({"type": "", "rollingUpdate": null});
        let d = with_defaults(&m);
        assert_eq!(d["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["updateStrategy"]["type"], "RollingUpdate");
        assert_eq!(d["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 0);
    }

    #[test]
    fn templates_get_core_defaults_like_cloneset() {
        let mut m = migrated();
        m["spec"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "www"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]);
        let created = with_defaults(&m);
        let c = &created["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(
            created["spec"]["template"]["spec"]["dnsPolicy"],
            "ClusterFirst"
        );
        assert_eq!(
            created["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"],
            "Filesystem"
        );

        // An image bump sent without a pull policy keeps the stored one.
        let mut bumped = m.clone();
        bumped["spec"]["template"]["spec"]["containers"] =
            json!([{"name": "main", "image": "nginx"}]);
        let d = with_defaults_for(&bumped, Some(&created), true);
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );

        // Stored without template defaults: the template is left as sent.
        let legacy = spec_defaults(&m);
        let kept = with_defaults_for(&bumped, Some(&legacy), true);
        assert_eq!(
            kept["spec"]["template"]["spec"]["containers"][0],
            json!({"name": "main", "image": "nginx"})
        );

        // TemplateNoDefaults: spec defaults only.
        let raw = with_defaults_for(&m, None, false);
        assert_eq!(
            raw["spec"]["template"]["spec"]["containers"][0],
            json!({"name": "main", "image": "nginx:alpine"})
        );
        assert_eq!(raw["spec"]["podManagementPolicy"], "OrderedReady");
    }

    #[test]
    fn unknown_fields_survive() {
        let mut m = migrated();
        m["spec"]["template"]["spec"]["futureField"] = json!({"x": 1});
        m["spec"]["futureSpecField"] = json!(true);
        let d = with_defaults(&m);
        assert_eq!(d["spec"]["template"]["spec"]["futureField"]["x"], 1);
        assert_eq!(d["spec"]["futureSpecField"], true);
    }
}
