//! Strategic merge of a JSON patch into an object (Kubernetes' strategic-merge-patch for
//! the Pod fields subset patches touch): shared by UnitedDeployment's subset patches (Pod
//! templates) and WorkloadSpread's (Pods). Pure.

use serde_json::Value;

/// The merge key of a Pod-template list in a strategic-merge patch (Kubernetes'
/// `patchMergeKey` of the fields a subset patch touches); lists without one are
/// replaced.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "readinessGates" => Some(match field {
            "readinessGates" => "conditionType",
            _ => "name",
        }),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "ports" => Some("containerPort"),
        "hostAliases" => Some("ip"),
        _ => None,
    }
}

/// A strategic merge of `patch` into `target`: objects merge, `null` deletes, lists with
/// a merge key merge element by element, other lists and values are replaced.
pub fn strategic_merge(target: &mut Value, patch: &Value, field: &str) {
    match (target, patch, merge_key(field)) {
        (Value::Object(t), Value::Object(p), _) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else if let Some(existing) = t.get_mut(k) {
                    strategic_merge(existing, v, k);
                } else {
                    t.insert(k.clone(), v.clone());
                }
            }
        }
        (Value::Array(t), Value::Array(p), Some(key)) => {
            for item in p {
                let id = item.get(key);
                match t.iter_mut().find(|e| id.is_some() && e.get(key) == id) {
                    Some(existing) => strategic_merge(existing, item, ""),
                    None => t.push(item.clone()),
                }
            }
        }
        (t, p, _) => *t = p.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_rules() {
        let mut target = json!({"a": {"b": 1, "c": 2}, "containers": [{"name": "x", "image": "1"}], "args": [1, 2]});
        strategic_merge(
            &mut target,
            &json!({"a": {"c": null, "d": 3}, "containers": [{"name": "x", "image": "2"}, {"name": "y"}], "args": [3]}),
            "",
        );
        assert_eq!(
            target,
            json!({"a": {"b": 1, "d": 3}, "containers": [{"name": "x", "image": "2"}, {"name": "y"}], "args": [3]})
        );
    }
}
