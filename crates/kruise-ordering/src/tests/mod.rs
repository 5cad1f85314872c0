//! Shared test support and the cross-module tests: documented scenarios and properties.

pub(crate) mod pods;
mod properties;
mod scenarios;
