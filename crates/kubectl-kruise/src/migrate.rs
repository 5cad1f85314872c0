//! `kubectl kruise migrate CloneSet --from Deployment`: moves a Deployment's Pods to a
//! CloneSet without ever having fewer available Pods than at the start, as kruise-tools'
//! `migrate` (pkg/cmd/migrate/migrate_cloneset.go, pkg/migration/cloneset) does.
//!
//! Pods are replaced, not adopted: a Deployment's Pods belong to one of its ReplicaSets
//! (their controller owner reference) and carry that ReplicaSet's `pod-template-hash`
//! label, so the CloneSet could not take them over cleanly. Instead the CloneSet is scaled
//! up by at most `--max-surge` Pods, and once its new Pods are available the Deployment is
//! scaled down by as many, until `--replicas` Pods moved.
//!
//! [`next_step`] decides, from one observation of both workloads and their Pods, what to
//! do next; `observe` and [`run`] are the reads and writes around it.

use std::io::Write;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Map, Value, json};

use crate::target::{Kind, Target};
use crate::{Error, FIELD_MANAGER, MigrateArgs, Result, Session, create_object};

/// `migrate --help` after the flags: why Pods are replaced, and examples.
pub const HELP: &str = "Pods are replaced, not adopted: a Deployment's Pods belong to its \
ReplicaSet (their controller owner reference) and carry its pod-template-hash label, so a \
CloneSet would not take them over cleanly. The CloneSet is scaled up by at most --max-surge \
Pods at a time; once its new Pods are available the Deployment is scaled down by as many, \
until --replicas Pods moved. There are never fewer available Pods than at the start, nor \
more than the start's replicas plus --max-surge. The Deployment is kept (at 0 replicas once \
all moved): delete it when you are done.

Examples:
  # Create a CloneSet web (0 replicas) from the Deployment web
  kubectl kruise migrate CloneSet --from Deployment -n default --src-name web --create

  # The same, with the Deployment's replicas
  kubectl kruise migrate CloneSet --from Deployment -n default --src-name web --create --copy

  # Move all of web's Pods to the CloneSet web, two at a time, giving up after 10 minutes
  kubectl kruise migrate CloneSet --from Deployment -n default --src-name web --max-surge=2 --timeout-seconds=600";

/// One workload as seen in one observation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Side {
    /// `spec.replicas`.
    pub replicas: i64,
    /// Its Pods that exist, terminating ones included.
    pub pods: i64,
    /// Its Pods that are not terminating and have been ready for `minReadySeconds`.
    pub available: i64,
    /// Its controller has seen the newest spec (`status.observedGeneration`).
    pub observed: bool,
}

/// One look at both workloads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    pub deployment: Side,
    pub cloneset: Side,
    /// Since the migration started.
    pub elapsed: Duration,
}

/// What the migration was asked to do, fixed at its start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The Deployment's and the CloneSet's replicas at the start.
    pub deployment_start: i64,
    pub cloneset_start: i64,
    /// Available Pods of both at the start: never fewer during the migration.
    pub available_start: i64,
    /// How many Pods to move.
    pub replicas: i64,
    pub max_surge: i64,
    pub timeout: Option<Duration>,
}

impl Plan {
    /// The plan for `--replicas` (`None`: all of the Deployment's) and `--max-surge`, from
    /// the first observation.
    pub fn new(
        first: &Observed,
        replicas: Option<i64>,
        max_surge: i64,
        timeout: Option<Duration>,
    ) -> Result<Plan> {
        let all = first.deployment.replicas;
        let replicas = replicas.unwrap_or(all);
        if replicas < 0 || replicas > all {
            return Err(Error::Usage(format!(
                "invalid replicas {replicas}: the Deployment has {all}"
            )));
        }
        if max_surge < 1 {
            return Err(Error::Usage(format!(
                "invalid max-surge {max_surge}: at least 1 Pod must be added at a time"
            )));
        }
        Ok(Plan {
            deployment_start: all,
            cloneset_start: first.cloneset.replicas,
            // More available than replicas (a rollout's surge Pod): the end state could
            // never reach it.
            available_start: (first.deployment.available + first.cloneset.available)
                .min(all + first.cloneset.replicas),
            replicas,
            max_surge,
            timeout,
        })
    }

