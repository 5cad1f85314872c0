//! `pub-ctl`: the PodUnavailableBudget controller and its Pod admission webhooks.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(pub_ctl::IDENTITY).await?;
    pub_ctl::run(runtime).await
}
