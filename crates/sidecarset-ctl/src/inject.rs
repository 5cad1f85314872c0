//! Sidecar injection into a new Pod (as `openkruise/kruise v1.9.0
//! pkg/webhook/pod/mutating/sidecarset.go` does it): pure, so it is tested without a cluster.
//!
//! [`choose`] picks the SidecarSets (and the revision of each) a Pod gets; [`inject`]
//! builds the Pod with their containers, init containers, volumes, pull secrets and
//! annotations. Both are deterministic given their inputs (the clock and the random draw
//! for `injectionStrategy.revision.policy: Partial` are parameters), idempotent, and
//! independent of the order the SidecarSets are given in.
//!
//! Conflicts the validating webhook normally prevents are still handled here, because a
//! Pod must never be rejected by the apiserver for something we wrote: a container name
//! taken by an earlier SidecarSet (in name order) is not injected again, a sidecar volume
//! whose name the Pod already has is dropped (the Pod's wins), and each case is reported
//! as an admission warning the client shows.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, LocalObjectReference, ObjectFieldSelector, Pod, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps_v1alpha1::{
    PodInjectPolicyType, SidecarContainer, SidecarSet, SidecarSetInjectRevisionPolicy,
    SidecarSetPatchPodMetadata, SidecarSetPatchPolicyType, SidecarSetSpec, SidecarSetUpgradeSpec,
};
use kruise_api::keys;
use serde_json::Value;

use crate::hash::{self, Hashes};
use crate::matching::{self, NamespaceLabels};

/// One SidecarSet to inject, at the revision chosen for this Pod.
#[derive(Clone, Debug)]
pub struct Candidate<'a> {
    pub name: &'a str,
    /// The latest spec, or a historic one restored from a ControllerRevision.
    pub spec: Cow<'a, SidecarSetSpec>,
    pub hashes: Hashes,
    /// Recorded in the Pod's hash annotation (`controllerRevision`).
    pub controller_revision: String,
}

/// What [`choose`] needs to find historic revisions.
pub trait Revisions {
    /// The revision of that name in the revision namespace.
    fn named(&self, name: &str) -> Option<ControllerRevision>;
    /// The revisions of one SidecarSet (label `kruise.io/sidecarset-name`).
    fn of(&self, sidecarset: &str) -> Vec<ControllerRevision>;
}

/// The SidecarSets a new Pod gets, sorted by name, each at its chosen revision.
///
/// `draw` is a uniform random number in [0, 1), used only by `policy: Partial`.
pub fn choose<'a>(
    pod: &Pod,
    sidecarsets: &'a [impl std::borrow::Borrow<SidecarSet>],
    namespaces: &dyn NamespaceLabels,
    revisions: &dyn Revisions,
    draw: &mut dyn FnMut() -> f64,
) -> Vec<Candidate<'a>> {
    let matched: Vec<&'a SidecarSet> = sidecarsets
        .iter()
        .map(std::borrow::Borrow::borrow)
        .filter(|ss| matching::injects_into(ss, pod, namespaces))
        .collect();
    // A canary SidecarSet that matches the Pod replaces its base.
    let replaced: BTreeSet<&str> = matched
        .iter()
        .filter_map(|ss| matching::canary_base(ss))
        .collect();
    let mut chosen: Vec<Candidate<'a>> = matched
        .into_iter()
        .filter(|ss| !replaced.contains(ss.metadata.name.as_deref().unwrap_or_default()))
        .map(|ss| candidate(ss, pod, revisions, draw))
        .collect();
    chosen.sort_by(|a, b| a.name.cmp(b.name));
    chosen
}

fn candidate<'a>(
    ss: &'a SidecarSet,
    pod: &Pod,
    revisions: &dyn Revisions,
    draw: &mut dyn FnMut() -> f64,
) -> Candidate<'a> {
    let name = ss.metadata.name.as_deref().unwrap_or_default();
    let latest = || Candidate {
        name,
        spec: Cow::Borrowed(&ss.spec),
        hashes: hash::hashes_of(ss),
        controller_revision: ss
            .status
            .as_ref()
            .map(|s| s.latest_revision.clone())
            .unwrap_or_default(),
    };
    let Some(wanted) = &ss.spec.injection_strategy.revision else {
        return latest();
    };
    let Some(revision) = find_revision(name, wanted, revisions) else {
        return latest();
    };
    let historic = || restore(ss, &revision).unwrap_or_else(latest);
    let strategy = &ss.spec.update_strategy;
    if strategy.paused || wanted.effective_policy() == SidecarSetInjectRevisionPolicy::Always {
        return historic();
    }
    // Partial: Pods outside the canary selector always get the pinned revision; the
    // others get it with the probability the partition percentage gives.
    if let Some(sel) = &strategy.selector
        && !matching::selects(sel, matching::labels(pod))
    {
        return historic();
    }
    let probability = match &strategy.partition {
        Some(IntOrString::String(p)) => kruise_api::intstr::parse_percent(p)
            .map(|p| p / 100.0)
            .unwrap_or(0.0),
        _ => 0.0,
    };
    if draw() < probability {
        historic()
    } else {
        latest()
    }
}

