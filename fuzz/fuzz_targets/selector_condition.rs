//! Label-selector matching (`kruise_ordering::selector`) and the CEL matchCondition the
//! SidecarSet Pod webhook is narrowed with (`sidecarset_ctl::conditions`).
//! Input: `{"selector": LabelSelector, "labels": {...}, "sidecarsets": [SidecarSet...]}`.
#![no_main]
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::apps_v1alpha1::SidecarSet;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use sidecarset_ctl::conditions;

fuzz_target!(|data: &[u8]| {
    let Ok(input) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let labels: BTreeMap<String, String> = input
        .get("labels")
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    if let Some(selector) = input
        .get("selector")
        .and_then(|s| serde_json::from_value::<LabelSelector>(s.clone()).ok())
    {
        let _ = kruise_ordering::selector::matches(&selector, &labels);
        let _ = kruise_ordering::selector::format_selector(&selector);
        let _ = conditions::selector_expression(&selector);
    }
    let sidecarsets: Vec<SidecarSet> = input
        .get("sidecarsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| serde_json::from_value(s.clone()).ok())
        .collect();
    for ss in &sidecarsets {
        let _ = conditions::sidecarset_expression(ss);
    }
    let _ = conditions::match_condition(&sidecarsets);
});
