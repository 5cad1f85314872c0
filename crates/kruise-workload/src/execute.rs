//! Carries out a workload controller's [`Plan`](crate::Plan): the only place its Pod and
//! PVC writes happen. Creations go in slow-start batches; other writes run a bounded
//! number at a time. Every write is recorded in the owner's expectations, so the next
//! reconcile waits until the cache has seen it.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod as NewPod;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim};
use kruise_api::keys;
use kruise_api::pod::Pod;
use kruise_api::policy_v1alpha1::PubOperation;
use kruise_inplace::PodWrites;
use kube::runtime::controller::Action as Next;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::action::{Action, WRITES_PER_ROUND};
use crate::control::{PatchKind, PodControl, Written, bounded, slow_start};
use crate::expectations::{Expectations, Expected, Observed};
use kube::runtime::reflector::ObjectRef;

/// How soon to look again while the caches do not show an owner's writes yet.
pub const EXPECTATION_POLL: Duration = Duration::from_millis(500);

/// How soon to look again at an owner whose Pod a PodUnavailableBudget held back: the
/// budget comes back when `pub-ctl` sees an updated Pod available again, which is no
/// event of the owner's.
pub const BUDGET_POLL: Duration = Duration::from_secs(1);

/// What carrying out a plan left undone on purpose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Executed {
    /// Pod disruptions (in-place updates, deletions) a PodUnavailableBudget refused
    /// this round.
    pub held_by_budget: usize,
    /// Actions beyond [`WRITES_PER_ROUND`], left for the next round.
    pub deferred: usize,
}

impl Executed {
    /// When to look again for what was held back: at once for what was deferred.
    pub fn requeue_after(&self) -> Option<Duration> {
        if self.deferred > 0 {
            return Some(Duration::ZERO);
        }
        (self.held_by_budget > 0).then_some(BUDGET_POLL)
    }
}

/// The write side a workload controller shares across its reconciles: the Pod/PVC writer
/// and what it expects the caches to show next.
pub struct Writer {
    pub control: PodControl,
    pub pods: Expectations,
    pub pvcs: Expectations,
    /// Status writes of the owners themselves ([`Writer::status_written`]).
    pub statuses: Expectations,
    /// Whether in-place updates ask the Pod's PodUnavailableBudget first (`None`: never).
    budget: Option<kruise_pub::Options>,
}

impl Writer {
    pub fn new(control: PodControl) -> Self {
        Writer {
            control,
            pods: Expectations::new(crate::expectations::DEFAULT_TIMEOUT),
            pvcs: Expectations::new(crate::expectations::DEFAULT_TIMEOUT),
            statuses: Expectations::new(crate::expectations::DEFAULT_TIMEOUT),
            budget: None,
        }
    }

    /// In-place updates spend the Pod's PodUnavailableBudget before they start (as OpenKruise's
    /// controllers do with the `PodUnavailableBudgetUpdateGate` on, e.g. `Update` in
    /// openkruise/kruise v1.9.0 pkg/controller/cloneset/sync/cloneset_update.go calling
    /// `pubcontrol.PodUnavailableBudgetValidatePod`), and wait while it has nothing left. Deletions
    /// need no such call: the apiserver sends them through `pub-ctl`'s webhook, whose refusal
    /// [`Writer::execute`] reports as held, not as an error.
    pub fn consulting_budgets(mut self, options: kruise_pub::Options) -> Self {
        self.budget = options.protect_update.then_some(options);
        self
    }

    /// Whether the caches (`pods`, `pvcs`, of `namespace`) show every write this owner
    /// made; if not, logs what is missing and the reconcile should look again shortly
    /// instead of planning on a stale view. Satisfied and timed-out expectations are
    /// dropped.
    pub fn caches_caught_up(
        &self,
        owner_uid: &str,
        namespace: &str,
        pods: &kruise_runtime::Cache<Pod>,
        pvcs: &kruise_runtime::Cache<PersistentVolumeClaim>,
        now: jiff::Timestamp,
    ) -> bool {
        self.caught_up(owner_uid, namespace, pods, Some(pvcs), now)
    }

