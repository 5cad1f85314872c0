//! Shared, pruned caches: one watch per kind per process, fanned out to every controller
//! of the binary, kept warm whether or not this replica is the leader.
//!
//! - Objects are pruned before they are stored (`managedFields`, the last-applied
//!   annotation): a 1000-Pod CloneSet costs a fraction of the memory.
//! - Objects are indexed by the UID of their controller owner, so a reconcile reads its
//!   Pods without scanning the whole cache.
//! - A custom resource that does not decode (a field our types reject) is skipped
//!   ([`Tolerant`]), never fails the watch: one bad object must not stop the controller
//!   for every other one. It is reported ([`MalformedReport`]): a log line, a Warning
//!   event on the object and `kruise_malformed_objects_total{kind}`, once per version.
//! - Deletions are delivered to subscribers too (a deleted Pod must wake its owner).

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex, RwLock};

use futures::{Stream, StreamExt, TryStreamExt, stream};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::broadcast;

use crate::admin::ReadyHandle;
use crate::events::Events;
use crate::list_watch::list_watch;
use crate::metrics::Metrics;

/// Removes what no controller reads from an object before it is cached.
pub fn prune_metadata(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// [`prune_metadata`] of any object: what every cache removes at least.
pub fn prune<K: Resource>(object: &mut K) {
    prune_metadata(object.meta_mut());
}

/// The readiness check of a cache of `K`: `cache <plural>` (`cache pods`).
pub fn check_name<K: Resource<DynamicType = ()>>() -> String {
    format!("cache {}", K::plural(&()))
}

/// A cached kind: the store, the owner index, and a fan-out of changes.
pub struct Cache<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    owners: OwnerIndex<K>,
    changes: broadcast::Sender<Arc<K>>,
    /// The highest resourceVersion of any event applied (0: none, or not numeric).
    progress: Arc<std::sync::atomic::AtomicU64>,
    /// Whether the first full list has reached the store.
    synced: Arc<std::sync::atomic::AtomicBool>,
}

impl<K> Clone for Cache<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        Cache {
            store: self.store.clone(),
            owners: self.owners.clone(),
            changes: self.changes.clone(),
            progress: self.progress.clone(),
            synced: self.synced.clone(),
        }
    }
}

