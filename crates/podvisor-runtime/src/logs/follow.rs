//! Following one container's log file across rotations, as the kubelet's `ReadLogs` with
//! `follow` does (`pkg/kubelet/kuberuntime/logs/logs.go`): the file is read through the
//! descriptor opened first, and once the path names another file (the container log manager
//! renamed it and the runtime reopened the path), the old file is read to its end and the new
//! one from its start.
//!
//! Order matters for losing nothing: the path is looked at *before* the open file is read to
//! its end. The runtime creates the new file while holding its writers' lock, so once the
//! new file exists nothing more is written to the old one; reading the old one after seeing
//! the new one therefore gets every record, and the new one holds only later records.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::{ReadOptions, ReadProgress, read_open_log_to};

/// A file's identity: its device and inode.
type FileId = (u64, u64);

/// One container instance's log, read piece by piece.
#[derive(Debug)]
pub struct LogFollower {
    path: PathBuf,
    /// The file being read, once it existed, with its identity.
    open: Option<(File, FileId)>,
    /// Where the next read of the open file starts.
    offset: u64,
}

impl LogFollower {
    /// Follows the log at `path` (which may not exist yet).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        LogFollower {
            path: path.into(),
            open: None,
            offset: 0,
        }
    }

    /// The path followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes to `out` what was logged since the last call, as [`super::read_log_to`] does.
    /// On the first file opened, `opts.tail_lines` and `opts.start_offset` choose where to
    /// start; later reads continue where the last one stopped, in the new file after a
    /// rotation. `opts.limit_bytes` counts this call's output. A log that does not exist yet
    /// reads as empty.
    ///
    /// # Errors
    ///
    /// Opening or reading the file failed (other than its not existing yet).
    pub fn read(&mut self, opts: &ReadOptions, out: &mut impl Write) -> io::Result<ReadProgress> {
        let mut total = ReadProgress::default();
        self.advance(|file, from| {
            let mut now = opts.clone();
            if let Some(offset) = from {
                now.start_offset = Some(offset);
                now.tail_lines = None;
            }
            if let Some(limit) = now.limit_bytes.as_mut() {
                *limit = limit.saturating_sub(usize::try_from(total.written).unwrap_or(usize::MAX));
            }
            let progress = read_open_log_to(file, &now, out)?;
            total.written += progress.written;
            total.offset = progress.offset;
            total.limit_reached = progress.limit_reached;
            Ok((progress.offset, progress.limit_reached))
        })?;
        Ok(total)
    }

    /// Appends to `out` the records (raw lines of the file, each with its newline) written
    /// since the last call, from the start of the first file, following rotations as
    /// [`LogFollower::read`] does. An unfinished last record is left for the next call.
    ///
    /// # Errors
    ///
    /// Opening or reading the file failed (other than its not existing yet).
    pub fn read_records(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        self.advance(|file, from| {
            let from = from.unwrap_or(0);
            let mut bytes = Vec::new();
            let mut reader = file;
            reader.seek(SeekFrom::Start(from))?;
            reader.read_to_end(&mut bytes)?;
            let whole = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
            out.extend_from_slice(&bytes[..whole]);
            Ok((from + whole as u64, false))
        })
    }

    /// Runs `read` on the open file (`None`: the first read of the first file; else the
    /// offset to continue from), which says where it stopped and whether to stop there; after
    /// a rotation, once more on the new file from its start.
    fn advance(
        &mut self,
        mut read: impl FnMut(&File, Option<u64>) -> io::Result<(u64, bool)>,
    ) -> io::Result<()> {
        let mut first = false;
        if self.open.is_none() {
            let Some(opened) = open_with_id(&self.path)? else {
                return Ok(());
            };
            self.open = Some(opened);
            first = true;
        }
        // At most one rotation is taken per call; a second one is seen by the next call.
        for _ in 0..2 {
            let Some((file, id)) = &self.open else {
                break;
            };
            let rotated = match id_of(&self.path)? {
                Some(now) => now != *id,
                // Renamed, not yet reopened: the old file is still the one written.
                None => false,
            };
            let (offset, stop) = read(file, (!first).then_some(self.offset))?;
            self.offset = offset;
            if !rotated || stop {
                break;
            }
            let Some(next) = open_with_id(&self.path)? else {
                break;
            };
            self.open = Some(next);
            self.offset = 0;
            first = false;
        }
        Ok(())
    }
}

fn open_with_id(path: &Path) -> io::Result<Option<(File, FileId)>> {
    match File::open(path) {
        Ok(file) => {
            let meta = file.metadata()?;
            Ok(Some((file, (meta.dev(), meta.ino()))))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!(
                "failed to open log file {:?}: {e}",
                path.display().to_string()
            ),
        )),
    }
}

fn id_of(path: &Path) -> io::Result<Option<FileId>> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(Some((meta.dev(), meta.ino()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("reading the log file {}: {e}", path.display()),
        )),
    }
}
