//! Schema helpers shared by the CRD types.
//!
//! Upstream OpenKruise marks embedded pod templates and PVC templates as schemaless
//! (`x-kubernetes-preserve-unknown-fields`) so the CRDs stay small enough for
//! client-side `kubectl apply` and for etcd; the content is validated by the
//! admission webhooks instead. We do the same, so our CRDs accept exactly what
//! upstream's accept.

use schemars::{Schema, SchemaGenerator, json_schema};

/// An object whose content the apiserver keeps as-is (pod templates and the like).
pub fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// A list of objects whose content the apiserver keeps as-is (PVC templates, containers).
pub fn preserve_unknown_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true
        }
    })
}
