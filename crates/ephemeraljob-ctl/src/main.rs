//! `ephemeraljob-ctl`: the EphemeralJob controller and validating webhook.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(ephemeraljob_ctl::IDENTITY).await?;
    ephemeraljob_ctl::run(runtime).await
}