    /// Pods the Deployment has given up and the CloneSet has gained so far.
    pub fn moved(&self, now: &Observed) -> (i64, i64) {
        (
            self.deployment_start - now.deployment.replicas,
            now.cloneset.replicas - self.cloneset_start,
        )
    }
}

/// What to do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Set the CloneSet's replicas to `to`.
    ScaleCloneSet {
        to: i64,
    },
    /// Set the Deployment's replicas to `to`.
    ScaleDeployment {
        to: i64,
    },
    /// Nothing to do until the cluster changes.
    Wait(Waiting),
    /// Every Pod moved; the Deployment's old Pods are gone.
    Done,
    TimedOut,
    /// Someone else changed the replicas of either workload.
    Interfered(String),
}

/// What a [`Step::Wait`] waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// A controller to see its workload's newest spec.
    Controllers,
    /// New Pods of the CloneSet to become available.
    Available { available: i64, needed: i64 },
    /// Pods the Deployment gave up to be gone (they count towards the surge).
    Terminating { pods: i64 },
}

/// The next step of the migration `plan` in the state `now`.
pub fn next_step(plan: &Plan, now: &Observed) -> Step {
    let (dep, cs) = (&now.deployment, &now.cloneset);
    let (moved_in, moved_out) = plan.moved(now);
    if !(0..=plan.replicas).contains(&moved_in) || !(0..=plan.replicas).contains(&moved_out) {
        return Step::Interfered(format!(
            "the Deployment has {} replicas and the CloneSet {}: the migration from {} and {} \
             can only reach {} and {}",
            dep.replicas,
            cs.replicas,
            plan.deployment_start,
            plan.cloneset_start,
            plan.deployment_start - plan.replicas,
            plan.cloneset_start + plan.replicas
        ));
    }
    if moved_in == plan.replicas && moved_out == plan.replicas && dep.observed && cs.observed {
        if dep.pods > dep.replicas {
            return Step::Wait(Waiting::Terminating { pods: dep.pods });
        }
        return Step::Done;
    }
    if plan.timeout.is_some_and(|t| now.elapsed >= t) {
        return Step::TimedOut;
    }
    if !dep.observed || !cs.observed {
        return Step::Wait(Waiting::Controllers);
    }
    // Scale out first: the Pods that exist or may soon (terminating ones included, and
    // those a controller has yet to create) stay within the start's plus the surge.
    let in_all = dep.replicas.max(dep.pods) + cs.replicas.max(cs.pods);
    let room = plan.deployment_start + plan.cloneset_start + plan.max_surge - in_all;
    let out = room.min(plan.replicas - moved_out);
    if out > 0 {
        return Step::ScaleCloneSet {
            to: cs.replicas + out,
        };
    }
    // Scale in only as many as the CloneSet added, and only while the available Pods, less
    // as many of the Deployment's (the worst case: it removes available ones), stay at the
    // start's.
    let spare = dep.available + cs.available - plan.available_start;
    let scale_in = (moved_out - moved_in)
        .min(plan.replicas - moved_in)
        .min(dep.replicas)
        .min(spare);
    if scale_in > 0 {
        return Step::ScaleDeployment {
            to: dep.replicas - scale_in,
        };
    }
    if moved_out > moved_in {
        return Step::Wait(Waiting::Available {
            available: cs.available,
            needed: plan.available_start - dep.available + 1,
        });
    }
    Step::Wait(Waiting::Terminating { pods: dep.pods })
}

