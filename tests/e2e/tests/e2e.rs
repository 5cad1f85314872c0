//! End-to-end tests on the real local control plane. One binary, one module per area.

mod cloneset;
mod smoke;
mod webhook;
