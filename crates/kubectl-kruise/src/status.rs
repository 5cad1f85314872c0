//! `rollout status`: how far a workload's rollout is, from its spec and status alone.
//!
//! The messages are kubectl's and kruise-tools' (openkruise/kruise-tools
//! pkg/internal/polymorphichelpers/rollout_status.go), so scripts that grep them keep
//! working; the decision is stricter than kruise-tools' for CloneSet, whose in-place
//! strategies it reports complete at once unless a partition is set: here a rollout is done
//! only when every Pod outside the partition is updated and ready and no old Pod is left.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::target::Kind;

/// One look at a rollout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    pub done: bool,
    /// One line, without the newline.
    pub message: String,
}

impl Progress {
    fn waiting(message: String) -> Self {
        Progress {
            done: false,
            message,
        }
    }
    fn done(message: String) -> Self {
        Progress {
            done: true,
            message,
        }
    }
}

fn int(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn flag(obj: &Value, pointer: &str) -> bool {
    obj.pointer(pointer)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// A partition given as a number or a percentage of `replicas` (rounded up, as CloneSet's
/// controller scales it: openkruise/kruise v1.9.0 pkg/controller/cloneset/sync/api.go).
pub fn partition(value: Option<&Value>, replicas: i64) -> Result<i64> {
    let Some(value) = value else { return Ok(0) };
    if let Some(n) = value.as_i64() {
        return Ok(n.max(0));
    }
    let s = value.as_str().unwrap_or_default();
    if let Some(percent) = s.strip_suffix('%') {
        let p: i64 = percent
            .trim()
            .parse()
            .map_err(|_| Error::Refused(format!("invalid partition {s:?}")))?;
        return Ok((p.max(0) * replicas + 99) / 100);
    }
    s.parse::<i64>()
        .map(|n| n.max(0))
        .map_err(|_| Error::Refused(format!("invalid partition {s:?}")))
}

fn observed(obj: &Value) -> bool {
    let observed = int(obj, "/status/observedGeneration");
    observed > 0 && observed >= int(obj, "/metadata/generation")
}

fn paused_note(paused: bool, how: &str) -> String {
    if paused {
        format!(
            " (the rollout is paused: {how} is true; `kubectl kruise rollout resume` continues it)"
        )
    } else {
        String::new()
    }
}

/// The rollout's state, as `kubectl kruise rollout status` prints it.
pub fn progress(kind: Kind, obj: &Value) -> Result<Progress> {
    let name = text(obj, "/metadata/name").to_string();
    match kind {
        Kind::CloneSet => Ok(cloneset(obj)),
        Kind::AdvancedStatefulSet => stateful_set(obj),
        Kind::AdvancedDaemonSet => Ok(daemon_set(&name, obj)),
        Kind::UnitedDeployment => Ok(united_deployment(obj)),
        Kind::Deployment => Ok(deployment(&name, obj)),
        Kind::AdvancedCronJob | Kind::BroadcastJob => Err(Error::Unsupported {
            kind: kind.resource(),
            name,
            what: "has no rollout".into(),
        }),
        Kind::Rollout => Err(Error::Unsupported {
            kind: kind.resource(),
            name: name.clone(),
            what: format!(
                "is not a workload: `kubectl kruise describe rollout {name}` shows its progress"
            ),
        }),
    }
}

/// A set of Pods with a partition: CloneSet and Advanced StatefulSet.
struct Rollout<'a> {
    label: &'a str,
    replicas: i64,
    partition: i64,
    updated: i64,
    updated_ready: i64,
    ready: i64,
    available: i64,
    current: i64,
    paused: String,
    revision: &'a str,
}

impl Rollout<'_> {
    fn progress(&self) -> Progress {
        let target = (self.replicas - self.partition).max(0);
        if self.updated < target {
            let message = if self.partition > 0 {
                format!(
                    "Waiting for partitioned roll out to finish: {} out of {target} new pods have been updated...",
                    self.updated
                )
            } else {
                format!(
                    "Waiting for {} rollout to finish: {} out of {} new pods have been updated...",
                    self.label, self.updated, self.replicas
                )
            };
            return Progress::waiting(message + &self.paused);
        }
        if self.updated_ready < target {
            return Progress::waiting(format!(
                "Waiting for {} rollout to finish: {} of {target} updated pods are ready...",
                self.label, self.updated_ready
            ));
        }
        if self.current > self.replicas {
            return Progress::waiting(format!(
                "Waiting for {} rollout to finish: {} old pods are pending termination...",
                self.label,
                self.current - self.replicas
            ));
        }
        if self.ready < self.replicas {
            return Progress::waiting(format!(
                "Waiting for {} pods to be ready...",
                self.replicas - self.ready
            ));
        }
        if self.partition > 0 {
            return Progress::done(format!(
                "partitioned roll out complete: {} new pods have been updated...",
                self.updated
            ));
        }
        Progress::done(format!(
            "{} rolling update complete {} pods at revision {}...",
            self.label, self.available, self.revision
        ))
    }
}

