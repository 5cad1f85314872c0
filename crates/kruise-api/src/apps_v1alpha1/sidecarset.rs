//! `SidecarSet` (`apps.kruise.io/v1alpha1`, cluster-scoped): sidecar containers and
//! volumes injected into matching Pods at creation, then upgraded in place (cold or hot)
//! under partition, maxUnavailable, selector, priority and scatter rules.
//!
//! Besides the CRD types this module holds the JSON shapes of the Pod annotations the
//! injector and the controller write ([`SidecarSetUpgradeSpec`], [`SidecarSetInPlaceUpdateState`]);
//! the annotation keys themselves live in [`crate::keys`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, LocalObjectReference, ObjectFieldSelector, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::appspub::{InPlaceUpdateState, UpdatePriorityStrategy, UpdateScatterStrategy};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "SidecarSet",
    plural = "sidecarsets",
    singular = "sidecarset",
    status = "SidecarSetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "SidecarSet injects sidecar containers into matching Pods and upgrades them in place.",
    printcolumn(
        name = "MATCHED",
        type_ = "integer",
        json_path = ".status.matchedPods",
        description = "The number of pods matched."
    ),
    printcolumn(
        name = "UPDATED",
        type_ = "integer",
        json_path = ".status.updatedPods",
        description = "The number of pods matched and updated."
    ),
    printcolumn(
        name = "READY",
        type_ = "integer",
        json_path = ".status.readyPods",
        description = "The number of pods matched and ready."
    ),
    printcolumn(
        name = "AGE",
        type_ = "date",
        json_path = ".metadata.creationTimestamp",
        description = "CreationTimestamp is a timestamp representing the server time when this object was created."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetSpec {
    /// Label query over the Pods to inject into; required (checked by the webhook).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Only match Pods in this namespace; empty matches every namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Only match Pods whose Namespace has these labels; exclusive with `namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Init containers appended (sorted by name) to new Pods; never upgraded in place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_list")]
    pub init_containers: Vec<SidecarContainer>,
    /// Sidecar containers injected into new Pods and upgraded in place afterwards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_list")]
    pub containers: Vec<SidecarContainer>,
    /// Volumes the sidecars may mount; only the mounted ones are merged into the Pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_list")]
    pub volumes: Vec<Volume>,
    /// How already-injected Pods are upgraded to the latest sidecars.
    #[serde(default, skip_serializing_if = "SidecarSetUpdateStrategy::is_empty")]
    pub update_strategy: SidecarSetUpdateStrategy,
    /// How sidecars are injected into newly created Pods.
    #[serde(default, skip_serializing_if = "SidecarSetInjectionStrategy::is_empty")]
    pub injection_strategy: SidecarSetInjectionStrategy,
    /// Pull secrets added (deduplicated by name) to the Pods the sidecars are injected into.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// ControllerRevisions to keep. Defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Pod annotations injected with the sidecars and re-applied on in-place upgrade.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patch_pod_metadata: Vec<SidecarSetPatchPodMetadata>,
}

impl SidecarSetSpec {
    /// Every sidecar the set defines: `initContainers` first, then `containers`.
    pub fn all_containers(&self) -> impl Iterator<Item = &SidecarContainer> {
        self.init_containers.iter().chain(self.containers.iter())
    }
}

/// A core `Container` plus the SidecarSet injection and upgrade settings (all inline).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SidecarContainer {
    /// The container itself, with every core field at the same level as the extras below.
    #[serde(flatten)]
    pub container: Container,
    /// Where the sidecar goes in `pod.spec.containers`. Defaults to BeforeAppContainer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_inject_policy: Option<PodInjectPolicyType>,
    /// Cold (stop then start) or hot (two twins) upgrade of this sidecar.
    #[serde(
        default,
        skip_serializing_if = "SidecarContainerUpgradeStrategy::is_empty"
    )]
    pub upgrade_strategy: SidecarContainerUpgradeStrategy,
    /// When enabled, the sidecar also mounts every volumeMount of the app containers.
    #[serde(default, skip_serializing_if = "ShareVolumePolicy::is_empty")]
    pub share_volume_policy: ShareVolumePolicy,
    /// When enabled, the sidecar also gets every volumeDevice of the app containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_volume_device_policy: Option<ShareVolumePolicy>,
    /// Env vars copied from an app container of the Pod at injection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transfer_env: Vec<TransferEnvVar>,
    /// Sidecar resources computed from the matching app containers at injection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_policy: Option<ResourcesPolicy>,
}

