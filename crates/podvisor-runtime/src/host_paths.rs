//! Paths the process runtime created on the host's own filesystems, and their removal with
//! the last pod that uses them.
//!
//! Containers share the host's root: a mount target, its missing parents, a
//! `terminationMessagePath` or a `workingDir` that does not exist is created there (in an
//! image-based runtime it would be created in the container's root filesystem). The shim
//! records each path its containers created, and each such path (recorded by any pod) that
//! they use, in `<state>/host-paths/<pod uid>`; when a pod's sandbox is removed, the paths
//! only it held go, deepest first, each only while it is an empty directory or an empty
//! regular file that no process uses as a mount point or working directory (another
//! podvisor's pods, say). One lock file serialises the records and removals of every pod.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The registry of one state directory.
#[derive(Debug, Clone)]
pub struct HostPaths {
    dir: PathBuf,
}

/// The registry's lock, held while alive.
#[derive(Debug)]
pub struct Locked<'a> {
    registry: &'a HostPaths,
    _file: File,
}

impl HostPaths {
    /// The registry of the state directory `state_dir`.
    pub fn new(state_dir: &Path) -> HostPaths {
        HostPaths {
            dir: state_dir.join("host-paths"),
        }
    }

    /// The registry of the state directory holding the pod directory `pod_dir`
    /// (`<state>/pods/<uid>`).
    pub fn of_pod_dir(pod_dir: &Path) -> Option<HostPaths> {
        Some(HostPaths::new(pod_dir.parent()?.parent()?))
    }

    /// Takes the registry's lock (blocking).
    pub fn lock(&self) -> io::Result<Locked<'_>> {
        use std::os::unix::fs::DirBuilderExt;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join(".lock"))?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)?;
        Ok(Locked {
            registry: self,
            _file: file,
        })
    }

    /// Removes what only pod `uid` held (see the module documentation) and forgets its
    /// record.
    pub fn release(&self, uid: &str) -> io::Result<()> {
        if !self.dir.exists() {
            return Ok(());
        }
        let locked = self.lock()?;
        let own = locked.read(uid);
        if own.is_empty() {
            return Ok(());
        }
        let others = locked.held_by_others(uid);
        let mut candidates: Vec<&PathBuf> = own.difference(&others).collect();
        // Deepest first: a directory is empty only once what was made inside it is gone.
        candidates.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        let in_use = paths_in_use();
        for path in candidates {
            if !in_use.iter().any(|used| used.starts_with(path)) {
                remove_if_empty(path);
            }
        }
        match fs::remove_file(self.dir.join(uid)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

impl Locked<'_> {
    /// Records for pod `uid` the paths its container created and, of the paths it uses
    /// (`targets` and each of their ancestors), those another pod recorded.
    pub fn record(&self, uid: &str, created: &[PathBuf], targets: &[&Path]) -> io::Result<()> {
        let others = self.held_by_others(uid);
        let mut own = self.read(uid);
        let before = own.len();
        own.extend(created.iter().cloned());
        for target in targets {
            for path in target.ancestors() {
                if others.contains(path) {
                    own.insert(path.to_path_buf());
                }
            }
        }
        if own.len() == before {
            return Ok(());
        }
        let mut text = Vec::new();
        for path in &own {
            use std::os::unix::ffi::OsStrExt;
            text.extend_from_slice(path.as_os_str().as_bytes());
            text.push(b'\n');
        }
        let tmp = self.registry.dir.join(format!(".{uid}.tmp"));
        let mut file = File::create(&tmp)?;
        file.write_all(&text)?;
        drop(file);
        fs::rename(tmp, self.registry.dir.join(uid))
    }

    fn read(&self, uid: &str) -> BTreeSet<PathBuf> {
        read_list(&self.registry.dir.join(uid))
    }

    fn held_by_others(&self, uid: &str) -> BTreeSet<PathBuf> {
        fs::read_dir(&self.registry.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                name != uid && !name.to_string_lossy().starts_with('.')
            })
            .flat_map(|e| read_list(&e.path()))
            .collect()
    }
}

fn read_list(path: &Path) -> BTreeSet<PathBuf> {
    use std::os::unix::ffi::OsStringExt;
    fs::read(path)
        .unwrap_or_default()
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| PathBuf::from(std::ffi::OsString::from_vec(l.to_vec())))
        .collect()
}

/// Removes `path` if it is an empty directory or an empty regular file (never following a
/// symbolic link: one planted there stays, and so does its target).
fn remove_if_empty(path: &Path) {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return;
    };
    let result = if meta.is_dir() {
        fs::remove_dir(path)
    } else if meta.is_file() && meta.len() == 0 {
        fs::remove_file(path)
    } else {
        return;
    };
    if let Err(e) = result
        && !matches!(
            e.raw_os_error(),
            Some(libc::ENOTEMPTY | libc::EEXIST | libc::EBUSY | libc::ENOENT)
        )
    {
        tracing::warn!("removing {}: {e}", path.display());
    }
}

/// Every mount point and working directory of every process (in whatever mount namespace):
/// removing one of those would detach another namespace's mount, or pull a directory from
/// under a process.
fn paths_in_use() -> Vec<PathBuf> {
    let mut used = Vec::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return used;
    };
    let mut namespaces = BTreeSet::new();
    for entry in procs.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        if let Ok(cwd) = fs::read_link(format!("/proc/{pid}/cwd")) {
            used.push(cwd);
        }
        // One mount table per mount namespace is enough.
        let Ok(ns) = fs::read_link(format!("/proc/{pid}/ns/mnt")) else {
            continue;
        };
        if !namespaces.insert(ns) {
            continue;
        }
        let Ok(table) = fs::read_to_string(format!("/proc/{pid}/mountinfo")) else {
            continue;
        };
        for line in table.lines() {
            if let Some(point) = line.split(' ').nth(4) {
                used.push(PathBuf::from(crate::cgroup::unescape_mount_path(point)));
            }
        }
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_goes_with_the_last_pod_that_holds_it() {
        let root = std::env::temp_dir().join(format!("pv-host-paths-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let host = root.join("host");
        let made = host.join("made");
        fs::create_dir_all(made.join("inner")).unwrap();
        fs::write(host.join("file"), "").unwrap();
        fs::write(host.join("data"), "kept").unwrap();
        let registry = HostPaths::new(&root.join("state"));
        {
            let locked = registry.lock().unwrap();
            let created = [
                made.clone(),
                made.join("inner"),
                host.join("file"),
                host.join("data"),
            ];
            locked.record("a", &created, &[]).unwrap();
            // Pod b uses what a made below `made/inner/x` (its target).
            locked
                .record("b", &[], &[&made.join("inner").join("x")])
                .unwrap();
        }
        registry.release("a").unwrap();
        // b still holds made and made/inner; a's empty file went, a file with data stayed.
        assert!(made.join("inner").is_dir());
        assert!(!host.join("file").exists());
        assert!(host.join("data").exists());
        registry.release("b").unwrap();
        assert!(!made.exists());
        assert!(host.exists(), "not made by a pod");
        let _ = fs::remove_dir_all(&root);
    }
}