/// The CloneSet `--create` makes from a Deployment: same selector, template, labels and
/// annotations, its rolling-update limits; the Deployment's replicas with `--copy`, else 0.
/// A Deployment's `Recreate` strategy (every Pod down before new ones) becomes a
/// `ReCreate` CloneSet update with `maxUnavailable: 100%`, its nearest equivalent.
pub fn cloneset_from_deployment(deployment: &Value, name: &str, copy: bool) -> Result<Value> {
    let spec = deployment
        .get("spec")
        .ok_or_else(|| Error::Refused("the Deployment has no spec".into()))?;
    let mut annotations = deployment
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    // The Deployment controller's bookkeeping and kubectl apply's record of the
    // Deployment: neither is true of the new object.
    annotations.remove("deployment.kubernetes.io/revision");
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(name));
    if let Some(labels) = deployment.pointer("/metadata/labels") {
        metadata.insert("labels".into(), labels.clone());
    }
    if !annotations.is_empty() {
        metadata.insert("annotations".into(), Value::Object(annotations));
    }
    let replicas = if copy {
        spec.get("replicas").and_then(Value::as_i64).unwrap_or(1)
    } else {
        0
    };
    let mut strategy = Map::new();
    strategy.insert("type".into(), json!("ReCreate"));
    match spec.pointer("/strategy/type").and_then(Value::as_str) {
        Some("Recreate") => {
            strategy.insert("maxUnavailable".into(), json!("100%"));
            strategy.insert("maxSurge".into(), json!(0));
        }
        _ => {
            for key in ["maxUnavailable", "maxSurge"] {
                if let Some(v) = spec.pointer(&format!("/strategy/rollingUpdate/{key}")) {
                    strategy.insert(key.into(), v.clone());
                }
            }
        }
    }
    if spec.get("paused").and_then(Value::as_bool) == Some(true) {
        strategy.insert("paused".into(), json!(true));
    }
    let mut cs_spec = Map::new();
    cs_spec.insert("replicas".into(), json!(replicas));
    for key in [
        "selector",
        "template",
        "revisionHistoryLimit",
        "minReadySeconds",
    ] {
        if let Some(v) = spec.get(key) {
            cs_spec.insert(key.into(), v.clone());
        }
    }
    cs_spec.insert("updateStrategy".into(), Value::Object(strategy));
    let ar = Kind::CloneSet.api_resource();
    Ok(json!({
        "apiVersion": ar.api_version,
        "kind": ar.kind,
        "metadata": metadata,
        "spec": cs_spec,
    }))
}

/// The Pod is not terminating and has been Ready for `min_ready_seconds`, as a workload
/// controller counts it available.
pub fn pod_available(pod: &Pod, min_ready_seconds: i64, now: jiff::Timestamp) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready" && c.status == "True"));
    match ready {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(c) => c
            .last_transition_time
            .as_ref()
            .is_none_or(|since| now.as_second() - since.0.as_second() >= min_ready_seconds),
    }
}

