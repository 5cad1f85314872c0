//! `statefulset-ctl`: the Advanced StatefulSet controller and its admission webhook.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(statefulset_ctl::IDENTITY).await?;
    statefulset_ctl::run(runtime).await
}
