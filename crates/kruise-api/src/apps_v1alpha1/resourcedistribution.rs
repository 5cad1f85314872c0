//! `ResourceDistribution` (`apps.kruise.io/v1alpha1`, cluster-scoped): copies one Secret or
//! ConfigMap into a chosen set of namespaces and keeps every copy in sync with the source.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ResourceDistribution",
    plural = "resourcedistributions",
    singular = "resourcedistribution",
    shortname = "distributor",
    status = "ResourceDistributionStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ResourceDistribution copies a Secret or ConfigMap into chosen namespaces and keeps the copies in sync.",
    printcolumn(
        name = "TOTAL",
        type_ = "integer",
        json_path = ".status.desired",
        description = "The desired number of desired distribution and syncs."
    ),
    printcolumn(
        name = "SUCCEED",
        type_ = "integer",
        json_path = ".status.succeeded",
        description = "The number of successful distribution and syncs."
    ),
    printcolumn(
        name = "FAILED",
        type_ = "integer",
        json_path = ".status.failed",
        description = "The number of failed distributions and syncs."
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionSpec {
    /// The complete Secret or ConfigMap to distribute; its namespace is ignored.
    #[schemars(schema_with = "embedded_resource")]
    pub resource: serde_json::Value,
    /// The namespaces to distribute to.
    pub targets: ResourceDistributionTargets,
}

/// Which namespaces get a copy: (allNamespaces ∪ includedNamespaces ∪ namespaceLabelSelector) − excludedNamespaces.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionTargets {
    /// Distribute to every namespace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_namespaces: bool,
    /// Namespaces that never get a copy; wins over every other target.
    #[serde(
        default,
        skip_serializing_if = "ResourceDistributionTargetNamespaces::is_empty"
    )]
    pub excluded_namespaces: ResourceDistributionTargetNamespaces,
    /// Namespaces that get a copy.
    #[serde(
        default,
        skip_serializing_if = "ResourceDistributionTargetNamespaces::is_empty"
    )]
    pub included_namespaces: ResourceDistributionTargetNamespaces,
    /// Namespaces whose labels match get a copy (when the selector is not empty).
    #[serde(default, skip_serializing_if = "is_empty_selector")]
    pub namespace_label_selector: LabelSelector,
}

/// A list of namespace names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionTargetNamespaces {
    /// The namespaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub list: Vec<ResourceDistributionNamespace>,
}

impl ResourceDistributionTargetNamespaces {
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The namespace names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(|ns| ns.name.as_str())
    }
}

/// One namespace name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceDistributionNamespace {
    /// The namespace name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionStatus {
    /// Matched namespaces.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub desired: i32,
    /// Matched namespaces whose copy is in sync.
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub succeeded: i32,
    /// Matched namespaces whose copy failed (desired − succeeded).
    #[serde(default, skip_serializing_if = "crate::appspub::is_zero_i32")]
    pub failed: i32,
    /// The ResourceDistribution generation this status was computed from.
    #[serde(default, skip_serializing_if = "crate::apps_v1alpha1::is_zero_i64")]
    pub observed_generation: i64,
    /// One condition per failure type, listing the namespaces that failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ResourceDistributionCondition>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionCondition {
    /// One of the six failure types, e.g. `ConflictOccurred`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` when some namespace failed this way, else `False`.
    pub status: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Why the condition has its status (`Succeeded` when False).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Namespaces that failed this way.
    #[serde(
        default,
        rename = "failedNamespace",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub failed_namespaces: Vec<String>,
}

pub(crate) fn is_empty_selector(selector: &LabelSelector) -> bool {
    selector == &LabelSelector::default()
}

/// A whole Kubernetes object kept as-is; the apiserver checks its apiVersion, kind and metadata.
pub(crate) fn embedded_resource(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-embedded-resource": true,
        "x-kubernetes-preserve-unknown-fields": true
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    /// A ResourceDistribution after ns-3 joined the targets with a conflicting Secret.
    const RD_YAML: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: ResourceDistribution
metadata:
  name: rd-secret
spec:
  resource:
    apiVersion: v1
    kind: Secret
    metadata:
      name: app-token
      labels:
        app: demo
    type: Opaque
    data:
      token: ZGVtby10b2tlbg==
  targets:
    excludedNamespaces:
      list:
      - name: kube-system
    includedNamespaces:
      list:
      - name: ns-1
      - name: ns-3
    namespaceLabelSelector:
      matchLabels:
        group: test
status:
  desired: 3
  succeeded: 2
  failed: 1
  observedGeneration: 2
  conditions:
  - type: ConflictOccurred
    status: "True"
    lastTransitionTime: "2024-05-01T10:00:00Z"
    failedNamespace:
    - ns-3
  - type: NamespaceNotExists
    status: "False"
    reason: Succeeded
    lastTransitionTime: "2024-05-01T10:00:00Z"
"#;

    #[test]
    fn resource_distribution_round_trips() {
        let original: serde_json::Value = serde_saphyr::from_str(RD_YAML).unwrap();
        let rd: ResourceDistribution = serde_json::from_value(original.clone()).unwrap();
        assert_eq!(serde_json::to_value(&rd).unwrap(), original);

        assert_eq!(rd.spec.resource["kind"], "Secret");
        assert_eq!(rd.spec.resource["data"]["token"], "ZGVtby10b2tlbg==");
        let targets = &rd.spec.targets;
        assert!(!targets.all_namespaces);
        assert_eq!(
            targets.included_namespaces.names().collect::<Vec<_>>(),
            ["ns-1", "ns-3"]
        );
        assert_eq!(
            targets
                .namespace_label_selector
                .match_labels
                .as_ref()
                .unwrap()["group"],
            "test"
        );
        let status = rd.status.unwrap();
        assert_eq!(status.failed, 1);
        assert_eq!(status.conditions[0].failed_namespaces, ["ns-3"]);
    }

    #[test]
    fn all_namespaces_round_trips() {
        let json = serde_json::json!({
            "resource": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"k": "v"}},
            "targets": {"allNamespaces": true, "excludedNamespaces": {"list": [{"name": "ns-2"}]}}
        });
        let spec: ResourceDistributionSpec = serde_json::from_value(json.clone()).unwrap();
        assert!(spec.targets.all_namespaces);
        assert!(spec.targets.included_namespaces.is_empty());
        assert_eq!(serde_json::to_value(&spec).unwrap(), json);
    }

    #[test]
    fn crd_is_cluster_scoped_with_embedded_resource() {
        let crd = ResourceDistribution::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("resourcedistributions.apps.kruise.io")
        );
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(
            crd.spec.names.short_names,
            Some(vec!["distributor".to_string()])
        );
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
                ("TOTAL", ".status.desired"),
                ("SUCCEED", ".status.succeeded"),
                ("FAILED", ".status.failed"),
            ]
        );
        let schema = serde_json::to_value(&version.schema).unwrap();
        let resource = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["resource"];
        assert_eq!(resource["x-kubernetes-embedded-resource"], true);
        assert_eq!(resource["x-kubernetes-preserve-unknown-fields"], true);
    }
}
