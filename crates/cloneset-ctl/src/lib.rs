//! The CloneSet controller.

pub mod plan;
