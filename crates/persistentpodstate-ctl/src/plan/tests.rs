use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kruise_api::apps_v1alpha1::persistentpodstate::{
    NodeTopologyTerm, PersistentPodAnnotation, PersistentPodStateRetentionPolicyType,
    PersistentPodStateSpec, PersistentPodStateStatus, PodState, PreferredTopologyTerm,
};
use kruise_api::apps_v1alpha1::workloadspread::TargetReference;
use kruise_api::keys;
use proptest::prelude::*;

use super::autogen::Existing;
use super::*;

const ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

/// The PPS of OpenKruise v1.2 release notes (`echoserver`): zone required, hostname preferred with
/// weight 100.
fn echoserver_spec() -> PersistentPodStateSpec {
    PersistentPodStateSpec {
        target_ref: TargetReference {
            api_version: "apps.kruise.io/v1beta1".into(),
            kind: "StatefulSet".into(),
            name: "echoserver".into(),
        },
        required_persistent_topology: Some(NodeTopologyTerm {
            node_topology_keys: vec![ZONE.into()],
        }),
        preferred_persistent_topology: vec![PreferredTopologyTerm {
            weight: 100,
            preference: NodeTopologyTerm {
                node_topology_keys: vec![HOST.into()],
            },
        }],
        ..Default::default()
    }
}

fn pod(name: &str, node: &str, ready: bool) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("echoserver".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: (!node.is_empty()).then(|| node.to_string()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn node_labels(node: &str, zone: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (ZONE.to_string(), zone.to_string()),
        (HOST.to_string(), node.to_string()),
        ("type".to_string(), "kwok".to_string()),
    ])
}

fn state(node: &str, zone: &str) -> PodState {
    PodState {
        node_name: node.into(),
        node_topology_labels: BTreeMap::from([
            (ZONE.to_string(), zone.to_string()),
            (HOST.to_string(), node.to_string()),
        ]),
        annotations: BTreeMap::new(),
    }
}

fn target(replicas: i32) -> Target {
    Target {
        replicas,
        ..Default::default()
    }
}

fn world<'a>(
    spec: &'a PersistentPodStateSpec,
    current: Option<&'a PersistentPodStateStatus>,
    target: Option<Target>,
    pods: &'a [Pod],
    nodes: &'a [(String, BTreeMap<String, String>)],
) -> World<'a> {
    World {
        spec,
        generation: 3,
        current,
        target,
        pods: pods.iter().collect(),
        node_labels: nodes.iter().map(|(n, l)| (n.as_str(), l)).collect(),
    }
}

fn nodes() -> Vec<(String, BTreeMap<String, String>)> {
    vec![
        ("node-1".into(), node_labels("node-1", "zone-a")),
        ("node-2".into(), node_labels("node-2", "zone-b")),
    ]
}

#[test]
fn echoserver_records_node_and_the_chosen_labels_only() {
    let spec = echoserver_spec();
    let pods = [pod("echoserver-0", "node-1", true)];
    let nodes = nodes();
    let status = next_status(&world(&spec, None, Some(target(1)), &pods, &nodes));
    assert_eq!(status.observed_generation, 3);
    assert_eq!(
        status.pod_states,
        BTreeMap::from([("echoserver-0".to_string(), state("node-1", "zone-a"))])
    );
}

#[test]
fn a_pod_not_ready_or_unscheduled_or_terminating_is_not_recorded() {
    let spec = echoserver_spec();
    let mut terminating = pod("echoserver-2", "node-1", true);
    terminating.metadata.deletion_timestamp = Some(Time(Default::default()));
    let pods = [
        pod("echoserver-0", "node-1", false),
        pod("echoserver-1", "", true),
        terminating,
    ];
    let nodes = nodes();
    let status = next_status(&world(&spec, None, Some(target(3)), &pods, &nodes));
    assert!(status.pod_states.is_empty(), "{status:?}");
}

