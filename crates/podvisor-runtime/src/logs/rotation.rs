//! Rotating one container log file as the kubelet's container log manager does
//! (`pkg/kubelet/logs/container_log_manager.go`, `rotateLog`).
//!
//! A running container's log that reached the policy's `max_size` is renamed to
//! `<log>.<YYYYMMDD-HHMMSS>` (the node's local time, Go's `20060102-150405`) and the runtime
//! reopens the log's path (CRI `ReopenContainerLog`), so the container writes to a new file.
//! Before the rename, the rotated files of earlier rotations are tidied: leftovers of an
//! interrupted rotation go (`.tmp` files, a rotated file whose `.gz` exists), the oldest
//! rotated files go until `max_files - 2` remain (with the current file and the one about to
//! be rotated, `max_files` in all), and the rotated files kept are gzip-compressed to `.gz`
//! through a `.tmp` file; the newest rotated file stays uncompressed, so whoever still reads
//! it (a follower that has not seen the rename yet) can finish.
//!
//! [`plan`] decides all of that from the directory's file names alone; [`prepare`] carries it
//! out up to the rename ([`tidy`], which may take long, then [`rename`]), and [`undo`] renames
//! back when the runtime could not reopen.
//! Unlike the kubelet, a rotation whose name is taken (a second rotation within the same
//! second, possible only with a monitor interval under a second) waits for the next round
//! instead of overwriting the earlier rotated file.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use flate2::Compression;
use flate2::write::GzEncoder;

/// The suffix of a compressed rotated log.
pub const COMPRESS_SUFFIX: &str = ".gz";
/// The suffix of a file being compressed.
pub const TMP_SUFFIX: &str = ".tmp";
/// The rotated file's suffix, Go's `20060102-150405` as `strftime`.
pub const TIMESTAMP_FORMAT: &str = "%Y%m%d-%H%M%S";
/// The kubelet's `--container-log-max-size` default: 10Mi.
pub const DEFAULT_MAX_SIZE: u64 = 10 * 1024 * 1024;
/// The kubelet's `--container-log-max-files` default.
pub const DEFAULT_MAX_FILES: usize = 5;

/// A rotation policy or rotation step failed.
#[derive(Debug, thiserror::Error)]
pub enum RotationError {
    /// `max_files` below 2 (the kubelet's `NewContainerLogManager` check).
    #[error("invalid MaxFiles {0}, must be > 1")]
    InvalidMaxFiles(usize),
    /// A file operation failed.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> RotationError + 'a {
    move |source| RotationError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// When a container's log is rotated and how many files it keeps (the kubelet's
/// `LogRotatePolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRotatePolicy {
    /// The size at which the log is rotated, in bytes.
    pub max_size: u64,
    /// The most files a container's log keeps, the current one included.
    pub max_files: usize,
}

impl Default for LogRotatePolicy {
    fn default() -> Self {
        LogRotatePolicy {
            max_size: DEFAULT_MAX_SIZE,
            max_files: DEFAULT_MAX_FILES,
        }
    }
}

impl LogRotatePolicy {
    /// The policy, checked as the kubelet checks it.
    ///
    /// # Errors
    ///
    /// `max_files` below 2.
    pub fn new(max_size: u64, max_files: usize) -> Result<Self, RotationError> {
        if max_files <= 1 {
            return Err(RotationError::InvalidMaxFiles(max_files));
        }
        Ok(LogRotatePolicy {
            max_size,
            max_files,
        })
    }

    /// Whether a log of `size` bytes is rotated.
    pub fn needs_rotation(&self, size: u64) -> bool {
        size >= self.max_size
    }
}

/// What one rotation does, by file name within the log's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RotationPlan {
    /// Removed first: leftovers of an interrupted rotation, then the oldest rotated files
    /// beyond `max_files - 2`, oldest first.
    pub remove: Vec<String>,
    /// Then compressed to `<name>.gz`, oldest first.
    pub compress: Vec<String>,
    /// Then the log is renamed to this.
    pub rotate_to: String,
}

/// The rotated files of `log` among `names` that are in use, oldest first (the kubelet's
/// `GetAllLogs` without the current file): `.gz` files, and uncompressed ones whose `.gz`
/// does not exist; never `.tmp` files.
pub fn rotated_in_use(log: &str, names: &[String]) -> Vec<String> {
    let (mut inuse, _) = split_unused(log, names);
    inuse.sort();
    inuse
}

