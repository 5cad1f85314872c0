//! What the prober decides (pure), as openkruise/kruise v1.9.0 pkg/daemon/podprobe
//! (worker.go, pod_probe_controller.go): the probes of the node's NodePodProbe, the
//! success/failure thresholds, and the status written back.

use std::collections::{BTreeMap, HashSet};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Probe;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps_v1alpha1::{
    ContainerProbeState, NodePodProbeSpec, NodePodProbeStatus, PodProbeStatus, ProbeState,
};

/// Upstream's cap on a probe's message (`maxProbeMessageLength`).
pub const MAX_MESSAGE: usize = 1024;

/// One probe of one Pod (upstream's `probeKey`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    pub ip: String,
    pub container: String,
    /// `<marker>#<probe>`.
    pub probe: String,
}

/// Every probe the spec lists, with its definition.
pub fn probes(spec: &NodePodProbeSpec) -> Vec<(Key, Probe)> {
    spec.pod_probes
        .iter()
        .flat_map(|p| {
            p.probes.iter().map(move |c| {
                (
                    Key {
                        namespace: p.namespace.clone(),
                        pod: p.name.clone(),
                        uid: p.uid.clone(),
                        ip: p.ip.clone(),
                        container: c.container_name.clone(),
                        probe: c.name.clone(),
                    },
                    c.probe.clone(),
                )
            })
        })
        .collect()
}

/// `periodSeconds` (at least 1).
pub fn period_seconds(probe: &Probe) -> u64 {
    u64::try_from(probe.period_seconds.unwrap_or(0).max(1)).unwrap_or(1)
}

/// `timeoutSeconds` (at least 1).
pub fn timeout_seconds(probe: &Probe) -> u64 {
    u64::try_from(probe.timeout_seconds.unwrap_or(0).max(1)).unwrap_or(1)
}

/// Whether the container has run long enough for its first probe: `initialDelaySeconds`
/// (at least 1) since it started.
pub fn past_initial_delay(probe: &Probe, started_at_nanos: i64, now: Timestamp) -> bool {
    let delay = i64::from(probe.initial_delay_seconds.unwrap_or(0).max(1));
    let since = now.as_nanosecond() - i128::from(started_at_nanos);
    since >= i128::from(delay) * 1_000_000_000
}

/// Consecutive results of one probe: a result is reported once it has been seen
/// `successThreshold` (Succeeded) or `failureThreshold` (Failed) times in a row (each at
/// least 1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Run {
    last: Option<bool>,
    count: u32,
}

impl Run {
    /// Records one result (`true`: success); returns it when it is to be reported.
    pub fn record(&mut self, success: bool, probe: &Probe) -> Option<ProbeState> {
        if self.last == Some(success) {
            self.count = self.count.saturating_add(1);
        } else {
            self.last = Some(success);
            self.count = 1;
        }
        let threshold = if success {
            probe.success_threshold
        } else {
            probe.failure_threshold
        };
        let threshold = u32::try_from(threshold.unwrap_or(1).max(1)).unwrap_or(1);
        (self.count >= threshold).then(|| {
            if success {
                ProbeState::succeeded()
            } else {
                ProbeState::failed()
            }
        })
    }
}

/// A result to report: state, message, when the probe ran.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub state: ProbeState,
    pub message: String,
    pub at: Timestamp,
}

/// A probe's message, cut at [`MAX_MESSAGE`] bytes (on a character boundary).
pub fn truncate(message: &str) -> String {
    if message.len() <= MAX_MESSAGE {
        return message.to_string();
    }
    let mut end = MAX_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_string()
}

