//! The kubelet's `AtomicWriter` (`pkg/volume/util/atomic_writer.go`): a volume's files are
//! written into a new hidden timestamped directory, `..data` is switched to it with one
//! `rename` of a symbolic link, and each top-level name is a link through `..data`, so a
//! reader sees the old set or the new one, never a mix. The previous directory and the names
//! the new payload no longer has are removed afterwards. A payload equal to what is there
//! writes nothing.
//!
//! With the pod's `fsGroup`, the new files are handed to that group before the switch, as the
//! kubelet's `setPerms` hook (`SetVolumeOwnership` of a read-only volume) does: every entry
//! of the volume gets the group, files gain `g+r` (and `u+r`), directories `g+rx` and setgid;
//! links keep their mode.

use std::collections::BTreeSet;
use std::io;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Component, Path, PathBuf};

use crate::config::projection::Payload;

const DATA_DIR: &str = "..data";
const DATA_DIR_TMP: &str = "..data_tmp";

/// `validatePath`: relative, no `..` element, not starting with `..`.
fn validate(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("invalid path: must not be empty".to_owned());
    }
    let p = Path::new(path);
    if p.is_absolute() {
        return Err(format!("invalid path: must be relative path: {path}"));
    }
    if p.components().any(|c| c == Component::ParentDir) {
        return Err(format!("invalid path: must not contain '..': {path}"));
    }
    if path.starts_with("..") {
        return Err(format!("invalid path: must not start with '..': {path}"));
    }
    Ok(())
}

/// `roMask`: what `SetVolumeOwnership` adds to a read-only volume's files.
const RO_MASK: u32 = 0o440;
/// `execMask`, added to directories besides `roMask` and setgid.
const EXEC_MASK: u32 = 0o110;

/// The mode a file of the payload has on disk.
fn effective_mode(mode: u32, fs_group: Option<u32>) -> u32 {
    if fs_group.is_some() {
        mode | RO_MASK
    } else {
        mode
    }
}

/// `SetVolumeOwnership` (`fsGroupChangePolicy: Always`) over `dir`, read-only volume.
fn set_volume_ownership(dir: &Path, gid: u32) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let gid = rustix::fs::Gid::from_raw(gid);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta =
            std::fs::symlink_metadata(&p).map_err(|e| format!("stat {}: {e}", p.display()))?;
        rustix::fs::chownat(
            rustix::fs::CWD,
            &p,
            None,
            Some(gid),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| format!("lchown {}: {e}", p.display()))?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let mut mask = RO_MASK;
        if meta.is_dir() {
            mask |= EXEC_MASK | 0o2000;
            for e in std::fs::read_dir(&p)
                .map_err(|e| format!("reading {}: {e}", p.display()))?
                .flatten()
            {
                stack.push(e.path());
            }
        }
        std::fs::set_permissions(
            &p,
            std::fs::Permissions::from_mode((meta.mode() & 0o7777) | mask),
        )
        .map_err(|e| format!("chmod {}: {e}", p.display()))?;
    }
    Ok(())
}

/// Whether the current `..data` already holds exactly `payload`.
fn unchanged(current: &Path, payload: &Payload, fs_group: Option<u32>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let mut on_disk = BTreeSet::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(current.join(&rel)) else {
            return false;
        };
        for e in entries.flatten() {
            let rel = rel.join(e.file_name());
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(rel),
                _ => {
                    on_disk.insert(rel.to_string_lossy().into_owned());
                }
            }
        }
    }
    if on_disk.len() != payload.len() {
        return false;
    }
    payload.iter().all(|(path, file)| {
        let p = current.join(path);
        std::fs::symlink_metadata(&p).is_ok_and(|m| {
            m.mode() & 0o7777 == effective_mode(file.mode, fs_group)
                && fs_group.is_none_or(|g| m.gid() == g)
                && file.fs_user.is_none_or(|u| m.uid() == u)
        }) && std::fs::read(&p).is_ok_and(|d| d == file.data)
    })
}

fn new_data_dir(target: &Path) -> io::Result<PathBuf> {
    let now = jiff::Timestamp::now();
    for attempt in 0u32..100 {
        let name = format!(
            "..{}.{:09}{attempt}",
            now.strftime("%Y_%m_%d_%H_%M_%S"),
            now.subsec_nanosecond()
        );
        let dir = target.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
                return Ok(dir);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::from(io::ErrorKind::AlreadyExists))
}

