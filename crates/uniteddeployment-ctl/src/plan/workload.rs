//! The subset workload (openkruise/kruise v1.9.0 pkg/controller/uniteddeployment/adapter): which
//! kind, and the object built from the template for one subset. Pure; works on JSON so the four
//! kinds share one builder.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use kruise_api::apps_v1alpha1::{Subset, SubsetTemplate, UnitedDeployment};
use kruise_api::keys;
use kruise_workload::strategic::strategic_merge;
use serde_json::{Map, Value, json};

/// The kind of the subset workloads, from the one template the UD sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkloadKind {
    /// `apps/v1` StatefulSet (`statefulSetTemplate`).
    StatefulSet,
    /// `apps.kruise.io/v1beta1` StatefulSet (`advancedStatefulSetTemplate`).
    AdvancedStatefulSet,
    /// `apps.kruise.io/v1alpha1` CloneSet (a v1alpha1-shaped `cloneSetTemplate`).
    CloneSet,
    /// `apps.kruise.io/v1beta1` CloneSet (a v1beta1-shaped `cloneSetTemplate`, as
    /// OpenKruise v1.9.0 types it; see `kruise_api::apps_v1alpha1::is_v1beta1_cloneset_spec`).
    /// The same objects as [`WorkloadKind::CloneSet`], written through the v1beta1
    /// endpoint (cloneset-ctl's conversion webhook); the caches read them at v1alpha1.
    CloneSetV1beta1,
    /// `apps/v1` Deployment (`deploymentTemplate`).
    Deployment,
}

impl WorkloadKind {
    pub const ALL: [WorkloadKind; 5] = [
        WorkloadKind::StatefulSet,
        WorkloadKind::AdvancedStatefulSet,
        WorkloadKind::CloneSet,
        WorkloadKind::CloneSetV1beta1,
        WorkloadKind::Deployment,
    ];

    /// The kind of the template that is set (the first, if admission let several in).
    pub fn of(template: &SubsetTemplate) -> Option<Self> {
        if template.stateful_set_template.is_some() {
            Some(WorkloadKind::StatefulSet)
        } else if template.advanced_stateful_set_template.is_some() {
            Some(WorkloadKind::AdvancedStatefulSet)
        } else if let Some(clone_set) = &template.clone_set_template {
            // A v1beta1-shaped template gives v1beta1 CloneSets, as OpenKruise v1.9.0's
            // pkg/controller/uniteddeployment/adapter/cloneset_adapter.go builds them.
            Some(if clone_set.is_v1beta1() {
                WorkloadKind::CloneSetV1beta1
            } else {
                WorkloadKind::CloneSet
            })
        } else if template.deployment_template.is_some() {
            Some(WorkloadKind::Deployment)
        } else {
            None
        }
    }

