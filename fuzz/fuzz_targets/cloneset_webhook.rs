//! CloneSet defaulting and validation, through `cloneset_ctl::webhook::routes` (an empty
//! in-memory Pod cache: `podsToDelete` names no known Pod).
#![no_main]
use std::sync::LazyLock;

use kruise_runtime::Cache;
use kruise_runtime::webhook::Route;
use libfuzzer_sys::fuzz_target;

static ROUTES: LazyLock<[Vec<Route>; 2]> = LazyLock::new(|| {
    let pods = Cache::in_memory();
    [
        cloneset_ctl::webhook::routes(pods.clone(), None, true),
        cloneset_ctl::webhook::routes(pods, None, false),
    ]
});

fuzz_target!(|data: &[u8]| {
    for routes in ROUTES.iter() {
        kruise_fuzz::drive_routes(routes, data);
    }
});
