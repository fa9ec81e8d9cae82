//! The content-addressed store under `<state-dir>/images`:
//!
//! ```text
//! images/                     0700
//!   index.json                images by id (config digest): tags, repo digests, layers
//!   lock                      flock: index read-modify-write
//!   gc.lock                   flock: shared by pulls and loads, exclusive by removal sweeps
//!   blobs/sha256/<hex>        verified blobs (manifests, configs, layers), 0600
//!   ingest/<hex>.partial      downloads in progress (kept to resume), <hex>.lock per blob
//!   layers/sha256/<diff-id>/  one unpacked layer: fs/ (an overlay lower dir), size
//!   tmp/                      unpacks and writes in progress (same file system: rename)
//! ```
//!
//! Everything is written to a temporary name, synced and renamed: a crash leaves either
//! nothing or the whole thing. A layer directory exists only once its diff id was verified.

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use oci_spec::image::ImageConfiguration;

use crate::digest::{Digest, HashingReader};
use crate::error::{Error, Result};
use crate::fsutil::{self, FileLock};
use crate::reference::Reference;
use crate::unpack;

/// An image's id: the digest of its configuration (what `crictl images` and
/// `docker images` show as IMAGE ID).
pub type ImageId = Digest;

/// An image ready to run: its configuration and its unpacked layers.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Image {
    /// The configuration digest.
    pub id: ImageId,
    /// `name@sha256:…` of the reference it was looked up by (or the first it has), for
    /// `status.containerStatuses[].imageID`; `None` for an image that never came from a
    /// registry (loaded from an archive).
    pub repo_digest: Option<String>,
    /// Every `name:tag` pointing at it.
    pub repo_tags: Vec<String>,
    /// Every `name@digest` it was pulled as.
    pub repo_digests: Vec<String>,
    /// ENTRYPOINT, CMD, Env, WorkingDir, User, ... and the diff ids.
    pub config: ImageConfiguration,
    /// The unpacked layer directories, bottom first (overlay wants `lowerdir=` top first).
    pub layers: Vec<PathBuf>,
    /// Bytes of its content (manifest, config, compressed layers), as containerd reports
    /// an image's size (the kubelet's `Pulled` event and `crictl images` show it).
    pub size: u64,
    /// Bytes of its unpacked layers.
    pub unpacked_size: u64,
    /// The platform manifest's digest.
    pub manifest_digest: Digest,
    /// When it was stored (Unix seconds).
    pub created_at: u64,
    /// When it was last pulled or marked used (Unix seconds): the garbage collector removes
    /// the least recently used first.
    pub last_used: u64,
}

/// The index entry of one image.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct ImageRecord {
    pub id: Digest,
    /// The digest the registry named for the reference (an index, or the manifest itself).
    pub target: Digest,
    pub manifest: Digest,
    pub manifest_size: u64,
    pub config_size: u64,
    /// Blobs kept for it besides manifest, config and layers (the multi-platform index).
    #[serde(default)]
    pub extra_blobs: Vec<Digest>,
    pub layers: Vec<LayerRecord>,
    #[serde(default)]
    pub repo_tags: Vec<String>,
    #[serde(default)]
    pub repo_digests: Vec<String>,
    pub created_at: u64,
    pub last_used: u64,
}

/// One layer of an image: the blob as distributed, and the unpacked diff.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct LayerRecord {
    pub digest: Digest,
    pub size: u64,
    pub diff_id: Digest,
}

