//! `broadcastjob-ctl`: the BroadcastJob controller and its admission webhook.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(broadcastjob_ctl::IDENTITY).await?;
    broadcastjob_ctl::run(runtime).await
}
