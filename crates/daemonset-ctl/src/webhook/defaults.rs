//! Defaulting (upstream `SetDefaultsDaemonSetV1beta1`, `openkruise/kruise v1.9.0
//! apis/apps/defaults/v1beta1.go`), on the JSON of the object so fields our types do not know
//! survive. Template defaults are not injected.

use kruise_runtime::webhook::defaults::{default_enum, default_value, object_entry};
use serde_json::{Map, Value, json};

/// The defaulted object (CREATE and UPDATE alike): `burstReplicas: 250`,
/// `revisionHistoryLimit: 10`, `updateStrategy.type: RollingUpdate` with a
/// `rollingUpdate`; the deprecated `rollingUpdateType: Surging` becomes `Standard`
/// with `maxSurge: 1`, `maxUnavailable: 0` where unset; an empty type `Standard`;
/// neither maxUnavailable nor maxSurge set: `maxUnavailable: 1`, `maxSurge: 0`. A null
/// (or, for enums, empty) field counts as unset.
pub fn with_defaults(object: &Value) -> Value {
    let mut obj = object.clone();
    let Some(spec) = obj
        .as_object_mut()
        .and_then(|o| o.get_mut("spec"))
        .and_then(Value::as_object_mut)
    else {
        return obj;
    };
    default_value(spec, "burstReplicas", json!(250));
    if let Some(strategy) = object_entry(spec, "updateStrategy") {
        default_enum(strategy, "type", "RollingUpdate");
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(rolling) = object_entry(strategy, "rollingUpdate")
        {
            if rolling.get("rollingUpdateType").and_then(Value::as_str) == Some("Surging") {
                default_value(rolling, "maxSurge", json!(1));
                default_value(rolling, "maxUnavailable", json!(0));
                rolling.insert("rollingUpdateType".into(), json!("Standard"));
            }
            default_enum(rolling, "rollingUpdateType", "Standard");
            let unset = |r: &Map<String, Value>, k: &str| r.get(k).is_none_or(Value::is_null);
            if unset(rolling, "maxUnavailable") && unset(rolling, "maxSurge") {
                rolling.insert("maxUnavailable".into(), json!(1));
                rolling.insert("maxSurge".into(), json!(0));
            }
        }
    }
    default_value(spec, "revisionHistoryLimit", json!(10));
    obj
}
