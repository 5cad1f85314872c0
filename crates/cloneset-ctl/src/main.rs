//! `cloneset-ctl`: the CloneSet controller and its admission webhook.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(cloneset_ctl::IDENTITY).await?;
    cloneset_ctl::run(runtime).await
}
