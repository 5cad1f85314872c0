//! Shared test support and the cross-module tests: seed scenarios and properties.

pub(crate) mod pods;
mod properties;
mod scenarios;