impl SidecarContainer {
    /// The container name.
    pub fn name(&self) -> &str {
        &self.container.name
    }

    /// `podInjectPolicy`, defaulted.
    pub fn inject_policy(&self) -> PodInjectPolicyType {
        self.pod_inject_policy.unwrap_or_default()
    }

    /// `upgradeStrategy.upgradeType`, defaulted.
    pub fn upgrade_type(&self) -> SidecarContainerUpgradeType {
        self.upgrade_strategy.upgrade_type.unwrap_or_default()
    }

    /// Whether this sidecar is upgraded with two twins (`<name>-1`, `<name>-2`).
    pub fn is_hot_upgrade(&self) -> bool {
        self.upgrade_type() == SidecarContainerUpgradeType::HotUpgrade
    }
}

/// Position of an injected sidecar relative to the Pod's own containers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PodInjectPolicyType {
    /// In front of the Pod's containers.
    #[default]
    BeforeAppContainer,
    /// After the Pod's containers.
    AfterAppContainer,
}

/// `shareVolumePolicy` / `shareVolumeDevicePolicy`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShareVolumePolicy {
    /// `enabled` or `disabled` (the default).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ShareVolumePolicyType>,
}

impl ShareVolumePolicy {
    fn is_empty(&self) -> bool {
        self.type_.is_none()
    }

    /// Whether sharing is switched on.
    pub fn is_enabled(&self) -> bool {
        self.type_ == Some(ShareVolumePolicyType::Enabled)
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ShareVolumePolicyType {
    /// Share the app containers' mounts (or devices).
    Enabled,
    /// Mount only what the sidecar declares.
    #[default]
    Disabled,
}

/// One `transferEnv` entry: env vars copied from another container of the Pod.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransferEnvVar {
    /// Name of the container to copy from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_container_name: String,
    /// Reads the source container name from a Pod label or annotation instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_container_name_from: Option<SourceContainerNameSource>,
    /// One env var to copy.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub env_name: String,
    /// More env vars to copy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_names: Vec<String>,
}

impl TransferEnvVar {
    /// `envName` followed by `envNames`, skipping empty names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.env_name.as_str())
            .chain(self.env_names.iter().map(String::as_str))
            .filter(|n| !n.is_empty())
    }
}

/// Where to read the source container name from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceContainerNameSource {
    /// `metadata.labels['<key>']` or `metadata.annotations['<key>']` of the Pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<ObjectFieldSelector>,
}

/// `upgradeStrategy` of one sidecar container.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarContainerUpgradeStrategy {
    /// ColdUpgrade (the default) or HotUpgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_type: Option<SidecarContainerUpgradeType>,
    /// Image of the idle twin during a hot upgrade (same config, does no work).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hot_upgrade_empty_image: String,
}

