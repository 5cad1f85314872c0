//! The admission decision (openkruise/kruise v1.9.0 pkg/control/pubcontrol/pub_control_utils.go), pure: [`precheck`] runs steps 1–6 on the Pod and
//! the PUB as the webhook first sees them; [`spend`] runs step 7 on the newest PUB and
//! returns the status to write (with the Pod recorded and one unit spent) or the denial.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::keys;
use kruise_api::pod::PodView;
use kruise_api::policy_v1alpha1::{PodUnavailableBudget, PodUnavailableBudgetStatus, PubOperation};

use crate::podstate;

/// The switches that decide which operations can be protected at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// `PodUnavailableBudgetDeleteGate`: DELETE and EVICT.
    pub protect_delete: bool,
    /// `PodUnavailableBudgetUpdateGate`: UPDATE and RESIZE.
    pub protect_update: bool,
    /// `InPlaceWorkloadVerticalScaling`: when off, a PUB protecting UPDATE protects RESIZE too.
    pub vertical_scaling: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            protect_delete: true,
            protect_update: true,
            vertical_scaling: false,
        }
    }
}

/// Why a request was let through without spending budget (for logs and tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    NoRelatedPub,
    NoProtect,
    PodUnavailable,
    PubMissing,
    NothingToProtect,
    NotProtected,
    AlreadyRecorded,
}

/// Steps 1–6.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precheck<'a> {
    Allow(Pass),
    /// The Pod is protected by this PUB: spend budget under the PUB's lock.
    Spend(&'a str),
}

/// The PUB named by the Pod's `kruise.io/related-pub` annotation.
pub fn related_pub(pod: &impl PodView) -> Option<&str> {
    pod.meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::PUB_RELATED))
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// The operations `pub_` protects (its annotation, or DELETE,EVICT,UPDATE), narrowed by
/// the gates. An unparsable annotation (admission rejects it; an old object may still
/// carry one) falls back to the default set rather than protecting nothing.
pub fn protects(pub_: &PodUnavailableBudget, op: PubOperation, options: Options) -> bool {
    let gate_on = match op {
        PubOperation::Delete | PubOperation::Evict => options.protect_delete,
        PubOperation::Update | PubOperation::Resize => options.protect_update,
    };
    if !gate_on {
        return false;
    }
    let listed = pub_
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::PUB_PROTECT_OPERATIONS))
        .and_then(|v| PubOperation::parse_list(v))
        .unwrap_or_else(|| PubOperation::DEFAULT_PROTECTED.to_vec());
    listed.contains(&op)
        || (op == PubOperation::Resize
            && !options.vertical_scaling
            && listed.contains(&PubOperation::Update))
}

fn is_recorded(status: Option<&PodUnavailableBudgetStatus>, pod: &str) -> bool {
    status
        .is_some_and(|s| s.disrupted_pods.contains_key(pod) || s.unavailable_pods.contains_key(pod))
}

/// Steps 1–6: `pub_` is the PUB the Pod's annotation names, as the cache has it.
pub fn precheck<'a>(
    pod: &'a impl PodView,
    op: PubOperation,
    pub_: Option<&PodUnavailableBudget>,
    options: Options,
) -> Precheck<'a> {
    let Some(name) = related_pub(pod) else {
        return Precheck::Allow(Pass::NoRelatedPub);
    };
    let no_protect = pod
        .meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::PUB_NO_PROTECT))
        .is_some_and(|v| v == "true");
    if no_protect {
        return Precheck::Allow(Pass::NoProtect);
    }
    if !podstate::is_available(pod) || pod.meta().deletion_timestamp.is_some() {
        return Precheck::Allow(Pass::PodUnavailable);
    }
    let Some(pub_) = pub_ else {
        return Precheck::Allow(Pass::PubMissing);
    };
    if pub_
        .status
        .as_ref()
        .is_none_or(|s| s.desired_available == 0)
    {
        return Precheck::Allow(Pass::NothingToProtect);
    }
    if !protects(pub_, op, options) {
        return Precheck::Allow(Pass::NotProtected);
    }
    if is_recorded(
        pub_.status.as_ref(),
        pod.meta().name.as_deref().unwrap_or_default(),
    ) {
        return Precheck::Allow(Pass::AlreadyRecorded);
    }
    Precheck::Spend(name)
}

/// What a budget's refusal names first (`<subject> "<pub>" is forbidden: ...`), so a
/// controller can tell it from other refusals of its Pod writes.
pub const DENIAL_SUBJECT: &str = "podunavailablebudgets.policy.kruise.io";

/// Why step 7 refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denial {
    /// No budget left.
    Exhausted { pub_name: String },
    /// Too many admitted disruptions the controller has not confirmed yet.
    TooManyUnconfirmed { pub_name: String },
    /// The status write kept conflicting.
    Conflicts { pub_name: String },
}

