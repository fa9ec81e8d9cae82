//! Pulls from registries (OCI distribution, with `oci-client`): the manifest (a multi-platform
//! index resolved to this machine), the config, then the layers in parallel, each downloaded
//! into `ingest/` (resumable), verified by digest and size, stored and unpacked.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt};
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, RegistryOperation};
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt;

use crate::auth::{Credentials, Mirror, RegistryConfig};
use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::fsutil::{self, FileLock};
use crate::manifest::{self, Descriptor, MachinePlatform, Manifest};
use crate::progress::Progress;
use crate::reference::Reference;
use crate::store::{Image, ImageRecord, ImageStore, LayerRecord, now_secs};

/// How to pull.
#[derive(Clone, Debug)]
pub struct PullOptions {
    /// Credentials for the image's registry.
    pub credentials: Credentials,
    /// Plain HTTP instead of HTTPS. `None`: plain HTTP only for registries on this machine
    /// (`localhost`, `127.0.0.0/8`, `::1`), which Docker also treats as insecure by default.
    pub plain_http: Option<bool>,
    /// The platform to pick from a multi-platform index (this machine's by default).
    pub platform: MachinePlatform,
    /// Layers downloaded at once.
    pub max_concurrent_layers: usize,
    /// Attempts per blob when a transfer breaks (each resumes where the last stopped).
    pub attempts: u32,
    /// Mirrors of the image's registry, tried in order before it (a mirror that fails to
    /// answer, or does not have the image, passes to the next).
    pub mirrors: Vec<Mirror>,
}

impl PullOptions {
    /// The options for pulling `reference` with `config` (`--registry-config`): its
    /// registry's credentials and mirrors.
    #[must_use]
    pub fn for_reference(config: Option<&RegistryConfig>, reference: &Reference) -> PullOptions {
        PullOptions {
            credentials: config
                .map(|c| c.credentials_for(reference))
                .unwrap_or_default(),
            mirrors: config.map(|c| c.mirrors_for(reference)).unwrap_or_default(),
            ..PullOptions::default()
        }
    }
}

impl Default for PullOptions {
    fn default() -> Self {
        PullOptions {
            credentials: Credentials::Anonymous,
            plain_http: None,
            platform: MachinePlatform::current(),
            max_concurrent_layers: 3,
            attempts: 3,
            mirrors: Vec::new(),
        }
    }
}

/// What a pull did: the kubelet's `Pulled` event is worded from it.
#[derive(Clone, Debug)]
pub struct PullReport {
    /// The image, ready to run.
    pub image: Image,
    /// Bytes transferred from the registry (0 when everything was present).
    pub downloaded: u64,
    /// Layers downloaded (the rest were already stored).
    pub layers_fetched: usize,
    /// Wall time of the pull.
    pub duration: Duration,
}

impl ImageStore {
    /// Pulls `reference` from its registry into the store and unpacks it.
    ///
    /// # Errors
    ///
    /// [`Error::Registry`] (unreachable, unauthorised, not found), [`Error::DigestMismatch`]
    /// and [`Error::SizeMismatch`] naming the blob, [`Error::NoMatchingPlatform`],
    /// [`Error::UnsafeLayer`]; nothing unverified is kept (a partial download is, to resume).
    pub async fn pull(
        &self,
        reference: &Reference,
        options: &PullOptions,
        progress: &dyn Progress,
    ) -> Result<PullReport> {
        let started = Instant::now();
        let lease = {
            let store = self.clone();
            tokio::task::spawn_blocking(move || store.write_lease())
                .await
                .map_err(|e| registry_error(reference, e))??
        };
        // Each mirror, then the registry: a mirror's registry error (unreachable, refused,
        // no such image) passes to the next; content that does not verify stops the pull.
        let mut failed = Vec::new();
        for mirror in &options.mirrors {
            match self
                .pull_from(reference, options, Some(mirror), progress, started)
                .await
            {
                Err(Error::Registry { message, .. }) => {
                    tracing::debug!(mirror = %mirror.host, %message, "mirror failed; next");
                    failed.push(format!("mirror {}: {message}", mirror.host));
                }
                done => {
                    drop(lease);
                    return done;
                }
            }
        }
        let done = self
            .pull_from(reference, options, None, progress, started)
            .await;
        drop(lease);
        match done {
            Err(Error::Registry { reference, message }) if !failed.is_empty() => {
                Err(Error::Registry {
                    reference,
                    message: format!("{}; {message}", failed.join("; ")),
                })
            }
            done => done,
        }
    }