    /// The template's key in `spec.template`.
    pub fn template_key(self) -> &'static str {
        match self {
            WorkloadKind::StatefulSet => "statefulSetTemplate",
            WorkloadKind::AdvancedStatefulSet => "advancedStatefulSetTemplate",
            WorkloadKind::CloneSet | WorkloadKind::CloneSetV1beta1 => "cloneSetTemplate",
            WorkloadKind::Deployment => "deploymentTemplate",
        }
    }

    pub fn api_version(self) -> &'static str {
        match self {
            WorkloadKind::StatefulSet | WorkloadKind::Deployment => "apps/v1",
            WorkloadKind::AdvancedStatefulSet => "apps.kruise.io/v1beta1",
            WorkloadKind::CloneSet => "apps.kruise.io/v1alpha1",
            WorkloadKind::CloneSetV1beta1 => "apps.kruise.io/v1beta1",
        }
    }

    /// The kind as the controller's caches read these objects: a v1beta1 CloneSet is
    /// stored, watched and found as a v1alpha1 one (the same label selector finds it).
    pub fn objects(self) -> Self {
        match self {
            WorkloadKind::CloneSetV1beta1 => WorkloadKind::CloneSet,
            other => other,
        }
    }

    /// Whether the two kinds are the same objects (read or written at either version).
    pub fn same_objects(self, other: Self) -> bool {
        self.objects() == other.objects()
    }

    pub fn kind(self) -> &'static str {
        match self {
            WorkloadKind::StatefulSet | WorkloadKind::AdvancedStatefulSet => "StatefulSet",
            WorkloadKind::CloneSet | WorkloadKind::CloneSetV1beta1 => "CloneSet",
            WorkloadKind::Deployment => "Deployment",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            WorkloadKind::StatefulSet | WorkloadKind::AdvancedStatefulSet => "statefulsets",
            WorkloadKind::CloneSet | WorkloadKind::CloneSetV1beta1 => "clonesets",
            WorkloadKind::Deployment => "deployments",
        }
    }

    /// Where the workload keeps its update partition (a Deployment has none).
    pub fn partition_path(self) -> Option<&'static [&'static str]> {
        match self {
            WorkloadKind::StatefulSet
            | WorkloadKind::AdvancedStatefulSet
            | WorkloadKind::CloneSetV1beta1 => {
                Some(&["updateStrategy", "rollingUpdate", "partition"])
            }
            WorkloadKind::CloneSet => Some(&["updateStrategy", "partition"]),
            WorkloadKind::Deployment => None,
        }
    }

    /// Where the workload keeps its rolling update's maxUnavailable (set by the UD only
    /// for `reserveUnschedulablePods`, which admission allows for CloneSets and
    /// Deployments).
    pub fn max_unavailable_path(self) -> Option<&'static [&'static str]> {
        match self {
            WorkloadKind::CloneSet => Some(&["updateStrategy", "maxUnavailable"]),
            WorkloadKind::CloneSetV1beta1 => {
                Some(&["updateStrategy", "rollingUpdate", "maxUnavailable"])
            }
            WorkloadKind::Deployment => Some(&["strategy", "rollingUpdate", "maxUnavailable"]),
            WorkloadKind::StatefulSet | WorkloadKind::AdvancedStatefulSet => None,
        }
    }
}

/// A subset workload as the plan sees it, whatever its kind.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    pub kind: WorkloadKind,
    pub meta: ObjectMeta,
    /// `spec.replicas` (1 when unset, as the workload controllers read it).
    pub replicas: i32,
    /// The update partition (`None`: unset, or a kind without one).
    pub partition: Option<i32>,
    /// `status.readyReplicas`.
    pub ready_replicas: i32,
}

impl Observed {
    pub fn name(&self) -> &str {
        self.meta.name.as_deref().unwrap_or_default()
    }

    fn label(&self, key: &str) -> Option<&str> {
        self.meta.labels.as_ref()?.get(key).map(String::as_str)
    }

    /// The `apps.kruise.io/subset-name` label.
    pub fn subset(&self) -> Option<&str> {
        self.label(keys::UD_SUBSET_NAME)
    }

    /// The `apps.kruise.io/controller-revision-hash` label.
    pub fn revision(&self) -> Option<&str> {
        self.label(keys::UD_CONTROLLER_REVISION_HASH)
    }

    /// The `apps.kruise.io/subset-patch` annotation.
    pub fn patch(&self) -> Option<&str> {
        self.meta
            .annotations
            .as_ref()?
            .get(keys::UD_SUBSET_PATCH)
            .map(String::as_str)
    }

    pub fn is_deleting(&self) -> bool {
        self.meta.deletion_timestamp.is_some()
    }
}

/// `<ud>-<subset>-`, or `<ud>-` when that is not a valid name prefix (upstream's rule:
/// the prefix plus one character must be a DNS subdomain).
pub fn generate_name(ud: &str, subset: &str) -> String {
    let prefix = format!("{ud}-{subset}-");
    if kruise_workload::admission::is_dns_subdomain(&format!("{prefix}a")) {
        prefix
    } else {
        format!("{ud}-")
    }
}

/// The subset's patch as stored in `apps.kruise.io/subset-patch` (`None`: no patch).
pub fn patch_annotation(subset: &Subset) -> Option<String> {
    subset
        .patch
        .as_ref()
        .filter(|p| !p.is_null())
        .map(Value::to_string)
}

/// Everything one subset's workload is built from.
pub struct Build<'a> {
    pub ud: &'a UnitedDeployment,
    pub kind: WorkloadKind,
    pub subset: &'a Subset,
    /// The UD revision the workload is built from (its name).
    pub revision: &'a str,
    pub replicas: i32,
    pub partition: i32,
}

/// The UD as its workloads' controller owner.
pub fn owner_reference(ud: &UnitedDeployment) -> OwnerReference {
    kruise_runtime::meta::controller_owner_reference(ud)
}