#[test]
fn a_pod_on_a_node_not_yet_cached_keeps_its_old_state() {
    let spec = echoserver_spec();
    let old = PersistentPodStateStatus {
        observed_generation: 3,
        pod_states: BTreeMap::from([("echoserver-0".into(), state("node-1", "zone-a"))]),
    };
    let pods = [pod("echoserver-0", "node-9", true)];
    let nodes = nodes();
    let status = next_status(&world(&spec, Some(&old), Some(target(1)), &pods, &nodes));
    assert_eq!(status, old);
}

#[test]
fn an_entry_is_rewritten_when_the_node_changes_but_not_when_a_label_value_does() {
    let spec = echoserver_spec();
    let old = PersistentPodStateStatus {
        observed_generation: 3,
        pod_states: BTreeMap::from([("echoserver-0".into(), state("node-1", "zone-a"))]),
    };
    // Same node, relabelled: the state stands (only node or key-set changes rewrite).
    let relabelled = vec![("node-1".to_string(), node_labels("node-1", "zone-c"))];
    let pods = [pod("echoserver-0", "node-1", true)];
    let status = next_status(&world(
        &spec,
        Some(&old),
        Some(target(1)),
        &pods,
        &relabelled,
    ));
    assert_eq!(status.pod_states["echoserver-0"], state("node-1", "zone-a"));
    // Moved: rewritten.
    let pods = [pod("echoserver-0", "node-2", true)];
    let nodes = nodes();
    let status = next_status(&world(&spec, Some(&old), Some(target(1)), &pods, &nodes));
    assert_eq!(status.pod_states["echoserver-0"], state("node-2", "zone-b"));
}

#[test]
fn an_entry_is_rewritten_when_the_key_sets_change() {
    let mut spec = echoserver_spec();
    let old = PersistentPodStateStatus {
        observed_generation: 3,
        pod_states: BTreeMap::from([("echoserver-0".into(), state("node-1", "zone-a"))]),
    };
    spec.preferred_persistent_topology.clear();
    spec.persistent_pod_annotations = vec![PersistentPodAnnotation { key: "ip".into() }];
    let mut p = pod("echoserver-0", "node-1", true);
    p.metadata.annotations = Some(BTreeMap::from([
        ("ip".to_string(), "10.0.0.12".to_string()),
        ("other".to_string(), "x".to_string()),
    ]));
    let pods = [p];
    let nodes = nodes();
    let status = next_status(&world(&spec, Some(&old), Some(target(1)), &pods, &nodes));
    let s = &status.pod_states["echoserver-0"];
    assert_eq!(
        s.node_topology_labels,
        BTreeMap::from([(ZONE.to_string(), "zone-a".to_string())])
    );
    assert_eq!(
        s.annotations,
        BTreeMap::from([("ip".to_string(), "10.0.0.12".to_string())])
    );
}

#[test]
fn scaling_in_drops_the_states_of_gone_pods_beyond_replicas_when_scaled() {
    let spec = echoserver_spec();
    let old = PersistentPodStateStatus {
        observed_generation: 3,
        pod_states: (0..10)
            .map(|i| (format!("echoserver-{i}"), state("node-1", "zone-a")))
            .collect(),
    };
    // 10 → 8; echoserver-9 still terminating, echoserver-8 gone.
    let mut terminating = pod("echoserver-9", "node-1", true);
    terminating.metadata.deletion_timestamp = Some(Time(Default::default()));
    let pods: Vec<Pod> = (0..8)
        .map(|i| pod(&format!("echoserver-{i}"), "node-1", true))
        .chain([terminating])
        .collect();
    let nodes = nodes();
    let status = next_status(&world(&spec, Some(&old), Some(target(8)), &pods, &nodes));
    let names: BTreeSet<_> = status.pod_states.keys().cloned().collect();
    assert!(!names.contains("echoserver-8"));
    assert!(names.contains("echoserver-9"), "its Pod still exists");
    assert_eq!(names.len(), 9);

    let mut keep = echoserver_spec();
    keep.persistent_pod_state_retention_policy =
        Some(PersistentPodStateRetentionPolicyType::WhenDeleted);
    let status = next_status(&world(
        &keep,
        Some(&old),
        Some(target(8)),
        &pods[..8],
        &nodes,
    ));
    assert_eq!(status.pod_states.len(), 10, "WhenDeleted keeps every state");
}

