//! Kubernetes' core defaulting (`k8s.io/kubernetes/pkg/apis/core/v1/defaults.go`) for
//! what a workload stores as a template: Pod specs, containers, volumes and PVC
//! templates, applied to JSON so fields our types do not know survive.
//!
//! The apiserver defaults Pods, not the Pod templates inside custom resources. A
//! template stored as written hashes differently from the same template with a default
//! spelled out, so re-applying a manifest that names `imagePullPolicy: IfNotPresent`
//! where it was implied would roll every Pod. Defaulting templates at admission (as
//! upstream OpenKruise does) makes both spellings one revision.

use serde_json::{Map, Value, json};

/// `SetDefaults_PodSpec` plus the defaults of every container, init container and
/// volume in it.
pub fn pod_spec_defaults(spec: &mut Map<String, Value>) {
    spec.entry("dnsPolicy").or_insert(json!("ClusterFirst"));
    spec.entry("restartPolicy").or_insert(json!("Always"));
    spec.entry("terminationGracePeriodSeconds")
        .or_insert(json!(30));
    spec.entry("securityContext").or_insert(json!({}));
    spec.entry("schedulerName")
        .or_insert(json!("default-scheduler"));
    let host_network = spec.get("hostNetwork").and_then(Value::as_bool) == Some(true);
    for list in ["initContainers", "containers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in containers.iter_mut().filter_map(Value::as_object_mut) {
                if host_network {
                    host_network_ports(c);
                }
                container_defaults(c);
            }
        }
    }
    if let Some(volumes) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        for v in volumes.iter_mut().filter_map(Value::as_object_mut) {
            volume_defaults(v);
        }
    }
}

/// A `PodTemplateSpec`'s spec defaulted in place (nothing when it has no spec).
pub fn template_defaults(template: &mut Value) {
    if let Some(spec) = template.get_mut("spec").and_then(Value::as_object_mut) {
        pod_spec_defaults(spec);
    }
}

/// `SetDefaults_PersistentVolumeClaimSpec` for a claim template.
pub fn claim_template_defaults(claim: &mut Value) {
    if let Some(spec) = claim.get_mut("spec").and_then(Value::as_object_mut) {
        spec.entry("volumeMode").or_insert(json!("Filesystem"));
    }
}

/// The core defaults of the templates a workload object stores: `spec.template` and
/// every `spec.volumeClaimTemplates[]` (CloneSet, Advanced StatefulSet).
pub fn workload_template_defaults(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec") else {
        return;
    };
    if let Some(template) = spec.get_mut("template") {
        template_defaults(template);
    }
    if let Some(claims) = spec
        .get_mut("volumeClaimTemplates")
        .and_then(Value::as_array_mut)
    {
        claims.iter_mut().for_each(claim_template_defaults);
    }
}

/// Admission defaulting of a workload's templates ([`workload_template_defaults`]), as
/// upstream does unless the `TemplateNoDefaults` gate is on (`enabled` false), so a
/// manifest that spells out a default makes no new revision. On CREATE (`old` is None)
/// always; on UPDATE only when the stored templates were defaulted already (a workload
/// stored without them keeps its revision, and its Pods, until the templates are
/// defaulted on purpose), and then a container that names no `imagePullPolicy` keeps
/// the stored one ([`keep_pull_policies`]).
pub fn default_workload_templates(obj: &mut Value, old: Option<&Value>, enabled: bool) {
    let inject = enabled
        && old.is_none_or(|old| {
            let mut defaulted = old.clone();
            workload_template_defaults(&mut defaulted);
            &defaulted == old
        });
    if !inject {
        return;
    }
    if let Some(old) = old {
        keep_pull_policies(
            obj,
            old,
            &[
                "/spec/template/spec/containers",
                "/spec/template/spec/initContainers",
            ],
        );
    }
    workload_template_defaults(obj);
}

