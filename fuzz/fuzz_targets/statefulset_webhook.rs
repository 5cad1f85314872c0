//! statefulset defaulting and validation, through `statefulset_ctl::webhook::routes`
//! (template defaults on and off).
#![no_main]
use std::sync::LazyLock;

use kruise_runtime::webhook::Route;
use libfuzzer_sys::fuzz_target;

static ROUTES: LazyLock<[Vec<Route>; 2]> = LazyLock::new(|| {
    [
        statefulset_ctl::webhook::routes(true),
        statefulset_ctl::webhook::routes(false),
    ]
});

fuzz_target!(|data: &[u8]| {
    for routes in ROUTES.iter() {
        kruise_fuzz::drive_routes(routes, data);
    }
});
