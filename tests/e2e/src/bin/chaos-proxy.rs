//! `make chaos`'s stand-in for a webhook Service: a TCP proxy that hands each connection
//! to the first backend that accepts it, so the apiserver reaches whichever replica of a
//! controller is alive (TLS passes through untouched; the replicas share their CA through
//! `KRUISE_WEBHOOK_CA_SECRET`).
//!
//! `chaos-proxy <listen-addr> <backend-addr>...`

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let listen: SocketAddr = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("usage: chaos-proxy <listen-addr> <backend-addr>..."))?
        .parse()?;
    let backends: Vec<SocketAddr> = args.map(|a| a.parse()).collect::<Result<_, _>>()?;
    anyhow::ensure!(!backends.is_empty(), "at least one backend address");
    let listener = TcpListener::bind(listen).await?;
    loop {
        let (mut inbound, _) = listener.accept().await?;
        let backends = backends.clone();
        tokio::spawn(async move {
            for backend in &backends {
                let connect = TcpStream::connect(backend);
                if let Ok(Ok(mut outbound)) =
                    tokio::time::timeout(Duration::from_millis(500), connect).await
                {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    return;
                }
            }
        });
    }
}
