//! The PodUnavailableBudget decision (openkruise/kruise v1.9.0 pkg/controller/podunavailablebudget/podunavailablebudget_controller.go; openkruise/kruise v1.9.0 pkg/control/pubcontrol/pub_control_utils.go), in one place
//! for everyone who spends a budget:
//!
//! - `pub-ctl`'s Pod webhook, for deletions, evictions and Pod updates anyone sends;
//! - the workload controllers (CloneSet, Advanced StatefulSet, Advanced DaemonSet,
//!   SidecarSet), before an in-place update. They must ask first: an in-place update
//!   starts with a `pods/status` write (`InPlaceUpdateReady=False`) that no webhook sees,
//!   after which the webhook finds the Pod already unavailable and lets the image change
//!   through without spending anything.
//!
//! [`podstate`] and [`decision`] are pure; [`spend`] is the one status-write loop
//! (optimistic concurrency on the PUB's status, retried on conflict), and [`consult`]
//! the controllers' entry point.

pub mod decision;
pub mod podstate;

use std::time::Duration;

use kruise_api::pod::PodView;
use kruise_api::policy_v1alpha1::{PodUnavailableBudget, PodUnavailableBudgetStatus, PubOperation};
use kruise_runtime::api_error::is_conflict;
use kruise_runtime::{FeatureGates, gates};
use kube::Client;
use kube::api::{Api, PostParams};

pub use decision::{Denial, Options};

/// Status write attempts before answering "conflicts" (openkruise/kruise v1.9.0 pkg/control/pubcontrol/pub_control_utils.go).
pub const WRITE_ATTEMPTS: usize = 4;
/// Wait between attempts.
pub const RETRY_DELAY: Duration = Duration::from_millis(500);

impl Options {
    /// The switches as the feature gates set them.
    pub fn from_gates(g: &FeatureGates) -> Options {
        Options {
            protect_delete: g.enabled(gates::POD_UNAVAILABLE_BUDGET_DELETE_GATE),
            protect_update: g.enabled(gates::POD_UNAVAILABLE_BUDGET_UPDATE_GATE),
            vertical_scaling: g.enabled(gates::IN_PLACE_WORKLOAD_VERTICAL_SCALING),
        }
    }
}

/// The apiserver refused a Pod write because `pub-ctl`'s webhook found a
/// PodUnavailableBudget with nothing left: a controller holds the Pod back and looks
/// again later, rather than counting a failure.
pub fn is_refusal(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403 && s.message.contains(decision::DENIAL_SUBJECT))
}

/// What spending one unit of a budget came to.
#[derive(Debug)]
pub enum Spent {
    /// Allowed. `written` is the PUB as this call wrote it (`None` when nothing was
    /// written: a dry run, or the Pod was recorded meanwhile).
    Allowed {
        written: Option<Box<PodUnavailableBudget>>,
    },
    Denied(Denial),
}

