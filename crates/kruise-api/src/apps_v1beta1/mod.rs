//! `apps.kruise.io/v1beta1` kinds: Advanced StatefulSet (stored as v1beta1), and the
//! v1beta1 forms of CloneSet, SidecarSet, Advanced DaemonSet, ResourceDistribution,
//! PersistentPodState, WorkloadSpread, UnitedDeployment and ContainerRecreateRequest (stored as v1alpha1,
//! converted by their controllers' conversion webhooks; see [`crate::conversion`]).

pub mod cloneset;
pub mod containerrecreaterequest;
pub mod daemonset;
pub mod persistentpodstate;
pub mod resourcedistribution;
pub mod sidecarset;
pub mod statefulset;
pub mod uniteddeployment;
pub mod workloadspread;

pub use statefulset::*;
