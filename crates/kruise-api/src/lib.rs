//! OpenKruise API types for Rust.
//!
//! Every kind of `apps.kruise.io` and `policy.kruise.io` with the same JSON field names,
//! defaults and CRD shape (scope, short names, printer columns, subresources) as upstream
//! OpenKruise, so existing manifests apply unchanged. [`keys`] holds the well-known
//! label, annotation, condition and env strings; [`intstr`] the percent arithmetic.

pub mod apps_v1alpha1;
pub mod apps_v1beta1;
pub mod appspub;
pub mod conversion;
pub mod image;
pub mod intstr;
pub mod keys;
pub mod pod;
pub mod policy_v1alpha1;
pub mod policy_v1beta1;
pub mod quantity;
pub mod schema;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition,
};
use kube::CustomResourceExt;

/// The CRDs of every kind, in a stable order.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    use apps_v1alpha1 as a;
    vec![
        also_served_as_v1beta1(a::AdvancedCronJob::crd()),
        also_served_as_v1beta1(a::BroadcastJob::crd()),
        served_with_v1beta1(a::CloneSet::crd(), apps_v1beta1::cloneset::CloneSet::crd()),
        served_with_v1beta1(
            a::ContainerRecreateRequest::crd(),
            apps_v1beta1::containerrecreaterequest::ContainerRecreateRequest::crd(),
        ),
        served_with_v1beta1(
            a::DaemonSet::crd(),
            apps_v1beta1::daemonset::DaemonSet::crd(),
        ),
        a::EphemeralJob::crd(),
        also_served_as_v1beta1(a::ImageListPullJob::crd()),
        also_served_as_v1beta1(a::ImagePullJob::crd()),
        also_served_as_v1beta1(a::NodeImage::crd()),
        served_with_v1beta1(
            a::PersistentPodState::crd(),
            apps_v1beta1::persistentpodstate::PersistentPodState::crd(),
        ),
        a::NodePodProbe::crd(),
        a::PodProbeMarker::crd(),
        served_with_v1beta1(
            a::ResourceDistribution::crd(),
            apps_v1beta1::resourcedistribution::ResourceDistribution::crd(),
        ),
        served_with_v1beta1(
            a::SidecarSet::crd(),
            apps_v1beta1::sidecarset::SidecarSet::crd(),
        ),
        served_with_v1beta1(
            a::UnitedDeployment::crd(),
            apps_v1beta1::uniteddeployment::UnitedDeployment::crd(),
        ),
        served_with_v1beta1(
            a::WorkloadSpread::crd(),
            apps_v1beta1::workloadspread::WorkloadSpread::crd(),
        ),
        converted_by_relabelling(apps_v1beta1::StatefulSet::crd_with_v1alpha1()),
        served_with_v1beta1(
            policy_v1alpha1::PodUnavailableBudget::crd(),
            policy_v1beta1::PodUnavailableBudget::crd(),
        ),
    ]
}

/// Kinds whose OpenKruise 1.9 `v1beta1` has exactly the v1alpha1 fields (BroadcastJob,
/// ImagePullJob, ImageListPullJob; NodeImage but for `pullSecrets[].mode`, which only
/// upstream's batch secret cleanup reads and v1alpha1 prunes): v1beta1 is served with the same schema, and the
/// apiserver's default `None` conversion (a relabelled apiVersion) is exact.
/// AdvancedCronJob's v1beta1 adds only `template.imageListPullJobTemplate`, which our
/// v1alpha1 carries too (a superset of OpenKruise's v1alpha1, as Advanced StatefulSet's),
/// so relabelling stays exact for it as well.
fn also_served_as_v1beta1(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let mut beta = crd.spec.versions[0].clone();
    beta.name = "v1beta1".into();
    beta.storage = false;
    crd.spec.versions.push(beta);
    crd
}

