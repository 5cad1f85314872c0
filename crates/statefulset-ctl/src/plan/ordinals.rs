//! Which ordinals (upstream `getStatefulSetReplicasRange`, `openkruise/kruise v1.9.0
//! pkg/controller/statefulset/stateful_set_utils.go`) are live, and where each Pod stands.

use kruise_api::apps_v1beta1::{StatefulSet, StatefulSetSpec};
use kruise_api::pod::Pod;

use super::{Options, World, pod_name};

/// The ordinals that should have a Pod, ascending: the first `replicas` integers from
/// `ordinals.start` (only under gate `StatefulSetStartOrdinal`, else 0) that are not in
/// `reserveOrdinals`.
pub fn live_ordinals(sts: &StatefulSet, options: &Options) -> Vec<i32> {
    // Only the fields live_ordinals reads, so the gate can drop `ordinals` without
    // copying the template.
    StatefulSetSpec {
        replicas: sts.spec.replicas,
        reserve_ordinals: sts.spec.reserve_ordinals.clone(),
        ordinals: sts.spec.ordinals.clone().filter(|_| options.start_ordinal),
        ..Default::default()
    }
    .live_ordinals()
}

/// `<set>-<ordinal>`.
pub fn pod_name_for(set: &str, ordinal: i32) -> String {
    format!("{set}-{ordinal}")
}

/// The ordinal of a Pod named `<set>-<ordinal>`. Only the canonical spelling counts
/// (`web-01` is not ordinal 1), so no two Pods can claim one ordinal.
pub fn ordinal_of(set: &str, pod: &str) -> Option<i32> {
    let digits = pod.strip_prefix(set)?.strip_prefix('-')?;
    let ordinal: i32 = digits.parse().ok()?;
    (ordinal >= 0 && pod_name_for(set, ordinal) == pod).then_some(ordinal)
}

/// The orphans among `candidates` the set adopts: Pods named for one of its
/// live ordinals, in its namespace, matching its selector, with no controller and not
/// being deleted (a Pod whose ownerReference was removed, or one created before the
/// set). A Pod another controller owns is left alone.
pub fn orphans_to_adopt<'a>(
    sts: &StatefulSet,
    options: &Options,
    candidates: impl IntoIterator<Item = &'a Pod>,
) -> Vec<&'a Pod> {
    let set = sts.metadata.name.as_deref().unwrap_or_default();
    let live = live_ordinals(sts, options);
    candidates
        .into_iter()
        .filter(|p| p.metadata.namespace == sts.metadata.namespace)
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            !p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true))
        })
        .filter(|p| {
            ordinal_of(set, p.metadata.name.as_deref().unwrap_or_default())
                .is_some_and(|o| live.contains(&o))
        })
        .filter(|p| {
            let labels = p.metadata.labels.clone().unwrap_or_default();
            kruise_ordering::selector::matches(&sts.spec.selector, &labels).unwrap_or(false)
        })
        .collect()
}

/// One live ordinal and its Pod, if it exists.
#[derive(Clone, Copy, Debug)]
pub struct Slot<'a> {
    /// Position among the live ordinals: what `partition` counts (partition counts
    /// Pods, not ordinals, so reserved ordinals do not shift it).
    pub index: usize,
    pub ordinal: i32,
    pub pod: Option<&'a Pod>,
}

/// The set's Pods by ordinal. Pods whose name is not `<set>-<n>` are ignored, as
/// upstream ignores Pods whose ordinal cannot be parsed.
#[derive(Clone, Debug, Default)]
pub struct Replicas<'a> {
    /// One slot per live ordinal, ascending.
    pub live: Vec<Slot<'a>>,
    /// Pods whose ordinal is not live (beyond `replicas`, reserved, or below
    /// `ordinals.start`), highest ordinal first: the scale-in order.
    pub condemned: Vec<(i32, &'a Pod)>,
}

impl<'a> Replicas<'a> {
    pub fn of(world: &World<'a>) -> Self {
        let set = world.name();
        let mut live: Vec<Slot<'a>> = world
            .live_ordinals()
            .into_iter()
            .enumerate()
            .map(|(index, ordinal)| Slot {
                index,
                ordinal,
                pod: None,
            })
            .collect();
        let mut condemned = Vec::new();
        for pod in world.pods.iter().copied() {
            let Some(ordinal) = ordinal_of(set, pod_name(pod)) else {
                continue;
            };
            match live.binary_search_by_key(&ordinal, |s| s.ordinal) {
                Ok(i) => live[i].pod = Some(pod),
                Err(_) => condemned.push((ordinal, pod)),
            }
        }
        condemned.sort_by_key(|(ordinal, _)| std::cmp::Reverse(*ordinal));
        Replicas { live, condemned }
    }

    /// The live Pods that exist, ascending by ordinal.
    pub fn live_pods(&self) -> impl DoubleEndedIterator<Item = &'a Pod> + '_ {
        self.live.iter().filter_map(|s| s.pod)
    }

