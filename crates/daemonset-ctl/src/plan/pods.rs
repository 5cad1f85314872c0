//! A new daemon Pod for a node (upstream `NewPod`, `openkruise/kruise v1.9.0
//! pkg/controller/daemonset/daemonset_controller.go`).

use k8s_openapi::api::core::v1::Pod as NewPod;
use k8s_openapi::api::core::v1::{PodReadinessGate, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kruise_api::apps_v1alpha1::{DaemonSet, RollingUpdateType};
use kruise_api::appspub::LifecycleState;
use kruise_api::keys;
use kruise_workload::revision;

use super::World;
use super::nodes::{bind_to_node, with_daemon_tolerations};

/// The controller reference a daemon Pod carries.
pub fn controller_reference(ds: &DaemonSet) -> OwnerReference {
    kruise_runtime::meta::controller_owner_reference(ds)
}

/// The Pod for `node` at the current revision: the template, `generateName:
/// <name>-`, label `controller-revision-hash` (and `pod-template-generation` under the
/// deprecated annotation), the daemon tolerations, the required affinity term pinning
/// it to `node` (the scheduler binds it), the `InPlaceUpdateReady` gate for
/// `InPlaceIfPossible`, and with lifecycle hooks the `KruisePodReady` gate and state
/// `Normal`.
pub fn new_pod(world: &World, node: &str) -> NewPod {
    let ds = world.ds;
    let template: PodTemplateSpec = revision::template_of(world.update_revision)
        .and_then(|t| serde_json::from_value(t).ok())
        .unwrap_or_else(|| ds.spec.template.clone());
    let meta = template.metadata.unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(keys::CONTROLLER_REVISION_HASH.into(), world.hash().into());
    if let Some(generation) = world.template_generation() {
        labels.insert(keys::POD_TEMPLATE_GENERATION.into(), generation.into());
    }

    let mut spec = template.spec.unwrap_or_default();
    spec.tolerations = Some(with_daemon_tolerations(&spec));
    bind_to_node(&mut spec, node);
    let mut gates = spec.readiness_gates.take().unwrap_or_default();
    let mut gate = |condition_type: &str| {
        if !gates.iter().any(|g| g.condition_type == condition_type) {
            gates.push(PodReadinessGate {
                condition_type: condition_type.into(),
            });
        }
    };
    if world.rolling_update_type() == RollingUpdateType::InPlaceIfPossible {
        gate(keys::INPLACE_UPDATE_READY);
    }
    let lifecycle = world.lifecycle();
    if lifecycle.is_some_and(|l| l.pre_delete.as_ref().is_some_and(|h| h.mark_pod_not_ready)) {
        gate(keys::KRUISE_POD_READY);
    }
    spec.readiness_gates = (!gates.is_empty()).then_some(gates);

    let mut pod = NewPod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", world.name())),
            namespace: ds.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![controller_reference(ds)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    };
    if lifecycle.is_some() {
        kruise_lifecycle::set_state(&mut pod, LifecycleState::Normal, world.now);
    }
    pod
}
