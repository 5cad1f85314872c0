//! Kruise Rollout's `Rollout` (rollouts.kruise.io, openkruise/rollouts): the status patch of
//! `rollout approve` (kruise-tools' objectapprover.go) and the page `describe rollout`
//! prints (kruise-tools' describe_rollout.go), both computed from the objects' JSON so
//! v1beta1 and v1alpha1 Rollouts read alike.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::duration;
use crate::error::{Error, Result};
use crate::target::{Kind, Target};

/// The step state Kruise Rollout waits in for an approval.
pub const STEP_PAUSED: &str = "StepPaused";
/// The state an approval moves the step to; the rollout controller then goes on.
pub const STEP_READY: &str = "StepReady";
/// The label Kruise Rollout puts on the Pods of each batch.
pub const BATCH_ID_LABEL: &str = "rollouts.kruise.io/rollout-batch-id";

/// `rollout approve`: the merge patch for the status subresource that moves the Rollout's
/// paused step to `StepReady`, or kruise-tools' refusal. A v1beta1 Rollout approves its
/// canary step, or its blue-green step; a v1alpha1 Rollout has only canary steps.
pub fn approve_patch(target: &Target, obj: &Value) -> Result<Value> {
    let refuse = |what: String| Error::Unsupported {
        kind: target.kind.resource(),
        name: target.name.clone(),
        what,
    };
    if target.kind != Kind::Rollout {
        return Err(refuse("approving is not supported".into()));
    }
    let state = |status: &str| {
        obj.pointer(&format!("/status/{status}/currentStepState"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let present = |status: &str| {
        obj.pointer(&format!("/status/{status}"))
            .is_some_and(|s| !s.is_null())
    };
    let v1alpha1 =
        obj.get("apiVersion").and_then(Value::as_str) == Some("rollouts.kruise.io/v1alpha1");
    let (status, name) = if present("canaryStatus") || v1alpha1 {
        ("canaryStatus", "canary")
    } else if present("blueGreenStatus") {
        ("blueGreenStatus", "blue-green")
    } else {
        return Err(refuse(
            "no need to approve: not in canary or blue-green progress".into(),
        ));
    };
    if state(status) != STEP_PAUSED {
        return Err(refuse(format!(
            "does not allow to approve, because current {name} state is not '{STEP_PAUSED}'"
        )));
    }
    Ok(json!({"status": {status: {"currentStepState": STEP_READY}}}))
}

/// A workload a Rollout names.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct WorkloadRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
}

impl WorkloadRef {
    /// The API group (empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map(|(g, _)| g)
            .unwrap_or_default()
    }
}

/// What `describe rollout` shows of a Rollout.
#[derive(Clone, Debug, Default)]
pub struct RolloutView {
    pub name: String,
    pub namespace: String,
    pub phase: String,
    pub message: String,
    /// The status is current (observedGeneration == generation): only then are the phase
    /// and the workload's replica counts shown, as kruise-tools does.
    pub observed: bool,
    /// `Canary`, `BlueGreen`, or empty.
    pub strategy: String,
    pub steps: Vec<Value>,
    pub traffic_routings: Vec<Value>,
    /// The name of a TrafficRouting object holding the routes.
    pub traffic_routing_ref: Option<String>,
    /// 1-based; 0 before the first step.
    pub current_step_index: i64,
    pub current_step_state: String,
    pub workload: WorkloadRef,
    pub stable_revision: String,
    pub update_revision: String,
    pub pod_template_hash: String,
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn number(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn list(v: &Value, pointer: &str) -> Vec<Value> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

impl RolloutView {
    /// Reads a v1beta1 or v1alpha1 Rollout: a blue-green Rollout's progress is in
    /// `status.blueGreenStatus`, a canary one's in `status.canaryStatus`; a v1alpha1
    /// Rollout names its workload at `spec.objectRef.workloadRef` and its TrafficRouting in
    /// an annotation.
    pub fn from_json(obj: &Value) -> RolloutView {
        let v1alpha1 = text(obj, "/apiVersion") == "rollouts.kruise.io/v1alpha1";
        let blue_green = obj
            .pointer("/spec/strategy/blueGreen")
            .is_some_and(|b| !b.is_null());
        let status = if blue_green {
            "/status/blueGreenStatus"
        } else {
            "/status/canaryStatus"
        };
        let at = |field: &str| text(obj, &format!("{status}/{field}")).to_string();
        let (strategy, strategy_at) = if obj
            .pointer("/spec/strategy/canary")
            .is_some_and(|c| !c.is_null())
        {
            ("Canary", "/spec/strategy/canary")
        } else if blue_green {
            ("BlueGreen", "/spec/strategy/blueGreen")
        } else {
            ("", "/spec/strategy/none")
        };
        let traffic_routing_ref = if v1alpha1 {
            text(
                obj,
                "/metadata/annotations/rollouts.kruise.io~1trafficrouting",
            )
        } else if strategy == "Canary" {
            text(obj, "/spec/strategy/canary/trafficRoutingRef")
        } else {
            ""
        };
        let workload_at = if v1alpha1 {
            "/spec/objectRef/workloadRef"
        } else {
            "/spec/workloadRef"
        };
        let updated = at("updatedRevision");
        RolloutView {
            name: text(obj, "/metadata/name").into(),
            namespace: text(obj, "/metadata/namespace").into(),
            phase: text(obj, "/status/phase").into(),
            message: text(obj, "/status/message").into(),
            observed: number(obj, "/status/observedGeneration")
                == number(obj, "/metadata/generation"),
            strategy: strategy.into(),
            steps: list(obj, &format!("{strategy_at}/steps")),
            traffic_routings: list(obj, &format!("{strategy_at}/trafficRoutings")),
            traffic_routing_ref: (!traffic_routing_ref.is_empty())
                .then(|| traffic_routing_ref.to_string()),
            current_step_index: number(obj, &format!("{status}/currentStepIndex")),
            current_step_state: at("currentStepState"),
            workload: WorkloadRef {
                api_version: text(obj, &format!("{workload_at}/apiVersion")).into(),
                kind: text(obj, &format!("{workload_at}/kind")).into(),
                name: text(obj, &format!("{workload_at}/name")).into(),
            },
            stable_revision: at("stableRevision"),
            update_revision: if updated.is_empty() {
                at("canaryRevision")
            } else {
                updated
            },
            pod_template_hash: at("podTemplateHash"),
        }
    }

    /// The revision hash whose Pods are listed: the new revision's (its
    /// `podTemplateHash`), before the rollout starts the stable one.
    pub fn pods_hash(&self) -> &str {
        if self.pod_template_hash.is_empty() {
            &self.stable_revision
        } else {
            &self.pod_template_hash
        }
    }

    /// The batch whose Pods are listed: the current step's, unless `--all` (or before the
    /// first step), as kruise-tools selects them.
    pub fn pods_batch(&self, all: bool) -> Option<i64> {
        (!all && self.current_step_index != 0).then_some(self.current_step_index)
    }
}

/// The replica counts of the workload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replicas {
    pub desired: i64,
    pub updated: i64,
    pub current: i64,
    pub ready: i64,
    pub available: i64,
}

/// What `describe rollout` shows of the Rollout's workload.
#[derive(Clone, Debug, Default)]
pub struct WorkloadView {
    pub images: Vec<String>,
    pub replicas: Replicas,
    pub pods: Vec<PodRow>,
}

/// The workload's images and replica counts, for the kinds Kruise Rollout rolls out:
/// Deployment, StatefulSet, CloneSet, Advanced StatefulSet and Advanced DaemonSet.
pub fn workload_view(r: &WorkloadRef, obj: &Value) -> Result<WorkloadView, String> {
    let replicas = match (r.group(), r.kind.as_str()) {
        ("apps", "Deployment" | "StatefulSet") | ("apps.kruise.io", "CloneSet" | "StatefulSet") => {
            Replicas {
                desired: number(obj, "/spec/replicas"),
                updated: number(obj, "/status/updatedReplicas"),
                current: number(obj, "/status/replicas"),
                ready: number(obj, "/status/readyReplicas"),
                available: number(obj, "/status/availableReplicas"),
            }
        }
        // A daemon set's "desired" is the nodes it should run on (kruise-tools prints
        // spec.burstReplicas there).
        ("apps.kruise.io", "DaemonSet") => Replicas {
            desired: number(obj, "/status/desiredNumberScheduled"),
            updated: number(obj, "/status/updatedNumberScheduled"),
            current: number(obj, "/status/currentNumberScheduled"),
            ready: number(obj, "/status/numberReady"),
            available: number(obj, "/status/numberAvailable"),
        },
        _ => {
            return Err(format!(
                "unsupported workload kind {} ({})",
                r.kind, r.api_version
            ));
        }
    };
    let images = list(obj, "/spec/template/spec/containers")
        .iter()
        .map(|c| text(c, "/image").to_string())
        .collect();
    Ok(WorkloadView {
        images,
        replicas,
        pods: Vec::new(),
    })
}

/// One line of the Pod table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRow {
    pub name: String,
    pub ready: String,
    pub batch_id: String,
    pub revision: String,
    pub age: String,
    pub restarts: String,
    pub status: String,
}

fn label<'a>(pod: &'a Value, key: &str) -> &'a str {
    pod.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether `pod` is of the revision `hash`: its `pod-template-hash` (Deployment, CloneSet)
