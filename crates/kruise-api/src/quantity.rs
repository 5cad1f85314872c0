//! Kubernetes quantities (`resource.Quantity` strings) as numbers, for the controllers
//! that compare them: a PVC's storage, a sidecar's resource expressions.

/// A quantity in base units: `250m` → 0.25, `1Gi` → 1073741824, `1e3` → 1000,
/// `2E` → 2·10¹⁸ (exa, not an exponent: no digits follow it).
pub fn parse(s: &str) -> Result<f64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let (number, suffix) = match suffix.strip_prefix(['e', 'E']) {
        // An exponent, not the `E` (exa) suffix, when digits follow.
        Some(exp)
            if !exp.is_empty()
                && exp
                    .trim_start_matches(['+', '-'])
                    .chars()
                    .all(|c| c.is_ascii_digit()) =>
        {
            (s, "")
        }
        _ => (number, suffix),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a quantity"))?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        other => return Err(format!("{s:?}: unknown suffix {other:?}")),
    };
    Ok(value * factor)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn quantities_in_base_units() {
        assert_eq!(parse("250m").unwrap(), 0.25);
        assert_eq!(parse("2").unwrap(), 2.0);
        assert_eq!(parse("1.5").unwrap(), 1.5);
        assert_eq!(parse("100Mi").unwrap(), 100.0 * 1024.0 * 1024.0);
        assert_eq!(parse("1Gi").unwrap(), 1024f64.powi(3));
        assert_eq!(parse("1G").unwrap(), 1e9);
        assert_eq!(parse("1e3").unwrap(), 1000.0);
        assert_eq!(parse("2E").unwrap(), 2e18);
        assert!(parse("1Gi").unwrap() < parse("1100M").unwrap());
        assert!(parse("1Xi").is_err());
        assert!(parse("1Zi").is_err());
        assert!(parse("abc").is_err());
    }
}
