//! End-to-end tests on the real local control plane. One binary, one module per area.

mod bench;
mod cloneset;
mod deploy;
mod sidecarset;
mod smoke;
mod statefulset;
mod webhook;
