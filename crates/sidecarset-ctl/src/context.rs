//! What every reconcile and every admission review shares: the caches, the Pod writer,
//! expectations, and what the webhook configuration currently promises.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kruise_api::apps_v1alpha1::SidecarSet;
use kruise_api::keys;
use kruise_runtime::{Cache, Reconciler};
use kruise_workload::{Expectations, PodControl};
use kube::Client;
use kube::runtime::reflector::ObjectRef;

use crate::inject::Revisions;
use crate::matching::NamespaceLabels;

pub struct Context {
    pub client: Client,
    pub sidecarsets: Cache<SidecarSet>,
    /// Every Pod in scope; Pods nothing was injected into are kept as bare names.
    pub pods: Cache<Pod>,
    pub namespaces: Cache<Namespace>,
    pub revisions: Cache<ControllerRevision>,
    /// Where ControllerRevisions (and `kruise-configuration`) live: the manager
    /// namespace, or the watch namespace of a namespace-scoped install.
    pub revision_namespace: String,
    /// A namespace-scoped install manages only SidecarSets confined to its namespace.
    pub watch_namespace: Option<String>,
    pub control: PodControl,
    pub expectations: Expectations,
    pub reconciler: Reconciler,
    /// Every cache the webhook reads has listed once.
    pub synced: Arc<AtomicBool>,
    pub coverage: Coverage,
    /// `SidecarSetPatchPodMetadataDefaultsAllowed`: patchPodMetadata needs no whitelist
    /// entry (the whitelist still binds when one of its rules selects the SidecarSet).
    pub patch_metadata_defaults_allowed: bool,
    /// The Pod webhook's matchCondition as this replica last registered it.
    pub conditions: PodConditions,
    /// `KRUISE_SIDECARSET_NOTUPDATE_LIVE_STATUS`: a `NotUpdate` SidecarSet's status
    /// follows every change of its Pods (upstream's is as of their creation; see
    /// [`crate::wakes`]).
    pub notupdate_live_status: bool,
    /// What wakes a SidecarSet, and the Pods as created for the next reconcile of a
    /// `NotUpdate` one ([`crate::wakes`]).
    pub wakes: Arc<crate::wakes::Wakes>,
}

/// What the Pod webhook's matchCondition is built from and what was registered.
///
/// The SidecarSet validating webhook widens the condition for a SidecarSet *before*
/// admitting it: waiting for the cache to show the new SidecarSet (then registering,
/// then the apiserver reloading its webhook configurations) leaves a window of some
/// 100 ms in which a Pod created right after the SidecarSet is not sent to the
/// webhook and is not injected (OpenKruise's "inject pod sidecar during canary
/// upgrades" spec creates its Deployments at once and hits it).
#[derive(Default)]
pub struct PodConditions {
    /// Serializes registrations; holds the expression last registered (`None` inside
    /// when every Pod in scope is sent), or nothing before the first registration.
    pub applied: tokio::sync::Mutex<Option<Option<String>>>,
    /// SidecarSets admitted but perhaps not yet in the cache, kept in the condition for
    /// [`ADMITTED_GRACE`] (a rejected-later create only over-approximates meanwhile).
    admitted: Mutex<Vec<(std::time::Instant, Arc<SidecarSet>)>>,
    /// The server registering the configurations, once it can (unset: nothing to widen).
    pub server: std::sync::OnceLock<kruise_runtime::WebhookServer>,
}

/// How long an admitted SidecarSet counts without the cache showing it.
pub const ADMITTED_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

impl PodConditions {
    pub fn admit(&self, ss: Arc<SidecarSet>) {
        let mut admitted = self
            .admitted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        admitted.push((std::time::Instant::now(), ss));
    }

    /// The admitted SidecarSets still within their grace period.
    pub fn recently_admitted(&self) -> Vec<Arc<SidecarSet>> {
        self.recently_admitted_within(ADMITTED_GRACE)
    }

    /// The SidecarSets admitted less than `age` ago.
    pub fn recently_admitted_within(&self, age: std::time::Duration) -> Vec<Arc<SidecarSet>> {
        let mut admitted = self
            .admitted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        admitted.retain(|(at, _)| at.elapsed() < ADMITTED_GRACE);
        admitted
            .iter()
            .filter(|(at, _)| at.elapsed() < age)
            .map(|(_, ss)| ss.clone())
            .collect()
    }
}

impl Context {
    /// Whether this instance acts on the SidecarSet (spec.namespace is its watch
    /// namespace when it is namespace-scoped).
    pub fn manages(&self, ss: &SidecarSet) -> bool {
        manages(self.watch_namespace.as_deref(), ss)
    }

    /// The SidecarSets this instance injects and reconciles.
    pub fn managed_sidecarsets(&self) -> Vec<Arc<SidecarSet>> {
        let mut all = self.sidecarsets.store().state();
        all.retain(|ss| self.manages(ss));
        all
    }

    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }
}

pub fn manages(watch_namespace: Option<&str>, ss: &SidecarSet) -> bool {
    watch_namespace.is_none_or(|ns| ss.spec.namespace == ns)
}

impl NamespaceLabels for Cache<Namespace> {
    fn labels_of(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.store()
            .get(&ObjectRef::new(namespace))
            .map(|n| n.metadata.labels.clone().unwrap_or_default())
    }
}

/// The revisions cache, restricted to the revision namespace.
pub struct RevisionStore<'a> {
    pub cache: &'a Cache<ControllerRevision>,
    pub namespace: &'a str,
}

impl Revisions for RevisionStore<'_> {
    fn named(&self, name: &str) -> Option<ControllerRevision> {
        self.cache
            .store()
            .get(&ObjectRef::new(name).within(self.namespace))
            .map(|r| (*r).clone())
    }

    fn of(&self, sidecarset: &str) -> Vec<ControllerRevision> {
        self.cache
            .store()
            .state()
            .into_iter()
            .filter(|r| {
                r.metadata.namespace.as_deref() == Some(self.namespace)
                    && r.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(keys::SIDECARSET_NAME_LABEL))
                        .is_some_and(|n| n == sidecarset)
            })
            .map(|r| (*r).clone())
            .collect()
    }
}

/// Which SidecarSets the registered Pod webhook's matchCondition covers, so status
/// `observedGeneration` can promise that new Pods are sent to the webhook.
#[derive(Clone, Default)]
pub struct Coverage {
    inner: Arc<Mutex<CoverageState>>,
}

#[derive(Default)]
struct CoverageState {
    /// No condition registered (every Pod in scope is sent), or no webhook registered
    /// at all (nothing to wait for).
    everything: bool,
    parts: BTreeSet<String>,
}

impl Coverage {
    /// Everything is covered: no webhook to wait for, or no condition narrowing it.
    pub fn set_everything(&self) {
        let mut s = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.everything = true;
        s.parts.clear();
    }

    /// The condition registered now covers exactly these parts.
    pub fn set_parts(&self, parts: BTreeSet<String>) {
        let mut s = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.everything = false;
        s.parts = parts;
    }

    /// Whether Pods this SidecarSet injects into reach the webhook.
    pub fn covers(&self, ss: &SidecarSet) -> bool {
        let s = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        s.everything
            || crate::conditions::sidecarset_expression(ss).is_none_or(|p| s.parts.contains(&p))
    }
}
