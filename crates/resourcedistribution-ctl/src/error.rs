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
    fn label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::MissingUid(_) => "missing_uid",
            Error::Distribution { .. } => "distribution_failed",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
