//! Per-controller reconcile metrics: count and duration by result, and queue depth
//! (objects triggered and not yet picked up by a worker).
//!
//! kube-runtime's scheduler does not expose its queue, so depth is tracked at the edges:
//! a trigger marks an object pending, the start of its reconcile unmarks it. Several
//! triggers for one object count once, as they do in the scheduler.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::metrics::Metrics;

#[derive(Clone)]
pub struct Instruments {
    metrics: Metrics,
    controller: String,
    pending: Arc<Mutex<HashSet<String>>>,
}

impl Instruments {
    pub fn new(metrics: Metrics, controller: &str) -> Self {
        Instruments {
            metrics,
            controller: controller.to_string(),
            pending: Default::default(),
        }
    }

    /// An object was triggered (a watch event mapped to it).
    pub fn triggered(&self, key: String) {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        pending.insert(key);
        self.metrics
            .queue_depth
            .with_label_values(&[&self.controller])
            .set(pending.len() as i64);
    }

    /// A worker picked the object up.
    pub fn started(&self, key: &str) {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        pending.remove(key);
        self.metrics
            .queue_depth
            .with_label_values(&[&self.controller])
            .set(pending.len() as i64);
    }

    /// The object is gone (deleted): the controller will never reconcile it, so it is
    /// no longer waiting. Without this a deleted object stayed in the depth for good.
    pub fn gone(&self, key: &str) {
        self.started(key);
    }

    /// A reconcile ended with `result` (`ok` or an error's metric label).
    pub fn finished(&self, result: &str, elapsed: Duration) {
        self.metrics
            .reconciles
            .with_label_values(&[&self.controller, result])
            .inc();
        self.metrics
            .reconcile_duration
            .with_label_values(&[&self.controller, result])
            .observe(elapsed.as_secs_f64());
    }
}

/// Per-object exponential backoff for failed reconciles: 100ms, 200ms, … capped at 5
/// minutes; a success resets it.
#[derive(Clone, Default)]
pub struct Backoff {
    failures: Arc<Mutex<std::collections::HashMap<String, u32>>>,
}

impl Backoff {
    pub fn failed(&self, key: &str) -> Duration {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = failures.entry(key.to_string()).or_insert(0);
        *n = n.saturating_add(1);
        let exp = (*n - 1).min(12);
        Duration::from_millis(100u64 << exp).min(Duration::from_secs(300))
    }

    pub fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_depth_counts_distinct_pending_objects() {
        let m = Metrics::new();
        let i = Instruments::new(m.clone(), "c");
        i.triggered("a".into());
        i.triggered("a".into());
        i.triggered("b".into());
        assert_eq!(m.queue_depth.with_label_values(&["c"]).get(), 2);
        i.started("a");
        assert_eq!(m.queue_depth.with_label_values(&["c"]).get(), 1);
        i.finished("ok", Duration::from_millis(3));
        assert_eq!(m.reconciles.with_label_values(&["c", "ok"]).get(), 1);
        // b is deleted before a worker picks it up: not waiting any more.
        i.gone("b");
        assert_eq!(m.queue_depth.with_label_values(&["c"]).get(), 0);
    }

    #[test]
    fn backoff_doubles_and_resets() {
        let b = Backoff::default();
        assert_eq!(b.failed("x"), Duration::from_millis(100));
        assert_eq!(b.failed("x"), Duration::from_millis(200));
        assert_eq!(b.failed("x"), Duration::from_millis(400));
        for _ in 0..20 {
            b.failed("x");
        }
        assert_eq!(b.failed("x"), Duration::from_secs(300));
        b.succeeded("x");
        assert_eq!(b.failed("x"), Duration::from_millis(100));
    }
}
