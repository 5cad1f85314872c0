//! `policy.kruise.io/v1alpha1` kinds.

pub mod podunavailablebudget;

pub use podunavailablebudget::*;
