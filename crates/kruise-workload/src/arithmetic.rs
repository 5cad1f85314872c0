//! Partition, maxUnavailable and maxSurge arithmetic shared by the workload controllers.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::intstr::{self, Amount, NotAPercentage, Rounding};

/// The default `updateStrategy.maxUnavailable` of CloneSet and Advanced DaemonSet.
pub fn default_max_unavailable() -> IntOrString {
    IntOrString::String("20%".into())
}

/// Partition replicas (Pods kept at the old revision), v1.2 rule included:
/// an integer is used as is; a percentage is `ceil(replicas * p / 100)`, and when that
/// equals `replicas` with `replicas > 1` and the value is not exactly `"100%"`, one less,
/// so that any partition below 100% updates at least one Pod. Clamped to `[0, replicas]`.
pub fn partition_replicas(
    partition: Option<&IntOrString>,
    replicas: i32,
) -> Result<i32, NotAPercentage> {
    let Some(partition) = partition else {
        return Ok(0);
    };
    let amount = Amount::parse(partition)?;
    let mut value = amount.scale(replicas, Rounding::Up);
    if amount.is_percent()
        && replicas > 1
        && value >= replicas
        && !matches!(partition, IntOrString::String(s) if s.trim() == "100%")
    {
        value = replicas - 1;
    }
    Ok(value.clamp(0, replicas.max(0)))
}

/// maxSurge scaled on replicas, rounding up (0 when unset).
pub fn max_surge(max_surge: Option<&IntOrString>, replicas: i32) -> Result<i32, NotAPercentage> {
    match max_surge {
        None => Ok(0),
        Some(v) => Ok(intstr::scaled_value(v, replicas, Rounding::Up)?.max(0)),
    }
}

/// updateStrategy.maxUnavailable scaled on replicas: rounding up when there is no surge,
/// down when there is (so surge + unavailable never exceeds what the user allowed).
pub fn max_unavailable(
    value: Option<&IntOrString>,
    replicas: i32,
    surge: i32,
) -> Result<i32, NotAPercentage> {
    let default = default_max_unavailable();
    let rounding = if surge == 0 {
        Rounding::Up
    } else {
        Rounding::Down
    };
    Ok(intstr::scaled_value_or(value, &default, replicas, rounding)?.max(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.into())
    }

    #[test]
    fn partition_follows_the_v1_2_rounding_rule() {
        assert_eq!(partition_replicas(None, 5), Ok(0));
        assert_eq!(partition_replicas(Some(&IntOrString::Int(3)), 5), Ok(3));
        assert_eq!(
            partition_replicas(Some(&IntOrString::Int(8)), 5),
            Ok(5),
            "clamped"
        );
        // 90% of 8 = 7.2 -> 8 = replicas -> 7: one Pod updates (expectedUpdatedReplicas 1).
        assert_eq!(partition_replicas(Some(&s("90%")), 8), Ok(7));
        assert_eq!(partition_replicas(Some(&s("99%")), 5), Ok(4));
        assert_eq!(
            partition_replicas(Some(&s("99%")), 1),
            Ok(1),
            "one replica: nothing updates"
        );
        assert_eq!(partition_replicas(Some(&s("100%")), 5), Ok(5));
        assert_eq!(partition_replicas(Some(&s("50%")), 5), Ok(3));
        assert_eq!(partition_replicas(Some(&s("0%")), 5), Ok(0));
        assert!(partition_replicas(Some(&s("abc")), 5).is_err());
    }

    #[test]
    fn unavailable_rounds_down_with_surge() {
        // 40%/30% on 5 -> U=2, S=2: with a surge, maxUnavailable rounds down (as
        // `calculateDiffsWithExpectation` in openkruise/kruise v1.9.0
        // pkg/controller/cloneset/sync/cloneset_sync_utils.go).
        let surge = max_surge(Some(&s("30%")), 5).unwrap();
        assert_eq!(surge, 2);
        assert_eq!(max_unavailable(Some(&s("40%")), 5, surge), Ok(2));
        assert_eq!(max_unavailable(Some(&s("40%")), 5, 0), Ok(2));
        assert_eq!(max_unavailable(Some(&s("30%")), 5, 0), Ok(2));
        assert_eq!(max_unavailable(Some(&s("30%")), 5, 1), Ok(1));
        // Default 20% of 4 -> 1.
        assert_eq!(max_unavailable(None, 4, 0), Ok(1));
    }

    proptest! {
        #[test]
        fn any_percent_below_100_updates_at_least_one_pod(p in 0u32..100, replicas in 2i32..500) {
            let partition = partition_replicas(Some(&s(&format!("{p}%"))), replicas).unwrap();
            prop_assert!(partition < replicas);
            prop_assert!(partition >= 0);
        }
    }
}
