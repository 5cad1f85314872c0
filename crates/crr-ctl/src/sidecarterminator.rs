//! SidecarTerminator (gate `SidecarTerminator`; openkruise/kruise v1.9.0
//! pkg/controller/sidecarterminator): a Job-like Pod (`restartPolicy` Never or OnFailure)
//! whose main containers have ended would never complete while a sidecar keeps running.
//! Sidecars marked with the env `KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true` are then
//! stopped through a ContainerRecreateRequest (`sidecar-termination-<pod uid>`, owned by the
//! Pod, `forceRecreate`, failure policy Ignore) that the node agent carries out; with
//! `restartPolicy` Never/OnFailure the kubelet does not start them again, so the Pod ends.
//! A sidecar that also has `KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE=true` does not decide the
//! Pod's phase: once the other sidecars have ended, the Pod is marked Succeeded (or Failed,
//! from its main containers) with the condition `SidecarTerminated`, then that sidecar is
//! stopped too.
//!
//! Not here: upstream's in-place variant for virtual-kubelet nodes
//! (`KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE`), which has no kubelet to stop a
//! container; such sidecars are left alone (docs/sidecarterminator.md).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};
use kruise_api::apps_v1alpha1::{
    ContainerRecreateRequest, ContainerRecreateRequestContainer,
    ContainerRecreateRequestFailurePolicy, ContainerRecreateRequestSpec,
    ContainerRecreateRequestStrategy,
};
use kruise_api::keys;
use kruise_runtime::api_error::is_conflict;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::Context;
use crate::error::Result;

/// The env vars SidecarTerminator reads: the only ones the Pod cache keeps.
pub const ENV: [&str; 3] = [
    keys::KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT,
    keys::KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE,
    keys::KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE,
];

/// What to do for one Pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Stop these sidecars through the ContainerRecreateRequest of the Pod.
    Stop(BTreeSet<String>),
    /// Mark the Pod ended (`Succeeded` when every main container exited 0, else `Failed`),
    /// then stop these sidecars (those whose exit code does not count).
    MarkEndedThenStop {
        succeeded: bool,
        sidecars: BTreeSet<String>,
    },
}

fn env_is(c: &Container, name: &str, pred: impl Fn(&str) -> bool) -> bool {
    c.env
        .iter()
        .flatten()
        .any(|e| e.name == name && pred(e.value.as_deref().unwrap_or_default()))
}

fn terminated_on_exit(c: &Container) -> bool {
    env_is(c, keys::KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT, |v| {
        v.eq_ignore_ascii_case("true")
    })
}

fn exit_code_ignored(c: &Container) -> bool {
    terminated_on_exit(c)
        && env_is(c, keys::KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE, |v| {
            v.eq_ignore_ascii_case("true")
        })
}

fn updated_on_exit(c: &Container) -> bool {
    env_is(
        c,
        keys::KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE,
        |v| !v.is_empty(),
    )
}

fn is_sidecar(c: &Container) -> bool {
    terminated_on_exit(c) || updated_on_exit(c)
}

fn statuses(pod: &Pod) -> &[ContainerStatus] {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default()
}

/// Every container named is terminated (and every container has reported a status).
fn ended(pod: &Pod, names: &BTreeSet<String>, exit_zero: bool) -> bool {
    let containers = pod.spec.as_ref().map_or(0, |s| s.containers.len());
    let statuses = statuses(pod);
    statuses.len() == containers
        && statuses
            .iter()
            .filter(|s| names.contains(&s.name))
            .all(|s| {
                s.state
                    .as_ref()
                    .and_then(|st| st.terminated.as_ref())
                    .is_some_and(|t| !exit_zero || t.exit_code == 0)
            })
}

