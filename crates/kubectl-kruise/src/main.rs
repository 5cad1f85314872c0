//! `kubectl-kruise`: see the crate documentation (lib.rs) and docs/kubectl-kruise.md.

use std::process::ExitCode;

use clap::Parser;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = kubectl_kruise::Cli::parse();
    let mut stdout = std::io::stdout();
    match kubectl_kruise::run(cli, &mut stdout).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", e.kubectl_line());
            ExitCode::FAILURE
        }
    }
}
