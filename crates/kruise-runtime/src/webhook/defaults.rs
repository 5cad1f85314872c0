//! Defaulting on an object's JSON (so fields our types do not know survive): the three
//! moves a defaulting webhook makes. A null field counts as unset, as it does for the
//! Go types; for an enum, an empty string too.

use serde_json::{Map, Value, json};

/// The object at `key`, created when unset; `None` when something else is there (left
/// for validation to reject).
pub fn object_entry<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    let entry = map.entry(key).or_insert(Value::Null);
    if entry.is_null() {
        *entry = json!({});
    }
    entry.as_object_mut()
}

/// Sets `key` to `value` when unset.
pub fn default_value(map: &mut Map<String, Value>, key: &str, value: Value) {
    let entry = map.entry(key).or_insert(Value::Null);
    if entry.is_null() {
        *entry = value;
    }
}

/// Sets the enum `key` to `value` when unset or empty.
pub fn default_enum(map: &mut Map<String, Value>, key: &str, value: &str) {
    let entry = map.entry(key).or_insert(Value::Null);
    if entry.is_null() || entry.as_str() == Some("") {
        *entry = json!(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_empty_count_as_unset() {
        let mut m = json!({"a": null, "e": "", "s": "x", "o": 5})
            .as_object()
            .unwrap()
            .clone();
        default_value(&mut m, "a", json!(1));
        default_value(&mut m, "b", json!(2));
        default_value(&mut m, "s", json!(3));
        default_enum(&mut m, "e", "E");
        default_enum(&mut m, "s", "S");
        assert!(object_entry(&mut m, "new").is_some());
        assert!(
            object_entry(&mut m, "o").is_none(),
            "not an object: left alone"
        );
        assert_eq!(
            Value::Object(m),
            json!({"a": 1, "b": 2, "s": "x", "e": "E", "o": 5, "new": {}})
        );
    }
}