/// On UPDATE, a container (found by name under each of `lists`, JSON pointers) that names
/// no `imagePullPolicy` keeps the one the stored object has for it. The pull policy is
/// the one default that depends on the image (`busybox` → Always, `busybox:1.35.0` →
/// IfNotPresent); re-deriving it would turn an image bump sent as a merge patch (which
/// replaces the whole list) into a non-image change that cannot go in place. A running
/// container's pull policy cannot change in place anyway.
pub fn keep_pull_policies(obj: &mut Value, old: &Value, lists: &[&str]) {
    for list in lists {
        let before: Map<String, Value> = old
            .pointer(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| {
                // A stored container without a policy was written while no webhook
                // defaulted it: it has the policy its image implies.
                let policy = match c.get("imagePullPolicy") {
                    Some(p) => p.clone(),
                    None => json!(pull_policy_for(c.get("image")?.as_str()?)),
                };
                Some((c.get("name")?.as_str()?.to_string(), policy))
            })
            .collect();
        let Some(containers) = obj.pointer_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if !c.contains_key("imagePullPolicy")
                && let Some(policy) = before.get(&name)
            {
                c.insert("imagePullPolicy".into(), policy.clone());
            }
        }
    }
}

/// With host networking a container port is also the host port.
fn host_network_ports(c: &mut Map<String, Value>) {
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            if !p.contains_key("hostPort")
                && let Some(port) = p.get("containerPort").cloned()
            {
                p.insert("hostPort".into(), port);
            }
        }
    }
}

/// Kubernetes' `SetDefaults_Container` and the defaults of what a container holds.
pub fn container_defaults(c: &mut Map<String, Value>) {
    if !c.contains_key("imagePullPolicy") {
        let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
        c.insert("imagePullPolicy".into(), json!(pull_policy_for(image)));
    }
    c.entry("terminationMessagePath")
        .or_insert(json!("/dev/termination-log"));
    c.entry("terminationMessagePolicy").or_insert(json!("File"));
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.entry("protocol").or_insert(json!("TCP"));
        }
    }
    if let Some(env) = c.get_mut("env").and_then(Value::as_array_mut) {
        for e in env.iter_mut() {
            if let Some(field_ref) = e
                .pointer_mut("/valueFrom/fieldRef")
                .and_then(Value::as_object_mut)
            {
                field_ref.entry("apiVersion").or_insert(json!("v1"));
            }
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(p) = c.get_mut(probe).and_then(Value::as_object_mut) {
            p.entry("timeoutSeconds").or_insert(json!(1));
            p.entry("periodSeconds").or_insert(json!(10));
            p.entry("successThreshold").or_insert(json!(1));
            p.entry("failureThreshold").or_insert(json!(3));
            handler_defaults(p);
        }
    }
    if let Some(lifecycle) = c.get_mut("lifecycle").and_then(Value::as_object_mut) {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = lifecycle.get_mut(hook).and_then(Value::as_object_mut) {
                handler_defaults(h);
            }
        }
    }
}

fn handler_defaults(handler: &mut Map<String, Value>) {
    if let Some(get) = handler.get_mut("httpGet").and_then(Value::as_object_mut) {
        get.entry("path").or_insert(json!("/"));
        get.entry("scheme").or_insert(json!("HTTP"));
    }
}

/// `Always` for `:latest` or an untagged image, `IfNotPresent` otherwise (a digest
/// without a tag counts as pinned).
pub fn pull_policy_for(image: &str) -> &'static str {
    let reference = kruise_api::image::ImageRef::parse(image);
    match reference.tag {
        Some("latest") => "Always",
        Some(_) => "IfNotPresent",
        None if reference.digest.is_some() => "IfNotPresent",
        None => "Always",
    }
}

