//! `IntOrString` arithmetic: `partition: 3`, `maxUnavailable: "20%"`, `maxSurge: "12.5%"`.
//!
//! Kubernetes scales a percentage against a total and rounds it up or down depending on
//! the field (maxSurge rounds up, maxUnavailable rounds down when a surge is in play, ...).
//! OpenKruise also accepts fractional percentages (`"12.5%"`), so the number before `%`
//! is parsed as a float; integral percentages are computed in integers so that
//! `90%` of 8 is exactly 7.2 and never 7.199999.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// How to round a scaled percentage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    Up,
    Down,
}

/// A value that is neither an integer nor a percentage.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid type: string is not a percentage")]
pub struct NotAPercentage;

/// A parsed `IntOrString`: an absolute number or a percentage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Amount {
    Absolute(i32),
    Percent(f64),
}

impl Amount {
    pub fn parse(value: &IntOrString) -> Result<Self, NotAPercentage> {
        match value {
            IntOrString::Int(n) => Ok(Amount::Absolute(*n)),
            IntOrString::String(s) => parse_percent(s).map(Amount::Percent),
        }
    }

    /// Scales the amount against `total`; absolute numbers are returned unchanged.
    pub fn scale(self, total: i32, rounding: Rounding) -> i32 {
        match self {
            Amount::Absolute(n) => n,
            Amount::Percent(p) => scale_percent(p, total, rounding),
        }
    }

    pub fn is_percent(self) -> bool {
        matches!(self, Amount::Percent(_))
    }
}

/// Parses `"20%"` / `"12.5%"` into `20.0` / `12.5`.
pub fn parse_percent(s: &str) -> Result<f64, NotAPercentage> {
    let number = s.strip_suffix('%').ok_or(NotAPercentage)?;
    let number = number.trim();
    if number.is_empty() {
        return Err(NotAPercentage);
    }
    number
        .parse::<f64>()
        .ok()
        .filter(|p| p.is_finite())
        .ok_or(NotAPercentage)
}

fn scale_percent(percent: f64, total: i32, rounding: Rounding) -> i32 {
    if percent.fract() == 0.0 && percent.abs() < (i64::MAX / (i64::from(i32::MAX) + 1)) as f64 {
        // Exact integer arithmetic for the common case.
        let numerator = percent as i64 * i64::from(total);
        let value = match rounding {
            Rounding::Up => numerator.div_euclid(100) + i64::from(numerator.rem_euclid(100) != 0),
            Rounding::Down => numerator.div_euclid(100),
        };
        return value.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
    }
    let exact = percent * f64::from(total) / 100.0;
    let value = match rounding {
        Rounding::Up => exact.ceil(),
        Rounding::Down => exact.floor(),
    };
    value.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}

/// `GetScaledValueFromIntOrPercent`: the value of `value` against `total`.
pub fn scaled_value(
    value: &IntOrString,
    total: i32,
    rounding: Rounding,
) -> Result<i32, NotAPercentage> {
    Amount::parse(value).map(|a| a.scale(total, rounding))
}

/// Like [`scaled_value`] but a missing value counts as `default`.
pub fn scaled_value_or(
    value: Option<&IntOrString>,
    default: &IntOrString,
    total: i32,
    rounding: Rounding,
) -> Result<i32, NotAPercentage> {
    scaled_value(value.unwrap_or(default), total, rounding)
}

/// Whether the value is syntactically valid (an integer or `<number>%`).
pub fn validate(value: &IntOrString) -> Result<(), NotAPercentage> {
    Amount::parse(value).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.to_string())
    }

    #[test]
    fn integers_are_returned_as_is() {
        assert_eq!(scaled_value(&IntOrString::Int(3), 10, Rounding::Up), Ok(3));
        assert_eq!(
            scaled_value(&IntOrString::Int(30), 10, Rounding::Down),
            Ok(30)
        );
    }

    #[test]
    fn percentages_round_as_asked() {
        assert_eq!(scaled_value(&s("20%"), 4, Rounding::Up), Ok(1));
        assert_eq!(scaled_value(&s("20%"), 4, Rounding::Down), Ok(0));
        assert_eq!(scaled_value(&s("90%"), 8, Rounding::Up), Ok(8));
        assert_eq!(scaled_value(&s("90%"), 8, Rounding::Down), Ok(7));
        assert_eq!(scaled_value(&s("40%"), 5, Rounding::Down), Ok(2));
        assert_eq!(scaled_value(&s("30%"), 5, Rounding::Up), Ok(2));
        assert_eq!(scaled_value(&s("100%"), 7, Rounding::Up), Ok(7));
        assert_eq!(scaled_value(&s("0%"), 7, Rounding::Up), Ok(0));
        assert_eq!(scaled_value(&s("12.5%"), 8, Rounding::Up), Ok(1));
        assert_eq!(scaled_value(&s("12.5%"), 9, Rounding::Up), Ok(2));
        assert_eq!(scaled_value(&s("12.5%"), 9, Rounding::Down), Ok(1));
    }

    #[test]
    fn strings_without_percent_are_rejected() {
        for bad in ["abc", "20", "", "%", "x%", "NaN%", "inf%"] {
            assert_eq!(
                scaled_value(&s(bad), 10, Rounding::Up),
                Err(NotAPercentage),
                "{bad:?}"
            );
        }
        assert_eq!(
            NotAPercentage.to_string(),
            "invalid type: string is not a percentage"
        );
    }

    proptest! {
        #[test]
        fn up_and_down_bracket_the_exact_value(p in 0u32..=100, total in 0i32..10_000) {
            let v = s(&format!("{p}%"));
            let up = scaled_value(&v, total, Rounding::Up).unwrap();
            let down = scaled_value(&v, total, Rounding::Down).unwrap();
            let exact = f64::from(p) * f64::from(total) / 100.0;
            prop_assert!(f64::from(down) <= exact && exact <= f64::from(up));
            prop_assert!(up - down <= 1);
            prop_assert_eq!(up == down, (u64::from(p) * total as u64).is_multiple_of(100));
        }

        #[test]
        fn scaled_percent_never_exceeds_total(p in 0u32..=100, total in 0i32..100_000) {
            let up = scaled_value(&s(&format!("{p}%")), total, Rounding::Up).unwrap();
            prop_assert!((0..=total).contains(&up));
        }

        #[test]
        fn fractional_percent_is_monotonic(a in 0.0f64..100.0, b in 0.0f64..100.0, total in 0i32..1000) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let vlo = scaled_value(&s(&format!("{lo}%")), total, Rounding::Up).unwrap();
            let vhi = scaled_value(&s(&format!("{hi}%")), total, Rounding::Up).unwrap();
            prop_assert!(vlo <= vhi);
        }
    }
}
