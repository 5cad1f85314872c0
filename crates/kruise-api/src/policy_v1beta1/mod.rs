//! `policy.kruise.io/v1beta1` kinds: the v1beta1 form of PodUnavailableBudget (stored as
//! v1alpha1, converted by pub-ctl's conversion webhook; see [`crate::conversion::podunavailablebudget`]).

pub mod podunavailablebudget;

pub use podunavailablebudget::*;