impl<K> Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    /// Watches `api` (filtered by `config`), prunes each object with `prune`, and keeps
    /// the cache until the process ends. `ready` turns green after the first full list.
    pub fn spawn(
        api: Api<K>,
        config: watcher::Config,
        prune: fn(&mut K),
        ready: ReadyHandle,
    ) -> Self {
        Self::spawn_from(list_watch(api, config, prune), ready)
    }

    /// Like [`Cache::spawn`] for custom resources: objects that fail to decode are logged
    /// and left out (or dropped from the cache if an earlier version was in it).
    pub fn spawn_tolerant(
        api: Api<Tolerant<K>>,
        config: watcher::Config,
        prune: fn(&mut K),
        ready: ReadyHandle,
        report: MalformedReport,
    ) -> Self {
        let (tx, _) = broadcast::channel(CHANGES_BUFFER);
        let writer = Writer::default();
        let cache = Cache {
            store: writer.as_reader(),
            owners: OwnerIndex::default(),
            changes: tx,
            progress: Default::default(),
            synced: Default::default(),
        };
        let store = cache.store.clone();
        // Pruned as decoded, like every other cache; a malformed object has only its
        // metadata, which the report reads.
        let prune_decoded = move |object: &mut Tolerant<K>| {
            if let Tolerant::Decoded(object) = object {
                prune(object);
            }
        };
        let events = list_watch(api, config, prune_decoded)
            .map_ok(move |event| decode_tolerant(event, &store, &report))
            .try_filter_map(|event| async move { Ok(event) });
        tokio::spawn(cache.clone().run(events, writer, ready));
        cache
    }

    fn spawn_from<E: std::fmt::Display + Send + 'static>(
        events: impl Stream<Item = Result<Event<K>, E>> + Send + 'static,
        ready: ReadyHandle,
    ) -> Self {
        let (tx, _) = broadcast::channel(CHANGES_BUFFER);
        let writer = Writer::default();
        let cache = Cache {
            store: writer.as_reader(),
            owners: OwnerIndex::default(),
            changes: tx,
            progress: Default::default(),
            synced: Default::default(),
        };
        tokio::spawn(cache.clone().run(events, writer, ready));
        cache
    }

    async fn run<E: std::fmt::Display>(
        self,
        events: impl Stream<Item = Result<Event<K>, E>> + Send,
        mut writer: Writer<K>,
        ready: ReadyHandle,
    ) {
        let kind = K::kind(&());
        let mut events = std::pin::pin!(events);
        let mut relisted: Vec<ObjectRef<K>> = Vec::new();
        let mut relist_progress: Option<u64> = None;
        // Subscribers get the store's own Arc, not a copy: the channel's ring buffer keeps
        // its last CHANGES_BUFFER values alive, and copies there doubled the memory of a
        // cache of 10 000 Pods (measured: 38 KB per cached Pod instead of the object's few).
        let shared = |obj: K| -> Arc<K> {
            self.store
                .get(&ObjectRef::from_obj(&obj))
                .unwrap_or_else(|| Arc::new(obj))
        };
        while let Some(event) = events.next().await {
            let event = match event {
                Ok(event) => event,
                Err(err) => {
                    tracing::warn!(%kind, %err, "watch error; retrying with backoff");
                    continue;
                }
            };
            // The index first: it reads the object's previous owner from the store.
            let store = &self.store;
            self.owners.apply(&event, |key| {
                store
                    .get(key)
                    .and_then(|previous| controller_uid(previous.as_ref()))
            });
            writer.apply_watcher_event(&event);
            let version = match &event {
                Event::Apply(obj) | Event::Delete(obj) | Event::InitApply(obj) => obj
                    .meta()
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse::<u64>().ok()),
                Event::Init | Event::InitDone => None,
            };
            // How far the cache has read means how far its store shows: a relist's objects
            // reach the store only at InitDone. Moved earlier, an object created just
            // before the watch was lost, absent from the old store and already passed by
            // the relist, looked deleted by someone else, and its owner was scaled up
            // again (seen at 10 000 Pods: 2000 Pods created twice, then deleted).
            match &event {
                Event::Init => relist_progress = Some(0),
                Event::InitApply(_) => {
                    relist_progress = relist_progress.max(version);
                }
                Event::InitDone => {
                    if let Some(rv) = relist_progress.take() {
                        self.progress
                            .fetch_max(rv, std::sync::atomic::Ordering::AcqRel);
                    }
                }
                Event::Apply(_) | Event::Delete(_) => {
                    if let Some(rv) = version {
                        self.progress
                            .fetch_max(rv, std::sync::atomic::Ordering::AcqRel);
                    }
                }
            }
            match event {
                Event::Apply(obj) => {
                    let _ = self.changes.send(shared(obj));
                }
                // Gone from the store: a copy is the only one left. A copy, not the
                // decoded object: a clone's lists have no spare capacity, and the
                // channel's buffer keeps it alive until overwritten.
                Event::Delete(obj) => {
                    let _ = self.changes.send(Arc::new(obj.clone()));
                }
                Event::Init => relisted.clear(),
                Event::InitApply(obj) => relisted.push(ObjectRef::from_obj(&obj)),
                Event::InitDone => {
                    self.synced
                        .store(true, std::sync::atomic::Ordering::Release);
                    ready.set_ready();
                    // After a relist, objects that changed while the watch was down
                    // arrive only here: tell subscribers about all of them.
                    for key in relisted.drain(..) {
                        if let Some(obj) = self.store.get(&key) {
                            let _ = self.changes.send(obj);
                        }
                    }
                }
            }
        }
    }
}