    /// One pull of `reference` from `mirror`, or from its registry.
    async fn pull_from(
        &self,
        reference: &Reference,
        options: &PullOptions,
        mirror: Option<&Mirror>,
        progress: &dyn Progress,
        started: Instant,
    ) -> Result<PullReport> {
        let puller = Puller::new(self, reference, options, mirror)?;
        puller.authenticate().await?;
        // The manifest the reference names, then this platform's if it is an index.
        let (top_bytes, top_digest) = puller.manifest(&puller.oci_ref, None).await?;
        let mut extra_blobs = Vec::new();
        let top = Manifest::parse(&top_bytes, &top_digest)?;
        let (manifest, manifest_digest, manifest_size) = if top.is_index() {
            self.put_blob_bytes(&top_digest, &top_bytes, "index")?;
            extra_blobs.push(top_digest.clone());
            let entries = top.manifests.as_deref().unwrap_or_default();
            let desc = options.platform.select(entries).map_err(|available| {
                Error::NoMatchingPlatform {
                    reference: reference.to_string(),
                    platform: options.platform.to_string(),
                    available,
                }
            })?;
            let digest = desc.digest("manifest")?;
            let by_digest = puller.by_digest(&digest);
            let (bytes, _) = puller.manifest(&by_digest, Some(desc)).await?;
            let m = Manifest::parse(&bytes, &digest)?;
            if m.is_index() {
                return Err(Error::BadContent {
                    what: "index",
                    digest: digest.to_string(),
                    reason: "an index inside an index".into(),
                });
            }
            self.put_blob_bytes(&digest, &bytes, "manifest")?;
            (m, digest, bytes.len() as u64)
        } else {
            self.put_blob_bytes(&top_digest, &top_bytes, "manifest")?;
            (top, top_digest.clone(), top_bytes.len() as u64)
        };
        let bad = |reason: &str| Error::BadContent {
            what: "manifest",
            digest: manifest_digest.to_string(),
            reason: reason.to_owned(),
        };
        let config_desc = manifest.config.clone().ok_or_else(|| bad("no config"))?;
        let config_digest = config_desc.digest("config")?;
        let layers = manifest.layers.clone().ok_or_else(|| bad("no layers"))?;
        let downloaded = Arc::new(AtomicU64::new(0));
        puller.blob(&config_desc, progress, &downloaded).await?;
        let config_bytes = self.read_blob(&config_digest)?;
        let diff_ids = diff_ids(&config_bytes, &config_digest)?;
        if diff_ids.len() != layers.len() {
            return Err(Error::BadContent {
                what: "image config",
                digest: config_digest.to_string(),
                reason: format!("{} diff ids for {} layers", diff_ids.len(), layers.len()),
            });
        }
        for l in &layers {
            if l.media_type.contains("foreign") || l.media_type.contains("nondistributable") {
                return Err(bad(&format!(
                    "layer {} is not distributable ({})",
                    l.digest, l.media_type
                )));
            }
        }
        let fetched = AtomicU64::new(0);
        let jobs = layers.iter().zip(&diff_ids).map(|(desc, diff_id)| {
            let puller = &puller;
            let downloaded = &downloaded;
            let fetched = &fetched;
            async move {
                let digest = desc.digest("layer")?;
                if self.has_layer(diff_id) {
                    progress.layer_unpacked(diff_id, true);
                    return Ok(LayerRecord {
                        digest,
                        size: desc.size()?,
                        diff_id: diff_id.clone(),
                    });
                }
                if puller.blob(desc, progress, downloaded).await? {
                    fetched.fetch_add(1, Ordering::Relaxed);
                }
                let store = self.clone();
                let (d, id) = (digest.clone(), diff_id.clone());
                tokio::task::spawn_blocking(move || store.unpack_layer(&d, &id))
                    .await
                    .map_err(|e| registry_error(reference, e))??;
                progress.layer_unpacked(diff_id, false);
                Ok::<_, Error>(LayerRecord {
                    digest,
                    size: desc.size()?,
                    diff_id: diff_id.clone(),
                })
            }
        });
        let mut records: Vec<(usize, LayerRecord)> = futures_util::stream::iter(
            jobs.enumerate()
                .map(|(i, f)| async move { f.await.map(|r| (i, r)) }),
        )
        .buffer_unordered(options.max_concurrent_layers.max(1))
        .try_collect()
        .await?;
        records.sort_by_key(|(i, _)| *i);
        let now = now_secs();
        let record = ImageRecord {
            id: config_digest.clone(),
            target: top_digest.clone(),
            manifest: manifest_digest,
            manifest_size,
            config_size: config_bytes.len() as u64,
            extra_blobs,
            layers: records.into_iter().map(|(_, r)| r).collect(),
            repo_tags: reference.tagged().into_iter().collect(),
            repo_digests: vec![reference.with_digest(&top_digest)],
            created_at: now,
            last_used: now,
        };
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.commit(record))
            .await
            .map_err(|e| registry_error(reference, e))??;
        let image = self
            .get(&Reference::parse(&reference.with_digest(&top_digest))?)?
            .ok_or_else(|| Error::NotFound(reference.to_string()))?;
        Ok(PullReport {
            image,
            downloaded: downloaded.load(Ordering::Relaxed),
            layers_fetched: usize::try_from(fetched.load(Ordering::Relaxed)).unwrap_or(usize::MAX),
            duration: started.elapsed(),
        })
    }
}

