//! The one error type of the command line; `main` prints it as kubectl does (`error: …`)
//! and exits 1.

/// What can go wrong in a `kubectl kruise` command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The arguments name no resource, or one this command does not know.
    #[error("{0}")]
    Usage(String),
    /// The command does not apply to this kind of resource.
    #[error("{kind} {name:?} {what}")]
    Unsupported {
        kind: String,
        name: String,
        what: String,
    },
    /// The object is not what the command can act on (already paused, no such revision …).
    #[error("{0}")]
    Refused(String),
    /// `rollout status --timeout`, `create containerrecreaterequest --wait`.
    #[error("timed out waiting for {0}")]
    Timeout(String),
    /// A ContainerRecreateRequest that ended with a failed container.
    #[error("{0}")]
    Failed(String),
    /// kubeconfig, context or in-cluster configuration.
    #[error("{0}")]
    Config(String),
    /// The API server's refusal, as kubectl prints it.
    #[error("Error from server ({reason}): {message}")]
    Server { reason: String, message: String },
    /// No answer from the API server (connection, TLS, …).
    #[error(transparent)]
    Kube(kube::Error),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Patch(#[from] json_patch::PatchError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// The line kubectl would print for it: `Error from server (…): …` as it comes, every
    /// other error behind `error: `.
    pub fn kubectl_line(&self) -> String {
        match self {
            Error::Server { .. } => self.to_string(),
            _ => format!("error: {self}"),
        }
    }
}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) => Error::Server {
                reason: if status.reason.is_empty() {
                    status.code.to_string()
                } else {
                    status.reason.clone()
                },
                message: status.message.clone(),
            },
            other => Error::Kube(other),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
