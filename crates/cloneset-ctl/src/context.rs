//! What every reconcile shares: the caches, the Pod writer, expectations, options.

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_runtime::{Backoff, Cache, Instruments};
use kruise_workload::{Expectations, PodControl};
use kube::Client;

use crate::plan::Options;

pub struct Context {
    pub client: Client,
    pub clonesets: Cache<CloneSet>,
    pub pods: Cache<Pod>,
    pub pvcs: Cache<PersistentVolumeClaim>,
    pub revisions: Cache<ControllerRevision>,
    pub control: PodControl,
    pub pod_expectations: Expectations,
    pub pvc_expectations: Expectations,
    pub options: Options,
    pub instruments: Instruments,
    pub backoff: Backoff,
}