/// How many changes a slow subscriber may fall behind before it resyncs from the store.
/// Each slot holds an `Arc` of a past version until overwritten, so the buffer is kept
/// small: a subscriber further behind re-reads the store, which is cheap.
const CHANGES_BUFFER: usize = 1024;

impl<K> Cache<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// An empty cache nothing feeds: for driving webhook routes without an API server
    /// (the fuzz targets in `fuzz/`).
    #[doc(hidden)]
    pub fn in_memory() -> Self {
        let (tx, _) = broadcast::channel(1);
        Cache {
            store: Writer::default().as_reader(),
            owners: OwnerIndex::default(),
            changes: tx,
            progress: Default::default(),
            // Nothing will ever list into it: it is as complete as it will get.
            synced: Arc::new(true.into()),
        }
    }

    /// Whether the first full list has reached the store (it stays so through relists:
    /// the store keeps the previous list until the next one is complete).
    pub fn is_synced(&self) -> bool {
        self.synced.load(std::sync::atomic::Ordering::Acquire)
    }

    /// How far the cache has read: the highest resourceVersion among the events it has
    /// applied. An object created at or below it and absent from the store is gone.
    pub fn resource_version(&self) -> Option<String> {
        match self.progress.load(std::sync::atomic::Ordering::Acquire) {
            0 => None,
            rv => Some(rv.to_string()),
        }
    }

    /// Objects whose controller owner has this UID.
    pub fn owned_by(&self, owner_uid: &str) -> Vec<Arc<K>> {
        self.owners
            .refs(owner_uid)
            .into_iter()
            .filter_map(|r| self.store.get(&r))
            .collect()
    }

    /// Every object now in the cache, then every later change (deletions included).
    /// A subscriber that falls too far behind gets the whole cache again.
    pub fn subscribe(&self) -> impl Stream<Item = Arc<K>> + Send + 'static {
        let rx = self.changes.subscribe();
        let store = self.store.clone();
        let snapshot = stream::iter(self.store.state());
        let live = stream::unfold((rx, store), |(mut rx, store)| async move {
            match rx.recv().await {
                Ok(obj) => Some((stream::iter(vec![obj]), (rx, store))),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, kind = %K::kind(&()), "subscriber lagged; resyncing from the cache");
                    let all = store.state();
                    Some((stream::iter(all), (rx, store)))
                }
                Err(broadcast::error::RecvError::Closed) => None,
            }
        })
        .flatten();
        snapshot.chain(live)
    }
}

impl<K> Cache<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    /// `namespace/name` from the store once it has listed; before that, from the API
    /// server (one GET, not filtered by the cache's selector), so a webhook answers right
    /// while a large cache is still listing (see
    /// [`crate::Readiness::only_controller_waits_for`]). `None`: no such object.
    pub async fn get_or_fetch(
        &self,
        client: &kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<K>>, kube::Error> {
        if self.is_synced() {
            return Ok(self.store.get(&ObjectRef::new(name).within(namespace)));
        }
        let api: Api<K> = Api::namespaced(client.clone(), namespace);
        Ok(api.get_opt(name).await?.map(Arc::new))
    }
}

/// Controller-owner UID → objects, maintained from the same events as the store. It
/// keeps bare keys (name and namespace, without the version and UID an `ObjectRef`
/// can carry) and no reverse map: an object's previous owner is read from the store,
/// which still holds the previous version when the index sees an event. Both cost
/// memory for every cached Pod.
pub struct OwnerIndex<K: Resource>
where
    K::DynamicType: Eq + Hash + Clone,
{
    inner: Arc<RwLock<IndexState<K>>>,
}

struct IndexState<K: Resource>
where
    K::DynamicType: Eq + Hash + Clone,
{
    by_owner: HashMap<String, HashSet<ObjectRef<K>>>,
    relist: Option<Vec<(ObjectRef<K>, String)>>,
}

