//! `persistentpodstate-ctl`: the PersistentPodState controller and its webhooks.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(persistentpodstate_ctl::IDENTITY).await?;
    persistentpodstate_ctl::run(runtime).await
}
