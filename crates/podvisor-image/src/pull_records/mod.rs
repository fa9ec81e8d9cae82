//! The kubelet's image pull records (`KubeletEnsureSecretPulledImages`, beta and on in 1.35):
//! which credentials each image the node pulled was pulled with, so that a pod without them
//! cannot run a private image another pod pulled ([`verify::must_attempt_pull`]).
//!
//! Kept as the kubelet keeps its `image_manager/` directory, one private file per record,
//! each written whole (temporary name, fsync, rename), surviving restarts:
//!
//! ```text
//! images/pull-records/        0700
//!   pulling/<sha256(image)>   a pull of this image reference started and not yet recorded
//!                             (the kubelet's ImagePullIntent): left by a crash, it makes the
//!                             next pod of that reference pull again
//!   pulled/<sha256(image id)> the credentials the image was pulled with, per repository
//!                             (the kubelet's ImagePulledRecord)
//!   lock                      flock: read-modify-write of a pulled record
//!   tmp/                      writes in progress
//! ```
//!
//! Records of images no longer stored are dropped by [`PullRecords::prune`] (the kubelet's
//! `PruneUnknownRecords`, run with image garbage collection).

pub mod verify;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use crate::digest::Digest;
use crate::error::{Error, Result};
use crate::fsutil::{self, FileLock};
use crate::store::ImageStore;

/// A pull secret the kubelet tracks: the Secret's coordinates and the hash of the
/// credentials it gave for the image (the kubelet's `ImagePullSecret`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PullSecret {
    /// The Secret's namespace (the pod's).
    pub namespace: String,
    /// The Secret's name.
    pub name: String,
    /// The Secret's `metadata.uid`.
    pub uid: String,
    /// [`crate::Credentials::content_hash`] of the credentials it holds for the image's
    /// registry.
    pub credential_hash: String,
}

impl PullSecret {
    /// The same Secret object: namespace, name and uid.
    #[must_use]
    pub fn same_object(&self, other: &PullSecret) -> bool {
        self.uid == other.uid && self.namespace == other.namespace && self.name == other.name
    }
}

/// What an image was pulled with, for one repository (the kubelet's `ImagePullCredentials`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PullCredentials {
    /// Pulled with credentials every pod of the node has: the node's own
    /// (`--registry-config`) or none.
    #[serde(default)]
    pub node_pods_accessible: bool,
    /// Pulled with these pods' secrets.
    #[serde(default)]
    pub kubernetes_secrets: Vec<PullSecret>,
}

/// One image's record (the kubelet's `ImagePulledRecord`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PulledRecord {
    /// The image's id (its config digest).
    pub image_ref: String,
    /// When it last changed (Unix seconds).
    pub last_updated: u64,
    /// Repository (normalised name, no tag or digest) → what it was pulled with.
    pub credential_mapping: BTreeMap<String, PullCredentials>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct PullIntent {
    image: String,
}

/// The pull records of an [`ImageStore`].
#[derive(Clone, Debug)]
pub struct PullRecords {
    dir: PathBuf,
}

impl ImageStore {
    /// The store's pull records (made on first use).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when their directories cannot be made.
    pub fn pull_records(&self) -> Result<PullRecords> {
        PullRecords::open(self.dir().join("pull-records"))
    }
}

impl PullRecords {
    /// Opens (creating, private) the records in `dir`.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the directories cannot be made.
    pub fn open(dir: impl Into<PathBuf>) -> Result<PullRecords> {
        let dir = dir.into();
        for sub in ["pulling", "pulled", "tmp"] {
            fsutil::private_dir(&dir.join(sub))?;
        }
        Ok(PullRecords { dir })
    }

