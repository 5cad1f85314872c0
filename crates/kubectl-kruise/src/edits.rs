//! The changes the mutating commands make, as patches computed from the object read: pure,
//! so each is tested here and the commands only send them.

use serde_json::{Value, json};

use crate::CrrTiming;
use crate::error::{Error, Result};
use crate::target::{Kind, Target};

/// Where a kind keeps its "paused" switch.
fn pause_field(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::CloneSet => Some("/spec/updateStrategy/paused"),
        Kind::AdvancedStatefulSet | Kind::AdvancedDaemonSet => {
            Some("/spec/updateStrategy/rollingUpdate/paused")
        }
        Kind::AdvancedCronJob | Kind::BroadcastJob | Kind::Deployment => Some("/spec/paused"),
        // Kruise Rollout's own pause, as kruise-tools' objectpauser.go sets it.
        Kind::Rollout => Some("/spec/strategy/paused"),
        Kind::UnitedDeployment => None,
    }
}

/// The merge patch that sets the field at `pointer` to `value`.
fn merge_at(pointer: &str, value: Value) -> Value {
    pointer
        .rsplit('/')
        .filter(|k| !k.is_empty())
        .fold(value, |inner, key| json!({ key: inner }))
}

/// `rollout pause` (`paused = true`) and `rollout resume`: the merge patch, or why not.
pub fn pause_patch(target: &Target, obj: &Value, paused: bool) -> Result<Value> {
    let Some(pointer) = pause_field(target.kind) else {
        return Err(Error::Unsupported {
            kind: target.kind.resource(),
            name: target.name.clone(),
            what: if paused {
                "pausing is not supported".into()
            } else {
                "resuming is not supported".into()
            },
        });
    };
    let now = obj
        .pointer(pointer)
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if now == paused {
        return Err(Error::Refused(format!(
            "{} {:?} is {}",
            target.kind.resource(),
            target.name,
            if paused {
                "already paused"
            } else {
                "not paused"
            }
        )));
    }
    Ok(merge_at(pointer, json!(paused)))
}

/// kubectl's restart annotation on the Pod template.
pub const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";

