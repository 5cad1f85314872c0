//! A resource quantity written the way Go's `resource.Quantity` marshals it after
//! decoding (k8s.io/apimachinery v0.32 pkg/api/resource/quantity.go: `ParseQuantity`,
//! `MarshalJSON`, `CanonicalizeBytes`): `0.5` → `500m`, `1024Mi` → `1Gi`, `2000m` → `2`.
//!
//! Go keeps the string as written when its fast parse path finds it already canonical
//! (a rule of thumb that also keeps a leading `+` or an `E` exponent), and otherwise
//! prints the exact value: DecimalSI and DecimalExponent as mantissa × 10^(3k) with a
//! suffix, BinarySI as mantissa × 1024^k when the value is an integer of at least 1024.
//! Values finer than 1n round up (away from zero) to 1n.
//!
//! The arithmetic here is exact in `i128`; a value outside it, or an exponent beyond the
//! suffix table (which Go prints without a suffix), gives `None`: callers keep the string
//! as written.

/// How a quantity is printed (Go's `resource.Format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    DecimalSI,
    BinarySI,
    DecimalExponent,
}

/// The string Go writes for the quantity `s` decodes to, or `None` when Go would
/// reject it (or it is beyond the exact arithmetic here).
pub fn canonical(s: &str) -> Option<String> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if s == "0" {
        return Some("0".into());
    }
    let q = parse(s)?;
    let (base, exponent, format) = interpret(q.suffix)?;

    // Go's fast path: an int64 amount with a decimal scale of at least -9; the string
    // as written is kept when it looks canonical.
    let (mut scale, mantissa, precision) = match format {
        Format::DecimalSI | Format::DecimalExponent => {
            (exponent, 1i64, 18 - (q.num.len() + q.denom.len()) as i32)
        }
        Format::BinarySI if exponent >= 0 && q.denom.is_empty() => {
            let mantissa = 1i64.checked_shl(exponent as u32)?;
            let precision = 15 - q.num.len() as i32 - ((exponent as f32) * 3.0 / 10.0) as i32 - 1;
            (0, mantissa, precision)
        }
        Format::BinarySI => (0, 1, -1),
    };
    if precision >= 0 {
        scale -= q.denom.len() as i32;
        if scale >= -9 {
            let shifted = format!("{}{}", q.num, q.denom);
            let value: i64 = shifted.parse().ok()?;
            if let Some(mut result) = value.checked_mul(mantissa) {
                if !q.positive {
                    result = -result;
                }
                let keep = match format {
                    Format::BinarySI => exponent % 10 == 0 && value & 0x07 != 0,
                    _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
                };
                if keep {
                    return Some(s.to_string());
                }
                return print(i128::from(result), scale, format);
            }
        }
    }
    // The general path: the exact decimal value, rounded up to 1n.
    let digits: i128 = format!("{}{}", q.num, q.denom).parse().ok()?;
    let (mut m, mut e) = match base {
        10 => (digits, exponent - q.denom.len() as i32),
        _ => (
            digits.checked_mul(1i128.checked_shl(exponent as u32)?)?,
            -(q.denom.len() as i32),
        ),
    };
    if m != 0 && e < -9 {
        let divisor = pow10(-9 - e)?;
        m = m.div_euclid(divisor) + i128::from(m % divisor != 0);
        e = -9;
    }
    let mut format = format;
    if format == Format::BinarySI {
        // Capped at the largest int64 (Go's maxAllowed).
        let max = scaled(i128::from(i64::MAX), -e)?;
        if m > max {
            m = max;
        }
        if m != 0 && m < pow10(-e.min(0))? {
            format = Format::DecimalSI;
        }
    }
    if !q.positive {
        m = -m;
    }
    print(m, e, format)
}

struct Parsed<'a> {
    positive: bool,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// Go's `parseQuantityString`: sign, integer digits (leading zeros dropped), optional
