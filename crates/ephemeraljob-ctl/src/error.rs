//! The controller's one error type.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("EphemeralJob without namespace or uid: {0}")]
    MissingObjectKey(String),
}

impl kruise_runtime::ReconcileError for Error {
    fn label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::MissingObjectKey(_) => "missing_object_key",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
