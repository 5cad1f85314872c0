//! `apps.kruise.io/v1beta1` kinds.

pub mod statefulset;

pub use statefulset::*;
