//! What every reconcile shares: the caches, the writer, options, bookkeeping.

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kruise_api::apps_v1alpha1::CloneSet;
use kruise_api::pod::Pod;
use kruise_runtime::{Cache, Reconciler};
use kruise_workload::Writer;
use kube::Client;

use crate::plan::Options;

pub struct Context {
    pub client: Client,
    pub clonesets: Cache<CloneSet>,
    pub pods: Cache<Pod>,
    pub pvcs: Cache<PersistentVolumeClaim>,
    pub revisions: Cache<ControllerRevision>,
    pub writer: Writer,
    pub options: Options,
    pub reconciler: Reconciler,
}