/// Writes `payload` into `target` atomically, owned by `fs_group` when given (see the module
/// docs).
///
/// # Errors
///
/// An invalid path in the payload, or the file system's error, as text.
pub(crate) fn write(target: &Path, payload: &Payload, fs_group: Option<u32>) -> Result<(), String> {
    for path in payload.keys() {
        validate(path)?;
    }
    let io = |what: &str, p: &Path, e: io::Error| format!("{what} {}: {e}", p.display());
    let data_link = target.join(DATA_DIR);
    let old = std::fs::read_link(&data_link).ok();
    if let Some(old) = &old
        && unchanged(&target.join(old), payload, fs_group)
    {
        return Ok(());
    }
    let dir = new_data_dir(target).map_err(|e| io("creating a data directory in", target, e))?;
    for (path, file) in payload {
        let p = dir.join(path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io("mkdir", parent, e))?;
        }
        std::fs::write(&p, &file.data).map_err(|e| io("writing", &p, e))?;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(file.mode))
            .map_err(|e| io("chmod", &p, e))?;
        if let Some(uid) = file.fs_user {
            rustix::fs::chown(&p, Some(rustix::fs::Uid::from_raw(uid)), None)
                .map_err(|e| io("chown", &p, e.into()))?;
        }
    }
    if let Some(gid) = fs_group {
        set_volume_ownership(target, gid)?;
    }
    let tmp = target.join(DATA_DIR_TMP);
    let _ = std::fs::remove_file(&tmp);
    let dir_name = dir.file_name().unwrap_or_default();
    symlink(dir_name, &tmp).map_err(|e| io("symlink", &tmp, e))?;
    std::fs::rename(&tmp, &data_link).map_err(|e| io("renaming", &tmp, e))?;
    // The user-visible names: one link per top-level element, through `..data`.
    let top: BTreeSet<String> = payload
        .keys()
        .filter_map(|p| p.split('/').next().map(str::to_owned))
        .collect();
    for name in &top {
        let link = target.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(Path::new(DATA_DIR).join(name), &link).map_err(|e| io("symlink", &link, e))?;
        }
    }
    // Names the new payload no longer has, and the old data directory.
    if let Ok(entries) = std::fs::read_dir(target) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with("..") && !top.contains(&name) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    if let Some(old) = old {
        let _ = std::fs::remove_dir_all(target.join(old));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::projection::FileProjection;

    fn file(s: &str, mode: u32) -> FileProjection {
        FileProjection {
            data: s.as_bytes().to_vec(),
            mode,
            fs_user: None,
        }
    }

    #[test]
    fn updates_swap_the_data_link_and_drop_old_names() {
        let t = &std::env::temp_dir().join(format!("pv-atomic-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(t);
        std::fs::create_dir_all(t).unwrap();
        let mut p = Payload::new();
        p.insert("a".into(), file("1", 0o644));
        p.insert("sub/b".into(), file("2", 0o400));
        write(t, &p, None).unwrap();
        assert_eq!(std::fs::read_to_string(t.join("a")).unwrap(), "1");
        assert_eq!(std::fs::read_to_string(t.join("sub/b")).unwrap(), "2");
        let first = std::fs::read_link(t.join("..data")).unwrap();
        write(t, &p, None).unwrap();
        assert_eq!(std::fs::read_link(t.join("..data")).unwrap(), first);
        let mut q = Payload::new();
        q.insert("a".into(), file("3", 0o644));
        write(t, &q, None).unwrap();
        assert_eq!(std::fs::read_to_string(t.join("a")).unwrap(), "3");
        assert!(std::fs::symlink_metadata(t.join("sub")).is_err());
        assert!(!t.join(first).exists());
        assert!(write(t, &[("../x".to_owned(), file("", 0o644))].into(), None).is_err());
        std::fs::remove_dir_all(t).unwrap();
    }

    /// `SetVolumeOwnership` of a read-only volume: group and `g+r` on files (0400 → 0440,
    /// 0644 stays), `g+rx` and setgid on directories; a rewrite with the same payload and
    /// group writes nothing.
    #[test]
    fn fs_group_owns_the_files_as_the_kubelet_sets_them() {
        use std::os::unix::fs::MetadataExt;
        let t = &std::env::temp_dir().join(format!("pv-atomic-fsg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(t);
        std::fs::create_dir_all(t).unwrap();
        // A group the test may give away files to: its own (root may give any).
        let gid = if rustix::process::geteuid().is_root() {
            4321
        } else {
            rustix::process::getegid().as_raw()
        };
        let mut p = Payload::new();
        p.insert("a".into(), file("1", 0o400));
        p.insert("sub/b".into(), file("2", 0o644));
        write(t, &p, Some(gid)).unwrap();
        let meta = |rel: &str| std::fs::metadata(t.join(rel)).unwrap();
        assert_eq!(meta("a").mode() & 0o7777, 0o440);
        assert_eq!(meta("a").gid(), gid);
        assert_eq!(meta("sub/b").mode() & 0o7777, 0o644);
        assert_eq!(meta("sub").mode() & 0o7777, 0o2755);
        assert_eq!(meta("sub").gid(), gid);
        let first = std::fs::read_link(t.join("..data")).unwrap();
        write(t, &p, Some(gid)).unwrap();
        assert_eq!(std::fs::read_link(t.join("..data")).unwrap(), first);
        std::fs::remove_dir_all(t).unwrap();
    }
}