impl<K: Resource> Default for OwnerIndex<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn default() -> Self {
        OwnerIndex {
            inner: Arc::new(RwLock::new(IndexState {
                by_owner: HashMap::new(),
                relist: None,
            })),
        }
    }
}

impl<K: Resource> Clone for OwnerIndex<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn clone(&self) -> Self {
        OwnerIndex {
            inner: self.inner.clone(),
        }
    }
}

/// An object's key without the version and UID an `ObjectRef` can carry (they do not
/// take part in its equality or hash).
fn bare_ref<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectRef<K> {
    let mut key = ObjectRef::new(obj.meta().name.as_deref().unwrap_or_default());
    key.namespace = obj.meta().namespace.clone();
    key
}

/// The UID of an object's controller owner, if any.
pub fn controller_uid<K: Resource>(obj: &K) -> Option<String> {
    obj.meta()
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
}

impl<K> OwnerIndex<K>
where
    K: Resource<DynamicType = ()> + Clone,
{
    /// Applies one event; `previous_owner` tells the controller owner of the version
    /// the store holds before this event (none if it holds none).
    fn apply(&self, event: &Event<K>, previous_owner: impl Fn(&ObjectRef<K>) -> Option<String>) {
        let mut state = self
            .inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match event {
            Event::Apply(obj) | Event::Delete(obj) => {
                let key = bare_ref(obj);
                let owner = match event {
                    Event::Apply(_) => controller_uid(obj),
                    _ => None,
                };
                let previous = previous_owner(&key);
                if previous != owner
                    && let Some(previous) = previous
                {
                    state.remove(&key, &previous);
                }
                if let Some(owner) = owner {
                    state.by_owner.entry(owner).or_default().insert(key);
                }
            }
            Event::Init => state.relist = Some(Vec::new()),
            Event::InitApply(obj) => {
                if let (Some(relist), Some(uid)) = (state.relist.as_mut(), controller_uid(obj)) {
                    relist.push((bare_ref(obj), uid));
                }
            }
            Event::InitDone => {
                let entries = state.relist.take().unwrap_or_default();
                state.by_owner.clear();
                for (key, uid) in entries {
                    state.by_owner.entry(uid).or_default().insert(key);
                }
                state.by_owner.shrink_to_fit();
            }
        }
    }

    fn refs(&self, owner_uid: &str) -> Vec<ObjectRef<K>> {
        let state = self
            .inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state
            .by_owner
            .get(owner_uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

impl<K: Resource> IndexState<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn remove(&mut self, key: &ObjectRef<K>, owner: &str) {
        if let Some(set) = self.by_owner.get_mut(owner) {
            set.remove(key);
            if set.is_empty() {
                self.by_owner.remove(owner);
            }
        }
    }
}

/// A custom resource as it came off the wire: decoded, or its metadata and the reason it
/// did not decode. Watch `Api<Tolerant<K>>` so one malformed object cannot fail a list.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)] // transient: every value is unwrapped right after decoding
pub enum Tolerant<K> {
    Decoded(K),
    Malformed { metadata: ObjectMeta, error: String },
}

impl<'de, K: DeserializeOwned> serde::Deserialize<'de> for Tolerant<K> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        match K::deserialize(&value) {
            Ok(obj) => Ok(Tolerant::Decoded(obj)),
            Err(err) => {
                let metadata = value
                    .get("metadata")
                    .and_then(|m| ObjectMeta::deserialize(m).ok())
                    .unwrap_or_default();
                Ok(Tolerant::Malformed {
                    metadata,
                    error: err.to_string(),
                })
            }
        }
    }
}

impl<K: Resource<DynamicType = ()>> Resource for Tolerant<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> std::borrow::Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> std::borrow::Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        match self {
            Tolerant::Decoded(obj) => obj.meta(),
            Tolerant::Malformed { metadata, .. } => metadata,
        }
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Tolerant::Decoded(obj) => obj.meta_mut(),
            Tolerant::Malformed { metadata, .. } => metadata,
        }
    }
}