fn cloneset(obj: &Value) -> Progress {
    if !observed(obj) {
        return Progress::waiting("Waiting for CloneSet spec update to be observed...".into());
    }
    let replicas = obj
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    // An invalid partition is refused at admission; if one is stored anyway, the controller
    // updates nothing beyond it, so "all of them" is the safe reading.
    let partition =
        partition(obj.pointer("/spec/updateStrategy/partition"), replicas).unwrap_or(replicas);
    Rollout {
        label: "CloneSet",
        replicas,
        partition: partition.min(replicas),
        updated: int(obj, "/status/updatedReplicas"),
        updated_ready: int(obj, "/status/updatedReadyReplicas"),
        ready: int(obj, "/status/readyReplicas"),
        available: int(obj, "/status/availableReplicas"),
        current: int(obj, "/status/replicas"),
        paused: paused_note(
            flag(obj, "/spec/updateStrategy/paused"),
            "spec.updateStrategy.paused",
        ),
        revision: text(obj, "/status/updateRevision"),
    }
    .progress()
}

fn stateful_set(obj: &Value) -> Result<Progress> {
    let strategy = text(obj, "/spec/updateStrategy/type");
    if strategy == "OnDelete" {
        return Err(Error::Refused(
            "rollout status is only available for RollingUpdate strategy type".into(),
        ));
    }
    if !observed(obj) {
        return Ok(Progress::waiting(
            "Waiting for Advanced StatefulSet spec update to be observed...".into(),
        ));
    }
    let replicas = obj
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let partition = int(obj, "/spec/updateStrategy/rollingUpdate/partition");
    Ok(Rollout {
        label: "Advanced StatefulSet",
        replicas,
        partition: partition.clamp(0, replicas),
        updated: int(obj, "/status/updatedReplicas"),
        updated_ready: int(obj, "/status/updatedReadyReplicas"),
        ready: int(obj, "/status/readyReplicas"),
        available: int(obj, "/status/availableReplicas"),
        current: int(obj, "/status/replicas"),
        paused: paused_note(
            flag(obj, "/spec/updateStrategy/rollingUpdate/paused"),
            "spec.updateStrategy.rollingUpdate.paused",
        ),
        revision: text(obj, "/status/updateRevision"),
    }
    .progress())
}

