//! `podvisor image load`: `docker save` archives and OCI image layouts (a directory, or a
//! tar of one). A tar is first unpacked (regular files only, names kept inside) into the
//! store's `tmp/`, then read as a directory; every blob is verified as it is copied in.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::fsutil;
use crate::manifest::{self, Descriptor, MachinePlatform, Manifest};
use crate::progress::Progress;
use crate::reference::Reference;
use crate::store::{Image, ImageRecord, ImageStore, LayerRecord, now_secs};
use std::os::unix::ffi::OsStringExt;

/// `manifest.json` of `docker save`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DockerManifestEntry {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

/// Annotations naming an image in an OCI layout's `index.json`.
const CONTAINERD_NAME: &str = "io.containerd.image.name";
const REF_NAME: &str = "org.opencontainers.image.ref.name";

impl ImageStore {
    /// Loads every image of a `docker save` archive or an OCI layout (directory or tar).
    ///
    /// # Errors
    ///
    /// [`Error::BadArchive`] for something that is neither; digest, size and diff id
    /// mismatches; refused layers. Images loaded before a failure stay.
    pub fn load(&self, path: &Path, progress: &dyn Progress) -> Result<Vec<Image>> {
        let _lease = self.write_lease()?;
        let meta = std::fs::metadata(path).map_err(Error::io("reading", path))?;
        if meta.is_dir() {
            return self.load_dir(path, path, progress);
        }
        let tmp = fsutil::temp_name(&self.tmp_dir(), "load-");
        fsutil::private_dir(&tmp)?;
        let result = extract_archive(path, &tmp).and_then(|()| self.load_dir(&tmp, path, progress));
        let _ = std::fs::remove_dir_all(&tmp);
        result
    }

    fn load_dir(&self, dir: &Path, origin: &Path, progress: &dyn Progress) -> Result<Vec<Image>> {
        if dir.join("index.json").is_file() && dir.join("oci-layout").is_file() {
            // Docker 25+ `save` writes both; the OCI index carries the same images.
            if dir.join("manifest.json").is_file() {
                return self.load_docker(dir, origin, progress);
            }
            return self.load_oci(dir, origin, progress);
        }
        if dir.join("manifest.json").is_file() {
            return self.load_docker(dir, origin, progress);
        }
        Err(Error::BadArchive {
            path: origin.to_owned(),
            reason: "neither an OCI layout (oci-layout, index.json) nor a docker save archive (manifest.json)".into(),
        })
    }

    fn load_oci(&self, dir: &Path, origin: &Path, progress: &dyn Progress) -> Result<Vec<Image>> {
        let bad = |reason: String| Error::BadArchive {
            path: origin.to_owned(),
            reason,
        };
        let index_bytes =
            std::fs::read(dir.join("index.json")).map_err(|e| bad(format!("index.json: {e}")))?;
        let index: Manifest =
            serde_json::from_slice(&index_bytes).map_err(|e| bad(format!("index.json: {e}")))?;
        let platform = MachinePlatform::current();
        let mut out = Vec::new();
        for desc in index.manifests.unwrap_or_default() {
            let name = desc
                .annotations
                .as_ref()
                .and_then(|a| a.get(CONTAINERD_NAME).or_else(|| a.get(REF_NAME)))
                .and_then(|n| Reference::parse(n).ok());
            let target = desc.digest("manifest")?;
            let bytes = read_layout_blob(dir, &desc, origin)?;
            let m = Manifest::parse(&bytes, &target)?;
            let mut extra = Vec::new();
            let (manifest_desc, m, mbytes, index) = if m.is_index() {
                let entries = m.manifests.clone().unwrap_or_default();
                let Ok(chosen) = platform.select(&entries) else {
                    tracing::warn!(index = %target, "no manifest for {platform} in the layout's index; skipped");
                    continue;
                };
                let chosen = chosen.clone();
                let b = read_layout_blob(dir, &chosen, origin)?;
                let digest = chosen.digest("manifest")?;
                let inner = Manifest::parse(&b, &digest)?;
                (chosen, inner, b, Some(bytes))
            } else {
                (desc.clone(), m, bytes, None)
            };
            let manifest_digest = manifest_desc.digest("manifest")?;
            let config = m
                .config
                .clone()
                .ok_or_else(|| bad(format!("manifest {manifest_digest} has no config")))?;
            // The config is what the image's id and layers come from: a descriptor that does
            // not describe it refuses the manifest before anything of it is stored.
            check_config(dir, &config, &manifest_digest, origin)?;
            if let Some(index) = index {
                self.put_blob_bytes(&target, &index, "index")?;
                extra.push(target.clone());
            }
            self.put_blob_bytes(&manifest_digest, &mbytes, "manifest")?;
            let layers = m.layers.clone().unwrap_or_default();
            let blob_of = |d: &Descriptor| layout_blob_path(dir, d, origin);
            let record = self.store_image(
                ImageParts {
                    target: target.clone(),
                    manifest: manifest_digest,
                    manifest_size: mbytes.len() as u64,
                    config: (config.digest("config")?, blob_of(&config)?),
                    layers: layers
                        .iter()
                        .map(|l| Ok((l.digest("layer")?, Some(l.size()?), blob_of(l)?)))
                        .collect::<Result<Vec<_>>>()?,
                    extra,
                    names: name.clone().into_iter().collect(),
                },
                progress,
            )?;
            out.push(record);
        }
        if out.is_empty() {
            return Err(bad("no image for this platform in index.json".into()));
        }
        Ok(out)
    }

