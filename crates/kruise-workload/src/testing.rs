//! Test builders the workload controllers share (feature `testing`, enabled from their
//! dev-dependencies): a fixed clock, Pod templates and revisions, a Running Pod's
//! status, small Pod edits, and the checks of a started in-place update and of a
//! pre-download job.

// Test builders: a fixture that does not build is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{
    Container, PodCondition, PodReadinessGate, PodSpec, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kruise_api::keys;
use kruise_api::pod::{ContainerStatus, Pod, PodStatus};

use crate::action::Action;
use crate::predownload::PreDownload;
use crate::revision;
use kruise_api::apps_v1alpha1::ImagePullJob;

/// The fixtures' "now".
pub fn now() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap()
}

/// Which of the two revisions a test Pod is at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rev {
    Current,
    Update,
}

/// Whether a test Pod is Ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ready {
    Yes,
    No,
}

/// A template labelled `app=<app>` with one container `nginx` running `image`.
pub fn pod_template(app: &str, image: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(BTreeMap::from([("app".into(), app.into())])),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "nginx".into(),
                image: Some(image.into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

/// The revision `name` (number `number`) storing `template`.
pub fn controller_revision(
    name: &str,
    template: &PodTemplateSpec,
    number: i64,
) -> ControllerRevision {
    let data = revision::revision_data(&serde_json::to_value(template).unwrap());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision: number,
    }
}

/// A Running Pod's status: condition `Ready` (`ready`) and `InPlaceUpdateReady=True`,
/// both since `since`, and container `nginx` running `image`.
pub fn running_status(image: &str, ready: Ready, since: Time) -> PodStatus {
    PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![
            PodCondition {
                type_: "Ready".into(),
                status: if ready == Ready::Yes { "True" } else { "False" }.into(),
                last_transition_time: Some(since.clone()),
                ..Default::default()
            },
            PodCondition {
                type_: keys::INPLACE_UPDATE_READY.into(),
                status: "True".into(),
                last_transition_time: Some(since),
                ..Default::default()
            },
        ]),
        container_statuses: Some(vec![ContainerStatus {
            name: "nginx".into(),
            image: image.into(),
            image_id: format!("{image}@sha256:1"),
            ready: ready == Ready::Yes,
            ..Default::default()
        }]),
        ..Default::default()
    }
}

/// The readiness gate `InPlaceUpdateReady`, as in-place updates need it.
pub fn in_place_update_ready_gate() -> Vec<PodReadinessGate> {
    vec![PodReadinessGate {
        condition_type: keys::INPLACE_UPDATE_READY.into(),
    }]
}

/// Sets a label on the Pod.
pub fn set_label(pod: &mut Pod, key: &str, value: &str) {
    pod.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(key.into(), value.into());
}

/// Adds a readiness gate on `condition_type` to the Pod.
pub fn add_readiness_gate(pod: &mut Pod, condition_type: &str) {
    pod.spec
        .get_or_insert_with(Default::default)
        .readiness_gates
        .get_or_insert_with(Vec::new)
        .push(PodReadinessGate {
            condition_type: condition_type.into(),
        });
}

/// `action` starts an in-place update to `revision` whose Pod patch changes the first
/// container's image to `image`, labels the Pod with the revision and state `Updating`,
/// and whose status patch first sets `InPlaceUpdateReady=False`.
pub fn assert_starts_in_place(action: &Action, revision: &str, image: &str) {
    let Action::UpdateInPlace {
        writes,
        revision: to,
        ..
    } = action
    else {
        panic!("not an in-place update: {action:?}")
    };
    assert_eq!(to, revision);
    let patch = writes.pod_patch.as_ref().unwrap();
    assert_eq!(patch["spec"]["containers"][0]["image"], image);
    assert_eq!(
        patch["metadata"]["labels"][keys::CONTROLLER_REVISION_HASH],
        revision
    );
    assert_eq!(
        patch["metadata"]["labels"][keys::LIFECYCLE_STATE],
        "Updating"
    );
    assert!(
        writes.status_patch.is_some(),
        "InPlaceUpdateReady=False first"
    );
}

/// `outcome` creates exactly one ImagePullJob, named `name`, pulling `image` with
/// `parallelism` on the Pods whose `controller-revision-hash` is not in `not_in` (the
/// update revision's name and hash); returns it for further checks.
pub fn assert_one_pull_job(
    outcome: PreDownload,
    name: &str,
    image: &str,
    parallelism: i32,
    not_in: [&str; 2],
) -> ImagePullJob {
    let PreDownload::Create(mut jobs) = outcome else {
        panic!("expected jobs: {outcome:?}")
    };
    assert_eq!(jobs.len(), 1);
    let job = jobs.remove(0);
    assert_eq!(job.metadata.name.as_deref(), Some(name));
    assert_eq!(job.spec.image, image);
    assert_eq!(
        job.spec.template.parallelism,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(parallelism))
    );
    let selector = job.spec.template.pod_selector.as_ref().unwrap();
    let expr = &selector.match_expressions.as_ref().unwrap()[0];
    assert_eq!(
        (expr.operator.as_str(), expr.values.clone().unwrap()),
        ("NotIn", not_in.map(String::from).to_vec())
    );
    job
}
