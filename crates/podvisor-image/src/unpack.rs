//! Unpacking a layer (a tar stream, plain, gzip or zstd) into a fresh directory that overlayfs
//! can use as a lower directory, safely: this runs as root on untrusted content.
//!
//! - Every entry's parent is resolved one component at a time from the layer's root with
//!   `openat(O_NOFOLLOW)`; a symlink met on the way is followed *inside* the layer (an
//!   absolute target starts again at the layer's root), and one that climbs above the root
//!   (`..` past it) is refused. `..` in an entry's own name is refused. Nothing is ever
//!   opened through a path string outside the layer's directory fd.
//! - Whiteouts become overlay whiteouts: `.wh.NAME` a 0/0 character device `NAME`,
//!   `.wh..wh..opq` the `trusted.overlay.opaque=y` attribute on its directory.
//! - Hard links must name a file this layer already holds (not a directory).
//! - Device nodes only as root (skipped otherwise); ownership as root; modes, mtimes and
//!   extended attributes kept (not `trusted.overlay.*` from the image: those would steer
//!   overlayfs).
//! - The caller unpacks into a temporary directory and renames it into place: a refused
//!   layer leaves nothing behind.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Gid, Mode, OFlags, Timespec, Timestamps, Uid, XattrFlags};
use rustix::io::Errno;

use crate::digest::{Digest, HashingReader};
use crate::error::{Error, Result};

/// What unpacking a layer found.
#[derive(Clone, Debug)]
pub(crate) struct Unpacked {
    /// sha256 of the uncompressed tar stream.
    pub diff_id: Digest,
    /// Bytes of regular files written.
    pub size: u64,
}

/// The compression of a layer blob, from its first bytes (not its media type: archives lie).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compression {
    None,
    Gzip,
    Zstd,
}

pub(crate) fn sniff(head: &[u8]) -> Compression {
    if head.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// A reader of the uncompressed stream of a layer blob.
pub(crate) fn decompress<'a>(reader: impl Read + 'a, layer: &Digest) -> Result<Box<dyn Read + 'a>> {
    let mut reader = BufReader::with_capacity(256 * 1024, reader);
    let head = reader
        .fill_buf()
        .map_err(|e| bad(layer, format!("reading: {e}")))?;
    Ok(match sniff(head) {
        Compression::None => Box::new(reader),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(reader)),
        Compression::Zstd => Box::new(
            ruzstd::decoding::StreamingDecoder::new(reader)
                .map_err(|e| bad(layer, format!("zstd: {e}")))?,
        ),
    })
}

fn bad(layer: &Digest, reason: String) -> Error {
    Error::BadLayer {
        layer: layer.to_string(),
        reason,
    }
}

/// Unpacks the layer blob read from `reader` into `dest` (an empty directory).
pub(crate) fn unpack(reader: impl Read, dest: &Path, layer: &Digest) -> Result<Unpacked> {
    let stream = decompress(reader, layer)?;
    let mut hashing = HashingReader::new(stream);
    let root = rustix::fs::open(
        dest,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Error::Io {
        what: "opening layer directory",
        path: dest.to_owned(),
        source: e.into(),
    })?;
    rustix::fs::fchmod(&root, Mode::from_raw_mode(0o755)).map_err(|e| Error::Io {
        what: "chmod",
        path: dest.to_owned(),
        source: e.into(),
    })?;
    let mut u = Unpacker {
        root,
        layer,
        root_user: crate::fsutil::is_root(),
        size: 0,
        dirs: BTreeMap::new(),
    };
    {
        let mut archive = tar::Archive::new(&mut hashing);
        let entries = archive
            .entries()
            .map_err(|e| bad(layer, format!("reading tar: {e}")))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| bad(layer, format!("reading tar: {e}")))?;
            u.entry(&mut entry)?;
        }
    }
    u.finish_dirs()?;
    // Durable before the caller renames it into place: a layer directory is whole or absent.
    rustix::fs::syncfs(&u.root).map_err(|e| bad(layer, format!("syncfs: {e}")))?;
    let (diff_id, _) = hashing
        .finish()
        .map_err(|e| bad(layer, format!("reading: {e}")))?;
    Ok(Unpacked {
        diff_id,
        size: u.size,
    })
}

