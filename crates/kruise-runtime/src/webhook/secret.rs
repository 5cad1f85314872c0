//! One webhook CA for every replica of a controller, kept in a Secret
//! (`KRUISE_WEBHOOK_CA_SECRET`, in `KRUISE_NAMESPACE`).
//!
//! Without it each replica generates its own CA, and each replica's registration
//! overwrites the caBundle of the others: the apiserver then trusts one replica only.
//! With it the Secret is the one source of the certificates:
//!
//! - **Start**: a replica reads the Secret and serves what it holds. If the Secret is
//!   missing it creates it; if it is empty (the kustomize overlays ship it empty, so the
//!   controller needs no `create` on Secrets) or unreadable it fills it, at the
//!   resourceVersion it read. Of replicas racing to do so exactly one write succeeds (a
//!   create of an existing Secret, or a replace at a stale resourceVersion, is refused
//!   with 409); the others read again and serve the winner's certificates.
//! - **Rotation** (of the CA or the serving certificate) is computed by whichever replica
//!   notices it is due, and written at the resourceVersion that replica last saw: if
//!   another replica rotated first, the write is refused and the loser serves the
//!   winner's certificates instead of its own.
//! - **Every check** ([`super::Rotation::check_interval`]) reads the Secret; a replica
//!   that finds it changed serves its certificates from the next handshake and applies
//!   its caBundle (the same bundle from every replica, so their applies agree). A Secret
//!   deleted or emptied meanwhile is written again with what the replica serves.
//!
//! Layout (type Opaque): `state.json` is what replicas read: every CA (certificate, key,
//! validity, generation) and the serving certificate and key with the names it was
//! issued for. `ca.crt` (the caBundle, newest first), `tls.crt` and `tls.key` are written
//! beside it, in cert-manager's layout, for people and tools that inspect the Secret.
//! RBAC: `get` and `update` on this one Secret name (`resourceNames`), plus `create`
//! only where the Secret is not created beforehand.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use rustls::crypto::CryptoProvider;
use serde::{Deserialize, Serialize};

use super::certs::{Authority, CA_FILE, CERT_FILE, KEY_FILE, Serving};
use super::generated::Generated;
use crate::Error;
use crate::api_error::is_conflict;

/// The key replicas read; the others are written for inspection.
pub(crate) const STATE_KEY: &str = "state.json";
const FORMAT: u32 = 1;
/// Rounds of read-then-write before giving up (each lost round means another replica
/// wrote meanwhile, and the next read sees what it wrote).
const ATTEMPTS: usize = 5;

/// The Secret as the protocol sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Stored {
    pub(crate) version: String,
    pub(crate) data: BTreeMap<String, Vec<u8>>,
}

#[derive(Debug)]
pub(crate) enum StoreError {
    /// The write lost a race: the Secret exists (create), or changed or disappeared since
    /// the resourceVersion given (replace).
    Conflict,
    Other(String),
}

/// Where the Secret lives: the apiserver ([`KubeStore`]), or memory in unit tests.
pub(crate) trait Store: Send + Sync {
    /// The Secret, `None` when it does not exist.
    fn get(&self) -> BoxFuture<'_, Result<Option<Stored>, StoreError>>;
    /// Creates the Secret; its new resourceVersion.
    fn create(&self, data: BTreeMap<String, Vec<u8>>) -> BoxFuture<'_, Result<String, StoreError>>;
    /// Replaces the Secret's data if it is still at `version`; its new resourceVersion.
    fn replace(
        &self,
        version: String,
        data: BTreeMap<String, Vec<u8>>,
    ) -> BoxFuture<'_, Result<String, StoreError>>;
}

/// The Secret on the apiserver: `get`, `create`, and `update` (a PUT carrying the
/// resourceVersion, so the apiserver refuses a stale write with 409).
pub(crate) struct KubeStore {
    api: Api<Secret>,
    name: String,
    /// The Secret as last read: a replace keeps its labels, annotations and type.
    last: Mutex<Option<Secret>>,
}

impl KubeStore {
    pub(crate) fn new(client: Client, namespace: &str, name: &str) -> Self {
        KubeStore {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            last: Mutex::new(None),
        }
    }