/// The registry client for plain HTTP or HTTPS with these credentials, made once per process.
/// Making one loads the system's root certificates (0.8 s in a debug build, under load more),
/// which the pull of a present image — the kubelet's `Always` pulls at every start — must not
/// pay each time. Only pulls with the same credentials share a client: its auth and token
/// caches are per registry, not per identity.
fn shared_client(plain: bool, credentials: &Credentials) -> Client {
    static CLIENTS: std::sync::LazyLock<
        std::sync::Mutex<std::collections::HashMap<(bool, Credentials), Client>>,
    > = std::sync::LazyLock::new(Default::default);
    let mut clients = CLIENTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    clients
        .entry((plain, credentials.clone()))
        .or_insert_with(|| {
            Client::new(ClientConfig {
                protocol: if plain {
                    ClientProtocol::Http
                } else {
                    ClientProtocol::Https
                },
                platform_resolver: None,
                connect_timeout: Some(Duration::from_secs(30)),
                read_timeout: Some(Duration::from_secs(60)),
                user_agent: concat!("podvisor/", env!("CARGO_PKG_VERSION")),
                ..ClientConfig::default()
            })
        })
        .clone()
}

fn registry_error(reference: &Reference, e: impl std::fmt::Display) -> Error {
    Error::Registry {
        reference: reference.to_string(),
        message: e.to_string(),
    }
}

/// The diff ids from an image configuration.
pub(crate) fn diff_ids(config: &[u8], digest: &Digest) -> Result<Vec<Digest>> {
    #[derive(serde::Deserialize)]
    struct Config {
        rootfs: RootFs,
    }
    #[derive(serde::Deserialize)]
    struct RootFs {
        #[serde(default)]
        diff_ids: Vec<String>,
    }
    let bad = |reason: String| Error::BadContent {
        what: "image config",
        digest: digest.to_string(),
        reason,
    };
    let c: Config = serde_json::from_slice(config).map_err(|e| bad(e.to_string()))?;
    c.rootfs
        .diff_ids
        .iter()
        .map(|d| Digest::parse(d).map_err(|e| bad(e.to_string())))
        .collect()
}

