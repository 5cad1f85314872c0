//! SidecarSet defaulting (`mutate_sidecarset`, the route's handler) and validation (the
//! route's steps without its API reads: raw checks, decode, `validation::validate` with
//! no other SidecarSets, namespaces or revisions).
#![no_main]
use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_api::apps_v1alpha1::SidecarSet;
use kruise_runtime::webhook::Operation;
use libfuzzer_sys::fuzz_target;
use sidecarset_ctl::inject::Revisions;
use sidecarset_ctl::validation;

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
    let Some(req) = kruise_fuzz::request(data) else {
        return;
    };
    let answer = sidecarset_ctl::webhook::mutate_sidecarset(req.clone());
    kruise_fuzz::check_answer(&req, answer);

    let Some(object) = &req.object else {
        return;
    };
    let raw = serde_json::to_value(object).expect("a decoded object encodes");
    if !validation::validate_raw(&raw).is_empty() {
        return;
    }
    let Ok(ss) = serde_json::from_value::<SidecarSet>(raw) else {
        return;
    };
    let old: Option<SidecarSet> = match (&req.operation, &req.old_object) {
        (Operation::Update, Some(o)) => serde_json::to_value(o)
            .and_then(serde_json::from_value)
            .ok(),
        _ => None,
    };
    let namespaces: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for patch_metadata_defaults_allowed in [false, true] {
        let ctx = validation::Context {
            others: &[],
            namespaces: &namespaces,
            revisions: &NoRevisions,
            whitelist: Ok(None),
            patch_metadata_defaults_allowed,
        };
        let _ = validation::validate(&ss, old.as_ref(), &ctx);
    }
});
