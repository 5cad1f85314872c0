//! Pod and PVC writes with the events and metrics every workload controller emits, and
//! slow-start batched creation.

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt as _;
use futures::future::join_all;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::core::v1::Pod as NewPod;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim};
use kruise_api::pod::Pod;
use kruise_runtime::api_error::{is_conflict, is_not_found};
use kruise_runtime::{Events, Metrics};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use kruise_api::keys::{
    EVENT_FAILED_CREATE as REASON_FAILED_CREATE, EVENT_FAILED_DELETE as REASON_FAILED_DELETE,
    EVENT_FAILED_UPDATE as REASON_FAILED_UPDATE,
    EVENT_SUCCESSFUL_CREATE as REASON_SUCCESSFUL_CREATE,
    EVENT_SUCCESSFUL_DELETE as REASON_SUCCESSFUL_DELETE,
};

/// How a controller words the events of its Pod and PVC writes. The defaults are
/// CloneSet's (`succeed to create pod cs-demo-jj2qk`); a controller whose upstream says
/// it otherwise (Advanced StatefulSet: `create Pod web-0 in StatefulSet web successful`)
/// overrides them. `owner` is the owner's name.
pub trait PodMessages: Send + Sync {
    fn created(&self, _owner: &str, pod: &str) -> String {
        format!("succeed to create pod {pod}")
    }
    fn create_failed(&self, _owner: &str, pod: &NewPod, err: &kube::Error) -> String {
        let json = serde_json::to_string(pod).unwrap_or_default();
        format!("failed to create pod: {err}, pod: {json}")
    }
    fn deleted(&self, _owner: &str, pod: &str) -> String {
        format!("succeed to delete pod {pod}")
    }
    fn delete_failed(&self, _owner: &str, pod: &str, err: &kube::Error) -> String {
        format!("failed to delete pod {pod}: {err}")
    }
    /// A Pod updated in place to `revision` (`SuccessfulUpdatePodInPlace`).
    fn updated_in_place(&self, pod: &str, revision: &str) -> String {
        format!("successfully update pod {pod} in-place(revision {revision})")
    }
    /// An in-place update that failed (`FailedUpdatePodInPlace`).
    fn update_in_place_failed(&self, pod: &str, revision: &str, err: &kube::Error) -> String {
        format!("failed to update pod {pod} in-place(revision {revision}): {err}")
    }
    /// An event for a created claim, if the controller reports them.
    fn claim_created(&self, _owner: &str, _pod: &str, _claim: &str) -> Option<String> {
        None
    }
    fn claim_create_failed(
        &self,
        _owner: &str,
        _pod: &str,
        pvc: &PersistentVolumeClaim,
        err: &kube::Error,
    ) -> String {
        let json = serde_json::to_string(pvc).unwrap_or_default();
        format!("failed to create pvc: {err}, pvc: {json}")
    }
}

/// CloneSet's wording.
pub struct DefaultMessages;

impl PodMessages for DefaultMessages {}

/// How a Pod patch is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    Merge,
    Strategic,
}

/// Whether `fresh` (read from the API) differs from `cached` only in what the kubelet
/// reports: its status and resourceVersion. Both are the cached view of a Pod
/// ([`kruise_api::pod::Pod`]); the cache also prunes it ([`crate::prune_pod`]: metadata,
/// placement), so both are pruned alike before they are compared.
pub fn same_but_status(fresh: &Pod, cached: &Pod) -> bool {
    let pruned = |pod: &Pod| {
        let mut pod = pod.clone();
        crate::prune_pod(&mut pod);
        pod
    };
    let (fresh, cached) = (pruned(fresh), pruned(cached));
    fresh.spec == cached.spec
        && fresh.metadata.labels == cached.metadata.labels
        && fresh.metadata.annotations == cached.metadata.annotations
}

/// Creates, patches and deletes a controller's Pods and PVCs, reporting each as an Event
/// on the owner and in `kruise_pod_operations_total`.
#[derive(Clone)]
pub struct PodControl {
    client: Client,
    events: Events,
    metrics: Metrics,
    controller: String,
    messages: Arc<dyn PodMessages>,
}

impl PodControl {
    pub fn new(client: Client, events: Events, metrics: Metrics, controller: &str) -> Self {
        PodControl {
            client,
            events,
            metrics,
            controller: controller.to_string(),
            messages: Arc::new(DefaultMessages),
        }
    }

    /// Words the events as `messages` says.
    pub fn with_messages(mut self, messages: impl PodMessages + 'static) -> Self {
        self.messages = Arc::new(messages);
        self
    }