/// or `controller-revision-hash` (the full revision name, `<workload>-<hash>`, or the hash).
fn of_revision(pod: &Value, hash: &str) -> bool {
    if hash.is_empty() {
        return false;
    }
    let revision = label(pod, "controller-revision-hash");
    label(pod, "pod-template-hash") == hash
        || revision == hash
        || revision
            .strip_suffix(hash)
            .is_some_and(|head| head.ends_with('-'))
}

/// The Pod table's rows: the workload's Pods of revision `hash` (and of `batch`, when
/// given), by batch, then the readier first. `now` is in seconds since the epoch.
pub fn pod_rows(pods: &[Value], hash: &str, batch: Option<i64>, now: i64) -> Vec<PodRow> {
    let batch = batch.map(|b| b.to_string());
    let mut rows: Vec<(i64, PodRow)> = pods
        .iter()
        .filter(|p| of_revision(p, hash))
        .filter(|p| {
            batch
                .as_deref()
                .is_none_or(|b| label(p, BATCH_ID_LABEL) == b)
        })
        .map(|p| {
            let statuses = list(p, "/status/containerStatuses");
            let ready = statuses
                .iter()
                .filter(|s| s.get("ready").and_then(Value::as_bool) == Some(true))
                .count();
            let restarts: i64 = statuses.iter().map(|s| number(s, "/restartCount")).sum();
            let created = text(p, "/metadata/creationTimestamp")
                .parse::<jiff::Timestamp>()
                .map(|t| t.as_second())
                .unwrap_or(now);
            let status = if p
                .pointer("/metadata/deletionTimestamp")
                .is_some_and(|d| !d.is_null())
            {
                "Terminating".to_string()
            } else {
                text(p, "/status/phase").to_string()
            };
            let hash = label(p, "pod-template-hash");
            let revision = if hash.is_empty() {
                label(p, "controller-revision-hash")
            } else {
                hash
            };
            let row = PodRow {
                name: text(p, "/metadata/name").into(),
                ready: format!("{ready}/{}", list(p, "/spec/containers").len()),
                batch_id: label(p, BATCH_ID_LABEL).into(),
                revision: revision.into(),
                age: duration::human(now - created),
                restarts: restarts.to_string(),
                status,
            };
            (ready as i64, row)
        })
        .collect();
    rows.sort_by(|(ra, a), (rb, b)| a.batch_id.cmp(&b.batch_id).then(rb.cmp(ra)));
    rows.into_iter().map(|(_, row)| row).collect()
}

