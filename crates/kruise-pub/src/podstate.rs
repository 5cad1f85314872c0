//! What a PUB needs to know about one Pod: is it available (openkruise/kruise v1.9.0 pkg/controller/podunavailablebudget/podunavailablebudget_controller.go), and what a
//! request does to it (as in openkruise/kruise v1.9.0 pkg/control/pubcontrol/pub_control_utils.go: DELETE, EVICT, UPDATE, RESIZE, or nothing that can make
//! it unavailable). Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use kruise_api::keys;
use kruise_api::pod::PodView;
use kruise_api::policy_v1alpha1::PubOperation;
use kruise_ordering::predicates;

/// Annotations the kubelet puts on a static Pod's mirror (a static Pod cannot be resized).
const MIRROR_POD: &str = "kubernetes.io/config.mirror";
const CONFIG_SOURCE: &str = "kubernetes.io/config.source";

/// As in openkruise/kruise v1.9.0 pkg/controller/podunavailablebudget/podunavailablebudget_controller.go: Running and Ready, no `unavailable-pod.kruise.io/*` label, and consistent
/// (every container runs the image its spec names, no Kruise in-place update pending).
pub fn is_available(pod: &impl PodView) -> bool {
    predicates::is_running_and_ready(pod) && !has_unavailable_label(pod) && is_consistent(pod)
}

/// A label with the `unavailable-pod.kruise.io/` prefix marks the Pod unavailable.
pub fn has_unavailable_label(pod: &impl PodView) -> bool {
    unavailable_labels(pod.meta().labels.as_ref())
        .next()
        .is_some()
}

fn unavailable_labels(
    labels: Option<&BTreeMap<String, String>>,
) -> impl Iterator<Item = &String> + '_ {
    labels
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
        .filter(|k| k.starts_with(keys::PUB_UNAVAILABLE_POD_LABEL_PREFIX))
}

/// Every container runs the image its spec names (a sidecar or Kruise in-place upgrade
/// changes the spec first and the status when the kubelet restarted the container), and
/// Kruise's `InPlaceUpdateReady` gate is not held back.
pub fn is_consistent(pod: &impl PodView) -> bool {
    let Some(mut containers) = pod.container_images() else {
        return false;
    };
    let images_match = containers.all(|(name, image)| {
        pod.status_images()
            .find(|(status_name, _)| *status_name == name)
            .is_some_and(|(_, status_image)| same_image(image.unwrap_or_default(), status_image))
    });
    images_match && predicates::is_in_place_update_ready(pod)
}

/// The runtime reports images fully qualified (`docker.io/library/nginx:alpine` for
/// `nginx:alpine`) and a digest-pinned spec image by its digest.
fn same_image(spec: &str, status: &str) -> bool {
    if spec == status {
        return true;
    }
    use kruise_api::image::ImageRef;
    ImageRef::parse(spec).normalized() == ImageRef::parse(status).normalized()
}

/// openkruise/kruise v1.9.0 pkg/control/pubcontrol/pub_control_utils.go, UPDATE: `None` when the change cannot make the Pod unavailable (metadata
/// only, no `unavailable-pod.kruise.io/*` label added); RESIZE when the only spec change
/// is a CPU/memory resize without restart on a non-static Pod keeping its QoS class;
/// UPDATE otherwise.
pub fn classify_update(old: &Pod, new: &Pod) -> Option<PubOperation> {
    let label_added = unavailable_labels(new.metadata.labels.as_ref()).any(|k| {
        !old.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(k))
    });
    if old.spec == new.spec {
        return label_added.then_some(PubOperation::Update);
    }
    if !label_added && is_resize_only(old, new) {
        Some(PubOperation::Resize)
    } else {
        Some(PubOperation::Update)
    }
}