    fn error(&self, verb: &str, err: kube::Error) -> StoreError {
        match err {
            e if is_conflict(&e) => StoreError::Conflict,
            // Deleted since we read it: the next read tells.
            kube::Error::Api(status) if verb == "update" && status.code == 404 => {
                StoreError::Conflict
            }
            kube::Error::Api(status) if status.code == 403 => StoreError::Other(format!(
                "{verb} Secret {}/{}: forbidden ({}); the controller needs get and update on \
                 this Secret (resourceNames), and create unless it exists beforehand",
                self.api.namespace().unwrap_or_default(),
                self.name,
                status.message
            )),
            err => StoreError::Other(format!(
                "{verb} Secret {}/{}: {err}",
                self.api.namespace().unwrap_or_default(),
                self.name
            )),
        }
    }

    fn remember(&self, secret: &Secret) -> String {
        *super::lock(&self.last) = Some(secret.clone());
        secret.metadata.resource_version.clone().unwrap_or_default()
    }
}

fn to_bytes(data: BTreeMap<String, Vec<u8>>) -> BTreeMap<String, ByteString> {
    data.into_iter().map(|(k, v)| (k, ByteString(v))).collect()
}

impl Store for KubeStore {
    fn get(&self) -> BoxFuture<'_, Result<Option<Stored>, StoreError>> {
        async move {
            match self.api.get_opt(&self.name).await {
                Ok(Some(secret)) => {
                    let version = self.remember(&secret);
                    let data = secret
                        .data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.0))
                        .collect();
                    Ok(Some(Stored { version, data }))
                }
                Ok(None) => Ok(None),
                Err(err) => Err(self.error("get", err)),
            }
        }
        .boxed()
    }

    fn create(&self, data: BTreeMap<String, Vec<u8>>) -> BoxFuture<'_, Result<String, StoreError>> {
        async move {
            let secret = Secret {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    labels: Some(BTreeMap::from([(
                        "app.kubernetes.io/component".to_string(),
                        "webhook-ca".to_string(),
                    )])),
                    ..Default::default()
                },
                type_: Some("Opaque".into()),
                data: Some(to_bytes(data)),
                ..Default::default()
            };
            match self.api.create(&PostParams::default(), &secret).await {
                Ok(created) => Ok(self.remember(&created)),
                Err(err) => Err(self.error("create", err)),
            }
        }
        .boxed()
    }

    fn replace(
        &self,
        version: String,
        data: BTreeMap<String, Vec<u8>>,
    ) -> BoxFuture<'_, Result<String, StoreError>> {
        async move {
            let mut secret = super::lock(&self.last).clone().unwrap_or_else(|| Secret {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..Default::default()
                },
                ..Default::default()
            });
            secret.metadata.resource_version = Some(version);
            secret.metadata.managed_fields = None;
            secret.string_data = None;
            secret.data = Some(to_bytes(data));
            match self
                .api
                .replace(&self.name, &PostParams::default(), &secret)
                .await
            {
                Ok(replaced) => Ok(self.remember(&replaced)),
                Err(err) => Err(self.error("update", err)),
            }
        }
        .boxed()
    }
}

