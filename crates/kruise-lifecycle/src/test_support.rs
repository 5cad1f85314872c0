//! Pod builders shared by the unit tests.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodCondition, PodReadinessGate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::appspub::{LifecycleHook, LifecycleState};
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_api::pod::PodSpec;

use crate::Transition;

pub fn t(seconds: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(seconds).expect("valid test time")
}

pub fn pod() -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("demo-abcde".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodSpec::default()),
        ..Default::default()
    }
}

pub fn pod_in(state: LifecycleState) -> Pod {
    with_label(pod(), keys::LIFECYCLE_STATE, state.as_str())
}

pub fn with_label(mut pod: Pod, key: &str, value: &str) -> Pod {
    pod.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(key.into(), value.into());
    pod
}

pub fn with_finalizer(mut pod: Pod, finalizer: &str) -> Pod {
    pod.metadata
        .finalizers
        .get_or_insert_with(Vec::new)
        .push(finalizer.into());
    pod
}

pub fn scheduled(mut pod: Pod) -> Pod {
    pod.spec.get_or_insert_default().node_name = Some("node-1".into());
    pod
}

pub fn with_gate(mut pod: Pod, condition_type: &str) -> Pod {
    pod.spec
        .get_or_insert_default()
        .readiness_gates
        .get_or_insert_with(Vec::new)
        .push(PodReadinessGate {
            condition_type: condition_type.into(),
        });
    pod
}

/// A Pod with readiness gate `KruisePodReady`.
pub fn gated(pod: Pod) -> Pod {
    with_gate(pod, keys::KRUISE_POD_READY)
}

/// Adds or replaces the condition of the same type.
pub fn with_condition(mut pod: Pod, condition: PodCondition) -> Pod {
    let conditions = pod
        .status
        .get_or_insert_default()
        .conditions
        .get_or_insert_with(Vec::new);
    conditions.retain(|c| c.type_ != condition.type_);
    conditions.push(condition);
    pod
}

/// Containers ready and Pod Ready, as the kubelet reports a healthy Pod.
pub fn running_ready(pod: Pod) -> Pod {
    let condition = |type_: &str| PodCondition {
        type_: type_.into(),
        status: "True".into(),
        ..Default::default()
    };
    with_condition(
        with_condition(pod, condition("ContainersReady")),
        condition("Ready"),
    )
}

pub fn finalizer_hook(finalizers: &[&str]) -> LifecycleHook {
    LifecycleHook {
        finalizers_handler: finalizers.iter().map(|f| f.to_string()).collect(),
        ..Default::default()
    }
}

pub fn label_hook(labels: &[(&str, &str)]) -> LifecycleHook {
    LifecycleHook {
        labels_handler: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

pub fn annotation(pod: &Pod, key: &str) -> Option<String> {
    pod.metadata.annotations.as_ref()?.get(key).cloned()
}

pub fn pod_condition_status(pod: &Pod, type_: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

pub fn apply_status_patch(pod: &Pod, patch: &serde_json::Value) -> Pod {
    Transition {
        to: LifecycleState::Normal,
        metadata_patch: serde_json::json!({}),
        status_patch: Some(patch.clone()),
    }
    .apply_to(pod)
}
