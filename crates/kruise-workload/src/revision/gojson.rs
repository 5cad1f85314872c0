//! A value written the way Go's `encoding/json` writes it after decoding it into
//! upstream's struct types: struct fields in Go declaration order (embedded structs in
//! place), `omitempty` honoured as Go does (a struct is never empty, so `resources: {}`
//! always appears), fields without `omitempty` written even when unset (`"name":""`,
//! `null` for a nil slice or pointer), fields Go's types do not have dropped (as
//! `json.Unmarshal` drops them), map keys sorted, quantities canonical
//! ([`super::quantity`]).
//!
//! The field table, `gotypes.json`, is generated from the Go types by reflection
//! (`make parity-fixtures`, tests/parity/main.go) for k8s.io/api v0.32.10 and
//! openkruise/kruise v1.9.0, the versions upstream v1.9.0 builds with.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::Value;

use super::{quantity, write_go_json, write_go_string};

/// A Go struct a value can be written as.
#[derive(Clone, Copy, Debug)]
pub enum Root {
    /// openkruise `apps/v1alpha1.SidecarContainer` (a core Container plus the sidecar fields).
    SidecarContainer,
    /// `core/v1.PodTemplateSpec`.
    PodTemplateSpec,
    /// openkruise `apps/v1beta1.SubsetTemplate`: a UnitedDeployment's `spec.template`
    /// (apis/apps/v1beta1/uniteddeployment_types.go). Its `metadata` fields are
    /// schemaless in the CRD but `metav1.ObjectMeta` in Go, so they are written as one.
    UnitedDeploymentSubsetTemplate,
}

#[derive(Default, Deserialize)]
struct Table {
    roots: HashMap<String, String>,
    structs: HashMap<String, Vec<Field>>,
}

#[derive(Deserialize)]
struct Field {
    #[serde(default)]
    json: String,
    #[serde(default)]
    omitempty: bool,
    #[serde(default, rename = "type")]
    ty: String,
    /// An embedded struct: its fields are written in place.
    #[serde(default)]
    inline: String,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        // Generated and committed: a unit test below checks that it parses.
        serde_json::from_str(include_str!("gotypes.json")).unwrap_or_default()
    })
}

/// The bytes Go's `json.Marshal` writes for `value` decoded into the Go type `root`.
pub fn marshal(value: &Value, root: Root) -> Vec<u8> {
    let t = table();
    let name = match root {
        Root::SidecarContainer => "SidecarContainer",
        Root::PodTemplateSpec => "PodTemplateSpec",
        Root::UnitedDeploymentSubsetTemplate => "UnitedDeploymentSubsetTemplate",
    };
    let mut out = Vec::with_capacity(1024);
    match t.roots.get(name) {
        Some(ty) => write(t, Some(value), ty, &mut out),
        None => write_go_json(value, &mut out),
    }
    out
}

/// `value` decoded into `root` and encoded again, as a JSON value (what upstream's
/// `json.Unmarshal` into `map[string]interface{}` of its `json.Marshal` holds).
pub fn normalize(value: &Value, root: Root) -> Value {
    serde_json::from_slice(&marshal(value, root)).unwrap_or_else(|_| value.clone())
}