/// `rollout restart`: a new template annotation, hence a new revision whose Pods are
/// recreated (or, on CloneSet, Advanced StatefulSet and Advanced DaemonSet with an in-place
/// strategy, updated in place: only metadata changes).
pub fn restart_patch(target: &Target, now: &str) -> Result<Value> {
    let template_at = match target.kind {
        Kind::CloneSet | Kind::AdvancedStatefulSet | Kind::AdvancedDaemonSet | Kind::Deployment => {
            json!({"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: now}}}}})
        }
        Kind::UnitedDeployment | Kind::AdvancedCronJob | Kind::BroadcastJob | Kind::Rollout => {
            return Err(Error::Unsupported {
                kind: target.kind.resource(),
                name: target.name.clone(),
                what: "restarting is not supported".into(),
            });
        }
    };
    Ok(template_at)
}

/// Where the Pod spec of `target` is (an AdvancedCronJob's: in its Job or BroadcastJob
/// template), or why `what` cannot edit it.
pub fn pod_spec_pointer(target: &Target, obj: &Value, what: &str) -> Result<&'static str> {
    match target.kind {
        Kind::CloneSet
        | Kind::AdvancedStatefulSet
        | Kind::AdvancedDaemonSet
        | Kind::Deployment
        | Kind::BroadcastJob => Ok("/spec/template/spec"),
        Kind::AdvancedCronJob => {
            if obj.pointer("/spec/template/broadcastJobTemplate").is_some() {
                Ok("/spec/template/broadcastJobTemplate/spec/template/spec")
            } else {
                Ok("/spec/template/jobTemplate/spec/template/spec")
            }
        }
        Kind::UnitedDeployment => Err(Error::Unsupported {
            kind: target.kind.resource(),
            name: target.name.clone(),
            what: format!("{what} is not supported (its subsets' templates differ by kind)"),
        }),
        Kind::Rollout => Err(Error::Unsupported {
            kind: target.kind.resource(),
            name: target.name.clone(),
            what: format!(
                "{what} is not supported (a Rollout has no Pod template: change its workload)"
            ),
        }),
    }
}

/// The init containers and containers under `base`: (their JSON pointer, the container).
fn containers_at(obj: &Value, base: &str) -> Vec<(String, Value)> {
    ["initContainers", "containers"]
        .iter()
        .flat_map(|list| {
            let path = format!("{base}/{list}");
            obj.pointer(&path)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(move |(i, c)| (format!("{path}/{i}"), c))
        })
        .collect()
}

fn container_name(c: &Value) -> &str {
    c.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// A JSON patch that sets `field` of the container at `path` to `value`, after testing the
/// container's name (a concurrent reorder of the list fails the patch instead of changing
/// the wrong container).
fn set_container_field(ops: &mut Vec<Value>, path: &str, name: &str, field: &str, value: Value) {
    ops.push(json!({"op": "test", "path": format!("{path}/name"), "value": name}));
    ops.push(json!({"op": "add", "path": format!("{path}/{field}"), "value": value}));
}

/// A JSON patch that gives `field` of each container `selector` picks the value `edit`
/// makes of its current one (`Null` when unset); containers left as they were get no op.
/// None picked: refused, as kubectl does.
fn edit_selected(
    obj: &Value,
    base: &str,
    selector: &str,
    field: &str,
    edit: impl Fn(Value) -> Value,
) -> Result<Value> {
    let mut ops = Vec::new();
    let mut any = false;
    for (path, c) in containers_at(obj, base) {
        let name = container_name(&c);
        if !selected(selector, name) {
            continue;
        }
        any = true;
        let before = c.get(field).cloned().unwrap_or(Value::Null);
        let after = edit(before.clone());
        if after != before {
            set_container_field(&mut ops, &path, name, field, after);
        }
    }
    if !any {
        return Err(Error::Refused(format!(
            "unable to find container named {selector:?}"
        )));
    }
    Ok(Value::Array(ops))
}

/// `-c/--containers`: `*` (every container) or one name.
fn selected(selector: &str, name: &str) -> bool {
    selector == "*" || selector == name
}

/// `set image`: `container=image` pairs (`*` for every container), init containers
/// included, as a JSON patch.
pub fn set_image_patch(target: &Target, obj: &Value, images: &[(String, String)]) -> Result<Value> {
    let base = pod_spec_pointer(target, obj, "set image")?;
    let mut ops = Vec::new();
    let mut matched = vec![false; images.len()];
    for (path, c) in containers_at(obj, base) {
        let name = container_name(&c);
        let current = c.get("image").and_then(Value::as_str).unwrap_or_default();
        let wanted = images
            .iter()
            .enumerate()
            .find(|(_, (n, _))| n == name)
            .or_else(|| images.iter().enumerate().find(|(_, (n, _))| n == "*"));
        let Some((j, (_, image))) = wanted else {
            continue;
        };
        matched[j] = true;
        if current != image {
            set_container_field(&mut ops, &path, name, "image", json!(image));
        }
    }
    if let Some(((name, _), _)) = images.iter().zip(&matched).find(|(_, m)| !**m) {
        return Err(Error::Refused(format!(
            "unable to find container named {name:?}"
        )));
    }
    Ok(Value::Array(ops))
}

/// One `set env` argument: `KEY=VALUE` sets, `KEY-` removes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvChange {
    Set(String, String),
    Remove(String),
}

pub fn parse_env(args: &[String]) -> Result<Vec<EnvChange>> {
    if args.is_empty() {
        return Err(Error::Usage(
            "at least one environment variable is required: KEY=VALUE or KEY-".into(),
        ));
    }
    args.iter()
        .map(|a| {
            if let Some((k, v)) = a.split_once('=') {
                if !k.is_empty() {
                    return Ok(EnvChange::Set(k.to_string(), v.to_string()));
                }
            } else if let Some(k) = a.strip_suffix('-')
                && !k.is_empty()
            {
                return Ok(EnvChange::Remove(k.to_string()));
            }
            Err(Error::Usage(format!("{a:?} is not KEY=VALUE or KEY-")))
        })
        .collect()
}

/// `set env`: the selected containers' `env`, each entry set or removed by name.
pub fn set_env_patch(
    target: &Target,
    obj: &Value,
    changes: &[EnvChange],
    selector: &str,
) -> Result<Value> {
    let base = pod_spec_pointer(target, obj, "set env")?;
    edit_selected(obj, base, selector, "env", |current| {
        let mut env: Vec<Value> = current.as_array().cloned().unwrap_or_default();
        for change in changes {
            match change {
                EnvChange::Set(k, v) => {
                    let entry = json!({"name": k, "value": v});
                    match env
                        .iter_mut()
                        .find(|e| e.get("name").and_then(Value::as_str) == Some(k))
                    {
                        Some(e) => *e = entry,
                        None => env.push(entry),
                    }
                }
                EnvChange::Remove(k) => {
                    env.retain(|e| e.get("name").and_then(Value::as_str) != Some(k))
                }
            }
        }
        if env.is_empty() && current.is_null() {
            current
        } else {
            Value::Array(env)
        }
    })
}

/// `--limits`/`--requests` of `set resources`: `cpu=200m,memory=512Mi`.
pub fn parse_resource_list(s: &str) -> Result<serde_json::Map<String, Value>> {
    parse_pairs(s, "RESOURCE=QUANTITY")
}

/// `a=b,c=d` (empty entries skipped); `form` names the expected form in the error.
pub fn parse_pairs(s: &str, form: &str) -> Result<serde_json::Map<String, Value>> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => {
                Ok((k.trim().to_string(), json!(v.trim())))
            }
            _ => Err(Error::Usage(format!("{pair:?} is not {form}"))),
        })
        .collect()
}

