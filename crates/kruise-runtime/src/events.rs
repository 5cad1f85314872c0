//! Kubernetes Events, reported as the controller (`reportingController: cloneset-controller`).
//!
//! Publishing happens on a background task fed by a bounded queue, so a reconcile never
//! waits for an Event write; if the queue is full (the apiserver is struggling) the
//! Event is dropped and counted, never the reconcile.
//!
//! Events share the controller's client and so its QPS budget with the Pod writes. Like
//! client-go's recorder (what upstream OpenKruise uses), each object may have a burst of
//! [`SPAM_BURST`] Events and then one per [`SPAM_REFILL`]: a CloneSet scaling to 1000
//! Pods reports its first 25 creations, not 1000 (which would cost 33 s of a 30-QPS
//! budget).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;

const QUEUE: usize = 4096;

/// Events one object may have at once (client-go's `EventSourceObjectSpamFilter`).
pub const SPAM_BURST: f64 = 25.0;
/// Then one Event per this long, per object.
pub const SPAM_REFILL: Duration = Duration::from_secs(300);
/// Objects tracked before the idle ones are forgotten.
const SPAM_OBJECTS: usize = 4096;

/// A token bucket per object: `allow` spends one token, refilled at one per
/// [`SPAM_REFILL`] up to [`SPAM_BURST`]. An object whose bucket is full again is the
/// same as one never seen, so those entries are dropped when the map grows.
#[derive(Debug, Default)]
pub struct SpamFilter {
    buckets: HashMap<String, (f64, Instant)>,
}

impl SpamFilter {
    pub fn allow(&mut self, object: &str, now: Instant) -> bool {
        if self.buckets.len() >= SPAM_OBJECTS {
            self.buckets
                .retain(|_, (tokens, at)| refilled(*tokens, *at, now) < SPAM_BURST);
        }
        let (tokens, at) = self
            .buckets
            .entry(object.to_string())
            .or_insert((SPAM_BURST, now));
        *tokens = refilled(*tokens, *at, now);
        *at = now;
        if *tokens < 1.0 {
            return false;
        }
        *tokens -= 1.0;
        true
    }
}

fn refilled(tokens: f64, at: Instant, now: Instant) -> f64 {
    let earned = now.saturating_duration_since(at).as_secs_f64() / SPAM_REFILL.as_secs_f64();
    (tokens + earned).min(SPAM_BURST)
}

/// Sends Events for one controller.
#[derive(Clone)]
pub struct Events {
    tx: mpsc::Sender<(Event, ObjectReference)>,
    spam: Arc<Mutex<SpamFilter>>,
}

impl Events {
    /// Starts the publisher for `controller` (e.g. `cloneset-controller`).
    pub fn new(client: Client, controller: &str) -> Self {
        let instance = std::env::var("POD_NAME")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok());
        let recorder = Recorder::new(
            client,
            Reporter {
                controller: controller.to_string(),
                instance,
            },
        );
        let (tx, mut rx) = mpsc::channel::<(Event, ObjectReference)>(QUEUE);
        tokio::spawn(async move {
            while let Some((event, reference)) = rx.recv().await {
                if let Err(err) = recorder.publish(&event, &reference).await {
                    tracing::debug!(%err, reason = %event.reason, "could not publish event");
                }
            }
        });
        Events {
            tx,
            spam: Arc::default(),
        }
    }

    /// A `Normal` event.
    pub fn normal(&self, regarding: &ObjectReference, reason: &str, note: impl Into<String>) {
        self.send(EventType::Normal, regarding, reason, note.into());
    }

    /// A `Warning` event.
    pub fn warning(&self, regarding: &ObjectReference, reason: &str, note: impl Into<String>) {
        self.send(EventType::Warning, regarding, reason, note.into());
    }

    fn send(&self, type_: EventType, regarding: &ObjectReference, reason: &str, note: String) {
        let object = regarding.uid.clone().unwrap_or_else(|| {
            let field = |f: &Option<String>| f.clone().unwrap_or_default();
            let (kind, ns, name) = (&regarding.kind, &regarding.namespace, &regarding.name);
            format!("{}/{}/{}", field(kind), field(ns), field(name))
        });
        let allowed = self
            .spam
            .lock()
            .map(|mut filter| filter.allow(&object, Instant::now()))
            .unwrap_or(true);
        if !allowed {
            tracing::debug!(%reason, %object, "event over the per-object budget; dropped");
            return;
        }
        // kube's recorder folds events with the same (type, reason, action, object) into
        // one series. Upstream (client-go) folds only identical messages, so `kubectl
        // describe` lists "succeed to create pod a", "… b", "… c" separately but shows a
        // repeated "limit: 0" once with a count. The message as the action gives the same.
        let action: String = note.chars().take(128).collect();
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action,
            secondary: None,
        };
        if self.tx.try_send((event, regarding.clone())).is_err() {
            tracing::warn!(%reason, "event queue full; event dropped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_gets_a_burst_then_one_event_per_refill() {
        let mut filter = SpamFilter::default();
        let start = Instant::now();
        let allowed = (0..100).filter(|_| filter.allow("cs", start)).count();
        assert_eq!(allowed, 25);
        assert!(!filter.allow("cs", start + SPAM_REFILL / 2));
        assert!(filter.allow("cs", start + SPAM_REFILL));
        assert!(!filter.allow("cs", start + SPAM_REFILL));
        // Other objects have their own budget.
        assert!(filter.allow("other", start));
        // A long quiet spell refills the whole burst, no more.
        let later = start + SPAM_REFILL * 1000;
        assert_eq!((0..100).filter(|_| filter.allow("cs", later)).count(), 25);
    }

    #[test]
    fn idle_objects_are_forgotten_when_the_map_is_full() {
        let mut filter = SpamFilter::default();
        let start = Instant::now();
        for i in 0..SPAM_OBJECTS {
            filter.allow(&format!("o{i}"), start);
        }
        assert_eq!(filter.buckets.len(), SPAM_OBJECTS);
        // Long enough for every bucket to be full again: all forgotten but the new one.
        let later = start + SPAM_REFILL * 25;
        assert!(filter.allow("new", later));
        assert_eq!(filter.buckets.len(), 1);
    }
}
