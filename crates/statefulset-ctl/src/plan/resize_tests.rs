//! PVC resize on rolling update, status.volumeClaims.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimCondition, PersistentVolumeClaimSpec,
    PersistentVolumeClaimStatus, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::apps_v1beta1::{VolumeClaimStatus, VolumeClaimUpdateStrategyType};
use proptest::prelude::*;

use super::fixtures::*;
use super::resize::*;
use super::*;

fn storage(size: &str) -> Option<VolumeResourceRequirements> {
    Some(VolumeResourceRequirements {
        requests: Some(BTreeMap::from([("storage".into(), Quantity(size.into()))])),
        ..Default::default()
    })
}

fn class(name: &str, expand: Option<bool>) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        provisioner: "kwok.x-k8s.io/volume".into(),
        allow_volume_expansion: expand,
        ..Default::default()
    }
}

/// `web` with 3 ready Pods at the update revision, claim template `data` of class
/// `sc` at `template` size, and claims of `claim` size (capacity caught up), resize on.
fn resizing(template: &str, claim: &str, expand: Option<bool>) -> Fixture {
    let mut f = Fixture::new(3);
    f.options.auto_resize_pvc = true;
    f.sts.spec.volume_claim_update_strategy.type_ =
        Some(VolumeClaimUpdateStrategyType::OnPodRollingUpdate);
    f.sts
        .spec
        .volume_claim_templates
        .push(PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: Some("sc".into()),
                resources: storage(claim),
                ..Default::default()
            }),
            status: None,
        });
    f.add_pods(&[0, 1, 2], Rev::Update, Ready::Yes);
    f.add_claims(&[0, 1, 2]);
    for c in &mut f.pvcs {
        c.status = Some(PersistentVolumeClaimStatus {
            phase: Some("Bound".into()),
            capacity: Some(BTreeMap::from([("storage".into(), Quantity(claim.into()))])),
            ..Default::default()
        });
    }
    f.sts.spec.volume_claim_templates[0]
        .spec
        .as_mut()
        .unwrap()
        .resources = storage(template);
    f.storage_classes.push(class("sc", expand));
    f
}

fn claim_mut(f: &mut Fixture, ordinal: i32) -> &mut PersistentVolumeClaim {
    let name = format!("data-web-{ordinal}");
    f.pvcs
        .iter_mut()
        .find(|c| c.metadata.name.as_deref() == Some(name.as_str()))
        .unwrap()
}

fn set_request(f: &mut Fixture, ordinal: i32, size: &str) {
    claim_mut(f, ordinal).spec.as_mut().unwrap().resources = storage(size);
}

fn set_capacity(f: &mut Fixture, ordinal: i32, size: &str) {
    claim_mut(f, ordinal).status.as_mut().unwrap().capacity =
        Some(BTreeMap::from([("storage".into(), Quantity(size.into()))]));
}

fn update(f: &Fixture) -> Plan<'_> {
    plan(&f.world())
}

#[test]
fn quantities_parse_to_bytes() {
    assert_eq!(quantity_bytes("1Gi"), Some(1024f64.powi(3)));
    assert_eq!(quantity_bytes("2G"), Some(2e9));
    assert_eq!(quantity_bytes("1"), Some(1.0));
    assert_eq!(quantity_bytes("1e3"), Some(1000.0));
    assert_eq!(quantity_bytes("1500Mi"), Some(1500.0 * 1024f64.powi(2)));
    assert_eq!(quantity_bytes("1Zi"), None);
    assert!(quantity_bytes("1Gi") < quantity_bytes("1100M"));
}

#[test]
fn a_smaller_claim_is_resized_highest_ordinal_first_without_touching_the_pod() {
    let f = resizing("2Gi", "1Gi", Some(true));
    let p = update(&f);
    assert_eq!(summary(&p), ["patch-pvc data-web-2"]);
    let Action::PatchPvc { patch, .. } = &p.actions[0] else {
        unreachable!()
    };
    assert_eq!(patch["spec"]["resources"]["requests"]["storage"], "2Gi");
    assert_eq!(patch["metadata"]["annotations"][OWNED_BY_ASTS], "web");
    assert_eq!(patch["metadata"]["resourceVersion"], "5");
    assert!(p.errors.is_empty());
}

#[test]
fn a_resize_in_flight_holds_the_budget_until_the_capacity_caught_up() {
    let mut f = resizing("2Gi", "1Gi", Some(true));
    set_request(&mut f, 2, "2Gi");
    // Requested, not yet expanded: web-2 is unavailable, so web-1 waits.
    assert!(summary(&update(&f)).is_empty());
    // The kubelet's FileSystemResizePending counts as completed, but not as ready.
    claim_mut(&mut f, 2).status.as_mut().unwrap().conditions =
        Some(vec![PersistentVolumeClaimCondition {
            type_: "FileSystemResizePending".into(),
            status: "True".into(),
            ..Default::default()
        }]);
    assert!(resize::claims_completed(&f.world(), &f.pods[2]));
    assert!(!resize::claims_ready(&f.world(), &f.pods[2]));
    assert!(summary(&update(&f)).is_empty());
    // Expanded: the next Pod's claim goes.
    set_capacity(&mut f, 2, "2Gi");
    assert_eq!(summary(&update(&f)), ["patch-pvc data-web-1"]);
}

#[test]
fn max_unavailable_bounds_how_many_claims_resize_at_once() {
    let mut f = resizing("2Gi", "1Gi", Some(true));
    f.sts.spec.pod_management_policy =
        Some(kruise_api::apps_v1beta1::PodManagementPolicyType::Parallel);
    rolling(&mut f).max_unavailable =
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(2));
    assert_eq!(
        summary(&update(&f)),
        ["patch-pvc data-web-2", "patch-pvc data-web-1"]
    );
    // Partition protects the Pods below it, claims included.
    rolling(&mut f).partition = Some(2);
    assert_eq!(summary(&update(&f)), ["patch-pvc data-web-2"]);
}

