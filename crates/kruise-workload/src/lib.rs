//! What the workload controllers (CloneSet, Advanced StatefulSet, Advanced DaemonSet)
//! share: revisions and history, partition/surge/unavailable arithmetic, expectations,
//! and Pod/PVC writes with events.

pub mod action;
pub mod admission;
pub mod arithmetic;
pub mod control;
pub mod execute;
pub mod expectations;
pub mod history;
pub mod pod_defaults;
pub mod revision;

pub use action::{Action, Plan, Warning, min_duration};
pub use control::{PatchKind, PodControl, PodMessages, slow_start};
pub use execute::Writer;
pub use expectations::{Expectations, Expected, Observed};
