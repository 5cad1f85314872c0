//! PLACEHOLDER: replaced by the full PodUnavailableBudget types.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "policy.kruise.io",
    version = "v1alpha1",
    kind = "PodUnavailableBudget",
    plural = "podunavailablebudgets",
    namespaced
)]
pub struct PodUnavailableBudgetSpec {}