/// What SidecarTerminator does for `pod`, given whether its ContainerRecreateRequest
/// exists already (one at a time: a new one waits until that one is gone).
pub fn plan(pod: &Pod, crr_exists: bool) -> Option<Step> {
    let spec = pod.spec.as_ref()?;
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let restart_policy = spec.restart_policy.as_deref().unwrap_or("Always");
    if pod.metadata.deletion_timestamp.is_some()
        || phase == Some("Pending")
        || restart_policy == "Always"
    {
        return None;
    }
    let (sidecars, mains): (Vec<&Container>, Vec<&Container>) =
        spec.containers.iter().partition(|c| is_sidecar(c));
    let names =
        |cs: &[&Container]| -> BTreeSet<String> { cs.iter().map(|c| c.name.clone()).collect() };
    let (sidecar_names, main_names) = (names(&sidecars), names(&mains));
    if sidecar_names.is_empty() || ended(pod, &sidecar_names, false) {
        return None;
    }
    let mains_done = match restart_policy {
        "Never" => ended(pod, &main_names, false),
        "OnFailure" => ended(pod, &main_names, true),
        _ => false,
    };
    if !mains_done {
        return None;
    }
    let running = |cs: Vec<&&Container>| -> BTreeSet<String> {
        cs.into_iter()
            .map(|c| c.name.clone())
            .filter(|n| !ended(pod, &BTreeSet::from([n.clone()]), false))
            .collect()
    };
    let ignored: Vec<&&Container> = sidecars.iter().filter(|c| exit_code_ignored(c)).collect();
    let normal: Vec<&&Container> = sidecars
        .iter()
        .filter(|c| terminated_on_exit(c) && !exit_code_ignored(c))
        .collect();
    let normal_running = running(normal);
    if !normal_running.is_empty() {
        return (!crr_exists).then_some(Step::Stop(normal_running));
    }
    let ignored_running = running(ignored);
    if ignored_running.is_empty() {
        return None;
    }
    if crr_exists && matches!(phase, Some("Succeeded" | "Failed")) {
        return None;
    }
    Some(Step::MarkEndedThenStop {
        succeeded: ended(pod, &main_names, true),
        sidecars: if crr_exists {
            BTreeSet::new()
        } else {
            ignored_running
        },
    })
}

