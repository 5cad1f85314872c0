//! A Pod as the workload controllers cache it: the fields their plans read, with
//! k8s-openapi's names and types, and nothing else.
//!
//! Why not k8s-openapi's `Pod`: its structs are large even when their fields are unset
//! (`Container` 2120 bytes, `PodSpec` 1416, `ContainerStatus` 752: every probe, lifecycle
//! handler and security context is inline), and a CloneSet of 10 000 Pods keeps 10 000 of
//! them. This view decodes from the same JSON (unknown fields are skipped while decoding,
//! never allocated), reads the same way (`pod.spec.as_ref()?.containers`,
//! `pod.status.as_ref()?.conditions`), and implements [`kube::Resource`], so an
//! `Api<kruise_api::pod::Pod>` patches and reads Pods as this view. A Pod is never created
//! or replaced from it: creations build k8s-openapi's `Pod` from the template, and every
//! other write is a patch of the fields it names.
//!
//! [`PodView`] is what Pod predicates read, for this view and k8s-openapi's `Pod` alike.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, ContainerResizePolicy, ContainerState, EnvVar, PodCondition, PodReadinessGate,
    ResourceRequirements, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Serialize};

/// `core/v1` Pod, as cached by the workload controllers.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Pod {
    pub metadata: ObjectMeta,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<PodStatus>,
}

/// The part of `PodSpec` the plans read.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodSpec {
    pub containers: Vec<Container>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_containers: Option<Vec<Container>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Boxed: set on few Pods but those of an Advanced DaemonSet or a BroadcastJob (the
    /// term binding them to their node).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Box<Affinity>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub readiness_gates: Option<Vec<PodReadinessGate>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subdomain: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    /// Where the Pod may run (with `affinity`): read by BroadcastJob, which checks that
    /// an existing Pod still fits its node; the other workload caches prune them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
}

/// The part of `Container` the plans read: what an in-place update changes or checks
/// (its image, the env read from metadata, and for a resize in place
/// (`InPlaceWorkloadVerticalScaling`) its resources and resize policy; boxed, as they are
/// read only then).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Container {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Read for the values taken from the Pod's labels and annotations
    /// (`InPlaceUpdateEnvFromMetadata`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Box<Resources>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resize_policy: Option<Vec<ContainerResizePolicy>>,
}

/// The part of `PodStatus` the plans read.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<PodCondition>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_statuses: Option<Vec<ContainerStatus>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_container_statuses: Option<Vec<ContainerStatus>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
}

/// The part of `ContainerStatus` the plans read.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerStatus {
    pub name: String,
    pub image: String,
    #[serde(rename = "imageID")]
    pub image_id: String,
    #[serde(rename = "containerID", skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    pub ready: bool,
    pub restart_count: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<bool>,
    /// Boxed: read only for a container that is waiting or has terminated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<Box<ContainerState>>,
    /// The resources the kubelet has actuated (read after a resize in place).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Box<Resources>>,
}

/// A container's requests and limits (`ResourceRequirements` without `claims`), each a
/// short list rather than k8s-openapi's `BTreeMap`s: a B-tree node is several hundred
/// bytes even for the two entries (cpu, memory) a container has, and every cached Pod
/// holds two of them per container, twice (spec and status).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Resources {
    #[serde(skip_serializing_if = "ResourceList::is_empty")]
    pub limits: ResourceList,
    #[serde(skip_serializing_if = "ResourceList::is_empty")]
    pub requests: ResourceList,
}

/// Resource name -> quantity, in the order the apiserver sent them (a JSON object).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceList(pub Vec<(String, String)>);

impl ResourceList {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The quantity of `resource`, as written.
    pub fn get(&self, resource: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(name, _)| name == resource)
            .map(|(_, q)| q.as_str())
    }
}

impl From<&ResourceRequirements> for Resources {
    fn from(r: &ResourceRequirements) -> Self {
        let list = |m: &Option<
            BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        >| {
            ResourceList(
                m.iter()
                    .flatten()
                    .map(|(k, q)| (k.clone(), q.0.clone()))
                    .collect(),
            )
        };
        Resources {
            limits: list(&r.limits),
            requests: list(&r.requests),
        }
    }
}

