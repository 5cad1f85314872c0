//! Revision hashing input (`kruise_workload::revision`): a Pod template as JSON to the
//! revision data, Go's JSON bytes, the hash and the revision name. The hash is a
//! function of the data: computing it twice gives the same name.
#![no_main]
use kruise_workload::revision;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(template) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let revision_data = revision::revision_data(&template);
    let bytes = revision::go_json(&revision_data);
    serde_json::from_slice::<Value>(&bytes).expect("go_json writes JSON");
    let collision = data.len() as i32 % 3;
    let hash = revision::hash(&revision_data, collision);
    assert_eq!(hash, revision::hash(&revision_data.clone(), collision));
    let name = revision::revision_name("fuzz", &hash);
    let _ = revision::short_hash(&name);
    let _ = revision::safe_encode(&String::from_utf8_lossy(data));
});
