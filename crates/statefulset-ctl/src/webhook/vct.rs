//! What an UPDATE may do to `volumeClaimTemplates` when the set
//! resizes its claims (gate `StatefulSetAutoResizePVCGate`, `volumeClaimUpdateStrategy`
//! `OnPodRollingUpdate`), as upstream `ValidateVolumeClaimTemplateUpdate`: no template
//! added, removed or renamed; no change of storage class or access modes; a size
//! change only if the storage class (the default one when the template names none)
//! does not forbid volume expansion. The first problem is reported, as upstream.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kruise_api::apps_v1beta1::{StatefulSet, VolumeClaimUpdateStrategyType};
use kruise_runtime::webhook::field::{FieldError, forbidden, invalid};

use crate::plan::resize::{compatible_without_size, quantity_bytes};

const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";

/// Whether [`errors`] has anything to check (so the caller only then reads the
/// StorageClasses): the strategy is `OnPodRollingUpdate` and the templates changed.
pub fn needs_check(new: &StatefulSet, old: &StatefulSet) -> bool {
    new.spec.volume_claim_update_strategy.type_
        == Some(VolumeClaimUpdateStrategyType::OnPodRollingUpdate)
        && new.spec.volume_claim_templates != old.spec.volume_claim_templates
}

/// The error (at most one) of an UPDATE from `old` to `new`; `classes` are the
/// cluster's StorageClasses.
pub fn errors(new: &StatefulSet, old: &StatefulSet, classes: &[StorageClass]) -> Vec<FieldError> {
    if new.spec.volume_claim_update_strategy.type_
        != Some(VolumeClaimUpdateStrategyType::OnPodRollingUpdate)
    {
        return Vec::new();
    }
    let (templates, old_templates) = (
        &new.spec.volume_claim_templates,
        &old.spec.volume_claim_templates,
    );
    if templates.len() != old_templates.len() {
        return vec![invalid(
            "spec.volumeClaimTemplates",
            json_of(templates),
            "volumeClaimTemplate can not be added or deleted when OnRollingUpdate",
        )];
    }
    for template in templates {
        let name = template.metadata.name.as_deref().unwrap_or_default();
        let path = format!("spec.volumeClaimTemplates[{name}]");
        let Some(old_template) = old_templates
            .iter()
            .find(|t| t.metadata.name.as_deref() == Some(name))
        else {
            return vec![forbidden(
                format!("{path}.name"),
                "volumeClaimTemplate name can not be modified",
            )];
        };
        if !compatible_without_size(old_template, template) {
            return vec![invalid(
                path,
                json_of(template),
                "volumeClaimTemplate can not be modified when OnRollingUpdate",
            )];
        }
        if !resized(old_template, template) {
            continue;
        }
        let class_name = template
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_deref());
        let class = match class_name {
            // The default class; no default: nothing to check.
            None => match default_class(classes) {
                Some(c) => c,
                None => continue,
            },
            Some(n) => match classes
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(n))
            {
                Some(c) => c,
                None => {
                    return vec![invalid(
                        format!("{path}.spec.storageClassName"),
                        format!("{n:?}"),
                        "can not get sc",
                    )];
                }
            },
        };
        if class.allow_volume_expansion == Some(false) {
            return vec![forbidden(
                format!("{path}.spec.resources.requests.storage"),
                format!(
                    "storage class {} does not support volume expansion",
                    class.metadata.name.as_deref().unwrap_or_default()
                ),
            )];
        }
    }
    Vec::new()
}

/// Upstream `isPVCResize`: the storage request or limit changed.
fn resized(old: &PersistentVolumeClaim, new: &PersistentVolumeClaim) -> bool {
    let storage = |c: &PersistentVolumeClaim, limits: bool| {
        let r = c.spec.as_ref()?.resources.as_ref()?;
        let list = if limits { &r.limits } else { &r.requests };
        quantity_bytes(&list.as_ref()?.get("storage")?.0)
    };
    storage(old, false) != storage(new, false) || storage(old, true) != storage(new, true)
}

/// The default StorageClass: annotated `is-default-class: "true"`, the newest if several.
fn default_class(classes: &[StorageClass]) -> Option<&StorageClass> {
    classes
        .iter()
        .filter(|c| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(DEFAULT_CLASS))
                .is_some_and(|v| v == "true")
        })
        .max_by_key(|c| c.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

fn json_of(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