    /// [`Writer::caches_caught_up`] with or without a PVC cache (a controller that
    /// writes no PVCs has none).
    fn caught_up(
        &self,
        owner_uid: &str,
        namespace: &str,
        pods: &kruise_runtime::Cache<Pod>,
        pvcs: Option<&kruise_runtime::Cache<PersistentVolumeClaim>>,
        now: jiff::Timestamp,
    ) -> bool {
        let observe = |expectations: &Expectations, cache_of: &dyn Fn(&str) -> Observed| {
            expectations.pending(owner_uid, now, cache_of)
        };
        let pending = observe(&self.pods, &|name| {
            Observed::in_cache(
                pods.store()
                    .get(&ObjectRef::new(name).within(namespace))
                    .as_deref(),
                pods.resource_version(),
            )
        });
        let pending_pvcs = match pvcs {
            Some(pvcs) => observe(&self.pvcs, &|name| {
                Observed::in_cache(
                    pvcs.store()
                        .get(&ObjectRef::new(name).within(namespace))
                        .as_deref(),
                    pvcs.resource_version(),
                )
            }),
            None => Vec::new(),
        };
        if pending.is_empty() && pending_pvcs.is_empty() {
            return true;
        }
        tracing::debug!(?pending, ?pending_pvcs, "waiting for the cache");
        false
    }

    /// What a reconcile of `owner` does instead of planning, if it must not plan now: an
    /// owner being deleted has nothing left to plan (what it expected is dropped); while
    /// the caches (`pods`, `pvcs`) do not show every write it made, look again after
    /// [`EXPECTATION_POLL`] (a plan on a stale view would, say, create Pods twice).
    pub fn hold_off<K: Resource>(
        &self,
        owner: &K,
        pods: &kruise_runtime::Cache<Pod>,
        pvcs: &kruise_runtime::Cache<PersistentVolumeClaim>,
        now: jiff::Timestamp,
    ) -> Option<Next> {
        self.hold_off_with(owner, pods, Some(pvcs), now)
    }

    /// [`Writer::hold_off`] for a controller that writes Pods only (no PVC cache).
    pub fn hold_off_pods<K: Resource>(
        &self,
        owner: &K,
        pods: &kruise_runtime::Cache<Pod>,
        now: jiff::Timestamp,
    ) -> Option<Next> {
        self.hold_off_with(owner, pods, None, now)
    }

    fn hold_off_with<K: Resource>(
        &self,
        owner: &K,
        pods: &kruise_runtime::Cache<Pod>,
        pvcs: Option<&kruise_runtime::Cache<PersistentVolumeClaim>>,
        now: jiff::Timestamp,
    ) -> Option<Next> {
        let meta = owner.meta();
        let uid = meta.uid.as_deref().unwrap_or_default();
        if meta.deletion_timestamp.is_some() {
            self.forget(uid);
            return Some(Next::await_change());
        }
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let status_seen = status_seen(&self.statuses, owner, now);
        if !status_seen {
            tracing::debug!("waiting for the cache to show our last status write");
        }
        (!status_seen || !self.caught_up(uid, namespace, pods, pvcs, now))
            .then(|| Next::requeue(EXPECTATION_POLL))
    }

    /// The owner's status was just written as `written`: until a copy at least that new
    /// reaches the reconcile, [`Writer::hold_off`] holds it off. For a status that carries
    /// what the Pods can no longer show (a BroadcastJob counts the Pods it deleted as
    /// failed): a plan on the stale copy would write the count again from what is left.
    pub fn status_written<K: Resource>(&self, written: &K, now: jiff::Timestamp) {
        expect_status(&self.statuses, written, now);
    }

    /// The owner is gone: nothing it expected matters any more.
    pub fn forget(&self, owner_uid: &str) {
        self.pods.forget(owner_uid);
        self.pvcs.forget(owner_uid);
        self.statuses.forget(owner_uid);
    }