/// Where an object that does not decode is reported, besides the log: a Warning event
/// `Malformed` on the object (its owner sees it in `kubectl describe`) and
/// `kruise_malformed_objects_total{kind}`. Each version (uid, resourceVersion) once per
/// process, so a relist does not repeat it.
#[derive(Clone, Default)]
pub struct MalformedReport {
    events: Option<Events>,
    metrics: Option<Metrics>,
    seen: Arc<Mutex<HashSet<(String, String)>>>,
}

/// Versions remembered before the set is cleared (a relist may then report again).
const MALFORMED_SEEN: usize = 4096;

/// The reason of the Warning event on an object that does not decode.
pub const MALFORMED_REASON: &str = "Malformed";

impl MalformedReport {
    /// Reports with `events` and counts in `metrics`.
    pub fn new(events: Events, metrics: Metrics) -> Self {
        MalformedReport {
            events: Some(events),
            metrics: Some(metrics),
            seen: Arc::default(),
        }
    }

    /// Logs only (tests, tools).
    pub fn log_only() -> Self {
        Self::default()
    }

    /// Reports one malformed version of a `K`; `false` when it was reported already.
    pub fn report<K: Resource<DynamicType = ()>>(
        &self,
        metadata: &ObjectMeta,
        error: &str,
    ) -> bool {
        let kind = K::kind(&());
        let name = metadata.name.clone().unwrap_or_default();
        let namespace = metadata.namespace.clone();
        let version = (
            metadata
                .uid
                .clone()
                .unwrap_or_else(|| format!("{namespace:?}/{name}")),
            metadata.resource_version.clone().unwrap_or_default(),
        );
        {
            let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if seen.len() >= MALFORMED_SEEN {
                seen.clear();
            }
            if !seen.insert(version) {
                return false;
            }
        }
        tracing::warn!(%kind, %name, ?namespace, %error, "skipping an object that does not decode");
        if let Some(metrics) = &self.metrics {
            metrics.malformed_objects.with_label_values(&[&kind]).inc();
        }
        if let Some(events) = &self.events {
            let reference = k8s_openapi::api::core::v1::ObjectReference {
                api_version: Some(K::api_version(&()).into_owned()),
                kind: Some(kind.into_owned()),
                name: Some(name),
                namespace,
                uid: metadata.uid.clone(),
                resource_version: metadata.resource_version.clone(),
                field_path: None,
            };
            let error: String = error.chars().take(512).collect();
            events.warning(
                &reference,
                MALFORMED_REASON,
                format!(
                    "cannot decode this object ({error}); it is left alone, and so are its Pods, until it is fixed"
                ),
            );
        }
        true
    }
}

/// Turns a tolerant event into a typed one. A malformed object is reported, and if the
/// cache holds an earlier (good) version of it, that version is removed: the controller
/// then stops acting on an object it can no longer understand instead of acting on a
/// stale copy.
fn decode_tolerant<K>(
    event: Event<Tolerant<K>>,
    store: &Store<K>,
    report: &MalformedReport,
) -> Option<Event<K>>
where
    K: Resource<DynamicType = ()> + Clone,
{
    // The cached (good) copy of an object, if any.
    let cached = |metadata: &ObjectMeta| {
        let name = metadata.name.clone().unwrap_or_default();
        let namespace = metadata.namespace.clone();
        let mut r = ObjectRef::<K>::new(&name);
        if let Some(ns) = namespace {
            r = r.within(&ns);
        }
        store.get(&r)
    };
    match event {
        Event::Apply(Tolerant::Decoded(obj)) => Some(Event::Apply(obj)),
        Event::Delete(Tolerant::Decoded(obj)) => Some(Event::Delete(obj)),
        Event::InitApply(Tolerant::Decoded(obj)) => Some(Event::InitApply(obj)),
        Event::Apply(Tolerant::Malformed { metadata, error }) => {
            report.report::<K>(&metadata, &error);
            cached(&metadata).map(|old| Event::Delete((*old).clone()))
        }
        // Gone: nothing to warn about, only the cached copy to drop.
        Event::Delete(Tolerant::Malformed { metadata, .. }) => {
            cached(&metadata).map(|old| Event::Delete((*old).clone()))
        }
        Event::InitApply(Tolerant::Malformed { metadata, error }) => {
            report.report::<K>(&metadata, &error);
            None
        }
        Event::Init => Some(Event::Init),
        Event::InitDone => Some(Event::InitDone),
    }
}

