//! `resourcedistribution-ctl`: the ResourceDistribution controller and its admission webhook.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(resourcedistribution_ctl::IDENTITY).await?;
    resourcedistribution_ctl::run(runtime).await
}
