//! `sidecarset-ctl`: the SidecarSet controller and its Pod injection webhook.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(sidecarset_ctl::IDENTITY).await?;
    sidecarset_ctl::run(runtime).await
}
