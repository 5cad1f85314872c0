//! Why a protected object's live dependants could not be counted.

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
            Error::List { .. } => Self::Internal(e.to_string()),
        }
    }
}
