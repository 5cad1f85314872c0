//! The pure part of a reconcile: from the UD, its update revision and the subset workloads it owns,
//! decide the allocation, the partitions and the minimal writes (as upstream's `Reconcile` and
//! `manageSubsets`, openkruise/kruise v1.9.0 pkg/controller/uniteddeployment), and compute the
//! status ([`status`]).

pub mod adaptive;
pub mod allocation;
mod condition;
pub mod reserve;
pub mod status;
pub mod workload;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps_v1alpha1::UnitedDeployment;
use serde_json::{Value, json};

pub use adaptive::Schedulability;

pub use allocation::AllocationError;
pub use workload::{Observed, WorkloadKind};

/// What the plan reads.
pub struct World<'a> {
    pub ud: &'a UnitedDeployment,
    /// The update revision's name (`<ud>-<hash>`).
    pub revision: &'a str,
    /// Every workload the UD controls, of any of the four kinds.
    pub workloads: Vec<&'a Observed>,
    /// The UD's Pods (matching its selector): pending ones make a subset unschedulable
    /// under the Adaptive strategy.
    pub pods: Vec<&'a Pod>,
    pub now: jiff::Timestamp,
}

/// A workload by kind and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WorkloadRef {
    pub kind: WorkloadKind,
    pub name: String,
}

impl WorkloadRef {
    fn of(w: &Observed) -> Self {
        WorkloadRef {
            kind: w.kind,
            name: w.name().to_string(),
        }
    }
}

/// Why a workload is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteReason {
    /// Its subset is no longer in the spec (renamed or removed), or it has none.
    SubsetRemoved,
    /// Another workload of the same subset is kept.
    Duplicate,
    /// The template's kind changed.
    OtherKind,
}

/// One write to a subset workload.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Create the subset's workload (the full object, with generateName).
    Create { subset: String, object: Value },
    /// Write the whole object over the workload: its revision or patch changed.
    Replace {
        subset: String,
        workload: WorkloadRef,
        object: Value,
    },
    /// Merge-patch replicas and partition only.
    Scale {
        subset: String,
        workload: WorkloadRef,
        patch: Value,
    },
    Delete {
        workload: WorkloadRef,
        reason: DeleteReason,
    },
}

/// The plan's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// Replicas per subset, or why they cannot be split (then nothing but deletions of
    /// removed subsets and other kinds is written).
    pub allocation: Result<BTreeMap<String, i32>, AllocationError>,
    /// Partition per subset (empty when the allocation failed).
    pub partitions: BTreeMap<String, i32>,
    pub writes: Vec<Write>,
    /// Adaptive: the subsets' `Schedulable` conditions and when to look again; with
    /// `reserveUnschedulablePods` also the reserved Pods and the labels to write.
    pub schedulability: Schedulability,
}

/// The maxUnavailable a write under `reserveUnschedulablePods` carries.
enum Override {
    /// A subset with reserved Pods: this many may be unavailable.
    Unavailable(i32),
    /// Any other subset: the template's value (`Null`: unset).
    Template(Value),
}

/// Whether a workload is of the template's kind, at whichever version it was read (a
/// CloneSet read at v1alpha1 belongs to a v1beta1-shaped template too).
fn of_template_kind(w: &Observed, kind: Option<WorkloadKind>) -> bool {
    kind.is_some_and(|k| k.same_objects(w.kind))
}

/// The workloads to keep, one per subset of the spec: the oldest live one of the
/// template's kind (then by name).
pub fn kept_workloads<'a>(world: &World<'a>) -> BTreeMap<String, &'a Observed> {
    let kind = WorkloadKind::of(&world.ud.spec.template);
    let mut kept: BTreeMap<String, &Observed> = BTreeMap::new();
    let mut candidates: Vec<&Observed> = world
        .workloads
        .iter()
        .copied()
        .filter(|w| of_template_kind(w, kind) && !w.is_deleting())
        .filter(|w| w.subset().is_some_and(|s| in_spec(world.ud, s)))
        .collect();
    candidates.sort_by(|a, b| {
        (&a.meta.creation_timestamp.as_ref().map(|t| t.0), a.name())
            .cmp(&(&b.meta.creation_timestamp.as_ref().map(|t| t.0), b.name()))
    });
    for w in candidates {
        if let Some(subset) = w.subset() {
            kept.entry(subset.to_string()).or_insert(w);
        }
    }
    kept
}

fn in_spec(ud: &UnitedDeployment, subset: &str) -> bool {
    ud.spec.topology.subsets.iter().any(|s| s.name == subset)
}