    /// The slot of a live Pod.
    pub fn slot_of(&self, pod: &Pod) -> Option<&Slot<'a>> {
        let name = pod_name(pod);
        self.live
            .iter()
            .find(|s| s.pod.is_some_and(|p| pod_name(p) == name))
    }

    /// Every Pod with an ordinal, live first.
    pub fn all_pods(&self) -> impl Iterator<Item = (i32, &'a Pod)> + '_ {
        self.live
            .iter()
            .filter_map(|s| Some((s.ordinal, s.pod?)))
            .chain(self.condemned.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use kruise_api::apps_v1beta1::StatefulSetOrdinals;

    #[test]
    fn only_matching_orphans_named_for_a_live_ordinal_are_adopted() {
        let mut f = Fixture::new(3);
        f.add_pods(&[0, 1, 2, 3], Rev::Update, Ready::Yes);
        for p in &mut f.pods {
            p.metadata.owner_references = None;
        }
        let name = |p: &Pod| p.metadata.name.clone().unwrap();
        let adopted: Vec<String> = orphans_to_adopt(&f.sts, &f.options, &f.pods)
            .into_iter()
            .map(name)
            .collect();
        // web-3 is not a live ordinal of 3 replicas.
        assert_eq!(adopted, ["web-0", "web-1", "web-2"]);

        // Owned by another controller; not matching the selector; being deleted; in
        // another namespace: none is adopted.
        f.pods[0].metadata.owner_references = Some(vec![OwnerReference {
            controller: Some(true),
            uid: "other".into(),
            ..Default::default()
        }]);
        f.pods[1].metadata.labels = Some([("app".to_string(), "other".to_string())].into());
        f.pods[2].metadata.deletion_timestamp = Some(Time(f.now));
        assert!(orphans_to_adopt(&f.sts, &f.options, &f.pods).is_empty());
        let mut elsewhere = f.pod(0, Rev::Update, Ready::Yes);
        elsewhere.metadata.owner_references = None;
        elsewhere.metadata.namespace = Some("other".into());
        assert!(orphans_to_adopt(&f.sts, &f.options, [&elsewhere]).is_empty());
        // An owner that is not the controller does not make it owned.
        let mut shared = f.pod(1, Rev::Update, Ready::Yes);
        shared.metadata.owner_references = Some(vec![OwnerReference {
            controller: None,
            uid: "gc-only".into(),
            ..Default::default()
        }]);
        assert_eq!(orphans_to_adopt(&f.sts, &f.options, [&shared]).len(), 1);
    }

    #[test]
    fn ordinals_parse_only_the_canonical_name() {
        assert_eq!(ordinal_of("web", "web-0"), Some(0));
        assert_eq!(ordinal_of("web", "web-12"), Some(12));
        for bad in [
            "web-01", "web-", "web--1", "web-x", "webx-1", "web-1-2", "db-1", "web",
        ] {
            assert_eq!(ordinal_of("web", bad), None, "{bad}");
        }
        assert_eq!(ordinal_of("web-1", "web-1-2"), Some(2));
    }

    #[test]
    fn reserved_ordinals_are_skipped_and_their_pods_condemned() {
        // replicas 4, reserveOrdinals [1] -> [0,2,3,4].
        let mut f = Fixture::new(4);
        f.sts.spec.reserve_ordinals = vec![IntOrString::Int(1)];
        assert_eq!(f.world().live_ordinals(), [0, 2, 3, 4]);
        f.add_pods(&[0, 1, 2, 3, 4, 7], Rev::Update, Ready::Yes);
        let world = f.world();
        let r = Replicas::of(&world);
        let live: Vec<_> = r.live.iter().map(|s| (s.index, s.ordinal)).collect();
        assert_eq!(live, [(0, 0), (1, 2), (2, 3), (3, 4)]);
        assert!(r.live.iter().all(|s| s.pod.is_some()));
        let condemned: Vec<i32> = r.condemned.iter().map(|(o, _)| *o).collect();
        assert_eq!(condemned, [7, 1], "highest first");

        // Reserving 3 as well with replicas unchanged: 3 condemned, 5 missing.
        f.sts
            .spec
            .reserve_ordinals
            .push(IntOrString::String("3-3".into()));
        assert_eq!(f.world().live_ordinals(), [0, 2, 4, 5]);
    }

    #[test]
    fn start_ordinal_needs_its_gate() {
        let mut f = Fixture::new(3);
        f.sts.spec.ordinals = Some(StatefulSetOrdinals { start: 2 });
        assert_eq!(f.world().live_ordinals(), [0, 1, 2], "gate off");
        f.options.start_ordinal = true;
        assert_eq!(f.world().live_ordinals(), [2, 3, 4]);
        f.add_pods(&[0, 1, 2], Rev::Update, Ready::Yes);
        let world = f.world();
        let r = Replicas::of(&world);
        let condemned: Vec<i32> = r.condemned.iter().map(|(o, _)| *o).collect();
        assert_eq!(condemned, [1, 0]);
        assert_eq!(r.live_pods().count(), 1);
    }
}