/// A value Go decodes to nothing: absent or `null`.
fn unset(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

/// Go's `isEmptyValue` of what `v` decodes to as `ty`.
fn is_empty(v: Option<&Value>, ty: &str) -> bool {
    let Some(v) = unset(v) else {
        // Every zero value is empty except a struct's (quantity, intorstring and time
        // are structs in Go).
        return !is_struct(ty);
    };
    if ty.starts_with('*') || ty == "any" {
        return false;
    }
    if ty.starts_with("[]") {
        return v.as_array().is_some_and(Vec::is_empty);
    }
    if ty.starts_with("map[]") {
        return v.as_object().is_some_and(serde_json::Map::is_empty);
    }
    match ty {
        "string" => v.as_str() == Some(""),
        "bool" => v.as_bool() == Some(false),
        "int" | "uint" | "float" => v.as_f64() == Some(0.0),
        _ => false,
    }
}

fn is_struct(ty: &str) -> bool {
    !(ty.starts_with('*')
        || ty.starts_with("[]")
        || ty.starts_with("map[]")
        || matches!(
            ty,
            "string" | "bool" | "int" | "uint" | "float" | "any" | "rawjson"
        ))
}

fn write(t: &Table, v: Option<&Value>, ty: &str, out: &mut Vec<u8>) {
    let v = unset(v);
    if let Some(elem) = ty.strip_prefix('*') {
        match v {
            None => out.extend_from_slice(b"null"),
            Some(v) => write(t, Some(v), elem, out),
        }
        return;
    }
    if let Some(elem) = ty.strip_prefix("[]") {
        match v.and_then(Value::as_array) {
            None => out.extend_from_slice(b"null"),
            Some(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write(t, Some(item), elem, out);
                }
                out.push(b']');
            }
        }
        return;
    }
    if let Some(elem) = ty.strip_prefix("map[]") {
        match v.and_then(Value::as_object) {
            None => out.extend_from_slice(b"null"),
            Some(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push(b'{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_go_string(k, out);
                    out.push(b':');
                    write(t, map.get(k), elem, out);
                }
                out.push(b'}');
            }
        }
        return;
    }
    match ty {
        "string" => match v {
            Some(Value::String(s)) => write_go_string(s, out),
            Some(other) => write_go_json(other, out),
            None => out.extend_from_slice(b"\"\""),
        },
        "bool" => match v {
            Some(other) => write_go_json(other, out),
            None => out.extend_from_slice(b"false"),
        },
        "int" | "uint" | "float" => match v {
            Some(other) => write_go_json(other, out),
            None => out.push(b'0'),
        },
        "any" | "rawjson" => match v {
            Some(other) => write_go_json(other, out),
            None => out.extend_from_slice(b"null"),
        },
        "quantity" => {
            let written = match v {
                None => "0".to_string(),
                Some(Value::String(s)) => quantity::canonical(s).unwrap_or_else(|| s.clone()),
                Some(other) => {
                    let s = other.to_string();
                    quantity::canonical(&s).unwrap_or(s)
                }
            };
            write_go_string(&written, out);
        }
        "intorstring" => match v {
            Some(other) => write_go_json(other, out),
            None => out.push(b'0'),
        },
        // metav1.Time: the zero time is `null`; a set one is RFC 3339 in UTC, which is
        // how the apiserver stores it.
        "time" => match v {
            Some(other) => write_go_json(other, out),
            None => out.extend_from_slice(b"null"),
        },
        name => {
            // Every struct the table names is in it (checked by a unit test).
            let Some(fields) = t.structs.get(name) else {
                return write_go_json(v.unwrap_or(&Value::Null), out);
            };
            let obj = v.and_then(Value::as_object);
            out.push(b'{');
            let mut first = true;
            write_fields(t, obj, fields, &mut first, out);
            out.push(b'}');
        }
    }
}

