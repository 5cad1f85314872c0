//! `create broadcastJob NAME --image=IMG [-- COMMAND…]` and `--from=advancedcronjob/ACJ`,
//! as kruise-tools' pkg/cmd/create/create_broadcast_job.go makes them.

use serde_json::{Value, json};

use crate::edits;
use crate::error::{Error, Result};

/// A BroadcastJob running `image` (with `command`, if any) once on every node: one
/// container named after the job, `restartPolicy: Never`, the rest left to the defaults.
pub fn from_image(name: &str, image: &str, command: &[String]) -> Value {
    let mut container = json!({"name": name, "image": image});
    if !command.is_empty() {
        container["command"] = json!(command);
    }
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "BroadcastJob",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {
            "containers": [container],
            "restartPolicy": "Never",
        }}},
    })
}

/// The BroadcastJob of an AdvancedCronJob's `broadcastJobTemplate`, made as
/// `create job --from` makes it; an AdvancedCronJob with a Job template is refused.
pub fn from_cron_job(name: &str, acj: &Value) -> Result<Value> {
    let job = edits::job_from_cron_job(name, acj)?;
    if job["kind"] != "BroadcastJob" {
        let acj_name = acj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Err(Error::Refused(format!(
            "advancedcronjob {acj_name:?} has a Job template, not a BroadcastJob template \
             (create job --from=advancedcronjob/{acj_name} runs it)"
        )));
    }
    Ok(job)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_and_a_command() {
        let job = from_image("my-bcj", "busybox", &["date".into(), "-u".into()]);
        assert_eq!(job["kind"], "BroadcastJob");
        assert_eq!(job["apiVersion"], "apps.kruise.io/v1alpha1");
        assert_eq!(
            job["spec"]["template"]["spec"],
            json!({"containers": [{"name": "my-bcj", "image": "busybox", "command": ["date", "-u"]}],
                   "restartPolicy": "Never"})
        );
        let plain = from_image("b", "busybox", &[]);
        assert!(
            plain["spec"]["template"]["spec"]["containers"][0]
                .get("command")
                .is_none()
        );
    }

    #[test]
    fn only_a_broadcast_job_template() {
        let acj = json!({"metadata": {"name": "nightly", "uid": "u"},
            "spec": {"template": {"broadcastJobTemplate": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"template": {"spec": {"containers": []}}}}}}});
        let job = from_cron_job("now", &acj).unwrap();
        assert_eq!(job["kind"], "BroadcastJob");
        assert_eq!(job["metadata"]["labels"], json!({"a": "b"}));
        assert_eq!(
            job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
            "manual"
        );
        assert_eq!(job["metadata"]["ownerReferences"][0]["uid"], "u");
        let jobs = json!({"metadata": {"name": "nightly"},
            "spec": {"template": {"jobTemplate": {"spec": {}}}}});
        let err = from_cron_job("now", &jobs).unwrap_err().to_string();
        assert!(
            err.contains("has a Job template, not a BroadcastJob template"),
            "{err}"
        );
    }
}
