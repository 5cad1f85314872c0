//! `PodUnavailableBudget` (`policy.kruise.io/v1alpha1`): caps how many of an application's
//! Pods voluntary deletion, eviction and in-place update may make unavailable at once.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "policy.kruise.io",
    version = "v1alpha1",
    kind = "PodUnavailableBudget",
    plural = "podunavailablebudgets",
    singular = "podunavailablebudget",
    shortname = "pub",
    namespaced,
    status = "PodUnavailableBudgetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "PodUnavailableBudget limits how many Pods of an application voluntary deletion, eviction and update may make unavailable.",
    printcolumn(
        name = "Allowed",
        type_ = "integer",
        json_path = ".status.unavailableAllowed",
        description = "UnavailableAllowed number of pod unavailable that are currently allowed"
    ),
    printcolumn(
        name = "Current",
        type_ = "integer",
        json_path = ".status.currentAvailable",
        description = "CurrentAvailable current number of available pods"
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".status.desiredAvailable",
        description = "DesiredAvailable minimum desired number of available pods"
    ),
    printcolumn(
        name = "Total",
        type_ = "integer",
        json_path = ".status.totalReplicas",
        description = "TotalReplicas total number of pods counted by this budget"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct PodUnavailableBudgetSpec {
    /// Label query over the protected Pods; exclusive with targetRef.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The workload (any kind with a scale subresource) whose Pods are protected; exclusive with selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetReference>,
    /// Most Pods (number or percent of the total) that may be unavailable; exclusive with minAvailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Fewest Pods (number or percent of the total) that must stay available; exclusive with maxUnavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrString>,
}

/// The workload a PUB protects, in the PUB's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetReference {
    /// API version of the workload, e.g. `apps.kruise.io/v1alpha1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Kind of the workload, e.g. `CloneSet`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Name of the workload.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodUnavailableBudgetStatus {
    /// The PUB generation this status was computed from.
    #[serde(default)]
    pub observed_generation: i64,
    /// Pods whose deletion or eviction was admitted but not yet observed, with the admission time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub disrupted_pods: BTreeMap<String, Time>,
    /// Pods whose in-place update was admitted but not yet observed, with the admission time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable_pods: BTreeMap<String, Time>,
    /// How many more Pods may be made unavailable right now.
    #[serde(default)]
    pub unavailable_allowed: i32,
    /// Pods that are currently available.
    #[serde(default)]
    pub current_available: i32,
    /// Pods that must stay available.
    #[serde(default)]
    pub desired_available: i32,
    /// Pods the budget is computed against (the workload's expected replicas).
    #[serde(default)]
    pub total_replicas: i32,
}

/// A voluntary operation on a Pod that a PUB can protect against.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "UPPERCASE")]
#[strum(serialize_all = "UPPERCASE")]
pub enum PubOperation {
    Delete,
    Evict,
    Update,
    Resize,
}

impl PubOperation {
    pub const ALL: [PubOperation; 4] = [
        PubOperation::Delete,
        PubOperation::Evict,
        PubOperation::Update,
        PubOperation::Resize,
    ];

    /// Protected when the PUB has no `kruise.io/pub-protect-operations` annotation.
    pub const DEFAULT_PROTECTED: [PubOperation; 3] = [
        PubOperation::Delete,
        PubOperation::Evict,
        PubOperation::Update,
    ];

    /// The upstream spelling (`DELETE`, ...), as in `kruise.io/pub-protect-operations`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<Self> {
        s.parse().ok()
    }

    /// Parses the `kruise.io/pub-protect-operations` value (`"DELETE,EVICT"`); `None` if any
    /// item is not an operation.
    pub fn parse_list(value: &str) -> Option<Vec<Self>> {
        let mut ops = Vec::new();
        for item in value.split(',') {
            let op = Self::parse(item.trim())?;
            if !ops.contains(&op) {
                ops.push(op);
            }
        }
        Some(ops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    const TARGET_REF_YAML: &str = r#"
apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata:
  name: web-pub
  namespace: default
  annotations:
    kruise.io/pub-protect-operations: DELETE,EVICT,UPDATE
spec:
  targetRef:
    apiVersion: apps.kruise.io/v1alpha1
    kind: CloneSet
    name: web
  maxUnavailable: 1
status:
  observedGeneration: 1
  disruptedPods:
    web-a: "2024-05-01T10:00:00Z"
  unavailableAllowed: 0
  currentAvailable: 4
  desiredAvailable: 4
  totalReplicas: 5
"#;

    const SELECTOR_YAML: &str = r#"
apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata:
  name: w1-pub
spec:
  selector:
    matchLabels:
      app: w1
  minAvailable: 80%
"#;

    fn round_trip(yaml: &str) -> (PodUnavailableBudget, serde_json::Value) {
        let original: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
        let pub_: PodUnavailableBudget = serde_json::from_value(original.clone()).unwrap();
        assert_eq!(serde_json::to_value(&pub_).unwrap(), original);
        (pub_, original)
    }

    #[test]
    fn target_ref_pub_round_trips() {
        let (pub_, _) = round_trip(TARGET_REF_YAML);
        let target = pub_.spec.target_ref.as_ref().unwrap();
        assert_eq!(target.api_version, "apps.kruise.io/v1alpha1");
        assert_eq!(target.kind, "CloneSet");
        assert_eq!(pub_.spec.max_unavailable, Some(IntOrString::Int(1)));
        let status = pub_.status.unwrap();
        assert_eq!(status.total_replicas, 5);
        assert!(status.disrupted_pods.contains_key("web-a"));
    }

    #[test]
    fn selector_pub_round_trips() {
        let (pub_, _) = round_trip(SELECTOR_YAML);
        assert!(pub_.spec.target_ref.is_none());
        assert_eq!(
            pub_.spec.min_available,
            Some(IntOrString::String("80%".into()))
        );
    }

    #[test]
    fn zero_counters_are_always_written() {
        let json = serde_json::to_value(PodUnavailableBudgetStatus::default()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "observedGeneration": 0,
                "unavailableAllowed": 0,
                "currentAvailable": 0,
                "desiredAvailable": 0,
                "totalReplicas": 0
            })
        );
    }

    #[test]
    fn operations_parse_and_spell_like_upstream() {
        for op in PubOperation::ALL {
            assert_eq!(serde_json::to_value(op).unwrap(), op.as_str());
            assert_eq!(PubOperation::parse(op.as_str()), Some(op));
        }
        assert_eq!(
            PubOperation::parse_list("DELETE, EVICT,DELETE"),
            Some(vec![PubOperation::Delete, PubOperation::Evict])
        );
        assert_eq!(PubOperation::parse_list("DELETE,delete"), None);
        assert_eq!(PubOperation::parse_list(""), None);
    }

    #[test]
    fn crd_shape_matches_upstream() {
        let crd = PodUnavailableBudget::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("podunavailablebudgets.policy.kruise.io")
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.short_names, Some(vec!["pub".to_string()]));
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
                ("Allowed", ".status.unavailableAllowed"),
                ("Current", ".status.currentAvailable"),
                ("Desired", ".status.desiredAvailable"),
                ("Total", ".status.totalReplicas"),
            ]
        );
        assert!(version.subresources.as_ref().unwrap().status.is_some());
    }
}