impl SidecarContainerUpgradeStrategy {
    fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SidecarContainerUpgradeType {
    /// Stop the old container, start the new one.
    #[default]
    ColdUpgrade,
    /// Upgrade the idle twin, migrate in its postStart hook, then reset the old one.
    HotUpgrade,
}

/// `resourcesPolicy`: derive the sidecar's resources from the app containers it serves.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesPolicy {
    /// Aggregate the matching containers' resources by `sum` or `max`.
    #[serde(alias = "targetContainersMode")]
    pub target_container_mode: TargetContainerMode,
    /// Regex over container names selecting the containers to aggregate (e.g. `.*`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target_containers_name_regex: String,
    /// Expressions over the aggregate (e.g. `max(cpu*50%, 50m)`) giving limits and requests.
    #[serde(default, alias = "resourcesExpr")]
    pub resource_expr: ResourceExpr,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TargetContainerMode {
    /// Add up the matching containers' resources.
    #[default]
    Sum,
    /// Take the largest of the matching containers' resources.
    Max,
}

/// `resourcesPolicy.resourceExpr`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceExpr {
    /// Expressions for `resources.limits`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceExprValues>,
    /// Expressions for `resources.requests`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<ResourceExprValues>,
}

/// CPU and memory expressions of `resourceExpr.limits` / `resourceExpr.requests`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceExprValues {
    /// CPU expression, e.g. `max(cpu*50%, 50m)`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpu: String,
    /// Memory expression, e.g. `100Mi`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub memory: String,
}

/// `updateStrategy`: how injected Pods are upgraded in place.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetUpdateStrategy {
    /// RollingUpdate (the default) or NotUpdate (inject only, never upgrade).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<SidecarSetUpdateStrategyType>,
    /// Stop upgrading existing Pods; injection into new Pods goes on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Canary: only Pods matching this selector are upgraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Number or percent of matched Pods kept on the old version. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
    /// Number or percent (rounded up) of Pods unavailable during the upgrade. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Upgrade order by weight or by an ordered label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<UpdatePriorityStrategy>,
    /// Spread Pods with the same label key/value through the upgrade order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scatter_strategy: UpdateScatterStrategy,
}

