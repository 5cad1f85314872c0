//! `daemonset-ctl`: the Advanced DaemonSet controller and its admission webhook.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(daemonset_ctl::IDENTITY).await?;
    daemonset_ctl::run(runtime).await
}
