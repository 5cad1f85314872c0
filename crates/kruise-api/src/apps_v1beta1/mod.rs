//! `apps.kruise.io/v1beta1` kinds: Advanced StatefulSet (stored as v1beta1), and the
//! v1beta1 forms of CloneSet and SidecarSet (stored as v1alpha1, converted by their
//! controllers' conversion webhooks; see [`crate::conversion`]).

pub mod cloneset;
pub mod sidecarset;
pub mod statefulset;

pub use statefulset::*;