impl Serialize for ResourceList {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ResourceList {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = ResourceList;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of resource names to quantities")
            }
            fn visit_unit<E>(self) -> Result<ResourceList, E> {
                Ok(ResourceList::default())
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut access: A,
            ) -> Result<ResourceList, A::Error> {
                let mut list = Vec::with_capacity(access.size_hint().unwrap_or(2).min(8));
                while let Some(entry) = access.next_entry::<String, String>()? {
                    list.push(entry);
                }
                Ok(ResourceList(list))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl k8s_openapi::Resource for Pod {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Pod";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for Pod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl From<&k8s_openapi::api::core::v1::Container> for Container {
    fn from(c: &k8s_openapi::api::core::v1::Container) -> Self {
        Container {
            name: c.name.clone(),
            image: c.image.clone(),
            env: c.env.clone(),
            resources: c.resources.as_ref().map(|r| Box::new(Resources::from(r))),
            resize_policy: c.resize_policy.clone(),
        }
    }
}

impl From<&k8s_openapi::api::core::v1::PodSpec> for PodSpec {
    /// The view of a whole spec (a template's, or an admission request's Pod's).
    fn from(s: &k8s_openapi::api::core::v1::PodSpec) -> Self {
        PodSpec {
            containers: s.containers.iter().map(Container::from).collect(),
            init_containers: s
                .init_containers
                .as_ref()
                .map(|l| l.iter().map(Container::from).collect()),
            node_name: s.node_name.clone(),
            affinity: s.affinity.clone().map(Box::new),
            readiness_gates: s.readiness_gates.clone(),
            hostname: s.hostname.clone(),
            subdomain: s.subdomain.clone(),
            restart_policy: s.restart_policy.clone(),
            node_selector: s.node_selector.clone(),
            tolerations: s.tolerations.clone(),
        }
    }
}

impl From<&k8s_openapi::api::core::v1::ContainerStatus> for ContainerStatus {
    fn from(c: &k8s_openapi::api::core::v1::ContainerStatus) -> Self {
        ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone(),
            image_id: c.image_id.clone(),
            container_id: c.container_id.clone(),
            ready: c.ready,
            restart_count: c.restart_count,
            started: c.started,
            state: c.state.clone().map(Box::new),
            resources: c.resources.as_ref().map(|r| Box::new(Resources::from(r))),
        }
    }
}

impl From<&k8s_openapi::api::core::v1::Pod> for Pod {
    /// The view of a whole Pod (an admission request's, or one just created).
    fn from(pod: &k8s_openapi::api::core::v1::Pod) -> Self {
        let statuses = |l: &Vec<k8s_openapi::api::core::v1::ContainerStatus>| {
            l.iter().map(ContainerStatus::from).collect()
        };
        Pod {
            metadata: pod.metadata.clone(),
            spec: pod.spec.as_ref().map(PodSpec::from),
            status: pod.status.as_ref().map(|s| PodStatus {
                phase: s.phase.clone(),
                conditions: s.conditions.clone(),
                container_statuses: s.container_statuses.as_ref().map(statuses),
                init_container_statuses: s.init_container_statuses.as_ref().map(statuses),
                start_time: s.start_time.clone(),
            }),
        }
    }
}

/// What Pod predicates read, from this view or from k8s-openapi's `Pod`.
pub trait PodView {
    fn meta(&self) -> &ObjectMeta;
    /// `status.phase`.
    fn phase(&self) -> Option<&str>;
    /// `spec.nodeName`.
    fn node_name(&self) -> Option<&str>;
    /// `status.conditions`.
    fn conditions(&self) -> &[PodCondition];
    /// `spec.readinessGates`.
    fn readiness_gates(&self) -> &[PodReadinessGate];
    /// `status.containerStatuses[*].restartCount`, regular containers only.
    fn restart_counts(&self) -> impl Iterator<Item = i32>;
    /// `spec.containers[*]`: name and image; `None` without a spec.
    fn container_images(&self) -> Option<impl Iterator<Item = (&str, Option<&str>)>>;
    /// `status.containerStatuses[*]`: name and image.
    fn status_images(&self) -> impl Iterator<Item = (&str, &str)>;
}

/// Both types name their fields alike, so one body serves both.
macro_rules! pod_view {
    ($pod:ty, $status:ty) => {
        impl StatusList<$status> for $pod {
            fn container_statuses(&self) -> &[$status] {
                self.status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_deref())
                    .unwrap_or_default()
            }
        }

        impl PodView for $pod {
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn phase(&self) -> Option<&str> {
                self.status.as_ref()?.phase.as_deref()
            }
            fn node_name(&self) -> Option<&str> {
                self.spec.as_ref()?.node_name.as_deref()
            }
            fn conditions(&self) -> &[PodCondition] {
                self.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_deref())
                    .unwrap_or_default()
            }
            fn readiness_gates(&self) -> &[PodReadinessGate] {
                self.spec
                    .as_ref()
                    .and_then(|s| s.readiness_gates.as_deref())
                    .unwrap_or_default()
            }
            fn restart_counts(&self) -> impl Iterator<Item = i32> {
                self.container_statuses().iter().map(|c| c.restart_count)
            }
            fn container_images(&self) -> Option<impl Iterator<Item = (&str, Option<&str>)>> {
                let spec = self.spec.as_ref()?;
                Some(
                    spec.containers
                        .iter()
                        .map(|c| (c.name.as_str(), c.image.as_deref())),
                )
            }
            fn status_images(&self) -> impl Iterator<Item = (&str, &str)> {
                self.container_statuses()
                    .iter()
                    .map(|c| (c.name.as_str(), c.image.as_str()))
            }
        }
    };
}

