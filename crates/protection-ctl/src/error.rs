//! Why a protected object's live dependants could not be counted.

use crate::AGGREGATE_LABEL;

/// A failed count: the delete is refused (the route fails closed), naming this.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The oldObject lacks what the count needs (a CRD without group, plural or a
    /// served version).
    #[error("cannot read {what} of the {kind} being deleted")]
    Shape {
        kind: &'static str,
        what: &'static str,
    },
    /// The list was forbidden: protection-ctl's ClusterRole does not grant `list` on the
    /// custom resources of the CRD being deleted (it grants OpenKruise's own kinds only;
    /// docs/deletion-protection.md, "RBAC").
    #[error(
        "counting {what}: protection-ctl may not list them; grant it `list` on them in a ClusterRole labelled {AGGREGATE_LABEL}=true (docs/deletion-protection.md), or remove the label policy.kruise.io/delete-protection"
    )]
    NotGranted { what: String },
    /// The API list failed.
    #[error("counting {what}: {source}")]
    List {
        what: String,
        #[source]
        source: kube::Error,
    },
}

impl From<Error> for kruise_runtime::webhook::HandlerError {
    fn from(e: Error) -> Self {
        match e {
            Error::Shape { .. } => Self::Decode(e.to_string()),
            Error::List { .. } | Error::NotGranted { .. } => Self::Internal(e.to_string()),
        }
    }
}
