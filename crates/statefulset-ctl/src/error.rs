//! The controller's one error type.

use kruise_workload::history::RevisionError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("StatefulSet {0} has no namespace or uid")]
    MissingObjectKey(String),
    #[error("encoding: {0}")]
    Json(#[from] serde_json::Error),
    #[error("revision: {0}")]
    Revision(#[from] RevisionError),
}

impl kruise_runtime::ReconcileError for Error {
    fn label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::MissingObjectKey(_) => "missing_key",
            Error::Json(_) => "json",
            Error::Revision(_) => "revision",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