/// `status.containerStatuses`, for the bodies of `pod_view!`.
trait StatusList<S> {
    fn container_statuses(&self) -> &[S];
}

pod_view!(Pod, ContainerStatus);
pod_view!(
    k8s_openapi::api::core::v1::Pod,
    k8s_openapi::api::core::v1::ContainerStatus
);

/// A reference or a shared pointer reads as what it points to, so predicates take
/// `&&Pod` and `&Arc<Pod>` from iterators as they come.
macro_rules! pod_view_through {
    ($($pointer:ty),*) => {$(
        impl<T: PodView + ?Sized> PodView for $pointer {
            fn meta(&self) -> &ObjectMeta {
                (**self).meta()
            }
            fn phase(&self) -> Option<&str> {
                (**self).phase()
            }
            fn node_name(&self) -> Option<&str> {
                (**self).node_name()
            }
            fn conditions(&self) -> &[PodCondition] {
                (**self).conditions()
            }
            fn readiness_gates(&self) -> &[PodReadinessGate] {
                (**self).readiness_gates()
            }
            fn restart_counts(&self) -> impl Iterator<Item = i32> {
                (**self).restart_counts()
            }
            fn container_images(&self) -> Option<impl Iterator<Item = (&str, Option<&str>)>> {
                (**self).container_images()
            }
            fn status_images(&self) -> impl Iterator<Item = (&str, &str)> {
                (**self).status_images()
            }
        }
    )*};
}

pod_view_through!(&T, std::sync::Arc<T>, Box<T>);

/// What the env hash reads of a container (`kruise_inplace::envhash`), from this view's
/// `Container` or k8s-openapi's.
pub trait ContainerView {
    fn env(&self) -> &[EnvVar];
}

macro_rules! container_view {
    ($container:ty) => {
        impl ContainerView for $container {
            fn env(&self) -> &[EnvVar] {
                self.env.as_deref().unwrap_or_default()
            }
        }
    };
}

container_view!(Container);
container_view!(k8s_openapi::api::core::v1::Container);

impl<T: ContainerView + ?Sized> ContainerView for &T {
    fn env(&self) -> &[EnvVar] {
        (**self).env()
    }
}

#[cfg(test)]
mod tests;