/// Kubernetes' volume defaults: a source-less volume is an emptyDir; file-projecting
/// sources get mode 0644.
pub fn volume_defaults(v: &mut Map<String, Value>) {
    if v.len() == 1 && v.contains_key("name") {
        v.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(s) = v.get_mut(source).and_then(Value::as_object_mut) {
            s.entry("defaultMode").or_insert(json!(420));
        }
    }
    if let Some(h) = v.get_mut("hostPath").and_then(Value::as_object_mut) {
        h.entry("type").or_insert(json!(""));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_template_gets_what_the_apiserver_gives_a_pod() {
        let mut t = json!({"metadata": {"labels": {"app": "a"}}, "spec": {
            "containers": [{"name": "c", "image": "nginx:alpine",
                            "ports": [{"containerPort": 80}],
                            "readinessProbe": {"httpGet": {"port": 80}}}],
            "initContainers": [{"name": "i", "image": "busybox"}],
            "volumes": [{"name": "cm", "configMap": {"name": "x"}}]}});
        template_defaults(&mut t);
        let s = &t["spec"];
        assert_eq!(s["dnsPolicy"], "ClusterFirst");
        assert_eq!(s["restartPolicy"], "Always");
        assert_eq!(s["terminationGracePeriodSeconds"], 30);
        assert_eq!(s["schedulerName"], "default-scheduler");
        assert_eq!(s["securityContext"], json!({}));
        let c = &s["containers"][0];
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["ports"][0].get("hostPort"), None);
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/");
        assert_eq!(c["readinessProbe"]["httpGet"]["scheme"], "HTTP");
        assert_eq!(c["readinessProbe"]["periodSeconds"], 10);
        assert_eq!(s["initContainers"][0]["imagePullPolicy"], "Always");
        assert_eq!(s["volumes"][0]["configMap"]["defaultMode"], 420);
        assert_eq!(t["metadata"]["labels"]["app"], "a", "metadata untouched");
    }

    #[test]
    fn defaulting_is_idempotent_and_keeps_what_is_set() {
        let mut t = json!({"spec": {"dnsPolicy": "None", "hostNetwork": true,
            "containers": [{"name": "c", "image": "x", "imagePullPolicy": "Never",
                            "ports": [{"containerPort": 8080, "protocol": "UDP"}]}]}});
        template_defaults(&mut t);
        let once = t.clone();
        template_defaults(&mut t);
        assert_eq!(t, once);
        assert_eq!(t["spec"]["dnsPolicy"], "None");
        let c = &t["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Never");
        assert_eq!(c["ports"][0]["protocol"], "UDP");
        assert_eq!(
            c["ports"][0]["hostPort"], 8080,
            "host network: hostPort = containerPort"
        );
    }

    #[test]
    fn claim_templates_default_to_filesystem() {
        let mut c =
            json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}});
        claim_template_defaults(&mut c);
        assert_eq!(c["spec"]["volumeMode"], "Filesystem");
    }

    #[test]
    fn workload_templates_are_defaulted_on_create_and_on_defaulted_updates() {
        let object = |image: &str| {
            json!({"spec": {
                "template": {"spec": {"containers": [{"name": "c", "image": image}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "d"}, "spec": {}}]}})
        };
        let mut created = object("nginx:alpine");
        default_workload_templates(&mut created, None, true);
        assert_eq!(
            created["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        assert_eq!(
            created["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"],
            "Filesystem"
        );
        // An image bump keeps the stored pull policy.
        let mut bumped = object("nginx");
        default_workload_templates(&mut bumped, Some(&created), true);
        assert_eq!(
            bumped["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
            "IfNotPresent"
        );
        // Stored without defaults: left alone.
        let legacy = object("nginx:alpine");
        let mut update = object("nginx:1");
        default_workload_templates(&mut update, Some(&legacy), true);
        assert_eq!(update, object("nginx:1"));
        // TemplateNoDefaults.
        let mut raw = object("nginx:alpine");
        default_workload_templates(&mut raw, None, false);
        assert_eq!(raw, object("nginx:alpine"));
    }

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(pull_policy_for("busybox"), "Always");
        assert_eq!(pull_policy_for("busybox:latest"), "Always");
        assert_eq!(pull_policy_for("busybox:1.35.0"), "IfNotPresent");
        assert_eq!(pull_policy_for("localhost:5000/busybox"), "Always");
        assert_eq!(pull_policy_for("localhost:5000/busybox:1"), "IfNotPresent");
        assert_eq!(pull_policy_for("busybox@sha256:abc"), "IfNotPresent");
    }
}
