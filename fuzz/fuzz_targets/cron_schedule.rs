//! AdvancedCronJob schedules: `CRON_TZ=`/`TZ=` prefixes, cron parsing, zones, the next
//! run (`cronjob_ctl::plan::schedule`) and Go durations. Input: `schedule\ntimeZone`.
#![no_main]
use cronjob_ctl::plan::schedule::{self, Schedule};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (spec, zone) = match text.split_once('\n') {
        Some((s, z)) => (s, Some(z)),
        None => (text, None),
    };
    let _ = schedule::split_zone(spec);
    let _ = schedule::go_duration(spec);
    if let Some(zone) = zone {
        let _ = schedule::zone(zone);
    }
    if let Ok(parsed) = Schedule::parse(spec, zone) {
        let mut t = jiff::Timestamp::from_second(1_764_000_000).expect("a valid time");
        for _ in 0..3 {
            match parsed.next_after(t) {
                Some(next) => {
                    assert!(next > t, "{spec:?}: next {next} not after {t}");
                    t = next;
                }
                None => break,
            }
        }
    }
});
