//! How many Pods to create, delete and update this round (as `calculateDiffsWithExpectation` in
//! openkruise/kruise v1.9.0 pkg/controller/cloneset/sync/cloneset_sync_utils.go).

use kruise_api::appspub::LifecycleState;
use kruise_api::intstr::{self, NotAPercentage, Rounding};
use kruise_api::keys;
use kruise_workload::arithmetic;

use super::World;

/// The numbers one round works with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diffs {
    pub replicas: i32,
    pub partition: i32,
    pub max_surge: i32,
    pub max_unavailable: i32,
    /// `scaleStrategy.maxUnavailable` (i32::MAX when unset).
    pub scale_max_unavailable: i32,

    pub scale_up: i32,
    pub scale_up_old: i32,
    pub scale_up_limit: i32,
    pub scale_down: i32,
    pub scale_down_old: i32,
    pub delete_ready_limit: i32,
    pub use_surge: i32,
    pub use_surge_old: i32,
    /// > 0: update that many Pods to updateRevision; < 0: roll that many back.
    pub update: i32,
    pub update_max_unavailable: i32,
}

/// Pods counted by revision and state.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    total: i32,
    active: i32,
    pre_deleting: i32,
    to_delete: i32,
    unavailable: i32,
}

/// Computes the round's numbers. `as_update` decides which Pods count as new: the update
/// phase counts PreparingUpdate Pods as old, the scale phase as new when
/// `PreparingUpdateAsUpdate` is on.
pub fn diffs(world: &World, for_scaling: bool) -> Result<Diffs, NotAPercentage> {
    let cs = &world.cs.spec;
    let replicas = world.replicas();
    let partition =
        arithmetic::partition_replicas(cs.update_strategy.partition.as_ref(), replicas)?;
    let max_surge = if cs.update_strategy.paused {
        0
    } else {
        arithmetic::max_surge(cs.update_strategy.max_surge.as_ref(), replicas)?
    };
    let max_unavailable = arithmetic::max_unavailable(
        cs.update_strategy.max_unavailable.as_ref(),
        replicas,
        max_surge,
    )?;
    let scale_max_unavailable = match &cs.scale_strategy.max_unavailable {
        Some(v) => intstr::scaled_value(v, replicas, Rounding::Up)?,
        None => i32::MAX,
    };

    let (mut new, mut old) = (Counts::default(), Counts::default());
    for pod in &world.pods {
        let is_new = world.is_update_revision(pod)
            || (for_scaling
                && world.options.preparing_update_as_update
                && kruise_lifecycle::state(pod) == Some(LifecycleState::PreparingUpdate));
        let c = if is_new { &mut new } else { &mut old };
        c.total += 1;
        if kruise_lifecycle::state(pod) == Some(LifecycleState::PreparingDelete) {
            c.pre_deleting += 1;
            continue;
        }
        c.active += 1;
        if world.is_specified_delete(pod) {
            c.to_delete += 1;
        } else if !world.is_available(pod) {
            c.unavailable += 1;
        }
    }

    let mut d = Diffs {
        replicas,
        partition,
        max_surge,
        max_unavailable,
        scale_max_unavailable,
        ..Default::default()
    };
    let mut old_diff = old.active - partition;
    let mut new_diff = new.active - (replicas - partition);
    let total_unavailable = new.pre_deleting + old.pre_deleting + new.unavailable + old.unavailable;
    let same_revisions = world.update_revision_name() == world.current_revision_name();
    if same_revisions || !world.options.partition_rollback {
        old_diff = old_diff.max(0);
        new_diff = new_diff.min(0);
    }

    if max_surge > 0 {
        let to_delete = new.to_delete + old.to_delete;
        let (mut scale_surge, mut scale_surge_old) = (0, 0);
        if to_delete > 0 {
            scale_surge = ((total_unavailable + to_delete) - max_unavailable)
                .max(0)
                .min(to_delete);
            if scale_surge > new.to_delete {
                scale_surge_old = scale_surge - new.to_delete;
            }
        }
        let (mut update_surge, mut update_surge_old) = (0, 0);
        if (old_diff > 0 && new_diff < 0) || (old_diff < 0 && new_diff > 0) {
            if old_diff.abs() <= new_diff.abs() {
                update_surge = old_diff.abs();
                if old_diff < 0 {
                    update_surge_old = update_surge;
                }
            } else {
                update_surge = new_diff.abs();
                if new_diff > 0 {
                    update_surge_old = update_surge;
                }
            }
        }
        // Scaling and updating never happen in the same round; the larger need wins.
        if scale_surge >= update_surge {
            d.use_surge = max_surge.min(scale_surge);
            d.use_surge_old = d.use_surge.min(scale_surge_old);
        } else {
            d.use_surge = max_surge.min(update_surge);
            d.use_surge_old = d.use_surge.min(update_surge_old);
        }
    }

    let pods = world.pods.len() as i32;
    let exclude = world.options.exclude_preparing_delete
        || world
            .cs
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE))
            .is_some_and(|v| v == "true");
    let (current, current_old) = if exclude {
        (
            pods - old.pre_deleting - new.pre_deleting,
            old.total - old.pre_deleting,
        )
    } else {
        (pods, old.total)
    };
    let expected = replicas + d.use_surge;
    let expected_old = partition + d.use_surge_old;

    if expected - current > 0 {
        d.scale_up = expected - current;
        d.scale_up_old = (expected_old - current_old).max(0);
        d.scale_up_limit = d
            .scale_up
            .min((scale_max_unavailable.saturating_sub(total_unavailable)).max(0));
    }
    let down = current - old.to_delete - new.to_delete - expected;
    if down > 0 {
        d.scale_down = down;
        d.scale_down_old = (current_old - old.to_delete - expected_old).max(0);
    }
    if new.to_delete > 0 || old.to_delete > 0 || d.scale_down > 0 {
        d.delete_ready_limit = (max_unavailable + (pods - replicas) - total_unavailable).max(0);
    }
    d.update = if old_diff.abs() <= new_diff.abs() {
        old_diff
    } else {
        -new_diff
    };
    if d.update != 0 {
        d.update_max_unavailable = max_unavailable + pods - replicas;
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;

    #[test]
    fn fresh_cloneset_scales_up_to_replicas() {
        let f = Fixture::new(3);
        let d = diffs(&f.world(), true).unwrap();
        assert_eq!(
            (d.scale_up, d.scale_up_limit, d.scale_down, d.update),
            (3, 3, 0, 0)
        );
    }

    #[test]
    fn scale_strategy_max_unavailable_limits_scale_up() {
        // 0 -> 5 with scale maxUnavailable 2 -> 2 created.
        let mut f = Fixture::new(5);
        f.cs.spec.scale_strategy.max_unavailable = Some(int(2));
        assert_eq!(diffs(&f.world(), true).unwrap().scale_up_limit, 2);
        // 3 -> 6 with one unready Pod -> limit 1; with 2 unready -> 0.
        let mut f = Fixture::new(6);
        f.cs.spec.scale_strategy.max_unavailable = Some(int(1));
        f.cs.spec.scale_strategy.max_unavailable = Some(int(2));
        f.add_pods(2, Rev::Update, Ready::Yes);
        f.add_pods(1, Rev::Update, Ready::No);
        let d = diffs(&f.world(), true).unwrap();
        assert_eq!((d.scale_up, d.scale_up_limit), (3, 1));
        let mut f2 = Fixture::new(6);
        f2.cs.spec.scale_strategy.max_unavailable = Some(int(2));
        f2.add_pods(1, Rev::Update, Ready::Yes);
        f2.add_pods(2, Rev::Update, Ready::No);
        assert_eq!(diffs(&f2.world(), true).unwrap().scale_up_limit, 0);
    }

    #[test]
    fn partition_keeps_old_pods() {
        // The partition example of OpenKruise's documentation (CloneSet user manual): replicas 5,
        // partition 3 -> update 2.
        let mut f = Fixture::new(5);
        f.cs.spec.update_strategy.partition = Some(int(3));
        f.add_pods(5, Rev::Current, Ready::Yes);
        let d = diffs(&f.world(), false).unwrap();
        assert_eq!(d.update, 2);
        assert_eq!(d.partition, 3);
        // Default maxUnavailable 20% of 5 rounds up to 1: one at a time.
        assert_eq!(d.update_max_unavailable, 1);
    }

    #[test]
    fn surge_creates_extra_pods_before_updating() {
        // The maxSurge example of OpenKruise's documentation (CloneSet user manual): maxSurge 3
        // with a template change.
        let mut f = Fixture::new(5);
        f.cs.spec.update_strategy.max_surge = Some(int(3));
        f.add_pods(5, Rev::Current, Ready::Yes);
        let d = diffs(&f.world(), true).unwrap();
        assert_eq!(d.use_surge, 3);
        assert_eq!(d.scale_up, 3);
        assert_eq!(d.scale_up_old, 0, "surge Pods come from updateRevision");
    }

    #[test]
    fn paused_forces_surge_to_zero() {
        let mut f = Fixture::new(5);
        f.cs.spec.update_strategy.max_surge = Some(int(3));
        f.cs.spec.update_strategy.paused = true;
        f.add_pods(3, Rev::Current, Ready::Yes);
        let d = diffs(&f.world(), true).unwrap();
        assert_eq!(d.use_surge, 0);
        // Raising 3 -> 5 while paused creates 2 at updateRevision (partition 0).
        assert_eq!((d.scale_up, d.scale_up_old), (2, 0));
    }

    #[test]
    fn specified_delete_with_surge_creates_the_replacement_first() {
        // maxUnavailable 0, maxSurge 1, 5 ready Pods, one specified.
        let mut f = Fixture::new(5);
        f.cs.spec.update_strategy.max_unavailable = Some(int(0));
        f.cs.spec.update_strategy.max_surge = Some(int(1));
        f.add_pods(5, Rev::Update, Ready::Yes);
        f.mark_specified_delete(0);
        let d = diffs(&f.world(), true).unwrap();
        assert_eq!((d.use_surge, d.scale_up, d.delete_ready_limit), (1, 1, 0));
        // Once the replacement is available, the specified Pod may go.
        f.add_pods(1, Rev::Update, Ready::Yes);
        let d = diffs(&f.world(), true).unwrap();
        assert_eq!((d.scale_up, d.delete_ready_limit), (0, 1));
    }

    /// The specified-deletion examples of OpenKruise v0.9.0 release notes ("maxUnavailable and
    /// maxSurge also apply to specified deletion").
    #[test]
    fn replacement_style_follows_v0_9_release_notes() {
        // maxUnavailable 2, maxSurge 1, pod-a unavailable, pod-b specified: delete b at once.
        let mut f = Fixture::new(3);
        f.cs.spec.update_strategy.max_unavailable = Some(int(2));
        f.cs.spec.update_strategy.max_surge = Some(int(1));
        f.add_pods(1, Rev::Update, Ready::No);
        f.add_pods(2, Rev::Update, Ready::Yes);
        f.mark_specified_delete(1);
        let d = diffs(&f.world(), true).unwrap();
        assert_eq!(d.scale_up, 0, "no surge needed");
        assert_eq!(d.delete_ready_limit, 1);
        // maxUnavailable 1: create first.
        f.cs.spec.update_strategy.max_unavailable = Some(int(1));
        let d = diffs(&f.world(), true).unwrap();
        assert_eq!(d.scale_up, 1);
        assert_eq!(d.delete_ready_limit, 0);
    }

    #[test]
    fn rollback_needs_the_gate() {
        let mut f = Fixture::new(5);
        f.cs.spec.update_strategy.partition = Some(int(4));
        f.add_pods(3, Rev::Current, Ready::Yes);
        f.add_pods(2, Rev::Update, Ready::Yes);
        assert_eq!(diffs(&f.world(), false).unwrap().update, 0);
        f.options.partition_rollback = true;
        assert_eq!(diffs(&f.world(), false).unwrap().update, -1);
    }

    #[test]
    fn percent_partition_of_ninety_on_eight_updates_one() {
        let mut f = Fixture::new(8);
        f.cs.spec.update_strategy.partition = Some(string("90%"));
        f.add_pods(8, Rev::Current, Ready::Yes);
        assert_eq!(diffs(&f.world(), false).unwrap().update, 1);
    }
}