struct Puller<'a> {
    store: &'a ImageStore,
    reference: &'a Reference,
    client: Client,
    oci_ref: oci_client::Reference,
    auth: RegistryAuth,
    attempts: u32,
    /// The mirror asked instead of the registry (`host[:port]`).
    mirror: Option<String>,
}

impl<'a> Puller<'a> {
    fn new(
        store: &'a ImageStore,
        reference: &'a Reference,
        options: &PullOptions,
        mirror: Option<&Mirror>,
    ) -> Result<Puller<'a>> {
        // reqwest's rustls needs a process-wide provider: ring, as the API server's TLS.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let plain = match mirror {
            Some(m) => m
                .plain_http
                .unwrap_or_else(|| crate::reference::is_loopback_host(&m.host)),
            None => options
                .plain_http
                .unwrap_or_else(|| reference.is_loopback_registry()),
        };
        let credentials = mirror.map_or(&options.credentials, |m| &m.credentials);
        let client = shared_client(plain, credentials);
        let domain = reference.domain().to_owned();
        let path = reference.path().to_owned();
        let mut oci_ref = match (reference.tag(), reference.digest()) {
            (_, Some(d)) => oci_client::Reference::with_digest(domain, path, d.to_string()),
            (Some(t), None) => oci_client::Reference::with_tag(domain, path, t.to_owned()),
            (None, None) => oci_client::Reference::with_tag(
                domain,
                path,
                crate::reference::DEFAULT_TAG.to_owned(),
            ),
        };
        if let Some(m) = mirror {
            oci_ref.set_mirror_registry(m.host.clone());
        }
        let auth = match credentials {
            Credentials::Anonymous => RegistryAuth::Anonymous,
            Credentials::Basic { username, password } => {
                RegistryAuth::Basic(username.clone(), password.clone())
            }
            Credentials::Bearer(t) => RegistryAuth::Bearer(t.clone()),
        };
        Ok(Puller {
            store,
            reference,
            client,
            oci_ref,
            auth,
            attempts: options.attempts.max(1),
            mirror: mirror.map(|m| m.host.clone()),
        })
    }

    fn err(&self, e: impl std::fmt::Display) -> Error {
        registry_error(self.reference, e)
    }

    fn by_digest(&self, d: &Digest) -> oci_client::Reference {
        let mut r = oci_client::Reference::with_digest(
            self.reference.domain().to_owned(),
            self.reference.path().to_owned(),
            d.to_string(),
        );
        if let Some(m) = &self.mirror {
            r.set_mirror_registry(m.clone());
        }
        r
    }

    /// The registry's token flow (or Basic auth), up front: its failure is the error, not
    /// the 401 of a later request.
    async fn authenticate(&self) -> Result<()> {
        self.client
            .auth(&self.oci_ref, &self.auth, RegistryOperation::Pull)
            .await
            .map(|_| ())
            .map_err(|e| self.err(format!("authenticating: {e}")))
    }

    /// A manifest's bytes and digest, verified against `desc` (digest and size) when given,
    /// and against the reference's digest.
    async fn manifest(
        &self,
        r: &oci_client::Reference,
        desc: Option<&Descriptor>,
    ) -> Result<(Vec<u8>, Digest)> {
        let (bytes, _) = self
            .client
            .pull_manifest_raw(r, &self.auth, manifest::ACCEPTED)
            .await
            .map_err(|e| self.err(e))?;
        let actual = Digest::of(&bytes);
        let expected = match (desc, r.digest()) {
            (Some(d), _) => Some(d.digest("manifest")?),
            (None, Some(d)) => Some(Digest::parse(d)?),
            (None, None) => None,
        };
        if let Some(expected) = expected
            && expected != actual
        {
            return Err(Error::DigestMismatch {
                what: "manifest",
                digest: expected.to_string(),
                actual: actual.to_string(),
            });
        }
        if let Some(d) = desc
            && d.size()? != bytes.len() as u64
        {
            return Err(Error::SizeMismatch {
                digest: actual.to_string(),
                expected: d.size()?,
                actual: bytes.len() as u64,
            });
        }
        Ok((bytes.to_vec(), actual))
    }

    /// Downloads one blob into the store unless it is there. Resumes a partial download
    /// left by an earlier attempt or process; verifies size and digest before the blob
    /// becomes visible. Returns whether anything was transferred.
    async fn blob(
        &self,
        desc: &Descriptor,
        progress: &dyn Progress,
        downloaded: &AtomicU64,
    ) -> Result<bool> {
        let digest = desc.digest("blob")?;
        let size = desc.size()?;
        if self.store.has_blob(&digest, size) {
            progress.blob_done(&digest, true);
            return Ok(false);
        }
        let lock_path = self.store.ingest_path(&digest, "lock");
        let _lock = tokio::task::spawn_blocking(move || FileLock::acquire(&lock_path, true))
            .await
            .map_err(|e| self.err(e))??;
        if self.store.has_blob(&digest, size) {
            progress.blob_done(&digest, true);
            return Ok(false);
        }
        let partial = self.store.ingest_path(&digest, "partial");
        let mut transferred = false;
        // A resumed download that does not verify may have been spoiled by what was kept:
        // it is started again once from nothing.
        for pass in 0..2 {
            let (file, hasher, resumed, moved) = self
                .download(&digest, size, desc, &partial, progress, downloaded)
                .await?;
            transferred |= moved;
            let actual = Digest::from_hasher(hasher);
            if actual != digest {
                drop(file);
                let _ = tokio::fs::remove_file(&partial).await;
                if resumed && pass == 0 {
                    tracing::debug!(%digest, "resumed blob does not verify; downloading it again");
                    continue;
                }
                return Err(Error::DigestMismatch {
                    what: "blob",
                    digest: digest.to_string(),
                    actual: actual.to_string(),
                });
            }
            file.sync_all()
                .await
                .map_err(Error::io("syncing", &partial))?;
            break;
        }
        let dest = self.store.blob_path(&digest);
        tokio::fs::rename(&partial, &dest)
            .await
            .map_err(Error::io("renaming blob into", &dest))?;
        let dir = dest
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default();
        tokio::task::spawn_blocking(move || fsutil::sync_dir(&dir))
            .await
            .map_err(|e| self.err(e))??;
        progress.blob_done(&digest, false);
        Ok(transferred)
    }

    /// One download of a blob into `partial`, resuming what is there: the open file, the
    /// hash of its content, whether it resumed, whether bytes were transferred. Checks the
    /// size; the caller checks the digest.
    async fn download(
        &self,
        digest: &Digest,
        size: u64,
        desc: &Descriptor,
        partial: &std::path::Path,
        progress: &dyn Progress,
        downloaded: &AtomicU64,
    ) -> Result<(tokio::fs::File, Sha256, bool, bool)> {
        let digest = digest.clone();
        let partial = partial.to_path_buf();
        let oci_desc = OciDescriptor {
            media_type: desc.media_type.clone(),
            digest: digest.to_string(),
            size: desc.size,
            // Never fetched from a URL the manifest names (CVE-2020-15157).
            urls: None,
            annotations: None,
            ..OciDescriptor::default()
        };
        let mut file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&partial)
            .await
            .map_err(Error::io("opening", &partial))?;
        // What an earlier attempt left, hashed again: it is only trusted once the whole blob
        // hashes to the digest.
        let (mut hasher, mut have) = {
            let path = partial.clone();
            tokio::task::spawn_blocking(move || hash_prefix(&path, size))
                .await
                .map_err(|e| self.err(e))?
                .map_err(Error::io("reading", &partial))?
        };
        file.set_len(have)
            .await
            .map_err(Error::io("truncating", &partial))?;
        let mut attempt = 0;
        let mut transferred = false;
        let resumed = have > 0;
        loop {
            attempt += 1;
            if have == size {
                break;
            }
            progress.blob_started(&digest, size, have);
            let response = self
                .client
                .pull_blob_stream_partial(&self.oci_ref, &oci_desc, have, None)
                .await;
            let stream = match response {
                Ok(oci_client::client::BlobResponse::Partial(s)) => s,
                Ok(oci_client::client::BlobResponse::Full(s)) => {
                    // The registry ignored the range: start again.
                    if have > 0 {
                        file.set_len(0)
                            .await
                            .map_err(Error::io("truncating", &partial))?;
                        hasher = Sha256::new();
                        have = 0;
                    }
                    s
                }
                Err(e) if attempt < self.attempts && is_transient(&e) => {
                    tracing::debug!(%digest, error = %e, "blob request failed; retrying");
                    tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
                    continue;
                }
                Err(e) => return Err(self.err(format!("blob {digest}: {e}"))),
            };
            use tokio::io::AsyncSeekExt;
            file.seek(std::io::SeekFrom::Start(have))
                .await
                .map_err(Error::io("seeking", &partial))?;
            let mut stream = stream.stream;
            let mut broken = None;
            // One blocking write per MiB, not per network chunk.
            let mut writer = tokio::io::BufWriter::with_capacity(1 << 20, &mut file);
            while let Some(chunk) = stream.next().await {
                match chunk {
                    Ok(bytes) => {
                        have += bytes.len() as u64;
                        if have > size {
                            drop(writer);
                            drop(file);
                            let _ = tokio::fs::remove_file(&partial).await;
                            return Err(Error::SizeMismatch {
                                digest: digest.to_string(),
                                expected: size,
                                actual: have,
                            });
                        }
                        hasher.update(&bytes);
                        writer
                            .write_all(&bytes)
                            .await
                            .map_err(Error::io("writing", &partial))?;
                        downloaded.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                        progress.blob_bytes(&digest, bytes.len() as u64);
                        transferred = true;
                    }
                    Err(e) => {
                        broken = Some(e.to_string());
                        break;
                    }
                }
            }
            writer
                .flush()
                .await
                .map_err(Error::io("writing", &partial))?;
            drop(writer);
            match broken {
                // oci-client's own check fails at the end of a corrupt whole blob: ours below
                // names it.
                Some(_) if have == size => break,
                Some(e) if attempt < self.attempts => {
                    tracing::debug!(%digest, have, error = %e, "blob transfer broke; resuming");
                }
                Some(e) => {
                    return Err(self.err(format!(
                        "blob {digest}: transfer broke at {have} of {size} bytes: {e}"
                    )));
                }
                None if have == size => break,
                None if attempt < self.attempts => {
                    tracing::debug!(%digest, have, "blob stream ended early; resuming");
                }
                None => {
                    return Err(self.err(format!(
                        "blob {digest}: stream ended at {have} of {size} bytes"
                    )));
                }
            }
        }
        Ok((file, hasher, resumed, transferred))
    }
}

/// Hashes the first bytes of a partial download (at most `size`; more is discarded).
fn hash_prefix(path: &std::path::Path, size: u64) -> std::io::Result<(Sha256, u64)> {
    use std::io::Read;
    let mut hasher = Sha256::new();
    let f = std::fs::File::open(path)?;
    let mut limited = f.take(size);
    let mut buf = vec![0u8; 256 * 1024];
    let mut n_total = 0;
    loop {
        let n = limited.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        n_total += n as u64;
    }
    Ok((hasher, n_total))
}

fn is_transient(e: &oci_client::errors::OciDistributionError) -> bool {
    matches!(
        e,
        oci_client::errors::OciDistributionError::RequestError(_)
            | oci_client::errors::OciDistributionError::IoError(_)
    )
}