fn write_fields(
    t: &Table,
    obj: Option<&serde_json::Map<String, Value>>,
    fields: &[Field],
    first: &mut bool,
    out: &mut Vec<u8>,
) {
    for f in fields {
        if !f.inline.is_empty() {
            if let Some(inner) = t.structs.get(&f.inline) {
                write_fields(t, obj, inner, first, out);
            }
            continue;
        }
        let v = obj.and_then(|o| o.get(&f.json));
        if f.omitempty && is_empty(v, &f.ty) {
            continue;
        }
        if !*first {
            out.push(b',');
        }
        *first = false;
        write_go_string(&f.json, out);
        out.push(b':');
        write(t, v, &f.ty, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn go(v: Value, root: Root) -> String {
        String::from_utf8(marshal(&v, root)).unwrap()
    }

    /// Every type the table names is a scalar it knows or a struct it holds.
    #[test]
    fn the_table_is_complete() {
        let t = table();
        assert_eq!(t.roots.len(), 3);
        let mut names: Vec<&str> = t.roots.values().map(String::as_str).collect();
        for fields in t.structs.values() {
            for f in fields {
                if f.inline.is_empty() {
                    names.push(&f.ty);
                } else {
                    names.push(&f.inline);
                }
            }
        }
        for name in names {
            let mut base = name;
            while let Some(rest) = base
                .strip_prefix('*')
                .or_else(|| base.strip_prefix("[]"))
                .or_else(|| base.strip_prefix("map[]"))
            {
                base = rest;
            }
            let scalar = matches!(
                base,
                "string"
                    | "bool"
                    | "int"
                    | "uint"
                    | "float"
                    | "any"
                    | "rawjson"
                    | "quantity"
                    | "intorstring"
                    | "time"
            );
            assert!(scalar || t.structs.contains_key(base), "{name}");
        }
    }

    #[test]
    fn a_container_is_written_in_go_field_order_with_go_zero_values() {
        let c = json!({"image": "busybox", "name": "a", "command": ["sleep"], "unknownField": 1,
            "podInjectPolicy": "BeforeAppContainer", "shareVolumePolicy": {"type": "disabled"}});
        assert_eq!(
            go(c, Root::SidecarContainer),
            r#"{"name":"a","image":"busybox","command":["sleep"],"resources":{},"podInjectPolicy":"BeforeAppContainer","upgradeStrategy":{},"shareVolumePolicy":{"type":"disabled"}}"#
        );
    }

    #[test]
    fn omitempty_and_quantities_follow_go() {
        let c = json!({"name": "a", "ports": [], "stdin": false, "env": [{"name": "X", "value": ""}],
            "resources": {"limits": {"memory": "1024Mi", "cpu": "0.5"}},
            "readinessProbe": {"httpGet": {"port": 80}, "periodSeconds": 0}});
        assert_eq!(
            go(c, Root::SidecarContainer),
            r#"{"name":"a","env":[{"name":"X"}],"resources":{"limits":{"cpu":"500m","memory":"1Gi"}},"readinessProbe":{"httpGet":{"port":80}},"upgradeStrategy":{},"shareVolumePolicy":{}}"#
        );
    }

    #[test]
    fn a_template_gets_the_fields_go_always_writes() {
        let t = json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        assert_eq!(
            go(t, Root::PodTemplateSpec),
            r#"{"metadata":{"creationTimestamp":null,"labels":{"app":"x"}},"spec":{"containers":[{"name":"c","image":"i","resources":{}}]}}"#
        );
    }

    #[test]
    fn a_subset_template_is_written_as_go_writes_the_v1beta1_type() {
        // v1beta1 CloneSetSpec: a v1alpha1-only field (`updateStrategy.partition`) is
        // dropped, `scaleStrategy` and `updateStrategy` (structs) always written.
        let t = json!({"cloneSetTemplate": {"metadata": {"labels": {"app": "x"}, "extra": 1},
            "spec": {"updateStrategy": {"type": "InPlaceIfPossible", "partition": 1},
                "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}});
        assert_eq!(
            go(t, Root::UnitedDeploymentSubsetTemplate),
            r#"{"cloneSetTemplate":{"metadata":{"creationTimestamp":null,"labels":{"app":"x"}},"spec":{"selector":null,"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":[{"name":"c","image":"i","resources":{}}]}},"scaleStrategy":{},"updateStrategy":{"type":"InPlaceIfPossible"}}}}"#
        );
        let t = json!({"deploymentTemplate": {"spec": {"template": {}}}});
        assert_eq!(
            go(t, Root::UnitedDeploymentSubsetTemplate),
            r#"{"deploymentTemplate":{"metadata":{"creationTimestamp":null},"spec":{"selector":null,"template":{"metadata":{"creationTimestamp":null},"spec":{"containers":null}},"strategy":{}}}}"#
        );
    }
}
