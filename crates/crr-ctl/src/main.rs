//! `crr-ctl`: the ContainerRecreateRequest admission webhook and manager controller.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(crr_ctl::IDENTITY).await?;
    crr_ctl::run(runtime).await
}