/// The whole workload object of a subset (generateName, labels, annotations, owner,
/// spec), ready to create; `None` when the UD has no template.
#[allow(
    clippy::expect_used,
    reason = "the JSON is built in this module: the keys and shapes expected were inserted above"
)]
pub fn desired(b: &Build<'_>) -> Option<Value> {
    let template = serde_json::to_value(&b.ud.spec.template).ok()?;
    let template = template.get(b.kind.template_key())?;
    let ud_name = b.ud.metadata.name.as_deref().unwrap_or_default();
    let subset = b.subset.name.as_str();

    let mut labels: BTreeMap<String, String> = string_map(template.pointer("/metadata/labels"));
    labels.extend(b.ud.spec.selector.match_labels.clone().unwrap_or_default());
    labels.insert(keys::UD_CONTROLLER_REVISION_HASH.into(), b.revision.into());
    labels.insert(keys::UD_SUBSET_NAME.into(), subset.into());
    let mut annotations = string_map(template.pointer("/metadata/annotations"));
    if let Some(patch) = patch_annotation(b.subset) {
        annotations.insert(keys::UD_SUBSET_PATCH.into(), patch);
    }

    let mut spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
    let spec_map = object(&mut spec);
    spec_map.insert("replicas".into(), json!(b.replicas));
    spec_map.insert(
        "selector".into(),
        serde_json::to_value(subset_selector(&b.ud.spec.selector, subset)).ok()?,
    );
    let pod_template = object(spec_map.entry("template").or_insert_with(|| json!({})));
    let pod_labels = object(
        object(pod_template.entry("metadata").or_insert_with(|| json!({})))
            .entry("labels")
            .or_insert_with(|| json!({})),
    );
    pod_labels.insert(keys::UD_SUBSET_NAME.into(), json!(subset));
    pod_labels.insert(keys::UD_CONTROLLER_REVISION_HASH.into(), json!(b.revision));
    let pod_spec = object(pod_template.entry("spec").or_insert_with(|| json!({})));
    attach_node_affinity(pod_spec, b.subset);
    attach_tolerations(pod_spec, b.subset);
    if let Some(patch) = b.subset.patch.as_ref().filter(|p| p.is_object()) {
        let pod_template = spec_map.get_mut("template").expect("inserted above");
        strategic_merge(pod_template, patch, "");
    }
    if let Some(path) = b.kind.partition_path() {
        // A StatefulSet with `OnDelete` takes no rollingUpdate: it has no partition. A
        // v1beta1 CloneSet gets `rollingUpdate.partition` whatever its type, as upstream's
        // cloneset_adapter.go `ApplySubsetTemplate` writes it.
        let on_delete = b.kind != WorkloadKind::CloneSetV1beta1
            && spec_map
                .get("updateStrategy")
                .and_then(|s| s.get("type"))
                .is_some_and(|t| t == "OnDelete");
        if !on_delete {
            set_path(spec_map, path, json!(b.partition));
        }
    }

    Some(json!({
        "apiVersion": b.kind.api_version(),
        "kind": b.kind.kind(),
        "metadata": {
            "generateName": generate_name(ud_name, subset),
            "namespace": b.ud.metadata.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(b.ud)],
        },
        "spec": spec,
    }))
}

/// The desired object written over an existing workload (a PUT): its identity, other
/// labels, annotations, owners and finalizers kept; the subset's labels and annotations
/// and the whole spec from `desired`. A patch removed from the subset removes its
/// annotation.
#[allow(
    clippy::expect_used,
    reason = "the JSON is built in this module: the keys and shapes expected were inserted above"
)]
pub fn replacement(observed: &ObjectMeta, desired: &Value) -> Value {
    let mut out = desired.clone();
    let meta = object(out.get_mut("metadata").expect("desired has metadata"));
    meta.remove("generateName");
    meta.insert("name".into(), json!(observed.name));
    meta.insert("resourceVersion".into(), json!(observed.resource_version));
    let mut labels = observed.labels.clone().unwrap_or_default();
    labels.extend(string_map(meta.get("labels")));
    meta.insert("labels".into(), json!(labels));
    let mut annotations = observed.annotations.clone().unwrap_or_default();
    annotations.remove(keys::UD_SUBSET_PATCH);
    annotations.extend(string_map(meta.get("annotations")));
    meta.insert("annotations".into(), json!(annotations));
    if let Some(owners) = &observed.owner_references {
        meta.insert("ownerReferences".into(), json!(owners));
    }
    if let Some(finalizers) = &observed.finalizers {
        meta.insert("finalizers".into(), json!(finalizers));
    }
    out
}