impl ImageRecord {
    fn size(&self) -> u64 {
        self.manifest_size + self.config_size + self.layers.iter().map(|l| l.size).sum::<u64>()
    }
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Index {
    version: u32,
    images: BTreeMap<String, ImageRecord>,
}

/// What [`ImageStore::remove`] removed.
#[derive(Clone, Debug)]
pub struct Removed {
    /// The image removed.
    pub id: ImageId,
    /// Its tags.
    pub repo_tags: Vec<String>,
    /// Bytes freed on disk (blobs and unpacked layers no other image uses).
    pub freed: u64,
}

/// What a garbage collection did.
#[derive(Clone, Debug, Default)]
pub struct GcReport {
    /// Disk use of the store's file system before, in percent.
    pub usage_percent: u64,
    /// Bytes it wanted to free (0 when under the high threshold).
    pub wanted: u64,
    /// Bytes freed.
    pub freed: u64,
    /// Images removed, least recently used first.
    pub removed: Vec<Removed>,
}

/// The image store. Cheap to open; safe to use from several threads and processes at once
/// (file locks guard the index and each blob and layer).
#[derive(Clone, Debug)]
pub struct ImageStore {
    dir: PathBuf,
}

pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl ImageStore {
    /// Opens (creating) the store in `dir` (usually `<state-dir>/images`).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the directories cannot be made.
    pub fn open(dir: impl Into<PathBuf>) -> Result<ImageStore> {
        let dir = dir.into();
        fsutil::private_dir(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(Error::io("setting the mode of", &dir))?;
        for sub in ["blobs/sha256", "ingest", "layers/sha256", "tmp"] {
            fsutil::private_dir(&dir.join(sub))?;
        }
        let store = ImageStore { dir };
        store.clean_tmp();
        Ok(store)
    }

    /// The store's directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Leftovers of unpacks and writes a crash interrupted (never a partial download:
    /// those resume). Only entries no live operation holds: each holds `gc.lock` shared.
    fn clean_tmp(&self) {
        let Ok(lock) = self.try_exclusive_gc_lock() else {
            return;
        };
        let Some(_lock) = lock else { return };
        if let Ok(rd) = std::fs::read_dir(self.dir.join("tmp")) {
            for e in rd.flatten() {
                let _ =
                    std::fs::remove_dir_all(e.path()).or_else(|_| std::fs::remove_file(e.path()));
            }
        }
    }

    fn try_exclusive_gc_lock(&self) -> Result<Option<std::fs::File>> {
        let path = self.dir.join("gc.lock");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(Error::io("opening lock", &path))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(file)),
            Err(_) => Ok(None),
        }
    }

    pub(crate) fn blob_path(&self, d: &Digest) -> PathBuf {
        self.dir.join("blobs/sha256").join(d.hex())
    }

    pub(crate) fn ingest_path(&self, d: &Digest, ext: &str) -> PathBuf {
        self.dir.join("ingest").join(format!("{}.{ext}", d.hex()))
    }

    pub(crate) fn layer_dir(&self, diff_id: &Digest) -> PathBuf {
        self.dir.join("layers/sha256").join(diff_id.hex())
    }

    pub(crate) fn tmp_dir(&self) -> PathBuf {
        self.dir.join("tmp")
    }

    /// Held (shared) by every pull and load, so a removal's sweep never deletes blobs they
    /// wrote but have not indexed yet.
    pub(crate) fn write_lease(&self) -> Result<FileLock> {
        FileLock::acquire(&self.dir.join("gc.lock"), false)
    }

    pub(crate) fn has_blob(&self, d: &Digest, size: u64) -> bool {
        std::fs::symlink_metadata(self.blob_path(d)).is_ok_and(|m| m.is_file() && m.len() == size)
    }

    pub(crate) fn read_blob(&self, d: &Digest) -> Result<Vec<u8>> {
        let path = self.blob_path(d);
        std::fs::read(&path).map_err(Error::io("reading blob", path))
    }

    /// Stores `data` as the blob `expected` (verified), unless it is there.
    pub(crate) fn put_blob_bytes(
        &self,
        expected: &Digest,
        data: &[u8],
        what: &'static str,
    ) -> Result<()> {
        let actual = Digest::of(data);
        if &actual != expected {
            return Err(Error::DigestMismatch {
                what,
                digest: expected.to_string(),
                actual: actual.to_string(),
            });
        }
        if self.has_blob(expected, data.len() as u64) {
            return Ok(());
        }
        fsutil::write_atomic(&self.blob_path(expected), &self.tmp_dir(), data)
    }

