//! PLACEHOLDER: replaced by the full StatefulSet types.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "StatefulSet",
    plural = "statefulsets",
    namespaced
)]
pub struct StatefulSetSpec {}
