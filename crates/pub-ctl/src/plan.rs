//! The PUB's status (openkruise/kruise v1.9.0 pkg/controller/podunavailablebudget/podunavailablebudget_controller.go), pure: the protected Pods, the workload's expected total
//! and the time in; the status, the events and when to look again out.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_api::policy_v1alpha1::{PodUnavailableBudget, PodUnavailableBudgetStatus};

use crate::budget::{self, Budget};
use crate::decision::related_pub;
use crate::podstate;

/// How long an admitted deletion or eviction stays recorded while its Pod still exists.
pub const DELETION_TIMEOUT: SignedDuration = SignedDuration::from_secs(20);
/// How long an admitted in-place update stays recorded.
pub const UPDATE_DELAY_CHECK: SignedDuration = SignedDuration::from_secs(10);

/// What the controller sees.
pub struct World<'a> {
    pub pub_: &'a PodUnavailableBudget,
    /// The active Pods (not finished, not being deleted) the PUB protects.
    pub pods: Vec<&'a Pod>,
    /// The workload's expected replicas (0 when it is missing or being deleted).
    pub expected: i32,
    pub now: Timestamp,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    pub status: PodUnavailableBudgetStatus,
    /// Pods admitted for deletion that still exist after [`DELETION_TIMEOUT`] (`NotDeleted`).
    pub not_deleted: Vec<String>,
    /// Pods that do not carry `kruise.io/related-pub` yet.
    pub to_annotate: Vec<String>,
    /// No Pod matched (`NoPods`).
    pub no_pods: bool,
    /// When the earliest kept record expires.
    pub requeue_after: Option<Duration>,
}

/// `pub.kruise.io/protect-total-replicas`, when set and valid, replaces the expected total.
pub fn expected_total(pub_: &PodUnavailableBudget, from_workload: i32) -> i32 {
    pub_.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::PUB_PROTECT_TOTAL_REPLICAS))
        .and_then(|v| v.parse::<i32>().ok())
        .filter(|n| *n >= 0)
        .unwrap_or(from_workload)
}