/// Metadata of a directory, applied once everything under it is written (its mtime would
/// move, and a read-only mode would stop a non-root unpack).
#[derive(Clone, Copy, Debug)]
struct DirMeta {
    mode: u32,
    mtime: Timespec,
}

struct Unpacker<'a> {
    root: OwnedFd,
    layer: &'a Digest,
    root_user: bool,
    size: u64,
    /// Directories of this layer by path components, for their deferred mode and mtime.
    dirs: BTreeMap<Vec<OsString>, DirMeta>,
}

/// An entry's header fields, with PAX overrides applied.
struct Meta {
    mode: u32,
    uid: u64,
    gid: u64,
    mtime: Timespec,
    xattrs: Vec<(String, Vec<u8>)>,
}

const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE: &str = ".wh..wh..opq";
/// Symlinks followed while resolving one path, as the kernel's `MAXSYMLINKS`.
const MAX_SYMLINKS: usize = 40;

impl Unpacker<'_> {
    fn refuse(&self, entry: &[u8], reason: impl Into<String>) -> Error {
        Error::UnsafeLayer {
            layer: self.layer.to_string(),
            entry: String::from_utf8_lossy(entry).into_owned(),
            reason: reason.into(),
        }
    }

    fn io(&self, entry: &[u8], what: &str, e: impl std::fmt::Display) -> Error {
        Error::BadLayer {
            layer: self.layer.to_string(),
            reason: format!("{what} {:?}: {e}", String::from_utf8_lossy(entry)),
        }
    }

    fn entry<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> Result<()> {
        let raw_path = entry.path_bytes().into_owned();
        let comps = clean(&raw_path).map_err(|r| self.refuse(&raw_path, r))?;
        let meta = self.meta(entry, &raw_path)?;
        let kind = entry.header().entry_type();
        let Some((name, parent)) = comps.split_last() else {
            // The layer's root itself (`./`).
            if kind.is_dir() {
                self.dirs.insert(
                    Vec::new(),
                    DirMeta {
                        mode: meta.mode,
                        mtime: meta.mtime,
                    },
                );
                self.set_xattrs(&self.root, &raw_path, &meta.xattrs);
                return Ok(());
            }
            return Err(self.refuse(&raw_path, "a non-directory entry for the layer's root"));
        };
        let dir = self.resolve_dir(parent, &raw_path)?;
        let name_str = name.to_string_lossy();
        if name_str == OPAQUE {
            return self.opaque(&dir, &raw_path);
        }
        if let Some(hidden) = name_str.strip_prefix(WHITEOUT_PREFIX) {
            if hidden.starts_with(WHITEOUT_PREFIX) {
                // Other AUFS meta files (`.wh..wh.plnk`, ...) are not content.
                return Ok(());
            }
            if hidden.is_empty() || hidden == "." || hidden == ".." {
                return Err(self.refuse(&raw_path, "a whiteout of nothing"));
            }
            return self.whiteout(&dir, OsStr::new(hidden), &raw_path, &meta);
        }
        let name = name.as_os_str();
        match kind {
            tar::EntryType::Directory => self.directory(&dir, name, &comps, &raw_path, &meta),
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::GNUSparse => {
                self.regular(entry, &dir, name, &raw_path, &meta)
            }
            tar::EntryType::Symlink => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| self.refuse(&raw_path, "a symlink without a target"))?
                    .into_owned();
                self.remove_existing(&dir, name, &raw_path)?;
                rustix::fs::symlinkat(OsStr::from_bytes(&target), &dir, name)
                    .map_err(|e| self.io(&raw_path, "creating symlink", e))?;
                self.forget_dirs(&comps);
                self.own_at(&dir, name, &raw_path, &meta)?;
                self.times_at(&dir, name, &raw_path, &meta)
            }
            tar::EntryType::Link => {
                let target = entry
                    .link_name_bytes()
                    .ok_or_else(|| self.refuse(&raw_path, "a hard link without a target"))?
                    .into_owned();
                self.hard_link(&dir, name, &comps, &target, &raw_path)
            }
            tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => {
                self.special(entry, kind, &dir, name, &comps, &raw_path, &meta)
            }
            // PAX and GNU long-name records are consumed by the tar reader; anything else is
            // not a file this layer can hold.
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader => Ok(()),
            other => Err(self.refuse(&raw_path, format!("unsupported entry type {other:?}"))),
        }
    }

    fn meta<R: Read>(&self, entry: &mut tar::Entry<'_, R>, path: &[u8]) -> Result<Meta> {
        let h = entry.header();
        let err = |e: std::io::Error| self.io(path, "reading header of", e);
        let mut m = Meta {
            mode: h.mode().map_err(err)? & 0o7777,
            uid: h.uid().map_err(err)?,
            gid: h.gid().map_err(err)?,
            mtime: Timespec {
                tv_sec: h.mtime().map_err(err)?.try_into().unwrap_or(0),
                tv_nsec: 0,
            },
            xattrs: Vec::new(),
        };
        if let Some(pax) = entry.pax_extensions().map_err(err)? {
            for ext in pax {
                let ext = ext.map_err(err)?;
                let Ok(key) = ext.key() else { continue };
                let value = ext.value_bytes();
                let number = || std::str::from_utf8(value).ok();
                match key {
                    "uid" => m.uid = number().and_then(|v| v.parse().ok()).unwrap_or(m.uid),
                    "gid" => m.gid = number().and_then(|v| v.parse().ok()).unwrap_or(m.gid),
                    "mtime" => {
                        if let Some(t) = number().and_then(parse_pax_time) {
                            m.mtime = t;
                        }
                    }
                    _ => {
                        if let Some(name) = key.strip_prefix("SCHILY.xattr.") {
                            m.xattrs.push((name.to_owned(), value.to_vec()));
                        }
                    }
                }
            }
        }
        Ok(m)
    }

    /// Opens the directory `parent` (components below the layer's root), creating missing
    /// directories, following symlinks only inside the layer.
    fn resolve_dir(&self, parent: &[OsString], entry: &[u8]) -> Result<OwnedFd> {
        // Components still to walk, front first; `stack` holds the directories walked.
        let mut todo: std::collections::VecDeque<OsString> = parent.iter().cloned().collect();
        let mut stack: Vec<OwnedFd> = Vec::new();
        let mut symlinks = 0;
        let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        while let Some(comp) = todo.pop_front() {
            let cur: &OwnedFd = stack.last().unwrap_or(&self.root);
            if comp == ".." {
                // Only from a symlink's target: entry names with `..` were refused.
                if stack.pop().is_none() {
                    return Err(self.refuse(
                        entry,
                        "its parent path goes through a symlink that leads out of the layer",
                    ));
                }
                continue;
            }
            match rustix::fs::openat(cur, comp.as_os_str(), dir_flags, Mode::empty()) {
                Ok(fd) => stack.push(fd),
                Err(Errno::NOENT) => {
                    rustix::fs::mkdirat(cur, comp.as_os_str(), Mode::from_raw_mode(0o755))
                        .map_err(|e| self.io(entry, "creating parent directory of", e))?;
                    let fd = rustix::fs::openat(cur, comp.as_os_str(), dir_flags, Mode::empty())
                        .map_err(|e| self.io(entry, "opening parent directory of", e))?;
                    stack.push(fd);
                }
                // A symlink (`O_NOFOLLOW` with `O_DIRECTORY` says ENOTDIR or ELOOP).
                Err(Errno::LOOP | Errno::NOTDIR) if is_symlink(cur, &comp) => {
                    symlinks += 1;
                    if symlinks > MAX_SYMLINKS {
                        return Err(self.refuse(entry, "too many symlinks in its parent path"));
                    }
                    let target = rustix::fs::readlinkat(cur, comp.as_os_str(), Vec::new())
                        .map_err(|e| self.io(entry, "reading symlink in the parent path of", e))?;
                    let target = target.into_bytes();
                    if target.starts_with(b"/") {
                        stack.clear();
                    }
                    for c in target.split(|&b| b == b'/').rev() {
                        if !c.is_empty() && c != b"." {
                            todo.push_front(OsString::from_vec(c.to_vec()));
                        }
                    }
                }
                Err(Errno::NOTDIR | Errno::LOOP) => {
                    return Err(
                        self.refuse(entry, format!("its parent {comp:?} is not a directory"))
                    );
                }
                Err(e) => return Err(self.io(entry, "opening parent directory of", e)),
            }
        }
        match stack.pop() {
            Some(fd) => Ok(fd),
            None => rustix::fs::openat(&self.root, ".", dir_flags, Mode::empty())
                .map_err(|e| self.io(entry, "opening layer root for", e)),
        }
    }

    /// Removes whatever `name` is in `dir` (a directory with its content), unless it is a
    /// directory and `keep_dir`.
    fn remove_existing(&self, dir: &OwnedFd, name: &OsStr, entry: &[u8]) -> Result<()> {
        remove_at(dir, name).map_err(|e| self.io(entry, "replacing", e))
    }

    fn directory(
        &mut self,
        dir: &OwnedFd,
        name: &OsStr,
        comps: &[OsString],
        entry: &[u8],
        meta: &Meta,
    ) -> Result<()> {
        let is_dir = matches!(
            rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW),
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory
        );
        if !is_dir {
            self.remove_existing(dir, name, entry)?;
            rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o700))
                .map_err(|e| self.io(entry, "creating directory", e))?;
        }
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| self.io(entry, "opening directory", e))?;
        self.own(&fd, entry, meta)?;
        self.set_xattrs(&fd, entry, &meta.xattrs);
        self.dirs.insert(
            comps.to_vec(),
            DirMeta {
                mode: meta.mode,
                mtime: meta.mtime,
            },
        );
        Ok(())
    }

    fn regular<R: Read>(
        &mut self,
        entry: &mut tar::Entry<'_, R>,
        dir: &OwnedFd,
        name: &OsStr,
        path: &[u8],
        meta: &Meta,
    ) -> Result<()> {
        self.remove_existing(dir, name, path)?;
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| self.io(path, "creating file", e))?;
        let mut file = std::fs::File::from(fd);
        let n = std::io::copy(entry, &mut file).map_err(|e| self.io(path, "writing file", e))?;
        self.size += n;
        // chown clears set-id bits and file capabilities: mode and xattrs after it.
        self.own(&file, path, meta)?;
        rustix::fs::fchmod(&file, Mode::from_raw_mode(meta.mode))
            .map_err(|e| self.io(path, "chmod", e))?;
        self.set_xattrs(&file, path, &meta.xattrs);
        rustix::fs::futimens(&file, &times(meta.mtime))
            .map_err(|e| self.io(path, "setting times of", e))
    }

    fn hard_link(
        &mut self,
        dir: &OwnedFd,
        name: &OsStr,
        comps: &[OsString],
        target: &[u8],
        path: &[u8],
    ) -> Result<()> {
        let tcomps = clean(target).map_err(|r| {
            self.refuse(
                path,
                format!(
                    "hard link target {:?}: {r}",
                    String::from_utf8_lossy(target)
                ),
            )
        })?;
        let Some((tname, tparent)) = tcomps.split_last() else {
            return Err(self.refuse(path, "a hard link to the layer's root"));
        };
        let tdir = self.resolve_dir(tparent, path)?;
        match rustix::fs::statat(&tdir, tname.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                return Err(self.refuse(path, "a hard link to a directory"));
            }
            Ok(_) => {}
            Err(_) => {
                return Err(self.refuse(
                    path,
                    format!(
                        "hard link target {:?} is not a file of this layer",
                        String::from_utf8_lossy(target)
                    ),
                ));
            }
        }
        if tcomps == comps {
            return Ok(());
        }
        self.remove_existing(dir, name, path)?;
        self.forget_dirs(comps);
        rustix::fs::linkat(&tdir, tname.as_os_str(), dir, name, AtFlags::empty())
            .map_err(|e| self.io(path, "creating hard link", e))
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "one call site, the entry's parts"
    )]
    fn special<R: Read>(
        &mut self,
        entry: &tar::Entry<'_, R>,
        kind: tar::EntryType,
        dir: &OwnedFd,
        name: &OsStr,
        comps: &[OsString],
        path: &[u8],
        meta: &Meta,
    ) -> Result<()> {
        let file_type = match kind {
            tar::EntryType::Char => FileType::CharacterDevice,
            tar::EntryType::Block => FileType::BlockDevice,
            _ => FileType::Fifo,
        };
        let dev = if file_type == FileType::Fifo {
            0
        } else {
            if !self.root_user {
                tracing::warn!(layer = %self.layer, entry = %String::from_utf8_lossy(path), "device node skipped: not root");
                return Ok(());
            }
            let h = entry.header();
            let major = h.device_major().ok().flatten().unwrap_or(0);
            let minor = h.device_minor().ok().flatten().unwrap_or(0);
            rustix::fs::makedev(major, minor)
        };
        self.remove_existing(dir, name, path)?;
        self.forget_dirs(comps);
        rustix::fs::mknodat(dir, name, file_type, Mode::from_raw_mode(0o600), dev)
            .map_err(|e| self.io(path, "creating node", e))?;
        self.own_at(dir, name, path, meta)?;
        rustix::fs::chmodat(dir, name, Mode::from_raw_mode(meta.mode), AtFlags::empty())
            .map_err(|e| self.io(path, "chmod", e))?;
        self.times_at(dir, name, path, meta)
    }

    fn whiteout(&mut self, dir: &OwnedFd, hidden: &OsStr, path: &[u8], meta: &Meta) -> Result<()> {
        if !self.root_user {
            return Err(self.refuse(
                path,
                "a whiteout needs root (overlay whiteouts are 0/0 character devices)",
            ));
        }
        self.remove_existing(dir, hidden, path)?;
        rustix::fs::mknodat(
            dir,
            hidden,
            FileType::CharacterDevice,
            Mode::empty(),
            rustix::fs::makedev(0, 0),
        )
        .map_err(|e| self.io(path, "creating whiteout for", e))?;
        self.own_at(dir, hidden, path, meta)
    }

    fn opaque(&mut self, dir: &OwnedFd, path: &[u8]) -> Result<()> {
        if !self.root_user {
            return Err(self.refuse(
                path,
                "an opaque directory needs root (trusted.overlay.opaque)",
            ));
        }
        rustix::fs::fsetxattr(dir, "trusted.overlay.opaque", b"y", XattrFlags::empty())
            .map_err(|e| self.io(path, "marking opaque", e))
    }

    fn own(&self, fd: impl AsFd, path: &[u8], meta: &Meta) -> Result<()> {
        if !self.root_user {
            return Ok(());
        }
        let (uid, gid) = ids(meta).ok_or_else(|| self.refuse(path, "uid or gid out of range"))?;
        rustix::fs::fchown(fd, Some(uid), Some(gid)).map_err(|e| self.io(path, "chown", e))
    }

    fn own_at(&self, dir: &OwnedFd, name: &OsStr, path: &[u8], meta: &Meta) -> Result<()> {
        if !self.root_user {
            return Ok(());
        }
        let (uid, gid) = ids(meta).ok_or_else(|| self.refuse(path, "uid or gid out of range"))?;
        rustix::fs::chownat(dir, name, Some(uid), Some(gid), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| self.io(path, "chown", e))
    }

    fn times_at(&self, dir: &OwnedFd, name: &OsStr, path: &[u8], meta: &Meta) -> Result<()> {
        rustix::fs::utimensat(dir, name, &times(meta.mtime), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| self.io(path, "setting times of", e))
    }

    /// Extended attributes from the image, but none that steers overlayfs. Failures (a file
    /// system without them, `trusted.*` as non-root) are logged, as containerd ignores them.
    fn set_xattrs(&self, fd: impl AsFd, path: &[u8], xattrs: &[(String, Vec<u8>)]) {
        for (name, value) in xattrs {
            if name.starts_with("trusted.overlay.") || name.starts_with("user.overlay.") {
                tracing::warn!(layer = %self.layer, entry = %String::from_utf8_lossy(path), %name, "overlay attribute from the image ignored");
                continue;
            }
            if let Err(e) =
                rustix::fs::fsetxattr(fd.as_fd(), name.as_str(), value, XattrFlags::empty())
            {
                tracing::warn!(layer = %self.layer, entry = %String::from_utf8_lossy(path), %name, error = %e, "extended attribute not kept");
            }
        }
    }

    /// A directory replaced by something else takes its deferred metadata (and its
    /// children's) with it.
    fn forget_dirs(&mut self, comps: &[OsString]) {
        self.dirs.retain(|k, _| !k.starts_with(comps));
    }

    /// Modes and mtimes of the layer's directories, deepest first.
    fn finish_dirs(&mut self) -> Result<()> {
        let mut dirs: Vec<_> = std::mem::take(&mut self.dirs).into_iter().collect();
        dirs.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
        for (comps, meta) in dirs {
            let fd = if comps.is_empty() {
                rustix::fs::openat(
                    &self.root,
                    ".",
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
            } else {
                self.open_no_follow(&comps)
            };
            let path = comps.join(OsStr::new("/"));
            let Ok(fd) = fd else { continue };
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(meta.mode))
                .map_err(|e| self.io(path.as_bytes(), "chmod", e))?;
            rustix::fs::futimens(&fd, &times(meta.mtime))
                .map_err(|e| self.io(path.as_bytes(), "setting times of", e))?;
        }
        Ok(())
    }

    fn open_no_follow(&self, comps: &[OsString]) -> rustix::io::Result<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut fd = rustix::fs::openat(&self.root, comps[0].as_os_str(), flags, Mode::empty())?;
        for c in &comps[1..] {
            fd = rustix::fs::openat(&fd, c.as_os_str(), flags, Mode::empty())?;
        }
        Ok(fd)
    }
}