/// openkruise/kruise v1.9.0 pkg/control/pubcontrol/pub_control_utils.go from `newest` (the newest copy of the PUB the caller knows): decide
/// on it, write the status with the Pod recorded (guarded by its resourceVersion), and on
/// a conflict read the PUB again and decide again, [`WRITE_ATTEMPTS`] times in all. Two
/// spenders racing for the last unit can't both win: the loser's write conflicts and its
/// second look finds nothing left. A dry run decides but never writes.
pub async fn spend(
    api: &Api<PodUnavailableBudget>,
    mut newest: PodUnavailableBudget,
    pod: &str,
    op: PubOperation,
    dry_run: bool,
) -> Result<Spent, kube::Error> {
    let pub_name = newest.metadata.name.clone().unwrap_or_default();
    for attempt in 0..WRITE_ATTEMPTS {
        let status = match step(
            decision::spend(&newest, pod, op, jiff::Timestamp::now()),
            dry_run,
        ) {
            Step::Answer(spent) => return Ok(spent),
            Step::Write(status) => status,
        };
        newest.status = Some(status);
        match api
            .replace_status(&pub_name, &PostParams::default(), &newest)
            .await
        {
            Ok(written) => {
                return Ok(Spent::Allowed {
                    written: Some(Box::new(written)),
                });
            }
            Err(e) if is_conflict(&e) => {
                tracing::debug!(attempt, pub_ = %pub_name, pod, "pub status conflict; reading again");
                if attempt + 1 == WRITE_ATTEMPTS {
                    break;
                }
                tokio::time::sleep(RETRY_DELAY).await;
                match api.get_opt(&pub_name).await? {
                    Some(fresh) => newest = fresh,
                    // Deleted meanwhile: nothing protects the Pod any more.
                    None => return Ok(Spent::Allowed { written: None }),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Spent::Denied(Denial::Conflicts { pub_name }))
}

/// What [`spend`] does with a decision: answer now, or write the status first.
#[derive(Debug)]
enum Step {
    Answer(Spent),
    Write(PodUnavailableBudgetStatus),
}

/// A dry run (`kubectl delete --dry-run=server`, an eviction with `dryRun: [All]`) gets
/// the answer the real request would get and writes nothing, as
/// openkruise/kruise v1.9.0 pkg/control/pubcontrol/pub_control_utils.go returns right
/// after `checkAndDecrement` when `dryRun` is set.
fn step(decision: decision::Spend, dry_run: bool) -> Step {
    match decision {
        decision::Spend::AlreadyRecorded => Step::Answer(Spent::Allowed { written: None }),
        decision::Spend::Deny(denial) => Step::Answer(Spent::Denied(denial)),
        decision::Spend::Write(_) if dry_run => Step::Answer(Spent::Allowed { written: None }),
        decision::Spend::Write(status) => Step::Write(status),
    }
}

/// A controller about to disrupt `pod` (`op`: an in-place update, a deletion) asks the
/// Pod's PUB, spending a unit of it when the Pod is protected. Costs nothing for a Pod
/// no PUB protects (no `kruise.io/related-pub` annotation); otherwise one read of the
/// PUB and, when it allows, one status write. `Ok(None)`: go ahead.
pub async fn consult(
    client: &Client,
    pod: &impl PodView,
    op: PubOperation,
    options: Options,
) -> Result<Option<Denial>, kube::Error> {
    let Some(pub_name) = decision::related_pub(pod) else {
        return Ok(None);
    };
    let namespace = pod.meta().namespace.as_deref().unwrap_or_default();
    let api: Api<PodUnavailableBudget> = Api::namespaced(client.clone(), namespace);
    let Some(pub_) = api.get_opt(pub_name).await? else {
        return Ok(None);
    };
    if let decision::Precheck::Allow(pass) = decision::precheck(pod, op, Some(&pub_), options) {
        tracing::debug!(pod = ?pod.meta().name, ?pass, "pub: allowed without spending");
        return Ok(None);
    }
    let pod_name = pod.meta().name.as_deref().unwrap_or_default();
    Ok(match spend(&api, pub_, pod_name, op, false).await? {
        Spent::Allowed { .. } => None,
        Spent::Denied(denial) => Some(denial),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, "Forbidden")
                .with_code(code)
                .boxed(),
        )
    }

    fn budget(allowed: i32) -> PodUnavailableBudget {
        let mut p = PodUnavailableBudget::new("web-pub", Default::default());
        p.status = Some(PodUnavailableBudgetStatus {
            unavailable_allowed: allowed,
            desired_available: 1,
            ..Default::default()
        });
        p
    }

    fn decide(allowed: i32, dry_run: bool) -> Step {
        let now = jiff::Timestamp::UNIX_EPOCH;
        step(
            decision::spend(&budget(allowed), "web-0", PubOperation::Delete, now),
            dry_run,
        )
    }

    #[test]
    fn a_dry_run_gets_the_real_answer_and_writes_nothing() {
        // Budget left: the real request writes the Pod into disruptedPods, the dry run
        // is allowed with nothing to write.
        assert!(
            matches!(decide(1, false), Step::Write(s) if s.disrupted_pods.contains_key("web-0"))
        );
        assert!(matches!(
            decide(1, true),
            Step::Answer(Spent::Allowed { written: None })
        ));
        // Nothing left: both are refused alike.
        for dry_run in [false, true] {
            assert!(matches!(
                decide(0, dry_run),
                Step::Answer(Spent::Denied(Denial::Exhausted { .. }))
            ));
        }
    }

    #[test]
    fn only_a_budgets_403_is_a_refusal() {
        let denial = Denial::Exhausted {
            pub_name: "web-pub".into(),
        };
        let from_webhook = format!(
            "admission webhook \"vpod-pub.kb.io\" denied the request: {}",
            denial.message()
        );
        assert!(is_refusal(&api_error(403, &from_webhook)));
        let conflicts = Denial::Conflicts {
            pub_name: "web-pub".into(),
        };
        assert!(!is_refusal(&api_error(403, &conflicts.message())));
        assert!(!is_refusal(&api_error(
            403,
            "pods \"a\" is forbidden: RBAC"
        )));
        assert!(!is_refusal(&api_error(409, &from_webhook)));
    }
}
