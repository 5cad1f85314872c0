//! Pod ranking shared by the workload controllers (CloneSet, Advanced StatefulSet,
//! Advanced DaemonSet): which Pod to delete first, which to update first, and the
//! `priorityStrategy` / `scatterStrategy` rules behind the update order.
//!
//! Everything here is pure: no client, no clock (callers pass `now`), no randomness.
//! Every sort is total — it ends on the Pod's name — so the same Pods in any input
//! order come out in the same order, which keeps plans reproducible and testable.
//!
//! - [`predicates`]: the basic facts (scheduled, phase, ready, available, cost, labels,
//!   revision, …), shared by every crate that reads Pods.
//! - [`deletion`]: scale-in order (CloneSet's `choosePodsToDelete`) with co-location ranks.
//! - [`update`]: update order (CloneSet's `SortUpdateIndexes`): default, priority, scatter,
//!   `PreparingUpdate` first.
//! - [`scatter`]: the scatter interleaving on its own.
//! - [`selector`]: label-selector matching and its string form.
//! - [`nodes`]: whether a Pod fits a node (selector, affinity, taints, unschedulable),
//!   and binding a Pod to one node.

pub mod deletion;
pub mod nodes;
pub mod predicates;
pub mod scatter;
pub mod selector;
pub mod update;

pub use deletion::{DeletionContext, sort_for_deletion};
pub use update::{
    UpdateOrderContext, ordered_value, sort_for_update, sort_for_update_among, weight_of,
};

#[cfg(test)]
mod tests;