fn daemon_set(name: &str, obj: &Value) -> Progress {
    if !observed(obj) {
        return Progress::waiting("Waiting for daemon set spec update to be observed...".into());
    }
    let desired = int(obj, "/status/desiredNumberScheduled");
    let partition = int(obj, "/spec/updateStrategy/rollingUpdate/partition").clamp(0, desired);
    let target = desired - partition;
    let updated = int(obj, "/status/updatedNumberScheduled");
    let available = int(obj, "/status/numberAvailable");
    let paused = paused_note(
        flag(obj, "/spec/updateStrategy/rollingUpdate/paused"),
        "spec.updateStrategy.rollingUpdate.paused",
    );
    if updated < target {
        return Progress::waiting(format!(
            "Waiting for daemon set {name:?} rollout to finish: {updated} out of {target} new pods have been updated...{paused}"
        ));
    }
    if available < desired {
        return Progress::waiting(format!(
            "Waiting for daemon set {name:?} rollout to finish: {available} of {desired} updated pods are available..."
        ));
    }
    if partition > 0 {
        return Progress::done(format!(
            "partitioned roll out complete: {updated} new pods have been updated..."
        ));
    }
    Progress::done(format!("daemon set {name:?} successfully rolled out"))
}

fn united_deployment(obj: &Value) -> Progress {
    if !observed(obj) {
        return Progress::waiting(
            "Waiting for UnitedDeployment spec update to be observed...".into(),
        );
    }
    let replicas = int(obj, "/status/replicas");
    let partitioned: i64 = obj
        .pointer("/spec/updateStrategy/manualUpdate/partitions")
        .and_then(Value::as_object)
        .map(|p| p.values().filter_map(Value::as_i64).sum())
        .unwrap_or(0);
    Rollout {
        label: "UnitedDeployment",
        replicas,
        partition: partitioned.clamp(0, replicas),
        updated: int(obj, "/status/updatedReplicas"),
        updated_ready: int(obj, "/status/updatedReadyReplicas"),
        ready: int(obj, "/status/readyReplicas"),
        available: int(obj, "/status/readyReplicas"),
        current: replicas,
        paused: String::new(),
        revision: text(obj, "/status/updateStatus/updatedRevision"),
    }
    .progress()
}

