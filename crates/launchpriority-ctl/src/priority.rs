//! The webhook's pure part (openkruise/kruise v1.9.0
//! pkg/webhook/pod/mutating/container_launch_priority_initialization.go and
//! pkg/util/containerlaunchpriority/container_launch_priority.go): which launch priority each
//! container of a new Pod gets, and the Pod with the barrier env that holds each container back
//! until its priority's key exists in `<pod>-barrier`.
//!
//! Works on the Pod's JSON as the apiserver sent it, so fields our types do not model
//! survive the patch untouched.

use kruise_api::keys;
use kruise_runtime::webhook::field::{self, FieldError};
use serde_json::{Value, json};

/// What the webhook does with a new Pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// One container, no priorities, or all priorities equal: nothing to order.
    Untouched,
    /// The priority of each container, in the order of `spec.containers`.
    Barriers(Vec<i32>),
    /// A `KRUISE_CONTAINER_PRIORITY` that is not an integer in range.
    Invalid(Vec<FieldError>),
}

fn containers(pod: &Value) -> &[Value] {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn is_ordered(pod: &Value) -> bool {
    pod.pointer("/metadata/annotations")
        .and_then(|a| a.get(keys::CONTAINER_LAUNCH_PRIORITY))
        .and_then(Value::as_str)
        == Some(keys::CONTAINER_LAUNCH_PRIORITY_ORDERED)
}

/// One container's `KRUISE_CONTAINER_PRIORITY` (0 without it).
fn env_priority(container: &Value, path: &str) -> Result<i32, FieldError> {
    let env = container
        .get("env")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let Some((j, var)) = env.iter().enumerate().find(|(_, e)| {
        e.get("name").and_then(Value::as_str) == Some(keys::KRUISE_CONTAINER_PRIORITY)
    }) else {
        return Ok(0);
    };
    let range = format!(
        "must be an integer in [{}, {}]",
        keys::CONTAINER_PRIORITY_MIN,
        keys::CONTAINER_PRIORITY_MAX
    );
    if var.get("valueFrom").is_some_and(|v| !v.is_null()) {
        // The value is only known to the kubelet; the order must be decided now.
        return Err(field::invalid_detail(
            format!("{path}.env[{j}].valueFrom"),
            format!(
                "{} must be a literal value that {range}",
                keys::KRUISE_CONTAINER_PRIORITY
            ),
        ));
    }
    let raw = var.get("value").and_then(Value::as_str).unwrap_or_default();
    raw.trim()
        .parse::<i64>()
        .ok()
        .filter(|p| {
            (i64::from(keys::CONTAINER_PRIORITY_MIN)..=i64::from(keys::CONTAINER_PRIORITY_MAX))
                .contains(p)
        })
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| field::invalid(format!("{path}.env[{j}].value"), format!("{raw:?}"), range))
}

