//! `apps.kruise.io/v1alpha1` kinds.

pub mod advancedcronjob;
pub mod broadcastjob;
pub mod cloneset;
pub mod containerrecreaterequest;
pub mod daemonset;
pub mod ephemeraljob;
pub mod imagepulljob;
pub mod nodeimage;
pub mod persistentpodstate;
pub mod podprobemarker;
pub mod resourcedistribution;
pub mod sidecarset;
pub mod uniteddeployment;
pub mod workloadspread;

pub use advancedcronjob::*;
pub use broadcastjob::*;
pub use cloneset::*;
pub use containerrecreaterequest::*;
pub use daemonset::*;
pub use ephemeraljob::*;
pub use imagepulljob::*;
pub use nodeimage::*;
pub use persistentpodstate::*;
pub use podprobemarker::*;
pub use resourcedistribution::*;
pub use sidecarset::*;
pub use uniteddeployment::*;
pub use workloadspread::*;

pub(crate) fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}
