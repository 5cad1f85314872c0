//! Kubernetes Events, reported as the controller (`reportingController: cloneset-controller`).
//!
//! Publishing happens on a background task fed by a bounded queue, so a reconcile never
//! waits for an Event write; if the queue is full (the apiserver is struggling) the
//! Event is dropped and counted, never the reconcile.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;

const QUEUE: usize = 4096;

/// Sends Events for one controller.
#[derive(Clone)]
pub struct Events {
    tx: mpsc::Sender<(Event, ObjectReference)>,
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
        Events { tx }
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
