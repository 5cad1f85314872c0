//! Why a barrier reconcile failed (retried with backoff).

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
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
