//! The pull workers: one task per tag of the current version (as `realWorkerPool` and `pullWorker`
//! of openkruise/kruise v1.9.0 pkg/daemon/imagepuller/imagepuller_worker.go). Each worker records
//! its state in [`States`] and wakes the status writer on every change of phase, never per progress
//! tick.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ObjectReference, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps_v1alpha1::{ImagePullPhase, ImagePullPolicy, ImageTagStatus};
use kruise_api::keys;
use kruise_runtime::Events;
use kube::Api;
use tokio::sync::{Notify, Semaphore};
use tokio::task::AbortHandle;

use crate::auth;
use crate::auth::Credentials;
use crate::cri::Cri;
use crate::metrics::AgentMetrics;
use crate::plan::{self, PullTask, TagKey};

/// The workers' latest states, by tag.
pub type States = Arc<Mutex<BTreeMap<TagKey, ImageTagStatus>>>;

/// Starts and stops the pull workers.
pub struct Puller {
    pub cri: Cri,
    pub client: kube::Client,
    pub events: Events,
    pub metrics: AgentMetrics,
    /// The NodeImage the events are about.
    pub node_image: ObjectReference,
    pub states: States,
    pub changed: Arc<Notify>,
    /// Optional global cap on concurrent pulls.
    pub limit: Option<Arc<Semaphore>>,
    workers: Mutex<HashMap<TagKey, (i64, AbortHandle)>>,
}

impl Puller {
    pub fn new(
        cri: Cri,
        client: kube::Client,
        events: Events,
        metrics: AgentMetrics,
        node_image: ObjectReference,
        limit: Option<usize>,
    ) -> Arc<Self> {
        Arc::new(Puller {
            cri,
            client,
            events,
            metrics,
            node_image,
            states: Arc::default(),
            changed: Arc::default(),
            limit: limit
                .filter(|n| *n > 0)
                .map(|n| Arc::new(Semaphore::new(n))),
            workers: Mutex::default(),
        })
    }

