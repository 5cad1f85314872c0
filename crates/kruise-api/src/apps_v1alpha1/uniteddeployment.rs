//! PLACEHOLDER: replaced by the full UnitedDeployment types.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "UnitedDeployment",
    plural = "uniteddeployments",
    namespaced
)]
pub struct UnitedDeploymentSpec {}