/// `revisionName`, or the newest revision labelled with `customVersion`.
pub fn find_revision(
    sidecarset: &str,
    wanted: &kruise_api::apps_v1alpha1::SidecarSetInjectRevision,
    revisions: &dyn Revisions,
) -> Option<ControllerRevision> {
    if let Some(name) = wanted.revision_name.as_deref().filter(|n| !n.is_empty()) {
        return revisions.named(name).filter(|r| {
            r.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(keys::SIDECARSET_NAME_LABEL))
                .is_some_and(|n| n == sidecarset)
        });
    }
    let version = wanted.custom_version.as_deref().filter(|v| !v.is_empty())?;
    revisions
        .of(sidecarset)
        .into_iter()
        .filter(|r| {
            r.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(keys::SIDECARSET_CUSTOM_VERSION))
                .is_some_and(|v| v == version)
        })
        .max_by_key(|r| r.revision)
}

/// The SidecarSet as it was at `revision` (its containers, initContainers, volumes,
/// imagePullSecrets and patchPodMetadata), with the hashes recorded on the revision.
fn restore<'a>(ss: &'a SidecarSet, revision: &ControllerRevision) -> Option<Candidate<'a>> {
    let data = revision.data.as_ref()?.0.get("spec")?;
    let mut spec = ss.spec.clone();
    fn field<T: serde::de::DeserializeOwned + Default>(data: &Value, key: &str) -> Option<T> {
        match data.get(key) {
            None | Some(Value::Null) => Some(T::default()),
            Some(v) => serde_json::from_value(v.clone()).ok(),
        }
    }
    spec.containers = field(data, "containers")?;
    spec.init_containers = field(data, "initContainers")?;
    spec.volumes = field(data, "volumes")?;
    spec.image_pull_secrets = field(data, "imagePullSecrets")?;
    spec.patch_pod_metadata = field(data, "patchPodMetadata")?;
    let annotations = revision.metadata.annotations.clone().unwrap_or_default();
    let computed = hash::hashes(&crate::defaults::defaulted_spec(&spec));
    let hashes = Hashes {
        hash: annotations
            .get(keys::SIDECARSET_HASH)
            .cloned()
            .unwrap_or(computed.hash),
        without_image: annotations
            .get(keys::SIDECARSET_HASH_WITHOUT_IMAGE)
            .cloned()
            .unwrap_or(computed.without_image),
    };
    Some(Candidate {
        name: ss.metadata.name.as_deref().unwrap_or_default(),
        spec: Cow::Owned(spec),
        hashes,
        controller_revision: revision.metadata.name.clone().unwrap_or_default(),
    })
}

/// The injected Pod, what was left out and why, and what stops the Pod's creation.
#[derive(Clone, Debug, PartialEq)]
pub struct Injected {
    pub pod: Pod,
    pub warnings: Vec<String>,
    /// A sidecar could not be built as its SidecarSet asks (a `resourcesPolicy` that
    /// matches no container or evaluates to nothing valid): the Pod is denied rather than
    /// started with a sidecar sized wrong.
    pub errors: Vec<String>,
}

