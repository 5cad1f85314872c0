//! SidecarSet validation (`openkruise/kruise v1.9.0
//! pkg/webhook/sidecarset/validating/sidecarset_create_update_handler.go`), as the validating webhook runs it. Every message names
//! the field, the way the apiserver prints field errors
//! (`spec.selector: Required value: no selector defined for SidecarSet`).
//!
//! Enum-valued fields are checked on the raw JSON first: the typed decode would otherwise
//! reject them with a serde message instead of upstream's.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    SidecarSet, SidecarSetPatchPolicyType, SidecarSetUpdateStrategyType,
};
use serde::Deserialize;
use serde_json::Value;

use crate::inject::{self, Revisions};
use crate::matching::{self, NamespaceLabels};

pub use kruise_runtime::webhook::field::{FieldError, aggregate};
use kruise_runtime::webhook::field::{
    forbidden, invalid_detail as invalid, not_supported_detail as unsupported, required,
};

/// `kruise-configuration`'s `SidecarSet_PatchPodMetadata_WhiteList`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Whitelist {
    #[serde(default)]
    pub rules: Vec<WhitelistRule>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WhitelistRule {
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    pub allowed_annotation_key_exprs: Vec<String>,
}

/// What validation looks at besides the object.
pub struct Context<'a> {
    /// Every other SidecarSet (this one's stored version included is fine; it is skipped).
    pub others: &'a [std::sync::Arc<SidecarSet>],
    pub namespaces: &'a dyn NamespaceLabels,
    pub revisions: &'a dyn Revisions,
    /// The patchPodMetadata whitelist: `Ok(None)` when the ConfigMap or key is absent.
    pub whitelist: Result<Option<Whitelist>, String>,
    /// `SidecarSetPatchPodMetadataDefaultsAllowed`: without a whitelist, or without a
    /// rule selecting this SidecarSet, any annotation may be patched.
    pub patch_metadata_defaults_allowed: bool,
}

/// Rules on the raw object (enum spellings), before it is decoded.
pub fn validate_raw(raw: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = raw.get("spec").unwrap_or(&Value::Null);
    let check = |errors: &mut Vec<FieldError>,
                 value: Option<&Value>,
                 path: String,
                 allowed: &[&str],
                 msg: &str| {
        if let Some(v) = value.filter(|v| !v.is_null()) {
            let ok = v.as_str().is_some_and(|s| allowed.contains(&s));
            if !ok {
                errors.push(unsupported(path, format!("{v}: {msg}")));
            }
        }
    };
    for list in ["containers", "initContainers"] {
        for (i, c) in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let base = format!("spec.{list}[{i}]");
            check(
                &mut errors,
                c.get("podInjectPolicy"),
                format!("{base}.podInjectPolicy"),
                &["BeforeAppContainer", "AfterAppContainer"],
                "unsupported pod inject policy",
            );
            check(
                &mut errors,
                c.pointer("/shareVolumePolicy/type"),
                format!("{base}.shareVolumePolicy.type"),
                &["enabled", "disabled"],
                "unsupported share volume policy",
            );
            check(
                &mut errors,
                c.pointer("/shareVolumeDevicePolicy/type"),
                format!("{base}.shareVolumeDevicePolicy.type"),
                &["enabled", "disabled"],
                "unsupported share volume policy",
            );
            check(
                &mut errors,
                c.pointer("/upgradeStrategy/upgradeType"),
                format!("{base}.upgradeStrategy.upgradeType"),
                &["ColdUpgrade", "HotUpgrade"],
                "unsupported upgrade type",
            );
        }
    }
    check(
        &mut errors,
        spec.pointer("/updateStrategy/type"),
        "spec.updateStrategy.type".into(),
        &["RollingUpdate", "NotUpdate"],
        "unsupported update strategy type",
    );
    check(
        &mut errors,
        spec.pointer("/injectionStrategy/revision/policy"),
        "spec.injectionStrategy.revision.policy".into(),
        &["Always", "Partial"],
        "unsupported revision policy, must be Always or Partial",
    );
    for (i, p) in spec
        .get("patchPodMetadata")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        check(
            &mut errors,
            p.get("patchPolicy"),
            format!("spec.patchPodMetadata[{i}].patchPolicy"),
            &["Retain", "Overwrite", "MergePatchJson"],
            "unsupported patch policy",
        );
    }
    errors
}