/// States `spec.conversion: {strategy: None}` on a CRD whose versions share one schema
/// (Advanced StatefulSet: our v1alpha1 is v1beta1's schema, a superset of OpenKruise
/// 1.9's v1alpha1, so relabelling the apiVersion is exact and no controller needs to be
/// up for a v1alpha1 read). OpenKruise 1.9 installs that CRD with a conversion webhook
/// at kruise-manager's Service; stating the strategy makes our CRD own it, so applying
/// ours over upstream's cannot leave reads pointed at a kruise-manager that is gone (the
/// apiserver then refuses the apply while upstream's `webhook` is still set, rather than
/// accepting it: tests/cluster/controllers.sh removes that first).
fn converted_by_relabelling(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "None".into(),
        webhook: None,
    });
    crd
}

/// One CRD with both versions, v1alpha1 stored: the controllers read v1alpha1, and
/// their conversion webhooks serve v1beta1 ([`conversion`]).
///
/// Both versions are served from the start, and `spec.conversion` names the webhook
/// Service of the controller that converts the kind ([`conversion::webhook_service`]),
/// as OpenKruise's CRDs name kruise-manager's. Until that controller runs, a v1beta1 read
/// fails with a connection error, which every client retries: OpenKruise 1.9 owns Pods
/// as `apps.kruise.io/v1beta1` (CloneSet, Advanced DaemonSet, UnitedDeployment), and a
/// 404 for that version (an unserved one) is what the garbage collector takes for "the
/// owner is gone" and deletes the Pods. Without a webhook stanza the apiserver would
/// instead relabel objects across versions, and a v1beta1 write (kubectl prefers
/// v1beta1) would prune every v1alpha1-only field. The controller replaces the stanza
/// with its own endpoint and caBundle when it registers.
///
/// OpenKruise 1.9 stores v1beta1. Over its install our CRD keeps v1beta1 (it is in
/// `status.storedVersions`) and stores new writes as v1alpha1; objects it stored as
/// v1beta1 are read through the same webhook (tests/upstream_crds.rs). Storing v1beta1
/// instead would send every watch and write of the controllers through the webhook,
/// and make their reads depend on it being up.
#[allow(
    clippy::expect_used,
    reason = "runs on our own generated CRDs (crdgen and tests), never on input"
)]
fn served_with_v1beta1(
    alpha: CustomResourceDefinition,
    beta: CustomResourceDefinition,
) -> CustomResourceDefinition {
    let mut crd = kube::core::crd::merge_crds(vec![alpha, beta], "v1alpha1")
        .expect("the two versions of one kind merge");
    crd.spec.conversion = Some(conversion::webhook_conversion(&crd.spec.names.kind));
    // One set of printer columns (declared on the v1alpha1 type) for both versions.
    let columns = crd.spec.versions[0].additional_printer_columns.clone();
    for version in &mut crd.spec.versions {
        version.additional_printer_columns = columns.clone();
    }
    crd
}

/// The file name `crdgen` writes a CRD to: `<plural>.<group>.yaml` (the CRD's own name).
pub fn crd_file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or_default())
}

/// A CRD as YAML, exactly as committed under `deploy/crds/`.
#[allow(
    clippy::expect_used,
    reason = "runs on our own generated CRDs (crdgen and tests), never on input"
)]
pub fn crd_yaml(crd: &CustomResourceDefinition) -> String {
    let yaml = serde_saphyr::to_string(crd).expect("a CRD always serializes");
    format!("# Generated by `cargo run -p kruise-api --bin crdgen`; do not edit.\n---\n{yaml}")
}

#[cfg(test)]
mod tests {
    use std::fmt::{Debug, Display};
    use std::str::FromStr;

    use serde::Serialize;
    use serde::de::DeserializeOwned;
    use strum::VariantArray;

    use crate::apps_v1alpha1::{ContainerRecreateRequestPhase, ImagePullPhase};
    use crate::appspub::LifecycleState;
    use crate::keys;
    use crate::policy_v1alpha1::PubOperation;