#[test]
fn a_class_without_expansion_stops_the_round_with_an_error() {
    for expand in [Some(false), None] {
        let f = resizing("2Gi", "1Gi", expand);
        let p = update(&f);
        assert!(summary(&p).is_empty());
        assert_eq!(
            p.errors,
            ["storage class sc for web-2 does not support volume expansion"]
        );
    }
    let mut f = resizing("2Gi", "1Gi", Some(true));
    f.storage_classes.clear();
    assert_eq!(
        update(&f).errors,
        ["could not get sc sc for web-2 when checking PVC spec"]
    );
}

#[test]
fn a_claim_that_differs_in_more_than_size_waits_to_be_deleted() {
    let mut f = resizing("2Gi", "1Gi", Some(true));
    claim_mut(&mut f, 2).spec.as_mut().unwrap().access_modes = Some(vec!["ReadWriteMany".into()]);
    let p = update(&f);
    assert!(summary(&p).is_empty());
    assert_eq!(
        p.errors,
        [
            "can not patch pvc data-web-2: contains diff other than spec resource, wait pvc to be deleted"
        ]
    );
}

#[test]
fn without_the_gate_or_with_on_delete_claims_are_left_alone() {
    let mut f = resizing("2Gi", "1Gi", Some(true));
    f.options.auto_resize_pvc = false;
    assert!(update(&f).actions.is_empty());
    let mut f = resizing("2Gi", "1Gi", Some(true));
    f.sts.spec.volume_claim_update_strategy.type_ = Some(VolumeClaimUpdateStrategyType::OnDelete);
    assert!(update(&f).actions.is_empty());
    // A claim bigger than the template (a shrunk template) is compatible: nothing to do.
    let f = resizing("1Gi", "2Gi", Some(true));
    assert!(update(&f).actions.is_empty());
}

#[test]
fn an_outdated_pod_is_recreated_only_once_its_claims_are_resized() {
    let mut f = resizing("2Gi", "1Gi", Some(true));
    f.pods.clear();
    f.add_pods(&[0, 1, 2], Rev::Current, Ready::Yes);
    // First the claim...
    assert_eq!(summary(&update(&f)), ["patch-pvc data-web-2"]);
    // ...then, expanded, the Pod.
    set_request(&mut f, 2, "2Gi");
    set_capacity(&mut f, 2, "2Gi");
    assert_eq!(summary(&update(&f)), ["delete web-2"]);
}

#[test]
fn status_counts_compatible_and_ready_claims_per_template() {
    let mut f = resizing("2Gi", "1Gi", Some(true));
    set_request(&mut f, 2, "2Gi");
    set_request(&mut f, 1, "2Gi");
    set_capacity(&mut f, 1, "2Gi");
    let s = compute_status(&f.world(), &Default::default(), 0, &Default::default());
    assert_eq!(
        s.volume_claims,
        [VolumeClaimStatus {
            volume_claim_name: "data".into(),
            compatible_replicas: 2,
            compatible_ready_replicas: 1,
        }]
    );
    // Counted whatever the gate: status reports, it does not act.
    f.options.auto_resize_pvc = false;
    let s = compute_status(&f.world(), &Default::default(), 0, &Default::default());
    assert_eq!(s.volume_claims[0].compatible_replicas, 2);
}

proptest! {
    /// Whatever the sizes: only claims smaller than the template are patched, to the
    /// template's size, an available Pod's only while the budget has room; and the Pods
    /// themselves (at the update revision) are never touched.
    #[test]
    fn resize_only_grows_claims_within_the_budget(
        template in 1u32..5,
        claims in proptest::collection::vec((1u32..5, 0u32..2), 3),
    ) {
        let mut f = resizing(&format!("{template}Gi"), "1Gi", Some(true));
        for (i, (request, lag)) in claims.iter().enumerate() {
            set_request(&mut f, i as i32, &format!("{request}Gi"));
            set_capacity(&mut f, i as i32, &format!("{}Gi", request.saturating_sub(*lag).max(1)));
        }
        let p = update(&f);
        // Pods whose claim is mid-resize are unavailable already: they may go on
        // (upstream lets an unavailable Pod proceed); an available one only when the
        // budget (1) has room.
        let in_flight: Vec<String> = claims
            .iter()
            .enumerate()
            .filter(|(_, (r, lag))| *lag > 0 && *r > 1)
            .map(|(i, _)| format!("data-web-{i}"))
            .collect();
        let patched: Vec<_> = p.actions.iter().filter_map(|a| match a {
            Action::PatchPvc { pvc, patch } => Some((pvc, patch)),
            _ => None,
        }).collect();
        let fresh = patched
            .iter()
            .filter(|(pvc, _)| !in_flight.iter().any(|n| Some(n.as_str()) == pvc.metadata.name.as_deref()))
            .count();
        prop_assert!(fresh <= usize::from(in_flight.is_empty()));
        let only_patches = p.actions.iter().all(|a| matches!(a, Action::PatchPvc { .. }));
        prop_assert!(only_patches);
        for (pvc, patch) in patched {
            prop_assert!(requested(pvc).unwrap() < f64::from(template) * 1024f64.powi(3));
            let want = format!("{template}Gi");
            prop_assert_eq!(patch["spec"]["resources"]["requests"]["storage"].as_str(), Some(want.as_str()));
        }
    }
}
