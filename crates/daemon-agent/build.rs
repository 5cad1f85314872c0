//! Generates the CRI v1 client from the vendored `proto/api.proto` (k8s.io/cri-api
//! `pkg/apis/runtime/v1`). protox parses it in pure Rust, so building needs no `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/api.proto");
    let descriptors = protox::compile(["api.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .compile_fds(descriptors)?;
    Ok(())
}