impl Denial {
    /// The message the client sees (after the apiserver's `admission webhook ... denied
    /// the request: `), worded as OpenKruise's `errors.NewForbidden` prints it.
    pub fn message(&self) -> String {
        let forbidden =
            |name: &str, why: &str| format!("{DENIAL_SUBJECT} \"{name}\" is forbidden: {why}");
        match self {
            Denial::Exhausted { pub_name } => {
                forbidden(pub_name, keys::PUB_MSG_UNAVAILABLE_ALLOWED_NEGATIVE)
            }
            Denial::TooManyUnconfirmed { pub_name } => {
                forbidden(pub_name, keys::PUB_MSG_MAP_TOO_BIG)
            }
            Denial::Conflicts { pub_name } => {
                format!("couldn't update PodUnavailableBudget {pub_name} due to conflicts")
            }
        }
    }

    /// Raise `PubPreventPodDeletion` on the Pod (the budget said no, not the apiserver).
    pub fn warns_pod(&self) -> bool {
        matches!(self, Denial::Exhausted { .. })
    }
}

/// Step 7 on the newest PUB.
#[derive(Clone, Debug, PartialEq)]
pub enum Spend {
    /// Recorded meanwhile (a retry or another replica): allow, write nothing.
    AlreadyRecorded,
    /// Allow once this status is written.
    Write(PodUnavailableBudgetStatus),
    Deny(Denial),
}

