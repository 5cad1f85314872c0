//! As in openkruise/kruise v1.9.0 pkg/controller/podunavailablebudget/podunavailablebudget_controller.go: a change to the replicas of a Deployment, a StatefulSet (apps or Kruise) or
//! a CloneSet requeues the PUBs of its namespace. Without it a PUB counts a scaled-down
//! workload's old total until its next resync, and refuses the very deletions the
//! scale-down needs.
//!
//! The workloads are watched metadata-only (no spec crosses the wire, nothing is cached
//! but one number per workload): a spec change bumps `metadata.generation`, and a
//! deletion sets `deletionTimestamp`, the two moments a workload's expected total can
//! change. A rollout's template change wakes the PUBs too, which costs one reconcile.

use std::collections::HashMap;
use std::sync::Arc;

use futures::{Stream, StreamExt, stream};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_api::apps_v1beta1::StatefulSet as AdvancedStatefulSet;
use kruise_api::policy_v1alpha1::PodUnavailableBudget;
use kruise_runtime::Runtime;
use kube::Client;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

/// What decides a workload's expected total, as far as its metadata shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    generation: i64,
    deleting: bool,
}

/// Whether `now` differs from what was `before` (a workload seen for the first time, as
/// on every (re)list, is not a change: the PUBs' own watch already covers start-up).
fn changed(before: Option<Seen>, now: Option<Seen>) -> bool {
    before.is_some() && before != now
}

/// Where the workloads are watched: `KRUISE_WATCH_NAMESPACE`, or everywhere.
#[derive(Clone)]
pub struct Scope {
    client: Client,
    namespace: Option<String>,
}

impl Scope {
    pub fn of(runtime: &Runtime) -> Scope {
        Scope {
            client: runtime.client.clone(),
            namespace: runtime.settings.watch_namespace.clone(),
        }
    }

    fn api<K>(&self) -> Api<PartialObjectMeta<K>>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }
}

/// The namespaces whose workloads' expected totals changed, one item per change.
fn changes_of<K>(api: Api<PartialObjectMeta<K>>) -> impl Stream<Item = String> + Send
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let mut seen: HashMap<String, Seen> = HashMap::new();
    watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(move |event| {
            let out = match event {
                Ok(watcher::Event::Apply(m) | watcher::Event::InitApply(m)) => {
                    let uid = m.metadata.uid.clone().unwrap_or_default();
                    let now = Seen {
                        generation: m.metadata.generation.unwrap_or_default(),
                        deleting: m.metadata.deletion_timestamp.is_some(),
                    };
                    let before = seen.insert(uid, now);
                    changed(before, Some(now)).then(|| m.metadata.namespace.unwrap_or_default())
                }
                Ok(watcher::Event::Delete(m)) => {
                    let uid = m.metadata.uid.clone().unwrap_or_default();
                    let before = seen.remove(&uid);
                    changed(before, None).then(|| m.metadata.namespace.unwrap_or_default())
                }
                Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
                Err(e) => {
                    tracing::debug!(kind = K::kind(&()).as_ref(), "workload watch: {e}");
                    None
                }
            };
            futures::future::ready(out)
        })
}

/// The PUBs to look at again, whenever a workload's expected total may have changed.
pub fn replica_changes(
    scope: &Scope,
    pubs: Store<PodUnavailableBudget>,
) -> impl Stream<Item = ObjectRef<PodUnavailableBudget>> + Send + 'static {
    let namespaces = stream::select_all([
        changes_of(scope.api::<Deployment>()).boxed(),
        changes_of(scope.api::<StatefulSet>()).boxed(),
        changes_of(scope.api::<CloneSet>()).boxed(),
        changes_of(scope.api::<AdvancedStatefulSet>()).boxed(),
    ]);
    namespaces.flat_map(move |namespace| {
        let refs: Vec<_> = pubs
            .state()
            .iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(namespace.as_str()))
            .map(|p| ObjectRef::from_obj(Arc::as_ref(p)))
            .collect();
        stream::iter(refs)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT_1: Seen = Seen {
        generation: 1,
        deleting: false,
    };

    #[test]
    fn a_spec_change_or_a_deletion_is_a_change_a_first_sighting_is_not() {
        assert!(!changed(None, Some(AT_1)));
        assert!(!changed(Some(AT_1), Some(AT_1)));
        let scaled = Seen {
            generation: 2,
            ..AT_1
        };
        assert!(changed(Some(AT_1), Some(scaled)));
        let deleting = Seen {
            deleting: true,
            ..AT_1
        };
        assert!(changed(Some(AT_1), Some(deleting)));
        assert!(changed(Some(AT_1), None));
        assert!(!changed(None, None));
    }
}