    fn load_docker(
        &self,
        dir: &Path,
        origin: &Path,
        progress: &dyn Progress,
    ) -> Result<Vec<Image>> {
        let bad = |reason: String| Error::BadArchive {
            path: origin.to_owned(),
            reason,
        };
        let data = std::fs::read(dir.join("manifest.json"))
            .map_err(|e| bad(format!("manifest.json: {e}")))?;
        let entries: Vec<DockerManifestEntry> =
            serde_json::from_slice(&data).map_err(|e| bad(format!("manifest.json: {e}")))?;
        let mut out = Vec::new();
        for entry in entries {
            let config_path = inside(dir, &entry.config)
                .ok_or_else(|| bad(format!("config path {:?} leaves the archive", entry.config)))?;
            let config_bytes =
                std::fs::read(&config_path).map_err(|e| bad(format!("{}: {e}", entry.config)))?;
            let config_digest = Digest::of(&config_bytes);
            let mut layers = Vec::new();
            for l in &entry.layers {
                let p = inside(dir, l)
                    .ok_or_else(|| bad(format!("layer path {l:?} leaves the archive")))?;
                let digest = digest_file(&p).map_err(|e| bad(format!("{l}: {e}")))?;
                layers.push((digest, None, p));
            }
            // An OCI manifest for it, so it is stored as a pulled image is.
            let layer_descs: Vec<serde_json::Value> = layers
                .iter()
                .map(|(d, _, p)| {
                    let size = std::fs::metadata(p).map_or(0, |m| m.len());
                    let media = match sniff_file(p) {
                        crate::unpack::Compression::Gzip => manifest::OCI_LAYER_GZIP,
                        crate::unpack::Compression::Zstd => manifest::OCI_LAYER_ZSTD,
                        crate::unpack::Compression::None => manifest::OCI_LAYER,
                    };
                    serde_json::json!({"mediaType": media, "digest": d, "size": size})
                })
                .collect();
            let manifest = serde_json::json!({
                "schemaVersion": 2,
                "mediaType": manifest::OCI_MANIFEST,
                "config": {"mediaType": manifest::OCI_CONFIG, "digest": config_digest, "size": config_bytes.len()},
                "layers": layer_descs,
            });
            let mbytes = serde_json::to_vec(&manifest).unwrap_or_default();
            let manifest_digest = Digest::of(&mbytes);
            self.put_blob_bytes(&manifest_digest, &mbytes, "manifest")?;
            let tags: Vec<Reference> = entry
                .repo_tags
                .unwrap_or_default()
                .iter()
                .map(|t| Reference::parse(t))
                .collect::<std::result::Result<_, _>>()?;
            let image = self.store_image(
                ImageParts {
                    target: manifest_digest.clone(),
                    manifest: manifest_digest,
                    manifest_size: mbytes.len() as u64,
                    config: (config_digest, config_path),
                    layers,
                    extra: Vec::new(),
                    names: tags,
                },
                progress,
            )?;
            out.push(image);
        }
        Ok(out)
    }

