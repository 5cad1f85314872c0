//! `cronjob-ctl`: the AdvancedCronJob controller and its admission webhook.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(cronjob_ctl::IDENTITY).await?;
    cronjob_ctl::run(runtime).await
}