fn is_resize_only(old: &Pod, new: &Pod) -> bool {
    let (Some(old_spec), Some(new_spec)) = (&old.spec, &new.spec) else {
        return false;
    };
    if is_static(old) || old_spec.containers.len() != new_spec.containers.len() {
        return false;
    }
    // Everything but the containers' resources must be equal.
    let mut without_resources = new_spec.clone();
    for (n, o) in without_resources
        .containers
        .iter_mut()
        .zip(&old_spec.containers)
    {
        n.resources = o.resources.clone();
    }
    if &without_resources != old_spec {
        return false;
    }
    let no_restart = old_spec
        .containers
        .iter()
        .zip(&new_spec.containers)
        .all(|(o, n)| {
            changed_resources(o.resources.as_ref(), n.resources.as_ref())
                .into_iter()
                .all(|r| (r == "cpu" || r == "memory") && !restarts_on(n, &r))
        });
    no_restart && qos_class(old_spec.containers.as_slice()) == qos_class(&new_spec.containers)
}

fn is_static(pod: &Pod) -> bool {
    let a = pod.metadata.annotations.as_ref();
    a.is_some_and(|a| {
        a.contains_key(MIRROR_POD) || a.get(CONFIG_SOURCE).is_some_and(|s| s != "api")
    })
}

/// Resource names whose request or limit differs.
fn changed_resources(
    old: Option<&ResourceRequirements>,
    new: Option<&ResourceRequirements>,
) -> Vec<String> {
    let side = |r: Option<&ResourceRequirements>, limits: bool| {
        r.and_then(|r| {
            if limits {
                r.limits.clone()
            } else {
                r.requests.clone()
            }
        })
        .unwrap_or_default()
    };
    let mut changed = Vec::new();
    for limits in [false, true] {
        let (o, n) = (side(old, limits), side(new, limits));
        for name in o.keys().chain(n.keys()) {
            if o.get(name) != n.get(name) && !changed.contains(name) {
                changed.push(name.clone());
            }
        }
    }
    changed
}

/// The container's `resizePolicy` for `resource` says `RestartContainer` (the default,
/// `NotRequired`, resizes in place).
fn restarts_on(container: &Container, resource: &str) -> bool {
    container
        .resize_policy
        .iter()
        .flatten()
        .any(|p| p.resource_name == resource && p.restart_policy == "RestartContainer")
}

#[derive(Debug, PartialEq, Eq)]
enum Qos {
    Guaranteed,
    Burstable,
    BestEffort,
}

