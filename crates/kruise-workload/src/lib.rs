//! What the workload controllers (CloneSet, Advanced StatefulSet, Advanced DaemonSet)
//! share: revisions and history, partition/surge/unavailable arithmetic, expectations,
//! and Pod/PVC writes with events.

pub mod arithmetic;
pub mod control;
pub mod expectations;
pub mod pod_defaults;
pub mod revision;

pub use control::{PodControl, slow_start};
pub use expectations::{Expectations, Expected, Observed};
