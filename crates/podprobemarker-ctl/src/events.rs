//! The controller's name and identity (User-Agent `podprobemarker-ctl/<version>`).
//!
//! Upstream's PodProbeMarker and NodePodProbe controllers record no events (their
//! outcome is on the Pods: labels, annotations, conditions); the node agent records
//! `KruiseProbeSucceeded` / `KruiseProbeFailed` on a Pod when a probe's result changes
//! (`kruise_api::apps_v1alpha1::podprobemarker::EVENT_PROBE_*`).

/// Lease name, field manager and event reporter.
pub const CONTROLLER_NAME: &str = "podprobemarker-controller";
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);
