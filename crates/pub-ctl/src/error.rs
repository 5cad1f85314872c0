//! The controller's one error type.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("encoding: {0}")]
    Json(#[from] serde_json::Error),
}

impl kruise_runtime::ReconcileError for Error {
    fn label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Json(_) => "json",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub use kruise_runtime::api_error::{is_conflict, is_not_found};
