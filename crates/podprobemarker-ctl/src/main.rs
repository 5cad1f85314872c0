//! `podprobemarker-ctl`: the PodProbeMarker and NodePodProbe controllers and the
//! PodProbeMarker validating webhook.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(podprobemarker_ctl::IDENTITY).await?;
    podprobemarker_ctl::run(runtime).await
}
