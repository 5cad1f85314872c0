//! The agent's one error type.

/// Everything that can go wrong in the agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no CRI socket found under {0} (set --socket-file or KRUISE_CRI_SOCKET)")]
    NoSocket(String),
    #[error("CRI: {0}")]
    Cri(String),
    #[error("CRI {code:?}: {message}")]
    Rpc { code: tonic::Code, message: String },
    #[error("the node's name is unknown: set --node-name, KRUISE_NODE_NAME or NODE_NAME")]
    NoNodeName,
    #[error("{0}: {1}")]
    Setting(String, String),
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
    #[error("serializing: {0}")]
    Json(#[from] serde_json::Error),
}

impl From<tonic::Status> for Error {
    fn from(status: tonic::Status) -> Self {
        Error::Rpc {
            code: status.code(),
            message: status.message().to_string(),
        }
    }
}