const GREEN: &str = "\x1b[32m";
const RESET: &str = "\x1b[0m";

/// kruise-tools' mark of a Rollout phase or Pod status.
fn icon(state: &str) -> &'static str {
    match state {
        "Healthy" | "Running" => "\x1b[32m✔\x1b[0m",
        "Progressing" | "Pending" | "Initial" => "\x1b[33m⚠\x1b[0m",
        "Disabled" | "Unknown" | "Terminating" | "Disabling" | "Failed" => "\x1b[31m✘\x1b[0m",
        _ => "",
    }
}

/// `state` behind its mark (none without color, or for a state without one).
fn marked(state: &str, color: bool) -> String {
    match icon(state) {
        mark if color && !mark.is_empty() => format!("{mark} {state}"),
        _ => state.to_string(),
    }
}

/// One `label value` line, the label padded to 19 columns (kruise-tools' `%-19s%v`).
fn row(out: &mut String, label: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{label:<19}{value}");
}

/// A step's replicas or traffic: a number or a percentage.
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn steps(out: &mut String, view: &RolloutView, color: bool) {
    for (i, step) in view.steps.iter().enumerate() {
        let current = i64::try_from(i + 1).ok() == Some(view.current_step_index);
        if current && color {
            out.push_str(GREEN);
        }
        if let Some(r) = step.get("replicas").filter(|r| !r.is_null()) {
            row(out, "  -  Replicas: ", scalar(r));
        }
        if let Some(t) = step.get("traffic").filter(|t| !t.is_null()) {
            row(out, "     Traffic: ", scalar(t));
        }
        let matches = list(step, "/matches");
        if !matches.is_empty() {
            out.push_str("     Matches: \n");
            for m in &matches {
                out.push_str("      - Headers: \n");
                for h in list(m, "/headers") {
                    row(out, "       - Name:", text(&h, "/name"));
                    row(out, "         Value:", text(&h, "/value"));
                    if let Some(t) = h.get("type").and_then(Value::as_str) {
                        row(out, "         Type:", t);
                    }
                }
            }
        }
        if current {
            row(out, "     State:", &view.current_step_state);
            if color {
                out.push_str(RESET);
            }
        }
    }
}

