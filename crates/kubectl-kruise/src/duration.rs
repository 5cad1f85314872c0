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

/// An age as kubectl prints it (apimachinery's `duration.HumanDuration`): `45s`, `3m20s`,
/// `2h5m`, `3d4h`, `2y30d`; `<invalid>` for a time more than a second in the future (a
/// skewed clock).
pub fn human(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let seconds = seconds.max(0);
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return with_rest(minutes, "m", seconds % 60, "s");
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        return with_rest(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return with_rest(days, "d", hours % 24, "h");
    }
    if days < 365 * 2 {
        return format!("{days}d");
    }
    if days < 365 * 8 {
        return with_rest(days / 365, "y", days % 365, "d");
    }
    format!("{}y", days / 365)
}

/// `3m20s`, or `3m` when the rest is zero.
fn with_rest(big: i64, big_unit: &str, rest: i64, rest_unit: &str) -> String {
    if rest == 0 {
        format!("{big}{big_unit}")
    } else {
        format!("{big}{big_unit}{rest}{rest_unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_as_kubectl_prints_them() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (200, "3m20s"),
            (600, "10m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (47 * 3600, "47h"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (8 * 86400, "8d"),
            (729 * 86400, "729d"),
            (730 * 86400 + 30 * 86400, "2y30d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (seconds, want) in cases {
            assert_eq!(human(seconds), want, "{seconds}");
        }
    }

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