/// The status to write: entries of probes no longer in `spec` dropped, the `outcomes`
/// merged in (`lastTransitionTime` moves when the state changes), as upstream's
/// `syncUpdateNodePodProbeStatus`. Also returns the outcomes whose state changed (for
/// events).
pub fn status(
    spec: &NodePodProbeSpec,
    reported: Option<&NodePodProbeStatus>,
    outcomes: &BTreeMap<Key, Outcome>,
    now: Timestamp,
) -> (NodePodProbeStatus, Vec<Key>) {
    let valid: HashSet<(&str, &str)> = spec
        .pod_probes
        .iter()
        .flat_map(|p| {
            p.probes
                .iter()
                .map(move |c| (p.uid.as_str(), c.name.as_str()))
        })
        .collect();
    let mut out = NodePodProbeStatus::default();
    for pod in reported.iter().flat_map(|s| &s.pod_probe_statuses) {
        let states: Vec<ContainerProbeState> = pod
            .probe_states
            .iter()
            .filter(|s| valid.contains(&(pod.uid.as_str(), s.name.as_str())))
            .cloned()
            .collect();
        if !states.is_empty() {
            out.pod_probe_statuses.push(PodProbeStatus {
                probe_states: states,
                ..pod.clone()
            });
        }
    }
    let mut changed = Vec::new();
    for (key, outcome) in outcomes {
        if !valid.contains(&(key.uid.as_str(), key.probe.as_str())) {
            continue;
        }
        let index = match out.pod_probe_statuses.iter().position(|s| s.uid == key.uid) {
            Some(i) => i,
            None => {
                out.pod_probe_statuses.push(PodProbeStatus {
                    name: key.pod.clone(),
                    namespace: key.namespace.clone(),
                    uid: key.uid.clone(),
                    probe_states: Vec::new(),
                });
                out.pod_probe_statuses.len() - 1
            }
        };
        let states = &mut out.pod_probe_statuses[index].probe_states;
        let probe_time = Some(Time(outcome.at));
        match states.iter_mut().find(|s| s.name == key.probe) {
            Some(s) => {
                if s.state != outcome.state {
                    s.last_transition_time = Some(Time(now));
                    changed.push(key.clone());
                }
                s.state = outcome.state.clone();
                s.message = outcome.message.clone();
                s.last_probe_time = probe_time;
            }
            None => {
                changed.push(key.clone());
                states.push(ContainerProbeState {
                    name: key.probe.clone(),
                    state: outcome.state.clone(),
                    last_probe_time: probe_time,
                    last_transition_time: Some(Time(now)),
                    message: outcome.message.clone(),
                });
            }
        }
    }
    (out, changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::apps_v1alpha1::{ContainerProbe, PodProbe};

    fn spec() -> NodePodProbeSpec {
        NodePodProbeSpec {
            pod_probes: vec![PodProbe {
                name: "web-0".into(),
                namespace: "ns".into(),
                uid: "u0".into(),
                ip: "10.0.0.1".into(),
                probes: vec![ContainerProbe {
                    name: "m#healthy".into(),
                    container_name: "main".into(),
                    probe: Probe::default(),
                }],
            }],
        }
    }

    fn key() -> Key {
        probes(&spec()).remove(0).0
    }

    #[test]
    fn keys_carry_pod_container_and_probe() {
        let k = key();
        assert_eq!(
            (
                k.pod.as_str(),
                k.uid.as_str(),
                k.ip.as_str(),
                k.container.as_str(),
                k.probe.as_str()
            ),
            ("web-0", "u0", "10.0.0.1", "main", "m#healthy")
        );
    }

    #[test]
    fn thresholds_count_consecutive_results() {
        let probe = Probe {
            success_threshold: Some(2),
            failure_threshold: Some(3),
            ..Default::default()
        };
        let mut run = Run::default();
        assert_eq!(run.record(true, &probe), None);
        assert_eq!(run.record(true, &probe), Some(ProbeState::succeeded()));
        assert_eq!(run.record(false, &probe), None);
        assert_eq!(run.record(false, &probe), None);
        assert_eq!(
            run.record(true, &probe),
            None,
            "a success resets the failures"
        );
        assert_eq!(run.record(false, &probe), None);
        assert_eq!(run.record(false, &probe), None);
        assert_eq!(run.record(false, &probe), Some(ProbeState::failed()));
        let mut run = Run::default();
        assert_eq!(
            run.record(false, &Probe::default()),
            Some(ProbeState::failed())
        );
    }

    #[test]
    fn timings_have_a_floor_of_one_second() {
        let p = Probe {
            period_seconds: Some(0),
            timeout_seconds: Some(-3),
            initial_delay_seconds: Some(5),
            ..Default::default()
        };
        assert_eq!((period_seconds(&p), timeout_seconds(&p)), (1, 1));
        let start = Timestamp::from_second(100).unwrap();
        let nanos = i64::try_from(start.as_nanosecond()).unwrap();
        assert!(!past_initial_delay(
            &p,
            nanos,
            Timestamp::from_second(104).unwrap()
        ));
        assert!(past_initial_delay(
            &p,
            nanos,
            Timestamp::from_second(105).unwrap()
        ));
        assert!(!past_initial_delay(&Probe::default(), nanos, start));
    }

    #[test]
    fn status_merges_outcomes_and_drops_probes_gone() {
        let t0 = Timestamp::from_second(1000).unwrap();
        let t1 = Timestamp::from_second(2000).unwrap();
        let mut outcomes = BTreeMap::new();
        outcomes.insert(
            key(),
            Outcome {
                state: ProbeState::succeeded(),
                message: "ok".into(),
                at: t0,
            },
        );
        let (first, changed) = status(&spec(), None, &outcomes, t0);
        assert_eq!(changed, [key()]);
        let s = &first.pod_probe_statuses[0];
        assert_eq!((s.name.as_str(), s.uid.as_str()), ("web-0", "u0"));
        assert_eq!(s.probe_states[0].state, ProbeState::succeeded());
        assert_eq!(s.probe_states[0].last_transition_time, Some(Time(t0)));
        // The same state later: no transition, no event.
        outcomes.get_mut(&key()).unwrap().at = t1;
        let (second, changed) = status(&spec(), Some(&first), &outcomes, t1);
        assert!(changed.is_empty());
        let st = &second.pod_probe_statuses[0].probe_states[0];
        assert_eq!(st.last_transition_time, Some(Time(t0)));
        assert_eq!(st.last_probe_time, Some(Time(t1)));
        // Failed: a transition.
        outcomes.get_mut(&key()).unwrap().state = ProbeState::failed();
        let (third, changed) = status(&spec(), Some(&second), &outcomes, t1);
        assert_eq!(changed.len(), 1);
        assert_eq!(
            third.pod_probe_statuses[0].probe_states[0].last_transition_time,
            Some(Time(t1))
        );
        // The probe left the spec: its status goes too.
        let (gone, _) = status(&NodePodProbeSpec::default(), Some(&third), &outcomes, t1);
        assert_eq!(gone, NodePodProbeStatus::default());
    }

    #[test]
    fn messages_are_cut_at_1024_bytes() {
        assert_eq!(truncate("ok"), "ok");
        assert_eq!(truncate(&"é".repeat(600)).len(), 1024);
        assert_eq!(truncate(&"x".repeat(2000)).len(), 1024);
    }
}