    /// Carries out a plan: its warnings as Warning events on the owner, then its first
    /// [`WRITES_PER_ROUND`] actions ([`Writer::execute`]); the rest are left to the next
    /// round ([`Executed::deferred`]), planned again from what the caches show then.
    pub async fn carry_out(
        &self,
        owner: &ObjectReference,
        owner_uid: &str,
        plan: crate::action::Plan<'_>,
    ) -> Result<Executed, kube::Error> {
        for w in &plan.warnings {
            self.control
                .events()
                .warning(owner, w.reason, w.message.clone());
        }
        let mut actions = plan.actions;
        let deferred = actions.len().saturating_sub(WRITES_PER_ROUND);
        actions.truncate(WRITES_PER_ROUND);
        if deferred > 0 {
            tracing::debug!(deferred, "round full; the rest in the next round");
        }
        let mut executed = self.execute(owner, owner_uid, actions).await?;
        executed.deferred = deferred;
        Ok(executed)
    }

    /// Executes every action for the owner (`owner`, `owner_uid`); returns the first
    /// error, after trying the rest (creations stop at the first failing batch), or what
    /// was held back.
    pub async fn execute(
        &self,
        owner: &ObjectReference,
        owner_uid: &str,
        actions: Vec<Action<'_>>,
    ) -> Result<Executed, kube::Error> {
        let mut creates: Vec<(NewPod, Vec<PersistentVolumeClaim>)> = Vec::new();
        let mut others = Vec::new();
        for action in actions {
            tracing::debug!(action = action.kind(), object = %action.object_name(), "planned");
            match action {
                Action::Create { pod, pvcs, .. } => creates.push((*pod, pvcs)),
                other => others.push(other),
            }
        }
        let mut first_error: Option<kube::Error> = None;
        if !creates.is_empty() {
            let (_, errors) = slow_start(creates, |(pod, pvcs)| {
                self.create(owner, owner_uid, pod, pvcs)
            })
            .await;
            first_error = errors.into_iter().next();
        }
        let (held_by_budget, error) = bounded(others, |a| self.run(owner, owner_uid, a)).await;
        let executed = Executed {
            held_by_budget,
            ..Executed::default()
        };
        first_error.or(error).map_or(Ok(executed), Err)
    }

    async fn create(
        &self,
        owner: &ObjectReference,
        uid: &str,
        pod: NewPod,
        pvcs: Vec<PersistentVolumeClaim>,
    ) -> Result<(), kube::Error> {
        let name = pod.name_any();
        for pvc in &pvcs {
            self.create_pvc(owner, uid, &name, pvc).await?;
        }
        let created = self.control.create_pod(owner, &pod).await?;
        // The name the apiserver gave it (a Pod sent with `generateName` has none yet).
        let name = created.name_any();
        // Recorded with its resourceVersion: if someone deletes the Pod before the cache
        // shows it, the cache moving past that version still releases the owner.
        self.pods.expect(
            uid,
            Expected::CreatedAt {
                name,
                resource_version: created.resource_version().unwrap_or_default(),
            },
            jiff::Timestamp::now(),
        );
        Ok(())
    }

    async fn create_pvc(
        &self,
        owner: &ObjectReference,
        uid: &str,
        pod: &str,
        pvc: &PersistentVolumeClaim,
    ) -> Result<(), kube::Error> {
        let expected = Expected::Created(pvc.name_any());
        self.pvcs
            .expect(uid, expected.clone(), jiff::Timestamp::now());
        let result = self.control.create_pvc(owner, pod, pvc).await;
        if result.is_err() {
            self.pvcs.forget_one(uid, &expected);
        }
        result
    }

    /// One action, after asking the Pod's PodUnavailableBudget when it is an in-place
    /// update; a budget's refusal (ours, or `pub-ctl`'s webhook answering a deletion or a
    /// Pod patch) holds the Pod back until a later round.
    async fn run(
        &self,
        owner: &ObjectReference,
        uid: &str,
        action: Action<'_>,
    ) -> Result<Written, kube::Error> {
        let name = action.object_name().to_string();
        if let (Action::UpdateInPlace { pod, .. }, Some(options)) = (&action, self.budget) {
            let client = self.control.client();
            let refused = kruise_pub::consult(client, pod, PubOperation::Update, options).await?;
            if let Some(denial) = refused {
                tracing::info!(pod = %name, reason = %denial.message(), "in-place update held by a PodUnavailableBudget");
                self.control.count("held_by_budget");
                return Ok(Written::HeldByBudget);
            }
        }
        match self.write(owner, uid, action).await {
            Ok(()) => Ok(Written::Done),
            Err(e) if kruise_pub::is_refusal(&e) => {
                tracing::info!(pod = %name, "{e}");
                self.control.count("held_by_budget");
                Ok(Written::HeldByBudget)
            }
            Err(e) => Err(e),
        }
    }