/// `set resources`: the selected containers' limits and requests, merged entry by entry.
pub fn set_resources_patch(
    target: &Target,
    obj: &Value,
    limits: &serde_json::Map<String, Value>,
    requests: &serde_json::Map<String, Value>,
    selector: &str,
) -> Result<Value> {
    if limits.is_empty() && requests.is_empty() {
        return Err(Error::Usage("--limits or --requests is required".into()));
    }
    let base = pod_spec_pointer(target, obj, "set resources")?;
    edit_selected(obj, base, selector, "resources", |current| {
        let mut resources = if current.is_object() {
            current
        } else {
            json!({})
        };
        for (section, wanted) in [("limits", limits), ("requests", requests)] {
            if wanted.is_empty() {
                continue;
            }
            let entry = &mut resources[section];
            if !entry.is_object() {
                *entry = json!({});
            }
            if let Some(map) = entry.as_object_mut() {
                map.extend(wanted.clone());
            }
        }
        resources
    })
}

/// `set serviceaccount`: the Pod spec's `serviceAccountName`.
pub fn set_service_account_patch(target: &Target, obj: &Value, account: &str) -> Result<Value> {
    let base = pod_spec_pointer(target, obj, "set serviceaccount")?;
    Ok(merge_at(
        &format!("{base}/serviceAccountName"),
        json!(account),
    ))
}

/// `create job NAME --from=advancedcronjob/X`: a Job (or, for a BroadcastJob template, a
/// BroadcastJob) from the AdvancedCronJob's template, owned by it and annotated
/// `cronjob.kubernetes.io/instantiate: manual`, as kruise-tools and `kubectl create job
/// --from=cronjob/…` make it.
pub fn job_from_cron_job(name: &str, acj: &Value) -> Result<Value> {
    let (api_version, kind, template) = if let Some(t) = acj.pointer("/spec/template/jobTemplate") {
        ("batch/v1", "Job", t)
    } else if let Some(t) = acj.pointer("/spec/template/broadcastJobTemplate") {
        ("apps.kruise.io/v1alpha1", "BroadcastJob", t)
    } else {
        return Err(Error::Refused(
            "the AdvancedCronJob has neither a jobTemplate nor a broadcastJobTemplate".into(),
        ));
    };
    let mut annotations = serde_json::Map::new();
    annotations.insert("cronjob.kubernetes.io/instantiate".into(), json!("manual"));
    if let Some(a) = template
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        annotations.extend(a.clone());
    }
    let mut metadata = json!({
        "name": name,
        "annotations": annotations,
        "ownerReferences": [{
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "AdvancedCronJob",
            "name": acj.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
            "uid": acj.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
        }],
    });
    if let Some(labels) = template.pointer("/metadata/labels") {
        metadata["labels"] = labels.clone();
    }
    Ok(json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    }))
}

