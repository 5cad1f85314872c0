//! `launchpriority-ctl`: container launch priority (the Pod webhook and the barrier
//! controller).

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(launchpriority_ctl::IDENTITY).await?;
    launchpriority_ctl::run(runtime).await
}
