//! `workloadspread-ctl`: the WorkloadSpread controller and its webhooks.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(workloadspread_ctl::IDENTITY).await?;
    workloadspread_ctl::run(runtime).await
}