/// The partition a built workload object carries (`None`: its kind or strategy has none).
pub fn partition_of(kind: WorkloadKind, object: &Value) -> Option<i32> {
    let mut at = object.get("spec")?;
    for key in kind.partition_path()? {
        at = at.get(*key)?;
    }
    at.as_i64().map(|p| p as i32)
}

/// The merge patch that only rescales a workload and moves its partition (when it has one).
pub fn scale_patch(kind: WorkloadKind, replicas: i32, partition: Option<i32>) -> Value {
    let mut spec = Map::new();
    spec.insert("replicas".into(), json!(replicas));
    if let (Some(path), Some(partition)) = (kind.partition_path(), partition) {
        set_path(&mut spec, path, json!(partition));
    }
    json!({ "spec": spec })
}

/// The maxUnavailable a built workload object carries from the template (`Null` when
/// unset); `None` when it can carry none (a StatefulSet, or a Deployment whose strategy
/// is `Recreate`, which takes no rollingUpdate).
pub fn max_unavailable_of(kind: WorkloadKind, object: &Value) -> Option<Value> {
    let path = kind.max_unavailable_path()?;
    let spec = object.get("spec")?;
    if kind == WorkloadKind::Deployment
        && spec
            .pointer("/strategy/type")
            .is_some_and(|t| t == "Recreate")
    {
        return None;
    }
    let mut at = spec;
    for key in path {
        match at.get(*key) {
            Some(next) => at = next,
            None => return Some(Value::Null),
        }
    }
    Some(at.clone())
}

/// Sets maxUnavailable under `spec` of a workload object or of a merge patch (`Null`
/// in a patch removes it).
pub fn put_max_unavailable(kind: WorkloadKind, target: &mut Value, value: Value) {
    let Some(path) = kind.max_unavailable_path() else {
        return;
    };
    let spec = object(object(target).entry("spec").or_insert_with(|| json!({})));
    set_path(spec, path, value);
}

/// The UD's selector plus `apps.kruise.io/subset-name=<subset>`.
pub fn subset_selector(selector: &LabelSelector, subset: &str) -> LabelSelector {
    let mut out = selector.clone();
    out.match_labels
        .get_or_insert_with(Default::default)
        .insert(keys::UD_SUBSET_NAME.into(), subset.into());
    out
}

/// The subset's `nodeSelectorTerm.matchExpressions` appended to every required term of
/// the Pod's node affinity, or as the one term when there is none.
#[allow(
    clippy::expect_used,
    reason = "the JSON is built in this module: the keys and shapes expected were inserted above"
)]
fn attach_node_affinity(pod_spec: &mut Map<String, Value>, subset: &Subset) {
    let Some(expressions) = subset
        .node_selector_term
        .match_expressions
        .as_ref()
        .filter(|e| !e.is_empty())
    else {
        return;
    };
    let expressions = serde_json::to_value(expressions).expect("serializable");
    let required = object(
        object(
            object(pod_spec.entry("affinity").or_insert_with(|| json!({})))
                .entry("nodeAffinity")
                .or_insert_with(|| json!({})),
        )
        .entry("requiredDuringSchedulingIgnoredDuringExecution")
        .or_insert_with(|| json!({})),
    );
    let terms = required
        .entry("nodeSelectorTerms")
        .or_insert_with(|| json!([]));
    if !terms.is_array() {
        *terms = json!([]);
    }
    let terms = terms.as_array_mut().expect("made an array");
    if terms.is_empty() {
        terms.push(json!({ "matchExpressions": expressions }));
        return;
    }
    for term in terms {
        let list = object(term)
            .entry("matchExpressions")
            .or_insert_with(|| json!([]));
        if let (Some(list), Some(add)) = (list.as_array_mut(), expressions.as_array()) {
            list.extend(add.iter().cloned());
        }
    }
}