/// The containers a `resourcesPolicy` may size a sidecar from: the Pod's own containers
/// and native-sidecar init containers, never injected sidecars.
fn policy_targets(pod: &Pod) -> Vec<&Container> {
    let spec = pod.spec.as_ref();
    let native_init = spec
        .and_then(|s| s.init_containers.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let own = spec.into_iter().flat_map(|s| s.containers.iter());
    native_init.chain(own).filter(|c| !is_injected(c)).collect()
}

/// Sizes a built sidecar by its `resourcesPolicy`, if it has one.
fn apply_resources_policy(
    built: &mut Container,
    sc: &SidecarContainer,
    targets: &[&Container],
) -> Result<(), String> {
    let Some(policy) = &sc.resources_policy else {
        return Ok(());
    };
    let regex = regex::Regex::new(&policy.target_containers_name_regex)
        .map_err(|e| format!("targetContainersNameRegex: {e}"))?;
    let matched: Vec<&Container> = targets
        .iter()
        .copied()
        .filter(|c| regex.is_match(&c.name))
        .collect();
    built.resources = Some(crate::resources_policy::resources_for(policy, &matched)?);
    Ok(())
}

/// The Pod with every candidate's sidecars. `candidates` may come in
/// any order; they are applied by name.
#[allow(
    clippy::expect_used,
    reason = "serde_json serializes maps with string keys without fail"
)]
pub fn inject(pod: &Pod, candidates: &[Candidate<'_>], now: Timestamp) -> Injected {
    let mut sorted: Vec<&Candidate> = candidates.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(b.name));
    let mut out = pod.clone();
    let mut warnings = Vec::new();
    let spec = out.spec.get_or_insert_with(Default::default);
    // App containers: what the Pod came with, less sidecars an earlier injection left.
    let app: Vec<Container> = spec
        .containers
        .iter()
        .filter(|c| !is_injected(c))
        .cloned()
        .collect();
    let mut annotations = out.metadata.annotations.clone().unwrap_or_default();
    let mut hashes = matching::pod_hashes(pod, keys::SIDECARSET_HASH);
    let mut hashes_without_image = matching::pod_hashes(pod, keys::SIDECARSET_HASH_WITHOUT_IMAGE);
    let mut listed: BTreeSet<String> = matching::injected_list(pod)
        .into_iter()
        .map(String::from)
        .collect();
    let mut working = matching::working_twins(pod);
    let targets = policy_targets(pod);
    let mut errors = Vec::new();
    let mut sized = |built: &mut Container, sc: &SidecarContainer, set: &str| {
        if let Err(e) = apply_resources_policy(built, sc, &targets) {
            errors.push(format!(
                "SidecarSet {set}: container {}: resourcesPolicy: {e}",
                sc.name()
            ));
        }
    };

    let mut containers: Vec<(Container, PodInjectPolicyType)> = Vec::new();
    let mut init_containers: Vec<Container> = Vec::new();
    let mut volumes: Vec<Volume> = Vec::new();
    let mut secrets: Vec<LocalObjectReference> = Vec::new();
    // Names injected so far, so a second SidecarSet cannot add a duplicate.
    let mut taken: BTreeMap<String, &str> = BTreeMap::new();

    for c in &sorted {
        if let Err(e) = patch_pod_metadata(&mut annotations, &c.spec.patch_pod_metadata) {
            warnings.push(format!(
                "SidecarSet {}: patchPodMetadata not applied: {e}",
                c.name
            ));
        }
        let mut sidecar_list = BTreeSet::new();
        for ic in &c.spec.init_containers {
            if let Some(owner) = taken.get(ic.name()) {
                warnings.push(format!(
                    "SidecarSet {}: init container {} not injected: SidecarSet {owner} already injects it",
                    c.name,
                    ic.name()
                ));
                continue;
            }
            taken.insert(ic.name().to_string(), c.name);
            if ic.container.restart_policy.as_deref() == Some("Always") {
                sidecar_list.insert(ic.name().to_string());
            }
            volumes.extend(volumes_used(ic, &c.spec.volumes));
            let mut built = build(ic, pod, &app);
            sized(&mut built, ic, c.name);
            init_containers.push(built);
        }
        secrets.extend(c.spec.image_pull_secrets.iter().cloned());
        for sc in &c.spec.containers {
            sidecar_list.insert(sc.name().to_string());
            let names = matching::names_in_pod(sc);
            if let Some(owner) = names.iter().find_map(|n| taken.get(n)) {
                warnings.push(format!(
                    "SidecarSet {}: container {} not injected: SidecarSet {owner} already injects it",
                    c.name,
                    sc.name()
                ));
                continue;
            }
            for n in names {
                taken.insert(n, c.name);
            }
            volumes.extend(volumes_used(sc, &c.spec.volumes));
            let mut built = build(sc, pod, &app);
            sized(&mut built, sc, c.name);
            let policy = sc.inject_policy();
            if sc.is_hot_upgrade() {
                let (one, two) = matching::twin_names(sc.name());
                let mut first = built.clone();
                first.name = one.clone();
                add_version_env(&mut first);
                let mut second = built;
                second.name = two.clone();
                second.image = Some(sc.upgrade_strategy.hot_upgrade_empty_image.clone());
                add_version_env(&mut second);
                for (key, value) in [
                    (version_key(&one), "1"),
                    (version_alt_key(&one), "0"),
                    (version_key(&two), "0"),
                    (version_alt_key(&two), "1"),
                ] {
                    annotations.insert(key, value.to_string());
                }
                working.insert(sc.name().to_string(), one);
                containers.push((first, policy));
                containers.push((second, policy));
            } else {
                containers.push((built, policy));
            }
        }
        let sidecar_list: Vec<String> = sidecar_list.into_iter().collect();
        let at = Time(now);
        hashes.insert(
            c.name.to_string(),
            SidecarSetUpgradeSpec {
                update_timestamp: at.clone(),
                hash: c.hashes.hash.clone(),
                sidecar_set_name: c.name.to_string(),
                sidecar_list: sidecar_list.clone(),
                controller_revision: c.controller_revision.clone(),
            },
        );
        hashes_without_image.insert(
            c.name.to_string(),
            SidecarSetUpgradeSpec {
                update_timestamp: at,
                hash: c.hashes.without_image.clone(),
                sidecar_set_name: c.name.to_string(),
                sidecar_list,
                controller_revision: String::new(),
            },
        );
        listed.insert(c.name.to_string());
    }
    if sorted.is_empty() {
        return Injected {
            pod: out,
            warnings,
            errors,
        };
    }

    // Init containers by name, after the Pod's own.
    init_containers.sort_by(|a, b| a.name.cmp(&b.name));
    let own_init = spec.init_containers.take().unwrap_or_default();
    let merged_init = merge_containers(
        own_init,
        init_containers
            .into_iter()
            .map(|c| (c, PodInjectPolicyType::AfterAppContainer))
            .collect(),
    );
    spec.init_containers = (!merged_init.is_empty()).then_some(merged_init);
    spec.containers = merge_containers(std::mem::take(&mut spec.containers), containers);

    let mut pod_volumes = spec.volumes.take().unwrap_or_default();
    let mut volume_names: BTreeSet<String> = pod_volumes.iter().map(|v| v.name.clone()).collect();
    for v in volumes {
        if volume_names.insert(v.name.clone()) {
            pod_volumes.push(v);
        } else if !pod_volumes.contains(&v) {
            warnings.push(format!(
                "sidecar volume {} not injected: the Pod already has a volume of that name",
                v.name
            ));
        }
    }
    spec.volumes = (!pod_volumes.is_empty()).then_some(pod_volumes);

    let mut pod_secrets = spec.image_pull_secrets.take().unwrap_or_default();
    let mut secret_names: BTreeSet<String> = BTreeSet::new();
    pod_secrets.retain(|s| secret_names.insert(s.name.clone()));
    for s in secrets {
        if secret_names.insert(s.name.clone()) {
            pod_secrets.push(s);
        }
    }
    spec.image_pull_secrets = (!pod_secrets.is_empty()).then_some(pod_secrets);

    annotations.insert(
        keys::SIDECARSET_HASH.into(),
        serde_json::to_string(&hashes).expect("hashes serialize"),
    );
    annotations.insert(
        keys::SIDECARSET_HASH_WITHOUT_IMAGE.into(),
        serde_json::to_string(&hashes_without_image).expect("hashes serialize"),
    );
    annotations.insert(
        keys::SIDECARSET_INJECTED_LIST.into(),
        listed.into_iter().collect::<Vec<_>>().join(","),
    );
    if !working.is_empty() {
        annotations.insert(
            keys::SIDECARSET_WORKING_HOTUPGRADE_CONTAINER.into(),
            serde_json::to_string(&working).expect("map serializes"),
        );
    }
    out.metadata.annotations = Some(annotations);
    Injected {
        pod: out,
        warnings,
        errors,
    }
}

