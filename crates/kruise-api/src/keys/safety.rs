//! PLACEHOLDER: filled in with the area's keys.
