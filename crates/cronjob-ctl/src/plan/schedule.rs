//! Cron schedules as upstream reads them (`robfig/cron` `ParseStandard`): five fields,
//! the nicknames `@yearly` … `@hourly`, `@every <duration>`, and an optional `TZ=` /
//! `CRON_TZ=` prefix; evaluated in a named IANA zone (`croner` on `jiff` time, so
//! daylight-saving gaps and folds follow the wall clock of that zone).

use std::str::FromStr;
use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// The message of a schedule that names its zone while `timeZone` is set too.
pub const TZ_IN_BOTH: &str = "cannot use both timeZone field and TZ or CRON_TZ in schedule";

/// A parsed schedule and the zone it is evaluated in.
#[derive(Clone, Debug)]
pub struct Schedule {
    kind: Kind,
    zone: TimeZone,
}

#[derive(Clone, Debug)]
enum Kind {
    Cron(Box<Cron>),
    /// `@every <duration>`: a fixed delay, whole seconds, at least one.
    Every(Duration),
}

/// Splits a `TZ=<zone>` / `CRON_TZ=<zone>` prefix off a schedule.
pub fn split_zone(schedule: &str) -> (Option<&str>, &str) {
    let s = schedule.trim();
    for prefix in ["TZ=", "CRON_TZ="] {
        if let Some(rest) = s.strip_prefix(prefix) {
            let (zone, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            return (Some(zone), rest.trim());
        }
    }
    (None, s)
}

/// The zone named `name` (IANA), as upstream loads it (`time.LoadLocation`): `UTC`
/// and the database's names; `Local` (and the empty name) is refused by validation but
/// means the controller's own zone here.
pub fn zone(name: &str) -> Result<TimeZone, String> {
    if name.is_empty() || name == "Local" {
        return Ok(TimeZone::system());
    }
    TimeZone::get(name).map_err(|_| format!("unknown time zone {name}"))
}

impl Schedule {
    /// Parses `schedule` evaluated in `time_zone` (the spec's `timeZone`; unset: the
    /// schedule's `TZ=` prefix, else the controller's zone). With `time_zone` set the
    /// schedule is read as `TZ=<time_zone> <schedule>` (a schedule with its own prefix
    /// is refused at admission).
    pub fn parse(schedule: &str, time_zone: Option<&str>) -> Result<Schedule, String> {
        let (prefix, rest) = split_zone(schedule);
        let zone = zone(time_zone.or(prefix).unwrap_or_default()).map_err(|e| {
            format!(
                "provided bad location {}: {e}",
                time_zone.or(prefix).unwrap_or_default()
            )
        })?;
        if rest.is_empty() {
            return Err("empty spec string".into());
        }
        let kind = if let Some(every) = rest.strip_prefix("@every ") {
            let d = go_duration(every.trim())
                .ok_or_else(|| format!("failed to parse duration {rest}"))?;
            Kind::Every(Duration::from_secs(d.as_secs().max(1)))
        } else {
            let pattern = if rest.eq_ignore_ascii_case("@midnight") {
                "@daily"
            } else {
                rest
            };
            if !pattern.starts_with('@') {
                let fields = pattern.split_whitespace().count();
                if fields != 5 {
                    return Err(format!(
                        "expected exactly 5 fields, found {fields}: [{}]",
                        pattern.split_whitespace().collect::<Vec<_>>().join(" ")
                    ));
                }
            }
            // robfig reads `0/10` as `0-59/10`: croner's "sloppy ranges".
            let parser = CronParser::builder()
                .seconds(Seconds::Disallowed)
                .year(Year::Disallowed)
                .sloppy_ranges(true)
                .build();
            Kind::Cron(Box::new(parser.parse(pattern).map_err(|e| e.to_string())?))
        };
        Ok(Schedule { kind, zone })
    }

    /// The first activation strictly after `t` (`None`: the pattern never fires again).
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        match &self.kind {
            Kind::Every(d) => {
                // robfig: next = t + delay, rounded down to the second.
                let secs = t.as_second() + i64::try_from(d.as_secs()).ok()?;
                Timestamp::from_second(secs).ok()
            }
            Kind::Cron(cron) => {
                let zoned = t.to_zoned(self.zone.clone());
                cron.find_next_occurrence(&zoned, false)
                    .ok()
                    .map(|z| z.timestamp())
            }
        }
    }
}

impl FromStr for Schedule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Schedule::parse(s, None)
    }
}

/// A Go `time.ParseDuration` string of non-negative `h`, `m`, `s`, `ms` parts (`1h30m`,
/// `90s`, `1.5h`).
pub fn go_duration(s: &str) -> Option<Duration> {
    if s.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(digits);
        let value: f64 = number.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "us" | "µs" => 0.000_001,
            "ns" => 0.000_000_001,
            _ => return None,
        };
        total += value * scale;
        rest = tail;
    }
    Some(Duration::from_secs_f64(total))
}
