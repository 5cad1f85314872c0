//! `restart container POD [CONTAINER...]`: restarts containers of a running Pod in place
//! through a ContainerRecreateRequest, as `create containerrecreaterequest` does, with a
//! name of its own and the request owned by the Pod, so a user need not pick a name or
//! clean up after the Pod is gone.

use serde_json::{Value, json};

use crate::CrrTiming;
use crate::edits::{self, CrrOptions, CrrOutcome};
use crate::error::Result;

/// The longest object name the API server takes (a DNS subdomain).
const MAX_NAME: usize = 253;

/// `<pod>-restart-<unix seconds in hex>`: unique per second, sorted by time for one Pod.
/// A Pod name too long to fit is cut (the suffix is what tells two requests apart), and
/// what is left must end in an alphanumeric character to stay a valid name.
pub fn request_name(pod: &str, unix_seconds: u64) -> String {
    let suffix = format!("-restart-{unix_seconds:x}");
    let keep = MAX_NAME - suffix.len();
    let base: String = pod.chars().take(keep).collect();
    format!("{}{suffix}", base.trim_end_matches(['-', '.']))
}

/// The request for `containers` of `pod` (none: all of them), named by [`request_name`],
/// owned by the Pod: it goes when the Pod does, and its TTL removes it before that.
pub fn restart_request(
    pod: &Value,
    containers: &[String],
    timing: &CrrTiming,
    unix_seconds: u64,
) -> Result<Value> {
    let pod_name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = request_name(pod_name, unix_seconds);
    let mut crr = edits::container_recreate_request(&CrrOptions {
        name: &name,
        pod,
        containers,
        timing,
    })?;
    crr["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "v1",
        "kind": "Pod",
        "name": pod_name,
        "uid": pod.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
    }]);
    Ok(crr)
}

/// One line per container the request recreated.
pub fn outcome_lines(pod: &str, outcome: &CrrOutcome) -> Vec<String> {
    outcome
        .recreated
        .iter()
        .map(|c| format!("pod/{pod} container {c} recreated"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn timing() -> CrrTiming {
        CrrTiming {
            unready_grace_period_seconds: 3,
            termination_grace_period_seconds: None,
            min_started_seconds: 0,
        }
    }

    #[test]
    fn the_name_is_the_pod_s_and_the_time_in_hex() {
        assert_eq!(request_name("web-0", 0x6560_0000), "web-0-restart-65600000");
        assert_eq!(request_name("web-0", 255), "web-0-restart-ff");
    }

    proptest! {
        #[test]
        fn names_stay_valid(pod in "[a-z0-9]([a-z0-9.-]{0,300}[a-z0-9])?", t in any::<u64>()) {
            let name = request_name(&pod, t);
            prop_assert!(name.len() <= MAX_NAME, "{}", name.len());
            let suffix = format!("-restart-{t:x}");
            prop_assert!(name.ends_with(&suffix));
            let base = &name[..name.len() - suffix.len()];
            prop_assert!(pod.starts_with(base));
            prop_assert!(!base.ends_with(['-', '.']));
        }
    }

    #[test]
    fn the_request_is_owned_by_the_pod() {
        let pod = json!({"metadata": {"name": "web-0", "uid": "u-1"},
            "spec": {"containers": [{"name": "app"}, {"name": "sidecar"}]}});
        let crr = restart_request(&pod, &[], &timing(), 16).unwrap();
        assert_eq!(crr["metadata"]["name"], "web-0-restart-10");
        assert_eq!(
            crr["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "Pod", "name": "web-0", "uid": "u-1"}])
        );
        assert_eq!(crr["spec"]["podName"], "web-0");
        assert_eq!(
            crr["spec"]["containers"],
            json!([{"name": "app"}, {"name": "sidecar"}])
        );
        assert_eq!(crr["spec"]["activeDeadlineSeconds"], 300);
        let one = restart_request(&pod, &["sidecar".into()], &timing(), 16).unwrap();
        assert_eq!(one["spec"]["containers"], json!([{"name": "sidecar"}]));
        let err = restart_request(&pod, &["nope".into()], &timing(), 16).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"pod "web-0" has no container "nope" (it has: app, sidecar)"#
        );
    }

    #[test]
    fn one_line_per_container_recreated() {
        let crr = json!({"spec": {"containers": [{"name": "app"}, {"name": "sidecar"}]},
            "status": {"phase": "Completed", "containerRecreateStates": [
                {"name": "app", "phase": "Succeeded"}, {"name": "sidecar", "phase": "Failed", "message": "stop failed"}]}});
        let outcome = edits::crr_outcome(&crr).unwrap();
        assert_eq!(
            outcome_lines("web-0", &outcome),
            ["pod/web-0 container app recreated"]
        );
        assert_eq!(
            outcome.check().unwrap_err().to_string(),
            "containers not recreated: sidecar: Failed stop failed"
        );
    }
}