/// `resourcesPolicy`: not with `resources`, only on containers and native-sidecar init
/// containers, a regex that compiles, expressions that parse.
fn validate_resources_policy(
    path: &str,
    policy: &kruise_api::apps_v1alpha1::ResourcesPolicy,
    resources: Option<&k8s_openapi::api::core::v1::ResourceRequirements>,
    allowed: bool,
    errors: &mut Vec<FieldError>,
) {
    if !allowed {
        errors.push(forbidden(
            path,
            "resourcesPolicy is only allowed for containers and native sidecar init containers (restartPolicy: Always)",
        ));
        return;
    }
    let has_resources = resources.is_some_and(|r| {
        r.limits.as_ref().is_some_and(|l| !l.is_empty())
            || r.requests.as_ref().is_some_and(|l| !l.is_empty())
    });
    if has_resources {
        errors.push(invalid(
            path,
            "resourcesPolicy and resources cannot be configured together",
        ));
        return;
    }
    let regex = &policy.target_containers_name_regex;
    if regex.is_empty() {
        errors.push(required(
            format!("{path}.targetContainersNameRegex"),
            "invalid empty regex",
        ));
    } else if let Err(e) = regex::Regex::new(regex) {
        errors.push(invalid(
            format!("{path}.targetContainersNameRegex"),
            format!("{regex:?}: invalid regex pattern: {e}"),
        ));
    }
    let expr = &policy.resource_expr;
    if expr.limits.is_none() && expr.requests.is_none() {
        errors.push(required(
            format!("{path}.resourceExpr"),
            "at least one of limits or requests is required",
        ));
    }
    for (field, values) in [("limits", &expr.limits), ("requests", &expr.requests)] {
        for (resource, e) in values
            .iter()
            .flat_map(|v| [("cpu", &v.cpu), ("memory", &v.memory)])
        {
            if e.is_empty() {
                continue;
            }
            if let Err(why) = crate::resources_policy::check(e) {
                errors.push(invalid(
                    format!("{path}.resourceExpr.{field}.{resource}"),
                    format!("{e:?}: {why}"),
                ));
            }
        }
    }
}

fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn validate_selector(path: &str, s: &LabelSelector, errors: &mut Vec<FieldError>) {
    if matching::is_empty_selector(s) {
        errors.push(invalid(path, "empty selector is not valid for sidecarset."));
        return;
    }
    if let Err(e) = kruise_ordering::selector::matches(s, &BTreeMap::new()) {
        errors.push(invalid(path, format!("invalid label selector: {e:?}")));
    }
}

