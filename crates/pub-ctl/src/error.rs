//! The controller's one error type.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("encoding: {0}")]
    Json(#[from] serde_json::Error),
}

impl kruise_runtime::ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(e) => kruise_runtime::reconciler::kube_error_label(e),
            Error::Json(_) => "json",
        }
    }

    fn kube_error(&self) -> Option<&kube::Error> {
        match self {
            Error::Kube(e) => Some(e),
            Error::Json(_) => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The apiserver said 409: someone wrote the object since we read it.
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The apiserver said 404.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}