/// Splits the rotated files of `log` (`<log>.*`) into those in use and leftovers.
fn split_unused(log: &str, names: &[String]) -> (Vec<String>, Vec<String>) {
    let prefix = format!("{log}.");
    let rotated: Vec<&String> = names.iter().filter(|n| n.starts_with(&prefix)).collect();
    rotated.iter().map(|n| (*n).clone()).partition(|n| {
        if n.ends_with(TMP_SUFFIX) {
            false
        } else if n.ends_with(COMPRESS_SUFFIX) {
            true
        } else {
            let compressed = format!("{n}{COMPRESS_SUFFIX}");
            !rotated.iter().any(|other| **other == compressed)
        }
    })
}

/// The kubelet's `rotateLog` as a plan: `names` are the files of the log's directory, `log`
/// the current file's name, `timestamp` now as [`TIMESTAMP_FORMAT`]. `None` when the rotated
/// name is taken by a file that would be kept (see the module's note).
pub fn plan(
    log: &str,
    names: &[String],
    policy: &LogRotatePolicy,
    timestamp: &str,
) -> Option<RotationPlan> {
    let (mut inuse, mut remove) = split_unused(log, names);
    remove.sort();
    inuse.sort();
    let keep = policy.max_files.saturating_sub(2);
    let excess = inuse.len().saturating_sub(keep);
    remove.extend(inuse.drain(..excess));
    let rotate_to = format!("{log}.{timestamp}");
    let compressed = format!("{rotate_to}{COMPRESS_SUFFIX}");
    if inuse.iter().any(|n| *n == rotate_to || *n == compressed) {
        return None;
    }
    let compress = inuse
        .into_iter()
        .filter(|n| !n.ends_with(COMPRESS_SUFFIX))
        .collect();
    Some(RotationPlan {
        remove,
        compress,
        rotate_to,
    })
}

/// The file names in `dir`.
fn names_in(dir: &Path) -> Result<Vec<String>, RotationError> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err("listing the log directory", dir))? {
        let entry = entry.map_err(io_err("listing the log directory", dir))?;
        if let Ok(name) = entry.file_name().into_string() {
            names.push(name);
        }
    }
    Ok(names)
}

/// The rotated files of the log at `log`, oldest first, and the log itself last (the
/// kubelet's `GetAllLogs`).
///
/// # Errors
///
/// The log's directory cannot be listed.
pub fn all_logs(log: &Path) -> Result<Vec<PathBuf>, RotationError> {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return Ok(vec![log.to_path_buf()]);
    };
    let mut all: Vec<PathBuf> = rotated_in_use(name, &names_in(dir)?)
        .into_iter()
        .map(|n| dir.join(n))
        .collect();
    all.push(log.to_path_buf());
    Ok(all)
}

/// Carries out [`plan`] for the log at `log` up to its rename ([`tidy`], then [`rename`]),
/// with `timestamp` as the rotated file's suffix; returns the rotated file's path (`None`: its
/// name is taken, try again next round). The runtime must then reopen the log's path, or
/// [`undo`] follows.
///
/// # Errors
///
/// A file could not be listed, removed, compressed or renamed.
pub fn prepare(
    log: &Path,
    policy: &LogRotatePolicy,
    timestamp: &str,
) -> Result<Option<PathBuf>, RotationError> {
    let Some(rotated) = tidy(log, policy, timestamp)? else {
        return Ok(None);
    };
    rename(log, &rotated)?;
    Ok(Some(rotated))
}

/// The part of [`prepare`] that may take long (compressing): removes the leftovers and the
/// excess rotated files and compresses the others, and returns the path the log is to be
/// renamed to (`None`: that name is taken). Interrupted, it leaves at most a `.tmp` file or
/// an uncompressed file beside its `.gz`, which the next rotation removes.
///
/// # Errors
///
/// A file could not be listed, removed or compressed.
pub fn tidy(
    log: &Path,
    policy: &LogRotatePolicy,
    timestamp: &str,
) -> Result<Option<PathBuf>, RotationError> {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return Err(RotationError::Io {
            what: "rotating",
            path: log.to_path_buf(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "not a log file path"),
        });
    };
    let Some(plan) = plan(name, &names_in(dir)?, policy, timestamp) else {
        return Ok(None);
    };
    for old in &plan.remove {
        let path = dir.join(old);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(io_err("removing the old log", &path)(e));
            }
            _ => {}
        }
    }
    for rotated in &plan.compress {
        compress(&dir.join(rotated))?;
    }
    Ok(Some(dir.join(&plan.rotate_to)))
}

/// Renames the log to its rotated name (the kubelet's `rotateLatestLog`, before the reopen).
///
/// # Errors
///
/// The rename failed.
pub fn rename(log: &Path, rotated: &Path) -> Result<(), RotationError> {
    fs::rename(log, rotated).map_err(io_err("renaming the log", log))
}