fn is_symlink(dir: &OwnedFd, name: &OsStr) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
}

fn ids(meta: &Meta) -> Option<(Uid, Gid)> {
    let uid = u32::try_from(meta.uid).ok()?;
    let gid = u32::try_from(meta.gid).ok()?;
    Some((Uid::from_raw(uid), Gid::from_raw(gid)))
}

fn times(t: Timespec) -> Timestamps {
    Timestamps {
        last_access: t,
        last_modification: t,
    }
}

/// PAX `mtime`: seconds with an optional fraction.
fn parse_pax_time(v: &str) -> Option<Timespec> {
    let (secs, frac) = v.split_once('.').unwrap_or((v, ""));
    let tv_sec: i64 = secs.parse().ok()?;
    let mut nanos = String::from(frac);
    nanos.truncate(9);
    while nanos.len() < 9 {
        nanos.push('0');
    }
    let tv_nsec = if frac.is_empty() {
        0
    } else {
        nanos.parse().ok()?
    };
    Some(Timespec { tv_sec, tv_nsec })
}

/// An entry's name as components below the layer's root: a leading `/` and `.` components
/// dropped, `..` refused (a tar-slip), NUL refused.
pub(crate) fn clean(path: &[u8]) -> std::result::Result<Vec<OsString>, &'static str> {
    if path.contains(&0) {
        return Err("a NUL byte in the path");
    }
    let mut out = Vec::new();
    for c in path.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => return Err("`..` in the path would escape the layer"),
            c => out.push(OsString::from_vec(c.to_vec())),
        }
    }
    Ok(out)
}

/// Removes `name` in `dir`, a directory with everything in it; absent is fine.
fn remove_at(dir: &OwnedFd, name: &OsStr) -> rustix::io::Result<()> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e),
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return rustix::fs::unlinkat(dir, name, AtFlags::empty());
    }
    let sub = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut names = Vec::new();
    for e in rustix::fs::Dir::read_from(&sub)? {
        let e = e?;
        let n = e.file_name().to_bytes();
        if n != b"." && n != b".." {
            names.push(OsString::from_vec(n.to_vec()));
        }
    }
    for n in names {
        remove_at(&sub, &n)?;
    }
    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)
}