/// As upstream's `getPriority`: `Ordered` gives container *i* priority −i; otherwise each
/// container's `KRUISE_CONTAINER_PRIORITY`. Only Pods with more than one container are ordered.
pub fn decide(pod: &Value) -> Decision {
    let containers = containers(pod);
    if containers.len() < 2 {
        return Decision::Untouched;
    }
    let priorities: Vec<i32> = if is_ordered(pod) {
        // At most 2^31 - 1 containers fit in a Pod long before this could overflow.
        (0..containers.len())
            .map(|i| -i32::try_from(i).unwrap_or(i32::MAX))
            .collect()
    } else {
        let mut priorities = Vec::with_capacity(containers.len());
        let mut errors = Vec::new();
        for (i, c) in containers.iter().enumerate() {
            match env_priority(c, &format!("spec.containers[{i}]")) {
                Ok(p) => priorities.push(p),
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return Decision::Invalid(errors);
        }
        priorities
    };
    if priorities.windows(2).all(|w| w[0] == w[1]) {
        return Decision::Untouched;
    }
    Decision::Barriers(priorities)
}

/// The barrier ConfigMap's name for a Pod.
pub fn barrier_name(pod_name: &str) -> String {
    format!("{pod_name}{}", keys::CONTAINER_BARRIER_CONFIGMAP_SUFFIX)
}

/// The barrier key of a priority: `p_<priority>`.
pub fn barrier_key(priority: i32) -> String {
    format!("{}{priority}", keys::CONTAINER_BARRIER_KEY_PREFIX)
}

/// The priority a barrier key stands for (`p_-1` → -1).
pub fn key_priority(key: &str) -> Option<i32> {
    key.strip_prefix(keys::CONTAINER_BARRIER_KEY_PREFIX)?
        .parse()
        .ok()
}

/// The Pod with its barriers (upstream's `setPodEnv` and `GeneratePriorityEnv`): a concrete name
/// (`name`: the Pod's own, or one the caller generated from `generateName`), the label the barrier
/// controller watches, and in every container the env `KRUISE_CONTAINER_BARRIER` reading
/// `p_<priority>` from `<name>-barrier`. A barrier env already there (the webhook called again
/// after a later webhook added a container) is replaced, so calling it twice changes nothing.
pub fn with_barriers(pod: &Value, name: &str, priorities: &[i32]) -> Value {
    let mut out = pod.clone();
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("name".into(), json!(name));
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if !labels.is_object() {
            *labels = json!({});
        }
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(keys::CONTAINER_LAUNCH_BARRIER_LABEL.into(), json!("true"));
        }
    }
    let barrier = barrier_name(name);
    if let Some(containers) = out
        .pointer_mut("/spec/containers")
        .and_then(Value::as_array_mut)
    {
        for (c, priority) in containers.iter_mut().zip(priorities) {
            let Some(c) = c.as_object_mut() else { continue };
            let env = c.entry("env").or_insert_with(|| json!([]));
            if !env.is_array() {
                *env = json!([]);
            }
            if let Some(env) = env.as_array_mut() {
                env.retain(|e| {
                    e.get("name").and_then(Value::as_str) != Some(keys::KRUISE_CONTAINER_BARRIER)
                });
                env.push(json!({
                    "name": keys::KRUISE_CONTAINER_BARRIER,
                    "valueFrom": {"configMapKeyRef": {"name": barrier, "key": barrier_key(*priority)}},
                }));
            }
        }
    }
    out
}

/// The Pod's name, or `None` when it has only `generateName` (the caller generates one:
/// the barrier's name must be known before the apiserver names the Pod).
pub fn pod_name(pod: &Value) -> Option<&str> {
    pod.pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
}

