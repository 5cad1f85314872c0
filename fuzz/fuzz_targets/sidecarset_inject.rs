//! Pod injection: `sidecarset_ctl::webhook::review_pod` (the Pod route's handler without
//! its caches). Input: `{"sidecarsets": [SidecarSet...], "namespaces": {ns: labels},
//! "review": AdmissionReview}`; the SidecarSets are those the cache would hold.
#![no_main]
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_api::apps_v1alpha1::SidecarSet;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use sidecarset_ctl::inject::Revisions;

struct NoRevisions;

impl Revisions for NoRevisions {
    fn named(&self, _: &str) -> Option<ControllerRevision> {
        None
    }
    fn of(&self, _: &str) -> Vec<ControllerRevision> {
        Vec::new()
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let sidecarsets: Vec<Arc<SidecarSet>> = input
        .get("sidecarsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| serde_json::from_value(s.clone()).ok())
        .map(Arc::new)
        .collect();
    let namespaces: BTreeMap<String, BTreeMap<String, String>> = input
        .get("namespaces")
        .and_then(|n| serde_json::from_value(n.clone()).ok())
        .unwrap_or_default();
    let Some(review) = input.get("review") else {
        return;
    };
    let Some(req) = kruise_fuzz::request(review.to_string().as_bytes()) else {
        return;
    };
    let now = jiff::Timestamp::from_second(1_764_000_000).expect("a valid time");
    for draw in [0.0, 0.5, 0.999] {
        let answer = sidecarset_ctl::webhook::review_pod(
            req.clone(),
            &sidecarsets,
            &namespaces,
            &NoRevisions,
            now,
            &mut || draw,
        );
        kruise_fuzz::check_answer(&req, answer);
    }
});