/// Decides the allocation and the writes.
pub fn plan(world: &World<'_>) -> Decision {
    let ud = world.ud;
    let kind = WorkloadKind::of(&ud.spec.template);
    let kept = kept_workloads(world);
    let mut writes = Vec::new();

    for w in world.workloads.iter().filter(|w| !w.is_deleting()) {
        let reason = if !of_template_kind(w, kind) {
            DeleteReason::OtherKind
        } else if !w.subset().is_some_and(|s| in_spec(ud, s)) {
            DeleteReason::SubsetRemoved
        } else if w
            .subset()
            .and_then(|s| kept.get(s))
            .is_some_and(|k| k.name() != w.name())
        {
            DeleteReason::Duplicate
        } else {
            continue;
        };
        writes.push(Write::Delete {
            workload: WorkloadRef::of(w),
            reason,
        });
    }

    let reserving = ud
        .spec
        .topology
        .schedule_strategy
        .should_reserve_unschedulable_pods();
    let (mut schedulability, allocation) = if reserving {
        let schedulability =
            reserve::schedulability(ud, &kept, &world.pods, world.revision, world.now);
        let subsets = kept
            .iter()
            .map(|(s, w)| {
                let r = schedulability
                    .reservations
                    .get(s)
                    .copied()
                    .unwrap_or_default();
                let state = allocation::Reserving {
                    replicas: w.replicas,
                    reserved: r.reserved,
                    marked: r.marked,
                };
                (s.clone(), state)
            })
            .collect();
        let allocation = allocation::allocate_reserving(&ud.spec, &subsets);
        (schedulability, allocation)
    } else {
        let current: BTreeMap<String, i32> =
            kept.iter().map(|(s, w)| (s.clone(), w.replicas)).collect();
        let schedulability = adaptive::schedulability(ud, &kept, &world.pods, world.now);
        let held = allocation::Held {
            ready: kept
                .iter()
                .map(|(s, w)| (s.clone(), w.ready_replicas))
                .collect(),
            unschedulable: schedulability.unschedulable.clone(),
        };
        let allocation = allocation::allocate_adaptive(&ud.spec, &current, &held);
        (schedulability, allocation)
    };
    if let (true, Ok(replicas)) = (reserving, &allocation) {
        reserve::after_allocation(&mut schedulability, &kept, replicas, world.now);
    }
    let (Ok(replicas), Some(kind)) = (&allocation, kind) else {
        return Decision {
            allocation,
            partitions: BTreeMap::new(),
            writes,
            schedulability,
        };
    };
    let partitions = allocation::partitions(&ud.spec, replicas);

    for subset in &ud.spec.topology.subsets {
        let name = subset.name.clone();
        let want_replicas = replicas.get(&name).copied().unwrap_or(0);
        let want_partition = partitions.get(&name).copied().unwrap_or(0);
        let build = workload::Build {
            ud,
            kind,
            subset,
            revision: world.revision,
            replicas: want_replicas,
            partition: want_partition,
        };
        let Some(mut object) = workload::desired(&build) else {
            continue;
        };
        // Reservation: the workload of a subset with reserved Pods may have them all
        // unavailable at once, so an update replaces its pending Pods; any other write
        // gives the template's value back.
        let max_unavailable = reserving
            .then(|| workload::max_unavailable_of(kind, &object))
            .flatten()
            .map(
                |template| match (kept.get(&name), schedulability.reservations.get(&name)) {
                    (Some(w), Some(r)) if r.reserved > 0 => Override::Unavailable(
                        (w.replicas - w.ready_replicas + r.update_timeouts).max(1),
                    ),
                    _ => Override::Template(template),
                },
            );
        let Some(existing) = kept.get(&name) else {
            writes.push(Write::Create {
                subset: name,
                object,
            });
            continue;
        };
        // Written at the version the object or patch is built for (the template's kind),
        // whichever the workload was read at.
        let target = WorkloadRef {
            kind,
            name: existing.name().to_string(),
        };
        let stale = existing.revision() != Some(world.revision)
            || existing.patch() != workload::patch_annotation(subset).as_deref();
        if stale {
            if let Some(Override::Unavailable(n)) = &max_unavailable {
                workload::put_max_unavailable(kind, &mut object, json!(n));
            }
            writes.push(Write::Replace {
                subset: name,
                workload: target,
                object: workload::replacement(&existing.meta, &object),
            });
            continue;
        }
        // A kind without a partition (Deployment, OnDelete StatefulSet) has none to move.
        let partition = workload::partition_of(kind, &object);
        let partition_differs = partition.is_some_and(|p| existing.partition.unwrap_or(0) != p);
        if existing.replicas != want_replicas || partition_differs {
            let mut patch = workload::scale_patch(kind, want_replicas, partition);
            match max_unavailable {
                Some(Override::Unavailable(n)) => {
                    workload::put_max_unavailable(kind, &mut patch, json!(n));
                }
                Some(Override::Template(v)) => workload::put_max_unavailable(kind, &mut patch, v),
                None => {}
            }
            writes.push(Write::Scale {
                subset: name,
                workload: target,
                patch,
            });
        }
    }
    Decision {
        allocation,
        partitions,
        writes,
        schedulability,
    }
}

#[cfg(test)]
mod tests;
