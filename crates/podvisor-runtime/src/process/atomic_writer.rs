//! The kubelet's `AtomicWriter` (`pkg/volume/util/atomic_writer.go`): a volume's files are
//! written into a new hidden timestamped directory, `..data` is switched to it with one
//! `rename` of a symbolic link, and each top-level name is a link through `..data`, so a
//! reader sees the old set or the new one, never a mix. The previous directory and the names
//! the new payload no longer has are removed afterwards. A payload equal to what is there
//! writes nothing.

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

/// Whether the current `..data` already holds exactly `payload`.
fn unchanged(current: &Path, payload: &Payload) -> bool {
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
        std::fs::symlink_metadata(&p).is_ok_and(|m| m.mode() & 0o7777 == file.mode)
            && std::fs::read(&p).is_ok_and(|d| d == file.data)
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

/// Writes `payload` into `target` atomically (see the module docs).
///
/// # Errors
///
/// An invalid path in the payload, or the file system's error, as text.
pub(crate) fn write(target: &Path, payload: &Payload) -> Result<(), String> {
    for path in payload.keys() {
        validate(path)?;
    }
    let io = |what: &str, p: &Path, e: io::Error| format!("{what} {}: {e}", p.display());
    let data_link = target.join(DATA_DIR);
    let old = std::fs::read_link(&data_link).ok();
    if let Some(old) = &old
        && unchanged(&target.join(old), payload)
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
        write(t, &p).unwrap();
        assert_eq!(std::fs::read_to_string(t.join("a")).unwrap(), "1");
        assert_eq!(std::fs::read_to_string(t.join("sub/b")).unwrap(), "2");
        let first = std::fs::read_link(t.join("..data")).unwrap();
        write(t, &p).unwrap();
        assert_eq!(std::fs::read_link(t.join("..data")).unwrap(), first);
        let mut q = Payload::new();
        q.insert("a".into(), file("3", 0o644));
        write(t, &q).unwrap();
        assert_eq!(std::fs::read_to_string(t.join("a")).unwrap(), "3");
        assert!(std::fs::symlink_metadata(t.join("sub")).is_err());
        assert!(!t.join(first).exists());
        assert!(write(t, &[("../x".to_owned(), file("", 0o644))].into()).is_err());
        std::fs::remove_dir_all(t).unwrap();
    }
}