    async fn write(
        &self,
        owner: &ObjectReference,
        uid: &str,
        action: Action<'_>,
    ) -> Result<(), kube::Error> {
        let now = jiff::Timestamp::now();
        match action {
            Action::Create { .. } => Ok(()),
            Action::Delete { pod, pvcs } => {
                let expected = Expected::Deleted(pod.name_any());
                self.pods.expect(uid, expected.clone(), now);
                if let Err(e) = self.control.delete_pod(owner, pod).await {
                    self.pods.forget_one(uid, &expected);
                    return Err(e);
                }
                for pvc in pvcs {
                    self.pvcs
                        .expect(uid, Expected::Deleted(pvc.name_any()), now);
                    self.control.delete_pvc(owner, pvc).await?;
                }
                Ok(())
            }
            Action::Lifecycle { pod, transition } => {
                let writes = lifecycle_writes(&transition);
                self.write_pod(uid, pod, &writes, PatchKind::Merge).await
            }
            Action::MarkRecreate { pod, revision } => {
                let writes = PodWrites {
                    pod_patch: Some(
                        json!({"metadata": {"labels": {keys::SPECIFIED_DELETE: "true"}}}),
                    ),
                    ..Default::default()
                };
                let result = self.write_pod(uid, pod, &writes, PatchKind::Merge).await;
                let events = self.control.events();
                match &result {
                    Ok(()) => events.normal(
                        owner,
                        keys::EVENT_SUCCESSFUL_UPDATE_POD_RECREATE,
                        format!(
                            "successfully patch pod {} specified-delete for update(revision {revision})",
                            pod.name_any()
                        ),
                    ),
                    Err(e) => events.warning(
                        owner,
                        keys::EVENT_FAILED_UPDATE_POD_RECREATE,
                        format!(
                            "failed to patch pod specified-delete {} for update(revision {revision}): {e}",
                            pod.name_any()
                        ),
                    ),
                }
                result
            }
            Action::UpdateInPlace {
                pod,
                writes,
                revision,
            } => {
                let result = self
                    .write_pod(uid, pod, &writes, PatchKind::Strategic)
                    .await;
                let events = self.control.events();
                match &result {
                    Ok(()) => {
                        self.control.count("updated_in_place");
                        events.normal(
                            owner,
                            keys::EVENT_SUCCESSFUL_UPDATE_POD_IN_PLACE,
                            self.control
                                .messages()
                                .updated_in_place(&pod.name_any(), &revision),
                        );
                    }
                    Err(e) => events.warning(
                        owner,
                        keys::EVENT_FAILED_UPDATE_POD_IN_PLACE,
                        self.control.messages().update_in_place_failed(
                            &pod.name_any(),
                            &revision,
                            e,
                        ),
                    ),
                }
                result
            }
            Action::Refresh { pod, writes } => {
                self.write_pod(uid, pod, &writes, PatchKind::Strategic)
                    .await
            }
            Action::Release { pod } => {
                let owners: Vec<_> = pod
                    .owner_references()
                    .iter()
                    .filter(|o| o.uid != uid)
                    .cloned()
                    .collect();
                let patch = json!({"metadata": {
                    "resourceVersion": pod.resource_version(),
                    "ownerReferences": owners,
                }});
                self.control
                    .patch_pod(pod, &patch, PatchKind::Merge)
                    .await?;
                Ok(())
            }
            Action::Adopt { pod, controller } => {
                // The resourceVersion guard: a Pod that changed meanwhile (another
                // controller took it) is looked at again next round.
                let mut owners = pod.owner_references().to_vec();
                owners.push(controller);
                let patch = json!({"metadata": {
                    "resourceVersion": pod.resource_version(),
                    "ownerReferences": owners,
                }});
                self.control
                    .patch_pod(pod, &patch, PatchKind::Merge)
                    .await?;
                Ok(())
            }
            Action::CreatePvc { pvc, pod } => self.create_pvc(owner, uid, &pod, &pvc).await,
            Action::PatchPvc { pvc, patch } => {
                if let Some(rv) = self.control.patch_pvc(owner, pvc, &patch).await? {
                    self.pvcs.expect(
                        uid,
                        Expected::Updated {
                            name: pvc.name_any(),
                            resource_version: rv,
                        },
                        now,
                    );
                }
                Ok(())
            }
            Action::DeletePvc { pvc } => {
                let expected = Expected::Deleted(pvc.name_any());
                self.pvcs.expect(uid, expected.clone(), now);
                let result = self.control.delete_pvc(owner, pvc).await;
                if result.is_err() {
                    self.pvcs.forget_one(uid, &expected);
                }
                result
            }
        }
    }