/// `NAME=IMAGE` arguments.
pub fn parse_images(args: &[String]) -> Result<Vec<(String, String)>> {
    if args.is_empty() {
        return Err(Error::Usage(
            "at least one image update is required: CONTAINER=IMAGE".into(),
        ));
    }
    args.iter()
        .map(|a| match a.split_once('=') {
            Some((c, i)) if !c.is_empty() && !i.is_empty() => Ok((c.to_string(), i.to_string())),
            _ => Err(Error::Usage(format!("{a:?} is not CONTAINER=IMAGE"))),
        })
        .collect()
}

/// `scale --replicas` (and, for a CloneSet, the Pods to remove first: its
/// `scaleStrategy.podsToDelete`, kept with those already listed).
pub fn scale_patch(target: &Target, obj: &Value, replicas: i64, pods: &[String]) -> Result<Value> {
    let supported = matches!(
        target.kind,
        Kind::CloneSet | Kind::AdvancedStatefulSet | Kind::UnitedDeployment | Kind::Deployment
    );
    if !supported {
        return Err(Error::Unsupported {
            kind: target.kind.resource(),
            name: target.name.clone(),
            what: "can not be scaled (it has no replicas)".into(),
        });
    }
    if replicas < 0 {
        return Err(Error::Usage("--replicas=COUNT must be 0 or more".into()));
    }
    let mut patch = json!({"spec": {"replicas": replicas}});
    if !pods.is_empty() {
        if target.kind != Kind::CloneSet {
            return Err(Error::Unsupported {
                kind: target.kind.resource(),
                name: target.name.clone(),
                what: "has no podsToDelete: --pods is for CloneSet".into(),
            });
        }
        let mut listed: Vec<String> = obj
            .pointer("/spec/scaleStrategy/podsToDelete")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        for pod in pods {
            if !listed.contains(pod) {
                listed.push(pod.clone());
            }
        }
        patch["spec"]["scaleStrategy"] = json!({"podsToDelete": listed});
    }
    Ok(patch)
}

/// The Pods a CloneSet has that `scaledown --pods` may name: they must be its own.
pub fn check_pods_owned(
    target: &Target,
    uid: &str,
    pods: &[k8s_openapi::api::core::v1::Pod],
    wanted: &[String],
) -> Result<()> {
    for name in wanted {
        let owned = pods.iter().any(|p| {
            p.metadata.name.as_deref() == Some(name.as_str())
                && p.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == uid && o.controller == Some(true))
        });
        if !owned {
            return Err(Error::Refused(format!(
                "pod {name:?} is not a Pod of {}",
                target.reference()
            )));
        }
    }
    Ok(())
}

/// The ContainerRecreateRequest `create containerrecreaterequest` (and `restart container`)
/// makes, with kruise-tools' defaults (failurePolicy Fail, activeDeadlineSeconds 300,
/// ttlSecondsAfterFinished 1800) and the timing flags. No containers: all of the Pod's.
pub struct CrrOptions<'a> {
    pub name: &'a str,
    pub pod: &'a Value,
    pub containers: &'a [String],
    pub timing: &'a CrrTiming,
}

