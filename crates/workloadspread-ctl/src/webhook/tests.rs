//! Webhook tests.