    /// Status patch first (a Pod is marked not-ready before it changes), then the resize
    /// (`pods/resize`), then the Pod patch; the resourceVersion written is recorded so the
    /// next round waits to see it.
    async fn write_pod(
        &self,
        uid: &str,
        pod: &Pod,
        writes: &PodWrites,
        kind: PatchKind,
    ) -> Result<(), kube::Error> {
        let mut last_rv = None;
        if let Some(status) = &writes.status_patch {
            last_rv = self.control.patch_pod_status(pod, status).await?;
        }
        if let Some(resize) = &writes.resize_patch {
            last_rv = self.control.resize_pod(pod, resize).await?.or(last_rv);
        }
        if let Some(patch) = &writes.pod_patch {
            let mut patch = patch.clone();
            // The patch is guarded by the resourceVersion we planned against; our own
            // status write just moved it, so carry the new one forward.
            if let (Some(rv), Some(meta)) = (
                &last_rv,
                patch.get_mut("metadata").and_then(|m| m.as_object_mut()),
            ) && meta.contains_key("resourceVersion")
            {
                meta.insert("resourceVersion".into(), json!(rv));
            }
            last_rv = self.control.patch_pod(pod, &patch, kind).await?.or(last_rv);
        }
        if let Some(rv) = last_rv {
            self.pods.expect(
                uid,
                Expected::Updated {
                    name: pod.name_any(),
                    resource_version: rv,
                },
                jiff::Timestamp::now(),
            );
        }
        Ok(())
    }
}

/// The writes of a lifecycle move. When it writes conditions and changes nothing but
/// labels and annotations, one status write carries both (the `pods/status` endpoint
/// keeps metadata changes other than owner references): the Pod's readiness and its
/// state change together, and the move costs one request instead of two.
pub(crate) fn lifecycle_writes(transition: &kruise_lifecycle::Transition) -> PodWrites {
    let metadata = transition
        .changes_metadata()
        .then_some(&transition.metadata_patch);
    match (&transition.status_patch, metadata) {
        (Some(status), Some(meta)) if only_labels_and_annotations(meta) => {
            let mut status = status.clone();
            status["metadata"] = meta["metadata"].clone();
            PodWrites {
                status_patch: Some(status),
                ..Default::default()
            }
        }
        (status, meta) => PodWrites {
            status_patch: status.clone(),
            pod_patch: meta.cloned(),
            resize_patch: None,
            requeue_after: None,
        },
    }
}

fn only_labels_and_annotations(patch: &serde_json::Value) -> bool {
    let top_level_is_metadata = patch
        .as_object()
        .is_some_and(|p| p.keys().all(|k| k == "metadata"));
    top_level_is_metadata
        && patch["metadata"]
            .as_object()
            .is_some_and(|m| m.keys().all(|k| k == "labels" || k == "annotations"))
}

/// Records `written` (an owner as its status write returned it) in `statuses`.
fn expect_status<K: Resource>(statuses: &Expectations, written: &K, now: jiff::Timestamp) {
    let meta = written.meta();
    let (Some(uid), Some(name), Some(resource_version)) =
        (&meta.uid, &meta.name, &meta.resource_version)
    else {
        return;
    };
    statuses.expect(
        uid,
        Expected::Updated {
            name: name.clone(),
            resource_version: resource_version.clone(),
        },
        now,
    );
}