#[test]
fn reserved_ordinals_are_skipped_when_counting_replicas() {
    // replicas 3, ordinal 1 reserved: live ordinals 0, 2, 3.
    let t = Target {
        replicas: 3,
        start: 0,
        reserved: vec![1..=1],
    };
    let live: Vec<i32> = (0..6).filter(|o| t.holds(*o)).collect();
    assert_eq!(live, [0, 2, 3]);
    let spec = echoserver_spec();
    let old = PersistentPodStateStatus {
        observed_generation: 3,
        pod_states: (0..5)
            .map(|i| (format!("echoserver-{i}"), state("node-1", "zone-a")))
            .collect(),
    };
    let nodes = nodes();
    let status = next_status(&world(&spec, Some(&old), Some(t), &[], &nodes));
    let names: Vec<_> = status.pod_states.keys().cloned().collect();
    assert_eq!(names, ["echoserver-0", "echoserver-2", "echoserver-3"]);
}

#[test]
fn a_missing_or_deleted_target_clears_the_states() {
    let spec = echoserver_spec();
    let old = PersistentPodStateStatus {
        observed_generation: 2,
        pod_states: BTreeMap::from([("echoserver-0".into(), state("node-1", "zone-a"))]),
    };
    let nodes = nodes();
    let status = next_status(&world(&spec, Some(&old), None, &[], &nodes));
    assert_eq!(
        status,
        PersistentPodStateStatus {
            observed_generation: 3,
            pod_states: BTreeMap::new()
        }
    );
}

#[test]
fn names_without_an_ordinal_are_never_dropped() {
    assert_eq!(ordinal_of("web-12"), Some(12));
    assert_eq!(ordinal_of("web"), None);
    assert_eq!(ordinal_of("web-x"), None);
    let spec = echoserver_spec();
    let old = PersistentPodStateStatus {
        observed_generation: 3,
        pod_states: BTreeMap::from([("odd".into(), state("node-1", "zone-a"))]),
    };
    let status = next_status(&world(&spec, Some(&old), Some(target(0)), &[], &[]));
    assert!(status.pod_states.contains_key("odd"));
}

#[test]
fn echoserver_injection_is_the_zone_selector_and_the_preferred_host() {
    let inj = injection(&echoserver_spec(), &state("node-1", "zone-a")).expect("an injection");
    assert_eq!(
        inj.node_selector,
        BTreeMap::from([(ZONE.to_string(), "zone-a".to_string())])
    );
    assert_eq!(
        serde_json::to_value(&inj.preferred).unwrap(),
        serde_json::json!([{"weight": 100, "preference": {"matchExpressions": [
            {"key": HOST, "operator": "In", "values": ["node-1"]}]}}])
    );
    let mut p = pod("echoserver-0", "", false);
    p.spec.as_mut().unwrap().node_selector = Some(BTreeMap::from([
        (ZONE.to_string(), "zone-z".to_string()),
        ("disk".to_string(), "ssd".to_string()),
    ]));
    affinity::apply(&mut p, "echoserver", &inj);
    let spec = p.spec.unwrap();
    assert_eq!(
        spec.node_selector.unwrap(),
        BTreeMap::from([
            (ZONE.to_string(), "zone-a".to_string()),
            ("disk".to_string(), "ssd".to_string())
        ]),
        "merged, the PPS's value winning"
    );
    assert_eq!(
        p.metadata.annotations.unwrap()[keys::PPS_INJECTED],
        "echoserver"
    );
}

