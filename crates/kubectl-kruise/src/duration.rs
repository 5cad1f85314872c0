//! Go-style durations for `--timeout` (`30s`, `5m`, `1h30m`, `0` for no limit), as kubectl
//! reads them.

use std::time::Duration;

/// `None` for zero (wait forever, kubectl's meaning of `--timeout=0`).
pub fn parse(s: &str) -> Result<Option<Duration>, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(None);
    }
    let mut total = 0f64;
    let mut rest = s;
    if rest.is_empty() {
        return Err("an empty duration".into());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("missing unit in duration {s:?}"))?;
        let (number, tail) = rest.split_at(digits);
        let value: f64 = number
            .parse()
            .map_err(|_| format!("invalid duration {s:?}"))?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let seconds = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(format!("unknown unit {unit:?} in duration {s:?}")),
        };
        total += value * seconds;
        rest = next;
    }
    Ok((total > 0.0).then(|| Duration::from_secs_f64(total)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse("30s").unwrap(), Some(Duration::from_secs(30)));
        assert_eq!(parse("1h30m").unwrap(), Some(Duration::from_secs(5400)));
        assert_eq!(parse("1.5s").unwrap(), Some(Duration::from_millis(1500)));
        assert_eq!(parse("0").unwrap(), None);
        assert_eq!(parse("0s").unwrap(), None);
        for bad in ["", "5", "5x", "m", "1h30"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