/// Whether `owner`, as this reconcile got it, is at least as new as its last status
/// write recorded in `statuses` (or that write timed out).
fn status_seen<K: Resource>(statuses: &Expectations, owner: &K, now: jiff::Timestamp) -> bool {
    let uid = owner.meta().uid.as_deref().unwrap_or_default();
    statuses
        .pending(uid, now, |_| Observed::of(Some(owner)))
        .is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kruise_api::appspub::LifecycleState;
    use serde_json::Value;

    fn transition(
        metadata_patch: Value,
        status_patch: Option<Value>,
    ) -> kruise_lifecycle::Transition {
        kruise_lifecycle::Transition {
            to: LifecycleState::Normal,
            metadata_patch,
            status_patch,
        }
    }

    fn state_label() -> Value {
        json!({"metadata": {"labels": {keys::LIFECYCLE_STATE: "Normal"},
                            "annotations": {keys::LIFECYCLE_TIMESTAMP: "2026-01-01T00:00:00Z"}}})
    }

    fn ready_condition() -> Value {
        json!({"status": {"conditions": [{"type": keys::INPLACE_UPDATE_READY, "status": "True"}]}})
    }

    #[test]
    fn a_move_with_conditions_and_labels_is_one_status_write() {
        let writes = lifecycle_writes(&transition(state_label(), Some(ready_condition())));
        assert_eq!(writes.pod_patch, None);
        let status = writes.status_patch.unwrap();
        assert_eq!(status["metadata"], state_label()["metadata"]);
        assert_eq!(status["status"], ready_condition()["status"]);
    }

    #[test]
    fn a_move_that_replaces_finalizers_keeps_its_guarded_pod_patch() {
        let mut meta = state_label();
        meta["metadata"]["finalizers"] = json!(["hook"]);
        meta["metadata"]["resourceVersion"] = json!("7");
        let writes = lifecycle_writes(&transition(meta.clone(), Some(ready_condition())));
        assert_eq!(writes.pod_patch, Some(meta));
        assert_eq!(writes.status_patch, Some(ready_condition()));
    }

    #[test]
    fn a_move_without_conditions_is_one_pod_patch_and_a_condition_only_move_one_status_write() {
        let writes = lifecycle_writes(&transition(state_label(), None));
        assert_eq!(
            (writes.pod_patch, writes.status_patch),
            (Some(state_label()), None)
        );
        let writes = lifecycle_writes(&transition(json!({}), Some(ready_condition())));
        assert_eq!(
            (writes.pod_patch, writes.status_patch),
            (None, Some(ready_condition()))
        );
    }

    fn owner_at(resource_version: &str) -> ConfigMap {
        let mut owner = ConfigMap::default();
        owner.metadata.name = Some("job".into());
        owner.metadata.uid = Some("uid-1".into());
        owner.metadata.resource_version = Some(resource_version.into());
        owner
    }

    #[test]
    fn an_owner_older_than_its_last_status_write_is_held_off_until_a_newer_copy_arrives() {
        let statuses = Expectations::new(Duration::from_secs(60));
        let now = jiff::Timestamp::UNIX_EPOCH;
        assert!(status_seen(&statuses, &owner_at("10"), now));
        expect_status(&statuses, &owner_at("12"), now);
        assert!(!status_seen(&statuses, &owner_at("10"), now));
        assert!(!status_seen(&statuses, &owner_at("11"), now));
        assert!(status_seen(&statuses, &owner_at("12"), now));
        // Seen once, the expectation is gone: an older copy no longer waits.
        assert!(status_seen(&statuses, &owner_at("10"), now));
        // A newer copy (someone else wrote after us) satisfies it too.
        expect_status(&statuses, &owner_at("20"), now);
        assert!(status_seen(&statuses, &owner_at("25"), now));
    }

    #[test]
    fn a_status_write_the_cache_never_shows_stops_holding_after_the_timeout() {
        let statuses = Expectations::new(Duration::from_secs(60));
        let now = jiff::Timestamp::UNIX_EPOCH;
        expect_status(&statuses, &owner_at("12"), now);
        let later = now + jiff::SignedDuration::from_secs(61);
        assert!(status_seen(&statuses, &owner_at("10"), later));
    }
}
