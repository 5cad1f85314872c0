//! cronjob defaulting and validation, through `cronjob_ctl::webhook::routes`
//! (template defaults on and off).
#![no_main]
use std::sync::LazyLock;

use kruise_runtime::webhook::Route;
use libfuzzer_sys::fuzz_target;

static ROUTES: LazyLock<[Vec<Route>; 2]> = LazyLock::new(|| {
    [
        cronjob_ctl::webhook::routes(true),
        cronjob_ctl::webhook::routes(false),
    ]
});

fuzz_target!(|data: &[u8]| {
    for routes in ROUTES.iter() {
        kruise_fuzz::drive_routes(routes, data);
    }
});
