//! What the chart's tests share: rendering (helm, kustomize), and comparing rendered
//! objects once what Helm adds on its own is taken out.
//!
//! The tools are tests/helm/build.sh's (helm v3.22.0 and kustomize v5.6.0, the version
//! `kubectl kustomize` v1.33 embeds), built on first use and cached, so nothing here needs
//! a cluster or the control plane build.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// Labels Helm's chart adds to every object (templates/_helpers.tpl kruise-rs.helmLabels);
/// kustomize has none of them.
pub const HELM_LABELS: &[&str] = &[
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
];

/// Annotations only the chart has: the CRDs' keep policy (Helm's, not an object's).
pub const HELM_ANNOTATIONS: &[&str] = &["helm.sh/resource-policy"];

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// The chart's directory.
pub fn chart() -> PathBuf {
    root().join("deploy/helm/kruise-rs")
}

/// helm and kustomize, from tests/helm/build.sh (built once per process, cached on disk).
pub fn tools() -> Result<(PathBuf, PathBuf), String> {
    static TOOLS: OnceLock<Result<(PathBuf, PathBuf), String>> = OnceLock::new();
    TOOLS
        .get_or_init(|| {
            if let (Ok(h), Ok(k)) = (std::env::var("HELM"), std::env::var("KUSTOMIZE")) {
                return Ok((h.into(), k.into()));
            }
            let out = Command::new(root().join("tests/helm/build.sh"))
                .output()
                .map_err(|e| format!("tests/helm/build.sh: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "tests/helm/build.sh failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            let stdout = String::from_utf8_lossy(&out.stdout);
            let helm = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
            let kustomize = helm.with_file_name("kustomize");
            Ok((helm, kustomize))
        })
        .clone()
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("{cmd:?}: {e}"))
}

/// `kustomize build kustomize/overlays/<overlay>`, as `kubectl kustomize` renders it.
pub fn kustomize(overlay: &str) -> Result<Vec<Value>, String> {
    let (_, kustomize) = tools()?;
    let dir = root().join("kustomize/overlays").join(overlay);
    parse(&run(Command::new(kustomize).arg("build").arg(dir))?)
}

/// `kustomize build` of `overlays/<overlay>` with `kustomize/<component>`s added, through a
/// kustomization written under target/ (kustomize loads nothing from outside its root).
pub fn kustomize_with(overlay: &str, components: &[&str]) -> Result<Vec<Value>, String> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let (_, kustomize) = tools()?;
    let dir = root().join(format!(
        "target/helm-kustomize-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let components: Vec<String> = components
        .iter()
        .map(|c| format!("../../kustomize/{c}"))
        .collect();
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "resources: [../../kustomize/overlays/{overlay}]\ncomponents: [{}]\n",
            components.join(", ")
        ),
    )
    .map_err(|e| format!("{}: {e}", dir.display()))?;
    let out = run(Command::new(kustomize).arg("build").arg(&dir));
    std::fs::remove_dir_all(&dir).ok();
    parse(&out?)
}

/// `helm template` of the chart with `--set` values (release `kruise`, the Kubernetes
/// minor the workspace targets).
pub fn helm_template(set: &[&str]) -> Result<Vec<Value>, String> {
    let (helm, _) = tools()?;
    let mut cmd = Command::new(helm);
    cmd.args(["template", "kruise"]).arg(chart()).args([
        "--namespace",
        "default",
        "--kube-version",
        "1.33.0",
    ]);
    for s in set {
        cmd.args(["--set", s]);
    }
    parse(&run(&mut cmd)?)
}

/// The objects of a multi-document YAML stream (empty documents dropped).
pub fn parse(yaml: &str) -> Result<Vec<Value>, String> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().filter(|d| d.is_object()).collect())
}

/// Whether an object is a Helm hook (the uninstall guard): not part of the release's
/// objects, and not in kustomize.
pub fn is_hook(obj: &Value) -> bool {
    obj.pointer("/metadata/annotations/helm.sh~1hook").is_some()
}

fn strip(map: Option<&mut Value>, keys: &[&str]) -> bool {
    let Some(Value::Object(m)) = map else {
        return false;
    };
    for k in keys {
        m.remove(*k);
    }
    m.is_empty()
}

/// Takes out what Helm adds on its own (its labels, the keep annotation), and collapses
/// whitespace in CEL expressions: kustomize re-serialises a folded (`>-`) expression with
/// a more-indented line differently from the file (an extra blank line), which CEL does
/// not see.
pub fn normalise(mut obj: Value) -> Value {
    for meta in ["/metadata", "/spec/template/metadata"] {
        if let Some(m) = obj.pointer_mut(meta) {
            if strip(m.get_mut("labels"), HELM_LABELS) {
                m.as_object_mut().map(|m| m.remove("labels"));
            }
            if strip(m.get_mut("annotations"), HELM_ANNOTATIONS) {
                m.as_object_mut().map(|m| m.remove("annotations"));
            }
        }
    }
    collapse_expressions(&mut obj);
    obj
}

fn collapse_expressions(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, v) in m.iter_mut() {
                match v {
                    Value::String(s) if k == "expression" => {
                        *s = s.split_whitespace().collect::<Vec<_>>().join(" ");
                    }
                    _ => collapse_expressions(v),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(collapse_expressions),
        _ => {}
    }
}

/// `kind namespace/name` (group included: two kinds may share a name).
pub fn key(obj: &Value) -> String {
    let s = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
    let ns = s("/metadata/namespace");
    format!(
        "{} {}{}{}",
        format_args!("{}/{}", s("/apiVersion"), s("/kind")),
        ns,
        if ns.is_empty() { "" } else { "/" },
        s("/metadata/name")
    )
}

