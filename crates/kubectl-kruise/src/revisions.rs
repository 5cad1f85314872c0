//! `rollout history` and `rollout undo`: the ControllerRevisions a workload's controller
//! writes. CloneSet, Advanced StatefulSet and Advanced DaemonSet store their Pod template
//! as `{"spec":{"template":{…,"$patch":"replace"}}}` (as OpenKruise does, and kubectl for
//! Kubernetes' StatefulSet and DaemonSet), numbered by `.revision`.

use k8s_openapi::api::apps::v1::ControllerRevision;
use serde_json::Value;

use crate::error::{Error, Result};

/// kubectl's change-cause annotation, shown by `rollout history`.
pub const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";

/// The revisions controlled by the object with `uid`, oldest first.
pub fn owned_by<'a>(revisions: &'a [ControllerRevision], uid: &str) -> Vec<&'a ControllerRevision> {
    let mut owned: Vec<&ControllerRevision> = revisions
        .iter()
        .filter(|r| {
            r.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == uid && o.controller == Some(true))
        })
        .collect();
    owned.sort_by_key(|r| r.revision);
    owned
}

/// `REVISION  CHANGE-CAUSE` rows, as kubectl prints them.
pub fn history_table(revisions: &[&ControllerRevision]) -> String {
    if revisions.is_empty() {
        return "No rollout history found.\n".into();
    }
    let mut out = String::from("REVISION  CHANGE-CAUSE\n");
    for r in revisions {
        let cause = r
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CHANGE_CAUSE))
            .map(String::as_str)
            .unwrap_or("<none>");
        out.push_str(&format!("{:<8}  {cause}\n", r.revision));
    }
    out
}

/// The Pod template a revision holds (without the `$patch` directive).
pub fn template(revision: &ControllerRevision) -> Result<Value> {
    let data = revision
        .data
        .as_ref()
        .map(|d| d.0.clone())
        .unwrap_or(Value::Null);
    let mut template = data.pointer("/spec/template").cloned().ok_or_else(|| {
        Error::Refused(format!(
            "revision {} ({}) holds no Pod template",
            revision.revision,
            revision.metadata.name.as_deref().unwrap_or_default()
        ))
    })?;
    if let Some(map) = template.as_object_mut() {
        map.remove("$patch");
    }
    Ok(template)
}

/// What `rollout undo` does: the revision to go back to (`to_revision`, or the one before
/// the newest), or why not.
pub enum Undo {
    /// Replace `spec.template` with this revision's.
    To { revision: i64, template: Value },
    /// The workload already runs that template.
    AlreadyThere { revision: i64 },
}

pub fn plan_undo(
    revisions: &[&ControllerRevision],
    current_template: &Value,
    to_revision: i64,
) -> Result<Undo> {
    let chosen = if to_revision > 0 {
        revisions
            .iter()
            .find(|r| r.revision == to_revision)
            .ok_or_else(|| {
                Error::Refused(format!(
                    "unable to find specified revision {to_revision} in history"
                ))
            })?
    } else {
        if revisions.len() < 2 {
            return Err(Error::Refused("no rollout history found".into()));
        }
        revisions[revisions.len() - 2]
    };
    let template = template(chosen)?;
    if same_template(&template, current_template) {
        return Ok(Undo::AlreadyThere {
            revision: chosen.revision,
        });
    }
    Ok(Undo::To {
        revision: chosen.revision,
        template,
    })
}

/// Templates compare without the fields the controllers leave out of a revision
/// (`creationTimestamp: null` and the like).
fn same_template(a: &Value, b: &Value) -> bool {
    strip_nulls(a) == strip_nulls(b)
}

fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_nulls).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
    use serde_json::json;

    fn rev(n: i64, image: &str, owner: &str) -> ControllerRevision {
        let mut r = ControllerRevision {
            revision: n,
            data: Some(RawExtension(json!({"spec": {"template": {
                "$patch": "replace",
                "metadata": {"creationTimestamp": null, "labels": {"app": "a"}},
                "spec": {"containers": [{"name": "c", "image": image}]}}}}))),
            ..Default::default()
        };
        r.metadata.name = Some(format!("a-{n}"));
        r.metadata.owner_references = Some(vec![OwnerReference {
            uid: owner.into(),
            controller: Some(true),
            ..Default::default()
        }]);
        r
    }

    #[test]
    fn history_lists_owned_revisions_in_order() {
        let all = [rev(2, "b", "u"), rev(1, "a", "u"), rev(1, "x", "other")];
        let owned = owned_by(&all, "u");
        assert_eq!(owned.iter().map(|r| r.revision).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(
            history_table(&owned),
            "REVISION  CHANGE-CAUSE\n1         <none>\n2         <none>\n"
        );
        assert_eq!(history_table(&[]), "No rollout history found.\n");
    }

    #[test]
    fn undo_goes_to_the_previous_or_the_named_revision() {
        let all = [rev(1, "a", "u"), rev(2, "b", "u"), rev(3, "c", "u")];
        let owned = owned_by(&all, "u");
        let current = json!({"metadata": {"labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "c"}]}});
        match plan_undo(&owned, &current, 0).unwrap() {
            Undo::To { revision, template } => {
                assert_eq!(revision, 2);
                assert_eq!(template["spec"]["containers"][0]["image"], "b");
                assert!(template.get("$patch").is_none());
            }
            Undo::AlreadyThere { .. } => panic!("should roll back"),
        }
        assert!(matches!(
            plan_undo(&owned, &current, 3).unwrap(),
            Undo::AlreadyThere { revision: 3 }
        ));
        assert!(plan_undo(&owned, &current, 9).is_err());
        assert!(plan_undo(&owned[..1], &current, 0).is_err());
    }
}
