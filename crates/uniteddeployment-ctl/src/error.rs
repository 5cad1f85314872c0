//! The controller's one error type.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("revisions: {0}")]
    Revision(#[from] kruise_workload::history::RevisionError),
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("UnitedDeployment {0} has no namespace or uid")]
    MissingObjectKey(String),
}

impl kruise_runtime::ReconcileError for Error {
    fn label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Revision(_) => "revision",
            Error::Json(_) => "json",
            Error::MissingObjectKey(_) => "missing_key",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
