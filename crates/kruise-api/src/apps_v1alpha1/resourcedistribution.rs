//! PLACEHOLDER: replaced by the full ResourceDistribution types.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ResourceDistribution",
    plural = "resourcedistributions",
    namespaced
)]
pub struct ResourceDistributionSpec {}
