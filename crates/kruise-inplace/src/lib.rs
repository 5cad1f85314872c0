//! In-place update of Pods (CloneSet, Advanced StatefulSet, Advanced DaemonSet, SidecarSet).
//!
//! - [`diff`]: given the revision data a Pod was created from and the target revision's,
//!   decide whether the change can go in place (only template metadata, container images,
//!   and containers whose env reads changed metadata) and what to change.
//! - [`start_update`]: the writes that start an update: `InPlaceUpdateReady=False` (status),
//!   then one patch with labels, annotations, the state annotation and the new images —
//!   or, with a grace period, the pending update parked in an annotation.
//! - [`refresh`]: what a later reconcile does: apply a parked update once its grace period
//!   is over, start the next container batch (launch priority), and flip
//!   `InPlaceUpdateReady` back to True once the kubelet reports the new containers.
//!
//! - [`resources`]: in-place vertical scaling (gate `InPlaceWorkloadVerticalScaling`):
//!   replaced cpu/memory requests and limits go through the Pod `resize` subresource
//!   ([`PodWrites::resize_patch`]), and the update completes once the kubelet reports them.
//!
//! Writes per Pod for a plain image update: 3 (condition False, spec patch, condition True).

pub mod containerhash;
mod diff;
pub mod envhash;
pub mod resources;
mod update;

pub use diff::{
    DiffOptions, InPlaceOnlyViolation, MetadataChanges, NotInPlace, UpdateSpec, diff,
    in_place_only_violation,
};
pub use update::{
    PodWrites, RefreshAction, container_priorities, inplace_state, is_update_completed,
    metadata_and_images_patch, pending_grace, refresh, start_update,
};