/// A container carrying `IS_INJECTED=true` was put there by a SidecarSet.
pub fn is_injected(c: &Container) -> bool {
    c.env
        .iter()
        .flatten()
        .any(|e| e.name == keys::IS_INJECTED && e.value.as_deref() == Some("true"))
}

fn has_env(c: &Container, name: &str) -> bool {
    c.env.iter().flatten().any(|e| e.name == name)
}

fn push_env_if_absent(c: &mut Container, env: EnvVar) {
    if !has_env(c, &env.name) {
        c.env.get_or_insert_with(Vec::new).push(env);
    }
}

/// The container one sidecar becomes in this Pod (upstream `buildSidecars`).
fn build(sc: &SidecarContainer, pod: &Pod, app: &[Container]) -> Container {
    let mut c = sc.container.clone();
    let mut copied_env: Vec<EnvVar> = Vec::new();
    if sc.share_volume_policy.is_enabled() {
        let mut paths: BTreeSet<String> = c
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| m.mount_path.clone())
            .collect();
        for a in app {
            for m in a.volume_mounts.iter().flatten() {
                if !paths.insert(m.mount_path.clone()) {
                    continue;
                }
                c.volume_mounts.get_or_insert_with(Vec::new).push(m.clone());
                // A subPathExpr's $(VAR) must resolve in the sidecar too.
                for var in sub_path_vars(m.sub_path_expr.as_deref().unwrap_or_default()) {
                    if let Some(e) = a.env.iter().flatten().find(|e| e.name == var) {
                        copied_env.push(e.clone());
                    }
                }
            }
        }
    }
    if sc
        .share_volume_device_policy
        .as_ref()
        .is_some_and(|p| p.is_enabled())
    {
        let mut paths: BTreeSet<String> = c
            .volume_devices
            .iter()
            .flatten()
            .map(|d| d.device_path.clone())
            .collect();
        for a in app {
            for d in a.volume_devices.iter().flatten() {
                if paths.insert(d.device_path.clone()) {
                    c.volume_devices
                        .get_or_insert_with(Vec::new)
                        .push(d.clone());
                }
            }
        }
    }
    push_env_if_absent(
        &mut c,
        EnvVar {
            name: keys::IS_INJECTED.into(),
            value: Some("true".into()),
            value_from: None,
        },
    );
    for env in transfer_envs(sc, pod).into_iter().chain(copied_env) {
        push_env_if_absent(&mut c, env);
    }
    c
}