/// Kubernetes' QoS class from the regular containers' requests and limits (requests
/// default to limits).
fn qos_class(containers: &[Container]) -> Qos {
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        let r = c.resources.clone().unwrap_or_default();
        let limits = r.limits.unwrap_or_default();
        let requests = r.requests.unwrap_or_default();
        if !limits.is_empty() || !requests.is_empty() {
            any = true;
        }
        for resource in ["cpu", "memory"] {
            let limit = limits.get(resource);
            let request = requests.get(resource).or(limit);
            if limit.is_none() || request != limit {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => Qos::BestEffort,
        (true, true) => Qos::Guaranteed,
        (true, false) => Qos::Burstable,
    }
}

/// Fixtures shared by this crate's tests and, with the `testing` feature, its dependents'.
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// A Running, Ready Pod labelled `app=web` whose one container runs `image`.
    pub fn ready_pod(name: &str, image: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "main".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                container_statuses: Some(vec![ContainerStatus {
                    name: "main".into(),
                    image: image.into(),
                    ready: true,
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::ready_pod;
    use super::*;
    use k8s_openapi::api::core::v1::ContainerResizePolicy;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn resources(cpu: &str, mem: &str, guaranteed: bool) -> ResourceRequirements {
        let q = |v: &str| Quantity(v.into());
        let requests = BTreeMap::from([("cpu".into(), q(cpu)), ("memory".into(), q(mem))]);
        let limits = if guaranteed {
            requests.clone()
        } else {
            BTreeMap::from([("cpu".into(), q("4")), ("memory".into(), q("4Gi"))])
        };
        ResourceRequirements {
            requests: Some(requests),
            limits: Some(limits),
            ..Default::default()
        }
    }

    fn with_resources(mut pod: Pod, r: ResourceRequirements) -> Pod {
        pod.spec.as_mut().unwrap().containers[0].resources = Some(r);
        pod
    }

    #[test]
    fn a_running_ready_consistent_pod_is_available() {
        let pod = ready_pod("a", "nginx:alpine");
        assert!(is_available(&pod));
        let mut qualified = pod.clone();
        qualified
            .status
            .as_mut()
            .unwrap()
            .container_statuses
            .as_mut()
            .unwrap()[0]
            .image = "docker.io/library/nginx:alpine".into();
        assert!(is_available(&qualified));
    }

    #[test]
    fn unready_unavailable_labelled_or_mid_upgrade_pods_are_not_available() {
        let mut unready = ready_pod("a", "nginx:alpine");
        unready
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()[0]
            .status = "False".into();
        assert!(!is_available(&unready));
        let mut labelled = ready_pod("a", "nginx:alpine");
        labelled
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("unavailable-pod.kruise.io/maintenance".into(), "x".into());
        assert!(!is_available(&labelled));
        let mut upgrading = ready_pod("a", "nginx:alpine");
        upgrading.spec.as_mut().unwrap().containers[0].image = Some("nginx:1.27".into());
        assert!(!is_available(&upgrading));
        let mut pending = ready_pod("a", "nginx:alpine");
        pending.status.as_mut().unwrap().phase = Some("Pending".into());
        assert!(!is_available(&pending));
    }

    #[test]
    fn metadata_only_updates_are_not_checked() {
        let old = ready_pod("a", "nginx:alpine");
        let mut new = old.clone();
        new.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("tier".into(), "gold".into());
        new.metadata.annotations = Some(BTreeMap::from([("x".into(), "y".into())]));
        assert_eq!(classify_update(&old, &new), None);
    }

    #[test]
    fn adding_an_unavailable_label_or_changing_the_image_is_an_update() {
        let old = ready_pod("a", "nginx:alpine");
        let mut labelled = old.clone();
        labelled
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("unavailable-pod.kruise.io/x".into(), "1".into());
        assert_eq!(classify_update(&old, &labelled), Some(PubOperation::Update));
        // Keeping a label that was already there is not a new disruption.
        assert_eq!(classify_update(&labelled, &labelled.clone()), None);
        let mut image = old.clone();
        image.spec.as_mut().unwrap().containers[0].image = Some("nginx:1.27".into());
        assert_eq!(classify_update(&old, &image), Some(PubOperation::Update));
    }

    #[test]
    fn an_in_place_cpu_memory_resize_is_a_resize() {
        let old = with_resources(ready_pod("a", "i"), resources("1", "1Gi", false));
        let new = with_resources(ready_pod("a", "i"), resources("2", "2Gi", false));
        assert_eq!(classify_update(&old, &new), Some(PubOperation::Resize));
    }

    #[test]
    fn a_qos_change_a_restart_or_a_static_pod_make_a_resize_an_update() {
        let old = with_resources(ready_pod("a", "i"), resources("1", "1Gi", false));
        let qos = with_resources(ready_pod("a", "i"), resources("4", "4Gi", true));
        assert_eq!(classify_update(&old, &qos), Some(PubOperation::Update));
        let mut restart = with_resources(ready_pod("a", "i"), resources("2", "1Gi", false));
        restart.spec.as_mut().unwrap().containers[0].resize_policy =
            Some(vec![ContainerResizePolicy {
                resource_name: "cpu".into(),
                restart_policy: "RestartContainer".into(),
            }]);
        let mut old_with_policy = old.clone();
        old_with_policy.spec.as_mut().unwrap().containers[0].resize_policy =
            restart.spec.as_ref().unwrap().containers[0]
                .resize_policy
                .clone();
        assert_eq!(
            classify_update(&old_with_policy, &restart),
            Some(PubOperation::Update)
        );
        let mut static_old = old.clone();
        static_old.metadata.annotations = Some(BTreeMap::from([(MIRROR_POD.into(), "x".into())]));
        let mut static_new = with_resources(ready_pod("a", "i"), resources("2", "2Gi", false));
        static_new.metadata.annotations = static_old.metadata.annotations.clone();
        assert_eq!(
            classify_update(&static_old, &static_new),
            Some(PubOperation::Update)
        );
        // Resources plus anything else: an update.
        let mut both = with_resources(ready_pod("a", "j"), resources("2", "2Gi", false));
        both.metadata = old.metadata.clone();
        assert_eq!(classify_update(&old, &both), Some(PubOperation::Update));
    }
}