#[test]
fn no_topology_labels_no_injection() {
    let empty = PodState {
        node_name: "node-1".into(),
        ..Default::default()
    };
    assert_eq!(injection(&echoserver_spec(), &empty), None);
    // Keys the state lacks add nothing; a term with none of its keys is left out.
    let only_zone = PodState {
        node_name: "node-1".into(),
        node_topology_labels: BTreeMap::from([(ZONE.to_string(), "zone-a".to_string())]),
        ..Default::default()
    };
    let inj = injection(&echoserver_spec(), &only_zone).unwrap();
    assert!(inj.preferred.is_empty());
    assert_eq!(inj.node_selector.len(), 1);
}

#[test]
fn annotations_generate_the_echoserver_spec() {
    let annotations = BTreeMap::from([
        (keys::PPS_AUTO_GENERATE.to_string(), "true".to_string()),
        (keys::PPS_PREFERRED_TOPOLOGY.to_string(), HOST.to_string()),
        (keys::PPS_REQUIRED_TOPOLOGY.to_string(), ZONE.to_string()),
    ]);
    let generated = generated_spec(&annotations, echoserver_spec().target_ref);
    assert_eq!(generated, Generated::Spec(echoserver_spec()));
}

#[test]
fn generation_reads_comma_lists_and_needs_a_topology() {
    let mut annotations = BTreeMap::from([
        (keys::PPS_AUTO_GENERATE.to_string(), "true".to_string()),
        (
            keys::PPS_REQUIRED_TOPOLOGY.to_string(),
            format!("{ZONE}, rack,"),
        ),
        (
            keys::PPS_PERSISTENT_POD_ANNOTATIONS.to_string(),
            "a,b".to_string(),
        ),
    ]);
    let Generated::Spec(spec) = generated_spec(&annotations, echoserver_spec().target_ref) else {
        panic!("a spec")
    };
    assert_eq!(
        spec.required_persistent_topology
            .unwrap()
            .node_topology_keys,
        [ZONE, "rack"]
    );
    assert!(spec.preferred_persistent_topology.is_empty());
    assert_eq!(spec.persistent_pod_annotations.len(), 2);
    annotations.remove(keys::PPS_REQUIRED_TOPOLOGY);
    assert_eq!(
        generated_spec(&annotations, echoserver_spec().target_ref),
        Generated::Incomplete
    );
    annotations.insert(keys::PPS_AUTO_GENERATE.into(), "yes".into());
    assert_eq!(
        generated_spec(&annotations, echoserver_spec().target_ref),
        Generated::None
    );
}

#[test]
fn autogen_touches_only_the_pps_it_controls() {
    let spec = echoserver_spec();
    let mut other = echoserver_spec();
    other.preferred_persistent_topology.clear();
    let ours = |s| {
        Some(Existing {
            spec: s,
            owned: true,
            deleting: false,
        })
    };
    let theirs = Some(Existing {
        spec: &other,
        owned: false,
        deleting: false,
    });
    let want = || Generated::Spec(spec.clone());
    assert_eq!(
        autogen_action(want(), None),
        AutogenAction::Create(spec.clone())
    );
    assert_eq!(autogen_action(want(), ours(&spec)), AutogenAction::Nothing);
    assert_eq!(
        autogen_action(want(), ours(&other)),
        AutogenAction::UpdateSpec(spec.clone())
    );
    assert_eq!(
        autogen_action(Generated::None, ours(&spec)),
        AutogenAction::Delete
    );
    assert_eq!(
        autogen_action(Generated::None, None),
        AutogenAction::Nothing
    );
    assert_eq!(
        autogen_action(Generated::Incomplete, ours(&spec)),
        AutogenAction::Nothing
    );
    assert_eq!(autogen_action(want(), theirs), AutogenAction::Nothing);
    assert_eq!(
        autogen_action(Generated::None, theirs),
        AutogenAction::Nothing
    );
}