/// Every rule of upstream `validateSidecarSet`. `old` is the stored object on UPDATE.
pub fn validate(ss: &SidecarSet, old: Option<&SidecarSet>, ctx: &Context) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec = &ss.spec;
    let name = ss.metadata.name.as_deref().unwrap_or_default();

    // 1. Name.
    if !is_valid_name(name) {
        errors.push(invalid(
            "metadata.name",
            format!("{name:?}: must match ^[a-zA-Z0-9\\-]+$ and be at most 63 characters"),
        ));
    }

    // 2–3. Selectors and scope.
    match &spec.selector {
        None => errors.push(required(
            "spec.selector",
            "no selector defined for SidecarSet",
        )),
        Some(s) => validate_selector("spec.selector", s, &mut errors),
    }
    if let Some(s) = &spec.namespace_selector {
        validate_selector("spec.namespaceSelector", s, &mut errors);
    }
    if !spec.namespace.is_empty() && spec.namespace_selector.is_some() {
        errors.push(forbidden(
            "spec.namespace",
            "namespace and namespaceSelector are mutually exclusive",
        ));
    }

    // 4–5. Containers and volumes.
    if spec.containers.is_empty() && spec.init_containers.is_empty() {
        errors.push(required(
            "spec",
            "no initContainer or container defined for SidecarSet",
        ));
    }
    let volumes: BTreeSet<&str> = spec.volumes.iter().map(|v| v.name.as_str()).collect();
    let mut volume_names = BTreeSet::new();
    for (i, v) in spec.volumes.iter().enumerate() {
        if v.name.is_empty() {
            errors.push(required(
                format!("spec.volumes[{i}].name"),
                "name is required",
            ));
        } else if !volume_names.insert(v.name.as_str()) {
            errors.push(invalid(
                format!("spec.volumes[{i}].name"),
                format!("{:?}: Duplicate value", v.name),
            ));
        }
    }
    let mut container_names = BTreeSet::new();
    for (list, containers) in [
        ("initContainers", &spec.init_containers),
        ("containers", &spec.containers),
    ] {
        for (i, c) in containers.iter().enumerate() {
            let base = format!("spec.{list}[{i}]");
            let cname = c.name();
            if cname.is_empty() {
                errors.push(required(format!("{base}.name"), "name is required"));
            } else if !container_names.insert(cname.to_string()) {
                errors.push(invalid(
                    format!("{base}.name"),
                    format!("{cname:?}: Duplicate value"),
                ));
            }
            if c.container.image.as_deref().is_none_or(str::is_empty) {
                errors.push(required(format!("{base}.image"), "image is required"));
            }
            for (j, m) in c.container.volume_mounts.iter().flatten().enumerate() {
                if !volumes.contains(m.name.as_str()) {
                    errors.push(invalid(
                        format!("{base}.volumeMounts[{j}].name"),
                        format!("{:?}: volume not found in spec.volumes", m.name),
                    ));
                }
            }
            for (j, d) in c.container.volume_devices.iter().flatten().enumerate() {
                if !volumes.contains(d.name.as_str()) {
                    errors.push(invalid(
                        format!("{base}.volumeDevices[{j}].name"),
                        format!("{:?}: volume not found in spec.volumes", d.name),
                    ));
                }
            }
            if let Some(policy) = &c.resources_policy {
                let native_sidecar = c.container.restart_policy.as_deref() == Some("Always");
                validate_resources_policy(
                    &format!("{base}.resourcesPolicy"),
                    policy,
                    c.container.resources.as_ref(),
                    list == "containers" || native_sidecar,
                    &mut errors,
                );
            }
            for (j, t) in c.transfer_env.iter().enumerate() {
                let path = format!("{base}.transferEnv[{j}]");
                if let Some(field_ref) = t
                    .source_container_name_from
                    .as_ref()
                    .and_then(|f| f.field_ref.as_ref())
                {
                    if field_ref.api_version.as_deref().is_some_and(|v| v != "v1") {
                        errors.push(unsupported(
                            format!("{path}.sourceContainerNameFrom.fieldRef.apiVersion"),
                            "only v1 is supported",
                        ));
                    }
                    if inject::parse_field_path(&field_ref.field_path).is_none() {
                        errors.push(invalid(format!("{path}.sourceContainerNameFrom.fieldRef.fieldPath"),
                            format!("{:?}: only metadata.labels['<key>'] and metadata.annotations['<key>'] are supported", field_ref.field_path)));
                    }
                    if !t.source_container_name.is_empty() {
                        errors.push(forbidden(format!("{path}.sourceContainerName"), "sourceContainerName and sourceContainerNameFrom are mutually exclusive"));
                    }
                } else if t.source_container_name.is_empty() {
                    errors.push(required(
                        format!("{path}.sourceContainerName"),
                        "sourceContainerName or sourceContainerNameFrom is required",
                    ));
                }
                if t.names().next().is_none() {
                    errors.push(required(
                        format!("{path}.envName"),
                        "envName or envNames is required",
                    ));
                }
            }
            if c.is_hot_upgrade() {
                let empty = &c.upgrade_strategy.hot_upgrade_empty_image;
                if list == "initContainers" {
                    errors.push(forbidden(
                        format!("{base}.upgradeStrategy.upgradeType"),
                        "HotUpgrade is only supported for containers",
                    ));
                } else if empty.is_empty() {
                    errors.push(required(
                        format!("{base}.upgradeStrategy.hotUpgradeEmptyImage"),
                        "hotUpgradeEmptyImage is required for HotUpgrade",
                    ));
                } else if Some(empty.as_str()) == c.container.image.as_deref() {
                    errors.push(invalid(
                        format!("{base}.upgradeStrategy.hotUpgradeEmptyImage"),
                        "hotUpgradeEmptyImage must differ from image",
                    ));
                }
            }
        }
    }
    // Hot-upgrade twins must not collide with another sidecar's name.
    for c in spec.containers.iter().filter(|c| c.is_hot_upgrade()) {
        let (one, two) = matching::twin_names(c.name());
        for twin in [one, two] {
            if container_names.contains(&twin) {
                errors.push(invalid(
                    "spec.containers",
                    format!(
                        "container {twin} clashes with the hot-upgrade twin of {}",
                        c.name()
                    ),
                ));
            }
        }
    }

    // 6. Update strategy.
    let strategy = &spec.update_strategy;
    let int_or_percent =
        |field: &str, v: Option<&IntOrString>, errors: &mut Vec<FieldError>| -> Option<bool> {
            let v = v?;
            match kruise_api::intstr::Amount::parse(v) {
                Err(e) => {
                    errors.push(invalid(
                        format!("spec.updateStrategy.{field}"),
                        format!("{v:?}: {e}"),
                    ));
                    None
                }
                Ok(kruise_api::intstr::Amount::Absolute(n)) => Some(n != 0),
                Ok(kruise_api::intstr::Amount::Percent(p)) => Some(p != 0.0),
            }
        };
    let partition_set = int_or_percent("partition", strategy.partition.as_ref(), &mut errors);
    int_or_percent(
        "maxUnavailable",
        strategy.max_unavailable.as_ref(),
        &mut errors,
    );
    if let Some(s) = &strategy.selector {
        validate_selector("spec.updateStrategy.selector", s, &mut errors);
    }
    if strategy.strategy_type() == SidecarSetUpdateStrategyType::RollingUpdate {
        if partition_set == Some(true) && strategy.selector.is_some() {
            errors.push(forbidden(
                "spec.updateStrategy",
                "Partition and Selector cannot be used together",
            ));
        }
        for (field, v) in [
            ("partition", &strategy.partition),
            ("maxUnavailable", &strategy.max_unavailable),
        ] {
            if let Some(v) = v
                && let Ok(amount) = kruise_api::intstr::Amount::parse(v)
                && amount.scale(100, kruise_api::intstr::Rounding::Up) < 0
            {
                errors.push(invalid(
                    format!("spec.updateStrategy.{field}"),
                    format!("{v:?}: must be greater than or equal to 0"),
                ));
            }
        }
        if let Some(p) = &strategy.priority_strategy {
            if !p.weight_priority.is_empty() && !p.order_priority.is_empty() {
                errors.push(forbidden(
                    "spec.updateStrategy.priorityStrategy",
                    "only one of weightPriority and orderPriority can be used",
                ));
            }
            for (i, w) in p.weight_priority.iter().enumerate() {
                if !(0..=100).contains(&w.weight) {
                    errors.push(invalid(
                        format!("spec.updateStrategy.priorityStrategy.weightPriority[{i}].weight"),
                        format!(
                            "{}: weight must be valid number in the range 1-100",
                            w.weight
                        ),
                    ));
                }
                validate_selector(
                    &format!(
                        "spec.updateStrategy.priorityStrategy.weightPriority[{i}].matchSelector"
                    ),
                    &w.match_selector,
                    &mut errors,
                );
            }
            for (i, o) in p.order_priority.iter().enumerate() {
                if o.ordered_key.is_empty() {
                    errors.push(required(
                        format!(
                            "spec.updateStrategy.priorityStrategy.orderPriority[{i}].orderedKey"
                        ),
                        "order key can not be empty",
                    ));
                }
            }
        }
        let mut seen = BTreeSet::new();
        for (i, t) in strategy.scatter_strategy.iter().enumerate() {
            if t.key.is_empty() {
                errors.push(required(
                    format!("spec.updateStrategy.scatterStrategy[{i}].key"),
                    "key can not be empty",
                ));
            }
            if !seen.insert((&t.key, &t.value)) {
                errors.push(invalid(
                    format!("spec.updateStrategy.scatterStrategy[{i}]"),
                    format!("{}={}: duplicated key=value", t.key, t.value),
                ));
            }
        }
        // 11. Native sidecars (initContainers with restartPolicy Always) cannot roll.
        if spec
            .init_containers
            .iter()
            .any(|c| c.container.restart_policy.as_deref() == Some("Always"))
        {
            errors.push(forbidden(
                "spec.updateStrategy.type",
                "The initContainer in-place upgrade is not currently supported.",
            ));
        }
    }

    // 7. Updates.
    if let Some(old) = old {
        let before: BTreeMap<&str, _> = old
            .spec
            .containers
            .iter()
            .map(|c| (c.name(), c.upgrade_type()))
            .collect();
        for (i, c) in spec.containers.iter().enumerate() {
            match before.get(c.name()) {
                None => errors.push(forbidden(
                    format!("spec.containers[{i}].name"),
                    format!("container {} is not found", c.name()),
                )),
                Some(t) if *t != c.upgrade_type() => errors.push(forbidden(
                    format!("spec.containers[{i}].upgradeStrategy.upgradeType"),
                    format!("container {} upgradeType is immutable", c.name()),
                )),
                _ => {}
            }
        }
    }

    // Canary SidecarSets (OpenKruise 1.9): injection only, in place of an existing base.
    if let Some(base) = matching::canary_base(ss) {
        let annotations = format!("annotations[{}]", kruise_api::keys::SIDECARSET_BASE);
        if base == name {
            errors.push(invalid("metadata", "base sidecarSet cannot be itself"));
        }
        let old_base = old.map(|o| {
            o.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(kruise_api::keys::SIDECARSET_BASE))
                .cloned()
                .unwrap_or_default()
        });
        if old_base.is_some_and(|b| b != base) {
            errors.push(invalid("metadata", format!("{annotations} is immutable")));
        }
        match ctx
            .others
            .iter()
            .find(|o| o.metadata.name.as_deref() == Some(base))
        {
            None => errors.push(invalid(
                "metadata",
                format!("fetch base sidecarSet[{base}] failed: not found"),
            )),
            Some(b) if matching::canary_base(b).is_some() => {
                errors.push(invalid("metadata", "base sidecarSet cannot be canary"));
            }
            Some(_) => {}
        }
        if spec.update_strategy.strategy_type() != SidecarSetUpdateStrategyType::NotUpdate {
            errors.push(invalid(
                "metadata",
                "RollingUpdate is not supported for canary sidecarSet",
            ));
        }
    }

    // 8. Conflicts with overlapping SidecarSets (a canary and its base never meet in
    // one Pod: the canary replaces the base).
    let canary_pair = |other: &SidecarSet, other_name: &str| {
        matching::canary_base(ss) == Some(other_name) || matching::canary_base(other) == Some(name)
    };
    for other in ctx.others.iter().map(AsRef::as_ref) {
        let other_name = other.metadata.name.as_deref().unwrap_or_default();
        if other_name == name
            || canary_pair(other, other_name)
            || !overlaps(ss, other, ctx.namespaces)
        {
            continue;
        }
        let theirs: BTreeSet<String> = other
            .spec
            .all_containers()
            .flat_map(matching::names_in_pod)
            .collect();
        for c in spec.all_containers() {
            for n in matching::names_in_pod(c) {
                if theirs.contains(&n) {
                    errors.push(invalid(
                        "spec.containers",
                        format!("container {n} already exist in {other_name}"),
                    ));
                }
            }
        }
        for v in &spec.volumes {
            if let Some(o) = other.spec.volumes.iter().find(|o| o.name == v.name)
                && o != v
            {
                errors.push(invalid(
                    "spec.volumes",
                    format!(
                        "volume {} is in conflict with sidecarset {other_name}",
                        v.name
                    ),
                ));
            }
        }
        for p in &spec.patch_pod_metadata {
            for q in &other.spec.patch_pod_metadata {
                let either_overwrites = p.effective_policy()
                    == SidecarSetPatchPolicyType::Overwrite
                    || q.effective_policy() == SidecarSetPatchPolicyType::Overwrite;
                if !either_overwrites {
                    continue;
                }
                for key in p
                    .annotations
                    .keys()
                    .filter(|k| q.annotations.contains_key(*k))
                {
                    errors.push(invalid(
                        "spec.patchPodMetadata",
                        format!("annotation {key} is in conflict with sidecarset {other_name}"),
                    ));
                }
            }
        }
    }

    // 9. injectionStrategy.revision.
    if let Some(r) = &spec.injection_strategy.revision {
        let empty = |v: &Option<String>| v.as_deref().is_none_or(str::is_empty);
        if empty(&r.revision_name) && empty(&r.custom_version) {
            errors.push(invalid(
                "spec.injectionStrategy.revision",
                "revisionName and customVersion cannot be empty simultaneously",
            ));
        } else if inject::find_revision(name, r, ctx.revisions).is_none() {
            errors.push(invalid(
                "spec.injectionStrategy.revision",
                "Cannot find specific ControllerRevision",
            ));
        }
    }

    // 10. patchPodMetadata.
    let mut keys_seen = BTreeSet::new();
    for (i, p) in spec.patch_pod_metadata.iter().enumerate() {
        if p.annotations.is_empty() {
            errors.push(required(
                format!("spec.patchPodMetadata[{i}].annotations"),
                "annotations can not be empty",
            ));
        }
        for k in p.annotations.keys() {
            if !keys_seen.insert(k) {
                errors.push(invalid(
                    format!("spec.patchPodMetadata[{i}].annotations"),
                    format!("annotation key {k} is duplicated"),
                ));
            }
        }
    }
    if !spec.patch_pod_metadata.is_empty() {
        match &ctx.whitelist {
            Err(e) => errors.push(invalid(
                "spec.patchPodMetadata",
                format!("cannot read the whitelist: {e}"),
            )),
            Ok(None) if ctx.patch_metadata_defaults_allowed => {}
            Ok(None) => errors.push(forbidden(
                "spec.patchPodMetadata",
                "SidecarSet patch metadata whitelist not found",
            )),
            Ok(Some(w)) => {
                let labels = ss.metadata.labels.clone().unwrap_or_default();
                let mut patterns = Vec::new();
                for rule in &w.rules {
                    if rule
                        .selector
                        .as_ref()
                        .is_some_and(|s| !matching::selects(s, &labels))
                    {
                        continue;
                    }
                    for expr in &rule.allowed_annotation_key_exprs {
                        match regex::Regex::new(expr) {
                            Ok(r) => patterns.push(r),
                            Err(e) => errors.push(invalid(
                                "spec.patchPodMetadata",
                                format!("whitelist expression {expr:?}: {e}"),
                            )),
                        }
                    }
                }
                let keys = spec
                    .patch_pod_metadata
                    .iter()
                    .flat_map(|p| p.annotations.keys());
                if patterns.is_empty() && ctx.patch_metadata_defaults_allowed {
                    // No rule selects this SidecarSet: the gate lets anything through.
                } else if patterns.is_empty() {
                    errors.push(forbidden(
                        "spec.patchPodMetadata",
                        "sidecarSet patch metadata annotation is not allowed",
                    ));
                } else {
                    for k in keys {
                        if !patterns.iter().any(|r| r.is_match(k)) {
                            errors.push(forbidden(
                                "spec.patchPodMetadata",
                                format!("sidecarSet patch metadata annotation({k}) is not allowed"),
                            ));
                        }
                    }
                }
            }
        }
    }
    errors
}

