//! PLACEHOLDER: replaced by the full ImagePullJob types.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ImagePullJob",
    plural = "imagepulljobs",
    namespaced
)]
pub struct ImagePullJobSpec {}

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ImageListPullJob",
    plural = "imagelistpulljobs",
    namespaced
)]
pub struct ImageListPullJobSpec {}
