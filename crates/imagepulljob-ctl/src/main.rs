//! `imagepulljob-ctl`: the ImagePullJob, ImageListPullJob and NodeImage controllers and
//! their admission webhook.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runtime = kruise_runtime::Runtime::from_env(imagepulljob_ctl::IDENTITY).await?;
    imagepulljob_ctl::run(runtime).await
}
