//! Feature gates: `KRUISE_FEATURE_GATES="CloneSetShortHash=true,PodWebhook=false"`, with
//! OpenKruise's gate names and defaults. An unknown name is an error at start, not a
//! silently ignored typo.

use std::collections::BTreeMap;

use crate::Error;

macro_rules! gates {
    ($($konst:ident = $name:literal => $default:literal,)*) => {
        $(#[doc = concat!("`", $name, "` (default ", stringify!($default), ").")]
        pub const $konst: &str = $name;)*
        /// Every gate with its default, as openkruise/kruise v1.9.0
        /// `pkg/features/kruise_features.go` defines them, except
        /// `PodUnavailableBudgetUpdateGate` (on here). docs/feature-gates.md lists each
        /// with the reason for a difference; a test keeps the two equal.
        pub const DEFAULTS: &[(&str, bool)] = &[$(($name, $default),)*];
    };
}

gates! {
    POD_WEBHOOK = "PodWebhook" => true,
    KRUISE_DAEMON = "KruiseDaemon" => true,
    DAEMON_WATCHING_POD = "DaemonWatchingPod" => true,
    CLONESET_SHORT_HASH = "CloneSetShortHash" => false,
    KRUISE_POD_READINESS_GATE = "KruisePodReadinessGate" => false,
    PRE_DOWNLOAD_IMAGE_FOR_IN_PLACE_UPDATE = "PreDownloadImageForInPlaceUpdate" => false,
    CLONESET_PARTITION_ROLLBACK = "CloneSetPartitionRollback" => false,
    // Off, as upstream's code (its config/manager install turns every Beta gate on; ours
    // is turned on by kustomize/controllers/protection/enabled): docs/feature-gates.md.
    RESOURCES_DELETION_PROTECTION = "ResourcesDeletionProtection" => false,
    WORKLOAD_SPREAD = "WorkloadSpread" => true,
    POD_UNAVAILABLE_BUDGET_DELETE_GATE = "PodUnavailableBudgetDeleteGate" => true,
    // On here, off upstream (Alpha): update protection is part of what a PUB promises
    // here (docs/podunavailablebudget.md; docs/feature-gates.md).
    POD_UNAVAILABLE_BUDGET_UPDATE_GATE = "PodUnavailableBudgetUpdateGate" => true,
    TEMPLATE_NO_DEFAULTS = "TemplateNoDefaults" => false,
    IN_PLACE_UPDATE_ENV_FROM_METADATA = "InPlaceUpdateEnvFromMetadata" => true,
    STATEFULSET_AUTO_DELETE_PVC = "StatefulSetAutoDeletePVC" => true,
    SIDECARSET_PATCH_POD_METADATA_DEFAULTS_ALLOWED = "SidecarSetPatchPodMetadataDefaultsAllowed" => false,
    SIDECAR_TERMINATOR = "SidecarTerminator" => false,
    POD_PROBE_MARKER_GATE = "PodProbeMarkerGate" => true,
    PRE_DOWNLOAD_IMAGE_FOR_DAEMONSET_UPDATE = "PreDownloadImageForDaemonSetUpdate" => false,
    CLONESET_EVENT_HANDLER_OPTIMIZATION = "CloneSetEventHandlerOptimization" => false,
    PREPARING_UPDATE_AS_UPDATE = "PreparingUpdateAsUpdate" => false,
    IMAGE_PULL_JOB_GATE = "ImagePullJobGate" => false,
    RESOURCE_DISTRIBUTION_GATE = "ResourceDistributionGate" => false,
    DELETION_PROTECTION_FOR_CRD_CASCADING_GATE = "DeletionProtectionForCRDCascadingGate" => false,
    ENHANCED_LIVENESS_PROBE = "EnhancedLivenessProbe" => false,
    RECREATE_POD_WHEN_CHANGE_VCT_IN_CLONESET_GATE = "RecreatePodWhenChangeVCTInCloneSetGate" => false,
    STATEFULSET_START_ORDINAL = "StatefulSetStartOrdinal" => false,
    POD_INDEX_LABEL = "PodIndexLabel" => true,
    ENABLE_EXTERNAL_CERTS = "EnableExternalCerts" => false,
    STATEFULSET_AUTO_RESIZE_PVC_GATE = "StatefulSetAutoResizePVCGate" => false,
    FORCE_DELETE_TIMEOUT_EXPECTATION_GATE = "ForceDeleteTimeoutExpectationGate" => false,
    IN_PLACE_WORKLOAD_VERTICAL_SCALING = "InPlaceWorkloadVerticalScaling" => false,
    ENABLE_POD_PROBE_MARKER_ON_SERVERLESS = "EnablePodProbeMarkerOnServerless" => false,
    DAEMONSET_PRUNE_INELIGIBLE_NODES = "DaemonSetPruneIneligibleNodes" => false,
}

