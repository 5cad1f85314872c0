//! Custom workloads (openkruise/kruise v1.9.0 pkg/webhook/workloadspread/validating/workloadspread_validation.go; openkruise/kruise v1.9.0 pkg/controller/workloadspread/workloadspread_controller.go): kinds outside the built-in list that a
//! WorkloadSpread may target once they are allow-listed in the `kruise-configuration`
//! ConfigMap under `WorkloadSpread_Watch_Custom_Workload_WhiteList`, and how their
//! replicas are read. Pure.
//!
//! The allowlist is OpenKruise's JSON:
//!
//! ```json
//! {"workloads": [{"Group": "kubeflow.org", "Version": "v1", "Kind": "TFJob",
//!                 "ReplicasPath": "spec.tfReplicaSpecs.MASTER.replicas",
//!                 "subResources": [{"Group": "…", "Version": "…", "Kind": "…"}]}]}
//! ```
//!
//! Keys are matched without regard to case, as Go's `encoding/json` does (upstream's own
//! e2e configuration writes `ReplicasPath` for the `replicasPath` field). A workload is
//! matched by group and kind (any version, as upstream's validation does); `subResources`
//! are kinds the workload creates which in turn own its Pods.

use serde_json::Value;

/// One group/version/kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl Gvk {
    /// `group`/`kind` of an `apiVersion` and kind name.
    pub fn matches(&self, api_version: &str, kind: &str) -> bool {
        self.kind == kind && self.group == kruise_runtime::meta::group_of(api_version)
    }
}

/// An allow-listed custom workload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CustomWorkload {
    pub gvk: Gvk,
    /// Dot path of its replicas (`spec.replicas`); `None`: read the scale subresource.
    pub replicas_path: Option<String>,
    /// Kinds between the workload and its Pods.
    pub sub_resources: Vec<Gvk>,
}

/// The parsed allowlist (empty when the ConfigMap or its key is absent).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowlist {
    pub workloads: Vec<CustomWorkload>,
}

/// The value of `key` in `object`, the key compared without regard to case.
fn field<'a>(object: &'a Value, key: &str) -> Option<&'a Value> {
    object
        .as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
}