pub fn plan(world: &World) -> Outcome {
    let pub_ = world.pub_;
    let old = pub_.status.clone().unwrap_or_default();
    let exists = |name: &str| {
        world
            .pods
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(name))
    };
    let mut earliest: Option<Timestamp> = None;
    let mut keep_until = |at: Timestamp| {
        earliest = Some(earliest.map_or(at, |e| e.min(at)));
    };

    let mut not_deleted = Vec::new();
    let mut disrupted = std::collections::BTreeMap::new();
    for (pod, at) in &old.disrupted_pods {
        if !exists(pod) {
            continue; // gone or going: the deletion was observed
        }
        let expiry = at.0 + DELETION_TIMEOUT;
        if expiry <= world.now {
            not_deleted.push(pod.clone());
        } else {
            keep_until(expiry);
            disrupted.insert(pod.clone(), at.clone());
        }
    }
    let mut unavailable = std::collections::BTreeMap::new();
    for (pod, at) in &old.unavailable_pods {
        let expiry = at.0 + UPDATE_DELAY_CHECK;
        if exists(pod) && expiry > world.now {
            keep_until(expiry);
            unavailable.insert(pod.clone(), at.clone());
        }
    }

    let current_available = world
        .pods
        .iter()
        .filter(|p| {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            !disrupted.contains_key(name)
                && !unavailable.contains_key(name)
                && podstate::is_available(p)
        })
        .count() as i32;
    let total = expected_total(pub_, world.expected);
    let desired = Budget::of(
        pub_.spec.max_unavailable.as_ref(),
        pub_.spec.min_available.as_ref(),
    )
    .desired_available(total);
    let status = PodUnavailableBudgetStatus {
        observed_generation: pub_.metadata.generation.unwrap_or_default(),
        disrupted_pods: disrupted,
        unavailable_pods: unavailable,
        unavailable_allowed: budget::unavailable_allowed(current_available, desired),
        current_available,
        desired_available: desired,
        total_replicas: total,
    };
    let to_annotate = world
        .pods
        .iter()
        .filter(|p| related_pub(p).is_none())
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let requeue_after = earliest.map(|at| {
        // One extra second: record times are stored to the second.
        let wait = at.duration_since(world.now) + SignedDuration::from_secs(1);
        Duration::try_from(wait).unwrap_or_default()
    });
    Outcome {
        status,
        not_deleted,
        to_annotate,
        no_pods: world.pods.is_empty(),
        requeue_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podstate::testing::ready_pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use kruise_api::policy_v1alpha1::PodUnavailableBudgetSpec;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn now() -> Timestamp {
        "2026-01-01T10:00:30Z".parse().unwrap()
    }

    fn at(secs_ago: i64) -> Time {
        Time(now() - SignedDuration::from_secs(secs_ago))
    }

    fn pub_(max_unavailable: IntOrString) -> PodUnavailableBudget {
        PodUnavailableBudget {
            metadata: ObjectMeta {
                name: Some("web-pub".into()),
                namespace: Some("ns".into()),
                generation: Some(3),
                ..Default::default()
            },
            spec: PodUnavailableBudgetSpec {
                max_unavailable: Some(max_unavailable),
                ..Default::default()
            },
            status: None,
        }
    }

    fn pods(n: usize) -> Vec<Pod> {
        (0..n)
            .map(|i| ready_pod(&format!("web-{i}"), "nginx:alpine"))
            .collect()
    }

    #[test]
    fn p1_status_of_five_ready_pods_with_max_unavailable_one() {
        let p = pub_(IntOrString::Int(1));
        let pods = pods(5);
        let out = plan(&World {
            pub_: &p,
            pods: pods.iter().collect(),
            expected: 5,
            now: now(),
        });
        assert_eq!(
            (
                out.status.total_replicas,
                out.status.desired_available,
                out.status.current_available,
                out.status.unavailable_allowed
            ),
            (5, 4, 5, 1)
        );
        assert_eq!(out.status.observed_generation, 3);
        assert_eq!(out.to_annotate.len(), 5);
        assert!(!out.no_pods);
        assert_eq!(out.requeue_after, None);
    }

    #[test]
    fn records_are_kept_until_they_expire_and_the_earliest_expiry_is_the_requeue() {
        let mut p = pub_(IntOrString::Int(1));
        p.status = Some(PodUnavailableBudgetStatus {
            disrupted_pods: BTreeMap::from([
                ("web-0".into(), at(5)),  // kept 15 s more
                ("web-1".into(), at(25)), // expired: NotDeleted
                ("gone".into(), at(1)),   // Pod gone: dropped quietly
            ]),
            unavailable_pods: BTreeMap::from([
                ("web-2".into(), at(8)),  // kept 2 s more
                ("web-3".into(), at(11)), // expired
            ]),
            ..Default::default()
        });
        let pods = pods(5);
        let out = plan(&World {
            pub_: &p,
            pods: pods.iter().collect(),
            expected: 5,
            now: now(),
        });
        assert_eq!(out.not_deleted, vec!["web-1".to_string()]);
        assert_eq!(
            out.status.disrupted_pods.keys().collect::<Vec<_>>(),
            ["web-0"]
        );
        assert_eq!(
            out.status.unavailable_pods.keys().collect::<Vec<_>>(),
            ["web-2"]
        );
        // web-0 and web-2 are recorded, so not counted.
        assert_eq!(out.status.current_available, 3);
        assert_eq!(out.status.unavailable_allowed, 0);
        assert_eq!(out.requeue_after, Some(Duration::from_secs(3)));
    }

    #[test]
    fn the_total_override_and_no_pods() {
        let mut p = pub_(IntOrString::String("10%".into()));
        p.metadata.annotations = Some(BTreeMap::from([(
            keys::PUB_PROTECT_TOTAL_REPLICAS.into(),
            "15".into(),
        )]));
        let out = plan(&World {
            pub_: &p,
            pods: vec![],
            expected: 1,
            now: now(),
        });
        assert_eq!(
            (out.status.total_replicas, out.status.desired_available),
            (15, 13)
        );
        assert!(out.no_pods);
    }

    #[test]
    fn an_unready_pod_is_not_available() {
        let p = pub_(IntOrString::Int(1));
        let mut pods = pods(3);
        pods[0]
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()[0]
            .status = "False".into();
        let out = plan(&World {
            pub_: &p,
            pods: pods.iter().collect(),
            expected: 3,
            now: now(),
        });
        assert_eq!(
            (out.status.current_available, out.status.unavailable_allowed),
            (2, 0)
        );
    }

    proptest! {
        #[test]
        fn allowed_plus_desired_never_exceeds_available_pods(
            n in 0..20usize, expected in 0..25i32, max in 0..25i32, recorded in proptest::collection::btree_set(0..20usize, 0..10),
        ) {
            let mut p = pub_(IntOrString::Int(max));
            p.status = Some(PodUnavailableBudgetStatus {
                disrupted_pods: recorded.iter().map(|i| (format!("web-{i}"), at(1))).collect(),
                ..Default::default()
            });
            let pods = pods(n);
            let out = plan(&World { pub_: &p, pods: pods.iter().collect(), expected, now: now() });
            let s = out.status;
            prop_assert!(s.unavailable_allowed >= 0);
            prop_assert!(s.current_available + s.disrupted_pods.len() as i32 <= n as i32);
            if s.unavailable_allowed > 0 {
                prop_assert_eq!(s.current_available - s.desired_available, s.unavailable_allowed);
            }
            prop_assert!(s.disrupted_pods.keys().all(|k| pods.iter().any(|p| p.metadata.name.as_deref() == Some(k.as_str()))));
        }
    }
}
