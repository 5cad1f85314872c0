//! Resource deletion protection (docs/deletion-protection.md; openkruise/kruise v1.9.0
//! pkg/webhook/util/deletionprotection/deletion_protection.go; gate `ResourcesDeletionProtection`,
//! docs/feature-gates.md): a DELETE of a Namespace, CRD, workload, Service or Ingress labelled
//! `policy.kruise.io/delete-protection: Always` is refused, and one labelled `Cascading` while it
//! still has live dependants (active Pods, CRs, replicas).
//!
//! A webhook-only binary: no controller, no cache, no Lease (every replica answers the
//! same). The judgment is [`judgment`] (pure); [`webhook`] reads the request and counts.

pub mod error;
pub mod judgment;
pub mod webhook;

use kruise_runtime::{Runtime, gates};

/// The name of the binary's objects (Deployment, ServiceAccount, metrics Service), its
/// field manager and event reporter (it reports none).
pub const CONTROLLER_NAME: &str = "deletionprotection-controller";

/// The label of the ClusterRoles aggregated into `kruise-deletionprotection-custom-resources`
/// (kustomize/controllers/protection/rbac.yaml): the `list` grants on the custom resources
/// of CRDs outside OpenKruise's groups that users label `Cascading`. protection-ctl's own
/// ClusterRole lists OpenKruise's kinds only, never every resource (which would cover
/// Secrets).
pub const AGGREGATE_LABEL: &str = "policy.kruise.io/aggregate-to-deletion-protection";

/// Who this binary is (its client's User-Agent is `protection-ctl/<version>`).
pub const IDENTITY: kruise_runtime::Identity = kruise_runtime::identity!(CONTROLLER_NAME);

/// Serves the webhook until shutdown. With the gate off (the default, as in upstream v1.9.0;
/// OpenKruise v0.9.0 release notes ask users to turn it on explicitly) the configurations are still
/// registered (kustomize ships them: they need the CA bundle this fills in, or every labelled
/// delete would fail the TLS handshake) and the route allows every delete.
pub async fn run(runtime: Runtime) -> anyhow::Result<()> {
    let enabled = runtime.gates.enabled(gates::RESOURCES_DELETION_PROTECTION);
    if !enabled {
        tracing::warn!(
            "gate ResourcesDeletionProtection is off: no delete is refused (KRUISE_FEATURE_GATES=ResourcesDeletionProtection=true turns it on)"
        );
    }
    let gates = webhook::Gates {
        enabled,
        crd_cascading: runtime
            .gates
            .enabled(gates::DELETION_PROTECTION_FOR_CRD_CASCADING_GATE),
    };
    let routes = webhook::routes(runtime.client.clone(), gates);
    runtime
        .serve_webhooks(routes, webhook::configurations)
        .await?;
    Ok(())
}