impl SidecarSetUpdateStrategy {
    fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// `type`, defaulted.
    pub fn strategy_type(&self) -> SidecarSetUpdateStrategyType {
        self.type_.unwrap_or_default()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SidecarSetUpdateStrategyType {
    /// Only inject into new Pods; never touch existing ones.
    NotUpdate,
    /// Upgrade injected Pods in place to the latest sidecars.
    #[default]
    RollingUpdate,
}

/// `injectionStrategy`: what new Pods get.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetInjectionStrategy {
    /// Stop injecting into new Pods; injected Pods keep being upgraded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Inject a historic revision instead of the latest spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<SidecarSetInjectRevision>,
}

impl SidecarSetInjectionStrategy {
    fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// `injectionStrategy.revision`: which historic revision new Pods get.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetInjectRevision {
    /// Matches the `apps.kruise.io/sidecarset-custom-version` label of the newest such revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_version: Option<String>,
    /// Name of the ControllerRevision to inject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_name: Option<String>,
    /// Always (the default) or Partial (by updateStrategy selector and partition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<SidecarSetInjectRevisionPolicy>,
}

impl SidecarSetInjectRevision {
    /// `policy`, defaulted.
    pub fn effective_policy(&self) -> SidecarSetInjectRevisionPolicy {
        self.policy.unwrap_or_default()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SidecarSetInjectRevisionPolicy {
    /// Every new Pod gets the named revision.
    #[default]
    Always,
    /// Pods outside the updateStrategy selector get it; others by partition probability.
    Partial,
}

/// One `patchPodMetadata` entry: annotations set on the Pods the sidecars go into.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetPatchPodMetadata {
    /// Annotations to set (keys must be whitelisted in `kruise-configuration`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Retain (the default), Overwrite or MergePatchJson.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_policy: Option<SidecarSetPatchPolicyType>,
}

impl SidecarSetPatchPodMetadata {
    /// `patchPolicy`, defaulted.
    pub fn effective_policy(&self) -> SidecarSetPatchPolicyType {
        self.patch_policy.unwrap_or_default()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SidecarSetPatchPolicyType {
    /// Add keys the Pod does not have yet; applied at injection only.
    #[default]
    Retain,
    /// Set the keys, replacing existing values.
    Overwrite,
    /// RFC 7386 merge of the value (JSON) into the existing value.
    MergePatchJson,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetStatus {
    /// The generation this status was computed for.
    #[serde(default, skip_serializing_if = "crate::apps_v1alpha1::is_zero_i64")]
    pub observed_generation: i64,
    /// Active, in-scope Pods that carry this SidecarSet's sidecars.
    #[serde(default)]
    pub matched_pods: i32,
    /// Matched Pods whose sidecars are at the latest hash.
    #[serde(default)]
    pub updated_pods: i32,
    /// Matched Pods that are consistent and ready.
    #[serde(default)]
    pub ready_pods: i32,
    /// Matched Pods that are both updated and ready.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub updated_ready_pods: i32,
    /// Name of the latest ControllerRevision.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub latest_revision: String,
    /// Hash collisions met while naming ControllerRevisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
}

/// One entry of the Pod annotations `kruise.io/sidecarset-hash` and
/// `kruise.io/sidecarset-hash-without-image` (a JSON map keyed by SidecarSet name).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetUpgradeSpec {
    /// When the entry was last written.
    pub update_timestamp: Time,
    /// The SidecarSet hash the Pod's sidecars correspond to.
    pub hash: String,
    /// Name of the SidecarSet.
    pub sidecar_set_name: String,
    /// Sorted names of the SidecarSet's containers in the Pod.
    #[serde(default)]
    pub sidecar_list: Vec<String>,
    /// The SidecarSet's `status.latestRevision` at the time of writing.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub controller_revision: String,
}

/// Hash entries of a Pod keyed by SidecarSet name. Only the hash is meaningful in entries
/// read from the legacy `name → hash` string form.
pub type SidecarSetHashes = BTreeMap<String, SidecarSetUpgradeSpec>;

/// Parses a `kruise.io/sidecarset-hash[-without-image]` annotation value, accepting both the
/// current struct form and the legacy `{"<name>":"<hash>"}` form.
pub fn parse_sidecarset_hashes(value: &str) -> Result<SidecarSetHashes, serde_json::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Entry {
        Spec(SidecarSetUpgradeSpec),
        Legacy(String),
    }
    let raw: BTreeMap<String, Entry> = serde_json::from_str(value)?;
    Ok(raw
        .into_iter()
        .map(|(name, entry)| {
            let spec = match entry {
                Entry::Spec(spec) => spec,
                Entry::Legacy(hash) => SidecarSetUpgradeSpec {
                    update_timestamp: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
                    hash,
                    sidecar_set_name: name.clone(),
                    sidecar_list: Vec::new(),
                    controller_revision: String::new(),
                },
            };
            (name, spec)
        })
        .collect())
}

/// The Pod annotation `kruise.io/sidecarset-inplace-update-state`, keyed by SidecarSet name.
pub type SidecarSetInPlaceUpdateState = BTreeMap<String, InPlaceUpdateState>;

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    /// A `test-sidecarset` like upstream's fixture in `openkruise/kruise v1.9.0
    /// pkg/webhook/pod/mutating/sidecarset_test.go`.
    const TEST_SIDECARSET: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata:
  name: test-sidecarset
spec:
  selector:
    matchLabels:
      app: nginx
  updateStrategy:
    type: RollingUpdate
    maxUnavailable: 1
  containers:
  - name: sidecar1
    image: busybox
    command: ["sleep", "999d"]
    volumeMounts:
    - name: log-volume
      mountPath: /var/log
  volumes:
  - name: log-volume
    emptyDir: {}
"#;