    /// serde (the JSON and so the CRD schema) is the source of truth for a string enum's
    /// wire name; the strum derives behind `as_str`, `Display` and `FromStr` must agree
    /// with it for every variant.
    fn assert_strum_agrees_with_serde<T>(as_str: fn(T) -> &'static str)
    where
        T: VariantArray + Copy + Debug + PartialEq + Display + FromStr + Serialize,
        T: DeserializeOwned,
    {
        assert!(!T::VARIANTS.is_empty());
        for &v in T::VARIANTS {
            let wire = as_str(v);
            assert_eq!(serde_json::to_value(v).unwrap(), wire, "{v:?}");
            assert_eq!(
                serde_json::from_value::<T>(wire.into()).unwrap(),
                v,
                "{v:?}"
            );
            assert_eq!(v.to_string(), wire, "{v:?}");
            assert_eq!(wire.parse::<T>().ok(), Some(v), "{v:?}");
        }
    }

    #[test]
    fn string_enums_spell_like_their_json() {
        assert_strum_agrees_with_serde(LifecycleState::as_str);
        assert_strum_agrees_with_serde(PubOperation::as_str);
        assert_strum_agrees_with_serde(ContainerRecreateRequestPhase::as_str);
        assert_strum_agrees_with_serde(ImagePullPhase::as_str);
    }

    #[test]
    fn all_lists_every_variant_in_declaration_order() {
        assert_eq!(LifecycleState::ALL, LifecycleState::VARIANTS);
        assert_eq!(PubOperation::ALL, PubOperation::VARIANTS);
    }

    #[test]
    fn pub_operation_keys_match_the_enum() {
        assert_eq!(PubOperation::Delete.as_str(), keys::PUB_OPERATION_DELETE);
        assert_eq!(PubOperation::Evict.as_str(), keys::PUB_OPERATION_EVICT);
        assert_eq!(PubOperation::Update.as_str(), keys::PUB_OPERATION_UPDATE);
        assert_eq!(PubOperation::Resize.as_str(), keys::PUB_OPERATION_RESIZE);
    }
    /// Every kind with two shapes ships both versions served and its conversion at the
    /// Service and path its controller serves: an unserved v1beta1 answers 404, which the
    /// garbage collector reads as "owner gone" for Pods OpenKruise owns as v1beta1.
    #[test]
    fn converted_kinds_ship_every_version_served_and_their_controller_s_webhook() {
        use crate::conversion::path;
        let served_paths = [
            path::CLONESET,
            path::SIDECARSET,
            path::DAEMONSET,
            path::CONTAINERRECREATEREQUEST,
            path::PERSISTENTPODSTATE,
            path::RESOURCEDISTRIBUTION,
            path::UNITEDDEPLOYMENT,
            path::WORKLOADSPREAD,
            path::PODUNAVAILABLEBUDGET,
        ];
        let mut converted = Vec::new();
        for crd in crate::all_crds() {
            let name = crd.metadata.name.clone().unwrap_or_default();
            assert!(
                crd.spec.versions.iter().all(|v| v.served),
                "{name}: every version served"
            );
            let Some(conversion) = crd.spec.conversion.as_ref() else {
                continue;
            };
            if conversion.strategy != "Webhook" {
                continue;
            }
            let kind = crd.spec.names.kind.to_ascii_lowercase();
            let service = conversion
                .webhook
                .as_ref()
                .and_then(|w| w.client_config.as_ref())
                .and_then(|c| c.service.as_ref())
                .unwrap_or_else(|| panic!("{name}: a service"));
            assert_eq!(service.name, format!("{kind}-webhook"), "{name}");
            assert_eq!(service.namespace, "kruise-system", "{name}");
            assert_eq!(service.port, Some(443), "{name}");
            let path = service.path.clone().unwrap_or_default();
            assert_eq!(path, format!("/convert-{kind}"), "{name}");
            assert!(
                served_paths.contains(&path.as_str()),
                "{name}: {path} is served"
            );
            converted.push(path);
        }
        converted.sort();
        let mut expected = served_paths.map(String::from).to_vec();
        expected.sort();
        assert_eq!(converted, expected);
    }
}