    /// Makes the workers match `wanted` (the tags that still need a pull): a worker whose
    /// tag left the spec or changed version is stopped (and its state forgotten), a
    /// wanted tag without a worker of its version gets one.
    pub fn sync(self: &Arc<Self>, all: &[PullTask], wanted: &[PullTask]) {
        let current: HashMap<TagKey, i64> = all.iter().map(|t| (t.key(), t.version)).collect();
        let mut workers = self
            .workers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        workers.retain(|key, (version, handle)| {
            let keep = current.get(key) == Some(version);
            if !keep {
                handle.abort();
            }
            keep
        });
        self.states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|key, s| current.get(key) == Some(&s.version));
        for task in wanted {
            if workers.contains_key(&task.key()) {
                continue;
            }
            let this = self.clone();
            let worker = task.clone();
            let handle = tokio::spawn(async move { this.pull(worker).await }).abort_handle();
            workers.insert(task.key(), (task.version, handle));
        }
        self.metrics.workers.set(workers.len() as i64);
    }

    /// Stops every worker (shutdown).
    pub fn stop(&self) {
        for (_, (_, handle)) in self
            .workers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain()
        {
            handle.abort();
        }
    }

    fn record(&self, task: &PullTask, state: ImageTagStatus) {
        self.states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(task.key(), state);
        self.changed.notify_one();
    }

    async fn pull(self: Arc<Self>, task: PullTask) {
        let mut state = ImageTagStatus {
            tag: task.tag.clone(),
            phase: ImagePullPhase::Waiting,
            progress: 0,
            start_time: None,
            completion_time: None,
            version: task.version,
            image_id: String::new(),
            message: String::new(),
        };
        let _permit = match &self.limit {
            Some(limit) => {
                self.record(&task, state.clone());
                limit.clone().acquire_owned().await.ok()
            }
            None => None,
        };
        state.phase = ImagePullPhase::Pulling;
        state.start_time = Some(Time(Timestamp::now()));
        self.record(&task, state.clone());
        let started = Instant::now();
        let outcome = self.attempts(&task).await;
        state.completion_time = Some(Time(Timestamp::now()));
        let image = task.image();
        match outcome {
            Ok(id) => {
                state.phase = ImagePullPhase::Succeeded;
                state.progress = 100;
                state.image_id = format!("{}@{id}", task.name);
                self.metrics.pulls.with_label_values(&["succeeded"]).inc();
                let note = format!(
                    "Image {image} pulled on node {}, elapsed {:.1}s",
                    self.node_image.name.as_deref().unwrap_or_default(),
                    started.elapsed().as_secs_f64()
                );
                for target in self.targets(&task) {
                    self.events
                        .normal(&target, keys::EVENT_PULL_IMAGE_SUCCEED, note.clone());
                }
            }
            Err(message) => {
                state.phase = ImagePullPhase::Failed;
                state.message = message.clone();
                self.metrics.pulls.with_label_values(&["failed"]).inc();
                let note = format!(
                    "Image {image} failed to pull on node {}: {message}",
                    self.node_image.name.as_deref().unwrap_or_default()
                );
                for target in self.targets(&task) {
                    self.events
                        .warning(&target, keys::EVENT_PULL_IMAGE_FAILED, note.clone());
                }
            }
        }
        self.metrics
            .pull_seconds
            .observe(started.elapsed().as_secs_f64());
        tracing::info!(image = %task.image(), version = task.version, phase = %state.phase, message = %state.message, "pull finished");
        self.record(&task, state);
    }

    fn targets(&self, task: &PullTask) -> Vec<ObjectReference> {
        std::iter::once(self.node_image.clone())
            .chain(task.owners.iter().cloned())
            .collect()
    }

    /// Up to `backoffLimit + 1` attempts, each bounded by the timeout and the deadline;
    /// the image ID on success, otherwise the last error of a pull with a credential when
    /// there was one (the anonymous pull after it would only say "unauthorized"), else the
    /// last error.
    async fn attempts(&self, task: &PullTask) -> Result<String, String> {
        let image = task.image();
        if task.image_pull_policy == ImagePullPolicy::IfNotPresent {
            match self.cri.find_image(&image).await {
                Ok(Some(found)) => return Ok(found.id),
                Ok(None) => {}
                Err(e) => tracing::warn!(%image, error = %e, "ListImages failed; pulling"),
            }
        }
        let credentials = self.credentials(task).await;
        let mut last_error = String::from("pulling exceeds the activeDeadlineSeconds");
        let mut credential_error = None;
        for attempt in 0..=task.backoff_limit {
            if attempt > 0 {
                let wait = plan::backoff(attempt - 1);
                match plan::attempt_budget(wait, task.deadline, Timestamp::now()) {
                    Some(w) if w == wait => tokio::time::sleep(wait).await,
                    _ => break,
                }
            }
            // Each credential that matches the registry, then anonymous.
            for credential in credentials.iter().map(Some).chain([None]) {
                let Some(budget) =
                    plan::attempt_budget(task.timeout, task.deadline, Timestamp::now())
                else {
                    return Err(credential_error.unwrap_or(last_error));
                };
                let call = self.cri.pull_image(
                    &image,
                    credential,
                    sandbox_labels(task),
                    sandbox_annotations(task),
                );
                match tokio::time::timeout(budget, call).await {
                    Ok(Ok(id)) => return Ok(id),
                    Ok(Err(e)) => last_error = format!("Failed to pull image {image}: {e}"),
                    Err(_) => {
                        last_error = format!(
                            "Failed to pull image {image}: timed out after {}s",
                            budget.as_secs()
                        )
                    }
                }
                if credential.is_some() {
                    credential_error = Some(last_error.clone());
                }
                tracing::debug!(%image, attempt, error = %last_error, "pull attempt failed");
            }
        }
        Err(credential_error.unwrap_or(last_error))
    }

    /// The credentials of the tag's pull secrets that match its registry; a secret that
    /// cannot be read is skipped (the pull goes on with the others, then anonymously).
    async fn credentials(&self, task: &PullTask) -> Vec<Credentials> {
        let registry = kruise_api::image::ImageRef::parse(&task.name).registry_or_hub();
        let mut out = Vec::new();
        for reference in &task.pull_secrets {
            let api: Api<Secret> = Api::namespaced(self.client.clone(), &reference.namespace);
            match api.get_opt(&reference.name).await {
                Ok(Some(secret)) => {
                    let data: BTreeMap<String, Vec<u8>> = secret
                        .data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.0))
                        .collect();
                    out.extend(auth::credentials_for(&data, registry));
                }
                Ok(None) => tracing::warn!(secret = %reference, "pull secret not found"),
                Err(e) => tracing::warn!(secret = %reference, error = %e, "pull secret unreadable"),
            }
        }
        out
    }
}

/// The sandbox labels of a pull: the image's `sandboxConfig` plus
/// `apps.kruise.io/pulling-image-by: kruise-daemon`.
fn sandbox_labels(task: &PullTask) -> HashMap<String, String> {
    let mut labels: HashMap<String, String> =
        task.sandbox_config.labels.clone().into_iter().collect();
    labels.insert(
        keys::PULLING_IMAGE_BY.to_string(),
        keys::PULLING_IMAGE_BY_KRUISE_DAEMON.to_string(),
    );
    labels
}

/// The sandbox annotations of a pull: the image's `sandboxConfig` plus
/// `apps.kruise.io/pulling-image-by: kruise-daemon`.
fn sandbox_annotations(task: &PullTask) -> HashMap<String, String> {
    let mut annotations: HashMap<String, String> = task
        .sandbox_config
        .annotations
        .clone()
        .into_iter()
        .collect();
    annotations.insert(
        keys::PULLING_IMAGE_BY.to_string(),
        keys::PULLING_IMAGE_BY_KRUISE_DAEMON.to_string(),
    );
    annotations
}
