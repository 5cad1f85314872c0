//! The controller's one error type.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("EphemeralJob without namespace or uid: {0}")]
    MissingObjectKey(String),
}

impl kruise_runtime::ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(e) => kruise_runtime::reconciler::kube_error_label(e),
            Error::MissingObjectKey(_) => "missing_object_key",
        }
    }

    fn kube_error(&self) -> Option<&kube::Error> {
        match self {
            Error::Kube(e) => Some(e),
            Error::MissingObjectKey(_) => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