    /// How this controller words its events.
    pub fn messages(&self) -> &dyn PodMessages {
        self.messages.as_ref()
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Patches a Pod with a patch that carries the resourceVersion the caller decided
    /// on (`metadata.resourceVersion`), so a decision based on a stale cache fails
    /// instead of clobbering. A patch of labels, annotations and container images is
    /// sent as a JSON Patch testing the values it replaces instead ([`crate::guard`]).
    /// Any other patch, on a conflict, if only the Pod's status moved since (the kubelet
    /// reporting), still holds: it is retried once at the new resourceVersion; otherwise
    /// the conflict is returned and the caller decides again. Returns the
    /// resourceVersion written (none when the Pod is gone).
    pub async fn patch_pod(
        &self,
        pod: &Pod,
        patch: &Value,
        kind: PatchKind,
    ) -> Result<Option<String>, kube::Error> {
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let name = pod.name_any();
        let send = |patch: &Value| {
            let api = api.clone();
            let name = name.clone();
            let patch = patch.clone();
            async move {
                let params = PatchParams::default();
                match kind {
                    PatchKind::Merge => api.patch(&name, &params, &Patch::Merge(&patch)).await,
                    PatchKind::Strategic => {
                        api.patch(&name, &params, &Patch::Strategic(&patch)).await
                    }
                }
            }
        };
        // What the patch rewrites, tested in place of the resourceVersion (see `guard`):
        // a status write in between, ours or the kubelet's, cannot fail it.
        if let Some(json) = crate::guard::guarded_json_patch(pod, patch) {
            let params = PatchParams::default();
            return match api.patch(&name, &params, &Patch::Json::<()>(json)).await {
                Ok(p) => Ok(p.resource_version()),
                Err(e) if is_not_found(&e) => Ok(None),
                Err(e) => Err(e),
            };
        }
        match send(patch).await {
            Ok(p) => Ok(p.resource_version()),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) if is_conflict(&e) => {
                let fresh = api.get(&name).await?;
                if !same_but_status(&fresh, pod) {
                    return Err(e);
                }
                let mut patch = patch.clone();
                if let Some(meta) = patch.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("resourceVersion".into(), json!(fresh.resource_version()));
                }
                Ok(send(&patch).await?.resource_version())
            }
            Err(e) => Err(e),
        }
    }

    /// Strategic-merge patches `pods/status` (conditions). Returns the resourceVersion
    /// written (none when the Pod is gone).
    pub async fn patch_pod_status(
        &self,
        pod: &impl ResourceExt,
        patch: &Value,
    ) -> Result<Option<String>, kube::Error> {
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        match api
            .patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await
        {
            Ok(p) => Ok(p.resource_version()),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Strategic-merge patches `pods/resize` (container cpu/memory, Kubernetes 1.32+).
    /// Returns the resourceVersion written (none when the Pod is gone).
    pub async fn resize_pod(
        &self,
        pod: &impl ResourceExt,
        patch: &Value,
    ) -> Result<Option<String>, kube::Error> {
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        match api
            .patch_subresource(
                "resize",
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await
        {
            Ok(p) => {
                self.count("resized");
                Ok(p.resource_version())
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub fn events(&self) -> &Events {
        &self.events
    }

    pub fn count(&self, operation: &str) {
        self.metrics.pod_operation(&self.controller, operation);
    }

    pub async fn create_pod(
        &self,
        owner: &ObjectReference,
        pod: &NewPod,
    ) -> Result<NewPod, kube::Error> {
        let ns = pod.namespace().unwrap_or_default();
        let api: Api<NewPod> = Api::namespaced(self.client.clone(), &ns);
        match api.create(&PostParams::default(), pod).await {
            Ok(created) => {
                self.count("created");
                self.events.normal(
                    owner,
                    REASON_SUCCESSFUL_CREATE,
                    // The created name: a Pod sent with only `generateName` (Advanced
                    // DaemonSet) gets its name from the apiserver.
                    self.messages
                        .created(owner_name(owner), &created.name_any()),
                );
                Ok(created)
            }
            Err(err) => {
                self.events.warning(
                    owner,
                    REASON_FAILED_CREATE,
                    self.messages.create_failed(owner_name(owner), pod, &err),
                );
                Err(err)
            }
        }
    }

    /// Deletes a Pod, only if it is still the one we decided about (UID precondition).
    pub async fn delete_pod(&self, owner: &ObjectReference, pod: &Pod) -> Result<(), kube::Error> {
        let ns = pod.namespace().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let params = DeleteParams {
            preconditions: pod.uid().map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&pod.name_any(), &params).await {
            Ok(_) => {
                self.count("deleted");
                self.events.normal(
                    owner,
                    REASON_SUCCESSFUL_DELETE,
                    self.messages.deleted(owner_name(owner), &pod.name_any()),
                );
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(err) => {
                self.events.warning(
                    owner,
                    REASON_FAILED_DELETE,
                    self.messages
                        .delete_failed(owner_name(owner), &pod.name_any(), &err),
                );
                Err(err)
            }
        }
    }

    /// Creates a PVC for the Pod `pod`; an existing one with the same name is fine (it
    /// is reused).
    pub async fn create_pvc(
        &self,
        owner: &ObjectReference,
        pod: &str,
        pvc: &PersistentVolumeClaim,
    ) -> Result<(), kube::Error> {
        let ns = pvc.namespace().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &ns);
        match api.create(&PostParams::default(), pvc).await {
            Ok(_) => {
                self.count("pvc_created");
                if let Some(message) =
                    self.messages
                        .claim_created(owner_name(owner), pod, &pvc.name_any())
                {
                    self.events.normal(owner, REASON_SUCCESSFUL_CREATE, message);
                }
                Ok(())
            }
            Err(e) if is_conflict(&e) => Ok(()),
            Err(err) => {
                self.events.warning(
                    owner,
                    REASON_FAILED_CREATE,
                    self.messages
                        .claim_create_failed(owner_name(owner), pod, pvc, &err),
                );
                Err(err)
            }
        }
    }

    /// Merge-patches a PVC (e.g. to change its owners); reports a failure as a Warning
    /// `FailedUpdate` on the owner. Returns the new resourceVersion.
    pub async fn patch_pvc(
        &self,
        owner: &ObjectReference,
        pvc: &PersistentVolumeClaim,
        patch: &serde_json::Value,
    ) -> Result<Option<String>, kube::Error> {
        let ns = pvc.namespace().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &ns);
        match api
            .patch(
                &pvc.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            Ok(patched) => {
                self.count("pvc_updated");
                Ok(patched.resource_version())
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(err) => {
                self.events.warning(
                    owner,
                    REASON_FAILED_UPDATE,
                    format!("failed to update PVC {}: {err}", pvc.name_any()),
                );
                Err(err)
            }
        }
    }

    pub async fn delete_pvc(
        &self,
        owner: &ObjectReference,
        pvc: &PersistentVolumeClaim,
    ) -> Result<(), kube::Error> {
        let ns = pvc.namespace().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &ns);
        let params = DeleteParams {
            preconditions: pvc.uid().map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&pvc.name_any(), &params).await {
            Ok(_) => {
                self.count("pvc_deleted");
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(err) => {
                self.events.warning(
                    owner,
                    REASON_FAILED_DELETE,
                    format!("failed to delete pvc {}: {err}", pvc.name_any()),
                );
                Err(err)
            }
        }
    }
}

fn owner_name(owner: &ObjectReference) -> &str {
    owner.name.as_deref().unwrap_or_default()
}

/// How many writes (other than creations, which [`slow_start`] paces) run at once.
pub const CONCURRENT_WRITES: usize = 16;

/// What one write of a [`bounded`] batch came to, besides an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    Done,
    /// A PodUnavailableBudget refused the disruption (`kruise_pub::is_refusal`): held, not
    /// failed.
    HeldByBudget,
}

/// Runs `f` over `items` with at most [`CONCURRENT_WRITES`] in flight, trying every
/// item whatever failed before: how many writes a PodUnavailableBudget held back, and the
/// error of the first item (in `items`' order) that failed.
///
/// A window, not batches: the next write starts as soon as any one ends. Batches of 16
/// waited for their slowest write each time; at 300 QPS on the bench cluster that left
/// the in-place rollout of 1000 Pods at ~100 writes/s, 1.8 times the API-minimum
/// client's time (docs/benchmarks.md).
pub async fn bounded<T, E, F, Fut>(items: impl IntoIterator<Item = T>, f: F) -> (usize, Option<E>)
where
    F: Fn(T) -> Fut,
    Fut: Future<Output = Result<Written, E>>,
{
    // FuturesUnordered filled by hand, not `buffer_unordered` over a mapping closure: that
    // closure's type is not general enough over the items' lifetimes for the controllers'
    // `Send` futures.
    async fn numbered<R>(i: usize, write: impl Future<Output = R>) -> (usize, R) {
        (i, write.await)
    }
    let mut items = items.into_iter().enumerate();
    let mut running = FuturesUnordered::new();
    let (mut held, mut first_error) = (0, None::<(usize, E)>);
    loop {
        while running.len() < CONCURRENT_WRITES {
            let Some((i, item)) = items.next() else { break };
            running.push(numbered(i, f(item)));
        }
        let Some((i, result)) = running.next().await else {
            break;
        };
        match result {
            Ok(Written::Done) => {}
            Ok(Written::HeldByBudget) => held += 1,
            Err(e) => {
                if first_error.as_ref().is_none_or(|(first, _)| i < *first) {
                    first_error = Some((i, e));
                }
            }
        }
    }
    (held, first_error.map(|(_, e)| e))
}

/// Runs `f` over `items` in batches of 1, 2, 4, … (each batch concurrently), stopping
/// after the first batch with a failure: a quota or admission error then costs one
/// request, not hundreds. Returns how many succeeded and the errors of the last batch.
pub async fn slow_start<T, E, F, Fut>(items: Vec<T>, f: F) -> (usize, Vec<E>)
where
    F: Fn(T) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let mut items = items.into_iter();
    let mut batch = 1usize;
    let mut succeeded = 0usize;
    loop {
        let chunk: Vec<T> = items.by_ref().take(batch).collect();
        if chunk.is_empty() {
            return (succeeded, Vec::new());
        }
        let results = join_all(chunk.into_iter().map(&f)).await;
        let mut errors = Vec::new();
        for r in results {
            match r {
                Ok(()) => succeeded += 1,
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return (succeeded, errors);
        }
        batch *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[tokio::test]
    async fn bounded_tries_everything_and_keeps_the_first_error() {
        let seen = Mutex::new(Vec::new());
        let (held, first) = bounded(0..40, |i: i32| {
            seen.lock().unwrap().push(i);
            async move {
                match i {
                    3 | 30 => Err(i),
                    i if i % 10 == 0 => Ok(Written::HeldByBudget),
                    _ => Ok(Written::Done),
                }
            }
        })
        .await;
        assert_eq!(seen.lock().unwrap().len(), 40);
        assert_eq!((held, first), (3, Some(3)));
    }

    #[tokio::test]
    async fn bounded_starts_the_next_write_when_any_one_ends() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        // Write 0 ends only once write 39 has started: with batches of 16 waiting for
        // their slowest write it never would.
        let last_started = tokio::sync::Notify::new();
        let (in_flight, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let run = bounded(0..40, |i: i32| {
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            let (last_started, in_flight) = (&last_started, &in_flight);
            async move {
                if i == 39 {
                    last_started.notify_one();
                }
                if i == 0 {
                    last_started.notified().await;
                }
                tokio::task::yield_now().await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, ()>(Written::Done)
            }
        });
        let (held, error) = tokio::time::timeout(std::time::Duration::from_secs(5), run)
            .await
            .expect("write 0 waited for a batch to end");
        assert_eq!((held, error), (0, None));
        assert_eq!(most.load(Ordering::SeqCst), CONCURRENT_WRITES);
    }

    #[tokio::test]
    async fn slow_start_doubles_batches_and_stops_at_the_first_failing_batch() {
        let seen = Mutex::new(Vec::new());
        let (ok, errs) = slow_start((0..20).collect(), |i: i32| {
            seen.lock().unwrap().push(i);
            async move { if i == 5 { Err("boom") } else { Ok(()) } }
        })
        .await;
        // Batches: [0], [1,2], [3,4,5,6] -> stops after the batch containing 5.
        assert_eq!(*seen.lock().unwrap(), vec![0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(ok, 6);
        assert_eq!(errs, vec!["boom"]);
    }

    /// A Pod as the API answers, whole: the view skips its volumes.
    fn pod_with_volumes() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web-0", "labels": {"app": "web"},
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
            "spec": {
                "containers": [{"name": "main", "image": "nginx:1",
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                "volumes": [{"name": "data", "emptyDir": {}}],
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                 "effect": "NoExecute", "tolerationSeconds": 300}]
            },
            "status": {"phase": "Pending"}
        }))
        .unwrap()
    }

    #[test]
    fn a_pruned_cached_pod_matches_its_fresh_self_whatever_the_status() {
        let fresh = pod_with_volumes();
        // As the cache holds it: no last-applied annotation, no tolerations.
        let mut cached = fresh.clone();
        crate::prune_pod(&mut cached);
        assert!(
            cached
                .metadata
                .annotations
                .as_ref()
                .is_none_or(|a| a.is_empty())
        );
        assert!(cached.spec.as_ref().unwrap().tolerations.is_none());
        let mut running = fresh.clone();
        running.status.as_mut().unwrap().phase = Some("Running".into());
        assert!(same_but_status(&running, &cached));
        assert!(same_but_status(&fresh, &fresh));
    }

    #[test]
    fn a_changed_image_or_label_is_not_status_only() {
        let cached = pod_with_volumes();
        let mut image = cached.clone();
        image.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
        assert!(!same_but_status(&image, &cached));
        let mut label = cached.clone();
        label.labels_mut().insert("app".into(), "other".into());
        assert!(!same_but_status(&label, &cached));
    }

    #[tokio::test]
    async fn slow_start_runs_everything_when_all_succeed() {
        let (ok, errs) = slow_start((0..10).collect(), |_: i32| async { Ok::<(), ()>(()) }).await;
        assert_eq!((ok, errs.len()), (10, 0));
        let (ok, errs) = slow_start(Vec::<i32>::new(), |_| async { Ok::<(), ()>(()) }).await;
        assert_eq!((ok, errs.len()), (0, 0));
    }
}
