//! `protection-ctl`: resource deletion protection (`policy.kruise.io/delete-protection`),
//! a webhook-only binary.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(protection_ctl::IDENTITY).await?;
    protection_ctl::run(runtime).await
}