#[allow(
    clippy::expect_used,
    reason = "the JSON is built in this module: the keys and shapes expected were inserted above"
)]
fn attach_tolerations(pod_spec: &mut Map<String, Value>, subset: &Subset) {
    if subset.tolerations.is_empty() {
        return;
    }
    let list = pod_spec.entry("tolerations").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let add = serde_json::to_value(&subset.tolerations).expect("serializable");
    if let (Some(list), Some(add)) = (list.as_array_mut(), add.as_array()) {
        list.extend(add.iter().cloned());
    }
}

#[allow(
    clippy::expect_used,
    reason = "the JSON is built in this module: the keys and shapes expected were inserted above"
)]
fn object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = json!({});
    }
    value.as_object_mut().expect("made an object")
}

#[allow(
    clippy::expect_used,
    reason = "the JSON is built in this module: the keys and shapes expected were inserted above"
)]
fn set_path(map: &mut Map<String, Value>, path: &[&str], value: Value) {
    let (last, parents) = path.split_last().expect("non-empty path");
    let mut current = map;
    for key in parents {
        current = object(current.entry(*key).or_insert_with(|| json!({})));
    }
    current.insert((*last).into(), value);
}

fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ud(yaml_template: Value, subsets: Value) -> UnitedDeployment {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "UnitedDeployment",
            "metadata": {"name": "sample-ud", "namespace": "ns", "uid": "u-1"},
            "spec": {
                "replicas": 6,
                "selector": {"matchLabels": {"app": "sample"}},
                "template": yaml_template,
                "topology": {"subsets": subsets},
            }
        }))
        .unwrap()
    }

    fn clone_set_ud() -> UnitedDeployment {
        ud(
            json!({"cloneSetTemplate": {
                "metadata": {"labels": {"app": "sample", "team": "a"}, "annotations": {"note": "x"}},
                "spec": {
                    "template": {
                        "metadata": {"labels": {"app": "sample"}},
                        "spec": {
                            "containers": [{"name": "main", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}],
                            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": "type", "operator": "In", "values": ["kwok"]}]},
                                    {"matchExpressions": [{"key": "pool", "operator": "Exists"}]}
                                ]
                            }}}
                        }
                    }
                }
            }}),
            json!([{
                "name": "subset-a",
                "nodeSelectorTerm": {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]},
                "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                "patch": {"metadata": {"labels": {"zone": "a"}}, "spec": {"containers": [{"name": "main", "env": [{"name": "B", "value": "2"}]}]}}
            }, {"name": "subset-b"}]),
        )
    }

    fn build<'a>(ud: &'a UnitedDeployment, subset: usize, kind: WorkloadKind) -> Build<'a> {
        Build {
            ud,
            kind,
            subset: &ud.spec.topology.subsets[subset],
            revision: "sample-ud-abc",
            replicas: 3,
            partition: 2,
        }
    }

    #[test]
    fn clone_set_of_a_subset() {
        let ud = clone_set_ud();
        let got = desired(&build(&ud, 0, WorkloadKind::CloneSet)).unwrap();
        assert_eq!(got["apiVersion"], "apps.kruise.io/v1alpha1");
        assert_eq!(got["kind"], "CloneSet");
        let meta = &got["metadata"];
        assert_eq!(meta["generateName"], "sample-ud-subset-a-");
        assert_eq!(
            meta["labels"],
            json!({"app": "sample", "team": "a", "apps.kruise.io/subset-name": "subset-a",
                   "apps.kruise.io/controller-revision-hash": "sample-ud-abc"})
        );
        assert_eq!(meta["annotations"]["note"], "x");
        assert_eq!(
            meta["annotations"][keys::UD_SUBSET_PATCH],
            ud.spec.topology.subsets[0]
                .patch
                .as_ref()
                .unwrap()
                .to_string()
        );
        assert_eq!(meta["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(meta["ownerReferences"][0]["controller"], true);
        let spec = &got["spec"];
        assert_eq!(spec["replicas"], 3);
        assert_eq!(spec["updateStrategy"]["partition"], 2);
        assert_eq!(
            spec["selector"],
            json!({"matchLabels": {"app": "sample", "apps.kruise.io/subset-name": "subset-a"}})
        );
        let pod = &spec["template"];
        assert_eq!(
            pod["metadata"]["labels"],
            json!({"app": "sample", "zone": "a", "apps.kruise.io/subset-name": "subset-a",
                   "apps.kruise.io/controller-revision-hash": "sample-ud-abc"})
        );
        // The zone expression is added to both existing required terms.
        let terms = &pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            ["nodeSelectorTerms"];
        for term in terms.as_array().unwrap() {
            let last = term["matchExpressions"].as_array().unwrap().last().unwrap();
            assert_eq!(last["key"], "topology.kubernetes.io/zone");
        }
        assert_eq!(terms[0]["matchExpressions"].as_array().unwrap().len(), 2);
        assert_eq!(pod["spec"]["tolerations"][0]["key"], "dedicated");
        // The patch merged the env list by name.
        assert_eq!(
            pod["spec"]["containers"][0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
        );
        assert_eq!(pod["spec"]["containers"][0]["image"], "nginx:1");
    }

    /// The CloneSet template of an OpenKruise v1.9 manifest (v1beta1 CloneSetSpec).
    fn v1beta1_clone_set_ud(strategy: Value) -> UnitedDeployment {
        ud(
            json!({"cloneSetTemplate": {
                "metadata": {"labels": {"app": "sample"}},
                "spec": {
                    "selector": {"matchLabels": {"app": "sample"}},
                    "template": {"metadata": {"labels": {"app": "sample"}}, "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}},
                    "scaleStrategy": {"enablePVCReuse": true},
                    "updateStrategy": strategy
                }
            }}),
            json!([{"name": "subset-a"}]),
        )
    }

    #[test]
    fn v1beta1_template_gives_v1beta1_clone_sets() {
        let ud = v1beta1_clone_set_ud(json!({"type": "RollingUpdate", "rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}}));
        let kind = WorkloadKind::of(&ud.spec.template).unwrap();
        assert_eq!(kind, WorkloadKind::CloneSetV1beta1);
        assert!(kind.same_objects(WorkloadKind::CloneSet));
        assert!(!kind.same_objects(WorkloadKind::AdvancedStatefulSet));
        let got = desired(&build(&ud, 0, kind)).unwrap();
        assert_eq!(got["apiVersion"], "apps.kruise.io/v1beta1");
        assert_eq!(got["kind"], "CloneSet");
        let spec = &got["spec"];
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {
                "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1, "partition": 2}})
        );
        assert_eq!(spec["scaleStrategy"], json!({"enablePVCReuse": true}));
        assert_eq!(spec["replicas"], 3);
        assert_eq!(
            spec["selector"]["matchLabels"][keys::UD_SUBSET_NAME],
            "subset-a"
        );
        assert_eq!(partition_of(kind, &got), Some(2));
        assert_eq!(max_unavailable_of(kind, &got), Some(json!(1)));
        assert_eq!(
            scale_patch(kind, 4, Some(1)),
            json!({"spec": {"replicas": 4, "updateStrategy": {"rollingUpdate": {"partition": 1}}}})
        );
        let mut patch = scale_patch(kind, 4, None);
        put_max_unavailable(kind, &mut patch, json!(3));
        assert_eq!(
            patch,
            json!({"spec": {"replicas": 4, "updateStrategy": {"rollingUpdate": {"maxUnavailable": 3}}}})
        );
    }

    #[test]
    fn v1beta1_on_delete_clone_set_still_gets_its_partition() {
        // As upstream's cloneset_adapter.go: rollingUpdate.partition whatever the type.
        let ud = v1beta1_clone_set_ud(json!({"type": "OnDelete"}));
        let kind = WorkloadKind::of(&ud.spec.template).unwrap();
        assert_eq!(kind, WorkloadKind::CloneSetV1beta1);
        let got = desired(&build(&ud, 0, kind)).unwrap();
        assert_eq!(
            got["spec"]["updateStrategy"],
            json!({"type": "OnDelete", "rollingUpdate": {"partition": 2}})
        );
        assert_eq!(max_unavailable_of(kind, &got), Some(Value::Null));
    }

    #[test]
    fn v1alpha1_template_keeps_v1alpha1_clone_sets() {
        let ud = clone_set_ud();
        assert_eq!(
            WorkloadKind::of(&ud.spec.template),
            Some(WorkloadKind::CloneSet)
        );
        let got = desired(&build(&ud, 0, WorkloadKind::CloneSet)).unwrap();
        assert!(got["spec"]["updateStrategy"].get("rollingUpdate").is_none());
        assert_eq!(
            scale_patch(WorkloadKind::CloneSet, 4, Some(1)),
            json!({"spec": {"replicas": 4, "updateStrategy": {"partition": 1}}})
        );
    }

    #[test]
    fn subset_without_terms_or_patch() {
        let ud = clone_set_ud();
        let got = desired(&build(&ud, 1, WorkloadKind::CloneSet)).unwrap();
        assert!(
            got["metadata"]["annotations"]
                .get(keys::UD_SUBSET_PATCH)
                .is_none()
        );
        assert!(got["spec"]["template"]["spec"].get("tolerations").is_none());
    }

    #[test]
    fn deployment_has_no_partition_and_affinity_is_created() {
        let ud = ud(
            json!({"deploymentTemplate": {"metadata": {"labels": {"app": "sample"}}, "spec": {
                "template": {"metadata": {"labels": {"app": "sample"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
            }}}),
            json!([{"name": "zone-a", "nodeSelectorTerm": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]}}]),
        );
        let got = desired(&build(&ud, 0, WorkloadKind::Deployment)).unwrap();
        assert_eq!(got["apiVersion"], "apps/v1");
        assert!(got["spec"].get("updateStrategy").is_none());
        assert!(got["spec"].get("strategy").is_none());
        assert_eq!(
            got["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"],
            json!([{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]}])
        );
        assert_eq!(
            scale_patch(WorkloadKind::Deployment, 4, None),
            json!({"spec": {"replicas": 4}})
        );
    }

    #[test]
    fn statefulset_partition_unless_on_delete() {
        let make = |strategy: Value| {
            ud(
                json!({"statefulSetTemplate": {"spec": {"updateStrategy": strategy,
                    "template": {"metadata": {"labels": {"app": "sample"}}, "spec": {"containers": []}}}}}),
                json!([{"name": "a"}]),
            )
        };
        let rolling = make(json!({"type": "RollingUpdate"}));
        let got = desired(&build(&rolling, 0, WorkloadKind::StatefulSet)).unwrap();
        assert_eq!(
            got["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
            2
        );
        let on_delete = make(json!({"type": "OnDelete"}));
        let got = desired(&build(&on_delete, 0, WorkloadKind::StatefulSet)).unwrap();
        assert_eq!(got["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
        assert_eq!(partition_of(WorkloadKind::StatefulSet, &got), None);
        assert_eq!(
            scale_patch(WorkloadKind::AdvancedStatefulSet, 4, Some(1)),
            json!({"spec": {"replicas": 4, "updateStrategy": {"rollingUpdate": {"partition": 1}}}})
        );
    }

    #[test]
    fn long_names_fall_back_to_the_ud_prefix() {
        assert_eq!(generate_name("ud", "zone-a"), "ud-zone-a-");
        let long = "s".repeat(260);
        assert_eq!(generate_name("ud", &long), "ud-");
        assert_eq!(generate_name("ud", "Zone_A"), "ud-");
    }

    #[test]
    fn replacement_keeps_identity_and_foreign_metadata() {
        let ud = clone_set_ud();
        let want = desired(&build(&ud, 1, WorkloadKind::CloneSet)).unwrap();
        let observed = ObjectMeta {
            name: Some("sample-ud-subset-b-x1".into()),
            resource_version: Some("42".into()),
            labels: Some([("other".to_string(), "kept".to_string())].into()),
            annotations: Some(
                [
                    (keys::UD_SUBSET_PATCH.to_string(), "{}".to_string()),
                    ("foreign".to_string(), "kept".to_string()),
                ]
                .into(),
            ),
            finalizers: Some(vec!["f".into()]),
            ..Default::default()
        };
        let got = replacement(&observed, &want);
        let meta = &got["metadata"];
        assert_eq!(meta["name"], "sample-ud-subset-b-x1");
        assert!(meta.get("generateName").is_none());
        assert_eq!(meta["resourceVersion"], "42");
        assert_eq!(meta["labels"]["other"], "kept");
        assert_eq!(meta["labels"][keys::UD_SUBSET_NAME], "subset-b");
        assert_eq!(meta["annotations"]["foreign"], "kept");
        assert!(meta["annotations"].get(keys::UD_SUBSET_PATCH).is_none());
        assert_eq!(meta["finalizers"], json!(["f"]));
        assert_eq!(got["spec"], want["spec"]);
    }
}