// --- the stored form ---

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StateDoc {
    format: u32,
    /// Newest first: the first signs.
    cas: Vec<CaDoc>,
    serving: ServingDoc,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CaDoc {
    common_name: String,
    generation: u64,
    issued_unix_ms: u64,
    expires_unix_ms: u64,
    cert: String,
    key: String,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServingDoc {
    ca_generation: u64,
    issued_unix_ms: u64,
    expires_unix_ms: u64,
    sans: Vec<String>,
    cert: String,
    key: String,
}

fn to_ms(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn from_ms(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

fn ca_doc(ca: &Authority) -> CaDoc {
    CaDoc {
        common_name: ca.common_name.clone(),
        generation: ca.generation,
        issued_unix_ms: to_ms(ca.issued),
        expires_unix_ms: to_ms(ca.expires),
        cert: ca.pem.clone(),
        key: ca.key_pem.clone(),
    }
}

/// The Secret's data for `g`.
pub(crate) fn encode(g: &Generated) -> BTreeMap<String, Vec<u8>> {
    let doc = StateDoc {
        format: FORMAT,
        cas: std::iter::once(&g.ca)
            .chain(&g.previous)
            .map(|ca| ca_doc(ca))
            .collect(),
        serving: ServingDoc {
            ca_generation: g.serving.ca_generation,
            issued_unix_ms: to_ms(g.serving.issued),
            expires_unix_ms: to_ms(g.serving.expires),
            sans: g.serving.sans.clone(),
            cert: g.serving.cert_pem.clone(),
            key: g.serving.key_pem.clone(),
        },
    };
    BTreeMap::from([
        (
            STATE_KEY.to_string(),
            serde_json::to_vec(&doc).unwrap_or_default(),
        ),
        (CA_FILE.to_string(), g.bundle().into_bytes()),
        (
            CERT_FILE.to_string(),
            g.serving.cert_pem.clone().into_bytes(),
        ),
        (KEY_FILE.to_string(), g.serving.key_pem.clone().into_bytes()),
    ])
}

/// What `data` holds; an error names what is wrong with it.
pub(crate) fn decode(
    data: &BTreeMap<String, Vec<u8>>,
    provider: &CryptoProvider,
) -> Result<Generated, Error> {
    let bad = |why: String| Error::Webhook(format!("{STATE_KEY}: {why}"));
    let raw = data.get(STATE_KEY).ok_or_else(|| bad("missing".into()))?;
    let doc: StateDoc = serde_json::from_slice(raw).map_err(|e| bad(e.to_string()))?;
    if doc.format != FORMAT {
        return Err(bad(format!(
            "format {} (this version reads {FORMAT})",
            doc.format
        )));
    }
    let mut cas = doc
        .cas
        .iter()
        .map(|c| {
            Authority::restore(
                &c.common_name,
                &c.cert,
                &c.key,
                (from_ms(c.issued_unix_ms), from_ms(c.expires_unix_ms)),
                c.generation,
            )
            .map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()?
        .into_iter();
    let ca = cas.next().ok_or_else(|| bad("no CA".into()))?;
    let s = &doc.serving;
    let serving = Serving::restore(
        &s.cert,
        &s.key,
        s.sans.clone(),
        (from_ms(s.issued_unix_ms), from_ms(s.expires_unix_ms)),
        s.ca_generation,
        provider,
    )?;
    Ok(Generated {
        ca,
        previous: cas.collect(),
        serving,
    })
}

// --- the protocol ---

/// This replica's view of the CA Secret.
pub(crate) struct SharedCa {
    store: Arc<dyn Store>,
    provider: Arc<CryptoProvider>,
    /// What the Secret is called, for messages.
    describe: String,
    /// The resourceVersion of what this replica serves.
    version: Mutex<String>,
}

fn store_error(err: StoreError) -> Error {
    match err {
        StoreError::Conflict => Error::Webhook("CA Secret: conflict".into()),
        StoreError::Other(message) => Error::Webhook(message),
    }
}

impl SharedCa {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        provider: Arc<CryptoProvider>,
        describe: String,
    ) -> Self {
        SharedCa {
            store,
            provider,
            describe,
            version: Mutex::new(String::new()),
        }
    }

    /// At start: the certificates the Secret holds; when it is missing, empty or
    /// unreadable, `fresh()` written into it (unless another replica wrote first).
    pub(crate) async fn open(
        &self,
        fresh: impl Fn() -> Result<Generated, Error>,
    ) -> Result<Generated, Error> {
        let stored = self.store.get().await.map_err(store_error)?;
        self.settle(stored, fresh).await
    }

    /// At a check: what the Secret holds, if it changed since this replica last read or
    /// wrote it (another replica rotated). A Secret deleted or emptied meanwhile is
    /// written again with `current`.
    pub(crate) async fn refresh(&self, current: &Generated) -> Result<Option<Generated>, Error> {
        let stored = self.store.get().await.map_err(store_error)?;
        if let Some(s) = &stored
            && s.version == *super::lock(&self.version)
        {
            return Ok(None);
        }
        self.settle(stored, || Ok(current.clone())).await.map(Some)
    }

    /// After a rotation: writes `next` at the resourceVersion last seen. If another
    /// replica wrote first, returns what it wrote; `next` is dropped.
    pub(crate) async fn publish(&self, next: Generated) -> Result<Generated, Error> {
        let version = super::lock(&self.version).clone();
        match self.store.replace(version, encode(&next)).await {
            Ok(version) => {
                *super::lock(&self.version) = version;
                Ok(next)
            }
            Err(StoreError::Conflict) => {
                tracing::info!(secret = %self.describe, "another replica changed the webhook CA Secret first; using its certificates");
                let stored = self.store.get().await.map_err(store_error)?;
                self.settle(stored, || Ok(next.clone())).await
            }
            Err(err) => Err(store_error(err)),
        }
    }

    /// Reads `stored` (or writes `fallback()` where it holds nothing usable), re-reading
    /// after every lost race.
    async fn settle(
        &self,
        mut stored: Option<Stored>,
        fallback: impl Fn() -> Result<Generated, Error>,
    ) -> Result<Generated, Error> {
        for _ in 0..ATTEMPTS {
            let written = match &stored {
                Some(s) if !s.data.is_empty() => match decode(&s.data, &self.provider) {
                    Ok(g) => {
                        *super::lock(&self.version) = s.version.clone();
                        return Ok(g);
                    }
                    Err(err) => {
                        tracing::error!(secret = %self.describe, %err, "webhook CA Secret unreadable; writing new certificates");
                        let g = fallback()?;
                        (self.store.replace(s.version.clone(), encode(&g)).await, g)
                    }
                },
                Some(s) => {
                    let g = fallback()?;
                    (self.store.replace(s.version.clone(), encode(&g)).await, g)
                }
                None => {
                    let g = fallback()?;
                    (self.store.create(encode(&g)).await, g)
                }
            };
            match written {
                (Ok(version), g) => {
                    tracing::info!(secret = %self.describe, "webhook CA Secret written");
                    *super::lock(&self.version) = version;
                    return Ok(g);
                }
                (Err(StoreError::Conflict), _) => {
                    stored = self.store.get().await.map_err(store_error)?;
                }
                (Err(err), _) => return Err(store_error(err)),
            }
        }
        Err(Error::Webhook(format!(
            "{}: still changing after {ATTEMPTS} attempts",
            self.describe
        )))
    }
}

#[cfg(test)]
pub(crate) mod memory {
    //! A Secret in memory with the apiserver's optimistic concurrency, and a way to make
    //! two replicas read before either writes.

    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[derive(Default)]
    pub(crate) struct MemoryStore {
        pub(crate) secret: Mutex<Option<Stored>>,
        next_version: AtomicUsize,
        /// When set, the first n gets wait here after reading: n replicas have all read
        /// before any of them writes.
        pub(crate) barrier: Option<(usize, tokio::sync::Barrier)>,
        gets: AtomicUsize,
        pub(crate) writes: AtomicUsize,
        pub(crate) conflicts: AtomicUsize,
    }

    impl MemoryStore {
        pub(crate) fn racing(replicas: usize) -> Self {
            MemoryStore {
                barrier: Some((replicas, tokio::sync::Barrier::new(replicas))),
                ..Default::default()
            }
        }

        fn bump(&self) -> String {
            self.writes.fetch_add(1, Ordering::SeqCst);
            (self.next_version.fetch_add(1, Ordering::SeqCst) + 1).to_string()
        }

        fn conflict<T>(&self) -> Result<T, StoreError> {
            self.conflicts.fetch_add(1, Ordering::SeqCst);
            Err(StoreError::Conflict)
        }

        /// What another writer (a person, another replica) does.
        pub(crate) fn put(&self, data: BTreeMap<String, Vec<u8>>) {
            let version = self.bump();
            *super::super::lock(&self.secret) = Some(Stored { version, data });
        }

        pub(crate) fn current(&self) -> Option<Stored> {
            super::super::lock(&self.secret).clone()
        }
    }

    impl Store for MemoryStore {
        fn get(&self) -> BoxFuture<'_, Result<Option<Stored>, StoreError>> {
            async move {
                let read = self.current();
                let nth = self.gets.fetch_add(1, Ordering::SeqCst);
                if let Some((n, barrier)) = &self.barrier
                    && nth < *n
                {
                    barrier.wait().await;
                }
                Ok(read)
            }
            .boxed()
        }

        fn create(
            &self,
            data: BTreeMap<String, Vec<u8>>,
        ) -> BoxFuture<'_, Result<String, StoreError>> {
            async move {
                let mut secret = super::super::lock(&self.secret);
                if secret.is_some() {
                    return self.conflict();
                }
                let version = self.bump();
                *secret = Some(Stored {
                    version: version.clone(),
                    data,
                });
                Ok(version)
            }
            .boxed()
        }

        fn replace(
            &self,
            version: String,
            data: BTreeMap<String, Vec<u8>>,
        ) -> BoxFuture<'_, Result<String, StoreError>> {
            async move {
                let mut secret = super::super::lock(&self.secret);
                match &*secret {
                    Some(s) if s.version == version => {
                        let version = self.bump();
                        *secret = Some(Stored {
                            version: version.clone(),
                            data,
                        });
                        Ok(version)
                    }
                    _ => self.conflict(),
                }
            }
            .boxed()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::super::certs::test_support::{connect, peer_cert};
    use super::super::certs::{Rotation, SwapResolver, provider, server_config};
    use super::memory::MemoryStore;
    use super::*;

    fn sans() -> Vec<String> {
        vec!["127.0.0.1".into(), "localhost".into()]
    }

    fn fresh() -> Result<Generated, Error> {
        Generated::new(
            "test",
            &Rotation::default(),
            &sans(),
            &provider(),
            SystemTime::now(),
        )
    }

    fn replica(store: &Arc<MemoryStore>) -> SharedCa {
        SharedCa::new(store.clone(), provider(), "Secret test/ca".into())
    }

    fn same(a: &Generated, b: &Generated) -> bool {
        a.bundle() == b.bundle() && a.serving.der() == b.serving.der()
    }

    #[tokio::test]
    async fn the_first_replica_creates_the_secret_and_the_others_load_it() {
        let store = Arc::new(MemoryStore::default());
        let a = replica(&store).open(fresh).await.unwrap();
        let b = replica(&store).open(fresh).await.unwrap();
        assert!(same(&a, &b));
        assert_eq!(store.writes.load(Ordering::SeqCst), 1);
        let stored = store.current().unwrap();
        assert_eq!(stored.data[CA_FILE], a.bundle().into_bytes());
        assert_eq!(
            stored.data[CERT_FILE],
            a.serving.cert_pem.clone().into_bytes()
        );
        assert_eq!(
            stored.data[KEY_FILE],
            a.serving.key_pem.clone().into_bytes()
        );
    }

    #[tokio::test]
    async fn replicas_starting_together_agree_on_one_ca() {
        for empty_secret in [false, true] {
            let store = Arc::new(MemoryStore::racing(3));
            if empty_secret {
                // As the kustomize overlays ship it: no create needed.
                store.put(BTreeMap::new());
            }
            let (r1, r2, r3) = (replica(&store), replica(&store), replica(&store));
            // Every replica reads (nothing usable) before any writes; each generates its
            // own CA and tries to write it.
            let (a, b, c) = tokio::join!(r1.open(fresh), r2.open(fresh), r3.open(fresh));
            let (a, b, c) = (a.unwrap(), b.unwrap(), c.unwrap());
            assert!(same(&a, &b) && same(&b, &c), "one CA for all");
            // One write won; the two others lost and loaded it.
            assert_eq!(store.conflicts.load(Ordering::SeqCst), 2);
            assert_eq!(
                decode(&store.current().unwrap().data, &provider())
                    .unwrap()
                    .bundle(),
                a.bundle()
            );
        }
    }

    #[tokio::test]
    async fn a_rotation_race_is_won_by_one_replica_and_adopted_by_the_other() {
        let store = Arc::new(MemoryStore::default());
        let (ra, rb) = (replica(&store), replica(&store));
        let a = ra.open(fresh).await.unwrap();
        let b = rb.open(fresh).await.unwrap();
        let rotation = Rotation::default();
        let later = SystemTime::now() + Duration::from_secs(9 * 365 * 24 * 3600);
        // Both notice the CA is due and each computes its own successor.
        let next_a = a.rotate_ca("test", &rotation, later).unwrap().unwrap();
        let next_b = b.rotate_ca("test", &rotation, later).unwrap().unwrap();
        assert_ne!(next_a.bundle(), next_b.bundle());
        let won = ra.publish(next_a.clone()).await.unwrap();
        assert!(same(&won, &next_a));
        // B wrote at a stale version: refused; B serves A's rotation, not its own.
        let lost = rb.publish(next_b).await.unwrap();
        assert!(same(&lost, &next_a));
        assert_eq!(store.conflicts.load(Ordering::SeqCst), 1);
        // The bundle keeps the old CA behind the new one.
        assert_eq!(lost.ca.generation, 2);
        assert_eq!(lost.previous[0].pem, a.ca.pem);
        // Both are now at the stored version: the next checks find nothing new.
        assert!(ra.refresh(&won).await.unwrap().is_none());
        assert!(rb.refresh(&lost).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn the_others_pick_up_a_rotation_at_their_next_check() {
        let store = Arc::new(MemoryStore::default());
        let (ra, rb) = (replica(&store), replica(&store));
        let a = ra.open(fresh).await.unwrap();
        let b = rb.open(fresh).await.unwrap();
        assert!(rb.refresh(&b).await.unwrap().is_none(), "nothing changed");
        let rotated = a
            .rotate_serving(
                &Rotation::default(),
                &sans(),
                &provider(),
                true,
                SystemTime::now() + Duration::from_secs(300 * 24 * 3600),
            )
            .unwrap()
            .unwrap();
        let rotated = ra.publish(rotated).await.unwrap();
        let seen = rb.refresh(&b).await.unwrap().expect("B sees A's rotation");
        assert!(same(&seen, &rotated));
        assert_ne!(seen.serving.der(), b.serving.der());
    }

    #[tokio::test]
    async fn a_deleted_emptied_or_garbled_secret_is_written_again() {
        let store = Arc::new(MemoryStore::default());
        let ra = replica(&store);
        let a = ra.open(fresh).await.unwrap();
        // Deleted: recreated with what the replica serves.
        *crate::webhook::lock(&store.secret) = None;
        let again = ra.refresh(&a).await.unwrap().unwrap();
        assert!(same(&again, &a));
        assert!(same(
            &decode(&store.current().unwrap().data, &provider()).unwrap(),
            &a
        ));
        // Emptied (kubectl apply of an old manifest), or garbled: the same.
        for data in [
            BTreeMap::new(),
            BTreeMap::from([(STATE_KEY.to_string(), b"{not json".to_vec())]),
        ] {
            store.put(data);
            let again = ra.refresh(&a).await.unwrap().unwrap();
            assert!(same(&again, &a));
            assert!(same(
                &decode(&store.current().unwrap().data, &provider()).unwrap(),
                &a
            ));
        }
        // A format from the future is not misread.
        let mut doc: serde_json::Value = serde_json::from_slice(&encode(&a)[STATE_KEY]).unwrap();
        doc["format"] = 2.into();
        let err = decode(
            &BTreeMap::from([(STATE_KEY.to_string(), serde_json::to_vec(&doc).unwrap())]),
            &provider(),
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("format 2"), "{err}");
    }

    #[tokio::test]
    async fn a_restored_ca_signs_certificates_that_verify_against_the_stored_bundle() {
        let rotation = Rotation::default();
        let now = SystemTime::now();
        let original = fresh().unwrap();
        let rotated = original
            .rotate_ca(
                "test",
                &rotation,
                now + Duration::from_secs(9 * 365 * 24 * 3600),
            )
            .unwrap()
            .unwrap();
        let restored = decode(&encode(&rotated), &provider()).unwrap();
        assert_eq!(restored.bundle(), rotated.bundle());
        assert_eq!(restored.ca.generation, 2);
        assert_eq!(restored.previous.len(), 1);
        assert_eq!(restored.serving.sans, sans());
        assert_eq!(restored.serving.der(), rotated.serving.der());
        assert_eq!(to_ms(restored.ca.expires), to_ms(rotated.ca.expires));
        // The restored CA signs a serving certificate the stored CA certificate verifies
        // (same subject, same key), over a real TLS handshake.
        let issued = restored
            .ca
            .issue(&sans(), &rotation, &provider(), now)
            .unwrap();
        let resolver = Arc::new(SwapResolver::new(issued.certified.clone()));
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
        let stream = connect(&rotated.ca.pem, addr, "localhost").await.unwrap();
        assert_eq!(peer_cert(&stream), issued.der().to_vec());
    }
}
