//! Small file-system helpers: private directories, atomic writes, fsync, file locks.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Creates `dir` (and parents) with mode 0700 if missing.
pub(crate) fn private_dir(dir: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(Error::io("creating directory", dir))
}

/// fsyncs a directory (after a rename or create in it).
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(Error::io("syncing directory", dir))
}

/// A fresh name for a temporary file or directory under `dir`.
pub(crate) fn temp_name(dir: &Path, prefix: &str) -> PathBuf {
    let mut bytes = [0u8; 8];
    // Uniqueness only (the directory is private); fall back to pid + time.
    if getrandom_fill(&mut bytes).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = ((t as u64) ^ u64::from(std::process::id())).to_le_bytes();
    }
    dir.join(format!("{prefix}{}", crate::digest::hex(&bytes)))
}

fn getrandom_fill(buf: &mut [u8]) -> std::io::Result<()> {
    let mut f = File::open("/dev/urandom")?;
    std::io::Read::read_exact(&mut f, buf)
}

/// Writes `data` to `path` atomically: a private temporary file in `tmp_dir` (same file
/// system), fsync, rename, fsync of the directory.
pub(crate) fn write_atomic(path: &Path, tmp_dir: &Path, data: &[u8]) -> Result<()> {
    let tmp = temp_name(tmp_dir, "write-");
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::Io {
            what: "writing",
            path: path.to_owned(),
            source: e,
        });
    }
    sync_dir(path.parent().unwrap_or(Path::new("/")))
}

/// An exclusive or shared `flock` on a lock file, released on drop.
#[derive(Debug)]
pub(crate) struct FileLock {
    _file: File,
}

impl FileLock {
    /// Blocks until the lock is held.
    pub(crate) fn acquire(path: &Path, exclusive: bool) -> Result<FileLock> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::CLOEXEC.bits() as i32)
            .open(path)
            .map_err(Error::io("opening lock", path))?;
        let op = if exclusive {
            rustix::fs::FlockOperation::LockExclusive
        } else {
            rustix::fs::FlockOperation::LockShared
        };
        rustix::fs::flock(&file, op).map_err(|e| Error::Io {
            what: "locking",
            path: path.to_owned(),
            source: e.into(),
        })?;
        Ok(FileLock { _file: file })
    }
}

/// Whether this process is root (device nodes, ownership and overlay whiteouts need it).
pub(crate) fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