/// One workload's [`Side`]: its spec and status, and the Pods listed as its own.
pub fn side(workload: &Value, pods: &[&Pod], now: jiff::Timestamp) -> Side {
    let min_ready = workload
        .pointer("/spec/minReadySeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let generation = workload
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let observed = workload
        .pointer("/status/observedGeneration")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    Side {
        replicas: workload
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(1),
        pods: i64::try_from(pods.len()).unwrap_or(i64::MAX),
        available: i64::try_from(
            pods.iter()
                .filter(|p| pod_available(p, min_ready, now))
                .count(),
        )
        .unwrap_or(i64::MAX),
        observed: observed >= generation,
    }
}

fn uid(obj: &Value) -> &str {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn controller_uid(meta: &kube::api::ObjectMeta) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// Reads both workloads and their Pods: the Deployment's are those of its ReplicaSets.
async fn observe(
    session: &Session,
    deployment: &Target,
    cloneset: &Target,
    started: Instant,
) -> Result<Observed> {
    let dep = session.get(deployment).await?;
    let cs = session.get(cloneset).await?;
    let replica_sets = session
        .typed::<ReplicaSet>()
        .list(&ListParams::default())
        .await?;
    let ours: Vec<&str> = replica_sets
        .items
        .iter()
        .filter(|rs| controller_uid(&rs.metadata) == Some(uid(&dep)))
        .filter_map(|rs| rs.metadata.uid.as_deref())
        .collect();
    let pods = session.typed::<Pod>().list(&ListParams::default()).await?;
    let of = |owners: &[&str]| -> Vec<&Pod> {
        pods.items
            .iter()
            .filter(|p| controller_uid(&p.metadata).is_some_and(|u| owners.contains(&u)))
            .collect()
    };
    let now = jiff::Timestamp::now();
    Ok(Observed {
        deployment: side(&dep, &of(&ours), now),
        cloneset: side(&cs, &of(&[uid(&cs)]), now),
        elapsed: started.elapsed(),
    })
}

async fn scale(session: &Session, target: &Target, to: i64) -> Result<()> {
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    session
        .api(target.kind)
        .await?
        .patch(
            &target.name,
            &params,
            &Patch::Merge(json!({"spec": {"replicas": to}})),
        )
        .await?;
    Ok(())
}

/// `migrate CloneSet --from Deployment …`.
pub async fn run(
    session: &Session,
    args: &MigrateArgs,
    out: &mut (dyn Write + Send),
) -> Result<()> {
    if Kind::parse(&args.kind) != Some(Kind::CloneSet) {
        return Err(Error::Usage(
            "currently only supported CloneSet as dst type".into(),
        ));
    }
    if Kind::parse(&args.from) != Some(Kind::Deployment) {
        return Err(Error::Usage(
            "currently only supported Deployment as src type".into(),
        ));
    }
    let deployment = Target {
        kind: Kind::Deployment,
        name: args.src_name.clone(),
    };
    let cloneset = Target {
        kind: Kind::CloneSet,
        name: args
            .dst_name
            .clone()
            .unwrap_or_else(|| args.src_name.clone()),
    };
    let (from, to) = (
        format!("Deployment/{}", deployment.name),
        format!("CloneSet/{}", cloneset.name),
    );
    if args.create {
        let dep = session.get(&deployment).await?;
        let cs = cloneset_from_deployment(&dep, &cloneset.name, args.copy)?;
        create_object(
            session,
            &Kind::CloneSet.api_resource(),
            cs,
            &cloneset.reference(),
            "created",
            &Default::default(),
            &mut std::io::sink(),
        )
        .await?;
        writeln!(out, "Successfully created from {from} to {to}")?;
        return Ok(());
    }
    let timeout = (args.timeout_seconds > 0)
        .then(|| Duration::from_secs(args.timeout_seconds.unsigned_abs()));
    let started = Instant::now();
    let first = observe(session, &deployment, &cloneset, started).await?;
    let replicas = (args.replicas >= 0).then_some(args.replicas);
    let plan = Plan::new(&first, replicas, args.max_surge, timeout)?;
    let mut now = first;
    loop {
        match next_step(&plan, &now) {
            Step::ScaleCloneSet { to: n } => scale(session, &cloneset, n).await?,
            Step::ScaleDeployment { to: n } => scale(session, &deployment, n).await?,
            Step::Wait(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            Step::Done => {
                writeln!(
                    out,
                    "Successfully migrated {} replicas from {from} to {to}",
                    plan.replicas
                )?;
                return Ok(());
            }
            Step::TimedOut => {
                let (moved_in, moved_out) = plan.moved(&now);
                return Err(Error::Timeout(format!(
                    "the migration from {from} to {to} ({from} scaled in {moved_in}, {to} \
                     scaled out {moved_out} of {}; both are left as they are)",
                    plan.replicas
                )));
            }
            Step::Interfered(why) => {
                return Err(Error::Refused(format!("migration stopped: {why}")));
            }
        }
        let before = plan.moved(&now);
        now = observe(session, &deployment, &cloneset, started).await?;
        let (moved_in, moved_out) = plan.moved(&now);
        if (moved_in, moved_out) != before {
            writeln!(
                out,
                "Migration progress: {from} scale in {moved_in}, {to} scale out {moved_out}"
            )?;
            out.flush()?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn side(replicas: i64, available: i64) -> Side {
        Side {
            replicas,
            pods: replicas,
            available,
            observed: true,
        }
    }

    fn at(deployment: Side, cloneset: Side) -> Observed {
        Observed {
            deployment,
            cloneset,
            elapsed: Duration::ZERO,
        }
    }

    fn plan(start: &Observed, surge: i64) -> Plan {
        Plan::new(start, None, surge, None).unwrap()
    }

    #[test]
    fn one_pod_at_a_time_with_a_surge_of_one() {
        let start = at(side(4, 4), side(0, 0));
        let p = plan(&start, 1);
        assert_eq!(next_step(&p, &start), Step::ScaleCloneSet { to: 1 });
        // The new Pod not available yet: the Deployment keeps its 4.
        let now = at(side(4, 4), side(1, 0));
        assert_eq!(
            next_step(&p, &now),
            Step::Wait(Waiting::Available {
                available: 0,
                needed: 1
            })
        );
        let now = at(side(4, 4), side(1, 1));
        assert_eq!(next_step(&p, &now), Step::ScaleDeployment { to: 3 });
        // The Deployment's old Pod still terminating: it counts towards the surge.
        let mut dep = side(3, 3);
        dep.pods = 4;
        let now = at(dep, side(1, 1));
        assert_eq!(
            next_step(&p, &now),
            Step::Wait(Waiting::Terminating { pods: 4 })
        );
        assert_eq!(
            next_step(&p, &at(side(3, 3), side(1, 1))),
            Step::ScaleCloneSet { to: 2 }
        );
        assert_eq!(
            next_step(&p, &at(side(0, 0), side(4, 4))),
            Step::Done,
            "all moved"
        );
    }

    #[test]
    fn a_larger_surge_and_a_part_of_the_replicas() {
        let start = at(side(10, 10), side(0, 0));
        let p = Plan::new(&start, Some(5), 2, None).unwrap();
        assert_eq!(next_step(&p, &start), Step::ScaleCloneSet { to: 2 });
        // One of two available: one Deployment Pod may go.
        assert_eq!(
            next_step(&p, &at(side(10, 10), side(2, 1))),
            Step::ScaleDeployment { to: 9 }
        );
        assert_eq!(
            next_step(&p, &at(side(9, 9), side(2, 1))),
            Step::ScaleCloneSet { to: 3 }
        );
        // The last step stops at 5 moved.
        assert_eq!(
            next_step(&p, &at(side(6, 6), side(4, 4))),
            Step::ScaleCloneSet { to: 5 }
        );
        assert_eq!(
            next_step(&p, &at(side(6, 6), side(5, 5))),
            Step::ScaleDeployment { to: 5 }
        );
        assert_eq!(next_step(&p, &at(side(5, 5), side(5, 5))), Step::Done);
    }

    #[test]
    fn waits_for_the_controllers_and_times_out() {
        let start = at(side(2, 2), side(0, 0));
        let mut p = plan(&start, 1);
        let mut now = at(side(2, 2), side(1, 0));
        now.cloneset.observed = false;
        assert_eq!(next_step(&p, &now), Step::Wait(Waiting::Controllers));
        p.timeout = Some(Duration::from_secs(5));
        now.elapsed = Duration::from_secs(5);
        assert_eq!(next_step(&p, &now), Step::TimedOut);
        // Done is done, even at the deadline.
        let mut end = at(side(0, 0), side(2, 2));
        end.elapsed = Duration::from_secs(9);
        assert_eq!(next_step(&p, &end), Step::Done);
    }

    #[test]
    fn someone_elses_scaling_stops_it() {
        let start = at(side(3, 3), side(0, 0));
        let p = plan(&start, 1);
        assert!(matches!(
            next_step(&p, &at(side(5, 5), side(0, 0))),
            Step::Interfered(_)
        ));
        assert!(matches!(
            next_step(&p, &at(side(3, 3), side(4, 0))),
            Step::Interfered(_)
        ));
    }

    #[test]
    fn bad_plans_are_refused() {
        let start = at(side(3, 3), side(0, 0));
        assert!(Plan::new(&start, Some(4), 1, None).is_err());
        assert!(Plan::new(&start, Some(-2), 1, None).is_err());
        assert!(Plan::new(&start, None, 0, None).is_err());
        let p = Plan::new(&start, Some(0), 1, None).unwrap();
        assert_eq!(next_step(&p, &start), Step::Done, "nothing to move");
    }

    #[test]
    fn the_cloneset_keeps_the_deployments_template_and_limits() {
        let dep = json!({
            "metadata": {"name": "web", "labels": {"app": "web"}, "annotations": {
                "deployment.kubernetes.io/revision": "3", "team": "a"}},
            "spec": {
                "replicas": 4, "paused": true, "minReadySeconds": 5, "revisionHistoryLimit": 3,
                "progressDeadlineSeconds": 600,
                "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
            }
        });
        let cs = cloneset_from_deployment(&dep, "web2", false).unwrap();
        assert_eq!(
            cs,
            json!({
                "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
                "metadata": {"name": "web2", "labels": {"app": "web"}, "annotations": {"team": "a"}},
                "spec": {
                    "replicas": 0, "minReadySeconds": 5, "revisionHistoryLimit": 3,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": dep["spec"]["template"],
                    "updateStrategy": {"type": "ReCreate", "maxSurge": "25%", "maxUnavailable": 1, "paused": true}
                }
            })
        );
        let copied = cloneset_from_deployment(&dep, "web2", true).unwrap();
        assert_eq!(copied["spec"]["replicas"], 4);
        let mut recreate = dep.clone();
        recreate["spec"]["strategy"] = json!({"type": "Recreate"});
        let cs = cloneset_from_deployment(&recreate, "web2", false).unwrap();
        assert_eq!(
            cs["spec"]["updateStrategy"],
            json!({"type": "ReCreate", "maxUnavailable": "100%", "maxSurge": 0, "paused": true})
        );
    }

    #[test]
    fn available_means_ready_long_enough_and_not_terminating() {
        let now: jiff::Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:05Z"}]}
        }))
        .unwrap();
        assert!(pod_available(&pod, 0, now));
        assert!(pod_available(&pod, 5, now));
        assert!(!pod_available(&pod, 6, now));
        let mut gone = pod.clone();
        gone.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
        assert!(!pod_available(&gone, 0, now));
        let unready: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}})).unwrap();
        assert!(!pod_available(&unready, 0, now));
    }

    /// A model cluster: each workload's controller acts on a new spec after a delay; a new
    /// Pod becomes available after a random delay; a removed Pod lingers, terminating, for
    /// a random while. The Deployment removes its available Pods first (the worst case).
    #[derive(Debug)]
    struct Model {
        tick: u32,
        sides: [ModelSide; 2],
        delays: Vec<u32>,
        next_delay: usize,
    }

    #[derive(Debug, Default)]
    struct ModelSide {
        replicas: i64,
        /// (available from tick, gone at tick if terminating)
        pods: Vec<(u32, Option<u32>)>,
        reconcile_at: Option<u32>,
    }

    impl Model {
        fn delay(&mut self) -> u32 {
            let d = self.delays[self.next_delay % self.delays.len()];
            self.next_delay += 1;
            d
        }

        fn advance(&mut self) {
            self.tick += 1;
            let tick = self.tick;
            for i in 0..2 {
                self.sides[i]
                    .pods
                    .retain(|(_, gone)| gone.is_none_or(|g| g > tick));
                if self.sides[i].reconcile_at.is_some_and(|t| t <= tick) {
                    self.sides[i].reconcile_at = None;
                    let alive = self.sides[i].pods.iter().filter(|p| p.1.is_none()).count() as i64;
                    let want = self.sides[i].replicas;
                    for _ in alive..want {
                        let ready = tick + self.delay();
                        self.sides[i].pods.push((ready, None));
                    }
                    // Available Pods first: the sort puts the earliest-ready first.
                    self.sides[i].pods.sort_by_key(|p| (p.1.is_some(), p.0));
                    let mut extra = alive - want;
                    for j in 0..self.sides[i].pods.len() {
                        if extra <= 0 {
                            break;
                        }
                        if self.sides[i].pods[j].1.is_none() {
                            let gone = tick + self.delay();
                            self.sides[i].pods[j].1 = Some(gone);
                            extra -= 1;
                        }
                    }
                }
            }
        }

        fn scale(&mut self, i: usize, to: i64) {
            self.sides[i].replicas = to;
            let d = self.delay();
            self.sides[i].reconcile_at = Some(self.tick + d);
        }

        fn observe(&self) -> Observed {
            let side = |s: &ModelSide| Side {
                replicas: s.replicas,
                pods: s.pods.len() as i64,
                available: s
                    .pods
                    .iter()
                    .filter(|(ready, gone)| gone.is_none() && *ready <= self.tick)
                    .count() as i64,
                observed: s.reconcile_at.is_none(),
            };
            Observed {
                deployment: side(&self.sides[0]),
                cloneset: side(&self.sides[1]),
                elapsed: Duration::from_secs(u64::from(self.tick)),
            }
        }
    }

    proptest! {
        #[test]
        fn never_fewer_available_never_over_the_surge_always_done(
            deployment in 0i64..8,
            cloneset in 0i64..3,
            part in 0i64..8,
            surge in 1i64..4,
            delays in proptest::collection::vec(0u32..6, 1..20),
        ) {
            let mut model = Model { tick: 0, sides: Default::default(), delays, next_delay: 0 };
            model.sides[0].replicas = deployment;
            model.sides[0].pods = vec![(0, None); deployment as usize];
            model.sides[1].replicas = cloneset;
            model.sides[1].pods = vec![(0, None); cloneset as usize];
            let start = model.observe();
            let replicas = part.min(deployment);
            let plan = Plan::new(&start, Some(replicas), surge, None).unwrap();
            let limit = deployment + cloneset + surge;
            let mut done = false;
            for _ in 0..2000 {
                let now = model.observe();
                prop_assert!(
                    now.deployment.available + now.cloneset.available >= plan.available_start,
                    "fewer available than at the start: {now:?}"
                );
                prop_assert!(
                    now.deployment.pods + now.cloneset.pods <= limit,
                    "more Pods than the start's plus the surge: {now:?}"
                );
                match next_step(&plan, &now) {
                    Step::ScaleCloneSet { to } => model.scale(1, to),
                    Step::ScaleDeployment { to } => model.scale(0, to),
                    Step::Wait(_) => {}
                    Step::Done => {
                        done = true;
                        break;
                    }
                    other => prop_assert!(false, "unexpected {other:?} at {now:?}"),
                }
                model.advance();
            }
            prop_assert!(done, "not done after 2000 ticks: {model:?}");
            let end = model.observe();
            prop_assert_eq!(end.deployment.replicas, deployment - replicas);
            prop_assert_eq!(end.cloneset.replicas, cloneset + replicas);
        }
    }
}
