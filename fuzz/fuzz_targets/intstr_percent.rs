//! `IntOrString` / percentage parsing and scaling (`kruise_api::intstr`, and the workload
//! arithmetic built on it: maxSurge, maxUnavailable, partition).
//! Input: the first 4 bytes are the total, the rest the value (a string; if it is a
//! decimal integer, also as an int).
#![no_main]
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::intstr::{self, Amount, Rounding};
use kruise_workload::arithmetic;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let total = i32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    let Ok(text) = std::str::from_utf8(&data[4..]) else {
        return;
    };
    let mut values = vec![IntOrString::String(text.to_string())];
    if let Ok(n) = text.trim().parse::<i32>() {
        values.push(IntOrString::Int(n));
    }
    let _ = intstr::parse_percent(text);
    for value in &values {
        let _ = intstr::validate(value);
        for rounding in [Rounding::Up, Rounding::Down] {
            let _ = intstr::scaled_value(value, total, rounding);
            let _ = intstr::scaled_value_or(None, value, total, rounding);
        }
        if let Ok(amount) = Amount::parse(value) {
            // Scaling is monotonic in the rounding: up never gives less than down.
            let (up, down) = (
                amount.scale(total, Rounding::Up),
                amount.scale(total, Rounding::Down),
            );
            assert!(up >= down, "{value:?} of {total}: up {up} < down {down}");
        }
        let _ = arithmetic::max_surge(Some(value), total);
        let _ = arithmetic::max_unavailable(Some(value), total, 0);
        let _ = arithmetic::partition_replicas(Some(value), total);
    }
});
