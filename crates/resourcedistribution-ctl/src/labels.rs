//! This controller's own labels (not upstream's; the well-known RD strings are in
//! `kruise_api::keys`).

/// Label on distributed copies: the UID of the RD that controls them. It lets the
/// controller watch only the Secrets and ConfigMaps it manages (a label selector)
/// instead of caching every Secret of the cluster. Ownership itself is the controller
/// ownerReference.
pub const MANAGED_BY_UID: &str = "apps.kruise.io/resourcedistribution-uid";

/// Label on a ResourceDistribution handled by a namespace-scoped controller instance
/// (tests, namespaced installs) whose watch namespace is the value. RDs are
/// cluster-scoped, so this is how such an instance knows which ones are its own; a
/// cluster-wide instance leaves RDs carrying it alone.
pub const SCOPE: &str = "apps.kruise.io/resourcedistribution-scope";