fn crr_name(pod: &Pod) -> String {
    format!(
        "{}{}",
        keys::SIDECAR_TERMINATION_CRR_PREFIX,
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// The request that stops `sidecars` of `pod`.
pub fn request(pod: &Pod, sidecars: &BTreeSet<String>) -> ContainerRecreateRequest {
    let owner = pod.controller_owner_ref(&()).map(|mut o| {
        o.block_owner_deletion = None;
        o
    });
    ContainerRecreateRequest {
        metadata: ObjectMeta {
            name: Some(crr_name(pod)),
            namespace: pod.namespace(),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        spec: ContainerRecreateRequestSpec {
            pod_name: pod.name_any(),
            containers: sidecars
                .iter()
                .map(|name| ContainerRecreateRequestContainer {
                    name: name.clone(),
                    ..Default::default()
                })
                .collect(),
            strategy: Some(ContainerRecreateRequestStrategy {
                force_recreate: true,
                failure_policy: Some(ContainerRecreateRequestFailurePolicy::Ignore),
                ..Default::default()
            }),
            ..Default::default()
        },
        status: None,
    }
}

/// One Pod: read the caches, ask [`plan`], carry it out.
pub async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Requeue> {
    let namespace = pod.namespace().unwrap_or_default();
    let crr_exists = ctx
        .crrs
        .store()
        .get(&ObjectRef::new(&crr_name(&pod)).within(&namespace))
        .is_some();
    let Some(step) = plan(&pod, crr_exists) else {
        return Ok(Requeue::await_change());
    };
    let sidecars = match step {
        Step::Stop(sidecars) => sidecars,
        Step::MarkEndedThenStop {
            succeeded,
            sidecars,
        } => {
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
            let status = json!({"status": {
                "phase": if succeeded { "Succeeded" } else { "Failed" },
                "conditions": [{
                    "type": keys::SIDECAR_TERMINATED,
                    "status": "True",
                    "lastTransitionTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
                    "message": "Terminated by Sidecar Terminator",
                }],
            }});
            pods.patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(status),
            )
            .await?;
            tracing::info!(pod = %pod.name_any(), succeeded, "marked the Job Pod terminated");
            sidecars
        }
    };
    if sidecars.is_empty() {
        return Ok(Requeue::await_change());
    }
    let crrs: Api<ContainerRecreateRequest> = Api::namespaced(ctx.client.clone(), &namespace);
    match crrs
        .create(&PostParams::default(), &request(&pod, &sidecars))
        .await
    {
        Ok(_) => {}
        Err(e) if is_conflict(&e) => return Ok(Requeue::await_change()),
        Err(e) => return Err(e.into()),
    }
    // Worded as upstream's (a Go slice printed with %v: `[a b]`).
    let names: Vec<&str> = sidecars.iter().map(String::as_str).collect();
    ctx.events.normal(
        &pod.object_ref(&()),
        keys::REASON_SIDECAR_TERMINATOR,
        format!(
            "Kruise SidecarTerminator is trying to terminate sidecar [{}] using crr",
            names.join(" ")
        ),
    );
    Ok(Requeue::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, EnvVar, PodSpec, PodStatus,
    };

    fn container(name: &str, env: &[(&str, &str)]) -> Container {
        Container {
            name: name.into(),
            env: Some(
                env.iter()
                    .map(|(n, v)| EnvVar {
                        name: n.to_string(),
                        value: Some(v.to_string()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    /// `main` and a sidecar `side` (with `side_env`); `states`: None running, Some(code) exited.
    fn pod(restart: &str, side_env: &[(&str, &str)], main: Option<i32>, side: Option<i32>) -> Pod {
        let status = |name: &str, exit: Option<i32>| ContainerStatus {
            name: name.into(),
            state: Some(match exit {
                None => ContainerState {
                    running: Some(ContainerStateRunning::default()),
                    ..Default::default()
                },
                Some(code) => ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: code,
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            }),
            ..Default::default()
        };
        Pod {
            metadata: ObjectMeta {
                name: Some("job-pod".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                restart_policy: Some(restart.into()),
                containers: vec![container("main", &[]), container("side", side_env)],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                container_statuses: Some(vec![status("main", main), status("side", side)]),
                ..Default::default()
            }),
        }
    }

    const TERMINATE: (&str, &str) = (keys::KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT, "true");
    const IGNORE: (&str, &str) = (keys::KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE, "true");

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn the_sidecar_is_stopped_once_the_main_container_has_ended() {
        assert_eq!(plan(&pod("Never", &[TERMINATE], None, None), false), None);
        assert_eq!(
            plan(&pod("Never", &[TERMINATE], Some(1), None), false),
            Some(Step::Stop(set(&["side"]))),
            "Never: ended, whatever the exit code"
        );
        assert_eq!(
            plan(&pod("Never", &[TERMINATE], Some(1), None), true),
            None,
            "one request at a time"
        );
        assert_eq!(
            plan(&pod("Never", &[TERMINATE], Some(0), Some(137)), false),
            None,
            "already stopped"
        );
    }

    #[test]
    fn on_failure_waits_for_success_and_always_is_left_alone() {
        assert_eq!(
            plan(&pod("OnFailure", &[TERMINATE], Some(1), None), false),
            None
        );
        assert_eq!(
            plan(&pod("OnFailure", &[TERMINATE], Some(0), None), false),
            Some(Step::Stop(set(&["side"])))
        );
        assert_eq!(
            plan(&pod("Always", &[TERMINATE], Some(0), None), false),
            None
        );
    }

    #[test]
    fn unmarked_sidecars_are_main_containers() {
        assert_eq!(plan(&pod("Never", &[], Some(0), None), false), None);
        let not_true = (keys::KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT, "false");
        assert_eq!(plan(&pod("Never", &[not_true], Some(0), None), false), None);
    }

    #[test]
    fn an_ignored_exit_code_marks_the_pod_from_its_main_containers() {
        assert_eq!(
            plan(&pod("Never", &[TERMINATE, IGNORE], Some(0), None), false),
            Some(Step::MarkEndedThenStop {
                succeeded: true,
                sidecars: set(&["side"])
            })
        );
        assert_eq!(
            plan(&pod("Never", &[TERMINATE, IGNORE], Some(2), None), false),
            Some(Step::MarkEndedThenStop {
                succeeded: false,
                sidecars: set(&["side"])
            })
        );
    }

    #[test]
    fn the_request_is_named_after_the_pod_and_forces_the_stop() {
        let crr = request(&pod("Never", &[TERMINATE], Some(0), None), &set(&["side"]));
        assert_eq!(crr.metadata.name.as_deref(), Some("sidecar-termination-u1"));
        assert_eq!(crr.spec.pod_name, "job-pod");
        assert_eq!(crr.spec.containers[0].name, "side");
        let strategy = crr.spec.strategy.unwrap();
        assert!(strategy.force_recreate);
        assert_eq!(
            strategy.failure_policy,
            Some(ContainerRecreateRequestFailurePolicy::Ignore)
        );
    }
}