    /// Copies config and layer blobs in (verified), unpacks the layers (diff ids verified
    /// against the config), and indexes the image.
    fn store_image(&self, parts: ImageParts, progress: &dyn Progress) -> Result<Image> {
        let (config_digest, config_path) = &parts.config;
        let config_bytes = std::fs::read(config_path).map_err(Error::io("reading", config_path))?;
        self.put_blob_bytes(config_digest, &config_bytes, "config")?;
        let diff_ids = crate::pull::diff_ids(&config_bytes, config_digest)?;
        if diff_ids.len() != parts.layers.len() {
            return Err(Error::BadContent {
                what: "image config",
                digest: config_digest.to_string(),
                reason: format!(
                    "{} diff ids for {} layers",
                    diff_ids.len(),
                    parts.layers.len()
                ),
            });
        }
        let mut records = Vec::new();
        for ((digest, size, path), diff_id) in parts.layers.iter().zip(&diff_ids) {
            let file = std::fs::File::open(path).map_err(Error::io("opening", path))?;
            let n = self.put_blob_reader(digest, *size, file)?;
            progress.blob_done(digest, false);
            if !self.has_layer(diff_id) {
                self.unpack_layer(digest, diff_id)?;
            }
            progress.layer_unpacked(diff_id, false);
            records.push(LayerRecord {
                digest: digest.clone(),
                size: n,
                diff_id: diff_id.clone(),
            });
        }
        let now = now_secs();
        let record = ImageRecord {
            id: config_digest.clone(),
            target: parts.target.clone(),
            manifest: parts.manifest.clone(),
            manifest_size: parts.manifest_size,
            config_size: config_bytes.len() as u64,
            extra_blobs: parts.extra,
            layers: records,
            repo_tags: parts.names.iter().filter_map(Reference::tagged).collect(),
            // An archive is not a registry: no repo digest (as `docker load`).
            repo_digests: Vec::new(),
            created_at: now,
            last_used: now,
        };
        self.commit(record)?;
        self.find(config_digest.as_str())
    }
}

struct ImageParts {
    target: Digest,
    manifest: Digest,
    manifest_size: u64,
    config: (Digest, PathBuf),
    layers: Vec<(Digest, Option<u64>, PathBuf)>,
    extra: Vec<Digest>,
    names: Vec<Reference>,
}

fn layout_blob_path(dir: &Path, d: &Descriptor, origin: &Path) -> Result<PathBuf> {
    let digest = d.digest("blob")?;
    let p = dir.join("blobs/sha256").join(digest.hex());
    if !std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
        return Err(Error::BadArchive {
            path: origin.to_owned(),
            reason: format!("blob {digest} is missing"),
        });
    }
    Ok(p)
}