/// `generateName` plus a suffix, as the apiserver's name generator would.
pub fn generated_name(pod: &Value, suffix: &str) -> String {
    let base = pod
        .pointer("/metadata/generateName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    // The apiserver trims the base so the whole name stays within 63 characters.
    const MAX_BASE: usize = 63 - 5;
    let base: String = base.chars().take(MAX_BASE).collect();
    format!("{base}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pod(annotations: Value, containers: Value) -> Value {
        json!({"metadata": {"name": "p", "annotations": annotations}, "spec": {"containers": containers}})
    }

    fn with_env(name: &str, value: &str) -> Value {
        json!({"name": name, "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": value}]})
    }

    #[test]
    fn ordered_gives_container_i_priority_minus_i() {
        // N5: [sidecar, main] → p_0, p_-1.
        let p = pod(
            json!({"apps.kruise.io/container-launch-priority": "Ordered"}),
            json!([{"name": "sidecar"}, {"name": "main"}]),
        );
        assert_eq!(decide(&p), Decision::Barriers(vec![0, -1]));
        let patched = with_barriers(&p, "p", &[0, -1]);
        let key = |i: usize| {
            patched["spec"]["containers"][i]["env"][0]["valueFrom"]["configMapKeyRef"].clone()
        };
        assert_eq!(key(0), json!({"name": "p-barrier", "key": "p_0"}));
        assert_eq!(key(1), json!({"name": "p-barrier", "key": "p_-1"}));
        assert_eq!(
            patched["metadata"]["labels"][keys::CONTAINER_LAUNCH_BARRIER_LABEL],
            "true"
        );
    }

    #[test]
    fn env_priorities_missing_means_zero() {
        // N6: [main (no env), sidecar (1)] → p_0, p_1.
        let p = pod(
            json!({}),
            json!([{"name": "main"}, with_env("sidecar", "1")]),
        );
        assert_eq!(decide(&p), Decision::Barriers(vec![0, 1]));
    }

    #[test]
    fn one_container_or_equal_priorities_are_untouched() {
        let one = pod(
            json!({"apps.kruise.io/container-launch-priority": "Ordered"}),
            json!([{"name": "only"}]),
        );
        assert_eq!(decide(&one), Decision::Untouched);
        let equal = pod(json!({}), json!([with_env("a", "3"), with_env("b", "3")]));
        assert_eq!(decide(&equal), Decision::Untouched);
        let zeros = pod(json!({}), json!([with_env("a", "0"), {"name": "b"}]));
        assert_eq!(decide(&zeros), Decision::Untouched);
        // Only the exact value orders by position.
        let other = pod(
            json!({"apps.kruise.io/container-launch-priority": "ordered"}),
            json!([{"name": "a"}, {"name": "b"}]),
        );
        assert_eq!(decide(&other), Decision::Untouched);
    }

    #[test]
    fn bad_priorities_name_the_field() {
        let p = pod(
            json!({}),
            json!([
                with_env("a", "high"),
                with_env("b", "2147483648"),
                with_env("c", "-2147483648")
            ]),
        );
        let Decision::Invalid(errors) = decide(&p) else {
            panic!("expected invalid")
        };
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages[0],
            "spec.containers[0].env[0].value: Invalid value: \"high\": must be an integer in [-2147483647, 2147483647]"
        );
        assert!(
            messages[1]
                .starts_with("spec.containers[1].env[0].value: Invalid value: \"2147483648\"")
        );
        assert!(messages[2].starts_with("spec.containers[2].env[0].value"));
        let from = pod(
            json!({}),
            json!([{"name": "a", "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}, {"name": "b"}]),
        );
        assert!(
            matches!(decide(&from), Decision::Invalid(e) if e[0].path == "spec.containers[0].env[0].valueFrom")
        );
        // The extremes of the range are accepted.
        let edges = pod(
            json!({}),
            json!([with_env("a", "2147483647"), with_env("b", "-2147483647")]),
        );
        assert_eq!(
            decide(&edges),
            Decision::Barriers(vec![i32::MAX, -i32::MAX])
        );
    }

    #[test]
    fn a_second_call_replaces_the_barrier_and_keeps_other_env() {
        let p = pod(
            json!({}),
            json!([with_env("main", "1"), {"name": "side", "env": [{"name": "X", "value": "y"}]}]),
        );
        let once = with_barriers(&p, "p", &[1, 0]);
        assert_eq!(with_barriers(&once, "p", &[1, 0]), once);
        assert_eq!(
            once["spec"]["containers"][1]["env"][0],
            json!({"name": "X", "value": "y"})
        );
        assert_eq!(
            once["spec"]["containers"][1]["env"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn generated_names_keep_within_63_characters() {
        let p = json!({"metadata": {"generateName": "web-"}});
        assert_eq!(pod_name(&p), None);
        assert_eq!(generated_name(&p, "abcde"), "web-abcde");
        let long = json!({"metadata": {"generateName": "x".repeat(80)}});
        assert_eq!(generated_name(&long, "abcde").len(), 63);
    }

    #[test]
    fn keys_round_trip() {
        assert_eq!(key_priority(&barrier_key(-7)), Some(-7));
        assert_eq!(key_priority("q_1"), None);
    }

    proptest! {
        /// Whatever the priorities: every container gets exactly one barrier, naming its
        /// own priority's key, and the rest of its env in order.
        #[test]
        fn every_container_gets_one_barrier_with_its_priority(
            priorities in proptest::collection::vec(-5i32..5, 2..6),
        ) {
            let containers: Vec<Value> = priorities
                .iter()
                .enumerate()
                .map(|(i, p)| with_env(&format!("c{i}"), &p.to_string()))
                .collect();
            let p = pod(json!({}), Value::Array(containers));
            let decision = decide(&p);
            if priorities.windows(2).all(|w| w[0] == w[1]) {
                prop_assert_eq!(decision, Decision::Untouched);
            } else {
                prop_assert_eq!(&decision, &Decision::Barriers(priorities.clone()));
                let out = with_barriers(&p, "n", &priorities);
                for (i, prio) in priorities.iter().enumerate() {
                    let env = out["spec"]["containers"][i]["env"].as_array().unwrap();
                    let barriers: Vec<&Value> = env.iter().filter(|e| e["name"] == keys::KRUISE_CONTAINER_BARRIER).collect();
                    prop_assert_eq!(barriers.len(), 1);
                    prop_assert_eq!(&barriers[0]["valueFrom"]["configMapKeyRef"]["key"], &json!(barrier_key(*prio)));
                    prop_assert_eq!(&env[0]["name"], &json!(keys::KRUISE_CONTAINER_PRIORITY));
                }
            }
        }
    }
}
