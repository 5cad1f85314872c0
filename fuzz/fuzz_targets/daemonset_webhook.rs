//! Advanced DaemonSet defaulting and validation, through `daemonset_ctl::webhook::routes`.
#![no_main]
use std::sync::LazyLock;

use kruise_runtime::webhook::Route;
use libfuzzer_sys::fuzz_target;

static ROUTES: LazyLock<Vec<Route>> = LazyLock::new(daemonset_ctl::webhook::routes);

fuzz_target!(|data: &[u8]| {
    kruise_fuzz::drive_routes(&ROUTES, data);
});
