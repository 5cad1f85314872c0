//! The SidecarSet controller (being written).
