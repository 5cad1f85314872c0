//! `uniteddeployment-ctl`: the UnitedDeployment controller and its admission webhook.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(uniteddeployment_ctl::IDENTITY).await?;
    uniteddeployment_ctl::run(runtime).await
}
