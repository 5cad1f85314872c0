//! The controller's one error type.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("BroadcastJob {0} has no namespace or uid")]
    MissingObjectKey(String),
}

impl kruise_runtime::ReconcileError for Error {
    fn label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::MissingObjectKey(_) => "missing_key",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
