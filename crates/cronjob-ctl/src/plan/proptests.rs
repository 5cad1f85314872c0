//! Properties of the schedule arithmetic and of the plan.

use jiff::{SignedDuration, Timestamp};
use kruise_api::apps_v1alpha1::ConcurrencyPolicy;
use proptest::prelude::*;

use super::schedule::Schedule;
use super::tests::{child, cron};
use super::*;

fn base() -> Timestamp {
    "2025-01-01T00:00:00Z".parse().unwrap()
}

proptest! {
    #[test]
    fn next_fire_is_strictly_later_and_matches_the_minute(
        minute in 0u32..60, step in 1u32..30, offset in 0i64..(400 * 86_400),
        zone in prop::sample::select(vec!["UTC", "America/New_York", "Europe/Berlin", "Asia/Shanghai", "Australia/Lord_Howe"]),
    ) {
        let s = Schedule::parse(&format!("{}/{step} * * * *", minute % step), Some(zone)).unwrap();
        let t = base() + SignedDuration::from_secs(offset);
        let n = s.next_after(t).unwrap();
        prop_assert!(n > t);
        prop_assert!(n.duration_since(t) <= SignedDuration::from_hours(2));
        prop_assert_eq!(n.as_second() % 60, 0);
        // Nothing fires in between.
        let again = s.next_after(t).unwrap();
        prop_assert_eq!(again, n);
    }

    #[test]
    fn missed_is_the_latest_tick_not_after_now(
        start in 0i64..86_400, elapsed in 0i64..6_000,
    ) {
        let s = Schedule::parse("*/1 * * * *", None).unwrap();
        let earliest = base() + SignedDuration::from_secs(start);
        let now = earliest + SignedDuration::from_secs(elapsed);
        match missed_and_next(&s, earliest, now) {
            Ok((missed, next)) => {
                let next = next.unwrap();
                prop_assert!(next > now);
                if let Some(m) = missed {
                    prop_assert!(m > earliest && m <= now);
                    prop_assert!(next.duration_since(m) == SignedDuration::from_mins(1));
                } else {
                    prop_assert!(next.duration_since(earliest) <= SignedDuration::from_mins(1) || earliest > now);
                }
            }
            Err(TooManyMissed) => prop_assert!(elapsed / 60 >= MAX_MISSED as i64),
        }
    }

    #[test]
    fn concurrency_policies_hold(policy in 0u8..3, actives in 0usize..3) {
        let p = [ConcurrencyPolicy::Allow, ConcurrencyPolicy::Forbid, ConcurrencyPolicy::Replace][usize::from(policy)];
        let c = cron("*/1 * * * *", |s| s.concurrency_policy = Some(p));
        let kids: Vec<Child> = (0..actives).map(|i| child(&format!("k{i}"), None, None, Some("2022-03-03T11:00:00Z"))).collect();
        let out = plan(&World { cron: &c, children: kids, now: "2022-03-03T11:01:05Z".parse().unwrap() });
        match p {
            ConcurrencyPolicy::Forbid if actives > 0 => prop_assert!(out.create.is_none()),
            ConcurrencyPolicy::Replace => {
                prop_assert!(out.create.is_some());
                prop_assert_eq!(out.delete.len(), actives);
            }
            _ => {
                prop_assert!(out.create.is_some());
                prop_assert!(out.delete.is_empty());
            }
        }
    }

    #[test]
    fn history_never_prunes_active_or_kept_children(
        finished in proptest::collection::vec(prop::option::of(any::<bool>()), 0..12),
        keep_ok in 0i32..4, keep_failed in 0i32..4,
    ) {
        let c = cron("*/1 * * * *", |s| {
            s.successful_jobs_history_limit = Some(keep_ok);
            s.failed_jobs_history_limit = Some(keep_failed);
        });
        let kids: Vec<Child> = finished.iter().enumerate()
            .map(|(i, f)| child(&format!("k{i:02}"), *f, Some(&format!("2022-03-03T11:{i:02}:00Z")), None))
            .collect();
        let pruned = history_to_prune(&c, &kids);
        let ok = finished.iter().filter(|f| **f == Some(true)).count();
        let failed = finished.iter().filter(|f| **f == Some(false)).count();
        prop_assert_eq!(pruned.len(), ok.saturating_sub(keep_ok as usize) + failed.saturating_sub(keep_failed as usize));
        for r in &pruned {
            let k = kids.iter().find(|k| k.reference.name == r.name).unwrap();
            prop_assert!(k.finished.is_some());
        }
    }
}