pub fn container_recreate_request(o: &CrrOptions<'_>) -> Result<Value> {
    let pod_name = o
        .pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let in_pod: Vec<&str> = o
        .pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("name").and_then(Value::as_str))
        .collect();
    let names: Vec<&str> = if o.containers.is_empty() {
        in_pod.clone()
    } else {
        o.containers.iter().map(String::as_str).collect()
    };
    if let Some(missing) = names.iter().find(|n| !in_pod.contains(n)) {
        return Err(Error::Refused(format!(
            "pod {pod_name:?} has no container {missing:?} (it has: {})",
            in_pod.join(", ")
        )));
    }
    let t = o.timing;
    let mut strategy = json!({
        "failurePolicy": "Fail",
        "orderedRecreate": false,
        "unreadyGracePeriodSeconds": t.unready_grace_period_seconds,
        "minStartedSeconds": t.min_started_seconds,
    });
    if let Some(grace) = t.termination_grace_period_seconds {
        strategy["terminationGracePeriodSeconds"] = json!(grace);
    }
    Ok(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ContainerRecreateRequest",
        "metadata": {"name": o.name},
        "spec": {
            "podName": pod_name,
            "containers": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
            "strategy": strategy,
            "activeDeadlineSeconds": 300,
            "ttlSecondsAfterFinished": 1800,
        }
    }))
}

/// What a completed ContainerRecreateRequest did to each container it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrrOutcome {
    /// The containers recreated (phase Succeeded), in the request's order.
    pub recreated: Vec<String>,
    /// `NAME: PHASE MESSAGE` of every other container; a container without a state (the
    /// request ended before the agent reached it) is `NAME: not started`.
    pub failed: Vec<String>,
    /// The request's own status message (why it ended: deadline, Pod gone, …).
    pub message: String,
}

impl CrrOutcome {
    /// `Err` naming the containers not recreated, if any.
    pub fn check(&self) -> Result<()> {
        if self.failed.is_empty() {
            return Ok(());
        }
        let why = if self.message.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.message)
        };
        Err(Error::Failed(format!(
            "containers not recreated: {}{why}",
            self.failed.join("; ")
        )))
    }
}

