//! The workload kinds a WorkloadSpread may target (openkruise/kruise v1.9.0 pkg/webhook/workloadspread/validating/workloadspread_validation.go) and what differs between
//! them: how a Pod's version is read, whether pod-deletion-cost applies, whether Pods
//! are placed by ordinal.

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::TargetReference;
use kruise_api::keys;

pub const APPS: &str = "apps";
pub const KRUISE: &str = "apps.kruise.io";
pub const BATCH: &str = "batch";

/// A supported target kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TargetKind {
    CloneSet,
    Deployment,
    ReplicaSet,
    Job,
    /// apps/v1 StatefulSet.
    StatefulSet,
    /// apps.kruise.io StatefulSet (v1alpha1 or v1beta1).
    AdvancedStatefulSet,
    /// A kind allow-listed in `kruise-configuration` ([`super::custom`]): its Pods are
    /// counted unversioned, and it gets no pod-deletion-cost (its scale-in order is its
    /// own controller's).
    Custom,
}

pub use kruise_runtime::meta::group_of;

impl TargetKind {
    /// The kind of `api_version`/`kind`, if a WorkloadSpread may target it.
    pub fn of(api_version: &str, kind: &str) -> Option<Self> {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        Some(match (group, kind) {
            (KRUISE, "CloneSet") => TargetKind::CloneSet,
            (APPS, "Deployment") => TargetKind::Deployment,
            (APPS, "ReplicaSet") => TargetKind::ReplicaSet,
            (BATCH, "Job") => TargetKind::Job,
            (APPS, "StatefulSet") => TargetKind::StatefulSet,
            (KRUISE, "StatefulSet") if matches!(version, "v1alpha1" | "v1beta1") => {
                TargetKind::AdvancedStatefulSet
            }
            _ => return None,
        })
    }

    pub fn of_ref(r: &TargetReference) -> Option<Self> {
        Self::of(&r.api_version, &r.kind)
    }

    /// The kind of `r`: a built-in one, else [`TargetKind::Custom`] when `allowlist`
    /// names its group and kind.
    pub fn resolve(r: &TargetReference, allowlist: &super::custom::Allowlist) -> Option<Self> {
        Self::of_ref(r).or_else(|| {
            allowlist
                .workload(&r.api_version, &r.kind)
                .map(|_| TargetKind::Custom)
        })
    }

    /// `r` names no built-in kind: only the allowlist can make it a target.
    pub fn needs_allowlist(r: &TargetReference) -> bool {
        Self::of_ref(r).is_none()
    }

    /// Pods are counted per version (`pod-template-hash`): a rollout's new ReplicaSet
    /// fills the subsets again while the old one drains.
    pub fn versioned(self) -> bool {
        matches!(self, TargetKind::Deployment | TargetKind::ReplicaSet)
    }

    /// The workload's scale-in honours `controller.kubernetes.io/pod-deletion-cost`.
    pub fn uses_deletion_cost(self) -> bool {
        matches!(
            self,
            TargetKind::CloneSet | TargetKind::Deployment | TargetKind::ReplicaSet
        )
    }

    /// Pods are placed by ordinal, not by the status's counters.
    pub fn is_statefulset(self) -> bool {
        matches!(
            self,
            TargetKind::StatefulSet | TargetKind::AdvancedStatefulSet
        )
    }

    /// `reference` names the object `api_version`/`kind`/`name` (group, kind, name: a
    /// StatefulSet's or CloneSet's version does not matter).
    pub fn refers_to(
        reference: &TargetReference,
        api_version: &str,
        kind: &str,
        name: &str,
    ) -> bool {
        reference.name == name
            && reference.kind == kind
            && group_of(&reference.api_version) == group_of(api_version)
    }
}

/// The version key of a Pod's subset statuses: its `pod-template-hash` for a
/// Deployment or ReplicaSet, `versionIgnored` otherwise.
pub fn pod_version(pod: &Pod, kind: TargetKind) -> String {
    if kind.versioned()
        && let Some(hash) = kruise_ordering::predicates::label(pod, keys::POD_TEMPLATE_HASH)
    {
        return hash.to_string();
    }
    keys::WS_VERSION_IGNORED.to_string()
}

/// The ordinal of a StatefulSet Pod (`web-3` → 3).
pub fn ordinal(pod_name: &str) -> Option<i32> {
    pod_name.rsplit_once('-')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supported_kinds() {
        assert_eq!(
            TargetKind::of("apps.kruise.io/v1alpha1", "CloneSet"),
            Some(TargetKind::CloneSet)
        );
        assert_eq!(
            TargetKind::of("apps.kruise.io/v1beta1", "CloneSet"),
            Some(TargetKind::CloneSet)
        );
        assert_eq!(
            TargetKind::of("apps/v1", "Deployment"),
            Some(TargetKind::Deployment)
        );
        assert_eq!(TargetKind::of("batch/v1", "Job"), Some(TargetKind::Job));
        assert_eq!(
            TargetKind::of("apps.kruise.io/v1beta1", "StatefulSet"),
            Some(TargetKind::AdvancedStatefulSet)
        );
        assert_eq!(TargetKind::of("apps.kruise.io/v2", "StatefulSet"), None);
        assert_eq!(TargetKind::of("apps/v1", "DaemonSet"), None);
        assert_eq!(TargetKind::of("v1", "Pod"), None);
        assert_eq!(ordinal("web-12"), Some(12));
        assert_eq!(ordinal("web"), None);
    }
}
