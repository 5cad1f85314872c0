//! The SidecarSet resourcesPolicy expression evaluator and quantity parser
//! (`sidecarset_ctl::resources_policy`, `kruise_api::quantity`). Input: `expression\nquantity`.
#![no_main]
use libfuzzer_sys::fuzz_target;
use sidecarset_ctl::resources_policy;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (expr, quantity) = text.split_once('\n').unwrap_or((text, text));
    let checked = resources_policy::check(expr);
    let variable = kruise_api::quantity::parse(quantity).unwrap_or(1.5);
    for v in [variable, 0.0, -1.0, 1e18, f64::MAX] {
        let evaluated = resources_policy::evaluate(expr, v);
        // What admission accepts must evaluate.
        if checked.is_ok() {
            assert!(
                evaluated.is_ok() || evaluated.as_ref().is_err_and(|e| !e.is_empty()),
                "{expr:?} passed check but evaluate({v}) = {evaluated:?}"
            );
        }
    }
});