    /// Every extension field, plus the strategies.
    const FULL_SIDECARSET: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata:
  name: sidecarset
spec:
  selector:
    matchLabels:
      app: sample
  namespaceSelector:
    matchLabels:
      env: prod
  containers:
  - name: nginx
    image: nginx:alpine
    volumeMounts:
    - mountPath: /nginx/conf
      name: nginx.conf
    podInjectPolicy: BeforeAppContainer
    shareVolumePolicy:
      type: enabled
    shareVolumeDevicePolicy:
      type: disabled
    transferEnv:
    - sourceContainerName: main
      envName: PROXY_IP
    - sourceContainerNameFrom:
        fieldRef:
          apiVersion: v1
          fieldPath: metadata.labels['main-container']
      envNames: [A, B]
    resourcesPolicy:
      targetContainerMode: max
      targetContainersNameRegex: ".*"
      resourceExpr:
        limits:
          cpu: max(cpu*50%, 50m)
          memory: 200Mi
        requests:
          cpu: 50m
  - name: sidecar
    image: openkruise/hotupgrade-sample:sidecarv1
    imagePullPolicy: Always
    lifecycle:
      postStart:
        exec:
          command: ["/bin/sh", "/migrate.sh"]
    upgradeStrategy:
      upgradeType: HotUpgrade
      hotUpgradeEmptyImage: openkruise/hotupgrade-sample:empty
  initContainers:
  - name: init
    image: busybox
    restartPolicy: Always
    podInjectPolicy: AfterAppContainer
  volumes:
  - name: nginx.conf
    hostPath:
      path: /data/nginx/conf
  updateStrategy:
    type: RollingUpdate
    maxUnavailable: 20%
    partition: 10
    paused: true
    selector:
      matchLabels:
        canary.release: "true"
    priorityStrategy:
      weightPriority:
      - weight: 50
        matchSelector:
          matchLabels:
            zone: a
    scatterStrategy:
    - key: zone
      value: "*"
  injectionStrategy:
    paused: true
    revision:
      customVersion: version-1
      revisionName: sidecarset-7b8d9c
      policy: Partial
  imagePullSecrets:
  - name: my-secret
  revisionHistoryLimit: 5
  patchPodMetadata:
  - annotations:
      oom-score: '{"log-agent": 1}'
    patchPolicy: MergePatchJson
status:
  observedGeneration: 3
  matchedPods: 4
  updatedPods: 3
  readyPods: 4
  updatedReadyPods: 3
  latestRevision: sidecarset-7b8d9c
  collisionCount: 0
"#;