/// The resolved state of every gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    enabled: BTreeMap<&'static str, bool>,
}

impl Default for FeatureGates {
    fn default() -> Self {
        let mut gates = FeatureGates {
            enabled: DEFAULTS.iter().copied().collect(),
        };
        gates.apply_dependencies();
        gates
    }
}

impl FeatureGates {
    /// Parses `Name=true,Other=false` over the defaults.
    pub fn parse(spec: &str) -> Result<Self, Error> {
        let mut gates = FeatureGates {
            enabled: DEFAULTS.iter().copied().collect(),
        };
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, value) = item.split_once('=').ok_or_else(|| {
                Error::Settings(format!(
                    "KRUISE_FEATURE_GATES: {item:?} is not of the form Name=true|false"
                ))
            })?;
            let (name, value) = (name.trim(), value.trim());
            let key = DEFAULTS
                .iter()
                .map(|(n, _)| *n)
                .find(|n| *n == name)
                .ok_or_else(|| {
                    Error::Settings(format!(
                        "KRUISE_FEATURE_GATES: unknown feature gate {name:?}"
                    ))
                })?;
            let value = value.parse::<bool>().map_err(|_| {
                Error::Settings(format!(
                    "KRUISE_FEATURE_GATES: {name}={value:?}: expected true or false"
                ))
            })?;
            gates.enabled.insert(key, value);
        }
        gates.apply_dependencies();
        Ok(gates)
    }

    /// Whether the gate is on. Asking for a gate that does not exist is a programming error.
    pub fn enabled(&self, gate: &str) -> bool {
        debug_assert!(
            self.enabled.contains_key(gate),
            "unknown feature gate {gate}"
        );
        self.enabled.get(gate).copied().unwrap_or(false)
    }

    /// Turns a gate on or off (tests, and controllers that embed several binaries).
    pub fn set(&mut self, gate: &str, on: bool) {
        if let Some((name, _)) = DEFAULTS.iter().find(|(n, _)| *n == gate) {
            self.enabled.insert(name, on);
        }
    }

    /// Gates that imply or exclude others, as upstream resolves them at start.
    fn apply_dependencies(&mut self) {
        let off = |g: &mut Self, names: &[&'static str]| {
            for n in names {
                g.enabled.insert(n, false);
            }
        };
        if !self.enabled(POD_WEBHOOK) {
            off(
                self,
                &[
                    KRUISE_POD_READINESS_GATE,
                    POD_UNAVAILABLE_BUDGET_DELETE_GATE,
                    POD_UNAVAILABLE_BUDGET_UPDATE_GATE,
                    WORKLOAD_SPREAD,
                    SIDECARSET_PATCH_POD_METADATA_DEFAULTS_ALLOWED,
                    ENHANCED_LIVENESS_PROBE,
                    ENABLE_POD_PROBE_MARKER_ON_SERVERLESS,
                ],
            );
        }
        if !self.enabled(KRUISE_DAEMON) {
            off(
                self,
                &[
                    PRE_DOWNLOAD_IMAGE_FOR_IN_PLACE_UPDATE,
                    DAEMON_WATCHING_POD,
                    IN_PLACE_UPDATE_ENV_FROM_METADATA,
                    PRE_DOWNLOAD_IMAGE_FOR_DAEMONSET_UPDATE,
                    POD_PROBE_MARKER_GATE,
                    SIDECAR_TERMINATOR,
                    IMAGE_PULL_JOB_GATE,
                    ENHANCED_LIVENESS_PROBE,
                ],
            );
        }
        if self.enabled(PRE_DOWNLOAD_IMAGE_FOR_IN_PLACE_UPDATE)
            || self.enabled(PRE_DOWNLOAD_IMAGE_FOR_DAEMONSET_UPDATE)
        {
            self.enabled.insert(IMAGE_PULL_JOB_GATE, true);
        }
        if !self.enabled(RESOURCES_DELETION_PROTECTION) {
            off(self, &[DELETION_PROTECTION_FOR_CRD_CASCADING_GATE]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstreams() {
        let g = FeatureGates::default();
        assert!(g.enabled(POD_WEBHOOK));
        assert!(!g.enabled(RESOURCES_DELETION_PROTECTION));
        assert!(g.enabled(IN_PLACE_UPDATE_ENV_FROM_METADATA));
        assert!(!g.enabled(CLONESET_SHORT_HASH));
        assert!(!g.enabled(CLONESET_PARTITION_ROLLBACK));
        assert!(!g.enabled(PRE_DOWNLOAD_IMAGE_FOR_IN_PLACE_UPDATE));
        assert!(g.enabled(POD_UNAVAILABLE_BUDGET_DELETE_GATE));
        // The one deliberate difference from upstream (docs/feature-gates.md).
        assert!(g.enabled(POD_UNAVAILABLE_BUDGET_UPDATE_GATE));
        assert_eq!(FeatureGates::parse("").unwrap(), g);
    }

    #[test]
    fn parse_overrides_defaults() {
        let g = FeatureGates::parse(
            "CloneSetShortHash=true, CloneSetPartitionRollback=true,PodWebhook=true",
        )
        .unwrap();
        assert!(g.enabled(CLONESET_SHORT_HASH));
        assert!(g.enabled(CLONESET_PARTITION_ROLLBACK));
    }

    #[test]
    fn unknown_or_malformed_gates_are_errors() {
        for (spec, needle) in [
            ("Bogus=true", "unknown feature gate \"Bogus\""),
            ("CloneSetShortHash", "Name=true|false"),
            ("CloneSetShortHash=yes", "expected true or false"),
            ("clonesetshorthash=true", "unknown feature gate"),
        ] {
            let err = FeatureGates::parse(spec).unwrap_err().to_string();
            assert!(err.contains(needle), "{spec}: {err}");
        }
    }

    #[test]
    fn dependencies_resolve_like_upstream() {
        let g = FeatureGates::parse("KruiseDaemon=false,PreDownloadImageForInPlaceUpdate=true")
            .unwrap();
        assert!(!g.enabled(PRE_DOWNLOAD_IMAGE_FOR_IN_PLACE_UPDATE));
        assert!(!g.enabled(IMAGE_PULL_JOB_GATE));
        let g = FeatureGates::parse("PreDownloadImageForInPlaceUpdate=true").unwrap();
        assert!(g.enabled(IMAGE_PULL_JOB_GATE));
        let g = FeatureGates::parse("PodWebhook=false").unwrap();
        assert!(!g.enabled(WORKLOAD_SPREAD));
        assert!(!g.enabled(POD_UNAVAILABLE_BUDGET_DELETE_GATE));
    }

    /// docs/feature-gates.md's table: every gate of [`DEFAULTS`] with our default, upstream
    /// gates we do not know marked `—`, and a reason on each row where ours differs.
    #[test]
    fn the_documented_table_is_the_defaults() {
        let doc = include_str!("../../../docs/feature-gates.md");
        let rows: Vec<Vec<&str>> = doc
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
            .collect();
        let mut documented = 0;
        for row in &rows {
            let [name, upstream, ours, _stage, _read_by, why] = row[..] else {
                panic!("a row of six columns: {row:?}");
            };
            let name = name.trim_matches('`');
            let known = DEFAULTS.iter().find(|(n, _)| *n == name);
            match (known, ours) {
                (Some((_, default)), ours) => {
                    assert_eq!(ours, default.to_string(), "{name}: ours in the table");
                    documented += 1;
                }
                (None, "—") => {}
                (None, _) => panic!("{name}: documented but not a gate here"),
            }
            if upstream != ours {
                assert!(
                    !why.is_empty(),
                    "{name}: differs from upstream without a reason"
                );
            }
        }
        assert_eq!(documented, DEFAULTS.len(), "every gate documented once");
    }

    #[test]
    fn gate_names_are_unique() {
        let mut names: Vec<_> = DEFAULTS.iter().map(|(n, _)| *n).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), DEFAULTS.len());
    }
}