/// `$(NAME)` references in a subPathExpr.
fn sub_path_vars(expr: &str) -> Vec<&str> {
    let mut vars = Vec::new();
    let mut rest = expr;
    while let Some(start) = rest.find("$(") {
        let after = &rest[start + 2..];
        let Some(end) = after.find(')') else { break };
        let name = &after[..end];
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '.' | '_'))
            && !name.starts_with(|ch: char| ch.is_ascii_digit());
        if valid {
            vars.push(name);
        }
        rest = &after[end + 1..];
    }
    vars
}

/// transferEnv (upstream `GetSidecarTransferEnvs`): whole EnvVars copied from the source container; missing
/// ones are skipped.
fn transfer_envs(sc: &SidecarContainer, pod: &Pod) -> Vec<EnvVar> {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let mut out = Vec::new();
    for t in &sc.transfer_env {
        let source = match t
            .source_container_name_from
            .as_ref()
            .and_then(|f| f.field_ref.as_ref())
        {
            Some(field_ref) => match field_value(pod, &field_ref.field_path) {
                Some(v) => v.to_string(),
                None => continue,
            },
            None => t.source_container_name.clone(),
        };
        let Some(source) = containers.iter().find(|c| c.name == source) else {
            continue;
        };
        let names: BTreeSet<&str> = t.names().collect();
        for name in names {
            if let Some(e) = source.env.iter().flatten().find(|e| e.name == name) {
                out.push(e.clone());
            }
        }
    }
    out
}

/// `metadata.labels['k']` / `metadata.annotations['k']` of the Pod.
pub fn field_value<'p>(pod: &'p Pod, path: &str) -> Option<&'p str> {
    let (map, key) = parse_field_path(path)?;
    let m = match map {
        "metadata.labels" => pod.metadata.labels.as_ref()?,
        "metadata.annotations" => pod.metadata.annotations.as_ref()?,
        _ => return None,
    };
    m.get(key).map(String::as_str)
}

/// Splits `metadata.labels['k']` into (`metadata.labels`, `k`); only labels and
/// annotations are subscriptable.
pub fn parse_field_path(path: &str) -> Option<(&str, &str)> {
    let (map, rest) = path.split_once("['")?;
    let key = rest.strip_suffix("']")?;
    matches!(map, "metadata.labels" | "metadata.annotations")
        .then_some(())
        .filter(|_| !key.is_empty())?;
    Some((map, key))
}

