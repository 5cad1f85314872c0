//! The controller's one error type.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("SidecarSet {0} has no uid")]
    MissingObjectKey(String),
    #[error("encoding: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Runtime(#[from] kruise_runtime::Error),
    #[error("revision: {0}")]
    Revision(String),
}

impl kruise_runtime::ReconcileError for Error {
    fn label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::MissingObjectKey(_) => "missing_key",
            Error::Json(_) => "json",
            Error::Runtime(_) => "runtime",
            Error::Revision(_) => "revision",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
