//! The controller's one error type.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("ResourceDistribution {0} has no uid")]
    MissingUid(String),
    /// Some copies could not be read, created, updated or deleted; the status lists the
    /// namespaces. Retried with backoff (conflicts and missing namespaces are not).
    #[error("{failed} namespace(s) failed to sync: {summary}")]
    Distribution { failed: usize, summary: String },
}

impl kruise_runtime::ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(e) => kruise_runtime::reconciler::kube_error_label(e),
            Error::MissingUid(_) => "missing_uid",
            Error::Distribution { .. } => "distribution_failed",
        }
    }

    fn kube_error(&self) -> Option<&kube::Error> {
        match self {
            Error::Kube(e) => Some(e),
            Error::MissingUid(_) | Error::Distribution { .. } => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
