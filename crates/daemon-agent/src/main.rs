//! `daemon-agent`: the node agent (one per node, a DaemonSet) pulling its NodeImage's
//! images through the node's CRI runtime.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(daemon_agent::IDENTITY).await?;
    daemon_agent::run(runtime).await
}
