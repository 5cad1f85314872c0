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

pub use kruise_runtime::api_error::{is_conflict, is_not_found};