/// Renames a rotated log back (the runtime could not reopen the log's path), so the next
/// round tries again.
///
/// # Errors
///
/// The rename failed: the container keeps writing to `rotated`.
pub fn undo(log: &Path, rotated: &Path) -> Result<(), RotationError> {
    fs::rename(rotated, log).map_err(io_err("renaming the rotated log back", rotated))
}

/// Compresses `path` to `<path>.gz` through `<path>.tmp` (same mode), then removes `path`
/// (the kubelet's `compressLog`).
///
/// # Errors
///
/// Reading, writing, renaming or removing failed; the `.tmp` file is removed then.
pub fn compress(path: &Path) -> Result<(), RotationError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(TMP_SUFFIX);
    let tmp = PathBuf::from(tmp);
    let mut gz = path.as_os_str().to_owned();
    gz.push(COMPRESS_SUFFIX);
    let gz = PathBuf::from(gz);
    let written = (|| {
        let mut src = File::open(path).map_err(io_err("opening the log to compress", path))?;
        let mode = src
            .metadata()
            .map_err(io_err("reading the log to compress", path))?
            .permissions()
            .mode();
        let dst = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode & 0o7777)
            .open(&tmp)
            .map_err(io_err("creating the temporary log", &tmp))?;
        let mut encoder = GzEncoder::new(dst, Compression::default());
        io::copy(&mut src, &mut encoder).map_err(io_err("compressing the log", path))?;
        encoder
            .finish()
            .map_err(io_err("writing the compressed log", &tmp))?;
        fs::rename(&tmp, &gz).map_err(io_err("renaming the compressed log", &tmp))
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    fs::remove_file(path).map_err(io_err("removing the log after compressing it", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn policy(max_files: usize) -> LogRotatePolicy {
        LogRotatePolicy::new(1024, max_files).unwrap()
    }

    #[test]
    fn max_files_must_exceed_one() {
        assert_eq!(
            LogRotatePolicy::new(1, 1).unwrap_err().to_string(),
            "invalid MaxFiles 1, must be > 1"
        );
        assert!(policy(2).needs_rotation(1024));
        assert!(!policy(2).needs_rotation(1023));
    }

    #[test]
    fn first_rotation_only_renames() {
        let plan = plan(
            "0.log",
            &names(&["0.log", "1.log"]),
            &policy(5),
            "20261207-200000",
        );
        assert_eq!(
            plan,
            Some(RotationPlan {
                remove: vec![],
                compress: vec![],
                rotate_to: "0.log.20261207-200000".into()
            })
        );
    }

    #[test]
    fn earlier_rotations_are_compressed_and_the_oldest_removed() {
        let dir = names(&[
            "0.log",
            "0.log.20261207-200001.gz",
            "0.log.20261207-200002.gz",
            "0.log.20261207-200003",
            "0.log.20261207-200000.gz",
            "10.log.20261207-190000",
        ]);
        // max 4 files: 2 rotated kept besides the current one and the one made now.
        let plan = plan("0.log", &dir, &policy(4), "20261207-200004").unwrap();
        assert_eq!(
            plan.remove,
            ["0.log.20261207-200000.gz", "0.log.20261207-200001.gz"]
        );
        assert_eq!(plan.compress, ["0.log.20261207-200003"]);
        assert_eq!(plan.rotate_to, "0.log.20261207-200004");
    }

    #[test]
    fn two_files_keep_no_rotated_one() {
        let dir = names(&["0.log", "0.log.20261207-200001"]);
        let plan = plan("0.log", &dir, &policy(2), "20261207-200001").unwrap();
        assert_eq!(plan.remove, ["0.log.20261207-200001"]);
        assert!(plan.compress.is_empty());
    }

    #[test]
    fn leftovers_of_an_interrupted_rotation_go() {
        let dir = names(&[
            "0.log",
            "0.log.20261207-200001",
            "0.log.20261207-200001.gz",
            "0.log.20261207-200002.tmp",
            "0.log.20261207-200002",
        ]);
        assert_eq!(
            rotated_in_use("0.log", &dir),
            ["0.log.20261207-200001.gz", "0.log.20261207-200002"]
        );
        let plan = plan("0.log", &dir, &policy(5), "20261207-200003").unwrap();
        assert_eq!(
            plan.remove,
            ["0.log.20261207-200001", "0.log.20261207-200002.tmp"]
        );
        assert_eq!(plan.compress, ["0.log.20261207-200002"]);
    }

    #[test]
    fn a_taken_name_waits_for_the_next_round() {
        let dir = names(&["0.log", "0.log.20261207-200001"]);
        assert_eq!(plan("0.log", &dir, &policy(5), "20261207-200001"), None);
        let dir = names(&["0.log", "0.log.20261207-200001.gz"]);
        assert_eq!(plan("0.log", &dir, &policy(5), "20261207-200001"), None);
    }
}