/// The `Traffic Routings:` block: each route's Service and its Ingress, Gateway or custom
/// network objects (a Rollout's own, or those of the TrafficRouting it names).
pub fn traffic_routings(out: &mut String, routes: &[Value]) {
    if routes.is_empty() {
        return;
    }
    out.push_str("Traffic Routings:\n");
    for r in routes {
        row(out, "  -  Service: ", text(r, "/service"));
        if let Some(ingress) = r.get("ingress").filter(|i| !i.is_null()) {
            out.push_str("     Ingress: \n");
            row(out, "      classType: ", text(ingress, "/classType"));
            row(out, "      name: ", text(ingress, "/name"));
        }
        if let Some(gateway) = r.get("gateway").filter(|g| !g.is_null()) {
            out.push_str("     Gateway: \n");
            row(
                out,
                "      HttpRouteName: ",
                text(gateway, "/httpRouteName"),
            );
        }
        let custom = list(r, "/customNetworkRefs");
        if !custom.is_empty() {
            out.push_str("     CustomNetworkRefs: \n");
            for c in custom {
                row(out, "      name: ", text(&c, "/name"));
                row(out, "      kind: ", text(&c, "/kind"));
                row(out, "      apiVersion: ", text(&c, "/apiVersion"));
            }
        }
    }
}

