//! Certificates for the webhook server.
//!
//! Two sources, as in kube-rs's admission examples and linkerd's policy controller:
//! a CA and serving certificate generated in memory with rcgen at start (the default;
//! nothing to provision), or PEM files from `KRUISE_WEBHOOK_CERT_DIR` (`tls.crt`,
//! `tls.key`, optional `ca.crt`) written by cert-manager or a mounted Secret.
//!
//! Either way the listener asks [`SwapResolver`] for its certificate on every handshake,
//! so a new certificate is served from the next connection on without rebinding.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SerialNumber,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::Error;

/// How long generated certificates live and when they are replaced.
///
/// Defaults are for production: a CA of 10 years, serving certificates of 1 year, each
/// replaced once 80% of its lifetime has passed (so an expiring certificate is never
/// served even if a check is missed for weeks), checked every minute (a comparison of
/// two timestamps, or re-reading three small files in cert-dir mode; short enough that a
/// cert-manager renewal is picked up long before the old certificate expires). A new CA
/// joins the caBundle next to the old one and signs serving certificates only
/// `propagation` after the bundle was applied.
#[derive(Clone, Debug)]
pub struct Rotation {
    pub ca_validity: Duration,
    pub serving_validity: Duration,
    /// Fraction of a certificate's lifetime after which it is replaced, in (0, 1].
    pub rotate_at: f64,
    pub check_interval: Duration,
    /// `notBefore` is set this far in the past, so an apiserver whose clock is a little
    /// behind ours still accepts a fresh certificate.
    pub backdate: Duration,
    /// After a new CA is applied to the webhook configurations, how long to wait before
    /// serving a certificate it signed: apiservers see configuration changes through a
    /// watch, shortly after the apply returns.
    pub propagation: Duration,
}

impl Default for Rotation {
    fn default() -> Self {
        const DAY: u64 = 24 * 60 * 60;
        Rotation {
            ca_validity: Duration::from_secs(10 * 365 * DAY),
            serving_validity: Duration::from_secs(365 * DAY),
            rotate_at: 0.8,
            check_interval: Duration::from_secs(60),
            backdate: Duration::from_secs(5 * 60),
            propagation: Duration::from_secs(30),
        }
    }
}

impl Rotation {
    /// True once `rotate_at` of the lifetime `issued..expires` has passed.
    pub(crate) fn due(&self, issued: SystemTime, expires: SystemTime, now: SystemTime) -> bool {
        let life = expires.duration_since(issued).unwrap_or_default();
        let fraction = self.rotate_at.clamp(0.0, 1.0);
        now >= issued + life.mul_f64(fraction)
    }
}

/// A CA we generated and sign serving certificates with.
pub(crate) struct Authority {
    issuer: Issuer<'static, KeyPair>,
    /// The subject's common name; with the key it is all an issuer needs (see
    /// [`Authority::restore`]).
    pub(crate) common_name: String,
    pub(crate) pem: String,
    pub(crate) key_pem: String,
    pub(crate) issued: SystemTime,
    pub(crate) expires: SystemTime,
    /// Counts CAs generated (by this process, or by the replicas sharing a CA Secret); a
    /// serving certificate records the one that signed it, so a CA rotation knows the
    /// serving certificate must follow.
    pub(crate) generation: u64,
}

/// A serving certificate ready for rustls, with what rotation needs to know about it.
#[derive(Clone)]
pub(crate) struct Serving {
    pub(crate) certified: Arc<CertifiedKey>,
    pub(crate) issued: SystemTime,
    pub(crate) expires: SystemTime,
    /// The [`Authority::generation`] that signed it (0 for files).
    pub(crate) ca_generation: u64,
    /// The names it was issued for (empty for files: whoever wrote them decided).
    pub(crate) sans: Vec<String>,
    /// Certificate and key as PEM, for the CA Secret (empty for files).
    pub(crate) cert_pem: String,
    pub(crate) key_pem: String,
}