    /// The records' directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn intent_path(&self, image: &str) -> PathBuf {
        self.dir
            .join("pulling")
            .join(Digest::of(image.as_bytes()).hex())
    }

    fn pulled_path(&self, image_ref: &str) -> PathBuf {
        self.dir
            .join("pulled")
            .join(Digest::of(image_ref.as_bytes()).hex())
    }

    fn write(&self, path: &Path, value: &impl serde::Serialize) -> Result<()> {
        let data = serde_json::to_vec(value).map_err(|e| Error::BadPullRecord {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        fsutil::write_atomic(path, &self.dir.join("tmp"), &data)
    }

    /// Records that a pull of `image` (the reference a pod asked for) starts.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when it cannot be written: the pull must not start (a crash during it
    /// would leave nothing saying the image's credentials were never recorded).
    pub fn record_intent(&self, image: &str) -> Result<()> {
        self.write(
            &self.intent_path(image),
            &PullIntent {
                image: image.to_owned(),
            },
        )
    }

    /// Whether a pull of `image` started and was not recorded as finished.
    #[must_use]
    pub fn intent_exists(&self, image: &str) -> bool {
        self.intent_path(image).is_file()
    }

    /// The pull of `image` finished (pulled, and recorded, or failed).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the intent cannot be removed.
    pub fn clear_intent(&self, image: &str) -> Result<()> {
        let path = self.intent_path(image);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io("removing", path)(e))
            }
            _ => fsutil::sync_dir(&self.dir.join("pulling")),
        }
    }

    /// The record of the image `image_ref`, if any.
    ///
    /// # Errors
    ///
    /// [`Error::BadPullRecord`] for one that cannot be read or decoded: the caller fails
    /// safe (the kubelet pulls when it cannot read its records).
    pub fn pulled(&self, image_ref: &str) -> Result<Option<PulledRecord>> {
        let path = self.pulled_path(image_ref);
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(Error::BadPullRecord {
                    path,
                    reason: e.to_string(),
                });
            }
        };
        let record: PulledRecord =
            serde_json::from_slice(&data).map_err(|e| Error::BadPullRecord {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        if record.image_ref != image_ref {
            return Err(Error::BadPullRecord {
                path,
                reason: format!("it records image {:?}", record.image_ref),
            });
        }
        Ok(Some(record))
    }

    /// Merges `credentials` into the record of `image_ref` for `repository`
    /// ([`verify::merge`]), creating the record; a record that cannot be read is replaced.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when it cannot be written.
    pub fn record_pulled(
        &self,
        repository: &str,
        image_ref: &str,
        credentials: &PullCredentials,
    ) -> Result<()> {
        let _lock = FileLock::acquire(&self.dir.join("lock"), true)?;
        let current = self.pulled(image_ref).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "unreadable image pull record; replaced");
            None
        });
        let merged = match current {
            Some(record) => verify::merge(&record, repository, credentials),
            None => Some(PulledRecord {
                image_ref: image_ref.to_owned(),
                last_updated: 0,
                credential_mapping: [(repository.to_owned(), credentials.clone())].into(),
            }),
        };
        let Some(mut record) = merged else {
            return Ok(());
        };
        record.last_updated = crate::store::now_secs();
        self.write(&self.pulled_path(image_ref), &record)
    }

    /// Drops the records of images not in `present` (ids) that did not change since
    /// `until` (Unix seconds; a pull recorded after the caller listed the images stays).
    /// Returns how many it dropped.
    #[must_use]
    pub fn prune(&self, present: &HashSet<String>, until: u64) -> usize {
        let Ok(_lock) = FileLock::acquire(&self.dir.join("lock"), true) else {
            return 0;
        };
        let Ok(entries) = std::fs::read_dir(self.dir.join("pulled")) else {
            return 0;
        };
        let mut dropped = 0;
        for entry in entries.flatten() {
            // One that cannot be read stays: without it the image would pass as preloaded.
            let keep = std::fs::read(entry.path())
                .ok()
                .and_then(|d| serde_json::from_slice::<PulledRecord>(&d).ok())
                .is_none_or(|r| present.contains(&r.image_ref) || r.last_updated >= until);
            if !keep && std::fs::remove_file(entry.path()).is_ok() {
                dropped += 1;
            }
        }
        dropped
    }
}
