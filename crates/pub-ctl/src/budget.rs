//! The budget arithmetic (openkruise/kruise v1.9.0 pkg/controller/podunavailablebudget/podunavailablebudget_controller.go): how many Pods must stay available and how
//! many more may go. Pure.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::intstr::{Amount, Rounding};

/// The PUB's budget: exactly one of the two is set (admission guarantees it; a PUB that
/// somehow has neither protects nothing).
#[derive(Clone, Debug, PartialEq)]
pub enum Budget {
    MaxUnavailable(Amount),
    MinAvailable(Amount),
    /// Neither (or an unparsable value): desired 0, so nothing is protected. The
    /// controller never blocks Pods on a spec it cannot understand.
    Unusable,
}

impl Budget {
    pub fn of(max_unavailable: Option<&IntOrString>, min_available: Option<&IntOrString>) -> Self {
        match (max_unavailable, min_available) {
            (Some(v), None) => Amount::parse(v).map_or(Budget::Unusable, Budget::MaxUnavailable),
            (None, Some(v)) => Amount::parse(v).map_or(Budget::Unusable, Budget::MinAvailable),
            _ => Budget::Unusable,
        }
    }

    /// `desiredAvailable` against the expected total:
    /// - maxUnavailable: `max(expected − roundUp(maxUnavailable of expected), 0)`;
    /// - minAvailable: an integer as is, a percentage `roundUp(pct × expected)`.
    pub fn desired_available(&self, expected: i32) -> i32 {
        let expected = expected.max(0);
        match self {
            Budget::MaxUnavailable(a) => (expected - a.scale(expected, Rounding::Up)).max(0),
            Budget::MinAvailable(a) => a.scale(expected, Rounding::Up).max(0),
            Budget::Unusable => 0,
        }
    }
}

/// `unavailableAllowed = max(currentAvailable − desiredAvailable, 0)`.
pub fn unavailable_allowed(current_available: i32, desired_available: i32) -> i32 {
    (current_available - desired_available).max(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn max_unavailable(v: IntOrString) -> Budget {
        Budget::of(Some(&v), None)
    }
    fn min_available(v: IntOrString) -> Budget {
        Budget::of(None, Some(&v))
    }
    fn pct(s: &str) -> IntOrString {
        IntOrString::String(s.into())
    }

    #[test]
    fn openkruises_expected_totals() {
        // maxUnavailable 10% of 15: 1.5 rounds up to 2 unavailable, 13 desired.
        assert_eq!(max_unavailable(pct("10%")).desired_available(15), 13);
        assert_eq!(min_available(pct("50%")).desired_available(10), 5);
        // 0%: everything must stay available.
        assert_eq!(max_unavailable(pct("0%")).desired_available(5), 5);
        assert_eq!(unavailable_allowed(5, 5), 0);
        // A Deployment scaled to 0 (or being deleted): nothing to protect.
        assert_eq!(max_unavailable(IntOrString::Int(1)).desired_available(0), 0);
        assert_eq!(min_available(pct("50%")).desired_available(0), 0);
        // P1 and P2.
        assert_eq!(max_unavailable(IntOrString::Int(1)).desired_available(5), 4);
        assert_eq!(max_unavailable(pct("20%")).desired_available(10), 8);
        // An absolute minAvailable is taken as is, even above the total.
        assert_eq!(min_available(IntOrString::Int(7)).desired_available(3), 7);
    }

    #[test]
    fn an_unusable_budget_protects_nothing() {
        assert_eq!(Budget::of(None, None).desired_available(10), 0);
        let both = IntOrString::Int(1);
        assert_eq!(
            Budget::of(Some(&both), Some(&both)).desired_available(10),
            0
        );
        assert_eq!(max_unavailable(pct("x%")).desired_available(10), 0);
    }

    proptest! {
        #[test]
        fn desired_is_between_zero_and_expected_for_max_unavailable(
            expected in 0..10_000i32, p in 0..=100u32, n in 0..20_000i32,
        ) {
            let by_pct = max_unavailable(pct(&format!("{p}%"))).desired_available(expected);
            prop_assert!((0..=expected).contains(&by_pct));
            // Rounding up the unavailable part means never more than (100−p)% must stay.
            prop_assert!(i64::from(by_pct) * 100 <= i64::from(expected) * i64::from(100 - p));
            let by_int = max_unavailable(IntOrString::Int(n)).desired_available(expected);
            prop_assert_eq!(by_int, (expected - n).max(0));
        }

        #[test]
        fn min_available_percent_rounds_up(expected in 0..10_000i32, p in 0..=100u32) {
            let desired = min_available(pct(&format!("{p}%"))).desired_available(expected);
            let exact = i64::from(expected) * i64::from(p);
            prop_assert!(i64::from(desired) * 100 >= exact);
            prop_assert!(i64::from(desired - 1) * 100 < exact || desired == 0);
            prop_assert!(desired <= expected);
        }

        #[test]
        fn allowed_never_negative_and_spends_exactly(current in -5..1000i32, desired in 0..1000i32) {
            let allowed = unavailable_allowed(current, desired);
            prop_assert!(allowed >= 0);
            if current > desired {
                prop_assert_eq!(allowed, current - desired);
                // Spending one unit (a Pod recorded, so no longer counted) leaves one less.
                prop_assert_eq!(unavailable_allowed(current - 1, desired), allowed - 1);
            }
        }
    }
}
