//! The controller's one error type.

use kruise_workload::history::RevisionError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("DaemonSet {0} has no namespace or uid")]
    MissingObjectKey(String),
    #[error("encoding: {0}")]
    Json(#[from] serde_json::Error),
    #[error("revision: {0}")]
    Revision(#[from] RevisionError),
}

impl kruise_runtime::ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self.kube_error() {
            Some(e) => kruise_runtime::reconciler::kube_error_label(e),
            None => match self {
                Error::MissingObjectKey(_) => "missing_key",
                Error::Json(_) => "json",
                _ => "revision",
            },
        }
    }

    fn kube_error(&self) -> Option<&kube::Error> {
        match self {
            Error::Kube(e) | Error::Revision(RevisionError::Kube(e)) => Some(e),
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