fn string(object: &Value, key: &str) -> String {
    field(object, key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn gvk(object: &Value) -> Gvk {
    Gvk {
        group: string(object, "group"),
        version: string(object, "version"),
        kind: string(object, "kind"),
    }
}

impl Allowlist {
    /// Parses the ConfigMap value; an error names what does not read.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let value: Value = serde_json::from_str(raw).map_err(|e| e.to_string())?;
        if !value.is_object() {
            return Err("expected a JSON object with \"workloads\"".into());
        }
        let Some(workloads) = field(&value, "workloads").filter(|w| !w.is_null()) else {
            return Ok(Allowlist::default());
        };
        let workloads = workloads
            .as_array()
            .ok_or("\"workloads\" must be a list")?
            .iter()
            .map(|w| {
                if !w.is_object() {
                    return Err("every workload must be an object".to_string());
                }
                let gvk = gvk(w);
                if gvk.kind.is_empty() {
                    return Err("every workload needs a Kind".to_string());
                }
                let replicas_path = Some(string(w, "replicasPath")).filter(|p| !p.is_empty());
                let sub_resources = field(w, "subResources")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().map(self::gvk).collect())
                    .unwrap_or_default();
                Ok(CustomWorkload {
                    gvk,
                    replicas_path,
                    sub_resources,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Allowlist { workloads })
    }

    /// The allow-listed workload of `api_version`/`kind`.
    pub fn workload(&self, api_version: &str, kind: &str) -> Option<&CustomWorkload> {
        self.workloads
            .iter()
            .find(|w| w.gvk.matches(api_version, kind))
    }

    /// `api_version`/`kind` is a sub-resource of an allow-listed workload: a Pod owned by
    /// one belongs to that object's owner.
    pub fn is_sub_resource(&self, api_version: &str, kind: &str) -> bool {
        self.workloads
            .iter()
            .flat_map(|w| &w.sub_resources)
            .any(|s| s.matches(api_version, kind))
    }
}

/// The integer at dot path `path` of `object` (`spec.tfReplicaSpecs.Worker.replicas`);
/// `Ok(None)` when some step is missing, an error when the value is not an integer.
pub fn replicas_at(object: &Value, path: &str) -> Result<Option<i64>, String> {
    let mut at = object;
    for step in path.split('.').filter(|s| !s.is_empty()) {
        match at.get(step) {
            Some(v) if !v.is_null() => at = v,
            _ => return Ok(None),
        }
    }
    at.as_i64()
        .map(Some)
        .ok_or_else(|| format!("{path} is not an integer: {at}"))
}

/// The replicas a WorkloadSpread manages in `object`: the sum of `paths` (missing paths
/// count 0, as upstream's `NestedField` does).
pub fn sum_replicas(object: &Value, paths: &[String]) -> Result<i32, String> {
    let mut total: i64 = 0;
    for path in paths {
        total += replicas_at(object, path)?.unwrap_or(0);
    }
    Ok(i32::try_from(total.max(0)).unwrap_or(i32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Upstream's own e2e configuration (test/kruise-e2e-config.yaml).
    const UPSTREAM: &str = r#"{
      "workloads": [
        {"Group": "kubeflow.org", "Version": "v1", "Kind": "TFJob",
         "ReplicasPath": "spec.tfReplicaSpecs.MASTER.replicas"},
        {"Group": "apps.kruise.io", "Version": "v1alpha1", "Kind": "DaemonSet"}
      ]
    }"#;

    #[test]
    fn parses_upstreams_configuration() {
        let list = Allowlist::parse(UPSTREAM).unwrap();
        let tf = list.workload("kubeflow.org/v1", "TFJob").unwrap();
        assert_eq!(
            tf.replicas_path.as_deref(),
            Some("spec.tfReplicaSpecs.MASTER.replicas")
        );
        let ds = list
            .workload("apps.kruise.io/v1beta1", "DaemonSet")
            .unwrap();
        assert_eq!(ds.replicas_path, None);
        assert!(list.workload("apps/v1", "DaemonSet").is_none());
        assert!(list.workload("kubeflow.org/v1", "PyTorchJob").is_none());
    }

    #[test]
    fn lower_case_keys_and_sub_resources() {
        let raw = r#"{"workloads": [{"group": "x.io", "version": "v1", "kind": "Game",
            "replicasPath": "spec.size",
            "subResources": [{"group": "x.io", "version": "v1", "kind": "GameSet"}]}]}"#;
        let list = Allowlist::parse(raw).unwrap();
        assert_eq!(
            list.workload("x.io/v1", "Game")
                .unwrap()
                .replicas_path
                .as_deref(),
            Some("spec.size")
        );
        assert!(list.is_sub_resource("x.io/v2", "GameSet"));
        assert!(!list.is_sub_resource("x.io/v1", "Game"));
    }

    #[test]
    fn bad_allowlists_are_errors() {
        assert!(Allowlist::parse("not json").is_err());
        assert!(Allowlist::parse("[]").is_err());
        assert!(Allowlist::parse(r#"{"workloads": {}}"#).is_err());
        assert!(Allowlist::parse(r#"{"workloads": [{"Group": "a"}]}"#).is_err());
        assert_eq!(Allowlist::parse("{}").unwrap(), Allowlist::default());
    }

    #[test]
    fn replicas_by_path() {
        let tf = json!({"spec": {"tfReplicaSpecs": {
            "PS": {"replicas": 1}, "MASTER": {"replicas": 5}, "Worker": {"replicas": 4}}}});
        let paths = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            sum_replicas(&tf, &paths(&["spec.tfReplicaSpecs.MASTER.replicas"])),
            Ok(5)
        );
        assert_eq!(
            sum_replicas(
                &tf,
                &paths(&[
                    "spec.tfReplicaSpecs.Worker.replicas",
                    "spec.tfReplicaSpecs.PS.replicas"
                ])
            ),
            Ok(5)
        );
        assert_eq!(sum_replicas(&tf, &paths(&["spec.missing.replicas"])), Ok(0));
        assert!(sum_replicas(&tf, &paths(&["spec.tfReplicaSpecs"])).is_err());
    }
}