fn deployment(name: &str, obj: &Value) -> Progress {
    if !observed(obj) {
        return Progress::waiting("Waiting for deployment spec update to be observed...".into());
    }
    let replicas = obj
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let updated = int(obj, "/status/updatedReplicas");
    let current = int(obj, "/status/replicas");
    let available = int(obj, "/status/availableReplicas");
    if updated < replicas {
        return Progress::waiting(format!(
            "Waiting for deployment {name:?} rollout to finish: {updated} out of {replicas} new replicas have been updated..."
        ));
    }
    if current > updated {
        return Progress::waiting(format!(
            "Waiting for deployment {name:?} rollout to finish: {} old replicas are pending termination...",
            current - updated
        ));
    }
    if available < updated {
        return Progress::waiting(format!(
            "Waiting for deployment {name:?} rollout to finish: {available} of {updated} updated replicas are available..."
        ));
    }
    Progress::done(format!("deployment {name:?} successfully rolled out"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn cs(spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": "sample", "generation": 2}, "spec": spec, "status": status})
    }

    #[test]
    fn a_cloneset_rollout_step_by_step() {
        let spec = json!({"replicas": 3, "updateStrategy": {"type": "InPlaceIfPossible"}});
        let p = progress(
            Kind::CloneSet,
            &cs(spec.clone(), json!({"observedGeneration": 1})),
        )
        .unwrap();
        assert_eq!(
            p.message,
            "Waiting for CloneSet spec update to be observed..."
        );
        let status = |u: i64, ur: i64, r: i64, n: i64| {
            json!({"observedGeneration": 2, "replicas": n, "updatedReplicas": u,
                   "updatedReadyReplicas": ur, "readyReplicas": r, "availableReplicas": r,
                   "updateRevision": "sample-7f"})
        };
        let p = progress(Kind::CloneSet, &cs(spec.clone(), status(1, 0, 2, 3))).unwrap();
        assert_eq!(
            p.message,
            "Waiting for CloneSet rollout to finish: 1 out of 3 new pods have been updated..."
        );
        assert!(!p.done);
        let p = progress(Kind::CloneSet, &cs(spec.clone(), status(3, 2, 2, 3))).unwrap();
        assert_eq!(
            p.message,
            "Waiting for CloneSet rollout to finish: 2 of 3 updated pods are ready..."
        );
        let p = progress(Kind::CloneSet, &cs(spec.clone(), status(3, 3, 3, 4))).unwrap();
        assert_eq!(
            p.message,
            "Waiting for CloneSet rollout to finish: 1 old pods are pending termination..."
        );
        let p = progress(Kind::CloneSet, &cs(spec, status(3, 3, 3, 3))).unwrap();
        assert!(p.done);
        assert_eq!(
            p.message,
            "CloneSet rolling update complete 3 pods at revision sample-7f..."
        );
    }

    #[test]
    fn a_partition_and_a_pause_are_said() {
        let spec = json!({"replicas": 4, "updateStrategy": {"partition": "50%", "paused": true}});
        let status = json!({"observedGeneration": 2, "replicas": 4, "updatedReplicas": 1,
            "updatedReadyReplicas": 1, "readyReplicas": 4, "availableReplicas": 4});
        let p = progress(Kind::CloneSet, &cs(spec, status.clone())).unwrap();
        assert!(!p.done);
        assert!(
            p.message.starts_with(
                "Waiting for partitioned roll out to finish: 1 out of 2 new pods have been updated... (the rollout is paused"
            ),
            "{}",
            p.message
        );
        let spec = json!({"replicas": 4, "updateStrategy": {"partition": 3}});
        let p = progress(Kind::CloneSet, &cs(spec, status)).unwrap();
        assert!(p.done);
        assert_eq!(
            p.message,
            "partitioned roll out complete: 1 new pods have been updated..."
        );
    }

    #[test]
    fn daemon_sets_and_stateful_sets() {
        let ds = json!({"metadata": {"name": "d", "generation": 1},
            "spec": {"updateStrategy": {"rollingUpdate": {"partition": 1}}},
            "status": {"observedGeneration": 1, "desiredNumberScheduled": 3,
                       "updatedNumberScheduled": 1, "numberAvailable": 3}});
        let p = progress(Kind::AdvancedDaemonSet, &ds).unwrap();
        assert_eq!(
            p.message,
            "Waiting for daemon set \"d\" rollout to finish: 1 out of 2 new pods have been updated..."
        );
        let sts = json!({"metadata": {"name": "s", "generation": 1},
            "spec": {"replicas": 2, "updateStrategy": {"type": "OnDelete"}}, "status": {}});
        assert!(progress(Kind::AdvancedStatefulSet, &sts).is_err());
        assert!(progress(Kind::BroadcastJob, &sts).is_err());
    }

    #[test]
    fn percent_partitions_round_up() {
        assert_eq!(partition(Some(&json!("50%")), 3).unwrap(), 2);
        assert_eq!(partition(Some(&json!("0%")), 3).unwrap(), 0);
        assert_eq!(partition(Some(&json!(2)), 3).unwrap(), 2);
        assert_eq!(partition(None, 3).unwrap(), 0);
        assert!(partition(Some(&json!("x%")), 3).is_err());
    }

    proptest! {
        /// Done only when every Pod outside the partition is updated and ready and nothing
        /// old is left.
        #[test]
        fn done_means_updated_and_ready(replicas in 0i64..20, part in 0i64..25, updated in 0i64..25,
                                        ready in 0i64..25, extra in 0i64..3) {
            let spec = json!({"replicas": replicas, "updateStrategy": {"partition": part}});
            let status = json!({"observedGeneration": 2, "replicas": replicas + extra,
                "updatedReplicas": updated, "updatedReadyReplicas": updated.min(ready),
                "readyReplicas": ready, "availableReplicas": ready});
            let p = progress(Kind::CloneSet, &cs(spec, status)).unwrap();
            let target = (replicas - part.min(replicas)).max(0);
            let expected = updated >= target && updated.min(ready) >= target && extra == 0 && ready >= replicas;
            prop_assert_eq!(p.done, expected, "{}", p.message);
        }
    }
}