/// Two SidecarSets can select the same Pod: their namespace scopes and selectors overlap,
/// selectors by upstream's rule ([`kruise_runtime::selector::overlapping`], as openkruise/kruise
/// v1.9.0 pkg/webhook/sidecarset/validating/sidecarset_create_update_handler.go
/// `validateSidecarConflict`). Namespaces are narrower than there: a SidecarSet pinned to
/// a namespace meets another's namespaceSelector only when that namespace's labels (if it
/// exists) match it.
pub fn overlaps(a: &SidecarSet, b: &SidecarSet, namespaces: &dyn NamespaceLabels) -> bool {
    let scope_overlaps = match (
        (&a.spec.namespace, &a.spec.namespace_selector),
        (&b.spec.namespace, &b.spec.namespace_selector),
    ) {
        ((na, _), (nb, _)) if !na.is_empty() && !nb.is_empty() => na == nb,
        ((n, _), (_, Some(sel))) | ((_, Some(sel)), (n, _)) if !n.is_empty() => {
            // A known namespace is checked against the other's selector; an unknown one
            // might appear with matching labels later.
            namespaces
                .labels_of(n)
                .is_none_or(|labels| matching::selects(sel, &labels))
        }
        ((_, Some(sa)), (_, Some(sb))) => kruise_runtime::selector::overlapping(sa, sb),
        _ => true,
    };
    scope_overlaps
        && match (&a.spec.selector, &b.spec.selector) {
            (Some(sa), Some(sb)) => kruise_runtime::selector::overlapping(sa, sb),
            _ => false,
        }
}

#[cfg(test)]
mod tests;