/// The SidecarSet volumes one sidecar mounts (upstream `GetInjectedVolumeMountsAndEnvs`).
fn volumes_used(sc: &SidecarContainer, volumes: &[Volume]) -> Vec<Volume> {
    let mounted: BTreeSet<&str> = sc
        .container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.name.as_str())
        .chain(
            sc.container
                .volume_devices
                .iter()
                .flatten()
                .map(|d| d.name.as_str()),
        )
        .collect();
    volumes
        .iter()
        .filter(|v| mounted.contains(v.name.as_str()))
        .cloned()
        .collect()
}

/// Upstream `mergeSidecarContainers`: a sidecar whose name the Pod already has replaces it in place; the others
/// go before or after the Pod's containers, in the order given.
fn merge_containers(
    mut origins: Vec<Container>,
    injected: Vec<(Container, PodInjectPolicyType)>,
) -> Vec<Container> {
    let index: BTreeMap<String, usize> = origins
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.clone(), i))
        .collect();
    let mut before = Vec::new();
    let mut after = Vec::new();
    for (c, policy) in injected {
        match index.get(&c.name) {
            Some(&i) => origins[i] = c,
            None if policy == PodInjectPolicyType::AfterAppContainer => after.push(c),
            None => before.push(c),
        }
    }
    before.extend(origins);
    before.extend(after);
    before
}

pub fn version_key(container: &str) -> String {
    format!("{}{container}", keys::SIDECARSET_VERSION_ANNOTATION_PREFIX)
}

pub fn version_alt_key(container: &str) -> String {
    format!(
        "{}{container}",
        keys::SIDECARSET_VERSION_ALT_ANNOTATION_PREFIX
    )
}

fn field_ref_env(name: &str, annotation: String) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: Some("v1".into()),
                field_path: format!("metadata.annotations['{annotation}']"),
            }),
            ..Default::default()
        }),
    }
}

fn add_version_env(c: &mut Container) {
    let (version, alt) = (version_key(&c.name), version_alt_key(&c.name));
    let env = c.env.get_or_insert_with(Vec::new);
    env.retain(|e| e.name != keys::SIDECARSET_VERSION && e.name != keys::SIDECARSET_VERSION_ALT);
    env.push(field_ref_env(keys::SIDECARSET_VERSION, version));
    env.push(field_ref_env(keys::SIDECARSET_VERSION_ALT, alt));
}

/// `patchPodMetadata` (upstream `PatchPodMetadata`): Retain adds absent keys, Overwrite sets them,
/// MergePatchJson merges (RFC 7386) into the existing JSON value. On error nothing of the
/// failing entry is applied.
pub fn patch_pod_metadata(
    annotations: &mut BTreeMap<String, String>,
    patches: &[SidecarSetPatchPodMetadata],
) -> Result<(), String> {
    let mut first_error = None;
    for p in patches {
        match p.effective_policy() {
            SidecarSetPatchPolicyType::Retain => {
                for (k, v) in &p.annotations {
                    annotations.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            SidecarSetPatchPolicyType::Overwrite => {
                for (k, v) in &p.annotations {
                    annotations.insert(k.clone(), v.clone());
                }
            }
            SidecarSetPatchPolicyType::MergePatchJson => {
                let mut merged = BTreeMap::new();
                let mut failed = false;
                for (k, patch) in &p.annotations {
                    let value = match annotations.get(k).filter(|v| !v.is_empty()) {
                        None => patch.clone(),
                        Some(origin) => match merge_json(origin, patch) {
                            Ok(v) => v,
                            Err(e) => {
                                first_error.get_or_insert(format!("annotation {k}: {e}"));
                                failed = true;
                                break;
                            }
                        },
                    };
                    merged.insert(k.clone(), value);
                }
                if !failed {
                    annotations.extend(merged);
                }
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn merge_json(origin: &str, patch: &str) -> Result<String, String> {
    let mut doc: Value =
        serde_json::from_str(origin).map_err(|e| format!("existing value is not JSON: {e}"))?;
    let patch: Value =
        serde_json::from_str(patch).map_err(|e| format!("patch is not JSON: {e}"))?;
    json_patch::merge(&mut doc, &patch);
    serde_json::to_string(&doc).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
