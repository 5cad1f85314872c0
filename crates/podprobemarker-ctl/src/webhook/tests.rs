use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ExecAction, HTTPGetAction, Probe, TCPSocketAction};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    PodContainerProbe, PodProbeMarker, PodProbeMarkerSpec, ProbeMarkerPolicy, ProbeState,
};
use kruise_runtime::webhook::field::aggregate;

use super::*;

fn valid() -> PodProbeMarker {
    PodProbeMarker {
        metadata: ObjectMeta {
            name: Some("ppm".into()),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        spec: PodProbeMarkerSpec {
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                ..Default::default()
            },
            probes: vec![PodContainerProbe {
                name: "healthy".into(),
                container_name: "main".into(),
                probe: Probe {
                    exec: Some(ExecAction {
                        command: Some(vec!["/bin/sh".into(), "-c".into(), "ls /".into()]),
                    }),
                    ..Default::default()
                },
                marker_policy: vec![ProbeMarkerPolicy {
                    state: ProbeState::succeeded(),
                    labels: BTreeMap::from([("nginx".into(), "healthy".into())]),
                    ..Default::default()
                }],
                pod_condition_type: "game.kruise.io/healthy".into(),
            }],
        },
        status: None,
    }
}

fn message(m: &PodProbeMarker) -> String {
    aggregate(&validate(m, None))
}

#[test]
fn a_valid_marker_passes() {
    assert_eq!(validate(&valid(), None), vec![]);
}

#[test]
fn probe_names_are_checked_as_upstream() {
    let cases = [
        (
            "a#b",
            r#"spec.probes: Invalid value: "a#b": probe name can't contains '#'."#,
        ),
        (
            "",
            r#"spec.probes: Invalid value: "": probe name can't be empty in PodProbeMarker."#,
        ),
        (
            "Ready",
            r#"spec.probes: Invalid value: "Ready": probe name can't be Ready"#,
        ),
    ];
    for (name, want) in cases {
        let mut m = valid();
        m.spec.probes[0].name = name.into();
        assert_eq!(message(&m), want);
    }
    let mut m = valid();
    m.spec.probes.push(m.spec.probes[0].clone());
    assert_eq!(
        message(&m),
        r#"spec.probes: Invalid value: "healthy": probe name must be unique in PodProbeMarker."#
    );
    let mut m = valid();
    m.spec.probes[0].container_name.clear();
    assert_eq!(
        message(&m),
        r#"spec.probes: Invalid value: "": probe containerName can't be empty in PodProbeMarker."#
    );
}

#[test]
fn empty_selector_and_probes_are_refused() {
    let mut m = valid();
    m.spec.selector = LabelSelector::default();
    m.spec.probes.clear();
    assert_eq!(
        message(&m),
        "[spec.selector: Invalid value: {}: empty selector is not valid for podProbeMarker., spec.probes: Invalid value: null: empty probes is not valid for PodProbeMarker.]"
    );
}