/// Normalised objects by key, hooks left out.
pub fn index(objs: Vec<Value>) -> BTreeMap<String, Value> {
    objs.into_iter()
        .filter(|o| !is_hook(o))
        .map(|o| (key(&o), normalise(o)))
        .collect()
}

/// Every difference between what kustomize and the chart render, one line each (empty:
/// the same objects).
pub fn differences(kustomize: Vec<Value>, chart: Vec<Value>) -> Vec<String> {
    let (k, c) = (index(kustomize), index(chart));
    let mut out = Vec::new();
    for key in k.keys().chain(c.keys()).collect::<BTreeSet<_>>() {
        match (k.get(key), c.get(key)) {
            (Some(_), None) => out.push(format!("{key}: rendered by kustomize, not by the chart")),
            (None, Some(_)) => out.push(format!("{key}: rendered by the chart, not by kustomize")),
            (Some(a), Some(b)) => diff(&format!("{key} "), a, b, &mut out),
            (None, None) => {}
        }
    }
    out
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 160 {
        format!("{}...", &s[..s.floor_char_boundary(160)])
    } else {
        s
    }
}

fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()).collect::<BTreeSet<_>>() {
                let p = format!("{path}/{k}");
                match (x.get(k), y.get(k)) {
                    (Some(v), None) => out.push(format!("{p}: kustomize {}, chart none", short(v))),
                    (None, Some(v)) => out.push(format!("{p}: kustomize none, chart {}", short(v))),
                    (Some(v), Some(w)) => diff(&p, v, w, out),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}/{i}"), v, w, out);
            }
        }
        // Items added or removed (a rule, an env var): name them rather than the list.
        (Value::Array(x), Value::Array(y)) => {
            for v in x.iter().filter(|v| !y.contains(v)) {
                out.push(format!("{path}: only kustomize has {}", short(v)));
            }
            for w in y.iter().filter(|w| !x.contains(w)) {
                out.push(format!("{path}: only the chart has {}", short(w)));
            }
        }
        _ if a != b => out.push(format!(
            "{path}: kustomize {}, chart {}",
            short(a),
            short(b)
        )),
        _ => {}
    }
}

/// The CRDs (`<plural>.<group>`) of the kruise API groups that the rendered ClusterRoles
/// grant anything on: what the controllers of a render use. Deletion protection's roles
/// are left out: they list the custom resources of a CRD being deleted (every OpenKruise
/// kind, by name), which needs none of them installed.
pub fn crds_used_by_cluster_roles(objs: &[Value]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for role in objs.iter().filter(|o| {
        o.get("kind").and_then(Value::as_str) == Some("ClusterRole")
            && !is_hook(o)
            && !o
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.starts_with("kruise-deletionprotection-"))
    }) {
        for rule in role
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let strings = |k: &str| -> Vec<String> {
                rule.get(k)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            };
            for group in strings("apiGroups")
                .iter()
                .filter(|g| g.ends_with("kruise.io"))
            {
                for resource in strings("resources") {
                    let plural = resource.split('/').next().unwrap_or_default();
                    out.insert(format!("{plural}.{group}"));
                }
            }
        }
    }
    out
}

/// The names of the CRDs among rendered objects.
pub fn crd_names(objs: &[Value]) -> BTreeSet<String> {
    objs.iter()
        .filter(|o| o.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition"))
        .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn helm_labels_and_the_keep_annotation_are_not_differences() {
        let kustomize = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s", "namespace": "n", "labels": {"app.kubernetes.io/part-of": "kruise-rs"}}});
        let chart = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s", "namespace": "n",
                "labels": {"app.kubernetes.io/part-of": "kruise-rs", "helm.sh/chart": "kruise-rs-0.1.0",
                           "app.kubernetes.io/managed-by": "Helm"},
                "annotations": {"helm.sh/resource-policy": "keep"}}});
        assert_eq!(
            differences(vec![kustomize], vec![chart]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn any_other_change_is_a_difference_with_its_path() {
        let a = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 2, "template": {"metadata": {"labels": {"a": "b"}}}}});
        let mut b = a.clone();
        b["spec"]["replicas"] = json!(3);
        b["spec"]["template"]["metadata"]["labels"]["helm.sh/chart"] = json!("x");
        assert_eq!(
            differences(vec![a.clone()], vec![b]),
            vec!["apps/v1/Deployment d /spec/replicas: kustomize 2, chart 3".to_string()]
        );
        assert_eq!(
            differences(vec![a], vec![]),
            vec!["apps/v1/Deployment d: rendered by kustomize, not by the chart".to_string()]
        );
    }

    #[test]
    fn hooks_are_not_release_objects_and_cel_whitespace_is_not_a_difference() {
        let hook = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "annotations": {"helm.sh/hook": "pre-delete"}}});
        let a =
            json!({"kind": "X", "metadata": {"name": "p"}, "spec": {"expression": "a ==\n\n  b"}});
        let b =
            json!({"kind": "X", "metadata": {"name": "p"}, "spec": {"expression": "a ==\n  b"}});
        assert_eq!(differences(vec![a], vec![b, hook]), Vec::<String>::new());
    }

    #[test]
    fn crds_used_are_read_from_kruise_groups_of_cluster_roles() {
        let role = json!({"kind": "ClusterRole", "metadata": {"name": "r"}, "rules": [
            {"apiGroups": ["apps.kruise.io"], "resources": ["clonesets", "clonesets/status"]},
            {"apiGroups": ["policy.kruise.io"], "resources": ["podunavailablebudgets"]},
            {"apiGroups": [""], "resources": ["pods"]}]});
        assert_eq!(
            crds_used_by_cluster_roles(&[role]),
            BTreeSet::from([
                "clonesets.apps.kruise.io".to_string(),
                "podunavailablebudgets.policy.kruise.io".to_string()
            ])
        );
    }
}