    /// Copies a blob from `reader` into the store, verifying digest and (when known) size.
    /// Returns its size.
    pub(crate) fn put_blob_reader(
        &self,
        expected: &Digest,
        size: Option<u64>,
        reader: impl Read,
    ) -> Result<u64> {
        if let Some(size) = size
            && self.has_blob(expected, size)
        {
            return Ok(size);
        }
        let _lock = FileLock::acquire(&self.ingest_path(expected, "lock"), true)?;
        let tmp = fsutil::temp_name(&self.tmp_dir(), "blob-");
        let result = (|| {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(Error::io("creating", &tmp))?;
            let mut hashing = HashingReader::new(reader);
            std::io::copy(&mut hashing, &mut f).map_err(Error::io("writing", &tmp))?;
            let (actual, n) = hashing
                .finish()
                .map_err(Error::io("reading blob for", &tmp))?;
            if let Some(size) = size
                && n != size
            {
                return Err(Error::SizeMismatch {
                    digest: expected.to_string(),
                    expected: size,
                    actual: n,
                });
            }
            if &actual != expected {
                return Err(Error::DigestMismatch {
                    what: "blob",
                    digest: expected.to_string(),
                    actual: actual.to_string(),
                });
            }
            f.sync_all().map_err(Error::io("syncing", &tmp))?;
            let dest = self.blob_path(expected);
            std::fs::rename(&tmp, &dest).map_err(Error::io("renaming blob into", &dest))?;
            fsutil::sync_dir(dest.parent().unwrap_or(Path::new("/")))?;
            Ok(n)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    /// Whether the layer with this diff id is unpacked.
    pub(crate) fn has_layer(&self, diff_id: &Digest) -> bool {
        self.layer_dir(diff_id).join("fs").is_dir()
    }

    /// Unpacks the stored blob `blob` as the layer `diff_id` (blocking), unless it is there.
    /// The result is verified (its uncompressed stream hashes to `diff_id`) before it is
    /// renamed into place; a refused or corrupt layer leaves nothing.
    pub(crate) fn unpack_layer(&self, blob: &Digest, diff_id: &Digest) -> Result<()> {
        if self.has_layer(diff_id) {
            return Ok(());
        }
        let _lock = FileLock::acquire(&self.ingest_path(diff_id, "unpack.lock"), true)?;
        if self.has_layer(diff_id) {
            return Ok(());
        }
        let path = self.blob_path(blob);
        let file = std::fs::File::open(&path).map_err(Error::io("opening layer blob", &path))?;
        self.unpack_layer_from(file, blob, diff_id)
    }

    /// Unpacks a layer stream whose diff id must be `diff_id` (the caller holds its lock).
    pub(crate) fn unpack_layer_from(
        &self,
        reader: impl Read,
        blob: &Digest,
        diff_id: &Digest,
    ) -> Result<()> {
        let tmp = fsutil::temp_name(&self.tmp_dir(), "layer-");
        let result = (|| {
            std::fs::create_dir(&tmp).map_err(Error::io("creating", &tmp))?;
            let fs = tmp.join("fs");
            std::fs::create_dir(&fs).map_err(Error::io("creating", &fs))?;
            let unpacked = unpack::unpack(reader, &fs, blob)?;
            if &unpacked.diff_id != diff_id {
                return Err(Error::DigestMismatch {
                    what: "layer diff",
                    digest: diff_id.to_string(),
                    actual: unpacked.diff_id.to_string(),
                });
            }
            let size_path = tmp.join("size");
            std::fs::write(&size_path, unpacked.size.to_string())
                .map_err(Error::io("writing", &size_path))?;
            fsutil::sync_dir(&tmp)?;
            let dest = self.layer_dir(diff_id);
            match std::fs::rename(&tmp, &dest) {
                Ok(()) => {}
                // Another process unpacked it first (it held no lock of ours: an older store).
                Err(_) if self.has_layer(diff_id) => {
                    let _ = std::fs::remove_dir_all(&tmp);
                }
                Err(e) => {
                    return Err(Error::Io {
                        what: "renaming layer into",
                        path: dest,
                        source: e,
                    });
                }
            }
            fsutil::sync_dir(&self.dir.join("layers/sha256"))
        })();
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        result
    }

    fn layer_size(&self, diff_id: &Digest) -> u64 {
        std::fs::read_to_string(self.layer_dir(diff_id).join("size"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    }

    fn index_path(&self) -> PathBuf {
        self.dir.join("index.json")
    }

    fn read_index(&self) -> Result<Index> {
        let path = self.index_path();
        match std::fs::read(&path) {
            Ok(data) => serde_json::from_slice(&data).map_err(|e| Error::BadIndex {
                path,
                reason: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Index {
                version: 1,
                images: BTreeMap::new(),
            }),
            Err(e) => Err(Error::Io {
                what: "reading",
                path,
                source: e,
            }),
        }
    }

    /// Runs `f` on the index under the store's lock and writes the result atomically.
    fn update_index<T>(&self, f: impl FnOnce(&mut Index) -> Result<T>) -> Result<T> {
        let _lock = FileLock::acquire(&self.dir.join("lock"), true)?;
        let mut index = self.read_index()?;
        let out = f(&mut index)?;
        index.version = 1;
        let data = serde_json::to_vec_pretty(&index).map_err(|e| Error::BadIndex {
            path: self.index_path(),
            reason: e.to_string(),
        })?;
        fsutil::write_atomic(&self.index_path(), &self.tmp_dir(), &data)?;
        Ok(out)
    }

    /// Adds (or refreshes) an image record; its tags move to it from any other image.
    pub(crate) fn commit(&self, mut record: ImageRecord) -> Result<()> {
        self.update_index(|index| {
            let key = record.id.to_string();
            for (k, other) in &mut index.images {
                if *k != key {
                    other.repo_tags.retain(|t| !record.repo_tags.contains(t));
                }
            }
            if let Some(old) = index.images.get(&key) {
                for t in &old.repo_tags {
                    if !record.repo_tags.contains(t) {
                        record.repo_tags.push(t.clone());
                    }
                }
                for d in &old.repo_digests {
                    if !record.repo_digests.contains(d) {
                        record.repo_digests.push(d.clone());
                    }
                }
                for b in &old.extra_blobs {
                    if !record.extra_blobs.contains(b) {
                        record.extra_blobs.push(b.clone());
                    }
                }
                record.created_at = old.created_at;
            }
            record.repo_tags.sort();
            record.repo_digests.sort();
            index.images.insert(key, record);
            Ok(())
        })
    }

    fn image_of(&self, rec: &ImageRecord, reference: Option<&Reference>) -> Result<Image> {
        let data = self.read_blob(&rec.id)?;
        let config: ImageConfiguration =
            serde_json::from_slice(&data).map_err(|e| Error::BadContent {
                what: "image config",
                digest: rec.id.to_string(),
                reason: e.to_string(),
            })?;
        let repo_digest = reference
            .and_then(|r| {
                let name = r.name();
                rec.repo_digests
                    .iter()
                    .find(|d| d.split('@').next() == Some(name.as_str()))
                    .cloned()
            })
            .or_else(|| rec.repo_digests.first().cloned());
        Ok(Image {
            id: rec.id.clone(),
            repo_digest,
            repo_tags: rec.repo_tags.clone(),
            repo_digests: rec.repo_digests.clone(),
            config,
            layers: rec
                .layers
                .iter()
                .map(|l| self.layer_dir(&l.diff_id).join("fs"))
                .collect(),
            size: rec.size(),
            unpacked_size: rec.layers.iter().map(|l| self.layer_size(&l.diff_id)).sum(),
            manifest_digest: rec.manifest.clone(),
            created_at: rec.created_at,
            last_used: rec.last_used,
        })
    }

    /// The image `reference` names, if present and complete (every layer unpacked): by its
    /// digest when it has one (`name@sha256:…`, the tag then only informs), else by tag.
    ///
    /// # Errors
    ///
    /// An unreadable index or configuration.
    pub fn get(&self, reference: &Reference) -> Result<Option<Image>> {
        let index = self.read_index()?;
        let found = index
            .images
            .values()
            .find(|rec| matches_reference(rec, reference));
        match found {
            Some(rec) if rec.layers.iter().all(|l| self.has_layer(&l.diff_id)) => {
                Ok(Some(self.image_of(rec, Some(reference))?))
            }
            _ => Ok(None),
        }
    }

    /// The image by id (`sha256:…`, or a unique prefix of at least 4 hex digits), or by
    /// reference: what the CLI takes.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], or a reference that does not parse and is no id.
    pub fn find(&self, name_or_id: &str) -> Result<Image> {
        let index = self.read_index()?;
        let rec = self.find_record(&index, name_or_id)?;
        let reference = Reference::parse(name_or_id).ok();
        self.image_of(rec, reference.as_ref())
    }

    fn find_record<'i>(&self, index: &'i Index, name_or_id: &str) -> Result<&'i ImageRecord> {
        let hex = name_or_id.strip_prefix("sha256:").unwrap_or(name_or_id);
        if hex.len() >= 4 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            let hits: Vec<_> = index
                .images
                .values()
                .filter(|r| r.id.hex().starts_with(hex))
                .collect();
            if hits.len() == 1 {
                return Ok(hits[0]);
            }
        }
        let reference = Reference::parse(name_or_id)?;
        index
            .images
            .values()
            .find(|rec| matches_reference(rec, &reference))
            .ok_or_else(|| Error::NotFound(name_or_id.to_owned()))
    }

    /// Every image, newest first.
    ///
    /// # Errors
    ///
    /// An unreadable index or configuration.
    pub fn list(&self) -> Result<Vec<Image>> {
        let index = self.read_index()?;
        let mut out = index
            .images
            .values()
            .map(|r| self.image_of(r, None))
            .collect::<Result<Vec<_>>>()?;
        out.sort_by(|a, b| {
            b.created_at
                .cmp(&a.created_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(out)
    }

    /// The image with everything the store knows of it, as JSON (`podvisor image inspect`).
    ///
    /// # Errors
    ///
    /// As [`ImageStore::find`].
    pub fn inspect(&self, name_or_id: &str) -> Result<serde_json::Value> {
        let index = self.read_index()?;
        let rec = self.find_record(&index, name_or_id)?.clone();
        let image = self.image_of(&rec, Reference::parse(name_or_id).ok().as_ref())?;
        let mut value = serde_json::to_value(&image).unwrap_or_default();
        let layers: Vec<_> = rec
            .layers
            .iter()
            .map(|l| {
                serde_json::json!({
                    "digest": l.digest,
                    "size": l.size,
                    "diffID": l.diff_id,
                    "unpackedSize": self.layer_size(&l.diff_id),
                    "dir": self.layer_dir(&l.diff_id).join("fs"),
                })
            })
            .collect();
        value["layers"] = serde_json::Value::Array(layers);
        value["target"] = serde_json::json!(rec.target);
        Ok(value)
    }

    /// Records that a container used the image now (the garbage collector's order).
    ///
    /// # Errors
    ///
    /// An unwritable index.
    pub fn mark_used(&self, id: &ImageId) -> Result<()> {
        // `last_used` counts seconds: a second start within the same second (a burst of pods
        // of one image) would rewrite and fsync the whole index for no change, on every
        // container start's path.
        let now = now_secs();
        if self
            .read_index()?
            .images
            .get(id.as_str())
            .is_none_or(|rec| rec.last_used >= now)
        {
            return Ok(());
        }
        self.update_index(|index| {
            if let Some(rec) = index.images.get_mut(id.as_str()) {
                rec.last_used = rec.last_used.max(now);
            }
            Ok(())
        })
    }

    /// Removes the image (all its tags, as CRI's `RemoveImage`) and the blobs and layers no
    /// other image uses. Blocking: it waits for pulls and loads in progress (their content is
    /// not indexed yet, and must not be swept); call it from a blocking thread.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`]; a failed write.
    pub fn remove(&self, name_or_id: &str) -> Result<Removed> {
        let id = {
            let index = self.read_index()?;
            self.find_record(&index, name_or_id)?.id.clone()
        };
        let mut removed = self.remove_ids(&[id])?;
        removed
            .pop()
            .ok_or_else(|| Error::NotFound(name_or_id.to_owned()))
    }

    /// Removes images by id, then sweeps what no remaining image references.
    fn remove_ids(&self, ids: &[ImageId]) -> Result<Vec<Removed>> {
        // Exclusive: no pull or load is between writing blobs and indexing them.
        let _gc = FileLock::acquire(&self.dir.join("gc.lock"), true)?;
        let (records, remaining) = self.update_index(|index| {
            let records: Vec<ImageRecord> = ids
                .iter()
                .filter_map(|id| index.images.remove(id.as_str()))
                .collect();
            Ok((records, index.images.values().cloned().collect::<Vec<_>>()))
        })?;
        let mut keep_blobs = HashSet::new();
        let mut keep_layers = HashSet::new();
        for rec in &remaining {
            keep_blobs.extend(record_blobs(rec));
            keep_layers.extend(rec.layers.iter().map(|l| l.diff_id.clone()));
        }
        self.sweep_stale_partials();
        let mut out = Vec::new();
        for rec in records {
            let mut freed = 0;
            for blob in record_blobs(&rec) {
                if keep_blobs.insert(blob.clone()) {
                    let path = self.blob_path(&blob);
                    if let Ok(m) = std::fs::symlink_metadata(&path) {
                        freed += m.len();
                        let _ = std::fs::remove_file(&path);
                    }
                }
            }
            for l in &rec.layers {
                if keep_layers.insert(l.diff_id.clone()) {
                    let dir = self.layer_dir(&l.diff_id);
                    if dir.exists() {
                        freed += self.layer_size(&l.diff_id);
                        // Renamed first: a layer directory is whole or absent.
                        let tmp = fsutil::temp_name(&self.tmp_dir(), "rm-");
                        if std::fs::rename(&dir, &tmp).is_ok() {
                            let _ = std::fs::remove_dir_all(&tmp);
                        }
                    }
                }
            }
            out.push(Removed {
                id: rec.id.clone(),
                repo_tags: rec.repo_tags.clone(),
                freed,
            });
        }
        Ok(out)
    }

    /// Partial downloads nobody resumed for a day (the caller holds `gc.lock` exclusively:
    /// no pull is writing one).
    fn sweep_stale_partials(&self) {
        let Ok(rd) = std::fs::read_dir(self.dir.join("ingest")) else {
            return;
        };
        for e in rd.flatten() {
            let stale = e
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > std::time::Duration::from_secs(24 * 3600));
            if stale && e.file_name().to_string_lossy().ends_with(".partial") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// The kubelet's image garbage collection: when the store's file system is at least
    /// `high_percent` full, removes images least recently used first (never one in
    /// `in_use`) until it is at `low_percent`. Blocking, as [`ImageStore::remove`]. The
    /// kubelet's minimum age (`ImageMinimumGCAge`) is the caller's: leave young images in
    /// `in_use`.
    ///
    /// # Errors
    ///
    /// `statvfs` or index failures.
    pub fn gc(
        &self,
        high_percent: u8,
        low_percent: u8,
        in_use: &HashSet<ImageId>,
    ) -> Result<GcReport> {
        let vfs = rustix::fs::statvfs(&self.dir).map_err(|e| Error::Io {
            what: "statvfs",
            path: self.dir.clone(),
            source: e.into(),
        })?;
        let capacity = vfs.f_blocks.saturating_mul(vfs.f_frsize);
        let available = vfs.f_bavail.saturating_mul(vfs.f_frsize);
        if capacity == 0 {
            return Ok(GcReport::default());
        }
        let usage_percent = 100 - available.saturating_mul(100) / capacity;
        let mut report = GcReport {
            usage_percent,
            ..GcReport::default()
        };
        if usage_percent < u64::from(high_percent) {
            return Ok(report);
        }
        // As the kubelet: free until usage is at the low threshold.
        report.wanted = (capacity.saturating_mul(100 - u64::from(low_percent.min(100))) / 100)
            .saturating_sub(available);
        let mut candidates: Vec<ImageRecord> = self
            .read_index()?
            .images
            .into_values()
            .filter(|r| !in_use.contains(&r.id))
            .collect();
        candidates.sort_by_key(|r| (r.last_used, r.created_at));
        for rec in candidates {
            if report.freed >= report.wanted {
                break;
            }
            for removed in self.remove_ids(std::slice::from_ref(&rec.id))? {
                report.freed += removed.freed;
                report.removed.push(removed);
            }
        }
        Ok(report)
    }
}

fn record_blobs(rec: &ImageRecord) -> Vec<Digest> {
    let mut v = vec![rec.id.clone(), rec.manifest.clone(), rec.target.clone()];
    v.extend(rec.extra_blobs.iter().cloned());
    v.extend(rec.layers.iter().map(|l| l.digest.clone()));
    v
}

fn matches_reference(rec: &ImageRecord, reference: &Reference) -> bool {
    match reference.digest() {
        Some(d) => rec.repo_digests.contains(&reference.with_digest(d)),
        None => reference
            .tagged()
            .is_some_and(|t| rec.repo_tags.contains(&t)),
    }
}
