//! What the workload controllers (CloneSet, Advanced StatefulSet, Advanced DaemonSet)
//! share: revisions and history, partition/surge/unavailable arithmetic, expectations,
//! Pod/PVC writes with events, the per-Pod steps of an update round (refresh, in place),
//! and image pre-download.

pub mod action;
pub mod admission;
pub mod arithmetic;
pub mod control;
pub mod execute;
pub mod expectations;
pub mod guard;
pub mod history;
pub mod pod_defaults;
pub mod predownload;
pub mod revision;
pub mod strategic;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod update;

pub use action::{Action, Plan, WRITES_PER_ROUND, Warning, min_duration};
pub use control::{PatchKind, PodControl, PodMessages, Written, bounded, slow_start};
pub use execute::{Executed, Writer};
pub use expectations::{Expectations, Expected, Observed};

/// The prune of a workload controller's Pod cache (CloneSet, Advanced StatefulSet,
/// Advanced DaemonSet): [`kruise_runtime::cache::prune`], and the view's placement
/// fields (`nodeSelector`, `tolerations`: every Pod has two default tolerations), which
/// only BroadcastJob's plan reads.
pub fn prune_pod(pod: &mut kruise_api::pod::Pod) {
    kruise_runtime::cache::prune(pod);
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_selector = None;
        spec.tolerations = None;
    }
}