#[test]
fn autogen_keeps_the_retention_policy_a_user_set_on_the_generated_pps() {
    let spec = echoserver_spec();
    let mut edited = echoserver_spec();
    edited.persistent_pod_state_retention_policy =
        Some(PersistentPodStateRetentionPolicyType::WhenDeleted);
    let ours = |s| {
        Some(Existing {
            spec: s,
            owned: true,
            deleting: false,
        })
    };
    // Only the retention policy differs: nothing to write.
    assert_eq!(
        autogen_action(Generated::Spec(spec.clone()), ours(&edited)),
        AutogenAction::Nothing
    );
    // An annotation change rewrites what the annotations say and keeps the policy.
    let mut wanted = spec.clone();
    wanted.preferred_persistent_topology.clear();
    let mut expected = wanted.clone();
    expected.persistent_pod_state_retention_policy =
        Some(PersistentPodStateRetentionPolicyType::WhenDeleted);
    assert_eq!(
        autogen_action(Generated::Spec(wanted), ours(&edited)),
        AutogenAction::UpdateSpec(expected)
    );
}

#[test]
fn group_and_kind_decide_the_target() {
    assert_eq!(
        target_kind("apps/v1", "StatefulSet"),
        Some(TargetKind::Apps)
    );
    assert_eq!(
        target_kind("apps.kruise.io/v1alpha1", "StatefulSet"),
        Some(TargetKind::Advanced)
    );
    assert_eq!(target_kind("apps/v1", "Deployment"), None);
    assert_eq!(target_kind("example.com/v1", "StatefulSet"), None);
    let a = |v: &str| TargetReference {
        api_version: v.into(),
        kind: "StatefulSet".into(),
        name: "web".into(),
    };
    assert!(same_target(
        &a("apps.kruise.io/v1alpha1"),
        &a("apps.kruise.io/v1beta1")
    ));
    assert!(!same_target(&a("apps/v1"), &a("apps.kruise.io/v1beta1")));
}

fn arb_ranges() -> impl Strategy<Value = Vec<RangeInclusive<i32>>> {
    prop::collection::vec((0..30i32, 0..5i32).prop_map(|(s, len)| s..=s + len), 0..4)
}