#[test]
fn handlers_and_timings_are_checked() {
    let mut m = valid();
    m.spec.probes[0].probe = Probe::default();
    assert_eq!(
        message(&m),
        "spec.probe: Required value: must specify a handler type"
    );
    let mut m = valid();
    m.spec.probes[0].probe.tcp_socket = Some(TCPSocketAction {
        port: IntOrString::Int(80),
        host: Some("example.com".into()),
    });
    m.spec.probes[0].probe.period_seconds = Some(-1);
    assert_eq!(
        message(&m),
        "[spec.probe.tcpSocket: Forbidden: may not specify more than 1 handler type, spec.probe.periodSeconds: Invalid value: -1: must be greater than or equal to 0]"
    );
    let mut m = valid();
    m.spec.probes[0].probe.exec = None;
    m.spec.probes[0].probe.http_get = Some(HTTPGetAction {
        port: IntOrString::String("Bad_Port".into()),
        host: Some("h".into()),
        ..Default::default()
    });
    let text = message(&m);
    assert!(
        text.contains("spec.probe.httpGet.path: Required value"),
        "{text}"
    );
    assert!(
        text.contains(
            r#"spec.probe.httpGet.host: Invalid value: "h": host field in probes is not allowed"#
        ),
        "{text}"
    );
    assert!(text.contains(r#"spec.probe.httpGet.port: Invalid value: "Bad_Port": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"#), "{text}");
    assert!(
        text.contains(
            r#"spec.probe.httpGet.scheme: Unsupported value: "": supported values: "HTTP", "HTTPS""#
        ),
        "{text}"
    );
    let mut m = valid();
    m.spec.probes[0].probe.exec = None;
    m.spec.probes[0].probe.tcp_socket = Some(TCPSocketAction {
        port: IntOrString::Int(0),
        host: None,
    });
    assert_eq!(
        message(&m),
        "spec.probe.tcpSocket.port: Invalid value: 0: must be between 1 and 65535, inclusive"
    );
}

#[test]
fn condition_types_and_policies_are_checked() {
    let mut m = valid();
    m.spec.probes[0].pod_condition_type.clear();
    m.spec.probes[0].marker_policy.clear();
    assert_eq!(
        message(&m),
        "spec.probes: Invalid value: podConditionType and markerPolicy cannot be empty at the same time"
    );
    let mut m = valid();
    let mut other = m.spec.probes[0].clone();
    other.name = "other".into();
    m.spec.probes.push(other);
    assert_eq!(
        message(&m),
        r#"spec.probes: Invalid value: "game.kruise.io/healthy": podConditionType game.kruise.io/healthy must be unique in podProbeMarker"#
    );
    let mut m = valid();
    m.spec.probes[0].pod_condition_type = "bad condition".into();
    assert!(
        message(&m).starts_with(r#"spec: Invalid value: "bad condition": name part must consist"#)
    );
    let mut m = valid();
    m.spec.probes[0].marker_policy[0].state = ProbeState::from("True");
    assert_eq!(
        message(&m),
        "spec.markerPolicy.state: Required value: marker policy state must be 'True' or 'False'"
    );
    let mut m = valid();
    m.spec.probes[0].marker_policy[0].labels.clear();
    assert_eq!(
        message(&m),
        "spec.markerPolicy: Required value: marker policy annotations or labels can't be both empty"
    );
    let mut m = valid();
    let dup = m.spec.probes[0].marker_policy[0].clone();
    m.spec.probes[0].marker_policy.push(dup);
    assert_eq!(
        message(&m),
        r#"spec.markerPolicy: Invalid value: "Succeeded": marker policy state must be unique."#
    );
    let mut m = valid();
    m.spec.probes[0].marker_policy[0]
        .labels
        .insert("nginx".into(), "not ok!".into());
    assert!(message(&m).starts_with(
        r#"spec.markerPolicy.labels: Invalid value: "not ok!": a valid label must be"#
    ));
}

#[test]
fn the_selector_is_immutable() {
    let old = valid();
    let mut m = valid();
    m.spec.selector.match_labels = Some(BTreeMap::from([("app".into(), "db".into())]));
    assert_eq!(
        aggregate(&validate(&m, Some(&old))),
        "selector: Invalid value: selector must be immutable"
    );
    let mut m = valid();
    m.spec.probes[0].probe.period_seconds = Some(3);
    assert_eq!(validate(&m, Some(&old)), vec![]);
}

#[test]
fn qualified_names() {
    assert!(qualified_name_messages("game.kruise.io/healthy").is_empty());
    assert!(qualified_name_messages("Healthy").is_empty());
    assert!(!qualified_name_messages("Bad.Prefix/x").is_empty());
    assert!(!qualified_name_messages("a/b/c").is_empty());
    assert!(!qualified_name_messages(&"x".repeat(64)).is_empty());
}

#[test]
fn configuration_covers_create_and_update_of_podprobemarkers() {
    let (validating, mutating) = configurations(Some("ns"));
    assert!(mutating.is_empty());
    let webhook = &validating[0].webhooks.as_ref().unwrap()[0];
    assert_eq!(webhook.name, "vpodprobemarker.kb.io");
    let rule = &webhook.rules.as_ref().unwrap()[0];
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["podprobemarkers".to_string()][..])
    );
    assert_eq!(
        rule.operations.as_deref(),
        Some(&["CREATE".to_string(), "UPDATE".to_string()][..])
    );
}
