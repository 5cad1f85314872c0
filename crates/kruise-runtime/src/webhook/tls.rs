//! A TLS listener for `axum::serve`.
//!
//! Why not axum-server: its `tls-rustls` feature turns on rustls's default provider
//! (aws-lc-rs), which this workspace keeps out, and its hot reload replaces the whole
//! `ServerConfig`; a certificate resolver (what linkerd does) swaps only the certificate.
//! Why not a hand-written hyper loop: `axum::serve` already does HTTP/1 + HTTP/2,
//! graceful shutdown and connection tracking; all it needs is a [`Listener`] whose
//! connections are TLS streams.
//!
//! Handshakes run in their own tasks with a timeout, so one slow or silent client never
//! holds up `accept` for the others; finished handshakes are handed to axum through a
//! bounded channel.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::Listener;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

/// How long a client has to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The other end of a webhook connection, as handlers see it (`ConnectInfo<Peer>`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Peer {
    pub addr: SocketAddr,
    /// It presented a client certificate that chains to `KRUISE_WEBHOOK_CLIENT_CA` (the
    /// only certificates the handshake accepts; without that setting none is asked for).
    pub certified: bool,
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, TlsListener>> for Peer {
    fn connect_info(stream: axum::serve::IncomingStream<'_, TlsListener>) -> Self {
        *stream.remote_addr()
    }
}

pub(crate) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, Peer)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Accepts TCP connections on `tcp` until `shutdown`, handshaking each with `config`.
    pub(crate) fn new(
        tcp: TcpListener,
        config: Arc<rustls::ServerConfig>,
        shutdown: CancellationToken,
    ) -> std::io::Result<Self> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let acceptor = TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = tokio::select! {
                    _ = shutdown.cancelled() => return,
                    accepted = tcp.accept() => match accepted {
                        Ok(pair) => pair,
                        Err(err) => {
                            // EMFILE and friends: back off instead of spinning, as axum does.
                            tracing::warn!(%err, "webhook accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    },
                };
                let _ = stream.set_nodelay(true);
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let certified = tls
                                .get_ref()
                                .1
                                .peer_certificates()
                                .is_some_and(|c| !c.is_empty());
                            let _ = tx
                                .send((
                                    tls,
                                    Peer {
                                        addr: peer,
                                        certified,
                                    },
                                ))
                                .await;
                        }
                        // Port scanners, health probes that speak plain TCP, clients that
                        // do not trust our CA: worth a debug line, not a warning each.
                        Ok(Err(err)) => {
                            tracing::debug!(%peer, %err, "webhook TLS handshake failed")
                        }
                        Err(_) => tracing::debug!(%peer, "webhook TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { ready, local })
    }
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = Peer;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(conn) => conn,
            // The accept loop ended (shutdown): no more connections will come; axum's
            // graceful shutdown finishes the ones in flight.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(Peer {
            addr: self.local,
            certified: false,
        })
    }
}