/// Names an object for logs: `namespace/name`.
pub fn key<K: Resource>(obj: &K) -> String {
    match obj.namespace() {
        Some(ns) => format!("{ns}/{}", obj.name_any()),
        None => obj.name_any(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn pod(name: &str, owner: Option<&str>) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("ns".into());
        p.metadata.owner_references = owner.map(|uid| {
            vec![OwnerReference {
                uid: uid.into(),
                controller: Some(true),
                kind: "CloneSet".into(),
                name: "cs".into(),
                api_version: "apps.kruise.io/v1alpha1".into(),
                ..Default::default()
            }]
        });
        p
    }

    fn names(index: &OwnerIndex<Pod>, uid: &str) -> Vec<String> {
        let mut v: Vec<String> = index.refs(uid).into_iter().map(|r| r.name).collect();
        v.sort();
        v
    }

    fn pod_at(name: &str, resource_version: &str) -> Pod {
        let mut p = pod(name, Some("u1"));
        p.metadata.resource_version = Some(resource_version.into());
        p
    }

    #[tokio::test]
    async fn a_relist_moves_the_progress_only_when_its_objects_are_in_the_store() {
        let (events, rx) = futures::channel::mpsc::unbounded();
        let readiness = crate::Readiness::default();
        let cache = Cache::<Pod>::spawn_from(rx, readiness.register("cache pods"));
        let send = |e: Event<Pod>| events.unbounded_send(Ok::<_, String>(e)).unwrap();
        let settle = || tokio::time::sleep(std::time::Duration::from_millis(50));
        let has = |name: &str| {
            cache
                .store()
                .get(&ObjectRef::new(name).within("ns"))
                .is_some()
        };
        send(Event::Init);
        send(Event::InitApply(pod_at("a", "5")));
        send(Event::InitDone);
        settle().await;
        assert!(has("a"));
        assert_eq!(cache.resource_version().as_deref(), Some("5"));

        // The watch is lost; "b" was created meanwhile. While the relist runs the store
        // still shows the old state, so the progress must not pass "b" yet: an
        // expectation for "b" would take it for deleted.
        send(Event::Init);
        send(Event::InitApply(pod_at("a", "5")));
        send(Event::InitApply(pod_at("b", "9")));
        settle().await;
        assert!(!has("b"));
        assert_eq!(cache.resource_version().as_deref(), Some("5"));

        send(Event::InitDone);
        settle().await;
        assert!(has("b"));
        assert_eq!(cache.resource_version().as_deref(), Some("9"));
        assert_eq!(names(&cache.owners, "u1"), ["a", "b"]);

        send(Event::Apply(pod_at("c", "12")));
        settle().await;
        assert_eq!(cache.resource_version().as_deref(), Some("12"));
    }

    #[test]
    fn owner_index_follows_applies_deletes_and_relists() {
        let index = OwnerIndex::<Pod>::default();
        // The store, as the index sees it: name → owner, updated after each event.
        let store = std::cell::RefCell::new(HashMap::<String, Option<String>>::new());
        let apply = |event: Event<Pod>| {
            index.apply(&event, |key| {
                store.borrow().get(&key.name).cloned().flatten()
            });
            let mut store = store.borrow_mut();
            match &event {
                Event::Apply(p) => {
                    store.insert(p.name_any(), controller_uid(p));
                }
                Event::Delete(p) => {
                    store.remove(&p.name_any());
                }
                Event::Init | Event::InitApply(_) => {}
                Event::InitDone => store.clear(),
            }
        };
        apply(Event::Apply(pod("a", Some("u1"))));
        apply(Event::Apply(pod("b", Some("u1"))));
        apply(Event::Apply(pod("c", Some("u2"))));
        apply(Event::Apply(pod("d", None)));
        assert_eq!(names(&index, "u1"), ["a", "b"]);
        // Released by its owner (ownerRef removed).
        apply(Event::Apply(pod("b", None)));
        assert_eq!(names(&index, "u1"), ["a"]);
        // Adopted by another owner.
        apply(Event::Apply(pod("d", Some("u2"))));
        apply(Event::Apply(pod("a", Some("u2"))));
        assert!(names(&index, "u1").is_empty());
        assert_eq!(names(&index, "u2"), ["a", "c", "d"]);
        // Updated, same owner: still there once.
        apply(Event::Apply(pod("a", Some("u2"))));
        assert_eq!(names(&index, "u2"), ["a", "c", "d"]);
        apply(Event::Delete(pod("c", Some("u2"))));
        assert_eq!(names(&index, "u2"), ["a", "d"]);
        // A relist replaces everything.
        apply(Event::Init);
        apply(Event::InitApply(pod("x", Some("u1"))));
        assert_eq!(
            names(&index, "u2"),
            ["a", "d"],
            "old view kept until the relist is done"
        );
        apply(Event::InitDone);
        assert_eq!(names(&index, "u1"), ["x"]);
        assert!(names(&index, "u2").is_empty());
    }

    #[test]
    fn tolerant_keeps_metadata_of_objects_that_do_not_decode() {
        #[derive(serde::Deserialize, Debug, Clone)]
        struct Strict {
            #[allow(dead_code)]
            replicas: i32,
        }
        let ok: Tolerant<Strict> = serde_json::from_str(r#"{"replicas": 3}"#).unwrap();
        assert!(matches!(ok, Tolerant::Decoded(Strict { replicas: 3 })));
        let bad: Tolerant<Strict> = serde_json::from_str(
            r#"{"metadata": {"name": "x", "namespace": "n"}, "replicas": "abc"}"#,
        )
        .unwrap();
        match bad {
            Tolerant::Malformed { metadata, error } => {
                assert_eq!(metadata.name.as_deref(), Some("x"));
                assert!(error.contains("invalid type"), "{error}");
            }
            other => panic!("expected malformed, got {other:?}"),
        }
    }

    #[derive(serde::Deserialize, Debug, Clone)]
    struct Replicas {
        metadata: ObjectMeta,
        #[allow(dead_code)]
        replicas: i32,
    }

    impl Resource for Replicas {
        type DynamicType = ();
        type Scope = k8s_openapi::NamespaceResourceScope;
        fn kind(_: &()) -> std::borrow::Cow<'_, str> {
            "Replicas".into()
        }
        fn group(_: &()) -> std::borrow::Cow<'_, str> {
            "test.kruise.io".into()
        }
        fn version(_: &()) -> std::borrow::Cow<'_, str> {
            "v1".into()
        }
        fn plural(_: &()) -> std::borrow::Cow<'_, str> {
            "replicas".into()
        }
        fn meta(&self) -> &ObjectMeta {
            &self.metadata
        }
        fn meta_mut(&mut self) -> &mut ObjectMeta {
            &mut self.metadata
        }
    }

    fn replicas_json(name: &str, rv: &str, replicas: serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "resourceVersion": rv},
            "replicas": replicas,
        })
    }

    #[test]
    fn a_list_with_one_malformed_item_decodes_every_other_item() {
        let list = serde_json::json!({
            "apiVersion": "test.kruise.io/v1", "kind": "ReplicasList",
            "metadata": {"resourceVersion": "10"},
            "items": [
                replicas_json("a", "1", 1.into()),
                replicas_json("bad", "2", "many".into()),
                replicas_json("c", "3", 3.into()),
            ],
        });
        let list: kube::core::ObjectList<Tolerant<Replicas>> =
            serde_json::from_value(list).unwrap();
        let decoded: Vec<String> = list
            .items
            .iter()
            .filter_map(|t| match t {
                Tolerant::Decoded(r) => r.metadata.name.clone(),
                Tolerant::Malformed { .. } => None,
            })
            .collect();
        assert_eq!(decoded, ["a", "c"]);
        assert!(
            matches!(&list.items[1], Tolerant::Malformed { metadata, .. } if metadata.name.as_deref() == Some("bad"))
        );
    }

    #[test]
    fn a_malformed_version_is_counted_once_and_its_stale_copy_dropped() {
        let metrics = Metrics::new();
        let report = MalformedReport {
            events: None,
            metrics: Some(metrics.clone()),
            seen: Arc::default(),
        };
        let mut writer = Writer::<Replicas>::default();
        let store = writer.as_reader();
        let good: Replicas = serde_json::from_value(replicas_json("x", "1", 2.into())).unwrap();
        writer.apply_watcher_event(&Event::Apply(good));
        let bad = || -> Tolerant<Replicas> {
            serde_json::from_value(replicas_json("x", "2", "two".into())).unwrap()
        };
        // The good copy in the cache is withdrawn: the controller must not act on it.
        match decode_tolerant(Event::Apply(bad()), &store, &report) {
            Some(Event::Delete(old)) => {
                assert_eq!(old.metadata.resource_version.as_deref(), Some("1"))
            }
            other => panic!("expected the stale copy deleted, got {other:?}"),
        }
        // The same version again (a relist): skipped, not counted twice.
        assert!(decode_tolerant(Event::InitApply(bad()), &store, &report).is_none());
        let text = metrics.render();
        assert!(
            text.contains("kruise_malformed_objects_total{kind=\"Replicas\"} 1"),
            "{text}"
        );
        // A new malformed version counts again.
        let newer: Tolerant<Replicas> =
            serde_json::from_value(replicas_json("x", "3", "three".into())).unwrap();
        assert!(decode_tolerant(Event::InitApply(newer), &store, &report).is_none());
        assert!(
            metrics
                .render()
                .contains("kruise_malformed_objects_total{kind=\"Replicas\"} 2")
        );
        // Good objects pass through untouched.
        let fine: Tolerant<Replicas> =
            serde_json::from_value(replicas_json("y", "4", 1.into())).unwrap();
        assert!(matches!(
            decode_tolerant(Event::InitApply(fine), &store, &report),
            Some(Event::InitApply(r)) if r.metadata.name.as_deref() == Some("y")
        ));
    }

    #[test]
    fn prune_drops_managed_fields_and_last_applied() {
        let mut meta = ObjectMeta {
            managed_fields: Some(vec![Default::default()]),
            annotations: Some(
                [
                    (
                        "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                        "{}".to_string(),
                    ),
                    ("keep".to_string(), "me".to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        };
        prune_metadata(&mut meta);
        assert!(meta.managed_fields.is_none());
        assert_eq!(
            meta.annotations
                .as_ref()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["keep"]
        );
        // `prune` is the same on a whole object.
        let mut p = Pod::default();
        p.metadata.managed_fields = Some(vec![Default::default()]);
        prune(&mut p);
        assert!(p.metadata.managed_fields.is_none());
    }

    #[test]
    fn a_cache_is_checked_for_readiness_by_its_plural() {
        assert_eq!(check_name::<Pod>(), "cache pods");
        assert_eq!(
            check_name::<Tolerant<k8s_openapi::api::apps::v1::ControllerRevision>>(),
            "cache controllerrevisions"
        );
    }
}
