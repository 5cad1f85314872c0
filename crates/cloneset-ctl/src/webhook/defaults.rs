//! CloneSet defaulting (the mutating webhook).

use kruise_runtime::webhook::json_patch;
use kruise_workload::pod_defaults;
use serde_json::{Value, json};

/// The CloneSet defaults (`SetDefaultsCloneSetV1beta1` in openkruise/kruise v1.9.0
/// apis/apps/defaults/v1beta1.go) and the Pod-template defaults of a CREATE. Returns the defaulted
/// object.
pub fn with_defaults(object: &Value) -> Value {
    with_defaults_for(object, None, true)
}

/// The defaults of a CREATE (`old` is None) or an UPDATE. The Pod template and the
/// claim templates get Kubernetes' core defaults (as upstream does unless the
/// `TemplateNoDefaults` gate is on, which makes `template_defaults` false), so a
/// manifest that spells out a default makes no new revision. On UPDATE only when the
/// stored templates were defaulted already: a CloneSet stored without them keeps its
/// revision (and its Pods) until the templates are defaulted on purpose.
pub fn with_defaults_for(object: &Value, old: Option<&Value>, template_defaults: bool) -> Value {
    let mut obj = spec_defaults(object);
    pod_defaults::default_workload_templates(&mut obj, old, template_defaults);
    obj
}

pub(super) fn spec_defaults(object: &Value) -> Value {
    let mut obj = object.clone();
    let spec = obj
        .as_object_mut()
        .and_then(|o| o.get_mut("spec"))
        .and_then(Value::as_object_mut);
    let Some(spec) = spec else { return obj };
    spec.entry("replicas").or_insert(json!(1));
    spec.entry("revisionHistoryLimit").or_insert(json!(10));
    let strategy = spec.entry("updateStrategy").or_insert_with(|| json!({}));
    if let Some(strategy) = strategy.as_object_mut() {
        strategy.entry("type").or_insert(json!("ReCreate"));
        strategy.entry("partition").or_insert(json!(0));
        strategy.entry("maxUnavailable").or_insert(json!("20%"));
        strategy.entry("maxSurge").or_insert(json!(0));
        let in_place = matches!(
            strategy.get("type").and_then(Value::as_str),
            Some("InPlaceIfPossible" | "InPlaceOnly")
        );
        if in_place {
            strategy
                .entry("inPlaceUpdateStrategy")
                .or_insert_with(|| json!({}));
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