proptest! {
    /// `holds` agrees with the spelled-out definition (the first `replicas` unreserved
    /// ordinals from `start`), and with Advanced StatefulSet's own `live_ordinals`.
    #[test]
    fn holds_is_the_first_replicas_unreserved_ordinals(
        replicas in 0..20i32, start in 0..5i32, reserved in arb_ranges(),
    ) {
        let t = Target { replicas, start, reserved: reserved.clone() };
        let mut expected = Vec::new();
        let mut o = start;
        while expected.len() < replicas as usize {
            if !reserved.iter().any(|r| r.contains(&o)) {
                expected.push(o);
            }
            o += 1;
        }
        let got: Vec<i32> = (0..80).filter(|o| t.holds(*o)).collect();
        prop_assert_eq!(&got, &expected);
        let spec = kruise_api::apps_v1beta1::StatefulSetSpec {
            replicas: Some(replicas),
            ordinals: Some(kruise_api::apps_v1beta1::StatefulSetOrdinals { start }),
            reserve_ordinals: reserved
                .iter()
                .map(|r| k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(
                    format!("{}-{}", r.start(), r.end())))
                .collect(),
            ..Default::default()
        };
        prop_assert_eq!(spec.live_ordinals(), expected);
    }

    /// Recording and retention: every recordable Pod on a known node ends up with exactly
    /// its node's state; under WhenScaled an entry survives only if its ordinal is live
    /// or its Pod exists; under WhenDeleted none is lost; and a second pass changes
    /// nothing (one write per change).
    #[test]
    fn recording_and_retention(
        replicas in 0..6i32,
        pods in prop::collection::vec((0..8i32, 0..3usize, any::<bool>()), 0..8),
        old in prop::collection::btree_map(0..10i32, 0..3usize, 0..6),
        when_deleted in any::<bool>(),
    ) {
        let node_names = ["node-1", "node-2", "node-9"]; // node-9 is not known
        let nodes = nodes();
        let mut spec = echoserver_spec();
        if when_deleted {
            spec.persistent_pod_state_retention_policy =
                Some(PersistentPodStateRetentionPolicyType::WhenDeleted);
        }
        let mut seen = BTreeSet::new();
        let pods: Vec<Pod> = pods
            .into_iter()
            .filter(|(o, _, _)| seen.insert(*o))
            .map(|(o, n, ready)| pod(&format!("echoserver-{o}"), node_names[n], ready))
            .collect();
        let current = PersistentPodStateStatus {
            observed_generation: 3,
            pod_states: old
                .iter()
                .map(|(o, n)| (format!("echoserver-{o}"), state(node_names[*n], "zone-a")))
                .collect(),
        };
        let w = world(&spec, Some(&current), Some(target(replicas)), &pods, &nodes);
        let next = next_status(&w);
        for p in &pods {
            let name = p.metadata.name.as_deref().unwrap();
            let node = p.spec.as_ref().unwrap().node_name.as_deref().unwrap();
            if is_recordable(p) && node != "node-9" {
                prop_assert_eq!(&next.pod_states[name].node_name, node);
            }
        }
        let existing: BTreeSet<&str> = pods.iter().map(|p| p.metadata.name.as_deref().unwrap()).collect();
        for name in current.pod_states.keys() {
            let ordinal = ordinal_of(name).unwrap();
            let kept = next.pod_states.contains_key(name);
            if when_deleted || ordinal < replicas || existing.contains(name.as_str()) {
                prop_assert!(kept, "{} dropped", name);
            } else {
                prop_assert!(!kept, "{} kept", name);
            }
        }
        let again = world(&spec, Some(&next), Some(target(replicas)), &pods, &nodes);
        prop_assert_eq!(next_status(&again), next.clone());
    }

    /// The injection never invents values: every selector entry and every preferred
    /// expression is a required/preferred key with its recorded value, weights are the
    /// spec's, and applying it keeps the Pod's other selector entries.
    #[test]
    fn injection_uses_only_recorded_values(
        recorded in prop::collection::btree_map("[a-c]", "[x-z]", 0..3),
        required in prop::collection::vec("[a-d]", 0..3),
        preferred in prop::collection::vec((1..=100i32, prop::collection::vec("[a-d]", 0..3)), 0..3),
        own in prop::collection::btree_map("[a-e]", "[x-z]", 0..3),
    ) {
        let spec = PersistentPodStateSpec {
            required_persistent_topology: Some(NodeTopologyTerm { node_topology_keys: required.clone() }),
            preferred_persistent_topology: preferred
                .iter()
                .map(|(w, keys)| PreferredTopologyTerm {
                    weight: *w,
                    preference: NodeTopologyTerm { node_topology_keys: keys.clone() },
                })
                .collect(),
            ..Default::default()
        };
        let st = PodState { node_name: "n".into(), node_topology_labels: recorded.clone(), annotations: BTreeMap::new() };
        let Some(inj) = injection(&spec, &st) else {
            let any_key = required.iter().chain(preferred.iter().flat_map(|(_, k)| k))
                .any(|k| recorded.contains_key(k));
            prop_assert!(!any_key);
            return Ok(());
        };
        for (k, v) in &inj.node_selector {
            prop_assert!(required.contains(k));
            prop_assert_eq!(&recorded[k], v);
        }
        for term in &inj.preferred {
            prop_assert!(preferred.iter().any(|(w, _)| *w == term.weight));
            for e in term.preference.match_expressions.as_ref().unwrap() {
                prop_assert_eq!(&e.operator, "In");
                prop_assert_eq!(e.values.as_ref().unwrap(), &vec![recorded[&e.key].clone()]);
            }
        }
        let mut p = pod("echoserver-0", "", false);
        p.spec.as_mut().unwrap().node_selector = Some(own.clone());
        affinity::apply(&mut p, "pps", &inj);
        let selector = p.spec.unwrap().node_selector.unwrap();
        for (k, v) in &own {
            let expected = inj.node_selector.get(k).unwrap_or(v);
            prop_assert_eq!(&selector[k], expected);
        }
    }
}