impl Serving {
    /// The DER of the certificate (leaf first).
    pub(crate) fn der(&self) -> &CertificateDer<'static> {
        &self.certified.cert[0]
    }

    /// A serving certificate stored earlier (in the CA Secret) by [`Authority::issue`].
    pub(crate) fn restore(
        cert_pem: &str,
        key_pem: &str,
        sans: Vec<String>,
        (issued, expires): (SystemTime, SystemTime),
        ca_generation: u64,
        provider: &CryptoProvider,
    ) -> Result<Self, Error> {
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(cert_pem.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| cert_error("serving certificate", e))?;
        if chain.is_empty() {
            return Err(Error::Webhook(
                "serving certificate: no CERTIFICATE block".into(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
            .map_err(|e| cert_error("serving key", e))?;
        let certified = CertifiedKey::from_der(chain, key, provider)
            .map_err(|e| cert_error("serving certificate and key do not match", e))?;
        Ok(Serving {
            certified: Arc::new(certified),
            issued,
            expires,
            ca_generation,
            sans,
            cert_pem: cert_pem.to_string(),
            key_pem: key_pem.to_string(),
        })
    }
}

fn cert_error(what: &str, err: impl std::fmt::Display) -> Error {
    Error::Webhook(format!("{what}: {err}"))
}

fn random_serial() -> SerialNumber {
    // 16 random bytes with the top bit cleared: a positive INTEGER of at most 128 bits,
    // unique per certificate (RFC 5280 4.1.2.2), so a rotated certificate is told apart.
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

/// What a CA's certificate says about its subject. An issuer is rebuilt from exactly
/// these and the key (rcgen reads nothing else from the parameters when signing), so the
/// certificates it signs name the same issuer as the ones signed before.
fn ca_params(common_name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn.push(DnType::OrganizationName, "kruise-rs");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

impl Authority {
    pub(crate) fn generate(
        name: &str,
        rotation: &Rotation,
        generation: u64,
        now: SystemTime,
    ) -> Result<Self, Error> {
        let key = KeyPair::generate().map_err(|e| cert_error("generate CA key", e))?;
        let common_name = format!("{name} webhook CA");
        let mut params = ca_params(&common_name);
        params.serial_number = Some(random_serial());
        let expires = now + rotation.ca_validity;
        params.not_before = (now - rotation.backdate).into();
        params.not_after = expires.into();
        let cert = params
            .self_signed(&key)
            .map_err(|e| cert_error("self-sign CA", e))?;
        Ok(Authority {
            pem: cert.pem(),
            key_pem: key.serialize_pem(),
            issuer: Issuer::new(params, key),
            common_name,
            issued: now,
            expires,
            generation,
        })
    }

    /// A CA stored earlier (in the CA Secret) by [`Authority::generate`].
    pub(crate) fn restore(
        common_name: &str,
        pem: &str,
        key_pem: &str,
        (issued, expires): (SystemTime, SystemTime),
        generation: u64,
    ) -> Result<Self, Error> {
        if CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| cert_error("CA certificate", e))?
            .len()
            != 1
        {
            return Err(Error::Webhook(
                "CA certificate: expected one CERTIFICATE block".into(),
            ));
        }
        let key = KeyPair::from_pem(key_pem).map_err(|e| cert_error("CA key", e))?;
        Ok(Authority {
            issuer: Issuer::new(ca_params(common_name), key),
            common_name: common_name.to_string(),
            pem: pem.to_string(),
            key_pem: key_pem.to_string(),
            issued,
            expires,
            generation,
        })
    }

    /// Issues a serving certificate for `sans` (IP addresses or DNS names). It never
    /// outlives the CA: a certificate the apiserver cannot verify is worse than an early
    /// rotation.
    pub(crate) fn issue(
        &self,
        sans: &[String],
        rotation: &Rotation,
        provider: &CryptoProvider,
        now: SystemTime,
    ) -> Result<Serving, Error> {
        let key = KeyPair::generate().map_err(|e| cert_error("generate serving key", e))?;
        let mut params = CertificateParams::new(sans.to_vec())
            .map_err(|e| cert_error("serving certificate names", e))?;
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            sans.first().cloned().unwrap_or_else(|| "webhook".into()),
        );
        params.distinguished_name = dn;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(random_serial());
        let expires = (now + rotation.serving_validity).min(self.expires);
        params.not_before = (now - rotation.backdate).into();
        params.not_after = expires.into();
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| cert_error("sign serving certificate", e))?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let certified = CertifiedKey::from_der(vec![cert.der().clone()], key_der, provider)
            .map_err(|e| cert_error("load serving key", e))?;
        Ok(Serving {
            certified: Arc::new(certified),
            issued: now,
            expires,
            ca_generation: self.generation,
            sans: sans.to_vec(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

#[cfg(test)]
impl Authority {
    /// A leaf (certificate PEM, key PEM) for `sans`, as cert-manager would write it.
    pub(crate) fn issue_pem(&self, sans: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.serial_number = Some(random_serial());
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// Certificates read from a directory (cert-manager's Secret layout).
pub(crate) struct Loaded {
    pub(crate) serving: Serving,
    /// `ca.crt` when present; without it the caBundle is left to whoever injects it
    /// (cert-manager's cainjector).
    pub(crate) ca_pem: Option<String>,
    /// The raw bytes read, to notice a change cheaply.
    pub(crate) fingerprint: Vec<u8>,
}

pub(crate) const CERT_FILE: &str = "tls.crt";
pub(crate) const KEY_FILE: &str = "tls.key";
pub(crate) const CA_FILE: &str = "ca.crt";

/// The raw contents of a cert dir.
pub(crate) struct DirBytes {
    cert: Vec<u8>,
    key: Vec<u8>,
    ca: Option<Vec<u8>>,
}

/// Reads the raw bytes of the cert dir (for change detection).
pub(crate) fn read_dir_bytes(dir: &Path) -> Result<DirBytes, Error> {
    let read = |file: &str| {
        let path: PathBuf = dir.join(file);
        std::fs::read(&path).map_err(|e| cert_error(&format!("read {}", path.display()), e))
    };
    let cert = read(CERT_FILE)?;
    let key = read(KEY_FILE)?;
    let ca = match std::fs::read(dir.join(CA_FILE)) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(cert_error(
                &format!("read {}", dir.join(CA_FILE).display()),
                e,
            ));
        }
    };
    Ok(DirBytes { cert, key, ca })
}

pub(crate) fn fingerprint(parts: &DirBytes) -> Vec<u8> {
    let mut all = parts.cert.clone();
    all.push(0);
    all.extend_from_slice(&parts.key);
    all.push(0);
    all.extend_from_slice(parts.ca.as_deref().unwrap_or_default());
    all
}

/// Loads `tls.crt` (chain, leaf first), `tls.key` and optionally `ca.crt` from `dir`.
pub(crate) fn load_dir(
    dir: &Path,
    provider: &CryptoProvider,
    now: SystemTime,
) -> Result<Loaded, Error> {
    let parts = read_dir_bytes(dir)?;
    let where_ = |file: &str| dir.join(file).display().to_string();
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&parts.cert)
        .collect::<Result<_, _>>()
        .map_err(|e| cert_error(&where_(CERT_FILE), e))?;
    if chain.is_empty() {
        return Err(Error::Webhook(format!(
            "{}: no CERTIFICATE block",
            where_(CERT_FILE)
        )));
    }
    let key =
        PrivateKeyDer::from_pem_slice(&parts.key).map_err(|e| cert_error(&where_(KEY_FILE), e))?;
    let certified = CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        cert_error(
            &format!(
                "{} and {} do not match",
                where_(CERT_FILE),
                where_(KEY_FILE)
            ),
            e,
        )
    })?;
    let ca_pem = match &parts.ca {
        Some(bytes) => {
            let text =
                String::from_utf8(bytes.clone()).map_err(|e| cert_error(&where_(CA_FILE), e))?;
            let count = CertificateDer::pem_slice_iter(bytes)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| cert_error(&where_(CA_FILE), e))?
                .len();
            if count == 0 {
                return Err(Error::Webhook(format!(
                    "{}: no CERTIFICATE block",
                    where_(CA_FILE)
                )));
            }
            Some(text)
        }
        None => None,
    };
    Ok(Loaded {
        serving: Serving {
            certified: Arc::new(certified),
            // Whoever wrote the files rotates them; we only notice the change.
            issued: now,
            expires: SystemTime::UNIX_EPOCH + Duration::from_secs(u64::MAX / 4),
            ca_generation: 0,
            sans: Vec::new(),
            cert_pem: String::new(),
            key_pem: String::new(),
        },
        ca_pem,
        fingerprint: fingerprint(&parts),
    })
}

/// The certificate rustls serves, replaceable at any time: each handshake reads the
/// current one, connections already established keep theirs.
#[derive(Debug)]
pub(crate) struct SwapResolver {
    current: RwLock<Arc<CertifiedKey>>,
}

impl SwapResolver {
    pub(crate) fn new(initial: Arc<CertifiedKey>) -> Self {
        SwapResolver {
            current: RwLock::new(initial),
        }
    }

    pub(crate) fn swap(&self, next: Arc<CertifiedKey>) {
        // A poisoned lock only means a writer panicked mid-assignment of an Arc, which
        // cannot leave it half-written: keep serving.
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = next;
    }

    pub(crate) fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl ResolvesServerCert for SwapResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The process's crypto provider: ring, explicitly, rather than whatever a dependency
/// may have installed as the process default.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The CAs of `KRUISE_WEBHOOK_CLIENT_CA` (a PEM file of one or more certificates).
pub(crate) fn client_roots(path: &str) -> Result<rustls::RootCertStore, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path)
        .map_err(|e| Error::Settings(format!("KRUISE_WEBHOOK_CLIENT_CA={path}: {e}")))?
    {
        let cert =
            cert.map_err(|e| Error::Settings(format!("KRUISE_WEBHOOK_CLIENT_CA={path}: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| Error::Settings(format!("KRUISE_WEBHOOK_CLIENT_CA={path}: {e}")))?;
    }
    if roots.is_empty() {
        return Err(Error::Settings(format!(
            "KRUISE_WEBHOOK_CLIENT_CA={path}: no certificate in the file"
        )));
    }
    Ok(roots)
}

/// A rustls server configuration serving whatever `resolver` holds, over HTTP/2 or 1.1.
/// With `client_roots`, a client may present a certificate, which must then chain to one
/// of them (the handshake fails otherwise); a client without one still connects, and the
/// routes that need one refuse it (`tls::Peer::certified`).
pub(crate) fn server_config(
    provider: Arc<CryptoProvider>,
    resolver: Arc<SwapResolver>,
    client_roots: Option<rustls::RootCertStore>,
) -> Result<rustls::ServerConfig, Error> {
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| cert_error("TLS versions", e))?;
    let builder = match client_roots {
        Some(roots) => {
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .allow_unauthenticated()
            .build()
            .map_err(|e| cert_error("client certificate verifier", e))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
pub(crate) mod test_support {
    //! A TLS client for tests, and just enough DER reading to see a certificate's serial
    //! number and validity (no X.509 parser dependency for two fields).

    use std::sync::Arc;

    use rustls::RootCertStore;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use tokio::net::TcpStream;
    use tokio_rustls::TlsConnector;
    use tokio_rustls::client::TlsStream;

    pub(crate) fn connector(ca_pem: &str) -> TlsConnector {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.expect("CA PEM")).expect("CA cert");
        }
        let config = rustls::ClientConfig::builder_with_provider(super::provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        TlsConnector::from(Arc::new(config))
    }

    /// Connects to `addr` presenting `name` (SNI + verification); returns the stream or
    /// the TLS error (which names a verification failure).
    pub(crate) async fn connect(
        ca_pem: &str,
        addr: std::net::SocketAddr,
        name: &str,
    ) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(addr).await?;
        let name = ServerName::try_from(name.to_string()).expect("server name");
        connector(ca_pem).connect(name, tcp).await
    }

    /// The DER of the certificate the server presented.
    pub(crate) fn peer_cert(stream: &TlsStream<TcpStream>) -> Vec<u8> {
        stream.get_ref().1.peer_certificates().expect("peer certs")[0].to_vec()
    }

    fn tlv(input: &[u8]) -> (u8, &[u8], &[u8]) {
        let tag = input[0];
        let (len, header) = if input[1] < 0x80 {
            (input[1] as usize, 2)
        } else {
            let n = (input[1] & 0x7f) as usize;
            let len = input[2..2 + n]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | *b as usize);
            (len, 2 + n)
        };
        (tag, &input[header..header + len], &input[header + len..])
    }

    /// (serial number bytes, notBefore text) of a DER certificate.
    pub(crate) fn serial_and_not_before(der: &[u8]) -> (Vec<u8>, String) {
        let (_, cert, _) = tlv(der);
        let (_, tbs, _) = tlv(cert);
        let (tag, _, mut rest) = tlv(tbs);
        // [0] EXPLICIT version is optional; the serial follows it.
        let serial_tlv = if tag == 0xa0 { rest } else { tbs };
        let (_, serial, after) = tlv(serial_tlv);
        rest = after;
        let (_, _sig_alg, after) = tlv(rest);
        let (_, _issuer, after) = tlv(after);
        let (_, validity, _) = tlv(after);
        let (_, not_before, _) = tlv(validity);
        (
            serial.to_vec(),
            String::from_utf8_lossy(not_before).into_owned(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

    fn sans() -> Vec<String> {
        vec![
            "127.0.0.1".into(),
            "localhost".into(),
            "kruise-webhook.kruise-system.svc".into(),
            "kruise-webhook.kruise-system.svc.cluster.local".into(),
        ]
    }

    #[test]
    fn rotation_is_due_after_the_configured_fraction() {
        let r = Rotation::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let end = t0 + Duration::from_secs(100);
        assert!(!r.due(t0, end, t0 + Duration::from_secs(79)));
        assert!(r.due(t0, end, t0 + Duration::from_secs(80)));
        assert!(r.due(t0, end, end + Duration::from_secs(1)));
    }

    #[test]
    fn serving_cert_never_outlives_its_ca() {
        let rotation = Rotation {
            ca_validity: Duration::from_secs(3600),
            serving_validity: Duration::from_secs(365 * 24 * 3600),
            ..Rotation::default()
        };
        let now = SystemTime::now();
        let ca = Authority::generate("t", &rotation, 1, now).unwrap();
        let serving = ca.issue(&sans(), &rotation, &provider(), now).unwrap();
        assert_eq!(serving.expires, ca.expires);
        assert_eq!(serving.ca_generation, 1);
    }

    #[tokio::test]
    async fn generated_cert_has_the_sans_and_verifies_against_the_ca() {
        let rotation = Rotation::default();
        let now = SystemTime::now();
        let ca = Authority::generate("test", &rotation, 1, now).unwrap();
        let serving = ca.issue(&sans(), &rotation, &provider(), now).unwrap();
        let resolver = Arc::new(SwapResolver::new(serving.certified.clone()));
        let config = Arc::new(server_config(provider(), resolver, None).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    if let Ok(mut tls) = acceptor.accept(tcp).await {
                        use tokio::io::AsyncWriteExt;
                        let _ = tls.shutdown().await;
                    }
                });
            }
        });
        // Every SAN the apiserver may use verifies against the CA...
        for name in sans() {
            let stream = connect(&ca.pem, addr, &name)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(peer_cert(&stream), serving.der().to_vec());
        }
        // ...a name that is not in the certificate does not...
        let err = connect(&ca.pem, addr, "elsewhere.example.com")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not valid for name"), "{err}");
        // ...and neither does the chain under another CA.
        let other = Authority::generate("other", &rotation, 2, now).unwrap();
        let err = connect(&other.pem, addr, "127.0.0.1").await.unwrap_err();
        assert!(err.to_string().contains("UnknownIssuer"), "{err}");
    }

    #[test]
    fn files_load_and_mismatches_are_named() {
        let rotation = Rotation::default();
        let now = SystemTime::now();
        let ca = Authority::generate("files", &rotation, 1, now).unwrap();
        let dir =
            std::env::temp_dir().join(format!("kruise-webhook-certs-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        // Write a real pair through rcgen (what cert-manager would put there).
        let key = KeyPair::generate().unwrap();
        let params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        let cert = params.signed_by(&key, &ca.issuer).unwrap();
        std::fs::write(dir.join(CERT_FILE), cert.pem()).unwrap();
        std::fs::write(dir.join(KEY_FILE), key.serialize_pem()).unwrap();
        let loaded = load_dir(&dir, &provider(), now).unwrap();
        assert_eq!(loaded.serving.der().to_vec(), cert.der().to_vec());
        assert!(loaded.ca_pem.is_none());
        std::fs::write(dir.join(CA_FILE), &ca.pem).unwrap();
        let with_ca = load_dir(&dir, &provider(), now).unwrap();
        assert_eq!(with_ca.ca_pem.as_deref(), Some(ca.pem.as_str()));
        assert_ne!(with_ca.fingerprint, loaded.fingerprint);
        // A key that does not belong to the certificate is refused with both file names.
        std::fs::write(
            dir.join(KEY_FILE),
            KeyPair::generate().unwrap().serialize_pem(),
        )
        .unwrap();
        let err = load_dir(&dir, &provider(), now).err().unwrap().to_string();
        assert!(
            err.contains("tls.crt and") && err.contains("do not match"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