/// The outcome of a ContainerRecreateRequest once its phase is Completed (`None` before).
pub fn crr_outcome(crr: &Value) -> Option<CrrOutcome> {
    let phase = crr.pointer("/status/phase").and_then(Value::as_str)?;
    if phase != "Completed" {
        return None;
    }
    let str_at = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let states: Vec<&Value> = crr
        .pointer("/status/containerRecreateStates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let mut names: Vec<String> = crr
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| str_at(c, "name"))
        .collect();
    // A state for a container the spec does not list (not expected) still counts.
    for s in &states {
        let name = str_at(s, "name");
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let mut outcome = CrrOutcome {
        recreated: Vec::new(),
        failed: Vec::new(),
        message: crr
            .pointer("/status/message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    };
    for name in names {
        match states.iter().find(|s| str_at(s, "name") == name) {
            Some(s) if str_at(s, "phase") == "Succeeded" => outcome.recreated.push(name),
            Some(s) => outcome.failed.push(
                format!("{name}: {} {}", str_at(s, "phase"), str_at(s, "message"))
                    .trim()
                    .to_string(),
            ),
            None => outcome.failed.push(format!("{name}: not started")),
        }
    }
    Some(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(kind: Kind) -> Target {
        Target {
            kind,
            name: "a".into(),
        }
    }

    #[test]
    fn pause_and_resume_say_when_there_is_nothing_to_do() {
        let t = target(Kind::CloneSet);
        let running = json!({"spec": {"updateStrategy": {}}});
        assert_eq!(
            pause_patch(&t, &running, true).unwrap(),
            json!({"spec": {"updateStrategy": {"paused": true}}})
        );
        let err = pause_patch(&t, &running, false).unwrap_err().to_string();
        assert_eq!(err, "clonesets.apps.kruise.io \"a\" is not paused");
        let paused = json!({"spec": {"updateStrategy": {"rollingUpdate": {"paused": true}}}});
        let t = target(Kind::AdvancedStatefulSet);
        assert!(pause_patch(&t, &paused, true).is_err());
        assert_eq!(
            pause_patch(&t, &paused, false).unwrap(),
            json!({"spec": {"updateStrategy": {"rollingUpdate": {"paused": false}}}})
        );
        assert!(pause_patch(&target(Kind::UnitedDeployment), &paused, true).is_err());
        let rollout = json!({"spec": {"strategy": {"canary": {}}}});
        assert_eq!(
            pause_patch(&target(Kind::Rollout), &rollout, true).unwrap(),
            json!({"spec": {"strategy": {"paused": true}}})
        );
        let err = pause_patch(&target(Kind::Rollout), &rollout, false)
            .unwrap_err()
            .to_string();
        assert_eq!(err, "rollouts.rollouts.kruise.io \"a\" is not paused");
    }

    #[test]
    fn set_image_patches_named_containers_only() {
        let obj = json!({"spec": {"template": {"spec": {
            "initContainers": [{"name": "init", "image": "busybox"}],
            "containers": [{"name": "a", "image": "nginx:1"}, {"name": "b", "image": "redis"}]}}}});
        let t = target(Kind::CloneSet);
        let images = parse_images(&["a=nginx:2".into(), "init=busybox:2".into()]).unwrap();
        let patch = set_image_patch(&t, &obj, &images).unwrap();
        let mut applied = obj.clone();
        let patch: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(&mut applied, &patch).unwrap();
        assert_eq!(
            applied["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx:2"
        );
        assert_eq!(
            applied["spec"]["template"]["spec"]["containers"][1]["image"],
            "redis"
        );
        assert_eq!(
            applied["spec"]["template"]["spec"]["initContainers"][0]["image"],
            "busybox:2"
        );
        let all = set_image_patch(&t, &obj, &[("*".into(), "x".into())]).unwrap();
        assert_eq!(all.as_array().unwrap().len(), 6);
        assert!(set_image_patch(&t, &obj, &[("c".into(), "x".into())]).is_err());
        assert_eq!(
            set_image_patch(&t, &obj, &[("b".into(), "redis".into())]).unwrap(),
            json!([])
        );
        assert!(parse_images(&["a".into()]).is_err());
        assert!(parse_images(&[]).is_err());
    }

    #[test]
    fn set_env_resources_and_service_account() {
        let obj = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
            {"name": "b", "resources": {"limits": {"cpu": "1"}}}]}}}});
        let t = target(Kind::CloneSet);
        let changes = parse_env(&["X=9".into(), "Y-".into(), "Z=3".into()]).unwrap();
        let patch = set_env_patch(&t, &obj, &changes, "a").unwrap();
        let mut applied = obj.clone();
        let p: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(&mut applied, &p).unwrap();
        assert_eq!(
            applied["spec"]["template"]["spec"]["containers"][0]["env"],
            json!([{"name": "X", "value": "9"}, {"name": "Z", "value": "3"}])
        );
        assert!(set_env_patch(&t, &obj, &changes, "c").is_err());
        assert!(parse_env(&["=1".into()]).is_err());

        let limits = parse_resource_list("memory=1Gi").unwrap();
        let requests = parse_resource_list("cpu=100m").unwrap();
        let patch = set_resources_patch(&t, &obj, &limits, &requests, "*").unwrap();
        let mut applied = obj.clone();
        let p: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(&mut applied, &p).unwrap();
        assert_eq!(
            applied["spec"]["template"]["spec"]["containers"][1]["resources"],
            json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "100m"}})
        );
        assert!(parse_resource_list("cpu").is_err());
        assert!(
            set_resources_patch(&t, &obj, &Default::default(), &Default::default(), "*").is_err()
        );

        let acj = json!({"spec": {"template": {"broadcastJobTemplate": {}}}});
        assert_eq!(
            set_service_account_patch(&target(Kind::AdvancedCronJob), &acj, "sa").unwrap(),
            json!({"spec": {"template": {"broadcastJobTemplate": {"spec": {"template": {"spec": {"serviceAccountName": "sa"}}}}}}})
        );
    }

    #[test]
    fn a_job_from_an_advanced_cron_job() {
        let acj = json!({"metadata": {"name": "nightly", "uid": "u1"}, "spec": {"template": {"jobTemplate": {
            "metadata": {"labels": {"l": "1"}, "annotations": {"a": "1"}},
            "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}}}});
        let job = job_from_cron_job("manual-1", &acj).unwrap();
        assert_eq!(job["kind"], "Job");
        assert_eq!(
            job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"],
            "manual"
        );
        assert_eq!(job["metadata"]["annotations"]["a"], "1");
        assert_eq!(job["metadata"]["labels"]["l"], "1");
        assert_eq!(job["metadata"]["ownerReferences"][0]["uid"], "u1");
        assert_eq!(
            job["spec"]["template"]["spec"]["containers"][0]["name"],
            "c"
        );
        let bcj = json!({"metadata": {"name": "n"}, "spec": {"template": {"broadcastJobTemplate": {"spec": {}}}}});
        assert_eq!(
            job_from_cron_job("x", &bcj).unwrap()["kind"],
            "BroadcastJob"
        );
        assert!(job_from_cron_job("x", &json!({"spec": {}})).is_err());
    }

    #[test]
    fn scale_keeps_pods_already_listed() {
        let obj = json!({"spec": {"scaleStrategy": {"podsToDelete": ["p1"]}}});
        let t = target(Kind::CloneSet);
        let patch = scale_patch(&t, &obj, 2, &["p2".into(), "p1".into()]).unwrap();
        assert_eq!(
            patch,
            json!({"spec": {"replicas": 2, "scaleStrategy": {"podsToDelete": ["p1", "p2"]}}})
        );
        assert!(scale_patch(&target(Kind::AdvancedDaemonSet), &obj, 2, &[]).is_err());
        assert!(scale_patch(&target(Kind::AdvancedStatefulSet), &obj, 2, &["p".into()]).is_err());
        assert!(scale_patch(&t, &obj, -1, &[]).is_err());
    }

    #[test]
    fn a_crr_names_the_pod_s_containers() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let timing = CrrTiming {
            unready_grace_period_seconds: 3,
            termination_grace_period_seconds: Some(5),
            min_started_seconds: 2,
        };
        let o = CrrOptions {
            name: "r",
            pod: &pod,
            containers: &[],
            timing: &timing,
        };
        let crr = container_recreate_request(&o).unwrap();
        assert_eq!(crr["spec"]["podName"], "p");
        assert_eq!(
            crr["spec"]["containers"],
            json!([{"name": "a"}, {"name": "b"}])
        );
        assert_eq!(
            crr["spec"]["strategy"],
            json!({"failurePolicy": "Fail", "orderedRecreate": false,
                   "unreadyGracePeriodSeconds": 3, "minStartedSeconds": 2,
                   "terminationGracePeriodSeconds": 5})
        );
        let missing = ["c".to_string()];
        let o = CrrOptions {
            containers: &missing,
            ..o
        };
        let err = container_recreate_request(&o).unwrap_err().to_string();
        assert_eq!(err, r#"pod "p" has no container "c" (it has: a, b)"#);
    }

    #[test]
    fn crr_outcomes() {
        assert!(crr_outcome(&json!({"status": {"phase": "Recreating"}})).is_none());
        let ok = json!({"spec": {"containers": [{"name": "a"}]},
            "status": {"phase": "Completed", "containerRecreateStates": [{"name": "a", "phase": "Succeeded"}]}});
        let outcome = crr_outcome(&ok).unwrap();
        assert_eq!(outcome.recreated, ["a"]);
        assert!(outcome.check().is_ok());
        let bad = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]},
            "status": {"phase": "Completed", "message": "deadline",
            "containerRecreateStates": [{"name": "a", "phase": "Failed", "message": "x"},
                                        {"name": "b", "phase": "Succeeded"}]}});
        let outcome = crr_outcome(&bad).unwrap();
        assert_eq!(outcome.recreated, ["b"]);
        assert_eq!(
            outcome.check().unwrap_err().to_string(),
            "containers not recreated: a: Failed x; c: not started (deadline)"
        );
    }
}