/// Decrements `unavailableAllowed` and records `pod` at `now` (UPDATE and RESIZE in
/// `unavailablePods`, DELETE and EVICT in `disruptedPods`).
pub fn spend(pub_: &PodUnavailableBudget, pod: &str, op: PubOperation, now: Timestamp) -> Spend {
    let pub_name = pub_.metadata.name.clone().unwrap_or_default();
    let status = pub_.status.clone().unwrap_or_default();
    if is_recorded(Some(&status), pod) {
        return Spend::AlreadyRecorded;
    }
    if status.unavailable_allowed <= 0 {
        return Spend::Deny(Denial::Exhausted { pub_name });
    }
    if status.disrupted_pods.len() + status.unavailable_pods.len() > keys::PUB_MAX_UNCONFIRMED_PODS
    {
        return Spend::Deny(Denial::TooManyUnconfirmed { pub_name });
    }
    let mut next = status;
    next.unavailable_allowed -= 1;
    let map: &mut BTreeMap<String, Time> = match op {
        PubOperation::Update | PubOperation::Resize => &mut next.unavailable_pods,
        PubOperation::Delete | PubOperation::Evict => &mut next.disrupted_pods,
    };
    map.insert(pod.to_string(), Time(now));
    Spend::Write(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podstate::testing::ready_pod;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kruise_api::policy_v1alpha1::PodUnavailableBudgetSpec;
    use proptest::prelude::*;

    fn pub_with(allowed: i32, desired: i32, ops: Option<&str>) -> PodUnavailableBudget {
        PodUnavailableBudget {
            metadata: ObjectMeta {
                name: Some("web-pub".into()),
                namespace: Some("ns".into()),
                annotations: ops.map(|o| {
                    BTreeMap::from([(keys::PUB_PROTECT_OPERATIONS.to_string(), o.to_string())])
                }),
                ..Default::default()
            },
            spec: PodUnavailableBudgetSpec::default(),
            status: Some(PodUnavailableBudgetStatus {
                unavailable_allowed: allowed,
                desired_available: desired,
                current_available: desired + allowed,
                total_replicas: desired + allowed,
                ..Default::default()
            }),
        }
    }

    fn protected_pod(name: &str) -> Pod {
        let mut pod = ready_pod(name, "nginx:alpine");
        pod.metadata.annotations = Some(BTreeMap::from([(
            keys::PUB_RELATED.into(),
            "web-pub".into(),
        )]));
        pod
    }

    fn now() -> Timestamp {
        "2026-01-01T10:00:00Z".parse().unwrap()
    }

    #[test]
    fn steps_one_to_six_let_unprotected_requests_through() {
        let pub_ = pub_with(1, 4, None);
        let o = Options::default();
        let plain = ready_pod("a", "nginx:alpine");
        assert_eq!(
            precheck(&plain, PubOperation::Delete, Some(&pub_), o),
            Precheck::Allow(Pass::NoRelatedPub)
        );
        let mut exempt = protected_pod("a");
        exempt
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(keys::PUB_NO_PROTECT.into(), "true".into());
        assert_eq!(
            precheck(&exempt, PubOperation::Delete, Some(&pub_), o),
            Precheck::Allow(Pass::NoProtect)
        );
        let mut unready = protected_pod("a");
        unready.status.as_mut().unwrap().phase = Some("Pending".into());
        assert_eq!(
            precheck(&unready, PubOperation::Delete, Some(&pub_), o),
            Precheck::Allow(Pass::PodUnavailable)
        );
        let pod = protected_pod("a");
        assert_eq!(
            precheck(&pod, PubOperation::Delete, None, o),
            Precheck::Allow(Pass::PubMissing)
        );
        assert_eq!(
            precheck(&pod, PubOperation::Delete, Some(&pub_with(0, 0, None)), o),
            Precheck::Allow(Pass::NothingToProtect)
        );
        assert_eq!(
            precheck(
                &pod,
                PubOperation::Update,
                Some(&pub_with(1, 4, Some("DELETE"))),
                o
            ),
            Precheck::Allow(Pass::NotProtected)
        );
        let mut recorded = pub_with(0, 4, None);
        recorded
            .status
            .as_mut()
            .unwrap()
            .disrupted_pods
            .insert("a".into(), Time(now()));
        assert_eq!(
            precheck(&pod, PubOperation::Evict, Some(&recorded), o),
            Precheck::Allow(Pass::AlreadyRecorded)
        );
        assert_eq!(
            precheck(&pod, PubOperation::Delete, Some(&pub_), o),
            Precheck::Spend("web-pub")
        );
    }

    #[test]
    fn gates_and_vertical_scaling_narrow_the_protected_set() {
        let pub_ = pub_with(1, 4, None);
        let all = Options::default();
        assert!(protects(&pub_, PubOperation::Delete, all));
        assert!(protects(&pub_, PubOperation::Update, all));
        // UPDATE implies RESIZE while in-place vertical scaling is off.
        assert!(protects(&pub_, PubOperation::Resize, all));
        let vertical = Options {
            vertical_scaling: true,
            ..all
        };
        assert!(!protects(&pub_, PubOperation::Resize, vertical));
        let resize = pub_with(1, 4, Some("RESIZE"));
        assert!(protects(&resize, PubOperation::Resize, vertical));
        assert!(!protects(&resize, PubOperation::Delete, vertical));
        let no_update = Options {
            protect_update: false,
            ..all
        };
        assert!(!protects(&pub_, PubOperation::Update, no_update));
        assert!(protects(&pub_, PubOperation::Evict, no_update));
        let no_delete = Options {
            protect_delete: false,
            ..all
        };
        assert!(!protects(&pub_, PubOperation::Delete, no_delete));
        assert!(!protects(&pub_, PubOperation::Evict, no_delete));
    }

    #[test]
    fn spending_records_the_pod_and_the_last_unit_goes_once() {
        let pub_ = pub_with(1, 4, None);
        let Spend::Write(status) = spend(&pub_, "a", PubOperation::Delete, now()) else {
            panic!("first spend is allowed");
        };
        assert_eq!(status.unavailable_allowed, 0);
        assert!(status.disrupted_pods.contains_key("a"));
        let mut after = pub_.clone();
        after.status = Some(status);
        assert_eq!(
            spend(&after, "a", PubOperation::Delete, now()),
            Spend::AlreadyRecorded
        );
        let denied = spend(&after, "b", PubOperation::Evict, now());
        let Spend::Deny(d) = denied else {
            panic!("no budget left")
        };
        assert_eq!(
            d.message(),
            "podunavailablebudgets.policy.kruise.io \"web-pub\" is forbidden: pub unavailable allowed is negative"
        );
        assert!(d.warns_pod());
        let Spend::Write(update) = spend(&pub_, "c", PubOperation::Update, now()) else {
            panic!("update spends too");
        };
        assert!(update.unavailable_pods.contains_key("c"));
        assert!(update.disrupted_pods.is_empty());
    }

    #[test]
    fn too_many_unconfirmed_records_are_refused() {
        let mut pub_ = pub_with(5000, 1, None);
        let status = pub_.status.as_mut().unwrap();
        for i in 0..=keys::PUB_MAX_UNCONFIRMED_PODS {
            status.disrupted_pods.insert(format!("p{i}"), Time(now()));
        }
        assert!(matches!(
            spend(&pub_, "x", PubOperation::Delete, now()),
            Spend::Deny(Denial::TooManyUnconfirmed { .. })
        ));
    }

    proptest! {
        /// However many Pods ask in turn against the newest status, exactly
        /// `unavailableAllowed` of them get through and each is recorded once.
        #[test]
        fn sequential_spends_never_exceed_the_budget(
            allowed in 0..20i32, asks in proptest::collection::vec((0..30usize, 0..4usize), 0..80),
        ) {
            let mut pub_ = pub_with(allowed, 3, None);
            let mut admitted = std::collections::BTreeSet::new();
            for (pod, op) in asks {
                let name = format!("p{pod}");
                match spend(&pub_, &name, PubOperation::ALL[op], now()) {
                    Spend::Write(s) => { admitted.insert(name); pub_.status = Some(s); }
                    Spend::AlreadyRecorded => prop_assert!(admitted.contains(&name)),
                    Spend::Deny(d) => { let exhausted = matches!(d, Denial::Exhausted { .. }); prop_assert!(exhausted) }
                }
            }
            let s = pub_.status.unwrap();
            prop_assert!(admitted.len() as i32 <= allowed);
            prop_assert_eq!(s.unavailable_allowed, allowed - admitted.len() as i32);
            prop_assert_eq!(s.disrupted_pods.len() + s.unavailable_pods.len(), admitted.len());
        }
    }
}