/// fraction, suffix.
fn parse(s: &str) -> Option<Parsed<'_>> {
    let b = s.as_bytes();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    while pos < b.len() && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= b.len() {
        return Some(Parsed {
            positive,
            num: "0",
            denom: "",
            suffix: "",
        });
    }
    let start = pos;
    while pos < b.len() && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = if pos == start { "0" } else { &s[start..pos] };
    let mut denom = "";
    if pos < b.len() && b[pos] == b'.' {
        pos += 1;
        let start = pos;
        while pos < b.len() && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[start..pos];
    }
    let suffix_start = pos;
    while pos < b.len() && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < b.len() && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < b.len() && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < b.len() {
        return None;
    }
    Some(Parsed {
        positive,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// Go's `suffixer.interpret`: base, exponent, format.
fn interpret(suffix: &str) -> Option<(i32, i32, Format)> {
    let decimal = |e| Some((10, e, Format::DecimalSI));
    let binary = |e| Some((2, e, Format::BinarySI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let rest = suffix.strip_prefix(['e', 'E'])?;
            let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let e: i32 = rest.parse().ok()?;
            Some((10, e, Format::DecimalExponent))
        }
    }
}

fn pow10(n: i32) -> Option<i128> {
    10i128.checked_pow(u32::try_from(n).ok()?)
}

/// `m × 10^n` for n ≥ 0.
fn scaled(m: i128, n: i32) -> Option<i128> {
    if n <= 0 {
        Some(m)
    } else {
        m.checked_mul(pow10(n)?)
    }
}

/// Go's `CanonicalizeBytes` of the value `m × 10^e`.
fn print(m: i128, e: i32, format: Format) -> Option<String> {
    if m == 0 {
        return Some("0".into());
    }
    let mut format = format;
    if format == Format::BinarySI {
        let one_k = scaled(1024, -e)?;
        let is_integer = e >= 0 || m % pow10(-e)? == 0;
        if -one_k < m && m < one_k || !is_integer {
            format = Format::DecimalSI;
        } else {
            let mut amount = if e >= 0 {
                scaled(m, e)?
            } else {
                m / pow10(-e)?
            };
            let mut times = 0;
            while amount.abs() >= 1024 && amount % 1024 == 0 {
                amount /= 1024;
                times += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].get(times)?;
            return Some(format!("{amount}{suffix}"));
        }
    }
    let (mut amount, mut exponent) = (m, e);
    while amount.abs() >= 10 && amount % 10 == 0 {
        amount /= 10;
        exponent += 1;
    }
    while exponent % 3 != 0 {
        amount = amount.checked_mul(10)?;
        exponent -= 1;
    }
    let suffix = match format {
        Format::DecimalExponent if exponent == 0 => String::new(),
        Format::DecimalExponent => format!("e{exponent}"),
        _ => match exponent {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            0 => "",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            18 => "E",
            _ => return None,
        }
        .to_string(),
    };
    Some(format!("{amount}{suffix}"))
}

/// The quantity rounded up to a multiple of 1m, as Go's `SetDefaults_ResourceList`
/// stores container resources (`Quantity.RoundUp(-3)`), then written canonically.
/// `None` when it does not parse.
pub fn round_up_to_milli(s: &str) -> Option<String> {
    let c = canonical(s)?;
    let (m, e, format) = value_of(&c)?;
    if e >= -3 {
        return Some(c);
    }
    // Away from zero, as Go's Quantity.RoundUp.
    let divisor = pow10(-3 - e)?;
    let magnitude = m.abs() / divisor + i128::from(m.abs() % divisor != 0);
    print(m.signum() * magnitude, -3, format)
}

/// The exact value of a canonical quantity string: `m × 10^e` and its format.
fn value_of(c: &str) -> Option<(i128, i32, Format)> {
    let q = parse(c)?;
    let (base, exponent, format) = interpret(q.suffix)?;
    let digits: i128 = format!("{}{}", q.num, q.denom).parse().ok()?;
    let (mut m, e) = match base {
        10 => (digits, exponent - q.denom.len() as i32),
        _ => (
            digits.checked_mul(1i128.checked_shl(exponent as u32)?)?,
            -(q.denom.len() as i32),
        ),
    };
    if !q.positive {
        m = -m;
    }
    Some((m, e, format))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Go writes for each input of tests/parity/inputs.json (`make parity-fixtures`).
    #[test]
    fn canonical_forms_and_milli_rounding_match_upstream() {
        let expected: serde_json::Value =
            serde_json::from_str(include_str!("../../../../tests/parity/expected.json")).unwrap();
        let cases = expected["quantities"].as_array().unwrap();
        assert!(cases.len() > 50);
        for case in cases {
            let input = case["in"].as_str().unwrap();
            let want =
                |key: &str| Some(case[key].as_str().unwrap().to_string()).filter(|s| !s.is_empty());
            assert_eq!(canonical(input), want("canonical"), "canonical({input:?})");
            assert_eq!(
                round_up_to_milli(input),
                want("milli"),
                "round_up_to_milli({input:?})"
            );
        }
    }

    #[test]
    fn rounds_up_to_milli_like_the_container_defaults() {
        assert_eq!(round_up_to_milli("100u").as_deref(), Some("1m"));
        assert_eq!(round_up_to_milli("1500u").as_deref(), Some("2m"));
        assert_eq!(round_up_to_milli("5n").as_deref(), Some("1m"));
        assert_eq!(round_up_to_milli("0.5").as_deref(), Some("500m"));
        assert_eq!(round_up_to_milli("1Gi").as_deref(), Some("1Gi"));
        assert_eq!(round_up_to_milli("2000m").as_deref(), Some("2"));
    }
}