    fn yaml_to_json(yaml: &str) -> serde_json::Value {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn seed_sidecarset_parses_and_round_trips() {
        let ss: SidecarSet = serde_saphyr::from_str(TEST_SIDECARSET).unwrap();
        let c = &ss.spec.containers[0];
        assert_eq!(c.name(), "sidecar1");
        assert_eq!(c.container.image.as_deref(), Some("busybox"));
        assert_eq!(c.inject_policy(), PodInjectPolicyType::BeforeAppContainer);
        assert_eq!(c.upgrade_type(), SidecarContainerUpgradeType::ColdUpgrade);
        assert_eq!(
            ss.spec.update_strategy.strategy_type(),
            SidecarSetUpdateStrategyType::RollingUpdate
        );
        assert_eq!(
            ss.spec.update_strategy.max_unavailable,
            Some(IntOrString::Int(1))
        );
        assert_eq!(ss.spec.volumes[0].name, "log-volume");
        assert_eq!(
            serde_json::to_value(&ss).unwrap(),
            yaml_to_json(TEST_SIDECARSET)
        );
    }

    #[test]
    fn every_field_round_trips() {
        let ss: SidecarSet = serde_saphyr::from_str(FULL_SIDECARSET).unwrap();
        let nginx = &ss.spec.containers[0];
        assert!(nginx.share_volume_policy.is_enabled());
        assert_eq!(
            nginx.share_volume_device_policy,
            Some(ShareVolumePolicy {
                type_: Some(ShareVolumePolicyType::Disabled)
            })
        );
        assert_eq!(
            nginx.transfer_env[1].names().collect::<Vec<_>>(),
            ["A", "B"]
        );
        let policy = nginx.resources_policy.as_ref().unwrap();
        assert_eq!(policy.target_container_mode, TargetContainerMode::Max);
        assert_eq!(
            policy.resource_expr.limits.as_ref().unwrap().cpu,
            "max(cpu*50%, 50m)"
        );
        let sidecar = &ss.spec.containers[1];
        assert!(sidecar.is_hot_upgrade());
        assert!(sidecar.container.lifecycle.is_some());
        assert_eq!(
            ss.spec.init_containers[0]
                .container
                .restart_policy
                .as_deref(),
            Some("Always")
        );
        assert_eq!(
            ss.spec
                .injection_strategy
                .revision
                .as_ref()
                .unwrap()
                .effective_policy(),
            SidecarSetInjectRevisionPolicy::Partial
        );
        assert_eq!(ss.spec.all_containers().count(), 3);
        assert_eq!(ss.status.as_ref().unwrap().matched_pods, 4);
        assert_eq!(
            serde_json::to_value(&ss).unwrap(),
            yaml_to_json(FULL_SIDECARSET)
        );
    }

    #[test]
    fn examples_parse_and_round_trip() {
        for (file, yaml) in [
            (
                "sidecarset-test-sidecarset.yaml",
                include_str!("../../../../examples/sidecarset-test-sidecarset.yaml"),
            ),
            (
                "sidecarset-test-sidecarset-canary.yaml",
                include_str!("../../../../examples/sidecarset-test-sidecarset-canary.yaml"),
            ),
            (
                "sidecarset-sidecarset.yaml",
                include_str!("../../../../examples/sidecarset-sidecarset.yaml"),
            ),
            (
                "sidecarset-hotupgrade-sidecarset.yaml",
                include_str!("../../../../examples/sidecarset-hotupgrade-sidecarset.yaml"),
            ),
        ] {
            let ss: SidecarSet = serde_saphyr::from_str(yaml).unwrap();
            assert!(!ss.spec.containers.is_empty(), "{file}");
            assert_eq!(
                serde_json::to_value(&ss).unwrap(),
                yaml_to_json(yaml),
                "{file}"
            );
        }
    }

    #[test]
    fn resources_policy_accepts_the_plural_spellings() {
        let json = r#"{"targetContainersMode":"sum","targetContainersNameRegex":"^app.*$","resourcesExpr":{"limits":{"cpu":"cpu*50%"}}}"#;
        let policy: ResourcesPolicy = serde_json::from_str(json).unwrap();
        assert_eq!(policy.target_container_mode, TargetContainerMode::Sum);
        assert_eq!(policy.resource_expr.limits.unwrap().cpu, "cpu*50%");
    }

    #[test]
    fn status_counters_are_always_written() {
        let status = SidecarSetStatus::default();
        assert_eq!(
            serde_json::to_string(&status).unwrap(),
            r#"{"matchedPods":0,"updatedPods":0,"readyPods":0}"#
        );
    }

    #[test]
    fn enum_spellings_match_upstream() {
        let cases = [
            (
                serde_json::to_value(PodInjectPolicyType::BeforeAppContainer).unwrap(),
                "BeforeAppContainer",
            ),
            (
                serde_json::to_value(PodInjectPolicyType::AfterAppContainer).unwrap(),
                "AfterAppContainer",
            ),
            (
                serde_json::to_value(ShareVolumePolicyType::Enabled).unwrap(),
                "enabled",
            ),
            (
                serde_json::to_value(ShareVolumePolicyType::Disabled).unwrap(),
                "disabled",
            ),
            (
                serde_json::to_value(SidecarContainerUpgradeType::ColdUpgrade).unwrap(),
                "ColdUpgrade",
            ),
            (
                serde_json::to_value(SidecarContainerUpgradeType::HotUpgrade).unwrap(),
                "HotUpgrade",
            ),
            (
                serde_json::to_value(SidecarSetUpdateStrategyType::NotUpdate).unwrap(),
                "NotUpdate",
            ),
            (
                serde_json::to_value(SidecarSetUpdateStrategyType::RollingUpdate).unwrap(),
                "RollingUpdate",
            ),
            (
                serde_json::to_value(SidecarSetInjectRevisionPolicy::Always).unwrap(),
                "Always",
            ),
            (
                serde_json::to_value(SidecarSetInjectRevisionPolicy::Partial).unwrap(),
                "Partial",
            ),
            (
                serde_json::to_value(SidecarSetPatchPolicyType::Retain).unwrap(),
                "Retain",
            ),
            (
                serde_json::to_value(SidecarSetPatchPolicyType::Overwrite).unwrap(),
                "Overwrite",
            ),
            (
                serde_json::to_value(SidecarSetPatchPolicyType::MergePatchJson).unwrap(),
                "MergePatchJson",
            ),
            (
                serde_json::to_value(TargetContainerMode::Sum).unwrap(),
                "sum",
            ),
            (
                serde_json::to_value(TargetContainerMode::Max).unwrap(),
                "max",
            ),
        ];
        for (got, want) in cases {
            assert_eq!(got, want);
        }
        assert!(serde_json::from_str::<PodInjectPolicyType>(r#""Bogus""#).is_err());
    }

    #[test]
    fn hash_annotation_reads_both_forms() {
        let current = r#"{"test-sidecarset":{"updateTimestamp":"2022-03-06T09:56:15Z","hash":"f78z4854","sidecarSetName":"test-sidecarset","sidecarList":["sidecar1"],"controllerRevision":"test-sidecarset-6b8d9c"}}"#;
        let hashes = parse_sidecarset_hashes(current).unwrap();
        let entry = &hashes["test-sidecarset"];
        assert_eq!(entry.hash, "f78z4854");
        assert_eq!(entry.sidecar_list, ["sidecar1"]);
        assert_eq!(serde_json::to_string(&hashes).unwrap(), current);

        let legacy = parse_sidecarset_hashes(r#"{"test-sidecarset":"f78z4854"}"#).unwrap();
        assert_eq!(legacy["test-sidecarset"].hash, "f78z4854");
        assert_eq!(
            legacy["test-sidecarset"].sidecar_set_name,
            "test-sidecarset"
        );
    }

    #[test]
    fn inplace_update_state_annotation_matches_the_seed() {
        let seed = r#"{"test-sidecarset":{"revision":"f78z4854d9855xd6478fzx9c84645z2548v24z26455db46bdfzw44v49v98f2cw","updateTimestamp":"2022-03-06T09:56:15Z","lastContainerStatuses":{"sidecar1":{"imageID":"docker.io/library/busybox@sha256:5acba83a746c7608ed544dc1533b87c737a0b0fb730301639a0179f9344b1678"}}}}"#;
        let state: SidecarSetInPlaceUpdateState = serde_json::from_str(seed).unwrap();
        assert!(
            state["test-sidecarset"].last_container_statuses["sidecar1"]
                .image_id
                .ends_with("5acba83a746c7608ed544dc1533b87c737a0b0fb730301639a0179f9344b1678")
        );
        assert_eq!(serde_json::to_string(&state).unwrap(), seed);
    }

    #[test]
    fn crd_is_cluster_scoped_with_schemaless_containers() {
        let crd = SidecarSet::crd();
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.short_names, None);
        let version = &crd.spec.versions[0];
        let columns: Vec<_> = version
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| (c.name.as_str(), c.json_path.as_str()))
            .collect();
        assert_eq!(
            columns,
            [
                ("MATCHED", ".status.matchedPods"),
                ("UPDATED", ".status.updatedPods"),
                ("READY", ".status.readyPods"),
                ("AGE", ".metadata.creationTimestamp"),
            ]
        );
        let schema = serde_json::to_value(&version.schema).unwrap();
        let spec = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"];
        for field in ["containers", "initContainers", "volumes"] {
            assert_eq!(
                spec[field]["items"]["x-kubernetes-preserve-unknown-fields"], true,
                "{field}"
            );
        }
        let text = schema.to_string();
        assert!(!text.contains("$ref") && !text.contains("allOf"));
    }
}