/// The Pod table, columns two spaces apart (kubectl's tabwriter layout).
fn pod_table(out: &mut String, pods: &[PodRow], color: bool) {
    let header = [
        "NAME", "READY", "BATCH ID", "REVISION", "AGE", "RESTARTS", "STATUS",
    ];
    let rows: Vec<[String; 7]> = std::iter::once(header.map(str::to_string))
        .chain(pods.iter().map(|p| {
            [
                p.name.clone(),
                p.ready.clone(),
                p.batch_id.clone(),
                p.revision.clone(),
                p.age.clone(),
                p.restarts.clone(),
                marked(&p.status, color),
            ]
        }))
        .collect();
    let mut widths = [0usize; 6];
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for r in &rows {
        let mut line = String::new();
        for (w, cell) in widths.iter().zip(r.iter()) {
            let _ = write!(line, "{cell:<width$}", width = w + 2);
        }
        line.push_str(&r[6]);
        out.push_str(&line);
        out.push('\n');
    }
}

/// The whole `describe rollout` page. `routing_ref` is the TrafficRouting the Rollout names
/// (its routes, or why they could not be read); `workload` the workload's view with its
/// Pods, or why it could not be read.
pub fn describe(
    view: &RolloutView,
    routing_ref: Option<&Result<Vec<Value>, String>>,
    workload: &Result<WorkloadView, String>,
    color: bool,
) -> String {
    let mut out = String::new();
    row(&mut out, "Name:", &view.name);
    row(&mut out, "Namespace:", &view.namespace);
    if view.observed {
        row(&mut out, "Status:", marked(&view.phase, color));
        if !view.message.is_empty() {
            row(&mut out, "Message:", &view.message);
        }
    }
    row(&mut out, "Strategy:", &view.strategy);
    if !view.strategy.is_empty() {
        row(
            &mut out,
            " Step:",
            format!("{}/{}", view.current_step_index, view.steps.len()),
        );
        out.push_str(" Steps:\n");
        steps(&mut out, view, color);
        traffic_routings(&mut out, &view.traffic_routings);
    }
    match routing_ref {
        Some(Ok(routes)) => traffic_routings(&mut out, routes),
        Some(Err(e)) => {
            let _ = writeln!(out, "Error getting TrafficRoutingRef: {e}");
        }
        None => {}
    }
    let workload = match workload {
        Ok(w) => w,
        Err(e) => {
            let _ = writeln!(out, "Error getting resources: {e}");
            return out;
        }
    };
    for (i, image) in workload.images.iter().enumerate() {
        row(&mut out, if i == 0 { "Images:" } else { "" }, image);
    }
    row(&mut out, "Current Revision:", &view.stable_revision);
    row(&mut out, "Update Revision:", &view.update_revision);
    if view.observed {
        let r = &workload.replicas;
        out.push_str("Replicas:\n");
        row(&mut out, " Desired:", r.desired);
        row(&mut out, " Updated:", r.updated);
        row(&mut out, " Current:", r.current);
        row(&mut out, " Ready:", r.ready);
        row(&mut out, " Available:", r.available);
    }
    if !workload.pods.is_empty() {
        pod_table(&mut out, &workload.pods, color);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rollout_target() -> Target {
        Target {
            kind: Kind::Rollout,
            name: "demo".into(),
        }
    }

    fn rollout(status: Value) -> Value {
        json!({
            "apiVersion": "rollouts.kruise.io/v1beta1",
            "kind": "Rollout",
            "metadata": {"name": "demo", "namespace": "ns", "generation": 2},
            "spec": {
                "workloadRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web"},
                "strategy": {"canary": {
                    "steps": [
                        {"replicas": 1, "traffic": "5%"},
                        {"replicas": "50%", "matches": [{"headers": [{"name": "user", "value": "beta", "type": "Exact"}]}]},
                        {"replicas": "100%"}
                    ],
                    "trafficRoutings": [{"service": "web", "ingress": {"classType": "nginx", "name": "web"}}]
                }}
            },
            "status": status
        })
    }

    fn paused_at_step_one() -> Value {
        rollout(json!({
            "observedGeneration": 2,
            "phase": "Progressing",
            "message": "Rollout is in step(1/3), and you need manually confirm to enter the next step",
            "canaryStatus": {
                "currentStepIndex": 1,
                "currentStepState": "StepPaused",
                "stableRevision": "6bd4b7f8c9",
                "canaryRevision": "5d9c8f7b6a",
                "podTemplateHash": "5d9c8f7b6a"
            }
        }))
    }

    #[test]
    fn approve_moves_a_paused_step_to_ready_in_the_status() {
        let t = rollout_target();
        assert_eq!(
            approve_patch(&t, &paused_at_step_one()).unwrap(),
            json!({"status": {"canaryStatus": {"currentStepState": "StepReady"}}})
        );
        let blue_green = rollout(json!({"blueGreenStatus": {"currentStepState": "StepPaused"}}));
        assert_eq!(
            approve_patch(&t, &blue_green).unwrap(),
            json!({"status": {"blueGreenStatus": {"currentStepState": "StepReady"}}})
        );
    }

    #[test]
    fn approve_refuses_with_kruise_tools_words() {
        let t = rollout_target();
        let upgrading = rollout(json!({"canaryStatus": {"currentStepState": "StepUpgrade"}}));
        assert_eq!(
            approve_patch(&t, &upgrading).unwrap_err().to_string(),
            "rollouts.rollouts.kruise.io \"demo\" does not allow to approve, because current canary state is not 'StepPaused'"
        );
        let blue_green = rollout(json!({"blueGreenStatus": {"currentStepState": "StepReady"}}));
        assert!(
            approve_patch(&t, &blue_green)
                .unwrap_err()
                .to_string()
                .ends_with("because current blue-green state is not 'StepPaused'")
        );
        assert_eq!(
            approve_patch(&t, &rollout(json!({})))
                .unwrap_err()
                .to_string(),
            "rollouts.rollouts.kruise.io \"demo\" no need to approve: not in canary or blue-green progress"
        );
        let mut v1alpha1 = rollout(json!({}));
        v1alpha1["apiVersion"] = json!("rollouts.kruise.io/v1alpha1");
        assert!(
            approve_patch(&t, &v1alpha1)
                .unwrap_err()
                .to_string()
                .ends_with("because current canary state is not 'StepPaused'")
        );
        let cloneset = Target {
            kind: Kind::CloneSet,
            name: "web".into(),
        };
        assert_eq!(
            approve_patch(&cloneset, &paused_at_step_one())
                .unwrap_err()
                .to_string(),
            "clonesets.apps.kruise.io \"web\" approving is not supported"
        );
    }

    fn pod(name: &str, hash: &str, batch: Option<&str>, ready: bool, phase: &str) -> Value {
        let mut labels = json!({"app": "web", "controller-revision-hash": format!("web-{hash}")});
        if let Some(b) = batch {
            labels[BATCH_ID_LABEL] = json!(b);
        }
        json!({
            "metadata": {"name": name, "labels": labels, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "nginx"}]},
            "status": {"phase": phase, "containerStatuses": [{"ready": ready, "restartCount": 1}]}
        })
    }

    /// 2026-01-01T00:03:20Z
    const NOW: i64 = 1_767_225_600 + 200;

    #[test]
    fn the_pods_are_those_of_the_new_revision_and_the_current_batch() {
        let pods = [
            pod("web-a", "6bd4b7f8c9", None, true, "Running"),
            pod("web-b", "5d9c8f7b6a", Some("1"), false, "Pending"),
            pod("web-c", "5d9c8f7b6a", Some("1"), true, "Running"),
            pod("web-d", "5d9c8f7b6a", Some("2"), true, "Running"),
        ];
        let view = RolloutView::from_json(&paused_at_step_one());
        let names = |rows: Vec<PodRow>| rows.into_iter().map(|r| r.name).collect::<Vec<_>>();
        let batch = pod_rows(&pods, view.pods_hash(), view.pods_batch(false), NOW);
        assert_eq!(names(batch.clone()), ["web-c", "web-b"], "readier first");
        assert_eq!(batch[0].revision, "web-5d9c8f7b6a");
        assert_eq!(batch[0].age, "3m20s");
        assert_eq!(batch[0].ready, "1/1");
        assert_eq!(batch[1].ready, "0/1");
        assert_eq!(batch[0].restarts, "1");
        let all = pod_rows(&pods, view.pods_hash(), view.pods_batch(true), NOW);
        assert_eq!(names(all), ["web-c", "web-b", "web-d"]);
        let mut deployment_pod = pod("dep-x", "x", None, true, "Running");
        deployment_pod["metadata"]["labels"] = json!({"pod-template-hash": "5d9c8f7b6a"});
        let rows = pod_rows(&[deployment_pod], "5d9c8f7b6a", None, NOW);
        assert_eq!(rows[0].revision, "5d9c8f7b6a");
    }

    fn workload() -> WorkloadView {
        let cloneset = json!({
            "spec": {"replicas": 4, "template": {"spec": {"containers": [
                {"name": "nginx", "image": "nginx:1.25"}, {"name": "log", "image": "busybox"}
            ]}}},
            "status": {"replicas": 4, "updatedReplicas": 1, "readyReplicas": 4, "availableReplicas": 4}
        });
        let view = RolloutView::from_json(&paused_at_step_one());
        let mut w = workload_view(&view.workload, &cloneset).unwrap();
        w.pods = pod_rows(
            &[pod("web-b", "5d9c8f7b6a", Some("1"), true, "Running")],
            view.pods_hash(),
            view.pods_batch(false),
            NOW,
        );
        w
    }

    #[test]
    fn describe_prints_kruise_tools_layout() {
        let view = RolloutView::from_json(&paused_at_step_one());
        let page = describe(&view, None, &Ok(workload()), false);
        let golden = "\
Name:              demo
Namespace:         ns
Status:            Progressing
Message:           Rollout is in step(1/3), and you need manually confirm to enter the next step
Strategy:          Canary
 Step:             1/3
 Steps:
  -  Replicas:     1
     Traffic:      5%
     State:        StepPaused
  -  Replicas:     50%
     Matches: 
      - Headers: 
       - Name:     user
         Value:    beta
         Type:     Exact
  -  Replicas:     100%
Traffic Routings:
  -  Service:      web
     Ingress: 
      classType:   nginx
      name:        web
Images:            nginx:1.25
                   busybox
Current Revision:  6bd4b7f8c9
Update Revision:   5d9c8f7b6a
Replicas:
 Desired:          4
 Updated:          1
 Current:          4
 Ready:            4
 Available:        4
NAME   READY  BATCH ID  REVISION        AGE    RESTARTS  STATUS
web-b  1/1    1         web-5d9c8f7b6a  3m20s  1         Running
";
        assert_eq!(page, golden);
    }

    #[test]
    fn describe_colors_the_current_step_and_the_marks() {
        let view = RolloutView::from_json(&paused_at_step_one());
        let page = describe(&view, None, &Ok(workload()), true);
        assert!(page.contains("Status:            \x1b[33m⚠\x1b[0m Progressing\n"));
        assert!(page.contains(
            "\x1b[32m  -  Replicas:     1\n     Traffic:      5%\n     State:        StepPaused\n\x1b[0m  -  Replicas:     50%\n"
        ));
        assert!(page.ends_with("\x1b[32m✔\x1b[0m Running\n"), "{page}");
    }

    #[test]
    fn describe_of_a_stale_status_a_v1alpha1_rollout_and_a_missing_workload() {
        let mut stale = paused_at_step_one();
        stale["metadata"]["generation"] = json!(3);
        let view = RolloutView::from_json(&stale);
        let page = describe(&view, None, &Ok(workload()), false);
        assert!(!page.contains("Status:"), "not observed yet: no phase");
        assert!(!page.contains("Replicas:\n"), "nor replicas");
        let page = describe(
            &view,
            Some(&Err("not found".into())),
            &Err("Error from server (NotFound): clonesets.apps.kruise.io \"web\" not found".into()),
            false,
        );
        assert!(page.ends_with(
            "  -  Replicas:     100%\nTraffic Routings:\n  -  Service:      web\n     Ingress: \n      classType:   nginx\n      name:        web\nError getting TrafficRoutingRef: not found\nError getting resources: Error from server (NotFound): clonesets.apps.kruise.io \"web\" not found\n"
        ), "{page}");

        let v1alpha1 = json!({
            "apiVersion": "rollouts.kruise.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {"name": "old", "namespace": "ns",
                "annotations": {"rollouts.kruise.io/trafficrouting": "tr"}},
            "spec": {
                "objectRef": {"workloadRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "dep"}},
                "strategy": {"canary": {"steps": [{"replicas": 1}]}}
            },
            "status": {"phase": "Healthy", "canaryStatus": {"currentStepIndex": 1, "currentStepState": "StepPaused", "canaryRevision": "abc"}}
        });
        let view = RolloutView::from_json(&v1alpha1);
        assert_eq!(view.workload.kind, "Deployment");
        assert_eq!(view.workload.group(), "apps");
        assert_eq!(view.traffic_routing_ref.as_deref(), Some("tr"));
        assert_eq!(view.update_revision, "abc");
        assert_eq!(view.pods_batch(false), Some(1));
        assert!(
            approve_patch(&rollout_target(), &v1alpha1).is_ok(),
            "a v1alpha1 Rollout approves its canary step"
        );
    }

    #[test]
    fn a_blue_green_rollout_reads_its_own_status() {
        let obj = json!({
            "apiVersion": "rollouts.kruise.io/v1beta1",
            "metadata": {"name": "bg"},
            "spec": {
                "workloadRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "dep"},
                "strategy": {"blueGreen": {"steps": [{"replicas": "50%"}, {"replicas": "100%"}]}}
            },
            "status": {"blueGreenStatus": {"currentStepIndex": 2, "currentStepState": "StepPaused",
                "stableRevision": "s", "updatedRevision": "u", "podTemplateHash": "h"}}
        });
        let view = RolloutView::from_json(&obj);
        assert_eq!(view.strategy, "BlueGreen");
        assert_eq!(
            (
                view.current_step_index,
                view.update_revision.as_str(),
                view.pods_hash()
            ),
            (2, "u", "h")
        );
        let page = describe(&view, None, &Err("x".into()), false);
        assert!(page.contains(" Step:             2/2\n"));
        assert!(page.contains("  -  Replicas:     100%\n     State:        StepPaused\n"));
    }

    #[test]
    fn the_replicas_of_each_workload_kind() {
        let r = |api_version: &str, kind: &str| WorkloadRef {
            api_version: api_version.into(),
            kind: kind.into(),
            name: "w".into(),
        };
        let ds = json!({"status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3,
            "updatedNumberScheduled": 1, "numberReady": 2, "numberAvailable": 2}});
        assert_eq!(
            workload_view(&r("apps.kruise.io/v1alpha1", "DaemonSet"), &ds)
                .unwrap()
                .replicas,
            Replicas {
                desired: 3,
                updated: 1,
                current: 3,
                ready: 2,
                available: 2
            }
        );
        assert!(workload_view(&r("apps.kruise.io/v1beta1", "StatefulSet"), &ds).is_ok());
        assert_eq!(
            workload_view(&r("batch/v1", "Job"), &ds).unwrap_err(),
            "unsupported workload kind Job (batch/v1)"
        );
    }
}