/// A small blob (manifest, index) of a layout, verified.
fn read_layout_blob(dir: &Path, d: &Descriptor, origin: &Path) -> Result<Vec<u8>> {
    let p = layout_blob_path(dir, d, origin)?;
    let bytes = std::fs::read(&p).map_err(Error::io("reading", &p))?;
    let digest = d.digest("blob")?;
    let actual = Digest::of(&bytes);
    if actual != digest {
        return Err(Error::DigestMismatch {
            what: "blob",
            digest: digest.to_string(),
            actual: actual.to_string(),
        });
    }
    if bytes.len() as u64 != d.size()? {
        return Err(Error::SizeMismatch {
            digest: digest.to_string(),
            expected: d.size()?,
            actual: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

/// The config blob a manifest's descriptor names has the descriptor's digest and size.
fn check_config(dir: &Path, config: &Descriptor, manifest: &Digest, origin: &Path) -> Result<()> {
    let path = layout_blob_path(dir, config, origin)?;
    let digest = config.digest("config")?;
    let actual = digest_file(&path).map_err(Error::io("reading", &path))?;
    if actual != digest {
        return Err(Error::DigestMismatch {
            what: "config",
            digest: digest.to_string(),
            actual: actual.to_string(),
        });
    }
    let size = std::fs::metadata(&path)
        .map_err(Error::io("reading", &path))?
        .len();
    if size != config.size()? {
        return Err(Error::DescriptorSize {
            manifest: manifest.to_string(),
            what: "config",
            digest: digest.to_string(),
            expected: config.size()?,
            actual: size,
        });
    }
    Ok(())
}

fn digest_file(p: &Path) -> std::io::Result<Digest> {
    let f = std::fs::File::open(p)?;
    let h = crate::digest::HashingReader::new(f);
    Ok(h.finish()?.0)
}

fn sniff_file(p: &Path) -> crate::unpack::Compression {
    let mut head = [0u8; 4];
    let n = std::fs::File::open(p)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    crate::unpack::sniff(&head[..n])
}

/// `dir/rel` when `rel` stays inside `dir` lexically (archive names are ours to check).
fn inside(dir: &Path, rel: &str) -> Option<PathBuf> {
    let comps = crate::unpack::clean(rel.as_bytes()).ok()?;
    if comps.is_empty() {
        return None;
    }
    let mut p = dir.to_path_buf();
    p.extend(comps);
    Some(p)
}

/// Unpacks an archive's regular files and directories into `dest`; symlinks between its
/// own files (old `docker save` links repeated layers) become copies; anything else, or a
/// name leaving the archive, is refused.
fn extract_archive(path: &Path, dest: &Path) -> Result<()> {
    let bad = |reason: String| Error::BadArchive {
        path: path.to_owned(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(Error::io("opening", path))?;
    let digest = Digest::of(path.as_os_str().as_encoded_bytes());
    let reader = crate::unpack::decompress(file, &digest)?;
    let mut archive = tar::Archive::new(reader);
    let mut links: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    for entry in archive.entries().map_err(|e| bad(e.to_string()))? {
        let mut entry = entry.map_err(|e| bad(e.to_string()))?;
        let name = entry.path_bytes().into_owned();
        let name_str = String::from_utf8_lossy(&name).into_owned();
        let comps = crate::unpack::clean(&name).map_err(|r| bad(format!("{name_str:?}: {r}")))?;
        if comps.is_empty() {
            continue;
        }
        let mut target = dest.to_path_buf();
        target.extend(&comps);
        match entry.header().entry_type() {
            tar::EntryType::Directory => fsutil::private_dir(&target)?,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                if let Some(parent) = target.parent() {
                    fsutil::private_dir(parent)?;
                }
                let mut out = std::fs::OpenOptions::new();
                std::os::unix::fs::OpenOptionsExt::custom_flags(
                    &mut out,
                    rustix::fs::OFlags::NOFOLLOW.bits() as i32,
                );
                let mut out = out
                    .write(true)
                    .create_new(true)
                    .open(&target)
                    .map_err(Error::io("writing", &target))?;
                std::io::copy(&mut entry, &mut out).map_err(Error::io("writing", &target))?;
            }
            tar::EntryType::Symlink => {
                let link = entry
                    .link_name_bytes()
                    .map(|l| l.into_owned())
                    .unwrap_or_default();
                let mut resolved: Vec<_> = comps[..comps.len() - 1].to_vec();
                for c in link.split(|&b| b == b'/') {
                    match c {
                        b"" | b"." => {}
                        b".." => {
                            resolved.pop().ok_or_else(|| {
                                bad(format!("{name_str:?}: symlink leaves the archive"))
                            })?;
                        }
                        c => resolved.push(std::ffi::OsString::from_vec(c.to_vec())),
                    }
                }
                if link.starts_with(b"/") {
                    return Err(bad(format!(
                        "{name_str:?}: absolute symlink in an image archive"
                    )));
                }
                let mut src = dest.to_path_buf();
                src.extend(resolved);
                links.insert(target, src);
            }
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader => {}
            other => {
                return Err(bad(format!(
                    "{name_str:?}: unexpected {other:?} entry in an image archive"
                )));
            }
        }
    }
    for (link, src) in links {
        if let Some(parent) = link.parent() {
            fsutil::private_dir(parent)?;
        }
        std::fs::copy(&src, &link).map_err(|e| bad(format!("{}: {e}", link.display())))?;
    }
    Ok(())
}
